// Element-wise activations: finite-difference gradients, PyTorch parity
// (tests/golden/activations.json), tails and shape errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/activations.hpp"

using namespace seqlab;
using seqlab::test::kBwdAtol;
using seqlab::test::kBwdRtol;
using seqlab::test::kFwdAtol;
using seqlab::test::kFwdRtol;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using seqlab::test::check_gradients;
using seqlab::test::compare_close;
using seqlab::test::Fixture;
using seqlab::test::Probe;

namespace {

struct Act {
  std::string name;
  std::function<Tensor3(const Tensor3&)> forward;
  // dL/dx from x, y = forward(x) and dy (each backward takes what its API asks: x or y).
  std::function<Tensor3(const Tensor3& x, const Tensor3& y, const Tensor3& dy)> backward;
};

std::vector<Act> activations() {
  return {
      {"relu", [](const Tensor3& x) { return relu(x); },
       [](const Tensor3& x, const Tensor3&, const Tensor3& dy) { return relu_backward(x, dy); }},
      {"gelu", [](const Tensor3& x) { return gelu(x); },
       [](const Tensor3& x, const Tensor3&, const Tensor3& dy) { return gelu_backward(x, dy); }},
      {"tanh", [](const Tensor3& x) { return tanh_(x); },
       [](const Tensor3&, const Tensor3& y, const Tensor3& dy) { return tanh_backward(y, dy); }},
      {"sigmoid", [](const Tensor3& x) { return sigmoid(x); },
       [](const Tensor3&, const Tensor3& y, const Tensor3& dy) { return sigmoid_backward(y, dy); }},
  };
}
}  // namespace

TEST_CASE("Activation gradients match finite differences", "[nn][activations][gradcheck]") {
  for (const auto& act : activations()) {
    INFO("activation " << act.name);
    Rng rng(21);
    Tensor3 x({2, 3, 4});
    rng.fill_uniform(x, -3, 3);
    // Keep every input at least 0.1 from relu's kink at 0 (the probe step is 0.01).
    for (auto& v : x)
      if (std::abs(v) < 0.1f) v = v < 0 ? v - 0.1f : v + 0.1f;
    Tensor3 dx = xt::zeros<float>(x.shape());
    auto forward = [&] {
      const Tensor3 y = act.forward(x);
      return std::vector<float>(y.begin(), y.end());
    };
    auto backward = [&](const std::vector<float>& w) {
      Tensor3 dy(x.shape());
      std::copy(w.begin(), w.end(), dy.begin());
      const Tensor3 y = act.forward(x);
      const Tensor3 g = act.backward(x, y, dy);
      std::copy(g.begin(), g.end(), dx.begin());
    };
    const auto res = check_gradients(forward, backward, {Probe{"x", x.data(), dx.data(), x.size()}});
    INFO("worst: " << res.worst << "\n" << res.report);
    REQUIRE(res.ok);
  }
}

TEST_CASE("Activations match PyTorch", "[nn][activations][golden]") {
  const Fixture fx("activations.json");
  const Tensor2 x = fx.tensor("x");
  const Tensor2 dy = fx.tensor("dy");
  struct Case {
    std::string name;
    Tensor2 y, dx;
  };
  std::vector<Case> cases;
  {
    const Tensor2 y = relu(x);
    cases.push_back({"relu", y, relu_backward(x, dy)});
  }
  {
    const Tensor2 y = gelu(x);
    cases.push_back({"gelu", y, gelu_backward(x, dy)});
  }
  {
    const Tensor2 y = tanh_(x);
    cases.push_back({"tanh", y, tanh_backward(y, dy)});
  }
  {
    const Tensor2 y = sigmoid(x);
    cases.push_back({"sigmoid", y, sigmoid_backward(y, dy)});
  }
  for (const auto& c : cases) {
    std::string msg = compare_close(c.y, fx.tensor_f64(c.name + ".y"), kFwdRtol, kFwdAtol);
    INFO(c.name << ".y: " << msg);
    CHECK(msg.empty());
    msg = compare_close(c.dx, fx.tensor_f64(c.name + ".x.grad"), kBwdRtol, kBwdAtol);
    INFO(c.name << ".x.grad: " << msg);
    CHECK(msg.empty());
  }
}

TEST_CASE("Activation tails are finite and accurate", "[nn][activations]") {
  const Tensor1 x = {-100.0f, -10.0f, -5.0f, 0.0f, 5.0f, 100.0f};
  const Tensor1 s = sigmoid(x);
  const Tensor1 t = tanh_(x);
  const Tensor1 g = gelu(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    REQUIRE(std::isfinite(s(i)));
    REQUIRE(std::isfinite(t(i)));
    REQUIRE(std::isfinite(g(i)));
  }
  CHECK(s(0) >= 0.0f);
  CHECK_THAT(s(0), WithinAbs(0.0, 1e-40));
  CHECK(s(5) == 1.0f);
  CHECK(s(3) == 0.5f);
  CHECK(t(0) == -1.0f);
  CHECK(t(5) == 1.0f);
  // gelu(-5) = -5 Φ(-5) = -1.4332578593959696e-06: the erfc form keeps full relative accuracy
  // where ½x(1 + erf(x/√2)) in float loses ~10 % to cancellation.
  CHECK_THAT(g(2), WithinRel(-1.4332578593959696e-06, 1e-5));
  CHECK_THAT(g(1), WithinRel(-7.619853024160527e-23, 1e-4));  // -10 Φ(-10)
  CHECK_THAT(g(4), WithinRel(4.999998566742141, 1e-6));  // 5 Φ(5)
  CHECK(g(5) == 100.0f);
  // PyTorch: relu's gradient at exactly 0 is 0.
  const Tensor1 zero = {0.0f}, one = {1.0f};
  CHECK(relu_backward(zero, one)(0) == 0.0f);
}

TEST_CASE("Activations work for every rank", "[nn][activations]") {
  const Tensor1 a = {-1.0f, 2.0f};
  CHECK((relu(a) == Tensor1{0.0f, 2.0f}));
  Tensor2 b = {{-1.0f, 2.0f}};
  CHECK((relu(b) == Tensor2{{0.0f, 2.0f}}));
  Tensor4 d = xt::zeros<float>({1, 2, 1, 2});
  const Tensor4 sd = sigmoid(d);
  REQUIRE(sd.shape() == d.shape());
  for (float v : sd) CHECK(v == 0.5f);
  const Tensor4 gd = sigmoid_backward(sd, Tensor4(xt::ones<float>({1, 2, 1, 2})));
  for (float v : gd) CHECK(v == 0.25f);
}

TEST_CASE("Activation backward rejects mismatched shapes", "[nn][activations][errors]") {
  const Tensor2 x = xt::zeros<float>({2, 3});
  const Tensor2 dy = xt::zeros<float>({3, 2});
  CHECK_THROWS_AS(relu_backward(x, dy), ShapeError);
  CHECK_THROWS_AS(gelu_backward(x, dy), ShapeError);
  CHECK_THROWS_AS(tanh_backward(x, dy), ShapeError);
  CHECK_THROWS_AS(sigmoid_backward(x, dy), ShapeError);
  CHECK_THROWS_WITH(gelu_backward(x, dy), Catch::Matchers::Contains("gelu_backward") &&
                                              Catch::Matchers::Contains("[3, 2]"));
}

// Linear: init, finite-difference gradients, PyTorch parity (tests/golden/linear.json), errors.
#include <catch2/catch.hpp>
#include "checks.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/nn/linear.hpp"

using namespace seqlab;
using seqlab::test::flat;
using seqlab::test::kBwdAtol;
using seqlab::test::kBwdRtol;
using seqlab::test::kFwdAtol;
using seqlab::test::kFwdRtol;
using seqlab::test::check_gradients;
using seqlab::test::compare_close;
using seqlab::test::Fixture;
using seqlab::test::Probe;

namespace {
using seqlab::test::copy_into;

}  // namespace

TEST_CASE("Linear init is U of plus minus 1 over sqrt in and reproducible", "[nn][linear]") {
  Rng rng(3);
  Linear lin(64, 48, rng);
  REQUIRE(lin.weight.value.shape() == std::vector<std::size_t>{48, 64});
  REQUIRE(lin.bias.value.shape() == std::vector<std::size_t>{48});
  const double bound = 1.0 / 8.0;
  double s = 0, s2 = 0, mx = 0;
  for (float w : lin.weight.value) {
    REQUIRE(std::abs(w) <= bound);
    s += w;
    s2 += double(w) * w;
    mx = std::max(mx, double(std::abs(w)));
  }
  const double n = lin.weight.value.size();
  CHECK(std::abs(s / n) < 0.005);
  CHECK(std::abs(s2 / n - bound * bound / 3) < 0.1 * bound * bound / 3);  // variance of U(-b, b)
  CHECK(mx > 0.95 * bound);
  for (float b : lin.bias.value) REQUIRE(std::abs(b) <= bound);
  CHECK(xt::amax(xt::abs(lin.bias.value))() > 0.5 * bound);
  for (float g : lin.weight.grad) REQUIRE(g == 0.0f);

  Rng again(3);
  Linear lin2(64, 48, again);
  CHECK((lin2.weight.value == lin.weight.value));
  CHECK((lin2.bias.value == lin.bias.value));
}

TEST_CASE("Linear lists weight and bias under state_dict keys", "[nn][linear]") {
  Rng rng(1);
  Linear lin(4, 3, rng);
  auto np = lin.named_parameters("fc.");
  REQUIRE(np.size() == 2);
  CHECK(np[0].key == "fc.weight");
  CHECK(np[1].key == "fc.bias");
  CHECK(lin.num_parameters() == 15);

  Linear nb(4, 3, rng, false);
  auto np2 = nb.named_parameters();
  REQUIRE(np2.size() == 1);
  CHECK(np2[0].key == "weight");
  CHECK(nb.num_parameters() == 12);
  CHECK_FALSE(nb.has_bias());
}

TEST_CASE("Linear 2-D gradients match finite differences", "[nn][linear][gradcheck]") {
  Rng rng(11);
  Linear lin(5, 4, rng);
  Tensor2 x({6, 5});
  rng.fill_uniform(x, -1, 1);
  Tensor2 dx = xt::zeros<float>({6, 5});
  auto forward = [&] { return flat(lin.forward(x)); };
  auto backward = [&](const std::vector<float>& w) {
    lin.zero_grad();
    lin.forward(x);
    Tensor2 dy({6, 4});
    copy_into(w, dy);
    const Tensor2 g = lin.backward(dy);
    std::copy(g.begin(), g.end(), dx.begin());
  };
  const auto res = check_gradients(
      forward, backward,
      {Probe{"x", x.data(), dx.data(), x.size()},
       Probe{"weight", lin.weight.value.data(), lin.weight.grad.data(), lin.weight.size()},
       Probe{"bias", lin.bias.value.data(), lin.bias.grad.data(), lin.bias.size()}});
  INFO("worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  CHECK(res.checked == 30 + 20 + 4);
}

TEST_CASE("Linear 3-D gradients match finite differences with and without bias", "[nn][linear][gradcheck]") {
  for (bool with_bias : {true, false}) {
    INFO("bias = " << with_bias);
    Rng rng(12);
    Linear lin(3, 4, rng, with_bias);
    Tensor3 x({2, 3, 3});
    rng.fill_uniform(x, -1, 1);
    Tensor3 dx = xt::zeros<float>({2, 3, 3});
    auto forward = [&] { return flat(lin.forward(x)); };
    auto backward = [&](const std::vector<float>& w) {
      lin.zero_grad();
      lin.forward(x);
      Tensor3 dy({2, 3, 4});
      copy_into(w, dy);
      const Tensor3 g = lin.backward(dy);
      std::copy(g.begin(), g.end(), dx.begin());
    };
    std::vector<Probe> probes{Probe{"x", x.data(), dx.data(), x.size()},
                              Probe{"weight", lin.weight.value.data(), lin.weight.grad.data(),
                                    lin.weight.size()}};
    if (with_bias) probes.push_back({"bias", lin.bias.value.data(), lin.bias.grad.data(), 4});
    const auto res = check_gradients(forward, backward, probes);
    INFO("worst: " << res.worst << "\n" << res.report);
    REQUIRE(res.ok);
  }
}

TEST_CASE("Linear forward_borrowed gives forward's output and gradients without copying x", "[nn][linear]") {
  Rng rng(21);
  Linear copied(5, 3, rng);
  Linear borrowed = copied;  // same weights
  Tensor3 x({2, 4, 5}), dy({2, 4, 3});
  rng.fill_uniform(x, -1, 1);
  rng.fill_uniform(dy, -1, 1);
  const Tensor3 y1 = copied.forward(x);
  const Tensor3 y2 = borrowed.forward_borrowed(x);
  CHECK((y1 == y2));
  const Tensor3 dx1 = copied.backward(dy);
  const Tensor3 dx2 = borrowed.backward(dy);
  CHECK((dx1 == dx2));
  CHECK((copied.weight.grad == borrowed.weight.grad));
  CHECK((copied.bias.grad == borrowed.bias.grad));
  CHECK(xt::amax(xt::abs(borrowed.weight.grad))() > 0.0f);
  // The borrowed input is read at backward time: a changed x changes dW (the contract says keep
  // it unchanged; this shows the pointer is the one backward reads).
  borrowed.zero_grad();
  borrowed.forward_borrowed(x);
  x *= 2.0f;
  borrowed.backward(dy);
  CHECK(xt::allclose(borrowed.weight.grad, 2.0f * copied.weight.grad, 1e-5, 1e-6));
  // A later copying forward caches its own copy again.
  Tensor3 x2 = x;
  borrowed.zero_grad();
  borrowed.forward(x2);
  x2.fill(0.0f);
  borrowed.backward(dy);
  CHECK(xt::allclose(borrowed.weight.grad, 2.0f * copied.weight.grad, 1e-5, 1e-6));
  CHECK_THROWS_AS(borrowed.forward_borrowed(Tensor3({2, 4, 4})), ShapeError);
  // A copy never reads the original's borrowed input: after forward_borrowed it has no forward
  // cached; after a copying forward it has its own copy.
  borrowed.forward_borrowed(x);
  Linear copy_of_borrowing = borrowed;
  CHECK_THROWS_AS(copy_of_borrowing.backward(dy), std::logic_error);
  Linear assigned = copied;
  assigned = borrowed;
  CHECK_THROWS_AS(assigned.backward(dy), std::logic_error);
  copied.forward(x);
  Linear copy_of_copying = copied;
  x.fill(7.0f);
  copy_of_copying.zero_grad();
  copied.zero_grad();
  CHECK((copy_of_copying.backward(dy) == copied.backward(dy)));
  CHECK((copy_of_copying.weight.grad == copied.weight.grad));
}

TEST_CASE("Linear backward adds into the parameter gradients", "[nn][linear]") {
  Rng rng(5);
  Linear lin(3, 2, rng);
  Tensor2 x({4, 3}), dy({4, 2});
  rng.fill_uniform(x, -1, 1);
  rng.fill_uniform(dy, -1, 1);
  lin.forward(x);
  lin.backward(dy);
  const xt::xarray<float> gw1 = lin.weight.grad, gb1 = lin.bias.grad;
  lin.forward(x);
  lin.backward(dy);
  CHECK(xt::allclose(lin.weight.grad, 2.0f * gw1, 1e-6, 1e-7));
  CHECK(xt::allclose(lin.bias.grad, 2.0f * gb1, 1e-6, 1e-7));
  CHECK(xt::amax(xt::abs(gw1))() > 0.0f);
}

TEST_CASE("Linear matches PyTorch nn.Linear", "[nn][linear][golden]") {
  const Fixture fx("linear.json");
  Rng rng(0);
  Linear lin(5, 4, rng);
  lin.weight.value = fx.tensor("weight");
  lin.bias.value = fx.tensor("bias");
  const Tensor3 x = fx.tensor("x");   // [2, 3, 5]
  const Tensor3 dy = fx.tensor("dy");  // [2, 3, 4]

  SECTION("3-D input") {
    const Tensor3 y = lin.forward(x);
    std::string msg = compare_close(y, fx.tensor_f64("y"), kFwdRtol, kFwdAtol);
    INFO("y: " << msg);
    REQUIRE(msg.empty());
    const Tensor3 dx = lin.backward(dy);
    msg = compare_close(dx, fx.tensor_f64("x.grad"), kBwdRtol, kBwdAtol);
    INFO("x.grad: " << msg);
    REQUIRE(msg.empty());
  }
  SECTION("2-D input on the flattened rows") {
    const Tensor2 x2 = xt::reshape_view(x, {6, 5});
    const Tensor2 dy2 = xt::reshape_view(dy, {6, 4});
    const Tensor2 y = lin.forward(x2);
    xt::xarray<double> y_ref = fx.tensor_f64("y");
    y_ref.reshape({6, 4});
    std::string msg = compare_close(y, y_ref, kFwdRtol, kFwdAtol);
    INFO("y: " << msg);
    REQUIRE(msg.empty());
    const Tensor2 dx = lin.backward(dy2);
    xt::xarray<double> dx_ref = fx.tensor_f64("x.grad");
    dx_ref.reshape({6, 5});
    msg = compare_close(dx, dx_ref, kBwdRtol, kBwdAtol);
    INFO("x.grad: " << msg);
    REQUIRE(msg.empty());
  }
  std::string msg = compare_close(lin.weight.grad, fx.tensor_f64("weight.grad"), kBwdRtol, kBwdAtol);
  INFO("weight.grad: " << msg);
  REQUIRE(msg.empty());
  msg = compare_close(lin.bias.grad, fx.tensor_f64("bias.grad"), kBwdRtol, kBwdAtol);
  INFO("bias.grad: " << msg);
  REQUIRE(msg.empty());
}

TEST_CASE("Linear rejects wrong shapes and bad arguments", "[nn][linear][errors]") {
  Rng rng(2);
  Linear lin(5, 4, rng);
  CHECK_THROWS_AS(lin.backward(Tensor2(xt::zeros<float>({3, 4}))), std::logic_error);
  CHECK_THROWS_AS(lin.forward(Tensor2(xt::zeros<float>({3, 4}))), ShapeError);
  CHECK_THROWS_WITH(lin.forward(Tensor2(xt::zeros<float>({3, 4}))),
                    Catch::Matchers::Contains("Linear.forward: x") && Catch::Matchers::Contains("[3, 4]"));
  CHECK_THROWS_AS(lin.forward(Tensor3(xt::zeros<float>({2, 3, 6}))), ShapeError);

  lin.forward(Tensor2(xt::zeros<float>({3, 5})));
  CHECK_THROWS_AS(lin.backward(Tensor2(xt::zeros<float>({3, 5}))), ShapeError);  // width
  CHECK_THROWS_AS(lin.backward(Tensor2(xt::zeros<float>({2, 4}))), ShapeError);  // rows
  CHECK_THROWS_AS(lin.backward(Tensor3(xt::zeros<float>({2, 2, 4}))), ShapeError);  // B*T != 3
  CHECK_NOTHROW(lin.backward(Tensor3(xt::zeros<float>({1, 3, 4}))));

  lin.weight.value = xt::zeros<float>({5, 4});  // transposed by mistake
  CHECK_THROWS_AS(lin.forward(Tensor2(xt::zeros<float>({3, 5}))), ShapeError);

  CHECK_THROWS_AS(Linear(0, 4, rng), std::invalid_argument);
  CHECK_THROWS_AS(Linear(4, 0, rng), std::invalid_argument);
}

TEST_CASE("Linear over many rows matches the formula in double at thread budgets 1 2 and 3", "[nn][linear][threads]") {
  // 16000 rows of 116 features: every product has >= kSplitGemmMacs multiply-adds, so the rows are
  // split over the budget. 10 outputs (an output head) run the narrow products
  // (lib/src/nn/narrow_gemm.hpp), 24 OpenBLAS's; each gives the same bits at every budget.
  const int saved = num_threads();
  const std::size_t B = 2, T = 8000, in = 116;
  for (const std::size_t out : {std::size_t{10}, std::size_t{24}}) {
    Rng rng(out);
    Linear lin(in, out, rng);
    Tensor3 x({B, T, in}), dy({B, T, out});
    rng.fill_uniform(x, -1, 1);
    rng.fill_uniform(dy, -1, 1);
    xt::xarray<double> ey = xt::zeros<double>({B, T, out}), edx = xt::zeros<double>({B, T, in});
    xt::xarray<double> edw = xt::zeros<double>({out, in});
    const auto& w = lin.weight.value;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t o = 0; o < out; ++o) {
          double acc = lin.bias.value(o);
          for (std::size_t c = 0; c < in; ++c) {
            acc += double(w(o, c)) * x(b, t, c);
            edx(b, t, c) += double(w(o, c)) * dy(b, t, o);
            edw(o, c) += double(dy(b, t, o)) * x(b, t, c);
          }
          ey(b, t, o) = acc;
        }
    Tensor3 y1, dx1;
    Tensor2 dw1;
    for (const int budget : {1, 2, 3}) {
      INFO("out " << out << ", thread budget " << budget);
      set_num_threads(budget);
      lin.zero_grad();
      const Tensor3 y = lin.forward(x);
      const Tensor3 dx = lin.backward(dy);
      seqlab::test::require_close("y", y, ey, kFwdRtol, kFwdAtol);
      seqlab::test::require_close("x.grad", dx, edx, kBwdRtol, kBwdAtol);
      // sums of 16000 terms of size up to 1: float rounding ~1e-7 of Σ|term| (about 4000)
      seqlab::test::require_close("weight.grad", lin.weight.grad, edw, kBwdRtol, 1e-3);
      if (budget == 1) {
        y1 = y;
        dx1 = dx;
        dw1 = lin.weight.grad;
      } else {
        CHECK(std::equal(y.begin(), y.end(), y1.begin(), y1.end()));
        CHECK(std::equal(dx.begin(), dx.end(), dx1.begin(), dx1.end()));
        CHECK(std::equal(lin.weight.grad.begin(), lin.weight.grad.end(), dw1.begin(), dw1.end()));
      }
    }
  }
  set_num_threads(saved);
}

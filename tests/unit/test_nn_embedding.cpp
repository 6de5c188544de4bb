// Embedding: init, finite-difference gradients, PyTorch parity (tests/golden/embedding.json), errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/nn/embedding.hpp"

using namespace seqlab;
using seqlab::test::kBwdAtol;
using seqlab::test::kBwdRtol;
using seqlab::test::kFwdAtol;
using seqlab::test::kFwdRtol;
using Catch::Matchers::Contains;
using seqlab::test::check_gradients;
using seqlab::test::compare_close;
using seqlab::test::Fixture;
using seqlab::test::Probe;

namespace {
}  // namespace

TEST_CASE("Embedding init is standard normal with a zero padding row", "[nn][embedding]") {
  Rng rng(4);
  Embedding emb(200, 50, rng, 7);
  REQUIRE(emb.weight.value.shape() == std::vector<std::size_t>{200, 50});
  double s = 0, s2 = 0;
  for (float w : emb.weight.value) {
    s += w;
    s2 += double(w) * w;
  }
  const double n = emb.weight.value.size();
  CHECK(std::abs(s / n) < 0.04);
  CHECK(std::abs(s2 / n - 1.0) < 0.05);
  for (std::size_t j = 0; j < 50; ++j) REQUIRE(emb.weight.value(7, j) == 0.0f);
  CHECK(emb.weight.value(6, 0) != 0.0f);
  auto np = emb.named_parameters("tok.");
  REQUIRE(np.size() == 1);
  CHECK(np[0].key == "tok.weight");

  Rng r2(4);
  Embedding neg(200, 50, r2, -1);  // PyTorch: -1 means the last row
  REQUIRE(neg.padding_idx().has_value());
  CHECK(*neg.padding_idx() == 199);
  for (std::size_t j = 0; j < 50; ++j) REQUIRE(neg.weight.value(199, j) == 0.0f);
}

TEST_CASE("Embedding gradients match finite differences and skip the padding row", "[nn][embedding][gradcheck]") {
  const std::size_t V = 6, D = 3, pad = 5;
  Rng rng(8);
  Embedding emb(V, D, rng, static_cast<std::int32_t>(pad));
  IndexTensor2 ids = {{1, 5, 3, 1}, {0, 1, 5, 4}};  // repeats and the padding id
  auto forward = [&] {
    const Tensor3 y = emb.forward(ids);
    return std::vector<float>(y.begin(), y.end());
  };
  auto backward = [&](const std::vector<float>& w) {
    emb.zero_grad();
    emb.forward(ids);
    Tensor3 dy({2, 4, D});
    std::copy(w.begin(), w.end(), dy.begin());
    emb.backward(dy);
  };
  // Rows 0..4 only: the padding row's output does depend on its value (as in PyTorch) but is
  // deliberately given no gradient; checked exactly below.
  const auto res = check_gradients(
      forward, backward, {Probe{"weight[0:5]", emb.weight.value.data(), emb.weight.grad.data(), pad * D}});
  INFO("worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  for (std::size_t j = 0; j < D; ++j) {
    CHECK(emb.weight.grad(pad, j) == 0.0f);
    CHECK(emb.weight.grad(2, j) == 0.0f);  // id 2 never occurs
  }
}

TEST_CASE("Embedding backward sums repeated ids and adds across calls", "[nn][embedding]") {
  Rng rng(1);
  Embedding emb(4, 2, rng);
  IndexTensor2 ids = {{3, 3, 3}};
  const Tensor3 dy = xt::ones<float>({1, 3, 2});
  emb.forward(ids);
  emb.backward(dy);
  CHECK(emb.weight.grad(3, 0) == 3.0f);
  CHECK(emb.weight.grad(3, 1) == 3.0f);
  emb.backward(dy);
  CHECK(emb.weight.grad(3, 0) == 6.0f);
  CHECK(emb.weight.grad(0, 0) == 0.0f);
}

TEST_CASE("Embedding matches PyTorch nn.Embedding with padding_idx", "[nn][embedding][golden]") {
  const Fixture fx("embedding.json");
  const int pad = fx.meta().at("padding_idx").get<int>();
  Rng rng(0);
  Embedding emb(7, 4, rng, pad);
  emb.weight.value = fx.tensor("weight");  // padding row non-zero on purpose
  const IndexTensor2 ids = xt::cast<std::int32_t>(fx.tensor_f64("ids"));
  const Tensor3 y = emb.forward(ids);
  std::string msg = compare_close(y, fx.tensor_f64("y"), kFwdRtol, kFwdAtol);
  INFO("y: " << msg);
  REQUIRE(msg.empty());
  emb.backward(Tensor3(fx.tensor("dy")));
  msg = compare_close(emb.weight.grad, fx.tensor_f64("weight.grad"), kBwdRtol, kBwdAtol);
  INFO("weight.grad: " << msg);
  REQUIRE(msg.empty());
}

TEST_CASE("Embedding rejects out of range ids and wrong shapes", "[nn][embedding][errors]") {
  Rng rng(2);
  Embedding emb(7, 4, rng);
  CHECK_THROWS_AS(emb.backward(Tensor3(xt::zeros<float>({1, 2, 4}))), std::logic_error);
  CHECK_THROWS_AS(emb.forward(IndexTensor2{{0, 17}}), std::out_of_range);
  CHECK_THROWS_WITH(emb.forward(IndexTensor2{{0, 17}}), Contains("id 17") && Contains("[0, 1]"));
  CHECK_THROWS_WITH(emb.forward(IndexTensor2{{-1, 2}}), Contains("id -1"));
  CHECK_THROWS_WITH(emb.forward(IndexTensor2{{7}}), Contains("id 7") && Contains("[0, 7)"));
  CHECK_NOTHROW(emb.forward(IndexTensor2{{6, 0}}));

  CHECK_THROWS_AS(emb.backward(Tensor3(xt::zeros<float>({1, 2, 3}))), ShapeError);  // D
  CHECK_THROWS_AS(emb.backward(Tensor3(xt::zeros<float>({2, 1, 4}))), ShapeError);  // B, T
  CHECK_NOTHROW(emb.backward(Tensor3(xt::zeros<float>({1, 2, 4}))));

  emb.weight.value = xt::zeros<float>({4, 7});
  CHECK_THROWS_AS(emb.forward(IndexTensor2{{0}}), ShapeError);

  CHECK_THROWS_AS(Embedding(7, 4, rng, 7), std::invalid_argument);
  CHECK_THROWS_AS(Embedding(7, 4, rng, -8), std::invalid_argument);
  CHECK_THROWS_AS(Embedding(0, 4, rng), std::invalid_argument);
  CHECK_THROWS_AS(Embedding(7, 0, rng), std::invalid_argument);
}

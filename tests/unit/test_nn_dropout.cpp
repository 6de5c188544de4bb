// Dropout: eval identity, drop fraction and 1/(1-p) scaling, determinism from the seed, frozen
// masks, finite-difference gradients, errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/nn/dropout.hpp"

using namespace seqlab;
using seqlab::test::flat;
using seqlab::test::check_gradients;
using seqlab::test::Probe;

namespace {
Tensor2 random_matrix(std::size_t r, std::size_t c, std::uint64_t seed) {
  Rng rng(seed);
  Tensor2 x({r, c});
  rng.fill_uniform(x, 0.5f, 1.5f);  // no zeros: a zero output means a dropped element
  return x;
}
}  // namespace

TEST_CASE("Dropout in eval mode is the identity and draws nothing", "[nn][dropout]") {
  const Tensor3 x = xt::reshape_view(random_matrix(6, 20, 1), {2, 3, 20});
  Dropout drop(0.5f, 42);
  drop.eval();
  const Tensor3 y = drop.forward(x);
  CHECK((y == x));
  CHECK(drop.last_was_identity());
  const Tensor3 dy = xt::reshape_view(random_matrix(6, 20, 2), {2, 3, 20});
  CHECK((drop.backward(dy) == dy));

  // The eval forward consumed no numbers: the next train mask equals a fresh layer's first mask.
  drop.train();
  const Tensor3 a = drop.forward(x);
  Dropout fresh(0.5f, 42);
  const Tensor3 b = fresh.forward(x);
  CHECK((a == b));
  CHECK_FALSE((a == x));
}

TEST_CASE("Dropout with p 0 in train mode is the identity", "[nn][dropout]") {
  const Tensor2 x = random_matrix(10, 10, 3);
  Dropout drop(0.0f, 1);
  CHECK((drop.forward(x) == x));
  CHECK(drop.last_was_identity());
}

TEST_CASE("Dropout zeroes a fraction p and scales the rest by 1 over 1 minus p", "[nn][dropout]") {
  for (float p : {0.1f, 0.3f, 0.75f}) {
    INFO("p = " << p);
    const Tensor2 x = random_matrix(200, 500, 4);  // 100000 elements
    Dropout drop(p, 7);
    const Tensor2 y = drop.forward(x);
    const float scale = 1.0f / (1.0f - p);
    std::size_t zeros = 0;
    double sum_x = 0, sum_y = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float xi = x.data()[i], yi = y.data()[i];
      if (yi == 0.0f) {
        ++zeros;
      } else {
        REQUIRE(yi == xi * scale);
      }
      sum_x += xi;
      sum_y += yi;
    }
    const double n = static_cast<double>(x.size());
    const double frac = zeros / n, se = std::sqrt(p * (1 - p) / n);
    CHECK(std::abs(frac - p) < 5 * se);  // binomial: 5 standard errors
    // Inverted dropout keeps the expectation: E[y] = E[x] (relative error ~ se/(1-p)).
    CHECK(std::abs(sum_y / sum_x - 1.0) < 5 * se / (1 - p) + 1e-3);
    REQUIRE(drop.mask().size() == x.size());
  }
}

TEST_CASE("Dropout masks are deterministic from the seed and fresh on every forward", "[nn][dropout]") {
  const Tensor2 x = random_matrix(8, 50, 5);
  Dropout a(0.4f, 123), b(0.4f, 123), c(0.4f, 124);
  const Tensor2 a1 = a.forward(x), a2 = a.forward(x);
  const Tensor2 b1 = b.forward(x), b2 = b.forward(x);
  CHECK((a1 == b1));
  CHECK((a2 == b2));
  CHECK_FALSE((a1 == a2));            // the stream moves on
  CHECK_FALSE((c.forward(x) == a1));  // another seed, another mask
}

TEST_CASE("Dropout forward on a tensor given up works in place and equals the copying forward", "[nn][dropout]") {
  const Tensor2 x = random_matrix(6, 40, 8);
  Dropout copying(0.3f, 77), moving(0.3f, 77);
  Tensor2 given = x;
  const float* buffer = given.data();
  const Tensor2 y_copy = copying.forward(x);
  const Tensor2 y_move = moving.forward(std::move(given));
  CHECK((y_copy == y_move));
  CHECK(y_move.data() == buffer);  // masked in place, the same buffer returned
  CHECK(copying.mask() == moving.mask());
  CHECK_FALSE(moving.last_was_identity());
  const Tensor2 dy = random_matrix(6, 40, 9);
  CHECK((copying.backward(dy) == moving.backward(dy)));
  // Eval: x itself comes back, no copy, and backward is still the identity.
  moving.set_training(false);
  Tensor2 again = x;
  const float* again_buffer = again.data();
  const Tensor2 y_eval = moving.forward(std::move(again));
  CHECK(y_eval.data() == again_buffer);
  CHECK((y_eval == x));
  CHECK(moving.last_was_identity());
  CHECK((moving.backward(dy) == dy));
}

TEST_CASE("Dropout backward uses the mask of the last forward", "[nn][dropout]") {
  const Tensor2 x = random_matrix(4, 30, 6);
  const Tensor2 dy = random_matrix(4, 30, 7);
  Dropout drop(0.5f, 9);
  drop.forward(x);
  const Tensor2 y = drop.forward(x);  // the second mask is the one that counts
  const Tensor2 dx = drop.backward(dy);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float m = y.data()[i] / x.data()[i];  // 0 or 2 exactly (x in [0.5, 1.5), scale 2)
    REQUIRE(dx.data()[i] == dy.data()[i] * drop.mask()[i]);
    REQUIRE(std::abs(m - drop.mask()[i]) < 1e-6f);
  }
}

TEST_CASE("Dropout frozen mask is reused and unfrozen masks are fresh", "[nn][dropout]") {
  const Tensor3 x = xt::reshape_view(random_matrix(6, 10, 8), {2, 3, 10});
  Dropout drop(0.3f, 11);
  drop.freeze_mask(true);
  const Tensor3 y1 = drop.forward(x);  // no mask yet: draws one
  const Tensor3 y2 = drop.forward(x);
  CHECK((y1 == y2));
  CHECK(drop.mask_frozen());
  CHECK_THROWS_AS(drop.forward(Tensor3(xt::ones<float>({2, 3, 11}))), ShapeError);
  drop.freeze_mask(false);
  CHECK_FALSE((drop.forward(x) == y1));
}

TEST_CASE("Dropout gradients match finite differences with a frozen mask", "[nn][dropout][gradcheck]") {
  Tensor3 x({2, 5, 4});
  Rng rng(13);
  rng.fill_uniform(x, -1, 1);
  Dropout drop(0.4f, 17);
  drop.freeze_mask(true);
  Tensor3 dx = xt::zeros<float>(x.shape());
  auto forward = [&] { return flat(drop.forward(x)); };
  auto backward = [&](const std::vector<float>& w) {
    drop.forward(x);
    Tensor3 dy(x.shape());
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 g = drop.backward(dy);
    std::copy(g.begin(), g.end(), dx.begin());
  };
  const auto res = check_gradients(forward, backward, {Probe{"x", x.data(), dx.data(), x.size()}});
  INFO("worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  CHECK(res.checked == 40);
  const auto zeros = std::count(drop.mask().begin(), drop.mask().end(), 0.0f);
  CHECK(zeros > 0);   // the check covered dropped and kept elements
  CHECK(zeros < 40);
}

TEST_CASE("Dropout works on every rank", "[nn][dropout]") {
  Dropout drop(0.5f, 3);
  Tensor1 x1 = xt::ones<float>({64});
  Tensor4 x4 = xt::ones<float>({2, 2, 4, 4});
  const Tensor1 y1 = drop.forward(x1);
  CHECK(drop.backward(Tensor1(xt::ones<float>({64}))).shape() == y1.shape());
  const Tensor4 y4 = drop.forward(x4);
  for (float v : y4) REQUIRE((v == 0.0f || v == 2.0f));
  CHECK(xt::sum(y4)() > 0.0f);
}

TEST_CASE("Dropout rejects p outside 0 to 1 and misuse", "[nn][dropout][errors]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_AS(Dropout(1.0f, 0), std::invalid_argument);
  CHECK_THROWS_WITH(Dropout(1.0f, 0), Contains("p = 1") && Contains("[0, 1)"));
  CHECK_THROWS_AS(Dropout(-0.1f, 0), std::invalid_argument);
  CHECK_THROWS_AS(Dropout(1.5f, 0), std::invalid_argument);
  CHECK_THROWS_AS(Dropout(std::numeric_limits<float>::quiet_NaN(), 0), std::invalid_argument);
  CHECK_NOTHROW(Dropout(0.999f, 0));

  Dropout drop(0.2f, 1);
  CHECK_THROWS_AS(drop.backward(Tensor2(xt::ones<float>({2, 2}))), std::logic_error);
  drop.forward(Tensor2(xt::ones<float>({2, 3})));
  CHECK_THROWS_AS(drop.backward(Tensor2(xt::ones<float>({3, 2}))), ShapeError);
  CHECK_THROWS_AS(drop.backward(Tensor3(xt::ones<float>({1, 2, 3}))), ShapeError);
  CHECK(drop.named_parameters().empty());
}

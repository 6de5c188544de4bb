// Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "seqlab/train/clip.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;

namespace {
Parameter vec(const char* name, std::vector<float> g) {
  Parameter p(name, {g.size()});
  for (std::size_t i = 0; i < g.size(); ++i) p.grad(i) = g[i];
  return p;
}
}  // namespace

TEST_CASE("clip_grad_norm scales by the global norm not per tensor", "[train][clip][field]") {
  // ‖(3, 0, 0, 4)‖ = 5, max 1: every grad × 1/(5 + 1e-6) → (0.6, 0) and (0, 0.8).
  // Per-tensor clipping would give (1, 0) and (0, 1).
  Parameter g1 = vec("g1", {3, 0}), g2 = vec("g2", {0, 4});
  const double norm = clip_grad_norm({&g1, &g2}, 1.0);
  CHECK_THAT(norm, WithinAbs(5.0, 1e-12));
  CHECK_THAT(g1.grad(0), WithinAbs(0.6, 1e-6));
  CHECK_THAT(g1.grad(1), WithinAbs(0.0, 0.0));
  CHECK_THAT(g2.grad(0), WithinAbs(0.0, 0.0));
  CHECK_THAT(g2.grad(1), WithinAbs(0.8, 1e-6));
  CHECK_THAT(global_grad_norm({&g1, &g2}), WithinAbs(1.0, 1e-5));
}

TEST_CASE("clip_grad_norm leaves gradients below the max unchanged", "[train][clip][field]") {
  Parameter g1 = vec("g1", {3, 0}), g2 = vec("g2", {0, 4});
  CHECK_THAT(clip_grad_norm({&g1, &g2}, 10.0), WithinAbs(5.0, 1e-12));
  CHECK(g1.grad(0) == 3.0f);
  CHECK(g2.grad(1) == 4.0f);
  // Exactly at the max: coefficient 5/(5 + 1e-6) < 1, so PyTorch scales by it (a hair).
  clip_grad_norm({&g1, &g2}, 5.0);
  CHECK(g1.grad(0) < 3.0f);
  CHECK_THAT(g1.grad(0), WithinAbs(3.0, 1e-5));
}

TEST_CASE("global_grad_norm sums over every parameter in double", "[train][clip]") {
  Parameter a("a", {2, 3});
  a.grad = xt::ones<float>({2, 3});
  Parameter b = vec("b", {2, -2, 1});
  CHECK_THAT(global_grad_norm({&a, &b}), WithinAbs(std::sqrt(6.0 + 9.0), 1e-12));
  CHECK(global_grad_norm({}) == 0.0);
  // float overflow of the squares must not happen: 1e30² = 1e60 is fine in double.
  Parameter big = vec("big", {1e30f, 1e30f});
  CHECK_THAT(global_grad_norm({&big}) / 1e30, WithinAbs(std::sqrt(2.0), 1e-6));
}

TEST_CASE("clip_grad_norm returns a NaN or Inf norm and does not clip", "[train][clip]") {
  Parameter a = vec("a", {3, std::numeric_limits<float>::quiet_NaN()});
  Parameter b = vec("b", {4});
  CHECK(std::isnan(clip_grad_norm({&a, &b}, 1.0)));
  CHECK(a.grad(0) == 3.0f);
  CHECK(b.grad(0) == 4.0f);
  Parameter c = vec("c", {3, -std::numeric_limits<float>::infinity()});
  const double n = clip_grad_norm({&c, &b}, 1.0);
  CHECK(std::isinf(n));
  CHECK(n > 0);
  CHECK(c.grad(0) == 3.0f);
  CHECK(b.grad(0) == 4.0f);
}

TEST_CASE("clip_grad_norm rejects a negative or NaN max_norm", "[train][clip][errors]") {
  Parameter a = vec("a", {3});
  CHECK_THROWS_WITH(clip_grad_norm({&a}, -1.0), Catch::Contains("max_norm = -1"));
  CHECK_THROWS_WITH(clip_grad_norm({&a}, std::nan("")), Catch::Contains("max_norm = nan"));
  CHECK(a.grad(0) == 3.0f);
  CHECK_THROWS_WITH(global_grad_norm({&a, nullptr}), Catch::Contains("params[1]"));
  // max_norm = 0 zeroes the gradients, as PyTorch.
  clip_grad_norm({&a}, 0.0);
  CHECK(a.grad(0) == 0.0f);
}

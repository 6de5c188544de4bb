// Learning-rate schedules (formulas and step convention in seqlab/train/schedule.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "seqlab/train/schedule.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {
const double kPi = std::acos(-1.0);
}

TEST_CASE("constant schedule with and without warm-up", "[train][schedule]") {
  LrSchedule s;
  s.base_lr = 0.01f;
  CHECK(s.lr_at(0) == 0.01f);
  CHECK(s.lr_at(100000) == 0.01f);
  s.warmup_steps = 4;
  CHECK_THAT(s.lr_at(0), WithinRel(0.0025f, 1e-6f));  // base/warmup
  CHECK_THAT(s.lr_at(1), WithinRel(0.005f, 1e-6f));
  CHECK(s.lr_at(3) == 0.01f);                         // end of warm-up
  CHECK(s.lr_at(4) == 0.01f);
}

TEST_CASE("cosine schedule at start end of warm-up midway and end", "[train][schedule]") {
  // W = 10, N = 109: the decay has T_max = N − W + 1 = 100 (T_cur = t − W, t = step + 1).
  LrSchedule s{"cosine", 0.1f, 10, 109, 0.01f};
  CHECK_THAT(s.lr_at(0), WithinRel(0.01f, 1e-6f));   // 0.1·1/10
  CHECK_THAT(s.lr_at(4), WithinRel(0.05f, 1e-6f));
  CHECK_THAT(s.lr_at(9), WithinRel(0.1f, 1e-6f));    // t = W: base_lr (T_cur = 0)
  // Midway of the decay: T_cur = 50 of T_max = 100 → cos(π/2) = 0 → (base + min)/2.
  CHECK_THAT(s.lr_at(59), WithinRel(0.055f, 1e-6f));
  // A quarter: cos(π/4).
  CHECK_THAT(s.lr_at(34), WithinRel(0.01 + 0.045 * (1 + std::cos(kPi / 4)), 1e-6));
  // The last update (t = N, T_cur = 99) still decays: above min_lr.
  CHECK_THAT(s.lr_at(108), WithinRel(0.01 + 0.045 * (1 + std::cos(kPi * 99 / 100)), 1e-6));
  CHECK(s.lr_at(108) > 0.01f);
  CHECK(s.lr_at(109) == 0.01f);                       // t = N + 1 (T_cur = T_max): min_lr
  CHECK(s.lr_at(500) == 0.01f);                       // beyond: min_lr
  // Monotone decreasing after warm-up.
  for (int k = 10; k < 110; ++k) REQUIRE(s.lr_at(k) <= s.lr_at(k - 1));
  // No warm-up: step k of N = 4 has T_cur = k + 1 of T_max = 5 (schedule.hpp's example).
  LrSchedule c{"cosine", 1.0f, 0, 4, 0.0f};
  CHECK_THAT(c.lr_at(0), WithinAbs(0.5 * (1 + std::cos(kPi / 5)), 1e-6));
  CHECK_THAT(c.lr_at(1), WithinAbs(0.5 * (1 + std::cos(2 * kPi / 5)), 1e-6));
  CHECK_THAT(c.lr_at(3), WithinAbs(0.5 * (1 + std::cos(4 * kPi / 5)), 1e-6));
  CHECK_THAT(c.lr_at(3), WithinAbs(0.0955, 1e-4));
  CHECK(c.lr_at(4) == 0.0f);                          // after the planned updates
  // total_steps == warmup_steps: warm-up, then min_lr.
  LrSchedule w{"cosine", 1.0f, 2, 2, 0.1f};
  CHECK_THAT(w.lr_at(1), WithinAbs(1.0, 0.0));
  CHECK_THAT(w.lr_at(2), WithinAbs(0.1, 1e-7));
}

TEST_CASE("cosine with min_lr 0 moves the parameters at every update of its phase", "[train][schedule]") {
  // Before the fix the last update of every cosine phase used min_lr, a no-op for min_lr = 0.
  for (int W : {0, 1, 3}) {
    for (int N : {W + 1, W + 2, 7, 50}) {
      LrSchedule s{"cosine", 0.3f, W, N, 0.0f};
      INFO("W = " << W << ", N = " << N);
      for (int step = 0; step < N; ++step) REQUIRE(s.lr_at(step) > 0.0f);
      CHECK(s.lr_at(N) == 0.0f);
    }
  }
}

TEST_CASE("cosine matches CosineAnnealingLR with T_max = N - W + 1", "[train][schedule]") {
  // torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max, eta_min) closed form at epoch T_cur:
  // eta_min + (base − eta_min)(1 + cos(π T_cur / T_max)) / 2, here T_cur = step + 1 − W.
  const int W = 5, N = 25;
  const double base = 0.02, eta_min = 0.001;
  LrSchedule s{"cosine", static_cast<float>(base), W, N, static_cast<float>(eta_min)};
  const double t_max = N - W + 1;
  for (int step = W - 1; step < N; ++step) {
    const double t_cur = step + 1 - W;
    const double ref = eta_min + (base - eta_min) * (1 + std::cos(kPi * t_cur / t_max)) / 2;
    INFO("step = " << step);
    CHECK_THAT(s.lr_at(step), WithinRel(ref, 1e-6));
  }
}

TEST_CASE("inverse_sqrt schedule matches Vaswani eq 3", "[train][schedule]") {
  // η·min(t/W, sqrt(W/t)), t = step + 1.
  LrSchedule s{"inverse_sqrt", 0.002f, 100};
  CHECK_THAT(s.lr_at(0), WithinRel(0.002 / 100, 1e-6));
  CHECK_THAT(s.lr_at(49), WithinRel(0.001, 1e-6));
  CHECK_THAT(s.lr_at(99), WithinRel(0.002, 1e-6));   // end of warm-up
  CHECK_THAT(s.lr_at(399), WithinRel(0.001, 1e-6));  // t = 4W: η/2
  CHECK_THAT(s.lr_at(9999), WithinRel(0.0002, 1e-6));  // t = 100W: η/10
  // The same curve as d_model^-0.5·min(t^-0.5, t·W^-1.5) with η = (d_model·W)^-0.5.
  const double d = 512, W = 100;
  LrSchedule v{"inverse_sqrt", static_cast<float>(1 / std::sqrt(d * W)), 100};
  for (int t : {1, 50, 100, 101, 1000}) {
    const double ref = std::pow(d, -0.5) * std::min(std::pow(t, -0.5), t * std::pow(W, -1.5));
    INFO("t = " << t);
    CHECK_THAT(v.lr_at(t - 1), WithinRel(ref, 1e-6));
  }
}

TEST_CASE("schedule validation names the field the value and what is allowed", "[train][schedule][errors]") {
  LrSchedule ok;
  CHECK_NOTHROW(ok.validate());
  auto msg = [](LrSchedule s) {
    try {
      s.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  LrSchedule s;
  s.kind = "linear";
  CHECK_THAT(msg(s), Catch::Contains("kind = \"linear\"") && Catch::Contains("constant, cosine, inverse_sqrt"));
  s = LrSchedule{};
  s.base_lr = 0;
  CHECK_THAT(msg(s), Catch::Contains("base_lr = 0") && Catch::Contains("> 0"));
  s.base_lr = -1;
  CHECK_THAT(msg(s), Catch::Contains("base_lr = -1"));
  s.base_lr = NAN;
  CHECK_THAT(msg(s), Catch::Contains("base_lr = nan"));
  s = LrSchedule{};
  s.warmup_steps = -5;
  CHECK_THAT(msg(s), Catch::Contains("warmup_steps = -5") && Catch::Contains(">= 0"));
  s = LrSchedule{"inverse_sqrt", 0.1f, 0};
  CHECK_THAT(msg(s), Catch::Contains("warmup_steps = 0") && Catch::Contains(">= 1 for kind inverse_sqrt"));
  s = LrSchedule{"cosine", 0.1f, 100, 50};
  CHECK_THAT(msg(s), Catch::Contains("total_steps = 50") && Catch::Contains(">= warmup_steps (100)"));
  s = LrSchedule{"cosine", 0.1f, 0, 0};
  CHECK_THAT(msg(s), Catch::Contains("total_steps = 0") && Catch::Contains(">= 1"));
  s = LrSchedule{"cosine", 0.1f, 0, 10, 0.2f};
  CHECK_THAT(msg(s), Catch::Contains("min_lr = 0.2") && Catch::Contains("[0, base_lr]"));
  s = LrSchedule{"cosine", 0.1f, 0, 10, -0.01f};
  CHECK_THAT(msg(s), Catch::Contains("min_lr = -0.01"));
  // lr_at validates too, and rejects a negative step.
  CHECK_THROWS_AS(s.lr_at(0), std::invalid_argument);
  CHECK_THROWS_WITH(ok.lr_at(-1), Catch::Contains("step = -1"));
}

// Tests of the lag-pair task (tasks/lag_pair.hpp) and duplicate tagging (tasks/duplicate_tag.hpp):
// targets from their definitions, determinism, the documented baselines against Monte Carlo
// estimates of the predictors they describe, and errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/duplicate_tag.hpp"
#include "seqlab/tasks/lag_pair.hpp"
#include "seqlab/tasks/task.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("lag pair targets are the ordered pair of the two lagged tokens", "[tasks][lag_pair]") {
  const LagPairTask task(9, 5, 1, 3);
  CHECK(task.n_classes() == 25);
  CHECK(task.scored_per_row() == 6);
  Rng rng(3);
  const TokenBatch b = task.sample(4, rng);
  REQUIRE(b.inputs.shape() == std::array<std::size_t, 2>{4, 9});
  REQUIRE(b.targets.shape() == std::array<std::size_t, 2>{4, 9});
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t t = 0; t < 9; ++t) {
      if (t < 3) {
        CHECK(b.targets(r, t) == kIgnoreTarget);
        continue;
      }
      CHECK(b.targets(r, t) == b.inputs(r, t - 1) * 5 + b.inputs(r, t - 3));
    }
  // Lags in the other order give the transposed pair.
  const LagPairTask swapped(9, 5, 3, 1);
  Rng r1(3);
  const TokenBatch s = swapped.sample(4, r1);
  CHECK(bool(s.inputs == b.inputs));
  for (std::size_t t = 3; t < 9; ++t) CHECK(s.targets(0, t) == b.inputs(0, t - 3) * 5 + b.inputs(0, t - 1));
  // Deterministic given the rng state.
  Rng r2(3), r3(4);
  const TokenBatch again = task.sample(4, r2), other = task.sample(4, r3);
  CHECK(bool(again.inputs == b.inputs));
  CHECK(bool(other.inputs != b.inputs));
}

TEST_CASE("lag pair baseline: one lookup leaves the other token uniform", "[tasks][lag_pair]") {
  const LagPairTask task(12, 4, 1, 2);
  CHECK_THAT(task.one_lookup_accuracy(), WithinRel(0.25, 1e-12));
  CHECK_THAT(task.one_lookup_loss(), WithinRel(std::log(4.0), 1e-12));
  // Predictor that knows x_{t-1} and guesses x_{t-2} = 0: about 1/V of the targets right.
  Rng rng(8);
  const TokenBatch b = task.sample(4000, rng);
  std::size_t hit = 0, n = 0;
  for (std::size_t r = 0; r < 4000; ++r)
    for (std::size_t t = 2; t < 12; ++t, ++n) hit += b.targets(r, t) == b.inputs(r, t - 1) * 4 ? 1 : 0;
  CHECK_THAT(static_cast<double>(hit) / n, WithinAbs(0.25, 0.01));
}

TEST_CASE("lag pair rejects bad sizes", "[tasks][lag_pair][errors]") {
  CHECK_THROWS_AS(LagPairTask(1, 4, 1, 2), std::invalid_argument);
  CHECK_THROWS_AS(LagPairTask(8, 1, 1, 2), std::invalid_argument);
  CHECK_THROWS_AS(LagPairTask(8, 46341, 1, 2), std::invalid_argument);
  CHECK_THROWS_AS(LagPairTask(8, 4, 0, 2), std::invalid_argument);
  CHECK_THROWS_AS(LagPairTask(8, 4, 1, 8), std::invalid_argument);
  CHECK_THROWS_AS(LagPairTask(8, 4, 2, 2), std::invalid_argument);
  Rng rng(1);
  CHECK_THROWS_AS(LagPairTask(8, 4, 1, 2).sample(0, rng), std::invalid_argument);
}

TEST_CASE("duplicate tags mark the tokens that occur elsewhere in the row", "[tasks][duplicate_tag]") {
  const DuplicateTagTask task(10, 6);
  Rng rng(5);
  const TokenBatch b = task.sample(20, rng);
  REQUIRE(b.inputs.shape() == std::array<std::size_t, 2>{20, 10});
  std::size_t ones = 0;
  for (std::size_t r = 0; r < 20; ++r)
    for (std::size_t t = 0; t < 10; ++t) {
      bool other = false;
      for (std::size_t s = 0; s < 10; ++s) other = other || (s != t && b.inputs(r, s) == b.inputs(r, t));
      CHECK(b.targets(r, t) == (other ? 1 : 0));
      ones += other ? 1 : 0;
    }
  CHECK(ones > 0);
  CHECK(ones < 200);
  Rng r2(5);
  const TokenBatch again = task.sample(20, r2);
  CHECK(bool(again.inputs == b.inputs));
}

TEST_CASE("duplicate tag baselines match Monte Carlo", "[tasks][duplicate_tag]") {
  const int n = 12, V = 16;
  const DuplicateTagTask task(n, V);
  const double p = 1.0 - std::pow(1.0 - 1.0 / V, n - 1);
  CHECK_THAT(task.duplicate_probability(), WithinRel(p, 1e-12));
  CHECK_THAT(task.prior_accuracy(), WithinRel(std::max(p, 1 - p), 1e-12));
  CHECK_THAT(task.prior_loss(), WithinRel(-p * std::log(p) - (1 - p) * std::log(1 - p), 1e-12));
  Rng rng(21);
  const std::size_t B = 20000;
  const TokenBatch b = task.sample(B, rng);
  std::size_t ones = 0, causal_hits = 0;
  const double miss = 1.0 - 1.0 / V;
  for (std::size_t r = 0; r < B; ++r)
    for (int t = 0; t < n; ++t) {
      ones += static_cast<std::size_t>(b.targets(r, t));
      // The causal predictor: 1 if the token occurred before, else the likelier tag given the
      // n-1-t tokens still to come.
      bool before = false;
      for (int s = 0; s < t; ++s) before = before || b.inputs(r, s) == b.inputs(r, t);
      const double q = 1.0 - std::pow(miss, n - 1 - t);
      const int guess = before ? 1 : (q > 0.5 ? 1 : 0);
      causal_hits += guess == b.targets(r, t) ? 1 : 0;
    }
  CHECK_THAT(static_cast<double>(ones) / (B * n), WithinAbs(p, 0.005));
  CHECK_THAT(static_cast<double>(causal_hits) / (B * n), WithinAbs(task.causal_accuracy(), 0.005));
  CHECK(task.causal_accuracy() > task.prior_accuracy());
  CHECK(task.causal_accuracy() < 1.0);
}

TEST_CASE("duplicate tag and lag pair in the registry", "[tasks][duplicate_tag][lag_pair][registry]") {
  TaskParams p;
  p.set("length", "10");
  p.set("vocab_size", "6");
  const TaskSpec s = make_task("duplicate_tag", p)->spec();
  CHECK(s.output_size == 2);
  CHECK(s.vocab_size == 6);
  CHECK(s.seq_len == 10);
  CHECK(s.baseline_accuracy == Approx(DuplicateTagTask(10, 6).prior_accuracy()));
  CHECK(s.best_accuracy == 1.0);
  const TaskSpec l = make_task("lag_pair")->spec();
  CHECK(l.output_size == 64);
  CHECK(l.vocab_size == 8);
  CHECK(l.baseline_accuracy == Approx(1.0 / 8));
  CHECK(l.optimal_loss == 0.0);
  TaskParams bad;
  bad.set("length", "1");
  CHECK_THROWS(make_task("duplicate_tag", bad));
}

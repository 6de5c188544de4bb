// Tests of seqlab::PasskeyTask (lib/include/seqlab/tasks/passkey.hpp): the layout, the scored
// positions and their distances, determinism, the baseline's formula, the registry entry, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/passkey.hpp"
#include "seqlab/tasks/task.hpp"

using namespace seqlab;

TEST_CASE("passkey rows hide n distinct digits in filler and ask for them at the end", "[tasks][passkey]") {
  const int T = 40, n = 5, F = 5;
  PasskeyTask task(T, n, F);
  CHECK(task.vocab_size() == F + 12);
  Rng rng(3);
  const TokenBatch b = task.sample(64, rng);
  const IndexTensor2 d = task.distances(b);
  std::set<std::size_t> depths;
  for (std::size_t r = 0; r < 64; ++r) {
    std::size_t s = T;
    for (std::size_t t = 0; t < std::size_t(T); ++t)
      if (b.inputs(r, t) == task.key_marker()) {
        REQUIRE(s == std::size_t(T));  // one key marker
        s = t;
      }
    REQUIRE(s <= std::size_t(T - 2 * n - 2));
    depths.insert(s);
    const std::size_t q = T - n - 1;
    REQUIRE(b.inputs(r, q) == task.query_marker());
    std::set<int> digits;
    for (int i = 0; i < n; ++i) {
      const int key = b.inputs(r, s + 1 + i), ans = b.inputs(r, q + 1 + i);
      REQUIRE(key == ans);
      REQUIRE(key >= task.first_digit());
      REQUIRE(key < task.first_digit() + 10);
      digits.insert(key);
    }
    CHECK(digits.size() == std::size_t(n));  // distinct
    // Filler elsewhere: the sentence continues with period F across the key block.
    const std::size_t t0 = s == 0 ? std::size_t(n + 1) : 0;  // a filler position
    const int phase = ((b.inputs(r, t0) - int(t0)) % F + F) % F;
    for (std::size_t t = 0; t < q; ++t)
      if (t < s || t > s + n) REQUIRE(b.inputs(r, t) == (phase + int(t)) % F);
    // Scored: the marker and the answer's first n - 1 digits, each predicting the next token.
    for (std::size_t t = 0; t < std::size_t(T); ++t) {
      if (t >= q && t + 1 < std::size_t(T)) {
        REQUIRE(b.targets(r, t) == b.inputs(r, t + 1));
        REQUIRE(d(r, t) == int(q - (s + 1)));
        REQUIRE(b.inputs(r, t - d(r, t)) == b.targets(r, t));  // the key digit it copies, d back
      } else {
        REQUIRE(b.targets(r, t) == kIgnoreTarget);
        REQUIRE(d(r, t) == 0);
      }
    }
  }
  CHECK(depths.size() > 10);  // depths vary
  Rng r1(9), r2(9);
  const TokenBatch x = task.sample(4, r1), y = task.sample(4, r2);
  CHECK(bool(x.inputs == y.inputs));
  CHECK(bool(x.targets == y.targets));
}

TEST_CASE("passkey baseline guesses among the unused digits", "[tasks][passkey]") {
  PasskeyTask five(20, 5, 3);
  CHECK(five.chance_accuracy() == Approx((1.0 / 10 + 1.0 / 9 + 1.0 / 8 + 1.0 / 7 + 1.0 / 6) / 5));
  CHECK(five.chance_loss() == Approx((std::log(10.0) + std::log(9.0) + std::log(8.0) + std::log(7.0) +
                                      std::log(6.0)) / 5));
  PasskeyTask one(4, 1, 1);
  CHECK(one.chance_accuracy() == Approx(0.1));
  const auto t = make_task("passkey", TaskParams({{"seq_len", "30"}, {"n_digits", "3"}}));
  const TaskSpec s = t->spec();
  CHECK(s.vocab_size == 17);
  CHECK(s.baseline_accuracy == Approx((1.0 / 10 + 1.0 / 9 + 1.0 / 8) / 3));
  CHECK(s.best_accuracy == 1.0);
  Rng rng(1);
  const TaskBatch b = t->sample(3, rng);
  CHECK(b.distances.shape() == b.tokens.shape());
}

TEST_CASE("passkey rejects bad sizes", "[tasks][passkey]") {
  CHECK_THROWS_AS(PasskeyTask(11, 5, 5), std::invalid_argument);  // needs 2n + 2 = 12
  CHECK_NOTHROW(PasskeyTask(12, 5, 5));
  CHECK_THROWS_AS(PasskeyTask(40, 0, 5), std::invalid_argument);
  CHECK_THROWS_AS(PasskeyTask(40, 11, 5), std::invalid_argument);
  CHECK_THROWS_AS(PasskeyTask(40, 5, 0), std::invalid_argument);
  PasskeyTask task(20, 2, 2);
  Rng rng(1);
  CHECK_THROWS_AS(task.sample(0, rng), std::invalid_argument);
}

// Tests of seqlab::ScatteredAssociativeRecall (lib/include/seqlab/tasks/scattered_recall.hpp): the
// layout (pairs and queries in slots, each query after its pair, distinct keys), distances,
// determinism, the key-agnostic baseline against a direct count, the registry entry, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/scattered_recall.hpp"
#include "seqlab/tasks/task.hpp"

using namespace seqlab;

TEST_CASE("scattered recall places pairs and queries anywhere, every query after every pair", "[tasks][mqar_scattered]") {
  const int T = 64, P = 5, Q = 3, K = 12, V = 6;
  ScatteredAssociativeRecall task(T, P, Q, K, V);
  CHECK(task.vocab_size() == 1 + K + V);
  Rng rng(5);
  const TokenBatch b = task.sample(200, rng);
  const IndexTensor2 d = task.distances(b);
  std::set<std::size_t> first_pair_slots, last_query_slots;
  for (std::size_t r = 0; r < 200; ++r) {
    std::map<int, int> value_of;  // key -> value of the pairs seen so far
    std::set<int> queried;
    int pairs = 0, queries = 0;
    std::size_t first_pair = T, last_pair = 0, first_query = T, last_query = 0;
    for (std::size_t t = 0; t < std::size_t(T); t += 2) {
      const int a = b.inputs(r, t), c = b.inputs(r, t + 1);
      if (a == 0) {  // an unused slot
        REQUIRE(c == 0);
        REQUIRE(b.targets(r, t) == kIgnoreTarget);
        continue;
      }
      REQUIRE(a >= 1);
      REQUIRE(a <= K);
      REQUIRE(b.targets(r, t + 1) == kIgnoreTarget);
      if (c != 0) {  // a pair
        REQUIRE(c >= task.first_value());
        REQUIRE(value_of.count(a) == 0);  // distinct keys
        value_of[a] = c;
        ++pairs;
        first_pair = std::min(first_pair, t);
        last_pair = t;
        REQUIRE(b.targets(r, t) == kIgnoreTarget);
      } else {  // a query of an earlier, not yet queried pair
        REQUIRE(value_of.count(a) == 1);
        REQUIRE(queried.insert(a).second);
        REQUIRE(b.targets(r, t) == value_of[a]);
        REQUIRE(d(r, t) >= 2);
        REQUIRE(b.inputs(r, t - d(r, t)) == a);
        REQUIRE(b.inputs(r, t - d(r, t) + 1) == value_of[a]);
        ++queries;
        first_query = std::min(first_query, t);
        last_query = t;
      }
    }
    REQUIRE(pairs == P);
    REQUIRE(queries == Q);
    REQUIRE(last_pair < first_query);
    first_pair_slots.insert(first_pair);
    last_query_slots.insert(last_query);
  }
  CHECK(first_pair_slots.size() > 5);  // pairs are not packed at the start
  CHECK(*last_query_slots.rbegin() > std::size_t(T) / 2);
  Rng r1(2), r2(2);
  CHECK(bool(task.sample(3, r1).inputs == task.sample(3, r2).inputs));
}

TEST_CASE("scattered recall's key-agnostic baseline counts the earlier values", "[tasks][mqar_scattered]") {
  ScatteredAssociativeRecall task(16, 3, 2, 4, 3);  // values 5, 6, 7
  TokenBatch b{IndexTensor2::from_shape({1, 16}), IndexTensor2::from_shape({1, 16})};
  b.inputs.fill(0);
  b.targets.fill(kIgnoreTarget);
  // slots: pair (1, 5), pair (2, 5), query 2 -> 5, pair (3, 6), query 1 -> 5
  const int layout[8][2] = {{1, 5}, {0, 0}, {2, 5}, {2, 0}, {0, 0}, {3, 6}, {1, 0}, {0, 0}};
  for (int s = 0; s < 8; ++s) {
    b.inputs(0, 2 * s) = layout[s][0];
    b.inputs(0, 2 * s + 1) = layout[s][1];
  }
  b.targets(0, 6) = 5;
  b.targets(0, 12) = 5;
  const RecallBaseline base = task.key_agnostic(b);
  CHECK(base.n_scored == 2);
  // query 1: values {5, 5}: most frequent 5, correct; loss −ln(2/2) = 0.
  // query 2: values {5, 5, 6}: 5 again, correct; loss −ln(2/3).
  CHECK(base.accuracy == Approx(1.0));
  CHECK(base.loss == Approx(-std::log(2.0 / 3.0) / 2));
  const IndexTensor2 d = task.distances(b);
  CHECK(d(0, 6) == 2);
  CHECK(d(0, 12) == 12);
  // A tie: the predictor is right half the time.
  b.inputs(0, 5) = 6;  // pair (2, 6): values {5, 6} before the first query, whose target is then 6
  b.targets(0, 6) = 6;
  // second query: values {5, 6, 6} -> 6, wrong.
  CHECK(task.key_agnostic(b).accuracy == Approx((0.5 + 0.0) / 2));
  // The registry's spec reports the baseline on a fixed sample; with one pair it is exact.
  const auto t = make_task("mqar_scattered", TaskParams({{"seq_len", "20"}, {"n_pairs", "1"}, {"n_queries", "1"}}));
  CHECK(t->spec().baseline_accuracy == 1.0);
  CHECK(t->spec().baseline_loss == 0.0);
  // Every query sees all P pairs: in expectation MQAR's key-agnostic level for P pairs (8 pairs,
  // 16 values: E[max count] / 8, tasks/mqar.hpp), here on the fixed sample of 2048 rows.
  const auto t8 = make_task("mqar_scattered", TaskParams(std::map<std::string, std::string>{{"seq_len", "64"}}));
  const double exact = MultiQueryAssociativeRecall(64, 8, 4, 16, 16).key_agnostic_accuracy();
  CHECK_THAT(t8->spec().baseline_accuracy, Catch::Matchers::WithinAbs(exact, 0.015));
}

TEST_CASE("scattered recall rejects bad sizes", "[tasks][mqar_scattered]") {
  CHECK_THROWS_AS(ScatteredAssociativeRecall(15, 4, 4, 8, 8), std::invalid_argument);  // 7 slots < 8
  CHECK_NOTHROW(ScatteredAssociativeRecall(16, 4, 4, 8, 8));
  CHECK_THROWS_AS(ScatteredAssociativeRecall(64, 0, 1, 8, 8), std::invalid_argument);
  CHECK_THROWS_AS(ScatteredAssociativeRecall(64, 2, 3, 8, 8), std::invalid_argument);
  CHECK_THROWS_AS(ScatteredAssociativeRecall(64, 4, 4, 3, 8), std::invalid_argument);
  CHECK_THROWS_AS(ScatteredAssociativeRecall(64, 4, 4, 8, 0), std::invalid_argument);
}

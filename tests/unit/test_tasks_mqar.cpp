#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/mqar.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("mqar has Zoology's layout: pairs then queries", "[tasks][mqar]") {
  // T = 21 (odd: the last position is always blank), P = 4, Q = 3, 6 keys, 5 values.
  const MultiQueryAssociativeRecall task(21, 4, 3, 6, 5);
  CHECK(task.seq_len() == 21);
  CHECK(task.vocab_size() == 12);
  CHECK(task.n_pairs() == 4);
  CHECK(task.n_queries() == 3);
  CHECK(task.first_value() == 7);
  CHECK(task.n_slots() == 6);  // (21 - 8) / 2
  Rng rng(11);
  const TokenBatch b = task.sample(50, rng);
  REQUIRE(b.inputs.shape()[0] == 50);
  REQUIRE(b.inputs.shape()[1] == 21);
  REQUIRE(b.targets.shape()[0] == 50);
  REQUIRE(b.targets.shape()[1] == 21);
  for (std::size_t r = 0; r < 50; ++r) {
    INFO("row " << r);
    std::map<std::int32_t, std::int32_t> kv;
    for (std::size_t i = 0; i < 4; ++i) {
      const std::int32_t k = b.inputs(r, 2 * i), v = b.inputs(r, 2 * i + 1);
      CHECK(k >= 1);
      CHECK(k <= 6);
      CHECK(v >= 7);
      CHECK(v <= 11);
      CHECK(kv.count(k) == 0);  // distinct keys
      kv[k] = v;
      CHECK(b.targets(r, 2 * i) == kIgnoreTarget);
      CHECK(b.targets(r, 2 * i + 1) == kIgnoreTarget);
    }
    int scored = 0;
    std::set<std::int32_t> asked;
    for (std::size_t t = 8; t < 21; ++t) {
      const std::int32_t x = b.inputs(r, t);
      if ((t - 8) % 2 == 1 || t == 20) {
        CHECK(x == 0);  // the slot's second token and the odd tail are blank
        CHECK(b.targets(r, t) == kIgnoreTarget);
      } else if (x == 0) {
        CHECK(b.targets(r, t) == kIgnoreTarget);
      } else {
        // A query: a key of this row, scored with the value paired with it.
        REQUIRE(kv.count(x) == 1);
        CHECK(b.targets(r, t) == kv[x]);
        CHECK(asked.count(x) == 0);  // distinct keys are queried
        asked.insert(x);
        ++scored;
      }
    }
    CHECK(scored == 3);
  }
}

TEST_CASE("mqar is deterministic from the rng state and follows the documented draw order",
          "[tasks][mqar]") {
  const MultiQueryAssociativeRecall task(30, 5, 2, 9, 7);
  Rng a(42), b(42), c(43);
  const TokenBatch x = task.sample(6, a), y = task.sample(6, b), z = task.sample(6, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  CHECK(x.inputs != z.inputs);
  // Replay the file comment's draw order for the first row.
  Rng ref(42);
  std::vector<int> keys(9);
  for (int i = 0; i < 9; ++i) keys[i] = i;
  for (std::size_t i = 0; i < 5; ++i) {
    const std::size_t j = i + ref.uniform_int(std::uint64_t{9 - i});
    std::swap(keys[i], keys[j]);
  }
  std::vector<std::int32_t> vals(5);
  for (std::size_t i = 0; i < 5; ++i) {
    vals[i] = static_cast<std::int32_t>(10 + ref.uniform_int(std::uint64_t{7}));
    CHECK(x.inputs(0, 2 * i) == 1 + keys[i]);
    CHECK(x.inputs(0, 2 * i + 1) == vals[i]);
  }
  std::vector<int> pairs{0, 1, 2, 3, 4};
  for (std::size_t i = 0; i < 2; ++i) std::swap(pairs[i], pairs[i + ref.uniform_int(std::uint64_t{5 - i})]);
  std::vector<int> slots(10);
  for (int s = 0; s < 10; ++s) slots[s] = s;
  for (std::size_t i = 0; i < 2; ++i) std::swap(slots[i], slots[i + ref.uniform_int(std::uint64_t{10 - i})]);
  std::sort(slots.begin(), slots.begin() + 2);
  for (std::size_t j = 0; j < 2; ++j) {
    const std::size_t pos = 10 + 2 * static_cast<std::size_t>(slots[j]);
    CHECK(x.inputs(0, pos) == 1 + keys[pairs[j]]);
    CHECK(x.targets(0, pos) == vals[pairs[j]]);
  }
  // A second batch continues the stream: rows 6..11 of one batch of 12.
  Rng d(42), e(42);
  task.sample(6, d);
  const TokenBatch second = task.sample(6, d);
  const TokenBatch both = task.sample(12, e);
  for (std::size_t r = 0; r < 6; ++r)
    for (std::size_t t = 0; t < 30; ++t) {
      REQUIRE(second.inputs(r, t) == both.inputs(6 + r, t));
      REQUIRE(second.targets(r, t) == both.targets(6 + r, t));
    }
}

TEST_CASE("mqar query slots and values are uniform", "[tasks][mqar]") {
  // One query among 8 slots: each slot holds it with probability 1/8; values uniform over 4.
  const MultiQueryAssociativeRecall task(18, 1, 1, 3, 4);
  Rng rng(7);
  const TokenBatch b = task.sample(8000, rng);
  std::vector<int> slot_count(8, 0), value_count(4, 0);
  for (std::size_t r = 0; r < 8000; ++r) {
    int found = 0;
    for (std::size_t s = 0; s < 8; ++s)
      if (b.inputs(r, 2 + 2 * s) != 0) {
        ++slot_count[s];
        ++found;
      }
    REQUIRE(found == 1);
    ++value_count[static_cast<std::size_t>(b.inputs(r, 1) - task.first_value())];
  }
  for (int s = 0; s < 8; ++s) {
    INFO("slot " << s << " count " << slot_count[s]);
    CHECK(std::abs(slot_count[s] - 1000) < 120);  // sd = 29.6: ~4 sd
  }
  for (int v = 0; v < 4; ++v) {
    INFO("value " << v << " count " << value_count[v]);
    CHECK(std::abs(value_count[v] - 2000) < 160);  // sd = 38.7
  }
}

TEST_CASE("mqar chance accuracy and loss are those of a pair-blind predictor", "[tasks][mqar]") {
  const MultiQueryAssociativeRecall task(40, 8, 8, 16, 10);
  CHECK_THAT(task.chance_accuracy(), WithinRel(0.1, 1e-12));
  CHECK_THAT(task.chance_loss(), WithinRel(std::log(10.0), 1e-12));
  // Uniform logits over the values (others -100) on every position: the cross-entropy over the
  // scored positions is ln(n_values).
  Rng rng(3);
  const TokenBatch b = task.sample(4, rng);
  const std::size_t N = 4 * 40, C = static_cast<std::size_t>(task.vocab_size());
  Tensor2 logits = xt::zeros<float>({N, C});
  IndexTensor1 targets = IndexTensor1::from_shape({N});
  for (std::size_t i = 0; i < N; ++i) {
    targets(i) = b.targets(i / 40, i % 40);
    for (std::size_t c = 0; c < static_cast<std::size_t>(task.first_value()); ++c) logits(i, c) = -100.0f;
  }
  CrossEntropyLoss ce;
  CHECK_THAT(ce.forward(logits, targets), WithinRel(task.chance_loss(), 1e-5));
  CHECK(ce.count() == 32);
  // Exactly n_queries scored positions per row, and the tight layout (T = 2P + 2Q) works.
  const MultiQueryAssociativeRecall tight(8, 2, 2, 2, 3);
  Rng r2(1);
  const TokenBatch t = tight.sample(3, r2);
  for (std::size_t r = 0; r < 3; ++r) {
    CHECK(t.targets(r, 4) != kIgnoreTarget);
    CHECK(t.targets(r, 6) != kIgnoreTarget);
    CHECK(t.inputs(r, 4) != t.inputs(r, 6));
  }
}

TEST_CASE("mqar rejects bad arguments naming them", "[tasks][mqar]") {
  using M = MultiQueryAssociativeRecall;
  CHECK_THROWS_WITH(M(20, 0, 1, 4, 4), Catch::Contains("n_pairs") && Catch::Contains("0"));
  CHECK_THROWS_WITH(M(20, 3, 0, 4, 4), Catch::Contains("n_queries"));
  CHECK_THROWS_WITH(M(20, 3, 4, 4, 4), Catch::Contains("n_queries") && Catch::Contains("4"));
  CHECK_THROWS_WITH(M(20, 3, 2, 2, 4), Catch::Contains("n_keys") && Catch::Contains("2"));
  CHECK_THROWS_WITH(M(20, 3, 2, 4, 0), Catch::Contains("n_values"));
  CHECK_THROWS_WITH(M(9, 3, 2, 4, 4), Catch::Contains("seq_len") && Catch::Contains("10"));
  CHECK_NOTHROW(M(10, 3, 2, 4, 4));
  Rng rng(1);
  CHECK_THROWS_WITH(M(10, 3, 2, 4, 4).sample(0, rng), Catch::Contains("batch"));
}

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/draw_counts.hpp"
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

namespace {

// E[max count] and E[plug-in entropy] of n uniform draws over k categories, exact: the max as a
// fraction by enumerating every count vector (the same constants are in
// tests/plots/test_seqlab_stats.py, so the report's Python and the library agree).
struct DrawCase {
  int n, k;
  double max_count, entropy;
};
const DrawCase kDrawCases[] = {
    {2, 16, 17.0 / 16, 0.6498254817749495},      {4, 16, 1381.0 / 1024, 1.2596590597943813},
    {10, 8, 202656935.0 / 67108864, 1.6600161564138094}, {6, 4, 1443.0 / 512, 1.0807733884431943},
    {5, 5, 1429.0 / 625, 1.1187137434327616},   {3, 2, 9.0 / 4, 0.4773856262211096},
};

TEST_CASE("draw counts: expected maximum and plug-in entropy match exact enumeration", "[tasks][mqar]") {
  for (const DrawCase& c : kDrawCases) {
    INFO("n " << c.n << " k " << c.k);
    CHECK_THAT(expected_max_count(c.n, c.k), WithinRel(c.max_count, 1e-12));
    CHECK_THAT(expected_plugin_entropy(c.n, c.k), WithinRel(c.entropy, 1e-12));
  }
  CHECK(expected_max_count(0, 5) == 0.0);
  CHECK_THAT(expected_max_count(1, 5), WithinRel(1.0, 1e-15));
  CHECK_THAT(expected_max_count(7, 1), WithinRel(7.0, 1e-15));  // one category holds every draw
  CHECK_THAT(expected_plugin_entropy(7, 1), WithinAbs(0.0, 1e-15));
  CHECK_THAT(expected_plugin_entropy(1, 9), WithinAbs(0.0, 1e-15));
  CHECK_THROWS_WITH(expected_max_count(-1, 3), Catch::Contains("n") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(expected_max_count(3, 0), Catch::Contains("k") && Catch::Contains("0"));
  CHECK_THROWS_WITH(expected_plugin_entropy(0, 3), Catch::Contains("n") && Catch::Contains("0"));
}

// The key-agnostic predictor run on the generator's own samples: per row it counts the values of
// the context and answers every query with a most frequent one (ties broken uniformly by its own
// rng), scoring -ln(c_target / P) as its loss. Returns the per-row means (accuracy, loss).
struct RowScores {
  std::vector<double> acc, loss, acc_uniform;
};
RowScores simulate_key_agnostic(const MultiQueryAssociativeRecall& task, std::size_t rows, Rng& data,
                                Rng& ties) {
  RowScores out;
  const TokenBatch b = task.sample(rows, data);
  const std::size_t P = static_cast<std::size_t>(task.n_pairs());
  for (std::size_t r = 0; r < rows; ++r) {
    std::map<std::int32_t, int> count;
    for (std::size_t i = 0; i < P; ++i) ++count[b.inputs(r, 2 * i + 1)];
    int top = 0;
    for (const auto& kv : count) top = std::max(top, kv.second);
    std::vector<std::int32_t> modes, present;
    for (const auto& kv : count) {
      present.push_back(kv.first);
      if (kv.second == top) modes.push_back(kv.first);
    }
    double hit = 0, hit_uniform = 0, loss = 0;
    int scored = 0;
    for (std::size_t t = 0; t < b.targets.shape()[1]; ++t) {
      const std::int32_t y = b.targets(r, t);
      if (y == kIgnoreTarget) continue;
      ++scored;
      const std::int32_t guess = modes[ties.uniform_int(static_cast<std::uint64_t>(modes.size()))];
      const std::int32_t other = present[ties.uniform_int(static_cast<std::uint64_t>(present.size()))];
      hit += guess == y;
      hit_uniform += other == y;
      loss += -std::log(static_cast<double>(count.at(y)) / static_cast<double>(P));
    }
    out.acc.push_back(hit / scored);
    out.acc_uniform.push_back(hit_uniform / scored);
    out.loss.push_back(loss / scored);
  }
  return out;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Standard error of the mean of the per-row values (rows are independent).
double se_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1) / static_cast<double>(v.size()));
}

}  // namespace

TEST_CASE("mqar key-agnostic baseline matches a Monte-Carlo run of the most-frequent-value predictor",
          "[tasks][mqar]") {
  // The committed long_range_recall quick settings (P = 2 and 4 at length 16..64, 16 values), the
  // position_extrapolation one (P = 4, Q = 2), and one with few values (frequent ties).
  struct Setting {
    int T, P, Q, K, V;
  };
  for (const Setting s : {Setting{16, 2, 2, 16, 16}, Setting{64, 4, 4, 16, 16}, Setting{16, 4, 2, 16, 16},
                          Setting{40, 8, 3, 12, 5}}) {
    INFO("T " << s.T << " P " << s.P << " Q " << s.Q << " keys " << s.K << " values " << s.V);
    const MultiQueryAssociativeRecall task(s.T, s.P, s.Q, s.K, s.V);
    CHECK_THAT(task.key_agnostic_accuracy(),
               WithinRel(expected_max_count(s.P, s.V) / s.P, 1e-15));
    Rng data(static_cast<std::uint64_t>(100 + s.P)), ties(7);
    const RowScores sc = simulate_key_agnostic(task, 40000, data, ties);
    // Within 4 standard errors of the Monte-Carlo mean (rows independent).
    CHECK(std::abs(mean_of(sc.acc) - task.key_agnostic_accuracy()) < 4 * se_of(sc.acc));
    CHECK(std::abs(mean_of(sc.loss) - task.key_agnostic_loss()) < 4 * se_of(sc.loss));
    // Far above the context-blind chance level, and (from P = 3 on; at P = 2 the two coincide)
    // above guessing uniformly among the values present, which scores E[1 / distinct values]:
    // the most frequent value is the better guess.
    CHECK(task.key_agnostic_accuracy() > task.chance_accuracy() + 0.1);
    CHECK(task.key_agnostic_loss() < task.chance_loss());
    if (s.P > 2) CHECK(mean_of(sc.acc) - mean_of(sc.acc_uniform) > 4 * se_of(sc.acc));
  }
  // The committed values: P = 2: (1 + 1/16) / 2; P = 4: 1381/4096; the loss at P = 2: (15/16) ln 2.
  CHECK_THAT(MultiQueryAssociativeRecall(16, 2, 2, 16, 16).key_agnostic_accuracy(), WithinRel(0.53125, 1e-14));
  CHECK_THAT(MultiQueryAssociativeRecall(16, 4, 4, 16, 16).key_agnostic_accuracy(),
             WithinRel(1381.0 / 4096, 1e-14));
  CHECK_THAT(MultiQueryAssociativeRecall(16, 2, 2, 16, 16).key_agnostic_loss(),
             WithinRel(15.0 / 16 * std::log(2.0), 1e-14));
  CHECK_THAT(MultiQueryAssociativeRecall(8, 1, 1, 4, 9).key_agnostic_accuracy(), WithinRel(1.0, 1e-15));
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

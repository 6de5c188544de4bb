#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/markov_lm.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("markov lm has the documented table and layout", "[tasks][markov_lm]") {
  const MarkovLanguageTask task(12, 6, 2, 3, 77);
  CHECK(task.seq_len() == 12);
  CHECK(task.scored_per_row() == 10);
  const auto& p = task.probabilities();
  REQUIRE(p.size() == 3);
  CHECK_THAT(p[0], WithinRel(4.0 / 7, 1e-12));
  CHECK_THAT(p[1], WithinRel(2.0 / 7, 1e-12));
  CHECK_THAT(p[2], WithinRel(1.0 / 7, 1e-12));
  // Successors of every context are distinct tokens.
  for (std::size_t c = 0; c < 36; ++c) {
    std::set<int> s;
    for (int j = 0; j < 3; ++j) s.insert(task.successor(c, j));
    CHECK(s.size() == 3);
  }
  CHECK_THROWS_AS(task.successor(36, 0), std::out_of_range);
  CHECK_THROWS_AS(task.successor(0, 3), std::out_of_range);
  Rng rng(8);
  const TokenBatch b = task.sample(40, rng);
  REQUIRE(b.inputs.shape()[0] == 40);
  REQUIRE(b.inputs.shape()[1] == 12);
  REQUIRE(b.targets.shape()[1] == 12);
  for (std::size_t r = 0; r < 40; ++r) {
    CHECK(b.targets(r, 0) == kIgnoreTarget);
    CHECK(b.targets(r, 11) == kIgnoreTarget);
    for (std::size_t t = 1; t < 11; ++t) {
      CHECK(b.targets(r, t) == b.inputs(r, t + 1));
      // x_{t+1} is one of the successors of (x_{t-1}, x_t).
      const std::size_t c = task.context_index(&b.inputs(r, t - 1));
      CHECK(c == static_cast<std::size_t>(b.inputs(r, t - 1) * 6 + b.inputs(r, t)));
      bool ok = false;
      for (int j = 0; j < 3; ++j) ok = ok || task.successor(c, j) == b.inputs(r, t + 1);
      CHECK(ok);
    }
  }
}

TEST_CASE("markov lm is deterministic from the grammar seed and the rng", "[tasks][markov_lm]") {
  const MarkovLanguageTask t1(10, 5, 2, 2, 3), t2(10, 5, 2, 2, 3), t3(10, 5, 2, 2, 4);
  bool same_table = true, other_table = true;
  for (std::size_t c = 0; c < 25; ++c)
    for (int j = 0; j < 2; ++j) {
      same_table = same_table && t1.successor(c, j) == t2.successor(c, j);
      other_table = other_table && t1.successor(c, j) == t3.successor(c, j);
    }
  CHECK(same_table);
  CHECK_FALSE(other_table);
  Rng a(9), b(9), c(10);
  const TokenBatch x = t1.sample(6, a), y = t1.sample(6, b), z = t1.sample(6, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  CHECK(x.inputs != z.inputs);
  // The documented draw order: two uniform tokens, then one uniform_double per token.
  Rng ref(9);
  for (std::size_t r = 0; r < 6; ++r) {
    std::vector<std::int32_t> s;
    for (int t = 0; t < 2; ++t) s.push_back(static_cast<std::int32_t>(ref.uniform_int(std::uint64_t{5})));
    for (int t = 2; t < 10; ++t) {
      const double u = ref.uniform_double();
      const int j = u < 2.0 / 3 ? 0 : 1;
      s.push_back(t1.successor(t1.context_index(&s[static_cast<std::size_t>(t - 2)]), j));
    }
    for (std::size_t t = 0; t < 10; ++t) REQUIRE(x.inputs(r, t) == s[t]);
  }
}

TEST_CASE("markov lm baselines: the Bayes predictor reaches H(p) and p_0", "[tasks][markov_lm]") {
  const MarkovLanguageTask task(30, 8, 2, 4, 12);
  const double H = -(8.0 / 15 * std::log(8.0 / 15) + 4.0 / 15 * std::log(4.0 / 15) +
                     2.0 / 15 * std::log(2.0 / 15) + 1.0 / 15 * std::log(1.0 / 15));
  CHECK_THAT(task.optimal_loss(), WithinRel(H, 1e-12));
  CHECK_THAT(task.bayes_accuracy(), WithinRel(8.0 / 15, 1e-12));
  CHECK_THAT(task.chance_accuracy(), WithinRel(1.0 / 8, 1e-12));
  CHECK_THAT(task.chance_loss(), WithinRel(std::log(8.0), 1e-12));
  // Empirically, with the true table: mean -ln P(target) -> H(p), argmax accuracy -> p_0.
  Rng rng(13);
  const TokenBatch b = task.sample(2000, rng);
  double loss = 0;
  std::size_t hits = 0, n = 0;
  const auto& p = task.probabilities();
  for (std::size_t r = 0; r < 2000; ++r)
    for (std::size_t t = 1; t + 1 < 30; ++t) {
      const std::size_t c = task.context_index(&b.inputs(r, t - 1));
      for (int j = 0; j < 4; ++j)
        if (task.successor(c, j) == b.targets(r, t)) loss -= std::log(p[static_cast<std::size_t>(j)]);
      hits += task.successor(c, 0) == b.targets(r, t);
      ++n;
    }
  CHECK_THAT(loss / n, WithinAbs(task.optimal_loss(), 0.01));
  CHECK_THAT(static_cast<double>(hits) / n, WithinAbs(task.bayes_accuracy(), 0.01));
}

TEST_CASE("markov lm rejects bad sizes naming the argument", "[tasks][markov_lm]") {
  CHECK_THROWS_WITH(MarkovLanguageTask(10, 1, 1, 1, 0), Catch::Contains("vocab_size"));
  CHECK_THROWS_WITH(MarkovLanguageTask(10, 4, 0, 1, 0), Catch::Contains("order"));
  CHECK_THROWS_WITH(MarkovLanguageTask(10, 1024, 3, 1, 0), Catch::Contains("order"));
  CHECK_THROWS_WITH(MarkovLanguageTask(2, 4, 2, 1, 0), Catch::Contains("seq_len"));
  CHECK_THROWS_WITH(MarkovLanguageTask(10, 4, 2, 5, 0), Catch::Contains("branching"));
  CHECK_THROWS_WITH(MarkovLanguageTask(10, 4, 2, 0, 0), Catch::Contains("branching"));
  Rng rng(1);
  CHECK_THROWS_WITH(MarkovLanguageTask(10, 4, 1, 2, 0).sample(0, rng), Catch::Contains("batch"));
}

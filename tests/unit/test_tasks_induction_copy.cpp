#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/induction_copy.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("induction copy repeats a stretch of a distinct prefix", "[tasks][induction_copy]") {
  const InductionCopyTask task(7, 4, 9);
  CHECK(task.seq_len() == 11);
  CHECK(task.scored_per_row() == 3);
  Rng rng(2);
  const TokenBatch b = task.sample(50, rng);
  REQUIRE(b.inputs.shape()[0] == 50);
  REQUIRE(b.inputs.shape()[1] == 11);
  REQUIRE(b.targets.shape()[1] == 11);
  std::set<int> starts;
  for (std::size_t r = 0; r < 50; ++r) {
    INFO("row " << r);
    std::set<int> prefix;
    for (std::size_t t = 0; t < 7; ++t) {
      CHECK(b.inputs(r, t) >= 0);
      CHECK(b.inputs(r, t) < 9);
      prefix.insert(b.inputs(r, t));
    }
    CHECK(prefix.size() == 7);  // distinct
    // The repeat is p_s .. p_{s+3} for one s in [0, 3].
    int s = -1;
    for (int c = 0; c <= 3; ++c)
      if (b.inputs(r, 0 + c) == b.inputs(r, 7)) s = c;
    REQUIRE(s >= 0);
    starts.insert(s);
    for (std::size_t j = 0; j < 4; ++j) CHECK(b.inputs(r, 7 + j) == b.inputs(r, s + j));
    // Targets: the next repeat token at positions 7..9, ignored elsewhere.
    for (std::size_t t = 0; t < 11; ++t) {
      if (t >= 7 && t < 10)
        CHECK(b.targets(r, t) == b.inputs(r, t + 1));
      else
        CHECK(b.targets(r, t) == kIgnoreTarget);
    }
  }
  CHECK(starts.size() == 4);  // every start occurs in 50 rows
}

TEST_CASE("induction copy targets follow the earlier occurrence", "[tasks][induction_copy]") {
  // The rule an induction head implements: find the current token in the prefix, output the
  // token after it. It is right at every scored position.
  const InductionCopyTask task(12, 6, 20);
  Rng rng(4);
  const TokenBatch b = task.sample(20, rng);
  for (std::size_t r = 0; r < 20; ++r)
    for (std::size_t t = 12; t + 1 < 18; ++t) {
      std::size_t prev = 99;
      for (std::size_t u = 0; u < 12; ++u)
        if (b.inputs(r, u) == b.inputs(r, t)) prev = u;
      REQUIRE(prev < 11);
      CHECK(b.targets(r, t) == b.inputs(r, prev + 1));
    }
}

TEST_CASE("induction copy is deterministic with the documented draw order", "[tasks][induction_copy]") {
  const InductionCopyTask task(5, 3, 8);
  Rng a(7), b(7), c(8);
  const TokenBatch x = task.sample(6, a), y = task.sample(6, b), z = task.sample(6, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  CHECK(x.inputs != z.inputs);
  Rng ref(7);
  for (std::size_t r = 0; r < 6; ++r) {
    std::vector<int> ids = {0, 1, 2, 3, 4, 5, 6, 7};
    for (std::size_t i = 0; i < 5; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(ref.uniform_int(std::uint64_t{8 - i}));
      std::swap(ids[i], ids[j]);
      REQUIRE(x.inputs(r, i) == ids[i]);
    }
    const std::size_t s = static_cast<std::size_t>(ref.uniform_int(std::uint64_t{3}));
    REQUIRE(x.inputs(r, 5) == ids[s]);
  }
}

TEST_CASE("induction copy chance is a uniform guess", "[tasks][induction_copy]") {
  const InductionCopyTask task(6, 3, 10);
  CHECK_THAT(task.chance_accuracy(), WithinRel(0.1, 1e-12));
  CHECK_THAT(task.chance_loss(), WithinRel(std::log(10.0), 1e-12));
  // Targets are uniform over the vocabulary (so a context-free guess scores 1/V).
  Rng rng(6);
  const TokenBatch b = task.sample(10000, rng);
  std::vector<int> count(10, 0);
  for (std::size_t r = 0; r < 10000; ++r)
    for (std::size_t t = 6; t < 8; ++t) ++count[static_cast<std::size_t>(b.targets(r, t))];
  for (int c : count) CHECK_THAT(c / 20000.0, WithinAbs(task.chance_accuracy(), 0.01));
}

TEST_CASE("induction copy rejects bad sizes naming the argument", "[tasks][induction_copy]") {
  CHECK_THROWS_WITH(InductionCopyTask(1, 2, 10), Catch::Contains("prefix_len"));
  CHECK_THROWS_WITH(InductionCopyTask(4, 1, 10), Catch::Contains("copy_len"));
  CHECK_THROWS_WITH(InductionCopyTask(4, 5, 10), Catch::Contains("copy_len"));
  CHECK_THROWS_WITH(InductionCopyTask(6, 3, 5), Catch::Contains("vocab_size"));
  Rng rng(1);
  CHECK_THROWS_WITH(InductionCopyTask(4, 2, 4).sample(0, rng), Catch::Contains("batch"));
}

#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/previous_token.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("previous token targets are the inputs shifted by the lag", "[tasks][previous_token]") {
  for (int lag : {1, 3}) {
    INFO("lag " << lag);
    const PreviousTokenTask task(10, 7, lag);
    CHECK(task.seq_len() == 10);
    CHECK(task.vocab_size() == 7);
    CHECK(task.scored_per_row() == 10 - lag);
    Rng rng(5);
    const TokenBatch b = task.sample(6, rng);
    REQUIRE(b.inputs.shape()[0] == 6);
    REQUIRE(b.inputs.shape()[1] == 10);
    REQUIRE(b.targets.shape()[0] == 6);
    REQUIRE(b.targets.shape()[1] == 10);
    for (std::size_t r = 0; r < 6; ++r)
      for (std::size_t t = 0; t < 10; ++t) {
        CHECK(b.inputs(r, t) >= 0);
        CHECK(b.inputs(r, t) < 7);
        if (t < static_cast<std::size_t>(lag))
          CHECK(b.targets(r, t) == kIgnoreTarget);
        else
          CHECK(b.targets(r, t) == b.inputs(r, t - lag));
      }
  }
}

TEST_CASE("previous token is deterministic with the documented draw order", "[tasks][previous_token]") {
  const PreviousTokenTask task(5, 9);
  Rng a(11), b(11), c(12);
  const TokenBatch x = task.sample(4, a), y = task.sample(4, b), z = task.sample(4, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  CHECK(x.inputs != z.inputs);
  Rng ref(11);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t t = 0; t < 5; ++t)
      REQUIRE(x.inputs(r, t) == static_cast<std::int32_t>(ref.uniform_int(std::uint64_t{9})));
}

TEST_CASE("previous token chance is a uniform guess", "[tasks][previous_token]") {
  const PreviousTokenTask task(8, 4);
  CHECK_THAT(task.chance_accuracy(), WithinRel(0.25, 1e-12));
  CHECK_THAT(task.chance_loss(), WithinRel(std::log(4.0), 1e-12));
  // The target is independent of the current token: predicting the current token scores chance.
  Rng rng(3);
  const TokenBatch b = task.sample(5000, rng);
  std::size_t hits = 0, n = 0;
  std::vector<int> count(4, 0);
  for (std::size_t r = 0; r < 5000; ++r)
    for (std::size_t t = 1; t < 8; ++t) {
      hits += b.targets(r, t) == b.inputs(r, t);
      ++count[static_cast<std::size_t>(b.targets(r, t))];
      ++n;
    }
  CHECK_THAT(static_cast<double>(hits) / n, WithinAbs(task.chance_accuracy(), 0.01));
  for (int c : count) CHECK_THAT(static_cast<double>(c) / n, WithinAbs(0.25, 0.01));
}

TEST_CASE("previous token rejects bad sizes naming the argument", "[tasks][previous_token]") {
  CHECK_THROWS_WITH(PreviousTokenTask(1, 4), Catch::Contains("seq_len"));
  CHECK_THROWS_WITH(PreviousTokenTask(4, 1), Catch::Contains("vocab_size"));
  CHECK_THROWS_WITH(PreviousTokenTask(4, 4, 0), Catch::Contains("lag"));
  CHECK_THROWS_WITH(PreviousTokenTask(4, 4, 4), Catch::Contains("lag"));
  Rng rng(1);
  CHECK_THROWS_WITH(PreviousTokenTask(4, 4).sample(0, rng), Catch::Contains("batch"));
}

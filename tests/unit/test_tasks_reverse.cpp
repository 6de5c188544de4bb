#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/reverse.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("reverse targets are the reversed sources", "[tasks][reverse]") {
  const ReverseTask task(5, 6);
  CHECK(task.length() == 5);
  CHECK(task.vocab_size() == 7);
  CHECK(task.separator() == 6);
  Rng rng(1);
  const TransductionBatch p = task.sample(4, rng);
  REQUIRE(p.source.shape()[0] == 4);
  REQUIRE(p.source.shape()[1] == 5);
  REQUIRE(p.target.shape()[0] == 4);
  REQUIRE(p.target.shape()[1] == 5);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t i = 0; i < 5; ++i) {
      CHECK(p.source(r, i) >= 0);
      CHECK(p.source(r, i) < 6);
      CHECK(p.target(r, i) == p.source(r, 4 - i));
    }
}

TEST_CASE("reverse lays out the decoder-only and encoder-decoder inputs", "[tasks][reverse]") {
  const ReverseTask task(4, 5);
  Rng rng(2);
  const TransductionBatch p = task.sample(3, rng);
  const TokenBatch lm = task.prefix_lm(p);
  REQUIRE(lm.inputs.shape()[0] == 3);
  REQUIRE(lm.inputs.shape()[1] == 8);
  REQUIRE(lm.targets.shape()[1] == 8);
  const IndexTensor2 din = task.decoder_input(p);
  REQUIRE(din.shape()[0] == 3);
  REQUIRE(din.shape()[1] == 4);
  for (std::size_t r = 0; r < 3; ++r) {
    for (std::size_t t = 0; t < 4; ++t) {
      CHECK(lm.inputs(r, t) == p.source(r, t));
      CHECK(lm.targets(r, t) == kIgnoreTarget);
      CHECK(lm.targets(r, 4 + t) == p.target(r, t));
    }
    CHECK(lm.inputs(r, 4) == task.separator());
    for (std::size_t i = 0; i < 3; ++i) CHECK(lm.inputs(r, 5 + i) == p.target(r, i));
    // Prefix LM: target position n + i sees exactly the inputs before y_i (y_i itself is not in
    // inputs[0 .. n + i]).
    CHECK(din(r, 0) == task.separator());
    for (std::size_t i = 1; i < 4; ++i) CHECK(din(r, i) == p.target(r, i - 1));
  }
  TransductionBatch bad{IndexTensor2::from_shape({3, 5}), IndexTensor2::from_shape({3, 5})};
  CHECK_THROWS_AS(task.prefix_lm(bad), ShapeError);
  CHECK_THROWS_AS(task.decoder_input(bad), ShapeError);
}

TEST_CASE("reverse is deterministic with the documented draw order", "[tasks][reverse]") {
  const ReverseTask task(6, 10);
  Rng a(3), b(3), c(4);
  const TransductionBatch x = task.sample(5, a), y = task.sample(5, b), z = task.sample(5, c);
  CHECK(x.source == y.source);
  CHECK(x.target == y.target);
  CHECK(x.source != z.source);
  Rng ref(3);
  for (std::size_t r = 0; r < 5; ++r)
    for (std::size_t t = 0; t < 6; ++t)
      REQUIRE(x.source(r, t) == static_cast<std::int32_t>(ref.uniform_int(std::uint64_t{10})));
}

TEST_CASE("reverse chance is a uniform guess over the symbols", "[tasks][reverse]") {
  const ReverseTask task(3, 8);
  CHECK_THAT(task.chance_accuracy(), WithinRel(0.125, 1e-12));
  CHECK_THAT(task.chance_loss(), WithinRel(std::log(8.0), 1e-12));
  Rng rng(5);
  const TransductionBatch p = task.sample(8000, rng);
  std::vector<int> count(8, 0);
  std::size_t same = 0;
  for (std::size_t r = 0; r < 8000; ++r) {
    for (std::size_t i = 0; i < 3; ++i) ++count[static_cast<std::size_t>(p.target(r, i))];
    same += p.target(r, 0) == p.source(r, 0);  // copying instead of reversing: chance
  }
  for (int c : count) CHECK_THAT(c / 24000.0, WithinAbs(0.125, 0.01));
  CHECK_THAT(same / 8000.0, WithinAbs(task.chance_accuracy(), 0.015));
}

TEST_CASE("reverse rejects bad sizes naming the argument", "[tasks][reverse]") {
  CHECK_THROWS_WITH(ReverseTask(0, 4), Catch::Contains("length"));
  CHECK_THROWS_WITH(ReverseTask(3, 1), Catch::Contains("n_symbols"));
  Rng rng(1);
  CHECK_THROWS_WITH(ReverseTask(3, 4).sample(0, rng), Catch::Contains("batch"));
}

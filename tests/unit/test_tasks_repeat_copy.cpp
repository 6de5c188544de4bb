#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/repeat_copy.hpp"

using namespace seqlab;
using Catch::Matchers::WithinRel;

TEST_CASE("repeat copy lays out symbols separator copy and padding", "[tasks][repeat_copy]") {
  const RepeatCopyTask task(5, 12, 6);  // n in [2, 5], real lengths 5..11, width 12
  CHECK(task.n_min() == 2);
  CHECK(task.n_max() == 5);
  CHECK(task.separator() == 7);
  CHECK(task.vocab_size() == 8);
  Rng rng(4);
  const PaddedTokenBatch b = task.sample(40, rng);
  REQUIRE(b.inputs.shape()[0] == 40);
  REQUIRE(b.inputs.shape()[1] == 12);
  REQUIRE(b.targets.shape()[1] == 12);
  REQUIRE(b.padding.shape()[1] == 12);
  REQUIRE(b.lengths.size() == 40);
  std::vector<int> seen_n(6, 0);
  for (std::size_t r = 0; r < 40; ++r) {
    INFO("row " << r);
    const std::size_t len = b.lengths[r];
    REQUIRE(len % 2 == 1);
    const std::size_t n = (len - 1) / 2;
    REQUIRE(n >= 2);
    REQUIRE(n <= 5);
    ++seen_n[n];
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(b.inputs(r, i) >= 1);
      CHECK(b.inputs(r, i) <= 6);
      CHECK(b.inputs(r, n + 1 + i) == b.inputs(r, i));  // the copy
      CHECK(b.targets(r, n + i) == b.inputs(r, i));     // position n + i predicts s_i
      CHECK(b.targets(r, i) == kIgnoreTarget);
    }
    CHECK(b.inputs(r, n) == 7);
    CHECK(b.targets(r, 2 * n) == kIgnoreTarget);
    for (std::size_t t = 0; t < 12; ++t) {
      CHECK(b.padding(r, t) == (t >= len ? 1 : 0));
      if (t >= len) {
        CHECK(b.inputs(r, t) == 0);
        CHECK(b.targets(r, t) == kIgnoreTarget);
      }
    }
  }
  for (int n = 2; n <= 5; ++n) CHECK(seen_n[n] > 0);  // 40 rows: every n occurs (p(miss) < 1e-4)
}

TEST_CASE("repeat copy at one length has n = (L-1)/2 in every row", "[tasks][repeat_copy]") {
  Rng rng(1);
  const PaddedTokenBatch even = RepeatCopyTask(16, 16, 8).sample(5, rng);
  for (std::size_t r = 0; r < 5; ++r) {
    CHECK(even.lengths[r] == 15);  // n = 7, last column padded
    CHECK(even.padding(r, 15) == 1);
  }
  const PaddedTokenBatch odd = RepeatCopyTask(17, 17, 8).sample(5, rng);
  for (std::size_t r = 0; r < 5; ++r) {
    CHECK(odd.lengths[r] == 17);
    CHECK(odd.padding(r, 16) == 0);
  }
}

TEST_CASE("repeat copy is deterministic and follows the documented draw order", "[tasks][repeat_copy]") {
  const RepeatCopyTask task(3, 9, 5);
  Rng a(7), b(7), c(8);
  const PaddedTokenBatch x = task.sample(6, a), y = task.sample(6, b), z = task.sample(6, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  CHECK(x.padding == y.padding);
  CHECK(x.inputs != z.inputs);
  Rng ref(7);
  for (std::size_t r = 0; r < 6; ++r) {
    const std::size_t n = 1 + ref.uniform_int(std::uint64_t{4});  // n_min 1, n_max 4
    REQUIRE(x.lengths[r] == 2 * n + 1);
    for (std::size_t i = 0; i < n; ++i)
      REQUIRE(x.inputs(r, i) == static_cast<std::int32_t>(1 + ref.uniform_int(std::uint64_t{5})));
  }
}

TEST_CASE("repeat copy chance baselines and bad arguments", "[tasks][repeat_copy]") {
  CHECK_THAT(RepeatCopyTask(3, 9, 8).chance_accuracy(), WithinRel(0.125, 1e-12));
  CHECK_THAT(RepeatCopyTask(3, 9, 8).chance_loss(), WithinRel(std::log(8.0), 1e-12));
  CHECK_THROWS_WITH(RepeatCopyTask(3, 2, 8), Catch::Contains("max_len") && Catch::Contains("2"));
  CHECK_THROWS_WITH(RepeatCopyTask(0, 9, 8), Catch::Contains("min_len"));
  CHECK_THROWS_WITH(RepeatCopyTask(10, 9, 8), Catch::Contains("min_len") && Catch::Contains("10"));
  CHECK_THROWS_WITH(RepeatCopyTask(3, 9, 0), Catch::Contains("alphabet"));
  Rng rng(1);
  CHECK_THROWS_WITH(RepeatCopyTask(3, 9, 8).sample(0, rng), Catch::Contains("batch"));
}

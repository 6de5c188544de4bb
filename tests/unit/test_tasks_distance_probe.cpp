// tasks/distance_probe: the layout (symbol at S-1-d, query last, fillers elsewhere, one scored
// position), distances uniform in their range, the documented draw order, determinism, and the
// chance baseline (analytically and against a large sample).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/distance_probe.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("distance probe places one symbol d steps before the query among fillers", "[tasks][distance_probe]") {
  const DistanceProbe task(20, 5, 3);
  CHECK(task.seq_len() == 20);
  CHECK(task.vocab_size() == 9);
  CHECK(task.first_filler() == 6);
  CHECK(task.query_position() == 19);
  CHECK(task.min_distance() == 1);
  CHECK(task.max_distance() == 19);
  Rng rng(3);
  std::vector<int> dist;
  const TokenBatch b = task.sample(40, rng, &dist);
  REQUIRE(b.inputs.shape()[0] == 40);
  REQUIRE(b.inputs.shape()[1] == 20);
  REQUIRE(b.targets.shape()[0] == 40);
  REQUIRE(b.targets.shape()[1] == 20);
  REQUIRE(dist.size() == 40);
  for (std::size_t r = 0; r < 40; ++r) {
    INFO("row " << r << " d " << dist[r]);
    REQUIRE(dist[r] >= 1);
    REQUIRE(dist[r] <= 19);
    const auto sym_pos = static_cast<std::size_t>(19 - dist[r]);
    CHECK(b.inputs(r, 19) == DistanceProbe::query_token());
    for (std::size_t t = 0; t < 19; ++t) {
      CHECK(b.targets(r, t) == kIgnoreTarget);
      if (t == sym_pos) {
        CHECK(b.inputs(r, t) >= 1);
        CHECK(b.inputs(r, t) <= 5);
      } else {
        CHECK(b.inputs(r, t) >= 6);
        CHECK(b.inputs(r, t) <= 8);
      }
    }
    CHECK(b.targets(r, 19) == b.inputs(r, sym_pos));
  }
}

TEST_CASE("distance probe at a fixed distance and in a restricted range", "[tasks][distance_probe]") {
  const DistanceProbe task(10, 4, 2, 3, 5);
  Rng rng(1);
  std::vector<int> dist;
  task.sample(500, rng, &dist);
  std::vector<int> count(10, 0);
  for (int d : dist) ++count[static_cast<std::size_t>(d)];
  CHECK(count[2] == 0);
  CHECK(count[6] == 0);
  for (int d = 3; d <= 5; ++d) CHECK(count[static_cast<std::size_t>(d)] > 120);  // 167 expected
  for (int d : {1, 9}) {  // sample_at may leave [min, max]
    const TokenBatch b = task.sample_at(6, d, rng);
    for (std::size_t r = 0; r < 6; ++r) {
      CHECK(b.inputs(r, static_cast<std::size_t>(9 - d)) <= 4);
      CHECK(b.targets(r, 9) == b.inputs(r, static_cast<std::size_t>(9 - d)));
    }
  }
}

TEST_CASE("distance probe is deterministic and follows its documented draw order", "[tasks][distance_probe]") {
  const DistanceProbe task(8, 4, 3);
  Rng a(42), b(42), c(43);
  std::vector<int> da;
  const TokenBatch x = task.sample(6, a, &da), y = task.sample(6, b), z = task.sample(6, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  CHECK(x.inputs != z.inputs);
  Rng ref(42);
  for (std::size_t r = 0; r < 6; ++r) {
    const int d = 1 + static_cast<int>(ref.uniform_int(std::uint64_t{7}));
    REQUIRE(da[r] == d);
    const auto s = static_cast<std::int32_t>(1 + ref.uniform_int(std::uint64_t{4}));
    for (std::size_t t = 0; t < 7; ++t) {
      if (static_cast<int>(t) == 7 - d) {
        REQUIRE(x.inputs(r, t) == s);
      } else {
        REQUIRE(x.inputs(r, t) == static_cast<std::int32_t>(5 + ref.uniform_int(std::uint64_t{3})));
      }
    }
  }
  // sample_at draws no distance: symbol, then fillers.
  Rng e(7), ref2(7);
  const TokenBatch w = task.sample_at(1, 2, e);
  CHECK(w.inputs(0, 5) == static_cast<std::int32_t>(1 + ref2.uniform_int(std::uint64_t{4})));
  CHECK(w.inputs(0, 0) == static_cast<std::int32_t>(5 + ref2.uniform_int(std::uint64_t{3})));
}

TEST_CASE("distance probe chance baseline matches a large sample", "[tasks][distance_probe]") {
  const DistanceProbe task(12, 8, 8);
  CHECK_THAT(task.chance_accuracy(), WithinRel(0.125, 1e-15));
  CHECK_THAT(task.chance_loss(), WithinRel(std::log(8.0), 1e-15));
  // The best predictor that ignores the symbol: the symbol's marginal over a large sample. Its
  // accuracy (guess the most frequent symbol) and cross-entropy are 1/8 and ln 8 up to sampling
  // noise (n = 80000: sd of a symbol count 94, of the accuracy 1.2e-3).
  Rng rng(99);
  const std::size_t n = 80000;
  const TokenBatch b = task.sample(n, rng);
  std::vector<double> freq(9, 0.0);
  for (std::size_t r = 0; r < n; ++r) freq[static_cast<std::size_t>(b.targets(r, 11))] += 1.0 / n;
  CHECK(freq[0] == 0.0);
  double best = 0, ce = 0;
  for (std::size_t s = 1; s <= 8; ++s) {
    best = std::max(best, freq[s]);
    ce -= freq[s] * std::log(freq[s]);
  }
  CHECK_THAT(best, WithinAbs(task.chance_accuracy(), 4 * 1.2e-3 + 2e-3));
  CHECK_THAT(ce, WithinAbs(task.chance_loss(), 2e-3));
  // The fillers carry no information about the symbol: predicting the symbol from the token just
  // before the query (a filler unless d = 1) is right at chance rate when d > 1.
  std::size_t hit = 0, m = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (b.inputs(r, 10) <= 8) continue;  // d = 1: that token is the symbol
    ++m;
    hit += (b.inputs(r, 10) - 8) == b.targets(r, 11);
  }
  CHECK_THAT(double(hit) / double(m), WithinAbs(0.125, 0.01));
}

TEST_CASE("distance probe rejects bad arguments", "[tasks][distance_probe]") {
  CHECK_THROWS_WITH(DistanceProbe(1), Catch::Contains("seq_len") && Catch::Contains("1"));
  CHECK_THROWS_WITH(DistanceProbe(8, 0), Catch::Contains("n_symbols"));
  CHECK_THROWS_WITH(DistanceProbe(8, 4, 0), Catch::Contains("n_fillers"));
  CHECK_THROWS_WITH(DistanceProbe(8, 4, 2, 0), Catch::Contains("min_distance"));
  CHECK_THROWS_WITH(DistanceProbe(8, 4, 2, 8), Catch::Contains("min_distance"));
  CHECK_THROWS_WITH(DistanceProbe(8, 4, 2, 3, 2), Catch::Contains("max_distance"));
  CHECK_THROWS_WITH(DistanceProbe(8, 4, 2, 1, 8), Catch::Contains("max_distance"));
  const DistanceProbe ok(8, 4, 2);
  Rng rng(1);
  CHECK_THROWS_AS(ok.sample(0, rng), std::invalid_argument);
  CHECK_THROWS_WITH(ok.sample_at(2, 0, rng), Catch::Contains("distance"));
  CHECK_THROWS_WITH(ok.sample_at(2, 8, rng), Catch::Contains("distance"));
  // The smallest probe: S = 2, the symbol then the query.
  const TokenBatch b = DistanceProbe(2, 3, 1).sample(4, rng);
  for (std::size_t r = 0; r < 4; ++r) {
    CHECK(b.inputs(r, 0) >= 1);
    CHECK(b.inputs(r, 0) <= 3);
    CHECK(b.targets(r, 1) == b.inputs(r, 0));
  }
}

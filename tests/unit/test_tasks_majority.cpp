#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/majority.hpp"

using namespace seqlab;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;

TEST_CASE("majority task: shapes, padding layout and unique-mode labels", "[tasks][majority]") {
  const MajorityTask task(32, 0.25, 4, 4, 4);
  CHECK(task.vocab_size() == 9);
  CHECK(task.mean_length() == 24);
  CHECK(task.min_length() == 16);
  CHECK(task.max_length() == 32);
  Rng rng(5);
  const PaddedClassificationBatch b = task.sample(64, rng);
  REQUIRE(b.inputs.shape()[0] == 64);
  REQUIRE(b.inputs.shape()[1] == 32);
  REQUIRE(b.padding.shape()[0] == 64);
  REQUIRE(b.padding.shape()[1] == 32);
  REQUIRE(b.labels.shape()[0] == 64);
  REQUIRE(b.lengths.shape()[0] == 64);
  for (std::size_t r = 0; r < 64; ++r) {
    INFO("row " << r);
    const int L = b.lengths(r);
    CHECK(L >= 16);
    CHECK(L <= 32);
    std::vector<int> counts(5, 0);
    for (int t = 0; t < 32; ++t) {
      const auto tok = b.inputs(r, static_cast<std::size_t>(t));
      if (t < L) {
        CHECK(b.padding(r, static_cast<std::size_t>(t)) == 0);
        CHECK(tok >= 1);
        CHECK(tok <= 8);
        if (tok <= 4) ++counts[static_cast<std::size_t>(tok)];
      } else {
        CHECK(b.padding(r, static_cast<std::size_t>(t)) == 1);
        CHECK(tok == 0);
      }
    }
    // The label is the unique most frequent class token (1..4 -> 0..3).
    const int c = b.labels(r) + 1;
    REQUIRE(c >= 1);
    REQUIRE(c <= 4);
    for (int o = 1; o <= 4; ++o)
      if (o != c) CHECK(counts[static_cast<std::size_t>(c)] > counts[static_cast<std::size_t>(o)]);
  }
}

TEST_CASE("majority task lengths give the stated padding fraction", "[tasks][majority]") {
  SECTION("p = 0: no padding, every length is T") {
    const MajorityTask task(32, 0.0);
    CHECK(task.min_length() == 32);
    CHECK(task.max_length() == 32);
    CHECK(task.expected_pad_fraction() == 0.0);
    Rng rng(1);
    const auto b = task.sample(16, rng);
    for (std::size_t r = 0; r < 16; ++r) CHECK(b.lengths(r) == 32);
  }
  SECTION("p = 0.5 with T = 32, min_len = 4: L uniform on 4..28") {
    const MajorityTask task(32, 0.5, 4, 4, 4);
    CHECK(task.min_length() == 4);
    CHECK(task.max_length() == 28);
    CHECK(task.expected_pad_fraction() == 0.5);
  }
  SECTION("the empirical padding fraction matches expected_pad_fraction") {
    for (double p : {0.25, 0.5}) {
      const MajorityTask task(32, p);
      Rng rng(11);
      const std::size_t n = 4000;
      const auto b = task.sample(n, rng);
      double padded = 0;
      int lo = 1000, hi = -1;
      for (std::size_t r = 0; r < n; ++r) {
        padded += 32 - b.lengths(r);
        lo = std::min<int>(lo, b.lengths(r));
        hi = std::max<int>(hi, b.lengths(r));
      }
      const double frac = padded / (32.0 * n);
      INFO("p = " << p << " measured " << frac);
      // Standard error of the mean padding fraction here is below 0.003.
      CHECK_THAT(frac, WithinAbs(task.expected_pad_fraction(), 0.012));
      CHECK(lo == task.min_length());  // both ends of the range occur
      CHECK(hi == task.max_length());
    }
  }
  SECTION("a non-integer p·T: expected fraction is 1 - round((1 - p) T) / T") {
    const MajorityTask task(10, 0.33, 2, 0, 2);
    CHECK(task.mean_length() == 7);
    CHECK_THAT(task.expected_pad_fraction(), WithinAbs(0.3, 1e-12));
  }
}

TEST_CASE("majority task is deterministic from the rng state", "[tasks][majority]") {
  const MajorityTask task(16, 0.25, 3, 2, 2);
  Rng a(42), b(42), c(43);
  const auto x = task.sample(32, a), y = task.sample(32, b), z = task.sample(32, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.labels == y.labels);
  CHECK(x.lengths == y.lengths);
  CHECK(x.padding == y.padding);
  CHECK(x.inputs != z.inputs);
  // The documented draw order: L first, then the L tokens (for a row accepted at the first try).
  Rng r(7);
  const MajorityTask t1(8, 0.0, 2, 0, 1);  // L = 8, tokens 1..2 only
  const auto one = t1.sample(1, r);
  Rng r2(7);
  (void)r2.uniform_int(std::uint64_t{1});  // the length draw (2w + 1 = 1 choice)
  std::vector<int> toks;
  int n1 = 0;
  for (int t = 0; t < 8; ++t) {
    toks.push_back(1 + static_cast<int>(r2.uniform_int(std::uint64_t{2})));
    n1 += toks.back() == 1;
  }
  if (n1 != 4) {  // no tie: accepted at the first draw
    for (int t = 0; t < 8; ++t) CHECK(one.inputs(0, static_cast<std::size_t>(t)) == toks[static_cast<std::size_t>(t)]);
    CHECK(one.labels(0) == (n1 > 4 ? 0 : 1));
  }
}

TEST_CASE("majority task baselines: uniform labels, chance accuracy and loss", "[tasks][majority]") {
  const MajorityTask task(32, 0.5, 4, 4, 4);
  CHECK_THAT(task.chance_accuracy(), WithinAbs(0.25, 1e-12));
  CHECK_THAT(task.chance_loss(), WithinAbs(std::log(4.0), 1e-12));
  Rng rng(3);
  const std::size_t n = 8000;
  const auto b = task.sample(n, rng);
  std::vector<double> freq(4, 0.0);
  for (std::size_t r = 0; r < n; ++r) freq[static_cast<std::size_t>(b.labels(r))] += 1.0 / n;
  // Each label has probability 1/4 by symmetry; standard error ~0.005 at n = 8000.
  for (double f : freq) CHECK_THAT(f, WithinAbs(0.25, 0.025));
}

TEST_CASE("majority task rejects bad arguments naming them", "[tasks][majority]") {
  CHECK_THROWS_WITH(MajorityTask(1, 0.0), Contains("seq_len"));
  CHECK_THROWS_WITH(MajorityTask(8, 1.0), Contains("pad_fraction"));
  CHECK_THROWS_WITH(MajorityTask(8, -0.1), Contains("pad_fraction"));
  CHECK_THROWS_WITH(MajorityTask(8, std::nan("")), Contains("pad_fraction"));
  CHECK_THROWS_WITH(MajorityTask(8, 0.0, 1), Contains("n_classes"));
  CHECK_THROWS_WITH(MajorityTask(8, 0.0, 2, -1), Contains("n_noise"));
  CHECK_THROWS_WITH(MajorityTask(8, 0.0, 2, 0, 0), Contains("min_len"));
  CHECK_THROWS_WITH(MajorityTask(8, 0.0, 2, 0, 9), Contains("min_len"));
  CHECK_THROWS_WITH(MajorityTask(8, 0.9, 2, 0, 4), Contains("pad_fraction"));
  const MajorityTask ok(8, 0.0);
  Rng rng(1);
  CHECK_THROWS_WITH(ok.sample(0, rng), Contains("batch"));
}

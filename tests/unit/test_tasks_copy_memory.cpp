#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/copy_memory.hpp"
#include "seqlab/tasks/draw_counts.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("copy memory has the layout of Bai et al.'s data_generator", "[tasks][copy_memory]") {
  const int T = 5;
  const CopyMemoryTask task(T);
  CHECK(task.seq_len() == 25);
  CHECK(task.vocab_size() == 10);
  CHECK(task.recall_start() == 15);
  CHECK(task.delimiter() == 9);
  Rng rng(3);
  const TokenBatch b = task.sample(4, rng);
  REQUIRE(b.inputs.shape()[0] == 4);
  REQUIRE(b.inputs.shape()[1] == 25);
  REQUIRE(b.targets.shape()[0] == 4);
  REQUIRE(b.targets.shape()[1] == 25);
  for (std::size_t r = 0; r < 4; ++r) {
    INFO("row " << r);
    // x = 10 symbols in 1..8, T-1 = 4 zeros, 11 nines.
    for (std::size_t t = 0; t < 10; ++t) {
      CHECK(b.inputs(r, t) >= 1);
      CHECK(b.inputs(r, t) <= 8);
    }
    for (std::size_t t = 10; t < 14; ++t) CHECK(b.inputs(r, t) == 0);
    for (std::size_t t = 14; t < 25; ++t) CHECK(b.inputs(r, t) == 9);
    // y = T + 10 = 15 zeros, then the symbols in order.
    for (std::size_t t = 0; t < 15; ++t) CHECK(b.targets(r, t) == 0);
    for (std::size_t i = 0; i < 10; ++i) CHECK(b.targets(r, 15 + i) == b.inputs(r, i));
  }
}

TEST_CASE("copy memory with T of 1 has no blank in the input", "[tasks][copy_memory]") {
  const CopyMemoryTask task(1);
  Rng rng(1);
  const TokenBatch b = task.sample(1, rng);
  REQUIRE(b.inputs.shape()[1] == 21);
  CHECK(b.inputs(0, 9) >= 1);
  for (std::size_t t = 10; t < 21; ++t) CHECK(b.inputs(0, t) == 9);
  CHECK(b.targets(0, 10) == 0);
  CHECK(b.targets(0, 11) == b.inputs(0, 0));
}

TEST_CASE("copy memory is deterministic from the rng state", "[tasks][copy_memory]") {
  const CopyMemoryTask task(20);
  Rng a(42), b(42), c(43);
  const TokenBatch x = task.sample(8, a), y = task.sample(8, b), z = task.sample(8, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  CHECK(x.inputs != z.inputs);
  // The documented draw order: row by row, symbol i as 1 + uniform_int(8).
  Rng ref(42);
  for (std::size_t r = 0; r < 8; ++r) {
    for (std::size_t i = 0; i < 10; ++i) {
      REQUIRE(x.inputs(r, i) == static_cast<std::int32_t>(1 + ref.uniform_int(std::uint64_t{8})));
    }
  }
  // A second batch continues the stream: it equals rows 8..15 of one batch of 16.
  Rng d(42), e(42);
  task.sample(8, d);
  const TokenBatch second = task.sample(8, d);
  const TokenBatch both = task.sample(16, e);
  for (std::size_t r = 0; r < 8; ++r)
    for (std::size_t t = 0; t < 40; ++t) REQUIRE(second.inputs(r, t) == both.inputs(8 + r, t));
}

TEST_CASE("copy memory symbols are uniform over 1 to 8", "[tasks][copy_memory]") {
  const CopyMemoryTask task(1);
  Rng rng(9);
  const TokenBatch b = task.sample(8000, rng);  // 80000 symbols, 10000 expected per symbol
  std::vector<int> count(10, 0);
  for (std::size_t r = 0; r < 8000; ++r)
    for (std::size_t i = 0; i < 10; ++i) ++count[static_cast<std::size_t>(b.inputs(r, i))];
  CHECK(count[0] == 0);
  CHECK(count[9] == 0);
  for (int s = 1; s <= 8; ++s) {
    INFO("symbol " << s << " count " << count[s]);
    CHECK(std::abs(count[s] - 10000) < 400);  // ~4 standard deviations (sd = 93.5)
  }
}

TEST_CASE("copy memory baselines match Bai et al. and a memoryless predictor", "[tasks][copy_memory]") {
  // Bai et al. 2018 Table 1 and §5.3: the memoryless loss at T = 1000 is 10 ln8 / 1020 = 0.0204.
  CHECK_THAT(CopyMemoryTask(1000).memoryless_loss(), WithinAbs(0.0204, 5e-5));
  CHECK_THAT(CopyMemoryTask(1000).memoryless_loss(), WithinRel(10 * std::log(8.0) / 1020, 1e-12));
  CHECK_THAT(CopyMemoryTask(7).memoryless_recall_loss(), WithinRel(std::log(8.0), 1e-12));
  CHECK_THAT(CopyMemoryTask(7).chance_recall_accuracy(), WithinRel(0.125, 1e-12));

  // The predictor that knows the layout but nothing else: class 0 (certain) before recall_start,
  // uniform over the symbols 1..8 after. Its cross-entropy is the memoryless loss.
  const int T = 30;
  const CopyMemoryTask task(T);
  Rng rng(5);
  const TokenBatch b = task.sample(6, rng);
  const std::size_t S = static_cast<std::size_t>(task.seq_len());
  Tensor2 logits = xt::zeros<float>({6 * S, std::size_t{10}});
  IndexTensor1 targets = IndexTensor1::from_shape({6 * S});
  for (std::size_t r = 0; r < 6; ++r) {
    for (std::size_t t = 0; t < S; ++t) {
      const std::size_t row = r * S + t;
      targets(row) = b.targets(r, t);
      if (t < static_cast<std::size_t>(task.recall_start())) {
        for (std::size_t c = 1; c < 10; ++c) logits(row, c) = -100.0f;  // p(0) = 1 - 9e-44
      } else {
        logits(row, 0) = -100.0f;
        logits(row, 9) = -100.0f;
      }
    }
  }
  CrossEntropyLoss ce;
  const double loss = ce.forward(logits, targets);
  CHECK_THAT(loss, WithinRel(task.memoryless_loss(), 1e-5));
}

TEST_CASE("copy memory most-frequent-symbol baseline matches a Monte-Carlo run of that predictor",
          "[tasks][copy_memory]") {
  // The order-blind predictor on the generator's own samples: per row it counts the source
  // symbols (inputs 0..n_memorize-1) and answers every recall position with a most frequent one
  // (ties broken uniformly by its own rng); its loss at a recall position is -ln(c_target / n).
  for (const int n_memorize : {10, 3}) {
    INFO("n_memorize " << n_memorize);
    const CopyMemoryTask task(4, n_memorize, 8);
    CHECK_THAT(task.most_frequent_symbol_accuracy(),
               WithinRel(expected_max_count(n_memorize, 8) / n_memorize, 1e-15));
    Rng data(21), ties(22);
    const std::size_t rows = 40000, n = static_cast<std::size_t>(n_memorize);
    const TokenBatch b = task.sample(rows, data);
    const std::size_t rs = static_cast<std::size_t>(task.recall_start());
    std::vector<double> acc(rows), loss(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      std::array<int, 10> count{};
      for (std::size_t i = 0; i < n; ++i) ++count[static_cast<std::size_t>(b.inputs(r, i))];
      const int top = *std::max_element(count.begin(), count.end());
      std::vector<int> modes;
      for (int v = 1; v <= 8; ++v)
        if (count[static_cast<std::size_t>(v)] == top) modes.push_back(v);
      double hit = 0, l = 0;
      for (std::size_t t = rs; t < rs + n; ++t) {
        const int y = b.targets(r, t);
        hit += modes[ties.uniform_int(static_cast<std::uint64_t>(modes.size()))] == y;
        l += -std::log(count[static_cast<std::size_t>(y)] / static_cast<double>(n));
      }
      acc[r] = hit / static_cast<double>(n);
      loss[r] = l / static_cast<double>(n);
    }
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return s / static_cast<double>(v.size());
    };
    auto se = [&](const std::vector<double>& v) {
      const double m = mean(v);
      double ss = 0;
      for (double x : v) ss += (x - m) * (x - m);
      return std::sqrt(ss / static_cast<double>(v.size() - 1) / static_cast<double>(v.size()));
    };
    CHECK(std::abs(mean(acc) - task.most_frequent_symbol_accuracy()) < 4 * se(acc));
    CHECK(std::abs(mean(loss) - task.most_frequent_symbol_loss()) < 4 * se(loss));
    CHECK(task.most_frequent_symbol_accuracy() > task.chance_recall_accuracy());
    CHECK(task.most_frequent_symbol_loss() < task.memoryless_recall_loss());
  }
  // Bai et al.'s setting (10 symbols over 8): E[max count] = 202656935 / 67108864 (exact
  // enumeration), so the accuracy is 0.30198, more than twice the memoryless 0.125.
  CHECK_THAT(CopyMemoryTask(1000).most_frequent_symbol_accuracy(),
             WithinRel(202656935.0 / 67108864 / 10, 1e-13));
  CHECK_THAT(CopyMemoryTask(1000).most_frequent_symbol_loss(), WithinRel(1.6600161564138094, 1e-12));
  CHECK_THAT(CopyMemoryTask(5, 1, 8).most_frequent_symbol_accuracy(), WithinRel(1.0, 1e-15));
}

TEST_CASE("copy memory rejects bad arguments", "[tasks][copy_memory]") {
  CHECK_THROWS_AS(CopyMemoryTask(0), std::invalid_argument);
  CHECK_THROWS_WITH(CopyMemoryTask(-2), Catch::Contains("T") && Catch::Contains("-2"));
  CHECK_THROWS_AS(CopyMemoryTask(5, 0), std::invalid_argument);
  CHECK_THROWS_AS(CopyMemoryTask(5, 10, 0), std::invalid_argument);
  Rng rng(1);
  CHECK_THROWS_AS(CopyMemoryTask(5).sample(0, rng), std::invalid_argument);
}

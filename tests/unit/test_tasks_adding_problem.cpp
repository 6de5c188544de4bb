// tasks/adding_problem: Bai et al.'s layout (two channels, two distinct marked positions, target the
// sum), the documented draw order, determinism, the dependency distance, and the baselines: MSE 1/6
// of predicting 1 and 1/6 - 1/(3T) of the best marker-free predictor (analytically and against a
// large sample).
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/adding_problem.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("adding problem has two channels two distinct markers and the sum as target", "[tasks][adding]") {
  const AddingProblem task(12);
  CHECK(task.seq_len() == 12);
  CHECK(AddingProblem::input_size() == 2);
  Rng rng(3);
  const AddingBatch b = task.sample(50, rng);
  REQUIRE(b.inputs.shape()[0] == 50);
  REQUIRE(b.inputs.shape()[1] == 12);
  REQUIRE(b.inputs.shape()[2] == 2);
  REQUIRE(b.targets.shape()[0] == 50);
  REQUIRE(b.targets.shape()[1] == 1);
  REQUIRE(b.positions.size() == 50);
  for (std::size_t r = 0; r < 50; ++r) {
    INFO("row " << r);
    int markers = 0;
    float sum = 0.0f;
    for (std::size_t t = 0; t < 12; ++t) {
      const float v = b.inputs(r, t, 0), m = b.inputs(r, t, 1);
      CHECK(v >= 0.0f);
      CHECK(v < 1.0f);
      CHECK((m == 0.0f || m == 1.0f));
      if (m == 1.0f) {
        ++markers;
        sum += v;
      }
    }
    CHECK(markers == 2);
    const auto [p1, p2] = std::pair<int, int>{b.positions[r][0], b.positions[r][1]};
    CHECK(p1 != p2);
    CHECK(b.inputs(r, static_cast<std::size_t>(p1), 1) == 1.0f);
    CHECK(b.inputs(r, static_cast<std::size_t>(p2), 1) == 1.0f);
    CHECK(b.targets(r, 0) == sum);
    const int d = task.dependency_distance(b.positions[r]);
    CHECK(d == 11 - std::min(p1, p2));
    CHECK(d >= 1);
    CHECK(d <= 11);
  }
}

TEST_CASE("adding problem is deterministic and follows its documented draw order", "[tasks][adding]") {
  const AddingProblem task(7);
  Rng a(42), b(42), c(43);
  const AddingBatch x = task.sample(5, a), y = task.sample(5, b), z = task.sample(5, c);
  CHECK(x.inputs == y.inputs);
  CHECK(x.targets == y.targets);
  CHECK(x.inputs != z.inputs);
  Rng ref(42);
  for (std::size_t r = 0; r < 5; ++r) {
    for (std::size_t t = 0; t < 7; ++t) REQUIRE(x.inputs(r, t, 0) == ref.uniform());
    const int p1 = static_cast<int>(ref.uniform_int(std::uint64_t{7}));
    int p2 = static_cast<int>(ref.uniform_int(std::uint64_t{6}));
    if (p2 >= p1) ++p2;
    REQUIRE(x.positions[r][0] == p1);
    REQUIRE(x.positions[r][1] == p2);
  }
}

TEST_CASE("adding problem marks every ordered pair of positions equally often", "[tasks][adding]") {
  const AddingProblem task(4);  // 12 ordered pairs
  Rng rng(11);
  const AddingBatch b = task.sample(24000, rng);  // 2000 expected per pair, sd ~ 43
  std::vector<int> count(16, 0);
  for (const auto& p : b.positions) ++count[static_cast<std::size_t>(p[0] * 4 + p[1])];
  for (int i = 0; i < 4; ++i) {
    CHECK(count[static_cast<std::size_t>(i * 4 + i)] == 0);
    for (int j = 0; j < 4; ++j) {
      if (i == j) continue;
      INFO("pair " << i << "," << j << " count " << count[static_cast<std::size_t>(i * 4 + j)]);
      CHECK(std::abs(count[static_cast<std::size_t>(i * 4 + j)] - 2000) < 200);
    }
  }
}

TEST_CASE("adding problem baseline is the MSE 1/6 of predicting 1", "[tasks][adding]") {
  CHECK(AddingProblem::baseline_prediction() == 1.0);
  CHECK_THAT(AddingProblem::baseline_mse(), WithinRel(1.0 / 6.0, 1e-15));
  CHECK_THAT(AddingProblem::baseline_mse(), WithinAbs(0.1667, 1e-4));
  // Empirically on a large sample: the mean target is 1 (so 1 is the best constant), and the MSE
  // of predicting 1 is 1/6. (y - 1) is triangular on [-1, 1]: Var((y-1)^2) = 1/15 - 1/36, sd 0.197;
  // with n = 100000 the standard error of the MSE is 6.2e-4 and of the mean 1.3e-3.
  const AddingProblem task(10);
  Rng rng(2024);
  const std::size_t n = 100000;
  const AddingBatch b = task.sample(n, rng);
  double sum = 0, sq = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const double y = b.targets(r, 0);
    sum += y;
    sq += (y - 1.0) * (y - 1.0);
  }
  CHECK_THAT(sum / n, WithinAbs(1.0, 4 * 1.3e-3));
  CHECK_THAT(sq / n, WithinAbs(AddingProblem::baseline_mse(), 4 * 6.2e-4));
  // The best predictor that ignores the markers but sees the values, 2·mean(values), reaches
  // 1/6 - 1/(3T) = 0.1333 at T = 10 (sd of its squared error ~0.19: standard error 6e-4).
  CHECK_THAT(task.markerless_mse(), WithinRel(1.0 / 6.0 - 1.0 / 30.0, 1e-12));
  double sq_mean = 0;
  for (std::size_t r = 0; r < n; ++r) {
    double m = 0;
    for (std::size_t t = 0; t < 10; ++t) m += b.inputs(r, t, 0);
    const double e = 2.0 * m / 10.0 - b.targets(r, 0);
    sq_mean += e * e;
  }
  CHECK_THAT(sq_mean / n, WithinAbs(task.markerless_mse(), 4 * 6e-4));
  CHECK(sq_mean / n < AddingProblem::baseline_mse() - 0.02);
  // Bai et al.'s T = 600: within 6e-4 of 1/6.
  CHECK_THAT(AddingProblem(600).markerless_mse(), WithinAbs(1.0 / 6.0, 6e-4));
}

TEST_CASE("adding problem rejects bad arguments", "[tasks][adding]") {
  CHECK_THROWS_WITH(AddingProblem(1), Catch::Contains("seq_len") && Catch::Contains("1"));
  CHECK_THROWS_AS(AddingProblem(0), std::invalid_argument);
  Rng rng(1);
  CHECK_THROWS_AS(AddingProblem(2).sample(0, rng), std::invalid_argument);
  // T = 2: both positions are marked.
  const AddingBatch b = AddingProblem(2).sample(3, rng);
  for (std::size_t r = 0; r < 3; ++r) {
    CHECK(b.inputs(r, 0, 1) == 1.0f);
    CHECK(b.inputs(r, 1, 1) == 1.0f);
  }
}

// experiment/tuning.hpp: the learning-rate pilot's choice and early stopping.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "seqlab/experiment/tuning.hpp"

using namespace seqlab::experiment;

TEST_CASE("choose_lr keeps the lowest finite validation loss, earlier on ties", "[experiment][tuning]") {
  const std::vector<double> grid = {1e-4, 1e-3, 1e-2, 1e-1};
  std::vector<double> seen;
  const LrChoice c = choose_lr(grid, [&](double lr) {
    seen.push_back(lr);
    if (lr == 1e-1) return std::numeric_limits<double>::quiet_NaN();  // diverged
    return lr == 1e-4 ? 2.0 : 1.5;                                     // 1e-3 and 1e-2 tie
  });
  CHECK(seen == grid);
  CHECK(c.lr == 1e-3);
  CHECK(c.index == 1);
  CHECK_FALSE(c.all_diverged);
  REQUIRE(c.val_loss.size() == 4);
  CHECK(std::isnan(c.val_loss[3]));
}

TEST_CASE("choose_lr with every trial diverged takes the first and says so", "[experiment][tuning]") {
  const LrChoice c = choose_lr({3e-3, 1e-2}, [](double) { return std::numeric_limits<double>::infinity(); });
  CHECK(c.all_diverged);
  CHECK(c.lr == 3e-3);
  CHECK_THROWS_AS(choose_lr({}, [](double) { return 1.0; }), std::invalid_argument);
  CHECK_THROWS_AS(choose_lr({0.0}, [](double) { return 1.0; }), std::invalid_argument);
}

TEST_CASE("early stopping waits `patience` evaluations without a relative improvement", "[experiment][tuning]") {
  EarlyStopping es(2, 0.01);
  CHECK_FALSE(es.update(1.0, 100));
  CHECK_FALSE(es.update(0.8, 200));
  CHECK(es.best_step() == 200);
  CHECK_FALSE(es.update(0.795, 300));  // < 1 % better: no improvement (1 of 2)
  CHECK(es.since_best() == 1);
  CHECK_FALSE(es.update(0.7, 400));    // improvement resets
  CHECK_FALSE(es.update(std::nan(""), 500));
  CHECK(es.update(0.71, 600));         // second evaluation without improvement: stop
  CHECK(es.best_loss() == 0.7);
  CHECK(es.best_step() == 400);
  CHECK_THROWS_AS(EarlyStopping(0, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(EarlyStopping(1, -1.0), std::invalid_argument);
}

// experiment/tuning.hpp: the learning-rate pilot's choice and early stopping.
#include <catch2/catch.hpp>

#include "temp_dir.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "seqlab/experiment/grid.hpp"
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

TEST_CASE("shared_choose_lr runs a pilot once per group and build, and shares its choice", "[experiment][tuning]") {
  seqlab::test::TempDir d("seqlab_tuning");
  Cell cell;
  cell.pilot_dir = (d.path / "pilots").string();
  cell.build_identity = " threads=1 commit=abc";
  const std::vector<double> grid = {1e-3, 1e-2};
  int calls = 0;
  auto trial = [&](double lr) {
    ++calls;
    return lr == 1e-2 ? std::numeric_limits<double>::quiet_NaN() : 0.5;
  };
  const LrChoice a = shared_choose_lr(cell, "task=copy model=lstm replicate=0", grid, trial);
  CHECK(calls == 2);
  CHECK(a.lr == 1e-3);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(cell.pilot_dir)) files += e.path().extension() == ".json";
  CHECK(files == 1);
  // Another cell of the group (another replicate): no trial runs, the same choice and losses.
  const LrChoice b = shared_choose_lr(cell, "task=copy model=lstm replicate=0", grid, trial);
  CHECK(calls == 2);
  CHECK(b.lr == a.lr);
  CHECK(b.index == a.index);
  REQUIRE(b.val_loss.size() == 2);
  CHECK(b.val_loss[0] == 0.5);
  CHECK(std::isnan(b.val_loss[1]));  // a diverged trial survives the file as NaN
  // Another group, another build, another grid: computed afresh.
  shared_choose_lr(cell, "task=copy model=gru replicate=0", grid, trial);
  CHECK(calls == 4);
  Cell other = cell;
  other.build_identity = " threads=2 commit=abc";
  shared_choose_lr(other, "task=copy model=lstm replicate=0", grid, trial);
  CHECK(calls == 6);
  shared_choose_lr(cell, "task=copy model=lstm replicate=0", {1e-3, 3e-3}, trial);
  CHECK(calls == 8);
  // A damaged file is recomputed and replaced.
  for (const auto& e : std::filesystem::directory_iterator(cell.pilot_dir))
    if (e.path().extension() == ".json") std::ofstream(e.path()) << "{not json";
  shared_choose_lr(cell, "task=copy model=lstm replicate=0", grid, trial);
  CHECK(calls == 10);
  shared_choose_lr(cell, "task=copy model=lstm replicate=0", grid, trial);
  CHECK(calls == 10);
  // No sharing without a build identity (an unreadable executable) or a pilot directory.
  Cell dirty = cell;
  dirty.build_identity.clear();
  shared_choose_lr(dirty, "task=copy model=lstm replicate=0", grid, trial);
  CHECK(calls == 12);
  Cell bare;
  shared_choose_lr(bare, "task=copy model=lstm replicate=0", grid, trial);
  CHECK(calls == 14);
}

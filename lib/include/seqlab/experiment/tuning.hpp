#pragma once
// The tuning procedure every compared arm gets (DESIGN.md "Verdicts"): a learning rate chosen from
// a stated grid on a validation split by a pilot, and training until the validation loss stops
// improving.
//
// Learning-rate pilot (choose_lr): for each learning rate of the grid, in order, `trial(lr)` trains
// a fresh copy of the arm's model (same initialisation, same training stream) for the pilot's
// updates and returns its loss on the validation split (data no test score is computed on). The
// choice is the learning rate with the lowest finite validation loss; a trial that diverged (a
// non-finite loss) never wins; equal losses keep the earlier (smaller, when the grid is sorted)
// learning rate. If every trial diverged the choice is the grid's first (smallest) value and
// `all_diverged` is set, so the arm's main run is still made and reported. The same grid, pilot
// length and validation split for every arm make the comparison fair; the CSV records the choice
// and every trial's loss.
//
// Early stopping (EarlyStopping): fed the validation loss at every evaluation, it says stop once
// `patience` evaluations in a row have not improved on the best by more than `min_delta` (relative
// to the best, |best| · min_delta), and remembers the best loss and the step it came at. As Prechelt
// 1998 ("Early stopping — but when?"), with the patience criterion.
#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

#include <string>

#include "seqlab/train/checkpoint.hpp"

namespace seqlab::experiment {

struct LrChoice {
  double lr = 0;                  // the chosen learning rate
  std::size_t index = 0;          // its index in the grid
  std::vector<double> val_loss;   // every trial's validation loss, in grid order (NaN/inf: diverged)
  bool all_diverged = false;      // no trial had a finite validation loss
};

/// Runs trial(lr) for every value of `grid` (non-empty, each > 0 and finite) and chooses (file
/// comment). Exceptions of trial propagate. Throws std::invalid_argument for a bad grid.
LrChoice choose_lr(const std::vector<double>& grid, const std::function<double(double lr)>& trial);

struct Cell;

/// choose_lr for a pilot that several cells would repeat identically (e.g. one learning rate per
/// arm, chosen on replicate 0's streams and used by every replicate of the arm), computed once and
/// shared through a file. `group`: text naming everything the pilot's result depends on besides
/// the build (the arm's keys, the replicate whose streams the trials use, the grid, the pilot
/// length). The file is <cell.pilot_dir>/<16 hex digits of fnv1a64(group + cell.build_identity)>
/// .json (identity, grid, val_loss, lr, index, all_diverged). If it exists and holds this
/// identity and grid, its choice is returned and `trial` is never called; otherwise choose_lr
/// runs and the file is written atomically. Concurrent cells of one group serialise on an
/// exclusive flock(2) of <file>.lock, so the second waits and then reads the first's result
/// (without working locks, e.g. some network file systems, both compute the same result).
/// Sharing is off, i.e. this is choose_lr, when cell.pilot_dir or cell.build_identity is empty
/// (a hand-built Cell; an executable that cannot be read, grid.hpp). The
/// result equals choose_lr's either way, since a pilot is deterministic for a given build and
/// thread count; only the CPU time differs (the cell that computes it pays for it). An unreadable
/// or foreign file is recomputed and replaced. Throws as choose_lr, and std::runtime_error if the
/// file cannot be written.
LrChoice shared_choose_lr(const Cell& cell, const std::string& group, const std::vector<double>& grid,
                          const std::function<double(double lr)>& trial);

class EarlyStopping {
 public:
  /// patience >= 1 evaluations without improvement; min_delta >= 0 (relative).
  /// Throws std::invalid_argument otherwise.
  EarlyStopping(int patience, double min_delta);
  /// The validation loss at update `step`; true when training should stop. A non-finite loss
  /// counts as no improvement.
  bool update(double val_loss, int step);
  double best_loss() const { return best_; }
  int best_step() const { return best_step_; }
  int since_best() const { return bad_; }
  /// Registers the stopper's state for checkpoints (names prefixed with `prefix`).
  void register_state(CheckpointState& state, const std::string& prefix);

 private:
  int patience_;
  double min_delta_;
  double best_ = std::numeric_limits<double>::infinity();
  int best_step_ = -1;
  int bad_ = 0;
};

}  // namespace seqlab::experiment

#pragma once
// One training phase of a cell: what every experiment's training shares, so that an experiment's
// main declares what it measures, not how to train.
//
// A TrainingPhase runs `steps` updates of train_loop (train/loop.hpp) with the cell's checkpoint
// options for phase `name` (cell_checkpoint, experiment.hpp: --checkpoint-every resumes it bit
// for bit) and owns:
//   - the curve window: every `every` updates and after the last (shorter) window, a
//     TrainingWindow (mean loss and mean gradient norm over the window's updates, the learning
//     rate of its last update, the training time so far) goes to the window hook, which may add
//     rows, evaluate (the model is in eval mode during the hook) and ask to stop early;
//     curve(...) installs the common hook that writes one row per window
//     (id columns, then step, train_loss, grad_norm, lr);
//   - the timer: wall-clock seconds of the updates, without the time spent in window hooks (so
//     evaluation does not count as training time);
//   - divergence: train_loop's rule (a non-finite loss, gradient norm or final parameter is a
//     result: diverged at that step, never an exception), an optional loss blow-up rule (the mean
//     loss of the last `window` updates above a threshold), and the non-finite-test-loss rule
//     after evaluation (PhaseResult::check_test_loss);
//   - the checkpoint registration of its own state (window sums, blow-up window); the caller adds
//     what its own hooks change (data streams, accumulators) with state().add(...).
// The model is put in train mode when run() starts and in eval mode when it returns. With
// --save-model, run() ends by writing the model's state_dict to
// <out>/models/<cell file stem>.<name>.safetensors (nn/safetensors.hpp; metadata: cell, phase,
// steps_done, diverged).
//
// Example (one phase; the loss closure draws a batch, runs forward and backward, returns the loss):
//   TrainingPhase phase(cell, out, model.get(), "train");
//   phase.steps(cell.get_int32("steps")).clip_norm(cell.get_real("clip_norm"))
//       .curve(cell.get_int32("log_every"), "steps", id);
//   phase.state().add("train_rng", train_rng);
//   const PhaseResult r = phase.run(model->parameters(), *optim, schedule, loss_and_grad);
#include <cstddef>
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/table.hpp"
#include "seqlab/train/loop.hpp"

namespace seqlab::experiment {

/// The summary of one window of updates.
struct TrainingWindow {
  int step = 0;               // updates done at the end of the window (1-based)
  int updates = 0;            // updates in the window (the last one may be shorter)
  double mean_loss = 0;       // mean of their losses (as loss_and_grad returned them)
  double mean_grad_norm = 0;  // mean of their global gradient norms, before clipping
  double lr = 0;              // learning rate of the window's last update
  double train_time_s = 0;    // wall-clock seconds of the updates so far, window hooks excluded
};

/// What a phase did.
struct PhaseResult {
  bool diverged = false;
  int diverged_step = -1;               // 0-based step at which divergence was found
  std::string diverged_reason = "none"; // none | non_finite | loss_blowup | non_finite_test_loss
  std::string diverged_what;            // train_loop's description ("loss = nan"), or ""
  int steps_done = 0;                   // updates applied
  double last_loss = std::numeric_limits<double>::quiet_NaN();  // loss of the last applied update
  bool stopped_early = false;           // a window hook asked to stop
  double final_window_loss = std::numeric_limits<double>::quiet_NaN();  // mean loss, last window
  double train_time_s = 0;              // wall-clock seconds of the updates, window hooks excluded

  /// The rule every experiment applies after evaluating a phase that did not diverge: a test loss
  /// that is not finite (e.g. logits overflowing with finite parameters) is divergence at
  /// steps_done, reason "non_finite_test_loss". No effect if the run already diverged.
  void check_test_loss(double test_loss);
};

class TrainingPhase {
 public:
  /// Returns true to stop training after this window (e.g. a target accuracy reached).
  using WindowHook = std::function<bool(const TrainingWindow&)>;

  /// Phase `name` of `cell` (letters, digits, '_', '-'; unique within the cell: its checkpoint file
  /// is <cell prefix>.<name>.ckpt) training `model` (may be null: nothing saved of it and no mode
  /// switches), whose rows go to `out`. `out` and `model` must outlive the phase. The progress label
  /// defaults to "<name> <cell label>". Throws std::invalid_argument for a bad name.
  TrainingPhase(const Cell& cell, CellOutput& out, Module* model, std::string name);
  TrainingPhase(const TrainingPhase&) = delete;
  TrainingPhase& operator=(const TrainingPhase&) = delete;

  /// Number of updates, >= 0 (default 0).
  TrainingPhase& steps(int n);
  /// Maximum global gradient norm (clip_grad_norm); 0 = no clipping (default).
  TrainingPhase& clip_norm(double c);
  /// The progress line's prefix.
  TrainingPhase& label(std::string l);
  /// Calls `hook` every `every` (>= 1) updates and after the last update (file comment).
  TrainingPhase& every(int every, WindowHook hook);
  /// every(every, ...) with the hook that adds Row(id).add("step").add("train_loss")
  /// .add("grad_norm").add("lr") to `table` per window (train_loss and grad_norm: window means).
  TrainingPhase& curve(int every, std::string table, Row id);
  /// Called after every update with train_loop's record, before the window bookkeeping.
  TrainingPhase& on_step(std::function<void(const StepRecord&)> f);
  /// Divergence by loss blow-up: once `window` (>= 1) updates are done, the mean loss of the last
  /// `window` updates above `threshold` ends the run after that update: diverged at that step,
  /// reason "loss_blowup", steps_done = step + 1 (its update was applied).
  TrainingPhase& blowup(double threshold, std::size_t window);
  /// The checkpoint state: add every value the caller's closures change outside the model and the
  /// optimizer (data generators, accumulators), e.g. state().add("train_rng", rng).
  seqlab::CheckpointState& state() { return options_.checkpoint.state; }

  /// Runs the updates (train_loop with the options above) and returns what happened. The model is
  /// in train mode during the updates, in eval mode during window hooks and after the return.
  /// Exceptions of loss_and_grad and the hooks propagate; std::invalid_argument as train_loop.
  PhaseResult run(const std::vector<Parameter*>& params, Optimizer& optim,
                  const LrSchedule& schedule, const std::function<double(int step)>& loss_and_grad);

 private:
  const Cell& cell_;
  CellOutput& out_;
  Module* model_;
  std::string name_;
  TrainOptions options_;
  int every_ = 0;
  WindowHook hook_;
  std::function<void(const StepRecord&)> on_step_;
  double blowup_threshold_ = 0;
  std::size_t blowup_window_ = 0;
  // Checkpointed state of the phase itself.
  double window_loss_ = 0, window_norm_ = 0, final_window_loss_;
  int window_n_ = 0;
  std::deque<double> recent_;
  double recent_sum_ = 0;
};

}  // namespace seqlab::experiment

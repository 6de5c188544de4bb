#pragma once
// The training loop shared by every experiment. The caller's closure runs forward and backward
// (adding into Parameter::grad); the loop does the rest: zero grads, divergence check, clipping,
// learning-rate schedule, optimizer step, per-step callback, progress line, and optional
// checkpoints (train/checkpoint.hpp) from which a killed run resumes bit for bit.
// train_loop_accumulate is the same loop with each update accumulated over micro-batches,
// weighted by the positions each one scores, so a batch too large for memory trains exactly as
// if it were one.
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "seqlab/nn/parameter.hpp"
#include "seqlab/train/checkpoint.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

namespace seqlab {

struct TrainOptions {
  int steps = 0;          // number of optimizer updates, >= 0
  int micro_batches = 1;  // micro-batches per update (train_loop_accumulate), >= 1; train_loop
                          // calls its closure once per update and requires 1
  double clip_norm = 0;   // max global gradient norm (clip_grad_norm); 0: off; must be >= 0
  bool quiet = false;     // true: never draw the progress line
  std::string label;      // prefix of the progress line (e.g. "lstm T=100 seed 3")
  CheckpointOptions checkpoint;  // off by default (checkpoint.every = 0); see train_loop
};

/// One completed update. `loss` as returned by loss_and_grad; `grad_norm` the global gradient norm
/// BEFORE clipping; `lr` the learning rate used for this update.
struct StepRecord {
  int step;
  double loss;
  double grad_norm;
  double lr;
};

/// diverged: training produced a non-finite value. diverged_step is the 0-based index of the first
/// step that found it, and that step's update was not applied, so steps_done == diverged_step:
///   - a loss or gradient norm NaN/Inf at step s: diverged_step = s;
///   - parameters non-finite after the last update (the final check, which no later loss could
///     reveal): diverged_step = opt.steps, i.e. the step that would have come next; the update
///     that produced them is the last one, opt.steps − 1, and was applied.
/// steps_done: number of updates applied (== diverged_step when diverged, else opt.steps);
/// last_loss: loss of the last applied update (NaN if none).
/// diverged_what (extra): "loss = nan", "grad_norm = inf", "parameters non-finite (first:
/// <name> = nan)"; empty when not diverged.
struct TrainResult {
  bool diverged = false;
  int diverged_step = -1;
  int steps_done = 0;
  double last_loss = NAN;
  std::string diverged_what;
};

/// For step = 0 .. opt.steps−1:
///   1. zero the grads of `params` and of optim's parameters;
///   2. loss = loss_and_grad(step)   (caller: forward + backward, adding into grads);
///   3. if loss is NaN/Inf → diverged at `step`, stop;
///   4. n = global gradient norm of `params` (clipped to opt.clip_norm with clip_grad_norm when
///      clip_norm > 0); if n is NaN/Inf → diverged at `step`, stop (grads left unclipped);
///   5. optim.set_lr(schedule.lr_at(step)); optim.step();
///   6. on_step({step, loss, n, lr}) if set.
/// After the last step, if training did not diverge: if any value of `params` is NaN/Inf →
/// diverged with diverged_step = opt.steps (see TrainResult), diverged_what "parameters
/// non-finite (first: <name> = <value>)". (Earlier non-finite parameters show up as a non-finite
/// loss at the next step.)
/// Checkpoints (opt.checkpoint.every = N > 0):
///   - at start, if opt.checkpoint.path holds a checkpoint with this identity, written for
///     opt.steps updates, whose parameters, buffers, optimizer state and caller state match this
///     run, it is restored (all of it, restore_checkpoint) and the loop continues at its step k:
///     steps 0..k−1 are not run and on_step is not called for them (the caller's state restored
///     from the checkpoint holds what they produced); steps_done and last_loss start from the
///     checkpoint's. A checkpoint at k = opt.steps ends the run at once (a finished phase is
///     skipped). A file that cannot be used (unreadable, truncated, checksum mismatch, another
///     identity, another step count, a mismatch) is reported on stderr ("note: checkpoint
///     '<path>' ignored: <why>; training starts at step 0") and ignored: it never fails the run.
///   - after the update of step s and its on_step call, when s+1 is a multiple of N or s+1 =
///     opt.steps: capture_checkpoint is written atomically to opt.checkpoint.path (replacing the
///     previous one). Nothing is saved at a divergence or when loss_and_grad / on_step throws, so a
///     resumed run repeats those steps and ends the same way.
///   The result, the parameters, the optimizer state and every on_step record (the caller keeps
///   what it accumulates in opt.checkpoint.state) are bit for bit those of an uninterrupted run,
///   provided that all state the steps change is in the model (parameters and buffers), the
///   optimizer or opt.checkpoint.state.
///   A checkpoint that cannot be written is a runtime error (std::runtime_error naming the path and
///   the system error; the previous checkpoint file stays whole).
/// Divergence is a result, never an exception. Progress line: see Progress::for_stderr (stderr,
/// only when it is a terminal and !opt.quiet; nothing is written to stderr otherwise).
/// Throws std::invalid_argument before any step for opt.steps < 0, opt.clip_norm < 0 or NaN, a
/// null pointer in `params`, an empty loss_and_grad, an invalid schedule (LrSchedule::validate), or
/// opt.checkpoint.every < 0, or every > 0 with an empty path.
/// Exceptions thrown by loss_and_grad or on_step propagate (the progress line is ended first).
/// opt.micro_batches must be 1 (std::invalid_argument otherwise: micro-batches need
/// train_loop_accumulate, whose closure returns the loss sum and the scored count).
TrainResult train_loop(const TrainOptions& opt, const std::vector<Parameter*>& params,
                       Optimizer& optim, const LrSchedule& schedule,
                       const std::function<double(int step)>& loss_and_grad,
                       const std::function<void(const StepRecord&)>& on_step = {});

/// What a micro-batch closure returns: the sum of its per-position losses (reduction = sum, e.g.
/// CrossEntropyLoss(ignore, Reduction::sum) or its sum()) and the number of positions it scored
/// (CrossEntropyLoss::count(): targets that are not ignore_index). Its backward must be that of
/// the sum, adding into the grads.
struct LossSum {
  double sum = 0;
  std::size_t count = 0;
};

/// train_loop with gradient accumulation: each update is made of opt.micro_batches micro-batches
/// m = 0 .. M−1, for each of which loss_sum_and_grad(step, m) runs forward and backward of the
/// SUM of its losses and returns {sum_m, count_m}. Step 2 of train_loop becomes
///   n = Σ_m count_m;   loss = (Σ_m sum_m) / n;   every grad of `params` ← grad / n
/// (n = 0, nothing scored: loss = Σ_m sum_m = 0 and the grads are left as they are, i.e. zero for
/// a closure that follows this contract). So the update is the one of the whole batch's mean
/// over its scored positions, as torch's reduction='mean' over the concatenated batch, whatever
/// the split: micro-batches with per-position losses [1] and [2, 2, 2] give loss 7 / 4 = 1.75
/// (not the mean of the means, 1.5) and the gradient of that mean. The grads equal the whole
/// batch's up to float rounding (sums in another order). If a micro-batch returns a non-finite
/// sum, the remaining micro-batches of that update are not run and the update diverges (step 3).
/// Everything else (clipping of the accumulated gradient, schedule, on_step with the update's
/// loss, checkpoints between updates, divergence, progress) is train_loop's, with the same
/// guarantees: all micro-batches of an update run between two checkpoints, so a resumed run is
/// bit for bit an uninterrupted one. With opt.micro_batches = 1 and count = 1 the loop is
/// exactly train_loop with loss_and_grad(step) = loss_sum_and_grad(step, 0).sum.
/// Throws std::invalid_argument as train_loop does, and for opt.micro_batches < 1.
TrainResult train_loop_accumulate(
    const TrainOptions& opt, const std::vector<Parameter*>& params, Optimizer& optim,
    const LrSchedule& schedule,
    const std::function<LossSum(int step, int micro_batch)>& loss_sum_and_grad,
    const std::function<void(const StepRecord&)>& on_step = {});

}  // namespace seqlab

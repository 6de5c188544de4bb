#pragma once
// The training loop shared by every experiment. The caller's closure runs forward and backward
// (adding into Parameter::grad); the loop does the rest: zero grads, divergence check, clipping,
// learning-rate schedule, optimizer step, per-step callback, progress line.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "seqlab/nn/parameter.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

namespace seqlab {

struct TrainOptions {
  int steps = 0;          // number of optimizer updates, >= 0
  double clip_norm = 0;   // max global gradient norm (clip_grad_norm); 0: off; must be >= 0
  bool quiet = false;     // true: never draw the progress line
  std::string label;      // prefix of the progress line (e.g. "lstm T=100 seed 3")
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
/// Divergence is a result, never an exception. Progress line: see Progress::for_stderr (stderr,
/// only when it is a terminal and !opt.quiet; nothing is written to stderr otherwise).
/// Throws std::invalid_argument before any step for opt.steps < 0, opt.clip_norm < 0 or NaN, a
/// null pointer in `params`, an empty loss_and_grad, or an invalid schedule (LrSchedule::validate).
/// Exceptions thrown by loss_and_grad or on_step propagate (the progress line is ended first).
TrainResult train_loop(const TrainOptions& opt, const std::vector<Parameter*>& params,
                       Optimizer& optim, const LrSchedule& schedule,
                       const std::function<double(int step)>& loss_and_grad,
                       const std::function<void(const StepRecord&)>& on_step = {});

}  // namespace seqlab

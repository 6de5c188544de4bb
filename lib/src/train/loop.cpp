#include "seqlab/train/loop.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "seqlab/train/clip.hpp"
#include "seqlab/train/progress.hpp"

namespace seqlab {
namespace {

std::string describe(const char* what, double v) {
  std::ostringstream m;
  m << what << " = " << v;  // "loss = nan", "grad_norm = inf"
  return m.str();
}

// Grads of `params` divided by n (n > 1), the mean over an update's scored positions.
void divide_grads(const std::vector<Parameter*>& params, std::size_t n) {
  const float inv = static_cast<float>(1.0 / static_cast<double>(n));
  for (Parameter* p : params) {
    float* g = p->grad.data();
    for (std::size_t i = 0, size = p->grad.size(); i < size; ++i) g[i] *= inv;
  }
}

}  // namespace

TrainResult train_loop(const TrainOptions& opt, const std::vector<Parameter*>& params,
                       Optimizer& optim, const LrSchedule& schedule,
                       const std::function<double(int step)>& loss_and_grad,
                       const std::function<void(const StepRecord&)>& on_step) {
  if (opt.micro_batches != 1)
    throw std::invalid_argument("train_loop: micro_batches = " + std::to_string(opt.micro_batches) +
                                "; must be 1 (train_loop_accumulate accumulates micro-batches)");
  // One micro-batch that scores "one position" with the closure's (mean) loss: no division, so
  // this is exactly the plain loop. An empty closure stays empty (train_loop_accumulate names it).
  std::function<LossSum(int, int)> one;
  if (loss_and_grad) one = [&loss_and_grad](int step, int) { return LossSum{loss_and_grad(step), 1}; };
  return train_loop_accumulate(opt, params, optim, schedule, one, on_step);
}

TrainResult train_loop_accumulate(
    const TrainOptions& opt, const std::vector<Parameter*>& params, Optimizer& optim,
    const LrSchedule& schedule,
    const std::function<LossSum(int step, int micro_batch)>& loss_sum_and_grad,
    const std::function<void(const StepRecord&)>& on_step) {
  if (opt.micro_batches < 1)
    throw std::invalid_argument("train_loop: micro_batches = " + std::to_string(opt.micro_batches) +
                                "; must be >= 1");
  if (opt.steps < 0)
    throw std::invalid_argument("train_loop: steps = " + std::to_string(opt.steps) + "; must be >= 0");
  if (!(opt.clip_norm >= 0.0)) {
    std::ostringstream m;
    m << "train_loop: clip_norm = " << opt.clip_norm << "; must be >= 0 (0 turns clipping off)";
    throw std::invalid_argument(m.str());
  }
  for (std::size_t k = 0; k < params.size(); ++k)
    if (params[k] == nullptr)
      throw std::invalid_argument("train_loop: params[" + std::to_string(k) +
                                  "] is a null pointer; every parameter must be non-null");
  if (!loss_sum_and_grad)
    throw std::invalid_argument("train_loop: loss_and_grad is empty; a callable is required");
  schedule.validate();
  const CheckpointOptions& ck = opt.checkpoint;
  if (ck.every < 0)
    throw std::invalid_argument("train_loop: checkpoint.every = " + std::to_string(ck.every) +
                                "; must be >= 0 (0 turns checkpoints off)");
  if (ck.every > 0 && ck.path.empty())
    throw std::invalid_argument(
        "train_loop: checkpoint.every = " + std::to_string(ck.every) +
        " but checkpoint.path is empty; a checkpoint file is required");

  TrainResult result;
  int first_step = 0;
  if (ck.every > 0) {
    try {
      if (const auto c = read_checkpoint(ck.path)) {
        if (c->identity != ck.identity) throw CheckpointError(identity_mismatch(c->identity, ck.identity));
        if (c->total_steps != opt.steps || c->step < 0 || c->step > opt.steps)
          throw CheckpointError("it was written at step " + std::to_string(c->step) + " of " +
                                std::to_string(c->total_steps) + ", this run has " +
                                std::to_string(opt.steps) + " steps");
        restore_checkpoint(*c, ck, params, optim);
        first_step = static_cast<int>(c->step);
        result.steps_done = first_step;
        result.last_loss = c->last_loss;
        if (ck.notes) {
          std::cerr << "note: " << (opt.label.empty() ? std::string() : opt.label + ": ")
                    << "resumed from checkpoint '" << ck.path << "' at step " << first_step
                    << " of " << opt.steps << std::endl;
        }
      }
    } catch (const CheckpointError& e) {
      const std::string why = e.what();
      const std::string shown = why.rfind("'" + ck.path + "'", 0) == 0
                                    ? why.substr(ck.path.size() + 4)  // drop "'<path>': "
                                    : why;
      std::cerr << "note: checkpoint '" << ck.path << "' ignored: " << shown
                << "; training starts at step 0" << std::endl;
    }
  }
  Progress progress = Progress::for_stderr(opt.steps, opt.label, opt.quiet);
  for (int step = first_step; step < opt.steps; ++step) {
    for (Parameter* p : params) p->zero_grad();
    optim.zero_grad();

    double total = 0.0;
    std::size_t scored = 0;
    for (int m = 0; m < opt.micro_batches && std::isfinite(total); ++m) {
      const LossSum part = loss_sum_and_grad(step, m);
      total += part.sum;
      scored += part.count;
    }
    double loss = total;
    if (std::isfinite(total) && scored > 1) {
      loss = total / static_cast<double>(scored);
      divide_grads(params, scored);
    }
    if (!std::isfinite(loss)) {
      result.diverged = true;
      result.diverged_step = step;
      result.diverged_what = describe("loss", loss);
      break;
    }
    const double norm =
        opt.clip_norm > 0 ? clip_grad_norm(params, opt.clip_norm) : global_grad_norm(params);
    if (!std::isfinite(norm)) {
      result.diverged = true;
      result.diverged_step = step;
      result.diverged_what = describe("grad_norm", norm);
      break;
    }
    const float lr = schedule.lr_at(step);
    optim.set_lr(lr);
    optim.step();
    result.steps_done = step + 1;
    result.last_loss = loss;
    if (on_step) on_step(StepRecord{step, loss, norm, static_cast<double>(lr)});
    progress.update(step + 1, loss);
    if (ck.every > 0 && ((step + 1) % ck.every == 0 || step + 1 == opt.steps)) {
      write_checkpoint(ck.path, capture_checkpoint(ck, params, optim, step + 1, opt.steps, loss));
    }
  }
  progress.finish();
  if (!result.diverged) {
    // The last update's effect on the parameters is seen by no later loss: check them directly.
    for (const Parameter* p : params) {
      const auto bad = std::find_if(p->value.begin(), p->value.end(),
                                    [](float v) { return !std::isfinite(v); });
      if (bad != p->value.end()) {
        result.diverged = true;
        result.diverged_step = opt.steps;
        result.diverged_what = "parameters non-finite (first: " +
                               describe(p->name.empty() ? "?" : p->name.c_str(), *bad) + ")";
        break;
      }
    }
  }
  return result;
}

}  // namespace seqlab

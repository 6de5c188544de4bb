#include "seqlab/train/loop.hpp"

#include <algorithm>
#include <cmath>
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

}  // namespace

TrainResult train_loop(const TrainOptions& opt, const std::vector<Parameter*>& params,
                       Optimizer& optim, const LrSchedule& schedule,
                       const std::function<double(int step)>& loss_and_grad,
                       const std::function<void(const StepRecord&)>& on_step) {
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
  if (!loss_and_grad)
    throw std::invalid_argument("train_loop: loss_and_grad is empty; a callable is required");
  schedule.validate();

  TrainResult result;
  Progress progress = Progress::for_stderr(opt.steps, opt.label, opt.quiet);
  for (int step = 0; step < opt.steps; ++step) {
    for (Parameter* p : params) p->zero_grad();
    optim.zero_grad();

    const double loss = loss_and_grad(step);
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

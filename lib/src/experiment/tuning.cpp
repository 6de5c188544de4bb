// Learning-rate pilot and early stopping (tuning.hpp).
#include "seqlab/experiment/tuning.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace seqlab::experiment {

LrChoice choose_lr(const std::vector<double>& grid, const std::function<double(double lr)>& trial) {
  if (grid.empty()) throw std::invalid_argument("choose_lr: empty learning-rate grid");
  for (double lr : grid)
    if (!(lr > 0) || !std::isfinite(lr))
      throw std::invalid_argument("choose_lr: learning rate " + std::to_string(lr) +
                                  " in the grid; every value must be finite and > 0");
  LrChoice c;
  c.lr = grid.front();
  bool found = false;
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const double v = trial(grid[i]);
    c.val_loss.push_back(v);
    if (std::isfinite(v) && (!found || v < best)) {
      found = true;
      best = v;
      c.lr = grid[i];
      c.index = i;
    }
  }
  c.all_diverged = !found;
  return c;
}

EarlyStopping::EarlyStopping(int patience, double min_delta) : patience_(patience), min_delta_(min_delta) {
  if (patience < 1) throw std::invalid_argument("EarlyStopping: patience " + std::to_string(patience) + " < 1");
  if (!(min_delta >= 0) || !std::isfinite(min_delta))
    throw std::invalid_argument("EarlyStopping: min_delta must be finite and >= 0");
}

bool EarlyStopping::update(double val_loss, int step) {
  const bool first = best_step_ < 0;
  const bool better = std::isfinite(val_loss) &&
                      (first || val_loss < best_ - std::fabs(best_) * min_delta_);
  if (better) {
    best_ = val_loss;
    best_step_ = step;
    bad_ = 0;
    return false;
  }
  ++bad_;
  return bad_ >= patience_;
}

void EarlyStopping::register_state(CheckpointState& state, const std::string& prefix) {
  state.add(prefix + ".best", best_);
  state.add(prefix + ".best_step", best_step_);
  state.add(prefix + ".since_best", bad_);
}

}  // namespace seqlab::experiment

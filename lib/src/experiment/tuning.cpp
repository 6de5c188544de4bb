// Learning-rate pilot and early stopping (tuning.hpp).
#include "seqlab/experiment/tuning.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/io.hpp"

namespace seqlab::experiment {

namespace {

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

/// The stored choice if `path` holds one for `identity` and `grid`.
std::optional<LrChoice> load_pilot(const std::string& path, const std::string& identity,
                                   const std::vector<double>& grid) {
  const auto text = read_text_file(path);
  if (!text) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(*text);
    if (j.at("identity").get<std::string>() != identity) return std::nullopt;
    if (j.at("grid").get<std::vector<double>>() != grid) return std::nullopt;
    LrChoice c;
    c.lr = j.at("lr").get<double>();
    c.index = j.at("index").get<std::size_t>();
    c.all_diverged = j.at("all_diverged").get<bool>();
    for (const auto& v : j.at("val_loss"))
      c.val_loss.push_back(v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
    if (c.val_loss.size() != grid.size() || c.index >= grid.size() || c.lr != grid[c.index]) return std::nullopt;
    return c;
  } catch (const std::exception&) {
    return std::nullopt;  // damaged or foreign: recomputed
  }
}

/// An exclusive flock(2) held for the object's lifetime (no lock if the file cannot be opened or
/// locked: the caller then just computes).
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

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

LrChoice shared_choose_lr(const Cell& cell, const std::string& group, const std::vector<double>& grid,
                          const std::function<double(double lr)>& trial) {
  if (cell.pilot_dir.empty() || cell.build_identity.empty()) return choose_lr(grid, trial);
  const std::string identity = group + cell.build_identity;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(identity)));
  std::filesystem::create_directories(cell.pilot_dir);
  const std::string path = (std::filesystem::path(cell.pilot_dir) / (std::string(hex) + ".json")).string();
  const FileLock lock(path + ".lock");
  if (auto stored = load_pilot(path, identity, grid)) return *stored;
  const LrChoice c = choose_lr(grid, trial);
  nlohmann::json losses = nlohmann::json::array();
  for (double v : c.val_loss) losses.push_back(number_or_null(v));
  const nlohmann::json j = {{"identity", identity}, {"grid", grid}, {"val_loss", losses},
                            {"lr", c.lr}, {"index", c.index}, {"all_diverged", c.all_diverged}};
  write_file_atomic(path, j.dump(1) + "\n");
  return c;
}

}  // namespace seqlab::experiment

#include "seqlab/train/schedule.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace seqlab {
namespace {

/// Shortest decimal form that reads back as the same float ("0.1", not "0.100000001").
std::string num(float v) {
  for (int precision = 1; precision <= 9; ++precision) {
    std::ostringstream s;
    s.precision(precision);
    s << v;
    if (std::isnan(v) || std::strtof(s.str().c_str(), nullptr) == v) return s.str();
  }
  return std::to_string(v);
}
std::string num(int v) { return std::to_string(v); }
std::string num(const std::string& v) { return v; }

template <class T>
[[noreturn]] void bad(const char* field, const T& value, const std::string& allowed) {
  throw std::invalid_argument(std::string("LrSchedule: ") + field + " = " + num(value) + "; " + allowed);
}

constexpr double kPi = 3.14159265358979323846;

}  // namespace

void LrSchedule::validate() const {
  if (kind != "constant" && kind != "cosine" && kind != "inverse_sqrt")
    bad("kind", "\"" + kind + "\"", "must be one of constant, cosine, inverse_sqrt");
  if (!(base_lr > 0.0f) || !std::isfinite(base_lr)) bad("base_lr", base_lr, "must be > 0 and finite");
  if (warmup_steps < 0) bad("warmup_steps", warmup_steps, "must be >= 0");
  if (kind == "inverse_sqrt" && warmup_steps < 1)
    bad("warmup_steps", warmup_steps,
        "must be >= 1 for kind inverse_sqrt (lr = base_lr * sqrt(warmup_steps / (step + 1)))");
  if (kind == "cosine") {
    if (total_steps < 1) bad("total_steps", total_steps, "must be >= 1 for kind cosine");
    if (total_steps < warmup_steps) {
      bad("total_steps", total_steps,
          "must be >= warmup_steps (" + num(warmup_steps) + ") for kind cosine");
    }
    if (!(min_lr >= 0.0f) || !(min_lr <= base_lr)) {
      bad("min_lr", min_lr, "must be in [0, base_lr] = [0, " + num(base_lr) + "] for kind cosine");
    }
  }
}

float LrSchedule::lr_at(int step) const {
  if (step < 0) bad("lr_at step", step, "must be >= 0");
  validate();
  const double t = static_cast<double>(step) + 1.0;  // updates done once this one is made
  const double eta = base_lr, W = warmup_steps;
  if (warmup_steps > 0 && t <= W) return static_cast<float>(eta * t / W);
  if (kind == "constant") return base_lr;
  if (kind == "inverse_sqrt") return static_cast<float>(eta * std::sqrt(W / t));
  // cosine
  const double N = total_steps, eta_min = min_lr;
  if (t > N) return min_lr;
  const double progress = (t - W) / (N - W + 1.0);  // T_cur / T_max in (0, 1): W < t <= N here
  return static_cast<float>(eta_min + 0.5 * (eta - eta_min) * (1.0 + std::cos(kPi * progress)));
}

}  // namespace seqlab

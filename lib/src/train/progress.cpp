#include "seqlab/train/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

namespace seqlab {
namespace {

double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Progress::Progress(int total, std::string label, std::ostream* out, Clock clock, double min_interval_s)
    : total_(total),
      label_(std::move(label)),
      out_(out),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)),
      min_interval_s_(min_interval_s) {
  start_ = last_draw_ = clock_();
}

Progress Progress::for_stderr(int total, std::string label, bool quiet) {
  return Progress(total, std::move(label), (!quiet && stderr_is_terminal()) ? &std::cerr : nullptr);
}

bool Progress::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

Progress::~Progress() {
  try {
    finish();
  } catch (...) {  // never throw from a destructor (it may run during unwinding)
  }
}

void Progress::update(int done, double loss) {
  if (!out_ || finished_) return;
  done_ = done;
  loss_ = loss;
  updated_ = true;
  dirty_ = true;
  const double now = clock_();
  if (now - last_draw_ >= min_interval_s_ || (total_ > 0 && done >= total_)) draw(now);
}

void Progress::finish() {
  if (!out_ || finished_) return;
  finished_ = true;
  if (!updated_) return;
  if (dirty_) draw(clock_());
  *out_ << '\n';
  out_->flush();
}

void Progress::draw(double now) {
  const double elapsed = now - start_;
  const double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  // One write per redraw: '\r', the text, ESC[K (erase to the end of the line).
  const std::string line = "\r" + format_line(label_, done_, total_, loss_, rate) + "\x1b[K";
  *out_ << line;
  out_->flush();
  last_draw_ = now;
  dirty_ = false;
}

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const long long s = std::llround(seconds);
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", s / 3600, (s / 60) % 60, s % 60);
  }
  return buf;
}

std::string Progress::format_line(const std::string& label, int done, int total, double loss,
                                  double steps_per_s) {
  std::string out;
  if (!label.empty()) out += label + ": ";
  out += "step " + std::to_string(done);
  if (total > 0) out += "/" + std::to_string(total);
  char buf[64];
  std::snprintf(buf, sizeof buf, "  loss %.4g", loss);
  out += buf;
  const bool have_rate = std::isfinite(steps_per_s) && steps_per_s > 0;
  if (have_rate) {
    std::snprintf(buf, sizeof buf, "  %.1f steps/s", steps_per_s);
    out += buf;
  } else {
    out += "  -- steps/s";
  }
  if (total > 0) {
    const double eta = have_rate ? (total - done) / steps_per_s : NAN;
    out += "  ETA " + format_duration(eta < 0 ? 0 : eta);
  }
  return out;
}

}  // namespace seqlab

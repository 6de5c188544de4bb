#pragma once
// A single self-overwriting progress line for long training runs:
//   "<label>: step 1200/5000  loss 2.3456  38.2 steps/s  ETA 1m39s"
// redrawn in place with '\r' (and ESC[K to clear the rest of the line), at most once per
// `min_interval_s` (0.5 s by default), always at the last step, and ended with a newline by
// finish() (or the destructor). It writes nothing at all when disabled, so a run whose stderr is a
// file or a pipe stays clean.
#include <functional>
#include <iosfwd>
#include <string>

namespace seqlab {

class Progress {
 public:
  /// Monotonic time in seconds (default: std::chrono::steady_clock). Injectable for tests.
  using Clock = std::function<double()>;

  /// Writes to `out`; `out == nullptr` disables all output. `total` is the number of steps (> 0 to
  /// show "x/total" and an ETA; <= 0 shows only the step count).
  Progress(int total, std::string label, std::ostream* out, Clock clock = {},
           double min_interval_s = 0.5);
  /// The progress line for a training loop: on std::cerr only when `!quiet` and stderr is a
  /// terminal (isatty(STDERR_FILENO)); disabled otherwise.
  static Progress for_stderr(int total, std::string label, bool quiet);
  /// True when file descriptor 2 is a terminal.
  static bool stderr_is_terminal();

  // Not copyable or movable (the destructor writes); for_stderr returns a prvalue (C++17 elision).
  Progress(Progress&&) = delete;
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();

  /// `done` steps finished, latest loss `loss` (any double; NaN prints "nan"). Redraws the line if
  /// min_interval_s has passed since the last redraw (or since construction) or done == total.
  void update(int done, double loss);
  /// Redraws the line with the latest state if that was not shown yet, then writes '\n'.
  /// Only if at least one update() happened; idempotent.
  void finish();
  bool enabled() const { return out_ != nullptr; }

  /// The text of the line (no '\r', no escape codes), e.g.
  /// format_line("lstm", 10, 100, 0.5, 30.0) == "lstm: step 10/100  loss 0.5  30.0 steps/s  ETA 3s".
  /// rate <= 0 or not finite shows "-- steps/s" and "ETA --".
  static std::string format_line(const std::string& label, int done, int total, double loss,
                                 double steps_per_s);
  /// "45s", "3m07s", "2h05m09s" (rounded to whole seconds); "--" for negative or non-finite.
  static std::string format_duration(double seconds);

 private:
  void draw(double now);

  int total_;
  std::string label_;
  std::ostream* out_;
  Clock clock_;
  double min_interval_s_;
  double start_ = 0, last_draw_ = 0;
  int done_ = 0;
  double loss_ = 0;
  bool updated_ = false, dirty_ = false, finished_ = false;
};

}  // namespace seqlab

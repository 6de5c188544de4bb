#pragma once
// Timing through Google Benchmark (1.7.1), driven from the experiment's grid: cases are registered
// with benchmark::RegisterBenchmark, run with benchmark::RunSpecifiedBenchmarks and a reporter
// that captures the runs instead of printing, then cleared, so one process can run many points one
// after another. Real (wall-clock) time, since OpenBLAS runs its own threads
// (shared/notes/pitfalls.md, "Google Benchmark"). Plus the memory probes of the experiment.
//
// Interleaved rounds: the repetitions of the cases of one point are not run back to back (GB's
// Repetitions) but in rounds, every case once per round, in order: round 0 lets Google Benchmark
// choose each case's iteration count (the fewest iterations lasting min_time_s, × 1.4, GB's
// rule), rounds 1 .. repetitions−1 run exactly that many iterations. A drift of the machine's
// speed (frequency, another process) then affects the cases of a round alike, so ratios of two
// cases of the same round (a speedup: 1 thread against N) are paired, and their spread over the
// rounds is the interval the plots report.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

namespace parallel_speedup {

/// One benchmark case: a unique name and the function Google Benchmark calls (it must run the
/// `for (auto _ : state)` loop; setup before the loop is not timed).
struct BenchCase {
  std::string name;
  std::function<void(benchmark::State&)> fn;
};

struct TimingOptions {
  int repetitions = 3;      // rounds (file comment), >= 1
  double min_time_s = 0.05; // minimum time of round 0's run of each case, seconds (Benchmark::MinTime)
};

/// Seconds per iteration of one case in every round (round order), their median, minimum and
/// maximum, and the iterations of one round.
struct Timing {
  std::vector<double> round_s;
  double median_s = 0, min_s = 0, max_s = 0;
  std::int64_t iterations = 0;
  int repetitions = 0;
};

/// Fills t's median, minimum and maximum from the finite values of t.round_s (all NaN when none),
/// its repetitions (the rounds, every value of round_s) and iterations (per round).
void finish_timing(Timing& t, std::int64_t iterations);

/// Runs every case in interleaved rounds (file comment) with UseRealTime and returns their
/// timings in the order of `cases`. Initialises Google Benchmark on the first call. Throws
/// std::runtime_error naming the case if one skipped with an error (State::SkipWithError) or
/// produced no run.
std::vector<Timing> run_benchmarks(const std::vector<BenchCase>& cases, const TimingOptions& opt);

/// Times `forward()` (and `backward()` after it when `with_backward`) in the benchmark loop of
/// `state`. The first call of a case (`*warmed` false) makes one untimed warm-up call of each first
/// (layers allocate their caches on the first call with a new shape) and sets *warmed; later
/// calls (the other rounds) time at once. As time_passes of experiments/bench/bench_layers.cpp.
template <class Forward, class Backward>
void time_passes(benchmark::State& state, bool with_backward, bool* warmed, Forward forward,
                 Backward backward) {
  if (!*warmed) {
    auto y = forward();
    benchmark::DoNotOptimize(y.data());
    if (with_backward) {
      auto dx = backward();
      benchmark::DoNotOptimize(dx.data());
    }
    *warmed = true;
  }
  for (auto _ : state) {
    auto y = forward();
    benchmark::DoNotOptimize(y.data());
    if (with_backward) {
      auto dx = backward();
      benchmark::DoNotOptimize(dx.data());
    }
    benchmark::ClobberMemory();
  }
}

/// Sets the thread budget (seqlab::set_num_threads: OpenBLAS threads) for its lifetime, then
/// restores the previous budget, also when an exception leaves the scope.
class ThreadBudget {
 public:
  explicit ThreadBudget(int n);
  ~ThreadBudget();
  ThreadBudget(const ThreadBudget&) = delete;
  ThreadBudget& operator=(const ThreadBudget&) = delete;

 private:
  int previous_;
};

/// Bytes of heap memory in use (glibc mallinfo2: uordblks + hblkhd, every arena and the mmapped
/// chunks), for the heap growth of one forward.
std::size_t heap_in_use_bytes();

}  // namespace parallel_speedup

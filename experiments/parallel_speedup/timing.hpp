#pragma once
// Timing through Google Benchmark (1.7.1), driven from the experiment's grid: cases are registered
// with benchmark::RegisterBenchmark, run with benchmark::RunSpecifiedBenchmarks and a reporter
// that captures every repetition instead of printing, then cleared, so one process can run many
// points one after another. Real (wall-clock) time, since OpenBLAS runs its own threads
// (shared/notes/pitfalls.md, "Google Benchmark"). Plus the memory probes of the experiment.
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
  int repetitions = 3;      // Google Benchmark repetitions (independent timed runs), >= 1
  double min_time_s = 0.05; // minimum time of each repetition, seconds (Benchmark::MinTime)
};

/// Seconds per iteration of one case: median, minimum and maximum over the repetitions (each
/// repetition's real time divided by its iterations), and the iterations of one repetition.
struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  std::int64_t iterations = 0;
  int repetitions = 0;
};

/// Runs every case (in order) with UseRealTime, the given repetitions and min time, and returns
/// their timings in the same order. Initialises Google Benchmark on the first call. Throws
/// std::runtime_error naming the case if one skipped with an error (State::SkipWithError) or
/// produced no repetition.
std::vector<Timing> run_benchmarks(const std::vector<BenchCase>& cases, const TimingOptions& opt);

/// Times `forward()` (and `backward()` after it when `with_backward`) in the benchmark loop of
/// `state`, after one untimed warm-up call of each (layers allocate their caches on the first
/// call with a new shape); as time_passes of experiments/bench/bench_layers.cpp.
template <class Forward, class Backward>
void time_passes(benchmark::State& state, bool with_backward, Forward forward, Backward backward) {
  {
    auto y = forward();
    benchmark::DoNotOptimize(y.data());
    if (with_backward) {
      auto dx = backward();
      benchmark::DoNotOptimize(dx.data());
    }
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

/// Peak resident set size of this process so far, bytes (getrusage ru_maxrss × 1024).
std::size_t peak_rss_bytes();

}  // namespace parallel_speedup

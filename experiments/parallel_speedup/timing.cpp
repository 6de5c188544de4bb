// Google Benchmark driver and memory probes (timing.hpp).
#include "timing.hpp"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "seqlab/core/threads.hpp"

namespace parallel_speedup {
namespace {

/// Keeps the iteration run(s) of every benchmark by name; prints nothing.
class CaptureReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const std::string name = r.run_name.function_name;
      if (r.error_occurred) {
        errors[name] = r.error_message;
        continue;
      }
      if (r.run_type != Run::RT_Iteration) continue;  // aggregates: computed here instead
      if (r.iterations <= 0) continue;
      per_iteration_s[name].push_back(r.real_accumulated_time / static_cast<double>(r.iterations));
      iterations[name] = r.iterations;
    }
  }
  std::map<std::string, std::vector<double>> per_iteration_s;
  std::map<std::string, std::int64_t> iterations;
  std::map<std::string, std::string> errors;
};

void initialise_once() {
  static bool done = false;
  if (done) return;
  static char name[] = "parallel_speedup";
  static char* argv[] = {name, nullptr};
  int argc = 1;
  benchmark::Initialize(&argc, argv);
  done = true;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<Timing> run_benchmarks(const std::vector<BenchCase>& cases, const TimingOptions& opt) {
  initialise_once();
  std::vector<Timing> out(cases.size());
  std::vector<std::int64_t> iterations(cases.size(), 0);
  for (int round = 0; round < opt.repetitions; ++round) {
    benchmark::ClearRegisteredBenchmarks();
    for (std::size_t i = 0; i < cases.size(); ++i) {
      auto fn = cases[i].fn;
      auto* b = benchmark::RegisterBenchmark(cases[i].name.c_str(), [fn](benchmark::State& s) { fn(s); })
                    ->Repetitions(1)
                    ->UseRealTime()
                    ->Unit(benchmark::kMillisecond);
      if (round == 0) {
        b->MinTime(opt.min_time_s);  // Google Benchmark chooses the iteration count
      } else {
        b->Iterations(iterations[i]);  // the same count in every later round
      }
    }
    CaptureReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::ClearRegisteredBenchmarks();
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::string& name = cases[i].name;
      const auto err = reporter.errors.find(name);
      if (err != reporter.errors.end())
        throw std::runtime_error("benchmark " + name + " failed: " + err->second);
      const auto it = reporter.per_iteration_s.find(name);
      if (it == reporter.per_iteration_s.end() || it->second.empty())
        throw std::runtime_error("benchmark " + name + " produced no timed run");
      out[i].round_s.push_back(it->second.back());
      if (round == 0) iterations[i] = reporter.iterations[name];
    }
  }
  for (std::size_t i = 0; i < cases.size(); ++i) finish_timing(out[i], iterations[i]);
  return out;
}

void finish_timing(Timing& t, std::int64_t iterations) {
  std::vector<double> known;
  for (double v : t.round_s)
    if (std::isfinite(v)) known.push_back(v);
  if (known.empty()) known.push_back(std::nan(""));
  t.median_s = median_of(known);
  t.min_s = *std::min_element(known.begin(), known.end());
  t.max_s = *std::max_element(known.begin(), known.end());
  t.iterations = iterations;
  t.repetitions = static_cast<int>(t.round_s.size());
}

ThreadBudget::ThreadBudget(int n) : previous_(seqlab::num_threads()) { seqlab::set_num_threads(n); }
ThreadBudget::~ThreadBudget() { seqlab::set_num_threads(previous_); }

std::size_t heap_in_use_bytes() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

}  // namespace parallel_speedup

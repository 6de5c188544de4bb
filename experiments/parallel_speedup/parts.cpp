// The timed parts and their rows (parts.hpp).
#include "parts.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "seqlab/core/gemm.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/models/factory.hpp"

namespace parallel_speedup {

using namespace seqlab;
using seqlab::experiment::Cell;
using seqlab::experiment::CellOutput;
using seqlab::experiment::Row;

namespace {

constexpr const char* kName = "parallel_speedup";
constexpr std::uint64_t kInitStream = 1;  // weights and inputs of the timed stacks

/// x [B, T, D] filled with U(-1, 1).
Tensor3 random_tensor(std::size_t B, std::size_t T, std::size_t D, Rng& rng) {
  Tensor3 x = Tensor3::from_shape({B, T, D});
  rng.fill_uniform(x, -1.0f, 1.0f);
  return x;
}

TimingOptions timing_options(const Cell& c) {
  TimingOptions opt;
  opt.repetitions = c.get_int32("repetitions");
  opt.min_time_s = c.get_real("min_time_s");
  return opt;
}

/// The kernel a forward of `stack` at seq_len T runs: "fused" / "materialised", "none" outside
/// the attention families.
std::string kernel_at(const LayerStack& stack, std::size_t T) {
  if (!stack.config().is_attention()) return "none";
  return stack.uses_fused(T) ? "fused" : "materialised";
}

PointInfo point_info(const Cell& c, const std::string& part, const LayerStack& stack, std::size_t B,
                     std::size_t T) {
  const StackConfig& sc = stack.config();
  PointInfo p;
  p.part = part;
  p.model = sc.model;
  p.kernel = kernel_at(stack, T);
  p.match = c.get_string("match");
  p.batch = B;
  p.d_model = sc.d_model;
  p.hidden_size = sc.output_size();
  p.num_layers = sc.model == "tcn" ? sc.tcn_levels : sc.num_layers;
  p.n_heads = sc.is_attention() ? sc.n_heads : 0;
  p.d_ff = sc.is_transformer() ? sc.d_ff : 0;
  p.kernel_size = sc.model == "tcn" ? sc.kernel_size : 0;
  p.seed = c.replicate;
  p.seq_len = T;
  return p;
}

/// Bytes kept for backward by the first forward on x, for every kernel of memory_kernels (an
/// attention family) or once: the heap growth (mallinfo2) of a fresh stack's first forward minus
/// its output, after a throwaway stack of the same shape ran once (so one-time allocations of the
/// code path and malloc's adaptive mmap threshold, raised when a large chunk is freed, are in the
/// same state for every point), next to the analytic count (stack.hpp).
void add_memory_rows(const Cell& c, CellOutput& out, const std::string& part, const StackConfig& sc,
                     const Tensor3& x) {
  const std::size_t B = x.shape()[0], T = x.shape()[1];
  const std::vector<std::string> kernels =
      sc.is_attention() ? c.get_string_list("memory_kernels") : std::vector<std::string>{sc.attention_kernel};
  for (const std::string& kernel : kernels) {
    StackConfig k = sc;
    k.attention_kernel = kernel;
    {
      Rng warm_rng(0);
      LayerStack warm(k, warm_rng);
      warm.forward(x);
    }
    Rng rng(1);
    LayerStack stack(k, rng);
    const std::size_t before = heap_in_use_bytes();
    const Tensor3 y = stack.forward(x);
    const std::size_t after = heap_in_use_bytes();
    const double measured = static_cast<double>(after) - static_cast<double>(before) -
                            static_cast<double>(y.size() * sizeof(float));
    out.add_row(Row()
                    .add("experiment", kName)
                    .add("part", part)
                    .add("model", sc.model)
                    .add("kernel", kernel_at(stack, T))
                    .add("batch", B)
                    .add("d_model", sc.d_model)
                    .add("hidden_size", sc.output_size())
                    .add("n_heads", sc.is_attention() ? sc.n_heads : 0)
                    .add("d_ff", sc.is_transformer() ? sc.d_ff : 0)
                    .add("seq_len", T)
                    .add("activation_bytes", activation_bytes(k, double(B), double(T), stack.uses_fused(T)))
                    .add("activation_bytes_measured", measured),
                "memory");
  }
}

/// The implementation's sequential steps of a forward at T (the factory model's, checked against
/// the built layers'; self_attention has no factory family).
std::size_t checked_sequential_steps(const LayerStack& stack, std::size_t T) {
  const std::size_t steps = stack.sequential_steps(T);
  if (stack.config().model == "self_attention") return steps;
  Rng rng(0);
  const std::size_t factory = make_model(model_config(stack.config()), rng)->sequential_steps(T);
  if (factory != steps)
    throw std::logic_error("sequential_steps: factory model says " + std::to_string(factory) +
                           ", the layer stack " + std::to_string(steps));
  return steps;
}

/// Times one point: `passes` (false: forward, true: forward+backward) × `threads`, interleaved
/// rounds; adds the memory, main and rounds rows. `sgemm` (per thread count) may be empty.
void time_point(const Cell& c, CellOutput& out, const std::string& part, const StackConfig& sc, std::size_t B,
                std::size_t T, const std::vector<bool>& passes, const std::vector<std::int64_t>& threads,
                const std::vector<double>& sgemm) {
  Rng rng(derive_seed(c.stream_seed(kInitStream), B, T, sc.d_model));
  LayerStack stack(sc, rng);
  const Tensor3 x = random_tensor(B, T, sc.d_model, rng);
  const Tensor3 dy = random_tensor(B, T, sc.output_size(), rng);
  add_memory_rows(c, out, part, sc, x);
  const std::size_t steps = checked_sequential_steps(stack, T);

  std::vector<BenchCase> cases;
  const std::size_t n_cases = passes.size() * threads.size();
  std::unique_ptr<bool[]> warmed(new bool[n_cases]());
  for (bool bwd : passes)
    for (std::int64_t n : threads) {
      bool* w = &warmed[cases.size()];
      cases.push_back({std::string(bwd ? "forward_backward" : "forward") + "/threads=" + std::to_string(n),
                       [&, bwd, n, w](benchmark::State& st) {
                         const ThreadBudget budget(static_cast<int>(n));
                         time_passes(st, bwd, w, [&] { return stack.forward(x); }, [&] { return stack.backward(dy); });
                       }});
    }
  const std::vector<Timing> t = run_benchmarks(cases, timing_options(c));
  const double fwd_flops = forward_flops(sc, double(B), double(T));
  PointInfo p = point_info(c, part, stack, B, T);
  p.n_params = stack.num_parameters();
  p.sequential_steps = steps;
  p.tokens = double(B * T);
  std::size_t i = 0;
  for (bool bwd : passes) {
    double ref = NAN;  // the 1-thread time of this pass (thread_counts contains 1)
    for (std::size_t j = 0; j < threads.size(); ++j)
      if (threads[j] == 1) ref = t[i + j].median_s;
    for (std::size_t j = 0; j < threads.size(); ++j, ++i) {
      p.pass = bwd ? "forward_backward" : "forward";
      p.threads = static_cast<int>(threads[j]);
      p.flops = (bwd ? 3.0 : 1.0) * fwd_flops;
      p.speedup = ref / t[i].median_s;
      p.sgemm_gflop_per_s = sgemm.empty() ? NAN : sgemm[j];
      add_timing_rows(c, out, p, t[i]);
    }
  }
}

/// The machine's SGEMM rate at each thread count, GFLOP/s: C [N, N] = A [N, N] · Wᵀ (the layout
/// of every layer product in seqlab), median over the rounds.
std::vector<double> sgemm_rates(const std::vector<std::int64_t>& threads, std::size_t N, const TimingOptions& opt,
                                Rng& rng) {
  Tensor2 A = Tensor2::from_shape({N, N}), W = Tensor2::from_shape({N, N}), C = Tensor2::from_shape({N, N});
  rng.fill_uniform(A, -1.0f, 1.0f);
  rng.fill_uniform(W, -1.0f, 1.0f);
  std::vector<BenchCase> cases;
  for (std::int64_t n : threads) {
    cases.push_back({"sgemm/threads=" + std::to_string(n), [&, n](benchmark::State& st) {
                       const ThreadBudget budget(static_cast<int>(n));
                       gemm(false, true, N, N, N, 1.0f, A.data(), N, W.data(), N, 0.0f, C.data(), N);
                       for (auto _ : st) {
                         gemm(false, true, N, N, N, 1.0f, A.data(), N, W.data(), N, 0.0f, C.data(), N);
                         benchmark::DoNotOptimize(C.data());
                         benchmark::ClobberMemory();
                       }
                     }});
  }
  std::vector<double> rates;
  const double flops = 2.0 * static_cast<double>(N) * N * N;
  for (const Timing& x : run_benchmarks(cases, opt)) rates.push_back(flops / x.median_s / 1e9);
  return rates;
}

}  // namespace

const std::vector<std::string>& main_columns() {
  static const std::vector<std::string> c = {
      "experiment", "part", "model", "kernel", "match", "pass", "batch", "d_model", "hidden_size", "num_layers",
      "n_heads", "d_ff", "kernel_size", "n_params", "seed", "cores", "threads", "seq_len", "repetitions",
      "iterations", "time_ms_median", "time_ms_min", "time_ms_max", "tokens_per_s", "speedup",
      "parallel_efficiency", "flops", "gflop_per_s", "sgemm_gflop_per_s", "roofline_fraction",
      "sequential_steps"};
  return c;
}

const std::vector<std::string>& rounds_columns() {
  static const std::vector<std::string> c = {"experiment", "part", "model", "kernel", "pass", "batch", "d_model",
                                             "seq_len", "threads", "seed", "round", "iterations", "time_ms"};
  return c;
}

const std::vector<std::string>& memory_columns() {
  static const std::vector<std::string> c = {"experiment", "part", "model", "kernel", "batch", "d_model",
                                             "hidden_size", "n_heads", "d_ff", "seq_len", "activation_bytes",
                                             "activation_bytes_measured"};
  return c;
}

void add_timing_rows(const Cell& c, CellOutput& out, const PointInfo& p, const Timing& t) {
  (void)c;
  const double gflops = p.flops / t.median_s / 1e9;
  out.add_row(Row()
                  .add("experiment", kName)
                  .add("part", p.part)
                  .add("model", p.model)
                  .add("kernel", p.kernel)
                  .add("match", p.match)
                  .add("pass", p.pass)
                  .add("batch", p.batch)
                  .add("d_model", p.d_model)
                  .add("hidden_size", p.hidden_size)
                  .add("num_layers", p.num_layers)
                  .add("n_heads", p.n_heads)
                  .add("d_ff", p.d_ff)
                  .add("kernel_size", p.kernel_size)
                  .add("n_params", p.n_params)
                  .add("seed", p.seed)
                  .add("cores", hardware_threads())
                  .add("threads", p.threads)
                  .add("seq_len", p.seq_len)
                  .add("repetitions", t.repetitions)
                  .add("iterations", t.iterations)
                  .add("time_ms_median", 1e3 * t.median_s)
                  .add("time_ms_min", 1e3 * t.min_s)
                  .add("time_ms_max", 1e3 * t.max_s)
                  .add("tokens_per_s", p.tokens / t.median_s)
                  .add("speedup", p.speedup)
                  .add("parallel_efficiency", p.speedup / p.threads)
                  .add("flops", p.flops)
                  .add("gflop_per_s", gflops)
                  .add("sgemm_gflop_per_s", p.sgemm_gflop_per_s)
                  .add("roofline_fraction", gflops / p.sgemm_gflop_per_s)
                  .add("sequential_steps", p.sequential_steps));
  for (std::size_t r = 0; r < t.round_s.size(); ++r)
    out.add_row(Row()
                    .add("experiment", kName)
                    .add("part", p.part)
                    .add("model", p.model)
                    .add("kernel", p.kernel)
                    .add("pass", p.pass)
                    .add("batch", p.batch)
                    .add("d_model", p.d_model)
                    .add("seq_len", p.seq_len)
                    .add("threads", p.threads)
                    .add("seed", p.seed)
                    .add("round", r)
                    .add("iterations", t.iterations)
                    .add("time_ms", 1e3 * t.round_s[r]),
                "rounds");
}

StackConfig stack_config(const Cell& c, const std::string& model, std::size_t D, std::size_t h, std::size_t F,
                         std::size_t T) {
  StackConfig sc;
  sc.model = model;
  sc.d_model = D;
  sc.hidden_size = D;
  sc.num_layers = c.get_size("num_layers");
  sc.n_heads = h;
  sc.d_ff = F;
  sc.kernel_size = c.get_size("kernel_size");
  sc.norm_placement = c.get_string("norm_placement");
  sc.attention_kernel = c.get_string("attention_kernel");
  if (model == "tcn") sc.tcn_levels = tcn_levels_for(T, sc.kernel_size);
  StackConfig ref = sc;
  ref.model = "transformer_encoder";
  const std::size_t budget = count_parameters(model_config(ref));  // validates D, h, F
  if (c.get_string("match") == "params" && !sc.is_attention())
    sc.hidden_size = hidden_size_for_budget(model_config(sc), budget).hidden_size;
  if (sc.model != "self_attention") model_config(sc).validate();
  return sc;
}

std::size_t crossover_heads(const Cell& c, std::size_t d) {
  return std::max<std::size_t>(1, d / c.get_size("crossover_head_dim"));
}

std::vector<std::pair<std::size_t, std::size_t>> crossover_points(const Cell& c, const std::string& model) {
  const double lo = c.get_real("crossover_ratio_min");
  const bool wide = model == "tcn" || model == "self_attention" || model == "transformer_encoder" ||
                    model == "transformer_decoder";
  const double hi = wide ? std::max(c.get_real("crossover_tcn_ratio_max"), c.get_real("crossover_ratio_max"))
                         : c.get_real("crossover_ratio_max");
  const double cap = c.get_real("crossover_max_gflop") * 1e9;
  const double B = static_cast<double>(c.get_size("crossover_batch"));
  std::vector<std::pair<std::size_t, std::size_t>> pts;
  for (std::int64_t d64 : c.get_int_list("crossover_d_models")) {
    const std::size_t d = static_cast<std::size_t>(d64);
    for (std::int64_t n64 : c.get_int_list("crossover_seq_lens")) {
      const double n = static_cast<double>(n64), dd = static_cast<double>(d);
      if (n < dd * lo || n > dd * hi) continue;
      const StackConfig sc = stack_config(c, model, d, crossover_heads(c, d), 4 * d, static_cast<std::size_t>(n64));
      if (3.0 * forward_flops(sc, B, n) > cap) continue;
      pts.emplace_back(d, static_cast<std::size_t>(n64));
    }
  }
  return pts;
}

void run_scaling(const Cell& c, const std::string& model, CellOutput& out) {
  const auto threads = c.get_int_list("thread_counts");
  Rng rng(c.stream_seed(kInitStream));
  const std::vector<double> sgemm = sgemm_rates(threads, c.get_size("sgemm_size"), timing_options(c), rng);
  const std::size_t B = c.get_size("scaling_batch"), D = c.get_size("d_model");
  for (std::int64_t T : c.get_int_list("scaling_seq_lens")) {
    const auto n = static_cast<std::size_t>(T);
    time_point(c, out, "scaling", stack_config(c, model, D, c.get_size("n_heads"), c.get_size("d_ff"), n), B, n,
               {false, true}, threads, sgemm);
  }
}

void run_crossover(const Cell& c, const std::string& model, CellOutput& out) {
  const std::size_t B = c.get_size("crossover_batch");
  for (const auto& [d, n] : crossover_points(c, model))
    time_point(c, out, "crossover", stack_config(c, model, d, crossover_heads(c, d), 4 * d, n), B, n, {true}, {1},
               {});
}

void run_generation(const Cell& c, const std::string& model, CellOutput& out) {
  const std::size_t D = c.get_size("d_model");
  const ThreadBudget one(1);
  for (std::int64_t n64 : c.get_int_list("generation_prefixes")) {
    const auto n = static_cast<std::size_t>(n64);
    const StackConfig sc = stack_config(c, model, D, c.get_size("n_heads"), c.get_size("d_ff"), n);
    Rng rng(derive_seed(c.stream_seed(kInitStream), 1, n, D));
    LayerStack stack(sc, rng);
    const Tensor3 prefix = random_tensor(1, n, D, rng);
    const Tensor3 token = random_tensor(1, 1, D, rng);
    stack.decode(prefix);  // the prefix (a prompt: one call), then every iteration steps at n
    bool warmed[2] = {false, false};
    const auto none = [] { return Tensor3(); };
    const std::vector<BenchCase> cases = {
        {"decode_step", [&](benchmark::State& st) {
           time_passes(st, false, &warmed[0], [&] {
             Tensor3 y = stack.decode(token);
             stack.rewind_decode(n);
             return y;
           }, none);
         }},
        {"forward", [&](benchmark::State& st) {
           time_passes(st, false, &warmed[1], [&] { return stack.forward(prefix); }, none);
         }}};
    const std::vector<Timing> t = run_benchmarks(cases, timing_options(c));
    PointInfo p = point_info(c, "generation", stack, 1, n);
    p.n_params = stack.num_parameters();
    p.speedup = 1.0;
    // Decoding: one token at prefix n; generating n+1 tokens takes (n+1)·L steps one after another.
    p.pass = "decode_step";
    p.tokens = 1.0;
    p.flops = decode_step_flops(sc, double(n));
    p.sequential_steps = (n + 1) * sc.num_layers;
    add_timing_rows(c, out, p, t[0]);
    // The parallel forward over the prefix (as in training): its own critical path.
    p.pass = "forward";
    p.tokens = double(n);
    p.flops = forward_flops(sc, 1.0, double(n));
    p.sequential_steps = checked_sequential_steps(stack, n);
    add_timing_rows(c, out, p, t[1]);
  }
}

}  // namespace parallel_speedup

// parallel_speedup: claim 1 of the README — self-attention computes all positions at once while
// RNN/LSTM/GRU step through time, so Transformers use parallel hardware better and train faster,
// at a higher memory cost (attention is O(n²)); Vaswani et al. 2017 (arXiv 1706.03762), Table 1:
// sequential operations O(1) vs O(n), complexity per layer O(n²·d) vs O(n·d²) vs O(k·n·d²).
// Claim, method, expected outcome and every CSV column: README.md beside this file.
//
// One cell = one model family (`model`) at one matching rule (`match`: d_model, or the
// Transformer's parameter count). It times the family's layer stack (stack.hpp) through Google
// Benchmark (timing.hpp) at every (batch, seq_len) of the `batches` and `seq_lens` lists, forward
// and forward+backward, at every thread count of `thread_counts` (seqlab::set_num_threads inside
// the cell: the --threads flag does not apply to the timings), and measures the machine's SGEMM
// rate at the same thread counts first (the roofline reference). Speedup and parallel efficiency
// come from the 1-thread time measured in the same cell. In the cells with match = params of the
// families listed in `tta_models`, it then measures the time to a target accuracy on copy memory
// (time_to_accuracy.hpp).
// Timing is only sound when nothing else runs on the machine: run the cells one at a time
// (run_all.sh runs it serially: its SERIAL list).
//
// Legend: B batch, T seq_len, D d_model, H hidden_size, L num_layers, h n_heads, F d_ff.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "seqlab/core/gemm.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/factory.hpp"
#include "stack.hpp"
#include "time_to_accuracy.hpp"
#include "timing.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
using namespace parallel_speedup;

namespace {

constexpr const char* kName = "parallel_speedup";
constexpr std::uint64_t kInitStream = 1;  // weights and inputs of the timed stacks
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::int64_t kMaxSeqLen = 1000000, kMaxBatch = 1000000;

std::vector<std::int64_t> thread_counts_of(const Cell& c) {
  auto v = c.get_int_list("thread_counts");
  if (std::find(v.begin(), v.end(), 1) == v.end())
    throw experiment::ConfigError("thread_counts: invalid value '" + c.get_string("thread_counts") +
                                  "': the list must contain 1 (the reference of speedup and parallel "
                                  "efficiency); expected a space-separated list of distinct integers "
                                  "in [1, " + std::to_string(kMaxThreads) + "] containing 1");
  return v;
}

TtaSettings tta_settings(const Cell& c) {
  TtaSettings s;
  s.T = c.get_int32("tta_T");
  s.n_memorize = c.get_int32("tta_n_memorize");
  s.d_model = c.get_size("tta_d_model");
  s.num_layers = c.get_size("tta_num_layers");
  s.n_heads = c.get_size("tta_n_heads");
  s.d_ff = c.get_size("tta_d_ff");
  s.kernel_size = c.get_size("kernel_size");
  s.norm_placement = c.get_string("norm_placement");
  s.batch = c.get_size("tta_batch");
  s.lr = c.get_real("tta_lr");
  s.target = c.get_real("tta_target");
  s.eval_every = c.get_int32("tta_eval_every");
  s.max_steps = c.get_int32("tta_max_steps");
  s.test_batch = c.get_size("tta_test_batch");
  s.seeds = c.get_size("tta_seeds");
  s.threads = c.get_int32("tta_threads");
  return s;
}

/// The timed stack of this cell at sequence length T (stack.hpp): width D; with match = params
/// the recurrent and TCN widths H are the largest whose factory count_parameters is <= the
/// Transformer encoder layers' (hidden_size_for_budget); the attention families keep width D.
/// Throws ConfigError for an invalid combination.
StackConfig stack_config(const Cell& c, std::size_t T) {
  StackConfig sc;
  sc.model = c.get_string("model");
  sc.d_model = c.get_size("d_model");
  sc.hidden_size = sc.d_model;
  sc.num_layers = c.get_size("num_layers");
  sc.n_heads = c.get_size("n_heads");
  sc.d_ff = c.get_size("d_ff");
  sc.kernel_size = c.get_size("kernel_size");
  sc.norm_placement = c.get_string("norm_placement");
  if (sc.model == "tcn") sc.tcn_levels = tcn_levels_for(T, sc.kernel_size);
  StackConfig ref = sc;
  ref.model = "transformer_encoder";
  const std::size_t budget = count_parameters(model_config(ref));  // validates D, h, F
  if (c.get_string("match") == "params" && !sc.is_attention())
    sc.hidden_size = hidden_size_for_budget(model_config(sc), budget).hidden_size;
  if (sc.model != "self_attention") model_config(sc).validate();
  return sc;
}

/// Runs f; a seqlab::ConfigError (a ModelConfig field is bad) becomes an experiment::ConfigError
/// naming the experiment key that set the field (`keys`: field -> key; `fallback` otherwise),
/// its value, and the model's message.
template <class F>
void as_key_error(const Cell& c, const std::map<std::string, std::string>& keys,
                  const std::string& fallback, F f) {
  try {
    f();
  } catch (const seqlab::ConfigError& e) {
    const auto it = keys.find(e.key());
    const std::string key = it != keys.end() ? it->second : fallback;
    throw experiment::ConfigError(key + ": invalid value '" + c.params.text(key) +
                                  "': the model's " + e.what());
  }
}

void validate(const Cell& c) {
  const auto seq_lens = c.get_int_list("seq_lens");
  const auto batches = c.get_int_list("batches");
  thread_counts_of(c);  // contains 1
  const std::size_t D = c.get_size("d_model"), h = c.get_size("n_heads");
  if (D % h != 0)
    throw experiment::ConfigError("n_heads: invalid value '" + std::to_string(h) +
                      "': must divide d_model = " + std::to_string(D) +
                      "; expected a divisor of d_model");
  const double cap = c.get_real("max_activation_gib") * kGiB;
  const std::map<std::string, std::string> stack_keys = {
      {"input_size", "d_model"},   {"hidden_size", "d_model"}, {"n_heads", "n_heads"},
      {"d_ff", "d_ff"},            {"num_layers", "num_layers"}, {"kernel_size", "kernel_size"},
      {"norm_placement", "norm_placement"}};
  for (std::int64_t T : seq_lens) {
    StackConfig sc;
    as_key_error(c, stack_keys, "d_model",
                 [&] { sc = stack_config(c, static_cast<std::size_t>(T)); });
    for (std::int64_t B : batches) {
      const double bytes = activation_bytes(sc, static_cast<double>(B), static_cast<double>(T));
      if (bytes > cap) {
        std::ostringstream msg;
        msg << "seq_lens: invalid value '" << c.get_string("seq_lens") << "' with batches '"
            << c.get_string("batches") << "': " << sc.model << " at seq_len " << T << ", batch "
            << B << " keeps " << bytes / kGiB << " GiB for backward, more than max_activation_gib = "
            << c.get_real("max_activation_gib") << "; expected smaller seq_lens or batches, or a "
            << "larger max_activation_gib";
        throw experiment::ConfigError(msg.str());
      }
    }
  }
  const auto tta = c.get_string_list("tta_models");
  const std::map<std::string, std::string> tta_keys = {
      {"embedding_dim", "tta_d_model"}, {"hidden_size", "tta_d_model"},
      {"positional_encoding", "tta_d_model"}, {"n_heads", "tta_n_heads"}, {"d_ff", "tta_d_ff"},
      {"num_layers", "tta_num_layers"}, {"kernel_size", "kernel_size"}};
  for (const auto& m : tta)
    as_key_error(c, tta_keys, "tta_d_model", [&] { tta_model_config(m, tta_settings(c)); });
}

/// x [B, T, D] filled with U(-1, 1).
Tensor3 random_tensor(std::size_t B, std::size_t T, std::size_t D, Rng& rng) {
  Tensor3 x = Tensor3::from_shape({B, T, D});
  rng.fill_uniform(x, -1.0f, 1.0f);
  return x;
}

/// The machine's SGEMM rate at each thread count, GFLOP/s: C [N, N] = A [N, N] · Wᵀ (the layout
/// of every layer product in seqlab), median over the repetitions.
std::vector<double> sgemm_rates(const std::vector<std::int64_t>& threads, std::size_t N,
                                const TimingOptions& opt, Rng& rng) {
  Tensor2 A = Tensor2::from_shape({N, N}), W = Tensor2::from_shape({N, N}),
          C = Tensor2::from_shape({N, N});
  rng.fill_uniform(A, -1.0f, 1.0f);
  rng.fill_uniform(W, -1.0f, 1.0f);
  std::vector<BenchCase> cases;
  for (std::int64_t n : threads) {
    cases.push_back({"sgemm/threads=" + std::to_string(n), [&, n](benchmark::State& st) {
                       const ThreadBudget budget(static_cast<int>(n));
                       gemm(false, true, N, N, N, 1.0f, A.data(), N, W.data(), N, 0.0f, C.data(), N);
                       for (auto _ : st) {
                         gemm(false, true, N, N, N, 1.0f, A.data(), N, W.data(), N, 0.0f,
                              C.data(), N);
                         benchmark::DoNotOptimize(C.data());
                         benchmark::ClobberMemory();
                       }
                     }});
  }
  const auto t = run_benchmarks(cases, opt);
  std::vector<double> rates;
  const double flops = 2.0 * static_cast<double>(N) * N * N;
  for (const Timing& x : t) rates.push_back(flops / x.median_s / 1e9);
  return rates;
}

void run_cell(const Cell& cell, CellOutput& out) {
  const std::string model = cell.get_string("model");
  const std::string match = cell.get_string("match");
  const auto seq_lens = cell.get_int_list("seq_lens");
  const auto batches = cell.get_int_list("batches");
  const auto threads = thread_counts_of(cell);
  TimingOptions opt;
  opt.repetitions = cell.get_int32("repetitions");
  opt.min_time_s = cell.get_real("min_time_s");
  const int cores = hardware_threads();

  Rng rng(cell.stream_seed(kInitStream));
  const std::vector<double> sgemm =
      sgemm_rates(threads, cell.get_size("sgemm_size"), opt, rng);

  for (std::int64_t B64 : batches) {
    for (std::int64_t T64 : seq_lens) {
      const std::size_t B = static_cast<std::size_t>(B64), T = static_cast<std::size_t>(T64);
      const StackConfig sc = stack_config(cell, T);
      Rng point_rng(derive_seed(cell.stream_seed(kInitStream), B, T));
      LayerStack stack(sc, point_rng);
      const Tensor3 x = random_tensor(B, T, sc.d_model, point_rng);
      const Tensor3 dy = random_tensor(B, T, sc.output_size(), point_rng);

      // Bytes kept for backward, measured: heap growth of the first forward minus its output.
      // A throwaway stack of the same shape runs one forward first, so one-time allocations of
      // the code path and malloc's adaptive mmap threshold (raised when a large chunk is freed)
      // are in the same state for every point.
      double measured_bytes;
      {
        Rng warm_rng(0);
        LayerStack warm(sc, warm_rng);
        warm.forward(x);
      }
      {
        const std::size_t before = heap_in_use_bytes();
        const Tensor3 y = stack.forward(x);
        const std::size_t after = heap_in_use_bytes();
        measured_bytes = static_cast<double>(after) - static_cast<double>(before) -
                         static_cast<double>(y.size() * sizeof(float));
      }
      // Sequential steps as the implementation counts them (SequenceModel::sequential_steps of
      // the factory model with this body), checked against the count from the built layers
      // (the only count for self_attention, which has no factory family).
      const std::size_t seq_steps = stack.sequential_steps(T);
      if (sc.model != "self_attention") {
        Rng model_rng(0);
        const std::size_t factory_steps =
            make_model(model_config(sc), model_rng)->sequential_steps(T);
        if (factory_steps != seq_steps)
          throw std::logic_error("sequential_steps: factory model says " +
                                 std::to_string(factory_steps) + ", the layer stack " +
                                 std::to_string(seq_steps));
      }

      std::vector<BenchCase> cases;
      for (bool bwd : {false, true})
        for (std::int64_t n : threads) {
          cases.push_back({std::string(bwd ? "forward_backward" : "forward") + "/threads=" +
                               std::to_string(n),
                           [&, bwd, n](benchmark::State& st) {
                             const ThreadBudget budget(static_cast<int>(n));
                             time_passes(
                                 st, bwd, [&] { return stack.forward(x); },
                                 [&] { return stack.backward(dy); });
                           }});
        }
      const std::vector<Timing> t = run_benchmarks(cases, opt);
      const std::size_t rss = peak_rss_bytes();
      const std::size_t n_params = stack.num_parameters();
      const double fwd_flops = forward_flops(sc, static_cast<double>(B), static_cast<double>(T));
      const double act_bytes = activation_bytes(sc, static_cast<double>(B), static_cast<double>(T));

      std::size_t i = 0;
      for (bool bwd : {false, true}) {
        double ref = NAN;  // the 1-thread time of this pass (thread_counts contains 1)
        for (std::size_t j = 0; j < threads.size(); ++j)
          if (threads[j] == 1) ref = t[i + j].median_s;
        for (std::size_t j = 0; j < threads.size(); ++j, ++i) {
          const Timing& tm = t[i];
          const double flops = (bwd ? 3.0 : 1.0) * fwd_flops;
          const double gflops = flops / tm.median_s / 1e9;
          const double speedup = ref / tm.median_s;
          out.add_row(Row()
                          .add("experiment", kName)
                          .add("model", model)
                          .add("match", match)
                          .add("pass", bwd ? "forward_backward" : "forward")
                          .add("batch", B)
                          .add("d_model", sc.d_model)
                          .add("hidden_size", sc.output_size())
                          .add("num_layers", sc.model == "tcn" ? sc.tcn_levels : sc.num_layers)
                          .add("n_heads", sc.is_attention() ? sc.n_heads : 0)
                          .add("d_ff", sc.is_transformer() ? sc.d_ff : 0)
                          .add("kernel_size", sc.model == "tcn" ? sc.kernel_size : 0)
                          .add("n_params", n_params)
                          .add("seed", cell.replicate)
                          .add("cores", cores)
                          .add("threads", threads[j])
                          .add("seq_len", T)
                          .add("repetitions", tm.repetitions)
                          .add("iterations", tm.iterations)
                          .add("time_ms_median", 1e3 * tm.median_s)
                          .add("time_ms_min", 1e3 * tm.min_s)
                          .add("time_ms_max", 1e3 * tm.max_s)
                          .add("tokens_per_s", static_cast<double>(B * T) / tm.median_s)
                          .add("speedup", speedup)
                          .add("parallel_efficiency", speedup / static_cast<double>(threads[j]))
                          .add("flops", flops)
                          .add("gflop_per_s", gflops)
                          .add("sgemm_gflop_per_s", sgemm[j])
                          .add("roofline_fraction", gflops / sgemm[j])
                          .add("sequential_steps", seq_steps)
                          .add("activation_bytes", act_bytes)
                          .add("activation_bytes_measured", measured_bytes)
                          .add("peak_rss_bytes", rss));
        }
      }
    }
  }

  const auto tta = cell.get_string_list("tta_models");
  if (match == "params" && std::find(tta.begin(), tta.end(), model) != tta.end())
    run_time_to_accuracy(cell, model, tta_settings(cell), out);
}

}  // namespace

int main(int argc, char** argv) {
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 1 (README.md claims table): self-attention computes all positions at once while "
      "RNN/LSTM/GRU step through time, so Transformers use parallel hardware better and train "
      "faster, at an O(n^2) memory cost (Vaswani et al. 2017, Table 1). Each cell times one "
      "family (self-attention sub-layers, Transformer encoder/decoder layers, RNN, LSTM, GRU, "
      "TCN) at matched d_model or "
      "matched parameter count through Google Benchmark, forward and forward+backward, over "
      "seq_lens x batches x thread_counts (the cell sets the thread count itself; --threads does "
      "not apply to the timings), and reports time, speedup over 1 thread, GFLOP/s against the "
      "machine's SGEMM rate, sequential steps and activation memory; the match=params cells of "
      "tta_models also measure wall-clock time to a target accuracy on copy memory. Timings are "
      "only sound with one cell running at a time on an otherwise idle machine.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini.
  spec.options = {
      string_sweep("model", family_names(), "family whose layer stack is timed")
          .one_of(family_names()),
      string_sweep("match", {"d_model", "params"},
                   "d_model: every family at width d_model; params: recurrent and TCN widths "
                   "matched to the Transformer layers' parameter count")
          .one_of({"d_model", "params"}),
      int_list_option("seq_lens", "16 32 64 128 256 512", "tokens", "sequence lengths T timed in every cell")
          .at_least(1)
          .at_most(kMaxSeqLen),
      int_list_option("batches", "8", "sequences", "batch sizes B timed in every cell")
          .at_least(1)
          .at_most(kMaxBatch),
      int_list_option("thread_counts", "1 2", "threads",
                      "OpenBLAS thread counts timed in every cell (seqlab::set_num_threads), containing 1")
          .at_least(1)
          .at_most(kMaxThreads),
      int_option("d_model", 64, "units", "width D of the input and of the Transformer layers")
          .at_least(1)
          .at_most(65536),
      int_option("num_layers", 1, "layers", "Transformer layers / recurrent layers L (TCN: levels "
                 "from seq_len)")
          .at_least(1)
          .at_most(64),
      int_option("n_heads", 4, "heads", "attention heads h (must divide d_model)")
          .at_least(1)
          .at_most(65536),
      int_option("d_ff", 256, "units", "feed-forward inner size F of the Transformer layers")
          .at_least(1)
          .at_most(1048576),
      int_option("kernel_size", 3, "steps", "TCN kernel size k (levels: fewest covering seq_len)")
          .at_least(2)
          .at_most(64),
      string_option("norm_placement", "pre", "LayerNorm placement of the Transformer layers")
          .one_of({"pre", "post"}),
      int_option("repetitions", 3, "runs", "Google Benchmark repetitions per case (median, min, max)")
          .at_least(1)
          .at_most(1000),
      real_option("min_time_s", 0.03, "s", "minimum time of each repetition")
          .greater_than(0)
          .at_most(100),
      int_option("sgemm_size", 512, "units", "N of the N x N x N SGEMM reference (roofline)")
          .at_least(1)
          .at_most(4096),
      real_option("max_activation_gib", 8, "GiB",
                  "largest analytic activation memory of a timed point (bigger grids are refused)")
          .greater_than(0)
          .at_most(1024),
      choice_list_option("tta_models", "transformer_decoder lstm", trainable_families(),
                         "families trained to the target accuracy (in their match=params cell)")
          .empty_as("none"),
      int_option("tta_T", 5, "steps", "copy memory blank length T (recall distance T + M)")
          .at_least(1)
          .at_most(100000),
      int_option("tta_n_memorize", 3, "symbols",
                 "copy memory symbols to recall M (Bai et al.: 10; sequence length T + 2M)")
          .at_least(1)
          .at_most(10000),
      int_option("tta_d_model", 32, "units", "embedding width and Transformer width of the trained models")
          .at_least(2)
          .at_most(4096),
      int_option("tta_num_layers", 1, "layers", "layers of the trained Transformer / recurrent models")
          .at_least(1)
          .at_most(16),
      int_option("tta_n_heads", 4, "heads", "attention heads of the trained Transformer")
          .at_least(1)
          .at_most(4096),
      int_option("tta_d_ff", 128, "units", "feed-forward size of the trained Transformer")
          .at_least(1)
          .at_most(65536),
      int_option("tta_batch", 32, "sequences", "training batch (fresh every update)")
          .at_least(1)
          .at_most(100000),
      real_option("tta_lr", 3e-3, "1", "Adam learning rate (constant)").greater_than(0).at_most(1),
      real_option("tta_target", 0.99, "1", "target recall accuracy on the test set")
          .greater_than(0)
          .at_most(1),
      int_option("tta_eval_every", 25, "updates", "updates between test evaluations")
          .at_least(1)
          .at_most(1000000000)
          .at_most_key("tta_max_steps"),
      int_option("tta_max_steps", 4000, "updates", "updates before giving up (reached = 0)")
          .at_least(1)
          .at_most(1000000000),
      int_option("tta_test_batch", 256, "sequences", "size of the fixed test set")
          .at_least(1)
          .at_most(1000000),
      int_option("tta_seeds", 3, "runs", "training runs per family (seeds)").at_least(1).at_most(1000),
      int_option("tta_threads", 1, "threads", "thread budget of the training runs")
          .at_least(1)
          .at_most(kMaxThreads),
  };
  spec.tables = {
      {kMainTable,
       {"experiment", "model", "match", "pass", "batch", "d_model", "hidden_size", "num_layers",
        "n_heads", "d_ff", "kernel_size", "n_params", "seed", "cores", "threads", "seq_len",
        "repetitions", "iterations", "time_ms_median", "time_ms_min", "time_ms_max",
        "tokens_per_s", "speedup", "parallel_efficiency", "flops", "gflop_per_s",
        "sgemm_gflop_per_s", "roofline_fraction", "sequential_steps", "activation_bytes",
        "activation_bytes_measured", "peak_rss_bytes"}},
      {"time_to_accuracy", time_to_accuracy_columns()},
      {"tta_curve", tta_curve_columns()},
  };
  spec.default_seeds = 1;
  spec.timing_columns = {"iterations", "time_ms_median", "time_ms_min", "time_ms_max",
                         "tokens_per_s", "speedup", "parallel_efficiency", "gflop_per_s",
                         "sgemm_gflop_per_s", "roofline_fraction", "activation_bytes_measured",
                         "peak_rss_bytes", "time_to_target_s", "train_time_s", "step_time_ms"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

// parallel_speedup: claim 1 of the README — self-attention computes all positions at once while
// RNN/LSTM/GRU step through time, so Transformers use parallel hardware better and train faster,
// at a higher memory cost (attention is O(n²)); Vaswani et al. 2017 (arXiv 1706.03762), Table 1:
// sequential operations O(1) vs O(n), complexity per layer O(n²·d) vs O(n·d²) vs O(k·n·d²).
// Claim, design, expected outcome and every CSV column: README.md beside this file.
//
// One cell = one unit "part:model" (sweep key `unit`):
//   scaling:<family>      thread scaling at the benchmark shape (parts.hpp)
//   crossover:<family>    1-thread time over d_model × seq_len, for the crossover n*(d) (parts.hpp)
//   generation:<family>   per-token decoding latency at batch 1 against the prefix (parts.hpp)
//   tta:<family>          time to a target bits per character on text (time_to_accuracy.hpp)
// Every timed point also records the bytes one forward keeps for backward (memory table).
// Timing is only sound when nothing else runs on the machine: run the cells one at a time
// (run_all.sh runs it serially: its SERIAL list); the cells set their thread counts themselves.
#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "parts.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/tasks/text.hpp"
#include "seqlab/core/threads.hpp"
#include "stack.hpp"
#include "time_to_accuracy.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
using namespace parallel_speedup;

namespace {

constexpr const char* kName = "parallel_speedup";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::int64_t kMaxSeqLen = 1000000, kMaxBatch = 1000000;

/// Every allowed unit value: part:family for the families each part supports.
std::vector<std::string> unit_names() {
  std::vector<std::string> u;
  for (const char* part : {"scaling", "crossover"})
    for (const auto& m : family_names()) u.push_back(std::string(part) + ":" + m);
  for (const auto& m : family_names())
    if (decodes(m)) u.push_back("generation:" + m);
  for (const auto& m : lm_families()) u.push_back("tta:" + m);
  return u;
}

std::pair<std::string, std::string> split_unit(const std::string& unit) {
  const auto colon = unit.find(':');
  return {unit.substr(0, colon), unit.substr(colon + 1)};
}

TtaSettings tta_settings(const Cell& c) {
  TtaSettings s;
  s.corpus = c.get_string("tta_corpus");
  s.seq_len = c.get_size("tta_seq_len");
  s.d_model = c.get_size("tta_d_model");
  s.num_layers = c.get_size("tta_num_layers");
  s.n_heads = c.get_size("tta_n_heads");
  s.d_ff = c.get_size("tta_d_ff");
  s.kernel_size = c.get_size("kernel_size");
  s.norm_placement = c.get_string("norm_placement");
  s.attention_kernel = c.get_string("attention_kernel");
  s.batch = c.get_size("tta_batch");
  s.lrs = c.get_real_list("tta_lrs");
  s.pilot_steps = c.get_int32("tta_pilot_steps");
  s.target_bpc = c.get_real("tta_target_bpc");
  s.eval_every = c.get_int32("tta_eval_every");
  s.max_steps = c.get_int32("tta_max_steps");
  s.eval_tokens = c.get_size("tta_eval_tokens");
  s.seeds = c.get_size("tta_seeds");
  s.threads = c.get_int32("tta_threads");
  return s;
}

/// Runs f; a seqlab::ConfigError (a ModelConfig or task field is bad) becomes an
/// experiment::ConfigError naming the experiment key that set the field (`keys`: field -> key;
/// `fallback` otherwise), its value, and the library's message.
template <class F>
void as_key_error(const Cell& c, const std::map<std::string, std::string>& keys, const std::string& fallback, F f) {
  try {
    f();
  } catch (const seqlab::ConfigError& e) {
    const auto it = keys.find(e.key());
    const std::string key = it != keys.end() ? it->second : fallback;
    throw experiment::ConfigError(key + ": invalid value '" + c.params.text(key) + "': " + e.what());
  } catch (const std::invalid_argument& e) {
    throw experiment::ConfigError(fallback + ": invalid value '" + c.params.text(fallback) + "': " + e.what());
  }
}

/// Every (stack, batch, seq_len) the cell times must be a valid stack whose analytic activation
/// memory (the materialised kernel's, the larger) is within max_activation_gib.
void check_point(const Cell& c, const std::string& key, const std::string& model, std::size_t D, std::size_t h,
                 std::size_t F, std::size_t B, std::size_t T) {
  static const std::map<std::string, std::string> stack_keys = {
      {"input_size", "d_model"}, {"hidden_size", "d_model"}, {"n_heads", "n_heads"}, {"d_ff", "d_ff"},
      {"num_layers", "num_layers"}, {"kernel_size", "kernel_size"}, {"norm_placement", "norm_placement"}};
  StackConfig sc;
  as_key_error(c, stack_keys, key, [&] { sc = stack_config(c, model, D, h, F, T); });
  const double bytes = activation_bytes(sc, double(B), double(T), false);
  if (bytes > c.get_real("max_activation_gib") * kGiB) {
    std::ostringstream msg;
    msg << key << ": invalid value '" << c.get_string(key) << "': " << model << " at d_model " << D << ", seq_len "
        << T << ", batch " << B << " keeps " << bytes / kGiB << " GiB for backward, more than max_activation_gib = "
        << c.get_real("max_activation_gib") << "; expected smaller sizes or a larger max_activation_gib";
    throw experiment::ConfigError(msg.str());
  }
}

void validate(const Cell& c) {
  const auto [part, model] = split_unit(c.get_string("unit"));
  const auto threads = c.get_int_list("thread_counts");
  if (std::find(threads.begin(), threads.end(), 1) == threads.end())
    throw experiment::ConfigError("thread_counts: invalid value '" + c.get_string("thread_counts") +
                                  "': the list must contain 1 (the reference of speedup and parallel efficiency); "
                                  "expected a space-separated list of distinct integers in [1, " +
                                  std::to_string(kMaxThreads) + "] containing 1");
  const std::size_t D = c.get_size("d_model"), h = c.get_size("n_heads"), F = c.get_size("d_ff");
  if (D % h != 0)
    throw experiment::ConfigError("n_heads: invalid value '" + std::to_string(h) + "': must divide d_model = " +
                                  std::to_string(D) + "; expected a divisor of d_model");
  if (c.get_real("crossover_ratio_min") > c.get_real("crossover_ratio_max"))
    throw experiment::ConfigError("crossover_ratio_min: invalid value '" + c.params.text("crossover_ratio_min") +
                                  "': expected a value <= crossover_ratio_max (" +
                                  c.params.text("crossover_ratio_max") + ")");
  if (part == "scaling") {
    for (std::int64_t T : c.get_int_list("scaling_seq_lens"))
      check_point(c, "scaling_seq_lens", model, D, h, F, c.get_size("scaling_batch"), std::size_t(T));
  } else if (part == "crossover") {
    for (std::int64_t d : c.get_int_list("crossover_d_models")) {
      const std::size_t dh = crossover_heads(c, std::size_t(d));
      if (std::size_t(d) % dh != 0)
        throw experiment::ConfigError("crossover_head_dim: invalid value '" + c.params.text("crossover_head_dim") +
                                      "': d_model " + std::to_string(d) + " gives " + std::to_string(dh) +
                                      " heads, which do not divide it; expected a divisor of every d_model");
    }
    std::vector<std::pair<std::size_t, std::size_t>> pts;
    as_key_error(c, {}, "crossover_d_models", [&] { pts = crossover_points(c, model); });
    if (pts.empty())
      throw experiment::ConfigError("crossover_seq_lens: invalid value '" + c.get_string("crossover_seq_lens") +
                                    "': no seq_len of " + model + " lies in the window of any crossover_d_models "
                                    "value within crossover_max_gflop; expected at least one point");
    for (const auto& [d, n] : pts)
      check_point(c, "crossover_seq_lens", model, d, crossover_heads(c, d), 4 * d, c.get_size("crossover_batch"), n);
  } else if (part == "generation") {
    for (std::int64_t T : c.get_int_list("generation_prefixes"))
      check_point(c, "generation_prefixes", model, D, h, F, 1, std::size_t(T));
  } else {  // tta: the corpus and the model at its vocabulary
    static std::map<std::string, std::size_t> vocab;  // corpus -> vocab_size, opened once
    const std::string corpus = c.get_string("tta_corpus");
    as_key_error(c, {{"corpus", "tta_corpus"}, {"seq_len", "tta_seq_len"}}, "tta_corpus", [&] {
      if (!vocab.count(corpus)) {
        TaskParams tp;
        tp.set("corpus", corpus);
        tp.set("seq_len", c.params.text("tta_seq_len"));
        vocab[corpus] = make_task("text", tp)->spec().vocab_size;
      }
    });
    const std::map<std::string, std::string> tta_keys = {
        {"embedding_dim", "tta_d_model"}, {"hidden_size", "tta_d_model"}, {"positional_encoding", "tta_d_model"},
        {"n_heads", "tta_n_heads"}, {"d_ff", "tta_d_ff"}, {"num_layers", "tta_num_layers"},
        {"kernel_size", "kernel_size"}};
    as_key_error(c, tta_keys, "tta_d_model", [&] { tta_model_config(model, tta_settings(c), vocab[corpus]); });
  }
}

void run_cell(const Cell& cell, CellOutput& out) {
  const auto [part, model] = split_unit(cell.get_string("unit"));
  if (part == "scaling") run_scaling(cell, model, out);
  else if (part == "crossover") run_crossover(cell, model, out);
  else if (part == "generation") run_generation(cell, model, out);
  else run_time_to_accuracy(cell, model, tta_settings(cell), out);
}

}  // namespace

int main(int argc, char** argv) {
  seqlab::ensure_blas_kernels(argv);  // before anything: OpenBLAS's kernels (core/threads.hpp)
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 1 (README.md claims table): self-attention computes all positions at once while RNN/LSTM/GRU step "
      "through time, so Transformers use parallel hardware better and train faster, at an O(n^2) memory cost "
      "(Vaswani et al. 2017, Table 1). Each cell is one unit part:family: scaling (thread scaling at the "
      "benchmark shape, forward and forward+backward, speedup over 1 thread), crossover (1-thread time over "
      "d_model x seq_len: where self-attention becomes slower than each recurrent layer and the TCN), "
      "generation (per-token decoding latency at batch 1 with a key/value cache against the prefix length, "
      "beside the parallel forward over the prefix) or tta (time and updates to a target bits per character "
      "on text at equal parameter count, learning rate per family from a grid). Timed points also record "
      "the bytes kept for backward per attention kernel. Timings are only sound with one cell running at a "
      "time on an otherwise idle machine.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  const std::vector<std::string> units = unit_names();
  // Built-in defaults = configs/quick.ini.
  spec.options = {
      string_sweep("unit",
                   {"scaling:self_attention", "scaling:transformer_encoder", "scaling:rnn", "scaling:lstm",
                    "scaling:gru", "scaling:tcn", "crossover:self_attention", "crossover:rnn", "crossover:lstm",
                    "crossover:gru", "crossover:tcn", "generation:transformer_decoder", "generation:lstm",
                    "tta:transformer_decoder", "tta:lstm"},
                   "part:family of the cell (README: the parts and the families each supports)")
          .one_of(units),
      string_option("match", "d_model", "timed stacks: d_model (every family at width d_model) or params "
                    "(recurrent and TCN widths matched to the Transformer layers' parameter count)")
          .one_of({"d_model", "params"}),
      string_option("attention_kernel", "materialised", "kernel of the timed attention and of the time-to-accuracy "
                    "Transformer (materialised | fused | auto, MultiheadAttention's kernel switch)")
          .one_of({"materialised", "fused", "auto"}),
      choice_list_option("memory_kernels", "materialised", {"materialised", "fused", "auto"},
                         "kernels whose bytes kept for backward are measured at every timed attention point"),
      int_option("repetitions", 3, "rounds", "interleaved timing rounds per case (median, min, max, intervals)")
          .at_least(1).at_most(1000),
      real_option("min_time_s", 0.03, "s", "minimum time of a case's first round (sets its iteration count)")
          .greater_than(0).at_most(100),
      int_option("sgemm_size", 512, "units", "N of the N x N x N SGEMM reference (scaling cells' roofline)")
          .at_least(1).at_most(4096),
      real_option("max_activation_gib", 8, "GiB", "largest analytic activation memory of a timed point")
          .greater_than(0).at_most(1024),
      int_option("d_model", 64, "units", "width D of scaling and generation stacks").at_least(1).at_most(65536),
      int_option("n_heads", 4, "heads", "attention heads of scaling and generation stacks (divides d_model)")
          .at_least(1).at_most(65536),
      int_option("d_ff", 256, "units", "feed-forward size of scaling and generation Transformer layers")
          .at_least(1).at_most(1048576),
      int_option("num_layers", 1, "layers", "Transformer / recurrent layers L of the timed stacks")
          .at_least(1).at_most(64),
      int_option("kernel_size", 3, "steps", "TCN kernel size k (levels: fewest covering seq_len)")
          .at_least(2).at_most(64),
      string_option("norm_placement", "pre", "LayerNorm placement of the Transformer layers").one_of({"pre", "post"}),
      int_option("scaling_batch", 8, "sequences", "batch of the scaling cells").at_least(1).at_most(kMaxBatch),
      int_list_option("scaling_seq_lens", "64 256", "tokens", "seq_lens of the scaling cells")
          .at_least(1).at_most(kMaxSeqLen),
      int_list_option("thread_counts", "1 2", "threads", "thread counts of the scaling cells, containing 1")
          .at_least(1).at_most(kMaxThreads),
      int_option("crossover_batch", 8, "sequences", "batch of the crossover cells").at_least(1).at_most(kMaxBatch),
      int_list_option("crossover_d_models", "32 64 128", "units", "widths d of the crossover cells")
          .at_least(1).at_most(65536),
      int_list_option("crossover_seq_lens", "16 32 64 128 256 512 1024", "tokens",
                      "candidate seq_lens of the crossover cells (each d takes those in its window)")
          .at_least(1).at_most(kMaxSeqLen),
      real_option("crossover_ratio_min", 0.25, "1", "window: seq_len >= ratio_min * d").greater_than(0).at_most(1e6),
      real_option("crossover_ratio_max", 8, "1", "window: seq_len <= ratio_max * d (recurrent families)")
          .greater_than(0).at_most(1e6),
      real_option("crossover_tcn_ratio_max", 16, "1",
                  "window of the TCN and the attention families: seq_len <= this * d")
          .greater_than(0).at_most(1e6),
      int_option("crossover_head_dim", 32, "units", "head size of the crossover attention: h = max(1, d / this)")
          .at_least(1).at_most(65536),
      real_option("crossover_max_gflop", 20, "GFLOP", "crossover points above this forward+backward cost are "
                  "not timed").greater_than(0).at_most(1e9),
      int_list_option("generation_prefixes", "16 64 256 1024", "tokens", "prefix lengths of the generation cells")
          .at_least(1).at_most(kMaxSeqLen),
      string_option("tta_corpus", "kjv", "text corpus of the tta cells (the text task's corpus key)"),
      int_option("tta_seq_len", 128, "symbols", "training window").at_least(1).at_most(100000),
      int_option("tta_d_model", 32, "units", "embedding width and Transformer width of the trained models")
          .at_least(2).at_most(4096),
      int_option("tta_num_layers", 1, "layers", "layers of the trained models").at_least(1).at_most(16),
      int_option("tta_n_heads", 4, "heads", "attention heads of the trained Transformer").at_least(1).at_most(4096),
      int_option("tta_d_ff", 128, "units", "feed-forward size of the trained Transformer").at_least(1).at_most(65536),
      int_option("tta_batch", 8, "sequences", "training batch (fresh every update)").at_least(1).at_most(100000),
      real_list_option("tta_lrs", "0.003 0.01", "1", "learning-rate grid of the pilot (Adam, constant)")
          .greater_than(0).at_most(1),
      int_option("tta_pilot_steps", 50, "updates", "updates of each pilot run").at_least(1).at_most(1000000000),
      real_option("tta_target_bpc", 3.3, "bits", "target bits per character on the validation subset")
          .greater_than(0).at_most(64),
      int_option("tta_eval_every", 25, "updates", "updates between validation evaluations")
          .at_least(1).at_most(1000000000).at_most_key("tta_max_steps"),
      int_option("tta_max_steps", 300, "updates", "updates before giving up (reached = 0)")
          .at_least(1).at_most(1000000000),
      int_option("tta_eval_tokens", 4096, "symbols", "validation (and test) targets scored").at_least(1)
          .at_most(100000000),
      int_option("tta_seeds", 3, "runs", "training runs per family (seeds)").at_least(1).at_most(1000),
      int_option("tta_threads", 1, "threads", "thread budget of the training runs").at_least(1).at_most(kMaxThreads),
  };
  spec.tables = {
      {kMainTable, main_columns()},
      {"rounds", rounds_columns()},
      {"memory", memory_columns()},
      {"time_to_accuracy", time_to_accuracy_columns()},
      {"tta_lr", tta_lr_columns()},
      {"tta_curve", tta_curve_columns()},
  };
  spec.default_seeds = 1;
  spec.timing_columns = {"iterations", "time_ms_median", "time_ms_min", "time_ms_max", "tokens_per_s", "speedup",
                         "parallel_efficiency", "gflop_per_s", "sgemm_gflop_per_s", "roofline_fraction", "time_ms",
                         "activation_bytes_measured", "time_to_target_s", "train_time_s", "step_time_ms"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

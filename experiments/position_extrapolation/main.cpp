// position_extrapolation: claim 3 of the README — sinusoidal encodings "extrapolate in theory" but
// fail beyond the training length in practice; RoPE encodes relative position and, with position
// interpolation, extends much further; PE·PE dot products fall with distance (and a widely
// repeated table says 0.92 / 0.65 / 0.12 / -0.06 at distance 1 / 10 / 100 / 1000 for d_model 512).
// Anchors: Press et al. 2021 (ALiBi, arXiv 2108.12409), Chen et al. 2023 (position interpolation,
// arXiv 2306.15595), Kazemnejad et al. 2023 (NoPE, arXiv 2305.19466), Su et al. 2021 (RoFormer).
// Claim, method, expected outcome and the CSV columns: README.md beside this file.
//
// Grid: task (copy | mqar | char_lm | analysis) x positional_encoding (sinusoidal | learned | rope |
// rope_pi | rope_ntk | alibi | none) x seeds. A training cell trains a decoder-only Transformer on
// rows of lengths in [min_train_len, L_train] (right-padded to L_train, key-padding mask), then
// evaluates it at every length L = r·L_train, r = 1..max_eval_ratio; rope_pi is also fine-tuned
// at finetune_ratio·L_train (Chen et al. §3) and evaluated again. An analysis cell trains nothing:
// it computes the encoding's analyses (analysis.hpp): sinusoidal similarity and frequency
// resolution (sinusoidal), RoPE long-term decay (rope, rope_pi, rope_ntk); other encodings have none.
// The data come from the task registry and the evaluation by position (within / beyond L_train)
// from evaluation.hpp; each training phase (pretrain, finetune) is a TrainingPhase
// (experiment/training.hpp) with its own checkpoint.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "analysis.hpp"
#include "evaluation.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/positional_registry.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/char_lm.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
namespace pe = position_extrapolation;
using pe::corpus_path;

namespace {

constexpr const char* kName = "position_extrapolation";
// Purposes of the replicate's random streams (Cell::stream_seed), shared by every task and
// encoding with the same replicate index, so comparisons across encodings are paired.
constexpr std::uint64_t kInitStream = 1;      // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;     // training batches
constexpr std::uint64_t kTestStream = 3;      // test sets: derive_seed(stream, eval_len)
constexpr std::uint64_t kFinetuneStream = 4;  // rope_pi fine-tuning batches
constexpr std::uint64_t kAnalysisStream = 5;  // RoPE decay samples

const std::vector<std::string> kEncodings = {"sinusoidal", "learned",  "rope", "rope_pi",
                                             "rope_ntk",   "alibi",    "none"};

std::size_t max_eval_len(const Cell& cell) {
  return cell.get_size("L_train") * cell.get_size("max_eval_ratio");
}

/// Rows of the learned positional table: learned_max_len, or (0) the longest evaluation length.
std::size_t learned_rows(const Cell& cell) {
  const std::size_t m = cell.get_size("learned_max_len");
  return m == 0 ? max_eval_len(cell) : m;
}

ModelConfig model_config(const Cell& cell, const TaskSpec& task) {
  ModelConfig mc;
  mc.model = "transformer_decoder";
  apply_task_spec(task, mc);  // embedding input, vocabulary, per-position head
  mc.embedding_dim = cell.get_size("d_model");
  mc.hidden_size = cell.get_size("d_model");
  mc.num_layers = cell.get_size("num_layers");
  mc.n_heads = cell.get_size("n_heads");
  mc.d_ff = cell.get_size("d_ff");
  mc.norm = "layer_norm";
  mc.norm_placement = cell.get_string("norm_placement");
  mc.positional_encoding = cell.get_string("positional_encoding");
  mc.rope_pairing = cell.get_string("rope_pairing");
  mc.max_len = learned_rows(cell);
  mc.train_len = cell.get_size("L_train");
  mc.dropout = 0.0f;
  return mc;
}

/// The rope_pi fine-tune's schedule: the cell's schedule kind with the finetune_* keys.
LrSchedule finetune_schedule(const Cell& cell) {
  LrSchedule s;
  s.kind = cell.get_string("schedule");
  s.base_lr = cell.get_float("finetune_lr");
  s.warmup_steps = cell.get_int32("finetune_warmup_steps");
  s.total_steps = std::max(1, cell.get_int32("finetune_steps"));
  return s;
}

[[noreturn]] void bad(const std::string& key, const std::string& value, const std::string& allowed) {
  throw experiment::ConfigError(key + ": invalid value '" + value + "': " + allowed);
}

void validate(const Cell& cell) {
  const std::string& task = cell.get_string("task");
  const std::string& enc = cell.get_string("positional_encoding");
  const std::size_t L = cell.get_size("L_train");
  const std::size_t lo = cell.get_size("min_train_len");
  const std::size_t longest = max_eval_len(cell);
  // Declared bounds (options): min_train_len <= L_train, warmup_steps <= steps.
  if (cell.get_int("finetune_steps") > 0 &&
      cell.get_int("finetune_warmup_steps") > cell.get_int("finetune_steps"))
    bad("finetune_warmup_steps", cell.params.text("finetune_warmup_steps"),
        "expected an integer <= finetune_steps (" + cell.params.text("finetune_steps") + ")");
  if (cell.get_string("schedule") == "inverse_sqrt" &&
      (cell.get_int("warmup_steps") < 1 ||
       (cell.get_int("finetune_steps") > 0 && cell.get_int("finetune_warmup_steps") < 1)))
    bad("warmup_steps", cell.params.text("warmup_steps"),
        "schedule = inverse_sqrt needs warmup_steps >= 1 and finetune_warmup_steps >= 1");
  // The learned table must hold every evaluated position (positions past L_train exist but are
  // never trained; a table that is too small cannot even be evaluated).
  if (enc == "learned" && task != "analysis" && learned_rows(cell) < longest)
    bad("learned_max_len", cell.params.text("learned_max_len"),
        "the learned table must cover the longest evaluation length L_train * max_eval_ratio = " +
            std::to_string(longest) + ": allowed 0 (= that length) or an integer >= " +
            std::to_string(longest));
  if (task == "copy" && L < 3) bad("L_train", cell.params.text("L_train"), "task = copy needs L_train >= 3");
  if (task == "mqar") {
    const auto P = cell.get_int("mqar_n_pairs"), Q = cell.get_int("mqar_n_queries");
    if (Q > P) bad("mqar_n_queries", cell.params.text("mqar_n_queries"), "expected an integer <= mqar_n_pairs (" + cell.params.text("mqar_n_pairs") + ")");
    if (cell.get_int("mqar_n_keys") < P)
      bad("mqar_n_keys", cell.params.text("mqar_n_keys"), "expected an integer >= mqar_n_pairs (" + cell.params.text("mqar_n_pairs") + ")");
    if (static_cast<std::int64_t>(lo) < 2 * P + 2 * Q)
      bad("min_train_len", cell.params.text("min_train_len"),
          "task = mqar needs rows of at least 2 * mqar_n_pairs + 2 * mqar_n_queries = " +
              std::to_string(2 * P + 2 * Q) + " tokens");
  }
  if (task == "char_lm") {
    const std::string path = corpus_path(cell);
    std::ifstream in(path, std::ios::binary);
    if (!in) bad("corpus", cell.get_string("corpus"), "expected a readable text file ('default' = " +
                                                          std::string(SEQLAB_EXPERIMENT_DIR) + "/data/corpus.txt)");
    try {
      const CharCorpus c = CharCorpus::from_file(path, cell.get_real("corpus_test_fraction"));
      if (c.max_window(CorpusSplit::test) < longest)
        bad("corpus", cell.get_string("corpus"),
            "its test split (" + std::to_string(c.split_size(CorpusSplit::test)) +
                " bytes) must hold a window of the longest evaluation length L_train * max_eval_ratio = " +
                std::to_string(longest) + " plus 1 byte: use a longer text or a larger corpus_test_fraction");
      if (c.max_window(CorpusSplit::train) < std::max(L, cell.get_size("finetune_ratio") * L))
        bad("corpus", cell.get_string("corpus"), "its train split is shorter than a training window");
    } catch (const std::invalid_argument& e) {
      if (dynamic_cast<const experiment::ConfigError*>(&e)) throw;
      bad("corpus", cell.get_string("corpus"), std::string("not usable: ") + e.what());
    }
  }
  if (task != "analysis") {
    cell_schedule(cell);  // schedule, lr, warmup_steps, steps
    // n_heads dividing d_model, even head size for rope...
    model_config(cell, pe::cell_task(cell, lo, L, "train")->spec()).validate();
  }
  if ((enc == "rope" || enc == "rope_pi" || enc == "rope_ntk") && task == "analysis" &&
      cell.get_int("analysis_head_dim") % 2 != 0)
    bad("analysis_head_dim", cell.params.text("analysis_head_dim"), "expected an even integer");
}

Row id_row(const Cell& cell, const std::string& variant) {
  Row r;
  r.add("experiment", kName)
      .add("task", cell.get_string("task"))
      .add("positional_encoding", cell.get_string("positional_encoding"))
      .add("variant", variant)
      .add("seed", cell.replicate);
  return r;
}

/// One training phase of a cell (pretrain, or the rope_pi fine-tune): `steps` updates of a fresh
/// optimizer at peak rate `lr` on fresh batches of `task` from `rng`; the curve goes to table
/// "steps" with variant `variant` and phase `phase` (experiment/training.hpp: window, timer,
/// divergence and the phase's own checkpoint).
PhaseResult train(const Cell& cell, CellOutput& out, SequenceModel& model, const Task& task, Rng& rng,
                  const std::string& phase, const std::string& variant, int steps, float lr,
                  const LrSchedule& schedule) {
  const std::size_t batch = cell.get_size("batch");
  const std::vector<Parameter*> params = model.parameters();
  OptimizerConfig oc;
  oc.lr = lr;
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);
  auto& tm = dynamic_cast<TransformerModel&>(model);
  CrossEntropyLoss ce;
  TrainingPhase ph(cell, out, &model, phase);
  ph.steps(steps).clip_norm(cell.get_real("clip_norm"))
      .curve(cell.get_int32("log_every"), "steps", id_row(cell, variant).add("phase", phase));
  ph.state().add("data_rng", rng);
  return ph.run(params, *optim, schedule, [&](int) {
    const TaskBatch b = task.sample(batch, rng);
    tm.set_padding(&b.padding);
    const double loss = ce.forward(rows_of(model.forward(b.tokens)), ids_of(b.targets));
    model.backward(unrows(ce.backward(), batch, b.tokens.shape()[1]));
    tm.set_padding(nullptr);
    return loss;
  });
}

/// The main-table row of one run (training run, its fine-tune, or an analysis computation: r null).
void add_run_row(const Cell& cell, CellOutput& out, const std::string& variant, std::size_t n_params,
                 std::size_t vocab, int steps, std::size_t finetune_len, int finetune_steps,
                 const PhaseResult* r, double time_s) {
  const bool diverged = r != nullptr && r->diverged;
  out.add_row(id_row(cell, variant)
                  .add("derived_seed", cell.seed)
                  .add("L_train", cell.get_int("L_train"))
                  .add("max_eval_len", max_eval_len(cell))
                  .add("d_model", cell.get_int("d_model"))
                  .add("num_layers", cell.get_int("num_layers"))
                  .add("n_heads", cell.get_int("n_heads"))
                  .add("n_params", n_params)
                  .add("vocab_size", vocab)
                  .add("steps", steps)
                  .add("finetune_len", finetune_len)
                  .add("finetune_steps", finetune_steps)
                  .add("steps_done", r ? r->steps_done : 0)
                  .add("diverged", diverged ? 1 : 0)
                  .add("diverged_step", diverged ? r->diverged_step : -1)
                  .add("final_train_loss", r ? r->final_window_loss : std::nan(""))
                  .add("train_time_s", time_s));
}

void run_analysis(const Cell& cell, CellOutput& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& enc = cell.get_string("positional_encoding");
  const pe::AnalysisId id{kName, "analysis", enc, cell.replicate};
  if (enc == "sinusoidal" && cell.replicate == 0) {  // deterministic: written once
    pe::sinusoidal_similarity(id, out);
    pe::sinusoidal_resolution(id, cell.get_size("alias_search_to"), out);
  }
  if (enc == "rope" || enc == "rope_pi" || enc == "rope_ntk")
    pe::rope_decay(id, cell.get_size("analysis_head_dim"), cell.get_size("L_train"),
                   cell.get_size("max_eval_ratio"), cell.get_size("rope_max_distance"),
                   cell.get_size("analysis_samples"), cell.get_string("rope_pairing"),
                   cell.stream_seed(kAnalysisStream), out);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  add_run_row(cell, out, "analysis", 0, 0, 0, 0, 0, nullptr, dt);
}

void run_cell(const Cell& cell, CellOutput& out) {
  if (cell.get_string("task") == "analysis") {
    run_analysis(cell, out);
    return;
  }
  const std::string& enc = cell.get_string("positional_encoding");
  const std::size_t Lt = cell.get_size("L_train");
  const std::size_t lo = cell.get_size("min_train_len");
  const std::size_t R = cell.get_size("max_eval_ratio");
  const std::size_t n_heads = cell.get_size("n_heads");
  const std::unique_ptr<Task> task = pe::cell_task(cell, lo, Lt, "train");
  const TaskSpec spec = task->spec();

  Rng init_rng(cell.stream_seed(kInitStream));
  const std::unique_ptr<SequenceModel> model_ptr = make_model(model_config(cell, spec), init_rng);
  SequenceModel& model = *model_ptr;

  // Test sets: one per evaluation length, shared by every encoding and variant (paired).
  const std::size_t eval_batch = cell.get_size("eval_batch");
  std::vector<TaskBatch> tests;
  for (std::size_t r = 1; r <= R; ++r) {
    Rng test_rng(derive_seed(cell.stream_seed(kTestStream), r * Lt));
    tests.push_back(pe::cell_task(cell, r * Lt, r * Lt, "test")->sample(eval_batch, test_rng));
  }

  Rng train_rng(cell.stream_seed(kTrainStream));
  const int steps = cell.get_int32("steps");
  const PhaseResult pre = train(cell, out, model, *task, train_rng, "pretrain", "zero_shot", steps,
                                cell.get_float("lr"), cell_schedule(cell));
  const std::size_t n_params = model.num_parameters();
  for (std::size_t r = 1; r <= R; ++r)
    pe::add_eval_rows(out, id_row(cell, "zero_shot"), Lt, r * Lt,
                      pe::evaluate_buckets(model, tests[r - 1], 0, Lt, n_heads), spec);
  add_run_row(cell, out, "zero_shot", n_params, spec.vocab_size, steps, 0, 0, &pre, pre.train_time_s);

  // Position interpolation, Chen et al. 2023 §3: fine-tune at the longer window L' with the fixed
  // scale s = L'/L_train (batches padded to L', so RoPE's context length is L'); evaluate with the
  // same scale for every length <= L' (inputs padded to L'), and s = L/L_train beyond.
  const int ft_steps = cell.get_int32("finetune_steps");
  if (enc == "rope_pi" && ft_steps > 0 && !pre.diverged) {
    const std::size_t Lf = cell.get_size("finetune_ratio") * Lt;
    Rng ft_rng(cell.stream_seed(kFinetuneStream));
    const PhaseResult ft = train(cell, out, model, *pe::cell_task(cell, lo, Lf, "train"), ft_rng, "finetune",
                                 "finetuned", ft_steps, cell.get_float("finetune_lr"), finetune_schedule(cell));
    for (std::size_t r = 1; r <= R; ++r)
      pe::add_eval_rows(out, id_row(cell, "finetuned"), Lt, r * Lt,
                        pe::evaluate_buckets(model, tests[r - 1], Lf, Lt, n_heads), spec);
    add_run_row(cell, out, "finetuned", n_params, spec.vocab_size, steps, Lf, ft_steps, &ft,
                pre.train_time_s + ft.train_time_s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 3 (README.md claims table): sinusoidal positional encodings fail beyond the training "
      "length; RoPE, with position interpolation, extends further; PE.PE similarity falls with "
      "distance. Trains a decoder-only Transformer per task (copy, mqar, char_lm) and positional "
      "encoding on lengths up to L_train, evaluates at r*L_train for r = 1..max_eval_ratio "
      "(rope_pi also after a fine-tune at finetune_ratio*L_train); task = analysis trains nothing "
      "and computes the sinusoidal similarity table, its frequency resolution and RoPE's "
      "long-term decay.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini.
  spec.options = {
      string_sweep("task", {"copy", "mqar", "char_lm", "analysis"},
                   "copy (repeat the input) | mqar (associative recall) | char_lm (text file "
                   "`corpus`) | analysis (no training: similarity, resolution, RoPE decay)")
          .one_of({"copy", "mqar", "char_lm", "analysis"}),
      string_sweep("positional_encoding", kEncodings,
                   "positional encoding: any registered name (models/positional_registry.hpp)")
          .one_of(positional_encoding_names()),
      int_option("L_train", 16, "tokens", "longest training length (rows padded to it)")
          .at_least(1).at_most(65536),
      int_option("min_train_len", 12, "tokens", "shortest training length (lengths uniform in [min_train_len, L_train])")
          .at_least(1).at_most(65536).at_most_key("L_train"),
      int_option("max_eval_ratio", 8, "1", "evaluate at r*L_train for r = 1..max_eval_ratio")
          .at_least(1).at_most(64),
      int_option("learned_max_len", 0, "tokens",
                 "learned only: rows of the position table; 0 = L_train*max_eval_ratio (rows past "
                 "L_train are never trained)")
          .at_least(0).at_most(1 << 20),
      int_option("d_model", 32, "units", "model width").at_least(2).at_most(8192),
      int_option("num_layers", 2, "layers", "decoder layers").at_least(1).at_most(64),
      int_option("n_heads", 2, "heads", "attention heads (d_model / n_heads even for rope*)")
          .at_least(1).at_most(256),
      int_option("d_ff", 64, "units", "feed-forward inner size").at_least(1).at_most(65536),
      string_option("norm_placement", "pre", "pre (GPT-2) | post (Vaswani et al.)").one_of({"pre", "post"}),
      string_option("rope_pairing", "interleaved", "rope*: interleaved (RoFormer) | halves (GPT-NeoX)")
          .one_of({"interleaved", "halves"}),
      int_option("batch", 32, "sequences", "training batch").at_least(1).at_most(1 << 20),
      int_option("steps", 600, "updates", "training updates").at_least(1).at_most(1e9),
      real_option("lr", 3e-3, "1", "peak learning rate").greater_than(0),
      string_option("optimizer", "adamw", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0.01, "1", "weight decay (decoupled for adamw)").at_least(0),
      real_option("clip_norm", 1, "1", "max global gradient norm; 0 disables").at_least(0),
      string_option("schedule", "cosine", "learning-rate schedule").one_of({"constant", "cosine", "inverse_sqrt"}),
      int_option("warmup_steps", 50, "updates", "linear warm-up").at_least(0).at_most(1e9).at_most_key("steps"),
      int_option("finetune_ratio", 4, "1", "rope_pi fine-tune length = finetune_ratio*L_train")
          .at_least(2).at_most(64),
      int_option("finetune_steps", 60, "updates", "rope_pi fine-tune updates (0: no fine-tune)")
          .at_least(0).at_most(1e9),
      real_option("finetune_lr", 1e-3, "1", "rope_pi fine-tune peak learning rate").greater_than(0),
      int_option("finetune_warmup_steps", 10, "updates", "fine-tune warm-up").at_least(0).at_most(1e9),
      int_option("eval_batch", 64, "sequences", "test sequences per evaluation length")
          .at_least(1).at_most(1 << 20),
      int_option("log_every", 50, "updates", "updates per row of the steps table").at_least(1).at_most(1e9),
      int_option("copy_alphabet", 8, "symbols", "copy: symbols 1..copy_alphabet").at_least(1).at_most(1 << 20),
      int_option("mqar_n_pairs", 4, "pairs", "mqar: key-value pairs per row").at_least(1).at_most(1 << 20),
      int_option("mqar_n_queries", 4, "queries", "mqar: queries per row (<= mqar_n_pairs)").at_least(1).at_most(1 << 20),
      int_option("mqar_n_keys", 16, "tokens", "mqar: key vocabulary (>= mqar_n_pairs)").at_least(1).at_most(1 << 20),
      int_option("mqar_n_values", 16, "tokens", "mqar: value vocabulary").at_least(1).at_most(1 << 20),
      string_option("corpus", "default",
                    "char_lm: text file (bytes are tokens); default = experiments/position_extrapolation/data/corpus.txt"),
      real_option("corpus_test_fraction", 0.1, "1", "char_lm: last fraction of the text used as test split")
          .greater_than(0).at_most(0.9),
      int_option("analysis_head_dim", 64, "units", "analysis: RoPE head size (even)").at_least(2).at_most(1024),
      int_option("analysis_samples", 2000, "samples", "analysis: random (q, k) pairs for RoPE decay")
          .at_least(1).at_most(1e6),
      int_option("rope_max_distance", 4096, "tokens", "analysis: longest RoPE decay distance")
          .at_least(64).at_most(1 << 22),
      int_option("alias_search_to", 20000, "tokens", "analysis: distances searched for sinusoidal aliasing")
          .at_least(100).at_most(200000),
  };
  const std::vector<std::string> id = {"experiment", "task", "positional_encoding", "variant", "seed"};
  auto cols = [&](std::vector<std::string> rest) {
    std::vector<std::string> c = id;
    c.insert(c.end(), rest.begin(), rest.end());
    return c;
  };
  const std::vector<std::string> aid = {"experiment", "task", "positional_encoding", "seed"};
  auto acols = [&](std::vector<std::string> rest) {
    std::vector<std::string> c = aid;
    c.insert(c.end(), rest.begin(), rest.end());
    return c;
  };
  spec.tables = {
      {kMainTable,
       cols({"derived_seed", "L_train", "max_eval_len", "d_model", "num_layers", "n_heads", "n_params",
             "vocab_size", "steps", "finetune_len", "finetune_steps", "steps_done", "diverged",
             "diverged_step", "final_train_loss", "train_time_s"})},
      {"eval", cols({"L_train", "eval_len", "eval_ratio", "bucket", "n_scored", "loss_nats", "perplexity",
                     "accuracy", "chance_accuracy", "chance_loss_nats"})},
      {"steps", cols({"phase", "step", "train_loss", "grad_norm", "lr"})},
      {"similarity", acols({"d_model", "distance", "position", "dot", "cosine", "dot_closed_form",
                            "cosine_closed_form", "claimed_cosine"})},
      {"resolution", acols({"d_model", "band", "distance", "cosine", "separation"})},
      {"aliasing", acols({"d_model", "band", "n_frequencies", "period_min", "period_max",
                          "separation_at_1", "monotone_to", "first_alias_distance",
                          "closest_far_distance", "closest_far_separation", "searched_to"})},
      {"rope_decay", acols({"head_dim", "scale", "distance", "mean_abs_score_iid", "mean_abs_score_shared",
                            "mean_score_shared", "roformer_bound", "n_samples"})},
  };
  spec.default_seeds = 3;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

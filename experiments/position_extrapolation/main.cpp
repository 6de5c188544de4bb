// position_extrapolation: claim 3 of the README — sinusoidal encodings "extrapolate in theory" but
// fail beyond the training length in practice; RoPE encodes relative position and, with position
// interpolation, extends much further; PE·PE dot products fall with distance (and a widely
// repeated table says 0.92 / 0.65 / 0.12 / -0.06 at distance 1 / 10 / 100 / 1000 for d_model 512).
// Anchors: Press et al. 2021 (ALiBi, arXiv 2108.12409), Chen et al. 2023 (position interpolation,
// arXiv 2306.15595), Raffel et al. 2020 (T5's relative bias), Kazemnejad et al. 2023 (NoPE),
// Su et al. 2021 (RoFormer). Claim, method, expected outcome and the CSV columns: README.md.
//
// Grid: task (text | copy | mqar | passkey | analysis) x encoding (sinusoidal | learned |
// rope | alibi | none | t5_bias) x seeds. A training cell picks its learning rate by the pilot
// (phases.hpp), trains a decoder-only Transformer on rows (windows) of L_train tokens and
// evaluates it at every L = r·L_train of eval_ratios (evaluation.hpp; text in Press et al.'s
// non-overlapping and sliding-window modes). The rope cell also evaluates the same weights with
// position interpolation (rope_pi) and NTK scaling (rope_ntk) zero-shot, and, for the tasks in
// finetune_tasks, fine-tunes each of rope (direct fine-tuning), rope_pi and rope_ntk for the same
// updates at L' = finetune_ratio·L_train (Chen et al. 2023 §3) and evaluates them again. An
// analysis cell trains nothing (analysis.hpp): sinusoidal similarity and frequency resolution
// (sinusoidal), RoPE long-term decay for rope, rope_pi and rope_ntk (rope); others have none.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <xtensor/xoperation.hpp>
#include <xtensor/xview.hpp>

#include "analysis.hpp"
#include "evaluation.hpp"
#include "phases.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/positional_registry.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/positional.hpp"
#include "seqlab/core/threads.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
namespace pe = position_extrapolation;

namespace {

constexpr const char* kName = "position_extrapolation";
// Purposes of the random streams (Cell::stream_seed), shared by every task and encoding with the
// same replicate index, so comparisons across encodings are paired.
constexpr std::uint64_t kInitStream = 1;      // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;     // training batches
constexpr std::uint64_t kTestStream = 3;      // synthetic test sets: derive_seed(stream, eval_len)
constexpr std::uint64_t kFinetuneStream = 4;  // fine-tuning batches (the same for every variant)
constexpr std::uint64_t kAnalysisStream = 5;  // RoPE decay samples
// The pilot's streams, on replicate 0 whatever the cell's replicate (phases.hpp).
constexpr std::uint64_t kPilotInit = 6, kPilotTrain = 7, kPilotValid = 8;

const std::vector<std::string> kTasks = {"text", "copy", "mqar", "passkey", "analysis"};
const std::vector<std::string> kEncodings = {"sinusoidal", "learned", "rope", "alibi", "none", "t5_bias"};
const std::vector<std::string> kRopeVariants = {"rope", "rope_pi", "rope_ntk"};

std::vector<std::size_t> ratios(const Cell& cell) {
  std::vector<std::size_t> r;
  for (std::int64_t v : cell.get_int_list("eval_ratios")) r.push_back(static_cast<std::size_t>(v));
  return r;
}
std::size_t max_eval_len(const Cell& cell) {
  const auto r = ratios(cell);
  return cell.get_size("L_train") * (r.empty() ? 1 : *std::max_element(r.begin(), r.end()));
}
std::size_t learned_rows(const Cell& cell) {
  const std::size_t m = cell.get_size("learned_max_len");
  return m == 0 ? max_eval_len(cell) : m;
}
std::size_t finetune_len(const Cell& cell) { return cell.get_size("finetune_ratio") * cell.get_size("L_train"); }
bool finetunes(const Cell& cell) {
  const auto tasks = cell.get_string_list("finetune_tasks");
  return cell.get_string("encoding") == "rope" && cell.get_int("finetune_steps") > 0 &&
         std::find(tasks.begin(), tasks.end(), cell.get_string("task")) != tasks.end();
}
int steps_of(const Cell& cell) { return cell.get_int32("steps_" + cell.get_string("task")); }
// The keys a cell never reads (ExperimentSpec::unread_keys): the other tasks' steps_<task> and
// lr_grid_<task>, lr_grid where the cell's task has its own grid (lr_grid_of), and the fine-tune
// keys other than finetune_tasks in a cell that does not fine-tune (finetunes). So extending one
// task's grid or budget, or the fine-tunes, leaves the fingerprints, and the stored results, of the
// cells that do not use them.
std::vector<std::string> unread_keys(const Cell& cell) {
  const std::string& task = cell.get_string("task");
  std::vector<std::string> out;
  for (const char* t : {"text", "copy", "mqar", "passkey"}) {
    if (task == t) continue;
    out.push_back(std::string("steps_") + t);
    out.push_back(std::string("lr_grid_") + t);
  }
  if (task == "analysis" || !cell.get_real_list("lr_grid_" + task).empty()) out.push_back("lr_grid");
  if (!finetunes(cell))
    for (const char* k : {"finetune_ratio", "finetune_steps", "finetune_batch", "finetune_lr_scale",
                          "finetune_warmup_steps", "finetune_eval_steps", "finetune_schedule"})
      out.push_back(k);
  return out;
}
// The updates after which a fine-tune is evaluated: finetune_eval_steps below finetune_steps, in
// increasing order (the evaluation after the last update is made after the phase, whatever it did).
std::vector<int> finetune_checkpoints(const Cell& cell) {
  const int n = cell.get_int32("finetune_steps");
  std::vector<int> at;
  for (std::int64_t s : cell.get_int_list("finetune_eval_steps"))
    if (s < n) at.push_back(static_cast<int>(s));
  std::sort(at.begin(), at.end());
  return at;
}
// The RoPE head size of the analysis: analysis_head_dim, or 0 = the trained head size d_model / n_heads.
std::size_t analysis_head_dim(const Cell& cell) {
  const std::size_t hd = cell.get_size("analysis_head_dim");
  return hd != 0 ? hd : cell.get_size("d_model") / cell.get_size("n_heads");
}

ModelConfig model_config(const Cell& cell, const TaskSpec& task, const std::string& encoding) {
  ModelConfig mc;
  mc.model = "transformer_decoder";
  apply_task_spec(task, mc);  // embedding input, vocabulary, per-position head
  mc.embedding_dim = mc.hidden_size = cell.get_size("d_model");
  mc.num_layers = cell.get_size("num_layers");
  mc.n_heads = cell.get_size("n_heads");
  mc.d_ff = cell.get_size("d_ff");
  mc.norm = "layer_norm";
  mc.norm_placement = cell.get_string("norm_placement");
  mc.positional_encoding = encoding;
  mc.rope_pairing = cell.get_string("rope_pairing");
  mc.max_len = learned_rows(cell);
  mc.train_len = cell.get_size("L_train");
  mc.relative_buckets = cell.get_size("relative_buckets");
  mc.relative_max_distance = cell.get_size("relative_max_distance");
  mc.dropout = 0.0f;
  return mc;
}

[[noreturn]] void bad(const Cell& cell, const std::string& key, const std::string& allowed) {
  throw experiment::ConfigError(key + ": invalid value '" + cell.params.text(key) + "': " + allowed);
}

void validate(const Cell& cell) {
  const std::string& task = cell.get_string("task");
  const std::size_t L = cell.get_size("L_train");
  const auto r = ratios(cell);
  if (r.empty() || r.front() != 1 || !std::is_sorted(r.begin(), r.end()) ||
      std::adjacent_find(r.begin(), r.end()) != r.end())
    bad(cell, "eval_ratios", "increasing positive integers starting with 1 (the training length)");
  if (cell.get_string("encoding") == "learned" && task != "analysis" && learned_rows(cell) < max_eval_len(cell))
    bad(cell, "learned_max_len",
        "the learned table must cover the longest evaluation length L_train * max(eval_ratios) = " +
            std::to_string(max_eval_len(cell)) + ": 0 (= that length) or an integer >= it");
  if (task == "copy" && cell.get_size("copy_lag") * 2 > L) bad(cell, "copy_lag", "an integer in [1, L_train / 2]");
  if (task == "text" && cell.get_size("sliding_stride") >= L)
    bad(cell, "sliding_stride", "an integer in [1, L_train - 1]");
  if (task == "analysis") {
    if (analysis_head_dim(cell) % 2 != 0)
      bad(cell, "analysis_head_dim",
          "an even integer, or 0 when d_model / n_heads (" + std::to_string(analysis_head_dim(cell)) + ") is even");
    return;
  }
  if (cell.get_int("warmup_steps") > steps_of(cell))
    bad(cell, "warmup_steps", "an integer <= steps_" + task + " (" + cell.params.text("steps_" + task) + ")");
  if (cell.get_int("finetune_steps") > 0 && cell.get_int("finetune_warmup_steps") > cell.get_int("finetune_steps"))
    bad(cell, "finetune_warmup_steps", "an integer <= finetune_steps (" + cell.params.text("finetune_steps") + ")");
  const std::size_t longest = std::max(max_eval_len(cell), finetunes(cell) ? finetune_len(cell) : 0);
  std::shared_ptr<const TextCorpus> corpus;
  if (task == "text") {
    corpus = pe::open_corpus(cell);  // ConfigError naming corpus, unit or a fraction
    corpus->require_window(longest);
  }
  // The task at the training and the longest length, the model (n_heads dividing d_model, ...).
  const auto train = pe::cell_task(cell, L, corpus);
  pe::cell_task(cell, longest, corpus);
  model_config(cell, train->spec(), cell.get_string("encoding")).validate();
}

Row id_row(const Cell& cell, const std::string& encoding, const std::string& variant) {
  Row r;
  r.add("experiment", kName).add("task", cell.get_string("task")).add("positional_encoding", encoding)
      .add("variant", variant).add("seed", cell.replicate);
  return r;
}
// The id columns of a training phase's curve (steps table): the run's ids and its fine-tune rate
// scale (0 = not fine-tuned).
Row phase_row(const Cell& cell, const std::string& encoding, const std::string& variant, double lr_scale) {
  return id_row(cell, encoding, variant).add("finetune_lr_scale", lr_scale);
}
// The id columns of an evaluation (eval table): the phase's and the fine-tune updates done.
Row eval_row(const Row& phase, int finetune_step) { return Row(phase).add("finetune_step", finetune_step); }

// What a run's main-table row reports beyond the ids.
struct RunInfo {
  std::size_t n_params = 0, vocab = 0, finetune_len = 0, untrained_rows = 0;
  int steps = 0, finetune_steps = 0;
  double lr = std::nan(""), finetune_lr = std::nan(""), finetune_lr_scale = 0;
  std::string pilot;
  const PhaseResult* result = nullptr;
  double time_s = 0;
};

void add_run_row(const Cell& cell, CellOutput& out, const std::string& encoding, const std::string& variant,
                 const RunInfo& info) {
  const PhaseResult* r = info.result;
  const bool diverged = r != nullptr && r->diverged;
  out.add_row(id_row(cell, encoding, variant)
                  .add("derived_seed", cell.seed).add("L_train", cell.get_int("L_train"))
                  .add("max_eval_len", max_eval_len(cell)).add("d_model", cell.get_int("d_model"))
                  .add("num_layers", cell.get_int("num_layers")).add("n_heads", cell.get_int("n_heads"))
                  .add("n_params", info.n_params).add("vocab_size", info.vocab).add("steps", info.steps)
                  .add("lr", info.lr).add("lr_pilot", info.pilot.empty() ? std::string("none") : info.pilot)
                  .add("finetune_len", info.finetune_len).add("finetune_steps", info.finetune_steps)
                  .add("finetune_lr_scale", info.finetune_lr_scale).add("finetune_lr", info.finetune_lr).add("steps_done", r ? r->steps_done : 0)
                  .add("diverged", diverged ? 1 : 0).add("diverged_step", diverged ? r->diverged_step : -1)
                  .add("final_train_loss", r ? r->final_window_loss : std::nan(""))
                  .add("untrained_position_rows", info.untrained_rows).add("train_time_s", info.time_s));
}

void run_analysis(const Cell& cell, CellOutput& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& enc = cell.get_string("encoding");
  if (enc == "sinusoidal" && cell.replicate == 0) {  // deterministic: written once
    const pe::AnalysisId id{kName, "analysis", enc, cell.replicate};
    pe::sinusoidal_similarity(id, out);
    pe::sinusoidal_resolution(id, cell.get_size("alias_search_to"), out);
  }
  if (enc == "rope")  // rope, and its interpolated and NTK-scaled variants
    for (const auto& v : kRopeVariants)
      pe::rope_decay(pe::AnalysisId{kName, "analysis", v, cell.replicate}, analysis_head_dim(cell),
                     cell.get_size("L_train"), max_eval_len(cell) / cell.get_size("L_train"),
                     cell.get_size("rope_max_distance"), cell.get_size("analysis_samples"),
                     cell.get_string("rope_pairing"), cell.stream_seed(kAnalysisStream), out);
  RunInfo info;
  info.time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  add_run_row(cell, out, enc, "analysis", info);
}

// A model of config mc (another RoPE scaling) holding the weights of `trained`.
std::unique_ptr<SequenceModel> copy_of(SequenceModel& trained, const ModelConfig& mc) {
  Rng unused(0);
  auto m = make_model(mc, unused);
  m->load_state_dict(trained.state_dict());
  m->eval();
  return m;
}

void run_cell(const Cell& cell, CellOutput& out) {
  if (cell.get_string("task") == "analysis") {
    run_analysis(cell, out);
    return;
  }
  const std::string& enc = cell.get_string("encoding");
  const std::size_t Lt = cell.get_size("L_train"), batch = cell.get_size("batch");
  const std::shared_ptr<const TextCorpus> corpus = cell.get_string("task") == "text" ? pe::open_corpus(cell) : nullptr;
  const std::unique_ptr<Task> task = pe::cell_task(cell, Lt, corpus);
  const TaskSpec spec = task->spec();
  const ModelConfig mc = model_config(cell, spec, enc);
  const int warmup = cell.get_int32("warmup_steps");

  // The learning rate: the pilot on the validation split (phases.hpp).
  const std::uint64_t pilot_seed = stream_seed(cell.base_seed, 0, kPilotValid);
  TaskBatch valid;
  if (!corpus) {
    Rng vr(pilot_seed);
    valid = task->sample(cell.get_size("eval_batch"), vr);
  }
  int trial_index = 0;
  const pe::PilotResult pilot = pe::lr_pilot(cell, [&](double lr) {
    Rng init(stream_seed(cell.base_seed, 0, kPilotInit)), data(stream_seed(cell.base_seed, 0, kPilotTrain));
    auto m = make_model(mc, init);
    const int ps = pe::pilot_steps_of(cell);
    const PhaseResult r = pe::train_phase(cell, out, *m, *task, data, "pilot" + std::to_string(trial_index++), nullptr, ps, lr,
                                          std::min(warmup, ps / 10), batch);
    if (r.diverged) return std::numeric_limits<double>::infinity();
    const pe::BucketSums s =
        corpus ? pe::evaluate_text(*m, TextEvaluation::non_overlapping(corpus, TextSplit::valid, Lt,
                                                                        cell.get_size("pilot_tokens"), 64),
                                   0, Lt, mc.n_heads)
               : pe::evaluate_rows(*m, valid, 0, Lt, mc.n_heads);
    return s[pe::kAll].mean_loss();
  });
  if (cell.replicate == 0)
    for (std::size_t i = 0; i < pilot.grid.size(); ++i)
      out.add_row(Row().add("experiment", kName).add("task", cell.get_string("task")).add("positional_encoding", enc)
                      .add("lr", pilot.grid[i]).add("pilot_steps", pe::pilot_steps_of(cell))
                      .add("val_loss", pilot.val_loss[i]).add("chosen", pilot.grid[i] == pilot.lr ? 1 : 0),
                  "pilot");

  // Test sets (synthetic): one per length, shared by every encoding and variant (paired).
  pe::Evaluator ev{cell, ratios(cell), corpus, {}, spec};
  if (!corpus)
    for (std::size_t r : ratios(cell)) {
      Rng test_rng(derive_seed(cell.stream_seed(kTestStream), r * Lt));
      ev.tests.push_back(pe::cell_task(cell, r * Lt, corpus)->sample(cell.get_size("eval_batch"), test_rng));
    }

  Rng init_rng(cell.stream_seed(kInitStream));
  const std::unique_ptr<SequenceModel> model = make_model(mc, init_rng);
  auto* tm = dynamic_cast<TransformerModel*>(model.get());
  const auto* table = dynamic_cast<const LearnedPositionalEmbedding*>(tm->positional.get());
  // Learned: which table rows ever got a gradient (weight decay shrinks every row, so the values
  // alone cannot tell; positions >= L_train are never seen).
  std::vector<bool> touched(table ? table->max_len() : 0, false);
  const auto mark_touched = [&] {
    for (std::size_t p = 0; p < touched.size(); ++p)
      touched[p] = touched[p] || xt::any(xt::not_equal(xt::view(table->weight.grad, p), 0.0f));
  };
  Rng train_rng(cell.stream_seed(kTrainStream));
  const Row id = phase_row(cell, enc, "zero_shot", 0);
  pe::PhaseExtras learned_rows;
  if (table) learned_rows.after_backward = mark_touched;
  const PhaseResult pre = pe::train_phase(cell, out, *model, *task, train_rng, "pretrain", &id, steps_of(cell),
                                          pilot.lr, warmup, batch, learned_rows);
  RunInfo info;
  info.n_params = model->num_parameters();
  info.vocab = spec.vocab_size;
  info.steps = steps_of(cell);
  info.lr = pilot.lr;
  info.pilot = pe::pilot_text(pilot);
  info.result = &pre;
  info.time_s = pre.train_time_s;
  if (table)  // of the rows at positions >= L_train (a row before it may also go unscored)
    info.untrained_rows = static_cast<std::size_t>(std::count(touched.begin() + Lt, touched.end(), false));
  ev.run(out, *model, eval_row(id, 0), 0);
  add_run_row(cell, out, enc, "zero_shot", info);
  if (enc != "rope") return;

  // The same weights with position interpolation and NTK scaling, zero-shot (s = L / L_train).
  for (const std::string v : {"rope_pi", "rope_ntk"}) {
    const auto m = copy_of(*model, model_config(cell, spec, v));
    ev.run(out, *m, eval_row(phase_row(cell, v, "zero_shot", 0), 0), 0);
    add_run_row(cell, out, v, "zero_shot", info);
  }
  if (!finetunes(cell) || pre.diverged) return;
  // Chen et al. 2023 §3: each variant fine-tuned for the same updates on the same batches at
  // L' = finetune_ratio·L_train (rows of L', so the pi / ntk scale is s = L'/L_train), at a lower
  // peak learning rate (each of finetune_lr_scale × lr) with the schedule finetune_schedule;
  // evaluated after each of finetune_eval_steps updates and after the last (Chen et al. Table 4:
  // the window reached against fine-tune steps), with that scale for L <= L' (inputs padded to L')
  // and s = L / L_train beyond. rope is direct fine-tuning (no scaling).
  const std::size_t Lf = finetune_len(cell);
  const std::unique_ptr<Task> ft_task = pe::cell_task(cell, Lf, corpus);
  const std::vector<int> at = finetune_checkpoints(cell);
  pe::PhaseExtras plan;
  plan.schedule = cell.get_string("finetune_schedule");
  plan.every = cell.get_int32("finetune_steps");  // one curve window per stretch between evaluations
  for (int s : at) plan.every = std::gcd(plan.every, s);
  const std::vector<double> scales = cell.get_real_list("finetune_lr_scale");
  for (std::size_t k = 0; k < scales.size(); ++k)
    for (const auto& v : kRopeVariants) {
      const auto m = copy_of(*model, model_config(cell, spec, v));
      Rng ft_rng(cell.stream_seed(kFinetuneStream));
      const Row fid = phase_row(cell, v, "finetuned", scales[k]);
      const std::size_t width = v == "rope" ? 0 : Lf;
      RunInfo fi = info;
      fi.finetune_len = Lf;
      fi.finetune_steps = cell.get_int32("finetune_steps");
      fi.finetune_lr_scale = scales[k];
      fi.finetune_lr = pilot.lr * scales[k];
      plan.at_window = [&](int step) {
        if (std::binary_search(at.begin(), at.end(), step)) ev.run(out, *m, eval_row(fid, step), width);
      };
      const std::string phase = "finetune_" + v + (k == 0 ? "" : "_" + std::to_string(k));
      const PhaseResult ft = pe::train_phase(cell, out, *m, *ft_task, ft_rng, phase, &fid, fi.finetune_steps,
                                             fi.finetune_lr, cell.get_int32("finetune_warmup_steps"),
                                             cell.get_size("finetune_batch"), plan);
      fi.result = &ft;
      fi.time_s = pre.train_time_s + ft.train_time_s;
      ev.run(out, *m, eval_row(fid, ft.steps_done), width);
      add_run_row(cell, out, v, "finetuned", fi);
    }
}

}  // namespace

int main(int argc, char** argv) {
  seqlab::ensure_blas_kernels(argv);  // before anything: OpenBLAS's kernels (core/threads.hpp)
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 3 (README.md claims table): sinusoidal positional encodings fail beyond the training "
      "length; RoPE, with position interpolation, extends further; PE.PE similarity falls with "
      "distance. Trains a decoder-only Transformer per task (text: a character LM on the KJV or "
      "--corpus; copy with a fixed offset; scattered MQAR; passkey retrieval) and positional "
      "encoding on rows of L_train tokens with a learning rate from a pilot, evaluates at "
      "r*L_train for r in eval_ratios (text: non-overlapping and sliding windows); rope is also "
      "evaluated with interpolation and NTK scaling, and fine-tuned at finetune_ratio*L_train "
      "three ways; task = analysis trains nothing (similarity, resolution, RoPE decay).";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini.
  spec.options = {
      string_sweep("task", {"text", "copy", "mqar", "passkey", "analysis"},
                   "text (character LM on `corpus`) | copy (token copy_lag back) | mqar (scattered "
                   "associative recall) | passkey (retrieval at a random depth) | analysis (no training)")
          .one_of(kTasks),
      string_sweep("encoding", kEncodings,
                   "the positional encoding trained (models/positional_registry.hpp); the rope cell also "
                   "reports rope_pi and rope_ntk (the CSVs' positional_encoding column)")
          .one_of(positional_encoding_names()),
      int_option("L_train", 16, "tokens", "training length (rows / windows of exactly this length)").at_least(2).at_most(65536),
      int_list_option("eval_ratios", "1 2 4 8", "1", "evaluate at r*L_train for each r (increasing, first 1)")
          .at_least(1).at_most(64),
      int_option("learned_max_len", 0, "tokens", "learned only: table rows; 0 = the longest evaluation length")
          .at_least(0).at_most(1 << 20),
      int_option("d_model", 32, "units", "model width").at_least(2).at_most(8192),
      int_option("num_layers", 2, "layers", "decoder layers").at_least(1).at_most(64),
      int_option("n_heads", 4, "heads", "attention heads (d_model / n_heads even for rope)").at_least(1).at_most(256),
      int_option("d_ff", 128, "units", "feed-forward inner size").at_least(1).at_most(65536),
      string_option("norm_placement", "pre", "pre (GPT-2) | post (Vaswani et al.)").one_of({"pre", "post"}),
      string_option("rope_pairing", "interleaved", "rope*: interleaved (RoFormer) | halves (GPT-NeoX)")
          .one_of({"interleaved", "halves"}),
      int_option("relative_buckets", 32, "buckets", "t5_bias: T5's num_buckets (even, >= 4)").at_least(4).at_most(4096),
      int_option("relative_max_distance", 16, "tokens", "t5_bias: distances >= this share the last bucket")
          .at_least(3).at_most(1 << 20),
      int_option("batch", 32, "sequences", "training batch").at_least(1).at_most(1 << 20),
      int_option("steps_text", 500, "updates", "training updates, task text").at_least(1).at_most(1e9),
      int_option("steps_copy", 300, "updates", "training updates, task copy").at_least(1).at_most(1e9),
      int_option("steps_mqar", 500, "updates", "training updates, task mqar").at_least(1).at_most(1e9),
      int_option("steps_passkey", 400, "updates", "training updates, task passkey").at_least(1).at_most(1e9),
      real_list_option("lr_grid", "0.001 0.002 0.004", "1", "learning rates the pilot tries (every task without its own)")
          .greater_than(0),
      real_list_option("lr_grid_text", "none", "1", "task text: its own pilot grid (none: lr_grid)").empty_as("none").greater_than(0),
      real_list_option("lr_grid_copy", "none", "1", "task copy: its own pilot grid (none: lr_grid)").empty_as("none").greater_than(0),
      real_list_option("lr_grid_mqar", "none", "1", "task mqar: its own pilot grid (none: lr_grid)").empty_as("none").greater_than(0),
      real_list_option("lr_grid_passkey", "none", "1", "task passkey: its own pilot grid (none: lr_grid)")
          .empty_as("none").greater_than(0),
      int_option("pilot_steps", 100, "updates", "updates per pilot trial; 0 = the task's steps_<task> (a whole run)")
          .at_least(0).at_most(1e9),
      int_option("pilot_tokens", 4096, "characters", "text: validation targets scoring a pilot trial").at_least(1).at_most(1e9),
      string_option("optimizer", "adamw", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0.01, "1", "weight decay (decoupled for adamw)").at_least(0),
      real_option("clip_norm", 1, "1", "max global gradient norm; 0 disables").at_least(0),
      string_option("schedule", "cosine", "learning-rate schedule").one_of({"constant", "cosine"}),
      int_option("warmup_steps", 30, "updates", "linear warm-up").at_least(0).at_most(1e9),
      choice_list_option("finetune_tasks", "text", {"text", "copy", "mqar", "passkey"},
                         "tasks whose rope cell fine-tunes rope, rope_pi and rope_ntk"),
      int_option("finetune_ratio", 4, "1", "fine-tune length L' = finetune_ratio*L_train").at_least(2).at_most(64),
      int_option("finetune_steps", 60, "updates", "fine-tune updates per variant (0: none)").at_least(0).at_most(1e9),
      int_option("finetune_batch", 8, "sequences", "fine-tune batch (rows of L')").at_least(1).at_most(1 << 20),
      real_list_option("finetune_lr_scale", "0.2", "1",
                       "fine-tune peak learning rates = each of these * the pilot's lr (each fine-tunes the three variants)")
          .greater_than(0),
      int_option("finetune_warmup_steps", 10, "updates", "fine-tune warm-up").at_least(0).at_most(1e9),
      string_option("finetune_schedule", "constant",
                    "fine-tune schedule after the warm-up: constant (an evaluation after k updates is a fine-tune "
                    "of k updates) | cosine (over finetune_steps)")
          .one_of({"constant", "cosine"}),
      int_list_option("finetune_eval_steps", "25 50", "updates",
                      "fine-tune updates after which each fine-tune is also evaluated (besides after the last)")
          .empty_as("none").at_least(1).at_most_key("finetune_steps"),
      int_option("eval_batch", 128, "sequences", "synthetic: test rows per length (and pilot validation rows)")
          .at_least(1).at_most(1 << 20),
      int_option("log_every", 50, "updates", "updates per row of the steps table").at_least(1).at_most(1e9),
      string_option("corpus", "kjv", "text: kjv (Debian's King James Bible, split by book), a file or a directory "
                                     "of train.txt, valid.txt, test.txt (lib/README.md \"Real text\")"),
      string_option("unit", "char", "text: char (UTF-8 code points) | byte").one_of({"char", "byte"}),
      real_option("valid_fraction", 0.05, "1", "text, corpus file: share held out for validation").greater_than(0).at_most(0.5),
      real_option("test_fraction", 0.05, "1", "text, corpus file: share at the end for test").greater_than(0).at_most(0.5),
      int_option("eval_tokens", 8192, "characters", "text: test targets scored at every length and mode").at_least(1).at_most(1e9),
      int_option("sliding_stride", 8, "characters", "text: sliding-window stride (scored positions per window)")
          .at_least(1).at_most(65536),
      int_option("copy_lag", 4, "tokens", "copy: the offset copied (<= L_train / 2)").at_least(1).at_most(32768),
      int_option("copy_vocab", 16, "symbols", "copy: symbols").at_least(2).at_most(1 << 20),
      int_option("mqar_n_pairs", 4, "pairs", "mqar: key-value pairs per row").at_least(1).at_most(1 << 20),
      int_option("mqar_n_queries", 4, "queries", "mqar: queries per row (<= mqar_n_pairs)").at_least(1).at_most(1 << 20),
      int_option("mqar_n_keys", 16, "tokens", "mqar: key vocabulary (>= mqar_n_pairs)").at_least(1).at_most(1 << 20),
      int_option("mqar_n_values", 16, "tokens", "mqar: value vocabulary").at_least(1).at_most(1 << 20),
      int_option("passkey_digits", 5, "digits", "passkey: distinct digits of the key").at_least(1).at_most(10),
      int_option("passkey_filler", 5, "tokens", "passkey: period of the repeated filler").at_least(1).at_most(1 << 20),
      int_option("analysis_head_dim", 64, "units", "analysis: RoPE head size (even); 0 = the trained d_model / n_heads")
          .at_least(0).at_most(1024),
      int_option("analysis_samples", 2000, "samples", "analysis: random (q, k) pairs for RoPE decay").at_least(1).at_most(1e6),
      int_option("rope_max_distance", 4096, "tokens", "analysis: longest RoPE decay distance").at_least(64).at_most(1 << 22),
      int_option("alias_search_to", 20000, "tokens", "analysis: distances searched for sinusoidal aliasing")
          .at_least(100).at_most(200000),
  };
  const std::vector<std::string> id = {"experiment", "task", "positional_encoding", "variant", "seed"};
  auto cols = [&](std::vector<std::string> rest) {
    std::vector<std::string> c = id;
    c.insert(c.end(), rest.begin(), rest.end());
    return c;
  };
  auto acols = [&](std::vector<std::string> rest) {
    std::vector<std::string> c = {"experiment", "task", "positional_encoding", "seed"};
    c.insert(c.end(), rest.begin(), rest.end());
    return c;
  };
  spec.tables = {
      {kMainTable,
       cols({"derived_seed", "L_train", "max_eval_len", "d_model", "num_layers", "n_heads", "n_params", "vocab_size",
             "steps", "lr", "lr_pilot", "finetune_len", "finetune_steps", "finetune_lr_scale", "finetune_lr",
             "steps_done", "diverged",
             "diverged_step", "final_train_loss", "untrained_position_rows", "train_time_s"})},
      {"eval", cols({"finetune_lr_scale", "finetune_step", "mode", "stride", "L_train", "eval_len", "eval_ratio", "bucket", "n_scored", "loss_nats",
                     "perplexity", "accuracy", "baseline_accuracy", "baseline_loss_nats"})},
      {"steps", cols({"finetune_lr_scale", "phase", "step", "train_loss", "grad_norm", "lr"})},
      {"pilot", {"experiment", "task", "positional_encoding", "lr", "pilot_steps", "val_loss", "chosen"}},
      {"similarity", acols({"d_model", "distance", "position", "dot", "cosine", "dot_closed_form",
                            "cosine_closed_form", "claimed_cosine"})},
      {"resolution", acols({"d_model", "band", "distance", "cosine", "separation"})},
      {"aliasing", acols({"d_model", "band", "n_frequencies", "period_min", "period_max", "separation_at_1",
                          "monotone_to", "first_alias_distance", "closest_far_distance", "closest_far_separation",
                          "searched_to"})},
      {"rope_decay", acols({"head_dim", "scale", "distance", "mean_abs_score_iid", "mean_abs_score_shared",
                            "mean_score_shared", "roformer_bound", "n_samples"})},
  };
  spec.default_seeds = 2;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.unread_keys = unread_keys;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

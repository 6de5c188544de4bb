// norm_stability: claim 4 of the README — BatchNorm is unstable in Transformers because (1) padding
// pollutes the batch statistics, (2) small batches make them noisy and (3) training and inference
// use different statistics, while LayerNorm has none of these problems; and Pre-LN trains stably
// where Post-LN needs a learning-rate warm-up. Anchors: Shen et al. 2020 (PowerNorm, arXiv
// 2003.07845), Xiong et al. 2020 (arXiv 2002.04745), Wu & He 2018 (GroupNorm, arXiv 1803.08494).
// Claim, method, expected outcome and the CSV columns: README.md beside this file.
//
// Model: a small Transformer encoder classifier (models/ factory, "transformer_encoder"):
// Embedding(V, D, padding_idx 0) + sinusoidal positions -> L encoder layers with the cell's norm
// (layer_norm | batch_norm | masked_batch_norm | rms_norm | none) in the run's placement (pre |
// post) -> per-position Linear(D, K); the class logits are the mean of the per-position logits
// over the real (non-padded) positions (= the head applied to mean-pooled features, the head
// being linear; pool() in evaluation.hpp). Key padding goes to the attention and the norms
// (TransformerModel::set_padding). Task: the registry's "majority" (tasks/task.hpp, MajorityTask:
// variable-length majority classification, right-padded to seq_len, padding fraction a
// parameter; TaskBatch::lengths the real lengths). Loss: cross-entropy of the pooled logits.
// Training: one TrainingPhase per run (experiment/training.hpp: timer, checkpoint "run<i>", the
// loss blow-up rule); the probe on the first norm: probe.hpp.
//
// Grid: study x norm x seeds. The `study` value selects a sub-design, run inside the cell (one
// training run per value of the study's axis), so that the quick grid answers each sub-claim
// without the full product (README.md "Design"):
//   study = batch    one run per batch size in batch_sizes (pad_fraction, norm_placement,
//                    warmup_steps, lr fixed);
//   study = padding  one run per padding fraction in pad_fractions (batch, norm_placement,
//                    warmup_steps, lr fixed);
//   study = warmup   one run per (placement, warm-up, lr) in placements x warmups x lrs (batch,
//                    pad_fraction fixed).
//
// Legend: B batch, T seq_len, D d_model, K n_classes, L num_layers.
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "evaluation.hpp"
#include "probe.hpp"
#include "runs.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
using namespace norm_stability;

namespace {

constexpr const char* kName = "norm_stability";
// Purposes of the replicate's random streams (Cell::stream_seed): shared by every norm, study and
// run with the same replicate index, so comparisons across the grid are paired.
constexpr std::uint64_t kInitStream = 1;   // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;  // training batches
constexpr std::uint64_t kTestStream = 3;   // the fixed test sets (one per padding fraction)

const std::vector<std::string> kNorms = {"layer_norm", "batch_norm", "masked_batch_norm",
                                         "rms_norm", "none"};
const std::vector<std::string> kStudies = {"batch", "padding", "warmup"};

constexpr std::int64_t kMaxBatch = 4096;
constexpr std::int64_t kMaxSteps = 100000000;

// ---------------------------------------------------------------------------------------------
// The cell: its checks, its runs, and the experiment's declaration (main).

// The list keys, their bounds and the cross-key bounds (warmup_steps, warmups <= steps; min_len
// <= seq_len) are checked by the options before this runs.
void validate(const Cell& cell) {
  const auto runs = runs_of(cell);
  for (const auto& r : runs) make_schedule(cell, r).validate();
  // Every padding fraction must give lengths of at least min_len for this seq_len.
  std::vector<std::pair<std::string, double>> pads = {{"pad_fraction", cell.get_real("pad_fraction")}};
  for (const auto& r : runs) pads.push_back({"pad_fractions", r.pad_fraction});
  for (double p : cell.get_real_list("eval_pad_fractions")) pads.push_back({"eval_pad_fractions", p});
  for (const auto& [key, p] : pads) {
    try {
      (void)make_cell_task(cell, p);
    } catch (const std::invalid_argument& e) {
      std::string what = e.what();
      const std::string prefix = "MajorityTask: ";
      if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
      // "pad_fraction = 0.9: the mean length ..." -> name the key the value came from.
      if (what.rfind("pad_fraction", 0) == 0) what = key + what.substr(std::string("pad_fraction").size());
      throw experiment::ConfigError(what);
    }
  }
  const TaskSpec spec = make_cell_task(cell, cell.get_real("pad_fraction"))->spec();
  for (const auto& r : runs) model_config(cell, r, spec).validate();  // e.g. n_heads ∤ d_model
}

void run_one(const Cell& cell, const RunSpec& run, std::size_t run_index, CellOutput& out) {
  const int steps = cell.get_int32("steps");
  const int log_every = cell.get_int32("log_every");
  const std::size_t B = run.batch;
  const std::size_t T = cell.get_size("seq_len");
  const auto task = make_cell_task(cell, run.pad_fraction);
  const TaskSpec spec = task->spec();

  Rng init_rng(cell.stream_seed(kInitStream));
  std::unique_ptr<SequenceModel> model_ptr = make_model(model_config(cell, run, spec), init_rng);
  auto* model = dynamic_cast<TransformerModel*>(model_ptr.get());
  if (model == nullptr) throw std::logic_error("norm_stability: make_model did not build a TransformerModel");
  ProbedNorm& probe = install_probe(*model);
  model->train();
  const std::vector<Parameter*> params = model->parameters();

  OptimizerConfig oc;
  oc.lr = static_cast<float>(run.lr);
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);
  const LrSchedule schedule = make_schedule(cell, run);

  // Test sets: one per padding fraction, each from its own stream so that the set for a given
  // fraction is the same in every run and study of this replicate.
  std::map<std::int64_t, TaskBatch> tests;
  auto test_set = [&](double p) -> const TaskBatch& {
    auto it = tests.find(pad_key(p));
    if (it != tests.end()) return it->second;
    Rng rng(derive_seed(cell.stream_seed(kTestStream), static_cast<std::uint64_t>(pad_key(p))));
    return tests.emplace(pad_key(p), make_cell_task(cell, p)->sample(cell.get_size("test_size"), rng))
        .first->second;
  };

  Row id;
  id.add("experiment", kName)
      .add("study", cell.get_string("study"))
      .add("norm", run.norm)
      .add("norm_placement", run.placement)
      .add("batch", B)
      .add("pad_fraction", run.pad_fraction)
      .add("warmup_steps", run.warmup_steps)
      .add("lr", run.lr)
      .add("seed", cell.replicate);

  // Initial loss (train mode, chunks of B: what the first updates see, averaged over the test set).
  const double initial_loss = evaluate(*model, probe, test_set(run.pad_fraction), true, B).loss;
  const double blowup_loss = cell.get_real("divergence_factor") * initial_loss;
  const std::size_t window = cell.get_size("divergence_window");

  Rng train_rng(cell.stream_seed(kTrainStream));
  TaskBatch cur;  // alive through forward and backward
  CrossEntropyLoss ce;
  auto loss_and_grad = [&](int /*step*/) -> double {
    cur = task->sample(B, train_rng);
    model->set_padding(&cur.padding);
    const Tensor3 logits = model->forward(cur.tokens);
    const double loss = ce.forward(pool(logits, cur.lengths), ids_of(cur.targets));
    model->backward(unpool(ce.backward(), cur.lengths, T));
    return loss;
  };
  // Per-update histories (the run's summaries) and the steps table every log_every updates.
  std::vector<double> losses, grad_norms;
  std::vector<ProbeStats> stats;
  TrainingPhase phase(cell, out, model, "run" + std::to_string(run_index));
  phase.steps(steps).clip_norm(cell.get_real("clip_norm")).blowup(blowup_loss, window);
  phase.on_step([&](const StepRecord& r) {
    losses.push_back(r.loss);
    grad_norms.push_back(r.grad_norm);
    stats.push_back(probe.last());
    const ProbeStats& s = stats.back();
    if (r.step % log_every == 0 || r.step == steps - 1)
      out.add_row(Row(id)
                      .add("step", r.step)
                      .add("loss", r.loss)
                      .add("grad_norm", r.grad_norm)
                      .add("step_lr", r.lr)
                      .add("mu_dev", s.mu_dev)
                      .add("var_dev", s.var_dev)
                      .add("pad_mean_shift", s.pad_mean_shift)
                      .add("pad_var_shift", s.pad_var_shift)
                      .add("stat_count", s.stat_count)
                      .add("n_real", s.n_real),
                  "steps");
  });
  // --checkpoint-every: the phase saves the model (with the probe's reference statistics,
  // ProbedNorm::collect_buffers), the optimizer, the "steps" rows and its blow-up window; these
  // are what the closures change besides.
  phase.state().add("train_rng", train_rng);
  phase.state().add("losses", losses);
  phase.state().add("grad_norms", grad_norms);
  phase.state().add_trivial_vector("stats", stats);
  probe.set_enabled(true);
  const PhaseResult tr = phase.run(params, *optim, schedule, loss_and_grad);
  probe.set_enabled(false);
  model->set_padding(nullptr);

  const RunSummary sum = summarize(losses, grad_norms, stats, steps, window);
  // Failed = diverged, or stalled: the final training loss is still above stall_fraction times
  // the initial loss (a collapse to the chance plateau, Post-LN's usual failure at a high lr).
  const bool failed =
      tr.diverged || !(sum.final_train_loss <= cell.get_real("stall_fraction") * initial_loss);

  // Evaluation: train mode (batch statistics, chunks of B) and eval mode (running statistics),
  // on the training padding fraction and on every eval_pad_fractions value.
  std::map<std::pair<std::int64_t, bool>, Metrics> metrics;
  auto metric = [&](double p, bool train_mode) {
    const auto key = std::make_pair(pad_key(p), train_mode);
    auto it = metrics.find(key);
    if (it == metrics.end())
      it = metrics.emplace(key, evaluate(*model, probe, test_set(p), train_mode, B)).first;
    return it->second;
  };
  const Metrics tm = metric(run.pad_fraction, true), em = metric(run.pad_fraction, false);
  for (double q : cell.get_real_list("eval_pad_fractions"))
    for (bool train_mode : {true, false}) {
      const Metrics m = metric(q, train_mode);
      out.add_row(Row(id)
                      .add("eval_pad_fraction", q)
                      .add("mode", train_mode ? "train" : "eval")
                      .add("accuracy", m.accuracy)
                      .add("loss", m.loss),
                  "eval");
    }

  out.add_row(Row(id)
                  .add("derived_seed", cell.seed)
                  .add("n_params", model->num_parameters())
                  .add("d_model", cell.get_int("d_model"))
                  .add("num_layers", cell.get_int("num_layers"))
                  .add("seq_len", cell.get_int("seq_len"))
                  .add("steps", steps)
                  .add("expected_pad_fraction", spec.expected_pad_fraction)
                  .add("initial_loss", initial_loss)
                  .add("blowup_loss", blowup_loss)
                  .add("diverged", tr.diverged ? 1 : 0)
                  .add("diverged_step", tr.diverged_step)
                  .add("diverged_reason", tr.diverged_reason)
                  .add("steps_done", tr.steps_done)
                  .add("final_train_loss", sum.final_train_loss)
                  .add("failed", failed ? 1 : 0)
                  .add("loss_volatility", sum.loss_volatility)
                  .add("grad_norm_first", sum.grad_norm_first)
                  .add("grad_norm_max", sum.grad_norm_max)
                  .add("mu_dev_late", sum.mu_dev_late)
                  .add("var_dev_late", sum.var_dev_late)
                  .add("pad_mean_shift_late", sum.pad_mean_shift_late)
                  .add("acc_train_mode", tm.accuracy)
                  .add("acc_eval_mode", em.accuracy)
                  .add("train_eval_gap", tm.accuracy - em.accuracy)
                  .add("loss_train_mode", tm.loss)
                  .add("loss_eval_mode", em.loss)
                  .add("chance_accuracy", spec.baseline_accuracy)
                  .add("train_time_s", tr.train_time_s));
}

void run_cell(const Cell& cell, CellOutput& out) {
  const std::vector<RunSpec> runs = runs_of(cell);
  for (std::size_t i = 0; i < runs.size(); ++i) run_one(cell, runs[i], i, out);
}

}  // namespace

int main(int argc, char** argv) {
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 4 (README.md claims table): BatchNorm is unstable in Transformers (padding pollutes "
      "its batch statistics, small batches make them noisy, train and inference statistics "
      "differ) while LayerNorm is not; Pre-LN trains stably where Post-LN needs a warm-up. "
      "Trains a small Transformer encoder classifier on variable-length majority classification "
      "(padded to seq_len) with each norm; the study key selects a sub-design run inside each "
      "cell: batch (a run per batch_sizes value), padding (per pad_fractions value) or warmup "
      "(per placements x warmups x lrs). Reports loss, gradient norm and PowerNorm's "
      "batch-statistics deviation per step, and per run train-/eval-mode accuracy, divergence, "
      "loss volatility and accuracy at other padding fractions.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("study", {"batch", "padding", "warmup"},
                   "sub-design run inside each cell: batch | padding | warmup (README.md)")
          .one_of(kStudies),
      string_sweep("norm", kNorms, "normalisation layer of every Transformer layer (and the "
                                   "final norm of pre-norm)")
          .one_of(norm_names()),
      string_option("norm_placement", "post",
                    "placement in the batch and padding studies (post: Vaswani et al.; pre: "
                    "Xiong et al.)")
          .one_of({"pre", "post"}),
      int_option("batch", 16, "sequences", "batch size in the padding and warmup studies")
          .at_least(1)
          .at_most(kMaxBatch),
      real_option("pad_fraction", 0.25, "1",
                  "expected fraction of padded positions in the batch and warmup studies")
          .at_least(0)
          .at_most(0.95),
      int_option("warmup_steps", 30, "updates",
                 "linear warm-up length in the batch and padding studies")
          .at_least(0)
          .at_most(kMaxSteps)
          .at_most_key("steps"),
      real_option("lr", 2e-3, "1", "peak learning rate in the batch and padding studies")
          .greater_than(0)
          .at_most(10),
      int_list_option("batch_sizes", "1 2 4 8 32", "sequences",
                      "batch study: space-separated batch sizes (one run each)")
          .at_least(1)
          .at_most(kMaxBatch),
      real_list_option("pad_fractions", "0 0.25 0.5", "1",
                       "padding study: space-separated padding fractions (one run each)")
          .at_least(0)
          .at_most(0.95),
      choice_list_option("placements", "pre post", {"pre", "post"},
                         "warmup study: space-separated norm placements"),
      int_list_option("warmups", "0 100", "updates",
                      "warmup study: space-separated warm-up lengths (updates)")
          .at_least(0)
          .at_most(kMaxSteps)
          .at_most_key("steps"),
      real_list_option("lrs", "0.003 0.03", "1", "warmup study: space-separated peak learning rates")
          .greater_than(0)
          .at_most(10),
      real_list_option("eval_pad_fractions", "0 0.25 0.5", "1",
                       "padding fractions of the extra test sets every run is evaluated on")
          .at_least(0)
          .at_most(0.95),
      int_option("seq_len", 32, "tokens", "padded length T").at_least(2).at_most(4096),
      int_option("min_len", 4, "tokens", "shortest real length allowed (>= 2: BatchNorm needs "
                                         "two positions)")
          .at_least(2)
          .at_most(4096)
          .at_most_key("seq_len"),
      int_option("n_classes", 8, "classes", "K class tokens (labels)").at_least(2).at_most(1000),
      int_option("n_noise", 4, "tokens", "M distractor tokens").at_least(0).at_most(1000),
      int_option("d_model", 32, "units", "model width D").at_least(1).at_most(4096),
      int_option("n_heads", 4, "heads", "attention heads (divide d_model)").at_least(1).at_most(256),
      int_option("d_ff", 64, "units", "feed-forward inner size").at_least(1).at_most(16384),
      int_option("num_layers", 2, "layers", "encoder layers L").at_least(1).at_most(64),
      int_option("steps", 300, "updates", "optimizer updates per run").at_least(1).at_most(kMaxSteps),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0, "1", "weight decay (L2 for adam/sgd, decoupled for adamw)")
          .at_least(0)
          .at_most(10),
      real_option("clip_norm", 0, "1", "max global gradient norm; 0 disables clipping (default: "
                                       "off, so instability shows)")
          .at_least(0),
      string_option("schedule", "cosine", "learning-rate schedule after the warm-up")
          .one_of({"constant", "cosine"}),
      int_option("test_size", 256, "sequences", "size of each fixed test set").at_least(1).at_most(1000000),
      real_option("divergence_factor", 3, "1",
                  "diverged when the mean loss of the last divergence_window updates exceeds this "
                  "multiple of the initial loss")
          .greater_than(1)
          .at_most(1e6),
      real_option("stall_fraction", 0.9, "1",
                  "failed (stalled) when the final training loss is above this fraction of the "
                  "initial loss")
          .greater_than(0)
          .at_most(1),
      int_option("divergence_window", 10, "updates", "window of the loss blow-up test")
          .at_least(1)
          .at_most(100000),
      int_option("log_every", 5, "updates", "a row of the steps table every this many updates")
          .at_least(1)
          .at_most(kMaxSteps),
  };
  const std::vector<std::string> ids = {"experiment", "study", "norm", "norm_placement", "batch",
                                        "pad_fraction", "warmup_steps", "lr", "seed"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> c = ids;
    c.insert(c.end(), more.begin(), more.end());
    return c;
  };
  spec.tables = {
      {kMainTable,
       with({"derived_seed", "n_params", "d_model", "num_layers", "seq_len", "steps",
             "expected_pad_fraction", "initial_loss", "blowup_loss", "diverged", "diverged_step",
             "diverged_reason", "steps_done", "final_train_loss", "failed", "loss_volatility",
             "grad_norm_first", "grad_norm_max", "mu_dev_late", "var_dev_late",
             "pad_mean_shift_late", "acc_train_mode", "acc_eval_mode", "train_eval_gap",
             "loss_train_mode", "loss_eval_mode", "chance_accuracy", "train_time_s"})},
      {"steps", with({"step", "loss", "grad_norm", "step_lr", "mu_dev", "var_dev",
                      "pad_mean_shift", "pad_var_shift", "stat_count", "n_real"})},
      {"eval", with({"eval_pad_fraction", "mode", "accuracy", "loss"})},
  };
  spec.default_seeds = 3;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

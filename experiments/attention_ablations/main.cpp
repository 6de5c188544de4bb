// attention_ablations: claim 5 of the README — separate W_Q and W_K matter (a shared projection
// makes Q Kᵀ symmetric); several heads beat one; encoder-only, decoder-only and encoder-decoder
// suit different tasks. Claim, method, expected outcome and the CSV columns: README.md beside this
// file.
//
// One cell = one ARM (task, architecture, Q/K sharing, n_heads, optional per-arm overrides of the
// other keys) and one replicate: a small Transformer is trained on fresh batches of a task and
// evaluated on fixed sets. The grid is the list of arms (the union of the sub-designs, listed
// explicitly in the configs):
//   Q/K sharing  separate vs shared W_Q = W_K vs shared with attention to self masked (Reformer),
//                parameter-matched by d_ff, on tasks whose attention must be asymmetric;
//   n_heads      1 .. 16 at fixed d_model on a task with two relations per position, with
//                test-time head pruning (Michel et al. 2019);
//   architecture encoder-only vs decoder-only vs prefix LM vs encoder-decoder (parameter- and
//                compute-matched) on transduction, classification and continuation.
// Every arm's learning rate is chosen from lr_grid by a pilot on replicate 0's validation split,
// once per arm and shared by its replicates (experiment/tuning.hpp shared_choose_lr), then every
// replicate of the arm is trained with it.
//
// Models (models/ factory): token embedding + positions -> pre-norm layers -> linear head;
// layouts, models and matching: arms.hpp; measurements: evaluation.hpp; training: TrainingPhase
// (experiment/training.hpp) whose window hook evaluates the fixed eval set.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/experiment/tuning.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"
#include "seqlab/core/threads.hpp"

#include <nlohmann/json.hpp>

#include "arms.hpp"
#include "evaluation.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
using namespace attention_ablations;

namespace {

constexpr const char* kName = "attention_ablations";
// Purposes of the replicate's random streams (Cell::stream_seed): shared by every arm with the
// same replicate index, so comparisons across arms are paired (same data, same fixed sets; the
// initialisation stream is the same too, though models of different shapes draw it differently).
// kGrammarStream = 5 (arms.hpp) is the Markov source of the lm task.
constexpr std::uint64_t kInitStream = 1;   // parameter initialisation (every pilot and the run)
constexpr std::uint64_t kTrainStream = 2;  // training batches (every pilot and the run)
constexpr std::uint64_t kTestStream = 3;   // the fixed test set
constexpr std::uint64_t kEvalStream = 4;   // the fixed set evaluated during training
constexpr std::uint64_t kValidStream = 6;  // the validation set (pilot, head importance)
constexpr std::uint64_t kSeenStream = 7;   // reverse: test set at the training lengths
// Sequences of the test set used for the attention diagnostics (logit asymmetry, attention mass).
constexpr std::size_t kProbeRows = 32;

// The arms of configs/quick.ini (the built-in default of the `arm` key).
const std::vector<std::string> kQuickArms = {
    "prev_token:decoder:separate:4", "prev_token:decoder:shared:4", "mqar:decoder:separate:4",
    "mqar:decoder:shared:4", "induction:decoder:separate:4", "induction:decoder:shared:4",
    "majority:decoder:separate:4", "majority:decoder:shared:4", "prev_token:encoder:separate:4",
    "prev_token:encoder:shared:4", "prev_token:decoder:separate:1", "prev_token:decoder:separate:2",
    "prev_token:decoder:separate:8", "mqar:decoder:separate:1", "mqar:decoder:separate:2",
    "mqar:decoder:separate:8", "induction:decoder:separate:1", "induction:decoder:separate:2",
    "induction:decoder:separate:8", "majority:decoder:separate:1", "majority:decoder:separate:2",
    "majority:decoder:separate:8", "majority:encoder:separate:4", "majority:encoder_decoder:separate:4",
    "reverse:encoder:separate:4", "reverse:decoder:separate:4", "reverse:encoder_decoder:separate:4",
    "lm:decoder:separate:4", "lm:encoder_decoder:separate:4"};

std::vector<OptionSpec> options() {
  return {
      string_sweep("arm", kQuickArms,
                   "task:arch:qk:n_heads[/key=value...]; task prev_token|mqar|induction|majority|reverse|lm|"
                   "lag_pair|dup_tag|text|continuation, arch encoder|decoder|prefix_lm|encoder_decoder|"
                   "encoder_decoder_compute, qk separate|shared|shared_noself|shared_noself_norm; /key=value overrides "
                   "a key for this arm; arm-only keys /seeds=N (replicates 0..N-1 only) and /seed_offset=K (replicate "
                   "r runs seed r+K)"),
      int_option("d_model", 32, "units", "model width D (encoder_decoder: the reference width; its own is matched)")
          .at_least(1).at_most(4096),
      int_option("num_layers", 2, "layers",
                 "layers of single-stack models; encoder_decoder: num_layers / 2 per stack; "
                 "encoder_decoder_compute: num_layers per stack").at_least(1).at_most(64),
      int_option("ff_mult", 2, "1", "feed-forward inner size d_ff = ff_mult * width").at_least(1).at_most(64),
      string_option("norm_placement", "pre", "LayerNorm placement").one_of({"pre", "post"}),
      string_option("positional_encoding", "sinusoidal",
                    "positions (sinusoidal/learned/none added or absent, rope rotates q and k: all keep "
                    "shared-QK logits symmetric)").one_of({"sinusoidal", "learned", "rope", "none"}),
      string_option("shared_match", "none",
                    "shared-QK single-stack models: none (W_K's parameters removed) or d_ff (given back as "
                    "feed-forward units, count matched to the separate model)").one_of({"none", "d_ff"}),
      int_option("seq_len", 16, "tokens",
                 "sequence length (induction: prefix seq_len - seq_len/3, repeat seq_len/3; lm, continuation: "
                 "window, scored on its last seq_len - seq_len/2; dup_tag: its length)").at_least(2).at_most(4096),
      int_option("vocab", 16, "tokens", "symbols of the synthetic tasks; keys and values of mqar")
          .at_least(2).at_most(100000),
      int_option("mqar_pairs", 4, "pairs", "mqar: key-value pairs per sequence").at_least(1).at_most(10000),
      int_option("mqar_queries", 4, "queries", "mqar: queries per sequence (<= mqar_pairs)").at_least(1).at_most(10000),
      int_option("majority_classes", 4, "classes", "majority: class tokens (output classes)").at_least(2).at_most(1000),
      int_option("majority_noise", 4, "tokens", "majority: distractor tokens").at_least(0).at_most(1000),
      int_option("lm_order", 2, "tokens", "lm: Markov order (context length)").at_least(1).at_most(20),
      int_option("lm_branching", 3, "tokens", "lm: successors per context (p_j ~ 2^-j)").at_least(1).at_most(100000),
      int_option("lag_a", 1, "tokens", "lag_pair: first lag").at_least(1).at_most(4095),
      int_option("lag_b", 3, "tokens", "lag_pair: second lag (!= lag_a)").at_least(1).at_most(4095),
      int_option("reverse_min_len", 8, "symbols", "reverse: shortest source").at_least(1).at_most(2048),
      int_option("reverse_max_len", 8, "symbols", "reverse: longest source").at_least(1).at_most(2048),
      int_list_option("reverse_holdout", "none", "symbols",
                      "reverse: lengths never trained on; the test and validation sets use them (none: the "
                      "training lengths)").empty_as("none").at_least(1).at_most(2048),
      string_option("reverse_valid", "holdout",
                    "reverse: the lengths of the validation set (learning-rate pilot, eval curve, head importance): "
                    "holdout (the held-out lengths, as the test set) | train (the training lengths)")
          .one_of({"holdout", "train"}),
      string_option("corpus", "kjv", "text, continuation: kjv or a corpus file (tasks/text.hpp)"),
      int_option("batch", 32, "sequences", "training batch size (fresh batch every step)").at_least(1).at_most(65536),
      int_option("steps", 800, "updates", "optimizer updates").at_least(1).at_most(1e9),
      real_option("lr", 3e-3, "1", "peak learning rate when lr_grid is none").greater_than(0),
      real_list_option("lr_grid", "none", "1",
                       "learning rates of the pilot (once per arm on replicate 0's streams; the rate whose "
                       "trial reaches the lowest validation loss wins); none: lr")
          .empty_as("none").greater_than(0),
      int_option("pilot_steps", 200, "updates",
                 "most updates of each pilot trial (validation loss every eval_every updates; the trial's score "
                 "is the lowest)").at_least(1).at_most(1e9),
      real_option("solved_loss", 0, "1",
                  "pilot: a trial stops once its validation loss is at most solved_loss x the task's chance loss "
                  "(0: never)").at_least(0).at_most(1),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0, "1", "weight decay (L2 for adam/sgd, decoupled for adamw)").at_least(0),
      real_option("clip_norm", 1, "1", "max global gradient norm; 0 disables clipping").at_least(0),
      string_option("schedule", "constant", "learning-rate schedule").one_of({"constant", "cosine", "inverse_sqrt"}),
      int_option("warmup_steps", 20, "updates", "linear warm-up length (pilots: min(warmup_steps, pilot_steps))")
          .at_least(0).at_most(1e9),
      int_option("eval_every", 25, "updates", "updates between evaluations on the eval set").at_least(1).at_most(1e9),
      int_option("eval_batch", 64, "sequences", "size of the fixed eval set (curve, steps to target)")
          .at_least(1).at_most(1e6),
      int_option("val_batch", 256, "sequences", "size of the validation set (pilot, head importance)")
          .at_least(1).at_most(1e6),
      int_option("test_batch", 256, "sequences", "size of the fixed test set").at_least(1).at_most(1e6),
      real_list_option("prune_fractions", "none", "1",
                       "single-stack models with >= 2 heads: shares of the heads removed at test time, least "
                       "important first (none: no pruning)").empty_as("none").at_least(0).at_most(1),
      real_option("target_fraction", 0.9, "1", "target accuracy = chance + target_fraction * (best - chance)")
          .greater_than(0).at_most(1),
  };
}

LrSchedule schedule_for(const Cell& cell, double lr, int steps) {
  LrSchedule s;
  s.kind = cell.get_string("schedule");
  s.base_lr = static_cast<float>(lr);
  s.warmup_steps = std::min(cell.get_int32("warmup_steps"), steps);
  if (s.kind == "inverse_sqrt" && s.warmup_steps < 1)
    throw experiment::ConfigError("warmup_steps: invalid value '" + cell.params.text("warmup_steps") +
                      "': schedule = inverse_sqrt needs an integer >= 1");
  s.total_steps = steps;
  s.validate();
  return s;
}

std::string join_reals(const std::vector<double>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + format_real(v[i]);
  return s.empty() ? "none" : s;
}

void validate(const Cell& raw) {
  Arm arm;
  const Cell cell = resolve_cell(raw, options(), &arm);
  if (cell.get_int32("warmup_steps") > cell.get_int32("steps"))
    throw experiment::ConfigError("warmup_steps: invalid value '" + cell.params.text("warmup_steps") +
                      "': expected an integer <= steps (" + cell.params.text("steps") + ")");
  schedule_for(cell, cell.get_real("lr"), cell.get_int32("steps"));
  const ArmTask task(cell, arm);
  choose_model(cell, arm, task).cfg.validate();  // e.g. rope with an odd head size
}

void run_cell(const Cell& raw, CellOutput& out) {
  Arm arm;
  const Cell cell = resolve_cell(raw, options(), &arm);
  const ArmTask task(cell, arm);
  const TaskSpec& spec = task.spec();
  const ModelChoice choice = choose_model(cell, arm, task);
  const std::size_t batch = cell.get_size("batch");
  const int steps = cell.get_int32("steps");
  const double target_accuracy =
      spec.baseline_accuracy + cell.get_real("target_fraction") * (spec.best_accuracy - spec.baseline_accuracy);

  Rng test_rng(cell.stream_seed(kTestStream)), eval_rng(cell.stream_seed(kEvalStream)),
      valid_rng(cell.stream_seed(kValidStream)), seen_rng(cell.stream_seed(kSeenStream));
  const auto test = task.fixed_set(SetKind::test, cell.get_size("test_batch"), test_rng);
  const auto eval_set = task.fixed_set(SetKind::valid, cell.get_size("eval_batch"), eval_rng);
  const auto valid = task.fixed_set(SetKind::valid, cell.get_size("val_batch"), valid_rng);
  const TaskBatch probe = slice_rows(test.front(), 0, std::min(kProbeRows, batch_rows(test.front())));

  Row id;
  id.add("experiment", kName).add("arm", raw.get_string("arm")).add("task", arm.task).add("arch", arm.arch)
      .add("qk", arm.qk).add("n_heads", arm.n_heads).add("seed", cell.replicate);  // seed_offset included

  // A fresh model from the initialisation stream of `streams` (this cell, or replicate 0 for the
  // pilot).
  auto make = [&](const Cell& streams) {
    Rng init_rng(streams.stream_seed(kInitStream));
    std::unique_ptr<SequenceModel> m = make_model(choice.cfg, init_rng);
    for (MultiheadAttention* a : self_attentions(*m)) {
      a->set_mask_self(arm.mask_self());
      a->set_normalize_keys(arm.normalize_keys());
    }
    return m;
  };
  CrossEntropyLoss ce(kIgnoreTarget);
  // Trains `model` for `n` updates at peak rate `lr` as phase `name` on batches of `data` drawn
  // from the training stream of `streams` (the pilot: replicate 0's; the run: this cell's); `hook`
  // (may be empty) is the window hook; `state` (may be null) is a value the hook changes, saved in
  // checkpoints.
  auto train = [&](SequenceModel& model, const Cell& streams, const ArmTask& data, const std::string& name,
                   double lr, int n, int every, const TrainingPhase::WindowHook& hook, int* steps_to_target,
                   double* state) {
    const std::vector<Parameter*> params = model.parameters();
    OptimizerConfig oc;
    oc.lr = static_cast<float>(lr);
    oc.weight_decay = cell.get_float("weight_decay");
    auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);
    Rng train_rng(streams.stream_seed(kTrainStream));
    TrainingPhase phase(cell, out, &model, name);
    phase.steps(n).clip_norm(cell.get_real("clip_norm"))
        .label(name + " " + raw.get_string("arm") + " seed " + std::to_string(cell.replicate));
    if (hook) phase.every(every, hook);
    // --checkpoint-every: the updates also change the training data stream (and steps_to_target).
    phase.state().add("train_rng", train_rng);
    if (steps_to_target) phase.state().add("steps_to_target", *steps_to_target);
    if (state) phase.state().add("pilot_best", *state);
    return phase.run(params, *optim, schedule_for(cell, lr, n), [&](int /*step*/) {
      const TaskBatch b = data.sample(batch, train_rng);
      const Tensor3 logits = forward(model, data, b);
      const double loss = ce.forward(rows_of(logits), ids_of(b.targets));
      model.backward(unrows(ce.backward(), logits.shape()[0], logits.shape()[1]));
      return loss;
    });
  };

  // The learning rate: the pilot over lr_grid, or lr. The pilot runs once per arm, on replicate
  // 0's streams (its task, initialisation, training batches and validation set), and its choice is
  // shared by the arm's replicates through <out>/pilots (shared_choose_lr), so every arm is tuned
  // by the same procedure on data none of its test scores use. A trial trains a fresh model for at
  // most pilot_steps updates (the arm's schedule over pilot_steps), evaluates the validation loss
  // every eval_every updates and scores the lowest; it stops once that loss is at most solved_loss
  // x the chance loss (the task is solved: a longer trial could not rank it lower in any way that
  // matters). Scoring the best loss over a pilot of the order of the run, rather than the loss
  // after a short pilot, keeps a rate that is fast at first and then stalls from beating one that
  // solves the task later. A diverged trial scores +inf (never chosen).
  const std::vector<double> grid = cell.get_real_list("lr_grid");
  const int pilot_steps = grid.size() >= 2 ? cell.get_int32("pilot_steps") : 0;
  LrChoice lr{cell.get_real("lr"), 0, {}, false};
  if (grid.size() == 1) lr.lr = grid.front();
  if (grid.size() >= 2) {
    Cell rep0 = cell;
    rep0.replicate = 0;
    rep0.seed = replicate_seed(cell.base_seed, 0);
    const ArmTask task0(rep0, arm);
    Rng valid0_rng(rep0.stream_seed(kValidStream));
    const auto valid0 = task0.fixed_set(SetKind::valid, cell.get_size("val_batch"), valid0_rng);
    const double solved = cell.get_real("solved_loss") * task0.spec().baseline_loss;
    nlohmann::json group = raw.fingerprint(kName);
    group["replicate"] = 0;
    group["params"]["arm"] = arm.base;  // without seeds / seed_offset: the same pilot as the base arm
    std::size_t k = 0;
    lr = shared_choose_lr(cell, "lr pilot of " + group.dump(), grid, [&](double rate) {
      std::unique_ptr<SequenceModel> m = make(rep0);
      double best = std::numeric_limits<double>::infinity();
      const PhaseResult r = train(*m, rep0, task0, "pilot" + std::to_string(k++), rate, pilot_steps,
                                  cell.get_int32("eval_every"), [&](const TrainingWindow&) {
        const double v = evaluate(*m, task0, valid0).loss;
        if (std::isfinite(v) && v < best) best = v;
        return solved > 0 && v <= solved;
      }, nullptr, &best);
      return r.diverged ? std::numeric_limits<double>::infinity() : best;
    });
    for (std::size_t i = 0; i < grid.size(); ++i)
      out.add_row(Row(id).add("lr", grid[i]).add("pilot_steps", pilot_steps).add("val_loss", lr.val_loss[i])
                      .add("chosen", i == lr.index ? 1 : 0).add("all_diverged", lr.all_diverged ? 1 : 0),
                  "lr_pilot");
  }

  // Curve: one row per eval_every updates (and after the last): the window's mean training loss,
  // then loss and accuracy on the fixed eval set; steps_to_target is the first evaluation step
  // whose accuracy reaches the target.
  const std::unique_ptr<SequenceModel> model_ptr = make(cell);
  SequenceModel& model = *model_ptr;
  const AttentionDiagnostics init_diag = diagnose(model, task, probe);
  int steps_to_target = -1;
  PhaseResult tr = train(model, cell, task, "train", lr.lr, steps, cell.get_int32("eval_every"), [&](const TrainingWindow& w) {
    const Evaluation ev = evaluate(model, task, eval_set);
    if (steps_to_target < 0 && ev.accuracy >= target_accuracy) steps_to_target = w.step;
    out.add_row(Row(id).add("step", w.step).add("train_loss", w.mean_loss).add("eval_loss", ev.loss)
                    .add("eval_accuracy", ev.accuracy), "curve");
    return false;
  }, &steps_to_target, nullptr);

  const Evaluation ev = evaluate(model, task, test);  // eval mode after run()
  const Evaluation val = evaluate(model, task, valid);
  Evaluation seen;
  std::vector<TaskBatch> seen_set;
  if (!task.holdout_lengths().empty()) {
    seen_set = task.fixed_set(SetKind::seen, cell.get_size("test_batch"), seen_rng);
    seen = evaluate(model, task, seen_set);
  }
  // Reverse: the test metrics of each length, held out (the test set) and trained on (the seen set).
  if (arm.task == "reverse") {
    for (const auto& [split, sets] : {std::pair<const char*, const std::vector<TaskBatch>*>{"held_out", &test},
                                      {"training", &seen_set}})
      for (const TaskBatch& b : *sets) {
        const Evaluation e = evaluate(model, task, {b});
        const std::size_t w = b.targets.shape()[1];  // n, or 2n in the decoder and prefix-LM layouts
        const bool stacked = arm.arch == "decoder" || arm.arch == "prefix_lm";
        out.add_row(Row(id).add("lengths", split).add("length", stacked ? w / 2 : w)
                        .add("rows", batch_rows(b)).add("loss", e.loss).add("accuracy", e.accuracy)
                        .add("exact_match", e.exact_match), "by_length");
      }
  }
  const AttentionDiagnostics diag = diagnose(model, task, probe);
  tr.check_test_loss(ev.loss);

  // Test-time head pruning (Michel et al. 2019): importance on the validation set, then the test
  // metrics with the least important heads removed.
  const PruneResult pr = tr.diverged ? PruneResult{} : prune_heads(model, task, valid, test, cell.get_real_list("prune_fractions"));
  for (const HeadAblation& a : pr.heads)
    out.add_row(Row(id).add("layer", a.layer).add("head", a.head).add("valid_loss", pr.valid_loss)
                    .add("valid_loss_masked", a.loss_masked).add("importance", a.importance), "heads");
  for (const PruneLevel& lv : pr.levels)
    out.add_row(Row(id).add("fraction", lv.fraction).add("heads_removed", lv.removed)
                    .add("heads_total", pr.heads.size()).add("test_loss", lv.test.loss)
                    .add("test_accuracy", lv.test.accuracy).add("full_test_loss", ev.loss)
                    .add("full_test_accuracy", ev.accuracy), "pruning");

  const ModelConfig& mc = choice.cfg;
  out.add_row(Row(id)
                  .add("derived_seed", cell.seed).add("d_model", mc.hidden_size).add("ref_d_model", cell.get_size("d_model"))
                  .add("num_layers", cell.get_size("num_layers")).add("d_ff", mc.d_ff)
                  .add("head_dim", mc.hidden_size / mc.n_heads).add("positional_encoding", mc.positional_encoding)
                  .add("encoder_layers", choice.encoder_layers).add("decoder_layers", choice.decoder_layers)
                  .add("n_params", model.num_parameters()).add("param_budget", choice.budget)
                  .add("forward_macs", forward_macs(mc, arm, task.mean_src_len(), task.mean_tgt_len()))
                  .add("seq_len", cell.get_size("seq_len")).add("mean_src_len", task.mean_src_len())
                  .add("mean_tgt_len", task.mean_tgt_len()).add("batch", batch).add("steps", steps)
                  .add("lr", lr.lr).add("lr_grid", join_reals(grid)).add("pilot_steps", pilot_steps)
                  .add("pilot_val_losses", join_reals(lr.val_loss)).add("lr_all_diverged", lr.all_diverged ? 1 : 0)
                  .add("test_loss", ev.loss).add("test_accuracy", ev.accuracy).add("test_exact_match", ev.exact_match)
                  .add("valid_loss", val.loss).add("seen_test_loss", seen.loss).add("seen_test_accuracy", seen.accuracy)
                  .add("chance_accuracy", spec.baseline_accuracy).add("best_accuracy", spec.best_accuracy)
                  .add("chance_loss", spec.baseline_loss).add("optimal_loss", spec.optimal_loss)
                  .add("target_accuracy", target_accuracy).add("steps_to_target", steps_to_target)
                  .add("logit_asymmetry_init", init_diag.logit_asymmetry).add("logit_asymmetry", diag.logit_asymmetry)
                  .add("diag_attention", diag.diag_attention).add("prev_attention", diag.prev_attention)
                  .add("diverged", tr.diverged ? 1 : 0).add("diverged_step", tr.diverged_step)
                  .add("steps_done", tr.steps_done).add("final_train_loss", tr.final_window_loss)
                  .add("train_time_s", tr.train_time_s));
}

}  // namespace

int main(int argc, char** argv) {
  seqlab::ensure_blas_kernels(argv);  // before anything: OpenBLAS's kernels (core/threads.hpp)
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 5 (README.md claims table): separate W_Q and W_K matter (a shared projection makes the attention "
      "logits symmetric; Reformer masks attention to self); several heads beat one (and most can be pruned at "
      "test time); encoder-only, decoder-only, prefix-LM and encoder-decoder suit different tasks. Each cell "
      "trains one arm task:arch:qk:n_heads[/key=value...] at a learning rate chosen by a pilot and reports "
      "test loss and accuracy, the measured symmetry ||S - S^T||/||S|| of the attention logits, and head "
      "pruning.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  spec.options = options();  // built-in defaults = configs/quick.ini
  const std::vector<std::string> id_cols = {"experiment", "arm", "task", "arch", "qk", "n_heads", "seed"};
  auto with = [&](std::vector<const char*> extra) {
    std::vector<std::string> c = id_cols;
    for (const char* e : extra) c.push_back(e);
    return c;
  };
  spec.tables = {
      {kMainTable,
       with({"derived_seed", "d_model", "ref_d_model", "num_layers", "d_ff", "head_dim", "positional_encoding",
             "encoder_layers", "decoder_layers", "n_params", "param_budget", "forward_macs", "seq_len",
             "mean_src_len", "mean_tgt_len", "batch", "steps", "lr", "lr_grid", "pilot_steps", "pilot_val_losses",
             "lr_all_diverged", "test_loss", "test_accuracy", "test_exact_match", "valid_loss", "seen_test_loss",
             "seen_test_accuracy", "chance_accuracy", "best_accuracy", "chance_loss", "optimal_loss",
             "target_accuracy", "steps_to_target", "logit_asymmetry_init", "logit_asymmetry", "diag_attention",
             "prev_attention", "diverged", "diverged_step", "steps_done", "final_train_loss", "train_time_s"})},
      {"curve", with({"step", "train_loss", "eval_loss", "eval_accuracy"})},
      {"heads", with({"layer", "head", "valid_loss", "valid_loss_masked", "importance"})},
      {"lr_pilot", with({"lr", "pilot_steps", "val_loss", "chosen", "all_diverged"})},
      {"pruning", with({"fraction", "heads_removed", "heads_total", "test_loss", "test_accuracy", "full_test_loss",
                        "full_test_accuracy"})},
      {"by_length", with({"lengths", "length", "rows", "loss", "accuracy", "exact_match"})},
  };
  // Reverse's per-length table came after cells of every arm were stored: those stay valid.
  spec.tables.back().optional = true;
  spec.default_seeds = 5;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.unread_keys = unread_keys;
  spec.keep = keep_cell;  // an arm's seeds (arms.hpp)
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

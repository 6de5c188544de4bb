// long_range_recall: claim 2 of the README — recurrent state decays over long distances (vanishing
// gradients, even with LSTM gates); attention links any two positions directly (path length O(1),
// against O(n) for recurrence and O(log_k n) for dilated convolutions).
// Anchor: Bai, Kolter & Koltun 2018 (arXiv 1803.01271), Table 1 and Fig. 5 (copy memory and adding
// problem; TCN vs LSTM vs GRU vs RNN). Claim, method, expected outcome and every CSV column:
// README.md beside this file.
//
// One cell = one (task, model, length, width, replicate): the model is built by the models/ factory
// at the parameter budget `param_budget` (hidden_size_for_budget; width = 0) or at hidden size
// `width` (the MQAR width study, Arora et al. 2023 Fig. 2), its learning rate chosen from lr_grid
// by a pilot on replicate 0's validation split (shared by the replicates, tuning.hpp), trained on
// fresh batches of the task until `steps` updates, early stopping or a solved validation loss,
// then evaluated on a fixed test set (a width-study cell: width_steps updates and width_patience,
// written into steps and patience by resolve). A "_long" arm (e.g. lstm_long, at the lengths of
// <task>_long_lengths) trains the same model without early stopping for long_steps updates at the
// fixed rate long_lr, no pilot: whether a run on its initial plateau leaves it given the updates.
// Tasks (lib tasks/):
//   copy_memory     CopyMemoryTask(T = length): Bai et al.'s copy memory, CE over all T+20 positions
//   adding          AddingProblem(seq_len = length): Bai et al.'s adding problem, MSE at the last step
//   mqar            MultiQueryAssociativeRecall(seq_len = length, P, Q = P) for every P of
//                   mqar_pairs ("2+4": a mixture; update s draws its batch from P = mqar_pairs[s mod n]),
//                   CE at the query positions (Arora et al. 2023, "Zoology")
//   distance_probe  DistanceProbe(seq_len = length): one symbol to recall at distance d uniform in
//                   [1, length-1], CE at the last position; tested at distance_bins exact distances
// Tables: main (one row per cell), steps (training and validation curve), lr_pilot (the pilot's
// validation loss per learning rate), distance (accuracy / loss against the
// dependency distance), grad_norms (‖∂L/∂u_t‖ against t at initialisation and after training),
// attention (the trained transformer's last-layer attention on one solved test example; replicate
// 0 only).
//
// Legend: B batch, S seq_len (task sequence length), V vocabulary / classes, E embedding_dim,
// H hidden_size (d_model for the transformer), L layers (recurrent layers, TCN levels, transformer
// layers), P key-value pairs, d dependency distance.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/experiment/tuning.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/positional_registry.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"
#include "seqlab/core/threads.hpp"

#include "evaluation.hpp"
#include "setup.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
using namespace long_range_recall;

namespace {

constexpr const char* kName = "long_range_recall";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Merged MQAR gradient table: about this many distances per cell and phase (main: merge_keep).
constexpr long kGradPoints = 16;
// Merged attention table: entries of at least this probability (the cells keep those >= 0.01).
constexpr double kMergedAttention = 0.05;

std::size_t column_index(const std::vector<std::string>& columns, const std::string& name) {
  const auto it = std::find(columns.begin(), columns.end(), name);
  if (it == columns.end()) throw std::logic_error("long_range_recall: no column " + name);
  return static_cast<std::size_t>(it - columns.begin());
}

const std::vector<std::string> kTasks = {"copy_memory", "adding", "mqar", "distance_probe"};
// The built-in default of the model sweep (quick.ini's): the five families; lstm_fb1 is allowed.
const std::vector<std::string> kDefaultModels = {"rnn", "lstm", "gru", "tcn", "transformer_decoder"};

// Why the main training phase ended (the stop_reason column).
enum StopCode : int { kMaxSteps = 0, kNoImprovement = 1, kSolved = 2 };
const char* stop_name(int code, bool diverged) {
  if (diverged) return "diverged";
  return code == kSolved ? "solved" : code == kNoImprovement ? "no_improvement" : "max_steps";
}

/// A grid-only key <task><suffix>: a list of values of `length`, `word` (its default) = the empty
/// list.
OptionSpec task_lengths_option(const std::string& task, const std::string& suffix, const std::string& word,
                               const std::string& help) {
  return int_list_option(task + suffix, word, "steps", task + ": " + help)
      .empty_as(word)
      .at_least(2)
      .at_most(1e5)
      .selects_cells();
}

/// <task>_lengths: the values of `length` run for `task`.
OptionSpec lengths_option(const std::string& task) {
  return task_lengths_option(task, "_lengths", "all",
                             "the values of length run for this task (all = every one; a value that is "
                             "not in length selects nothing)");
}

/// <task>_long_lengths: the values of `length` (of <task>_lengths) at which the "_long" arms run.
OptionSpec long_lengths_option(const std::string& task) {
  return task_lengths_option(task, "_long_lengths", "none",
                             "the values of length at which the _long arms run (none = no _long cells for "
                             "this task)");
}

bool contains(const std::vector<std::int64_t>& v, std::int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// Whether the grid point is a cell (ExperimentSpec::keep): its length must be one of its task's
/// <task>_lengths (every length when that key is "all"); a "_long" arm only at width 0 and the
/// lengths of <task>_long_lengths; then every point of the width-0 (matched budget) design;
/// width > 0 (the Zoology width study) only for mqar at width_length and the models of
/// width_models.
bool keep(const Cell& cell) {
  const std::string task = cell.get_string("task");
  const auto own = cell.get_int_list(task + "_lengths");
  const std::int64_t length = cell.get_int("length");
  if (!own.empty() && !contains(own, length)) return false;
  if (is_long_arm(cell.get_string("model")))
    return cell.get_int("width") == 0 && contains(cell.get_int_list(task + "_long_lengths"), length);
  if (cell.get_int("width") == 0) return true;
  const auto models = cell.get_string_list("width_models");
  return cell.get_string("task") == "mqar" && cell.get_int("length") == cell.get_int("width_length") &&
         std::find(models.begin(), models.end(), cell.get_string("model")) != models.end();
}

/// The width study's budget (ExperimentSpec::resolve): a cell with width > 0 trains for
/// width_steps updates (0: steps) with early stopping after width_patience evaluations (-1:
/// patience), written into its steps and patience keys, so it is the cell a run with
/// --steps=<width_steps> --patience=<width_patience> would have.
void resolve(Cell& cell) {
  if (cell.get_int("width") == 0) return;
  if (const auto s = cell.get_int("width_steps"); s > 0) {
    for (const char* key : {"pilot_steps", "warmup_steps"})
      if (cell.get_int(key) > s)
        throw experiment::ConfigError("width_steps: invalid value '" + cell.params.text("width_steps") +
                                      "': expected 0 or an integer >= " + key + " (" + cell.params.text(key) +
                                      "): the width study's cells train width_steps updates");
    cell.params.set("steps", s);
  }
  if (const auto p = cell.get_int("width_patience"); p >= 0) cell.params.set("patience", p);
}

/// The keys a cell never reads (ExperimentSpec::unread_keys): width_steps and width_patience
/// (resolve has put them into steps and patience); long_steps and long_lr outside the "_long"
/// arms, so those arms' keys leave the fingerprints of every other cell as they were.
std::vector<std::string> unread_keys(const Cell& cell) {
  if (is_long_arm(cell.get_string("model"))) return {"width_steps", "width_patience"};
  return {"long_steps", "long_lr", "width_steps", "width_patience"};
}

/// The schedule of the cell's keys at peak learning rate `lr` over `steps` updates.
LrSchedule schedule_at(const Cell& cell, double lr, int steps) {
  LrSchedule s = experiment::cell_schedule(cell);
  s.base_lr = static_cast<float>(lr);
  s.total_steps = steps;
  s.warmup_steps = std::min(s.warmup_steps, steps);
  return s;
}

std::unique_ptr<Optimizer> optimizer_at(const Cell& cell, const std::vector<Parameter*>& params, double lr) {
  OptimizerConfig oc;
  oc.lr = static_cast<float>(lr);
  oc.weight_decay = cell.get_float("weight_decay");
  return make_optimizer(cell.get_string("optimizer"), params, oc);
}

/// One trial of the learning-rate pilot: the model of replicate 0 (its initialisation stream)
/// trained for at most pilot_steps updates on replicate 0's training stream at `lr`, its loss on
/// replicate 0's validation split `val` evaluated every log_every updates as in the main run; the
/// trial's score is the lowest of those losses (the run stops early once it is solved, at most
/// solved_loss x `val_baseline`). NaN if it diverged. Scoring the best loss over a pilot of the
/// same order as a run's length, rather than the loss after a few hundred updates, keeps a rate
/// that is fast at first and then stalls from beating one that solves the task later.
double pilot_trial(const Cell& cell, const std::vector<std::unique_ptr<Task>>& tasks, const ModelConfig& mc,
                   const TestSet& val, double val_baseline, double lr) {
  struct Solved {};
  Rng init(experiment::stream_seed(cell.base_seed, 0, kInitStream));
  Rng train_rng(experiment::stream_seed(cell.base_seed, 0, kTrainStream));
  const auto model = make_model(mc, init);
  model->train();
  const auto params = model->parameters();
  auto optim = optimizer_at(cell, params, lr);
  TrainOptions o;
  o.steps = cell.get_int32("pilot_steps");
  o.clip_norm = cell.get_real("clip_norm");
  o.quiet = true;
  const std::size_t batch = cell.get_size("batch");
  const int log_every = cell.get_int32("log_every");
  const double solved_loss = cell.get_real("solved_loss");
  const bool values = tasks.back()->spec().target == "values";
  double best = kNaN;
  const auto score = [&] {
    const double v = evaluate(*model, val, values).test_loss;
    if (std::isfinite(v) && !(v >= best)) best = v;
    return v;
  };
  CrossEntropyLoss ce(kIgnoreTarget);
  TrainResult r;
  try {
    r = train_loop(o, params, *optim, schedule_at(cell, lr, o.steps), [&](int step) {
      const Task& t = *tasks[static_cast<std::size_t>(step) % tasks.size()];
      return loss_and_grad(*model, t.sample(batch, train_rng), ce);
    }, [&](const StepRecord& s) {
      if ((s.step + 1) % log_every != 0 && s.step + 1 != o.steps) return;
      const double v = score();
      if (solved_loss > 0 && v <= solved_loss * val_baseline) throw Solved{};
    });
  } catch (const Solved&) {
    return best;
  }
  return r.diverged ? kNaN : best;
}

void validate(const Cell& cell) {
  experiment::cell_schedule(cell);  // schedule, lr, warmup_steps, steps
  const auto pairs = cell.get_int_list("mqar_pairs");
  const auto max_p = *std::max_element(pairs.begin(), pairs.end());
  if (cell.get_string("task") == "mqar" && cell.get_int("mqar_keys") < max_p)
    throw experiment::ConfigError("mqar_keys: invalid value '" + cell.params.text("mqar_keys") +
                      "': expected an integer >= the largest of mqar_pairs (" + std::to_string(max_p) +
                      "; the keys of a sequence are distinct)");
  if (cell.get_string("task") == "mqar" && cell.get_int("length") < 4 * max_p)
    throw experiment::ConfigError("length: invalid value '" + cell.params.text("length") +
                      "' for task = mqar: expected an integer >= 4 x the largest of mqar_pairs (" +
                      std::to_string(4 * max_p) + ": P pairs, then P queries in two-token slots)");
  model_config(cell, training_tasks(cell).back()->spec());  // task/length, budget, model fields
}

void run_cell(const Cell& cell, CellOutput& out) {
  const std::vector<std::unique_ptr<Task>> tasks = training_tasks(cell);
  const TaskSpec spec = tasks.back()->spec();
  const ModelConfig mc = model_config(cell, spec);
  const std::string model_name = cell.get_string("model");
  const std::size_t batch = cell.get_size("batch"), S = spec.seq_len;
  // A "_long" arm: long_steps updates at the fixed rate long_lr, no early stopping (a solved run
  // still stops); every other arm: `steps`, the pilot's rate, early stopping after `patience`.
  const bool long_arm = is_long_arm(model_name);
  const int steps = cell.get_int32(long_arm ? "long_steps" : "steps");
  const int patience = long_arm ? 0 : cell.get_int32("patience");
  const double solved_loss = cell.get_real("solved_loss");
  const bool values = spec.target == "values";
  const bool validating = patience > 0 || solved_loss > 0;
  Row id;
  id.add("experiment", kName)
      .add("task", cell.get_string("task"))
      .add("model", model_name)
      .add("length", cell.get_int("length"))
      .add("width", cell.get_int("width"))
      .add("seq_len", S)
      .add("seed", cell.replicate);

  // The learning rate: the pilot's choice over lr_grid (once per arm, on replicate 0's streams,
  // shared by the replicates through <out>/pilots), or the lr key; long_lr for a "_long" arm.
  double lr = cell.get_real(long_arm ? "long_lr" : "lr");
  const bool pilot = !long_arm && cell.get_int("pilot_steps") > 0;
  if (pilot) {
    const TestSet val0 = make_split(cell, tasks, 0, kValStream, cell.get_size("val_batch"), false);
    nlohmann::json group = cell.fingerprint(kName);
    group["replicate"] = 0;
    const std::vector<double> grid = cell.get_real_list("lr_grid");
    const double val0_base = pooled_baseline(val0, split_specs(cell, val0, tasks)).loss;
    const LrChoice c = shared_choose_lr(cell, "lr pilot of " + group.dump(), grid, [&](double x) {
      return pilot_trial(cell, tasks, mc, val0, val0_base, x);
    });
    lr = c.lr;
    for (std::size_t i = 0; i < grid.size(); ++i)
      out.add_row(Row(id).add("lr", grid[i]).add("pilot_steps", cell.get_int("pilot_steps"))
                      .add("val_loss", c.val_loss[i]).add("chosen", i == c.index ? 1 : 0)
                      .add("all_diverged", c.all_diverged ? 1 : 0), "lr_pilot");
  }

  Rng init_rng(cell.stream_seed(kInitStream));
  const std::unique_ptr<SequenceModel> model_ptr = make_model(mc, init_rng);
  SequenceModel& model = *model_ptr;
  model.train();
  const std::vector<Parameter*> params = model.parameters();
  auto optim = optimizer_at(cell, params, lr);

  const TestSet test = make_split(cell, tasks, cell.replicate, kTestStream, cell.get_size("test_batch"), true);
  const std::vector<TaskSpec> specs = split_specs(cell, test, tasks);
  const Baseline base = pooled_baseline(test, specs);
  TestSet val;
  double val_base = kNaN;
  if (validating) {
    val = make_split(cell, tasks, cell.replicate, kValStream, cell.get_size("val_batch"), false);
    val_base = pooled_baseline(val, split_specs(cell, val, tasks)).loss;
  }
  Rng train_rng(cell.stream_seed(kTrainStream));
  const std::vector<double> grad_init = input_grad_norms(model, cell, *tasks.back());

  // Training: up to `steps` updates; every log_every updates a curve row with the validation loss,
  // which stops the run when it is below solved_loss x its baseline (solved) or has not improved
  // by min_delta (relative) for `patience` evaluations (EarlyStopping).
  CrossEntropyLoss ce(kIgnoreTarget);
  EarlyStopping stopper(std::max(patience, 1), cell.get_real("min_delta"));
  int stop_code = kMaxSteps;
  double last_val = kNaN;
  TrainingPhase phase(cell, out, &model, "train");
  phase.steps(steps).clip_norm(cell.get_real("clip_norm"));
  phase.every(cell.get_int32("log_every"), [&](const TrainingWindow& w) {
    const double v = validating ? evaluate(model, val, values).test_loss : kNaN;
    out.add_row(Row(id).add("step", w.step).add("train_loss", w.mean_loss).add("grad_norm", w.mean_grad_norm)
                    .add("lr", w.lr).add("val_loss", v), "steps");
    if (!validating) return false;
    last_val = v;
    const bool no_gain = stopper.update(v, w.step);
    if (solved_loss > 0 && v <= solved_loss * val_base) stop_code = kSolved;
    else if (patience > 0 && no_gain) stop_code = kNoImprovement;
    return stop_code != kMaxSteps;
  });
  phase.state().add("train_rng", train_rng);
  stopper.register_state(phase.state(), "early_stopping");
  phase.state().add("stop_code", stop_code);
  phase.state().add("last_val_loss", last_val);
  const PhaseResult tr = phase.run(params, *optim, schedule_at(cell, lr, steps), [&](int step) {
    const Task& t = *tasks[static_cast<std::size_t>(step) % tasks.size()];
    return loss_and_grad(model, t.sample(batch, train_rng), ce);
  });

  const Evaluation ev = evaluate(model, test, values);
  PhaseResult r = tr;
  r.check_test_loss(ev.test_loss);
  const std::vector<double> grad_trained = input_grad_norms(model, cell, *tasks.back());
  model.eval();

  out.add_row(Row(id)
                  .add("derived_seed", cell.seed)
                  .add("n_params", model.num_parameters())
                  .add("param_budget", cell.get_int("param_budget"))
                  .add("hidden_size", mc.hidden_size)
                  .add("embedding_dim", mc.body_input_size())
                  .add("num_layers", mc.num_layers)
                  .add("d_ff", mc.is_transformer() ? static_cast<std::int64_t>(mc.d_ff) : 0)
                  .add("n_heads", mc.is_transformer() ? static_cast<std::int64_t>(mc.n_heads) : 0)
                  .add("kernel_size", mc.model == "tcn" ? static_cast<std::int64_t>(mc.kernel_size) : 0)
                  .add("forget_bias", static_cast<double>(mc.forget_bias))
                  .add("receptive_field", model.receptive_field())
                  .add("sequential_steps", model.sequential_steps(S))
                  .add("batch", cell.get_int("batch"))
                  .add("steps", steps)
                  .add("lr", lr)
                  .add("lr_source", pilot ? "pilot" : "config")
                  .add("optimizer", cell.get_string("optimizer"))
                  .add("test_loss", ev.test_loss)
                  .add("baseline_loss", base.loss)
                  .add("test_accuracy", ev.test_accuracy)
                  .add("baseline_accuracy", base.dependent_accuracy)
                  .add("diverged", r.diverged ? 1 : 0)
                  .add("diverged_step", r.diverged_step)
                  .add("steps_done", r.steps_done)
                  .add("stop_reason", stop_name(stop_code, r.diverged))
                  .add("best_step", validating ? stopper.best_step() : -1)
                  .add("best_val_loss", validating ? stopper.best_loss() : kNaN)
                  .add("final_val_loss", last_val)
                  .add("val_baseline_loss", val_base)
                  .add("final_train_loss", r.final_window_loss)
                  .add("train_time_s", r.train_time_s)
                  .add("ms_per_step", r.steps_done > 0 ? 1000.0 * r.train_time_s / r.steps_done : kNaN));
  add_distance_rows(out, id, cell, spec, test, specs, ev.items);
  add_grad_rows(out, id, "init", grad_init);
  add_grad_rows(out, id, "trained", grad_trained);
  if (cell.replicate == 0 && !r.diverged) add_attention_rows(out, id, model, test, ev);
}

}  // namespace

int main(int argc, char** argv) {
  seqlab::ensure_blas_kernels(argv);  // before anything: OpenBLAS's kernels (core/threads.hpp)
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 2 (README.md claims table): recurrent state decays over long distances (vanishing "
      "gradients, even with LSTM gates); attention links any two positions directly. Trains RNN, "
      "LSTM (also with forget-gate bias 1: lstm_fb1), GRU, TCN and a decoder-only Transformer at a "
      "matched parameter budget (or at a given width: the MQAR width study of Arora et al. 2023) "
      "on four tasks (copy memory and the adding problem of Bai et al. 2018, multi-query "
      "associative recall, and a distance probe) for a grid of task x model x length x width x "
      "seeds, each with a learning rate chosen by a pilot on a validation split and early "
      "stopping, and reports test loss and accuracy against the best predictor that ignores the "
      "dependency, accuracy against the dependency distance, training and validation curves, and "
      "the input gradient norm against position at initialisation and after training.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("task", kTasks, "synthetic task (README: what length means for each)").one_of(kTasks),
      string_sweep("model", kDefaultModels,
                   "sequence model (models/ factory; lstm_fb1 = lstm with forget-gate bias 1; "
                   "<model>_long = <model> trained long_steps updates at long_lr without early stopping)")
          .one_of(model_arms()),
      int_sweep("length", {16, 32, 64}, "steps",
                "task length: copy_memory blank length T (sequence T+20); adding, mqar, "
                "distance_probe sequence length")
          .at_least(2)
          .at_most(1e5),
      int_sweep("width", {0}, "units",
                "0 = match param_budget; > 0 = hidden_size H (tcn channels, transformer d_model) = "
                "width, parameters not matched (the width study: cells only for mqar at width_length "
                "and the models of width_models)")
          .at_least(0)
          .at_most(65536),
      lengths_option("copy_memory"),
      lengths_option("adding"),
      lengths_option("mqar"),
      lengths_option("distance_probe"),
      long_lengths_option("copy_memory"),
      long_lengths_option("adding"),
      long_lengths_option("mqar"),
      long_lengths_option("distance_probe"),
      int_option("long_steps", 10000, "updates",
                 "_long arms: optimizer updates (no early stopping; a solved run still stops)")
          .at_least(1)
          .at_most(1e9),
      real_option("long_lr", 1e-2, "1", "_long arms: the fixed peak learning rate (no pilot)").greater_than(0),
      int_option("width_length", 64, "steps", "length of the width study's mqar cells").at_least(2).at_most(1e5),
      choice_list_option("width_models", "rnn lstm gru transformer_decoder", model_arms(),
                         "models of the width study"),
      int_option("width_steps", 0, "updates", "the width study's optimizer updates; 0 = steps")
          .at_least(0)
          .at_most(1e9),
      int_option("width_patience", -1, "evaluations",
                 "the width study's early-stopping patience (0 = off); -1 = patience")
          .at_least(-1)
          .at_most(1e9),
      int_option("param_budget", 6000, "parameters",
                 "match every model to this many parameters (largest hidden size / d_model within "
                 "it); 0 = use hidden_size")
          .at_least(0)
          .at_most(1e9),
      int_option("fill_budget", 0, "0/1",
                 "transformer at a param_budget: 1 = raise d_ff after d_model to fill the budget "
                 "(d_model moves in coarse steps); 0 = d_ff = d_ff_ratio x d_model")
          .at_least(0)
          .at_most(1),
      int_option("hidden_size", 32, "units",
                 "hidden size H (tcn: channels; transformer: d_model) when param_budget = 0")
          .at_least(1)
          .at_most(65536),
      int_option("embedding_dim", 8, "units",
                 "rnn/lstm/gru/tcn: token embedding or input projection width E (transformer: = d_model)")
          .at_least(1)
          .at_most(65536),
      int_option("num_layers", 1, "layers", "rnn/lstm/gru: stacked recurrent layers").at_least(1).at_most(1000),
      string_option("nonlinearity", "tanh", "rnn only: torch.nn.RNN nonlinearity").one_of({"tanh", "relu"}),
      int_option("tcn_levels", 0, "levels",
                 "tcn: levels L (dilation 2^i); 0 = the fewest whose receptive field covers the sequence")
          .at_least(0)
          .at_most(30),
      int_option("kernel_size", 4, "steps", "tcn: kernel size k").at_least(1).at_most(4096),
      int_option("weight_norm", 1, "0/1", "tcn: weight-normalised convolutions (Bai et al.)")
          .at_least(0)
          .at_most(1),
      int_option("transformer_layers", 2, "layers", "transformer: decoder layers").at_least(1).at_most(1000),
      int_option("n_heads", 2, "heads", "transformer: attention heads").at_least(1).at_most(4096),
      real_option("d_ff_ratio", 2, "1", "transformer: d_ff = d_ff_ratio x d_model (rounded, >= 1)")
          .greater_than(0)
          .at_most(1e6),
      string_option("positional_encoding", "rope",
                    "transformer: positional encoding, any registered name (models/positional_registry.hpp)")
          .one_of(positional_encoding_names()),
      string_option("norm_placement", "pre", "transformer: LayerNorm before (pre) or after (post) each sub-layer")
          .one_of({"pre", "post"}),
      real_option("dropout", 0, "1", "dropout probability (every family)").at_least(0).at_most(0.99),
      int_list_option("mqar_pairs", "2 4", "pairs",
                      "mqar: key-value pair counts P, trained as a mixture (queries Q = P)")
          .at_least(1)
          .at_most(1e5),
      int_option("mqar_keys", 16, "tokens", "mqar: key vocabulary size (>= largest P)").at_least(1).at_most(1e5),
      int_option("mqar_values", 16, "tokens", "mqar: value vocabulary size").at_least(1).at_most(1e5),
      int_option("probe_symbols", 8, "tokens", "distance_probe: symbols to recall (chance 1/probe_symbols)")
          .at_least(1)
          .at_most(1e5),
      int_option("probe_fillers", 8, "tokens", "distance_probe: distractor tokens").at_least(1).at_most(1e5),
      int_option("distance_bins", 6, "bins",
                 "distance table: distance_probe evaluates this many distances; adding, mqar bin into this many ranges")
          .at_least(1)
          .at_most(1e5),
      int_option("batch", 32, "sequences", "training batch size (fresh batch every step)").at_least(1).at_most(1e6),
      int_option("steps", 800, "updates", "optimizer updates").at_least(1).at_most(1e9),
      real_option("lr", 3e-3, "1", "peak learning rate when pilot_steps = 0").greater_than(0),
      real_list_option("lr_grid", "0.001 0.003 0.01", "1",
                       "learning rates of the pilot (each trained pilot_steps on replicate 0's "
                       "streams, scored on its validation split; the lowest loss wins)")
          .greater_than(0),
      int_option("pilot_steps", 0, "updates", "most updates per pilot trial (stopped when solved); 0 = no pilot, use lr")
          .at_least(0)
          .at_most(1e9)
          .at_most_key("steps"),
      int_option("val_batch", 256, "sequences",
                 "validation split (mqar: per P; probe: distances as in training): pilot and early stopping")
          .at_least(1)
          .at_most(1e6),
      int_option("patience", 0, "evaluations",
                 "early stopping: stop after this many validation evaluations (one per log_every "
                 "updates) without a relative improvement of min_delta; 0 = off")
          .at_least(0)
          .at_most(1e9),
      real_option("min_delta", 0.01, "1", "early stopping: relative improvement that counts").at_least(0).at_most(1),
      real_option("solved_loss", 0, "1",
                  "stop when the validation loss <= solved_loss x its baseline loss (solved); 0 = off")
          .at_least(0)
          .at_most(1),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0, "1", "weight decay (L2 for adam/sgd, decoupled for adamw)").at_least(0),
      real_option("clip_norm", 1, "1", "max global gradient norm; 0 disables clipping").at_least(0),
      string_option("schedule", "constant", "learning-rate schedule").one_of({"constant", "cosine", "inverse_sqrt"}),
      int_option("warmup_steps", 0, "updates", "linear warm-up length").at_least(0).at_most(1e9).at_most_key("steps"),
      int_option("test_batch", 256, "sequences",
                 "test set size (mqar: per P; distance_probe: per evaluated distance)")
          .at_least(1)
          .at_most(1e6),
      int_option("grad_batch", 16, "sequences", "sequences of the gradient-norm measurement").at_least(1).at_most(1e6),
      int_option("log_every", 50, "updates", "updates per row of the curve table").at_least(1).at_most(1e9),
  };
  const std::vector<std::string> ids = {"experiment", "task", "model", "length", "width", "seq_len", "seed"};
  auto with_ids = [&](std::vector<std::string> cols) {
    std::vector<std::string> all = ids;
    all.insert(all.end(), cols.begin(), cols.end());
    return all;
  };
  spec.tables = {
      {kMainTable,
       with_ids({"derived_seed", "n_params", "param_budget", "hidden_size", "embedding_dim",
                 "num_layers", "d_ff", "n_heads", "kernel_size", "forget_bias", "receptive_field",
                 "sequential_steps", "batch", "steps", "lr", "lr_source", "optimizer", "test_loss",
                 "baseline_loss", "test_accuracy", "baseline_accuracy", "diverged", "diverged_step",
                 "steps_done", "stop_reason", "best_step", "best_val_loss", "final_val_loss",
                 "val_baseline_loss", "final_train_loss", "train_time_s", "ms_per_step"})},
      {"steps", with_ids({"step", "train_loss", "grad_norm", "lr", "val_loss"})},
      {"lr_pilot", with_ids({"lr", "pilot_steps", "val_loss", "chosen", "all_diverged"})},
      {"distance", with_ids({"n_pairs", "distance", "distance_lo", "distance_hi", "n_scored",
                             "accuracy", "loss", "baseline_accuracy", "baseline_loss"})},
      {"grad_norms", with_ids({"phase", "position", "steps_before_end", "input_grad_norm",
                               "relative_grad_norm"})},
      {"attention", with_ids({"example", "solved", "layer", "head", "query_pos", "key_pos",
                              "query_token", "key_token", "attention_prob"})},
  };
  // The two per-position tables are merged as reduced views of the cells at their task's longest
  // length, width 0 (what the figures and the gradient verdict read; every length when
  // <task>_lengths is "all"); the cell files keep every row. Attention: the entries of at least
  // kMergedAttention. Gradient: every position with a nonzero norm (an underflow to 0 carries no
  // decay rate), except MQAR, which the decay-rate verdict leaves out (its loss sits on query
  // positions spread through the sequence): every k-th distance, k = ceil(S / kGradPoints); and
  // without the columns nothing downstream reads.
  const auto at_longest = [](const Cell& c) {
    const auto own = c.get_int_list(c.get_string("task") + "_lengths");
    return c.get_int("width") == 0 &&
           (own.empty() || c.get_int("length") == *std::max_element(own.begin(), own.end()));
  };
  for (auto& t : spec.tables) {
    if (t.name == "attention") {
      const std::size_t p_col = column_index(t.columns, "attention_prob");
      t.merge_keep = [p_col, at_longest](const Cell& c, const std::vector<std::string>& f) {
        return at_longest(c) && std::stod(f[p_col]) >= kMergedAttention;
      };
    } else if (t.name == "grad_norms") {
      const std::size_t s_col = column_index(t.columns, "seq_len"), d_col = column_index(t.columns, "steps_before_end"),
                        g_col = column_index(t.columns, "relative_grad_norm");
      t.merge_keep = [s_col, d_col, g_col, at_longest](const Cell& c, const std::vector<std::string>& f) {
        if (!at_longest(c)) return false;
        if (c.get_string("task") != "mqar") return std::stod(f[g_col]) > 0;  // nan compares false: left out
        const long S = std::stol(f[s_col]), d = std::stol(f[d_col]);
        return d % std::max<long>(1, (S + kGradPoints - 1) / kGradPoints) == 0;
      };
      // position is seq_len − 1 − steps_before_end; the absolute norm is read by neither.
      t.merge_drop = {"position", "input_grad_norm"};
    }
  }
  spec.default_seeds = 3;
  spec.timing_columns = {"train_time_s", "ms_per_step"};
  spec.validate = validate;
  spec.keep = keep;
  spec.resolve = resolve;
  spec.unread_keys = unread_keys;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

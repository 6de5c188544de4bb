// long_range_recall: claim 2 of the README — recurrent state decays over long distances (vanishing
// gradients, even with LSTM gates); attention links any two positions directly (path length O(1),
// against O(n) for recurrence and O(log_k n) for dilated convolutions).
// Anchor: Bai, Kolter & Koltun 2018 (arXiv 1803.01271), Table 1 and Fig. 5 (copy memory and adding
// problem; TCN vs LSTM vs GRU vs RNN). Claim, method, expected outcome and every CSV column:
// README.md beside this file.
//
// One cell = one (task, model, length, replicate): the model is built by the models/ factory at the
// parameter budget `param_budget` (hidden_size_for_budget), trained on fresh batches of the task,
// then evaluated on a fixed test set. Tasks (lib tasks/):
//   copy_memory     CopyMemoryTask(T = length): Bai et al.'s copy memory, CE over all T+20 positions
//   adding          AddingProblem(seq_len = length): Bai et al.'s adding problem, MSE at the last step
//   mqar            MultiQueryAssociativeRecall(seq_len = length, P, Q = P) for every P of
//                   mqar_pairs ("2+4": a mixture; update s draws its batch from P = mqar_pairs[s mod n]),
//                   CE at the query positions (Arora et al. 2023, "Zoology")
//   distance_probe  DistanceProbe(seq_len = length): one symbol to recall at distance d uniform in
//                   [1, length-1], CE at the last position; tested at distance_bins exact distances
// Tables: main (one row per cell), steps (training curve), distance (accuracy / loss against the
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
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/positional_registry.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

#include "evaluation.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
using namespace long_range_recall;

namespace {

constexpr const char* kName = "long_range_recall";
// Purposes of the replicate's random streams (Cell::stream_seed): shared by every task, model and
// length with the same replicate index, so comparisons across the grid are paired.
constexpr std::uint64_t kInitStream = 1;   // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;  // training batches
constexpr std::uint64_t kTestStream = 3;   // the fixed test set
constexpr std::uint64_t kGradStream = 4;   // the batch of the gradient-norm measurement
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<std::string> kTasks = {"copy_memory", "adding", "mqar", "distance_probe"};
const std::vector<std::string> kModels = {"rnn", "lstm", "gru", "tcn", "transformer_decoder"};

// ------------------------------------------------------------------------------------------------
// Tasks: every batch comes from the task registry (tasks/task.hpp); TaskBatch::distances says how
// far back each scored target's evidence lies.

/// The registry parameters of the cell's task: `length` is copy memory's blank length T and the
/// sequence length of the others; mqar with P pairs (= queries), the probe at a fixed distance d
/// (0: uniform over [1, length - 1]).
TaskParams task_params(const Cell& cell, int pairs = 0, int distance = 0) {
  const std::string task = cell.get_string("task"), L = cell.params.text("length");
  TaskParams p;
  if (task == "copy_memory") {
    p.set("T", L);
  } else if (task == "adding") {
    p.set("seq_len", L);
  } else if (task == "mqar") {
    p.set("seq_len", L);
    p.set("n_pairs", std::to_string(pairs));
    p.set("n_queries", std::to_string(pairs));
    p.set("n_keys", cell.params.text("mqar_keys"));
    p.set("n_values", cell.params.text("mqar_values"));
  } else {
    p.set("seq_len", L);
    p.set("n_symbols", cell.params.text("probe_symbols"));
    p.set("n_fillers", cell.params.text("probe_fillers"));
    if (distance > 0) {
      p.set("min_distance", std::to_string(distance));
      p.set("max_distance", std::to_string(distance));
    }
  }
  return p;
}

/// The training tasks of a cell: one, or for mqar one per P of mqar_pairs (update s draws from
/// P = mqar_pairs[s mod n]). The spec of the cell is the last one's (the largest P for mqar).
std::vector<std::unique_ptr<Task>> training_tasks(const Cell& cell) {
  std::vector<std::unique_ptr<Task>> tasks;
  const std::string task = cell.get_string("task");
  if (task == "mqar") {
    for (const auto P : cell.get_int_list("mqar_pairs"))
      tasks.push_back(make_task(task, task_params(cell, static_cast<int>(P))));
  } else {
    tasks.push_back(make_task(task, task_params(cell)));
  }
  return tasks;
}

/// Smallest TCN depth whose receptive field 1 + 2(k-1)(2^L - 1) covers `seq_len` (at most 30).
std::size_t tcn_levels_for(std::size_t seq_len, std::size_t k) {
  std::size_t L = 1;
  while (L < 30 && 1 + 2 * (k - 1) * ((std::size_t{1} << L) - 1) < seq_len) ++L;
  return L;
}

/// The model of a cell (sizes matched to param_budget when it is > 0). Throws ConfigError (an
/// std::invalid_argument naming the key) for a bad combination: exit status 2 before anything runs.
ModelConfig model_config(const Cell& cell, const TaskSpec& task) {
  ModelConfig mc;
  mc.model = cell.get_string("model");
  apply_task_spec(task, mc);
  mc.dropout = cell.get_float("dropout");
  mc.embedding_dim = cell.get_size("embedding_dim");
  mc.hidden_size = cell.get_size("hidden_size");
  const double ratio = cell.get_real("d_ff_ratio");
  if (mc.is_recurrent()) {
    mc.num_layers = cell.get_size("num_layers");
    mc.nonlinearity = cell.get_string("nonlinearity");
  } else if (mc.model == "tcn") {
    mc.kernel_size = cell.get_size("kernel_size");
    const std::size_t levels = cell.get_size("tcn_levels");
    mc.num_layers = levels > 0 ? levels : tcn_levels_for(task.seq_len, mc.kernel_size);
    mc.weight_norm = cell.get_int("weight_norm") != 0;
  } else {  // transformer_decoder
    mc.num_layers = cell.get_size("transformer_layers");
    mc.n_heads = cell.get_size("n_heads");
    mc.positional_encoding = cell.get_string("positional_encoding");
    mc.norm_placement = cell.get_string("norm_placement");
    mc.max_len = mc.train_len = task.seq_len;
    mc.embedding_dim = mc.hidden_size;
    mc.d_ff = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::llround(ratio * static_cast<double>(mc.hidden_size))));
  }
  const std::size_t budget = cell.get_size("param_budget");
  if (budget > 0) mc = hidden_size_for_budget(mc, budget, ratio);
  mc.validate();
  return mc;
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

/// The fixed test set of a cell, from the replicate's test stream (evaluation.hpp).
TestSet make_test(const Cell& cell, const std::vector<std::unique_ptr<Task>>& train) {
  TestSet s;
  Rng rng(cell.stream_seed(kTestStream));
  const std::size_t n = cell.get_size("test_batch");
  const std::string task = cell.get_string("task");
  if (task == "distance_probe") {
    for (int d : probe_distances(cell.get_int32("length"), cell.get_int32("distance_bins"))) {
      s.batches.push_back(make_task(task, task_params(cell, 0, d))->sample(n, rng));
      s.groups.push_back(0);
    }
    s.attention_batch = s.batches.size() / 2;
    return s;
  }
  const auto pairs = task == "mqar" ? cell.get_int_list("mqar_pairs") : std::vector<std::int64_t>{0};
  for (std::size_t k = 0; k < train.size(); ++k) {
    s.batches.push_back(train[k]->sample(n, rng));
    s.groups.push_back(static_cast<int>(pairs[k]));
  }
  s.attention_batch = s.batches.size() - 1;
  return s;
}

/// Mean squared error of predictions [B, 1, 1] against values [B, 1, 1]; fills dL/dpred.
double mse_and_grad(const Tensor3& pred, const Tensor3& target, Tensor3& dpred) {
  const std::size_t B = pred.shape()[0];
  dpred = Tensor3::from_shape(pred.shape());
  double s = 0;
  for (std::size_t b = 0; b < B; ++b) {
    const double e = double(pred(b, 0, 0)) - double(target(b, 0, 0));
    s += e * e;
    dpred(b, 0, 0) = static_cast<float>(2.0 * e / double(B));
  }
  return s / double(B);
}

/// Forward and backward of the loss on `b` (cross-entropy over its scored targets, or MSE).
double loss_and_grad(SequenceModel& model, const TaskBatch& b, CrossEntropyLoss& ce) {
  if (b.values.size() > 0) {
    Tensor3 dpred;
    const double loss = mse_and_grad(model.forward(b.features), b.values, dpred);
    model.backward(dpred);
    return loss;
  }
  const std::size_t B = b.tokens.shape()[0], S = b.tokens.shape()[1];
  const double loss = ce.forward(rows_of(model.forward(b.tokens)), ids_of(b.targets));
  model.backward(unrows(ce.backward(), B, S));
  return loss;
}

/// Gradient norms ‖∂L/∂u_t‖ [S] for the loss on the dependent positions of a fixed batch of the
/// last training task (copy memory: the recall positions only), model in eval mode. Leaves the
/// parameter grads zeroed and the model in train mode.
std::vector<double> input_grad_norms(SequenceModel& model, const Cell& cell, const Task& task) {
  Rng rng(cell.stream_seed(kGradStream));
  TaskBatch b = task.sample(cell.get_size("grad_batch"), rng);
  if (b.targets.size() > 0)
    for (std::size_t i = 0; i < b.targets.size(); ++i)
      if (b.distances.data()[i] <= 0) b.targets.data()[i] = kIgnoreTarget;
  model.eval();
  model.zero_grad();
  CrossEntropyLoss ce(kIgnoreTarget);
  loss_and_grad(model, b, ce);
  const Tensor1& g = model.input_grad_norms();
  std::vector<double> out(g.begin(), g.end());
  model.zero_grad();
  model.train();
  return out;
}

void run_cell(const Cell& cell, CellOutput& out) {
  const std::vector<std::unique_ptr<Task>> tasks = training_tasks(cell);
  const TaskSpec spec = tasks.back()->spec();
  const ModelConfig mc = model_config(cell, spec);
  const std::string model_name = cell.get_string("model");
  const std::size_t batch = cell.get_size("batch"), S = spec.seq_len;
  const int steps = cell.get_int32("steps");

  Rng init_rng(cell.stream_seed(kInitStream));
  const std::unique_ptr<SequenceModel> model_ptr = make_model(mc, init_rng);
  SequenceModel& model = *model_ptr;
  model.train();
  const std::vector<Parameter*> params = model.parameters();
  OptimizerConfig oc;
  oc.lr = cell.get_float("lr");
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);

  const TestSet test = make_test(cell, tasks);
  Rng train_rng(cell.stream_seed(kTrainStream));
  Row id;
  id.add("experiment", kName)
      .add("task", cell.get_string("task"))
      .add("model", model_name)
      .add("length", cell.get_int("length"))
      .add("seq_len", S)
      .add("seed", cell.replicate);

  const std::vector<double> grad_init = input_grad_norms(model, cell, *tasks.back());

  CrossEntropyLoss ce(kIgnoreTarget);
  TrainingPhase phase(cell, out, &model, "train");
  phase.steps(steps).clip_norm(cell.get_real("clip_norm")).curve(cell.get_int32("log_every"), "steps", id);
  phase.state().add("train_rng", train_rng);
  const PhaseResult tr = phase.run(params, *optim, experiment::cell_schedule(cell), [&](int step) {
    const Task& t = *tasks[static_cast<std::size_t>(step) % tasks.size()];
    return loss_and_grad(model, t.sample(batch, train_rng), ce);
  });

  const bool values = spec.target == "values";
  const Evaluation ev = evaluate(model, test, values);
  // The baselines of the test set: each batch's task's, pooled by scored positions (mqar's P).
  std::vector<TaskSpec> specs;
  for (const auto& t : tasks) specs.push_back(t->spec());
  if (cell.get_string("task") == "distance_probe") specs.assign(test.batches.size(), spec);
  const Baseline base = pooled_baseline(test, specs);
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
                  .add("receptive_field", model.receptive_field())
                  .add("sequential_steps", model.sequential_steps(S))
                  .add("batch", cell.get_int("batch"))
                  .add("steps", steps)
                  .add("lr", cell.get_real("lr"))
                  .add("optimizer", cell.get_string("optimizer"))
                  .add("test_loss", ev.test_loss)
                  .add("baseline_loss", base.loss)
                  .add("test_accuracy", ev.test_accuracy)
                  .add("baseline_accuracy", base.dependent_accuracy)
                  .add("diverged", r.diverged ? 1 : 0)
                  .add("diverged_step", r.diverged_step)
                  .add("steps_done", r.steps_done)
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
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 2 (README.md claims table): recurrent state decays over long distances (vanishing "
      "gradients, even with LSTM gates); attention links any two positions directly. Trains RNN, "
      "LSTM, GRU, TCN and a decoder-only Transformer at a matched parameter budget on four tasks "
      "(copy memory and the adding problem of Bai et al. 2018, multi-query associative recall of "
      "Arora et al. 2023, and a distance probe) for a grid of task x model x length x seeds, and "
      "reports test loss and accuracy against the best predictor that ignores the dependency, "
      "accuracy against the dependency distance, training curves, wall time, and the input "
      "gradient norm against position at initialisation and after training.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("task", kTasks, "synthetic task (README: what length means for each)").one_of(kTasks),
      string_sweep("model", kModels, "sequence model (models/ factory)").one_of(kModels),
      int_sweep("length", {16, 32, 64}, "steps",
                "task length: copy_memory blank length T (sequence T+20); adding, mqar, "
                "distance_probe sequence length")
          .at_least(2)
          .at_most(1e5),
      int_option("param_budget", 6000, "parameters",
                 "match every model to this many parameters (largest hidden size / d_model within "
                 "it); 0 = use hidden_size")
          .at_least(0)
          .at_most(1e9),
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
      real_option("lr", 3e-3, "1", "peak learning rate").greater_than(0),
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
  const std::vector<std::string> ids = {"experiment", "task", "model", "length", "seq_len", "seed"};
  auto with_ids = [&](std::vector<std::string> cols) {
    std::vector<std::string> all = ids;
    all.insert(all.end(), cols.begin(), cols.end());
    return all;
  };
  spec.tables = {
      {kMainTable,
       with_ids({"derived_seed", "n_params", "param_budget", "hidden_size", "embedding_dim",
                 "num_layers", "d_ff", "n_heads", "kernel_size", "receptive_field",
                 "sequential_steps", "batch", "steps", "lr", "optimizer", "test_loss",
                 "baseline_loss", "test_accuracy", "baseline_accuracy", "diverged", "diverged_step",
                 "steps_done", "final_train_loss", "train_time_s", "ms_per_step"})},
      {"steps", with_ids({"step", "train_loss", "grad_norm", "lr"})},
      {"distance", with_ids({"n_pairs", "distance", "distance_lo", "distance_hi", "n_scored",
                             "accuracy", "loss", "baseline_accuracy", "baseline_loss"})},
      {"grad_norms", with_ids({"phase", "position", "steps_before_end", "input_grad_norm",
                               "relative_grad_norm"})},
      {"attention", with_ids({"example", "solved", "layer", "head", "query_pos", "key_pos",
                              "query_token", "key_token", "attention_prob"})},
  };
  spec.default_seeds = 3;
  spec.timing_columns = {"train_time_s", "ms_per_step"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

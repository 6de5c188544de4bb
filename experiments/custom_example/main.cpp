// custom_example: the smallest complete seqlab experiment, written against the public API only,
// and a template for a new one (README "Extending seqlab"). It also shows how a new positional
// encoding is added from outside the library: "ramp" (ramp_encoding.hpp) is defined in this folder
// and registered with one line, and this binary then sweeps it like a built-in.
//
// Sub-claims tested (small ones): (a) the toy "ramp" encoding — a single learned direction scaled
// by the position — carries the position information a causal Transformer needs to copy the token
// `lag` steps back (previous-token task) as well as the sinusoidal encoding (Vaswani et al. 2017
// §3.5); (b) without any encoding ("none") the task is not solved. The data may disagree (they do
// for (b) at quick scale: README.md).
//
// One cell = one (positional_encoding, replicate): the task is built by name from the task
// registry (seqlab::make_task("previous_token", ...)), the model by the model registry
// (make_model with model = transformer_decoder), trained `steps` Adam updates on fresh batches,
// then evaluated on one fixed test batch. One table (custom_example.csv), one row per cell;
// columns in README.md beside this file.
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
#include "seqlab/train/metrics.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"
#include "seqlab/core/threads.hpp"

using namespace seqlab;
using namespace seqlab::experiment;

namespace {

constexpr const char* kName = "custom_example";
constexpr const char* kModel = "transformer_decoder";
constexpr const char* kTask = "previous_token";
// Random streams of a replicate (Cell::stream_seed): the same for every encoding, so the
// comparison across encodings is paired by seed.
constexpr std::uint64_t kInitStream = 1, kTrainStream = 2, kTestStream = 3;

/// The task of a cell, from the registry (throws ConfigError / std::invalid_argument naming the
/// parameter for a bad value, e.g. lag >= seq_len).
std::unique_ptr<Task> make_cell_task(const Cell& cell) {
  TaskParams p;
  p.set("seq_len", cell.params.text("seq_len"));
  p.set("vocab_size", cell.params.text("vocab_size"));
  p.set("lag", cell.params.text("lag"));
  return make_task(kTask, p);
}

/// The model of a cell: sizes from the keys, input/vocab/output/head from the task's spec.
ModelConfig model_config(const Cell& cell, const TaskSpec& spec) {
  ModelConfig mc;
  mc.model = kModel;
  apply_task_spec(spec, mc);
  mc.hidden_size = mc.embedding_dim = cell.get_size("d_model");
  mc.n_heads = cell.get_size("n_heads");
  mc.num_layers = cell.get_size("num_layers");
  mc.d_ff = cell.get_size("d_ff");
  mc.norm_placement = "pre";
  mc.positional_encoding = cell.get_string("positional_encoding");
  mc.max_len = mc.train_len = spec.seq_len;  // learned / ramp length scale, rope_pi / rope_ntk
  mc.validate();                             // ConfigError naming the field: exit 2
  return mc;
}

LrSchedule schedule(const Cell& cell) {
  LrSchedule s;
  s.kind = "constant";
  s.base_lr = cell.get_float("lr");
  s.warmup_steps = cell.get_int32("warmup_steps");
  s.total_steps = cell.get_int32("steps");
  return s;
}


void validate(const Cell& cell) {
  const auto task = make_cell_task(cell);
  model_config(cell, task->spec());
}

void run_cell(const Cell& cell, CellOutput& out) {
  const auto task = make_cell_task(cell);
  const TaskSpec spec = task->spec();
  const ModelConfig mc = model_config(cell, spec);
  Rng init_rng(cell.stream_seed(kInitStream)), train_rng(cell.stream_seed(kTrainStream)),
      test_rng(cell.stream_seed(kTestStream));
  const auto model = make_model(mc, init_rng);
  const std::vector<Parameter*> params = model->parameters();
  Adam optim(params, cell.get_float("lr"));
  const std::size_t B = cell.get_size("batch"), T = spec.seq_len;
  CrossEntropyLoss ce(kIgnoreTarget);

  // One training phase (experiment/training.hpp): --checkpoint-every saves the model, the
  // optimizer and the training data stream, all that the updates change.
  TrainingPhase phase(cell, out, model.get(), "train");
  phase.steps(cell.get_int32("steps")).clip_norm(1.0);
  phase.state().add("train_rng", train_rng);
  PhaseResult tr = phase.run(params, optim, schedule(cell), [&](int) {
    const TaskBatch b = task->sample(B, train_rng);
    const Tensor3 logits = model->forward(b.tokens);
    const double loss = ce.forward(rows_of(logits), ids_of(b.targets));
    model->backward(unrows(ce.backward(), B, T));
    return loss;
  });

  // Test: one fixed batch, eval mode; loss and accuracy (argmax, first maximum) over the scored
  // positions (targets != kIgnoreTarget), train/metrics.hpp.
  double test_loss = std::numeric_limits<double>::quiet_NaN(), test_accuracy = test_loss;
  if (!tr.diverged) {
    const TaskBatch test = task->sample(cell.get_size("test_batch"), test_rng);
    const ScoreSums s = evaluate_chunked(*model, eval_set(test), batch_rows(test));
    test_loss = s.mean_loss();
    test_accuracy = s.accuracy();
    tr.check_test_loss(test_loss);
  }
  out.add_row(Row()
                  .add("experiment", kName)
                  .add("model", kModel)
                  .add("positional_encoding", mc.positional_encoding)
                  .add("seed", cell.replicate)
                  .add("seq_len", static_cast<std::int64_t>(T))
                  .add("steps", static_cast<std::int64_t>(cell.get_int32("steps")))
                  .add("n_params", static_cast<std::int64_t>(count_parameters(mc)))
                  .add("train_loss", tr.last_loss)
                  .add("test_loss", test_loss)
                  .add("test_accuracy", test_accuracy)
                  .add("baseline_accuracy", spec.baseline_accuracy)
                  .add("diverged", static_cast<std::int64_t>(tr.diverged ? 1 : 0))
                  .add("diverged_step", static_cast<std::int64_t>(tr.diverged ? tr.diverged_step : -1)));
}

}  // namespace

int main(int argc, char** argv) {
  seqlab::ensure_blas_kernels(argv);  // before anything: OpenBLAS's kernels (core/threads.hpp)
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "The smallest complete seqlab experiment and a template for new ones: a decoder-only "
      "Transformer (model registry) trained on the previous-token task (task registry) with each "
      "positional encoding of the sweep, including the toy 'ramp' encoding that this binary "
      "registers itself (ramp_encoding.cpp). Sub-claims tested: ramp carries the task's position "
      "information as well as sinusoidal; without any encoding the task is not solved. See "
      "README.md.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  spec.options = {
      // The registered names, "ramp" included: it registered before main() ran.
      string_sweep("positional_encoding", {"none", "sinusoidal", "ramp"},
                   "positional encodings compared (registered names)")
          .one_of(positional_encoding_names()),
      int_option("seq_len", 16, "tokens", "previous_token: sequence length T").at_least(2).at_most(4096),
      int_option("vocab_size", 8, "tokens", "previous_token: vocabulary V").at_least(2).at_most(4096),
      int_option("lag", 1, "tokens", "previous_token: copy the token this far back (< seq_len)")
          .at_least(1)
          .at_most(4095),
      int_option("d_model", 32, "features", "model width (hidden_size = embedding_dim)").at_least(1).at_most(4096),
      int_option("n_heads", 2, "heads", "attention heads (must divide d_model)").at_least(1).at_most(256),
      int_option("num_layers", 2, "layers", "Transformer layers").at_least(1).at_most(64),
      int_option("d_ff", 64, "features", "feed-forward inner size").at_least(1).at_most(65536),
      int_option("steps", 300, "updates", "Adam updates").at_least(0).at_most(10000000),
      int_option("warmup_steps", 30, "updates", "linear learning-rate warm-up (<= steps)")
          .at_least(0)
          .at_most(10000000)
          .at_most_key("steps"),
      int_option("batch", 32, "sequences", "training batch").at_least(1).at_most(65536),
      int_option("test_batch", 256, "sequences", "fixed test batch").at_least(1).at_most(1000000),
      real_option("lr", 3e-3, "1", "peak learning rate").greater_than(0).at_most(10),
  };
  spec.tables = {{kMainTable,
                  {"experiment", "model", "positional_encoding", "seed", "seq_len", "steps", "n_params",
                   "train_loss", "test_loss", "test_accuracy", "baseline_accuracy", "diverged",
                   "diverged_step"}}};
  spec.default_seeds = 3;
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

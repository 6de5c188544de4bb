// long_range_recall: claim 2 of the README — recurrent state decays over long distances, even with
// LSTM gates; attention links any two positions directly. Measured on the copy memory task of
// Bai, Kolter & Koltun 2018 (arXiv 1803.01271, §4): recall 10 symbols after a gap of T blanks.
// Claim, method, expected outcome and the CSV columns: README.md beside this file.
//
// Model: Embedding(10, E) -> rnn | lstm | gru | tcn (models/ factory) -> Linear(H, 10), trained with the mean
// cross-entropy over ALL T + 20 positions (as Bai et al.'s code), on fresh batches every step.
// Legend: B batch, T blank length, S = T + 20 sequence length, V = 10 classes, E embedding_dim,
// H hidden_size, L num_layers.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/tasks/copy_memory.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

using namespace seqlab;
using namespace seqlab::experiment;

namespace {

constexpr const char* kName = "long_range_recall";
// Purposes of the replicate's random streams (Cell::stream_seed): shared by every model and T
// with the same replicate index, so comparisons across the grid are paired.
constexpr std::uint64_t kInitStream = 1;   // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;  // training batches
constexpr std::uint64_t kTestStream = 3;   // the fixed test set
// Test sequences are evaluated in chunks of at most this many (bounds the LSTM caches' memory).
constexpr std::size_t kEvalChunk = 128;

/// [B, S] -> [B·S]. (Not named flatten: ADL would pick xt::flatten.)
IndexTensor1 ids_of(const IndexTensor2& x) {
  IndexTensor1 y = IndexTensor1::from_shape({x.size()});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}
/// [B, S, V] -> [B·S, V] (row-major, same data).
Tensor2 rows_of(const Tensor3& x) {
  Tensor2 y = Tensor2::from_shape({x.shape()[0] * x.shape()[1], x.shape()[2]});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}
/// [B·S, V] -> [B, S, V].
Tensor3 unrows(const Tensor2& x, std::size_t B, std::size_t S) {
  Tensor3 y = Tensor3::from_shape({B, S, x.shape()[1]});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}

/// The model of a cell: token embedding -> body (rnn | lstm | gru | tcn) -> per-position head
/// over the V = 10 classes, built by the models/ factory. Throws seqlab::ConfigError (an
/// std::invalid_argument naming the key) for a bad combination, which the framework turns into
/// exit status 2 before anything runs.
ModelConfig model_config(const Cell& cell) {
  ModelConfig mc;
  mc.model = cell.get_string("model");
  mc.input = "embedding";
  mc.vocab_size = 10;
  mc.embedding_dim = cell.get_size("embedding_dim");
  mc.hidden_size = cell.get_size("hidden_size");
  mc.num_layers = cell.get_size("num_layers");
  mc.nonlinearity = cell.get_string("nonlinearity");
  mc.kernel_size = cell.get_size("kernel_size");
  mc.dropout = cell.get_float("dropout");
  mc.weight_norm = cell.get_int("weight_norm") != 0;
  mc.output_size = 10;
  mc.head = "per_position";
  return mc;
}

struct Evaluation {
  double loss = 0;             // mean CE over all positions, nats
  double recall_loss = 0;      // mean CE over the recall positions, nats
  double recall_accuracy = 0;  // fraction of recall positions whose argmax is the target
};

Evaluation evaluate(SequenceModel& model, const CopyMemoryTask& task, const TokenBatch& test) {
  const std::size_t n = test.inputs.shape()[0];
  const std::size_t S = static_cast<std::size_t>(task.seq_len());
  const std::size_t V = static_cast<std::size_t>(task.vocab_size());
  const std::size_t rs = static_cast<std::size_t>(task.recall_start());
  double sum_all = 0, sum_recall = 0;
  std::size_t correct = 0;
  CrossEntropyLoss ce;
  for (std::size_t b0 = 0; b0 < n; b0 += kEvalChunk) {
    const std::size_t nb = std::min(kEvalChunk, n - b0);
    IndexTensor2 x = IndexTensor2::from_shape({nb, S}), y = IndexTensor2::from_shape({nb, S});
    std::copy(test.inputs.data() + b0 * S, test.inputs.data() + (b0 + nb) * S, x.data());
    std::copy(test.targets.data() + b0 * S, test.targets.data() + (b0 + nb) * S, y.data());
    const Tensor2 logits = rows_of(model.forward(x));
    ce.forward(logits, ids_of(y));
    const Tensor1& rl = ce.row_losses();
    const Tensor2& p = ce.probabilities();
    for (std::size_t b = 0; b < nb; ++b) {
      for (std::size_t t = 0; t < S; ++t) {
        const std::size_t row = b * S + t;
        sum_all += rl(row);
        if (t < rs) continue;
        sum_recall += rl(row);
        std::size_t arg = 0;  // first maximum, as torch.argmax
        for (std::size_t c = 1; c < V; ++c)
          if (p(row, c) > p(row, arg)) arg = c;
        if (static_cast<std::int32_t>(arg) == y(b, t)) ++correct;
      }
    }
  }
  const double n_recall = static_cast<double>(n * (S - rs));
  return {sum_all / static_cast<double>(n * S), sum_recall / n_recall,
          static_cast<double>(correct) / n_recall};
}

LrSchedule make_schedule(const Cell& cell) {
  LrSchedule s;
  s.kind = cell.get_string("schedule");
  s.base_lr = cell.get_float("lr");
  s.warmup_steps = cell.get_int32("warmup_steps");
  s.total_steps = cell.get_int32("steps");
  return s;
}

void validate(const Cell& cell) {
  const auto steps = cell.get_int("steps");
  const auto warmup = cell.get_int("warmup_steps");
  const auto kind = cell.get_string("schedule");
  if (warmup > steps) {
    throw experiment::ConfigError("warmup_steps: invalid value '" + std::to_string(warmup) +
                      "': expected an integer <= steps (" + std::to_string(steps) + ")");
  }
  if (kind == "inverse_sqrt" && warmup < 1) {
    throw experiment::ConfigError("warmup_steps: invalid value '" + std::to_string(warmup) +
                      "': schedule = inverse_sqrt needs an integer >= 1");
  }
  make_schedule(cell).validate();  // anything else it rejects (message names the field)
  model_config(cell).validate();   // e.g. kernel_size = 0 for tcn, unknown nonlinearity
}

void run_cell(const Cell& cell, CellOutput& out) {
  const std::string model_name = cell.get_string("model");
  const int T = cell.get_int32("T");
  const std::size_t batch = cell.get_size("batch");
  const int steps = cell.get_int32("steps");
  const int log_every = cell.get_int32("log_every");
  const CopyMemoryTask task(T);

  Rng init_rng(cell.stream_seed(kInitStream));
  const std::unique_ptr<SequenceModel> model_ptr = make_model(model_config(cell), init_rng);
  SequenceModel& model = *model_ptr;
  model.train();
  const std::vector<Parameter*> params = model.parameters();

  OptimizerConfig oc;
  oc.lr = cell.get_float("lr");
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);
  const LrSchedule schedule = make_schedule(cell);

  Rng test_rng(cell.stream_seed(kTestStream));
  const TokenBatch test = task.sample(cell.get_size("test_batch"), test_rng);
  Rng train_rng(cell.stream_seed(kTrainStream));

  Row id;
  id.add("experiment", kName)
      .add("model", model_name)
      .add("task", "copy_memory")
      .add("T", T)
      .add("seq_len", task.seq_len())
      .add("seed", cell.replicate);

  CrossEntropyLoss ce;
  auto loss_and_grad = [&](int /*step*/) -> double {
    const TokenBatch b = task.sample(batch, train_rng);
    const Tensor2 logits = rows_of(model.forward(b.inputs));
    const double loss = ce.forward(logits, ids_of(b.targets));
    model.backward(unrows(ce.backward(), batch, static_cast<std::size_t>(task.seq_len())));
    return loss;
  };
  // Curve: one row per window of log_every updates (and the last, shorter one): mean loss and mean
  // gradient norm over the window, learning rate of its last update.
  double win_loss = 0, win_norm = 0, last_window_loss = NAN;
  int win_n = 0;
  auto on_step = [&](const StepRecord& r) {
    win_loss += r.loss;
    win_norm += r.grad_norm;
    ++win_n;
    const int done = r.step + 1;
    if (done % log_every == 0 || done == steps) {
      last_window_loss = win_loss / win_n;
      out.add_row(Row(id)
                      .add("step", done)
                      .add("train_loss", last_window_loss)
                      .add("grad_norm", win_norm / win_n)
                      .add("lr", r.lr),
                  "steps");
      win_loss = win_norm = 0;
      win_n = 0;
    }
  };
  TrainOptions topt;
  topt.steps = steps;
  topt.clip_norm = cell.get_real("clip_norm");
  topt.quiet = cell.quiet;
  topt.label = model_name + " T=" + std::to_string(T) + " seed " + std::to_string(cell.replicate);
  const auto t0 = std::chrono::steady_clock::now();
  const TrainResult tr = train_loop(topt, params, *optim, schedule, loss_and_grad, on_step);
  const double train_time =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (win_n > 0) last_window_loss = win_loss / win_n;  // diverged mid-window

  model.eval();
  const Evaluation ev = evaluate(model, task, test);
  // A non-finite test loss with finite parameters (e.g. logits overflowing) is divergence too:
  // recorded as diverged at step steps_done (nothing diverged during training, so = steps).
  bool diverged = tr.diverged;
  int diverged_step = tr.diverged_step;
  if (!diverged && !(std::isfinite(ev.loss) && std::isfinite(ev.recall_loss))) {
    diverged = true;
    diverged_step = tr.steps_done;
  }
  out.add_row(Row(id)
                  .add("derived_seed", cell.seed)
                  .add("n_params", model.num_parameters())
                  .add("receptive_field", model.receptive_field())
                  .add("sequential_steps", model.sequential_steps(static_cast<std::size_t>(task.seq_len())))
                  .add("embedding_dim", cell.get_int("embedding_dim"))
                  .add("hidden_size", cell.get_int("hidden_size"))
                  .add("num_layers", cell.get_int("num_layers"))
                  .add("batch", cell.get_int("batch"))
                  .add("steps", steps)
                  .add("lr", cell.get_real("lr"))
                  .add("optimizer", cell.get_string("optimizer"))
                  .add("test_loss", ev.loss)
                  .add("test_recall_loss", ev.recall_loss)
                  .add("test_recall_accuracy", ev.recall_accuracy)
                  .add("memoryless_loss", task.memoryless_loss())
                  .add("memoryless_recall_loss", task.memoryless_recall_loss())
                  .add("chance_recall_accuracy", task.chance_recall_accuracy())
                  .add("diverged", diverged ? 1 : 0)
                  .add("diverged_step", diverged_step)
                  .add("steps_done", tr.steps_done)
                  .add("final_train_loss", last_window_loss)
                  .add("train_time_s", train_time));
}

}  // namespace

int main(int argc, char** argv) {
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 2 (README.md claims table): recurrent state decays over long distances, even with LSTM gates. "
      "Trains a model on the copy memory task (Bai et al. 2018: recall 10 symbols from {1..8} "
      "after T blanks; sequence length T+20) for a grid of T x model x seeds, and reports test "
      "cross-entropy and recall accuracy against the memoryless baseline 10 ln8/(T+20).";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("model", {"lstm"}, "sequence model (transformer families: long-range issue)")
          .one_of({"rnn", "lstm", "gru", "tcn"}),
      int_sweep("T", {5, 10, 25, 100}, "steps",
                "blank length of copy memory (recall distance T+10, sequence length T+20)")
          .at_least(1)
          .at_most(1e6),
      int_option("embedding_dim", 8, "units", "embedding width E").at_least(1).at_most(65536),
      int_option("hidden_size", 64, "units", "hidden size H (tcn: channels of every level)")
          .at_least(1)
          .at_most(65536),
      int_option("num_layers", 1, "layers", "stacked recurrent layers, or TCN levels (tcn: at most 30)")
          .at_least(1)
          .at_most(1000),
      string_option("nonlinearity", "tanh", "rnn only: torch.nn.RNN nonlinearity")
          .one_of({"tanh", "relu"}),
      int_option("kernel_size", 8, "steps", "tcn only: convolution kernel size k")
          .at_least(1)
          .at_most(4096),
      int_option("weight_norm", 1, "0/1", "tcn only: weight-normalised convolutions (Bai et al.)")
          .at_least(0)
          .at_most(1),
      real_option("dropout", 0, "1", "dropout probability (recurrent: input and output; tcn: in blocks)")
          .at_least(0)
          .at_most(0.99),
      int_option("batch", 16, "sequences", "training batch size (fresh batch every step)")
          .at_least(1)
          .at_most(1e6),
      int_option("steps", 3000, "updates", "optimizer updates").at_least(1).at_most(1e9),
      real_option("lr", 3e-3, "1", "peak learning rate").greater_than(0),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0, "1", "weight decay (L2 for adam/sgd, decoupled for adamw)")
          .at_least(0),
      real_option("clip_norm", 1, "1", "max global gradient norm; 0 disables clipping")
          .at_least(0),
      string_option("schedule", "constant", "learning-rate schedule")
          .one_of({"constant", "cosine", "inverse_sqrt"}),
      int_option("warmup_steps", 0, "updates", "linear warm-up length").at_least(0).at_most(1e9),
      int_option("test_batch", 256, "sequences", "size of the fixed test set")
          .at_least(1)
          .at_most(1e6),
      int_option("log_every", 50, "updates", "updates per row of the curve table")
          .at_least(1)
          .at_most(1e9),
  };
  spec.tables = {
      {kMainTable,
       {"experiment", "model", "task", "T", "seq_len", "seed", "derived_seed", "n_params",
        "receptive_field", "sequential_steps", "embedding_dim", "hidden_size", "num_layers", "batch",
        "steps", "lr", "optimizer", "test_loss", "test_recall_loss", "test_recall_accuracy",
        "memoryless_loss", "memoryless_recall_loss", "chance_recall_accuracy", "diverged",
        "diverged_step", "steps_done", "final_train_loss", "train_time_s"}},
      {"steps",
       {"experiment", "model", "task", "T", "seq_len", "seed", "step", "train_loss", "grad_norm",
        "lr"}},
  };
  spec.default_seeds = 3;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

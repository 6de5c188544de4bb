// Time to accuracy on copy memory (time_to_accuracy.hpp).
#include "time_to_accuracy.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/copy_memory.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"
#include "stack.hpp"
#include "timing.hpp"

namespace parallel_speedup {

using namespace seqlab;
using seqlab::experiment::Cell;
using seqlab::experiment::CellOutput;
using seqlab::experiment::Row;

namespace {

constexpr std::uint64_t kInitStream = 1, kTrainStream = 2, kTestStream = 3;
constexpr std::size_t kEvalChunk = 128;  // test sequences per forward (bounds memory)
constexpr double kClipNorm = 1.0;
constexpr int kVocab = 10;               // copy memory with 8 symbols: blank, 1..8, delimiter

/// Thrown from the step callback to end training at the target (train_loop propagates it).
struct TargetReached {};

IndexTensor1 ids_of(const IndexTensor2& x) {
  IndexTensor1 y = IndexTensor1::from_shape({x.size()});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}
Tensor2 rows_of(const Tensor3& x) {
  Tensor2 y = Tensor2::from_shape({x.shape()[0] * x.shape()[1], x.shape()[2]});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}
Tensor3 unrows(const Tensor2& x, std::size_t B, std::size_t S) {
  Tensor3 y = Tensor3::from_shape({B, S, x.shape()[1]});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}

/// Fraction of the recall positions of `test` whose argmax (first maximum) is the target.
double recall_accuracy(SequenceModel& model, const CopyMemoryTask& task, const TokenBatch& test) {
  const std::size_t n = test.inputs.shape()[0];
  const std::size_t S = static_cast<std::size_t>(task.seq_len());
  const std::size_t rs = static_cast<std::size_t>(task.recall_start());
  std::size_t correct = 0;
  for (std::size_t b0 = 0; b0 < n; b0 += kEvalChunk) {
    const std::size_t nb = std::min(kEvalChunk, n - b0);
    IndexTensor2 x = IndexTensor2::from_shape({nb, S});
    std::copy(test.inputs.data() + b0 * S, test.inputs.data() + (b0 + nb) * S, x.data());
    const Tensor3 logits = model.forward(x);
    const std::size_t V = logits.shape()[2];
    for (std::size_t b = 0; b < nb; ++b)
      for (std::size_t t = rs; t < S; ++t) {
        const float* row = logits.data() + (b * S + t) * V;
        const std::size_t arg = static_cast<std::size_t>(std::max_element(row, row + V) - row);
        if (static_cast<std::int32_t>(arg) == test.targets(b0 + b, t)) ++correct;
      }
  }
  return static_cast<double>(correct) / static_cast<double>(n * (S - rs));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ModelConfig tta_model_config(const std::string& model, const TtaSettings& s) {
  const CopyMemoryTask task(s.T, s.n_memorize);
  ModelConfig ref;
  ref.model = "transformer_decoder";
  ref.input = "embedding";
  ref.vocab_size = kVocab;
  ref.embedding_dim = s.d_model;
  ref.hidden_size = s.d_model;
  ref.num_layers = s.num_layers;
  ref.n_heads = s.n_heads;
  ref.d_ff = s.d_ff;
  ref.norm = "layer_norm";
  ref.norm_placement = s.norm_placement;
  ref.positional_encoding = "sinusoidal";
  ref.output_size = kVocab;
  ref.head = "per_position";
  ref.kernel_size = s.kernel_size;
  ref.validate();
  ModelConfig mc = ref;
  mc.model = model;
  if (mc.is_transformer()) {
    mc.validate();
    return mc;
  }
  if (model == "tcn")
    mc.num_layers = tcn_levels_for(static_cast<std::size_t>(task.seq_len()), s.kernel_size);
  return hidden_size_for_budget(mc, count_parameters(ref));
}

const std::vector<std::string>& time_to_accuracy_columns() {
  static const std::vector<std::string> c = {
      "experiment", "model", "match", "task", "T", "n_memorize", "seq_len", "seed", "derived_seed", "n_params",
      "d_model", "hidden_size", "num_layers", "threads", "batch", "lr", "target_accuracy",
      "eval_every", "max_steps", "reached", "steps_to_target", "time_to_target_s",
      "train_time_s", "steps_done", "step_time_ms", "final_recall_accuracy", "diverged",
      "diverged_step"};
  return c;
}

const std::vector<std::string>& tta_curve_columns() {
  static const std::vector<std::string> c = {"experiment", "model", "match", "seed", "step",
                                             "train_time_s", "train_loss", "recall_accuracy"};
  return c;
}

void run_time_to_accuracy(const Cell& cell, const std::string& model, const TtaSettings& s,
                          CellOutput& out) {
  const CopyMemoryTask task(s.T, s.n_memorize);
  const std::size_t S = static_cast<std::size_t>(task.seq_len());
  const ModelConfig mc = tta_model_config(model, s);
  const std::string match = cell.get_string("match");
  const ThreadBudget threads(s.threads);

  for (std::size_t j = 0; j < s.seeds; ++j) {
    const std::size_t r = cell.replicate * s.seeds + j;
    Rng init_rng(experiment::stream_seed(cell.base_seed, r, kInitStream));
    Rng train_rng(experiment::stream_seed(cell.base_seed, r, kTrainStream));
    Rng test_rng(experiment::stream_seed(cell.base_seed, r, kTestStream));
    const std::unique_ptr<SequenceModel> net = make_model(mc, init_rng);
    net->train();
    const std::vector<Parameter*> params = net->parameters();
    OptimizerConfig oc;
    oc.lr = static_cast<float>(s.lr);
    auto optim = make_optimizer("adam", params, oc);
    LrSchedule schedule;
    schedule.kind = "constant";
    schedule.base_lr = static_cast<float>(s.lr);
    const TokenBatch test = task.sample(s.test_batch, test_rng);

    Row id;
    id.add("experiment", "parallel_speedup").add("model", model).add("match", match);

    CrossEntropyLoss ce;
    auto loss_and_grad = [&](int) -> double {
      const TokenBatch b = task.sample(s.batch, train_rng);
      const Tensor2 logits = rows_of(net->forward(b.inputs));
      const double loss = ce.forward(logits, ids_of(b.targets));
      net->backward(unrows(ce.backward(), s.batch, S));
      return loss;
    };
    const auto t0 = std::chrono::steady_clock::now();
    double eval_seconds = 0, window_loss = 0, accuracy = 0;
    int window_n = 0, steps_to_target = -1;
    double time_to_target = NAN;
    auto on_step = [&](const StepRecord& rec) {
      window_loss += rec.loss;
      ++window_n;
      const int done = rec.step + 1;
      if (done % s.eval_every != 0 && done != s.max_steps) return;
      const auto e0 = std::chrono::steady_clock::now();
      const double train_time = std::chrono::duration<double>(e0 - t0).count() - eval_seconds;
      net->eval();
      accuracy = recall_accuracy(*net, task, test);
      net->train();
      out.add_row(Row(id)
                      .add("seed", r)
                      .add("step", done)
                      .add("train_time_s", train_time)
                      .add("train_loss", window_loss / window_n)
                      .add("recall_accuracy", accuracy),
                  "tta_curve");
      window_loss = 0;
      window_n = 0;
      eval_seconds += seconds_since(e0);
      if (accuracy >= s.target) {
        steps_to_target = done;
        time_to_target = train_time;
        throw TargetReached{};
      }
    };
    TrainOptions topt;
    topt.steps = s.max_steps;
    topt.clip_norm = kClipNorm;
    topt.quiet = true;
    // --checkpoint-every: one checkpoint per (model, seed) run, phase "tta-<model>-<j>". The steps
    // change the model, the optimizer, the data stream, the loss window, the last accuracy and
    // the "tta_curve" rows. Wall-clock values (train_time_s, time_to_target_s, step_time_ms) are
    // nondeterministic columns: after a resume they count this process's time only.
    topt.checkpoint = experiment::cell_checkpoint(cell, "tta-" + model + "-" + std::to_string(j),
                                                  net.get(), out);
    topt.checkpoint.state.add("train_rng", train_rng);
    topt.checkpoint.state.add("window_loss", window_loss);
    topt.checkpoint.state.add("window_n", window_n);
    topt.checkpoint.state.add("accuracy", accuracy);
    TrainResult tr;
    bool reached = false;
    try {
      tr = train_loop(topt, params, *optim, schedule, loss_and_grad, on_step);
    } catch (const TargetReached&) {
      reached = true;
      tr.steps_done = steps_to_target;
    }
    const double train_time = seconds_since(t0) - eval_seconds;
    out.add_row(Row(id)
                    .add("task", "copy_memory")
                    .add("T", s.T)
                    .add("n_memorize", s.n_memorize)
                    .add("seq_len", S)
                    .add("seed", r)
                    .add("derived_seed", experiment::replicate_seed(cell.base_seed, r))
                    .add("n_params", net->num_parameters())
                    .add("d_model", s.d_model)
                    .add("hidden_size", mc.hidden_size)
                    .add("num_layers", mc.num_layers)
                    .add("threads", s.threads)
                    .add("batch", s.batch)
                    .add("lr", s.lr)
                    .add("target_accuracy", s.target)
                    .add("eval_every", s.eval_every)
                    .add("max_steps", s.max_steps)
                    .add("reached", reached ? 1 : 0)
                    .add("steps_to_target", reached ? std::to_string(steps_to_target) : "nan")
                    .add("time_to_target_s", time_to_target)
                    .add("train_time_s", train_time)
                    .add("steps_done", tr.steps_done)
                    .add("step_time_ms",
                         tr.steps_done > 0 ? 1e3 * train_time / tr.steps_done : NAN)
                    .add("final_recall_accuracy", accuracy)
                    .add("diverged", tr.diverged ? 1 : 0)
                    .add("diverged_step", tr.diverged_step),
                "time_to_accuracy");
  }
}

}  // namespace parallel_speedup

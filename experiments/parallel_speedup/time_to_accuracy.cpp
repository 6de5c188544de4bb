// Time to accuracy on copy memory (time_to_accuracy.hpp).
#include "time_to_accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/tasks/copy_memory.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/metrics.hpp"
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

/// Fraction of the recall positions (TaskBatch::distances > 0) of `test` whose argmax is the
/// target (train/metrics.hpp).
double recall_accuracy(SequenceModel& model, const TaskBatch& test) {
  std::size_t correct = 0, recall = 0;
  evaluate_chunked(model, eval_set(test), kEvalChunk, [&](std::size_t b, std::size_t t, double, bool ok) {
    if (test.distances(b, t) <= 0) return;
    ++recall;
    correct += ok ? 1 : 0;
  });
  return static_cast<double>(correct) / static_cast<double>(recall);
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
  TaskParams tp;
  tp.set("T", std::to_string(s.T));
  tp.set("n_memorize", std::to_string(s.n_memorize));
  const auto task = make_task("copy_memory", tp);
  const std::size_t S = task->spec().seq_len;
  const ModelConfig mc = tta_model_config(model, s);
  const std::string match = cell.get_string("match");
  const ThreadBudget threads(s.threads);

  for (std::size_t j = 0; j < s.seeds; ++j) {
    const std::size_t r = cell.replicate * s.seeds + j;
    Rng init_rng(experiment::stream_seed(cell.base_seed, r, kInitStream));
    Rng train_rng(experiment::stream_seed(cell.base_seed, r, kTrainStream));
    Rng test_rng(experiment::stream_seed(cell.base_seed, r, kTestStream));
    const std::unique_ptr<SequenceModel> net = make_model(mc, init_rng);
    const std::vector<Parameter*> params = net->parameters();
    OptimizerConfig oc;
    oc.lr = static_cast<float>(s.lr);
    auto optim = make_optimizer("adam", params, oc);
    LrSchedule schedule;
    schedule.kind = "constant";
    schedule.base_lr = static_cast<float>(s.lr);
    const TaskBatch test = task->sample(s.test_batch, test_rng);

    Row id;
    id.add("experiment", "parallel_speedup").add("model", model).add("match", match);

    CrossEntropyLoss ce;
    double accuracy = 0, time_to_target = NAN;
    int steps_to_target = -1;
    // One phase per (model, seed) run, "tta-<model>-<j>". Every eval_every updates the recall
    // accuracy on the test set (the phase's clock leaves the evaluations out); the first at the
    // target ends the run. Wall-clock values (train_time_s, time_to_target_s, step_time_ms) are
    // nondeterministic columns: after a resume they count this process's time only.
    experiment::TrainingPhase phase(cell, out, net.get(), "tta-" + model + "-" + std::to_string(j));
    phase.steps(s.max_steps).clip_norm(kClipNorm).every(s.eval_every, [&](const experiment::TrainingWindow& w) {
      accuracy = recall_accuracy(*net, test);
      out.add_row(Row(id)
                      .add("seed", r)
                      .add("step", w.step)
                      .add("train_time_s", w.train_time_s)
                      .add("train_loss", w.mean_loss)
                      .add("recall_accuracy", accuracy),
                  "tta_curve");
      if (accuracy < s.target) return false;
      steps_to_target = w.step;
      time_to_target = w.train_time_s;
      return true;
    });
    phase.state().add("train_rng", train_rng);
    phase.state().add("accuracy", accuracy);
    const experiment::PhaseResult tr = phase.run(params, *optim, schedule, [&](int) {
      const TaskBatch b = task->sample(s.batch, train_rng);
      const double loss = ce.forward(rows_of(net->forward(b.tokens)), ids_of(b.targets));
      net->backward(unrows(ce.backward(), s.batch, S));
      return loss;
    });
    const bool reached = tr.stopped_early;
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
                    .add("train_time_s", tr.train_time_s)
                    .add("steps_done", tr.steps_done)
                    .add("step_time_ms",
                         tr.steps_done > 0 ? 1e3 * tr.train_time_s / tr.steps_done : NAN)
                    .add("final_recall_accuracy", accuracy)
                    .add("diverged", tr.diverged ? 1 : 0)
                    .add("diverged_step", tr.diverged_step),
                "time_to_accuracy");
  }
}

}  // namespace parallel_speedup

// Time to accuracy on character-level language modelling (time_to_accuracy.hpp).
#include "time_to_accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "parts.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/experiment/tuning.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/tasks/text.hpp"
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

constexpr std::uint64_t kInitStream = 1, kTrainStream = 2, kPilotInitStream = 4, kPilotTrainStream = 5;
constexpr std::size_t kEvalChunk = 64;  // evaluation windows per forward (bounds memory)
constexpr double kClipNorm = 1.0;

/// Bits per character of `model` on an evaluation (every chunk, in the mode the model is in).
double eval_bpc(SequenceModel& model, const TextEvaluation& ev) {
  ScoreSums acc;
  for (std::size_t i = 0; i < ev.n_chunks(); ++i) {
    const TaskBatch chunk = ev.chunk(i);
    evaluate_chunked(model, eval_set(chunk), kEvalChunk, acc);
  }
  return acc.bits_per_token();
}

/// One training run of `net` at learning rate `lr`: phase `name`, up to `steps` updates on windows
/// from `data`, the window hook `hook` every `every` updates (may stop the run); `state` registers
/// what the hook changes, for checkpoints.
experiment::PhaseResult train(const Cell& cell, CellOutput& out, SequenceModel& net, const Task& task,
                              std::size_t batch, double lr, int steps, Rng& data, const std::string& name,
                              int every, experiment::TrainingPhase::WindowHook hook,
                              const std::function<void(CheckpointState&)>& state = {}) {
  const std::vector<Parameter*> params = net.parameters();
  OptimizerConfig oc;
  oc.lr = static_cast<float>(lr);
  auto optim = make_optimizer("adam", params, oc);
  LrSchedule schedule;
  schedule.kind = "constant";
  schedule.base_lr = static_cast<float>(lr);
  CrossEntropyLoss ce;
  const std::size_t T = task.spec().seq_len;
  experiment::TrainingPhase phase(cell, out, &net, name);
  phase.steps(steps).clip_norm(kClipNorm).every(every, std::move(hook));
  phase.state().add("train_rng", data);
  if (state) state(phase.state());
  return phase.run(params, *optim, schedule, [&](int) {
    const TaskBatch b = task.sample(batch, data);
    const double loss = ce.forward(rows_of(net.forward(b.tokens)), ids_of(b.targets));
    net.backward(unrows(ce.backward(), batch, T));
    return loss;
  });
}

}  // namespace

const std::vector<std::string>& lm_families() {
  static const std::vector<std::string> f = {"transformer_decoder", "rnn", "lstm", "gru", "tcn"};
  return f;
}

ModelConfig tta_model_config(const std::string& model, const TtaSettings& s, std::size_t vocab) {
  ModelConfig ref;
  ref.model = "transformer_decoder";
  ref.input = "embedding";
  ref.vocab_size = vocab;
  ref.embedding_dim = s.d_model;
  ref.hidden_size = s.d_model;
  ref.num_layers = s.num_layers;
  ref.n_heads = s.n_heads;
  ref.d_ff = s.d_ff;
  ref.norm = "layer_norm";
  ref.norm_placement = s.norm_placement;
  ref.positional_encoding = "sinusoidal";
  ref.output_size = vocab;
  ref.head = "per_position";
  ref.kernel_size = s.kernel_size;
  ref.attention_kernel = s.attention_kernel;
  ref.validate();
  ModelConfig mc = ref;
  mc.model = model;
  if (mc.is_transformer()) {
    mc.validate();
    return mc;
  }
  if (model == "tcn") mc.num_layers = tcn_levels_for(s.seq_len, s.kernel_size);
  return hidden_size_for_budget(mc, count_parameters(ref));
}

const std::vector<std::string>& time_to_accuracy_columns() {
  static const std::vector<std::string> c = {
      "experiment", "model", "task", "corpus", "seq_len", "batch", "seed", "derived_seed", "n_params",
      "d_model", "hidden_size", "num_layers", "threads", "lr", "target_bpc", "unigram_bpc", "eval_every",
      "eval_tokens", "max_steps", "reached", "steps_to_target", "time_to_target_s", "train_time_s",
      "steps_done", "step_time_ms", "final_valid_bpc", "best_valid_bpc", "test_bpc", "diverged",
      "diverged_step"};
  return c;
}

const std::vector<std::string>& tta_lr_columns() {
  static const std::vector<std::string> c = {"experiment", "model", "lr", "pilot_steps", "valid_loss",
                                             "valid_bpc", "chosen"};
  return c;
}

const std::vector<std::string>& tta_curve_columns() {
  static const std::vector<std::string> c = {"experiment", "model", "seed", "step", "train_time_s",
                                             "train_loss", "valid_bpc"};
  return c;
}

void run_time_to_accuracy(const Cell& cell, const std::string& model, const TtaSettings& s, CellOutput& out) {
  TaskParams tp;
  tp.set("corpus", s.corpus);
  tp.set("seq_len", std::to_string(s.seq_len));
  const std::unique_ptr<Task> task = make_task("text", tp);
  const auto& corpus = dynamic_cast<const TextTask&>(*task).corpus();
  const auto valid = TextEvaluation::non_overlapping(corpus, TextSplit::valid, s.seq_len, s.eval_tokens, kEvalChunk);
  const auto test = TextEvaluation::non_overlapping(corpus, TextSplit::test, s.seq_len, s.eval_tokens, kEvalChunk);
  const double unigram_bpc = bits_per_character(corpus->unigram_loss(TextSplit::valid, s.eval_tokens));
  const ModelConfig mc = tta_model_config(model, s, corpus->vocab_size());
  const ThreadBudget threads(s.threads);
  const Row id = Row().add("experiment", "parallel_speedup").add("model", model);

  // The learning rate: choose_lr over the grid, each trial a fresh model from the pilot streams.
  const std::size_t r0 = cell.replicate * s.seeds;
  std::size_t trial_index = 0;
  const experiment::LrChoice choice = experiment::choose_lr(s.lrs, [&](double lr) {
    Rng init(experiment::stream_seed(cell.base_seed, r0, kPilotInitStream));
    Rng data(experiment::stream_seed(cell.base_seed, r0, kPilotTrainStream));
    const auto net = make_model(mc, init);
    const experiment::PhaseResult r = train(cell, out, *net, *task, s.batch, lr, s.pilot_steps, data,
                                            "pilot" + std::to_string(trial_index++), s.pilot_steps,
                                            [](const experiment::TrainingWindow&) { return false; });
    if (r.diverged) return std::nan("");
    ScoreSums acc;
    for (std::size_t i = 0; i < valid.n_chunks(); ++i) evaluate_chunked(*net, eval_set(valid.chunk(i)), kEvalChunk, acc);
    return acc.mean_loss();
  });
  for (std::size_t k = 0; k < s.lrs.size(); ++k)
    out.add_row(Row(id)
                    .add("lr", s.lrs[k])
                    .add("pilot_steps", s.pilot_steps)
                    .add("valid_loss", choice.val_loss[k])
                    .add("valid_bpc", bits_per_character(choice.val_loss[k]))
                    .add("chosen", k == choice.index ? 1 : 0),
                "tta_lr");

  for (std::size_t j = 0; j < s.seeds; ++j) {
    const std::size_t r = r0 + j;
    Rng init(experiment::stream_seed(cell.base_seed, r, kInitStream));
    Rng data(experiment::stream_seed(cell.base_seed, r, kTrainStream));
    const auto net = make_model(mc, init);
    double bpc = NAN, best = INFINITY, time_to_target = NAN;
    int steps_to_target = -1;
    double last_time = 0;          // this process's training time at the last window (not resumed)
    std::vector<double> window_s;  // seconds per update of each evaluation window (NaN: unknown)
    const experiment::PhaseResult tr = train(
        cell, out, *net, *task, s.batch, choice.lr, s.max_steps, data, "run" + std::to_string(j), s.eval_every,
        [&](const experiment::TrainingWindow& w) {
          bpc = eval_bpc(*net, valid);
          best = std::min(best, bpc);
          // After a resume the timer counts this process's updates only: the first window then
          // spans fewer timed updates than w.updates (a nondeterministic column either way).
          window_s.push_back(w.updates > 0 && w.train_time_s > last_time ? (w.train_time_s - last_time) / w.updates
                                                                        : NAN);
          last_time = w.train_time_s;
          out.add_row(Row(id)
                          .add("seed", r)
                          .add("step", w.step)
                          .add("train_time_s", w.train_time_s)
                          .add("train_loss", w.mean_loss)
                          .add("valid_bpc", bpc),
                      "tta_curve");
          if (!(bpc <= s.target_bpc)) return false;
          steps_to_target = w.step;
          time_to_target = w.train_time_s;
          return true;
        },
        [&](CheckpointState& st) {
          st.add("valid_bpc", bpc);
          st.add("best_valid_bpc", best);
          st.add("steps_to_target", steps_to_target);
          st.add("time_to_target", time_to_target);
          st.add("window_s", window_s);
        });
    const bool reached = tr.stopped_early;
    const double test_bpc = eval_bpc(*net, test);
    out.add_row(Row(id)
                    .add("task", "text")
                    .add("corpus", s.corpus)
                    .add("seq_len", s.seq_len)
                    .add("batch", s.batch)
                    .add("seed", r)
                    .add("derived_seed", experiment::replicate_seed(cell.base_seed, r))
                    .add("n_params", net->num_parameters())
                    .add("d_model", s.d_model)
                    .add("hidden_size", mc.hidden_size)
                    .add("num_layers", mc.num_layers)
                    .add("threads", s.threads)
                    .add("lr", choice.lr)
                    .add("target_bpc", s.target_bpc)
                    .add("unigram_bpc", unigram_bpc)
                    .add("eval_every", s.eval_every)
                    .add("eval_tokens", valid.n_scored())
                    .add("max_steps", s.max_steps)
                    .add("reached", reached ? 1 : 0)
                    .add("steps_to_target", reached ? std::to_string(steps_to_target) : "nan")
                    .add("time_to_target_s", time_to_target)
                    .add("train_time_s", tr.train_time_s)
                    .add("steps_done", tr.steps_done)
                    .add("step_time_ms", tr.steps_done > 0 ? 1e3 * tr.train_time_s / tr.steps_done : NAN)
                    .add("final_valid_bpc", bpc)
                    .add("best_valid_bpc", best)
                    .add("test_bpc", test_bpc)
                    .add("diverged", tr.diverged ? 1 : 0)
                    .add("diverged_step", tr.diverged_step),
                "time_to_accuracy");

    // The run's per-update times as a main-table row (pass train_update; "rounds" = windows).
    PointInfo p;
    p.part = "tta";
    p.model = model;
    p.kernel = mc.is_transformer() ? mc.attention_kernel : "none";
    p.match = "params";
    p.pass = "train_update";
    p.batch = s.batch;
    p.d_model = s.d_model;
    p.hidden_size = mc.hidden_size;
    p.num_layers = mc.num_layers;
    p.n_heads = mc.is_transformer() ? s.n_heads : 0;
    p.d_ff = mc.is_transformer() ? s.d_ff : 0;
    p.kernel_size = model == "tcn" ? s.kernel_size : 0;
    p.n_params = net->num_parameters();
    p.seed = r;
    p.threads = s.threads;
    p.seq_len = s.seq_len;
    p.sequential_steps = net->sequential_steps(s.seq_len);
    p.tokens = static_cast<double>(s.batch * s.seq_len);
    Timing t;
    t.round_s = window_s.empty() ? std::vector<double>{NAN} : window_s;
    finish_timing(t, s.eval_every);
    add_timing_rows(cell, out, p, t);
  }
}

}  // namespace parallel_speedup

// norm_stability's BatchNorm studies (bn_study.hpp).
#include "bn_study.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluation.hpp"
#include "masked_text.hpp"
#include "probe.hpp"
#include "runs.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/experiment/tuning.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"

namespace norm_stability {

using namespace seqlab;
using namespace seqlab::experiment;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Context {
  const Cell& cell;
  CellOutput& out;
  MaskedText task;
  double baseline;  // the train unigram's loss on the test split (ignores every context)
  std::size_t phase_index = 0;
};

std::unique_ptr<TransformerModel> make_mlm(const Context& c, const RunSpec& run) {
  Rng init_rng(c.cell.stream_seed(kInitStream));
  std::unique_ptr<SequenceModel> m = make_model(
      model_config(c.cell, run, "transformer_encoder", c.task.embedding_size(), c.task.vocab_size(),
                   c.task.pad_id()),
      init_rng);
  auto* tm = dynamic_cast<TransformerModel*>(m.get());
  if (tm == nullptr) throw std::logic_error("norm_stability: make_model did not build a TransformerModel");
  m.release();
  return std::unique_ptr<TransformerModel>(tm);
}

// Sets of `rows` sequences of `split`, one per share, each from its own stream of `purpose`.
std::vector<TaskBatch> fixed_sets(const Context& c, const std::vector<double>& shares, std::size_t rows,
                                  std::uint64_t purpose, TextSplit split) {
  std::vector<TaskBatch> sets;
  for (double p : shares) {
    Rng rng(derive_seed(c.cell.stream_seed(purpose), static_cast<std::uint64_t>(share_key(p))));
    sets.push_back(c.task.sample(rows, p, rng, split));
  }
  return sets;
}

// Mean over the sets of the eval-mode loss (each set weighted equally, as the training mixture).
double mean_eval_loss(TransformerModel& model, const std::vector<TaskBatch>& sets, std::size_t chunk) {
  double s = 0;
  for (const auto& set : sets) s += evaluate(model, set, false, chunk).loss;
  return s / static_cast<double>(sets.size());
}

struct Trained {
  std::unique_ptr<TransformerModel> model;
  ProbedNorm* probe = nullptr;
  PhaseResult tr;
  RunSummary sum;
  double initial_loss = kNaN;
  double valid_loss = kNaN;
};

// One training run of `run` on batches with padding shares drawn from `shares`; rows of the steps
// table only when `id` is given (not for pilot trials).
Trained train_mlm(Context& c, const RunSpec& run, const std::vector<double>& shares,
                  const std::vector<TaskBatch>& valid, const Row* id) {
  const Cell& cell = c.cell;
  Trained t;
  t.model = make_mlm(c, run);
  t.probe = &install_probe(*t.model);
  TransformerModel& model = *t.model;
  const std::size_t B = run.batch, T = c.task.seq_len();
  t.initial_loss = mean_eval_loss(model, valid, B);
  const std::vector<Parameter*> params = model.parameters();
  auto optim = make_optimizer(cell.get_string("optimizer"), params, optimizer_config(cell, run.lr));
  const LrSchedule schedule = make_schedule(run, "cosine");
  const std::size_t window = cell.get_size("divergence_window");
  const int log_every = std::max(1, run.steps / cell.get_int32("log_points"));

  Rng train_rng(cell.stream_seed(kTrainStream));
  CrossEntropyLoss ce;
  TaskBatch cur;
  double share = 0;
  auto loss_and_grad = [&](int) -> double {
    cur = c.task.sample_mixed(B, shares, train_rng, TextSplit::train, &share);
    model.set_padding(&cur.padding);
    const Tensor3 logits = model.forward(cur.tokens);
    const double loss = ce.forward(rows_of(logits), ids_of(cur.targets));
    model.backward(unrows(ce.backward(), B, T));
    model.set_padding(nullptr);
    return loss;
  };
  std::vector<double> losses, norms, mu, var, shift;
  StepWindow win;
  TrainingPhase phase(cell, c.out, &model, "run" + std::to_string(c.phase_index++));
  phase.steps(run.steps).clip_norm(cell.get_real("clip_norm"))
      .blowup(cell.get_real("divergence_factor") * t.initial_loss, window);
  phase.on_step([&](const StepRecord& r) {
    const ProbeStats& s = t.probe->last();
    losses.push_back(r.loss);
    norms.push_back(r.grad_norm);
    mu.push_back(s.mu_dev);
    var.push_back(s.var_dev);
    shift.push_back(s.pad_mean_shift);
    win.add(r.loss, r.grad_norm);
    const bool log = (r.step + 1) % log_every == 0 || r.step == run.steps - 1;
    if (id && log)
      c.out.add_row(Row(*id)
                        .add("step", r.step + 1)
                        .add("loss", win.loss / win.n)
                        .add("grad_norm", win.grad_norm / win.n)
                        .add("step_lr", r.lr)
                        .add("pad_share", share)
                        .add("mu_dev", s.mu_dev)
                        .add("var_dev", s.var_dev)
                        .add("pad_mean_shift", s.pad_mean_shift),
                    "steps");
    if (log) win.clear();
  });
  phase.state().add("train_rng", train_rng);
  phase.state().add("losses", losses);
  phase.state().add("grad_norms", norms);
  phase.state().add("mu_dev", mu);
  phase.state().add("var_dev", var);
  phase.state().add("pad_shift", shift);
  win.register_state(phase.state());
  t.probe->set_enabled(true);
  t.tr = phase.run(params, *optim, schedule, loss_and_grad);
  t.probe->set_enabled(false);
  t.sum = summarize(losses, norms, mu, var, shift, run.steps, window);
  if (!t.tr.diverged) {
    t.valid_loss = mean_eval_loss(model, valid, B);
    t.tr.check_test_loss(t.valid_loss);
  }
  return t;
}

// choose_lr over lr_grid for the arm of `main` (its norm, batch, padding condition): each trial a
// fresh model trained `pilot_steps` updates (warm-up warmup_fraction of them), judged on the
// validation sets; one row per trial in table pilot, identified as the main run with the chosen
// learning rate. Returns that learning rate.
double pilot(Context& c, const RunSpec& main, const std::vector<double>& shares,
             const std::vector<TaskBatch>& valid, int pilot_steps) {
  RunSpec run = main;
  run.steps = pilot_steps;
  run.warmup_steps = static_cast<int>(std::lround(c.cell.get_real("warmup_fraction") * pilot_steps));
  const std::vector<double> grid = c.cell.get_real_list("lr_grid");
  std::vector<double> val;
  const LrChoice choice = choose_lr(grid, [&](double lr) {
    RunSpec r = run;
    r.lr = lr;
    Trained t = train_mlm(c, r, shares, valid, nullptr);
    const double v = t.tr.diverged ? std::numeric_limits<double>::infinity() : t.valid_loss;
    val.push_back(v);
    return v;
  });
  RunSpec id = main;
  id.lr = choice.lr;
  for (std::size_t k = 0; k < grid.size(); ++k)
    c.out.add_row(id_row(c.cell, id)
                      .add("trial_lr", grid[k])
                      .add("pilot_steps", pilot_steps)
                      .add("val_loss", std::isfinite(val[k]) ? val[k] : kNaN)
                      .add("chosen", k == choice.index ? 1 : 0),
                  "pilot");
  return choice.lr;
}

void main_row(Context& c, const Row& id, const RunSpec& run, const Trained& t) {
  RunOutcome o;
  o.tr = t.tr;
  o.sum = t.sum;
  o.n_params = t.model->num_parameters();
  o.seq_len = c.task.seq_len();
  o.lr_source = "pilot";
  o.initial_loss = t.initial_loss;
  o.baseline_loss = c.baseline;
  o.valid_loss = t.valid_loss;
  add_main_row(c.cell, c.out, id, run, o);
}

// Test rows: every share of `test_shares` (sets from the test split) in the modes `modes`.
void add_eval_rows(Context& c, const Row& id, const RunSpec& run, Trained& t,
                   const std::vector<double>& test_shares, const std::vector<double>& train_shares,
                   const std::vector<std::string>& modes) {
  TransformerModel& model = *t.model;
  // Calibration batches of the run's batch size, calib_examples sequences in all.
  const std::size_t B = run.batch, K = std::max<std::size_t>(1, c.cell.get_size("calib_examples") / B);
  const std::vector<TaskBatch> tests = fixed_sets(c, test_shares, c.cell.get_size("test_size"), kTestStream,
                                                  TextSplit::test);
  auto row = [&](double q, const std::string& mode, const Metrics& m) {
    c.out.add_row(Row(id)
                      .add("test_pad", q)
                      .add("mode", mode)
                      .add("loss", t.tr.diverged ? kNaN : m.loss)
                      .add("accuracy", t.tr.diverged ? kNaN : m.accuracy)
                      .add("n_scored", m.n),
                  "eval");
  };
  const StateDict trained = model.state_dict();
  for (const std::string& mode : modes) {
    if (mode == "eval" || mode == "train") {
      for (std::size_t i = 0; i < tests.size(); ++i) row(test_shares[i], mode, evaluate(model, tests[i], mode == "train", B));
    } else if (mode == "precise") {
      Rng rng(c.cell.stream_seed(kCalibStream));
      std::vector<TaskBatch> calib;
      for (std::size_t k = 0; k < K; ++k) calib.push_back(c.task.sample_mixed(B, train_shares, rng, TextSplit::train));
      calibrate(model, calib);
      for (std::size_t i = 0; i < tests.size(); ++i) row(test_shares[i], mode, evaluate(model, tests[i], false, B));
      model.load_state_dict(trained);
    } else {  // recal: calibrated on the test share's own distribution (train split)
      for (std::size_t i = 0; i < tests.size(); ++i) {
        Rng rng(derive_seed(c.cell.stream_seed(kCalibStream), static_cast<std::uint64_t>(share_key(test_shares[i]))));
        std::vector<TaskBatch> calib;
        for (std::size_t k = 0; k < K; ++k) calib.push_back(c.task.sample(B, test_shares[i], rng, TextSplit::train));
        calibrate(model, calib);
        row(test_shares[i], mode, evaluate(model, tests[i], false, B));
        model.load_state_dict(trained);
      }
    }
  }
}

int pilot_steps(const Cell& cell, int steps) {
  return std::max(1, static_cast<int>(std::lround(cell.get_real("pilot_fraction") * steps)));
}

Context make_context(const Cell& cell, CellOutput& out) {
  auto corpus = cell_corpus(cell);
  MaskedText task(corpus, cell.get_size("seq_len"), cell.get_size("min_len"), cell.get_real("mask_fraction"));
  return Context{cell, out, std::move(task), corpus->unigram_loss(TextSplit::test)};
}

}  // namespace

void run_padding_cell(const Cell& cell, CellOutput& out) {
  Context c = make_context(cell, out);
  const std::size_t B = cell.get_size("bn_batch");
  const int steps = cell.get_int32("bn_steps");
  const std::vector<double> test_shares = cell.get_real_list("test_pads");
  for (const auto& norm : cell.get_string_list("norms"))
    for (double pmax : cell.get_real_list("train_pad_maxes")) {
      const std::vector<double> shares = share_grid(pmax, cell.get_real("pad_step"));
      const std::vector<TaskBatch> valid = fixed_sets(c, shares, cell.get_size("valid_size"), kValidStream,
                                                      TextSplit::valid);
      RunSpec run;
      run.norm = norm;
      run.placement = cell.get_string("bn_placement");
      run.num_layers = cell.get_size("bn_layers");
      run.batch = B;
      run.train_pad_max = pmax;
      run.steps = steps;
      run.warmup_steps = static_cast<int>(std::lround(cell.get_real("warmup_fraction") * steps));
      run.lr = pilot(c, run, shares, valid, pilot_steps(cell, steps));
      const Row id = id_row(cell, run);
      Trained t = train_mlm(c, run, shares, valid, &id);
      main_row(c, id, run, t);
      add_eval_rows(c, id, run, t, test_shares, shares, {"eval", "train", "precise", "recal"});
    }
}

void run_batch_cell(const Cell& cell, CellOutput& out) {
  Context c = make_context(cell, out);
  const std::size_t examples = cell.get_size("examples"), bref = cell.get_size("batch_ref");
  const std::vector<double> shares = {0.0};
  const std::vector<TaskBatch> valid = fixed_sets(c, shares, cell.get_size("valid_size"), kValidStream,
                                                  TextSplit::valid);
  for (const auto& norm : cell.get_string_list("batch_norms")) {
    RunSpec ref;
    ref.norm = norm;
    ref.placement = cell.get_string("bn_placement");
    ref.num_layers = cell.get_size("bn_layers");
    ref.batch = bref;
    ref.steps = static_cast<int>(examples / bref);
    ref.warmup_steps = static_cast<int>(std::lround(cell.get_real("warmup_fraction") * ref.steps));
    const double lr_ref = pilot(c, ref, shares, valid, pilot_steps(cell, ref.steps));
    for (auto b : cell.get_int_list("batch_sizes")) {
      RunSpec r = ref;
      r.batch = static_cast<std::size_t>(b);
      r.steps = static_cast<int>(examples / r.batch);
      r.warmup_steps = static_cast<int>(std::lround(cell.get_real("warmup_fraction") * r.steps));
      r.lr = lr_ref * std::sqrt(static_cast<double>(r.batch) / static_cast<double>(bref));
      const Row id = id_row(cell, r);
      Trained t = train_mlm(c, r, shares, valid, &id);
      main_row(c, id, r, t);
      add_eval_rows(c, id, r, t, shares, shares, {"eval", "train", "precise"});
    }
  }
}

}  // namespace norm_stability

// norm_stability's shared pieces (runs.hpp).
#include "runs.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

namespace norm_stability {

using namespace seqlab;

std::shared_ptr<const TextCorpus> cell_corpus(const Cell& cell) {
  // One corpus per (corpus, unit) per process: a cell's runs, pilots and evaluations share it.
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<const TextCorpus>> cache;
  static std::mutex mu;
  const auto key = std::make_pair(cell.get_string("corpus"), cell.get_string("unit"));
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  TextCorpusOptions o;
  o.corpus = key.first;
  o.unit = parse_text_unit(key.second);
  auto corpus = std::make_shared<const TextCorpus>(TextCorpus::open(o));
  cache.emplace(key, corpus);
  return corpus;
}

ModelConfig model_config(const Cell& cell, const RunSpec& run, const std::string& model,
                         std::size_t vocab_size, std::size_t output_size, long padding_idx) {
  ModelConfig mc;
  mc.model = model;
  mc.input = "embedding";
  mc.vocab_size = vocab_size;
  mc.output_size = output_size;
  mc.head = "per_position";
  mc.embedding_dim = cell.get_size("d_model");
  mc.hidden_size = cell.get_size("d_model");
  mc.num_layers = run.num_layers;
  mc.n_heads = cell.get_size("n_heads");
  mc.d_ff = cell.get_size("d_ff");
  mc.norm = run.norm;
  mc.norm_placement = run.placement;
  mc.positional_encoding = "sinusoidal";
  mc.dropout = 0.0f;  // train mode then differs from eval mode only through the batch statistics
  if (padding_idx >= 0) mc.padding_idx = static_cast<std::int32_t>(padding_idx);
  return mc;
}

LrSchedule make_schedule(const RunSpec& run, const std::string& kind) {
  LrSchedule s;
  s.kind = kind;
  s.base_lr = static_cast<float>(run.lr);
  s.warmup_steps = run.warmup_steps;
  s.total_steps = std::max(run.steps, run.warmup_steps);
  return s;
}

OptimizerConfig optimizer_config(const Cell& cell, double lr) {
  OptimizerConfig oc;
  oc.lr = static_cast<float>(lr);
  oc.beta2 = cell.get_float("adam_beta2");
  oc.weight_decay = cell.get_float("weight_decay");
  return oc;
}

experiment::Row id_row(const Cell& cell, const RunSpec& run) {
  experiment::Row id;
  id.add("experiment", "norm_stability")
      .add("study", cell.get_string("study"))
      .add("norm", run.norm)
      .add("norm_placement", run.placement)
      .add("num_layers", run.num_layers)
      .add("batch", run.batch)
      .add("train_pad_max", run.train_pad_max)
      .add("warmup_steps", run.warmup_steps)
      .add("lr", run.lr)
      .add("seed", cell.replicate);
  return id;
}

RunSummary summarize(const std::vector<double>& losses, const std::vector<double>& grad_norms,
                     const std::vector<double>& mu_dev, const std::vector<double>& var_dev,
                     const std::vector<double>& pad_shift, int steps, std::size_t window) {
  RunSummary r;
  const std::size_t half = static_cast<std::size_t>(steps) / 2;
  double sq = 0, m = 0, v = 0, sh = 0;
  std::size_t n_sq = 0, n = 0;
  for (std::size_t t = half; t < losses.size(); ++t) {
    if (t > 0) {
      const double dl = losses[t] - losses[t - 1];
      sq += dl * dl;
      ++n_sq;
    }
    if (t < mu_dev.size()) {
      m += mu_dev[t];
      v += var_dev[t];
      sh += pad_shift[t];
      ++n;
    }
  }
  if (n_sq > 0) r.loss_volatility = std::sqrt(sq / (2.0 * static_cast<double>(n_sq)));
  if (n > 0) {
    r.mu_dev_late = m / static_cast<double>(n);
    r.var_dev_late = v / static_cast<double>(n);
    r.pad_mean_shift_late = sh / static_cast<double>(n);
  }
  for (std::size_t t = 0; t < mu_dev.size(); ++t) {
    r.mu_dev_max = std::isnan(r.mu_dev_max) ? mu_dev[t] : std::max(r.mu_dev_max, mu_dev[t]);
    r.var_dev_max = std::isnan(r.var_dev_max) ? var_dev[t] : std::max(r.var_dev_max, var_dev[t]);
  }
  if (!losses.empty()) {
    const std::size_t k = std::min<std::size_t>(window, losses.size());
    double s = 0;
    for (std::size_t t = losses.size() - k; t < losses.size(); ++t) s += losses[t];
    r.final_train_loss = s / static_cast<double>(k);
  }
  for (double g : grad_norms) r.grad_norm_max = std::isnan(r.grad_norm_max) ? g : std::max(r.grad_norm_max, g);
  if (!grad_norms.empty()) r.grad_norm_first = grad_norms.front();
  return r;
}

void add_main_row(const Cell& cell, experiment::CellOutput& out, const experiment::Row& id, const RunSpec& run,
                  const RunOutcome& o) {
  const bool failed = o.tr.diverged || !(o.valid_loss < o.baseline_loss - cell.get_real("stall_margin"));
  out.add_row(experiment::Row(id)
                  .add("derived_seed", cell.seed)
                  .add("n_params", o.n_params)
                  .add("d_model", cell.get_int("d_model"))
                  .add("seq_len", o.seq_len)
                  .add("steps", run.steps)
                  .add("examples", static_cast<std::size_t>(run.steps) * run.batch)
                  .add("lr_source", o.lr_source)
                  .add("initial_loss", o.initial_loss)
                  .add("baseline_loss", o.baseline_loss)
                  .add("diverged", o.tr.diverged ? 1 : 0)
                  .add("diverged_step", o.tr.diverged_step)
                  .add("diverged_reason", o.tr.diverged_reason)
                  .add("steps_done", o.tr.steps_done)
                  .add("final_train_loss", o.sum.final_train_loss)
                  .add("valid_loss", o.valid_loss)
                  .add("failed", failed ? 1 : 0)
                  .add("loss_volatility", o.sum.loss_volatility)
                  .add("grad_norm_first", o.sum.grad_norm_first)
                  .add("grad_norm_max", o.sum.grad_norm_max)
                  .add("mu_dev_late", o.sum.mu_dev_late)
                  .add("var_dev_late", o.sum.var_dev_late)
                  .add("mu_dev_max", o.sum.mu_dev_max)
                  .add("var_dev_max", o.sum.var_dev_max)
                  .add("pad_mean_shift_late", o.sum.pad_mean_shift_late)
                  .add("train_time_s", o.tr.train_time_s));
}

void StepWindow::register_state(CheckpointState& state) {
  state.add("win_loss", loss);
  state.add("win_norm", grad_norm);
  state.add("win_n", n);
}

std::int64_t share_key(double p) { return std::llround(p * 1e6); }

std::vector<double> share_grid(double max, double step) {
  std::vector<double> out;
  for (int k = 0;; ++k) {
    const double p = std::round(k * step * 1e9) / 1e9;
    if (p > max + 1e-9) break;
    out.push_back(p);
    if (step <= 0) break;
  }
  return out;
}

}  // namespace norm_stability

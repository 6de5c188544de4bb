// norm_stability: claim 4 of the README — BatchNorm is unstable in Transformers because (1) padding
// pollutes the batch statistics, (2) small batches make them noisy and (3) training and inference
// use different statistics, while LayerNorm has none of these problems; and Pre-LN trains stably
// where Post-LN needs a learning-rate warm-up. Anchors: Shen et al. 2020 (PowerNorm, arXiv
// 2003.07845), Xiong et al. 2020 (arXiv 2002.04745), Wu & He 2018 (GroupNorm, arXiv 1803.08494).
// Claim, method, expected outcome and the CSV columns: README.md beside this file.
//
// Model: a small Transformer encoder classifier (models/ factory, "transformer_encoder"):
// Embedding(V, D, padding_idx 0) + sinusoidal positions -> L encoder layers with the cell's norm
// (layer_norm | batch_norm | masked_batch_norm | rms_norm | none) in the run's placement (pre |
// post) -> per-position Linear(D, K); the class logits are the mean of the per-position logits
// over the real (non-padded) positions (= the head applied to mean-pooled features, the head
// being linear). Key padding goes to the attention and the norms (TransformerModel::set_padding).
// Task: tasks/majority.hpp (variable-length majority classification, right-padded to seq_len,
// padding fraction a parameter). Loss: cross-entropy of the pooled logits.
//
// Grid: study x norm x seeds. The `study` value selects a sub-design, run inside the cell (one
// training run per value of the study's axis), so that the quick grid answers each sub-claim
// without the full product (README.md "Design"):
//   study = batch    one run per batch size in batch_sizes (pad_fraction, norm_placement,
//                    warmup_steps, lr fixed);
//   study = padding  one run per padding fraction in pad_fractions (batch, norm_placement,
//                    warmup_steps, lr fixed);
//   study = warmup   one run per (placement, warm-up, lr) in placements x warmups x lrs (batch,
//                    pad_fraction fixed).
//
// Legend: B batch, T seq_len, D d_model, K n_classes, L num_layers.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/tasks/majority.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

using namespace seqlab;
using namespace seqlab::experiment;

namespace {

constexpr const char* kName = "norm_stability";
// Purposes of the replicate's random streams (Cell::stream_seed): shared by every norm, study and
// run with the same replicate index, so comparisons across the grid are paired.
constexpr std::uint64_t kInitStream = 1;   // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;  // training batches
constexpr std::uint64_t kTestStream = 3;   // the fixed test sets (one per padding fraction)
// Momentum of the reference running statistics kept for norms without their own (file comment of
// ProbedNorm); BatchNorm's default (PyTorch's 0.1).
constexpr double kStatsMomentum = 0.1;

const std::vector<std::string> kNorms = {"layer_norm", "batch_norm", "masked_batch_norm",
                                         "rms_norm", "none"};
const std::vector<std::string> kStudies = {"batch", "padding", "warmup"};

// ---------------------------------------------------------------------------------------------
// Space-separated list keys (the axes of the sub-designs, run inside a cell).

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

[[noreturn]] void bad_list(const std::string& key, const std::string& text, const std::string& why,
                           const std::string& allowed) {
  throw experiment::ConfigError(key + ": invalid value '" + text + "': " + why + "expected " +
                                allowed);
}

/// Space-separated integers in [lo, hi], at least one, no duplicates.
std::vector<std::int64_t> int_list(const Cell& cell, const std::string& key, std::int64_t lo,
                                   std::int64_t hi) {
  const std::string& text = cell.get_string(key);
  const std::string allowed = "space-separated integers in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "], no duplicates";
  const auto words = split_words(text);
  if (words.empty()) bad_list(key, text, "empty list; ", allowed);
  std::vector<std::int64_t> out;
  for (const auto& w : words) {
    std::size_t pos = 0;
    long long v = 0;
    bool ok = !w.empty() && w.size() <= 18 &&
              w.find_first_not_of("0123456789-+") == std::string::npos;
    if (ok) {
      try {
        v = std::stoll(w, &pos);
        ok = pos == w.size();
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok) bad_list(key, text, "'" + w + "' is not an integer; ", allowed);
    if (v < lo || v > hi) bad_list(key, text, "'" + w + "' is out of range; ", allowed);
    if (std::find(out.begin(), out.end(), v) != out.end())
      bad_list(key, text, "'" + w + "' is repeated; ", allowed);
    out.push_back(v);
  }
  return out;
}

/// Space-separated reals in [lo, hi] (lo excluded if lo_open), at least one, no duplicates.
std::vector<double> real_list(const Cell& cell, const std::string& key, double lo, double hi,
                              bool lo_open, const std::string& range_text) {
  const std::string& text = cell.get_string(key);
  const std::string allowed = "space-separated reals in " + range_text + ", no duplicates";
  const auto words = split_words(text);
  if (words.empty()) bad_list(key, text, "empty list; ", allowed);
  std::vector<double> out;
  for (const auto& w : words) {
    double v = 0;
    bool ok = !w.empty() && w.size() <= 40 &&
              w.find_first_not_of("0123456789.eE-+") == std::string::npos;
    if (ok) {
      try {
        std::size_t pos = 0;
        v = std::stod(w, &pos);
        ok = pos == w.size() && std::isfinite(v);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok) bad_list(key, text, "'" + w + "' is not a finite real number; ", allowed);
    if ((lo_open ? v <= lo : v < lo) || v > hi)
      bad_list(key, text, "'" + w + "' is out of range; ", allowed);
    if (std::find(out.begin(), out.end(), v) != out.end())
      bad_list(key, text, "'" + w + "' is repeated; ", allowed);
    out.push_back(v);
  }
  return out;
}

/// Space-separated words from `choices`, at least one, no duplicates.
std::vector<std::string> choice_list(const Cell& cell, const std::string& key,
                                     const std::vector<std::string>& choices) {
  const std::string& text = cell.get_string(key);
  std::string allowed = "space-separated values from ";
  for (std::size_t i = 0; i < choices.size(); ++i) allowed += (i ? "|" : "") + choices[i];
  allowed += ", no duplicates";
  const auto words = split_words(text);
  if (words.empty()) bad_list(key, text, "empty list; ", allowed);
  std::vector<std::string> out;
  for (const auto& w : words) {
    if (std::find(choices.begin(), choices.end(), w) == choices.end())
      bad_list(key, text, "'" + w + "' is not allowed; ", allowed);
    if (std::find(out.begin(), out.end(), w) != out.end())
      bad_list(key, text, "'" + w + "' is repeated; ", allowed);
    out.push_back(w);
  }
  return out;
}

constexpr std::int64_t kMaxBatch = 4096;
constexpr std::int64_t kMaxSteps = 100000000;

// ---------------------------------------------------------------------------------------------
// The runs of a cell.

struct RunSpec {
  std::string norm;
  std::string placement;
  std::size_t batch = 0;
  double pad_fraction = 0;
  int warmup_steps = 0;
  double lr = 0;
};

std::vector<RunSpec> runs_of(const Cell& cell) {
  RunSpec base;
  base.norm = cell.get_string("norm");
  base.placement = cell.get_string("norm_placement");
  base.batch = cell.get_size("batch");
  base.pad_fraction = cell.get_real("pad_fraction");
  base.warmup_steps = cell.get_int32("warmup_steps");
  base.lr = cell.get_real("lr");
  const std::string& study = cell.get_string("study");
  std::vector<RunSpec> runs;
  if (study == "batch") {
    for (auto b : int_list(cell, "batch_sizes", 1, kMaxBatch)) {
      RunSpec r = base;
      r.batch = static_cast<std::size_t>(b);
      runs.push_back(r);
    }
  } else if (study == "padding") {
    for (double p : real_list(cell, "pad_fractions", 0.0, 0.95, false, "[0, 0.95]")) {
      RunSpec r = base;
      r.pad_fraction = p;
      runs.push_back(r);
    }
  } else {  // warmup
    const auto placements = choice_list(cell, "placements", {"pre", "post"});
    const auto warmups = int_list(cell, "warmups", 0, kMaxSteps);
    const auto lrs = real_list(cell, "lrs", 0.0, 10.0, true, "(0, 10]");
    for (const auto& pl : placements)
      for (auto w : warmups)
        for (double lr : lrs) {
          RunSpec r = base;
          r.placement = pl;
          r.warmup_steps = static_cast<int>(w);
          r.lr = lr;
          runs.push_back(r);
        }
  }
  return runs;
}

ModelConfig model_config(const Cell& cell, const RunSpec& run, const MajorityTask& task) {
  ModelConfig mc;
  mc.model = "transformer_encoder";
  mc.input = "embedding";
  mc.vocab_size = static_cast<std::size_t>(task.vocab_size());
  mc.embedding_dim = cell.get_size("d_model");
  mc.hidden_size = cell.get_size("d_model");
  mc.num_layers = cell.get_size("num_layers");
  mc.n_heads = cell.get_size("n_heads");
  mc.d_ff = cell.get_size("d_ff");
  mc.norm = run.norm;
  mc.norm_placement = run.placement;
  mc.positional_encoding = "sinusoidal";
  mc.dropout = 0.0f;  // train mode then differs from eval mode only through BatchNorm
  mc.output_size = static_cast<std::size_t>(task.n_classes());
  mc.head = "per_position";
  mc.padding_idx = MajorityTask::pad_id();
  return mc;
}

MajorityTask make_task(const Cell& cell, double pad_fraction) {
  return MajorityTask(cell.get_int32("seq_len"), pad_fraction, cell.get_int32("n_classes"),
                      cell.get_int32("n_noise"), cell.get_int32("min_len"));
}

LrSchedule make_schedule(const Cell& cell, const RunSpec& run) {
  LrSchedule s;
  s.kind = cell.get_string("schedule");
  s.base_lr = static_cast<float>(run.lr);
  s.warmup_steps = run.warmup_steps;
  s.total_steps = cell.get_int32("steps");
  return s;
}

// ---------------------------------------------------------------------------------------------
// The probe on the first norm layer (layers.0.norm1).

/// Statistics of one training step at the probed norm, over its input x [B, T, D]:
///   mu_dev  = (1/D)·‖μ_B − μ_run‖₂,  var_dev = (1/D)·‖σ²_B − σ²_run‖₂   (Shen et al. 2020 §3,
///             Fig. 2: the average Euclidean distance between batch and running statistics);
///   BatchNorm (batch_norm, masked_batch_norm): μ_B, σ²_B = the layer's own batch statistics of
///             this step (last_batch_stats: biased variance, the one it normalised with), μ_run,
///             σ²_run = its running statistics BEFORE this step's update (what eval mode uses);
///   other norms: the same quantities computed on the same input for comparison — μ_B, σ²_B over
///             the non-padded positions (what masked_batch_norm would use), μ_run, σ²_run an
///             exponential average of them kept by the probe exactly as BatchNorm keeps its
///             running statistics (momentum 0.1, unbiased variance, start 0 and 1);
///   pad_mean_shift = (1/D)·‖μ_all − μ_real‖₂, pad_var_shift = (1/D)·‖σ²_all − σ²_real‖₂: how far
///             the statistics over ALL positions (naive batch_norm's) are from those over the real
///             positions only — the pollution by padding, for every norm (0 without padding);
///   stat_count = positions entering μ_B (BatchNorm: its count; others: the real positions),
///   n_real = non-padded positions of the batch.
struct ProbeStats {
  double mu_dev = NAN, var_dev = NAN, pad_mean_shift = NAN, pad_var_shift = NAN;
  std::size_t stat_count = 0, n_real = 0;
};

/// Wraps a Norm, delegating everything to it, and measures ProbeStats on train-mode forwards
/// while enabled. Parameters are the wrapped norm's (same keys, same objects).
class ProbedNorm : public Norm {
 public:
  explicit ProbedNorm(std::unique_ptr<Norm> inner)
      : inner_(std::move(inner)), bn_(dynamic_cast<BatchNorm*>(inner_.get())) {
    const std::size_t d = inner_->dim();
    ref_mean_.assign(d, 0.0);
    ref_var_.assign(d, 1.0);
  }

  Tensor3 forward(const Tensor3& x, const PaddingMask* padding) override {
    if (!enabled_ || !training()) return inner_->forward(x, padding);
    const std::size_t B = x.shape()[0], T = x.shape()[1], D = x.shape()[2];
    std::vector<double> mean_all(D, 0.0), mean_real(D, 0.0), var_all(D, 0.0), var_real(D, 0.0);
    std::size_t n_real = 0;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < T; ++t) {
        const bool real = padding == nullptr || (*padding)(b, t) == 0;
        n_real += real;
        const float* row = x.data() + (b * T + t) * D;
        for (std::size_t c = 0; c < D; ++c) {
          mean_all[c] += row[c];
          if (real) mean_real[c] += row[c];
        }
      }
    const double n_all = static_cast<double>(B * T);
    for (std::size_t c = 0; c < D; ++c) {
      mean_all[c] /= n_all;
      mean_real[c] /= std::max<double>(1.0, static_cast<double>(n_real));
    }
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < T; ++t) {
        const bool real = padding == nullptr || (*padding)(b, t) == 0;
        const float* row = x.data() + (b * T + t) * D;
        for (std::size_t c = 0; c < D; ++c) {
          const double da = row[c] - mean_all[c];
          var_all[c] += da * da;
          if (real) {
            const double dr = row[c] - mean_real[c];
            var_real[c] += dr * dr;
          }
        }
      }
    for (std::size_t c = 0; c < D; ++c) {
      var_all[c] /= n_all;
      var_real[c] /= std::max<double>(1.0, static_cast<double>(n_real));
    }
    std::vector<double> run_mean(D), run_var(D);
    if (bn_) {
      for (std::size_t c = 0; c < D; ++c) {
        run_mean[c] = bn_->running_mean(c);
        run_var[c] = bn_->running_var(c);
      }
    } else {
      run_mean = ref_mean_;
      run_var = ref_var_;
    }
    Tensor3 y = inner_->forward(x, padding);
    std::vector<double> bmean(D), bvar(D);
    std::size_t count = n_real;
    if (bn_) {
      const auto& s = bn_->last_batch_stats();
      for (std::size_t c = 0; c < D; ++c) {
        bmean[c] = s.mean(c);
        bvar[c] = s.var(c);
      }
      count = s.count;
    } else {
      bmean = mean_real;
      bvar = var_real;
      // The reference running statistics, updated as BatchNorm updates its own.
      const double unbias = n_real > 1 ? static_cast<double>(n_real) / (n_real - 1) : 1.0;
      for (std::size_t c = 0; c < D; ++c) {
        ref_mean_[c] = (1 - kStatsMomentum) * ref_mean_[c] + kStatsMomentum * mean_real[c];
        ref_var_[c] = (1 - kStatsMomentum) * ref_var_[c] + kStatsMomentum * var_real[c] * unbias;
      }
    }
    double dm = 0, dv = 0, sm = 0, sv = 0;
    for (std::size_t c = 0; c < D; ++c) {
      dm += (bmean[c] - run_mean[c]) * (bmean[c] - run_mean[c]);
      dv += (bvar[c] - run_var[c]) * (bvar[c] - run_var[c]);
      sm += (mean_all[c] - mean_real[c]) * (mean_all[c] - mean_real[c]);
      sv += (var_all[c] - var_real[c]) * (var_all[c] - var_real[c]);
    }
    const double d = static_cast<double>(D);
    last_ = {std::sqrt(dm) / d, std::sqrt(dv) / d, std::sqrt(sm) / d, std::sqrt(sv) / d, count,
             n_real};
    return y;
  }
  Tensor3 backward(const Tensor3& dy) override { return inner_->backward(dy); }
  Tensor3 backward_add(const Tensor3& dy, const Tensor3& residual) override {
    return inner_->backward_add(dy, residual);
  }
  std::string name() const override { return inner_->name(); }
  std::size_t dim() const override { return inner_->dim(); }
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override {
    inner_->collect_parameters(prefix, out);
  }
  void set_training(bool training) override {
    Module::set_training(training);
    inner_->set_training(training);
  }
  /// The wrapped norm's buffers (same keys), plus the reference running statistics of the real
  /// positions ("probe_ref_mean", "probe_ref_var" [D]) that training updates.
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override {
    inner_->collect_buffers(prefix, out);
    out.push_back({prefix + "probe_ref_mean", &ref_mean_});
    out.push_back({prefix + "probe_ref_var", &ref_var_});
  }

  void set_enabled(bool on) { enabled_ = on; }
  const ProbeStats& last() const { return last_; }
  Norm* inner() { return inner_.get(); }

 private:
  std::unique_ptr<Norm> inner_;
  BatchNorm* bn_;
  bool enabled_ = false;
  std::vector<double> ref_mean_, ref_var_;
  ProbeStats last_;
};

std::vector<BatchNorm*> batch_norms(TransformerModel& m) {
  std::vector<BatchNorm*> out;
  auto add = [&](Norm* n) {
    if (auto* p = dynamic_cast<ProbedNorm*>(n)) n = p->inner();
    if (auto* bn = dynamic_cast<BatchNorm*>(n)) out.push_back(bn);
  };
  for (auto& layer : m.layers) {
    add(layer->norm1.get());
    add(layer->norm2.get());
  }
  if (m.final_norm) add(m.final_norm.get());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Pooling, evaluation.

/// logits [B, T, K] -> class logits [B, K]: mean over the real positions t < lengths(b).
Tensor2 pool(const Tensor3& logits, const IndexTensor1& lengths) {
  const std::size_t B = logits.shape()[0], T = logits.shape()[1], K = logits.shape()[2];
  Tensor2 out = xt::zeros<float>({B, K});
  for (std::size_t b = 0; b < B; ++b) {
    const std::size_t L = static_cast<std::size_t>(lengths(b));
    for (std::size_t k = 0; k < K; ++k) {
      double s = 0;
      for (std::size_t t = 0; t < L && t < T; ++t) s += logits(b, t, k);
      out(b, k) = static_cast<float>(s / static_cast<double>(L));
    }
  }
  return out;
}

/// d(class logits) [B, K] -> d(logits) [B, T, K]: d/L_b at real positions, 0 at padded ones.
Tensor3 unpool(const Tensor2& d, const IndexTensor1& lengths, std::size_t T) {
  const std::size_t B = d.shape()[0], K = d.shape()[1];
  Tensor3 out = xt::zeros<float>({B, T, K});
  for (std::size_t b = 0; b < B; ++b) {
    const std::size_t L = static_cast<std::size_t>(lengths(b));
    for (std::size_t t = 0; t < L && t < T; ++t)
      for (std::size_t k = 0; k < K; ++k) out(b, t, k) = d(b, k) / static_cast<float>(L);
  }
  return out;
}

/// Rows [b0, b0 + n) of a batch.
PaddedClassificationBatch slice(const PaddedClassificationBatch& all, std::size_t b0, std::size_t n) {
  const std::size_t T = all.inputs.shape()[1];
  PaddedClassificationBatch s{IndexTensor2::from_shape({n, T}), PaddingMask::from_shape({n, T}),
                              IndexTensor1::from_shape({n}), IndexTensor1::from_shape({n})};
  std::copy(all.inputs.data() + b0 * T, all.inputs.data() + (b0 + n) * T, s.inputs.data());
  std::copy(all.padding.data() + b0 * T, all.padding.data() + (b0 + n) * T, s.padding.data());
  std::copy(all.labels.data() + b0, all.labels.data() + b0 + n, s.labels.data());
  std::copy(all.lengths.data() + b0, all.lengths.data() + b0 + n, s.lengths.data());
  return s;
}

struct Metrics {
  double accuracy = NAN;  // fraction of sequences whose argmax class is the label
  double loss = NAN;      // mean cross-entropy, nats
};

/// The model on `test`, in chunks of `chunk` sequences (the training batch size), in train mode
/// (BatchNorm normalises with the statistics of each chunk, as in training; its running statistics
/// are restored afterwards) or eval mode (running statistics). Both modes use the same chunks, so
/// for norms without batch statistics they are the same computation, bit for bit. A sequence with
/// a non-finite class logit counts as wrong. Leaves the model in train mode.
Metrics evaluate(TransformerModel& model, ProbedNorm& probe, const PaddedClassificationBatch& test,
                 bool train_mode, std::size_t chunk) {
  struct Saved {
    Tensor1 mean, var;
    std::int64_t n;
  };
  std::vector<BatchNorm*> bns = batch_norms(model);
  std::vector<Saved> saved;
  for (auto* bn : bns) saved.push_back({bn->running_mean, bn->running_var, bn->num_batches_tracked});
  probe.set_enabled(false);
  model.set_training(train_mode);
  const std::size_t n = test.labels.shape()[0];
  const std::size_t step = chunk;
  CrossEntropyLoss ce;
  double loss_sum = 0;
  std::size_t correct = 0;
  for (std::size_t b0 = 0; b0 < n; b0 += step) {
    const std::size_t nb = std::min(step, n - b0);
    const PaddedClassificationBatch s = slice(test, b0, nb);
    model.set_padding(&s.padding);
    const Tensor2 logits = pool(model.forward(s.inputs), s.lengths);
    model.set_padding(nullptr);
    ce.forward(logits, s.labels);
    const Tensor1& rl = ce.row_losses();
    for (std::size_t b = 0; b < nb; ++b) {
      loss_sum += rl(b);
      bool finite = true;
      std::size_t arg = 0;  // first maximum, as torch.argmax
      for (std::size_t k = 0; k < logits.shape()[1]; ++k) {
        finite = finite && std::isfinite(logits(b, k));
        if (logits(b, k) > logits(b, arg)) arg = k;
      }
      if (finite && static_cast<std::int32_t>(arg) == s.labels(b)) ++correct;
    }
  }
  for (std::size_t i = 0; i < bns.size(); ++i) {
    bns[i]->running_mean = saved[i].mean;
    bns[i]->running_var = saved[i].var;
    bns[i]->num_batches_tracked = saved[i].n;
  }
  model.set_training(true);
  return {static_cast<double>(correct) / static_cast<double>(n), loss_sum / static_cast<double>(n)};
}

/// Thrown from the step callback when the smoothed loss exceeds the blow-up threshold.
struct LossBlowup {
  int step;
};

/// Key of a padding fraction for maps and test-set seeds (micro-units, exact for the configured
/// values).
std::int64_t pad_key(double p) { return std::llround(p * 1e6); }

// ---------------------------------------------------------------------------------------------

void validate(const Cell& cell) {
  const auto runs = runs_of(cell);  // parses this study's lists (ConfigError naming the key)
  // Every list key is checked, whichever study the cell has, so a typo fails before any cell runs.
  int_list(cell, "batch_sizes", 1, kMaxBatch);
  real_list(cell, "pad_fractions", 0.0, 0.95, false, "[0, 0.95]");
  choice_list(cell, "placements", {"pre", "post"});
  int_list(cell, "warmups", 0, kMaxSteps);
  real_list(cell, "lrs", 0.0, 10.0, true, "(0, 10]");
  const auto eval_pads = real_list(cell, "eval_pad_fractions", 0.0, 0.95, false, "[0, 0.95]");
  const auto steps = cell.get_int("steps");
  for (const auto& r : runs) {
    if (r.warmup_steps > steps)
      throw experiment::ConfigError(
          std::string(cell.get_string("study") == "warmup" ? "warmups" : "warmup_steps") +
          ": invalid value '" + std::to_string(r.warmup_steps) + "': expected an integer <= steps (" +
          std::to_string(steps) + ")");
    make_schedule(cell, r).validate();
  }
  if (cell.get_int("min_len") > cell.get_int("seq_len"))
    throw experiment::ConfigError("min_len: invalid value '" + cell.params.text("min_len") +
                                  "': expected an integer <= seq_len (" +
                                  cell.params.text("seq_len") + ")");
  // Every padding fraction must give lengths of at least min_len for this seq_len.
  std::vector<std::pair<std::string, double>> pads = {{"pad_fraction", cell.get_real("pad_fraction")}};
  for (const auto& r : runs) pads.push_back({"pad_fractions", r.pad_fraction});
  for (double p : eval_pads) pads.push_back({"eval_pad_fractions", p});
  for (const auto& [key, p] : pads) {
    try {
      (void)make_task(cell, p);
    } catch (const std::invalid_argument& e) {
      std::string what = e.what();
      const std::string prefix = "MajorityTask: ";
      if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
      // "pad_fraction = 0.9: the mean length ..." -> name the key the value came from.
      if (what.rfind("pad_fraction", 0) == 0) what = key + what.substr(std::string("pad_fraction").size());
      throw experiment::ConfigError(what);
    }
  }
  const MajorityTask task = make_task(cell, cell.get_real("pad_fraction"));
  for (const auto& r : runs) model_config(cell, r, task).validate();  // e.g. n_heads ∤ d_model
}

void run_one(const Cell& cell, const RunSpec& run, std::size_t run_index, CellOutput& out) {
  const int steps = cell.get_int32("steps");
  const int log_every = cell.get_int32("log_every");
  const std::size_t B = run.batch;
  const std::size_t T = cell.get_size("seq_len");
  const MajorityTask task = make_task(cell, run.pad_fraction);

  Rng init_rng(cell.stream_seed(kInitStream));
  std::unique_ptr<SequenceModel> model_ptr = make_model(model_config(cell, run, task), init_rng);
  auto* model = dynamic_cast<TransformerModel*>(model_ptr.get());
  if (model == nullptr) throw std::logic_error("norm_stability: make_model did not build a TransformerModel");
  auto& layer0 = *model->layers.at(0);
  auto probe_owner = std::make_unique<ProbedNorm>(std::move(layer0.norm1));
  ProbedNorm& probe = *probe_owner;
  layer0.norm1 = std::move(probe_owner);
  model->train();
  const std::vector<Parameter*> params = model->parameters();

  OptimizerConfig oc;
  oc.lr = static_cast<float>(run.lr);
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);
  const LrSchedule schedule = make_schedule(cell, run);

  // Test sets: one per padding fraction, each from its own stream so that the set for a given
  // fraction is the same in every run and study of this replicate.
  std::vector<double> eval_pads = real_list(cell, "eval_pad_fractions", 0.0, 0.95, false, "");
  std::map<std::int64_t, PaddedClassificationBatch> tests;
  auto test_set = [&](double p) -> const PaddedClassificationBatch& {
    auto it = tests.find(pad_key(p));
    if (it != tests.end()) return it->second;
    Rng rng(derive_seed(cell.stream_seed(kTestStream), static_cast<std::uint64_t>(pad_key(p))));
    return tests.emplace(pad_key(p), make_task(cell, p).sample(cell.get_size("test_size"), rng))
        .first->second;
  };

  Row id;
  id.add("experiment", kName)
      .add("study", cell.get_string("study"))
      .add("norm", run.norm)
      .add("norm_placement", run.placement)
      .add("batch", B)
      .add("pad_fraction", run.pad_fraction)
      .add("warmup_steps", run.warmup_steps)
      .add("lr", run.lr)
      .add("seed", cell.replicate);

  // Initial loss (train mode, chunks of B: what the first updates see, averaged over the test set).
  const double initial_loss = evaluate(*model, probe, test_set(run.pad_fraction), true, B).loss;
  const double blowup_loss = cell.get_real("divergence_factor") * initial_loss;
  const std::size_t window = cell.get_size("divergence_window");

  Rng train_rng(cell.stream_seed(kTrainStream));
  PaddedClassificationBatch cur;  // alive through forward and backward
  CrossEntropyLoss ce;
  auto loss_and_grad = [&](int /*step*/) -> double {
    cur = task.sample(B, train_rng);
    model->set_padding(&cur.padding);
    const Tensor3 logits = model->forward(cur.inputs);
    const double loss = ce.forward(pool(logits, cur.lengths), cur.labels);
    model->backward(unpool(ce.backward(), cur.lengths, T));
    return loss;
  };
  std::vector<double> losses, grad_norms;
  std::vector<ProbeStats> stats;
  std::deque<double> recent;
  double recent_sum = 0;
  auto on_step = [&](const StepRecord& r) {
    losses.push_back(r.loss);
    grad_norms.push_back(r.grad_norm);
    stats.push_back(probe.last());
    const ProbeStats& s = stats.back();
    if (r.step % log_every == 0 || r.step == steps - 1) {
      out.add_row(Row(id)
                      .add("step", r.step)
                      .add("loss", r.loss)
                      .add("grad_norm", r.grad_norm)
                      .add("step_lr", r.lr)
                      .add("mu_dev", s.mu_dev)
                      .add("var_dev", s.var_dev)
                      .add("pad_mean_shift", s.pad_mean_shift)
                      .add("pad_var_shift", s.pad_var_shift)
                      .add("stat_count", s.stat_count)
                      .add("n_real", s.n_real),
                  "steps");
    }
    recent.push_back(r.loss);
    recent_sum += r.loss;
    if (recent.size() > window) {
      recent_sum -= recent.front();
      recent.pop_front();
    }
    if (recent.size() == window && recent_sum / static_cast<double>(window) > blowup_loss)
      throw LossBlowup{r.step};
  };

  TrainOptions topt;
  topt.steps = steps;
  topt.clip_norm = cell.get_real("clip_norm");
  topt.quiet = cell.quiet;
  topt.label = cell.get_string("study") + " " + run.norm + " seed " + std::to_string(cell.replicate);
  // --checkpoint-every: one checkpoint per run of the cell ("run<i>"). The steps change the model
  // (with the probe's reference statistics, ProbedNorm::collect_buffers), the optimizer, the
  // training data stream, the per-step histories, the blow-up window and the "steps" rows.
  topt.checkpoint = cell_checkpoint(cell, "run" + std::to_string(run_index), model, out);
  topt.checkpoint.state.add("train_rng", train_rng);
  topt.checkpoint.state.add("losses", losses);
  topt.checkpoint.state.add("grad_norms", grad_norms);
  topt.checkpoint.state.add_trivial_vector("stats", stats);
  topt.checkpoint.state.add("recent", recent);
  topt.checkpoint.state.add("recent_sum", recent_sum);
  probe.set_enabled(true);
  const auto t0 = std::chrono::steady_clock::now();
  TrainResult tr;
  std::string reason = "none";
  try {
    tr = train_loop(topt, params, *optim, schedule, loss_and_grad, on_step);
    if (tr.diverged) reason = "non_finite";
  } catch (const LossBlowup& e) {
    tr.diverged = true;
    tr.diverged_step = e.step;
    tr.steps_done = e.step + 1;  // that step's update was applied before the check
    tr.last_loss = losses.back();
    reason = "loss_blowup";
  }
  const double train_time =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  probe.set_enabled(false);
  model->set_padding(nullptr);

  // Per-run summaries over the second half of the planned steps (the steps done in it).
  const std::size_t half = static_cast<std::size_t>(steps) / 2;
  double vol = NAN, mu_late = NAN, var_late = NAN, shift_late = NAN;
  {
    double sq = 0, m = 0, v = 0, sh = 0;
    std::size_t n_sq = 0, n = 0;
    for (std::size_t t = half; t < losses.size(); ++t) {
      if (t > 0) {
        const double dl = losses[t] - losses[t - 1];
        sq += dl * dl;
        ++n_sq;
      }
      m += stats[t].mu_dev;
      v += stats[t].var_dev;
      sh += stats[t].pad_mean_shift;
      ++n;
    }
    if (n_sq > 0) vol = std::sqrt(sq / (2.0 * static_cast<double>(n_sq)));
    if (n > 0) {
      mu_late = m / n;
      var_late = v / n;
      shift_late = sh / n;
    }
  }
  double final_train_loss = NAN;
  if (!losses.empty()) {
    const std::size_t k = std::min<std::size_t>(window, losses.size());
    double s = 0;
    for (std::size_t t = losses.size() - k; t < losses.size(); ++t) s += losses[t];
    final_train_loss = s / static_cast<double>(k);
  }
  double grad_norm_max = NAN;
  for (double g : grad_norms) grad_norm_max = std::isnan(grad_norm_max) ? g : std::max(grad_norm_max, g);
  const double grad_norm_first = grad_norms.empty() ? NAN : grad_norms.front();
  // Failed = diverged, or stalled: the final training loss is still above stall_fraction times
  // the initial loss (a collapse to the chance plateau, Post-LN's usual failure at a high lr).
  const bool failed = tr.diverged || !(final_train_loss <= cell.get_real("stall_fraction") * initial_loss);

  // Evaluation: train mode (batch statistics, chunks of B) and eval mode (running statistics),
  // on the training padding fraction and on every eval_pad_fractions value.
  std::map<std::pair<std::int64_t, bool>, Metrics> metrics;
  auto metric = [&](double p, bool train_mode) {
    const auto key = std::make_pair(pad_key(p), train_mode);
    auto it = metrics.find(key);
    if (it == metrics.end())
      it = metrics.emplace(key, evaluate(*model, probe, test_set(p), train_mode, B)).first;
    return it->second;
  };
  const Metrics tm = metric(run.pad_fraction, true), em = metric(run.pad_fraction, false);
  for (double q : eval_pads)
    for (bool train_mode : {true, false}) {
      const Metrics m = metric(q, train_mode);
      out.add_row(Row(id)
                      .add("eval_pad_fraction", q)
                      .add("mode", train_mode ? "train" : "eval")
                      .add("accuracy", m.accuracy)
                      .add("loss", m.loss),
                  "eval");
    }

  out.add_row(Row(id)
                  .add("derived_seed", cell.seed)
                  .add("n_params", model->num_parameters())
                  .add("d_model", cell.get_int("d_model"))
                  .add("num_layers", cell.get_int("num_layers"))
                  .add("seq_len", cell.get_int("seq_len"))
                  .add("steps", steps)
                  .add("expected_pad_fraction", task.expected_pad_fraction())
                  .add("initial_loss", initial_loss)
                  .add("blowup_loss", blowup_loss)
                  .add("diverged", tr.diverged ? 1 : 0)
                  .add("diverged_step", tr.diverged_step)
                  .add("diverged_reason", reason)
                  .add("steps_done", tr.steps_done)
                  .add("final_train_loss", final_train_loss)
                  .add("failed", failed ? 1 : 0)
                  .add("loss_volatility", vol)
                  .add("grad_norm_first", grad_norm_first)
                  .add("grad_norm_max", grad_norm_max)
                  .add("mu_dev_late", mu_late)
                  .add("var_dev_late", var_late)
                  .add("pad_mean_shift_late", shift_late)
                  .add("acc_train_mode", tm.accuracy)
                  .add("acc_eval_mode", em.accuracy)
                  .add("train_eval_gap", tm.accuracy - em.accuracy)
                  .add("loss_train_mode", tm.loss)
                  .add("loss_eval_mode", em.loss)
                  .add("chance_accuracy", task.chance_accuracy())
                  .add("train_time_s", train_time));
}

void run_cell(const Cell& cell, CellOutput& out) {
  const std::vector<RunSpec> runs = runs_of(cell);
  for (std::size_t i = 0; i < runs.size(); ++i) run_one(cell, runs[i], i, out);
}

}  // namespace

int main(int argc, char** argv) {
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 4 (README.md claims table): BatchNorm is unstable in Transformers (padding pollutes "
      "its batch statistics, small batches make them noisy, train and inference statistics "
      "differ) while LayerNorm is not; Pre-LN trains stably where Post-LN needs a warm-up. "
      "Trains a small Transformer encoder classifier on variable-length majority classification "
      "(padded to seq_len) with each norm; the study key selects a sub-design run inside each "
      "cell: batch (a run per batch_sizes value), padding (per pad_fractions value) or warmup "
      "(per placements x warmups x lrs). Reports loss, gradient norm and PowerNorm's "
      "batch-statistics deviation per step, and per run train-/eval-mode accuracy, divergence, "
      "loss volatility and accuracy at other padding fractions.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("study", {"batch", "padding", "warmup"},
                   "sub-design run inside each cell: batch | padding | warmup (README.md)")
          .one_of(kStudies),
      string_sweep("norm", kNorms, "normalisation layer of every Transformer layer (and the "
                                   "final norm of pre-norm)")
          .one_of(norm_names()),
      string_option("norm_placement", "post",
                    "placement in the batch and padding studies (post: Vaswani et al.; pre: "
                    "Xiong et al.)")
          .one_of({"pre", "post"}),
      int_option("batch", 16, "sequences", "batch size in the padding and warmup studies")
          .at_least(1)
          .at_most(kMaxBatch),
      real_option("pad_fraction", 0.25, "1",
                  "expected fraction of padded positions in the batch and warmup studies")
          .at_least(0)
          .at_most(0.95),
      int_option("warmup_steps", 30, "updates",
                 "linear warm-up length in the batch and padding studies")
          .at_least(0)
          .at_most(kMaxSteps),
      real_option("lr", 2e-3, "1", "peak learning rate in the batch and padding studies")
          .greater_than(0)
          .at_most(10),
      string_option("batch_sizes", "1 2 4 8 32",
                    "batch study: space-separated batch sizes (one run each)"),
      string_option("pad_fractions", "0 0.25 0.5",
                    "padding study: space-separated padding fractions (one run each)"),
      string_option("placements", "pre post",
                    "warmup study: space-separated norm placements from pre|post"),
      string_option("warmups", "0 100", "warmup study: space-separated warm-up lengths (updates)"),
      string_option("lrs", "0.003 0.03", "warmup study: space-separated peak learning rates"),
      string_option("eval_pad_fractions", "0 0.25 0.5",
                    "padding fractions of the extra test sets every run is evaluated on"),
      int_option("seq_len", 32, "tokens", "padded length T").at_least(2).at_most(4096),
      int_option("min_len", 4, "tokens", "shortest real length allowed (>= 2: BatchNorm needs "
                                         "two positions)")
          .at_least(2)
          .at_most(4096),
      int_option("n_classes", 8, "classes", "K class tokens (labels)").at_least(2).at_most(1000),
      int_option("n_noise", 4, "tokens", "M distractor tokens").at_least(0).at_most(1000),
      int_option("d_model", 32, "units", "model width D").at_least(1).at_most(4096),
      int_option("n_heads", 4, "heads", "attention heads (divide d_model)").at_least(1).at_most(256),
      int_option("d_ff", 64, "units", "feed-forward inner size").at_least(1).at_most(16384),
      int_option("num_layers", 2, "layers", "encoder layers L").at_least(1).at_most(64),
      int_option("steps", 300, "updates", "optimizer updates per run").at_least(1).at_most(kMaxSteps),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0, "1", "weight decay (L2 for adam/sgd, decoupled for adamw)")
          .at_least(0)
          .at_most(10),
      real_option("clip_norm", 0, "1", "max global gradient norm; 0 disables clipping (default: "
                                       "off, so instability shows)")
          .at_least(0),
      string_option("schedule", "cosine", "learning-rate schedule after the warm-up")
          .one_of({"constant", "cosine"}),
      int_option("test_size", 256, "sequences", "size of each fixed test set").at_least(1).at_most(1000000),
      real_option("divergence_factor", 3, "1",
                  "diverged when the mean loss of the last divergence_window updates exceeds this "
                  "multiple of the initial loss")
          .greater_than(1)
          .at_most(1e6),
      real_option("stall_fraction", 0.9, "1",
                  "failed (stalled) when the final training loss is above this fraction of the "
                  "initial loss")
          .greater_than(0)
          .at_most(1),
      int_option("divergence_window", 10, "updates", "window of the loss blow-up test")
          .at_least(1)
          .at_most(100000),
      int_option("log_every", 5, "updates", "a row of the steps table every this many updates")
          .at_least(1)
          .at_most(kMaxSteps),
  };
  const std::vector<std::string> ids = {"experiment", "study", "norm", "norm_placement", "batch",
                                        "pad_fraction", "warmup_steps", "lr", "seed"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> c = ids;
    c.insert(c.end(), more.begin(), more.end());
    return c;
  };
  spec.tables = {
      {kMainTable,
       with({"derived_seed", "n_params", "d_model", "num_layers", "seq_len", "steps",
             "expected_pad_fraction", "initial_loss", "blowup_loss", "diverged", "diverged_step",
             "diverged_reason", "steps_done", "final_train_loss", "failed", "loss_volatility",
             "grad_norm_first", "grad_norm_max", "mu_dev_late", "var_dev_late",
             "pad_mean_shift_late", "acc_train_mode", "acc_eval_mode", "train_eval_gap",
             "loss_train_mode", "loss_eval_mode", "chance_accuracy", "train_time_s"})},
      {"steps", with({"step", "loss", "grad_norm", "step_lr", "mu_dev", "var_dev",
                      "pad_mean_shift", "pad_var_shift", "stat_count", "n_real"})},
      {"eval", with({"eval_pad_fraction", "mode", "accuracy", "loss"})},
  };
  spec.default_seeds = 3;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

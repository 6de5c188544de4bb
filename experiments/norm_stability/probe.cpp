// norm_stability's probe on the first norm layer (probe.hpp).
#include "probe.hpp"

#include <algorithm>
#include <utility>

namespace norm_stability {

using namespace seqlab;

namespace {

// Momentum of the reference running statistics kept for norms without their own (ProbeStats);
// BatchNorm's default (PyTorch's 0.1).
constexpr double kStatsMomentum = 0.1;

}  // namespace

ProbedNorm::ProbedNorm(std::unique_ptr<Norm> inner)
    : inner_(std::move(inner)), bn_(dynamic_cast<BatchNorm*>(inner_.get())) {
  const std::size_t d = inner_->dim();
  ref_mean_.assign(d, 0.0);
  ref_var_.assign(d, 1.0);
}

Tensor3 ProbedNorm::forward(const Tensor3& x, const PaddingMask* padding) {
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
  last_ = {std::sqrt(dm) / d, std::sqrt(dv) / d, std::sqrt(sm) / d, std::sqrt(sv) / d, count, n_real};
  return y;
}

void ProbedNorm::set_training(bool training) {
  Module::set_training(training);
  inner_->set_training(training);
}

void ProbedNorm::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  inner_->collect_buffers(prefix, out);
  out.push_back({prefix + "probe_ref_mean", &ref_mean_});
  out.push_back({prefix + "probe_ref_var", &ref_var_});
}

ProbedNorm& install_probe(TransformerModel& model) {
  auto& layer0 = *model.layers.at(0);
  auto owner = std::make_unique<ProbedNorm>(std::move(layer0.norm1));
  ProbedNorm& probe = *owner;
  layer0.norm1 = std::move(owner);
  return probe;
}

}  // namespace norm_stability

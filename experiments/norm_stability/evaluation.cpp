// norm_stability's classifier head, evaluation and run summaries (evaluation.hpp).
#include "evaluation.hpp"

#include <algorithm>
#include <cstdint>

#include "seqlab/core/rows.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/train/metrics.hpp"

namespace norm_stability {

using namespace seqlab;

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

Metrics evaluate(TransformerModel& model, ProbedNorm& probe, const TaskBatch& test, bool train_mode,
                 std::size_t chunk) {
  struct Saved {
    Tensor1 mean, var;
    std::int64_t n;
  };
  const std::vector<BatchNorm*> bns = batch_norms(model);
  std::vector<Saved> saved;
  for (auto* bn : bns) saved.push_back({bn->running_mean, bn->running_var, bn->num_batches_tracked});
  probe.set_enabled(false);
  model.set_training(train_mode);
  const std::size_t n = batch_rows(test);
  CrossEntropyLoss ce;
  ScoreSums sums;
  for (std::size_t b0 = 0; b0 < n; b0 += chunk) {
    const TaskBatch s = slice_rows(test, b0, std::min(chunk, n - b0));
    model.set_padding(&s.padding);
    const Tensor2 logits = pool(model.forward(s.tokens), s.lengths);
    model.set_padding(nullptr);
    score_classes(ce, logits, ids_of(s.targets), sums);  // targets [nb, 1]: the labels
  }
  for (std::size_t i = 0; i < bns.size(); ++i) {
    bns[i]->running_mean = saved[i].mean;
    bns[i]->running_var = saved[i].var;
    bns[i]->num_batches_tracked = saved[i].n;
  }
  model.set_training(true);
  return {sums.accuracy(), sums.mean_loss()};
}

RunSummary summarize(const std::vector<double>& losses, const std::vector<double>& grad_norms,
                     const std::vector<ProbeStats>& stats, int steps, std::size_t window) {
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
    m += stats[t].mu_dev;
    v += stats[t].var_dev;
    sh += stats[t].pad_mean_shift;
    ++n;
  }
  if (n_sq > 0) r.loss_volatility = std::sqrt(sq / (2.0 * static_cast<double>(n_sq)));
  if (n > 0) {
    r.mu_dev_late = m / n;
    r.var_dev_late = v / n;
    r.pad_mean_shift_late = sh / n;
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

}  // namespace norm_stability

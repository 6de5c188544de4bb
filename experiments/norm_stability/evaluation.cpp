// norm_stability's evaluation and statistics of a trained model (evaluation.hpp).
#include "evaluation.hpp"

#include <stdexcept>
#include <string>

#include "probe.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/train/metrics.hpp"

namespace norm_stability {

using namespace seqlab;

namespace {

Norm* unwrap(Norm* n) {
  if (auto* p = dynamic_cast<ProbedNorm*>(n)) return p->inner();
  return n;
}

bool keeps_statistics(Norm* n) {
  return dynamic_cast<BatchNorm*>(n) != nullptr || dynamic_cast<PowerNorm*>(n) != nullptr;
}

double frobenius(const Array& g) {
  double s = 0;
  for (float v : g) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

}  // namespace

std::vector<Norm*> stat_norms(TransformerModel& model) {
  std::vector<Norm*> out;
  auto add = [&](Norm* n) {
    if (n == nullptr) return;
    n = unwrap(n);
    if (keeps_statistics(n)) out.push_back(n);
  };
  for (auto& layer : model.layers) {
    add(layer->norm1.get());
    add(layer->norm2.get());
  }
  add(model.final_norm.get());
  return out;
}

Metrics evaluate(TransformerModel& model, const TaskBatch& test, bool train_mode, std::size_t chunk) {
  StateDict saved;
  if (train_mode) saved = model.state_dict();
  model.set_training(train_mode);
  const ScoreSums s = evaluate_chunked(model, eval_set(test), chunk);
  if (train_mode) model.load_state_dict(saved);
  model.set_training(false);
  return {s.mean_loss(), s.accuracy(), s.n};
}

void calibrate(TransformerModel& model, const std::vector<TaskBatch>& calib) {
  const std::vector<Norm*> norms = stat_norms(model);
  if (norms.empty() || calib.empty()) {
    model.set_training(false);
    return;
  }
  const StateDict start = model.state_dict();
  // Per layer, the sums of the batch statistics (BatchNorm: mean, unbiased variance; PowerNorm:
  // quadratic mean), in double.
  std::vector<std::vector<double>> sum_a(norms.size()), sum_b(norms.size());
  for (std::size_t i = 0; i < norms.size(); ++i) {
    sum_a[i].assign(norms[i]->dim(), 0.0);
    sum_b[i].assign(norms[i]->dim(), 0.0);
  }
  for (const TaskBatch& b : calib) {
    model.load_state_dict(start);
    model.set_training(true);
    model.set_padding(b.padding.size() ? &b.padding : nullptr);
    (void)model.forward(b.tokens);
    model.set_padding(nullptr);
    for (std::size_t i = 0; i < norms.size(); ++i) {
      if (auto* bn = dynamic_cast<BatchNorm*>(norms[i])) {
        const auto& st = bn->last_batch_stats();
        const double n = static_cast<double>(st.count);
        for (std::size_t j = 0; j < bn->dim(); ++j) {
          sum_a[i][j] += st.mean(j);
          sum_b[i][j] += st.var(j) * n / (n - 1);  // unbiased, as running_var
        }
      } else if (auto* pn = dynamic_cast<PowerNorm*>(norms[i])) {
        for (std::size_t j = 0; j < pn->dim(); ++j) sum_a[i][j] += pn->last_batch_phi()(j);
      }
    }
  }
  model.load_state_dict(start);
  const double k = static_cast<double>(calib.size());
  for (std::size_t i = 0; i < norms.size(); ++i) {
    if (auto* bn = dynamic_cast<BatchNorm*>(norms[i])) {
      for (std::size_t j = 0; j < bn->dim(); ++j) {
        bn->running_mean(j) = static_cast<float>(sum_a[i][j] / k);
        bn->running_var(j) = static_cast<float>(sum_b[i][j] / k);
      }
    } else if (auto* pn = dynamic_cast<PowerNorm*>(norms[i])) {
      for (std::size_t j = 0; j < pn->dim(); ++j) pn->running_phi(j) = static_cast<float>(sum_a[i][j] / k);
    }
  }
  model.set_training(false);
}

std::vector<std::vector<double>> init_gradient_norms(TransformerModel& model,
                                                     const std::vector<TaskBatch>& batches) {
  const std::size_t L = model.layers.size();
  std::vector<std::vector<double>> out(L, std::vector<double>(2, 0.0));
  if (batches.empty()) return out;
  const StateDict start = model.state_dict();
  CrossEntropyLoss ce;
  model.set_training(true);
  for (const TaskBatch& b : batches) {
    model.load_state_dict(start);
    model.zero_grad();
    const std::size_t B = b.tokens.shape()[0], T = b.tokens.shape()[1];
    const Tensor3 logits = model.forward(b.tokens);
    (void)ce.forward(rows_of(logits), ids_of(b.targets));
    model.backward(unrows(ce.backward(), B, T));
    for (std::size_t l = 0; l < L; ++l)
      for (const auto& np : model.layers[l]->named_parameters()) {
        if (np.key == "linear2.weight") out[l][0] += frobenius(np.param->grad);
        if (np.key == "self_attn.in_proj_weight") out[l][1] += frobenius(np.param->grad);
      }
  }
  model.zero_grad();
  model.load_state_dict(start);
  for (auto& row : out)
    for (double& v : row) v /= static_cast<double>(batches.size());
  return out;
}

}  // namespace norm_stability

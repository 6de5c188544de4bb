// attention_ablations' measurements (evaluation.hpp).
#include "evaluation.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "seqlab/nn/attention.hpp"
#include "seqlab/train/metrics.hpp"

namespace attention_ablations {

namespace {

// Forwards for evaluation run in chunks of at most this many sequences.
constexpr std::size_t kEvalChunk = 128;

}  // namespace

Evaluation evaluate(seqlab::SequenceModel& model, const ArmTask& task, const std::vector<seqlab::TaskBatch>& sets) {
  // Exact match: scored positions arrive row by row, in order, within each set.
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::size_t rows_scored = 0, rows_exact = 0;
  seqlab::ScoreSums sums;
  for (const seqlab::TaskBatch& set : sets) {
    std::size_t row = kNone;
    bool row_right = true;
    auto close_row = [&] {
      if (row == kNone) return;
      ++rows_scored;
      rows_exact += row_right ? 1 : 0;
    };
    task.prepare(model, set);
    seqlab::evaluate_chunked(model, seqlab::eval_set(set), kEvalChunk, sums,
                             [&](std::size_t b, std::size_t, double, bool correct) {
                               if (b != row) {
                                 close_row();
                                 row = b;
                                 row_right = true;
                               }
                               row_right = row_right && correct;
                             });
    close_row();
  }
  Evaluation ev;
  ev.loss = sums.mean_loss();
  ev.accuracy = sums.accuracy();
  if (rows_scored > 0) ev.exact_match = static_cast<double>(rows_exact) / rows_scored;
  return ev;
}

AttentionDiagnostics diagnose(seqlab::SequenceModel& model, const ArmTask& task, const seqlab::TaskBatch& probe) {
  model.eval();
  forward(model, task, probe);
  AttentionDiagnostics d;
  double asym = 0, diag = 0, diag_n = 0, prev_best = -1;
  const auto attns = self_attentions(model);
  for (seqlab::MultiheadAttention* a : attns) {
    asym += a->logit_asymmetry();
    const seqlab::Tensor4& P = a->attention_probs();  // [B, h, T, T]
    const std::size_t B = P.shape()[0], H = P.shape()[1], T = P.shape()[2];
    for (std::size_t h = 0; h < H; ++h) {
      double prev = 0;
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t) {
          diag += P(b, h, t, t);
          diag_n += 1;
          if (t >= 1) prev += P(b, h, t, t - 1);
        }
      if (T >= 2) prev_best = std::max(prev_best, prev / static_cast<double>(B * (T - 1)));
    }
  }
  if (!attns.empty()) d.logit_asymmetry = asym / static_cast<double>(attns.size());
  if (diag_n > 0) d.diag_attention = diag / diag_n;
  if (prev_best >= 0) d.prev_attention = prev_best;
  return d;
}

PruneResult prune_heads(seqlab::SequenceModel& model, const ArmTask& task, const std::vector<seqlab::TaskBatch>& valid,
                        const std::vector<seqlab::TaskBatch>& test, const std::vector<double>& fractions) {
  PruneResult res;
  const auto layers = layer_attentions(model);
  if (layers.empty() || layers.front()->n_heads() < 2 || fractions.empty()) return res;
  const std::size_t h = layers.front()->n_heads();
  model.eval();
  res.valid_loss = evaluate(model, task, valid).loss;
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (std::size_t i = 0; i < h; ++i) {
      std::vector<float> gates(h, 1.0f);
      gates[i] = 0.0f;
      layers[l]->set_head_mask(gates);
      HeadAblation a;
      a.layer = l;
      a.head = i;
      a.loss_masked = evaluate(model, task, valid).loss;
      a.importance = a.loss_masked - res.valid_loss;
      res.heads.push_back(a);
      layers[l]->set_head_mask({});
    }
  // Least important first; stable, so ties keep the layer-then-head order.
  std::vector<std::size_t> order(res.heads.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return res.heads[a].importance < res.heads[b].importance; });
  for (const double f : fractions) {
    PruneLevel lv;
    lv.fraction = f;
    lv.removed = std::min(order.size(), static_cast<std::size_t>(std::lround(f * static_cast<double>(order.size()))));
    std::vector<std::vector<float>> gates(layers.size(), std::vector<float>(h, 1.0f));
    for (std::size_t k = 0; k < lv.removed; ++k) gates[res.heads[order[k]].layer][res.heads[order[k]].head] = 0.0f;
    for (std::size_t l = 0; l < layers.size(); ++l) layers[l]->set_head_mask(gates[l]);
    lv.test = evaluate(model, task, test);
    res.levels.push_back(lv);
  }
  for (auto* a : layers) a->set_head_mask({});
  return res;
}

}  // namespace attention_ablations

// attention_ablations' measurements (evaluation.hpp).
#include "evaluation.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/train/metrics.hpp"

#include "arms.hpp"  // forward

namespace attention_ablations {

namespace {

// Forwards for evaluation run in chunks of at most this many sequences.
constexpr std::size_t kEvalChunk = 128;

/// Every self-attention of the model (encoder layers, then decoder layers).
std::vector<seqlab::MultiheadAttention*> self_attentions(seqlab::SequenceModel& model) {
  std::vector<seqlab::MultiheadAttention*> out;
  if (auto* t = dynamic_cast<seqlab::TransformerModel*>(&model)) {
    for (auto& l : t->layers) out.push_back(&l->self_attn);
  } else if (auto* ed = dynamic_cast<seqlab::EncoderDecoderModel*>(&model)) {
    for (auto& l : ed->encoder_layers) out.push_back(&l->self_attn);
    for (auto& l : ed->decoder_layers) out.push_back(&l->self_attn);
  }
  return out;
}

}  // namespace

Evaluation evaluate(seqlab::SequenceModel& model, const seqlab::TaskBatch& set) {
  // Exact match: scored positions arrive row by row, in order.
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::size_t row = kNone, rows_scored = 0, rows_exact = 0;
  bool row_right = true;
  auto close_row = [&] {
    if (row == kNone) return;
    ++rows_scored;
    rows_exact += row_right ? 1 : 0;
  };
  const seqlab::ScoreSums s = seqlab::evaluate_chunked(
      model, seqlab::eval_set(set), kEvalChunk, [&](std::size_t b, std::size_t, double, bool correct) {
        if (b != row) {
          close_row();
          row = b;
          row_right = true;
        }
        row_right = row_right && correct;
      });
  close_row();
  Evaluation ev;
  ev.loss = s.mean_loss();
  ev.accuracy = s.accuracy();
  if (rows_scored > 0) ev.exact_match = static_cast<double>(rows_exact) / rows_scored;
  return ev;
}

AttentionDiagnostics diagnose(seqlab::SequenceModel& model, const seqlab::TaskBatch& probe) {
  model.eval();
  forward(model, probe);
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

}  // namespace attention_ablations

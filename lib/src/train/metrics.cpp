// Scoring and chunked evaluation (train/metrics.hpp).
#include "seqlab/train/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "seqlab/core/rows.hpp"
#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/transformer_model.hpp"

namespace seqlab {

std::size_t argmax_row(const Tensor2& scores, std::size_t r) {
  const std::size_t N = scores.shape()[0], C = scores.shape()[1];
  if (r >= N || C == 0)
    throw std::out_of_range("argmax_row: row " + std::to_string(r) + " of scores [" + std::to_string(N) +
                            ", " + std::to_string(C) + "]");
  const float* p = scores.data() + r * C;
  std::size_t arg = 0;
  for (std::size_t c = 1; c < C; ++c)
    if (p[c] > p[arg] || (p[arg] != p[arg] && p[c] == p[c])) arg = c;  // first maximum; NaN never wins
  return arg;
}

void score_classes(CrossEntropyLoss& ce, const Tensor2& logits, const IndexTensor1& targets,
                   ScoreSums& s, const ScoredRowFn& f) {
  ce.forward(logits, targets);
  const Tensor1& rl = ce.row_losses();
  for (std::size_t r = 0; r < targets.size(); ++r) {
    if (targets(r) == ce.ignore_index()) continue;
    const double loss = rl(r);
    // A row whose loss is not finite (NaN or infinite logits) predicts nothing.
    const bool ok = std::isfinite(loss) && static_cast<std::int32_t>(argmax_row(logits, r)) == targets(r);
    s.add(loss, ok);
    if (f) f(r, loss, ok);
  }
}

namespace {

// Sets a TransformerModel's key-padding mask (an EncoderDecoderModel's source padding) for one
// forward and clears it after.
class PaddingScope {
 public:
  PaddingScope(SequenceModel& model, const PaddingMask& padding)
      : tm_(padding.size() > 0 ? dynamic_cast<TransformerModel*>(&model) : nullptr),
        ed_(padding.size() > 0 ? dynamic_cast<EncoderDecoderModel*>(&model) : nullptr) {
    if (tm_) tm_->set_padding(&padding);
    if (ed_) ed_->set_padding(&padding, nullptr);
  }
  ~PaddingScope() {
    if (tm_) tm_->set_padding(nullptr);
    if (ed_) ed_->set_padding(nullptr, nullptr);
  }
  PaddingScope(const PaddingScope&) = delete;
  PaddingScope& operator=(const PaddingScope&) = delete;

 private:
  TransformerModel* tm_;
  EncoderDecoderModel* ed_;
};

}  // namespace

void evaluate_chunked(SequenceModel& model, const EvalSet& test, std::size_t chunk, ScoreSums& total,
                      const ScoredPositionFn& f) {
  if (chunk == 0) throw std::invalid_argument("evaluate_chunked: chunk = 0; must be >= 1");
  const bool tokens = test.tokens != nullptr, features = test.features != nullptr;
  const bool classes = test.targets != nullptr, values = test.values != nullptr;
  if (tokens == features || classes == values)
    throw std::invalid_argument("evaluate_chunked: the test set needs exactly one input (tokens or "
                                "features) and one target (targets or values)");
  auto* ed = test.decoder_tokens ? dynamic_cast<EncoderDecoderModel*>(&model) : nullptr;
  if (test.decoder_tokens && (!tokens || !ed))
    throw std::invalid_argument("evaluate_chunked: decoder_tokens need token input and an "
                                "EncoderDecoderModel");
  const std::size_t n = tokens ? test.tokens->shape()[0] : test.features->shape()[0];
  CrossEntropyLoss ce;
  for (std::size_t b0 = 0; b0 < n; b0 += chunk) {
    const std::size_t nb = std::min(chunk, n - b0);
    Tensor3 out;
    {
      const PaddingMask mask = test.padding ? slice_rows(*test.padding, b0, nb) : PaddingMask();
      const PaddingScope scope(model, mask);
      if (ed)
        out = ed->forward(slice_rows(*test.tokens, b0, nb), slice_rows(*test.decoder_tokens, b0, nb));
      else
        out = tokens ? model.forward(slice_rows(*test.tokens, b0, nb))
                     : model.forward(slice_rows(*test.features, b0, nb));
    }
    if (classes) {
      const IndexTensor2 y = slice_rows(*test.targets, b0, nb);
      const std::size_t T = y.shape()[1];
      score_classes(ce, rows_of(out), ids_of(y), total, [&](std::size_t row, double loss, bool ok) {
        if (f) f(b0 + row / T, row % T, loss, ok);
      });
    } else {
      const Tensor3 y = slice_rows(*test.values, b0, nb);
      const std::size_t T = y.shape()[1], O = y.shape()[2];
      if (out.shape()[0] != nb || out.shape()[1] != T || out.shape()[2] != O)
        throw ShapeError("evaluate_chunked: the model's output does not match the values' shape");
      for (std::size_t b = 0; b < nb; ++b)
        for (std::size_t t = 0; t < T; ++t) {
          double se = 0;
          for (std::size_t o = 0; o < O; ++o) {
            const double e = double(out(b, t, o)) - double(y(b, t, o));
            se += e * e;
          }
          total.add(se, false);
          if (f) f(b0 + b, t, se, false);
        }
    }
  }
}

}  // namespace seqlab

#pragma once
// Scoring a model's outputs over the scored positions of a test set: accuracy (argmax with
// torch.argmax's tie rule), mean loss, perplexity and bits per token, and chunked evaluation of a
// model over a whole test set with bounded memory.
//
// Scored positions: a class target t != ignore_index (kIgnoreTarget = -100, CrossEntropyLoss's
// default) is scored; the loss of a scored row is CrossEntropyLoss's row loss
// -log_softmax(x)[t] in nats (torch.nn.CrossEntropyLoss(reduction='none')), accumulated in double
// in row order, so every experiment that scores the same rows gets the same bits. A scored row is
// correct when its argmax is the target and its loss is finite: a row with a non-finite loss (NaN
// logits of a diverged model, or an infinite logit) is never correct, whatever its argmax.
// Regression targets ("values") score their squared error.
//
// Legend: N rows (B·T positions, or B sequences), C classes, B batch, T positions.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>

#include "seqlab/core/tensor.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/nn/loss.hpp"

namespace seqlab {

/// Index of the first maximum of row `r` of `scores` [N, C] (logits or probabilities), as
/// torch.argmax, which returns the first index among equal maxima. NaN entries never win (a row of
/// NaN gives 0). Throws std::out_of_range if r >= N or C == 0.
std::size_t argmax_row(const Tensor2& scores, std::size_t r);

/// Running sums over scored positions.
struct ScoreSums {
  double loss_sum = 0;       // Σ loss (nats, or squared error for regression)
  std::size_t n = 0;         // scored positions
  std::size_t correct = 0;   // argmax == target (class targets only)

  void add(double loss, bool is_correct) {
    loss_sum += loss;
    ++n;
    correct += is_correct ? 1 : 0;
  }
  void add(const ScoreSums& o) {
    loss_sum += o.loss_sum;
    n += o.n;
    correct += o.correct;
  }
  /// Σ loss / n (NaN when n = 0).
  double mean_loss() const { return n ? loss_sum / double(n) : std::numeric_limits<double>::quiet_NaN(); }
  /// correct / n (NaN when n = 0).
  double accuracy() const { return n ? double(correct) / double(n) : std::numeric_limits<double>::quiet_NaN(); }
  /// exp(mean loss in nats): the perplexity per scored token.
  double perplexity() const { return std::exp(mean_loss()); }
  /// mean loss / ln 2: bits per scored token (bits per character for a character LM).
  double bits_per_token() const { return mean_loss() / std::log(2.0); }
};

/// Called once per scored row, in row order: the row's index, its loss, whether it is correct.
using ScoredRowFn = std::function<void(std::size_t row, double loss, bool correct)>;

/// Scores class logits [N, C] against targets [N] with `ce` (its ignore_index says which rows are
/// not scored): runs ce.forward, then for every scored row r in order adds (row loss, argmax(r) ==
/// target and the row loss finite) to `acc` and calls f(r, loss, correct) if f is set: a row whose
/// loss is not finite (e.g. the NaN logits of a diverged model) is not correct. Row by row, so sums
/// over several batches come out as one pass over their rows would. Throws what CrossEntropyLoss::forward
/// throws (ShapeError, std::out_of_range for a bad target); `acc` is unchanged then.
void score_classes(CrossEntropyLoss& ce, const Tensor2& logits, const IndexTensor1& targets,
                   ScoreSums& acc, const ScoredRowFn& f = {});

/// A test set as a model consumes it (views, not owned; the tensors must outlive the call):
/// exactly one input and one target; tasks/task.hpp's eval_set(TaskBatch) builds one.
struct EvalSet {
  const IndexTensor2* tokens = nullptr;   // [B, T]      embedding input
  const Tensor3* features = nullptr;      // [B, T, D]   linear input
  const IndexTensor2* targets = nullptr;  // [B, T or 1] class ids (ignore_index -100 not scored)
  const Tensor3* values = nullptr;        // [B, T or 1, O] regression targets
  const PaddingMask* padding = nullptr;   // [B, T] 1 = padded, or null
  /// [B, T'] the decoder's input of an encoder-decoder set (tokens is then the source), or null.
  const IndexTensor2* decoder_tokens = nullptr;
};

/// Called once per scored position of an evaluated test set, in (b, t) order: b the row of the
/// whole test set, t the position (0 for a last_position head), the loss and correctness.
using ScoredPositionFn = std::function<void(std::size_t b, std::size_t t, double loss, bool correct)>;

/// Evaluates `model` on `test` in chunks of at most `chunk` rows (bounded activation memory), in
/// whatever mode the model is in (call model.eval() first for test metrics). A TransformerModel gets
/// the chunk's rows of test.padding (when set) as its key-padding mask, and none after. With
/// test.decoder_tokens the model must be an EncoderDecoderModel: forward(source chunk, decoder
/// chunk), test.padding as its source padding. Class
/// targets are scored by cross-entropy and argmax (score_classes, ignore_index -100); values by
/// the squared error summed over O per position (correct = false). f (optional) sees every scored
/// position. Adds to `acc` position by position, so several sets evaluated into one accumulator
/// pool exactly as one set would.
/// Throws std::invalid_argument for chunk = 0, a set without exactly one input and one target, or
/// decoder_tokens without token input or for a model that is not an EncoderDecoderModel;
/// ShapeError / std::out_of_range as the model and the loss throw.
void evaluate_chunked(SequenceModel& model, const EvalSet& test, std::size_t chunk, ScoreSums& acc,
                      const ScoredPositionFn& f = {});
/// The same into a fresh accumulator: the sums over this set.
inline ScoreSums evaluate_chunked(SequenceModel& model, const EvalSet& test, std::size_t chunk,
                                  const ScoredPositionFn& f = {}) {
  ScoreSums acc;
  evaluate_chunked(model, test, chunk, acc, f);
  return acc;
}

}  // namespace seqlab

#pragma once
// Softmax, log-softmax and the cross-entropy loss, with PyTorch's numerics.
//
// Legend: N rows (usually B*T positions), C classes (usually the vocabulary V).
// Row reductions (max, Σ exp) are materialised per row; sums are accumulated in double.
#include <cstddef>
#include <cstdint>
#include <string>

#include "seqlab/core/tensor.hpp"

namespace seqlab {

/// logits [N, C] -> p [N, C], p_ij = exp(x_ij - m_i) / Σ_k exp(x_ik - m_i) with m_i the row max
/// (torch.softmax(dim=-1)). softmax([1000, 0, 0]) = [1, 0, 0]. A row whose entries are all -inf
/// (fully masked) gives zeros, never NaN (PyTorch gives NaN there: documented difference); a NaN
/// in a row makes that row NaN.
Tensor2 softmax(const Tensor2& logits);
/// From y = softmax(x) [N, C] and dy [N, C]: dx = y ⊙ (dy - Σ_j dy_j y_j) per row.
/// Throws ShapeError if the shapes differ.
Tensor2 softmax_backward(const Tensor2& y, const Tensor2& dy);

/// logits [N, C] -> x - m - log Σ exp(x - m) per row (torch.log_softmax(dim=-1)):
/// log_softmax([1000, 0]) = [0, -1000] in float. A row of all -inf gives all -inf.
Tensor2 log_softmax(const Tensor2& logits);
/// From y = log_softmax(x) [N, C] and dy [N, C]: dx = dy - exp(y) Σ_j dy_j per row
/// (PyTorch's _log_softmax_backward_data). Throws ShapeError if the shapes differ.
Tensor2 log_softmax_backward(const Tensor2& y, const Tensor2& dy);

/// How a loss reduces its per-row losses l_i (torch.nn's `reduction` argument, e.g.
/// https://pytorch.org/docs/1.13/generated/torch.nn.CrossEntropyLoss.html):
///   mean: (1/n) Σ_i l_i over the n counted rows (for CrossEntropyLoss the non-ignored targets:
///         ignored rows are in neither the sum nor n);
///   sum:  Σ_i l_i.
/// Gradient accumulation over micro-batches uses sum and divides by the total count once
/// (train/loop.hpp, train_loop_accumulate), which gives the mean of the whole batch.
enum class Reduction { mean, sum };
/// "mean" | "sum".
const char* reduction_name(Reduction r);
/// The Reduction named `name` ("mean" | "sum", exact). Throws std::invalid_argument
/// ("reduction = '<name>': allowed mean, sum").
Reduction parse_reduction(const std::string& name);

/// Cross-entropy of logits against class targets, as
/// torch.nn.CrossEntropyLoss(ignore_index=ignore_index, reduction=reduction) with no class
/// weights and no label smoothing. Per row l_i = -log_softmax(x_i)[t_i];
///   mean: L = (1/n) Σ_{i: t_i != ignore} l_i, n = number of non-ignored targets;
///   sum:  L = Σ_{i: t_i != ignore} l_i.
/// Any ignore_index is allowed, negative ones included (a target equal to it is skipped before
/// the range check, so ignore_index = 0 ignores class 0).
class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(std::int32_t ignore_index = -100, Reduction reduction = Reduction::mean);

  /// logits [N, C], targets [N] -> L (nats per non-ignored target for mean, nats for sum). If
  /// every target is ignored, returns 0 and count() == 0 (sum: as PyTorch; mean: PyTorch returns
  /// NaN, a documented difference). Caches the softmax and targets for backward. Throws
  /// ShapeError if targets is not [N]; std::out_of_range naming the target, its row and C for a
  /// target outside [0, C) that is not ignore_index (checked before anything is cached).
  float forward(const Tensor2& logits, const IndexTensor1& targets);
  /// dL/dlogits [N, C] for upstream gradient 1: (softmax(x_i) - onehot(t_i)) / n (mean) or
  /// softmax(x_i) - onehot(t_i) (sum) for counted rows; ignored rows are exactly 0; all zeros
  /// when count() == 0. Throws std::logic_error if forward has not run.
  Tensor2 backward() const;
  /// Number of non-ignored targets in the last forward.
  std::size_t count() const { return count_; }
  /// Σ of the last forward's per-row losses in double (the sum reduction before rounding to
  /// float; the mean's numerator). With count(), what train_loop_accumulate's closure returns.
  double sum() const { return sum_; }
  /// softmax of the last forward's logits [N, C] (for accuracy / argmax).
  const Tensor2& probabilities() const { return probs_; }
  /// Per-row loss -log_softmax(x_i)[t_i] of the last forward [N]; 0 on ignored rows
  /// (reduction='none' with the ignored rows zeroed, as PyTorch).
  const Tensor1& row_losses() const { return row_loss_; }
  std::int32_t ignore_index() const { return ignore_index_; }
  Reduction reduction() const { return reduction_; }

 private:
  std::int32_t ignore_index_;
  Reduction reduction_;
  Tensor2 probs_;
  Tensor1 row_loss_;
  IndexTensor1 targets_;
  std::size_t count_ = 0;
  double sum_ = 0.0;
  bool cached_ = false;
};

}  // namespace seqlab

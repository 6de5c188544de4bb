#pragma once
// Variable-length majority classification with right padding: the task of the norm_stability
// experiment (DESIGN.md claim 4), built so that the padding fraction of a batch is a parameter.
//
// One sequence of the padded length T = seq_len():
//
//   positions [0, L)   the L real tokens, each drawn uniformly from the K + M non-pad ids:
//                      class tokens 1..K (n_classes) and distractor ("noise") tokens
//                      K+1..K+M (n_noise);
//   positions [L, T)   the pad token 0 (padding mask 1 there, PyTorch's key_padding_mask
//                      convention: 1 = ignore).
//   label              c − 1, where c is the class token that occurs strictly more often than
//                      every other class token among the L real tokens (the mode). A draw
//                      without a unique mode (a tie, or no class token at all) is rejected and
//                      the L tokens are drawn again (same L), so every label is unambiguous.
//
// Lengths (the padding fraction): with p = pad_fraction, m = round((1 − p)·T) the mean length and
// w = min(m − min_len, T − m) the half-width, L is uniform on {m − w, ..., m + w}; so E[L] = m, the
// expected fraction of padded positions is exactly 1 − m/T (= p when p·T is an integer), and every
// L is in [min_len, T]. p = 0 gives L = T for every sequence (no padding, no length variation).
// Example, T = 32, min_len = 4: p = 0 -> L = 32; p = 0.25 -> L in {16..32}; p = 0.5 -> L in {4..28}.
//
// The label depends only on the token counts, so the order of tokens carries no information and a
// model must count over the real positions only (padded ones carry no tokens); by the symmetry of
// the K class tokens every label has probability exactly 1/K.
//
// Sampling, row by row, all from the given Rng: L = (m − w) + uniform_int(2w + 1); then the L
// tokens left to right, each 1 + uniform_int(K + M); repeated (tokens only) until the mode is
// unique. Deterministic given the rng state and the same on every platform.
//
// Legend: B batch, T seq_len(), K n_classes(), M n_noise(), L a sequence's real length.
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"

namespace seqlab {

/// A batch of right-padded token sequences with one class label each.
struct PaddedClassificationBatch {
  IndexTensor2 inputs;   // [B, T] token ids in [0, vocab); 0 at every padded position
  PaddingMask padding;   // [B, T] 1 at padded positions (t >= lengths(b)), 0 at real ones
  IndexTensor1 labels;   // [B] class ids in [0, K)
  IndexTensor1 lengths;  // [B] real lengths L in [min_length(), max_length()]
};

class MajorityTask {
 public:
  /// `seq_len` T >= 2; `pad_fraction` p in [0, 1); `n_classes` K >= 2; `n_noise` M >= 0;
  /// `min_len` >= 1 and <= T. Throws std::invalid_argument naming the argument and its value if
  /// a rule is broken, or "pad_fraction" if the mean length round((1 − p)·T) is below min_len
  /// (the padding fraction is too large for this T and min_len).
  MajorityTask(int seq_len, double pad_fraction, int n_classes = 4, int n_noise = 4,
               int min_len = 4);

  int seq_len() const { return seq_len_; }
  /// The requested p (constructor argument).
  double pad_fraction() const { return pad_fraction_; }
  int n_classes() const { return n_classes_; }
  int n_noise() const { return n_noise_; }
  /// 1 + K + M: pad 0, class tokens 1..K, noise tokens K+1..K+M.
  int vocab_size() const { return 1 + n_classes_ + n_noise_; }
  static constexpr std::int32_t pad_id() { return 0; }
  /// Range of the real length L: m − w and m + w (file comment).
  int min_length() const { return mean_len_ - half_width_; }
  int max_length() const { return mean_len_ + half_width_; }
  /// E[L] = m = round((1 − p)·T).
  int mean_length() const { return mean_len_; }
  /// Expected fraction of padded positions, exactly 1 − m/T.
  double expected_pad_fraction() const;

  /// `batch` (>= 1, else std::invalid_argument) sequences, as in the file comment.
  PaddedClassificationBatch sample(std::size_t batch, Rng& rng) const;

  /// Accuracy of guessing (every label has probability 1/K): 1/K.
  double chance_accuracy() const;
  /// Cross-entropy of the uniform prediction, which is also the best one without looking at the
  /// tokens: ln K nats.
  double chance_loss() const;

 private:
  int seq_len_;
  double pad_fraction_;
  int n_classes_, n_noise_;
  int mean_len_ = 0, half_width_ = 0;
};

}  // namespace seqlab

#pragma once
// Induction-style copy: a prefix of distinct random tokens, then a contiguous stretch of that
// prefix repeated from a random start; on the repeat, predict the next token. The rule "find the
// earlier occurrence of the current token and output the token that followed it" is what an
// induction head computes (Olsson et al. 2022, "In-context Learning and Induction Heads", §2;
// Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"): a previous-token head
// in one layer, then a content match in the next — both asymmetric relations. The random start
// makes the offset between a repeat token and its earlier occurrence vary from row to row, so a
// fixed positional offset cannot solve it (unlike PreviousTokenTask).
//
// Layout of one row (n = prefix_len(), m = copy_len(), T = seq_len() = n + m, V = vocab_size()):
//   positions [0, n)      p_0 .. p_{n-1}: n DISTINCT tokens of 0..V-1 (so "the earlier
//                         occurrence" is unique)
//   positions [n, n + m)  p_s .. p_{s+m-1}: the prefix from start s, s uniform in [0, n - m]
//   targets(b, t) = inputs(b, t + 1) for t in [n, n + m - 1) (the next repeat token, = p_{s+j+1}
//                   at t = n + j, determined by the prefix); kIgnoreTarget (-100) elsewhere
// so m - 1 positions per row are scored. The target is the *next* input: a model that sees
// position t + 1 (a bidirectional encoder) reads it off, so the task is meant for causal models.
//
// Sampling, per row (row by row, all from the given Rng): the prefix as a partial Fisher–Yates
// shuffle of 0..V-1 (for i in [0, n): j = i + uniform_int(V - i), swap, take element i); then
// s = uniform_int(n - m + 1). Deterministic given the rng state, the same on every platform.
//
// Legend: B batch, T seq_len().
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch
#include "seqlab/tasks/mqar.hpp"         // kIgnoreTarget

namespace seqlab {

class InductionCopyTask {
 public:
  /// `prefix_len` n >= 2; `copy_len` m in [2, n]; `vocab_size` V >= n (the prefix tokens are
  /// distinct). Throws std::invalid_argument naming the argument and its value.
  InductionCopyTask(int prefix_len, int copy_len, int vocab_size);

  int prefix_len() const { return prefix_len_; }
  int copy_len() const { return copy_len_; }
  int vocab_size() const { return vocab_size_; }
  /// n + m.
  int seq_len() const { return prefix_len_ + copy_len_; }
  /// m - 1: scored positions per row.
  int scored_per_row() const { return copy_len_ - 1; }

  /// `batch` (>= 1, else std::invalid_argument) rows: inputs [B, T] in [0, V), targets [B, T]
  /// (file comment). Deterministic given the rng state.
  TokenBatch sample(std::size_t batch, Rng& rng) const;

  /// Accuracy of a uniform guess over the V tokens: 1 / V. (A predictor that uses only that the
  /// tokens of a row are distinct, without finding the earlier occurrence, does a little better
  /// on later repeat positions — at most 1 / (V - m) — so chance is a floor, not a tight baseline.)
  double chance_accuracy() const;
  /// Cross-entropy of the uniform guess: ln V nats.
  double chance_loss() const;

 private:
  int prefix_len_, copy_len_, vocab_size_;
};

}  // namespace seqlab

#pragma once
// Passkey retrieval: a key hidden at a random depth in filler text, asked for at the end
// (Mohtashami & Jaggi 2023, "Landmark Attention", §4.2; Chen et al. 2023, "Extending Context
// Window of Large Language Models via Positional Interpolation", §3.2 and Figure 3's prompt: "There
// is an important info hidden inside a lot of irrelevant text ... The pass key is 12345. Remember
// it. ... What is the pass key? The pass key is"). A token-level version for small models: the
// filler is a fixed sentence of F tokens repeated (Chen et al.'s "The grass is green. The sky is
// blue. ..."), the key n distinct digits.
//
// Layout of one row (T = seq_len(), n = n_digits(), F = filler_period()):
//   positions [0, T)          filler: token (phase + t) mod F at every position not used below,
//                             phase uniform in [0, F) per row (the sentence continues across the
//                             key block, as text around an inserted sentence would);
//   [s, s + n + 1)            the key block: the marker key_marker() ("The pass key is"), then the
//                             digits d_1..d_n, s uniform in [0, T − 2n − 2] (the depth
//                             s / (T − 2n − 2) uniform in [0, 1]);
//   [T − n − 1, T)            the question: query_marker() ("What is the pass key? The pass key
//                             is"), then the answer d_1..d_n.
//   targets(b, t) = inputs(b, t + 1) for t in [T − n − 1, T − 1): the marker predicts d_1 and each
//                   answer digit the next one (n scored positions per row); kIgnoreTarget (-100)
//                   elsewhere (the filler is not scored);
//   distances(b, t) = (T − n − 1) − (s + 1) at the scored positions: position T − n − 1 + i
//                   predicts d_{i+1}, which the key holds at s + 1 + i, so all n are that far back;
//                   0 elsewhere.
// Vocabulary (vocab_size() = F + 12): filler 0..F-1, key_marker() = F, query_marker() = F + 1,
// digits F + 2 .. F + 11 (first_digit()).
//
// Sampling, per row (row by row, in this order): phase = uniform_int(F); s = uniform_int(T − 2n − 1);
// the digits: distinct, a partial Fisher–Yates shuffle of the 10 digits (first n). Distinct digits
// keep copying by content unambiguous (with repeats "the digit after d_i" has two answers).
//
// Baseline: the best predictor that ignores the key still sees the answer so far, so after i digits
// it guesses uniformly among the 10 − i unused ones: accuracy mean_{i<n} 1/(10 − i), loss
// mean_{i<n} ln(10 − i) (n = 5: 0.1291, 2.0560 nats). Ceiling: accuracy 1, loss 0.
//
// Legend: B batch, T seq_len(), n n_digits(), F filler_period().
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch
#include "seqlab/tasks/mqar.hpp"         // kIgnoreTarget

namespace seqlab {

class PasskeyTask {
 public:
  /// `n_digits` n in [1, 10]; `filler_period` F >= 1; `seq_len` T >= 2n + 2 (room for the key
  /// block and the question). Throws std::invalid_argument naming the argument and its value.
  PasskeyTask(int seq_len, int n_digits = 5, int filler_period = 5);

  int seq_len() const { return seq_len_; }
  int n_digits() const { return n_digits_; }
  int filler_period() const { return filler_period_; }
  int vocab_size() const { return filler_period_ + 12; }
  std::int32_t key_marker() const { return filler_period_; }
  std::int32_t query_marker() const { return filler_period_ + 1; }
  std::int32_t first_digit() const { return filler_period_ + 2; }

  /// `batch` (>= 1, else std::invalid_argument) rows: inputs and targets [B, T] (file comment).
  TokenBatch sample(std::size_t batch, Rng& rng) const;
  /// distances [B, T] of a batch of this task (file comment). Throws std::invalid_argument for a
  /// batch of another shape or without a key marker before the question.
  IndexTensor2 distances(const TokenBatch& batch) const;

  /// The baseline that ignores the key (file comment).
  double chance_accuracy() const;
  double chance_loss() const;

 private:
  int seq_len_, n_digits_, filler_period_;
};

}  // namespace seqlab

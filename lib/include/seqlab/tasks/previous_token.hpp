#pragma once
// Previous-token task: at every position, output the token that came `lag` positions earlier.
// The simplest relation an attention head must express asymmetrically: query t has to prefer key
// t - lag over key t itself and over t + lag. It is the first half of the induction-head circuit
// (Olsson et al. 2022, "In-context Learning and Induction Heads", §2 "previous token heads") and
// the attention pattern that a shared W_Q = W_K makes hard: with S = Q Qᵀ the score of (t, t-lag)
// equals that of (t-lag, t), and q_t·q_t competes with it (Kitaev et al. 2020, Reformer §2.1,
// mask the diagonal for this reason; seqlab's shared_qk ablation does not).
//
// Layout of one row (T = seq_len(), V = vocab_size(), l = lag()):
//   inputs(b, t)  = x_t, i.i.d. uniform over the V tokens 0..V-1, t in [0, T)
//   targets(b, t) = x_{t-l} for t >= l;  kIgnoreTarget (-100) for t < l (nothing to copy yet)
// so T - l positions per row are scored.
//
// Sampling: row by row, left to right, x_t = uniform_int(V): deterministic given the rng state
// and the same on every platform.
//
// Legend: B batch, T seq_len(), V vocab_size().
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch
#include "seqlab/tasks/mqar.hpp"         // kIgnoreTarget

namespace seqlab {

class PreviousTokenTask {
 public:
  /// `seq_len` T >= 2; `vocab_size` V >= 2; `lag` l in [1, T - 1]. Throws std::invalid_argument
  /// naming the argument and its value.
  PreviousTokenTask(int seq_len, int vocab_size, int lag = 1);

  int seq_len() const { return seq_len_; }
  int vocab_size() const { return vocab_size_; }
  int lag() const { return lag_; }
  /// T - lag: scored positions per row.
  int scored_per_row() const { return seq_len_ - lag_; }

  /// `batch` (>= 1, else std::invalid_argument) rows: inputs [B, T] in [0, V), targets [B, T]
  /// (file comment). Deterministic given the rng state.
  TokenBatch sample(std::size_t batch, Rng& rng) const;

  /// Accuracy on the scored positions of the best predictor that does not look back lag
  /// positions: the target is independent of everything else, so 1 / V.
  double chance_accuracy() const;
  /// Its cross-entropy (uniform prediction): ln V nats.
  double chance_loss() const;

 private:
  int seq_len_, vocab_size_, lag_;
};

}  // namespace seqlab

#pragma once
// Lag-pair task: at every position, output the PAIR of tokens that came `lag_a` and `lag_b`
// positions earlier — two relations that one attention layer must express at the same query.
// With several heads each head can hold one relation (Vaswani et al. 2017 §3.2.2: "multi-head
// attention allows the model to jointly attend to information from different representation
// subspaces at different positions. With a single attention head, averaging inhibits this");
// with one head the softmax must split its weight between the two positions and the pair must be
// read back from the weighted average of their values.
//
// Layout of one row (T = seq_len(), V = vocab_size(), a = lag_a(), b = lag_b(), m = max(a, b)):
//   inputs(r, t)  = x_t, i.i.d. uniform over the V tokens 0..V-1, t in [0, T)
//   targets(r, t) = x_{t-a} · V + x_{t-b} (one of V² classes) for t >= m; kIgnoreTarget for t < m
// so T - m positions per row are scored. The pair is ordered (a != b), so the target is not a
// symmetric function of the two tokens.
//
// Baseline (the best predictor that ignores one of the two relations): it knows one of the two
// tokens exactly and the other is independent and uniform, so accuracy 1/V and cross-entropy
// ln V nats (a predictor that ignores both: 1/V², 2 ln V).
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

class LagPairTask {
 public:
  /// `seq_len` T >= 2; `vocab_size` V in [2, 46340] (V² classes fit an int32); lags in [1, T - 1],
  /// lag_a != lag_b. Throws std::invalid_argument naming the argument and its value.
  LagPairTask(int seq_len, int vocab_size, int lag_a, int lag_b);

  int seq_len() const { return seq_len_; }
  int vocab_size() const { return vocab_size_; }
  int lag_a() const { return lag_a_; }
  int lag_b() const { return lag_b_; }
  /// V²: the classes of a target.
  int n_classes() const { return vocab_size_ * vocab_size_; }
  /// T - max(lag_a, lag_b): scored positions per row.
  int scored_per_row() const;

  /// `batch` (>= 1, else std::invalid_argument) rows: inputs [B, T] in [0, V), targets [B, T]
  /// in [0, V²) or kIgnoreTarget (file comment). Deterministic given the rng state.
  TokenBatch sample(std::size_t batch, Rng& rng) const;

  /// The baseline that ignores one relation (file comment): 1 / V.
  double one_lookup_accuracy() const;
  /// Its cross-entropy: ln V nats.
  double one_lookup_loss() const;

 private:
  int seq_len_, vocab_size_, lag_a_, lag_b_;
};

}  // namespace seqlab

#pragma once
// Language modelling on a random sparse Markov source of order k: a synthetic "language" whose
// optimal next-token loss is known exactly, so a model's loss can be read as a distance to the
// optimum. (Synthetic n-gram / Markov sources as an LM testbed: Shannon 1948 §3's approximations of
// English; Edelman et al. 2024, "The Evolution of Statistical Induction Heads", use Markov chains
// to study how Transformers learn n-gram statistics.)
//
// The source (fixed by the constructor's grammar_seed): for every context c = (x_{t-k+1} .. x_t)
// of the V^k possible ones, `branching` distinct successor tokens succ(c, 0..K-1) (K = branching)
// and the fixed distribution
//     P(x_{t+1} = succ(c, j) | c) = p_j = 2^{-j} / Σ_{i<K} 2^{-i},   j = 0..K-1,
// every other token having probability 0. Because p is the same vector in every context, the
// optimal (Bayes) predictor has, at every scored position and whatever the context distribution,
//     cross-entropy H(p) = −Σ_j p_j ln p_j nats   (optimal_loss())
//     accuracy      p_0                            (bayes_accuracy(), argmax = succ(c, 0))
// Table construction (from Rng(grammar_seed)): contexts in increasing index c = Σ_i x_{t-k+1+i}·
// V^{k-1-i} (most recent token least significant), each a partial Fisher–Yates shuffle of 0..V-1
// (for j in [0, K): i = j + uniform_int(V - j), swap, take element j).
//
// Layout of one row (T = seq_len()):
//   inputs(b, t)  = x_t: x_0 .. x_{k-1} uniform over 0..V-1, then x_{t+1} ~ P(· | x_{t-k+1..t})
//   targets(b, t) = x_{t+1} for t in [k-1, T-1) (the context is complete); kIgnoreTarget (-100)
//                   elsewhere (t < k-1 and the last position), so T - k positions are scored.
// Sampling (row by row, left to right): x_t = uniform_int(V) for t < k, then
// u = rng.uniform_double() and the first j with u < p_0 + .. + p_j (j = K-1 if rounding leaves
// none). Deterministic given the rng state, the same on every platform.
//
// Legend: B batch, T seq_len(), V vocab_size(), k order(), K branching().
#include <cstddef>
#include <cstdint>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch
#include "seqlab/tasks/mqar.hpp"         // kIgnoreTarget

namespace seqlab {

class MarkovLanguageTask {
 public:
  /// `seq_len` T >= order + 1; `vocab_size` V >= 2; `order` k >= 1 with V^k <= 2^20 contexts;
  /// `branching` K in [1, V]. Throws std::invalid_argument naming the argument and its value.
  MarkovLanguageTask(int seq_len, int vocab_size, int order, int branching,
                     std::uint64_t grammar_seed);

  int seq_len() const { return seq_len_; }
  int vocab_size() const { return vocab_size_; }
  int order() const { return order_; }
  int branching() const { return branching_; }
  /// T - k: scored positions per row.
  int scored_per_row() const { return seq_len_ - order_; }
  /// The successor distribution p [K] (file comment), shared by every context.
  const std::vector<double>& probabilities() const { return p_; }
  /// succ(c, j) for context index c in [0, V^k) and j in [0, K); std::out_of_range otherwise.
  std::int32_t successor(std::size_t context, int j) const;
  /// Context index of tokens (x_{t-k+1} .. x_t) as in the file comment; `tokens` points at
  /// x_{t-k+1}, k tokens in [0, V).
  std::size_t context_index(const std::int32_t* tokens) const;

  /// `batch` (>= 1, else std::invalid_argument) rows: inputs [B, T] in [0, V), targets [B, T]
  /// (file comment). Deterministic given the rng state.
  TokenBatch sample(std::size_t batch, Rng& rng) const;

  /// Cross-entropy of the true conditional distribution: H(p) nats per scored token.
  double optimal_loss() const;
  /// Accuracy of the Bayes predictor: p_0.
  double bayes_accuracy() const;
  /// Uniform guess over the V tokens: accuracy 1 / V.
  double chance_accuracy() const;
  /// Uniform guess: ln V nats.
  double chance_loss() const;

 private:
  int seq_len_, vocab_size_, order_, branching_;
  std::vector<double> p_;            // [K]
  std::vector<std::int32_t> table_;  // [V^k, K] successors
};

}  // namespace seqlab

#pragma once
// Multi-query associative recall (MQAR): Arora et al. 2023, "Zoology: Measuring and Improving
// Recall in Efficient Language Models" (arXiv 2312.04927), §3 and their synthetic generator
// (HazyResearch/zoology, zoology/data/associative_recall.py, multiquery_ar). The layout is
// theirs; this is one sequence of length T = seq_len(), with P = n_pairs, Q = n_queries:
//
//   positions [0, 2P)        the context: k_1 v_1 k_2 v_2 ... k_P v_P (key at 2i, value at 2i+1)
//   positions [2P, T)        the query region, (T - 2P) / 2 (rounded down) two-token slots; slot s
//                            starts at 2P + 2s. Q slots hold a query: the key k_j of an earlier
//                            pair at 2P + 2s, the blank 0 at 2P + 2s + 1. Every other position of
//                            the query region is the blank 0 (an odd T leaves the last position
//                            blank).
//
//   targets(b, t) = the value paired with the key at t, for each query position t (the key token:
//                   next-token prediction, as Zoology's labels shifted by one); kIgnoreTarget
//                   (-100) at every other position, so exactly Q positions per row are scored.
//
// Vocabulary (vocab_size() = 1 + n_keys + n_values): 0 the blank, keys 1..n_keys (first_key()),
// values n_keys + 1 .. n_keys + n_values (first_value()): disjoint ranges, as Zoology's
// key_vocab / value_vocab halves.
//
// Sampling, per row (row by row, in this order, all from the given Rng):
//   1. the P keys: distinct, a partial Fisher–Yates shuffle of the n_keys key ids (for i in
//      [0, P): j = i + uniform_int(n_keys - i), swap, take element i);
//   2. the P values: independent, each uniform_int(n_values);
//   3. which pairs are queried: distinct, a partial Fisher–Yates shuffle of the P pair indices
//      (first Q elements), queried in that order;
//   4. the query slots: distinct, a partial Fisher–Yates shuffle of the slot indices (first Q
//      elements), sorted ascending; query j goes into the j-th smallest slot.
// Differences from Zoology's multiquery_ar, on purpose: (a) their values are distinct within a
// row; here they are independent, so chance_accuracy() is exactly 1 / n_values and no
// process-of-elimination shortcut exists; (b) their query slots follow a power law
// p(s) ∝ s^(a-1) with a = 0.01 (queries near the context); here they are uniform (a = 1), so
// query distances cover the whole sequence — what a length-extrapolation test needs; (c) their
// non-query positions hold random tokens; here they hold the blank 0; (d) Q may be smaller than P
// (they query every key: Q = P).
//
// Legend: B batch, T seq_len(), P n_pairs(), Q n_queries().
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch

namespace seqlab {

/// Target of an unscored position: torch.nn.CrossEntropyLoss's default ignore_index.
inline constexpr std::int32_t kIgnoreTarget = -100;

class MultiQueryAssociativeRecall {
 public:
  /// `seq_len` T >= 2 * n_pairs + 2 * n_queries (the context plus Q two-token query slots);
  /// `n_pairs` P >= 1; `n_queries` Q in [1, P] (distinct keys are queried); `n_keys` >= P (the P
  /// keys of a row are distinct); `n_values` >= 1. Throws std::invalid_argument naming the
  /// argument (and its value) that breaks a rule.
  MultiQueryAssociativeRecall(int seq_len, int n_pairs, int n_queries, int n_keys, int n_values);

  int seq_len() const { return seq_len_; }
  /// 1 + n_keys + n_values (the blank 0, the keys, the values).
  int vocab_size() const { return 1 + n_keys_ + n_values_; }
  int n_pairs() const { return n_pairs_; }
  int n_queries() const { return n_queries_; }
  int n_keys() const { return n_keys_; }
  int n_values() const { return n_values_; }
  /// The blank token (0): non-query positions of the query region and the slot after a query.
  static constexpr std::int32_t blank() { return 0; }
  /// Token id of key 0 (= 1); keys are first_key() .. first_key() + n_keys - 1.
  static constexpr std::int32_t first_key() { return 1; }
  /// Token id of value 0 (= 1 + n_keys); values are first_value() .. vocab_size() - 1.
  std::int32_t first_value() const { return 1 + n_keys_; }
  /// Number of two-token query slots: (seq_len - 2 * n_pairs) / 2, rounded down.
  int n_slots() const { return (seq_len_ - 2 * n_pairs_) / 2; }

  /// `batch` (>= 1, else std::invalid_argument) rows: inputs [B, T] token ids in
  /// [0, vocab_size()); targets [B, T]: the value id at each scored (query) position,
  /// kIgnoreTarget elsewhere. Deterministic given the rng state (the draw order is in the file
  /// comment; the same on every platform).
  TokenBatch sample(std::size_t batch, Rng& rng) const;

  /// Accuracy on the scored positions of the best predictor that ignores the context (it knows
  /// only the layout, so it predicts some value): 1 / n_values. A predictor that reads the
  /// context's values but not which key is queried does far better: key_agnostic_accuracy().
  double chance_accuracy() const;
  /// That predictor's cross-entropy on the scored positions (uniform over the values):
  /// ln(n_values) nats.
  double chance_loss() const;
  /// Accuracy on the scored positions of the best predictor that ignores which key is queried:
  /// it sees the P values of the context (and their keys, without binding them to the query).
  /// The queried pair is uniform over the P pairs whatever the context (the Q queried pairs are
  /// distinct, but each one alone is uniform), so given the context the target is value v with
  /// probability c_v / P, c_v the number of pairs holding v; the best guess is the most frequent
  /// context value (ties broken in any way), correct with probability max_v c_v / P. Over the
  /// generator's independent uniform values:
  ///   key_agnostic_accuracy = E[max_v c_v] / P,  (c_v) ~ multinomial(P; 1/n_values each)
  /// (expected_max_count in tasks/draw_counts.hpp). Examples, n_values = 16: P = 1: 1; P = 2:
  /// (1 + 1/16) / 2 = 0.53125; P = 4: 1.3486328125 / 4 = 0.337158203125. Not 1 / n_values: a model
  /// that copies some value of the context without binding keys reaches it. (A predictor that used
  /// the keys of earlier queries to rule their pairs out would be binding keys; it is excluded.)
  double key_agnostic_accuracy() const;
  /// The best cross-entropy (nats per scored position) of a predictor that ignores which key is
  /// queried: it predicts p(v) = c_v / P and scores the expected plug-in entropy of the counts,
  /// E[−Σ_v (c_v / P) ln(c_v / P)] (expected_plugin_entropy; n_values = 16, P = 2: (15/16) ln 2 =
  /// 0.6498; P = 4: 1.2597; P = 1: 0): at most chance_loss() = ln(n_values).
  double key_agnostic_loss() const;

 private:
  int seq_len_;
  int n_pairs_;
  int n_queries_;
  int n_keys_;
  int n_values_;
};

}  // namespace seqlab

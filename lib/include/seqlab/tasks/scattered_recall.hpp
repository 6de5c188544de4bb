#pragma once
// Multi-query associative recall with the pairs scattered over the whole row: the recall problem of
// MultiQueryAssociativeRecall (tasks/mqar.hpp; Arora et al. 2023, Zoology §3) with the key-value
// pairs no longer packed at the start but placed, like the queries, at random slots of the row,
// every query after every pair. At a longer row length the task asks the same thing (P pairs, Q
// queries) while the pairs, the queries and the distances between them spread over the whole
// length: what a length-extrapolation test of recall needs (a test at 8x the training length puts
// pairs and queries beyond every position trained on, at distances never trained on).
//
// Layout of one row (T = seq_len(), P = n_pairs(), Q = n_queries()): T / 2 (rounded down)
// two-token slots, slot s at positions 2s, 2s + 1 (an odd T leaves the last position blank).
// P + Q slots are used, chosen uniformly: the first P of them (in row order) hold the pairs (key k
// at 2s, its value v at 2s + 1), the last Q the queries (the key of a pair at 2s, the blank 0 at
// 2s + 1); every other position is the blank 0. So a query always sees all P pairs, as in MQAR,
// and the key-agnostic baseline does not depend on where the query falls.
//   targets(b, 2s) = the value of the queried pair, at each query slot s (next-token prediction,
//                    as MQAR: the key token is scored); kIgnoreTarget (-100) elsewhere: Q scored
//                    positions per row.
//   distances(b, 2s) = 2s - 2s', s' the slot of the queried pair (>= 2), at the scored positions;
//                    0 elsewhere.
// Vocabulary as MQAR's: 0 the blank, keys 1..n_keys, values n_keys + 1 .. n_keys + n_values.
//
// Sampling, per row (row by row, in this order, all from the given Rng):
//   1. the P keys: distinct, a partial Fisher–Yates shuffle of the n_keys key ids (as MQAR);
//   2. the P values: independent, each uniform_int(n_values);
//   3. the P + Q used slots: distinct, a partial Fisher–Yates shuffle of the T/2 slot indices
//      (first P + Q elements), sorted ascending;
//   4. which pairs are queried: distinct, a partial Fisher–Yates shuffle of the P pair indices
//      (first Q elements), asked in that order in the Q query slots.
// Deterministic given the Rng state, the same on every platform.
//
// Baseline (key_agnostic): the best predictor that ignores which key is queried sees the values of
// the pairs before the query (all P) but does not bind them to keys; it predicts value v with
// probability c_v / n, n the pairs before the query and c_v how many of them hold v, and guesses
// the most frequent one (a tie uniformly): expected accuracy [c_target = max_v c_v] / #{v : c_v =
// max}, loss −ln(c_target / n). Computed on the batch it scores (key_agnostic(batch)), so it is the
// exact level of that predictor on a test set; in expectation it is MQAR's key_agnostic_accuracy
// for P pairs (tasks/mqar.hpp); spec-level values come from a fixed sample.
//
// Legend: B batch, T seq_len(), P n_pairs(), Q n_queries().
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch
#include "seqlab/tasks/mqar.hpp"         // kIgnoreTarget

namespace seqlab {

/// The key-agnostic predictor's mean accuracy and loss (nats) over a batch's scored positions.
struct RecallBaseline {
  double accuracy = 0;
  double loss = 0;
  std::size_t n_scored = 0;
};

class ScatteredAssociativeRecall {
 public:
  /// `seq_len` T with T / 2 >= n_pairs + n_queries (one slot each); `n_pairs` P >= 1; `n_queries`
  /// Q in [1, P]; `n_keys` >= P; `n_values` >= 1. Throws std::invalid_argument naming the argument
  /// and its value.
  ScatteredAssociativeRecall(int seq_len, int n_pairs, int n_queries, int n_keys, int n_values);

  int seq_len() const { return seq_len_; }
  int vocab_size() const { return 1 + n_keys_ + n_values_; }
  int n_pairs() const { return n_pairs_; }
  int n_queries() const { return n_queries_; }
  int n_keys() const { return n_keys_; }
  int n_values() const { return n_values_; }
  std::int32_t first_value() const { return 1 + n_keys_; }

  /// `batch` (>= 1, else std::invalid_argument) rows: inputs and targets [B, T] (file comment).
  TokenBatch sample(std::size_t batch, Rng& rng) const;
  /// distances [B, T] of a batch of this task (file comment): at each scored position the distance
  /// back to the queried key. Throws std::invalid_argument for a batch of another shape.
  IndexTensor2 distances(const TokenBatch& batch) const;
  /// The key-agnostic baseline on `batch`'s scored positions (file comment). Throws
  /// std::invalid_argument for a batch of another shape.
  RecallBaseline key_agnostic(const TokenBatch& batch) const;
  /// key_agnostic on 2048 rows drawn from Rng(seed): the baseline the registry's spec reports.
  RecallBaseline expected_key_agnostic(std::uint64_t seed = 1) const;

 private:
  void check_shape(const TokenBatch& batch, const char* who) const;

  int seq_len_, n_pairs_, n_queries_, n_keys_, n_values_;
};

}  // namespace seqlab

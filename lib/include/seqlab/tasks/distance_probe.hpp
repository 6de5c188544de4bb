#pragma once
// Distance probe: recall one token placed a controlled distance d before the query, through d − 1
// distractor tokens, so that recall accuracy against d is a clean curve (the long-range experiment,
// claim 2 of DESIGN.md: recurrent state decays with distance; attention links any two positions
// directly). A single-hop, content-addressable version of the copy memory task of Bai et al. 2018
// (arXiv 1803.01271, §4) with one symbol instead of ten and random fillers instead of blanks.
//
// One sequence of length S = seq_len():
//
//   position S − 1 − d   the symbol s, one of n_symbols tokens (the value to recall)
//   position S − 1       the query token (0)
//   every other position a filler, drawn uniformly from n_fillers distractor tokens
//
//   targets(b, S − 1) = s (its token id); kIgnoreTarget (−100, tasks/mqar.hpp) everywhere else, so
//   exactly one position per row is scored.
//
// Vocabulary (vocab_size() = 1 + n_symbols + n_fillers): 0 the query token, symbols
// 1 .. n_symbols (first_symbol()), fillers n_symbols + 1 .. n_symbols + n_fillers (first_filler()).
// Symbols and fillers are disjoint, so the symbol is found by its content alone (no marker to
// combine with a neighbour): what grows with d is only the distance it must be carried.
//
// Baseline: the best predictor that ignores the symbol knows the answer is a symbol but not which;
// s is uniform and independent of the fillers and of d, so it guesses: accuracy 1 / n_symbols,
// cross-entropy ln(n_symbols) nats (chance_accuracy(), chance_loss()).
//
// Legend: B batch, S seq_len(), d distance in [min_distance(), max_distance()].
#include <cstddef>
#include <cstdint>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch
#include "seqlab/tasks/mqar.hpp"         // kIgnoreTarget

namespace seqlab {

class DistanceProbe {
 public:
  /// `seq_len` S >= 2; `n_symbols` >= 1; `n_fillers` >= 1 (1: a constant background);
  /// distances drawn by sample() lie in [min_distance, max_distance] with
  /// 1 <= min_distance <= max_distance <= S − 1; max_distance = 0 means S − 1.
  /// Throws std::invalid_argument naming the argument (and its value) that breaks a rule.
  DistanceProbe(int seq_len, int n_symbols = 8, int n_fillers = 8, int min_distance = 1,
                int max_distance = 0);

  int seq_len() const { return seq_len_; }
  int n_symbols() const { return n_symbols_; }
  int n_fillers() const { return n_fillers_; }
  int min_distance() const { return min_distance_; }
  int max_distance() const { return max_distance_; }
  /// 1 + n_symbols + n_fillers.
  int vocab_size() const { return 1 + n_symbols_ + n_fillers_; }
  static constexpr std::int32_t query_token() { return 0; }
  static constexpr std::int32_t first_symbol() { return 1; }
  std::int32_t first_filler() const { return 1 + n_symbols_; }
  /// The scored position: S − 1.
  int query_position() const { return seq_len_ - 1; }

  /// `batch` (>= 1) rows, each with its own distance d uniform in [min_distance, max_distance];
  /// if `distances` is non-null it receives the B distances. Per row, in this order: d =
  /// min_distance + uniform_int(max_distance − min_distance + 1) (no draw when min_distance =
  /// max_distance, so a fixed-distance probe samples as sample_at); s = first_symbol() +
  /// uniform_int(n_symbols); then one filler per remaining position, left to right, each
  /// first_filler() + uniform_int(n_fillers). Deterministic given the rng state.
  /// Throws std::invalid_argument for batch = 0.
  TokenBatch sample(std::size_t batch, Rng& rng, std::vector<int>* distances = nullptr) const;
  /// As sample() with every row at distance `distance` (no draw for d), which may lie outside
  /// [min_distance, max_distance] but must be in [1, S − 1] (std::invalid_argument otherwise).
  TokenBatch sample_at(std::size_t batch, int distance, Rng& rng) const;

  /// Accuracy of the best predictor that ignores the symbol: 1 / n_symbols.
  double chance_accuracy() const;
  /// Its cross-entropy on the scored position: ln(n_symbols) nats.
  double chance_loss() const;

 private:
  void fill_row(IndexTensor2& inputs, IndexTensor2& targets, std::size_t b, int distance,
                Rng& rng) const;

  int seq_len_;
  int n_symbols_;
  int n_fillers_;
  int min_distance_;
  int max_distance_;
};

}  // namespace seqlab

#pragma once
// Copy memory task: Bai, Kolter & Koltun 2018, "An Empirical Evaluation of Generic Convolutional
// and Recurrent Networks for Sequence Modeling" (arXiv 1803.01271), §4 "Copy Memory", generated
// exactly as their code does (locuslab/TCN, TCN/copy_memory/utils.py, data_generator):
//
//   inputs  x = [s_1 .. s_10, 0 x (T-1), 9 x 11]       (the first 9 is the delimiter)
//   targets y = [0 x 10,      0 x T,     s_1 .. s_10]
//
// with s_i drawn uniformly from {1..8}. Both have length T + 20 (the paper's "T + 20"); vocabulary
// {0..9} (10 classes). The recall positions are the last 10: t in [T + 10, T + 20). Symbol s_i is
// read at position i - 1 and must be emitted at position T + 10 + i - 1: every symbol has to be
// carried across a distance of T + 10 steps.
//
// Legend: B batch, T_total = seq_len() = T + 2 * n_memorize.
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"

namespace seqlab {

/// A batch of token sequences and per-position class targets.
struct TokenBatch {
  IndexTensor2 inputs;   // [B, T_total] token ids in [0, vocab)
  IndexTensor2 targets;  // [B, T_total] class ids in [0, vocab)
};

class CopyMemoryTask {
 public:
  /// `T`: blank length (the paper's T, >= 1); `n_memorize`: symbols to recall (paper: 10, >= 1);
  /// `n_symbols`: alphabet size of the symbols (paper: 8, symbols 1..n_symbols, >= 1).
  /// The blank token is 0 and the delimiter is n_symbols + 1 (paper: 9); vocab = n_symbols + 2.
  /// Throws std::invalid_argument naming the argument for T < 1, n_memorize < 1, n_symbols < 1.
  explicit CopyMemoryTask(int T, int n_memorize = 10, int n_symbols = 8);

  int T() const { return T_; }
  int n_memorize() const { return n_memorize_; }
  int n_symbols() const { return n_symbols_; }
  /// T + 2 * n_memorize (paper: T + 20).
  int seq_len() const { return T_ + 2 * n_memorize_; }
  /// n_symbols + 2 (paper: 10): blank 0, symbols 1..n_symbols, delimiter n_symbols + 1.
  int vocab_size() const { return n_symbols_ + 2; }
  /// The delimiter / marker token (paper: 9).
  int delimiter() const { return n_symbols_ + 1; }
  /// First position scored as recall: T + n_memorize (paper: T + 10); recall positions are
  /// [recall_start(), seq_len()).
  int recall_start() const { return T_ + n_memorize_; }

  /// Draws `batch` sequences (>= 1; throws std::invalid_argument for 0). The symbols are drawn
  /// row by row, left to right, each as 1 + rng.uniform_int(n_symbols): deterministic given the
  /// rng state (and the same on every platform).
  TokenBatch sample(std::size_t batch, Rng& rng) const;

  /// Mean cross-entropy (nats per position) over all seq_len() positions of the best predictor
  /// without memory: it knows the layout, so it is exact (loss 0) on the T + n_memorize blank
  /// targets and uniform over the n_symbols symbols on the recall positions:
  /// n_memorize * ln(n_symbols) / seq_len()  (paper: 10 ln 8 / (T + 20), Bai et al. §5.3).
  double memoryless_loss() const;
  /// The same predictor's cross-entropy on the recall positions only: ln(n_symbols) (paper: ln 8).
  double memoryless_recall_loss() const;
  /// Accuracy of guessing on a recall position: 1 / n_symbols (paper: 0.125).
  double chance_recall_accuracy() const;
  /// Accuracy on the recall positions of the best predictor that ignores which source position a
  /// recall position copies: it remembers which symbols were read and how often (their counts
  /// c_v), not their order. Given the counts, every recall position holds symbol v with
  /// probability c_v / n_memorize, so the best guess at each is the most frequent source symbol:
  ///   most_frequent_symbol_accuracy = E[max_v c_v] / n_memorize,
  ///   (c_v) ~ multinomial(n_memorize; 1/n_symbols each)
  /// (expected_max_count in tasks/draw_counts.hpp; paper's 10 symbols over 8: 0.3020, against
  /// chance_recall_accuracy() = 0.125 of a predictor without memory).
  double most_frequent_symbol_accuracy() const;
  /// That order-blind predictor's best cross-entropy per recall position: it predicts
  /// p(v) = c_v / n_memorize and scores E[−Σ_v (c_v/n) ln(c_v/n)] (expected_plugin_entropy; paper:
  /// 1.6600 nats, against ln 8 = 2.0794 without memory).
  double most_frequent_symbol_loss() const;

 private:
  int T_;
  int n_memorize_;
  int n_symbols_;
};

}  // namespace seqlab

#pragma once
// Repeat copy ("copy the input"): a decoder-only model reads n random symbols and a separator and
// must then repeat the symbols in order. The standard length-generalisation probe for positional
// encodings (Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization
// in Transformers", arXiv 2305.19466, §4 "Copy" task; Graves et al. 2014 "Neural Turing
// Machines" §4.1 copy), laid out as a prefix language model:
//
//   inputs  = [s_0 .. s_{n-1}, sep, s_0 .. s_{n-1}, pad ...]          row length 2n + 1, then pads
//   targets = [ignore × n, s_0 .. s_{n-1}, ignore, ignore ...]
//
// Next-token prediction: position n + i (the separator for i = 0, else the copy of s_{i-1})
// predicts s_i, which was read at position i: every prediction looks back a constant n positions.
// Scored positions are [n, 2n); the last real position 2n predicts nothing.
//
// Lengths: each row draws n uniformly from [n_min, n_max], n_min = max(1, ⌊(min_len - 1)/2⌋),
// n_max = ⌊(max_len - 1)/2⌋, so its real length 2n + 1 lies in [min_len - 1, max_len] (one token
// shorter than min_len only when min_len is even); rows are right-padded to width max_len with the
// pad id 0 (padding mask 1, target kIgnoreTarget). min_len = max_len = L gives n = ⌊(L-1)/2⌋ in
// every row (the evaluation setting).
//
// Tokens: pad 0, symbols 1..alphabet, separator alphabet + 1; vocab_size() = alphabet + 2.
// Sampling, row by row: n = n_min + uniform_int(n_max - n_min + 1), then s_i = 1 + uniform_int(alphabet)
// for i = 0..n-1: deterministic given the rng state, the same on every platform.
//
// Legend: B batch, W = max_len (batch width).
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/tasks/padded_tokens.hpp"

namespace seqlab {

class RepeatCopyTask {
 public:
  /// `min_len` >= 1 and `max_len` >= 3 total row lengths in tokens (min_len <= max_len);
  /// `alphabet` >= 1 symbols. Throws std::invalid_argument naming the argument and its value.
  RepeatCopyTask(int min_len, int max_len, int alphabet);

  int min_len() const { return min_len_; }
  int max_len() const { return max_len_; }
  int alphabet() const { return alphabet_; }
  /// Smallest / largest number n of symbols to copy (file comment).
  int n_min() const;
  int n_max() const { return (max_len_ - 1) / 2; }
  static constexpr std::int32_t pad() { return 0; }
  std::int32_t separator() const { return alphabet_ + 1; }
  /// alphabet + 2 (pad, symbols, separator).
  int vocab_size() const { return alphabet_ + 2; }

  /// `batch` (>= 1, else std::invalid_argument) rows of width max_len: inputs, targets, padding
  /// [B, W] and lengths [B] (= 2n + 1). Deterministic given the rng state.
  PaddedTokenBatch sample(std::size_t batch, Rng& rng) const;

  /// Accuracy per scored token of a predictor that cannot copy (guesses a symbol): 1 / alphabet.
  double chance_accuracy() const;
  /// Its cross-entropy per scored token: ln(alphabet) nats.
  double chance_loss() const;

 private:
  int min_len_, max_len_, alphabet_;
};

}  // namespace seqlab

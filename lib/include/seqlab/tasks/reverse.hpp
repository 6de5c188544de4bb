#pragma once
// Sequence reversal, a transduction task: read a source sequence, emit it backwards. Output token
// i depends on source token n-1-i only, so every output must look up a position that moves with
// i — the classic synthetic seq2seq test (Sutskever et al. 2014 §3.3 reverse the source to help
// LSTMs; Graves et al. 2014 and the "reverse" task of many Transformer ablations). The same data
// are laid out for the three architectures (DESIGN.md claim 5):
//
//   encoder-decoder:  source = x [B, n];  decoder input = shift_right(y) = [bos, y_0 .. y_{n-2}];
//                     targets = y [B, n] (teacher forcing, Vaswani et al. 2017 §3)
//   decoder-only (prefix-conditioned LM, Raffel et al. 2020 §3.2.1 "prefix LM"):
//                     inputs  = [x_0 .. x_{n-1}, sep, y_0 .. y_{n-2}]              [B, 2n]
//                     targets = [ignore × n, y_0 .. y_{n-1}]  (loss on the target half only;
//                     position n - 1 + i + 1 = n + i predicts y_i from x and y_{<i})
//   encoder-only:     inputs = x, targets = y per position (same length: no padding needed; the
//                     bidirectional encoder sees all of x at every position)
//
// Tokens: symbols 0..S-1 (S = n_symbols()); separator() = S is the decoder-only separator and the
// encoder-decoder bos; vocab_size() = S + 1. y_i = x_{n-1-i}.
//
// Sampling: row by row, left to right, x_t = uniform_int(S): deterministic given the rng state and
// the same on every platform.
//
// Legend: B batch, n length().
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch
#include "seqlab/tasks/mqar.hpp"         // kIgnoreTarget

namespace seqlab {

/// A batch of (source, target) sequence pairs.
struct TransductionBatch {
  IndexTensor2 source;  // [B, n] token ids
  IndexTensor2 target;  // [B, n] token ids
};

class ReverseTask {
 public:
  /// `length` n >= 1; `n_symbols` S >= 2. Throws std::invalid_argument naming the argument and
  /// its value.
  ReverseTask(int length, int n_symbols);

  int length() const { return length_; }
  int n_symbols() const { return n_symbols_; }
  /// S: separator (decoder-only layout) and bos (encoder-decoder layout).
  std::int32_t separator() const { return n_symbols_; }
  /// S + 1 (symbols and the separator).
  int vocab_size() const { return n_symbols_ + 1; }

  /// `batch` (>= 1, else std::invalid_argument) pairs: source [B, n] in [0, S), target [B, n] its
  /// reversal. Deterministic given the rng state.
  TransductionBatch sample(std::size_t batch, Rng& rng) const;

  /// Decoder-only layout of `pair` (file comment): inputs [B, 2n], targets [B, 2n] with
  /// kIgnoreTarget on the source half. Throws ShapeError unless source and target are [B, n].
  TokenBatch prefix_lm(const TransductionBatch& pair) const;
  /// Encoder-decoder decoder input [B, n]: [separator(), y_0 .. y_{n-2}] per row.
  /// Throws ShapeError unless target is [B, n].
  IndexTensor2 decoder_input(const TransductionBatch& pair) const;

  /// Accuracy per target token of a predictor that ignores the source: 1 / S.
  double chance_accuracy() const;
  /// Its cross-entropy per target token (uniform over the symbols): ln S nats.
  double chance_loss() const;

 private:
  int length_, n_symbols_;
};

}  // namespace seqlab

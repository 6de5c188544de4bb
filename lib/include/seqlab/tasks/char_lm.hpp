#pragma once
// Character-level language modelling on a text file: every byte (UTF-8 code unit) of the text is
// a token, and the model predicts the next one (the setting of Al-Rfou et al. 2019 and of the
// enwik8/text8 benchmarks; Press et al. 2021, "Train Short, Test Long" (ALiBi), evaluate
// positional encodings this way on words, Figure 1 / Table 1).
//
// Splits: the first N - n_test bytes are the train split, the last n_test = ⌈test_fraction · N⌉ the
// test split (contiguous, as enwik8's 90M/5M/5M split; no shuffling, so no test text is trained on).
// Vocabulary: the distinct bytes of the whole text in increasing byte order, ids 0..V-1
// (vocab_size() = V); id(c) / byte(i) convert.
//
// Windows: a row of length ℓ starting at offset o of a split has inputs = ids[o, o + ℓ) and
// targets = ids[o + 1, o + ℓ + 1) (next-byte prediction at every position), so a split of S bytes
// holds windows of ℓ <= S - 1. Rows are right-padded to width max_len: pad input id 0 (a real
// character, never seen by the model because of the padding mask and causal attention), target
// kIgnoreTarget, padding mask 1.
// Sampling, row by row: ℓ = min_len + uniform_int(max_len - min_len + 1), then
// o = uniform_int(S - ℓ): deterministic given the rng state, the same on every platform.
//
// Legend: B batch, W = max_len (batch width), N text size in bytes, V vocab_size().
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/tasks/padded_tokens.hpp"

namespace seqlab {

enum class CorpusSplit { train, test };

class CharCorpus {
 public:
  /// `text` (N >= 4 bytes); `test_fraction` in (0, 1) with both splits at least 2 bytes long.
  /// Throws std::invalid_argument naming text or test_fraction.
  CharCorpus(std::string text, double test_fraction);
  /// Reads the whole file (binary). Throws std::runtime_error naming the path if it cannot be
  /// opened or read, std::invalid_argument (as the constructor) if it is too small.
  static CharCorpus from_file(const std::string& path, double test_fraction);

  /// V: number of distinct bytes in the text.
  int vocab_size() const { return static_cast<int>(bytes_.size()); }
  /// Id of byte c; throws std::out_of_range if c does not occur in the text.
  std::int32_t id(unsigned char c) const;
  /// Byte of id i in [0, V); throws std::out_of_range otherwise.
  unsigned char byte(std::int32_t i) const;
  std::size_t size() const { return ids_.size(); }
  /// Bytes in the split: N - n_test (train) or n_test (test).
  std::size_t split_size(CorpusSplit split) const;
  /// Longest window a split holds: split_size - 1.
  std::size_t max_window(CorpusSplit split) const { return split_size(split) - 1; }

  /// `batch` >= 1 windows of lengths in [min_len, max_len] (1 <= min_len <= max_len <=
  /// max_window(split)) from `split`, padded to max_len. Throws std::invalid_argument naming
  /// batch, min_len or max_len.
  PaddedTokenBatch sample(std::size_t batch, std::size_t min_len, std::size_t max_len,
                          CorpusSplit split, Rng& rng) const;

  /// Baseline: cross-entropy (nats per byte) on the targets of the test split of the train
  /// split's unigram model with add-one (Laplace) smoothing, p(c) = (count_train(c) + 1) /
  /// (N_train + V). A model that uses no context at all cannot do much better.
  double unigram_test_loss() const;

 private:
  std::vector<std::int32_t> ids_;      // [N]
  std::vector<unsigned char> bytes_;   // [V] byte of each id
  std::array<std::int32_t, 256> id_of_{};  // -1 for bytes not in the text
  std::size_t n_test_ = 0;
};

}  // namespace seqlab

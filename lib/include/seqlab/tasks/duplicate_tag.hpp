#pragma once
// Duplicate tagging: tag every position with whether its token occurs ANYWHERE ELSE in the
// sequence, before or after it. A per-position classification whose label at t depends on the
// tokens on both sides of t: a bidirectional encoder can read it off one attention over the whole
// sequence; a causal model sees only the earlier half of the evidence at position t (it must
// defer the decision until the whole sequence has been read, e.g. by emitting the tags after it,
// as the text-to-text layouts of Raffel et al. 2020 §3.2 do).
//
// Layout of one row (n = length(), V = vocab_size()):
//   inputs(r, t)  = x_t, i.i.d. uniform over the V tokens 0..V-1, t in [0, n)
//   targets(r, t) = 1 if x_s = x_t for some s != t, else 0   (every position scored)
//
// Baseline (the best predictor that ignores the other positions): the prior of the tag, p =
// P(tag 1) = 1 - (1 - 1/V)^(n-1); it predicts the more likely tag, accuracy max(p, 1 - p), and
// its cross-entropy is the binary entropy H(p) nats. A predictor that sees only the positions
// before t (a causal reading at t) knows the tag is 1 when x_t occurred before, else it is 1 with
// probability 1 - (1 - 1/V)^(n-1-t): causal_accuracy() averages its best guess over t.
//
// Sampling: row by row, left to right, x_t = uniform_int(V): deterministic given the rng state
// and the same on every platform.
//
// Legend: B batch, n length(), V vocab_size().
#include <cstddef>
#include <cstdint>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/tasks/copy_memory.hpp"  // TokenBatch

namespace seqlab {

class DuplicateTagTask {
 public:
  /// `length` n >= 2; `vocab_size` V >= 2. Throws std::invalid_argument naming the argument and
  /// its value.
  DuplicateTagTask(int length, int vocab_size);

  int length() const { return length_; }
  int vocab_size() const { return vocab_size_; }

  /// `batch` (>= 1, else std::invalid_argument) rows: inputs [B, n] in [0, V), targets [B, n] in
  /// {0, 1} (file comment). Deterministic given the rng state.
  TokenBatch sample(std::size_t batch, Rng& rng) const;

  /// p = P(tag 1) = 1 - (1 - 1/V)^(n-1).
  double duplicate_probability() const;
  /// The baseline's accuracy max(p, 1 - p).
  double prior_accuracy() const;
  /// Its cross-entropy H(p) = -p ln p - (1-p) ln(1-p) nats.
  double prior_loss() const;
  /// The accuracy of the best predictor that sees x_0..x_t only, averaged over t (file comment):
  /// (1/n) Σ_t [P(seen before) + (1 - P(seen before)) · max(q_t, 1 - q_t)], with
  /// P(seen before) = 1 - (1 - 1/V)^t and q_t = 1 - (1 - 1/V)^(n-1-t).
  double causal_accuracy() const;

 private:
  int length_, vocab_size_;
};

}  // namespace seqlab

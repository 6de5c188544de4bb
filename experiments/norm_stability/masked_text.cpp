// norm_stability's masked-character batches (masked_text.hpp).
#include "masked_text.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget

namespace norm_stability {

using namespace seqlab;

MaskedText::MaskedText(std::shared_ptr<const TextCorpus> corpus, std::size_t seq_len,
                       std::size_t min_len, double mask_fraction)
    : corpus_(std::move(corpus)), seq_len_(seq_len), min_len_(min_len), mask_fraction_(mask_fraction) {
  if (!corpus_) throw std::invalid_argument("MaskedText: corpus is null");
  if (seq_len < 2) throw std::invalid_argument("MaskedText: seq_len = " + std::to_string(seq_len) + "; must be >= 2");
  if (min_len < 1 || min_len > seq_len)
    throw std::invalid_argument("MaskedText: min_len = " + std::to_string(min_len) + "; must be in [1, seq_len = " +
                                std::to_string(seq_len) + "]");
  if (!(mask_fraction > 0 && mask_fraction <= 1))
    throw std::invalid_argument("MaskedText: mask_fraction = " + std::to_string(mask_fraction) + "; must be in (0, 1]");
  corpus_->require_window(seq_len);
}

std::size_t MaskedText::length_for(double p) const {
  if (!(p >= 0 && p <= 1))
    throw std::invalid_argument("MaskedText: padding share " + std::to_string(p) + "; must be in [0, 1]");
  const long pad = std::lround(p * static_cast<double>(seq_len_));
  const long len = static_cast<long>(seq_len_) - pad;
  return static_cast<std::size_t>(std::max<long>(static_cast<long>(min_len_), len));
}

TaskBatch MaskedText::sample(std::size_t batch, double pad_share, Rng& rng, TextSplit split) const {
  if (batch == 0) throw std::invalid_argument("MaskedText::sample: batch = 0; must be >= 1");
  const std::size_t T = seq_len_, L = length_for(pad_share);
  const TokenBatch w = corpus_->sample(batch, T, rng, split);
  TaskBatch b;
  b.tokens = w.inputs;
  b.targets = IndexTensor2::from_shape({batch, T});
  b.padding = PaddingMask::from_shape({batch, T});
  b.lengths = IndexTensor1::from_shape({batch});
  for (std::size_t r = 0; r < batch; ++r) {
    b.lengths(r) = static_cast<std::int32_t>(L);
    bool any = false;
    for (std::size_t t = 0; t < T; ++t) {
      b.targets(r, t) = kIgnoreTarget;
      b.padding(r, t) = t < L ? 0 : 1;
      if (t >= L) {
        b.tokens(r, t) = pad_id();
        continue;
      }
      if (rng.uniform() < mask_fraction_) {
        b.targets(r, t) = w.inputs(r, t);
        b.tokens(r, t) = mask_id();
        any = true;
      }
    }
    if (!any) {
      const std::size_t t = static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(L)));
      b.targets(r, t) = w.inputs(r, t);
      b.tokens(r, t) = mask_id();
    }
  }
  return b;
}

TaskBatch MaskedText::sample_mixed(std::size_t batch, const std::vector<double>& shares, Rng& rng,
                                   TextSplit split, double* drawn) const {
  if (shares.empty()) throw std::invalid_argument("MaskedText::sample_mixed: no padding shares");
  const double p = shares[static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(shares.size())))];
  if (drawn) *drawn = p;
  return sample(batch, p, rng, split);
}

TaskSpec MaskedText::spec() const {
  TaskSpec s;
  s.input = "embedding";
  s.vocab_size = embedding_size();
  s.seq_len = seq_len_;
  s.target = "classes";
  s.output_size = vocab_size();
  s.head = "per_position";
  s.padded = true;
  return s;
}

}  // namespace norm_stability

#pragma once
// norm_stability's token-level task for the BatchNorm studies: masked-character modelling on a
// text corpus (the registry's `text` task: the KJV from Debian by default, tasks/text.hpp) in
// length-bucketed, right-padded batches whose padding share is chosen per batch (README.md
// "Method").
//
// A batch at padding share p: B windows of T consecutive symbols of one split
// (TextCorpus::sample), each cut to the same real length L = max(min_len, T − round(p·T)) and
// padded with pad_id() up to T, so that every row of the batch, and the batch, has the padding
// share 1 − L/T (exactly p when p·T is an integer). Of each row's L real positions, each is masked
// independently with probability mask_fraction (at least one per row: if none was drawn, one
// position drawn uniformly is); a masked position's input is mask_id() and its target the symbol's
// id; every other position's target is kIgnoreTarget (-100, not scored). The model sees the whole
// row (a bidirectional encoder), so a target is predicted from its context on both sides: BERT's
// masked language modelling (Devlin et al. 2019, §3.1) at the character level, without the 80/10/10
// replacement. The loss is not a function of a per-sequence mean (unlike majority voting), so
// normalising each feature over one sequence's positions (BatchNorm at batch 1) does not remove
// the evidence.
//
// Ids: the corpus's V ids (text symbols, the last the unknown id), pad_id() = V, mask_id() = V + 1;
// the embedding has V + 2 rows, the head V outputs.
//
// Draw order per batch, from `rng`: the windows (TextCorpus::sample: one uniform_int per row), then
// row by row, position by position, one uniform() per real position, then (only for a row with no
// masked position) one uniform_int(L). Deterministic given the rng state.
//
// Legend: B batch, T seq_len, L the real length, V the corpus vocabulary.
#include <cstddef>
#include <memory>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/tasks/text.hpp"

namespace norm_stability {

class MaskedText {
 public:
  /// Throws std::invalid_argument naming the argument: corpus null, seq_len < 2, min_len < 1 or
  /// > seq_len, mask_fraction outside (0, 1]; ConfigError (key seq_len) from
  /// TextCorpus::require_window if a split holds no window of seq_len + 1 symbols.
  MaskedText(std::shared_ptr<const seqlab::TextCorpus> corpus, std::size_t seq_len,
             std::size_t min_len, double mask_fraction);

  /// L for padding share p in [0, 1]: max(min_len, T − round(p·T)). Throws std::invalid_argument
  /// for p outside [0, 1].
  std::size_t length_for(double pad_share) const;
  /// A batch (file comment): tokens, targets, padding [B, T], lengths [B]. Throws
  /// std::invalid_argument for batch = 0 or a share outside [0, 1].
  seqlab::TaskBatch sample(std::size_t batch, double pad_share, seqlab::Rng& rng,
                           seqlab::TextSplit split) const;
  /// A batch whose share is drawn uniformly from `shares` (one uniform_int before the batch).
  seqlab::TaskBatch sample_mixed(std::size_t batch, const std::vector<double>& shares,
                                 seqlab::Rng& rng, seqlab::TextSplit split, double* drawn = nullptr) const;

  std::size_t seq_len() const { return seq_len_; }
  std::size_t vocab_size() const { return corpus_->vocab_size(); }  // V (the head's outputs)
  std::int32_t pad_id() const { return static_cast<std::int32_t>(corpus_->vocab_size()); }
  std::int32_t mask_id() const { return pad_id() + 1; }
  std::size_t embedding_size() const { return corpus_->vocab_size() + 2; }
  const seqlab::TextCorpus& corpus() const { return *corpus_; }

  /// The embedding input's spec: embedding_size() ids, V outputs per position, padded.
  seqlab::TaskSpec spec() const;

 private:
  std::shared_ptr<const seqlab::TextCorpus> corpus_;
  std::size_t seq_len_, min_len_;
  double mask_fraction_;
};

}  // namespace norm_stability

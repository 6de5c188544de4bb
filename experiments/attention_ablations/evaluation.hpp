#pragma once
// attention_ablations' measurements (main.cpp): loss, accuracy and exact match on fixed sets
// (evaluate_chunked, train/metrics.hpp), the attention diagnostics of every self-attention after
// one eval-mode forward (MultiheadAttention::logit_asymmetry and attention_probs), and test-time
// head pruning (Michel et al. 2019) through MultiheadAttention::set_head_mask.
// Columns: README.md beside this file.
#include <cmath>
#include <cstddef>
#include <vector>

#include "seqlab/models/sequence_model.hpp"
#include "seqlab/tasks/task.hpp"

#include "arms.hpp"

namespace attention_ablations {

struct Evaluation {
  double loss = NAN;         // mean CE over scored positions, nats
  double accuracy = NAN;     // fraction of scored positions whose argmax is the target
  double exact_match = NAN;  // fraction of sequences (with a scored position) with every one right
};

/// `sets` through `model` in chunks of 128 sequences, in the model's current mode (eval for test
/// metrics), each batch after task.prepare; the sums over all batches (a position counts once).
Evaluation evaluate(seqlab::SequenceModel& model, const ArmTask& task, const std::vector<seqlab::TaskBatch>& sets);

struct AttentionDiagnostics {
  double logit_asymmetry = NAN;  // mean over self-attentions of MultiheadAttention::logit_asymmetry
  double diag_attention = NAN;   // mean attention probability of a query on its own position
  double prev_attention = NAN;   // max over self-attentions and heads of the mean probability of
                                 // query t on key t-1 (t >= 1)
};

/// Puts `model` in eval mode, runs one forward of `probe`, then reads every self-attention
/// (encoder layers, then decoder layers; cross-attention excluded). Leaves the model in eval mode.
AttentionDiagnostics diagnose(seqlab::SequenceModel& model, const ArmTask& task, const seqlab::TaskBatch& probe);

/// Test-time head pruning (Michel, Levy & Neubig 2019, §3 "ablating one head" and §4.2 global
/// pruning by importance), for single-stack models.
struct HeadAblation {
  std::size_t layer = 0, head = 0;
  double loss_masked = NAN;  // validation loss with only this head masked (ξ = 0)
  double importance = NAN;   // loss_masked − the unmasked validation loss (nats)
};
struct PruneLevel {
  double fraction = 0;        // requested share of all L·h heads to remove
  std::size_t removed = 0;    // round(fraction · L·h) heads, the least important first
  Evaluation test;            // test metrics with those heads masked
};
struct PruneResult {
  double valid_loss = NAN;            // unmasked validation loss
  std::vector<HeadAblation> heads;    // every head, layer by layer
  std::vector<PruneLevel> levels;     // one per fraction, in the order given
};
/// The importance of every head on `valid` (the loss increase when it alone is masked), then for
/// each fraction the test metrics with the round(fraction·L·h) least important heads masked (ties
/// broken by layer, then head). Restores the model's head masks to none. Empty result for
/// models without per-layer self-attentions (encoder-decoder) or with one head.
PruneResult prune_heads(seqlab::SequenceModel& model, const ArmTask& task, const std::vector<seqlab::TaskBatch>& valid,
                        const std::vector<seqlab::TaskBatch>& test, const std::vector<double>& fractions);

}  // namespace attention_ablations

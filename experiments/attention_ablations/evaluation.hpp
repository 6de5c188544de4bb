#pragma once
// attention_ablations' measurements (main.cpp): loss, accuracy and exact match on a fixed set
// (evaluate_chunked, train/metrics.hpp), and the attention diagnostics of every self-attention
// after one eval-mode forward (MultiheadAttention::logit_asymmetry and attention_probs).
// Columns: README.md beside this file.
#include <cmath>

#include "seqlab/models/sequence_model.hpp"
#include "seqlab/tasks/task.hpp"

namespace attention_ablations {

struct Evaluation {
  double loss = NAN;         // mean CE over scored positions, nats
  double accuracy = NAN;     // fraction of scored positions whose argmax is the target
  double exact_match = NAN;  // fraction of sequences (with a scored position) with every one right
};

/// `set` through `model` in chunks of 128 sequences, in the model's current mode (eval for test
/// metrics); the encoder-decoder reads tokens and decoder_tokens (teacher forcing).
Evaluation evaluate(seqlab::SequenceModel& model, const seqlab::TaskBatch& set);

struct AttentionDiagnostics {
  double logit_asymmetry = NAN;  // mean over self-attentions of MultiheadAttention::logit_asymmetry
  double diag_attention = NAN;   // mean attention probability of a query on its own position
  double prev_attention = NAN;   // max over self-attentions and heads of the mean probability of
                                 // query t on key t-1 (t >= 1)
};

/// Puts `model` in eval mode, runs one forward of `probe`, then reads every self-attention
/// (encoder layers, then decoder layers; cross-attention excluded). Leaves the model in eval mode.
AttentionDiagnostics diagnose(seqlab::SequenceModel& model, const seqlab::TaskBatch& probe);

}  // namespace attention_ablations

#pragma once
// norm_stability's classifier head and evaluation (main.cpp): the class logits are the mean of
// the per-position logits over each sequence's real positions (pool, unpool), scored on a fixed
// test set in train mode (batch statistics) or eval mode (running statistics); and the per-run
// summaries of the training histories. Columns: README.md beside this file.
//
// Legend: B batch, T seq_len, K n_classes, L_b the real length of row b (TaskBatch::lengths).
#include <cmath>
#include <cstddef>
#include <vector>

#include "probe.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/tasks/task.hpp"

namespace norm_stability {

/// logits [B, T, K] -> class logits [B, K]: row b's mean over its real positions t < L_b
/// (summed in double in t order). With a linear per-position head this is the head applied to the
/// mean-pooled features.
seqlab::Tensor2 pool(const seqlab::Tensor3& logits, const seqlab::IndexTensor1& lengths);
/// d(class logits) [B, K] -> d(logits) [B, T, K]: d/L_b at real positions, 0 at padded ones.
seqlab::Tensor3 unpool(const seqlab::Tensor2& d, const seqlab::IndexTensor1& lengths, std::size_t T);

struct Metrics {
  double accuracy = NAN;  // fraction of sequences whose argmax class is the label
  double loss = NAN;      // mean cross-entropy, nats
};

/// The model on `test` (a majority batch: tokens, padding, targets [B, 1], lengths), in chunks of
/// `chunk` sequences (the training batch size), in train mode (BatchNorm normalises with the
/// statistics of each chunk, as in training; its running statistics are restored afterwards) or
/// eval mode (running statistics). Both modes use the same chunks, so for norms without batch
/// statistics they are the same computation, bit for bit. Scored by score_classes
/// (train/metrics.hpp: argmax as torch.argmax; a sequence whose loss is not finite, e.g. NaN
/// logits, is wrong). The probe is disabled; leaves the model in train mode.
Metrics evaluate(seqlab::TransformerModel& model, ProbedNorm& probe, const seqlab::TaskBatch& test,
                 bool train_mode, std::size_t chunk);

/// A run's summaries of its per-update histories (README.md "Per run").
struct RunSummary {
  double loss_volatility = NAN;      // sqrt(mean((l_t - l_{t-1})^2) / 2), second half of the steps
  double mu_dev_late = NAN, var_dev_late = NAN, pad_mean_shift_late = NAN;  // second-half means
  double final_train_loss = NAN;     // mean loss of the last `window` updates
  double grad_norm_first = NAN, grad_norm_max = NAN;
};

/// Summaries over the updates done (`losses`, `grad_norms`, `stats`: one entry per update);
/// "second half" = updates [steps / 2, done) of the `steps` planned.
RunSummary summarize(const std::vector<double>& losses, const std::vector<double>& grad_norms,
                     const std::vector<ProbeStats>& stats, int steps, std::size_t window);

}  // namespace norm_stability

#pragma once
// norm_stability's evaluation of a trained model on a fixed token-level test set in the four ways
// the BatchNorm studies compare (README.md "Method"), and the statistics a norm keeps.
//
//   eval     the running statistics training kept (BatchNorm's running mean and variance,
//            PowerNorm's running quadratic mean): what inference uses;
//   train    every chunk of `chunk` rows (the training batch size) normalised with its own batch
//            statistics, as in training (the running statistics are restored afterwards);
//   precise  "precise BN" (Wu & Johnson 2021, "Rethinking 'Batch' in BatchNorm", §3.1; fvcore's
//            update_bn_stats): the running statistics replaced by the equal-weight average, over
//            K calibration batches (of the training batch size) drawn from a stated distribution with the final weights, of
//            each layer's batch statistics (BatchNorm: batch means and unbiased batch variances;
//            PowerNorm: batch quadratic means), then eval mode. Calibrated on the training
//            distribution it measures what the running average's lag and noise cost; calibrated
//            on the test set's own padding share ("recal") what a shift between the training and
//            the test distribution costs through the statistics alone.
// Per-position norms (LayerNorm, RMSNorm, none) keep no statistics: the four are the same
// computation for them.
//
// Legend: B batch, T seq_len, D d_model.
#include <cmath>
#include <cstddef>
#include <vector>

#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/tasks/task.hpp"

namespace norm_stability {

struct Metrics {
  double loss = NAN;      // mean cross-entropy over the scored positions, nats
  double accuracy = NAN;  // fraction of scored positions whose argmax is the target
  std::size_t n = 0;      // scored positions
};

/// The norms of the model that keep batch statistics (BatchNorm and PowerNorm; through a
/// ProbedNorm, probe.hpp), in layer order (norm1, norm2 of each layer, then the final norm).
std::vector<seqlab::Norm*> stat_norms(seqlab::TransformerModel& model);

/// The model on `test` in eval mode, or in train mode (batch statistics of chunks of `chunk`
/// rows; every buffer is restored afterwards). The model is left in eval mode; the probe (if any)
/// must be disabled. Throws what evaluate_chunked throws.
Metrics evaluate(seqlab::TransformerModel& model, const seqlab::TaskBatch& test, bool train_mode,
                 std::size_t chunk);

/// Precise statistics: replaces the running statistics of every stat_norms layer by the
/// equal-weight average of its batch statistics over `calib` (each a batch with its padding),
/// every batch forwarded in train mode with the model's buffers as they were before the first
/// (so PowerNorm normalises each with its trained running quadratic mean). The caller snapshots
/// the model's buffers (state_dict) before and restores them after. Leaves the model in eval mode.
void calibrate(seqlab::TransformerModel& model, const std::vector<seqlab::TaskBatch>& calib);

/// Gradient norms of a causal LM at initialisation (Xiong et al. 2020, Fig. 3): for every layer
/// l, ‖∂L/∂W‖_F of its feed-forward output weight W^{2,l} ("layers.l.linear2.weight") and of its
/// attention input projection ("layers.l.self_attn.in_proj_weight"), averaged over `batches`
/// (a fresh zero_grad, forward and backward each, train mode, the mean next-symbol
/// cross-entropy). Returns [L][2] = {linear2, in_proj}. Leaves every gradient zero.
std::vector<std::vector<double>> init_gradient_norms(seqlab::TransformerModel& model,
                                                     const std::vector<seqlab::TaskBatch>& batches);

}  // namespace norm_stability

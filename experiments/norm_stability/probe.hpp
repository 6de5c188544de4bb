#pragma once
// norm_stability's probe on the first norm layer (layers.0.norm1) of the model: the batch
// statistics of every training step and how far they are from the running ones (main.cpp,
// README.md "Per step").
//
// Legend: B batch, T seq_len, D d_model.
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/norm.hpp"

namespace norm_stability {

/// Statistics of one training step at the probed norm, over its input x [B, T, D]:
///   mu_dev  = (1/D)·‖μ_B − μ_run‖₂,  var_dev = (1/D)·‖σ²_B − σ²_run‖₂   (Shen et al. 2020 §3,
///             Fig. 2: the average Euclidean distance between batch and running statistics);
///   BatchNorm (batch_norm, masked_batch_norm): μ_B, σ²_B = the layer's own batch statistics of
///             this step (last_batch_stats: biased variance, the one it normalised with), μ_run,
///             σ²_run = its running statistics BEFORE this step's update (what eval mode uses);
///   other norms: the same quantities computed on the same input for comparison — μ_B, σ²_B over
///             the non-padded positions (what masked_batch_norm would use), μ_run, σ²_run an
///             exponential average of them kept by the probe exactly as BatchNorm keeps its
///             running statistics (momentum 0.1, unbiased variance, start 0 and 1);
///   pad_mean_shift = (1/D)·‖μ_all − μ_real‖₂, pad_var_shift = (1/D)·‖σ²_all − σ²_real‖₂: how far
///             the statistics over ALL positions (naive batch_norm's) are from those over the real
///             positions only — the pollution by padding, for every norm (0 without padding);
///   stat_count = positions entering μ_B (BatchNorm: its count; others: the real positions),
///   n_real = non-padded positions of the batch.
struct ProbeStats {
  double mu_dev = NAN, var_dev = NAN, pad_mean_shift = NAN, pad_var_shift = NAN;
  std::size_t stat_count = 0, n_real = 0;
};

/// Wraps a Norm, delegating everything to it, and measures ProbeStats on train-mode forwards
/// while enabled. Parameters are the wrapped norm's (same keys, same objects).
class ProbedNorm : public seqlab::Norm {
 public:
  explicit ProbedNorm(std::unique_ptr<seqlab::Norm> inner);

  seqlab::Tensor3 forward(const seqlab::Tensor3& x, const seqlab::PaddingMask* padding) override;
  seqlab::Tensor3 backward(const seqlab::Tensor3& dy) override { return inner_->backward(dy); }
  seqlab::Tensor3 backward_add(const seqlab::Tensor3& dy, const seqlab::Tensor3& residual) override {
    return inner_->backward_add(dy, residual);
  }
  std::string name() const override { return inner_->name(); }
  std::size_t dim() const override { return inner_->dim(); }
  void collect_parameters(const std::string& prefix, std::vector<seqlab::NamedParameter>& out) override {
    inner_->collect_parameters(prefix, out);
  }
  void set_training(bool training) override;
  /// The wrapped norm's buffers (same keys), plus the reference running statistics of the real
  /// positions ("probe_ref_mean", "probe_ref_var" [D]) that training updates.
  void collect_buffers(const std::string& prefix, std::vector<seqlab::NamedBuffer>& out) override;

  void set_enabled(bool on) { enabled_ = on; }
  const ProbeStats& last() const { return last_; }
  seqlab::Norm* inner() { return inner_.get(); }

 private:
  std::unique_ptr<seqlab::Norm> inner_;
  seqlab::BatchNorm* bn_;
  bool enabled_ = false;
  std::vector<double> ref_mean_, ref_var_;
  ProbeStats last_;
};

/// Wraps layers.0.norm1 of `model` in a ProbedNorm (disabled) and returns it; the model owns it.
ProbedNorm& install_probe(seqlab::TransformerModel& model);

}  // namespace norm_stability

#pragma once
// Normalisation layers for the Transformer family: LayerNorm, RMSNorm, BatchNorm over the
// (batch × time) positions (naive, or with padded positions excluded from the statistics),
// PowerNorm (Shen et al. 2020: a running quadratic mean, padded positions excluded) and an
// identity "none", behind one interface (Norm) so a Transformer layer picks its norm by name
// (make_norm).
//
// Legend: B batch, T seq_len, D = d (the normalised feature size), N = B·T positions (rows).
// Inputs and outputs are [B, T, D]; a padding mask is a PaddingMask [B, T] (1 = padded).
//
// Per-position norms (LayerNorm, RMSNorm, none) normalise each [D] row on its own, so padding
// cannot influence a real position; they accept a mask only to check its shape. BatchNorm
// normalises each feature over the positions of the batch, so padded positions pollute its
// statistics unless excluded (masked_batch_norm; PowerNorm always excludes them) — the effect
// the norm_stability experiment measures (DESIGN.md claim 4).
//
// Every layer follows the layer contract: forward keeps what backward needs, backward takes
// dL/dy [B, T, D], returns dL/dx [B, T, D] and ADDS into the parameter grads. Statistics are
// accumulated in double, stored in float.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/registry.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

/// Common interface so Transformer layers switch norms by name.
class Norm : public Module {
 public:
  /// x [B, T, D] -> y [B, T, D]. `padding` (optional) [B, T], 1 = padded; only masked BatchNorm
  /// uses it, every norm checks its shape. Throws ShapeError if x is not [*, *, D] or padding is
  /// not [B, T].
  virtual Tensor3 forward(const Tensor3& x, const PaddingMask* padding = nullptr) = 0;
  /// dy [B, T, D] (shape of the last forward's x) -> dx [B, T, D]; adds parameter grads.
  /// Throws std::logic_error before any forward, ShapeError if dy's shape differs.
  virtual Tensor3 backward(const Tensor3& dy) = 0;
  /// backward(dy) + residual [B, T, D] in one result: dL/dx of the Pre-LN residual block
  /// y = x + F(norm(x)) (Xiong et al. 2020, arXiv 2002.04745, Table 1), where the residual path
  /// contributes dL/dy unchanged. LayerNorm adds residual in its own pass over dx (no second
  /// pass; the same bits as backward then the sum); the others add it after backward. Throws as
  /// backward, and ShapeError (before any gradient is added) if residual is not dy's shape.
  virtual Tensor3 backward_add(const Tensor3& dy, const Tensor3& residual);
  /// The make_norm name: "layer_norm", "rms_norm", "batch_norm", "masked_batch_norm", "none",
  /// "power_norm".
  virtual std::string name() const = 0;
  /// D, the normalised feature size.
  virtual std::size_t dim() const = 0;
};

/// Layer normalisation (Ba, Kiros & Hinton 2016, arXiv 1607.06450 eq. 4), as torch.nn.LayerNorm(d)
/// (https://pytorch.org/docs/1.13/generated/torch.nn.LayerNorm.html), per position over D:
///   μ = mean(x),  σ² = mean((x − μ)²)  (biased),  x̂ = (x − μ) / sqrt(σ² + eps),  y = γ ⊙ x̂ + β.
/// Example: γ = 1, β = 0, eps = 1e-5, x = [1, 0, 0, 0] -> [1.732005, −0.577335, −0.577335, −0.577335]
/// (not the unbiased-std form of some tutorials).
/// Backward (llm.c doc/layernorm): g = γ ⊙ dy; dx = (g − mean(g) − x̂ · mean(g ⊙ x̂)) / sqrt(σ² + eps);
/// dγ += Σ_positions dy ⊙ x̂; dβ += Σ_positions dy.
class LayerNorm : public Norm {
 public:
  /// "weight" γ [d] = 1 and "bias" β [d] = 0 (PyTorch's init). affine = false: no parameters
  /// (γ = 1, β = 0; both members then have shape [0] and are not listed).
  /// Throws std::invalid_argument naming the argument if d = 0 or eps is not > 0.
  explicit LayerNorm(std::size_t d, float eps = 1e-5f, bool affine = true);

  /// x [B, T, D] -> y [B, T, D]; padding is ignored (shape-checked only). Caches x̂ [N, D] and
  /// 1/sqrt(σ² + eps) [N]. Throws ShapeError for a wrong x, padding or parameter shape.
  Tensor3 forward(const Tensor3& x, const PaddingMask* padding = nullptr) override;
  Tensor3 backward(const Tensor3& dy) override;
  Tensor3 backward_add(const Tensor3& dy, const Tensor3& residual) override;
  std::string name() const override { return "layer_norm"; }
  std::size_t dim() const override { return d_; }
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  float eps() const { return eps_; }
  bool affine() const { return affine_; }

  Parameter weight;  // "weight" γ [d] (shape [0] and unlisted when affine = false)
  Parameter bias;    // "bias" β [d] (shape [0] and unlisted when affine = false)

 private:
  std::size_t d_;
  float eps_;
  bool affine_;
  // backward, with residual [B, T, D] added into dx when not nullptr (backward_add; checked
  // after dy, before any gradient is added).
  Tensor3 backward_rows(const Tensor3& dy, const Tensor3* residual);
  Tensor2 xhat_;   // [N, D]
  Tensor1 rstd_;   // [N]
  std::size_t b_ = 0, t_ = 0;
  bool cached_ = false;
};

/// Root mean square normalisation (Zhang & Sennrich 2019, "Root Mean Square Layer
/// Normalization", arXiv 1910.07467 eq. 4), per position over D, no re-centring, no bias:
///   r = sqrt(mean(x²) + eps),  y = (x / r) ⊙ g.
/// eps: the paper's equation has none; the default 1e-8 is the value of the authors' code
/// (github.com/bzhangGo/rmsnorm, rmsnorm_torch.py), which adds it OUTSIDE the root,
/// x / (sqrt(mean(x²)) + eps). seqlab puts it inside the root, as torch.nn.RMSNorm (PyTorch ≥ 2.4)
/// and T5/LLaMA do; with eps = 1e-8 the two differ by far less than float resolution unless
/// rms(x) < ~1e-3. The gain is named "weight" (as torch.nn.RMSNorm; the authors' code calls it
/// "scale"). Example: g = 1, x = [3, 4] -> [0.848528, 1.131371].
/// Backward: x̂ = x / r, h = g ⊙ dy; dx = (h − x̂ · mean(h ⊙ x̂)) / r; dg += Σ_positions dy ⊙ x̂.
class RMSNorm : public Norm {
 public:
  /// "weight" g [d] = 1. Throws std::invalid_argument naming the argument if d = 0 or eps is
  /// not > 0.
  explicit RMSNorm(std::size_t d, float eps = 1e-8f);

  /// x [B, T, D] -> y [B, T, D]; padding is ignored (shape-checked only). Caches x̂ [N, D] and
  /// 1/r [N]. Throws ShapeError for a wrong x, padding or weight shape.
  Tensor3 forward(const Tensor3& x, const PaddingMask* padding = nullptr) override;
  Tensor3 backward(const Tensor3& dy) override;
  std::string name() const override { return "rms_norm"; }
  std::size_t dim() const override { return d_; }
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  float eps() const { return eps_; }

  Parameter weight;  // "weight" g [d]

 private:
  std::size_t d_;
  float eps_;
  Tensor2 xhat_;  // [N, D]
  Tensor1 rinv_;  // [N]
  std::size_t b_ = 0, t_ = 0;
  bool cached_ = false;
};

/// Batch normalisation (Ioffe & Szegedy 2015, arXiv 1502.03167 Algorithm 1) of each feature over
/// the N = B·T positions, i.e. torch.nn.BatchNorm1d(d) applied to x.reshape(N, D)
/// (https://pytorch.org/docs/1.13/generated/torch.nn.BatchNorm1d.html).
///
/// train mode, over the set S of positions that enter the statistics, n = |S|:
///   μ = mean_S(x),  σ² = mean_S((x − μ)²)  (biased, used to normalise),
///   y = γ ⊙ (x − μ) / sqrt(σ² + eps) + β  for EVERY position (padded ones too);
///   running_mean = (1 − momentum)·running_mean + momentum·μ,
///   running_var  = (1 − momentum)·running_var  + momentum·σ²·n/(n − 1)  (unbiased, as PyTorch),
///   num_batches_tracked += 1; last_batch_stats() = {μ, σ², n}.
///   masked = false ("batch_norm"): S = all N positions; padding is ignored even if given — the
///     naive implementation whose statistics include padded positions.
///   masked = true ("masked_batch_norm"): S = the non-padded positions (all N if padding is null).
///     Padded positions are normalised with the same batch statistics (their outputs are defined
///     and finite, and are usually ignored downstream) but do not enter μ, σ², so a padded x gets
///     no gradient through the statistics: its dx is γ·dy/sqrt(σ² + eps) only, and changing
///     padded inputs changes no real position's output.
///   Backward (exact derivative; with g = γ ⊙ dy and x̂ the normalised input):
///     dx_i = (g_i − Σ_all g / n − x̂_i · Σ_all (g ⊙ x̂) / n) / sqrt(σ² + eps)  for i in S,
///     dx_i = g_i / sqrt(σ² + eps)  for i not in S; the sums run over all N positions, because
///     padded outputs also depend on μ and σ²; dγ += Σ_all dy ⊙ x̂, dβ += Σ_all dy.
///   n < 2 (one position, or all positions padded): the unbiased variance is undefined, so
///     forward throws std::invalid_argument (as torch.nn.BatchNorm1d raises "Expected more than 1
///     value per channel when training") and changes nothing: no running-stat update, caches and
///     last_batch_stats() as before.
/// eval mode: y = γ ⊙ (x − running_mean) / sqrt(running_var + eps) + β per position; padding is
///   ignored (shape-checked only); running stats and last_batch_stats() are left unchanged.
/// backward follows the mode of the last forward, not the current one.
class BatchNorm : public Norm {
 public:
  /// Statistics of one train-mode batch: mean [D], var [D] (biased, the one used to normalise),
  /// count = n, the positions that entered them.
  struct BatchStats {
    Tensor1 mean;
    Tensor1 var;
    std::size_t count = 0;
  };

  /// "weight" γ [d] = 1, "bias" β [d] = 0; running_mean = 0, running_var = 1,
  /// num_batches_tracked = 0 (PyTorch's init). Throws std::invalid_argument naming the argument
  /// if d = 0, momentum is outside [0, 1] or eps is not > 0.
  BatchNorm(std::size_t d, bool masked, float momentum = 0.1f, float eps = 1e-5f);

  /// x [B, T, D] -> y [B, T, D] (see the class comment). Throws ShapeError for a wrong x, padding,
  /// parameter or buffer shape; std::invalid_argument in train mode if fewer than 2 positions
  /// enter the statistics.
  Tensor3 forward(const Tensor3& x, const PaddingMask* padding = nullptr) override;
  Tensor3 backward(const Tensor3& dy) override;
  std::string name() const override { return masked_ ? "masked_batch_norm" : "batch_norm"; }
  std::size_t dim() const override { return d_; }
  /// Lists "weight", "bias" (the buffers are not parameters: optimizers must not touch them).
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// Lists the buffers "running_mean" [d], "running_var" [d], "num_batches_tracked".
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;

  /// Statistics of the last train-mode forward; count = 0 and empty mean/var before the first.
  const BatchStats& last_batch_stats() const { return last_stats_; }

  bool masked() const { return masked_; }
  float momentum() const { return momentum_; }
  float eps() const { return eps_; }

  Parameter weight;  // "weight" γ [d]
  Parameter bias;    // "bias" β [d]
  // Buffers (PyTorch's state_dict keys), readable and settable for checkpoints and fixtures; a
  // wrong shape makes the next forward throw ShapeError.
  Tensor1 running_mean;                  // "running_mean" [d]
  Tensor1 running_var;                   // "running_var" [d] (unbiased)
  std::int64_t num_batches_tracked = 0;  // "num_batches_tracked"

 private:
  void check_state() const;

  std::size_t d_;
  bool masked_;
  float momentum_;
  float eps_;
  BatchStats last_stats_;
  // Caches of the last forward.
  Tensor2 xhat_;                  // [N, D]
  Tensor1 rstd_;                  // [D] 1/sqrt(var + eps) of the statistics used
  std::vector<std::uint8_t> in_stats_;  // [N] 1 if the position entered the statistics (train)
  std::size_t count_ = 0;         // n of the last train forward
  bool train_forward_ = false;    // mode of the last forward
  std::size_t b_ = 0, t_ = 0;
  bool cached_ = false;
};

/// Power normalisation (Shen et al. 2020, "PowerNorm: Rethinking Batch Normalization in
/// Transformers", ICML, arXiv 2003.07845, §4 and Algorithm 1): BatchNorm without re-centring whose
/// forward divides by a RUNNING quadratic mean instead of the batch's, with an approximate backward
/// that accounts for the running statistic. Per feature j, over the set S of positions that enter
/// the statistics (the non-padded ones when a padding mask is given, all N otherwise, as the
/// authors' MaskPowerNorm), n = |S|:
///   train forward (step t):  ψ²_B = mean_S(x²);
///                            x̂ = x / sqrt(ψ²_{t−1} + eps)   (the running value BEFORE this step);
///                            y = γ ⊙ x̂ + β                   (every position, padded ones too);
///                            ψ²_t = α ψ²_{t−1} + (1 − α) ψ²_B            ("running_phi");
///   train backward:          g = γ ⊙ dy;  Γ = mean_S(x̂²),  Λ = mean_S(g ⊙ x̂);
///                            dx = (g − ν_{t−1} ⊙ x̂) / sqrt(ψ²_{t−1} + eps)  for positions in S,
///                            dx = g / sqrt(ψ²_{t−1} + eps)  for padded positions;
///                            ν_t = ν_{t−1} ⊙ (1 − (1 − α)Γ) + (1 − α)Λ   (Algorithm 1, eq. 11);
///                            dγ += Σ_all dy ⊙ x̂, dβ += Σ_all dy;
///   eval forward:            y = γ ⊙ x / sqrt(ψ²_T + eps) + β; nothing is updated.
/// The term −ν ⊙ x̂ is the paper's approximate backpropagation of the running quadratic mean: x
/// influences later steps through ψ², whose exact gradient would need every later batch; ν is a
/// running estimate of it. The buffers follow the authors' code (github.com/sIncerass/powernorm,
/// fairseq/modules/norms/mask_powernorm.py): "running_phi" = ψ² [d] (init 1) and "ema_gz" [d]
/// (init 0) with ν = (1 − α)·ema_gz, so that ema_gz += mean_S((g − ν x̂) ⊙ x̂) is the update above.
/// Differences from that code, which the paper's Algorithm 1 does not have: its GroupScaling1D
/// (each position first divided by its own RMS over the features), its warm-up (the first
/// warmup_iters = 10000 steps normalise with the batch's ψ²_B) and its backward's division by the
/// batch's sqrt(ψ²_B + eps) instead of ψ_{t−1}; this class is Algorithm 1. With ν = 0 (the first
/// step) the backward is the exact derivative of the forward, ψ_{t−1} being a constant of the step.
/// backward uses the mode of the last forward: after an eval-mode forward it is the exact
/// derivative of the eval map (dx = g / sqrt(ψ²_T + eps)) and updates nothing.
class PowerNorm : public Norm {
 public:
  /// "weight" γ [d] = 1, "bias" β [d] = 0; running_phi = 1, ema_gz = 0 (the authors' init).
  /// alpha: the running average's coefficient α in [0, 1] (the authors' alpha_fwd = alpha_bkw =
  /// 0.9). Throws std::invalid_argument naming the argument if d = 0, alpha is outside [0, 1] or
  /// eps is not > 0.
  explicit PowerNorm(std::size_t d, float alpha = 0.9f, float eps = 1e-5f);

  /// x [B, T, D] -> y [B, T, D] (class comment). Throws ShapeError for a wrong x, padding,
  /// parameter or buffer shape; std::invalid_argument in train mode if no position enters the
  /// statistics (every position padded).
  Tensor3 forward(const Tensor3& x, const PaddingMask* padding = nullptr) override;
  Tensor3 backward(const Tensor3& dy) override;
  std::string name() const override { return "power_norm"; }
  std::size_t dim() const override { return d_; }
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// Lists the buffers "running_phi" [d] (ψ²) and "ema_gz" [d] (ν / (1 − α)).
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;

  float alpha() const { return alpha_; }
  float eps() const { return eps_; }
  /// ψ²_B of the last train-mode forward [d] (empty before the first): the batch quadratic mean.
  const Tensor1& last_batch_phi() const { return last_phi_; }

  Parameter weight;    // "weight" γ [d]
  Parameter bias;      // "bias" β [d]
  Tensor1 running_phi; // "running_phi" ψ² [d]
  Tensor1 ema_gz;      // "ema_gz" [d], ν = (1 − α)·ema_gz

 private:
  void check_state() const;

  std::size_t d_;
  float alpha_;
  float eps_;
  Tensor1 last_phi_;
  Tensor2 xhat_;                        // [N, D]
  Tensor1 rstd_;                        // [D] 1/sqrt(ψ²_{t−1} + eps) of the last forward
  std::vector<std::uint8_t> in_stats_;  // [N]
  std::size_t count_ = 0;
  bool train_forward_ = false;
  std::size_t b_ = 0, t_ = 0;
  bool cached_ = false;
};

/// The identity ("none"): y = x, dx = dy; no parameters. Checks shapes like the others.
class IdentityNorm : public Norm {
 public:
  /// Throws std::invalid_argument if d = 0.
  explicit IdentityNorm(std::size_t d);
  Tensor3 forward(const Tensor3& x, const PaddingMask* padding = nullptr) override;
  Tensor3 backward(const Tensor3& dy) override;
  std::string name() const override { return "none"; }
  std::size_t dim() const override { return d_; }
  void collect_parameters(const std::string&, std::vector<NamedParameter>&) override {}

 private:
  std::size_t d_;
  std::size_t b_ = 0, t_ = 0;
  bool cached_ = false;
};

/// A registered norm (norm_registry()): how to build it and count its parameters by name.
struct NormEntry {
  /// One line for --help and docs (the formula's source).
  std::string description;
  /// A norm of feature size d with default hyperparameters (throws as its constructor for d = 0).
  std::function<std::unique_ptr<Norm>(std::size_t d)> create;
  /// Scalar parameters of create(d) (count_parameters), e.g. 2·d for LayerNorm's γ and β.
  std::function<std::size_t(std::size_t d)> num_parameters;
};

/// The norms by name (core/registry.hpp), built on first use with the built-ins in this order:
/// "layer_norm" (LayerNorm), "batch_norm" (BatchNorm, masked = false), "masked_batch_norm"
/// (BatchNorm, masked = true), "rms_norm" (RMSNorm), "none" (IdentityNorm), "power_norm"
/// (PowerNorm)
/// (lib/src/nn/norm_registry.cpp). A norm defined in an executable registers with
/// SEQLAB_REGISTER(seqlab::norm_registry(), "name", NormEntry{...}); it then works everywhere a
/// norm is chosen by name (TransformerLayerConfig::norm, ModelConfig::norm).
Registry<NormEntry>& norm_registry();
/// norm_registry().names(): the registered names (for --help choices and messages).
const std::vector<std::string>& norm_names();

/// Builds a registered norm of feature size d by name (norm_registry().get(name).create(d)):
/// "layer_norm" (LayerNorm), "rms_norm" (RMSNorm), "batch_norm" (BatchNorm, masked = false),
/// "masked_batch_norm" (BatchNorm, masked = true), "none" (IdentityNorm), "power_norm"
/// (PowerNorm), or a norm registered by the program. Throws UnknownNameError (a
/// std::invalid_argument) "norm = '<name>': allowed layer_norm, batch_norm, masked_batch_norm,
/// rms_norm, none, power_norm[, registered...]" for any other
/// name, and as the constructors for d = 0.
std::unique_ptr<Norm> make_norm(const std::string& name, std::size_t d);

}  // namespace seqlab

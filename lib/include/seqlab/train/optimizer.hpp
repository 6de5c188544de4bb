#pragma once
// Optimizers: SGD (momentum, dampening, Nesterov, L2 weight decay), Adam (L2 weight decay),
// AdamW (decoupled weight decay), each exactly the algorithm box of the torch.optim docs of
// PyTorch 1.13 (and its `_single_tensor_*` code, maximize = False, amsgrad = False).
//
// An optimizer holds non-owning pointers to Parameters (their `value` and `grad` must outlive it)
// and one state buffer per parameter of the same size (flat, row-major). `step()` reads `grad`
// and updates `value` in place; it never changes `grad`. Arithmetic is float32 element-wise with
// the scalar coefficients (bias corrections, step sizes) computed in double.
//
// Weight decay and parameter groups: an optimizer decays the parameters its decay mask selects
// (set_weight_decay_mask; by default all of them, as torch.optim given a plain parameter list).
// make_optimizer selects the matrices only (weight_decay_mask): the rule of nanoGPT's
// configure_optimizers (karpathy/nanoGPT model.py: "any parameters that is 2D will be weight
// decayed, otherwise no. i.e. all weight tensors in matmuls + embeddings decay, all biases and
// layernorms don't"), i.e. torch.optim with two parameter groups, {rank >= 2: weight_decay} and
// {rank < 2: weight_decay = 0}. OptimizerConfig::decay_all = true decays every parameter.
//
// Checkpointing: `state()` returns the step count and the buffers as named flat float vectors,
// keyed "<parameter index>.<buffer>" as in PyTorch's optimizer state_dict ("0.exp_avg",
// "0.exp_avg_sq", "3.momentum_buffer"); `load_state()` restores it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "seqlab/nn/parameter.hpp"

namespace seqlab {

/// Optimizer state for checkpoints. `buffers` maps "<index>.<name>" to the flat values of that
/// parameter's buffer (same size as the parameter). `kind` is "sgd", "adam" or "adamw".
struct OptimizerState {
  std::string kind;
  std::int64_t step = 0;  // number of step() calls so far
  std::map<std::string, std::vector<float>> buffers;
};

class Optimizer {
 public:
  /// `params`: non-null, distinct; `lr` >= 0 (finite). Throws std::invalid_argument naming the
  /// offending argument and value.
  Optimizer(std::vector<Parameter*> params, float lr);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter from its current `grad`. Throws ShapeError if a parameter's
  /// grad size differs from its value size.
  virtual void step() = 0;
  /// Sets `grad` of every parameter to 0.
  void zero_grad();
  /// Learning rate for the following steps; `lr` >= 0 and finite, else std::invalid_argument.
  void set_lr(float lr);
  float lr() const { return lr_; }

  const std::vector<Parameter*>& params() const { return params_; }
  /// Number of step() calls so far (PyTorch's state["step"]).
  std::int64_t step_count() const { return step_; }
  /// "sgd" | "adam" | "adamw".
  virtual std::string kind() const = 0;

  /// Parameter groups of weight decay: mask[i] says whether params()[i] gets the optimizer's
  /// weight decay (true) or none (false, as a torch.optim group with weight_decay = 0). Default:
  /// all true. Throws std::invalid_argument if mask.size() != params().size().
  void set_weight_decay_mask(std::vector<bool> mask);
  /// Whether params()[i] is weight-decayed (see set_weight_decay_mask).
  bool decays(std::size_t i) const { return decay_mask_[i]; }

  /// A copy of the step count and all buffers (see OptimizerState).
  OptimizerState state() const;
  /// Restores a state taken from an optimizer of the same kind over parameters of the same sizes.
  /// Throws std::invalid_argument naming the mismatch (kind, a missing or unknown buffer key, a
  /// size) and leaves this optimizer unchanged in that case.
  void load_state(const OptimizerState& s);

 protected:
  /// Names of the per-parameter buffers that exist at the current step (e.g. {"exp_avg",
  /// "exp_avg_sq"}); buffer(i, name) returns parameter i's buffer.
  virtual std::vector<std::string> buffer_names() const = 0;
  virtual std::vector<float>& buffer(std::size_t i, const std::string& name) = 0;
  const std::vector<float>& buffer(std::size_t i, const std::string& name) const {
    return const_cast<Optimizer*>(this)->buffer(i, name);
  }
  /// Throws ShapeError unless every grad has the size of its value.
  void check_grads() const;

  std::vector<Parameter*> params_;
  float lr_;
  std::int64_t step_ = 0;
  std::vector<bool> decay_mask_;  // one per parameter, all true unless set_weight_decay_mask
};

/// The weight-decay groups of nanoGPT's configure_optimizers (file comment): true for the
/// parameters of rank >= 2 (Linear, Embedding, attention, recurrent and convolution weights),
/// false for rank 0 and 1 (biases, norm gains and shifts); all true when decay_all.
std::vector<bool> weight_decay_mask(const std::vector<Parameter*>& params, bool decay_all = false);

/// torch.optim.SGD (PyTorch 1.13 docs, algorithm box), per parameter, with g = grad:
///   g ← g + weight_decay·θ                       (if weight_decay ≠ 0)
///   b ← g at the first step, else b ← momentum·b + (1 − dampening)·g   (if momentum ≠ 0)
///   g ← g + momentum·b if nesterov, else g ← b   (if momentum ≠ 0)
///   θ ← θ − lr·g
/// Throws std::invalid_argument for lr < 0, momentum < 0, weight_decay < 0, or nesterov with
/// momentum = 0 or dampening ≠ 0 (as PyTorch).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Parameter*> params, float lr, float momentum = 0, float weight_decay = 0,
      bool nesterov = false, float dampening = 0);
  void step() override;
  std::string kind() const override { return "sgd"; }

  float momentum() const { return momentum_; }
  float weight_decay() const { return weight_decay_; }
  float dampening() const { return dampening_; }
  bool nesterov() const { return nesterov_; }

 protected:
  std::vector<std::string> buffer_names() const override;
  std::vector<float>& buffer(std::size_t i, const std::string& name) override;

 private:
  float momentum_, weight_decay_, dampening_;
  bool nesterov_;
  std::vector<std::vector<float>> momentum_buffer_;  // per parameter; empty until the first step
};

/// Shared implementation of Adam and AdamW (not used directly): the bias-corrected Adam update,
/// with the weight decay either added to the gradient (L2, Adam) or decoupled (AdamW).
/// Throws std::invalid_argument unless lr ≥ 0, eps ≥ 0, 0 ≤ β1 < 1, 0 ≤ β2 < 1, weight_decay ≥ 0
/// (as PyTorch), each message naming the argument and its value.
class AdamBase : public Optimizer {
 public:
  void step() override;
  std::string kind() const override { return decoupled_ ? "adamw" : "adam"; }

  float beta1() const { return beta1_; }
  float beta2() const { return beta2_; }
  float eps() const { return eps_; }
  float weight_decay() const { return weight_decay_; }

 protected:
  AdamBase(std::vector<Parameter*> params, float lr, float beta1, float beta2, float eps,
           float weight_decay, bool decoupled);
  std::vector<std::string> buffer_names() const override;
  std::vector<float>& buffer(std::size_t i, const std::string& name) override;

 private:
  float beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
  std::vector<std::vector<float>> exp_avg_, exp_avg_sq_;  // m, v per parameter (zeros at start)
};

/// torch.optim.Adam (PyTorch 1.13 docs; Kingma & Ba 2015, Algorithm 1), per parameter, t = step
/// count after increment:
///   g ← g + weight_decay·θ                       (L2 penalty into the gradient)
///   m ← β1·m + (1 − β1)·g;   v ← β2·v + (1 − β2)·g²
///   θ ← θ − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
class Adam : public AdamBase {
 public:
  Adam(std::vector<Parameter*> params, float lr = 1e-3f, float beta1 = 0.9f, float beta2 = 0.999f,
       float eps = 1e-8f, float weight_decay = 0)
      : AdamBase(std::move(params), lr, beta1, beta2, eps, weight_decay, false) {}
};

/// torch.optim.AdamW (PyTorch 1.13 docs; Loshchilov & Hutter 2019, Algorithm 2): decoupled
/// weight decay θ ← θ·(1 − lr·weight_decay) first, then Adam's bias-corrected update above
/// without the L2 term.
class AdamW : public AdamBase {
 public:
  AdamW(std::vector<Parameter*> params, float lr = 1e-3f, float beta1 = 0.9f, float beta2 = 0.999f,
        float eps = 1e-8f, float weight_decay = 1e-2f)
      : AdamBase(std::move(params), lr, beta1, beta2, eps, weight_decay, true) {}
};

/// Hyperparameters for make_optimizer; each optimizer reads the fields it has
/// (sgd: lr, momentum, weight_decay; adam/adamw: lr, beta1, beta2, eps, weight_decay).
/// decay_all: false (default) applies weight_decay to the parameters of rank >= 2 only, true to
/// every parameter (weight_decay_mask).
struct OptimizerConfig {
  float lr = 1e-3f, momentum = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
  bool decay_all = false;
};

/// `name`: "sgd" | "adam" | "adamw" (exact, lower case), over `params` with the weight-decay
/// groups weight_decay_mask(params, cfg.decay_all). Throws std::invalid_argument naming an
/// unknown name, or a bad hyperparameter (from the constructor).
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Parameter*> params,
                                          const OptimizerConfig& cfg);

}  // namespace seqlab

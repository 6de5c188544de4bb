#include "seqlab/train/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

#include "seqlab/core/tensor.hpp"

namespace seqlab {
namespace {

/// Shortest decimal form that reads back as the same float ("-1e-08", not "-9.99999994e-09").
std::string num(float v) {
  for (int precision = 1; precision <= 9; ++precision) {
    std::ostringstream s;
    s.precision(precision);
    s << v;
    if (std::isnan(v) || std::strtof(s.str().c_str(), nullptr) == v) return s.str();
  }
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

[[noreturn]] void bad(const std::string& who, const std::string& arg, float value,
                      const std::string& allowed) {
  throw std::invalid_argument(who + ": " + arg + " = " + num(value) + "; must be " + allowed);
}

void check_lr(const std::string& who, float lr) {
  if (!(lr >= 0.0f) || !std::isfinite(lr)) bad(who, "lr", lr, ">= 0 and finite");
}

void check_adam_args(const std::string& who, float lr, float beta1, float beta2, float eps,
                     float weight_decay) {
  check_lr(who, lr);
  if (!(eps >= 0.0f) || !std::isfinite(eps)) bad(who, "eps", eps, ">= 0 and finite");
  if (!(beta1 >= 0.0f && beta1 < 1.0f)) bad(who, "beta1", beta1, "in [0, 1)");
  if (!(beta2 >= 0.0f && beta2 < 1.0f)) bad(who, "beta2", beta2, "in [0, 1)");
  if (!(weight_decay >= 0.0f) || !std::isfinite(weight_decay))
    bad(who, "weight_decay", weight_decay, ">= 0 and finite");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Optimizer

Optimizer::Optimizer(std::vector<Parameter*> params, float lr)
    : params_(std::move(params)), lr_(lr), decay_mask_(params_.size(), true) {
  check_lr("Optimizer", lr);
  std::set<const Parameter*> seen;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (params_[i] == nullptr)
      throw std::invalid_argument("Optimizer: params[" + std::to_string(i) +
                                  "] is a null pointer; every parameter must be non-null");
    if (!seen.insert(params_[i]).second)
      throw std::invalid_argument("Optimizer: params[" + std::to_string(i) + "] (\"" +
                                  params_[i]->name +
                                  "\") appears twice; each parameter may be listed once");
  }
}

Optimizer::~Optimizer() = default;

void Optimizer::set_weight_decay_mask(std::vector<bool> mask) {
  if (mask.size() != params_.size())
    throw std::invalid_argument("Optimizer::set_weight_decay_mask: mask has " +
                                std::to_string(mask.size()) + " entries; must have one per parameter (" +
                                std::to_string(params_.size()) + ")");
  decay_mask_ = std::move(mask);
}

std::vector<bool> weight_decay_mask(const std::vector<Parameter*>& params, bool decay_all) {
  std::vector<bool> mask(params.size(), true);
  if (decay_all) return mask;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i] != nullptr) mask[i] = params[i]->value.dimension() >= 2;
  return mask;
}

void Optimizer::zero_grad() {
  for (Parameter* p : params_) p->zero_grad();
}

void Optimizer::set_lr(float lr) {
  check_lr("Optimizer::set_lr", lr);
  lr_ = lr;
}

void Optimizer::check_grads() const {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = *params_[i];
    if (p.grad.size() != p.value.size())
      throw ShapeError("Optimizer::step: parameter " + std::to_string(i) + " (\"" + p.name +
                       "\") has grad of shape " + shape_string(p.grad.shape()) +
                       " but value of shape " + shape_string(p.value.shape()));
  }
}

OptimizerState Optimizer::state() const {
  OptimizerState s;
  s.kind = kind();
  s.step = step_;
  for (std::size_t i = 0; i < params_.size(); ++i)
    for (const std::string& name : buffer_names())
      s.buffers[std::to_string(i) + "." + name] = buffer(i, name);
  return s;
}

void Optimizer::load_state(const OptimizerState& s) {
  const std::string who = "Optimizer::load_state: ";
  if (s.kind != kind())
    throw std::invalid_argument(who + "kind = \"" + s.kind + "\"; must be \"" + kind() +
                                "\" (the kind of this optimizer)");
  if (s.step < 0) throw std::invalid_argument(who + "step = " + std::to_string(s.step) + "; must be >= 0");
  // Buffers exist from the first step on: the expected names depend on the loaded step count.
  const std::int64_t saved_step = step_;
  step_ = s.step;
  const std::vector<std::string> names = buffer_names();
  step_ = saved_step;
  std::size_t expected = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    for (const std::string& name : names) {
      const std::string key = std::to_string(i) + "." + name;
      auto it = s.buffers.find(key);
      if (it == s.buffers.end())
        throw std::invalid_argument(who + "buffer \"" + key + "\" is missing (step " +
                                    std::to_string(s.step) + ", " + std::to_string(params_.size()) +
                                    " parameters)");
      if (it->second.size() != params_[i]->size())
        throw std::invalid_argument(who + "buffer \"" + key + "\" has " +
                                    std::to_string(it->second.size()) + " values; parameter " +
                                    std::to_string(i) + " (\"" + params_[i]->name + "\") has " +
                                    std::to_string(params_[i]->size()));
      ++expected;
    }
  }
  if (s.buffers.size() != expected) {
    for (const auto& kv : s.buffers) {
      bool known = false;
      for (std::size_t i = 0; i < params_.size() && !known; ++i)
        for (const std::string& name : names)
          if (kv.first == std::to_string(i) + "." + name) known = true;
      if (!known)
        throw std::invalid_argument(who + "unknown buffer \"" + kv.first + "\" for a " + kind() +
                                    " optimizer over " + std::to_string(params_.size()) +
                                    " parameters at step " + std::to_string(s.step));
    }
  }
  // All checked: now copy (buffer() allocates lazily where needed).
  step_ = s.step;
  for (std::size_t i = 0; i < params_.size(); ++i)
    for (const std::string& name : names) buffer(i, name) = s.buffers.at(std::to_string(i) + "." + name);
}

// ---------------------------------------------------------------------------------------------
// SGD

SGD::SGD(std::vector<Parameter*> params, float lr, float momentum, float weight_decay, bool nesterov,
         float dampening)
    : Optimizer(std::move(params), lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      dampening_(dampening),
      nesterov_(nesterov),
      momentum_buffer_(params_.size()) {
  if (!(momentum >= 0.0f) || !std::isfinite(momentum)) bad("SGD", "momentum", momentum, ">= 0 and finite");
  if (!(weight_decay >= 0.0f) || !std::isfinite(weight_decay))
    bad("SGD", "weight_decay", weight_decay, ">= 0 and finite");
  if (!std::isfinite(dampening)) bad("SGD", "dampening", dampening, "finite");
  if (nesterov && momentum <= 0.0f)
    bad("SGD", "momentum", momentum, "> 0 with nesterov = true (Nesterov needs momentum)");
  if (nesterov && dampening != 0.0f)
    bad("SGD", "dampening", dampening, "0 with nesterov = true (Nesterov needs zero dampening)");
}

std::vector<std::string> SGD::buffer_names() const {
  if (momentum_ != 0.0f && step_ > 0) return {"momentum_buffer"};
  return {};
}

std::vector<float>& SGD::buffer(std::size_t i, const std::string& name) {
  if (name != "momentum_buffer") throw std::logic_error("SGD has no buffer " + name);
  return momentum_buffer_.at(i);
}

void SGD::step() {
  check_grads();
  const float lr = lr_, mom = momentum_, damp = 1.0f - dampening_;
  const bool first = step_ == 0;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Parameter& p = *params_[k];
    const float wd = decays(k) ? weight_decay_ : 0.0f;
    const std::size_t n = p.size();
    float* theta = p.value.data();
    const float* grad = p.grad.data();
    if (mom == 0.0f) {
      for (std::size_t i = 0; i < n; ++i) {
        float g = grad[i];
        if (wd != 0.0f) g += wd * theta[i];
        theta[i] -= lr * g;
      }
      continue;
    }
    std::vector<float>& buf = momentum_buffer_[k];
    if (first) buf.assign(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) {
      float g = grad[i];
      if (wd != 0.0f) g += wd * theta[i];
      // torch: buf = clone(d_p) at the first step, else buf = momentum·buf + (1 − dampening)·d_p
      buf[i] = first ? g : mom * buf[i] + damp * g;
      g = nesterov_ ? g + mom * buf[i] : buf[i];
      theta[i] -= lr * g;
    }
  }
  ++step_;
}

// ---------------------------------------------------------------------------------------------
// Adam / AdamW

AdamBase::AdamBase(std::vector<Parameter*> params, float lr, float beta1, float beta2, float eps,
                   float weight_decay, bool decoupled)
    : Optimizer(std::move(params), lr),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled) {
  check_adam_args(decoupled ? "AdamW" : "Adam", lr, beta1, beta2, eps, weight_decay);
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  for (std::size_t k = 0; k < params_.size(); ++k) {
    exp_avg_[k].assign(params_[k]->size(), 0.0f);
    exp_avg_sq_[k].assign(params_[k]->size(), 0.0f);
  }
}

std::vector<std::string> AdamBase::buffer_names() const { return {"exp_avg", "exp_avg_sq"}; }

std::vector<float>& AdamBase::buffer(std::size_t i, const std::string& name) {
  if (name == "exp_avg") return exp_avg_.at(i);
  if (name == "exp_avg_sq") return exp_avg_sq_.at(i);
  throw std::logic_error("Adam has no buffer " + name);
}

void AdamBase::step() {
  check_grads();
  ++step_;
  const double t = static_cast<double>(step_);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1_), t);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2_), t);
  const float step_size = static_cast<float>(static_cast<double>(lr_) / bias_correction1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float b1 = beta1_, b2 = beta2_, one_m_b1 = 1.0f - beta1_, one_m_b2 = 1.0f - beta2_;
  const float eps = eps_;
  // L2 (Adam): added to the gradient. Decoupled (AdamW): θ ← θ·(1 − lr·wd) before the update.
  // Parameters outside the decay mask get neither.
  const float l2_decayed = decoupled_ ? 0.0f : weight_decay_;
  const float decay_decayed =
      decoupled_ ? static_cast<float>(1.0 - static_cast<double>(lr_) * weight_decay_) : 1.0f;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Parameter& p = *params_[k];
    const float l2 = decays(k) ? l2_decayed : 0.0f;
    const float decay = decays(k) ? decay_decayed : 1.0f;
    const std::size_t n = p.size();
    float* theta = p.value.data();
    const float* grad = p.grad.data();
    float* m = exp_avg_[k].data();
    float* v = exp_avg_sq_[k].data();
    for (std::size_t i = 0; i < n; ++i) {
      if (decoupled_) theta[i] *= decay;
      float g = grad[i];
      if (l2 != 0.0f) g += l2 * theta[i];
      m[i] = b1 * m[i] + one_m_b1 * g;
      v[i] = b2 * v[i] + one_m_b2 * g * g;
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;  // torch: (v.sqrt() / bc2_sqrt).add_(eps)
      theta[i] -= step_size * (m[i] / denom);                // torch: addcdiv_(m, denom, -step_size)
    }
  }
}

// ---------------------------------------------------------------------------------------------

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Parameter*> params,
                                          const OptimizerConfig& cfg) {
  std::unique_ptr<Optimizer> optim;
  std::vector<bool> mask = weight_decay_mask(params, cfg.decay_all);
  if (name == "sgd") {
    optim = std::make_unique<SGD>(std::move(params), cfg.lr, cfg.momentum, cfg.weight_decay);
  } else if (name == "adam") {
    optim = std::make_unique<Adam>(std::move(params), cfg.lr, cfg.beta1, cfg.beta2, cfg.eps,
                                   cfg.weight_decay);
  } else if (name == "adamw") {
    optim = std::make_unique<AdamW>(std::move(params), cfg.lr, cfg.beta1, cfg.beta2, cfg.eps,
                                    cfg.weight_decay);
  }
  if (optim) {
    optim->set_weight_decay_mask(std::move(mask));
    return optim;
  }
  throw std::invalid_argument("make_optimizer: optimizer = \"" + name +
                              "\"; must be one of sgd, adam, adamw");
}

}  // namespace seqlab

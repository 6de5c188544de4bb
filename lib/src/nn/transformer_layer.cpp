#include "seqlab/nn/transformer_layer.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "row_kernels.hpp"

namespace seqlab {

namespace {

// acc += b for two tensors of one shape, in place, on the thread budget (row_kernels.hpp).
void add_into(Tensor3& acc, const Tensor3& b) {
  detail::add_floats(acc.data(), b.data(), acc.size(), acc.data());
}

// dL/d(drop's input) for dL/d(drop's output) dy: dy itself when the last forward was the
// identity (no copy), else the masked copy, kept in `store`.
const Tensor3& through_dropout(const Dropout& drop, const Tensor3& dy, Tensor3& store) {
  if (drop.last_was_identity()) return dy;
  store = drop.backward(dy);
  return store;
}

const TransformerLayerConfig& validated(const TransformerLayerConfig& cfg) {
  cfg.validate();
  return cfg;
}

// One residual sub-layer (Vaswani et al. §3.1 / Xiong et al. 2020):
//   pre:  y = z + drop(sub(norm(z)))        post: y = norm(z + drop(sub(z)))
// The sums are made in place in the branch's fresh output (no third buffer); the dropout takes
// that output by value (in place, or as is when it is the identity). sub is called with the
// norm's output as an rvalue (pre: the sub-layer takes it over as its input cache, no copy) or
// with z itself (post: the sub-layer copies it).
template <class Sub>
Tensor3 residual_forward(bool pre, Norm& norm, Dropout& drop, const Tensor3& z,
                         const PaddingMask* pad, Sub&& sub) {
  if (pre) {
    Tensor3 y = drop.forward(sub(norm.forward(z, pad)));  // s = drop(sub(norm(z)))
    add_into(y, z);                                       // y = z + s
    return y;
  }
  Tensor3 r = drop.forward(sub(z));                  // s = drop(sub(z))
  add_into(r, z);                                    // r = z + s
  return norm.forward(r, pad);                       // y = norm(r)
}

// The backward of residual_forward; sub_back(ds) returns dL/d(sub's input) and adds its grads.
template <class SubBack>
Tensor3 residual_backward(bool pre, Norm& norm, Dropout& drop, const Tensor3& dy, SubBack&& sub_back) {
  Tensor3 masked;
  if (pre) {
    const Tensor3 dn = sub_back(through_dropout(drop, dy, masked));  // s = drop(sub(n))
    return norm.backward_add(dn, dy);  // n = norm(z); y = z + s: both paths, one pass
  }
  const Tensor3 dr = norm.backward(dy);                              // y = norm(r)
  Tensor3 dz = sub_back(through_dropout(drop, dr, masked));          // s = drop(sub(z))
  add_into(dz, dr);                                                  // r = z + s
  return dz;
}

}  // namespace

void TransformerLayerConfig::validate() const {
  const std::string p = "TransformerLayerConfig: ";
  if (d_model == 0) throw std::invalid_argument(p + "d_model = 0; must be >= 1");
  if (n_heads == 0) throw std::invalid_argument(p + "n_heads = 0; must be >= 1");
  if (d_model % n_heads != 0)
    throw std::invalid_argument(p + "d_model = " + std::to_string(d_model) +
                                " is not divisible by n_heads = " + std::to_string(n_heads));
  if (d_ff == 0) throw std::invalid_argument(p + "d_ff = 0; must be >= 1");
  if (activation != "relu" && activation != "gelu")
    throw std::invalid_argument(p + "activation = '" + activation + "'; allowed relu, gelu");
  if (!(dropout >= 0.0f && dropout < 1.0f))
    throw std::invalid_argument(p + "dropout = " + std::to_string(dropout) + "; must be in [0, 1)");
  if (!norm_registry().contains(norm))  // the registered norms (nn/norm.hpp)
    throw std::invalid_argument(p + "norm = '" + norm + "'; allowed " + norm_registry().names_string());
  if (norm_placement != "pre" && norm_placement != "post")
    throw std::invalid_argument(p + "norm_placement = '" + norm_placement + "'; allowed pre, post");
}

// --- encoder ------------------------------------------------------------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerConfig& cfg, Rng& rng)
    : self_attn(validated(cfg).d_model, cfg.n_heads, rng, cfg.shared_qk),
      ff(cfg.d_model, cfg.d_ff, rng, cfg.activation, cfg.dropout, derive_seed(cfg.seed, 3)),
      norm1(make_norm(cfg.norm, cfg.d_model)),
      norm2(make_norm(cfg.norm, cfg.d_model)),
      dropout1(cfg.dropout, derive_seed(cfg.seed, 1)),
      dropout2(cfg.dropout, derive_seed(cfg.seed, 2)),
      cfg_(cfg) {
  self_attn.set_kernel(cfg.attention_kernel);
}

void TransformerEncoderLayer::set_training(bool training) {
  Module::set_training(training);
  self_attn.set_training(training);
  ff.set_training(training);
  norm1->set_training(training);
  norm2->set_training(training);
  dropout1.set_training(training);
  dropout2.set_training(training);
}

void TransformerEncoderLayer::collect_parameters(const std::string& prefix,
                                                 std::vector<NamedParameter>& out) {
  self_attn.collect_parameters(prefix + "self_attn.", out);
  ff.collect_parameters(prefix, out);  // "linear1.*", "linear2.*"
  norm1->collect_parameters(prefix + "norm1.", out);
  norm2->collect_parameters(prefix + "norm2.", out);
}

Tensor3 TransformerEncoderLayer::forward(const Tensor3& x, const AttentionMask& mask,
                                         const PaddingMask* padding_for_norms) {
  check_shape("TransformerEncoderLayer.forward: x", x, {-1, -1, static_cast<long>(cfg_.d_model)});
  const bool pre = cfg_.pre_norm();
  const Tensor3 x1 = residual_forward(pre, *norm1, dropout1, x, padding_for_norms,
                                      [&](auto&& z) {
                                        return self_attn.forward(std::forward<decltype(z)>(z), mask);
                                      });
  Tensor3 y = residual_forward(pre, *norm2, dropout2, x1, padding_for_norms,
                               [&](auto&& z) { return ff.forward(std::forward<decltype(z)>(z)); });
  b_ = x.shape()[0];
  t_ = x.shape()[1];
  cached_ = true;
  return y;
}

Tensor3 TransformerEncoderLayer::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("TransformerEncoderLayer.backward: called before forward");
  check_shape("TransformerEncoderLayer.backward: dy", dy,
              {static_cast<long>(b_), static_cast<long>(t_), static_cast<long>(cfg_.d_model)});
  const bool pre = cfg_.pre_norm();
  const Tensor3 dx1 = residual_backward(pre, *norm2, dropout2, dy,
                                        [&](const Tensor3& d) { return ff.backward(d); });
  return residual_backward(pre, *norm1, dropout1, dx1,
                           [&](const Tensor3& d) { return self_attn.backward(d); });
}

// --- decoder ------------------------------------------------------------------------------------

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerConfig& cfg, Rng& rng,
                                                 bool cross_attention)
    : self_attn(validated(cfg).d_model, cfg.n_heads, rng, cfg.shared_qk),
      multihead_attn(cross_attention ? std::make_unique<MultiheadAttention>(cfg.d_model, cfg.n_heads, rng)
                                     : nullptr),
      ff(cfg.d_model, cfg.d_ff, rng, cfg.activation, cfg.dropout, derive_seed(cfg.seed, 4)),
      norm1(make_norm(cfg.norm, cfg.d_model)),
      norm2(make_norm(cfg.norm, cfg.d_model)),
      norm3(cross_attention ? make_norm(cfg.norm, cfg.d_model) : nullptr),
      dropout1(cfg.dropout, derive_seed(cfg.seed, 1)),
      dropout2(cfg.dropout, derive_seed(cfg.seed, 2)),
      dropout3(cfg.dropout, derive_seed(cfg.seed, 3)),
      cfg_(cfg),
      cross_(cross_attention) {
  self_attn.set_kernel(cfg.attention_kernel);
  if (multihead_attn) multihead_attn->set_kernel(cfg.attention_kernel);
}

void TransformerDecoderLayer::set_training(bool training) {
  Module::set_training(training);
  self_attn.set_training(training);
  if (multihead_attn) multihead_attn->set_training(training);
  ff.set_training(training);
  norm1->set_training(training);
  norm2->set_training(training);
  if (norm3) norm3->set_training(training);
  dropout1.set_training(training);
  dropout2.set_training(training);
  dropout3.set_training(training);
}

void TransformerDecoderLayer::collect_parameters(const std::string& prefix,
                                                 std::vector<NamedParameter>& out) {
  self_attn.collect_parameters(prefix + "self_attn.", out);
  if (multihead_attn) multihead_attn->collect_parameters(prefix + "multihead_attn.", out);
  ff.collect_parameters(prefix, out);  // "linear1.*", "linear2.*"
  norm1->collect_parameters(prefix + "norm1.", out);
  norm2->collect_parameters(prefix + "norm2.", out);
  if (norm3) norm3->collect_parameters(prefix + "norm3.", out);
}

Tensor3 TransformerDecoderLayer::forward(const Tensor3& x, const Tensor3* memory,
                                         const AttentionMask& self_mask,
                                         const AttentionMask& memory_mask,
                                         const PaddingMask* padding_for_norms) {
  check_shape("TransformerDecoderLayer.forward: x", x, {-1, -1, static_cast<long>(cfg_.d_model)});
  if (cross_ && memory == nullptr)
    throw std::invalid_argument(
        "TransformerDecoderLayer.forward: memory = nullptr, but the layer was built with "
        "cross_attention = true (pass the encoder output [B, S, D])");
  if (!cross_ && memory != nullptr)
    throw std::invalid_argument(
        "TransformerDecoderLayer.forward: memory given, but the layer was built with "
        "cross_attention = false (decoder-only block); pass nullptr");
  const bool pre = cfg_.pre_norm();
  Tensor3 h = residual_forward(pre, *norm1, dropout1, x, padding_for_norms,
                               [&](auto&& z) {
                                 return self_attn.forward(std::forward<decltype(z)>(z), self_mask);
                               });
  if (cross_) {
    // The cross form takes its query by const reference (copied into its cache).
    h = residual_forward(pre, *norm2, dropout2, h, padding_for_norms, [&](const Tensor3& z) {
      return multihead_attn->forward(z, *memory, memory_mask);
    });
  }
  Norm& ff_norm = cross_ ? *norm3 : *norm2;
  Tensor3 y = residual_forward(pre, ff_norm, dropout3, h, padding_for_norms,
                               [&](auto&& z) { return ff.forward(std::forward<decltype(z)>(z)); });
  b_ = x.shape()[0];
  t_ = x.shape()[1];
  cached_ = true;
  has_memory_grad_ = false;
  return y;
}

Tensor3 TransformerDecoderLayer::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("TransformerDecoderLayer.backward: called before forward");
  check_shape("TransformerDecoderLayer.backward: dy", dy,
              {static_cast<long>(b_), static_cast<long>(t_), static_cast<long>(cfg_.d_model)});
  const bool pre = cfg_.pre_norm();
  Norm& ff_norm = cross_ ? *norm3 : *norm2;
  Tensor3 dh = residual_backward(pre, ff_norm, dropout3, dy,
                                 [&](const Tensor3& d) { return ff.backward(d); });
  if (cross_) {
    dh = residual_backward(pre, *norm2, dropout2, dh, [&](const Tensor3& d) {
      Tensor3 dq = multihead_attn->backward(d);
      dmemory_ = multihead_attn->key_value_grad();  // memory enters only as keys/values
      return dq;
    });
    has_memory_grad_ = true;
  }
  return residual_backward(pre, *norm1, dropout1, dh,
                           [&](const Tensor3& d) { return self_attn.backward(d); });
}

const Tensor3& TransformerDecoderLayer::memory_grad() const {
  if (!cross_)
    throw std::logic_error(
        "TransformerDecoderLayer.memory_grad: the layer has no cross-attention (no memory)");
  if (!has_memory_grad_)
    throw std::logic_error("TransformerDecoderLayer.memory_grad: no backward since the last forward");
  return dmemory_;
}

void TransformerEncoderLayer::collect_buffers(const std::string& prefix,
                                              std::vector<NamedBuffer>& out) {
  self_attn.collect_buffers(prefix + "self_attn.", out);
  ff.collect_buffers(prefix, out);  // "linear1.*", "linear2.*", "dropout.rng"
  norm1->collect_buffers(prefix + "norm1.", out);
  norm2->collect_buffers(prefix + "norm2.", out);
  dropout1.collect_buffers(prefix + "dropout1.", out);
  dropout2.collect_buffers(prefix + "dropout2.", out);
}

void TransformerDecoderLayer::collect_buffers(const std::string& prefix,
                                              std::vector<NamedBuffer>& out) {
  self_attn.collect_buffers(prefix + "self_attn.", out);
  if (multihead_attn) multihead_attn->collect_buffers(prefix + "multihead_attn.", out);
  ff.collect_buffers(prefix, out);
  norm1->collect_buffers(prefix + "norm1.", out);
  norm2->collect_buffers(prefix + "norm2.", out);
  if (norm3) norm3->collect_buffers(prefix + "norm3.", out);
  dropout1.collect_buffers(prefix + "dropout1.", out);
  dropout2.collect_buffers(prefix + "dropout2.", out);
  dropout3.collect_buffers(prefix + "dropout3.", out);
}

}  // namespace seqlab

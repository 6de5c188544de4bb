#include "seqlab/nn/rnn.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "seqlab/core/gemm.hpp"
#include "recurrent_common.hpp"

namespace seqlab {

using detail::add_to;
using detail::check_recurrent_sizes;
using detail::column_sums;
using detail::fill_rows;
using detail::relu_inplace;
using detail::shape2;
using detail::squared_norm;
using detail::swap_leading_axes;
using detail::tanh_to;

Nonlinearity parse_nonlinearity(const std::string& name) {
  if (name == "tanh") return Nonlinearity::tanh;
  if (name == "relu") return Nonlinearity::relu;
  throw std::invalid_argument("RNN nonlinearity '" + name + "' is not allowed; allowed: tanh, relu");
}

std::string to_string(Nonlinearity nonlinearity) {
  return nonlinearity == Nonlinearity::relu ? "relu" : "tanh";
}

RNN::RNN(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng,
         Nonlinearity nonlinearity)
    : input_size_(input_size), hidden_size_(hidden_size), num_layers_(num_layers),
      nonlinearity_(nonlinearity) {
  check_recurrent_sizes("RNN", input_size, hidden_size, num_layers);
  if (nonlinearity != Nonlinearity::tanh && nonlinearity != Nonlinearity::relu)
    throw std::invalid_argument("RNN: nonlinearity must be Nonlinearity::tanh or Nonlinearity::relu");
  const std::size_t H = hidden_size;
  const float bound = 1.0f / std::sqrt(static_cast<float>(H));
  layers_.reserve(num_layers);  // never resized afterwards: NamedParameter pointers stay valid
  for (std::size_t k = 0; k < num_layers; ++k) {
    const std::string s = "_l" + std::to_string(k);
    const std::size_t in_k = k == 0 ? input_size : H;
    layers_.push_back(Layer{Parameter("weight_ih" + s, shape2(H, in_k)),
                            Parameter("weight_hh" + s, shape2(H, H)), Parameter("bias_ih" + s, {H}),
                            Parameter("bias_hh" + s, {H})});
    Layer& l = layers_.back();
    // PyTorch's RNNBase.reset_parameters: uniform_(-1/sqrt(H), 1/sqrt(H)) over parameters in order.
    rng.fill_uniform(l.weight_ih.value, -bound, bound);
    rng.fill_uniform(l.weight_hh.value, -bound, bound);
    rng.fill_uniform(l.bias_ih.value, -bound, bound);
    rng.fill_uniform(l.bias_hh.value, -bound, bound);
  }
  hs_.resize(num_layers);
}

RNN::Layer& RNN::layer(std::size_t k) {
  if (k >= num_layers_)
    throw std::out_of_range("RNN: layer index " + std::to_string(k) + " out of range; num_layers is " +
                            std::to_string(num_layers_));
  return layers_[k];
}
Parameter& RNN::weight_ih(std::size_t k) { return layer(k).weight_ih; }
Parameter& RNN::weight_hh(std::size_t k) { return layer(k).weight_hh; }
Parameter& RNN::bias_ih(std::size_t k) { return layer(k).bias_ih; }
Parameter& RNN::bias_hh(std::size_t k) { return layer(k).bias_hh; }

void RNN::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  for (auto& l : layers_) {
    for (Parameter* p : {&l.weight_ih, &l.weight_hh, &l.bias_ih, &l.bias_hh})
      out.push_back({prefix + p->name, p});
  }
}

const float* RNN::layer_input(std::size_t k) const {
  if (k == 0) return x_tm_.data();
  return hs_[k - 1].data() + B_ * hidden_size_;  // h_1..h_T of layer k-1
}

Tensor3 RNN::forward(const Tensor3& x, const Tensor3* h0) {
  check_shape("RNN.forward x [B, T, input_size]", x, {-1, -1, static_cast<long>(input_size_)});
  const std::size_t B = x.shape()[0], T = x.shape()[1], D = input_size_, H = hidden_size_;
  const std::size_t BH = B * H;
  if (h0)
    check_shape("RNN.forward h0 [L, B, H]", *h0,
                {static_cast<long>(num_layers_), static_cast<long>(B), static_cast<long>(H)});
  has_forward_ = false;
  has_backward_ = false;
  B_ = B;
  T_ = T;

  x_tm_.resize({T, B, D});
  swap_leading_axes(x.data(), x_tm_.data(), B, T, D);
  final_.resize({num_layers_, B, H});
  bias_sum_.resize({H});

  for (std::size_t k = 0; k < num_layers_; ++k) {
    const Layer& l = layers_[k];
    const std::size_t in_k = k == 0 ? D : H;
    hs_[k].resize({T + 1, B, H});
    float* hs = hs_[k].data();
    if (h0) std::memcpy(hs, h0->data() + k * BH, BH * sizeof(float));
    else std::fill(hs, hs + BH, 0.0f);

    // Pre-activations of all steps, written where h_1..h_T go:
    // hs[t+1, b, :] = b_ih + b_hh + x_t[b] W_ihᵀ   (one GEMM over T·B rows).
    const float* bih = l.bias_ih.value.data();
    const float* bhh = l.bias_hh.value.data();
    float* bsum = bias_sum_.data();
    for (std::size_t j = 0; j < H; ++j) bsum[j] = bih[j] + bhh[j];
    fill_rows(hs + BH, T * B, bsum, H);
    gemm(false, true, T * B, H, in_k, 1.0f, layer_input(k), in_k, l.weight_ih.value.data(), in_k, 1.0f,
         hs + BH, H);

    const float* Whh = l.weight_hh.value.data();
    for (std::size_t t = 0; t < T; ++t) {
      float* ht = hs + (t + 1) * BH;
      // pre_t += h_{t-1} W_hhᵀ   ([B, H] x [H, H]), then h_t = act(pre_t) in place.
      gemm(false, true, B, H, H, 1.0f, hs + t * BH, H, Whh, H, 1.0f, ht, H);
      if (nonlinearity_ == Nonlinearity::tanh) tanh_to(ht, ht, BH);
      else relu_inplace(ht, BH);
    }
    std::memcpy(final_.data() + k * BH, hs + T * BH, BH * sizeof(float));
  }

  Tensor3 out({B, T, H});
  // out[b, t, :] = hs_{L-1}[t+1, b, :]
  swap_leading_axes(hs_.back().data() + BH, out.data(), T, B, H);
  has_forward_ = true;
  return out;
}

const Tensor3& RNN::final_state() const {
  if (!has_forward_) throw std::logic_error("RNN.final_state: no forward has run");
  return final_;
}

Tensor3 RNN::backward(const Tensor3& dy, const Tensor3* dh_n) {
  if (!has_forward_) throw std::logic_error("RNN.backward called before forward");
  const std::size_t B = B_, T = T_, D = input_size_, H = hidden_size_, L = num_layers_;
  const std::size_t BH = B * H;
  const long Bs = static_cast<long>(B), Hs = static_cast<long>(H);
  check_shape("RNN.backward dy [B, T, H]", dy, {Bs, static_cast<long>(T), Hs});
  if (dh_n) check_shape("RNN.backward dh_n [L, B, H]", *dh_n, {static_cast<long>(L), Bs, Hs});
  has_backward_ = false;

  dh_a_.resize({T, B, H});
  dh_b_.resize({T, B, H});
  dx_tm_.resize({T, B, D});
  dbias_.resize({H});
  dh0_.resize({L, B, H});
  grad_norms_.resize({L, T});

  // dh_cur[t] accumulates the total dL/dh_t of the current layer: first its output gradient
  // (dy, or the input gradient of the layer above), then the recurrent part from step t+1. Once
  // complete it is turned in place into dL/d(pre-activation) at t.
  Tensor3* dh_cur = &dh_a_;
  Tensor3* dh_low = &dh_b_;
  swap_leading_axes(dy.data(), dh_cur->data(), B, T, H);
  const bool is_tanh = nonlinearity_ == Nonlinearity::tanh;

  for (std::size_t kk = L; kk-- > 0;) {
    Layer& l = layers_[kk];
    const float* hs = hs_[kk].data();
    const std::size_t in_k = kk == 0 ? D : H;
    float* dh = dh_cur->data();
    const float* Whh = l.weight_hh.value.data();
    float* dh0 = dh0_.data() + kk * BH;

    if (T == 0) {  // nothing to step through: the final state is the initial state
      if (dh_n) std::memcpy(dh0, dh_n->data() + kk * BH, BH * sizeof(float));
      else std::fill(dh0, dh0 + BH, 0.0f);
    } else if (dh_n) {
      add_to(dh + (T - 1) * BH, dh_n->data() + kk * BH, BH);
    }

    for (std::size_t t = T; t-- > 0;) {
      float* dht = dh + t * BH;  // total dL/dh_t (complete now: step t+1 has added its part)
      grad_norms_(kk, t) = static_cast<float>(std::sqrt(squared_norm(dht, BH)));
      // h_t = act(pre_t): dpre_t = dh_t ⊙ act'(pre_t), act' from h_t (tanh' = 1 - h², relu' = [h > 0]).
      const float* ht = hs + (t + 1) * BH;
      if (is_tanh) {
        for (std::size_t e = 0; e < BH; ++e) dht[e] *= 1.0f - ht[e] * ht[e];
      } else {
        for (std::size_t e = 0; e < BH; ++e) dht[e] = ht[e] > 0.0f ? dht[e] : 0.0f;
      }
      // dL/dh_{t-1} += dpre_t W_hh   ([B, H] x [H, H]); for t = 0 this is dL/dh0.
      if (t > 0) gemm(false, false, B, H, H, 1.0f, dht, H, Whh, H, 1.0f, dh + (t - 1) * BH, H);
      else gemm(false, false, B, H, H, 1.0f, dht, H, Whh, H, 0.0f, dh0, H);
    }

    // Parameter gradients over all T·B rows at once (added), dpre being [T·B, H] in dh:
    // dW_hh += Σ_t dpre_tᵀ h_{t-1};  dW_ih += Σ_t dpre_tᵀ x_t;  db_ih, db_hh += Σ_rows dpre.
    const std::size_t N = T * B;
    gemm(true, false, H, H, N, 1.0f, dh, H, hs, H, 1.0f, l.weight_hh.grad.data(), H);
    gemm(true, false, H, in_k, N, 1.0f, dh, H, layer_input(kk), in_k, 1.0f, l.weight_ih.grad.data(), in_k);
    column_sums(dh, N, H, dbias_.data());
    add_to(l.bias_ih.grad.data(), dbias_.data(), H);
    add_to(l.bias_hh.grad.data(), dbias_.data(), H);

    // Input gradient: dX = dpre W_ih ([T·B, H] x [H, in_k]); for kk > 0 it is the output gradient
    // of layer kk-1.
    float* dX = kk > 0 ? dh_low->data() : dx_tm_.data();
    gemm(false, false, N, in_k, H, 1.0f, dh, H, l.weight_ih.value.data(), in_k, 0.0f, dX, in_k);
    std::swap(dh_cur, dh_low);
  }

  Tensor3 dx({B, T, D});
  swap_leading_axes(dx_tm_.data(), dx.data(), T, B, D);
  has_backward_ = true;
  return dx;
}

const Tensor3& RNN::initial_state_grad() const {
  if (!has_backward_) throw std::logic_error("RNN.initial_state_grad: no backward has run");
  return dh0_;
}

const Tensor2& RNN::hidden_grad_norms() const {
  if (!has_backward_) throw std::logic_error("RNN.hidden_grad_norms: no backward has run");
  return grad_norms_;
}

}  // namespace seqlab

#include "seqlab/nn/lstm.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "seqlab/core/gemm.hpp"
#include "recurrent_common.hpp"

namespace seqlab {

using detail::check_recurrent_sizes;
using detail::column_sums;
using detail::fill_rows;
using detail::shape2;
using detail::sigmoid_inplace;
using detail::squared_norm;
using detail::swap_leading_axes;
using detail::tanh_to;

LSTM::LSTM(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng)
    : input_size_(input_size), hidden_size_(hidden_size), num_layers_(num_layers) {
  check_recurrent_sizes("LSTM", input_size, hidden_size, num_layers);
  const std::size_t H = hidden_size, G = 4 * H;
  const float bound = 1.0f / std::sqrt(static_cast<float>(H));
  layers_.reserve(num_layers);  // never resized afterwards: NamedParameter pointers stay valid
  for (std::size_t k = 0; k < num_layers; ++k) {
    const std::string s = "_l" + std::to_string(k);
    const std::size_t in_k = k == 0 ? input_size : H;
    layers_.push_back(Layer{Parameter("weight_ih" + s, shape2(G, in_k)),
                            Parameter("weight_hh" + s, shape2(G, H)), Parameter("bias_ih" + s, {G}),
                            Parameter("bias_hh" + s, {G})});
    Layer& l = layers_.back();
    // PyTorch's LSTM.reset_parameters: uniform_(-1/sqrt(H), 1/sqrt(H)) over parameters in order.
    rng.fill_uniform(l.weight_ih.value, -bound, bound);
    rng.fill_uniform(l.weight_hh.value, -bound, bound);
    rng.fill_uniform(l.bias_ih.value, -bound, bound);
    rng.fill_uniform(l.bias_hh.value, -bound, bound);
  }
  cache_.resize(num_layers);
}

LSTM::Layer& LSTM::layer(std::size_t k) {
  if (k >= num_layers_)
    throw std::out_of_range("LSTM: layer index " + std::to_string(k) + " out of range; num_layers is " +
                            std::to_string(num_layers_));
  return layers_[k];
}
Parameter& LSTM::weight_ih(std::size_t k) { return layer(k).weight_ih; }
Parameter& LSTM::weight_hh(std::size_t k) { return layer(k).weight_hh; }
Parameter& LSTM::bias_ih(std::size_t k) { return layer(k).bias_ih; }
Parameter& LSTM::bias_hh(std::size_t k) { return layer(k).bias_hh; }

void LSTM::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  for (auto& l : layers_) {
    for (Parameter* p : {&l.weight_ih, &l.weight_hh, &l.bias_ih, &l.bias_hh})
      out.push_back({prefix + p->name, p});
  }
}

const float* LSTM::layer_input(std::size_t k) const {
  if (k == 0) return x_tm_.data();
  return cache_[k - 1].hs.data() + B_ * hidden_size_;  // h_1..h_T of layer k-1
}

Tensor3 LSTM::forward(const Tensor3& x, const LSTMState* state0) {
  const long Ls = static_cast<long>(num_layers_), Hs = static_cast<long>(hidden_size_);
  check_shape("LSTM.forward x [B, T, input_size]", x, {-1, -1, static_cast<long>(input_size_)});
  const std::size_t B = x.shape()[0], T = x.shape()[1], D = input_size_, H = hidden_size_;
  const std::size_t G = 4 * H, BH = B * H, BG = B * G;
  if (state0) {
    check_shape("LSTM.forward state0.h [L, B, H]", state0->h, {Ls, static_cast<long>(B), Hs});
    check_shape("LSTM.forward state0.c [L, B, H]", state0->c, {Ls, static_cast<long>(B), Hs});
  }
  has_forward_ = false;
  has_backward_ = false;
  B_ = B;
  T_ = T;

  x_tm_.resize({T, B, D});
  swap_leading_axes(x.data(), x_tm_.data(), B, T, D);
  final_.h.resize({num_layers_, B, H});
  final_.c.resize({num_layers_, B, H});
  bias_sum_.resize({G});

  for (std::size_t k = 0; k < num_layers_; ++k) {
    const Layer& l = layers_[k];
    LayerCache& c = cache_[k];
    const std::size_t in_k = k == 0 ? D : H;
    c.hs.resize({T + 1, B, H});
    c.cs.resize({T + 1, B, H});
    c.gates.resize({T, B, G});
    c.tanh_c.resize({T, B, H});
    float* hs = c.hs.data();
    float* cs = c.cs.data();
    float* gates = c.gates.data();
    float* tanh_c = c.tanh_c.data();
    if (state0) {
      std::memcpy(hs, state0->h.data() + k * BH, BH * sizeof(float));
      std::memcpy(cs, state0->c.data() + k * BH, BH * sizeof(float));
    } else {
      std::fill(hs, hs + BH, 0.0f);
      std::fill(cs, cs + BH, 0.0f);
    }

    // Input projections of all steps in one GEMM, on top of both biases:
    // gates[t, b, :] = b_ih + b_hh + x_t[b] W_ihᵀ.
    const float* bih = l.bias_ih.value.data();
    const float* bhh = l.bias_hh.value.data();
    float* bsum = bias_sum_.data();
    for (std::size_t j = 0; j < G; ++j) bsum[j] = bih[j] + bhh[j];
    fill_rows(gates, T * B, bsum, G);
    gemm(false, true, T * B, G, in_k, 1.0f, layer_input(k), in_k, l.weight_ih.value.data(), in_k, 1.0f,
         gates, G);

    const float* Whh = l.weight_hh.value.data();
    for (std::size_t t = 0; t < T; ++t) {
      float* gt = gates + t * BG;
      // gates_t += h_{t-1} W_hhᵀ   ([B, H] x [H, 4H])
      gemm(false, true, B, G, H, 1.0f, hs + t * BH, H, Whh, H, 1.0f, gt, G);
      const float* cprev = cs + t * BH;
      float* cnext = cs + (t + 1) * BH;
      float* hnext = hs + (t + 1) * BH;
      float* tc = tanh_c + t * BH;
      for (std::size_t b = 0; b < B; ++b) {
        float* gi = gt + b * G;  // row of b: [i | f | g | o], H each
        const float* gf = gi + H;
        float* gg = gi + 2 * H;
        float* go = gi + 3 * H;
        sigmoid_inplace(gi, 2 * H);  // i, f
        tanh_to(gg, gg, H);          // g
        sigmoid_inplace(go, H);      // o
        const std::size_t o = b * H;
        for (std::size_t j = 0; j < H; ++j)
          cnext[o + j] = gf[j] * cprev[o + j] + gi[j] * gg[j];  // c_t = f ⊙ c_{t-1} + i ⊙ g
        tanh_to(cnext + o, tc + o, H);
        for (std::size_t j = 0; j < H; ++j) hnext[o + j] = go[j] * tc[o + j];  // h_t = o ⊙ tanh(c_t)
      }
    }
    std::memcpy(final_.h.data() + k * BH, hs + T * BH, BH * sizeof(float));
    std::memcpy(final_.c.data() + k * BH, cs + T * BH, BH * sizeof(float));
  }

  Tensor3 out({B, T, H});
  // out[b, t, :] = hs_{L-1}[t+1, b, :]
  swap_leading_axes(cache_.back().hs.data() + BH, out.data(), T, B, H);
  has_forward_ = true;
  return out;
}

const LSTMState& LSTM::final_state() const {
  if (!has_forward_) throw std::logic_error("LSTM.final_state: no forward has run");
  return final_;
}

Tensor3 LSTM::backward(const Tensor3& dy, const LSTMState* dfinal) {
  if (!has_forward_) throw std::logic_error("LSTM.backward called before forward");
  const std::size_t B = B_, T = T_, D = input_size_, H = hidden_size_, L = num_layers_;
  const std::size_t G = 4 * H, BH = B * H, BG = B * G;
  const long Bs = static_cast<long>(B), Hs = static_cast<long>(H), Ls = static_cast<long>(L);
  check_shape("LSTM.backward dy [B, T, H]", dy, {Bs, static_cast<long>(T), Hs});
  if (dfinal) {
    check_shape("LSTM.backward dfinal.h [L, B, H]", dfinal->h, {Ls, Bs, Hs});
    check_shape("LSTM.backward dfinal.c [L, B, H]", dfinal->c, {Ls, Bs, Hs});
  }
  has_backward_ = false;

  dgates_.resize({T, B, G});
  dh_a_.resize({T, B, H});
  dh_b_.resize({T, B, H});
  dx_tm_.resize({T, B, D});
  dc_.resize({B, H});
  dstate0_.h.resize({L, B, H});
  dstate0_.c.resize({L, B, H});
  grad_norms_.resize({L, T});
  std::vector<float> dbias(G);

  // dh_cur[t] accumulates the total dL/dh_t of the current layer: first its output gradient
  // (dy, or the input gradient of the layer above), then the recurrent part from step t+1.
  Tensor3* dh_cur = &dh_a_;
  Tensor3* dh_low = &dh_b_;
  swap_leading_axes(dy.data(), dh_cur->data(), B, T, H);

  for (std::size_t kk = L; kk-- > 0;) {
    Layer& l = layers_[kk];
    const LayerCache& c = cache_[kk];
    const std::size_t in_k = kk == 0 ? D : H;
    float* dh = dh_cur->data();
    float* dg = dgates_.data();
    float* dc = dc_.data();
    const float* gates = c.gates.data();
    const float* cs = c.cs.data();
    const float* tanh_c = c.tanh_c.data();
    const float* Whh = l.weight_hh.value.data();

    if (dfinal) {
      const float* dhn = dfinal->h.data() + kk * BH;
      float* dlast = dh + (T > 0 ? (T - 1) * BH : 0);
      if (T > 0)
        for (std::size_t e = 0; e < BH; ++e) dlast[e] += dhn[e];
      std::memcpy(dc, dfinal->c.data() + kk * BH, BH * sizeof(float));
    } else {
      std::fill(dc, dc + BH, 0.0f);
    }
    float* dh0 = dstate0_.h.data() + kk * BH;
    if (T == 0) {  // nothing to step through: the final state is the initial state
      if (dfinal) std::memcpy(dh0, dfinal->h.data() + kk * BH, BH * sizeof(float));
      else std::fill(dh0, dh0 + BH, 0.0f);
    }

    for (std::size_t t = T; t-- > 0;) {
      float* dht = dh + t * BH;  // total dL/dh_t (complete now: step t+1 has added its part)
      grad_norms_(kk, t) = static_cast<float>(std::sqrt(squared_norm(dht, BH)));

      const float* gt = gates + t * BG;
      float* dgt = dg + t * BG;
      const float* cprev = cs + t * BH;
      const float* tc = tanh_c + t * BH;
      for (std::size_t b = 0; b < B; ++b) {
        const float* gi = gt + b * G;
        const float* gf = gi + H;
        const float* gg = gi + 2 * H;
        const float* go = gi + 3 * H;
        float* di = dgt + b * G;
        float* df = di + H;
        float* dgg = di + 2 * H;
        float* dout = di + 3 * H;
        const std::size_t o = b * H;
        for (std::size_t j = 0; j < H; ++j) {
          const float i_ = gi[j], f_ = gf[j], g_ = gg[j], o_ = go[j], th = tc[o + j];
          const float dhj = dht[o + j];
          // h = o ⊙ tanh(c):  dc += dh ⊙ o ⊙ (1 - tanh²c),  do = dh ⊙ tanh c
          const float dcj = dc[o + j] + dhj * o_ * (1.0f - th * th);
          // c = f ⊙ c_prev + i ⊙ g; then through σ' = σ(1-σ) and tanh' = 1 - tanh²
          di[j] = dcj * g_ * i_ * (1.0f - i_);
          df[j] = dcj * cprev[o + j] * f_ * (1.0f - f_);
          dgg[j] = dcj * i_ * (1.0f - g_ * g_);
          dout[j] = dhj * th * o_ * (1.0f - o_);
          dc[o + j] = dcj * f_;  // dL/dc_{t-1} from this step
        }
      }
      // dL/dh_{t-1} += dgates_t W_hh   ([B, 4H] x [4H, H]); for t = 0 this is dL/dh0.
      if (t > 0) gemm(false, false, B, H, G, 1.0f, dgt, G, Whh, H, 1.0f, dh + (t - 1) * BH, H);
      else gemm(false, false, B, H, G, 1.0f, dgt, G, Whh, H, 0.0f, dh0, H);
    }
    std::memcpy(dstate0_.c.data() + kk * BH, dc, BH * sizeof(float));

    // Parameter gradients over all T·B rows at once (added):
    // dW_hh += Σ_t dgates_tᵀ h_{t-1};  dW_ih += Σ_t dgates_tᵀ x_t;  db_ih, db_hh += Σ_rows dgates.
    const std::size_t N = T * B;
    gemm(true, false, G, H, N, 1.0f, dg, G, c.hs.data(), H, 1.0f, l.weight_hh.grad.data(), H);
    gemm(true, false, G, in_k, N, 1.0f, dg, G, layer_input(kk), in_k, 1.0f, l.weight_ih.grad.data(),
         in_k);
    column_sums(dg, N, G, dbias.data());
    float* gbih = l.bias_ih.grad.data();
    float* gbhh = l.bias_hh.grad.data();
    for (std::size_t j = 0; j < G; ++j) {
      gbih[j] += dbias[j];
      gbhh[j] += dbias[j];
    }

    // Input gradient: dX = dgates W_ih ([T·B, 4H] x [4H, in_k]); for kk > 0 it is the output
    // gradient of layer kk-1.
    float* dX = kk > 0 ? dh_low->data() : dx_tm_.data();
    gemm(false, false, N, in_k, G, 1.0f, dg, G, l.weight_ih.value.data(), in_k, 0.0f, dX, in_k);
    std::swap(dh_cur, dh_low);
  }

  Tensor3 dx({B, T, D});
  swap_leading_axes(dx_tm_.data(), dx.data(), T, B, D);
  has_backward_ = true;
  return dx;
}

const LSTMState& LSTM::initial_state_grad() const {
  if (!has_backward_) throw std::logic_error("LSTM.initial_state_grad: no backward has run");
  return dstate0_;
}

const Tensor2& LSTM::hidden_grad_norms() const {
  if (!has_backward_) throw std::logic_error("LSTM.hidden_grad_norms: no backward has run");
  return grad_norms_;
}

}  // namespace seqlab

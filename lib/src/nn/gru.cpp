#include "seqlab/nn/gru.hpp"

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
using detail::shape2;
using detail::sigmoid_inplace;
using detail::squared_norm;
using detail::swap_leading_axes;
using detail::tanh_to;

GRU::GRU(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng)
    : input_size_(input_size), hidden_size_(hidden_size), num_layers_(num_layers) {
  check_recurrent_sizes("GRU", input_size, hidden_size, num_layers);
  const std::size_t H = hidden_size, G = 3 * H;
  const float bound = 1.0f / std::sqrt(static_cast<float>(H));
  layers_.reserve(num_layers);  // never resized afterwards: NamedParameter pointers stay valid
  for (std::size_t k = 0; k < num_layers; ++k) {
    const std::string s = "_l" + std::to_string(k);
    const std::size_t in_k = k == 0 ? input_size : H;
    layers_.push_back(Layer{Parameter("weight_ih" + s, shape2(G, in_k)),
                            Parameter("weight_hh" + s, shape2(G, H)), Parameter("bias_ih" + s, {G}),
                            Parameter("bias_hh" + s, {G})});
    Layer& l = layers_.back();
    // PyTorch's RNNBase.reset_parameters: uniform_(-1/sqrt(H), 1/sqrt(H)) over parameters in order.
    rng.fill_uniform(l.weight_ih.value, -bound, bound);
    rng.fill_uniform(l.weight_hh.value, -bound, bound);
    rng.fill_uniform(l.bias_ih.value, -bound, bound);
    rng.fill_uniform(l.bias_hh.value, -bound, bound);
  }
  cache_.resize(num_layers);
}

GRU::Layer& GRU::layer(std::size_t k) {
  if (k >= num_layers_)
    throw std::out_of_range("GRU: layer index " + std::to_string(k) + " out of range; num_layers is " +
                            std::to_string(num_layers_));
  return layers_[k];
}
Parameter& GRU::weight_ih(std::size_t k) { return layer(k).weight_ih; }
Parameter& GRU::weight_hh(std::size_t k) { return layer(k).weight_hh; }
Parameter& GRU::bias_ih(std::size_t k) { return layer(k).bias_ih; }
Parameter& GRU::bias_hh(std::size_t k) { return layer(k).bias_hh; }

void GRU::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  for (auto& l : layers_) {
    for (Parameter* p : {&l.weight_ih, &l.weight_hh, &l.bias_ih, &l.bias_hh})
      out.push_back({prefix + p->name, p});
  }
}

const float* GRU::layer_input(std::size_t k) const {
  if (k == 0) return x_tm_.data();
  return cache_[k - 1].hs.data() + B_ * hidden_size_;  // h_1..h_T of layer k-1
}

Tensor3 GRU::forward(const Tensor3& x, const Tensor3* h0) {
  check_shape("GRU.forward x [B, T, input_size]", x, {-1, -1, static_cast<long>(input_size_)});
  const std::size_t B = x.shape()[0], T = x.shape()[1], D = input_size_, H = hidden_size_;
  const std::size_t G = 3 * H, BH = B * H, BG = B * G;
  if (h0)
    check_shape("GRU.forward h0 [L, B, H]", *h0,
                {static_cast<long>(num_layers_), static_cast<long>(B), static_cast<long>(H)});
  has_forward_ = false;
  has_backward_ = false;
  B_ = B;
  T_ = T;

  x_tm_.resize({T, B, D});
  swap_leading_axes(x.data(), x_tm_.data(), B, T, D);
  final_.resize({num_layers_, B, H});
  gh_.resize({B, G});
  float* gh = gh_.data();

  for (std::size_t k = 0; k < num_layers_; ++k) {
    const Layer& l = layers_[k];
    LayerCache& c = cache_[k];
    const std::size_t in_k = k == 0 ? D : H;
    c.hs.resize({T + 1, B, H});
    c.gates.resize({T, B, G});
    c.ghn.resize({T, B, H});
    float* hs = c.hs.data();
    float* gates = c.gates.data();
    float* ghn = c.ghn.data();
    if (h0) std::memcpy(hs, h0->data() + k * BH, BH * sizeof(float));
    else std::fill(hs, hs + BH, 0.0f);

    // Input projections of all steps in one GEMM: gates[t, b, :] = b_ih + x_t[b] W_ihᵀ.
    fill_rows(gates, T * B, l.bias_ih.value.data(), G);
    gemm(false, true, T * B, G, in_k, 1.0f, layer_input(k), in_k, l.weight_ih.value.data(), in_k, 1.0f,
         gates, G);

    const float* Whh = l.weight_hh.value.data();
    const float* bhh = l.bias_hh.value.data();
    for (std::size_t t = 0; t < T; ++t) {
      const float* hprev = hs + t * BH;
      // gh = h_{t-1} W_hhᵀ   ([B, H] x [H, 3H]); b_hh is added below.
      gemm(false, true, B, G, H, 1.0f, hprev, H, Whh, H, 0.0f, gh, G);
      float* gt = gates + t * BG;
      float* hnext = hs + (t + 1) * BH;
      float* ghn_t = ghn + t * BH;
      for (std::size_t b = 0; b < B; ++b) {
        float* a = gt + b * G;  // row of b: [r | z | n], H each; holds W_i· x + b_i· on entry
        const float* g = gh + b * G;
        for (std::size_t j = 0; j < 2 * H; ++j) a[j] += g[j] + bhh[j];  // r, z pre-activations
        sigmoid_inplace(a, 2 * H);
        const float* r = a;
        const float* z = a + H;
        float* n = a + 2 * H;
        const std::size_t o = b * H;
        for (std::size_t j = 0; j < H; ++j) {
          const float hn = g[2 * H + j] + bhh[2 * H + j];  // W_hn h_{t-1} + b_hn
          ghn_t[o + j] = hn;
          n[j] += r[j] * hn;  // W_in x + b_in + r ⊙ (W_hn h + b_hn)
        }
        tanh_to(n, n, H);
        const float* hp = hprev + o;
        // h_t = (1 - z) ⊙ n + z ⊙ h_{t-1}  (this form gives h_t = h_{t-1} exactly when z = 1)
        for (std::size_t j = 0; j < H; ++j) hnext[o + j] = (1.0f - z[j]) * n[j] + z[j] * hp[j];
      }
    }
    std::memcpy(final_.data() + k * BH, hs + T * BH, BH * sizeof(float));
  }

  Tensor3 out({B, T, H});
  // out[b, t, :] = hs_{L-1}[t+1, b, :]
  swap_leading_axes(cache_.back().hs.data() + BH, out.data(), T, B, H);
  has_forward_ = true;
  return out;
}

const Tensor3& GRU::final_state() const {
  if (!has_forward_) throw std::logic_error("GRU.final_state: no forward has run");
  return final_;
}

Tensor3 GRU::backward(const Tensor3& dy, const Tensor3* dh_n) {
  if (!has_forward_) throw std::logic_error("GRU.backward called before forward");
  const std::size_t B = B_, T = T_, D = input_size_, H = hidden_size_, L = num_layers_;
  const std::size_t G = 3 * H, BH = B * H, BG = B * G;
  const long Bs = static_cast<long>(B), Hs = static_cast<long>(H);
  check_shape("GRU.backward dy [B, T, H]", dy, {Bs, static_cast<long>(T), Hs});
  if (dh_n) check_shape("GRU.backward dh_n [L, B, H]", *dh_n, {static_cast<long>(L), Bs, Hs});
  has_backward_ = false;

  dgi_.resize({T, B, G});
  dgh_.resize({T, B, G});
  dh_a_.resize({T, B, H});
  dh_b_.resize({T, B, H});
  dx_tm_.resize({T, B, D});
  dbias_.resize({G});
  dh0_.resize({L, B, H});
  grad_norms_.resize({L, T});

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
    float* dgi = dgi_.data();
    float* dgh = dgh_.data();
    const float* hs = c.hs.data();
    const float* gates = c.gates.data();
    const float* ghn = c.ghn.data();
    const float* Whh = l.weight_hh.value.data();
    float* dh0 = dh0_.data() + kk * BH;

    if (T == 0) {  // nothing to step through: the final state is the initial state
      if (dh_n) std::memcpy(dh0, dh_n->data() + kk * BH, BH * sizeof(float));
      else std::fill(dh0, dh0 + BH, 0.0f);
    } else if (dh_n) {
      add_to(dh + (T - 1) * BH, dh_n->data() + kk * BH, BH);
    }

    for (std::size_t t = T; t-- > 0;) {
      const float* dht = dh + t * BH;  // total dL/dh_t (complete now: step t+1 has added its part)
      grad_norms_(kk, t) = static_cast<float>(std::sqrt(squared_norm(dht, BH)));
      // dL/dh_{t-1}: the direct path z ⊙ dh_t here, the path through W_hh by the GEMM below.
      float* dprev = t > 0 ? dh + (t - 1) * BH : dh0;
      const float* hprev = hs + t * BH;
      const float* gt = gates + t * BG;
      const float* ghn_t = ghn + t * BH;
      float* dgit = dgi + t * BG;
      float* dght = dgh + t * BG;
      for (std::size_t b = 0; b < B; ++b) {
        const float* r = gt + b * G;
        const float* z = r + H;
        const float* n = r + 2 * H;
        float* di_r = dgit + b * G;  // dL/d(W_i· x + b_i·), rows r, z, n
        float* di_z = di_r + H;
        float* di_n = di_r + 2 * H;
        float* dhh_r = dght + b * G;  // dL/d(W_h· h + b_h·), rows r, z, n
        float* dhh_z = dhh_r + H;
        float* dhh_n = dhh_r + 2 * H;
        const std::size_t o = b * H;
        for (std::size_t j = 0; j < H; ++j) {
          const float r_ = r[j], z_ = z[j], n_ = n[j], hp = hprev[o + j], dhj = dht[o + j];
          // h = (1 - z) ⊙ n + z ⊙ h_prev
          const float dn = dhj * (1.0f - z_);
          const float dz = dhj * (hp - n_);
          // n = tanh(a_n), a_n = gi_n + r ⊙ ghn
          const float dan = dn * (1.0f - n_ * n_);
          const float dr = dan * ghn_t[o + j];
          // r = σ(gi_r + gh_r), z = σ(gi_z + gh_z): σ' = σ(1 - σ)
          const float dar = dr * r_ * (1.0f - r_);
          const float daz = dz * z_ * (1.0f - z_);
          di_r[j] = dar;
          di_z[j] = daz;
          di_n[j] = dan;
          dhh_r[j] = dar;
          dhh_z[j] = daz;
          dhh_n[j] = dan * r_;
          const float direct = dhj * z_;
          if (t > 0) dprev[o + j] += direct;
          else dprev[o + j] = direct;
        }
      }
      // dL/dh_{t-1} += dgh_t W_hh   ([B, 3H] x [3H, H]); for t = 0 this completes dL/dh0.
      gemm(false, false, B, H, G, 1.0f, dght, G, Whh, H, 1.0f, dprev, H);
    }

    // Parameter gradients over all T·B rows at once (added):
    // dW_hh += Σ_t dgh_tᵀ h_{t-1};  dW_ih += Σ_t dgi_tᵀ x_t;  db_hh += Σ_rows dgh;  db_ih += Σ_rows dgi.
    const std::size_t N = T * B;
    gemm(true, false, G, H, N, 1.0f, dgh, G, hs, H, 1.0f, l.weight_hh.grad.data(), H);
    gemm(true, false, G, in_k, N, 1.0f, dgi, G, layer_input(kk), in_k, 1.0f, l.weight_ih.grad.data(), in_k);
    column_sums(dgh, N, G, dbias_.data());
    add_to(l.bias_hh.grad.data(), dbias_.data(), G);
    column_sums(dgi, N, G, dbias_.data());
    add_to(l.bias_ih.grad.data(), dbias_.data(), G);

    // Input gradient: dX = dgi W_ih ([T·B, 3H] x [3H, in_k]); for kk > 0 it is the output
    // gradient of layer kk-1.
    float* dX = kk > 0 ? dh_low->data() : dx_tm_.data();
    gemm(false, false, N, in_k, G, 1.0f, dgi, G, l.weight_ih.value.data(), in_k, 0.0f, dX, in_k);
    std::swap(dh_cur, dh_low);
  }

  Tensor3 dx({B, T, D});
  swap_leading_axes(dx_tm_.data(), dx.data(), T, B, D);
  has_backward_ = true;
  return dx;
}

const Tensor3& GRU::initial_state_grad() const {
  if (!has_backward_) throw std::logic_error("GRU.initial_state_grad: no backward has run");
  return dh0_;
}

const Tensor2& GRU::hidden_grad_norms() const {
  if (!has_backward_) throw std::logic_error("GRU.hidden_grad_norms: no backward has run");
  return grad_norms_;
}

}  // namespace seqlab

#include "seqlab/nn/gru.hpp"

#include <cstring>

#include "seqlab/core/gemm.hpp"
#include "recurrent_common.hpp"

namespace seqlab {

using detail::sigmoid_inplace;
using detail::tanh_to;

GRU::GRU(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng)
    : RecurrentBase("GRU", input_size, hidden_size, num_layers, 3, rng), cache_(num_layers) {}

Tensor3 GRU::forward(const Tensor3& x, const Tensor3* h0) {
  begin_forward(x, {{"h0", h0}});
  const std::size_t B = B_, T = T_, H = hidden_size_;
  const std::size_t G = 3 * H, BH = B * H, BG = B * G;
  final_.resize({num_layers_, B, H});
  gh_.resize({B, G});
  float* gh = gh_.data();

  for (std::size_t k = 0; k < num_layers_; ++k) {
    const Layer& l = layers_[k];
    LayerCache& c = cache_[k];
    c.gates.resize({T, B, G});
    c.ghn.resize({T, B, H});
    float* hs = hs_[k].data();
    float* gates = c.gates.data();
    float* ghn = c.ghn.data();
    load_layer_state(h0, k, hs);

    // Input projections of all steps in one GEMM: gates[t, b, :] = b_ih + x_t[b] W_ihᵀ.
    project_inputs(k, gates, false);

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

  return finish_forward();
}

const Tensor3& GRU::final_state() const {
  require_forward("final_state");
  return final_;
}

Tensor3 GRU::backward(const Tensor3& dy, const Tensor3* dh_n) {
  begin_backward(dy, {{"dh_n", dh_n}});
  const std::size_t B = B_, T = T_, H = hidden_size_, L = num_layers_;
  const std::size_t G = 3 * H, BH = B * H, BG = B * G;
  dgi_.resize({T, B, G});
  dgh_.resize({T, B, G});
  dh0_.resize({L, B, H});

  for (std::size_t kk = L; kk-- > 0;) {
    // dh[t] accumulates the total dL/dh_t of this layer: first its output gradient (dy, or the
    // input gradient of the layer above), then the recurrent part from step t+1.
    float* dh = hidden_grad(kk);
    const LayerCache& c = cache_[kk];
    float* dgi = dgi_.data();
    float* dgh = dgh_.data();
    const float* hs = hs_[kk].data();
    const float* gates = c.gates.data();
    const float* ghn = c.ghn.data();
    const float* Whh = layers_[kk].weight_hh.value.data();
    float* dh0 = dh0_.data() + kk * BH;
    add_final_state_grad(kk, dh_n, dh, dh0);

    for (std::size_t t = T; t-- > 0;) {
      const float* dht = dh + t * BH;  // total dL/dh_t (complete now: step t+1 has added its part)
      record_grad_norm(kk, t, dht);
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

    // Parameter gradients (dgi for W_ih x + b_ih, dgh for W_hh h + b_hh) and the input gradient
    // (layer kk-1's output gradient, or dL/dx).
    backward_affine(kk, dgi, dgh);
  }
  return finish_backward();
}

const Tensor3& GRU::initial_state_grad() const {
  require_backward("initial_state_grad");
  return dh0_;
}

}  // namespace seqlab

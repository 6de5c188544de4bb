#include "seqlab/nn/gru.hpp"

#include <cstring>

#include "seqlab/core/gemm.hpp"
#include "recurrent_common.hpp"

namespace seqlab {

using detail::for_lanes;
using detail::sum_squares_over_lanes;
using detail::vload;
using detail::vsigmoid;
using detail::vstore;
using detail::vtanh;

GRU::GRU(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng)
    : RecurrentBase("GRU", input_size, hidden_size, num_layers, 3, rng), cache_(num_layers) {}

Tensor3 GRU::forward(const Tensor3& x, const Tensor3* h0) {
  begin_forward(x, {{"h0", h0}});
  forward_steps(h0);
  return finish_forward();
}

void GRU::forward_steps(const Tensor3* h0) {
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

    const float* WhhT = weight_hh_transposed(k);  // [H, 3H]
    const float* bhh = l.bias_hh.value.data();
    for (std::size_t t = 0; t < T; ++t) {
      const float* hprev = hs + t * BH;
      // gh = h_{t-1} W_hhᵀ   ([B, H] x [H, 3H]); b_hh is added below.
      gemm(false, false, B, G, H, 1.0f, hprev, H, WhhT, G, 0.0f, gh, G);
      float* gt = gates + t * BG;
      float* hnext = hs + (t + 1) * BH;
      float* ghn_t = ghn + t * BH;
      for (std::size_t b = 0; b < B; ++b) {
        float* a = gt + b * G;  // row of b: [r | z | n], H each; holds W_i· x + b_i· on entry
        const float* g = gh + b * G;
        const float* hp = hprev + b * H;
        float* hn_row = ghn_t + b * H;
        float* h_row = hnext + b * H;
        // One pass over the row; a keeps r, z, n (after their nonlinearities) for the backward.
        for_lanes(H, [&](auto lane, std::size_t j) {
          using V = decltype(lane);
          // r, z = σ(W_i· x + b_i· + (W_h· h_{t-1} + b_h·))
          const V r = vsigmoid(vload<V>(a + j) + (vload<V>(g + j) + vload<V>(bhh + j)));
          const V z = vsigmoid(vload<V>(a + H + j) + (vload<V>(g + H + j) + vload<V>(bhh + H + j)));
          const V hn = vload<V>(g + 2 * H + j) + vload<V>(bhh + 2 * H + j);  // W_hn h_{t-1} + b_hn
          const V n = vtanh(vload<V>(a + 2 * H + j) + r * hn);  // tanh(W_in x + b_in + r ⊙ hn)
          vstore(a + j, r);
          vstore(a + H + j, z);
          vstore(a + 2 * H + j, n);
          vstore(hn_row + j, hn);
          // h_t = (1 - z) ⊙ n + z ⊙ h_{t-1}  (this form gives h_t = h_{t-1} exactly when z = 1)
          vstore(h_row + j, (V(1.0f) - z) * n + z * vload<V>(hp + j));
        });
      }
    }
    std::memcpy(final_.data() + k * BH, hs + T * BH, BH * sizeof(float));
  }
}

const Tensor3& GRU::final_state() const {
  require_forward("final_state");
  return final_;
}

Tensor3 GRU::backward(const Tensor3& dy, const Tensor3* dh_n) {
  begin_backward(dy, {{"dh_n", dh_n}});
  backward_steps(dh_n);
  return finish_backward();
}

void GRU::backward_steps(const Tensor3* dh_n) {
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
    float* db_i = reset_bias_grad_sums();  // the step's Σ_b of dgi [G]; db_h = Σ_b dgh [G] after it
    float* db_h = db_i + G;

    for (std::size_t t = T; t-- > 0;) {
      const float* dht = dh + t * BH;  // total dL/dh_t (complete now: step t+1 has added its part)
      // dL/dh_{t-1}: the direct path z ⊙ dh_t here, the path through W_hh by the GEMM below.
      float* dprev = t > 0 ? dh + (t - 1) * BH : dh0;
      const bool first_part = t == 0;  // dh0 holds nothing yet: the direct path is stored, not added
      const float* hprev = hs + t * BH;
      const float* gt = gates + t * BG;
      const float* ghn_t = ghn + t * BH;
      float* dgit = dgi + t * BG;
      float* dght = dgh + t * BG;
      double sq = 0.0;  // ‖dL/dh_t‖², summed on the way
      for (std::size_t b = 0; b < B; ++b) {
        const float* r = gt + b * G;
        const float* z = r + H;
        const float* n = r + 2 * H;
        float* di = dgit + b * G;   // dL/d(W_i· x + b_i·), rows r, z, n
        float* dhh = dght + b * G;  // dL/d(W_h· h + b_h·), rows r, z, n
        const std::size_t o = b * H;
        sq += sum_squares_over_lanes(H, [&](auto lane, std::size_t j) {
          using V = decltype(lane);
          const V r_ = vload<V>(r + j), z_ = vload<V>(z + j), n_ = vload<V>(n + j);
          const V hp = vload<V>(hprev + o + j), dhj = vload<V>(dht + o + j);
          const V one(1.0f);
          // h = (1 - z) ⊙ n + z ⊙ h_prev
          const V dn = dhj * (one - z_);
          const V dz = dhj * (hp - n_);
          // n = tanh(a_n), a_n = gi_n + r ⊙ ghn
          const V dan = dn * (one - n_ * n_);
          const V dr = dan * vload<V>(ghn_t + o + j);
          // r = σ(gi_r + gh_r), z = σ(gi_z + gh_z): σ' = σ(1 - σ)
          const V dar = dr * r_ * (one - r_);
          const V daz = dz * z_ * (one - z_);
          vstore(di + j, dar);
          vstore(di + H + j, daz);
          vstore(di + 2 * H + j, dan);
          vstore(dhh + j, dar);
          vstore(dhh + H + j, daz);
          vstore(dhh + 2 * H + j, dan * r_);
          vstore(db_i + j, vload<V>(db_i + j) + dar);
          vstore(db_i + H + j, vload<V>(db_i + H + j) + daz);
          vstore(db_i + 2 * H + j, vload<V>(db_i + 2 * H + j) + dan);
          vstore(db_h + 2 * H + j, vload<V>(db_h + 2 * H + j) + dan * r_);
          const V direct = dhj * z_;
          vstore(dprev + o + j, first_part ? direct : vload<V>(dprev + o + j) + direct);
          return dhj;  // its square is summed in double
        });
      }
      record_grad_norm(kk, t, sq);
      std::memcpy(db_h, db_i, 2 * H * sizeof(float));  // dgh and dgi agree on the r and z rows
      fold_bias_grad_sums();
      // dL/dh_{t-1} += dgh_t W_hh   ([B, 3H] x [3H, H]); for t = 0 this completes dL/dh0.
      gemm(false, false, B, H, G, 1.0f, dght, G, Whh, H, 1.0f, dprev, H);
    }

    // Parameter gradients (dgi for W_ih x + b_ih, dgh for W_hh h + b_hh) and the input gradient
    // (layer kk-1's output gradient, or dL/dx).
    backward_affine(kk, dgi, dgh);
  }
}

const Tensor3& GRU::initial_state_grad() const {
  require_backward("initial_state_grad");
  return dh0_;
}

}  // namespace seqlab

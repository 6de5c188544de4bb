#include "seqlab/nn/lstm.hpp"

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

LSTM::LSTM(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng)
    : RecurrentBase("LSTM", input_size, hidden_size, num_layers, 4, rng), cache_(num_layers) {}

Tensor3 LSTM::forward(const Tensor3& x, const LSTMState* state0) {
  const Tensor3* h0 = state0 ? &state0->h : nullptr;
  const Tensor3* c0 = state0 ? &state0->c : nullptr;
  begin_forward(x, {{"state0.h", h0}, {"state0.c", c0}});
  forward_steps(h0, c0);
  return finish_forward();
}

void LSTM::forward_steps(const Tensor3* h0, const Tensor3* c0) {
  const std::size_t B = B_, T = T_, H = hidden_size_;
  const std::size_t G = 4 * H, BH = B * H, BG = B * G;
  final_.h.resize({num_layers_, B, H});
  final_.c.resize({num_layers_, B, H});

  for (std::size_t k = 0; k < num_layers_; ++k) {
    LayerCache& c = cache_[k];
    c.cs.resize({T + 1, B, H});
    c.gates.resize({T, B, G});
    c.tanh_c.resize({T, B, H});
    float* hs = hs_[k].data();
    float* cs = c.cs.data();
    float* gates = c.gates.data();
    float* tanh_c = c.tanh_c.data();
    load_layer_state(h0, k, hs);
    load_layer_state(c0, k, cs);

    // Input projections of all steps in one GEMM, on top of both biases:
    // gates[t, b, :] = b_ih + b_hh + x_t[b] W_ihᵀ.
    project_inputs(k, gates, true);

    const float* WhhT = weight_hh_transposed(k);  // [H, 4H]
    for (std::size_t t = 0; t < T; ++t) {
      float* gt = gates + t * BG;
      // gates_t += h_{t-1} W_hhᵀ   ([B, H] x [H, 4H])
      gemm(false, false, B, G, H, 1.0f, hs + t * BH, H, WhhT, G, 1.0f, gt, G);
      const float* cprev = cs + t * BH;
      float* cnext = cs + (t + 1) * BH;
      float* hnext = hs + (t + 1) * BH;
      float* tc = tanh_c + t * BH;
      for (std::size_t b = 0; b < B; ++b) {
        float* gr = gt + b * G;  // row of b: [i | f | g | o], H each; keeps the activated gates
        const std::size_t o = b * H;
        for_lanes(H, [&](auto lane, std::size_t j) {
          using V = decltype(lane);
          const V i = vsigmoid(vload<V>(gr + j));
          const V f = vsigmoid(vload<V>(gr + H + j));
          const V g = vtanh(vload<V>(gr + 2 * H + j));
          const V og = vsigmoid(vload<V>(gr + 3 * H + j));
          vstore(gr + j, i);
          vstore(gr + H + j, f);
          vstore(gr + 2 * H + j, g);
          vstore(gr + 3 * H + j, og);
          const V cn = f * vload<V>(cprev + o + j) + i * g;  // c_t = f ⊙ c_{t-1} + i ⊙ g
          const V th = vtanh(cn);
          vstore(cnext + o + j, cn);
          vstore(tc + o + j, th);
          vstore(hnext + o + j, og * th);  // h_t = o ⊙ tanh(c_t)
        });
      }
    }
    std::memcpy(final_.h.data() + k * BH, hs + T * BH, BH * sizeof(float));
    std::memcpy(final_.c.data() + k * BH, cs + T * BH, BH * sizeof(float));
  }
}

const LSTMState& LSTM::final_state() const {
  require_forward("final_state");
  return final_;
}

Tensor3 LSTM::backward(const Tensor3& dy, const LSTMState* dfinal) {
  const Tensor3* dh_n = dfinal ? &dfinal->h : nullptr;
  const Tensor3* dc_n = dfinal ? &dfinal->c : nullptr;
  begin_backward(dy, {{"dfinal.h", dh_n}, {"dfinal.c", dc_n}});
  backward_steps(dh_n, dc_n);
  return finish_backward();
}

void LSTM::backward_steps(const Tensor3* dh_n, const Tensor3* dc_n) {
  const std::size_t B = B_, T = T_, H = hidden_size_, L = num_layers_;
  const std::size_t G = 4 * H, BH = B * H, BG = B * G;
  dgates_.resize({T, B, G});
  dc_.resize({B, H});
  dstate0_.h.resize({L, B, H});
  dstate0_.c.resize({L, B, H});

  for (std::size_t kk = L; kk-- > 0;) {
    // dh[t] accumulates the total dL/dh_t of this layer: first its output gradient (dy, or the
    // input gradient of the layer above), then the recurrent part from step t+1.
    float* dh = hidden_grad(kk);
    const LayerCache& c = cache_[kk];
    float* dg = dgates_.data();
    float* dc = dc_.data();
    const float* gates = c.gates.data();
    const float* cs = c.cs.data();
    const float* tanh_c = c.tanh_c.data();
    const float* Whh = layers_[kk].weight_hh.value.data();
    float* dh0 = dstate0_.h.data() + kk * BH;
    add_final_state_grad(kk, dh_n, dh, dh0);
    load_layer_state(dc_n, kk, dc);  // running dL/dc_t, from dL/dc_T
    float* db = reset_bias_grad_sums();  // the step's Σ_b of dgates [G]

    for (std::size_t t = T; t-- > 0;) {
      const float* dht = dh + t * BH;  // total dL/dh_t (complete now: step t+1 has added its part)
      const float* gt = gates + t * BG;
      float* dgt = dg + t * BG;
      const float* cprev = cs + t * BH;
      const float* tc = tanh_c + t * BH;
      double sq = 0.0;  // ‖dL/dh_t‖², summed on the way
      for (std::size_t b = 0; b < B; ++b) {
        const float* gr = gt + b * G;  // i, f, g, o
        float* dr = dgt + b * G;       // their pre-activation gradients
        const std::size_t o = b * H;
        sq += sum_squares_over_lanes(H, [&](auto lane, std::size_t j) {
          using V = decltype(lane);
          const V one(1.0f);
          const V i_ = vload<V>(gr + j), f_ = vload<V>(gr + H + j), g_ = vload<V>(gr + 2 * H + j);
          const V o_ = vload<V>(gr + 3 * H + j), th = vload<V>(tc + o + j), dhj = vload<V>(dht + o + j);
          // h = o ⊙ tanh(c):  dc += dh ⊙ o ⊙ (1 - tanh²c),  do = dh ⊙ tanh c
          const V dcj = vload<V>(dc + o + j) + dhj * o_ * (one - th * th);
          // c = f ⊙ c_prev + i ⊙ g; then through σ' = σ(1-σ) and tanh' = 1 - tanh²
          const V di = dcj * g_ * i_ * (one - i_);
          const V df = dcj * vload<V>(cprev + o + j) * f_ * (one - f_);
          const V dg_ = dcj * i_ * (one - g_ * g_);
          const V dout = dhj * th * o_ * (one - o_);
          vstore(dr + j, di);
          vstore(dr + H + j, df);
          vstore(dr + 2 * H + j, dg_);
          vstore(dr + 3 * H + j, dout);
          vstore(db + j, vload<V>(db + j) + di);
          vstore(db + H + j, vload<V>(db + H + j) + df);
          vstore(db + 2 * H + j, vload<V>(db + 2 * H + j) + dg_);
          vstore(db + 3 * H + j, vload<V>(db + 3 * H + j) + dout);
          vstore(dc + o + j, dcj * f_);  // dL/dc_{t-1} from this step
          return dhj;  // its square is summed in double
        });
      }
      record_grad_norm(kk, t, sq);
      fold_bias_grad_sums();
      // dL/dh_{t-1} += dgates_t W_hh   ([B, 4H] x [4H, H]); for t = 0 this is dL/dh0.
      if (t > 0) gemm(false, false, B, H, G, 1.0f, dgt, G, Whh, H, 1.0f, dh + (t - 1) * BH, H);
      else gemm(false, false, B, H, G, 1.0f, dgt, G, Whh, H, 0.0f, dh0, H);
    }
    std::memcpy(dstate0_.c.data() + kk * BH, dc, BH * sizeof(float));

    // dgates [T·B, 4H] is the gradient of both W_ih x + b_ih and W_hh h + b_hh: parameter
    // gradients and the input gradient (layer kk-1's output gradient, or dL/dx).
    backward_affine(kk, dg, dg);
  }
}

const LSTMState& LSTM::initial_state_grad() const {
  require_backward("initial_state_grad");
  return dstate0_;
}

}  // namespace seqlab

#include "seqlab/nn/rnn.hpp"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "seqlab/core/gemm.hpp"
#include "recurrent_common.hpp"
#include "step_gemm.hpp"

namespace seqlab {

using detail::relu_inplace;
using detail::sum_squares_over_lanes;
using detail::tanh_to;
using detail::vload;
using detail::vpass_if_positive;
using detail::vstore;

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
    : RecurrentBase("RNN", input_size, hidden_size, num_layers, 1, rng), nonlinearity_(nonlinearity) {
  if (nonlinearity != Nonlinearity::tanh && nonlinearity != Nonlinearity::relu)
    throw std::invalid_argument("RNN: nonlinearity must be Nonlinearity::tanh or Nonlinearity::relu");
}

Tensor3 RNN::forward(const Tensor3& x, const Tensor3* h0) {
  begin_forward(x, {{"h0", h0}});
  forward_steps(h0);
  return finish_forward();
}

void RNN::forward_steps(const Tensor3* h0) {
  const std::size_t B = B_, T = T_, H = hidden_size_;
  const std::size_t BH = B * H;
  final_.resize({num_layers_, B, H});

  for (std::size_t k = 0; k < num_layers_; ++k) {
    float* hs = hs_[k].data();
    load_layer_state(h0, k, hs);
    // Pre-activations of all steps, written where h_1..h_T go:
    // hs[t+1, b, :] = b_ih + b_hh + x_t[b] W_ihᵀ   (one GEMM over T·B rows).
    project_inputs(k, hs + BH, true);

    const auto activate = [&](float* p, std::size_t n) {
      if (nonlinearity_ == Nonlinearity::tanh) tanh_to(p, p, n);
      else relu_inplace(p, n);
    };
    if (detail::use_transposed_steps(B)) {
      // Transposed steps (step_gemm.hpp), hᵀ and preᵀ [H, w] with zero padding columns, which
      // stay zero (act(0) = 0):
      //   preᵀ = (pre_t)ᵀ;  preᵀ += W_hh h_{t-1}ᵀ;  h_tᵀ = act(preᵀ);  h_t = (h_tᵀ)ᵀ.
      const std::size_t w = detail::head_panel_width(B);
      step_scratch_.assign(2 * H * w, 0.0f);
      float* hT = step_scratch_.data();  // h_{t-1}ᵀ
      float* pT = hT + H * w;            // preᵀ, then h_tᵀ
      detail::transpose_to(hs, H, B, H, hT, w);
      const float* Whh = layers_[k].weight_hh.value.data();  // [H, H]
      for (std::size_t t = 0; t < T; ++t) {
        float* ht = hs + (t + 1) * BH;
        detail::transpose_to(ht, H, B, H, pT, w);
        detail::step_product(false, H, H, w, Whh, hT, 1.0f, pT);
        activate(pT, H * w);
        detail::transpose_to(pT, w, H, B, ht, H);
        std::swap(hT, pT);
      }
    } else {
      const float* WhhT = weight_hh_transposed(k);  // [H, H]
      for (std::size_t t = 0; t < T; ++t) {
        float* ht = hs + (t + 1) * BH;
        // pre_t += h_{t-1} W_hhᵀ   ([B, H] x [H, H]), then h_t = act(pre_t) in place.
        gemm(false, false, B, H, H, 1.0f, hs + t * BH, H, WhhT, H, 1.0f, ht, H);
        activate(ht, BH);
      }
    }
    std::memcpy(final_.data() + k * BH, hs + T * BH, BH * sizeof(float));
  }
}

const Tensor3& RNN::final_state() const {
  require_forward("final_state");
  return final_;
}

Tensor3 RNN::backward(const Tensor3& dy, const Tensor3* dh_n) {
  begin_backward(dy, {{"dh_n", dh_n}});
  backward_steps(dh_n);
  return finish_backward();
}

void RNN::backward_steps(const Tensor3* dh_n) {
  const std::size_t B = B_, T = T_, H = hidden_size_, L = num_layers_;
  const std::size_t BH = B * H;
  dh0_.resize({L, B, H});
  const bool is_tanh = nonlinearity_ == Nonlinearity::tanh;
  // Transposed steps (step_gemm.hpp): dpre_tᵀ and W_hhᵀ dpre_tᵀ, each [H, w].
  const bool transposed = detail::use_transposed_steps(B);
  const std::size_t w = transposed ? detail::head_panel_width(B) : 0;
  if (transposed) step_scratch_.assign(2 * H * w, 0.0f);
  float* dT = step_scratch_.data();
  float* rT = dT + H * w;

  for (std::size_t kk = L; kk-- > 0;) {
    // dh[t] accumulates the total dL/dh_t of this layer: first its output gradient (dy, or the
    // input gradient of the layer above), then the recurrent part from step t+1. Once complete it
    // is turned in place into dL/d(pre-activation) at t.
    float* dh = hidden_grad(kk);
    const float* hs = hs_[kk].data();
    const float* Whh = layers_[kk].weight_hh.value.data();
    float* dh0 = dh0_.data() + kk * BH;
    add_final_state_grad(kk, dh_n, dh, dh0);
    float* db = reset_bias_grad_sums();  // the step's Σ_b of dpre [H]

    for (std::size_t t = T; t-- > 0;) {
      float* dht = dh + t * BH;  // total dL/dh_t (complete now: step t+1 has added its part)
      // h_t = act(pre_t): dpre_t = dh_t ⊙ act'(pre_t), act' from h_t (tanh' = 1 - h², relu' = [h > 0]);
      // ‖dL/dh_t‖² is summed on the way (in double).
      const float* ht = hs + (t + 1) * BH;
      double sq = 0.0;
      // dpre = dh ⊙ act'; the step's Σ_b dpre into db, Σ dh² (in double) returned.
      auto step_row = [&](float* d, const float* h, auto derivative) {
        return sum_squares_over_lanes(H, [&](auto lane, std::size_t j) {
          using V = decltype(lane);
          const V dhj = vload<V>(d + j);
          const V dpre = derivative(vload<V>(h + j), dhj);
          vstore(d + j, dpre);
          vstore(db + j, vload<V>(db + j) + dpre);
          return dhj;  // its square is summed in double
        });
      };
      for (std::size_t b = 0; b < B; ++b) {
        if (is_tanh)
          sq += step_row(dht + b * H, ht + b * H, [](auto h, auto d) { return d * (decltype(h)(1.0f) - h * h); });
        else
          sq += step_row(dht + b * H, ht + b * H, [](auto h, auto d) { return vpass_if_positive(h, d); });
      }
      record_grad_norm(kk, t, sq);
      fold_bias_grad_sums();
      // dL/dh_{t-1} += dpre_t W_hh   ([B, H] x [H, H]); for t = 0 this is dL/dh0.
      if (transposed) {
        // (dpre_t W_hh)ᵀ = W_hhᵀ dpre_tᵀ, with dpre_tᵀ [H, w] (zero padding columns)
        detail::transpose_to(dht, H, B, H, dT, w);
        detail::step_product(true, H, H, w, Whh, dT, 0.0f, rT);
        if (t > 0) detail::add_transposed(rT, w, H, B, dh + (t - 1) * BH, H);
        else detail::transpose_to(rT, w, H, B, dh0, H);
      } else if (t > 0) {
        gemm(false, false, B, H, H, 1.0f, dht, H, Whh, H, 1.0f, dh + (t - 1) * BH, H);
      } else {
        gemm(false, false, B, H, H, 1.0f, dht, H, Whh, H, 0.0f, dh0, H);
      }
    }
    // dpre [T·B, H] (now in dh) is the gradient of both W_ih x + b_ih and W_hh h + b_hh:
    // parameter gradients and the input gradient (layer kk-1's output gradient, or dL/dx).
    backward_affine(kk, dh, dh);
  }
}

const Tensor3& RNN::initial_state_grad() const {
  require_backward("initial_state_grad");
  return dh0_;
}

}  // namespace seqlab

#pragma once
// Multi-layer GRU with hand-written forward and backpropagation through time (BPTT).
//
// Legend: B batch, T seq_len, D input_size (of layer 0), H hidden_size, L num_layers,
// in_k = D for layer 0 and H for layers k > 0.
//
// Formulas (Cho et al. 2014, arXiv 1406.1078, eqs. 5-8, in the form of the torch.nn.GRU
// documentation; gates stacked in the order r, z, n along the 3H rows of every weight and bias):
//   r_t = σ(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
//   z_t = σ(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
//   n_t = tanh(W_in x_t + b_in + r_t ⊙ (W_hn h_{t-1} + b_hn))
//   h_t = (1 - z_t) ⊙ n_t + z_t ⊙ h_{t-1}
// The reset gate multiplies (W_hn h + b_hn), after the hidden matmul, as PyTorch and cuDNN do;
// Cho et al.'s eq. 8 applies it before (W_hn (r ⊙ h)), which gives different numbers.
// Layer k > 0 takes layer k-1's output sequence h_1..h_T as its input (no dropout between layers).
//
// Implementation as seqlab::LSTM (lstm.hpp): batch-first API, time-major caches [T, B, ·]; per
// layer one GEMM [T·B, in_k] × W_ihᵀ (+ b_ih) for the input projections of all steps, then one GEMM
// h_{t-1} [B, H] × W_hhᵀ per step into a [B, 3H] scratch (+ b_hh, added element-wise: b_hn must
// stay inside the reset product). Backward: per step one GEMM dgh_t [B, 3H] × W_hh for dh_{t-1};
// dW_ih, dW_hh and the input gradient are one GEMM each over all T·B rows. Buffers are reused.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/recurrent_base.hpp"

namespace seqlab {

/// torch.nn.GRU(input_size, hidden_size, num_layers, bias=True, batch_first=True, dropout=0,
/// bidirectional=False).
class GRU : public RecurrentBase {
 public:
  /// Every parameter is drawn from U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's default reset_parameters),
  /// in state_dict order. Parameters of layer k, in state_dict order:
  ///   weight_ih_l{k} [3H, in_k], weight_hh_l{k} [3H, H], bias_ih_l{k} [3H], bias_hh_l{k} [3H].
  /// Throws std::invalid_argument if input_size, hidden_size or num_layers is 0.
  GRU(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng);

  /// x [B, T, D] -> out [B, T, H]: the last layer's h_1..h_T.
  /// h0 [L, B, H]; nullptr means zeros (as PyTorch without hx).
  /// Stores the caches for backward and the final state h_n (h_T of every layer).
  /// Throws ShapeError if x is not [B, T, D] with D == input_size() or h0 is not [L, B, H].
  Tensor3 forward(const Tensor3& x, const Tensor3* h0 = nullptr);

  /// h_n [L, B, H] of the last forward. Throws std::logic_error before any forward.
  const Tensor3& final_state() const;

  /// BPTT. dy [B, T, H] = dL/d(out); dh_n [L, B, H] = dL/d(h_n) (nullptr: zeros).
  /// Returns dx [B, T, D] = dL/dx. ADDS dL/dθ into every Parameter::grad. Also stores
  /// initial_state_grad() and hidden_grad_norms(). May be called more than once per forward.
  /// Throws std::logic_error if no forward ran, ShapeError if dy is not [B, T, H] or dh_n is not
  /// [L, B, H] for the B, T of the last forward.
  Tensor3 backward(const Tensor3& dy, const Tensor3* dh_n = nullptr);

  /// dL/dh0 [L, B, H] from the last backward. Throws std::logic_error before one.
  const Tensor3& initial_state_grad() const;

  // Inherited from RecurrentBase (recurrent_base.hpp): input_size(), hidden_size(), num_layers(),
  // weight_ih(k) [3H, in_k] (rows r, z, n), weight_hh(k) [3H, H], bias_ih(k) [3H], bias_hh(k) [3H]
  // (std::out_of_range for k >= L), hidden_grad_norms() [L, T] (‖∂L/∂h_t‖_F per layer and step,
  // after backward), collect_parameters.

 private:
  // forward after begin_forward (states checked; nullptr: zeros), backward after begin_backward
  // (the output gradient in hidden_grad(L-1)); the finish_* calls are the caller's.
  void forward_steps(const Tensor3* h0);
  void backward_steps(const Tensor3* dh_n);
  void run_forward_steps() override { forward_steps(nullptr); }
  void run_backward_steps() override { backward_steps(nullptr); }

  /// Forward caches of one layer, time-major (h_0..h_T are RecurrentBase::hs_).
  struct LayerCache {
    Tensor3 gates;  // [T, B, 3H]: activated r, z, n at step t
    Tensor3 ghn;    // [T, B, H]: W_hn h_{t-1} + b_hn at step t
  };

  std::vector<LayerCache> cache_;  // one per layer
  Tensor2 gh_;                     // [B, 3H] scratch: h_{t-1} W_hhᵀ of the step being run
  Tensor3 final_;                  // [L, B, H]
  Tensor3 dgi_;                    // [T, B, 3H]: dL/d(W_ih x + b_ih) of the layer being run
  Tensor3 dgh_;                    // [T, B, 3H]: dL/d(W_hh h + b_hh) of the layer being run
  Tensor3 dh0_;                    // [L, B, H]
};

}  // namespace seqlab

#pragma once
// Multi-layer LSTM with hand-written forward and backpropagation through time (BPTT).
//
// Legend: B batch, T seq_len, D input_size (of layer 0), H hidden_size, L num_layers,
// in_k = D for layer 0 and H for layers k > 0.
//
// Formulas (Hochreiter & Schmidhuber 1997, in the form of the torch.nn.LSTM documentation,
// gates stacked in the order i, f, g, o along the 4H rows of every weight and bias):
//   i_t = σ(W_ii x_t + b_ii + W_hi h_{t-1} + b_hi)
//   f_t = σ(W_if x_t + b_if + W_hf h_{t-1} + b_hf)
//   g_t = tanh(W_ig x_t + b_ig + W_hg h_{t-1} + b_hg)
//   o_t = σ(W_io x_t + b_io + W_ho h_{t-1} + b_ho)
//   c_t = f_t ⊙ c_{t-1} + i_t ⊙ g_t
//   h_t = o_t ⊙ tanh(c_t)
// Layer k > 0 takes layer k-1's output sequence h_1..h_T as its input (no dropout between layers).
//
// Implementation: the API is batch-first ([B, T, ·]); the caches are time-major ([T, B, ·]) so
// that (a) the input projections of all T steps of a layer are one GEMM [T·B, in_k] × W_ihᵀ, and
// (b) each recurrent step is one GEMM h_{t-1} [B, H] × W_hhᵀ accumulated into the step's gate
// rows. Backward mirrors this: per step one GEMM dgates_t [B, 4H] × W_hh for dh_{t-1}; the weight
// gradients dW_ih, dW_hh and the input gradient are one GEMM each over all T·B rows.
// Buffers are kept between calls and reallocated only when the shape changes; every forward
// overwrites the caches completely, so repeated forwards (gradient checks) do not interfere.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/recurrent_base.hpp"

namespace seqlab {

/// Recurrent state of all layers, as torch.nn.LSTM's (h_n, c_n) tuple: h and c each [L, B, H].
struct LSTMState {
  Tensor3 h;
  Tensor3 c;
};

/// torch.nn.LSTM(input_size, hidden_size, num_layers, bias=True, batch_first=True,
/// dropout=0, bidirectional=False, proj_size=0).
class LSTM : public RecurrentBase {
 public:
  /// Every parameter is drawn from U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's default reset_parameters),
  /// in state_dict order. Parameters of layer k, in state_dict order:
  ///   weight_ih_l{k} [4H, in_k], weight_hh_l{k} [4H, H], bias_ih_l{k} [4H], bias_hh_l{k} [4H].
  /// Throws std::invalid_argument if input_size, hidden_size or num_layers is 0.
  LSTM(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng);

  /// x [B, T, D] -> out [B, T, H]: the last layer's h_1..h_T.
  /// state0: (h0, c0), each [L, B, H]; nullptr means zeros (as PyTorch without hx).
  /// Stores the caches for backward and the final state (h_T, c_T of every layer).
  /// Throws ShapeError if x is not [B, T, D] with D == input_size() or state0 is not [L, B, H].
  Tensor3 forward(const Tensor3& x, const LSTMState* state0 = nullptr);

  /// (h_n, c_n) of the last forward, each [L, B, H]. Throws std::logic_error before any forward.
  const LSTMState& final_state() const;

  /// BPTT. dy [B, T, H] = dL/d(out); dfinal = dL/d(h_n, c_n), each [L, B, H] (nullptr: zeros).
  /// Returns dx [B, T, D] = dL/dx. ADDS dL/dθ into every Parameter::grad. Also stores
  /// initial_state_grad() and hidden_grad_norms(). May be called more than once per forward.
  /// Throws std::logic_error if no forward ran, ShapeError if dy is not [B, T, H] or dfinal is not
  /// [L, B, H] for the B, T of the last forward.
  Tensor3 backward(const Tensor3& dy, const LSTMState* dfinal = nullptr);

  /// dL/d(h0, c0), each [L, B, H], from the last backward. Throws std::logic_error before one.
  const LSTMState& initial_state_grad() const;

  // Inherited from RecurrentBase (recurrent_base.hpp): input_size(), hidden_size(), num_layers(),
  // weight_ih(k) [4H, in_k] (rows i, f, g, o), weight_hh(k) [4H, H], bias_ih(k) [4H], bias_hh(k) [4H]
  // (std::out_of_range for k >= L), hidden_grad_norms() [L, T] (‖∂L/∂h_t‖_F per layer and step,
  // ∂L/∂h_T including dfinal's h, after backward; used to show vanishing gradients),
  // collect_parameters.

 private:
  // forward after begin_forward (states checked; nullptr: zeros), backward after begin_backward
  // (the output gradient in hidden_grad(L-1)); the finish_* calls are the caller's.
  void forward_steps(const Tensor3* h0, const Tensor3* c0);
  void backward_steps(const Tensor3* dh_n, const Tensor3* dc_n);
  void run_forward_steps() override { forward_steps(nullptr, nullptr); }
  void run_backward_steps() override { backward_steps(nullptr, nullptr); }

  /// Forward caches of one layer, time-major (h_0..h_T are RecurrentBase::hs_).
  struct LayerCache {
    Tensor3 cs;     // [T+1, B, H]: cs[0] = c0, cs[t+1] = c_t
    Tensor3 gates;  // [T, B, 4H]: activated gates i, f, g, o at step t
    Tensor3 tanh_c; // [T, B, H]: tanh(c_t)
  };

  std::vector<LayerCache> cache_;  // one per layer
  LSTMState final_;                // each [L, B, H]
  Tensor3 dgates_;                 // [T, B, 4H]: dL/d(pre-activation gates) of the layer being run
  Tensor2 dc_;                     // [B, H]: running dL/dc_t
  LSTMState dstate0_;              // each [L, B, H]
};

}  // namespace seqlab

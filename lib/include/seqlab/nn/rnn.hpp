#pragma once
// Multi-layer Elman RNN with hand-written forward and backpropagation through time (BPTT).
//
// Legend: B batch, T seq_len, D input_size (of layer 0), H hidden_size, L num_layers,
// in_k = D for layer 0 and H for layers k > 0.
//
// Formula (Elman 1990, "Finding structure in time", in the form of the torch.nn.RNN documentation):
//   h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh),   act = tanh (default) or relu.
// Layer k > 0 takes layer k-1's output sequence h_1..h_T as its input (no dropout between layers).
//
// Implementation as seqlab::LSTM (lstm.hpp): batch-first API, time-major caches [T, B, ·]; per
// layer one GEMM [T·B, in_k] × W_ihᵀ for the input projections of all steps, then one GEMM
// h_{t-1} [B, H] × W_hhᵀ per step, accumulated in place into the step's rows, which are then
// activated in place (so the cache holds only h_0..h_T; act' is taken from the output:
// tanh' = 1 - h², relu' = [h > 0]). Backward: per step one GEMM for dh_{t-1}; dW_ih, dW_hh and the
// input gradient are one GEMM each over all T·B rows. Buffers are reused between calls.
// For a batch of at least half a SIMD tile (B >= 8 with AVX2, 16 with AVX-512) the per-step
// products run transposed, with the batch as the columns (preᵀ += W_hh h_{t-1}ᵀ and
// W_hhᵀ dpre_tᵀ, lib/src/nn/step_gemm.hpp: W_hh read in place, no per-call packing), between two
// [B, H] transposes per step; smaller batches (decoding, B = 1) call OpenBLAS per step.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/recurrent_base.hpp"

namespace seqlab {

/// Activation of seqlab::RNN, as torch.nn.RNN's `nonlinearity` argument.
enum class Nonlinearity { tanh, relu };

/// "tanh" -> Nonlinearity::tanh, "relu" -> Nonlinearity::relu (exact, lower case as PyTorch).
/// Throws std::invalid_argument naming the value and the allowed ones ("tanh", "relu") otherwise.
Nonlinearity parse_nonlinearity(const std::string& name);
/// "tanh" or "relu".
std::string to_string(Nonlinearity nonlinearity);

/// torch.nn.RNN(input_size, hidden_size, num_layers, nonlinearity, bias=True, batch_first=True,
/// dropout=0, bidirectional=False).
class RNN : public RecurrentBase {
 public:
  /// Every parameter is drawn from U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's default reset_parameters),
  /// in state_dict order. Parameters of layer k, in state_dict order:
  ///   weight_ih_l{k} [H, in_k], weight_hh_l{k} [H, H], bias_ih_l{k} [H], bias_hh_l{k} [H].
  /// Throws std::invalid_argument if input_size, hidden_size or num_layers is 0.
  RNN(std::size_t input_size, std::size_t hidden_size, std::size_t num_layers, Rng& rng,
      Nonlinearity nonlinearity = Nonlinearity::tanh);

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
  /// relu' at 0 is taken as 0 (PyTorch's threshold_backward).
  /// Throws std::logic_error if no forward ran, ShapeError if dy is not [B, T, H] or dh_n is not
  /// [L, B, H] for the B, T of the last forward.
  Tensor3 backward(const Tensor3& dy, const Tensor3* dh_n = nullptr);

  /// dL/dh0 [L, B, H] from the last backward. Throws std::logic_error before one.
  const Tensor3& initial_state_grad() const;

  Nonlinearity nonlinearity() const { return nonlinearity_; }

  // Inherited from RecurrentBase (recurrent_base.hpp): input_size(), hidden_size(), num_layers(),
  // weight_ih(k) [H, in_k], weight_hh(k) [H, H], bias_ih(k) [H], bias_hh(k) [H] (std::out_of_range
  // for k >= L), hidden_grad_norms() [L, T] (‖∂L/∂h_t‖_F per layer and step, after backward),
  // collect_parameters.

 private:
  // forward after begin_forward (states checked; nullptr: zeros), backward after begin_backward
  // (the output gradient in hidden_grad(L-1)); the finish_* calls are the caller's.
  void forward_steps(const Tensor3* h0);
  void backward_steps(const Tensor3* dh_n);
  void run_forward_steps() override { forward_steps(nullptr); }
  void run_backward_steps() override { backward_steps(nullptr); }

  Nonlinearity nonlinearity_;
  Tensor3 final_;  // [L, B, H]
  Tensor3 dh0_;    // [L, B, H]
  std::vector<float> step_scratch_;  // two [H, w] blocks of the transposed steps (rnn.cpp)
};

}  // namespace seqlab

#pragma once
// What seqlab::RNN, GRU and LSTM (rnn.hpp, gru.hpp, lstm.hpp) have in common: the per-layer
// parameters and their PyTorch initialisation, the accessors, the batch-first <-> time-major
// bookkeeping around forward and backward, the shape checks, and the batched input projection
// and parameter/input gradients of the two affine maps W_ih x + b_ih and W_hh h + b_hh. The
// per-step recurrences (the hot loops) stay in rnn.cpp, gru.cpp and lstm.cpp.
//
// Legend: B batch, T seq_len, D input_size (of layer 0), H hidden_size, L num_layers,
// in_k = D for layer 0 and H for layers k > 0, G = gates·H rows of every weight and bias
// (gates = 1 for the RNN, 3 for the GRU (r, z, n), 4 for the LSTM (i, f, g, o)).
//
// Caches are time-major ([T, B, ·]): the hidden sequence of layer k is hs_[k] [T+1, B, H] with
// hs[0] = h0 and hs[t+1] = h_t, so layer k+1's input is hs_[k][1..T], one contiguous [T·B, H]
// block, and the input projections of all T steps of a layer are one GEMM.
// Copyable (tests copy layers): every buffer is a value member, no pointer into another.
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

/// Base of the multi-layer recurrent layers (torch.nn.RNNBase's role). Not constructible on its own.
class RecurrentBase : public Module {
 public:
  std::size_t input_size() const { return input_size_; }
  std::size_t hidden_size() const { return hidden_size_; }
  std::size_t num_layers() const { return num_layers_; }

  /// Layer k's parameters (k < num_layers(); throws std::out_of_range naming the class, k and
  /// num_layers otherwise).
  Parameter& weight_ih(std::size_t k);  // [G, in_k], gate blocks of H rows in the layer's order
  Parameter& weight_hh(std::size_t k);  // [G, H]
  Parameter& bias_ih(std::size_t k);    // [G]
  Parameter& bias_hh(std::size_t k);    // [G]

  /// [L, T]: ‖∂L/∂h_t‖_F over the batch ([B, H]) for each layer and step, from the last backward.
  /// ∂L/∂h_t is the total gradient reaching h_t: from the layer's output at t (dy for the last
  /// layer, the next layer's input gradient otherwise) plus the recurrent path from step t+1
  /// (dL/dh_n for t = T-1). Used to show vanishing gradients. Throws std::logic_error before any
  /// backward.
  const Tensor2& hidden_grad_norms() const;

  /// weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} for k = 0..L-1 (state_dict order).
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  /// The layer's forward and backward with the output side time-major, for a consumer that maps
  /// every position alone (a per-position head) and so needs no batch-first copy of the states:
  ///   forward_time_major(x): forward(x) with zero initial states (x [B, T, D], checked as there),
  ///     returning nothing; output_time_major() then points at the last layer's h_1..h_T as
  ///     [T·B, H] rows (row t·B + b), valid until the next forward.
  ///   output_grad_time_major(): the [T·B, H] buffer (rows as above) into which the caller writes
  ///     dL/d(out), every element (it holds scratch of the last backward); it also forgets the
  ///     last backward (hidden_grad_norms and initial_state_grad throw until the next one). Then
  ///     backward_time_major() returns dx [B, T, D] and stores the gradients as backward(dy)
  ///     does, with zero final-state gradients; once per output_grad_time_major call.
  /// The same values as forward(x) and backward(dy) with dy[b, t] = row t·B + b: only the two
  /// [B, T, H] reorders are left out. Each throws std::logic_error "<name>.<what>: no forward has
  /// run" before a forward (output_time_major, output_grad_time_major, backward_time_major), and
  /// backward_time_major "<name>.backward_time_major: call output_grad_time_major and fill it
  /// first" when the buffer was not handed out since the last forward or backward.
  void forward_time_major(const Tensor3& x);
  const float* output_time_major() const;
  float* output_grad_time_major();
  Tensor3 backward_time_major();

 protected:
  /// `name` ("RNN", "GRU", "LSTM") starts every error message. Creates the parameters of every
  /// layer, in state_dict order, each drawn from U(-1/sqrt(H), 1/sqrt(H)) in that order (PyTorch's
  /// RNNBase.reset_parameters / LSTM.reset_parameters). Throws std::invalid_argument
  /// "<name>: <size> is 0; it must be >= 1" if input_size, hidden_size or num_layers is 0.
  RecurrentBase(std::string name, std::size_t input_size, std::size_t hidden_size, std::size_t num_layers,
                std::size_t gates, Rng& rng);

  struct Layer {
    Parameter weight_ih, weight_hh, bias_ih, bias_hh;
  };
  /// An optional [L, B, H] state argument and its name in error messages ("h0", "state0.c", ...).
  struct StateArg {
    const char* name;
    const Tensor3* value;  // nullptr: not given (zeros)
  };

  // --- forward -------------------------------------------------------------------------------
  /// Checks x [B, T, D] and every given state [L, B, H] (ShapeError "<name>.forward <arg> [...]"),
  /// and only then forgets the previous forward and backward, stores B, T, x time-major, and sizes
  /// hs_[k] [T+1, B, H] for every layer.
  void begin_forward(const Tensor3& x, std::initializer_list<StateArg> states);
  /// out [B, T, H] = the last layer's h_1..h_T, batch-first; marks the forward as done.
  Tensor3 finish_forward();
  /// dst [B, H] = layer k's block of s [L, B, H], or zeros when s is nullptr.
  void load_layer_state(const Tensor3* s, std::size_t k, float* dst) const;
  /// dst [T·B, G] (rows t·B + b) = b_ih (+ b_hh if add_bias_hh) + x_t[b] W_ihᵀ for layer k: the input
  /// projections of all steps in one GEMM [T·B, in_k] × [in_k, G].
  void project_inputs(std::size_t k, float* dst, bool add_bias_hh);
  /// Input rows of layer k as a contiguous [T·B, in_k] block (time-major).
  const float* layer_input(std::size_t k) const;
  /// W_hhᵀ of layer k, [H, G] (W_hhᵀ[c, j] = W_hh[j, c]), copied from weight_hh now (valid until
  /// the next call): the forward step's h_{t-1} W_hhᵀ then runs as a product of two untransposed
  /// operands, [B, H] × [H, G]. OpenBLAS 0.3.21's AVX-512 builds (SkylakeX, Cooperlake kernels)
  /// compute such products with M·N·K <= 100³ in a direct small-matrix kernel, without packing
  /// either operand and on one thread; with W_hh transposed on its side (column-major TN in
  /// OpenBLAS's terms) they do so only for M·N <= 1200, which the steps exceed, and take the packed,
  /// possibly threaded, path for every step (kernel/x86_64/sgemm_small_kernel_permit_skylakex.c).
  /// The backward steps' dh_{t-1} += dgates_t W_hh already have the untransposed form.
  const float* weight_hh_transposed(std::size_t k);

  // --- backward ------------------------------------------------------------------------------
  /// Throws std::logic_error "<name>.backward called before forward" if no forward ran; checks
  /// dy [B, T, H] and every given state gradient [L, B, H] for the B, T of the last forward
  /// (ShapeError "<name>.backward <arg> [...]"); then forgets the previous backward, sizes the
  /// buffers and stores dy time-major in hidden_grad(L-1).
  void begin_backward(const Tensor3& dy, std::initializer_list<StateArg> state_grads);
  /// [T, B, H] time-major: on entry to layer k's backward, the gradient reaching its output h_t
  /// (dy for the last layer, the input gradient of layer k+1 otherwise); the layer adds the
  /// recurrent part and may then overwrite it. Layers k and k+1 use different buffers.
  float* hidden_grad(std::size_t k);
  /// Adds layer k's block of dh_n [L, B, H] (nullptr: nothing) into dh's last step t = T-1. For
  /// T = 0 (nothing to step through: the final state is the initial state) writes it, or zeros, to
  /// dh0 [B, H] instead.
  void add_final_state_grad(std::size_t k, const Tensor3* dh_n, float* dh, float* dh0) const;
  /// hidden_grad_norms()(k, t) = sqrt(squared_norm), squared_norm = ‖dL/dh_t‖_F² of layer k, which
  /// the layers sum inside their fused backward loops (each element squared and summed in double).
  void record_grad_norm(std::size_t k, std::size_t t, double squared_norm);
  /// Zeroes and returns the bias-gradient sums [2, G] of one step of the layer about to be stepped
  /// back through: row 0 for Σ over the step's B rows of dgi (below), row 1 for Σ dgh (unused when
  /// dgi and dgh are the same). The layers add to them inside their fused per-step loops, which
  /// saves reading the [T·B, G] blocks again, and call fold_bias_grad_sums() after each step.
  float* reset_bias_grad_sums();
  /// Adds the step's float sums into the layer's double totals and zeroes them for the next step
  /// (float over B rows, double over steps, like Linear's add_column_sums blocks).
  void fold_bias_grad_sums();
  /// The two affine maps of layer k, from dgi = dL/d(W_ih x + b_ih) and dgh = dL/d(W_hh h + b_hh),
  /// each [T·B, G] (rows t·B + b; the same pointer when they are equal, as for the RNN and LSTM):
  ///   dW_ih += Σ_t dgi_tᵀ x_t,  db_ih += Σ_rows dgi   (row 0 of the folded bias-gradient sums),
  ///   dW_hh += Σ_t dgh_tᵀ h_{t-1},  db_hh += Σ_rows dgh   (row 1, or row 0 when dgh is dgi),
  /// one GEMM each over all T·B rows; and the input gradient dX = dgi W_ih [T·B, in_k], written to
  /// hidden_grad(k-1) (the output gradient of layer k-1) or, for k = 0, to dL/dx.
  void backward_affine(std::size_t k, const float* dgi, const float* dgh);
  /// dx [B, T, D] = dL/dx, batch-first; marks the backward as done.
  Tensor3 finish_backward();
  /// Sizes the backward buffers for the B, T of the last forward (hidden_grad among them).
  void size_backward_buffers();
  /// The layer's forward_steps with zero initial states / backward_steps with zero final-state
  /// gradients (the time-major entry points above).
  virtual void run_forward_steps() = 0;
  virtual void run_backward_steps() = 0;

  /// Throws std::logic_error "<name>.<what>: no forward has run" / "...: no backward has run".
  void require_forward(const char* what) const;
  void require_backward(const char* what) const;

  std::size_t input_size_, hidden_size_, num_layers_;
  std::vector<Layer> layers_;  // never resized after construction: NamedParameter pointers stay valid

  // Forward state.
  bool has_forward_ = false;
  std::size_t B_ = 0, T_ = 0;
  std::vector<Tensor3> hs_;  // per layer [T+1, B, H]: hs[0] = h0, hs[t+1] = h_t

 private:
  /// Layer k, checked (std::out_of_range "<name>: layer index k out of range; num_layers is L").
  Layer& layer(std::size_t k);

  std::string name_;       // "RNN", "GRU" or "LSTM"
  std::size_t gate_rows_;  // G = gates·H
  Tensor3 x_tm_;        // [T, B, D] time-major copy of x
  Tensor1 bias_sum_;    // [G] b_ih + b_hh of the layer being projected
  Tensor2 whh_t_;       // [H, G] W_hhᵀ of the layer being stepped through (weight_hh_transposed)
  bool has_backward_ = false;
  bool grad_handed_out_ = false;  // output_grad_time_major ran since the last forward or backward
  Tensor3 dh_a_, dh_b_; // [T, B, H]: hidden_grad(k) for L-1-k even / odd
  Tensor3 dx_tm_;       // [T, B, D]: dL/dx time-major
  Tensor1 dbias_;       // [2G]: one step's bias-gradient sums, rows db_ih, db_hh
  std::vector<double> dbias_total_;  // [2G]: their sums over the steps
  Tensor2 grad_norms_;  // [L, T]
};

}  // namespace seqlab

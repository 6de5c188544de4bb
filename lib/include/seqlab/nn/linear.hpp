#pragma once
// Fully connected layer y = x Wᵀ + b, as torch.nn.Linear
// (https://pytorch.org/docs/1.13/generated/torch.nn.Linear.html).
//
// Legend: N rows (usually B*T), B batch, T seq_len, in = in_features, out = out_features.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

class Linear : public Module {
 public:
  /// Weight [out, in] and bias [out] both drawn from U(-1/sqrt(in), 1/sqrt(in)), weight first,
  /// row-major (PyTorch's nn.Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) gives that bound).
  /// With bias = false the `bias` member has shape [0] and is not listed by collect_parameters.
  /// Throws std::invalid_argument if in_features or out_features is 0.
  Linear(std::size_t in_features, std::size_t out_features, Rng& rng, bool bias = true);

  /// x [N, in] -> y [N, out] = x Wᵀ + b (one GEMM with trans_b). Caches a copy of x.
  /// Throws ShapeError if x is not [*, in] or if `weight`/`bias` were given a wrong shape.
  Tensor2 forward(const Tensor2& x);
  /// dy [N, out] -> dx [N, in] = dy W; adds weight.grad += dyᵀ x and bias.grad += Σ_rows dy.
  /// Throws ShapeError if dy is not [N, out] for the N of the last forward, std::logic_error if
  /// forward has not run.
  Tensor2 backward(const Tensor2& dy);

  /// x [B, T, in] -> y [B, T, out]: the 2-D form on the B*T rows.
  Tensor3 forward(const Tensor3& x);
  /// dy [B, T, out] -> dx [B, T, in]; B*T must equal the rows of the last forward.
  Tensor3 backward(const Tensor3& dy);
  /// As backward(dy), but with bias_grad_added = true it leaves bias.grad alone: the caller has
  /// already added Σ_rows dy to it in a pass of its own over dy (FeedForward fuses it into the
  /// activation gradient). With bias_grad_added = false it is backward(dy). Throws as backward.
  Tensor3 backward(const Tensor3& dy, bool bias_grad_added);

  /// As forward(x) [B, T, in] -> [B, T, out], without the copy of x: the layer keeps a pointer to
  /// x's data for backward, so x must stay alive and unchanged until backward has run. For callers
  /// that own x (FeedForward's activation, MultiheadAttention's concatenated heads); saves a pass
  /// over x. A copy of the layer made after forward_borrowed has no forward cached (its backward
  /// throws std::logic_error until it runs forward itself): it must not read the original's
  /// input. Throws as forward.
  Tensor3 forward_borrowed(const Tensor3& x);

  /// As forward(x) [B, T, in] -> [B, T, out], taking x over as the input cache instead of copying
  /// it (x is left moved-from): for callers whose x is a temporary (the norm outputs of the
  /// Transformer layers); saves a pass over x. x is taken only once every check has passed, so a
  /// ShapeError leaves it intact (only std::bad_alloc later can leave it moved-from). Throws as
  /// forward.
  Tensor3 forward(Tensor3&& x);

  /// forward_borrowed on n rows at x ([n, in], row-major, any order of positions): y [n, out],
  /// x borrowed for backward as there. For a caller that keeps its activations in another layout
  /// than [B, T, in] (a recurrent layer's time-major states). x has no shape to check: throws
  /// only ShapeError from check_parameters.
  Tensor2 forward_borrowed_rows(const float* x, std::size_t n);
  /// backward on raw rows: dy [n, out] at dy, for the n rows of the last forward, writes dx
  /// [n, in] to dx and adds the parameter gradients. Throws std::logic_error before a forward,
  /// ShapeError if n differs from the last forward's rows.
  void backward_rows_into(const float* dy, std::size_t n, float* dx);

  /// Copies parameters and the input cache (copied or taken over); see forward_borrowed for a
  /// borrowed input.
  Linear(const Linear& other);
  Linear& operator=(const Linear& other);
  Linear(Linear&&) = default;
  Linear& operator=(Linear&&) = default;

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  std::size_t in_features() const { return in_; }
  std::size_t out_features() const { return out_; }
  bool has_bias() const { return has_bias_; }

  /// Throws ShapeError naming the parameter if `weight` (value or grad) is not [out, in] or
  /// `bias` not [out] ([0] without bias); forward and backward run it first. Public so that a
  /// module holding Linears can check them all before it takes an input over (forward(Tensor3&&)).
  void check_parameters() const;

  Parameter weight;  // "weight" [out, in]
  Parameter bias;    // "bias" [out] ([0] and unlisted when bias = false)

 private:
  void forward_rows(const float* x, std::size_t n, float* y) const;    // y[n, out]
  Tensor3 forward3(const Tensor3& x, bool borrow);  // forward (copy into x_) / forward_borrowed
  void backward_rows(const float* dy, std::size_t n, float* dx, bool bias_grad_added = false);  // dx[n, in]

  std::size_t in_, out_;
  bool has_bias_;
  Tensor3 x_;  // cache: the last forward's input, copied ([1, N, in] for the 2-D form) or taken over
  const float* borrowed_ = nullptr;  // forward_borrowed's input; nullptr: the input is x_
  const float* input() const { return borrowed_ ? borrowed_ : x_.data(); }
  std::size_t rows_ = 0;        // N of the last forward
  bool cached_ = false;
};

}  // namespace seqlab

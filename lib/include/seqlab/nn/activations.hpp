#pragma once
// Element-wise activations as forward/backward pairs, for Tensor1..Tensor4 (explicitly
// instantiated for ranks 1-4). Outputs have the shape of the input; backward functions take the
// upstream gradient dy (same shape) and return dL/dx. Every backward throws ShapeError if its two
// arguments differ in shape. No caches: the caller keeps x or y as each backward requires.
#include <cstddef>

#include "seqlab/core/tensor.hpp"

namespace seqlab {

/// relu(x) = max(x, 0) (torch.nn.ReLU).
template <std::size_t N>
TensorN<N> relu(const TensorN<N>& x);
/// dx = dy where x > 0, else 0 (PyTorch's threshold_backward: the gradient at x = 0 is 0).
template <std::size_t N>
TensorN<N> relu_backward(const TensorN<N>& x, const TensorN<N>& dy);

/// Exact GELU (torch.nn.GELU(approximate='none'); Hendrycks & Gimpel 2016, arXiv 1606.08415 eq. 1):
/// gelu(x) = x Φ(x) = ½ x erfc(-x/√2) (erfc form: same value as ½x(1 + erf(x/√2)) without the
/// cancellation for x << 0).
template <std::size_t N>
TensorN<N> gelu(const TensorN<N>& x);
/// dx = dy · (Φ(x) + x φ(x)), φ(x) = exp(-x²/2)/√(2π).
template <std::size_t N>
TensorN<N> gelu_backward(const TensorN<N>& x, const TensorN<N>& dy);

/// tanh(x) (torch.tanh); returns a new tensor (the trailing underscore only avoids std::tanh; it is
/// not in place).
template <std::size_t N>
TensorN<N> tanh_(const TensorN<N>& x);
/// From the forward output y = tanh(x): dx = dy (1 - y²).
template <std::size_t N>
TensorN<N> tanh_backward(const TensorN<N>& y, const TensorN<N>& dy);

/// sigmoid(x) = 1 / (1 + exp(-x)) (torch.sigmoid), evaluated as exp(x)/(1+exp(x)) for x < 0 so
/// neither branch overflows.
template <std::size_t N>
TensorN<N> sigmoid(const TensorN<N>& x);
/// From the forward output y = sigmoid(x): dx = dy y (1 - y).
template <std::size_t N>
TensorN<N> sigmoid_backward(const TensorN<N>& y, const TensorN<N>& dy);

#define SEQLAB_DECLARE_ACTIVATIONS(N)                                                   \
  extern template TensorN<N> relu<N>(const TensorN<N>&);                                \
  extern template TensorN<N> relu_backward<N>(const TensorN<N>&, const TensorN<N>&);    \
  extern template TensorN<N> gelu<N>(const TensorN<N>&);                                \
  extern template TensorN<N> gelu_backward<N>(const TensorN<N>&, const TensorN<N>&);    \
  extern template TensorN<N> tanh_<N>(const TensorN<N>&);                               \
  extern template TensorN<N> tanh_backward<N>(const TensorN<N>&, const TensorN<N>&);    \
  extern template TensorN<N> sigmoid<N>(const TensorN<N>&);                             \
  extern template TensorN<N> sigmoid_backward<N>(const TensorN<N>&, const TensorN<N>&);
SEQLAB_DECLARE_ACTIVATIONS(1)
SEQLAB_DECLARE_ACTIVATIONS(2)
SEQLAB_DECLARE_ACTIVATIONS(3)
SEQLAB_DECLARE_ACTIVATIONS(4)
#undef SEQLAB_DECLARE_ACTIVATIONS

}  // namespace seqlab

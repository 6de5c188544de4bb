#include "seqlab/nn/activations.hpp"

#include <cmath>

#include "activation_kernels.hpp"

namespace seqlab {
namespace {

template <std::size_t N>
void check_same(const char* what, const TensorN<N>& a, const TensorN<N>& dy) {
  if (a.shape() != dy.shape())
    throw ShapeError(std::string(what) + ": dy has shape " + shape_string(dy.shape()) +
                     ", expected the forward tensor's shape " + shape_string(a.shape()));
}

// y_i = f(x_i)
template <std::size_t N, class F>
TensorN<N> map1(const TensorN<N>& x, F f) {
  TensorN<N> y(x.shape());
  const float* px = x.data();
  float* py = y.data();
  for (std::size_t i = 0, n = x.size(); i < n; ++i) py[i] = f(px[i]);
  return y;
}

// dx_i = f(a_i, dy_i)
template <std::size_t N, class F>
TensorN<N> map2(const char* what, const TensorN<N>& a, const TensorN<N>& dy, F f) {
  check_same(what, a, dy);
  TensorN<N> dx(a.shape());
  const float* pa = a.data();
  const float* pd = dy.data();
  float* out = dx.data();
  for (std::size_t i = 0, n = a.size(); i < n; ++i) out[i] = f(pa[i], pd[i]);
  return dx;
}

}  // namespace

template <std::size_t N>
TensorN<N> relu(const TensorN<N>& x) {
  return map1(x, [](float v) { return detail::relu1(v); });
}
template <std::size_t N>
TensorN<N> relu_backward(const TensorN<N>& x, const TensorN<N>& dy) {
  return map2("relu_backward", x, dy, [](float v, float d) { return detail::relu_grad1(v, d); });
}

template <std::size_t N>
TensorN<N> gelu(const TensorN<N>& x) {
  // x Φ(x), Φ(x) = ½ erfc(-x/√2)
  return map1(x, [](float v) { return detail::gelu1(v); });
}
template <std::size_t N>
TensorN<N> gelu_backward(const TensorN<N>& x, const TensorN<N>& dy) {
  // d/dx x Φ(x) = Φ(x) + x φ(x)
  return map2("gelu_backward", x, dy, [](float v, float d) { return detail::gelu_grad1(v, d); });
}

template <std::size_t N>
TensorN<N> tanh_(const TensorN<N>& x) {
  return map1(x, [](float v) { return std::tanh(v); });
}
template <std::size_t N>
TensorN<N> tanh_backward(const TensorN<N>& y, const TensorN<N>& dy) {
  return map2("tanh_backward", y, dy, [](float v, float d) { return d * (1.0f - v * v); });
}

template <std::size_t N>
TensorN<N> sigmoid(const TensorN<N>& x) {
  return map1(x, [](float v) {
    if (v >= 0.0f) return 1.0f / (1.0f + std::exp(-v));
    const float e = std::exp(v);
    return e / (1.0f + e);
  });
}
template <std::size_t N>
TensorN<N> sigmoid_backward(const TensorN<N>& y, const TensorN<N>& dy) {
  return map2("sigmoid_backward", y, dy, [](float v, float d) { return d * v * (1.0f - v); });
}

#define SEQLAB_INSTANTIATE_ACTIVATIONS(N)                                        \
  template TensorN<N> relu<N>(const TensorN<N>&);                                \
  template TensorN<N> relu_backward<N>(const TensorN<N>&, const TensorN<N>&);    \
  template TensorN<N> gelu<N>(const TensorN<N>&);                                \
  template TensorN<N> gelu_backward<N>(const TensorN<N>&, const TensorN<N>&);    \
  template TensorN<N> tanh_<N>(const TensorN<N>&);                               \
  template TensorN<N> tanh_backward<N>(const TensorN<N>&, const TensorN<N>&);    \
  template TensorN<N> sigmoid<N>(const TensorN<N>&);                             \
  template TensorN<N> sigmoid_backward<N>(const TensorN<N>&, const TensorN<N>&);
SEQLAB_INSTANTIATE_ACTIVATIONS(1)
SEQLAB_INSTANTIATE_ACTIVATIONS(2)
SEQLAB_INSTANTIATE_ACTIVATIONS(3)
SEQLAB_INSTANTIATE_ACTIVATIONS(4)
#undef SEQLAB_INSTANTIATE_ACTIVATIONS

}  // namespace seqlab

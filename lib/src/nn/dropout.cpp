#include "seqlab/nn/dropout.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "row_kernels.hpp"

namespace seqlab {

Dropout::Dropout(float p, std::uint64_t seed) : p_(p), rng_(seed) {
  if (!(p >= 0.0f && p < 1.0f)) {
    std::ostringstream msg;
    msg << "Dropout: p = " << p << "; must be in [0, 1)";
    throw std::invalid_argument(msg.str());
  }
}

bool Dropout::prepare_forward(const std::vector<std::size_t>& shape, std::size_t n) {
  if (!training() || p_ == 0.0f) {
    shape_ = shape;
    identity_ = true;
    has_forward_ = true;
    return true;
  }
  if (frozen_ && !mask_.empty()) {
    if (shape != mask_shape_)
      throw ShapeError("Dropout.forward: x has shape " + shape_string(shape) +
                       " but the frozen mask has shape " + shape_string(mask_shape_));
  } else {
    // m_i = 1/(1−p) if the i-th draw u_i >= p, else 0.
    const float scale = 1.0f / (1.0f - p_);
    mask_.resize(n);
    for (std::size_t i = 0; i < n; ++i) mask_[i] = rng_.uniform() < p_ ? 0.0f : scale;
    mask_shape_ = shape;
  }
  shape_ = shape;
  identity_ = false;
  has_forward_ = true;
  return false;
}

void Dropout::apply_mask(const float* in, std::size_t n, float* out) const {
  const float* pm = mask_.data();
  parallel_for(n, detail::kElementGrain, [&](std::size_t a, std::size_t b, std::size_t) {
    for (std::size_t i = a; i < b; ++i) out[i] = in[i] * pm[i];
  });
}

template <std::size_t N>
TensorN<N> Dropout::forward(const TensorN<N>& x) {
  const std::vector<std::size_t> shape(x.shape().begin(), x.shape().end());
  TensorN<N> y(x.shape());
  if (prepare_forward(shape, x.size())) {
    detail::copy_floats(x.data(), x.size(), y.data());
  } else {
    apply_mask(x.data(), x.size(), y.data());  // y = x ⊙ m
  }
  return y;
}

template <std::size_t N>
TensorN<N> Dropout::forward(TensorN<N>&& x) {
  const std::vector<std::size_t> shape(x.shape().begin(), x.shape().end());
  if (!prepare_forward(shape, x.size())) apply_mask(x.data(), x.size(), x.data());  // y = x ⊙ m
  return std::move(x);
}

template <std::size_t N>
TensorN<N> Dropout::backward(const TensorN<N>& dy) const {
  if (!has_forward_) throw std::logic_error("Dropout.backward: called before forward");
  const std::vector<std::size_t> shape(dy.shape().begin(), dy.shape().end());
  if (shape != shape_)
    throw ShapeError("Dropout.backward: dy has shape " + shape_string(shape) +
                     ", expected the last forward's shape " + shape_string(shape_));
  TensorN<N> dx(dy.shape());
  if (identity_) {
    detail::copy_floats(dy.data(), dy.size(), dx.data());
    return dx;
  }
  // y = x ⊙ m  ->  dx = dy ⊙ m
  const float* pd = dy.data();
  const float* pm = mask_.data();
  float* out = dx.data();
  parallel_for(dy.size(), detail::kElementGrain, [&](std::size_t a, std::size_t b, std::size_t) {
    for (std::size_t i = a; i < b; ++i) out[i] = pd[i] * pm[i];
  });
  return dx;
}

#define SEQLAB_DEFINE_DROPOUT(N)                                     \
  template TensorN<N> Dropout::forward<N>(const TensorN<N>&);        \
  template TensorN<N> Dropout::forward<N>(TensorN<N>&&);             \
  template TensorN<N> Dropout::backward<N>(const TensorN<N>&) const;
SEQLAB_DEFINE_DROPOUT(1)
SEQLAB_DEFINE_DROPOUT(2)
SEQLAB_DEFINE_DROPOUT(3)
SEQLAB_DEFINE_DROPOUT(4)
#undef SEQLAB_DEFINE_DROPOUT

}  // namespace seqlab

#include "seqlab/nn/linear.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "seqlab/core/gemm.hpp"
#include "narrow_gemm.hpp"
#include "row_kernels.hpp"

namespace seqlab {

Linear::Linear(std::size_t in_features, std::size_t out_features, Rng& rng, bool bias_)
    : weight("weight", {out_features, in_features}),
      bias("bias", {bias_ ? out_features : std::size_t{0}}),
      in_(in_features),
      out_(out_features),
      has_bias_(bias_) {
  if (in_features == 0) throw std::invalid_argument("Linear: in_features = 0; must be >= 1");
  if (out_features == 0) throw std::invalid_argument("Linear: out_features = 0; must be >= 1");
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
  rng.fill_uniform(weight.value, -bound, bound);
  if (has_bias_) rng.fill_uniform(bias.value, -bound, bound);
}

Linear::Linear(const Linear& other)
    : Module(other),
      weight(other.weight),
      bias(other.bias),
      in_(other.in_),
      out_(other.out_),
      has_bias_(other.has_bias_),
      x_(other.x_),
      borrowed_(nullptr),
      rows_(other.rows_),
      cached_(other.cached_ && other.borrowed_ == nullptr) {}

Linear& Linear::operator=(const Linear& other) {
  if (this != &other) *this = Linear(other);  // the copy constructor's rule, then a move
  return *this;
}

void Linear::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + weight.name, &weight});
  if (has_bias_) out.push_back({prefix + bias.name, &bias});
}

void Linear::check_parameters() const {
  const std::vector<std::size_t> ws{out_, in_};
  const std::vector<std::size_t> bs{has_bias_ ? out_ : 0};
  const auto same = [](const auto& shape, const std::vector<std::size_t>& want) {
    return std::equal(shape.begin(), shape.end(), want.begin(), want.end());
  };
  if (!same(weight.value.shape(), ws) || !same(weight.grad.shape(), ws))
    throw ShapeError("Linear.weight: expected shape " + shape_string(ws) + ", got value " +
                     shape_string(weight.value.shape()) + ", grad " + shape_string(weight.grad.shape()));
  if (!same(bias.value.shape(), bs) || !same(bias.grad.shape(), bs))
    throw ShapeError("Linear.bias: expected shape " + shape_string(bs) + ", got value " +
                     shape_string(bias.value.shape()) + ", grad " + shape_string(bias.grad.shape()));
}

// y[n, out] = x[n, in] · Wᵀ (+ b broadcast over rows), rows split over the thread budget.
void Linear::forward_rows(const float* x, std::size_t n, float* y) const {
  detail::affine_rows(x, n, in_, weight.value.data(), has_bias_ ? bias.value.data() : nullptr, out_, y);
}

// Reverse of forward_rows, with x the cached input.
void Linear::backward_rows(const float* dy, std::size_t n, float* dx, bool bias_grad_added) {
  if (out_ <= detail::kNarrowWidth) {  // few outputs (a head over few classes): narrow_gemm.hpp
    // dx[n, in] = dy[n, out] · W[out, in], rows over the thread budget (inner dimension out)
    for_gemm_rows(n, in_, out_, [&](std::size_t r0, std::size_t r1) {
      std::vector<float> panel;
      detail::narrow_gemm(false, false, r1 - r0, in_, out_, dy + r0 * out_, out_, weight.value.data(), in_,
                          0.0f, dx + r0 * in_, in_, panel);
    });
    // dW[out, in] += dyᵀ[out, n] · x[n, in] (out rows)
    std::vector<float> panel;
    detail::narrow_gemm(true, false, out_, in_, n, dy, out_, input(), in_, 1.0f, weight.grad.data(), in_, panel);
  } else {
    // y = x Wᵀ  ->  dx[n, in] = dy[n, out] · W[out, in]
    gemm_split_rows(false, false, n, in_, out_, 1.0f, dy, out_, weight.value.data(), in_, 0.0f, dx, in_);
    // y = x Wᵀ  ->  dW[out, in] += dyᵀ[out, n] · x[n, in]
    gemm_split(true, false, out_, in_, n, 1.0f, dy, out_, input(), in_, 1.0f, weight.grad.data(), in_);
  }
  // y = ... + b  ->  db[out] += Σ_rows dy (double partial sums over fixed row blocks, threaded)
  if (has_bias_ && !bias_grad_added) detail::add_column_sums(dy, n, out_, bias.grad.data());
}

Tensor2 Linear::forward(const Tensor2& x) {
  check_shape("Linear.forward: x", x, {-1, static_cast<long>(in_)});
  check_parameters();
  const std::size_t n = x.shape()[0];
  x_.resize({1, n, in_});  // one cache for both forms: [1, N, in] here
  detail::copy_floats(x.data(), n * in_, x_.data());
  borrowed_ = nullptr;
  rows_ = n;
  cached_ = true;
  Tensor2 y({n, out_});
  forward_rows(x_.data(), n, y.data());
  return y;
}

Tensor2 Linear::backward(const Tensor2& dy) {
  if (!cached_) throw std::logic_error("Linear.backward: called before forward");
  const std::size_t n = rows_;
  check_shape("Linear.backward: dy", dy, {static_cast<long>(n), static_cast<long>(out_)});
  check_parameters();
  Tensor2 dx({n, in_});
  backward_rows(dy.data(), n, dx.data());
  return dx;
}

Tensor3 Linear::forward(const Tensor3& x) { return forward3(x, false); }

Tensor3 Linear::forward_borrowed(const Tensor3& x) { return forward3(x, true); }

Tensor3 Linear::forward3(const Tensor3& x, bool borrow) {
  check_shape("Linear.forward: x", x, {-1, -1, static_cast<long>(in_)});
  check_parameters();
  const std::size_t b = x.shape()[0], t = x.shape()[1], n = b * t;
  if (borrow) {
    borrowed_ = x.data();
  } else {
    x_.resize({b, t, in_});
    detail::copy_floats(x.data(), n * in_, x_.data());
    borrowed_ = nullptr;
  }
  rows_ = n;
  cached_ = true;
  Tensor3 y({b, t, out_});
  forward_rows(input(), n, y.data());
  return y;
}

Tensor2 Linear::forward_borrowed_rows(const float* x, std::size_t n) {
  check_parameters();
  borrowed_ = x;
  rows_ = n;
  cached_ = true;
  Tensor2 y({n, out_});
  forward_rows(x, n, y.data());
  return y;
}

void Linear::backward_rows_into(const float* dy, std::size_t n, float* dx) {
  if (!cached_) throw std::logic_error("Linear.backward: called before forward");
  if (n != rows_)
    throw ShapeError("Linear.backward: dy has " + std::to_string(n) + " rows; the last forward had " +
                     std::to_string(rows_));
  check_parameters();
  backward_rows(dy, n, dx);
}

Tensor3 Linear::forward(Tensor3&& x) {
  check_shape("Linear.forward: x", x, {-1, -1, static_cast<long>(in_)});
  check_parameters();
  const std::size_t b = x.shape()[0], t = x.shape()[1], n = b * t;
  x_ = std::move(x);
  borrowed_ = nullptr;
  rows_ = n;
  cached_ = true;
  Tensor3 y({b, t, out_});
  forward_rows(input(), n, y.data());
  return y;
}

Tensor3 Linear::backward(const Tensor3& dy) { return backward(dy, false); }

Tensor3 Linear::backward(const Tensor3& dy, bool bias_grad_added) {
  if (!cached_) throw std::logic_error("Linear.backward: called before forward");
  check_shape("Linear.backward: dy", dy, {-1, -1, static_cast<long>(out_)});
  const std::size_t b = dy.shape()[0], t = dy.shape()[1], n = rows_;
  if (b * t != n)
    throw ShapeError("Linear.backward: dy " + shape_string(dy.shape()) + " has " +
                     std::to_string(b * t) + " rows; the last forward had " + std::to_string(n));
  check_parameters();
  Tensor3 dx({b, t, in_});
  backward_rows(dy.data(), n, dx.data(), bias_grad_added);
  return dx;
}

}  // namespace seqlab

#include "seqlab/nn/feed_forward.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "activation_kernels.hpp"
#include "row_kernels.hpp"

namespace seqlab {

namespace {

// Validates every argument before the Linear members draw from rng; returns d_model.
std::size_t checked_d_model(std::size_t d_model, std::size_t d_ff, const std::string& activation,
                            float dropout) {
  if (d_model == 0) throw std::invalid_argument("FeedForward: d_model = 0; must be >= 1");
  if (d_ff == 0) throw std::invalid_argument("FeedForward: d_ff = 0; must be >= 1");
  if (activation != "relu" && activation != "gelu")
    throw std::invalid_argument("FeedForward: activation = '" + activation + "'; allowed relu, gelu");
  if (!(dropout >= 0.0f && dropout < 1.0f))
    throw std::invalid_argument("FeedForward: dropout = " + std::to_string(dropout) +
                                "; must be in [0, 1)");
  return d_model;
}

}  // namespace

FeedForward::FeedForward(std::size_t d_model, std::size_t d_ff, Rng& rng,
                         const std::string& activation, float dropout_p, std::uint64_t dropout_seed)
    : linear1(checked_d_model(d_model, d_ff, activation, dropout_p), d_ff, rng),
      linear2(d_ff, d_model, rng),
      dropout(dropout_p, dropout_seed),
      d_model_(d_model),
      d_ff_(d_ff),
      activation_(activation),
      gelu_(activation == "gelu") {}

void FeedForward::set_training(bool training) {
  Module::set_training(training);
  dropout.set_training(training);
}

void FeedForward::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  linear1.collect_parameters(prefix + "linear1.", out);
  linear2.collect_parameters(prefix + "linear2.", out);
}

Tensor3 FeedForward::forward(const Tensor3& x) {
  check_shape("FeedForward.forward: x", x, {-1, -1, static_cast<long>(d_model_)});
  cached_ = false;  // until linear2 has run: a forward that throws leaves no half-made cache
  a_ = linear1.forward(x);                                // a = linear1(x)
  return forward_after_linear1(x.shape()[0], x.shape()[1]);
}

Tensor3 FeedForward::forward(Tensor3&& x) {
  check_shape("FeedForward.forward: x", x, {-1, -1, static_cast<long>(d_model_)});
  linear1.check_parameters();  // every check before x is taken: a throw leaves it intact
  linear2.check_parameters();
  cached_ = false;
  const std::size_t b = x.shape()[0], t = x.shape()[1];
  a_ = linear1.forward(std::move(x));                     // a = linear1(x), x taken over
  return forward_after_linear1(b, t);
}

Tensor3 FeedForward::forward_after_linear1(std::size_t b, std::size_t t) {
  // h = act(a): relu in place in a_ (its backward needs only h > 0); gelu into h_, a buffer kept
  // between calls (its backward needs a).
  float* pa = a_.data();
  const std::size_t n = a_.size();
  if (gelu_) {
    h_.resize(a_.shape());
    float* ph = h_.data();
    parallel_for(n, detail::kElementGrain, [&](std::size_t i0, std::size_t i1, std::size_t) {
      for (std::size_t i = i0; i < i1; ++i) ph[i] = detail::gelu1(pa[i]);
    });
  } else {
    parallel_for(n, detail::kElementGrain, [&](std::size_t i0, std::size_t i1, std::size_t) {
      for (std::size_t i = i0; i < i1; ++i) pa[i] = detail::relu1(pa[i]);
    });
  }
  Tensor3& h = gelu_ ? h_ : a_;
  // hd = dropout(h); the identity (eval mode or p = 0) is skipped: no copy of h.
  dropout_active_ = dropout.training() && dropout.p() > 0.0f;
  Tensor3 y = dropout_active_ ? linear2.forward(dropout.forward(h))  // y = linear2(hd)
                              : linear2.forward_borrowed(h);         // y = linear2(h); h is kept
  b_ = b;
  t_ = t;
  cached_ = true;
  return y;
}

Tensor3 FeedForward::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("FeedForward.backward: called before forward");
  check_shape("FeedForward.backward: dy", dy,
              {static_cast<long>(b_), static_cast<long>(t_), static_cast<long>(d_model_)});
  Tensor3 dh = linear2.backward(dy);                      // y = linear2(hd)
  if (dropout_active_) dh = dropout.backward(dh);         // hd = dropout(h)
  float* pd = dh.data();
  const std::size_t n = dh.size();
  if (gelu_) {  // h = gelu(a)  ->  da = dh ⊙ gelu'(a), in place in dh
    const float* pa = a_.data();
    parallel_for(n, detail::kElementGrain, [&](std::size_t i0, std::size_t i1, std::size_t) {
      for (std::size_t i = i0; i < i1; ++i) pd[i] = detail::gelu_grad1(pa[i], pd[i]);
    });
    return linear1.backward(dh);                          // a = linear1(x)
  }
  // h = relu(a)  ->  da = dh ⊙ [a > 0] = dh ⊙ [h > 0], in place in dh. With linear1's bias (its
  // gradient of the right shape), each row's Σ for linear1.bias.grad is taken in the same pass
  // (add_column_sums_after), into a zeroed vector that is added to bias.grad only after linear1's
  // backward has checked and updated everything else (0 + float(s) is exact: the same bits as
  // Linear's own sum over da, and bias.grad untouched if that backward throws).
  const float* ph = a_.data();
  const std::size_t F = d_ff_, rows = n / F;
  const auto relu_grad_row = [&](std::size_t r) {
    float* d = pd + r * F;
    const float* hr = ph + r * F;
    for (std::size_t j = 0; j < F; ++j) d[j] = detail::relu_grad1(hr[j], d[j]);
  };
  if (linear1.has_bias() && linear1.bias.grad.size() == F) {
    std::vector<float> bias_sum(F, 0.0f);
    detail::add_column_sums_after(pd, rows, F, bias_sum.data(), relu_grad_row);
    Tensor3 dx = linear1.backward(dh, /*bias_grad_added=*/true);  // a = linear1(x)
    float* bg = linear1.bias.grad.data();
    for (std::size_t j = 0; j < F; ++j) bg[j] += bias_sum[j];
    return dx;
  }
  parallel_for(rows, detail::row_grain(F), [&](std::size_t r0, std::size_t r1, std::size_t) {
    for (std::size_t r = r0; r < r1; ++r) relu_grad_row(r);
  });
  return linear1.backward(dh);                            // a = linear1(x); throws on a bad bias
}

void FeedForward::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  linear1.collect_buffers(prefix + "linear1.", out);
  linear2.collect_buffers(prefix + "linear2.", out);
  dropout.collect_buffers(prefix + "dropout.", out);
}

}  // namespace seqlab

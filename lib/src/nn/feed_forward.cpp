#include "seqlab/nn/feed_forward.hpp"

#include <cmath>
#include <stdexcept>

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
  a_ = linear1.forward(x);                                // a = linear1(x)
  // h = act(a), into a buffer kept between calls (no [B, T, F] temporary per call).
  h_.resize(a_.shape());
  const float* pa = a_.data();
  float* ph = h_.data();
  const std::size_t n = a_.size();
  parallel_for(n, detail::kElementGrain, [&](std::size_t i0, std::size_t i1, std::size_t) {
    if (gelu_) {
      for (std::size_t i = i0; i < i1; ++i) ph[i] = detail::gelu1(pa[i]);
    } else {
      for (std::size_t i = i0; i < i1; ++i) ph[i] = detail::relu1(pa[i]);
    }
  });
  b_ = x.shape()[0];
  t_ = x.shape()[1];
  cached_ = true;
  // hd = dropout(h); the identity (eval mode or p = 0) is skipped: no copy of h.
  dropout_active_ = dropout.training() && dropout.p() > 0.0f;
  if (!dropout_active_) return linear2.forward_borrowed(h_);  // y = linear2(h); h_ is kept
  return linear2.forward(dropout.forward(h_));            // y = linear2(hd)
}

Tensor3 FeedForward::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("FeedForward.backward: called before forward");
  check_shape("FeedForward.backward: dy", dy,
              {static_cast<long>(b_), static_cast<long>(t_), static_cast<long>(d_model_)});
  Tensor3 dh = linear2.backward(dy);                      // y = linear2(hd)
  if (dropout_active_) dh = dropout.backward(dh);         // hd = dropout(h)
  // h = act(a)  ->  da = dh ⊙ act'(a), in place in dh.
  const float* pa = a_.data();
  float* pd = dh.data();
  const std::size_t n = a_.size();
  parallel_for(n, detail::kElementGrain, [&](std::size_t i0, std::size_t i1, std::size_t) {
    if (gelu_) {
      for (std::size_t i = i0; i < i1; ++i) pd[i] = detail::gelu_grad1(pa[i], pd[i]);
    } else {
      for (std::size_t i = i0; i < i1; ++i) pd[i] = detail::relu_grad1(pa[i], pd[i]);
    }
  });
  return linear1.backward(dh);                            // a = linear1(x)
}

void FeedForward::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  linear1.collect_buffers(prefix + "linear1.", out);
  linear2.collect_buffers(prefix + "linear2.", out);
  dropout.collect_buffers(prefix + "dropout.", out);
}

}  // namespace seqlab

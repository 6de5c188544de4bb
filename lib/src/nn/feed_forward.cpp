#include "seqlab/nn/feed_forward.hpp"

#include <cmath>
#include <stdexcept>

#include "seqlab/nn/activations.hpp"

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
  const Tensor3 h = gelu_ ? gelu(a_) : relu(a_);          // h = act(a)
  const Tensor3 hd = dropout.forward(h);                  // hd = dropout(h)
  b_ = x.shape()[0];
  t_ = x.shape()[1];
  cached_ = true;
  return linear2.forward(hd);                             // y = linear2(hd)
}

Tensor3 FeedForward::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("FeedForward.backward: called before forward");
  check_shape("FeedForward.backward: dy", dy,
              {static_cast<long>(b_), static_cast<long>(t_), static_cast<long>(d_model_)});
  const Tensor3 dhd = linear2.backward(dy);                                // y = linear2(hd)
  const Tensor3 dh = dropout.backward(dhd);                                // hd = dropout(h)
  const Tensor3 da = gelu_ ? gelu_backward(a_, dh) : relu_backward(a_, dh);  // h = act(a)
  return linear1.backward(da);                                             // a = linear1(x)
}

}  // namespace seqlab

#include "seqlab/nn/tcn.hpp"

#include <cmath>
#include <stdexcept>

#include "seqlab/core/threads.hpp"
#include "seqlab/nn/activations.hpp"
#include "activation_kernels.hpp"
#include "row_kernels.hpp"

namespace seqlab {
namespace {

std::optional<Conv1d> make_downsample(std::size_t in, std::size_t out, Rng& rng) {
  if (in == out) return std::nullopt;
  return Conv1d(in, out, 1, rng);
}

}  // namespace

// ---- TemporalBlock ------------------------------------------------------------------------------

TemporalBlock::TemporalBlock(std::size_t in_channels, std::size_t out_channels,
                             std::size_t kernel_size, std::size_t dilation, float dropout, Rng& rng,
                             bool weight_norm)
    : conv1(in_channels, out_channels, kernel_size, rng, dilation),
      conv2(out_channels, out_channels, kernel_size, rng, dilation),
      downsample(make_downsample(in_channels, out_channels, rng)),
      dropout1(dropout, rng.next_u64()),
      dropout2(dropout, rng.next_u64()) {
  // Bai et al.'s init_weights: N(0, 0.01) for the convolution weights (biases keep PyTorch's
  // default). Under weight norm their normal_ on conv1/conv2 has no effect (tcn.hpp), so there the
  // PyTorch default weight is reparametrised instead.
  if (weight_norm) {
    conv1.apply_weight_norm();
    conv2.apply_weight_norm();
  } else {
    rng.fill_normal(conv1.weight.value, 0.0f, 0.01f);
    rng.fill_normal(conv2.weight.value, 0.0f, 0.01f);
  }
  if (downsample) rng.fill_normal(downsample->weight.value, 0.0f, 0.01f);
}

void TemporalBlock::set_training(bool training) {
  Module::set_training(training);
  dropout1.set_training(training);
  dropout2.set_training(training);
}

void TemporalBlock::freeze_dropout_masks(bool frozen) {
  dropout1.freeze_mask(frozen);
  dropout2.freeze_mask(frozen);
}

void TemporalBlock::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  conv1.collect_parameters(prefix + "conv1.", out);
  conv2.collect_parameters(prefix + "conv2.", out);
  if (downsample) downsample->collect_parameters(prefix + "downsample.", out);
}

Tensor3 TemporalBlock::forward(const Tensor3& x) {
  check_shape("TemporalBlock.forward: x", x, {-1, -1, static_cast<long>(conv1.in_channels())});
  a1_ = conv1.forward(x);                                // a1 = conv1(x)
  a2_ = conv2.forward(dropout1.forward(relu(a1_)));      // a2 = conv2(h1), h1 = dropout1(relu(a1))
  Tensor3 y = dropout2.forward(relu(a2_));               // h2 = dropout2(relu(a2)), then y in place
  Tensor3 down;
  if (downsample) down = downsample->forward(x);
  const float* res = downsample ? down.data() : x.data();  // res = downsample(x) or x
  s_.resize(y.shape());
  float* py = y.data();
  float* ps = s_.data();
  parallel_for(y.size(), detail::kElementGrain, [&](std::size_t a, std::size_t b, std::size_t) {
    for (std::size_t i = a; i < b; ++i) {
      const float s = py[i] + res[i];                    // s = h2 + res
      ps[i] = s;
      py[i] = detail::relu1(s);                          // y = relu(s)
    }
  });
  cached_ = true;
  return y;
}

Tensor3 TemporalBlock::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("TemporalBlock.backward: called before forward");
  if (dy.shape() != s_.shape())
    throw ShapeError("TemporalBlock.backward: dy has shape " + shape_string(dy.shape()) +
                     ", expected " + shape_string(s_.shape()));
  const std::size_t n = dy.size();
  // y = relu(s): ds = dy·[s > 0]; with dropout2 the identity, da2 = ds·[a2 > 0] in the same pass
  // (s = relu(a2) + res), else after dropout2's backward.
  Tensor3 ds(dy.shape());
  Tensor3 da2;
  const bool fused = dropout2.last_was_identity();
  if (fused) da2 = Tensor3(dy.shape());
  {
    const float* pdy = dy.data();
    const float* ps = s_.data();
    const float* pa2 = a2_.data();
    float* pds = ds.data();
    float* pda2 = fused ? da2.data() : nullptr;
    parallel_for(n, detail::kElementGrain, [&](std::size_t a, std::size_t b, std::size_t) {
      for (std::size_t i = a; i < b; ++i) {
        const float d = detail::relu_grad1(ps[i], pdy[i]);
        pds[i] = d;
        if (pda2) pda2[i] = detail::relu_grad1(pa2[i], d);
      }
    });
  }
  if (!fused) da2 = relu_backward(a2_, dropout2.backward(ds));
  // a2 = conv2(h1), h1 = dropout1(relu(a1)): da1 = dropout1'(dh1)·[a1 > 0], in place
  Tensor3 da1 = conv2.backward(da2);
  if (!dropout1.last_was_identity()) da1 = dropout1.backward(da1);
  {
    const float* pa1 = a1_.data();
    float* pd = da1.data();
    parallel_for(n, detail::kElementGrain, [&](std::size_t a, std::size_t b, std::size_t) {
      for (std::size_t i = a; i < b; ++i) pd[i] = detail::relu_grad1(pa1[i], pd[i]);
    });
  }
  Tensor3 dx = conv1.backward(da1);                                 // a1 = conv1(x)
  // res = downsample(x) or x
  const Tensor3 dres = downsample ? downsample->backward(ds) : Tensor3();
  detail::add_floats(dx.data(), downsample ? dres.data() : ds.data(), dx.size(), dx.data());
  return dx;
}

// ---- TCN ----------------------------------------------------------------------------------------

TCN::TCN(std::size_t num_inputs, const std::vector<std::size_t>& num_channels,
         std::size_t kernel_size, float dropout, Rng& rng, bool weight_norm)
    : num_inputs_(num_inputs), kernel_size_(kernel_size) {
  if (num_inputs == 0) throw std::invalid_argument("TCN: num_inputs = 0; must be >= 1");
  if (num_channels.empty())
    throw std::invalid_argument("TCN: num_channels is empty; need at least one level");
  if (num_channels.size() > 30)
    throw std::invalid_argument("TCN: num_channels has " + std::to_string(num_channels.size()) +
                                " levels; at most 30 (dilation 2^i)");
  for (std::size_t i = 0; i < num_channels.size(); ++i)
    if (num_channels[i] == 0)
      throw std::invalid_argument("TCN: num_channels[" + std::to_string(i) + "] = 0; must be >= 1");
  if (kernel_size == 0) throw std::invalid_argument("TCN: kernel_size = 0; must be >= 1");
  if (!(dropout >= 0.0f && dropout < 1.0f))
    throw std::invalid_argument("TCN: dropout = " + std::to_string(dropout) + "; must be in [0, 1)");
  blocks_.reserve(num_channels.size());  // parameters are referenced by address: no reallocation
  for (std::size_t i = 0; i < num_channels.size(); ++i) {
    const std::size_t in = i == 0 ? num_inputs : num_channels[i - 1];
    blocks_.emplace_back(in, num_channels[i], kernel_size, std::size_t{1} << i, dropout, rng,
                         weight_norm);
  }
}

std::size_t TCN::receptive_field() const {
  return 1 + 2 * (kernel_size_ - 1) * ((std::size_t{1} << blocks_.size()) - 1);
}

TemporalBlock& TCN::block(std::size_t i) {
  if (i >= blocks_.size())
    throw std::out_of_range("TCN.block: index " + std::to_string(i) + " >= num_levels " +
                            std::to_string(blocks_.size()));
  return blocks_[i];
}

void TCN::set_training(bool training) {
  Module::set_training(training);
  for (auto& b : blocks_) b.set_training(training);
}

void TCN::freeze_dropout_masks(bool frozen) {
  for (auto& b : blocks_) b.freeze_dropout_masks(frozen);
}

void TCN::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    blocks_[i].collect_parameters(prefix + "network." + std::to_string(i) + ".", out);
}

Tensor3 TCN::forward(const Tensor3& x) {
  check_shape("TCN.forward: x", x, {-1, -1, static_cast<long>(num_inputs_)});
  Tensor3 h = blocks_[0].forward(x);
  for (std::size_t i = 1; i < blocks_.size(); ++i) h = blocks_[i].forward(h);
  return h;
}

Tensor3 TCN::backward(const Tensor3& dy) {
  Tensor3 g = blocks_.back().backward(dy);
  for (std::size_t i = blocks_.size() - 1; i-- > 0;) g = blocks_[i].backward(g);
  // ‖∂L/∂x_t‖ over [B, C_in]
  const std::size_t B = g.shape()[0], T = g.shape()[1], C = g.shape()[2];
  grad_norms_ = xt::zeros<float>({T});
  for (std::size_t t = 0; t < T; ++t) {
    double s = 0.0;
    for (std::size_t b = 0; b < B; ++b) {
      const float* row = g.data() + (b * T + t) * C;
      for (std::size_t c = 0; c < C; ++c) s += double(row[c]) * row[c];
    }
    grad_norms_(t) = static_cast<float>(std::sqrt(s));
  }
  has_backward_ = true;
  return g;
}

const Tensor1& TCN::input_grad_norms() const {
  if (!has_backward_) throw std::logic_error("TCN.input_grad_norms: no backward has run");
  return grad_norms_;
}

void TemporalBlock::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  conv1.collect_buffers(prefix + "conv1.", out);
  conv2.collect_buffers(prefix + "conv2.", out);
  if (downsample) downsample->collect_buffers(prefix + "downsample.", out);
  dropout1.collect_buffers(prefix + "dropout1.", out);
  dropout2.collect_buffers(prefix + "dropout2.", out);
}

void TCN::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    blocks_[i].collect_buffers(prefix + "network." + std::to_string(i) + ".", out);
}

}  // namespace seqlab

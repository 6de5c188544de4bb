#include "seqlab/nn/recurrent_base.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "seqlab/core/gemm.hpp"
#include "recurrent_common.hpp"
#include "row_kernels.hpp"

namespace seqlab {

using detail::add_to;
using detail::swap_leading_axes;

RecurrentBase::RecurrentBase(std::string name, std::size_t input_size, std::size_t hidden_size,
                             std::size_t num_layers, std::size_t gates, Rng& rng)
    : input_size_(input_size), hidden_size_(hidden_size), num_layers_(num_layers), name_(std::move(name)),
      gate_rows_(gates * hidden_size) {
  detail::check_recurrent_sizes(name_.c_str(), input_size, hidden_size, num_layers);
  const std::size_t H = hidden_size, G = gate_rows_;
  const float bound = 1.0f / std::sqrt(static_cast<float>(H));
  layers_.reserve(num_layers);  // never resized afterwards: NamedParameter pointers stay valid
  for (std::size_t k = 0; k < num_layers; ++k) {
    const std::string s = "_l" + std::to_string(k);
    const std::size_t in_k = k == 0 ? input_size : H;
    layers_.push_back(Layer{Parameter("weight_ih" + s, {G, in_k}), Parameter("weight_hh" + s, {G, H}),
                            Parameter("bias_ih" + s, {G}), Parameter("bias_hh" + s, {G})});
    Layer& l = layers_.back();
    // PyTorch's RNNBase.reset_parameters: uniform_(-1/sqrt(H), 1/sqrt(H)) over parameters in order.
    for (Parameter* p : {&l.weight_ih, &l.weight_hh, &l.bias_ih, &l.bias_hh})
      rng.fill_uniform(p->value, -bound, bound);
  }
  hs_.resize(num_layers);
}

RecurrentBase::Layer& RecurrentBase::layer(std::size_t k) {
  if (k >= num_layers_)
    throw std::out_of_range(name_ + ": layer index " + std::to_string(k) + " out of range; num_layers is " +
                            std::to_string(num_layers_));
  return layers_[k];
}
Parameter& RecurrentBase::weight_ih(std::size_t k) { return layer(k).weight_ih; }
Parameter& RecurrentBase::weight_hh(std::size_t k) { return layer(k).weight_hh; }
Parameter& RecurrentBase::bias_ih(std::size_t k) { return layer(k).bias_ih; }
Parameter& RecurrentBase::bias_hh(std::size_t k) { return layer(k).bias_hh; }

void RecurrentBase::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  for (auto& l : layers_) {
    for (Parameter* p : {&l.weight_ih, &l.weight_hh, &l.bias_ih, &l.bias_hh})
      out.push_back({prefix + p->name, p});
  }
}

void RecurrentBase::require_forward(const char* what) const {
  if (!has_forward_) throw std::logic_error(name_ + "." + what + ": no forward has run");
}

void RecurrentBase::require_backward(const char* what) const {
  if (!has_backward_) throw std::logic_error(name_ + "." + what + ": no backward has run");
}

const Tensor2& RecurrentBase::hidden_grad_norms() const {
  require_backward("hidden_grad_norms");
  return grad_norms_;
}

// --- forward ---------------------------------------------------------------------------------

void RecurrentBase::begin_forward(const Tensor3& x, std::initializer_list<StateArg> states) {
  check_shape((name_ + ".forward x [B, T, input_size]").c_str(), x, {-1, -1, static_cast<long>(input_size_)});
  const std::size_t B = x.shape()[0], T = x.shape()[1], D = input_size_, H = hidden_size_;
  for (const StateArg& s : states)
    if (s.value)
      check_shape((name_ + ".forward " + s.name + " [L, B, H]").c_str(), *s.value,
                  {static_cast<long>(num_layers_), static_cast<long>(B), static_cast<long>(H)});
  has_forward_ = false;
  has_backward_ = false;
  grad_handed_out_ = false;
  B_ = B;
  T_ = T;
  x_tm_.resize({T, B, D});
  swap_leading_axes(x.data(), x_tm_.data(), B, T, D);
  for (Tensor3& hs : hs_) hs.resize({T + 1, B, H});
}

Tensor3 RecurrentBase::finish_forward() {
  const std::size_t B = B_, T = T_, H = hidden_size_;
  Tensor3 out({B, T, H});
  // out[b, t, :] = hs_{L-1}[t+1, b, :]
  swap_leading_axes(hs_.back().data() + B * H, out.data(), T, B, H);
  has_forward_ = true;
  return out;
}

void RecurrentBase::load_layer_state(const Tensor3* s, std::size_t k, float* dst) const {
  const std::size_t BH = B_ * hidden_size_;
  if (s) std::memcpy(dst, s->data() + k * BH, BH * sizeof(float));
  else std::fill(dst, dst + BH, 0.0f);
}

void RecurrentBase::project_inputs(std::size_t k, float* dst, bool add_bias_hh) {
  const Layer& l = layers_[k];
  const std::size_t N = T_ * B_, G = gate_rows_, in_k = k == 0 ? input_size_ : hidden_size_;
  const float* bias = l.bias_ih.value.data();
  if (add_bias_hh) {
    bias_sum_.resize({G});
    const float* bhh = l.bias_hh.value.data();
    float* bsum = bias_sum_.data();
    for (std::size_t j = 0; j < G; ++j) bsum[j] = bias[j] + bhh[j];
    bias = bsum;
  }
  // dst[N, G] = x W_ihᵀ + bias, all T steps in one GEMM at OpenBLAS's threads. Not affine_rows:
  // its row split measured slower for LSTM fwd+bwd at 2 threads (the per-step GEMMs that follow
  // run at 2 OpenBLAS threads anyway).
  detail::fill_rows(dst, N, bias, G);
  gemm(false, true, N, G, in_k, 1.0f, layer_input(k), in_k, l.weight_ih.value.data(), in_k, 1.0f, dst, G);
}

const float* RecurrentBase::weight_hh_transposed(std::size_t k) {
  const std::size_t G = gate_rows_, H = hidden_size_;
  whh_t_.resize({H, G});
  const float* w = layers_[k].weight_hh.value.data();
  float* wt = whh_t_.data();
  // In 32 x 32 tiles: a row-by-row transpose writes every element to another cache line and,
  // for G >= 1024, another page, which cost more than a whole step at batch 1 (decoding).
  constexpr std::size_t kTile = 32;
  for (std::size_t j0 = 0; j0 < G; j0 += kTile)
    for (std::size_t c0 = 0; c0 < H; c0 += kTile) {
      const std::size_t j1 = std::min(G, j0 + kTile), c1 = std::min(H, c0 + kTile);
      for (std::size_t c = c0; c < c1; ++c)
        for (std::size_t j = j0; j < j1; ++j) wt[c * G + j] = w[j * H + c];
    }
  return wt;
}

const float* RecurrentBase::layer_input(std::size_t k) const {
  if (k == 0) return x_tm_.data();
  return hs_[k - 1].data() + B_ * hidden_size_;  // h_1..h_T of layer k-1
}

// --- backward --------------------------------------------------------------------------------

void RecurrentBase::begin_backward(const Tensor3& dy, std::initializer_list<StateArg> state_grads) {
  if (!has_forward_) throw std::logic_error(name_ + ".backward called before forward");
  const std::size_t B = B_, T = T_, H = hidden_size_, L = num_layers_;
  const long Bs = static_cast<long>(B), Hs = static_cast<long>(H);
  check_shape((name_ + ".backward dy [B, T, H]").c_str(), dy, {Bs, static_cast<long>(T), Hs});
  for (const StateArg& s : state_grads)
    if (s.value)
      check_shape((name_ + ".backward " + s.name + " [L, B, H]").c_str(), *s.value,
                  {static_cast<long>(L), Bs, Hs});
  has_backward_ = false;
  grad_handed_out_ = false;
  size_backward_buffers();
  swap_leading_axes(dy.data(), hidden_grad(L - 1), B, T, H);
}

void RecurrentBase::size_backward_buffers() {
  const std::size_t B = B_, T = T_, D = input_size_, H = hidden_size_;
  dh_a_.resize({T, B, H});
  dh_b_.resize({T, B, H});
  dx_tm_.resize({T, B, D});
  dbias_.resize({2 * gate_rows_});
  grad_norms_.resize({num_layers_, T});
}

void RecurrentBase::forward_time_major(const Tensor3& x) {
  begin_forward(x, {});
  run_forward_steps();
  has_forward_ = true;
}

const float* RecurrentBase::output_time_major() const {
  require_forward("output_time_major");
  return hs_.back().data() + B_ * hidden_size_;
}

float* RecurrentBase::output_grad_time_major() {
  require_forward("output_grad_time_major");
  has_backward_ = false;
  size_backward_buffers();
  grad_handed_out_ = true;
  return hidden_grad(num_layers_ - 1);
}

Tensor3 RecurrentBase::backward_time_major() {
  require_forward("backward_time_major");
  if (!grad_handed_out_)
    throw std::logic_error(name_ + ".backward_time_major: call output_grad_time_major and fill it first");
  grad_handed_out_ = false;  // the buffer is scratch from here on
  run_backward_steps();
  return finish_backward();
}

float* RecurrentBase::hidden_grad(std::size_t k) {
  return ((num_layers_ - 1 - k) % 2 == 0 ? dh_a_ : dh_b_).data();
}

void RecurrentBase::add_final_state_grad(std::size_t k, const Tensor3* dh_n, float* dh, float* dh0) const {
  const std::size_t BH = B_ * hidden_size_;
  if (T_ == 0) load_layer_state(dh_n, k, dh0);
  else if (dh_n) add_to(dh + (T_ - 1) * BH, dh_n->data() + k * BH, BH);
}

void RecurrentBase::record_grad_norm(std::size_t k, std::size_t t, double squared_norm) {
  grad_norms_(k, t) = static_cast<float>(std::sqrt(squared_norm));
}

float* RecurrentBase::reset_bias_grad_sums() {
  std::fill(dbias_.begin(), dbias_.end(), 0.0f);
  dbias_total_.assign(dbias_.size(), 0.0);
  return dbias_.data();
}

void RecurrentBase::fold_bias_grad_sums() {
  float* step = dbias_.data();
  for (std::size_t j = 0; j < dbias_total_.size(); ++j) {
    dbias_total_[j] += step[j];
    step[j] = 0.0f;
  }
}

void RecurrentBase::backward_affine(std::size_t k, const float* dgi, const float* dgh) {
  Layer& l = layers_[k];
  const std::size_t N = T_ * B_, G = gate_rows_, H = hidden_size_, in_k = k == 0 ? input_size_ : H;
  gemm(true, false, G, H, N, 1.0f, dgh, G, hs_[k].data(), H, 1.0f, l.weight_hh.grad.data(), H);
  gemm(true, false, G, in_k, N, 1.0f, dgi, G, layer_input(k), in_k, 1.0f, l.weight_ih.grad.data(), in_k);
  const double* db_ih = dbias_total_.data();
  const double* db_hh = db_ih + (dgi != dgh ? G : 0);
  float* gb_ih = l.bias_ih.grad.data();
  float* gb_hh = l.bias_hh.grad.data();
  for (std::size_t j = 0; j < G; ++j) {
    gb_ih[j] += static_cast<float>(db_ih[j]);
    gb_hh[j] += static_cast<float>(db_hh[j]);
  }

  float* dX = k > 0 ? hidden_grad(k - 1) : dx_tm_.data();
  gemm(false, false, N, in_k, G, 1.0f, dgi, G, l.weight_ih.value.data(), in_k, 0.0f, dX, in_k);
}

Tensor3 RecurrentBase::finish_backward() {
  const std::size_t B = B_, T = T_, D = input_size_;
  Tensor3 dx({B, T, D});
  swap_leading_axes(dx_tm_.data(), dx.data(), T, B, D);
  has_backward_ = true;
  return dx;
}

}  // namespace seqlab

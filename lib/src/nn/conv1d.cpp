#include "seqlab/nn/conv1d.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "seqlab/core/gemm.hpp"

namespace seqlab {
namespace {

std::size_t nonzero(const char* what, std::size_t v) {
  if (v == 0) throw std::invalid_argument(std::string("Conv1d: ") + what + " = 0; must be >= 1");
  return v;
}

template <class S>
bool same_shape(const S& shape, const std::vector<std::size_t>& want) {
  return std::equal(shape.begin(), shape.end(), want.begin(), want.end());
}

}  // namespace

Conv1d::Conv1d(std::size_t in_channels, std::size_t out_channels, std::size_t kernel_size, Rng& rng,
               std::size_t dilation, bool causal, bool bias_)
    : weight("weight", {nonzero("out_channels", out_channels), nonzero("in_channels", in_channels),
                        nonzero("kernel_size", kernel_size)}),
      bias("bias", {bias_ ? out_channels : std::size_t{0}}),
      weight_g("weight_g", {0, 1, 1}),
      weight_v("weight_v", {0, in_channels, kernel_size}),
      in_(in_channels),
      out_(out_channels),
      k_(kernel_size),
      d_(nonzero("dilation", dilation)),
      causal_(causal),
      has_bias_(bias_) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_ * k_));
  rng.fill_uniform(weight.value, -bound, bound);
  if (has_bias_) rng.fill_uniform(bias.value, -bound, bound);
}

void Conv1d::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  if (weight_norm_) {
    if (has_bias_) out.push_back({prefix + bias.name, &bias});
    out.push_back({prefix + weight_g.name, &weight_g});
    out.push_back({prefix + weight_v.name, &weight_v});
  } else {
    out.push_back({prefix + weight.name, &weight});
    if (has_bias_) out.push_back({prefix + bias.name, &bias});
  }
}

void Conv1d::apply_weight_norm() {
  if (weight_norm_) throw std::logic_error("Conv1d.apply_weight_norm: weight norm already applied");
  check_parameters();
  Parameter g("weight_g", {out_, 1, 1});
  Parameter v("weight_v", {out_, in_, k_});
  const std::size_t per = in_ * k_;
  const float* w = weight.value.data();
  for (std::size_t o = 0; o < out_; ++o) {
    double s = 0.0;
    for (std::size_t i = 0; i < per; ++i) s += double(w[o * per + i]) * w[o * per + i];
    if (s == 0.0)
      throw std::logic_error("Conv1d.apply_weight_norm: output channel " + std::to_string(o) +
                             " has an all-zero weight; ‖v‖ = 0 is not allowed");
    g.value.data()[o] = static_cast<float>(std::sqrt(s));
  }
  std::copy_n(w, out_ * per, v.value.data());
  weight_g = std::move(g);
  weight_v = std::move(v);
  weight.zero_grad();
  weight_norm_ = true;
}

void Conv1d::check_parameters() const {
  const std::vector<std::size_t> ws{out_, in_, k_};
  const std::vector<std::size_t> bs{has_bias_ ? out_ : 0};
  auto check = [](const Parameter& p, const std::vector<std::size_t>& want) {
    if (!same_shape(p.value.shape(), want) || !same_shape(p.grad.shape(), want))
      throw ShapeError("Conv1d." + p.name + ": expected shape " + shape_string(want) + ", got value " +
                       shape_string(p.value.shape()) + ", grad " + shape_string(p.grad.shape()));
  };
  if (weight_norm_) {
    check(weight_g, {out_, 1, 1});
    check(weight_v, ws);
    if (!same_shape(weight.value.shape(), ws))  // derived; its grad is unused
      throw ShapeError("Conv1d.weight: expected shape " + shape_string(ws) + ", got " +
                       shape_string(weight.value.shape()));
  } else {
    check(weight, ws);
  }
  check(bias, bs);
}

// weight [out, in, k] (derived as g·v/‖v‖ under weight norm) -> wp_ [out, k·in].
void Conv1d::pack_weight() {
  const std::size_t per = in_ * k_;
  if (weight_norm_) {
    vnorm_.resize({out_});
    const float* v = weight_v.value.data();
    float* w = weight.value.data();
    for (std::size_t o = 0; o < out_; ++o) {
      double s = 0.0;
      for (std::size_t i = 0; i < per; ++i) s += double(v[o * per + i]) * v[o * per + i];
      const double n = std::sqrt(s);
      if (n == 0.0)
        throw std::domain_error("Conv1d.forward: weight_v of output channel " + std::to_string(o) +
                                " is all zero; weight norm divides by ‖v‖");
      vnorm_(o) = static_cast<float>(n);
      const double scale = double(weight_g.value.data()[o]) / n;
      for (std::size_t i = 0; i < per; ++i) w[o * per + i] = static_cast<float>(scale * v[o * per + i]);
    }
  }
  wp_.resize({out_, per});
  const float* w = weight.value.data();
  for (std::size_t o = 0; o < out_; ++o)
    for (std::size_t c = 0; c < in_; ++c)
      for (std::size_t j = 0; j < k_; ++j) wp_(o, j * in_ + c) = w[(o * in_ + c) * k_ + j];
}

// cols[(b, t), j·in + c] = x[b, t + j·d − P, c] (0 outside [0, T)), for the B_, T_ of the forward.
void Conv1d::im2col(const float* x, float* cols) const {
  const std::size_t kin = k_ * in_, P = left_padding();
  for (std::size_t b = 0; b < B_; ++b)
    for (std::size_t t = 0; t < T_; ++t) {
      float* row = cols + (b * T_ + t) * kin;
      for (std::size_t j = 0; j < k_; ++j) {
        const long src = static_cast<long>(t + j * d_) - static_cast<long>(P);
        if (src >= 0 && src < static_cast<long>(T_))
          std::copy_n(x + (b * T_ + static_cast<std::size_t>(src)) * in_, in_, row + j * in_);
        else
          std::fill_n(row + j * in_, in_, 0.0f);
      }
    }
}

Tensor3 Conv1d::forward(const Tensor3& x) {
  check_shape("Conv1d.forward: x", x, {-1, -1, static_cast<long>(in_)});
  check_parameters();
  B_ = x.shape()[0];
  T_ = x.shape()[1];
  const std::size_t n = B_ * T_, kin = k_ * in_;
  pack_weight();

  x_ = x;
  cached_ = true;
  Tensor2 cols;  // k = 1 has P = 0 and cols = x: no copy
  if (k_ > 1) {
    cols.resize({n, kin});
    im2col(x_.data(), cols.data());
  }
  const float* pc = k_ > 1 ? cols.data() : x_.data();

  // y[n, out] = cols · W̃ᵀ (+ bias broadcast over rows)
  Tensor3 y({B_, T_, out_});
  float beta = 0.0f;
  if (has_bias_) {
    for (std::size_t i = 0; i < n; ++i) std::copy_n(bias.value.data(), out_, y.data() + i * out_);
    beta = 1.0f;
  }
  gemm(false, true, n, out_, kin, 1.0f, pc, kin, wp_.data(), kin, beta, y.data(), out_);
  return y;
}

Tensor3 Conv1d::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("Conv1d.backward: called before forward");
  check_shape("Conv1d.backward: dy", dy,
              {static_cast<long>(B_), static_cast<long>(T_), static_cast<long>(out_)});
  check_parameters();
  const std::size_t n = B_ * T_, kin = k_ * in_, per = in_ * k_, P = left_padding();
  const float* pdy = dy.data();

  // y = cols W̃ᵀ  ->  dW̃[out, k·in] = dyᵀ · cols (cols rebuilt from the cached x), unpacked to
  // dW [out, in, k].
  Tensor2 dwp({out_, kin});
  {
    Tensor2 cols;
    if (k_ > 1) {
      cols.resize({n, kin});
      im2col(x_.data(), cols.data());
    }
    const float* pc = k_ > 1 ? cols.data() : x_.data();
    gemm(true, false, out_, kin, n, 1.0f, pdy, out_, pc, kin, 0.0f, dwp.data(), kin);
  }
  if (!weight_norm_) {
    float* gw = weight.grad.data();
    for (std::size_t o = 0; o < out_; ++o)
      for (std::size_t c = 0; c < in_; ++c)
        for (std::size_t j = 0; j < k_; ++j) gw[(o * in_ + c) * k_ + j] += dwp(o, j * in_ + c);
  } else {
    // weight = g v/‖v‖  ->  dg = Σ dW·v/‖v‖;  dv = (g/‖v‖)(dW − (Σ dW·v)/‖v‖² · v)
    const float* v = weight_v.value.data();
    float* gv = weight_v.grad.data();
    float* gg = weight_g.grad.data();
    std::vector<double> dw(per);
    for (std::size_t o = 0; o < out_; ++o) {
      double dot = 0.0;
      for (std::size_t c = 0; c < in_; ++c)
        for (std::size_t j = 0; j < k_; ++j) {
          const std::size_t i = c * k_ + j;
          dw[i] = dwp(o, j * in_ + c);
          dot += dw[i] * v[o * per + i];
        }
      const double nrm = vnorm_(o), g = weight_g.value.data()[o];
      gg[o] += static_cast<float>(dot / nrm);
      const double a = g / nrm, c2 = dot / (nrm * nrm);
      for (std::size_t i = 0; i < per; ++i)
        gv[o * per + i] += static_cast<float>(a * (dw[i] - c2 * v[o * per + i]));
    }
  }

  // y = ... + bias  ->  dbias = Σ_rows dy (row-major sweep, double accumulators)
  if (has_bias_) {
    std::vector<double> acc(out_, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t o = 0; o < out_; ++o) acc[o] += pdy[i * out_ + o];
    float* db = bias.grad.data();
    for (std::size_t o = 0; o < out_; ++o) db[o] += static_cast<float>(acc[o]);
  }

  // y = cols W̃ᵀ  ->  dcols[n, k·in] = dy · W̃; col2im: dx[b, t + j·d − P, :] += dcols[(b, t), j]
  Tensor2 dcols({n, kin});
  gemm(false, false, n, kin, out_, 1.0f, pdy, out_, wp_.data(), kin, 0.0f, dcols.data(), kin);
  Tensor3 dx = xt::zeros<float>({B_, T_, in_});
  float* pdx = dx.data();
  const float* pdc = dcols.data();
  // Row-major sweep over dcols; the dx rows written (t − P .. t − P + (k−1)·d) stay in cache.
  for (std::size_t b = 0; b < B_; ++b)
    for (std::size_t t = 0; t < T_; ++t) {
      const float* row = pdc + (b * T_ + t) * kin;
      for (std::size_t j = 0; j < k_; ++j) {
        const long src = static_cast<long>(t + j * d_) - static_cast<long>(P);
        if (src < 0 || src >= static_cast<long>(T_)) continue;
        float* dst = pdx + (b * T_ + static_cast<std::size_t>(src)) * in_;
        const float* g = row + j * in_;
        for (std::size_t c = 0; c < in_; ++c) dst[c] += g[c];
      }
    }
  return dx;
}

}  // namespace seqlab

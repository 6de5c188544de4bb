#include "seqlab/nn/norm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "row_kernels.hpp"

namespace seqlab {

namespace {

std::string num(float v) {
  std::string s = std::to_string(v);
  // std::to_string prints 1e-8 as 0.000000: use %g for small values.
  if (v != 0.0f && std::abs(v) < 1e-3f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
    s = buf;
  }
  return s;
}

void check_d(const char* cls, std::size_t d) {
  if (d == 0) throw std::invalid_argument(std::string(cls) + ": d = 0; must be >= 1");
}

void check_eps(const char* cls, float eps) {
  if (!(eps > 0.0f) || !std::isfinite(eps))
    throw std::invalid_argument(std::string(cls) + ": eps = " + num(eps) +
                                "; must be a finite value > 0");
}

// x must be [B, T, d]; a non-null padding [B, T].
void check_input(const std::string& cls, const Tensor3& x, const PaddingMask* padding,
                 std::size_t d) {
  check_shape((cls + ".forward: x").c_str(), x, {-1, -1, static_cast<long>(d)});
  if (padding)
    check_shape((cls + ".forward: padding").c_str(), *padding,
                {static_cast<long>(x.shape()[0]), static_cast<long>(x.shape()[1])});
}

void check_dy(const std::string& cls, const Tensor3& dy, bool cached, std::size_t b, std::size_t t,
              std::size_t d) {
  if (!cached) throw std::logic_error(cls + ".backward: called before forward");
  check_shape((cls + ".backward: dy").c_str(), dy,
              {static_cast<long>(b), static_cast<long>(t), static_cast<long>(d)});
}

// Parameter value and grad must be [n].
void check_vector_parameter(const std::string& what, const Parameter& p, std::size_t n) {
  const bool ok = p.value.dimension() == 1 && p.value.shape()[0] == n && p.grad.dimension() == 1 &&
                  p.grad.shape()[0] == n;
  if (!ok)
    throw ShapeError(what + ": expected shape [" + std::to_string(n) + "], got value " +
                     shape_string(p.value.shape()) + ", grad " + shape_string(p.grad.shape()));
}

}  // namespace

// ---- LayerNorm ----------------------------------------------------------------------------------

LayerNorm::LayerNorm(std::size_t d, float eps, bool affine)
    : weight("weight", {affine ? d : std::size_t{0}}),
      bias("bias", {affine ? d : std::size_t{0}}),
      d_(d),
      eps_(eps),
      affine_(affine) {
  check_d("LayerNorm", d);
  check_eps("LayerNorm", eps);
  if (affine_) weight.value.fill(1.0f);  // PyTorch: weight 1, bias 0
}

void LayerNorm::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  if (!affine_) return;
  out.push_back({prefix + weight.name, &weight});
  out.push_back({prefix + bias.name, &bias});
}

Tensor3 LayerNorm::forward(const Tensor3& x, const PaddingMask* padding) {
  check_input("LayerNorm", x, padding, d_);
  check_vector_parameter("LayerNorm.weight", weight, affine_ ? d_ : 0);
  check_vector_parameter("LayerNorm.bias", bias, affine_ ? d_ : 0);
  const std::size_t b = x.shape()[0], t = x.shape()[1], n = b * t, d = d_;
  xhat_.resize({n, d});
  rstd_.resize({n});
  Tensor3 y({b, t, d});
  const float* xp = x.data();
  const float* w = weight.value.data();
  const float* be = bias.value.data();
  const bool affine = affine_;
  parallel_for(n, detail::row_grain(d), [&](std::size_t i0, std::size_t i1, std::size_t) {
    for (std::size_t i = i0; i < i1; ++i) {
      const float* xi = xp + i * d;
      // μ = mean(x); σ² = mean((x − μ)²), biased (double lane sums, row_kernels.hpp)
      const double mean = detail::lane_sum(d, [&](std::size_t j) { return static_cast<double>(xi[j]); }) /
                          static_cast<double>(d);
      const double var = detail::lane_sum(d, [&](std::size_t j) {
                           const double c = xi[j] - mean;
                           return c * c;
                         }) / static_cast<double>(d);
      const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps_));
      rstd_(i) = static_cast<float>(rstd);
      float* xh = xhat_.data() + i * d;
      float* yi = y.data() + i * d;
      for (std::size_t j = 0; j < d; ++j)
        xh[j] = static_cast<float>((xi[j] - mean) * rstd);  // x̂ = (x − μ) / sqrt(σ² + eps)
      if (affine) {
        for (std::size_t j = 0; j < d; ++j) yi[j] = w[j] * xh[j] + be[j];  // y = γ x̂ + β
      } else {
        std::copy(xh, xh + d, yi);
      }
    }
  });
  b_ = b;
  t_ = t;
  cached_ = true;
  return y;
}

Tensor3 Norm::backward_add(const Tensor3& dy, const Tensor3& residual) {
  // dx has dy's shape (backward checks dy against the last forward): check before any grad moves.
  check_shape("Norm.backward_add: residual", residual,
              {static_cast<long>(dy.shape()[0]), static_cast<long>(dy.shape()[1]),
               static_cast<long>(dy.shape()[2])});
  Tensor3 dx = backward(dy);
  detail::add_floats(dx.data(), residual.data(), dx.size(), dx.data());
  return dx;
}

Tensor3 LayerNorm::backward(const Tensor3& dy) { return backward_rows(dy, nullptr); }

Tensor3 LayerNorm::backward_add(const Tensor3& dy, const Tensor3& residual) {
  return backward_rows(dy, &residual);
}

Tensor3 LayerNorm::backward_rows(const Tensor3& dy, const Tensor3* res) {
  check_dy("LayerNorm", dy, cached_, b_, t_, d_);
  if (res)
    check_shape("LayerNorm.backward_add: residual", *res,
                {static_cast<long>(b_), static_cast<long>(t_), static_cast<long>(d_)});
  const float* residual = res ? res->data() : nullptr;
  check_vector_parameter("LayerNorm.weight", weight, affine_ ? d_ : 0);
  check_vector_parameter("LayerNorm.bias", bias, affine_ ? d_ : 0);
  const std::size_t n = b_ * t_, d = d_;
  Tensor3 dx({b_, t_, d});
  const float* w = weight.value.data();
  // Rows on the thread budget. dγ and dβ sum over rows: double partials per fixed block of
  // kSumBlockRows rows, added in block order below (the same for every thread budget).
  const std::size_t blocks = (n + detail::kSumBlockRows - 1) / detail::kSumBlockRows;
  std::vector<double> dw(affine_ ? blocks * d : 0, 0.0), db(affine_ ? blocks * d : 0, 0.0);
  const std::size_t block_grain = std::max<std::size_t>(1, detail::row_grain(d) / detail::kSumBlockRows);
  const bool affine = affine_;
  parallel_for(blocks, block_grain, [&](std::size_t k0, std::size_t k1, std::size_t) {
    std::vector<float> g(d);
    for (std::size_t i = k0 * detail::kSumBlockRows; i < std::min(n, k1 * detail::kSumBlockRows); ++i) {
      const float* dyi = dy.data() + i * d;
      const float* xh = xhat_.data() + i * d;
      double* dwk = affine ? dw.data() + (i / detail::kSumBlockRows) * d : nullptr;
      double* dbk = affine ? db.data() + (i / detail::kSumBlockRows) * d : nullptr;
      if (affine) {
        for (std::size_t j = 0; j < d; ++j) {
          g[j] = w[j] * dyi[j];                            // y = γ x̂ + β  ->  dx̂ = γ dy
          dwk[j] += static_cast<double>(dyi[j]) * xh[j];  // dγ += dy x̂
          dbk[j] += dyi[j];                                // dβ += dy
        }
      } else {
        std::copy(dyi, dyi + d, g.begin());
      }
      const double mean_g = detail::lane_sum(d, [&](std::size_t j) { return static_cast<double>(g[j]); }) /
                            static_cast<double>(d);
      const double mean_gx =
          detail::lane_sum(d, [&](std::size_t j) { return static_cast<double>(g[j]) * xh[j]; }) /
          static_cast<double>(d);
      // x̂ = (x − μ) rstd  ->  dx = rstd (dx̂ − mean(dx̂) − x̂ mean(dx̂ x̂))
      const double rstd = rstd_(i);
      float* dxi = dx.data() + i * d;
      if (residual) {  // backward_add: + r, the float sum add_floats would make afterwards
        const float* ri = residual + i * d;
        for (std::size_t j = 0; j < d; ++j)
          dxi[j] = static_cast<float>(rstd * (g[j] - mean_g - xh[j] * mean_gx)) + ri[j];
      } else {
        for (std::size_t j = 0; j < d; ++j)
          dxi[j] = static_cast<float>(rstd * (g[j] - mean_g - xh[j] * mean_gx));
      }
    }
  });
  if (affine_) {
    for (std::size_t j = 0; j < d; ++j) {
      double sw = 0.0, sb = 0.0;
      for (std::size_t k = 0; k < blocks; ++k) {
        sw += dw[k * d + j];
        sb += db[k * d + j];
      }
      weight.grad.data()[j] += static_cast<float>(sw);
      bias.grad.data()[j] += static_cast<float>(sb);
    }
  }
  return dx;
}

// ---- RMSNorm ------------------------------------------------------------------------------------

RMSNorm::RMSNorm(std::size_t d, float eps) : weight("weight", {d}), d_(d), eps_(eps) {
  check_d("RMSNorm", d);
  check_eps("RMSNorm", eps);
  weight.value.fill(1.0f);
}

void RMSNorm::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + weight.name, &weight});
}

Tensor3 RMSNorm::forward(const Tensor3& x, const PaddingMask* padding) {
  check_input("RMSNorm", x, padding, d_);
  check_vector_parameter("RMSNorm.weight", weight, d_);
  const std::size_t b = x.shape()[0], t = x.shape()[1], n = b * t, d = d_;
  xhat_.resize({n, d});
  rinv_.resize({n});
  Tensor3 y({b, t, d});
  const float* w = weight.value.data();
  for (std::size_t i = 0; i < n; ++i) {
    const float* xi = x.data() + i * d;
    const double ms =  // mean(x²) (double lane sums, row_kernels.hpp)
        detail::lane_sum(d, [&](std::size_t j) { return static_cast<double>(xi[j]) * xi[j]; }) /
        static_cast<double>(d);
    const double rinv = 1.0 / std::sqrt(ms + static_cast<double>(eps_));  // 1 / r
    rinv_(i) = static_cast<float>(rinv);
    float* xh = xhat_.data() + i * d;
    float* yi = y.data() + i * d;
    for (std::size_t j = 0; j < d; ++j) {
      xh[j] = static_cast<float>(xi[j] * rinv);  // x̂ = x / r
      yi[j] = w[j] * xh[j];                      // y = x̂ ⊙ g
    }
  }
  b_ = b;
  t_ = t;
  cached_ = true;
  return y;
}

Tensor3 RMSNorm::backward(const Tensor3& dy) {
  check_dy("RMSNorm", dy, cached_, b_, t_, d_);
  check_vector_parameter("RMSNorm.weight", weight, d_);
  const std::size_t n = b_ * t_, d = d_;
  Tensor3 dx({b_, t_, d});
  std::vector<double> dw(d, 0.0);
  std::vector<float> h(d);
  const float* w = weight.value.data();
  for (std::size_t i = 0; i < n; ++i) {
    const float* dyi = dy.data() + i * d;
    const float* xh = xhat_.data() + i * d;
    for (std::size_t j = 0; j < d; ++j) {
      h[j] = w[j] * dyi[j];                          // y = x̂ ⊙ g  ->  dx̂ = g ⊙ dy
      dw[j] += static_cast<double>(dyi[j]) * xh[j];  // dg += dy ⊙ x̂
    }
    const double mean_hx =
        detail::lane_sum(d, [&](std::size_t j) { return static_cast<double>(h[j]) * xh[j]; }) /
        static_cast<double>(d);
    // x̂ = x / r, r = sqrt(mean(x²) + eps)  ->  dx = (dx̂ − x̂ mean(dx̂ ⊙ x̂)) / r
    const double rinv = rinv_(i);
    float* dxi = dx.data() + i * d;
    for (std::size_t j = 0; j < d; ++j) dxi[j] = static_cast<float>(rinv * (h[j] - xh[j] * mean_hx));
  }
  for (std::size_t j = 0; j < d; ++j) weight.grad.data()[j] += static_cast<float>(dw[j]);
  return dx;
}

// ---- BatchNorm ----------------------------------------------------------------------------------

BatchNorm::BatchNorm(std::size_t d, bool masked, float momentum, float eps)
    : weight("weight", {d}),
      bias("bias", {d}),
      running_mean(xt::zeros<float>({d})),
      running_var(xt::ones<float>({d})),
      d_(d),
      masked_(masked),
      momentum_(momentum),
      eps_(eps) {
  check_d("BatchNorm", d);
  check_eps("BatchNorm", eps);
  if (!(momentum >= 0.0f && momentum <= 1.0f))
    throw std::invalid_argument("BatchNorm: momentum = " + num(momentum) + "; must be in [0, 1]");
  weight.value.fill(1.0f);
  last_stats_.mean = Tensor1::from_shape({0});
  last_stats_.var = Tensor1::from_shape({0});
}

void BatchNorm::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + weight.name, &weight});
  out.push_back({prefix + bias.name, &bias});
}

void BatchNorm::check_state() const {
  check_vector_parameter("BatchNorm.weight", weight, d_);
  check_vector_parameter("BatchNorm.bias", bias, d_);
  check_shape("BatchNorm.running_mean", running_mean, {static_cast<long>(d_)});
  check_shape("BatchNorm.running_var", running_var, {static_cast<long>(d_)});
}

Tensor3 BatchNorm::forward(const Tensor3& x, const PaddingMask* padding) {
  const std::string cls = masked_ ? "BatchNorm(masked)" : "BatchNorm";
  check_input(cls, x, padding, d_);
  check_state();
  const std::size_t b = x.shape()[0], t = x.shape()[1], n = b * t, d = d_;
  const bool train = training();
  const float* xp = x.data();

  // Which positions enter the statistics (train) — all, or the non-padded ones when masked.
  std::vector<std::uint8_t> in_stats(n, 1);
  if (masked_ && padding)
    for (std::size_t i = 0; i < n; ++i) in_stats[i] = padding->data()[i] ? 0 : 1;
  std::size_t count = 0;
  for (auto v : in_stats) count += v;

  std::vector<double> mean(d, 0.0), var(d, 0.0);
  Tensor1 rstd = Tensor1::from_shape({d});
  if (train) {
    if (count < 2)
      throw std::invalid_argument(
          cls + ".forward: " + std::to_string(count) +
          (masked_ ? " non-padded position(s) of " + std::to_string(n) : " position(s)") +
          " in the batch; training needs at least 2 per feature for the batch variance (as "
          "torch.nn.BatchNorm1d); use eval mode or a larger batch");
    for (std::size_t i = 0; i < n; ++i) {
      if (!in_stats[i]) continue;
      for (std::size_t j = 0; j < d; ++j) mean[j] += xp[i * d + j];
    }
    for (std::size_t j = 0; j < d; ++j) mean[j] /= static_cast<double>(count);  // μ = mean_S(x)
    for (std::size_t i = 0; i < n; ++i) {
      if (!in_stats[i]) continue;
      for (std::size_t j = 0; j < d; ++j) {
        const double c = xp[i * d + j] - mean[j];
        var[j] += c * c;
      }
    }
    for (std::size_t j = 0; j < d; ++j) var[j] /= static_cast<double>(count);  // σ², biased
  } else {
    for (std::size_t j = 0; j < d; ++j) {
      mean[j] = running_mean(j);
      var[j] = running_var(j);
    }
  }
  for (std::size_t j = 0; j < d; ++j)
    rstd(j) = static_cast<float>(1.0 / std::sqrt(var[j] + static_cast<double>(eps_)));

  // y = γ (x − μ) / sqrt(σ² + eps) + β for every position.
  xhat_.resize({n, d});
  Tensor3 y({b, t, d});
  const float* w = weight.value.data();
  const float* be = bias.value.data();
  for (std::size_t i = 0; i < n; ++i) {
    float* xh = xhat_.data() + i * d;
    float* yi = y.data() + i * d;
    for (std::size_t j = 0; j < d; ++j) {
      xh[j] = static_cast<float>((xp[i * d + j] - mean[j]) * static_cast<double>(rstd(j)));
      yi[j] = w[j] * xh[j] + be[j];
    }
  }

  if (train) {
    // running = (1 − momentum) running + momentum · batch, with the unbiased variance n/(n − 1).
    const double m = momentum_;
    const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
    last_stats_.mean.resize({d});
    last_stats_.var.resize({d});
    for (std::size_t j = 0; j < d; ++j) {
      running_mean(j) = static_cast<float>((1.0 - m) * running_mean(j) + m * mean[j]);
      running_var(j) = static_cast<float>((1.0 - m) * running_var(j) + m * var[j] * unbias);
      last_stats_.mean(j) = static_cast<float>(mean[j]);
      last_stats_.var(j) = static_cast<float>(var[j]);
    }
    last_stats_.count = count;
    ++num_batches_tracked;
  }

  rstd_ = std::move(rstd);
  in_stats_ = std::move(in_stats);
  count_ = count;
  train_forward_ = train;
  b_ = b;
  t_ = t;
  cached_ = true;
  return y;
}

Tensor3 BatchNorm::backward(const Tensor3& dy) {
  check_dy(masked_ ? "BatchNorm(masked)" : "BatchNorm", dy, cached_, b_, t_, d_);
  check_vector_parameter("BatchNorm.weight", weight, d_);
  check_vector_parameter("BatchNorm.bias", bias, d_);
  const std::size_t n = b_ * t_, d = d_;
  const float* w = weight.value.data();
  const float* dyp = dy.data();
  // y = γ x̂ + β  ->  dγ += Σ dy x̂, dβ += Σ dy, g = dx̂ = γ dy; also Σ_all g and Σ_all g x̂.
  std::vector<double> dw(d, 0.0), db(d, 0.0), sum_g(d, 0.0), sum_gx(d, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const float* xh = xhat_.data() + i * d;
    for (std::size_t j = 0; j < d; ++j) {
      const double dyv = dyp[i * d + j];
      dw[j] += dyv * xh[j];
      db[j] += dyv;
    }
  }
  for (std::size_t j = 0; j < d; ++j) {
    sum_g[j] = w[j] * db[j];
    sum_gx[j] = w[j] * dw[j];
  }
  Tensor3 dx({b_, t_, d});
  float* dxp = dx.data();
  for (std::size_t i = 0; i < n; ++i) {
    const float* xh = xhat_.data() + i * d;
    const bool through_stats = train_forward_ && in_stats_[i];
    for (std::size_t j = 0; j < d; ++j) {
      const double g = static_cast<double>(w[j]) * dyp[i * d + j];
      double v = g;
      // x̂ = (x − μ)/sqrt(σ² + eps) with μ, σ² over the n positions of S:
      //   dx_i = (g_i − Σ g / n − x̂_i Σ g x̂ / n) / sqrt(σ² + eps) for i in S.
      if (through_stats)
        v -= (sum_g[j] + xh[j] * sum_gx[j]) / static_cast<double>(count_);
      dxp[i * d + j] = static_cast<float>(v * static_cast<double>(rstd_(j)));
    }
  }
  for (std::size_t j = 0; j < d; ++j) {
    weight.grad.data()[j] += static_cast<float>(dw[j]);
    bias.grad.data()[j] += static_cast<float>(db[j]);
  }
  return dx;
}

// ---- PowerNorm ----------------------------------------------------------------------------------

PowerNorm::PowerNorm(std::size_t d, float alpha, float eps)
    : weight("weight", {d}),
      bias("bias", {d}),
      running_phi(xt::ones<float>({d})),
      ema_gz(xt::zeros<float>({d})),
      d_(d),
      alpha_(alpha),
      eps_(eps) {
  check_d("PowerNorm", d);
  check_eps("PowerNorm", eps);
  if (!(alpha >= 0.0f && alpha <= 1.0f))
    throw std::invalid_argument("PowerNorm: alpha = " + num(alpha) + "; must be in [0, 1]");
  weight.value.fill(1.0f);
  last_phi_ = Tensor1::from_shape({0});
}

void PowerNorm::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + weight.name, &weight});
  out.push_back({prefix + bias.name, &bias});
}

void PowerNorm::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  out.push_back({prefix + "running_phi", &running_phi});
  out.push_back({prefix + "ema_gz", &ema_gz});
}

void PowerNorm::check_state() const {
  check_vector_parameter("PowerNorm.weight", weight, d_);
  check_vector_parameter("PowerNorm.bias", bias, d_);
  check_shape("PowerNorm.running_phi", running_phi, {static_cast<long>(d_)});
  check_shape("PowerNorm.ema_gz", ema_gz, {static_cast<long>(d_)});
}

Tensor3 PowerNorm::forward(const Tensor3& x, const PaddingMask* padding) {
  check_input("PowerNorm", x, padding, d_);
  check_state();
  const std::size_t b = x.shape()[0], t = x.shape()[1], n = b * t, d = d_;
  const bool train = training();
  const float* xp = x.data();
  std::vector<std::uint8_t> in_stats(n, 1);
  if (padding)
    for (std::size_t i = 0; i < n; ++i) in_stats[i] = padding->data()[i] ? 0 : 1;
  std::size_t count = 0;
  for (auto v : in_stats) count += v;
  if (train && count == 0)
    throw std::invalid_argument("PowerNorm.forward: every one of the " + std::to_string(n) +
                                " positions is padded; training needs at least 1 for the batch "
                                "quadratic mean");
  // x̂ = x / sqrt(ψ²_{t−1} + eps): the running value in both modes (updated only after this).
  Tensor1 rstd = Tensor1::from_shape({d});
  for (std::size_t j = 0; j < d; ++j)
    rstd(j) = static_cast<float>(1.0 / std::sqrt(static_cast<double>(running_phi(j)) + eps_));
  xhat_.resize({n, d});
  Tensor3 y({b, t, d});
  const float* w = weight.value.data();
  const float* be = bias.value.data();
  for (std::size_t i = 0; i < n; ++i) {
    float* xh = xhat_.data() + i * d;
    float* yi = y.data() + i * d;
    for (std::size_t j = 0; j < d; ++j) {
      xh[j] = xp[i * d + j] * rstd(j);
      yi[j] = w[j] * xh[j] + be[j];
    }
  }
  if (train) {
    // ψ²_B = mean_S(x²);  ψ²_t = α ψ²_{t−1} + (1 − α) ψ²_B.
    std::vector<double> phi(d, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      if (!in_stats[i]) continue;
      for (std::size_t j = 0; j < d; ++j) phi[j] += static_cast<double>(xp[i * d + j]) * xp[i * d + j];
    }
    last_phi_.resize({d});
    const double a = alpha_;
    for (std::size_t j = 0; j < d; ++j) {
      phi[j] /= static_cast<double>(count);
      last_phi_(j) = static_cast<float>(phi[j]);
      running_phi(j) = static_cast<float>(a * running_phi(j) + (1.0 - a) * phi[j]);
    }
  }
  rstd_ = std::move(rstd);
  in_stats_ = std::move(in_stats);
  count_ = count;
  train_forward_ = train;
  b_ = b;
  t_ = t;
  cached_ = true;
  return y;
}

Tensor3 PowerNorm::backward(const Tensor3& dy) {
  check_dy("PowerNorm", dy, cached_, b_, t_, d_);
  check_state();
  const std::size_t n = b_ * t_, d = d_;
  const float* w = weight.value.data();
  const float* dyp = dy.data();
  const double a = alpha_;
  // ν_{t−1} = (1 − α)·ema_gz (the authors' buffer); zero correction after an eval forward.
  std::vector<double> nu(d, 0.0);
  if (train_forward_)
    for (std::size_t j = 0; j < d; ++j) nu[j] = (1.0 - a) * ema_gz(j);
  std::vector<double> dw(d, 0.0), db(d, 0.0), gamma_s(d, 0.0), lambda_s(d, 0.0);
  Tensor3 dx({b_, t_, d});
  float* dxp = dx.data();
  for (std::size_t i = 0; i < n; ++i) {
    const float* xh = xhat_.data() + i * d;
    const bool through_stats = train_forward_ && in_stats_[i];
    for (std::size_t j = 0; j < d; ++j) {
      const double dyv = dyp[i * d + j];
      dw[j] += dyv * xh[j];  // dγ += dy x̂
      db[j] += dyv;          // dβ += dy
      const double g = static_cast<double>(w[j]) * dyv;  // g = dL/dx̂ = γ dy
      double v = g;
      if (through_stats) {
        gamma_s[j] += static_cast<double>(xh[j]) * xh[j];  // Γ: mean_S(x̂²)
        lambda_s[j] += g * xh[j];                          // Λ: mean_S(g x̂)
        v -= nu[j] * xh[j];                                // g − ν_{t−1} x̂
      }
      dxp[i * d + j] = static_cast<float>(v * static_cast<double>(rstd_(j)));  // / ψ_{t−1}
    }
  }
  if (train_forward_) {
    // ν_t = ν_{t−1}(1 − (1 − α)Γ) + (1 − α)Λ, i.e. ema_gz += Λ − ν_{t−1}Γ.
    const double inv = 1.0 / static_cast<double>(count_);
    for (std::size_t j = 0; j < d; ++j)
      ema_gz(j) = static_cast<float>(ema_gz(j) + lambda_s[j] * inv - nu[j] * gamma_s[j] * inv);
  }
  for (std::size_t j = 0; j < d; ++j) {
    weight.grad.data()[j] += static_cast<float>(dw[j]);
    bias.grad.data()[j] += static_cast<float>(db[j]);
  }
  return dx;
}

// ---- IdentityNorm -------------------------------------------------------------------------------

IdentityNorm::IdentityNorm(std::size_t d) : d_(d) { check_d("IdentityNorm", d); }

Tensor3 IdentityNorm::forward(const Tensor3& x, const PaddingMask* padding) {
  check_input("IdentityNorm", x, padding, d_);
  b_ = x.shape()[0];
  t_ = x.shape()[1];
  cached_ = true;
  return x;
}

Tensor3 IdentityNorm::backward(const Tensor3& dy) {
  check_dy("IdentityNorm", dy, cached_, b_, t_, d_);
  return dy;
}

// ---- factory ------------------------------------------------------------------------------------

std::unique_ptr<Norm> make_norm(const std::string& name, std::size_t d) {
  // By name from the registry (built-ins in lib/src/nn/norm_registry.cpp).
  return norm_registry().get(name).create(d);
}

void BatchNorm::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  out.push_back({prefix + "running_mean", &running_mean});
  out.push_back({prefix + "running_var", &running_var});
  out.push_back({prefix + "num_batches_tracked", &num_batches_tracked});
}

}  // namespace seqlab

#include "seqlab/nn/positional.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace seqlab {

// --- kinds ------------------------------------------------------------------------------------------

namespace {
struct KindName {
  PositionalEncodingKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {PositionalEncodingKind::sinusoidal, "sinusoidal"}, {PositionalEncodingKind::learned, "learned"},
    {PositionalEncodingKind::rope, "rope"},             {PositionalEncodingKind::rope_pi, "rope_pi"},
    {PositionalEncodingKind::rope_ntk, "rope_ntk"},     {PositionalEncodingKind::alibi, "alibi"},
    {PositionalEncodingKind::none, "none"},
};
}  // namespace

PositionalEncodingKind parse_positional_encoding(const std::string& name) {
  for (const auto& kn : kKindNames)
    if (name == kn.name) return kn.kind;
  std::string allowed;
  for (const auto& kn : kKindNames) allowed += (allowed.empty() ? "" : ", ") + std::string(kn.name);
  throw std::invalid_argument("positional_encoding = '" + name + "': allowed " + allowed);
}

std::string to_string(PositionalEncodingKind kind) {
  for (const auto& kn : kKindNames)
    if (kind == kn.kind) return kn.name;
  throw std::invalid_argument("to_string: unknown PositionalEncodingKind " +
                              std::to_string(static_cast<int>(kind)));
}

bool acts_on_qk(PositionalEncodingKind kind) {
  return kind == PositionalEncodingKind::rope || kind == PositionalEncodingKind::rope_pi ||
         kind == PositionalEncodingKind::rope_ntk;
}

bool adds_to_embedding(PositionalEncodingKind kind) {
  return kind == PositionalEncodingKind::sinusoidal || kind == PositionalEncodingKind::learned;
}

bool biases_scores(PositionalEncodingKind kind) { return kind == PositionalEncodingKind::alibi; }

RopeScaling rope_scaling_for(PositionalEncodingKind kind) {
  switch (kind) {
    case PositionalEncodingKind::rope: return RopeScaling::none;
    case PositionalEncodingKind::rope_pi: return RopeScaling::position_interpolation;
    case PositionalEncodingKind::rope_ntk: return RopeScaling::ntk;
    default:
      throw std::invalid_argument("rope_scaling_for: positional_encoding = '" + to_string(kind) +
                                  "' is not RoPE; allowed rope, rope_pi, rope_ntk");
  }
}

// --- sinusoidal ---------------------------------------------------------------------------------------

namespace {
void check_d_model(const char* who, std::size_t d_model) {
  if (d_model == 0 || d_model % 2 != 0)
    throw std::invalid_argument(std::string(who) + ": d_model = " + std::to_string(d_model) +
                                "; must be even and >= 2");
}
}  // namespace

Tensor2 sinusoidal_table(std::size_t len, std::size_t d_model, bool interleaved, std::size_t pos_offset) {
  check_d_model("sinusoidal_table", d_model);
  const std::size_t half = d_model / 2;
  // ω_i = 1 / 10000^(2i/D), i = 0..D/2-1 (Vaswani et al. §3.5).
  std::vector<double> inv_freq(half);
  for (std::size_t i = 0; i < half; ++i)
    inv_freq[i] = std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d_model));
  Tensor2 pe({len, d_model});
  for (std::size_t t = 0; t < len; ++t) {
    const double pos = static_cast<double>(pos_offset + t);
    float* row = pe.data() + t * d_model;
    for (std::size_t i = 0; i < half; ++i) {
      const double angle = pos * inv_freq[i];
      const float s = static_cast<float>(std::sin(angle)), c = static_cast<float>(std::cos(angle));
      if (interleaved) {
        row[2 * i] = s;
        row[2 * i + 1] = c;
      } else {
        row[i] = s;
        row[half + i] = c;
      }
    }
  }
  return pe;
}

SinusoidalEncoding::SinusoidalEncoding(std::size_t d_model, bool interleaved)
    : d_model_(d_model), interleaved_(interleaved) {
  check_d_model("SinusoidalEncoding", d_model);
}

void SinusoidalEncoding::collect_parameters(const std::string&, std::vector<NamedParameter>&) {}

Tensor3 SinusoidalEncoding::forward(const Tensor3& x, std::size_t pos_offset) {
  check_shape("SinusoidalEncoding.forward: x", x, {-1, -1, static_cast<long>(d_model_)});
  const std::size_t b = x.shape()[0], t = x.shape()[1], d = d_model_;
  if (!has_table_ || table_.shape()[0] != t || table_offset_ != pos_offset) {
    table_ = sinusoidal_table(t, d, interleaved_, pos_offset);
    table_offset_ = pos_offset;
    has_table_ = true;
  }
  x_shape_.assign(x.shape().begin(), x.shape().end());
  Tensor3 y({b, t, d});
  const float* pe = table_.data();
  for (std::size_t i = 0; i < b; ++i) {
    const float* xi = x.data() + i * t * d;
    float* yi = y.data() + i * t * d;
    for (std::size_t k = 0; k < t * d; ++k) yi[k] = xi[k] + pe[k];
  }
  return y;
}

Tensor3 SinusoidalEncoding::backward(const Tensor3& dy) {
  if (x_shape_.empty()) throw std::logic_error("SinusoidalEncoding.backward: called before forward");
  check_shape("SinusoidalEncoding.backward: dy", dy,
              {static_cast<long>(x_shape_[0]), static_cast<long>(x_shape_[1]), static_cast<long>(x_shape_[2])});
  return dy;  // y = x + PE  ->  dx = dy
}

// --- learned ------------------------------------------------------------------------------------------

LearnedPositionalEmbedding::LearnedPositionalEmbedding(std::size_t max_len, std::size_t d_model, Rng& rng)
    : weight("weight", {max_len, d_model}), max_len_(max_len), d_model_(d_model) {
  if (max_len == 0)
    throw std::invalid_argument("LearnedPositionalEmbedding: max_len = 0; must be >= 1");
  if (d_model == 0)
    throw std::invalid_argument("LearnedPositionalEmbedding: d_model = 0; must be >= 1");
  rng.fill_normal(weight.value, 0.0f, 1.0f);
}

void LearnedPositionalEmbedding::collect_parameters(const std::string& prefix,
                                                    std::vector<NamedParameter>& out) {
  out.push_back({prefix + weight.name, &weight});
}

void LearnedPositionalEmbedding::check_weight() const {
  const std::vector<std::size_t> ws{max_len_, d_model_};
  if (!std::equal(weight.value.shape().begin(), weight.value.shape().end(), ws.begin(), ws.end()) ||
      !std::equal(weight.grad.shape().begin(), weight.grad.shape().end(), ws.begin(), ws.end()))
    throw ShapeError("LearnedPositionalEmbedding.weight: expected shape " + shape_string(ws) +
                     ", got value " + shape_string(weight.value.shape()) + ", grad " +
                     shape_string(weight.grad.shape()));
}

Tensor3 LearnedPositionalEmbedding::forward(const Tensor3& x, std::size_t pos_offset) {
  check_shape("LearnedPositionalEmbedding.forward: x", x, {-1, -1, static_cast<long>(d_model_)});
  check_weight();
  const std::size_t b = x.shape()[0], t = x.shape()[1], d = d_model_;
  if (pos_offset > max_len_ || t > max_len_ - pos_offset)
    throw std::out_of_range("LearnedPositionalEmbedding.forward: positions " + std::to_string(pos_offset) +
                            ".." + std::to_string(pos_offset + t) + " need length " +
                            std::to_string(pos_offset + t) + " (pos_offset " + std::to_string(pos_offset) +
                            " + T " + std::to_string(t) + ") > max_len = " + std::to_string(max_len_));
  pos_offset_ = pos_offset;
  x_shape_.assign(x.shape().begin(), x.shape().end());
  cached_ = true;
  Tensor3 y({b, t, d});
  const float* w = weight.value.data() + pos_offset * d;
  for (std::size_t i = 0; i < b; ++i) {
    const float* xi = x.data() + i * t * d;
    float* yi = y.data() + i * t * d;
    for (std::size_t k = 0; k < t * d; ++k) yi[k] = xi[k] + w[k];
  }
  return y;
}

Tensor3 LearnedPositionalEmbedding::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("LearnedPositionalEmbedding.backward: called before forward");
  check_shape("LearnedPositionalEmbedding.backward: dy", dy,
              {static_cast<long>(x_shape_[0]), static_cast<long>(x_shape_[1]), static_cast<long>(x_shape_[2])});
  check_weight();
  const std::size_t b = x_shape_[0], t = x_shape_[1], d = d_model_;
  // y = x + weight[pos_offset + t]  ->  weight.grad[pos_offset + t] += Σ_b dy[b, t]
  float* g = weight.grad.data() + pos_offset_ * d;
  for (std::size_t k = 0; k < t * d; ++k) {
    double s = 0.0;
    for (std::size_t i = 0; i < b; ++i) s += dy.data()[i * t * d + k];
    g[k] += static_cast<float>(s);
  }
  return dy;  // y = x + ...  ->  dx = dy
}

// --- RoPE ---------------------------------------------------------------------------------------------

RotaryEmbedding::RotaryEmbedding(const RopeConfig& cfg) : cfg_(cfg) {
  if (cfg.head_dim == 0 || cfg.head_dim % 2 != 0)
    throw std::invalid_argument("RotaryEmbedding: head_dim = " + std::to_string(cfg.head_dim) +
                                "; must be even and >= 2 (RoPE rotates pairs)");
  if (!std::isfinite(cfg.base) || cfg.base <= 1.0)
    throw std::invalid_argument("RotaryEmbedding: base = " + std::to_string(cfg.base) +
                                "; must be finite and > 1");
  if (cfg.scaling != RopeScaling::none && cfg.train_len == 0)
    throw std::invalid_argument(
        std::string("RotaryEmbedding: train_len = 0 with scaling = ") +
        (cfg.scaling == RopeScaling::ntk ? "ntk" : "position_interpolation") +
        "; the scaled variants need the training context length (train_len >= 1)");
}

RotaryEmbedding::RotaryEmbedding(const RotaryEmbedding& other)
    : cfg_(other.cfg_), context_len_(other.context_len_), scale_(other.scale_) {}

RotaryEmbedding& RotaryEmbedding::operator=(const RotaryEmbedding& other) {
  if (this != &other) {
    cfg_ = other.cfg_;
    context_len_ = other.context_len_;
    scale_ = other.scale_;
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.reset();
  }
  return *this;
}

const RopeConfig& RotaryEmbedding::config() const { return cfg_; }

void RotaryEmbedding::set_context_length(std::size_t len) {
  context_len_ = len;
  if (cfg_.scaling != RopeScaling::none && len > cfg_.train_len)
    scale_ = static_cast<double>(len) / static_cast<double>(cfg_.train_len);
  else
    scale_ = 1.0;
}

double RotaryEmbedding::scale() const { return scale_; }

std::vector<double> RotaryEmbedding::inverse_frequencies() const {
  const std::size_t hd = cfg_.head_dim, half = hd / 2;
  double base = cfg_.base;
  // NTK-aware: base' = base · s^(hd/(hd-2)). For hd = 2 the only θ_0 = base^0 = 1 is unaffected.
  if (cfg_.scaling == RopeScaling::ntk && scale_ != 1.0 && hd > 2)
    base *= std::pow(scale_, static_cast<double>(hd) / static_cast<double>(hd - 2));
  std::vector<double> inv(half);
  for (std::size_t i = 0; i < half; ++i) {
    inv[i] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    if (cfg_.scaling == RopeScaling::position_interpolation) inv[i] /= scale_;  // (p / s)·θ_i
  }
  return inv;
}

std::shared_ptr<const RotaryEmbedding::Table> RotaryEmbedding::table(std::size_t T,
                                                                     std::size_t pos_offset) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cache_ && cache_->T == T && cache_->pos_offset == pos_offset && cache_->scale == scale_)
      return cache_;
  }
  const std::size_t half = cfg_.head_dim / 2;
  auto tab = std::make_shared<Table>();
  tab->T = T;
  tab->pos_offset = pos_offset;
  tab->scale = scale_;
  tab->cos.resize(T * half);
  tab->sin.resize(T * half);
  const std::vector<double> inv = inverse_frequencies();
  for (std::size_t t = 0; t < T; ++t) {
    const double pos = static_cast<double>(pos_offset + t);
    for (std::size_t i = 0; i < half; ++i) {
      // position × inverse frequency, in double; never an accumulated sum of angle steps
      const double angle = pos * inv[i];
      tab->cos[t * half + i] = static_cast<float>(std::cos(angle));
      tab->sin[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  std::shared_ptr<const Table> out = std::move(tab);
  std::lock_guard<std::mutex> lock(mutex_);
  cache_ = out;
  return out;
}

void RotaryEmbedding::rotate(float* x, std::size_t rows, std::size_t T, std::size_t pos_offset,
                             bool inverse) const {
  if (rows == 0 || T == 0) return;
  if (x == nullptr) throw std::invalid_argument("RotaryEmbedding.rotate: x = nullptr");
  const std::size_t hd = cfg_.head_dim, half = hd / 2;
  const std::shared_ptr<const Table> tab = table(T, pos_offset);
  const float sign = inverse ? -1.0f : 1.0f;  // Rᵀ = R(−angle): sin flips sign
  const bool inter = cfg_.pairing == RopePairing::interleaved;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t t = 0; t < T; ++t) {
      float* v = x + (r * T + t) * hd;
      const float* c = tab->cos.data() + t * half;
      const float* s = tab->sin.data() + t * half;
      if (inter) {
        for (std::size_t i = 0; i < half; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1], si = sign * s[i];
          v[2 * i] = a * c[i] - b * si;
          v[2 * i + 1] = a * si + b * c[i];
        }
      } else {
        for (std::size_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[half + i], si = sign * s[i];
          v[i] = a * c[i] - b * si;
          v[half + i] = a * si + b * c[i];
        }
      }
    }
  }
}

void RotaryEmbedding::rotate(Tensor3& x, std::size_t pos_offset, bool inverse) const {
  check_shape("RotaryEmbedding.rotate: x", x, {-1, -1, static_cast<long>(cfg_.head_dim)});
  rotate(x.data(), x.shape()[0], x.shape()[1], pos_offset, inverse);
}

void RotaryEmbedding::rotate(Tensor4& x, std::size_t pos_offset, bool inverse) const {
  check_shape("RotaryEmbedding.rotate: x", x, {-1, -1, -1, static_cast<long>(cfg_.head_dim)});
  rotate(x.data(), x.shape()[0] * x.shape()[1], x.shape()[2], pos_offset, inverse);
}

// --- ALiBi --------------------------------------------------------------------------------------------

namespace {
bool is_power_of_two(std::size_t n) { return n != 0 && (n & (n - 1)) == 0; }

void alibi_slopes_into(std::size_t n, std::vector<double>& out) {
  if (is_power_of_two(n)) {
    // 2^(-8i/n), i = 1..n: a geometric sequence starting at and with ratio 2^(-8/n)
    for (std::size_t i = 1; i <= n; ++i)
      out.push_back(std::pow(2.0, -8.0 * static_cast<double>(i) / static_cast<double>(n)));
    return;
  }
  std::size_t m = 1;
  while (2 * m <= n) m *= 2;  // closest lower power of two
  alibi_slopes_into(m, out);
  std::vector<double> twice;
  alibi_slopes_into(2 * m, twice);
  for (std::size_t k = 0; k < n - m; ++k) out.push_back(twice[2 * k]);  // every other slope of 2m
}
}  // namespace

Tensor1 alibi_slopes(std::size_t n_heads) {
  if (n_heads == 0) throw std::invalid_argument("alibi_slopes: n_heads = 0; must be >= 1");
  std::vector<double> s;
  s.reserve(n_heads);
  alibi_slopes_into(n_heads, s);
  Tensor1 out = Tensor1::from_shape({n_heads});
  for (std::size_t i = 0; i < n_heads; ++i) out(i) = static_cast<float>(s[i]);
  return out;
}

Tensor2 alibi_bias(double slope, std::size_t T_q, std::size_t T_k, bool causal, std::size_t q_offset) {
  Tensor2 bias({T_q, T_k});
  for (std::size_t i = 0; i < T_q; ++i) {
    const double qi = static_cast<double>(q_offset + i);
    for (std::size_t j = 0; j < T_k; ++j) {
      const double dist = qi - static_cast<double>(j);
      bias(i, j) = static_cast<float>(-slope * (causal ? dist : std::abs(dist)));
    }
  }
  return bias;
}

void add_alibi_bias(Tensor4& scores, const Tensor1& slopes, bool causal, std::size_t q_offset) {
  const std::size_t b = scores.shape()[0], h = scores.shape()[1], tq = scores.shape()[2],
                    tk = scores.shape()[3];
  check_shape("add_alibi_bias: slopes", slopes, {static_cast<long>(h)});
  for (std::size_t k = 0; k < h; ++k) {
    const Tensor2 bias = alibi_bias(slopes(k), tq, tk, causal, q_offset);
    for (std::size_t i = 0; i < b; ++i) {
      float* s = scores.data() + (i * h + k) * tq * tk;
      for (std::size_t e = 0; e < tq * tk; ++e) s[e] += bias.data()[e];
    }
  }
}

}  // namespace seqlab

// --- T5 relative position bias ------------------------------------------------------------------

namespace seqlab {

namespace {
void check_buckets(std::size_t num_buckets, std::size_t max_distance) {
  if (num_buckets < 4 || num_buckets % 2 != 0)
    throw std::invalid_argument("t5_relative_bucket: num_buckets = " + std::to_string(num_buckets) +
                                "; must be even and >= 4");
  if (max_distance <= num_buckets / 2)
    throw std::invalid_argument("t5_relative_bucket: max_distance = " + std::to_string(max_distance) +
                                "; must be > num_buckets / 2 = " + std::to_string(num_buckets / 2));
}
}  // namespace

std::size_t t5_relative_bucket(long long relative_position, bool bidirectional, std::size_t num_buckets,
                               std::size_t max_distance) {
  check_buckets(num_buckets, max_distance);
  std::size_t nb = num_buckets, offset = 0;
  unsigned long long n = 0;
  if (bidirectional) {
    nb /= 2;
    if (relative_position > 0) offset = nb;
    n = static_cast<unsigned long long>(relative_position < 0 ? -relative_position : relative_position);
  } else {
    n = relative_position < 0 ? static_cast<unsigned long long>(-relative_position) : 0ULL;
  }
  const std::size_t max_exact = nb / 2;
  if (n < max_exact) return offset + static_cast<std::size_t>(n);
  // max_exact + ⌊ln(n / max_exact) / ln(max_distance / max_exact) · (nb − max_exact)⌋, at most nb − 1
  // (HF converts the non-negative product to long: truncation = floor).
  const double large = static_cast<double>(max_exact) +
                       std::floor(std::log(static_cast<double>(n) / static_cast<double>(max_exact)) /
                                  std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
                                  static_cast<double>(nb - max_exact));
  return offset + std::min(static_cast<std::size_t>(large), nb - 1);
}

RelativePositionBias::RelativePositionBias(std::size_t n_heads, std::size_t num_buckets, std::size_t max_distance,
                                           Rng& rng, float init_std)
    : weight("weight", {num_buckets, n_heads}),
      n_heads_(n_heads),
      num_buckets_(num_buckets),
      max_distance_(max_distance) {
  if (n_heads == 0) throw std::invalid_argument("RelativePositionBias: n_heads = 0; must be >= 1");
  check_buckets(num_buckets, max_distance);
  if (!(init_std >= 0.0f))
    throw std::invalid_argument("RelativePositionBias: init_std = " + std::to_string(init_std) + "; must be >= 0");
  rng.fill_normal(weight.value, 0.0f, init_std);
}

void RelativePositionBias::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + weight.name, &weight});
}

void RelativePositionBias::prepare(std::size_t span) {
  check_weight();
  for (std::size_t d = causal_.size(); d < span; ++d) {
    const long long r = static_cast<long long>(d);
    causal_.push_back(static_cast<std::uint32_t>(t5_relative_bucket(-r, false, num_buckets_, max_distance_)));
    before_.push_back(static_cast<std::uint32_t>(t5_relative_bucket(-r, true, num_buckets_, max_distance_)));
    after_.push_back(static_cast<std::uint32_t>(t5_relative_bucket(r, true, num_buckets_, max_distance_)));
  }
}

std::size_t RelativePositionBias::bucket(long long rel, bool causal) const {
  const std::size_t d = static_cast<std::size_t>(rel < 0 ? -rel : rel);
  if (causal) return rel > 0 ? causal_[0] : causal_[d];
  return rel > 0 ? after_[d] : before_[d];
}

namespace {
// The largest |pos_k − pos_q| of keys pos_k0 .. pos_k0 + n − 1 (n >= 1) against query pos_q.
std::size_t max_span(std::size_t pos_q, std::size_t pos_k0, std::size_t n) {
  const auto dist = [&](std::size_t k) { return k > pos_q ? k - pos_q : pos_q - k; };
  return std::max(dist(pos_k0), dist(pos_k0 + n - 1));
}
}  // namespace

void RelativePositionBias::check_span(std::size_t pos_q, std::size_t pos_k0, std::size_t n) const {
  if (n > 0 && max_span(pos_q, pos_k0, n) >= causal_.size())
    throw std::logic_error("RelativePositionBias: distance " + std::to_string(max_span(pos_q, pos_k0, n)) +
                           " outside the prepared span " + std::to_string(causal_.size()) + " (call prepare first)");
}

void RelativePositionBias::check_weight() const {
  const std::vector<std::size_t> want{num_buckets_, n_heads_};
  const auto same = [&](const Array& a) { return std::equal(a.shape().begin(), a.shape().end(), want.begin(), want.end()); };
  if (!same(weight.value) || !same(weight.grad))
    throw ShapeError("RelativePositionBias.weight: expected shape " + shape_string(want) + ", got value " +
                     shape_string(weight.value.shape()) + ", grad " + shape_string(weight.grad.shape()));
}

void RelativePositionBias::add_row(std::size_t head, std::size_t pos_q, std::size_t pos_k0, std::size_t n,
                                   bool causal, float* row) const {
  check_span(pos_q, pos_k0, n);
  const float* w = weight.value.data();
  const long long q = static_cast<long long>(pos_q), k0 = static_cast<long long>(pos_k0);
  for (std::size_t j = 0; j < n; ++j)
    row[j] += w[bucket(k0 + static_cast<long long>(j) - q, causal) * n_heads_ + head];
}

void RelativePositionBias::accumulate_row(std::size_t pos_q, std::size_t pos_k0, std::size_t n, bool causal,
                                          const float* drow, float* slots) const {
  check_span(pos_q, pos_k0, n);
  const long long q = static_cast<long long>(pos_q), k0 = static_cast<long long>(pos_k0);
  for (std::size_t j = 0; j < n; ++j) slots[bucket(k0 + static_cast<long long>(j) - q, causal)] += drow[j];
}

void RelativePositionBias::add_head_grad(std::size_t head, const float* slots) {
  float* g = weight.grad.data();
  for (std::size_t b = 0; b < num_buckets_; ++b) g[b * n_heads_ + head] += slots[b];
}

}  // namespace seqlab

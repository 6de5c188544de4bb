// Key/value cache and incremental causal self-attention (seqlab/nn/kv_cache.hpp).
#include "seqlab/nn/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "row_kernels.hpp"
#include "seqlab/core/gemm.hpp"
#include "seqlab/nn/positional.hpp"

namespace seqlab {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Softmax of x[0, n) in place, row max subtracted (n >= 1, finite entries).
void softmax_row(float* x, std::size_t n) {
  float m = kNegInf;
  for (std::size_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  double s = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);
    s += x[j];
  }
  const float inv = static_cast<float>(1.0 / s);
  for (std::size_t j = 0; j < n; ++j) x[j] *= inv;
}

}  // namespace

void KVCache::truncate(std::size_t len) {
  if (len > len_)
    throw std::out_of_range("KVCache.truncate: len = " + std::to_string(len) + " exceeds length() = " +
                            std::to_string(len_));
  len_ = len;
}

void KVCache::reserve(std::size_t B, std::size_t h, std::size_t d_k, std::size_t capacity) {
  if (B == 0 || h == 0 || d_k == 0)
    throw std::invalid_argument("KVCache.reserve: B, h and d_k must be >= 1 (got " + std::to_string(B) +
                                ", " + std::to_string(h) + ", " + std::to_string(d_k) + ")");
  const bool same = B == B_ && h == h_ && d_k == dk_;
  if (same && capacity <= cap_) return;
  const std::size_t keep = same ? len_ : 0;
  const std::size_t cap = std::max(capacity, keep);
  Tensor4 k = Tensor4::from_shape({B, h, cap, d_k}), v = Tensor4::from_shape({B, h, cap, d_k});
  for (std::size_t g = 0; g < B * h && keep > 0; ++g) {
    std::copy_n(k_.data() + g * cap_ * dk_, keep * dk_, k.data() + g * cap * d_k);
    std::copy_n(v_.data() + g * cap_ * dk_, keep * dk_, v.data() + g * cap * d_k);
  }
  k_ = std::move(k);
  v_ = std::move(v);
  B_ = B;
  h_ = h;
  dk_ = d_k;
  cap_ = cap;
  len_ = keep;
}

void KVCache::extend(std::size_t t) {
  if (len_ + t > cap_)
    throw std::logic_error("KVCache.extend: length " + std::to_string(len_) + " + " + std::to_string(t) +
                           " exceeds capacity " + std::to_string(cap_));
  len_ += t;
}

Tensor3 attention_step(const MultiheadAttention& attn, const Tensor3& x, KVCache& cache) {
  const std::size_t D = attn.d_model(), h = attn.n_heads(), dk = attn.head_dim();
  check_shape("attention_step x [B, t, d_model]", x, {-1, -1, static_cast<long>(D)});
  const std::size_t B = x.shape()[0], t = x.shape()[1], n = cache.length();
  if (B == 0 || t == 0)
    throw ShapeError("attention_step: x has shape " + shape_string(x.shape()) +
                     "; batch and the new positions t must be >= 1");
  if (n > 0 && cache.batch() != B)
    throw ShapeError("attention_step: x has batch " + std::to_string(B) + ", the cache holds " +
                     std::to_string(cache.batch()) + " sequences");
  if (attn.normalize_keys())
    throw std::invalid_argument("attention_step: the attention normalises its keys (set_normalize_keys), "
                                "which KV-cache decoding does not implement; use MultiheadAttention::forward");
  const RotaryEmbedding* rope = attn.rope();
  if (rope && rope->config().head_dim != dk)
    throw std::invalid_argument("attention_step: rope head_dim = " + std::to_string(rope->config().head_dim) +
                                "; must equal d_k = " + std::to_string(dk));
  if (cache.capacity() < n + t || cache.batch() != B)
    cache.reserve(B, h, dk, std::max({n + t, 2 * cache.capacity(), std::size_t{16}}));

  // proj [B·t, R] = x W_inᵀ + b_in: q | k | v (shared_qk: qk | v), as MultiheadAttention::forward.
  const std::size_t R = (attn.shared_qk() ? 2 : 3) * D, N = B * t;
  const std::size_t kcol = attn.shared_qk() ? 0 : D, vcol = R - D;
  Tensor2 proj = Tensor2::from_shape({N, R});
  detail::affine_rows(x.data(), N, D, attn.in_proj_weight.value.data(),
                      attn.has_bias() ? attn.in_proj_bias.value.data() : nullptr, R, proj.data());

  // Queries (rotated copies under RoPE, else read in place) and the new keys and values into the
  // cache rows n .. n+t−1.
  Tensor4 q_rot;
  if (rope) q_rot = Tensor4::from_shape({B, h, t, dk});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < h; ++i)
      for (std::size_t r = 0; r < t; ++r) {
        const float* row = proj.data() + (b * t + r) * R + i * dk;
        std::copy_n(row + kcol, dk, cache.key(b, i, n + r));
        std::copy_n(row + vcol, dk, cache.value(b, i, n + r));
        if (rope) std::copy_n(row, dk, q_rot.data() + ((b * h + i) * t + r) * dk);
      }
  if (rope) {
    rope->rotate(q_rot.data(), B * h, t, n, false);
    for (std::size_t g = 0; g < B * h; ++g)  // the new keys of head g, rows n .. n+t−1 (contiguous)
      rope->rotate(cache.key(g / h, g % h, n), 1, t, n, false);
  }
  cache.extend(t);

  // Per head: S = Q Kᵀ/√d_k [t, n+t] (+ ALiBi), causal softmax, context = P V into its columns.
  const std::size_t Tk = n + t;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const Tensor1 slopes = attn.alibi() ? alibi_slopes(h) : Tensor1();
  Tensor3 ctx = Tensor3::from_shape({B, t, D});
  std::vector<float> S(t * Tk);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < h; ++i) {
      const float* q = rope ? q_rot.data() + (b * h + i) * t * dk : proj.data() + b * t * R + i * dk;
      const std::size_t ldq = rope ? dk : R;
      gemm(false, true, t, Tk, dk, scale, q, ldq, cache.key(b, i, 0), dk, 0.0f, S.data(), Tk);
      for (std::size_t r = 0; r < t; ++r) {
        float* row = S.data() + r * Tk;
        const std::size_t visible = n + r + 1;  // keys 0 .. n+r
        if (attn.alibi()) {
          const float slope = slopes(i), pq = static_cast<float>(n + r);
          for (std::size_t j = 0; j < visible; ++j) row[j] -= slope * std::abs(pq - static_cast<float>(j));
        }
        softmax_row(row, visible);
        std::fill(row + visible, row + Tk, 0.0f);
      }
      gemm(false, false, t, dk, Tk, 1.0f, S.data(), Tk, cache.value(b, i, 0), dk, 0.0f,
           ctx.data() + b * t * D + i * dk, D);
    }

  // y = ctx W_Oᵀ + b_O.
  Tensor3 y = Tensor3::from_shape({B, t, D});
  detail::affine_rows(ctx.data(), N, D, attn.out_proj.weight.value.data(),
                      attn.has_bias() ? attn.out_proj.bias.value.data() : nullptr, D, y.data());
  return y;
}

Tensor3 encoder_layer_step(TransformerEncoderLayer& layer, const Tensor3& x, KVCache& cache) {
  const std::size_t D = layer.config().d_model;
  check_shape("encoder_layer_step x [B, t, d_model]", x, {-1, -1, static_cast<long>(D)});
  auto add = [](Tensor3 a, const Tensor3& b) {
    detail::add_floats(a.data(), b.data(), a.size(), a.data());
    return a;
  };
  if (layer.config().pre_norm()) {
    // x1 = x + self_attn(norm1(x)); y = x1 + ff(norm2(x1))
    const Tensor3 x1 = add(attention_step(layer.self_attn, layer.norm1->forward(x), cache), x);
    return add(layer.ff.forward(layer.norm2->forward(x1)), x1);
  }
  // x1 = norm1(x + self_attn(x)); y = norm2(x1 + ff(x1))
  const Tensor3 x1 = layer.norm1->forward(add(attention_step(layer.self_attn, x, cache), x));
  return layer.norm2->forward(add(layer.ff.forward(x1), x1));
}

}  // namespace seqlab

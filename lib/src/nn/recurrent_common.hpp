#pragma once
// Internal helpers shared by the recurrent layers (recurrent_base.cpp, lstm.cpp, rnn.cpp, gru.cpp).
// Not a public header: it lives beside the sources and is included as "recurrent_common.hpp".
//
// Legend: B batch, T seq_len, W row width (D, H, 3H or 4H), N rows.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include <xsimd/xsimd.hpp>

namespace seqlab::detail {

inline float sigmoid1(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// Element-wise gate activations, vectorised with xsimd (already a dependency through xtensor);
// the scalar libm calls were about a fifth of an LSTM step. xsimd's exp and tanh are accurate to
// a few ulp in float. Scalar tails and a scalar fallback when xsimd has no SIMD architecture.
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
using FBatch = xsimd::batch<float>;
constexpr std::size_t kLanes = FBatch::size;
#endif

/// p[j] = σ(p[j]) = 1 / (1 + exp(-p[j])) for j < n. σ(±100) is exactly 1 / 0 in float.
inline void sigmoid_inplace(float* p, std::size_t n) {
  std::size_t j = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  const FBatch one(1.0f);
  for (; j + kLanes <= n; j += kLanes) {
    const FBatch z = FBatch::load_unaligned(p + j);
    (one / (one + xsimd::exp(-z))).store_unaligned(p + j);
  }
#endif
  for (; j < n; ++j) p[j] = sigmoid1(p[j]);
}

/// dst[j] = tanh(src[j]) for j < n (dst may equal src).
inline void tanh_to(const float* src, float* dst, std::size_t n) {
  std::size_t j = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  for (; j + kLanes <= n; j += kLanes) xsimd::tanh(FBatch::load_unaligned(src + j)).store_unaligned(dst + j);
#endif
  for (; j < n; ++j) dst[j] = std::tanh(src[j]);
}

/// p[j] = max(p[j], 0) for j < n (a plain loop: the compiler vectorises it).
inline void relu_inplace(float* p, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) p[j] = p[j] > 0.0f ? p[j] : 0.0f;
}

/// Σ p[j]² for j < n, accumulated in double (hidden-gradient norms).
inline double squared_norm(const float* p, std::size_t n) {
  double sq = 0.0;
  for (std::size_t j = 0; j < n; ++j) sq += static_cast<double>(p[j]) * p[j];
  return sq;
}

/// Copies a [B, T, W] batch-first block into a [T, B, W] time-major one (or back, with B and T
/// swapped): dst[t, b, :] = src[b, t, :].
inline void swap_leading_axes(const float* src, float* dst, std::size_t B, std::size_t T, std::size_t W) {
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t)
      std::memcpy(dst + (t * B + b) * W, src + (b * T + t) * W, W * sizeof(float));
}

/// out[j] = Σ_r src[r, j] over N rows of a [N, W] block (out [W], overwritten; float sums).
inline void column_sums(const float* src, std::size_t N, std::size_t W, float* out) {
  std::fill(out, out + W, 0.0f);
  for (std::size_t r = 0; r < N; ++r) {
    const float* row = src + r * W;
    for (std::size_t j = 0; j < W; ++j) out[j] += row[j];
  }
}

/// acc[j] += src[j] for j < n.
inline void add_to(float* acc, const float* src, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) acc[j] += src[j];
}

/// Constructor checks of every recurrent layer: throws std::invalid_argument
/// "<who>: <what> is 0; it must be >= 1" for a zero size.
inline void check_recurrent_sizes(const char* who, std::size_t input_size, std::size_t hidden_size,
                                  std::size_t num_layers) {
  const std::pair<const char*, std::size_t> sizes[] = {
      {"input_size", input_size}, {"hidden_size", hidden_size}, {"num_layers", num_layers}};
  for (const auto& [what, v] : sizes)
    if (v == 0) throw std::invalid_argument(std::string(who) + ": " + what + " is 0; it must be >= 1");
}

}  // namespace seqlab::detail

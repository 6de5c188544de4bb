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
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace seqlab::detail {

inline float sigmoid1(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// Element-wise gate activations, vectorised with xsimd (already a dependency through xtensor);
// the scalar libm calls were about a fifth of an LSTM step. xsimd's exp and tanh are accurate to
// a few ulp in float. Scalar tails and a scalar fallback when xsimd has no SIMD architecture.
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
using FBatch = xsimd::batch<float>;
constexpr std::size_t kLanes = FBatch::size;
// The tail after the full batches first takes one step of a batch half as wide when there is one
// (AVX-512: 8 lanes of AVX2; AVX/AVX2: 4 lanes of SSE4.2), so that at most half a batch minus one
// element goes through the scalar libm calls: at hidden size 57 with 16 lanes, 9 of every row's
// 57 gate activations were scalar exp / tanh calls.
#if XSIMD_WITH_AVX512F && XSIMD_WITH_AVX2
#define SEQLAB_HALF_BATCH 1
using HBatch = xsimd::batch<float, xsimd::avx2>;
#elif XSIMD_WITH_AVX && XSIMD_WITH_SSE4_2
#define SEQLAB_HALF_BATCH 1
using HBatch = xsimd::batch<float, xsimd::sse4_2>;
#endif
#endif

/// dst[j] = tanh(src[j]) for j < n (dst may equal src).
inline void tanh_to(const float* src, float* dst, std::size_t n) {
  std::size_t j = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  for (; j + kLanes <= n; j += kLanes) xsimd::tanh(FBatch::load_unaligned(src + j)).store_unaligned(dst + j);
#endif
  for (; j < n; ++j) dst[j] = std::tanh(src[j]);
}

// --- one kernel body for SIMD lanes and the scalar tail -----------------------------------------
// The fused per-step loops of the RNN, GRU and LSTM are written once as a generic lambda over the
// value type V (FBatch, HBatch or float) and driven by for_lanes / sum_squares_over_lanes: full
// batches of kLanes first, then at most one HBatch, then the scalar tail. vload / vstore /
// vsigmoid / vtanh overload on V; the float versions are the same formulas as sigmoid1 and
// std::tanh above. Without xsimd support every element is scalar.

/// A SIMD batch of floats loaded from p (unaligned), or the float *p.
template <class V> inline V vload(const float* p) { return V::load_unaligned(p); }
template <> inline float vload<float>(const float* p) { return *p; }
inline void vstore(float* p, float v) { *p = v; }
/// σ(z) = 1 / (1 + exp(-z)); σ(±100) is exactly 1 / 0 in float.
inline float vsigmoid(float z) { return sigmoid1(z); }
inline float vtanh(float z) { return std::tanh(z); }
/// d where h > 0, else 0 (the ReLU's derivative applied from its output h).
inline float vpass_if_positive(float h, float d) { return h > 0.0f ? d : 0.0f; }
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
template <class A>
inline void vstore(float* p, const xsimd::batch<float, A>& v) { v.store_unaligned(p); }
template <class A>
inline xsimd::batch<float, A> vsigmoid(const xsimd::batch<float, A>& z) {
  const xsimd::batch<float, A> one(1.0f);
  return one / (one + xsimd::exp(-z));
}
template <class A>
inline xsimd::batch<float, A> vtanh(const xsimd::batch<float, A>& z) { return xsimd::tanh(z); }
template <class A>
inline xsimd::batch<float, A> vpass_if_positive(const xsimd::batch<float, A>& h, const xsimd::batch<float, A>& d) {
  using V = xsimd::batch<float, A>;
  return xsimd::select(h > V(0.0f), d, V(0.0f));
}
#endif

/// Calls body(V{}, j) for every j < n: V = FBatch on j = 0, kLanes, … while a full batch fits,
/// then V = HBatch once if half a batch fits, then V = float on each remaining j. body covers
/// elements j .. j + lanes(V) - 1.
template <class Body>
inline void for_lanes(std::size_t n, Body&& body) {
  std::size_t j = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  for (; j + kLanes <= n; j += kLanes) body(FBatch(0.0f), j);
#if defined(SEQLAB_HALF_BATCH)
  if (j + HBatch::size <= n) {
    body(HBatch(0.0f), j);
    j += HBatch::size;
  }
#endif
#endif
  for (; j < n; ++j) body(0.0f, j);
}

/// for_lanes whose body returns a V; returns Σ v² over every lane v of every return, each value
/// converted to double before it is squared (the hidden-gradient norms: in float, the squares of
/// values below ~1e-19 lose precision and below ~4e-23 vanish, and those above ~2e19 overflow).
template <class Body>
inline double sum_squares_over_lanes(std::size_t n, Body&& body) {
  double total = 0.0;
  std::size_t j = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  alignas(64) float v[kLanes];
  alignas(64) double acc[kLanes] = {};
#if defined(__AVX512F__) && defined(__FMA__)
  if constexpr (kLanes == 16) {
    // The loop below in two vectors of 8 doubles: lane l of the batch goes to lane l of lo
    // (l < 8) or l - 8 of hi, acc[l] = fma(x, x, acc[l]), which is what GCC makes of the scalar
    // loop (it contracts x * x + acc by default), so the sums are the same bit for bit, without
    // 16 scalar conversions and extracts per batch.
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (; j + kLanes <= n; j += kLanes) {
      const __m512 f = body(FBatch(0.0f), j);
      const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
      const __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
      lo = _mm512_fmadd_pd(a, a, lo);
      hi = _mm512_fmadd_pd(b, b, hi);
    }
    _mm512_store_pd(acc, lo);
    _mm512_store_pd(acc + 8, hi);
  }
#endif
  for (; j + kLanes <= n; j += kLanes) {
    body(FBatch(0.0f), j).store_aligned(v);
    for (std::size_t l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(v[l]) * static_cast<double>(v[l]);
  }
#if defined(SEQLAB_HALF_BATCH)
  if (j + HBatch::size <= n) {
    body(HBatch(0.0f), j).store_aligned(v);
    for (std::size_t l = 0; l < HBatch::size; ++l) acc[l] += static_cast<double>(v[l]) * static_cast<double>(v[l]);
    j += HBatch::size;
  }
#endif
  for (std::size_t l = 0; l < kLanes; ++l) total += acc[l];
#endif
  for (; j < n; ++j) {
    const double x = body(0.0f, j);
    total += x * x;
  }
  return total;
}

/// p[j] = max(p[j], 0) for j < n (a plain loop: the compiler vectorises it).
inline void relu_inplace(float* p, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) p[j] = p[j] > 0.0f ? p[j] : 0.0f;
}

/// Copies a [B, T, W] batch-first block into a [T, B, W] time-major one (or back, with B and T
/// swapped): dst[t, b, :] = src[b, t, :].
inline void swap_leading_axes(const float* src, float* dst, std::size_t B, std::size_t T, std::size_t W) {
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t)
      std::memcpy(dst + (t * B + b) * W, src + (b * T + t) * W, W * sizeof(float));
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

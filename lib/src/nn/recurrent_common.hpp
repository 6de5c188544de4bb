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
// value type V (FBatch or float) and driven by for_lanes / sum_squares_over_lanes: full batches of
// kLanes first, then the scalar tail. vload / vstore / vsigmoid / vtanh overload on V; the float
// versions are the same formulas as sigmoid1 and std::tanh above. Without xsimd support every
// element is scalar.

template <class V> inline V vload(const float* p);
template <> inline float vload<float>(const float* p) { return *p; }
inline void vstore(float* p, float v) { *p = v; }
/// σ(z) = 1 / (1 + exp(-z)); σ(±100) is exactly 1 / 0 in float.
inline float vsigmoid(float z) { return sigmoid1(z); }
inline float vtanh(float z) { return std::tanh(z); }
/// d where h > 0, else 0 (the ReLU's derivative applied from its output h).
inline float vpass_if_positive(float h, float d) { return h > 0.0f ? d : 0.0f; }
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
template <> inline FBatch vload<FBatch>(const float* p) { return FBatch::load_unaligned(p); }
inline void vstore(float* p, const FBatch& v) { v.store_unaligned(p); }
inline FBatch vsigmoid(const FBatch& z) {
  const FBatch one(1.0f);
  return one / (one + xsimd::exp(-z));
}
inline FBatch vtanh(const FBatch& z) { return xsimd::tanh(z); }
inline FBatch vpass_if_positive(const FBatch& h, const FBatch& d) {
  return xsimd::select(h > FBatch(0.0f), d, FBatch(0.0f));
}
#endif

/// Calls body(V{}, j) for every j < n: V = FBatch on j = 0, kLanes, … while a full batch fits,
/// then V = float on each remaining j. body covers elements j .. j + lanes(V) - 1.
template <class Body>
inline void for_lanes(std::size_t n, Body&& body) {
  std::size_t j = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  for (; j + kLanes <= n; j += kLanes) body(FBatch(0.0f), j);
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
  double acc[kLanes] = {};
  for (; j + kLanes <= n; j += kLanes) {
    body(FBatch(0.0f), j).store_aligned(v);
    for (std::size_t l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(v[l]) * static_cast<double>(v[l]);
  }
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

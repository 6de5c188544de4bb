#pragma once
// The per-head matrix products of MultiheadAttention (S = Q Kᵀ, P V and the four products of their
// backward), a register-blocked kernel for the small shapes attention has: one side is d_k
// (32 in the benchmarks), the others the sequence lengths. Internal header of attention.cpp.
//
// Why not OpenBLAS here: for a [128, 32] x [32, 128] product each cblas_sgemm call zeroes C when
// beta = 0 (a separate pass), packs both operands and has its per-call set-up, and these cost
// about as much as the multiply-adds themselves (experiments/bench/README.md: in a replay of an
// encoder-layer step's GEMMs the per-head products took 17 % of the GEMM time for 8 % of the
// FLOPs). Here op(B) is copied into a contiguous panel [kc, nc rounded up to kHeadNR] (the heads' rows have the
// stride of the projection, 3·d_model floats, which maps a head's rows onto a handful of L1 sets),
// A is read in place, and C is written once per panel, with alpha applied at the store and
// beta = 0 never reading C. Panels are at most kHeadKC x kHeadNC floats (128 KiB), so long
// sequences block over K and N instead of streaming one large panel per row block.
//
// The tile is kHeadMR = 6 rows by kHeadNR = two SIMD registers of columns (6 x 16 with AVX2, as in
// BLIS's and OpenBLAS's Haswell SGEMM kernels: 12 accumulators, per k two panel loads, six
// broadcasts of A and twelve FMAs). Each element of C is one FMA chain over k in order (within a
// K block; blocks are added in order), whatever the tile position or thread; results differ from
// OpenBLAS's in the last bits where its kernel orders the k terms differently.
#include <algorithm>
#include <cstddef>
#include <vector>

#include <xsimd/xsimd.hpp>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "seqlab/core/gemm.hpp"

namespace seqlab::detail {

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
using HeadBatch = xsimd::batch<float>;
/// Columns of a tile: two SIMD registers (16 floats with AVX2).
constexpr std::size_t kHeadNR = 2 * HeadBatch::size;
#else
constexpr std::size_t kHeadNR = 16;
#endif
/// Rows of a tile.
constexpr std::size_t kHeadMR = 6;
/// Depth and width of one panel: K and N are blocked so that a panel stays within 128 KiB.
constexpr std::size_t kHeadKC = 256;
constexpr std::size_t kHeadNC = 128;

/// Width of the panel of an N-column operand: N rounded up to a multiple of the tile width nr
/// (kHeadNR, or twice the lanes of the batch type a caller gives the kernels below).
inline std::size_t head_panel_width(std::size_t n, std::size_t nr = kHeadNR) { return (n + nr - 1) / nr * nr; }

#if defined(__AVX__)
/// dst[c·ldd + r] = src[r·lds + c] for r, c < 8: one 8 x 8 block transposed in eight AVX registers
/// (unpack, shuffle, then swap 128-bit halves; the usual sequence, as in Intel's optimization
/// manual). Unaligned loads and stores.
inline void transpose_8x8(const float* src, std::size_t lds, float* dst, std::size_t ldd) {
  __m256 r[8], t[8];
  for (std::size_t q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(src + q * lds);
  for (std::size_t q = 0; q < 8; q += 2) {
    t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5
    t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
  }
  for (std::size_t q = 0; q < 8; q += 4) {
    r[q] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(1, 0, 1, 0));      // a0 b0 c0 d0 | a4 ..
    r[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(3, 2, 3, 2));  // a1 b1 c1 d1 | a5 ..
    r[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (std::size_t q = 0; q < 4; ++q) {
    _mm256_storeu_ps(dst + q * ldd, _mm256_permute2f128_ps(r[q], r[q + 4], 0x20));
    _mm256_storeu_ps(dst + (q + 4) * ldd, _mm256_permute2f128_ps(r[q], r[q + 4], 0x31));
  }
}
#endif

/// panel[k·w + j] = op(B)[k, j] for k < K, j < N and 0 for N <= j < w = head_panel_width(N, nr);
/// op(B) = B (stored [K, N], rows of stride ldb) or Bᵀ (B stored [N, K]); B points at op(B)[0, 0].
/// panel is resized.
inline void pack_head_panel(bool trans_b, std::size_t K, std::size_t N, const float* B, std::size_t ldb,
                            std::vector<float>& panel, std::size_t nr = kHeadNR) {
  const std::size_t w = head_panel_width(N, nr);
  panel.resize(K * w);
  float* p = panel.data();
  if (!trans_b) {
    for (std::size_t k = 0; k < K; ++k) {
      std::copy(B + k * ldb, B + k * ldb + N, p + k * w);
      std::fill(p + k * w + N, p + (k + 1) * w, 0.0f);
    }
  } else {
    // Blocks of 8 rows of B, read along k together: each k writes 8 consecutive panel floats
    // (with AVX, 8 x 8 blocks go through registers: transpose_8x8).
    std::size_t j = 0;
    for (; j + 8 <= N; j += 8) {
      const float* r0 = B + j * ldb;
      std::size_t k = 0;
#if defined(__AVX__)
      for (; k + 8 <= K; k += 8) transpose_8x8(r0 + k, ldb, p + k * w + j, w);
#endif
      for (; k < K; ++k) {
        float* d = p + k * w + j;
        for (std::size_t q = 0; q < 8; ++q) d[q] = r0[q * ldb + k];
      }
    }
    for (; j < N; ++j)
      for (std::size_t k = 0; k < K; ++k) p[k * w + j] = B[j * ldb + k];
    for (std::size_t k = 0; k < K; ++k) std::fill(p + k * w + N, p + (k + 1) * w, 0.0f);
  }
}

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
/// The store of a tile's accumulators (rows r < MR, two batches each): C[r, j] = alpha · acc[r, j]
/// (+ beta · C[r, j]) for j < ncols <= 2·V::size; beta = 0 does not read C.
template <std::size_t MR, class V>
inline void head_tile_store(const V* acc0, const V* acc1, float alpha, float beta, float* C, std::size_t ldc,
                            std::size_t ncols) {
  constexpr std::size_t L = V::size, NR = 2 * L;
  const V va(alpha);
  if (ncols == NR && beta == 0.0f) {  // the common case: a whole tile, C not read
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r) {
      (va * acc0[r]).store_unaligned(C + r * ldc);
      (va * acc1[r]).store_unaligned(C + r * ldc + L);
    }
    return;
  }
  const V vb(beta);
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r) {
    float* c = C + r * ldc;
    const V v0 = va * acc0[r], v1 = va * acc1[r];
    if (ncols == NR) {
      xsimd::fma(vb, V::load_unaligned(c), v0).store_unaligned(c);
      xsimd::fma(vb, V::load_unaligned(c + L), v1).store_unaligned(c + L);
    } else {
      alignas(64) float t[NR];
      v0.store_aligned(t);
      v1.store_aligned(t + L);
      for (std::size_t j = 0; j < ncols; ++j) c[j] = beta == 0.0f ? t[j] : std::fma(beta, c[j], t[j]);
    }
  }
}

/// One tile: C[r, j] = alpha · Σ_k op(A)[r, k] · panel[k, j] (+ beta · C[r, j]) for r < MR,
/// j < ncols <= 2·V::size (kHeadNR for the default V). op(A)[r, k] = A[r·lda + k], or A[k·lda + r]
/// when TA. V: the SIMD batch type (a narrower one than HeadBatch suits products of few columns).
template <std::size_t MR, bool TA, class V = HeadBatch>
inline void head_tile(std::size_t K, const float* A, std::size_t lda, const float* panel, std::size_t w,
                      float alpha, float beta, float* C, std::size_t ldc, std::size_t ncols) {
  using HeadBatch = V;
  constexpr std::size_t L = HeadBatch::size;
  HeadBatch acc0[MR], acc1[MR];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r) {
    acc0[r] = HeadBatch(0.0f);
    acc1[r] = HeadBatch(0.0f);
  }
  for (std::size_t k = 0; k < K; ++k) {
    const float* pk = panel + k * w;
    const HeadBatch b0 = HeadBatch::load_unaligned(pk);
    const HeadBatch b1 = HeadBatch::load_unaligned(pk + L);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r) {
      const HeadBatch a(TA ? A[k * lda + r] : A[r * lda + k]);
      acc0[r] = xsimd::fma(a, b0, acc0[r]);
      acc1[r] = xsimd::fma(a, b1, acc1[r]);
    }
  }
  head_tile_store<MR, V>(acc0, acc1, alpha, beta, C, ldc, ncols);
}

/// Rows of the next tile when `left` rows remain: kHeadMR, except that the last 7 or 8 rows go as
/// 4 + 3 or 4 + 4 rather than 6 + 1 or 6 + 2 (a 1- or 2-row tile has too few accumulators to hide
/// the FMA latency).
inline std::size_t head_tile_rows(std::size_t left) { return left == 7 || left == 8 ? 4 : std::min(kHeadMR, left); }

template <bool TA, class V = HeadBatch>
inline void head_gemm_rows(std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                           std::size_t lda, const float* panel, float beta, float* C, std::size_t ldc) {
  constexpr std::size_t kHeadNR = 2 * V::size;
  const std::size_t w = head_panel_width(N, kHeadNR);
  std::size_t mr = 0;
  for (std::size_t i = 0; i < M; i += mr) {  // rows outer: a block's rows of A stay in L1
    const float* Ai = TA ? A + i : A + i * lda;
    float* Ci = C + i * ldc;
    mr = head_tile_rows(M - i);
    if (!TA && i + mr < M) {  // the next tile's rows of A (strided: the prefetcher misses them)
      const std::size_t next = std::min(kHeadMR, M - i - mr), kb = std::min<std::size_t>(K, 64);
      for (std::size_t r = 0; r < next; ++r)
        for (std::size_t k = 0; k < kb; k += 16) __builtin_prefetch(A + (i + mr + r) * lda + k);
    }
    for (std::size_t j = 0; j < N; j += kHeadNR) {
      const std::size_t nc = std::min(kHeadNR, N - j);
      switch (mr) {
        case 6: head_tile<6, TA, V>(K, Ai, lda, panel + j, w, alpha, beta, Ci + j, ldc, nc); break;
        case 5: head_tile<5, TA, V>(K, Ai, lda, panel + j, w, alpha, beta, Ci + j, ldc, nc); break;
        case 4: head_tile<4, TA, V>(K, Ai, lda, panel + j, w, alpha, beta, Ci + j, ldc, nc); break;
        case 3: head_tile<3, TA, V>(K, Ai, lda, panel + j, w, alpha, beta, Ci + j, ldc, nc); break;
        case 2: head_tile<2, TA, V>(K, Ai, lda, panel + j, w, alpha, beta, Ci + j, ldc, nc); break;
        default: head_tile<1, TA, V>(K, Ai, lda, panel + j, w, alpha, beta, Ci + j, ldc, nc); break;
      }
    }
  }
}
#endif

/// Row-major C[M, N] = alpha · op(A)[M, K] · op(B)[K, N] + beta · C with gemm's arguments
/// (core/gemm.hpp: op(A) = A stored [M, K] with rows of stride lda, or Aᵀ with A stored [K, M];
/// the same for B), for one attention head. op(B) is packed block by block (kHeadKC x kHeadNC)
/// into `panel`, the caller's scratch (resized; one per thread), and the tiles above compute C.
/// beta = 0 does not read C; K = 0 gives C = beta · C. Unlike BLAS, alpha = 0 still reads A and
/// B (attention never passes it). Pointers must not alias C. Without a SIMD architecture in
/// xsimd it calls gemm. Throws nothing but std::bad_alloc (panel).
inline void head_gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
                      const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                      std::size_t ldc, std::vector<float>& panel);

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
/// head_gemm with tiles of the SIMD batch type V (2·V::size columns; head_gemm itself is
/// head_gemm_as<HeadBatch>).
template <class V>
inline void head_gemm_as(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
                         const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                         std::size_t ldc, std::vector<float>& panel) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // no products: C = beta · C (BLAS's convention, C not read when beta = 0)
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  for (std::size_t j0 = 0; j0 < N; j0 += kHeadNC) {
    const std::size_t nc = std::min(kHeadNC, N - j0);
    for (std::size_t k0 = 0; k0 < K; k0 += kHeadKC) {
      const std::size_t kc = std::min(kHeadKC, K - k0);
      // op(B)[k0.., j0..]: B + k0·ldb + j0 when not transposed, B + j0·ldb + k0 when it is.
      const float* Bb = trans_b ? B + j0 * ldb + k0 : B + k0 * ldb + j0;
      pack_head_panel(trans_b, kc, nc, Bb, ldb, panel, 2 * V::size);
      // op(A)[.., k0..]: columns k0.. of A, or rows k0.. of the stored Aᵀ.
      const float* Ab = trans_a ? A + k0 * lda : A + k0;
      const float b = k0 == 0 ? beta : 1.0f;  // later K blocks add onto the first
      if (trans_a) {
        head_gemm_rows<true, V>(M, nc, kc, alpha, Ab, lda, panel.data(), b, C + j0, ldc);
      } else {
        head_gemm_rows<false, V>(M, nc, kc, alpha, Ab, lda, panel.data(), b, C + j0, ldc);
      }
    }
  }
}
#endif

inline void head_gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
                      const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                      std::size_t ldc, std::vector<float>& panel) {
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  head_gemm_as<HeadBatch>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, panel);
#else
  (void)panel;
  gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

}  // namespace seqlab::detail

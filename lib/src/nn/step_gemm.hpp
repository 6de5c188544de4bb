#pragma once
// The per-step products of the recurrent layers with the batch as the columns. Internal header
// of rnn.cpp.
//
// Legend: B batch, H hidden_size, G rows of the recurrent weight (gates·H), w = B rounded up to a
// whole number of kHeadNR-wide tiles (head_gemm.hpp), "ᵀ" a [·, w] block whose columns are the
// batch rows (padding columns b >= B are zero).
//
// Why: one step's h_{t-1} [B, H] × W_hhᵀ [H, G] at B = 32, H = 116 is a small GEMM, and
// OpenBLAS 0.3.21 (its Haswell/Zen kernels, AVX2, on the AMD EPYC VM) packs both operands and has
// its set-up on every call (and at 2 threads may split a step over its threads; not measured). The
// same product transposed, preᵀ [G, w] += W_hh [G, H] · h_{t-1}ᵀ [H, w], has the batch as the
// columns: w = 32 is two AVX-512 or four AVX2 registers with no padding, W_hh is read in place
// (no packing: a tile's broadcasts walk its rows), h_{t-1}ᵀ is already the contiguous panel
// head_tile reads, and no per-call set-up remains. The price is two [B, H] transposes per step
// (8 x 8 register blocks). Measured with callgrind on an AVX2 build (valgrind 3.19 does not decode
// AVX-512), long_range_recall's RNN cell: 4 % fewer instructions per update (the steps' FMAs are
// the same 8-lane ones); with -march=native on an AVX-512 CPU a tile covers the 32 columns with
// half the instructions, which callgrind cannot show.
//
// Each element of a product is one FMA chain over k in order (head_tile), so results differ from
// OpenBLAS's in the last bits, and are the same for every thread budget (the products run on the
// calling thread).
#include <cstddef>

#include "head_gemm.hpp"

namespace seqlab::detail {

/// Whether the steps of a batch of B rows run in the transposed form: B fills at least half of
/// one tile's kHeadNR columns (below that, the padding columns would be most of the work), and
/// xsimd has a SIMD architecture.
inline bool use_transposed_steps(std::size_t B) {
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  return 2 * B >= kHeadNR;
#else
  (void)B;
  return false;
#endif
}

/// dst[c·ldd + r] = src[r·lds + c] for r < R, c < C (8 x 8 blocks through registers with AVX).
inline void transpose_to(const float* src, std::size_t lds, std::size_t R, std::size_t C, float* dst,
                         std::size_t ldd) {
  std::size_t r = 0;
#if defined(__AVX__)
  for (; r + 8 <= R; r += 8) {
    std::size_t c = 0;
    for (; c + 8 <= C; c += 8) transpose_8x8(src + r * lds + c, lds, dst + c * ldd + r, ldd);
    for (; c < C; ++c)
      for (std::size_t q = 0; q < 8; ++q) dst[c * ldd + r + q] = src[(r + q) * lds + c];
  }
#endif
  for (; r < R; ++r)
    for (std::size_t c = 0; c < C; ++c) dst[c * ldd + r] = src[r * lds + c];
}

/// acc[c·lda + r] += src[r·lds + c] for r < R, c < C.
inline void add_transposed(const float* src, std::size_t lds, std::size_t R, std::size_t C, float* acc,
                           std::size_t lda) {
  std::size_t c = 0;
#if defined(__AVX__)
  alignas(32) float block[64];
  for (; c + 8 <= C; c += 8) {
    std::size_t r = 0;
    for (; r + 8 <= R; r += 8) {
      transpose_8x8(src + r * lds + c, lds, block, 8);  // block[q·8 + p] = src[(r + p)·lds + c + q]
      for (std::size_t q = 0; q < 8; ++q) {
        float* a = acc + (c + q) * lda + r;
        _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a), _mm256_load_ps(block + 8 * q)));
      }
    }
    for (; r < R; ++r)
      for (std::size_t q = 0; q < 8; ++q) acc[(c + q) * lda + r] += src[r * lds + c + q];
  }
#endif
  for (; c < C; ++c)
    for (std::size_t r = 0; r < R; ++r) acc[c * lda + r] += src[r * lds + c];
}

/// CT[G, w] = op(W)[G, H] · ST[H, w] + beta · CT, with op(W) = W (stored [G, H], trans_w false) or
/// Wᵀ (W stored [H, G], trans_w true); w a multiple of kHeadNR (whole tiles), ST and CT rows of
/// stride w. Only when use_transposed_steps() holds for the batch (a SIMD architecture).
inline void step_product(bool trans_w, std::size_t G, std::size_t H, std::size_t w, const float* W,
                         const float* ST, float beta, float* CT) {
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  if (trans_w) head_gemm_rows<true>(G, w, H, 1.0f, W, G, ST, beta, CT, w);
  else head_gemm_rows<false>(G, w, H, 1.0f, W, H, ST, beta, CT, w);
#else
  gemm(trans_w, false, G, w, H, 1.0f, W, trans_w ? G : H, ST, w, beta, CT, w);
#endif
}

}  // namespace seqlab::detail

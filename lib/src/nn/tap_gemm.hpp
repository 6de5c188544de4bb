#pragma once
// A convolution of few channels as one product over its taps, with the input read in place: for
// output rows i < M,
//   C[i, n] = Σ_{j < taps} Σ_{c < inner} A[i·lda + j·tap_stride + c] · panel[(j·inner + c)·w + n]
// (+ beta · C[i, n]), i.e. an im2col GEMM whose unfolded row i, column j·inner + c, is read from
// A at row i shifted by tap j (tap_stride = dilation · lda) instead of from a copy. Internal header
// of conv1d.cpp.
//
// Why: for the channel counts of a small TCN (10-16) the im2col copy writes kernel_size floats per
// input float and costs about as much as the product (long_range_recall's TCN cell: Conv1d::unfold
// 17 % of an update, the narrow product's tiles 37 %). The tiles are head_gemm's (head_gemm.hpp:
// 6 rows by two SIMD registers, op(B) packed into a panel, each output one FMA chain over
// (j, c) in order), with the K loop split into taps.
#include <cstddef>

#include "head_gemm.hpp"

namespace seqlab::detail {

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
/// One tile of MR rows: C[r, n] = Σ_j Σ_c A[r·lda + j·tap_stride + c] · panel[(j·inner + c)·w + n]
/// (+ beta · C[r, n]) for r < MR, n < ncols <= 2·V::size.
template <std::size_t MR, class V>
inline void tap_tile(std::size_t taps, std::size_t inner, std::ptrdiff_t tap_stride, const float* A,
                     std::size_t lda, const float* panel, std::size_t w, float beta, float* C, std::size_t ldc,
                     std::size_t ncols) {
  constexpr std::size_t L = V::size;
  V acc0[MR], acc1[MR];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r) {
    acc0[r] = V(0.0f);
    acc1[r] = V(0.0f);
  }
  for (std::size_t j = 0; j < taps; ++j) {
    const float* Aj = A + static_cast<std::ptrdiff_t>(j) * tap_stride;
    const float* pj = panel + j * inner * w;
    for (std::size_t c = 0; c < inner; ++c) {
      const float* pk = pj + c * w;
      const V b0 = V::load_unaligned(pk);
      const V b1 = V::load_unaligned(pk + L);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < MR; ++r) {
        const V a(Aj[r * lda + c]);
        acc0[r] = xsimd::fma(a, b0, acc0[r]);
        acc1[r] = xsimd::fma(a, b1, acc1[r]);
      }
    }
  }
  head_tile_store<MR, V>(acc0, acc1, 1.0f, beta, C, ldc, ncols);
}

/// C[M, N] = the tap product above (+ beta · C) for N <= 2·V::size columns; `panel` is
/// [taps·inner, w] with w = head_panel_width(N, 2·V::size) (pack_head_panel). beta = 0 does not
/// read C. A's rows up to (M − 1)·lda + (taps − 1)·tap_stride + inner must be readable.
template <class V>
inline void tap_gemm_rows(std::size_t M, std::size_t N, std::size_t taps, std::size_t inner,
                          std::ptrdiff_t tap_stride, const float* A, std::size_t lda, const float* panel, float beta,
                          float* C, std::size_t ldc) {
  const std::size_t w = head_panel_width(N, 2 * V::size);
  std::size_t mr = 0;
  for (std::size_t i = 0; i < M; i += mr) {
    const float* Ai = A + i * lda;
    float* Ci = C + i * ldc;
    mr = head_tile_rows(M - i);
    switch (mr) {
      case 6: tap_tile<6, V>(taps, inner, tap_stride, Ai, lda, panel, w, beta, Ci, ldc, N); break;
      case 5: tap_tile<5, V>(taps, inner, tap_stride, Ai, lda, panel, w, beta, Ci, ldc, N); break;
      case 4: tap_tile<4, V>(taps, inner, tap_stride, Ai, lda, panel, w, beta, Ci, ldc, N); break;
      case 3: tap_tile<3, V>(taps, inner, tap_stride, Ai, lda, panel, w, beta, Ci, ldc, N); break;
      case 2: tap_tile<2, V>(taps, inner, tap_stride, Ai, lda, panel, w, beta, Ci, ldc, N); break;
      default: tap_tile<1, V>(taps, inner, tap_stride, Ai, lda, panel, w, beta, Ci, ldc, N); break;
    }
  }
}
#endif

}  // namespace seqlab::detail

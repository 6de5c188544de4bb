#pragma once
// Products with a narrow side: at most kNarrowWidth (16) output columns, or an inner dimension or
// output rows that few (the channels of a small TCN, the classes of an output head), with the
// other sides long (all B·T rows). Internal header of conv1d.cpp, linear.cpp and row_kernels.hpp.
//
// Why not OpenBLAS here: OpenBLAS 0.3.21 (its Haswell/Zen kernels, AVX2, on the AMD EPYC VM) packs
// the long operand on every call and tiles the narrow side in 4s of a 16 x 4 kernel, and for an
// inner dimension of ~10 every output element costs a load and a store for ~10 FMAs. In
// long_range_recall's TCN cell (11 channels, kernel 8) its packing was 16 % of all instructions
// and its kernel ran 3.2 instructions per 8-lane FMA (callgrind). head_gemm's tiles
// (head_gemm.hpp) read the long op(A) in place, pack only op(B) (in blocks of kHeadKC x kHeadNC),
// and write each output once (beta = 0 does not read it).
//
// The tiles use 8-lane batches (6 x 16) even where AVX-512 is available: a 16-lane tile is 32
// columns wide, and for 10 or 11 columns most of its lanes would be padding (on Zen 4 a 16-lane
// FMA also takes the issue slots of two 8-lane ones).
//
// Each output element is one FMA chain over k in order (within a K block of kHeadKC, blocks added
// in order), whatever the tile or thread: a product split by rows over threads gives the same bits
// as the whole, and results differ from OpenBLAS's in the last bits.
#include <cstddef>
#include <vector>

#include "head_gemm.hpp"
#include "seqlab/core/gemm.hpp"

namespace seqlab::detail {

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
#if XSIMD_WITH_FMA3_AVX2
using NarrowBatch = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
#else
using NarrowBatch = HeadBatch;
#endif
/// The narrow side's limit: one tile of columns (16 with AVX2; 8 with SSE only).
constexpr std::size_t kNarrowWidth = 2 * NarrowBatch::size;
#else
constexpr std::size_t kNarrowWidth = 0;  // no SIMD: every product goes to gemm
#endif

/// C[M, N] = op(A) · op(B) + beta · C with gemm's arguments (core/gemm.hpp; alpha 1) through
/// head_gemm's tiles with NarrowBatch (gemm without a SIMD architecture). The caller decides
/// that the product is narrow. `panel`: the caller's per-thread scratch (resized). Throws nothing
/// but std::bad_alloc.
inline void narrow_gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                        const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                        std::size_t ldc, std::vector<float>& panel) {
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  head_gemm_as<NarrowBatch>(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, panel);
#else
  (void)panel;
  gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
#endif
}

}  // namespace seqlab::detail

#pragma once
// One GEMM wrapper over OpenBLAS's cblas_sgemm (declared by xtensor-blas; never include
// OpenBLAS's cblas.h beside it). Every matrix product in seqlab goes through here, except the
// per-head products of MultiheadAttention, which have their own small-matrix kernel
// (lib/src/nn/head_gemm.hpp).
#include <cstddef>

#include "seqlab/core/tensor.hpp"
#include "seqlab/core/threads.hpp"

namespace seqlab {

/// Row-major C[M, N] = alpha * op(A)[M, K] · op(B)[K, N] + beta * C.
/// op(A) = A (A stored [M, K], lda >= K) or Aᵀ (A stored [K, M], lda >= M); same for B.
/// beta = 1 accumulates into C (used for parameter gradients, which are added).
/// Pointers must not alias C. M, N or K of 0 is allowed (a no-op apart from scaling C by beta).
/// Throws std::length_error if an extent or leading dimension exceeds 2^31 - 1 (CBLAS's int).
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
          const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
          std::size_t ldc);

/// Parts into which for_gemm_rows splits the rows of a GEMM [M, K] x [K, N]: seqlab's thread
/// budget (num_threads(), core/threads.hpp) when the product has at least kSplitGemmMacs
/// multiply-adds, at most one part per kSplitGemmRowBlock rows; 1 when OpenBLAS is at one thread
/// (inside a BlasThreadsScope(1): a head loop's or another split's thread, so splits never nest).
std::size_t gemm_row_parts(std::size_t M, std::size_t N, std::size_t K);
/// About 0.1 ms of one core's SGEMM (80-100 GFLOP/s), a few times the cost of starting a thread.
inline constexpr double kSplitGemmMacs = 4.0 * 1024 * 1024;
/// Row granularity of the split: a multiple of the row tile of OpenBLAS's SGEMM kernels (12 rows
/// on this machine's Zen kernel, measured; 4, 8 or 16 on other x86 kernels), so that every row
/// keeps its place in a tile.
inline constexpr std::size_t kSplitGemmRowBlock = 48;

/// Runs body(r0, r1) over the rows [0, M) of a GEMM's output in gemm_row_parts(M, N, K)
/// contiguous ranges, each on its own thread (parallel_ranges) with OpenBLAS at one thread
/// (BlasThreadsScope): every core runs one single-threaded GEMM, and OpenBLAS's own worker threads
/// are not woken (after a multi-threaded call they spin in sched_yield for about 0.1 s and take
/// cycles from seqlab's threads). With one part, a plain call body(0, M), and with a thread budget
/// above 1 that call too runs with OpenBLAS at one thread: a GEMM too small to split is not worth
/// waking OpenBLAS's workers for (they would then spin beside seqlab's next parallel loops). body
/// computes rows [r0, r1) of C (and may do row-wise work around it, e.g. fill bias rows first).
/// Range boundaries fall on multiples of kSplitGemmRowBlock rows, so every row keeps its place in
/// OpenBLAS's row tiles and the split gives the same bits as the whole product (a boundary inside
/// a tile moves its rows into a tail tile, whose kernel rounds differently: measured, and checked
/// in tests/unit/test_core.cpp on the machine that runs them; another OpenBLAS kernel whose row
/// tile does not divide 48 would round the rows at a boundary differently). Measured:
/// experiments/bench/README.md.
template <class Body>
void for_gemm_rows(std::size_t M, std::size_t N, std::size_t K, Body&& body) {
  const std::size_t parts = gemm_row_parts(M, N, K);
  if (parts <= 1) {
    if (num_threads() > 1 && blas_threads() > 1) {
      BlasThreadsScope one(1);
      body(std::size_t{0}, M);
    } else {
      body(std::size_t{0}, M);
    }
    return;
  }
  BlasThreadsScope one(1);
  const std::size_t blocks = (M + kSplitGemmRowBlock - 1) / kSplitGemmRowBlock;
  parallel_ranges(blocks, parts, [&](std::size_t b0, std::size_t b1, std::size_t) {
    body(b0 * kSplitGemmRowBlock, std::min(M, b1 * kSplitGemmRowBlock));
  });
}

/// gemm with the rows of C split as for_gemm_rows (same arguments, same result bits).
void gemm_split_rows(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                     float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
                     float beta, float* C, std::size_t ldc);

/// Columns per part of gemm_split's column split (a multiple of OpenBLAS's column tiles).
inline constexpr std::size_t kSplitGemmColBlock = 64;

/// Parts into which gemm_split cuts the columns of C when its rows cannot be split
/// (gemm_row_parts(M, N, K) = 1): the thread budget for a product of at least kSplitGemmMacs
/// multiply-adds, at most one part per kSplitGemmColBlock columns; 1 otherwise, and 1 whenever
/// the rows are split or OpenBLAS is at one thread.
std::size_t gemm_col_parts(std::size_t M, std::size_t N, std::size_t K);

/// gemm on the thread budget, for products whose C has few rows (weight gradients dW = dYᵀ X,
/// [out, in] with out as small as 64) as well as many: the rows of C split as gemm_split_rows
/// when gemm_row_parts allows it (the whole product's bits), else its columns in
/// gemm_col_parts(M, N, K) ranges cut at multiples of kSplitGemmColBlock, one single-threaded
/// OpenBLAS call per thread, else one call with OpenBLAS at one thread (budget above 1) or at its
/// count (budget 1). The column split changes the last bits against the unsplit product (OpenBLAS
/// rounds a column differently at a cut, measured: experiments/bench/README.md); for one thread
/// budget the result is the same on every call. Same arguments as gemm.
void gemm_split(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
                const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                std::size_t ldc);

/// Tensor form: C = alpha * op(A) · op(B) + beta * C for contiguous 2-D tensors.
/// C must already have shape [M, N]. Throws ShapeError if the inner or outer extents disagree.
void gemm(const Tensor2& A, bool trans_a, const Tensor2& B, bool trans_b, Tensor2& C,
          float alpha = 1.0f, float beta = 0.0f);

/// Strided batched GEMM: for b in [0, batch): C_b = alpha * op(A_b) · op(B_b) + beta * C_b, with
/// A_b = A + b * stride_a (and so on). For attention: scores [B*heads, Tq, Tk] = Q · Kᵀ.
void gemm_strided_batched(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                          float alpha, const float* A, std::size_t lda, std::size_t stride_a,
                          const float* B, std::size_t ldb, std::size_t stride_b, float beta,
                          float* C, std::size_t ldc, std::size_t stride_c, std::size_t batch);

}  // namespace seqlab

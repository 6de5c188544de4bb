#include "seqlab/core/gemm.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include <xtensor-blas/xblas.hpp>  // declares cblas_sgemm (xflens/cxxblas/drivers/cblas.h)

namespace seqlab {

void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
          const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
          std::size_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // BLAS would only scale C; do it explicitly so beta = 0 also clears NaNs.
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  // CBLAS takes int extents: refuse what would silently truncate.
  for (std::size_t v : {M, N, K, lda, ldb, ldc}) {
    if (v > static_cast<std::size_t>(INT_MAX))
      throw std::length_error("gemm: extent " + std::to_string(v) +
                              " exceeds the BLAS limit of 2^31 - 1 (M, N, K and leading dimensions)");
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

std::size_t gemm_row_parts(std::size_t M, std::size_t N, std::size_t K) {
  const auto budget = static_cast<std::size_t>(std::max(1, num_threads()));
  if (budget <= 1 || blas_threads() <= 1) return 1;  // no nested split inside a one-thread scope
  if (static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < kSplitGemmMacs) return 1;
  return std::max<std::size_t>(1, std::min(budget, M / kSplitGemmRowBlock));  // <= row blocks
}

void gemm_split_rows(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                     float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
                     float beta, float* C, std::size_t ldc) {
  for_gemm_rows(M, N, K, [&](std::size_t r0, std::size_t r1) {
    // Rows r0.. of op(A): rows of A, or columns of A when it is stored transposed ([K, M]).
    const float* Ar = trans_a ? A + r0 : A + r0 * lda;
    gemm(trans_a, trans_b, r1 - r0, N, K, alpha, Ar, lda, B, ldb, beta, C + r0 * ldc, ldc);
  });
}

std::size_t gemm_col_parts(std::size_t M, std::size_t N, std::size_t K) {
  const auto budget = static_cast<std::size_t>(std::max(1, num_threads()));
  if (budget <= 1 || blas_threads() <= 1 || gemm_row_parts(M, N, K) > 1) return 1;
  if (static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < kSplitGemmMacs) return 1;
  return std::max<std::size_t>(1, std::min(budget, N / kSplitGemmColBlock));  // <= column blocks
}

void gemm_split(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
                const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                std::size_t ldc) {
  const std::size_t col_parts = gemm_col_parts(M, N, K);
  if (col_parts <= 1) {  // rows split, or one call (OpenBLAS at one thread under a budget > 1)
    gemm_split_rows(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  BlasThreadsScope one(1);
  const std::size_t blocks = (N + kSplitGemmColBlock - 1) / kSplitGemmColBlock;
  parallel_ranges(blocks, col_parts, [&](std::size_t b0, std::size_t b1, std::size_t) {
    const std::size_t c0 = b0 * kSplitGemmColBlock, c1 = std::min(N, b1 * kSplitGemmColBlock);
    // Columns c0.. of op(B): columns of B, or rows of B when it is stored transposed ([N, K]).
    const float* Bc = trans_b ? B + c0 * ldb : B + c0;
    gemm(trans_a, trans_b, M, c1 - c0, K, alpha, A, lda, Bc, ldb, beta, C + c0, ldc);
  });
}

void gemm(const Tensor2& A, bool trans_a, const Tensor2& B, bool trans_b, Tensor2& C, float alpha,
          float beta) {
  const std::size_t M = trans_a ? A.shape()[1] : A.shape()[0];
  const std::size_t K = trans_a ? A.shape()[0] : A.shape()[1];
  const std::size_t Kb = trans_b ? B.shape()[1] : B.shape()[0];
  const std::size_t N = trans_b ? B.shape()[0] : B.shape()[1];
  if (K != Kb) {
    throw ShapeError("gemm: inner extents differ: op(A) is " + shape_string(std::array<std::size_t, 2>{M, K}) +
                     ", op(B) is " + shape_string(std::array<std::size_t, 2>{Kb, N}));
  }
  if (C.shape()[0] != M || C.shape()[1] != N) {
    throw ShapeError("gemm: C must have shape " + shape_string(std::array<std::size_t, 2>{M, N}) +
                     ", got " + shape_string(C.shape()));
  }
  gemm(trans_a, trans_b, M, N, K, alpha, A.data(), A.shape()[1], B.data(), B.shape()[1], beta,
       C.data(), N);
}

void gemm_strided_batched(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                          float alpha, const float* A, std::size_t lda, std::size_t stride_a,
                          const float* B, std::size_t ldb, std::size_t stride_b, float beta,
                          float* C, std::size_t ldc, std::size_t stride_c, std::size_t batch) {
  for (std::size_t b = 0; b < batch; ++b) {
    gemm(trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
         C + b * stride_c, ldc);
  }
}

}  // namespace seqlab

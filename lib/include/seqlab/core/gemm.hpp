#pragma once
// One GEMM wrapper over OpenBLAS's cblas_sgemm (declared by xtensor-blas; never include
// OpenBLAS's cblas.h beside it). Every matrix product in seqlab goes through here.
#include <cstddef>

#include "seqlab/core/tensor.hpp"

namespace seqlab {

/// Row-major C[M, N] = alpha * op(A)[M, K] · op(B)[K, N] + beta * C.
/// op(A) = A (A stored [M, K], lda >= K) or Aᵀ (A stored [K, M], lda >= M); same for B.
/// beta = 1 accumulates into C (used for parameter gradients, which are added).
/// Pointers must not alias C. M, N or K of 0 is allowed (a no-op apart from scaling C by beta).
/// Throws std::length_error if an extent or leading dimension exceeds 2^31 - 1 (CBLAS's int).
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
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

// MultiheadAttention's per-head kernel (lib/src/nn/head_gemm.hpp, an internal header) against a
// double-precision reference: every transpose pair, shapes whose rows and columns leave partial
// tiles (M mod 6, N mod 16), strided operands and outputs (the heads' layout in the projection),
// alpha, beta = 0 (C not read: NaN there stays out) and beta = 1 (accumulate), K = 0, empty
// products, and the blocking over K and N of long sequences.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "../../lib/src/nn/head_gemm.hpp"
#include "seqlab/core/rng.hpp"

using namespace seqlab;

namespace {

struct Case {
  std::size_t M, N, K;
};

// Row-major op(A)[i, k] for A stored with leading dimension ld.
float at(const std::vector<float>& A, bool trans, std::size_t ld, std::size_t i, std::size_t k) {
  return trans ? A[k * ld + i] : A[i * ld + k];
}

}  // namespace

TEST_CASE("head_gemm matches a double reference for every transpose, tile remainder and beta", "[nn][attention][gemm]") {
  Rng rng(11);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // One panel for all cases, as each head thread reuses its own: a smaller product after a larger
  // one must not read the larger one's leftovers. {13, 300, 520} blocks over K and N
  // (kHeadKC = 256, kHeadNC = 128) with partial blocks of both.
  std::vector<float> panel;
  for (const Case c : {Case{25, 17, 0}, Case{128, 128, 32}, Case{13, 300, 520}, Case{128, 32, 128}, Case{7, 5, 3},
                       Case{13, 37, 19}, Case{6, 16, 1}, Case{1, 1, 1}, Case{64, 48, 24}, Case{0, 5, 3},
                       Case{4, 0, 3}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (float beta : {0.0f, 1.0f}) {
          CAPTURE(c.M, c.N, c.K, ta, tb, beta);
          // Leading dimensions wider than the rows (padding columns), as the heads' strides are.
          const std::size_t lda = (ta ? c.M : c.K) + 3, ldb = (tb ? c.K : c.N) + 5, ldc = c.N + 2;
          std::vector<float> A((ta ? c.K : c.M) * lda + 1), B((tb ? c.N : c.K) * ldb + 1);
          for (float& v : A) v = rng.uniform() * 2.0f - 1.0f;
          for (float& v : B) v = rng.uniform() * 2.0f - 1.0f;
          std::vector<float> C(c.M * ldc, nan);
          for (std::size_t i = 0; i < c.M; ++i)
            for (std::size_t j = 0; j < c.N; ++j) C[i * ldc + j] = beta == 0.0f ? nan : rng.uniform();
          const std::vector<float> C0 = C;
          const float alpha = 0.75f;
          detail::head_gemm(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, panel);
          std::size_t bad = 0;
          for (std::size_t i = 0; i < c.M; ++i) {
            for (std::size_t j = 0; j < c.N; ++j) {
              double ref = 0.0, mag = 0.0;
              for (std::size_t k = 0; k < c.K; ++k) {
                const double p = static_cast<double>(at(A, ta, lda, i, k)) * at(B, tb, ldb, k, j);
                ref += p;
                mag += std::abs(p);
              }
              ref = alpha * ref + (beta == 0.0f ? 0.0 : beta * static_cast<double>(C0[i * ldc + j]));
              const double tol = 1e-6 * (alpha * mag + 1.0);
              if (!(std::abs(C[i * ldc + j] - ref) <= tol)) ++bad;
            }
            for (std::size_t j = c.N; j < ldc; ++j) bad += !std::isnan(C[i * ldc + j]);  // padding untouched
          }
          CHECK(bad == 0);
        }
      }
    }
  }
}

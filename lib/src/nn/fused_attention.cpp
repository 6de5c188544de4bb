#include "fused_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "head_gemm.hpp"
#include "seqlab/core/gemm.hpp"

namespace seqlab::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
using FBatch = xsimd::batch<float>;
constexpr std::size_t kLanes = FBatch::size;
#endif

/// C[M, N] = alpha · op(A)[M, K] · panel[K, N] + beta · C, op(A) = A (stored [M, K]) or Aᵀ (TA,
/// stored [K, M]), with the panel already in head_gemm's layout (rows of head_panel_width(N)
/// floats): head_gemm's tiles without the packing step. Without a SIMD architecture, gemm on the
/// panel as a row-major matrix.
template <bool TA>
void panel_gemm(std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A, std::size_t lda,
                const float* panel, float beta, float* C, std::size_t ldc) {
  if (M == 0 || N == 0) return;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  head_gemm_rows<TA>(M, N, K, alpha, A, lda, panel, beta, C, ldc);
#else
  gemm(TA, false, M, N, K, alpha, A, lda, panel, head_panel_width(N), beta, C, ldc);
#endif
}

/// Number of keys query row i may see under the causal mask: keys j < Tk with
/// k_off + j <= q_off + i (as attention.cpp's causal_limit).
std::size_t visible_keys(std::size_t i, std::size_t Tk, std::size_t q_off, std::size_t k_off) {
  const std::size_t pos_q = q_off + i;
  if (pos_q + 1 <= k_off) return 0;
  return std::min(Tk, pos_q + 1 - k_off);
}

/// True if every key in [c0, c0 + nc) is padding.
bool all_padded(const std::uint8_t* key_padded, std::size_t c0, std::size_t nc) {
  if (key_padded == nullptr) return false;
  for (std::size_t c = c0; c < c0 + nc; ++c)
    if (key_padded[c] == 0) return false;
  return true;
}

/// True if some key in [c0, c0 + nc) is padding.
bool any_padded(const std::uint8_t* key_padded, std::size_t c0, std::size_t nc) {
  if (key_padded == nullptr) return false;
  for (std::size_t c = c0; c < c0 + nc; ++c)
    if (key_padded[c] != 0) return true;
  return false;
}

/// ALiBi bias magnitude slope·|pos_q − pos_k| as the materialised path computes it (distances are
/// integers, exact in float below 2^24).
float alibi_term(float slope, std::size_t pos_q, std::size_t pos_k) {
  const std::size_t d = pos_q > pos_k ? pos_q - pos_k : pos_k - pos_q;
  return slope * static_cast<float>(d);
}

/// acc[c] = max(acc[c], x[c]) for c < n.
void max_into(float* acc, const float* x, std::size_t n) {
  for (std::size_t c = 0; c < n; ++c) acc[c] = x[c] > acc[c] ? x[c] : acc[c];
}

/// x[c] <- exp(x[c] − shift[c]) and sum[c] += x[c] for c < n (exp(−∞) = 0).
void exp_sub_accumulate(float* x, const float* shift, float* sum, std::size_t n) {
  std::size_t c = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  for (; c + kLanes <= n; c += kLanes) {
    const FBatch e = xsimd::exp(FBatch::load_unaligned(x + c) - FBatch::load_unaligned(shift + c));
    e.store_unaligned(x + c);
    (FBatch::load_unaligned(sum + c) + e).store_unaligned(sum + c);
  }
#endif
  for (; c < n; ++c) {
    x[c] = std::exp(x[c] - shift[c]);
    sum[c] += x[c];
  }
}

/// One row of a backward tile, in one pass: p[c] <- exp(p[c] − L) (p holds the scores, masked
/// entries −∞) and g[c] <- p[c]·(g[c] − D) (g holds dP) for c < n; p[c] = g[c] = 0 for
/// n <= c < nc (causally masked).
void probs_and_score_grads(float* p, float* g, float L, float D, std::size_t n, std::size_t nc) {
  std::size_t c = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  const FBatch bl(L), bd(D);
  for (; c + kLanes <= n; c += kLanes) {
    const FBatch e = xsimd::exp(FBatch::load_unaligned(p + c) - bl);
    e.store_unaligned(p + c);
    (e * (FBatch::load_unaligned(g + c) - bd)).store_unaligned(g + c);
  }
#endif
  for (; c < n; ++c) {
    p[c] = std::exp(p[c] - L);
    g[c] = p[c] * (g[c] - D);
  }
  std::fill(p + n, p + nc, 0.0f);
  std::fill(g + n, g + nc, 0.0f);
}

/// x[c] <- exp(x[c]) for c < n.
void exp_inplace(float* x, std::size_t n) {
  std::size_t c = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  for (; c + kLanes <= n; c += kLanes) xsimd::exp(FBatch::load_unaligned(x + c)).store_unaligned(x + c);
#endif
  for (; c < n; ++c) x[c] = std::exp(x[c]);
}

/// dst[c·ldd + e] = alpha · src[e·lds + c] for e < rows, c < cols (a [rows, cols] block written
/// transposed), or added onto dst when `add`.
void write_transposed(const float* src, std::size_t lds, std::size_t rows, std::size_t cols, float alpha,
                      float* dst, std::size_t ldd, bool add) {
  for (std::size_t c = 0; c < cols; ++c) {
    float* d = dst + c * ldd;
    if (add) {
      for (std::size_t e = 0; e < rows; ++e) d[e] += alpha * src[e * lds + c];
    } else {
      for (std::size_t e = 0; e < rows; ++e) d[e] = alpha * src[e * lds + c];
    }
  }
}

void ensure(std::vector<float>& v, std::size_t n) {
  if (v.size() < n) v.resize(n, 0.0f);
}

}  // namespace

std::size_t fused_forward_head(const FusedHead& h, float* o, std::size_t ldo, float* lse, FusedScratch& s) {
  const std::size_t Tq = h.Tq, Tk = h.Tk, dk = h.dk;
  const std::size_t wmax = head_panel_width(kFusedBr);
  ensure(s.tile, kFusedBc * wmax);
  ensure(s.acc_a, dk * wmax);
  for (std::vector<float>* v : {&s.m, &s.l, &s.colmax, &s.shift, &s.alpha}) ensure(*v, wmax);
  float* S = s.tile.data();   // S_IJᵀ [nc, w], then P̃ᵀ in place
  float* Ot = s.acc_a.data();  // Õᵀ [d_k, w]
  float *m = s.m.data(), *l = s.l.data(), *cm = s.colmax.data(), *mu = s.shift.data(), *al = s.alpha.data();
  std::size_t entries = 0;

  for (std::size_t r0 = 0; r0 < Tq; r0 += kFusedBr) {
    const std::size_t nr = std::min(kFusedBr, Tq - r0), w = head_panel_width(nr);
    const std::size_t pq0 = h.q_offset + r0;  // position of the tile's first query
    // Keys any query of the tile may see: [0, kend) (causal: those of its last query).
    const std::size_t kend = h.causal ? visible_keys(r0 + nr - 1, Tk, h.q_offset, h.k_offset) : Tk;
    std::fill(m, m + nr, kNegInf);
    std::fill(l, l + nr, 0.0f);
    pack_head_panel(true, dk, nr, h.q + r0 * h.ldq, h.ldq, s.panel_a);  // Q_Iᵀ [d_k, w]
    bool first = true;
    for (std::size_t c0 = 0; c0 < kend; c0 += kFusedBc) {
      const std::size_t nc = std::min(kFusedBc, kend - c0);
      if (all_padded(h.key_padded, c0, nc)) continue;  // contributes exp(−∞) = 0 everywhere
      entries += nr * nc;
      // S_IJᵀ = K_J Q_Iᵀ / √d_k: [nc, d_k] x [d_k, nr].
      panel_gemm<false>(nc, nr, dk, h.scale, h.k + c0 * h.ldk, h.ldk, s.panel_a.data(), 0.0f, S, w);
      // Masks and ALiBi, one key (row) at a time; masked entries −∞.
      for (std::size_t rr = 0; rr < nc; ++rr) {
        float* row = S + rr * w;
        const std::size_t pk = h.k_offset + c0 + rr;
        if (h.key_padded && h.key_padded[c0 + rr]) {
          std::fill(row, row + nr, kNegInf);
          continue;
        }
        // Queries before `f` may not see this key (causal: pos_q < pos_k).
        const std::size_t f = h.causal && pk > pq0 ? std::min(nr, pk - pq0) : 0;
        std::fill(row, row + f, kNegInf);
        if (h.alibi)
          for (std::size_t cc = f; cc < nr; ++cc) row[cc] -= alibi_term(h.slope, pq0 + cc, pk);
      }
      // Online softmax per query (column): m_new = max(m, colmax S), shift = m_new (0 while the
      // query has seen no visible key, so exp(−∞ − shift) = 0 and never NaN), α = exp(m − shift).
      std::fill(cm, cm + nr, kNegInf);
      for (std::size_t rr = 0; rr < nc; ++rr) max_into(cm, S + rr * w, nr);
      for (std::size_t cc = 0; cc < nr; ++cc) {
        const float mn = std::max(m[cc], cm[cc]);
        mu[cc] = mn == kNegInf ? 0.0f : mn;
        al[cc] = m[cc] - mu[cc];  // exp below; m = −∞ gives α = 0
        m[cc] = mn;
      }
      exp_inplace(al, nr);
      for (std::size_t cc = 0; cc < nr; ++cc) l[cc] *= al[cc];
      for (std::size_t rr = 0; rr < nc; ++rr) exp_sub_accumulate(S + rr * w, mu, l, nr);  // P̃ᵀ, ℓ += colsum
      // Õᵀ = α ∘ Õᵀ + V_Jᵀ P̃ᵀ: [d_k, nc] x [nc, nr]; P̃ᵀ is the panel as it stands.
      if (!first)
        for (std::size_t e = 0; e < dk; ++e) {
          float* orow = Ot + e * w;
          for (std::size_t cc = 0; cc < nr; ++cc) orow[cc] *= al[cc];
        }
      panel_gemm<true>(dk, nr, nc, 1.0f, h.v + c0 * h.ldv, h.ldv, S, first ? 0.0f : 1.0f, Ot, w);
      first = false;
    }
    // O_I = Õ / ℓ, L_I = m + log ℓ; a query that saw no key (ℓ = 0): O = 0, L = +∞.
    for (std::size_t cc = 0; cc < nr; ++cc) {
      float* orow = o + (r0 + cc) * ldo;
      if (l[cc] > 0.0f) {
        const float inv = 1.0f / l[cc];
        for (std::size_t e = 0; e < dk; ++e) orow[e] = Ot[e * w + cc] * inv;
        lse[r0 + cc] = m[cc] + std::log(l[cc]);
      } else {
        std::fill(orow, orow + dk, 0.0f);
        lse[r0 + cc] = kPosInf;
      }
    }
  }
  return entries;
}

void fused_backward_head(const FusedHead& h, const float* o, std::size_t ldo, const float* do_, std::size_t lddo,
                         const float* lse, float* dq, std::size_t lddq, float* dk, std::size_t lddk, bool dk_adds,
                         float* dv, std::size_t lddv, FusedScratch& s) {
  const std::size_t Tq = h.Tq, Tk = h.Tk, d = h.dk;
  const std::size_t wmax = head_panel_width(kFusedBc);
  ensure(s.tile, kFusedBr * wmax);
  ensure(s.tile2, kFusedBr * wmax);
  ensure(s.acc_a, d * wmax);
  ensure(s.acc_b, d * wmax);
  ensure(s.delta, Tq);
  float* P = s.tile.data();    // S_IJ [nr, w], then P_IJ in place
  float* G = s.tile2.data();   // dP_IJ [nr, w], then dS_IJ in place
  float* dVt = s.acc_a.data();  // dV_Jᵀ [d_k, w]
  float* dKt = s.acc_b.data();  // dK_Jᵀ (without 1/√d_k) [d_k, w]
  float* D = s.delta.data();
  // dQ as dQ_I += dS K_J (d_k wide) when d_k fills at least 7/8 of its tiles' columns, else
  // transposed, dQ_Iᵀ += K_Jᵀ dS_IJᵀ, into dQᵀ [d_k, w(Tq)] of the whole head (fused_attention.hpp).
  const bool dq_direct = head_panel_width(d) * 7 <= d * 8;
  const std::size_t tq_w = head_panel_width(Tq);
  s.acc_q.assign(dq_direct ? 0 : d * tq_w, 0.0f);
  float* dQt = s.acc_q.data();

  // D_i = rowsum(dO ∘ O)_i = rowsum(dP ∘ P)_i (Dao 2023, Algorithm 2); dq starts at 0
  // (both dQ and, with dk_adds, the dK contributions are added onto it).
  for (std::size_t r = 0; r < Tq; ++r) {
    const float* orow = o + r * ldo;
    const float* grow = do_ + r * lddo;
    float acc = 0.0f;
    for (std::size_t e = 0; e < d; ++e) acc += grow[e] * orow[e];
    D[r] = acc;
    std::fill(dq + r * lddq, dq + r * lddq + d, 0.0f);
  }

  for (std::size_t c0 = 0; c0 < Tk; c0 += kFusedBc) {
    const std::size_t nc = std::min(kFusedBc, Tk - c0), w = head_panel_width(nc);
    const std::size_t pk0 = h.k_offset + c0;
    // First query that may see key c0 (causal: pos_q >= pos_k); the query tiles before it are
    // skipped (the forward skipped the same tiles).
    const std::size_t rfirst = h.causal ? (pk0 > h.q_offset ? pk0 - h.q_offset : 0) : 0;
    std::fill(dVt, dVt + d * w, 0.0f);
    std::fill(dKt, dKt + d * w, 0.0f);
    if (rfirst < Tq && !all_padded(h.key_padded, c0, nc)) {
      const float* Kj = h.k + c0 * h.ldk;
      const float* Vj = h.v + c0 * h.ldv;
      pack_head_panel(true, d, nc, Kj, h.ldk, s.panel_a);   // K_Jᵀ [d_k, w]
      pack_head_panel(true, d, nc, Vj, h.ldv, s.panel_b);   // V_Jᵀ [d_k, w]
      const bool tile_padded = any_padded(h.key_padded, c0, nc);
      if (dq_direct) pack_head_panel(false, nc, d, Kj, h.ldk, s.panel_c);  // K_J [nc, w(d_k)]
      for (std::size_t r0 = rfirst / kFusedBr * kFusedBr; r0 < Tq; r0 += kFusedBr) {
        const std::size_t nr = std::min(kFusedBr, Tq - r0);
        const float* Qi = h.q + r0 * h.ldq;
        const float* dOi = do_ + r0 * lddo;
        // S_IJ = Q_I K_Jᵀ / √d_k and dP_IJ = dO_I V_Jᵀ: [nr, d_k] x [d_k, nc] each; then per row
        // P = exp(S + A − L) with masked entries 0 (L = +∞, no visible key: all 0) and
        // dS = P ∘ (dP − D) in one pass.
        panel_gemm<false>(nr, nc, d, h.scale, Qi, h.ldq, s.panel_a.data(), 0.0f, P, w);
        panel_gemm<false>(nr, nc, d, 1.0f, dOi, lddo, s.panel_b.data(), 0.0f, G, w);
        for (std::size_t r = 0; r < nr; ++r) {
          float* row = P + r * w;
          const std::size_t pq = h.q_offset + r0 + r;
          const std::size_t n = h.causal ? (pq + 1 > pk0 ? std::min(nc, pq + 1 - pk0) : 0) : nc;
          if (h.alibi)
            for (std::size_t c = 0; c < n; ++c) row[c] -= alibi_term(h.slope, pq, pk0 + c);
          if (tile_padded)
            for (std::size_t c = 0; c < n; ++c)
              if (h.key_padded[c0 + c]) row[c] = kNegInf;
          probs_and_score_grads(row, G + r * w, lse[r0 + r], D[r0 + r], n, nc);
        }
        // dV_Jᵀ += dO_Iᵀ P_IJ and dK_Jᵀ += Q_Iᵀ dS_IJ: [d_k, nr] x [nr, nc], P and dS as panels.
        panel_gemm<true>(d, nc, nr, 1.0f, dOi, lddo, P, 1.0f, dVt, w);
        panel_gemm<true>(d, nc, nr, 1.0f, Qi, h.ldq, G, 1.0f, dKt, w);
        // dQ_I += dS_IJ K_J / √d_k ([nr, nc] x [nc, d_k]), or dQ_Iᵀ += K_Jᵀ dS_IJᵀ / √d_k
        // ([d_k, nc] x [nc, nr], dS transposed into a panel) when d_k would leave a tile's
        // columns idle (d_k = 4, AVX2: 9 % fewer instructions in all).
        if (dq_direct) {
          panel_gemm<false>(nr, d, nc, h.scale, G, w, s.panel_c.data(), 1.0f, dq + r0 * lddq, lddq);
        } else {
          pack_head_panel(true, nc, nr, G, w, s.panel_c);  // dS_IJᵀ [nc, w(nr)]
          panel_gemm<true>(d, nr, nc, h.scale, Kj, h.ldk, s.panel_c.data(), 1.0f, dQt + r0, tq_w);
        }
      }
    }
    write_transposed(dVt, w, d, nc, 1.0f, dv + c0 * lddv, lddv, false);
    write_transposed(dKt, w, d, nc, h.scale, dk + c0 * lddk, lddk, dk_adds);
  }
  if (!dq_direct) write_transposed(dQt, tq_w, d, Tq, 1.0f, dq, lddq, true);  // onto 0 (or dK: dk_adds)
}

}  // namespace seqlab::detail

#pragma once
// The fused attention kernel of MultiheadAttention (FlashAttention, Dao et al. 2022, Algorithm 1
// forward / Algorithm 4 backward; the loop order of FlashAttention-2, Dao 2023, Algorithm 1
// forward and Algorithm 2 backward): one head at a time, queries in tiles of kFusedBr rows and
// keys/values in tiles of kFusedBc rows; the [Tq, Tk] score matrix is never stored, only one
// tile of it. Internal header of attention.cpp; the formulas and the memory are documented in
// seqlab/nn/attention.hpp.
//
// Legend: Tq, Tk query and key lengths of the head, d_k head size, Br = kFusedBr, Bc = kFusedBc;
// a tile (I, J) holds the queries I = [r0, r0 + nr) and the keys J = [c0, c0 + nc).
//
// Forward (for each query tile I; FlashAttention-2 Algorithm 1, the key tiles J inner):
//   S_IJ = Q_I K_Jᵀ/√d_k + A_IJ (ALiBi) with masked entries −∞,
//   m_new = max(m, rowmax S_IJ),  P̃ = exp(S_IJ − m_new),  ℓ = e^(m − m_new) ℓ + rowsum P̃,
//   Õ = e^(m − m_new) Õ + P̃ V_J,  m = m_new;   at the end O_I = Õ / ℓ,  L_I = m + log ℓ.
// The tile is held transposed, S_IJᵀ [nc, nr] (a row per key, a column per query), so that both
// of its products have the query tile as their wide side (N = nr, a multiple of head_gemm's
// kHeadNR): S_IJᵀ = K_J Q_Iᵀ (A = K_J read in place, Q_Iᵀ packed once per query tile) and
// Õᵀ += V_Jᵀ P̃ᵀ (A = V_J in place, P̃ᵀ itself is the panel: no packing), and the per-query running
// statistics m, ℓ are vectors over the columns (no horizontal reductions). A query with no
// visible key gets ℓ = 0: O = 0 and L = +∞ (so that exp(S − L) = 0 in the backward).
//
// Backward (for each key tile J; FlashAttention-2 Algorithm 2, the query tiles I inner), with
// D = rowsum(dO ∘ O) per query computed first:
//   P_IJ = exp(S_IJ − L_I) (S recomputed, masks and ALiBi as in the forward),  dP = dO_I V_Jᵀ,
//   dS = P ∘ (dP − D_I),  dV_J += P_IJᵀ dO_I,  dK_J += dS_IJᵀ Q_I /√d_k,  dQ_I += dS_IJ K_J /√d_k.
// Here the tile is held upright, [nr, nc] (nc = Bc wide): S = Q_I K_Jᵀ and dP = dO_I V_Jᵀ use
// panels of K_Jᵀ, V_Jᵀ packed once per key tile; dV_Jᵀ += dO_Iᵀ P and dK_Jᵀ += Q_Iᵀ dS take P and
// dS as their panels directly (accumulated transposed, [d_k, Bc], and written out once per key
// tile); dQ_I += dS K_J accumulates into the caller's dQ rows when d_k fills at least 7/8 of the
// tiles' columns (kHeadNR), otherwise dQ_Iᵀ += K_Jᵀ dS_IJᵀ takes dS transposed into a panel and
// accumulates dQᵀ [d_k, Tq] of the whole head, written out at the end: no product leaves most
// of a tile's columns idle at small head sizes.
//
// Causal tiles: tile (I, J) is computed iff some query of I may see some key of J, i.e.
// k_offset + c0 <= q_offset + r0 + nr − 1 (the same tiles in both passes); only tiles that
// straddle the diagonal apply the mask per entry. Key tiles whose keys are all padding are
// skipped too. Every product goes through head_gemm.hpp's register-blocked tiles.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace seqlab::detail {

/// Queries per tile (the columns of the forward's transposed tile, the rows of the backward's) and
/// keys per tile. Both multiples of head_gemm's kHeadNR (16 floats with AVX2, 32 with AVX-512) so
/// that a whole tile's panels have no padding columns. 64 x 64 floats is 16 KiB per tile buffer;
/// the backward holds two (P and dS) plus its panels and accumulators, about 40 KiB at d_k = 32:
/// L1 (32-48 KiB on current x86 cores) plus the L2's first lines; the head's K and V (Tk x d_k)
/// stay in L2 (1-2 MiB) over the query loop.
constexpr std::size_t kFusedBr = 64;
constexpr std::size_t kFusedBc = 64;

/// One head of one sequence, as the fused kernel reads it. Rows of stride ld (the heads are
/// columns of the projection, or RoPE's contiguous copies).
struct FusedHead {
  std::size_t Tq = 0, Tk = 0, dk = 0;
  const float* q = nullptr;  // [Tq, d_k] queries (rotated under RoPE)
  std::size_t ldq = 0;
  const float* k = nullptr;  // [Tk, d_k] keys (rotated under RoPE)
  std::size_t ldk = 0;
  const float* v = nullptr;  // [Tk, d_k] values
  std::size_t ldv = 0;
  float scale = 1.0f;        // 1/√d_k
  bool causal = false;       // key j visible to query i iff k_offset + j <= q_offset + i
  std::size_t q_offset = 0, k_offset = 0;
  const std::uint8_t* key_padded = nullptr;  // [Tk], non-zero = hidden from every query; or null
  bool alibi = false;        // adds −slope·|pos_q − pos_k| to the scaled scores
  float slope = 0.0f;
};

/// Per-thread buffers of the kernel, reused from head to head (resized, never shrunk).
struct FusedScratch {
  std::vector<float> tile, tile2;            // [Br, Bc]-sized score / probability tiles
  std::vector<float> panel_a, panel_b, panel_c;  // packed operands (head_gemm.hpp's layout)
  std::vector<float> acc_a, acc_b;           // [d_k, Br or Bc] transposed accumulators
  std::vector<float> acc_q;                  // [d_k, Tq] dQᵀ of the head (backward)
  std::vector<float> m, l, colmax, shift, alpha;  // per-query running statistics
  std::vector<float> delta;                  // [Tq] D = rowsum(dO ∘ O)
};

/// Forward of one head: o [Tq, d_k] (rows of stride ldo) = softmax(S) V, lse [Tq] = m + log ℓ
/// (+∞ for a query that sees no key; its o row is 0). Returns the number of score entries
/// computed (the entries of the tiles not skipped).
std::size_t fused_forward_head(const FusedHead& h, float* o, std::size_t ldo, float* lse, FusedScratch& s);

/// Backward of one head given the forward's o [Tq, d_k] and lse [Tq] and dO = do_ [Tq, d_k]:
/// writes dq [Tq, d_k] and dv [Tk, d_k]; writes dk [Tk, d_k], or adds into it when dk_adds (the
/// self-attention with W_Q = W_K, whose dk rows are dq's: dq is written first, over its whole
/// extent, then the dk contributions are added). Rows of the given strides.
void fused_backward_head(const FusedHead& h, const float* o, std::size_t ldo, const float* do_, std::size_t lddo,
                         const float* lse, float* dq, std::size_t lddq, float* dk, std::size_t lddk, bool dk_adds,
                         float* dv, std::size_t lddv, FusedScratch& s);

}  // namespace seqlab::detail

#pragma once
// Multi-head attention with hand-written forward and backward, as torch.nn.MultiheadAttention
// (https://pytorch.org/docs/1.13/generated/torch.nn.MultiheadAttention.html, batch_first=True,
// dropout=0, add_bias_kv=False, add_zero_attn=False, kdim = vdim = embed_dim).
//
// Legend: B batch, Tq query length, Tk key/value length (Tq = Tk = T for self-attention),
// D d_model (embed_dim), h n_heads, d_k = D / h head dimension, N rows of a 2-D matrix.
//
// Formulas (Vaswani et al. 2017, "Attention Is All You Need", §3.2.1 eq. 1 and §3.2.2 eq. 2):
//   Q = X_q W_Qᵀ + b_Q,  K = X_kv W_Kᵀ + b_K,  V = X_kv W_Vᵀ + b_V        [B, T, D] each
//   head_i = softmax(Q_i K_iᵀ / √d_k + A_i + M) V_i                         (eq. 1; Q_i = columns
//            i·d_k .. (i+1)·d_k of Q)
//   MultiHead = Concat(head_1..head_h) W_Oᵀ + b_O                           (eq. 2)
// with W_Q, W_K, W_V stacked as the rows of in_proj_weight [3D, D] (q, k, v; PyTorch's packed
// layout), (W_O, b_O) = out_proj.{weight, bias}, A the optional ALiBi bias and M the mask
// (0 allowed, −∞ masked). Optional RoPE rotates Q_i and K_i per head after the projection; the
// optional relative bias (T5, set_relative_bias) adds to A_i like ALiBi, with its gradient.
//
// Numerics: softmax subtracts the row max; masked entries are −∞. A fully masked row (a query
// that may see no key) gets all-zero probabilities, so its *context* is 0 and its output is
// out_proj.bias; its gradients are finite (0 through the attention). PyTorch returns NaN there:
// documented difference.
//
// Implementation: the Q/K/V projection is one GEMM over the [B·T, D] rows (self-attention) or two
// (cross: q from the query rows, k and v from the key_value rows); the heads are read in place
// from the projection (head i = columns i·d_k .. (i+1)·d_k, a strided operand of the GEMMs), and
// only under RoPE are Q and K copied into contiguous [B, h, T, d_k] blocks to be rotated (and
// dQ, dK rotated back by the inverse rotation in backward). What happens per head depends on the
// kernel (set_kernel, AttentionKernel below):
//
// Materialised kernel. Scores, context and all their gradients are matrix products per head (a
// register-blocked kernel for these small shapes, lib/src/nn/head_gemm.hpp, not OpenBLAS), run one
// head at a time (scores, softmax, context written into its columns of the concatenation; in
// backward dP, softmax backward, dV, dQ, dK written into their columns of the projection
// gradient) so that the head's [Tq, Tk] block is reused while in cache and dL/dP needs one
// [Tq, Tk] scratch per thread, not [B, h, Tq, Tk]; the softmax (with masks and ALiBi) and its
// backward are one pass per row. The probabilities P [B, h, Tq, Tk] are kept for backward:
// 4·B·h·Tq·Tk bytes.
//
// Fused kernel (FlashAttention, Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient Exact
// Attention with IO-Awareness", Algorithm 1 forward / Algorithm 4 backward, in the loop order of
// FlashAttention-2, Dao 2023, Algorithm 1 forward and Algorithm 2 backward; lib/src/nn/
// fused_attention.{hpp,cpp}). Per head, queries in tiles of Br = 64 rows and keys/values in tiles
// of Bc = 64 rows; for each query tile I the forward runs over the key tiles J with the online
// softmax (Milakov & Gimelshein 2018), for each query row:
//   S = Q_I K_Jᵀ/√d_k + A (masked entries −∞),  m' = max(m, rowmax S),  P̃ = exp(S − m'),
//   ℓ' = e^(m − m') ℓ + rowsum P̃,  Õ' = e^(m − m') Õ + P̃ V_J;   finally O = Õ/ℓ,  L = m + log ℓ,
// and keeps only L [B, h, Tq] (the log-sum-exp) for backward, never a [Tq, Tk] matrix. The
// backward first forms D = rowsum(dO ∘ O) per query row, then for each key tile J over the query
// tiles I recomputes P = exp(S − L) tile by tile and accumulates
//   dV_J += Pᵀ dO_I,  dS = P ∘ (dO_I V_Jᵀ − D),  dQ_I += dS K_J/√d_k,  dK_J += dSᵀ Q_I/√d_k
// (the softmax backward dS = P ∘ (dP − rowsum(dP ∘ P)) with rowsum(dP ∘ P) = rowsum(dO ∘ O)).
// Under the causal mask a tile (I, J) is computed only if some query of I may see some key of J
// (k_offset + first key <= q_offset + last query), the others are skipped (about half the tiles
// of a long self-attention), and only the tiles on the diagonal are masked entry by entry; key
// tiles that are all padding are skipped too. Key padding, ALiBi and RoPE enter exactly as in the
// materialised kernel (the same scores, bit for bit for d_k <= 256: the same per-element FMA
// chain), so the two kernels differ only by the order of the softmax's float operations: outputs
// and gradients agree to float rounding (tests/unit/test_nn_attention_fused.cpp), not bit for
// bit. A fully masked row gives ℓ = 0: context 0 (output out_proj.bias) and L = +∞, so its P is
// 0 and its gradients are 0 and finite, as in the materialised kernel. Memory kept for backward:
// L, 4·B·h·Tq bytes, instead of 4·B·h·Tq·Tk (activation_bytes() reports both kinds); backward
// scratch per thread: a few 64 x 64 tiles and, at small d_k, dQᵀ of one head [d_k, Tq]. Which
// kernel runs: kernel(), by default AttentionKernel::automatic (fused from a seq_len threshold,
// below).
//
// Both kernels: with a thread budget above 1 (core/threads.hpp) the heads are split between that
// many threads of our own, with OpenBLAS at one thread meanwhile (the two never oversubscribe;
// every head is computed by one thread in a fixed order, so results do not depend on the split).
// Buffers are kept between calls and reallocated only when shapes change (a buffer the last
// forward did not use is released); every forward overwrites the caches completely, so repeated
// forwards (gradient checks) do not interfere.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/linear.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

class RotaryEmbedding;       // seqlab/nn/positional.hpp
class RelativePositionBias;  // seqlab/nn/positional.hpp
namespace detail {
struct FusedHead;  // lib/src/nn/fused_attention.hpp
}

/// Which keys a query may attend to.
///   causal:      query i may see key j only if pos_k(j) <= pos_q(i), with pos_q(i) = q_offset + i,
///                pos_k(j) = k_offset + j (offsets 0 by default: torch.triu(ones(Tq, Tk), 1) as a
///                bool attn_mask, the decoder's subsequent mask, Vaswani et al. §3.2.3).
///   key_padding: [B, Tk]; a non-zero entry hides key j of sequence b from every query of b
///                (PyTorch's key_padding_mask, True = ignore). nullptr: no padding.
/// Both may be combined. The pointed-to mask must stay alive during forward (it is not kept).
struct AttentionMask {
  bool causal = false;
  const PaddingMask* key_padding = nullptr;  // [B, Tk]
};

/// Which per-head kernel MultiheadAttention runs (file comment: "Materialised kernel", "Fused
/// kernel"). Both compute the same function and gradients (to float rounding).
///   automatic:    fused when min(Tq, Tk) >= kFusedAttentionMinSeqLenCausal (causal mask on) or
///                 >= kFusedAttentionMinSeqLen (off), else materialised
///   fused:        always the fused kernel (memory O(B·h·Tq) for the softmax)
///   materialised: always the materialised kernel (keeps P [B, h, Tq, Tk])
/// Reading the attention weights works with every kernel: attention_probs() after a fused forward
/// recomputes them (see there).
enum class AttentionKernel { automatic, fused, materialised };

/// "auto" | "fused" | "materialised" (exact, lower case; ModelConfig::attention_kernel's values).
/// Throws std::invalid_argument("attention_kernel = 'x': allowed auto, fused, materialised").
AttentionKernel parse_attention_kernel(const std::string& name);
/// The name parse_attention_kernel accepts for `kernel` ("auto" for automatic).
std::string to_string(AttentionKernel kernel);

/// Shortest sequence (min(Tq, Tk)) for which AttentionKernel::automatic runs the fused kernel,
/// with the causal mask and without. Measured (experiments/bench/README.md, "Choosing the
/// attention kernel"): the bench_layers cases AttnKernel_* time both kernels' forward+backward
/// over seq_len 64..2048 × d_model {32, 64} × n_heads {2, 4, 8} at 1 and 2 threads, and
/// experiments/bench/attention_threshold.py takes, per causal value, the largest crossover over
/// those groups (the shortest seq_len from which the fused kernel is at least as fast at every
/// longer one). Causal: 128 (the fused kernel skips the tiles above the diagonal; it is slower
/// only at seq_len 64 with 16- and 32-wide heads). Without the mask: 2048 (with 32-wide heads,
/// d_model 64 and 2 heads, the materialised kernel is 1.1-1.25× faster up to seq_len 1024 at one
/// thread; the fused backward recomputes the scores, five products per tile instead of four).
inline constexpr std::size_t kFusedAttentionMinSeqLenCausal = 128;
inline constexpr std::size_t kFusedAttentionMinSeqLen = 2048;

class MultiheadAttention : public Module {
 public:
  /// Parameters (state_dict keys, in this order):
  ///   "in_proj_weight"  [3D, D]  rows 0..D-1 = W_Q, D..2D-1 = W_K, 2D..3D-1 = W_V;
  ///                     shared_qk: [2D, D], rows 0..D-1 = W_Q = W_K (one projection), D..2D-1 = W_V
  ///   "in_proj_bias"    [3D] (shared_qk: [2D], b_Q = b_K)
  ///   "out_proj.weight" [D, D]
  ///   "out_proj.bias"   [D]
  /// Init as nn.MultiheadAttention._reset_parameters: out_proj is built first as an nn.Linear
  /// (U(-1/√D, 1/√D) for weight, then bias, from `rng`), then in_proj_weight is drawn from
  /// xavier_uniform over the packed [3D, D] matrix, U(-a, a) with a = √(6 / (D + 3D)); both
  /// biases are 0. shared_qk uses the same bound a = √(6 / 4D) for its [2D, D] matrix, so each
  /// projection has the distribution of the unshared model (the ablation changes only the
  /// sharing). bias = false: no in_proj_bias, no out_proj.bias (as PyTorch's bias=False); the
  /// members have shape [0] and are not listed.
  /// Throws std::invalid_argument naming d_model and n_heads if either is 0 or d_model % n_heads != 0.
  MultiheadAttention(std::size_t d_model, std::size_t n_heads, Rng& rng, bool shared_qk = false,
                     bool bias = true);

  /// Cross-attention: query [B, Tq, D], key_value [B, Tk, D] (keys and values from the same
  /// tensor, as nn.MultiheadAttention(query, kv, kv)) -> [B, Tq, D].
  /// Caches what backward needs and the attention probabilities.
  /// Throws ShapeError naming the argument if query is not [*, *, D], key_value not [B, *, D], or
  /// mask.key_padding not [B, Tk]; std::invalid_argument if a RoPE hook's head_dim is not d_k.
  Tensor3 forward(const Tensor3& query, const Tensor3& key_value, const AttentionMask& mask = {});
  /// Self-attention: x [B, T, D] -> [B, T, D] (query = key = value = x, one projection GEMM).
  /// Same errors as the cross form, with mask.key_padding [B, T].
  Tensor3 forward(const Tensor3& x, const AttentionMask& mask = {});
  /// Self-attention as forward(x, mask), taking x over as the input cache instead of copying it
  /// (x is left moved-from): for callers whose x is a temporary (the norm outputs of the
  /// pre-norm Transformer layers); saves a pass over x. x is taken only once every check
  /// (shapes, all parameters including out_proj's) has passed, so those throws leave it intact;
  /// only std::bad_alloc later can leave it moved-from. Throws as forward(x, mask).
  Tensor3 forward(Tensor3&& x, const AttentionMask& mask = {});

  /// dy [B, Tq, D] = dL/d(output). Returns dL/dquery [B, Tq, D]; after a cross-attention forward,
  /// dL/dkey_value [B, Tk, D] is in key_value_grad(). After a self-attention forward the returned
  /// tensor is the total dL/dx (query, key and value paths summed). ADDS dL/dθ into every
  /// Parameter::grad. May be called more than once per forward (it reads the caches only).
  /// Throws std::logic_error if no forward ran, ShapeError if dy is not [B, Tq, D] of the last forward.
  Tensor3 backward(const Tensor3& dy);

  /// dL/dkey_value [B, Tk, D] from the last backward after a cross-attention forward.
  /// Throws std::logic_error before such a backward, or after a self-attention forward (whose
  /// backward already returned the total dL/dx: reading a second part would double-count).
  const Tensor3& key_value_grad() const;

  /// Attention probabilities of the last forward [B, h, Tq, Tk] (after masks; a masked entry is
  /// exactly 0; each row sums to 1 or, fully masked, to 0). As PyTorch's attn_output_weights with
  /// average_attn_weights=False. After a materialised forward they are the kept P. After a fused
  /// forward (which keeps no P) the first call recomputes them from the cached Q and K with the
  /// materialised kernel's scores and softmax, so they are the same bits either way; that call
  /// costs O(B·h·Tq·Tk·d_k) time and allocates the 4·B·h·Tq·Tk bytes (held until the next
  /// forward), and, as any lazily filled cache, must not run concurrently with another call on
  /// the same object. The reference stays valid until the next forward.
  /// Throws std::logic_error before any forward.
  const Tensor4& attention_probs() const;

  /// Symmetry score of the last forward's pre-softmax logits S = Q_i K_iᵀ/√d_k + A_i (RoPE applied
  /// to Q, K if set; the relative bias, if set, included; ALiBi bias A over the full matrix: −m·(pos_q − pos_k) causal, which is
  /// antisymmetric, and −m·|pos_q − pos_k| otherwise; masks NOT applied):
  ///   mean over b < B and heads i of ‖S − Sᵀ‖_F / ‖S‖_F   (a head with ‖S‖_F = 0 counts as 0).
  /// 0 for a symmetric S: shared_qk without (causal) ALiBi and without normalised keys — RoPE keeps it
  /// symmetric, since q̃_t = k̃_t at every position t; normalised keys (set_normalize_keys) use k̂. Dimensionless, in [0, 2]. Recomputes S from the cached Q and K
  /// (O(B·h·T²·d_k), no memory kept between calls). Throws std::logic_error if no forward ran or
  /// the last forward was a cross-attention.
  double logit_asymmetry() const;

  /// RoPE hook (Su et al. 2021, eq. 34): rotates every head of Q (positions q_offset + t) and K
  /// (positions k_offset + t) after the projection; backward applies the inverse rotation to dQ,
  /// dK. nullptr switches it off. The object must outlive the forward/backward calls using it.
  /// Throws std::invalid_argument if rope's head_dim is not d_k.
  void set_rope(const RotaryEmbedding* rope);
  /// ALiBi hook (Press et al. 2021 §3): adds −m_i·(pos_q − pos_k) (causal mask on) or
  /// −m_i·|pos_q − pos_k| (off) to the scaled scores of head i, m = alibi_slopes(n_heads).
  void set_alibi(bool on);
  /// Learned relative-bias hook (T5, Raffel et al. 2020 §2.1; nn/positional.hpp
  /// RelativePositionBias): adds bias->add_row's weight[bucket(pos_k − pos_q), i] to the scaled
  /// scores of head i (bidirectional buckets without the causal mask, unidirectional with it),
  /// after ALiBi if both are on; backward ADDS dL/dweight (the sum of dL/dscores per bucket and
  /// head) into bias->weight.grad. nullptr switches it off. The object must outlive the
  /// forward/backward calls using it; several layers may share one (T5 shares it across layers:
  /// their gradients add). A forward with it runs the materialised kernel whatever kernel() (the
  /// fused kernel has no relative bias). Throws std::invalid_argument if bias->n_heads() is not
  /// n_heads.
  void set_relative_bias(RelativePositionBias* bias);
  /// Positions of query row 0 and key row 0 for RoPE, ALiBi and the causal mask (default 0, 0;
  /// e.g. decoding with a key/value prefix: q_offset = k_offset + prefix length).
  void set_position_offsets(std::size_t q_offset, std::size_t k_offset);

  /// Reformer's mask of attention to self (Kitaev et al. 2020, "Reformer", §2 "Shared-QK
  /// Transformer"): in a self-attention forward, query i may not attend to the key at its own
  /// position (pos_k(j) = pos_q(i)) unless that key is the only one it may see (e.g. the first
  /// position under the causal mask, or every other key padded). With W_Q = W_K a query's score
  /// with itself, |q_i|²/√d_k, is almost always its largest (Reformer §2); masking it makes the
  /// head look elsewhere. The masked entry is −∞ before the softmax (probability exactly 0), so
  /// backward needs nothing more: dS = P ⊙ (…) is 0 there. Cross-attention forwards ignore it.
  /// Off by default; applies to later forwards (the backward uses what its forward used). A
  /// forward with this mask, a causal prefix or a head mask runs the materialised kernel whatever
  /// kernel() says (the fused kernel has none of the three).
  void set_mask_self(bool on) { mask_self_ = on; }
  bool mask_self() const { return mask_self_; }
  /// Reformer's unit-length keys (Kitaev et al. 2020, §2 "Shared-QK Transformer": "we normalize
  /// the length of the keys", k_j = q_j/‖q_j‖ with W_Q = W_K): every head's key at every position
  /// is divided by its length before the scores, as torch.nn.functional.normalize(k, p=2, dim=-1,
  /// eps=1e-12) (k / max(‖k‖₂, eps); a zero key stays zero), after RoPE if set (a rotation keeps
  /// the length). The scores are then q_i·k̂_j/√d_k: the query's length sets the row's sharpness,
  /// and with shared_qk the logits are no longer symmetric (S_ij = |q_i| cos θ_ij/√d_k), though
  /// which keys rank first still is. Works with or without shared_qk, for self- and
  /// cross-attention, with both kernels (the kernels read the normalised copy); backward
  /// differentiates through the normalisation, dk = (dk̂ − k̂ (k̂·dk̂))/‖k‖ (dk̂/eps for a floored
  /// key). Off by default; applies to later forwards. KV-cache decoding (kv_cache.hpp
  /// attention_step) does not implement it and throws.
  void set_normalize_keys(bool on) { normalize_keys_ = on; }
  bool normalize_keys() const { return normalize_keys_; }
  /// Prefix-LM mask (Raffel et al. 2020, "T5", §3.2.1 and Fig. 3 right, "causal with prefix"):
  /// under the causal mask, keys at positions pos_k(j) < prefix are visible to every query
  /// (the prefix is read bidirectionally), the others as the causal mask says. 0 (default) = the
  /// plain causal mask; no effect on forwards without the causal mask. Applies to later forwards
  /// (materialised kernel, see set_mask_self).
  void set_causal_prefix(std::size_t prefix) { causal_prefix_ = prefix; }
  std::size_t causal_prefix() const { return causal_prefix_; }
  /// Head mask (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?", §2.2
  /// eq. 2): head i's output is multiplied by ξ_i before the output projection,
  ///   MultiHead = Concat(ξ_1 head_1, .., ξ_h head_h) W_Oᵀ + b_O,
  /// so ξ_i = 0 removes head i (pruning) and ξ_i = 1 keeps it. `gates`: h values (any finite
  /// reals), or empty to clear (every ξ_i = 1, the default). Backward scales the head's
  /// gradients by the same ξ_i (no gradient for ξ itself). Applies to later forwards
  /// (materialised kernel, see set_mask_self).
  /// Throws std::invalid_argument if gates is neither empty nor of size n_heads, or holds a
  /// non-finite value.
  void set_head_mask(std::vector<float> gates);
  /// The gates set by set_head_mask (empty: none).
  const std::vector<float>& head_mask() const { return head_mask_; }

  /// The kernel for later forwards (default AttentionKernel::automatic). The backward always
  /// uses the kernel its forward used.
  void set_kernel(AttentionKernel kernel) { kernel_ = kernel; }
  AttentionKernel kernel() const { return kernel_; }
  /// True if a forward with these lengths and mask.causal would run the fused kernel under kernel()
  /// (never with a relative bias, a self mask, a causal prefix or a head mask set: set_mask_self).
  bool uses_fused(std::size_t seq_len_q, std::size_t seq_len_k, bool causal) const;
  /// True if the last forward ran the fused kernel. Throws std::logic_error before any forward.
  bool last_forward_fused() const;
  /// Bytes of the buffers the last forward keeps for backward (and attention_probs /
  /// logit_asymmetry): the input copies (xq [B, Tq, D], cross: xkv [B, Tk, D]), the projection
  /// ([B·T, 3D] self, [B·Tq, D] + [B·Tk, 2D] cross; shared_qk 2D), RoPE's rotated Q and K (K also
  /// when the keys are normalised, with their lengths [B·h, Tk]), the concatenated heads
  /// [B, Tq, D], the key padding copy [B, Tk] (1 byte each), and the softmax's state: P [B, h, Tq, Tk] (materialised) or L [B, h, Tq] (fused). Probabilities recomputed by
  /// attention_probs() after a fused forward are not counted (not needed by backward), nor are
  /// out_proj's own caches (it borrows the concatenated heads) or the backward's scratch
  /// (materialised: one [Tq, Tk] per head thread; fused: a few tiles per thread). 0 before any
  /// forward.
  std::size_t activation_bytes() const;
  /// Score entries (query, key) the last forward computed, over all B·h heads: B·h·Tq·Tk for the
  /// materialised kernel; for the fused kernel the entries of the tiles it did not skip (causal
  /// tiles above the diagonal, all-padding key tiles). The backward of the fused kernel
  /// recomputes the same tiles. The bench's FLOP counts use it (2·d_k FLOP per entry and
  /// product). 0 before any forward.
  std::size_t score_entries() const { return has_forward_ ? score_entries_ : 0; }

  const RotaryEmbedding* rope() const { return rope_; }
  const RelativePositionBias* relative_bias() const { return rel_bias_; }
  bool alibi() const { return alibi_; }
  std::size_t d_model() const { return d_model_; }
  std::size_t n_heads() const { return n_heads_; }
  std::size_t head_dim() const { return head_dim_; }
  bool shared_qk() const { return shared_qk_; }
  bool has_bias() const { return has_bias_; }

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  Parameter in_proj_weight;  // "in_proj_weight" [3D, D] ([2D, D] with shared_qk)
  Parameter in_proj_bias;    // "in_proj_bias" [3D] ([2D]; [0] and unlisted when bias = false)
  Linear out_proj;           // "out_proj.weight" [D, D], "out_proj.bias" [D]

 private:
  // take_query: &query when query is to be moved into xq_ rather than copied (forward(Tensor3&&)).
  Tensor3 run_forward(const Tensor3& query, const Tensor3* key_value, const AttentionMask& mask,
                      Tensor3* take_query = nullptr);
  void check_parameters() const;
  // Head (b, i) of a [B·T, ·] projection read in place: at(b, i) = base + b·stride_b +
  // i·stride_h, rows of stride ld.
  struct HeadMatrix {
    const float* base;
    std::size_t ld, stride_b, stride_h;
    const float* at(std::size_t b, std::size_t i) const { return base + b * stride_b + i * stride_h; }
  };
  // A head's gradient block in backward: at(b, i) = base + b·stride_b + i·stride_h, rows of stride ld.
  struct GradMatrix {
    float* base;
    std::size_t ld, stride_b, stride_h;
    float* at(std::size_t b, std::size_t i) const { return base + b * stride_b + i * stride_h; }
  };
  // Scores, masked softmax and context of every head, one head at a time (probs_, ctx_merged_):
  // the materialised kernel's forward.
  void attend_heads();
  // The same scores and softmax into probs_ without the context (attention_probs after a fused
  // forward).
  void fill_probs() const;
  // Scores and masked softmax of head g = b·h + i into P [Tq, Tk] (both of the above).
  // pad_bias: [Tk] 0 / −∞ of sequence b when any_pad.
  void head_softmax(std::size_t g, float* P, const float* pad_bias, bool any_pad, std::vector<float>& panel) const;
  // The materialised kernel's backward per head: dQ, dK, dV where the heads' gradients go (dK
  // scaled by beta_k before adding: 1 when it lands on dQ's columns, W_Q = W_K).
  void backward_heads_materialised(const Tensor3& dctx_merged, const HeadMatrix& Q, const HeadMatrix& K,
                                   const HeadMatrix& V, const GradMatrix& dQ, const GradMatrix& dK, float beta_k,
                                   const GradMatrix& dV);
  // The fused kernel's forward (ctx_merged_, lse_), its view of head g, and its backward (dQ, dK,
  // dV: where the heads' gradients go; dk_adds: dK is added onto dQ's columns, W_Q = W_K).
  void attend_heads_fused();
  void fused_head(std::size_t g, detail::FusedHead& fh) const;
  void backward_heads_fused(const Tensor3& dctx_merged, const GradMatrix& dQ, const GradMatrix& dK, bool dk_adds,
                            const GradMatrix& dV);
  // 'q', 'k' or 'v' of the last forward in its projection buffer (proj_q_ / proj_kv_).
  HeadMatrix projected(char which) const;
  // What the scores and context read: projected(), or the rotated copies q_, k_ under RoPE.
  HeadMatrix head_input(char which) const;
  /// Rows of in_proj_weight: 3D, or 2D with shared_qk.
  std::size_t proj_rows() const { return (shared_qk_ ? 2 : 3) * d_model_; }

  std::size_t d_model_, n_heads_, head_dim_;
  bool shared_qk_, has_bias_;
  const RotaryEmbedding* rope_ = nullptr;
  bool alibi_ = false;
  Tensor1 slopes_;  // [h] ALiBi slopes when alibi_
  RelativePositionBias* rel_bias_ = nullptr;
  std::size_t q_offset_ = 0, k_offset_ = 0;
  bool mask_self_ = false;
  bool normalize_keys_ = false;
  std::size_t causal_prefix_ = 0;
  std::vector<float> head_mask_;  // [h] or empty

  AttentionKernel kernel_ = AttentionKernel::automatic;

  // Forward state (what the last forward used, so backward and logit_asymmetry read the same).
  bool has_forward_ = false;
  bool fused_ = false;  // the last forward ran the fused kernel
  bool has_pad_ = false;  // the last forward had a key padding mask (copied into key_pad_)
  std::size_t score_entries_ = 0;
  bool self_ = true;
  bool causal_ = false;
  const RotaryEmbedding* rope_fwd_ = nullptr;
  bool alibi_fwd_ = false;
  RelativePositionBias* rel_bias_fwd_ = nullptr;
  std::size_t q_off_fwd_ = 0, k_off_fwd_ = 0;
  bool mask_self_fwd_ = false;
  bool normalize_keys_fwd_ = false;
  std::size_t causal_prefix_fwd_ = 0;
  std::vector<float> head_mask_fwd_;  // [h] or empty
  std::size_t B_ = 0, Tq_ = 0, Tk_ = 0;
  Tensor3 xq_;       // [B, Tq, D] copy of query (self: of x), or x itself taken over
  Tensor2 xkv_;      // [B·Tk, D] copy of key_value (cross only)
  Tensor2 proj_q_;   // self: [B·T, 3D] (shared_qk: 2D) q|k|v rows; cross: [B·Tq, D] q rows
  Tensor2 proj_kv_;  // cross: [B·Tk, 2D] k|v rows
  Tensor4 q_;         // RoPE only: [B, h, Tq, d_k] heads after the rotation
  Tensor4 k_;         // RoPE or normalised keys: [B, h, Tk, d_k] heads after the rotation, unit length
  Tensor2 k_norm_;    // normalised keys only: [B·h, Tk] max(‖k‖, eps) of each key before normalising
  PaddingMask key_pad_;  // [B, Tk] copy of the key padding mask (when has_pad_)
  // [B, h, Tq, Tk] attention probabilities: kept by a materialised forward; after a fused forward
  // filled by the first attention_probs() call (probs_ready_ says whether it holds the last
  // forward's).
  mutable Tensor4 probs_;
  mutable bool probs_ready_ = false;
  Tensor2 lse_;        // fused: [B·h, Tq] log-sum-exp L = m + log ℓ per query (+∞: no visible key)
  Tensor3 ctx_merged_; // [B, Tq, D] concatenated heads (out_proj's input)

  // Backward state.
  bool has_kv_grad_ = false;
  Tensor2 dprobs_;            // [threads·Tq, Tk]: per head thread, the [Tq, Tk] dL/dP, then dL/dS
  Tensor4 dq_, dk_;           // gradients of q_ (RoPE) and k_ (RoPE or normalised keys), [B, h, T, d_k]
  Tensor2 dproj_q_, dproj_kv_;  // same layouts as proj_q_, proj_kv_
  Tensor3 dkv_;               // [B, Tk, D] dL/dkey_value (cross)
  std::vector<float> rel_slots_;  // relative bias only: [B·h, num_buckets] dL/dweight per head
};

}  // namespace seqlab

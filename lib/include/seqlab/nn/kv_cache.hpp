#pragma once
// Incremental (autoregressive) decoding of causal self-attention with a key/value cache: each
// call processes the t new positions of every sequence, appends their keys and values to the
// cache, and lets each new query attend over all cached positions up to its own, so generating
// token n costs O(n·D) attention work instead of re-running the whole prefix (O(n²·D)). Inference
// only: nothing is kept for backward. As the "past_key_values" of Hugging Face's GPT-2 and the
// incremental decoding of fairseq (Ott et al. 2019); the attention itself is Vaswani et al. 2017
// §3.2 eq. 1 with the decoder's causal mask (§3.2.3).
//
// Legend: B batch, t new positions of one call, n positions already cached, D d_model, h n_heads,
// d_k = D / h.
//
// Positions: the cached keys are positions 0 .. n−1 and the new queries and keys n .. n+t−1 (the
// attention's set_position_offsets do not apply). RoPE (the attention's rope()) rotates each new
// query and key at its position before the key is cached; ALiBi (alibi()) adds −m_i·(pos_q −
// pos_k); the causal mask lets query n+i see keys 0 .. n+i. For rope_pi / rope_ntk the rotation
// scale is whatever the RotaryEmbedding's context length is at the call (the model sets it).
//
// Equality with the full forward: for a causal self-attention over positions 0 .. N−1, feeding the
// positions in any split (one at a time, or a prompt then single tokens) gives the rows of
// MultiheadAttention::forward(x, {causal = true}) up to float rounding (the products are summed in
// another order), with or without shared_qk, bias, RoPE, ALiBi; tests/unit/test_nn_kv_cache.cpp
// checks it, and the same for TransformerEncoderLayer steps and TransformerModel::decode_step.
// Key padding is not supported (decoding sequences of one length).
//
// Cost per call: the projections 2·B·t·D·3D + 2·B·t·D·D FLOP (OpenBLAS GEMMs), the scores and
// context 4·B·t·(n+t)·D FLOP, the softmax O(B·h·t·(n+t)). Memory: the cache, 2·4·B·h·cap·d_k =
// 8·B·cap·D bytes per layer (cap = capacity() >= length()), grown by doubling.
#include <cstddef>

#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/transformer_layer.hpp"

namespace seqlab {

/// The keys (after RoPE) and values of the positions one self-attention layer has seen, per
/// sequence and head: K, V [B, h, cap, d_k] each, rows 0 .. length()−1 valid.
class KVCache {
 public:
  KVCache() = default;

  /// Cached positions n (the position of the next query).
  std::size_t length() const { return len_; }
  /// Batch B the cache holds (0 before the first append).
  std::size_t batch() const { return B_; }
  /// Positions the storage holds without growing.
  std::size_t capacity() const { return cap_; }
  /// Forgets every position (keeps the storage and its shape).
  void clear() { len_ = 0; }
  /// Keeps positions 0 .. len−1 and forgets the others (e.g. to decode again from a prefix, or to
  /// time one step at a fixed prefix length). Throws std::out_of_range if len > length().
  void truncate(std::size_t len);
  /// Makes room for `capacity` positions of B sequences of h heads of size d_k without further
  /// growth (a cache of another B, h or d_k is reset to length 0). Throws std::invalid_argument
  /// if B, h or d_k is 0.
  void reserve(std::size_t B, std::size_t h, std::size_t d_k, std::size_t capacity);
  /// Bytes of the key and value storage (8·B·h·cap·d_k).
  std::size_t bytes() const { return 2 * k_.size() * sizeof(float); }

  /// Key / value row of position j of sequence b, head i (d_k floats). No bounds check.
  const float* key(std::size_t b, std::size_t i, std::size_t j) const {
    return k_.data() + ((b * h_ + i) * cap_ + j) * dk_;
  }
  const float* value(std::size_t b, std::size_t i, std::size_t j) const {
    return v_.data() + ((b * h_ + i) * cap_ + j) * dk_;
  }
  float* key(std::size_t b, std::size_t i, std::size_t j) {
    return k_.data() + ((b * h_ + i) * cap_ + j) * dk_;
  }
  float* value(std::size_t b, std::size_t i, std::size_t j) {
    return v_.data() + ((b * h_ + i) * cap_ + j) * dk_;
  }
  /// Marks `t` more positions as cached (after their rows were written). Throws std::logic_error
  /// if that exceeds capacity().
  void extend(std::size_t t);

 private:
  std::size_t B_ = 0, h_ = 0, dk_ = 0, cap_ = 0, len_ = 0;
  Tensor4 k_, v_;  // [B, h, cap, d_k]
};

/// Causal self-attention of the new positions x [B, t, D] (t >= 1) over the cache and themselves:
/// y [B, t, D], the rows MultiheadAttention::forward would give for them on the whole sequence
/// (file comment); appends their keys and values to `cache` (grown as needed). Reads the
/// attention's parameters and its RoPE / ALiBi hooks; changes nothing in `attn` (it keeps the
/// caches of its last forward). Throws ShapeError if x is not [B, t, D] with t >= 1, or if B differs
/// from a non-empty cache's batch; std::invalid_argument if a RoPE hook's head_dim is not d_k or the
/// attention normalises its keys (set_normalize_keys, not implemented here).
Tensor3 attention_step(const MultiheadAttention& attn, const Tensor3& x, KVCache& cache);

/// One Transformer layer with the causal mask on the new positions x [B, t, D] (the decoder-only
/// block of TransformerModel's transformer_decoder: pre or post norm as the layer's config),
/// through attention_step for its self-attention: y [B, t, D]. Dropout is not applied (inference;
/// equal to forward in eval mode, or in train mode when dropout is 0); the norms and the
/// feed-forward run their own forward on the new rows, so a norm that mixes positions (batch_norm
/// in train mode) differs from the full forward, and their caches then hold these rows (a backward
/// needs a new forward first). Throws as attention_step, ShapeError if x is not [*, *, D].
Tensor3 encoder_layer_step(TransformerEncoderLayer& layer, const Tensor3& x, KVCache& cache);

}  // namespace seqlab

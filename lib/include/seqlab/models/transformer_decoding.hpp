#pragma once
// Autoregressive decoding of a decoder-only TransformerModel (model = transformer_decoder) with a
// key/value cache per layer (nn/kv_cache.hpp): decode_step feeds the next t tokens of every
// sequence (a prompt, then one token at a time) and returns their logits, the rows
// TransformerModel::forward gives for those positions on the whole sequence. The work per
// generated token is O(L·(D² + D·F + n·D)) at prefix length n, instead of a forward over all n
// positions; the steps themselves are sequential (token n+1 needs token n), whatever the model.
//
// Legend: B batch, t new positions of one call, n positions already decoded (state.length()),
// D d_model, L num_layers, O output_size, V vocab_size.
//
// Per call: u = the input layer on the new tokens; z_0 = PE(u) at positions n .. n+t−1
// (positional->forward(u, n); RoPE / ALiBi inside the attention at the same positions; the
// encoding's context length is set to n + t first, as a forward over the whole sequence would);
// z_l = encoder_layer_step(layer_l, z_{l−1}, state.layers[l]) (causal); y = final norm (pre-norm);
// logits = head(y) per position [B, t, O], or (last_position head) of the last new position
// [B, 1, O]. Embedding dropout and the layers' dropouts are not applied (inference): equal to
// forward in eval mode, or in train mode when dropout is 0 (tests/unit/test_nn_kv_cache.cpp).
#include <cstddef>
#include <vector>

#include "seqlab/core/tensor.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/kv_cache.hpp"

namespace seqlab {

/// The caches of one decoding run: layers[l] for layer l (sized by the first decode_step).
struct DecodingState {
  std::vector<KVCache> layers;
  /// Tokens decoded so far, n (0 before the first step).
  std::size_t length() const { return layers.empty() ? 0 : layers.front().length(); }
  /// Starts a new run (keeps the storage).
  void clear() {
    for (auto& c : layers) c.clear();
  }
  /// Keeps the first len positions (KVCache::truncate; std::out_of_range if len > length()).
  void truncate(std::size_t len) {
    for (auto& c : layers) c.truncate(len);
  }
  /// Bytes of every layer's cache.
  std::size_t bytes() const {
    std::size_t s = 0;
    for (const auto& c : layers) s += c.bytes();
    return s;
  }
};

/// Embedding input: ids [B, t] (t >= 1) -> logits of the new positions (file comment).
/// Throws std::invalid_argument if the model is not a transformer_decoder or has a padding mask set;
/// std::logic_error if it has linear input; ShapeError if t = 0, if B differs from the running
/// decode's batch, or if n + t exceeds a learned table's max_len; std::out_of_range for a bad id.
Tensor3 decode_step(TransformerModel& model, const IndexTensor2& ids, DecodingState& state);
/// Linear input: x [B, t, input_size] -> logits (as above); std::logic_error with embedding input.
Tensor3 decode_step(TransformerModel& model, const Tensor3& x, DecodingState& state);

}  // namespace seqlab

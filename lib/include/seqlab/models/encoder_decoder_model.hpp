#pragma once
// The encoder-decoder Transformer (ModelConfig family "transformer_encoder_decoder"; Vaswani et al.
// 2017, arXiv 1706.03762, §3 and Fig. 1): a source sequence is encoded by L bidirectional layers,
// a target sequence is decoded by L causal layers that also attend to the encoder output
// (cross-attention, §3.2.3). The body is torch.nn.Transformer(d_model = D, nhead = h,
// num_encoder_layers = num_decoder_layers = L, dim_feedforward = F, dropout, activation,
// batch_first=True, norm_first = (norm_placement == "pre"))
// (https://pytorch.org/docs/1.13/generated/torch.nn.Transformer.html), wrapped with a token
// embedding, positional encodings and a linear head. Build it with make_model (factory.hpp) and
// dynamic_cast to EncoderDecoderModel to call forward(src, tgt_in).
//
// Legend: B batch, S source length, T target length (of tgt_in), V vocab_size, D d_model =
// hidden_size = embedding_dim, h n_heads, hd = D / h, F d_ff, L num_layers (per stack),
// O output_size.
//
// Forward (teacher forcing; tgt_in = the target shifted right, starting with a bos id):
//   x_0 = dropout(embedding(src) + PE_src)            [B, S, D]
//   x_l = encoder_layers[l](x_{l-1})                  TransformerEncoderLayer, bidirectional
//                                                     self-attention, key padding = source padding
//   m   = encoder_norm(x_L)                           "memory" [B, S, D]
//   y_0 = dropout(embedding(tgt_in) + PE_tgt)         [B, T, D]
//   y_l = decoder_layers[l](y_{l-1}, m)               TransformerDecoderLayer(cross_attention):
//                                                     causal self-attention with key padding =
//                                                     target padding; cross-attention to m with
//                                                     key padding = source padding (PyTorch's
//                                                     memory_key_padding_mask)
//   logits = head(decoder_norm(y_L))                  [B, T, O]
// - One token embedding "embedding.weight" [V, D] is shared by source and target (Vaswani et al.
//   §3.4 share it; they also tie it with the output projection and scale it by √D — neither is
//   done here: the head is a separate Linear and embeddings are not scaled, as TransformerModel).
// - Final norms: torch.nn.Transformer always builds encoder.norm and decoder.norm (a LayerNorm
//   there; here the configured norm), and applies them after the last layer for post-norm too, so
//   a post-norm stack ends in two norms in a row (the last layer's norm2/norm3, then the final
//   norm). This model matches that for both placements (documented difference from
//   TransformerModel, whose post-norm variant has no final norm). norm = "none": no parameters.
// - Positional encodings (cfg.positional_encoding, a registered name: models/positional_registry.hpp),
//   one PositionalEncoding per stack (src_positional, tgt_positional; each attached to its stack's
//   self-attentions), for source and target alike. The built-ins:
//   sinusoidal: Vaswani et al. §3.5 table added to both embeddings (positions from 0 in each);
//   learned:    two tables "src_pos_embedding.weight" and "tgt_pos_embedding.weight" [max_len, D]
//               (separate, as fairseq's / BART's encoder and decoder embed_positions); S and T
//               must both be <= max_len (ShapeError naming max_len);
//   rope*:      RoPE on q and k of every encoder and decoder SELF-attention (one RotaryEmbedding
//               per stack, context length S resp. T at every forward);
//   alibi:      ALiBi on every self-attention (bidirectional |i − j| bias in the encoder, causal in
//               the decoder);
//   none:       nothing.
//   Cross-attention gets no RoPE / ALiBi (queries and keys live in different sequences, so their
//   relative offset has no meaning; T5 and the RoPE/ALiBi encoder-decoder variants likewise add
//   relative position information only inside self-attention): the decoder learns source
//   positions only from what the encoder put into m.
// - Key padding: set_padding(src, tgt) masks padded source keys in the encoder self-attention and
//   in every cross-attention, padded target keys in the decoder self-attention (combined with the
//   causal mask), and hands each stack's mask to its norms (masked_batch_norm). Outputs at padded
//   positions are computed (PyTorch likewise) and should be ignored by the loss. A query whose keys
//   are all padded gets a zero context (MultiheadAttention's documented difference: PyTorch: NaN).
// - Every self- and cross-attention runs the kernel cfg.attention_kernel names (auto | fused |
//   materialised, MultiheadAttention::set_kernel; the same function either way).
//
// Parameter keys (state_dict order; draw order from the rng in brackets):
//   "embedding.weight" [V, D]                                    [1]  N(0, 1) (nn.Embedding)
//   "src_pos_embedding.weight", "tgt_pos_embedding.weight"       [4]  learned only, N(0, 1)
//                                        (any encoding's parameters: "src_pos_embedding.*", ...)
//   "transformer.encoder.layers.{l}.*"  (TransformerEncoderLayer keys)        [5]
//   "transformer.encoder.norm.*"        (weight, bias [D] as the norm has them)
//   "transformer.decoder.layers.{l}.*"  (TransformerDecoderLayer keys with "multihead_attn.*" and
//                                        "norm3.*")                            [6]
//   "transformer.decoder.norm.*"
//   "head.weight" [O, D], "head.bias" [O]                        [8]  nn.Linear's default
// Draw order: [1] embedding, [2] rng.next_u64() for the source embedding dropout seed, [3] one for
// the target's, [4] the positional encodings' parameters (src, then tgt; learned tables), [5] per encoder layer rng.next_u64() (its
// dropout seed) then the layer's draws, [6] the same per decoder layer, [7] as
// torch.nn.Transformer._reset_parameters: every parameter of "transformer.*" with ≥ 2 dimensions
// redrawn, in key order, from xavier_uniform U(−a, a), a = √(6 / (fan_in + fan_out)) (so the
// layers' own initialisation is overwritten, as in PyTorch; a shared_qk in_proj_weight [2D, D]
// uses the bound of the unshared [3D, D] matrix, as MultiheadAttention does), [8] head.
//
// Cost: a training forward is 2L sequential layer applications (sequential_steps); greedy decoding
// recomputes the whole decoder prefix at every step (no key/value cache): max_len decoder passes
// over prefixes of length 1..max_len, O(L·max_len²·D·(D + F)) projections and O(L·max_len³·D)
// attention work per sequence, plus one encoder pass.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/nn/dropout.hpp"
#include "seqlab/nn/embedding.hpp"
#include "seqlab/nn/linear.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/nn/positional_encoding.hpp"
#include "seqlab/nn/transformer_layer.hpp"

namespace seqlab {

/// cfg.model == "transformer_encoder_decoder" (added to model_names()); embedding input only;
/// one token embedding shared by source and target ("embedding.weight", Vaswani et al. §3.4),
/// positional encoding as the decoder-only model, L = num_layers encoder layers and L decoder
/// layers (nn.Transformer's num_encoder_layers = num_decoder_layers), final norms
/// "transformer.encoder.norm.*" / "transformer.decoder.norm.*" as torch.nn.Transformer,
/// layers "transformer.encoder.layers.{l}.*" / "transformer.decoder.layers.{l}.*", head "head.*".
/// (Full description in the file comment.)
class EncoderDecoderModel : public SequenceModel {
 public:
  /// Throws ConfigError for an invalid cfg (ModelConfig::validate: e.g. input = linear, n_heads
  /// not dividing hidden_size, head = last_position), std::invalid_argument if cfg.model is not
  /// "transformer_encoder_decoder".
  EncoderDecoderModel(const ModelConfig& cfg, Rng& rng);

  /// Teacher forcing: src [B, S], tgt_in [B, T] (target shifted right, starting with bos) ->
  /// logits [B, T, O]. backward(dlogits) (SequenceModel's) then adds all grads.
  /// Throws ShapeError if S or T is 0, the batch sizes differ, a padding mask set by set_padding
  /// is not [B, S] / [B, T], or (learned positions) S or T exceeds max_len (naming max_len);
  /// std::out_of_range for an id outside [0, V) (Embedding).
  Tensor3 forward(const IndexTensor2& src, const IndexTensor2& tgt_in);
  /// SequenceModel's single-input forward(ids) throws std::logic_error naming forward(src, tgt_in).
  Tensor3 forward(const IndexTensor2& ids) override;
  /// Linear input is not supported: throws std::logic_error.
  Tensor3 forward(const Tensor3& x) override;
  /// dlogits [B, T, O] of the last forward(src, tgt_in). ADDS dL/dθ into every Parameter::grad
  /// (the shared embedding receives both the source and the target part) and stores
  /// step_grad_norms() / input_grad_norms(). Throws std::logic_error before a forward(src, tgt_in)
  /// (or after greedy_decode, which keeps no state for backward), ShapeError for a wrong shape.
  void backward(const Tensor3& dlogits) override;

  /// Greedy decoding (argmax, first maximum): starts from bos, returns [B, max_len] generated ids
  /// (bos excluded). Eval-mode use; does not keep state for backward.
  /// Step k (k = 1..max_len) runs the decoder on [bos, ŷ_1 .. ŷ_{k−1}] [B, k] against the memory
  /// of one encoder pass and appends argmax_o logits[:, k−1, o], exactly what forward(src, that
  /// prefix) would give at position k−1 in eval mode. Source padding from set_padding is used;
  /// target padding is not (every prefix is full). The model is switched to eval mode for the
  /// call and back to its previous mode afterwards. No end-of-sequence id: always max_len steps.
  /// (rope_pi / rope_ntk: the scale follows the context length, here the prefix length k, so
  /// beyond train_len the result equals forward on each prefix, not on the whole [B, max_len].)
  /// Throws ConfigError naming output_size if output_size > vocab_size (a predicted id could not
  /// be fed back), std::out_of_range for bos or an id of src outside [0, V), ShapeError as forward
  /// (learned positions: max_len must not exceed cfg.max_len).
  IndexTensor2 greedy_decode(const IndexTensor2& src, std::int32_t bos, std::size_t max_len);

  /// Source / target key padding [B, S] / [B, T] (1 = padded) for later forwards, or nullptr.
  /// The masks must stay alive while used.
  void set_padding(const PaddingMask* src_padding, const PaddingMask* tgt_padding) {
    src_padding_ = src_padding;
    tgt_padding_ = tgt_padding;
  }
  const PaddingMask* src_padding() const { return src_padding_; }
  const PaddingMask* tgt_padding() const { return tgt_padding_; }

  /// Linear input is not supported: throws std::logic_error.
  const Tensor3& input_grad() const override;
  /// [2L, S + T] of the last backward. Columns 0..S−1 are source positions, S..S+T−1 target
  /// positions. Row l < L: ‖∂L/∂x_{l+1}[:, s]‖_F over [B, D] of encoder layer l's output at source
  /// position s (the total gradient, which reaches it only through the cross-attention to the
  /// memory); target columns 0. Row L + l: ‖∂L/∂y_{l+1}[:, t]‖_F of decoder layer l's output at
  /// target position t; source columns 0. Norms before the final norms. Throws std::logic_error
  /// before any backward.
  const Tensor2& step_grad_norms() const override;
  /// [S + T]: ‖∂L/∂u_j‖_F over [B, D] of the embedding outputs (before positions and dropout),
  /// source positions first, then target positions (both reach the shared embedding).
  /// Throws std::logic_error before any backward.
  const Tensor1& input_grad_norms() const override;

  /// e.g. "transformer_encoder_decoder: input=embedding(V=10, E=8) d_model=8 heads=2 d_ff=16
  /// layers=2+2 pos=sinusoidal norm=layer_norm(post) act=relu head=per_position(O=10) params=N".
  std::string describe() const override;
  /// 0: every output may depend on every source position and every earlier target position.
  std::size_t receptive_field() const override { return 0; }
  /// 2L for a training (teacher-forced) forward: the L encoder layers, then the L decoder layers,
  /// which need the finished memory; all positions of a layer run in parallel. (Greedy decoding
  /// of n tokens needs L + n·L: see the file comment.)
  std::size_t sequential_steps(std::size_t seq_len) const override;

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// Buffers: "src_dropout.rng", "tgt_dropout.rng", then every layer's and norm's under the keys
  /// of collect_parameters (BatchNorm statistics, dropout generators).
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;
  /// Forwards train/eval to the dropouts, layers and norms.
  void set_training(bool training) override;

  std::size_t num_layers() const { return encoder_layers.size(); }

  // Public layer members (attention probabilities via layers' self_attn / multihead_attn,
  // logit_asymmetry of the self-attentions, BatchNorm statistics via dynamic_cast of the norms).
  Embedding embedding;                                                   // "embedding.*"
  /// The encodings of the source and target stacks (always set; "none" is NoPositionalEncoding),
  /// parameters "src_pos_embedding.*" / "tgt_pos_embedding.*"; dynamic_cast for the concrete class.
  std::unique_ptr<PositionalEncoding> src_positional, tgt_positional;
  Dropout src_dropout, tgt_dropout;                                      // on embedding + PE
  std::vector<std::unique_ptr<TransformerEncoderLayer>> encoder_layers;  // "transformer.encoder.layers.{l}.*"
  std::unique_ptr<Norm> encoder_norm;                                    // "transformer.encoder.norm.*"
  std::vector<std::unique_ptr<TransformerDecoderLayer>> decoder_layers;  // "transformer.decoder.layers.{l}.*"
  std::unique_ptr<Norm> decoder_norm;                                    // "transformer.decoder.norm.*"
  std::optional<Linear> head;  // "head.*" Linear(D, O); always present once built (drawn last)

 private:
  Tensor3 encode(const IndexTensor2& src, const PaddingMask* src_pad);  // -> memory [B, S, D]
  Tensor3 decode(const IndexTensor2& tgt_in, const Tensor3& memory, const PaddingMask* src_pad,
                 const PaddingMask* tgt_pad);                            // -> logits [B, T, O]

  const PaddingMask* src_padding_ = nullptr;
  const PaddingMask* tgt_padding_ = nullptr;
  std::size_t num_params_ = 0;
  std::size_t B_ = 0, S_ = 0, T_ = 0;
  IndexTensor2 src_ids_, tgt_ids_;  // of the last forward (the shared embedding is re-run on them)
  bool has_forward_ = false, has_backward_ = false;
  Tensor2 step_norms_;   // [2L, S + T]
  Tensor1 input_norms_;  // [S + T]
};

/// Scalar parameter count of an encoder-decoder body (learned tables, both stacks, both final
/// norms; not the embedding or the head) from the sizes alone (formula in factory.hpp's
/// count_parameters). cfg must be valid.
std::size_t encoder_decoder_body_parameters(const ModelConfig& cfg);

}  // namespace seqlab

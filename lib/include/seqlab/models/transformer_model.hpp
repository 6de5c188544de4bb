#pragma once
// Transformer sequence models (the "transformer_encoder" and "transformer_decoder" families of
// ModelConfig): input layer -> positional encoding -> L Transformer layers -> final norm (pre-norm
// only) -> linear head. Build them with make_model (factory.hpp).
//
// Legend: B batch, T seq_len, D d_model = hidden_size (= the body input width E), h n_heads,
// hd = D / h head size, F d_ff, L num_layers (n_layers), O output_size.
//
// Body (u [B, T, D] -> y [B, T, D]):
//   z_0 = dropout(PE(u))           PE: the registered encoding cfg.positional_encoding names
//                                  (models/positional_registry.hpp, nn/positional_encoding.hpp):
//                                  sinusoidal (Vaswani et al. 2017 §3.5) or learned table
//                                  ("<model>.pos_embedding.weight" [max_len, D]) add to u; for
//                                  rope, rope_pi, rope_ntk, alibi and none PE(u) = u
//   z_l = layer_l(z_{l-1})         TransformerEncoderLayer (nn/transformer_layer.hpp), keys
//                                  "<model>.layers.{l}.*"; encoder: bidirectional self-attention;
//                                  decoder: causal mask (decoder-only / GPT block, Radford et al.
//                                  2018/2019), the same weights and computation as
//                                  TransformerDecoderLayer(cross_attention = false)
//   y = norm(z_L)                  pre-norm only ("<model>.norm.*"), as GPT-2's ln_f and
//                                  torch.nn.TransformerEncoder(norm=LayerNorm); post-norm: y = z_L
// The encoding is attached to every layer's self_attn (PositionalEncoding::attach): RoPE variants
// set one RotaryEmbedding(head_dim = hd, pairing = rope_pairing, scaling by name, train_len) on
// every self_attn, ALiBi set_alibi(true); set_context_length(T) at every forward (rope_pi /
// rope_ntk scale only beyond train_len).
// Every layer's self_attn runs the kernel cfg.attention_kernel names (auto | fused | materialised,
// MultiheadAttention::set_kernel; the same function either way, attention_probs() works with all).
// Key padding: set_padding(mask) makes every later forward use it as the self-attention's
// key_padding_mask [B, T] (1 = padded) and hands it to the norms (masked_batch_norm).
//
// Draw order from the rng: input layer, the embedding dropout seed (rng.next_u64()), the positional
// encoding's parameters (learned: its table; the built-ins other than learned draw nothing),
// layer 0..L-1 (each after one rng.next_u64() for its dropout seed), head.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/models/sequence_model.hpp"
#include "seqlab/nn/dropout.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/nn/positional_encoding.hpp"
#include "seqlab/nn/transformer_layer.hpp"

namespace seqlab {

class TransformerModel : public InputBodyHeadModel {
 public:
  /// cfg.model must be "transformer_encoder" or "transformer_decoder" (std::invalid_argument
  /// otherwise); throws ConfigError for an invalid cfg.
  TransformerModel(const ModelConfig& cfg, Rng& rng);

  /// 0: every output may depend on every (encoder) or every earlier (decoder) input: unbounded.
  std::size_t receptive_field() const override { return 0; }
  /// L: the layers run one after another; all T positions of a layer are processed in parallel.
  std::size_t sequential_steps(std::size_t seq_len) const override;

  /// Key padding [B, T] (1 = padded) used by every later forward (attention key padding and the
  /// norms), or nullptr to switch it off. The mask must stay alive while used. A forward whose
  /// [B, T] differs from the mask's shape throws ShapeError.
  void set_padding(const PaddingMask* padding) { padding_ = padding; }
  const PaddingMask* padding() const { return padding_; }

  bool causal() const { return cfg_.model == "transformer_decoder"; }
  std::size_t num_layers() const { return layers.size(); }

  std::vector<std::unique_ptr<TransformerEncoderLayer>> layers;  // "layers.{l}.*"
  /// The encoding cfg.positional_encoding names (always set; "none" is NoPositionalEncoding).
  /// Its parameters are "pos_embedding.*" (learned: "pos_embedding.weight" [max_len, D]); the
  /// concrete class is reachable by dynamic_cast (e.g. RotaryPositionalEncoding::rotary()).
  std::unique_ptr<PositionalEncoding> positional;
  std::unique_ptr<Norm> final_norm;                              // "norm.*" (pre-norm only)
  Dropout emb_dropout;                                           // on u + PE

 protected:
  /// u [B, T, D] -> y [B, T, D]. Throws ShapeError naming max_len if T exceeds the encoding's
  /// max_positions() (learned positions: T > max_len), ShapeError if the padding mask is not [B, T].
  Tensor3 body_forward(const Tensor3& u) override;
  /// step_norms [L, T]: ‖∂L/∂z_l[:, t]‖_F of every layer output z_l (before the final norm).
  Tensor3 body_backward(const Tensor3& dh, Tensor2& step_norms) override;
  void collect_body_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void set_body_training(bool training) override;
  void collect_body_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;
  std::string describe_body() const override;

 private:
  const PaddingMask* padding_ = nullptr;
  const PaddingMask* used_padding_ = nullptr;  // of the last forward
};

/// Scalar parameter count of a transformer body (positional encoding's parameters from its registry
/// entry, layers, final norm) from the sizes alone (formula in factory.hpp's count_parameters).
/// cfg must be valid.
std::size_t transformer_body_parameters(const ModelConfig& cfg);

}  // namespace seqlab

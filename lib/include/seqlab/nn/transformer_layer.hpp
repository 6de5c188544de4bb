#pragma once
// Transformer encoder and decoder layers (Vaswani et al. 2017, arXiv 1706.03762 §3.1: each
// sub-layer is wrapped as LayerNorm(x + Sublayer(x)), with dropout on the sub-layer output, §5.4),
// with the norm placed after the residual sum ("post", the paper's form) or before the sub-layer
// ("pre", Xiong et al. 2020, arXiv 2002.04745 Fig. 1 and Table 1, Pre-LN; GPT-2), as
// torch.nn.TransformerEncoderLayer / torch.nn.TransformerDecoderLayer (batch_first=True,
// norm_first = (norm_placement == "pre");
// https://pytorch.org/docs/1.13/generated/torch.nn.TransformerEncoderLayer.html,
// https://pytorch.org/docs/1.13/generated/torch.nn.TransformerDecoderLayer.html).
//
// Legend: B batch, T seq_len (target length in the decoder), S memory length, D d_model,
// h n_heads, F d_ff. Activations are [B, T, D]; masks as seqlab::AttentionMask (attention.hpp).
//
// Layers follow the layer contract: forward keeps what backward needs (the sub-modules keep their
// own caches), backward takes dL/dy [B, T, D], returns dL/dx [B, T, D] and ADDS into every
// Parameter::grad. The norm is any make_norm name; padding_for_norms [B, T] (1 = padded) is handed
// to every norm of the layer (only masked_batch_norm uses it to exclude padded positions from its
// statistics; the others check its shape).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/dropout.hpp"
#include "seqlab/nn/feed_forward.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

struct TransformerLayerConfig {
  std::size_t d_model = 0;  // D, divisible by n_heads
  std::size_t n_heads = 0;  // h
  std::size_t d_ff = 0;     // F, inner size of the feed-forward block
  std::string activation = "relu";      // relu | gelu (exact erf form), as FeedForward
  float dropout = 0;                    // drop probability in [0, 1) of every dropout of the layer
  std::string norm = "layer_norm";      // a make_norm name: layer_norm, rms_norm, batch_norm,
                                        // masked_batch_norm, none
  std::string norm_placement = "post";  // pre | post
  bool shared_qk = false;   // self-attention with W_Q = W_K (MultiheadAttention's shared_qk);
                            // the decoder's cross-attention never shares
  AttentionKernel attention_kernel = AttentionKernel::automatic;  // every attention's kernel
                            // (MultiheadAttention::set_kernel; the same function either way)
  std::uint64_t seed = 0;   // dropout streams: dropout layer k draws from Rng(derive_seed(seed, k))
  /// Throws std::invalid_argument naming the key, its value and what is allowed:
  /// d_model = 0, n_heads = 0, d_model % n_heads != 0, d_ff = 0, activation not relu|gelu,
  /// dropout outside [0, 1) or NaN, norm not a make_norm name, norm_placement not pre|post.
  void validate() const;
  bool pre_norm() const { return norm_placement == "pre"; }
};

/// One encoder layer, as torch.nn.TransformerEncoderLayer(D, h, F, dropout, activation,
/// batch_first=True, norm_first=pre):
///   post: x1 = norm1(x + dropout1(self_attn(x)));        y = norm2(x1 + dropout2(ff(x1)))
///   pre:  x1 = x + dropout1(self_attn(norm1(x)));        y = x1 + dropout2(ff(norm2(x1)))
/// with ff(z) = linear2(dropout(act(linear1(z)))) (FeedForward, its inner dropout is PyTorch's
/// TransformerEncoderLayer.dropout).
/// Parameters (state_dict keys, in this order): "self_attn.in_proj_weight" [3D, D] ([2D, D] with
/// shared_qk), "self_attn.in_proj_bias" [3D] ([2D]), "self_attn.out_proj.weight" [D, D],
/// "self_attn.out_proj.bias" [D], "linear1.weight" [F, D], "linear1.bias" [F],
/// "linear2.weight" [D, F], "linear2.bias" [D], then "norm1.*", "norm2.*" as the chosen norm has
/// them (layer_norm/batch_norm: weight, bias [D]; rms_norm: weight [D]; none: nothing).
class TransformerEncoderLayer : public Module {
 public:
  /// Validates cfg (errors of TransformerLayerConfig::validate, before anything is drawn), then
  /// initialises as PyTorch, in its construction order from `rng`: self_attn (out_proj as a
  /// Linear, then xavier in_proj_weight), linear1, linear2; norms at their defaults (γ = 1,
  /// β = 0). Dropout seeds: dropout1 derive_seed(seed, 1), dropout2 derive_seed(seed, 2), the
  /// feed-forward's inner dropout derive_seed(seed, 3).
  TransformerEncoderLayer(const TransformerLayerConfig& cfg, Rng& rng);

  /// x [B, T, D] -> y [B, T, D]. mask: causal and/or key padding [B, T] of the self-attention;
  /// padding_for_norms [B, T] or nullptr. Throws ShapeError if x is not [*, *, D] or a mask is
  /// not [B, T]; std::invalid_argument from a BatchNorm in train mode with < 2 positions.
  Tensor3 forward(const Tensor3& x, const AttentionMask& mask,
                  const PaddingMask* padding_for_norms = nullptr);
  /// dy [B, T, D] -> dx [B, T, D]; ADDS into every parameter's grad. Throws std::logic_error
  /// before any forward, ShapeError if dy is not the shape of the last forward's output.
  Tensor3 backward(const Tensor3& dy);

  /// Forwards train/eval to the dropouts (dropout1, dropout2, ff's) and the norms.
  void set_training(bool training) override;
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// The norms' buffers ("norm1.running_mean"... for BatchNorm) and the dropout generators
  /// ("dropout.rng" of the feed-forward, "dropout1.rng", "dropout2.rng"[, "dropout3.rng"]).
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;

  const TransformerLayerConfig& config() const { return cfg_; }

  MultiheadAttention self_attn;  // "self_attn.*" (RoPE/ALiBi hooks, attention_probs())
  FeedForward ff;                // "linear1.*", "linear2.*" (and the inner dropout)
  std::unique_ptr<Norm> norm1;   // "norm1.*" (BatchNorm statistics readable via dynamic_cast)
  std::unique_ptr<Norm> norm2;   // "norm2.*"
  Dropout dropout1;              // on the self-attention branch
  Dropout dropout2;              // on the feed-forward branch

 private:
  TransformerLayerConfig cfg_;
  std::size_t b_ = 0, t_ = 0;
  bool cached_ = false;
};

/// One decoder layer, as torch.nn.TransformerDecoderLayer(D, h, F, dropout, activation,
/// batch_first=True, norm_first=pre) when built with cross_attention = true:
///   post: x1 = norm1(x + dropout1(self_attn(x)))
///         x2 = norm2(x1 + dropout2(multihead_attn(x1, memory)))
///         y  = norm3(x2 + dropout3(ff(x2)))
///   pre:  x1 = x + dropout1(self_attn(norm1(x)))
///         x2 = x1 + dropout2(multihead_attn(norm2(x1), memory))   (memory is not normalised)
///         y  = x2 + dropout3(ff(norm3(x2)))
/// cross_attention = false is the decoder-only (GPT-style) block: there is no cross-attention
/// sub-layer, so no "multihead_attn.*" and no third norm; the feed-forward norm is then "norm2"
/// (x1 as above, y = norm2(x1 + dropout3(ff(x1))) post, y = x1 + dropout3(ff(norm2(x1))) pre),
/// i.e. the same computation and keys as TransformerEncoderLayer (with a causal mask).
/// Keys in order: "self_attn.*", ["multihead_attn.*"], "linear1.*", "linear2.*", "norm1.*",
/// "norm2.*", ["norm3.*"] (bracketed: only with cross_attention).
/// The self-attention mask is the caller's: pass causal = true for an autoregressive decoder (as
/// PyTorch's tgt_mask, which TransformerDecoderLayer does not add by itself).
class TransformerDecoderLayer : public Module {
 public:
  /// Validates cfg, then draws as PyTorch's construction order: self_attn, multihead_attn (only
  /// with cross_attention), linear1, linear2. Dropout seeds: dropout1..3 derive_seed(seed, 1..3),
  /// the feed-forward's inner dropout derive_seed(seed, 4). Throws as TransformerLayerConfig::validate.
  TransformerDecoderLayer(const TransformerLayerConfig& cfg, Rng& rng, bool cross_attention = true);

  /// x [B, T, D], memory [B, S, D] (must be non-null iff cross_attention) -> y [B, T, D].
  /// self_mask: the self-attention's mask (causal; key padding [B, T]); memory_mask: the
  /// cross-attention's (key padding [B, S], PyTorch's memory_key_padding_mask; ignored without
  /// cross-attention); padding_for_norms [B, T] or nullptr. Throws std::invalid_argument naming
  /// memory if it is given without cross-attention or missing with it; ShapeError for wrong shapes.
  Tensor3 forward(const Tensor3& x, const Tensor3* memory, const AttentionMask& self_mask,
                  const AttentionMask& memory_mask = {}, const PaddingMask* padding_for_norms = nullptr);
  /// dy [B, T, D] -> dx [B, T, D]; dL/dmemory goes to memory_grad(). ADDS into parameter grads.
  /// Throws std::logic_error before any forward, ShapeError if dy's shape differs from y's.
  Tensor3 backward(const Tensor3& dy);
  /// dL/dmemory [B, S, D] of the last backward. Throws std::logic_error without cross-attention
  /// or before a backward.
  const Tensor3& memory_grad() const;

  /// Forwards train/eval to the dropouts and the norms.
  void set_training(bool training) override;
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// The norms' buffers ("norm1.running_mean"... for BatchNorm) and the dropout generators
  /// ("dropout.rng" of the feed-forward, "dropout1.rng", "dropout2.rng"[, "dropout3.rng"]).
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;

  const TransformerLayerConfig& config() const { return cfg_; }
  bool cross_attention() const { return cross_; }

  MultiheadAttention self_attn;                        // "self_attn.*"
  std::unique_ptr<MultiheadAttention> multihead_attn;  // "multihead_attn.*"; null without cross
  FeedForward ff;                                      // "linear1.*", "linear2.*"
  std::unique_ptr<Norm> norm1;                         // before/after self-attention
  std::unique_ptr<Norm> norm2;                         // cross-attention's (ff's without cross)
  std::unique_ptr<Norm> norm3;                         // ff's; null without cross
  Dropout dropout1, dropout2, dropout3;                // self, cross, ff branches (dropout2
                                                       // unused without cross)

 private:
  TransformerLayerConfig cfg_;
  bool cross_;
  std::size_t b_ = 0, t_ = 0;
  bool cached_ = false;
  bool has_memory_grad_ = false;
  Tensor3 dmemory_;  // [B, S, D]
};

}  // namespace seqlab

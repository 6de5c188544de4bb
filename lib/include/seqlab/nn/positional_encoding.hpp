#pragma once
// PositionalEncoding: the one interface through which the Transformer models (TransformerModel,
// EncoderDecoderModel) use a positional encoding, whatever kind it is. Position information enters
// a Transformer in one of three places, and the interface has one hook for each:
//
//   1. added to the input          forward(x) / backward(dy) on the embeddings [B, T, D]
//                                  (sinusoidal, Vaswani et al. 2017 §3.5; learned tables, GPT-2)
//   2. applied to q and k          attach(self_attn) sets MultiheadAttention::set_rope on every
//      inside attention            self-attention layer (RoPE, Su et al. 2021 eq. 34, and its
//                                  scaled variants); set_context_length(T) at every model forward
//   3. a bias on the scores        attach(self_attn) sets MultiheadAttention::set_alibi
//                                  (ALiBi, Press et al. 2021 §3)
//
// Every hook has a neutral default (identity, nothing), so an encoding overrides only the hooks of
// its kind. A model, per stack (the decoder-only model has one; the encoder-decoder one for the
// source and one for the target, each with its own parameters):
//   construction: enc = make_positional_encoding(cfg, rng)            (models/positional_registry.hpp)
//                 enc->attach(layer.self_attn) for every self-attention layer (never cross-attention)
//   forward:      check pos_offset + T <= enc->max_positions() (if non-zero; ShapeError naming max_len)
//                 enc->set_context_length(T);  z = enc->forward(u)    then dropout, then the layers
//   backward:     du = enc->backward(dz)   (after the embedding dropout's backward)
//   parameters:   enc->collect_parameters("<model>.pos_embedding." or "src_pos_embedding." ...)
//
// A new encoding is a class derived from PositionalEncoding plus one registration line
// (models/positional_registry.hpp; README "Extending seqlab"). Kinds 2 and 3 go through the hooks
// MultiheadAttention has (a RotaryEmbedding with any RopeConfig, ALiBi slopes); a new kind of
// attention-side encoding (e.g. a learned relative bias) needs a new hook there.
//
// Legend: B batch, T seq_len, D d_model. Layer contract (DESIGN.md): forward keeps what backward
// needs, backward ADDS into parameter grads and returns dL/dx.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

class MultiheadAttention;  // seqlab/nn/attention.hpp

class PositionalEncoding : public Module {
 public:
  /// Input part: x [B, T, D] -> y [B, T, D] for positions pos_offset .. pos_offset + T − 1.
  /// Default: y = x (encodings that act inside attention add nothing). Overrides document their
  /// formula, shapes and errors (ShapeError for x not [*, *, D]).
  virtual Tensor3 forward(const Tensor3& x, std::size_t pos_offset = 0);
  /// dy [B, T, D] of the last forward -> dx [B, T, D]; ADDS into the encoding's parameter grads.
  /// Default: dx = dy.
  virtual Tensor3 backward(const Tensor3& dy);

  /// Attention part: hooks the encoding into one self-attention layer (RoPE: set_rope with a
  /// RotaryEmbedding the encoding owns; ALiBi: set_alibi(true)). Called once per self-attention
  /// layer when the model is built; the encoding must outlive the layer's forward/backward calls
  /// (the models own both). Default: nothing.
  virtual void attach(MultiheadAttention& self_attn);
  /// Called at the start of every model forward with the length T being processed (RoPE's
  /// position interpolation / NTK scaling beyond the training length). Default: nothing.
  virtual void set_context_length(std::size_t len);

  /// The largest pos_offset + T forward accepts (a learned table's max_len); 0 = unbounded.
  /// Models check it before calling forward and throw ShapeError naming max_len.
  virtual std::size_t max_positions() const { return 0; }

  /// Default: no parameters. An encoding with parameters lists them with PyTorch-style keys
  /// ("weight" for a table), which the model prefixes ("<model>.pos_embedding.").
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

 protected:
  PositionalEncoding() = default;  // a base: build a concrete encoding (NoPositionalEncoding...)
};

}  // namespace seqlab

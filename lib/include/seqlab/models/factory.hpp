#pragma once
// The model factory (DESIGN.md, models/): every sequence model from one ModelConfig, its
// parameter count without building it, and hidden-size matching to a parameter budget so
// experiments compare families at equal size.
//
// Legend: V vocab_size, D input_size, E body input width, H hidden_size, L num_layers,
// O output_size, k kernel_size, C_i TCN channels (C_{-1} = E).
#include <cstddef>
#include <memory>

#include "seqlab/core/rng.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/models/sequence_model.hpp"

namespace seqlab {

/// Builds the model cfg.model names with its registry entry's create (models/model_registry.hpp;
/// a family registered by the program is built the same way). Built-ins:
/// "rnn", "lstm", "gru" -> RecurrentModel, "tcn" -> TCNModel,
/// "transformer_encoder", "transformer_decoder" -> TransformerModel,
/// "transformer_encoder_decoder" -> EncoderDecoderModel (models/encoder_decoder_model.hpp;
/// dynamic_cast to call forward(src, tgt_in) and greedy_decode),
/// parameters drawn from rng (draw order in each model's header). Throws ConfigError for an
/// invalid cfg (ModelConfig::validate).
std::unique_ptr<SequenceModel> make_model(const ModelConfig& cfg, Rng& rng);

/// Scalar parameter count of make_model(cfg, ·), computed from the sizes alone: input layer + the
/// family's registry entry's body_parameters(cfg) + head. For the built-ins:
///   input  embedding V·E | linear projection D·E + E | none
///   rnn/lstm/gru, G = 1/4/3:  Σ_k G·H·(in_k + H) + 2·G·H,  in_0 = E, in_k = H
///   tcn    Σ_i [C_i·C_{i-1}·k + C_i  +  C_i·C_i·k + C_i  +  (C_{i-1} != C_i ? C_i·C_{i-1} + C_i : 0)
///               + (weight_norm ? 2·C_i : 0)]
///   transformer (D = H, F = d_ff, P = 3, or 2 with shared_qk, n(D) = the norm's registry entry's
///          num_parameters(D): 2D layer_norm/batch_norm, D rms_norm, 0 none; pe = the positional
///          encoding's registry entry's num_parameters(cfg): max_len·D learned, 0 the others):  pe
///          + L·[P·D·D + P·D + D·D + D + F·D + F + D·F + D + 2·n(D)] + (pre ? n(D) : 0)
///   transformer_encoder_decoder (embedding V·D shared by source and target):
///          2·pe                                     (one encoding per stack)
///          + L·[P·D·D + P·D + D·D + D + F·D + F + D·F + D + 2·n(D)]            encoder layers
///          + L·[P·D·D + P·D + D·D + D + 3·D·D + 3·D + D·D + D + F·D + F + D·F + D + 3·n(D)]
///                                                   decoder layers (self, cross, feed-forward)
///          + 2·n(D)                                 final norms (always, as nn.Transformer)
///   head   H·O + O   (H = the body's output width)
/// Throws ConfigError for an invalid cfg.
std::size_t count_parameters(const ModelConfig& cfg);

/// cfg with hidden_size set to the largest value h >= 1 for which count_parameters <= budget
/// (the count grows with h, so this is a binary search); for tcn, h is the width of every level.
/// Transformer families (is_transformer()): d_model varies in steps of m, the smallest multiple
/// of n_heads that keeps cfg valid: m = lcm(n_heads, the positional encoding's d_model_multiple)
/// (models/positional_registry.hpp: m = 2·n_heads with rope* for an even head size; m = lcm(n_heads,
/// 2) with sinusoidal for an even d_model; n_heads otherwise): the result has hidden_size =
/// embedding_dim = d_model = k·m for the largest k >= 1 within the budget, and
///   d_ff = max(1, round(d_ff_ratio · d_model))  if d_ff_ratio > 0 (e.g. 4, Vaswani et al. §3.3),
///   d_ff = cfg.d_ff, unchanged                  if d_ff_ratio = 0 (d_ff_ratio is ignored for
///                                               the other families).
/// num_layers, n_heads and everything else stay as given.
/// Throws ConfigError: key "channels" if cfg is a tcn with explicit channels (set hidden_size and
/// num_layers instead), key "param_budget" if even h = 1 (transformers: d_model = m) exceeds the
/// budget (allowed: that count or more), key "d_ff_ratio" if it is negative or NaN, key
/// "embedding_dim" for a transformer with linear input and embedding_dim = 0 (d_model would be
/// input_size, which the budget cannot change), or for any other invalid field.
ModelConfig hidden_size_for_budget(ModelConfig cfg, std::size_t budget, double d_ff_ratio = 0);

}  // namespace seqlab

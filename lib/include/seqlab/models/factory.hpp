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

/// Builds the model cfg.model names: "rnn", "lstm", "gru" -> RecurrentModel, "tcn" -> TCNModel,
/// "transformer_encoder", "transformer_decoder" -> TransformerModel,
/// parameters drawn from rng (draw order in each model's header). Throws ConfigError for an
/// invalid cfg (ModelConfig::validate).
std::unique_ptr<SequenceModel> make_model(const ModelConfig& cfg, Rng& rng);

/// Scalar parameter count of make_model(cfg, ·), computed from the sizes alone:
///   input  embedding V·E | linear projection D·E + E | none
///   rnn/lstm/gru, G = 1/4/3:  Σ_k G·H·(in_k + H) + 2·G·H,  in_0 = E, in_k = H
///   tcn    Σ_i [C_i·C_{i-1}·k + C_i  +  C_i·C_i·k + C_i  +  (C_{i-1} != C_i ? C_i·C_{i-1} + C_i : 0)
///               + (weight_norm ? 2·C_i : 0)]
///   transformer (D = H, F = d_ff, P = 3, or 2 with shared_qk, n(D) = 2D layer_norm/batch_norm,
///          D rms_norm, 0 none):  learned ? max_len·D : 0
///          + L·[P·D·D + P·D + D·D + D + F·D + F + D·F + D + 2·n(D)] + (pre ? n(D) : 0)
///   head   H·O + O   (H = the body's output width)
/// Throws ConfigError for an invalid cfg.
std::size_t count_parameters(const ModelConfig& cfg);

/// cfg with hidden_size set to the largest value h >= 1 for which count_parameters <= budget
/// (the count grows with h, so this is a binary search); for tcn, h is the width of every level.
/// Throws ConfigError: key "channels" if cfg is a tcn with explicit channels (set hidden_size and
/// num_layers instead), key "param_budget" if even h = 1 exceeds the budget (allowed: the h = 1
/// count or more), or for any other invalid field.
ModelConfig hidden_size_for_budget(ModelConfig cfg, std::size_t budget);

}  // namespace seqlab

#pragma once
// The model-family registry: ModelConfig::model names an entry here; make_model, count_parameters
// and ModelConfig::validate dispatch through it (no list of families anywhere else).
//
// Built-ins, in this order (lib/src/models/model_registry.cpp): "rnn", "lstm", "gru"
// (RecurrentModel), "tcn" (TCNModel), "transformer_encoder", "transformer_decoder"
// (TransformerModel), "transformer_encoder_decoder" (EncoderDecoderModel).
//
// Adding a family (README "Extending seqlab"): a SequenceModel subclass (models/sequence_model.hpp;
// InputBodyHeadModel gives the input layer and the head for free), and one registration line:
//   SEQLAB_REGISTER(seqlab::model_registry(), "my_rnn",
//                   seqlab::ModelEntry{seqlab::ModelFamily::recurrent, "my cell",
//                       [](const seqlab::ModelConfig& c, seqlab::Rng& rng) {
//                         return std::make_unique<MyModel>(c, rng); },
//                       my_body_parameters, seqlab::validate_recurrent_fields});
// in a .cpp of your executable, or `r.add(...)` in register_builtin_models for a library family.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/registry.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/models/sequence_model.hpp"

namespace seqlab {

/// Which shared fields a family uses: ModelConfig::is_recurrent() / is_transformer() answer from
/// it, and hidden_size_for_budget steps d_model (n_heads, positional encoding) for transformers.
enum class ModelFamily { recurrent, convolutional, transformer, other };

struct ModelEntry {
  ModelFamily family = ModelFamily::other;
  /// One line for --help and docs.
  std::string description;
  /// The model for a valid cfg (make_model validates first); parameters drawn from rng.
  std::function<std::unique_ptr<SequenceModel>(const ModelConfig& cfg, Rng& rng)> create;
  /// Scalar parameters of the body: everything except the input layer (embedding V·E or
  /// projection D·E + E) and the head (body_output_size()·O + O), which count_parameters adds.
  /// cfg is valid.
  std::function<std::size_t(const ModelConfig& cfg)> body_parameters;
  /// The family's own fields, checked by ModelConfig::validate after the input fields (vocab_size
  /// / input_size, embedding_dim, padding_idx) and before dropout, output_size, head. Throws
  /// ConfigError. The built-in families' checks are public: validate_recurrent_fields,
  /// validate_tcn_fields, validate_transformer_fields (model_config.hpp). Empty: none.
  std::function<void(const ModelConfig& cfg)> validate_body;
  /// Optional extra checks right after `input` (e.g. embedding input only) and after `head`
  /// (e.g. per_position only). Empty: none.
  std::function<void(const ModelConfig& cfg)> validate_input;
  std::function<void(const ModelConfig& cfg)> validate_head;
};

/// The registry (core/registry.hpp), built on first use with the built-ins above.
Registry<ModelEntry>& model_registry();

}  // namespace seqlab

#pragma once
// The positional-encoding registry: ModelConfig::positional_encoding names an entry here, and the
// Transformer models build their encoding from it (nn/positional_encoding.hpp has the interface).
//
// Built-ins, in this order (lib/src/models/positional_registry.cpp):
//   sinusoidal  SinusoidalEncoding, added to the input (Vaswani et al. 2017 §3.5); even d_model
//   learned     LearnedPositionalEmbedding [max_len, D], added to the input; max_len >= 1
//   rope        RotaryPositionalEncoding (Su et al. 2021 eq. 34); even head size, rope_pairing
//   rope_pi     RoPE with position interpolation beyond train_len (Chen et al. 2023 §2.2)
//   rope_ntk    RoPE with NTK-aware base scaling beyond train_len (bloc97 2023; YaRN §3.1)
//   alibi       AlibiPositionalEncoding, bias on the scores (Press et al. 2021 §3)
//   none        NoPositionalEncoding
//   t5_bias     T5RelativeBiasEncoding, a learned bias per head and distance bucket on the scores
//               (Raffel et al. 2020 §2.1); relative_buckets, relative_max_distance
//
// Adding an encoding (README "Extending seqlab"): a class derived from PositionalEncoding, and one
// registration line, either in your executable
//   SEQLAB_REGISTER(seqlab::positional_encoding_registry(), "ramp",
//                   seqlab::PositionalEncodingEntry{"linear ramp added to the input",
//                       [](const seqlab::ModelConfig& c, seqlab::Rng&) {
//                         return std::make_unique<RampEncoding>(c.hidden_size); }});
// (experiments/custom_example/ramp_encoding.cpp), or, for a library built-in, one `r.add(...)` in
// register_builtin_positional_encodings (lib/src/models/positional_registry.cpp). Then
// positional_encoding = ramp works in every ModelConfig, model, count_parameters and
// hidden_size_for_budget, and in every experiment that takes its choices from
// positional_encoding_names().
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/registry.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/nn/positional_encoding.hpp"

namespace seqlab {

struct PositionalEncodingEntry {
  /// One line for --help and docs: where it acts and the source of its formula.
  std::string description;
  /// One encoding for a stack of width D = cfg.hidden_size with cfg.n_heads heads (cfg is valid:
  /// validate below has passed). Parameters are drawn from rng here; the models call it where the
  /// draw order of their header puts the positional table (after the embedding dropout seeds,
  /// before the layers; the encoder-decoder calls it twice: source, then target).
  std::function<std::unique_ptr<PositionalEncoding>(const ModelConfig& cfg, Rng& rng)> create;
  /// Scalar parameters of one create(cfg) (count_parameters). Empty: 0.
  std::function<std::size_t(const ModelConfig& cfg)> num_parameters;
  /// Checks the fields the encoding needs (throws ConfigError naming the field). ModelConfig::
  /// validate calls it for transformer families right after accepting the name. Empty: no checks.
  std::function<void(const ModelConfig& cfg)> validate;
  /// d_model must be a multiple of this as well as of n_heads (hidden_size_for_budget steps
  /// d_model by lcm(n_heads, it)); it may depend on cfg.n_heads (>= 1 when called). Empty: 1.
  /// Built-ins: sinusoidal 2 (sin/cos pairs), rope* 2·n_heads (an even head size).
  std::function<std::size_t(const ModelConfig& cfg)> d_model_multiple;
};

/// The registry (core/registry.hpp), built on first use with the built-ins above.
Registry<PositionalEncodingEntry>& positional_encoding_registry();
/// positional_encoding_registry().names(): for --help choices (OptionSpec::one_of) and messages.
const std::vector<std::string>& positional_encoding_names();

/// The encoding cfg.positional_encoding names, built by its entry. Throws UnknownNameError for an
/// unregistered name; otherwise what the entry's create throws. (Models validate cfg first.)
std::unique_ptr<PositionalEncoding> make_positional_encoding(const ModelConfig& cfg, Rng& rng);
/// Scalar parameters of one make_positional_encoding(cfg). Throws UnknownNameError.
std::size_t positional_encoding_parameters(const ModelConfig& cfg);
/// The entry's d_model_multiple(cfg), or 1 (also for an unregistered name, which validate rejects).
std::size_t positional_encoding_d_model_multiple(const ModelConfig& cfg);

}  // namespace seqlab

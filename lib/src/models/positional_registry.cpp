// The positional-encoding registry and its built-ins (models/positional_registry.hpp). The
// built-ins are registered in this file, which defines the registry function every lookup calls,
// so the static library always links them (core/registry.hpp).
#include "seqlab/models/positional_registry.hpp"

#include <memory>
#include <string>

#include "seqlab/nn/positional.hpp"

namespace seqlab {

namespace {

std::unique_ptr<PositionalEncoding> make_rope(const ModelConfig& c, RopeScaling scaling) {
  RopeConfig rc;
  rc.head_dim = c.hidden_size / c.n_heads;
  rc.pairing = c.rope_pairing == "halves" ? RopePairing::halves : RopePairing::interleaved;
  rc.scaling = scaling;
  rc.train_len = c.train_len;
  return std::make_unique<RotaryPositionalEncoding>(rc);
}

// RoPE rotates pairs of every head: an even head size; rope_pairing names the pairs.
void validate_rope(const ModelConfig& c) {
  if ((c.hidden_size / c.n_heads) % 2 != 0)
    throw ConfigError("n_heads", std::to_string(c.n_heads),
                      "a divisor of hidden_size = " + std::to_string(c.hidden_size) +
                          " giving an even head size hidden_size / n_heads (now " +
                          std::to_string(c.hidden_size / c.n_heads) + ") for positional_encoding = " +
                          c.positional_encoding);
  require_one_of("rope_pairing", c.rope_pairing, {"interleaved", "halves"});
}

std::size_t rope_multiple(const ModelConfig& c) { return 2 * c.n_heads; }

// Order = the order of messages and --help choices.
void register_builtin_positional_encodings(Registry<PositionalEncodingEntry>& r) {
  r.add("sinusoidal",
        {"sin/cos table added to the input (Vaswani et al. 2017 sec. 3.5); even d_model",
         [](const ModelConfig& c, Rng&) -> std::unique_ptr<PositionalEncoding> {
           return std::make_unique<SinusoidalEncoding>(c.hidden_size);
         },
         {},
         [](const ModelConfig& c) {
           if (c.hidden_size % 2 != 0)
             throw ConfigError("hidden_size", std::to_string(c.hidden_size),
                               "even with positional_encoding = sinusoidal");
         },
         [](const ModelConfig&) { return std::size_t{2}; }});
  r.add("learned",
        {"trained [max_len, d_model] table added to the input (GPT-2, BERT)",
         [](const ModelConfig& c, Rng& rng) -> std::unique_ptr<PositionalEncoding> {
           return std::make_unique<LearnedPositionalEmbedding>(c.max_len, c.hidden_size, rng);
         },
         [](const ModelConfig& c) { return c.max_len * c.hidden_size; },
         [](const ModelConfig& c) { require_positive("max_len", c.max_len); },
         {}});
  r.add("rope",
        {"rotary embedding of q and k (Su et al. 2021, RoFormer eq. 34)",
         [](const ModelConfig& c, Rng&) { return make_rope(c, RopeScaling::none); },
         {},
         validate_rope,
         rope_multiple});
  r.add("rope_pi",
        {"RoPE with position interpolation beyond train_len (Chen et al. 2023 sec. 2.2)",
         [](const ModelConfig& c, Rng&) { return make_rope(c, RopeScaling::position_interpolation); },
         {},
         [](const ModelConfig& c) {
           validate_rope(c);
           require_positive("train_len", c.train_len);
         },
         rope_multiple});
  r.add("rope_ntk",
        {"RoPE with NTK-aware base scaling beyond train_len (bloc97 2023; Peng et al. 2023 sec. 3.1)",
         [](const ModelConfig& c, Rng&) { return make_rope(c, RopeScaling::ntk); },
         {},
         [](const ModelConfig& c) {
           validate_rope(c);
           require_positive("train_len", c.train_len);
         },
         rope_multiple});
  r.add("alibi",
        {"linear distance bias on the attention scores (Press et al. 2021 sec. 3)",
         [](const ModelConfig&, Rng&) -> std::unique_ptr<PositionalEncoding> {
           return std::make_unique<AlibiPositionalEncoding>();
         },
         {}, {}, {}});
  r.add("none",
        {"no position information",
         [](const ModelConfig&, Rng&) -> std::unique_ptr<PositionalEncoding> {
           return std::make_unique<NoPositionalEncoding>();
         },
         {}, {}, {}});
  r.add("t5_bias",
        {"learned bias per head and log-spaced distance bucket on the scores (Raffel et al. 2020 T5 sec. 2.1)",
         [](const ModelConfig& c, Rng& rng) -> std::unique_ptr<PositionalEncoding> {
           return std::make_unique<T5RelativeBiasEncoding>(c.n_heads, c.hidden_size, c.relative_buckets,
                                                           c.relative_max_distance, rng);
         },
         [](const ModelConfig& c) { return c.relative_buckets * c.n_heads; },
         [](const ModelConfig& c) {
           if (c.relative_buckets < 4 || c.relative_buckets % 2 != 0)
             throw ConfigError("relative_buckets", std::to_string(c.relative_buckets),
                               "an even integer >= 4 for positional_encoding = t5_bias");
           if (c.relative_max_distance <= c.relative_buckets / 2)
             throw ConfigError("relative_max_distance", std::to_string(c.relative_max_distance),
                               "an integer > relative_buckets / 2 = " + std::to_string(c.relative_buckets / 2) +
                                   " for positional_encoding = t5_bias");
         },
         {}});
}

}  // namespace

Registry<PositionalEncodingEntry>& positional_encoding_registry() {
  static Registry<PositionalEncodingEntry> registry = [] {
    Registry<PositionalEncodingEntry> r("positional_encoding");
    register_builtin_positional_encodings(r);
    return r;
  }();
  return registry;
}

const std::vector<std::string>& positional_encoding_names() {
  return positional_encoding_registry().names();
}

std::unique_ptr<PositionalEncoding> make_positional_encoding(const ModelConfig& cfg, Rng& rng) {
  return positional_encoding_registry().get(cfg.positional_encoding).create(cfg, rng);
}

std::size_t positional_encoding_parameters(const ModelConfig& cfg) {
  const PositionalEncodingEntry& e = positional_encoding_registry().get(cfg.positional_encoding);
  return e.num_parameters ? e.num_parameters(cfg) : 0;
}

std::size_t positional_encoding_d_model_multiple(const ModelConfig& cfg) {
  const PositionalEncodingEntry* e = positional_encoding_registry().find(cfg.positional_encoding);
  if (e == nullptr || !e->d_model_multiple) return 1;
  const std::size_t m = e->d_model_multiple(cfg);
  return m == 0 ? 1 : m;
}

}  // namespace seqlab

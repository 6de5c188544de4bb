#include "seqlab/models/factory.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/recurrent_model.hpp"
#include "seqlab/models/tcn_model.hpp"
#include "seqlab/models/transformer_model.hpp"

namespace seqlab {

std::unique_ptr<SequenceModel> make_model(const ModelConfig& cfg, Rng& rng) {
  cfg.validate();
  if (cfg.is_recurrent()) return std::make_unique<RecurrentModel>(cfg, rng);
  if (cfg.model == "tcn") return std::make_unique<TCNModel>(cfg, rng);
  if (cfg.model == "transformer_encoder_decoder")
    return std::make_unique<EncoderDecoderModel>(cfg, rng);
  if (cfg.is_transformer()) return std::make_unique<TransformerModel>(cfg, rng);
  // validate() accepts only model_names(); a name added there must be built here.
  throw ConfigError("model", "'" + cfg.model + "'", "one of " + model_names_string());
}

std::size_t count_parameters(const ModelConfig& cfg) {
  cfg.validate();
  const std::size_t E = cfg.body_input_size();
  std::size_t n = 0;
  // input layer
  if (cfg.input == "embedding") {
    n += cfg.vocab_size * E;                           // embedding.weight [V, E]
  } else if (cfg.embedding_dim > 0) {
    n += cfg.input_size * E + E;                       // input.weight [E, D], input.bias [E]
  }
  // body
  if (cfg.is_recurrent()) {
    const std::size_t G = (cfg.model == "lstm" ? 4 : cfg.model == "gru" ? 3 : 1) * cfg.hidden_size;
    const std::size_t H = cfg.hidden_size;
    for (std::size_t k = 0; k < cfg.num_layers; ++k) {
      const std::size_t in = k == 0 ? E : H;
      n += G * in + G * H + 2 * G;                     // weight_ih, weight_hh, bias_ih, bias_hh
    }
  } else if (cfg.model == "transformer_encoder_decoder") {
    n += encoder_decoder_body_parameters(cfg);
  } else if (cfg.is_transformer()) {
    n += transformer_body_parameters(cfg);
  } else {  // tcn
    const std::size_t k = cfg.kernel_size;
    std::size_t in = E;
    for (std::size_t c : cfg.tcn_channels()) {
      n += c * in * k + c;                             // conv1 weight (or weight_v) [c, in, k], bias
      n += c * c * k + c;                              // conv2
      if (in != c) n += c * in + c;                    // downsample 1×1 conv
      if (cfg.weight_norm) n += 2 * c;                 // conv1/conv2 weight_g [c, 1, 1]
      in = c;
    }
  }
  // head
  n += cfg.body_output_size() * cfg.output_size + cfg.output_size;  // head.weight [O, H], bias [O]
  return n;
}

ModelConfig hidden_size_for_budget(ModelConfig cfg, std::size_t budget, double d_ff_ratio) {
  if (cfg.model == "tcn" && !cfg.channels.empty())
    throw ConfigError("channels", shape_string(cfg.channels),
                      "empty when matching a parameter budget (the budget sets hidden_size, the "
                      "width of all num_layers levels)");
  // The size searched is k >= 1: hidden_size = k for rnn/lstm/gru/tcn; for transformers
  // d_model = hidden_size = embedding_dim = k·m, d_ff by d_ff_ratio (rule in factory.hpp).
  const bool transformer = cfg.is_transformer();
  std::size_t m = 1;
  if (transformer) {
    if (!(d_ff_ratio >= 0.0 && d_ff_ratio <= 1e6)) {
      std::ostringstream v;
      v << d_ff_ratio;
      throw ConfigError("d_ff_ratio", v.str(), "in [0, 1e6] (0 keeps d_ff fixed)");
    }
    if (cfg.input == "linear" && cfg.embedding_dim == 0)
      throw ConfigError("embedding_dim", "0",
                        ">= 1 for a transformer matched to a parameter budget (d_model = "
                        "embedding_dim varies with the budget; without a projection it would be "
                        "input_size)");
    if (cfg.n_heads == 0) throw ConfigError("n_heads", "0", ">= 1");
    const bool rope = cfg.positional_encoding.compare(0, 4, "rope") == 0;
    m = cfg.n_heads;
    if (rope || (cfg.positional_encoding == "sinusoidal" && m % 2 != 0)) m *= 2;
  }
  auto set_size = [&](std::size_t k) {
    cfg.hidden_size = k * m;
    if (transformer) {
      cfg.embedding_dim = k * m;
      if (d_ff_ratio > 0)
        cfg.d_ff = std::max<std::size_t>(
            1, static_cast<std::size_t>(std::llround(d_ff_ratio * static_cast<double>(k * m))));
    }
  };
  set_size(1);
  const std::size_t min_count = count_parameters(cfg);  // also validates the other fields
  if (min_count > budget)
    throw ConfigError("param_budget", std::to_string(budget),
                      ">= " + std::to_string(min_count) + " (the count at " +
                          (transformer ? "d_model = " + std::to_string(m) : std::string("hidden_size = 1")) +
                          ")");
  // count(k) grows with k: find hi with count(hi) > budget by doubling, then bisect.
  std::size_t lo = 1, hi = 2;
  for (;;) {
    set_size(hi);
    if (count_parameters(cfg) > budget) break;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {  // invariant: count(lo) <= budget < count(hi)
    const std::size_t mid = lo + (hi - lo) / 2;
    set_size(mid);
    (count_parameters(cfg) <= budget ? lo : hi) = mid;
  }
  set_size(lo);
  return cfg;
}

}  // namespace seqlab

#include "seqlab/models/factory.hpp"

#include "seqlab/models/recurrent_model.hpp"
#include "seqlab/models/tcn_model.hpp"
#include "seqlab/models/transformer_model.hpp"

namespace seqlab {

std::unique_ptr<SequenceModel> make_model(const ModelConfig& cfg, Rng& rng) {
  cfg.validate();
  if (cfg.is_recurrent()) return std::make_unique<RecurrentModel>(cfg, rng);
  if (cfg.model == "tcn") return std::make_unique<TCNModel>(cfg, rng);
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

ModelConfig hidden_size_for_budget(ModelConfig cfg, std::size_t budget) {
  if (cfg.model == "tcn" && !cfg.channels.empty())
    throw ConfigError("channels", shape_string(cfg.channels),
                      "empty when matching a parameter budget (the budget sets hidden_size, the "
                      "width of all num_layers levels)");
  cfg.hidden_size = 1;
  const std::size_t min_count = count_parameters(cfg);  // also validates the other fields
  if (min_count > budget)
    throw ConfigError("param_budget", std::to_string(budget),
                      ">= " + std::to_string(min_count) + " (the count at hidden_size = 1)");
  // count(h) grows with h: find hi with count(hi) > budget by doubling, then bisect.
  std::size_t lo = 1, hi = 2;
  for (;;) {
    cfg.hidden_size = hi;
    if (count_parameters(cfg) > budget) break;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {  // invariant: count(lo) <= budget < count(hi)
    const std::size_t mid = lo + (hi - lo) / 2;
    cfg.hidden_size = mid;
    (count_parameters(cfg) <= budget ? lo : hi) = mid;
  }
  cfg.hidden_size = lo;
  return cfg;
}

}  // namespace seqlab

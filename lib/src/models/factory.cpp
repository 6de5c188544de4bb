#include "seqlab/models/factory.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "seqlab/models/model_registry.hpp"
#include "seqlab/models/positional_registry.hpp"

namespace seqlab {

std::unique_ptr<SequenceModel> make_model(const ModelConfig& cfg, Rng& rng) {
  cfg.validate();  // the name is registered (models/model_registry.hpp)
  return model_registry().get(cfg.model).create(cfg, rng);
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
  // body: the family's registry entry (formulas in factory.hpp)
  const ModelEntry& family = model_registry().get(cfg.model);
  if (family.body_parameters) n += family.body_parameters(cfg);
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
    // d_model: a multiple of n_heads and of what the positional encoding needs (its registry
    // entry: 2 for sinusoidal, 2·n_heads for rope*), i.e. of their lcm.
    const std::size_t need = positional_encoding_d_model_multiple(cfg);
    m = cfg.n_heads / std::gcd(cfg.n_heads, need) * need;
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

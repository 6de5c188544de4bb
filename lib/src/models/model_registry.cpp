// The model-family registry and its built-ins (models/model_registry.hpp). The built-ins are
// registered in this file, which defines the registry function every lookup calls, so the static
// library always links them (core/registry.hpp). Parameter-count formulas: factory.hpp.
#include "seqlab/models/model_registry.hpp"

#include <memory>
#include <string>

#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/recurrent_model.hpp"
#include "seqlab/models/tcn_model.hpp"
#include "seqlab/models/transformer_model.hpp"

namespace seqlab {

namespace {

// rnn/lstm/gru with G = 1/4/3 gates: Σ_k G·H·(in_k + H) + 2·G·H, in_0 = E, in_k = H.
std::size_t recurrent_body_parameters(const ModelConfig& cfg, std::size_t gates) {
  const std::size_t G = gates * cfg.hidden_size, H = cfg.hidden_size, E = cfg.body_input_size();
  std::size_t n = 0;
  for (std::size_t k = 0; k < cfg.num_layers; ++k) {
    const std::size_t in = k == 0 ? E : H;
    n += G * in + G * H + 2 * G;  // weight_ih, weight_hh, bias_ih, bias_hh
  }
  return n;
}

std::size_t tcn_body_parameters(const ModelConfig& cfg) {
  const std::size_t k = cfg.kernel_size;
  std::size_t in = cfg.body_input_size(), n = 0;
  for (std::size_t c : cfg.tcn_channels()) {
    n += c * in * k + c;           // conv1 weight (or weight_v) [c, in, k], bias
    n += c * c * k + c;            // conv2
    if (in != c) n += c * in + c;  // downsample 1×1 conv
    if (cfg.weight_norm) n += 2 * c;  // conv1/conv2 weight_g [c, 1, 1]
    in = c;
  }
  return n;
}

ModelEntry recurrent(const char* description, std::size_t gates, bool rnn) {
  ModelEntry e;
  e.family = ModelFamily::recurrent;
  e.description = description;
  e.create = [](const ModelConfig& c, Rng& rng) -> std::unique_ptr<SequenceModel> {
    return std::make_unique<RecurrentModel>(c, rng);
  };
  e.body_parameters = [gates](const ModelConfig& c) { return recurrent_body_parameters(c, gates); };
  e.validate_body = [rnn](const ModelConfig& c) {
    validate_recurrent_fields(c);
    if (rnn) require_one_of("nonlinearity", c.nonlinearity, {"tanh", "relu"});
  };
  return e;
}

ModelEntry transformer(const char* description) {
  ModelEntry e;
  e.family = ModelFamily::transformer;
  e.description = description;
  e.create = [](const ModelConfig& c, Rng& rng) -> std::unique_ptr<SequenceModel> {
    return std::make_unique<TransformerModel>(c, rng);
  };
  e.body_parameters = transformer_body_parameters;
  e.validate_body = validate_transformer_fields;
  return e;
}

// Order = the order of messages and --help choices.
void register_builtin_models(Registry<ModelEntry>& r) {
  r.add("rnn", recurrent("Elman RNN, tanh or relu (torch.nn.RNN)", 1, true));
  r.add("lstm", recurrent("LSTM, gates i, f, g, o (torch.nn.LSTM)", 4, false));
  r.add("gru", recurrent("GRU (torch.nn.GRU)", 3, false));
  ModelEntry tcn;
  tcn.family = ModelFamily::convolutional;
  tcn.description = "temporal convolutional network (Bai et al. 2018)";
  tcn.create = [](const ModelConfig& c, Rng& rng) -> std::unique_ptr<SequenceModel> {
    return std::make_unique<TCNModel>(c, rng);
  };
  tcn.body_parameters = tcn_body_parameters;
  tcn.validate_body = validate_tcn_fields;
  r.add("tcn", tcn);
  r.add("transformer_encoder", transformer("Transformer encoder, bidirectional self-attention"));
  r.add("transformer_decoder", transformer("decoder-only Transformer, causal self-attention (GPT)"));
  ModelEntry ed;
  ed.family = ModelFamily::transformer;
  ed.description = "encoder-decoder Transformer (torch.nn.Transformer), forward(src, tgt_in)";
  ed.create = [](const ModelConfig& c, Rng& rng) -> std::unique_ptr<SequenceModel> {
    return std::make_unique<EncoderDecoderModel>(c, rng);
  };
  ed.body_parameters = encoder_decoder_body_parameters;
  ed.validate_body = validate_transformer_fields;
  ed.validate_input = [](const ModelConfig& c) {
    if (c.input != "embedding")
      throw ConfigError("input", "'" + c.input + "'",
                        "embedding for transformer_encoder_decoder (token ids; one embedding "
                        "shared by source and target)");
  };
  ed.validate_head = [](const ModelConfig& c) {
    if (c.head != "per_position")
      throw ConfigError("head", "'" + c.head + "'",
                        "per_position for transformer_encoder_decoder (logits at every target step)");
  };
  r.add("transformer_encoder_decoder", ed);
}

}  // namespace

Registry<ModelEntry>& model_registry() {
  static Registry<ModelEntry> registry = [] {
    Registry<ModelEntry> r("model");
    register_builtin_models(r);
    return r;
  }();
  return registry;
}

}  // namespace seqlab

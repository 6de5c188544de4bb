#include "seqlab/models/model_config.hpp"

#include <cmath>
#include <sstream>
#include <utility>

#include "seqlab/core/tensor.hpp"

namespace seqlab {

namespace {

constexpr std::size_t kMaxTcnLevels = 30;  // dilation 2^i must fit (nn/tcn.hpp)

std::string float_string(float v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void require_positive(const char* key, std::size_t v) {
  if (v == 0) throw ConfigError(key, "0", ">= 1");
}

void require_one_of(const char* key, const std::string& v, const std::vector<std::string>& allowed) {
  for (const auto& a : allowed)
    if (v == a) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError(key, "'" + v + "'", "one of " + list);
}

}  // namespace

ConfigError::ConfigError(std::string key, std::string value, std::string allowed)
    : std::invalid_argument(key + " = " + value + ": allowed " + allowed),
      key_(std::move(key)),
      value_(std::move(value)),
      allowed_(std::move(allowed)) {}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"rnn", "lstm", "gru", "tcn",
                                               "transformer_encoder", "transformer_decoder",
                                               "transformer_encoder_decoder"};
  return names;
}

std::string model_names_string() {
  std::string s;
  for (const auto& n : model_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

void ModelConfig::validate() const {
  require_one_of("model", model, model_names());
  require_one_of("input", input, {"embedding", "linear"});
  if (model == "transformer_encoder_decoder" && input != "embedding")
    throw ConfigError("input", "'" + input + "'",
                      "embedding for transformer_encoder_decoder (token ids; one embedding shared "
                      "by source and target)");
  if (input == "embedding") {
    require_positive("vocab_size", vocab_size);
    require_positive("embedding_dim", embedding_dim);
    if (padding_idx) {
      const long long v = static_cast<long long>(vocab_size);
      if (*padding_idx < -v || *padding_idx >= v)
        throw ConfigError("padding_idx", std::to_string(*padding_idx),
                          "in [-vocab_size, vocab_size) = [" + std::to_string(-v) + ", " +
                              std::to_string(v) + ")");
    }
  } else {
    require_positive("input_size", input_size);
    if (padding_idx)
      throw ConfigError("padding_idx", std::to_string(*padding_idx),
                        "unset with input = linear (it applies to token ids only)");
  }
  const bool explicit_channels = model == "tcn" && !channels.empty();
  if (!explicit_channels) {
    require_positive("hidden_size", hidden_size);
    require_positive("num_layers", num_layers);
  }
  if (model == "tcn") {
    if (!explicit_channels && num_layers > kMaxTcnLevels)  // checked before building the list
      throw ConfigError("num_layers", std::to_string(num_layers),
                        "1..30 for tcn (dilation 2^i)");
    if (channels.size() > kMaxTcnLevels)
      throw ConfigError("channels", shape_string(channels), "at most 30 levels (dilation 2^i)");
    const auto ch = tcn_channels();
    for (std::size_t c : ch)
      if (c == 0) throw ConfigError("channels", shape_string(ch), "every entry >= 1");
    require_positive("kernel_size", kernel_size);
  }
  if (model == "rnn") require_one_of("nonlinearity", nonlinearity, {"tanh", "relu"});
  if (is_transformer()) {
    const std::size_t E = body_input_size();
    if (E != hidden_size) {
      const bool bare = input == "linear" && embedding_dim == 0;
      throw ConfigError(bare ? "input_size" : "embedding_dim", std::to_string(E),
                        "equal to hidden_size = d_model = " + std::to_string(hidden_size) +
                            " for a transformer");
    }
    require_positive("n_heads", n_heads);
    if (hidden_size % n_heads != 0)
      throw ConfigError("n_heads", std::to_string(n_heads),
                        "a divisor of hidden_size = d_model = " + std::to_string(hidden_size));
    require_positive("d_ff", d_ff);
    require_one_of("activation", activation, {"relu", "gelu"});
    require_one_of("norm", norm, {"layer_norm", "rms_norm", "batch_norm", "masked_batch_norm", "none"});
    require_one_of("norm_placement", norm_placement, {"pre", "post"});
    require_one_of("positional_encoding", positional_encoding,
                   {"sinusoidal", "learned", "rope", "rope_pi", "rope_ntk", "alibi", "none"});
    const bool rope = positional_encoding.compare(0, 4, "rope") == 0;
    if (positional_encoding == "sinusoidal" && hidden_size % 2 != 0)
      throw ConfigError("hidden_size", std::to_string(hidden_size),
                        "even with positional_encoding = sinusoidal");
    if (rope) {
      if ((hidden_size / n_heads) % 2 != 0)
        throw ConfigError("n_heads", std::to_string(n_heads),
                          "a divisor of hidden_size = " + std::to_string(hidden_size) +
                              " giving an even head size hidden_size / n_heads (now " +
                              std::to_string(hidden_size / n_heads) + ") for positional_encoding = " +
                              positional_encoding);
      require_one_of("rope_pairing", rope_pairing, {"interleaved", "halves"});
    }
    if (positional_encoding == "learned") require_positive("max_len", max_len);
    if (positional_encoding == "rope_pi" || positional_encoding == "rope_ntk")
      require_positive("train_len", train_len);
  }
  if (!(dropout >= 0.0f && dropout < 1.0f))
    throw ConfigError("dropout", float_string(dropout), "in [0, 1)");
  require_positive("output_size", output_size);
  require_one_of("head", head, {"per_position", "last_position"});
  if (model == "transformer_encoder_decoder" && head != "per_position")
    throw ConfigError("head", "'" + head + "'",
                      "per_position for transformer_encoder_decoder (logits at every target step)");
}

std::size_t ModelConfig::body_input_size() const {
  if (input == "embedding") return embedding_dim;
  return embedding_dim > 0 ? embedding_dim : input_size;
}

std::vector<std::size_t> ModelConfig::tcn_channels() const {
  if (!channels.empty()) return channels;
  return std::vector<std::size_t>(num_layers, hidden_size);
}

std::size_t ModelConfig::body_output_size() const {
  if (model == "tcn") {
    const auto ch = tcn_channels();
    return ch.empty() ? 0 : ch.back();
  }
  return hidden_size;
}

}  // namespace seqlab

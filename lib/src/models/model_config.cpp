#include "seqlab/models/model_config.hpp"

#include <cmath>
#include <sstream>
#include <utility>

#include "seqlab/core/tensor.hpp"
#include "seqlab/models/model_registry.hpp"
#include "seqlab/models/positional_registry.hpp"
#include "seqlab/nn/norm.hpp"

namespace seqlab {

namespace {

constexpr std::size_t kMaxTcnLevels = 30;  // dilation 2^i must fit (nn/tcn.hpp)

std::string float_string(float v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

void require_positive(const std::string& key, std::size_t v) {
  if (v == 0) throw ConfigError(key, "0", ">= 1");
}

void require_one_of(const std::string& key, const std::string& v,
                    const std::vector<std::string>& allowed) {
  for (const auto& a : allowed)
    if (v == a) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError(key, "'" + v + "'", "one of " + list);
}

ConfigError::ConfigError(std::string key, std::string value, std::string allowed)
    : std::invalid_argument(key + " = " + value + ": allowed " + allowed),
      key_(std::move(key)),
      value_(std::move(value)),
      allowed_(std::move(allowed)) {}

const std::vector<std::string>& model_names() { return model_registry().names(); }

std::string model_names_string() { return model_registry().names_string(); }

bool ModelConfig::is_recurrent() const {
  const ModelEntry* e = model_registry().find(model);
  return e != nullptr && e->family == ModelFamily::recurrent;
}

bool ModelConfig::is_transformer() const {
  const ModelEntry* e = model_registry().find(model);
  return e != nullptr && e->family == ModelFamily::transformer;
}

void validate_recurrent_fields(const ModelConfig& c) {
  require_positive("hidden_size", c.hidden_size);
  require_positive("num_layers", c.num_layers);
}

void validate_tcn_fields(const ModelConfig& c) {
  const bool explicit_channels = !c.channels.empty();
  if (!explicit_channels) {
    require_positive("hidden_size", c.hidden_size);
    require_positive("num_layers", c.num_layers);
  }
  if (!explicit_channels && c.num_layers > kMaxTcnLevels)  // checked before building the list
    throw ConfigError("num_layers", std::to_string(c.num_layers), "1..30 for tcn (dilation 2^i)");
  if (c.channels.size() > kMaxTcnLevels)
    throw ConfigError("channels", shape_string(c.channels), "at most 30 levels (dilation 2^i)");
  const auto ch = c.tcn_channels();
  for (std::size_t w : ch)
    if (w == 0) throw ConfigError("channels", shape_string(ch), "every entry >= 1");
  require_positive("kernel_size", c.kernel_size);
}

void validate_transformer_fields(const ModelConfig& c) {
  require_positive("hidden_size", c.hidden_size);
  require_positive("num_layers", c.num_layers);
  const std::size_t E = c.body_input_size();
  if (E != c.hidden_size) {
    const bool bare = c.input == "linear" && c.embedding_dim == 0;
    throw ConfigError(bare ? "input_size" : "embedding_dim", std::to_string(E),
                      "equal to hidden_size = d_model = " + std::to_string(c.hidden_size) +
                          " for a transformer");
  }
  require_positive("n_heads", c.n_heads);
  if (c.hidden_size % c.n_heads != 0)
    throw ConfigError("n_heads", std::to_string(c.n_heads),
                      "a divisor of hidden_size = d_model = " + std::to_string(c.hidden_size));
  require_positive("d_ff", c.d_ff);
  require_one_of("activation", c.activation, {"relu", "gelu"});
  require_one_of("norm", c.norm, norm_names());
  require_one_of("norm_placement", c.norm_placement, {"pre", "post"});
  require_one_of("positional_encoding", c.positional_encoding, positional_encoding_names());
  const PositionalEncodingEntry& pe = positional_encoding_registry().get(c.positional_encoding);
  if (pe.validate) pe.validate(c);
  require_one_of("attention_kernel", c.attention_kernel, {"auto", "fused", "materialised"});
}

void ModelConfig::validate() const {
  const ModelEntry* family = model_registry().find(model);
  if (family == nullptr) throw ConfigError("model", "'" + model + "'", "one of " + model_names_string());
  require_one_of("input", input, {"embedding", "linear"});
  if (family->validate_input) family->validate_input(*this);
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
  if (family->validate_body) family->validate_body(*this);
  if (!(dropout >= 0.0f && dropout < 1.0f))
    throw ConfigError("dropout", float_string(dropout), "in [0, 1)");
  require_positive("output_size", output_size);
  require_one_of("head", head, {"per_position", "last_position"});
  if (family->validate_head) family->validate_head(*this);
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

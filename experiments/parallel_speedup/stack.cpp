// LayerStack and its analytic counts (stack.hpp).
#include "stack.hpp"

#include <stdexcept>

namespace parallel_speedup {

using seqlab::Tensor3;

const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = {"self_attention", "transformer_encoder",
                                                 "transformer_decoder", "rnn", "lstm", "gru",
                                                 "tcn"};
  return names;
}

const std::vector<std::string>& trainable_families() {
  static const std::vector<std::string> names(family_names().begin() + 1, family_names().end());
  return names;
}

bool StackConfig::is_transformer() const {
  return model == "transformer_encoder" || model == "transformer_decoder";
}
bool StackConfig::is_attention() const { return is_transformer() || model == "self_attention"; }
bool StackConfig::is_recurrent() const {
  return model == "rnn" || model == "lstm" || model == "gru";
}
std::size_t StackConfig::gates() const {
  if (model == "rnn") return 1;
  if (model == "gru") return 3;
  if (model == "lstm") return 4;
  return 0;
}
std::size_t StackConfig::output_size() const { return is_attention() ? d_model : hidden_size; }

seqlab::ModelConfig model_config(const StackConfig& cfg) {
  if (cfg.model == "self_attention")
    throw std::invalid_argument("model_config: the factory has no self_attention family");
  seqlab::ModelConfig mc;
  mc.model = cfg.model;
  mc.input = "linear";
  mc.input_size = cfg.d_model;
  mc.embedding_dim = 0;
  mc.hidden_size = cfg.is_transformer() ? cfg.d_model : cfg.hidden_size;
  mc.num_layers = cfg.model == "tcn" ? cfg.tcn_levels : cfg.num_layers;
  mc.kernel_size = cfg.kernel_size < 1 ? 2 : cfg.kernel_size;
  mc.output_size = 1;
  mc.head = "per_position";
  mc.n_heads = cfg.n_heads;
  mc.d_ff = cfg.d_ff;
  mc.norm = "layer_norm";
  mc.norm_placement = cfg.norm_placement;
  mc.positional_encoding = "none";  // the stack has none; does not change the body's count
  return mc;
}

std::size_t tcn_levels_for(std::size_t seq_len, std::size_t kernel_size) {
  if (kernel_size < 2) throw std::invalid_argument("tcn_levels_for: kernel_size must be >= 2");
  std::size_t levels = 1;
  while (1 + 2 * (kernel_size - 1) * ((std::size_t{1} << levels) - 1) < seq_len) ++levels;
  return levels;
}

double forward_flops(const StackConfig& c, double B, double T) {
  const double D = static_cast<double>(c.d_model), H = static_cast<double>(c.hidden_size);
  if (c.model == "self_attention")
    return static_cast<double>(c.num_layers) * (8.0 * B * T * D * D + 4.0 * B * T * T * D);
  if (c.is_transformer()) {
    const double F = static_cast<double>(c.d_ff);
    return static_cast<double>(c.num_layers) *
           (8.0 * B * T * D * D + 4.0 * B * T * T * D + 4.0 * B * T * D * F);
  }
  if (c.is_recurrent()) {
    const double G = static_cast<double>(c.gates()) * H;
    double f = 0.0;
    for (std::size_t k = 0; k < c.num_layers; ++k) f += 2.0 * B * T * G * ((k == 0 ? D : H) + H);
    return f;
  }
  const double k = static_cast<double>(c.kernel_size);
  double f = 0.0;
  for (std::size_t i = 0; i < c.tcn_levels; ++i) {
    const double cin = i == 0 ? D : H;
    f += 2.0 * B * T * H * k * (cin + H);
    if (cin != H) f += 2.0 * B * T * H * cin;
  }
  return f;
}

double activation_bytes(const StackConfig& c, double B, double T) {
  const double D = static_cast<double>(c.d_model), H = static_cast<double>(c.hidden_size);
  const double L = static_cast<double>(c.num_layers);
  double floats = 0.0;
  if (c.model == "self_attention") {
    floats = L * (5.0 * B * T * D + static_cast<double>(c.n_heads) * B * T * T);
  } else if (c.is_transformer()) {
    const double F = static_cast<double>(c.d_ff), h = static_cast<double>(c.n_heads);
    floats = L * (8.0 * B * T * D + B * T * F + B * h * T * T + 2.0 * B * T);
  } else if (c.is_recurrent()) {
    const double G = static_cast<double>(c.gates()) * H;
    floats = T * B * D + L * (T + 1.0) * B * H;
    if (c.model == "rnn") {
      floats += G + L * B * H;
    } else if (c.model == "lstm") {
      floats += G + L * ((T + 1.0) * B * H + 4.0 * T * B * H + T * B * H) + 2.0 * L * B * H;
    } else {  // gru
      floats += L * (3.0 * T * B * H + T * B * H) + B * 3.0 * H + L * B * H;
    }
  } else {  // tcn
    const double k = static_cast<double>(c.kernel_size);
    for (std::size_t i = 0; i < c.tcn_levels; ++i) {
      const double cin = i == 0 ? D : H;
      floats += B * T * cin + H * k * cin;   // conv1: input copy, packed weight
      floats += 3.0 * B * T * H;             // a1, a2, s
      floats += B * T * H + H * k * H;       // conv2: input copy, packed weight
      if (cin != H) floats += B * T * cin + H * cin;  // downsample: input copy, packed weight
    }
  }
  return 4.0 * floats;
}

LayerStack::LayerStack(const StackConfig& cfg, seqlab::Rng& rng) : cfg_(cfg) {
  if (cfg.model == "self_attention") {
    for (std::size_t l = 0; l < cfg.num_layers; ++l)
      attentions_.push_back(std::make_unique<seqlab::MultiheadAttention>(cfg.d_model, cfg.n_heads, rng));
  } else if (cfg.is_transformer()) {
    seqlab::TransformerLayerConfig lc;
    lc.d_model = cfg.d_model;
    lc.n_heads = cfg.n_heads;
    lc.d_ff = cfg.d_ff;
    lc.activation = "relu";
    lc.dropout = 0.0f;
    lc.norm = "layer_norm";
    lc.norm_placement = cfg.norm_placement;
    for (std::size_t l = 0; l < cfg.num_layers; ++l) {
      lc.seed = rng.next_u64();
      if (cfg.model == "transformer_encoder") {
        encoders_.push_back(std::make_unique<seqlab::TransformerEncoderLayer>(lc, rng));
      } else {
        decoders_.push_back(
            std::make_unique<seqlab::TransformerDecoderLayer>(lc, rng, /*cross_attention=*/false));
      }
    }
  } else if (cfg.model == "rnn") {
    rnn_ = std::make_unique<seqlab::RNN>(cfg.d_model, cfg.hidden_size, cfg.num_layers, rng);
  } else if (cfg.model == "lstm") {
    lstm_ = std::make_unique<seqlab::LSTM>(cfg.d_model, cfg.hidden_size, cfg.num_layers, rng);
  } else if (cfg.model == "gru") {
    gru_ = std::make_unique<seqlab::GRU>(cfg.d_model, cfg.hidden_size, cfg.num_layers, rng);
  } else if (cfg.model == "tcn") {
    tcn_ = std::make_unique<seqlab::TCN>(cfg.d_model,
                                         std::vector<std::size_t>(cfg.tcn_levels, cfg.hidden_size),
                                         cfg.kernel_size, 0.0f, rng);
  } else {
    throw std::invalid_argument("LayerStack: unknown model '" + cfg.model + "'");
  }
}

Tensor3 LayerStack::forward(const Tensor3& x) {
  if (!attentions_.empty()) {
    const seqlab::AttentionMask mask{};  // bidirectional
    Tensor3 h = attentions_[0]->forward(x, mask);
    for (std::size_t l = 1; l < attentions_.size(); ++l) h = attentions_[l]->forward(h, mask);
    return h;
  }
  if (!encoders_.empty()) {
    const seqlab::AttentionMask mask{};  // bidirectional
    Tensor3 h = encoders_[0]->forward(x, mask);
    for (std::size_t l = 1; l < encoders_.size(); ++l) h = encoders_[l]->forward(h, mask);
    return h;
  }
  if (!decoders_.empty()) {
    seqlab::AttentionMask mask;
    mask.causal = true;
    Tensor3 h = decoders_[0]->forward(x, nullptr, mask);
    for (std::size_t l = 1; l < decoders_.size(); ++l) h = decoders_[l]->forward(h, nullptr, mask);
    return h;
  }
  if (rnn_) return rnn_->forward(x);
  if (lstm_) return lstm_->forward(x);
  if (gru_) return gru_->forward(x);
  return tcn_->forward(x);
}

Tensor3 LayerStack::backward(const Tensor3& dy) {
  if (!attentions_.empty()) {
    Tensor3 g = attentions_.back()->backward(dy);
    for (std::size_t l = attentions_.size() - 1; l-- > 0;) g = attentions_[l]->backward(g);
    return g;
  }
  if (!encoders_.empty()) {
    Tensor3 g = encoders_.back()->backward(dy);
    for (std::size_t l = encoders_.size() - 1; l-- > 0;) g = encoders_[l]->backward(g);
    return g;
  }
  if (!decoders_.empty()) {
    Tensor3 g = decoders_.back()->backward(dy);
    for (std::size_t l = decoders_.size() - 1; l-- > 0;) g = decoders_[l]->backward(g);
    return g;
  }
  if (rnn_) return rnn_->backward(dy);
  if (lstm_) return lstm_->backward(dy);
  if (gru_) return gru_->backward(dy);
  return tcn_->backward(dy);
}

std::size_t LayerStack::num_parameters() {
  std::size_t n = 0;
  for (auto& l : attentions_) n += l->num_parameters();
  for (auto& l : encoders_) n += l->num_parameters();
  for (auto& l : decoders_) n += l->num_parameters();
  if (rnn_) n += rnn_->num_parameters();
  if (lstm_) n += lstm_->num_parameters();
  if (gru_) n += gru_->num_parameters();
  if (tcn_) n += tcn_->num_parameters();
  return n;
}

std::size_t LayerStack::sequential_steps(std::size_t seq_len) const {
  if (!attentions_.empty()) return attentions_.size();
  if (!encoders_.empty()) return encoders_.size();
  if (!decoders_.empty()) return decoders_.size();
  if (rnn_) return rnn_->num_layers() * seq_len;
  if (lstm_) return lstm_->num_layers() * seq_len;
  if (gru_) return gru_->num_layers() * seq_len;
  return 2 * tcn_->num_levels();
}

}  // namespace parallel_speedup

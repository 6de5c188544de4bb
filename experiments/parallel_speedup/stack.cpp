// LayerStack and its analytic counts (stack.hpp).
#include "stack.hpp"

#include <stdexcept>
#include <type_traits>
#include <utility>

namespace parallel_speedup {

using seqlab::Tensor3;

namespace {

/// Sets attn's kernel from an attention_kernel value (seqlab::parse_attention_kernel's names).
void set_kernel_or_throw(seqlab::MultiheadAttention& attn, const std::string& kernel) {
  if (!kernel_available(kernel))
    throw std::invalid_argument("attention_kernel '" + kernel + "': expected auto, fused or materialised");
  attn.set_kernel(seqlab::parse_attention_kernel(kernel));
}

}  // namespace

const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = {"self_attention", "transformer_encoder",
                                                 "transformer_decoder", "rnn", "lstm", "gru",
                                                 "tcn"};
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

bool kernel_available(const std::string& kernel) {
  if (kernel == "materialised") return true;
  return kernel == "fused" || kernel == "auto";
}

bool decodes(const std::string& model) {
  return model == "transformer_decoder" || model == "rnn" || model == "lstm" || model == "gru";
}

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

double decode_step_flops(const StackConfig& c, double n) {
  if (!decodes(c.model)) throw std::invalid_argument("decode_step_flops: " + c.model + " does not decode");
  const double D = static_cast<double>(c.d_model), H = static_cast<double>(c.hidden_size);
  const double L = static_cast<double>(c.num_layers);
  if (c.is_transformer())
    return L * (8.0 * D * D + 4.0 * D * static_cast<double>(c.d_ff) + 4.0 * (n + 1.0) * D);
  const double G = static_cast<double>(c.gates()) * H;
  return 2.0 * G * (D + H) + (L - 1.0) * 2.0 * G * (2.0 * H);
}

double activation_bytes(const StackConfig& c, double B, double T, bool fused) {
  const double D = static_cast<double>(c.d_model), H = static_cast<double>(c.hidden_size);
  const double L = static_cast<double>(c.num_layers);
  // The attention's softmax state: P [B, h, T, T] or the fused kernel's L [B, h, T].
  const double S = static_cast<double>(c.n_heads) * B * T * (fused ? 1.0 : T);
  double floats = 0.0;
  if (c.model == "self_attention") {
    floats = L * (5.0 * B * T * D + S);
  } else if (c.is_transformer()) {
    const double F = static_cast<double>(c.d_ff);
    floats = L * (8.0 * B * T * D + B * T * F + S + 2.0 * B * T);
  } else if (c.is_recurrent()) {
    const double G = static_cast<double>(c.gates()) * H;
    floats = T * B * D + L * (T + 1.0) * B * H + H * G;  // + W_hhᵀ [H, G], one buffer for all layers
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
      // Each convolution keeps its input and its weights packed twice (W̃ for the forward, W̃q
      // for the backward: nn/conv1d.hpp).
      floats += B * T * cin + 2.0 * H * k * cin;  // conv1
      floats += 3.0 * B * T * H;                  // a1, a2, s
      floats += B * T * H + 2.0 * H * k * H;      // conv2
      if (cin != H) floats += B * T * cin + 2.0 * H * cin;  // downsample (kernel 1)
    }
  }
  return 4.0 * floats;
}

LayerStack::LayerStack(const StackConfig& cfg, seqlab::Rng& rng) : cfg_(cfg) {
  if (cfg.model == "self_attention") {
    for (std::size_t l = 0; l < cfg.num_layers; ++l)
      attentions_.push_back(std::make_unique<seqlab::MultiheadAttention>(cfg.d_model, cfg.n_heads, rng));
    set_attention_kernel(cfg.attention_kernel);
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
      encoders_.push_back(std::make_unique<seqlab::TransformerEncoderLayer>(lc, rng));
    }
    set_attention_kernel(cfg.attention_kernel);
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
    seqlab::AttentionMask mask;
    mask.causal = cfg_.model == "transformer_decoder";  // encoder: bidirectional
    Tensor3 h = encoders_[0]->forward(x, mask);
    for (std::size_t l = 1; l < encoders_.size(); ++l) h = encoders_[l]->forward(h, mask);
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
  if (rnn_) return rnn_->backward(dy);
  if (lstm_) return lstm_->backward(dy);
  if (gru_) return gru_->backward(dy);
  return tcn_->backward(dy);
}

std::size_t LayerStack::num_parameters() {
  std::size_t n = 0;
  for (auto& l : attentions_) n += l->num_parameters();
  for (auto& l : encoders_) n += l->num_parameters();
  if (rnn_) n += rnn_->num_parameters();
  if (lstm_) n += lstm_->num_parameters();
  if (gru_) n += gru_->num_parameters();
  if (tcn_) n += tcn_->num_parameters();
  return n;
}

std::size_t LayerStack::sequential_steps(std::size_t seq_len) const {
  if (!attentions_.empty()) return attentions_.size();
  if (!encoders_.empty()) return encoders_.size();
  if (rnn_) return rnn_->num_layers() * seq_len;
  if (lstm_) return lstm_->num_layers() * seq_len;
  if (gru_) return gru_->num_layers() * seq_len;
  return 2 * tcn_->num_levels();
}

Tensor3 LayerStack::decode(const Tensor3& x) {
  if (!decodes(cfg_.model))
    throw std::logic_error("LayerStack.decode: " + cfg_.model + " does not decode incrementally");
  Tensor3 y;
  if (!encoders_.empty()) {
    caches_.resize(encoders_.size());
    y = x;
    for (std::size_t l = 0; l < encoders_.size(); ++l) y = seqlab::encoder_layer_step(*encoders_[l], y, caches_[l]);
  } else if (lstm_) {
    y = lstm_->forward(x, decoded_ > 0 ? &lstm_state_ : nullptr);
    lstm_state_ = lstm_->final_state();
  } else {
    const Tensor3* h0 = decoded_ > 0 ? &h_state_ : nullptr;
    y = rnn_ ? rnn_->forward(x, h0) : gru_->forward(x, h0);
    h_state_ = rnn_ ? rnn_->final_state() : gru_->final_state();
  }
  decoded_ += x.shape()[1];
  return y;
}

void LayerStack::rewind_decode(std::size_t n) {
  if (n > decoded_)
    throw std::out_of_range("LayerStack.rewind_decode: n = " + std::to_string(n) + " exceeds the " +
                            std::to_string(decoded_) + " positions decoded");
  for (auto& c : caches_) c.truncate(n);
  decoded_ = n;
}

void LayerStack::reset_decode() {
  for (auto& c : caches_) c.clear();
  decoded_ = 0;
}

void LayerStack::set_attention_kernel(const std::string& kernel) {
  for (auto& a : attentions_) set_kernel_or_throw(*a, kernel);
  for (auto& e : encoders_) set_kernel_or_throw(e->self_attn, kernel);
  cfg_.attention_kernel = kernel;
}

bool LayerStack::uses_fused(std::size_t T) const {
  const bool causal = cfg_.model == "transformer_decoder";
  if (!attentions_.empty()) return attentions_.front()->uses_fused(T, T, causal);
  if (!encoders_.empty()) return encoders_.front()->self_attn.uses_fused(T, T, causal);
  return false;
}

}  // namespace parallel_speedup

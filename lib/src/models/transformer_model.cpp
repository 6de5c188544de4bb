#include "seqlab/models/transformer_model.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "seqlab/models/positional_registry.hpp"

namespace seqlab {

namespace {

const ModelConfig& require_transformer(const ModelConfig& cfg) {
  if (cfg.model != "transformer_encoder" && cfg.model != "transformer_decoder")
    throw std::invalid_argument("TransformerModel: model = '" + cfg.model +
                                "'; allowed transformer_encoder, transformer_decoder (use "
                                "make_model for others)");
  return cfg;
}

std::size_t norm_parameters(const std::string& norm, std::size_t d) {
  return norm_registry().get(norm).num_parameters(d);  // 2d layer_norm / batch_norm, d rms_norm, 0 none
}

// ‖g[:, t]‖_F over [B, D] into row l of out [L, T].
void record_norms(const Tensor3& g, Tensor2& out, std::size_t l) {
  const std::size_t B = g.shape()[0], T = g.shape()[1], C = g.shape()[2];
  for (std::size_t t = 0; t < T; ++t) {
    double s = 0.0;
    for (std::size_t b = 0; b < B; ++b) {
      const float* row = g.data() + (b * T + t) * C;
      for (std::size_t c = 0; c < C; ++c) s += double(row[c]) * row[c];
    }
    out(l, t) = static_cast<float>(std::sqrt(s));
  }
}

}  // namespace

std::size_t transformer_body_parameters(const ModelConfig& cfg) {
  const std::size_t D = cfg.hidden_size, F = cfg.d_ff, P = cfg.shared_qk ? 2 : 3;
  std::size_t n = 0;
  n += positional_encoding_parameters(cfg);  // pos_embedding.* (learned: weight [max_len, D])
  const std::size_t per_layer = P * D * D + P * D        // self_attn.in_proj_weight, in_proj_bias
                                + D * D + D                // self_attn.out_proj
                                + F * D + F + D * F + D    // linear1, linear2
                                + 2 * norm_parameters(cfg.norm, D);  // norm1, norm2
  n += cfg.num_layers * per_layer;
  if (cfg.norm_placement == "pre") n += norm_parameters(cfg.norm, D);  // final norm
  return n;
}

TransformerModel::TransformerModel(const ModelConfig& cfg, Rng& rng)
    : InputBodyHeadModel(require_transformer(cfg), rng), emb_dropout(cfg.dropout, rng.next_u64()) {
  const std::size_t D = cfg_.hidden_size;
  positional = make_positional_encoding(cfg_, rng);  // draws its parameters (learned) here
  TransformerLayerConfig lc;
  lc.d_model = D;
  lc.n_heads = cfg_.n_heads;
  lc.d_ff = cfg_.d_ff;
  lc.activation = cfg_.activation;
  lc.dropout = cfg_.dropout;
  lc.norm = cfg_.norm;
  lc.norm_placement = cfg_.norm_placement;
  lc.shared_qk = cfg_.shared_qk;
  lc.attention_kernel = parse_attention_kernel(cfg_.attention_kernel);
  for (std::size_t l = 0; l < cfg_.num_layers; ++l) {
    lc.seed = rng.next_u64();
    layers.push_back(std::make_unique<TransformerEncoderLayer>(lc, rng));
    positional->attach(layers.back()->self_attn);  // RoPE / ALiBi hooks
  }
  if (cfg_.norm_placement == "pre") final_norm = make_norm(cfg_.norm, D);
  build_head(rng);
}

std::size_t TransformerModel::sequential_steps(std::size_t /*seq_len*/) const {
  return layers.size();
}

Tensor3 TransformerModel::body_forward(const Tensor3& u) {
  const std::size_t B = u.shape()[0], T = u.shape()[1];
  if (padding_)
    check_shape((cfg_.model + " model: padding mask").c_str(), *padding_,
                {static_cast<long>(B), static_cast<long>(T)});
  used_padding_ = padding_;
  const std::size_t max_positions = positional->max_positions();
  if (max_positions > 0 && T > max_positions)
    throw ShapeError(cfg_.model + " model: seq_len = " + std::to_string(T) + " exceeds max_len = " +
                     std::to_string(max_positions) + " of the " + cfg_.positional_encoding +
                     " positional embedding");
  positional->set_context_length(T);
  Tensor3 z = positional->forward(u);
  z = emb_dropout.forward(z);
  AttentionMask mask;
  mask.causal = causal();
  mask.key_padding = padding_;
  for (auto& layer : layers) z = layer->forward(z, mask, padding_);
  if (final_norm) z = final_norm->forward(z, padding_);
  return z;
}

Tensor3 TransformerModel::body_backward(const Tensor3& dh, Tensor2& step_norms) {
  const std::size_t L = layers.size(), T = dh.shape()[1];
  step_norms = xt::zeros<float>({L, T});
  Tensor3 g = final_norm ? final_norm->backward(dh) : dh;  // ∂L/∂z_L
  for (std::size_t l = L; l-- > 0;) {
    record_norms(g, step_norms, l);
    g = layers[l]->backward(g);  // ∂L/∂z_{l-1}
  }
  g = emb_dropout.backward(g);
  return positional->backward(g);
}

void TransformerModel::collect_body_parameters(const std::string& prefix,
                                               std::vector<NamedParameter>& out) {
  positional->collect_parameters(prefix + "pos_embedding.", out);
  for (std::size_t l = 0; l < layers.size(); ++l)
    layers[l]->collect_parameters(prefix + "layers." + std::to_string(l) + ".", out);
  if (final_norm) final_norm->collect_parameters(prefix + "norm.", out);
}

void TransformerModel::set_body_training(bool training) {
  emb_dropout.set_training(training);
  for (auto& layer : layers) layer->set_training(training);
  if (final_norm) final_norm->set_training(training);
}

std::string TransformerModel::describe_body() const {
  std::ostringstream os;
  os << "d_model=" << cfg_.hidden_size << " heads=" << cfg_.n_heads << " d_ff=" << cfg_.d_ff
     << " layers=" << cfg_.num_layers << " pos=" << cfg_.positional_encoding << " norm="
     << cfg_.norm << "(" << cfg_.norm_placement << ")" << " act=" << cfg_.activation;
  if (causal()) os << " causal";
  if (cfg_.shared_qk) os << " shared_qk";
  if (cfg_.dropout > 0.0f) os << " dropout=" << cfg_.dropout;
  return os.str();
}

void TransformerModel::collect_body_buffers(const std::string& prefix,
                                            std::vector<NamedBuffer>& out) {
  positional->collect_buffers(prefix + "pos_embedding.", out);
  emb_dropout.collect_buffers(prefix + "emb_dropout.", out);
  for (std::size_t l = 0; l < layers.size(); ++l)
    layers[l]->collect_buffers(prefix + "layers." + std::to_string(l) + ".", out);
  if (final_norm) final_norm->collect_buffers(prefix + "norm.", out);
}

}  // namespace seqlab

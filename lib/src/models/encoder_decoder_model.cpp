#include "seqlab/models/encoder_decoder_model.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include <xtensor/xadapt.hpp>

#include "seqlab/models/positional_registry.hpp"

namespace seqlab {

namespace {

const ModelConfig& require_encoder_decoder(const ModelConfig& cfg) {
  if (cfg.model != "transformer_encoder_decoder")
    throw std::invalid_argument("EncoderDecoderModel: model = '" + cfg.model +
                                "'; allowed transformer_encoder_decoder (use make_model for others)");
  return cfg;
}

std::size_t norm_parameters(const std::string& norm, std::size_t d) {
  return norm_registry().get(norm).num_parameters(d);  // 2d layer_norm / batch_norm, d rms_norm, 0 none
}

// ‖g[b, t, :]‖ over b into out(row, col0 + t) for g [B, N, C].
void record_norms(const Tensor3& g, Tensor2& out, std::size_t row, std::size_t col0) {
  const std::size_t B = g.shape()[0], N = g.shape()[1], C = g.shape()[2];
  for (std::size_t t = 0; t < N; ++t) {
    double s = 0.0;
    for (std::size_t b = 0; b < B; ++b) {
      const float* r = g.data() + (b * N + t) * C;
      for (std::size_t c = 0; c < C; ++c) s += double(r[c]) * r[c];
    }
    out(row, col0 + t) = static_cast<float>(std::sqrt(s));
  }
}

// The same into out(col0 + t) of a vector.
void record_norms(const Tensor3& g, Tensor1& out, std::size_t col0) {
  auto as_row = xt::adapt(out.data(), out.size(), xt::no_ownership(),
                          std::vector<std::size_t>{1, out.size()});
  Tensor2 row = as_row;
  record_norms(g, row, 0, col0);
  std::copy(row.begin(), row.end(), out.begin());
}

// torch.nn.init.xavier_uniform_ on a [fan_out, fan_in] matrix, row-major.
void xavier_uniform(Parameter& p, Rng& rng, std::size_t fan_out, std::size_t fan_in) {
  const float a = static_cast<float>(std::sqrt(6.0 / double(fan_in + fan_out)));
  rng.fill_uniform(p.value, -a, a);
}

void check_ids(const char* what, const IndexTensor2& ids) {
  if (ids.shape()[1] == 0)
    throw ShapeError(std::string("transformer_encoder_decoder model: ") + what + " has shape " +
                     shape_string(ids.shape()) + "; its length must be >= 1");
}

}  // namespace

std::size_t encoder_decoder_body_parameters(const ModelConfig& cfg) {
  const std::size_t D = cfg.hidden_size, F = cfg.d_ff, P = cfg.shared_qk ? 2 : 3;
  const std::size_t n = norm_parameters(cfg.norm, D);
  std::size_t total = 0;
  total += 2 * positional_encoding_parameters(cfg);  // one encoding per stack (learned: src, tgt tables)
  const std::size_t self_attn = P * D * D + P * D + D * D + D;
  const std::size_t cross_attn = 3 * D * D + 3 * D + D * D + D;  // never shared
  const std::size_t ff = F * D + F + D * F + D;
  total += cfg.num_layers * (self_attn + ff + 2 * n);               // encoder layers
  total += cfg.num_layers * (self_attn + cross_attn + ff + 3 * n);  // decoder layers
  total += 2 * n;                                                   // encoder.norm, decoder.norm
  return total;
}

EncoderDecoderModel::EncoderDecoderModel(const ModelConfig& cfg, Rng& rng)
    : SequenceModel(require_encoder_decoder(cfg)),
      embedding(cfg_.vocab_size, cfg_.embedding_dim, rng, cfg_.padding_idx),
      src_dropout(cfg_.dropout, rng.next_u64()),
      tgt_dropout(cfg_.dropout, rng.next_u64()) {
  const std::size_t D = cfg_.hidden_size;
  // One encoding per stack, source first (draw order [4] of the header: learned tables).
  src_positional = make_positional_encoding(cfg_, rng);
  tgt_positional = make_positional_encoding(cfg_, rng);

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
    encoder_layers.push_back(std::make_unique<TransformerEncoderLayer>(lc, rng));
    src_positional->attach(encoder_layers.back()->self_attn);
  }
  encoder_norm = make_norm(cfg_.norm, D);
  for (std::size_t l = 0; l < cfg_.num_layers; ++l) {
    lc.seed = rng.next_u64();
    decoder_layers.push_back(std::make_unique<TransformerDecoderLayer>(lc, rng, true));
    tgt_positional->attach(decoder_layers.back()->self_attn);
    // Cross-attention: no RoPE / ALiBi (file comment): never attached.
  }
  decoder_norm = make_norm(cfg_.norm, D);

  // torch.nn.Transformer._reset_parameters: xavier_uniform_ on every parameter with dim > 1, in
  // parameters() order (encoder layers, decoder layers; norms are 1-D).
  std::vector<NamedParameter> body;
  for (std::size_t l = 0; l < encoder_layers.size(); ++l)
    encoder_layers[l]->collect_parameters("", body);
  for (std::size_t l = 0; l < decoder_layers.size(); ++l)
    decoder_layers[l]->collect_parameters("", body);
  for (auto& np : body) {
    Parameter& p = *np.param;
    if (p.value.dimension() < 2) continue;
    const std::size_t rows = p.value.shape()[0], cols = p.value.shape()[1];
    const bool in_proj = np.key.size() >= 14 &&
                         np.key.compare(np.key.size() - 14, 14, "in_proj_weight") == 0;
    // A shared_qk in_proj_weight [2D, D] keeps the bound of the unshared [3D, D] matrix.
    xavier_uniform(p, rng, in_proj ? 3 * D : rows, cols);
  }

  head.emplace(D, cfg_.output_size, rng);
  num_params_ = num_parameters();
}

std::size_t EncoderDecoderModel::sequential_steps(std::size_t /*seq_len*/) const {
  return encoder_layers.size() + decoder_layers.size();
}

Tensor3 EncoderDecoderModel::encode(const IndexTensor2& src, const PaddingMask* src_pad) {
  const std::size_t S = src.shape()[1];
  Tensor3 z = embedding.forward(src);
  const std::size_t max_positions = src_positional->max_positions();
  if (max_positions > 0 && S > max_positions)
    throw ShapeError("transformer_encoder_decoder model: source length S = " + std::to_string(S) +
                     " exceeds max_len = " + std::to_string(max_positions) + " of the " +
                     cfg_.positional_encoding + " positional embedding");
  src_positional->set_context_length(S);
  z = src_positional->forward(z);
  z = src_dropout.forward(z);
  AttentionMask mask;
  mask.key_padding = src_pad;
  for (auto& layer : encoder_layers) z = layer->forward(z, mask, src_pad);
  return encoder_norm->forward(z, src_pad);
}

Tensor3 EncoderDecoderModel::decode(const IndexTensor2& tgt_in, const Tensor3& memory,
                                    const PaddingMask* src_pad, const PaddingMask* tgt_pad) {
  const std::size_t T = tgt_in.shape()[1];
  Tensor3 y = embedding.forward(tgt_in);
  const std::size_t max_positions = tgt_positional->max_positions();
  if (max_positions > 0 && T > max_positions)
    throw ShapeError("transformer_encoder_decoder model: target length T = " + std::to_string(T) +
                     " exceeds max_len = " + std::to_string(max_positions) + " of the " +
                     cfg_.positional_encoding + " positional embedding");
  tgt_positional->set_context_length(T);
  y = tgt_positional->forward(y);
  y = tgt_dropout.forward(y);
  AttentionMask self_mask;
  self_mask.causal = true;
  self_mask.key_padding = tgt_pad;
  AttentionMask memory_mask;
  memory_mask.key_padding = src_pad;
  for (auto& layer : decoder_layers) y = layer->forward(y, &memory, self_mask, memory_mask, tgt_pad);
  y = decoder_norm->forward(y, tgt_pad);
  return head->forward(y);
}

Tensor3 EncoderDecoderModel::forward(const IndexTensor2& src, const IndexTensor2& tgt_in) {
  check_ids("src", src);
  check_ids("tgt_in", tgt_in);
  const std::size_t B = src.shape()[0], S = src.shape()[1], T = tgt_in.shape()[1];
  if (tgt_in.shape()[0] != B)
    throw ShapeError("transformer_encoder_decoder model: src has shape " + shape_string(src.shape()) +
                     " and tgt_in " + shape_string(tgt_in.shape()) + "; the batch sizes must match");
  if (src_padding_)
    check_shape("transformer_encoder_decoder model: source padding mask", *src_padding_,
                {static_cast<long>(B), static_cast<long>(S)});
  if (tgt_padding_)
    check_shape("transformer_encoder_decoder model: target padding mask", *tgt_padding_,
                {static_cast<long>(B), static_cast<long>(T)});
  has_forward_ = false;  // until the forward completes
  const Tensor3 memory = encode(src, src_padding_);
  Tensor3 logits = decode(tgt_in, memory, src_padding_, tgt_padding_);
  src_ids_ = src;
  tgt_ids_ = tgt_in;
  B_ = B;
  S_ = S;
  T_ = T;
  has_forward_ = true;
  return logits;
}

Tensor3 EncoderDecoderModel::forward(const IndexTensor2& /*ids*/) {
  throw std::logic_error(
      "transformer_encoder_decoder model: forward(ids) is not available; call "
      "forward(src, tgt_in) (teacher forcing) or greedy_decode(src, bos, max_len) on the "
      "EncoderDecoderModel (dynamic_cast the SequenceModel)");
}

Tensor3 EncoderDecoderModel::forward(const Tensor3& /*x*/) {
  throw std::logic_error(
      "transformer_encoder_decoder model: forward(x) needs input = linear, which this model does "
      "not support; call forward(src, tgt_in) with token ids");
}

void EncoderDecoderModel::backward(const Tensor3& dlogits) {
  if (!has_forward_)
    throw std::logic_error(
        "transformer_encoder_decoder model.backward: no forward(src, tgt_in) since construction or "
        "the last greedy_decode");
  check_shape("transformer_encoder_decoder model.backward: dlogits", dlogits,
              {static_cast<long>(B_), static_cast<long>(T_), static_cast<long>(cfg_.output_size)});
  const std::size_t L = encoder_layers.size();
  step_norms_ = xt::zeros<float>({2 * L, S_ + T_});
  input_norms_ = xt::zeros<float>({S_ + T_});

  // Decoder: head, final norm, layers (collecting dL/dmemory), target positions.
  Tensor3 g = decoder_norm->backward(head->backward(dlogits));  // ∂L/∂y_L
  Tensor3 dmemory;
  for (std::size_t l = L; l-- > 0;) {
    record_norms(g, step_norms_, L + l, S_);
    g = decoder_layers[l]->backward(g);  // ∂L/∂y_{l-1}
    if (l + 1 == L) dmemory = decoder_layers[l]->memory_grad();
    else dmemory += decoder_layers[l]->memory_grad();
  }
  g = tgt_dropout.backward(g);
  g = tgt_positional->backward(g);
  record_norms(g, input_norms_, S_);
  // The embedding caches only its last ids: run it again on each sequence before its backward.
  embedding.forward(tgt_ids_);
  embedding.backward(g);

  // Encoder: final norm, layers, source positions.
  g = encoder_norm->backward(dmemory);  // ∂L/∂x_L
  for (std::size_t l = L; l-- > 0;) {
    record_norms(g, step_norms_, l, 0);
    g = encoder_layers[l]->backward(g);
  }
  g = src_dropout.backward(g);
  g = src_positional->backward(g);
  record_norms(g, input_norms_, 0);
  embedding.forward(src_ids_);
  embedding.backward(g);
  has_backward_ = true;
}

IndexTensor2 EncoderDecoderModel::greedy_decode(const IndexTensor2& src, std::int32_t bos,
                                                std::size_t max_len) {
  if (cfg_.output_size > cfg_.vocab_size)
    throw ConfigError("output_size", std::to_string(cfg_.output_size),
                      "<= vocab_size = " + std::to_string(cfg_.vocab_size) +
                          " for greedy_decode (predicted ids are fed back as tokens)");
  check_ids("src", src);
  const std::size_t B = src.shape()[0], S = src.shape()[1];
  if (src_padding_)
    check_shape("transformer_encoder_decoder model: source padding mask", *src_padding_,
                {static_cast<long>(B), static_cast<long>(S)});
  if (bos < 0 || static_cast<std::size_t>(bos) >= cfg_.vocab_size)
    throw std::out_of_range("transformer_encoder_decoder model.greedy_decode: bos = " +
                            std::to_string(bos) + " outside [0, vocab_size = " +
                            std::to_string(cfg_.vocab_size) + ")");
  const std::size_t max_positions = tgt_positional->max_positions();
  if (max_positions > 0 && max_len > max_positions)
    throw ShapeError("transformer_encoder_decoder model.greedy_decode: max_len = " +
                     std::to_string(max_len) + " exceeds max_len = " + std::to_string(max_positions) +
                     " of the " + cfg_.positional_encoding + " positional embedding");
  has_forward_ = false;  // the caches below belong to no forward(src, tgt_in)
  const bool was_training = training();
  set_training(false);
  IndexTensor2 out = xt::zeros<std::int32_t>({B, max_len});
  try {
    const Tensor3 memory = encode(src, src_padding_);
    const std::size_t O = cfg_.output_size;
    for (std::size_t k = 1; k <= max_len; ++k) {
      IndexTensor2 prefix({B, k});
      for (std::size_t b = 0; b < B; ++b) {
        prefix(b, 0) = bos;
        for (std::size_t j = 1; j < k; ++j) prefix(b, j) = out(b, j - 1);
      }
      const Tensor3 logits = decode(prefix, memory, src_padding_, nullptr);  // [B, k, O]
      for (std::size_t b = 0; b < B; ++b) {
        const float* row = logits.data() + (b * k + (k - 1)) * O;
        out(b, k - 1) = static_cast<std::int32_t>(std::max_element(row, row + O) - row);
      }
    }
  } catch (...) {
    set_training(was_training);
    throw;
  }
  set_training(was_training);
  return out;
}

const Tensor3& EncoderDecoderModel::input_grad() const {
  throw std::logic_error(
      "transformer_encoder_decoder model.input_grad: embedding input has no input gradient");
}

const Tensor2& EncoderDecoderModel::step_grad_norms() const {
  if (!has_backward_)
    throw std::logic_error("transformer_encoder_decoder model.step_grad_norms: no backward has run");
  return step_norms_;
}

const Tensor1& EncoderDecoderModel::input_grad_norms() const {
  if (!has_backward_)
    throw std::logic_error("transformer_encoder_decoder model.input_grad_norms: no backward has run");
  return input_norms_;
}

std::string EncoderDecoderModel::describe() const {
  std::ostringstream os;
  os << cfg_.model << ": input=embedding(V=" << cfg_.vocab_size << ", E=" << cfg_.embedding_dim
     << ") d_model=" << cfg_.hidden_size << " heads=" << cfg_.n_heads << " d_ff=" << cfg_.d_ff
     << " layers=" << cfg_.num_layers << "+" << cfg_.num_layers << " pos="
     << cfg_.positional_encoding << " norm=" << cfg_.norm << "(" << cfg_.norm_placement << ")"
     << " act=" << cfg_.activation;
  if (cfg_.shared_qk) os << " shared_qk";
  if (cfg_.dropout > 0.0f) os << " dropout=" << cfg_.dropout;
  os << " head=" << cfg_.head << "(O=" << cfg_.output_size << ") params=" << num_params_;
  return os.str();
}

void EncoderDecoderModel::collect_parameters(const std::string& prefix,
                                             std::vector<NamedParameter>& out) {
  embedding.collect_parameters(prefix + "embedding.", out);
  src_positional->collect_parameters(prefix + "src_pos_embedding.", out);
  tgt_positional->collect_parameters(prefix + "tgt_pos_embedding.", out);
  for (std::size_t l = 0; l < encoder_layers.size(); ++l)
    encoder_layers[l]->collect_parameters(
        prefix + "transformer.encoder.layers." + std::to_string(l) + ".", out);
  encoder_norm->collect_parameters(prefix + "transformer.encoder.norm.", out);
  for (std::size_t l = 0; l < decoder_layers.size(); ++l)
    decoder_layers[l]->collect_parameters(
        prefix + "transformer.decoder.layers." + std::to_string(l) + ".", out);
  decoder_norm->collect_parameters(prefix + "transformer.decoder.norm.", out);
  if (head) head->collect_parameters(prefix + "head.", out);
}

void EncoderDecoderModel::set_training(bool training) {
  Module::set_training(training);
  embedding.set_training(training);
  src_dropout.set_training(training);
  tgt_dropout.set_training(training);
  for (auto& layer : encoder_layers) layer->set_training(training);
  encoder_norm->set_training(training);
  for (auto& layer : decoder_layers) layer->set_training(training);
  decoder_norm->set_training(training);
  if (head) head->set_training(training);
}

void EncoderDecoderModel::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
  embedding.collect_buffers(prefix + "embedding.", out);
  src_positional->collect_buffers(prefix + "src_pos_embedding.", out);
  tgt_positional->collect_buffers(prefix + "tgt_pos_embedding.", out);
  src_dropout.collect_buffers(prefix + "src_dropout.", out);
  tgt_dropout.collect_buffers(prefix + "tgt_dropout.", out);
  for (std::size_t l = 0; l < encoder_layers.size(); ++l)
    encoder_layers[l]->collect_buffers(
        prefix + "transformer.encoder.layers." + std::to_string(l) + ".", out);
  encoder_norm->collect_buffers(prefix + "transformer.encoder.norm.", out);
  for (std::size_t l = 0; l < decoder_layers.size(); ++l)
    decoder_layers[l]->collect_buffers(
        prefix + "transformer.decoder.layers." + std::to_string(l) + ".", out);
  decoder_norm->collect_buffers(prefix + "transformer.decoder.norm.", out);
  if (head) head->collect_buffers(prefix + "head.", out);
}

}  // namespace seqlab

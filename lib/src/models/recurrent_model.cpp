#include "seqlab/models/recurrent_model.hpp"

#include <sstream>
#include <stdexcept>
#include <utility>

#include "../nn/recurrent_common.hpp"

namespace seqlab {

std::variant<RNN, LSTM, GRU> RecurrentModel::make_layer(const ModelConfig& cfg, Rng& rng) {
  const std::size_t E = cfg.body_input_size(), H = cfg.hidden_size, L = cfg.num_layers;
  if (cfg.model == "rnn")
    return std::variant<RNN, LSTM, GRU>(std::in_place_type<RNN>, E, H, L, rng,
                                        parse_nonlinearity(cfg.nonlinearity));
  if (cfg.model == "lstm") return std::variant<RNN, LSTM, GRU>(std::in_place_type<LSTM>, E, H, L, rng);
  if (cfg.model == "gru") return std::variant<RNN, LSTM, GRU>(std::in_place_type<GRU>, E, H, L, rng);
  throw std::invalid_argument("RecurrentModel: model = '" + cfg.model +
                              "'; allowed one of rnn, lstm, gru (use make_model for others)");
}

RecurrentModel::RecurrentModel(const ModelConfig& cfg, Rng& rng)
    : InputBodyHeadModel(cfg, rng),
      layer_(make_layer(cfg_, rng)),
      in_drop_(cfg_.dropout, rng.next_u64()),
      out_drop_(cfg_.dropout, rng.next_u64()) {
  if (cfg_.forget_bias != 0.0f) {  // ModelConfig::forget_bias: lstm only (validated)
    LSTM& lstm = std::get<LSTM>(layer_);
    const std::size_t H = lstm.hidden_size();
    for (std::size_t k = 0; k < lstm.num_layers(); ++k) {
      float* b = lstm.bias_hh(k).value.data();  // [4H], gate rows i, f, g, o
      for (std::size_t j = H; j < 2 * H; ++j) b[j] += cfg_.forget_bias;
    }
  }
  build_head(rng);
}

std::size_t RecurrentModel::num_layers() const {
  return std::visit([](const auto& l) { return l.num_layers(); }, layer_);
}

std::size_t RecurrentModel::hidden_size() const {
  return std::visit([](const auto& l) { return l.hidden_size(); }, layer_);
}

std::size_t RecurrentModel::sequential_steps(std::size_t seq_len) const {
  return seq_len * num_layers();
}

Tensor3 RecurrentModel::body_forward(const Tensor3& u) {
  const Tensor3 v = in_drop_.forward(u);                                   // v = drop(u)
  Tensor3 h = std::visit([&](auto& l) { return l.forward(v); }, layer_);  // h = rnn(v), h0 = 0
  return out_drop_.forward(std::move(h));  // drop(h), in place (h itself when it is the identity)
}

Tensor3 RecurrentModel::body_backward(const Tensor3& dh, Tensor2& step_norms) {
  Tensor3 masked;  // dh ⊙ mask, only when the output dropout was not the identity
  if (!out_drop_.last_was_identity()) masked = out_drop_.backward(dh);
  const Tensor3& g = out_drop_.last_was_identity() ? dh : masked;
  const Tensor3 dv = std::visit([&](auto& l) {
    Tensor3 d = l.backward(g);
    step_norms = l.hidden_grad_norms();  // [L, T]
    return d;
  }, layer_);
  return in_drop_.backward(dv);
}

Tensor3 RecurrentModel::body_head_forward(const Tensor3& u) {
  head_time_major_ = false;
  if (out_drop_.p() != 0.0f && out_drop_.training()) return InputBodyHeadModel::body_head_forward(u);
  const Tensor3 v = in_drop_.forward(u);  // v = drop(u); the output dropout is the identity
  const std::size_t B = v.shape()[0], T = v.shape()[1], O = head->out_features();
  const float* h_tm = std::visit([&](auto& l) {
    l.forward_time_major(v);
    return l.output_time_major();  // [T·B, H], row t·B + b
  }, layer_);
  const Tensor2 y_tm = head->forward_borrowed_rows(h_tm, T * B);  // [T·B, O]
  Tensor3 y({B, T, O});
  detail::swap_leading_axes(y_tm.data(), y.data(), T, B, O);
  head_time_major_ = true;
  return y;
}

Tensor3 RecurrentModel::body_head_backward(const Tensor3& dlogits, Tensor2& step_norms) {
  if (!head_time_major_) return InputBodyHeadModel::body_head_backward(dlogits, step_norms);
  const std::size_t B = dlogits.shape()[0], T = dlogits.shape()[1], O = dlogits.shape()[2];
  Tensor2 dy_tm({T * B, O});
  detail::swap_leading_axes(dlogits.data(), dy_tm.data(), B, T, O);
  const Tensor3 dv = std::visit([&](auto& l) {
    head->backward_rows_into(dy_tm.data(), T * B, l.output_grad_time_major());
    Tensor3 d = l.backward_time_major();
    step_norms = l.hidden_grad_norms();  // [L, T]
    return d;
  }, layer_);
  return in_drop_.backward(dv);
}

void RecurrentModel::collect_body_parameters(const std::string& prefix,
                                             std::vector<NamedParameter>& out) {
  std::visit([&](auto& l) { l.collect_parameters(prefix, out); }, layer_);
}

void RecurrentModel::set_body_training(bool training) {
  std::visit([&](auto& l) { l.set_training(training); }, layer_);
  in_drop_.set_training(training);
  out_drop_.set_training(training);
}

std::string RecurrentModel::describe_body() const {
  std::ostringstream os;
  os << "hidden=" << cfg_.hidden_size << " layers=" << cfg_.num_layers;
  if (cfg_.model == "rnn") os << " nonlinearity=" << cfg_.nonlinearity;
  if (cfg_.forget_bias != 0.0f) os << " forget_bias=" << cfg_.forget_bias;
  if (cfg_.dropout > 0.0f) os << " dropout=" << cfg_.dropout;
  return os.str();
}

void RecurrentModel::collect_body_buffers(const std::string& prefix,
                                          std::vector<NamedBuffer>& out) {
  std::visit([&](auto& l) { l.collect_buffers(prefix, out); }, layer_);
  in_drop_.collect_buffers(prefix + "in_dropout.", out);
  out_drop_.collect_buffers(prefix + "out_dropout.", out);
}

}  // namespace seqlab

#include "seqlab/models/recurrent_model.hpp"

#include <sstream>
#include <stdexcept>
#include <utility>

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

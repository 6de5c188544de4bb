#pragma once
// Recurrent sequence model: input layer -> stacked RNN / LSTM / GRU -> linear head
// (model_config.hpp, sequence_model.hpp). Build it with make_model (factory.hpp).
//
// Legend: B batch, T seq_len, E body input width, H hidden_size, L num_layers, O output_size.
//
// Body: one seqlab::RNN / LSTM / GRU with L layers (nn/rnn.hpp, lstm.hpp, gru.hpp), zero initial
// state, keys "<model>.weight_ih_l{k}" ... as torch.nn.{RNN,LSTM,GRU}.state_dict() under a
// module named after the family. With dropout p > 0, inverted dropout (nn/dropout.hpp) on the
// body's input and on its output before the head: the non-recurrent connections of Zaremba,
// Sutskever & Vinyals 2014 (arXiv 1409.2329, §3.1, Fig. 2) outside the stack. Not done: dropout
// between stacked layers (torch.nn.LSTM's `dropout` argument), since the nn layers run all L
// layers in one call.
// Draw order: input layer, recurrent layer, the two dropout seeds (rng.next_u64(), drawn even when
// p = 0), head. LSTM with cfg.forget_bias != 0: after the draws, forget_bias is added to the
// forget-gate rows [H, 2H) of bias_hh_l{k} of every layer (ModelConfig::forget_bias), so the
// forget gate starts near σ(forget_bias) instead of σ(0) = 0.5; no extra draws.
#include <cstddef>
#include <string>
#include <variant>
#include <vector>

#include "seqlab/models/sequence_model.hpp"
#include "seqlab/nn/dropout.hpp"
#include "seqlab/nn/gru.hpp"
#include "seqlab/nn/lstm.hpp"
#include "seqlab/nn/rnn.hpp"

namespace seqlab {

class RecurrentModel : public InputBodyHeadModel {
 public:
  /// cfg.model must be "rnn", "lstm" or "gru" (std::invalid_argument otherwise); throws
  /// ConfigError for an invalid cfg.
  RecurrentModel(const ModelConfig& cfg, Rng& rng);

  /// 0: the output at t depends on every earlier input (unbounded).
  std::size_t receptive_field() const override { return 0; }
  /// seq_len × L: the layers run one after another and each steps through the sequence one
  /// step at a time (a wavefront schedule could overlap layers, T + L − 1; not implemented).
  std::size_t sequential_steps(std::size_t seq_len) const override;

  std::size_t num_layers() const;
  std::size_t hidden_size() const;

 protected:
  Tensor3 body_forward(const Tensor3& u) override;
  Tensor3 body_backward(const Tensor3& dh, Tensor2& step_norms) override;
  /// Where the output dropout is the identity (eval, or dropout = 0): the head reads the layer's
  /// time-major states (RecurrentBase::forward_time_major) and writes its input gradient into the
  /// layer's time-major buffer, so only the [T, B, O] logits are reordered, not the [T, B, H]
  /// states and their gradient. Otherwise the default (body_forward, then the head).
  Tensor3 body_head_forward(const Tensor3& u) override;
  Tensor3 body_head_backward(const Tensor3& dlogits, Tensor2& step_norms) override;
  void collect_body_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void set_body_training(bool training) override;
  void collect_body_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;
  std::string describe_body() const override;

 private:
  std::variant<RNN, LSTM, GRU> make_layer(const ModelConfig& cfg, Rng& rng);
  std::variant<RNN, LSTM, GRU> layer_;
  Dropout in_drop_, out_drop_;
  bool head_time_major_ = false;  // the last body_head_forward took the time-major path
};

}  // namespace seqlab

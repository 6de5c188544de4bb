#pragma once
// SequenceModel: the one interface every experiment uses to swap models (DESIGN.md, models/),
// and InputBodyHeadModel, the shared input layer -> body -> head machinery of the recurrent and
// convolutional families (recurrent_model.hpp, tcn_model.hpp). Build models with make_model
// (factory.hpp).
//
// Legend: B batch, T seq_len (>= 1), D input_size, E body input width (ModelConfig::
// body_input_size), H body output width (hidden_size or the last TCN channel count), O output_size,
// L body levels (recurrent layers or TCN blocks), T_out = T (per_position) or 1 (last_position).
//
// Gradient-flow diagnostics (the long-range experiment, claim 2 of DESIGN.md):
//   step_grad_norms()  [L, T]  ‖∂L/∂h^l_t‖_F over the batch, h^l = output of body level l at step t,
//                             the TOTAL gradient reaching it (recurrent: from the level above at t
//                             and through the recurrence from t+1; TCN: from every later position
//                             of the level above that sees it).
//   input_grad_norms() [T]    ‖∂L/∂u_t‖_F over [B, E], u = the body's input (embedding output,
//                             projected features, or x itself when there is no projection).
// Both are those of the last backward, and refer to the (upstream) gradient that backward was
// given: with dlogits from a loss at step T-1 only, row t shows how much of that loss reaches t.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/nn/embedding.hpp"
#include "seqlab/nn/linear.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

class SequenceModel : public Module {
 public:
  SequenceModel(const SequenceModel&) = delete;  // layers hold Parameters referenced by address
  SequenceModel& operator=(const SequenceModel&) = delete;
  ~SequenceModel() override = default;

  /// Embedding input: ids [B, T] (each in [0, V)) -> logits [B, T_out, O].
  /// Throws std::logic_error if the model has linear input; std::out_of_range for a bad id
  /// (from Embedding); ShapeError if T == 0.
  virtual Tensor3 forward(const IndexTensor2& ids) = 0;
  /// Linear input: x [B, T, D] -> logits [B, T_out, O].
  /// Throws std::logic_error if the model has embedding input; ShapeError if x is not [B, T, D]
  /// with T >= 1.
  virtual Tensor3 forward(const Tensor3& x) = 0;
  /// dlogits [B, T_out, O] = dL/d(logits of the last forward). ADDS dL/dθ into every
  /// Parameter::grad, stores input_grad() (linear input), step_grad_norms() and
  /// input_grad_norms(). Throws std::logic_error before any forward, ShapeError for a wrong shape.
  virtual void backward(const Tensor3& dlogits) = 0;

  /// dL/dx [B, T, D] of the last backward (linear input only). Throws std::logic_error with
  /// embedding input or before any backward.
  virtual const Tensor3& input_grad() const = 0;
  /// [L, T] (file comment). Throws std::logic_error before any backward.
  virtual const Tensor2& step_grad_norms() const = 0;
  /// [T] (file comment). Throws std::logic_error before any backward.
  virtual const Tensor1& input_grad_norms() const = 0;

  /// One line: family, input, sizes, head, parameter count, e.g.
  /// "lstm: input=embedding(V=10, E=16) hidden=64 layers=2 head=per_position(O=10) params=55082".
  virtual std::string describe() const = 0;
  /// Input steps one output can depend on; 0 means unbounded (recurrent models).
  virtual std::size_t receptive_field() const = 0;
  /// Operations that must run one after another for a sequence of seq_len steps, counted from the
  /// implementation's structure (recurrent: seq_len × L; TCN: its convolution layers).
  virtual std::size_t sequential_steps(std::size_t seq_len) const = 0;

  const ModelConfig& config() const { return cfg_; }

 protected:
  /// Validates cfg (ConfigError) and stores it.
  explicit SequenceModel(const ModelConfig& cfg);
  ModelConfig cfg_;
};

/// input layer -> body -> head (model_config.hpp's file comment), for the rnn/lstm/gru/tcn
/// families. Subclasses build the body between the two protected construction steps and implement
/// the body_* hooks. Parameter draw order from the rng: input layer, body, head (the order of
/// PyTorch modules defined in that order).
class InputBodyHeadModel : public SequenceModel {
 public:
  Tensor3 forward(const IndexTensor2& ids) override;
  Tensor3 forward(const Tensor3& x) override;
  void backward(const Tensor3& dlogits) override;
  const Tensor3& input_grad() const override;
  const Tensor2& step_grad_norms() const override;
  const Tensor1& input_grad_norms() const override;
  std::string describe() const override;

  /// "embedding.*" or "input.*", then the body's ("<cfg.model>.*"), then "head.*".
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// Forwards train/eval to the body (dropout).
  void set_training(bool training) override;
  /// The body's buffers under "<cfg.model>." (collect_body_buffers); the input layer and the head
  /// have none.
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;

  std::optional<Embedding> embedding;  // "embedding": embedding input
  std::optional<Linear> input;         // "input": linear input with embedding_dim > 0
  std::optional<Linear> head;          // "head": Linear(H, O); always present once built

 protected:
  /// Validates cfg and draws the input layer's parameters from rng.
  InputBodyHeadModel(const ModelConfig& cfg, Rng& rng);
  /// Draws the head's parameters; call at the end of the subclass constructor (after the body).
  void build_head(Rng& rng);

  /// u [B, T, E] -> h [B, T, H].
  virtual Tensor3 body_forward(const Tensor3& u) = 0;
  /// dh [B, T, H] -> du [B, T, E]; ADDS into the body's parameter grads and fills
  /// step_norms [L, T] (resized by the callee).
  virtual Tensor3 body_backward(const Tensor3& dh, Tensor2& step_norms) = 0;
  /// Body and head on every position: logits [B, T, O] of the body input u [B, T, E], and its
  /// backward, dlogits [B, T, O] -> du [B, T, E] (step_norms as body_backward's). By default
  /// head->forward(body_forward(u)) and body_backward(head->backward(dlogits)); a body whose
  /// states are time-major overrides both to feed the head those rows directly (the head maps
  /// each position alone, so only the rows' order differs). Not used with last_position().
  virtual Tensor3 body_head_forward(const Tensor3& u);
  virtual Tensor3 body_head_backward(const Tensor3& dlogits, Tensor2& step_norms);
  virtual void collect_body_parameters(const std::string& prefix,
                                       std::vector<NamedParameter>& out) = 0;
  virtual void set_body_training(bool training) = 0;
  /// The body's buffers (Module::collect_buffers). Default none; every built-in family overrides
  /// it (dropout generators, BatchNorm statistics), and so must a family whose body has any.
  virtual void collect_body_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) {
    (void)prefix;
    (void)out;
  }
  /// The body part of describe(), e.g. "hidden=64 layers=2".
  virtual std::string describe_body() const = 0;

 private:
  Tensor3 run(const Tensor3& u);  // body + head on the body input

  std::size_t num_params_ = 0;  // cached by build_head
  std::size_t B_ = 0, T_ = 0;
  bool has_forward_ = false, has_backward_ = false;
  Tensor3 input_grad_;        // [B, T, D] (linear input)
  Tensor2 step_norms_;        // [L, T]
  Tensor1 input_norms_;       // [T]
};

}  // namespace seqlab

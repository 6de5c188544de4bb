#pragma once
// Convolutional sequence model: input layer -> TCN (Bai, Kolter & Koltun 2018, arXiv 1803.01271;
// nn/tcn.hpp) -> linear head (model_config.hpp, sequence_model.hpp), as Bai et al.'s
// TCN/copy_memory/model.py (TCN followed by nn.Linear on every position) and TCN/adding_problem
// (nn.Linear on the last position). Build it with make_model (factory.hpp).
//
// Legend: B batch, T seq_len, E body input width, C_i channels of level i, L levels, k kernel_size.
//
// Body: TCN(E, channels, k, dropout, weight_norm), keys "tcn.network.{i}.conv1.weight" ...
// Dropout is the TCN's own (inside every block; none on the input or before the head).
// step_grad_norms() row l = ‖∂L/∂y^l_t‖ with y^l the output of block l (row L-1 is the gradient
// arriving from the head); the gradient at the TCN's input is input_grad_norms().
// Draw order: input layer, TCN (its own order), head.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/models/sequence_model.hpp"
#include "seqlab/nn/tcn.hpp"

namespace seqlab {

class TCNModel : public InputBodyHeadModel {
 public:
  /// cfg.model must be "tcn" (std::invalid_argument otherwise); throws ConfigError for an
  /// invalid cfg.
  TCNModel(const ModelConfig& cfg, Rng& rng);

  /// 1 + 2·(k−1)·(2^L − 1) input steps (nn/tcn.hpp).
  std::size_t receptive_field() const override { return tcn.receptive_field(); }
  /// Convolutions on the critical path: conv1 and conv2 of every block (the 1×1 downsample runs
  /// beside them); independent of seq_len, every position of a convolution is computed at once.
  std::size_t sequential_steps(std::size_t seq_len) const override;

  TCN tcn;  // "tcn.*"; public so tests can read block caches (ReLU kinks)

 protected:
  Tensor3 body_forward(const Tensor3& u) override;
  Tensor3 body_backward(const Tensor3& dh, Tensor2& step_norms) override;
  void collect_body_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void set_body_training(bool training) override;
  void collect_body_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;
  std::string describe_body() const override;
};

}  // namespace seqlab

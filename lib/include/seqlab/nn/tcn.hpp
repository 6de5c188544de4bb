#pragma once
// Temporal Convolutional Network (Bai, Kolter & Koltun 2018, "An Empirical Evaluation of Generic
// Convolutional and Recurrent Networks for Sequence Modeling", arXiv 1803.01271, §3 and Fig. 1;
// reference code locuslab/TCN, TCN/tcn.py: TemporalBlock, TemporalConvNet).
//
// Legend: B batch, T seq_len, C_in input channels, C_i channels of level i, k kernel_size,
// L number of levels, d_i = 2^i dilation of level i.
//
// Layout: batch-first with channels last, x [B, T, C_in] -> [B, T, C_last] (Bai's code works on
// [B, C, T]; see conv1d.hpp).
//
// TemporalBlock (Fig. 1b), with every convolution dilated and causal (conv1d.hpp):
//   a1 = conv1(x)            Conv1d(C_in -> C_out, k, d)
//   h1 = dropout1(relu(a1))
//   a2 = conv2(h1)           Conv1d(C_out -> C_out, k, d)
//   h2 = dropout2(relu(a2))
//   s  = h2 + res,  res = downsample(x) (1×1 Conv1d) if C_in != C_out, else x
//   y  = relu(s)
// TCN: blocks 0..L−1 with dilation 2^i, C_in of block i = C_{i−1} (C_in for i = 0).
// Receptive field: a dilated causal convolution sees (k−1)·d + 1 inputs (§3.3); each block adds
// 2·(k−1)·2^i, so R = 1 + 2·(k−1)·(2^L − 1).
//
// Parameter keys as Bai's state_dict (the duplicate "net.N.*" aliases of their nn.Sequential are
// not listed): "network.{i}.conv1.weight", "network.{i}.conv1.bias", "network.{i}.conv2.weight",
// "network.{i}.conv2.bias", and when C_in != C_out "network.{i}.downsample.weight",
// "network.{i}.downsample.bias". With weight_norm = true, conv1/conv2 list "bias", "weight_g",
// "weight_v" instead of "weight", "bias" (torch.nn.utils.weight_norm's keys).
//
// Initialisation (draw order from `rng`: conv1 weight, conv1 bias, conv2 weight, conv2 bias,
// [downsample weight, bias] all PyTorch Conv1d defaults U(±1/sqrt(in·k)); then two next_u64()
// seeds for dropout1, dropout2; then the N(0, 0.01) redraws below):
//   weight_norm = false (default): conv1, conv2 and downsample weights N(0, 0.01), as Bai's
//     init_weights; biases keep PyTorch's default.
//   weight_norm = true: conv1/conv2 keep the PyTorch default weight and are reparametrised by
//     weight norm (g = ‖w‖, v = w); downsample weight N(0, 0.01). This is what Bai's code
//     effectively does: its normal_(0, 0.01) on conv1/conv2.weight is overwritten by
//     weight_norm's forward pre-hook (locuslab/TCN issue #1, confirmed by the authors), while the
//     un-normalised downsample keeps N(0, 0.01).
// Known differences from the paper's text (§3.4, residual block):
// - weight normalisation of the convolution filters: only with weight_norm = true (the default
//   keeps the plain "weight" parameters the brief's keys name);
// - dropout: element-wise torch.nn.Dropout as in Bai's code, not the channel-wise "spatial
//   dropout" the paper's text describes.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/conv1d.hpp"
#include "seqlab/nn/dropout.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

/// One residual block of Fig. 1b (formulas in the file comment).
class TemporalBlock : public Module {
 public:
  /// Throws std::invalid_argument (from Conv1d / Dropout) naming the argument if in_channels,
  /// out_channels, kernel_size or dilation is 0 or dropout is outside [0, 1).
  TemporalBlock(std::size_t in_channels, std::size_t out_channels, std::size_t kernel_size,
                std::size_t dilation, float dropout, Rng& rng, bool weight_norm = false);

  /// x [B, T, C_in] -> y [B, T, C_out]. Caches a1, a2, s. Throws ShapeError for a wrong x.
  Tensor3 forward(const Tensor3& x);
  /// dy [B, T, C_out] -> dx [B, T, C_in]; ADDS into every parameter grad. Throws
  /// std::logic_error before forward, ShapeError for a wrong dy.
  Tensor3 backward(const Tensor3& dy);

  /// Forwards train/eval to both dropouts.
  void set_training(bool training) override;
  /// Freezes (or unfreezes) both dropout masks (Dropout::freeze_mask).
  void freeze_dropout_masks(bool frozen);

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// The dropout generators ("dropout1.rng", "dropout2.rng"; TCN: under "network.{i}.").
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;

  bool has_downsample() const { return downsample.has_value(); }
  /// Caches of the last forward (for tests that keep away from ReLU kinks): conv1 output a1,
  /// conv2 output a2, residual sum s; each [B, T, C_out].
  const Tensor3& conv1_output() const { return a1_; }
  const Tensor3& conv2_output() const { return a2_; }
  const Tensor3& residual_sum() const { return s_; }

  Conv1d conv1;                      // "conv1.*"
  Conv1d conv2;                      // "conv2.*"
  std::optional<Conv1d> downsample;  // "downsample.*", only when C_in != C_out
  Dropout dropout1, dropout2;

 private:
  Tensor3 a1_, a2_, s_;
  bool cached_ = false;
};

/// Bai et al.'s TemporalConvNet: L TemporalBlocks with dilation 2^i (file comment).
class TCN : public Module {
 public:
  /// num_channels: C_0..C_{L−1} (L >= 1, each >= 1). kernel_size k >= 1 (Bai's default 2),
  /// dropout p in [0, 1) (Bai's default 0.2). Throws std::invalid_argument naming the argument
  /// (num_inputs, num_channels, num_channels[i], kernel_size, dropout) and the value.
  TCN(std::size_t num_inputs, const std::vector<std::size_t>& num_channels, std::size_t kernel_size,
      float dropout, Rng& rng, bool weight_norm = false);

  /// x [B, T, C_in] -> y [B, T, C_{L−1}]; y[:, t] depends on x[:, t−R+1 .. t] only
  /// (R = receptive_field()). Throws ShapeError for a wrong x.
  Tensor3 forward(const Tensor3& x);
  /// dy [B, T, C_{L−1}] -> dx [B, T, C_in]; ADDS into every parameter grad and stores
  /// input_grad_norms(). Throws std::logic_error before forward, ShapeError for a wrong dy.
  Tensor3 backward(const Tensor3& dy);

  /// R = 1 + 2·(k−1)·(2^L − 1) input steps (Bai et al. §3.3, two convolutions per block).
  std::size_t receptive_field() const;
  /// [T]: ‖∂L/∂x_t‖ (Frobenius norm over [B, C_in]) from the last backward. Throws
  /// std::logic_error before any backward.
  const Tensor1& input_grad_norms() const;

  /// Forwards train/eval to every block's dropouts.
  void set_training(bool training) override;
  void freeze_dropout_masks(bool frozen);

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// The dropout generators ("dropout1.rng", "dropout2.rng"; TCN: under "network.{i}.").
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;

  std::size_t num_levels() const { return blocks_.size(); }
  std::size_t num_inputs() const { return num_inputs_; }
  std::size_t output_size() const { return blocks_.back().conv2.out_channels(); }
  std::size_t kernel_size() const { return kernel_size_; }
  /// Block i (i < num_levels(); throws std::out_of_range otherwise).
  TemporalBlock& block(std::size_t i);

 private:
  std::size_t num_inputs_, kernel_size_;
  std::vector<TemporalBlock> blocks_;
  Tensor1 grad_norms_;
  bool has_backward_ = false;
};

}  // namespace seqlab

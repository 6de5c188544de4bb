#pragma once
// 1-D convolution over time with dilation and causal (or 'same') padding, as torch.nn.Conv1d
// (https://pytorch.org/docs/1.13/generated/torch.nn.Conv1d.html) with stride 1 and groups 1.
//
// Legend: B batch, T seq_len, in = in_channels, out = out_channels, k = kernel_size, d = dilation,
// N = B*T rows.
//
// LAYOUT: seqlab is batch-first with time on axis 1 and channels last: x [B, T, in] ->
// y [B, T, out]. PyTorch's Conv1d takes [B, C, T]; a PyTorch result is compared after
// x.permute(0, 2, 1). The weight keeps PyTorch's layout, "weight" [out, in, k], "bias" [out], so
// state_dicts map one to one.
//
// Formula (cross-correlation, as PyTorch):
//   y[b, t, o] = bias[o] + Σ_{j<k} Σ_{c<in} weight[o, c, j] · x[b, t + j·d − P, c],
// with x = 0 outside [0, T) and P the left padding:
//   causal = true  : P = (k−1)·d, nothing on the right. Equal to PyTorch
//                    Conv1d(padding=(k−1)·d) followed by dropping the last (k−1)·d outputs
//                    (Chomp1d of Bai, Kolter & Koltun 2018, arXiv 1803.01271 §3.2, code
//                    locuslab/TCN TCN/tcn.py). y[t] depends on x[t−(k−1)d .. t] only.
//   causal = false : PyTorch's padding='same': total (k−1)·d, P = ⌊(k−1)·d / 2⌋ on the left and
//                    the rest on the right.
//
// Implementation: im2col GEMMs over blocks of rows. With W̃ [out, k·in] (W̃[o, j·in + c] =
// weight[o, c, j]) and W̃q [k·out, in] (W̃q[j·out + o, c] = weight[o, c, j]), packed once per
// forward, and for a block of rows (b, t) the unfolded input and output gradient
//   cols  [rows, k·in],  cols[(b, t), j·in + c]  = x[b, t + j·d − P, c]
//   dcols [rows, k·out], dcols[(b, u), j·out + o] = dy[b, u + P − j·d, o]   (0 outside the sequence;
//                        x[u] enters y[u + P − j·d] through tap j)
// a forward and a backward are
//   forward   y = cols · W̃ᵀ + bias                                     (one GEMM per block)
//   backward  dx = dcols · W̃q       (dx[u] = Σ_j W_jᵀ dy[u + P − j·d]; no scatter-add)
//             dW̃q += dcolsᵀ · x     (dW[o, c, j] = Σ_u dy[u + P − j·d, o] x[u, c])
// so a backward unfolds dy once and reads the cached x as it is.
// Few channels (in, out <= 16 and k·max(in, out) <= 256, the TCNs of the experiments) with the
// taps' span (k−1)·d at most T skip the unfolding: per run of a block's rows in one sequence, its
// input rows and the span, read in place where they lie inside the sequence and copied with their
// zero padding only at its ends (rows + (k−1)·d rows of in floats, not k copies), and tap tiles
// (nn/tap_gemm.hpp) that read unfolded element (t, j·in + c) as window[t + j·d, c], the same
// products of depth k·in; the backward the same with windows of dy (the taps reversed) for dx,
// and per tap dW_j = window(x)ᵀ shifted by j·d times dy.
// The blocks hold chunk_rows() rows (about kChunkBytes of unfolded floats, so a block's columns
// stay in the core's cache between their copy and the GEMM that reads them) and are split over
// the thread budget like a large GEMM's rows (core/gemm.hpp, for_gemm_rows); the blocks' dW̃q are
// added in block order, so the split itself changes no result. k = 1 reads x (and dy) in place.
// The alternative, one GEMM per tap over a zero-padded copy of the input (y += x_shifted · W_jᵀ),
// runs k products of inner dimension in (11–64 channels in the experiments) instead of one of k·in
// (the tap tiles above keep the one product and drop the copy).
// Memory: the cache holds a copy of x only; the unfolded blocks are per-call scratch (a block of
// k·max(in, out) floats a row per thread), so a deep TCN does not keep k·T·C floats per convolution.
//
// Weight normalisation (Salimans & Kingma 2016, arXiv 1602.07868 eq. 2; the TCN of Bai et al.
// uses it on both convolutions of a block): apply_weight_norm() reparametrises as
// torch.nn.utils.weight_norm(conv, name='weight', dim=0): weight = g · v / ‖v‖ with ‖v‖ over
// (in, k) per output channel, parameters "weight_g" [out, 1, 1] = ‖weight‖ and "weight_v" [out,
// in, k] = weight at that moment (so the function is unchanged). `weight` then holds the derived
// weight of the last forward and is no longer listed as a parameter.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

class Conv1d : public Module {
 public:
  /// Weight [out, in, k] then bias [out], both drawn from U(-1/sqrt(in·k), 1/sqrt(in·k)), row-major
  /// (PyTorch's Conv1d.reset_parameters: kaiming_uniform_(a=sqrt(5)) with fan_in = in·k). With
  /// bias = false `bias` has shape [0] and is not listed.
  /// Throws std::invalid_argument naming the argument if in_channels, out_channels, kernel_size or
  /// dilation is 0.
  Conv1d(std::size_t in_channels, std::size_t out_channels, std::size_t kernel_size, Rng& rng,
         std::size_t dilation = 1, bool causal = true, bool bias = true);

  /// x [B, T, in] -> y [B, T, out] (formula above). Caches a copy of x for backward; any T >= 0.
  /// Throws ShapeError if x is not [*, *, in] or a parameter has the wrong shape.
  Tensor3 forward(const Tensor3& x);
  /// As forward(const&), on an input the caller gives up: x itself becomes the cache (no copy).
  Tensor3 forward(Tensor3&& x);
  /// dy [B, T, out] -> dx [B, T, in]. ADDS into weight.grad (or weight_g/weight_v grads under
  /// weight norm) and bias.grad. Throws std::logic_error before any forward, ShapeError if dy is
  /// not [B, T, out] for the B, T of the last forward.
  Tensor3 backward(const Tensor3& dy);

  /// Reparametrises weight = g · v/‖v‖ (see the file comment). Throws std::logic_error if already
  /// applied or if some output channel's weight is all zero (‖v‖ = 0, g/‖v‖ undefined).
  void apply_weight_norm();
  bool weight_norm() const { return weight_norm_; }

  /// Lists "weight" (or "weight_g", "weight_v" after apply_weight_norm) and "bias", in
  /// PyTorch's state_dict order (weight_norm lists bias before weight_g, weight_v).
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  std::size_t in_channels() const { return in_; }
  std::size_t out_channels() const { return out_; }
  std::size_t kernel_size() const { return k_; }
  std::size_t dilation() const { return d_; }
  bool causal() const { return causal_; }
  bool has_bias() const { return has_bias_; }
  /// Left padding P: (k−1)·d if causal, else ⌊(k−1)·d/2⌋.
  std::size_t left_padding() const { return causal_ ? (k_ - 1) * d_ : (k_ - 1) * d_ / 2; }
  /// Inputs that one output sees: (k−1)·d + 1.
  std::size_t receptive_field() const { return (k_ - 1) * d_ + 1; }
  /// Rows per block of the im2col GEMMs (file comment): as many rows as have kChunkBytes of
  /// unfolded columns (k·max(in, out) floats a row), or kWeightPackRatio·max(in, out) rows if that
  /// is more (the weights are packed once per block), rounded down to a multiple of 48, at least 48.
  std::size_t chunk_rows() const;
  static constexpr std::size_t kChunkBytes = 256 * 1024;
  static constexpr std::size_t kWeightPackRatio = 16;

  Parameter weight;    // "weight" [out, in, k] (derived from g, v under weight norm)
  Parameter bias;      // "bias" [out] ([0] and unlisted when bias = false)
  Parameter weight_g;  // "weight_g" [out, 1, 1]; [0, 1, 1] and unlisted without weight norm
  Parameter weight_v;  // "weight_v" [out, in, k]; [0, in, k] and unlisted without weight norm

 private:
  void check_parameters() const;
  void pack_weight();  // weight (from g, v if weight norm) -> wp_, wq_
  Tensor3 forward_cached();  // the forward on x_ (cached by either forward), weights packed
  // src [B_, T_, w] -> cols [r1 − r0, k·w]: cols[r − r0, j·w + c] = src[b, t + off + j·step, c]
  // for the rows r = b·T_ + t in [r0, r1), 0 outside the sequence.
  void unfold(const float* src, std::size_t w, long off, long step, std::size_t r0, std::size_t r1,
              float* cols) const;

  std::size_t in_, out_, k_, d_;
  bool causal_, has_bias_, weight_norm_ = false;

  Tensor2 wp_;     // [out, k·in] packed weight of the last forward (W̃)
  Tensor2 wq_;     // [k·out, in] the same weights for the backward (W̃q)
  Tensor1 vnorm_;  // [out] ‖v_o‖ of the last forward (weight norm)
  Tensor3 x_;      // [B, T, in] input of the last forward (cols are rebuilt from it in backward)
  std::size_t B_ = 0, T_ = 0;
  bool cached_ = false;
};

}  // namespace seqlab

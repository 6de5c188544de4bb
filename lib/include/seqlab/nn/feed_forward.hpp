#pragma once
// Position-wise feed-forward block of the Transformer (Vaswani et al. 2017, arXiv 1706.03762
// §3.3 eq. 2, FFN(x) = max(0, x W1 + b1) W2 + b2), in the form and with the parameter names of
// torch.nn.TransformerEncoderLayer's feed-forward
// (https://pytorch.org/docs/1.13/generated/torch.nn.TransformerEncoderLayer.html):
//   y = linear2(dropout(act(linear1(x)))),  act = relu or exact gelu.
// The dropout after linear2 (TransformerEncoderLayer.dropout2, on the residual branch) belongs to
// the Transformer layer, not to this block.
//
// Legend: B batch, T seq_len, D = d_model, F = d_ff; N = B·T positions.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/dropout.hpp"
#include "seqlab/nn/linear.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

class FeedForward : public Module {
 public:
  /// linear1 (D -> F) then linear2 (F -> D), each initialised as nn.Linear (U(±1/sqrt(fan_in)),
  /// weight then bias) from `rng` in that order; the dropout layer (drop probability `dropout`)
  /// draws from its own Rng seeded with `dropout_seed`.
  /// Throws std::invalid_argument naming the argument and value if d_model or d_ff is 0,
  /// activation is not "relu" or "gelu", or dropout is outside [0, 1); nothing is drawn from
  /// `rng` then.
  FeedForward(std::size_t d_model, std::size_t d_ff, Rng& rng, const std::string& activation = "relu",
              float dropout = 0.0f, std::uint64_t dropout_seed = 0);

  /// x [B, T, D] -> y [B, T, D] = linear2(dropout(act(linear1(x)))). Caches linear1's output
  /// [B, T, F] (with relu, relu(a) made in place, which linear2 reads in place; with gelu, a and
  /// gelu(a)); the Linear and Dropout members keep their own caches. Throws ShapeError if x is not
  /// [*, *, D]; after a throw backward needs a new forward.
  Tensor3 forward(const Tensor3& x);
  /// As forward(x), with x taken over by linear1 as its input cache instead of copied
  /// (Linear::forward(Tensor3&&)); x is left moved-from. Every check (x's shape, both Linears'
  /// parameters) runs before x is taken, so those throws leave it intact; only std::bad_alloc
  /// later can leave it moved-from.
  Tensor3 forward(Tensor3&& x);
  /// dy [B, T, D] -> dx [B, T, D]; ADDS into all four parameter grads. Throws std::logic_error
  /// before any forward, ShapeError if dy is not the shape of the last forward's output.
  Tensor3 backward(const Tensor3& dy);

  /// Forwards train/eval to the dropout layer.
  void set_training(bool training) override;
  /// Dropout::freeze_mask (gradient checks with dropout on).
  void freeze_dropout_mask(bool frozen) { dropout.freeze_mask(frozen); }

  /// "linear1.weight" [F, D], "linear1.bias" [F], "linear2.weight" [D, F], "linear2.bias" [D].
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  /// "dropout.rng" (the inner dropout's generator), as PyTorch's TransformerEncoderLayer.dropout.
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) override;

  std::size_t d_model() const { return d_model_; }
  std::size_t d_ff() const { return d_ff_; }
  const std::string& activation() const { return activation_; }
  /// The hidden activation h = act(x W1ᵀ + b1) [B, T, F] of the last forward (empty before one).
  /// For relu, h > 0 exactly where the pre-activation is > 0.
  const Tensor3& hidden() const { return gelu_ ? h_ : a_; }

  Linear linear1;   // "linear1.*" D -> F
  Linear linear2;   // "linear2.*" F -> D
  Dropout dropout;  // inner dropout, after the activation

 private:
  // The rest of forward once a_ = linear1(x) is made; b, t: x's batch and seq_len.
  Tensor3 forward_after_linear1(std::size_t b, std::size_t t);

  std::size_t d_model_, d_ff_;
  std::string activation_;
  bool gelu_;
  Tensor3 a_;  // [B, T, F] linear1 output a; relu: h = relu(a), in place (relu' = [h > 0])
  Tensor3 h_;  // [B, T, F] gelu only: h = gelu(a) (gelu' needs a)
  bool dropout_active_ = false;  // the last forward applied the inner dropout (training, p > 0)
  std::size_t b_ = 0, t_ = 0;
  bool cached_ = false;
};

}  // namespace seqlab

#pragma once
// A new positional encoding, defined outside the library: how a user adds one (README "Extending
// seqlab", "add a positional encoding"). It is a class derived from seqlab::PositionalEncoding
// (nn/positional_encoding.hpp) and one registration line in ramp_encoding.cpp; from then on
// `positional_encoding = ramp` works in every ModelConfig, make_model, count_parameters and
// hidden_size_for_budget, and is listed by seqlab::positional_encoding_names() (--help, messages).
//
// "ramp": a learned direction scaled by the position, added to the token embeddings:
//   y[b, t, :] = x[b, t, :] + (p_t / L) · weight,   p_t = pos_offset + t,
// with L = the length scale (ModelConfig::max_len; positions beyond L extrapolate linearly, so
// there is no length limit) and "weight" [D] a parameter drawn from N(0, 1). It is the simplest
// absolute encoding with a parameter: one position feature instead of a table (learned) or D/2
// frequencies (sinusoidal, Vaswani et al. 2017 §3.5). A toy, not from a paper; the experiment in
// this folder measures whether it carries enough position information for a previous-token task.
//
// Legend: B batch, T seq_len, D d_model.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"
#include "seqlab/nn/positional_encoding.hpp"

namespace custom_example {

class RampEncoding : public seqlab::PositionalEncoding {
 public:
  /// "weight" [d_model] from N(0, 1) (rng.fill_normal). Throws std::invalid_argument naming
  /// d_model or length_scale if it is 0.
  RampEncoding(std::size_t d_model, std::size_t length_scale, seqlab::Rng& rng);

  /// x [B, T, D] -> y = x + ((pos_offset + t) / L) · weight. Throws seqlab::ShapeError if x is
  /// not [*, *, D].
  seqlab::Tensor3 forward(const seqlab::Tensor3& x, std::size_t pos_offset = 0) override;
  /// dy [B, T, D]: weight.grad[d] += Σ_{b,t} dy[b, t, d] · p_t / L; returns dx = dy. Throws
  /// std::logic_error before a forward, seqlab::ShapeError if dy is not the last x's shape.
  seqlab::Tensor3 backward(const seqlab::Tensor3& dy) override;

  void collect_parameters(const std::string& prefix,
                          std::vector<seqlab::NamedParameter>& out) override;

  std::size_t d_model() const { return d_model_; }
  std::size_t length_scale() const { return length_scale_; }

  seqlab::Parameter weight;  // "weight" [D]

 private:
  std::size_t d_model_, length_scale_;
  std::size_t pos_offset_ = 0;        // of the last forward
  std::vector<std::size_t> x_shape_;  // of the last forward's x (empty before any)
};

}  // namespace custom_example

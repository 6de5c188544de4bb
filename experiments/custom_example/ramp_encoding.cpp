// RampEncoding (ramp_encoding.hpp) and its registration under the name "ramp".
#include "ramp_encoding.hpp"

#include <memory>
#include <stdexcept>

#include "seqlab/core/registry.hpp"
#include "seqlab/models/positional_registry.hpp"

namespace custom_example {

RampEncoding::RampEncoding(std::size_t d_model, std::size_t length_scale, seqlab::Rng& rng)
    : weight("weight", {d_model}), d_model_(d_model), length_scale_(length_scale) {
  if (d_model == 0) throw std::invalid_argument("RampEncoding: d_model = 0; must be >= 1");
  if (length_scale == 0) throw std::invalid_argument("RampEncoding: length_scale = 0; must be >= 1");
  rng.fill_normal(weight.value, 0.0f, 1.0f);
}

seqlab::Tensor3 RampEncoding::forward(const seqlab::Tensor3& x, std::size_t pos_offset) {
  seqlab::check_shape("RampEncoding.forward: x", x, {-1, -1, static_cast<long>(d_model_)});
  const std::size_t B = x.shape()[0], T = x.shape()[1], D = d_model_;
  x_shape_.assign(x.shape().begin(), x.shape().end());
  pos_offset_ = pos_offset;
  seqlab::Tensor3 y = x;
  const float* w = weight.value.data();
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t) {
      // position / L in double, rounded to float once
      const float r = static_cast<float>(double(pos_offset + t) / double(length_scale_));
      float* row = y.data() + (b * T + t) * D;
      for (std::size_t d = 0; d < D; ++d) row[d] += r * w[d];
    }
  return y;
}

seqlab::Tensor3 RampEncoding::backward(const seqlab::Tensor3& dy) {
  if (x_shape_.empty()) throw std::logic_error("RampEncoding.backward: called before forward");
  seqlab::check_shape("RampEncoding.backward: dy", dy,
                      {static_cast<long>(x_shape_[0]), static_cast<long>(x_shape_[1]),
                       static_cast<long>(x_shape_[2])});
  const std::size_t B = x_shape_[0], T = x_shape_[1], D = d_model_;
  std::vector<double> g(D, 0.0);  // Σ_{b,t} dy[b, t, d] · r_t, accumulated in double
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t) {
      const double r = static_cast<float>(double(pos_offset_ + t) / double(length_scale_));
      const float* row = dy.data() + (b * T + t) * D;
      for (std::size_t d = 0; d < D; ++d) g[d] += r * row[d];
    }
  for (std::size_t d = 0; d < D; ++d) weight.grad(d) += static_cast<float>(g[d]);
  return dy;  // y = x + r·w  ->  dx = dy
}

void RampEncoding::collect_parameters(const std::string& prefix,
                                      std::vector<seqlab::NamedParameter>& out) {
  out.push_back({prefix + weight.name, &weight});
}

}  // namespace custom_example

// The one registration line. This file is linked into the executable directly (not from a static
// library), so the registration runs before main() and "ramp" is a valid positional_encoding
// everywhere. validate: the length scale is ModelConfig::max_len; num_parameters: D.
SEQLAB_REGISTER(seqlab::positional_encoding_registry(), "ramp",
                seqlab::PositionalEncodingEntry{
                    "learned direction times position / max_len, added to the input (toy; "
                    "experiments/custom_example)",
                    [](const seqlab::ModelConfig& c, seqlab::Rng& rng)
                        -> std::unique_ptr<seqlab::PositionalEncoding> {
                      return std::make_unique<custom_example::RampEncoding>(c.hidden_size,
                                                                            c.max_len, rng);
                    },
                    [](const seqlab::ModelConfig& c) { return c.hidden_size; },
                    [](const seqlab::ModelConfig& c) { seqlab::require_positive("max_len", c.max_len); },
                    {}});

#pragma once
// Scalar forms of the activations and their derivatives, shared by activations.cpp (the public
// tensor functions) and the layers that apply them in place on their own buffers
// (feed_forward.cpp), so both compute exactly the same numbers. Internal header, included as
// "activation_kernels.hpp". Formulas as activations.hpp (relu; exact gelu x·Φ(x),
// Φ(x) = ½ erfc(−x/√2), as torch.nn.GELU(approximate='none')).
#include <cmath>

namespace seqlab::detail {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

/// max(v, 0).
inline float relu1(float v) { return v > 0.0f ? v : 0.0f; }
/// d·relu'(v): d where v > 0, else 0.
inline float relu_grad1(float v, float d) { return v > 0.0f ? d : 0.0f; }
/// v·Φ(v).
inline float gelu1(float v) { return 0.5f * v * std::erfc(-v * kInvSqrt2); }
/// d·(Φ(v) + v·φ(v)).
inline float gelu_grad1(float v, float d) {
  const float cdf = 0.5f * std::erfc(-v * kInvSqrt2);
  const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
  return d * (cdf + v * pdf);
}

}  // namespace seqlab::detail

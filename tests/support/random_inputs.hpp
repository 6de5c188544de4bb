// Random inputs and parameters shared by the layer tests.
#pragma once

#include <cstddef>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/attention.hpp"

namespace seqlab::test {

/// A [a, b, c] tensor of N(0, sd²) draws from rng (row-major fill order).
inline Tensor3 randn3(std::size_t a, std::size_t b, std::size_t c, Rng& rng, float sd = 1.0f) {
  Tensor3 t({a, b, c});
  rng.fill_normal(t, 0.0f, sd);
  return t;
}

/// Non-zero biases, U(-0.5, 0.5) (PyTorch initialises them to 0), so that their gradient paths are
/// exercised; a MultiheadAttention without biases is left as it is.
inline void randomise_biases(MultiheadAttention& mha, Rng& rng) {
  if (!mha.has_bias()) return;
  rng.fill_uniform(mha.in_proj_bias.value, -0.5f, 0.5f);
  rng.fill_uniform(mha.out_proj.bias.value, -0.5f, 0.5f);
}

}  // namespace seqlab::test

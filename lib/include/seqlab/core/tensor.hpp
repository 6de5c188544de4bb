#pragma once
// Tensor aliases and shape checks shared by every layer.
//
// Legend used in shape comments across seqlab:
//   B batch, T seq_len (time), D d_model / input_size, H hidden_size, V vocabulary size,
//   N rows of a 2-D matrix (usually B*T), L num_layers.
// All tensors are row-major, contiguous, float32 and of fixed rank (xt::xtensor<float, N>).
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include <xtensor/xtensor.hpp>

namespace seqlab {

using Tensor1 = xt::xtensor<float, 1>;
using Tensor2 = xt::xtensor<float, 2>;
using Tensor3 = xt::xtensor<float, 3>;
using Tensor4 = xt::xtensor<float, 4>;
/// Token ids and class targets: [B, T] or [N]. int32 as PyTorch's long is not needed at these sizes.
using IndexTensor1 = xt::xtensor<std::int32_t, 1>;
using IndexTensor2 = xt::xtensor<std::int32_t, 2>;
/// Padding mask [B, T]: 1 marks a padded position (to be ignored), 0 a real one — the convention
/// of PyTorch's key_padding_mask (True = ignore). Used by attention and the masked norms.
using PaddingMask = xt::xtensor<std::uint8_t, 2>;

/// Thrown for a tensor whose shape does not match what a layer expects.
/// The message names the layer argument, the expected and the actual shape.
class ShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// "[2, 3, 4]" for any shape container.
template <class S>
std::string shape_string(const S& shape) {
  std::string out = "[";
  bool first = true;
  for (auto d : shape) {
    if (!first) out += ", ";
    out += std::to_string(d);
    first = false;
  }
  return out + "]";
}

/// Checks that `t` has exactly `expected` as its shape; -1 in `expected` matches any extent.
/// Throws ShapeError("<what>: expected shape [..], got [..]").
template <class T>
void check_shape(const char* what, const T& t, std::initializer_list<long> expected) {
  bool ok = t.dimension() == expected.size();
  if (ok) {
    std::size_t i = 0;
    for (long e : expected) {
      if (e >= 0 && static_cast<std::size_t>(e) != t.shape()[i]) ok = false;
      ++i;
    }
  }
  if (!ok) {
    throw ShapeError(std::string(what) + ": expected shape " + shape_string(expected) + ", got " +
                     shape_string(t.shape()));
  }
}

}  // namespace seqlab

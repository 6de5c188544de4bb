#pragma once
// Tensor aliases and shape checks shared by every layer.
//
// Legend used in shape comments across seqlab:
//   B batch, T seq_len (time), D d_model / input_size, H hidden_size, V vocabulary size,
//   N rows of a 2-D matrix (usually B*T), L num_layers.
// All tensors are row-major, contiguous, float32 and of fixed rank (TensorN<N>, an xt::xtensor).
//
// ABI: every tensor type of seqlab's interface is spelled through the aliases below, whose
// allocator aligns to a fixed kTensorAlignment bytes. xtensor's default allocator instead aligns
// to the SIMD width the compiler targets (xsimd's default_arch: 16 bytes for plain x86-64, 32
// with AVX2, 64 with AVX-512), so with its default a program built without -march=native would
// see other types (and link against missing symbols) than a library built with it. With the
// fixed alignment the types, and so the ABI, do not depend on the consumer's CPU flags. On a CPU
// whose SIMD width is kTensorAlignment (AVX-512) the types are exactly xtensor's defaults; on
// others xtensor uses unaligned SIMD loads on this (still aligned) memory, with the same values.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include <xsimd/memory/xsimd_aligned_allocator.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

namespace seqlab {

/// Alignment in bytes of every tensor's storage (file comment): a cache line, and the widest x86
/// SIMD register (AVX-512), so aligned for every target.
inline constexpr std::size_t kTensorAlignment = 64;
template <class T>
using TensorAllocator = xsimd::aligned_allocator<T, kTensorAlignment>;

/// Fixed-rank tensor of element type T (row-major, seqlab's allocator).
template <class T, std::size_t N>
using TensorOf = xt::xtensor<T, N, xt::layout_type::row_major, TensorAllocator<T>>;
/// Dynamic-rank array of element type T (row-major, seqlab's allocator).
template <class T>
using ArrayOf = xt::xarray<T, xt::layout_type::row_major, TensorAllocator<T>>;

/// float32 tensor of rank N.
template <std::size_t N>
using TensorN = TensorOf<float, N>;
using Tensor1 = TensorN<1>;
using Tensor2 = TensorN<2>;
using Tensor3 = TensorN<3>;
using Tensor4 = TensorN<4>;
/// float32 array of any rank (Parameter values and gradients, state_dict entries).
using Array = ArrayOf<float>;
/// Token ids and class targets: [B, T] or [N]. int32 as PyTorch's long is not needed at these sizes.
using IndexTensor1 = TensorOf<std::int32_t, 1>;
using IndexTensor2 = TensorOf<std::int32_t, 2>;
/// Padding mask [B, T]: 1 marks a padded position (to be ignored), 0 a real one — the convention
/// of PyTorch's key_padding_mask (True = ignore). Used by attention and the masked norms.
using PaddingMask = TensorOf<std::uint8_t, 2>;

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

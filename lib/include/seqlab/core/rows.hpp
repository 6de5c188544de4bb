#pragma once
// Reshapes between the models' batch-first tensors and the loss's rows (nn/loss.hpp:
// CrossEntropyLoss takes logits [N, C] and targets [N] with N = B·T). Each copies the data in
// row-major order (position (b, t) becomes row b·T + t), so the result owns its memory.
// (Not named flatten: argument-dependent lookup would also find xt::flatten.) slice_rows takes a
// contiguous range of the batch.
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "seqlab/core/tensor.hpp"

namespace seqlab {

/// Token ids [B, T] -> [B·T].
inline IndexTensor1 ids_of(const IndexTensor2& x) {
  IndexTensor1 y = IndexTensor1::from_shape({x.size()});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}

/// Logits [B, T, O] -> [B·T, O].
inline Tensor2 rows_of(const Tensor3& x) {
  Tensor2 y = Tensor2::from_shape({x.shape()[0] * x.shape()[1], x.shape()[2]});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}

/// Rows [B·T, O] -> [B, T, O] (e.g. dL/dlogits from CrossEntropyLoss::backward for the model's
/// backward). Throws ShapeError unless x has B·T rows.
inline Tensor3 unrows(const Tensor2& x, std::size_t B, std::size_t T) {
  if (x.shape()[0] != B * T)
    throw ShapeError("unrows: expected " + std::to_string(B * T) + " rows (B = " + std::to_string(B) +
                     ", T = " + std::to_string(T) + "), got " + std::to_string(x.shape()[0]));
  Tensor3 y = Tensor3::from_shape({B, T, x.shape()[1]});
  std::copy(x.data(), x.data() + x.size(), y.data());
  return y;
}

/// Rows [r0, r0 + n) of a batch-first tensor x [B, ...] (a fixed-rank tensor of rank >= 1), as a
/// new tensor [n, ...] (e.g. one chunk of a test set). Throws std::out_of_range if r0 + n > B.
template <class X>
X slice_rows(const X& x, std::size_t r0, std::size_t n) {
  const std::size_t B = x.shape()[0];
  if (r0 > B || n > B - r0)
    throw std::out_of_range("slice_rows: rows [" + std::to_string(r0) + ", " + std::to_string(r0 + n) +
                            ") of a batch of " + std::to_string(B));
  auto shape = x.shape();
  shape[0] = n;
  const std::size_t row = B == 0 ? 0 : x.size() / B;
  X y = X::from_shape(shape);
  std::copy(x.data() + r0 * row, x.data() + (r0 + n) * row, y.data());
  return y;
}

}  // namespace seqlab

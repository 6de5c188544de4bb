#pragma once
// Reshapes between the models' batch-first tensors and the loss's rows (nn/loss.hpp:
// CrossEntropyLoss takes logits [N, C] and targets [N] with N = B·T). Each copies the data in
// row-major order (position (b, t) becomes row b·T + t), so the result owns its memory.
// (Not named flatten: argument-dependent lookup would also find xt::flatten.)
#include <algorithm>
#include <cstddef>

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

}  // namespace seqlab

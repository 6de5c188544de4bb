#pragma once
// A batch of variable-length token sequences, right-padded to one width, with the key-padding mask
// the models take (TransformerModel::set_padding, PyTorch's key_padding_mask convention).
//
// Legend: B batch, W width (the longest allowed length of the batch's generator).
#include <cstddef>
#include <vector>

#include "seqlab/core/tensor.hpp"

namespace seqlab {

struct PaddedTokenBatch {
  IndexTensor2 inputs;               // [B, W] token ids; padded positions hold the pad id
  IndexTensor2 targets;              // [B, W] class ids, kIgnoreTarget (-100) where not scored
                                     // (always at padded positions)
  PaddingMask padding;               // [B, W] 1 at padded positions (t >= lengths[b]), 0 elsewhere
  std::vector<std::size_t> lengths;  // [B] real (unpadded) length of each row, in tokens
};

}  // namespace seqlab

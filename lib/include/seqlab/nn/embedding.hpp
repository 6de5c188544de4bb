#pragma once
// Token embedding table lookup, as torch.nn.Embedding
// (https://pytorch.org/docs/1.13/generated/torch.nn.Embedding.html).
//
// Legend: B batch, T seq_len, V num_embeddings (vocabulary), D embedding_dim.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/parameter.hpp"

namespace seqlab {

class Embedding : public Module {
 public:
  /// Weight [V, D] drawn from N(0, 1) row-major (nn.Embedding default); the padding_idx row is then
  /// set to 0. As in PyTorch a negative padding_idx counts from the end (-1 is V-1); the stored
  /// padding_idx() is the normalised one. Throws std::invalid_argument if V or D is 0 or
  /// padding_idx is outside [-V, V).
  Embedding(std::size_t num_embeddings, std::size_t embedding_dim, Rng& rng,
            std::optional<std::int32_t> padding_idx = std::nullopt);

  /// ids [B, T] -> y [B, T, D], y[b, t] = weight[ids[b, t]] (the padding row is returned as it is,
  /// like PyTorch). Throws std::out_of_range naming the id, its position and V for an id outside
  /// [0, V); ShapeError if `weight` was given a shape other than [V, D]. Caches the ids.
  Tensor3 forward(const IndexTensor2& ids);
  /// dy [B, T, D]: weight.grad[ids[b, t]] += dy[b, t] (sums over repeated ids); the padding_idx row
  /// gets no gradient. Throws ShapeError if dy is not [B, T, D] of the last forward,
  /// std::logic_error if forward has not run.
  void backward(const Tensor3& dy);

  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  std::size_t num_embeddings() const { return num_; }
  std::size_t embedding_dim() const { return dim_; }
  std::optional<std::int32_t> padding_idx() const { return padding_idx_; }

  Parameter weight;  // "weight" [V, D]

 private:
  std::size_t num_, dim_;
  std::optional<std::int32_t> padding_idx_;
  IndexTensor2 ids_;  // cache: ids of the last forward, [B, T]
  bool cached_ = false;
};

}  // namespace seqlab

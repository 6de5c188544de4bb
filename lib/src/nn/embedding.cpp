#include "seqlab/nn/embedding.hpp"

#include <algorithm>
#include <stdexcept>

namespace seqlab {

Embedding::Embedding(std::size_t num_embeddings, std::size_t embedding_dim, Rng& rng,
                     std::optional<std::int32_t> padding_idx)
    : weight("weight", {num_embeddings, embedding_dim}), num_(num_embeddings), dim_(embedding_dim) {
  if (num_embeddings == 0) throw std::invalid_argument("Embedding: num_embeddings = 0; must be >= 1");
  if (embedding_dim == 0) throw std::invalid_argument("Embedding: embedding_dim = 0; must be >= 1");
  if (padding_idx) {
    const long v = static_cast<long>(num_embeddings);
    long p = *padding_idx;
    if (p < -v || p >= v)
      throw std::invalid_argument("Embedding: padding_idx = " + std::to_string(p) + "; must be in [" +
                                  std::to_string(-v) + ", " + std::to_string(v) + ")");
    if (p < 0) p += v;  // as PyTorch: -1 is the last row
    padding_idx_ = static_cast<std::int32_t>(p);
  }
  rng.fill_normal(weight.value, 0.0f, 1.0f);
  if (padding_idx_) std::fill_n(weight.value.data() + *padding_idx_ * dim_, dim_, 0.0f);
}

void Embedding::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + weight.name, &weight});
}

Tensor3 Embedding::forward(const IndexTensor2& ids) {
  const std::vector<std::size_t> ws{num_, dim_};
  if (!std::equal(weight.value.shape().begin(), weight.value.shape().end(), ws.begin(), ws.end()) ||
      !std::equal(weight.grad.shape().begin(), weight.grad.shape().end(), ws.begin(), ws.end()))
    throw ShapeError("Embedding.weight: expected shape " + shape_string(ws) + ", got value " +
                     shape_string(weight.value.shape()) + ", grad " + shape_string(weight.grad.shape()));
  const std::size_t b = ids.shape()[0], t = ids.shape()[1];
  for (std::size_t i = 0; i < b; ++i) {
    for (std::size_t j = 0; j < t; ++j) {
      const std::int32_t id = ids(i, j);
      if (id < 0 || static_cast<std::size_t>(id) >= num_)
        throw std::out_of_range("Embedding.forward: id " + std::to_string(id) + " at ids[" +
                                std::to_string(i) + ", " + std::to_string(j) + "] is outside [0, " +
                                std::to_string(num_) + ")");
    }
  }
  ids_ = ids;
  cached_ = true;
  Tensor3 y({b, t, dim_});
  const float* w = weight.value.data();
  for (std::size_t k = 0; k < b * t; ++k)
    std::copy_n(w + static_cast<std::size_t>(ids_.data()[k]) * dim_, dim_, y.data() + k * dim_);
  return y;
}

void Embedding::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("Embedding.backward: called before forward");
  check_shape("Embedding.backward: dy", dy,
              {static_cast<long>(ids_.shape()[0]), static_cast<long>(ids_.shape()[1]),
               static_cast<long>(dim_)});
  float* g = weight.grad.data();
  const std::size_t n = ids_.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::int32_t id = ids_.data()[k];
    if (padding_idx_ && id == *padding_idx_) continue;  // the padding row gets no gradient
    float* row = g + static_cast<std::size_t>(id) * dim_;
    const float* d = dy.data() + k * dim_;
    for (std::size_t j = 0; j < dim_; ++j) row[j] += d[j];
  }
}

}  // namespace seqlab

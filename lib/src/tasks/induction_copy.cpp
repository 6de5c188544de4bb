#include "seqlab/tasks/induction_copy.hpp"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace seqlab {

InductionCopyTask::InductionCopyTask(int prefix_len, int copy_len, int vocab_size)
    : prefix_len_(prefix_len), copy_len_(copy_len), vocab_size_(vocab_size) {
  if (prefix_len < 2)
    throw std::invalid_argument("InductionCopyTask: prefix_len must be >= 2, got " +
                                std::to_string(prefix_len));
  if (copy_len < 2 || copy_len > prefix_len)
    throw std::invalid_argument("InductionCopyTask: copy_len must be in [2, prefix_len] = [2, " +
                                std::to_string(prefix_len) + "], got " + std::to_string(copy_len));
  if (vocab_size < prefix_len)
    throw std::invalid_argument("InductionCopyTask: vocab_size must be >= prefix_len (" +
                                std::to_string(prefix_len) + ", distinct prefix tokens), got " +
                                std::to_string(vocab_size));
}

TokenBatch InductionCopyTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0)
    throw std::invalid_argument("InductionCopyTask::sample: batch must be >= 1, got 0");
  const std::size_t n = static_cast<std::size_t>(prefix_len_);
  const std::size_t m = static_cast<std::size_t>(copy_len_);
  const std::size_t V = static_cast<std::size_t>(vocab_size_);
  const std::size_t T = n + m;
  TokenBatch out{IndexTensor2::from_shape({batch, T}), IndexTensor2::from_shape({batch, T})};
  std::vector<std::int32_t> ids(V);
  for (std::size_t b = 0; b < batch; ++b) {
    std::iota(ids.begin(), ids.end(), 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(rng.uniform_int(V - i));
      std::swap(ids[i], ids[j]);
      out.inputs(b, i) = ids[i];
    }
    const std::size_t s = static_cast<std::size_t>(rng.uniform_int(n - m + 1));
    for (std::size_t j = 0; j < m; ++j) out.inputs(b, n + j) = ids[s + j];
    for (std::size_t t = 0; t < T; ++t)
      out.targets(b, t) = (t >= n && t + 1 < T) ? out.inputs(b, t + 1) : kIgnoreTarget;
  }
  return out;
}

double InductionCopyTask::chance_accuracy() const { return 1.0 / vocab_size_; }

double InductionCopyTask::chance_loss() const {
  return std::log(static_cast<double>(vocab_size_));
}

}  // namespace seqlab

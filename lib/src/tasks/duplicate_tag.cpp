#include "seqlab/tasks/duplicate_tag.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace seqlab {

DuplicateTagTask::DuplicateTagTask(int length, int vocab_size) : length_(length), vocab_size_(vocab_size) {
  if (length < 2)
    throw std::invalid_argument("DuplicateTagTask: length must be >= 2, got " + std::to_string(length));
  if (vocab_size < 2)
    throw std::invalid_argument("DuplicateTagTask: vocab_size must be >= 2, got " + std::to_string(vocab_size));
}

TokenBatch DuplicateTagTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("DuplicateTagTask::sample: batch must be >= 1, got 0");
  const std::size_t n = static_cast<std::size_t>(length_);
  TokenBatch out{IndexTensor2::from_shape({batch, n}), IndexTensor2::from_shape({batch, n})};
  std::vector<int> count(static_cast<std::size_t>(vocab_size_));
  for (std::size_t r = 0; r < batch; ++r) {
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t t = 0; t < n; ++t) {
      out.inputs(r, t) = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(vocab_size_)));
      ++count[static_cast<std::size_t>(out.inputs(r, t))];
    }
    for (std::size_t t = 0; t < n; ++t) out.targets(r, t) = count[static_cast<std::size_t>(out.inputs(r, t))] > 1 ? 1 : 0;
  }
  return out;
}

double DuplicateTagTask::duplicate_probability() const {
  return 1.0 - std::pow(1.0 - 1.0 / vocab_size_, length_ - 1);
}

double DuplicateTagTask::prior_accuracy() const {
  const double p = duplicate_probability();
  return std::max(p, 1.0 - p);
}

double DuplicateTagTask::prior_loss() const {
  const double p = duplicate_probability();
  double h = 0;
  if (p > 0) h -= p * std::log(p);
  if (p < 1) h -= (1 - p) * std::log(1 - p);
  return h;
}

double DuplicateTagTask::causal_accuracy() const {
  const double miss = 1.0 - 1.0 / vocab_size_;
  double acc = 0;
  for (int t = 0; t < length_; ++t) {
    const double seen = 1.0 - std::pow(miss, t);
    const double q = 1.0 - std::pow(miss, length_ - 1 - t);
    acc += seen + (1.0 - seen) * std::max(q, 1.0 - q);
  }
  return acc / length_;
}

}  // namespace seqlab

#include "seqlab/tasks/repeat_copy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace seqlab {

RepeatCopyTask::RepeatCopyTask(int min_len, int max_len, int alphabet)
    : min_len_(min_len), max_len_(max_len), alphabet_(alphabet) {
  if (max_len < 3)
    throw std::invalid_argument("RepeatCopyTask: max_len must be >= 3, got " +
                                std::to_string(max_len));
  if (min_len < 1 || min_len > max_len)
    throw std::invalid_argument("RepeatCopyTask: min_len must be in [1, max_len = " +
                                std::to_string(max_len) + "], got " + std::to_string(min_len));
  if (alphabet < 1)
    throw std::invalid_argument("RepeatCopyTask: alphabet must be >= 1, got " +
                                std::to_string(alphabet));
}

int RepeatCopyTask::n_min() const { return std::max(1, (min_len_ - 1) / 2); }

PaddedTokenBatch RepeatCopyTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("RepeatCopyTask::sample: batch must be >= 1, got 0");
  const std::size_t W = static_cast<std::size_t>(max_len_);
  PaddedTokenBatch out{IndexTensor2::from_shape({batch, W}), IndexTensor2::from_shape({batch, W}),
                       PaddingMask::from_shape({batch, W}), std::vector<std::size_t>(batch)};
  out.inputs.fill(pad());
  out.targets.fill(kIgnoreTarget);
  out.padding.fill(1);
  const int lo = n_min(), hi = n_max();
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t n = static_cast<std::size_t>(
        lo + static_cast<int>(rng.uniform_int(static_cast<std::uint64_t>(hi - lo + 1))));
    for (std::size_t i = 0; i < n; ++i) {
      const auto s = static_cast<std::int32_t>(
          1 + rng.uniform_int(static_cast<std::uint64_t>(alphabet_)));
      out.inputs(b, i) = s;
      out.inputs(b, n + 1 + i) = s;
      out.targets(b, n + i) = s;
    }
    out.inputs(b, n) = separator();
    const std::size_t len = 2 * n + 1;
    for (std::size_t t = 0; t < len; ++t) out.padding(b, t) = 0;
    out.lengths[b] = len;
  }
  return out;
}

double RepeatCopyTask::chance_accuracy() const { return 1.0 / alphabet_; }
double RepeatCopyTask::chance_loss() const { return std::log(static_cast<double>(alphabet_)); }

}  // namespace seqlab

#include "seqlab/tasks/previous_token.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace seqlab {

PreviousTokenTask::PreviousTokenTask(int seq_len, int vocab_size, int lag)
    : seq_len_(seq_len), vocab_size_(vocab_size), lag_(lag) {
  if (seq_len < 2)
    throw std::invalid_argument("PreviousTokenTask: seq_len must be >= 2, got " +
                                std::to_string(seq_len));
  if (vocab_size < 2)
    throw std::invalid_argument("PreviousTokenTask: vocab_size must be >= 2, got " +
                                std::to_string(vocab_size));
  if (lag < 1 || lag >= seq_len)
    throw std::invalid_argument("PreviousTokenTask: lag must be in [1, seq_len - 1] = [1, " +
                                std::to_string(seq_len - 1) + "], got " + std::to_string(lag));
}

TokenBatch PreviousTokenTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0)
    throw std::invalid_argument("PreviousTokenTask::sample: batch must be >= 1, got 0");
  const std::size_t T = static_cast<std::size_t>(seq_len_);
  const std::size_t l = static_cast<std::size_t>(lag_);
  TokenBatch out{IndexTensor2::from_shape({batch, T}), IndexTensor2::from_shape({batch, T})};
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < T; ++t)
      out.inputs(b, t) =
          static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(vocab_size_)));
    for (std::size_t t = 0; t < T; ++t)
      out.targets(b, t) = t < l ? kIgnoreTarget : out.inputs(b, t - l);
  }
  return out;
}

double PreviousTokenTask::chance_accuracy() const { return 1.0 / vocab_size_; }

double PreviousTokenTask::chance_loss() const {
  return std::log(static_cast<double>(vocab_size_));
}

}  // namespace seqlab

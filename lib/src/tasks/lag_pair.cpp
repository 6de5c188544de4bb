#include "seqlab/tasks/lag_pair.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace seqlab {

LagPairTask::LagPairTask(int seq_len, int vocab_size, int lag_a, int lag_b)
    : seq_len_(seq_len), vocab_size_(vocab_size), lag_a_(lag_a), lag_b_(lag_b) {
  if (seq_len < 2)
    throw std::invalid_argument("LagPairTask: seq_len must be >= 2, got " + std::to_string(seq_len));
  if (vocab_size < 2 || vocab_size > 46340)
    throw std::invalid_argument("LagPairTask: vocab_size must be in [2, 46340], got " +
                                std::to_string(vocab_size));
  for (const auto& [name, lag] : {std::pair<const char*, int>{"lag_a", lag_a}, {"lag_b", lag_b}})
    if (lag < 1 || lag >= seq_len)
      throw std::invalid_argument(std::string("LagPairTask: ") + name + " must be in [1, seq_len - 1] = [1, " +
                                  std::to_string(seq_len - 1) + "], got " + std::to_string(lag));
  if (lag_a == lag_b)
    throw std::invalid_argument("LagPairTask: lag_a and lag_b must differ, both are " + std::to_string(lag_a));
}

int LagPairTask::scored_per_row() const { return seq_len_ - std::max(lag_a_, lag_b_); }

TokenBatch LagPairTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("LagPairTask::sample: batch must be >= 1, got 0");
  const std::size_t T = static_cast<std::size_t>(seq_len_);
  const std::size_t a = static_cast<std::size_t>(lag_a_), b = static_cast<std::size_t>(lag_b_);
  const std::size_t m = std::max(a, b);
  TokenBatch out{IndexTensor2::from_shape({batch, T}), IndexTensor2::from_shape({batch, T})};
  for (std::size_t r = 0; r < batch; ++r) {
    for (std::size_t t = 0; t < T; ++t)
      out.inputs(r, t) = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(vocab_size_)));
    for (std::size_t t = 0; t < T; ++t)
      out.targets(r, t) = t < m ? kIgnoreTarget : out.inputs(r, t - a) * vocab_size_ + out.inputs(r, t - b);
  }
  return out;
}

double LagPairTask::one_lookup_accuracy() const { return 1.0 / vocab_size_; }

double LagPairTask::one_lookup_loss() const { return std::log(static_cast<double>(vocab_size_)); }

}  // namespace seqlab

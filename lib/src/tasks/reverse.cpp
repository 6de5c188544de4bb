#include "seqlab/tasks/reverse.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace seqlab {

ReverseTask::ReverseTask(int length, int n_symbols) : length_(length), n_symbols_(n_symbols) {
  if (length < 1)
    throw std::invalid_argument("ReverseTask: length must be >= 1, got " + std::to_string(length));
  if (n_symbols < 2)
    throw std::invalid_argument("ReverseTask: n_symbols must be >= 2, got " +
                                std::to_string(n_symbols));
}

TransductionBatch ReverseTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("ReverseTask::sample: batch must be >= 1, got 0");
  const std::size_t n = static_cast<std::size_t>(length_);
  TransductionBatch out{IndexTensor2::from_shape({batch, n}), IndexTensor2::from_shape({batch, n})};
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t t = 0; t < n; ++t)
      out.source(b, t) =
          static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n_symbols_)));
    for (std::size_t i = 0; i < n; ++i) out.target(b, i) = out.source(b, n - 1 - i);
  }
  return out;
}

TokenBatch ReverseTask::prefix_lm(const TransductionBatch& pair) const {
  const long n = length_;
  check_shape("ReverseTask::prefix_lm: source", pair.source, {-1, n});
  const std::size_t B = pair.source.shape()[0];
  check_shape("ReverseTask::prefix_lm: target", pair.target, {static_cast<long>(B), n});
  const std::size_t N = static_cast<std::size_t>(n);
  TokenBatch out{IndexTensor2::from_shape({B, 2 * N}), IndexTensor2::from_shape({B, 2 * N})};
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t t = 0; t < N; ++t) {
      out.inputs(b, t) = pair.source(b, t);
      out.targets(b, t) = kIgnoreTarget;
    }
    out.inputs(b, N) = separator();
    for (std::size_t i = 0; i + 1 < N; ++i) out.inputs(b, N + 1 + i) = pair.target(b, i);
    for (std::size_t i = 0; i < N; ++i) out.targets(b, N + i) = pair.target(b, i);
  }
  return out;
}

IndexTensor2 ReverseTask::decoder_input(const TransductionBatch& pair) const {
  check_shape("ReverseTask::decoder_input: target", pair.target, {-1, static_cast<long>(length_)});
  const std::size_t B = pair.target.shape()[0];
  const std::size_t N = static_cast<std::size_t>(length_);
  IndexTensor2 out = IndexTensor2::from_shape({B, N});
  for (std::size_t b = 0; b < B; ++b) {
    out(b, 0) = separator();
    for (std::size_t i = 1; i < N; ++i) out(b, i) = pair.target(b, i - 1);
  }
  return out;
}

double ReverseTask::chance_accuracy() const { return 1.0 / n_symbols_; }

double ReverseTask::chance_loss() const { return std::log(static_cast<double>(n_symbols_)); }

}  // namespace seqlab

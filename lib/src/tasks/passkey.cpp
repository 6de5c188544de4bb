#include "seqlab/tasks/passkey.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace seqlab {

PasskeyTask::PasskeyTask(int seq_len, int n_digits, int filler_period)
    : seq_len_(seq_len), n_digits_(n_digits), filler_period_(filler_period) {
  if (n_digits < 1 || n_digits > 10)
    throw std::invalid_argument("PasskeyTask: n_digits must be in [1, 10], got " + std::to_string(n_digits));
  if (filler_period < 1)
    throw std::invalid_argument("PasskeyTask: filler_period must be >= 1, got " + std::to_string(filler_period));
  if (seq_len < 2 * n_digits + 2)
    throw std::invalid_argument("PasskeyTask: seq_len must be >= 2 * n_digits + 2 = " +
                                std::to_string(2 * n_digits + 2) + ", got " + std::to_string(seq_len));
}

TokenBatch PasskeyTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("PasskeyTask::sample: batch must be >= 1, got 0");
  const std::size_t T = static_cast<std::size_t>(seq_len_), n = static_cast<std::size_t>(n_digits_),
                    F = static_cast<std::size_t>(filler_period_);
  TokenBatch out{IndexTensor2::from_shape({batch, T}), IndexTensor2::from_shape({batch, T})};
  out.targets.fill(kIgnoreTarget);
  std::vector<std::int32_t> digits(10);
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t phase = static_cast<std::size_t>(rng.uniform_int(F));
    const std::size_t s = static_cast<std::size_t>(rng.uniform_int(T - 2 * n - 1));
    for (std::size_t i = 0; i < 10; ++i) digits[i] = static_cast<std::int32_t>(i);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(rng.uniform_int(10 - i));
      std::swap(digits[i], digits[j]);
    }
    for (std::size_t t = 0; t < T; ++t) out.inputs(b, t) = static_cast<std::int32_t>((phase + t) % F);
    const std::size_t q = T - n - 1;
    out.inputs(b, s) = key_marker();
    out.inputs(b, q) = query_marker();
    for (std::size_t i = 0; i < n; ++i) {
      out.inputs(b, s + 1 + i) = first_digit() + digits[i];
      out.inputs(b, q + 1 + i) = first_digit() + digits[i];
    }
    for (std::size_t t = q; t + 1 < T; ++t) out.targets(b, t) = out.inputs(b, t + 1);
  }
  return out;
}

IndexTensor2 PasskeyTask::distances(const TokenBatch& batch) const {
  const std::size_t T = static_cast<std::size_t>(seq_len_), n = static_cast<std::size_t>(n_digits_);
  if (batch.inputs.dimension() != 2 || batch.inputs.shape()[1] != T || batch.targets.shape() != batch.inputs.shape())
    throw std::invalid_argument("PasskeyTask::distances: expected inputs and targets [B, " + std::to_string(T) + "]");
  const std::size_t B = batch.inputs.shape()[0], q = T - n - 1;
  IndexTensor2 d = IndexTensor2::from_shape({B, T});
  d.fill(0);
  for (std::size_t b = 0; b < B; ++b) {
    std::size_t s = q;
    for (std::size_t t = 0; t < q; ++t)
      if (batch.inputs(b, t) == key_marker()) {
        s = t;
        break;
      }
    if (s == q) throw std::invalid_argument("PasskeyTask::distances: row " + std::to_string(b) + " has no key marker");
    for (std::size_t t = q; t + 1 < T; ++t) d(b, t) = static_cast<std::int32_t>(q - (s + 1));
  }
  return d;
}

double PasskeyTask::chance_accuracy() const {
  double a = 0.0;
  for (int i = 0; i < n_digits_; ++i) a += 1.0 / (10.0 - i);
  return a / n_digits_;
}

double PasskeyTask::chance_loss() const {
  double l = 0.0;
  for (int i = 0; i < n_digits_; ++i) l += std::log(10.0 - i);
  return l / n_digits_;
}

}  // namespace seqlab

#include "seqlab/tasks/copy_memory.hpp"

#include "seqlab/tasks/draw_counts.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace seqlab {

CopyMemoryTask::CopyMemoryTask(int T, int n_memorize, int n_symbols)
    : T_(T), n_memorize_(n_memorize), n_symbols_(n_symbols) {
  if (T < 1) throw std::invalid_argument("CopyMemoryTask: T must be >= 1, got " + std::to_string(T));
  if (n_memorize < 1)
    throw std::invalid_argument("CopyMemoryTask: n_memorize must be >= 1, got " +
                                std::to_string(n_memorize));
  if (n_symbols < 1)
    throw std::invalid_argument("CopyMemoryTask: n_symbols must be >= 1, got " +
                                std::to_string(n_symbols));
}

TokenBatch CopyMemoryTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("CopyMemoryTask::sample: batch must be >= 1, got 0");
  const std::size_t L = static_cast<std::size_t>(seq_len());
  const std::size_t M = static_cast<std::size_t>(n_memorize_);
  const std::size_t rs = static_cast<std::size_t>(recall_start());
  const std::size_t marker_start = static_cast<std::size_t>(T_ + n_memorize_ - 1);
  TokenBatch out{IndexTensor2::from_shape({batch, L}), IndexTensor2::from_shape({batch, L})};
  out.inputs.fill(0);
  out.targets.fill(0);
  const auto delim = static_cast<std::int32_t>(delimiter());
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < M; ++i) {
      const auto s = static_cast<std::int32_t>(
          1 + rng.uniform_int(static_cast<std::uint64_t>(n_symbols_)));
      out.inputs(b, i) = s;       // x: the symbols first
      out.targets(b, rs + i) = s; // y: recalled at the end
    }
    // x: T-1 zeros after the symbols (already 0), then n_memorize + 1 delimiters.
    for (std::size_t t = marker_start; t < L; ++t) out.inputs(b, t) = delim;
  }
  return out;
}

double CopyMemoryTask::memoryless_loss() const {
  return n_memorize_ * std::log(static_cast<double>(n_symbols_)) / seq_len();
}

double CopyMemoryTask::memoryless_recall_loss() const {
  return std::log(static_cast<double>(n_symbols_));
}

double CopyMemoryTask::chance_recall_accuracy() const { return 1.0 / n_symbols_; }

double CopyMemoryTask::most_frequent_symbol_accuracy() const {
  return expected_max_count(n_memorize_, n_symbols_) / n_memorize_;
}

double CopyMemoryTask::most_frequent_symbol_loss() const {
  return expected_plugin_entropy(n_memorize_, n_symbols_);
}

}  // namespace seqlab

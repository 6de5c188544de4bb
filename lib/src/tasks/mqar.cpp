#include "seqlab/tasks/mqar.hpp"

#include "seqlab/tasks/draw_counts.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace seqlab {

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("MultiQueryAssociativeRecall: " + what);
}

// First `k` elements of a partial Fisher–Yates shuffle of `pool` (in place).
void partial_shuffle(std::vector<int>& pool, std::size_t k, Rng& rng) {
  const std::size_t n = pool.size();
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(n - i)));
    std::swap(pool[i], pool[j]);
  }
}

}  // namespace

MultiQueryAssociativeRecall::MultiQueryAssociativeRecall(int seq_len, int n_pairs, int n_queries,
                                                         int n_keys, int n_values)
    : seq_len_(seq_len), n_pairs_(n_pairs), n_queries_(n_queries), n_keys_(n_keys),
      n_values_(n_values) {
  if (n_pairs < 1) bad("n_pairs must be >= 1, got " + std::to_string(n_pairs));
  if (n_queries < 1 || n_queries > n_pairs)
    bad("n_queries must be in [1, n_pairs = " + std::to_string(n_pairs) + "], got " +
        std::to_string(n_queries));
  if (n_keys < n_pairs)
    bad("n_keys must be >= n_pairs = " + std::to_string(n_pairs) + " (distinct keys), got " +
        std::to_string(n_keys));
  if (n_values < 1) bad("n_values must be >= 1, got " + std::to_string(n_values));
  // 64-bit arithmetic so huge arguments cannot overflow the check.
  const long long need = 2LL * n_pairs + 2LL * n_queries;
  if (static_cast<long long>(seq_len) < need)
    bad("seq_len must be >= 2 * n_pairs + 2 * n_queries = " + std::to_string(need) + ", got " +
        std::to_string(seq_len));
}

TokenBatch MultiQueryAssociativeRecall::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) bad("sample: batch must be >= 1, got 0");
  const std::size_t T = static_cast<std::size_t>(seq_len_);
  const std::size_t P = static_cast<std::size_t>(n_pairs_);
  const std::size_t Q = static_cast<std::size_t>(n_queries_);
  TokenBatch out{IndexTensor2::from_shape({batch, T}), IndexTensor2::from_shape({batch, T})};
  out.inputs.fill(blank());
  out.targets.fill(kIgnoreTarget);
  std::vector<int> key_pool(static_cast<std::size_t>(n_keys_));
  std::vector<int> pair_pool(P);
  std::vector<int> slot_pool(static_cast<std::size_t>(n_slots()));
  std::vector<std::int32_t> keys(P), values(P);
  for (std::size_t b = 0; b < batch; ++b) {
    // 1. distinct keys.
    std::iota(key_pool.begin(), key_pool.end(), 0);
    partial_shuffle(key_pool, P, rng);
    // 2. independent values.
    for (std::size_t i = 0; i < P; ++i) {
      keys[i] = first_key() + key_pool[i];
      values[i] = first_value() +
                  static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n_values_)));
      out.inputs(b, 2 * i) = keys[i];
      out.inputs(b, 2 * i + 1) = values[i];
    }
    // 3. which pairs are queried, in order.
    std::iota(pair_pool.begin(), pair_pool.end(), 0);
    partial_shuffle(pair_pool, Q, rng);
    // 4. where: Q distinct slots, ascending.
    std::iota(slot_pool.begin(), slot_pool.end(), 0);
    partial_shuffle(slot_pool, Q, rng);
    std::sort(slot_pool.begin(), slot_pool.begin() + static_cast<std::ptrdiff_t>(Q));
    for (std::size_t j = 0; j < Q; ++j) {
      const std::size_t pos = 2 * P + 2 * static_cast<std::size_t>(slot_pool[j]);
      const std::size_t pair = static_cast<std::size_t>(pair_pool[j]);
      out.inputs(b, pos) = keys[pair];
      out.targets(b, pos) = values[pair];
    }
  }
  return out;
}

double MultiQueryAssociativeRecall::chance_accuracy() const { return 1.0 / n_values_; }

double MultiQueryAssociativeRecall::chance_loss() const {
  return std::log(static_cast<double>(n_values_));
}

double MultiQueryAssociativeRecall::key_agnostic_accuracy() const {
  return expected_max_count(n_pairs_, n_values_) / n_pairs_;
}

double MultiQueryAssociativeRecall::key_agnostic_loss() const {
  return expected_plugin_entropy(n_pairs_, n_values_);
}

}  // namespace seqlab

#include "seqlab/tasks/scattered_recall.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace seqlab {

ScatteredAssociativeRecall::ScatteredAssociativeRecall(int seq_len, int n_pairs, int n_queries, int n_keys,
                                                       int n_values)
    : seq_len_(seq_len), n_pairs_(n_pairs), n_queries_(n_queries), n_keys_(n_keys), n_values_(n_values) {
  const auto bad = [](const std::string& what) {
    throw std::invalid_argument("ScatteredAssociativeRecall: " + what);
  };
  if (n_pairs < 1) bad("n_pairs must be >= 1, got " + std::to_string(n_pairs));
  if (n_queries < 1 || n_queries > n_pairs)
    bad("n_queries must be in [1, n_pairs] = [1, " + std::to_string(n_pairs) + "], got " +
        std::to_string(n_queries));
  if (n_keys < n_pairs) bad("n_keys must be >= n_pairs = " + std::to_string(n_pairs) + ", got " + std::to_string(n_keys));
  if (n_values < 1) bad("n_values must be >= 1, got " + std::to_string(n_values));
  if (seq_len < 2 || seq_len / 2 < n_pairs + n_queries)
    bad("seq_len must give seq_len / 2 >= n_pairs + n_queries = " + std::to_string(n_pairs + n_queries) +
        " two-token slots, got " + std::to_string(seq_len));
}

TokenBatch ScatteredAssociativeRecall::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("ScatteredAssociativeRecall::sample: batch must be >= 1, got 0");
  const std::size_t T = static_cast<std::size_t>(seq_len_), P = static_cast<std::size_t>(n_pairs_),
                    Q = static_cast<std::size_t>(n_queries_), S = T / 2;
  TokenBatch out{IndexTensor2::from_shape({batch, T}), IndexTensor2::from_shape({batch, T})};
  out.inputs.fill(0);
  out.targets.fill(kIgnoreTarget);
  std::vector<std::int32_t> key_ids(static_cast<std::size_t>(n_keys_));
  std::vector<std::size_t> slot_ids(S);
  std::vector<std::int32_t> keys(P), values(P);
  std::vector<std::size_t> pair_ids(P);
  for (std::size_t b = 0; b < batch; ++b) {
    // 1. distinct keys (partial Fisher–Yates over the key ids).
    for (std::size_t i = 0; i < key_ids.size(); ++i) key_ids[i] = static_cast<std::int32_t>(1 + i);
    for (std::size_t i = 0; i < P; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(rng.uniform_int(key_ids.size() - i));
      std::swap(key_ids[i], key_ids[j]);
      keys[i] = key_ids[i];
    }
    // 2. independent values.
    for (std::size_t i = 0; i < P; ++i)
      values[i] = first_value() + static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n_values_)));
    // 3. the used slots, sorted.
    for (std::size_t i = 0; i < S; ++i) slot_ids[i] = i;
    for (std::size_t i = 0; i < P + Q; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(rng.uniform_int(S - i));
      std::swap(slot_ids[i], slot_ids[j]);
    }
    std::sort(slot_ids.begin(), slot_ids.begin() + static_cast<std::ptrdiff_t>(P + Q));
    // 4. the queried pairs (partial Fisher–Yates over the pair indices).
    for (std::size_t i = 0; i < P; ++i) pair_ids[i] = i;
    for (std::size_t i = 0; i < Q; ++i) {
      const std::size_t j = i + static_cast<std::size_t>(rng.uniform_int(P - i));
      std::swap(pair_ids[i], pair_ids[j]);
    }
    for (std::size_t m = 0; m < P; ++m) {
      const std::size_t pos = 2 * slot_ids[m];
      out.inputs(b, pos) = keys[m];
      out.inputs(b, pos + 1) = values[m];
    }
    for (std::size_t q = 0; q < Q; ++q) {
      const std::size_t pos = 2 * slot_ids[P + q];
      out.inputs(b, pos) = keys[pair_ids[q]];
      out.targets(b, pos) = values[pair_ids[q]];
    }
  }
  return out;
}

void ScatteredAssociativeRecall::check_shape(const TokenBatch& batch, const char* who) const {
  const std::size_t T = static_cast<std::size_t>(seq_len_);
  if (batch.inputs.dimension() != 2 || batch.inputs.shape()[1] != T || batch.targets.shape() != batch.inputs.shape())
    throw std::invalid_argument(std::string("ScatteredAssociativeRecall::") + who +
                                ": expected inputs and targets [B, " + std::to_string(T) + "]");
}

IndexTensor2 ScatteredAssociativeRecall::distances(const TokenBatch& batch) const {
  check_shape(batch, "distances");
  const std::size_t B = batch.inputs.shape()[0], T = batch.inputs.shape()[1];
  IndexTensor2 d = IndexTensor2::from_shape({B, T});
  d.fill(0);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t) {
      if (batch.targets(b, t) == kIgnoreTarget) continue;
      // The queried pair: the earlier even position holding the same key (keys are distinct).
      for (std::size_t s = t; s >= 2;) {
        s -= 2;
        if (batch.inputs(b, s) == batch.inputs(b, t)) {
          d(b, t) = static_cast<std::int32_t>(t - s);
          break;
        }
      }
    }
  return d;
}

RecallBaseline ScatteredAssociativeRecall::key_agnostic(const TokenBatch& batch) const {
  check_shape(batch, "key_agnostic");
  const std::size_t B = batch.inputs.shape()[0], T = batch.inputs.shape()[1];
  RecallBaseline r;
  std::vector<int> count(static_cast<std::size_t>(n_values_));
  for (std::size_t b = 0; b < B; ++b) {
    std::fill(count.begin(), count.end(), 0);
    int n_before = 0;
    for (std::size_t t = 0; t + 1 < T; t += 2) {
      const std::int32_t second = batch.inputs(b, t + 1);
      if (batch.targets(b, t) != kIgnoreTarget) {  // a query: the predictor over the earlier values
        const int c = count[static_cast<std::size_t>(batch.targets(b, t) - first_value())];
        const int top = *std::max_element(count.begin(), count.end());
        const auto ties = std::count(count.begin(), count.end(), top);
        r.accuracy += c == top ? 1.0 / static_cast<double>(ties) : 0.0;
        r.loss += -std::log(static_cast<double>(c) / static_cast<double>(n_before));
        ++r.n_scored;
      } else if (second >= first_value()) {  // a pair
        ++count[static_cast<std::size_t>(second - first_value())];
        ++n_before;
      }
    }
  }
  if (r.n_scored > 0) {
    r.accuracy /= static_cast<double>(r.n_scored);
    r.loss /= static_cast<double>(r.n_scored);
  }
  return r;
}

RecallBaseline ScatteredAssociativeRecall::expected_key_agnostic(std::uint64_t seed) const {
  Rng rng(seed);
  return key_agnostic(sample(2048, rng));
}

}  // namespace seqlab

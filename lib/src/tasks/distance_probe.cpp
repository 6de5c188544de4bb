#include "seqlab/tasks/distance_probe.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace seqlab {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("DistanceProbe: " + what); }

}  // namespace

DistanceProbe::DistanceProbe(int seq_len, int n_symbols, int n_fillers, int min_distance,
                             int max_distance)
    : seq_len_(seq_len), n_symbols_(n_symbols), n_fillers_(n_fillers), min_distance_(min_distance),
      max_distance_(max_distance == 0 ? seq_len - 1 : max_distance) {
  if (seq_len < 2) bad("seq_len must be >= 2, got " + std::to_string(seq_len));
  if (n_symbols < 1) bad("n_symbols must be >= 1, got " + std::to_string(n_symbols));
  if (n_fillers < 1) bad("n_fillers must be >= 1, got " + std::to_string(n_fillers));
  if (min_distance < 1 || min_distance > seq_len - 1)
    bad("min_distance must be in [1, seq_len - 1 = " + std::to_string(seq_len - 1) + "], got " +
        std::to_string(min_distance));
  if (max_distance_ < min_distance || max_distance_ > seq_len - 1)
    bad("max_distance must be 0 or in [min_distance = " + std::to_string(min_distance) +
        ", seq_len - 1 = " + std::to_string(seq_len - 1) + "], got " + std::to_string(max_distance));
}

void DistanceProbe::fill_row(IndexTensor2& inputs, IndexTensor2& targets, std::size_t b,
                             int distance, Rng& rng) const {
  const int S = seq_len_;
  const int sym_pos = S - 1 - distance;
  const auto s = static_cast<std::int32_t>(
      first_symbol() + static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n_symbols_))));
  for (int t = 0; t < S - 1; ++t) {
    const auto ut = static_cast<std::size_t>(t);
    targets(b, ut) = kIgnoreTarget;
    if (t == sym_pos) {
      inputs(b, ut) = s;
    } else {
      inputs(b, ut) = first_filler() +
                      static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(n_fillers_)));
    }
  }
  const auto last = static_cast<std::size_t>(S - 1);
  inputs(b, last) = query_token();
  targets(b, last) = s;
}

TokenBatch DistanceProbe::sample(std::size_t batch, Rng& rng, std::vector<int>* distances) const {
  if (batch == 0) bad("sample: batch must be >= 1, got 0");
  const auto S = static_cast<std::size_t>(seq_len_);
  TokenBatch out{IndexTensor2::from_shape({batch, S}), IndexTensor2::from_shape({batch, S})};
  if (distances) distances->assign(batch, 0);
  const auto span = static_cast<std::uint64_t>(max_distance_ - min_distance_ + 1);
  for (std::size_t b = 0; b < batch; ++b) {
    // A fixed distance draws nothing (as sample_at).
    const int d = span == 1 ? min_distance_ : min_distance_ + static_cast<int>(rng.uniform_int(span));
    if (distances) (*distances)[b] = d;
    fill_row(out.inputs, out.targets, b, d, rng);
  }
  return out;
}

TokenBatch DistanceProbe::sample_at(std::size_t batch, int distance, Rng& rng) const {
  if (batch == 0) bad("sample_at: batch must be >= 1, got 0");
  if (distance < 1 || distance > seq_len_ - 1)
    bad("sample_at: distance must be in [1, seq_len - 1 = " + std::to_string(seq_len_ - 1) +
        "], got " + std::to_string(distance));
  const auto S = static_cast<std::size_t>(seq_len_);
  TokenBatch out{IndexTensor2::from_shape({batch, S}), IndexTensor2::from_shape({batch, S})};
  for (std::size_t b = 0; b < batch; ++b) fill_row(out.inputs, out.targets, b, distance, rng);
  return out;
}

double DistanceProbe::chance_accuracy() const { return 1.0 / n_symbols_; }

double DistanceProbe::chance_loss() const { return std::log(static_cast<double>(n_symbols_)); }

}  // namespace seqlab

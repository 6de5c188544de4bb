#include "seqlab/tasks/char_lm.hpp"

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>

namespace seqlab {

CharCorpus::CharCorpus(std::string text, double test_fraction) {
  if (text.size() < 4)
    throw std::invalid_argument("CharCorpus: text must have >= 4 bytes, got " +
                                std::to_string(text.size()));
  if (!(test_fraction > 0.0 && test_fraction < 1.0))
    throw std::invalid_argument("CharCorpus: test_fraction must be in (0, 1), got " +
                                std::to_string(test_fraction));
  const std::size_t N = text.size();
  n_test_ = static_cast<std::size_t>(std::ceil(test_fraction * static_cast<double>(N)));
  if (n_test_ < 2 || N - n_test_ < 2)
    throw std::invalid_argument("CharCorpus: test_fraction = " + std::to_string(test_fraction) +
                                " leaves a split of fewer than 2 bytes of the " +
                                std::to_string(N) + "-byte text");
  std::array<bool, 256> seen{};
  for (const char ch : text) seen[static_cast<unsigned char>(ch)] = true;
  id_of_.fill(-1);
  for (int c = 0; c < 256; ++c) {
    if (!seen[static_cast<std::size_t>(c)]) continue;
    id_of_[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(bytes_.size());
    bytes_.push_back(static_cast<unsigned char>(c));
  }
  ids_.reserve(N);
  for (const char ch : text) ids_.push_back(id_of_[static_cast<unsigned char>(ch)]);
}

CharCorpus CharCorpus::from_file(const std::string& path, double test_fraction) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("CharCorpus: cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error("CharCorpus: cannot read '" + path + "'");
  return CharCorpus(ss.str(), test_fraction);
}

std::int32_t CharCorpus::id(unsigned char c) const {
  const std::int32_t i = id_of_[c];
  if (i < 0) throw std::out_of_range("CharCorpus::id: byte " + std::to_string(c) + " is not in the text");
  return i;
}

unsigned char CharCorpus::byte(std::int32_t i) const {
  if (i < 0 || i >= vocab_size())
    throw std::out_of_range("CharCorpus::byte: id " + std::to_string(i) + " not in [0, " +
                            std::to_string(vocab_size()) + ")");
  return bytes_[static_cast<std::size_t>(i)];
}

std::size_t CharCorpus::split_size(CorpusSplit split) const {
  return split == CorpusSplit::train ? ids_.size() - n_test_ : n_test_;
}

PaddedTokenBatch CharCorpus::sample(std::size_t batch, std::size_t min_len, std::size_t max_len,
                                    CorpusSplit split, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("CharCorpus::sample: batch must be >= 1, got 0");
  const std::size_t S = split_size(split);
  if (max_len < 1 || max_len > S - 1)
    throw std::invalid_argument("CharCorpus::sample: max_len must be in [1, " + std::to_string(S - 1) +
                                "] (the split's bytes - 1), got " + std::to_string(max_len));
  if (min_len < 1 || min_len > max_len)
    throw std::invalid_argument("CharCorpus::sample: min_len must be in [1, max_len = " +
                                std::to_string(max_len) + "], got " + std::to_string(min_len));
  const std::size_t base = split == CorpusSplit::train ? 0 : ids_.size() - n_test_;
  PaddedTokenBatch out{IndexTensor2::from_shape({batch, max_len}),
                       IndexTensor2::from_shape({batch, max_len}),
                       PaddingMask::from_shape({batch, max_len}), std::vector<std::size_t>(batch)};
  out.inputs.fill(0);
  out.targets.fill(kIgnoreTarget);
  out.padding.fill(1);
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t len =
        min_len + static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(max_len - min_len + 1)));
    const std::size_t o = base + static_cast<std::size_t>(rng.uniform_int(static_cast<std::uint64_t>(S - len)));
    for (std::size_t t = 0; t < len; ++t) {
      out.inputs(b, t) = ids_[o + t];
      out.targets(b, t) = ids_[o + t + 1];
      out.padding(b, t) = 0;
    }
    out.lengths[b] = len;
  }
  return out;
}

double CharCorpus::unigram_test_loss() const {
  const std::size_t n_train = ids_.size() - n_test_;
  std::vector<double> count(bytes_.size(), 1.0);  // add-one
  for (std::size_t i = 0; i < n_train; ++i) count[static_cast<std::size_t>(ids_[i])] += 1.0;
  const double denom = static_cast<double>(n_train + bytes_.size());
  double sum = 0;
  // Targets of the test split: every test byte after its first (windows predict o+1 .. o+ℓ).
  for (std::size_t i = n_train + 1; i < ids_.size(); ++i)
    sum -= std::log(count[static_cast<std::size_t>(ids_[i])] / denom);
  return sum / static_cast<double>(n_test_ - 1);
}

}  // namespace seqlab

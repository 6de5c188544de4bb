#include "seqlab/tasks/majority.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace seqlab {

namespace {

[[noreturn]] void bad(const std::string& arg, const std::string& value, const std::string& rule) {
  throw std::invalid_argument("MajorityTask: " + arg + " = " + value + ": " + rule);
}

std::string real_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

MajorityTask::MajorityTask(int seq_len, double pad_fraction, int n_classes, int n_noise,
                           int min_len)
    : seq_len_(seq_len), pad_fraction_(pad_fraction), n_classes_(n_classes), n_noise_(n_noise) {
  if (seq_len < 2) bad("seq_len", std::to_string(seq_len), "allowed >= 2");
  if (!(pad_fraction >= 0.0 && pad_fraction < 1.0))
    bad("pad_fraction", real_text(pad_fraction), "allowed a real in [0, 1)");
  if (n_classes < 2) bad("n_classes", std::to_string(n_classes), "allowed >= 2");
  if (n_noise < 0) bad("n_noise", std::to_string(n_noise), "allowed >= 0");
  if (min_len < 1 || min_len > seq_len)
    bad("min_len", std::to_string(min_len), "allowed an integer in [1, seq_len = " +
                                                std::to_string(seq_len) + "]");
  mean_len_ = static_cast<int>(std::lround((1.0 - pad_fraction) * seq_len));
  if (mean_len_ < min_len)
    bad("pad_fraction", real_text(pad_fraction),
        "the mean length round((1 - pad_fraction) * seq_len) = " + std::to_string(mean_len_) +
            " is below min_len = " + std::to_string(min_len) + "; allowed pad_fraction <= " +
            real_text(1.0 - (min_len - 0.5) / seq_len));
  half_width_ = std::min(mean_len_ - min_len, seq_len - mean_len_);
}

double MajorityTask::expected_pad_fraction() const {
  return 1.0 - static_cast<double>(mean_len_) / seq_len_;
}

PaddedClassificationBatch MajorityTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0) throw std::invalid_argument("MajorityTask::sample: batch must be >= 1, got 0");
  const std::size_t T = static_cast<std::size_t>(seq_len_);
  PaddedClassificationBatch out{IndexTensor2::from_shape({batch, T}),
                                PaddingMask::from_shape({batch, T}),
                                IndexTensor1::from_shape({batch}),
                                IndexTensor1::from_shape({batch})};
  out.inputs.fill(pad_id());
  out.padding.fill(1);
  const std::uint64_t n_tokens = static_cast<std::uint64_t>(n_classes_ + n_noise_);
  std::vector<int> counts(static_cast<std::size_t>(n_classes_) + 1);
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t L = static_cast<std::size_t>(
        min_length() + static_cast<int>(rng.uniform_int(static_cast<std::uint64_t>(2 * half_width_ + 1))));
    int label = -1;
    while (label < 0) {  // rejection: redraw the tokens until the class-token mode is unique
      std::fill(counts.begin(), counts.end(), 0);
      for (std::size_t t = 0; t < L; ++t) {
        const auto tok = static_cast<std::int32_t>(1 + rng.uniform_int(n_tokens));
        out.inputs(b, t) = tok;
        if (tok <= n_classes_) ++counts[static_cast<std::size_t>(tok)];
      }
      int best = 0, best_count = 0;
      bool unique = false;
      for (int c = 1; c <= n_classes_; ++c) {
        if (counts[static_cast<std::size_t>(c)] > best_count) {
          best = c;
          best_count = counts[static_cast<std::size_t>(c)];
          unique = true;
        } else if (counts[static_cast<std::size_t>(c)] == best_count) {
          unique = false;
        }
      }
      if (unique && best_count > 0) label = best - 1;
    }
    for (std::size_t t = 0; t < L; ++t) out.padding(b, t) = 0;
    out.labels(b) = label;
    out.lengths(b) = static_cast<std::int32_t>(L);
  }
  return out;
}

double MajorityTask::chance_accuracy() const { return 1.0 / n_classes_; }

double MajorityTask::chance_loss() const { return std::log(static_cast<double>(n_classes_)); }

}  // namespace seqlab

#include "seqlab/tasks/markov_lm.hpp"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace seqlab {

namespace {
constexpr std::size_t kMaxContexts = std::size_t{1} << 20;
}

MarkovLanguageTask::MarkovLanguageTask(int seq_len, int vocab_size, int order, int branching,
                                       std::uint64_t grammar_seed)
    : seq_len_(seq_len), vocab_size_(vocab_size), order_(order), branching_(branching) {
  if (vocab_size < 2)
    throw std::invalid_argument("MarkovLanguageTask: vocab_size must be >= 2, got " +
                                std::to_string(vocab_size));
  if (order < 1)
    throw std::invalid_argument("MarkovLanguageTask: order must be >= 1, got " +
                                std::to_string(order));
  std::size_t n_ctx = 1;
  for (int i = 0; i < order; ++i) {
    n_ctx *= static_cast<std::size_t>(vocab_size);
    if (n_ctx > kMaxContexts)
      throw std::invalid_argument("MarkovLanguageTask: order = " + std::to_string(order) +
                                  " gives vocab_size^order > 2^20 contexts (vocab_size = " +
                                  std::to_string(vocab_size) + ")");
  }
  if (seq_len < order + 1)
    throw std::invalid_argument("MarkovLanguageTask: seq_len must be >= order + 1 = " +
                                std::to_string(order + 1) + ", got " + std::to_string(seq_len));
  if (branching < 1 || branching > vocab_size)
    throw std::invalid_argument("MarkovLanguageTask: branching must be in [1, vocab_size] = [1, " +
                                std::to_string(vocab_size) + "], got " + std::to_string(branching));
  const std::size_t K = static_cast<std::size_t>(branching);
  const std::size_t V = static_cast<std::size_t>(vocab_size);
  double z = 0;
  for (std::size_t j = 0; j < K; ++j) z += std::ldexp(1.0, -static_cast<int>(j));
  p_.resize(K);
  for (std::size_t j = 0; j < K; ++j) p_[j] = std::ldexp(1.0, -static_cast<int>(j)) / z;
  table_.resize(n_ctx * K);
  Rng rng(grammar_seed);
  std::vector<std::int32_t> ids(V);
  for (std::size_t c = 0; c < n_ctx; ++c) {
    std::iota(ids.begin(), ids.end(), 0);
    for (std::size_t j = 0; j < K; ++j) {
      const std::size_t i = j + static_cast<std::size_t>(rng.uniform_int(V - j));
      std::swap(ids[i], ids[j]);
      table_[c * K + j] = ids[j];
    }
  }
}

std::int32_t MarkovLanguageTask::successor(std::size_t context, int j) const {
  const std::size_t K = static_cast<std::size_t>(branching_);
  if (j < 0 || j >= branching_ || context >= table_.size() / K)
    throw std::out_of_range("MarkovLanguageTask::successor: context " + std::to_string(context) +
                            ", j " + std::to_string(j) + " out of range");
  return table_[context * K + static_cast<std::size_t>(j)];
}

std::size_t MarkovLanguageTask::context_index(const std::int32_t* tokens) const {
  std::size_t c = 0;
  for (int i = 0; i < order_; ++i)
    c = c * static_cast<std::size_t>(vocab_size_) + static_cast<std::size_t>(tokens[i]);
  return c;
}

TokenBatch MarkovLanguageTask::sample(std::size_t batch, Rng& rng) const {
  if (batch == 0)
    throw std::invalid_argument("MarkovLanguageTask::sample: batch must be >= 1, got 0");
  const std::size_t T = static_cast<std::size_t>(seq_len_);
  const std::size_t k = static_cast<std::size_t>(order_);
  const std::size_t K = static_cast<std::size_t>(branching_);
  TokenBatch out{IndexTensor2::from_shape({batch, T}), IndexTensor2::from_shape({batch, T})};
  for (std::size_t b = 0; b < batch; ++b) {
    std::int32_t* x = &out.inputs(b, 0);
    for (std::size_t t = 0; t < k; ++t)
      x[t] = static_cast<std::int32_t>(rng.uniform_int(static_cast<std::uint64_t>(vocab_size_)));
    for (std::size_t t = k; t < T; ++t) {
      const std::size_t c = context_index(x + (t - k));
      const double u = rng.uniform_double();
      std::size_t j = 0;
      double cum = p_[0];
      while (j + 1 < K && !(u < cum)) cum += p_[++j];
      x[t] = table_[c * K + j];
    }
    for (std::size_t t = 0; t < T; ++t)
      out.targets(b, t) = (t + 1 >= k && t + 1 < T) ? x[t + 1] : kIgnoreTarget;
  }
  return out;
}

double MarkovLanguageTask::optimal_loss() const {
  double h = 0;
  for (double p : p_) h -= p * std::log(p);
  return h;
}

double MarkovLanguageTask::bayes_accuracy() const { return p_[0]; }

double MarkovLanguageTask::chance_accuracy() const { return 1.0 / vocab_size_; }

double MarkovLanguageTask::chance_loss() const {
  return std::log(static_cast<double>(vocab_size_));
}

}  // namespace seqlab

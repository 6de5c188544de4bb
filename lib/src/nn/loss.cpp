#include "seqlab/nn/loss.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "seqlab/core/threads.hpp"
#include "row_kernels.hpp"

namespace seqlab {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Row max m and s = Σ exp(x - m) (in double) of x[0, c). m = -inf for an empty or all -inf row
// (then s = 0); a NaN entry makes s NaN.
struct RowStats {
  float max;
  double sum;
};

// max of x[0, c) (-inf for an empty or all -inf row); nan = whether an entry is NaN.
float row_max(const float* x, std::size_t c, bool& nan) {
  float m = kNegInf;
  nan = false;
  for (std::size_t j = 0; j < c; ++j) {
    if (x[j] > m) m = x[j];
    if (std::isnan(x[j])) nan = true;
  }
  return m;
}

RowStats row_stats(const float* x, std::size_t c) {
  bool nan = false;
  const float m = row_max(x, c, nan);
  if (nan) return {m, std::numeric_limits<double>::quiet_NaN()};
  if (m == kNegInf) return {m, 0.0};
  double s = 0.0;
  for (std::size_t j = 0; j < c; ++j) s += std::exp(static_cast<double>(x[j] - m));
  return {m, s};
}

void check_same(const char* what, const Tensor2& y, const Tensor2& dy) {
  if (y.shape() != dy.shape())
    throw ShapeError(std::string(what) + ": dy has shape " + shape_string(dy.shape()) +
                     ", expected the forward output's shape " + shape_string(y.shape()));
}

// p_j = exp(x_j - m) / s for x[0, c), and the row's RowStats (as row_stats): zeros for a row of
// all -inf, NaN everywhere when an entry is NaN. Each exp(x_j - m) is computed once, kept in
// double in e (resized to c) between the sum and the division: the same values as summing first
// and recomputing every exp for p, with half the exp calls.
RowStats softmax_row(const float* x, std::size_t c, float* p, std::vector<double>& e) {
  bool nan = false;
  const float m = row_max(x, c, nan);
  if (nan) {
    for (std::size_t j = 0; j < c; ++j) p[j] = std::numeric_limits<float>::quiet_NaN();
    return {m, std::numeric_limits<double>::quiet_NaN()};
  }
  if (m == kNegInf) {
    for (std::size_t j = 0; j < c; ++j) p[j] = 0.0f;
    return {m, 0.0};
  }
  e.resize(c);
  double s = 0.0;
  for (std::size_t j = 0; j < c; ++j) {
    e[j] = std::exp(static_cast<double>(x[j] - m));
    s += e[j];
  }
  const double inv = 1.0 / s;
  for (std::size_t j = 0; j < c; ++j) p[j] = static_cast<float>(e[j] * inv);
  return {m, s};
}

}  // namespace

Tensor2 softmax(const Tensor2& logits) {
  const std::size_t n = logits.shape()[0], c = logits.shape()[1];
  Tensor2 p({n, c});
  std::vector<double> e;
  for (std::size_t i = 0; i < n; ++i) softmax_row(logits.data() + i * c, c, p.data() + i * c, e);
  return p;
}

Tensor2 softmax_backward(const Tensor2& y, const Tensor2& dy) {
  check_same("softmax_backward", y, dy);
  const std::size_t n = y.shape()[0], c = y.shape()[1];
  Tensor2 dx({n, c});
  for (std::size_t i = 0; i < n; ++i) {
    const float* py = y.data() + i * c;
    const float* pd = dy.data() + i * c;
    double dot = 0.0;  // Σ_j dy_j y_j
    for (std::size_t j = 0; j < c; ++j) dot += static_cast<double>(pd[j]) * py[j];
    float* out = dx.data() + i * c;
    for (std::size_t j = 0; j < c; ++j) out[j] = static_cast<float>(py[j] * (pd[j] - dot));
  }
  return dx;
}

Tensor2 log_softmax(const Tensor2& logits) {
  const std::size_t n = logits.shape()[0], c = logits.shape()[1];
  Tensor2 out({n, c});
  for (std::size_t i = 0; i < n; ++i) {
    const float* x = logits.data() + i * c;
    float* o = out.data() + i * c;
    const RowStats st = row_stats(x, c);
    if (st.max == kNegInf && !std::isnan(st.sum)) {
      for (std::size_t j = 0; j < c; ++j) o[j] = kNegInf;
      continue;
    }
    const float log_s = static_cast<float>(std::log(st.sum));
    for (std::size_t j = 0; j < c; ++j) o[j] = (x[j] - st.max) - log_s;  // x - m - log Σ exp(x - m)
  }
  return out;
}

Tensor2 log_softmax_backward(const Tensor2& y, const Tensor2& dy) {
  check_same("log_softmax_backward", y, dy);
  const std::size_t n = y.shape()[0], c = y.shape()[1];
  Tensor2 dx({n, c});
  for (std::size_t i = 0; i < n; ++i) {
    const float* py = y.data() + i * c;
    const float* pd = dy.data() + i * c;
    double sum = 0.0;  // Σ_j dy_j
    for (std::size_t j = 0; j < c; ++j) sum += pd[j];
    float* out = dx.data() + i * c;
    for (std::size_t j = 0; j < c; ++j)
      out[j] = static_cast<float>(pd[j] - std::exp(static_cast<double>(py[j])) * sum);
  }
  return dx;
}

const char* reduction_name(Reduction r) { return r == Reduction::sum ? "sum" : "mean"; }

Reduction parse_reduction(const std::string& name) {
  if (name == "mean") return Reduction::mean;
  if (name == "sum") return Reduction::sum;
  throw std::invalid_argument("reduction = '" + name + "': allowed mean, sum");
}

CrossEntropyLoss::CrossEntropyLoss(std::int32_t ignore_index, Reduction reduction)
    : ignore_index_(ignore_index), reduction_(reduction) {}

float CrossEntropyLoss::forward(const Tensor2& logits, const IndexTensor1& targets) {
  const std::size_t n = logits.shape()[0], c = logits.shape()[1];
  check_shape("CrossEntropyLoss.forward: targets", targets, {static_cast<long>(n)});
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t t = targets(i);
    if (t == ignore_index_) continue;
    if (t < 0 || static_cast<std::size_t>(t) >= c)
      throw std::out_of_range("CrossEntropyLoss.forward: target " + std::to_string(t) + " at row " +
                              std::to_string(i) + " is outside [0, " + std::to_string(c) +
                              ") and is not ignore_index (" + std::to_string(ignore_index_) + ")");
  }
  targets_ = targets;
  probs_.resize({n, c});
  row_loss_ = xt::zeros<float>({n});
  count_ = 0;
  // The rows in parallel (each range its own exp buffer), their losses kept in double and summed
  // afterwards in row order: the same total for every thread budget.
  std::vector<double> row_l(n, 0.0);
  parallel_for(n, std::max<std::size_t>(1, detail::kElementGrain / std::max<std::size_t>(c, 1)),
               [&](std::size_t a, std::size_t b, std::size_t) {
    std::vector<double> e;
    for (std::size_t i = a; i < b; ++i) {
      const float* x = logits.data() + i * c;
      const RowStats st = softmax_row(x, c, probs_.data() + i * c, e);
      const std::int32_t t = targets_(i);
      if (t == ignore_index_) continue;
      // -log_softmax(x)[t] = m + log Σ exp(x - m) - x_t
      const double l = (static_cast<double>(st.max) - x[t]) + std::log(st.sum);
      row_loss_(i) = static_cast<float>(l);
      row_l[i] = l;
    }
  });
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (targets_(i) == ignore_index_) continue;
    total += row_l[i];
    ++count_;
  }
  sum_ = total;
  cached_ = true;
  if (reduction_ == Reduction::sum) return static_cast<float>(total);
  return count_ == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(count_));
}

Tensor2 CrossEntropyLoss::backward() const {
  if (!cached_) throw std::logic_error("CrossEntropyLoss.backward: called before forward");
  const std::size_t n = probs_.shape()[0], c = probs_.shape()[1];
  Tensor2 d = xt::zeros<float>({n, c});
  if (count_ == 0) return d;
  // mean: (softmax - onehot) / n; sum: softmax - onehot (scale 1, so exactly the probabilities)
  const float inv = reduction_ == Reduction::sum ? 1.0f : 1.0f / static_cast<float>(count_);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t t = targets_(i);
    if (t == ignore_index_) continue;  // ignored rows stay exactly 0
    const float* p = probs_.data() + i * c;
    float* o = d.data() + i * c;
    for (std::size_t j = 0; j < c; ++j) o[j] = p[j] * inv;
    o[t] -= inv;
  }
  return d;
}

}  // namespace seqlab

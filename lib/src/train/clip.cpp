#include "seqlab/train/clip.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

namespace seqlab {

double global_grad_norm(const std::vector<Parameter*>& params) {
  double sum = 0.0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    if (params[k] == nullptr)
      throw std::invalid_argument("global_grad_norm: params[" + std::to_string(k) +
                                  "] is a null pointer; every parameter must be non-null");
    const float* g = params[k]->grad.data();
    const std::size_t n = params[k]->grad.size();
    for (std::size_t i = 0; i < n; ++i) {
      const double x = g[i];
      sum += x * x;  // Inf stays Inf; NaN propagates
    }
  }
  // Only non-negative terms: a NaN sum means a NaN gradient, an Inf sum an Inf gradient.
  return std::sqrt(sum);
}

double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm) {
  if (!(max_norm >= 0.0)) {
    std::ostringstream m;
    m << "clip_grad_norm: max_norm = " << max_norm << "; must be >= 0 (and not NaN)";
    throw std::invalid_argument(m.str());
  }
  const double total = global_grad_norm(params);
  if (!std::isfinite(total)) return total;  // divergence: the caller decides; grads untouched
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    const float c = static_cast<float>(coef);
    for (Parameter* p : params) {
      float* g = p->grad.data();
      const std::size_t n = p->grad.size();
      for (std::size_t i = 0; i < n; ++i) g[i] *= c;
    }
  }
  return total;
}

}  // namespace seqlab

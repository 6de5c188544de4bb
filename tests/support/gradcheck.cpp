#include "gradcheck.hpp"

#include <cmath>
#include <sstream>

#include "seqlab/core/rng.hpp"

namespace seqlab::test {

GradCheckResult check_gradients(const std::function<std::vector<float>()>& forward,
                                const std::function<void(const std::vector<float>& dy)>& backward,
                                const std::vector<Probe>& probes, const GradCheckOptions& opt) {
  GradCheckResult res;
  const std::vector<float> y0 = forward();
  Rng rng(opt.seed);
  std::vector<float> w(y0.size());
  for (auto& v : w) v = rng.uniform(-1.0f, 1.0f);
  auto loss = [&]() {
    const std::vector<float> y = forward();
    double l = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) l += static_cast<double>(w[i]) * y[i];
    return l;
  };
  backward(w);
  // Copy analytic gradients now: later forwards may overwrite caches the grads point into.
  std::vector<std::vector<float>> analytic;
  for (const auto& p : probes) analytic.emplace_back(p.grad, p.grad + p.n);

  std::ostringstream failures;
  int n_fail = 0;
  for (std::size_t pi = 0; pi < probes.size(); ++pi) {
    const auto& p = probes[pi];
    std::size_t stride = 1;
    if (opt.max_elements_per_probe > 0 && p.n > opt.max_elements_per_probe)
      stride = (p.n + opt.max_elements_per_probe - 1) / opt.max_elements_per_probe;
    for (std::size_t i = 0; i < p.n; i += stride) {
      const float orig = p.value[i];
      p.value[i] = static_cast<float>(orig + opt.eps);
      const double lp = loss();
      p.value[i] = static_cast<float>(orig - opt.eps);
      const double lm = loss();
      p.value[i] = orig;
      const double num = (lp - lm) / (2.0 * opt.eps);
      const double ana = analytic[pi][i];
      const double err = std::abs(num - ana);
      ++res.checked;
      std::ostringstream where;
      where << p.name << "[" << i << "]: numeric=" << num << ", analytic=" << ana;
      if (err > res.max_abs_err) {
        res.max_abs_err = err;
        res.worst = where.str();
      }
      if (err > opt.atol + opt.rtol * std::abs(num)) {
        res.ok = false;
        if (n_fail++ < 20) failures << where.str() << "\n";
      }
    }
  }
  res.report = failures.str();
  return res;
}

}  // namespace seqlab::test

#include "seqlab/tasks/draw_counts.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace seqlab {

namespace {

// Binomial(n, p) probability of c successes, in logs (no overflow for any n used here).
double binom_pmf(int n, int c, double p) {
  if (p >= 1.0) return c == n ? 1.0 : 0.0;
  const double log_choose = std::lgamma(n + 1.0) - std::lgamma(c + 1.0) - std::lgamma(n - c + 1.0);
  return std::exp(log_choose + c * std::log(p) + (n - c) * std::log1p(-p));
}

void check(int n, int n_min, int k) {
  if (n < n_min)
    throw std::invalid_argument("draw counts: n must be >= " + std::to_string(n_min) + ", got " +
                                std::to_string(n));
  if (k < 1) throw std::invalid_argument("draw counts: k must be >= 1, got " + std::to_string(k));
}

}  // namespace

double expected_max_count(int n, int k) {
  check(n, 0, k);
  double e = 0.0;
  for (int m = 0; m < n; ++m) {
    // f[j]: probability that the first categories hold j of the draws, each at most m.
    std::vector<double> f(static_cast<std::size_t>(n) + 1, 0.0), g(f.size());
    f[0] = 1.0;
    for (int i = 0; i < k; ++i) {
      const double q = 1.0 / (k - i);
      std::fill(g.begin(), g.end(), 0.0);
      for (int j = 0; j <= n; ++j) {
        if (f[static_cast<std::size_t>(j)] == 0.0) continue;
        const int left = n - j;
        for (int c = 0; c <= std::min(m, left); ++c)
          g[static_cast<std::size_t>(j + c)] += f[static_cast<std::size_t>(j)] * binom_pmf(left, c, q);
      }
      f.swap(g);
    }
    e += 1.0 - f[static_cast<std::size_t>(n)];  // P(max > m)
  }
  return e;
}

double expected_plugin_entropy(int n, int k) {
  check(n, 1, k);
  const double p = 1.0 / k;
  double h = 0.0;
  for (int c = 1; c <= n; ++c) {
    const double share = static_cast<double>(c) / n;
    h += binom_pmf(n, c, p) * share * -std::log(share);
  }
  return k * h;
}

}  // namespace seqlab

#include "analysis.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <stdexcept>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/nn/positional.hpp"

using seqlab::experiment::CellOutput;
using seqlab::experiment::Row;

namespace position_extrapolation {

namespace {

Row id_row(const AnalysisId& id) {
  Row r;
  r.add("experiment", id.experiment)
      .add("task", id.task)
      .add("positional_encoding", id.encoding)
      .add("seed", id.seed);
  return r;
}

/// Σ_i cos(k ω_i), ω_i = 10000^(-2i/D), in double (the closed form of PE(p)·PE(p+k)).
double closed_form_dot(std::size_t D, double k) {
  double s = 0;
  for (std::size_t i = 0; i < D / 2; ++i)
    s += std::cos(k * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(D)));
  return s;
}

}  // namespace

std::vector<std::size_t> distance_grid(std::size_t max_distance, bool include_zero) {
  std::vector<std::size_t> g;
  if (include_zero) g.push_back(0);
  for (std::size_t k = 1; k <= std::min<std::size_t>(64, max_distance); ++k) g.push_back(k);
  std::size_t k = 64;
  while (k < max_distance) {
    k = std::min(max_distance, static_cast<std::size_t>(std::ceil(1.1 * static_cast<double>(k))));
    g.push_back(k);
  }
  return g;
}

void sinusoidal_similarity(const AnalysisId& id, CellOutput& out) {
  for (int di = 0; di < 4; ++di) {
    const auto D = static_cast<std::size_t>(kSimilarityDModels[di]);
    for (int ki = 0; ki < 4; ++ki) {
      const auto k = static_cast<std::size_t>(kSimilarityDistances[ki]);
      const double dot_cf = closed_form_dot(D, static_cast<double>(k));
      for (const int p0 : kSimilarityPositions) {
        const auto p = static_cast<std::size_t>(p0);
        // The library's float table (what a sinusoidal model adds to its embeddings).
        const seqlab::Tensor2 a = seqlab::sinusoidal_table(1, D, true, p);
        const seqlab::Tensor2 b = seqlab::sinusoidal_table(1, D, true, p + k);
        double dot = 0, na = 0, nb = 0;
        for (std::size_t j = 0; j < D; ++j) {
          dot += static_cast<double>(a(0, j)) * b(0, j);
          na += static_cast<double>(a(0, j)) * a(0, j);
          nb += static_cast<double>(b(0, j)) * b(0, j);
        }
        out.add_row(id_row(id)
                        .add("d_model", D)
                        .add("distance", k)
                        .add("position", p)
                        .add("dot", dot)
                        .add("cosine", dot / std::sqrt(na * nb))
                        .add("dot_closed_form", dot_cf)
                        .add("cosine_closed_form", dot_cf / (static_cast<double>(D) / 2))
                        .add("claimed_cosine", D == 512 ? kClaimedCosine512[ki]
                                                        : std::numeric_limits<double>::quiet_NaN()),
                    "similarity");
      }
    }
  }
}

void sinusoidal_resolution(const AnalysisId& id, std::size_t search_to, CellOutput& out) {
  if (search_to < 100) throw std::invalid_argument("sinusoidal_resolution: search_to must be >= 100");
  const std::vector<std::size_t> grid = distance_grid(search_to, false);
  for (const int d0 : kSimilarityDModels) {
    const auto D = static_cast<std::size_t>(d0);
    const seqlab::Tensor2 table = seqlab::sinusoidal_table(search_to + 1, D, true, 0);
    const std::size_t P = D / 2;
    struct Band {
      const char* name;
      std::size_t lo, hi;  // frequency pairs [lo, hi)
    };
    const Band bands[3] = {{"high", 0, P / 2}, {"low", P / 2, P}, {"all", 0, P}};
    for (const Band& band : bands) {
      const double n = static_cast<double>(band.hi - band.lo);
      // separation(k) for every k in [1, search_to], from the table rows 0 and k.
      std::vector<double> sep(search_to + 1, 0.0), cosv(search_to + 1, 1.0);
      for (std::size_t k = 1; k <= search_to; ++k) {
        double sq = 0, dot = 0;
        for (std::size_t j = 2 * band.lo; j < 2 * band.hi; ++j) {
          const double a = table(0, j), b = table(k, j);
          sq += (b - a) * (b - a);
          dot += a * b;
        }
        sep[k] = std::sqrt(sq / n);
        cosv[k] = dot / n;  // |PE_S|² = n for every position
      }
      for (const std::size_t k : grid)
        out.add_row(id_row(id)
                        .add("d_model", D)
                        .add("band", band.name)
                        .add("distance", k)
                        .add("cosine", cosv[k])
                        .add("separation", sep[k]),
                    "resolution");
      std::size_t monotone_to = search_to;
      for (std::size_t k = 1; k < search_to; ++k)
        if (sep[k + 1] < sep[k]) {
          monotone_to = k;
          break;
        }
      std::size_t first_alias = 0;
      for (std::size_t k = 2; k <= search_to; ++k)
        if (sep[k] <= sep[1]) {
          first_alias = k;
          break;
        }
      std::size_t closest = 0;
      double closest_sep = std::numeric_limits<double>::quiet_NaN();
      for (std::size_t k = monotone_to + 1; k <= search_to; ++k)
        if (closest == 0 || sep[k] < closest_sep) {
          closest = k;
          closest_sep = sep[k];
        }
      const double two_pi = 2.0 * std::acos(-1.0);
      auto omega = [&](std::size_t i) {
        return std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(D));
      };
      out.add_row(id_row(id)
                      .add("d_model", D)
                      .add("band", band.name)
                      .add("n_frequencies", band.hi - band.lo)
                      .add("period_min", two_pi / omega(band.lo))
                      .add("period_max", two_pi / omega(band.hi - 1))
                      .add("separation_at_1", sep[1])
                      .add("monotone_to", monotone_to)
                      .add("first_alias_distance", first_alias)
                      .add("closest_far_distance", closest)
                      .add("closest_far_separation", closest_sep)
                      .add("searched_to", search_to),
                  "aliasing");
    }
  }
}

void rope_decay(const AnalysisId& id, std::size_t head_dim, std::size_t train_len,
                std::size_t max_scale, std::size_t max_distance, std::size_t samples,
                const std::string& pairing, std::uint64_t seed, CellOutput& out) {
  const seqlab::PositionalEncodingKind kind = seqlab::parse_positional_encoding(id.encoding);
  seqlab::RopeConfig rc;
  rc.head_dim = head_dim;
  rc.pairing = pairing == "halves" ? seqlab::RopePairing::halves : seqlab::RopePairing::interleaved;
  rc.scaling = seqlab::rope_scaling_for(kind);
  rc.train_len = train_len;
  std::vector<std::size_t> scales;
  if (rc.scaling == seqlab::RopeScaling::none) {
    scales = {1};
  } else {
    for (std::size_t s = 2; s <= max_scale; s *= 2) scales.push_back(s);
  }
  const std::size_t hd = head_dim, half = hd / 2;
  // Samples: q and k of the iid case, in this order, row by row.
  seqlab::Rng rng(seed);
  std::vector<float> q(samples * hd), k(samples * hd);
  for (std::size_t n = 0; n < samples; ++n) {
    for (std::size_t j = 0; j < hd; ++j) q[n * hd + j] = rng.normal();
    for (std::size_t j = 0; j < hd; ++j) k[n * hd + j] = rng.normal();
  }
  const std::vector<std::size_t> grid = distance_grid(max_distance, true);
  std::vector<float> rk(samples * hd), rq(samples * hd);
  for (const std::size_t s : scales) {
    seqlab::RotaryEmbedding rope(rc);
    rope.set_context_length(s * train_len);
    const std::vector<double> theta = rope.inverse_frequencies();
    for (const std::size_t d : grid) {
      // Key at position d rotated by R(d); query at position 0 (R(0) = I).
      rk = k;
      rq = q;
      rope.rotate(rk.data(), samples, 1, d, false);
      rope.rotate(rq.data(), samples, 1, d, false);
      double abs_iid = 0, abs_shared = 0, sum_shared = 0;
      for (std::size_t n = 0; n < samples; ++n) {
        double si = 0, ss = 0;
        for (std::size_t j = 0; j < hd; ++j) {
          si += static_cast<double>(q[n * hd + j]) * rk[n * hd + j];
          ss += static_cast<double>(q[n * hd + j]) * rq[n * hd + j];  // q = k
        }
        abs_iid += std::abs(si);
        abs_shared += std::abs(ss);
        sum_shared += ss;
      }
      // RoFormer eq. 37-38: (1/(hd/2)) Σ_j |S_j|, S_j = Σ_{l<j} e^{i d θ_l}.
      std::complex<double> S = 0;
      double bound = 0;
      for (std::size_t l = 0; l < half; ++l) {
        S += std::polar(1.0, static_cast<double>(d) * theta[l]);
        bound += std::abs(S);
      }
      const double ns = static_cast<double>(samples);
      out.add_row(id_row(id)
                      .add("head_dim", hd)
                      .add("scale", s)
                      .add("distance", d)
                      .add("mean_abs_score_iid", abs_iid / ns)
                      .add("mean_abs_score_shared", abs_shared / ns)
                      .add("mean_score_shared", sum_shared / ns)
                      .add("roformer_bound", bound / static_cast<double>(half))
                      .add("n_samples", samples),
                  "rope_decay");
    }
  }
}

}  // namespace position_extrapolation

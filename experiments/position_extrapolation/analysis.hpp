#pragma once
// Analyses of positional encodings that need no training (position_extrapolation, task = analysis).
// Each computes from the library's own encodings (nn/positional.hpp): sinusoidal_table and
// RotaryEmbedding, so the numbers are those of the code the models use; the integration test
// checks them against closed forms computed independently.
//
// 1. Sinusoidal similarity (Vaswani et al. 2017 §3.5 encodings): for d_model D and distance k,
//      dot(p, k)    = PE(p) · PE(p + k)
//      cosine(p, k) = dot / (|PE(p)| |PE(p + k)|)
//    Closed form: PE(p)·PE(p+k) = Σ_{i<D/2} [sin(pω_i) sin((p+k)ω_i) + cos(pω_i) cos((p+k)ω_i)]
//    = Σ_i cos(kω_i), ω_i = 10000^(-2i/D), and |PE(p)|² = D/2, so both depend on k only, not p
//    (up to float rounding of the table).
// 2. RoPE long-term decay (Su et al. 2021, RoFormer §3.4.3): the score s(Δ) = qᵀ R(Δ) k of a
//    query and a key Δ positions apart, for q, k ~ N(0, I_hd) independent ("iid") and for q = k
//    ("shared"), averaged over samples; and RoFormer's bound term
//      B(Δ) = (1/(hd/2)) Σ_{j=1}^{hd/2} |S_j|,  S_j = Σ_{l<j} exp(iΔθ_l)     (RoFormer eq. 37-38)
//    whose decay RoFormer's Figure 2 shows. Without scaling (rope), with position interpolation
//    (rope_pi, angles Δθ/s) and NTK scaling (rope_ntk) at s = context / L_train.
//    Expected values: iid: E|s| = E|N(0,1)| E|q| = √(2/π) · √2 Γ((hd+1)/2)/Γ(hd/2) for every Δ
//    (a rotation of an isotropic k is isotropic: no decay); shared: E[s] = 2 Σ_i cos(Δθ_i).
// 3. Frequency resolution of sinusoidal bands: the high-frequency half (pairs i < D/4, periods
//    2π..2π·100 positions), the low-frequency half (i >= D/4, periods 2π·100..2π·10⁴) and all
//    pairs; separation(k) = ‖PE_S(p+k) - PE_S(p)‖ / √|S| = √(2 - 2 c_S(k)), c_S(k) = mean_{i∈S}
//    cos(kω_i), in [0, 2] (0: the two positions coincide; √2: orthogonal, like unrelated vectors).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "seqlab/experiment/table.hpp"

namespace position_extrapolation {

/// The widely repeated claim under test: cosine similarity of sinusoidal encodings at d_model 512
/// for k = 1, 10, 100, 1000 (Table in many tutorials; no primary source gives it).
inline constexpr double kClaimedCosine512[4] = {0.92, 0.65, 0.12, -0.06};
inline constexpr int kSimilarityDistances[4] = {1, 10, 100, 1000};
inline constexpr int kSimilarityDModels[4] = {64, 128, 256, 512};
inline constexpr int kSimilarityPositions[5] = {0, 1, 10, 100, 1000};

/// Identifying columns every analysis row starts with.
struct AnalysisId {
  std::string experiment;
  std::string task;      // "analysis"
  std::string encoding;  // the cell's positional_encoding
  std::size_t seed = 0;  // replicate
};

/// Rows of table "similarity": one per (d_model, distance, position) of the constants above:
/// experiment, task, positional_encoding, seed, d_model, distance, position, dot, cosine,
/// dot_closed_form, cosine_closed_form, claimed_cosine (nan unless d_model = 512).
void sinusoidal_similarity(const AnalysisId& id, seqlab::experiment::CellOutput& out);

/// Rows of tables "resolution" (curve: d_model, band, distance, cosine, separation for distances
/// 1..64 and then geometric steps of 10% up to search_to) and "aliasing" (summary per d_model and
/// band: n_frequencies, period_min, period_max (positions), separation_at_1, monotone_to (the
/// last k up to which separation grows with every step: distance readable), first_alias_distance
/// (smallest k in [2, search_to] with separation(k) <= separation(1); 0 = none), closest_far_distance
/// and closest_far_separation (minimum of separation over k in (monotone_to, search_to]),
/// searched_to). search_to >= 100.
void sinusoidal_resolution(const AnalysisId& id, std::size_t search_to,
                           seqlab::experiment::CellOutput& out);

/// Rows of table "rope_decay" for `encoding` rope (scale 1), rope_pi or rope_ntk (scales 2, 4, ...
/// up to max_scale, powers of two): head_dim, scale, distance, mean_abs_score_iid,
/// mean_abs_score_shared, mean_score_shared, roformer_bound, n_samples. Distances 0..64, then
/// geometric steps of 10% up to max_distance. q, k drawn from seqlab::Rng(seed): one set of samples
/// used for every distance and scale (common random numbers).
void rope_decay(const AnalysisId& id, std::size_t head_dim, std::size_t train_len,
                std::size_t max_scale, std::size_t max_distance, std::size_t samples,
                const std::string& pairing, std::uint64_t seed, seqlab::experiment::CellOutput& out);

/// The distance grid of the curves: 0 (if include_zero), 1..64, then ⌈1.1 · previous⌉ while
/// <= max_distance, and max_distance itself.
std::vector<std::size_t> distance_grid(std::size_t max_distance, bool include_zero);

}  // namespace position_extrapolation

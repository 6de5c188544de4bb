#include "seqlab/nn/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include <xsimd/xsimd.hpp>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "fused_attention.hpp"
#include "head_gemm.hpp"
#include "seqlab/core/gemm.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/nn/positional.hpp"
#include "row_kernels.hpp"

namespace seqlab {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
using FBatch = xsimd::batch<float>;
constexpr std::size_t kLanes = FBatch::size;
#endif

std::vector<std::size_t> shape2(std::size_t a, std::size_t b) { return {a, b}; }

/// Heads of a projection: dst[b, i, t, :] = src[(b·T + t)·ld + col + i·dk + (0..dk)]
/// (src rows [B·T, ld], dst [B, h, T, dk] contiguous).
void split_heads(const float* src, std::size_t ld, std::size_t col, std::size_t B, std::size_t T,
                 std::size_t h, std::size_t dk, float* dst) {
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < h; ++i)
      for (std::size_t t = 0; t < T; ++t)
        std::memcpy(dst + ((b * h + i) * T + t) * dk, src + (b * T + t) * ld + col + i * dk,
                    dk * sizeof(float));
}

/// Inverse of split_heads: dst[(b·T + t)·ld + col + i·dk + e] = (or +=) src[b, i, t, e].
void merge_heads(const float* src, std::size_t B, std::size_t T, std::size_t h, std::size_t dk,
                 float* dst, std::size_t ld, std::size_t col, bool accumulate) {
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < h; ++i)
      for (std::size_t t = 0; t < T; ++t) {
        const float* s = src + ((b * h + i) * T + t) * dk;
        float* d = dst + (b * T + t) * ld + col + i * dk;
        if (accumulate) {
          for (std::size_t e = 0; e < dk; ++e) d[e] += s[e];
        } else {
          std::memcpy(d, s, dk * sizeof(float));
        }
      }
}

/// Unit-length rows, as torch.nn.functional.normalize(x, p=2, dim=-1, eps): x[r] /= norm[r] with
/// norm[r] = max(‖x[r]‖₂, eps), for `rows` contiguous rows of `d` floats; norm [rows] is kept for
/// the backward.
constexpr float kKeyNormEps = 1e-12f;

void normalize_rows(float* x, std::size_t rows, std::size_t d, float* norm) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* v = x + r * d;
    double ss = 0.0;
    for (std::size_t e = 0; e < d; ++e) ss += static_cast<double>(v[e]) * v[e];
    const float n = std::max(static_cast<float>(std::sqrt(ss)), kKeyNormEps);
    norm[r] = n;
    const float inv = 1.0f / n;
    for (std::size_t e = 0; e < d; ++e) v[e] *= inv;
  }
}

/// Backward of normalize_rows, in place: g[r] = dL/dx̂[r] on entry (x̂ = the normalised rows),
/// dL/dx[r] on exit. x̂ = x/‖x‖  ->  dL/dx = (g − x̂ (x̂·g)) / ‖x‖; a row whose norm was floored
/// at eps (x̂ = x/eps, linear in x) gets g / eps.
void normalize_rows_backward(float* g, const float* xhat, std::size_t rows, std::size_t d, const float* norm) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* gr = g + r * d;
    const float* xr = xhat + r * d;
    const float inv = 1.0f / norm[r];
    if (norm[r] <= kKeyNormEps) {
      for (std::size_t e = 0; e < d; ++e) gr[e] *= inv;
      continue;
    }
    double dot = 0.0;
    for (std::size_t e = 0; e < d; ++e) dot += static_cast<double>(xr[e]) * gr[e];
    const float s = static_cast<float>(dot);
    for (std::size_t e = 0; e < d; ++e) gr[e] = (gr[e] - xr[e] * s) * inv;
  }
}

#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
/// x[0, n) for 0 < n < kLanes as one register, lanes n.. set to `fill`; and its inverse, which
/// writes lanes 0..n-1 only. Under AVX-512 and AVX2 a masked load and store: a register-wide
/// buffer filled element by element and then loaded whole stalls on store forwarding, which on
/// causal rows (mostly short or ragged) cost more than the rest of the row.
FBatch load_tail(const float* x, std::size_t n, float fill) {
#if defined(__AVX512F__)
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), static_cast<__mmask16>((1u << n) - 1u), x);
#elif defined(__AVX2__)
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 on = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes));
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(x, _mm256_castps_si256(on)), on);
#else
  alignas(64) float buf[kLanes];
  std::fill(buf, buf + kLanes, fill);
  std::copy(x, x + n, buf);
  return FBatch::load_aligned(buf);
#endif
}

void store_tail(float* x, std::size_t n, const FBatch& v) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(x, static_cast<__mmask16>((1u << n) - 1u), v);
#elif defined(__AVX2__)
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  _mm256_maskstore_ps(x, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes), v);
#else
  alignas(64) float buf[kLanes];
  v.store_aligned(buf);
  std::copy(buf, buf + n, x);
#endif
}

/// The largest lane of v.
float lane_max(const FBatch& v) {
#if defined(__AVX512F__)
  return _mm512_reduce_max_ps(v);
#else
  alignas(64) float lanes[kLanes];
  v.store_aligned(lanes);
  float m = lanes[0];
  for (std::size_t l = 1; l < kLanes; ++l) m = std::max(m, lanes[l]);
  return m;
#endif
}
#endif

float max_of(const float* x, std::size_t n) {
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  if (n == 0) return kNegInf;
  FBatch bm(kNegInf);
  std::size_t j = 0;
  for (; j + kLanes <= n; j += kLanes) bm = xsimd::max(bm, FBatch::load_unaligned(x + j));
  if (j < n) bm = xsimd::max(bm, load_tail(x + j, n - j, kNegInf));
  return lane_max(bm);
#else
  float m = kNegInf;
  for (std::size_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  return m;
#endif
}

/// x[j] <- exp(x[j] - m) for j < n (exp(−∞) = 0); returns Σ_j x[j]. With SIMD, every exp is a
/// vector one, the n mod kLanes tail too (load_tail pads it with −∞, which adds 0): causal rows
/// are mostly short or ragged (query i sees i + 1 keys), and the tail's scalar std::exp calls
/// cost more than the rest of the row.
float exp_shift_sum(float* x, std::size_t n, float m) {
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  const FBatch bmax(m);
  FBatch bs(0.0f);
  std::size_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const FBatch e = xsimd::exp(FBatch::load_unaligned(x + j) - bmax);
    e.store_unaligned(x + j);
    bs += e;
  }
  if (j < n) {
    const FBatch e = xsimd::exp(load_tail(x + j, n - j, kNegInf) - bmax);
    store_tail(x + j, n - j, e);
    bs += e;
  }
  return xsimd::hadd(bs);
#else
  float s = 0.0f;
  for (std::size_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);
    s += x[j];
  }
  return s;
#endif
}

/// Σ_j a[j]·b[j] for j < n.
float dot(const float* a, const float* b, std::size_t n) {
  float s = 0.0f;
  std::size_t j = 0;
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  if (n >= kLanes) {
    FBatch bs(0.0f);
    for (; j + kLanes <= n; j += kLanes)
      bs = xsimd::fma(FBatch::load_unaligned(a + j), FBatch::load_unaligned(b + j), bs);
    s = xsimd::hadd(bs);
  }
#endif
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

/// Softmax of x[0, n) in place, row max subtracted; a row of all −∞ (or n = 0) becomes zeros.
void softmax_inplace(float* x, std::size_t n) {
  const float m = max_of(x, n);
  if (m == kNegInf) {
    std::fill(x, x + n, 0.0f);
    return;
  }
  const float inv = 1.0f / exp_shift_sum(x, n, m);
  for (std::size_t j = 0; j < n; ++j) x[j] *= inv;
}

/// Number of keys query row i may see under the causal mask: keys j with k_off + j <= q_off + i.
std::size_t causal_limit(std::size_t i, std::size_t Tk, std::size_t q_off, std::size_t k_off) {
  const std::size_t pos_q = q_off + i;
  if (pos_q + 1 <= k_off) return 0;
  return std::min(Tk, pos_q + 1 - k_off);
}

/// Runs body(g0, g1, worker) over the heads [0, n_heads) in `threads` contiguous ranges
/// (parallel_ranges, core/threads.hpp): with one range a plain call on this thread; otherwise
/// OpenBLAS is set to one thread for the duration (BlasThreadsScope), so that any OpenBLAS call
/// made there (gemm, in a build without SIMD for head_gemm) runs single-threaded and the two kinds
/// of threads never oversubscribe the cores. worker < threads indexes per-thread scratch.
/// `threads` is head_threads(n_heads), computed before the scope. Inside it OpenBLAS is at one
/// thread, so a Linear or gemm_split_rows called there would not split again (gemm_row_parts).
template <class Body>
void for_head_ranges(std::size_t n_heads, std::size_t threads, Body body) {
  if (threads <= 1 || n_heads <= 1) {
    body(std::size_t{0}, n_heads, std::size_t{0});
    return;
  }
  BlasThreadsScope one(1);
  parallel_ranges(n_heads, threads, body);
}

/// Threads for the per-head loops: seqlab's budget, at most one per head.
std::size_t head_threads(std::size_t n_heads) { return parallel_threads(n_heads, 1); }

/// pad_bias[j] = −∞ for a padded key j of row `mask` (Tk entries), 0 otherwise; returns whether
/// any key is padded.
bool padding_bias(const std::uint8_t* mask, std::size_t Tk, std::vector<float>& pad_bias) {
  pad_bias.assign(Tk, 0.0f);
  bool any = false;
  for (std::size_t j = 0; j < Tk; ++j)
    if (mask[j] != 0) {
      pad_bias[j] = kNegInf;
      any = true;
    }
  return any;
}

template <class T>
std::size_t bytes_of(const T& t) {
  return t.size() * sizeof(typename T::value_type);
}

/// Frees a buffer the last forward did not use (a default xtensor holds no elements).
template <class T>
void release(T& t) {
  t = T();
}

}  // namespace

AttentionKernel parse_attention_kernel(const std::string& name) {
  if (name == "auto") return AttentionKernel::automatic;
  if (name == "fused") return AttentionKernel::fused;
  if (name == "materialised") return AttentionKernel::materialised;
  throw std::invalid_argument("attention_kernel = '" + name + "': allowed auto, fused, materialised");
}

std::string to_string(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::fused: return "fused";
    case AttentionKernel::materialised: return "materialised";
    case AttentionKernel::automatic: break;
  }
  return "auto";
}

MultiheadAttention::MultiheadAttention(std::size_t d_model, std::size_t n_heads, Rng& rng, bool shared_qk,
                                       bool bias)
    : in_proj_weight("in_proj_weight", shape2((shared_qk ? 2 : 3) * d_model, d_model)),
      in_proj_bias("in_proj_bias", {bias ? (shared_qk ? 2 : 3) * d_model : std::size_t{0}}),
      // nn.MultiheadAttention builds out_proj (an nn.Linear: weight and bias drawn) before
      // _reset_parameters draws in_proj_weight; the same order here. Checked below for d_model 0.
      out_proj(d_model == 0 ? 1 : d_model, d_model == 0 ? 1 : d_model, rng, bias),
      d_model_(d_model),
      n_heads_(n_heads),
      head_dim_(n_heads == 0 ? 0 : d_model / n_heads),
      shared_qk_(shared_qk),
      has_bias_(bias) {
  if (d_model == 0 || n_heads == 0 || d_model % n_heads != 0)
    throw std::invalid_argument("MultiheadAttention: d_model = " + std::to_string(d_model) +
                                ", n_heads = " + std::to_string(n_heads) +
                                "; both must be >= 1 and d_model divisible by n_heads");
  // _reset_parameters: xavier_uniform_(in_proj_weight) over [3D, D]: a = sqrt(6 / (fan_in + fan_out)).
  const float a = std::sqrt(6.0f / static_cast<float>(d_model + 3 * d_model));
  rng.fill_uniform(in_proj_weight.value, -a, a);
  // constant_(in_proj_bias, 0), constant_(out_proj.bias, 0): Parameter values start at 0 already.
  if (has_bias_) out_proj.bias.value.fill(0.0f);
}

void MultiheadAttention::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + in_proj_weight.name, &in_proj_weight});
  if (has_bias_) out.push_back({prefix + in_proj_bias.name, &in_proj_bias});
  out_proj.collect_parameters(prefix + "out_proj.", out);
}

void MultiheadAttention::check_parameters() const {
  const std::vector<std::size_t> ws{proj_rows(), d_model_};
  const std::vector<std::size_t> bs{has_bias_ ? proj_rows() : 0};
  const auto same = [](const auto& shape, const std::vector<std::size_t>& want) {
    return std::equal(shape.begin(), shape.end(), want.begin(), want.end());
  };
  if (!same(in_proj_weight.value.shape(), ws) || !same(in_proj_weight.grad.shape(), ws))
    throw ShapeError("MultiheadAttention.in_proj_weight: expected shape " + shape_string(ws) + ", got value " +
                     shape_string(in_proj_weight.value.shape()) + ", grad " +
                     shape_string(in_proj_weight.grad.shape()));
  if (!same(in_proj_bias.value.shape(), bs) || !same(in_proj_bias.grad.shape(), bs))
    throw ShapeError("MultiheadAttention.in_proj_bias: expected shape " + shape_string(bs) + ", got value " +
                     shape_string(in_proj_bias.value.shape()) + ", grad " +
                     shape_string(in_proj_bias.grad.shape()));
  out_proj.check_parameters();  // before forward takes an input over or writes any cache
}

void MultiheadAttention::set_rope(const RotaryEmbedding* rope) {
  if (rope && rope->config().head_dim != head_dim_)
    throw std::invalid_argument("MultiheadAttention.set_rope: rope head_dim = " +
                                std::to_string(rope->config().head_dim) + "; must equal d_model / n_heads = " +
                                std::to_string(head_dim_));
  rope_ = rope;
}

void MultiheadAttention::set_alibi(bool on) {
  alibi_ = on;
  if (on) slopes_ = alibi_slopes(n_heads_);
}

void MultiheadAttention::set_head_mask(std::vector<float> gates) {
  if (!gates.empty() && gates.size() != n_heads_)
    throw std::invalid_argument("MultiheadAttention.set_head_mask: " + std::to_string(gates.size()) +
                                " gates; expected 0 (no mask) or n_heads = " + std::to_string(n_heads_));
  for (float g : gates)
    if (!std::isfinite(g))
      throw std::invalid_argument("MultiheadAttention.set_head_mask: a gate is not finite");
  head_mask_ = std::move(gates);
}

void MultiheadAttention::set_relative_bias(RelativePositionBias* bias) {
  if (bias && bias->n_heads() != n_heads_)
    throw std::invalid_argument("MultiheadAttention.set_relative_bias: the bias has n_heads = " +
                                std::to_string(bias->n_heads()) + "; must equal n_heads = " +
                                std::to_string(n_heads_));
  rel_bias_ = bias;
}

void MultiheadAttention::set_position_offsets(std::size_t q_offset, std::size_t k_offset) {
  q_offset_ = q_offset;
  k_offset_ = k_offset;
}

Tensor3 MultiheadAttention::forward(const Tensor3& query, const Tensor3& key_value, const AttentionMask& mask) {
  return run_forward(query, &key_value, mask);
}

Tensor3 MultiheadAttention::forward(const Tensor3& x, const AttentionMask& mask) {
  return run_forward(x, nullptr, mask);
}

Tensor3 MultiheadAttention::forward(Tensor3&& x, const AttentionMask& mask) {
  return run_forward(x, nullptr, mask, &x);
}

Tensor3 MultiheadAttention::run_forward(const Tensor3& query, const Tensor3* key_value, const AttentionMask& mask,
                                        Tensor3* take_query) {
  const long Ds = static_cast<long>(d_model_);
  const bool self = key_value == nullptr;
  check_shape(self ? "MultiheadAttention.forward x [B, T, d_model]" : "MultiheadAttention.forward query [B, Tq, d_model]",
              query, {-1, -1, Ds});
  const std::size_t B = query.shape()[0], Tq = query.shape()[1];
  if (!self)
    check_shape("MultiheadAttention.forward key_value [B, Tk, d_model]", *key_value,
                {static_cast<long>(B), -1, Ds});
  const std::size_t Tk = self ? Tq : key_value->shape()[1];
  if (mask.key_padding)
    check_shape(self ? "MultiheadAttention.forward mask.key_padding [B, T]"
                     : "MultiheadAttention.forward mask.key_padding [B, Tk]",
                *mask.key_padding, {static_cast<long>(B), static_cast<long>(Tk)});
  if (rope_ && rope_->config().head_dim != head_dim_)  // set_rope checked it; the config may not change
    throw std::invalid_argument("MultiheadAttention.forward: rope head_dim = " +
                                std::to_string(rope_->config().head_dim) + "; must equal d_k = " +
                                std::to_string(head_dim_));
  check_parameters();

  has_forward_ = false;
  has_kv_grad_ = false;
  probs_ready_ = false;
  const std::size_t D = d_model_, h = n_heads_, dk = head_dim_, R = proj_rows();
  const std::size_t Nq = B * Tq, Nk = B * Tk, Bh = B * h;
  self_ = self;
  causal_ = mask.causal;
  rope_fwd_ = rope_;
  alibi_fwd_ = alibi_;
  rel_bias_fwd_ = rel_bias_;
  if (rel_bias_) rel_bias_->prepare(std::max(q_offset_ + Tq, k_offset_ + Tk));  // before the heads run
  q_off_fwd_ = q_offset_;
  k_off_fwd_ = k_offset_;
  mask_self_fwd_ = mask_self_ && self;
  normalize_keys_fwd_ = normalize_keys_;
  causal_prefix_fwd_ = causal_prefix_;
  head_mask_fwd_ = head_mask_;
  B_ = B;
  Tq_ = Tq;
  Tk_ = Tk;
  fused_ = uses_fused(Tq, Tk, mask.causal);
  has_pad_ = mask.key_padding != nullptr;
  if (has_pad_) {
    key_pad_.resize({B, Tk});
    std::memcpy(key_pad_.data(), mask.key_padding->data(), B * Tk);
  } else {
    release(key_pad_);
  }

  const float* W = in_proj_weight.value.data();
  const float* bias = in_proj_bias.value.data();
  if (take_query != nullptr) {
    xq_ = std::move(*take_query);  // query is not read after this
  } else {
    xq_.resize({B, Tq, D});
    detail::copy_floats(query.data(), Nq * D, xq_.data());
  }
  if (self) {
    release(xkv_);
    release(proj_kv_);
    // proj[N, R] = X W_inᵀ + b_in: q | k | v (shared_qk: qk | v) in one GEMM (rows split over
    // the thread budget, row_kernels.hpp affine_rows).
    proj_q_.resize({Nq, R});
    detail::affine_rows(xq_.data(), Nq, D, W, has_bias_ ? bias : nullptr, R, proj_q_.data());
  } else {
    // q = X_q W_Qᵀ + b_Q; [k | v] = X_kv [W_K; W_V]ᵀ + [b_K; b_V] (rows r0.. of the packed weight:
    // D for q|k|v, 0 for shared qk|v).
    const std::size_t r0 = shared_qk_ ? 0 : D;
    xkv_.resize({Nk, D});
    detail::copy_floats(key_value->data(), Nk * D, xkv_.data());
    proj_q_.resize({Nq, D});
    proj_kv_.resize({Nk, 2 * D});
    detail::affine_rows(xq_.data(), Nq, D, W, has_bias_ ? bias : nullptr, D, proj_q_.data());
    detail::affine_rows(xkv_.data(), Nk, D, W + r0 * D, has_bias_ ? bias + r0 : nullptr, 2 * D,
                        proj_kv_.data());
  }
  // RoFormer eq. 34 on every head (q at q_offset + t, k at k_offset + t) and Reformer's unit-length
  // keys, on contiguous [B, h, T, d_k] copies of the heads (V, and Q without RoPE, read in place).
  if (rope_) {
    const HeadMatrix q = projected('q');
    q_.resize({B, h, Tq, dk});
    split_heads(q.base, q.ld, 0, B, Tq, h, dk, q_.data());
    rope_->rotate(q_.data(), Bh, Tq, q_offset_, false);
  } else {
    release(q_);
  }
  if (rope_ || normalize_keys_) {
    const HeadMatrix k = projected('k');
    k_.resize({B, h, Tk, dk});
    split_heads(k.base, k.ld, 0, B, Tk, h, dk, k_.data());
    if (rope_) rope_->rotate(k_.data(), Bh, Tk, k_offset_, false);
  } else {
    release(k_);
  }
  if (normalize_keys_) {  // k̂ = k/‖k‖ per head and position (after RoPE, which keeps ‖k‖)
    k_norm_.resize({Bh, Tk});
    normalize_rows(k_.data(), Bh * Tk, dk, k_norm_.data());
  } else {
    release(k_norm_);
  }

  ctx_merged_.resize({B, Tq, D});
  if (fused_) {
    // Per head, the tiles of FlashAttention (fused_attention.hpp) write the head's columns of
    // ctx_merged_ and its row of lse_; no [Tq, Tk] matrix is kept.
    release(probs_);
    lse_.resize({Bh, Tq});
    attend_heads_fused();
  } else {
    // Per head (b, i): S = Q Kᵀ / √d_k ([Tq, d_k] x [d_k, Tk]) into probs_, the masked softmax in
    // place, then head_i = P_i V_i ([Tq, Tk] x [Tk, d_k]) while P_i is still in cache, written
    // straight into its columns of the concatenation ctx_merged_.
    release(lse_);
    probs_.resize({B, h, Tq, Tk});
    attend_heads();
    probs_ready_ = true;
    score_entries_ = Bh * Tq * Tk;
  }
  Tensor3 y = out_proj.forward_borrowed(ctx_merged_);  // ctx_merged_ is kept until the next forward
  has_forward_ = true;
  return y;
}

MultiheadAttention::HeadMatrix MultiheadAttention::projected(char which) const {
  const std::size_t D = d_model_, dk = head_dim_, R = proj_rows();
  const float* pq = proj_q_.data();
  if (self_) {  // proj_q_ [B·T, R]: q | k | v (shared_qk: qk | v)
    const std::size_t col = which == 'q' ? 0 : which == 'k' ? (shared_qk_ ? 0 : D) : R - D;
    return {pq + col, R, Tq_ * R, dk};
  }
  if (which == 'q') return {pq, D, Tq_ * D, dk};  // proj_q_ [B·Tq, D]
  const float* pkv = proj_kv_.data();  // proj_kv_ [B·Tk, 2D]: k | v
  return {pkv + (which == 'k' ? 0 : D), 2 * D, Tk_ * 2 * D, dk};
}

MultiheadAttention::HeadMatrix MultiheadAttention::head_input(char which) const {
  const std::size_t dk = head_dim_, h = n_heads_;
  if (rope_fwd_ && which == 'q') return {q_.data(), dk, h * Tq_ * dk, Tq_ * dk};
  if ((rope_fwd_ || normalize_keys_fwd_) && which == 'k') return {k_.data(), dk, h * Tk_ * dk, Tk_ * dk};
  return projected(which);
}

void MultiheadAttention::head_softmax(std::size_t g, float* P, const float* pad_bias, bool any_pad,
                                      std::vector<float>& panel) const {
  const std::size_t h = n_heads_, Tq = Tq_, Tk = Tk_, dk = head_dim_;
  const std::size_t b = g / h, i = g % h;
  const HeadMatrix Q = head_input('q'), K = head_input('k');
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  detail::head_gemm(false, true, Tq, Tk, dk, scale, Q.at(b, i), Q.ld, K.at(b, i), K.ld, 0.0f, P, Tk, panel);
  const float slope = alibi_fwd_ ? slopes_(i) : 0.0f;
  for (std::size_t r = 0; r < Tq; ++r) {
    float* row = P + r * Tk;
    std::size_t n = causal_ ? causal_limit(r, Tk, q_off_fwd_, k_off_fwd_) : Tk;
    if (causal_ && causal_prefix_fwd_ > k_off_fwd_)  // prefix keys visible to every query
      n = std::max(n, std::min(Tk, causal_prefix_fwd_ - k_off_fwd_));
    if (alibi_fwd_) {
      // −m·|pos_q − pos_k|; equal to the causal −m·(pos_q − pos_k) on the visible keys.
      const float pq = static_cast<float>(q_off_fwd_ + r);
      const float k0 = static_cast<float>(k_off_fwd_);
      for (std::size_t j = 0; j < n; ++j) row[j] -= slope * std::abs(pq - (k0 + static_cast<float>(j)));
    }
    if (rel_bias_fwd_) rel_bias_fwd_->add_row(i, q_off_fwd_ + r, k_off_fwd_, n, causal_, row);
    if (any_pad)
      for (std::size_t j = 0; j < n; ++j) row[j] += pad_bias[j];
    if (mask_self_fwd_ && q_off_fwd_ + r >= k_off_fwd_ && q_off_fwd_ + r - k_off_fwd_ < n) {
      // Reformer: no attention to the own position unless no other key is visible.
      const std::size_t js = q_off_fwd_ + r - k_off_fwd_;
      bool other = false;
      for (std::size_t j = 0; j < n && !other; ++j) other = j != js && row[j] != kNegInf;
      if (other) row[js] = kNegInf;
    }
    softmax_inplace(row, n);
    std::fill(row + n, row + Tk, 0.0f);  // causally masked keys
  }
}

void MultiheadAttention::attend_heads() {
  const std::size_t B = B_, h = n_heads_, Tq = Tq_, Tk = Tk_, dk = head_dim_, D = d_model_;
  const HeadMatrix V = head_input('v');
  // Heads g = b·h + i in parallel ranges (for_head_ranges); each head writes only its own
  // probability block and its own columns of ctx_merged_.
  for_head_ranges(B * h, head_threads(B * h), [&](std::size_t g0, std::size_t g1, std::size_t) {
    std::vector<float> pad_bias;  // 0 for a visible key, −∞ for a padded one
    std::vector<float> panel;     // head_gemm's packed operand (head_gemm.hpp)
    bool any_pad = false;
    for (std::size_t g = g0; g < g1; ++g) {
      const std::size_t b = g / h, i = g % h;
      if (has_pad_ && (g == g0 || i == 0))  // a new batch row: its key padding
        any_pad = padding_bias(key_pad_.data() + b * Tk, Tk, pad_bias);
      float* P = probs_.data() + g * Tq * Tk;
      head_softmax(g, P, pad_bias.data(), any_pad, panel);
      const float gate = head_mask_fwd_.empty() ? 1.0f : head_mask_fwd_[i];  // Michel et al.'s ξ_i
      detail::head_gemm(false, false, Tq, dk, Tk, gate, P, Tk, V.at(b, i), V.ld, 0.0f,
                        ctx_merged_.data() + b * Tq * D + i * dk, D, panel);
    }
  });
}

void MultiheadAttention::fill_probs() const {
  const std::size_t B = B_, h = n_heads_, Tq = Tq_, Tk = Tk_;
  probs_.resize({B, h, Tq, Tk});
  for_head_ranges(B * h, head_threads(B * h), [&](std::size_t g0, std::size_t g1, std::size_t) {
    std::vector<float> pad_bias, panel;
    bool any_pad = false;
    for (std::size_t g = g0; g < g1; ++g) {
      if (has_pad_ && (g == g0 || g % h == 0))
        any_pad = padding_bias(key_pad_.data() + (g / h) * Tk, Tk, pad_bias);
      head_softmax(g, probs_.data() + g * Tq * Tk, pad_bias.data(), any_pad, panel);
    }
  });
}

void MultiheadAttention::fused_head(std::size_t g, detail::FusedHead& fh) const {
  const std::size_t h = n_heads_, b = g / h, i = g % h;
  const HeadMatrix Q = head_input('q'), K = head_input('k'), V = head_input('v');
  fh.Tq = Tq_;
  fh.Tk = Tk_;
  fh.dk = head_dim_;
  fh.q = Q.at(b, i);
  fh.ldq = Q.ld;
  fh.k = K.at(b, i);
  fh.ldk = K.ld;
  fh.v = V.at(b, i);
  fh.ldv = V.ld;
  fh.scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  fh.causal = causal_;
  fh.q_offset = q_off_fwd_;
  fh.k_offset = k_off_fwd_;
  fh.key_padded = has_pad_ ? key_pad_.data() + b * Tk_ : nullptr;
  fh.alibi = alibi_fwd_;
  fh.slope = alibi_fwd_ ? slopes_(i) : 0.0f;
}

void MultiheadAttention::attend_heads_fused() {
  const std::size_t B = B_, h = n_heads_, Tq = Tq_, dk = head_dim_, D = d_model_, Bh = B * h;
  const std::size_t threads = head_threads(Bh);
  std::vector<std::size_t> entries(threads, 0);  // score entries per head thread, summed after
  for_head_ranges(Bh, threads, [&](std::size_t g0, std::size_t g1, std::size_t w) {
    detail::FusedScratch scratch;
    detail::FusedHead fh;
    for (std::size_t g = g0; g < g1; ++g) {
      fused_head(g, fh);
      const std::size_t b = g / h, i = g % h;
      entries[w] += detail::fused_forward_head(fh, ctx_merged_.data() + b * Tq * D + i * dk, D,
                                               lse_.data() + g * Tq, scratch);
    }
  });
  score_entries_ = 0;
  for (std::size_t e : entries) score_entries_ += e;
}

void MultiheadAttention::backward_heads_fused(const Tensor3& dctx_merged, const GradMatrix& dQ, const GradMatrix& dK,
                                              bool dk_adds, const GradMatrix& dV) {
  const std::size_t B = B_, h = n_heads_, Tq = Tq_, d = head_dim_, D = d_model_, Bh = B * h;
  for_head_ranges(Bh, head_threads(Bh), [&](std::size_t g0, std::size_t g1, std::size_t) {
    detail::FusedScratch scratch;
    detail::FusedHead fh;
    for (std::size_t g = g0; g < g1; ++g) {
      fused_head(g, fh);
      const std::size_t b = g / h, i = g % h;
      const std::size_t col = b * Tq * D + i * d;  // head (b, i) in ctx_merged_ and dctx_merged
      detail::fused_backward_head(fh, ctx_merged_.data() + col, D, dctx_merged.data() + col, D,
                                  lse_.data() + g * Tq, dQ.at(b, i), dQ.ld, dK.at(b, i), dK.ld, dk_adds,
                                  dV.at(b, i), dV.ld, scratch);
    }
  });
}

void MultiheadAttention::backward_heads_materialised(const Tensor3& dctx_merged, const HeadMatrix& Q,
                                                     const HeadMatrix& K, const HeadMatrix& V, const GradMatrix& dQ,
                                                     const GradMatrix& dK, float beta_k, const GradMatrix& dV) {
  const std::size_t B = B_, Tq = Tq_, Tk = Tk_, D = d_model_, h = n_heads_, dk = head_dim_, Bh = B * h;
  // Per head (b, i), with one [Tq, Tk] scratch for dL/dP, then dL/dS in place:
  //   head = P V  ->  dP = dhead Vᵀ ([Tq, d_k] x [d_k, Tk]);  dV = Pᵀ dhead ([Tk, Tq] x [Tq, d_k]);
  //   P = softmax(S)  ->  dS = P ⊙ (dP − rowsum(dP ⊙ P)) (masked entries: P = 0 -> dS = 0);
  //   S = Q Kᵀ / √d_k  ->  dQ = dS K / √d_k;  dK = dSᵀ Q / √d_k.
  // dhead is read in place from its columns of dctx_merged [B, Tq, D]. Computed in the order dP,
  // dS, dV, dQ, dK (dV reads only P and dhead; why it comes after dS: below).
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // Heads in parallel ranges as in the forward (for_head_ranges), one scratch per thread; each
  // head writes only its own columns of dproj (dK on dQ's columns with shared W_Q = W_K: the same
  // head, so the same thread, after its dQ).
  const std::size_t threads = head_threads(Bh);
  dprobs_.resize({threads * Tq, Tk});
  // Relative bias: dL/dweight per head (b, i) into its own slots, summed below in head order.
  const std::size_t n_buckets = rel_bias_fwd_ ? rel_bias_fwd_->num_buckets() : 0;
  if (rel_bias_fwd_) rel_slots_.assign(Bh * n_buckets, 0.0f);
  for_head_ranges(Bh, threads, [&](std::size_t g0, std::size_t g1, std::size_t w) {
    float* G = dprobs_.data() + w * Tq * Tk;
    std::vector<float> panel;  // head_gemm's packed operand (head_gemm.hpp)
    for (std::size_t g = g0; g < g1; ++g) {
      const std::size_t b = g / h, i = g % h;
      const float* P = probs_.data() + g * Tq * Tk;
      const float* dhead = dctx_merged.data() + b * Tq * D + i * dk;
      // head_i enters the concatenation as ξ_i·P V (set_head_mask): dP and dV carry ξ_i.
      const float gate = head_mask_fwd_.empty() ? 1.0f : head_mask_fwd_[i];
      detail::head_gemm(false, true, Tq, Tk, dk, gate, dhead, D, V.at(b, i), V.ld, 0.0f, G, Tk, panel);
      // The softmax's backward before dV: it reads P row by row, in order, which brings P (kept
      // since the forward, so out of cache) in at the streaming rate; dV = Pᵀ dhead then reads P
      // from cache (six neighbouring floats of a row per step, moving down the rows Tk floats
      // apart) rather than from memory at that stride.
      for (std::size_t r = 0; r < Tq; ++r) {
        const float* p = P + r * Tk;
        float* gr = G + r * Tk;
        const float s = dot(p, gr, Tk);
        for (std::size_t j = 0; j < Tk; ++j) gr[j] = p[j] * (gr[j] - s);
        // S = ... + bias[bucket]  ->  dbias[bucket] += dS (masked keys: dS = 0, skipped).
        if (rel_bias_fwd_)
          rel_bias_fwd_->accumulate_row(q_off_fwd_ + r, k_off_fwd_,
                                        causal_ ? causal_limit(r, Tk, q_off_fwd_, k_off_fwd_) : Tk, causal_, gr,
                                        rel_slots_.data() + g * n_buckets);
      }
      detail::head_gemm(true, false, Tk, dk, Tq, gate, P, Tk, dhead, D, 0.0f, dV.at(b, i), dV.ld, panel);
      detail::head_gemm(false, false, Tq, dk, Tk, scale, G, Tk, K.at(b, i), K.ld, 0.0f, dQ.at(b, i), dQ.ld, panel);
      detail::head_gemm(true, false, Tk, dk, Tq, scale, G, Tk, Q.at(b, i), Q.ld, beta_k, dK.at(b, i), dK.ld,
                        panel);
    }
  });
  if (rel_bias_fwd_)  // in head order g = b·h + i, whatever the thread split
    for (std::size_t g = 0; g < Bh; ++g) rel_bias_fwd_->add_head_grad(g % h, rel_slots_.data() + g * n_buckets);
}

Tensor3 MultiheadAttention::backward(const Tensor3& dy) {
  if (!has_forward_) throw std::logic_error("MultiheadAttention.backward called before forward");
  const std::size_t B = B_, Tq = Tq_, Tk = Tk_, D = d_model_, h = n_heads_, dk = head_dim_, R = proj_rows();
  const std::size_t Nq = B * Tq, Nk = B * Tk, Bh = B * h;
  check_shape("MultiheadAttention.backward dy [B, Tq, d_model]", dy,
              {static_cast<long>(B), static_cast<long>(Tq), static_cast<long>(D)});
  check_parameters();
  has_kv_grad_ = false;

  // y = ctx_merged W_Oᵀ + b_O  ->  dctx_merged; out_proj.{weight, bias}.grad added by Linear.
  const Tensor3 dctx_merged = out_proj.backward(dy);

  // Where the head gradients go: straight into their columns of dproj (the gradient of the
  // projection output, same layout as proj_q_ / proj_kv_), or, with RoPE, into contiguous
  // [B, h, T, d_k] blocks that are rotated back (dq = Rᵀ dq̃) and then merged.
  float* Wg = in_proj_weight.grad.data();
  float* bg = in_proj_bias.grad.data();
  if (self_) {
    dproj_q_.resize({Nq, R});
  } else {
    dproj_q_.resize({Nq, D});
    dproj_kv_.resize({Nk, 2 * D});
  }
  const bool k_copied = rope_fwd_ || normalize_keys_fwd_;  // K read from the copy k_ (head_input)
  if (rope_fwd_) dq_.resize({B, h, Tq, dk});
  if (k_copied) dk_.resize({B, h, Tk, dk});
  // The same offsets as projected(which), in the gradient buffers.
  const auto in_dproj = [&](char which) -> GradMatrix {
    const HeadMatrix m = projected(which);
    const bool q_buffer = self_ || which == 'q';
    const float* base = q_buffer ? proj_q_.data() : proj_kv_.data();
    float* dbase = q_buffer ? dproj_q_.data() : dproj_kv_.data();
    return {dbase + (m.base - base), m.ld, m.stride_b, m.stride_h};
  };
  const HeadMatrix Q = head_input('q'), K = head_input('k'), V = head_input('v');
  const GradMatrix dV = in_dproj('v');
  const GradMatrix dQ = rope_fwd_ ? GradMatrix{dq_.data(), dk, h * Tq * dk, Tq * dk} : in_dproj('q');
  const GradMatrix dK = k_copied ? GradMatrix{dk_.data(), dk, h * Tk * dk, Tk * dk} : in_dproj('k');
  // Self-attention with W_Q = W_K, K read in place: dK lands on dQ's columns, dQK = dQ + dK.
  const float beta_k = self_ && shared_qk_ && !k_copied ? 1.0f : 0.0f;

  if (fused_) {
    // FlashAttention's backward per head (fused_attention.hpp): the same gradients, P recomputed
    // tile by tile from Q, K and the log-sum-exp lse_.
    release(dprobs_);
    backward_heads_fused(dctx_merged, dQ, dK, beta_k != 0.0f, dV);
  } else {
    backward_heads_materialised(dctx_merged, Q, K, V, dQ, dK, beta_k, dV);
  }
  // k̂ = k̃/‖k̃‖  ->  dk̃ = (dk̂ − k̂ (k̂·dk̂))/‖k̃‖; then q̃ = R q  ->  dq = Rᵀ dq̃ (same for k);
  // then into dproj's columns (dQ is there already without RoPE).
  if (normalize_keys_fwd_) normalize_rows_backward(dk_.data(), k_.data(), Bh * Tk, dk, k_norm_.data());
  if (rope_fwd_) {
    rope_fwd_->rotate(dq_.data(), Bh, Tq, q_off_fwd_, true);
    rope_fwd_->rotate(dk_.data(), Bh, Tk, k_off_fwd_, true);
    const GradMatrix pq = in_dproj('q');
    merge_heads(dq_.data(), B, Tq, h, dk, pq.base, pq.ld, 0, false);
  }
  if (k_copied) {
    const GradMatrix pk = in_dproj('k');
    merge_heads(dk_.data(), B, Tk, h, dk, pk.base, pk.ld, 0, self_ && shared_qk_);  // shared: dQ + dK
  }

  const float* W = in_proj_weight.value.data();
  Tensor3 dx({B, Tq, D});
  if (self_) {
    // proj = X W_inᵀ + b_in  ->  dW_in += dprojᵀ X;  db_in += Σ_rows dproj;  dX = dproj W_in.
    gemm_split(true, false, R, D, Nq, 1.0f, dproj_q_.data(), R, xq_.data(), D, 1.0f, Wg, D);
    if (has_bias_) detail::add_column_sums(dproj_q_.data(), Nq, R, bg);
    gemm_split_rows(false, false, Nq, D, R, 1.0f, dproj_q_.data(), R, W, D, 0.0f, dx.data(), D);
  } else {
    const std::size_t r0 = shared_qk_ ? 0 : D;
    // q = X_q W_Qᵀ + b_Q: rows 0..D-1 of the packed weight.
    gemm_split(true, false, D, D, Nq, 1.0f, dproj_q_.data(), D, xq_.data(), D, 1.0f, Wg, D);
    // [k | v] = X_kv W_{r0..r0+2D}ᵀ + b: rows r0.. (shared: the qk rows get dQ and dK both).
    gemm_split(true, false, 2 * D, D, Nk, 1.0f, dproj_kv_.data(), 2 * D, xkv_.data(), D, 1.0f,
               Wg + r0 * D, D);
    if (has_bias_) {
      detail::add_column_sums(dproj_q_.data(), Nq, D, bg);
      detail::add_column_sums(dproj_kv_.data(), Nk, 2 * D, bg + r0);
    }
    gemm_split_rows(false, false, Nq, D, D, 1.0f, dproj_q_.data(), D, W, D, 0.0f, dx.data(), D);
    dkv_.resize({B, Tk, D});
    gemm_split_rows(false, false, Nk, D, 2 * D, 1.0f, dproj_kv_.data(), 2 * D, W + r0 * D, D, 0.0f,
                    dkv_.data(), D);
    has_kv_grad_ = true;
  }
  return dx;
}

const Tensor3& MultiheadAttention::key_value_grad() const {
  if (has_forward_ && self_)
    throw std::logic_error(
        "MultiheadAttention.key_value_grad: the last forward was self-attention; backward returned the "
        "total dL/dx");
  if (!has_kv_grad_)
    throw std::logic_error("MultiheadAttention.key_value_grad: no backward after a cross-attention forward");
  return dkv_;
}

const Tensor4& MultiheadAttention::attention_probs() const {
  if (!has_forward_) throw std::logic_error("MultiheadAttention.attention_probs: no forward has run");
  if (!probs_ready_) {  // after a fused forward: the materialised scores and softmax, once
    fill_probs();
    probs_ready_ = true;
  }
  return probs_;
}

bool MultiheadAttention::uses_fused(std::size_t seq_len_q, std::size_t seq_len_k, bool causal) const {
  // The fused kernel has none of these: materialised only.
  if (rel_bias_ || mask_self_ || causal_prefix_ > 0 || !head_mask_.empty()) return false;
  switch (kernel_) {
    case AttentionKernel::fused: return true;
    case AttentionKernel::materialised: return false;
    case AttentionKernel::automatic: break;
  }
  return std::min(seq_len_q, seq_len_k) >= (causal ? kFusedAttentionMinSeqLenCausal : kFusedAttentionMinSeqLen);
}

bool MultiheadAttention::last_forward_fused() const {
  if (!has_forward_) throw std::logic_error("MultiheadAttention.last_forward_fused: no forward has run");
  return fused_;
}

std::size_t MultiheadAttention::activation_bytes() const {
  if (!has_forward_) return 0;
  // Buffers the last forward did not use were released (run_forward), so every one counts.
  std::size_t n = bytes_of(xq_) + bytes_of(xkv_) + bytes_of(proj_q_) + bytes_of(proj_kv_) + bytes_of(q_) +
                  bytes_of(k_) + bytes_of(k_norm_) + bytes_of(key_pad_) + bytes_of(ctx_merged_);
  return n + (fused_ ? bytes_of(lse_) : bytes_of(probs_));
}

double MultiheadAttention::logit_asymmetry() const {
  if (!has_forward_) throw std::logic_error("MultiheadAttention.logit_asymmetry: no forward has run");
  if (!self_)
    throw std::logic_error("MultiheadAttention.logit_asymmetry: the last forward was cross-attention; "
                           "defined for self-attention only");
  const std::size_t B = B_, h = n_heads_, T = Tq_, dk = head_dim_;
  if (B * h == 0 || T == 0) return 0.0;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const HeadMatrix Q = head_input('q'), K = head_input('k');
  std::vector<float> S(T * T), panel;
  double total = 0.0;
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t i = 0; i < h; ++i) {  // the forward's scores, bit for bit
      detail::head_gemm(false, true, T, T, dk, scale, Q.at(b, i), Q.ld, K.at(b, i), K.ld, 0.0f, S.data(), T,
                        panel);
      if (alibi_fwd_) {
        const double m = slopes_(i);
        for (std::size_t r = 0; r < T; ++r)
          for (std::size_t c = 0; c < T; ++c) {
            const double dist = static_cast<double>(q_off_fwd_ + r) - static_cast<double>(k_off_fwd_ + c);
            S[r * T + c] -= static_cast<float>(m * (causal_ ? dist : std::abs(dist)));
          }
      }
      if (rel_bias_fwd_)
        for (std::size_t r = 0; r < T; ++r) rel_bias_fwd_->add_row(i, q_off_fwd_ + r, k_off_fwd_, T, causal_, &S[r * T]);
      double num = 0.0, den = 0.0;
      for (std::size_t r = 0; r < T; ++r)
        for (std::size_t c = 0; c < T; ++c) {
          const double s = S[r * T + c], d = s - S[c * T + r];
          num += d * d;
          den += s * s;
        }
      total += den > 0.0 ? std::sqrt(num / den) : 0.0;
    }
  }
  return total / static_cast<double>(B * h);
}

}  // namespace seqlab

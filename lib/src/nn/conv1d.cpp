#include "seqlab/nn/conv1d.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "seqlab/core/gemm.hpp"
#include "seqlab/core/threads.hpp"
#include "narrow_gemm.hpp"
#include "row_kernels.hpp"
#include "tap_gemm.hpp"

namespace seqlab {
namespace {

std::size_t nonzero(const char* what, std::size_t v) {
  if (v == 0) throw std::invalid_argument(std::string("Conv1d: ") + what + " = 0; must be >= 1");
  return v;
}

template <class S>
bool same_shape(const S& shape, const std::vector<std::size_t>& want) {
  return std::equal(shape.begin(), shape.end(), want.begin(), want.end());
}

}  // namespace

Conv1d::Conv1d(std::size_t in_channels, std::size_t out_channels, std::size_t kernel_size, Rng& rng,
               std::size_t dilation, bool causal, bool bias_)
    : weight("weight", {nonzero("out_channels", out_channels), nonzero("in_channels", in_channels),
                        nonzero("kernel_size", kernel_size)}),
      bias("bias", {bias_ ? out_channels : std::size_t{0}}),
      weight_g("weight_g", {0, 1, 1}),
      weight_v("weight_v", {0, in_channels, kernel_size}),
      in_(in_channels),
      out_(out_channels),
      k_(kernel_size),
      d_(nonzero("dilation", dilation)),
      causal_(causal),
      has_bias_(bias_) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_ * k_));
  rng.fill_uniform(weight.value, -bound, bound);
  if (has_bias_) rng.fill_uniform(bias.value, -bound, bound);
}

void Conv1d::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  if (weight_norm_) {
    if (has_bias_) out.push_back({prefix + bias.name, &bias});
    out.push_back({prefix + weight_g.name, &weight_g});
    out.push_back({prefix + weight_v.name, &weight_v});
  } else {
    out.push_back({prefix + weight.name, &weight});
    if (has_bias_) out.push_back({prefix + bias.name, &bias});
  }
}

void Conv1d::apply_weight_norm() {
  if (weight_norm_) throw std::logic_error("Conv1d.apply_weight_norm: weight norm already applied");
  check_parameters();
  Parameter g("weight_g", {out_, 1, 1});
  Parameter v("weight_v", {out_, in_, k_});
  const std::size_t per = in_ * k_;
  const float* w = weight.value.data();
  for (std::size_t o = 0; o < out_; ++o) {
    double s = 0.0;
    for (std::size_t i = 0; i < per; ++i) s += double(w[o * per + i]) * w[o * per + i];
    if (s == 0.0)
      throw std::logic_error("Conv1d.apply_weight_norm: output channel " + std::to_string(o) +
                             " has an all-zero weight; ‖v‖ = 0 is not allowed");
    g.value.data()[o] = static_cast<float>(std::sqrt(s));
  }
  std::copy_n(w, out_ * per, v.value.data());
  weight_g = std::move(g);
  weight_v = std::move(v);
  weight.zero_grad();
  weight_norm_ = true;
}

void Conv1d::check_parameters() const {
  const std::vector<std::size_t> ws{out_, in_, k_};
  const std::vector<std::size_t> bs{has_bias_ ? out_ : 0};
  auto check = [](const Parameter& p, const std::vector<std::size_t>& want) {
    if (!same_shape(p.value.shape(), want) || !same_shape(p.grad.shape(), want))
      throw ShapeError("Conv1d." + p.name + ": expected shape " + shape_string(want) + ", got value " +
                       shape_string(p.value.shape()) + ", grad " + shape_string(p.grad.shape()));
  };
  if (weight_norm_) {
    check(weight_g, {out_, 1, 1});
    check(weight_v, ws);
    if (!same_shape(weight.value.shape(), ws))  // derived; its grad is unused
      throw ShapeError("Conv1d.weight: expected shape " + shape_string(ws) + ", got " +
                       shape_string(weight.value.shape()));
  } else {
    check(weight, ws);
  }
  check(bias, bs);
}

// weight [out, in, k] (derived as g·v/‖v‖ under weight norm) -> wp_ [out, k·in] (forward) and
// wq_ [k·out, in] (backward to x).
void Conv1d::pack_weight() {
  const std::size_t per = in_ * k_;
  if (weight_norm_) {
    vnorm_.resize({out_});
    const float* v = weight_v.value.data();
    float* w = weight.value.data();
    for (std::size_t o = 0; o < out_; ++o) {
      double s = 0.0;
      for (std::size_t i = 0; i < per; ++i) s += double(v[o * per + i]) * v[o * per + i];
      const double n = std::sqrt(s);
      if (n == 0.0)
        throw std::domain_error("Conv1d.forward: weight_v of output channel " + std::to_string(o) +
                                " is all zero; weight norm divides by ‖v‖");
      vnorm_(o) = static_cast<float>(n);
      const double scale = double(weight_g.value.data()[o]) / n;
      for (std::size_t i = 0; i < per; ++i) w[o * per + i] = static_cast<float>(scale * v[o * per + i]);
    }
  }
  wp_.resize({out_, per});
  wq_.resize({k_ * out_, in_});
  const float* w = weight.value.data();
  for (std::size_t o = 0; o < out_; ++o)
    for (std::size_t c = 0; c < in_; ++c)
      for (std::size_t j = 0; j < k_; ++j) {
        const float v = w[(o * in_ + c) * k_ + j];
        wp_(o, j * in_ + c) = v;
        wq_(j * out_ + o, c) = v;
      }
}

std::size_t Conv1d::chunk_rows() const {
  const std::size_t width = k_ * std::max(in_, out_);  // floats per row of either column matrix
  const std::size_t by_bytes = kChunkBytes / (sizeof(float) * width);
  // OpenBLAS packs the [out, k·in] (or [k·out, in]) weights once per block, as much as the columns
  // of max(in, out) rows: kWeightPackRatio times that many rows keep it a small share.
  const std::size_t by_weights = kWeightPackRatio * std::max(in_, out_);
  const std::size_t rows = std::max(by_bytes, by_weights) / kSplitGemmRowBlock * kSplitGemmRowBlock;
  return std::max(kSplitGemmRowBlock, rows);
}

namespace {

/// How copy_rows moves a row of w floats.
enum class RowCopy { scalar, two_moves, moves };

/// dst[i·ldd + c] = src[i·lds + c] for i < rows, c < w: rows of w floats (lds = 0 repeats one row).
/// Rows of a few channels are the common case (TCNs of 8–64 channels), so a row is copied with
/// 8-float moves rather than a memcpy call: `moves` for w >= 8 (the last move overlapping the one
/// before when w is not a multiple of 8), `two_moves` for 8 <= w <= 16 (the first and the last 8
/// floats, no loop), `scalar` for w < 8.
template <RowCopy How>
void copy_rows_as(const float* src, std::size_t lds, std::size_t w, std::size_t ldd, std::size_t rows,
                  float* dst) {
  constexpr std::size_t kMove = 8 * sizeof(float);
  for (std::size_t i = 0; i < rows; ++i, src += lds, dst += ldd) {
    if constexpr (How == RowCopy::two_moves) {
      std::memcpy(dst, src, kMove);
      std::memcpy(dst + w - 8, src + w - 8, kMove);
    } else if constexpr (How == RowCopy::moves) {
      std::size_t c = 0;
      for (; c + 8 <= w; c += 8) std::memcpy(dst + c, src + c, kMove);
      if (c < w) std::memcpy(dst + w - 8, src + w - 8, kMove);
    } else {
      for (std::size_t c = 0; c < w; ++c) dst[c] = src[c];
    }
  }
}

void copy_rows(const float* src, std::size_t lds, std::size_t w, std::size_t ldd, std::size_t rows,
               float* dst) {
  if (w < 8)
    copy_rows_as<RowCopy::scalar>(src, lds, w, ldd, rows, dst);
  else if (w <= 16)
    copy_rows_as<RowCopy::two_moves>(src, lds, w, ldd, rows, dst);
  else
    copy_rows_as<RowCopy::moves>(src, lds, w, ldd, rows, dst);
}

/// C[M, N] = op(A) · op(B) + beta · C as gemm (core/gemm.hpp): a product of at most
/// kNarrowWidth columns (convolutions of few channels) through narrow_gemm (narrow_gemm.hpp: op(B)
/// the small operand, packed into `panel`, the caller's per-thread scratch; the unfolded rows read
/// in place), wider ones through gemm.
void conv_gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, const float* A,
               std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc,
               std::vector<float>& panel) {
  if (N <= detail::kNarrowWidth) detail::narrow_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, panel);
  else gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

/// dst[i·kw + c] = 0 for i < rows, c < w.
void zero_rows(std::size_t w, std::size_t kw, std::size_t rows, float* dst) {
  for (std::size_t i = 0; i < rows; ++i) std::fill_n(dst + i * kw, w, 0.0f);
}

/// Runs body(c0, c1, worker) over the row blocks [0, blocks) in `parts` contiguous ranges, each on
/// its own thread with OpenBLAS at one thread (as for_gemm_rows in core/gemm.hpp splits a GEMM's
/// rows); with one part a plain call body(0, blocks, 0), OpenBLAS's thread count unchanged.
template <class Body>
void for_row_blocks(std::size_t blocks, std::size_t parts, Body&& body) {
  if (parts <= 1) {
    body(std::size_t{0}, blocks, std::size_t{0});
    return;
  }
  BlasThreadsScope one(1);
  parallel_ranges(blocks, parts, body);
}

/// Whether a convolution runs on the tap tiles (tap_gemm.hpp) instead of im2col blocks: both
/// channel counts within one tile (kNarrowWidth), the taps' depth k·max(in, out) within one panel
/// (kHeadKC), k > 1 (k = 1 reads x in place anyway), and the taps' span (k−1)·d at most T, so that
/// a block's window (its rows and the span) is not mostly padding.
bool use_taps(std::size_t k, std::size_t in, std::size_t out, std::size_t d, std::size_t T) {
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  return k > 1 && in <= detail::kNarrowWidth && out <= detail::kNarrowWidth &&
         k * std::max(in, out) <= detail::kHeadKC && (k - 1) * d <= T;
#else
  (void)k, (void)in, (void)out, (void)d, (void)T;
  return false;
#endif
}

/// dst[i·w + c] = seq[s0 + i, c] for i < count, c < w, 0 where s0 + i is outside [0, T): a window
/// of one sequence's rows (seq [T, w]) with its zero padding.
void window_rows(const float* seq, std::size_t T, std::size_t w, long s0, std::size_t count, float* dst) {
  const long lo = std::clamp(-s0, 0L, static_cast<long>(count));
  const long hi = std::clamp(static_cast<long>(T) - s0, lo, static_cast<long>(count));
  std::fill_n(dst, static_cast<std::size_t>(lo) * w, 0.0f);
  std::memcpy(dst + lo * w, seq + (s0 + lo) * static_cast<long>(w),
              static_cast<std::size_t>(hi - lo) * w * sizeof(float));
  std::fill_n(dst + hi * w, (count - static_cast<std::size_t>(hi)) * w, 0.0f);
}

/// The rows s0 .. s0 + count − 1 of one sequence (seq [T, w]) as a readable block: seq itself where
/// they all lie in [0, T), else a window_rows copy in `scratch` (the zero padding).
const float* rows_from(const float* seq, std::size_t T, std::size_t w, long s0, std::size_t count, float* scratch) {
  if (s0 >= 0 && s0 + static_cast<long>(count) <= static_cast<long>(T)) return seq + s0 * static_cast<long>(w);
  window_rows(seq, T, w, s0, count, scratch);
  return scratch;
}

/// Calls run(a, b) for the pieces of [t0, t1) cut at the points `cuts` (those inside it), in order:
/// the rows whose windows need padding are cut off from those read in place.
template <std::size_t N, class Run>
void for_pieces(std::size_t t0, std::size_t t1, std::array<long, N> cuts, Run&& run) {
  std::sort(cuts.begin(), cuts.end());
  std::size_t a = t0;
  for (long c : cuts)
    if (c > static_cast<long>(a) && c < static_cast<long>(t1)) {
      run(a, static_cast<std::size_t>(c));
      a = static_cast<std::size_t>(c);
    }
  if (a < t1) run(a, t1);
}

/// Calls seg(b, t0, t1) for the runs of rows r = b·T + t in [r0, r1) that lie in one sequence.
template <class Seg>
void for_segments(std::size_t T, std::size_t r0, std::size_t r1, Seg&& seg) {
  for (std::size_t r = r0; r < r1;) {
    const std::size_t b = r / T, t0 = r - b * T, t1 = std::min(T, t0 + (r1 - r));
    seg(b, t0, t1);
    r += t1 - t0;
  }
}

}  // namespace

// cols[r − r0, j·w + c] = src[b, t + off + j·step, c] for the rows r = b·T + t in [r0, r1), 0 where
// the time index is outside [0, T). src is [B, T, w], cols [r1 − r0, k·w]. Tap by tap over each
// sequence's rows in the block: the rows whose source is inside the sequence are one run.
void Conv1d::unfold(const float* src, std::size_t w, long off, long step, std::size_t r0,
                    std::size_t r1, float* cols) const {
  const std::size_t kw = k_ * w;
  const long T = static_cast<long>(T_);
  for (std::size_t r = r0; r < r1;) {
    const std::size_t b = r / T_;
    const long t0 = static_cast<long>(r - b * T_);  // rows [t0, t1) of sequence b
    const long t1 = std::min(T, t0 + static_cast<long>(r1 - r));
    const float* seq = src + b * T_ * w;
    float* rows = cols + (r - r0) * kw;  // row t0
    for (std::size_t j = 0; j < k_; ++j) {
      const long shift = off + static_cast<long>(j) * step;  // row t reads source row t + shift
      const long lo = std::clamp(-shift, t0, t1), hi = std::clamp(T - shift, lo, t1);
      float* tap = rows + j * w;
      const auto at = [&](long t) { return tap + static_cast<std::size_t>(t - t0) * kw; };
      zero_rows(w, kw, static_cast<std::size_t>(lo - t0), at(t0));
      if (hi > lo)
        copy_rows(seq + static_cast<std::size_t>(lo + shift) * w, w, w, kw, static_cast<std::size_t>(hi - lo), at(lo));
      zero_rows(w, kw, static_cast<std::size_t>(t1 - hi), at(hi));
    }
    r += static_cast<std::size_t>(t1 - t0);
  }
}

Tensor3 Conv1d::forward(const Tensor3& x) {
  check_shape("Conv1d.forward: x", x, {-1, -1, static_cast<long>(in_)});
  check_parameters();
  pack_weight();
  x_ = x;
  return forward_cached();
}

Tensor3 Conv1d::forward(Tensor3&& x) {
  check_shape("Conv1d.forward: x", x, {-1, -1, static_cast<long>(in_)});
  check_parameters();
  pack_weight();
  x_ = std::move(x);
  return forward_cached();
}

Tensor3 Conv1d::forward_cached() {
  B_ = x_.shape()[0];
  T_ = x_.shape()[1];
  const std::size_t n = B_ * T_, kin = k_ * in_, P = left_padding();
  cached_ = true;

  // y[rows, out] = cols[rows, k·in] · W̃ᵀ (+ bias), one block of rows at a time (k = 1 has P = 0
  // and reads x itself: cols = x).
  Tensor3 y({B_, T_, out_});
  const bool direct = k_ == 1;
  const std::size_t rows = chunk_rows(), blocks = (n + rows - 1) / rows;
  const std::size_t parts = std::min(blocks, gemm_row_parts(n, out_, kin));
  std::vector<std::unique_ptr<float[]>> scratch(direct ? 0 : parts);  // uninitialised: unfold writes all
  for (auto& buf : scratch) buf.reset(new float[rows * kin]);
  std::vector<std::vector<float>> panels(parts);  // conv_gemm's per-thread scratch
  const float* px = x_.data();
  float* py = y.data();
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  if (use_taps(k_, in_, out_, d_, T_)) {
    // y[b, t] = bias + Σ_j Σ_c win[t − t0 + j·d, c] · W̃[o, j·in + c], win = x[b, t0 − P ..]: read in
    // place where the run's rows and span lie inside the sequence, else one window of
    // (rows + (k−1)·d) x in floats with its zero padding (rows_from), not k copies.
    using V = detail::NarrowBatch;
    std::vector<float> wpanel;  // op(B) = W̃ᵀ [k·in, out], shared by the threads
    detail::pack_head_panel(true, kin, out_, wp_.data(), kin, wpanel, 2 * V::size);
    const std::size_t span = (k_ - 1) * d_;
    std::vector<std::vector<float>> win(parts, std::vector<float>((rows + span) * in_));
    for_row_blocks(blocks, parts, [&](std::size_t c0, std::size_t c1, std::size_t worker) {
      for (std::size_t c = c0; c < c1; ++c) {
        const std::size_t r0 = c * rows, r1 = std::min(n, r0 + rows), m = r1 - r0;
        if (has_bias_)
          copy_rows(bias.value.data(), 0, out_, out_, m, py + r0 * out_);
        else
          std::fill_n(py + r0 * out_, m * out_, 0.0f);
        // Rows t read x[t − P .. t − P + (k−1)·d]: in place for t in [P, T + P − (k−1)·d).
        const long Pl = static_cast<long>(P), Tl = static_cast<long>(T_), sl = static_cast<long>(span);
        for_segments(T_, r0, r1, [&](std::size_t b, std::size_t t0, std::size_t t1) {
          for_pieces<2>(t0, t1, {Pl, Tl + Pl - sl}, [&](std::size_t a, std::size_t e) {
            const float* src = rows_from(px + b * T_ * in_, T_, in_, static_cast<long>(a) - Pl, e - a + span,
                                         win[worker].data());
            detail::tap_gemm_rows<V>(e - a, out_, k_, in_, static_cast<std::ptrdiff_t>(d_ * in_), src, in_,
                                     wpanel.data(), 1.0f, py + (b * T_ + a) * out_, out_);
          });
        });
      }
    });
    return y;
  }
#endif
  for_row_blocks(blocks, parts, [&](std::size_t c0, std::size_t c1, std::size_t worker) {
    for (std::size_t c = c0; c < c1; ++c) {
      const std::size_t r0 = c * rows, r1 = std::min(n, r0 + rows), m = r1 - r0;
      const float* cols = px + r0 * in_;
      if (!direct) {
        unfold(px, in_, -static_cast<long>(P), static_cast<long>(d_), r0, r1, scratch[worker].get());
        cols = scratch[worker].get();
      }
      // beta = 1 onto the bias rows (or zeros): no BLAS scaling pass over C
      if (has_bias_)
        copy_rows(bias.value.data(), 0, out_, out_, m, py + r0 * out_);
      else
        std::fill_n(py + r0 * out_, m * out_, 0.0f);
      conv_gemm(false, true, m, out_, kin, cols, kin, wp_.data(), kin, 1.0f, py + r0 * out_, out_, panels[worker]);
    }
  });
  return y;
}

Tensor3 Conv1d::backward(const Tensor3& dy) {
  if (!cached_) throw std::logic_error("Conv1d.backward: called before forward");
  check_shape("Conv1d.backward: dy", dy,
              {static_cast<long>(B_), static_cast<long>(T_), static_cast<long>(out_)});
  check_parameters();
  const std::size_t n = B_ * T_, kout = k_ * out_, per = in_ * k_, P = left_padding();
  const float* pdy = dy.data();
  const float* px = x_.data();

  // Per block of rows [r0, r1), from one unfolded block of dy:
  //   dcols[u, j·out + o] = dy[b, u + P − j·d, o] (0 outside [0, T)): x[u] enters y[u + P − j·d]
  //   through tap j, so
  //   dx[r0:r1] = dcols · W̃q       (dx[u] = Σ_j W_jᵀ dy[u + P − j·d]; one GEMM, no scatter-add)
  //   dW̃q_block = dcolsᵀ · x[r0:r1] (dW[o, c, j] = Σ_u dy[u + P − j·d, o] x[u, c]; the
  //                                  blocks' products are added in block order afterwards)
  const bool direct = k_ == 1;
  const std::size_t rows = chunk_rows(), blocks = (n + rows - 1) / rows;
  const std::size_t parts = std::min(blocks, gemm_row_parts(n, in_, kout));
  std::vector<std::vector<float>> panels(parts);  // conv_gemm's per-thread scratch
  std::vector<float> dwq_blocks(blocks * kout * in_, 0.0f);  // beta = 1 onto zeros: no BLAS scaling pass
  Tensor3 dx({B_, T_, in_});
  float* pdx = dx.data();
  std::vector<double> dwq(kout * in_, 0.0);  // dW̃q = Σ_blocks dW̃q_block (double)
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
  if (use_taps(k_, in_, out_, d_, T_)) {
    // Per run of rows [u0, u1) of sequence b, with the windows dywin = dy[b, u0 + P − (k−1)·d ..]
    // and xwin = x[b, u0 − P ..] (rows + (k−1)·d each; read in place where they lie inside the
    // sequence, else copied with their zero padding: rows_from):
    //   dx[u] = Σ_j' Σ_o dywin[u − u0 + j'·d, o] · W[o, c, k−1−j']   (j' = k−1−j: one tap product)
    //   dW_j[c, o] += Σ_t xwin[t − u0 + j·d, c] · dy[t, o]            (dy packed once, x read shifted)
    // dW_j per block in [k, in, out], the blocks added in block order as below.
    using V = detail::NarrowBatch;
    const std::size_t span = (k_ - 1) * d_;
    std::vector<float> wr(kout * in_);  // W̃q with the taps reversed: row j'·out + o = W[o, :, k−1−j']
    for (std::size_t j = 0; j < k_; ++j)
      std::copy_n(wq_.data() + (k_ - 1 - j) * out_ * in_, out_ * in_, wr.data() + j * out_ * in_);
    std::vector<float> dxpanel;
    detail::pack_head_panel(false, kout, in_, wr.data(), in_, dxpanel, 2 * V::size);
    std::vector<std::vector<float>> dywin(parts, std::vector<float>((rows + span) * out_));
    std::vector<std::vector<float>> xwin(parts, std::vector<float>((rows + span) * in_));
    for_row_blocks(blocks, parts, [&](std::size_t c0, std::size_t c1, std::size_t worker) {
      for (std::size_t c = c0; c < c1; ++c) {
        const std::size_t r0 = c * rows, r1 = std::min(n, r0 + rows);
        float* dwb = dwq_blocks.data() + c * kout * in_;  // [k, in, out]
        // Rows u read dy[u + P − (k−1)·d .. u + P] for dx (in place for u in [(k−1)·d − P, T − P))
        // and x[u − P .. u − P + (k−1)·d] for dW (in place for u in [P, T + P − (k−1)·d)).
        const long Pl = static_cast<long>(P), Tl = static_cast<long>(T_), sl = static_cast<long>(span);
        for_segments(T_, r0, r1, [&](std::size_t b, std::size_t s0, std::size_t s1) {
          for_pieces<4>(s0, s1, {sl - Pl, Tl - Pl, Pl, Tl + Pl - sl}, [&](std::size_t u0, std::size_t u1) {
            const std::size_t m = u1 - u0;
            const float* dyw = rows_from(pdy + b * T_ * out_, T_, out_, static_cast<long>(u0) + Pl - sl, m + span,
                                         dywin[worker].data());
            const float* xw = rows_from(px + b * T_ * in_, T_, in_, static_cast<long>(u0) - Pl, m + span,
                                        xwin[worker].data());
            detail::tap_gemm_rows<V>(m, in_, k_, out_, static_cast<std::ptrdiff_t>(d_ * out_), dyw, out_,
                                     dxpanel.data(), 0.0f, pdx + (b * T_ + u0) * in_, in_);
            const float* dyrows = pdy + (b * T_ + u0) * out_;
            for (std::size_t k0 = 0; k0 < m; k0 += detail::kHeadKC) {
              const std::size_t kc = std::min(detail::kHeadKC, m - k0);
              detail::pack_head_panel(false, kc, out_, dyrows + k0 * out_, out_, panels[worker], 2 * V::size);
              for (std::size_t j = 0; j < k_; ++j)
                detail::head_gemm_rows<true, V>(in_, out_, kc, 1.0f, xw + (k0 + j * d_) * in_, in_,
                                                panels[worker].data(), 1.0f, dwb + j * in_ * out_, out_);
            }
          });
        });
      }
    });
    for (std::size_t c = 0; c < blocks; ++c) {
      const float* part = dwq_blocks.data() + c * kout * in_;
      for (std::size_t j = 0; j < k_; ++j)
        for (std::size_t ci = 0; ci < in_; ++ci)
          for (std::size_t o = 0; o < out_; ++o)
            dwq[(j * out_ + o) * in_ + ci] += part[(j * in_ + ci) * out_ + o];
    }
  } else
#endif
  {
    std::vector<std::unique_ptr<float[]>> scratch(direct ? 0 : parts);  // uninitialised: unfold writes all
    for (auto& buf : scratch) buf.reset(new float[rows * kout]);
    for_row_blocks(blocks, parts, [&](std::size_t c0, std::size_t c1, std::size_t worker) {
      for (std::size_t c = c0; c < c1; ++c) {
        const std::size_t r0 = c * rows, r1 = std::min(n, r0 + rows), m = r1 - r0;
        const float* dcols = pdy + r0 * out_;
        if (!direct) {
          unfold(pdy, out_, static_cast<long>(P), -static_cast<long>(d_), r0, r1, scratch[worker].get());
          dcols = scratch[worker].get();
        }
        conv_gemm(true, false, kout, in_, m, dcols, kout, px + r0 * in_, in_, 1.0f,
                  dwq_blocks.data() + c * kout * in_, in_, panels[worker]);
        // narrow products do not read C at beta = 0; OpenBLAS's beta = 0 is a scaling pass of its own,
        // so it gets beta = 1 onto zeros, as above
        const bool narrow = in_ <= detail::kNarrowWidth;
        if (!narrow) std::fill_n(pdx + r0 * in_, m * in_, 0.0f);
        conv_gemm(false, false, m, in_, kout, dcols, kout, wq_.data(), in_, narrow ? 0.0f : 1.0f, pdx + r0 * in_,
                  in_, panels[worker]);
      }
    });

    // dW̃q = Σ_blocks dW̃q_block (double)
    for (std::size_t c = 0; c < blocks; ++c) {
      const float* part = dwq_blocks.data() + c * kout * in_;
      for (std::size_t i = 0; i < kout * in_; ++i) dwq[i] += part[i];
    }
  }
  // dW̃q unpacked to dW [out, in, k]
  const auto dw_at = [&](std::size_t o, std::size_t c, std::size_t j) { return dwq[(j * out_ + o) * in_ + c]; };
  if (!weight_norm_) {
    float* gw = weight.grad.data();
    for (std::size_t o = 0; o < out_; ++o)
      for (std::size_t c = 0; c < in_; ++c)
        for (std::size_t j = 0; j < k_; ++j) gw[(o * in_ + c) * k_ + j] += static_cast<float>(dw_at(o, c, j));
  } else {
    // weight = g v/‖v‖  ->  dg = Σ dW·v/‖v‖;  dv = (g/‖v‖)(dW − (Σ dW·v)/‖v‖² · v)
    const float* v = weight_v.value.data();
    float* gv = weight_v.grad.data();
    float* gg = weight_g.grad.data();
    std::vector<double> dw(per);
    for (std::size_t o = 0; o < out_; ++o) {
      double dot = 0.0;
      for (std::size_t c = 0; c < in_; ++c)
        for (std::size_t j = 0; j < k_; ++j) {
          const std::size_t i = c * k_ + j;
          dw[i] = dw_at(o, c, j);
          dot += dw[i] * v[o * per + i];
        }
      const double nrm = vnorm_(o), g = weight_g.value.data()[o];
      gg[o] += static_cast<float>(dot / nrm);
      const double a = g / nrm, c2 = dot / (nrm * nrm);
      for (std::size_t i = 0; i < per; ++i)
        gv[o * per + i] += static_cast<float>(a * (dw[i] - c2 * v[o * per + i]));
    }
  }

  // y = ... + bias  ->  dbias = Σ_rows dy (double partial sums over fixed row blocks)
  if (has_bias_) detail::add_column_sums(pdy, n, out_, bias.grad.data());
  return dx;
}

}  // namespace seqlab

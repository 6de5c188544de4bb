#pragma once
// Element-wise and row-reduction kernels of the layers, run on the thread budget with
// parallel_for (core/threads.hpp) between the layers' GEMMs. Internal header, included as
// "row_kernels.hpp" by linear.cpp, attention.cpp, feed_forward.cpp, norm.cpp, dropout.cpp,
// recurrent_base.cpp and transformer_layer.cpp.
//
// Plain copies stay on one thread: they are memory-bound, and when this was measured a second
// thread for them competed with OpenBLAS's idle worker, which spins after every multi-threaded
// GEMM (experiments/bench/README.md). Bias-row fills run inside the row ranges of for_gemm_rows
// (core/gemm.hpp), on the thread that then computes those rows.
//
// Results do not depend on the thread budget: element-wise kernels write each element once, and
// add_column_sums sums fixed blocks of kSumBlockRows rows into double partials that are added in
// block order, whatever thread computed each block.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "seqlab/core/gemm.hpp"
#include "seqlab/core/threads.hpp"
#include "narrow_gemm.hpp"

namespace seqlab::detail {

/// Elements per thread below which a kernel stays on one thread (a thread start costs about
/// 20-50 µs, the time of a few 100k float operations).
constexpr std::size_t kElementGrain = std::size_t{1} << 16;
/// Rows per block of add_column_sums.
constexpr std::size_t kSumBlockRows = 64;

/// Rows per thread for row kernels of width w: kElementGrain elements' worth, at least 1.
inline std::size_t row_grain(std::size_t w) { return std::max<std::size_t>(1, kElementGrain / std::max<std::size_t>(w, 1)); }

/// dst[0..n) = src[0..n).
inline void copy_floats(const float* src, std::size_t n, float* dst) {
  std::memcpy(dst, src, n * sizeof(float));
}

/// out[i] = x[i] + y[i], i < n (out may alias x or y).
inline void add_floats(const float* x, const float* y, std::size_t n, float* out) {
  parallel_for(n, kElementGrain, [&](std::size_t a, std::size_t b, std::size_t) {
    for (std::size_t i = a; i < b; ++i) out[i] = x[i] + y[i];
  });
}

/// dst[r, :] = row[0..w) for r < n (dst rows of stride w).
inline void fill_rows(float* dst, std::size_t n, const float* row, std::size_t w) {
  for (std::size_t r = 0; r < n; ++r) std::memcpy(dst + r * w, row, w * sizeof(float));
}

/// y[n, out] = x[n, in] · Wᵀ + b (b broadcast over rows; no bias when b is null), W [out, in] with
/// rows of stride `in`: the affine map of Linear and of MultiheadAttention's in-projection. The
/// rows are split over the thread budget (for_gemm_rows, core/gemm.hpp); each range fills its bias
/// rows and then accumulates the product onto them (beta = 1: no zeroing pass). At most
/// kNarrowWidth outputs (an output head over few classes) go through narrow_gemm.
inline void affine_rows(const float* x, std::size_t n, std::size_t in, const float* W, const float* b,
                        std::size_t out, float* y) {
  for_gemm_rows(n, out, in, [&](std::size_t r0, std::size_t r1) {
    if (b) fill_rows(y + r0 * out, r1 - r0, b, out);
    const float beta = b ? 1.0f : 0.0f;
    if (out <= kNarrowWidth) {
      std::vector<float> panel;
      narrow_gemm(false, true, r1 - r0, out, in, x + r0 * in, in, W, in, beta, y + r0 * out, out, panel);
    } else {
      gemm(false, true, r1 - r0, out, in, 1.0f, x + r0 * in, in, W, in, beta, y + r0 * out, out);
    }
  });
}

/// Lanes of the double row reductions below: kReduceLanes independent partial sums over the first
/// n − n mod kReduceLanes terms (lane l takes the terms j ≡ l mod kReduceLanes), added in lane
/// order, then the n mod kReduceLanes tail terms one by one. A fixed order, so a row gives the same
/// bits wherever it is computed; the independent partials let the compiler vectorize the loop,
/// which one serial double sum does not allow.
constexpr std::size_t kReduceLanes = 8;

/// Σ_{j<n} f(j) in double over kReduceLanes partial sums (f returns double).
template <class F>
inline double lane_sum(std::size_t n, F&& f) {
  double acc[kReduceLanes] = {};
  std::size_t j = 0;
  for (; j + kReduceLanes <= n; j += kReduceLanes)
    for (std::size_t l = 0; l < kReduceLanes; ++l) acc[l] += f(j + l);
  double s = 0.0;
  for (std::size_t l = 0; l < kReduceLanes; ++l) s += acc[l];
  for (; j < n; ++j) s += f(j);
  return s;
}

/// out[j] += Σ_{r<n} src[r·w + j] for j < w, after row_op(r) has run on each row r < n: row_op may
/// rewrite row r of src in place first (FeedForward's activation gradient, whose rows are then
/// summed while still in cache: one pass instead of two). row_op runs on several threads at once
/// (each row once, rows of a kSumBlockRows block on one thread) and must touch only row r. Each block of kSumBlockRows rows is
/// summed row by row into a double partial, the partials are added in block order, and the total
/// is added to out as float once (the same result for every thread budget, and the same bits as
/// row_op over all rows followed by add_column_sums).
template <class RowOp>
inline void add_column_sums_after(const float* src, std::size_t n, std::size_t w, float* out, RowOp&& row_op) {
  const std::size_t blocks = (n + kSumBlockRows - 1) / kSumBlockRows;
  std::vector<double> partial(blocks * w, 0.0);
  parallel_for(blocks, std::max<std::size_t>(1, row_grain(w) / kSumBlockRows),
               [&](std::size_t b0, std::size_t b1, std::size_t) {
                 for (std::size_t blk = b0; blk < b1; ++blk) {
                   double* acc = partial.data() + blk * w;
                   const std::size_t r1 = std::min(n, (blk + 1) * kSumBlockRows);
                   for (std::size_t r = blk * kSumBlockRows; r < r1; ++r) {
                     row_op(r);
                     const float* row = src + r * w;
                     for (std::size_t j = 0; j < w; ++j) acc[j] += row[j];
                   }
                 }
               });
  for (std::size_t j = 0; j < w; ++j) {
    double s = 0.0;
    for (std::size_t blk = 0; blk < blocks; ++blk) s += partial[blk * w + j];
    out[j] += static_cast<float>(s);
  }
}

/// out[j] += Σ_{r<n} src[r·w + j] for j < w (add_column_sums_after with no row_op).
inline void add_column_sums(const float* src, std::size_t n, std::size_t w, float* out) {
  add_column_sums_after(src, n, w, out, [](std::size_t) {});
}

}  // namespace seqlab::detail

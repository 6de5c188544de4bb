#pragma once
// The adding problem in the version of Bai, Kolter & Koltun 2018, "An Empirical Evaluation of
// Generic Convolutional and Recurrent Networks for Sequence Modeling" (arXiv 1803.01271), §4
// "The adding problem", generated as their code does (locuslab/TCN, TCN/adding_problem/utils.py,
// data_generator): every input step has two channels,
//
//   x[b, t, 0] = a value drawn from U[0, 1)
//   x[b, t, 1] = 1 at exactly two positions p_1 != p_2 (drawn without replacement from all T
//                positions, as np.random.choice(T, 2, replace=False)), 0 elsewhere
//   y[b]       = x[b, p_1, 0] + x[b, p_2, 0]        (one regression target per sequence)
//
// and the model is scored by the mean squared error of its prediction of y (read at the last step).
// (Hochreiter & Schmidhuber 1997 put one marker in the first tenth; Le et al. 2015 one in each half;
// Bai et al., and this class, place both anywhere.)
//
// Baselines (predictors that ignore the markers, i.e. the dependency):
//   - the constant E[y] = 1, the baseline Bai et al. quote: MSE Var(y) = 2 · Var(U[0, 1)) = 2/12 =
//     1/6 ≈ 0.1667 (baseline_mse());
//   - the best such predictor, which still sees the values: E[y | values] = 2·mean(values) (both
//     positions are uniform), with MSE E[Var(y | values)] = Var(y) − Var(2·mean) = 1/6 − 1/(3T)
//     by the law of total variance (markerless_mse(); 0.1661 at Bai et al.'s T = 600, 0.1458 at
//     T = 16). A model that averages the values without finding the markers reaches it.
// Values are 24-bit floats (Rng::uniform), so E[u] = (1 − 2^-24)/2: the baseline differs from 1/6
// by less than 1e-7.
//
// Dependency distance of a sequence: (T − 1) − min(p_1, p_2), the number of steps the earlier
// marked value must be carried to the step where y is read.
//
// Legend: B batch, T seq_len().
#include <array>
#include <cstddef>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"

namespace seqlab {

/// A batch of real-valued sequences with one regression target per sequence.
struct AddingBatch {
  Tensor3 inputs;   // [B, T, 2]: channel 0 the values, channel 1 the two markers
  Tensor2 targets;  // [B, 1]: the sum of the two marked values
  std::vector<std::array<int, 2>> positions;  // [B] the marked positions (p_1, p_2) in draw order
};

class AddingProblem {
 public:
  /// `seq_len` T >= 2 (two distinct positions). Throws std::invalid_argument naming seq_len.
  explicit AddingProblem(int seq_len);

  int seq_len() const { return seq_len_; }
  /// Input channels per step: 2 (value, marker).
  static constexpr int input_size() { return 2; }

  /// Draws `batch` sequences (>= 1; throws std::invalid_argument for 0). Per row, in this order:
  /// the T values left to right, each rng.uniform(); then p_1 = uniform_int(T) and
  /// p_2 = uniform_int(T − 1), incremented by one if >= p_1 (two distinct positions, every
  /// ordered pair equally likely). Deterministic given the rng state, the same on every platform.
  AddingBatch sample(std::size_t batch, Rng& rng) const;

  /// (T − 1) − min(p_1, p_2) of one row of a batch (file comment); in [1, T − 1].
  int dependency_distance(const std::array<int, 2>& positions) const;

  /// The prediction of the best predictor that ignores the markers: E[y] = 1.
  static double baseline_prediction() { return 1.0; }
  /// Its mean squared error: Var(y) = 1/6 (file comment).
  static double baseline_mse() { return 1.0 / 6.0; }
  /// MSE of the best predictor that ignores the markers, 2·mean(values): 1/6 − 1/(3T)
  /// (file comment).
  double markerless_mse() const { return 1.0 / 6.0 - 1.0 / (3.0 * seq_len_); }

 private:
  int seq_len_;
};

}  // namespace seqlab

#pragma once
// Reader for the PyTorch fixtures in tests/golden/*.json, written by tests/golden/make_fixtures.py.
// Format: {"meta": {...}, "tensors": {"<key>": {"shape": [..], "data": [flat row-major values]}}}.
// Values are float64 references (PyTorch run in double); tests compare float32 results to them.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xarray.hpp>

namespace seqlab::test {

class Fixture {
 public:
  /// Loads tests/golden/<file>. Throws std::runtime_error naming the path if missing or malformed.
  explicit Fixture(const std::string& file);
  /// The tensor under `key` as a float array of its stored shape; throws naming a missing key.
  xt::xarray<float> tensor(const std::string& key) const;
  xt::xarray<double> tensor_f64(const std::string& key) const;
  bool has(const std::string& key) const;
  const nlohmann::json& meta() const { return meta_; }

 private:
  std::string path_;
  nlohmann::json tensors_;
  nlohmann::json meta_;
};

/// Tolerances of the PyTorch-parity tests, float32 results against float64 references:
/// |actual - expected| <= atol + rtol·|expected|. Forward values and backward gradients.
inline constexpr double kFwdRtol = 1e-5, kFwdAtol = 1e-6;
inline constexpr double kBwdRtol = 1e-4, kBwdAtol = 1e-5;

/// A tensor's elements in row-major order (gradient-check outputs).
template <class T>
std::vector<float> flat(const T& t) {
  return std::vector<float>(t.begin(), t.end());
}

/// Element-wise |actual - expected| <= atol + rtol·|expected| over equal shapes. The message
/// gives the worst element (index, both values) and the max abs / rel error; empty when ok.
std::string compare_close(const xt::xarray<float>& actual, const xt::xarray<double>& expected,
                          double rtol, double atol);

}  // namespace seqlab::test

#include "fixtures.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "seqlab/core/tensor.hpp"

namespace seqlab::test {

Fixture::Fixture(const std::string& file) : path_(std::string(SEQLAB_GOLDEN_DIR) + "/" + file) {
  std::ifstream in(path_);
  if (!in) throw std::runtime_error("fixture not found: " + path_);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("fixture " + path_ + " is not valid JSON: " + e.what());
  }
  if (!j.contains("tensors")) throw std::runtime_error("fixture " + path_ + " has no \"tensors\"");
  tensors_ = j["tensors"];
  meta_ = j.value("meta", nlohmann::json::object());
}

bool Fixture::has(const std::string& key) const { return tensors_.contains(key); }

xt::xarray<double> Fixture::tensor_f64(const std::string& key) const {
  if (!has(key)) throw std::runtime_error("fixture " + path_ + " has no tensor \"" + key + "\"");
  const auto& t = tensors_[key];
  std::vector<std::size_t> shape = t.at("shape").get<std::vector<std::size_t>>();
  std::vector<double> data = t.at("data").get<std::vector<double>>();
  xt::xarray<double> out = xt::zeros<double>(shape);
  if (out.size() != data.size())
    throw std::runtime_error("fixture " + path_ + " tensor \"" + key + "\": shape and data disagree");
  std::copy(data.begin(), data.end(), out.begin());
  return out;
}

xt::xarray<float> Fixture::tensor(const std::string& key) const {
  return xt::cast<float>(tensor_f64(key));
}

std::string compare_close(const xt::xarray<float>& actual, const xt::xarray<double>& expected,
                          double rtol, double atol) {
  if (actual.shape() != expected.shape()) {
    return "shape mismatch: actual " + shape_string(actual.shape()) + ", expected " +
           shape_string(expected.shape());
  }
  double worst_excess = 0.0, max_abs = 0.0, max_rel = 0.0;
  std::size_t worst = 0;
  bool ok = true;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual.data()[i], e = expected.data()[i];
    const double err = std::abs(a - e);
    if (!std::isfinite(a)) {
      ok = false;
      worst = i;
      worst_excess = INFINITY;
      break;
    }
    max_abs = std::max(max_abs, err);
    if (e != 0.0) max_rel = std::max(max_rel, err / std::abs(e));
    const double excess = err - (atol + rtol * std::abs(e));
    if (excess > 0) ok = false;
    if (excess > worst_excess || (i == 0)) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (ok) return "";
  std::ostringstream m;
  m.precision(9);
  m << "worst element at flat index " << worst << ": actual " << actual.data()[worst] << ", expected "
    << expected.data()[worst] << " (rtol " << rtol << ", atol " << atol << "); max abs err " << max_abs
    << ", max rel err " << max_rel;
  return m.str();
}

}  // namespace seqlab::test

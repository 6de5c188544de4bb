#pragma once
// Catch2 helpers shared by the layer tests: a fixture comparison that fails with the worst
// element, and a copy of a flat vector into a tensor of the same size.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fixtures.hpp"

namespace seqlab::test {

/// REQUIREs |actual - expected| <= atol + rtol·|expected| element-wise; the failure message names
/// `what` and the worst element (compare_close).
inline void require_close(const std::string& what, const xt::xarray<float>& actual,
                          const xt::xarray<double>& expected, double rtol, double atol) {
  const std::string msg = compare_close(actual, expected, rtol, atol);
  INFO(what << ": " << msg);
  REQUIRE(msg.empty());
}

/// Copies `v` into `t` in row-major order; REQUIREs equal sizes.
template <class T>
void copy_into(const std::vector<float>& v, T& t) {
  REQUIRE(v.size() == t.size());
  std::copy(v.begin(), v.end(), t.begin());
}

}  // namespace seqlab::test

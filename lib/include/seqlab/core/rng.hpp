#pragma once
// Portable seeded random numbers. Standard-library distributions differ between compilers and
// library versions, so seqlab draws everything from this generator: the same seed gives the same
// numbers on every platform (normal draws rely on std::log/std::sqrt/std::cos in double, which are
// correctly rounded in glibc; other libms may differ in the last bit).
//
// Engine: xoshiro256** (Blackman & Vigna 2018, https://prng.di.unimi.it/), seeded through
// SplitMix64 (Steele, Lea & Flood 2014).
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "seqlab/core/tensor.hpp"

namespace seqlab {

/// Derives an independent seed from a base seed and up to three stream indices (cell index,
/// replicate, purpose...). Rule: SplitMix64 applied to base, then folding each index in with
/// x = splitmix64(x ^ (index + 0x9E3779B97F4A7C15 * (k + 1))) for the k-th index.
std::uint64_t derive_seed(std::uint64_t base, std::uint64_t a, std::uint64_t b = 0,
                          std::uint64_t c = 0);

class Rng {
 public:
  explicit Rng(std::uint64_t seed);

  /// Next raw 64-bit value.
  std::uint64_t next_u64();
  /// Uniform float in [0, 1): the top 24 bits of next_u64() times 2^-24.
  float uniform();
  /// Uniform float in [lo, hi).
  float uniform(float lo, float hi);
  /// Uniform double in [0, 1) with 53 random bits.
  double uniform_double();
  /// Standard normal (mean 0, sd 1) by the Box–Muller transform in double; one value per call
  /// (the second of each pair is cached).
  float normal();
  float normal(float mean, float stddev);
  /// Uniform integer in [0, n), unbiased (Lemire 2019 multiply-and-reject). Throws
  /// std::invalid_argument if n == 0.
  std::uint64_t uniform_int(std::uint64_t n);
  /// Uniform integer in [lo, hi] inclusive. Throws std::invalid_argument if lo > hi.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);
  /// Fisher–Yates shuffle of `v` in place.
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) {
      const std::size_t j = static_cast<std::size_t>(uniform_int(static_cast<std::uint64_t>(i)));
      std::swap(v[i - 1], v[j]);
    }
  }
  /// Fills `t` with U[lo, hi) (PyTorch's nn.init.uniform_ semantics), in row-major order.
  template <class E>
  void fill_uniform(E& t, float lo, float hi) {
    for (auto& x : t) x = uniform(lo, hi);
  }
  /// Fills `t` with N(mean, stddev²), in row-major order.
  template <class E>
  void fill_normal(E& t, float mean, float stddev) {
    for (auto& x : t) x = normal(mean, stddev);
  }

  /// Full generator state (for checkpoints): four engine words plus the cached normal.
  struct State {
    std::array<std::uint64_t, 4> s;
    bool has_spare;
    double spare;
  };
  State state() const;
  void set_state(const State& st);

 private:
  std::array<std::uint64_t, 4> s_{};
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace seqlab

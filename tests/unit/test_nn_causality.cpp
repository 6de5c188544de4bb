// Causality of the recurrent layers (seqlab::RNN, GRU, LSTM): the output at step s depends only
// on inputs at steps <= s. Changing x at step t must leave every output before t bit-for-bit
// unchanged (the input-projection GEMM runs over all steps at once, so a leak through a wrong
// row offset or stride would show here) and must change some output at or after t.
// Also checked: the other batch rows do not change at all.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <string>

#include "seqlab/core/rng.hpp"
#include "seqlab/nn/gru.hpp"
#include "seqlab/nn/lstm.hpp"
#include "seqlab/nn/rnn.hpp"

using namespace seqlab;

namespace {

/// `f` maps x [B, T, D] -> out [B, T, H]. For every t, perturbs x[1, t, :] by +0.7 and checks
/// out[:, s < t, :] and out[0, :, :] unchanged (exact) and out[1, s >= t, :] changed somewhere.
void check_causal(const std::function<Tensor3(const Tensor3&)>& f, std::size_t D, Rng& rng) {
  const std::size_t B = 3, T = 7;
  Tensor3 x({B, T, D});
  rng.fill_normal(x, 0.0f, 1.0f);
  const Tensor3 base = f(x);
  const std::size_t H = base.shape()[2];
  REQUIRE(base.shape()[0] == B);
  REQUIRE(base.shape()[1] == T);
  for (std::size_t t = 0; t < T; ++t) {
    INFO("input changed at t = " << t);
    Tensor3 x2 = x;
    for (std::size_t i = 0; i < D; ++i) x2(1, t, i) += 0.7f;
    const Tensor3 out = f(x2);
    std::size_t changed_before = 0, changed_other_rows = 0;
    double change_after = 0.0;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t s = 0; s < T; ++s)
        for (std::size_t j = 0; j < H; ++j) {
          const bool same = out(b, s, j) == base(b, s, j);  // bit-exact
          if (s < t) changed_before += !same;
          if (b != 1) changed_other_rows += !same;
          if (b == 1 && s >= t) change_after = std::max(change_after, std::abs(double(out(b, s, j)) - base(b, s, j)));
        }
    CHECK(changed_before == 0);
    CHECK(changed_other_rows == 0);
    CHECK(change_after > 1e-4);
  }
}

}  // namespace

TEST_CASE("RNN GRU and LSTM outputs before t do not depend on the input at t", "[nn][causality]") {
  const std::size_t D = 3, H = 4, L = 2;
  Rng rng(17);
  SECTION("RNN tanh") {
    RNN rnn(D, H, L, rng, Nonlinearity::tanh);
    check_causal([&](const Tensor3& x) { return rnn.forward(x); }, D, rng);
  }
  SECTION("RNN relu") {
    RNN rnn(D, H, L, rng, Nonlinearity::relu);
    check_causal([&](const Tensor3& x) { return rnn.forward(x); }, D, rng);
  }
  SECTION("GRU") {
    GRU gru(D, H, L, rng);
    check_causal([&](const Tensor3& x) { return gru.forward(x); }, D, rng);
  }
  SECTION("LSTM") {
    LSTM lstm(D, H, L, rng);
    check_causal([&](const Tensor3& x) { return lstm.forward(x); }, D, rng);
  }
}

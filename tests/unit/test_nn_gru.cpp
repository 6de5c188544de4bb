// Tests of seqlab::GRU (lib/include/seqlab/nn/gru.hpp): parameter layout and init, finite
// differences, PyTorch parity (tests/golden/gen_rnn_gru.py), where the reset gate applies,
// hidden-gradient norms, repeated use and errors. Shared checks: recurrent_checks.hpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "recurrent_checks.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/gru.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;

namespace {

auto make_gru = [](std::size_t D, std::size_t H, std::size_t L, Rng& rng) { return GRU(D, H, L, rng); };

}  // namespace

TEST_CASE("GRU parameter names shapes and default init match PyTorch", "[nn][gru]") {
  test::check_parameter_layout<GRU>(make_gru, 3);
}

TEST_CASE("GRU gradients match finite differences", "[nn][gru][gradcheck]") {
  // hidden_size 21 runs the fused per-step loops on SIMD batches (16 or 8 lanes) and a scalar
  // tail; 29 also on one batch of half the width between them (16 + 8 + 5, or 3 x 8 + 4 + 1);
  // 5 runs them on the tail alone.
  for (const std::size_t H : {std::size_t{5}, std::size_t{21}, std::size_t{29}}) {
    DYNAMIC_SECTION("hidden_size " << H) {
      Rng rng(3);
      const std::size_t B = 2, T = 4, D = 3, L = 2;
      GRU gru(D, H, L, rng);
      // Parameters wider than the default U(-1/sqrt(H), 1/sqrt(H)) so gates leave their linear range.
      for (auto* p : gru.parameters()) rng.fill_uniform(p->value, -0.9f, 0.9f);
      Tensor3 x = test::random3(B, T, D, rng);
      Tensor3 h0 = test::random3(L, B, H, rng);
      const auto res = test::gradcheck_all(gru, x, h0);
      INFO("checked " << res.checked << ", max abs err " << res.max_abs_err << ", worst " << res.worst << "\n"
                      << res.report);
      REQUIRE(res.ok);
    }
  }
}

TEST_CASE("GRU matches torch.nn.GRU fixtures", "[nn][gru][golden]") {
  // Tolerances (in check_fixture): forward rtol 1e-5 atol 1e-6, backward rtol 1e-4 atol 1e-5.
  for (const std::string name : {"gru.json", "gru_l3.json", "gru_h21.json"}) {
    DYNAMIC_SECTION("fixture " << name) {
      const test::Fixture fx(name);
      const auto& meta = fx.meta();
      const std::size_t D = meta.at("input_size"), H = meta.at("hidden_size"), L = meta.at("num_layers");
      Rng rng(1);
      GRU gru(D, H, L, rng);
      test::check_fixture(gru, fx, name);
    }
  }
}

TEST_CASE("GRU applies the reset gate after the hidden matmul", "[nn][gru]") {
  // Field report: hidden size 1, input contribution 0 (W_ih = 0, b_ih = 0), h0 = 1, W_hr = 0 and
  // b_hr = 0 so r = σ(0) = 0.5 exactly, W_hn = 2, b_hn = 1.
  //   PyTorch / cuDNN: n = tanh(W_in x + b_in + r·(W_hn h + b_hn)) = tanh(0.5·(2·1 + 1)) = 0.905148
  //   reset before the matmul (Cho et al. 2014 eq. 8): n = tanh(W_hn (r·h) + b_hn) = tanh(2·0.5 + 1)
  //     = 0.964028
  // With b_hz = -100, z = σ(-100) = 0 in float, so h_1 = n; with b_hz = +100, z = 1 and h_1 = h0
  // exactly. Rows of every weight and bias are r, z, n.
  Rng rng(5);
  const Tensor3 x = xt::xtensor<float, 3>({{{0.3f}, {-2.0f}}});  // any input: W_ih = 0
  const Tensor3 h0 = xt::ones<float>({1, 1, 1});
  auto make = [&](float z_bias) {
    GRU gru(1, 1, 1, rng);
    for (auto* p : gru.parameters()) p->value.fill(0.0f);
    gru.weight_hh(0).value = xt::xtensor<float, 2>({{0.0f}, {0.0f}, {2.0f}});
    gru.bias_hh(0).value = xt::xarray<float>({0.0f, z_bias, 1.0f});
    return gru;
  };

  SECTION("z = 0: h_1 = n = tanh(r (W_hn h + b_hn))") {
    GRU gru = make(-100.0f);
    const Tensor3 out = gru.forward(x, &h0);
    const float n = out(0, 0, 0);
    CHECK_THAT(n, WithinAbs(0.905148, 1e-6));
    CHECK(std::abs(n - 0.964028f) > 0.05f);
  }
  SECTION("z = 1: h_t = h_{t-1} exactly") {
    GRU gru = make(100.0f);
    const Tensor3 out = gru.forward(x, &h0);
    CHECK(out(0, 0, 0) == 1.0f);
    CHECK(out(0, 1, 0) == 1.0f);
    CHECK(gru.final_state()(0, 0, 0) == 1.0f);
  }
}

TEST_CASE("GRU hidden_grad_norms are the norms of the total gradient reaching h_t", "[nn][gru]") {
  test::check_hidden_grad_norms<GRU>(make_gru);
  test::check_hidden_grad_norms<GRU>(make_gru, 21);
  test::check_hidden_grad_norms_range<GRU>(make_gru);
}

TEST_CASE("GRU forward is stateless across calls and backward adds into grads", "[nn][gru]") {
  test::check_stateless_and_additive<GRU>(make_gru);
}

TEST_CASE("GRU rejects bad shapes and misuse", "[nn][gru][errors]") {
  test::check_errors<GRU>(make_gru);
}

TEST_CASE("GRU time-major forward and backward give the bits of forward and backward", "[nn][gru]") {
  test::check_time_major<GRU>(make_gru);
}

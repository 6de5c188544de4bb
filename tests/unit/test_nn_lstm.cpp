// Tests of seqlab::LSTM (lib/include/seqlab/nn/lstm.hpp): parameter layout and init, finite
// differences, PyTorch parity (tests/golden/gen_lstm.py), gate order, hidden-gradient norms,
// repeated use, and errors. Shared checks (state (h, c) as the parts of an LSTMState):
// recurrent_checks.hpp.
#include <catch2/catch.hpp>

#include <string>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "recurrent_checks.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/lstm.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;

namespace {

auto make_lstm = [](std::size_t D, std::size_t H, std::size_t L, Rng& rng) { return LSTM(D, H, L, rng); };

}  // namespace

TEST_CASE("LSTM parameter names shapes and default init match PyTorch", "[nn][lstm]") {
  // Every parameter has >= 20 draws (G = 4H = 20 rows), so each spans > 0.8·bound of the range.
  test::check_parameter_layout<LSTM>(make_lstm, 4, 0.8f);
}

TEST_CASE("LSTM gradients match finite differences", "[nn][lstm][gradcheck]") {
  // hidden_size 21 runs the fused per-step loops on SIMD batches (16 or 8 lanes) and a scalar
  // tail; 29 also on one batch of half the width between them (16 + 8 + 5, or 3 x 8 + 4 + 1);
  // 5 runs them on the tail alone.
  for (const std::size_t H : {std::size_t{5}, std::size_t{21}, std::size_t{29}}) {
    DYNAMIC_SECTION("hidden_size " << H) {
      Rng rng(3);
      const std::size_t B = 2, T = 4, D = 3, L = 2;
      LSTM lstm(D, H, L, rng);
      Tensor3 x = test::random3(B, T, D, rng);
      LSTMState s0 = test::random_state<LSTMState>(L, B, H, rng);
      // Probes x, h0, c0 and every parameter; the loss covers out, h_n and c_n.
      const auto res = test::gradcheck_all(lstm, x, s0);
      INFO("checked " << res.checked << ", max abs err " << res.max_abs_err << ", worst " << res.worst << "\n"
                      << res.report);
      REQUIRE(res.ok);
    }
  }
}

TEST_CASE("LSTM matches torch.nn.LSTM fixtures", "[nn][lstm][golden]") {
  // Tolerances (in check_fixture): forward rtol 1e-5 atol 1e-6, backward rtol 1e-4 atol 1e-5;
  // compared: out, h_n, c_n, and the gradients w.r.t. x, h0, c0 and every parameter.
  for (const std::string name : {"lstm.json", "lstm_l3.json", "lstm_h21.json"}) {
    DYNAMIC_SECTION("fixture " << name) {
      const test::Fixture fx(name);
      const auto& meta = fx.meta();
      const std::size_t D = meta.at("input_size"), H = meta.at("hidden_size"), L = meta.at("num_layers");
      Rng rng(1);
      LSTM lstm(D, H, L, rng);
      test::check_fixture(lstm, fx, name);
    }
  }
}

TEST_CASE("LSTM bias rows are in gate order i f g o", "[nn][lstm]") {
  // Field report: H = 1, D = 1, all weights 0, bias_ih = [0, 100, 0, 0], c0 = 0.7, h0 = 0.
  // PyTorch's order i, f, g, o: f = σ(100) = 1, i = o = σ(0) = 0.5, g = tanh(0) = 0
  //   -> c1 = 0.7, h1 = 0.5·tanh(0.7) = 0.302184.
  // TensorFlow's i, j, f, o would read 100 as the candidate: c1 = 0.5·0.7 + 0.5·1 = 0.85.
  Rng rng(5);
  LSTM lstm(1, 1, 1, rng);
  for (auto* p : lstm.parameters()) p->value.fill(0.0f);
  lstm.bias_ih(0).value = xt::xarray<float>({0.0f, 100.0f, 0.0f, 0.0f});
  const std::size_t T = 3;
  Tensor3 x = xt::xtensor<float, 3>({{{0.3f}, {-2.0f}, {5.0f}}});  // any input: weights are 0
  REQUIRE(x.shape()[1] == T);
  LSTMState s0{Tensor3(xt::zeros<float>({1, 1, 1})), Tensor3({1, 1, 1})};
  s0.c(0, 0, 0) = 0.7f;
  const Tensor3 out = lstm.forward(x, &s0);
  const LSTMState& fin = lstm.final_state();
  CHECK_THAT(fin.c(0, 0, 0), WithinAbs(0.7, 1e-6));
  CHECK_THAT(fin.h(0, 0, 0), WithinAbs(0.302184, 1e-6));
  for (std::size_t t = 0; t < T; ++t) {
    INFO("t = " << t);
    CHECK_THAT(out(0, t, 0), WithinAbs(0.302184, 1e-6));  // c stays 0.7, so h stays too
  }
}

TEST_CASE("LSTM hidden_grad_norms are the norms of the total gradient reaching h_t", "[nn][lstm]") {
  // The recurrent part at h_t is dL/dh0 of the model restarted at t+1 from (h_t, c_t).
  test::check_hidden_grad_norms<LSTM>(make_lstm);
  test::check_hidden_grad_norms<LSTM>(make_lstm, 21);
  test::check_hidden_grad_norms_range<LSTM>(make_lstm);
}

TEST_CASE("LSTM forward is stateless across calls and backward adds into grads", "[nn][lstm]") {
  test::check_stateless_and_additive<LSTM>(make_lstm);
}

TEST_CASE("LSTM rejects bad shapes and misuse", "[nn][lstm][errors]") {
  // Also checks a wrong c alone (state0.c, dfinal.c) with a right h.
  test::check_errors<LSTM>(make_lstm);
}

TEST_CASE("LSTM time-major forward and backward give the bits of forward and backward", "[nn][lstm]") {
  test::check_time_major<LSTM>(make_lstm);
}

// Tests of seqlab::LSTM (lib/include/seqlab/nn/lstm.hpp): parameter layout and init, finite
// differences, PyTorch parity (tests/golden/gen_lstm.py), gate order, hidden-gradient norms,
// repeated use, and errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/lstm.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

LSTMState random_state(std::size_t L, std::size_t B, std::size_t H, Rng& rng) {
  LSTMState s{Tensor3({L, B, H}), Tensor3({L, B, H})};
  rng.fill_normal(s.h, 0.0f, 1.0f);
  rng.fill_normal(s.c, 0.0f, 1.0f);
  return s;
}

LSTMState zero_state(std::size_t L, std::size_t B, std::size_t H) {
  return LSTMState{Tensor3(xt::zeros<float>({L, B, H})), Tensor3(xt::zeros<float>({L, B, H}))};
}

/// Copies layer `from_k` of `src` into layer `to_k` of `dst` (same sizes).
void copy_layer(LSTM& src, std::size_t from_k, LSTM& dst, std::size_t to_k) {
  dst.weight_ih(to_k).value = src.weight_ih(from_k).value;
  dst.weight_hh(to_k).value = src.weight_hh(from_k).value;
  dst.bias_ih(to_k).value = src.bias_ih(from_k).value;
  dst.bias_hh(to_k).value = src.bias_hh(from_k).value;
}

/// x[:, t0:t1, :]
Tensor3 time_slice(const Tensor3& x, std::size_t t0, std::size_t t1) {
  return Tensor3(xt::view(x, xt::all(), xt::range(t0, t1), xt::all()));
}

/// Layer k of a state as a one-layer state [1, B, H].
LSTMState layer_state(const LSTMState& s, std::size_t k) {
  const std::size_t B = s.h.shape()[1], H = s.h.shape()[2];
  LSTMState out{Tensor3({1, B, H}), Tensor3({1, B, H})};
  xt::view(out.h, 0) = xt::view(s.h, k);
  xt::view(out.c, 0) = xt::view(s.c, k);
  return out;
}

double frobenius(const xt::xarray<float>& a) {
  double s = 0.0;
  for (float v : a) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("LSTM parameter names shapes and default init match PyTorch", "[nn][lstm]") {
  Rng rng(11);
  const std::size_t D = 3, H = 5;
  LSTM lstm(D, H, 2, rng);
  CHECK(lstm.input_size() == D);
  CHECK(lstm.hidden_size() == H);
  CHECK(lstm.num_layers() == 2);

  // torch.nn.LSTM(3, 5, num_layers=2).state_dict(): key -> shape
  const std::vector<std::pair<std::string, std::vector<std::size_t>>> expected = {
      {"rnn.weight_ih_l0", {20, 3}}, {"rnn.weight_hh_l0", {20, 5}}, {"rnn.bias_ih_l0", {20}},
      {"rnn.bias_hh_l0", {20}},      {"rnn.weight_ih_l1", {20, 5}}, {"rnn.weight_hh_l1", {20, 5}},
      {"rnn.bias_ih_l1", {20}},      {"rnn.bias_hh_l1", {20}}};
  const auto named = lstm.named_parameters("rnn.");
  REQUIRE(named.size() == expected.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    INFO("parameter " << i << ": " << named[i].key);
    CHECK(named[i].key == expected[i].first);
    const std::vector<std::size_t> shape(named[i].param->value.shape().begin(),
                                         named[i].param->value.shape().end());
    CHECK(shape == expected[i].second);
    CHECK(named[i].param->grad.shape() == named[i].param->value.shape());
  }
  CHECK(lstm.num_parameters() == 4 * H * (D + H + 2) + 4 * H * (H + H + 2));

  // Default init U(-1/sqrt(H), 1/sqrt(H)) for every parameter, and actually spread over the range.
  const float bound = 1.0f / std::sqrt(static_cast<float>(H));
  for (const auto& np : named) {
    INFO(np.key);
    float lo = 1e9f, hi = -1e9f;
    for (float v : np.param->value) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    CHECK(hi - lo > 0.8f * bound);  // 20+ draws from a width-2·bound range
    for (float g : np.param->grad) REQUIRE(g == 0.0f);
  }

  // Same seed, same parameters.
  Rng rng2(11);
  LSTM again(D, H, 2, rng2);
  CHECK(bool(again.weight_hh(1).value == lstm.weight_hh(1).value));
}

TEST_CASE("LSTM gradients match finite differences", "[nn][lstm][gradcheck]") {
  Rng rng(3);
  const std::size_t B = 2, T = 4, D = 3, H = 5, L = 2;
  LSTM lstm(D, H, L, rng);
  Tensor3 x({B, T, D});
  rng.fill_normal(x, 0.0f, 1.0f);
  LSTMState s0 = random_state(L, B, H, rng);
  Tensor3 gx = xt::zeros<float>({B, T, D});
  LSTMState g0 = zero_state(L, B, H);
  const std::size_t n_out = B * T * H, n_state = L * B * H;

  // y = [out, h_n, c_n] flattened: the loss covers the output sequence and the final state.
  auto forward = [&]() {
    const Tensor3 out = lstm.forward(x, &s0);
    const LSTMState& fin = lstm.final_state();
    std::vector<float> y(out.begin(), out.end());
    y.insert(y.end(), fin.h.begin(), fin.h.end());
    y.insert(y.end(), fin.c.begin(), fin.c.end());
    return y;
  };
  auto backward = [&](const std::vector<float>& w) {
    REQUIRE(w.size() == n_out + 2 * n_state);
    lstm.zero_grad();
    lstm.forward(x, &s0);
    Tensor3 dy({B, T, H});
    LSTMState dfin = zero_state(L, B, H);
    std::copy(w.begin(), w.begin() + n_out, dy.begin());
    std::copy(w.begin() + n_out, w.begin() + n_out + n_state, dfin.h.begin());
    std::copy(w.begin() + n_out + n_state, w.end(), dfin.c.begin());
    // Copy in place: the probes point at these buffers (assignment could swap the storage).
    const Tensor3 dx = lstm.backward(dy, &dfin);
    std::copy(dx.begin(), dx.end(), gx.begin());
    std::copy(lstm.initial_state_grad().h.begin(), lstm.initial_state_grad().h.end(), g0.h.begin());
    std::copy(lstm.initial_state_grad().c.begin(), lstm.initial_state_grad().c.end(), g0.c.begin());
  };
  std::vector<test::Probe> probes = {{"x", x.data(), gx.data(), x.size()},
                                     {"h0", s0.h.data(), g0.h.data(), s0.h.size()},
                                     {"c0", s0.c.data(), g0.c.data(), s0.c.size()}};
  for (const auto& np : lstm.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});

  const auto res = test::check_gradients(forward, backward, probes);
  INFO("checked " << res.checked << ", max abs err " << res.max_abs_err << ", worst " << res.worst
                  << "\n" << res.report);
  CHECK(res.checked == x.size() + 2 * n_state + lstm.num_parameters());
  REQUIRE(res.ok);
}

TEST_CASE("LSTM matches torch.nn.LSTM fixtures", "[nn][lstm][golden]") {
  // Float32 against float64 references. Forward: rtol 1e-5, atol 1e-6. Backward: rtol 1e-4,
  // atol 1e-5 (gradients go through T steps of float32 GEMMs and products of gates).
  const double fwd_rtol = 1e-5, fwd_atol = 1e-6, bwd_rtol = 1e-4, bwd_atol = 1e-5;
  for (const std::string name : {"lstm.json", "lstm_l3.json"}) {
    DYNAMIC_SECTION("fixture " << name) {
      const test::Fixture fx(name);
      const auto& meta = fx.meta();
      const std::size_t D = meta.at("input_size"), H = meta.at("hidden_size"),
                        L = meta.at("num_layers");
      Rng rng(1);
      LSTM lstm(D, H, L, rng);
      std::size_t loaded = 0;
      for (const auto& np : lstm.named_parameters()) {
        INFO("loading " << np.key);
        const xt::xarray<float> v = fx.tensor(np.key);
        REQUIRE(v.shape() == np.param->value.shape());
        np.param->value = v;
        ++loaded;
      }
      REQUIRE(loaded == 4 * L);

      const Tensor3 x = fx.tensor("x");
      const LSTMState s0{fx.tensor("h0"), fx.tensor("c0")};
      const Tensor3 out = lstm.forward(x, &s0);
      for (const auto& [key, actual] :
           std::vector<std::pair<std::string, xt::xarray<float>>>{
               {"out", out}, {"h_n", lstm.final_state().h}, {"c_n", lstm.final_state().c}}) {
        const std::string msg = test::compare_close(actual, fx.tensor_f64(key), fwd_rtol, fwd_atol);
        INFO(name << " forward " << key << ": " << msg);
        CHECK(msg.empty());
      }

      const Tensor3 dy = fx.tensor("dy");
      const LSTMState dfin{fx.tensor("dh_n"), fx.tensor("dc_n")};
      const Tensor3 dx = lstm.backward(dy, &dfin);
      std::vector<std::pair<std::string, xt::xarray<float>>> grads = {
          {"grad_x", dx},
          {"grad_h0", lstm.initial_state_grad().h},
          {"grad_c0", lstm.initial_state_grad().c}};
      for (const auto& np : lstm.named_parameters()) grads.push_back({"grad_" + np.key, np.param->grad});
      for (const auto& [key, actual] : grads) {
        const std::string msg = test::compare_close(actual, fx.tensor_f64(key), bwd_rtol, bwd_atol);
        INFO(name << " backward " << key << ": " << msg);
        CHECK(msg.empty());
      }
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
  Rng rng(21);
  const std::size_t B = 3, T = 6, D = 4, H = 5, L = 2;
  LSTM lstm(D, H, L, rng);
  Tensor3 x({B, T, D}), dy({B, T, H});
  rng.fill_normal(x, 0.0f, 1.0f);
  rng.fill_normal(dy, 0.0f, 1.0f);
  const LSTMState s0 = random_state(L, B, H, rng);
  const LSTMState dfin = random_state(L, B, H, rng);
  const Tensor3 out = lstm.forward(x, &s0);
  const Tensor3 dx = lstm.backward(dy, &dfin);
  const Tensor2 norms = lstm.hidden_grad_norms();
  REQUIRE(norms.shape()[0] == L);
  REQUIRE(norms.shape()[1] == T);

  // Last step of the last layer: ∂L/∂h_T = dy[:, T-1, :] + dh_n[L-1].
  const xt::xarray<float> last = xt::view(dy, xt::all(), T - 1, xt::all()) + xt::view(dfin.h, L - 1);
  CHECK_THAT(norms(L - 1, T - 1), WithinRel(frobenius(last), 1e-5));

  // Every step and layer, computed another way: the output-side part from two stacked one-layer
  // LSTMs (layer 1's input gradient is what reaches layer 0's h_t from above), plus the recurrent
  // part as dL/d(initial state) of the same model restarted at t+1 from the states at t.
  LSTM l0(D, H, 1, rng), l1(H, H, 1, rng);
  copy_layer(lstm, 0, l0, 0);
  copy_layer(lstm, 1, l1, 0);
  const LSTMState s0_0 = layer_state(s0, 0), s0_1 = layer_state(s0, 1);
  const Tensor3 h_l0 = l0.forward(x, &s0_0);
  const Tensor3 out1 = l1.forward(h_l0, &s0_1);
  {
    const std::string msg = test::compare_close(out1, xt::cast<double>(out), 1e-6, 1e-6);
    INFO("stacked one-layer LSTMs vs the two-layer LSTM: " << msg);
    REQUIRE(msg.empty());
  }
  const LSTMState dfin_1 = layer_state(dfin, 1);
  const Tensor3 from_above = l1.backward(dy, &dfin_1);  // ∂L/∂(layer-0 output) via layer 1

  for (std::size_t t = 0; t < T; ++t) {
    LSTM prefix = lstm;  // same parameters
    prefix.forward(time_slice(x, 0, t + 1), &s0);
    const LSTMState st = prefix.final_state();  // (h_t, c_t) of every layer
    LSTM suffix = lstm;
    const Tensor3 x_rest = time_slice(x, t + 1, T);  // empty for t = T-1
    const Tensor3 dy_rest = time_slice(dy, t + 1, T);
    suffix.forward(x_rest, &st);
    suffix.backward(dy_rest, &dfin);
    const LSTMState& rec = suffix.initial_state_grad();  // recurrent part at h_t, each layer
    for (std::size_t k = 0; k < L; ++k) {
      const Tensor3& above = k == L - 1 ? dy : from_above;
      const xt::xarray<float> total = xt::view(above, xt::all(), t, xt::all()) + xt::view(rec.h, k);
      INFO("layer " << k << ", t = " << t);
      CHECK_THAT(norms(k, t), WithinRel(frobenius(total), 1e-4));
    }
  }
}

TEST_CASE("LSTM forward is stateless across calls and backward adds into grads", "[nn][lstm]") {
  Rng rng(8);
  const std::size_t B = 2, T = 5, D = 3, H = 4, L = 2;
  LSTM lstm(D, H, L, rng);
  Tensor3 x1({B, T, D}), x2({B, 3, D}), dy({B, T, H});
  rng.fill_normal(x1, 0.0f, 1.0f);
  rng.fill_normal(x2, 0.0f, 1.0f);
  rng.fill_normal(dy, 0.0f, 1.0f);

  // No state means zeros.
  const Tensor3 a = lstm.forward(x1);
  const LSTMState z = zero_state(L, B, H);
  const Tensor3 b = lstm.forward(x1, &z);
  CHECK(bool(a == b));

  // A forward with another shape in between changes nothing.
  const Tensor3 dx_a = lstm.backward(dy);
  std::vector<xt::xarray<float>> g_a;
  for (auto* p : lstm.parameters()) g_a.push_back(p->grad);
  lstm.zero_grad();
  lstm.forward(x2);
  CHECK(bool(lstm.forward(x1) == a));
  const Tensor3 dx_b = lstm.backward(dy);
  CHECK(bool(dx_b == dx_a));
  // A second backward after the same forward adds the same gradient again.
  lstm.backward(dy);
  const auto params = lstm.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    const xt::xarray<float> twice = 2.0f * g_a[i];
    CHECK(test::compare_close(params[i]->grad, xt::cast<double>(twice), 1e-6, 1e-7).empty());
    CHECK(frobenius(g_a[i]) > 0.0);
  }
}

TEST_CASE("LSTM rejects bad shapes and misuse", "[nn][lstm][errors]") {
  Rng rng(2);
  CHECK_THROWS_AS(LSTM(0, 4, 1, rng), std::invalid_argument);
  CHECK_THROWS_AS(LSTM(3, 0, 1, rng), std::invalid_argument);
  CHECK_THROWS_AS(LSTM(3, 4, 0, rng), std::invalid_argument);

  const std::size_t B = 2, T = 3, D = 3, H = 4, L = 2;
  LSTM lstm(D, H, L, rng);
  Tensor3 x = xt::zeros<float>({B, T, D});
  Tensor3 dy = xt::zeros<float>({B, T, H});
  CHECK_THROWS_AS(lstm.backward(dy), std::logic_error);
  CHECK_THROWS_AS(lstm.final_state(), std::logic_error);
  CHECK_THROWS_AS(lstm.hidden_grad_norms(), std::logic_error);
  CHECK_THROWS_AS(lstm.initial_state_grad(), std::logic_error);
  CHECK_THROWS_AS(lstm.weight_ih(L), std::out_of_range);

  CHECK_THROWS_AS(lstm.forward(Tensor3(xt::zeros<float>({B, T, D + 1}))), ShapeError);
  CHECK_THROWS_WITH(lstm.forward(Tensor3(xt::zeros<float>({B, T, D + 1}))),
                    Catch::Contains("x") && Catch::Contains("[2, 3, 4]"));
  for (const auto& bad : {zero_state(L + 1, B, H), zero_state(L, B + 1, H), zero_state(L, B, H + 1)}) {
    CHECK_THROWS_AS(lstm.forward(x, &bad), ShapeError);
  }
  LSTMState bad_c = zero_state(L, B, H);
  bad_c.c = xt::zeros<float>({L, B, H + 1});
  CHECK_THROWS_AS(lstm.forward(x, &bad_c), ShapeError);
  CHECK_THROWS_AS(lstm.backward(dy), std::logic_error);  // rejected forwards left nothing behind

  lstm.forward(x);
  CHECK_THROWS_AS(lstm.backward(Tensor3(xt::zeros<float>({B, T + 1, H}))), ShapeError);
  CHECK_THROWS_AS(lstm.backward(Tensor3(xt::zeros<float>({B, T, D}))), ShapeError);
  const LSTMState bad_final = zero_state(L, B, H + 1);
  CHECK_THROWS_AS(lstm.backward(dy, &bad_final), ShapeError);
  CHECK_THROWS_AS(lstm.hidden_grad_norms(), std::logic_error);
  CHECK_NOTHROW(lstm.backward(dy));
  CHECK(lstm.hidden_grad_norms().shape()[1] == T);
}

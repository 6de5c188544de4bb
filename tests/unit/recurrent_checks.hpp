#pragma once
// Checks shared by test_nn_rnn.cpp, test_nn_gru.cpp and test_nn_lstm.cpp: the three layers have the
// same API but for the recurrent state, one tensor h [L, B, H] for the RNN and GRU and the pair
// (h, c) (seqlab::LSTMState) for the LSTM. StateParts<S> lists a state's [L, B, H] parts so that
// each check is one template over the layer type M (seqlab::RNN, GRU or LSTM). A factory
// `make(input_size, hidden_size, num_layers, rng)` builds fresh layers of the same kind.
//
// Legend: B batch, T seq_len, D input_size, H hidden_size, L num_layers, G rows per gate block
// (H for the RNN, 3H for the GRU, 4H for the LSTM), P parts of the state (1, or 2 for the LSTM).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xview.hpp>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/lstm.hpp"

namespace seqlab::test {

inline Tensor3 random3(std::size_t a, std::size_t b, std::size_t c, Rng& rng, float sd = 1.0f) {
  Tensor3 t({a, b, c});
  rng.fill_normal(t, 0.0f, sd);
  return t;
}

inline double frobenius(const xt::xarray<float>& a) {
  double s = 0.0;
  for (float v : a) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

/// x[:, t0:t1, :]
inline Tensor3 time_slice(const Tensor3& x, std::size_t t0, std::size_t t1) {
  return Tensor3(xt::view(x, xt::all(), xt::range(t0, t1), xt::all()));
}

/// The parts of a recurrent state S, each [L, B, H], in a fixed order (h first).
template <class S>
struct StateParts;

template <>
struct StateParts<Tensor3> {  // RNN, GRU: h
  /// Fixture keys are <name>0, <name>_n, d<name>_n, grad_<name>0; gradcheck probes <name>0.
  static std::vector<std::string> names() { return {"h"}; }
  /// How forward / backward name the state argument in their errors.
  static std::vector<std::string> forward_args() { return {"h0"}; }
  static std::vector<std::string> backward_args() { return {"dh_n"}; }
  template <class T>  // T = Tensor3 or const Tensor3
  static std::vector<T*> of(T& s) { return {&s}; }
  static Tensor3 zeros(std::size_t L, std::size_t B, std::size_t H) { return xt::zeros<float>({L, B, H}); }
};

template <>
struct StateParts<LSTMState> {  // LSTM: (h, c)
  static std::vector<std::string> names() { return {"h", "c"}; }
  static std::vector<std::string> forward_args() { return {"state0.h", "state0.c"}; }
  static std::vector<std::string> backward_args() { return {"dfinal.h", "dfinal.c"}; }
  template <class T>  // T = LSTMState or const LSTMState
  static auto of(T& s) { return std::vector<decltype(&s.h)>{&s.h, &s.c}; }
  static LSTMState zeros(std::size_t L, std::size_t B, std::size_t H) {
    return LSTMState{xt::zeros<float>({L, B, H}), xt::zeros<float>({L, B, H})};
  }
};

/// The state type of layer type M (Tensor3 or LSTMState), as final_state() returns it.
template <class M>
using StateOf = std::decay_t<decltype(std::declval<M&>().final_state())>;

/// A state [L, B, H] with every part drawn from N(0, 1), parts in order.
template <class S>
S random_state(std::size_t L, std::size_t B, std::size_t H, Rng& rng) {
  S s = StateParts<S>::zeros(L, B, H);
  for (Tensor3* p : StateParts<S>::of(s)) rng.fill_normal(*p, 0.0f, 1.0f);
  return s;
}

/// The h part of a state.
template <class S>
const Tensor3& hidden_part(const S& s) {
  return *StateParts<S>::of(s)[0];
}

/// Layer k of a state [L, B, H] as a one-layer state [1, B, H] (every part).
template <class S>
S layer_state(const S& s, std::size_t k) {
  const auto src = StateParts<S>::of(s);
  S out = StateParts<S>::zeros(1, src[0]->shape()[1], src[0]->shape()[2]);
  const auto dst = StateParts<S>::of(out);
  for (std::size_t i = 0; i < src.size(); ++i) xt::view(*dst[i], 0) = xt::view(*src[i], k);
  return out;
}

/// Copies layer `from_k` of `src` into layer `to_k` of `dst` (same sizes).
template <class M>
void copy_layer(M& src, std::size_t from_k, M& dst, std::size_t to_k) {
  dst.weight_ih(to_k).value = src.weight_ih(from_k).value;
  dst.weight_hh(to_k).value = src.weight_hh(from_k).value;
  dst.bias_ih(to_k).value = src.bias_ih(from_k).value;
  dst.bias_hh(to_k).value = src.bias_hh(from_k).value;
}

/// state_dict keys and shapes of a 2-layer model with input D, hidden H and G = gates·H rows,
/// U(-1/sqrt(H), 1/sqrt(H)) init spread over the range (max - min > min_spread·bound for every
/// parameter; 0.6 suits >= 5 draws, G = 5 for the RNN), zero grads, same seed same values.
template <class M, class Make>
void check_parameter_layout(const Make& make, std::size_t gates, float min_spread = 0.6f) {
  Rng rng(11);
  const std::size_t D = 3, H = 5, G = gates * H;
  M m = make(D, H, 2, rng);
  CHECK(m.input_size() == D);
  CHECK(m.hidden_size() == H);
  CHECK(m.num_layers() == 2);
  // torch.nn.{RNN,GRU,LSTM}(3, 5, num_layers=2).state_dict(): key -> shape
  const std::vector<std::pair<std::string, std::vector<std::size_t>>> expected = {
      {"rnn.weight_ih_l0", {G, D}}, {"rnn.weight_hh_l0", {G, H}}, {"rnn.bias_ih_l0", {G}},
      {"rnn.bias_hh_l0", {G}},      {"rnn.weight_ih_l1", {G, H}}, {"rnn.weight_hh_l1", {G, H}},
      {"rnn.bias_ih_l1", {G}},      {"rnn.bias_hh_l1", {G}}};
  const auto named = m.named_parameters("rnn.");
  REQUIRE(named.size() == expected.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    INFO("parameter " << i << ": " << named[i].key);
    CHECK(named[i].key == expected[i].first);
    const std::vector<std::size_t> shape(named[i].param->value.shape().begin(),
                                         named[i].param->value.shape().end());
    CHECK(shape == expected[i].second);
    CHECK(named[i].param->grad.shape() == named[i].param->value.shape());
  }
  CHECK(m.num_parameters() == G * (D + H + 2) + G * (H + H + 2));

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
    CHECK(hi - lo > min_spread * bound);
    for (float g : np.param->grad) REQUIRE(g == 0.0f);
  }
  Rng rng2(11);
  M again = make(D, H, 2, rng2);
  CHECK(bool(again.weight_hh(1).value == m.weight_hh(1).value));
  CHECK_THROWS_AS(m.weight_ih(2), std::out_of_range);
}

/// Finite differences on x, every part of the initial state s0 and every parameter of `m`, with
/// the loss on out and on every part of the final state.
/// `on_forward` (optional) runs after every forward of the check (e.g. to watch relu kinks).
template <class M>
GradCheckResult gradcheck_all(M& m, Tensor3& x, StateOf<M>& s0, const GradCheckOptions& opt = {},
                              const std::function<void()>& on_forward = {}) {
  using SP = StateParts<StateOf<M>>;
  const std::size_t B = x.shape()[0], T = x.shape()[1], D = x.shape()[2];
  const std::size_t H = m.hidden_size(), L = m.num_layers(), P = SP::names().size();
  Tensor3 gx = xt::zeros<float>({B, T, D});
  StateOf<M> g0 = SP::zeros(L, B, H);
  const std::size_t n_out = B * T * H, n_state = L * B * H;
  // y = [out, final state parts] flattened: the loss covers the output sequence and the final state.
  auto forward = [&]() {
    const Tensor3 out = m.forward(x, &s0);
    if (on_forward) on_forward();
    std::vector<float> y(out.begin(), out.end());
    for (const Tensor3* p : SP::of(m.final_state())) y.insert(y.end(), p->begin(), p->end());
    return y;
  };
  auto backward = [&](const std::vector<float>& w) {
    REQUIRE(w.size() == n_out + P * n_state);
    m.zero_grad();
    m.forward(x, &s0);
    Tensor3 dy({B, T, H});
    StateOf<M> dfinal = SP::zeros(L, B, H);
    std::copy(w.begin(), w.begin() + n_out, dy.begin());
    auto next = w.begin() + n_out;
    for (Tensor3* p : SP::of(dfinal)) {
      std::copy(next, next + n_state, p->begin());
      next += n_state;
    }
    // Copy in place: the probes point at these buffers (assignment could swap the storage).
    const Tensor3 dx = m.backward(dy, &dfinal);
    std::copy(dx.begin(), dx.end(), gx.begin());
    const auto grads = SP::of(m.initial_state_grad());
    const auto into = SP::of(g0);
    for (std::size_t i = 0; i < P; ++i) std::copy(grads[i]->begin(), grads[i]->end(), into[i]->begin());
  };
  std::vector<Probe> probes = {{"x", x.data(), gx.data(), x.size()}};
  const auto values = SP::of(s0);
  const auto grads = SP::of(g0);
  for (std::size_t i = 0; i < P; ++i)
    probes.push_back({SP::names()[i] + "0", values[i]->data(), grads[i]->data(), values[i]->size()});
  for (const auto& np : m.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  const auto res = check_gradients(forward, backward, probes, opt);
  CHECK(res.checked == x.size() + P * n_state + m.num_parameters());
  return res;
}

/// Loads fixture `name` (tests/golden/gen_rnn_gru.py, gen_lstm.py) into `m` and compares out, the
/// final state (h_n; c_n for the LSTM) and the gradients of sum(out·dy) + Σ_parts sum(s_n·ds_n)
/// w.r.t. x, the initial state (h0; c0) and every parameter.
/// Float32 against float64 references. Forward: rtol 1e-5, atol 1e-6. Backward: rtol 1e-4,
/// atol 1e-5 (gradients go through T steps of float32 GEMMs and products of gates).
template <class M>
void check_fixture(M& m, const Fixture& fx, const std::string& name) {
  using S = StateOf<M>;
  using SP = StateParts<S>;
  const double fwd_rtol = 1e-5, fwd_atol = 1e-6, bwd_rtol = 1e-4, bwd_atol = 1e-5;
  const std::vector<std::string> parts = SP::names();
  std::size_t loaded = 0;
  for (const auto& np : m.named_parameters()) {
    INFO("loading " << np.key);
    const xt::xarray<float> v = fx.tensor(np.key);
    REQUIRE(v.shape() == np.param->value.shape());
    np.param->value = v;
    ++loaded;
  }
  REQUIRE(loaded == 4 * m.num_layers());

  const Tensor3 x = fx.tensor("x");
  S s0 = SP::zeros(0, 0, 0);
  for (std::size_t i = 0; i < parts.size(); ++i) *SP::of(s0)[i] = fx.tensor(parts[i] + "0");
  const Tensor3 out = m.forward(x, &s0);
  std::vector<std::pair<std::string, xt::xarray<float>>> outputs = {{"out", out}};
  for (std::size_t i = 0; i < parts.size(); ++i) outputs.push_back({parts[i] + "_n", *SP::of(m.final_state())[i]});
  for (const auto& [key, actual] : outputs) {
    const std::string msg = compare_close(actual, fx.tensor_f64(key), fwd_rtol, fwd_atol);
    INFO(name << " forward " << key << ": " << msg);
    CHECK(msg.empty());
  }

  const Tensor3 dy = fx.tensor("dy");
  S dfinal = SP::zeros(0, 0, 0);
  for (std::size_t i = 0; i < parts.size(); ++i) *SP::of(dfinal)[i] = fx.tensor("d" + parts[i] + "_n");
  const Tensor3 dx = m.backward(dy, &dfinal);
  std::vector<std::pair<std::string, xt::xarray<float>>> grads = {{"grad_x", dx}};
  for (std::size_t i = 0; i < parts.size(); ++i)
    grads.push_back({"grad_" + parts[i] + "0", *SP::of(m.initial_state_grad())[i]});
  for (const auto& np : m.named_parameters()) grads.push_back({"grad_" + np.key, np.param->grad});
  for (const auto& [key, actual] : grads) {
    const std::string msg = compare_close(actual, fx.tensor_f64(key), bwd_rtol, bwd_atol);
    INFO(name << " backward " << key << ": " << msg);
    CHECK(msg.empty());
  }
}

/// hidden_grad_norms: shape [L, T]; the last step of the last layer is ‖dy[:, T-1] + dh_n[L-1]‖;
/// every step of every layer equals the norm of (output-side gradient at t) + (recurrent part),
/// the latter computed as dL/dh0 of the same model restarted at t+1 from the state at t.
/// H = 21 sums the norms over SIMD batches and a scalar tail, H = 5 over the tail alone.
template <class M, class Make>
void check_hidden_grad_norms(const Make& make, std::size_t H = 5) {
  using S = StateOf<M>;
  Rng rng(21);
  const std::size_t B = 3, T = 6, D = 4, L = 2;
  M m = make(D, H, L, rng);
  const Tensor3 x = random3(B, T, D, rng), dy = random3(B, T, H, rng);
  const S s0 = random_state<S>(L, B, H, rng), dfinal = random_state<S>(L, B, H, rng);
  const Tensor3& dh_n = hidden_part(dfinal);
  const Tensor3 out = m.forward(x, &s0);
  m.backward(dy, &dfinal);
  const Tensor2 norms = m.hidden_grad_norms();
  REQUIRE(norms.shape()[0] == L);
  REQUIRE(norms.shape()[1] == T);

  const xt::xarray<float> last = xt::view(dy, xt::all(), T - 1, xt::all()) + xt::view(dh_n, L - 1);
  CHECK_THAT(norms(L - 1, T - 1), Catch::Matchers::WithinRel(frobenius(last), 1e-5));

  // Output-side part of layer 0: the input gradient of a one-layer copy of layer 1.
  M l0 = make(D, H, 1, rng), l1 = make(H, H, 1, rng);
  copy_layer(m, 0, l0, 0);
  copy_layer(m, 1, l1, 0);
  const S s0_0 = layer_state(s0, 0), s0_1 = layer_state(s0, 1), dfinal_1 = layer_state(dfinal, 1);
  const Tensor3 h_l0 = l0.forward(x, &s0_0);
  const Tensor3 out1 = l1.forward(h_l0, &s0_1);
  {
    const std::string msg = compare_close(out1, xt::cast<double>(out), 1e-6, 1e-6);
    INFO("stacked one-layer models vs the two-layer model: " << msg);
    REQUIRE(msg.empty());
  }
  const Tensor3 from_above = l1.backward(dy, &dfinal_1);  // ∂L/∂(layer-0 output) via layer 1
  const xt::xarray<float> last0 = xt::view(from_above, xt::all(), T - 1, xt::all()) + xt::view(dh_n, 0);
  CHECK_THAT(norms(0, T - 1), Catch::Matchers::WithinRel(frobenius(last0), 1e-5));

  for (std::size_t t = 0; t < T; ++t) {
    M prefix = m;  // same parameters
    prefix.forward(time_slice(x, 0, t + 1), &s0);
    const S st = prefix.final_state();  // state at t of every layer
    M suffix = m;
    suffix.forward(time_slice(x, t + 1, T), &st);  // empty for t = T-1
    suffix.backward(time_slice(dy, t + 1, T), &dfinal);
    const Tensor3& rec = hidden_part(suffix.initial_state_grad());  // recurrent part at h_t, each layer
    for (std::size_t k = 0; k < L; ++k) {
      const Tensor3& above = k == L - 1 ? dy : from_above;
      const xt::xarray<float> total = xt::view(above, xt::all(), t, xt::all()) + xt::view(rec, k);
      INFO("layer " << k << ", t = " << t);
      CHECK_THAT(norms(k, t), Catch::Matchers::WithinRel(frobenius(total), 1e-4));
    }
  }
}

/// hidden_grad_norms scales exactly with dy over float's whole range: the backward is linear in dy,
/// so dy·s gives s times the norms. At s = 1e-25 the elements of dL/dh_t are ~1e-25, whose float
/// squares vanish; at s = 1e20 they are ~1e20, whose float squares overflow. hidden_size 21: SIMD
/// batches and the scalar tail.
template <class M, class Make>
void check_hidden_grad_norms_range(const Make& make) {
  Rng rng(23);
  const std::size_t B = 2, T = 3, D = 4, H = 21, L = 2;
  M m = make(D, H, L, rng);
  const Tensor3 x = random3(B, T, D, rng), dy = random3(B, T, H, rng);
  m.forward(x);
  m.backward(dy);
  const Tensor2 base = m.hidden_grad_norms();
  for (const double s : {1e-25, 1e20}) {
    const Tensor3 dys = dy * static_cast<float>(s);
    m.backward(dys);
    const Tensor2 norms = m.hidden_grad_norms();
    for (std::size_t k = 0; k < L; ++k)
      for (std::size_t t = 0; t < T; ++t) {
        INFO("scale " << s << ", layer " << k << ", t = " << t << ": " << norms(k, t) << " against "
                      << s * base(k, t));
        CHECK(std::isfinite(norms(k, t)));
        CHECK_THAT(norms(k, t), Catch::Matchers::WithinRel(s * base(k, t), 1e-5));
      }
  }
}

/// No state means zeros; a forward of another shape in between changes nothing; a second
/// backward after the same forward adds the same gradient again.
template <class M, class Make>
void check_stateless_and_additive(const Make& make) {
  Rng rng(8);
  const std::size_t B = 2, T = 5, D = 3, H = 4, L = 2;
  M m = make(D, H, L, rng);
  const Tensor3 x1 = random3(B, T, D, rng), x2 = random3(B, 3, D, rng), dy = random3(B, T, H, rng);
  const Tensor3 a = m.forward(x1);
  const StateOf<M> z = StateParts<StateOf<M>>::zeros(L, B, H);
  CHECK(bool(m.forward(x1, &z) == a));

  const Tensor3 dx_a = m.backward(dy);
  std::vector<xt::xarray<float>> g_a;
  for (auto* p : m.parameters()) g_a.push_back(p->grad);
  m.zero_grad();
  m.forward(x2);
  CHECK(bool(m.forward(x1) == a));
  CHECK(bool(m.backward(dy) == dx_a));
  m.backward(dy);
  const auto params = m.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    const xt::xarray<float> twice = 2.0f * g_a[i];
    CHECK(compare_close(params[i]->grad, xt::cast<double>(twice), 1e-6, 1e-7).empty());
    CHECK(frobenius(g_a[i]) > 0.0);
  }
}

/// forward_time_major / backward_time_major give the bits of forward / backward: the states as
/// [T·B, H] rows (row t·B + b of out[b, t]), dx, every parameter gradient and hidden_grad_norms,
/// with dy written time-major into output_grad_time_major(); B = 32 also runs the transposed
/// steps. Before any forward the three accessors throw std::logic_error.
template <class M, class Make>
void check_time_major(const Make& make) {
  for (const std::size_t B : {std::size_t{3}, std::size_t{32}}) {
    INFO("batch " << B);
    Rng rng(9);
    const std::size_t T = 5, D = 3, H = 7, L = 2;
    M ref = make(D, H, L, rng);
    M tm = ref;
    CHECK_THROWS_WITH(tm.output_time_major(), Catch::Contains("no forward has run"));
    CHECK_THROWS_WITH(tm.output_grad_time_major(), Catch::Contains("no forward has run"));
    CHECK_THROWS_WITH(tm.backward_time_major(), Catch::Contains("no forward has run"));
    const Tensor3 x = random3(B, T, D, rng), dy = random3(B, T, H, rng);
    const Tensor3 out = ref.forward(x);
    tm.forward_time_major(x);
    const float* rows = tm.output_time_major();
    std::size_t out_diff = 0;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t j = 0; j < H; ++j) out_diff += rows[(t * B + b) * H + j] != out(b, t, j);
    CHECK(out_diff == 0);
    const Tensor3 dx = ref.backward(dy);
    float* g = tm.output_grad_time_major();
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < T; ++t) std::copy(&dy(b, t, 0), &dy(b, t, 0) + H, g + (t * B + b) * H);
    CHECK(bool(tm.backward_time_major() == dx));
    CHECK_THROWS_WITH(tm.backward_time_major(), Catch::Contains("call output_grad_time_major and fill it first"));
    const auto pr = ref.parameters(), pt = tm.parameters();
    REQUIRE(pr.size() == pt.size());
    for (std::size_t i = 0; i < pr.size(); ++i) {
      INFO("parameter " << i);
      CHECK(frobenius(pr[i]->grad) > 0.0);
      CHECK(bool(pr[i]->grad == pt[i]->grad));
    }
    CHECK(bool(ref.hidden_grad_norms() == tm.hidden_grad_norms()));
  }
}

/// Zero sizes, shape errors naming the argument (each part of the state on its own), and calls
/// out of order.
template <class M, class Make>
void check_errors(const Make& make) {
  using SP = StateParts<StateOf<M>>;
  Rng rng(2);
  CHECK_THROWS_AS(make(0, 4, 1, rng), std::invalid_argument);
  CHECK_THROWS_AS(make(3, 0, 1, rng), std::invalid_argument);
  CHECK_THROWS_AS(make(3, 4, 0, rng), std::invalid_argument);
  CHECK_THROWS_WITH(make(0, 4, 1, rng), Catch::Contains("input_size"));
  CHECK_THROWS_WITH(make(3, 0, 1, rng), Catch::Contains("hidden_size"));
  CHECK_THROWS_WITH(make(3, 4, 0, rng), Catch::Contains("num_layers"));

  const std::size_t B = 2, T = 3, D = 3, H = 4, L = 2;
  M m = make(D, H, L, rng);
  const Tensor3 x = xt::zeros<float>({B, T, D});
  const Tensor3 dy = xt::zeros<float>({B, T, H});
  CHECK_THROWS_AS(m.backward(dy), std::logic_error);
  CHECK_THROWS_AS(m.final_state(), std::logic_error);
  CHECK_THROWS_AS(m.hidden_grad_norms(), std::logic_error);
  CHECK_THROWS_AS(m.initial_state_grad(), std::logic_error);
  CHECK_THROWS_AS(m.weight_ih(L), std::out_of_range);

  CHECK_THROWS_AS(m.forward(Tensor3(xt::zeros<float>({B, T, D + 1}))), ShapeError);
  CHECK_THROWS_WITH(m.forward(Tensor3(xt::zeros<float>({B, T, D + 1}))),
                    Catch::Contains("x") && Catch::Contains("[2, 3, 4]"));
  for (const auto& bad : {SP::zeros(L + 1, B, H), SP::zeros(L, B + 1, H), SP::zeros(L, B, H + 1)}) {
    CHECK_THROWS_AS(m.forward(x, &bad), ShapeError);
    CHECK_THROWS_WITH(m.forward(x, &bad), Catch::Contains(SP::forward_args()[0]));
  }
  for (std::size_t i = 0; i < SP::names().size(); ++i) {  // one part wrong, the others right
    auto bad = SP::zeros(L, B, H);
    *SP::of(bad)[i] = xt::zeros<float>({L, B, H + 1});
    INFO("state part " << SP::forward_args()[i]);
    CHECK_THROWS_AS(m.forward(x, &bad), ShapeError);
    CHECK_THROWS_WITH(m.forward(x, &bad), Catch::Contains(SP::forward_args()[i]));
  }
  CHECK_THROWS_AS(m.backward(dy), std::logic_error);  // rejected forwards left nothing behind

  m.forward(x);
  CHECK_THROWS_AS(m.backward(Tensor3(xt::zeros<float>({B, T + 1, H}))), ShapeError);
  CHECK_THROWS_AS(m.backward(Tensor3(xt::zeros<float>({B, T, D}))), ShapeError);
  CHECK_THROWS_WITH(m.backward(Tensor3(xt::zeros<float>({B, T, D}))), Catch::Contains("dy"));
  for (std::size_t i = 0; i < SP::names().size(); ++i) {
    auto bad_final = SP::zeros(L, B, H);
    *SP::of(bad_final)[i] = xt::zeros<float>({L, B, H + 1});
    INFO("state part " << SP::backward_args()[i]);
    CHECK_THROWS_AS(m.backward(dy, &bad_final), ShapeError);
    CHECK_THROWS_WITH(m.backward(dy, &bad_final), Catch::Contains(SP::backward_args()[i]));
  }
  CHECK_THROWS_AS(m.hidden_grad_norms(), std::logic_error);
  CHECK_NOTHROW(m.backward(dy));
  CHECK(m.hidden_grad_norms().shape()[1] == T);
}

}  // namespace seqlab::test

// TemporalBlock and TCN (Bai, Kolter & Koltun 2018): keys and init, finite-difference gradients
// (block with and without downsample, dropout masks frozen; a weight-normalised TCN), PyTorch
// parity (tests/golden/tcn.json, tcn_wn.json from gen_conv.py), causality, the receptive field,
// input-gradient norms, train/eval, errors.
//
// ReLU kinks: a central difference that moves a pre-activation across 0 is meaningless. The
// gradient checks record the sign pattern of every pre-activation (a1, a2, s of each block) at
// the unperturbed point and REQUIRE that no perturbed forward changed it; eps = 1e-3 keeps the
// perturbations small. If a change of seeds or sizes makes that fail, pick another seed (the
// message says so) rather than loosening the tolerance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/nn/tcn.hpp"

using namespace seqlab;
using seqlab::test::flat;
using seqlab::test::kBwdAtol;
using seqlab::test::kBwdRtol;
using seqlab::test::kFwdAtol;
using seqlab::test::kFwdRtol;
using seqlab::test::check_gradients;
using seqlab::test::compare_close;
using seqlab::test::Fixture;
using seqlab::test::GradCheckOptions;
using seqlab::test::Probe;

namespace {

// Parameters drawn with O(1) scale (weights U(-0.5, 0.5), biases U(-0.2, 0.2)) so every path
// carries signal; the N(0, 0.01) init would make most effects vanish below float resolution.
void randomise(Module& m, Rng& rng) {
  for (auto& np : m.named_parameters()) {
    const bool is_bias = np.key.size() >= 4 && np.key.compare(np.key.size() - 4, 4, "bias") == 0;
    const float r = is_bias ? 0.2f : 0.5f;
    rng.fill_uniform(np.param->value, -r, r);
    if (np.key.size() >= 8 && np.key.compare(np.key.size() - 8, 8, "weight_g") == 0)
      rng.fill_uniform(np.param->value, 0.5f, 1.5f);
  }
}

void append_signs(const TemporalBlock& b, std::vector<bool>& out) {
  for (const Tensor3* t : {&b.conv1_output(), &b.conv2_output(), &b.residual_sum()})
    for (float v : *t) out.push_back(v > 0.0f);
}

// Gradient check of dL/dx and all parameters of `m` (a TemporalBlock or TCN), failing if any
// perturbation crossed a ReLU kink.
template <class M, class SignsFn>
void gradcheck_module(M& m, Tensor3 x, std::size_t out_channels, SignsFn signs) {
  Tensor3 dx = xt::zeros<float>(x.shape());
  const std::array<std::size_t, 3> out_shape{x.shape()[0], x.shape()[1], out_channels};
  m.forward(x);
  const std::vector<bool> ref = signs();
  std::size_t crossings = 0;
  auto forward = [&] {
    auto y = flat(m.forward(x));
    if (signs() != ref) ++crossings;
    return y;
  };
  auto backward = [&](const std::vector<float>& w) {
    m.zero_grad();
    m.forward(x);
    Tensor3 dy(out_shape);
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 g = m.backward(dy);
    std::copy(g.begin(), g.end(), dx.begin());
  };
  std::vector<Probe> probes{Probe{"x", x.data(), dx.data(), x.size()}};
  std::size_t expected = x.size();
  for (auto& np : m.named_parameters()) {
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
    expected += np.param->size();
  }
  GradCheckOptions opt;
  opt.eps = 1e-3;
  const auto res = check_gradients(forward, backward, probes, opt);
  INFO("perturbations that crossed a ReLU kink: " << crossings << " (if > 0, pick another seed)");
  REQUIRE(crossings == 0);
  INFO("worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  CHECK(res.checked == expected);
}

void require_close(const std::string& what, const xt::xarray<float>& a, const xt::xarray<double>& e,
                   double rtol, double atol) {
  const std::string msg = compare_close(a, e, rtol, atol);
  INFO(what << ": " << msg);
  REQUIRE(msg.empty());
}

bool rows_differ(const Tensor3& a, const Tensor3& b, std::size_t bi, std::size_t t) {
  for (std::size_t c = 0; c < a.shape()[2]; ++c)
    if (a(bi, t, c) != b(bi, t, c)) return true;
  return false;
}
}  // namespace

TEST_CASE("TCN lists Bai et al. state_dict keys", "[nn][tcn]") {
  Rng rng(1);
  TCN tcn(3, {5, 5}, 3, 0.2f, rng);
  const auto np = tcn.named_parameters();
  const std::vector<std::string> want{
      "network.0.conv1.weight", "network.0.conv1.bias", "network.0.conv2.weight",
      "network.0.conv2.bias", "network.0.downsample.weight", "network.0.downsample.bias",
      "network.1.conv1.weight", "network.1.conv1.bias", "network.1.conv2.weight",
      "network.1.conv2.bias"};
  REQUIRE(np.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(np[i].key == want[i]);
  CHECK(tcn.num_parameters() == (5 * 3 * 3 + 5) + (5 * 5 * 3 + 5) + (5 * 3 + 5) + 2 * (5 * 5 * 3 + 5));
  CHECK(tcn.block(0).has_downsample());
  CHECK_FALSE(tcn.block(1).has_downsample());
  CHECK(tcn.block(1).conv1.dilation() == 2);
  CHECK(tcn.block(1).conv2.dilation() == 2);
  CHECK(tcn.output_size() == 5);
  CHECK_THROWS_AS(tcn.block(2), std::out_of_range);

  TCN wn(2, {4}, 2, 0.0f, rng, true);
  const auto npw = wn.named_parameters();
  const std::vector<std::string> want_wn{
      "network.0.conv1.bias", "network.0.conv1.weight_g", "network.0.conv1.weight_v",
      "network.0.conv2.bias", "network.0.conv2.weight_g", "network.0.conv2.weight_v",
      "network.0.downsample.weight", "network.0.downsample.bias"};
  REQUIRE(npw.size() == want_wn.size());
  for (std::size_t i = 0; i < want_wn.size(); ++i) CHECK(npw[i].key == want_wn[i]);
}

TEST_CASE("TCN init uses N of 0 and 0.01 for conv weights and PyTorch bounds for biases", "[nn][tcn]") {
  Rng rng(2);
  TCN tcn(8, {32, 32}, 3, 0.0f, rng);
  auto sd = [](const xt::xarray<float>& w) {
    double s = 0, s2 = 0;
    for (float v : w) {
      s += v;
      s2 += double(v) * v;
    }
    const double n = w.size();
    return std::sqrt(s2 / n - (s / n) * (s / n));
  };
  CHECK(sd(tcn.block(1).conv2.weight.value) == Approx(0.01).epsilon(0.05));   // 3072 draws
  CHECK(sd(tcn.block(0).conv1.weight.value) == Approx(0.01).epsilon(0.08));   // 768 draws
  CHECK(sd(tcn.block(0).downsample->weight.value) == Approx(0.01).epsilon(0.15));  // 256 draws
  const float b1 = 1.0f / std::sqrt(8.0f * 3.0f), b2 = 1.0f / std::sqrt(32.0f * 3.0f);
  for (float v : tcn.block(0).conv1.bias.value) REQUIRE(std::abs(v) <= b1);
  for (float v : tcn.block(1).conv1.bias.value) REQUIRE(std::abs(v) <= b2);
  CHECK(xt::amax(xt::abs(tcn.block(0).conv1.bias.value))() > 0.5f * b1);

  // Weight norm: conv1/conv2 keep PyTorch's U(±1/sqrt(in·k)) weight as v, with g = ‖v‖.
  TCN wn(8, {16}, 3, 0.0f, rng, true);
  const auto& c1 = wn.block(0).conv1;
  for (float v : c1.weight_v.value) REQUIRE(std::abs(v) <= b1);
  CHECK(sd(c1.weight_v.value) == Approx(b1 / std::sqrt(3.0)).epsilon(0.1));
  for (std::size_t o = 0; o < 16; ++o) {
    double s = 0;
    for (std::size_t i = 0; i < 8 * 3; ++i) s += std::pow(c1.weight_v.value.data()[o * 24 + i], 2);
    CHECK(c1.weight_g.value.data()[o] == Approx(std::sqrt(s)).epsilon(1e-6));
  }

  Rng again(2);
  TCN tcn2(8, {32, 32}, 3, 0.0f, again);
  CHECK((tcn2.block(1).conv2.weight.value == tcn.block(1).conv2.weight.value));
}

TEST_CASE("TCN receptive field is 1 plus 2 times k-1 times 2^L minus 1", "[nn][tcn]") {
  Rng rng(3);
  CHECK(TCN(2, {4, 4, 4}, 2, 0.0f, rng).receptive_field() == 15);
  CHECK(TCN(2, {4, 4}, 3, 0.0f, rng).receptive_field() == 13);
  CHECK(TCN(2, {4}, 1, 0.0f, rng).receptive_field() == 1);
  CHECK(TCN(2, std::vector<std::size_t>(8, 2), 8, 0.0f, rng).receptive_field() == 1 + 2 * 7 * 255);
}

TEST_CASE("TemporalBlock gradients match finite differences with and without downsample", "[nn][tcn][gradcheck]") {
  for (std::size_t in : {3, 4}) {
    INFO("in_channels = " << in << " out_channels = 4");
    Rng rng(300 + in);  // seeds 100 + in and 200 + in put a pre-activation within eps of a kink
    TemporalBlock block(in, 4, 3, 2, 0.2f, rng);
    CHECK(block.has_downsample() == (in != 4));
    randomise(block, rng);
    block.train();
    block.freeze_dropout_masks(true);  // first forward draws, then the masks stay
    Tensor3 x({2, 7, in});
    rng.fill_uniform(x, -1, 1);
    gradcheck_module(block, x, 4, [&] {
      std::vector<bool> s;
      append_signs(block, s);
      return s;
    });
    // The masks did drop something, so the check covered dropout's backward.
    const auto& m = block.dropout1.mask();
    CHECK(std::count(m.begin(), m.end(), 0.0f) > 0);
  }
}

TEST_CASE("Weight-normalised TCN gradients match finite differences", "[nn][tcn][gradcheck]") {
  Rng rng(8);  // seed 7 put a pre-activation within eps of a ReLU kink
  TCN tcn(2, {3, 3}, 2, 0.1f, rng, true);
  randomise(tcn, rng);
  tcn.train();
  tcn.freeze_dropout_masks(true);
  Tensor3 x({2, 6, 2});
  rng.fill_uniform(x, -1, 1);
  gradcheck_module(tcn, x, 3, [&] {
    std::vector<bool> s;
    for (std::size_t i = 0; i < tcn.num_levels(); ++i) append_signs(tcn.block(i), s);
    return s;
  });
}

TEST_CASE("TCN matches a PyTorch TemporalConvNet with and without weight norm", "[nn][tcn][golden]") {
  struct Case {
    const char* file;
    std::size_t in;
    std::vector<std::size_t> channels;
    std::size_t k;
    bool wn;
    std::size_t n_params;
  };
  for (const Case& c : {Case{"tcn.json", 3, {5, 5}, 3, false, 10},
                        Case{"tcn_wn.json", 2, {4, 4}, 2, true, 14}}) {
    INFO("fixture " << c.file);
    const Fixture fx(c.file);
    Rng rng(0);
    TCN tcn(c.in, c.channels, c.k, 0.0f, rng, c.wn);
    tcn.eval();
    auto params = tcn.named_parameters();
    REQUIRE(params.size() == c.n_params);
    for (auto& np : params) {
      INFO("key " << np.key);
      REQUIRE(fx.has(np.key));
      np.param->value = fx.tensor(np.key);
    }
    const Tensor3 x = fx.tensor("x");
    const Tensor3 y = tcn.forward(x);
    require_close("y", y, fx.tensor_f64("y"), kFwdRtol, kFwdAtol);
    const Tensor3 dx = tcn.backward(fx.tensor("dy"));
    require_close("x.grad", dx, fx.tensor_f64("x.grad"), kBwdRtol, kBwdAtol);
    for (auto& np : params)
      require_close(np.key + ".grad", np.param->grad, fx.tensor_f64(np.key + ".grad"), kBwdRtol,
                    kBwdAtol);
  }
}

TEST_CASE("TCN is causal: changing x at t leaves every earlier output unchanged", "[nn][tcn]") {
  Rng rng(9);
  TCN tcn(3, {4, 5}, 3, 0.3f, rng);
  randomise(tcn, rng);
  tcn.eval();
  const std::size_t T = 16;
  Tensor3 x({2, T, 3});
  rng.fill_uniform(x, -1, 1);
  const Tensor3 y0 = tcn.forward(x);
  for (std::size_t t = 0; t < T; ++t) {
    INFO("perturbed t = " << t);
    Tensor3 xp = x;
    for (std::size_t c = 0; c < 3; ++c) xp(0, t, c) += 1.0f;
    const Tensor3 y = tcn.forward(xp);
    for (std::size_t u = 0; u < t; ++u) REQUIRE_FALSE(rows_differ(y, y0, 0, u));
    REQUIRE(rows_differ(y, y0, 0, t));
    for (std::size_t u = 0; u < T; ++u) REQUIRE_FALSE(rows_differ(y, y0, 1, u));  // other sequence
  }
}

TEST_CASE("TCN output at t depends on exactly receptive_field inputs", "[nn][tcn]") {
  // Perturbing x_s must move exactly the outputs s .. s+R-1 (bitwise comparison), so the output
  // at t = T-1 depends on exactly R inputs.
  struct Case {
    std::size_t k;
    std::vector<std::size_t> channels;
  };
  for (const Case& c : {Case{2, {6, 6, 6}}, Case{3, {5, 6}}}) {
    Rng rng(11 + c.k);
    TCN tcn(2, c.channels, c.k, 0.0f, rng);
    randomise(tcn, rng);
    const std::size_t R = tcn.receptive_field(), T = R + 6;
    INFO("k = " << c.k << ", levels = " << c.channels.size() << ", R = " << R);
    Tensor3 x({1, T, 2});
    rng.fill_uniform(x, -1, 1);
    const Tensor3 y0 = tcn.forward(x);
    std::size_t inputs_seen_by_last = 0;
    for (std::size_t s = 0; s < T; ++s) {
      Tensor3 xp = x;
      xp(0, s, 0) += 1.0f;
      xp(0, s, 1) -= 1.0f;
      const Tensor3 y = tcn.forward(xp);
      std::set<std::size_t> moved, want;
      for (std::size_t t = 0; t < T; ++t)
        if (rows_differ(y, y0, 0, t)) moved.insert(t);
      for (std::size_t t = s; t < std::min(T, s + R); ++t) want.insert(t);
      INFO("perturbed s = " << s);
      REQUIRE(moved == want);
      inputs_seen_by_last += moved.count(T - 1);
    }
    CHECK(inputs_seen_by_last == R);
  }
}

TEST_CASE("TCN input gradient norms are the per-step norms of dx and vanish outside the receptive field", "[nn][tcn]") {
  Rng rng(21);
  TCN tcn(3, {6, 6}, 2, 0.0f, rng);
  randomise(tcn, rng);
  const std::size_t R = tcn.receptive_field(), T = 12, B = 2;
  REQUIRE(R == 7);
  Tensor3 x({B, T, 3});
  rng.fill_uniform(x, -1, 1);
  tcn.forward(x);
  Tensor3 dy = xt::zeros<float>({B, T, std::size_t{6}});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t c = 0; c < 6; ++c) dy(b, T - 1, c) = rng.uniform(-1, 1);  // loss on the last step
  CHECK_THROWS_AS(tcn.input_grad_norms(), std::logic_error);
  const Tensor3 dx = tcn.backward(dy);
  const Tensor1& g = tcn.input_grad_norms();
  REQUIRE(g.size() == T);
  for (std::size_t t = 0; t < T; ++t) {
    double s = 0;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t c = 0; c < 3; ++c) s += double(dx(b, t, c)) * dx(b, t, c);
    INFO("t = " << t);
    CHECK(g(t) == Approx(std::sqrt(s)).epsilon(1e-6));
    if (t + R <= T - 1)
      CHECK(g(t) == 0.0f);
    else
      CHECK(g(t) > 0.0f);
  }
}

TEST_CASE("TCN set_training switches every dropout", "[nn][tcn]") {
  Rng rng(31);
  TCN tcn(3, {4, 4}, 2, 0.3f, rng);
  randomise(tcn, rng);
  Tensor3 x({2, 8, 3});
  rng.fill_uniform(x, -1, 1);
  tcn.train();
  const Tensor3 a = tcn.forward(x), b = tcn.forward(x);
  CHECK_FALSE((a == b));  // fresh masks each forward
  tcn.eval();
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK_FALSE(tcn.block(i).dropout1.training());
    CHECK_FALSE(tcn.block(i).dropout2.training());
  }
  const Tensor3 c = tcn.forward(x), d = tcn.forward(x);
  CHECK((c == d));
  CHECK(tcn.block(1).dropout2.last_was_identity());

  // Same seed, same training-mode outputs.
  Rng rng2(31);
  TCN twin(3, {4, 4}, 2, 0.3f, rng2);
  randomise(twin, rng2);
  CHECK((twin.forward(x) == a));
}

TEST_CASE("TCN and TemporalBlock reject bad configurations and wrong shapes", "[nn][tcn][errors]") {
  Rng rng(4);
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(TCN(3, {4}, 0, 0.0f, rng), Contains("kernel_size = 0"));
  CHECK_THROWS_WITH(TCN(3, {4}, 2, 1.0f, rng), Contains("dropout = 1"));
  CHECK_THROWS_WITH(TCN(3, {}, 2, 0.0f, rng), Contains("num_channels"));
  CHECK_THROWS_WITH(TCN(3, {4, 0}, 2, 0.0f, rng), Contains("num_channels[1] = 0"));
  CHECK_THROWS_WITH(TCN(0, {4}, 2, 0.0f, rng), Contains("num_inputs = 0"));
  CHECK_THROWS_AS(TemporalBlock(3, 4, 2, 0, 0.0f, rng), std::invalid_argument);  // dilation 0
  CHECK_THROWS_AS(TemporalBlock(3, 4, 0, 1, 0.0f, rng), std::invalid_argument);
  CHECK_THROWS_AS(TemporalBlock(3, 4, 2, 1, 1.0f, rng), std::invalid_argument);

  TCN tcn(3, {4, 5}, 2, 0.0f, rng);
  CHECK_THROWS_AS(tcn.backward(Tensor3(xt::zeros<float>({1, 6, 5}))), std::logic_error);
  CHECK_THROWS_WITH(tcn.forward(Tensor3(xt::zeros<float>({1, 6, 4}))), Contains("TCN.forward: x"));
  tcn.forward(Tensor3(xt::zeros<float>({1, 6, 3})));
  CHECK_THROWS_AS(tcn.backward(Tensor3(xt::zeros<float>({1, 6, 4}))), ShapeError);
  CHECK_THROWS_AS(tcn.backward(Tensor3(xt::zeros<float>({1, 5, 5}))), ShapeError);
  CHECK_NOTHROW(tcn.backward(Tensor3(xt::zeros<float>({1, 6, 5}))));
}

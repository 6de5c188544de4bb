// Conv1d: init, finite-difference gradients (dilation 1, 2, 4, 'same' padding, weight norm),
// PyTorch parity (tests/golden/conv1d_*.json from gen_conv.py), the direct formula over many row
// blocks and thread budgets, causality, the exact set of inputs an output sees, errors.
#include <catch2/catch.hpp>
#include "checks.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/nn/conv1d.hpp"

using namespace seqlab;
using seqlab::test::flat;
using seqlab::test::kBwdAtol;
using seqlab::test::kBwdRtol;
using seqlab::test::kFwdAtol;
using seqlab::test::kFwdRtol;
using seqlab::test::check_gradients;
using seqlab::test::compare_close;
using seqlab::test::Fixture;
using seqlab::test::Probe;

namespace {
using seqlab::test::copy_into;

// Checks dL/dx and dL/d(every listed parameter) of `conv` on x against central differences.
void gradcheck_conv(Conv1d& conv, Tensor3 x) {
  Tensor3 dx = xt::zeros<float>(x.shape());
  const std::array<std::size_t, 3> out_shape{x.shape()[0], x.shape()[1], conv.out_channels()};
  auto forward = [&] { return flat(conv.forward(x)); };
  auto backward = [&](const std::vector<float>& w) {
    conv.zero_grad();
    conv.forward(x);
    Tensor3 dy(out_shape);
    copy_into(w, dy);
    const Tensor3 g = conv.backward(dy);
    std::copy(g.begin(), g.end(), dx.begin());
  };
  std::vector<Probe> probes{Probe{"x", x.data(), dx.data(), x.size()}};
  std::size_t expected = x.size();
  for (auto& np : conv.named_parameters()) {
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
    expected += np.param->size();
  }
  const auto res = check_gradients(forward, backward, probes);
  INFO("worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  CHECK(res.checked == expected);
}

void load(Conv1d& conv, const Fixture& fx) {
  conv.weight.value = fx.tensor("weight");
  conv.bias.value = fx.tensor("bias");
}

void require_close(const char* what, const xt::xarray<float>& a, const xt::xarray<double>& e,
                   double rtol, double atol) {
  const std::string msg = compare_close(a, e, rtol, atol);
  INFO(what << ": " << msg);
  REQUIRE(msg.empty());
}
}  // namespace

TEST_CASE("Conv1d init is U of plus minus 1 over sqrt in times k and reproducible", "[nn][conv1d]") {
  Rng rng(3);
  Conv1d conv(16, 32, 4, rng, 2);
  REQUIRE(conv.weight.value.shape() == std::vector<std::size_t>{32, 16, 4});
  REQUIRE(conv.bias.value.shape() == std::vector<std::size_t>{32});
  const double bound = 1.0 / 8.0;  // 1/sqrt(16·4)
  double s = 0, s2 = 0, mx = 0;
  for (float w : conv.weight.value) {
    REQUIRE(std::abs(w) <= bound);
    s += w;
    s2 += double(w) * w;
    mx = std::max(mx, double(std::abs(w)));
  }
  const double n = conv.weight.value.size();
  CHECK(std::abs(s / n) < 0.05 * bound);  // ~4 standard errors of the mean (n = 2048)
  CHECK(std::abs(s2 / n - bound * bound / 3) < 0.1 * bound * bound / 3);  // variance of U(-b, b)
  CHECK(mx > 0.98 * bound);
  for (float b : conv.bias.value) REQUIRE(std::abs(b) <= bound);
  CHECK(xt::amax(xt::abs(conv.bias.value))() > 0.5 * bound);

  Rng again(3);
  Conv1d conv2(16, 32, 4, again, 2);
  CHECK((conv2.weight.value == conv.weight.value));
  CHECK((conv2.bias.value == conv.bias.value));

  CHECK(conv.dilation() == 2);
  CHECK(conv.causal());
  CHECK(conv.left_padding() == 6);
  CHECK(conv.receptive_field() == 7);
  Conv1d same(2, 2, 4, rng, 1, false);
  CHECK(same.left_padding() == 1);  // PyTorch padding='same': total 3, 1 left, 2 right
}

TEST_CASE("Conv1d lists PyTorch state_dict keys", "[nn][conv1d]") {
  Rng rng(1);
  Conv1d conv(3, 4, 2, rng);
  auto np = conv.named_parameters("tcn.conv1.");
  REQUIRE(np.size() == 2);
  CHECK(np[0].key == "tcn.conv1.weight");
  CHECK(np[1].key == "tcn.conv1.bias");
  CHECK(conv.num_parameters() == 4 * 3 * 2 + 4);

  Conv1d nb(3, 4, 2, rng, 1, true, false);
  REQUIRE(nb.named_parameters().size() == 1);
  CHECK(nb.num_parameters() == 24);

  conv.apply_weight_norm();  // torch.nn.utils.weight_norm: bias, weight_g, weight_v
  np = conv.named_parameters();
  REQUIRE(np.size() == 3);
  CHECK(np[0].key == "bias");
  CHECK(np[1].key == "weight_g");
  CHECK(np[2].key == "weight_v");
  CHECK(conv.weight_g.value.shape() == std::vector<std::size_t>{4, 1, 1});
  CHECK(conv.num_parameters() == 4 + 4 + 24);
}

TEST_CASE("Conv1d gradients match finite differences for dilation 1 2 4 and 8", "[nn][conv1d][gradcheck]") {
  // d = 1, 2, 4 run the tap tiles (the taps' span (k−1)·d <= T); d = 8 (span 16 > T = 10) the
  // im2col blocks with the narrow products.
  for (std::size_t d : {1, 2, 4, 8}) {
    INFO("dilation = " << d);
    Rng rng(20 + d);
    Conv1d conv(3, 2, 3, rng, d);
    Tensor3 x({2, 10, 3});  // T = 10 > receptive field 9 for d = 4: full and truncated windows
    rng.fill_uniform(x, -1, 1);
    gradcheck_conv(conv, x);
  }
}

TEST_CASE("Conv1d gradients match finite differences with same padding and without bias", "[nn][conv1d][gradcheck]") {
  Rng rng(31);
  Conv1d same(2, 3, 4, rng, 2, false);
  Tensor3 x({2, 7, 2});
  rng.fill_uniform(x, -1, 1);
  gradcheck_conv(same, x);

  Conv1d nb(3, 2, 2, rng, 3, true, false);
  Tensor3 x2({1, 8, 3});
  rng.fill_uniform(x2, -1, 1);
  gradcheck_conv(nb, x2);
}

TEST_CASE("Conv1d with weight norm keeps the function and its gradients match finite differences", "[nn][conv1d][gradcheck]") {
  Rng rng(41);
  Conv1d conv(3, 4, 3, rng, 2);
  Tensor3 x({2, 9, 3});
  rng.fill_uniform(x, -1, 1);
  const Tensor3 y0 = conv.forward(x);
  conv.apply_weight_norm();
  const Tensor3 y1 = conv.forward(x);
  CHECK(xt::allclose(y1, y0, 1e-5, 1e-6));
  CHECK_THROWS_AS(conv.apply_weight_norm(), std::logic_error);
  // g != ‖v‖, so the check sees the g/‖v‖ scaling.
  for (std::size_t o = 0; o < 4; ++o) conv.weight_g.value.data()[o] *= 0.5f + 0.3f * float(o);
  gradcheck_conv(conv, x);
}

TEST_CASE("Conv1d backward adds into the parameter gradients", "[nn][conv1d]") {
  Rng rng(5);
  Conv1d conv(3, 2, 3, rng, 2);
  Tensor3 x({2, 6, 3}), dy({2, 6, 2});
  rng.fill_uniform(x, -1, 1);
  rng.fill_uniform(dy, -1, 1);
  conv.forward(x);
  conv.backward(dy);
  const xt::xarray<float> gw1 = conv.weight.grad, gb1 = conv.bias.grad;
  conv.forward(x);
  conv.backward(dy);
  CHECK(xt::allclose(conv.weight.grad, 2.0f * gw1, 1e-6, 1e-7));
  CHECK(xt::allclose(conv.bias.grad, 2.0f * gb1, 1e-6, 1e-7));
  CHECK(xt::amax(xt::abs(gw1))() > 0.0f);
}

TEST_CASE("Conv1d matches PyTorch causal Conv1d with chomp and with same padding", "[nn][conv1d][golden]") {
  for (const char* name : {"conv1d_d2.json", "conv1d_d4.json", "conv1d_same_k4.json",
                           "conv1d_same_k3_d2.json"}) {
    INFO("fixture " << name);
    const Fixture fx(name);
    const auto& m = fx.meta();
    Rng rng(0);
    Conv1d conv(m.at("in_channels").get<std::size_t>(), m.at("out_channels").get<std::size_t>(),
                m.at("kernel_size").get<std::size_t>(), rng, m.at("dilation").get<std::size_t>(),
                m.at("causal").get<bool>());
    load(conv, fx);
    const Tensor3 x = fx.tensor("x");
    const Tensor3 dy = fx.tensor("dy");
    const Tensor3 y = conv.forward(x);
    require_close("y", y, fx.tensor_f64("y"), kFwdRtol, kFwdAtol);
    const Tensor3 dx = conv.backward(dy);
    require_close("x.grad", dx, fx.tensor_f64("x.grad"), kBwdRtol, kBwdAtol);
    require_close("weight.grad", conv.weight.grad, fx.tensor_f64("weight.grad"), kBwdRtol, kBwdAtol);
    require_close("bias.grad", conv.bias.grad, fx.tensor_f64("bias.grad"), kBwdRtol, kBwdAtol);
  }
}

TEST_CASE("Conv1d matches the direct formula over many row blocks at thread budgets 1, 2 and 3", "[nn][conv1d][threads]") {
  // Sizes whose GEMMs are split over the thread budget (>= kSplitGemmMacs multiply-adds) into
  // about 17 blocks of chunk_rows() rows, with block boundaries inside the sequences; against the
  // file comment's formulas evaluated in double. Causal and 'same' padding, with weight norm.
  // 16 channels run the tap tiles (tap_gemm.hpp), 24 the im2col blocks on OpenBLAS.
  const int saved = num_threads();
  const std::size_t B = 2, T = 8500, k = 4, d = 3;
  for (const std::size_t C : {std::size_t{16}, std::size_t{24}})
  for (const bool causal : {true, false}) {
    Rng rng(causal ? 61 : 62);
    Conv1d conv(C, C, k, rng, d, causal);
    if (!causal) conv.apply_weight_norm();
    REQUIRE(B * T >= 16 * conv.chunk_rows());
    Tensor3 x({B, T, C}), dy({B, T, C});
    rng.fill_uniform(x, -1, 1);
    rng.fill_uniform(dy, -1, 1);
    const long P = static_cast<long>(conv.left_padding());
    for (int budget : {1, 2, 3}) {
      INFO("channels " << C << ", causal " << causal << ", thread budget " << budget);
      set_num_threads(budget);
      conv.zero_grad();
      const Tensor3 y = conv.forward(x);
      const Tensor3 dx = conv.backward(dy);
      const Tensor3& w = conv.weight.value;  // the derived weight under weight norm
      xt::xarray<double> ey = xt::zeros<double>({B, T, C}), edx = xt::zeros<double>({B, T, C});
      xt::xarray<double> edw = xt::zeros<double>({C, C, k}), edb = xt::zeros<double>({C});
      double dw_l1 = 0;  // largest Σ|term| of a dW element: float sums of 17000 terms round by
                         // about 1e-7 of it, whatever the order, so it scales their atol
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t)
          for (std::size_t j = 0; j < k; ++j) {
            const long s = static_cast<long>(t + j * d) - P;  // y[t] reads x[s] through tap j
            if (s < 0 || s >= static_cast<long>(T)) continue;
            const auto u = static_cast<std::size_t>(s);
            for (std::size_t o = 0; o < C; ++o)
              for (std::size_t c = 0; c < C; ++c) {
                ey(b, t, o) += double(w(o, c, j)) * x(b, u, c);
                edx(b, u, c) += double(w(o, c, j)) * dy(b, t, o);
                edw(o, c, j) += double(dy(b, t, o)) * x(b, u, c);
                if (o == 0 && c == 0) dw_l1 += std::abs(double(dy(b, t, o)) * x(b, u, c));
              }
          }
      const double sum_atol = 1e-6 * dw_l1;  // also for the bias sums (terms of the same size)
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t)
          for (std::size_t o = 0; o < C; ++o) {
            ey(b, t, o) += conv.bias.value(o);
            edb(o) += dy(b, t, o);
          }
      require_close("y", y, ey, kFwdRtol, kFwdAtol);
      require_close("x.grad", dx, edx, kBwdRtol, kBwdAtol);
      require_close("bias.grad", conv.bias.grad, edb, kBwdRtol, sum_atol);
      if (causal) {
        require_close("weight.grad", conv.weight.grad, edw, kBwdRtol, sum_atol);
      } else {  // weight = g v/‖v‖: dg = Σ dW·v/‖v‖, dv = (g/‖v‖)(dW − (Σ dW·v)/‖v‖² v)
        xt::xarray<double> edg = xt::zeros<double>({C, std::size_t{1}, std::size_t{1}});
        xt::xarray<double> edv = xt::zeros<double>({C, C, k});
        const Tensor3& v = conv.weight_v.value;
        for (std::size_t o = 0; o < C; ++o) {
          double n2 = 0, dot = 0;
          for (std::size_t c = 0; c < C; ++c)
            for (std::size_t j = 0; j < k; ++j) {
              n2 += double(v(o, c, j)) * v(o, c, j);
              dot += edw(o, c, j) * v(o, c, j);
            }
          const double nrm = std::sqrt(n2), g = conv.weight_g.value(o, 0, 0);
          edg(o, 0, 0) = dot / nrm;
          for (std::size_t c = 0; c < C; ++c)
            for (std::size_t j = 0; j < k; ++j)
              edv(o, c, j) = g / nrm * (edw(o, c, j) - dot / n2 * v(o, c, j));
        }
        require_close("weight_g.grad", conv.weight_g.grad, edg, kBwdRtol, sum_atol);
        require_close("weight_v.grad", conv.weight_v.grad, edv, kBwdRtol, sum_atol);
      }
    }
  }
  set_num_threads(saved);
}

TEST_CASE("Conv1d is causal: changing x at t leaves every earlier output unchanged", "[nn][conv1d]") {
  Rng rng(7);
  for (std::size_t d : {1, 3}) {
    Conv1d conv(3, 4, 3, rng, d);
    Tensor3 x({2, 12, 3});
    rng.fill_uniform(x, -1, 1);
    const Tensor3 y0 = conv.forward(x);
    for (std::size_t t = 0; t < 12; ++t) {
      INFO("dilation " << d << ", perturbed t = " << t);
      Tensor3 xp = x;
      for (std::size_t c = 0; c < 3; ++c) xp(1, t, c) += 0.5f;
      const Tensor3 y = conv.forward(xp);
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t u = 0; u < t; ++u)
          for (std::size_t o = 0; o < 4; ++o) REQUIRE(y(b, u, o) == y0(b, u, o));
      bool changed = false;
      for (std::size_t o = 0; o < 4; ++o) changed |= y(1, t, o) != y0(1, t, o);
      REQUIRE(changed);  // tap k-1 sees x_t itself
    }
  }
}

TEST_CASE("Conv1d output at t sees exactly the inputs t minus j times d", "[nn][conv1d]") {
  // Causal, k = 3, d = 4: y_t depends on x_{t-8}, x_{t-4}, x_t and on nothing else; the check
  // perturbs each input in turn and records which outputs move (bitwise).
  Rng rng(8);
  const std::size_t k = 3, d = 4, T = 20;
  Conv1d conv(2, 3, k, rng, d);
  Tensor3 x({1, T, 2});
  rng.fill_uniform(x, -1, 1);
  const Tensor3 y0 = conv.forward(x);
  for (std::size_t s = 0; s < T; ++s) {
    Tensor3 xp = x;
    xp(0, s, 0) += 1.0f;
    xp(0, s, 1) -= 1.0f;
    const Tensor3 y = conv.forward(xp);
    std::set<std::size_t> moved, want;
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t o = 0; o < 3; ++o)
        if (y(0, t, o) != y0(0, t, o)) moved.insert(t);
    for (std::size_t j = 0; j < k; ++j)
      if (s + j * d < T) want.insert(s + j * d);
    INFO("perturbed input s = " << s);
    REQUIRE(moved == want);
  }
}

TEST_CASE("Conv1d rejects bad configurations and wrong shapes", "[nn][conv1d][errors]") {
  Rng rng(2);
  using Catch::Matchers::Contains;
  CHECK_THROWS_AS(Conv1d(3, 4, 0, rng), std::invalid_argument);
  CHECK_THROWS_WITH(Conv1d(3, 4, 0, rng), Contains("kernel_size = 0"));
  CHECK_THROWS_WITH(Conv1d(3, 4, 2, rng, 0), Contains("dilation = 0"));
  CHECK_THROWS_WITH(Conv1d(0, 4, 2, rng), Contains("in_channels = 0"));
  CHECK_THROWS_WITH(Conv1d(3, 0, 2, rng), Contains("out_channels = 0"));

  Conv1d conv(3, 4, 2, rng, 2);
  CHECK_THROWS_AS(conv.backward(Tensor3(xt::zeros<float>({2, 5, 4}))), std::logic_error);
  CHECK_THROWS_AS(conv.forward(Tensor3(xt::zeros<float>({2, 5, 4}))), ShapeError);
  CHECK_THROWS_WITH(conv.forward(Tensor3(xt::zeros<float>({2, 5, 4}))),
                    Contains("Conv1d.forward: x") && Contains("[2, 5, 4]"));
  conv.forward(Tensor3(xt::zeros<float>({2, 5, 3})));
  CHECK_THROWS_AS(conv.backward(Tensor3(xt::zeros<float>({2, 5, 3}))), ShapeError);  // channels
  CHECK_THROWS_AS(conv.backward(Tensor3(xt::zeros<float>({2, 4, 4}))), ShapeError);  // T
  CHECK_THROWS_AS(conv.backward(Tensor3(xt::zeros<float>({1, 5, 4}))), ShapeError);  // B
  CHECK_NOTHROW(conv.backward(Tensor3(xt::zeros<float>({2, 5, 4}))));

  conv.weight.value = xt::zeros<float>({3, 4, 2});  // PyTorch layout is [out, in, k]
  CHECK_THROWS_AS(conv.forward(Tensor3(xt::zeros<float>({2, 5, 3}))), ShapeError);

  Conv1d zero(2, 2, 1, rng);
  zero.weight.value = xt::zeros<float>({2, 2, 1});
  CHECK_THROWS_AS(zero.apply_weight_norm(), std::logic_error);
}

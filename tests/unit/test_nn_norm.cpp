// Norms: LayerNorm, RMSNorm, BatchNorm (naive and masked), none, PowerNorm, make_norm. Field
// cases, PyTorch parity (tests/golden/norm_*.json from gen_norm.py), finite-difference gradients
// (fake loss sum(w ⊙ y) with random w; with padding present), padding and train/eval properties,
// the n < 2 rule of BatchNorm, PowerNorm's approximate backward against Algorithm 1, errors.
#include <catch2/catch.hpp>
#include "checks.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/norm.hpp"

using namespace seqlab;
using seqlab::test::flat;
using seqlab::test::kBwdAtol;
using seqlab::test::kBwdRtol;
using seqlab::test::kFwdAtol;
using seqlab::test::kFwdRtol;
using Catch::Matchers::WithinAbs;
using seqlab::test::check_gradients;
using seqlab::test::compare_close;
using seqlab::test::Fixture;
using seqlab::test::Probe;

namespace {
using seqlab::test::require_close;

// REQUIRE actual ≈ expected with the worst element in the failure message.
// Padding mask [B, T] from the real lengths of each sequence.
PaddingMask mask_from_lengths(const std::vector<std::size_t>& lengths, std::size_t t) {
  PaddingMask m = xt::zeros<std::uint8_t>({lengths.size(), t});
  for (std::size_t b = 0; b < lengths.size(); ++b)
    for (std::size_t i = lengths[b]; i < t; ++i) m(b, i) = 1;
  return m;
}

Tensor3 random_x(Rng& rng, std::size_t b, std::size_t t, std::size_t d, float lo = -2.0f,
                 float hi = 2.0f) {
  Tensor3 x = xt::zeros<float>({b, t, d});
  rng.fill_uniform(x, lo, hi);
  return x;
}

// Finite-difference check of dL/dx and every parameter of `norm`, L = Σ w ⊙ y.
void gradcheck_norm(Norm& norm, Tensor3 x, const PaddingMask* padding) {
  Tensor3 dx = xt::zeros<float>(x.shape());
  auto forward = [&] { return flat(norm.forward(x, padding)); };
  auto backward = [&](const std::vector<float>& w) {
    norm.zero_grad();
    norm.forward(x, padding);
    Tensor3 dy = xt::zeros<float>(x.shape());
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 g = norm.backward(dy);
    std::copy(g.begin(), g.end(), dx.begin());
  };
  std::vector<Probe> probes{Probe{"x", x.data(), dx.data(), x.size()}};
  for (auto& np : norm.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  const auto res = check_gradients(forward, backward, probes);
  INFO(norm.name() << " worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  std::size_t n = x.size();
  for (auto& np : norm.named_parameters()) n += np.param->size();
  CHECK(res.checked == n);
}

// Non-trivial γ, β so the gradient checks and fixtures exercise them.
void randomise_parameters(Norm& norm, Rng& rng) {
  for (auto& np : norm.named_parameters()) {
    if (np.key == "bias")
      rng.fill_uniform(np.param->value, -0.5f, 0.5f);
    else
      rng.fill_uniform(np.param->value, 0.5f, 1.5f);
  }
}

PaddingMask to_mask(const xt::xarray<float>& m) {
  PaddingMask out = xt::zeros<std::uint8_t>({m.shape()[0], m.shape()[1]});
  for (std::size_t i = 0; i < m.size(); ++i) out.data()[i] = m.data()[i] != 0.0f ? 1 : 0;
  return out;
}
}  // namespace

// ---- field cases --------------------------------------------------------------------------------

TEST_CASE("LayerNorm field case uses the biased variance with eps inside the root", "[nn][norm][layer_norm]") {
  LayerNorm ln(4);
  const Tensor3 x = {{{1.0f, 0.0f, 0.0f, 0.0f}}};
  const Tensor3 y = ln.forward(x);
  // Not [1.5, -0.5, ...] (unbiased std, eps outside): mean 0.25, var 0.1875.
  CHECK_THAT(y(0, 0, 0), WithinAbs(1.732005, 1e-6));
  for (int j = 1; j < 4; ++j) CHECK_THAT(y(0, 0, j), WithinAbs(-0.577335, 1e-6));

  LayerNorm ln2(2);
  const Tensor3 y2 = ln2.forward(Tensor3{{{0.0f, 2.0f}}});
  CHECK_THAT(y2(0, 0, 0), WithinAbs(-0.999995, 1e-6));
  CHECK_THAT(y2(0, 0, 1), WithinAbs(0.999995, 1e-6));
}

TEST_CASE("RMSNorm field case divides by the root mean square without centring", "[nn][norm][rms_norm]") {
  RMSNorm rms(2);
  const Tensor3 y = rms.forward(Tensor3{{{3.0f, 4.0f}}});
  // rms([3, 4]) = sqrt(12.5) = 3.535534
  CHECK_THAT(y(0, 0, 0), WithinAbs(0.848528, 1e-6));
  CHECK_THAT(y(0, 0, 1), WithinAbs(1.131371, 1e-6));
  // A constant row is not centred (LayerNorm would give 0).
  const Tensor3 yc = rms.forward(Tensor3{{{2.0f, 2.0f}}});
  CHECK_THAT(yc(0, 0, 0), WithinAbs(1.0, 1e-6));
  // eps inside the root: x = [0.1, 0.1], eps 0.01 -> 0.1 / sqrt(0.01 + 0.01) = 0.707107
  // (eps outside, as the authors' code, would give 0.1 / 0.11 = 0.909091).
  RMSNorm big_eps(2, 0.01f);
  const Tensor3 ye = big_eps.forward(Tensor3{{{0.1f, 0.1f}}});
  CHECK_THAT(ye(0, 0, 0), WithinAbs(0.707107, 1e-6));
}

TEST_CASE("BatchNorm field case with momentum 1 gives the unbiased running variance", "[nn][norm][batch_norm]") {
  BatchNorm bn(4, false, 1.0f);
  const Tensor3 x = {{{2, 15, 2, 1}, {2, 17, 2, 1}, {-4, -2, -2, -1}}};  // [1, 3, 4]: 3 rows
  const Tensor3 y = bn.forward(x);
  const std::vector<double> rm{0, 10, 0.666667, 0.333333}, rv{12, 109, 5.333333, 1.333333};
  for (std::size_t j = 0; j < 4; ++j) {
    INFO("feature " << j);
    CHECK_THAT(bn.running_mean(j), WithinAbs(rm[j], 1e-5));
    CHECK_THAT(bn.running_var(j), WithinAbs(rv[j], 1e-4));
  }
  // Normalisation uses the biased batch variance: 24/3 = 8 for feature 0.
  CHECK_THAT(y(0, 0, 0), WithinAbs(0.707106, 1e-6));
  CHECK_THAT(bn.last_batch_stats().var(0), WithinAbs(8.0, 1e-5));
  CHECK(bn.last_batch_stats().count == 3);
  CHECK(bn.num_batches_tracked == 1);
}

TEST_CASE("BatchNorm over padding: masked statistics exclude padded positions and naive ones do not", "[nn][norm][batch_norm]") {
  // d = 1; sequence 0 holds the real values 1..5, sequence 1 is entirely padding (zeros).
  Tensor3 x = xt::zeros<float>({2, 5, 1});
  for (int i = 0; i < 5; ++i) x(0, i, 0) = static_cast<float>(i + 1);
  const PaddingMask pad = mask_from_lengths({5, 0}, 5);

  BatchNorm masked(1, true), naive(1, false);
  const Tensor3 ym = masked.forward(x, &pad);
  const Tensor3 yn = naive.forward(x, &pad);
  CHECK_THAT(masked.last_batch_stats().mean(0), WithinAbs(3.0, 1e-6));
  CHECK_THAT(masked.last_batch_stats().var(0), WithinAbs(2.0, 1e-6));
  CHECK(masked.last_batch_stats().count == 5);
  CHECK_THAT(naive.last_batch_stats().mean(0), WithinAbs(1.5, 1e-6));
  CHECK_THAT(naive.last_batch_stats().var(0), WithinAbs(3.25, 1e-6));
  CHECK(naive.last_batch_stats().count == 10);
  // Running variance: 0.9·1 + 0.1·unbiased (2·5/4 = 2.5 masked, 3.25·10/9 naive).
  CHECK_THAT(masked.running_var(0), WithinAbs(0.9 + 0.25, 1e-6));
  CHECK_THAT(naive.running_var(0), WithinAbs(0.9 + 0.1 * 3.25 * 10 / 9, 1e-6));

  // Other pad values: no real output of the masked variant moves; the naive ones do.
  Tensor3 x2 = x;
  for (int i = 0; i < 5; ++i) x2(1, i, 0) = 7.0f + i;
  BatchNorm masked2(1, true), naive2(1, false);
  const Tensor3 ym2 = masked2.forward(x2, &pad);
  const Tensor3 yn2 = naive2.forward(x2, &pad);
  double naive_change = 0;
  for (int i = 0; i < 5; ++i) {
    CHECK(ym2(0, i, 0) == ym(0, i, 0));
    naive_change = std::max(naive_change, double(std::abs(yn2(0, i, 0) - yn(0, i, 0))));
  }
  CHECK(naive_change > 0.5);
}

// ---- PyTorch parity -----------------------------------------------------------------------------

TEST_CASE("LayerNorm matches PyTorch nn.LayerNorm", "[nn][norm][layer_norm][golden]") {
  const Fixture fx("norm_layer_norm.json");
  LayerNorm ln(5);
  ln.weight.value = fx.tensor("weight");
  ln.bias.value = fx.tensor("bias");
  const Tensor3 y = ln.forward(Tensor3(fx.tensor("x")));
  require_close("y", y, fx.tensor_f64("y"), kFwdRtol, kFwdAtol);
  const Tensor3 dx = ln.backward(Tensor3(fx.tensor("dy")));
  require_close("x.grad", dx, fx.tensor_f64("x.grad"), kBwdRtol, kBwdAtol);
  require_close("weight.grad", ln.weight.grad, fx.tensor_f64("weight.grad"), kBwdRtol, kBwdAtol);
  require_close("bias.grad", ln.bias.grad, fx.tensor_f64("bias.grad"), kBwdRtol, kBwdAtol);
}

TEST_CASE("RMSNorm matches the Zhang and Sennrich formula", "[nn][norm][rms_norm][golden]") {
  const Fixture fx("norm_rms_norm.json");
  for (const std::string c : {"default", "eps"}) {
    INFO("case " << c);
    const float eps = fx.meta().at(c + ".eps").get<float>();
    RMSNorm rms(5, eps);
    rms.weight.value = fx.tensor(c + ".weight");
    const Tensor3 y = rms.forward(Tensor3(fx.tensor(c + ".x")));
    require_close("y", y, fx.tensor_f64(c + ".y"), kFwdRtol, kFwdAtol);
    const Tensor3 dx = rms.backward(Tensor3(fx.tensor(c + ".dy")));
    require_close("x.grad", dx, fx.tensor_f64(c + ".x.grad"), kBwdRtol, kBwdAtol);
    require_close("weight.grad", rms.weight.grad, fx.tensor_f64(c + ".weight.grad"), kBwdRtol,
                  kBwdAtol);
  }
}

TEST_CASE("BatchNorm matches PyTorch BatchNorm1d over three train steps and eval", "[nn][norm][batch_norm][golden]") {
  for (bool masked : {false, true}) {
    INFO("masked = " << masked);
    const Fixture fx(masked ? "norm_masked_batch_norm.json" : "norm_batch_norm.json");
    BatchNorm bn(5, masked);
    bn.weight.value = fx.tensor("weight");
    bn.bias.value = fx.tensor("bias");
    for (int step = 1; step <= 3; ++step) {
      const std::string k = "step" + std::to_string(step) + ".";
      INFO("step " << step);
      const Tensor3 x = fx.tensor(k + "x");
      PaddingMask pad;
      if (masked) pad = to_mask(fx.tensor(k + "padding"));
      const Tensor3 y = bn.forward(x, masked ? &pad : nullptr);
      require_close("y", y, fx.tensor_f64(k + "y"), kFwdRtol, kFwdAtol);
      require_close("running_mean", bn.running_mean, fx.tensor_f64(k + "running_mean"), kFwdRtol,
                    kFwdAtol);
      require_close("running_var", bn.running_var, fx.tensor_f64(k + "running_var"), kFwdRtol,
                    kFwdAtol);
      // Batch statistics (biased) of the positions that entered them, from x in double.
      const std::size_t n = x.shape()[0] * x.shape()[1];
      xt::xarray<double> mean = xt::zeros<double>({5}), var = xt::zeros<double>({5});
      std::size_t count = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (masked && pad.data()[i]) continue;
        ++count;
        for (std::size_t j = 0; j < 5; ++j) mean(j) += x.data()[i * 5 + j];
      }
      mean /= double(count);
      for (std::size_t i = 0; i < n; ++i) {
        if (masked && pad.data()[i]) continue;
        for (std::size_t j = 0; j < 5; ++j) var(j) += std::pow(x.data()[i * 5 + j] - mean(j), 2);
      }
      var /= double(count);
      CHECK(bn.last_batch_stats().count == count);
      const std::size_t real_positions[3] = {9, 7, 10};  // lengths [4,2,3], [1,4,2], [3,3,4]
      CHECK(count == (masked ? real_positions[step - 1] : std::size_t{12}));
      require_close("last mean", bn.last_batch_stats().mean, mean, kFwdRtol, kFwdAtol);
      require_close("last var", bn.last_batch_stats().var, var, kFwdRtol, kFwdAtol);
      if (step == 3) {
        const Tensor3 dx = bn.backward(Tensor3(fx.tensor(k + "dy")));
        require_close("x.grad", dx, fx.tensor_f64(k + "x.grad"), kBwdRtol, kBwdAtol);
        require_close("weight.grad", bn.weight.grad, fx.tensor_f64("weight.grad"), kBwdRtol,
                      kBwdAtol);
        require_close("bias.grad", bn.bias.grad, fx.tensor_f64("bias.grad"), kBwdRtol, kBwdAtol);
      }
    }
    CHECK(bn.num_batches_tracked == 3);
    bn.eval();
    const Tensor3 y = bn.forward(Tensor3(fx.tensor("eval.x")));
    require_close("eval y", y, fx.tensor_f64("eval.y"), kFwdRtol, kFwdAtol);
  }
}

// ---- gradient checks ----------------------------------------------------------------------------

TEST_CASE("LayerNorm and RMSNorm gradients match finite differences", "[nn][norm][gradcheck]") {
  Rng rng(21);
  const PaddingMask pad = mask_from_lengths({4, 2}, 4);
  SECTION("LayerNorm affine") {
    LayerNorm ln(5);
    randomise_parameters(ln, rng);
    gradcheck_norm(ln, random_x(rng, 2, 4, 5), &pad);
  }
  SECTION("LayerNorm without affine") {
    LayerNorm ln(5, 1e-5f, false);
    CHECK(ln.num_parameters() == 0);
    gradcheck_norm(ln, random_x(rng, 2, 4, 5), nullptr);
  }
  SECTION("RMSNorm") {
    RMSNorm rms(5);
    randomise_parameters(rms, rng);
    gradcheck_norm(rms, random_x(rng, 2, 4, 5), &pad);
  }
  SECTION("RMSNorm with a large eps") {
    RMSNorm rms(5, 0.5f);
    randomise_parameters(rms, rng);
    gradcheck_norm(rms, random_x(rng, 2, 4, 5, -1.0f, 1.0f), nullptr);
  }
  SECTION("none") {
    auto id = make_norm("none", 5);
    gradcheck_norm(*id, random_x(rng, 2, 4, 5), &pad);
  }
}

TEST_CASE("BatchNorm gradients match finite differences in both modes with padding present", "[nn][norm][batch_norm][gradcheck]") {
  Rng rng(22);
  const PaddingMask pad = mask_from_lengths({4, 2, 3}, 4);  // 9 of 12 positions real
  for (bool masked : {false, true}) {
    INFO("masked = " << masked);
    BatchNorm bn(3, masked);
    randomise_parameters(bn, rng);
    // Padded positions hold non-zero values: they must not matter to the masked statistics.
    gradcheck_norm(bn, random_x(rng, 3, 4, 3), &pad);
  }
  {
    INFO("eval mode: constants, dx = γ dy / sqrt(running_var + eps)");
    BatchNorm bn(3, true);
    randomise_parameters(bn, rng);
    bn.running_mean = Tensor1{0.3f, -0.2f, 0.1f};
    bn.running_var = Tensor1{0.5f, 2.0f, 1.2f};
    bn.eval();
    gradcheck_norm(bn, random_x(rng, 3, 4, 3), &pad);
  }
}

TEST_CASE("Masked BatchNorm gives padded inputs only the direct gradient", "[nn][norm][batch_norm]") {
  Rng rng(23);
  BatchNorm bn(3, true);
  randomise_parameters(bn, rng);
  const PaddingMask pad = mask_from_lengths({4, 1}, 4);
  const Tensor3 x = random_x(rng, 2, 4, 3);
  bn.forward(x, &pad);
  Tensor3 dy = random_x(rng, 2, 4, 3);
  const Tensor3 dx = bn.backward(dy);
  const auto& st = bn.last_batch_stats();
  for (std::size_t t = 1; t < 4; ++t)
    for (std::size_t j = 0; j < 3; ++j) {
      const double direct = bn.weight.value(j) * dy(1, t, j) / std::sqrt(st.var(j) + bn.eps());
      CHECK_THAT(dx(1, t, j), WithinAbs(direct, 1e-5));
    }
}

// ---- properties ---------------------------------------------------------------------------------

TEST_CASE("Padding leaves real positions unchanged for LayerNorm and masked BatchNorm but not naive BatchNorm", "[nn][norm][padding]") {
  Rng rng(31);
  const std::size_t D = 4;
  // Batch of two sequences, lengths 5 and 3, padded to T = 5; the padded slots hold junk.
  const PaddingMask pad = mask_from_lengths({5, 3}, 5);
  Tensor3 x = random_x(rng, 2, 5, D);
  for (std::size_t t = 3; t < 5; ++t)
    for (std::size_t j = 0; j < D; ++j) x(1, t, j) = 10.0f + 3.0f * static_cast<float>(t + j);
  // The same 8 real positions without any padding, as one sequence.
  Tensor3 real = xt::zeros<float>({std::size_t{1}, std::size_t{8}, D});
  std::vector<std::pair<std::size_t, std::size_t>> pos;
  for (std::size_t t = 0; t < 5; ++t) pos.push_back({0, t});
  for (std::size_t t = 0; t < 3; ++t) pos.push_back({1, t});
  for (std::size_t k = 0; k < pos.size(); ++k)
    for (std::size_t j = 0; j < D; ++j) real(0, k, j) = x(pos[k].first, pos[k].second, j);

  auto max_diff = [&](Norm& padded_norm, Norm& plain_norm) {
    const Tensor3 yp = padded_norm.forward(x, &pad);
    const Tensor3 yr = plain_norm.forward(real);
    double m = 0;
    for (std::size_t k = 0; k < pos.size(); ++k)
      for (std::size_t j = 0; j < D; ++j)
        m = std::max(m, double(std::abs(yp(pos[k].first, pos[k].second, j) - yr(0, k, j))));
    return m;
  };
  for (const std::string name : {"layer_norm", "rms_norm", "masked_batch_norm"}) {
    INFO(name);
    auto a = make_norm(name, D), b = make_norm(name, D);
    CHECK(max_diff(*a, *b) <= 1e-6);
  }
  auto a = make_norm("batch_norm", D), b = make_norm("batch_norm", D);
  CHECK(max_diff(*a, *b) > 0.1);
}

TEST_CASE("BatchNorm eval mode normalises with the running statistics", "[nn][norm][batch_norm]") {
  Rng rng(32);
  BatchNorm bn(3, false);
  randomise_parameters(bn, rng);
  bn.forward(random_x(rng, 2, 4, 3));  // one train step: sets last_batch_stats and buffers
  const Tensor1 rm = {0.5f, -1.0f, 2.0f}, rv = {4.0f, 0.25f, 1.0f};
  bn.running_mean = rm;
  bn.running_var = rv;
  const Tensor1 last_mean = bn.last_batch_stats().mean;
  bn.eval();
  const Tensor3 x = random_x(rng, 2, 4, 3);
  const Tensor3 y = bn.forward(x);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      const double want = bn.weight.value(j) * (x.data()[i * 3 + j] - rm(j)) /
                              std::sqrt(rv(j) + 1e-5) + bn.bias.value(j);
      CHECK_THAT(y.data()[i * 3 + j], WithinAbs(want, 1e-5));
    }
  // A single position in eval mode gives the same output as inside the batch.
  const Tensor3 one = xt::view(x, xt::range(1, 2), xt::range(2, 3), xt::all());
  CHECK(bn.forward(one)(0, 0, 1) == y(1, 2, 1));
  // Eval changes neither the buffers nor last_batch_stats.
  CHECK((bn.running_mean == rm));
  CHECK((bn.running_var == rv));
  CHECK(bn.num_batches_tracked == 1);
  CHECK((bn.last_batch_stats().mean == last_mean));
}

TEST_CASE("Norm train and eval switch BatchNorm between batch and running statistics", "[nn][norm][batch_norm]") {
  Rng rng(33);
  auto norm = make_norm("masked_batch_norm", 3);
  auto& bn = dynamic_cast<BatchNorm&>(*norm);
  const Tensor3 x = random_x(rng, 2, 4, 3, 1.0f, 5.0f);  // mean far from the initial running 0
  CHECK(norm->training());
  const Tensor3 y_train = norm->forward(x);
  CHECK(bn.num_batches_tracked == 1);
  const Tensor1 rm1 = bn.running_mean;
  CHECK(xt::amax(xt::abs(rm1))() > 0.1f);

  norm->eval();
  const Tensor3 y_eval = norm->forward(x);
  CHECK(bn.num_batches_tracked == 1);
  CHECK((bn.running_mean == rm1));
  CHECK(xt::amax(xt::abs(y_eval - y_train))() > 0.1f);

  norm->train();
  const Tensor3 y_train2 = norm->forward(x);
  CHECK(bn.num_batches_tracked == 2);
  CHECK(xt::amax(xt::abs(bn.running_mean - rm1))() > 0.01f);
  CHECK(xt::allclose(y_train2, y_train, 0.0, 1e-6));  // batch statistics: the same x, the same y
  // Batch-statistic outputs have mean β and (biased) variance γ² per feature.
  for (std::size_t j = 0; j < 3; ++j) {
    const auto col = xt::eval(xt::view(xt::reshape_view(y_train2, {8, 3}), xt::all(), j));
    CHECK_THAT(xt::mean(col)(), WithinAbs(0.0, 1e-5));
    CHECK_THAT(xt::variance(col)(), WithinAbs(1.0, 1e-3));  // eps shrinks it by ~1e-5/var
  }
}

TEST_CASE("BatchNorm refuses to train on fewer than 2 positions and changes nothing", "[nn][norm][batch_norm]") {
  Rng rng(34);
  BatchNorm bn(2, true);
  const Tensor3 x = random_x(rng, 2, 3, 2);
  bn.forward(x);  // a valid step first
  const Tensor1 rm = bn.running_mean, rv = bn.running_var;
  const auto stats = bn.last_batch_stats();

  const PaddingMask all_padded = xt::ones<std::uint8_t>({2, 3});
  CHECK_THROWS_AS(bn.forward(x, &all_padded), std::invalid_argument);
  CHECK_THROWS_WITH(bn.forward(x, &all_padded),
                    Catch::Matchers::Contains("0 non-padded position(s) of 6") &&
                        Catch::Matchers::Contains("at least 2"));
  const PaddingMask one_real = mask_from_lengths({1, 0}, 3);
  CHECK_THROWS_AS(bn.forward(x, &one_real), std::invalid_argument);
  CHECK((bn.running_mean == rm));
  CHECK((bn.running_var == rv));
  CHECK(bn.num_batches_tracked == 1);
  CHECK(bn.last_batch_stats().count == stats.count);
  CHECK((bn.last_batch_stats().mean == stats.mean));
  // The cache of the last successful forward is still the one backward uses.
  CHECK_NOTHROW(bn.backward(Tensor3(xt::ones<float>({2, 3, 2}))));

  // Naive BatchNorm on a single position.
  BatchNorm naive(2, false);
  CHECK_THROWS_WITH(naive.forward(random_x(rng, 1, 1, 2)),
                    Catch::Matchers::Contains("1 position(s)"));
  CHECK(naive.last_batch_stats().count == 0);
  CHECK(naive.last_batch_stats().mean.size() == 0);
  CHECK(naive.num_batches_tracked == 0);

  // Eval mode has no such limit: finite outputs, even for an all-padded batch.
  bn.eval();
  const Tensor3 y = bn.forward(x, &all_padded);
  for (float v : y) REQUIRE(std::isfinite(v));
  naive.eval();
  CHECK_NOTHROW(naive.forward(random_x(rng, 1, 1, 2)));
}

TEST_CASE("Norm backward adds into the parameter gradients", "[nn][norm]") {
  Rng rng(35);
  for (const std::string name : {"layer_norm", "rms_norm", "batch_norm", "masked_batch_norm"}) {
    INFO(name);
    auto norm = make_norm(name, 3);
    const Tensor3 x = random_x(rng, 2, 3, 3), dy = random_x(rng, 2, 3, 3);
    norm->forward(x);
    norm->backward(dy);
    const xt::xarray<float> g1 = norm->parameters()[0]->grad;
    norm->forward(x);
    norm->backward(dy);
    CHECK(xt::allclose(norm->parameters()[0]->grad, 2.0f * g1, 1e-6, 1e-7));
    CHECK(xt::amax(xt::abs(g1))() > 0.0f);
  }
}

// ---- factory, keys, errors ----------------------------------------------------------------------

TEST_CASE("make_norm builds every norm by name with PyTorch keys and init", "[nn][norm]") {
  struct Want {
    std::string name;
    std::vector<std::string> keys;
  };
  for (const auto& w : std::vector<Want>{{"layer_norm", {"n.weight", "n.bias"}},
                                         {"rms_norm", {"n.weight"}},
                                         {"batch_norm", {"n.weight", "n.bias"}},
                                         {"masked_batch_norm", {"n.weight", "n.bias"}},
                                         {"none", {}}}) {
    INFO(w.name);
    auto norm = make_norm(w.name, 6);
    CHECK(norm->name() == w.name);
    CHECK(norm->dim() == 6);
    const auto np = norm->named_parameters("n.");
    REQUIRE(np.size() == w.keys.size());
    for (std::size_t i = 0; i < np.size(); ++i) {
      CHECK(np[i].key == w.keys[i]);
      CHECK(np[i].param->value.shape() == std::vector<std::size_t>{6});
      const float init = i == 0 ? 1.0f : 0.0f;  // weight 1, bias 0
      for (float v : np[i].param->value) REQUIRE(v == init);
    }
  }
  BatchNorm bn(3, false);
  CHECK((bn.running_mean == Tensor1{0, 0, 0}));
  CHECK((bn.running_var == Tensor1{1, 1, 1}));
  CHECK(bn.momentum() == 0.1f);
  CHECK(bn.eps() == 1e-5f);
  CHECK(RMSNorm(3).eps() == 1e-8f);
  CHECK(LayerNorm(3).eps() == 1e-5f);
}

TEST_CASE("Norms reject unknown names bad arguments and wrong shapes", "[nn][norm][errors]") {
  CHECK_THROWS_AS(make_norm("group_norm", 4), std::invalid_argument);
  CHECK_THROWS_WITH(make_norm("group_norm", 4),
                    "norm = 'group_norm': allowed layer_norm, batch_norm, masked_batch_norm, "
                    "rms_norm, none, power_norm");
  CHECK_THROWS_WITH(make_norm("LayerNorm", 4), Catch::Matchers::StartsWith("norm = 'LayerNorm'"));
  for (const std::string name :
       {"layer_norm", "rms_norm", "batch_norm", "masked_batch_norm", "none", "power_norm"}) {
    INFO(name);
    CHECK_THROWS_AS(make_norm(name, 0), std::invalid_argument);
    auto norm = make_norm(name, 4);
    CHECK_THROWS_AS(norm->backward(Tensor3(xt::zeros<float>({2, 3, 4}))), std::logic_error);
    CHECK_THROWS_AS(norm->forward(Tensor3(xt::zeros<float>({2, 3, 5}))), ShapeError);
    const Tensor3 x = xt::ones<float>({2, 3, 4});
    const PaddingMask wrong_t = xt::zeros<std::uint8_t>({2, 4});
    const PaddingMask wrong_b = xt::zeros<std::uint8_t>({3, 3});
    CHECK_THROWS_AS(norm->forward(x, &wrong_t), ShapeError);
    CHECK_THROWS_WITH(norm->forward(x, &wrong_b), Catch::Matchers::Contains("padding") &&
                                                      Catch::Matchers::Contains("[3, 3]"));
    Tensor3 xr = x;
    xr(1, 2, 3) = 2.0f;  // not constant, so every norm is well defined
    norm->forward(xr);
    CHECK_THROWS_AS(norm->backward(Tensor3(xt::zeros<float>({2, 3, 5}))), ShapeError);
    CHECK_THROWS_AS(norm->backward(Tensor3(xt::zeros<float>({3, 2, 4}))), ShapeError);
    CHECK_NOTHROW(norm->backward(Tensor3(xt::zeros<float>({2, 3, 4}))));
  }
  CHECK_THROWS_AS(LayerNorm(4, 0.0f), std::invalid_argument);
  CHECK_THROWS_WITH(RMSNorm(4, -1e-8f), Catch::Matchers::Contains("eps = -1e-08"));
  CHECK_THROWS_AS(BatchNorm(4, false, 1.5f), std::invalid_argument);
  CHECK_THROWS_WITH(BatchNorm(4, true, -0.1f), Catch::Matchers::Contains("momentum"));
  CHECK_THROWS_AS(BatchNorm(4, true, NAN), std::invalid_argument);
  CHECK_THROWS_AS(BatchNorm(4, true, 0.1f, NAN), std::invalid_argument);

  BatchNorm bn(4, false);
  bn.running_var = xt::ones<float>({3});  // e.g. a checkpoint of another size
  CHECK_THROWS_WITH(bn.forward(Tensor3(xt::ones<float>({2, 3, 4}))),
                    Catch::Matchers::Contains("running_var"));
  LayerNorm ln(4);
  ln.weight.value = xt::ones<float>({5});
  CHECK_THROWS_AS(ln.forward(Tensor3(xt::ones<float>({2, 3, 4}))), ShapeError);
}

TEST_CASE("backward_add gives backward plus the residual bit for bit, and checks the residual's shape", "[nn][norm]") {
  Rng rng(41);
  const std::size_t D = 6;
  const Tensor3 x = random_x(rng, 2, 3, D), dy = random_x(rng, 2, 3, D), r = random_x(rng, 2, 3, D);
  // layer_norm has its own fused pass; the others use Norm's backward-then-add.
  for (const std::string name : {"layer_norm", "rms_norm", "batch_norm", "none"}) {
    INFO(name);
    auto a = make_norm(name, D), b = make_norm(name, D);
    a->forward(x);
    b->forward(x);
    Tensor3 want = a->backward(dy);
    for (std::size_t i = 0; i < want.size(); ++i) want.data()[i] += r.data()[i];
    const Tensor3 got = b->backward_add(dy, r);
    CHECK(std::equal(got.begin(), got.end(), want.begin(), want.end()));
    std::vector<NamedParameter> pa, pb;
    a->collect_parameters("", pa);
    b->collect_parameters("", pb);
    for (std::size_t k = 0; k < pa.size(); ++k)
      CHECK(std::equal(pa[k].param->grad.begin(), pa[k].param->grad.end(), pb[k].param->grad.begin()));
    // A wrong residual throws before any gradient moves.
    CHECK_THROWS_AS(b->backward_add(dy, random_x(rng, 2, 4, D)), ShapeError);
    for (std::size_t k = 0; k < pa.size(); ++k)
      CHECK(std::equal(pa[k].param->grad.begin(), pa[k].param->grad.end(), pb[k].param->grad.begin()));
  }
}

// ---- PowerNorm (Shen et al. 2020, Algorithm 1) ---------------------------------------------------

namespace {
// Restores PowerNorm's buffers before every forward, so that the finite differences see the same
// ψ²_{t−1} and ν_{t−1} each time (a train-mode forward updates ψ², a backward updates ν).
void gradcheck_power_norm(PowerNorm& pn, Tensor3 x, const PaddingMask* padding) {
  const Tensor1 phi = pn.running_phi, gz = pn.ema_gz;
  Tensor3 dx = xt::zeros<float>(x.shape());
  auto forward = [&] {
    pn.running_phi = phi;
    pn.ema_gz = gz;
    return flat(pn.forward(x, padding));
  };
  auto backward = [&](const std::vector<float>& w) {
    pn.zero_grad();
    pn.running_phi = phi;
    pn.ema_gz = gz;
    pn.forward(x, padding);
    Tensor3 dy = xt::zeros<float>(x.shape());
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 g = pn.backward(dy);
    std::copy(g.begin(), g.end(), dx.begin());
  };
  std::vector<Probe> probes{Probe{"x", x.data(), dx.data(), x.size()}};
  for (auto& np : pn.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  const auto res = check_gradients(forward, backward, probes);
  INFO("power_norm worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
}
}  // namespace

TEST_CASE("PowerNorm field case: the previous running quadratic mean normalises, then it updates", "[nn][norm][power_norm]") {
  PowerNorm pn(2);
  CHECK(pn.alpha() == 0.9f);
  CHECK(pn.eps() == 1e-5f);
  CHECK((pn.running_phi == Tensor1{1, 1}));
  CHECK((pn.ema_gz == Tensor1{0, 0}));
  // Row 1 position 1 is padded: its value 10 must not enter ψ²_B.
  const Tensor3 x = {{{1.0f, 2.0f}, {3.0f, -2.0f}}, {{-1.0f, 0.0f}, {10.0f, 10.0f}}};
  const PaddingMask pad = mask_from_lengths({2, 1}, 2);
  const Tensor3 y = pn.forward(x, &pad);
  const double r = 1.0 / std::sqrt(1.0 + 1e-5);  // ψ²_{t−1} = 1
  CHECK_THAT(y(0, 1, 0), WithinAbs(3.0 * r, 1e-6));
  CHECK_THAT(y(1, 1, 1), WithinAbs(10.0 * r, 1e-5));  // padded positions are normalised too
  // ψ²_B = mean over the 3 real positions of x²: (1 + 9 + 1) / 3, (4 + 4 + 0) / 3.
  CHECK_THAT(pn.last_batch_phi()(0), WithinAbs(11.0 / 3, 1e-6));
  CHECK_THAT(pn.last_batch_phi()(1), WithinAbs(8.0 / 3, 1e-6));
  CHECK_THAT(pn.running_phi(0), WithinAbs(0.9 + 0.1 * 11.0 / 3, 1e-6));
  CHECK_THAT(pn.running_phi(1), WithinAbs(0.9 + 0.1 * 8.0 / 3, 1e-6));
  // The second step normalises with the updated ψ², not with its own batch.
  const Tensor3 y2 = pn.forward(x, &pad);
  CHECK_THAT(y2(0, 0, 0), WithinAbs(1.0 / std::sqrt(0.9 + 0.1 * 11.0 / 3 + 1e-5), 1e-6));
  // Without a mask every position enters: ψ²_B(0) = (1 + 9 + 1 + 100) / 4.
  PowerNorm all(2);
  all.forward(x, nullptr);
  CHECK_THAT(all.last_batch_phi()(0), WithinAbs(111.0 / 4, 1e-5));
}

TEST_CASE("PowerNorm's backward is the exact derivative while ν = 0, and in eval mode", "[nn][norm][power_norm][gradcheck]") {
  Rng rng(31);
  const PaddingMask pad = mask_from_lengths({4, 2, 3}, 4);
  PowerNorm pn(3);
  randomise_parameters(pn, rng);
  pn.running_phi = Tensor1{0.5f, 2.0f, 1.3f};
  gradcheck_power_norm(pn, random_x(rng, 3, 4, 3), &pad);  // ema_gz = 0: ν_{t−1} = 0
  pn.ema_gz = Tensor1{0.4f, -0.3f, 0.2f};
  pn.eval();
  gradcheck_power_norm(pn, random_x(rng, 3, 4, 3), &pad);  // eval: ν plays no part
  const Tensor1 before = pn.ema_gz;
  pn.forward(random_x(rng, 3, 4, 3), &pad);
  pn.backward(random_x(rng, 3, 4, 3));
  CHECK((pn.ema_gz == before));  // an eval-mode backward updates nothing
}

TEST_CASE("PowerNorm's approximate backward subtracts ν x̂ and updates ν as Algorithm 1", "[nn][norm][power_norm]") {
  Rng rng(32);
  const std::size_t d = 3;
  const PaddingMask pad = mask_from_lengths({4, 1}, 4);  // 5 of 8 positions real
  PowerNorm pn(d);
  randomise_parameters(pn, rng);
  pn.running_phi = Tensor1{0.7f, 1.5f, 2.5f};
  pn.ema_gz = Tensor1{0.8f, -1.2f, 0.3f};
  const Tensor1 phi = pn.running_phi, gz = pn.ema_gz;
  const Tensor3 x = random_x(rng, 2, 4, d);
  const Tensor3 dy = random_x(rng, 2, 4, d);
  pn.forward(x, &pad);
  const Tensor3 dx = pn.backward(dy);
  const double a = 0.9;
  for (std::size_t j = 0; j < d; ++j) {
    const double rs = 1.0 / std::sqrt(static_cast<double>(phi(j)) + 1e-5);
    const double nu = (1 - a) * gz(j);
    double gam = 0, lam = 0;
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t t = 0; t < 4; ++t) {
        const double xh = x(b, t, j) * rs;
        const double g = pn.weight.value(j) * dy(b, t, j);
        const bool real = pad(b, t) == 0;
        const double want = (real ? g - nu * xh : g) * rs;
        CHECK_THAT(dx(b, t, j), WithinAbs(want, 1e-5));
        if (real) {
          gam += xh * xh / 5;
          lam += g * xh / 5;
        }
      }
    // ν_t = ν_{t−1}(1 − (1 − α)Γ) + (1 − α)Λ, stored as ema_gz = ν / (1 − α).
    const double nu_t = nu * (1 - (1 - a) * gam) + (1 - a) * lam;
    CHECK_THAT(pn.ema_gz(j), WithinAbs(nu_t / (1 - a), 1e-5));
  }
}

TEST_CASE("PowerNorm is registered with PyTorch-style keys, buffers and errors", "[nn][norm][power_norm]") {
  auto norm = make_norm("power_norm", 4);
  CHECK(norm->name() == "power_norm");
  const auto np = norm->named_parameters("n.");
  REQUIRE(np.size() == 2);
  CHECK(np[0].key == "n.weight");
  CHECK(np[1].key == "n.bias");
  const auto nb = norm->named_buffers("n.");
  REQUIRE(nb.size() == 2);
  CHECK(nb[0].key == "n.running_phi");
  CHECK(nb[1].key == "n.ema_gz");
  CHECK(norm_registry().get("power_norm").num_parameters(4) == 8);
  CHECK_THROWS_AS(PowerNorm(0), std::invalid_argument);
  CHECK_THROWS_WITH(PowerNorm(4, 1.5f), Catch::Matchers::Contains("alpha"));
  CHECK_THROWS_AS(PowerNorm(4, 0.9f, 0.0f), std::invalid_argument);
  PowerNorm pn(2);
  const PaddingMask all_padded = xt::ones<std::uint8_t>({1, 2});
  CHECK_THROWS_AS(pn.forward(Tensor3(xt::ones<float>({1, 2, 2})), &all_padded), std::invalid_argument);
  CHECK((pn.running_phi == Tensor1{1, 1}));  // nothing changed
  pn.eval();
  CHECK_NOTHROW(pn.forward(Tensor3(xt::ones<float>({1, 2, 2})), &all_padded));
}

// softmax, log_softmax and CrossEntropyLoss (reduction mean and sum): finite-difference
// gradients, PyTorch parity (tests/golden/softmax.json, cross_entropy.json,
// cross_entropy_sum.json), cases from the field, errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/nn/loss.hpp"

using namespace seqlab;
using seqlab::test::kBwdAtol;
using seqlab::test::kBwdRtol;
using seqlab::test::kFwdAtol;
using seqlab::test::kFwdRtol;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using seqlab::test::check_gradients;
using seqlab::test::compare_close;
using seqlab::test::Fixture;
using seqlab::test::Probe;

namespace {

bool all_finite(const Tensor2& t) {
  return std::all_of(t.begin(), t.end(), [](float v) { return std::isfinite(v); });
}
}  // namespace

TEST_CASE("softmax and log_softmax gradients match finite differences", "[nn][loss][gradcheck]") {
  for (bool log : {false, true}) {
    INFO((log ? "log_softmax" : "softmax"));
    Rng rng(31);
    Tensor2 x({3, 5});
    rng.fill_uniform(x, -2, 2);
    Tensor2 dx = xt::zeros<float>(x.shape());
    auto fwd = [&] { return log ? log_softmax(x) : softmax(x); };
    auto forward = [&] {
      const Tensor2 y = fwd();
      return std::vector<float>(y.begin(), y.end());
    };
    auto backward = [&](const std::vector<float>& w) {
      Tensor2 dy(x.shape());
      std::copy(w.begin(), w.end(), dy.begin());
      const Tensor2 y = fwd();
      const Tensor2 g = log ? log_softmax_backward(y, dy) : softmax_backward(y, dy);
      std::copy(g.begin(), g.end(), dx.begin());
    };
    const auto res = check_gradients(forward, backward, {Probe{"x", x.data(), dx.data(), x.size()}});
    INFO("worst: " << res.worst << "\n" << res.report);
    REQUIRE(res.ok);
  }
}

TEST_CASE("softmax and log_softmax match PyTorch including large offsets", "[nn][loss][golden]") {
  const Fixture fx("softmax.json");
  const Tensor2 x = fx.tensor("x");  // rows shifted by +1000, scaled by 20, shifted by -500
  const Tensor2 dy = fx.tensor("dy");
  const Tensor2 p = softmax(x);
  const Tensor2 lp = log_softmax(x);
  std::string msg = compare_close(p, fx.tensor_f64("softmax.y"), kFwdRtol, kFwdAtol);
  INFO("softmax.y: " << msg);
  CHECK(msg.empty());
  msg = compare_close(softmax_backward(p, dy), fx.tensor_f64("softmax.x.grad"), kBwdRtol, kBwdAtol);
  INFO("softmax.x.grad: " << msg);
  CHECK(msg.empty());
  msg = compare_close(lp, fx.tensor_f64("log_softmax.y"), kFwdRtol, kFwdAtol);
  INFO("log_softmax.y: " << msg);
  CHECK(msg.empty());
  msg = compare_close(log_softmax_backward(lp, dy), fx.tensor_f64("log_softmax.x.grad"), kBwdRtol,
                      kBwdAtol);
  INFO("log_softmax.x.grad: " << msg);
  CHECK(msg.empty());
}

TEST_CASE("softmax of 1000 0 0 is one hot without NaN", "[nn][loss][field]") {
  const Tensor2 x = {{1000.0f, 0.0f, 0.0f}};
  const Tensor2 p = softmax(x);
  REQUIRE(all_finite(p));
  CHECK(p(0, 0) == 1.0f);
  CHECK(p(0, 1) == 0.0f);
  CHECK(p(0, 2) == 0.0f);
}

TEST_CASE("log_softmax of 1000 0 is 0 and minus 1000 in float", "[nn][loss][field]") {
  const Tensor2 lp = log_softmax(Tensor2{{1000.0f, 0.0f}});
  REQUIRE(all_finite(lp));
  CHECK(lp(0, 0) == 0.0f);
  CHECK(lp(0, 1) == -1000.0f);
}

TEST_CASE("softmax of a fully masked row is zero not NaN", "[nn][loss]") {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor2 x = {{-inf, -inf, -inf}, {-inf, 0.0f, -inf}};
  const Tensor2 p = softmax(x);
  for (std::size_t j = 0; j < 3; ++j) CHECK(p(0, j) == 0.0f);
  CHECK(p(1, 1) == 1.0f);
  CHECK(p(1, 0) == 0.0f);
  const Tensor2 lp = log_softmax(x);
  CHECK(lp(0, 0) == -inf);
  CHECK(lp(1, 1) == 0.0f);
}

TEST_CASE("CrossEntropyLoss gradient matches finite differences with ignored targets", "[nn][loss][gradcheck]") {
  Rng rng(41);
  Tensor2 logits({6, 4});
  rng.fill_uniform(logits, -2, 2);
  const IndexTensor1 targets = {2, -100, 0, 3, -100, 1};
  CrossEntropyLoss ce;
  Tensor2 dlogits = xt::zeros<float>(logits.shape());
  auto forward = [&] { return std::vector<float>{ce.forward(logits, targets)}; };
  auto backward = [&](const std::vector<float>& w) {
    ce.forward(logits, targets);
    const Tensor2 g = ce.backward();
    std::transform(g.begin(), g.end(), dlogits.begin(), [&](float v) { return v * w[0]; });
  };
  const auto res =
      check_gradients(forward, backward, {Probe{"logits", logits.data(), dlogits.data(), logits.size()}});
  INFO("worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  CHECK(ce.count() == 4);
}

TEST_CASE("CrossEntropyLoss matches PyTorch", "[nn][loss][golden]") {
  const Fixture fx("cross_entropy.json");
  for (const std::string c : {"default", "ignore0"}) {
    INFO("case " << c);
    const int ignore = fx.meta().at(c + ".ignore_index").get<int>();
    CrossEntropyLoss ce(ignore);
    const Tensor2 logits = fx.tensor(c + ".logits");
    const IndexTensor1 targets = xt::cast<std::int32_t>(fx.tensor_f64(c + ".targets"));
    const float loss = ce.forward(logits, targets);
    const double ref = fx.tensor_f64(c + ".loss")(0);
    CHECK_THAT(loss, WithinAbs(ref, kFwdAtol + kFwdRtol * std::abs(ref)));
    std::size_t n_ref = 0;
    for (auto t : targets) n_ref += t != ignore;
    CHECK(ce.count() == n_ref);
    std::string msg = compare_close(ce.probabilities(), fx.tensor_f64(c + ".probabilities"), kFwdRtol, kFwdAtol);
    INFO("probabilities: " << msg);
    CHECK(msg.empty());
    const float dy = fx.tensor(c + ".dy")(0);
    const Tensor2 g = ce.backward() * dy;
    msg = compare_close(g, fx.tensor_f64(c + ".logits.grad"), kBwdRtol, kBwdAtol);
    INFO("logits.grad: " << msg);
    CHECK(msg.empty());
    CHECK_THAT(xt::sum(ce.row_losses())() / ce.count(), WithinRel(loss, 1e-6f));
  }
}

TEST_CASE("CrossEntropyLoss with reduction sum and mean matches PyTorch", "[nn][loss][golden]") {
  const Fixture fx("cross_entropy_sum.json");
  for (const std::string c : {"default", "ignore0"}) {
    for (const Reduction red : {Reduction::sum, Reduction::mean}) {
      const std::string k = c + "." + reduction_name(red);
      INFO("case " << k);
      CrossEntropyLoss ce(fx.meta().at(c + ".ignore_index").get<int>(), red);
      CHECK(ce.reduction() == red);
      const Tensor2 logits = fx.tensor(c + ".logits");
      const IndexTensor1 targets = xt::cast<std::int32_t>(fx.tensor_f64(c + ".targets"));
      const float loss = ce.forward(logits, targets);
      const double ref = fx.tensor_f64(k + ".loss")(0);
      CHECK_THAT(loss, WithinAbs(ref, kFwdAtol + kFwdRtol * std::abs(ref)));
      CHECK_THAT(ce.sum(), WithinAbs(red == Reduction::sum ? ref : ref * ce.count(), 1e-5 * std::abs(ref) + 1e-6));
      const float dy = fx.tensor(c + ".dy")(0);
      const std::string msg = compare_close(ce.backward() * dy, fx.tensor_f64(k + ".logits.grad"), kBwdRtol, kBwdAtol);
      INFO("logits.grad: " << msg);
      CHECK(msg.empty());
    }
  }
}

TEST_CASE("CrossEntropyLoss sums over parts add up to the whole batch's mean", "[nn][loss][field]") {
  // Rows 0..1 and 2..5 of one batch with ignored targets: Σ over the parts / Σ of counts is the
  // mean over the batch (the identity train_loop_accumulate relies on); the mean of the two
  // parts' means is not.
  Rng rng(8);
  Tensor2 logits({6, 3});
  rng.fill_uniform(logits, -3, 3);
  const IndexTensor1 targets = {1, -100, 0, 2, -100, -100};
  CrossEntropyLoss mean;
  const double whole = mean.forward(logits, targets);
  const Tensor2 g_whole = mean.backward();
  CrossEntropyLoss sum(-100, Reduction::sum);
  const Tensor2 top = xt::view(logits, xt::range(0, 2), xt::all());
  const Tensor2 bottom = xt::view(logits, xt::range(2, 6), xt::all());
  const IndexTensor1 t_top = {1, -100}, t_bottom = {0, 2, -100, -100};
  const double s_top = sum.forward(top, t_top);
  const std::size_t n_top = sum.count();
  const Tensor2 g_top = sum.backward();
  const double s_bottom = sum.forward(bottom, t_bottom);
  const std::size_t n_bottom = sum.count();
  const Tensor2 g_bottom = sum.backward();
  CHECK(n_top == 1);
  CHECK(n_bottom == 2);
  CHECK_THAT((s_top + s_bottom) / (n_top + n_bottom), WithinRel(whole, 1e-6));
  CHECK(std::abs(0.5 * (s_top / n_top + s_bottom / n_bottom) - whole) > 1e-3);
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK_THAT(g_top(0, j) / 3.0f, WithinAbs(g_whole(0, j), 1e-7));
    CHECK_THAT(g_bottom(0, j) / 3.0f, WithinAbs(g_whole(2, j), 1e-7));
    CHECK(g_bottom(2, j) == 0.0f);
  }
  // Everything ignored: the sum is 0 (as PyTorch), the gradient zero.
  CHECK(sum.forward(top, IndexTensor1{-100, -100}) == 0.0f);
  for (float v : sum.backward()) CHECK(v == 0.0f);
}

TEST_CASE("parse_reduction names the value and what is allowed", "[nn][loss][errors]") {
  CHECK(parse_reduction("mean") == Reduction::mean);
  CHECK(parse_reduction("sum") == Reduction::sum);
  CHECK(std::string(reduction_name(Reduction::sum)) == "sum");
  CHECK_THROWS_WITH(parse_reduction("none"), Contains("reduction = 'none'") && Contains("mean, sum"));
}

TEST_CASE("CrossEntropyLoss with a negative ignore_index averages over kept rows only", "[nn][loss][field]") {
  // Two classes, all logits 0, targets [1, ignored, 0]: each kept row costs ln 2, so the mean is
  // ln 2 = 0.693147; dividing by all three rows would give 0.462098.
  CrossEntropyLoss ce(-1);
  const Tensor2 logits = xt::zeros<float>({3, 2});
  const IndexTensor1 targets = {1, -1, 0};
  const float loss = ce.forward(logits, targets);
  CHECK_THAT(loss, WithinAbs(0.6931471805599453, 1e-6));
  CHECK(std::abs(loss - 0.462098f) > 0.1f);
  CHECK(ce.count() == 2);
  const Tensor2 g = ce.backward();
  CHECK(g(1, 0) == 0.0f);
  CHECK(g(1, 1) == 0.0f);
  CHECK_THAT(g(0, 0), WithinAbs(0.25, 1e-7));  // (0.5 - 0) / 2
  CHECK_THAT(g(0, 1), WithinAbs(-0.25, 1e-7));  // (0.5 - 1) / 2
  CHECK_THAT(g(2, 0), WithinAbs(-0.25, 1e-7));
  CHECK_THAT(g(2, 1), WithinAbs(0.25, 1e-7));
}

TEST_CASE("CrossEntropyLoss with every target ignored is 0 without NaN", "[nn][loss][field]") {
  CrossEntropyLoss ce;  // ignore_index -100
  Rng rng(3);
  Tensor2 logits({3, 4});
  rng.fill_uniform(logits, -1, 1);
  const IndexTensor1 targets = {-100, -100, -100};
  const float loss = ce.forward(logits, targets);
  CHECK(loss == 0.0f);
  CHECK(ce.count() == 0);
  const Tensor2 g = ce.backward();
  REQUIRE(g.shape() == logits.shape());
  for (float v : g) CHECK(v == 0.0f);
  CHECK(all_finite(ce.probabilities()));

  // The empty batch behaves the same.
  const float empty = ce.forward(Tensor2(xt::zeros<float>({0, 4})), IndexTensor1(xt::zeros<std::int32_t>({0})));
  CHECK(empty == 0.0f);
  CHECK(ce.count() == 0);
}

TEST_CASE("CrossEntropyLoss stays finite for huge logits", "[nn][loss]") {
  CrossEntropyLoss ce;
  const Tensor2 logits = {{1000.0f, 0.0f}, {1000.0f, 0.0f}};
  CHECK_THAT(ce.forward(logits, IndexTensor1{1, 1}), WithinRel(1000.0f, 1e-6f));
  CHECK(ce.forward(logits, IndexTensor1{0, 0}) == 0.0f);
  REQUIRE(all_finite(ce.backward()));
}

TEST_CASE("CrossEntropyLoss and softmax reject bad input", "[nn][loss][errors]") {
  CrossEntropyLoss ce;
  CHECK_THROWS_AS(ce.backward(), std::logic_error);
  const Tensor2 logits = xt::zeros<float>({3, 5});
  CHECK_THROWS_AS(ce.forward(logits, IndexTensor1{0, 1}), ShapeError);
  CHECK_THROWS_AS(ce.forward(logits, IndexTensor1{0, 1, 5}), std::out_of_range);
  CHECK_THROWS_WITH(ce.forward(logits, IndexTensor1{0, 1, 5}), Contains("target 5") && Contains("row 2"));
  CHECK_THROWS_AS(ce.forward(logits, IndexTensor1{0, -1, 4}), std::out_of_range);  // -1 is not ignore_index
  CHECK_NOTHROW(ce.forward(logits, IndexTensor1{0, -100, 4}));

  const Tensor2 y = xt::zeros<float>({2, 3});
  CHECK_THROWS_AS(softmax_backward(y, Tensor2(xt::zeros<float>({2, 4}))), ShapeError);
  CHECK_THROWS_AS(log_softmax_backward(y, Tensor2(xt::zeros<float>({3, 3}))), ShapeError);
}

TEST_CASE("CrossEntropyLoss gives the same bits at thread budgets 1 2 and 3", "[nn][loss][threads]") {
  // 20000 rows of 10 classes: the forward splits its rows over up to 3 threads (at least
  // 65536 / 10 rows each); the total is summed in row order afterwards. Every 7th row ignored.
  const int saved = num_threads();
  const std::size_t n = 20000, c = 10;
  Rng rng(17);
  Tensor2 logits({n, c});
  rng.fill_normal(logits, 0.0f, 3.0f);
  IndexTensor1 targets = xt::zeros<std::int32_t>({n});
  for (std::size_t i = 0; i < n; ++i)
    targets(i) = i % 7 == 0 ? -100 : static_cast<std::int32_t>(rng.next_u64() % c);
  set_num_threads(1);
  CrossEntropyLoss ref(-100);
  const float want = ref.forward(logits, targets);
  const Tensor2 want_grad = ref.backward();
  for (const int budget : {2, 3}) {
    INFO("thread budget " << budget);
    set_num_threads(budget);
    CrossEntropyLoss ce(-100);
    CHECK(ce.forward(logits, targets) == want);
    const Tensor2 grad = ce.backward();
    CHECK(std::equal(grad.begin(), grad.end(), want_grad.begin(), want_grad.end()));
  }
  set_num_threads(saved);
}

// Optimizers: parity with torch.optim (fixtures tests/golden/optim_*.json from gen_optim.py),
// cases from the field (Adam bias correction, AdamW decoupled decay), argument checks, state.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/train/optimizer.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// Float32 run against float64 PyTorch from the same float32 inputs: only our rounding differs.
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-7;

std::unique_ptr<Optimizer> optimizer_from_meta(const nlohmann::json& meta, std::vector<Parameter*> ps) {
  const std::string kind = meta.at("optimizer");
  const float lr = meta.at("lrs").at(0).get<float>();
  if (kind == "sgd")
    return std::make_unique<SGD>(ps, lr, meta.at("momentum").get<float>(), meta.at("weight_decay").get<float>(),
                                 meta.at("nesterov").get<bool>(), meta.at("dampening").get<float>());
  const float b1 = meta.at("beta1"), b2 = meta.at("beta2"), eps = meta.at("eps"), wd = meta.at("weight_decay");
  if (kind == "adam") return std::make_unique<Adam>(ps, lr, b1, b2, eps, wd);
  if (kind == "adamw") return std::make_unique<AdamW>(ps, lr, b1, b2, eps, wd);
  FAIL("unknown optimizer in fixture: " << kind);
  return nullptr;
}

void check_parity(const std::string& fixture_name) {
  test::Fixture fx(fixture_name + ".json");
  const auto names = fx.meta().at("params").get<std::vector<std::string>>();
  const auto lrs = fx.meta().at("lrs").get<std::vector<float>>();
  REQUIRE(names.size() == 3);
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> ps;
  for (const auto& n : names) {
    xt::xarray<float> init = fx.tensor("init." + n);
    owned.push_back(std::make_unique<Parameter>(
        n, std::vector<std::size_t>(init.shape().begin(), init.shape().end())));
    owned.back()->value = init;
    ps.push_back(owned.back().get());
  }
  auto opt = optimizer_from_meta(fx.meta(), ps);
  for (int k = 1; k <= 3; ++k) {
    opt->set_lr(lrs.at(k - 1));
    for (std::size_t i = 0; i < names.size(); ++i)
      ps[i]->grad = fx.tensor("grad" + std::to_string(k) + "." + names[i]);
    opt->step();
    CHECK(opt->step_count() == k);
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string key = "after" + std::to_string(k) + "." + names[i];
      const std::string msg = test::compare_close(ps[i]->value, fx.tensor_f64(key), kRtol, kAtol);
      INFO(fixture_name << " step " << k << " " << key << ": " << msg);
      REQUIRE(msg.empty());
    }
  }
}

}  // namespace

TEST_CASE("SGD without momentum matches torch.optim.SGD", "[train][optimizer][golden]") {
  check_parity("optim_sgd");
}

TEST_CASE("SGD with momentum dampening and weight decay matches torch.optim.SGD", "[train][optimizer][golden]") {
  check_parity("optim_sgd_momentum");
}

TEST_CASE("SGD with Nesterov momentum and weight decay matches torch.optim.SGD", "[train][optimizer][golden]") {
  check_parity("optim_sgd_nesterov");
}

TEST_CASE("Adam with L2 weight decay matches torch.optim.Adam", "[train][optimizer][golden]") {
  check_parity("optim_adam");
}

TEST_CASE("AdamW matches torch.optim.AdamW", "[train][optimizer][golden]") {
  check_parity("optim_adamw");
}

TEST_CASE("Adam first step is bias corrected", "[train][optimizer][field]") {
  // m̂ = 0.5, v̂ = 0.25: step = lr·0.5/(0.5 + 1e-8) = 9.9999998e-4. Without bias correction:
  // m = 0.05, v = 2.5e-4, step = 1e-3·0.05/0.0158 = 3.16e-3.
  Parameter p("w", {1});
  p.value(0) = 0.0f;
  p.grad(0) = 0.5f;
  Adam adam({&p}, 1e-3f, 0.9f, 0.999f, 1e-8f);
  adam.step();
  const double moved = -static_cast<double>(p.value(0));
  CHECK_THAT(moved, WithinRel(9.9999998e-4, 1e-6));
  CHECK(std::abs(moved - 3.16e-3) > 1e-3);
}

TEST_CASE("AdamW decays the weight without a gradient", "[train][optimizer][field]") {
  // θ ← θ(1 − lr·wd) = 1 − 1e-3·0.1 = 0.9999; the Adam part is 0 for a zero gradient.
  Parameter p("w", {1});
  p.value(0) = 1.0f;
  p.grad(0) = 0.0f;
  AdamW adamw({&p}, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f);
  adamw.step();
  CHECK_THAT(p.value(0), WithinAbs(0.9999, 1e-7));
  // Adam's L2 decay goes through the normalised update instead: a full lr-sized step.
  Parameter q("w", {1});
  q.value(0) = 1.0f;
  Adam adam({&q}, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f);
  adam.step();
  CHECK_THAT(q.value(0), WithinAbs(0.999, 1e-6));
}

TEST_CASE("make_optimizer decays matrices only unless decay_all", "[train][optimizer][decay]") {
  // nanoGPT's configure_optimizers groups: a weight [2, 2] (rank 2) and a conv kernel [1, 1, 2]
  // (rank 3) decay; a bias [2] and a norm gain [2] (rank 1) do not. Zero gradients isolate the
  // decay: AdamW θ ← θ(1 − lr·wd) = 0.99 for the decayed, unchanged for the others.
  Parameter weight("weight", {2, 2}), kernel("weight", {1, 1, 2}), bias("bias", {2}), gain("weight", {2});
  const std::vector<Parameter*> params = {&weight, &kernel, &bias, &gain};
  CHECK(weight_decay_mask(params) == std::vector<bool>{true, true, false, false});
  CHECK(weight_decay_mask(params, true) == std::vector<bool>{true, true, true, true});
  for (const bool decay_all : {false, true}) {
    for (const std::string kind : {"adamw", "adam", "sgd"}) {
      INFO(kind << (decay_all ? ", decay_all" : ""));
      for (Parameter* p : params) {
        p->value = xt::ones<float>(p->value.shape());
        p->zero_grad();
      }
      OptimizerConfig cfg;
      cfg.lr = 0.1f;
      cfg.weight_decay = 0.1f;
      cfg.decay_all = decay_all;
      auto opt = make_optimizer(kind, params, cfg);
      CHECK(opt->decays(0));
      CHECK(opt->decays(2) == decay_all);
      opt->step();
      for (std::size_t i = 0; i < params.size(); ++i) {
        const bool decayed = i < 2 || decay_all;
        // adamw: 1 − 0.1·0.1; adam (L2 into the normalised update): 1 − lr = 0.9;
        // sgd (L2 into the gradient): 1 − lr·wd = 0.99.
        const double expect = !decayed ? 1.0 : kind == "adam" ? 0.9 : 0.99;
        for (float v : params[i]->value) CHECK_THAT(v, WithinAbs(expect, 1e-6));
      }
    }
  }
  // The classes alone keep torch.optim's one group (every parameter decays); the mask is checked.
  AdamW adamw(params, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f);
  for (std::size_t i = 0; i < params.size(); ++i) CHECK(adamw.decays(i));
  CHECK_THROWS_WITH(adamw.set_weight_decay_mask({true}),
                    Catch::Contains("mask has 1 entries") && Catch::Contains("one per parameter (4)"));
}

TEST_CASE("SGD momentum buffer starts at the first gradient", "[train][optimizer][field]") {
  // torch: buf = g at step 1 (no dampening), then buf = m·buf + (1 − d)·g.
  Parameter p("w", {1});
  p.value(0) = 0.0f;
  SGD sgd({&p}, 1.0f, 0.9f, 0.0f, false, 0.5f);
  p.grad(0) = 1.0f;
  sgd.step();
  CHECK_THAT(p.value(0), WithinAbs(-1.0, 1e-7));  // buf = 1
  sgd.step();
  CHECK_THAT(p.value(0), WithinAbs(-1.0 - 1.4, 1e-6));  // buf = 0.9 + 0.5 = 1.4
}

TEST_CASE("optimizer arguments are checked", "[train][optimizer][errors]") {
  Parameter p("w", {2});
  std::vector<Parameter*> ps{&p};
  CHECK_THROWS_WITH(SGD(ps, -0.1f), Catch::Contains("lr = -0.1"));
  CHECK_THROWS_WITH(SGD(ps, 0.1f, -0.5f), Catch::Contains("momentum = -0.5"));
  CHECK_THROWS_WITH(SGD(ps, 0.1f, 0.0f, 0.0f, true), Catch::Contains("nesterov"));
  CHECK_THROWS_WITH(SGD(ps, 0.1f, 0.9f, 0.0f, true, 0.1f), Catch::Contains("dampening = 0.1"));
  CHECK_THROWS_WITH(SGD(ps, 0.1f, 0.0f, -1.0f), Catch::Contains("weight_decay = -1"));
  CHECK_THROWS_WITH(Adam(ps, 1e-3f, 1.0f), Catch::Contains("beta1 = 1"));
  CHECK_THROWS_WITH(Adam(ps, 1e-3f, 0.9f, -0.1f), Catch::Contains("beta2 = -0.1"));
  CHECK_THROWS_WITH(AdamW(ps, 1e-3f, 0.9f, 0.999f, -1e-8f), Catch::Contains("eps = -1e-08"));
  CHECK_THROWS_WITH(AdamW(ps, 1e-3f, 0.9f, 0.999f, 1e-8f, -0.1f), Catch::Contains("weight_decay = -0.1"));
  CHECK_THROWS_WITH(SGD({&p, nullptr}, 0.1f), Catch::Contains("params[1]"));
  CHECK_THROWS_WITH(SGD({&p, &p}, 0.1f), Catch::Contains("twice"));
  SGD sgd(ps, 0.1f);
  CHECK_THROWS_AS(sgd.set_lr(-1.0f), std::invalid_argument);
  CHECK_THROWS_AS(sgd.set_lr(NAN), std::invalid_argument);
  sgd.set_lr(0.25f);
  CHECK(sgd.lr() == 0.25f);
  p.grad = xt::zeros<float>({3});
  CHECK_THROWS_AS(sgd.step(), ShapeError);
}

TEST_CASE("make_optimizer builds each kind and rejects unknown names", "[train][optimizer][errors]") {
  Parameter p("w", {2});
  OptimizerConfig cfg;
  cfg.lr = 0.01f;
  CHECK(make_optimizer("sgd", {&p}, cfg)->kind() == "sgd");
  CHECK(make_optimizer("adam", {&p}, cfg)->kind() == "adam");
  CHECK(make_optimizer("adamw", {&p}, cfg)->kind() == "adamw");
  CHECK(make_optimizer("adam", {&p}, cfg)->lr() == 0.01f);
  CHECK_THROWS_WITH(make_optimizer("Adam", {&p}, cfg),
                    Catch::Contains("\"Adam\"") && Catch::Contains("sgd, adam, adamw"));
  cfg.beta1 = 1.5f;
  CHECK_THROWS_WITH(make_optimizer("adamw", {&p}, cfg), Catch::Contains("beta1 = 1.5"));
}

TEST_CASE("zero_grad clears every gradient", "[train][optimizer]") {
  Parameter a("a", {2}), b("b", {3});
  a.grad = xt::ones<float>({2});
  b.grad = xt::ones<float>({3});
  SGD sgd({&a, &b}, 0.1f);
  sgd.zero_grad();
  CHECK(xt::all(xt::equal(a.grad, 0.0f)));
  CHECK(xt::all(xt::equal(b.grad, 0.0f)));
}

TEST_CASE("optimizer state round-trips and resumes identically", "[train][optimizer][state]") {
  // Two runs: 4 uninterrupted steps, and 2 steps + state saved + a fresh optimizer loaded + 2 steps.
  auto grad_at = [](int k, std::size_t i) { return std::sin(0.7f * k + 1.3f * static_cast<float>(i)); };
  auto run = [&](const std::string& kind, bool resume) {
    Parameter a("a", {2, 2}), b("b", {3});
    for (std::size_t i = 0; i < 4; ++i) a.value.data()[i] = 0.1f * i;
    for (std::size_t i = 0; i < 3; ++i) b.value.data()[i] = -0.2f * i;
    std::vector<Parameter*> ps{&a, &b};
    OptimizerConfig cfg;
    cfg.lr = 0.05f;
    cfg.momentum = 0.9f;
    cfg.weight_decay = 0.01f;
    auto opt = make_optimizer(kind, ps, cfg);
    for (int k = 0; k < 4; ++k) {
      if (resume && k == 2) {
        OptimizerState s = opt->state();
        CHECK(s.step == 2);
        CHECK(s.kind == kind);
        opt = make_optimizer(kind, ps, cfg);
        opt->load_state(s);
        CHECK(opt->step_count() == 2);
      }
      for (auto* p : ps)
        for (std::size_t i = 0; i < p->size(); ++i) p->grad.data()[i] = grad_at(k, i);
      opt->step();
    }
    std::vector<float> out(a.value.begin(), a.value.end());
    out.insert(out.end(), b.value.begin(), b.value.end());
    return out;
  };
  for (const std::string kind : {"sgd", "adam", "adamw"}) {
    INFO(kind);
    CHECK(run(kind, false) == run(kind, true));
  }

  Parameter a("a", {2});
  Adam adam({&a});
  a.grad = xt::ones<float>({2});
  adam.step();
  OptimizerState s = adam.state();
  REQUIRE(s.buffers.count("0.exp_avg") == 1);
  REQUIRE(s.buffers.count("0.exp_avg_sq") == 1);
  CHECK_THAT(s.buffers["0.exp_avg"][0], WithinAbs(0.1, 1e-7));
  SGD sgd({&a}, 0.1f, 0.9f);
  CHECK_THROWS_WITH(sgd.load_state(s), Catch::Contains("kind = \"adam\""));
  Adam other({&a});
  OptimizerState bad = s;
  bad.buffers["0.exp_avg"].push_back(1.0f);
  CHECK_THROWS_WITH(other.load_state(bad), Catch::Contains("\"0.exp_avg\" has 3 values"));
  bad = s;
  bad.buffers.erase("0.exp_avg_sq");
  CHECK_THROWS_WITH(other.load_state(bad), Catch::Contains("\"0.exp_avg_sq\" is missing"));
  bad = s;
  bad.buffers["1.exp_avg"] = {0.0f};
  CHECK_THROWS_WITH(other.load_state(bad), Catch::Contains("unknown buffer \"1.exp_avg\""));
  CHECK(other.step_count() == 0);  // unchanged after a failed load
}

// models/ factory: every family builds from a ModelConfig and runs forward/backward with both
// inputs and both heads; analytic parameter counts equal built counts; PyTorch-style keys; budget
// matching; ConfigError keys; the last-position head; gradient-norm diagnostics; receptive field
// and sequential steps; dropout train/eval; determinism. Whole-model finite-difference checks are
// in test_models_gradcheck.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xview.hpp>

#include "seqlab/models/factory.hpp"
#include "seqlab/models/recurrent_model.hpp"
#include "seqlab/models/tcn_model.hpp"
#include "seqlab/nn/gru.hpp"
#include "seqlab/nn/linear.hpp"
#include "seqlab/nn/lstm.hpp"
#include "seqlab/nn/rnn.hpp"
#include "fixtures.hpp"

using namespace seqlab;

namespace {

const std::vector<std::string> kFamilies{"rnn", "lstm", "gru", "tcn"};

ModelConfig tiny(const std::string& model, const std::string& input = "embedding",
                 const std::string& head = "per_position", std::size_t embedding_dim = 4) {
  ModelConfig c;
  c.model = model;
  c.input = input;
  c.vocab_size = 6;
  c.input_size = 3;
  c.embedding_dim = embedding_dim;
  c.hidden_size = 5;
  c.num_layers = 2;
  c.output_size = 3;
  c.head = head;
  return c;
}

Tensor3 random_x(std::size_t B, std::size_t T, std::size_t D, Rng& rng) {
  Tensor3 x({B, T, D});
  rng.fill_normal(x, 0.0f, 1.0f);
  return x;
}

IndexTensor2 random_ids(std::size_t B, std::size_t T, std::size_t V, Rng& rng) {
  IndexTensor2 ids({B, T});
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.uniform_int(V));
  return ids;
}

Tensor3 forward_any(SequenceModel& m, const IndexTensor2& ids, const Tensor3& x) {
  return m.config().input == "embedding" ? m.forward(ids) : m.forward(x);
}

double frobenius_rows(const Tensor3& g, std::size_t t) {  // ‖g[:, t, :]‖_F
  double s = 0.0;
  for (std::size_t b = 0; b < g.shape()[0]; ++b)
    for (std::size_t c = 0; c < g.shape()[2]; ++c) s += double(g(b, t, c)) * g(b, t, c);
  return std::sqrt(s);
}

double max_abs_diff(const xt::xarray<float>& a, const xt::xarray<float>& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a.data()[i]) - double(b.data()[i])));
  return m;
}

std::vector<std::string> keys(SequenceModel& m) {
  std::vector<std::string> out;
  for (const auto& np : m.named_parameters()) out.push_back(np.key);
  return out;
}

}  // namespace

TEST_CASE("Every family builds and runs forward and backward with both inputs and heads", "[models]") {
  const std::size_t B = 2, T = 7;
  for (const auto& model : kFamilies) {
    for (const std::string input : {"embedding", "linear"}) {
      for (const std::string head : {"per_position", "last_position"}) {
        for (std::size_t E : {std::size_t{4}, std::size_t{0}}) {
          if (input == "embedding" && E == 0) continue;
          const ModelConfig cfg = tiny(model, input, head, E);
          INFO(model << " " << input << " E=" << E << " " << head);
          Rng rng(3);
          auto m = make_model(cfg, rng);
          REQUIRE(m);
          const IndexTensor2 ids = random_ids(B, T, cfg.vocab_size, rng);
          const Tensor3 x = random_x(B, T, cfg.input_size, rng);
          const Tensor3 y = forward_any(*m, ids, x);
          const std::size_t T_out = head == "per_position" ? T : 1;
          REQUIRE(y.shape()[0] == B);
          REQUIRE(y.shape()[1] == T_out);
          REQUIRE(y.shape()[2] == cfg.output_size);
          for (float v : y) REQUIRE(std::isfinite(v));

          // The other forward overload is a logic error.
          if (input == "embedding") CHECK_THROWS_AS(m->forward(x), std::logic_error);
          else CHECK_THROWS_AS(m->forward(ids), std::logic_error);

          Tensor3 dy(y.shape());
          rng.fill_normal(dy, 0.0f, 1.0f);
          m->zero_grad();
          m->backward(dy);
          double gsum = 0.0;
          for (auto& np : m->named_parameters()) {
            for (float g : np.param->grad) {
              REQUIRE(std::isfinite(g));
              gsum += std::abs(g);
            }
            // Every parameter tensor receives some gradient (the embedding only on used rows).
            double pg = 0.0;
            for (float g : np.param->grad) pg += std::abs(g);
            INFO("parameter " << np.key);
            CHECK(pg > 0.0);
          }
          CHECK(gsum > 0.0);
          const std::size_t L = cfg.num_layers;
          REQUIRE(m->step_grad_norms().shape()[0] == L);
          REQUIRE(m->step_grad_norms().shape()[1] == T);
          REQUIRE(m->input_grad_norms().shape()[0] == T);
          if (input == "linear") {
            REQUIRE(m->input_grad().shape() == x.shape());
          } else {
            CHECK_THROWS_AS(m->input_grad(), std::logic_error);
          }
          const std::string d = m->describe();
          CHECK(d.rfind(model + ":", 0) == 0);
          CHECK(d.find("params=" + std::to_string(m->num_parameters())) != std::string::npos);
          CHECK(d.find('\n') == std::string::npos);
        }
      }
    }
  }
}

TEST_CASE("Analytic parameter count equals the built count for every family", "[models]") {
  std::vector<ModelConfig> cfgs;
  for (const auto& model : kFamilies) {
    for (std::size_t L : {1, 3}) {
      ModelConfig a = tiny(model, "embedding");
      a.num_layers = L;
      cfgs.push_back(a);
      ModelConfig b = tiny(model, "linear", "last_position", 7);
      b.num_layers = L;
      b.hidden_size = 9;
      cfgs.push_back(b);
      ModelConfig c = tiny(model, "linear", "per_position", 0);
      c.num_layers = L;
      cfgs.push_back(c);
    }
  }
  ModelConfig t = tiny("tcn", "linear", "per_position", 0);
  t.channels = {3, 8, 8, 2};  // no downsample at level 0 (3 -> 3), downsamples at 1 and 3
  t.kernel_size = 3;
  cfgs.push_back(t);
  t.weight_norm = true;
  cfgs.push_back(t);
  t.channels = {6};
  t.kernel_size = 1;
  cfgs.push_back(t);
  for (const auto& cfg : cfgs) {
    Rng rng(1);
    auto m = make_model(cfg, rng);
    INFO(m->describe());
    CHECK(count_parameters(cfg) == m->num_parameters());
  }
  // A hand count: embedding 6·4 + LSTM layer 0 (20·4 + 20·5 + 2·20) + layer 1 (20·5 + 20·5 + 40)
  // + head 5·3 + 3.
  CHECK(count_parameters(tiny("lstm")) == 24 + 220 + 240 + 18);
  // TCN E = 3 (raw input), channels [4]: conv1 4·3·2 + 4, conv2 4·4·2 + 4, downsample 4·3 + 4,
  // head 4·3 + 3.
  ModelConfig c = tiny("tcn", "linear", "per_position", 0);
  c.channels = {4};
  CHECK(count_parameters(c) == 28 + 36 + 16 + 15);
}

TEST_CASE("describe gives one line with family sizes and parameter count", "[models]") {
  ModelConfig d;
  d.model = "lstm";
  d.vocab_size = 10;
  d.embedding_dim = 16;
  d.hidden_size = 64;
  d.num_layers = 2;
  d.output_size = 10;
  // 10·16 + (256·16 + 256·64 + 512) + (256·64 + 256·64 + 512) + 64·10 + 10
  CHECK(count_parameters(d) == 55082);
  Rng rng(1);
  CHECK(make_model(d, rng)->describe() ==
        "lstm: input=embedding(V=10, E=16) hidden=64 layers=2 head=per_position(O=10) params=55082");
  ModelConfig t = tiny("tcn", "linear", "last_position", 0);
  t.kernel_size = 3;
  t.dropout = 0.25f;
  CHECK(make_model(t, rng)->describe() ==
        "tcn: input=linear(D=3, no projection) channels=[5, 5] kernel=3 receptive_field=13 "
        "dropout=0.25 head=last_position(O=3) params=" + std::to_string(count_parameters(t)));
}

TEST_CASE("Parameter keys follow PyTorch module names", "[models]") {
  Rng rng(2);
  auto lstm = make_model(tiny("lstm"), rng);
  const std::vector<std::string> want_lstm{
      "embedding.weight",    "lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0",
      "lstm.bias_hh_l0",     "lstm.weight_ih_l1", "lstm.weight_hh_l1", "lstm.bias_ih_l1",
      "lstm.bias_hh_l1",     "head.weight",       "head.bias"};
  CHECK(keys(*lstm) == want_lstm);

  auto gru = make_model(tiny("gru", "linear", "last_position", 4), rng);
  const auto kg = keys(*gru);
  REQUIRE(kg.size() == 12);
  CHECK(kg[0] == "input.weight");
  CHECK(kg[1] == "input.bias");
  CHECK(kg[2] == "gru.weight_ih_l0");
  CHECK(kg[10] == "head.weight");

  auto rnn = make_model(tiny("rnn", "linear", "per_position", 0), rng);
  CHECK(keys(*rnn).front() == "rnn.weight_ih_l0");

  ModelConfig tc = tiny("tcn", "linear", "per_position", 0);
  tc.channels = {3, 4};
  auto tcn = make_model(tc, rng);
  const std::vector<std::string> want_tcn{
      "tcn.network.0.conv1.weight",      "tcn.network.0.conv1.bias",
      "tcn.network.0.conv2.weight",      "tcn.network.0.conv2.bias",
      "tcn.network.1.conv1.weight",      "tcn.network.1.conv1.bias",
      "tcn.network.1.conv2.weight",      "tcn.network.1.conv2.bias",
      "tcn.network.1.downsample.weight", "tcn.network.1.downsample.bias",
      "head.weight",                     "head.bias"};
  CHECK(keys(*tcn) == want_tcn);
  // Shapes as PyTorch: head.weight [O, C_last], embedding [V, E].
  auto np = lstm->named_parameters();
  auto shape = [](const Parameter* p) {
    return std::vector<std::size_t>(p->value.shape().begin(), p->value.shape().end());
  };
  CHECK(shape(np.front().param) == std::vector<std::size_t>{6, 4});
  CHECK(shape(np[9].param) == std::vector<std::size_t>{3, 5});
}

TEST_CASE("The same seed builds the same model and a different seed another", "[models]") {
  for (const auto& model : kFamilies) {
    INFO(model);
    Rng a(9), b(9), c(10);
    auto ma = make_model(tiny(model), a);
    auto mb = make_model(tiny(model), b);
    auto mc = make_model(tiny(model), c);
    auto pa = ma->parameters(), pb = mb->parameters(), pc = mc->parameters();
    REQUIRE(pa.size() == pb.size());
    bool all_same = true, any_diff = false;
    for (std::size_t i = 0; i < pa.size(); ++i) {
      all_same = all_same && pa[i]->value == pb[i]->value;
      any_diff = any_diff || pa[i]->value != pc[i]->value;
    }
    CHECK(all_same);
    CHECK(any_diff);
  }
}

TEST_CASE("hidden_size_for_budget picks the largest hidden size within the budget", "[models]") {
  for (const auto& model : kFamilies) {
    for (std::size_t budget : {std::size_t{2000}, std::size_t{50000}}) {
      INFO(model << " budget " << budget);
      ModelConfig cfg = tiny(model, "embedding", "per_position", 16);
      cfg.vocab_size = 10;
      cfg.output_size = 10;
      const ModelConfig fit = hidden_size_for_budget(cfg, budget);
      CHECK(fit.hidden_size >= 1);
      CHECK(count_parameters(fit) <= budget);
      ModelConfig bigger = fit;
      bigger.hidden_size += 1;
      CHECK(count_parameters(bigger) > budget);
      Rng rng(4);
      CHECK(make_model(fit, rng)->num_parameters() == count_parameters(fit));
    }
  }
  // Budgets matched across families land within one hidden unit's worth of each other.
  ModelConfig l = tiny("lstm", "embedding", "per_position", 16);
  ModelConfig r = tiny("rnn", "embedding", "per_position", 16);
  CHECK(hidden_size_for_budget(r, 20000).hidden_size > hidden_size_for_budget(l, 20000).hidden_size);

  try {
    hidden_size_for_budget(tiny("lstm"), 10);
    FAIL("a budget below the h = 1 count must throw");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "param_budget");
    CHECK(e.value() == "10");
  }
  ModelConfig tc = tiny("tcn");
  tc.channels = {4, 4};
  try {
    hidden_size_for_budget(tc, 100000);
    FAIL("explicit tcn channels must throw");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "channels");
  }
}

TEST_CASE("hidden_size_for_budget matches transformers by d_model in steps of the head count", "[models]") {
  auto tfm = [](const std::string& pe, std::size_t heads) {
    ModelConfig c;
    c.model = "transformer_decoder";
    c.input = "embedding";
    c.vocab_size = 12;
    c.embedding_dim = 8;
    c.hidden_size = 8;
    c.num_layers = 2;
    c.n_heads = heads;
    c.d_ff = 16;
    c.positional_encoding = pe;
    c.norm_placement = "pre";
    c.max_len = 32;
    c.output_size = 12;
    return c;
  };
  struct Case {
    std::string pe;
    std::size_t heads, step;
  };
  // rope*: even head size -> d_model in steps of 2·heads; sinusoidal: even d_model; else heads.
  for (const Case& k : {Case{"rope", 2, 4}, Case{"rope", 3, 6}, Case{"sinusoidal", 3, 6},
                        Case{"sinusoidal", 2, 2}, Case{"learned", 3, 3}, Case{"alibi", 1, 1}}) {
    for (double ratio : {0.0, 2.0, 4.0}) {
      for (std::size_t budget : {std::size_t{3000}, std::size_t{40000}}) {
        INFO(k.pe << " heads " << k.heads << " ratio " << ratio << " budget " << budget);
        const ModelConfig fit = hidden_size_for_budget(tfm(k.pe, k.heads), budget, ratio);
        const std::size_t D = fit.hidden_size;
        CHECK(D % k.step == 0);
        CHECK(fit.embedding_dim == D);
        CHECK(fit.n_heads == k.heads);
        CHECK(fit.num_layers == 2);
        CHECK(fit.d_ff == (ratio > 0 ? static_cast<std::size_t>(std::llround(ratio * D)) : 16));
        CHECK(count_parameters(fit) <= budget);
        // The next allowed d_model (same rule for d_ff) exceeds the budget.
        ModelConfig bigger = fit;
        bigger.hidden_size = bigger.embedding_dim = D + k.step;
        if (ratio > 0) bigger.d_ff = static_cast<std::size_t>(std::llround(ratio * (D + k.step)));
        CHECK(count_parameters(bigger) > budget);
        Rng rng(4);
        CHECK(make_model(fit, rng)->num_parameters() == count_parameters(fit));
      }
    }
  }
  // A larger budget never gives a smaller model; matched families land close to the budget.
  const ModelConfig small = hidden_size_for_budget(tfm("rope", 2), 5000, 2.0);
  const ModelConfig large = hidden_size_for_budget(tfm("rope", 2), 50000, 2.0);
  CHECK(large.hidden_size > small.hidden_size);
  CHECK(count_parameters(large) > 40000);  // within one d_model step (4) of 50000 here
  // Linear input: the projection width follows d_model.
  ModelConfig lin = tfm("rope", 2);
  lin.input = "linear";
  lin.input_size = 2;
  lin.output_size = 1;
  lin.head = "last_position";
  const ModelConfig lfit = hidden_size_for_budget(lin, 8000, 2.0);
  CHECK(lfit.embedding_dim == lfit.hidden_size);
  Rng rng(5);
  CHECK(make_model(lfit, rng)->num_parameters() == count_parameters(lfit));

  auto key_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const ConfigError& e) {
      return e.key();
    }
    return std::string("<no error>");
  };
  CHECK(key_of([&] { hidden_size_for_budget(tfm("rope", 2), 100, 2.0); }) == "param_budget");
  CHECK(key_of([&] { hidden_size_for_budget(tfm("rope", 2), 5000, -1.0); }) == "d_ff_ratio");
  CHECK(key_of([&] { hidden_size_for_budget(tfm("rope", 2), 5000, std::nan("")); }) == "d_ff_ratio");
  CHECK(key_of([&] { hidden_size_for_budget(tfm("rope", 0), 5000, 2.0); }) == "n_heads");
  lin.embedding_dim = 0;
  CHECK(key_of([&] { hidden_size_for_budget(lin, 5000, 2.0); }) == "embedding_dim");
  try {
    hidden_size_for_budget(tfm("rope", 2), 100, 2.0);
  } catch (const ConfigError& e) {
    CHECK_THAT(e.allowed(), Catch::Contains("d_model = 4"));
  }
  // d_ff_ratio does not affect the other families.
  ModelConfig l = tiny("lstm", "embedding", "per_position", 16);
  CHECK(hidden_size_for_budget(l, 20000, 4.0).hidden_size == hidden_size_for_budget(l, 20000).hidden_size);
}

TEST_CASE("ConfigError names the offending key", "[models][errors]") {
  struct Bad {
    std::string key;
    ModelConfig cfg;
  };
  std::vector<Bad> bad;
  auto add = [&](const std::string& key, const std::string& model, auto mutate) {
    ModelConfig c = tiny(model);
    mutate(c);
    bad.push_back({key, c});
  };
  add("hidden_size", "lstm", [](ModelConfig& c) { c.hidden_size = 0; });
  add("hidden_size", "tcn", [](ModelConfig& c) { c.hidden_size = 0; });
  add("kernel_size", "tcn", [](ModelConfig& c) { c.kernel_size = 0; });
  add("model", "transformer_xl", [](ModelConfig&) {});
  add("model", "", [](ModelConfig&) {});
  add("head", "gru", [](ModelConfig& c) { c.head = "middle"; });
  add("input", "rnn", [](ModelConfig& c) { c.input = "onehot"; });
  add("vocab_size", "lstm", [](ModelConfig& c) { c.vocab_size = 0; });
  add("embedding_dim", "lstm", [](ModelConfig& c) { c.embedding_dim = 0; });
  add("input_size", "lstm", [](ModelConfig& c) { c.input = "linear"; c.input_size = 0; });
  add("num_layers", "gru", [](ModelConfig& c) { c.num_layers = 0; });
  add("num_layers", "tcn", [](ModelConfig& c) { c.num_layers = 31; });
  add("channels", "tcn", [](ModelConfig& c) { c.channels = {4, 0}; });
  add("nonlinearity", "rnn", [](ModelConfig& c) { c.nonlinearity = "sigmoid"; });
  add("dropout", "lstm", [](ModelConfig& c) { c.dropout = 1.0f; });
  add("dropout", "tcn", [](ModelConfig& c) { c.dropout = std::nanf(""); });
  add("output_size", "tcn", [](ModelConfig& c) { c.output_size = 0; });
  add("padding_idx", "lstm", [](ModelConfig& c) { c.padding_idx = 6; });
  add("padding_idx", "lstm", [](ModelConfig& c) { c.input = "linear"; c.padding_idx = 0; });
  add("forget_bias", "gru", [](ModelConfig& c) { c.forget_bias = 1.0f; });
  add("forget_bias", "rnn", [](ModelConfig& c) { c.forget_bias = -1.0f; });
  add("forget_bias", "lstm", [](ModelConfig& c) { c.forget_bias = std::nanf(""); });
  for (const auto& b : bad) {
    INFO("expected key " << b.key << ", model '" << b.cfg.model << "'");
    bool caught = false;
    try {
      Rng rng(1);
      make_model(b.cfg, rng);
    } catch (const ConfigError& e) {
      caught = true;
      INFO("what(): " << e.what());
      CHECK(e.key() == b.key);
      CHECK(std::string(e.what()).rfind(b.key + " = ", 0) == 0);
      CHECK_FALSE(e.allowed().empty());
    }
    CHECK(caught);
    CHECK_THROWS_AS(b.cfg.validate(), std::invalid_argument);  // ConfigError is one
    CHECK_THROWS_AS(count_parameters(b.cfg), ConfigError);
  }
  try {
    tiny("transformer_xl").validate();
    FAIL("unknown model must throw");
  } catch (const ConfigError& e) {
    CHECK(e.value() == "'transformer_xl'");
    CHECK(e.allowed() == "one of rnn, lstm, gru, tcn, transformer_encoder, transformer_decoder, "
                         "transformer_encoder_decoder");
    CHECK(std::string(e.what()) == "model = 'transformer_xl': allowed one of rnn, lstm, gru, tcn, "
                                   "transformer_encoder, transformer_decoder, "
                                   "transformer_encoder_decoder");
  }
  // Fields a family does not use are not checked.
  ModelConfig unused = tiny("lstm");
  unused.kernel_size = 0;
  unused.nonlinearity = "sigmoid";
  CHECK_NOTHROW(unused.validate());
  ModelConfig explicit_channels = tiny("tcn");
  explicit_channels.channels = {4, 4};
  explicit_channels.hidden_size = 0;  // channels take over
  CHECK_NOTHROW(explicit_channels.validate());
}

TEST_CASE("The last-position head reads only the last step", "[models]") {
  const std::size_t B = 3, T = 6;
  for (const auto& model : kFamilies) {
    INFO(model);
    const ModelConfig per = tiny(model, "linear", "per_position", 4);
    const ModelConfig last = tiny(model, "linear", "last_position", 4);
    Rng r1(21), r2(21), rd(22);
    auto mp = make_model(per, r1);
    auto ml = make_model(last, r2);  // same seed, same shapes: the same parameters
    const Tensor3 x = random_x(B, T, per.input_size, rd);
    const Tensor3 yp = mp->forward(x);
    const Tensor3 yl = ml->forward(x);
    REQUIRE(yl.shape()[1] == 1);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t o = 0; o < per.output_size; ++o) CHECK(yl(b, 0, o) == yp(b, T - 1, o));

    // Backward of the last-position model == backward of the per-position model with the
    // gradient placed at T-1 only.
    Tensor3 g({B, 1, per.output_size});
    rd.fill_normal(g, 0.0f, 1.0f);
    Tensor3 gp = xt::zeros<float>({B, T, per.output_size});
    xt::view(gp, xt::all(), T - 1, xt::all()) = xt::view(g, xt::all(), 0, xt::all());
    mp->zero_grad();
    ml->zero_grad();
    mp->backward(gp);
    ml->backward(g);
    auto pp = mp->named_parameters(), pl = ml->named_parameters();
    REQUIRE(pp.size() == pl.size());
    for (std::size_t i = 0; i < pp.size(); ++i) {
      INFO(pp[i].key);
      CHECK(max_abs_diff(pp[i].param->grad, pl[i].param->grad) <= 1e-5);
    }
    CHECK(max_abs_diff(mp->input_grad(), ml->input_grad()) <= 1e-5);

    // The gradient reaching the last level from the head: ‖g_t W_head‖ at T-1, nothing earlier
    // through the head (for the TCN, row L-1 is exactly that gradient; for recurrent models the
    // earlier steps of row L-1 also get the recurrent path).
    const auto& W = ml->named_parameters()[ml->named_parameters().size() - 2].param->value;  // [O, H]
    const std::size_t H = W.shape()[1], L = last.num_layers;
    double s = 0.0;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t h = 0; h < H; ++h) {
        double v = 0.0;
        for (std::size_t o = 0; o < per.output_size; ++o) v += double(g(b, 0, o)) * W(o, h);
        s += v * v;
      }
    const Tensor2& n = ml->step_grad_norms();
    CHECK(n(L - 1, T - 1) == Approx(std::sqrt(s)).epsilon(1e-5));
    if (model == "tcn") {
      for (std::size_t t = 0; t + 1 < T; ++t) CHECK(n(L - 1, t) == 0.0f);
    } else {
      CHECK(n(L - 1, 0) > 0.0f);  // reached through the recurrence
    }
  }
}

TEST_CASE("Gradient norms per step match the gradients they summarise", "[models]") {
  const std::size_t B = 2, T = 5;
  for (const auto& model : kFamilies) {
    INFO(model);
    ModelConfig cfg = tiny(model, "linear", "per_position", 0);  // body input = x
    Rng rng(31);
    auto m = make_model(cfg, rng);
    const Tensor3 x = random_x(B, T, cfg.input_size, rng);
    const Tensor3 y = m->forward(x);
    Tensor3 dy(y.shape());
    rng.fill_normal(dy, 0.0f, 1.0f);
    m->backward(dy);
    const Tensor3& dx = m->input_grad();
    const Tensor1& in = m->input_grad_norms();
    for (std::size_t t = 0; t < T; ++t) CHECK(in(t) == Approx(frobenius_rows(dx, t)).epsilon(1e-5));
    CHECK(std::isfinite(in(0)));
    CHECK(in(0) > 0.0f);
    const Tensor2& n = m->step_grad_norms();
    for (float v : n) {
      REQUIRE(std::isfinite(v));
      REQUIRE(v >= 0.0f);
    }
    CHECK(n(cfg.num_layers - 1, T - 1) > 0.0f);
    // The norms are those of the last backward: a zero upstream gradient gives all zeros.
    m->forward(x);
    m->backward(xt::zeros<float>(y.shape()));
    for (float v : m->step_grad_norms()) CHECK(v == 0.0f);
    for (float v : m->input_grad_norms()) CHECK(v == 0.0f);
  }
}

TEST_CASE("Receptive field and sequential steps follow the model structure", "[models]") {
  Rng rng(5);
  ModelConfig l = tiny("lstm");
  l.num_layers = 3;
  auto lstm = make_model(l, rng);
  CHECK(lstm->receptive_field() == 0);
  CHECK(lstm->sequential_steps(100) == 300);
  CHECK(dynamic_cast<RecurrentModel&>(*lstm).num_layers() == 3);

  ModelConfig t = tiny("tcn", "linear", "per_position", 0);
  t.num_layers = 2;
  t.kernel_size = 2;
  auto tcn = make_model(t, rng);
  const std::size_t R = 1 + 2 * 1 * 3;  // 1 + 2(k-1)(2^L - 1)
  CHECK(tcn->receptive_field() == R);
  CHECK(tcn->sequential_steps(100) == 4);
  CHECK(tcn->sequential_steps(1000) == 4);

  // Empirically: changing x at t0 changes exactly the outputs t0 .. t0 + R - 1.
  const std::size_t T = 12, t0 = 2;
  Tensor3 x = random_x(1, T, t.input_size, rng);
  const Tensor3 y0 = tcn->forward(x);
  for (std::size_t c = 0; c < t.input_size; ++c) x(0, t0, c) += 1.0f;
  const Tensor3 y1 = tcn->forward(x);
  for (std::size_t tt = 0; tt < T; ++tt) {
    bool changed = false;
    for (std::size_t o = 0; o < t.output_size; ++o) changed = changed || y0(0, tt, o) != y1(0, tt, o);
    INFO("t = " << tt);
    CHECK(changed == (tt >= t0 && tt < t0 + R));
  }
}

TEST_CASE("Dropout is active in train mode only and does not shift the initialisation", "[models]") {
  const std::size_t B = 2, T = 6;
  for (const auto& model : kFamilies) {
    INFO(model);
    ModelConfig cfg = tiny(model, "linear", "per_position", 4);
    cfg.dropout = 0.5f;
    ModelConfig nodrop = cfg;
    nodrop.dropout = 0.0f;
    Rng r1(41), r2(41), rd(42);
    auto m = make_model(cfg, r1);
    auto m0 = make_model(nodrop, r2);
    const Tensor3 x = random_x(B, T, cfg.input_size, rd);
    const Tensor3 a = m->forward(x);
    const Tensor3 b = m->forward(x);
    const bool fresh_masks = a != b;  // fresh masks per train-mode forward
    CHECK(fresh_masks);
    m->eval();
    const Tensor3 c = m->forward(x);
    const bool eval_repeats = c == m->forward(x);
    CHECK(eval_repeats);
    CHECK(max_abs_diff(c, m0->forward(x)) == 0.0);  // eval == the p = 0 model of the same seed
    m->train();
    const bool train_again = m->forward(x) != c;
    CHECK(train_again);
  }
}

TEST_CASE("forget_bias shifts only the LSTM forget-gate rows of bias_hh, in every layer", "[models]") {
  // Gers et al. 2000 / Jozefowicz et al. 2015: forget-gate bias 1 at initialisation. The shift is
  // added after PyTorch's draw and draws nothing, so every other value equals the bias-0 model's.
  ModelConfig cfg = tiny("lstm");  // H = 5, 2 layers
  ModelConfig fb = cfg;
  fb.forget_bias = 1.0f;
  Rng r1(77), r2(77);
  auto m0 = make_model(cfg, r1);
  auto m1 = make_model(fb, r2);
  const auto p0 = m0->named_parameters(), p1 = m1->named_parameters();
  REQUIRE(p0.size() == p1.size());
  const std::size_t H = cfg.hidden_size;
  int shifted_layers = 0;
  for (std::size_t i = 0; i < p0.size(); ++i) {
    INFO(p0[i].key);
    REQUIRE(p0[i].key == p1[i].key);
    const auto& a = p0[i].param->value;
    const auto& b = p1[i].param->value;
    const bool is_bias_hh = p0[i].key.find("bias_hh_l") != std::string::npos;
    for (std::size_t j = 0; j < a.size(); ++j) {
      const double want = (is_bias_hh && j >= H && j < 2 * H) ? 1.0 : 0.0;
      CHECK(double(b.data()[j]) - double(a.data()[j]) == Approx(want).margin(1e-6));
    }
    shifted_layers += is_bias_hh;
  }
  CHECK(shifted_layers == 2);
  // The forget gate starts near σ(1) ≈ 0.73 instead of σ(0) = 0.5: a slower decay of the cell.
  // And the shifted model still computes (forward differs, same shapes).
  Rng rd(5);
  const IndexTensor2 ids = random_ids(2, 4, cfg.vocab_size, rd);
  const Tensor3 y0 = m0->forward(ids), y1 = m1->forward(ids);
  REQUIRE(y0.shape() == y1.shape());
  CHECK(max_abs_diff(y0, y1) > 0.0);
  // Budget matching keeps the field and the count (a bias shift adds no parameters).
  CHECK(count_parameters(fb) == count_parameters(cfg));
  CHECK(hidden_size_for_budget(fb, 2000).forget_bias == 1.0f);
}

TEST_CASE("padding_idx reaches the embedding", "[models]") {
  ModelConfig cfg = tiny("gru");
  cfg.padding_idx = 0;
  Rng rng(6);
  auto m = make_model(cfg, rng);
  auto& w = m->named_parameters().front().param->value;  // embedding.weight [V, E]
  for (std::size_t e = 0; e < cfg.embedding_dim; ++e) CHECK(w(0, e) == 0.0f);
  IndexTensor2 ids = {{0, 1, 0, 2}};
  const Tensor3 y = m->forward(ids);
  m->zero_grad();
  m->backward(xt::ones<float>(y.shape()));
  const auto& g = m->named_parameters().front().param->grad;
  for (std::size_t e = 0; e < cfg.embedding_dim; ++e) CHECK(g(0, e) == 0.0f);
  CHECK(std::abs(g(1, 0)) + std::abs(g(1, 1)) > 0.0f);
}

TEST_CASE("Misuse of forward and backward throws", "[models][errors]") {
  Rng rng(7);
  auto m = make_model(tiny("lstm", "linear", "per_position", 4), rng);
  CHECK_THROWS_AS(m->backward(xt::zeros<float>({2, 3, 3})), std::logic_error);
  CHECK_THROWS_AS(m->step_grad_norms(), std::logic_error);
  CHECK_THROWS_AS(m->input_grad_norms(), std::logic_error);
  CHECK_THROWS_AS(m->input_grad(), std::logic_error);
  CHECK_THROWS_AS(m->forward(Tensor3(xt::zeros<float>({2, 3, 4}))), ShapeError);  // D = 3
  CHECK_THROWS_AS(m->forward(Tensor3(xt::zeros<float>({2, 0, 3}))), ShapeError);  // T = 0
  const Tensor3 y = m->forward(Tensor3(xt::zeros<float>({2, 3, 3})));
  CHECK_THROWS_AS(m->backward(xt::zeros<float>({2, 1, 3})), ShapeError);
  CHECK_THROWS_AS(m->backward(xt::zeros<float>({2, 3, 4})), ShapeError);
  CHECK_NOTHROW(m->backward(xt::zeros<float>(y.shape())));

  auto last = make_model(tiny("tcn", "embedding", "last_position"), rng);
  IndexTensor2 ids = {{1, 2, 3}};
  last->forward(ids);
  CHECK_THROWS_AS(last->backward(xt::zeros<float>({1, 3, 3})), ShapeError);
  IndexTensor2 bad = {{1, 6}};
  CHECK_THROWS_AS(last->forward(bad), std::out_of_range);

  ModelConfig t = tiny("tcn");
  CHECK_THROWS_AS(RecurrentModel(t, rng), std::invalid_argument);
  CHECK_THROWS_AS(TCNModel(tiny("gru"), rng), std::invalid_argument);
}

namespace {
std::size_t count_differing(const xt::xarray<float>& a, const xt::xarray<float>& b) {
  REQUIRE(a.shape() == b.shape());
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a.data()[i] != b.data()[i];
  return n;
}

/// A per-position recurrent model (raw linear input) against its layer and a Linear head run
/// batch-first by hand, with the model's parameters: logits, dL/dx, every recurrent gradient, the
/// head's bias gradient and the step norms bit for bit; the head's weight gradient within float
/// summation order (the time-major head sums its rows in another order).
template <class Layer>
void check_against_parts(const std::string& family, std::size_t L, std::size_t B, float dropout, bool eval,
                         int backwards) {
  INFO(family << " L=" << L << " B=" << B << " dropout=" << dropout << " eval=" << eval << " backwards=" << backwards);
  ModelConfig c = tiny(family, "linear", "per_position", 0);
  c.num_layers = L;
  c.dropout = dropout;
  const std::size_t D = c.input_size, H = c.hidden_size, O = c.output_size;
  Rng rng(5);
  auto m = make_model(c, rng);
  if (eval) m->set_training(false);
  Layer layer(D, H, L, rng);
  Linear head(H, O, rng);
  const auto named = m->named_parameters();
  std::vector<NamedParameter> lp;
  layer.collect_parameters("", lp);
  REQUIRE(named.size() == lp.size() + 2);
  for (std::size_t i = 0; i < lp.size(); ++i) lp[i].param->value = named[i].param->value;
  head.weight.value = named[lp.size()].param->value;
  head.bias.value = named[lp.size() + 1].param->value;
  const std::size_t T = 6;
  const Tensor3 x = random_x(B, T, D, rng), dy = random_x(B, T, O, rng), other = random_x(B + 1, T + 2, D, rng);
  m->forward(other);  // a forward of another shape first
  const Tensor3 y = m->forward(x);
  CHECK(count_differing(y, head.forward(layer.forward(x))) == 0);
  Tensor3 dx;
  for (int k = 0; k < backwards; ++k) {
    m->backward(dy);
    dx = layer.backward(head.backward(dy));
  }
  CHECK(count_differing(m->input_grad(), dx) == 0);
  for (std::size_t i = 0; i < lp.size(); ++i) {
    INFO(named[i].key);
    CHECK(count_differing(named[i].param->grad, lp[i].param->grad) == 0);
  }
  // Sums over B·T rows in another order: a few float ulps of the largest element, anywhere.
  double scale = 0.0;
  for (const float g : head.weight.grad) scale = std::max(scale, std::abs(static_cast<double>(g)));
  const std::string dw =
      test::compare_close(named[lp.size()].param->grad, xt::cast<double>(head.weight.grad), 1e-5, 1e-6 * scale);
  INFO(dw);
  CHECK(dw.empty());
  CHECK(scale > 0.0);
  CHECK(count_differing(named[lp.size() + 1].param->grad, head.bias.grad) == 0);
  CHECK(count_differing(m->step_grad_norms(), layer.hidden_grad_norms()) == 0);
}
}  // namespace

TEST_CASE("recurrent models give the values of their layer and head run batch-first", "[models][factory]") {
  for (const std::size_t L : {std::size_t{1}, std::size_t{2}})
    for (const std::size_t B : {std::size_t{3}, std::size_t{32}})
      for (const auto& [dropout, eval] : {std::pair<float, bool>{0.0f, false}, {0.3f, true}, {0.0f, true}})
        for (const int backwards : {1, 2}) {
          check_against_parts<RNN>("rnn", L, B, dropout, eval, backwards);
          check_against_parts<LSTM>("lstm", L, B, dropout, eval, backwards);
          check_against_parts<GRU>("gru", L, B, dropout, eval, backwards);
        }
}


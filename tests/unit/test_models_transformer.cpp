// Transformer families of the model factory (models/transformer_model.hpp):
//   - every family × positional encoding builds from ModelConfig, gives logits of the right shape
//     for both heads, and has exactly count_parameters(cfg) scalars;
//   - whole 2-layer models (gelu, dropout 0) pass a finite-difference gradient check through the
//     linear input without projection (dL/dx and every parameter), fake loss L = Σ w ⊙ logits
//     (tests/support/gradcheck.hpp, its default tolerances eps 1e-2, rtol 1e-2, atol 2e-3);
//   - the decoder is causal (logits before t do not change when inputs from t on change), the
//     encoder is not;
//   - bad configurations throw ConfigError naming the key; learned positions beyond max_len throw.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"

using namespace seqlab;
using seqlab::test::check_gradients;
using seqlab::test::GradCheckOptions;
using seqlab::test::Probe;

namespace {

const std::vector<std::string> kEncodings{"sinusoidal", "learned", "rope", "rope_pi",
                                          "rope_ntk",   "alibi",   "none", "t5_bias"};

ModelConfig tiny(const std::string& model, const std::string& pe) {
  ModelConfig c;
  c.model = model;
  c.input = "embedding";
  c.vocab_size = 7;
  c.embedding_dim = 8;
  c.hidden_size = 8;
  c.num_layers = 2;
  c.n_heads = 2;
  c.d_ff = 12;
  c.output_size = 5;
  c.positional_encoding = pe;
  c.max_len = 16;
  c.train_len = 4;
  return c;
}

IndexTensor2 make_ids(std::size_t B, std::size_t T, Rng& rng) {
  IndexTensor2 ids({B, T});
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.uniform_int(7));
  return ids;
}

std::string config_error_key(const ModelConfig& c) {
  try {
    c.validate();
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("Transformer families build for every positional encoding with counted parameters",
          "[models][transformer]") {
  for (const std::string model : {"transformer_encoder", "transformer_decoder"}) {
    for (const auto& pe : kEncodings) {
      for (const std::string placement : {"post", "pre"}) {
        for (const std::string head : {"per_position", "last_position"}) {
          ModelConfig c = tiny(model, pe);
          c.norm_placement = placement;
          c.head = head;
          if (pe == "sinusoidal") c.shared_qk = true;
          if (pe == "alibi") c.norm = "rms_norm";
          INFO(model << " " << pe << " " << placement << " " << head);
          Rng rng(3);
          auto m = make_model(c, rng);
          INFO(m->describe());
          CHECK(m->num_parameters() == count_parameters(c));
          CHECK(m->sequential_steps(100) == 2);
          CHECK(m->receptive_field() == 0);
          const IndexTensor2 ids = make_ids(3, 6, rng);
          const Tensor3 y = m->forward(ids);
          const std::size_t T_out = head == "per_position" ? 6 : 1;
          REQUIRE(y.shape()[0] == 3);
          REQUIRE(y.shape()[1] == T_out);
          REQUIRE(y.shape()[2] == 5);
          for (float v : y) REQUIRE(std::isfinite(v));
          Tensor3 dy = xt::ones<float>(y.shape());
          m->backward(dy);
          CHECK(m->step_grad_norms().shape()[0] == 2);
          CHECK(m->step_grad_norms().shape()[1] == 6);
          auto* tm = dynamic_cast<TransformerModel*>(m.get());
          REQUIRE(tm != nullptr);
          CHECK(tm->layers.size() == 2);
          CHECK(tm->layers[0]->self_attn.attention_probs().shape()[2] == 6);
          CHECK((tm->layers[1]->self_attn.rope() != nullptr) == (pe.compare(0, 4, "rope") == 0));
          CHECK(tm->layers[1]->self_attn.alibi() == (pe == "alibi"));
          CHECK((tm->layers[1]->self_attn.relative_bias() != nullptr) == (pe == "t5_bias"));
          CHECK(tm->layers[0]->self_attn.relative_bias() == tm->layers[1]->self_attn.relative_bias());
          CHECK((tm->final_norm != nullptr) == (placement == "pre"));
        }
      }
    }
  }
}

TEST_CASE("Transformer parameter keys follow the documented layout", "[models][transformer]") {
  ModelConfig c = tiny("transformer_decoder", "learned");
  c.norm_placement = "pre";
  Rng rng(1);
  auto m = make_model(c, rng);
  const auto params = m->named_parameters();
  std::vector<std::string> keys;
  for (const auto& np : params) keys.push_back(np.key);
  REQUIRE(keys.size() >= 4);
  CHECK(keys.front() == "embedding.weight");
  CHECK(keys[1] == "transformer_decoder.pos_embedding.weight");
  CHECK(keys[2] == "transformer_decoder.layers.0.self_attn.in_proj_weight");
  CHECK(keys[keys.size() - 4] == "transformer_decoder.norm.weight");
  CHECK(keys[keys.size() - 3] == "transformer_decoder.norm.bias");
  CHECK(keys.back() == "head.bias");
}

namespace {

void gradcheck_transformer(const ModelConfig& cfg, std::uint64_t seed) {
  constexpr std::size_t kB = 2, kT = 4;
  Rng rng(seed);
  auto m = make_model(cfg, rng);
  Tensor3 x({kB, kT, cfg.input_size});
  rng.fill_normal(x, 0.0f, 1.0f);
  Tensor3 dx = xt::zeros<float>(x.shape());
  const auto out_shape = m->forward(x).shape();
  auto forward = [&]() {
    const Tensor3 y = m->forward(x);
    return std::vector<float>(y.begin(), y.end());
  };
  auto backward = [&](const std::vector<float>& w) {
    m->zero_grad();
    m->forward(x);
    Tensor3 dy(out_shape);
    std::copy(w.begin(), w.end(), dy.begin());
    m->backward(dy);
    std::copy(m->input_grad().begin(), m->input_grad().end(), dx.begin());
  };
  std::vector<Probe> probes;
  probes.push_back({"x", x.data(), dx.data(), x.size()});
  for (auto& np : m->named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  const auto res = check_gradients(forward, backward, probes, GradCheckOptions{});
  INFO(m->describe());
  INFO("checked " << res.checked << ", worst: " << res.worst << "\n" << res.report);
  CHECK(res.ok);
  CHECK(res.checked == count_parameters(cfg) + x.size());
}

ModelConfig grad_cfg(const std::string& model, const std::string& pe, const std::string& placement) {
  ModelConfig c;
  c.model = model;
  c.input = "linear";
  c.input_size = 4;
  c.embedding_dim = 0;  // the body reads x: dL/dx is checked too
  c.hidden_size = 4;
  c.num_layers = 2;
  c.n_heads = 2;
  c.d_ff = 6;
  c.activation = "gelu";
  c.output_size = 3;
  c.positional_encoding = pe;
  c.max_len = 8;
  c.norm_placement = placement;
  return c;
}

}  // namespace

TEST_CASE("Whole transformer encoder gradients match finite differences", "[models][transformer][gradcheck]") {
  SECTION("rope post-norm") { gradcheck_transformer(grad_cfg("transformer_encoder", "rope", "post"), 11); }
  SECTION("learned pre-norm") { gradcheck_transformer(grad_cfg("transformer_encoder", "learned", "pre"), 12); }
}

TEST_CASE("Whole transformer decoder gradients match finite differences", "[models][transformer][gradcheck]") {
  SECTION("rope pre-norm") { gradcheck_transformer(grad_cfg("transformer_decoder", "rope", "pre"), 13); }
  SECTION("learned post-norm") {
    gradcheck_transformer(grad_cfg("transformer_decoder", "learned", "post"), 14);
  }
  SECTION("alibi pre-norm last_position") {
    ModelConfig c = grad_cfg("transformer_decoder", "alibi", "pre");
    c.head = "last_position";
    gradcheck_transformer(c, 15);
  }
  SECTION("t5_bias pre-norm (one table shared by both layers)") {
    ModelConfig c = grad_cfg("transformer_decoder", "t5_bias", "pre");
    c.relative_buckets = 4;
    c.relative_max_distance = 3;
    gradcheck_transformer(c, 16);
  }
}

TEST_CASE("The transformer decoder is causal and the encoder is not", "[models][transformer]") {
  constexpr std::size_t T = 6, t0 = 3;
  for (const std::string model : {"transformer_encoder", "transformer_decoder"}) {
    for (const std::string pe : {"sinusoidal", "rope", "alibi"}) {
      INFO(model << " " << pe);
      Rng rng(21);
      auto m = make_model(tiny(model, pe), rng);
      IndexTensor2 ids = make_ids(2, T, rng);
      const Tensor3 y0 = m->forward(ids);
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = t0; t < T; ++t) ids(b, t) = (ids(b, t) + 1 + static_cast<int>(t)) % 7;
      const Tensor3 y1 = m->forward(ids);
      double before = 0.0, after = 0.0;  // max |Δ logits| at t < t0 and t >= t0
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < T; ++t)
          for (std::size_t o = 0; o < 5; ++o) {
            const double d = std::abs(double(y1(b, t, o)) - y0(b, t, o));
            (t < t0 ? before : after) = std::max(t < t0 ? before : after, d);
          }
      CHECK(after > 1e-3);
      if (model == "transformer_decoder") CHECK(before == 0.0);
      else CHECK(before > 1e-3);
    }
  }
}

TEST_CASE("Bad transformer configurations throw ConfigError naming the key", "[models][transformer]") {
  auto bad = [](const std::string& key, auto edit) {
    ModelConfig c = tiny("transformer_encoder", "sinusoidal");
    edit(c);
    INFO("expected key " << key);
    CHECK(config_error_key(c) == key);
  };
  CHECK(config_error_key(tiny("transformer_encoder", "sinusoidal")) == "<no error>");
  bad("n_heads", [](ModelConfig& c) { c.n_heads = 3; });  // 8 % 3 != 0
  bad("n_heads", [](ModelConfig& c) { c.n_heads = 0; });
  bad("n_heads", [](ModelConfig& c) {  // head size 8 / 8 = 1 is odd
    c.n_heads = 8;
    c.positional_encoding = "rope";
  });
  bad("n_heads", [](ModelConfig& c) {
    c.n_heads = 8;
    c.positional_encoding = "rope_ntk";
  });
  bad("d_ff", [](ModelConfig& c) { c.d_ff = 0; });
  bad("activation", [](ModelConfig& c) { c.activation = "swish"; });
  bad("positional_encoding", [](ModelConfig& c) { c.positional_encoding = "xpos"; });
  bad("norm", [](ModelConfig& c) { c.norm = "group_norm"; });
  bad("norm_placement", [](ModelConfig& c) { c.norm_placement = "sandwich"; });
  bad("rope_pairing", [](ModelConfig& c) {
    c.positional_encoding = "rope";
    c.rope_pairing = "diagonal";
  });
  bad("max_len", [](ModelConfig& c) {
    c.positional_encoding = "learned";
    c.max_len = 0;
  });
  bad("train_len", [](ModelConfig& c) {
    c.positional_encoding = "rope_pi";
    c.train_len = 0;
  });
  bad("embedding_dim", [](ModelConfig& c) { c.embedding_dim = 6; });
  bad("attention_kernel", [](ModelConfig& c) { c.attention_kernel = "flash"; });
  bad("hidden_size", [](ModelConfig& c) {  // odd d_model with sinusoidal positions
    c.hidden_size = 7;
    c.embedding_dim = 7;
    c.n_heads = 7;
  });
  // make_model and count_parameters validate too.
  ModelConfig c = tiny("transformer_decoder", "rope");
  c.n_heads = 8;
  Rng rng(1);
  CHECK_THROWS_AS(make_model(c, rng), ConfigError);
  CHECK_THROWS_AS(count_parameters(c), ConfigError);
}

TEST_CASE("attention_kernel reaches every layer and both kernels give the same model", "[models][transformer]") {
  // Decoder (causal) with ALiBi, encoder with RoPE and padding: logits and parameter gradients of
  // the fused model against the materialised one (same seed, same parameters); auto (the
  // default) picks by length (nn/attention.hpp kFusedAttentionMinSeqLen[Causal]).
  CHECK(ModelConfig{}.attention_kernel == "auto");
  for (const std::string model : {"transformer_decoder", "transformer_encoder"}) {
    INFO(model);
    const std::string pe = model == "transformer_decoder" ? "alibi" : "rope";
    Rng rng(51);
    const IndexTensor2 ids = make_ids(2, 9, rng);
    PaddingMask pad = xt::zeros<std::uint8_t>({std::size_t{2}, std::size_t{9}});
    pad(1, 7) = pad(1, 8) = 1;
    Tensor3 dlogits({2, 9, 5});
    rng.fill_normal(dlogits, 0.0f, 1.0f);
    std::vector<Tensor3> logits;
    std::vector<std::vector<xt::xarray<float>>> grads;
    for (const std::string kernel : {"materialised", "fused", "auto"}) {
      ModelConfig c = tiny(model, pe);
      c.attention_kernel = kernel;
      Rng build_rng(52);
      auto m = make_model(c, build_rng);
      auto* tm = dynamic_cast<TransformerModel*>(m.get());
      REQUIRE(tm != nullptr);
      tm->set_padding(model == "transformer_encoder" ? &pad : nullptr);
      logits.push_back(m->forward(ids));
      m->zero_grad();
      m->backward(dlogits);
      grads.emplace_back();
      for (const auto& np : m->named_parameters()) grads.back().push_back(np.param->grad);
      for (const auto& layer : tm->layers) {
        CHECK(layer->self_attn.kernel() == parse_attention_kernel(kernel));
        CHECK(layer->self_attn.last_forward_fused() == (kernel == "fused"));  // auto: 9 is short
      }
    }
    for (std::size_t k : {1, 2}) {
      INFO("kernel " << (k == 1 ? "fused" : "auto") << " against materialised");
      const std::string msg = test::compare_close(logits[k], xt::cast<double>(logits[0]), 1e-5, 1e-6);
      INFO("logits: " << msg);
      CHECK(msg.empty());
      for (std::size_t i = 0; i < grads[0].size(); ++i) {
        const std::string gmsg = test::compare_close(grads[k][i], xt::cast<double>(grads[0][i]), 1e-4, 1e-5);
        INFO("grad " << i << ": " << gmsg);
        CHECK(gmsg.empty());
      }
    }
  }
}

TEST_CASE("Learned positions beyond max_len throw naming max_len", "[models][transformer]") {
  ModelConfig c = tiny("transformer_decoder", "learned");
  c.max_len = 5;
  Rng rng(2);
  auto m = make_model(c, rng);
  CHECK_NOTHROW(m->forward(make_ids(1, 5, rng)));
  try {
    m->forward(make_ids(1, 6, rng));
    FAIL("no exception for seq_len 6 > max_len 5");
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("max_len = 5") != std::string::npos);
  }
}

TEST_CASE("Transformer key padding hides padded keys from attention", "[models][transformer]") {
  ModelConfig c = tiny("transformer_encoder", "sinusoidal");
  Rng rng(4);
  auto m = make_model(c, rng);
  auto* tm = dynamic_cast<TransformerModel*>(m.get());
  REQUIRE(tm != nullptr);
  IndexTensor2 ids = make_ids(2, 5, rng);
  PaddingMask pad = xt::zeros<std::uint8_t>({2, 5});
  pad(0, 4) = 1;
  pad(1, 3) = 1;
  pad(1, 4) = 1;
  tm->set_padding(&pad);
  const Tensor3 y0 = m->forward(ids);
  for (std::size_t l = 0; l < 2; ++l) {
    const Tensor4& p = tm->layers[l]->self_attn.attention_probs();  // [B, h, T, T]
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t i = 0; i < 5; ++i) {
        CHECK(p(0, h, i, 4) == 0.0f);
        CHECK(p(1, h, i, 3) == 0.0f);
        CHECK(p(1, h, i, 4) == 0.0f);
      }
  }
  // Changing padded tokens leaves the unpadded positions' logits unchanged.
  ids(0, 4) = (ids(0, 4) + 1) % 7;
  ids(1, 3) = (ids(1, 3) + 2) % 7;
  const Tensor3 y1 = m->forward(ids);
  double diff = 0.0;
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t o = 0; o < 5; ++o) diff = std::max(diff, double(std::abs(y1(0, t, o) - y0(0, t, o))));
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t o = 0; o < 5; ++o) diff = std::max(diff, double(std::abs(y1(1, t, o) - y0(1, t, o))));
  CHECK(diff == 0.0);
  PaddingMask wrong = xt::zeros<std::uint8_t>({2, 4});
  tm->set_padding(&wrong);
  CHECK_THROWS_AS(m->forward(ids), ShapeError);
  tm->set_padding(nullptr);
  CHECK_NOTHROW(m->forward(ids));
}

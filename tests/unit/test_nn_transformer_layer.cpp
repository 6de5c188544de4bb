// Transformer encoder/decoder layers (lib/include/seqlab/nn/transformer_layer.hpp): state_dict
// keys, PyTorch parity (tests/golden/transformer_*.json from gen_transformer_layer.py),
// finite-difference gradients for every norm and placement, decoder with and without memory,
// causality, train/eval forwarding, config errors.
//
// The finite-difference checks use activation = gelu: a central difference that moves a ReLU
// pre-activation across 0 is meaningless (relu's backward is covered by the fixtures).
#include <catch2/catch.hpp>
#include "checks.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/transformer_layer.hpp"

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
using seqlab::test::require_close;

Tensor3 randn3(std::size_t a, std::size_t b, std::size_t c, Rng& rng) {
  Tensor3 t({a, b, c});
  rng.fill_normal(t, 0.0f, 1.0f);
  return t;
}

TransformerLayerConfig small_config(const std::string& norm, const std::string& placement,
                                    const std::string& activation = "gelu") {
  TransformerLayerConfig c;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 12;
  c.activation = activation;
  c.norm = norm;
  c.norm_placement = placement;
  return c;
}

// Biases and norm gains away from PyTorch's 0 / 1 so every gradient path is exercised.
void randomise(Module& m, Rng& rng) {
  for (auto& np : m.named_parameters()) {
    const std::string& k = np.key;
    const bool is_norm = k.rfind("norm", 0) == 0;
    if (is_norm && k.size() >= 6 && k.compare(k.size() - 6, 6, "weight") == 0)
      rng.fill_uniform(np.param->value, 0.5f, 1.5f);
    else if (k.size() >= 4 && k.compare(k.size() - 4, 4, "bias") == 0)
      rng.fill_uniform(np.param->value, -0.5f, 0.5f);
  }
}

std::vector<std::string> keys_of(Module& m) {
  std::vector<std::string> out;
  for (const auto& np : m.named_parameters()) out.push_back(np.key);
  return out;
}

void load_parameters(Module& m, const Fixture& fx) {
  for (auto& np : m.named_parameters()) {
    INFO("loading " << np.key);
    const xt::xarray<float> v = fx.tensor(np.key);
    REQUIRE(v.shape() == np.param->value.shape());
    np.param->value = v;
  }
}

void check_parameter_grads(Module& m, const Fixture& fx) {
  for (auto& np : m.named_parameters())
    require_close("grad " + np.key, np.param->grad, fx.tensor_f64("grad_" + np.key), kBwdRtol, kBwdAtol);
}

PaddingMask mask_from_fixture(const Fixture& fx) {
  const xt::xarray<float> m = fx.tensor("key_padding_mask");
  PaddingMask p = xt::zeros<std::uint8_t>({m.shape()[0], m.shape()[1]});
  for (std::size_t i = 0; i < m.size(); ++i) p.data()[i] = m.data()[i] != 0.0f ? 1 : 0;
  return p;
}

// Finite differences of L = Σ w ⊙ y against backward for x, memory (if any) and every parameter.
void run_gradcheck(Module& layer, const std::function<Tensor3()>& fwd,
                   const std::function<Tensor3(const Tensor3&)>& bwd, Tensor3& x, Tensor3* memory,
                   const std::function<const Tensor3&()>& memory_grad) {
  Tensor3 gx = xt::zeros<float>(x.shape());
  Tensor3 gm = memory ? Tensor3(xt::zeros<float>(memory->shape())) : Tensor3();
  auto forward = [&] { return flat(fwd()); };
  auto backward = [&](const std::vector<float>& w) {
    layer.zero_grad();
    const Tensor3 y = fwd();
    Tensor3 dy(y.shape());
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 dx = bwd(dy);
    std::copy(dx.begin(), dx.end(), gx.begin());
    if (memory) std::copy(memory_grad().begin(), memory_grad().end(), gm.begin());
  };
  std::vector<Probe> probes{{"x", x.data(), gx.data(), x.size()}};
  if (memory) probes.push_back({"memory", memory->data(), gm.data(), memory->size()});
  for (auto& np : layer.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  const auto res = check_gradients(forward, backward, probes);
  INFO("checked " << res.checked << ", max abs err " << res.max_abs_err << ", worst " << res.worst << "\n"
                  << res.report);
  CHECK(res.checked == x.size() + (memory ? memory->size() : 0) + layer.num_parameters());
  REQUIRE(res.ok);
}

}  // namespace

TEST_CASE("TransformerEncoderLayer keys and shapes match torch state_dict", "[nn][transformer]") {
  Rng rng(3);
  TransformerEncoderLayer enc(small_config("layer_norm", "post", "relu"), rng);
  const std::vector<std::string> expected = {
      "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
      "self_attn.out_proj.bias",  "linear1.weight",         "linear1.bias",
      "linear2.weight",           "linear2.bias",           "norm1.weight",
      "norm1.bias",               "norm2.weight",           "norm2.bias"};
  CHECK(keys_of(enc) == expected);
  const std::size_t D = 8, F = 12;
  CHECK(enc.num_parameters() == 3 * D * D + 3 * D + D * D + D + F * D + F + D * F + D + 4 * D);

  Rng rng2(3);
  TransformerEncoderLayer rms(small_config("rms_norm", "pre"), rng2);
  const auto k = keys_of(rms);
  REQUIRE(k.size() == 10);
  CHECK(k[8] == "norm1.weight");
  CHECK(k[9] == "norm2.weight");
  // Same seed: same draws regardless of norm/placement.
  CHECK(bool(rms.self_attn.in_proj_weight.value == enc.self_attn.in_proj_weight.value));
  CHECK(bool(rms.ff.linear2.weight.value == enc.ff.linear2.weight.value));
  CHECK(rms.norm1->name() == "rms_norm");
}

TEST_CASE("TransformerDecoderLayer keys with and without cross attention", "[nn][transformer]") {
  Rng rng(4);
  TransformerDecoderLayer dec(small_config("layer_norm", "post"), rng);
  const std::vector<std::string> expected = {
      "self_attn.in_proj_weight",      "self_attn.in_proj_bias",       "self_attn.out_proj.weight",
      "self_attn.out_proj.bias",       "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
      "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", "linear1.weight",
      "linear1.bias",                  "linear2.weight",               "linear2.bias",
      "norm1.weight",                  "norm1.bias",                   "norm2.weight",
      "norm2.bias",                    "norm3.weight",                 "norm3.bias"};
  CHECK(keys_of(dec) == expected);
  CHECK(dec.cross_attention());

  Rng rng2(4);
  TransformerDecoderLayer gpt(small_config("layer_norm", "post"), rng2, /*cross_attention=*/false);
  const std::vector<std::string> gpt_expected = {
      "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
      "self_attn.out_proj.bias",  "linear1.weight",         "linear1.bias",
      "linear2.weight",           "linear2.bias",           "norm1.weight",
      "norm1.bias",               "norm2.weight",           "norm2.bias"};
  CHECK(keys_of(gpt) == gpt_expected);
  CHECK(gpt.multihead_attn == nullptr);
  CHECK(gpt.norm3 == nullptr);
  REQUIRE_THROWS_AS(gpt.memory_grad(), std::logic_error);
}

TEST_CASE("Transformer layers match torch fixtures", "[nn][transformer][golden]") {
  for (const std::string name : {"transformer_encoder_post", "transformer_encoder_pre",
                                 "transformer_decoder_post", "transformer_decoder_pre"}) {
    DYNAMIC_SECTION("fixture " << name) {
      const Fixture fx(name + ".json");
      const auto& meta = fx.meta();
      TransformerLayerConfig cfg;
      cfg.d_model = meta.at("d_model");
      cfg.n_heads = meta.at("n_heads");
      cfg.d_ff = meta.at("d_ff");
      cfg.activation = meta.at("activation").get<std::string>();
      cfg.norm_placement = meta.at("norm_first").get<int>() == 1 ? "pre" : "post";
      const bool decoder = meta.at("kind").get<std::string>() == "decoder";
      const Tensor3 x = fx.tensor("x");
      const Tensor3 dy = fx.tensor("dy");
      const PaddingMask pad = mask_from_fixture(fx);
      Rng rng(1);
      if (!decoder) {
        TransformerEncoderLayer layer(cfg, rng);
        load_parameters(layer, fx);
        REQUIRE(layer.named_parameters().size() == 12);
        const Tensor3 y = layer.forward(x, AttentionMask{true, &pad});
        require_close("y", y, fx.tensor_f64("y"), kFwdRtol, kFwdAtol);
        const Tensor3 dx = layer.backward(dy);
        require_close("grad_x", dx, fx.tensor_f64("grad_x"), kBwdRtol, kBwdAtol);
        check_parameter_grads(layer, fx);
      } else {
        TransformerDecoderLayer layer(cfg, rng);
        load_parameters(layer, fx);
        REQUIRE(layer.named_parameters().size() == 18);
        const Tensor3 memory = fx.tensor("memory");
        const Tensor3 y = layer.forward(x, &memory, AttentionMask{true, nullptr}, AttentionMask{false, &pad});
        require_close("y", y, fx.tensor_f64("y"), kFwdRtol, kFwdAtol);
        const Tensor3 dx = layer.backward(dy);
        require_close("grad_x", dx, fx.tensor_f64("grad_x"), kBwdRtol, kBwdAtol);
        require_close("grad_memory", layer.memory_grad(), fx.tensor_f64("grad_memory"), kBwdRtol, kBwdAtol);
        check_parameter_grads(layer, fx);
      }
    }
  }
}

TEST_CASE("TransformerEncoderLayer finite differences for every norm and placement", "[nn][transformer][gradcheck]") {
  const std::size_t B = 2, T = 4, D = 8;
  for (const std::string norm : {"layer_norm", "rms_norm", "batch_norm", "masked_batch_norm"}) {
    for (const std::string placement : {"pre", "post"}) {
      DYNAMIC_SECTION(norm << " " << placement) {
        Rng rng(17);
        TransformerEncoderLayer layer(small_config(norm, placement), rng);
        randomise(layer, rng);
        Tensor3 x = randn3(B, T, D, rng);
        PaddingMask pad = xt::zeros<std::uint8_t>({B, T});
        pad(1, T - 1) = 1;  // sequence 1 has length T - 1
        const AttentionMask mask{true, &pad};
        run_gradcheck(
            layer, [&] { return layer.forward(x, mask, &pad); },
            [&](const Tensor3& dy) { return layer.backward(dy); }, x, nullptr, nullptr);
      }
    }
  }
}

TEST_CASE("TransformerDecoderLayer finite differences with and without memory", "[nn][transformer][gradcheck]") {
  const std::size_t B = 2, T = 4, S = 5, D = 8;
  for (const std::string placement : {"pre", "post"}) {
    for (const bool cross : {true, false}) {
      DYNAMIC_SECTION(placement << (cross ? " with memory" : " without memory")) {
        Rng rng(23);
        TransformerDecoderLayer layer(small_config("layer_norm", placement), rng, cross);
        randomise(layer, rng);
        Tensor3 x = randn3(B, T, D, rng);
        Tensor3 memory = randn3(B, S, D, rng);
        PaddingMask mpad = xt::zeros<std::uint8_t>({B, S});
        mpad(0, S - 1) = 1;
        mpad(0, S - 2) = 1;
        const AttentionMask self_mask{true, nullptr}, mem_mask{false, &mpad};
        run_gradcheck(
            layer, [&] { return layer.forward(x, cross ? &memory : nullptr, self_mask, mem_mask); },
            [&](const Tensor3& dy) { return layer.backward(dy); }, x, cross ? &memory : nullptr,
            [&]() -> const Tensor3& { return layer.memory_grad(); });
      }
    }
  }
}

TEST_CASE("Transformer layers finite differences with dropout masks frozen and shared_qk", "[nn][transformer][gradcheck]") {
  // Dropout p = 0.3 on every branch with frozen masks: checks that backward applies each mask on
  // the branch where forward drew it.
  const std::size_t B = 2, T = 4, S = 3, D = 8;
  for (const std::string placement : {"pre", "post"}) {
    DYNAMIC_SECTION("encoder shared_qk " << placement) {
      TransformerLayerConfig cfg = small_config("layer_norm", placement);
      cfg.dropout = 0.3f;
      cfg.shared_qk = true;
      cfg.seed = 7;
      Rng rng(41);
      TransformerEncoderLayer layer(cfg, rng);
      REQUIRE(layer.self_attn.in_proj_weight.value.shape()[0] == 2 * D);
      randomise(layer, rng);
      layer.dropout1.freeze_mask(true);
      layer.dropout2.freeze_mask(true);
      layer.ff.freeze_dropout_mask(true);
      Tensor3 x = randn3(B, T, D, rng);
      const AttentionMask mask{true, nullptr};
      layer.forward(x, mask);  // draws the masks
      REQUIRE_FALSE(layer.dropout1.last_was_identity());
      run_gradcheck(
          layer, [&] { return layer.forward(x, mask); },
          [&](const Tensor3& dy) { return layer.backward(dy); }, x, nullptr, nullptr);
    }
    DYNAMIC_SECTION("decoder " << placement) {
      TransformerLayerConfig cfg = small_config("rms_norm", placement);
      cfg.dropout = 0.3f;
      cfg.seed = 8;
      Rng rng(43);
      TransformerDecoderLayer layer(cfg, rng);
      randomise(layer, rng);
      layer.dropout1.freeze_mask(true);
      layer.dropout2.freeze_mask(true);
      layer.dropout3.freeze_mask(true);
      layer.ff.freeze_dropout_mask(true);
      Tensor3 x = randn3(B, T, D, rng), memory = randn3(B, S, D, rng);
      const AttentionMask self_mask{true, nullptr};
      layer.forward(x, &memory, self_mask);
      REQUIRE_FALSE(layer.dropout2.last_was_identity());
      run_gradcheck(
          layer, [&] { return layer.forward(x, &memory, self_mask); },
          [&](const Tensor3& dy) { return layer.backward(dy); }, x, &memory,
          [&]() -> const Tensor3& { return layer.memory_grad(); });
    }
  }
}

TEST_CASE("TransformerDecoderLayer outputs before t ignore inputs after t", "[nn][transformer]") {
  const std::size_t B = 2, T = 6, S = 3, D = 8;
  for (const std::string placement : {"pre", "post"}) {
    DYNAMIC_SECTION(placement) {
      Rng rng(31);
      TransformerDecoderLayer layer(small_config("layer_norm", placement), rng);
      randomise(layer, rng);
      const Tensor3 x = randn3(B, T, D, rng), memory = randn3(B, S, D, rng);
      const AttentionMask causal{true, nullptr};
      const Tensor3 y = layer.forward(x, &memory, causal, {});
      for (std::size_t t = 0; t + 1 < T; ++t) {
        Tensor3 x2 = x;
        for (std::size_t b = 0; b < B; ++b)
          for (std::size_t s = t + 1; s < T; ++s)
            for (std::size_t d = 0; d < D; ++d) x2(b, s, d) += 3.0f;
        const Tensor3 y2 = layer.forward(x2, &memory, causal, {});
        double before = 0, after = 0;
        for (std::size_t b = 0; b < B; ++b)
          for (std::size_t s = 0; s < T; ++s)
            for (std::size_t d = 0; d < D; ++d) {
              const double diff = std::abs(double(y2(b, s, d)) - double(y(b, s, d)));
              (s <= t ? before : after) = std::max(s <= t ? before : after, diff);
            }
        INFO("t = " << t << ": max change at positions <= t " << before << ", after t " << after);
        CHECK(before <= 1e-6);
        CHECK(after > 1e-2);  // the perturbation does reach the later positions
      }
    }
  }
}

TEST_CASE("TransformerDecoderLayer without memory equals TransformerEncoderLayer with a causal mask", "[nn][transformer]") {
  // Same seed, same construction order (self_attn, linear1, linear2): same parameters.
  for (const std::string placement : {"pre", "post"}) {
    DYNAMIC_SECTION(placement) {
      Rng r1(5), r2(5);
      TransformerEncoderLayer enc(small_config("rms_norm", placement), r1);
      TransformerDecoderLayer dec(small_config("rms_norm", placement), r2, false);
      const auto ke = enc.named_parameters(), kd = dec.named_parameters();
      REQUIRE(ke.size() == kd.size());
      for (std::size_t i = 0; i < ke.size(); ++i) {
        REQUIRE(ke[i].key == kd[i].key);
        REQUIRE(bool(ke[i].param->value == kd[i].param->value));
      }
      Rng rng(6);
      const Tensor3 x = randn3(2, 5, 8, rng), dy = randn3(2, 5, 8, rng);
      const Tensor3 ye = enc.forward(x, AttentionMask{true, nullptr});
      const Tensor3 yd = dec.forward(x, nullptr, AttentionMask{true, nullptr});
      CHECK(bool(ye == yd));
      const Tensor3 dxe = enc.backward(dy), dxd = dec.backward(dy);
      CHECK(bool(dxe == dxd));
    }
  }
}

TEST_CASE("Transformer layers forward train and eval to dropouts and norms", "[nn][transformer]") {
  Rng rng(8);
  TransformerLayerConfig cfg = small_config("batch_norm", "post");
  cfg.dropout = 0.3f;
  cfg.seed = 99;
  TransformerEncoderLayer layer(cfg, rng);
  const Tensor3 x = randn3(2, 4, 8, rng);
  auto* bn1 = dynamic_cast<BatchNorm*>(layer.norm1.get());
  REQUIRE(bn1 != nullptr);

  layer.eval();
  CHECK_FALSE(layer.dropout1.training());
  CHECK_FALSE(layer.ff.dropout.training());
  CHECK_FALSE(layer.norm2->training());
  const Tensor3 e1 = layer.forward(x, {});
  const Tensor3 e2 = layer.forward(x, {});
  CHECK(bool(e1 == e2));  // eval: deterministic, no dropout
  CHECK(bn1->num_batches_tracked == 0);  // eval: running statistics untouched
  CHECK(layer.dropout1.last_was_identity());

  layer.train();
  CHECK(layer.dropout2.training());
  const Tensor3 t1 = layer.forward(x, {});
  CHECK(bn1->num_batches_tracked == 1);
  CHECK_FALSE(layer.dropout1.last_was_identity());
  CHECK_FALSE(layer.ff.dropout.last_was_identity());
  CHECK_FALSE(bool(t1 == e1));

  // Same seed and config: the same dropout streams, so the same train-mode output.
  Rng rng_b(8);
  TransformerEncoderLayer again(cfg, rng_b);
  again.train();
  CHECK(bool(again.forward(x, {}) == t1));
}

TEST_CASE("TransformerLayerConfig errors name the key", "[nn][transformer][errors]") {
  auto expect_error = [](TransformerLayerConfig c, const std::string& key) {
    INFO("expected an error naming " << key);
    try {
      c.validate();
      FAIL("validate() did not throw");
    } catch (const std::invalid_argument& e) {
      INFO("message: " << e.what());
      CHECK(std::string(e.what()).find(key) != std::string::npos);
    }
    Rng rng(1);
    CHECK_THROWS_AS(TransformerEncoderLayer(c, rng), std::invalid_argument);
    CHECK_THROWS_AS(TransformerDecoderLayer(c, rng), std::invalid_argument);
  };
  auto base = [] { return small_config("layer_norm", "post"); };
  REQUIRE_NOTHROW(base().validate());
  {
    auto c = base();
    c.d_model = 10;
    c.n_heads = 4;
    expect_error(c, "n_heads = 4");
  }
  {
    auto c = base();
    c.norm = "group_norm";
    expect_error(c, "norm = 'group_norm'");
  }
  {
    auto c = base();
    c.norm_placement = "middle";
    expect_error(c, "norm_placement = 'middle'");
  }
  {
    auto c = base();
    c.activation = "swish";
    expect_error(c, "activation = 'swish'");
  }
  {
    auto c = base();
    c.dropout = 1.0f;
    expect_error(c, "dropout");
  }
  {
    auto c = base();
    c.d_ff = 0;
    expect_error(c, "d_ff");
  }

  // Memory given to a decoder-only block, or missing for a cross-attention one; backward first.
  Rng rng(2);
  TransformerDecoderLayer gpt(base(), rng, false), dec(base(), rng, true);
  const Tensor3 x = xt::zeros<float>({1, 3, 8});
  CHECK_THROWS_AS(gpt.forward(x, &x, {}), std::invalid_argument);
  CHECK_THROWS_AS(dec.forward(x, nullptr, {}), std::invalid_argument);
  CHECK_THROWS_AS(dec.backward(x), std::logic_error);
  TransformerEncoderLayer enc(base(), rng);
  CHECK_THROWS_AS(enc.backward(x), std::logic_error);
  const Tensor3 wrong = xt::zeros<float>({1, 3, 6});
  CHECK_THROWS_AS(enc.forward(wrong, {}), ShapeError);
}

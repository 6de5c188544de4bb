// Tests of seqlab::MultiheadAttention (lib/include/seqlab/nn/attention.hpp): parameter layout and
// init, PyTorch parity (tests/golden/gen_attention.py) and finite differences for every mask, cross
// attention, shared_qk, RoPE and ALiBi hooks (each with the materialised and the fused kernel; the
// two kernels against each other: test_nn_attention_fused.cpp), field cases (fully masked rows,
// all-padding sequences, saturated softmax), causality, logit symmetry, and errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/positional.hpp"
#include "random_inputs.hpp"

using namespace seqlab;
using seqlab::test::randn3;
using seqlab::test::randomise_biases;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

bool all_finite(const xt::xarray<float>& a) {
  for (float v : a)
    if (!std::isfinite(v)) return false;
  return true;
}

std::string close(const xt::xarray<float>& actual, const xt::xarray<float>& expected, double rtol, double atol) {
  return test::compare_close(actual, xt::cast<double>(expected), rtol, atol);
}

struct GradCase {
  std::string name;
  bool self = true;
  bool causal = false;
  bool padding = false;   // key padding with a fully masked query row when causal
  bool shared_qk = false;
  bool bias = true;
  bool rope = false;
  bool alibi = false;
  bool rel_bias = false;  // T5 relative bias (8 buckets, max_distance 5: several distances per bucket)
  std::size_t q_offset = 0, k_offset = 0;
};

/// Finite differences of sum(w ⊙ y) against backward, for inputs and every parameter, with the
/// given kernel.
void run_gradcheck(const GradCase& c, AttentionKernel kernel) {
  INFO("case " << c.name << ", kernel " << to_string(kernel));
  Rng rng(101);
  const std::size_t B = 2, D = 8, h = 2, Tq = 4, Tk = c.self ? 4 : 5;
  MultiheadAttention mha(D, h, rng, c.shared_qk, c.bias);
  mha.set_kernel(kernel);
  randomise_biases(mha, rng);
  RotaryEmbedding rope(RopeConfig{D / h});
  if (c.rope) mha.set_rope(&rope);
  mha.set_alibi(c.alibi);
  Rng rel_rng(202);  // its own stream: the other cases draw the same inputs as without it
  RelativePositionBias rel(h, 8, 5, rel_rng, 0.7f);
  if (c.rel_bias) mha.set_relative_bias(&rel);
  mha.set_position_offsets(c.q_offset, c.k_offset);

  Tensor3 xq = randn3(B, Tq, D, rng), xkv = randn3(B, Tk, D, rng);
  PaddingMask pad = xt::zeros<std::uint8_t>({B, Tk});
  if (c.padding) {
    pad(0, Tk - 1) = 1;  // a padded suffix
    pad(1, 0) = 1;       // first key padded: with the causal mask, query 0 of sequence 1 sees nothing
    pad(1, 2) = 1;
  }
  const AttentionMask mask{c.causal, c.padding ? &pad : nullptr};
  Tensor3 gq = xt::zeros<float>({B, Tq, D}), gkv = xt::zeros<float>({B, Tk, D});

  auto run = [&]() { return c.self ? mha.forward(xq, mask) : mha.forward(xq, xkv, mask); };
  auto forward = [&]() {
    const Tensor3 y = run();
    return std::vector<float>(y.begin(), y.end());
  };
  std::function<void(const std::vector<float>&)> backward = [&](const std::vector<float>& w) {
    mha.zero_grad();
    run();
    Tensor3 dy({B, Tq, D});
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 dx = mha.backward(dy);
    std::copy(dx.begin(), dx.end(), gq.begin());  // in place: the probes point at these buffers
    if (!c.self) std::copy(mha.key_value_grad().begin(), mha.key_value_grad().end(), gkv.begin());
  };
  std::vector<test::Probe> probes = {{c.self ? "x" : "query", xq.data(), gq.data(), xq.size()}};
  if (!c.self) probes.push_back({"key_value", xkv.data(), gkv.data(), xkv.size()});
  for (const auto& np : mha.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  if (c.rel_bias) {  // the table is the hook's parameter, not the attention's
    probes.push_back({"relative_attention_bias.weight", rel.weight.value.data(), rel.weight.grad.data(),
                      rel.weight.size()});
    const auto inner = backward;
    backward = [&, inner](const std::vector<float>& w) {
      rel.weight.zero_grad();
      inner(w);
    };
  }

  const auto res = test::check_gradients(forward, backward, probes);
  INFO("checked " << res.checked << ", max abs err " << res.max_abs_err << ", worst " << res.worst << "\n"
                  << res.report);
  CHECK(res.checked == xq.size() + (c.self ? 0 : xkv.size()) + mha.num_parameters() +
                           (c.rel_bias ? rel.weight.size() : 0));
  REQUIRE(res.ok);
  const Tensor3 y = run();
  REQUIRE(all_finite(y));
  // A relative bias always runs the materialised kernel (the fused one has no relative bias).
  CHECK(mha.last_forward_fused() == (kernel == AttentionKernel::fused && !c.rel_bias));
}

/// run_gradcheck with both kernels (the fused one: tests/unit/test_nn_attention_fused.cpp).
void run_gradcheck(const GradCase& c) {
  for (const AttentionKernel kernel : {AttentionKernel::materialised, AttentionKernel::fused}) run_gradcheck(c, kernel);
}

}  // namespace

TEST_CASE("MultiheadAttention parameter names shapes and default init match PyTorch", "[nn][attention]") {
  Rng rng(11);
  const std::size_t D = 12, h = 3;
  MultiheadAttention mha(D, h, rng);
  CHECK(mha.d_model() == D);
  CHECK(mha.n_heads() == h);
  CHECK(mha.head_dim() == 4);

  // torch.nn.MultiheadAttention(12, 3).state_dict(): key -> shape
  const std::vector<std::pair<std::string, std::vector<std::size_t>>> expected = {
      {"attn.in_proj_weight", {36, 12}},
      {"attn.in_proj_bias", {36}},
      {"attn.out_proj.weight", {12, 12}},
      {"attn.out_proj.bias", {12}}};
  const auto named = mha.named_parameters("attn.");
  REQUIRE(named.size() == expected.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    INFO("parameter " << i << ": " << named[i].key);
    CHECK(named[i].key == expected[i].first);
    const std::vector<std::size_t> shape(named[i].param->value.shape().begin(), named[i].param->value.shape().end());
    CHECK(shape == expected[i].second);
    CHECK(named[i].param->grad.shape() == named[i].param->value.shape());
  }
  CHECK(mha.num_parameters() == 3 * D * D + 3 * D + D * D + D);

  // xavier_uniform over [3D, D]: bound sqrt(6 / 4D); out_proj.weight U(-1/sqrt(D), 1/sqrt(D)); biases 0.
  auto range_of = [](const xt::xarray<float>& a) {
    float lo = 1e9f, hi = -1e9f;
    for (float v : a) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    return std::make_pair(lo, hi);
  };
  const float xavier = std::sqrt(6.0f / (4.0f * D)), lin = 1.0f / std::sqrt(static_cast<float>(D));
  const auto [wlo, whi] = range_of(mha.in_proj_weight.value);
  CHECK(wlo >= -xavier);
  CHECK(whi <= xavier);
  CHECK(whi - wlo > 1.8f * xavier);  // 432 draws span nearly the whole range
  const auto [olo, ohi] = range_of(mha.out_proj.weight.value);
  CHECK(olo >= -lin);
  CHECK(ohi <= lin);
  CHECK(ohi - olo > 1.5f * lin);
  CHECK(whi > lin);  // the two bounds differ (0.354 vs 0.289): in_proj is not drawn as a Linear
  for (float v : mha.in_proj_bias.value) REQUIRE(v == 0.0f);
  for (float v : mha.out_proj.bias.value) REQUIRE(v == 0.0f);

  // Same seed, same parameters.
  Rng rng2(11);
  MultiheadAttention again(D, h, rng2);
  CHECK(bool(again.in_proj_weight.value == mha.in_proj_weight.value));
  CHECK(bool(again.out_proj.weight.value == mha.out_proj.weight.value));

  // shared_qk: one projection for q and k -> [2D, D]; bias = false: no biases listed.
  MultiheadAttention shared(D, h, rng, /*shared_qk=*/true, /*bias=*/false);
  const auto sn = shared.named_parameters();
  REQUIRE(sn.size() == 2);
  CHECK(sn[0].key == "in_proj_weight");
  CHECK(sn[0].param->value.shape()[0] == 2 * D);
  CHECK(sn[1].key == "out_proj.weight");
  CHECK(shared.num_parameters() == 2 * D * D + D * D);
  const auto [slo, shi] = range_of(shared.in_proj_weight.value);
  CHECK(slo >= -xavier);  // same bound as the unshared model
  CHECK(shi <= xavier);
}

TEST_CASE("MultiheadAttention matches torch.nn.MultiheadAttention fixtures", "[nn][attention][golden]") {
  // Float32 against float64 references. Forward: rtol 1e-5, atol 1e-6. Backward: rtol 1e-4, atol 1e-5.
  const double fwd_rtol = 1e-5, fwd_atol = 1e-6, bwd_rtol = 1e-4, bwd_atol = 1e-5;
  for (const std::string name : {"attention_self_causal", "attention_self_padding", "attention_self_causal_padding",
                                 "attention_cross", "attention_cross_causal_nobias"})
  for (const AttentionKernel kernel : {AttentionKernel::materialised, AttentionKernel::fused}) {
    DYNAMIC_SECTION("fixture " << name << ", kernel " << to_string(kernel)) {
      const test::Fixture fx(name + ".json");
      const auto& meta = fx.meta();
      const std::size_t D = meta.at("d_model"), h = meta.at("n_heads");
      const bool self = meta.at("self").get<int>() == 1, bias = meta.at("bias").get<int>() == 1;
      Rng rng(1);
      MultiheadAttention mha(D, h, rng, false, bias);
      mha.set_kernel(kernel);
      std::size_t loaded = 0;
      for (const auto& np : mha.named_parameters()) {
        INFO("loading " << np.key);
        const xt::xarray<float> v = fx.tensor(np.key);
        REQUIRE(v.shape() == np.param->value.shape());
        np.param->value = v;
        ++loaded;
      }
      REQUIRE(loaded == (bias ? 4u : 2u));

      PaddingMask pad;
      AttentionMask mask;
      mask.causal = meta.at("causal").get<int>() == 1;
      if (meta.at("padding").get<int>() == 1) {
        pad = xt::cast<std::uint8_t>(fx.tensor("key_padding_mask"));
        mask.key_padding = &pad;
      }
      Tensor3 y;
      if (self) {
        const Tensor3 x = fx.tensor("x");
        y = mha.forward(x, mask);
      } else {
        const Tensor3 q = fx.tensor("query"), kv = fx.tensor("key_value");
        y = mha.forward(q, kv, mask);
      }
      for (const auto& [key, actual] : std::vector<std::pair<std::string, xt::xarray<float>>>{
               {"y", y}, {"attn_weights", mha.attention_probs()}}) {
        const std::string msg = test::compare_close(actual, fx.tensor_f64(key), fwd_rtol, fwd_atol);
        INFO(name << " forward " << key << ": " << msg);
        CHECK(msg.empty());
      }

      const Tensor3 dy = fx.tensor("dy");
      const Tensor3 dx = mha.backward(dy);
      std::vector<std::pair<std::string, xt::xarray<float>>> grads;
      if (self) {
        grads.push_back({"grad_x", dx});
      } else {
        grads.push_back({"grad_query", dx});
        grads.push_back({"grad_key_value", mha.key_value_grad()});
      }
      for (const auto& np : mha.named_parameters()) grads.push_back({"grad_" + np.key, np.param->grad});
      for (const auto& [key, actual] : grads) {
        const std::string msg = test::compare_close(actual, fx.tensor_f64(key), bwd_rtol, bwd_atol);
        INFO(name << " backward " << key << ": " << msg);
        CHECK(msg.empty());
      }
    }
  }
}

TEST_CASE("MultiheadAttention gradients match finite differences for every mask", "[nn][attention][gradcheck]") {
  run_gradcheck({"self no mask"});
  run_gradcheck({"self causal", true, true});
  run_gradcheck({"self padding", true, false, true});
  run_gradcheck({"self causal and padding with a fully masked row", true, true, true});
  run_gradcheck({"self no bias", true, true, false, false, false});
}

TEST_CASE("MultiheadAttention cross-attention gradients match finite differences", "[nn][attention][gradcheck]") {
  run_gradcheck({"cross no mask", false});
  run_gradcheck({"cross causal and padding", false, true, true});
  run_gradcheck({"cross shared_qk", false, false, true, true});
}

TEST_CASE("MultiheadAttention shared_qk gradients match finite differences", "[nn][attention][gradcheck]") {
  run_gradcheck({"self shared_qk", true, false, false, true});
  run_gradcheck({"self shared_qk causal padding", true, true, true, true});
}

TEST_CASE("MultiheadAttention RoPE and ALiBi hooks have correct gradients", "[nn][attention][gradcheck]") {
  GradCase rope{"self rope causal"};
  rope.causal = true;
  rope.rope = true;
  run_gradcheck(rope);
  rope.name = "cross rope with offsets";
  rope.self = false;
  rope.causal = false;
  rope.q_offset = 3;
  rope.k_offset = 1;
  run_gradcheck(rope);

  GradCase alibi{"self alibi causal"};
  alibi.causal = true;
  alibi.alibi = true;
  run_gradcheck(alibi);
  alibi.name = "self alibi bidirectional with padding";
  alibi.causal = false;
  alibi.padding = true;
  run_gradcheck(alibi);

  GradCase both{"self rope and alibi shared_qk causal padding", true, true, true, true};
  both.rope = true;
  both.alibi = true;
  run_gradcheck(both);
}

TEST_CASE("MultiheadAttention T5 relative-bias hook has correct gradients", "[nn][attention][gradcheck][t5]") {
  GradCase t5{"self t5 bias causal"};
  t5.causal = true;
  t5.rel_bias = true;
  run_gradcheck(t5);
  t5.name = "self t5 bias bidirectional with padding";
  t5.causal = false;
  t5.padding = true;
  run_gradcheck(t5);
  t5.name = "cross t5 bias with offsets";
  t5.self = false;
  t5.padding = false;
  t5.q_offset = 4;
  t5.k_offset = 1;
  run_gradcheck(t5);
  GradCase all{"self rope alibi and t5 bias causal padding", true, true, true};
  all.rope = true;
  all.alibi = true;
  all.rel_bias = true;
  run_gradcheck(all);
}

TEST_CASE("MultiheadAttention T5 bias adds its bucket's weight to the logits", "[nn][attention][t5]") {
  // Reference without PyTorch: log P_bias(i, j) − log P_plain(i, j) = w[bucket(j − i), head] + c_i.
  Rng rng(8);
  const std::size_t B = 2, T = 7, D = 8, h = 2, nb = 8, md = 5;
  MultiheadAttention mha(D, h, rng);
  RelativePositionBias bias(h, nb, md, rng, 1.0f);
  const Tensor3 x = randn3(B, T, D, rng);
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    const AttentionMask mask{causal, nullptr};
    mha.set_relative_bias(nullptr);
    mha.forward(x, mask);
    const Tensor4 plain = mha.attention_probs();
    mha.set_relative_bias(&bias);
    CHECK(mha.relative_bias() == &bias);
    mha.forward(x, mask);
    const Tensor4 with = mha.attention_probs();
    double worst = 0.0;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t k = 0; k < h; ++k)
        for (std::size_t i = 0; i < T; ++i) {
          const std::size_t n = causal ? i + 1 : T;
          const auto w = [&](std::size_t j) {
            return double(bias.weight.value(
                t5_relative_bucket(static_cast<long long>(j) - static_cast<long long>(i), !causal, nb, md), k));
          };
          const double c0 = std::log(with(b, k, i, 0)) - std::log(plain(b, k, i, 0)) - w(0);
          for (std::size_t j = 0; j < n; ++j) {
            const double cj = std::log(with(b, k, i, j)) - std::log(plain(b, k, i, j)) - w(j);
            worst = std::max(worst, std::abs(cj - c0));
          }
          for (std::size_t j = n; j < T; ++j) REQUIRE(with(b, k, i, j) == 0.0f);
        }
    CHECK(worst < 1e-4);
  }
  // Two layers sharing one table (as T5): their gradients add.
  Rng r2(8);
  MultiheadAttention a1(D, h, r2), a2(D, h, r2);
  a1.set_relative_bias(&bias);
  a2.set_relative_bias(&bias);
  const Tensor3 dy = randn3(B, T, D, r2);
  bias.weight.zero_grad();
  a1.forward(x);
  a1.backward(dy);
  const Array g1 = bias.weight.grad;
  bias.weight.zero_grad();
  a2.forward(x);
  a2.backward(dy);
  const Array g2 = bias.weight.grad;
  bias.weight.zero_grad();
  a1.forward(x);
  a2.forward(x);
  a1.backward(dy);
  a2.backward(dy);
  double err = 0.0;
  for (std::size_t e = 0; e < g1.size(); ++e)
    err = std::max(err, double(std::abs(bias.weight.grad.data()[e] - g1.data()[e] - g2.data()[e])));
  CHECK(err < 1e-6);
  RelativePositionBias wrong(4, nb, md, rng, 1.0f);
  CHECK_THROWS_AS(mha.set_relative_bias(&wrong), std::invalid_argument);
}

TEST_CASE("MultiheadAttention ALiBi adds minus slope times distance to the logits", "[nn][attention]") {
  // log P_alibi(i, j) − log P_plain(i, j) = −m_h·dist(i, j) + c_i (softmax ignores a per-row constant).
  Rng rng(7);
  const std::size_t B = 2, T = 6, D = 8, h = 4;
  MultiheadAttention mha(D, h, rng);
  const Tensor3 x = randn3(B, T, D, rng);
  const Tensor1 m = alibi_slopes(h);
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    const AttentionMask mask{causal, nullptr};
    mha.set_alibi(false);
    mha.forward(x, mask);
    const Tensor4 plain = mha.attention_probs();
    mha.set_alibi(true);
    mha.forward(x, mask);
    const Tensor4 with = mha.attention_probs();
    REQUIRE(!bool(plain == with));
    double worst = 0.0;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t k = 0; k < h; ++k)
        for (std::size_t i = 0; i < T; ++i) {
          const std::size_t n = causal ? i + 1 : T;
          // c_i from key 0, then every visible key must agree.
          const double c0 = std::log(with(b, k, i, 0)) - std::log(plain(b, k, i, 0)) + m(k) * double(i);
          for (std::size_t j = 0; j < n; ++j) {
            const double dist = std::abs(double(i) - double(j));
            const double cj = std::log(with(b, k, i, j)) - std::log(plain(b, k, i, j)) + m(k) * dist;
            worst = std::max(worst, std::abs(cj - c0));
          }
          for (std::size_t j = n; j < T; ++j) REQUIRE(with(b, k, i, j) == 0.0f);
        }
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("MultiheadAttention with RoPE and ALiBi depends only on relative positions", "[nn][attention]") {
  Rng rng(9);
  const std::size_t B = 2, T = 5, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  const Tensor3 x = randn3(B, T, D, rng);
  RotaryEmbedding rope(RopeConfig{D / h});
  const AttentionMask causal{true, nullptr};

  const Tensor3 plain = mha.forward(x, causal);
  mha.set_rope(&rope);
  mha.set_alibi(true);
  const Tensor3 at0 = mha.forward(x, causal);
  const Tensor4 p0 = mha.attention_probs();
  {
    INFO("the hooks change the output");
    CHECK(!close(at0, plain, 1e-3, 1e-3).empty());
  }
  // Shifting every position by 7 leaves all relative positions, hence the output, unchanged.
  mha.set_position_offsets(7, 7);
  const Tensor3 at7 = mha.forward(x, causal);
  {
    const std::string msg = close(at7, at0, 1e-4, 1e-5);
    INFO("offsets (7, 7) vs (0, 0): " << msg);
    CHECK(msg.empty());
    const std::string pmsg = close(mha.attention_probs(), p0, 1e-4, 1e-5);
    INFO("probabilities: " << pmsg);
    CHECK(pmsg.empty());
  }
  // A query offset ahead of the keys sees more keys under the causal mask (a key/value prefix).
  mha.set_position_offsets(2, 0);
  mha.forward(x, causal);
  const Tensor4& p2 = mha.attention_probs();
  CHECK(p2(0, 0, 0, 2) > 0.0f);
  CHECK(p2(0, 0, 0, 3) == 0.0f);

  CHECK_NOTHROW(mha.set_rope(&rope));  // same head_dim: accepted again
}

TEST_CASE("MultiheadAttention fully masked row gives zero context and finite gradients", "[nn][attention]") {
  // Field case: causal mask and a sequence whose first key is padding -> query 0 of that sequence
  // may see nothing. PyTorch returns NaN for that row; seqlab gives probabilities 0, context 0,
  // hence output = out_proj.bias, and gradients that are finite and 0 through that row.
  Rng rng(13);
  const std::size_t B = 2, T = 4, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  randomise_biases(mha, rng);
  const Tensor3 x = randn3(B, T, D, rng);
  PaddingMask pad = xt::zeros<std::uint8_t>({B, T});
  pad(1, 0) = 1;
  const AttentionMask mask{true, &pad};
  const Tensor3 y = mha.forward(x, mask);
  REQUIRE(all_finite(y));
  const Tensor4& p = mha.attention_probs();
  for (std::size_t k = 0; k < h; ++k)
    for (std::size_t j = 0; j < T; ++j) REQUIRE(p(1, k, 0, j) == 0.0f);
  for (std::size_t d = 0; d < D; ++d) CHECK_THAT(y(1, 0, d), WithinAbs(mha.out_proj.bias.value(d), 1e-6));
  // Every other row still sums to 1.
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t k = 0; k < h; ++k)
      for (std::size_t i = (b == 1 ? 1 : 0); i < T; ++i) {
        double s = 0.0;
        for (std::size_t j = 0; j < T; ++j) s += p(b, k, i, j);
        CHECK_THAT(s, WithinAbs(1.0, 1e-6));
      }

  Tensor3 dy = randn3(B, T, D, rng);
  const Tensor3 dx = mha.backward(dy);
  REQUIRE(all_finite(dx));
  for (auto* prm : mha.parameters()) REQUIRE(all_finite(prm->grad));
  // Sequence 1, position 0 is a padded key and its query sees nothing: no gradient reaches x there.
  for (std::size_t d = 0; d < D; ++d) CHECK(dx(1, 0, d) == 0.0f);
}

TEST_CASE("MultiheadAttention all-padding sequence changes no other sequence", "[nn][attention]") {
  // Field case: a batch padded with an empty sequence (every key padded) must give the other
  // sequences the same outputs and input gradients; with dy = 0 on the empty sequence (as a
  // masked loss gives) the parameter gradients are also the same.
  Rng rng(17);
  const std::size_t T = 5, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  randomise_biases(mha, rng);
  const Tensor3 x2 = randn3(2, T, D, rng), dy2 = randn3(2, T, D, rng);
  PaddingMask pad2 = xt::zeros<std::uint8_t>({std::size_t{2}, T});
  pad2(1, 4) = 1;
  Tensor3 x3 = randn3(3, T, D, rng), dy3 = xt::zeros<float>({std::size_t{3}, T, D});
  PaddingMask pad3 = xt::ones<std::uint8_t>({std::size_t{3}, T});
  // Sequences 0 and 2 of the big batch are sequences 0 and 1 of the small one; 1 is all padding.
  for (std::size_t b : {0, 1}) {
    const std::size_t b3 = b == 0 ? 0 : 2;
    xt::view(x3, b3) = xt::view(x2, b);
    xt::view(dy3, b3) = xt::view(dy2, b);
    xt::view(pad3, b3) = xt::view(pad2, b);
  }
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    mha.zero_grad();
    const Tensor3 y2 = mha.forward(x2, AttentionMask{causal, &pad2});
    const Tensor3 dx2 = mha.backward(dy2);
    std::vector<xt::xarray<float>> g2;
    for (auto* p : mha.parameters()) g2.push_back(p->grad);

    mha.zero_grad();
    const Tensor3 y3 = mha.forward(x3, AttentionMask{causal, &pad3});
    const Tensor3 dx3 = mha.backward(dy3);
    for (std::size_t b : {0, 1}) {
      const std::size_t b3 = b == 0 ? 0 : 2;
      const std::string my = close(xt::view(y3, b3), xt::view(y2, b), 1e-6, 1e-6);
      const std::string mdx = close(xt::view(dx3, b3), xt::view(dx2, b), 1e-6, 1e-6);
      INFO("sequence " << b << ": y " << my << "; dx " << mdx);
      CHECK(my.empty());
      CHECK(mdx.empty());
    }
    const auto params = mha.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::string msg = close(params[i]->grad, g2[i], 1e-5, 1e-6);
      INFO("parameter " << i << ": " << msg);
      CHECK(msg.empty());
    }
    // The empty sequence: finite, its output is out_proj.bias, and it has no input gradient.
    REQUIRE(all_finite(y3));
    REQUIRE(all_finite(dx3));
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t d = 0; d < D; ++d) {
        CHECK(y3(1, t, d) == mha.out_proj.bias.value(d));
        CHECK(dx3(1, t, d) == 0.0f);
      }
  }
}

TEST_CASE("MultiheadAttention padded keys do not influence any output", "[nn][attention]") {
  Rng rng(19);
  const std::size_t B = 2, T = 6, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  randomise_biases(mha, rng);
  Tensor3 x = randn3(B, T, D, rng);
  PaddingMask pad = xt::zeros<std::uint8_t>({B, T});
  pad(0, 1) = 1;
  pad(1, 4) = 1;
  pad(1, 5) = 1;
  const AttentionMask mask{false, &pad};
  const Tensor3 y0 = mha.forward(x, mask);
  // Change the padded positions' inputs: only those positions' own (query) outputs may change.
  for (auto [b, t] : {std::pair<std::size_t, std::size_t>{0, 1}, {1, 4}, {1, 5}})
    for (std::size_t d = 0; d < D; ++d) x(b, t, d) += 3.0f;
  const Tensor3 y1 = mha.forward(x, mask);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t) {
      if (pad(b, t)) continue;
      INFO("b " << b << " t " << t);
      for (std::size_t d = 0; d < D; ++d) REQUIRE(y1(b, t, d) == y0(b, t, d));
    }
  CHECK(y1(0, 1, 0) != y0(0, 1, 0));
}

TEST_CASE("MultiheadAttention saturated scores give one-hot probabilities", "[nn][attention]") {
  // Field case: scores [1000, 0, 0] must give [1, 0, 0], not NaN (exp(1000) overflows without the
  // row max). d_model = 1, one head: q = 1000·x, k = x, v = x, so with x = [1, 0, 0] the scores of
  // query 0 are [1000, 0, 0], and of queries 1 and 2 all 0 (uniform). With x = [1, 0.999, 0]:
  // query 0 scores [1000, 999, 0] -> [e/(1+e), 1/(1+e), 0].
  Rng rng(23);
  MultiheadAttention mha(1, 1, rng);
  mha.in_proj_weight.value = xt::xtensor<float, 2>({{1000.0f}, {1.0f}, {1.0f}});
  mha.in_proj_bias.value.fill(0.0f);
  mha.out_proj.weight.value = xt::xtensor<float, 2>({{1.0f}});
  mha.out_proj.bias.value.fill(0.0f);
  Tensor3 x = xt::xtensor<float, 3>({{{1.0f}, {0.0f}, {0.0f}}});
  const Tensor3 y = mha.forward(x);
  const Tensor4& p = mha.attention_probs();
  CHECK(p(0, 0, 0, 0) == 1.0f);
  CHECK(p(0, 0, 0, 1) == 0.0f);
  CHECK(p(0, 0, 0, 2) == 0.0f);
  for (std::size_t i : {1, 2})
    for (std::size_t j = 0; j < 3; ++j) CHECK_THAT(p(0, 0, i, j), WithinAbs(1.0 / 3.0, 1e-7));
  CHECK_THAT(y(0, 0, 0), WithinAbs(1.0, 1e-6));
  CHECK_THAT(y(0, 1, 0), WithinAbs(1.0 / 3.0, 1e-6));
  const Tensor3 dx = mha.backward(Tensor3(xt::ones<float>({std::size_t{1}, std::size_t{3}, std::size_t{1}})));
  REQUIRE(all_finite(dx));

  x(0, 1, 0) = 0.999f;
  mha.forward(x);
  const double e = std::exp(1.0);
  CHECK_THAT(mha.attention_probs()(0, 0, 0, 0), WithinAbs(e / (1 + e), 1e-4));  // 999.0 ± float rounding
  CHECK_THAT(mha.attention_probs()(0, 0, 0, 1), WithinAbs(1 / (1 + e), 1e-4));
  CHECK(mha.attention_probs()(0, 0, 0, 2) == 0.0f);
}

TEST_CASE("MultiheadAttention causal outputs ignore later inputs", "[nn][attention]") {
  Rng rng(29);
  const std::size_t B = 2, T = 7, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  randomise_biases(mha, rng);
  RotaryEmbedding rope(RopeConfig{D / h});
  for (const bool hooks : {false, true}) {
    INFO("rope and alibi " << hooks);
    mha.set_rope(hooks ? &rope : nullptr);
    mha.set_alibi(hooks);
    const AttentionMask causal{true, nullptr};
    Tensor3 x = randn3(B, T, D, rng);
    const Tensor3 y0 = mha.forward(x, causal);
    const std::size_t t0 = 3;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = t0 + 1; t < T; ++t)
        for (std::size_t d = 0; d < D; ++d) x(b, t, d) = rng.normal(0.0f, 5.0f);
    const Tensor3 y1 = mha.forward(x, causal);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < T; ++t) {
        INFO("b " << b << " t " << t);
        if (t <= t0) {
          for (std::size_t d = 0; d < D; ++d) REQUIRE(y1(b, t, d) == y0(b, t, d));
        } else {
          CHECK(y1(b, t, 0) != y0(b, t, 0));
        }
      }
    // Gradient form: dy only at t0 -> no gradient at later positions.
    Tensor3 dy = xt::zeros<float>({B, T, D});
    xt::view(dy, xt::all(), t0, xt::all()) = 1.0f;
    const Tensor3 dx = mha.backward(dy);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = t0 + 1; t < T; ++t)
        for (std::size_t d = 0; d < D; ++d) REQUIRE(dx(b, t, d) == 0.0f);
    CHECK(dx(0, 0, 0) != 0.0f);
    // Without the mask, later inputs matter.
    mha.forward(x);
    mha.backward(dy);
    CHECK(mha.attention_probs()(0, 0, 0, T - 1) > 0.0f);
  }
}

TEST_CASE("MultiheadAttention shared_qk gives symmetric logits", "[nn][attention]") {
  // Shared W_Q = W_K: S = X W Wᵀ Xᵀ/√d_k (+ biases, shared too) is symmetric; RoPE keeps it so
  // (q̃_t = k̃_t at every position), causal ALiBi's −m(i − j) does not; separate W_Q, W_K are not.
  Rng rng(31);
  const std::size_t B = 2, T = 6, D = 8, h = 2;
  const Tensor3 x = randn3(B, T, D, rng);
  RotaryEmbedding rope(RopeConfig{D / h});
  MultiheadAttention shared(D, h, rng, true);
  randomise_biases(shared, rng);
  MultiheadAttention separate(D, h, rng, false);
  randomise_biases(separate, rng);
  CHECK_THROWS_AS(shared.logit_asymmetry(), std::logic_error);

  shared.forward(x, AttentionMask{true, nullptr});  // masks do not enter the score
  CHECK(shared.logit_asymmetry() < 1e-6);
  shared.set_rope(&rope);
  shared.forward(x);
  CHECK(shared.logit_asymmetry() < 1e-6);
  shared.set_alibi(true);
  shared.forward(x);  // bidirectional ALiBi −m|i − j| is symmetric
  CHECK(shared.logit_asymmetry() < 1e-6);
  shared.forward(x, AttentionMask{true, nullptr});  // causal ALiBi −m(i − j) is antisymmetric
  CHECK(shared.logit_asymmetry() > 0.05);

  separate.forward(x);
  const double a = separate.logit_asymmetry();
  CHECK(a > 0.3);
  CHECK(a <= 2.0);
  // Hand computation for one head: ‖S − Sᵀ‖/‖S‖ from the cached probabilities is not possible,
  // so check against an explicit S built from the parameters for B = 1, h = 1.
  MultiheadAttention one(4, 1, rng);
  randomise_biases(one, rng);
  const Tensor3 x1 = randn3(1, 3, 4, rng);
  one.forward(x1);
  const auto& W = one.in_proj_weight.value;
  const auto& bb = one.in_proj_bias.value;
  double S[3][3], num = 0.0, den = 0.0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0.0;
      for (int e = 0; e < 4; ++e) {
        double q = bb(e), k = bb(4 + e);
        for (int d = 0; d < 4; ++d) {
          q += W(e, d) * x1(0, i, d);
          k += W(4 + e, d) * x1(0, j, d);
        }
        s += q * k;
      }
      S[i][j] = s / 2.0;  // √d_k = 2
    }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      num += (S[i][j] - S[j][i]) * (S[i][j] - S[j][i]);
      den += S[i][j] * S[i][j];
    }
  CHECK_THAT(one.logit_asymmetry(), WithinRel(std::sqrt(num / den), 1e-4));
  one.forward(x1, x1);
  CHECK_THROWS_AS(one.logit_asymmetry(), std::logic_error);  // the last forward was cross-attention
}

TEST_CASE("MultiheadAttention cross form on the same tensor equals self-attention", "[nn][attention]") {
  Rng rng(37);
  const std::size_t B = 2, T = 5, D = 12, h = 3;
  for (const bool shared : {false, true}) {
    INFO("shared_qk " << shared);
    MultiheadAttention mha(D, h, rng, shared);
    randomise_biases(mha, rng);
    const Tensor3 x = randn3(B, T, D, rng), dy = randn3(B, T, D, rng);
    PaddingMask pad = xt::zeros<std::uint8_t>({B, T});
    pad(1, 3) = 1;
    const AttentionMask mask{true, &pad};
    mha.zero_grad();
    const Tensor3 ys = mha.forward(x, mask);
    const Tensor3 dxs = mha.backward(dy);
    CHECK_THROWS_AS(mha.key_value_grad(), std::logic_error);
    std::vector<xt::xarray<float>> gs;
    for (auto* p : mha.parameters()) gs.push_back(p->grad);
    mha.zero_grad();
    const Tensor3 yc = mha.forward(x, x, mask);
    const Tensor3 dq = mha.backward(dy);
    const Tensor3 dsum = dq + mha.key_value_grad();
    CHECK(close(yc, ys, 1e-6, 1e-6).empty());
    const std::string msg = close(dsum, dxs, 1e-5, 1e-6);
    INFO("dquery + dkey_value vs self dx: " << msg);
    CHECK(msg.empty());
    const auto params = mha.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << i);
      CHECK(close(params[i]->grad, gs[i], 1e-5, 1e-6).empty());
    }
  }
}

TEST_CASE("MultiheadAttention forward is stateless across calls and backward adds into grads", "[nn][attention]") {
  Rng rng(41);
  const std::size_t B = 2, T = 5, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  randomise_biases(mha, rng);
  const Tensor3 x1 = randn3(B, T, D, rng), x2 = randn3(B + 1, 3, D, rng), dy = randn3(B, T, D, rng);
  const Tensor3 a = mha.forward(x1);
  const Tensor3 dx_a = mha.backward(dy);
  std::vector<xt::xarray<float>> g_a;
  for (auto* p : mha.parameters()) g_a.push_back(p->grad);
  mha.zero_grad();
  mha.forward(x2, randn3(B + 1, 4, D, rng));  // cross, other shapes
  CHECK(bool(mha.forward(x1) == a));
  CHECK(bool(mha.backward(dy) == dx_a));
  mha.backward(dy);  // a second backward after the same forward adds the same gradient again
  const auto params = mha.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    const xt::xarray<float> twice = 2.0f * g_a[i];
    CHECK(close(params[i]->grad, twice, 1e-6, 1e-7).empty());
  }
}

TEST_CASE("MultiheadAttention rejects bad sizes shapes and masks", "[nn][attention][errors]") {
  Rng rng(2);
  CHECK_THROWS_AS(MultiheadAttention(10, 3, rng), std::invalid_argument);
  CHECK_THROWS_WITH(MultiheadAttention(10, 3, rng), Catch::Contains("d_model = 10") && Catch::Contains("n_heads = 3"));
  CHECK_THROWS_AS(MultiheadAttention(0, 1, rng), std::invalid_argument);
  CHECK_THROWS_AS(MultiheadAttention(8, 0, rng), std::invalid_argument);

  const std::size_t B = 2, T = 3, Tk = 4, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  const Tensor3 x = xt::zeros<float>({B, T, D});
  CHECK_THROWS_AS(mha.backward(x), std::logic_error);
  CHECK_THROWS_AS(mha.attention_probs(), std::logic_error);
  CHECK_THROWS_AS(mha.key_value_grad(), std::logic_error);

  CHECK_THROWS_AS(mha.forward(Tensor3(xt::zeros<float>({B, T, D + 1}))), ShapeError);
  CHECK_THROWS_WITH(mha.forward(Tensor3(xt::zeros<float>({B, T, D + 1}))),
                    Catch::Contains("x") && Catch::Contains("[2, 3, 9]"));
  CHECK_THROWS_AS(mha.forward(x, Tensor3(xt::zeros<float>({B + 1, Tk, D}))), ShapeError);
  CHECK_THROWS_WITH(mha.forward(x, Tensor3(xt::zeros<float>({B, Tk, D - 1}))), Catch::Contains("key_value"));
  const PaddingMask bad_pad = xt::zeros<std::uint8_t>({B, T + 1});
  CHECK_THROWS_AS(mha.forward(x, AttentionMask{false, &bad_pad}), ShapeError);
  CHECK_THROWS_WITH(mha.forward(x, AttentionMask{false, &bad_pad}),
                    Catch::Contains("key_padding") && Catch::Contains("[2, 4]"));
  const PaddingMask pad_kv = xt::zeros<std::uint8_t>({B, Tk});
  const Tensor3 kv = xt::zeros<float>({B, Tk, D});
  CHECK_THROWS_AS(mha.forward(x, AttentionMask{false, &pad_kv}), ShapeError);
  const PaddingMask pad_q = xt::zeros<std::uint8_t>({B, T});  // [B, Tq]: wrong for cross-attention
  CHECK_THROWS_AS(mha.forward(x, kv, AttentionMask{false, &pad_q}), ShapeError);
  CHECK_THROWS_AS(mha.backward(x), std::logic_error);  // rejected forwards left nothing behind
  CHECK_NOTHROW(mha.forward(x, kv, AttentionMask{false, &pad_kv}));  // cross: [B, Tk]

  mha.forward(x);
  CHECK_THROWS_AS(mha.backward(Tensor3(xt::zeros<float>({B, T + 1, D}))), ShapeError);
  CHECK_THROWS_AS(mha.backward(Tensor3(xt::zeros<float>({B, T, D + 1}))), ShapeError);
  CHECK_NOTHROW(mha.backward(x));
  CHECK_THROWS_AS(mha.key_value_grad(), std::logic_error);  // self-attention: dx already returned

  RotaryEmbedding wrong(RopeConfig{D});  // head_dim D, but d_k = D / h
  CHECK_THROWS_AS(mha.set_rope(&wrong), std::invalid_argument);
  CHECK(mha.rope() == nullptr);

  mha.in_proj_weight.value = xt::zeros<float>({2 * D, D});  // a [2D, D] weight without shared_qk
  CHECK_THROWS_AS(mha.forward(x), ShapeError);
}

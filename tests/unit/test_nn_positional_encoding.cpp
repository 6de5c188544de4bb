// nn/positional_encoding.hpp: the interface every model uses for a positional encoding, and the
// built-ins behind it (nn/positional.hpp): the input hooks of sinusoidal and learned are their
// forward/backward; RotaryPositionalEncoding hooks its RotaryEmbedding into attention and follows
// the context length; AlibiPositionalEncoding switches ALiBi on; NoPositionalEncoding and every
// default hook are neutral (identity, no parameters, no length limit). An attention layer hooked
// through the interface computes exactly what the direct hooks (set_rope / set_alibi) compute.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/positional.hpp"
#include "seqlab/nn/positional_encoding.hpp"

using namespace seqlab;

namespace {

Tensor3 random_x(std::size_t B, std::size_t T, std::size_t D, std::uint64_t seed) {
  Rng rng(seed);
  Tensor3 x = xt::zeros<float>({B, T, D});
  rng.fill_normal(x, 0.0f, 1.0f);
  return x;
}

bool same(const Tensor3& a, const Tensor3& b) {
  return a.shape() == b.shape() && std::equal(a.begin(), a.end(), b.begin());
}

RopeConfig rope_cfg(std::size_t hd, RopeScaling scaling = RopeScaling::none) {
  RopeConfig c;
  c.head_dim = hd;
  c.scaling = scaling;
  c.train_len = 4;
  return c;
}

}  // namespace

TEST_CASE("neutral hooks: none is the identity with no parameters and no length limit", "[nn][positional_encoding]") {
  NoPositionalEncoding none;
  PositionalEncoding& pe = none;
  const Tensor3 x = random_x(2, 3, 4, 1);
  CHECK(same(pe.forward(x, 5), x));
  CHECK(same(pe.backward(x), x));
  CHECK(pe.max_positions() == 0);
  CHECK(pe.named_parameters().empty());
  Rng rng(2);
  MultiheadAttention attn(4, 2, rng);
  pe.attach(attn);
  pe.set_context_length(100);
  CHECK(attn.rope() == nullptr);
  CHECK_FALSE(attn.alibi());
}

TEST_CASE("sinusoidal and learned act on the input through the interface", "[nn][positional_encoding]") {
  const Tensor3 x = random_x(2, 3, 4, 3);
  SinusoidalEncoding direct(4);
  std::unique_ptr<PositionalEncoding> sin = std::make_unique<SinusoidalEncoding>(4);
  CHECK(same(sin->forward(x, 2), direct.forward(x, 2)));
  CHECK(same(sin->backward(x), x));
  CHECK(sin->max_positions() == 0);
  CHECK(sin->named_parameters().empty());

  Rng r1(7), r2(7);
  LearnedPositionalEmbedding table(5, 4, r1);
  std::unique_ptr<PositionalEncoding> learned = std::make_unique<LearnedPositionalEmbedding>(5, 4, r2);
  CHECK(learned->max_positions() == 5);
  CHECK(same(learned->forward(x, 1), table.forward(x, 1)));
  learned->backward(x);
  table.backward(x);
  const auto ps = learned->named_parameters("pos.");
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].key == "pos.weight");
  CHECK(std::equal(ps[0].param->grad.begin(), ps[0].param->grad.end(), table.weight.grad.begin()));
  // Attention hooks are neutral for input-side encodings.
  Rng rng(2);
  MultiheadAttention attn(4, 2, rng);
  sin->attach(attn);
  learned->attach(attn);
  CHECK(attn.rope() == nullptr);
  CHECK_FALSE(attn.alibi());
}

TEST_CASE("RoPE and ALiBi hook into attention through the interface", "[nn][positional_encoding]") {
  const Tensor3 x = random_x(2, 5, 8, 4);
  SECTION("rope") {
    RotaryPositionalEncoding enc(rope_cfg(4));
    PositionalEncoding& pe = enc;
    CHECK(same(pe.forward(x), x));  // nothing added to the input
    CHECK(pe.named_parameters().empty());
    Rng ra(9), rb(9);
    MultiheadAttention via_interface(8, 2, ra), direct(8, 2, rb);
    pe.attach(via_interface);
    CHECK(via_interface.rope() == &enc.rotary());
    RotaryEmbedding rope(rope_cfg(4));
    direct.set_rope(&rope);
    CHECK(same(via_interface.forward(x), direct.forward(x)));
    // A head size other than the rotary's is rejected by the attention hook.
    Rng rc(9);
    MultiheadAttention wrong(8, 4, rc);
    CHECK_THROWS_AS(pe.attach(wrong), std::invalid_argument);
  }
  SECTION("rope_pi follows the context length") {
    RotaryPositionalEncoding enc(rope_cfg(4, RopeScaling::position_interpolation));
    enc.set_context_length(8);
    CHECK(enc.rotary().scale() == Approx(2.0));  // 8 / train_len 4
    enc.set_context_length(3);
    CHECK(enc.rotary().scale() == 1.0);
  }
  SECTION("alibi") {
    AlibiPositionalEncoding enc;
    PositionalEncoding& pe = enc;
    CHECK(same(pe.forward(x), x));
    Rng ra(9), rb(9);
    MultiheadAttention via_interface(8, 2, ra), direct(8, 2, rb);
    pe.attach(via_interface);
    CHECK(via_interface.alibi());
    direct.set_alibi(true);
    AttentionMask causal;
    causal.causal = true;
    CHECK(same(via_interface.forward(x, causal), direct.forward(x, causal)));
  }
  SECTION("t5_bias") {
    Rng r0(5), r1(5);
    T5RelativeBiasEncoding enc(2, 8, 8, 16, r0);
    PositionalEncoding& pe = enc;
    CHECK(same(pe.forward(x), x));
    const auto params = pe.named_parameters();
    REQUIRE(params.size() == 1);
    CHECK(params[0].key == "relative_attention_bias.weight");
    CHECK(params[0].param == &enc.bias().weight);
    RelativePositionBias ref(2, 8, 16, r1, 1.0f / std::sqrt(8.0f));  // the same draw: N(0, 1/d_model)
    CHECK(bool(ref.weight.value == enc.bias().weight.value));
    Rng ra(9), rb(9);
    MultiheadAttention via_interface(8, 2, ra), direct(8, 2, rb);
    pe.attach(via_interface);
    CHECK(via_interface.relative_bias() == &enc.bias());
    direct.set_relative_bias(&ref);
    AttentionMask causal;
    causal.causal = true;
    CHECK(same(via_interface.forward(x, causal), direct.forward(x, causal)));
    Rng rc(9);
    MultiheadAttention wrong(8, 4, rc);
    CHECK_THROWS_AS(pe.attach(wrong), std::invalid_argument);
  }
}

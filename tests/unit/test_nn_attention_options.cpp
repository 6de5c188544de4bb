// Tests of MultiheadAttention's optional masks (lib/include/seqlab/nn/attention.hpp): Reformer's
// mask of attention to self (set_mask_self), the prefix-LM mask (set_causal_prefix) and Michel et
// al.'s head mask (set_head_mask): which probabilities they zero, what the outputs then equal, and
// finite-difference gradients with each of them (alone and with the other masks and hooks).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/positional.hpp"
#include "random_inputs.hpp"

using namespace seqlab;
using seqlab::test::randn3;
using seqlab::test::randomise_biases;
using Catch::Matchers::WithinAbs;

namespace {

struct OptionCase {
  std::string name;
  bool causal = false;
  bool padding = false;
  bool shared_qk = false;
  bool mask_self = false;
  std::size_t prefix = 0;
  std::vector<float> gates;
  bool rope = false;
  std::size_t q_offset = 0, k_offset = 0;
};

/// Finite differences of sum(w ⊙ y) against backward, for the input and every parameter.
void gradcheck(const OptionCase& c) {
  INFO("case " << c.name);
  Rng rng(211);
  const std::size_t B = 2, D = 8, h = 2, T = 5;
  MultiheadAttention mha(D, h, rng, c.shared_qk);
  randomise_biases(mha, rng);
  RotaryEmbedding rope(RopeConfig{D / h});
  if (c.rope) mha.set_rope(&rope);
  mha.set_position_offsets(c.q_offset, c.k_offset);
  mha.set_mask_self(c.mask_self);
  mha.set_causal_prefix(c.prefix);
  mha.set_head_mask(c.gates);
  Tensor3 x = randn3(B, T, D, rng);
  PaddingMask pad = xt::zeros<std::uint8_t>({B, T});
  if (c.padding) {
    pad(0, T - 1) = 1;
    pad(1, 1) = 1;
    pad(1, 2) = 1;
  }
  const AttentionMask mask{c.causal, c.padding ? &pad : nullptr};
  Tensor3 gx = xt::zeros<float>({B, T, D});
  auto forward = [&]() {
    const Tensor3 y = mha.forward(x, mask);
    return std::vector<float>(y.begin(), y.end());
  };
  auto backward = [&](const std::vector<float>& w) {
    mha.zero_grad();
    mha.forward(x, mask);
    Tensor3 dy({B, T, D});
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 dx = mha.backward(dy);
    std::copy(dx.begin(), dx.end(), gx.begin());
  };
  std::vector<test::Probe> probes = {{"x", x.data(), gx.data(), x.size()}};
  for (const auto& np : mha.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  const auto res = test::check_gradients(forward, backward, probes);
  INFO("checked " << res.checked << ", worst " << res.worst << "\n" << res.report);
  CHECK(res.checked == x.size() + mha.num_parameters());
  REQUIRE(res.ok);
}

}  // namespace

TEST_CASE("MultiheadAttention self mask zeroes the diagonal unless it is the only key", "[nn][attention]") {
  Rng rng(5);
  const std::size_t B = 2, T = 6, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng, true);
  randomise_biases(mha, rng);
  const Tensor3 x = randn3(B, T, D, rng);
  PaddingMask pad = xt::zeros<std::uint8_t>({B, T});
  for (std::size_t t = 0; t < T; ++t) pad(1, t) = t == 3 ? 0 : 1;  // row 1: only key 3 visible
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    mha.set_mask_self(false);
    mha.forward(x, AttentionMask{causal, nullptr});
    const Tensor4 plain = mha.attention_probs();
    CHECK(plain(0, 0, 2, 2) > 0.0f);
    mha.set_mask_self(true);
    mha.forward(x, AttentionMask{causal, nullptr});
    const Tensor4& P = mha.attention_probs();
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < h; ++i)
        for (std::size_t t = 0; t < T; ++t) {
          INFO("b " << b << " head " << i << " t " << t);
          double sum = 0;
          for (std::size_t j = 0; j < T; ++j) sum += P(b, i, t, j);
          CHECK_THAT(sum, WithinAbs(1.0, 1e-5));
          // Causal position 0 sees only itself: it keeps its whole attention there.
          CHECK(P(b, i, t, t) == (causal && t == 0 ? 1.0f : 0.0f));
          // Every other entry is the unmasked softmax renormalised without the diagonal.
          if (!(causal && t == 0))
            for (std::size_t j = 0; j < (causal ? t + 1 : T); ++j)
              if (j != t)
                CHECK_THAT(P(b, i, t, j), WithinAbs(plain(b, i, t, j) / (1.0 - plain(b, i, t, t)), 1e-5));
        }
  }
  // A query whose only visible key is itself keeps it (padding), every other query of row 1 sees
  // only key 3.
  mha.forward(x, AttentionMask{false, &pad});
  const Tensor4& P = mha.attention_probs();
  for (std::size_t i = 0; i < h; ++i)
    for (std::size_t t = 0; t < T; ++t) CHECK(P(1, i, t, 3) == 1.0f);
  // Cross-attention ignores the option (no query has an own position among the keys).
  const Tensor3 kv = randn3(B, T, D, rng);
  mha.forward(x, kv);
  CHECK(mha.attention_probs()(0, 0, 2, 2) > 0.0f);
}

TEST_CASE("MultiheadAttention self mask follows the position offsets", "[nn][attention]") {
  // Queries at positions 2.. against keys at 0..: query row r's own key is column r + 2.
  Rng rng(9);
  const std::size_t B = 1, T = 4, D = 4, h = 1;
  MultiheadAttention mha(D, h, rng);
  mha.set_mask_self(true);
  mha.set_position_offsets(2, 0);
  const Tensor3 x = randn3(B, T, D, rng);
  mha.forward(x, AttentionMask{true, nullptr});
  const Tensor4& P = mha.attention_probs();
  for (std::size_t r = 0; r < T; ++r) {
    const std::size_t own = r + 2;
    for (std::size_t j = 0; j < T; ++j) {
      INFO("row " << r << " key " << j);
      if (j == own || j > own) CHECK(P(0, 0, r, j) == 0.0f);
      else CHECK(P(0, 0, r, j) > 0.0f);
    }
  }
}

TEST_CASE("MultiheadAttention causal prefix shows the prefix to every query", "[nn][attention]") {
  Rng rng(13);
  const std::size_t B = 2, T = 7, D = 8, h = 2, prefix = 3;
  MultiheadAttention mha(D, h, rng);
  randomise_biases(mha, rng);
  mha.set_causal_prefix(prefix);
  Tensor3 x = randn3(B, T, D, rng);
  const Tensor3 y0 = mha.forward(x, AttentionMask{true, nullptr});
  const Tensor4 P = mha.attention_probs();
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < T; ++j) {
      INFO("t " << t << " j " << j);
      const bool visible = j <= t || j < prefix;
      CHECK((P(0, 1, t, j) > 0.0f) == visible);
    }
  // The prefix's outputs equal a bidirectional attention over the prefix alone.
  Tensor3 xp = xt::view(x, xt::all(), xt::range(0, prefix), xt::all());
  MultiheadAttention plain = mha;
  plain.set_causal_prefix(0);
  const Tensor3 yp = plain.forward(xp);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < prefix; ++t)
      for (std::size_t d = 0; d < D; ++d) CHECK_THAT(y0(b, t, d), WithinAbs(yp(b, t, d), 1e-5));
  // Without the causal mask, the option changes nothing; prefix >= T makes the mask bidirectional.
  mha.set_causal_prefix(T);
  const Tensor3 yall = mha.forward(x, AttentionMask{true, nullptr});
  const Tensor3 ybi = plain.forward(x);
  for (std::size_t k = 0; k < yall.size(); ++k) CHECK(yall.data()[k] == ybi.data()[k]);
  // Later inputs outside the prefix still do not reach earlier positions.
  mha.set_causal_prefix(prefix);
  Tensor3 x2 = x;
  for (std::size_t d = 0; d < D; ++d) x2(0, T - 1, d) += 3.0f;
  const Tensor3 y2 = mha.forward(x2, AttentionMask{true, nullptr});
  for (std::size_t t = 0; t + 1 < T; ++t)
    for (std::size_t d = 0; d < D; ++d) CHECK(y2(0, t, d) == y0(0, t, d));
}

TEST_CASE("MultiheadAttention head mask removes and scales heads", "[nn][attention]") {
  Rng rng(17);
  const std::size_t B = 2, T = 5, D = 8, h = 4, dk = D / h;
  MultiheadAttention mha(D, h, rng);
  randomise_biases(mha, rng);
  const Tensor3 x = randn3(B, T, D, rng);
  mha.forward(x);
  const std::vector<float> gates = {1.0f, 0.0f, 0.5f, -2.0f};
  mha.set_head_mask(gates);
  const Tensor3 y = mha.forward(x);
  MultiheadAttention ref = mha;
  ref.set_head_mask({});
  ref.forward(x);
  const Tensor4& P = ref.attention_probs();
  // The reference: out_proj of the concatenation of ξ_i·head_i, head_i = P_i V_i from the
  // unmasked probabilities and the value rows of the projection.
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t o = 0; o < D; ++o) {
        double acc = mha.out_proj.bias.value(o);
        for (std::size_t i = 0; i < h; ++i)
          for (std::size_t e = 0; e < dk; ++e) {
            double ctx = 0;
            for (std::size_t j = 0; j < T; ++j) {
              double v = mha.in_proj_bias.value(2 * D + i * dk + e);
              for (std::size_t c = 0; c < D; ++c) v += mha.in_proj_weight.value(2 * D + i * dk + e, c) * x(b, j, c);
              ctx += P(b, i, t, j) * v;
            }
            acc += mha.out_proj.weight.value(o, i * dk + e) * gates[i] * ctx;
          }
        CHECK_THAT(y(b, t, o), WithinAbs(acc, 1e-4));
      }
  // All gates 1 equals no mask, bit for bit.
  mha.set_head_mask(std::vector<float>(h, 1.0f));
  const Tensor3 y1 = mha.forward(x);
  const Tensor3 y_none = ref.forward(x);
  for (std::size_t k = 0; k < y1.size(); ++k) CHECK(y1.data()[k] == y_none.data()[k]);
  // A removed head gets no gradient into its own query, key and value rows.
  mha.set_head_mask({1.0f, 0.0f, 1.0f, 1.0f});
  mha.zero_grad();
  mha.forward(x);
  mha.backward(xt::ones<float>({B, T, D}));
  for (const std::size_t base : {std::size_t{0}, D, 2 * D})
    for (std::size_t e = 0; e < dk; ++e)
      for (std::size_t c = 0; c < D; ++c) REQUIRE(mha.in_proj_weight.grad(base + dk + e, c) == 0.0f);
  CHECK(mha.in_proj_weight.grad(0, 0) != 0.0f);
  // Bad masks.
  CHECK_THROWS_AS(mha.set_head_mask({1.0f, 1.0f}), std::invalid_argument);
  CHECK_THROWS_AS(mha.set_head_mask({1.0f, 1.0f, 1.0f, std::numeric_limits<float>::quiet_NaN()}),
                  std::invalid_argument);
  CHECK(mha.head_mask().size() == h);  // unchanged by the rejected calls
}

TEST_CASE("MultiheadAttention mask options have correct gradients", "[nn][attention][gradcheck]") {
  OptionCase c;
  c.name = "self mask shared_qk";
  c.shared_qk = true;
  c.mask_self = true;
  gradcheck(c);
  c.name = "self mask shared_qk causal padding";
  c.causal = true;
  c.padding = true;
  gradcheck(c);
  c.name = "self mask separate causal rope offsets";
  c.shared_qk = false;
  c.padding = false;
  c.rope = true;
  c.q_offset = 1;
  gradcheck(c);

  OptionCase p;
  p.name = "causal prefix";
  p.causal = true;
  p.prefix = 3;
  gradcheck(p);
  p.name = "causal prefix with padding, self mask and head mask";
  p.padding = true;
  p.mask_self = true;
  p.gates = {0.7f, -1.3f};
  gradcheck(p);

  OptionCase g;
  g.name = "head mask";
  g.gates = {0.0f, 1.5f};
  gradcheck(g);
  g.name = "head mask shared_qk causal";
  g.shared_qk = true;
  g.causal = true;
  g.gates = {2.0f, 0.25f};
  gradcheck(g);
}

TEST_CASE("MultiheadAttention mask options run the materialised kernel", "[nn][attention]") {
  // The fused kernel has none of the three options: with one set, a forward runs the
  // materialised kernel even when the fused one is asked for; without, the fused one runs.
  Rng rng(17);
  const std::size_t B = 1, D = 8, h = 2, T = 6;
  MultiheadAttention mha(D, h, rng);
  const Tensor3 x = randn3(B, T, D, rng);
  mha.set_kernel(AttentionKernel::fused);
  mha.forward(x, AttentionMask{true, nullptr});
  CHECK(mha.last_forward_fused());
  CHECK(mha.uses_fused(T, T, true));
  for (int option = 0; option < 3; ++option) {
    INFO("option " << option);
    mha.set_mask_self(option == 0);
    mha.set_causal_prefix(option == 1 ? 2 : 0);
    mha.set_head_mask(option == 2 ? std::vector<float>{1.0f, 0.0f} : std::vector<float>{});
    CHECK_FALSE(mha.uses_fused(T, T, true));
    mha.forward(x, AttentionMask{true, nullptr});
    CHECK_FALSE(mha.last_forward_fused());
  }
}

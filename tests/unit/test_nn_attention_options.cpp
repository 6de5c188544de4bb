// Tests of MultiheadAttention's optional masks (lib/include/seqlab/nn/attention.hpp): Reformer's
// mask of attention to self (set_mask_self) and its unit-length keys (set_normalize_keys), the
// prefix-LM mask (set_causal_prefix) and Michel et al.'s head mask (set_head_mask): which
// probabilities they zero or what they equal, what the outputs then equal, and finite-difference
// gradients with each of them (alone and with the other masks and hooks, both kernels).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/kv_cache.hpp"
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
  bool normalize_keys = false;
  AttentionKernel kernel = AttentionKernel::automatic;
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
  mha.set_normalize_keys(c.normalize_keys);
  mha.set_kernel(c.kernel);
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

TEST_CASE("MultiheadAttention normalised keys score queries against unit-length keys", "[nn][attention]") {
  // The probabilities equal softmax(q_t · k_j/‖k_j‖ / √d_k) computed here from in_proj (Reformer
  // §2 with W_Q = W_K: k_j = q_j/‖q_j‖), with both kernels and with the self mask; the logits of
  // the shared projection are then no longer symmetric.
  Rng rng(29);
  const std::size_t B = 2, T = 5, D = 8, h = 2, dk = D / h;
  for (const bool shared : {true, false}) {
    MultiheadAttention mha(D, h, rng, shared);
    randomise_biases(mha, rng);
    const Tensor3 x = randn3(B, T, D, rng);
    // q and k rows of the projection, in double.
    const auto& W = mha.in_proj_weight.value;
    const auto& bias = mha.in_proj_bias.value;
    const std::size_t k_row = shared ? 0 : D;
    auto proj = [&](std::size_t b, std::size_t t, std::size_t row) {
      double v = bias(row);
      for (std::size_t e = 0; e < D; ++e) v += static_cast<double>(W(row, e)) * x(b, t, e);
      return v;
    };
    for (const auto kernel : {AttentionKernel::materialised, AttentionKernel::fused}) {
      for (const bool mask_self : {false, true}) {
        INFO("shared " << shared << " fused " << (kernel == AttentionKernel::fused) << " mask_self " << mask_self);
        mha.set_kernel(kernel);
        mha.set_mask_self(mask_self);
        mha.set_normalize_keys(true);
        mha.forward(x, AttentionMask{true, nullptr});
        if (mask_self) CHECK_FALSE(mha.last_forward_fused());
        const Tensor4& P = mha.attention_probs();
        for (std::size_t b = 0; b < B; ++b)
          for (std::size_t i = 0; i < h; ++i)
            for (std::size_t t = 0; t < T; ++t) {
              std::vector<double> s(t + 1);
              double mx = -1e300;
              for (std::size_t j = 0; j <= t; ++j) {
                double dot = 0, kk = 0;
                for (std::size_t e = 0; e < dk; ++e) {
                  const double k = proj(b, j, k_row + i * dk + e);
                  dot += proj(b, t, i * dk + e) * k;
                  kk += k * k;
                }
                s[j] = dot / std::sqrt(kk) / std::sqrt(static_cast<double>(dk));
                if (mask_self && j == t && t > 0) s[j] = -1e300;
                mx = std::max(mx, s[j]);
              }
              double z = 0;
              for (double& v : s) z += (v = v <= -1e299 ? 0.0 : std::exp(v - mx));
              for (std::size_t j = 0; j < T; ++j)
                CHECK_THAT(P(b, i, t, j), WithinAbs(j <= t ? s[j] / z : 0.0, 2e-6));
            }
      }
    }
    mha.set_mask_self(false);
    mha.forward(x);
    if (shared) CHECK(mha.logit_asymmetry() > 1e-3);  // |q_i| cos θ_ij ≠ |q_j| cos θ_ji
    KVCache cache;  // decoding does not implement the normalisation: it says so
    CHECK_THROWS_AS(attention_step(mha, x, cache), std::invalid_argument);
    mha.set_normalize_keys(false);
    mha.forward(x);
    if (shared) CHECK_THAT(mha.logit_asymmetry(), WithinAbs(0.0, 1e-6));
  }
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

  OptionCase n;
  n.name = "normalised keys shared_qk self mask causal (Reformer)";
  n.shared_qk = true;
  n.mask_self = true;
  n.normalize_keys = true;
  n.causal = true;
  gradcheck(n);
  n.name = "normalised keys shared_qk padding";
  n.mask_self = false;
  n.causal = false;
  n.padding = true;
  gradcheck(n);
  n.name = "normalised keys separate rope offsets";
  n.shared_qk = false;
  n.padding = false;
  n.rope = true;
  n.q_offset = 2;
  gradcheck(n);
  n.name = "normalised keys shared_qk causal fused kernel";
  n.shared_qk = true;
  n.rope = false;
  n.q_offset = 0;
  n.causal = true;
  n.kernel = AttentionKernel::fused;
  gradcheck(n);

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

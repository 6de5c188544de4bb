// The fused attention kernel (FlashAttention; lib/src/nn/fused_attention.{hpp,cpp}) against the
// materialised kernel of MultiheadAttention (lib/include/seqlab/nn/attention.hpp): the same
// outputs, input gradients and parameter gradients to float rounding over a break-it grid (self
// and cross attention, shared_qk, bias on/off, causal masks with position offsets, key padding
// with fully masked rows and all-padding sequences, RoPE in both pairings, ALiBi with and without
// the causal mask, lengths 1-40 and 263 x 517 so that the 64-row tiles split unevenly, head sizes
// 1-32, 1 and 2 threads, repeated and accumulated backward passes); finite differences across
// tile boundaries; attention_probs and logit_asymmetry after a fused forward; kernel selection,
// skipped tiles and the memory kept. (Finite differences and the PyTorch fixtures on small shapes,
// for both kernels: test_nn_attention.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/positional.hpp"

using namespace seqlab;

namespace {

// Restores the thread budget a test changed.
struct BudgetGuard {
  int saved = num_threads();
  ~BudgetGuard() { set_num_threads(saved); }
};

struct Case {
  std::string name;
  std::size_t B = 2, Tq = 5, Tk = 5, D = 8, h = 2;
  bool self = true;
  bool causal = false;
  bool shared_qk = false;
  bool bias = true;
  bool alibi = false;
  int rope = 0;              // 0 none, 1 interleaved pairs, 2 halves
  std::size_t q_offset = 0, k_offset = 0;
  int padding = 0;           // 0 none; 1 random padded keys; 2 also sequence 0 all padding and
                             // key 0 of sequence 1 padded (with causal: a query that sees nothing)
  int threads = 1;
};

std::string describe(const Case& c) {
  std::ostringstream os;
  os << c.name << ": B " << c.B << " Tq " << c.Tq << " Tk " << c.Tk << " D " << c.D << " h " << c.h
     << (c.self ? " self" : " cross") << (c.causal ? " causal" : "") << (c.shared_qk ? " shared_qk" : "")
     << (c.bias ? "" : " nobias") << (c.alibi ? " alibi" : "") << " rope " << c.rope << " offsets " << c.q_offset
     << "," << c.k_offset << " padding " << c.padding << " threads " << c.threads;
  return os.str();
}

/// max |a − e| / max(max |e|, 1e-30) over two equal-shape tensors: the error relative to the
/// tensor's scale (its largest element), so that entries near 0 are judged on that scale.
double scaled_error(const xt::xarray<float>& a, const xt::xarray<float>& e) {
  REQUIRE(a.shape() == e.shape());
  double worst = 0.0, scale = 0.0;
  auto ia = a.begin();
  for (auto ie = e.begin(); ie != e.end(); ++ie, ++ia) {
    if (!std::isfinite(*ia)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(double(*ia) - double(*ie)));
    scale = std::max(scale, std::abs(double(*ie)));
  }
  return worst / std::max(scale, 1e-30);
}

/// One attention, its inputs and the results of one forward and two backward passes.
struct Run {
  std::unique_ptr<MultiheadAttention> mha;
  std::unique_ptr<RotaryEmbedding> rope;
  Tensor3 y, dx, dkv;
  std::vector<xt::xarray<float>> grads;   // after one backward
  std::vector<xt::xarray<float>> grads2;  // after a second backward of the same forward (adds)
  bool fused = false;
};

/// Builds the case's attention with `kernel` (parameters and inputs from fixed seeds, so two calls
/// see the same ones), runs forward, backward, backward again.
Run run_case(const Case& c, AttentionKernel kernel) {
  BudgetGuard guard;
  set_num_threads(c.threads);
  Run r;
  Rng rng(7 + c.Tq * 131 + c.Tk * 17 + c.D);
  r.mha = std::make_unique<MultiheadAttention>(c.D, c.h, rng, c.shared_qk, c.bias);
  MultiheadAttention& mha = *r.mha;
  if (c.bias) {
    rng.fill_uniform(mha.in_proj_bias.value, -0.5f, 0.5f);
    rng.fill_uniform(mha.out_proj.bias.value, -0.5f, 0.5f);
  }
  // Wider scores than the default init (a softmax far from uniform).
  mha.in_proj_weight.value *= 2.0f;
  mha.set_kernel(kernel);
  if (c.rope != 0) {
    RopeConfig rc{c.D / c.h};
    rc.pairing = c.rope == 1 ? RopePairing::interleaved : RopePairing::halves;
    r.rope = std::make_unique<RotaryEmbedding>(rc);
    mha.set_rope(r.rope.get());
  }
  mha.set_alibi(c.alibi);
  mha.set_position_offsets(c.q_offset, c.k_offset);

  Tensor3 xq({c.B, c.Tq, c.D}), xkv({c.B, c.Tk, c.D}), dy({c.B, c.Tq, c.D});
  rng.fill_normal(xq, 0.0f, 1.0f);
  rng.fill_normal(xkv, 0.0f, 1.0f);
  rng.fill_normal(dy, 0.0f, 1.0f);
  PaddingMask pad = xt::zeros<std::uint8_t>({c.B, c.Tk});
  if (c.padding >= 1)
    for (std::size_t b = 0; b < c.B; ++b)
      for (std::size_t j = 0; j < c.Tk; ++j) pad(b, j) = rng.uniform() < 0.3f ? 1 : 0;
  if (c.padding >= 2) {
    for (std::size_t j = 0; j < c.Tk; ++j) pad(0, j) = 1;
    if (c.B > 1) pad(1, 0) = 1;
  }
  const AttentionMask mask{c.causal, c.padding ? &pad : nullptr};

  r.y = c.self ? mha.forward(xq, mask) : mha.forward(xq, xkv, mask);
  r.fused = mha.last_forward_fused();
  mha.zero_grad();
  r.dx = mha.backward(dy);
  if (!c.self) r.dkv = mha.key_value_grad();
  for (auto* p : mha.parameters()) r.grads.push_back(p->grad);
  mha.backward(dy);
  for (auto* p : mha.parameters()) r.grads2.push_back(p->grad);
  return r;
}

// Tolerances: the kernels share the scores bit for bit and differ only in the order of the
// softmax's float operations (normalising at the end, the online rescaling, the backward's
// D = rowsum(dO ∘ O) instead of rowsum(dP ∘ P)). Worst scaled errors seen over this grid (GCC 12,
// AVX-512): 5e-7 forward, 4e-6 backward; a wrong mask or tile is off by O(1e-2) or more.
constexpr double kFwdTol = 1e-5, kBwdTol = 5e-5;

/// Fused against materialised: y, dx (and dL/dkey_value), every parameter gradient after one and
/// after two backward passes, and the attention probabilities (bit for bit). Returns the fused run.
Run check_case(const Case& c) {
  INFO(describe(c));
  const Run m = run_case(c, AttentionKernel::materialised);
  Run f = run_case(c, AttentionKernel::fused);
  REQUIRE(!m.fused);
  REQUIRE(f.fused);
  CHECK(scaled_error(f.y, m.y) <= kFwdTol);
  CHECK(scaled_error(f.dx, m.dx) <= kBwdTol);
  if (!c.self) CHECK(scaled_error(f.dkv, m.dkv) <= kBwdTol);
  const auto names = m.mha->named_parameters();
  for (std::size_t i = 0; i < m.grads.size(); ++i) {
    INFO("grad " << names[i].key);
    CHECK(scaled_error(f.grads[i], m.grads[i]) <= kBwdTol);
    CHECK(scaled_error(f.grads2[i], m.grads2[i]) <= kBwdTol);
    // The second backward added the same gradient again.
    const xt::xarray<float> twice = 2.0f * f.grads[i];
    CHECK(scaled_error(f.grads2[i], twice) <= 1e-6);
  }
  // attention_probs after the fused forward: recomputed with the materialised scores and softmax.
  CHECK(bool(f.mha->attention_probs() == m.mha->attention_probs()));
  if (c.self) CHECK(f.mha->logit_asymmetry() == m.mha->logit_asymmetry());
  return f;
}

}  // namespace

TEST_CASE("Fused attention matches the materialised kernel on the structured grid", "[nn][attention][fused]") {
  std::vector<Case> cases;
  cases.push_back({"self, no mask"});
  {
    Case c{"self causal"};
    c.causal = true;
    cases.push_back(c);
    c.name = "self causal, query ahead of the keys (a key/value prefix)";
    c.q_offset = 3;
    cases.push_back(c);
    c.name = "self causal, keys ahead of the queries: the first queries see nothing";
    c.q_offset = 0;
    c.k_offset = 2;
    cases.push_back(c);
  }
  for (int padding : {1, 2})
    for (bool causal : {false, true}) {
      Case c{"self padding"};
      c.padding = padding;
      c.causal = causal;
      cases.push_back(c);
    }
  for (bool causal : {false, true})
    for (bool shared : {false, true}) {
      Case c{"cross"};
      c.self = false;
      c.Tq = 4;
      c.Tk = 7;
      c.causal = causal;
      c.shared_qk = shared;
      c.padding = 2;
      c.q_offset = causal ? 3 : 0;
      cases.push_back(c);
    }
  for (bool self : {true, false}) {
    Case c{"shared_qk causal padding, no bias"};
    c.self = self;
    c.Tk = self ? 5 : 6;
    c.shared_qk = true;
    c.bias = false;
    c.causal = true;
    c.padding = 1;
    cases.push_back(c);
  }
  for (int rope : {1, 2})
    for (bool self : {true, false})
      for (bool shared : {false, true}) {
        Case c{"rope"};
        c.rope = rope;
        c.self = self;
        c.Tk = self ? 5 : 9;
        c.shared_qk = shared;
        c.causal = true;
        c.q_offset = self ? 0 : 4;
        c.k_offset = self ? 0 : 1;
        c.padding = 1;
        cases.push_back(c);
      }
  for (bool causal : {false, true})
    for (bool self : {true, false}) {
      Case c{"alibi"};
      c.alibi = true;
      c.causal = causal;
      c.self = self;
      c.Tk = self ? 5 : 8;
      c.h = 4;
      c.q_offset = self ? 0 : 5;
      c.padding = 2;
      cases.push_back(c);
    }
  {
    Case c{"rope and alibi, shared_qk, causal, padding, offsets"};
    c.rope = 2;
    c.alibi = true;
    c.shared_qk = true;
    c.causal = true;
    c.padding = 2;
    c.q_offset = 6;
    c.k_offset = 6;
    cases.push_back(c);
  }
  for (const Case& c : cases) check_case(c);
}

TEST_CASE("Fused attention matches the materialised kernel on random lengths and head sizes", "[nn][attention][fused]") {
  // Lengths 1-40 and head sizes 1-32 (n_heads 1-3), every flag drawn; RoPE only for even heads.
  Rng rng(2024);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng.uniform() * n) % n; };
  for (int k = 0; k < 48; ++k) {
    Case c{"random " + std::to_string(k)};
    c.B = 1 + pick(2);
    c.h = 1 + pick(3);
    const std::size_t dk = k < 32 ? std::size_t(k + 1) : 1 + pick(32);  // every head size 1-32 once
    c.D = dk * c.h;
    c.self = rng.uniform() < 0.6f;
    c.Tq = 1 + pick(40);
    c.Tk = c.self ? c.Tq : 1 + pick(40);
    c.causal = rng.uniform() < 0.5f;
    c.shared_qk = rng.uniform() < 0.3f;
    c.bias = rng.uniform() < 0.8f;
    c.alibi = rng.uniform() < 0.3f;
    c.rope = dk % 2 == 0 && rng.uniform() < 0.4f ? 1 + static_cast<int>(pick(2)) : 0;
    c.padding = static_cast<int>(pick(3));
    c.q_offset = pick(3) == 0 ? pick(12) : 0;
    c.k_offset = pick(3) == 0 ? pick(12) : 0;
    check_case(c);
  }
}

TEST_CASE("Fused attention matches across uneven tiles, and 2 threads give the bits of 1", "[nn][attention][fused][threads]") {
  // Tq = 263, Tk = 517: 5 query tiles (the last of 7 rows) and 9 key tiles (the last of 5), causal
  // with the queries 300 positions ahead (every query sees a different number of keys, tiles on
  // and off the diagonal), padding, ALiBi, RoPE.
  Case c{"long cross"};
  c.self = false;
  c.B = 1;
  c.Tq = 263;
  c.Tk = 517;
  c.D = 12;
  c.h = 2;
  c.causal = true;
  c.q_offset = 300;
  c.padding = 1;
  c.alibi = true;
  c.rope = 1;
  Case s{"long self"};
  s.B = 1;
  s.Tq = s.Tk = 200;
  s.D = 16;
  s.h = 4;
  s.causal = true;
  s.padding = 2;
  s.shared_qk = true;
  // Against the materialised kernel at 1 thread; then at 2 threads, where the heads are split
  // between the threads but each head is computed whole by one of them: the same bits as at 1.
  for (Case t : {c, s}) {
    const Run one = check_case(t);
    t.threads = 2;
    const Run two = check_case(t);
    INFO(describe(t));
    CHECK(bool(one.y == two.y));
    CHECK(bool(one.dx == two.dx));
    if (!t.self) CHECK(bool(one.dkv == two.dkv));
    for (std::size_t i = 0; i < one.grads.size(); ++i) CHECK(bool(one.grads[i] == two.grads[i]));
  }
}

TEST_CASE("Fused attention gradients match finite differences across tile boundaries", "[nn][attention][fused][gradcheck]") {
  // Cross attention, 70 queries and 67 keys (two tiles each way), causal with offsets, padding,
  // RoPE and ALiBi; a deterministic subset of each input and parameter.
  Rng rng(5);
  const std::size_t B = 1, Tq = 70, Tk = 67, D = 4, h = 2;
  MultiheadAttention mha(D, h, rng);
  rng.fill_uniform(mha.in_proj_bias.value, -0.5f, 0.5f);
  rng.fill_uniform(mha.out_proj.bias.value, -0.5f, 0.5f);
  mha.set_kernel(AttentionKernel::fused);
  RotaryEmbedding rope(RopeConfig{D / h});
  mha.set_rope(&rope);
  mha.set_alibi(true);
  mha.set_position_offsets(10, 5);
  Tensor3 xq({B, Tq, D}), xkv({B, Tk, D});
  rng.fill_normal(xq, 0.0f, 1.0f);
  rng.fill_normal(xkv, 0.0f, 1.0f);
  PaddingMask pad = xt::zeros<std::uint8_t>({B, Tk});
  for (std::size_t j : {0, 3, 40, 63, 64, 66}) pad(0, j) = 1;
  const AttentionMask mask{true, &pad};
  Tensor3 gq = xt::zeros<float>({B, Tq, D}), gkv = xt::zeros<float>({B, Tk, D});
  auto forward = [&]() { return test::flat(mha.forward(xq, xkv, mask)); };
  auto backward = [&](const std::vector<float>& w) {
    mha.zero_grad();
    mha.forward(xq, xkv, mask);
    Tensor3 dy({B, Tq, D});
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 dx = mha.backward(dy);
    std::copy(dx.begin(), dx.end(), gq.begin());
    std::copy(mha.key_value_grad().begin(), mha.key_value_grad().end(), gkv.begin());
  };
  std::vector<test::Probe> probes = {{"query", xq.data(), gq.data(), xq.size()},
                                     {"key_value", xkv.data(), gkv.data(), xkv.size()}};
  for (const auto& np : mha.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  test::GradCheckOptions opt;
  opt.max_elements_per_probe = 48;
  const auto res = test::check_gradients(forward, backward, probes, opt);
  INFO("checked " << res.checked << ", max abs err " << res.max_abs_err << ", worst " << res.worst << "\n"
                  << res.report);
  REQUIRE(mha.last_forward_fused());
  CHECK(res.checked > 150);
  REQUIRE(res.ok);
}

TEST_CASE("Fused attention: a query that sees no key gives out_proj.bias and zero gradients", "[nn][attention][fused]") {
  // Causal, keys 3 positions ahead of the queries: queries 0-2 see nothing; sequence 1 has every
  // key padded. Their outputs are out_proj.bias exactly; no gradient reaches their inputs.
  Rng rng(13);
  const std::size_t B = 2, T = 70, D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  rng.fill_uniform(mha.in_proj_bias.value, -0.5f, 0.5f);
  rng.fill_uniform(mha.out_proj.bias.value, -0.5f, 0.5f);
  mha.set_kernel(AttentionKernel::fused);
  mha.set_position_offsets(0, 3);
  Tensor3 x({B, T, D}), dy({B, T, D});
  rng.fill_normal(x, 0.0f, 1.0f);
  rng.fill_normal(dy, 0.0f, 1.0f);
  PaddingMask pad = xt::zeros<std::uint8_t>({B, T});
  for (std::size_t j = 0; j < T; ++j) pad(1, j) = 1;
  const Tensor3 y = mha.forward(x, AttentionMask{true, &pad});
  REQUIRE(mha.last_forward_fused());
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t) {
      if (b == 0 && t >= 3) continue;
      for (std::size_t d = 0; d < D; ++d) REQUIRE(y(b, t, d) == mha.out_proj.bias.value(d));
    }
  const Tensor3 dx = mha.backward(dy);
  for (float v : dx) REQUIRE(std::isfinite(v));
  for (auto* p : mha.parameters())
    for (float v : p->grad) REQUIRE(std::isfinite(v));
  // Sequence 1 (all padding): its queries see nothing and its keys are seen by no one.
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t d = 0; d < D; ++d) REQUIRE(dx(1, t, d) == 0.0f);
  const Tensor4& p = mha.attention_probs();
  for (std::size_t i = 0; i < h; ++i)
    for (std::size_t t = 0; t < 3; ++t)
      for (std::size_t j = 0; j < T; ++j) REQUIRE(p(0, i, t, j) == 0.0f);
}

TEST_CASE("Attention kernel selection, skipped causal tiles and the memory kept", "[nn][attention][fused]") {
  CHECK(parse_attention_kernel("auto") == AttentionKernel::automatic);
  CHECK(parse_attention_kernel("fused") == AttentionKernel::fused);
  CHECK(parse_attention_kernel("materialised") == AttentionKernel::materialised);
  CHECK(to_string(AttentionKernel::automatic) == "auto");
  CHECK_THROWS_WITH(parse_attention_kernel("flash"), Catch::Contains("attention_kernel = 'flash'") &&
                                                         Catch::Contains("auto, fused, materialised"));

  Rng rng(3);
  const std::size_t D = 8, h = 2;
  MultiheadAttention mha(D, h, rng);
  CHECK(mha.kernel() == AttentionKernel::automatic);
  CHECK_THROWS_AS(mha.last_forward_fused(), std::logic_error);
  CHECK(mha.activation_bytes() == 0);
  CHECK(mha.score_entries() == 0);
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    const std::size_t L = causal ? kFusedAttentionMinSeqLenCausal : kFusedAttentionMinSeqLen;
    CHECK_FALSE(mha.uses_fused(L - 1, L - 1, causal));
    CHECK(mha.uses_fused(L, L, causal));
    CHECK_FALSE(mha.uses_fused(L, 1, causal));  // the shorter side decides (one query: nothing to tile)
    // automatic at the threshold: fused; below: materialised.
    const std::size_t B = 1;
    Tensor3 x({B, L, D});
    rng.fill_normal(x, 0.0f, 1.0f);
    mha.forward(x, AttentionMask{causal, nullptr});
    CHECK(mha.last_forward_fused());
    Tensor3 xs({B, L - 1, D});
    rng.fill_normal(xs, 0.0f, 1.0f);
    mha.forward(xs, AttentionMask{causal, nullptr});
    CHECK_FALSE(mha.last_forward_fused());
  }
  mha.set_kernel(AttentionKernel::fused);
  CHECK(mha.uses_fused(1, 1, false));
  mha.set_kernel(AttentionKernel::materialised);
  CHECK_FALSE(mha.uses_fused(100000, 100000, true));

  // Causal self-attention of T = 200 (tiles of 64: 4 x 4, of which the 6 above the diagonal are
  // skipped): the fused kernel computes 10 of 16 tiles; the materialised all T² entries.
  const std::size_t T = 200;
  Tensor3 xt_({2, T, D});
  rng.fill_normal(xt_, 0.0f, 1.0f);
  mha.set_kernel(AttentionKernel::materialised);
  mha.forward(xt_, AttentionMask{true, nullptr});
  CHECK(mha.score_entries() == 2 * h * T * T);
  const std::size_t act = 2 * T * 3 * D + 2 * T * D + 2 * T * D;  // x, projection, heads (floats)
  CHECK(mha.activation_bytes() == 4 * (act + 2 * h * T * T));
  mha.set_kernel(AttentionKernel::fused);
  mha.forward(xt_, AttentionMask{true, nullptr});
  // Query tiles of 64, 64, 64, 8 rows see key tiles [0, 64), [0, 128), [0, 192), [0, 200).
  const std::size_t per_head = 64 * 64 + 64 * 128 + 64 * 192 + 8 * 200;
  CHECK(mha.score_entries() == 2 * h * per_head);
  CHECK(mha.activation_bytes() == 4 * (act + 2 * h * T));  // the log-sum-exp, not P
  // Without the causal mask every entry is computed, as many as the materialised kernel.
  mha.forward(xt_);
  CHECK(mha.score_entries() == 2 * h * T * T);
  // attention_probs() recomputes P but the bytes kept for backward stay those of L.
  CHECK(mha.attention_probs().shape()[3] == T);
  CHECK(mha.activation_bytes() == 4 * (act + 2 * h * T));
}

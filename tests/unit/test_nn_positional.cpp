// Positional encodings: field cases, RoPE properties (relative position, inverse, norms, large
// positions, scaling), reference fixtures (tests/golden/positional_*.json from gen_positional.py),
// finite-difference gradients, errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/nn/positional.hpp"

using namespace seqlab;
using seqlab::test::flat;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using seqlab::test::check_gradients;
using seqlab::test::compare_close;
using seqlab::test::Fixture;
using seqlab::test::Probe;

namespace {
// Tables and slopes: float32 of values in [-1, 1] against float64 references.
constexpr double kTableAtol = 1e-6;
// Rotations: float32 against float64, |a - e| <= kRotAtol + kRotRtol |e|.
constexpr double kRotRtol = 1e-5, kRotAtol = 1e-6;

RopeConfig rope_cfg(std::size_t hd, RopePairing pairing, RopeScaling scaling = RopeScaling::none,
                    std::size_t train_len = 0) {
  RopeConfig c;
  c.head_dim = hd;
  c.pairing = pairing;
  c.scaling = scaling;
  c.train_len = train_len;
  return c;
}

const char* name(RopePairing p) { return p == RopePairing::interleaved ? "interleaved" : "halves"; }
const char* name(RopeScaling s) {
  return s == RopeScaling::none ? "none" : s == RopeScaling::ntk ? "ntk" : "pi";
}

// One head vector rotated to position `pos` (rows = 1, T = 1).
std::vector<float> rotated(const RotaryEmbedding& rope, std::vector<float> v, std::size_t pos) {
  rope.rotate(v.data(), 1, 1, pos, false);
  return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}
double norm(const float* v, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += double(v[i]) * v[i];
  return std::sqrt(s);
}

// Independent double reference of RoFormer eq. 34 for one vector, by pairs, no scaling.
std::vector<double> rope_reference(const std::vector<float>& x, double pos, double base, RopePairing p) {
  const std::size_t hd = x.size(), half = hd / 2;
  std::vector<double> y(hd);
  for (std::size_t i = 0; i < half; ++i) {
    const double theta = std::pow(base, -2.0 * double(i) / double(hd));
    const double c = std::cos(pos * theta), s = std::sin(pos * theta);
    const std::size_t a = p == RopePairing::interleaved ? 2 * i : i;
    const std::size_t b = p == RopePairing::interleaved ? 2 * i + 1 : i + half;
    y[a] = x[a] * c - x[b] * s;
    y[b] = x[a] * s + x[b] * c;
  }
  return y;
}
}  // namespace

// --- names --------------------------------------------------------------------------------------------

TEST_CASE("positional encoding names round trip and classify", "[nn][positional]") {
  const std::vector<std::string> names{"sinusoidal", "learned", "rope", "rope_pi", "rope_ntk", "alibi", "none"};
  for (const auto& n : names) CHECK(to_string(parse_positional_encoding(n)) == n);
  using K = PositionalEncodingKind;
  CHECK(adds_to_embedding(K::sinusoidal));
  CHECK(adds_to_embedding(K::learned));
  for (K k : {K::rope, K::rope_pi, K::rope_ntk, K::alibi, K::none}) CHECK_FALSE(adds_to_embedding(k));
  for (K k : {K::rope, K::rope_pi, K::rope_ntk}) CHECK(acts_on_qk(k));
  for (K k : {K::sinusoidal, K::learned, K::alibi, K::none}) CHECK_FALSE(acts_on_qk(k));
  CHECK(biases_scores(K::alibi));
  CHECK_FALSE(biases_scores(K::rope));
  CHECK(rope_scaling_for(K::rope) == RopeScaling::none);
  CHECK(rope_scaling_for(K::rope_pi) == RopeScaling::position_interpolation);
  CHECK(rope_scaling_for(K::rope_ntk) == RopeScaling::ntk);
  CHECK_THROWS_AS(rope_scaling_for(K::alibi), std::invalid_argument);
}

TEST_CASE("unknown positional encoding name lists the allowed names", "[nn][positional][errors]") {
  CHECK_THROWS_AS(parse_positional_encoding("Rope"), std::invalid_argument);
  CHECK_THROWS_WITH(parse_positional_encoding("xpos"),
                    "positional_encoding = 'xpos': allowed sinusoidal, learned, rope, rope_pi, rope_ntk, "
                    "alibi, none");
  CHECK_THROWS_AS(parse_positional_encoding(""), std::invalid_argument);
}

// --- sinusoidal ---------------------------------------------------------------------------------------

TEST_CASE("sinusoidal field case d_model 4", "[nn][positional][sinusoidal]") {
  const Tensor2 pe = sinusoidal_table(2, 4);
  const std::vector<double> p0{0, 1, 0, 1}, p1{0.841471, 0.540302, 0.0099998, 0.999950};
  for (std::size_t j = 0; j < 4; ++j) {
    INFO("column " << j);
    CHECK_THAT(pe(0, j), WithinAbs(p0[j], 1e-6));
    CHECK_THAT(pe(1, j), WithinAbs(p1[j], 1e-6));
  }
  // Concatenated layout [sin_0, sin_1, cos_0, cos_1]: the exponent of column j uses 2⌊j/2⌋/d in the
  // interleaved layout and 2(j mod d/2)/d here.
  const Tensor2 pc = sinusoidal_table(2, 4, false);
  const std::vector<double> c1{0.841471, 0.0099998, 0.540302, 0.999950};
  for (std::size_t j = 0; j < 4; ++j) {
    INFO("column " << j);
    CHECK_THAT(pc(1, j), WithinAbs(c1[j], 1e-6));
  }
  // pos_offset shifts rows: row 0 from offset 1 is position 1.
  const Tensor2 po = sinusoidal_table(1, 4, true, 1);
  for (std::size_t j = 0; j < 4; ++j) CHECK(po(0, j) == pe(1, j));
}

TEST_CASE("sinusoidal tables match the float64 reference", "[nn][positional][sinusoidal][golden]") {
  const Fixture fx("positional_sinusoidal.json");
  struct Case {
    const char* key;
    std::size_t len;
    bool interleaved;
    std::size_t offset;
  };
  for (const Case& c : {Case{"interleaved", 50, true, 0}, Case{"concatenated", 50, false, 0},
                        Case{"interleaved.offset1000", 8, true, 1000},
                        Case{"concatenated.offset1000", 8, false, 1000}}) {
    const Tensor2 pe = sinusoidal_table(c.len, 16, c.interleaved, c.offset);
    const std::string msg = compare_close(pe, fx.tensor_f64(c.key), 0.0, kTableAtol);
    INFO(c.key << ": " << msg);
    CHECK(msg.empty());
  }
}

TEST_CASE("SinusoidalEncoding adds the table and passes the gradient through", "[nn][positional][sinusoidal]") {
  Rng rng(4);
  SinusoidalEncoding enc(6);
  CHECK(enc.named_parameters().empty());
  Tensor3 x({2, 5, 6});
  rng.fill_uniform(x, -1, 1);
  for (std::size_t off : {std::size_t{0}, std::size_t{7}, std::size_t{0}}) {  // table cache refreshed
    INFO("pos_offset " << off);
    const Tensor3 y = enc.forward(x, off);
    const Tensor2 pe = sinusoidal_table(5, 6, true, off);
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t t = 0; t < 5; ++t)
        for (std::size_t j = 0; j < 6; ++j) REQUIRE(y(b, t, j) == x(b, t, j) + pe(t, j));
  }
  SinusoidalEncoding cat(6, false);
  const Tensor3 yc = cat.forward(x, 2);
  const Tensor2 pc = sinusoidal_table(5, 6, false, 2);
  CHECK(yc(1, 3, 4) == x(1, 3, 4) + pc(3, 4));

  Tensor3 dy({2, 5, 6});
  rng.fill_uniform(dy, -1, 1);
  CHECK((enc.backward(dy) == dy));
  CHECK_THROWS_AS(enc.backward(Tensor3(xt::zeros<float>({2, 4, 6}))), ShapeError);
  CHECK_THROWS_AS(enc.forward(Tensor3(xt::zeros<float>({2, 4, 5}))), ShapeError);
  SinusoidalEncoding fresh(6);
  CHECK_THROWS_AS(fresh.backward(dy), std::logic_error);
}

// --- learned ------------------------------------------------------------------------------------------

TEST_CASE("LearnedPositionalEmbedding init is N of 0 1 and named weight", "[nn][positional][learned]") {
  Rng rng(8);
  LearnedPositionalEmbedding pos(256, 64, rng);
  REQUIRE(pos.weight.value.shape() == std::vector<std::size_t>{256, 64});
  double s = 0, s2 = 0;
  for (float w : pos.weight.value) {
    s += w;
    s2 += double(w) * w;
  }
  const double n = pos.weight.size();
  CHECK(std::abs(s / n) < 0.02);
  CHECK(std::abs(s2 / n - 1.0) < 0.03);
  auto np = pos.named_parameters("pos_emb.");
  REQUIRE(np.size() == 1);
  CHECK(np[0].key == "pos_emb.weight");
  CHECK(pos.num_parameters() == 256 * 64);
  Rng again(8);
  LearnedPositionalEmbedding pos2(256, 64, again);
  CHECK((pos2.weight.value == pos.weight.value));
}

TEST_CASE("LearnedPositionalEmbedding forward adds the rows at pos_offset", "[nn][positional][learned]") {
  Rng rng(9);
  LearnedPositionalEmbedding pos(10, 3, rng);
  Tensor3 x({2, 4, 3});
  rng.fill_uniform(x, -1, 1);
  const Tensor3 y = pos.forward(x, 6);  // positions 6..9, the last rows
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t t = 0; t < 4; ++t)
      for (std::size_t j = 0; j < 3; ++j) REQUIRE(y(b, t, j) == x(b, t, j) + pos.weight.value(6 + t, j));
}

TEST_CASE("LearnedPositionalEmbedding gradients match finite differences", "[nn][positional][learned][gradcheck]") {
  Rng rng(10);
  LearnedPositionalEmbedding pos(7, 3, rng);
  Tensor3 x({2, 4, 3});
  rng.fill_uniform(x, -1, 1);
  Tensor3 dx = xt::zeros<float>({2, 4, 3});
  const std::size_t off = 2;
  auto forward = [&] { return flat(pos.forward(x, off)); };
  auto backward = [&](const std::vector<float>& w) {
    pos.zero_grad();
    pos.forward(x, off);
    Tensor3 dy({2, 4, 3});
    std::copy(w.begin(), w.end(), dy.begin());
    const Tensor3 g = pos.backward(dy);
    std::copy(g.begin(), g.end(), dx.begin());
  };
  const auto res = check_gradients(
      forward, backward,
      {Probe{"x", x.data(), dx.data(), x.size()},
       Probe{"weight", pos.weight.value.data(), pos.weight.grad.data(), pos.weight.size()}});
  INFO("worst: " << res.worst << "\n" << res.report);
  REQUIRE(res.ok);
  CHECK(res.checked == 24 + 21);
  // Rows outside positions 2..5 get exactly no gradient.
  for (std::size_t r : {0, 1, 6})
    for (std::size_t j = 0; j < 3; ++j) CHECK(pos.weight.grad(r, j) == 0.0f);

  // backward adds
  const xt::xarray<float> g1 = pos.weight.grad;
  pos.forward(x, off);
  Tensor3 dy = xt::ones<float>({2, 4, 3});
  pos.backward(dy);
  CHECK(pos.weight.grad(3, 1) == Approx(g1(3, 1) + 2.0f).margin(1e-6));
}

TEST_CASE("LearnedPositionalEmbedding beyond max_len throws naming max_len", "[nn][positional][learned][errors]") {
  Rng rng(1);
  LearnedPositionalEmbedding pos(8, 4, rng);
  const Tensor3 x9 = xt::zeros<float>({1, 9, 4});
  CHECK_THROWS_AS(pos.forward(x9), std::out_of_range);
  CHECK_THROWS_WITH(pos.forward(x9), Contains("max_len = 8") && Contains("length 9"));
  const Tensor3 x3 = xt::zeros<float>({2, 3, 4});
  CHECK_NOTHROW(pos.forward(x3, 5));  // positions 5..7: fits exactly
  CHECK_THROWS_WITH(pos.forward(x3, 6), Contains("max_len = 8") && Contains("length 9"));
  CHECK_THROWS_AS(pos.forward(x3, 100), std::out_of_range);
  CHECK_THROWS_AS(pos.forward(Tensor3(xt::zeros<float>({2, 3, 5}))), ShapeError);
  LearnedPositionalEmbedding fresh(8, 4, rng);
  CHECK_THROWS_AS(fresh.backward(x3), std::logic_error);
  CHECK_THROWS_AS(LearnedPositionalEmbedding(0, 4, rng), std::invalid_argument);
  CHECK_THROWS_AS(LearnedPositionalEmbedding(4, 0, rng), std::invalid_argument);
}

// --- RoPE ---------------------------------------------------------------------------------------------

TEST_CASE("RoPE field case head size 4 position 1", "[nn][positional][rope]") {
  struct Case {
    RopePairing pairing;
    std::vector<double> want;
  };
  for (const Case& c : {Case{RopePairing::interleaved, {-1.142640, 1.922076, 2.959851, 4.029800}},
                        Case{RopePairing::halves, {-1.984111, 1.959901, 2.462378, 4.019800}}}) {
    INFO(name(c.pairing));
    const RotaryEmbedding rope(rope_cfg(4, c.pairing));
    std::vector<float> x{1, 2, 3, 4};
    rope.rotate(x.data(), 1, 1, 1, false);
    for (std::size_t j = 0; j < 4; ++j) {
      INFO("element " << j);
      CHECK_THAT(x[j], WithinAbs(c.want[j], 1e-5));
    }
    std::vector<float> x0{1, 2, 3, 4};
    rope.rotate(x0.data(), 1, 1, 0, false);  // position 0: identity
    CHECK((x0 == std::vector<float>{1, 2, 3, 4}));
  }
}

TEST_CASE("RoPE matches the float64 reference for all pairings and scalings", "[nn][positional][rope][golden]") {
  const Fixture fx("positional_rope.json");
  const auto& meta = fx.meta();
  const std::size_t hd = meta["head_dim"], off = meta["pos_offset"], train = meta["train_len"],
                    ctx = meta["context_length"], big = meta["large_offset"];
  const Tensor3 x = fx.tensor("x");
  REQUIRE(x.shape()[2] == hd);
  for (RopePairing p : {RopePairing::interleaved, RopePairing::halves}) {
    for (RopeScaling s : {RopeScaling::none, RopeScaling::position_interpolation, RopeScaling::ntk}) {
      const std::string key = std::string(name(p)) + "." + name(s);
      RotaryEmbedding rope(rope_cfg(hd, p, s, s == RopeScaling::none ? 0 : train));
      rope.set_context_length(ctx);
      if (s != RopeScaling::none) CHECK(rope.scale() == Approx(double(meta["scale"])).epsilon(1e-15));
      Tensor3 y = x;
      rope.rotate(y, off);
      std::string msg = compare_close(y, fx.tensor_f64(key), kRotRtol, kRotAtol);
      INFO(key << ": " << msg);
      CHECK(msg.empty());
      rope.rotate(y, off, true);  // and back
      msg = compare_close(y, fx.tensor_f64("x"), kRotRtol, kRotAtol);
      INFO(key << " inverse: " << msg);
      CHECK(msg.empty());
    }
    const std::string key = std::string(name(p)) + ".none.offset100000";
    const RotaryEmbedding rope(rope_cfg(hd, p));
    Tensor3 y = x;
    rope.rotate(y, big);
    const std::string msg = compare_close(y, fx.tensor_f64(key), kRotRtol, kRotAtol);
    INFO(key << ": " << msg);
    CHECK(msg.empty());
  }
}

TEST_CASE("RoPE scores depend only on the relative position", "[nn][positional][rope]") {
  const std::size_t hd = 16;
  Rng rng(21);
  std::vector<float> q(hd), k(hd);
  rng.fill_uniform(q, -1, 1);
  rng.fill_uniform(k, -1, 1);
  const double scale = norm(q.data(), hd) * norm(k.data(), hd);  // bound on |q·k|
  for (RopePairing p : {RopePairing::interleaved, RopePairing::halves}) {
    for (RopeScaling s : {RopeScaling::none, RopeScaling::position_interpolation, RopeScaling::ntk}) {
      INFO(name(p) << " " << name(s));
      RotaryEmbedding rope(rope_cfg(hd, p, s, s == RopeScaling::none ? 0 : 64));
      rope.set_context_length(256);  // s = 4 for pi / ntk
      CHECK(rope.scale() == (s == RopeScaling::none ? 1.0 : 4.0));
      // (m, n) -> (m + shift, n + shift): same score, relative to |q||k|, within 1e-5.
      for (std::size_t m : {std::size_t{3}, std::size_t{40}, std::size_t{200}}) {
        for (std::size_t n : {std::size_t{0}, std::size_t{3}, std::size_t{17}}) {
          const double s0 = dot(rotated(rope, q, m), rotated(rope, k, n));
          for (std::size_t shift : {std::size_t{1}, std::size_t{37}, std::size_t{5000}}) {
            const double s1 = dot(rotated(rope, q, m + shift), rotated(rope, k, n + shift));
            INFO("m " << m << " n " << n << " shift " << shift << ": " << s0 << " vs " << s1);
            REQUIRE(std::abs(s1 - s0) <= 1e-5 * scale);
          }
        }
      }
      // ...and it does depend on m − n (a rotation-free bug would pass the check above).
      const double a = dot(rotated(rope, q, 5), rotated(rope, k, 5));
      const double b = dot(rotated(rope, q, 9), rotated(rope, k, 5));
      CHECK(std::abs(a - b) > 1e-3 * scale);
      CHECK(std::abs(a - dot(q, k)) <= 1e-5 * scale);  // m = n: the unrotated score
    }
  }
}

TEST_CASE("RoPE inverse undoes the rotation and norms are preserved", "[nn][positional][rope]") {
  Rng rng(22);
  for (RopePairing p : {RopePairing::interleaved, RopePairing::halves}) {
    INFO(name(p));
    const std::size_t rows = 4, T = 7, hd = 12;
    const RotaryEmbedding rope(rope_cfg(hd, p));
    Tensor3 x({rows, T, hd});
    rng.fill_uniform(x, -2, 2);
    Tensor3 y = x;
    rope.rotate(y.data(), rows, T, 11, false);
    CHECK(xt::amax(xt::abs(y - x))() > 0.1f);  // it did rotate
    for (std::size_t r = 0; r < rows * T; ++r) {
      const double nx = norm(x.data() + r * hd, hd), ny = norm(y.data() + r * hd, hd);
      REQUIRE(std::abs(ny - nx) <= 1e-6 * nx);
    }
    rope.rotate(y.data(), rows, T, 11, true);
    const std::string msg = compare_close(y, xt::xarray<double>(x), 0.0, 1e-6);
    INFO(msg);
    CHECK(msg.empty());
  }
}

TEST_CASE("RoPE at large positions has no accumulated angle error", "[nn][positional][rope]") {
  Rng rng(23);
  const std::size_t hd = 64, T = 5, off = 100000;
  for (RopePairing p : {RopePairing::interleaved, RopePairing::halves}) {
    INFO(name(p));
    const RotaryEmbedding rope(rope_cfg(hd, p));
    std::vector<float> x(T * hd);
    rng.fill_uniform(x, -1, 1);
    std::vector<float> y = x;
    rope.rotate(y.data(), 1, T, off, false);
    double worst = 0;
    for (std::size_t t = 0; t < T; ++t) {
      const std::vector<float> xt_(x.begin() + t * hd, x.begin() + (t + 1) * hd);
      const std::vector<double> ref = rope_reference(xt_, double(off + t), 10000.0, p);
      for (std::size_t j = 0; j < hd; ++j) worst = std::max(worst, std::abs(y[t * hd + j] - ref[j]));
    }
    INFO("max abs error " << worst);
    CHECK(worst < 1e-6);  // float angles would be off by ~1e-2 at position 1e5
  }
}

TEST_CASE("RoPE scaling follows position interpolation and NTK-aware base scaling", "[nn][positional][rope]") {
  const std::size_t hd = 8, L = 32;
  SECTION("scale is context over train_len above train_len and 1 otherwise") {
    for (RopeScaling s : {RopeScaling::position_interpolation, RopeScaling::ntk}) {
      RotaryEmbedding rope(rope_cfg(hd, RopePairing::interleaved, s, L));
      CHECK(rope.scale() == 1.0);
      rope.set_context_length(L);
      CHECK(rope.scale() == 1.0);
      rope.set_context_length(3 * L);
      CHECK(rope.scale() == 3.0);
      rope.set_context_length(10);
      CHECK(rope.scale() == 1.0);
    }
    RotaryEmbedding none(rope_cfg(hd, RopePairing::interleaved));
    none.set_context_length(1000);
    CHECK(none.scale() == 1.0);
  }
  SECTION("pi at position 2m with s = 2 equals plain RoPE at position m") {
    RotaryEmbedding pi(rope_cfg(hd, RopePairing::halves, RopeScaling::position_interpolation, L));
    pi.set_context_length(2 * L);
    const RotaryEmbedding plain(rope_cfg(hd, RopePairing::halves));
    Rng rng(24);
    std::vector<float> x(hd);
    rng.fill_uniform(x, -1, 1);
    for (std::size_t m : {std::size_t{1}, std::size_t{13}, std::size_t{50}}) {
      const auto a = rotated(pi, x, 2 * m), b = rotated(plain, x, m);
      for (std::size_t j = 0; j < hd; ++j) REQUIRE_THAT(a[j], WithinAbs(b[j], 1e-6));
    }
  }
  SECTION("ntk keeps the highest frequency and divides the lowest by s") {
    RotaryEmbedding ntk(rope_cfg(hd, RopePairing::interleaved, RopeScaling::ntk, L));
    const std::vector<double> f1 = ntk.inverse_frequencies();
    ntk.set_context_length(4 * L);
    const std::vector<double> f4 = ntk.inverse_frequencies();
    REQUIRE(f4.size() == hd / 2);
    CHECK(f4[0] == 1.0);
    CHECK(f4[hd / 2 - 1] == Approx(f1[hd / 2 - 1] / 4.0).epsilon(1e-12));  // base'^(-(hd-2)/hd) = θ_last / s
    for (std::size_t i = 1; i + 1 < hd / 2; ++i) {
      CHECK(f4[i] < f1[i]);
      CHECK(f4[i] > f1[i] / 4.0);
    }
    // head_dim 2: the only frequency is base^0 = 1, ntk changes nothing (and stays finite).
    RotaryEmbedding two(rope_cfg(2, RopePairing::interleaved, RopeScaling::ntk, L));
    two.set_context_length(8 * L);
    CHECK(two.inverse_frequencies() == std::vector<double>{1.0});
  }
}

TEST_CASE("RoPE cached tables follow T pos_offset and scale", "[nn][positional][rope]") {
  Rng rng(25);
  const std::size_t hd = 6, rows = 2;
  RotaryEmbedding rope(rope_cfg(hd, RopePairing::interleaved, RopeScaling::position_interpolation, 4));
  std::vector<float> x(rows * 5 * hd);
  rng.fill_uniform(x, -1, 1);
  struct Call {
    std::size_t T, off, ctx;
  };
  // Alternate calls so that a stale cache would be reused; compare each to a fresh object.
  for (const Call& c : {Call{5, 0, 4}, Call{5, 3, 4}, Call{3, 3, 4}, Call{3, 3, 12}, Call{5, 0, 4}}) {
    INFO("T " << c.T << " pos_offset " << c.off << " context " << c.ctx);
    rope.set_context_length(c.ctx);
    RotaryEmbedding fresh(rope.config());
    fresh.set_context_length(c.ctx);
    std::vector<float> a(x.begin(), x.begin() + rows * c.T * hd), b = a;
    rope.rotate(a.data(), rows, c.T, c.off, false);
    fresh.rotate(b.data(), rows, c.T, c.off, false);
    REQUIRE(a == b);
  }
  RotaryEmbedding copy = rope;  // copies configuration and scale, not the cache
  CHECK(copy.scale() == rope.scale());
  CHECK(copy.config().head_dim == hd);
}

TEST_CASE("RoPE rotate is a linear map whose backward is the inverse rotation", "[nn][positional][rope][gradcheck]") {
  for (RopePairing p : {RopePairing::interleaved, RopePairing::halves}) {
    INFO(name(p));
    Rng rng(26);
    RotaryEmbedding rope(rope_cfg(8, p, RopeScaling::ntk, 3));
    rope.set_context_length(9);
    Tensor4 x({2, 2, 3, 8});  // [B, n_heads, T, hd]
    rng.fill_uniform(x, -1, 1);
    Tensor4 dx = xt::zeros<float>({2, 2, 3, 8});
    auto forward = [&] {
      Tensor4 y = x;
      rope.rotate(y, 6);
      return flat(y);
    };
    auto backward = [&](const std::vector<float>& w) {
      std::copy(w.begin(), w.end(), dx.begin());
      rope.rotate(dx, 6, true);  // dL/dx = Rᵀ dL/dy
    };
    const auto res = check_gradients(forward, backward, {Probe{"x", x.data(), dx.data(), x.size()}},
                                     {1e-2, 1e-3, 1e-4});
    INFO("worst: " << res.worst << "\n" << res.report);
    REQUIRE(res.ok);
    CHECK(res.checked == 96);
  }
}

TEST_CASE("RoPE rejects bad configurations", "[nn][positional][rope][errors]") {
  CHECK_THROWS_AS(RotaryEmbedding(rope_cfg(5, RopePairing::interleaved)), std::invalid_argument);
  CHECK_THROWS_WITH(RotaryEmbedding(rope_cfg(5, RopePairing::halves)), Contains("head_dim = 5"));
  CHECK_THROWS_WITH(RotaryEmbedding(rope_cfg(0, RopePairing::halves)), Contains("head_dim = 0"));
  CHECK_THROWS_WITH(RotaryEmbedding(rope_cfg(8, RopePairing::interleaved, RopeScaling::position_interpolation, 0)),
                    Contains("train_len = 0"));
  CHECK_THROWS_WITH(RotaryEmbedding(rope_cfg(8, RopePairing::interleaved, RopeScaling::ntk, 0)),
                    Contains("train_len = 0"));
  CHECK_NOTHROW(RotaryEmbedding(rope_cfg(8, RopePairing::interleaved, RopeScaling::none, 0)));
  RopeConfig bad = rope_cfg(8, RopePairing::interleaved);
  bad.base = 1.0;
  CHECK_THROWS_WITH(RotaryEmbedding(bad), Contains("base"));
  const RotaryEmbedding rope(rope_cfg(8, RopePairing::interleaved));
  Tensor3 wrong = xt::zeros<float>({2, 3, 6});
  CHECK_THROWS_AS(rope.rotate(wrong, 0), ShapeError);
  CHECK_THROWS_AS(sinusoidal_table(4, 5), std::invalid_argument);
  CHECK_THROWS_WITH(SinusoidalEncoding(0), Contains("d_model = 0"));
}

// --- ALiBi --------------------------------------------------------------------------------------------

TEST_CASE("ALiBi slopes match the reference for 1 to 12 heads", "[nn][positional][alibi][golden]") {
  const Fixture fx("positional_alibi.json");
  for (std::size_t n = 1; n <= 12; ++n) {
    const std::string key = "slopes.n" + std::to_string(n);
    const std::string msg = compare_close(alibi_slopes(n), fx.tensor_f64(key), 0.0, kTableAtol);
    INFO(key << ": " << msg);
    CHECK(msg.empty());
  }
  // Field cases (Press et al. §3): 8 heads 1/2 .. 1/256; 6 heads = the 4-head slopes then 1/2, 1/8.
  const Tensor1 s8 = alibi_slopes(8);
  for (std::size_t i = 0; i < 8; ++i) CHECK(s8(i) == std::ldexp(1.0f, -int(i) - 1));
  const Tensor1 s6 = alibi_slopes(6);
  const std::vector<float> want6{0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
  for (std::size_t i = 0; i < 6; ++i) CHECK(s6(i) == want6[i]);
  CHECK_THROWS_AS(alibi_slopes(0), std::invalid_argument);
}

TEST_CASE("ALiBi bias is minus slope times distance", "[nn][positional][alibi]") {
  const double m = 0.25;
  const Tensor2 c = alibi_bias(m, 3, 4, true);
  const Tensor2 b = alibi_bias(m, 3, 4, false);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      CHECK(c(i, j) == float(-m * (double(i) - double(j))));
      CHECK(b(i, j) == float(-m * std::abs(double(i) - double(j))));
    }
  CHECK(c(2, 0) == -0.5f);
  CHECK(b(0, 3) == -0.75f);
  // Press et al.'s code adds slope·j: on the causal (unmasked) part it differs by a per-row constant.
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j <= i; ++j) CHECK(c(i, j) - float(m * j) == Approx(-m * i).margin(1e-7));
  // q_offset: a single query at position 5 over 6 keys (decoding with a cache).
  const Tensor2 q = alibi_bias(m, 1, 6, true, 5);
  for (std::size_t j = 0; j < 6; ++j) CHECK(q(0, j) == float(-m * (5.0 - double(j))));

  Tensor4 scores = xt::ones<float>({2, 3, 2, 4});
  const Tensor1 slopes = alibi_slopes(3);
  add_alibi_bias(scores, slopes, false);
  for (std::size_t h = 0; h < 3; ++h) {
    const Tensor2 bh = alibi_bias(slopes(h), 2, 4, false);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 4; ++j) CHECK(scores(1, h, i, j) == 1.0f + bh(i, j));
  }
  CHECK_THROWS_AS(add_alibi_bias(scores, alibi_slopes(2), false), ShapeError);
}

TEST_CASE("T5 relative buckets follow Raffel et al.'s formula", "[nn][positional][t5]") {
  // Reference values worked out by hand from the formula of Hugging Face's
  // T5Attention._relative_position_bucket (no PyTorch): num_buckets 32, max_distance 128.
  // Unidirectional: nb = 32, max_exact = 16; d = 20: 16 + ⌊ln(20/16) / ln(128/16) · 16⌋ = 16 + ⌊1.717⌋.
  const std::vector<std::pair<long long, std::size_t>> uni = {
      {0, 0},    {-1, 1},   {-15, 15},  {-16, 16},   {-20, 17}, {-63, 26},
      {-64, 26}, {-127, 31}, {-128, 31}, {-1000, 31}, {5, 0},    {1, 0}};
  for (const auto& [rel, want] : uni) {
    INFO("unidirectional relative position " << rel);
    CHECK(t5_relative_bucket(rel, false, 32, 128) == want);
  }
  // Bidirectional: nb = 16 per direction, max_exact = 8; later keys (rel > 0) use 16..31;
  // rel = -100: 8 + ⌊ln(12.5) / ln(16) · 8⌋ = 8 + ⌊7.287⌋ = 15.
  const std::vector<std::pair<long long, std::size_t>> bi = {
      {0, 0}, {-3, 3}, {3, 19}, {8, 24}, {-8, 8}, {-7, 7}, {-100, 15}, {200, 31}, {127, 31}};
  for (const auto& [rel, want] : bi) {
    INFO("bidirectional relative position " << rel);
    CHECK(t5_relative_bucket(rel, true, 32, 128) == want);
  }
  // Monotone in the distance, one bucket per distance below max_exact, the last from max_distance.
  std::size_t prev = 0;
  for (long long d = 0; d < 300; ++d) {
    const std::size_t b = t5_relative_bucket(-d, false, 32, 64);
    CHECK(b >= prev);
    if (d < 16) CHECK(b == std::size_t(d));
    if (d >= 64) CHECK(b == 31);
    prev = b;
  }
  CHECK_THROWS_AS(t5_relative_bucket(0, false, 31, 128), std::invalid_argument);
  CHECK_THROWS_AS(t5_relative_bucket(0, false, 2, 128), std::invalid_argument);
  CHECK_THROWS_AS(t5_relative_bucket(0, false, 32, 16), std::invalid_argument);
}

TEST_CASE("RelativePositionBias adds its table by bucket and sums gradients per bucket", "[nn][positional][t5]") {
  Rng rng(4);
  RelativePositionBias bias(3, 8, 16, rng, 0.5f);
  REQUIRE(bias.weight.value.shape()[0] == 8);
  REQUIRE(bias.weight.value.shape()[1] == 3);
  CHECK(bias.named_parameters().size() == 1);
  CHECK(bias.named_parameters()[0].key == "weight");
  std::vector<float> row(6, 1.0f);
  CHECK_THROWS_AS(bias.add_row(0, 5, 0, 6, true, row.data()), std::logic_error);  // not prepared
  bias.prepare(6);
  for (const bool causal : {true, false}) {
    INFO("causal " << causal);
    for (std::size_t head = 0; head < 3; ++head) {
      std::fill(row.begin(), row.end(), 1.0f);
      bias.add_row(head, 3, 0, 6, causal, row.data());
      for (std::size_t j = 0; j < 6; ++j) {
        const std::size_t b = t5_relative_bucket(static_cast<long long>(j) - 3, !causal, 8, 16);
        CHECK(row[j] == 1.0f + bias.weight.value(b, head));
      }
    }
    // The gradient of sum(g ⊙ row) per bucket: the g of every key in that bucket.
    const std::vector<float> g = {1, 2, 3, 4, 5, 6};
    std::vector<float> slots(8, 0.0f), want(8, 0.0f);
    bias.accumulate_row(3, 0, 6, causal, g.data(), slots.data());
    for (std::size_t j = 0; j < 6; ++j)
      want[t5_relative_bucket(static_cast<long long>(j) - 3, !causal, 8, 16)] += g[j];
    CHECK(slots == want);
    bias.weight.zero_grad();
    bias.add_head_grad(2, slots.data());
    for (std::size_t b = 0; b < 8; ++b) {
      CHECK(bias.weight.grad(b, 2) == want[b]);
      CHECK(bias.weight.grad(b, 0) == 0.0f);
    }
  }
  CHECK_THROWS_AS(RelativePositionBias(0, 8, 16, rng, 0.5f), std::invalid_argument);
  CHECK_THROWS_AS(RelativePositionBias(2, 7, 16, rng, 0.5f), std::invalid_argument);
}

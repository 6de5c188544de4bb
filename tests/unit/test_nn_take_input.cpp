// forward(Tensor3&&): Linear, FeedForward and self-attention MultiheadAttention take an rvalue
// input over as their input cache instead of copying it (the pre-norm Transformer layers pass
// their norm outputs so). Checked against forward(const Tensor3&) on a twin module: the same
// output, input gradient and parameter gradients bit for bit; a copy of a Linear made after such
// a forward runs backward from its own copy of the input (FeedForward and MultiheadAttention
// copies have no forward cached, as after Linear::forward_borrowed: not checked here); a forward
// that throws on a bad input shape or a bad parameter (the module's last Linear, checked before
// the take) leaves the rvalue intact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/nn/feed_forward.hpp"
#include "seqlab/nn/linear.hpp"

using namespace seqlab;

namespace {

Tensor3 uniform3(std::size_t b, std::size_t t, std::size_t d, Rng& rng) {
  Tensor3 x = Tensor3::from_shape({b, t, d});
  rng.fill_uniform(x, -1.0f, 1.0f);
  return x;
}

// Shape, element count (a moved-from tensor keeps its shape but holds no elements) and values.
bool same_bits(const Tensor3& a, const Tensor3& b) {
  return a.shape() == b.shape() && a.size() == b.size() &&
         std::equal(a.data(), a.data() + a.size(), b.data(), b.data() + b.size());
}

// Parameter gradients of m, flattened in collect_parameters order.
std::vector<float> grads(Module& m) {
  std::vector<NamedParameter> ps;
  m.collect_parameters("", ps);
  std::vector<float> g;
  for (const NamedParameter& p : ps) g.insert(g.end(), p.param->grad.begin(), p.param->grad.end());
  return g;
}

// `make()` builds two identical modules; `copy_fwd(m, x)` calls forward(const Tensor3&),
// `take_fwd(m, x)` calls forward(std::move(x)). x [2, 5, d_in], dy [2, 5, d_out]. check_copy:
// also check that a copy made after the forward backpropagates on its own.
// break_last(m) gives m's last Linear a weight of the wrong shape.
template <class Make, class CopyFwd, class TakeFwd, class Break>
void check_take(Make&& make, CopyFwd&& copy_fwd, TakeFwd&& take_fwd, Break&& break_last, std::size_t d_in,
                std::size_t d_out, bool check_copy) {
  Rng rng(7);
  const Tensor3 x = uniform3(2, 5, d_in, rng);
  const Tensor3 dy = uniform3(2, 5, d_out, rng);
  auto a = make();
  auto b = make();
  const Tensor3 ya = copy_fwd(a, x);
  Tensor3 xt = x;
  const Tensor3 yb = take_fwd(b, xt);
  CHECK(same_bits(ya, yb));
  auto c = std::make_unique<std::decay_t<decltype(b)>>(b);  // a copy of b after the forward
  const Tensor3 dxa = a.backward(dy);
  const Tensor3 dxb = b.backward(dy);
  CHECK(same_bits(dxa, dxb));
  CHECK(grads(a) == grads(b));
  if (check_copy) {
    b = make();  // b's cache is gone; c keeps its own
    c->zero_grad();
    a.zero_grad();
    CHECK(same_bits(c->backward(dy), dxa));
    a.backward(dy);
    CHECK(grads(*c) == grads(a));
  }

  // A bad shape throws before the input is taken.
  Tensor3 bad = uniform3(2, 5, d_in + 1, rng);
  const Tensor3 bad0 = bad;
  CHECK_THROWS_AS(take_fwd(b, bad), ShapeError);
  CHECK(same_bits(bad, bad0));
  // So does a wrongly shaped parameter of the module's last Linear, checked before the take.
  break_last(b);
  Tensor3 good = uniform3(2, 5, d_in, rng);
  const Tensor3 good0 = good;
  CHECK_THROWS_AS(take_fwd(b, good), ShapeError);
  CHECK(same_bits(good, good0));
}

}  // namespace

TEST_CASE("Linear::forward(Tensor3&&) matches forward(const Tensor3&) bit for bit", "[nn][linear]") {
  check_take([] { Rng r(3); return Linear(6, 4, r); },
             [](Linear& m, const Tensor3& x) { return m.forward(x); },
             [](Linear& m, Tensor3& x) { return m.forward(std::move(x)); },
             [](Linear& m) { m.weight.value = Tensor2::from_shape({4, 7}); }, 6, 4, true);
}

TEST_CASE("FeedForward::forward(Tensor3&&) matches forward(const Tensor3&) bit for bit", "[nn][feed_forward]") {
  for (const char* act : {"relu", "gelu"}) {
    CAPTURE(act);
    check_take([act] { Rng r(3); return FeedForward(6, 10, r, act); },
               [](FeedForward& m, const Tensor3& x) { return m.forward(x); },
               [](FeedForward& m, Tensor3& x) { return m.forward(std::move(x)); },
               [](FeedForward& m) { m.linear2.weight.value = Tensor2::from_shape({6, 11}); }, 6, 6, false);
  }
}

TEST_CASE("MultiheadAttention::forward(Tensor3&&) matches forward(const Tensor3&) bit for bit",
          "[nn][attention]") {
  const AttentionMask causal{true, nullptr};
  check_take([] { Rng r(3); return MultiheadAttention(8, 2, r); },
             [&](MultiheadAttention& m, const Tensor3& x) { return m.forward(x, causal); },
             [&](MultiheadAttention& m, Tensor3& x) { return m.forward(std::move(x), causal); },
             [](MultiheadAttention& m) { m.out_proj.weight.value = Tensor2::from_shape({8, 9}); }, 8, 8,
             false);
}

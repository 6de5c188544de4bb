// Incremental decoding with a key/value cache (nn/kv_cache.hpp, models/transformer_decoding.hpp):
//   - attention_step over a sequence fed in pieces (one position at a time, or a prompt then
//     single positions) gives the rows of MultiheadAttention::forward with the causal mask, for
//     plain, shared_qk, bias-free, RoPE and ALiBi attention;
//   - encoder_layer_step does the same for pre- and post-norm TransformerEncoderLayers;
//   - decode_step gives TransformerModel::forward's logits of a transformer_decoder for every
//     positional encoding whose rotation does not depend on the context length (and for rope_pi /
//     rope_ntk within their training length), for both heads and linear input; truncating the
//     cache and decoding again repeats the same logits;
//   - misuse throws: a batch that differs from the cache's, an encoder model, a learned table's
//     max_len exceeded, truncate beyond the length.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_decoding.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/kv_cache.hpp"
#include "seqlab/nn/positional.hpp"

using namespace seqlab;

namespace {

constexpr float kTol = 2e-5f;

Tensor3 random_x(std::size_t B, std::size_t T, std::size_t D, Rng& rng) {
  Tensor3 x = Tensor3::from_shape({B, T, D});
  rng.fill_uniform(x, -1.0f, 1.0f);
  return x;
}

// Positions [t0, t1) of x [B, T, D].
Tensor3 slice(const Tensor3& x, std::size_t t0, std::size_t t1) {
  const std::size_t B = x.shape()[0], T = x.shape()[1], D = x.shape()[2];
  Tensor3 out = Tensor3::from_shape({B, t1 - t0, D});
  for (std::size_t b = 0; b < B; ++b)
    std::copy_n(x.data() + (b * T + t0) * D, (t1 - t0) * D, out.data() + b * (t1 - t0) * D);
  return out;
}

IndexTensor2 slice_ids(const IndexTensor2& ids, std::size_t t0, std::size_t t1) {
  const std::size_t B = ids.shape()[0];
  IndexTensor2 out({B, t1 - t0});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = t0; t < t1; ++t) out(b, t - t0) = ids(b, t);
  return out;
}

// max |full[:, t0:t1] − part|.
float max_diff(const Tensor3& full, std::size_t t0, const Tensor3& part) {
  const std::size_t B = part.shape()[0], t = part.shape()[1], D = part.shape()[2], T = full.shape()[1];
  float m = 0.0f;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t r = 0; r < t; ++r)
      for (std::size_t c = 0; c < D; ++c)
        m = std::max(m, std::abs(full.data()[(b * T + t0 + r) * D + c] - part.data()[(b * t + r) * D + c]));
  return m;
}

// The pieces a sequence of length T is fed in: one position at a time, or 3 then 1 then the rest.
std::vector<std::vector<std::size_t>> splits(std::size_t T) {
  std::vector<std::size_t> ones(T, 1);
  return {ones, {3, 1, T - 4}};
}

}  // namespace

TEST_CASE("attention_step equals the causal forward, fed in pieces", "[nn][kv_cache]") {
  const std::size_t B = 2, T = 9, D = 8, h = 2;
  struct Variant {
    const char* name;
    bool shared_qk, bias, rope, alibi;
  };
  for (const Variant v : {Variant{"plain", false, true, false, false}, Variant{"shared_qk", true, true, false, false},
                          Variant{"no bias", false, false, false, false}, Variant{"rope", false, true, true, false},
                          Variant{"alibi", false, true, false, true}}) {
    INFO(v.name);
    Rng rng(11);
    MultiheadAttention attn(D, h, rng, v.shared_qk, v.bias);
    RopeConfig rc;
    rc.head_dim = D / h;
    const RotaryEmbedding rope(rc);
    if (v.rope) attn.set_rope(&rope);
    if (v.alibi) attn.set_alibi(true);
    const Tensor3 x = random_x(B, T, D, rng);
    AttentionMask causal;
    causal.causal = true;
    const Tensor3 full = attn.forward(x, causal);
    for (const auto& pieces : splits(T)) {
      KVCache cache;
      std::size_t t0 = 0;
      for (std::size_t len : pieces) {
        const Tensor3 y = attention_step(attn, slice(x, t0, t0 + len), cache);
        CHECK(max_diff(full, t0, y) < kTol);
        t0 += len;
        CHECK(cache.length() == t0);
      }
    }
  }
}

TEST_CASE("encoder_layer_step equals the causal layer forward, pre and post norm", "[nn][kv_cache]") {
  const std::size_t B = 2, T = 7, D = 8;
  for (const char* placement : {"pre", "post"}) {
    INFO(placement);
    Rng rng(5);
    TransformerLayerConfig lc;
    lc.d_model = D;
    lc.n_heads = 2;
    lc.d_ff = 16;
    lc.activation = "gelu";
    lc.norm_placement = placement;
    TransformerEncoderLayer layer(lc, rng);
    const Tensor3 x = random_x(B, T, D, rng);
    AttentionMask causal;
    causal.causal = true;
    const Tensor3 full = layer.forward(x, causal);
    KVCache cache;
    for (std::size_t t = 0; t < T; ++t) CHECK(max_diff(full, t, encoder_layer_step(layer, slice(x, t, t + 1), cache)) < kTol);
  }
}

TEST_CASE("decode_step gives the transformer_decoder's forward logits", "[models][kv_cache]") {
  const std::size_t B = 2, T = 10;
  for (const char* pe : {"sinusoidal", "learned", "rope", "alibi", "none"})
    for (const char* placement : {"pre", "post"})
      for (const char* head : {"per_position", "last_position"}) {
        INFO(pe << " " << placement << " " << head);
        ModelConfig c;
        c.model = "transformer_decoder";
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
        c.norm_placement = placement;
        c.head = head;
        Rng rng(3);
        auto base = make_model(c, rng);
        auto& model = dynamic_cast<TransformerModel&>(*base);
        IndexTensor2 ids({B, T});
        for (auto& id : ids) id = static_cast<std::int32_t>(rng.uniform_int(7));
        DecodingState state;
        for (const auto& pieces : splits(T)) {
          state.clear();
          std::size_t t0 = 0;
          for (std::size_t len : pieces) {
            const Tensor3 logits = decode_step(model, slice_ids(ids, t0, t0 + len), state);
            // The full forward over the prefix that ends with this piece.
            const Tensor3 full = model.forward(slice_ids(ids, 0, t0 + len));
            if (c.last_position()) {
              CHECK(logits.shape()[1] == 1);
              CHECK(max_diff(full, 0, logits) < kTol);
            } else {
              CHECK(max_diff(full, t0, logits) < kTol);
            }
            t0 += len;
          }
          CHECK(state.length() == T);
        }
        // Truncate to 4 and decode positions 4.. again: the same logits as the first time.
        if (!c.last_position()) {
          const Tensor3 full = model.forward(ids);
          state.truncate(4);
          CHECK(max_diff(full, 4, decode_step(model, slice_ids(ids, 4, T), state)) < kTol);
        }
      }
}

TEST_CASE("decode_step with linear input, and rope_pi within its training length", "[models][kv_cache]") {
  ModelConfig c;
  c.model = "transformer_decoder";
  c.input = "linear";
  c.input_size = 3;
  c.embedding_dim = 8;
  c.hidden_size = 8;
  c.num_layers = 1;
  c.n_heads = 2;
  c.d_ff = 12;
  c.output_size = 4;
  c.positional_encoding = "rope_pi";
  c.train_len = 6;
  Rng rng(9);
  auto base = make_model(c, rng);
  auto& model = dynamic_cast<TransformerModel&>(*base);
  const Tensor3 x = random_x(2, 6, 3, rng);
  const Tensor3 full = model.forward(x);
  DecodingState state;
  for (std::size_t t = 0; t < 6; ++t) CHECK(max_diff(full, t, decode_step(model, slice(x, t, t + 1), state)) < kTol);
  CHECK(state.bytes() > 0);
}

TEST_CASE("decoding misuse throws", "[models][kv_cache]") {
  Rng rng(1);
  MultiheadAttention attn(8, 2, rng);
  KVCache cache;
  attention_step(attn, random_x(2, 3, 8, rng), cache);
  CHECK_THROWS_AS(attention_step(attn, random_x(1, 1, 8, rng), cache), ShapeError);
  CHECK_THROWS_AS(attention_step(attn, random_x(2, 1, 6, rng), cache), ShapeError);
  CHECK_THROWS_AS(cache.truncate(4), std::out_of_range);
  cache.truncate(1);
  CHECK(cache.length() == 1);

  ModelConfig c;
  c.model = "transformer_encoder";
  c.input = "embedding";
  c.vocab_size = 7;
  c.embedding_dim = 8;
  c.hidden_size = 8;
  c.num_layers = 1;
  c.n_heads = 2;
  c.d_ff = 12;
  c.output_size = 5;
  auto enc = make_model(c, rng);
  DecodingState state;
  IndexTensor2 ids({1, 2});
  ids.fill(1);
  CHECK_THROWS_AS(decode_step(dynamic_cast<TransformerModel&>(*enc), ids, state), std::invalid_argument);

  c.model = "transformer_decoder";
  c.positional_encoding = "learned";
  c.max_len = 3;
  auto dec = make_model(c, rng);
  auto& model = dynamic_cast<TransformerModel&>(*dec);
  decode_step(model, ids, state);
  IndexTensor2 two({1, 2});
  two.fill(2);
  CHECK_THROWS_WITH(decode_step(model, two, state), Catch::Contains("max_len = 3"));
}

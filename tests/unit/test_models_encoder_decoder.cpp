// The encoder-decoder Transformer (models/encoder_decoder_model.hpp):
//   - every positional encoding × norm placement builds from ModelConfig through make_model, has
//     exactly count_parameters(cfg) scalars, the documented state_dict keys, output shapes,
//     sequential_steps 2L and the layers' RoPE / ALiBi hooks (self-attention only);
//   - PyTorch parity: logits and every parameter gradient against torch.nn.Transformer wrapped with
//     the same embedding, sinusoidal positions and head (tests/golden/encoder_decoder_*.json from
//     gen_encoder_decoder.py), post- and pre-norm, with source and target padding;
//   - whole 2-layer models pass a finite-difference gradient check of every parameter (fake loss
//     L = Σ w ⊙ logits, tests/support/gradcheck.hpp defaults) with source and target padding;
//   - properties: the decoder is causal; padded source tokens change nothing; greedy decoding
//     equals the argmax of a teacher-forced forward on its own output; gradient norms vanish
//     where no gradient can flow; a tiny model learns to reverse a sequence;
//   - bad configurations and calls throw typed errors naming the key.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "checks.hpp"
#include "fixtures.hpp"
#include "gradcheck.hpp"
#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/train/optimizer.hpp"

using namespace seqlab;
using seqlab::test::check_gradients;
using seqlab::test::Fixture;
using seqlab::test::GradCheckOptions;
using seqlab::test::kBwdAtol;
using seqlab::test::kBwdRtol;
using seqlab::test::kFwdAtol;
using seqlab::test::kFwdRtol;
using seqlab::test::Probe;
using seqlab::test::require_close;

namespace {

const std::vector<std::string> kEncodings{"sinusoidal", "learned", "rope", "rope_pi",
                                          "rope_ntk",   "alibi",   "none"};

ModelConfig tiny(const std::string& pe = "sinusoidal") {
  ModelConfig c;
  c.model = "transformer_encoder_decoder";
  c.input = "embedding";
  c.vocab_size = 7;
  c.embedding_dim = 8;
  c.hidden_size = 8;
  c.num_layers = 2;
  c.n_heads = 2;
  c.d_ff = 12;
  c.output_size = 7;
  c.positional_encoding = pe;
  c.max_len = 16;
  c.train_len = 4;
  return c;
}

IndexTensor2 make_ids(std::size_t B, std::size_t T, Rng& rng, std::uint64_t V = 7) {
  IndexTensor2 ids({B, T});
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.uniform_int(V));
  return ids;
}

PaddingMask padding(std::size_t B, std::size_t T, const std::vector<std::size_t>& lengths) {
  PaddingMask m = xt::zeros<std::uint8_t>({B, T});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = lengths[b]; t < T; ++t) m(b, t) = 1;
  return m;
}

std::unique_ptr<EncoderDecoderModel> build(const ModelConfig& cfg, std::uint64_t seed) {
  Rng rng(seed);
  auto m = make_model(cfg, rng);
  auto* ed = dynamic_cast<EncoderDecoderModel*>(m.get());
  REQUIRE(ed != nullptr);
  m.release();
  return std::unique_ptr<EncoderDecoderModel>(ed);
}

std::string config_error_key(const ModelConfig& c) {
  try {
    c.validate();
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "<no error>";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

double max_abs_diff(const Tensor3& a, const Tensor3& b, std::size_t t_begin, std::size_t t_end) {
  double d = 0.0;
  for (std::size_t i = 0; i < a.shape()[0]; ++i)
    for (std::size_t t = t_begin; t < t_end; ++t)
      for (std::size_t o = 0; o < a.shape()[2]; ++o)
        d = std::max(d, std::abs(double(a(i, t, o)) - double(b(i, t, o))));
  return d;
}

}  // namespace

TEST_CASE("Encoder-decoder builds for every positional encoding with counted parameters",
          "[models][transformer][encoder_decoder]") {
  for (const auto& pe : kEncodings) {
    for (const std::string placement : {"post", "pre"}) {
      ModelConfig c = tiny(pe);
      c.norm_placement = placement;
      if (pe == "sinusoidal") c.shared_qk = true;
      if (pe == "alibi") c.norm = "rms_norm";
      if (pe == "none") c.norm = "none";
      if (pe == "rope_ntk") c.norm = "masked_batch_norm";
      INFO(pe << " " << placement << " " << c.norm);
      auto m = build(c, 3);
      INFO(m->describe());
      CHECK(m->num_parameters() == count_parameters(c));
      CHECK(m->describe().find("params=" + std::to_string(count_parameters(c))) != std::string::npos);
      CHECK(m->sequential_steps(100) == 4);
      CHECK(m->receptive_field() == 0);
      Rng rng(5);
      const IndexTensor2 src = make_ids(3, 6, rng), tgt = make_ids(3, 5, rng);
      const Tensor3 y = m->forward(src, tgt);
      REQUIRE(y.shape()[0] == 3);
      REQUIRE(y.shape()[1] == 5);
      REQUIRE(y.shape()[2] == 7);
      for (float v : y) REQUIRE(std::isfinite(v));
      m->backward(xt::ones<float>(y.shape()));
      CHECK(m->step_grad_norms().shape()[0] == 4);
      CHECK(m->step_grad_norms().shape()[1] == 11);
      CHECK(m->input_grad_norms().shape()[0] == 11);
      for (const auto& np : m->named_parameters()) {
        INFO(np.key);
        for (float g : np.param->grad) REQUIRE(std::isfinite(g));
      }
      REQUIRE(m->encoder_layers.size() == 2);
      REQUIRE(m->decoder_layers.size() == 2);
      const bool rope = pe.compare(0, 4, "rope") == 0;
      for (std::size_t l = 0; l < 2; ++l) {
        CHECK((m->encoder_layers[l]->self_attn.rope() != nullptr) == rope);
        CHECK((m->decoder_layers[l]->self_attn.rope() != nullptr) == rope);
        CHECK(m->encoder_layers[l]->self_attn.alibi() == (pe == "alibi"));
        CHECK(m->decoder_layers[l]->self_attn.alibi() == (pe == "alibi"));
        // Cross-attention never gets RoPE or ALiBi.
        CHECK(m->decoder_layers[l]->multihead_attn->rope() == nullptr);
        CHECK_FALSE(m->decoder_layers[l]->multihead_attn->alibi());
        CHECK(m->decoder_layers[l]->multihead_attn->attention_probs().shape()[2] == 5);
        CHECK(m->decoder_layers[l]->multihead_attn->attention_probs().shape()[3] == 6);
      }
    }
  }
}

TEST_CASE("Encoder-decoder parameter budget matching counts both stacks",
          "[models][transformer][encoder_decoder]") {
  ModelConfig c = tiny("learned");
  constexpr std::size_t budget = 20000;
  const ModelConfig sized = hidden_size_for_budget(c, budget);
  INFO("d_model " << sized.hidden_size);
  CHECK(sized.hidden_size == sized.embedding_dim);
  CHECK(count_parameters(sized) <= budget);
  ModelConfig bigger = sized;
  bigger.hidden_size = bigger.embedding_dim = sized.hidden_size + c.n_heads;
  CHECK(count_parameters(bigger) > budget);
  CHECK(build(sized, 1)->num_parameters() == count_parameters(sized));
}

TEST_CASE("Encoder-decoder parameter keys are torch.nn.Transformer's state_dict keys",
          "[models][transformer][encoder_decoder]") {
  ModelConfig c = tiny("learned");
  c.num_layers = 1;
  auto m = build(c, 1);
  std::vector<std::string> keys;
  for (const auto& np : m->named_parameters()) keys.push_back(np.key);
  const std::string enc = "transformer.encoder.layers.0.", dec = "transformer.decoder.layers.0.";
  const std::vector<std::string> attn = {"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                         "out_proj.bias"};
  const std::vector<std::string> ff = {"linear1.weight", "linear1.bias", "linear2.weight",
                                       "linear2.bias"};
  std::vector<std::string> expected = {"embedding.weight", "src_pos_embedding.weight",
                                       "tgt_pos_embedding.weight"};
  for (const auto& k : attn) expected.push_back(enc + "self_attn." + k);
  for (const auto& k : ff) expected.push_back(enc + k);
  for (const std::string n : {"norm1", "norm2"})
    for (const std::string k : {".weight", ".bias"}) expected.push_back(enc + n + k);
  expected.push_back("transformer.encoder.norm.weight");
  expected.push_back("transformer.encoder.norm.bias");
  for (const auto& k : attn) expected.push_back(dec + "self_attn." + k);
  for (const auto& k : attn) expected.push_back(dec + "multihead_attn." + k);
  for (const auto& k : ff) expected.push_back(dec + k);
  for (const std::string n : {"norm1", "norm2", "norm3"})
    for (const std::string k : {".weight", ".bias"}) expected.push_back(dec + n + k);
  expected.push_back("transformer.decoder.norm.weight");
  expected.push_back("transformer.decoder.norm.bias");
  expected.push_back("head.weight");
  expected.push_back("head.bias");
  CHECK(keys == expected);

  // Matrices of the transformer are redrawn from xavier_uniform (nn.Transformer._reset_parameters):
  // linear1.weight [F, D] within √(6/(F+D)), which is above nn.Linear's 1/√D bound.
  const double a = std::sqrt(6.0 / (12 + 8));
  for (auto& np : m->named_parameters()) {
    if (!ends_with(np.key, "linear1.weight")) continue;
    const auto& v = np.param->value;
    const float mx = *std::max_element(v.begin(), v.end(), [](float x, float y) {
      return std::abs(x) < std::abs(y);
    });
    INFO(np.key << " max |w| = " << mx);
    CHECK(std::abs(mx) <= a);
    CHECK(std::abs(mx) > 1.0 / std::sqrt(8.0));
  }
  // Post-norm still has the two final norms, as nn.Transformer.
  CHECK(m->encoder_norm->name() == "layer_norm");
  CHECK(m->decoder_norm->name() == "layer_norm");
}

TEST_CASE("Encoder-decoder matches torch.nn.Transformer with embedding and sinusoidal PE and head",
          "[models][transformer][encoder_decoder][golden]") {
  for (const std::string name : {"encoder_decoder_post", "encoder_decoder_pre"}) {
    INFO(name);
    const Fixture fx(name + ".json");
    const auto& meta = fx.meta();
    ModelConfig c;
    c.model = "transformer_encoder_decoder";
    c.vocab_size = meta["vocab_size"].get<std::size_t>();
    c.embedding_dim = c.hidden_size = meta["d_model"].get<std::size_t>();
    c.n_heads = meta["n_heads"].get<std::size_t>();
    c.d_ff = meta["d_ff"].get<std::size_t>();
    c.num_layers = meta["num_layers"].get<std::size_t>();
    c.output_size = meta["output_size"].get<std::size_t>();
    c.activation = meta["activation"].get<std::string>();
    c.norm_placement = meta["norm_first"].get<int>() ? "pre" : "post";
    c.positional_encoding = "sinusoidal";
    auto m = build(c, 9);
    std::size_t loaded = 0;
    for (auto& np : m->named_parameters()) {
      INFO("loading " << np.key);
      const xt::xarray<float> v = fx.tensor(np.key);
      REQUIRE(v.shape() == np.param->value.shape());
      np.param->value = v;
      ++loaded;
    }
    // embedding, 2 encoder layers of 12 tensors, encoder.norm, 2 decoder layers of 18, decoder.norm,
    // head: all 67 stored parameters (inputs, logits and grads are the other 73 tensors).
    CHECK(loaded == 1 + 2 * 12 + 2 + 2 * 18 + 2 + 2);
    auto ids = [&](const std::string& key) {
      const xt::xarray<float> v = fx.tensor(key);
      IndexTensor2 out({v.shape()[0], v.shape()[1]});
      for (std::size_t i = 0; i < v.size(); ++i) out.data()[i] = static_cast<std::int32_t>(v.data()[i]);
      return out;
    };
    auto mask = [&](const std::string& key) {
      const xt::xarray<float> v = fx.tensor(key);
      PaddingMask out({v.shape()[0], v.shape()[1]});
      for (std::size_t i = 0; i < v.size(); ++i) out.data()[i] = v.data()[i] != 0.0f ? 1 : 0;
      return out;
    };
    const IndexTensor2 src = ids("src"), tgt = ids("tgt_in");
    const PaddingMask src_pad = mask("src_key_padding_mask"), tgt_pad = mask("tgt_key_padding_mask");
    m->set_padding(&src_pad, &tgt_pad);
    const Tensor3 logits = m->forward(src, tgt);
    require_close("logits", logits, fx.tensor_f64("logits"), kFwdRtol, kFwdAtol);
    const xt::xarray<float> dl = fx.tensor("dlogits");
    Tensor3 dlogits(logits.shape());
    std::copy(dl.begin(), dl.end(), dlogits.begin());
    m->backward(dlogits);
    for (auto& np : m->named_parameters())
      require_close("grad " + np.key, np.param->grad, fx.tensor_f64("grad_" + np.key), kBwdRtol,
                    kBwdAtol);
  }
}

namespace {

ModelConfig grad_cfg(const std::string& pe, const std::string& placement) {
  ModelConfig c;
  c.model = "transformer_encoder_decoder";
  c.vocab_size = 5;
  c.embedding_dim = c.hidden_size = 4;
  c.num_layers = 2;
  c.n_heads = 2;
  c.d_ff = 6;
  c.activation = "gelu";  // a central difference across a ReLU kink is meaningless
  c.output_size = 3;
  c.positional_encoding = pe;
  c.max_len = 6;
  c.train_len = 3;
  c.norm_placement = placement;
  return c;
}

void gradcheck_model(const ModelConfig& cfg, std::uint64_t seed) {
  constexpr std::size_t kB = 2, kS = 5, kT = 4;
  auto m = build(cfg, seed);
  // Biases and norm gains away from 0 / 1 so every path carries gradient.
  Rng rng(seed + 100);
  for (auto& np : m->named_parameters()) {
    if (ends_with(np.key, "bias")) rng.fill_uniform(np.param->value, -0.5f, 0.5f);
    else if (np.key.find("norm") != std::string::npos) rng.fill_uniform(np.param->value, 0.5f, 1.5f);
  }
  const IndexTensor2 src = make_ids(kB, kS, rng, 5), tgt = make_ids(kB, kT, rng, 5);
  const PaddingMask src_pad = padding(kB, kS, {5, 3}), tgt_pad = padding(kB, kT, {2, 4});
  m->set_padding(&src_pad, &tgt_pad);
  auto forward = [&]() {
    const Tensor3 y = m->forward(src, tgt);
    return std::vector<float>(y.begin(), y.end());
  };
  auto backward = [&](const std::vector<float>& w) {
    m->zero_grad();
    const Tensor3 y = m->forward(src, tgt);
    Tensor3 dy(y.shape());
    std::copy(w.begin(), w.end(), dy.begin());
    m->backward(dy);
  };
  std::vector<Probe> probes;
  for (auto& np : m->named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  const auto res = check_gradients(forward, backward, probes, GradCheckOptions{});
  INFO(m->describe());
  INFO("checked " << res.checked << ", worst: " << res.worst << "\n" << res.report);
  CHECK(res.ok);
  CHECK(res.checked == count_parameters(cfg));
}

}  // namespace

TEST_CASE("Whole encoder-decoder gradients match finite differences",
          "[models][transformer][encoder_decoder][gradcheck]") {
  SECTION("sinusoidal post-norm") { gradcheck_model(grad_cfg("sinusoidal", "post"), 31); }
  SECTION("rope post-norm") { gradcheck_model(grad_cfg("rope", "post"), 32); }
  SECTION("learned pre-norm") { gradcheck_model(grad_cfg("learned", "pre"), 33); }
  SECTION("alibi pre-norm shared_qk rms_norm") {
    ModelConfig c = grad_cfg("alibi", "pre");
    c.shared_qk = true;
    c.norm = "rms_norm";
    gradcheck_model(c, 34);
  }
  SECTION("rope_pi pre-norm masked_batch_norm beyond train_len") {
    ModelConfig c = grad_cfg("rope_pi", "pre");
    c.norm = "masked_batch_norm";
    gradcheck_model(c, 35);  // S = 5 > train_len = 3: the source stack is interpolated
  }
}

TEST_CASE("The encoder-decoder's decoder is causal in the target",
          "[models][transformer][encoder_decoder]") {
  constexpr std::size_t T = 6, t0 = 3;
  for (const std::string pe : {"sinusoidal", "learned", "rope", "alibi"}) {
    for (const std::string placement : {"post", "pre"}) {
      INFO(pe << " " << placement);
      ModelConfig c = tiny(pe);
      c.norm_placement = placement;
      auto m = build(c, 21);
      Rng rng(22);
      const IndexTensor2 src = make_ids(2, 5, rng);
      IndexTensor2 tgt = make_ids(2, T, rng);
      const Tensor3 y0 = m->forward(src, tgt);
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = t0; t < T; ++t) tgt(b, t) = (tgt(b, t) + 1 + static_cast<int>(t)) % 7;
      const Tensor3 y1 = m->forward(src, tgt);
      CHECK(max_abs_diff(y0, y1, 0, t0) == 0.0);
      CHECK(max_abs_diff(y0, y1, t0, T) > 1e-3);
      // Every target position sees the whole source: changing the last source token changes all.
      IndexTensor2 src2 = src;
      for (std::size_t b = 0; b < 2; ++b) src2(b, 4) = (src2(b, 4) + 3) % 7;
      const Tensor3 y2 = m->forward(src2, tgt);
      for (std::size_t t = 0; t < T; ++t) CHECK(max_abs_diff(y1, y2, t, t + 1) > 1e-4);
    }
  }
}

TEST_CASE("Padded source tokens change nothing", "[models][transformer][encoder_decoder]") {
  for (const std::string norm : {"layer_norm", "masked_batch_norm"}) {
    for (const std::string pe : {"sinusoidal", "rope", "alibi"}) {
      INFO(norm << " " << pe);
      ModelConfig c = tiny(pe);
      c.norm = norm;
      c.norm_placement = pe == "rope" ? "pre" : "post";
      auto m = build(c, 41);
      Rng rng(42);
      IndexTensor2 src = make_ids(3, 6, rng);
      const IndexTensor2 tgt = make_ids(3, 4, rng);
      const PaddingMask src_pad = padding(3, 6, {6, 4, 2});
      m->set_padding(&src_pad, nullptr);
      const Tensor3 y0 = m->forward(src, tgt);
      for (std::size_t b = 0; b < 3; ++b)
        for (std::size_t s = 0; s < 6; ++s)
          if (src_pad(b, s)) src(b, s) = (src(b, s) + 1 + static_cast<int>(s)) % 7;
      const Tensor3 y1 = m->forward(src, tgt);
      CHECK(max_abs_diff(y0, y1, 0, 4) == 0.0);
      for (std::size_t l = 0; l < 2; ++l) {
        const Tensor4& p = m->decoder_layers[l]->multihead_attn->attention_probs();  // [B, h, T, S]
        for (std::size_t b = 0; b < 3; ++b)
          for (std::size_t s = 0; s < 6; ++s)
            if (src_pad(b, s)) CHECK(p(b, 0, 2, s) == 0.0f);
      }
      // Without the mask the same change is visible (the test can fail).
      m->set_padding(nullptr, nullptr);
      const Tensor3 y2 = m->forward(src, tgt);
      CHECK(max_abs_diff(y1, y2, 0, 4) > 1e-4);
    }
  }
}

TEST_CASE("attention_kernel reaches every encoder-decoder attention and both kernels agree",
          "[models][transformer][encoder_decoder]") {
  // Padded source and target, RoPE; logits and every parameter gradient of the fused model
  // against the materialised one (same seed, same parameters).
  std::vector<std::unique_ptr<EncoderDecoderModel>> models;
  std::vector<Tensor3> logits;
  Rng rng(43);
  const IndexTensor2 src = make_ids(3, 6, rng), tgt = make_ids(3, 5, rng);
  const PaddingMask src_pad = padding(3, 6, {6, 4, 2}), tgt_pad = padding(3, 5, {5, 5, 3});
  Tensor3 dlogits({3, 5, 7});
  rng.fill_normal(dlogits, 0.0f, 1.0f);
  for (const std::string kernel : {"materialised", "fused"}) {
    ModelConfig c = tiny("rope");
    c.attention_kernel = kernel;
    models.push_back(build(c, 44));
    EncoderDecoderModel& m = *models.back();
    std::vector<MultiheadAttention*> attns;
    for (auto& l : m.encoder_layers) attns.push_back(&l->self_attn);
    for (auto& l : m.decoder_layers) {
      attns.push_back(&l->self_attn);
      attns.push_back(l->multihead_attn.get());
    }
    m.set_padding(&src_pad, &tgt_pad);
    logits.push_back(m.forward(src, tgt));
    m.zero_grad();
    m.backward(dlogits);
    for (MultiheadAttention* a : attns) {
      CHECK(a->kernel() == parse_attention_kernel(kernel));
      CHECK(a->last_forward_fused() == (kernel == "fused"));
    }
  }
  require_close("fused vs materialised logits", logits[1], xt::cast<double>(logits[0]), 1e-5, 1e-6);
  const auto pm = models[0]->named_parameters(), pf = models[1]->named_parameters();
  REQUIRE(pm.size() == pf.size());
  for (std::size_t i = 0; i < pm.size(); ++i)
    require_close("grad " + pm[i].key, pf[i].param->grad, xt::cast<double>(pm[i].param->grad), 1e-4, 1e-5);
}

TEST_CASE("Encoder-decoder gradient norms vanish where no gradient can flow",
          "[models][transformer][encoder_decoder]") {
  ModelConfig c = tiny("sinusoidal");
  auto m = build(c, 51);
  Rng rng(52);
  const std::size_t S = 5, T = 4, L = 2, t_loss = 1;
  const IndexTensor2 src = make_ids(2, S, rng), tgt = make_ids(2, T, rng);
  const PaddingMask src_pad = padding(2, S, {5, 3});
  m->set_padding(&src_pad, nullptr);
  const Tensor3 y = m->forward(src, tgt);
  Tensor3 dy = xt::zeros<float>(y.shape());
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t o = 0; o < 7; ++o) dy(b, t_loss, o) = rng.normal();
  m->backward(dy);
  const Tensor2& g = m->step_grad_norms();  // [2L, S + T]
  const Tensor1& u = m->input_grad_norms();  // [S + T]
  REQUIRE(g.shape()[0] == 2 * L);
  REQUIRE(g.shape()[1] == S + T);
  for (std::size_t l = 0; l < L; ++l) {
    for (std::size_t s = 0; s < S; ++s) CHECK(g(l, s) > 0.0f);  // batch row 0 is unpadded
    for (std::size_t t = 0; t < T; ++t) CHECK(g(l, S + t) == 0.0f);
    for (std::size_t s = 0; s < S; ++s) CHECK(g(L + l, s) == 0.0f);
    for (std::size_t t = 0; t < T; ++t) {
      INFO("decoder layer " << l << " t " << t);
      // The last layer's output at t feeds only the logits at t; earlier layers' outputs reach
      // t_loss from every t <= t_loss (causal: later positions never do).
      const bool reaches = l + 1 == L ? t == t_loss : t <= t_loss;
      if (reaches) CHECK(g(L + l, S + t) > 0.0f);
      else CHECK(g(L + l, S + t) == 0.0f);
    }
  }
  for (std::size_t s = 0; s < S; ++s) CHECK(u(s) > 0.0f);
  for (std::size_t t = 0; t < T; ++t) CHECK((u(S + t) > 0.0f) == (t <= t_loss));
  // The padded source positions of sequence 1 get exactly zero gradient: with only that
  // sequence in the batch the source columns 3, 4 are zero.
  const IndexTensor2 src1 = xt::view(src, xt::range(1, 2), xt::all());
  const IndexTensor2 tgt1 = xt::view(tgt, xt::range(1, 2), xt::all());
  const PaddingMask pad1 = padding(1, S, {3});
  m->set_padding(&pad1, nullptr);
  const Tensor3 y1 = m->forward(src1, tgt1);
  m->backward(xt::ones<float>(y1.shape()));
  for (std::size_t l = 0; l < L; ++l) {
    CHECK(m->step_grad_norms()(l, 2) > 0.0f);
    CHECK(m->step_grad_norms()(l, 3) == 0.0f);
    CHECK(m->step_grad_norms()(l, 4) == 0.0f);
  }
}

TEST_CASE("Greedy decoding equals the argmax of a teacher-forced forward on its own output",
          "[models][transformer][encoder_decoder]") {
  for (const std::string pe : {"sinusoidal", "learned", "rope", "alibi"}) {
    INFO(pe);
    ModelConfig c = tiny(pe);
    c.dropout = 0.2f;  // greedy_decode must run in eval mode and restore train mode
    c.norm_placement = pe == "rope" ? "pre" : "post";
    auto m = build(c, 61);
    Rng rng(62);
    const IndexTensor2 src = make_ids(3, 5, rng);
    const PaddingMask src_pad = padding(3, 5, {5, 2, 4});
    m->set_padding(&src_pad, nullptr);
    constexpr std::size_t n = 6;
    constexpr std::int32_t bos = 1;
    REQUIRE(m->training());
    const IndexTensor2 out = m->greedy_decode(src, bos, n);
    CHECK(m->training());
    REQUIRE(out.shape()[0] == 3);
    REQUIRE(out.shape()[1] == n);
    CHECK_THROWS_AS(m->backward(Tensor3(xt::zeros<float>(std::array<std::size_t, 3>{3, n, 7}))),
                    std::logic_error);
    IndexTensor2 tgt_in({3, n});
    for (std::size_t b = 0; b < 3; ++b) {
      tgt_in(b, 0) = bos;
      for (std::size_t t = 1; t < n; ++t) tgt_in(b, t) = out(b, t - 1);
    }
    m->eval();
    const Tensor3 logits = m->forward(src, tgt_in);
    std::size_t distinct = 0;
    for (std::size_t b = 0; b < 3; ++b)
      for (std::size_t t = 0; t < n; ++t) {
        const float* row = logits.data() + (b * n + t) * 7;
        const auto arg = std::max_element(row, row + 7) - row;
        INFO("b " << b << " t " << t);
        CHECK(out(b, t) == arg);
        distinct += t > 0 && out(b, t) != out(b, t - 1);
      }
    CHECK(distinct > 0);  // not a constant output (the comparison is informative)
    // Train mode (dropout on) gives other logits: the eval switch inside greedy_decode matters.
    m->train();
    const Tensor3 train_logits = m->forward(src, tgt_in);
    CHECK(max_abs_diff(logits, train_logits, 0, n) > 1e-3);
    // max_len = 0: nothing generated.
    CHECK(m->greedy_decode(src, bos, 0).shape()[1] == 0);
  }
}

TEST_CASE("A tiny encoder-decoder learns to reverse a sequence",
          "[models][transformer][encoder_decoder]") {
  // Tokens 2..7, bos 1; target = source reversed. Chance accuracy 1/6.
  constexpr std::size_t V = 8, n = 4, B = 32, steps = 300;
  constexpr std::int32_t bos = 1;
  ModelConfig c;
  c.model = "transformer_encoder_decoder";
  c.vocab_size = V;
  c.embedding_dim = c.hidden_size = 16;
  c.num_layers = 1;
  c.n_heads = 2;
  c.d_ff = 32;
  c.output_size = V;
  c.norm_placement = "pre";
  c.positional_encoding = "sinusoidal";
  auto m = build(c, 71);
  Rng rng(72);
  auto sample = [&](std::size_t batch, IndexTensor2& src, IndexTensor2& tgt_in, IndexTensor1& tgt_out) {
    src = IndexTensor2({batch, n});
    tgt_in = IndexTensor2({batch, n});
    tgt_out = xt::zeros<std::int32_t>({batch * n});
    for (std::size_t b = 0; b < batch; ++b) {
      for (std::size_t t = 0; t < n; ++t) src(b, t) = 2 + static_cast<std::int32_t>(rng.uniform_int(V - 2));
      for (std::size_t t = 0; t < n; ++t) tgt_out(b * n + t) = src(b, n - 1 - t);
      tgt_in(b, 0) = bos;
      for (std::size_t t = 1; t < n; ++t) tgt_in(b, t) = tgt_out(b * n + t - 1);
    }
  };
  Adam opt(m->parameters(), 3e-3f);
  CrossEntropyLoss ce;
  IndexTensor2 src, tgt_in;
  IndexTensor1 tgt_out;
  float first_loss = 0.0f, loss = 0.0f;
  for (std::size_t step = 0; step < steps; ++step) {
    sample(B, src, tgt_in, tgt_out);
    const Tensor3 logits = m->forward(src, tgt_in);
    const Tensor2 flat = xt::reshape_view(logits, {B * n, V});
    loss = ce.forward(flat, tgt_out);
    if (step == 0) first_loss = loss;
    opt.zero_grad();
    Tensor2 d = ce.backward();
    const Tensor3 dlogits = xt::reshape_view(d, {B, n, V});
    m->backward(dlogits);
    opt.step();
  }
  INFO("loss " << first_loss << " -> " << loss);
  CHECK(loss < 0.5f * first_loss);
  sample(64, src, tgt_in, tgt_out);
  const IndexTensor2 out = m->greedy_decode(src, bos, n);
  std::size_t correct = 0;
  for (std::size_t b = 0; b < 64; ++b)
    for (std::size_t t = 0; t < n; ++t) correct += out(b, t) == tgt_out(b * n + t);
  const double acc = double(correct) / (64 * n);
  INFO("greedy token accuracy " << acc << " (chance 1/6)");
  CHECK(acc > 0.8);
}

TEST_CASE("Bad encoder-decoder configurations and calls throw typed errors",
          "[models][transformer][encoder_decoder]") {
  auto bad = [](const std::string& key, auto edit) {
    ModelConfig c = tiny();
    edit(c);
    INFO("expected key " << key);
    CHECK(config_error_key(c) == key);
    CHECK_THROWS_AS(count_parameters(c), ConfigError);
    Rng rng(1);
    CHECK_THROWS_AS(make_model(c, rng), ConfigError);
  };
  CHECK(config_error_key(tiny()) == "<no error>");
  bad("input", [](ModelConfig& c) {
    c.input = "linear";
    c.input_size = 8;
    c.embedding_dim = 0;
  });
  bad("n_heads", [](ModelConfig& c) { c.n_heads = 3; });
  bad("n_heads", [](ModelConfig& c) {  // head size 1 is odd for RoPE
    c.n_heads = 8;
    c.positional_encoding = "rope";
  });
  bad("embedding_dim", [](ModelConfig& c) { c.embedding_dim = 6; });
  bad("d_ff", [](ModelConfig& c) { c.d_ff = 0; });
  bad("head", [](ModelConfig& c) { c.head = "last_position"; });
  bad("norm", [](ModelConfig& c) { c.norm = "group_norm"; });
  bad("positional_encoding", [](ModelConfig& c) { c.positional_encoding = "xpos"; });
  bad("max_len", [](ModelConfig& c) {
    c.positional_encoding = "learned";
    c.max_len = 0;
  });
  bad("attention_kernel", [](ModelConfig& c) { c.attention_kernel = "flash"; });
  try {
    ModelConfig c = tiny();
    c.input = "linear";
    c.input_size = 8;
    c.validate();
    FAIL("linear input must throw");
  } catch (const ConfigError& e) {
    CHECK(e.value() == "'linear'");
    CHECK(std::string(e.what()).find("transformer_encoder_decoder") != std::string::npos);
  }
  // The other transformer class refuses this family.
  {
    Rng rng(1);
    CHECK_THROWS_AS(TransformerModel(tiny(), rng), std::invalid_argument);
  }

  ModelConfig c = tiny("learned");
  c.max_len = 5;
  auto m = build(c, 2);
  Rng rng(3);
  const IndexTensor2 src = make_ids(2, 5, rng), tgt = make_ids(2, 4, rng);
  CHECK_THROWS_AS(m->forward(src), std::logic_error);
  CHECK_THROWS_AS(m->forward(Tensor3(xt::zeros<float>({2, 4, 8}))), std::logic_error);
  CHECK_THROWS_AS(m->input_grad(), std::logic_error);
  CHECK_THROWS_AS(m->step_grad_norms(), std::logic_error);
  CHECK_THROWS_AS(m->backward(xt::zeros<float>({2, 4, 7})), std::logic_error);
  CHECK_THROWS_AS(m->forward(src, make_ids(3, 4, rng)), ShapeError);  // batch mismatch
  CHECK_THROWS_AS(m->forward(src, IndexTensor2({2, 0})), ShapeError);
  try {
    m->forward(make_ids(2, 6, rng), tgt);
    FAIL("no exception for S = 6 > max_len = 5");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).find("max_len = 5") != std::string::npos);
  }
  CHECK_THROWS_AS(m->forward(src, make_ids(2, 6, rng)), ShapeError);
  CHECK_THROWS_AS(m->greedy_decode(src, 1, 6), ShapeError);
  CHECK_NOTHROW(m->greedy_decode(src, 1, 5));
  CHECK_THROWS_AS(m->greedy_decode(src, 7, 3), std::out_of_range);  // bos outside [0, V)
  IndexTensor2 bad_src = src;
  bad_src(1, 2) = 7;  // V = 7
  CHECK_THROWS_AS(m->forward(bad_src, tgt), std::out_of_range);
  const PaddingMask wrong = xt::zeros<std::uint8_t>({2, 4});
  m->set_padding(&wrong, nullptr);
  CHECK_THROWS_AS(m->forward(src, tgt), ShapeError);
  m->set_padding(nullptr, &wrong);
  CHECK_NOTHROW(m->forward(src, tgt));
  m->set_padding(nullptr, nullptr);
  const Tensor3 y = m->forward(src, tgt);
  CHECK_THROWS_AS(m->backward(xt::zeros<float>({2, 3, 7})), ShapeError);
  CHECK_NOTHROW(m->backward(xt::zeros<float>(y.shape())));
  // greedy_decode needs output_size <= vocab_size.
  ModelConfig wide = tiny();
  wide.output_size = 9;
  auto mw = build(wide, 4);
  try {
    mw->greedy_decode(src, 1, 2);
    FAIL("output_size > vocab_size must throw");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "output_size");
  }
  CHECK(mw->forward(src, tgt).shape()[2] == 9);  // teacher forcing is fine
}

// models/model_registry.hpp and models/positional_registry.hpp (and the norm registry they use):
//   - the built-in names, in their documented order, are what model_names(),
//     positional_encoding_names() and norm_names() list, and what ModelConfig::validate's
//     "allowed one of ..." messages list;
//   - a family and two encodings registered by this test (SEQLAB_REGISTER, as in a user's
//     executable) are accepted by validate, built by make_model, counted by count_parameters
//     (the encoder-decoder counts one encoding per stack), stepped by hidden_size_for_budget
//     (lcm of n_heads and the entry's d_model_multiple), and hooked into self-attention only;
//   - the family flag drives is_recurrent() / is_transformer().
#include <catch2/catch.hpp>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "seqlab/core/registry.hpp"
#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/model_registry.hpp"
#include "seqlab/models/positional_registry.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/nn/positional.hpp"

using namespace seqlab;

namespace {

// A family registered by the test: input layer -> identity body -> head (a "bag of embeddings"
// per position). Its own check: hidden_size must equal the body input width.
class IdentityBodyModel : public InputBodyHeadModel {
 public:
  IdentityBodyModel(const ModelConfig& cfg, Rng& rng) : InputBodyHeadModel(cfg, rng) { build_head(rng); }
  std::size_t receptive_field() const override { return 1; }
  std::size_t sequential_steps(std::size_t) const override { return 0; }

 protected:
  Tensor3 body_forward(const Tensor3& u) override { return u; }
  Tensor3 body_backward(const Tensor3& dh, Tensor2& step_norms) override {
    step_norms = xt::zeros<float>({std::size_t{0}, dh.shape()[1]});
    return dh;
  }
  void collect_body_parameters(const std::string&, std::vector<NamedParameter>&) override {}
  void set_body_training(bool) override {}
  std::string describe_body() const override { return "identity"; }
};

SEQLAB_REGISTER(model_registry(), "identity_body",
                ModelEntry{ModelFamily::other, "identity body (test)",
                           [](const ModelConfig& c, Rng& rng) -> std::unique_ptr<SequenceModel> {
                             return std::make_unique<IdentityBodyModel>(c, rng);
                           },
                           [](const ModelConfig&) { return std::size_t{0}; },
                           [](const ModelConfig& c) {
                             if (c.hidden_size != c.body_input_size())
                               throw ConfigError("hidden_size", std::to_string(c.hidden_size),
                                                 "equal to the body input width for identity_body");
                           },
                           {},    // validate_input: none
                           {}});  // validate_head: none

// An attention-side encoding without a new class: RoPE with another base (as LLaMA 3's 500000).
SEQLAB_REGISTER(positional_encoding_registry(), "rope_base500k",
                PositionalEncodingEntry{
                    "RoPE with base 500000 (test)",
                    [](const ModelConfig& c, Rng&) -> std::unique_ptr<PositionalEncoding> {
                      RopeConfig rc;
                      rc.head_dim = c.hidden_size / c.n_heads;
                      rc.base = 500000.0;
                      return std::make_unique<RotaryPositionalEncoding>(rc);
                    },
                    {},
                    {},
                    [](const ModelConfig& c) { return 2 * c.n_heads; }});

// An input-side encoding with parameters and a width constraint: a learned table of 3 rows
// (positions beyond 3 rejected by the models) on a d_model that is a multiple of 3.
SEQLAB_REGISTER(positional_encoding_registry(), "three_rows",
                PositionalEncodingEntry{
                    "learned table of 3 rows, d_model a multiple of 3 (test)",
                    [](const ModelConfig& c, Rng& rng) -> std::unique_ptr<PositionalEncoding> {
                      return std::make_unique<LearnedPositionalEmbedding>(3, c.hidden_size, rng);
                    },
                    [](const ModelConfig& c) { return 3 * c.hidden_size; },
                    [](const ModelConfig& c) {
                      if (c.hidden_size % 3 != 0)
                        throw ConfigError("hidden_size", std::to_string(c.hidden_size),
                                          "a multiple of 3 with positional_encoding = three_rows");
                    },
                    [](const ModelConfig&) { return std::size_t{3}; }});

ModelConfig transformer(const std::string& model, const std::string& pe) {
  ModelConfig c;
  c.model = model;
  c.vocab_size = 7;
  c.embedding_dim = c.hidden_size = 12;
  c.num_layers = 2;
  c.n_heads = 2;
  c.d_ff = 10;
  c.output_size = 5;
  c.positional_encoding = pe;
  return c;
}

std::string error_of(const ModelConfig& c) {
  try {
    c.validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("registries list the built-ins in their documented order", "[models][registry]") {
  const std::vector<std::string> models{"rnn", "lstm", "gru", "tcn", "transformer_encoder",
                                        "transformer_decoder", "transformer_encoder_decoder"};
  REQUIRE(model_names().size() >= models.size());
  CHECK(std::vector<std::string>(model_names().begin(), model_names().begin() + 7) == models);
  const std::vector<std::string> encodings{"sinusoidal", "learned", "rope", "rope_pi",
                                           "rope_ntk",   "alibi",   "none", "t5_bias"};
  REQUIRE(positional_encoding_names().size() >= encodings.size());
  CHECK(std::vector<std::string>(positional_encoding_names().begin(),
                                 positional_encoding_names().begin() + 8) == encodings);
  CHECK(norm_names() == std::vector<std::string>{"layer_norm", "batch_norm", "masked_batch_norm",
                                                 "rms_norm", "none", "power_norm"});
  // The test's registrations come after the built-ins, in registration order.
  CHECK(model_names().back() == "identity_body");
  CHECK(positional_encoding_names().back() == "three_rows");
  for (const auto& name : positional_encoding_names())
    CHECK_FALSE(positional_encoding_registry().get(name).description.empty());
  for (const auto& name : model_names()) CHECK_FALSE(model_registry().get(name).description.empty());
}

TEST_CASE("unknown names are rejected listing what is registered", "[models][registry][errors]") {
  CHECK(error_of(transformer("transformer_decoder", "xpos")) ==
        "positional_encoding = 'xpos': allowed one of " + positional_encoding_registry().names_string());
  CHECK_THAT(error_of(transformer("transformer_decoder", "xpos")),
             Catch::Contains("alibi, none, t5_bias, rope_base500k, three_rows"));
  ModelConfig bad_norm = transformer("transformer_encoder", "none");
  bad_norm.norm = "group_norm";
  CHECK(error_of(bad_norm) ==
        "norm = 'group_norm': allowed one of layer_norm, batch_norm, masked_batch_norm, rms_norm, none, "
        "power_norm");
  ModelConfig bad_model = transformer("mamba", "none");
  CHECK_THAT(error_of(bad_model), Catch::StartsWith("model = 'mamba': allowed one of rnn, lstm"));
  CHECK_THAT(error_of(bad_model), Catch::EndsWith("transformer_encoder_decoder, identity_body"));
  Rng rng(1);
  CHECK_THROWS_AS(make_model(bad_model, rng), ConfigError);
  CHECK_THROWS_AS(make_positional_encoding(transformer("transformer_decoder", "xpos"), rng),
                  UnknownNameError);
  CHECK_THROWS_WITH(make_norm("group_norm", 4), Catch::StartsWith("norm = 'group_norm': allowed"));
}

TEST_CASE("a registered family is validated built and counted through its entry", "[models][registry]") {
  ModelConfig c;
  c.model = "identity_body";
  c.vocab_size = 6;
  c.embedding_dim = c.hidden_size = 4;
  c.output_size = 3;
  CHECK(error_of(c) == "<no error>");
  CHECK_FALSE(c.is_recurrent());
  CHECK_FALSE(c.is_transformer());
  Rng rng(4);
  const auto m = make_model(c, rng);
  REQUIRE(dynamic_cast<IdentityBodyModel*>(m.get()) != nullptr);
  CHECK(m->num_parameters() == count_parameters(c));
  CHECK(count_parameters(c) == 6 * 4 + 4 * 3 + 3);  // embedding + head, no body
  CHECK(m->forward(IndexTensor2(xt::zeros<std::int32_t>({2, 5}))).shape()[2] == 3);
  ModelConfig wrong = c;
  wrong.hidden_size = 5;  // the entry's own check
  CHECK(error_of(wrong) == "hidden_size = 5: allowed equal to the body input width for identity_body");
  ModelConfig bad_dropout = wrong;
  bad_dropout.embedding_dim = 0;  // common input fields are checked before the family's
  CHECK_THAT(error_of(bad_dropout), Catch::StartsWith("embedding_dim = 0"));
  // Family flags of the built-ins.
  for (const std::string f : {"rnn", "lstm", "gru"}) {
    c.model = f;
    CHECK(c.is_recurrent());
    CHECK_FALSE(c.is_transformer());
  }
  for (const std::string f : {"transformer_encoder", "transformer_decoder", "transformer_encoder_decoder"}) {
    c.model = f;
    CHECK(c.is_transformer());
  }
  c.model = "tcn";
  CHECK_FALSE(c.is_recurrent());
  CHECK_FALSE(c.is_transformer());
  c.model = "unknown";
  CHECK_FALSE(c.is_recurrent());
}

TEST_CASE("a registered attention-side encoding hooks every self-attention and nothing else", "[models][registry]") {
  Rng rng(5);
  const ModelConfig dec = transformer("transformer_decoder", "rope_base500k");
  CHECK(error_of(dec) == "<no error>");
  const auto m = make_model(dec, rng);
  auto* tm = dynamic_cast<TransformerModel*>(m.get());
  REQUIRE(tm != nullptr);
  auto* rope = dynamic_cast<RotaryPositionalEncoding*>(tm->positional.get());
  REQUIRE(rope != nullptr);
  CHECK(rope->rotary().config().base == 500000.0);
  for (const auto& layer : tm->layers) CHECK(layer->self_attn.rope() == &rope->rotary());
  CHECK(m->num_parameters() == count_parameters(dec));

  const ModelConfig ed = transformer("transformer_encoder_decoder", "rope_base500k");
  const auto m2 = make_model(ed, rng);
  auto* edm = dynamic_cast<EncoderDecoderModel*>(m2.get());
  REQUIRE(edm != nullptr);
  auto* src = dynamic_cast<RotaryPositionalEncoding*>(edm->src_positional.get());
  auto* tgt = dynamic_cast<RotaryPositionalEncoding*>(edm->tgt_positional.get());
  REQUIRE(src != nullptr);
  REQUIRE(tgt != nullptr);
  CHECK(src != tgt);  // one per stack
  for (const auto& layer : edm->encoder_layers) CHECK(layer->self_attn.rope() == &src->rotary());
  for (const auto& layer : edm->decoder_layers) {
    CHECK(layer->self_attn.rope() == &tgt->rotary());
    CHECK(layer->multihead_attn->rope() == nullptr);  // never on cross-attention
  }
  // d_model steps by lcm(n_heads, 2·n_heads) = 4 for budget matching.
  const ModelConfig sized = hidden_size_for_budget(dec, 5000, 2.0);
  CHECK(sized.hidden_size % 4 == 0);
  CHECK(count_parameters(sized) <= 5000);
  ModelConfig bigger = sized;
  bigger.hidden_size = bigger.embedding_dim = sized.hidden_size + 4;
  bigger.d_ff = 2 * bigger.hidden_size;
  CHECK(count_parameters(bigger) > 5000);
}

TEST_CASE("a registered input-side encoding with parameters is counted per stack and limits lengths", "[models][registry]") {
  ModelConfig dec = transformer("transformer_decoder", "three_rows");
  CHECK(error_of(dec) == "<no error>");
  ModelConfig none = dec;
  none.positional_encoding = "none";
  CHECK(count_parameters(dec) == count_parameters(none) + 3 * 12);
  Rng rng(6);
  const auto m = make_model(dec, rng);
  CHECK(m->num_parameters() == count_parameters(dec));
  const auto keys = m->named_parameters();
  CHECK(keys[1].key == "transformer_decoder.pos_embedding.weight");
  CHECK(m->forward(IndexTensor2(xt::zeros<std::int32_t>({1, 3}))).shape()[1] == 3);
  CHECK_THROWS_AS(m->forward(IndexTensor2(xt::zeros<std::int32_t>({1, 4}))), ShapeError);

  ModelConfig ed = transformer("transformer_encoder_decoder", "three_rows");
  ModelConfig ed_none = ed;
  ed_none.positional_encoding = "none";
  CHECK(count_parameters(ed) == count_parameters(ed_none) + 2 * 3 * 12);  // source and target
  const auto m2 = make_model(ed, rng);
  CHECK(m2->num_parameters() == count_parameters(ed));

  // The entry's validate and d_model_multiple: d_model a multiple of lcm(n_heads = 2, 3) = 6.
  ModelConfig odd = dec;
  odd.hidden_size = odd.embedding_dim = 8;
  CHECK(error_of(odd) == "hidden_size = 8: allowed a multiple of 3 with positional_encoding = three_rows");
  const ModelConfig sized = hidden_size_for_budget(dec, 4000, 2.0);
  CHECK(sized.hidden_size % 6 == 0);
  CHECK(error_of(sized) == "<no error>");
}

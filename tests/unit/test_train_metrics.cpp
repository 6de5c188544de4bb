// train/metrics.hpp: argmax with torch.argmax's tie rule, scored-position sums, perplexity and bits,
// and chunked evaluation (the same sums whatever the chunk size, padding passed per chunk, an
// encoder-decoder fed its source and decoder input).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/metrics.hpp"

using namespace seqlab;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("argmax_row returns the first maximum and ignores NaN", "[train][metrics]") {
  Tensor2 s = {{0.f, 2.f, 2.f, 1.f}, {3.f, 3.f, 3.f, 3.f}, {NAN, 1.f, 5.f, NAN}, {-1.f, NAN, -2.f, -1.f}};
  CHECK(argmax_row(s, 0) == 1);
  CHECK(argmax_row(s, 1) == 0);
  CHECK(argmax_row(s, 2) == 2);
  CHECK(argmax_row(s, 3) == 0);
  CHECK_THROWS_AS(argmax_row(s, 4), std::out_of_range);
}

TEST_CASE("score sums give mean loss accuracy perplexity and bits", "[train][metrics]") {
  ScoreSums s;
  CHECK(std::isnan(s.mean_loss()));
  CHECK(std::isnan(s.accuracy()));
  s.add(std::log(2.0), true);
  s.add(std::log(8.0), false);
  CHECK_THAT(s.mean_loss(), WithinRel(2.0 * std::log(2.0), 1e-12));
  CHECK(s.accuracy() == 0.5);
  CHECK_THAT(s.perplexity(), WithinRel(4.0, 1e-12));
  CHECK_THAT(s.bits_per_token(), WithinRel(2.0, 1e-12));
  ScoreSums t;
  t.add(1.0, true);
  s.add(t);
  CHECK(s.n == 3);
  CHECK(s.correct == 2);
}

TEST_CASE("score_classes skips ignored rows and scores the rest with the loss's row losses", "[train][metrics]") {
  const Tensor2 logits = {{2.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {0.f, 0.f, 0.f}, {1.f, 1.f, 3.f}};
  const IndexTensor1 y = {0, 2, -100, 2};
  CrossEntropyLoss ce;
  ScoreSums s;
  std::vector<std::size_t> rows;
  score_classes(ce, logits, y, s, [&](std::size_t r, double loss, bool ok) {
    rows.push_back(r);
    CHECK(loss == double(ce.row_losses()(r)));
    CHECK(ok == (r != 1));
  });
  CHECK(rows == std::vector<std::size_t>{0, 1, 3});
  CHECK(s.n == 3);
  CHECK(s.correct == 2);
  const double l0 = std::log(std::exp(2.0) + 2.0) - 2.0, l1 = std::log(std::exp(1.0) + 2.0),
               l3 = std::log(2.0 * std::exp(1.0) + std::exp(3.0)) - 3.0;
  CHECK_THAT(s.mean_loss(), WithinRel((l0 + l1 + l3) / 3.0, 1e-6));
}

TEST_CASE("score_classes counts no row with a non-finite loss as correct", "[train][metrics]") {
  // A diverged model's NaN row would argmax to 0 (argmax_row), and an infinite logit at the
  // target would win it: neither is a prediction.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor2 logits = {{NAN, NAN, NAN}, {inf, 0.f, 0.f}, {NAN, 1.f, 0.f}, {3.f, 0.f, -1.f}};
  const IndexTensor1 y = {0, 0, 1, 0};
  CrossEntropyLoss ce;
  ScoreSums s;
  std::vector<bool> ok;
  score_classes(ce, logits, y, s, [&](std::size_t, double loss, bool correct) {
    ok.push_back(correct);
    CHECK(std::isfinite(loss) == correct);
  });
  CHECK(argmax_row(logits, 0) == 0);
  CHECK(argmax_row(logits, 1) == 0);
  CHECK(ok == std::vector<bool>{false, false, false, true});
  CHECK(s.n == 4);
  CHECK(s.correct == 1);
  CHECK(std::isnan(s.mean_loss()));
}

namespace {

ModelConfig tiny_decoder(std::size_t V) {
  ModelConfig c;
  c.model = "transformer_decoder";
  c.vocab_size = V;
  c.output_size = V;
  c.hidden_size = c.embedding_dim = 8;
  c.n_heads = 2;
  c.num_layers = 1;
  c.d_ff = 16;
  c.positional_encoding = "sinusoidal";
  return c;
}

}  // namespace

TEST_CASE("evaluate_chunked gives the same sums for every chunk size", "[train][metrics]") {
  Rng rng(7);
  const auto model = make_model(tiny_decoder(6), rng);
  model->eval();
  const std::size_t B = 9, T = 5;
  IndexTensor2 x = IndexTensor2::from_shape({B, T}), y = IndexTensor2::from_shape({B, T});
  for (std::size_t i = 0; i < x.size(); ++i) {
    x.data()[i] = static_cast<std::int32_t>(rng.uniform_int(6));
    y.data()[i] = i % 3 == 0 ? -100 : static_cast<std::int32_t>(rng.uniform_int(6));
  }
  EvalSet set;
  set.tokens = &x;
  set.targets = &y;
  std::vector<std::pair<std::size_t, std::size_t>> seen;
  const ScoreSums whole = evaluate_chunked(*model, set, B, [&](std::size_t b, std::size_t t, double, bool) {
    seen.push_back({b, t});
  });
  CHECK(whole.n == 30);  // 45 positions, every third ignored
  REQUIRE(seen.size() == 30);
  CHECK(seen.front() == std::make_pair<std::size_t, std::size_t>(0, 1));
  CHECK(seen.back() == std::make_pair<std::size_t, std::size_t>(8, 4));
  for (std::size_t chunk : {1u, 2u, 4u, 100u}) {
    const ScoreSums s = evaluate_chunked(*model, set, chunk);
    CHECK(s.n == whole.n);
    CHECK(s.correct == whole.correct);
    CHECK_THAT(s.loss_sum, WithinRel(whole.loss_sum, 1e-5));
  }
  // Two sets into one accumulator pool as one pass over their rows.
  ScoreSums pooled;
  evaluate_chunked(*model, set, 4, pooled);
  evaluate_chunked(*model, set, 4, pooled);
  CHECK(pooled.n == 2 * whole.n);
  CHECK_THROWS_AS(evaluate_chunked(*model, set, 0), std::invalid_argument);
  EvalSet none;
  none.tokens = &x;
  CHECK_THROWS_AS(evaluate_chunked(*model, none, 4), std::invalid_argument);
}

TEST_CASE("evaluate_chunked passes each chunk's padding to a Transformer and clears it", "[train][metrics]") {
  Rng rng(3);
  const auto model = make_model(tiny_decoder(5), rng);
  auto* tm = dynamic_cast<TransformerModel*>(model.get());
  REQUIRE(tm != nullptr);
  model->eval();
  const std::size_t B = 4, T = 6;
  IndexTensor2 x = IndexTensor2::from_shape({B, T}), y = IndexTensor2::from_shape({B, T});
  PaddingMask pad = PaddingMask::from_shape({B, T});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t) {
      x(b, t) = static_cast<std::int32_t>((b + t) % 5);
      const bool padded = t >= 3 + b % 2;
      pad(b, t) = padded ? 1 : 0;
      y(b, t) = padded ? -100 : static_cast<std::int32_t>((b * t) % 5);
    }
  EvalSet set;
  set.tokens = &x;
  set.targets = &y;
  set.padding = &pad;
  const ScoreSums chunked = evaluate_chunked(*model, set, 1);
  // Reference: one forward of the whole batch with the whole mask.
  tm->set_padding(&pad);
  const Tensor3 out = model->forward(x);
  tm->set_padding(nullptr);
  CrossEntropyLoss ce;
  ScoreSums ref;
  score_classes(ce, rows_of(out), ids_of(y), ref);
  CHECK(chunked.n == ref.n);
  CHECK(chunked.correct == ref.correct);
  CHECK_THAT(chunked.loss_sum, WithinRel(ref.loss_sum, 1e-5));
}

TEST_CASE("evaluate_chunked scores regression values by squared error", "[train][metrics]") {
  ModelConfig c;
  c.model = "lstm";
  c.input = "linear";
  c.input_size = 2;
  c.embedding_dim = 3;
  c.hidden_size = 4;
  c.output_size = 1;
  c.head = "last_position";
  Rng rng(5);
  const auto model = make_model(c, rng);
  model->eval();
  Tensor3 x = Tensor3::from_shape({3, 4, 2});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(rng.uniform());
  Tensor3 v = {{{0.5f}}, {{1.0f}}, {{-0.25f}}};
  EvalSet set;
  set.features = &x;
  set.values = &v;
  const ScoreSums s = evaluate_chunked(*model, set, 2);
  const Tensor3 pred = model->forward(x);
  double se = 0;
  for (std::size_t b = 0; b < 3; ++b) se += std::pow(double(pred(b, 0, 0)) - double(v(b, 0, 0)), 2);
  CHECK(s.n == 3);
  CHECK(s.correct == 0);
  CHECK_THAT(s.loss_sum, WithinRel(se, 1e-6));
}

TEST_CASE("task batches slice by rows and view as evaluation sets", "[tasks][metrics]") {
  const auto task = make_task("copy_memory", TaskParams({{"T", "4"}, {"n_memorize", "2"}}));
  Rng rng(1);
  const TaskBatch b = task->sample(5, rng);
  REQUIRE(b.distances.shape() == b.targets.shape());
  const TaskBatch part = slice_rows(b, 1, 3);
  CHECK(batch_rows(part) == 3);
  CHECK(part.tokens(0, 0) == b.tokens(1, 0));
  CHECK(part.distances(2, 7) == b.distances(3, 7));
  CHECK_THROWS_AS(slice_rows(b, 4, 2), std::out_of_range);
  const EvalSet e = eval_set(b);
  CHECK(e.tokens == &b.tokens);
  CHECK(e.targets == &b.targets);
  CHECK(e.features == nullptr);
  CHECK(e.padding == nullptr);
  // copy memory: recall positions (T + n_memorize = 6 onwards) depend on the token 6 back.
  for (std::size_t t = 0; t < b.distances.shape()[1]; ++t) CHECK(b.distances(0, t) == (t >= 6 ? 6 : 0));
}

TEST_CASE("evaluate_chunked feeds an encoder-decoder its source and decoder input", "[train][metrics]") {
  ModelConfig c = tiny_decoder(6);
  c.model = "transformer_encoder_decoder";
  Rng rng(4);
  const auto model = make_model(c, rng);
  auto* ed = dynamic_cast<EncoderDecoderModel*>(model.get());
  REQUIRE(ed != nullptr);
  model->eval();
  const std::size_t B = 5, S = 4, T = 3;
  IndexTensor2 src = IndexTensor2::from_shape({B, S}), dec = IndexTensor2::from_shape({B, T}),
               y = IndexTensor2::from_shape({B, T});
  for (auto& v : src) v = static_cast<std::int32_t>(rng.uniform_int(6));
  for (auto& v : dec) v = static_cast<std::int32_t>(rng.uniform_int(6));
  for (auto& v : y) v = static_cast<std::int32_t>(rng.uniform_int(6));
  y(1, 2) = -100;
  EvalSet set;
  set.tokens = &src;
  set.decoder_tokens = &dec;
  set.targets = &y;
  const Tensor3 out = ed->forward(src, dec);
  CrossEntropyLoss ce;
  ScoreSums ref;
  score_classes(ce, rows_of(out), ids_of(y), ref);
  CHECK(ref.n == B * T - 1);
  for (std::size_t chunk : {1u, 2u, 5u}) {
    const ScoreSums s = evaluate_chunked(*model, set, chunk);
    CHECK(s.n == ref.n);
    CHECK(s.correct == ref.correct);
    CHECK_THAT(s.loss_sum, WithinRel(ref.loss_sum, 1e-5));
  }
  // Source padding reaches the encoder-decoder (and is cleared after).
  PaddingMask pad = PaddingMask::from_shape({B, S});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < S; ++t) pad(b, t) = t >= 2 && b % 2 == 0 ? 1 : 0;
  set.padding = &pad;
  ed->set_padding(&pad, nullptr);
  const Tensor3 padded = ed->forward(src, dec);
  ed->set_padding(nullptr, nullptr);
  ScoreSums ref_pad;
  score_classes(ce, rows_of(padded), ids_of(y), ref_pad);
  const ScoreSums s = evaluate_chunked(*model, set, 2);
  CHECK_THAT(s.loss_sum, WithinRel(ref_pad.loss_sum, 1e-5));
  CHECK(std::abs(ref_pad.loss_sum - ref.loss_sum) > 1e-6);  // the mask changes the result
  CHECK(ed->src_padding() == nullptr);
  // Decoder input needs an encoder-decoder.
  const auto dec_only = make_model(tiny_decoder(6), rng);
  set.padding = nullptr;
  CHECK_THROWS_AS(evaluate_chunked(*dec_only, set, 2), std::invalid_argument);
}

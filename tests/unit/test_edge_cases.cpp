// Numerical edge cases at the model level (experiments/README.md "What seqlab guarantees"):
//   - sequences of length 1 and batch size 1: every family runs forward and backward, and its
//     whole-model gradients match finite differences (tests/support/gradcheck.hpp);
//   - a batch that is all padding: the Transformer's fully masked attention rows are 0 (not NaN),
//     outputs stay finite, a loss whose targets are all ignore_index is 0 with zero gradients, and
//     a training step on it changes no parameter (Adam); masked BatchNorm, whose statistics would
//     have no position, throws std::invalid_argument as torch.nn.BatchNorm1d does;
//   - one sequence of the batch all padding: the other sequences' outputs are those of a batch
//     without it;
//   - a diverging run (huge learning rate) is a result (TrainResult::diverged), not an exception.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include "gradcheck.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/models/encoder_decoder_model.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

using namespace seqlab;

namespace {

constexpr std::size_t kV = 5, kO = 3;

ModelConfig config_for(const std::string& model, const std::string& pe = "sinusoidal",
                       const std::string& norm = "layer_norm") {
  ModelConfig c;
  c.model = model;
  c.vocab_size = kV;
  c.output_size = kO;
  c.num_layers = 2;
  if (c.is_transformer()) {
    c.hidden_size = 4;
    c.embedding_dim = 4;
    c.n_heads = 2;
    c.d_ff = 6;
    c.activation = "gelu";  // smooth, so finite differences need no kink handling
    c.norm = norm;
    c.norm_placement = "pre";
    c.positional_encoding = pe;
    c.max_len = 8;
    c.train_len = 4;
  } else {
    c.hidden_size = 4;
    c.embedding_dim = 3;
    if (model == "tcn") c.kernel_size = 2;
  }
  return c;
}

bool all_finite(const Tensor3& t) {
  for (float v : t)
    if (!std::isfinite(v)) return false;
  return true;
}

Tensor3 run_forward(SequenceModel& m, const IndexTensor2& ids) {
  if (auto* ed = dynamic_cast<EncoderDecoderModel*>(&m)) return ed->forward(ids, ids);
  return m.forward(ids);
}

/// Whole-model finite-difference check of every parameter for ids [B, T] (fake loss Σ w ⊙ y).
void gradcheck_ids(SequenceModel& m, const IndexTensor2& ids) {
  const auto shape = run_forward(m, ids).shape();
  auto forward = [&]() {
    const Tensor3 y = run_forward(m, ids);
    return std::vector<float>(y.begin(), y.end());
  };
  auto backward = [&](const std::vector<float>& w) {
    m.zero_grad();
    run_forward(m, ids);
    Tensor3 dy(shape);
    std::copy(w.begin(), w.end(), dy.begin());
    m.backward(dy);
  };
  std::vector<test::Probe> probes;
  for (auto& np : m.named_parameters())
    probes.push_back({np.key, np.param->value.data(), np.param->grad.data(), np.param->size()});
  const auto res = test::check_gradients(forward, backward, probes);
  INFO(m.describe() << "\nworst: " << res.worst << "\n" << res.report);
  CHECK(res.ok);
  CHECK(res.checked == m.num_parameters());
}

/// One training step's loss and gradients: forward, cross-entropy over [B·T] targets, backward
/// (adding into the parameter grads). Returns the loss.
double ce_step(SequenceModel& m, const IndexTensor2& ids, const IndexTensor1& targets, CrossEntropyLoss& ce) {
  const Tensor3 out = m.forward(ids);
  const float loss = ce.forward(rows_of(out), targets);
  Tensor3 dy(out.shape());
  const Tensor2 g = ce.backward();
  std::copy(g.begin(), g.end(), dy.begin());
  m.backward(dy);
  return static_cast<double>(loss);
}

}  // namespace

TEST_CASE("Batch size 1 and sequence length 1: every family runs and its gradients match finite differences",
          "[edge][models]") {
  struct Case {
    std::string model, pe;
  };
  const std::vector<Case> cases = {{"rnn", ""},
                                   {"lstm", ""},
                                   {"gru", ""},
                                   {"tcn", ""},
                                   {"transformer_encoder", "sinusoidal"},
                                   {"transformer_decoder", "learned"},
                                   {"transformer_decoder", "rope"},
                                   {"transformer_decoder", "alibi"},
                                   {"transformer_decoder", "none"},
                                   {"transformer_encoder_decoder", "sinusoidal"}};
  for (const auto& c : cases) {
    for (const std::size_t T : {std::size_t{1}, std::size_t{3}}) {
      DYNAMIC_SECTION(c.model << " " << c.pe << " B=1 T=" << T) {
        Rng rng(11);
        auto m = make_model(config_for(c.model, c.pe.empty() ? "sinusoidal" : c.pe), rng);
        IndexTensor2 ids({1, T});
        for (auto& id : ids) id = static_cast<std::int32_t>(rng.uniform_int(kV));
        const Tensor3 y = run_forward(*m, ids);
        REQUIRE(y.shape() == std::array<std::size_t, 3>{1, T, kO});
        CHECK(all_finite(y));
        if (c.model == "tcn") {
          // ReLU kinks: the TCN's finite-difference check with kink handling is in
          // test_models_gradcheck.cpp; here only that backward runs and gives finite gradients.
          m->zero_grad();
          m->backward(xt::ones<float>(y.shape()));
          for (auto& np : m->named_parameters())
            for (float g : np.param->grad) CHECK(std::isfinite(g));
        } else {
          gradcheck_ids(*m, ids);
        }
      }
    }
  }
}

TEST_CASE("batch_norm with a single position in training mode throws, as torch.nn.BatchNorm1d does",
          "[edge][models][norm]") {
  Rng rng(3);
  auto m = make_model(config_for("transformer_encoder", "sinusoidal", "batch_norm"), rng);
  IndexTensor2 ids({1, 1});
  ids(0, 0) = 2;
  CHECK_THROWS_AS(m->forward(ids), std::invalid_argument);
  m->eval();  // eval mode uses the running statistics: defined for one position
  CHECK(all_finite(m->forward(ids)));
}

TEST_CASE("An all-padding batch: finite outputs, zero loss and gradients, no parameter change",
          "[edge][models][padding]") {
  for (const std::string model : {"transformer_encoder", "transformer_decoder"}) {
    DYNAMIC_SECTION(model) {
      Rng rng(5);
      auto m = make_model(config_for(model, "rope"), rng);
      auto* tm = dynamic_cast<TransformerModel*>(m.get());
      REQUIRE(tm != nullptr);
      constexpr std::size_t B = 2, T = 4;
      IndexTensor2 ids({B, T});
      for (auto& id : ids) id = static_cast<std::int32_t>(rng.uniform_int(kV));
      PaddingMask pad = xt::ones<std::uint8_t>({B, T});
      tm->set_padding(&pad);

      const Tensor3 y = m->forward(ids);
      CHECK(all_finite(y));

      IndexTensor1 targets = IndexTensor1::from_shape({B * T});
      targets.fill(-100);
      CrossEntropyLoss ce;  // ignore_index -100
      CHECK(ce.forward(rows_of(y), targets) == 0.0f);
      CHECK(ce.count() == 0);
      const Tensor2 dlogits = ce.backward();
      for (float g : dlogits) CHECK(g == 0.0f);

      // One Adam step on this batch: loss 0, gradient norm 0, every parameter unchanged.
      std::vector<std::vector<float>> before;
      for (Parameter* p : m->parameters()) before.emplace_back(p->value.begin(), p->value.end());
      Adam adam(m->parameters(), 1e-2f);
      LrSchedule constant;
      constant.base_lr = 1e-2f;
      TrainOptions opt;
      opt.steps = 1;
      opt.quiet = true;
      std::vector<StepRecord> steps;
      const TrainResult tr = train_loop(
          opt, m->parameters(), adam, constant,
          [&](int) { return ce_step(*m, ids, targets, ce); },
          [&](const StepRecord& r) { steps.push_back(r); });
      CHECK_FALSE(tr.diverged);
      REQUIRE(steps.size() == 1);
      CHECK(steps[0].loss == 0.0);
      CHECK(steps[0].grad_norm == 0.0);
      std::size_t i = 0;
      for (Parameter* p : m->parameters()) {
        CHECK(std::vector<float>(p->value.begin(), p->value.end()) == before[i]);
        ++i;
      }
    }
  }
}

TEST_CASE("An all-padding sequence does not change the other sequences' outputs", "[edge][models][padding]") {
  for (const std::string norm : {"layer_norm", "rms_norm", "masked_batch_norm"}) {
    DYNAMIC_SECTION(norm) {
      Rng rng(8);
      const ModelConfig cfg = config_for("transformer_encoder", "alibi", norm);
      auto m = make_model(cfg, rng);
      auto* tm = dynamic_cast<TransformerModel*>(m.get());
      constexpr std::size_t T = 4;
      IndexTensor2 two({2, T});
      for (auto& id : two) id = static_cast<std::int32_t>(rng.uniform_int(kV));
      PaddingMask pad2 = xt::zeros<std::uint8_t>({std::size_t{2}, T});
      xt::view(pad2, 1, xt::all()) = 1;  // sequence 1 is all padding
      pad2(0, 3) = 1;                    // and the last key of sequence 0
      tm->set_padding(&pad2);
      const Tensor3 y2 = m->forward(two);
      CHECK(all_finite(y2));

      IndexTensor2 one = xt::view(two, xt::range(0, 1), xt::all());
      PaddingMask pad1 = xt::view(pad2, xt::range(0, 1), xt::all());
      tm->set_padding(&pad1);
      const Tensor3 y1 = m->forward(one);
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t o = 0; o < kO; ++o) CHECK(y2(0, t, o) == Approx(y1(0, t, o)).margin(1e-5));
    }
  }
}

TEST_CASE("masked_batch_norm on an all-padding batch in training mode throws std::invalid_argument",
          "[edge][models][padding][norm]") {
  Rng rng(9);
  auto m = make_model(config_for("transformer_encoder", "sinusoidal", "masked_batch_norm"), rng);
  auto* tm = dynamic_cast<TransformerModel*>(m.get());
  IndexTensor2 ids = xt::zeros<std::int32_t>({std::size_t{2}, std::size_t{3}});
  PaddingMask pad = xt::ones<std::uint8_t>({std::size_t{2}, std::size_t{3}});
  tm->set_padding(&pad);
  CHECK_THROWS_AS(m->forward(ids), std::invalid_argument);
}

TEST_CASE("A huge learning rate is recorded as divergence, never thrown", "[edge][train][divergence]") {
  // The ReLU RNN and the Transformer have unbounded activations, so a step of 1e30 overflows float.
  // (An LSTM's bounded gates keep its logits finite at ~1e30, which is a finite, recorded loss.)
  for (const std::string model : {"rnn", "transformer_decoder"}) {
    DYNAMIC_SECTION(model) {
      Rng rng(4);
      ModelConfig cfg = config_for(model, "sinusoidal");
      cfg.nonlinearity = "relu";
      auto m = make_model(cfg, rng);
      constexpr std::size_t B = 2, T = 3;
      IndexTensor2 ids({B, T});
      IndexTensor1 targets = IndexTensor1::from_shape({B * T});
      for (auto& id : ids) id = static_cast<std::int32_t>(rng.uniform_int(kV));
      for (auto& t : targets) t = static_cast<std::int32_t>(rng.uniform_int(kO));
      SGD sgd(m->parameters(), 1e30f);
      LrSchedule huge;
      huge.base_lr = 1e30f;
      TrainOptions opt;
      opt.steps = 20;
      opt.quiet = true;
      CrossEntropyLoss ce;
      TrainResult tr;
      REQUIRE_NOTHROW(tr = train_loop(opt, m->parameters(), sgd, huge,
                                      [&](int) { return ce_step(*m, ids, targets, ce); }));
      CHECK(tr.diverged);
      CHECK(tr.steps_done == tr.diverged_step);
      CHECK(tr.steps_done < opt.steps);
      CHECK_FALSE(tr.diverged_what.empty());
    }
  }
}

// norm_stability's warm-up study (lm_study.hpp).
#include "lm_study.hpp"

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "evaluation.hpp"
#include "runs.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/text.hpp"
#include "seqlab/train/metrics.hpp"

namespace norm_stability {

using namespace seqlab;
using namespace seqlab::experiment;

namespace {

std::unique_ptr<TransformerModel> make_lm(const Cell& cell, const RunSpec& run, std::size_t V) {
  Rng init_rng(cell.stream_seed(kInitStream));
  std::unique_ptr<SequenceModel> m =
      make_model(model_config(cell, run, "transformer_decoder", V, V, -1), init_rng);
  auto* tm = dynamic_cast<TransformerModel*>(m.get());
  if (tm == nullptr) throw std::logic_error("norm_stability: make_model did not build a TransformerModel");
  m.release();
  return std::unique_ptr<TransformerModel>(tm);
}

// Mean loss of `model` (eval mode) over the validation windows.
double valid_loss(TransformerModel& model, const TextEvaluation& ev) {
  model.set_training(false);
  ScoreSums s;
  for (std::size_t i = 0; i < ev.n_chunks(); ++i) {
    const TaskBatch c = ev.chunk(i);
    evaluate_chunked(model, eval_set(c), c.tokens.shape()[0], s);
  }
  return s.mean_loss();
}

TaskBatch lm_batch(const TextCorpus& corpus, std::size_t B, std::size_t T, Rng& rng) {
  const TokenBatch w = corpus.sample(B, T, rng, TextSplit::train);
  TaskBatch b;
  b.tokens = w.inputs;
  b.targets = w.targets;
  return b;
}

}  // namespace

void run_warmup_cell(const Cell& cell, CellOutput& out) {
  const auto corpus = cell_corpus(cell);
  const std::size_t V = corpus->vocab_size(), T = cell.get_size("seq_len"), B = cell.get_size("batch");
  const int steps = cell.get_int32("steps");
  const std::size_t valid_tokens = cell.get_size("valid_tokens");
  const TextEvaluation ev = TextEvaluation::non_overlapping(corpus, TextSplit::valid, T, valid_tokens, 64);
  const double baseline = corpus->unigram_loss(TextSplit::valid, valid_tokens);
  const std::size_t window = cell.get_size("divergence_window");
  const int log_every = std::max(1, steps / cell.get_int32("log_points"));
  const std::vector<double> lrs = cell.get_real_list("lrs");

  std::size_t run_index = 0;
  for (auto depth : cell.get_int_list("depths"))
    for (const auto& pl : cell.get_string_list("placements")) {
      RunSpec base;
      base.norm = "layer_norm";
      base.placement = pl;
      base.num_layers = static_cast<std::size_t>(depth);
      base.batch = B;
      base.steps = steps;

      // Gradient norms at initialisation (Xiong et al. Fig. 3), on batches of their own stream.
      {
        auto model = make_lm(cell, base, V);
        Rng rng(cell.stream_seed(kInitGradStream));
        std::vector<TaskBatch> batches;
        for (int i = 0; i < cell.get_int32("init_batches"); ++i) batches.push_back(lm_batch(*corpus, B, T, rng));
        const auto g = init_gradient_norms(*model, batches);
        RunSpec id = base;
        id.lr = 0;
        for (std::size_t l = 0; l < g.size(); ++l)
          for (std::size_t k = 0; k < 2; ++k)
            out.add_row(id_row(cell, id)
                            .add("layer", l)
                            .add("param", k == 0 ? "linear2.weight" : "self_attn.in_proj_weight")
                            .add("grad_norm", g[l][k])
                            .add("init_batches", batches.size()),
                        "init_grads");
      }
      double initial_loss = std::numeric_limits<double>::quiet_NaN();
      for (auto w : cell.get_int_list("warmups"))
        for (double lr : lrs) {
          RunSpec run = base;
          run.warmup_steps = static_cast<int>(w);
          run.lr = lr;
          auto model = make_lm(cell, run, V);
          if (std::isnan(initial_loss)) initial_loss = valid_loss(*model, ev);
          const std::vector<Parameter*> params = model->parameters();
          auto optim = make_optimizer(cell.get_string("optimizer"), params, optimizer_config(cell, lr));
          const LrSchedule schedule = make_schedule(run, cell.get_string("warmup_schedule"));
          const Row id = id_row(cell, run);

          Rng train_rng(cell.stream_seed(kTrainStream));
          CrossEntropyLoss ce;
          TaskBatch cur;
          auto loss_and_grad = [&](int) -> double {
            cur = lm_batch(*corpus, B, T, train_rng);
            const Tensor3 logits = model->forward(cur.tokens);
            const double loss = ce.forward(rows_of(logits), ids_of(cur.targets));
            model->backward(unrows(ce.backward(), B, T));
            return loss;
          };
          std::vector<double> losses, norms;
          StepWindow win;
          TrainingPhase phase(cell, out, model.get(), "lm" + std::to_string(run_index++));
          phase.steps(steps).clip_norm(cell.get_real("clip_norm"))
              .blowup(cell.get_real("divergence_factor") * initial_loss, window);
          phase.on_step([&](const StepRecord& r) {
            losses.push_back(r.loss);
            norms.push_back(r.grad_norm);
            win.add(r.loss, r.grad_norm);
            if ((r.step + 1) % log_every == 0 || r.step == steps - 1) {
              out.add_row(Row(id)
                              .add("step", r.step + 1)
                              .add("loss", win.loss / win.n)
                              .add("grad_norm", win.grad_norm / win.n)
                              .add("step_lr", r.lr)
                              .add("pad_share", 0.0)
                              .add("mu_dev", std::numeric_limits<double>::quiet_NaN())
                              .add("var_dev", std::numeric_limits<double>::quiet_NaN())
                              .add("pad_mean_shift", std::numeric_limits<double>::quiet_NaN()),
                          "steps");
              win.clear();
            }
          });
          phase.state().add("train_rng", train_rng);
          phase.state().add("losses", losses);
          phase.state().add("grad_norms", norms);
          win.register_state(phase.state());
          RunOutcome o;
          o.tr = phase.run(params, *optim, schedule, loss_and_grad);
          o.valid_loss = o.tr.diverged ? std::numeric_limits<double>::quiet_NaN() : valid_loss(*model, ev);
          if (!o.tr.diverged) o.tr.check_test_loss(o.valid_loss);
          o.sum = summarize(losses, norms, {}, {}, {}, steps, window);
          o.n_params = model->num_parameters();
          o.seq_len = T;
          o.lr_source = "grid";
          o.initial_loss = initial_loss;
          o.baseline_loss = baseline;
          add_main_row(cell, out, id, run, o);
        }
    }
}

}  // namespace norm_stability

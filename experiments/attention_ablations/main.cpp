// attention_ablations: claim 5 of the README — separate W_Q and W_K matter (a shared projection
// makes Q Kᵀ symmetric); several heads beat one; encoder-only, decoder-only and encoder-decoder
// suit different tasks. Claim, method, expected outcome and the CSV columns: README.md beside this
// file.
//
// One cell = one ARM (task, architecture, Q/K sharing, n_heads) and one replicate: a small
// Transformer is trained on fresh batches of a synthetic task and evaluated on a fixed test set.
// The grid is the list of arms (the union of three sub-designs, listed explicitly in the configs):
//   Q/K sharing  separate vs shared W_Q = W_K, decoder-only, on tasks whose attention must be
//                asymmetric (prev_token, mqar, induction) and one where it need not be (majority);
//   n_heads      1, 2, 4, 8 at fixed d_model on the same tasks;
//   architecture encoder-only vs decoder-only vs encoder-decoder at matched parameter counts on
//                classification (majority), transduction (reverse) and generation (lm).
//
// Models (models/ factory): token embedding + sinusoidal positions (added: keeps a shared-QK
// score matrix exactly symmetric) -> pre-norm layers -> linear head.
//   encoder          "transformer_encoder", num_layers bidirectional layers
//   decoder          "transformer_decoder", num_layers causal layers (GPT block)
//   encoder_decoder  "transformer_encoder_decoder", num_layers / 2 encoder + num_layers / 2
//                    decoder layers, the width shrunk and d_ff adjusted so that count_parameters
//                    matches the decoder-only model's at d_model (choose_model, arms.hpp)
// Data: task-registry tasks laid out per architecture (ArmTask, arms.hpp); measurements: loss,
// accuracy, exact match and the attention diagnostics (evaluation.hpp); training: one
// TrainingPhase (experiment/training.hpp) whose window hook evaluates the fixed eval set.
// Legend: B batch, T seq_len, V vocabulary, D d_model, h n_heads, L num_layers, O output classes.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

#include "arms.hpp"
#include "evaluation.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
using namespace attention_ablations;

namespace {

constexpr const char* kName = "attention_ablations";
// Purposes of the replicate's random streams (Cell::stream_seed): shared by every arm with the
// same replicate index, so comparisons across arms are paired (same data, same test set; the
// initialisation stream is the same too, though models of different shapes draw it differently).
// kGrammarStream = 5 (arms.hpp) is the Markov source of the lm task.
constexpr std::uint64_t kInitStream = 1;   // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;  // training batches
constexpr std::uint64_t kTestStream = 3;   // the fixed test set
constexpr std::uint64_t kEvalStream = 4;   // the fixed set evaluated during training
// Sequences of the test set used for the attention diagnostics (logit asymmetry, attention mass).
constexpr std::size_t kProbeRows = 32;

// The arms of configs/quick.ini (the built-in default of the `arm` key).
const std::vector<std::string> kQuickArms = {
    // Q/K sharing (decoder, 4 heads) on three asymmetric tasks and the symmetric control,
    // plus the bidirectional encoder on prev_token
    "prev_token:decoder:separate:4", "prev_token:decoder:shared:4", "mqar:decoder:separate:4",
    "mqar:decoder:shared:4", "induction:decoder:separate:4", "induction:decoder:shared:4",
    "majority:decoder:separate:4", "majority:decoder:shared:4", "prev_token:encoder:separate:4",
    "prev_token:encoder:shared:4",
    // n_heads 1, 2, 8 (4 is above) at d_model 32
    "prev_token:decoder:separate:1", "prev_token:decoder:separate:2", "prev_token:decoder:separate:8",
    "mqar:decoder:separate:1", "mqar:decoder:separate:2", "mqar:decoder:separate:8",
    "induction:decoder:separate:1", "induction:decoder:separate:2", "induction:decoder:separate:8",
    "majority:decoder:separate:1", "majority:decoder:separate:2", "majority:decoder:separate:8",
    // architectures at matched parameter counts (majority:decoder:separate:4 is above)
    "majority:encoder:separate:4", "majority:encoder_decoder:separate:4",
    "reverse:encoder:separate:4", "reverse:decoder:separate:4", "reverse:encoder_decoder:separate:4",
    "lm:decoder:separate:4", "lm:encoder_decoder:separate:4"};

void validate(const Cell& cell) {
  const Arm arm = parse_arm(cell.get_string("arm"), cell.get_size("d_model"));
  experiment::cell_schedule(cell);  // schedule, lr, warmup_steps, steps
  const ArmTask task(cell, arm);
  choose_model(cell, arm, task.spec()).cfg.validate();  // e.g. rope with an odd head size
}

void run_cell(const Cell& cell, CellOutput& out) {
  const Arm arm = parse_arm(cell.get_string("arm"), cell.get_size("d_model"));
  const ArmTask task(cell, arm);
  const TaskSpec& spec = task.spec();
  const ModelChoice choice = choose_model(cell, arm, spec);
  const std::size_t batch = cell.get_size("batch");
  const int steps = cell.get_int32("steps");
  const double target_accuracy =
      spec.baseline_accuracy +
      cell.get_real("target_fraction") * (spec.best_accuracy - spec.baseline_accuracy);

  Rng init_rng(cell.stream_seed(kInitStream));
  const std::unique_ptr<SequenceModel> model_ptr = make_model(choice.cfg, init_rng);
  SequenceModel& model = *model_ptr;
  const std::vector<Parameter*> params = model.parameters();

  OptimizerConfig oc;
  oc.lr = cell.get_float("lr");
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);

  Rng test_rng(cell.stream_seed(kTestStream));
  const TaskBatch test = task.sample(cell.get_size("test_batch"), test_rng, true);
  Rng eval_rng(cell.stream_seed(kEvalStream));
  const TaskBatch eval_set = task.sample(cell.get_size("eval_batch"), eval_rng, true);
  const TaskBatch probe = slice_rows(test, 0, std::min(kProbeRows, batch_rows(test)));
  Rng train_rng(cell.stream_seed(kTrainStream));

  const AttentionDiagnostics init_diag = diagnose(model, probe);

  Row id;
  id.add("experiment", kName)
      .add("arm", cell.get_string("arm"))
      .add("task", arm.task)
      .add("arch", arm.arch)
      .add("qk", arm.qk)
      .add("n_heads", arm.n_heads)
      .add("seed", cell.replicate);

  // Curve: one row per eval_every updates (and after the last): the window's mean training loss,
  // then loss and accuracy on the fixed eval set; steps_to_target is the first evaluation step
  // whose accuracy reaches the target.
  int steps_to_target = -1;
  TrainingPhase phase(cell, out, &model, "train");
  phase.steps(steps)
      .clip_norm(cell.get_real("clip_norm"))
      .label(cell.get_string("arm") + " seed " + std::to_string(cell.replicate))
      .every(cell.get_int32("eval_every"), [&](const TrainingWindow& w) {
        const Evaluation ev = evaluate(model, eval_set);
        if (steps_to_target < 0 && ev.accuracy >= target_accuracy) steps_to_target = w.step;
        out.add_row(Row(id)
                        .add("step", w.step)
                        .add("train_loss", w.mean_loss)
                        .add("eval_loss", ev.loss)
                        .add("eval_accuracy", ev.accuracy),
                    "curve");
        return false;
      });
  // --checkpoint-every: the updates also change the training data stream and steps_to_target.
  phase.state().add("train_rng", train_rng);
  phase.state().add("steps_to_target", steps_to_target);
  CrossEntropyLoss ce(kIgnoreTarget);
  PhaseResult tr = phase.run(params, *optim, experiment::cell_schedule(cell), [&](int /*step*/) {
    const TaskBatch b = task.sample(batch, train_rng, false);
    const Tensor3 logits = forward(model, b);
    const double loss = ce.forward(rows_of(logits), ids_of(b.targets));
    model.backward(unrows(ce.backward(), logits.shape()[0], logits.shape()[1]));
    return loss;
  });

  const Evaluation ev = evaluate(model, test);  // eval mode after run()
  const AttentionDiagnostics diag = diagnose(model, probe);
  tr.check_test_loss(ev.loss);
  const ModelConfig& mc = choice.cfg;
  out.add_row(Row(id)
                  .add("derived_seed", cell.seed)
                  .add("d_model", mc.hidden_size)
                  .add("d_ff", mc.d_ff)
                  .add("head_dim", mc.hidden_size / mc.n_heads)
                  .add("encoder_layers", choice.encoder_layers)
                  .add("decoder_layers", choice.decoder_layers)
                  .add("n_params", model.num_parameters())
                  .add("param_budget", choice.budget)
                  .add("src_len", test.tokens.shape()[1])
                  .add("tgt_len", test.decoder_tokens.size() == 0 ? std::size_t{0}
                                                                  : test.decoder_tokens.shape()[1])
                  .add("batch", batch)
                  .add("steps", steps)
                  .add("lr", cell.get_real("lr"))
                  .add("test_loss", ev.loss)
                  .add("test_accuracy", ev.accuracy)
                  .add("test_exact_match", ev.exact_match)
                  .add("chance_accuracy", spec.baseline_accuracy)
                  .add("best_accuracy", spec.best_accuracy)
                  .add("chance_loss", spec.baseline_loss)
                  .add("optimal_loss", spec.optimal_loss)
                  .add("target_accuracy", target_accuracy)
                  .add("steps_to_target", steps_to_target)
                  .add("logit_asymmetry_init", init_diag.logit_asymmetry)
                  .add("logit_asymmetry", diag.logit_asymmetry)
                  .add("diag_attention", diag.diag_attention)
                  .add("prev_attention", diag.prev_attention)
                  .add("diverged", tr.diverged ? 1 : 0)
                  .add("diverged_step", tr.diverged_step)
                  .add("steps_done", tr.steps_done)
                  .add("final_train_loss", tr.final_window_loss)
                  .add("train_time_s", tr.train_time_s));
}

}  // namespace

int main(int argc, char** argv) {
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 5 (README.md claims table): separate W_Q and W_K matter (a shared projection makes "
      "the attention logits symmetric); several heads beat one; encoder-only, decoder-only and "
      "encoder-decoder suit different tasks. Each cell trains one arm task:arch:qk:n_heads (a "
      "small Transformer on a synthetic task: prev_token, mqar, induction, majority, reverse, lm) "
      "and reports test accuracy, steps to a target accuracy, and the measured symmetry "
      "||S - S^T||/||S|| of the pre-softmax attention logits.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("arm", kQuickArms,
                   "task:arch:qk:n_heads; task prev_token|mqar|induction|majority|reverse|lm, "
                   "arch encoder|decoder|encoder_decoder, qk separate|shared"),
      int_option("d_model", 32, "units",
                 "model width D (encoder_decoder: the reference width; its own is matched)")
          .at_least(1)
          .at_most(4096),
      int_option("num_layers", 2, "layers",
                 "layers of encoder / decoder models; encoder_decoder: num_layers / 2 per stack")
          .at_least(1)
          .at_most(64),
      int_option("ff_mult", 2, "1", "feed-forward inner size d_ff = ff_mult * width")
          .at_least(1)
          .at_most(64),
      string_option("norm_placement", "pre", "LayerNorm placement").one_of({"pre", "post"}),
      string_option("positional_encoding", "sinusoidal",
                    "positions (sinusoidal/learned/none are added or absent, rope rotates q and k: "
                    "all keep shared-QK logits symmetric)")
          .one_of({"sinusoidal", "learned", "rope", "none"}),
      int_option("seq_len", 16, "tokens",
                 "sequence length (reverse: seq_len/2 symbols; induction: prefix seq_len - "
                 "seq_len/3, repeat seq_len/3; lm: encoder_decoder source = first seq_len/2)")
          .at_least(2)
          .at_most(4096),
      int_option("vocab", 16, "tokens",
                 "symbols of prev_token, induction, reverse, lm; keys and values of mqar")
          .at_least(2)
          .at_most(100000),
      int_option("mqar_pairs", 4, "pairs", "mqar: key-value pairs per sequence")
          .at_least(1)
          .at_most(10000),
      int_option("mqar_queries", 4, "queries", "mqar: queries per sequence (<= mqar_pairs)")
          .at_least(1)
          .at_most(10000),
      int_option("majority_classes", 4, "classes", "majority: class tokens (output classes)")
          .at_least(2)
          .at_most(1000),
      int_option("majority_noise", 4, "tokens", "majority: distractor tokens")
          .at_least(0)
          .at_most(1000),
      int_option("lm_order", 2, "tokens", "lm: Markov order (context length)")
          .at_least(1)
          .at_most(20),
      int_option("lm_branching", 3, "tokens", "lm: successors per context (p_j ~ 2^-j)")
          .at_least(1)
          .at_most(100000),
      int_option("batch", 32, "sequences", "training batch size (fresh batch every step)")
          .at_least(1)
          .at_most(65536),
      int_option("steps", 800, "updates", "optimizer updates").at_least(1).at_most(1e9),
      real_option("lr", 3e-3, "1", "peak learning rate").greater_than(0),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0, "1", "weight decay (L2 for adam/sgd, decoupled for adamw)")
          .at_least(0),
      real_option("clip_norm", 1, "1", "max global gradient norm; 0 disables clipping").at_least(0),
      string_option("schedule", "constant", "learning-rate schedule")
          .one_of({"constant", "cosine", "inverse_sqrt"}),
      int_option("warmup_steps", 20, "updates", "linear warm-up length")
          .at_least(0)
          .at_most(1e9)
          .at_most_key("steps"),
      int_option("eval_every", 25, "updates", "updates between evaluations on the eval set")
          .at_least(1)
          .at_most(1e9),
      int_option("eval_batch", 64, "sequences", "size of the fixed eval set (curve, steps to target)")
          .at_least(1)
          .at_most(1e6),
      int_option("test_batch", 256, "sequences", "size of the fixed test set")
          .at_least(1)
          .at_most(1e6),
      real_option("target_fraction", 0.9, "1",
                  "target accuracy = chance + target_fraction * (best - chance)")
          .greater_than(0)
          .at_most(1),
  };
  const std::vector<std::string> id_cols = {"experiment", "arm", "task", "arch", "qk", "n_heads",
                                            "seed"};
  std::vector<std::string> main_cols = id_cols;
  for (const char* c :
       {"derived_seed", "d_model", "d_ff", "head_dim", "encoder_layers", "decoder_layers",
        "n_params", "param_budget", "src_len", "tgt_len", "batch", "steps", "lr", "test_loss",
        "test_accuracy", "test_exact_match", "chance_accuracy", "best_accuracy", "chance_loss",
        "optimal_loss", "target_accuracy", "steps_to_target", "logit_asymmetry_init",
        "logit_asymmetry", "diag_attention", "prev_attention", "diverged", "diverged_step",
        "steps_done", "final_train_loss", "train_time_s"})
    main_cols.push_back(c);
  std::vector<std::string> curve_cols = id_cols;
  for (const char* c : {"step", "train_loss", "eval_loss", "eval_accuracy"}) curve_cols.push_back(c);
  spec.tables = {{kMainTable, main_cols}, {"curve", curve_cols}};
  spec.default_seeds = 5;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

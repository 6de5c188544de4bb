// norm_stability: claim 4 of the README — BatchNorm is unstable in Transformers because (1) padding
// pollutes the batch statistics, (2) small batches make them noisy and (3) training and inference
// use different statistics, while LayerNorm has none of these problems; and Pre-LN trains stably
// where Post-LN needs a learning-rate warm-up. Anchors: Xiong et al. 2020 (arXiv 2002.04745),
// Shen et al. 2020 (PowerNorm, arXiv 2003.07845), Wu & He 2018 (GroupNorm, arXiv 1803.08494),
// Wu & Johnson 2021 (precise BN, arXiv 2105.07576). Claim, design, expected outcome and the CSV
// columns: README.md beside this file.
//
// Data: the registry's `text` corpus (tasks/text.hpp; the KJV from Debian by default), character
// level. Grid: study x seeds; the `study` value selects a sub-design whose runs the cell makes:
//   study = warmup   next-character LM with a causal Transformer (lm_study.hpp): depths x
//                    placements x warmups x lrs, LayerNorm; gradient norms at initialisation;
//   study = padding  masked-character modelling with a bidirectional encoder (bn_study.hpp,
//                    masked_text.hpp): norms x train_pad_maxes, length-bucketed batches whose
//                    padding share is drawn per batch, test sets at the shares test_pads, each
//                    run after a learning-rate pilot, evaluated in eval / train / precise / recal
//                    mode (evaluation.hpp);
//   study = batch    the same task without padding: batch_norms x batch_sizes at equal training
//                    examples, the learning rate scaled with the batch from a pilot at batch_ref.
// Every run is one TrainingPhase (experiment/training.hpp: timer, checkpoint "run<i>" / "lm<i>",
// the loss blow-up rule). The probe on the first norm (probe.hpp) measures Shen et al.'s
// batch-statistics deviation at every update.
//
// Legend: B batch, T seq_len, D d_model, L num_layers, V the corpus vocabulary.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bn_study.hpp"
#include "lm_study.hpp"
#include "masked_text.hpp"
#include "runs.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/nn/norm.hpp"
#include "seqlab/core/threads.hpp"

using namespace seqlab;
using namespace seqlab::experiment;
using namespace norm_stability;

namespace {

constexpr const char* kName = "norm_stability";
constexpr std::int64_t kMaxBatch = 4096;
constexpr std::int64_t kMaxSteps = 100000000;

// The keys' cross checks that the options cannot state (the list keys' bounds, warmups <= steps
// and min_len <= seq_len are declared on the keys): the corpus opens and holds a window of
// seq_len + 1 symbols in every split, every model of the cell is valid (e.g. n_heads divides
// d_model), and every share gives at least min_len real positions.
void validate(const Cell& cell) {
  const auto corpus = cell_corpus(cell);
  corpus->require_window(cell.get_size("seq_len"));
  const std::size_t V = corpus->vocab_size();
  RunSpec run;
  run.norm = "layer_norm";
  run.placement = "pre";
  run.num_layers = cell.get_size("bn_layers");
  model_config(cell, run, "transformer_encoder", V + 2, V, static_cast<long>(V)).validate();
  for (auto d : cell.get_int_list("depths")) {
    run.num_layers = static_cast<std::size_t>(d);
    model_config(cell, run, "transformer_decoder", V, V, -1).validate();
  }
  const auto bref = cell.get_int("batch_ref");
  if (static_cast<std::int64_t>(cell.get_size("examples")) < bref)
    throw seqlab::ConfigError("examples", std::to_string(cell.get_int("examples")),
                      ">= batch_ref = " + std::to_string(bref) + " (one update at the reference batch)");
  for (auto b : cell.get_int_list("batch_sizes"))
    if (static_cast<std::int64_t>(cell.get_size("examples")) < b)
      throw seqlab::ConfigError("batch_sizes", std::to_string(b),
                        "at most examples = " + std::to_string(cell.get_int("examples")));
}

void run_cell(const Cell& cell, CellOutput& out) {
  const std::string& study = cell.get_string("study");
  if (study == "warmup")
    run_warmup_cell(cell, out);
  else if (study == "padding")
    run_padding_cell(cell, out);
  else
    run_batch_cell(cell, out);
}

}  // namespace

int main(int argc, char** argv) {
  seqlab::ensure_blas_kernels(argv);  // before anything: OpenBLAS's kernels (core/threads.hpp)
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 4 (README.md claims table): BatchNorm is unstable in Transformers (padding pollutes "
      "its batch statistics, small batches make them noisy, train and inference statistics "
      "differ) while LayerNorm is not; Pre-LN trains stably where Post-LN needs a warm-up. On "
      "character-level text (the KJV by default): study warmup trains causal LMs over depths x "
      "placements x warm-ups x learning rates (Xiong et al. 2020) and records the per-layer "
      "gradient norms at initialisation; study padding trains masked-character encoders with "
      "every norm on length-bucketed batches of varying padding share and tests them at other "
      "shares in eval, train, precise-BN and recalibrated mode; study batch trains them at batch "
      "sizes of equal training examples. Every BatchNorm-study run gets a learning-rate pilot.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  const std::vector<std::string> studies = {"warmup", "padding", "batch"};
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("study", studies, "sub-design run inside each cell: warmup | padding | batch (README.md)")
          .one_of(studies),
      // Data and model (every study).
      string_option("corpus", "kjv", "text corpus: kjv (the KJV from Debian, split by book) or a file "
                                     "or directory (tasks/text.hpp)"),
      string_option("unit", "char", "text symbols: char | byte").one_of({"char", "byte"}),
      int_option("seq_len", 32, "symbols", "window length T").at_least(2).at_most(4096),
      int_option("d_model", 32, "units", "model width D").at_least(2).at_most(4096),
      int_option("n_heads", 4, "heads", "attention heads (divide d_model)").at_least(1).at_most(256),
      int_option("d_ff", 64, "units", "feed-forward inner size").at_least(1).at_most(16384),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("adam_beta2", 0.98, "1", "Adam's beta2 (Xiong et al.: 0.98)").greater_than(0).at_most(0.9999),
      real_option("weight_decay", 0, "1", "weight decay").at_least(0).at_most(10),
      real_option("clip_norm", 0, "1", "max global gradient norm; 0 = off (instability shows)").at_least(0),
      real_option("divergence_factor", 3, "1",
                  "diverged when the mean loss of the last divergence_window updates exceeds this "
                  "multiple of the initial loss")
          .greater_than(1)
          .at_most(1e6),
      int_option("divergence_window", 20, "updates", "window of the blow-up test and of final_train_loss")
          .at_least(1)
          .at_most(100000),
      real_option("stall_margin", 0.1, "nats",
                  "failed when the final validation loss is not below the unigram baseline minus this")
          .at_least(0)
          .at_most(100),
      int_option("log_points", 50, "rows", "rows of the steps table per run").at_least(1).at_most(100000),
      // Study warmup (causal LM, LayerNorm).
      int_list_option("depths", "2", "layers", "warmup: encoder depths L").at_least(1).at_most(64),
      choice_list_option("placements", "pre post", {"pre", "post"}, "warmup: norm placements"),
      int_list_option("warmups", "0 100", "updates", "warmup: linear warm-up lengths (<= steps)")
          .at_least(0)
          .at_most(kMaxSteps)
          .at_most_key("steps"),
      real_list_option("lrs", "0.00316 0.0316 0.316", "1", "warmup: peak learning rates").greater_than(0).at_most(10),
      int_option("steps", 300, "updates", "warmup: updates per run").at_least(1).at_most(kMaxSteps),
      int_option("batch", 16, "sequences", "warmup: batch size").at_least(1).at_most(kMaxBatch),
      string_option("warmup_schedule", "constant", "warmup: the learning rate after the warm-up")
          .one_of({"constant", "cosine"}),
      int_option("valid_tokens", 8192, "symbols", "warmup: scored validation symbols (0 = the whole split)")
          .at_least(0)
          .at_most(100000000),
      int_option("init_batches", 8, "batches", "warmup: batches the gradients at initialisation average")
          .at_least(1)
          .at_most(10000),
      // Studies padding and batch (masked characters, bidirectional encoder).
      choice_list_option("norms", "layer_norm rms_norm batch_norm masked_batch_norm power_norm", norm_names(),
                         "padding: the norms compared"),
      real_list_option("train_pad_maxes", "0.9", "1",
                       "padding: training conditions, shares 0, pad_step, ..., max drawn per batch")
          .at_least(0)
          .at_most(0.95),
      real_option("pad_step", 0.1, "1", "padding: step of the training shares").greater_than(0).at_most(1),
      real_list_option("test_pads", "0 0.3 0.6 0.9", "1", "padding: shares of the test sets").at_least(0).at_most(0.95),
      int_option("bn_steps", 600, "updates", "padding: updates per run").at_least(1).at_most(kMaxSteps),
      int_option("bn_batch", 16, "sequences", "padding: batch size").at_least(1).at_most(kMaxBatch),
      int_option("bn_layers", 2, "layers", "padding, batch: encoder depth").at_least(1).at_most(64),
      string_option("bn_placement", "pre", "padding, batch: norm placement")
          .one_of({"pre", "post"}),
      int_option("min_len", 2, "symbols", "shortest real length of a row (BatchNorm needs 2 positions)")
          .at_least(2)
          .at_most(4096)
          .at_most_key("seq_len"),
      real_option("mask_fraction", 0.5, "1", "share of real positions masked (BERT: 0.15)").greater_than(0).at_most(1),
      real_list_option("lr_grid", "0.001 0.003 0.01", "1", "padding, batch: the pilot's learning rates")
          .greater_than(0)
          .at_most(10),
      real_option("pilot_fraction", 0.3, "1", "padding, batch: a pilot trial's updates / the run's")
          .greater_than(0)
          .at_most(1),
      real_option("warmup_fraction", 0.1, "1", "padding, batch: linear warm-up / updates, then cosine")
          .at_least(0)
          .at_most(1),
      int_option("valid_size", 64, "sequences", "padding, batch: pilot validation rows per share")
          .at_least(1)
          .at_most(1000000),
      int_option("test_size", 256, "sequences", "padding, batch: test rows per share").at_least(1).at_most(1000000),
      int_option("calib_examples", 1600, "sequences",
                 "padding, batch: sequences of the precise statistics, in batches of the run's size")
          .at_least(1)
          .at_most(10000000),
      choice_list_option("batch_norms", "layer_norm batch_norm power_norm", norm_names(), "batch: the norms compared"),
      int_list_option("batch_sizes", "2 8 32", "sequences", "batch: batch sizes").at_least(1).at_most(kMaxBatch),
      int_option("batch_ref", 32, "sequences", "batch: the pilot's batch and the lr scaling reference")
          .at_least(1)
          .at_most(kMaxBatch),
      int_option("examples", 9600, "sequences", "batch: training sequences per run (updates = examples / B)")
          .at_least(1)
          .at_most(1000000000),
  };
  const std::vector<std::string> ids = {"experiment", "study", "norm", "norm_placement", "num_layers", "batch",
                                        "train_pad_max", "warmup_steps", "lr", "seed"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> c = ids;
    c.insert(c.end(), more.begin(), more.end());
    return c;
  };
  spec.tables = {
      {kMainTable,
       with({"derived_seed", "n_params", "d_model", "seq_len", "steps", "examples", "lr_source", "initial_loss",
             "baseline_loss", "diverged", "diverged_step", "diverged_reason", "steps_done", "final_train_loss",
             "valid_loss", "failed", "loss_volatility", "grad_norm_first", "grad_norm_max", "mu_dev_late",
             "var_dev_late", "mu_dev_max", "var_dev_max", "pad_mean_shift_late", "train_time_s"})},
      {"steps", with({"step", "loss", "grad_norm", "step_lr", "pad_share", "mu_dev", "var_dev", "pad_mean_shift"})},
      {"eval", with({"test_pad", "mode", "loss", "accuracy", "n_scored"})},
      {"pilot", with({"trial_lr", "pilot_steps", "val_loss", "chosen"})},
      {"init_grads", with({"layer", "param", "grad_norm", "init_batches"})},
  };
  spec.default_seeds = 3;
  spec.timing_columns = {"train_time_s"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

#pragma once
// Time to accuracy: the "Transformers train faster" claim measured end to end, as character-level
// language modelling on real text (the registry task `text`, tasks/text.hpp: the King James
// Version by default, split by book). A model of one family, at the parameter count of the
// Transformer decoder (models/factory.hpp count_parameters, hidden_size_for_budget), is trained
// until its bits per character on a fixed validation subset reach a target, and the number of
// updates and the wall-clock training time to get there are recorded separately: the updates
// measure sample efficiency, the time per update the speed of one update, their product the claim.
//
// Legend: T tta_seq_len, B tta_batch, V the corpus's vocab_size (KJV: 64), D tta_d_model.
//
// Models (factory): embedding(V, D) -> body -> per-position Linear(·, V), dropout 0.
//   transformer_decoder: tta_num_layers layers of width D, tta_n_heads heads, d_ff tta_d_ff,
//     sinusoidal positions, layer_norm with the experiment's norm_placement, the causal mask;
//   rnn / lstm / gru: tta_num_layers layers, hidden size = the largest whose count_parameters is
//     <= the Transformer decoder's;
//   tcn: the fewest levels covering T (kernel_size of the experiment), width by the same budget.
// (Only causal families: an LM may not see the symbol it predicts.)
// Training: Adam (betas 0.9/0.999), constant learning rate, global gradient-norm clipping at 1,
// mean cross-entropy over all B·T positions, a fresh batch of B windows of the train split every
// update; seqlab::set_num_threads(tta_threads) for the whole cell.
// Learning rate (experiment/tuning.hpp choose_lr, the same procedure for every family): each rate
// of tta_lrs trains a fresh model (the same initialisation and data for every rate) for
// tta_pilot_steps updates; the one with the lowest validation loss is used for every run.
// Validation: the first tta_eval_tokens targets of the validation split in non-overlapping
// windows of T (TextEvaluation; the same symbols for every family, rate and run). Every
// tta_eval_every updates the phase's window hook measures its bits per character and stops the
// run at the first evaluation <= tta_target_bpc (or after tta_max_steps updates). At the end the
// test split's first tta_eval_tokens targets are scored the same way (test_bpc).
// Clock: time_to_target_s and train_time_s count the training updates only (TrainingPhase's timer
// leaves the evaluations out); the per-update time of each evaluation window goes to the main
// table (pass train_update: median, min, max over the windows).
// Seeds: the pilot uses derive_seed(seed, r0, 4) for initialisation and (r0, 5) for data, r0 =
// replicate · tta_seeds; run j of a cell with replicate r uses r' = r·tta_seeds + j:
// initialisation derive_seed(seed, r', 1), training windows derive_seed(seed, r', 2)
// (experiment::stream_seed): every family sees the same windows for the same r' (paired).
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/model_config.hpp"

namespace parallel_speedup {

struct TtaSettings {
  std::string corpus = "kjv";    // the text task's corpus key
  std::size_t seq_len = 128;     // T
  std::size_t d_model = 64;      // D
  std::size_t num_layers = 2;
  std::size_t n_heads = 4;
  std::size_t d_ff = 256;
  std::size_t kernel_size = 3;   // TCN
  std::string norm_placement = "pre";
  std::string attention_kernel = "materialised";  // the Transformer's kernel (attention_kernel key)
  std::size_t batch = 16;        // B
  std::vector<double> lrs;       // the learning-rate grid (choose_lr)
  int pilot_steps = 200;
  double target_bpc = 2.5;       // bits per character on the validation subset
  int eval_every = 50;
  int max_steps = 1500;
  std::size_t eval_tokens = 16384;
  std::size_t seeds = 5;
  int threads = 1;
};

/// The families a language model can be trained with (causal).
const std::vector<std::string>& lm_families();

/// The factory configuration of `model` for a corpus of `vocab` symbols (file comment). Throws
/// seqlab::ConfigError for an invalid combination (n_heads not dividing d_model, an odd d_model
/// with sinusoidal positions, a budget too small for the family).
seqlab::ModelConfig tta_model_config(const std::string& model, const TtaSettings& s, std::size_t vocab);

/// Tables: "time_to_accuracy" (one row per run), "tta_lr" (one row per pilot rate), "tta_curve"
/// (one row per evaluation).
const std::vector<std::string>& time_to_accuracy_columns();
const std::vector<std::string>& tta_lr_columns();
const std::vector<std::string>& tta_curve_columns();

/// Chooses the learning rate and trains s.seeds runs of `model` (file comment), adding their rows
/// to `out` (main-table rows through `main_row`, which fills the timing columns of one run's
/// per-update times). Divergence is recorded (diverged = 1 and the step), not thrown.
void run_time_to_accuracy(const seqlab::experiment::Cell& cell, const std::string& model,
                          const TtaSettings& s, seqlab::experiment::CellOutput& out);

}  // namespace parallel_speedup

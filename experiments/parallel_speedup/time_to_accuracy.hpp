#pragma once
// Time to accuracy: the "Transformers train faster" claim measured end to end. A model of one
// family, at the parameter count of the Transformer (models/factory.hpp count_parameters and
// hidden_size_for_budget), is trained on the copy memory task (tasks/copy_memory.hpp, Bai, Kolter
// & Koltun 2018 §4) until its recall accuracy on a fixed test set reaches a target, and the
// wall-clock training time is recorded.
//
// Legend: T blank length of copy memory, M symbols to recall (tta_n_memorize; Bai et al.: 10),
// S = T + 2M its sequence length, V = 10 classes (blank, 8 symbols, delimiter),
// D tta_d_model (embedding width of every family and the Transformer's width).
//
// Models (factory): embedding(V, D) -> body -> per-position Linear(·, V).
//   transformer_encoder / transformer_decoder: tta_num_layers layers of width D, tta_n_heads
//     heads, d_ff tta_d_ff, sinusoidal positions, layer_norm with the experiment's norm_placement;
//   rnn / lstm / gru: tta_num_layers layers, hidden size = the largest whose count_parameters is
//     <= the Transformer decoder's (hidden_size_for_budget);
//   tcn: the fewest levels covering S (kernel_size of the experiment), width by the same budget.
// Training: Adam (lr tta_lr, betas 0.9/0.999), constant learning rate, global gradient-norm
// clipping at 1, mean cross-entropy over all S positions (as Bai et al.'s code), a fresh batch of
// tta_batch sequences every update; seqlab::set_num_threads(tta_threads) for the whole run.
// Every tta_eval_every updates the recall accuracy (fraction of the M recall positions whose
// argmax is the target) is measured on tta_test_batch fixed test sequences; training stops at the
// first evaluation with accuracy >= tta_target, or after tta_max_steps updates.
// Clock: time_to_target_s and train_time_s count the training updates only (sampling the batch,
// forward, backward, clipping, optimizer step), not the evaluations (measurement overhead).
// Seeds: run j of a cell with replicate r uses replicate index r' = r·tta_seeds + j, i.e.
// initialisation derive_seed(seed, r', 1), training data derive_seed(seed, r', 2), test set
// derive_seed(seed, r', 3) (experiment::stream_seed): every family sees the same data for the
// same r', so comparisons are paired.
#include <cstddef>
#include <string>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/model_config.hpp"

namespace parallel_speedup {

struct TtaSettings {
  int T = 10;                    // copy memory blank length
  int n_memorize = 10;           // symbols to recall (Bai et al.: 10)
  std::size_t d_model = 32;      // D
  std::size_t num_layers = 1;
  std::size_t n_heads = 4;
  std::size_t d_ff = 128;
  std::size_t kernel_size = 3;   // TCN
  std::string norm_placement = "pre";
  std::size_t batch = 32;
  double lr = 1e-3;              // a finite float (the key's check)
  double target = 0.99;          // recall accuracy in (0, 1]
  int eval_every = 25;
  int max_steps = 2000;
  std::size_t test_batch = 256;
  std::size_t seeds = 3;
  int threads = 1;
};

/// The factory configuration of `model` for the task (file comment). Throws seqlab::ConfigError
/// for an invalid combination (e.g. n_heads not dividing d_model, an odd d_model with sinusoidal
/// positions, a budget too small for the family).
seqlab::ModelConfig tta_model_config(const std::string& model, const TtaSettings& s);

/// Table "time_to_accuracy": one row per run; table "tta_curve": one row per evaluation.
/// Columns: time_to_accuracy_columns(), tta_curve_columns().
const std::vector<std::string>& time_to_accuracy_columns();
const std::vector<std::string>& tta_curve_columns();

/// Trains s.seeds runs of `model` (file comment) and adds their rows to `out` (the cell's `match`
/// value is written in the rows). Divergence is recorded (diverged = 1 and the step), not thrown.
void run_time_to_accuracy(const seqlab::experiment::Cell& cell, const std::string& model,
                          const TtaSettings& s, seqlab::experiment::CellOutput& out);

}  // namespace parallel_speedup

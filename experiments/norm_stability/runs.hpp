#pragma once
// norm_stability's shared pieces (main.cpp's file comment): the corpus, the models of the two
// kinds of run (a causal character LM for the warm-up study, a bidirectional masked-character
// encoder for the BatchNorm studies), the learning-rate schedule, the optimizer, the identifying
// columns of a run, and the training-history summaries every run reports.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/rows.hpp"
#include "seqlab/experiment/grid.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/experiment/table.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/tasks/text.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

namespace norm_stability {

using seqlab::experiment::Cell;

// Purposes of the replicate's random streams (Cell::stream_seed): shared by every run of a
// replicate, so that comparisons across norms, placements, learning rates and batch sizes are
// paired (same initial weights where shapes agree, same data streams).
inline constexpr std::uint64_t kInitStream = 1;   // parameter initialisation
inline constexpr std::uint64_t kTrainStream = 2;  // training batches
inline constexpr std::uint64_t kTestStream = 3;   // test sets (one per padding share)
inline constexpr std::uint64_t kValidStream = 4;  // the pilot's validation set
inline constexpr std::uint64_t kCalibStream = 5;  // precise-BN calibration batches
inline constexpr std::uint64_t kInitGradStream = 6;  // the batches of the gradients at init

/// One training run of a study.
struct RunSpec {
  std::string norm;
  std::string placement;        // pre | post
  std::size_t num_layers = 0;
  std::size_t batch = 0;
  double train_pad_max = 0;     // padding shares 0, pad_step, ..., train_pad_max (BN studies)
  int warmup_steps = 0;
  double lr = 0;                // peak learning rate (the BN studies: after the pilot)
  int steps = 0;                // updates
};

/// The corpus of the cell's keys corpus and unit (TextCorpus::open; opened once per process and
/// shared). Throws ConfigError as TextCorpus::open.
std::shared_ptr<const seqlab::TextCorpus> cell_corpus(const Cell& cell);

/// The Transformer of a run: "transformer_decoder" (causal LM, study warmup) or
/// "transformer_encoder" (masked characters); d_model, n_heads, d_ff, sinusoidal positions, no
/// dropout; vocab_size input ids and output_size outputs per position; padding_idx (-1: none).
seqlab::ModelConfig model_config(const Cell& cell, const RunSpec& run, const std::string& model,
                                 std::size_t vocab_size, std::size_t output_size, long padding_idx);

/// Linear warm-up of run.warmup_steps to run.lr, then `kind` (constant | cosine) over run.steps.
seqlab::LrSchedule make_schedule(const RunSpec& run, const std::string& kind);

/// Adam / AdamW / SGD of the cell's optimizer, adam_beta2 and weight_decay keys at learning rate lr.
seqlab::OptimizerConfig optimizer_config(const Cell& cell, double lr);

/// The identifying columns of a run (README.md "Output"), the first ten of every table.
seqlab::experiment::Row id_row(const Cell& cell, const RunSpec& run);

/// Summaries of a run's per-update histories (README.md "Per run"): loss_volatility =
/// sqrt(mean((l_t − l_{t−1})²) / 2) over the second half of the planned updates; final_train_loss
/// the mean of the last `window` losses; grad_norm_first and grad_norm_max; the probe's means over
/// the second half (mu_dev_late, var_dev_late, pad_mean_shift_late) and their maxima.
struct RunSummary {
  double loss_volatility = NAN, final_train_loss = NAN, grad_norm_first = NAN, grad_norm_max = NAN;
  double mu_dev_late = NAN, var_dev_late = NAN, pad_mean_shift_late = NAN;
  double mu_dev_max = NAN, var_dev_max = NAN;
};
RunSummary summarize(const std::vector<double>& losses, const std::vector<double>& grad_norms,
                     const std::vector<double>& mu_dev, const std::vector<double>& var_dev,
                     const std::vector<double>& pad_shift, int steps, std::size_t window);

/// What a finished run reports in the main table besides its identifying columns.
struct RunOutcome {
  std::size_t n_params = 0, seq_len = 0;
  std::string lr_source;          // grid | pilot
  double initial_loss = NAN, baseline_loss = NAN, valid_loss = NAN;
  seqlab::experiment::PhaseResult tr;
  RunSummary sum;
};

/// Adds the run's main-table row (README.md "Output"): `id` then the outcome's columns; failed =
/// diverged, or valid_loss not below baseline_loss − stall_margin.
void add_main_row(const Cell& cell, seqlab::experiment::CellOutput& out, const seqlab::experiment::Row& id,
                  const RunSpec& run, const RunOutcome& o);

/// The steps table's window: the mean loss and gradient norm of the updates since the last row.
struct StepWindow {
  double loss = 0, grad_norm = 0;
  int n = 0;
  void add(double l, double g) {
    loss += l;
    grad_norm += g;
    ++n;
  }
  void clear() { *this = StepWindow{}; }
  /// Registers the sums for checkpoints (names prefixed "win_").
  void register_state(seqlab::CheckpointState& state);
};

/// Key of a padding share for maps and stream seeds (micro-units, exact for the configured values).
std::int64_t share_key(double p);

/// The shares 0, step, 2·step, ..., up to max (inclusive within 1e-9).
std::vector<double> share_grid(double max, double step);

}  // namespace norm_stability

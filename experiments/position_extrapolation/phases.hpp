#pragma once
// position_extrapolation's training (main.cpp): one training phase of a model on a task, and the
// learning-rate pilot every arm gets (DESIGN.md "Verdicts": the same tuning procedure for every
// arm, a learning rate from a stated grid chosen on a validation split).
//
// Learning-rate pilot. For each learning rate of the task's grid (lr_grid_<task>, or lr_grid when
// that is none), a fresh model (the pilot's own initialisation stream, the same for every arm of the
// replicate-0 streams) trains pilot_steps updates (0: the task's steps_<task>, the arm's own
// training budget, so the trial is a whole training run: a short pilot favours large rates, which
// then stall on the plateau of the retrieval tasks) with AdamW, the cell's schedule kind over those
// updates and warm-up min(warmup_steps, updates / 10), and is scored on a validation set: text, the first pilot_tokens targets of the
// corpus' validation split in non-overlapping windows of L_train; synthetic tasks, eval_batch rows
// of length L_train from their own stream. experiment::choose_lr picks the lowest finite validation
// loss. The choice depends on the arm (task, encoding, sizes, grid) and the base seed only, not on
// the replicate, so every replicate of an arm trains with the same learning rate; it is computed
// once and cached in <out>/pilots/<hash>.json (written atomically; two cells computing it at once
// write the same bytes), so the other replicates read it. The main table records the choice and
// every trial's validation loss.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/experiment/training.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/tasks/task.hpp"

namespace position_extrapolation {

using seqlab::experiment::Cell;
using seqlab::experiment::CellOutput;
using seqlab::experiment::Row;

/// The optional parts of a training phase.
struct PhaseExtras {
  std::function<void()> after_backward;  // called after every update's backward pass (gradients complete)
  std::string schedule;                  // schedule kind (constant | cosine); empty = the cell's `schedule`
  int every = 0;                         // curve window in updates; 0 = the cell's log_every
  std::function<void(int step)> at_window;  // called after each window's curve row, model in eval mode
};

/// One training phase `phase` (pretrain, finetune_<encoding>[_<k>], pilot<k>) of `model`: `steps`
/// updates of the cell's optimizer (weight_decay, clip_norm) at peak `lr` with the cell's schedule
/// kind (or extras.schedule) and `warmup` updates of warm-up, on fresh batches of `batch` rows of
/// `task` drawn from `rng` (a padded task's mask is set per batch). With `curve`, one row per window
/// of extras.every (default log_every) updates and one after the last goes to table "steps" (the
/// columns of `curve` + phase), and extras.at_window(updates done) is called after it (e.g. to
/// evaluate; rows it adds are checkpointed with the phase). Checkpointed as the cell's phase `phase`.
seqlab::experiment::PhaseResult train_phase(const Cell& cell, CellOutput& out, seqlab::SequenceModel& model,
                                            const seqlab::Task& task, seqlab::Rng& rng, const std::string& phase,
                                            const Row* curve, int steps, double lr, int warmup,
                                            std::size_t batch, const PhaseExtras& extras = {});

struct PilotResult {
  double lr = 0;                 // the chosen learning rate
  std::vector<double> grid;      // lr_grid_of(cell), in order
  std::vector<double> val_loss;  // each trial's validation loss (inf: diverged)
  bool all_diverged = false;
  bool from_cache = false;
};

/// The task's learning-rate grid: lr_grid_<task>, or lr_grid when that is empty ("none").
std::vector<double> lr_grid_of(const Cell& cell);
/// Updates per pilot trial: pilot_steps, or steps_<task> when pilot_steps is 0.
int pilot_steps_of(const Cell& cell);

/// The arm's learning rate (file comment). trial(lr) trains a fresh model and returns its
/// validation loss; it runs only when the cache holds no result for this arm. A cached result
/// prints a note to stderr unless the cell is quiet ("learning-rate pilot read from '<file>'").
PilotResult lr_pilot(const Cell& cell, const std::function<double(double lr)>& trial);

/// "0.001:1.52;0.002:1.49" for the main table.
std::string pilot_text(const PilotResult& p);

}  // namespace position_extrapolation

#pragma once
// norm_stability's runs of a cell (main.cpp's file comment: the study's sub-design, one training
// run per point) and what each is built from: the registry's majority task, the model's
// configuration and the learning-rate schedule.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/experiment/grid.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/schedule.hpp"

namespace norm_stability {

using seqlab::experiment::Cell;

/// One training run: the cell's fixed values with the study's axis value applied.
struct RunSpec {
  std::string norm;
  std::string placement;
  std::size_t batch = 0;
  double pad_fraction = 0;
  int warmup_steps = 0;
  double lr = 0;
};

/// The runs of `cell`, in the study's order: batch (one per batch_sizes value), padding (per
/// pad_fractions value) or warmup (placements x warmups x lrs, the last varying fastest).
std::vector<RunSpec> runs_of(const Cell& cell);

/// The registry's majority task of the cell (seq_len, n_classes, n_noise, min_len) at padding
/// fraction `pad_fraction`. Throws std::invalid_argument "MajorityTask: pad_fraction = ...: ..."
/// if it is too large for seq_len and min_len.
std::unique_ptr<seqlab::Task> make_cell_task(const Cell& cell, double pad_fraction);

/// The run's Transformer encoder: input and sizes from the task's spec, a per-position head whose
/// logits the experiment pools (evaluation.hpp), no dropout.
seqlab::ModelConfig model_config(const Cell& cell, const RunSpec& run, const seqlab::TaskSpec& spec);

/// Linear warm-up of run.warmup_steps to run.lr, then the cell's schedule over `steps`.
seqlab::LrSchedule make_schedule(const Cell& cell, const RunSpec& run);

/// Key of a padding fraction for maps and test-set seeds (micro-units, exact for the configured
/// values).
std::int64_t pad_key(double p);

}  // namespace norm_stability

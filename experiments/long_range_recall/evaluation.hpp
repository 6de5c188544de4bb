#pragma once
// long_range_recall's evaluation and its tables (main.cpp): the fixed test set, the scores at the
// dependent positions (TaskBatch::distances > 0), and the distance, gradient-norm and attention
// tables. Columns: README.md beside this file.
#include <cstddef>
#include <string>
#include <vector>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/tasks/task.hpp"

namespace long_range_recall {

using seqlab::experiment::Cell;
using seqlab::experiment::CellOutput;
using seqlab::experiment::Row;

/// The fixed test set of a cell, from the replicate's test stream: one batch (copy memory,
/// adding), one per P (mqar, in mqar_pairs order) or one per evaluated distance (the probe).
struct TestSet {
  std::vector<seqlab::TaskBatch> batches;
  std::vector<int> groups;  // mqar: P of each batch (the distance table's n_pairs); else 0
  /// The batch the attention example comes from: mqar the largest P (the last); the probe the
  /// middle evaluated distance (the largest puts the symbol at position 0, where attention heads
  /// also park probability by default, which would hide the mechanism).
  std::size_t attention_batch = 0;
};

/// The distances the probe is evaluated at: `bins` values spread evenly over [1, seq_len - 1]
/// (rounded, repeats dropped).
std::vector<int> probe_distances(int seq_len, int bins);

/// One scored test item at a dependent position: its group (mqar P), dependency distance, loss
/// (nats or squared error) and correctness (NaN for regression).
struct Item {
  int group;
  int distance;
  double loss;
  double correct;
};

struct Evaluation {
  double test_loss = 0;      // mean over every scored position (copy memory: blanks included)
  double test_accuracy = 0;  // over the dependent positions (NaN for regression)
  std::vector<Item> items;   // dependent positions, for the distance table
  std::size_t example = 0;   // row of the attention batch: the first whose dependent positions
  bool solved = false;       // are all correct (adding: |error| < kAddingSolvedTol), if any
};

/// The baselines of a test set whose batch k comes from a task with spec specs[k] (tasks/task.hpp:
/// the best predictor that ignores the dependency), pooled over the batches by their scored
/// positions: loss over every scored position, accuracy over the dependent ones.
struct Baseline {
  double loss = 0;
  double dependent_accuracy = 0;
};
Baseline pooled_baseline(const TestSet& test, const std::vector<seqlab::TaskSpec>& specs);

/// Scores `model` (in eval mode) on every batch of `test`; `values`: a regression task.
Evaluation evaluate(seqlab::SequenceModel& model, const TestSet& test, bool values);

/// The grad_norms table: one row per position of ‖∂L/∂u_t‖ `g` for `phase` (init | trained).
void add_grad_rows(CellOutput& out, const Row& id, const std::string& phase, const std::vector<double>& g);
/// The distance table (README.md): items grouped by (group, distance bin); the baseline of a
/// group is the dependent-position baseline of the task of its batches (specs as pooled_baseline).
void add_distance_rows(CellOutput& out, const Row& id, const Cell& cell, const seqlab::TaskSpec& spec,
                       const TestSet& test, const std::vector<seqlab::TaskSpec>& specs,
                       const std::vector<Item>& items);
/// The attention table: last layer, every head, of a forward on the chosen test example (a
/// TransformerModel only; nothing for the other families).
void add_attention_rows(CellOutput& out, const Row& id, seqlab::SequenceModel& model, const TestSet& test,
                        const Evaluation& ev);

}  // namespace long_range_recall

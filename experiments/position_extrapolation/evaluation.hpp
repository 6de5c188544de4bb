#pragma once
// position_extrapolation's data and evaluation (main.cpp): the cell's task at any row length, the
// evaluation of a trained model at one length, scored by where each prediction lies and how far
// back its evidence is, and the baselines of each test set (the eval table; columns: README.md
// beside this file).
//
// Tasks (key task):
//   text     character (or byte) language modelling on a corpus (tasks/text.hpp): the KJV from
//            Debian by default, or any file (`corpus`, `unit`, `valid_fraction`, `test_fraction`);
//            training windows from the train split; evaluation on the first eval_tokens targets
//            of the test split in Press et al.'s two modes (non-overlapping and sliding windows);
//   copy     previous_token with lag copy_lag (<= L_train / 2): the target is the token copy_lag
//            positions back, at every length the same relative offset;
//   mqar     mqar_scattered: key-value pairs and queries anywhere in the row;
//   passkey  passkey: distinct digits at a random depth in filler, asked for at the end.
// Synthetic rows are all exactly the row length (no padding).
//
// Buckets of the scored positions: all; within_train_len / beyond_train_len by the position t of
// the prediction in its window (t < L_train or not); distance_within_train_len /
// distance_beyond_train_len by how far back the evidence lies (TaskBatch::distances < L_train or
// not; mqar and passkey only).
//
// Legend: B rows (windows), W batch width (padded length), L evaluation length.
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/tasks/text.hpp"
#include "seqlab/train/metrics.hpp"

namespace position_extrapolation {

using seqlab::experiment::Cell;
using seqlab::experiment::CellOutput;
using seqlab::experiment::Row;

/// The corpus of a text cell (keys corpus, unit, valid_fraction, test_fraction; the fractions only
/// for a corpus file, the KJV is split by book). Throws seqlab::ConfigError naming the key, as
/// TextCorpus::open.
std::shared_ptr<const seqlab::TextCorpus> open_corpus(const Cell& cell);

/// The cell's task with rows (windows) of `len` tokens: text windows of `split` of `corpus`
/// (non-null for task text), or the registry's synthetic task (file comment). Throws ConfigError or
/// std::invalid_argument as make_task.
std::unique_ptr<seqlab::Task> cell_task(const Cell& cell, std::size_t len,
                                        const std::shared_ptr<const seqlab::TextCorpus>& corpus,
                                        seqlab::TextSplit split = seqlab::TextSplit::train);

enum Bucket { kAll = 0, kWithin = 1, kBeyond = 2, kNear = 3, kFar = 4 };
using BucketSums = std::array<seqlab::ScoreSums, 5>;

/// The baseline of one test set: the best predictor that ignores the dependency (README "Output").
struct Baseline {
  double accuracy = 0;
  double loss = 0;
};

/// Scores `model` (eval mode) on the synthetic test set `test` [B, L], widened to max(width, L)
/// columns of padding (token 0, not scored, padding 1: a causal model's outputs at the real
/// positions do not change, but RoPE's context length, and with it a fixed interpolation scale,
/// becomes the width). In chunks whose attention probabilities stay within 2^22 floats.
BucketSums evaluate_rows(seqlab::SequenceModel& model, const seqlab::TaskBatch& test, std::size_t width,
                         std::size_t L_train, std::size_t n_heads);
/// The same over every chunk of a text evaluation (tasks/text.hpp TextEvaluation); t is the
/// position in the window.
BucketSums evaluate_text(seqlab::SequenceModel& model, const seqlab::TextEvaluation& eval, std::size_t width,
                         std::size_t L_train, std::size_t n_heads);

/// The baseline of a synthetic test set: copy, the most frequent symbol of the row up to the
/// prediction (a tie: uniform among the tied; loss −ln(c_target / (t + 1)), the empirical
/// frequency); mqar, ScatteredAssociativeRecall::key_agnostic; passkey, the spec's (uniform among
/// the unused digits).
Baseline synthetic_baseline(const Cell& cell, const seqlab::TaskBatch& test, const seqlab::TaskSpec& spec);

/// The evaluation of one model at every length L = r·L_train, r in `ratios`: text in both modes
/// on the first eval_tokens targets of the corpus' test split (baseline: the unigram of the train
/// split), synthetic tasks on `tests` (one test set per ratio; synthetic_baseline). Writes the
/// eval table's rows (add_eval_rows) under `id`. width: the padded width (a fixed interpolation
/// scale for a fine-tuned rope_pi / rope_ntk), 0 = none.
struct Evaluator {
  const Cell& cell;
  std::vector<std::size_t> ratios;
  std::shared_ptr<const seqlab::TextCorpus> corpus;  // text only
  std::vector<seqlab::TaskBatch> tests;              // synthetic only: one per ratio
  seqlab::TaskSpec spec;

  void run(CellOutput& out, seqlab::SequenceModel& model, const Row& id, std::size_t width) const;
};

/// The eval table's rows of one evaluation: one per bucket (the distance buckets only when
/// `distances`), with mode (rows | non_overlapping | sliding) and stride (0 for rows).
void add_eval_rows(CellOutput& out, const Row& id, const std::string& mode, std::size_t stride,
                   std::size_t L_train, std::size_t eval_len, const BucketSums& sums, const Baseline& base,
                   bool distances);

}  // namespace position_extrapolation

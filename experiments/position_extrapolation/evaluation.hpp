#pragma once
// position_extrapolation's data and evaluation (main.cpp): the cell's task from the task registry
// (tasks/task.hpp) at any range of row lengths, and the evaluation of a trained model on a test
// set of one length, scored by the position of each prediction (the eval table; columns:
// README.md beside this file).
//
// Tasks: copy = repeat_copy (alphabet copy_alphabet), mqar = mqar (min_len >= 1: variable-length
// padded rows), char_lm = char_lm (windows of the text file `corpus`, its train or test split).
// Every batch is right-padded to the longest row length of its range, with a key-padding mask.
//
// Legend: B batch, W batch width (padded length).
#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/tasks/task.hpp"
#include "seqlab/train/metrics.hpp"

namespace position_extrapolation {

using seqlab::experiment::Cell;
using seqlab::experiment::CellOutput;
using seqlab::experiment::Row;

/// The char_lm text file of a cell: `corpus`, or for "default" the committed synthetic corpus
/// experiments/position_extrapolation/data/corpus.txt.
std::string corpus_path(const Cell& cell);

/// The cell's task (key task: copy | mqar | char_lm) from the task registry with rows of lengths
/// uniform in [lo, hi], right-padded to hi; char_lm draws windows of the corpus' `split`
/// ("train" | "test"). Throws std::logic_error for another task; ConfigError (models/
/// model_config.hpp) or std::invalid_argument as make_task for parameters it rejects.
std::unique_ptr<seqlab::Task> cell_task(const Cell& cell, std::size_t lo, std::size_t hi,
                                        const std::string& split);

/// Scored positions by where the prediction lies: every position, t < L_train, t >= L_train.
enum Bucket { kAll = 0, kWithin = 1, kBeyond = 2 };
using BucketSums = std::array<seqlab::ScoreSums, 3>;

/// Scores `model` (in eval mode) on `test` (tokens, targets, padding [B, W0]) widened to
/// max(width, W0) columns: the extra columns are padded (token 0, not scored, padding 1), so a
/// causal model's outputs at the real positions do not change, but RoPE's context length — and so
/// rope_pi's scale — becomes the width. evaluate_chunked (train/metrics.hpp) in chunks whose
/// attention probabilities (B·n_heads·W·W floats) stay within 2^22 floats; sums per bucket.
BucketSums evaluate_buckets(seqlab::SequenceModel& model, const seqlab::TaskBatch& test, std::size_t width,
                            std::size_t L_train, std::size_t n_heads);

/// The eval table's three rows (one per bucket) of one evaluation at length `eval_len`; `id` holds
/// the identifying columns; the chance columns are the task's baselines (TaskSpec).
void add_eval_rows(CellOutput& out, const Row& id, std::size_t L_train, std::size_t eval_len,
                   const BucketSums& sums, const seqlab::TaskSpec& spec);

}  // namespace position_extrapolation

#pragma once
// attention_ablations' arms (main.cpp): the `arm` key's task:arch:qk:n_heads values, the data of
// an arm — a task-registry task (tasks/task.hpp) laid out for the arm's architecture — and the
// arm's model at a matched parameter count. Layouts, models and the CSV columns: README.md beside
// this file.
//
// Layouts (T = seq_len, V = vocab; TaskBatch, encoder-decoder batches with decoder_tokens):
//   prev_token, mqar, induction   the registry's batch (previous_token, mqar, induction_copy)
//   majority                      registry majority at pad_fraction 0 (no padded position: the
//                                 all-zero mask is dropped); encoder_decoder: source = the tokens,
//                                 decoder input = [bos], target = the label [B, 1]
//   reverse                       registry reverse, layout prefix_lm (decoder), tagging (encoder),
//                                 seq2seq (encoder_decoder)
//   lm                            registry markov_lm; decoder: trained on every position, scored
//                                 (eval) on the continuation t >= T/2 only; encoder_decoder:
//                                 source = x_<T/2, decoder input = [bos, x_T/2 .. x_T-2], target
//                                 = x_T/2 .. x_T-1
// bos (majority, lm encoder-decoder) is one extra token id = the task's vocabulary size.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/tasks/task.hpp"

namespace attention_ablations {

using seqlab::experiment::Cell;

/// The random stream of the lm task's Markov table (Cell::stream_seed; main.cpp lists the others).
constexpr std::uint64_t kGrammarStream = 5;

extern const std::vector<std::string> kTasks, kArchs, kQk;

/// One value of the `arm` key: "task:arch:qk:n_heads".
struct Arm {
  std::string task, arch, qk;
  std::size_t n_heads = 0;
};

/// Parses `text`. Throws experiment::ConfigError naming the key `arm`, the value and the allowed
/// syntax: not four fields, an unknown task / arch / qk, n_heads not an integer in [1, 999999] or
/// not dividing d_model, or an architecture that cannot run the task.
Arm parse_arm(const std::string& text, std::size_t d_model);

/// The data of an arm: batches in the arm's layout (file comment), its spec (vocabulary with bos,
/// head, classes) and the task's chance and ceiling.
class ArmTask {
 public:
  /// The task of `arm` from the cell's task keys. Throws experiment::ConfigError naming the key
  /// for sizes the task rejects (also called from validate, before anything runs).
  ArmTask(const Cell& cell, const Arm& arm);

  /// `batch` examples from `rng`. `eval`: decoder-only lm scores only the continuation (the
  /// positions the encoder-decoder is scored on); training scores every position.
  seqlab::TaskBatch sample(std::size_t batch, seqlab::Rng& rng, bool eval) const;

  /// The arm's layout: vocab_size (with bos), output_size, head, seq_len (the source's),
  /// decoder_len, baseline_* (chance), best_accuracy, optimal_loss.
  const seqlab::TaskSpec& spec() const { return spec_; }

 private:
  Arm arm_;
  std::unique_ptr<seqlab::Task> task_;
  seqlab::TaskSpec spec_;
};

/// The model of an arm and its parameter budget.
struct ModelChoice {
  seqlab::ModelConfig cfg;
  std::size_t budget = 0;  // count_parameters of the decoder-only reference at d_model
  std::size_t encoder_layers = 0, decoder_layers = 0;
};

/// The arm's model. encoder / decoder: d_model, num_layers (both have the same count). encoder_
/// decoder: num_layers / 2 per stack, the largest width D' (a multiple of n_heads; even for
/// sinusoidal, with an even head size for rope) whose parameter count at d_ff = ff_mult·D' is <=
/// the budget, the count of the decoder-only model of this task at d_model; then d_ff raised to
/// the largest value that keeps the count <= the budget. Throws experiment::ConfigError naming
/// num_layers (odd) or d_model (no width fits).
ModelChoice choose_model(const Cell& cell, const Arm& arm, const seqlab::TaskSpec& spec);

/// One forward of `b` (logits [B, T_out, O]): the encoder-decoder reads tokens and decoder_tokens.
seqlab::Tensor3 forward(seqlab::SequenceModel& model, const seqlab::TaskBatch& b);

}  // namespace attention_ablations

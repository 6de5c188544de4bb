#pragma once
// long_range_recall's tasks, models, data splits and losses (main.cpp runs them): what a cell
// builds from its keys. Keys and columns: README.md beside this file.
//
// Legend: B batch, S seq_len, P mqar key-value pairs, d dependency distance.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/task.hpp"

#include "evaluation.hpp"

namespace long_range_recall {

// Purposes of the replicate's random streams (Cell::stream_seed): shared by every task, model,
// length and width with the same replicate index, so comparisons across the grid are paired.
inline constexpr std::uint64_t kInitStream = 1;   // parameter initialisation
inline constexpr std::uint64_t kTrainStream = 2;  // training batches
inline constexpr std::uint64_t kTestStream = 3;   // the fixed test set
inline constexpr std::uint64_t kGradStream = 4;   // the batch of the gradient-norm measurement
inline constexpr std::uint64_t kValStream = 5;    // the validation split (pilot, early stopping)

/// The arms of the model sweep: the models/ factory's families, plus lstm_fb1 = lstm with
/// forget-gate bias 1 at initialisation (ModelConfig::forget_bias; Gers et al. 2000,
/// Jozefowicz et al. 2015); and each of these with the suffix "_long": the same model trained
/// without early stopping for long_steps updates at the fixed rate long_lr (main.cpp).
const std::vector<std::string>& model_arms();

/// Whether `arm` is a "_long" arm.
bool is_long_arm(const std::string& arm);

/// The arm without its "_long" suffix ("lstm_fb1_long" -> "lstm_fb1").
std::string base_arm(const std::string& arm);

/// The registry parameters of the cell's task: `length` is copy memory's blank length T and the
/// sequence length of the others; mqar with P pairs (= queries), the probe at a fixed distance d
/// (0: uniform over [1, length - 1]).
seqlab::TaskParams task_params(const Cell& cell, int pairs = 0, int distance = 0);

/// The training tasks of a cell: one, or for mqar one per P of mqar_pairs (update s draws from
/// P = mqar_pairs[s mod n]). The spec of the cell is the last one's (the largest P for mqar).
std::vector<std::unique_ptr<seqlab::Task>> training_tasks(const Cell& cell);

/// The model of a cell: width = 0 matches param_budget (hidden_size_for_budget) when it is > 0;
/// width > 0 sets hidden_size (H, TCN channels, Transformer d_model) and matches nothing (the
/// width study); with fill_budget = 1 the matched Transformer's d_ff is then raised to fill the
/// budget. lstm_fb1 is lstm with forget_bias = 1. Throws ConfigError (an
/// std::invalid_argument naming the key) for a bad combination.
seqlab::ModelConfig model_config(const Cell& cell, const seqlab::TaskSpec& task);

/// The fixed test set from stream `stream` of replicate `replicate` (evaluation.hpp): `n`
/// sequences per batch; the probe at its evaluated distances (`probe_at_distances`) or, for a
/// validation split, at distances drawn as in training.
TestSet make_split(const Cell& cell, const std::vector<std::unique_ptr<seqlab::Task>>& train,
                   std::size_t replicate, std::uint64_t stream, std::size_t n, bool probe_at_distances);

/// The baselines of a split (evaluation.hpp pooled_baseline) with its tasks' specs.
std::vector<seqlab::TaskSpec> split_specs(const Cell& cell, const TestSet& split,
                                          const std::vector<std::unique_ptr<seqlab::Task>>& train);

/// Forward and backward of the loss on `b` (cross-entropy over its scored targets, or MSE).
double loss_and_grad(seqlab::SequenceModel& model, const seqlab::TaskBatch& b, seqlab::CrossEntropyLoss& ce);

/// Gradient norms ‖∂L/∂u_t‖ [S] for the loss on the dependent positions of a fixed batch of the
/// last training task (copy memory: the recall positions only), model in eval mode. Leaves the
/// parameter grads zeroed and the model in train mode.
std::vector<double> input_grad_norms(seqlab::SequenceModel& model, const Cell& cell, const seqlab::Task& task);

}  // namespace long_range_recall

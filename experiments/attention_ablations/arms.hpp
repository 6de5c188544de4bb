#pragma once
// attention_ablations' arms (main.cpp): the `arm` key's values, the data of an arm — a task in the
// layout of the arm's architecture — and the arm's model at a matched parameter count. Layouts,
// models and the CSV columns: README.md beside this file.
//
// An arm is "task:arch:qk:n_heads", optionally followed by "/key=value" overrides of the
// experiment's other keys for this arm only (e.g. "lag_pair:decoder:separate:8/d_model=128/
// num_layers=1"): the sub-designs need different widths, depths and lengths in one grid. Two
// override keys exist for arms only (not keys of the experiment, so adding them never changes
// another arm's cells):
//   seeds=N        the arm has replicates 0..N-1 only (N in [1, 100000]; the grid's `seeds` key
//                  is the most any arm has): a pilot-only or one-seed arm beside 5-seed ones;
//   seed_offset=K  the arm's replicate r runs with the streams (data, initialisation, test sets)
//                  of replicate r + K, and is reported as seed r + K (K in [0, 100000]): fresh
//                  seeds of an existing arm (e.g. "<arm>/seed_offset=5" adds seeds 5..9).
// Neither changes the learning rate: the pilot of an arm is that of the arm without these two keys
// (on replicate 0's streams), shared with it when both run from one build (main.cpp).
//
// Layouts (T = seq_len, V = vocab; TaskBatch, encoder-decoder batches with decoder_tokens):
//   prev_token, mqar, induction,   the registry's batch (previous_token, mqar, induction_copy,
//   lag_pair                        lag_pair)
//   majority                       registry majority at pad_fraction 0; encoder_decoder: source =
//                                  the tokens, decoder input = [bos], target = the label [B, 1]
//   reverse, dup_tag               a (source x, target y) pair of n symbols each: reverse y_i =
//                                  x_{n-1-i} with n drawn per batch from the training lengths
//                                  (reverse_min_len..reverse_max_len without reverse_holdout),
//                                  dup_tag (registry duplicate_tag, n = T) y_i = 1 if x_i occurs
//                                  elsewhere in x. Ids: symbols 0..V-1, sep = V, target token c
//                                  = V+1+c. encoder: tokens x, targets y (tagging); decoder and
//                                  prefix_lm: tokens [x, sep, y_0 .. y_{n-2}] [B, 2n], targets
//                                  [ignore × n, y] (prefix_lm: the first n+1 positions visible to
//                                  every query); encoder_decoder(_compute): source x, decoder
//                                  input [sep, y_0 .. y_{n-2}], targets y
//   lm (order-2 Markov source),    a window of T symbols, scored on its continuation (the last
//   continuation (text, corpus)    T - T/2) in every arm, trained on the same positions:
//                                  decoder, prefix_lm: tokens w_0 .. w_{T-2}, targets w_1 ..
//                                  w_{T-1} with the first T/2 - 1 ignored (prefix_lm: the first
//                                  T/2 positions visible to every query); encoder_decoder(_
//                                  compute): source w_<T/2, decoder input [bos, w_T/2 .. w_T-2],
//                                  targets w_T/2 .. w_T-1
//   text                           the registry's text windows: tokens w_<T, targets w_1..w_T,
//                                  every position scored (decoder only)
// bos (majority, lm, continuation encoder-decoder) is one extra token id = the task's vocabulary.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/models/sequence_model.hpp"
#include "seqlab/nn/attention.hpp"
#include "seqlab/tasks/task.hpp"

namespace seqlab {
class TextCorpus;
}

namespace attention_ablations {

using seqlab::experiment::Cell;
using seqlab::experiment::OptionSpec;

/// The random stream of the lm task's Markov table (Cell::stream_seed; main.cpp lists the others).
constexpr std::uint64_t kGrammarStream = 5;

extern const std::vector<std::string> kTasks, kArchs, kQk;

/// One value of the `arm` key: "task:arch:qk:n_heads[/key=value...]".
struct Arm {
  std::string task, arch, qk;
  std::size_t n_heads = 0;
  std::vector<std::pair<std::string, std::string>> overrides;  // of experiment keys, in the order given
  std::size_t seeds = 0;        // the arm-only key seeds (0: not given, every replicate of the grid)
  std::size_t seed_offset = 0;  // the arm-only key seed_offset
  std::string base;             // the arm's text without the arm-only keys (its pilot's arm)
  bool shared() const { return qk != "separate"; }
  /// Reformer's self mask: shared_noself and shared_noself_norm.
  bool mask_self() const { return qk == "shared_noself" || qk == "shared_noself_norm"; }
  /// Reformer's unit-length keys (MultiheadAttention::set_normalize_keys): shared_noself_norm.
  bool normalize_keys() const { return qk == "shared_noself_norm"; }
  bool encoder_decoder() const { return arch == "encoder_decoder" || arch == "encoder_decoder_compute"; }
};

/// The syntax of `text`. Throws experiment::ConfigError naming the key `arm`, the value and the
/// allowed syntax: not four ':'-separated fields, an unknown task / arch / qk, n_heads not an
/// integer in [1, 999999], an architecture that cannot run the task, an override that is not
/// key=value or names `arm` or a key twice, seeds not an integer in [1, 100000] or seed_offset
/// not one in [0, 100000].
Arm parse_arm(const std::string& text);

/// The cell as the arm sees it: a copy of `cell` with the arm's overrides parsed by their keys'
/// specs in `options` and set, and with seed_offset: replicate and seed those of replicate
/// cell.replicate + seed_offset. Stores the parsed arm in *arm. Throws experiment::ConfigError for
/// a bad arm, an unknown override key, a value its key rejects, or n_heads not dividing d_model.
Cell resolve_cell(const Cell& cell, const std::vector<OptionSpec>& options, Arm* arm);

/// The keys a cell never reads (ExperimentSpec::unread_keys): reverse_valid outside reverse's arms
/// (none for an arm that does not parse: validate reports it).
std::vector<std::string> unread_keys(const Cell& cell);

/// Whether the grid point is a cell (ExperimentSpec::keep): its replicate is below the arm's
/// seeds (always true without the key, or for an arm that does not parse: validate reports it).
bool keep_cell(const Cell& cell);

/// Which fixed set to draw (ArmTask::fixed_set).
enum class SetKind {
  valid,  // validation split: the learning-rate pilot, eval curve, head importance (text: the corpus's valid
          // split; reverse: the held-out lengths, or the training lengths with reverse_valid = train)
  test,   // test split (text: the corpus's test split; reverse: the held-out lengths)
  seen    // reverse only: the training lengths (in-distribution test)
};

/// The data of an arm: batches in the arm's layout (file comment), its spec (vocabulary with bos,
/// head, classes) and the task's baseline and ceiling.
class ArmTask {
 public:
  /// The task of `arm` from the (resolved) cell's task keys. Throws experiment::ConfigError
  /// naming the key for sizes the task rejects (also called from validate, before anything runs).
  ArmTask(const Cell& cell, const Arm& arm);
  ~ArmTask();

  /// A training batch of `batch` examples from `rng` (reverse: of one training length drawn first).
  seqlab::TaskBatch sample(std::size_t batch, seqlab::Rng& rng) const;
  /// A fixed set of about `rows` examples from `rng`, as batches of one length each (reverse:
  /// rows / (number of lengths) per length, at least 1, of the held-out lengths for test, and for
  /// valid unless reverse_valid = train, else of the training lengths; the others: one batch).
  std::vector<seqlab::TaskBatch> fixed_set(SetKind kind, std::size_t rows, seqlab::Rng& rng) const;
  /// The prefix-LM mask for batch `b` on every self-attention of `model` (prefix_lm arms: the
  /// source and separator, or the first T/2 symbols; others: none). Call before each forward.
  void prepare(seqlab::SequenceModel& model, const seqlab::TaskBatch& b) const;

  /// The arm's layout: vocab_size (with bos / sep / target tokens), output_size, head, seq_len,
  /// decoder_len, baseline_* (the best predictor that ignores the dependency), best_accuracy,
  /// optimal_loss.
  const seqlab::TaskSpec& spec() const { return spec_; }
  /// Mean lengths of the stacks' inputs over the training distribution (single stack: src only):
  /// for forward_macs.
  double mean_src_len() const { return mean_src_; }
  double mean_tgt_len() const { return mean_tgt_; }
  /// Reverse's training and held-out lengths (empty for the other tasks).
  const std::vector<int>& train_lengths() const { return train_lengths_; }
  const std::vector<int>& holdout_lengths() const { return holdout_lengths_; }

 private:
  seqlab::TaskBatch transduction(const seqlab::TaskBatch& pair, int n) const;
  seqlab::TaskBatch window(const seqlab::TaskBatch& w) const;
  seqlab::TaskBatch draw(std::size_t batch, seqlab::Rng& rng, SetKind kind, int length) const;

  Arm arm_;
  std::unique_ptr<seqlab::Task> task_;               // registry task (not reverse, not text)
  std::shared_ptr<const seqlab::TextCorpus> corpus_;  // text, continuation
  std::size_t window_ = 0;                            // text, continuation: symbols per window
  int symbols_ = 0, classes_ = 0;                     // reverse, dup_tag: S and C
  std::vector<int> train_lengths_, holdout_lengths_;  // reverse
  bool valid_on_train_ = false;                       // reverse: reverse_valid = train
  seqlab::TaskSpec spec_;
  double mean_src_ = 0, mean_tgt_ = 0;
};

/// The model of an arm and its parameter budget.
struct ModelChoice {
  seqlab::ModelConfig cfg;
  std::size_t budget = 0;  // count_parameters of the reference (decoder-only, separate W_Q, W_K)
  std::size_t encoder_layers = 0, decoder_layers = 0;
};

/// The arm's model. encoder / decoder / prefix_lm: d_model, num_layers (the same count); with
/// shared_match = d_ff a shared-QK model's d_ff is raised to the largest value whose count is <=
/// the budget (the separate model's count). encoder_decoder (parameter-matched): num_layers / 2
/// per stack, the largest width D' (a multiple of n_heads; even for sinusoidal, with an even head
/// size for rope) whose count at d_ff = ff_mult·D' is <= the budget, then d_ff raised to the
/// largest value that keeps it so. encoder_decoder_compute (compute-matched, Raffel et al. 2020
/// Table 2's "L+L, 2P, M"): num_layers per stack at d_model. Throws experiment::ConfigError naming
/// num_layers (odd, for encoder_decoder) or d_model (no width fits).
ModelChoice choose_model(const Cell& cell, const Arm& arm, const ArmTask& task);

/// Multiply-adds of one forward of one example (matrix products only: projections, attention
/// scores and context, feed-forward, output head) at source length S and decoder length T'
/// (single stack: S only), the compute measure of Raffel et al. 2020 Table 2.
double forward_macs(const seqlab::ModelConfig& cfg, const Arm& arm, double S, double T_dec);

/// Every self-attention of the model (encoder layers, then decoder layers).
std::vector<seqlab::MultiheadAttention*> self_attentions(seqlab::SequenceModel& model);
/// The self-attentions of each layer, one per layer, in order (single-stack models; empty for
/// encoder-decoder models).
std::vector<seqlab::MultiheadAttention*> layer_attentions(seqlab::SequenceModel& model);

/// One forward of `b` (logits [B, T_out, O]) after task.prepare: the encoder-decoder reads tokens
/// and decoder_tokens.
seqlab::Tensor3 forward(seqlab::SequenceModel& model, const ArmTask& task, const seqlab::TaskBatch& b);

}  // namespace attention_ablations

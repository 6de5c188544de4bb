#pragma once
// Task: the one interface through which a generic experiment uses any synthetic task, and the task
// registry that builds tasks by name with named parameters (core/registry.hpp). The task classes
// (copy_memory.hpp, mqar.hpp, ...) keep their own richer APIs (distances, layouts, baselines); the
// registry wraps each in this common form so that `--task=NAME` needs no code per task.
//
// A batch (TaskBatch) is what a SequenceModel consumes and a loss scores:
//   input "embedding":  tokens [B, T] int32 ids in [0, vocab_size)
//   input "linear":     features [B, T, input_size] float
//   target "classes":   targets [B, T] (head per_position) or [B, 1] (head last_position) class ids
//                       in [0, output_size), kIgnoreTarget (-100, CrossEntropyLoss's
//                       ignore_index) at positions that are not scored
//   target "values":    values [B, T or 1, output_size] regression targets (MSE)
//   padded tasks:       padding [B, T], 1 = padded (TransformerModel::set_padding), and lengths
//                       [B], the real length of each right-padded row; else empty
//   encoder-decoder:    tokens [B, S] is the source, decoder_tokens [B, T'] the decoder's input
//                       (teacher forcing: the target shifted right after a bos token), targets
//                       [B, T'] (EncoderDecoderModel::forward(src, tgt_in)); else empty
//   dependency tasks:   distances [B, T or 1]: how far back each scored target's evidence lies
//                       (TaskBatch::distances); else empty
// eval_set(batch) views a batch for evaluate_chunked (train/metrics.hpp); slice_rows(batch, r0, n)
// takes a range of its rows.
// apply_task_spec(spec, cfg) sets the ModelConfig fields that must match (input, vocab_size,
// input_size, output_size, head).
//
// Built-in tasks, in this order (lib/src/tasks/task_registry.cpp), parameters with defaults:
//   copy_memory     T=50 n_memorize=10 n_symbols=8       CopyMemoryTask (Bai et al. 2018 sec. 4)
//   adding          seq_len=50                            AddingProblem (values, last_position)
//   mqar            seq_len=64 n_pairs=8 n_queries=8 n_keys=16 n_values=16 min_len=0
//                                                         MultiQueryAssociativeRecall (Zoology);
//                                                         min_len >= 1: padded, rows of lengths
//                                                         uniform in [min_len, seq_len] (each
//                                                         row's length drawn before its tokens)
//   distance_probe  seq_len=32 n_symbols=8 n_fillers=8 min_distance=1 max_distance=0
//   induction_copy  prefix_len=16 copy_len=8 vocab_size=32
//   markov_lm       seq_len=64 vocab_size=16 order=2 branching=2 grammar_seed=1 (in [0, 2^64))
//   previous_token  seq_len=32 vocab_size=16 lag=1
//   repeat_copy     min_len=9 max_len=17 alphabet=8       padded
//   majority        seq_len=32 pad_fraction=0.25 n_classes=4 n_noise=4 min_len=4
//                                                         padded, last_position: targets [B, 1]
//                                                         hold each row's label
//   reverse         length=8 n_symbols=8 layout=prefix_lm ReverseTask's layouts: prefix_lm [B, 2n]
//                                                         (decoder-only), tagging (tokens x,
//                                                         targets y, [B, n]: encoder-only),
//                                                         seq2seq (tokens x, decoder_tokens
//                                                         [bos, y_<n-1], targets y)
//   char_lm         text_file=(required) test_fraction=0.1 min_len=32 max_len=64 split=train
//                                                         CharCorpus windows, padded
//   text            corpus=kjv unit=char seq_len=64 valid_fraction=0.05 test_fraction=0.05
//                   split=train                           TextTask (tasks/text.hpp): KJV or a file
//   lag_pair        seq_len=32 vocab_size=8 lag_a=1 lag_b=3 LagPairTask: the pair (x_{t-a}, x_{t-b}),
//                                                         V^2 classes
//   duplicate_tag   length=24 vocab_size=32               DuplicateTagTask: 1 where the token
//                                                         occurs elsewhere in the row
//   mqar_scattered  seq_len=64 n_pairs=8 n_queries=4 n_keys=16 n_values=16
//                                                         ScatteredAssociativeRecall: pairs, then
//                                                         queries, at random slots of the row
//   passkey         seq_len=64 n_digits=5 filler_period=5 PasskeyTask (Chen et al. 2023 sec. 3.2)
//
// Adding a task (lib/README.md "Extending seqlab"): the task class (tasks/<name>.hpp + .cpp, a
// deterministic sample(batch, rng)), and one registration line that wraps it:
//   SEQLAB_REGISTER(seqlab::task_registry(), "my_task", seqlab::TaskEntry{"what it tests",
//       {{"seq_len", "32", "tokens"}},
//       [](const seqlab::TaskParams& p) { ...; return seqlab::make_task_from(spec, sampler); }});
// in a .cpp of your executable, or `r.add(...)` in register_builtin_tasks for a library task.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "seqlab/core/registry.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/models/model_config.hpp"
#include "seqlab/train/metrics.hpp"

namespace seqlab {

/// What a task's batches look like (file comment).
struct TaskSpec {
  std::string input = "embedding";    // "embedding" (tokens) | "linear" (features)
  std::size_t vocab_size = 0;         // V: token ids in [0, V) (embedding input)
  std::size_t input_size = 0;         // features per step (linear input)
  std::size_t seq_len = 0;            // T: the width of every batch
  std::string target = "classes";     // "classes" (cross-entropy) | "values" (MSE)
  std::size_t output_size = 0;        // classes, or values per scored position
  std::string head = "per_position";  // "per_position" (targets [B, T]) | "last_position" ([B, 1])
  bool padded = false;                // batches carry a padding mask
  /// The baseline each task documents: the best predictor that ignores what the task tests, on
  /// the scored positions: its mean loss (nats per scored target, or MSE) and accuracy (NaN where
  /// the task defines none, e.g. regression). copy_memory: the most frequent source symbol at
  /// every recall position (it ignores their order); mqar: the most frequent value of the context
  /// (it ignores which key is queried); adding: 2·mean of the values (it ignores the markers);
  /// distance_probe: a uniform guess among the symbols.
  double baseline_loss = std::numeric_limits<double>::quiet_NaN();
  double baseline_accuracy = std::numeric_limits<double>::quiet_NaN();
  /// The same predictor on the dependent positions only (TaskBatch::distances > 0; e.g. copy
  /// memory's recall positions): NaN for tasks that define no distances.
  double dependent_baseline_loss = std::numeric_limits<double>::quiet_NaN();
  double dependent_baseline_accuracy = std::numeric_limits<double>::quiet_NaN();
  /// Encoder-decoder tasks: T', the width of decoder_tokens and targets (seq_len is then the
  /// source's width S); 0 for single-stack tasks.
  std::size_t decoder_len = 0;
  /// The ceiling: the Bayes-optimal predictor's accuracy and mean loss (nats per scored target) on
  /// the scored positions: 1 and 0 where every target is a function of the inputs, the source's
  /// own values for a stochastic one (markov_lm: p_0 and H(p)); NaN where the entry states none.
  double best_accuracy = std::numeric_limits<double>::quiet_NaN();
  double optimal_loss = std::numeric_limits<double>::quiet_NaN();
  /// Padded tasks whose lengths follow a declared distribution: the expected fraction of padded
  /// positions of a batch (majority: exactly 1 - round((1 - pad_fraction)·T)/T,
  /// MajorityTask::expected_pad_fraction); NaN for every other task.
  double expected_pad_fraction = std::numeric_limits<double>::quiet_NaN();
};

/// One batch (file comment); the parts a task does not use are empty (size 0).
struct TaskBatch {
  IndexTensor2 tokens;    // [B, T]             input "embedding"
  Tensor3 features;       // [B, T, D]          input "linear"
  IndexTensor2 targets;   // [B, T] or [B, 1]   target "classes" (kIgnoreTarget: not scored)
  Tensor3 values;         // [B, T or 1, O]     target "values"
  PaddingMask padding;    // [B, T] 1 = padded  padded tasks
  /// [B, T] (or [B, 1] for a last_position head), tasks with a long-range dependency: for a scored
  /// target, how many positions back the token it depends on lies (>= 1), 0 where the target
  /// depends on no earlier token (copy memory's blank targets) or is not scored. Empty for tasks
  /// that define none. Defined by copy_memory (T + n_memorize at every recall position), adding
  /// (the distance from the first marked value to the last step), mqar and mqar_scattered (query
  /// position minus the queried key's position), distance_probe (the probe's distance) and passkey
  /// (from each answer position back to the key digit it copies).
  IndexTensor2 distances;
  /// [B, T'] encoder-decoder tasks: the decoder's input (file comment); tokens is the source.
  IndexTensor2 decoder_tokens;
  /// [B], padded tasks: the real length L_b of each right-padded row, so that padding(b, t) = 1
  /// exactly for t >= L_b (e.g. for pooling over the real positions). Empty for unpadded tasks.
  IndexTensor1 lengths;
};

/// Rows [r0, r0 + n) of every non-empty part of `b` (e.g. one chunk of a test set). Throws
/// std::out_of_range if r0 + n exceeds the batch.
TaskBatch slice_rows(const TaskBatch& b, std::size_t r0, std::size_t n);
/// The number of sequences of `b` (the first dimension of its input), 0 for an empty batch.
std::size_t batch_rows(const TaskBatch& b);
/// Views of `b`'s non-empty parts for evaluate_chunked (train/metrics.hpp); `b` must outlive it.
EvalSet eval_set(const TaskBatch& b);

class Task {
 public:
  virtual ~Task() = default;
  virtual TaskSpec spec() const = 0;
  /// `batch` (>= 1) examples, deterministic given the rng state (the same on every platform).
  /// Throws std::invalid_argument for batch = 0.
  virtual TaskBatch sample(std::size_t batch, Rng& rng) const = 0;
};

/// A Task from its spec and a sampling function (what the built-in entries wrap their task
/// classes with). Throws std::invalid_argument if `sample` is empty.
std::unique_ptr<Task> make_task_from(TaskSpec spec,
                                     std::function<TaskBatch(std::size_t batch, Rng& rng)> sample);

/// Sets cfg.input, vocab_size (embedding) or input_size (linear), output_size and head from spec.
void apply_task_spec(const TaskSpec& spec, ModelConfig& cfg);

/// A task's parameter: key, default value as text ("" = required), and one line of help with the
/// unit ("tokens", "1", ...).
struct TaskParameter {
  std::string name;
  std::string default_value;
  std::string help;
};

/// Parameter values as text (from a config file or --key=value), read with typed accessors that
/// throw ConfigError (models/model_config.hpp) naming the key, the value and what is allowed.
class TaskParams {
 public:
  TaskParams() = default;
  explicit TaskParams(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  void set(const std::string& key, std::string value) { values_[key] = std::move(value); }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  /// The text of `key`. Throws ConfigError(key, "''", "a value (required)") if it is not set or
  /// empty.
  const std::string& get_string(const std::string& key) const;
  /// An integer in [-2^31, 2^31) (the task constructors take int). Throws ConfigError otherwise.
  int get_int(const std::string& key) const;
  /// A finite real. Throws ConfigError otherwise.
  double get_real(const std::string& key) const;
  /// An integer in [0, 2^64) (e.g. a seed from Cell::stream_seed). Throws ConfigError otherwise.
  std::uint64_t get_uint64(const std::string& key) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

struct TaskEntry {
  /// One line for --help and docs (what the task tests, its source).
  std::string description;
  /// Every parameter the task takes, in the order --help lists them.
  std::vector<TaskParameter> parameters;
  /// The task from complete parameters (every declared key set: make_task fills the defaults).
  /// Throws ConfigError (TaskParams' accessors) or std::invalid_argument (the task's constructor,
  /// naming the argument).
  std::function<std::unique_ptr<Task>(const TaskParams& params)> create;
};

/// The registry, built on first use with the built-ins (file comment).
Registry<TaskEntry>& task_registry();
/// task_registry().names(): for --help choices (OptionSpec::one_of) and messages.
const std::vector<std::string>& task_names();

/// The task `name` with `params` over its defaults. Throws ConfigError: key "task" for an
/// unregistered name (allowed: one of the registered names), a key that is not a parameter of
/// the task (allowed: its parameters), a missing required or malformed value; and what the
/// entry's create throws.
std::unique_ptr<Task> make_task(const std::string& name, const TaskParams& params = {});

}  // namespace seqlab

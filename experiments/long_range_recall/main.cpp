// long_range_recall: claim 2 of the README — recurrent state decays over long distances (vanishing
// gradients, even with LSTM gates); attention links any two positions directly (path length O(1),
// against O(n) for recurrence and O(log_k n) for dilated convolutions).
// Anchor: Bai, Kolter & Koltun 2018 (arXiv 1803.01271), Table 1 and Fig. 5 (copy memory and adding
// problem; TCN vs LSTM vs GRU vs RNN). Claim, method, expected outcome and every CSV column:
// README.md beside this file.
//
// One cell = one (task, model, length, replicate): the model is built by the models/ factory at the
// parameter budget `param_budget` (hidden_size_for_budget), trained on fresh batches of the task,
// then evaluated on a fixed test set. Tasks (lib tasks/):
//   copy_memory     CopyMemoryTask(T = length): Bai et al.'s copy memory, CE over all T+20 positions
//   adding          AddingProblem(seq_len = length): Bai et al.'s adding problem, MSE at the last step
//   mqar            MultiQueryAssociativeRecall(seq_len = length, P, Q = P) for every P of
//                   mqar_pairs ("2+4": a mixture; update s draws its batch from P = mqar_pairs[s mod n]),
//                   CE at the query positions (Arora et al. 2023, "Zoology")
//   distance_probe  DistanceProbe(seq_len = length): one symbol to recall at distance d uniform in
//                   [1, length-1], CE at the last position; tested at distance_bins exact distances
// Tables: main (one row per cell), steps (training curve), distance (accuracy / loss against the
// dependency distance), grad_norms (‖∂L/∂u_t‖ against t at initialisation and after training),
// attention (the trained transformer's last-layer attention on one solved test example; replicate
// 0 only).
//
// Legend: B batch, S seq_len (task sequence length), V vocabulary / classes, E embedding_dim,
// H hidden_size (d_model for the transformer), L layers (recurrent layers, TCN levels, transformer
// layers), P key-value pairs, d dependency distance.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/core/tensor.hpp"
#include "seqlab/experiment/experiment.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/models/positional_registry.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/tasks/adding_problem.hpp"
#include "seqlab/tasks/copy_memory.hpp"
#include "seqlab/tasks/distance_probe.hpp"
#include "seqlab/tasks/mqar.hpp"
#include "seqlab/train/loop.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

using namespace seqlab;
using namespace seqlab::experiment;

namespace {

constexpr const char* kName = "long_range_recall";
// Purposes of the replicate's random streams (Cell::stream_seed): shared by every task, model and
// length with the same replicate index, so comparisons across the grid are paired.
constexpr std::uint64_t kInitStream = 1;   // parameter initialisation
constexpr std::uint64_t kTrainStream = 2;  // training batches
constexpr std::uint64_t kTestStream = 3;   // the fixed test set
constexpr std::uint64_t kGradStream = 4;   // the batch of the gradient-norm measurement
// Test sequences are evaluated in chunks of at most this many (bounds the caches' memory).
constexpr std::size_t kEvalChunk = 128;
// The attention table keeps probabilities >= this (the rest plot as 0); it bounds the CSV size.
constexpr double kAttentionMinProb = 0.01;
// An adding-problem test example counts as solved when |prediction - y| < this.
constexpr double kAddingSolvedTol = 0.05;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<std::string> kTasks = {"copy_memory", "adding", "mqar", "distance_probe"};
const std::vector<std::string> kModels = {"rnn", "lstm", "gru", "tcn", "transformer_decoder"};

/// Rows [b0, b0 + n) of a [B, ...] tensor.
IndexTensor2 slice_rows(const IndexTensor2& x, std::size_t b0, std::size_t n) {
  const std::size_t S = x.shape()[1];
  IndexTensor2 y = IndexTensor2::from_shape({n, S});
  std::copy(x.data() + b0 * S, x.data() + (b0 + n) * S, y.data());
  return y;
}
Tensor3 slice_rows(const Tensor3& x, std::size_t b0, std::size_t n) {
  const std::size_t S = x.shape()[1], D = x.shape()[2];
  Tensor3 y = Tensor3::from_shape({n, S, D});
  std::copy(x.data() + b0 * S * D, x.data() + (b0 + n) * S * D, y.data());
  return y;
}

/// mqar_pairs "2+4+8" -> {2, 4, 8}: a non-empty '+'-separated list of distinct integers in
/// [1, 100000] (a mixture of pair counts; non-sweep values may not contain commas).
/// Throws ConfigError naming the key, the value and what is allowed.
std::vector<int> parse_pairs(const std::string& text) {
  const std::string allowed =
      "expected a non-empty '+'-separated list of distinct integers in [1, 100000], e.g. 2+4+8";
  auto fail = [&]() -> std::vector<int> {
    throw experiment::ConfigError("mqar_pairs: invalid value '" + text + "': " + allowed);
  };
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, '+')) {
    const auto a = item.find_first_not_of(" \t");
    const auto b = item.find_last_not_of(" \t");
    if (a == std::string::npos) return fail();
    const std::string t = item.substr(a, b - a + 1);
    if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos) return fail();
    const int v = std::stoi(t);
    if (v < 1 || v > 100000 || std::find(out.begin(), out.end(), v) != out.end()) return fail();
    out.push_back(v);
  }
  if (out.empty() || (!text.empty() && text.back() == '+')) return fail();
  return out;
}

// ------------------------------------------------------------------------------------------------
// Tasks: what a cell needs to know about its task.

struct TaskSetup {
  std::string name;
  int length = 0;               // the `length` key
  int seq_len = 0;              // S
  std::string input;            // embedding | linear
  std::size_t vocab = 0;        // V (embedding input)
  std::size_t input_size = 0;   // features (linear input)
  std::size_t output_size = 0;  // classes or 1
  std::string head;             // per_position | last_position
  double baseline_loss = 0;     // main table: loss of the best predictor ignoring the dependency
  double baseline_accuracy = 0; // its accuracy (NaN for adding)
  double distance_baseline_loss = 0;  // the same on the scored positions (distance table)
  std::vector<int> mqar_pairs;  // mqar only
};

TaskSetup task_setup(const Cell& cell) {
  TaskSetup s;
  s.name = cell.get_string("task");
  s.length = cell.get_int32("length");
  const int L = s.length;
  if (s.name == "copy_memory") {
    const CopyMemoryTask t(L);
    s.seq_len = t.seq_len();
    s.input = "embedding";
    s.vocab = s.output_size = static_cast<std::size_t>(t.vocab_size());
    s.head = "per_position";
    s.baseline_loss = t.memoryless_loss();
    s.baseline_accuracy = t.chance_recall_accuracy();
    s.distance_baseline_loss = t.memoryless_recall_loss();
  } else if (s.name == "adding") {
    s.seq_len = L;
    s.input = "linear";
    s.input_size = AddingProblem::input_size();
    s.output_size = 1;
    s.head = "last_position";
    s.baseline_loss = s.distance_baseline_loss = AddingProblem(L).markerless_mse();
    s.baseline_accuracy = kNaN;
  } else if (s.name == "mqar") {
    s.mqar_pairs = parse_pairs(cell.get_string("mqar_pairs"));
    const int max_p = *std::max_element(s.mqar_pairs.begin(), s.mqar_pairs.end());
    const int n_keys = cell.get_int32("mqar_keys");
    if (n_keys < max_p)
      throw experiment::ConfigError("mqar_keys: invalid value '" + std::to_string(n_keys) +
                        "': expected an integer >= the largest of mqar_pairs (" +
                        std::to_string(max_p) + "; the keys of a sequence are distinct)");
    if (L < 4 * max_p)
      throw experiment::ConfigError("length: invalid value '" + std::to_string(L) +
                        "' for task = mqar: expected an integer >= 4 x the largest of mqar_pairs (" +
                        std::to_string(4 * max_p) + ": P pairs, then P queries in two-token slots)");
    const MultiQueryAssociativeRecall t(L, max_p, max_p, n_keys, cell.get_int32("mqar_values"));
    s.seq_len = L;
    s.input = "embedding";
    s.vocab = s.output_size = static_cast<std::size_t>(t.vocab_size());
    s.head = "per_position";
    s.baseline_loss = s.distance_baseline_loss = t.chance_loss();
    s.baseline_accuracy = t.chance_accuracy();
  } else {  // distance_probe
    const DistanceProbe t(L, cell.get_int32("probe_symbols"), cell.get_int32("probe_fillers"));
    s.seq_len = L;
    s.input = "embedding";
    s.vocab = s.output_size = static_cast<std::size_t>(t.vocab_size());
    s.head = "per_position";
    s.baseline_loss = s.distance_baseline_loss = t.chance_loss();
    s.baseline_accuracy = t.chance_accuracy();
  }
  return s;
}

/// Smallest TCN depth whose receptive field 1 + 2(k-1)(2^L - 1) covers `seq_len` (at most 30).
std::size_t tcn_levels_for(std::size_t seq_len, std::size_t k) {
  std::size_t L = 1;
  while (L < 30 && 1 + 2 * (k - 1) * ((std::size_t{1} << L) - 1) < seq_len) ++L;
  return L;
}

/// The model of a cell (sizes matched to param_budget when it is > 0). Throws seqlab::ConfigError
/// (an std::invalid_argument naming the key) for a bad combination, which the framework turns
/// into exit status 2 before anything runs.
ModelConfig model_config(const Cell& cell, const TaskSetup& task) {
  ModelConfig mc;
  mc.model = cell.get_string("model");
  mc.input = task.input;
  mc.vocab_size = task.vocab;
  mc.input_size = task.input_size;
  mc.output_size = task.output_size;
  mc.head = task.head;
  mc.dropout = cell.get_float("dropout");
  mc.embedding_dim = cell.get_size("embedding_dim");
  mc.hidden_size = cell.get_size("hidden_size");
  const double ratio = cell.get_real("d_ff_ratio");
  if (mc.is_recurrent()) {
    mc.num_layers = cell.get_size("num_layers");
    mc.nonlinearity = cell.get_string("nonlinearity");
  } else if (mc.model == "tcn") {
    mc.kernel_size = cell.get_size("kernel_size");
    const std::size_t levels = cell.get_size("tcn_levels");
    mc.num_layers = levels > 0 ? levels
                               : tcn_levels_for(static_cast<std::size_t>(task.seq_len), mc.kernel_size);
    mc.weight_norm = cell.get_int("weight_norm") != 0;
  } else {  // transformer_decoder
    mc.num_layers = cell.get_size("transformer_layers");
    mc.n_heads = cell.get_size("n_heads");
    mc.positional_encoding = cell.get_string("positional_encoding");
    mc.norm_placement = cell.get_string("norm_placement");
    mc.max_len = static_cast<std::size_t>(task.seq_len);
    mc.train_len = static_cast<std::size_t>(task.seq_len);
    mc.embedding_dim = mc.hidden_size;
    mc.d_ff = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::llround(ratio * static_cast<double>(mc.hidden_size))));
  }
  const std::size_t budget = cell.get_size("param_budget");
  if (budget > 0) mc = hidden_size_for_budget(mc, budget, ratio);
  mc.validate();
  return mc;
}

void validate(const Cell& cell) {
  experiment::cell_schedule(cell);  // schedule, lr, warmup_steps, steps
  parse_pairs(cell.get_string("mqar_pairs"));  // checked for every task: a bad list is bad input
  model_config(cell, task_setup(cell));  // task/length combinations, budget, model fields
}

// ------------------------------------------------------------------------------------------------
// Evaluation.

/// One scored test item: its dependency distance, loss (CE nats or squared error) and correctness
/// (NaN for adding). `group` = the MQAR pair count (0 for the other tasks).
struct Item {
  int group;
  int distance;
  double loss;
  double correct;
};

/// Per-position cross-entropy of token logits. Calls f(b, t, loss, correct) for every position of
/// `targets` that is not kIgnoreTarget (b relative to the whole test set).
template <class F>
void eval_tokens(SequenceModel& model, const TokenBatch& test, F&& f) {
  const std::size_t n = test.inputs.shape()[0], S = test.inputs.shape()[1];
  CrossEntropyLoss ce(kIgnoreTarget);
  for (std::size_t b0 = 0; b0 < n; b0 += kEvalChunk) {
    const std::size_t nb = std::min(kEvalChunk, n - b0);
    const IndexTensor2 x = slice_rows(test.inputs, b0, nb), y = slice_rows(test.targets, b0, nb);
    const Tensor2 logits = rows_of(model.forward(x));
    const std::size_t V = logits.shape()[1];
    ce.forward(logits, ids_of(y));
    const Tensor1& rl = ce.row_losses();
    const Tensor2& p = ce.probabilities();
    for (std::size_t b = 0; b < nb; ++b) {
      for (std::size_t t = 0; t < S; ++t) {
        if (y(b, t) == kIgnoreTarget) continue;
        const std::size_t row = b * S + t;
        std::size_t arg = 0;  // first maximum, as torch.argmax
        for (std::size_t c = 1; c < V; ++c)
          if (p(row, c) > p(row, arg)) arg = c;
        f(b0 + b, t, static_cast<double>(rl(row)), static_cast<std::int32_t>(arg) == y(b, t));
      }
    }
  }
}

/// Predictions [n] of the adding model on features [n, S, 2].
std::vector<double> predict_adding(SequenceModel& model, const Tensor3& x) {
  const std::size_t n = x.shape()[0];
  std::vector<double> out(n);
  for (std::size_t b0 = 0; b0 < n; b0 += kEvalChunk) {
    const std::size_t nb = std::min(kEvalChunk, n - b0);
    const Tensor3 y = model.forward(slice_rows(x, b0, nb));
    for (std::size_t b = 0; b < nb; ++b) out[b0 + b] = y(b, 0, 0);
  }
  return out;
}

/// Everything the test set gives.
struct Evaluation {
  double test_loss = 0;      // main-table loss (see TaskSetup / README)
  double test_accuracy = 0;  // NaN for adding
  std::vector<Item> items;   // scored items, for the distance table
  // The example drawn for the attention map: its index in `examples`, whether it is solved.
  std::size_t example = 0;
  bool solved = false;
};

/// The test data of a cell, fixed by the replicate's test stream.
struct TestData {
  std::vector<TokenBatch> tokens;       // copy_memory: 1; mqar: one per P; probe: one per distance
  std::vector<int> groups;              // mqar: P per batch; probe: the distance per batch
  std::vector<AddingBatch> adding;      // adding: 1
  /// The token batch the attention example comes from: mqar the largest P (the last); probe the
  /// middle evaluated distance (the largest puts the symbol at position 0, where attention heads
  /// also park probability by default, which would hide the mechanism); copy memory its only one.
  std::size_t attention_batch() const {
    if (tokens.empty()) return 0;
    return probe ? tokens.size() / 2 : tokens.size() - 1;
  }
  bool probe = false;  // distance_probe
};

std::vector<int> probe_distances(int seq_len, int bins) {
  std::vector<int> d;
  const int hi = seq_len - 1;
  for (int i = 0; i < bins; ++i) {
    const int v = bins == 1 ? hi
                            : static_cast<int>(std::lround(1.0 + double(i) * double(hi - 1) / double(bins - 1)));
    if (d.empty() || d.back() != v) d.push_back(v);
  }
  return d;
}

/// Position of the key `key` in the context [0, 2P) of MQAR row b, or -1.
int mqar_key_position(const IndexTensor2& x, std::size_t b, int P, std::int32_t key) {
  for (int i = 0; i < P; ++i)
    if (x(b, static_cast<std::size_t>(2 * i)) == key) return 2 * i;
  return -1;
}

Evaluation evaluate(SequenceModel& model, const TaskSetup& task, const TestData& data) {
  Evaluation ev;
  double sum_loss = 0, sum_correct = 0;
  std::size_t n_loss = 0, n_scored = 0;
  bool found = false;
  if (task.name == "copy_memory") {
    const CopyMemoryTask t(task.length);
    const TokenBatch& test = data.tokens[0];
    const auto rs = static_cast<std::size_t>(t.recall_start());
    const int distance = task.length + t.n_memorize();
    std::vector<int> row_ok(test.inputs.shape()[0], 1);
    eval_tokens(model, test, [&](std::size_t b, std::size_t pos, double loss, bool correct) {
      sum_loss += loss;
      ++n_loss;
      if (pos < rs) return;
      sum_correct += correct;
      ++n_scored;
      if (!correct) row_ok[b] = 0;
      ev.items.push_back({0, distance, loss, correct ? 1.0 : 0.0});
    });
    ev.test_loss = sum_loss / double(n_loss);
    ev.test_accuracy = sum_correct / double(n_scored);
    for (std::size_t b = 0; b < row_ok.size() && !found; ++b)
      if (row_ok[b]) { ev.example = b; found = true; }
  } else if (task.name == "adding") {
    const AddingProblem t(task.seq_len);
    const AddingBatch& test = data.adding[0];
    const std::vector<double> pred = predict_adding(model, test.inputs);
    for (std::size_t b = 0; b < pred.size(); ++b) {
      const double err = pred[b] - double(test.targets(b, 0));
      sum_loss += err * err;
      ev.items.push_back({0, t.dependency_distance(test.positions[b]), err * err, kNaN});
      if (!found && std::abs(err) < kAddingSolvedTol) { ev.example = b; found = true; }
    }
    ev.test_loss = sum_loss / double(pred.size());
    ev.test_accuracy = kNaN;
  } else if (task.name == "mqar") {
    // Pooled over every P's test batch; the attention example comes from the last P's batch,
    // indexed as rows of that batch.
    for (std::size_t k = 0; k < data.tokens.size(); ++k) {
      const TokenBatch& test = data.tokens[k];
      const int P = data.groups[k];
      const bool pick = k == data.attention_batch();
      std::vector<int> row_ok(test.inputs.shape()[0], 1);
      eval_tokens(model, test, [&](std::size_t b, std::size_t pos, double loss, bool correct) {
        sum_loss += loss;
        ++n_loss;
        sum_correct += correct;
        ++n_scored;
        if (!correct) row_ok[b] = 0;
        const int kp = mqar_key_position(test.inputs, b, P, test.inputs(b, pos));
        ev.items.push_back({P, static_cast<int>(pos) - kp, loss, correct ? 1.0 : 0.0});
      });
      if (pick)
        for (std::size_t b = 0; b < row_ok.size() && !found; ++b)
          if (row_ok[b]) { ev.example = b; found = true; }
    }
    ev.test_loss = sum_loss / double(n_loss);
    ev.test_accuracy = sum_correct / double(n_scored);
  } else {  // distance_probe: equal weight per evaluated distance; example from the middle one
    for (std::size_t k = 0; k < data.tokens.size(); ++k) {
      const int d = data.groups[k];
      const bool pick = k == data.attention_batch();
      eval_tokens(model, data.tokens[k], [&](std::size_t b, std::size_t, double loss, bool correct) {
        sum_loss += loss;
        ++n_loss;
        sum_correct += correct;
        ++n_scored;
        ev.items.push_back({0, d, loss, correct ? 1.0 : 0.0});
        if (pick && correct && !found) { ev.example = b; found = true; }
      });
    }
    ev.test_loss = sum_loss / double(n_loss);
    ev.test_accuracy = sum_correct / double(n_scored);
  }
  ev.solved = found;
  return ev;
}

// ------------------------------------------------------------------------------------------------
// Training: one closure per task kind.

/// Mean squared error of predictions [B, 1, 1] against targets [B, 1]; fills dL/dpred.
double mse_and_grad(const Tensor3& pred, const Tensor2& target, Tensor3& dpred) {
  const std::size_t B = pred.shape()[0];
  dpred = Tensor3::from_shape(pred.shape());
  double s = 0;
  for (std::size_t b = 0; b < B; ++b) {
    const double e = double(pred(b, 0, 0)) - double(target(b, 0));
    s += e * e;
    dpred(b, 0, 0) = static_cast<float>(2.0 * e / double(B));
  }
  return s / double(B);
}

/// The training batch source of a task: draws the batch of update `step`.
struct BatchSource {
  std::unique_ptr<CopyMemoryTask> copy;
  std::unique_ptr<AddingProblem> adding;
  std::vector<MultiQueryAssociativeRecall> mqar;
  std::unique_ptr<DistanceProbe> probe;
};

BatchSource make_source(const Cell& cell, const TaskSetup& task) {
  BatchSource s;
  if (task.name == "copy_memory") {
    s.copy = std::make_unique<CopyMemoryTask>(task.length);
  } else if (task.name == "adding") {
    s.adding = std::make_unique<AddingProblem>(task.seq_len);
  } else if (task.name == "mqar") {
    for (int P : task.mqar_pairs)
      s.mqar.emplace_back(task.seq_len, P, P, cell.get_int32("mqar_keys"), cell.get_int32("mqar_values"));
  } else {
    s.probe = std::make_unique<DistanceProbe>(task.seq_len, cell.get_int32("probe_symbols"),
                                              cell.get_int32("probe_fillers"));
  }
  return s;
}

TestData make_test(const Cell& cell, const TaskSetup& task, const BatchSource& src) {
  TestData d;
  Rng rng(cell.stream_seed(kTestStream));
  const std::size_t n = cell.get_size("test_batch");
  if (src.copy) {
    d.tokens.push_back(src.copy->sample(n, rng));
  } else if (src.adding) {
    d.adding.push_back(src.adding->sample(n, rng));
  } else if (!src.mqar.empty()) {
    for (const auto& m : src.mqar) {
      d.tokens.push_back(m.sample(n, rng));
      d.groups.push_back(m.n_pairs());
    }
  } else {
    for (int dist : probe_distances(task.seq_len, cell.get_int32("distance_bins"))) {
      d.tokens.push_back(src.probe->sample_at(n, dist, rng));
      d.groups.push_back(dist);
    }
    d.probe = true;
  }
  return d;
}

/// Gradient norms ‖∂L/∂u_t‖ [S] for the loss on the scored positions of a fixed batch (copy
/// memory: the recall positions only), model in eval mode. Leaves the parameter grads dirty
/// (the training loop zeroes them).
std::vector<double> input_grad_norms(SequenceModel& model, const Cell& cell, const BatchSource& src) {
  Rng rng(cell.stream_seed(kGradStream));
  const std::size_t n = cell.get_size("grad_batch");
  model.eval();
  model.zero_grad();
  if (src.adding) {
    const AddingBatch b = src.adding->sample(n, rng);
    Tensor3 dpred;
    mse_and_grad(model.forward(b.inputs), b.targets, dpred);
    model.backward(dpred);
  } else {
    TokenBatch b = src.copy    ? src.copy->sample(n, rng)
                   : src.probe ? src.probe->sample(n, rng)
                               : src.mqar.back().sample(n, rng);
    if (src.copy) {
      const auto rs = static_cast<std::size_t>(src.copy->recall_start());
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t t = 0; t < rs; ++t) b.targets(i, t) = kIgnoreTarget;
    }
    CrossEntropyLoss ce(kIgnoreTarget);
    const std::size_t S = b.inputs.shape()[1];
    ce.forward(rows_of(model.forward(b.inputs)), ids_of(b.targets));
    model.backward(unrows(ce.backward(), n, S));
  }
  const Tensor1& g = model.input_grad_norms();
  std::vector<double> out(g.size());
  for (std::size_t t = 0; t < g.size(); ++t) out[t] = g(t);
  model.zero_grad();
  model.train();
  return out;
}

void add_grad_rows(CellOutput& out, const Row& id, const std::string& phase,
                   const std::vector<double>& g) {
  const double mx = g.empty() ? 0.0 : *std::max_element(g.begin(), g.end());
  const std::size_t S = g.size();
  for (std::size_t t = 0; t < S; ++t) {
    out.add_row(Row(id)
                    .add("phase", phase)
                    .add("position", t)
                    .add("steps_before_end", S - 1 - t)
                    .add("input_grad_norm", g[t])
                    .add("relative_grad_norm", mx > 0 ? g[t] / mx : kNaN),
                "grad_norms");
  }
}

/// Rows of the distance table: items grouped by (group, distance bin). Bins: copy memory and the
/// probe use their exact distances; adding and mqar split [1, S-1] into `bins` equal integer
/// ranges and report each range's midpoint.
void add_distance_rows(CellOutput& out, const Row& id, const TaskSetup& task, int bins,
                       const std::vector<Item>& items) {
  const bool exact = task.name == "copy_memory" || task.name == "distance_probe";
  std::vector<int> groups;
  for (const auto& it : items)
    if (std::find(groups.begin(), groups.end(), it.group) == groups.end()) groups.push_back(it.group);
  std::sort(groups.begin(), groups.end());
  const int lo_all = 1, hi_all = task.seq_len - 1;
  std::vector<std::pair<int, int>> ranges;
  if (exact) {
    std::vector<int> ds;
    for (const auto& it : items)
      if (std::find(ds.begin(), ds.end(), it.distance) == ds.end()) ds.push_back(it.distance);
    std::sort(ds.begin(), ds.end());
    for (int d : ds) ranges.push_back({d, d});
  } else {
    const int span = hi_all - lo_all + 1;
    const int nb = std::max(1, std::min(bins, span));
    for (int i = 0; i < nb; ++i) {
      const int a = lo_all + static_cast<int>((static_cast<long long>(span) * i) / nb);
      const int b = lo_all + static_cast<int>((static_cast<long long>(span) * (i + 1)) / nb) - 1;
      ranges.push_back({a, b});
    }
  }
  for (int g : groups) {
    for (const auto& r : ranges) {
      double sl = 0, sc = 0;
      std::size_t n = 0;
      for (const auto& it : items) {
        if (it.group != g || it.distance < r.first || it.distance > r.second) continue;
        sl += it.loss;
        sc += it.correct;
        ++n;
      }
      if (n == 0) continue;
      out.add_row(Row(id)
                      .add("n_pairs", g)
                      .add("distance", 0.5 * (r.first + r.second))
                      .add("distance_lo", r.first)
                      .add("distance_hi", r.second)
                      .add("n_scored", n)
                      .add("accuracy", sc / double(n))
                      .add("loss", sl / double(n))
                      .add("baseline_accuracy", task.baseline_accuracy)
                      .add("baseline_loss", task.distance_baseline_loss),
                  "distance");
    }
  }
}

/// The attention table: last layer, every head, of a forward on the chosen test example.
void add_attention_rows(CellOutput& out, const Row& id, SequenceModel& model, const TaskSetup& task,
                        const TestData& data, const Evaluation& ev) {
  auto* tm = dynamic_cast<TransformerModel*>(&model);
  if (!tm || tm->layers.empty()) return;
  const std::size_t b = ev.example;
  std::vector<double> tokens;  // per position: token id, or the adding marker
  if (task.name == "adding") {
    const Tensor3& x = data.adding[0].inputs;
    model.forward(slice_rows(x, b, 1));
    for (std::size_t t = 0; t < x.shape()[1]; ++t) tokens.push_back(x(b, t, 1));
  } else {
    const TokenBatch& tb = data.tokens[data.attention_batch()];
    model.forward(slice_rows(tb.inputs, b, 1));
    for (std::size_t t = 0; t < tb.inputs.shape()[1]; ++t) tokens.push_back(tb.inputs(b, t));
  }
  const std::size_t layer = tm->layers.size() - 1;
  const Tensor4& p = tm->layers[layer]->self_attn.attention_probs();  // [1, h, S, S]
  const std::size_t H = p.shape()[1], S = p.shape()[2];
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t q = 0; q < S; ++q)
      for (std::size_t k = 0; k < S; ++k) {
        const double v = p(0, h, q, k);
        if (v < kAttentionMinProb) continue;
        out.add_row(Row(id)
                        .add("example", b)
                        .add("solved", ev.solved ? 1 : 0)
                        .add("layer", layer)
                        .add("head", h)
                        .add("query_pos", q)
                        .add("key_pos", k)
                        .add("query_token", tokens[q])
                        .add("key_token", tokens[k])
                        .add("attention_prob", v),
                    "attention");
      }
}

void run_cell(const Cell& cell, CellOutput& out) {
  const TaskSetup task = task_setup(cell);
  const ModelConfig mc = model_config(cell, task);
  const std::string model_name = cell.get_string("model");
  const std::size_t batch = cell.get_size("batch");
  const int steps = cell.get_int32("steps");
  const int log_every = cell.get_int32("log_every");
  const std::size_t S = static_cast<std::size_t>(task.seq_len);

  Rng init_rng(cell.stream_seed(kInitStream));
  const std::unique_ptr<SequenceModel> model_ptr = make_model(mc, init_rng);
  SequenceModel& model = *model_ptr;
  model.train();
  const std::vector<Parameter*> params = model.parameters();

  OptimizerConfig oc;
  oc.lr = cell.get_float("lr");
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);
  const LrSchedule schedule = experiment::cell_schedule(cell);

  const BatchSource src = make_source(cell, task);
  const TestData test = make_test(cell, task, src);
  Rng train_rng(cell.stream_seed(kTrainStream));

  Row id;
  id.add("experiment", kName)
      .add("task", task.name)
      .add("model", model_name)
      .add("length", task.length)
      .add("seq_len", task.seq_len)
      .add("seed", cell.replicate);

  const std::vector<double> grad_init = input_grad_norms(model, cell, src);

  CrossEntropyLoss ce(kIgnoreTarget);
  auto loss_and_grad = [&](int step) -> double {
    if (src.adding) {
      const AddingBatch b = src.adding->sample(batch, train_rng);
      Tensor3 dpred;
      const double loss = mse_and_grad(model.forward(b.inputs), b.targets, dpred);
      model.backward(dpred);
      return loss;
    }
    const TokenBatch b =
        src.copy    ? src.copy->sample(batch, train_rng)
        : src.probe ? src.probe->sample(batch, train_rng)
                    : src.mqar[static_cast<std::size_t>(step) % src.mqar.size()].sample(batch, train_rng);
    const double loss = ce.forward(rows_of(model.forward(b.inputs)), ids_of(b.targets));
    model.backward(unrows(ce.backward(), batch, S));
    return loss;
  };
  // Curve: one row per window of log_every updates (and the last, shorter one): mean loss and mean
  // gradient norm over the window, learning rate of its last update.
  double win_loss = 0, win_norm = 0, last_window_loss = NAN;
  int win_n = 0;
  auto on_step = [&](const StepRecord& r) {
    win_loss += r.loss;
    win_norm += r.grad_norm;
    ++win_n;
    const int done = r.step + 1;
    if (done % log_every == 0 || done == steps) {
      last_window_loss = win_loss / win_n;
      out.add_row(Row(id)
                      .add("step", done)
                      .add("train_loss", last_window_loss)
                      .add("grad_norm", win_norm / win_n)
                      .add("lr", r.lr),
                  "steps");
      win_loss = win_norm = 0;
      win_n = 0;
    }
  };
  TrainOptions topt;
  topt.steps = steps;
  topt.clip_norm = cell.get_real("clip_norm");
  topt.quiet = cell.quiet;
  topt.label = task.name + " " + model_name + " length=" + std::to_string(task.length) + " seed " +
               std::to_string(cell.replicate);
  // --checkpoint-every: besides model and optimizer, the steps change the training data stream,
  // the curve window and the rows of the "steps" table (cell_checkpoint keeps the rows).
  topt.checkpoint = cell_checkpoint(cell, "train", &model, out);
  topt.checkpoint.state.add("train_rng", train_rng);
  topt.checkpoint.state.add("win_loss", win_loss);
  topt.checkpoint.state.add("win_norm", win_norm);
  topt.checkpoint.state.add("win_n", win_n);
  topt.checkpoint.state.add("last_window_loss", last_window_loss);
  const auto t0 = std::chrono::steady_clock::now();
  const TrainResult tr = train_loop(topt, params, *optim, schedule, loss_and_grad, on_step);
  const double train_time =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (win_n > 0) last_window_loss = win_loss / win_n;  // diverged mid-window

  model.eval();
  const Evaluation ev = evaluate(model, task, test);
  // A non-finite test loss with finite parameters (e.g. logits overflowing) is divergence too:
  // recorded as diverged at step steps_done (nothing diverged during training, so = steps).
  bool diverged = tr.diverged;
  int diverged_step = tr.diverged_step;
  if (!diverged && !std::isfinite(ev.test_loss)) {
    diverged = true;
    diverged_step = tr.steps_done;
  }
  const std::vector<double> grad_trained = input_grad_norms(model, cell, src);
  model.eval();

  out.add_row(Row(id)
                  .add("derived_seed", cell.seed)
                  .add("n_params", model.num_parameters())
                  .add("param_budget", cell.get_int("param_budget"))
                  .add("hidden_size", mc.hidden_size)
                  .add("embedding_dim", mc.body_input_size())
                  .add("num_layers", mc.num_layers)
                  .add("d_ff", mc.is_transformer() ? static_cast<std::int64_t>(mc.d_ff) : 0)
                  .add("n_heads", mc.is_transformer() ? static_cast<std::int64_t>(mc.n_heads) : 0)
                  .add("kernel_size", mc.model == "tcn" ? static_cast<std::int64_t>(mc.kernel_size) : 0)
                  .add("receptive_field", model.receptive_field())
                  .add("sequential_steps", model.sequential_steps(S))
                  .add("batch", cell.get_int("batch"))
                  .add("steps", steps)
                  .add("lr", cell.get_real("lr"))
                  .add("optimizer", cell.get_string("optimizer"))
                  .add("test_loss", ev.test_loss)
                  .add("baseline_loss", task.baseline_loss)
                  .add("test_accuracy", ev.test_accuracy)
                  .add("baseline_accuracy", task.baseline_accuracy)
                  .add("diverged", diverged ? 1 : 0)
                  .add("diverged_step", diverged_step)
                  .add("steps_done", tr.steps_done)
                  .add("final_train_loss", last_window_loss)
                  .add("train_time_s", train_time)
                  .add("ms_per_step", tr.steps_done > 0 ? 1000.0 * train_time / tr.steps_done : kNaN));
  add_distance_rows(out, id, task, cell.get_int32("distance_bins"), ev.items);
  add_grad_rows(out, id, "init", grad_init);
  add_grad_rows(out, id, "trained", grad_trained);
  if (cell.replicate == 0 && !diverged) add_attention_rows(out, id, model, task, test, ev);
}

}  // namespace

int main(int argc, char** argv) {
  ExperimentSpec spec;
  spec.name = kName;
  spec.description =
      "Claim 2 (README.md claims table): recurrent state decays over long distances (vanishing "
      "gradients, even with LSTM gates); attention links any two positions directly. Trains RNN, "
      "LSTM, GRU, TCN and a decoder-only Transformer at a matched parameter budget on four tasks "
      "(copy memory and the adding problem of Bai et al. 2018, multi-query associative recall of "
      "Arora et al. 2023, and a distance probe) for a grid of task x model x length x seeds, and "
      "reports test loss and accuracy against the best predictor that ignores the dependency, "
      "accuracy against the dependency distance, training curves, wall time, and the input "
      "gradient norm against position at initialisation and after training.";
  spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;
  // Built-in defaults = configs/quick.ini (keys missing from a config file fall back to these).
  spec.options = {
      string_sweep("task", kTasks, "synthetic task (README: what length means for each)").one_of(kTasks),
      string_sweep("model", kModels, "sequence model (models/ factory)").one_of(kModels),
      int_sweep("length", {16, 32, 64}, "steps",
                "task length: copy_memory blank length T (sequence T+20); adding, mqar, "
                "distance_probe sequence length")
          .at_least(2)
          .at_most(1e5),
      int_option("param_budget", 6000, "parameters",
                 "match every model to this many parameters (largest hidden size / d_model within "
                 "it); 0 = use hidden_size")
          .at_least(0)
          .at_most(1e9),
      int_option("hidden_size", 32, "units",
                 "hidden size H (tcn: channels; transformer: d_model) when param_budget = 0")
          .at_least(1)
          .at_most(65536),
      int_option("embedding_dim", 8, "units",
                 "rnn/lstm/gru/tcn: token embedding or input projection width E (transformer: = d_model)")
          .at_least(1)
          .at_most(65536),
      int_option("num_layers", 1, "layers", "rnn/lstm/gru: stacked recurrent layers").at_least(1).at_most(1000),
      string_option("nonlinearity", "tanh", "rnn only: torch.nn.RNN nonlinearity").one_of({"tanh", "relu"}),
      int_option("tcn_levels", 0, "levels",
                 "tcn: levels L (dilation 2^i); 0 = the fewest whose receptive field covers the sequence")
          .at_least(0)
          .at_most(30),
      int_option("kernel_size", 4, "steps", "tcn: kernel size k").at_least(1).at_most(4096),
      int_option("weight_norm", 1, "0/1", "tcn: weight-normalised convolutions (Bai et al.)")
          .at_least(0)
          .at_most(1),
      int_option("transformer_layers", 2, "layers", "transformer: decoder layers").at_least(1).at_most(1000),
      int_option("n_heads", 2, "heads", "transformer: attention heads").at_least(1).at_most(4096),
      real_option("d_ff_ratio", 2, "1", "transformer: d_ff = d_ff_ratio x d_model (rounded, >= 1)")
          .greater_than(0)
          .at_most(1e6),
      string_option("positional_encoding", "rope",
                    "transformer: positional encoding, any registered name (models/positional_registry.hpp)")
          .one_of(positional_encoding_names()),
      string_option("norm_placement", "pre", "transformer: LayerNorm before (pre) or after (post) each sub-layer")
          .one_of({"pre", "post"}),
      real_option("dropout", 0, "1", "dropout probability (every family)").at_least(0).at_most(0.99),
      string_option("mqar_pairs", "2+4", "mqar: '+'-separated key-value pair counts P, trained as a mixture (queries Q = P)"),
      int_option("mqar_keys", 16, "tokens", "mqar: key vocabulary size (>= largest P)").at_least(1).at_most(1e5),
      int_option("mqar_values", 16, "tokens", "mqar: value vocabulary size").at_least(1).at_most(1e5),
      int_option("probe_symbols", 8, "tokens", "distance_probe: symbols to recall (chance 1/probe_symbols)")
          .at_least(1)
          .at_most(1e5),
      int_option("probe_fillers", 8, "tokens", "distance_probe: distractor tokens").at_least(1).at_most(1e5),
      int_option("distance_bins", 6, "bins",
                 "distance table: distance_probe evaluates this many distances; adding, mqar bin into this many ranges")
          .at_least(1)
          .at_most(1e5),
      int_option("batch", 32, "sequences", "training batch size (fresh batch every step)").at_least(1).at_most(1e6),
      int_option("steps", 800, "updates", "optimizer updates").at_least(1).at_most(1e9),
      real_option("lr", 3e-3, "1", "peak learning rate").greater_than(0),
      string_option("optimizer", "adam", "optimizer").one_of({"adam", "adamw", "sgd"}),
      real_option("weight_decay", 0, "1", "weight decay (L2 for adam/sgd, decoupled for adamw)").at_least(0),
      real_option("clip_norm", 1, "1", "max global gradient norm; 0 disables clipping").at_least(0),
      string_option("schedule", "constant", "learning-rate schedule").one_of({"constant", "cosine", "inverse_sqrt"}),
      int_option("warmup_steps", 0, "updates", "linear warm-up length").at_least(0).at_most(1e9),
      int_option("test_batch", 256, "sequences",
                 "test set size (mqar: per P; distance_probe: per evaluated distance)")
          .at_least(1)
          .at_most(1e6),
      int_option("grad_batch", 16, "sequences", "sequences of the gradient-norm measurement").at_least(1).at_most(1e6),
      int_option("log_every", 50, "updates", "updates per row of the curve table").at_least(1).at_most(1e9),
  };
  const std::vector<std::string> ids = {"experiment", "task", "model", "length", "seq_len", "seed"};
  auto with_ids = [&](std::vector<std::string> cols) {
    std::vector<std::string> all = ids;
    all.insert(all.end(), cols.begin(), cols.end());
    return all;
  };
  spec.tables = {
      {kMainTable,
       with_ids({"derived_seed", "n_params", "param_budget", "hidden_size", "embedding_dim",
                 "num_layers", "d_ff", "n_heads", "kernel_size", "receptive_field",
                 "sequential_steps", "batch", "steps", "lr", "optimizer", "test_loss",
                 "baseline_loss", "test_accuracy", "baseline_accuracy", "diverged", "diverged_step",
                 "steps_done", "final_train_loss", "train_time_s", "ms_per_step"})},
      {"steps", with_ids({"step", "train_loss", "grad_norm", "lr"})},
      {"distance", with_ids({"n_pairs", "distance", "distance_lo", "distance_hi", "n_scored",
                             "accuracy", "loss", "baseline_accuracy", "baseline_loss"})},
      {"grad_norms", with_ids({"phase", "position", "steps_before_end", "input_grad_norm",
                               "relative_grad_norm"})},
      {"attention", with_ids({"example", "solved", "layer", "head", "query_pos", "key_pos",
                              "query_token", "key_token", "attention_prob"})},
  };
  spec.default_seeds = 3;
  spec.timing_columns = {"train_time_s", "ms_per_step"};
  spec.validate = validate;
  spec.run_cell = run_cell;
  return run_experiment(argc, argv, spec);
}

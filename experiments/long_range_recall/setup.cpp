// long_range_recall's tasks, models, data splits and losses (setup.hpp).
#include "setup.hpp"

#include <algorithm>
#include <cmath>

#include "seqlab/core/rng.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/models/factory.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget

namespace long_range_recall {

using namespace seqlab;

namespace {
constexpr const char* kLongSuffix = "_long";
constexpr std::size_t kLongSuffixSize = 5;
}  // namespace

const std::vector<std::string>& model_arms() {
  static const std::vector<std::string> arms = [] {
    std::vector<std::string> a = {"rnn", "lstm", "lstm_fb1", "gru", "tcn", "transformer_decoder"};
    const std::size_t n = a.size();
    for (std::size_t i = 0; i < n; ++i) a.push_back(a[i] + kLongSuffix);
    return a;
  }();
  return arms;
}

bool is_long_arm(const std::string& arm) {
  return arm.size() > kLongSuffixSize && arm.compare(arm.size() - kLongSuffixSize, kLongSuffixSize, kLongSuffix) == 0;
}

std::string base_arm(const std::string& arm) {
  return is_long_arm(arm) ? arm.substr(0, arm.size() - kLongSuffixSize) : arm;
}

TaskParams task_params(const Cell& cell, int pairs, int distance) {
  const std::string task = cell.get_string("task"), L = cell.params.text("length");
  TaskParams p;
  if (task == "copy_memory") {
    p.set("T", L);
  } else if (task == "adding") {
    p.set("seq_len", L);
  } else if (task == "mqar") {
    p.set("seq_len", L);
    p.set("n_pairs", std::to_string(pairs));
    p.set("n_queries", std::to_string(pairs));
    p.set("n_keys", cell.params.text("mqar_keys"));
    p.set("n_values", cell.params.text("mqar_values"));
  } else {
    p.set("seq_len", L);
    p.set("n_symbols", cell.params.text("probe_symbols"));
    p.set("n_fillers", cell.params.text("probe_fillers"));
    if (distance > 0) {
      p.set("min_distance", std::to_string(distance));
      p.set("max_distance", std::to_string(distance));
    }
  }
  return p;
}

std::vector<std::unique_ptr<Task>> training_tasks(const Cell& cell) {
  std::vector<std::unique_ptr<Task>> tasks;
  const std::string task = cell.get_string("task");
  if (task == "mqar") {
    for (const auto P : cell.get_int_list("mqar_pairs"))
      tasks.push_back(make_task(task, task_params(cell, static_cast<int>(P))));
  } else {
    tasks.push_back(make_task(task, task_params(cell)));
  }
  return tasks;
}

namespace {

/// Smallest TCN depth whose receptive field 1 + 2(k-1)(2^L - 1) covers `seq_len` (at most 30).
std::size_t tcn_levels_for(std::size_t seq_len, std::size_t k) {
  std::size_t L = 1;
  while (L < 30 && 1 + 2 * (k - 1) * ((std::size_t{1} << L) - 1) < seq_len) ++L;
  return L;
}

}  // namespace

ModelConfig model_config(const Cell& cell, const TaskSpec& task) {
  ModelConfig mc;
  const std::string arm = base_arm(cell.get_string("model"));
  mc.model = arm == "lstm_fb1" ? "lstm" : arm;
  if (arm == "lstm_fb1") mc.forget_bias = 1.0f;
  apply_task_spec(task, mc);
  mc.dropout = cell.get_float("dropout");
  mc.embedding_dim = cell.get_size("embedding_dim");
  const std::size_t width = cell.get_size("width");
  mc.hidden_size = width > 0 ? width : cell.get_size("hidden_size");
  const double ratio = cell.get_real("d_ff_ratio");
  if (mc.is_recurrent()) {
    mc.num_layers = cell.get_size("num_layers");
    mc.nonlinearity = cell.get_string("nonlinearity");
  } else if (mc.model == "tcn") {
    mc.kernel_size = cell.get_size("kernel_size");
    const std::size_t levels = cell.get_size("tcn_levels");
    mc.num_layers = levels > 0 ? levels : tcn_levels_for(task.seq_len, mc.kernel_size);
    mc.weight_norm = cell.get_int("weight_norm") != 0;
  } else {  // transformer_decoder
    mc.num_layers = cell.get_size("transformer_layers");
    mc.n_heads = cell.get_size("n_heads");
    mc.positional_encoding = cell.get_string("positional_encoding");
    mc.norm_placement = cell.get_string("norm_placement");
    mc.max_len = mc.train_len = task.seq_len;
    mc.embedding_dim = mc.hidden_size;
    mc.d_ff = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::llround(ratio * static_cast<double>(mc.hidden_size))));
  }
  const std::size_t budget = cell.get_size("param_budget");
  if (budget > 0 && width == 0) {
    mc = hidden_size_for_budget(mc, budget, ratio);
    // The Transformer's d_model moves in steps of 2·n_heads (4 with RoPE and 2 heads: 16 -> 20 is
    // +40 % parameters at 6K), so at a small budget it lands well below it; fill_budget = 1 then
    // raises d_ff, one unit at a time (each adds L·(2·d_model + 1) parameters), to the largest
    // value within the budget, so every family is matched within a fraction of a percent.
    if (mc.is_transformer() && cell.get_int("fill_budget") != 0)
      while (true) {
        ModelConfig wider = mc;
        ++wider.d_ff;
        if (count_parameters(wider) > budget) break;
        mc = wider;
      }
  }
  mc.validate();
  return mc;
}

TestSet make_split(const Cell& cell, const std::vector<std::unique_ptr<Task>>& train, std::size_t replicate,
                   std::uint64_t stream, std::size_t n, bool probe_at_distances) {
  TestSet s;
  Rng rng(experiment::stream_seed(cell.base_seed, replicate, stream));
  const std::string task = cell.get_string("task");
  if (task == "distance_probe" && probe_at_distances) {
    for (int d : probe_distances(cell.get_int32("length"), cell.get_int32("distance_bins"))) {
      s.batches.push_back(make_task(task, task_params(cell, 0, d))->sample(n, rng));
      s.groups.push_back(0);
    }
    s.attention_batch = s.batches.size() / 2;
    return s;
  }
  const auto pairs = task == "mqar" ? cell.get_int_list("mqar_pairs") : std::vector<std::int64_t>{0};
  for (std::size_t k = 0; k < train.size(); ++k) {
    s.batches.push_back(train[k]->sample(n, rng));
    s.groups.push_back(static_cast<int>(pairs[k]));
  }
  s.attention_batch = s.batches.size() - 1;
  return s;
}

std::vector<TaskSpec> split_specs(const Cell& cell, const TestSet& split,
                                  const std::vector<std::unique_ptr<Task>>& train) {
  std::vector<TaskSpec> specs;
  if (cell.get_string("task") == "distance_probe") {
    specs.assign(split.batches.size(), train.back()->spec());
  } else {
    for (const auto& t : train) specs.push_back(t->spec());
  }
  return specs;
}

namespace {

/// Mean squared error of predictions [B, 1, 1] against values [B, 1, 1]; fills dL/dpred.
double mse_and_grad(const Tensor3& pred, const Tensor3& target, Tensor3& dpred) {
  const std::size_t B = pred.shape()[0];
  dpred = Tensor3::from_shape(pred.shape());
  double s = 0;
  for (std::size_t b = 0; b < B; ++b) {
    const double e = double(pred(b, 0, 0)) - double(target(b, 0, 0));
    s += e * e;
    dpred(b, 0, 0) = static_cast<float>(2.0 * e / double(B));
  }
  return s / double(B);
}

}  // namespace

double loss_and_grad(SequenceModel& model, const TaskBatch& b, CrossEntropyLoss& ce) {
  if (b.values.size() > 0) {
    Tensor3 dpred;
    const double loss = mse_and_grad(model.forward(b.features), b.values, dpred);
    model.backward(dpred);
    return loss;
  }
  const std::size_t B = b.tokens.shape()[0], S = b.tokens.shape()[1];
  const double loss = ce.forward(rows_of(model.forward(b.tokens)), ids_of(b.targets));
  model.backward(unrows(ce.backward(), B, S));
  return loss;
}

std::vector<double> input_grad_norms(SequenceModel& model, const Cell& cell, const Task& task) {
  Rng rng(cell.stream_seed(kGradStream));
  TaskBatch b = task.sample(cell.get_size("grad_batch"), rng);
  if (b.targets.size() > 0)
    for (std::size_t i = 0; i < b.targets.size(); ++i)
      if (b.distances.data()[i] <= 0) b.targets.data()[i] = kIgnoreTarget;
  model.eval();
  model.zero_grad();
  CrossEntropyLoss ce(kIgnoreTarget);
  loss_and_grad(model, b, ce);
  const Tensor1& g = model.input_grad_norms();
  std::vector<double> out(g.begin(), g.end());
  model.zero_grad();
  model.train();
  return out;
}

}  // namespace long_range_recall

// long_range_recall's evaluation and tables (evaluation.hpp).
#include "evaluation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "seqlab/core/rows.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/train/metrics.hpp"

namespace long_range_recall {

using namespace seqlab;

namespace {

// Test sequences are evaluated in chunks of at most this many (bounds the caches' memory).
constexpr std::size_t kEvalChunk = 128;
// The attention table keeps probabilities >= this (the rest plot as 0); it bounds the CSV size.
constexpr double kAttentionMinProb = 0.01;
// An adding-problem test example counts as solved when |prediction - y| < this.
constexpr double kAddingSolvedTol = 0.05;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

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

Baseline pooled_baseline(const TestSet& test, const std::vector<TaskSpec>& specs) {
  double loss = 0, acc = 0, n_all = 0, n_dep = 0;
  for (std::size_t k = 0; k < test.batches.size(); ++k) {
    const TaskBatch& b = test.batches[k];
    double all = 0, dep = 0;
    for (std::size_t i = 0; i < b.distances.size(); ++i) {
      const bool scored = b.targets.size() == 0 || b.targets.data()[i] != kIgnoreTarget;
      all += scored ? 1 : 0;
      dep += b.distances.data()[i] > 0 ? 1 : 0;
    }
    loss += all * specs[k].baseline_loss;
    acc += dep * specs[k].dependent_baseline_accuracy;
    n_all += all;
    n_dep += dep;
  }
  return {loss / n_all, acc / n_dep};
}

Evaluation evaluate(SequenceModel& model, const TestSet& test, bool values) {
  Evaluation ev;
  ScoreSums all;
  double correct = 0;
  std::size_t dependent = 0;
  for (std::size_t k = 0; k < test.batches.size(); ++k) {
    const TaskBatch& b = test.batches[k];
    std::vector<int> row_ok(batch_rows(b), 1);
    evaluate_chunked(model, eval_set(b), kEvalChunk, all, [&](std::size_t r, std::size_t t, double loss, bool ok) {
      const int d = b.distances(r, t);
      if (d <= 0) return;
      if (values) ok = loss < kAddingSolvedTol * kAddingSolvedTol;
      correct += ok;
      ++dependent;
      if (!ok) row_ok[r] = 0;
      ev.items.push_back({test.groups[k], d, loss, values ? kNaN : (ok ? 1.0 : 0.0)});
    });
    if (k != test.attention_batch) continue;
    for (std::size_t r = 0; r < row_ok.size() && !ev.solved; ++r)
      if (row_ok[r]) {
        ev.example = r;
        ev.solved = true;
      }
  }
  ev.test_loss = all.mean_loss();
  ev.test_accuracy = values ? kNaN : correct / double(dependent);
  return ev;
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
void add_distance_rows(CellOutput& out, const Row& id, const Cell& cell, const TaskSpec& spec,
                       const TestSet& test, const std::vector<TaskSpec>& specs,
                       const std::vector<Item>& items) {
  auto spec_of = [&](int group) -> const TaskSpec& {
    for (std::size_t k = 0; k < test.groups.size(); ++k)
      if (test.groups[k] == group) return specs[k];
    return spec;
  };
  const std::string task = cell.get_string("task");
  const bool exact = task == "copy_memory" || task == "distance_probe";
  std::vector<int> groups, ds;
  for (const auto& it : items) {
    if (std::find(groups.begin(), groups.end(), it.group) == groups.end()) groups.push_back(it.group);
    if (std::find(ds.begin(), ds.end(), it.distance) == ds.end()) ds.push_back(it.distance);
  }
  std::sort(groups.begin(), groups.end());
  std::sort(ds.begin(), ds.end());
  std::vector<std::pair<int, int>> ranges;
  if (exact) {
    for (int d : ds) ranges.push_back({d, d});
  } else {
    const int span = static_cast<int>(spec.seq_len) - 1;
    const int nb = std::max(1, std::min(cell.get_int32("distance_bins"), span));
    for (int i = 0; i < nb; ++i)
      ranges.push_back({1 + static_cast<int>((static_cast<long long>(span) * i) / nb),
                        static_cast<int>((static_cast<long long>(span) * (i + 1)) / nb)});
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
                      .add("baseline_accuracy", spec_of(g).dependent_baseline_accuracy)
                      .add("baseline_loss", spec_of(g).dependent_baseline_loss),
                  "distance");
    }
  }
}

/// The attention table: last layer, every head, of a forward on the chosen test example.
void add_attention_rows(CellOutput& out, const Row& id, SequenceModel& model, const TestSet& test,
                        const Evaluation& ev) {
  auto* tm = dynamic_cast<TransformerModel*>(&model);
  if (!tm || tm->layers.empty()) return;
  const std::size_t b = ev.example;
  const TaskBatch one = slice_rows(test.batches[test.attention_batch], b, 1);
  std::vector<double> tokens;  // per position: token id, or the adding marker
  if (one.features.size() > 0) {
    model.forward(one.features);
    for (std::size_t t = 0; t < one.features.shape()[1]; ++t) tokens.push_back(one.features(0, t, 1));
  } else {
    model.forward(one.tokens);
    for (std::size_t t = 0; t < one.tokens.shape()[1]; ++t) tokens.push_back(one.tokens(0, t));
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

}  // namespace long_range_recall

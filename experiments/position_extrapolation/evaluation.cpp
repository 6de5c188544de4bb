// position_extrapolation's data and evaluation (evaluation.hpp).
#include "evaluation.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget

namespace position_extrapolation {

using namespace seqlab;

namespace {

// Largest attention-probability tensor of one evaluation chunk (B·h·W·W floats).
constexpr std::size_t kEvalChunkFloats = std::size_t{1} << 22;

// A real as text that reads back as the same double (a task parameter).
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// `b` with columns [W0, width) appended as padding: token 0, target not scored, padding 1.
TaskBatch widen(const TaskBatch& b, std::size_t width) {
  const std::size_t B = b.tokens.shape()[0], W0 = b.tokens.shape()[1];
  TaskBatch w;
  w.tokens = IndexTensor2::from_shape({B, width});
  w.targets = IndexTensor2::from_shape({B, width});
  w.padding = PaddingMask::from_shape({B, width});
  w.tokens.fill(0);
  w.targets.fill(kIgnoreTarget);
  w.padding.fill(1);
  for (std::size_t r = 0; r < B; ++r)
    for (std::size_t t = 0; t < W0; ++t) {
      w.tokens(r, t) = b.tokens(r, t);
      w.targets(r, t) = b.targets(r, t);
      w.padding(r, t) = b.padding(r, t);
    }
  return w;
}

}  // namespace

std::string corpus_path(const Cell& cell) {
  const std::string& c = cell.get_string("corpus");
  return c == "default" ? std::string(SEQLAB_EXPERIMENT_DIR) + "/data/corpus.txt" : c;
}

std::unique_ptr<Task> cell_task(const Cell& cell, std::size_t lo, std::size_t hi, const std::string& split) {
  const std::string& task = cell.get_string("task");
  const std::string min_len = std::to_string(lo), max_len = std::to_string(hi);
  if (task == "copy")
    return make_task("repeat_copy", TaskParams({{"min_len", min_len},
                                                {"max_len", max_len},
                                                {"alphabet", cell.params.text("copy_alphabet")}}));
  if (task == "mqar")
    return make_task("mqar", TaskParams({{"seq_len", max_len},
                                         {"min_len", min_len},
                                         {"n_pairs", cell.params.text("mqar_n_pairs")},
                                         {"n_queries", cell.params.text("mqar_n_queries")},
                                         {"n_keys", cell.params.text("mqar_n_keys")},
                                         {"n_values", cell.params.text("mqar_n_values")}}));
  if (task == "char_lm")
    return make_task("char_lm", TaskParams({{"text_file", corpus_path(cell)},
                                            {"test_fraction", exact(cell.get_real("corpus_test_fraction"))},
                                            {"min_len", min_len},
                                            {"max_len", max_len},
                                            {"split", split}}));
  throw std::logic_error("cell_task: no data for task '" + task + "'");
}

BucketSums evaluate_buckets(SequenceModel& model, const TaskBatch& test, std::size_t width,
                            std::size_t L_train, std::size_t n_heads) {
  const std::size_t W0 = test.tokens.shape()[1], W = std::max(width, W0);
  const TaskBatch wide = W > W0 ? widen(test, W) : TaskBatch();
  const std::size_t chunk = std::max<std::size_t>(1, kEvalChunkFloats / (n_heads * W * W));
  BucketSums sums;
  evaluate_chunked(model, eval_set(W > W0 ? wide : test), chunk, sums[kAll],
                   [&](std::size_t, std::size_t t, double loss, bool correct) {
                     sums[t < L_train ? kWithin : kBeyond].add(loss, correct);
                   });
  return sums;
}

void add_eval_rows(CellOutput& out, const Row& id, std::size_t L_train, std::size_t eval_len,
                   const BucketSums& sums, const TaskSpec& spec) {
  static const char* const kBucketNames[3] = {"all", "within_train_len", "beyond_train_len"};
  for (std::size_t k = 0; k < 3; ++k) {
    const ScoreSums& s = sums[k];
    out.add_row(Row(id)
                    .add("L_train", L_train)
                    .add("eval_len", eval_len)
                    .add("eval_ratio", eval_len / L_train)
                    .add("bucket", kBucketNames[k])
                    .add("n_scored", s.n)
                    .add("loss_nats", s.mean_loss())
                    .add("perplexity", s.perplexity())
                    .add("accuracy", s.accuracy())
                    .add("chance_accuracy", spec.baseline_accuracy)
                    .add("chance_loss_nats", spec.baseline_loss),
                "eval");
  }
}

}  // namespace position_extrapolation

// position_extrapolation's data and evaluation (evaluation.hpp).
#include "evaluation.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "seqlab/tasks/mqar.hpp"  // kIgnoreTarget
#include "seqlab/tasks/scattered_recall.hpp"

namespace position_extrapolation {

using namespace seqlab;

namespace {

// Largest attention-probability tensor of one evaluation chunk (B·h·W·W floats).
constexpr std::size_t kEvalChunkFloats = std::size_t{1} << 22;

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
  if (b.distances.size() > 0) {
    w.distances = IndexTensor2::from_shape({B, width});
    w.distances.fill(0);
  }
  for (std::size_t r = 0; r < B; ++r)
    for (std::size_t t = 0; t < W0; ++t) {
      w.tokens(r, t) = b.tokens(r, t);
      w.targets(r, t) = b.targets(r, t);
      w.padding(r, t) = b.padding.size() > 0 ? b.padding(r, t) : 0;
      if (b.distances.size() > 0) w.distances(r, t) = b.distances(r, t);
    }
  return w;
}

// Adds the scores of `set` (widened to `width`) to the buckets.
void score_into(SequenceModel& model, const TaskBatch& set, std::size_t width, std::size_t L_train,
                std::size_t n_heads, BucketSums& sums) {
  const std::size_t W0 = set.tokens.shape()[1], W = std::max(width, W0);
  const TaskBatch wide = W > W0 ? widen(set, W) : TaskBatch();
  const TaskBatch& b = W > W0 ? wide : set;
  const std::size_t chunk = std::max<std::size_t>(1, kEvalChunkFloats / (n_heads * W * W));
  const bool has_d = b.distances.size() > 0;
  evaluate_chunked(model, eval_set(b), chunk, sums[kAll], [&](std::size_t r, std::size_t t, double loss, bool correct) {
    sums[t < L_train ? kWithin : kBeyond].add(loss, correct);
    if (has_d) sums[static_cast<std::size_t>(b.distances(r, t)) < L_train ? kNear : kFar].add(loss, correct);
  });
}

}  // namespace

std::shared_ptr<const TextCorpus> open_corpus(const Cell& cell) {
  TextCorpusOptions o;
  o.corpus = cell.get_string("corpus");
  o.unit = parse_text_unit(cell.get_string("unit"));
  if (o.corpus != "kjv") {
    o.valid_fraction = cell.get_real("valid_fraction");
    o.test_fraction = cell.get_real("test_fraction");
  }
  return std::make_shared<const TextCorpus>(TextCorpus::open(o));
}

std::unique_ptr<Task> cell_task(const Cell& cell, std::size_t len, const std::shared_ptr<const TextCorpus>& corpus,
                                TextSplit split) {
  const std::string& task = cell.get_string("task");
  const std::string L = std::to_string(len);
  if (task == "text") {
    if (!corpus) throw std::logic_error("cell_task: task text needs its corpus");
    return std::make_unique<TextTask>(corpus, len, split);
  }
  if (task == "copy")
    return make_task("previous_token", TaskParams({{"seq_len", L},
                                                   {"vocab_size", cell.params.text("copy_vocab")},
                                                   {"lag", cell.params.text("copy_lag")}}));
  if (task == "mqar")
    return make_task("mqar_scattered", TaskParams({{"seq_len", L},
                                                   {"n_pairs", cell.params.text("mqar_n_pairs")},
                                                   {"n_queries", cell.params.text("mqar_n_queries")},
                                                   {"n_keys", cell.params.text("mqar_n_keys")},
                                                   {"n_values", cell.params.text("mqar_n_values")}}));
  if (task == "passkey")
    return make_task("passkey", TaskParams({{"seq_len", L},
                                            {"n_digits", cell.params.text("passkey_digits")},
                                            {"filler_period", cell.params.text("passkey_filler")}}));
  throw std::logic_error("cell_task: no data for task '" + task + "'");
}

BucketSums evaluate_rows(SequenceModel& model, const TaskBatch& test, std::size_t width, std::size_t L_train,
                         std::size_t n_heads) {
  BucketSums sums;
  score_into(model, test, width, L_train, n_heads, sums);
  return sums;
}

BucketSums evaluate_text(SequenceModel& model, const TextEvaluation& eval, std::size_t width, std::size_t L_train,
                         std::size_t n_heads) {
  BucketSums sums;
  for (std::size_t i = 0; i < eval.n_chunks(); ++i) score_into(model, eval.chunk(i), width, L_train, n_heads, sums);
  return sums;
}

Baseline synthetic_baseline(const Cell& cell, const TaskBatch& test, const TaskSpec& spec) {
  const std::string& task = cell.get_string("task");
  const std::size_t B = test.tokens.shape()[0], L = test.tokens.shape()[1];
  if (task == "mqar") {
    const ScatteredAssociativeRecall t(static_cast<int>(L), cell.get_int32("mqar_n_pairs"),
                                       cell.get_int32("mqar_n_queries"), cell.get_int32("mqar_n_keys"),
                                       cell.get_int32("mqar_n_values"));
    const RecallBaseline r = t.key_agnostic(TokenBatch{test.tokens, test.targets});
    return {r.accuracy, r.loss};
  }
  if (task == "copy") {  // the most frequent symbol of the row so far
    Baseline base;
    std::size_t n = 0;
    std::vector<int> count(spec.vocab_size);
    for (std::size_t b = 0; b < B; ++b) {
      std::fill(count.begin(), count.end(), 0);
      for (std::size_t t = 0; t < L; ++t) {
        ++count[static_cast<std::size_t>(test.tokens(b, t))];
        const std::int32_t y = test.targets(b, t);
        if (y == kIgnoreTarget) continue;
        const int c = count[static_cast<std::size_t>(y)];
        const int top = *std::max_element(count.begin(), count.end());
        base.accuracy += c == top ? 1.0 / static_cast<double>(std::count(count.begin(), count.end(), top)) : 0.0;
        base.loss += -std::log(static_cast<double>(c) / static_cast<double>(t + 1));
        ++n;
      }
    }
    if (n > 0) {
      base.accuracy /= static_cast<double>(n);
      base.loss /= static_cast<double>(n);
    }
    return base;
  }
  return {spec.baseline_accuracy, spec.baseline_loss};
}

void add_eval_rows(CellOutput& out, const Row& id, const std::string& mode, std::size_t stride, std::size_t L_train,
                   std::size_t eval_len, const BucketSums& sums, const Baseline& base, bool distances) {
  static const char* const kBucketNames[5] = {"all", "within_train_len", "beyond_train_len",
                                              "distance_within_train_len", "distance_beyond_train_len"};
  for (std::size_t k = 0; k < (distances ? 5u : 3u); ++k) {
    const ScoreSums& s = sums[k];
    out.add_row(Row(id)
                    .add("mode", mode)
                    .add("stride", stride)
                    .add("L_train", L_train)
                    .add("eval_len", eval_len)
                    .add("eval_ratio", eval_len / L_train)
                    .add("bucket", kBucketNames[k])
                    .add("n_scored", s.n)
                    .add("loss_nats", s.mean_loss())
                    .add("perplexity", s.perplexity())
                    .add("accuracy", s.accuracy())
                    .add("baseline_accuracy", base.accuracy)
                    .add("baseline_loss_nats", base.loss),
                "eval");
  }
}

void Evaluator::run(CellOutput& out, SequenceModel& model, const Row& id, std::size_t width) const {
  const std::size_t Lt = cell.get_size("L_train"), h = cell.get_size("n_heads");
  for (std::size_t k = 0; k < ratios.size(); ++k) {
    const std::size_t L = ratios[k] * Lt;
    if (corpus) {
      const std::size_t N = cell.get_size("eval_tokens"), stride = cell.get_size("sliding_stride");
      const Baseline base{corpus->unigram_accuracy(TextSplit::test, N), corpus->unigram_loss(TextSplit::test, N)};
      const auto nov = TextEvaluation::non_overlapping(corpus, TextSplit::test, L, N, 64);
      add_eval_rows(out, id, "non_overlapping", L, Lt, L, evaluate_text(model, nov, width, Lt, h), base, false);
      const auto sl = TextEvaluation::sliding(corpus, TextSplit::test, L, stride, N, 64);
      add_eval_rows(out, id, "sliding", stride, Lt, L, evaluate_text(model, sl, width, Lt, h), base, false);
    } else {
      const TaskBatch& t = tests[k];
      add_eval_rows(out, id, "rows", 0, Lt, L, evaluate_rows(model, t, width, Lt, h), synthetic_baseline(cell, t, spec),
                    t.distances.size() > 0);
    }
  }
}

}  // namespace position_extrapolation

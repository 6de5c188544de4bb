// TaskBatch helpers (tasks/task.hpp).
#include <stdexcept>

#include "seqlab/core/rows.hpp"
#include "seqlab/tasks/task.hpp"

namespace seqlab {

std::size_t batch_rows(const TaskBatch& b) {
  if (b.tokens.size() > 0) return b.tokens.shape()[0];
  if (b.features.size() > 0) return b.features.shape()[0];
  return 0;
}

EvalSet eval_set(const TaskBatch& b) {
  EvalSet e;
  if (b.tokens.size() > 0) e.tokens = &b.tokens;
  if (b.features.size() > 0) e.features = &b.features;
  if (b.targets.size() > 0) e.targets = &b.targets;
  if (b.values.size() > 0) e.values = &b.values;
  if (b.padding.size() > 0) e.padding = &b.padding;
  if (b.decoder_tokens.size() > 0) e.decoder_tokens = &b.decoder_tokens;
  return e;
}

TaskBatch slice_rows(const TaskBatch& b, std::size_t r0, std::size_t n) {
  TaskBatch out;
  if (b.tokens.size() > 0) out.tokens = slice_rows(b.tokens, r0, n);
  if (b.features.size() > 0) out.features = slice_rows(b.features, r0, n);
  if (b.targets.size() > 0) out.targets = slice_rows(b.targets, r0, n);
  if (b.values.size() > 0) out.values = slice_rows(b.values, r0, n);
  if (b.padding.size() > 0) out.padding = slice_rows(b.padding, r0, n);
  if (b.distances.size() > 0) out.distances = slice_rows(b.distances, r0, n);
  if (b.decoder_tokens.size() > 0) out.decoder_tokens = slice_rows(b.decoder_tokens, r0, n);
  if (b.lengths.size() > 0) out.lengths = slice_rows(b.lengths, r0, n);
  return out;
}

}  // namespace seqlab

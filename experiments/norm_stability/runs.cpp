// norm_stability's runs of a cell and what they are built from (runs.hpp).
#include "runs.hpp"

#include <cmath>
#include <sstream>

#include "seqlab/tasks/majority.hpp"  // MajorityTask::pad_id

namespace norm_stability {

using namespace seqlab;

std::vector<RunSpec> runs_of(const Cell& cell) {
  RunSpec base;
  base.norm = cell.get_string("norm");
  base.placement = cell.get_string("norm_placement");
  base.batch = cell.get_size("batch");
  base.pad_fraction = cell.get_real("pad_fraction");
  base.warmup_steps = cell.get_int32("warmup_steps");
  base.lr = cell.get_real("lr");
  const std::string& study = cell.get_string("study");
  std::vector<RunSpec> runs;
  if (study == "batch") {
    for (auto b : cell.get_int_list("batch_sizes")) {
      RunSpec r = base;
      r.batch = static_cast<std::size_t>(b);
      runs.push_back(r);
    }
  } else if (study == "padding") {
    for (double p : cell.get_real_list("pad_fractions")) {
      RunSpec r = base;
      r.pad_fraction = p;
      runs.push_back(r);
    }
  } else {  // warmup
    for (const auto& pl : cell.get_string_list("placements"))
      for (auto w : cell.get_int_list("warmups"))
        for (double lr : cell.get_real_list("lrs")) {
          RunSpec r = base;
          r.placement = pl;
          r.warmup_steps = static_cast<int>(w);
          r.lr = lr;
          runs.push_back(r);
        }
  }
  return runs;
}

std::unique_ptr<Task> make_cell_task(const Cell& cell, double pad_fraction) {
  TaskParams p;
  for (const char* key : {"seq_len", "n_classes", "n_noise", "min_len"}) p.set(key, cell.params.text(key));
  std::ostringstream exact;  // 17 significant digits: the text reads back as the same double
  exact.precision(17);
  exact << pad_fraction;
  p.set("pad_fraction", exact.str());
  return make_task("majority", p);
}

ModelConfig model_config(const Cell& cell, const RunSpec& run, const TaskSpec& spec) {
  ModelConfig mc;
  mc.model = "transformer_encoder";
  apply_task_spec(spec, mc);  // embedding input of 1 + K + M ids, K outputs
  mc.head = "per_position";   // the class logits are pooled over the real positions (pool)
  mc.embedding_dim = cell.get_size("d_model");
  mc.hidden_size = cell.get_size("d_model");
  mc.num_layers = cell.get_size("num_layers");
  mc.n_heads = cell.get_size("n_heads");
  mc.d_ff = cell.get_size("d_ff");
  mc.norm = run.norm;
  mc.norm_placement = run.placement;
  mc.positional_encoding = "sinusoidal";
  mc.dropout = 0.0f;  // train mode then differs from eval mode only through BatchNorm
  mc.padding_idx = MajorityTask::pad_id();
  return mc;
}

LrSchedule make_schedule(const Cell& cell, const RunSpec& run) {
  LrSchedule s;
  s.kind = cell.get_string("schedule");
  s.base_lr = static_cast<float>(run.lr);
  s.warmup_steps = run.warmup_steps;
  s.total_steps = cell.get_int32("steps");
  return s;
}

std::int64_t pad_key(double p) { return std::llround(p * 1e6); }

}  // namespace norm_stability

// position_extrapolation's training phases and learning-rate pilot (phases.hpp).
#include "phases.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "seqlab/core/file_io.hpp"
#include "seqlab/core/hash.hpp"
#include "seqlab/core/rows.hpp"
#include "seqlab/experiment/tuning.hpp"
#include "seqlab/models/transformer_model.hpp"
#include "seqlab/nn/loss.hpp"
#include "seqlab/train/optimizer.hpp"
#include "seqlab/train/schedule.hpp"

namespace position_extrapolation {

using namespace seqlab;
using namespace seqlab::experiment;

PhaseResult train_phase(const Cell& cell, CellOutput& out, SequenceModel& model, const Task& task, Rng& rng,
                        const std::string& phase, const Row* curve, int steps, double lr, int warmup,
                        std::size_t batch, const PhaseExtras& extras) {
  const std::vector<Parameter*> params = model.parameters();
  OptimizerConfig oc;
  oc.lr = static_cast<float>(lr);
  oc.weight_decay = cell.get_float("weight_decay");
  auto optim = make_optimizer(cell.get_string("optimizer"), params, oc);
  LrSchedule schedule;
  schedule.kind = extras.schedule.empty() ? cell.get_string("schedule") : extras.schedule;
  schedule.base_lr = static_cast<float>(lr);
  schedule.warmup_steps = warmup;
  schedule.total_steps = std::max(1, steps);
  auto* tm = dynamic_cast<TransformerModel*>(&model);
  CrossEntropyLoss ce;
  TrainingPhase ph(cell, out, &model, phase);
  ph.steps(steps).clip_norm(cell.get_real("clip_norm"));
  const int every = extras.every > 0 ? extras.every : cell.get_int32("log_every");
  if (curve != nullptr && !extras.at_window) ph.curve(every, "steps", Row(*curve).add("phase", phase));
  if (curve != nullptr && extras.at_window)  // the curve row (as TrainingPhase::curve), then the caller's hook
    ph.every(every, [&, id = Row(*curve).add("phase", phase)](const TrainingWindow& w) {
      out.add_row(Row(id).add("step", w.step).add("train_loss", w.mean_loss).add("grad_norm", w.mean_grad_norm)
                      .add("lr", w.lr), "steps");
      extras.at_window(w.step);
      return false;
    });
  ph.state().add("data_rng", rng);
  return ph.run(params, *optim, schedule, [&](int) {
    const TaskBatch b = task.sample(batch, rng);
    if (tm != nullptr) tm->set_padding(b.padding.size() > 0 ? &b.padding : nullptr);
    const double loss = ce.forward(rows_of(model.forward(b.tokens)), ids_of(b.targets));
    model.backward(unrows(ce.backward(), batch, b.tokens.shape()[1]));
    if (extras.after_backward) extras.after_backward();
    if (tm != nullptr) tm->set_padding(nullptr);
    return loss;
  });
}

namespace {

// <out>/pilots: the cell's checkpoint prefix is <out>/checkpoints/<cell file stem>.
std::filesystem::path pilot_dir(const Cell& cell) {
  return std::filesystem::path(cell.checkpoint_prefix).parent_path().parent_path() / "pilots";
}

// What the pilot's result depends on: every key's value (the cell's arm and sizes) but the
// fine-tune keys (finetune_*, which only the fine-tunes after the pilot read), the base seed and
// --flush-denormals; not the replicate, nor --threads (which leaves the numbers as they are).
std::string pilot_key(const Cell& cell) {
  std::ostringstream s;
  s << "position_extrapolation lr pilot; base_seed=" << cell.base_seed;
  for (const auto& [key, value] : cell.params.entries())
    if (key.rfind("finetune_", 0) != 0) s << ";" << key << "=" << cell.params.text(key);
  if (cell.flush_denormals) s << ";flush_denormals";  // other numbers: not the same pilot
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(s.str())));
  return std::string(hex);
}

}  // namespace

std::vector<double> lr_grid_of(const Cell& cell) {
  const std::vector<double> own = cell.get_real_list("lr_grid_" + cell.get_string("task"));
  return own.empty() ? cell.get_real_list("lr_grid") : own;
}

int pilot_steps_of(const Cell& cell) {
  const int n = cell.get_int32("pilot_steps");
  return n > 0 ? n : cell.get_int32("steps_" + cell.get_string("task"));
}

PilotResult lr_pilot(const Cell& cell, const std::function<double(double lr)>& trial) {
  PilotResult p;
  p.grid = lr_grid_of(cell);
  const std::string key = pilot_key(cell);
  const std::filesystem::path file = pilot_dir(cell) / (key + ".json");
  std::error_code ec;
  if (std::filesystem::exists(file, ec)) {
    try {
      const nlohmann::json j = nlohmann::json::parse(read_file(file.string()));
      if (j.at("key").get<std::string>() == key && j.at("grid").get<std::vector<double>>() == p.grid) {
        p.lr = j.at("lr").get<double>();
        for (const auto& v : j.at("val_loss"))
          p.val_loss.push_back(v.is_null() ? std::numeric_limits<double>::infinity() : v.get<double>());
        p.all_diverged = j.at("all_diverged").get<bool>();
        p.from_cache = true;
        if (!cell.quiet)
          std::cerr << "note: " << cell.label() << ": learning-rate pilot read from '" << file.string()
                    << "' (lr " << format_real(p.lr) << "); its trials are not trained again" << std::endl;
        return p;
      }
    } catch (const std::exception&) {  // unreadable or another layout: computed again below
    }
  }
  const LrChoice c = choose_lr(p.grid, trial);
  p.lr = c.lr;
  p.val_loss = c.val_loss;
  p.all_diverged = c.all_diverged;
  nlohmann::json j;
  j["key"] = key;
  j["grid"] = p.grid;
  j["lr"] = p.lr;
  j["all_diverged"] = p.all_diverged;
  j["val_loss"] = nlohmann::json::array();
  for (double v : p.val_loss) j["val_loss"].push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  std::filesystem::create_directories(pilot_dir(cell), ec);
  write_file_atomic(file.string(), j.dump(1) + "\n");
  return p;
}

std::string pilot_text(const PilotResult& p) {
  std::string s;
  for (std::size_t i = 0; i < p.grid.size(); ++i)
    s += (i ? ";" : "") + format_real(p.grid[i]) + ":" +
         (i < p.val_loss.size() ? format_real(p.val_loss[i]) : std::string("nan"));
  return s;
}

}  // namespace position_extrapolation

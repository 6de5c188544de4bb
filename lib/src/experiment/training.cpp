// The training of a cell: its schedule from the cell's keys, its checkpoint options
// (experiment.hpp) and the training phase (training.hpp).
#include "seqlab/experiment/training.hpp"

#include "seqlab/nn/safetensors.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <utility>

namespace seqlab::experiment {

seqlab::LrSchedule cell_schedule(const Cell& cell) {
  const auto steps = cell.get_int("steps");
  const auto warmup = cell.get_int("warmup_steps");
  if (warmup > steps)
    throw ConfigError("warmup_steps: invalid value '" + std::to_string(warmup) +
                      "': expected an integer <= steps (" + std::to_string(steps) + ")");
  seqlab::LrSchedule s;
  s.kind = cell.get_string("schedule");
  if (s.kind == "inverse_sqrt" && warmup < 1)
    throw ConfigError("warmup_steps: invalid value '" + std::to_string(warmup) +
                      "': schedule = inverse_sqrt needs an integer >= 1");
  s.base_lr = cell.get_float("lr");
  s.warmup_steps = cell.get_int32("warmup_steps");
  s.total_steps = cell.get_int32("steps");
  s.validate();  // anything else it rejects (the message names the field)
  return s;
}

seqlab::CheckpointOptions cell_checkpoint(const Cell& cell, const std::string& phase,
                                          seqlab::Module* model, CellOutput& out) {
  const bool ok = !phase.empty() && phase.size() <= 64 &&
                  std::all_of(phase.begin(), phase.end(), [](char ch) {
                    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
                  });
  if (!ok)
    throw std::invalid_argument("cell_checkpoint: phase '" + phase +
                                "': expected 1 to 64 letters, digits, '_' or '-'");
  seqlab::CheckpointOptions o;
  if (cell.checkpoint_every <= 0 || cell.checkpoint_prefix.empty()) return o;  // off
  o.every = cell.checkpoint_every;
  o.path = cell.checkpoint_prefix + "." + phase + ".ckpt";
  o.identity = cell.checkpoint_identity + " phase=" + phase;
  o.model = model;
  o.notes = !cell.quiet;
  CellOutput* output = &out;
  o.state.add_custom(
      "cell_output",
      [output] {
        nlohmann::json j = nlohmann::json::object();
        for (const auto& [name, t] : output->tables()) j[name] = t.to_json();
        return j.dump();
      },
      [output](const std::string& bytes) -> std::function<void()> {
        std::map<std::string, Table> tables;
        const nlohmann::json j = nlohmann::json::parse(bytes);  // throws on malformed text
        if (!j.is_object()) throw CheckpointError("cell_output is not a JSON object");
        for (const auto& [name, t] : j.items()) tables[name] = Table::from_json(t);
        // Check against the declaration now, assign later (restore_tables checks again).
        if (tables.size() != output->tables().size())
          throw CheckpointError("cell_output has " + std::to_string(tables.size()) +
                                " tables, this cell " + std::to_string(output->tables().size()));
        for (const auto& [name, t] : tables) {
          const auto it = output->tables().find(name);
          if (it == output->tables().end() || it->second.columns != t.columns)
            throw CheckpointError("cell_output table '" + name + "' is not this cell's");
        }
        return [output, tables = std::move(tables)]() mutable {
          output->restore_tables(std::move(tables));
        };
      });
  return o;
}

void PhaseResult::check_test_loss(double test_loss) {
  if (diverged || std::isfinite(test_loss)) return;
  diverged = true;
  diverged_step = steps_done;
  diverged_reason = "non_finite_test_loss";
  diverged_what = "test loss = " + format_real(test_loss);
}

TrainingPhase::TrainingPhase(const Cell& cell, CellOutput& out, Module* model, std::string name)
    : cell_(cell), out_(out), model_(model), name_(std::move(name)),
      final_window_loss_(std::numeric_limits<double>::quiet_NaN()) {
  options_.checkpoint = cell_checkpoint(cell, name_, model, out);  // checks the name
  options_.quiet = cell.quiet;
  options_.label = name_ + " " + cell.label();
  auto& st = options_.checkpoint.state;
  st.add("phase.window_loss", window_loss_);
  st.add("phase.window_norm", window_norm_);
  st.add("phase.window_n", window_n_);
  st.add("phase.final_window_loss", final_window_loss_);
  st.add("phase.blowup_recent", recent_);
  st.add("phase.blowup_sum", recent_sum_);
}

TrainingPhase& TrainingPhase::steps(int n) {
  if (n < 0) throw std::invalid_argument("TrainingPhase::steps: " + std::to_string(n) + " < 0");
  options_.steps = n;
  return *this;
}

TrainingPhase& TrainingPhase::clip_norm(double c) {
  options_.clip_norm = c;
  return *this;
}

TrainingPhase& TrainingPhase::label(std::string l) {
  options_.label = std::move(l);
  return *this;
}

TrainingPhase& TrainingPhase::every(int every, WindowHook hook) {
  if (every < 1) throw std::invalid_argument("TrainingPhase::every: " + std::to_string(every) + " < 1");
  every_ = every;
  hook_ = std::move(hook);
  return *this;
}

TrainingPhase& TrainingPhase::curve(int every, std::string table, Row id) {
  CellOutput* out = &out_;
  return this->every(every, [out, table = std::move(table), id = std::move(id)](const TrainingWindow& w) {
    out->add_row(Row(id)
                     .add("step", w.step)
                     .add("train_loss", w.mean_loss)
                     .add("grad_norm", w.mean_grad_norm)
                     .add("lr", w.lr),
                 table);
    return false;
  });
}

TrainingPhase& TrainingPhase::on_step(std::function<void(const StepRecord&)> f) {
  on_step_ = std::move(f);
  return *this;
}

TrainingPhase& TrainingPhase::blowup(double threshold, std::size_t window) {
  if (window < 1) throw std::invalid_argument("TrainingPhase::blowup: window = 0; must be >= 1");
  blowup_threshold_ = threshold;
  blowup_window_ = window;
  return *this;
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Thrown from the step callback to end train_loop after the update of `step`.
struct StopAt {
  int step;
  bool blowup;
  double loss;
};

}  // namespace

PhaseResult TrainingPhase::run(const std::vector<Parameter*>& params, Optimizer& optim,
                               const LrSchedule& schedule,
                               const std::function<double(int step)>& loss_and_grad) {
  PhaseResult r;
  double hook_seconds = 0;
  const auto t0 = Clock::now();
  auto step_fn = [&](const StepRecord& rec) {
    if (on_step_) on_step_(rec);
    if (hook_) {
      window_loss_ += rec.loss;
      window_norm_ += rec.grad_norm;
      ++window_n_;
      const int done = rec.step + 1;
      if (done % every_ == 0 || done == options_.steps) {
        TrainingWindow w;
        w.step = done;
        w.updates = window_n_;
        w.mean_loss = window_loss_ / window_n_;
        w.mean_grad_norm = window_norm_ / window_n_;
        w.lr = rec.lr;
        w.train_time_s = seconds_since(t0) - hook_seconds;
        final_window_loss_ = w.mean_loss;
        window_loss_ = window_norm_ = 0;
        window_n_ = 0;
        const auto h0 = Clock::now();
        if (model_) model_->eval();
        const bool stop = hook_(w);
        if (model_) model_->train();
        hook_seconds += seconds_since(h0);
        if (stop) throw StopAt{rec.step, false, rec.loss};
      }
    }
    if (blowup_window_ > 0) {
      recent_.push_back(rec.loss);
      recent_sum_ += rec.loss;
      if (recent_.size() > blowup_window_) {
        recent_sum_ -= recent_.front();
        recent_.pop_front();
      }
      if (recent_.size() == blowup_window_ &&
          recent_sum_ / static_cast<double>(blowup_window_) > blowup_threshold_)
        throw StopAt{rec.step, true, rec.loss};
    }
  };
  if (model_) model_->train();
  try {
    const TrainResult tr = train_loop(options_, params, optim, schedule, loss_and_grad, step_fn);
    r.diverged = tr.diverged;
    r.diverged_step = tr.diverged_step;
    r.diverged_reason = tr.diverged ? "non_finite" : "none";
    r.diverged_what = tr.diverged_what;
    r.steps_done = tr.steps_done;
    r.last_loss = tr.last_loss;
  } catch (const StopAt& stop) {
    r.steps_done = stop.step + 1;  // that step's update was applied before the check
    r.last_loss = stop.loss;
    if (stop.blowup) {
      r.diverged = true;
      r.diverged_step = stop.step;
      r.diverged_reason = "loss_blowup";
      r.diverged_what = "mean loss of the last " + std::to_string(blowup_window_) + " updates > " +
                        format_real(blowup_threshold_);
    } else {
      r.stopped_early = true;
    }
  }
  r.train_time_s = seconds_since(t0) - hook_seconds;
  if (window_n_ > 0) final_window_loss_ = window_loss_ / window_n_;  // ended mid-window
  r.final_window_loss = final_window_loss_;
  if (model_) model_->eval();
  if (model_ && !cell_.model_prefix.empty()) {
    seqlab::save_safetensors(cell_.model_prefix + "." + name_ + ".safetensors", model_->state_dict(),
                             {{"cell", cell_.label()},
                              {"phase", name_},
                              {"steps_done", std::to_string(r.steps_done)},
                              {"diverged", r.diverged ? "1" : "0"}});
  }
  return r;
}

}  // namespace seqlab::experiment

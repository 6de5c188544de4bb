// The training-phase glue of a cell: its schedule from the cell's keys and its checkpoint
// options (experiment.hpp).
#include "seqlab/experiment/experiment.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <stdexcept>

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

}  // namespace seqlab::experiment

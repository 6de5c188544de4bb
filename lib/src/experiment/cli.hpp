#pragma once
// The command line of an experiment binary (private to lib/src/experiment): the parsed and
// validated invocation (flags, every key's values, the grid), the --help text, the checks of an
// ExperimentSpec, and the progress log. The contract is documented in
// seqlab/experiment/experiment.hpp.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqlab/experiment/experiment.hpp"

namespace seqlab::experiment::detail {

// Run options: command line only (seed and seeds are experiment-level keys, see key_specs()).
inline const std::vector<std::string> kRunFlags = {"help",  "config", "scale", "list-cells", "cell",
                                            "cells", "out",    "merge", "force",      "threads",
                                            "quiet", "status", "checkpoint-every",
                                            "save-model", "flush-denormals"};

struct Invocation {
  bool help = false, list_cells = false, merge = false, force = false, quiet = false;
  bool status = false;
  bool has_range = false;
  std::size_t first = 0, last = 0;
  std::string out;
  int threads = 1;
  int checkpoint_every = 0;
  bool save_model = false;
  bool flush_denormals = false;
  std::uint64_t base_seed = 1;
  std::size_t replicates = 1;
  std::string config_path;
  std::string scale;
  std::vector<OptionSpec> keys;  // the experiment's keys, then seeds and seed
  std::map<std::string, std::vector<Value>> values;
  std::vector<Cell> cells;
  nlohmann::json config_json;
  std::string command_line;
};

/// The experiment's keys, then `seeds` and `seed` (the framework's).
std::vector<OptionSpec> key_specs(const ExperimentSpec& spec);
/// The --help text.
std::string help_text(const ExperimentSpec& spec, const std::vector<OptionSpec>& keys);
/// Parses and validates everything (command line, config file, grid, the experiment's validate
/// hook, --cell/--cells, --out); throws ConfigError for bad input. Creates nothing.
Invocation parse_invocation(int argc, const char* const* argv, const ExperimentSpec& spec);
/// Throws std::logic_error for a malformed spec (names, reserved or unbounded keys, tables).
void check_spec(const ExperimentSpec& spec);
/// "[name] msg" on stderr unless --quiet.
void log(const Invocation& inv, const ExperimentSpec& spec, const std::string& msg);

}  // namespace seqlab::experiment::detail

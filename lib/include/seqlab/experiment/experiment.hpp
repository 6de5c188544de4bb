#pragma once
// The experiment contract (DESIGN.md "Experiment contract"), shared by every experiment binary.
//
// An experiment declares its keys and a function that runs one cell; run_experiment does the rest:
//
//   --help                 every key with default, unit and what is allowed
//   --scale quick|paper    loads <experiment dir>/configs/<scale>.ini (default: quick, unless
//                          --config is given)
//   --config FILE.ini      `key = value` lines ('#' comments); unknown keys are errors
//   --KEY=VALUE            overrides any key (the command line wins over the file)
//   --list-cells           prints the grid, one "index key=value ... seed=r" line per cell
//   --cell N, --cells A-B  runs part of the grid (inclusive); without them all cells run, then merge
//   --out DIR              default results/<name> (relative to the current directory)
//   --merge                joins the finished cells into <out>/<name>.csv (+ <name>_<table>.csv
//                          for other tables) and <out>/<name>.meta.json; exit 1 naming missing cells
//   --force                recomputes cells that are already done (default: resume, skip them)
//   --threads N            thread budget (seqlab::set_num_threads), default 1
//   --seed S               base seed (also `seed = S` in a config file), default 1
//   --seeds R              replicates per grid point (a key like the others; also in config files)
//   --quiet                no progress output on stderr
//
// Sweep keys take comma-separated lists; the grid is their Cartesian product times `seeds`
// replicates, in the order and with the seed rule of grid.hpp.
//
// Files: each finished cell is <out>/cells/<label>_<hash>.json, written atomically, where <hash>
// is a 64-bit FNV-1a hash of Cell::fingerprint (every key's value, base seed, replicate). A cell is
// skipped when that file exists and its stored fingerprint matches, so a killed sweep resumes
// where it stopped, and a sweep extended with more values or seeds reuses the cells it already has.
// Merge lists cells in index order, so the CSV does not depend on which process ran which cell.
// The fingerprint does not include the code version: after changing the code, rerun with --force
// (a resumed run prints a note when reused cells come from another git commit, and meta.json
// lists every cell's commit).
//
// Exit status: 0 done; 2 bad input (one line on stderr naming the key, the value and what is
// allowed; printed before any file or directory is created); 1 runtime failure (a cell threw, a
// file could not be written, cells missing at merge). A diverged training run is a result, not a
// failure: run_cell records it in its row.
//
// Minimal experiment (experiments/<name>/main.cpp):
//
//   #include "seqlab/experiment/experiment.hpp"
//   using namespace seqlab::experiment;
//
//   void run_cell(const Cell& cell, CellOutput& out) {
//     seqlab::Rng rng(cell.stream_seed(1));
//     const auto n = cell.get_int("n");
//     double loss = ...;                                   // the measurement
//     out.add_row(Row().add("experiment", "demo").add("n", n).add("seed", cell.replicate)
//                      .add("loss", loss));
//   }
//
//   int main(int argc, char** argv) {
//     ExperimentSpec spec;
//     spec.name = "demo";
//     spec.description = "What claim it tests.";
//     spec.experiment_dir = SEQLAB_EXPERIMENT_DIR;        // defined by CMake per experiment
//     spec.options = {int_sweep("n", {10, 20}, "tokens", "sequence length").at_least(1),
//                     real_option("lr", 1e-3, "1", "learning rate").greater_than(0)};
//     spec.default_seeds = 3;
//     spec.run_cell = run_cell;
//     return run_experiment(argc, argv, spec);
//   }
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "seqlab/experiment/grid.hpp"
#include "seqlab/experiment/options.hpp"
#include "seqlab/experiment/table.hpp"

namespace seqlab::experiment {

struct ExperimentSpec {
  /// Binary name; results/<name>, <name>.csv, <name>.meta.json. Letters, digits, '_'.
  std::string name;
  /// A paragraph for --help: the claim and what is measured.
  std::string description;
  /// experiments/<name>: where --scale finds configs/<scale>.ini. Set it to SEQLAB_EXPERIMENT_DIR.
  std::string experiment_dir;
  /// The experiment's keys, in the order --help lists them; the sweep keys' order is the grid's.
  /// Reserved names (added by the framework): seeds, seed, threads, and the run flags above.
  std::vector<OptionSpec> options;
  /// Default of the `seeds` key (replicates per grid point).
  std::int64_t default_seeds = 1;
  /// Columns whose values are not reproducible (wall-clock times); listed in meta.json as
  /// "nondeterministic_columns". Every other column is byte-identical for the same seed and threads.
  std::vector<std::string> timing_columns;
  /// Optional cross-key checks, called for every cell before anything runs or is written. Throw
  /// ConfigError (or std::invalid_argument) with a message naming the key, the value and what is
  /// allowed: it becomes the exit-2 message.
  std::function<void(const Cell&)> validate;
  /// Runs one cell and adds its rows to `out`. An exception is a runtime failure of this cell
  /// (reported, nothing written for it, exit status 1 at the end; the other cells still run).
  std::function<void(const Cell&, CellOutput&)> run_cell;
};

/// Runs the command line `argv` against `spec` as documented above; returns the exit status.
/// Prints to stdout (--help, --list-cells) and stderr (errors, progress unless --quiet).
int run_experiment(int argc, const char* const* argv, const ExperimentSpec& spec);
inline int run_experiment(int argc, char** argv, const ExperimentSpec& spec) {
  return run_experiment(argc, const_cast<const char* const*>(argv), spec);
}

/// File name of a cell's result inside <out>/cells/: "<label>_<16 hex digits>.json", the label with
/// characters other than letters, digits, '.', '-', '=' replaced by '_'.
std::string cell_file_name(const Cell& cell, const std::string& experiment);

/// FNV-1a 64-bit hash of a string (for cell file names).
std::uint64_t fnv1a64(const std::string& s);

}  // namespace seqlab::experiment

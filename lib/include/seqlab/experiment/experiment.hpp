#pragma once
// The experiment contract (DESIGN.md "Experiment contract"), shared by every experiment binary.
//
// An experiment declares its keys and a function that runs one cell; run_experiment does the rest:
//
//   --help                 every key with default, unit and what is allowed
//   --scale NAME           loads <experiment dir>/configs/<NAME>.ini: tiny (tests), quick (the
//                          main job), standard (decides the claim on one 2-core machine), paper
//                          (the anchor papers' sizes); default quick unless --config is given
//   --config FILE.ini      `key = value` lines ('#' comments); unknown keys are errors
//   --KEY=VALUE            overrides any key (the command line wins over the file)
//   --list-cells           prints the grid, one "index key=value ... seed=r" line per cell
//   --status               prints "index done|missing|partial|corrupt key=value ... seed=r", one
//                          line per cell (of --cell/--cells if given) of <out>/cells/, each stored
//                          cell verified as a run verifies it (below); "partial": not done, but
//                          training checkpoints of it exist (a rerun resumes from them); why a
//                          cell is corrupt goes to stderr. Runs and writes nothing (--out may be missing or read-only);
//                          exit 0 whatever the states. experiments/slurm/ submits the cells that
//                          are not done. (--list-cells wins over it; it wins over the run flags.)
//   --cell N, --cells A-B  runs part of the grid (inclusive); without them all cells run, then merge
//   --out DIR              default results/<name> (relative to the current directory)
//   --merge                joins the finished cells into <out>/<name>.csv (+ <name>_<table>.csv
//                          for other tables) and <out>/<name>.meta.json; exit 1 naming missing
//                          and corrupt cells
//   --force                recomputes cells that are already done (default: resume, skip them),
//                          and removes their training checkpoints first (never resumes from them)
//   --checkpoint-every N   checkpoints inside a cell: every training phase of a cell (a
//                          train_loop call given cell_checkpoint(cell, phase, ...)) saves model
//                          parameters and buffers, optimizer, random generators and data position
//                          every N updates and at its end to <out>/checkpoints/<cell file stem>.
//                          <phase>.ckpt, atomically. A killed cell, rerun, resumes from the last
//                          checkpoint (a finished phase is skipped) and ends with the same metric
//                          columns, byte for byte, as an uninterrupted run (wall-clock columns,
//                          timing_columns, aside). A checkpoint is used only by the same cell
//                          (fingerprint), --threads, --flush-denormals and build (git commit); a truncated, damaged or
//                          foreign one is reported and ignored (the phase starts at step 0). When
//                          the cell's result file is written, its checkpoints are removed.
//                          Integer in [0, kMaxCheckpointEvery]; 0 (default) = off (checkpoints of
//                          an earlier run are then not used, and removed when the cell finishes).
//   --save-model           every training phase of a cell (TrainingPhase, training.hpp) writes its
//                          model's final weights to <out>/models/<cell file stem>.<phase>.
//                          safetensors (PyTorch state_dict names, nn/safetensors.hpp)
//   --threads N            thread budget (seqlab::set_num_threads), default 1, in [1, kMaxThreads]
//   --flush-denormals      flush-to-zero and denormals-are-zero on every thread of the process
//                          (seqlab::set_flush_denormals, core/threads.hpp); off by default. The
//                          cell file records "flush_denormals": true; checkpoints and shared pilots
//                          are used only by runs with the same setting
//   --seed S               base seed (also `seed = S` in a config file), default 1, in
//                          [0, 2^63-1]
//   --seeds R              replicates per grid point (a key like the others; also in config files),
//                          in [1, kMaxSeeds]
//   --quiet                no progress output on stderr
//
// Sweep keys take comma-separated lists; the grid is their Cartesian product times `seeds`
// replicates, in the order and with the seed rule of grid.hpp, at most kMaxCells cells (counted
// with overflow checks; more is bad input naming the sweep keys and the count), less the points
// the experiment's ExperimentSpec::keep drops (a design that is not a full product).
// Values: every integer key declares an upper bound its consumer can represent (run_experiment
// throws std::logic_error, exit 1, for a spec without one) and is read with the non-truncating
// accessors (Cell::get_int32, get_size); every real value must be a finite float (options.hpp).
//
// Files: each finished cell is <out>/cells/<label>_<hash>.json, written atomically, where <hash>
// is a 64-bit FNV-1a hash of Cell::fingerprint (every key's value, base seed, replicate). The file
// holds the fingerprint, the tables and "checksum" = cell_checksum(fingerprint, tables). A stored
// cell is used only if it verifies: its fingerprint matches, the checksum matches, it has exactly
// the declared tables with the declared columns and a non-empty main table, and every column
// named like a sweep key holds this cell's value of that key (so an experiment must not use a
// sweep key's name for a column with another meaning). A cell that fails is corrupt: a run
// recomputes it (even without --force), --merge exits 1 naming it. So a killed sweep resumes where
// it stopped, and a sweep extended with more values or seeds reuses the cells it already has.
// A cell whose file is missing but which was stored under another hash before some of its keys
// were declared unread (ExperimentSpec::unread_keys) is reused too: a file with its label whose
// checksum verifies and whose fingerprint, less the cell's grid-only and unread keys, is this
// cell's is written again under this cell's name with its fingerprint (run and --merge; --status
// only reports it done). So declaring a key unread later keeps the cells that never read it.
// Merge lists cells in index order, so the CSV does not depend on which process ran which cell,
// and writes every declared table, header only when no cell has rows for it (so a table from an
// earlier merge is always replaced; a table the experiment no longer declares is not removed).
// At start, temporary files of killed writers on this host are removed (io.hpp).
// The fingerprint does not include the code version: after changing the code, rerun with --force
// (a resumed run prints a note when reused cells come from another git commit, and meta.json
// lists every cell's commit).
//
// Exit status: 0 done; 2 bad input (one line on stderr naming the key, the value and what is
// allowed; printed before any file or directory is created); 1 runtime failure (a cell threw or
// ran out of memory, a file could not be written, cells missing or corrupt at merge, --help or
// --list-cells could not write to stdout). A diverged training run is a result, not a failure:
// run_cell records it in its row.
//
// Minimal experiment (experiments/<name>/main.cpp):
//
//   #include "seqlab/experiment/experiment.hpp"
//   using namespace seqlab::experiment;
//
//   void run_cell(const Cell& cell, CellOutput& out) {
//     seqlab::Rng rng(cell.stream_seed(1));
//     const std::size_t n = cell.get_size("n");
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
//     spec.options = {int_sweep("n", {10, 20}, "tokens", "sequence length").at_least(1)
//                         .at_most(100000),
//                     real_option("lr", 1e-3, "1", "learning rate").greater_than(0)};
//     spec.tables = {{kMainTable, {"experiment", "n", "seed", "loss"}}};
//     spec.default_seeds = 3;
//     spec.run_cell = run_cell;
//     return run_experiment(argc, argv, spec);
//   }
//
// A cell that trains uses a TrainingPhase (experiment/training.hpp), which runs train_loop with
// the cell's checkpoint options, so --checkpoint-every works for it, and owns the curve window,
// the timer and the divergence rules:
//
//   TrainingPhase phase(cell, out, model.get(), "train");          // one name per phase
//   phase.steps(cell.get_int32("steps")).curve(cell.get_int32("log_every"), "steps", id);
//   phase.state().add("train_rng", train_rng);   // every value the steps change outside
//                                                 // the model and the optimizer
//   const PhaseResult r = phase.run(params, optim, schedule, loss_and_grad);
//
// Scores over a test set come from train/metrics.hpp (evaluate_chunked), batches from the task
// registry (tasks/task.hpp, make_task).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "seqlab/experiment/grid.hpp"
#include "seqlab/experiment/options.hpp"
#include "seqlab/experiment/table.hpp"
#include "seqlab/train/checkpoint.hpp"
#include "seqlab/train/schedule.hpp"

namespace seqlab::experiment {

/// Upper bound of the `seeds` key (replicates per grid point).
inline constexpr std::int64_t kMaxSeeds = 100000;
/// Upper bound of --threads.
inline constexpr std::int64_t kMaxThreads = 1024;
/// Upper bound of --checkpoint-every (updates).
inline constexpr std::int64_t kMaxCheckpointEvery = 1000000000;
/// Largest config file read (--config, --scale), bytes.
inline constexpr std::size_t kMaxConfigBytes = 16u << 20;

struct ExperimentSpec {
  /// Binary name; results/<name>, <name>.csv, <name>.meta.json. Letters, digits, '_'.
  std::string name;
  /// A paragraph for --help: the claim and what is measured.
  std::string description;
  /// experiments/<name>: where --scale finds configs/<scale>.ini. Set it to SEQLAB_EXPERIMENT_DIR.
  std::string experiment_dir;
  /// The experiment's keys, in the order --help lists them; the sweep keys' order is the grid's.
  /// Reserved names (added by the framework): seeds, seed, threads, and the run flags above.
  /// Integer keys must have an upper bound (OptionSpec::at_most).
  std::vector<OptionSpec> options;
  /// The tables run_cell writes, main table (kMainTable) first, each with its columns in order.
  /// run_cell's CellOutput accepts exactly these; merge writes every one of them.
  std::vector<TableSpec> tables;
  /// Default of the `seeds` key (replicates per grid point).
  std::int64_t default_seeds = 1;
  /// Columns whose values are not reproducible (wall-clock times); listed in meta.json as
  /// "nondeterministic_columns". Every other column is byte-identical for the same seed and threads.
  std::vector<std::string> timing_columns;
  /// Optional cross-key checks, called for every cell before anything runs or is written. Throw
  /// ConfigError (or std::invalid_argument) with a message naming the key, the value and what is
  /// allowed: it becomes the exit-2 message.
  std::function<void(const Cell&)> validate;
  /// Optional: which points of the Cartesian product are cells, for a design that is not a full
  /// product (e.g. a width sweep run for one task at one length only). Called for every point
  /// (every replicate) before validate; the points it returns false for are not cells: not
  /// listed, run, validated or merged. The kept cells are numbered 0..n-1 in grid order
  /// (Cell::index, Cell::count); their seeds and fingerprints are those of the full grid (the
  /// seed rule depends on the replicate only), so filtering never changes a cell's result.
  /// Keeping none is bad input (exit 2). Empty (the default): every point is a cell.
  std::function<bool(const Cell&)> keep;
  /// Optional: sets keys whose value depends on the cell, e.g. a longer budget for some arms read
  /// from a key of their own (steps := width_steps in the cells of a width study). Called for every
  /// kept cell after keep and before unread_keys, validate and the fingerprint, so the values it
  /// sets are the cell's: its fingerprint, its checks and run_cell see them (a cell whose resolved
  /// values equal another run's cell has that cell's fingerprint and reuses its stored result).
  /// It may change non-sweep keys only, to a value of the key's type; changing a sweep key or
  /// setting an undeclared one is a std::logic_error. Values are re-checked against their key's
  /// bounds (ConfigError, exit 2, naming the key). Empty (the default): nothing changes.
  std::function<void(Cell&)> resolve;
  /// Optional: the keys a kept cell's computation never reads, left out of that cell's fingerprint
  /// (Cell::fingerprint) as the grid-only keys are. So a key added later for some cells only (e.g.
  /// the budget of one arm) keeps the fingerprints, and so the finished results, of the others,
  /// while the cells that read it are identified by its value. A key the cell reads must not be
  /// listed (its stored result would be reused after the key changed). Called after keep; a name
  /// that is not a declared non-sweep key is a std::logic_error. Empty (the default): none.
  std::function<std::vector<std::string>(const Cell&)> unread_keys;
  /// Runs one cell and adds its rows to `out`. An exception is a runtime failure of this cell
  /// (reported, nothing written for it, exit status 1 at the end; the other cells still run);
  /// std::bad_alloc is reported as "out of memory: the sizes of this cell are too large".
  std::function<void(const Cell&, CellOutput&)> run_cell;
};

/// Runs the command line `argv` against `spec` as documented above; returns the exit status.
/// Prints to stdout (--help, --list-cells) and stderr (errors, progress unless --quiet).
int run_experiment(int argc, const char* const* argv, const ExperimentSpec& spec);
inline int run_experiment(int argc, char** argv, const ExperimentSpec& spec) {
  return run_experiment(argc, const_cast<const char* const*>(argv), spec);
}

/// Checkpoint options for training phase `phase` of `cell`, to put into TrainOptions::checkpoint:
/// every = cell.checkpoint_every (0, off, unless --checkpoint-every was given), path
/// cell.checkpoint_prefix + "." + phase + ".ckpt", identity cell.checkpoint_identity + the phase,
/// model `model` (its named parameters and buffers are saved; may be null), notes unless --quiet,
/// and the state of `out` (the rows run_cell has added so far, under the name "cell_output"), so
/// rows added by a step callback survive a resume. Add the phase's own changing values (data
/// generators, accumulators) with .state.add(...). `phase`: a name of letters, digits, '_', '-'
/// unique within the cell (e.g. "train", "pretrain", "finetune", "run3"); anything else throws
/// std::invalid_argument. `out` must outlive the returned options.
seqlab::CheckpointOptions cell_checkpoint(const Cell& cell, const std::string& phase,
                                          seqlab::Module* model, CellOutput& out);

/// The learning-rate schedule of a cell whose keys are "schedule" (kind), "lr" (base_lr),
/// "warmup_steps" and "steps" (total_steps), validated (train/schedule.hpp). Throws ConfigError
/// naming the key, its value and what is allowed if warmup_steps > steps, or if the schedule is
/// inverse_sqrt with warmup_steps < 1; std::invalid_argument naming the field for anything else
/// LrSchedule::validate rejects; std::out_of_range if a key is missing or a value does not fit.
/// Call it from the experiment's validate hook too, so that bad values exit 2 before any cell runs.
seqlab::LrSchedule cell_schedule(const Cell& cell);

/// File name of a cell's result inside <out>/cells/: "<label>_<16 hex digits>.json", the label with
/// characters other than letters, digits, '.', '-', '=' replaced by '_'.
std::string cell_file_name(const Cell& cell, const std::string& experiment);

/// FNV-1a 64-bit hash of a string (for cell file names and checksums).
std::uint64_t fnv1a64(const std::string& s);

/// Checksum stored in a cell file: "fnv1a64:" + 16 hex digits of fnv1a64 of the compact JSON dump
/// of {"fingerprint": fingerprint, "tables": tables} (object keys sorted, so canonical).
std::string cell_checksum(const nlohmann::json& fingerprint, const nlohmann::json& tables);

}  // namespace seqlab::experiment

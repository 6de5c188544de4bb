#pragma once
// The sweep grid: cells, their order, and the seed rule.
//
// Grid: the Cartesian product of the sweep keys' value lists, times `seeds` replicates. Order is
// fixed: sweep keys in the experiment's declaration order, the first one outermost, each key's
// values in the order they are listed, and the replicate index innermost. Cell indices 0..n-1
// follow this order; merged CSVs list cells in this order.
//
// Seed rule (documented in every experiment README):
//   cell seed      = derive_seed(base_seed, replicate)            (Cell::seed)
//   stream seeds   = derive_seed(base_seed, replicate, purpose)   (Cell::stream_seed, purpose >= 1)
// A cell's seeds depend only on the base seed (--seed) and its replicate index, never on the other
// grid values or on the grid's order: replicate r of model A and of model B (or of T=10 and T=50)
// draw their data from the same seeds, so comparisons across the grid are paired, and adding values
// to a sweep does not change the seeds of existing cells.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqlab/core/rng.hpp"
#include "seqlab/experiment/options.hpp"

namespace seqlab::experiment {

/// derive_seed(base_seed, replicate): the seed of replicate `replicate`.
std::uint64_t replicate_seed(std::uint64_t base_seed, std::size_t replicate);
/// derive_seed(base_seed, replicate, purpose): an independent stream (purpose >= 1, e.g. 1 = init,
/// 2 = training data, 3 = test data), shared by every cell with this replicate index.
std::uint64_t stream_seed(std::uint64_t base_seed, std::size_t replicate, std::uint64_t purpose);

/// One point of the grid: what run_cell receives.
struct Cell {
  std::size_t index = 0;       // position in the grid, 0-based
  std::size_t count = 0;       // number of cells in the grid
  std::size_t replicate = 0;   // 0 .. seeds-1 (the "seed" column of the CSVs)
  std::uint64_t base_seed = 0; // --seed
  std::uint64_t seed = 0;      // replicate_seed(base_seed, replicate)
  Params params;               // every experiment key; sweep keys at this cell's value
  std::vector<std::string> sweep_keys;  // in grid order
  // Keys left out of the fingerprint: the OptionSpec::grid_only keys, then the cell's
  // ExperimentSpec::unread_keys.
  std::vector<std::string> grid_only_keys;
  bool quiet = false;          // --quiet: run_cell should print nothing
  // Checkpoints inside the cell (--checkpoint-every), set by run_experiment for the cell it runs;
  // an experiment passes them to train_loop with cell_checkpoint (experiment.hpp).
  int checkpoint_every = 0;          // save every N updates; 0 = off
  std::string checkpoint_prefix;     // "<out>/checkpoints/<cell file stem>"; + ".<phase>.ckpt"
  std::string checkpoint_identity;   // fingerprint, --threads, --flush-denormals and build the
                                     // checkpoints belong to
  // --flush-denormals: the run computes with subnormals flushed to zero (set_flush_denormals);
  // a cache of the experiment's own that outlives the run keys on it.
  bool flush_denormals = false;
  // --save-model: "<out>/models/<cell file stem>" (+ ".<phase>.safetensors"); empty = off.
  std::string model_prefix;
  // Pilots shared by several cells (shared_choose_lr, tuning.hpp), set by run_experiment:
  // "<out>/pilots", and what identifies the build that computes them (" threads=N exe=H", plus
  // " flush_denormals" with that run option, H a
  // hash of the executable's bytes, so a rebuild with other code never reuses a pilot; empty if
  // the executable cannot be read: nothing is shared). Empty pilot_dir (a Cell built by hand): off.
  std::string pilot_dir;
  std::string build_identity;

  std::uint64_t stream_seed(std::uint64_t purpose) const {
    return experiment::stream_seed(base_seed, replicate, purpose);
  }
  std::int64_t get_int(const std::string& key) const { return params.get_int(key); }
  /// Narrowing accessors (Params): throw std::out_of_range instead of truncating.
  template <class T>
  T get_int_as(const std::string& key) const { return params.get_int_as<T>(key); }
  std::int32_t get_int32(const std::string& key) const { return params.get_int32(key); }
  std::size_t get_size(const std::string& key) const { return params.get_size(key); }
  double get_real(const std::string& key) const { return params.get_real(key); }
  float get_float(const std::string& key) const { return params.get_float(key); }
  const std::string& get_string(const std::string& key) const { return params.get_string(key); }
  /// List keys (options.hpp).
  std::vector<std::int64_t> get_int_list(const std::string& key) const { return params.get_int_list(key); }
  std::vector<double> get_real_list(const std::string& key) const { return params.get_real_list(key); }
  std::vector<std::string> get_string_list(const std::string& key) const {
    return params.get_string_list(key);
  }

  /// "model=lstm T=10 seed=0": the sweep keys' values then the replicate (what --list-cells prints
  /// after the index).
  std::string label() const;
  /// What identifies the result of this cell: experiment name, every key's value as text (except
  /// the grid-only keys, which never change a cell's result), the base seed and the replicate (not
  /// the number of replicates, not --threads). A stored cell is reused
  /// only if its fingerprint equals this one.
  nlohmann::json fingerprint(const std::string& experiment) const;
};

/// Largest grid build_grid accepts by default: every cell is held in memory (about 2 KB each) and
/// becomes a file in <out>/cells/ and a line of --list-cells; a larger sweep is a mistake.
inline constexpr std::size_t kMaxCells = 100000;

/// Builds the grid. `specs`: the experiment's keys in declaration order; `values`: every key's
/// parsed values (one value for non-sweep keys). Throws std::invalid_argument if a key has no value
/// or a non-sweep key has several, or replicates == 0. The number of cells (the product of the
/// sweep lists' lengths and `replicates`) is computed with overflow checks before anything is
/// allocated; more than `max_cells` throws ConfigError naming the sweep keys, their lengths, the
/// count and the limit.
std::vector<Cell> build_grid(const std::vector<OptionSpec>& specs,
                             const std::map<std::string, std::vector<Value>>& values,
                             std::size_t replicates, std::uint64_t base_seed,
                             std::size_t max_cells = kMaxCells);

/// Parses a --cell value ("7") or a --cells value ("3-9", inclusive) against a grid of `n_cells`
/// cells and returns the inclusive range [first, last]. Throws ConfigError naming `flag`
/// ("--cell"/"--cells"), the value and the allowed range.
std::pair<std::size_t, std::size_t> parse_cell_range(const std::string& flag,
                                                     const std::string& text,
                                                     std::size_t n_cells);

/// "3, 5-7, 10": a sorted list of indices with runs collapsed (for messages).
std::string format_index_list(const std::vector<std::size_t>& sorted_indices);

}  // namespace seqlab::experiment

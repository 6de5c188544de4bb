#pragma once
// The cell store (private to lib/src/experiment): where a cell's result lives
// (<out>/cells/<file>, cell_file_name in experiment.hpp), how a stored cell is verified
// (fingerprint, checksum, declared tables and columns, sweep-key values) and a cell's training
// checkpoints under <out>/checkpoints/. The contract is documented in
// seqlab/experiment/experiment.hpp ("Files").
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqlab/experiment/experiment.hpp"

namespace seqlab::experiment::detail {

/// "" if `tables` (the "tables" object of a cell file, or a fresh CellOutput's) holds exactly the
/// declared tables with their declared columns, a non-empty main table, and, in every column
/// named like a sweep key, this cell's value of that key; else what is wrong.
std::string check_tables(const nlohmann::json& tables, const Cell& cell, const ExperimentSpec& spec);

/// What load_cell found.
struct StoredCell {
  enum class Status { Missing, Corrupt, Ok } status = Status::Missing;
  std::string why;        // Corrupt: what is wrong
  nlohmann::json json;    // Ok: the cell file
};

/// Reads and verifies `file`, the stored result of `cell`: fingerprint, checksum, declared tables
/// and columns, sweep-key values (check_tables). A file that does not exist is Missing; any other
/// problem (unreadable, not JSON, another cell's fingerprint, checksum mismatch...) is Corrupt.
StoredCell load_cell(const std::filesystem::path& file, const Cell& cell,
                     const nlohmann::json& fingerprint, const ExperimentSpec& spec);

/// A stored result of `cell` under another file name: a regular file (not a link) of `file`'s
/// directory with the same
/// label and another fingerprint hash whose own checksum verifies and whose fingerprint, less the
/// cell's grid-only keys (OptionSpec::grid_only, ExperimentSpec::unread_keys), equals
/// `fingerprint`. Such a file was written before those keys left the fingerprint (a key declared
/// unread later), and no key the cell reads differs, so it is this cell's result. Found: Ok, its
/// json with `fingerprint` and the checksum recomputed over it (the tables as stored), and with
/// `write` saved as `file` (atomically; the other file is left as it is). Not found: Missing.
StoredCell adopt_cell(const std::filesystem::path& file, const Cell& cell,
                      const nlohmann::json& fingerprint, const ExperimentSpec& spec, bool write);

/// load_cell, and when `file` does not exist, adopt_cell.
StoredCell load_or_adopt_cell(const std::filesystem::path& file, const Cell& cell,
                              const nlohmann::json& fingerprint, const ExperimentSpec& spec,
                              bool write);

/// "<cell file stem>": the cell's file name without ".json" (prefix of its checkpoint files).
std::string cell_stem(const Cell& c, const std::string& experiment);
/// The checkpoint files "<stem>.<phase>.ckpt" of one cell in `dir` (none if it does not exist),
/// sorted.
std::vector<std::filesystem::path> cell_checkpoints(const std::filesystem::path& dir,
                                                    const std::string& stem);
/// Removes a cell's checkpoint files; returns how many. Errors are ignored (a leftover
/// checkpoint is never used by another cell: its name and identity belong to this one).
std::size_t remove_cell_checkpoints(const std::filesystem::path& dir, const std::string& stem);

}  // namespace seqlab::experiment::detail

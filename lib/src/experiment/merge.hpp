#pragma once
// --merge (private to lib/src/experiment): joins every finished cell of the grid, in index
// order, into <out>/<name>.csv (+ <name>_<table>.csv per other table) and <out>/<name>.meta.json.
#include <string>

#include "cli.hpp"

namespace seqlab::experiment::detail {

/// Merges every cell of `inv` into the CSVs and meta.json (experiment.hpp, "--merge"); exit 1
/// naming missing and corrupt cells (nothing written then). Returns the exit status.
/// `start_utc`: when this process started (meta.json "merge_start_utc").
int merge(const Invocation& inv, const ExperimentSpec& spec, const std::string& start_utc);

}  // namespace seqlab::experiment::detail

#pragma once
// Provenance recorded in every <name>.meta.json and cell file (DESIGN.md "CSV and metadata").
#include <string>

#include <nlohmann/json.hpp>

namespace seqlab::experiment {

/// Current UTC time as ISO 8601 with seconds: "2024-05-01T12:34:56Z".
std::string utc_now();

/// Build provenance: {"seqlab_version", "git_commit", "git_dirty", "compiler", "cxx_flags",
/// "build_type"}. The commit comes from `git -C <source dir> rev-parse HEAD` and the dirty flag
/// from `git --no-optional-locks status --porcelain` (tracked and untracked files, results/
/// excluded; read-only: it never writes the index). Without git: "unknown" and null. Computed once
/// per process.
nlohmann::json build_info();

/// Machine: {"host", "cpu_model" (first "model name" of /proc/cpuinfo), "cores"
/// (hardware threads), "blas_config" (openblas_get_config()), "threads" (seqlab::num_threads())}.
nlohmann::json machine_info();

}  // namespace seqlab::experiment

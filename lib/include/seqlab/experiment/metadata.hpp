#pragma once
// Provenance recorded in every <name>.meta.json and cell file (DESIGN.md "CSV and metadata").
#include <string>

#include <nlohmann/json.hpp>

namespace seqlab::experiment {

/// Current UTC time as ISO 8601 with seconds: "2024-05-01T12:34:56Z".
std::string utc_now();

/// Build provenance: {"seqlab_version", "git_commit", "git_dirty", "compiler", "cxx_flags",
/// "build_type"}, all fixed when this binary was built: a copy run while the source tree moves on
/// still reports the sources it was compiled from. "git_commit" is `git rev-parse HEAD` of the
/// source tree at build time and "git_dirty" whether `git status --porcelain` listed any change
/// then (tracked files modified, staged or deleted, or untracked files not ignored; results/ and
/// an in-tree build directory excluded). Without git, or outside a checkout (a tarball):
/// "unknown" and null. Written by lib/provenance.cmake, which runs on every build and rewrites
/// its generated file only when the values change.
nlohmann::json build_info();

/// Machine: {"host", "cpu_model" (first "model name" of /proc/cpuinfo), "cores"
/// (hardware threads), "blas_config" (openblas_get_config()), "threads" (seqlab::num_threads())}.
nlohmann::json machine_info();

}  // namespace seqlab::experiment

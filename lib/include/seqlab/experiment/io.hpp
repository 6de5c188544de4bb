#pragma once
// File helpers of the experiment framework: atomic writes, whole-file reads that report read
// errors, the --out writability check, and removal of temporary files left by killed processes.
#include <cstddef>
#include <limits>
#include <optional>
#include <string>

#include "seqlab/core/file_io.hpp"

namespace seqlab::experiment {

// The atomic write, whole-file read and stale-temporary-file helpers live in core/file_io.hpp
// (checkpoints use them too); they are re-exported here under their old names.
using seqlab::read_file;
using seqlab::remove_stale_temp_files;
using seqlab::temp_file_name;
using seqlab::write_file_atomic;

/// The whole file, or std::nullopt if it cannot be opened or read (read errors included).
std::optional<std::string> read_text_file(const std::string& path);

/// Checks, without creating anything, that directory `dir` exists and is writable or can be
/// created (its nearest existing ancestor is a writable directory), and that `dir`/`sub` (if it
/// exists) is a writable directory. Returns an empty string if so, else the reason
/// ("'/a/b' is not a directory", "'/a' is not writable: Permission denied",
/// "'/tmp/l' is a dangling symbolic link to '/gone'", "'/proc' is on a proc file system, where
/// results cannot be written"). Write permission is judged by access(2), so for root only
/// read-only mounts count as not writable; the pseudo file systems proc, sysfs, cgroup, debugfs,
/// tracefs and securityfs (statfs f_type, Linux) are recognised for every user.
std::string check_output_dir(const std::string& dir, const std::string& sub = "");

}  // namespace seqlab::experiment

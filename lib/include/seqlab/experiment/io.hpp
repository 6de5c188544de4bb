#pragma once
// File helpers of the experiment framework: atomic writes and the --out writability check.
#include <optional>
#include <string>

namespace seqlab::experiment {

/// Writes `content` to `path` atomically: a temporary file in the same directory
/// (".<file name>.<host>.<pid>.tmp"), flushed with fsync, then rename(2) onto `path`. Readers see
/// either the old file or the complete new one; a process killed mid-write leaves at most the
/// temporary file, never a truncated `path`. The directory must exist. Throws std::runtime_error
/// naming the path and the system error.
void write_file_atomic(const std::string& path, const std::string& content);

/// The whole file, or std::nullopt if it cannot be opened.
std::optional<std::string> read_text_file(const std::string& path);

/// Checks, without creating anything, that directory `dir` exists and is writable or can be
/// created (its nearest existing ancestor is a writable directory), and that `dir`/`sub` (if it
/// exists) is a writable directory. Returns an empty string if so, else the reason
/// ("'/a/b' is not a directory", "'/a' is not writable: Permission denied").
std::string check_output_dir(const std::string& dir, const std::string& sub = "");

}  // namespace seqlab::experiment

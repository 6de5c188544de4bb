#pragma once
// Whole-file I/O shared by every layer: atomic writes (temporary file, fsync, rename), whole-file
// reads that report read errors, and removal of temporary files left by killed processes. Used by
// the experiment framework for cell files (experiment/io.hpp re-exports these names in
// seqlab::experiment) and by training checkpoints (train/checkpoint.hpp).
#include <cstddef>
#include <limits>
#include <string>

namespace seqlab {

/// Writes `content` to `path` atomically: a temporary file in the same directory
/// (temp_file_name(path's file name)), flushed with fsync, then rename(2) onto `path`. Readers see
/// either the old file or the complete new one; a process killed mid-write leaves at most the
/// temporary file, never a truncated `path` (remove_stale_temp_files cleans those up later). The
/// directory must exist. Throws std::runtime_error naming the path and the system error.
void write_file_atomic(const std::string& path, const std::string& content);

/// Name of write_file_atomic's temporary file for `file_name` in this process:
/// ".<file_name>~<host>~<pid>.tmp", host = gethostname() with characters other than letters,
/// digits, '.', '-' and '_' replaced by '_'. '~' never occurs in the framework's file names, so
/// the host and pid can be read back unambiguously.
std::string temp_file_name(const std::string& file_name);

/// Removes, in directory `dir` (not recursively), the temporary files of write_file_atomic that
/// were written on THIS host (same host part as temp_file_name) by a process that is no longer
/// alive (kill(pid, 0) fails with ESRCH). Files of other hosts sharing the directory (e.g. a
/// cluster file system), of live processes, and every other file are never touched. Returns the
/// number of files removed; errors (unreadable directory, a file that vanished) are ignored.
std::size_t remove_stale_temp_files(const std::string& dir);

/// The whole file. Throws std::runtime_error naming the path and the system error if it cannot
/// be opened or read (e.g. "Input/output error" for /proc/self/mem), or if it is longer than
/// `max_bytes` ("larger than N bytes").
std::string read_file(const std::string& path,
                      std::size_t max_bytes = std::numeric_limits<std::size_t>::max());

}  // namespace seqlab

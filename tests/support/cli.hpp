#pragma once
// What the command-line tests (tests/integration/test_*_cli.cpp) share: running an experiment
// binary with stdout and stderr captured through files, reading a file whole, and a small reader
// for the CSVs the experiments write (no quoted fields: no field ever holds a comma or a quote).
//
// The names live in seqlab::test::cli so that a test can take them all with one
// `using namespace seqlab::test::cli;` without clashing with the rest of seqlab::test (TempDir).
//
// Failures are reported the Catch2 way: a helper that REQUIREs or FAILs ends the running test
// case (Catch2 throws its own exception to unwind it), with the failed expression and the helper's
// file and line in the report. Such helpers say so below; the others throw nothing of their own.
#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace seqlab::test::cli {

/// What one finished run of a binary gave: its exit status (or 128 + the signal number that
/// ended it, as a shell reports it) and everything it wrote to stdout and stderr.
struct Run {
  int code;
  std::string out, err;
};

/// The whole content of the file `p`, byte for byte (binary mode, no newline translation).
/// Returns "" when `p` does not exist or cannot be read; throws nothing of its own.
std::string slurp(const std::filesystem::path& p);

/// The number of '\n' characters in `s`: the number of lines of a text whose every line,
/// the last included, ends with a newline (an unterminated last line is not counted).
std::size_t count_lines(const std::string& s);

/// Starts `binary` (a path, not searched in PATH) with argv = {binary, args...} and this
/// process's environment, and returns at once with the child's pid; wait for it with wait_exit.
/// stdout goes to `stdout_path`, or to io_dir/stdout.txt when `stdout_path` is empty; stderr goes
/// to io_dir/stderr.txt; both files are created or truncated. `io_dir` must exist, and must not
/// lie inside a directory the binary deletes or replaces (such as its --out directory).
/// REQUIREs that posix_spawn succeeded (a missing or non-executable binary fails the test case).
pid_t spawn(const std::string& binary, const std::vector<std::string>& args,
            const std::filesystem::path& io_dir, const std::string& stdout_path = "");

/// Waits for the child `pid` to end and returns its exit status, or 128 + the number of the
/// signal that killed it. REQUIREs that waitpid succeeded (`pid` is a child not yet waited for).
int wait_exit(pid_t pid);

/// Runs `binary` with `args` to completion (spawn, then wait_exit) and returns its exit status
/// with the stdout and stderr it wrote, read back from io_dir/stdout.txt and io_dir/stderr.txt
/// (left there; the next run in the same `io_dir` overwrites them). REQUIREs as spawn and
/// wait_exit do.
Run run(const std::string& binary, const std::vector<std::string>& args,
        const std::filesystem::path& io_dir);

/// The fields of one CSV line, split at every ','; a line ending in ',' has a last empty field
/// ("a,," is {"a", "", ""}), an empty line has none. No quoting is understood.
std::vector<std::string> split_csv_line(const std::string& line);

/// Every line of `text` split with split_csv_line, the header line included, in order.
std::vector<std::vector<std::string>> split_csv(const std::string& text);

/// A CSV table: its header and its rows as column name -> field text.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;

  /// The field of column `col` in row `i`. FAILs ("column <col> missing") when the table has no
  /// such column; throws std::out_of_range when there is no row `i`.
  const std::string& at(std::size_t i, const std::string& col) const;

  /// The field of column `col` in row `i` as a number (std::stod: the leading number of the
  /// field; "nan" and "inf" included). REQUIREs that the column exists; throws std::out_of_range
  /// when there is no row `i`, and std::invalid_argument (std::out_of_range) when the field does
  /// not start with a number (one outside the range of double).
  double num(std::size_t i, const std::string& col) const;
};

/// Parses CSV text: the first line is the header, every further line a row. Returns an empty
/// table for empty text. REQUIREs that every row has as many fields as the header.
Csv parse_csv(const std::string& text);

/// parse_csv of the file `p`. REQUIREs that `p` exists and is not empty (it has a header line),
/// and what parse_csv REQUIREs.
Csv read_csv(const std::filesystem::path& p);

/// The CSV text `csv` without the column named `column` in its header line, every line ended
/// with '\n' (fields split with split_csv_line, joined with ','). Meant for comparing two runs'
/// tables without a column that legitimately differs (wall-clock times). REQUIREs that the header
/// names `column`.
std::string drop_column(const std::string& csv, const std::string& column);

/// The field `col` of the row `row` (a Csv row) as a number, requiring that the whole field is
/// the number: INFOs the column and its text, REQUIREs that std::stod consumed every character.
/// Throws std::out_of_range when the row has no column `col`, std::invalid_argument when the field
/// does not start with a number.
double num(const std::map<std::string, std::string>& row, const std::string& col);

}  // namespace seqlab::test::cli

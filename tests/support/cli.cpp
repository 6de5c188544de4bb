#include "cli.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

extern char** environ;

namespace fs = std::filesystem;

namespace seqlab::test::cli {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

pid_t spawn(const std::string& binary, const std::vector<std::string>& args, const fs::path& io_dir,
            const std::string& stdout_path) {
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const std::string out_path =
      stdout_path.empty() ? (io_dir / "stdout.txt").string() : stdout_path;
  const std::string err_path = (io_dir / "stderr.txt").string();
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Run run(const std::string& binary, const std::vector<std::string>& args, const fs::path& io_dir) {
  const int code = wait_exit(spawn(binary, args, io_dir));
  return {code, slurp(io_dir / "stdout.txt"), slurp(io_dir / "stderr.txt")};
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ls(line);
  for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
  if (!line.empty() && line.back() == ',') f.push_back("");
  return f;
}

std::vector<std::vector<std::string>> split_csv(const std::string& text) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(split_csv_line(line));
  return lines;
}

const std::string& Csv::at(std::size_t i, const std::string& col) const {
  const auto& row = rows.at(i);
  const auto it = row.find(col);
  if (it == row.end()) FAIL("column " << col << " missing");
  return it->second;
}

double Csv::num(std::size_t i, const std::string& col) const {
  const auto it = rows.at(i).find(col);
  REQUIRE(it != rows.at(i).end());
  return std::stod(it->second);
}

Csv parse_csv(const std::string& text) {
  Csv c;
  const auto lines = split_csv(text);
  if (lines.empty()) return c;
  c.header = lines.front();
  for (std::size_t l = 1; l < lines.size(); ++l) {
    const auto& f = lines[l];
    REQUIRE(f.size() == c.header.size());
    std::map<std::string, std::string> r;
    for (std::size_t i = 0; i < f.size(); ++i) r[c.header[i]] = f[i];
    c.rows.push_back(r);
  }
  return c;
}

Csv read_csv(const fs::path& p) {
  REQUIRE(fs::exists(p));
  const std::string text = slurp(p);
  REQUIRE_FALSE(text.empty());
  return parse_csv(text);
}

std::string drop_column(const std::string& csv, const std::string& column) {
  const auto lines = split_csv(csv);
  long idx = -1;
  if (!lines.empty())
    for (std::size_t i = 0; i < lines.front().size(); ++i)
      if (lines.front()[i] == column) idx = static_cast<long>(i);
  REQUIRE(idx >= 0);
  std::string out;
  for (const auto& f : lines) {
    bool first = true;
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (static_cast<long>(i) == idx) continue;
      out += (first ? "" : ",") + f[i];
      first = false;
    }
    out += "\n";
  }
  return out;
}

double num(const std::map<std::string, std::string>& row, const std::string& col) {
  INFO(col << " = '" << row.at(col) << "'");
  std::size_t used = 0;
  const double v = std::stod(row.at(col), &used);
  REQUIRE(used == row.at(col).size());
  return v;
}

}  // namespace seqlab::test::cli

#include "seqlab/experiment/io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace seqlab::experiment {

namespace {
std::string errno_text(int e) { return std::strerror(e); }

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "host";
  return buf;
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const fs::path tmp =
      dir / ("." + p.filename().string() + "." + hostname() + "." + std::to_string(getpid()) + ".tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error("cannot create '" + tmp.string() + "': " + errno_text(errno));
  }
  const char* data = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("cannot write '" + tmp.string() + "': " + errno_text(e));
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot flush '" + tmp.string() + "': " + errno_text(e));
  }
  if (::rename(tmp.c_str(), p.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename '" + tmp.string() + "' to '" + path +
                             "': " + errno_text(e));
  }
  // Make the rename itself durable (best effort; some file systems do not support it).
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

namespace {
// "" if `p` (existing) is a writable directory, else the reason.
std::string writable_dir(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return "'" + p.string() + "' is not a directory";
  if (::access(p.c_str(), W_OK | X_OK) != 0) {
    return "'" + p.string() + "' is not writable: " + errno_text(errno);
  }
  return "";
}
}  // namespace

std::string check_output_dir(const std::string& dir, const std::string& sub) {
  if (dir.empty()) return "empty path";
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(dir), ec);
  if (ec) return "cannot resolve '" + dir + "': " + ec.message();
  p = p.lexically_normal();
  if (p.has_filename() == false && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  // Walk up to the nearest existing path.
  fs::path q = p;
  while (true) {
    const auto st = fs::status(q, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
      return "cannot inspect '" + q.string() + "': " + ec.message();
    }
    if (fs::exists(st)) break;
    if (q == q.root_path() || !q.has_parent_path()) return "no existing ancestor of '" + dir + "'";
    q = q.parent_path();
  }
  if (auto why = writable_dir(q); !why.empty()) return why;
  if (q == p && !sub.empty()) {
    const fs::path s = p / sub;
    if (fs::exists(fs::symlink_status(s, ec)) || fs::exists(s, ec)) {
      if (auto why = writable_dir(s); !why.empty()) return why;
    }
  }
  return "";
}

}  // namespace seqlab::experiment

#include "seqlab/core/file_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace fs = std::filesystem;

namespace seqlab {

namespace {
std::string errno_text(int e) { return std::strerror(e); }

// gethostname() as used in temporary file names (see temp_file_name).
std::string temp_host() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "host";
  std::string h = buf;
  for (char& ch : h) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_';
    if (!ok) ch = '_';
  }
  return h;
}
}  // namespace

std::string temp_file_name(const std::string& file_name) {
  return "." + file_name + "~" + temp_host() + "~" + std::to_string(getpid()) + ".tmp";
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const fs::path tmp = dir / temp_file_name(p.filename().string());
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
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot flush '" + tmp.string() + "': " + errno_text(e));
  }
  if (::close(fd) != 0) {
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

std::size_t remove_stale_temp_files(const std::string& dir) {
  const std::string host_part = "~" + temp_host() + "~";
  const std::string suffix = ".tmp";
  std::size_t removed = 0;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return 0;
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    // ".<file>~<host>~<pid>.tmp" with <file> free of '~'.
    if (name.size() < 1 + host_part.size() + 1 + suffix.size() || name[0] != '.' ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string stem = name.substr(0, name.size() - suffix.size());
    const auto last = stem.rfind('~');
    if (last == std::string::npos) continue;
    const std::string pid_text = stem.substr(last + 1);
    if (pid_text.empty() || pid_text.size() > 9) continue;
    bool digits = true;
    for (char ch : pid_text) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
    if (!digits) continue;
    const std::string head = stem.substr(0, last + 1);  // ".<file>~<host>~"
    if (head.size() < host_part.size() + 2 ||
        head.compare(head.size() - host_part.size(), host_part.size(), host_part) != 0) {
      continue;
    }
    const std::string file = head.substr(1, head.size() - host_part.size() - 1);
    if (file.empty() || file.find('~') != std::string::npos) continue;  // another host's name
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code rm;
    if (fs::is_regular_file(e.symlink_status(rm)) && fs::remove(e.path(), rm)) ++removed;
  }
  return removed;
}

std::string read_file(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open '" + path + "': " + errno_text(errno));
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      throw std::runtime_error("cannot read '" + path + "': " + errno_text(e));
    }
    if (n == 0) break;
    if (static_cast<std::size_t>(n) > max_bytes - out.size()) {
      ::close(fd);
      throw std::runtime_error("cannot read '" + path + "': larger than " +
                               std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace seqlab

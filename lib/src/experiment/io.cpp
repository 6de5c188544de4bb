#include "seqlab/experiment/io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/vfs.h>
#endif

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace fs = std::filesystem;

namespace seqlab::experiment {

namespace {
std::string errno_text(int e) { return std::strerror(e); }
}  // namespace

std::optional<std::string> read_text_file(const std::string& path) {
  try {
    return read_file(path);
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

namespace {
// A pseudo file system where no results can be written (Linux statfs f_type), or "".
std::string pseudo_file_system(const fs::path& p) {
#ifdef __linux__
  struct statfs sf {};
  if (::statfs(p.c_str(), &sf) != 0) return "";
  switch (static_cast<unsigned long>(sf.f_type)) {
    case 0x9fa0UL: return "proc";             // PROC_SUPER_MAGIC
    case 0x62656572UL: return "sysfs";        // SYSFS_MAGIC
    case 0x27e0ebUL: return "cgroup";         // CGROUP_SUPER_MAGIC
    case 0x63677270UL: return "cgroup2";      // CGROUP2_SUPER_MAGIC
    case 0x64626720UL: return "debugfs";      // DEBUGFS_MAGIC
    case 0x74726163UL: return "tracefs";      // TRACEFS_MAGIC
    case 0x73636673UL: return "securityfs";   // SECURITYFS_MAGIC
    default: return "";
  }
#else
  (void)p;
  return "";
#endif
}

// "" if `p` (existing) is a writable directory, else the reason.
std::string writable_dir(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return "'" + p.string() + "' is not a directory";
  // The file system first, so the message is the same for every user.
  if (const std::string fs_type = pseudo_file_system(p); !fs_type.empty()) {
    return "'" + p.string() + "' is on a " + fs_type +
           " file system, where results cannot be written";
  }
  if (::access(p.c_str(), W_OK | X_OK) != 0) {
    return "'" + p.string() + "' is not writable: " + errno_text(errno);
  }
  return "";
}

// "" unless `q` (not existing when followed) is a symbolic link, then the reason.
std::string dangling_link(const fs::path& q) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(q, ec))) return "";
  const fs::path target = fs::read_symlink(q, ec);
  return "'" + q.string() + "' is a dangling symbolic link" +
         (ec ? std::string() : " to '" + target.string() + "'");
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
    if (auto why = dangling_link(q); !why.empty()) return why;
    if (q == q.root_path() || !q.has_parent_path()) return "no existing ancestor of '" + dir + "'";
    q = q.parent_path();
  }
  if (auto why = writable_dir(q); !why.empty()) return why;
  if (q == p && !sub.empty()) {
    const fs::path s = p / sub;
    if (auto why = dangling_link(s); !why.empty() && !fs::exists(s, ec)) return why;
    if (fs::exists(fs::symlink_status(s, ec)) || fs::exists(s, ec)) {
      if (auto why = writable_dir(s); !why.empty()) return why;
    }
  }
  return "";
}

}  // namespace seqlab::experiment

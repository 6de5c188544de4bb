#include "seqlab/experiment/metadata.hpp"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "seqlab/core/threads.hpp"
#include "seqlab/version.hpp"

#ifndef SEQLAB_SOURCE_DIR
#define SEQLAB_SOURCE_DIR "."
#endif
#ifndef SEQLAB_CXX_COMPILER
#define SEQLAB_CXX_COMPILER "unknown"
#endif
#ifndef SEQLAB_CXX_FLAGS
#define SEQLAB_CXX_FLAGS "unknown"
#endif
#ifndef SEQLAB_BUILD_TYPE
#define SEQLAB_BUILD_TYPE "unknown"
#endif

namespace seqlab::experiment {

namespace {

// Runs `cmd` through the shell; returns its stdout and whether it exited with status 0.
std::pair<std::string, bool> run_command(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return {"", false};
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(f);
  return {out, status == 0};
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const auto b = s.find_first_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b);
}

}  // namespace

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json build_info() {
  static const nlohmann::json info = [] {
    nlohmann::json j;
    j["seqlab_version"] = kVersion;
    const std::string git = "git -C " + shell_quote(SEQLAB_SOURCE_DIR);
    const auto [head, ok] = run_command(git + " rev-parse HEAD 2>/dev/null");
    if (ok && !trim(head).empty()) {
      j["git_commit"] = trim(head);
      const auto [status, ok2] = run_command(
          git + " --no-optional-locks status --porcelain -- . ':(exclude)results' 2>/dev/null");
      if (ok2) {
        j["git_dirty"] = !trim(status).empty();
      } else {
        j["git_dirty"] = nullptr;
      }
    } else {
      j["git_commit"] = "unknown";
      j["git_dirty"] = nullptr;
    }
    j["compiler"] = SEQLAB_CXX_COMPILER;
    j["cxx_flags"] = trim(SEQLAB_CXX_FLAGS);
    j["build_type"] = SEQLAB_BUILD_TYPE;
    return j;
  }();
  return info;
}

nlohmann::json machine_info() {
  nlohmann::json j;
  char host[256] = {0};
  j["host"] = gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string("unknown");
  std::string model = "unknown";
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        model = line.substr(colon + 1);
        const auto b = model.find_first_not_of(" \t");
        model = b == std::string::npos ? "" : model.substr(b);
      }
      break;
    }
  }
  j["cpu_model"] = model;
  j["cores"] = hardware_threads();
  j["blas_config"] = blas_config();
  j["threads"] = num_threads();
  return j;
}

}  // namespace seqlab::experiment

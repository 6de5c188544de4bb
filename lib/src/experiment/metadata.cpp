#include "seqlab/experiment/metadata.hpp"

#include <unistd.h>

#include <ctime>
#include <fstream>

#include "seqlab/core/threads.hpp"
#include "seqlab/version.hpp"

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

namespace detail {
// Defined in the file lib/provenance.cmake generates at build time (lib/provenance.cpp.in):
// `git rev-parse HEAD` of the source tree, or "unknown"; and whether the tree differed from it
// (1), did not (0), or is unknown (-1).
const char* build_git_commit();
int build_git_dirty();
}  // namespace detail

namespace {

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
    j["git_commit"] = detail::build_git_commit();
    const int dirty = detail::build_git_dirty();
    if (dirty < 0) {
      j["git_dirty"] = nullptr;
    } else {
      j["git_dirty"] = dirty == 1;
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

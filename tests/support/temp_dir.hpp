#pragma once
// A fresh directory under /tmp for one test, removed with everything in it at scope exit.
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace seqlab::test {

struct TempDir {
  std::filesystem::path path;
  /// `prefix` names the test (e.g. "seqlab_lrr_cli"); throws std::runtime_error if mkdtemp fails.
  explicit TempDir(const std::string& prefix = "seqlab_test") {
    std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace seqlab::test

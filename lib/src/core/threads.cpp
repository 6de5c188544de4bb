#include "seqlab/core/threads.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

// OpenBLAS's own API, declared here because its cblas.h clashes with xtensor-blas's declarations.
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char* openblas_get_config(void);
char* openblas_get_corename(void);
}

namespace seqlab {

namespace {
int g_threads = 0;  // 0: not set yet
}

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("threads must be >= 1, got " + std::to_string(n));
  g_threads = n;
  openblas_set_num_threads(n);
}

int num_threads() { return g_threads > 0 ? g_threads : openblas_get_num_threads(); }

int blas_threads() { return openblas_get_num_threads(); }

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

std::string blas_config() {
  const char* c = openblas_get_config();
  return c ? std::string(c) : std::string("unknown");
}

std::string blas_core() {
  const char* c = openblas_get_corename();
  return c ? std::string(c) : std::string("unknown");
}

std::string blas_core_override() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  std::string core = blas_core();
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (core != "prescott" && core != "core2") return "";
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return "";
}

void ensure_blas_kernels(const char* const* argv) {
  const std::string core = blas_core_override();
  if (core.empty()) return;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  if (::setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  if (tty)
    std::cerr << "seqlab: OpenBLAS chose its " << blas_core() << " kernels on this CPU; running again with "
              << "OPENBLAS_CORETYPE=" << core << " (set OPENBLAS_CORETYPE yourself to choose)" << std::endl;
  ::execv("/proc/self/exe", const_cast<char* const*>(argv));
  const int err = errno;  // execv returns only on failure
  ::unsetenv("OPENBLAS_CORETYPE");
  std::cerr << "seqlab: could not run again with OPENBLAS_CORETYPE=" << core << " (" << std::strerror(err)
            << "); continuing with OpenBLAS's " << blas_core() << " kernels" << std::endl;
}

std::size_t parallel_threads(std::size_t n, std::size_t grain) {
  const std::size_t budget = static_cast<std::size_t>(std::max(1, num_threads()));
  const std::size_t by_size = n / std::max<std::size_t>(grain, 1);
  return std::max<std::size_t>(1, std::min(budget, by_size));
}

BlasThreadsScope::BlasThreadsScope(int n) : previous_(blas_threads()) { openblas_set_num_threads(n); }
BlasThreadsScope::~BlasThreadsScope() { openblas_set_num_threads(previous_); }

}  // namespace seqlab

#include "seqlab/core/threads.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>

// OpenBLAS's own API, declared here because its cblas.h clashes with xtensor-blas's declarations.
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char* openblas_get_config(void);
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

std::size_t parallel_threads(std::size_t n, std::size_t grain) {
  const std::size_t budget = static_cast<std::size_t>(std::max(1, num_threads()));
  const std::size_t by_size = n / std::max<std::size_t>(grain, 1);
  return std::max<std::size_t>(1, std::min(budget, by_size));
}

BlasThreadsScope::BlasThreadsScope(int n) : previous_(blas_threads()) { openblas_set_num_threads(n); }
BlasThreadsScope::~BlasThreadsScope() { openblas_set_num_threads(previous_); }

}  // namespace seqlab

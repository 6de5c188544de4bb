#pragma once
// Thread control. `--threads N` sets the one thread budget of a process: OpenBLAS gets N threads
// and seqlab's own loops run serially, so the two never oversubscribe the cores
// (OpenBLAS 0.3.21 pthread build; see shared/notes/pitfalls.md). Loops of our own that run in
// parallel must call `BlasThreadsScope one(1)` around their BLAS calls.
#include <string>

namespace seqlab {

/// Sets the thread budget (>= 1). Throws std::invalid_argument for n < 1.
void set_num_threads(int n);
/// The current budget: what set_num_threads last set, else OpenBLAS's own default.
int num_threads();
/// Number of cores the OS reports (std::thread::hardware_concurrency, at least 1).
int hardware_threads();
/// OpenBLAS's build description (openblas_get_config()), for meta.json.
std::string blas_config();

/// Sets OpenBLAS to `n` threads for the lifetime of the object, then restores the budget.
class BlasThreadsScope {
 public:
  explicit BlasThreadsScope(int n);
  ~BlasThreadsScope();
  BlasThreadsScope(const BlasThreadsScope&) = delete;
  BlasThreadsScope& operator=(const BlasThreadsScope&) = delete;

 private:
  int previous_;
};

}  // namespace seqlab

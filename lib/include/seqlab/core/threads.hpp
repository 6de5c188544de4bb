#pragma once
// Thread control. `--threads N` sets the one thread budget of a process: OpenBLAS gets N threads,
// and seqlab's own parallel loops (the attention heads, the layers' element-wise work) use up to
// N threads while no BLAS call runs, so the two never oversubscribe the cores
// (OpenBLAS 0.3.21 pthread build; see shared/notes/pitfalls.md). Loops of our own that run in
// parallel (parallel_for below) run between BLAS calls, never beside them, or call
// `BlasThreadsScope one(1)` around their BLAS calls (MultiheadAttention's heads, and the large
// GEMMs that for_gemm_rows in core/gemm.hpp splits by rows over these threads).
#include <algorithm>
#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace seqlab {

/// Sets the thread budget (>= 1). Throws std::invalid_argument for n < 1.
void set_num_threads(int n);
/// The current budget: what set_num_threads last set, else OpenBLAS's own default.
int num_threads();
/// OpenBLAS's thread count now (openblas_get_num_threads()): the budget, or 1 inside a
/// BlasThreadsScope(1).
int blas_threads();
/// Number of cores the OS reports (std::thread::hardware_concurrency, at least 1).
int hardware_threads();
/// OpenBLAS's build description (openblas_get_config()), for meta.json.
std::string blas_config();
/// The kernel family OpenBLAS chose for this CPU (openblas_get_corename(): "Haswell", "SkylakeX",
/// "Zen", "Prescott", ...).
std::string blas_core();

/// The kernel family OpenBLAS should be told to use (OPENBLAS_CORETYPE) because its own CPU
/// detection fell back to a generic one: Debian 12's OpenBLAS 0.3.21 (a DYNAMIC_ARCH build) does
/// not know newer CPU models (e.g. Intel family 6 model 207) and then runs its Prescott (SSE3)
/// kernels, which use neither AVX2 nor AVX-512 (a timing on an idle machine: experiments/bench/
/// README.md). "SkylakeX" when blas_core() is Prescott or Core2 on a CPU with AVX-512 F, BW, DQ and VL,
/// "Haswell" there on one with AVX2 and FMA; empty otherwise, and always when OPENBLAS_CORETYPE
/// is set (an explicit choice, whatever it is, is kept).
std::string blas_core_override();

/// Where blas_core_override() names a family: sets OPENBLAS_CORETYPE to it and re-executes this
/// program (/proc/self/exe with `argv` and the same environment) so that OpenBLAS, which reads the
/// variable once when it is loaded, picks those kernels; a note goes to stderr when it is a
/// terminal. Returns when there is nothing to do, or (with a note on stderr) when the re-execution
/// failed, leaving OpenBLAS as it was. Call at the start of main, before any thread exists.
/// meta.json's blas config names the kernels that ran.
void ensure_blas_kernels(const char* const* argv);

/// Flush-to-zero and denormals-are-zero (the SSE control bits MXCSR.FTZ = 0x8000 and
/// MXCSR.DAZ = 0x0040, Intel SDM vol. 1 §10.2.3.3-4), PyTorch's torch.set_flush_denormal: with
/// `on`, a float result below FLT_MIN (1.18e-38) is stored as 0 and a subnormal input is read as
/// 0; off is the IEEE default, every process's state at start. It applies to the calling thread,
/// to the workers behind parallel_for (each takes it before its next range) and to OpenBLAS's
/// threads (OpenBLAS 0.3.21 starts them when it is loaded and never copies the caller's control
/// bits, so their pool is shut down here and restarted by the next multi-threaded BLAS call from
/// this thread, whose bits new threads inherit). Why: training whose activations or gradients
/// decay into the subnormal range runs several times slower on x86 (a long_range_recall paper
/// cell: 2.2x; that experiment's README, "Why paper.ini looks as it does"); any number that would
/// have passed through that range is 0 instead, so results differ from a run without it. Call it
/// while no parallel_for and no BLAS call runs. Returns false and changes nothing where these
/// bits do not exist (not x86-64).
bool set_flush_denormals(bool on);
/// Whether the calling thread has both bits set.
bool flush_denormals();

/// Sets OpenBLAS to `n` threads for the lifetime of the object, then restores OpenBLAS's previous
/// count (blas_threads() at construction).
class BlasThreadsScope {
 public:
  explicit BlasThreadsScope(int n);
  ~BlasThreadsScope();
  BlasThreadsScope(const BlasThreadsScope&) = delete;
  BlasThreadsScope& operator=(const BlasThreadsScope&) = delete;

 private:
  int previous_;
};

/// Threads parallel_for uses for n items with at least `grain` items per thread:
/// min(num_threads(), n / grain), at least 1 (grain 0 counts as 1).
std::size_t parallel_threads(std::size_t n, std::size_t grain);

/// Runs body(begin, end, worker) over [0, n) split into parallel_threads(n, grain) contiguous
/// ranges of near-equal size, range w = [n·w/P, n·(w+1)/P) on worker w < P (worker 0 is the calling
/// thread; the others are the threads of a pool kept for the process, or std::threads started
/// for this call when the pool is in use: a call from inside a range, or from a second thread at
/// the same time). It returns when every range has run. With
/// P = 1 it is a plain call body(0, n, 0). For element-wise work between BLAS calls (the budget's
/// cores are idle then); body must not call BLAS itself unless it sets `BlasThreadsScope one(1)`.
/// Ranges must write disjoint memory; a result that sums over ranges should sum in an order that
/// does not depend on P (fixed blocks, as add_column_sums in nn/) so it is the same for every
/// thread budget. After every range has returned, the exception of the lowest-numbered range that
/// threw is rethrown. Ranges run on threads of a pool: a range must not fork() (a forked child's
/// copy of the call cannot complete); a fork between calls is fine (the child gets a fresh pool).
/// When no thread can be started, the remaining ranges run on the calling thread.
template <class Body>
void parallel_for(std::size_t n, std::size_t grain, Body&& body);

/// parallel_for with the number of ranges p given (p >= 1; p = 1 is a plain call), for callers
/// that size per-worker scratch first (MultiheadAttention's heads, p = parallel_threads(n, 1)).
namespace detail {
/// Runs range(w) for every w < p, range(0) on the calling thread, the others on the pool's workers
/// (or on threads started for the call when the pool is in use); returns when all have returned.
/// range must not throw (parallel_ranges catches inside it).
void run_ranges(std::size_t p, const std::function<void(std::size_t)>& range);
}  // namespace detail

template <class Body>
void parallel_ranges(std::size_t n, std::size_t p, Body&& body) {
  if (p <= 1) {
    body(std::size_t{0}, n, std::size_t{0});
    return;
  }
  std::vector<std::exception_ptr> errors(p);
  const std::function<void(std::size_t)> range = [&](std::size_t w) {
    try {
      body(n * w / p, n * (w + 1) / p, w);
    } catch (...) {
      errors[w] = std::current_exception();
    }
  };
  detail::run_ranges(p, range);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

template <class Body>
void parallel_for(std::size_t n, std::size_t grain, Body&& body) {
  parallel_ranges(n, parallel_threads(n, grain), body);
}

}  // namespace seqlab

#include "seqlab/core/threads.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

// OpenBLAS's own API, declared here because its cblas.h clashes with xtensor-blas's declarations.
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
char* openblas_get_config(void);
char* openblas_get_corename(void);
// Exported by OpenBLAS's pthread server (its fork handler calls it): joins its worker threads; the
// next multi-threaded call starts them again. Weak: absent in other builds.
int blas_thread_shutdown_(void) __attribute__((weak));
}

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

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

namespace {

constexpr unsigned kFlushBits = 0x8040;  // MXCSR.FTZ | MXCSR.DAZ
// What set_flush_denormals last set: -1 never called (threads keep whatever they have), else the
// MXCSR bits. The pool's workers compare it with what they applied before each range.
std::atomic<int> g_flush_bits{-1};
thread_local int t_flush_bits = -1;

void apply_flush_bits(int bits) {
#if defined(__x86_64__)
  _mm_setcsr((_mm_getcsr() & ~kFlushBits) | static_cast<unsigned>(bits));
#else
  (void)bits;
#endif
}

// In a pool worker before a range: the setting of set_flush_denormals, if it changed since.
void sync_flush_bits() {
  const int want = g_flush_bits.load(std::memory_order_relaxed);
  if (want >= 0 && want != t_flush_bits) {
    apply_flush_bits(want);
    t_flush_bits = want;
  }
}

}  // namespace

bool set_flush_denormals(bool on) {
#if defined(__x86_64__)
  const int bits = on ? static_cast<int>(kFlushBits) : 0;
  apply_flush_bits(bits);
  t_flush_bits = bits;
  g_flush_bits.store(bits, std::memory_order_relaxed);
  if (blas_thread_shutdown_ != nullptr) blas_thread_shutdown_();
  return true;
#else
  (void)on;
  return false;
#endif
}

bool flush_denormals() {
#if defined(__x86_64__)
  return (_mm_getcsr() & kFlushBits) == kFlushBits;
#else
  return false;
#endif
}

namespace {

thread_local bool in_pool_worker = false;

// The workers behind parallel_ranges (threads.hpp), started on first use and kept for the process:
// starting and joining std::threads for every call cost a training update of the TCN cell about
// 85 thread starts (bench_cells, 2 threads; each with a fresh stack to fault in). One call holds
// the pool at a time (try_claim); a call made while it is held (from inside a range, or from
// another thread) starts threads of its own as before. The caller runs range 0 and then takes
// any range no worker has taken yet, so a slow wake-up never delays the call by more than the
// ranges themselves. Which thread runs a range does not change what it computes.
class RangePool {
 public:
  RangePool() = default;
  RangePool(const RangePool&) = delete;
  RangePool& operator=(const RangePool&) = delete;

  bool try_claim() {
    bool expected = false;
    return !in_pool_worker && busy_.compare_exchange_strong(expected, true, std::memory_order_acquire);
  }
  void release() { busy_.store(false, std::memory_order_release); }

  // Pre: claimed. Runs range(w) for w < p; returns when all have returned.
  void run(std::size_t p, const std::function<void(std::size_t)>& range) {
    try {
      while (workers_ < p - 1) {
        std::thread([this] { loop(); }).detach();
        ++workers_;
      }
    } catch (const std::system_error&) {
      // No more threads (a process or system limit): the ranges no worker takes, the caller runs.
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &range;
      parts_ = p;
      next_ = 1;
      left_.store(p - 1);
      generation_.store(generation_.load() + 1, std::memory_order_release);
    }
    work_.notify_all();
    range(0);
    std::unique_lock<std::mutex> lock(mutex_);
    while (next_ < parts_) {
      const std::size_t w = next_++;
      lock.unlock();
      range(w);
      lock.lock();
      --left_;
    }
    if (left_.load() != 0) {
      lock.unlock();
      spin_until([this] { return left_.load(std::memory_order_acquire) == 0; });
      lock.lock();
      done_.wait(lock, [this] { return left_.load() == 0; });
    }
    job_ = nullptr;
  }

 private:
  void loop() {
    in_pool_worker = true;
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    const auto ready = [&] { return generation_.load() != seen && job_ != nullptr; };
    for (;;) {
      if (!ready()) {
        lock.unlock();
        spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
        lock.lock();
        work_.wait(lock, ready);
      }
      seen = generation_.load();
      while (job_ != nullptr && next_ < parts_) {
        const std::size_t w = next_++;
        const std::function<void(std::size_t)>* job = job_;
        lock.unlock();
        sync_flush_bits();
        (*job)(w);
        lock.lock();
        if (--left_ == 0) done_.notify_one();
      }
    }
  }

  // Polls done() for up to kSpin before the caller blocks on a condition variable: parallel
  // regions come in bursts (one per layer and step), and a wake-up through the kernel costs more
  // than most of their ranges. Bounded so that a spinning worker leaves the core to OpenBLAS's
  // threads soon after a region ends.
  template <class Done>
  static void spin_until(Done&& done) {
    constexpr auto kSpin = std::chrono::microseconds(20);
    const auto start = std::chrono::steady_clock::now();
    while (!done()) {
      for (int i = 0; i < 16; ++i) pause();
      if (std::chrono::steady_clock::now() - start > kSpin) return;
    }
  }
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  std::atomic<bool> busy_{false};
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::size_t workers_ = 0;  // detached threads in loop(), started by run() (the caller holds the claim)
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t parts_ = 0, next_ = 0;
  // Changed only under mutex_; atomic so that spin_until can poll them without it.
  std::atomic<std::size_t> left_{0};
  std::atomic<std::uint64_t> generation_{0};
};

// Never destroyed, and its workers are detached: they sleep in loop() until the process ends, so
// no exit path joins them. A forked child gets a fresh pool (the parent's is left as it was): the
// parent's workers do not exist in the child, and its mutex and condition variables may have been
// copied mid-use (a broadcast there can wait forever for waiters that are gone).
RangePool* current_pool = nullptr;

RangePool& range_pool() {
  static const bool once = [] {
    current_pool = new RangePool();
    ::pthread_atfork(nullptr, nullptr, [] { current_pool = new RangePool(); });
    return true;
  }();
  (void)once;
  return *current_pool;
}

}  // namespace

namespace detail {

void run_ranges(std::size_t p, const std::function<void(std::size_t)>& range) {
  if (p <= 1) {
    range(0);
    return;
  }
  RangePool& pool = range_pool();
  if (pool.try_claim()) {
    struct Release {
      RangePool& pool;
      ~Release() { pool.release(); }
    } release{pool};
    pool.run(p, range);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(p - 1);
  std::size_t w = 1;
  try {
    for (; w < p; ++w) threads.emplace_back(range, w);
  } catch (const std::system_error&) {
    // No more threads (a process or system limit): the rest run on this thread.
  }
  for (; w < p; ++w) range(w);
  range(0);
  for (std::thread& t : threads) t.join();
}

}  // namespace detail

std::size_t parallel_threads(std::size_t n, std::size_t grain) {
  const std::size_t budget = static_cast<std::size_t>(std::max(1, num_threads()));
  const std::size_t by_size = n / std::max<std::size_t>(grain, 1);
  return std::max<std::size_t>(1, std::min(budget, by_size));
}

BlasThreadsScope::BlasThreadsScope(int n) : previous_(blas_threads()) { openblas_set_num_threads(n); }
BlasThreadsScope::~BlasThreadsScope() { openblas_set_num_threads(previous_); }

}  // namespace seqlab

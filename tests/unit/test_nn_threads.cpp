// The thread budget changes how fast the layers' element-wise and row-reduction work runs
// (parallel_for, lib/src/nn/row_kernels.hpp), never its numbers: LayerNorm forward and backward,
// Linear's bias gradient, Dropout and the feed-forward activation give bit-identical results at
// budgets 1, 2 and 3. (GEMM results may depend on OpenBLAS's partitioning; the values compared
// here are the ones seqlab computes itself.) Also parallel_for's contract.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <stdexcept>
#include <vector>

#include "../../lib/src/nn/row_kernels.hpp"
#include "fixtures.hpp"
#include "seqlab/core/gemm.hpp"
#include "seqlab/core/rng.hpp"
#include "seqlab/core/threads.hpp"
#include "seqlab/nn/dropout.hpp"
#include "seqlab/nn/feed_forward.hpp"
#include "seqlab/nn/linear.hpp"
#include "seqlab/nn/norm.hpp"

using namespace seqlab;
using seqlab::test::flat;

namespace {

// Restores the thread budget a test changed.
struct BudgetGuard {
  int saved = num_threads();
  ~BudgetGuard() { set_num_threads(saved); }
};

Tensor3 random3(std::size_t b, std::size_t t, std::size_t d, std::uint64_t seed) {
  Rng rng(seed);
  Tensor3 x({b, t, d});
  rng.fill_normal(x, 0.0f, 1.0f);
  return x;
}

// Sizes big enough that every kernel splits over 3 threads (kElementGrain = 65536 elements),
// with a row count that is not a multiple of the 64-row sum blocks.
constexpr std::size_t kB = 5, kT = 117, kD = 384;

}  // namespace

TEST_CASE("parallel_for covers every index once, in at most budget ranges", "[core][threads]") {
  BudgetGuard guard;
  for (int budget : {1, 2, 3, 7}) {
    set_num_threads(budget);
    for (std::size_t n : {0, 1, 5, 1000, 100003}) {
      std::vector<std::atomic<int>> seen(n);
      std::atomic<std::size_t> ranges{0};
      parallel_for(n, 100, [&](std::size_t a, std::size_t b, std::size_t worker) {
        CHECK(worker < static_cast<std::size_t>(budget));
        ranges += 1;
        for (std::size_t i = a; i < b; ++i) seen[i] += 1;
      });
      for (std::size_t i = 0; i < n; ++i) REQUIRE(seen[i] == 1);
      CHECK(ranges == parallel_threads(n, 100));
      CHECK(parallel_threads(n, 100) <= static_cast<std::size_t>(budget));
      CHECK(parallel_threads(n, 100) >= 1);
    }
  }
  set_num_threads(3);
  CHECK(parallel_threads(100000, 0) == 3);  // grain 0 counts as 1
  CHECK(parallel_threads(250, 100) == 2);   // n / grain limits the threads
}

TEST_CASE("parallel_for rethrows a worker's exception after all workers joined", "[core][threads]") {
  BudgetGuard guard;
  set_num_threads(3);
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH(parallel_for(300, 1,
                                 [&](std::size_t, std::size_t, std::size_t worker) {
                                   if (worker == 2) throw std::runtime_error("worker 2 failed");
                                   finished += 1;
                                 }),
                    "worker 2 failed");
  CHECK(finished == 2);
}

TEST_CASE("parallel_for from inside a range and from two threads at once covers every index once",
          "[core][threads]") {
  // The first call holds the worker pool; a call made meanwhile (nested, or from another thread)
  // runs on threads of its own. Every index must still be visited once, in order of nothing.
  BudgetGuard guard;
  set_num_threads(3);
  constexpr std::size_t kOuter = 6, kInner = 999;
  std::vector<std::atomic<int>> seen(kOuter * kInner);
  parallel_for(kOuter, 1, [&](std::size_t a, std::size_t b, std::size_t) {
    for (std::size_t o = a; o < b; ++o)
      parallel_for(kInner, 100, [&](std::size_t i0, std::size_t i1, std::size_t) {
        for (std::size_t i = i0; i < i1; ++i) seen[o * kInner + i] += 1;
      });
  });
  for (std::size_t i = 0; i < seen.size(); ++i) REQUIRE(seen[i] == 1);

  std::vector<std::atomic<int>> counts(2 * 100000);
  auto many = [&](std::size_t half) {
    for (int rep = 0; rep < 200; ++rep)
      parallel_for(100000, 1000, [&](std::size_t a, std::size_t b, std::size_t) {
        for (std::size_t i = a; i < b; ++i) counts[half * 100000 + i] += 1;
      });
  };
  std::thread other(many, 1);
  many(0);
  other.join();
  for (std::size_t i = 0; i < counts.size(); ++i) REQUIRE(counts[i] == 200);
}

TEST_CASE("parallel_for runs its ranges on distinct threads, again on the next call", "[core][threads]") {
  BudgetGuard guard;
  set_num_threads(3);
  for (int call = 0; call < 50; ++call) {
    std::mutex m;
    std::set<std::thread::id> ids;
    // Each range waits until all three have started: the call can only return if they ran at
    // the same time, on three threads (the calling one and two others).
    std::atomic<int> started{0};
    parallel_for(3, 1, [&](std::size_t, std::size_t, std::size_t) {
      started += 1;
      while (started.load() < 3) std::this_thread::yield();
      std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
    });
    REQUIRE(ids.size() == 3);
    CHECK(ids.count(std::this_thread::get_id()) == 1);
  }
}

TEST_CASE("a forked child's parallel_for completes (it gets a fresh pool)", "[core][threads]") {
  // Fork right after a call, while the pool's workers may still be on their way back to waiting:
  // the child must not use the parent's mutex and condition variables (a broadcast there can wait
  // forever for waiters that do not exist in the child). Each child has 10 s (SIGALRM) to finish.
  BudgetGuard guard;
  set_num_threads(3);
  int hung = 0, failed = 0;
  for (int rep = 0; rep < 40; ++rep) {
    std::atomic<int> sum{0};
    parallel_for(3, 1, [&](std::size_t a, std::size_t b, std::size_t) { sum += static_cast<int>(b - a); });
    REQUIRE(sum == 3);
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(rep);
    while (std::chrono::steady_clock::now() < until) {
    }
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      alarm(10);
      std::atomic<int> n{0};
      parallel_for(3000, 1, [&](std::size_t a, std::size_t b, std::size_t) { n += static_cast<int>(b - a); });
      _exit(n == 3000 ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    if (WIFSIGNALED(status)) ++hung;
    else if (WEXITSTATUS(status) != 0) ++failed;
  }
  CHECK(hung == 0);
  CHECK(failed == 0);
}

namespace {

// Restores flush-to-zero to off (every process starts with it off) when a test ends.
struct FlushGuard {
  ~FlushGuard() { set_flush_denormals(false); }
};

// x * y through memory the compiler cannot fold.
float product(float x, float y) {
  volatile float a = x, b = y;
  return a * b;
}

// Per range of a 2-way parallel_for: whether its thread flushes (both MXCSR bits set). Each range
// waits until both have started, so range 1 runs on the pool's worker, not on the caller.
std::vector<int> ranges_flushing() {
  std::vector<int> flags(2, -1);
  std::atomic<int> started{0};
  parallel_for(2, 1, [&](std::size_t b, std::size_t e, std::size_t) {
    started += 1;
    while (started.load() < 2) std::this_thread::yield();
    for (std::size_t i = b; i < e; ++i) flags[i] = flush_denormals() ? 1 : 0;
  });
  return flags;
}

// C = A·B at 512³ with every product 1e-20 · 1e-20 = 1e-40 (subnormal): nonzero entries of C,
// computed by OpenBLAS at the current budget (its threads split C's columns or rows).
std::size_t nonzero_of_tiny_gemm() {
  const std::size_t n = 512;
  std::vector<float> a(n * n, 1e-20f), b(n * n, 1e-20f), c(n * n, -1.0f);
  gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  return static_cast<std::size_t>(std::count_if(c.begin(), c.end(), [](float v) { return v != 0.0f; }));
}

}  // namespace

#if defined(__x86_64__)
TEST_CASE("set_flush_denormals flushes on this thread, the pool's workers and OpenBLAS's threads, and clears again",
          "[core][threads][denormals]") {
  BudgetGuard budget;
  FlushGuard guard;
  set_num_threads(2);
  (void)ranges_flushing();     // the pool's worker exists before the switch
  (void)nonzero_of_tiny_gemm();  // so do OpenBLAS's threads
  REQUIRE_FALSE(flush_denormals());
  CHECK(product(1e-20f, 1e-20f) != 0.0f);  // IEEE default: a subnormal result
  CHECK(nonzero_of_tiny_gemm() == 512u * 512u);  // each entry 512 · 1e-40 = 5.1e-38, normal

  REQUIRE(set_flush_denormals(true));
  CHECK(flush_denormals());
  CHECK(product(1e-20f, 1e-20f) == 0.0f);                      // FTZ: the result
  CHECK(product(std::numeric_limits<float>::denorm_min(), 1e30f) == 0.0f);  // DAZ: the input
  CHECK(ranges_flushing() == std::vector<int>{1, 1});
  CHECK(nonzero_of_tiny_gemm() == 0u);  // both OpenBLAS threads flush their 1e-40 products

  REQUIRE(set_flush_denormals(false));
  CHECK_FALSE(flush_denormals());
  CHECK(product(1e-20f, 1e-20f) != 0.0f);
  CHECK(ranges_flushing() == std::vector<int>{0, 0});
  CHECK(nonzero_of_tiny_gemm() == 512u * 512u);
}
#endif

TEST_CASE("LayerNorm forward and backward are bit-identical at thread budgets 1, 2, 3", "[nn][norm][threads]") {
  BudgetGuard guard;
  const Tensor3 x = random3(kB, kT, kD, 1), dy = random3(kB, kT, kD, 2);
  std::vector<std::vector<float>> runs;
  for (int budget : {1, 2, 3}) {
    set_num_threads(budget);
    LayerNorm norm(kD);
    Rng rng(3);
    rng.fill_normal(norm.weight.value, 1.0f, 0.5f);
    rng.fill_normal(norm.bias.value, 0.0f, 0.5f);
    const Tensor3 y = norm.forward(x);
    const Tensor3 dx = norm.backward(dy);
    std::vector<float> all = flat(y);
    all.insert(all.end(), dx.begin(), dx.end());
    all.insert(all.end(), norm.weight.grad.begin(), norm.weight.grad.end());
    all.insert(all.end(), norm.bias.grad.begin(), norm.bias.grad.end());
    runs.push_back(all);
  }
  CHECK(runs[1] == runs[0]);
  CHECK(runs[2] == runs[0]);
}

TEST_CASE("Linear's bias gradient is bit-identical at thread budgets 1, 2, 3", "[nn][linear][threads]") {
  BudgetGuard guard;
  const Tensor3 x = random3(kB, kT, 8, 4), dy = random3(kB, kT, kD, 5);
  std::vector<std::vector<float>> runs;
  for (int budget : {1, 2, 3}) {
    set_num_threads(budget);
    Rng rng(6);
    Linear lin(8, kD, rng);
    lin.forward(x);
    lin.backward(dy);
    runs.push_back(std::vector<float>(lin.bias.grad.begin(), lin.bias.grad.end()));
  }
  CHECK(runs[1] == runs[0]);
  CHECK(runs[2] == runs[0]);
  // And the value is the column sum of dy.
  std::vector<double> want(kD, 0.0);
  for (std::size_t r = 0; r < kB * kT; ++r)
    for (std::size_t j = 0; j < kD; ++j) want[j] += dy.data()[r * kD + j];
  for (std::size_t j = 0; j < kD; ++j) CHECK(runs[0][j] == Approx(want[j]).epsilon(1e-6));
}

TEST_CASE("add_column_sums_after gives add_column_sums's bits after its row op, at thread budgets 1, 2, 3", "[nn][threads]") {
  // FeedForward's relu backward fuses the activation gradient (the row op) with linear1's bias
  // sums; the result must be what the two passes gave, for every budget. kB·kT rows of kD: several
  // 64-row blocks on each of up to 3 threads.
  BudgetGuard guard;
  const Tensor3 d0 = random3(kB, kT, kD, 9), h = random3(kB, kT, kD, 10);
  const std::size_t rows = kB * kT;
  const auto relu_grad = [&](float* d, std::size_t r) {
    for (std::size_t j = 0; j < kD; ++j) d[r * kD + j] = h.data()[r * kD + j] > 0.0f ? d[r * kD + j] : 0.0f;
  };
  set_num_threads(1);
  Tensor3 two_pass = d0;
  for (std::size_t r = 0; r < rows; ++r) relu_grad(two_pass.data(), r);
  std::vector<float> want(kD, 0.5f);
  detail::add_column_sums(two_pass.data(), rows, kD, want.data());
  for (int budget : {1, 2, 3}) {
    set_num_threads(budget);
    Tensor3 d = d0;
    std::vector<float> got(kD, 0.5f);
    detail::add_column_sums_after(d.data(), rows, kD, got.data(), [&](std::size_t r) { relu_grad(d.data(), r); });
    CHECK(got == want);
    CHECK(flat(d) == flat(two_pass));
  }
}

TEST_CASE("FeedForward's relu backward gives linear1's bias gradient at thread budgets 1 and 3", "[nn][feed_forward][threads]") {
  // Against a double reference Σ_r [h > 0] · (dy W2)[r, :] (the GEMM's bits may depend on
  // OpenBLAS's threads, so this compares values, not bits).
  BudgetGuard guard;
  const Tensor3 x = random3(kB, kT, 8, 9), dy = random3(kB, kT, 8, 10);
  for (int budget : {1, 3}) {
    set_num_threads(budget);
    Rng rng(11);
    FeedForward ff(8, kD, rng, "relu");
    ff.forward(x);
    ff.backward(dy);
    const float* hid = ff.hidden().data();
    const float* W2 = ff.linear2.weight.value.data();  // [8, kD]
    std::vector<double> want(kD, 0.0);
    for (std::size_t r = 0; r < kB * kT; ++r)
      for (std::size_t j = 0; j < kD; ++j) {
        if (!(hid[r * kD + j] > 0.0f)) continue;
        double g = 0.0;
        for (std::size_t o = 0; o < 8; ++o) g += static_cast<double>(dy.data()[r * 8 + o]) * W2[o * kD + j];
        want[j] += g;
      }
    std::size_t bad = 0;
    for (std::size_t j = 0; j < kD; ++j) bad += !(ff.linear1.bias.grad(j) == Approx(want[j]).epsilon(1e-4).margin(1e-4));
    CHECK(bad == 0);
  }
}

TEST_CASE("Dropout is bit-identical at thread budgets 1, 2, 3", "[nn][dropout][threads]") {
  BudgetGuard guard;
  const Tensor3 x = random3(kB, kT, kD, 7), dy = random3(kB, kT, kD, 8);
  std::vector<float> identity = flat(x);  // p = 0: y = x and dx = dy
  identity.insert(identity.end(), dy.begin(), dy.end());
  std::vector<std::vector<float>> runs;
  for (int budget : {1, 2, 3}) {
    set_num_threads(budget);
    for (float p : {0.0f, 0.3f}) {
      Dropout drop(p, 9);
      const Tensor3 y = drop.forward(x);
      const Tensor3 dx = drop.backward(dy);
      std::vector<float> all = flat(y);
      all.insert(all.end(), dx.begin(), dx.end());
      if (budget == 1) {
        runs.push_back(all);
        if (p == 0.0f) CHECK(all == identity);
      } else {
        CHECK(all == runs[p == 0.0f ? 0 : 1]);
      }
    }
  }
}

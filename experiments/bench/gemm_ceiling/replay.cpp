// Replays a GEMM log of gemm_log_shim.c the way seqlab ran it at a budget of 2 threads: the calls
// of the main thread with any extent > 128 (the projections, FFN and their gradients) one after
// another at 2 OpenBLAS threads; the per-head calls (every extent <= 128) of the main thread and of
// the other thread concurrently on 2 std::threads at 1 OpenBLAS thread each (as
// MultiheadAttention's head ranges run). Median of 7 repetitions of the whole log, beside the
// median SGEMM 1024^3 rate at 2 threads of the same repetitions. The GEMM-only time is a lower
// bound on the layer's time: the rate the layer would reach if its non-GEMM work were free.
// usage: replay LOG
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <algorithm>
extern "C" {
void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
void openblas_set_num_threads(int);
}
struct G { long tid; int ta, tb, M, N, K, lda, ldb, ldc; float beta; };
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static void run(const G& g, float* A, float* B, float* C) {
  cblas_sgemm(101, g.ta ? 112 : 111, g.tb ? 112 : 111, g.M, g.N, g.K, 1.0f, A, g.lda, B, g.ldb, g.beta, C, g.ldc);
}
int main(int argc, char** argv) {
  FILE* f = argc > 1 ? fopen(argv[1], "r") : nullptr;
  if (!f) {
    fprintf(stderr, "usage: replay LOG (a gemm_log_shim.c log)\n");
    return 2;
  }
  std::vector<G> big, head0, head1;
  G g; double flops = 0;
  while (fscanf(f, "%ld %d %d %d %d %d %d %d %d %f", &g.tid, &g.ta, &g.tb, &g.M, &g.N, &g.K, &g.lda, &g.ldb, &g.ldc, &g.beta) == 10) {
    flops += 2.0 * g.M * g.N * g.K;
    if (g.M > 128 || g.N > 128 || g.K > 128) big.push_back(g);
    else (g.tid == 0 ? head0 : head1).push_back(g);
  }
  const size_t S = 4096 * 1024 + 4096 * 768;
  std::vector<float> A(S, 0.01f), B(S, 0.02f), C(S), A2(S, 0.01f), B2(S, 0.02f), C2(S);
  std::vector<double> tb, th, ts;
  for (int rep = 0; rep < 7; ++rep) {
    openblas_set_num_threads(2);
    double t0 = now();
    for (const G& x : big) run(x, A.data(), B.data(), C.data());
    double t1 = now();
    openblas_set_num_threads(1);
    std::thread w([&] { for (const G& x : head1) run(x, A2.data(), B2.data(), C2.data()); });
    for (const G& x : head0) run(x, A.data(), B.data(), C.data());
    w.join();
    double t2 = now();
    openblas_set_num_threads(2);
    G sq{0, 0, 1, 1024, 1024, 1024, 1024, 1024, 1024, 0.0f};
    double t3 = now();
    run(sq, A.data(), B.data(), C.data());
    double t4 = now();
    tb.push_back(t1 - t0); th.push_back(t2 - t1); ts.push_back(t4 - t3);
  }
  std::sort(tb.begin(), tb.end()); std::sort(th.begin(), th.end()); std::sort(ts.begin(), ts.end());
  double sq_rate = 2.0 * 1024 * 1024 * 1024 / ts[3];
  double gemm_time = tb[3] + th[3];
  printf("calls: %zu big, %zu + %zu head; logged GEMM FLOP %.3f G\n", big.size(), head0.size(), head1.size(), flops / 1e9);
  printf("median: big %.1f ms, heads %.1f ms, GEMM-only %.1f ms; SGEMM 1024^3 at 2 threads %.1f GFLOP/s\n",
         tb[3] * 1e3, th[3] * 1e3, gemm_time * 1e3, sq_rate / 1e9);
  printf("GEMM-only rate %.1f GFLOP/s = %.0f%% of the SGEMM rate\n", flops / gemm_time / 1e9,
         100 * flops / gemm_time / sq_rate);
}

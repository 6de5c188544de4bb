/* LD_PRELOAD shim: logs every cblas_sgemm call of a process to $GEMM_LOG, one line per call:
 *   thread trans_a trans_b M N K lda ldb ldc beta
 * thread is 0 for the process's main thread, another number for any other thread; then calls
 * OpenBLAS's cblas_sgemm (dlsym RTLD_NEXT). Used by gemm_ceiling.sh (README.md beside it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
static pthread_t main_thread;
static FILE* log_file;

__attribute__((constructor)) static void init(void) {
  main_thread = pthread_self();
  const char* path = getenv("GEMM_LOG");
  if (path) log_file = fopen(path, "w");
}

void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
  static sgemm_fn real;
  if (!real) real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
  if (log_file) {
    const int is_main = pthread_equal(pthread_self(), main_thread);
    flockfile(log_file);
    fprintf(log_file, "%lu %d %d %d %d %d %d %d %d %g\n",
            is_main ? 0UL : (unsigned long)pthread_self() % 1000003UL + 1UL, ta == 112 || ta == 113,
            tb == 112 || tb == 113, M, N, K, lda, ldb, ldc, beta);
    funlockfile(log_file);
  }
  real(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

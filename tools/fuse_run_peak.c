/* tools/fuse_run_peak.c - the machine's peak f32 fma rate, measured in
 * the run that times a kernel (fuse-run --bench on the CPU): a loop of
 * independent register-only vector fmas (24 accumulators, so that the
 * fma latency is covered) on T threads at once, the best of 21 runs of
 * about 1 ms.
 *
 * x86-64 only: AVX-512F (zmm, 16 lanes) when the CPU has it, else
 * AVX2+FMA (ymm, 8 lanes); 0 elsewhere (the caller then prints no
 * fraction). The loops are compiled for those ISAs with target
 * attributes and chosen at run time, so the tool still runs anywhere.
 */
#include <pthread.h>
#include <stdint.h>

#include "tools/fuse_run_cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* About 1 ms per run at 3 GHz (zmm): short runs, as the kernels' timed
 * runs are, so that a run often fits one scheduler slice on a shared
 * machine; the best of PEAK_RUNS. */
#define PEAK_ITERS 150000L
#define PEAK_RUNS  21
#define ACC24(X)                                                             \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) \
      X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

__attribute__((target("avx512f"))) static float fmas512(long n, float s) {
#define D512(i) __m512 a##i = _mm512_set1_ps(s * (float)(i + 1));
#define F512(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define S512(i) t = _mm512_add_ps(t, a##i);
  ACC24(D512)
  __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long k = 0; k < n; ++k) {
    ACC24(F512)
    __asm__ volatile("" : : : "memory");
  }
  __m512 t = _mm512_setzero_ps();
  ACC24(S512)
  return _mm512_reduce_add_ps(t);
}

__attribute__((target("avx2,fma"))) static float fmas256(long n, float s) {
#define D256(i) __m256 a##i = _mm256_set1_ps(s * (float)(i + 1));
#define F256(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define S256(i) t = _mm256_add_ps(t, a##i);
  ACC24(D256)
  __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long k = 0; k < n; ++k) {
    ACC24(F256)
    __asm__ volatile("" : : : "memory");
  }
  __m256 t = _mm256_setzero_ps();
  ACC24(S256)
  float v[8];
  _mm256_storeu_ps(v, t);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

typedef struct PeakJob {
  int lanes;
  long iters;
  double seconds;
  float sink;
} PeakJob;

static void *peak_thread(void *arg) {
  PeakJob *j = arg;
  double t0 = fuseRunNow();
  j->sink = j->lanes == 16 ? fmas512(j->iters, 1.0f) : fmas256(j->iters, 1.0f);
  j->seconds = fuseRunNow() - t0;
  return NULL;
}

/* GFLOP/s of `threads` threads running the loop at once (the slowest
 * thread's time); 0 after an error. */
static double peak_run(int lanes, unsigned threads) {
  PeakJob jobs[64];
  pthread_t tid[64];
  if (threads < 1)
    threads = 1;
  if (threads > 64)
    threads = 64;
  for (unsigned t = 0; t < threads; ++t)
    jobs[t] = (PeakJob){lanes, PEAK_ITERS, 0, 0};
  unsigned started = 1;
  for (unsigned t = 1; t < threads; ++t, ++started)
    if (pthread_create(&tid[t], NULL, peak_thread, &jobs[t]) != 0)
      break;
  peak_thread(&jobs[0]);
  double worst = jobs[0].seconds;
  for (unsigned t = 1; t < started; ++t) {
    pthread_join(tid[t], NULL);
    if (jobs[t].seconds > worst)
      worst = jobs[t].seconds;
  }
  /* 24 fmas of `lanes` lanes, 2 flops each, per iteration. */
  double flops = 2.0 * 24 * lanes * (double)PEAK_ITERS * started;
  return worst > 0 ? flops / worst / 1e9 : 0;
}

double fuseRunPeakGflops(unsigned threads, int *lanes) {
  __builtin_cpu_init();
  int l = __builtin_cpu_supports("avx512f")                              ? 16
          : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8
                                                                          : 0;
  *lanes = l;
  if (!l)
    return 0;
  /* The best run: other work on a shared machine only slows it. */
  double best = 0;
  for (int k = 0; k < PEAK_RUNS; ++k) {
    double g = peak_run(l, threads);
    best = g > best ? g : best;
  }
  return best;
}
#else
double fuseRunPeakGflops(unsigned threads, int *lanes) {
  (void)threads;
  *lanes = 0;
  return 0;
}
#endif

/* tools/fuse_run_cpu.c - fuse-run --device cpu: the module is compiled
 * for this machine (fz/runtime.h: fuse, lower-graph-to-loop,
 * plan-memory, emit-llvm, O3 for the host CPU, ORC JIT) and run with a
 * thread per core (--threads N).
 *
 * --bench N: after one checked run, warm-up runs and N timed runs on
 * 64-byte aligned copies of the inputs (no allocation inside the timed
 * region), rotating through up to 8 sets of buffers (1 GiB in all) so
 * that no run finds its data in the caches; prints the median and
 * minimum time and the effective
 * bandwidth, counting each input read once and each output written once,
 * then the same for memcpy of as many bytes (one thread, and split over
 * the pool), the machine's ceiling measured in the same run, and the
 * kernel's rate as a fraction of the copy's on as many threads; and, for
 * a function with matmuls or convolutions, their flops (as the fusion
 * pass counts them) per second against the peak fma rate that
 * fuse_run_peak.c measures then on as many threads.
 * --check-interp: runs the reference interpreter on the same inputs and
 * compares every output (numpy.allclose's rule with --rtol/--atol).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "fz/fusion.h"
#include "fz/gpu.h"
#include "tools/common_timing.h"
#include "tools/fuse_run_cpu.h"

struct FuseRunCpu {
  FzContext *ctx;
  FzCpuRuntime *rt;
  FzCpuExecutable *exe;
  const FuseRunCpuOptions *o;
};

#define C(f) offsetof(FuseRunCpuOptions, f)

static int set_threads(void *opts, const char *v) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (!*v || *end || errno || n < 0 || n > 4096)
    return toolUsageError("fuse-run",
                          "--threads expects a number of threads in [0, "
                          "4096] (0: one per core), got '%s'",
                          v);
  ((FuseRunCpuOptions *)opts)->threads = (unsigned)n;
  return 0;
}

static int set_vector_width(void *opts, const char *v) {
  FuseRunCpuOptions *o = opts;
  if (strcmp(v, "128") && strcmp(v, "256") && strcmp(v, "512"))
    return toolUsageError("fuse-run",
                          "--vector-width expects 128, 256 or 512, got '%s'",
                          v);
  o->vectorWidth = (unsigned)atoi(v);
  return 0;
}

static int set_bench_lock(void *opts, const char *v) {
  if (!*v)
    return toolUsageError("fuse-run", "--bench-lock expects a file name");
  ((FuseRunCpuOptions *)opts)->benchLock = v;
  return 0;
}

static int set_codegen_threads(void *opts, const char *v) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (!*v || *end || errno || n < 0 || n > FZ_GPU_MAX_CODEGEN_THREADS)
    return toolUsageError("fuse-run",
                          "--codegen-threads expects a number of threads "
                          "from 0 (one per core) to %d, got '%s'",
                          FZ_GPU_MAX_CODEGEN_THREADS, v);
  ((FuseRunCpuOptions *)opts)->codegenThreads = (unsigned)n;
  return 0;
}

static const char *const kGpuArchs[] = {"sm_80", "sm_86", "sm_87", "sm_89",
                                        "sm_90", "sm_90a", NULL};

/* The CPU and benchmark options, in --help order (common_options.h). */
static const ToolOption kCpuOptions[] = {
    TOOL_CALL("threads", NULL, "N", set_threads,
              "cpu: worker threads, the caller's included (default: one per "
              "core)"),
    TOOL_INT("bench", NULL, "N", C(bench), 1, 1000000,
             "cpu, cuda: time N runs; print the median and the effective "
             "bandwidth (inputs read once + outputs written once), memcpy's "
             "beside it and the kernel's fraction of it (cpu: also run by "
             "run, each run followed by a copy; and the GFLOP/s of its "
             "matmuls and convolutions against a peak fma rate measured in "
             "the same run)"),
    TOOL_INT("profile", NULL, "N", C(profile), 1, 100000,
             "cuda: time each kernel N times, launched one by one with "
             "CUDA events between them; print each kernel's median, its "
             "share of their sum and its plan, slowest first"),
    TOOL_FLAG("check-interp", NULL, C(checkInterp),
              "cpu, cuda, sim: also run the interpreter and compare "
              "(--rtol/--atol)"),
    TOOL_FLAG("fusion-report", NULL, C(fusionReport),
              "cpu: print the fusion report"),
    TOOL_FLAG("no-fuse", NULL, C(noFuse),
              "cpu: every op its own loop nest (no fusion)"),
    TOOL_FLAG("fast-math", NULL, C(fastMath), "cpu: every fast-math flag"),
    TOOL_FLAG("exact-math", NULL, C(exactMath),
              "cpu: C library exp/log/tanh/erf instead of the inline "
              "approximations"),
    TOOL_FLAG("no-tile", NULL, C(noTile),
              "cpu: matmul and conv2d nests as lowered, not "
              "tile-contractions / tile-convolutions"),
    TOOL_FLAG("no-stage-rows", NULL, C(noStageRows),
              "cpu: no stage-rows (softmax recomputes exp in its "
              "normalization phase)"),
    TOOL_CALL("vector-width", NULL, "BITS", set_vector_width,
              "cpu: widest vectors in bits, 128, 256 or 512 (default 512 "
              "with AVX-512F, else LLVM's choice)"),
    TOOL_FLAG("print-loop-ir", NULL, C(printLoopIR),
              "cpu: print the lowered (loop-level) module to stderr"),
    TOOL_CALL("bench-lock", NULL, "FILE", set_bench_lock,
              "cpu, cuda: hold an exclusive lock on FILE (flock; created if "
              "missing) while timing, so that concurrent runs compile in "
              "parallel but time one at a time"),
    TOOL_FLAG("bench-cold", NULL, C(benchCold),
              "cuda: before each timed run (the device copy's too), "
              "overwrite 256 MiB so that no input is in L2 (as a model's "
              "weight, read once per call); cpu rotates its buffers "
              "anyway"),
    TOOL_CALL("codegen-threads", NULL, "N", set_codegen_threads,
              "cpu, cuda: threads for LLVM's optimization and code "
              "generation of the kernels or outlined parallel loops (default "
              "0: one per core, at most 16; 1: this thread alone; the code "
              "is the same)"),
    TOOL_CHOICE("gpu-arch", NULL, "SM", C(gpuArch), kGpuArchs,
                "cuda, sim: the PTX target instead of the device's (an sm_90 "
                "device compiles for sm_90a by default, with the bf16/f16 "
                "matmuls and NHWC convs of at least 128 output tiles of "
                "128x128 on the warp-group mma, kernel.wgmma; sm_90a: every "
                "nest that allows it, sim too; sm_90: none)"),
    TOOL_FLAG("no-cache", NULL, C(noCache),
              "cpu, cuda: neither read nor write the kernel cache of "
              "compiled code (default: $FZ_CACHE_DIR, else "
              "$XDG_CACHE_HOME/fuse, else ~/.cache/fuse)"),
    TOOL_FLAG("timing", NULL, C(timing),
              "Print the time of each compile phase (import, graph passes, "
              "fusion, lowering, LLVM, driver load) on stderr"),
};

const ToolParser fuseRunCpuParser = {
    .tool = "fuse-run",
    .options = kCpuOptions,
    .numOptions = sizeof kCpuOptions / sizeof kCpuOptions[0],
};

int fuseRunCpuParseArg(FuseRunCpuOptions *o, int argc, char **argv, int i) {
  return toolParseOption(&fuseRunCpuParser, o, argc, argv, i);
}

/*===--- Compiling ---------------------------------------------------------===*/

typedef struct Quiet {
  char *why;
  size_t size;
  bool seen;
} Quiet;

static bool swallow(const FzDiagnostic *d, void *ud) {
  Quiet *q = ud;
  if (fzDiagnosticGetSeverity(d) == FZ_SEVERITY_ERROR && !q->seen &&
      q->why && q->size) {
    FzStringRef m = fzDiagnosticGetMessage(d);
    snprintf(q->why, q->size, "%.*s", (int)m.length, m.data);
    q->seen = true;
  }
  return true;
}

static void report_to(FzStringRef chunk, void *ud) {
  fwrite(chunk.data, 1, chunk.length, (FILE *)ud);
}

FuseRunCpu *fuseRunCpuCreate(FzContext *ctx, FzOp *module,
                             const FuseRunCpuOptions *o, bool quiet,
                             char *whyNot, size_t whySize) {
  FuseRunCpu *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->ctx = ctx;
  r->o = o;
  Quiet q = {whyNot, whySize, false};
  FzDiagHandlerId h = quiet ? fzContextPushDiagHandler(ctx, swallow, &q) : 0;
  FzCpuCompileOptions co;
  fzCpuCompileOptionsInit(&co);
  FzFusionOptions fo;
  fzFusionOptionsInit(&fo);
  fo.target = fzFusionTargetLookup(ctx, FZ_STR("cpu"));
  fo.report = o->fusionReport;
  fo.reportOut = report_to;
  fo.reportUserData = stdout;
  co.pipeline.fusion = &fo;
  co.pipeline.fuse = !o->noFuse;
  co.pipeline.layout = o->layout;
  co.codegen.fastMath = o->fastMath;
  co.codegen.exactMath = o->exactMath;
  co.codegen.tileContractions = !o->noTile;
  co.codegen.tileConvolutions = !o->noTile;
  co.codegen.stageRows = !o->noStageRows;
  co.codegen.preferVectorWidth = o->vectorWidth;
  FzToolTiming *tt = o->timingReport;
  co.pipeline.timing = tt ? &tt->sink : NULL;
  co.codegen.timing = co.pipeline.timing;
  co.codegen.noCache = o->noCache;
  co.codegen.codegenThreads = o->codegenThreads;
  r->rt = fzCpuRuntimeCreate(ctx, o->threads);
  double t0 = fzToolTimingNow(), covered0 = tt ? tt->covered : 0;
  if (r->rt)
    r->exe = fzCpuExecutableCreate(r->rt, module, &co);
  fzToolTimingAddRest(tt, "CPU code generation (loop transforms, LLVM, JIT)",
                      t0, covered0);
  if (quiet)
    fzContextPopDiagHandler(ctx, h);
  if (!r->exe) {
    fuseRunCpuDestroy(r);
    return NULL;
  }
  if (o->printLoopIR)
    fzOpDump(fzCpuExecutableGetLoopModule(r->exe), 0, stderr);
  return r;
}

void fuseRunCpuDestroy(FuseRunCpu *r) {
  if (!r)
    return;
  fzCpuExecutableDestroy(r->exe);
  fzCpuRuntimeDestroy(r->rt);
  free(r);
}

/*===--- Checking against the interpreter --------------------------------===*/

bool fuseRunCheckOne(FILE *out, size_t i, const FzTensor *got,
                     const FzTensor *want, double rtol, double atol) {
  if (got->numElements != want->numElements || got->dtype != want->dtype) {
    fprintf(out, "check-interp: output_%zu: MISMATCH: shapes or dtypes "
                 "differ\n", i);
    return false;
  }
  double maxAbs = 0, maxRel = 0;
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < got->numElements; ++k) {
    double a = fzTensorGetF64(got, k), b = fzTensorGetF64(want, k);
    if (isnan(a) || isnan(b)) {
      if (!(isnan(a) && isnan(b)) && bad++ == 0)
        first = k;
      continue;
    }
    if (a == b)
      continue;
    double d = fabs(a - b);
    if (isnan(d))
      d = HUGE_VAL;
    maxAbs = d > maxAbs ? d : maxAbs;
    if (b != 0 && d / fabs(b) > maxRel)
      maxRel = d / fabs(b);
    if (!(d <= atol + rtol * fabs(b)) && bad++ == 0)
      first = k;
  }
  fprintf(out, "check-interp: output_%zu: max abs error %.3g, max rel error "
               "%.3g",
          i, maxAbs, maxRel);
  if (bad) {
    fprintf(out, ": MISMATCH (%lld of %lld elements beyond atol %g + rtol %g "
                 "* |expected|; first at flat index %lld: got %.9g, "
                 "expected %.9g)\n",
            (long long)bad, (long long)got->numElements, atol, rtol,
            (long long)first, fzTensorGetF64(got, first),
            fzTensorGetF64(want, first));
    return false;
  }
  fprintf(out, ": ok\n");
  return true;
}

static bool check_interp(FuseRunCpu *r, FzOp *func, size_t nIn,
                         FzTensor *const *inputs, size_t nOut,
                         FzTensor *const *outputs, FILE *out, int *status) {
  size_t n = 0;
  FzTensor **ref = NULL;
  if (!fzInterpretFunction(func, nIn, inputs, NULL, &n, &ref))
    return false;
  bool ok = n == nOut;
  if (!ok)
    fprintf(out, "check-interp: MISMATCH: %zu outputs, the interpreter "
                 "gives %zu\n", nOut, n);
  for (size_t i = 0; ok && i < n; ++i)
    if (!fuseRunCheckOne(out, i, outputs[i], ref[i], r->o->rtol, r->o->atol))
      *status = 1;
  if (!ok)
    *status = 1;
  fzTensorArrayDestroy(r->ctx, n, ref);
  return true;
}

/*===--- Benchmark ---------------------------------------------------------===*/

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double fuseRunNow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now_seconds(void) { return fuseRunNow(); }

void fuseRunPrintFirstResult(const FuseRunCpuOptions *o, FILE *out) {
  fprintf(out, "bench: first result after %.3f s (import, compile and the "
               "first run)\n",
          fuseRunNow() - o->startSeconds);
}

int fuseRunBenchLock(const FuseRunCpuOptions *o) {
  if (!o->benchLock)
    return -1;
  int fd = open(o->benchLock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    fprintf(stderr, "fuse-run: error: cannot open the bench lock '%s': %s\n",
            o->benchLock, strerror(errno));
    return -2;
  }
  int rc;
  while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
    ;
  if (rc != 0) {
    fprintf(stderr, "fuse-run: error: cannot lock '%s': %s\n", o->benchLock,
            strerror(errno));
    close(fd);
    return -2;
  }
  return fd;
}

void fuseRunBenchUnlock(int fd) {
  if (fd >= 0)
    close(fd); /* releases the flock */
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sets of buffers the benchmark rotates through, so that the data of one
 * run is out of the caches by the time it comes round again (servers
 * have L3 caches of hundreds of MB): enough sets for 1 GiB, at most 8. */
static size_t rotation(double bytes) {
  double want = (double)(1u << 30) / (bytes > 1 ? bytes : 1);
  return want >= 8 ? 8 : want <= 1 ? 1 : (size_t)want + 1;
}

typedef struct CopyJob {
  char *dst;
  const char *src;
  size_t bytes;
  int64_t parts;
} CopyJob;

static void copy_part(void *env, int64_t b, int64_t e) {
  CopyJob *j = env;
  size_t lo = (size_t)((double)j->bytes * (double)b / (double)j->parts);
  size_t hi = (size_t)((double)j->bytes * (double)e / (double)j->parts);
  lo &= ~(size_t)63;
  hi = e == j->parts ? j->bytes : hi & ~(size_t)63;
  memcpy(j->dst + lo, j->src + lo, hi - lo);
}

/* The copy buffers of bench_memcpy: `sets` pairs of n bytes. */
typedef struct CopyBufs {
  char *src[8], *dst[8];
  size_t n, sets;
} CopyBufs;

static void copy_bufs_free(CopyBufs *c) {
  for (size_t k = 0; k < c->sets; ++k) {
    free(c->src[k]);
    free(c->dst[k]);
  }
}

static bool copy_bufs_alloc(CopyBufs *c, double bytes) {
  memset(c, 0, sizeof *c);
  c->n = ((size_t)(bytes / 2) + 63) & ~(size_t)63;
  c->sets = rotation(bytes);
  for (size_t k = 0; k < c->sets; ++k) {
    c->src[k] = aligned_alloc(64, c->n);
    c->dst[k] = aligned_alloc(64, c->n);
    if (!c->src[k] || !c->dst[k]) {
      copy_bufs_free(c);
      return false;
    }
    memset(c->src[k], 1, c->n);
    memset(c->dst[k], 0, c->n);
  }
  return c->n > 0;
}

/* One timed copy of set `set`: on one thread (parallel false), or split
 * over the pool's threads. */
static double timed_copy(FuseRunCpu *r, const CopyBufs *c, size_t set,
                         bool parallel) {
  const FzParallelRuntime *par = fzCpuRuntimeGetParallel(r->rt);
  CopyJob job = {c->dst[set], c->src[set], c->n,
                 (int64_t)fzCpuRuntimeGetNumThreads(r->rt)};
  double t0 = now_seconds();
  if (!parallel)
    memcpy(c->dst[set], c->src[set], c->n);
  else
    par->parallelFor(par->pool, copy_part, &job, job.parts, INT64_MAX / 2);
  return now_seconds() - t0;
}

/* memcpy of `bytes`/2 bytes (so that read + write = bytes), on one thread
 * and split over the pool's threads, rotating through as many buffer
 * pairs as the kernel's benchmark: the bandwidth ceiling of this machine,
 * measured next to the kernel. Median of `runs` (and the best, in
 * best[0]: both for the pool's thread count). */
static double bench_memcpy(FuseRunCpu *r, const CopyBufs *c, long runs,
                           FILE *out, double *best) {
  double *t = calloc((size_t)runs, sizeof *t);
  double gbs[2] = {0, 0}, top[2] = {0, 0};
  for (int mode = 0; t && mode < 2; ++mode) {
    for (long k = -2; k < runs; ++k) {
      double s = timed_copy(r, c, (size_t)(k + 2) % c->sets, mode == 1);
      if (k >= 0)
        t[k] = s;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    gbs[mode] = 2.0 * (double)c->n / t[runs / 2] / 1e9;
    top[mode] = 2.0 * (double)c->n / t[0] / 1e9;
  }
  if (t)
    fprintf(out, "bench: memcpy of %.3f MB (read + write = the bytes above): "
                 "%.2f GB/s on 1 thread, %.2f GB/s on %u threads (medians; "
                 "best %.2f, %.2f)\n",
            (double)c->n / 1e6, gbs[0], gbs[1],
            fzCpuRuntimeGetNumThreads(r->rt), top[0], top[1]);
  free(t);
  int m = fzCpuRuntimeGetNumThreads(r->rt) > 1 ? 1 : 0;
  *best = t ? top[m] : 0;
  return t ? gbs[m] : 0;
}

/* The kernel's fraction of the copy rate run by run: `runs` pairs of one
 * kernel run and one copy of as many bytes on as many threads right
 * after it, each pair's ratio of rates; the median and quartiles of the
 * ratios out. Where other work shares the memory, its load moves both
 * runs of a pair alike, and the ratios scatter much less than the two
 * rates measured apart. */
static bool bench_paired(FuseRunCpu *r, FzCpuFunction *f, void **bufs,
                         size_t na, size_t sets, const CopyBufs *c,
                         double bytes, long runs, double q[3]) {
  double *ratio = calloc((size_t)runs, sizeof *ratio);
  if (!ratio)
    return false;
  bool parallel = fzCpuRuntimeGetNumThreads(r->rt) > 1;
  for (long k = 0; k < runs; ++k) {
    double t0 = now_seconds();
    fzCpuFunctionCallRaw(f, bufs + ((size_t)k % sets) * na);
    double tk = now_seconds() - t0;
    double tc = timed_copy(r, c, (size_t)k % c->sets, parallel);
    ratio[k] = tk > 0 && tc > 0 ? (bytes / tk) / (2.0 * (double)c->n / tc) : 0;
  }
  qsort(ratio, (size_t)runs, sizeof *ratio, cmp_double);
  q[0] = ratio[runs / 4];
  q[1] = ratio[runs / 2];
  q[2] = ratio[(3 * runs) / 4 < runs ? (3 * runs) / 4 : runs - 1];
  free(ratio);
  return true;
}

/* The arithmetic of the contractions (matmul, conv2d: 2 M N K) of op
 * and the ops nested in it, as the fusion pass counts it. */
static double contraction_flops(FzOp *op) {
  double f = 0;
  FzFusionOpInfo info;
  memset(&info, 0, sizeof info);
  fzFusionDescribeOp(op, &info);
  if (info.kind == FZ_FUSION_CONTRACTION && info.flops > 0)
    f += info.flops;
  for (size_t r = 0; r < fzOpGetNumRegions(op); ++r)
    for (FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(op, r)); b;
         b = fzBlockGetNext(b))
      for (FzOp *o = fzBlockGetFirstOp(b); o; o = fzOpGetNextInBlock(o))
        f += contraction_flops(o);
  return f;
}

/* The GFLOP/s line: the contractions' flops over the median and the best
 * time, against the peak fma rate measured now on as many threads. */
static void print_flops(FuseRunCpu *r, FzOp *func, double med, double best,
                        FILE *out) {
  double flops = contraction_flops(func);
  if (flops <= 0 || med <= 0)
    return;
  unsigned th = fzCpuRuntimeGetNumThreads(r->rt);
  int lanes = 0;
  double peak = fuseRunPeakGflops(th, &lanes);
  fprintf(out,
          "bench: %.1f GFLOP/s (median; best %.1f) for %.4g flops of "
          "matmul/conv2d",
          flops / med / 1e9, best > 0 ? flops / best / 1e9 : 0.0, flops);
  if (peak > 0)
    fprintf(out,
            "; peak fma rate %.1f GFLOP/s on %u thread%s (%d-lane "
            "register-only fmas, measured now): %.2f of it (best %.2f)",
            peak, th, th == 1 ? "" : "s", lanes, flops / med / 1e9 / peak,
            best > 0 ? flops / best / 1e9 / peak : 0.0);
  fprintf(out, "\n");
}

/* False after an error was reported (no memory, the lock). */
static bool bench(FuseRunCpu *r, FzCpuFunction *f, FzOp *func,
                  FzStringRef name, size_t nIn, FzTensor *const *inputs,
                  FILE *out) {
  size_t na = nIn + fzCpuFunctionGetNumOutputs(f);
  double bytes = 0;
  for (size_t i = 0; i < na; ++i) {
    FzType *t = fzCpuFunctionGetArgType(f, i);
    size_t sz = fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
    bytes += (double)fzShapedTypeGetNumElements(t) * (double)(sz ? sz : 1);
  }
  size_t sets = rotation(bytes);
  void **bufs = calloc(sets * (na ? na : 1), sizeof *bufs);
  double *times = calloc((size_t)r->o->bench, sizeof *times);
  bool ok = bufs && times;
  int lock = fuseRunBenchLock(r->o);
  if (lock == -2)
    ok = false;
  for (size_t c = 0; ok && c < sets; ++c)
    for (size_t i = 0; ok && i < na; ++i) {
      FzType *t = fzCpuFunctionGetArgType(f, i);
      size_t sz = fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
      size_t n = (size_t)fzShapedTypeGetNumElements(t) * (sz ? sz : 1);
      void *b = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
      bufs[c * na + i] = b;
      if (!(ok = b != NULL))
        break;
      if (i < nIn)
        memcpy(b, inputs[i]->data, n);
      else
        memset(b, 0, n);
    }
  if (ok) {
    for (size_t w = 0; w < sets + 1; ++w)
      fzCpuFunctionCallRaw(f, bufs + (w % sets) * na);
    double c0 = cpu_seconds();
    for (long k = 0; k < r->o->bench; ++k) {
      void **set = bufs + ((size_t)k % sets) * na;
      double t0 = now_seconds();
      fzCpuFunctionCallRaw(f, set);
      times[k] = now_seconds() - t0;
    }
    double cpu = (cpu_seconds() - c0) / (double)r->o->bench;
    qsort(times, (size_t)r->o->bench, sizeof *times, cmp_double);
    double med = times[r->o->bench / 2];
    fprintf(out,
            "bench: @%.*s on cpu, %u thread%s: median %.4f ms, min %.4f ms "
            "over %ld runs; %.3f MB moved (inputs read once + outputs "
            "written once): %.2f GB/s effective\n",
            (int)name.length, name.data,
            fzCpuRuntimeGetNumThreads(r->rt),
            fzCpuRuntimeGetNumThreads(r->rt) == 1 ? "" : "s", med * 1e3,
            times[0] * 1e3, r->o->bench, bytes / 1e6,
            med > 0 ? bytes / med / 1e9 : 0.0);
    /* On a machine shared with other work the wall time includes waits;
     * the process's CPU time does not (the pool's brief spinning adds a
     * little with several threads). */
    fprintf(out, "bench: cpu time %.4f ms per run (this process, every "
                 "thread)\n",
            cpu * 1e3);
    double bestCopy = 0, copy = 0, q[3] = {0, 0, 0};
    CopyBufs cb;
    bool paired = false;
    if (copy_bufs_alloc(&cb, bytes)) {
      copy = bench_memcpy(r, &cb, r->o->bench, out, &bestCopy);
      paired = bench_paired(r, f, bufs, na, sets, &cb, bytes, r->o->bench, q);
      copy_bufs_free(&cb);
    }
    /* The kernel's share of the copy rate on as many threads: about 1
     * for a kernel bound by memory (elementwise, reductions, small-M
     * contractions), which move each byte once as a copy does. On a
     * machine shared with other work the best runs of both agree better
     * than the medians. */
    if (copy > 0 && med > 0 && bestCopy > 0 && times[0] > 0)
      fprintf(out,
              "bench: %.2f of the memcpy rate on %u thread%s (median / "
              "median; best / best %.2f)\n",
              bytes / med / 1e9 / copy, fzCpuRuntimeGetNumThreads(r->rt),
              fzCpuRuntimeGetNumThreads(r->rt) == 1 ? "" : "s",
              bytes / times[0] / 1e9 / bestCopy);
    if (paired)
      fprintf(out,
              "bench: %.2f of the memcpy rate on %u thread%s, paired (%ld "
              "runs, each followed by a copy; the median of their ratios, "
              "quartiles %.2f, %.2f)\n",
              q[1], fzCpuRuntimeGetNumThreads(r->rt),
              fzCpuRuntimeGetNumThreads(r->rt) == 1 ? "" : "s", r->o->bench,
              q[0], q[2]);
    print_flops(r, func, med, times[0], out);
    fprintf(out, "bench: compile: lowering %.1f ms, LLVM %.1f ms\n",
            fzCpuExecutableGetLowerSeconds(r->exe) * 1e3,
            fzCpuExecutableGetCodegenSeconds(r->exe) * 1e3);
  } else if (lock != -2) {
    fprintf(stderr, "fuse-run: error: out of memory for the benchmark\n");
  }
  fuseRunBenchUnlock(lock);
  for (size_t i = 0; bufs && i < sets * na; ++i)
    free(bufs[i]);
  free(bufs);
  free(times);
  return ok;
}

bool fuseRunCpuExecute(FuseRunCpu *r, FzOp *func, size_t nIn,
                       FzTensor *const *inputs, size_t *nOut,
                       FzTensor ***outputs, FILE *out, int *status) {
  FzStringRef name = fzSymbolGetName(func);
  FzCpuFunction *f = fzCpuExecutableLookup(r->exe, name);
  *status = 0;
  if (!f) {
    fprintf(stderr, "fuse-run: error: @%.*s was not compiled\n",
            (int)name.length, name.data);
    return false;
  }
  if (!fzCpuFunctionRun(f, nIn, inputs, nOut, outputs))
    return false;
  if (r->o->bench > 0)
    fuseRunPrintFirstResult(r->o, out);
  if (r->o->checkInterp &&
      !check_interp(r, func, nIn, inputs, *nOut, *outputs, out, status))
    return false;
  return r->o->bench <= 0 || bench(r, f, func, name, nIn, inputs, out);
}

/* tools/fuse_run_cuda.c - fuse-run --device cuda (tools/fuse_run_cuda.h).
 *
 * Compiling and running go through fz/cuda_run.h (shared with
 * run_conformance --device cuda): a clone of the module is lowered with
 * the CPU pipeline's graph -> loop part (fusion included) and compiled
 * to PTX for the device's compute capability (capped at sm_90, the
 * newest LLVM 19 knows; the driver JIT-compiles PTX forward). A run
 * allocates every argument and temporary on the device, copies the
 * inputs in, launches the kernels in order (replayed as one CUDA graph
 * built once per call; plain launches when the driver cannot build it),
 * and copies the outputs back.
 * --bench N times N replays of the graph with CUDA events (after 3
 * warm-up runs), prints the median, TFLOP/s when the function holds
 * compute-bound kernels (the tensor-core matmuls' 2 M N K each:
 * FzGpuKernel.flops), the effective bandwidth over the ideal bytes
 * (inputs read once, outputs written once), and a device-to-device copy
 * of the same bytes in the same process as the limit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/cuda_run.h"
#include "fz/loop.h"
#include "tools/common_progress.h"
#include "tools/common_timing.h"
#include "tools/fuse_run_cuda.h"

struct FuseRunCuda {
  FzContext *ctx;
  const FuseRunCpuOptions *o;
  FzCuda *cu;
  FzGpuProgram *prog;
};

FuseRunCuda *fuseRunCudaCreate(FzContext *ctx, FzOp *module,
                               const FuseRunCpuOptions *o) {
  FuseRunCuda *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->ctx = ctx;
  r->o = o;
  if (!(r->cu = fzCudaCreate(ctx, 0)) ||
      !fzCudaSetKernelCache(r->cu, !o->noCache, NULL)) {
    fuseRunCudaDestroy(r);
    return NULL;
  }
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.fastMath = o->fastMath;
  /* Tuning knob for experiments (docs/codegen.md): 16-byte chunks per
   * thread that the rows mapping aims at. */
  const char *chunks = getenv("FZ_GPU_ROW_CHUNKS");
  if (chunks && atoi(chunks) > 0)
    go.rowChunks = (unsigned)atoi(chunks);
  /* Likewise: long rows on chip (FZ_GPU_ROW_STAGE=0 re-reads them in
   * each phase; FZ_GPU_ROW_REGISTERS=N registers per thread for their
   * first chunks, 0..64). */
  const char *stage = getenv("FZ_GPU_ROW_STAGE");
  if (stage && !strcmp(stage, "0"))
    go.noRowStage = true;
  const char *regs = getenv("FZ_GPU_ROW_REGISTERS");
  if (regs && *regs && atoi(regs) >= 0 && atoi(regs) <= 64)
    go.rowRegisters = (unsigned)atoi(regs);
  /* Likewise: iterations per thread of the elementwise mapping. */
  const char *vec = getenv("FZ_GPU_VECTOR");
  if (vec && atoi(vec) > 0 && atoi(vec) <= 64)
    go.vector = (unsigned)atoi(vec);
  /* FZ_GPU_MMA=0: matmul nests take the generic mappings instead of the
   * tensor-core kernel (for comparisons); FZ_GPU_MMA_TILE, the tile of
   * the tensor-core kernels, is read by lower-loop-to-kernel itself. */
  const char *mma = getenv("FZ_GPU_MMA");
  if (mma && !strcmp(mma, "0"))
    go.noMma = true;
  /* FZ_GPU_SMALL_M=0: contractions of at most 16 rows take the
   * tensor-core or generic mappings instead of the small-M kernels. */
  const char *smallM = getenv("FZ_GPU_SMALL_M");
  if (smallM && !strcmp(smallM, "0"))
    go.noSmallM = true;
  /* --precision (or FZ_GPU_TF32, read by fuse-run): default is tf32.
   * fuse-run has applied bf16 and fp16 to the module already (what f32
   * nests remain take tf32 under them): not again on the clone. */
  go.precision = o->precision == FZ_PRECISION_BF16 ||
                         o->precision == FZ_PRECISION_FP16
                     ? FZ_PRECISION_TF32
                     : o->precision;
  go.codegenThreads = o->codegenThreads;
  go.layout = o->layout;
  /* --gpu-arch (sm_90a: the wgmma matmuls); fzCudaCompileModule keeps it
   * only where the device runs it. */
  /* --gpu-arch sm_90a: every nest that allows it; another arch (sm_90):
   * no wgmma. */
  if (o->gpuArch)
    go.arch = o->gpuArch;
  if (o->gpuArch && !strcmp(o->gpuArch, "sm_90a"))
    go.wgmmaMinTiles = 1;
  else if (o->gpuArch)
    go.noWgmma = true;
  FzToolTiming *tt = o->timingReport;
  go.timing = tt ? &tt->sink : NULL;
  go.noCache = o->noCache;
  FzToolProgress progress;
  fzToolProgressInit(&progress);
  go.progress = &progress.sink;
  if (!(r->prog = fzCudaCompileModule(r->cu, module, !o->noFuse, &go))) {
    fuseRunCudaDestroy(r);
    return NULL;
  }
  /* --timing: the driver's load of the PTX (its JIT compilation) on its
   * own; the calls find the module loaded. */
  const FzGpuKernel *first = NULL;
  for (size_t i = 0; tt && !first && i < r->prog->numFunctions; ++i)
    if (r->prog->functions[i].numKernels)
      first = &r->prog->functions[i].kernels[0];
  if (first) {
    double t0 = fzToolTimingNow();
    bool loaded = fzCudaGetKernel(r->cu, r->prog->ptx, r->prog->ptxLen,
                                  first->name) != NULL;
    fzToolTimingAdd(tt, "driver load", fzToolTimingNow() - t0);
    size_t hits = 0, misses = 0;
    fzCudaGetKernelCacheStats(r->cu, &hits, &misses);
    if (hits + misses) {
      FzTimingRecord rec = {"cubin cache", NULL, 0, 0, 1, 0, hits, misses, 0};
      tt->sink.record(&rec, tt->sink.userData);
    }
    if (!loaded) {
      fuseRunCudaDestroy(r);
      return NULL;
    }
  }
  char arch[16];
  fprintf(stderr, "fuse-run: cuda: %s (%s, %d SMs)\n",
          fzCudaGetDeviceName(r->cu),
          fzCudaGetPtxArch(r->cu, arch, sizeof arch), fzCudaGetNumSMs(r->cu));
  return r;
}

void fuseRunCudaDestroy(FuseRunCuda *r) {
  if (!r)
    return;
  fzGpuProgramDestroy(r->prog);
  fzCudaDestroy(r->cu);
  free(r);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Median milliseconds of `reps` timed calls of what (kernels, or a copy
 * when copyBytes > 0). Negative after an error. */
static double time_median(FuseRunCuda *r, FzCudaCall *c, long reps,
                          FzCudaPtr dst, FzCudaPtr src, size_t copyBytes,
                          FzCudaPtr flush, size_t flushBytes) {
  FzCudaEvent *e0 = fzCudaEventCreate(r->cu), *e1 = fzCudaEventCreate(r->cu);
  float *ms = calloc((size_t)reps, sizeof *ms);
  double result = -1;
  if (!e0 || !e1 || !ms)
    goto done;
  for (long i = -3; i < reps; ++i) {
    /* --bench-cold: L2 holds the scratch, not the inputs (ordered
     * before the first event on the same stream: not timed). */
    if (flushBytes &&
        !fzCudaMemset(r->cu, flush, (unsigned char)(i & 0xff), flushBytes))
      goto done;
    if (!fzCudaEventRecord(r->cu, e0))
      goto done;
    bool ok = copyBytes ? fzCudaCopyOnDevice(r->cu, dst, src, copyBytes)
                        : fzCudaCallLaunch(c);
    if (!ok || !fzCudaEventRecord(r->cu, e1))
      goto done;
    float t = fzCudaEventElapsedMs(r->cu, e0, e1);
    if (t < 0)
      goto done;
    if (i >= 0)
      ms[i] = t;
  }
  qsort(ms, (size_t)reps, sizeof *ms, cmp_float);
  result = ms[reps / 2];
done:
  free(ms);
  fzCudaEventDestroy(r->cu, e0);
  fzCudaEventDestroy(r->cu, e1);
  return result;
}

/* --profile N: each kernel's median time over N runs of the function,
 * its kernels launched one by one with an event before each and one after
 * the last (enqueued back to back, so the gaps are the device's), then
 * one line per kernel, slowest first. */
typedef struct KernelTime {
  size_t k;
  double ms;
} KernelTime;

static int cmp_kernel_time(const void *a, const void *b) {
  double x = ((const KernelTime *)a)->ms, y = ((const KernelTime *)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

static bool profile(FuseRunCuda *r, FzCudaCall *c, FILE *out) {
  const FzGpuFunction *f = fzCudaCallGetFunction(c);
  size_t m = f->numKernels;
  long reps = (long)r->o->profile;
  FzCudaEvent **ev = calloc(m + 1, sizeof *ev);
  float *ms = calloc(m * (size_t)reps + 1, sizeof *ms);
  float *one = calloc((size_t)reps + 1, sizeof *one);
  KernelTime *kt = calloc(m + 1, sizeof *kt);
  bool ok = ev && ms && one && kt;
  for (size_t k = 0; ok && k <= m; ++k)
    ok = (ev[k] = fzCudaEventCreate(r->cu)) != NULL;
  int lock = ok ? fuseRunBenchLock(r->o) : -1;
  ok = ok && lock != -2;
  for (long i = -2; ok && i < reps; ++i) {
    for (size_t k = 0; ok && k < m; ++k)
      ok = fzCudaEventRecord(r->cu, ev[k]) && fzCudaCallLaunchKernel(c, k);
    ok = ok && fzCudaEventRecord(r->cu, ev[m]);
    for (size_t k = 0; ok && k < m; ++k) {
      float t = fzCudaEventElapsedMs(r->cu, ev[k], ev[k + 1]);
      ok = t >= 0;
      if (i >= 0)
        ms[k * (size_t)reps + (size_t)i] = t;
    }
  }
  if (lock != -2)
    fuseRunBenchUnlock(lock);
  double sum = 0;
  for (size_t k = 0; ok && k < m; ++k) {
    memcpy(one, ms + k * (size_t)reps, (size_t)reps * sizeof *one);
    qsort(one, (size_t)reps, sizeof *one, cmp_float);
    kt[k] = (KernelTime){k, one[reps / 2]};
    sum += kt[k].ms;
  }
  if (ok) {
    qsort(kt, m, sizeof *kt, cmp_kernel_time);
    fprintf(out,
            "profile-cuda: @%s: %zu kernel%s launched one by one, median of "
            "%ld runs each: sum %.3f us\n",
            f->name, m, m == 1 ? "" : "s", reps, sum * 1e3);
    for (size_t i = 0; i < m; ++i) {
      const FzGpuKernel *K = &f->kernels[kt[i].k];
      fprintf(out, "profile-cuda: %10.3f us %5.1f%%  %s: %s\n",
              kt[i].ms * 1e3, sum > 0 ? 100 * kt[i].ms / sum : 0.0, K->name,
              K->plan ? K->plan : K->mapping);
    }
  }
  for (size_t k = 0; ev && k <= m; ++k)
    fzCudaEventDestroy(r->cu, ev[k]);
  free(ev);
  free(ms);
  free(one);
  free(kt);
  if (!ok && lock != -2)
    fprintf(stderr, "fuse-run: error: --profile: timing the kernels failed\n");
  return ok;
}

static bool bench(FuseRunCuda *r, FzCudaCall *c, FILE *out) {
  const FzGpuFunction *f = fzCudaCallGetFunction(c);
  int64_t bytes = 0;
  for (size_t i = 0; i < f->numArgs; ++i)
    bytes += fzShapedTypeGetNumElements(f->argTypes[i]) *
             (int64_t)fzTypeGetStorageSize(
                 fzShapedTypeGetElementType(f->argTypes[i]));
  int lock = fuseRunBenchLock(r->o);
  if (lock == -2)
    return false;
  /* --bench-cold: a scratch buffer larger than any L2 (50 MB on an
   * H100, 60 MB on an H200) overwritten before each timed run. */
  size_t flushBytes = r->o->benchCold ? (size_t)256 << 20 : 0;
  FzCudaPtr flush = 0;
  if (flushBytes && !fzCudaAlloc(r->cu, flushBytes, &flush)) {
    fuseRunBenchUnlock(lock);
    return false;
  }
  double ms = time_median(r, c, r->o->bench, 0, 0, 0, flush, flushBytes);
  if (ms < 0) {
    fuseRunBenchUnlock(lock);
    fzCudaFree(r->cu, flush);
    return false;
  }
  /* The limit: a device copy moving the same bytes (read + write). */
  size_t half = (size_t)(bytes / 2) & ~(size_t)15;
  double copyMs = -1;
  FzCudaPtr a = 0, b = 0;
  if (half && fzCudaAlloc(r->cu, half, &a) && fzCudaAlloc(r->cu, half, &b) &&
      fzCudaMemset(r->cu, a, 1, half))
    copyMs = time_median(r, c, r->o->bench, b, a, half, flush, flushBytes);
  fuseRunBenchUnlock(lock);
  fzCudaFree(r->cu, a);
  fzCudaFree(r->cu, b);
  fzCudaFree(r->cu, flush);
  for (size_t k = 0; k < f->numKernels; ++k) {
    const FzGpuKernel *K = &f->kernels[k];
    fprintf(out,
            "bench-cuda: kernel %s: grid (%u, %u, %u), block (%u, %u, %u), "
            "shared %u: %s\n",
            K->name, K->grid[0], K->grid[1], K->grid[2], K->block[0],
            K->block[1], K->block[2], K->sharedBytes,
            K->plan ? K->plan : K->mapping);
  }
  double gbs = ms > 0 ? (double)bytes / (ms * 1e6) : 0;
  double copyGbs = copyMs > 0 ? (double)(2 * half) / (copyMs * 1e6) : 0;
  /* Compute-bound kernels (matmuls: 2 M N K each) also in TFLOP/s. */
  int64_t flops = 0;
  for (size_t k = 0; k < f->numKernels; ++k)
    flops += f->kernels[k].flops;
  char tflops[96] = "";
  if (flops > 0 && ms > 0)
    snprintf(tflops, sizeof tflops, ", %.1f TFLOP/s (%lld flops)",
             (double)flops / (ms * 1e9), (long long)flops);
  fprintf(out,
          "bench-cuda: @%s: %zu kernel%s (%s), median %.3f us over %ld "
          "runs%s%s, %.1f GB/s (%lld ideal bytes); device copy %.1f GB/s; "
          "ratio %.3f\n",
          f->name, f->numKernels, f->numKernels == 1 ? "" : "s",
          fzCudaCallUsesGraph(c) ? "one CUDA graph" : "launched one by one",
          ms * 1e3, r->o->bench, flushBytes ? " (L2 cold)" : "", tflops, gbs,
          (long long)bytes, copyGbs,
          copyGbs > 0 ? gbs / copyGbs : 0);
  return true;
}

bool fuseRunCudaExecute(FuseRunCuda *r, FzOp *func, size_t nIn,
                        FzTensor *const *inputs, size_t *nOut,
                        FzTensor ***outputs, FILE *out, int *status) {
  FzStringRef name = fzSymbolGetName(func);
  char cname[256];
  snprintf(cname, sizeof cname, "%.*s", (int)name.length, name.data);
  size_t n = 0;
  FzTensor **outs = NULL;
  FzCudaCall *c = fzCudaCallCreate(r->cu, r->prog, cname, nIn, inputs);
  bool ok = c && fzCudaCallLaunch(c) &&
            fzCudaCallGetOutputs(c, r->ctx, &n, &outs);
  if (ok && r->o->bench > 0) {
    fuseRunPrintFirstResult(r->o, out);
    ok = bench(r, c, out);
  }
  if (ok && r->o->profile > 0)
    ok = profile(r, c, out);
  fzCudaCallDestroy(c);
  if (ok && r->o->checkInterp) {
    size_t nRef = 0;
    FzTensor **ref = NULL;
    if (!fzInterpretFunction(func, nIn, inputs, NULL, &nRef, &ref)) {
      ok = false;
    } else {
      if (nRef != n)
        *status = 1;
      for (size_t i = 0; i < nRef && i < n; ++i)
        if (!fuseRunCheckOne(out, i, outs[i], ref[i], r->o->rtol, r->o->atol))
          *status = 1;
      fzTensorArrayDestroy(r->ctx, nRef, ref);
    }
  }
  if (!ok) {
    if (outs)
      fzTensorArrayDestroy(r->ctx, n, outs);
    return false;
  }
  *nOut = n;
  *outputs = outs;
  return true;
}

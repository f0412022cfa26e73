/* tools/fuse_run_cuda.c - fuse-run --device cuda (tools/fuse_run_cuda.h).
 *
 * A clone of the module is lowered with the CPU pipeline's graph -> loop
 * part (fusion included) and compiled to PTX for the device's compute
 * capability (capped at sm_90, the newest LLVM 19 knows; the driver
 * JIT-compiles PTX forward). A run allocates every argument and
 * temporary on the device, copies the inputs in, launches the kernels in
 * order (replayed as one CUDA graph built once per call; plain launches
 * when the driver cannot build it), and copies the outputs back.
 * --bench N times N replays of the graph with CUDA events (after 3
 * warm-up runs), prints the
 * median, the effective bandwidth over the ideal bytes (inputs read once,
 * outputs written once), and a device-to-device copy of the same bytes
 * in the same process as the limit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fz/cuda.h"
#include "fz/gpu.h"
#include "fz/loop.h"
#include "ir/util.h"
#include "tools/fuse_run_cuda.h"

struct FuseRunCuda {
  FzContext *ctx;
  const FuseRunCpuOptions *o;
  FzCuda *cu;
  FzOp *loopModule;
  FzGpuProgram *prog;
  FzCudaGraph *graph; /* of the function being executed, or NULL */
};

FuseRunCuda *fuseRunCudaCreate(FzContext *ctx, FzOp *module,
                               const FuseRunCpuOptions *o) {
  FuseRunCuda *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->ctx = ctx;
  r->o = o;
  if (!(r->cu = fzCudaCreate(ctx, 0)) ||
      !(r->loopModule = fzOpClone(module, NULL))) {
    fuseRunCudaDestroy(r);
    return NULL;
  }
  if (fzModuleIsGraphLevel(r->loopModule)) {
    FzCpuPipelineOptions po;
    fzCpuPipelineOptionsInit(&po);
    po.fuse = !o->noFuse;
    if (!fzLowerModuleForCpu(r->loopModule, &po)) {
      fuseRunCudaDestroy(r);
      return NULL;
    }
  }
  int cc = fzCudaGetComputeCapability(r->cu);
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d", cc > 90 ? 90 : cc);
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.arch = arch;
  go.fastMath = o->fastMath;
  /* Tuning knob for experiments (docs/codegen.md): 16-byte chunks per
   * thread that the rows mapping aims at. */
  const char *chunks = getenv("FZ_GPU_ROW_CHUNKS");
  if (chunks && atoi(chunks) > 0)
    go.rowChunks = (unsigned)atoi(chunks);
  /* Likewise: iterations per thread of the elementwise mapping. */
  const char *vec = getenv("FZ_GPU_VECTOR");
  if (vec && atoi(vec) > 0 && atoi(vec) <= 64)
    go.vector = (unsigned)atoi(vec);
  if (!(r->prog = fzGpuCompile(r->loopModule, &go))) {
    fuseRunCudaDestroy(r);
    return NULL;
  }
  fprintf(stderr, "fuse-run: cuda: %s (%s, %d SMs)\n",
          fzCudaGetDeviceName(r->cu), arch, fzCudaGetNumSMs(r->cu));
  return r;
}

void fuseRunCudaDestroy(FuseRunCuda *r) {
  if (!r)
    return;
  fzGpuProgramDestroy(r->prog);
  if (r->loopModule)
    fzOpDestroy(r->loopModule);
  fzCudaDestroy(r->cu);
  free(r);
}

/* The grid of kernel K: enough blocks for its items (the kernels loop
 * over the rest beyond 2^31 - 1). */
static void kernel_grid(const FzGpuKernel *K, unsigned grid[3],
                        unsigned block[3]) {
  int64_t blocks = (K->numItems + K->blockSize - 1) / K->blockSize;
  if (blocks > 0x7fffffff)
    blocks = 0x7fffffff;
  grid[0] = (unsigned)blocks, grid[1] = grid[2] = 1;
  block[0] = K->blockSize, block[1] = block[2] = 1;
}

/* f's kernels as one CUDA graph; NULL (and the reason on stderr) when
 * the driver cannot build one. */
static FzCudaGraph *make_graph(FuseRunCuda *r, const FzGpuFunction *f,
                               void **args) {
  size_t n = 0;
  FzCudaKernel **ks = calloc(f->numKernels + 1, sizeof *ks);
  unsigned(*grid)[3] = calloc(f->numKernels + 1, sizeof *grid);
  unsigned(*block)[3] = calloc(f->numKernels + 1, sizeof *block);
  FzCudaGraph *g = NULL;
  bool ok = ks && grid && block;
  for (size_t k = 0; ok && k < f->numKernels; ++k) {
    const FzGpuKernel *K = &f->kernels[k];
    if (K->numItems == 0)
      continue;
    ks[n] = fzCudaGetKernel(r->cu, r->prog->ptx, r->prog->ptxLen, K->name);
    ok = ks[n] != NULL;
    kernel_grid(K, grid[n], block[n]);
    n++;
  }
  if (ok && n > 0)
    g = fzCudaGraphCreate(r->cu, n, ks, (const unsigned(*)[3])grid,
                          (const unsigned(*)[3])block, args);
  free(ks);
  free(grid);
  free(block);
  return g;
}

/* Launches every kernel of f once on the device buffers: the graph when
 * there is one. */
static bool launch_all(FuseRunCuda *r, const FzGpuFunction *f, void **args) {
  if (r->graph)
    return fzCudaGraphLaunch(r->cu, r->graph);
  for (size_t k = 0; k < f->numKernels; ++k) {
    const FzGpuKernel *K = &f->kernels[k];
    if (K->numItems == 0)
      continue;
    FzCudaKernel *fn =
        fzCudaGetKernel(r->cu, r->prog->ptx, r->prog->ptxLen, K->name);
    unsigned grid[3], block[3];
    kernel_grid(K, grid, block);
    if (!fn || !fzCudaLaunch(r->cu, fn, grid, block, 0, args))
      return false;
  }
  return true;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Median milliseconds of `reps` timed calls of what (kernels, or a copy
 * when copyBytes > 0). Negative after an error. */
static double time_median(FuseRunCuda *r, const FzGpuFunction *f, void **args,
                          long reps, FzCudaPtr dst, FzCudaPtr src,
                          size_t copyBytes) {
  FzCudaEvent *e0 = fzCudaEventCreate(r->cu), *e1 = fzCudaEventCreate(r->cu);
  float *ms = calloc((size_t)reps, sizeof *ms);
  double result = -1;
  if (!e0 || !e1 || !ms)
    goto done;
  for (long i = -3; i < reps; ++i) {
    if (!fzCudaEventRecord(r->cu, e0))
      goto done;
    bool ok = copyBytes ? fzCudaCopyOnDevice(r->cu, dst, src, copyBytes)
                        : launch_all(r, f, args);
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

static bool bench(FuseRunCuda *r, const FzGpuFunction *f, void **args,
                  FILE *out) {
  int64_t bytes = 0;
  for (size_t i = 0; i < f->numArgs; ++i)
    bytes += fzShapedTypeGetNumElements(f->argTypes[i]) *
             (int64_t)fzTypeGetStorageSize(
                 fzShapedTypeGetElementType(f->argTypes[i]));
  double ms = time_median(r, f, args, r->o->bench, 0, 0, 0);
  if (ms < 0)
    return false;
  /* The limit: a device copy moving the same bytes (read + write). */
  size_t half = (size_t)(bytes / 2) & ~(size_t)15;
  double copyMs = -1;
  FzCudaPtr a = 0, b = 0;
  if (half && fzCudaAlloc(r->cu, half, &a) && fzCudaAlloc(r->cu, half, &b) &&
      fzCudaMemset(r->cu, a, 1, half))
    copyMs = time_median(r, f, args, r->o->bench, b, a, half);
  fzCudaFree(r->cu, a);
  fzCudaFree(r->cu, b);
  for (size_t k = 0; k < f->numKernels; ++k)
    fprintf(out, "bench-cuda: kernel %s: %s\n", f->kernels[k].name,
            f->kernels[k].plan ? f->kernels[k].plan : "");
  double gbs = ms > 0 ? (double)bytes / (ms * 1e6) : 0;
  double copyGbs = copyMs > 0 ? (double)(2 * half) / (copyMs * 1e6) : 0;
  fprintf(out,
          "bench-cuda: @%s: %zu kernel%s (%s), median %.3f us over %ld "
          "runs, %.1f GB/s (%lld ideal bytes); device copy %.1f GB/s; "
          "ratio %.3f\n",
          f->name, f->numKernels, f->numKernels == 1 ? "" : "s",
          r->graph ? "one CUDA graph" : "launched one by one", ms * 1e3,
          r->o->bench, gbs, (long long)bytes, copyGbs,
          copyGbs > 0 ? gbs / copyGbs : 0);
  return true;
}

/* numpy.allclose's rule; prints one line. */
static bool compare_one(FILE *out, size_t i, const FzTensor *got,
                        const FzTensor *want, double rtol, double atol) {
  if (got->numElements != want->numElements || got->dtype != want->dtype) {
    fprintf(out, "check-interp: output_%zu: MISMATCH: shapes or dtypes "
                 "differ\n", i);
    return false;
  }
  double maxAbs = 0;
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < got->numElements; ++k) {
    double a = fzTensorGetF64(got, k), b = fzTensorGetF64(want, k);
    if (isnan(a) || isnan(b)) {
      if (!(isnan(a) && isnan(b)) && bad++ == 0)
        first = k;
      continue;
    }
    double d = fabs(a - b);
    maxAbs = d > maxAbs ? d : maxAbs;
    if (!(d <= atol + rtol * fabs(b)) && bad++ == 0)
      first = k;
  }
  fprintf(out, "check-interp: output_%zu: max abs error %.3g", i, maxAbs);
  if (bad) {
    fprintf(out, ": MISMATCH (%lld of %lld elements; first at flat index "
                 "%lld: got %.9g, expected %.9g)\n",
            (long long)bad, (long long)got->numElements, (long long)first,
            fzTensorGetF64(got, first), fzTensorGetF64(want, first));
    return false;
  }
  fprintf(out, ": ok\n");
  return true;
}

bool fuseRunCudaExecute(FuseRunCuda *r, FzOp *func, size_t nIn,
                        FzTensor *const *inputs, size_t *nOut,
                        FzTensor ***outputs, FILE *out, int *status) {
  FzStringRef name = fzSymbolGetName(func);
  char cname[256];
  snprintf(cname, sizeof cname, "%.*s", (int)name.length, name.data);
  const FzGpuFunction *f = fzGpuProgramLookup(r->prog, cname);
  if (!f || f->numArgs - f->numOutputs != nIn)
    return fzEmitError(r->ctx, fzOpGetLoc(func),
                       "fuse-run: cuda: no compiled function @%s taking %zu "
                       "inputs",
                       cname, nIn);
  size_t numRoots = f->numArgs + f->numTemps;
  FzCudaPtr *dev = calloc(numRoots + 1, sizeof *dev);
  void **args = calloc(numRoots + 1, sizeof *args);
  FzTensor **outs = calloc(f->numOutputs + 1, sizeof *outs);
  bool ok = dev && args && outs;
  for (size_t i = 0; ok && i < numRoots; ++i) {
    size_t bytes;
    if (i < f->numArgs) {
      FzType *t = f->argTypes[i];
      bytes = (size_t)fzShapedTypeGetNumElements(t) *
              fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
      if (i < nIn && fzTensorGetNumBytes(inputs[i]) != bytes) {
        ok = fzEmitError(r->ctx, fzOpGetLoc(func),
                         "fuse-run: cuda: input #%zu has %zu bytes, the "
                         "function expects %zu", i,
                         fzTensorGetNumBytes(inputs[i]), bytes);
        break;
      }
    } else {
      bytes = (size_t)f->tempBytes[i - f->numArgs];
    }
    ok = fzCudaAlloc(r->cu, bytes, &dev[i]);
    if (ok && i < nIn)
      ok = fzCudaCopyToDevice(r->cu, dev[i], inputs[i]->data, bytes);
    args[i] = &dev[i];
  }
  if (ok) {
    r->graph = make_graph(r, f, args);
    if (!r->graph && f->numKernels > 0)
      fprintf(stderr, "fuse-run: cuda: note: no CUDA graph (see above); "
                      "launching the kernels one by one\n");
  }
  ok = ok && launch_all(r, f, args) && fzCudaSynchronize(r->cu);
  for (size_t k = 0; ok && k < f->numOutputs; ++k) {
    FzType *t = f->argTypes[nIn + k];
    outs[k] = fzTensorCreate(r->ctx, fzShapedTypeGetElementType(t),
                             fzShapedTypeGetRank(t), fzShapedTypeGetShape(t));
    ok = outs[k] && fzCudaCopyToHost(r->cu, outs[k]->data, dev[nIn + k],
                                     fzTensorGetNumBytes(outs[k]));
  }
  if (ok && r->o->bench > 0)
    ok = bench(r, f, args, out);
  fzCudaGraphDestroy(r->cu, r->graph);
  r->graph = NULL;
  for (size_t i = 0; dev && i < numRoots; ++i)
    fzCudaFree(r->cu, dev[i]);
  free(dev);
  free(args);
  if (ok && r->o->checkInterp) {
    size_t n = 0;
    FzTensor **ref = NULL;
    if (!fzInterpretFunction(func, nIn, inputs, NULL, &n, &ref)) {
      ok = false;
    } else {
      if (n != f->numOutputs)
        *status = 1;
      for (size_t i = 0; i < n && i < f->numOutputs; ++i)
        if (!compare_one(out, i, outs[i], ref[i], r->o->rtol, r->o->atol))
          *status = 1;
      fzTensorArrayDestroy(r->ctx, n, ref);
    }
  }
  if (!ok) {
    for (size_t k = 0; outs && k < f->numOutputs; ++k)
      fzTensorDestroy(outs[k]);
    free(outs);
    return false;
  }
  /* fzTensorArrayDestroy frees the array through the context. */
  FzTensor **arr = fzCalloc(r->ctx, f->numOutputs + 1, sizeof *arr);
  if (!arr) {
    for (size_t k = 0; k < f->numOutputs; ++k)
      fzTensorDestroy(outs[k]);
    free(outs);
    return fzEmitError(r->ctx, NULL, "fuse-run: out of memory");
  }
  memcpy(arr, outs, f->numOutputs * sizeof *arr);
  free(outs);
  *nOut = f->numOutputs;
  *outputs = arr;
  return true;
}

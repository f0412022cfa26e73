/* runtime/cuda_run.c - running the functions of a module compiled for
 * the current GPU (fz/cuda_run.h; fzCudaCompileModule, which compiles
 * it, is in pipelines/gpu.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/cuda_run.h"
#include "fz/graph.h"
#include "fz/loop.h"
#include "ir/util.h"

const char *fzCudaGetPtxArch(const FzCuda *cu, char *buf, size_t size) {
  int cc = fzCudaGetComputeCapability(cu);
  snprintf(buf, size, "sm_%d", cc > 90 ? 90 : cc);
  return buf;
}

struct FzCudaCall {
  FzCuda *cu;
  FzContext *ctx; /* the FzCuda's: the call's memory */
  const FzGpuProgram *prog;
  const FzGpuFunction *f;
  size_t nIn, numRoots;
  FzCudaPtr *dev;     /* numRoots: arguments, temporaries, constants */
  FzCudaKernel **fns; /* per kernel: the loaded function */
  void ***args;       /* per kernel: its parameters (into dev, or the
                         launch's constant scalars) */
  FzCudaGraph *graph; /* NULL: launched one by one */
  FzCudaPtr status;   /* the module's fz_status; 0 when it has no check */
};

/* Kernel k's parameter array: each points at a root's device address or
 * at a constant scalar's bits (the driver reads the parameter's size
 * from there; the host is little-endian). NULL when out of memory
 * (recorded). */
static void **kernel_args(FzCudaCall *c, const FzGpuKernel *K) {
  void **a = fzCalloc(c->ctx, K->numArgs + 1, sizeof *a);
  for (size_t i = 0; a && i < K->numArgs; ++i)
    a[i] = K->args[i].kind == FZ_GPU_ARG_BUFFER
               ? (void *)&c->dev[K->args[i].root]
               : (void *)&K->args[i].bits;
  return a;
}

/* c's kernels as one CUDA graph in c->graph; NULL when there are none or
 * the driver cannot build one (its error reported). False when out of
 * memory (recorded). */
static bool make_graph(FzCudaCall *c) {
  const FzGpuFunction *f = c->f;
  size_t m = f->numKernels, n = 0;
  FzCudaKernel **ks = fzCalloc(c->ctx, m + 1, sizeof *ks);
  unsigned(*grid)[3] = fzCalloc(c->ctx, m + 1, sizeof *grid);
  unsigned(*block)[3] = fzCalloc(c->ctx, m + 1, sizeof *block);
  unsigned *shared = fzCalloc(c->ctx, m + 1, sizeof *shared);
  void ***args = fzCalloc(c->ctx, m + 1, sizeof *args);
  bool ok = ks && grid && block && shared && args;
  bool hadFailure = fzContextHadAllocationFailure(c->ctx);
  for (size_t k = 0; ok && k < m; ++k) {
    const FzGpuKernel *K = &f->kernels[k];
    ks[n] = c->fns[k];
    memcpy(grid[n], K->grid, sizeof grid[n]);
    memcpy(block[n], K->block, sizeof block[n]);
    shared[n] = K->sharedBytes;
    args[n++] = c->args[k];
  }
  if (ok && n > 0)
    c->graph = fzCudaGraphCreate(c->cu, n, ks, (const unsigned(*)[3])grid,
                                 (const unsigned(*)[3])block, shared,
                                 (void **const *)args);
  /* The graph's own memory ran out: no fallback (the call fails). */
  if (ok && !c->graph && !hadFailure && fzContextHadAllocationFailure(c->ctx))
    ok = false;
  fzFree(c->ctx, ks);
  fzFree(c->ctx, grid);
  fzFree(c->ctx, block);
  fzFree(c->ctx, shared);
  fzFree(c->ctx, args);
  return ok;
}

FzCudaCall *fzCudaCallCreate(FzCuda *cu, const FzGpuProgram *p,
                             const char *name, size_t nIn,
                             FzTensor *const *inputs) {
  FzContext *ctx = fzCudaGetContext(cu);
  const FzGpuFunction *f = fzGpuProgramLookup(p, name);
  if (!f || f->numArgs - f->numOutputs != nIn) {
    fzEmitError(ctx, NULL, "cuda: no compiled function @%s taking %zu inputs",
                name, nIn);
    return NULL;
  }
  FzCudaCall *c = fzCalloc(ctx, 1, sizeof *c);
  size_t numRoots = f->numArgs + f->numTemps + f->numConsts;
  if (c) {
    c->cu = cu, c->ctx = ctx, c->prog = p, c->f = f, c->nIn = nIn;
    c->dev = fzCalloc(ctx, numRoots + 1, sizeof *c->dev);
    c->args = fzCalloc(ctx, f->numKernels + 1, sizeof *c->args);
    c->fns = fzCalloc(ctx, f->numKernels + 1, sizeof *c->fns);
  }
  bool ok = c && c->dev && c->args && c->fns;
  for (size_t k = 0; ok && k < f->numKernels; ++k)
    ok = (c->args[k] = kernel_args(c, &f->kernels[k])) != NULL;
  if (!ok) { /* out of memory: recorded */
    fzCudaCallDestroy(c);
    return NULL;
  }
  /* The module (JIT-compiled once per PTX text) and each kernel, allowed
   * its dynamic shared memory before any launch or graph: above 48 KiB
   * (the tensor-core matmuls) CUDA needs the function's opt-in. */
  for (size_t k = 0; ok && k < f->numKernels; ++k) {
    const FzGpuKernel *K = &f->kernels[k];
    c->fns[k] = fzCudaGetKernel(cu, p->ptx, p->ptxLen, K->name);
    ok = c->fns[k] &&
         fzCudaKernelAllowSharedMemory(cu, c->fns[k], K->sharedBytes);
  }
  /* The run-time checks' status (docs/codegen.md, "Run-time errors"),
   * cleared before the first launch. */
  size_t statusBytes = 0;
  if (ok && p->numChecks) {
    ok = fzCudaGetGlobal(cu, p->ptx, p->ptxLen, "fz_status", &c->status,
                         &statusBytes);
    if (ok && statusBytes < 16)
      ok = fzEmitError(ctx, NULL, "cuda: the module's fz_status has %zu "
                                  "bytes, not 16", statusBytes);
    ok = ok && fzCudaMemset(cu, c->status, 0, 16);
  }
  if (!ok) {
    fzCudaCallDestroy(c);
    return NULL;
  }
  for (size_t i = 0; ok && i < numRoots; ++i) {
    size_t bytes;
    if (i < f->numArgs) {
      FzType *t = f->argTypes[i];
      bytes = (size_t)fzShapedTypeGetNumElements(t) *
              fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
      if (inputs && i < nIn && fzTensorGetNumBytes(inputs[i]) != bytes) {
        ok = fzEmitError(ctx, NULL,
                         "cuda: input #%zu of @%s has %zu bytes, the "
                         "function expects %zu",
                         i, name, fzTensorGetNumBytes(inputs[i]), bytes);
        break;
      }
    } else if (i < f->numArgs + f->numTemps) {
      bytes = (size_t)f->tempBytes[i - f->numArgs];
    } else {
      bytes = (size_t)f->constBytes[i - f->numArgs - f->numTemps];
    }
    ok = fzCudaAlloc(cu, bytes, &c->dev[i]);
    c->numRoots = i + 1; /* freed from here on */
    if (ok && inputs && i < nIn && bytes)
      ok = fzCudaCopyToDevice(cu, c->dev[i], inputs[i]->data, bytes);
    /* The constants (weights) are uploaded once per call, before any
     * launch: they are not in the PTX (fz/gpu.h). */
    if (ok && i >= f->numArgs + f->numTemps && bytes)
      ok = fzCudaCopyToDevice(
          cu, c->dev[i], f->constData[i - f->numArgs - f->numTemps], bytes);
  }
  if (ok) {
    ok = make_graph(c);
    if (ok && !c->graph && f->numKernels > 0)
      fprintf(stderr, "cuda: note: no CUDA graph for @%s (see above); "
                      "launching the kernels one by one\n", name);
  }
  if (!ok) {
    fzCudaCallDestroy(c);
    return NULL;
  }
  return c;
}

const FzGpuFunction *fzCudaCallGetFunction(const FzCudaCall *c) {
  return c->f;
}

bool fzCudaCallUsesGraph(const FzCudaCall *c) { return c->graph != NULL; }

bool fzCudaCallLaunch(FzCudaCall *c) {
  if (c->graph)
    return fzCudaGraphLaunch(c->cu, c->graph);
  for (size_t k = 0; k < c->f->numKernels; ++k) {
    const FzGpuKernel *K = &c->f->kernels[k];
    if (!fzCudaLaunch(c->cu, c->fns[k], K->grid, K->block, K->sharedBytes,
                      c->args[k]))
      return false;
  }
  return true;
}

bool fzCudaCallLaunchKernel(FzCudaCall *c, size_t k) {
  if (k >= c->f->numKernels)
    return false;
  const FzGpuKernel *K = &c->f->kernels[k];
  return fzCudaLaunch(c->cu, c->fns[k], K->grid, K->block, K->sharedBytes,
                      c->args[k]);
}

FzCudaPtr fzCudaCallGetArgument(const FzCudaCall *c, size_t i) {
  return i < c->f->numArgs ? c->dev[i] : 0;
}

/* Waits; reports what a kernel's run-time check recorded to ctx. */
static bool synchronize(FzCudaCall *c, FzContext *ctx) {
  if (!fzCudaSynchronize(c->cu))
    return false;
  if (c->status) {
    /* An error a kernel detected: the first check that failed. */
    int64_t st[2] = {0, 0};
    if (!fzCudaCopyToHost(c->cu, st, c->status, sizeof st))
      return false;
    if (st[0] != 0) {
      if (!fzCudaMemset(c->cu, c->status, 0, sizeof st))
        return false;
      const FzGpuProgram *p = c->prog;
      if (st[0] < 0 || (uint64_t)st[0] > p->numChecks)
        return fzEmitError(ctx, NULL, "cuda: internal error: a kernel "
                                      "reported an unknown error (%lld)",
                           (long long)st[0]);
      const FzGpuCheck *k = &p->checks[st[0] - 1];
      const char *at = strstr(k->message, "%lld");
      if (!at)
        return fzEmitError(ctx, k->loc, "%s", k->message);
      return fzEmitError(ctx, k->loc, "%.*s%lld%s",
                         (int)(at - k->message), k->message,
                         (long long)st[1], at + 4);
    }
  }
  return true;
}

bool fzCudaCallSynchronize(FzCudaCall *c) { return synchronize(c, c->ctx); }

bool fzCudaCallGetOutputs(FzCudaCall *c, FzContext *ctx, size_t *nOut,
                          FzTensor ***outputs) {
  const FzGpuFunction *f = c->f;
  if (!synchronize(c, ctx))
    return false;
  /* fzTensorArrayDestroy frees the array through the context. */
  FzTensor **outs = fzCalloc(ctx, f->numOutputs + 1, sizeof *outs);
  bool ok = outs != NULL; /* else recorded */
  for (size_t k = 0; ok && k < f->numOutputs; ++k) {
    FzType *t = f->argTypes[c->nIn + k];
    outs[k] = fzTensorCreate(ctx, fzShapedTypeGetElementType(t),
                             fzShapedTypeGetRank(t), fzShapedTypeGetShape(t));
    size_t bytes = outs[k] ? fzTensorGetNumBytes(outs[k]) : 0;
    ok = outs[k] && (bytes == 0 || fzCudaCopyToHost(c->cu, outs[k]->data,
                                                    c->dev[c->nIn + k],
                                                    bytes));
  }
  if (!ok) {
    if (outs)
      fzTensorArrayDestroy(ctx, f->numOutputs, outs);
    return false;
  }
  *nOut = f->numOutputs;
  *outputs = outs;
  return true;
}

void fzCudaCallDestroy(FzCudaCall *c) {
  if (!c)
    return;
  fzCudaGraphDestroy(c->cu, c->graph);
  for (size_t i = 0; c->dev && i < c->numRoots; ++i)
    fzCudaFree(c->cu, c->dev[i]);
  for (size_t k = 0; c->args && k < c->f->numKernels; ++k)
    fzFree(c->ctx, c->args[k]);
  fzFree(c->ctx, c->dev);
  fzFree(c->ctx, c->args);
  fzFree(c->ctx, c->fns);
  fzFree(c->ctx, c);
}

bool fzCudaRunFunction(FzCuda *cu, const FzGpuProgram *p, const char *name,
                       size_t nIn, FzTensor *const *inputs, FzContext *ctx,
                       size_t *nOut, FzTensor ***outputs) {
  FzCudaCall *c = fzCudaCallCreate(cu, p, name, nIn, inputs);
  bool ok = c && fzCudaCallLaunch(c) &&
            fzCudaCallGetOutputs(c, ctx, nOut, outputs);
  fzCudaCallDestroy(c);
  return ok;
}

/* runtime/cpu.c - FzCpuExecutable: a module compiled for the host, and
 * calling its functions on tensors or raw buffers.
 *
 * fzCpuExecutableCreate (pipelines/cpu.c) lowers a clone of the module
 * to the loop level and hands it to fzCpuExecutableCreateFromNative, which
 * holds its native code (pipelines/cpu.c compiled it, or found it in the
 * kernel cache) and records each function's
 * signature from its loop-level arguments (buffers: inputs, then
 * loop.num_outputs outputs). The clone is kept for inspection.
 *
 * Ownership: the executable owns the clone, the native code and the
 * function table; it borrows the runtime, which must outlive it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fz/runtime.h"
#include "ir/util.h"
#include "runtime/cpu_internal.h"

struct FzCpuFunction {
  FzCpuExecutable *exe;
  FzStringRef name; /* the clone's symbol name */
  size_t numIn, numOut;
  FzType **argTypes; /* numIn + numOut */
  FzPackedEntryFn entry;
};

struct FzCpuExecutable {
  FzContext *ctx;
  FzCpuRuntime *rt;
  FzOp *loopModule;
  FzNativeModule *native;
  FzCpuFunction *funcs;
  size_t numFuncs;
  unsigned alignment;
  double lowerSeconds, codegenSeconds;
  /* A module found in the kernel cache by its loop IR (pipelines/cpu.c)
   * was compiled from loopModule after the CPU's loop transforms, which
   * were skipped: fzCpuExecutableGetLoopModule applies them on first
   * use, with these options (their strings copied into ctx). */
  bool transformsPending;
  FzCodegenOptions pending;
};

double fzCpuNowSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool is_func(FzOp *op) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == 9 && memcmp(n.data, "func.func", 9) == 0;
}

static int64_t num_outputs(FzOp *func) {
  FzAttr *a = fzOpGetAttr(func, FZ_STR("loop.num_outputs"));
  if (!a)
    a = fzOpGetInherentAttr(func, FZ_STR("loop.num_outputs"));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                   : 0;
}

static bool collect_functions(FzCpuExecutable *e) {
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(e->loopModule, 0));
  size_t n = 0;
  for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op;
       op = fzOpGetNextInBlock(op))
    n += is_func(op) && fzRegionGetFirstBlock(fzOpGetRegion(op, 0));
  e->funcs = fzCalloc(e->ctx, n ? n : 1, sizeof *e->funcs);
  if (!e->funcs)
    return false;
  for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op;
       op = fzOpGetNextInBlock(op)) {
    FzBlock *body = is_func(op) ? fzRegionGetFirstBlock(fzOpGetRegion(op, 0))
                                : NULL;
    if (!body)
      continue;
    FzCpuFunction *f = &e->funcs[e->numFuncs++];
    size_t na = fzBlockGetNumArguments(body);
    int64_t no = num_outputs(op);
    f->exe = e;
    f->name = fzSymbolGetName(op);
    f->numOut = no >= 0 && (size_t)no <= na ? (size_t)no : 0;
    f->numIn = na - f->numOut;
    f->argTypes = fzCalloc(e->ctx, na ? na : 1, sizeof *f->argTypes);
    if (!f->argTypes)
      return false;
    for (size_t i = 0; i < na; ++i)
      f->argTypes[i] = fzValueGetType(fzBlockGetArgument(body, i));
    f->entry = fzNativeModuleLookupPacked(e->native, f->name);
    if (!f->entry)
      return fzEmitError(e->ctx, fzOpGetLoc(op),
                         "cpu runtime: the compiled code lacks @%.*s",
                         (int)f->name.length, f->name.data);
  }
  return true;
}

static bool copy_string(FzContext *ctx, const char **s) {
  if (!*s)
    return true;
  return (*s = fzStrDup(ctx, *s)) != NULL;
}

FzCpuExecutable *fzCpuExecutableCreateFromNative(
    FzCpuRuntime *rt, FzOp *loopModule, FzNativeModule *native,
    const FzCodegenOptions *codegen, const FzCodegenOptions *pending,
    double lowerSeconds, double codegenSeconds) {
  FzContext *ctx = fzOpGetContext(loopModule);
  FzCpuExecutable *e = native ? fzCalloc(ctx, 1, sizeof *e) : NULL;
  if (!e) {
    fzNativeModuleDestroy(native);
    fzOpDestroy(loopModule);
    return NULL;
  }
  e->ctx = ctx;
  e->rt = rt;
  e->alignment = codegen->alignment ? codegen->alignment : 1;
  e->loopModule = loopModule;
  e->native = native;
  e->lowerSeconds = lowerSeconds;
  e->codegenSeconds = codegenSeconds;
  bool ok = true;
  if (pending) {
    e->transformsPending = true;
    e->pending = *pending;
    e->pending.timing = NULL;
    e->pending.cacheDir = NULL;
    ok = copy_string(ctx, &e->pending.triple) &&
         copy_string(ctx, &e->pending.cpu) &&
         copy_string(ctx, &e->pending.features);
  }
  ok = ok && collect_functions(e);
  if (!ok) {
    fzCpuExecutableDestroy(e);
    return NULL;
  }
  return e;
}

void fzCpuExecutableDestroy(FzCpuExecutable *e) {
  if (!e)
    return;
  for (size_t i = 0; i < e->numFuncs; ++i)
    fzFree(e->ctx, e->funcs[i].argTypes);
  fzFree(e->ctx, e->funcs);
  fzNativeModuleDestroy(e->native);
  if (e->loopModule)
    fzOpDestroy(e->loopModule);
  if (e->transformsPending) {
    fzFree(e->ctx, (char *)e->pending.triple);
    fzFree(e->ctx, (char *)e->pending.cpu);
    fzFree(e->ctx, (char *)e->pending.features);
  }
  fzFree(e->ctx, e);
}

FzOp *fzCpuExecutableGetLoopModule(const FzCpuExecutable *e) {
  if (e->transformsPending) {
    /* The module that was compiled: the transforms a cache hit skipped
     * (deterministic: what the first compile ran). The executable is
     * its own; only this lazily made state changes. */
    FzCpuExecutable *m = (FzCpuExecutable *)e;
    m->transformsPending = false;
    if (!fzPrepareLoopModuleForCpu(m->loopModule, &m->pending))
      fzEmitWarning(m->ctx, NULL, "the CPU's loop transforms failed on the "
                                  "loop module kept for inspection");
    fzFree(m->ctx, (char *)m->pending.triple);
    fzFree(m->ctx, (char *)m->pending.cpu);
    fzFree(m->ctx, (char *)m->pending.features);
  }
  return e->loopModule;
}
double fzCpuExecutableGetLowerSeconds(const FzCpuExecutable *e) {
  return e->lowerSeconds;
}
double fzCpuExecutableGetCodegenSeconds(const FzCpuExecutable *e) {
  return e->codegenSeconds;
}

FzCpuFunction *fzCpuExecutableLookup(FzCpuExecutable *e, FzStringRef name) {
  for (size_t i = 0; i < e->numFuncs; ++i)
    if (fzStringRefEqual(e->funcs[i].name, name))
      return &e->funcs[i];
  return NULL;
}

size_t fzCpuFunctionGetNumInputs(const FzCpuFunction *f) { return f->numIn; }
size_t fzCpuFunctionGetNumOutputs(const FzCpuFunction *f) {
  return f->numOut;
}
FzType *fzCpuFunctionGetArgType(const FzCpuFunction *f, size_t i) {
  return i < f->numIn + f->numOut ? f->argTypes[i] : NULL;
}

void fzCpuFunctionCallRaw(FzCpuFunction *f, void *const *buffers) {
  f->entry(buffers, f->exe->rt ? fzCpuRuntimeGetParallel(f->exe->rt) : NULL);
}

bool fzCpuFunctionCall(FzCpuFunction *f, void *const *buffers) {
  fzNativeModuleClearStatus(f->exe->native);
  fzCpuFunctionCallRaw(f, buffers);
  /* An error the code detected (docs/codegen.md, "Run-time errors"). */
  return fzNativeModuleTakeStatus(f->exe->native, f->exe->ctx);
}

static bool matches(const FzTensor *t, FzType *bt) {
  if (t->dtype != fzShapedTypeGetElementType(bt) ||
      t->rank != fzShapedTypeGetRank(bt))
    return false;
  for (size_t d = 0; d < t->rank; ++d)
    if (t->shape[d] != fzShapedTypeGetDim(bt, d))
      return false;
  return true;
}

static void type_text(FzType *t, char *buf, size_t cap) {
  FILE *m = fmemopen(buf, cap, "w");
  if (!m) {
    snprintf(buf, cap, "?");
    return;
  }
  fzTypeDump(t, m);
  fclose(m);
}

bool fzCpuFunctionRun(FzCpuFunction *f, size_t numInputs,
                      FzTensor *const *inputs, size_t *numOutputs,
                      FzTensor ***outputs) {
  FzContext *ctx = f->exe->ctx;
  size_t na = f->numIn + f->numOut;
  *numOutputs = 0;
  *outputs = NULL;
  if (numInputs != f->numIn)
    return fzEmitError(ctx, NULL,
                       "cpu runtime: @%.*s takes %zu inputs, %zu given",
                       (int)f->name.length, f->name.data, f->numIn,
                       numInputs);
  for (size_t i = 0; i < numInputs; ++i)
    if (!matches(inputs[i], f->argTypes[i])) {
      char want[128], got[128];
      FzType *gt = fzTensorGetType(inputs[i]);
      type_text(f->argTypes[i], want, sizeof want);
      if (gt)
        type_text(gt, got, sizeof got);
      else
        snprintf(got, sizeof got, "?");
      return fzEmitError(ctx, NULL,
                         "cpu runtime: input #%zu of @%.*s is %s, but the "
                         "function expects %s",
                         i, (int)f->name.length, f->name.data, got, want);
    }
  FzTensor **outs = fzCalloc(ctx, f->numOut ? f->numOut : 1, sizeof *outs);
  void **bufs = fzCalloc(ctx, na ? na : 1, sizeof *bufs);
  void **copies = fzCalloc(ctx, na ? na : 1, sizeof *copies);
  bool ok = outs && bufs && copies;
  for (size_t i = 0; ok && i < f->numOut; ++i) {
    FzType *bt = f->argTypes[f->numIn + i];
    ok = (outs[i] = fzTensorCreate(ctx, fzShapedTypeGetElementType(bt),
                                   fzShapedTypeGetRank(bt),
                                   fzShapedTypeGetShape(bt))) != NULL;
  }
  size_t align = f->exe->alignment < 16 ? 16 : f->exe->alignment;
  for (size_t i = 0; ok && i < na; ++i) {
    FzTensor *t = i < f->numIn ? inputs[i] : outs[i - f->numIn];
    size_t bytes = fzTensorGetNumBytes(t);
    bufs[i] = t->data;
    if (t->data && (uintptr_t)t->data % align == 0)
      continue;
    /* Misaligned (or empty): work on an aligned copy, from the context
     * (copies[i]; aligned within it: bufs[i]). */
    size_t total;
    if (!fzAddSize(bytes, 2 * align, &total)) {
      fzNoteAllocationFailure(ctx);
      ok = false;
      break;
    }
    if (!(copies[i] = fzMalloc(ctx, total))) { /* recorded */
      ok = false;
      break;
    }
    uintptr_t at = ((uintptr_t)copies[i] + align - 1) / align * align;
    bufs[i] = (void *)at;
    if (bytes && t->data)
      memcpy(bufs[i], t->data, bytes);
  }
  if (ok) {
    ok = fzCpuFunctionCall(f, bufs);
    for (size_t i = f->numIn; i < na; ++i)
      if (copies[i] && outs[i - f->numIn]->data)
        memcpy(outs[i - f->numIn]->data, bufs[i],
               fzTensorGetNumBytes(outs[i - f->numIn]));
  }
  for (size_t i = 0; copies && i < na; ++i)
    fzFree(ctx, copies[i]);
  fzFree(ctx, copies);
  fzFree(ctx, bufs);
  if (!ok) {
    if (outs)
      fzTensorArrayDestroy(ctx, f->numOut, outs);
    return false;
  }
  *numOutputs = f->numOut;
  *outputs = outs;
  return true;
}

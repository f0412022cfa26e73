/* lowering/nvptx/launches.c - host functions to launch plans: the
 * FzGpuFunction of fz/gpu.h that fz/cuda_run.h runs.
 *
 * A host function is a func.func at the loop level whose body holds
 * kernel.launch ops, loop.alloc/loop.dealloc temporaries, constants (and
 * other pure scalar ops on them) and func.return. Its roots are its
 * buffer arguments, then its top-level loop.alloc results; the runtime
 * allocates every root on the device. Each kernel.launch becomes one
 * FzGpuKernel, in program order:
 *  - the grid, block and dynamic shared memory sizes must be constants
 *    at the host level (loop.constant, or pure scalar ops of constants,
 *    folded here with the loop dialect's scalar semantics);
 *  - a buffer argument must be a root (the runtime passes its device
 *    address); a scalar argument must be such a constant (the runtime
 *    passes its bits).
 * Anything else at the host level (a loop nest, a store, a load) has no
 * GPU translation: run lower-loop-to-kernel first. The launches also
 * tell each kernel's emission what holds at every call: the block size
 * (maxntid), whole warps (shuffle member masks), and which buffer
 * parameters never share memory with another argument (noalias).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fz/pass.h" /* fzOpIsEffectFree */
#include "lowering/nvptx/nvptx_internal.h"

static bool is_named(FzOp *op, const char *name) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == strlen(name) && memcmp(n.data, name, n.length) == 0;
}

static bool error_at(FzOp *op, const char *fmt, ...) FZ_PRINTF(2, 3);
static bool error_at(FzOp *op, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = fzDiagBeginV(fzOpGetContext(op), FZ_SEVERITY_ERROR,
                                 fzOpGetLoc(op), fmt, ap);
  va_end(ap);
  fzDiagReport(d);
  return false;
}

/* The value of host scalar v when it is a constant of the host body
 * (depth bounds the ops folded). False otherwise. */
static bool host_constant(FzBlock *body, FzValue *v, FzLoopScalar *out,
                          int depth) {
  FzOp *def = fzValueGetDefiningOp(v);
  FzType *t = fzValueGetType(v);
  if (!def || fzOpGetBlock(def) != body || depth > 64 ||
      fzOpGetNumResults(def) != 1 || fzTypeGetKind(t) == FZ_TYPE_BUFFER ||
      fzTypeGetKind(t) == FZ_TYPE_VECTOR)
    return false;
  FzLoopOpcode c = fzLoopGetOpcode(def);
  if (c == FZ_LOOP_OP_CONSTANT) {
    FzAttr *a = fzOpGetInherentAttr(def, FZ_STR("value"));
    FzLoopScalar s = {0};
    if (!a)
      return false;
    if (fzAttrGetKind(a) == FZ_ATTR_FLOAT)
      s.f = fzFloatAttrGetValue(a);
    else if (fzAttrGetKind(a) == FZ_ATTR_INTEGER)
      s.i = fzIntegerAttrGetValue(a);
    else if (fzAttrGetKind(a) == FZ_ATTR_BOOL)
      s.i = fzBoolAttrGetValue(a);
    else
      return false;
    *out = fzLoopNormalize(t, s);
    return true;
  }
  size_t n = fzOpGetNumOperands(def);
  if (c == FZ_LOOP_OP_UNKNOWN || !fzOpHasTrait(def, FZ_TRAIT_PURE) ||
      fzOpGetNumRegions(def) != 0 || n == 0 || n > 3)
    return false;
  FzLoopScalar in[3];
  for (size_t i = 0; i < n; ++i)
    if (!host_constant(body, fzOpGetOperand(def, i), &in[i], depth + 1))
      return false;
  FzType *ot = fzValueGetType(
      fzOpGetOperand(def, c == FZ_LOOP_OP_SELECT && n == 3 ? 1 : 0));
  int pred = c == FZ_LOOP_OP_CMPF || c == FZ_LOOP_OP_CMPI
                 ? fzLoopCmpGetPredicate(def)
                 : -1;
  return fzLoopEvalScalar(c, pred, t, ot, n, in, out);
}

/* Index of root buffer v among the roots (arguments, then temps), or -1. */
static long root_index(FzBlock *body, const FzPtrVec *temps, FzValue *v) {
  if (fzValueIsBlockArgument(v))
    return fzValueGetParentBlock(v) == body ? (long)fzValueGetIndex(v) : -1;
  for (size_t i = 0; i < temps->len; ++i)
    if (temps->data[i] == v)
      return (long)(fzBlockGetNumArguments(body) + i);
  return -1;
}

static FzNvKernelInfo *find_kernel(FzNvKernelInfo *ks, size_t n,
                                   FzStringRef name) {
  for (size_t i = 0; i < n; ++i)
    if (fzStringRefEqual(fzSymbolGetName(ks[i].func), name))
      return &ks[i];
  return NULL;
}

static int64_t num_outputs(FzOp *func) {
  FzAttr *a = fzOpGetAttr(func, FZ_STR("loop.num_outputs"));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                   : 0;
}

/* Fills K (one launch) from op. */
static bool translate_launch(FzBlock *body, const FzPtrVec *temps, FzOp *op,
                             FzNvKernelInfo *info, FzGpuKernel *K) {
  static const char *const what[FZ_KERNEL_LAUNCH_NUM_CONFIG] = {
      "grid x", "grid y", "grid z", "block x", "block y", "block z",
      "dynamic shared memory"};
  /* CUDA's limits: grid x < 2^31, y and z < 2^16; 1024 threads. */
  static const int64_t maxOf[FZ_KERNEL_LAUNCH_NUM_CONFIG] = {
      0x7fffffff, 65535, 65535, 1024, 1024, 64, 227 * 1024};
  int64_t cfg[FZ_KERNEL_LAUNCH_NUM_CONFIG];
  for (size_t i = 0; i < FZ_KERNEL_LAUNCH_NUM_CONFIG; ++i) {
    FzLoopScalar s;
    if (!host_constant(body, fzOpGetOperand(op, i), &s, 0))
      return error_at(op, "emit-ptx: the %s of this launch is not a "
                          "constant at the host level",
                      what[i]);
    int64_t lo = i == 6 ? 0 : 1;
    if (s.i < lo || s.i > maxOf[i])
      return error_at(op, "emit-ptx: the %s of this launch (%lld) is out "
                          "of CUDA's range",
                      what[i], (long long)s.i);
    cfg[i] = s.i;
  }
  if (cfg[3] * cfg[4] * cfg[5] > 1024)
    return error_at(op, "emit-ptx: this launch has more than 1024 threads "
                        "per block");
  for (int d = 0; d < 3; ++d) {
    K->grid[d] = (unsigned)cfg[d];
    K->block[d] = (unsigned)cfg[3 + d];
  }
  K->sharedBytes = (unsigned)cfg[6];
  size_t n = fzOpGetNumOperands(op) - FZ_KERNEL_LAUNCH_NUM_CONFIG;
  if (n != info->numParams)
    return error_at(op, "emit-ptx: this launch does not match its kernel's "
                        "parameters");
  K->numArgs = n;
  K->args = calloc(n + 1, sizeof *K->args);
  if (!K->args)
    return error_at(op, "emit-ptx: out of memory");
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(op, FZ_KERNEL_LAUNCH_NUM_CONFIG + i);
    FzType *t = fzValueGetType(v);
    FzGpuArg *a = &K->args[i];
    if (fzTypeGetKind(t) == FZ_TYPE_BUFFER) {
      long r = root_index(body, temps, v);
      if (r < 0)
        return error_at(op, "emit-ptx: a buffer argument of a launch must "
                            "be an argument of the function or a top-level "
                            "loop.alloc");
      a->kind = FZ_GPU_ARG_BUFFER;
      a->root = (size_t)r;
      continue;
    }
    FzLoopScalar s;
    if (!host_constant(body, v, &s, 0))
      return error_at(op, "emit-ptx: a scalar argument of a launch must be "
                          "a constant at the host level");
    a->kind = FZ_GPU_ARG_SCALAR;
    a->size = fzTypeGetKind(t) == FZ_TYPE_INDEX
                  ? 8
                  : (unsigned)fzTypeGetStorageSize(t);
    if (fzTypeGetKind(t) == FZ_TYPE_INDEX)
      memcpy(&a->bits, &s.i, sizeof s.i);
    else
      fzLoopWriteElement(t, &a->bits, s); /* little-endian host */
  }
  /* What holds at every launch of the kernel. */
  if (!info->launched) {
    memcpy(info->block, K->block, sizeof info->block);
    info->sameBlock = true;
    info->wholeWarps = true;
  } else if (memcmp(info->block, K->block, sizeof info->block) != 0) {
    info->sameBlock = false;
  }
  info->launched = true;
  if ((K->block[0] * K->block[1] * K->block[2]) % 32 != 0)
    info->wholeWarps = false;
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < n; ++k)
      if (i != k && K->args[i].kind == FZ_GPU_ARG_BUFFER &&
          K->args[k].kind == FZ_GPU_ARG_BUFFER &&
          K->args[i].root == K->args[k].root)
        info->noalias[i] = false;
  return true;
}

static void plan_of(FzNvKernelInfo *info, FzGpuKernel *K, bool *ok) {
  FzAttr *p = fzOpGetAttr(info->func, FZ_STR("fuse.plan"));
  FzAttr *fl = fzOpGetAttr(info->func, FZ_STR("fuse.flops"));
  K->flops = fl && fzAttrGetKind(fl) == FZ_ATTR_INTEGER &&
                     fzIntegerAttrGetValue(fl) > 0
                 ? fzIntegerAttrGetValue(fl)
                 : 0;
  K->name = strdup(info->name);
  if (p && fzAttrGetKind(p) == FZ_ATTR_STRING) {
    FzStringRef s = fzStringAttrGetValue(p);
    K->plan = strndup(s.data, s.length);
    size_t w = 0;
    while (w < s.length && s.data[w] != ':' && s.data[w] != ' ')
      ++w;
    K->mapping = strndup(s.data, w);
  } else {
    K->mapping = strdup("kernel");
  }
  *ok = *ok && K->name && K->mapping && (!p || K->plan);
}

bool fzNvTranslateHost(FzContext *ctx, FzOp *func, FzNvKernelInfo *kernels,
                       size_t numKernels, FzGpuFunction *plan) {
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  size_t numArgs = fzBlockGetNumArguments(body);
  FzStringRef fname = fzSymbolGetName(func);
  int64_t numOut = num_outputs(func);
  if (numOut < 0 || (size_t)numOut > numArgs)
    numOut = 0;
  plan->name = strndup(fname.data, fname.length);
  plan->numArgs = numArgs;
  plan->numOutputs = (size_t)numOut;
  plan->argTypes = calloc(numArgs + 1, sizeof *plan->argTypes);
  if (!plan->name || !plan->argTypes)
    return fzEmitError(ctx, NULL, "emit-ptx: out of memory");
  for (size_t i = 0; i < numArgs; ++i) {
    FzType *t = fzValueGetType(fzBlockGetArgument(body, i));
    plan->argTypes[i] = t;
    if (fzTypeGetKind(t) != FZ_TYPE_BUFFER || !fzShapedTypeHasStaticShape(t))
      return fzEmitError(ctx, fzOpGetLoc(func),
                         "emit-ptx: argument #%zu of @%s is not a statically "
                         "shaped buffer (lower the module to the loop level "
                         "first)",
                         i, plan->name);
  }
  FzPtrVec temps;
  fzPtrVecInit(&temps, ctx);
  size_t numLaunches = 0;
  bool ok = true;
  for (FzOp *op = fzBlockGetFirstOp(body); op && ok;
       op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (fzKernelGetOpcode(op) == FZ_KERNEL_OP_LAUNCH) {
      numLaunches++;
    } else if (c == FZ_LOOP_OP_ALLOC) {
      FzType *t = fzValueGetType(fzOpGetResult(op, 0));
      if (fzOpGetNumOperands(op) != 0 || !fzShapedTypeHasStaticShape(t))
        ok = error_at(op, "emit-ptx: dynamically sized 'loop.alloc' is not "
                          "supported on the GPU");
      else if (!fzPtrVecPush(&temps, fzOpGetResult(op, 0)))
        ok = error_at(op, "emit-ptx: out of memory");
    } else if (c == FZ_LOOP_OP_DEALLOC ||
               (is_named(op, "func.return") &&
                fzOpGetNumOperands(op) == 0) ||
               (fzOpIsEffectFree(op) && fzOpGetNumRegions(op) == 0)) {
      continue;
    } else {
      FzStringRef nm = fzIdentGetString(fzOpGetName(op));
      FzDiagnostic *d = fzDiagBegin(
          ctx, FZ_SEVERITY_ERROR, fzOpGetLoc(op),
          "emit-ptx: '%.*s' at the host level of @%s has no GPU "
          "translation: a host function launches kernels (run "
          "lower-loop-to-kernel first)",
          (int)nm.length, nm.data, plan->name);
      fzDiagReport(d);
      ok = false;
    }
  }
  plan->numTemps = temps.len;
  plan->tempBytes = calloc(temps.len + 1, sizeof *plan->tempBytes);
  plan->kernels = calloc(numLaunches + 1, sizeof *plan->kernels);
  if (ok && (!plan->tempBytes || !plan->kernels))
    ok = fzEmitError(ctx, NULL, "emit-ptx: out of memory");
  for (size_t i = 0; ok && i < temps.len; ++i) {
    FzType *t = fzValueGetType(temps.data[i]);
    int64_t n = fzShapedTypeGetNumElements(t);
    plan->tempBytes[i] =
        (n > 0 ? n : 1) *
        (int64_t)fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
  }
  for (FzOp *op = fzBlockGetFirstOp(body); op && ok;
       op = fzOpGetNextInBlock(op)) {
    if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_LAUNCH)
      continue;
    FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("kernel"));
    FzNvKernelInfo *info =
        callee && fzAttrGetKind(callee) == FZ_ATTR_SYMBOL_REF
            ? find_kernel(kernels, numKernels,
                          fzSymbolRefAttrGetRoot(callee))
            : NULL;
    if (!info) {
      ok = error_at(op, "emit-ptx: this launch names no kernel.func of the "
                        "module");
      break;
    }
    FzGpuKernel *K = &plan->kernels[plan->numKernels++];
    plan_of(info, K, &ok);
    ok = ok && translate_launch(body, &temps, op, info, K);
  }
  fzPtrVecFree(&temps);
  return ok;
}

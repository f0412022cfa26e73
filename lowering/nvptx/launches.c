/* lowering/nvptx/launches.c - host functions to launch plans: the
 * FzGpuFunction of fz/gpu.h that fz/cuda_run.h runs.
 *
 * A host function is a func.func at the loop level whose body holds
 * kernel.launch ops, loop.alloc/loop.dealloc temporaries, constants (and
 * other pure scalar ops on them) and func.return. Its roots are its
 * buffer arguments, then its top-level loop.alloc results, then the
 * top-level loop.constant_buffer ops that launches pass (their data is
 * copied into the plan, FzGpuFunction.constData); the runtime allocates
 * every root on the device and uploads the constants. Each kernel.launch
 * becomes one FzGpuKernel, in program order:
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

/* The roots after the arguments: temporaries, then constants. */
typedef struct Roots {
  FzPtrVec temps;  /* top-level loop.alloc results */
  FzPtrVec consts; /* top-level loop.constant_buffer results */
} Roots;

/* Index of root buffer v among the roots (arguments, temps, constants),
 * or -1. */
static long root_index(FzBlock *body, const Roots *R, FzValue *v) {
  if (fzValueIsBlockArgument(v))
    return fzValueGetParentBlock(v) == body ? (long)fzValueGetIndex(v) : -1;
  size_t base = fzBlockGetNumArguments(body);
  for (size_t i = 0; i < R->temps.len; ++i)
    if (R->temps.data[i] == v)
      return (long)(base + i);
  base += R->temps.len;
  for (size_t i = 0; i < R->consts.len; ++i)
    if (R->consts.data[i] == v)
      return (long)(base + i);
  return -1;
}

/* Whether a kernel.launch passes v (a host value) as an argument. */
static bool passed_to_launch(FzValue *v) {
  for (FzOpOperand *u = fzValueGetFirstUse(v); u;
       u = fzOpOperandGetNextUse(u))
    if (fzKernelGetOpcode(fzOpOperandGetOwner(u)) == FZ_KERNEL_OP_LAUNCH)
      return true;
  return false;
}

/* The bytes of constant buffer op (a splat expanded) into a block of the
 * context's; false after reporting an error. */
static bool constant_data(FzOp *op, void **data, int64_t *bytes) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("value"));
  FzType *t = fzValueGetType(fzOpGetResult(op, 0));
  int64_t n = fzShapedTypeGetNumElements(t);
  size_t esz = fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_DENSE || n < 0 || esz == 0 ||
      (uint64_t)n > SIZE_MAX / esz)
    return error_at(op, "emit-ptx: this constant buffer has no static dense "
                        "value");
  size_t total = (size_t)n * esz;
  const char *src = fzDenseAttrGetData(a);
  bool splat = fzDenseAttrIsSplat(a);
  if (!splat && fzDenseAttrGetNumBytes(a) != total)
    return error_at(op, "emit-ptx: this constant buffer's value has %zu "
                        "bytes, its type %zu",
                    fzDenseAttrGetNumBytes(a), total);
  char *d = fzMalloc(fzOpGetContext(op), total ? total : 1);
  if (!d) /* recorded */
    return false;
  if (splat)
    for (size_t i = 0; i < total; i += esz)
      memcpy(d + i, src, esz);
  else
    memcpy(d, src, total);
  *data = d;
  *bytes = (int64_t)total;
  return true;
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
static bool translate_launch(FzBlock *body, const Roots *roots, FzOp *op,
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
  K->args = fzCalloc(fzOpGetContext(op), n + 1, sizeof *K->args);
  if (!K->args) /* recorded */
    return false;
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(op, FZ_KERNEL_LAUNCH_NUM_CONFIG + i);
    FzType *t = fzValueGetType(v);
    FzGpuArg *a = &K->args[i];
    if (fzTypeGetKind(t) == FZ_TYPE_BUFFER) {
      long r = root_index(body, roots, v);
      if (r < 0)
        return error_at(op, "emit-ptx: a buffer argument of a launch must "
                            "be an argument of the function, a top-level "
                            "loop.alloc or a top-level "
                            "loop.constant_buffer");
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

static void plan_of(FzContext *ctx, FzNvKernelInfo *info, FzGpuKernel *K,
                    bool *ok) {
  FzAttr *p = fzOpGetAttr(info->func, FZ_STR("fuse.plan"));
  FzAttr *fl = fzOpGetAttr(info->func, FZ_STR("fuse.flops"));
  K->flops = fl && fzAttrGetKind(fl) == FZ_ATTR_INTEGER &&
                     fzIntegerAttrGetValue(fl) > 0
                 ? fzIntegerAttrGetValue(fl)
                 : 0;
  K->name = fzStrDup(ctx, info->name);
  if (p && fzAttrGetKind(p) == FZ_ATTR_STRING) {
    FzStringRef s = fzStringAttrGetValue(p);
    K->plan = fzStrDupN(ctx, s.data, s.length);
    size_t w = 0;
    while (w < s.length && s.data[w] != ':' && s.data[w] != ' ')
      ++w;
    K->mapping = fzStrDupN(ctx, s.data, w);
  } else {
    K->mapping = fzStrDup(ctx, "kernel");
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
  plan->name = fzStrDupN(ctx, fname.data, fname.length);
  plan->numArgs = numArgs;
  plan->numOutputs = (size_t)numOut;
  plan->argTypes = fzCalloc(ctx, numArgs + 1, sizeof *plan->argTypes);
  if (!plan->name || !plan->argTypes) /* recorded */
    return false;
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
  Roots R;
  fzPtrVecInit(&R.temps, ctx);
  fzPtrVecInit(&R.consts, ctx);
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
      else if (!fzPtrVecPush(&R.temps, fzOpGetResult(op, 0)))
        ok = false; /* out of memory: recorded */
    } else if (c == FZ_LOOP_OP_CONSTANT_BUFFER &&
               fzOpGetNumResults(op) == 1 &&
               passed_to_launch(fzOpGetResult(op, 0))) {
      if (!fzPtrVecPush(&R.consts, fzOpGetResult(op, 0)))
        ok = false; /* out of memory: recorded */
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
  plan->numTemps = R.temps.len;
  plan->tempBytes = fzCalloc(ctx, R.temps.len + 1, sizeof *plan->tempBytes);
  plan->constBytes = fzCalloc(ctx, R.consts.len + 1, sizeof *plan->constBytes);
  plan->constData = fzCalloc(ctx, R.consts.len + 1, sizeof *plan->constData);
  plan->kernels = fzCalloc(ctx, numLaunches + 1, sizeof *plan->kernels);
  ok = ok && plan->tempBytes && plan->kernels && plan->constBytes &&
       plan->constData;
  for (size_t i = 0; ok && i < R.consts.len; ++i) {
    ok = constant_data(fzValueGetDefiningOp(R.consts.data[i]),
                       &plan->constData[i], &plan->constBytes[i]);
    plan->numConsts = ok ? i + 1 : i; /* freed with the plan */
  }
  for (size_t i = 0; ok && i < R.temps.len; ++i) {
    FzType *t = fzValueGetType(R.temps.data[i]);
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
    plan_of(ctx, info, K, &ok);
    ok = ok && translate_launch(body, &R, op, info, K);
  }
  fzPtrVecFree(&R.temps);
  fzPtrVecFree(&R.consts);
  return ok;
}

/* lowering/loop_to_kernel/outline.c - one top-level nest of a host
 * function -> a kernel.func and the kernel.launch that replaces it.
 *
 * The kernel's parameters are the root buffers the nest uses (directly,
 * or through the setup ops it needs): the function's arguments, then its
 * top-level loop.alloc temporaries, then its top-level
 * loop.constant_buffer ops of more than FZ_LK_INLINE_CONSTANT_BYTES (the
 * weights of a model: the runtime uploads them once into device buffers,
 * so that they never travel as text in the PTX, where a 100 MB model
 * made 450 MB of PTX for the driver to parse), in that order, each with
 * its own type. The setup ops the nest uses (values computed at the top
 * level by constants, views, dims, small constant buffers, loads and
 * scalar arithmetic) are cloned, in host order, at the start of the
 * kernel's entry block: each thread recomputes them (they are cheap, and
 * a kernel then needs no scalar parameters). Then the mapping builds the body, and any nested
 * loop.parallel left in it becomes loop.for nests (one thread runs it).
 * The launch has constant sizes (the plan's) and passes the roots.
 */
#include <stdio.h>
#include <string.h>

#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

/* Ops of the host body that a kernel may recompute. */
static bool is_setup_op(FzOp *op) {
  switch (fzLoopGetOpcode(op)) {
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_FOR:
  case FZ_LOOP_OP_PARALLEL:
  case FZ_LOOP_OP_YIELD:
  case FZ_LOOP_OP_BARRIER:
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_STORE:
  case FZ_LOOP_OP_UNKNOWN:
    return false;
  default:
    return true;
  }
}

typedef struct Needs {
  FzBlock *host;
  FzPtrVec roots;  /* arguments, then top-level loop.alloc results */
  bool *used;      /* per root */
  FzPtrMap setup;  /* setup op -> non-NULL: the kernel recomputes it */
  FzOp *par;
  bool failed;
} Needs;

/* A top-level constant buffer that becomes a kernel parameter (a root)
 * rather than a copy in the kernel: one of more than
 * FZ_LK_INLINE_CONSTANT_BYTES. */
bool fzLkIsConstantRoot(FzOp *op) {
  if (fzLoopGetOpcode(op) != FZ_LOOP_OP_CONSTANT_BUFFER ||
      fzOpGetNumResults(op) != 1)
    return false;
  FzType *t = fzValueGetType(fzOpGetResult(op, 0));
  if (!fzShapedTypeHasStaticShape(t))
    return false;
  int64_t n = fzShapedTypeGetNumElements(t);
  size_t esz = fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
  return n > 0 && esz > 0 &&
         (uint64_t)n > FZ_LK_INLINE_CONSTANT_BYTES / (uint64_t)esz;
}

static long root_index(const Needs *N, FzValue *v) {
  for (size_t i = 0; i < N->roots.len; ++i)
    if (N->roots.data[i] == v)
      return (long)i;
  return -1;
}

static bool need_value(Needs *N, FzValue *v, FzOp *user) {
  long r = root_index(N, v);
  if (r >= 0) {
    N->used[r] = true;
    return true;
  }
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || fzOpGetBlock(def) != N->host)
    return true; /* defined inside the nest */
  if (fzPtrMapContains(&N->setup, def))
    return true;
  if (!is_setup_op(def))
    return fzOpEmitError(user, "lower-loop-to-kernel: this op uses a value "
                               "computed at the top level by an op that a "
                               "kernel cannot recompute");
  if (!fzPtrMapPut(&N->setup, def, def))
    return false;
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    if (!need_value(N, fzOpGetOperand(def, i), def))
      return false;
  return true;
}

static bool inside(FzValue *v, FzOp *par) {
  FzBlock *b = fzValueGetParentBlock(v);
  FzOp *p = b ? fzBlockGetParentOp(b) : NULL;
  return p && fzOpIsAncestor(par, p);
}

static FzWalkResult scan(FzOp *op, void *ud) {
  Needs *N = ud;
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    if (!inside(v, N->par) && !need_value(N, v, op)) {
      N->failed = true;
      return FZ_WALK_INTERRUPT;
    }
  }
  return FZ_WALK_ADVANCE;
}

/* A symbol name not yet used in module: base, else base_2, base_3... */
static bool unique_name(FzOp *module, const char *base, char *out,
                        size_t size) {
  snprintf(out, size, "%s", base);
  for (unsigned k = 2; k < 100000; ++k) {
    if (!fzSymbolTableLookupIn(module, fzStringRefFromCString(out)))
      return true;
    snprintf(out, size, "%s_%u", base, k);
  }
  return false;
}

static FzOp *create_kernel(FzContext *ctx, FzOp *func, const char *name,
                           size_t n, FzType *const *types, const char *plan,
                           int64_t flops, FzLoc *loc) {
  FzType *ft = fzFunctionTypeGet(ctx, n, types, 0, NULL);
  FzBlock *entry = ft ? fzBlockCreate(ctx, n, types, NULL) : NULL;
  if (!entry)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("kernel.func"), loc);
  fzOpStateAddProp(&st, FZ_STR("sym_name"),
                   fzStringAttrGet(ctx, fzStringRefFromCString(name)));
  fzOpStateAddProp(&st, FZ_STR("function_type"), fzTypeAttrGet(ctx, ft));
  fzOpStateAddAttr(&st, FZ_STR("fuse.plan"),
                   fzStringAttrGet(ctx, fzStringRefFromCString(plan)));
  if (flops > 0)
    fzOpStateAddAttr(&st, FZ_STR("fuse.flops"),
                     fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64), flops));
  FzRegion *r = fzOpStateAddRegion(&st);
  if (!r) {
    fzBlockDestroy(entry);
    fzOpStateDispose(&st);
    return NULL;
  }
  fzRegionAppendBlock(r, entry);
  FzBuilder b;
  fzBuilderInit(&b, ctx);
  fzBuilderSetInsertionPointBefore(&b, func);
  return fzBuilderCreate(&b, &st);
}

static bool create_launch(FzContext *ctx, FzOp *par, const char *name,
                          const FzLkPlan *p, size_t n, FzValue *const *args) {
  FzBuilder b;
  fzBuilderInit(&b, ctx);
  fzBuilderSetInsertionPointBefore(&b, par);
  FzLoc *loc = fzOpGetLoc(par);
  FzValue *ops[FZ_KERNEL_LAUNCH_NUM_CONFIG + 64];
  int64_t cfg[FZ_KERNEL_LAUNCH_NUM_CONFIG] = {
      p->grid[0],  p->grid[1],  p->grid[2],     p->block[0],
      p->block[1], p->block[2], p->sharedBytes};
  if (n > 64)
    return fzOpEmitError(par, "lower-loop-to-kernel: this nest uses %zu "
                              "buffers; a kernel takes at most 64",
                         n);
  for (size_t i = 0; i < FZ_KERNEL_LAUNCH_NUM_CONFIG; ++i) {
    /* One constant per distinct size. */
    ops[i] = NULL;
    for (size_t k = 0; k < i; ++k)
      if (cfg[k] == cfg[i])
        ops[i] = ops[k];
    if (!ops[i] && !(ops[i] = fzLoopCreateIndexConstant(&b, loc, cfg[i])))
      return false;
  }
  for (size_t i = 0; i < n; ++i)
    ops[FZ_KERNEL_LAUNCH_NUM_CONFIG + i] = args[i];
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("kernel.launch"), loc);
  fzOpStateAddOperands(&st, FZ_KERNEL_LAUNCH_NUM_CONFIG + n, ops);
  fzOpStateAddProp(&st, FZ_STR("kernel"),
                   fzSymbolRefAttrGet(ctx, fzStringRefFromCString(name), 0,
                                      NULL));
  return fzBuilderCreate(&b, &st) != NULL;
}

bool fzLkOutline(const FzLkNest *nest, const FzLkMapping *m,
                 const FzLkPlan *p, const FzLoopToKernelOptions *o,
                 unsigned index) {
  FzContext *ctx = nest->ctx;
  FzOp *func = nest->func;
  FzOp *module = fzOpGetParentOp(func);
  Needs N;
  memset(&N, 0, sizeof N);
  N.host = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  N.par = nest->par;
  fzPtrVecInit(&N.roots, ctx);
  fzPtrMapInit(&N.setup, ctx);
  bool ok = true;
  for (size_t i = 0; ok && i < fzBlockGetNumArguments(N.host); ++i)
    ok = fzPtrVecPush(&N.roots, fzBlockGetArgument(N.host, i));
  for (FzOp *op = fzBlockGetFirstOp(N.host); ok && op;
       op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_ALLOC)
      ok = fzPtrVecPush(&N.roots, fzOpGetResult(op, 0));
  for (FzOp *op = fzBlockGetFirstOp(N.host); ok && op;
       op = fzOpGetNextInBlock(op))
    if (fzLkIsConstantRoot(op))
      ok = fzPtrVecPush(&N.roots, fzOpGetResult(op, 0));
  N.used = ok ? fzCalloc(ctx, N.roots.len + 1, sizeof *N.used) : NULL;
  ok = N.used != NULL;
  if (ok) {
    fzOpWalk(nest->par, FZ_WALK_PRE_ORDER, scan, &N);
    ok = !N.failed;
  }

  /* The signature: the used roots. */
  FzValue *args[64];
  FzType *types[64];
  size_t n = 0;
  for (size_t i = 0; ok && i < N.roots.len; ++i) {
    if (!N.used[i])
      continue;
    if (n == 64) {
      ok = fzOpEmitError(nest->par, "lower-loop-to-kernel: this nest uses "
                                    "more than 64 buffers");
      break;
    }
    args[n] = N.roots.data[i];
    types[n++] = fzValueGetType(N.roots.data[i]);
  }
  char base[256], name[300];
  FzStringRef fname = fzSymbolGetName(func);
  snprintf(base, sizeof base, "%.*s_k%u", (int)fname.length, fname.data,
           index);
  for (char *c = base; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
          (*c >= '0' && *c <= '9') || *c == '_'))
      *c = '_';
  if (ok && !unique_name(module, base, name, sizeof name))
    ok = fzOpEmitError(nest->par, "lower-loop-to-kernel: no free kernel "
                                  "name for this nest");
  FzOp *kernel = ok ? create_kernel(ctx, func, name, n, types, p->desc,
                                    p->flops, fzOpGetLoc(nest->par))
                    : NULL;
  ok = kernel != NULL;

  FzLkBuild kb;
  memset(&kb, 0, sizeof kb);
  kb.ctx = ctx;
  kb.loc = fzOpGetLoc(nest->par);
  kb.kernel = kernel;
  kb.nest = nest;
  kb.opts = o;
  kb.entry = kernel ? fzRegionGetFirstBlock(fzOpGetRegion(kernel, 0)) : NULL;
  fzLkMapInit(&kb.base, ctx, NULL);
  fzPtrVecInit(&kb.constants, ctx);
  fzBuilderInit(&kb.b, ctx);
  if (ok) {
    fzBuilderSetInsertionPointToEnd(&kb.b, kb.entry);
    for (size_t i = 0; ok && i < n; ++i)
      ok = fzLkMapPut(&kb.base, args[i], fzBlockGetArgument(kb.entry, i));
    for (FzOp *op = fzBlockGetFirstOp(N.host); ok && op != nest->par;
         op = fzOpGetNextInBlock(op))
      if (!fzPtrMapContains(&N.setup, op))
        continue;
      else if (fzLoopGetOpcode(op) == FZ_LOOP_OP_CONSTANT) /* shared */
        ok = fzLkMapPut(
            &kb.base, fzOpGetResult(op, 0),
            fzLkConstAttr(&kb, fzValueGetType(fzOpGetResult(op, 0)),
                          fzOpGetInherentAttr(op, FZ_STR("value"))));
      else
        ok = fzLkClone(&kb, &kb.base, op) != NULL;
    ok = ok && m->build(&kb, p) && !kb.failed;
    if (ok) {
      FzOpState st;
      fzOpStateInit(&st, ctx, FZ_STR("kernel.return"), kb.loc);
      ok = fzBuilderCreate(&kb.b, &st) != NULL;
    }
    ok = ok && fzLkSerializeNested(&kb, kernel);
  }
  ok = ok && create_launch(ctx, nest->par, name, p, n, args);
  if (ok)
    fzOpErase(nest->par);
  else if (kernel)
    fzOpErase(kernel);
  fzLkMapFree(&kb.base);
  fzPtrVecFree(&kb.constants);
  fzPtrVecFree(&N.roots);
  fzPtrMapFree(&N.setup);
  fzFree(ctx, N.used);
  return ok;
}

/* lowering/loop_to_kernel/split_k.c - a contraction nest's k cut into
 * slices at the loop level, with a deterministic two-pass reduction
 * (fzLkSplitNest). The small-M mapping (small_m_split.c) and the
 * tensor-core matmul and conv2d mapping (matmul_split.c) decide when and
 * how much; this file rewrites the nest:
 *
 *   %part = loop.alloc() : buffer<S x (the nest's extents) x f32>
 *   loop.parallel (%d..., %sb) {             the partial sums (the slice
 *     [the index ops the k loop uses]        dim last; small-M's first),
 *     %lo = loop.muli %sb, KS                mapped by the mapping that
 *     %hi = loop.minsi (%lo + KS), K         recognizes the slice form
 *     %acc = loop.for %k = %lo to %hi ... { the nest's k loop }
 *     loop.store %acc, %part[%sb, %d...]
 *   }
 *   loop.parallel (%d...) {                  the nest itself, its k loop
 *     %acc = 0 + %part[0, %d...] + ...       replaced by the sum of the
 *     ... the epilogue ...                   partials in order; the
 *   }                                        generic elementwise mapping
 *                                            takes it (a loop.for over
 *                                            more than 64 slices: the
 *                                            columns mapping)
 *
 * The k loop may be any reduction of the nest's body over 0..K step 1
 * with one accumulator (a conv2d's is the outer c loop around kh, kw).
 * Each output's sum is the same whatever the schedule (slices in a fixed
 * order, each slice's own order fixed by its kernel): no atomics. Both
 * nests are ordinary loop IR: the loop interpreter runs them as they
 * are. The temporary lives in the function's entry block like the
 * other temporaries (the runtime allocates it on the device).
 */
#include <string.h>

#include "fz/pass.h" /* fzOpIsEffectFree */
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

#define MAX_DIMS (FZ_LK_MAX_DIMS + 1)

/* A `loop.parallel` of extents ext[0..n) before anchor, its body ending
 * in the builder's position (a loop.yield is added by the caller). */
static FzOp *parallel_before(FzLkBuild *kb, FzOp *anchor, size_t n,
                             const int64_t *ext) {
  FzValue *ops[3 * MAX_DIMS];
  FzType *types[MAX_DIMS];
  for (size_t d = 0; d < n; ++d) {
    ops[d] = fzLkIndex(kb, 0);
    ops[n + d] = fzLkIndex(kb, ext[d]);
    ops[2 * n + d] = fzLkIndex(kb, 1);
    types[d] = fzIndexTypeGet(kb->ctx);
  }
  if (kb->failed)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("loop.parallel"), kb->loc);
  fzOpStateAddOperands(&st, 3 * n, ops);
  FzRegion *r = fzOpStateAddRegion(&st);
  FzBlock *body = fzBlockCreate(kb->ctx, n, types, NULL);
  if (!r || !body) {
    if (body)
      fzBlockDestroy(body);
    fzOpStateDispose(&st);
    kb->failed = true;
    return NULL;
  }
  fzRegionAppendBlock(r, body);
  fzBuilderSetInsertionPointBefore(&kb->b, anchor);
  FzOp *par = fzBuilderCreate(&kb->b, &st);
  if (!par) {
    kb->failed = true;
    return NULL;
  }
  fzBuilderSetInsertionPointToEnd(&kb->b, body);
  return par;
}

typedef struct Leak {
  FzOp *old;
  bool found;
} Leak;

static FzWalkResult find_leak(FzOp *op, void *ud) {
  Leak *l = ud;
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzBlock *b = fzValueGetParentBlock(fzOpGetOperand(op, i));
    FzOp *owner = b ? fzBlockGetParentOp(b) : NULL;
    if (owner && fzOpIsAncestor(l->old, owner)) {
      l->found = true;
      return FZ_WALK_INTERRUPT;
    }
  }
  return FZ_WALK_ADVANCE;
}

/* Whether clone (of an op of old's nest) still uses a value defined
 * inside old: fzOpClone records the values it maps in a table that may
 * fail to grow, and an unrecorded one keeps the original. */
static bool uses_inside(FzOp *clone, FzOp *old) {
  Leak l = {old, false};
  fzOpWalk(clone, FZ_WALK_PRE_ORDER, find_leak, &l);
  return l.found;
}

static bool yield(FzLkBuild *kb) {
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("loop.yield"), kb->loc);
  return fzBuilderCreate(&kb->b, &st) != NULL;
}

/* Marks in need the ops of the nest's body before the k loop whose
 * results it uses, directly or through each other (a conv2d's index
 * arithmetic). False when out of memory. */
static bool mark_deps(FzOp *kloop, FzPtrMap *need) {
  for (FzOp *op = fzOpGetPrevInBlock(kloop); op; op = fzOpGetPrevInBlock(op)) {
    bool used = false;
    for (size_t r = 0; r < fzOpGetNumResults(op) && !used; ++r)
      for (FzOpOperand *u = fzValueGetFirstUse(fzOpGetResult(op, r));
           u && !used; u = fzOpOperandGetNextUse(u)) {
        FzOp *user = fzOpOperandGetOwner(u);
        used = fzOpIsAncestor(kloop, user) || fzPtrMapContains(need, user);
      }
    if (used && !fzPtrMapPut(need, op, op))
      return false;
  }
  return true;
}

/* Clones op into the builder's position through map; false after a
 * failure or when the clone still uses a value of old's nest. */
static bool clone_into(FzLkBuild *kb, FzOp *op, FzIRMapping *map,
                       FzOp *old, FzOp **out) {
  FzOp *c = fzOpClone(op, map);
  if (!c)
    return false;
  fzBuilderInsert(&kb->b, c);
  *out = c;
  return !uses_inside(c, old);
}

/* The partial sums' nest before par (see above). */
static FzOp *partial_nest(FzLkBuild *kb, FzOp *par, const FzLkSplit *s,
                          FzValue *part) {
  size_t n = fzLoopParallelGetNumDims(par);
  size_t sbDim = s->sliceLast ? n : 0, first = s->sliceLast ? 0 : 1;
  int64_t ext[MAX_DIMS];
  for (size_t d = 0; d < n; ++d) {
    int64_t ub = 0;
    fzLoopValueGetConstantInt(fzOpGetOperand(par, n + d), &ub);
    ext[first + d] = ub;
  }
  ext[sbDim] = s->slices;
  FzOp *p = parallel_before(kb, par, n + 1, ext);
  if (!p)
    return NULL;
  FzBlock *pb = fzLoopGetBody(p), *ob = fzLoopGetBody(par);
  FzValue *sb = fzBlockGetArgument(pb, sbDim);
  FzIRMapping *map = fzIRMappingCreate(kb->ctx);
  FzPtrMap need;
  fzPtrMapInit(&need, kb->ctx);
  bool ok = map && mark_deps(s->kloop, &need);
  for (size_t d = 0; ok && d < n; ++d)
    fzIRMappingMap(map, fzBlockGetArgument(ob, d),
                   fzBlockGetArgument(pb, first + d));
  FzOp *k = NULL;
  for (FzOp *op = fzBlockGetFirstOp(ob); ok && op != s->kloop;
       op = fzOpGetNextInBlock(op))
    if (fzPtrMapContains(&need, op))
      ok = clone_into(kb, op, map, par, &k);
  FzValue *lo = ok ? fzLkMul(kb, sb, fzLkIndex(kb, s->sliceK)) : NULL;
  FzValue *hi = lo ? fzLkBin(kb, "loop.minsi",
                             fzLkAdd(kb, lo, fzLkIndex(kb, s->sliceK)),
                             fzLkIndex(kb, s->K))
                   : NULL;
  ok = hi && clone_into(kb, s->kloop, map, par, &k);
  fzPtrMapFree(&need);
  if (map)
    fzIRMappingDestroy(map);
  if (!ok)
    return kb->failed = true, NULL;
  fzOpSetOperand(k, 0, lo);
  fzOpSetOperand(k, 1, hi);
  FzValue *idx[MAX_DIMS] = {sb};
  for (size_t d = 0; d < n; ++d)
    idx[d + 1] = fzBlockGetArgument(pb, first + d);
  if (!fzLkStore(kb, fzOpGetResult(k, 0), part, n + 1, idx) || !yield(kb))
    return NULL;
  return p;
}

/* Erases the ops of body that nothing uses and that have no effect (the
 * index arithmetic of the replaced k loop), last first. */
static void erase_dead(FzBlock *body) {
  FzOp *prev;
  for (FzOp *op = fzBlockGetLastOp(body); op; op = prev) {
    prev = fzOpGetPrevInBlock(op);
    bool used = false;
    for (size_t r = 0; r < fzOpGetNumResults(op); ++r)
      used = used || fzValueHasUses(fzOpGetResult(op, r));
    if (!used && fzOpGetNumResults(op) && fzOpGetNumRegions(op) == 0 &&
        fzOpIsEffectFree(op))
      fzOpErase(op);
  }
}

/* The nest after the partials: par's, its k loop replaced by their sum
 * in order (init + p[0] + p[1] + ...): straight-line for up to
 * FZ_LK_UNROLLED_SUM slices, so that the elementwise mapping takes it (a
 * thread per 16 bytes of outputs), else a loop.for (the columns
 * mapping). */
#define FZ_LK_UNROLLED_SUM 64
static FzOp *final_nest(FzLkBuild *kb, FzOp *par, const FzLkSplit *s,
                        FzValue *part, FzOp *after) {
  FzOp *f = fzOpClone(par, NULL);
  if (!f)
    return kb->failed = true, NULL;
  fzOpMoveAfter(f, after);
  if (uses_inside(f, par))
    return kb->failed = true, NULL;
  FzBlock *body = fzLoopGetBody(f), *ob = fzLoopGetBody(par);
  FzOp *old = fzBlockGetFirstOp(body);
  for (FzOp *o = fzBlockGetFirstOp(ob); o && o != s->kloop;
       o = fzOpGetNextInBlock(o))
    old = old ? fzOpGetNextInBlock(old) : NULL; /* kloop's clone */
  if (!old || fzLoopGetOpcode(old) != FZ_LOOP_OP_FOR)
    return kb->failed = true, NULL;
  fzBuilderSetInsertionPointBefore(&kb->b, old);
  size_t n = fzLoopParallelGetNumDims(f);
  FzValue *idx[MAX_DIMS];
  for (size_t d = 0; d < n; ++d)
    idx[d + 1] = fzBlockGetArgument(body, d);
  FzValue *sum = fzOpGetOperand(old, 3);
  if (s->slices <= FZ_LK_UNROLLED_SUM) {
    for (int64_t i = 0; i < s->slices && sum; ++i) {
      idx[0] = fzLkIndex(kb, i);
      sum = fzLkBin(kb, "loop.addf", sum, fzLkLoad(kb, part, n + 1, idx));
    }
  } else {
    FzValue *iv, *it;
    FzOp *loop = fzLkForBegin(kb, fzLkIndex(kb, 0), fzLkIndex(kb, s->slices),
                              fzLkIndex(kb, 1), 1, &sum, &iv, &it);
    if (!loop)
      return NULL;
    idx[0] = iv;
    sum = fzLkBin(kb, "loop.addf", it, fzLkLoad(kb, part, n + 1, idx));
    if (!fzLkForEnd(kb, loop, 1, &sum))
      return NULL;
    sum = fzOpGetResult(loop, 0);
  }
  if (!sum)
    return kb->failed = true, NULL;
  fzValueReplaceAllUsesWith(fzOpGetResult(old, 0), sum);
  fzOpErase(old);
  erase_dead(body);
  return f;
}

bool fzLkSplitNest(FzOp *func, FzOp **par, const FzLkSplit *s,
                   const char *what) {
  FzContext *ctx = fzOpGetContext(func);
  size_t n = fzLoopParallelGetNumDims(*par);
  if (n + 1 > MAX_DIMS || s->slices < 2)
    return true; /* nothing to split */
  FzLkBuild kb;
  memset(&kb, 0, sizeof kb);
  kb.ctx = ctx;
  kb.loc = fzOpGetLoc(*par);
  kb.entry = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  fzPtrVecInit(&kb.constants, ctx);
  fzBuilderInit(&kb.b, ctx);
  /* The partials' temporary, first in the function. */
  int64_t shape[MAX_DIMS] = {s->slices};
  for (size_t d = 0; d < n; ++d)
    fzLoopValueGetConstantInt(fzOpGetOperand(*par, n + d), &shape[d + 1]);
  FzType *pt = fzBufferTypeGet(ctx, n + 1, shape, fzF32TypeGet(ctx), NULL, 0,
                               kb.loc);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("loop.alloc"), kb.loc);
  if (pt)
    fzOpStateAddResults(&st, 1, &pt);
  fzBuilderSetInsertionPointToStart(&kb.b, kb.entry);
  FzOp *alloc = pt ? fzBuilderCreate(&kb.b, &st) : NULL;
  if (!pt)
    fzOpStateDispose(&st);
  FzValue *part = alloc ? fzOpGetResult(alloc, 0) : NULL;
  FzOp *p = part ? partial_nest(&kb, *par, s, part) : NULL;
  FzOp *f = p ? final_nest(&kb, *par, s, part, p) : NULL;
  fzPtrVecFree(&kb.constants);
  if (!f)
    return fzOpEmitError(*par, "lower-loop-to-kernel: out of memory while "
                               "splitting %s along k", what);
  fzOpErase(*par);
  *par = p;
  return true;
}

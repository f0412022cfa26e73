/* lowering/loop_to_kernel/small_m_split.c - k cut across blocks for a
 * small-M nest whose columns alone cannot fill the GPU (a weight of
 * 4096 columns along n is 16 blocks of 256 columns: K must be shared
 * by several blocks), with a deterministic two-pass reduction:
 *
 *   %part = loop.alloc() : buffer<SB x (the nest's extents) x f32>
 *   loop.parallel (%sb, %d...) {             the partial sums: the
 *     %lo = loop.muli %sb, KS                small-M mapping takes it
 *     %hi = loop.minsi (%lo + KS), K         (block_id.y = %sb)
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
 * Each output's sum is the same whatever the schedule (slices in a fixed
 * order, each slice's own order fixed by its kernel): no atomics. The
 * second kernel reads SB x M x N f32 (the split is limited so that this
 * stays under an eighth of the weight's bytes: fzSmallMChoose) and
 * costs a launch. Both nests are ordinary loop IR: the loop interpreter
 * runs them as they are.
 */
#include <string.h>

#include "lowering/loop_to_kernel/small_m.h"

/* A `loop.parallel` of extents ext[0..n) before anchor, its body ending
 * in the builder's position (a loop.yield is added by the caller). */
static FzOp *parallel_before(FzLkBuild *kb, FzOp *anchor, size_t n,
                             const int64_t *ext) {
  FzValue *ops[3 * (FZ_SMALL_M_MAX_DIMS + 1)];
  FzType *types[FZ_SMALL_M_MAX_DIMS + 1];
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

/* The partial sums' nest before m's (see above). */
static FzOp *partial_nest(FzLkBuild *kb, const FzSmallMNest *m, int64_t sb,
                          int64_t ks, FzValue *part) {
  size_t n = m->numDims;
  int64_t ext[FZ_SMALL_M_MAX_DIMS + 1] = {sb};
  memcpy(ext + 1, m->extent, n * sizeof *ext);
  FzOp *p = parallel_before(kb, m->par, n + 1, ext);
  if (!p)
    return NULL;
  FzBlock *pb = fzLoopGetBody(p), *ob = fzLoopGetBody(m->par);
  FzValue *lo = fzLkMul(kb, fzBlockGetArgument(pb, 0), fzLkIndex(kb, ks));
  FzValue *hi = fzLkBin(kb, "loop.minsi", fzLkAdd(kb, lo, fzLkIndex(kb, ks)),
                        fzLkIndex(kb, m->K));
  FzIRMapping *map = lo && hi ? fzIRMappingCreate(kb->ctx) : NULL;
  if (!map)
    return kb->failed = true, NULL;
  for (size_t d = 0; d < n; ++d)
    fzIRMappingMap(map, fzBlockGetArgument(ob, d),
                   fzBlockGetArgument(pb, d + 1));
  FzOp *k = fzOpClone(m->kloop, map);
  fzIRMappingDestroy(map);
  if (!k)
    return kb->failed = true, NULL;
  fzBuilderInsert(&kb->b, k);
  if (uses_inside(k, m->par))
    return kb->failed = true, NULL;
  fzOpSetOperand(k, 0, lo);
  fzOpSetOperand(k, 1, hi);
  FzValue *idx[FZ_SMALL_M_MAX_DIMS + 1];
  for (size_t d = 0; d <= n; ++d)
    idx[d] = fzBlockGetArgument(pb, d);
  if (!fzLkStore(kb, fzOpGetResult(k, 0), part, n + 1, idx) || !yield(kb))
    return NULL;
  return p;
}

/* The nest after the partials: m's, its k loop replaced by their sum in
 * order (init + p[0] + p[1] + ...): straight-line for up to
 * FZ_SMALL_M_UNROLLED_SUM slices, so that the elementwise mapping takes
 * it (a thread per 16 bytes of outputs), else a loop.for (the columns
 * mapping). */
#define FZ_SMALL_M_UNROLLED_SUM 64
static FzOp *final_nest(FzLkBuild *kb, const FzSmallMNest *m, int64_t sb,
                        FzValue *part, FzOp *after) {
  FzOp *f = fzOpClone(m->par, NULL);
  if (!f)
    return kb->failed = true, NULL;
  fzOpMoveAfter(f, after);
  if (uses_inside(f, m->par))
    return kb->failed = true, NULL;
  FzBlock *body = fzLoopGetBody(f);
  FzOp *old = NULL;
  for (FzOp *op = fzBlockGetFirstOp(body); op && !old;
       op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR)
      old = op;
  if (!old)
    return kb->failed = true, NULL;
  fzBuilderSetInsertionPointBefore(&kb->b, old);
  FzValue *idx[FZ_SMALL_M_MAX_DIMS + 1];
  for (size_t d = 0; d < m->numDims; ++d)
    idx[d + 1] = fzBlockGetArgument(body, d);
  FzValue *sum = fzOpGetOperand(old, 3);
  if (sb <= FZ_SMALL_M_UNROLLED_SUM) {
    for (int64_t i = 0; i < sb && sum; ++i) {
      idx[0] = fzLkIndex(kb, i);
      sum = fzLkBin(kb, "loop.addf", sum,
                    fzLkLoad(kb, part, m->numDims + 1, idx));
    }
  } else {
    FzValue *iv, *it;
    FzOp *loop = fzLkForBegin(kb, fzLkIndex(kb, 0), fzLkIndex(kb, sb),
                              fzLkIndex(kb, 1), 1, &sum, &iv, &it);
    if (!loop)
      return NULL;
    idx[0] = iv;
    sum = fzLkBin(kb, "loop.addf", it,
                  fzLkLoad(kb, part, m->numDims + 1, idx));
    if (!fzLkForEnd(kb, loop, 1, &sum))
      return NULL;
    sum = fzOpGetResult(loop, 0);
  }
  if (!sum)
    return kb->failed = true, NULL;
  fzValueReplaceAllUsesWith(fzOpGetResult(old, 0), sum);
  fzOpErase(old);
  return f;
}

bool fzSmallMSplit(FzOp *func, FzOp **par, const FzLoopToKernelOptions *o) {
  FzSmallMNest m;
  FzSmallMShape s;
  bool bad; /* a bad small-m-shape: the mapping's plan reports it */
  if (o->noSmallM || !fzSmallMMatch(*par, &m, NULL, 0) || m.dimSplit >= 0 ||
      m.numDims >= FZ_SMALL_M_MAX_DIMS ||
      !fzSmallMChoose(&m, o, &s, &bad, NULL, 0) || s.splitBlocks <= 1)
    return true;
  FzContext *ctx = fzOpGetContext(func);
  FzLkBuild kb;
  memset(&kb, 0, sizeof kb);
  kb.ctx = ctx;
  kb.loc = fzOpGetLoc(*par);
  kb.entry = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  kb.opts = o;
  fzPtrVecInit(&kb.constants, ctx);
  fzBuilderInit(&kb.b, ctx);
  /* The partials' temporary, first in the function. */
  int64_t shape[FZ_SMALL_M_MAX_DIMS + 1] = {s.splitBlocks};
  memcpy(shape + 1, m.extent, m.numDims * sizeof *shape);
  FzType *pt = fzBufferTypeGet(ctx, m.numDims + 1, shape, fzF32TypeGet(ctx),
                               NULL, 0, kb.loc);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("loop.alloc"), kb.loc);
  if (pt)
    fzOpStateAddResults(&st, 1, &pt);
  fzBuilderSetInsertionPointToStart(&kb.b, kb.entry);
  FzOp *alloc = pt ? fzBuilderCreate(&kb.b, &st) : NULL;
  if (!pt)
    fzOpStateDispose(&st);
  FzValue *part = alloc ? fzOpGetResult(alloc, 0) : NULL;
  FzOp *p = part ? partial_nest(&kb, &m, s.splitBlocks, s.sliceK, part)
                 : NULL;
  FzOp *f = p ? final_nest(&kb, &m, s.splitBlocks, part, p) : NULL;
  fzPtrVecFree(&kb.constants);
  if (!f)
    return fzOpEmitError(*par, "lower-loop-to-kernel: out of memory while "
                               "splitting a small-M nest");
  fzOpErase(*par);
  *par = p;
  return true;
}

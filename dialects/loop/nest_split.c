/* dialects/loop/nest_split.c - fzLoopSplitRowNest (nest_rewrite.h): a
 * flat loop.parallel whose reductions depend on some of its dims only
 * becomes a row-level loop.parallel over those dims around an inner one
 * over the others.
 *
 * Each top-level op of the body gets the mask of the nest's dims it
 * depends on (its operands' and, for an op with regions, those of every
 * value its regions use from outside it). The reductions' masks give the
 * rows' dims (the leading ones of a LayerNorm stored transposed, or
 * (n, h, w) of a LayerNorm over the channels of NCHW stored back as
 * NCHW); an op goes to the row level when it depends on those dims at
 * most, reads memory at most (loads, and loop.for reductions of loads
 * and pure ops), and uses no inner-level value. The ops move, in their
 * order, into the new nests; the ivs are replaced by the new nests'
 * ivs. Both new nests keep the dims in their order; a dim of extent 1
 * that is not a row dim goes to the row level too.
 */
#include "dialects/loop/nest_rewrite.h"
#include "fz/pass.h" /* fzOpIsEffectFree */
#include "ir/util.h"

#define MAX_DIMS 16

typedef struct Split {
  FzOp *par;
  FzBlock *body;
  FzPtrMap index; /* top-level op -> its position + 1 */
  uint64_t *mask; /* per top-level op */
  bool *outer;    /* per top-level op: goes to the row level */
} Split;

/* The top-level op of the body that defines v, or NULL (v is an iv, or
 * defined outside the nest, or inside a region). */
static FzOp *top_def(const Split *s, FzValue *v) {
  FzOp *def = fzValueGetDefiningOp(v);
  return def && fzOpGetBlock(def) == s->body ? def : NULL;
}

static uint64_t value_mask(const Split *s, FzValue *v) {
  if (fzValueIsBlockArgument(v) && fzValueGetParentBlock(v) == s->body)
    return (uint64_t)1 << fzValueGetIndex(v);
  FzOp *def = top_def(s, v);
  if (!def)
    return 0;
  size_t i = (size_t)(uintptr_t)fzPtrMapGet(&s->index, def);
  return i ? s->mask[i - 1] : 0;
}

/* Whether the top-level op at position i uses only row-level values. */
static bool uses_outer_only(const Split *s, FzValue *v) {
  FzOp *def = top_def(s, v);
  if (!def)
    return true;
  size_t i = (size_t)(uintptr_t)fzPtrMapGet(&s->index, def);
  return i && s->outer[i - 1];
}

typedef struct Uses {
  const Split *s;
  FzOp *top;
  uint64_t mask;
  bool outerOnly;
  bool readsOnly; /* no op with effects other than reading memory */
} Uses;

static bool reads_only(FzOp *op) {
  FzLoopOpcode c = fzLoopGetOpcode(op);
  return c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_VECTOR_LOAD ||
         c == FZ_LOOP_OP_YIELD || c == FZ_LOOP_OP_FOR ||
         (fzOpGetNumRegions(op) == 0 && fzOpIsEffectFree(op));
}

static FzWalkResult visit(FzOp *op, void *ud) {
  Uses *u = ud;
  u->readsOnly = u->readsOnly && reads_only(op);
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    FzBlock *b = fzValueGetParentBlock(v);
    FzOp *owner = b ? fzBlockGetParentOp(b) : NULL;
    if (op != u->top && owner && fzOpIsAncestor(u->top, owner))
      continue; /* defined inside the top-level op */
    u->mask |= value_mask(u->s, v);
    u->outerOnly = u->outerOnly && uses_outer_only(u->s, v);
  }
  return FZ_WALK_ADVANCE;
}

/* A loop.parallel of the bounds of dims dims[0..k) of par, with an
 * empty body (a yield), created by b. */
static FzOp *make_parallel(FzBuilder *b, FzOp *par, const size_t *dims,
                           size_t k) {
  FzContext *ctx = fzOpGetContext(par);
  size_t n = fzLoopParallelGetNumDims(par);
  FzValue *ops[3 * MAX_DIMS];
  FzType *types[MAX_DIMS];
  for (size_t g = 0; g < 3; ++g)
    for (size_t i = 0; i < k; ++i)
      ops[g * k + i] = fzOpGetOperand(par, g * n + dims[i]);
  for (size_t i = 0; i < k; ++i)
    types[i] = fzIndexTypeGet(ctx);
  FzBlock *body = fzBlockCreate(ctx, k, types, NULL);
  if (!body)
    return NULL;
  FzOpState ys;
  fzOpStateInit(&ys, ctx, FZ_STR("loop.yield"), fzOpGetLoc(par));
  FzBuilder yb;
  fzBuilderInit(&yb, ctx);
  fzBuilderSetInsertionPointToEnd(&yb, body);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("loop.parallel"), fzOpGetLoc(par));
  fzOpStateAddOperands(&st, 3 * k, ops);
  FzRegion *region = fzOpStateAddRegion(&st);
  if (!region || !fzBuilderCreate(&yb, &ys)) {
    fzOpStateDispose(&st);
    fzBlockDestroy(body);
    return NULL;
  }
  fzRegionAppendBlock(region, body);
  return fzBuilderCreate(b, &st);
}

/* Decides the rows' dims (a mask) and which ops go to the row level;
 * false when the split does not apply. */
static bool plan(Split *s, size_t n, uint64_t *rowsMask) {
  uint64_t red = 0;
  bool any = false;
  size_t i = 0;
  FzOp *term = fzBlockGetLastOp(s->body);
  for (FzOp *op = fzBlockGetFirstOp(s->body); op != term;
       op = fzOpGetNextInBlock(op), ++i) {
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_BARRIER)
      return false;
    Uses u = {s, op, 0, true, true};
    fzOpWalk(op, FZ_WALK_PRE_ORDER, visit, &u);
    s->mask[i] = u.mask;
    s->outer[i] = u.readsOnly && u.outerOnly; /* mask checked below */
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR) {
      red |= u.mask;
      any = true;
      if (!u.readsOnly)
        return false;
    }
  }
  uint64_t all = n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
  uint64_t rows = red & all;
  if (!any || rows == 0 || rows == all)
    return false;
  /* Inner dims of extent 1 (a reduction's kept dims, keepdims) gain
   * nothing from a level of their own. */
  bool wide = false;
  for (size_t d = 0; d < n; ++d) {
    int64_t ub;
    if (rows & ((uint64_t)1 << d))
      continue;
    wide = wide ||
           !fzLoopValueGetConstantInt(fzOpGetOperand(s->par, n + d), &ub) ||
           ub > 1;
  }
  if (!wide)
    return false;
  /* The others of extent 1 join the row level: the inner nest keeps only
   * the dims a row's phase spans (a LayerNorm stored as [S, 1, D] has
   * the inner dim D, not (1, D), so it is one row of D for the GPU's
   * rows mapping). */
  for (size_t d = 0; d < n; ++d) {
    int64_t lb, ub;
    if (!(rows & ((uint64_t)1 << d)) &&
        fzLoopValueGetConstantInt(fzOpGetOperand(s->par, d), &lb) &&
        fzLoopValueGetConstantInt(fzOpGetOperand(s->par, n + d), &ub) &&
        lb == 0 && ub == 1)
      rows |= (uint64_t)1 << d;
  }
  /* Row level: within the rows' dims, reading at most, and using only
   * row-level values (positions in order, so the flag of an operand's
   * definition is final when an op is decided). */
  i = 0;
  for (FzOp *op = fzBlockGetFirstOp(s->body); op != term;
       op = fzOpGetNextInBlock(op), ++i) {
    Uses u = {s, op, 0, true, true};
    fzOpWalk(op, FZ_WALK_PRE_ORDER, visit, &u);
    s->outer[i] = u.readsOnly && u.outerOnly && (s->mask[i] & ~rows) == 0;
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR && !s->outer[i])
      return false;
  }
  *rowsMask = rows;
  return true;
}

FzOp *fzLoopSplitRowNest(FzOp *par) {
  if (fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL)
    return par;
  size_t n = fzLoopParallelGetNumDims(par);
  FzBlock *body = fzLoopGetBody(par);
  if (!body || n < 2 || n > MAX_DIMS)
    return par;
  FzContext *ctx = fzOpGetContext(par);
  Split s = {.par = par, .body = body};
  size_t numOps = fzBlockGetNumOps(body);
  fzPtrMapInit(&s.index, ctx);
  s.mask = fzCalloc(ctx, numOps + 1, sizeof *s.mask);
  s.outer = fzCalloc(ctx, numOps + 1, sizeof *s.outer);
  bool ok = s.mask && s.outer, split = false;
  size_t i = 0;
  FzOp *term = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); ok && op != term;
       op = fzOpGetNextInBlock(op))
    ok = fzPtrMapPut(&s.index, op, (void *)(uintptr_t)++i);
  FzOp *outerPar = NULL;
  uint64_t rows = 0;
  size_t dims[MAX_DIMS], at[MAX_DIMS], p = 0;
  if (ok && plan(&s, n, &rows)) {
    /* The rows' dims first, then the others; at[d]: d's place there. */
    for (size_t d = 0; d < n; ++d)
      if (rows & ((uint64_t)1 << d))
        at[d] = p, dims[p++] = d;
    for (size_t d = 0, q = p; d < n; ++d)
      if (!(rows & ((uint64_t)1 << d)))
        at[d] = q, dims[q++] = d;
    FzBuilder b;
    fzBuilderInit(&b, ctx);
    fzBuilderSetInsertionPointBefore(&b, par);
    outerPar = make_parallel(&b, par, dims, p);
    FzOp *innerPar = NULL;
    if (outerPar) {
      FzBlock *ob = fzLoopGetBody(outerPar);
      fzBuilderSetInsertionPointBefore(&b, fzBlockGetLastOp(ob));
      innerPar = make_parallel(&b, par, dims + p, n - p);
    }
    ok = innerPar != NULL;
    if (ok) {
      FzBlock *ib = fzLoopGetBody(innerPar);
      FzOp *innerYield = fzBlockGetLastOp(ib);
      FzOp *next;
      i = 0;
      for (FzOp *op = fzBlockGetFirstOp(body); op != term; op = next, ++i) {
        next = fzOpGetNextInBlock(op);
        fzOpMoveBefore(op, s.outer[i] ? innerPar : innerYield);
      }
      /* The phases' separator, as lower-graph-to-loop puts it between a
       * row's reductions and its inner phase. */
      FzOpState bs;
      fzOpStateInit(&bs, ctx, FZ_STR("loop.barrier"), fzOpGetLoc(par));
      fzBuilderSetInsertionPointBefore(&b, innerPar);
      ok = fzBuilderCreate(&b, &bs) != NULL;
      for (size_t d = 0; d < n; ++d)
        fzValueReplaceAllUsesWith(
            fzBlockGetArgument(body, d),
            at[d] < p ? fzBlockGetArgument(fzLoopGetBody(outerPar), at[d])
                      : fzBlockGetArgument(ib, at[d] - p));
      fzOpErase(par);
      split = true;
    } else if (outerPar) {
      fzOpErase(outerPar);
      outerPar = NULL;
    }
  }
  fzFree(ctx, s.mask);
  fzFree(ctx, s.outer);
  fzPtrMapFree(&s.index);
  if (!ok) {
    fzOpEmitError(par, "splitting a loop nest into rows: out of memory");
    return NULL;
  }
  return split ? outerPar : par;
}

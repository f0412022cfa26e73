/* dialects/loop/builder.c - FzLoopBuilder (dialects/loop/builder.h): the
 * constructors of loop- and kernel-level ops that the code generators
 * share. Every constructor checks its operands and its allocations and
 * reports a failure through the builder's flag; none leaves an op state
 * undisposed (fzOpCreate consumes the state on success and failure).
 */
#include <string.h>

#include "dialects/loop/builder.h"
#include "dialects/loop/index_range.h"

/*===--- Setting up -------------------------------------------------------===*/

void fzBInit(FzLoopBuilder *b, FzContext *ctx, const FzBuilder *ip, FzLoc *loc,
             FzBuilder *consts, bool *failed) {
  b->ctx = ctx;
  b->ip = *ip;
  b->loc = loc;
  b->consts = consts;
  b->failed = failed;
  b->constants = NULL;
  b->place = NULL;
  b->owner = NULL;
  b->index = fzIndexTypeGet(ctx);
  if (!b->index)
    *failed = true;
}

void fzBSetPlacer(FzLoopBuilder *b, FzBPlaceFn place, void *owner) {
  b->place = place;
  b->owner = owner;
}

void fzBSetConstantCache(FzLoopBuilder *b, FzPtrMap *cache) {
  b->constants = cache;
}

static FzLoopBuilder moved(const FzLoopBuilder *b) {
  FzLoopBuilder c = *b;
  fzBuilderInit(&c.ip, b->ctx);
  c.place = NULL;
  c.owner = NULL;
  return c;
}

FzLoopBuilder fzBAt(const FzLoopBuilder *b, const FzBuilder *ip) {
  FzLoopBuilder c = moved(b);
  c.ip = *ip;
  return c;
}

FzLoopBuilder fzBAtEnd(const FzLoopBuilder *b, FzBlock *block) {
  FzLoopBuilder c = moved(b);
  fzBuilderSetInsertionPointToEnd(&c.ip, block);
  return c;
}

FzLoopBuilder fzBAtStart(const FzLoopBuilder *b, FzBlock *block) {
  FzLoopBuilder c = moved(b);
  fzBuilderSetInsertionPointToStart(&c.ip, block);
  return c;
}

FzLoopBuilder fzBBefore(const FzLoopBuilder *b, FzOp *op) {
  FzLoopBuilder c = moved(b);
  fzBuilderSetInsertionPointBefore(&c.ip, op);
  return c;
}

FzLoopBuilder fzBAfter(const FzLoopBuilder *b, FzOp *op) {
  FzLoopBuilder c = moved(b);
  fzBuilderSetInsertionPointAfter(&c.ip, op);
  return c;
}

void *fzBFail(FzLoopBuilder *b) {
  *b->failed = true;
  return NULL;
}

/*===--- Any op -----------------------------------------------------------===*/

FzOp *fzBCreate(FzLoopBuilder *b, FzOpState *st) {
  if (b->place) {
    FzOp *op = b->place(b->owner, st);
    return op ? op : fzBFail(b);
  }
  if (!b->ip.block) { /* a detached op would leak */
    fzOpStateDispose(st);
    return fzBFail(b);
  }
  FzOp *op = fzBuilderCreate(&b->ip, st);
  return op ? op : fzBFail(b);
}

FzOp *fzBOp(FzLoopBuilder *b, const char *name, size_t n, FzValue *const *ops,
            FzType *rt) {
  for (size_t i = 0; i < n; ++i)
    if (!ops[i])
      return fzBFail(b);
  FzOpState st;
  fzOpStateInit(&st, b->ctx, fzStringRefFromCString(name), b->loc);
  fzOpStateAddOperands(&st, n, ops);
  if (rt)
    fzOpStateAddResults(&st, 1, &rt);
  return fzBCreate(b, &st);
}

FzValue *fzBOp1(FzLoopBuilder *b, const char *name, size_t n,
                FzValue *const *ops, FzType *rt) {
  if (!rt) /* a failed type: no op without its result */
    return fzBFail(b);
  FzOp *op = fzBOp(b, name, n, ops, rt);
  return op ? fzOpGetResult(op, 0) : NULL;
}

FzValue *fzBCloneWith(FzLoopBuilder *b, FzOp *op, FzValue *const *ops,
                      FzType *rt) {
  size_t n = fzOpGetNumOperands(op);
  for (size_t i = 0; i < n; ++i)
    if (!ops[i])
      return fzBFail(b);
  if (!rt)
    return fzBFail(b);
  FzOpState st;
  fzOpStateInit(&st, b->ctx, fzIdentGetString(fzOpGetName(op)), fzOpGetLoc(op));
  fzOpStateAddOperands(&st, n, ops);
  FzAttr *props = fzOpGetPropDict(op);
  if (props && fzDictAttrGetSize(props) > 0)
    st.propsDict = props;
  fzOpStateAddResults(&st, 1, &rt);
  FzOp *c = fzBCreate(b, &st);
  return c ? fzOpGetResult(c, 0) : NULL;
}

/*===--- Constants and index arithmetic -----------------------------------===*/

/* The loop.constant of attribute a (of type t): from the cache, else
 * made at consts (else where any op goes) and recorded. */
static FzValue *constant(FzLoopBuilder *b, FzAttr *a, FzType *t) {
  if (!a || !t)
    return fzBFail(b);
  FzValue *c = b->constants ? fzPtrMapGet(b->constants, a) : NULL;
  if (c)
    return c;
  FzOpState st;
  fzOpStateInit(&st, b->ctx, FZ_STR("loop.constant"),
                b->loc ? b->loc : fzUnknownLocGet(b->ctx));
  fzOpStateAddProp(&st, FZ_STR("value"), a);
  fzOpStateAddResults(&st, 1, &t);
  FzOp *op;
  if (!b->consts) {
    op = fzBCreate(b, &st);
  } else if (b->consts->block) {
    op = fzBuilderCreate(b->consts, &st);
  } else { /* a detached op would leak */
    fzOpStateDispose(&st);
    op = NULL;
  }
  if (!op)
    return fzBFail(b);
  c = fzOpGetResult(op, 0);
  /* Without its record the constant is still good: the flag goes up. */
  if (b->constants && !fzPtrMapPut(b->constants, a, c))
    fzBFail(b);
  return c;
}

FzValue *fzBIndex(FzLoopBuilder *b, int64_t v) {
  return constant(b, b->index ? fzIntegerAttrGet(b->ctx, b->index, v) : NULL,
                  b->index);
}

/* At ip unless the constants are cached (then at consts, as indices). */
static FzValue *scalar_constant(FzLoopBuilder *b, FzAttr *a, FzType *t) {
  if (b->constants)
    return constant(b, a, t);
  FzLoopBuilder at = *b;
  at.consts = NULL;
  return constant(&at, a, t);
}

FzValue *fzBConst(FzLoopBuilder *b, FzType *t, double v) {
  if (!t)
    return fzBFail(b);
  FzAttr *a = fzTypeIsFloat(t) ? fzFloatAttrGet(b->ctx, t, v)
                               : fzIntegerAttrGet(b->ctx, t, (int64_t)v);
  return scalar_constant(b, a, t);
}

FzValue *fzBConstFloat(FzLoopBuilder *b, FzType *t, double v) {
  return scalar_constant(b, fzFloatAttrGet(b->ctx, t, v), t);
}

FzValue *fzBConstInt(FzLoopBuilder *b, FzType *t, int64_t v) {
  return scalar_constant(b, t ? fzIntegerAttrGet(b->ctx, t, v) : NULL, t);
}

FzValue *fzBBinary(FzLoopBuilder *b, const char *name, FzValue *a, FzValue *c) {
  FzValue *ops[2] = {a, c};
  return fzBOp1(b, name, 2, ops, a ? fzValueGetType(a) : NULL);
}

FzValue *fzBIndexOp(FzLoopBuilder *b, const char *name, FzValue *a,
                    FzValue *c) {
  FzValue *ops[2] = {a, c};
  return fzBOp1(b, name, 2, ops, b->index);
}

FzValue *fzBAffine(FzLoopBuilder *b, FzValue *a, int64_t s, int64_t t) {
  FzValue *v = a;
  if (s != 1)
    v = fzBIndexOp(b, "loop.muli", v, fzBIndex(b, s));
  if (t != 0)
    v = fzBIndexOp(b, "loop.addi", v, fzBIndex(b, t));
  return v ? v : fzBFail(b);
}

FzValue *fzBUnary(FzLoopBuilder *b, const char *name, FzValue *a) {
  return fzBOp1(b, name, 1, &a, a ? fzValueGetType(a) : NULL);
}

FzValue *fzBFma(FzLoopBuilder *b, FzValue *a, FzValue *c, FzValue *d) {
  FzValue *ops[3] = {a, c, d};
  return fzBOp1(b, "loop.fma", 3, ops, a ? fzValueGetType(a) : NULL);
}

FzValue *fzBCmp(FzLoopBuilder *b, const char *pred, FzValue *a, FzValue *c) {
  FzType *i1 = fzIntegerTypeGet(b->ctx, 1);
  FzAttr *p = fzStringAttrGet(b->ctx, fzStringRefFromCString(pred));
  if (!a || !c || !i1 || !p)
    return fzBFail(b);
  FzValue *ops[2] = {a, c};
  FzOpState st;
  fzOpStateInit(&st, b->ctx,
                fzTypeIsFloat(fzValueGetType(a)) ? FZ_STR("loop.cmpf")
                                                 : FZ_STR("loop.cmpi"),
                b->loc);
  fzOpStateAddOperands(&st, 2, ops);
  fzOpStateAddProp(&st, FZ_STR("predicate"), p);
  fzOpStateAddResults(&st, 1, &i1);
  FzOp *op = fzBCreate(b, &st);
  return op ? fzOpGetResult(op, 0) : NULL;
}

FzValue *fzBSelect(FzLoopBuilder *b, FzValue *cond, FzValue *a, FzValue *c) {
  FzValue *ops[3] = {cond, a, c};
  return fzBOp1(b, "loop.select", 3, ops, a ? fzValueGetType(a) : NULL);
}

FzValue *fzBCast(FzLoopBuilder *b, const char *name, FzValue *a, FzType *to) {
  return fzBOp1(b, name, 1, &a, to);
}

FzValue *fzBConvertF(FzLoopBuilder *b, FzValue *v, FzType *t) {
  if (!v || !t)
    return fzBFail(b);
  FzType *vt = fzValueGetType(v);
  if (vt == t)
    return v;
  bool wider = fzTypeIsFloat(vt) && fzTypeIsFloat(t) &&
               fzTypeGetBitWidth(t) > fzTypeGetBitWidth(vt);
  return fzBCast(b, wider ? "loop.extf" : "loop.truncf", v, t);
}

/*===--- Folding index arithmetic -----------------------------------------===*/

FzValue *fzBAddFold(FzLoopBuilder *b, FzValue *a, FzValue *c) {
  int64_t x, y;
  if (!a || !c)
    return fzBFail(b);
  bool ca = fzLoopValueGetConstantInt(a, &x),
       cc = fzLoopValueGetConstantInt(c, &y);
  if (ca && cc)
    return fzBIndex(b, x + y);
  if (ca && x == 0)
    return c;
  if (cc && y == 0)
    return a;
  return fzBBinary(b, "loop.addi", a, c);
}

FzValue *fzBMulFold(FzLoopBuilder *b, FzValue *a, int64_t k) {
  int64_t x;
  if (!a)
    return fzBFail(b);
  if (k == 0)
    return fzBIndex(b, 0);
  if (k == 1)
    return a;
  if (fzLoopValueGetConstantInt(a, &x))
    return fzBIndex(b, x * k);
  return fzBBinary(b, "loop.muli", a, fzBIndex(b, k));
}

/* Whether a's range lies in [0, k). */
static bool below(FzValue *a, int64_t k) {
  int64_t lo, hi;
  return fzLoopIndexRange(a, &lo, &hi) && lo >= 0 && hi < k;
}

/* Whether v is `loop.muli x, m` (either order) with m a positive
 * multiple of k and x >= 0: then *x and *q = m / k. */
static bool multiple_of(FzValue *v, int64_t k, FzValue **x, int64_t *q) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_MULI)
    return false;
  for (size_t i = 0; i < 2; ++i) {
    int64_t m, lo, hi;
    FzValue *other = fzOpGetOperand(def, 1 - i);
    if (fzLoopValueGetConstantInt(fzOpGetOperand(def, i), &m) && m > 0 &&
        m % k == 0 && fzLoopIndexRange(other, &lo, &hi) && lo >= 0) {
      *x = other;
      *q = m / k;
      return true;
    }
  }
  return false;
}

/* a = x * (q k) + y with x >= 0 and 0 <= y < k (y NULL: a = x * (q k)):
 * a / k = x q and a % k = y. */
static bool split_at(FzValue *a, int64_t k, FzValue **x, int64_t *q,
                     FzValue **y) {
  *y = NULL;
  if (multiple_of(a, k, x, q))
    return true;
  FzOp *def = fzValueGetDefiningOp(a);
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_ADDI)
    return false;
  for (size_t i = 0; i < 2; ++i) {
    FzValue *rest = fzOpGetOperand(def, 1 - i);
    if (multiple_of(fzOpGetOperand(def, i), k, x, q) && below(rest, k)) {
      *y = rest;
      return true;
    }
  }
  return false;
}

FzValue *fzBDivFold(FzLoopBuilder *b, FzValue *a, int64_t k) {
  int64_t x, q;
  FzValue *h, *r;
  if (!a)
    return fzBFail(b);
  if (k == 1)
    return a;
  if (fzLoopValueGetConstantInt(a, &x))
    return k != 0 ? fzBIndex(b, x / k) : fzBFail(b);
  if (k > 1 && below(a, k))
    return fzBIndex(b, 0);
  if (k > 1 && split_at(a, k, &h, &q, &r))
    return fzBMulFold(b, h, q);
  return fzBBinary(b, "loop.divsi", a, fzBIndex(b, k));
}

FzValue *fzBRemFold(FzLoopBuilder *b, FzValue *a, int64_t k) {
  int64_t x, q;
  FzValue *h, *r;
  if (!a)
    return fzBFail(b);
  if (k == 1)
    return fzBIndex(b, 0);
  if (fzLoopValueGetConstantInt(a, &x))
    return k != 0 ? fzBIndex(b, x % k) : fzBFail(b);
  if (k > 1 && below(a, k))
    return a;
  if (k > 1 && split_at(a, k, &h, &q, &r))
    return r ? r : fzBIndex(b, 0);
  return fzBBinary(b, "loop.remsi", a, fzBIndex(b, k));
}

/*===--- Types ------------------------------------------------------------===*/

FzType *fzBVectorType(FzLoopBuilder *b, int64_t lanes, FzType *scalar) {
  FzType *t = scalar ? fzVectorTypeGet(b->ctx, 1, &lanes, scalar, NULL) : NULL;
  return t ? t : fzBFail(b);
}

/*===--- Memory -----------------------------------------------------------===*/

FzValue *fzBLoad(FzLoopBuilder *b, FzValue *buffer, FzValue *const *idx) {
  FzValue *ops[FZ_B_MAX_ACCESS];
  FzType *bt = buffer ? fzValueGetType(buffer) : NULL;
  bool shaped = bt && fzTypeIsShaped(bt);
  size_t rank = shaped ? fzShapedTypeGetRank(bt) : 0;
  if (!shaped || rank + 1 > FZ_B_MAX_ACCESS || (rank && !idx))
    return fzBFail(b);
  ops[0] = buffer;
  memcpy(ops + 1, idx, rank * sizeof *idx);
  return fzBOp1(b, "loop.load", 1 + rank, ops, fzShapedTypeGetElementType(bt));
}

bool fzBStore(FzLoopBuilder *b, FzValue *v, FzValue *buffer,
              FzValue *const *idx) {
  FzValue *ops[1 + FZ_B_MAX_ACCESS];
  FzType *bt = buffer ? fzValueGetType(buffer) : NULL;
  bool shaped = bt && fzTypeIsShaped(bt);
  size_t rank = shaped ? fzShapedTypeGetRank(bt) : 0;
  if (!v || !shaped || rank + 1 > FZ_B_MAX_ACCESS || (rank && !idx))
    return fzBFail(b), false;
  ops[0] = v;
  ops[1] = buffer;
  memcpy(ops + 2, idx, rank * sizeof *idx);
  return fzBOp(b, "loop.store", 2 + rank, ops, NULL) != NULL;
}

bool fzBPrefetch(FzLoopBuilder *b, size_t n, FzValue *const *ops,
                 int64_t ahead) {
  FzValue *pops[FZ_B_MAX_ACCESS];
  if (n < 2 || n > FZ_B_MAX_ACCESS)
    return fzBFail(b), false;
  memcpy(pops, ops, n * sizeof *ops);
  pops[n - 1] = fzBAffine(b, ops[n - 1], 1, ahead);
  return fzBOp(b, "loop.prefetch", n, pops, NULL) != NULL;
}

/*===--- Structure --------------------------------------------------------===*/

FzOp *fzBLoop(FzLoopBuilder *b, FzOpState *st, size_t nargs,
              FzType *const *argTypes, FzLoopBuilder *body) {
  *body = moved(b);
  if (!b->ip.block) {
    fzOpStateDispose(st);
    return fzBFail(b);
  }
  FzBlock *blk = fzBlockCreate(b->ctx, nargs, argTypes, NULL);
  FzRegion *region = blk ? fzOpStateAddRegion(st) : NULL;
  if (!region) {
    if (blk)
      fzBlockDestroy(blk);
    fzOpStateDispose(st);
    return fzBFail(b);
  }
  fzRegionAppendBlock(region, blk);
  FzOpState ys;
  fzOpStateInit(&ys, b->ctx, FZ_STR("loop.yield"), b->loc);
  FzBuilder yb;
  fzBuilderInit(&yb, b->ctx);
  fzBuilderSetInsertionPointToEnd(&yb, blk);
  FzOp *yield = fzBuilderCreate(&yb, &ys);
  if (!yield) {
    fzOpStateDispose(st); /* the block (in st's region) with it */
    return fzBFail(b);
  }
  FzOp *loop = fzBCreate(b, st);
  if (!loop)
    return NULL;
  *body = fzBBefore(b, yield);
  return loop;
}

FzOp *fzBParallel(FzLoopBuilder *b, size_t n, const int64_t *ub, FzValue **ivs,
                  FzLoopBuilder *body) {
  FzValue *ops[3 * FZ_B_MAX_DIMS];
  FzType *types[FZ_B_MAX_DIMS];
  *body = moved(b);
  if (n == 0 || n > FZ_B_MAX_DIMS)
    return fzBFail(b);
  for (size_t d = 0; d < n; ++d) {
    ops[d] = fzBIndex(b, 0);
    ops[n + d] = fzBIndex(b, ub[d]);
    ops[2 * n + d] = fzBIndex(b, 1);
    types[d] = b->index;
  }
  if (*b->failed)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, b->ctx, FZ_STR("loop.parallel"), b->loc);
  fzOpStateAddOperands(&st, 3 * n, ops);
  FzOp *par = fzBLoop(b, &st, n, types, body);
  if (par)
    for (size_t d = 0; d < n; ++d)
      ivs[d] = fzBlockGetArgument(fzLoopGetBody(par), d);
  return par;
}

FzOp *fzBFor(FzLoopBuilder *b, FzValue *lb, FzValue *ub, FzValue *step,
             size_t n, FzValue *const *init, FzType *t, FzLoopBuilder *body) {
  FzValue *ops[3 + FZ_B_MAX_CARRIED];
  FzType *types[1 + FZ_B_MAX_CARRIED];
  *body = moved(b);
  if (n > FZ_B_MAX_CARRIED || !lb || !ub || !step || (n > 0 && !t))
    return fzBFail(b);
  ops[0] = lb;
  ops[1] = ub;
  ops[2] = step;
  types[0] = b->index;
  for (size_t a = 0; a < n; ++a) {
    if (!init[a])
      return fzBFail(b);
    ops[3 + a] = init[a];
    types[1 + a] = t;
  }
  FzOpState st;
  fzOpStateInit(&st, b->ctx, FZ_STR("loop.for"), b->loc);
  fzOpStateAddOperands(&st, 3 + n, ops);
  fzOpStateAddResults(&st, n, types + 1);
  FzOp *loop = fzBLoop(b, &st, 1 + n, types, body);
  /* Without its mark the loop is still whole: returned, the flag set. */
  if (loop && n > 0 &&
      !fzOpSetAttr(loop, FZ_STR("loop.reduction"), fzUnitAttrGet(b->ctx)))
    fzBFail(b);
  return loop;
}

bool fzBSetYield(FzLoopBuilder *b, FzOp *loop, size_t n, FzValue *const *vals) {
  if (!loop)
    return fzBFail(b), false;
  for (size_t i = 0; i < n; ++i)
    if (!vals[i])
      return fzBFail(b), false;
  FzOp *yield = fzBlockGetLastOp(fzLoopGetBody(loop));
  if (!yield || !fzOpSetOperands(yield, n, vals))
    return fzBFail(b), false;
  return true;
}

/*===--- Kernel ops -------------------------------------------------------===*/

FzValue *fzBKernelId(FzLoopBuilder *b, const char *name, const char *dim) {
  FzAttr *d = fzStringAttrGet(b->ctx, fzStringRefFromCString(dim));
  if (!d)
    return fzBFail(b);
  FzOpState st;
  fzOpStateInit(&st, b->ctx, fzStringRefFromCString(name), b->loc);
  fzOpStateAddProp(&st, FZ_STR("dimension"), d);
  fzOpStateAddResults(&st, 1, &b->index);
  FzOp *op = fzBCreate(b, &st);
  return op ? fzOpGetResult(op, 0) : NULL;
}

bool fzBBarrier(FzLoopBuilder *b) {
  FzOpState st;
  fzOpStateInit(&st, b->ctx, FZ_STR("kernel.barrier"), b->loc);
  return fzBCreate(b, &st) != NULL;
}

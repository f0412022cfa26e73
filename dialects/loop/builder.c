/* dialects/loop/builder.c - FzLoopBuilder (dialects/loop/builder.h): the
 * constructors of loop- and kernel-level ops that the code generators
 * share. Every constructor checks its operands and its allocations and
 * reports a failure through the builder's flag; none leaves an op state
 * undisposed (fzOpCreate consumes the state on success and failure).
 */
#include <string.h>

#include "dialects/loop/builder.h"

/*===--- Setting up -------------------------------------------------------===*/

void fzBInit(FzLoopBuilder *b, FzContext *ctx, const FzBuilder *ip, FzLoc *loc,
             FzBuilder *consts, bool *failed) {
  b->ctx = ctx;
  b->ip = *ip;
  b->loc = loc;
  b->consts = consts;
  b->failed = failed;
  b->index = fzIndexTypeGet(ctx);
  if (!b->index)
    *failed = true;
}

static FzLoopBuilder moved(const FzLoopBuilder *b) {
  FzLoopBuilder c = *b;
  fzBuilderInit(&c.ip, b->ctx);
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

FzValue *fzBIndex(FzLoopBuilder *b, int64_t v) {
  FzBuilder *at = b->consts ? b->consts : &b->ip;
  FzValue *c = at->block ? fzLoopCreateIndexConstant(at, b->loc, v) : NULL;
  return c ? c : fzBFail(b);
}

FzValue *fzBConst(FzLoopBuilder *b, FzType *t, double v) {
  FzValue *c =
      t && b->ip.block ? fzLoopCreateConstant(&b->ip, b->loc, t, v) : NULL;
  return c ? c : fzBFail(b);
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

/*===--- Types ------------------------------------------------------------===*/

FzType *fzBVectorType(FzLoopBuilder *b, int64_t lanes, FzType *scalar) {
  FzType *t = scalar ? fzVectorTypeGet(b->ctx, 1, &lanes, scalar, NULL) : NULL;
  return t ? t : fzBFail(b);
}

/*===--- Memory -----------------------------------------------------------===*/

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

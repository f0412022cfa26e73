/* lowering/graph_to_loop_nest.c - building loop nests for
 * lower-graph-to-loop: the path of levels, hoisting each op to the
 * deepest level of its operands, the (value, indices) cache, index
 * arithmetic that folds as it builds, loads, stores and lgEmit, which
 * requests a graph value at an index vector (see the model in
 * graph_to_loop_internal.h).
 *
 * Invariant: a value recorded at path position p was created in the body
 * path[p] had when it was recorded; cache entries remember that body's
 * scope id and are ignored once the path no longer holds it, so a value
 * made inside a closed loop is never used after the loop.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dialects/loop/index_range.h"
#include "lowering/graph_to_loop_internal.h"

void lgNestInit(LgNest *N, LgFunc *F, FzLoc *loc) {
  memset(N, 0, sizeof *N);
  N->F = F;
  N->loc = loc;
  N->path[0].b = F->top;
  N->path[0].scope = 0;
  N->depth = 1;
  N->nextScope = 1;
  fzPtrMapInit(&N->level, F->ctx);
  N->alias = NULL;
}

void lgNestFree(LgNest *N) {
  fzPtrMapFree(&N->level);
  fzFree(N->F->ctx, N->cache);
}

FzValue *lgFail(LgNest *N, FzOp *op, const char *fmt, ...) {
  if (!N->F->failed) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fzOpEmitError(op, "cannot be lowered to loops: %s", msg);
  }
  N->F->failed = true;
  return NULL;
}

/*===--- Levels ---------------------------------------------------------===*/

static void set_level(LgNest *N, FzValue *v, size_t pos) {
  uint64_t key = ((uint64_t)pos << 32 | N->path[pos].scope) + 1;
  /* Losing a level would hoist users above their operand: fail. */
  if (pos > 0 && !fzPtrMapPut(&N->level, v, (void *)(uintptr_t)key))
    N->F->failed = true;
}

size_t lgLevelOf(LgNest *N, FzValue *v) {
  void *k = fzPtrMapGet(&N->level, v);
  if (!k)
    return 0;
  uint64_t key = (uint64_t)(uintptr_t)k - 1;
  size_t pos = (size_t)(key >> 32);
  /* A value of a level that left the path: the deepest position. */
  return pos < N->depth ? pos : N->depth - 1;
}

FzValue *lgCreate(LgNest *N, FzOpState *st, size_t minLevel) {
  size_t lv = minLevel;
  for (size_t i = 0; i < st->numOperands; ++i) {
    size_t l = lgLevelOf(N, st->operands[i]);
    if (l > lv)
      lv = l;
  }
  if (lv >= N->depth)
    lv = N->depth - 1;
  FzOp *op = fzBuilderCreate(&N->path[lv].b, st);
  if (!op) {
    N->F->failed = true;
    return NULL;
  }
  if (fzOpGetNumResults(op) == 0)
    return NULL;
  FzValue *r = fzOpGetResult(op, 0);
  set_level(N, r, lv);
  return r;
}

/*===--- Scalars --------------------------------------------------------===*/

static FzValue *make_const(LgNest *N, FzAttr *a, FzType *t) {
  if (!a)
    return NULL;
  FzValue *c = fzPtrMapGet(&N->F->constants, a);
  if (c)
    return c;
  FzOpState st;
  fzOpStateInit(&st, N->F->ctx, FZ_STR("loop.constant"), N->loc);
  fzOpStateAddProp(&st, FZ_STR("value"), a);
  fzOpStateAddResults(&st, 1, &t);
  c = lgCreate(N, &st, 0);
  if (c && !fzPtrMapPut(&N->F->constants, a, c))
    N->F->failed = true;
  return c;
}

FzValue *lgConstIndex(LgNest *N, int64_t v) {
  FzType *t = fzIndexTypeGet(N->F->ctx);
  return make_const(N, fzIntegerAttrGet(N->F->ctx, t, v), t);
}

FzValue *lgConstF(LgNest *N, FzType *t, double v) {
  return make_const(N, fzFloatAttrGet(N->F->ctx, t, v), t);
}

FzValue *lgConstI(LgNest *N, FzType *t, int64_t v) {
  return make_const(N, fzIntegerAttrGet(N->F->ctx, t, v), t);
}

static FzValue *make_op(LgNest *N, const char *name, size_t n,
                        FzValue *const *ops, FzType *rt, const char *pred) {
  for (size_t i = 0; i < n; ++i)
    if (!ops[i])
      return NULL;
  FzOpState st;
  fzOpStateInit(&st, N->F->ctx, fzStringRefFromCString(name), N->loc);
  fzOpStateAddOperands(&st, n, ops);
  if (pred)
    fzOpStateAddProp(&st, FZ_STR("predicate"),
                     fzStringAttrGet(N->F->ctx, fzStringRefFromCString(pred)));
  fzOpStateAddResults(&st, 1, &rt);
  return lgCreate(N, &st, 0);
}

FzValue *lgBinary(LgNest *N, const char *name, FzValue *a, FzValue *b) {
  FzValue *ops[2] = {a, b};
  return a ? make_op(N, name, 2, ops, fzValueGetType(a), NULL) : NULL;
}

FzValue *lgUnary(LgNest *N, const char *name, FzValue *a) {
  return a ? make_op(N, name, 1, &a, fzValueGetType(a), NULL) : NULL;
}

FzValue *lgFma(LgNest *N, FzValue *a, FzValue *b, FzValue *c) {
  FzValue *ops[3] = {a, b, c};
  return a ? make_op(N, "loop.fma", 3, ops, fzValueGetType(a), NULL) : NULL;
}

FzValue *lgCmp(LgNest *N, const char *pred, FzValue *a, FzValue *b) {
  if (!a)
    return NULL;
  FzValue *ops[2] = {a, b};
  const char *name =
      fzTypeIsFloat(fzValueGetType(a)) ? "loop.cmpf" : "loop.cmpi";
  return make_op(N, name, 2, ops, fzIntegerTypeGet(N->F->ctx, 1), pred);
}

FzValue *lgSelect(LgNest *N, FzValue *c, FzValue *a, FzValue *b) {
  FzValue *ops[3] = {c, a, b};
  return a ? make_op(N, "loop.select", 3, ops, fzValueGetType(a), NULL) : NULL;
}

FzValue *lgCast(LgNest *N, const char *name, FzValue *a, FzType *to) {
  return a ? make_op(N, name, 1, &a, to, NULL) : NULL;
}

/*===--- Index arithmetic -----------------------------------------------===*/

FzValue *lgAddI(LgNest *N, FzValue *a, FzValue *b) {
  int64_t x, y;
  bool ca = fzLoopValueGetConstantInt(a, &x),
       cb = fzLoopValueGetConstantInt(b, &y);
  if (ca && cb)
    return lgConstIndex(N, x + y);
  if (ca && x == 0)
    return b;
  if (cb && y == 0)
    return a;
  return lgBinary(N, "loop.addi", a, b);
}

FzValue *lgMulI(LgNest *N, FzValue *a, int64_t c) {
  int64_t x;
  if (c == 0)
    return lgConstIndex(N, 0);
  if (c == 1)
    return a;
  if (fzLoopValueGetConstantInt(a, &x))
    return lgConstIndex(N, x * c);
  return lgBinary(N, "loop.muli", a, lgConstIndex(N, c));
}

/* Whether a's range lies in [0, c). */
static bool below(FzValue *a, int64_t c) {
  int64_t lo, hi;
  return fzLoopIndexRange(a, &lo, &hi) && lo >= 0 && hi < c;
}

/* Whether v is `loop.muli x, m` (either order) with m a positive
 * multiple of c and x >= 0: then *x and *k = m / c. */
static bool multiple_of(FzValue *v, int64_t c, FzValue **x, int64_t *k) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_MULI)
    return false;
  for (size_t i = 0; i < 2; ++i) {
    int64_t m, lo, hi;
    FzValue *other = fzOpGetOperand(def, 1 - i);
    if (fzLoopValueGetConstantInt(fzOpGetOperand(def, i), &m) && m > 0 &&
        m % c == 0 && fzLoopIndexRange(other, &lo, &hi) && lo >= 0) {
      *x = other;
      *k = m / c;
      return true;
    }
  }
  return false;
}

/* a = x * (k c) + y with x >= 0 and 0 <= y < c (y NULL: a = x * (k c)):
 * a / c = x k and a % c = y. The delinearization of an index that a
 * reshape or transpose in a fused group linearized: without it, a value
 * that depends on the outer dims only seems to depend on all of them. */
static bool split_at(FzValue *a, int64_t c, FzValue **x, int64_t *k,
                     FzValue **y) {
  *y = NULL;
  if (multiple_of(a, c, x, k))
    return true;
  FzOp *def = fzValueGetDefiningOp(a);
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_ADDI)
    return false;
  for (size_t i = 0; i < 2; ++i) {
    FzValue *rest = fzOpGetOperand(def, 1 - i);
    if (multiple_of(fzOpGetOperand(def, i), c, x, k) && below(rest, c)) {
      *y = rest;
      return true;
    }
  }
  return false;
}

FzValue *lgDivI(LgNest *N, FzValue *a, int64_t c) {
  int64_t x, k;
  FzValue *q, *r;
  if (c == 1)
    return a;
  if (fzLoopValueGetConstantInt(a, &x))
    return lgConstIndex(N, x / c);
  if (c > 1 && below(a, c))
    return lgConstIndex(N, 0);
  if (c > 1 && split_at(a, c, &q, &k, &r))
    return lgMulI(N, q, k);
  return lgBinary(N, "loop.divsi", a, lgConstIndex(N, c));
}

FzValue *lgRemI(LgNest *N, FzValue *a, int64_t c) {
  int64_t x, k;
  FzValue *q, *r;
  if (c == 1)
    return lgConstIndex(N, 0);
  if (fzLoopValueGetConstantInt(a, &x))
    return lgConstIndex(N, x % c);
  if (c > 1 && below(a, c))
    return a;
  if (c > 1 && split_at(a, c, &q, &k, &r))
    return r ? r : lgConstIndex(N, 0);
  return lgBinary(N, "loop.remsi", a, lgConstIndex(N, c));
}

/*===--- Loops ----------------------------------------------------------===*/

/* Makes the loop op at path[parent] and pushes its body as a new level. */
static FzOp *open_loop(LgNest *N, size_t parent, FzOpState *st, size_t nargs,
                       FzType *const *argTypes, LgSaved *saved) {
  FzContext *ctx = N->F->ctx;
  if (parent >= N->depth || N->depth >= LG_MAX_LEVELS) {
    fzOpStateDispose(st);
    N->F->failed = true;
    return NULL;
  }
  FzBlock *body = fzBlockCreate(ctx, nargs, argTypes, NULL);
  FzRegion *region = body ? fzOpStateAddRegion(st) : NULL;
  if (!region) {
    if (body)
      fzBlockDestroy(body);
    fzOpStateDispose(st);
    N->F->failed = true;
    return NULL;
  }
  fzRegionAppendBlock(region, body);
  FzOpState ys;
  fzOpStateInit(&ys, ctx, FZ_STR("loop.yield"), N->loc);
  FzBuilder yb;
  fzBuilderInit(&yb, ctx);
  fzBuilderSetInsertionPointToEnd(&yb, body);
  FzOp *yield = fzBuilderCreate(&yb, &ys);
  FzOp *loop = yield ? fzBuilderCreate(&N->path[parent].b, st) : NULL;
  if (!loop) {
    if (!yield)
      fzOpStateDispose(st);
    N->F->failed = true;
    return NULL;
  }
  saved->parent = parent;
  saved->depth = N->depth;
  saved->parentBuilder = N->path[parent].b;
  for (size_t i = parent + 1; i < N->depth; ++i)
    saved->rest[i] = N->path[i];
  fzBuilderSetInsertionPointBefore(&N->path[parent].b, loop);
  N->depth = parent + 1;
  LgLevel *lv = &N->path[N->depth++];
  fzBuilderInit(&lv->b, ctx);
  fzBuilderSetInsertionPointBefore(&lv->b, yield);
  lv->loop = loop;
  lv->scope = N->nextScope++;
  for (size_t i = 0; i < nargs; ++i)
    set_level(N, fzBlockGetArgument(body, i), N->depth - 1);
  return loop;
}

bool lgOpenParallel(LgNest *N, size_t parent, size_t n, const int64_t *ext,
                    FzValue **ivs, LgSaved *saved) {
  FzContext *ctx = N->F->ctx;
  FzValue *ops[3 * LG_MAX_RANK];
  FzType *types[LG_MAX_RANK];
  FzValue *zero = lgConstIndex(N, 0), *one = lgConstIndex(N, 1);
  for (size_t i = 0; i < n; ++i) {
    ops[i] = zero;
    ops[n + i] = lgConstIndex(N, ext[i]);
    ops[2 * n + i] = one;
    types[i] = fzIndexTypeGet(ctx);
  }
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("loop.parallel"), N->loc);
  fzOpStateAddOperands(&st, 3 * n, ops);
  FzOp *loop = open_loop(N, parent, &st, n, types, saved);
  if (!loop)
    return false;
  FzBlock *body = fzLoopGetBody(loop);
  for (size_t i = 0; i < n; ++i)
    ivs[i] = fzBlockGetArgument(body, i);
  return true;
}

bool lgOpenFor(LgNest *N, size_t parent, int64_t ext, size_t n,
               FzValue *const *inits, FzValue **iv, FzValue **iters,
               LgSaved *saved) {
  return lgOpenForTo(N, parent, lgConstIndex(N, ext), n, inits, iv, iters,
                     saved);
}

bool lgOpenForTo(LgNest *N, size_t parent, FzValue *ub, size_t n,
                 FzValue *const *inits, FzValue **iv, FzValue **iters,
                 LgSaved *saved) {
  FzContext *ctx = N->F->ctx;
  FzValue *ops[3 + 8];
  FzType *types[1 + 8];
  if (n > 8 || !ub)
    return false;
  ops[0] = lgConstIndex(N, 0);
  ops[1] = ub;
  ops[2] = lgConstIndex(N, 1);
  types[0] = fzIndexTypeGet(ctx);
  for (size_t i = 0; i < n; ++i) {
    ops[3 + i] = inits[i];
    types[1 + i] = fzValueGetType(inits[i]);
  }
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("loop.for"), N->loc);
  fzOpStateAddOperands(&st, 3 + n, ops);
  fzOpStateAddResults(&st, n, types + 1);
  FzOp *loop = open_loop(N, parent, &st, 1 + n, types, saved);
  if (!loop)
    return false;
  FzBlock *body = fzLoopGetBody(loop);
  *iv = fzBlockGetArgument(body, 0);
  for (size_t i = 0; i < n; ++i) {
    iters[i] = fzBlockGetArgument(body, 1 + i);
    set_level(N, fzOpGetResult(loop, i), parent);
  }
  return true;
}

FzOp *lgClose(LgNest *N, size_t n, FzValue *const *yields,
              const LgSaved *saved) {
  LgLevel *top = &N->path[N->depth - 1];
  FzOp *loop = top->loop;
  FzOp *yield = fzBlockGetLastOp(fzLoopGetBody(loop));
  if (n && !fzOpSetOperands(yield, n, yields))
    N->F->failed = true;
  /* Results of the loop were recorded at the parent's position already. */
  N->path[saved->parent].b = saved->parentBuilder;
  for (size_t i = saved->parent + 1; i < saved->depth; ++i)
    N->path[i] = saved->rest[i];
  N->depth = saved->depth;
  return loop;
}

/*===--- Memory ---------------------------------------------------------===*/

FzType *lgComputeType(FzContext *ctx, FzType *elt) {
  FzTypeKind k = fzTypeGetKind(elt);
  return k == FZ_TYPE_F16 || k == FZ_TYPE_BF16 ? fzF32TypeGet(ctx) : elt;
}

FzValue *lgLoad(LgNest *N, FzValue *buffer, FzValue *const *idx) {
  FzType *bt = fzValueGetType(buffer);
  size_t rank = fzShapedTypeGetRank(bt);
  FzValue *ops[1 + LG_MAX_RANK];
  ops[0] = buffer;
  for (size_t i = 0; i < rank; ++i)
    if (!(ops[1 + i] = idx[i]))
      return NULL;
  FzType *elt = fzShapedTypeGetElementType(bt);
  FzOpState st;
  fzOpStateInit(&st, N->F->ctx, FZ_STR("loop.load"), N->loc);
  fzOpStateAddOperands(&st, 1 + rank, ops);
  fzOpStateAddResults(&st, 1, &elt);
  FzValue *v = lgCreate(N, &st, 0);
  FzType *ct = lgComputeType(N->F->ctx, elt);
  return ct != elt ? lgCast(N, "loop.extf", v, ct) : v;
}

bool lgStore(LgNest *N, FzValue *v, FzValue *buffer, FzValue *const *idx) {
  if (!v)
    return false;
  FzType *bt = fzValueGetType(buffer);
  FzType *elt = fzShapedTypeGetElementType(bt);
  if (fzValueGetType(v) != elt)
    v = lgCast(N, "loop.truncf", v, elt);
  size_t rank = fzShapedTypeGetRank(bt);
  FzValue *ops[2 + LG_MAX_RANK];
  ops[0] = v;
  ops[1] = buffer;
  for (size_t i = 0; i < rank; ++i)
    if (!(ops[2 + i] = idx[i]))
      return false;
  FzOpState st;
  fzOpStateInit(&st, N->F->ctx, FZ_STR("loop.store"), N->loc);
  fzOpStateAddOperands(&st, 2 + rank, ops);
  /* A store goes with the innermost level it depends on. */
  lgCreate(N, &st, 0);
  return !N->F->failed;
}

/*===--- Tensor shapes --------------------------------------------------===*/

size_t lgRank(FzValue *gv) {
  return fzShapedTypeGetRank(fzValueGetType(gv));
}

int64_t lgDim(FzValue *gv, size_t i) {
  return fzShapedTypeGetDim(fzValueGetType(gv), i);
}

FzType *lgElt(FzValue *gv) {
  return fzShapedTypeGetElementType(fzValueGetType(gv));
}

/*===--- The cache and lgEmit -------------------------------------------===*/

static LgCacheEntry *cache_find(LgNest *N, FzValue *gv, size_t rank,
                                FzValue *const *idx) {
  for (size_t i = N->ncache; i-- > 0;) {
    LgCacheEntry *e = &N->cache[i];
    if (e->value != gv || e->rank != rank)
      continue;
    if (e->level >= N->depth || N->path[e->level].scope != e->scope)
      continue;
    if (rank && memcmp(e->idx, idx, rank * sizeof *idx) != 0)
      continue;
    return e;
  }
  return NULL;
}

static void cache_put(LgNest *N, FzValue *gv, size_t rank,
                      FzValue *const *idx, FzValue *result) {
  if (N->ncache == N->capCache) {
    size_t cap = N->capCache ? N->capCache * 2 : 64;
    LgCacheEntry *c = fzRealloc(N->F->ctx, N->cache, cap * sizeof *c);
    if (!c)
      return;
    N->cache = c;
    N->capCache = cap;
  }
  LgCacheEntry *e = &N->cache[N->ncache++];
  e->value = gv;
  e->rank = rank;
  if (rank)
    memcpy(e->idx, idx, rank * sizeof *idx);
  e->result = result;
  e->level = lgLevelOf(N, result);
  e->scope = N->path[e->level].scope;
}

void lgCachePut(LgNest *N, FzValue *gv, FzValue *const *idx,
                FzValue *result) {
  if (result)
    cache_put(N, gv, lgRank(gv), idx, result);
}

static FzValue *splat_scalar(LgNest *N, FzAttr *dense, FzType *elt) {
  FzType *ct = lgComputeType(N->F->ctx, elt);
  if (fzTypeIsFloat(ct))
    return lgConstF(N, ct, fzDenseAttrGetFloat(dense, 0));
  int64_t v = fzDenseAttrGetInt(dense, 0);
  if (fzTypeGetBitWidth(ct) == 1)
    v &= 1;
  return lgConstI(N, ct, v);
}

/* Storage for a graph.constant: a splat, or a constant buffer made once
 * at the function level. */
static LgStorage *constant_storage(LgNest *N, FzOp *op, FzValue *gv) {
  LgFunc *F = N->F;
  FzAttr *value = fzOpGetInherentAttr(op, FZ_STR("value"));
  if (!value || fzAttrGetKind(value) != FZ_ATTR_DENSE)
    return lgFail(N, op, "its value is not a dense attribute"), NULL;
  LgStorage *s = fzArenaAlloc(&F->arena, sizeof *s);
  if (!s)
    return NULL;
  memset(s, 0, sizeof *s);
  if (fzDenseAttrIsSplat(value)) {
    s->splat = value;
  } else {
    FzType *t = fzValueGetType(gv);
    FzType *bt = fzBufferTypeGet(F->ctx, fzShapedTypeGetRank(t),
                                 fzShapedTypeGetShape(t),
                                 fzShapedTypeGetElementType(t), NULL, 0, NULL);
    FzOpState st;
    fzOpStateInit(&st, F->ctx, FZ_STR("loop.constant_buffer"),
                  fzOpGetLoc(op));
    fzOpStateAddProp(&st, FZ_STR("value"), value);
    fzOpStateAddResults(&st, 1, &bt);
    /* Before everything lowered so far: dominates every later use. */
    FzBuilder b;
    fzBuilderInit(&b, F->ctx);
    FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(F->func, 0));
    fzBuilderSetInsertionPointToStart(&b, entry);
    FzOp *cb = bt ? fzBuilderCreate(&b, &st) : NULL;
    if (!cb) {
      if (!bt)
        fzOpStateDispose(&st);
      F->failed = true;
      return NULL;
    }
    s->buffer = fzOpGetResult(cb, 0);
  }
  if (!fzPtrMapPut(&F->storage, gv, s))
    return NULL;
  return s;
}

FzValue *lgEmit(LgNest *N, FzValue *gv, FzValue *const *idx) {
  if (!gv || N->F->failed)
    return NULL;
  FzValue *outer;
  while (N->alias && (outer = fzPtrMapGet(N->alias, gv)))
    gv = outer;
  size_t rank = lgRank(gv);
  for (size_t i = 0; i < rank; ++i)
    if (!idx[i])
      return NULL;
  LgCacheEntry *e = cache_find(N, gv, rank, idx);
  if (e)
    return e->result;
  FzValue *r = NULL;
  LgStorage *s = fzPtrMapGet(&N->F->storage, gv);
  FzOp *def = fzValueGetDefiningOp(gv);
  if (!s && def &&
      fzStringRefEqual(fzIdentGetString(fzOpGetName(def)),
                       FZ_STR("graph.constant")))
    s = constant_storage(N, def, gv);
  if (s) {
    r = s->splat ? splat_scalar(N, s->splat, lgElt(gv))
                 : lgLoad(N, s->buffer, idx);
  } else if (def) {
    LgEmitFn fn = lgFindEmitter(def);
    if (!fn) {
      FzStringRef name = fzIdentGetString(fzOpGetName(def));
      return lgFail(N, def, "'%.*s' is not supported by "
                            "lower-graph-to-loop", (int)name.length,
                    name.data);
    }
    N->emitResult = fzValueGetIndex(gv);
    r = fn(N, def, idx);
  } else {
    return lgFail(N, fzBlockGetParentOp(fzValueGetParentBlock(gv)),
                  "a block argument has no buffer");
  }
  if (r)
    cache_put(N, gv, rank, idx, r);
  return r;
}

/*===--- Attributes -----------------------------------------------------===*/

int64_t lgAttrInt(FzOp *op, const char *name, int64_t dflt) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                  : dflt;
}

double lgAttrFloat(FzOp *op, const char *name, double dflt) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  if (a && fzAttrGetKind(a) == FZ_ATTR_FLOAT)
    return fzFloatAttrGetValue(a);
  if (a && fzAttrGetKind(a) == FZ_ATTR_INTEGER)
    return (double)fzIntegerAttrGetValue(a);
  return dflt;
}

bool lgAttrBool(FzOp *op, const char *name, bool dflt) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  if (a && fzAttrGetKind(a) == FZ_ATTR_BOOL)
    return fzBoolAttrGetValue(a);
  if (a && fzAttrGetKind(a) == FZ_ATTR_UNIT)
    return true;
  return dflt;
}

int lgAttrInts(FzOp *op, const char *name, int64_t *out, size_t max) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  if (!a)
    return -1;
  if (fzAttrGetKind(a) == FZ_ATTR_DENSE_ARRAY) {
    size_t n = fzDenseArrayAttrGetSize(a);
    for (size_t i = 0; i < n && i < max; ++i)
      out[i] = fzDenseArrayAttrGetInt(a, i);
    return (int)(n < max ? n : max);
  }
  if (fzAttrGetKind(a) == FZ_ATTR_ARRAY) {
    size_t n = fzArrayAttrGetSize(a);
    for (size_t i = 0; i < n && i < max; ++i) {
      FzAttr *e = fzArrayAttrGetElement(a, i);
      out[i] = fzAttrGetKind(e) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(e)
                                                   : 0;
    }
    return (int)(n < max ? n : max);
  }
  return -1;
}

bool lgAttrStringIs(FzOp *op, const char *name, const char *value) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  return a && fzAttrGetKind(a) == FZ_ATTR_STRING &&
         fzStringRefEqual(fzStringAttrGetValue(a),
                          fzStringRefFromCString(value));
}

/* lowering/graph_to_loop_nest.c - building loop nests for
 * lower-graph-to-loop: the path of levels, hoisting each op to the
 * deepest level of its operands (the placer of the nest's FzLoopBuilder,
 * dialects/loop/builder.h), the (value, indices) cache and lgEmit, which
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

#include "lowering/graph_to_loop_internal.h"

static FzOp *place(void *owner, FzOpState *st);

void lgNestInit(LgNest *N, LgFunc *F, FzLoc *loc) {
  memset(N, 0, sizeof *N);
  N->F = F;
  N->path[0].b = F->top;
  N->path[0].scope = 0;
  N->depth = 1;
  N->nextScope = 1;
  fzPtrMapInit(&N->level, F->ctx);
  N->alias = NULL;
  /* Ops at the deepest level of their operands; constants once per
   * function, at level 0 (before the op being lowered). */
  fzBInit(&N->b, F->ctx, &F->top, loc, &N->path[0].b, &F->failed);
  fzBSetPlacer(&N->b, place, N);
  fzBSetConstantCache(&N->b, &F->constants);
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

/* The placer of N->b: st's op at the deepest level of its operands. */
static FzOp *place(void *owner, FzOpState *st) {
  LgNest *N = owner;
  size_t lv = 0;
  for (size_t i = 0; i < st->numOperands; ++i) {
    size_t l = lgLevelOf(N, st->operands[i]);
    if (l > lv)
      lv = l;
  }
  if (lv >= N->depth)
    lv = N->depth - 1;
  FzOp *op = fzBuilderCreate(&N->path[lv].b, st);
  if (op && fzOpGetNumResults(op) > 0)
    set_level(N, fzOpGetResult(op, 0), lv);
  return op;
}

/*===--- Loops ----------------------------------------------------------===*/

/* Whether a loop can open under path[parent]. */
static bool can_open(LgNest *N, size_t parent) {
  if (parent < N->depth && N->depth < LG_MAX_LEVELS)
    return true;
  N->F->failed = true;
  return false;
}

/* Pushes the body of loop (made at path[parent]; body builds in it) as
 * a new level. */
static void push_level(LgNest *N, size_t parent, FzOp *loop,
                       const FzLoopBuilder *body, LgSaved *saved) {
  saved->parent = parent;
  saved->depth = N->depth;
  saved->parentBuilder = N->path[parent].b;
  for (size_t i = parent + 1; i < N->depth; ++i)
    saved->rest[i] = N->path[i];
  fzBuilderSetInsertionPointBefore(&N->path[parent].b, loop);
  N->depth = parent + 1;
  LgLevel *lv = &N->path[N->depth++];
  lv->b = body->ip;
  lv->loop = loop;
  lv->scope = N->nextScope++;
  FzBlock *blk = fzLoopGetBody(loop);
  for (size_t i = 0; i < fzBlockGetNumArguments(blk); ++i)
    set_level(N, fzBlockGetArgument(blk, i), N->depth - 1);
}

bool lgOpenParallel(LgNest *N, size_t parent, size_t n, const int64_t *ext,
                    FzValue **ivs, LgSaved *saved) {
  /* 0 and 1 before the bounds (the order of the constants made). */
  fzBIndex(&N->b, 0);
  fzBIndex(&N->b, 1);
  if (!can_open(N, parent))
    return false;
  FzLoopBuilder at = fzBAt(&N->b, &N->path[parent].b), body;
  FzOp *loop = fzBParallel(&at, n, ext, ivs, &body);
  if (!loop)
    return false;
  push_level(N, parent, loop, &body, saved);
  return true;
}

bool lgOpenFor(LgNest *N, size_t parent, int64_t ext, size_t n,
               FzValue *const *inits, FzValue **iv, FzValue **iters,
               LgSaved *saved) {
  return lgOpenForTo(N, parent, fzBIndex(&N->b, ext), n, inits, iv, iters,
                     saved);
}

bool lgOpenForTo(LgNest *N, size_t parent, FzValue *ub, size_t n,
                 FzValue *const *inits, FzValue **iv, FzValue **iters,
                 LgSaved *saved) {
  FzValue *ops[3 + 8];
  FzType *types[1 + 8];
  if (n > 8 || !ub)
    return false;
  ops[0] = fzBIndex(&N->b, 0);
  ops[1] = ub;
  ops[2] = fzBIndex(&N->b, 1);
  types[0] = N->b.index;
  for (size_t i = 0; i < n; ++i) {
    ops[3 + i] = inits[i];
    types[1 + i] = fzValueGetType(inits[i]);
  }
  FzOpState st;
  fzOpStateInit(&st, N->F->ctx, FZ_STR("loop.for"), N->b.loc);
  fzOpStateAddOperands(&st, 3 + n, ops);
  fzOpStateAddResults(&st, n, types + 1);
  if (!can_open(N, parent)) {
    fzOpStateDispose(&st);
    return false;
  }
  FzLoopBuilder at = fzBAt(&N->b, &N->path[parent].b), body;
  FzOp *loop = fzBLoop(&at, &st, 1 + n, types, &body);
  if (!loop)
    return false;
  push_level(N, parent, loop, &body, saved);
  FzBlock *blk = fzLoopGetBody(loop);
  *iv = fzBlockGetArgument(blk, 0);
  for (size_t i = 0; i < n; ++i) {
    iters[i] = fzBlockGetArgument(blk, 1 + i);
    set_level(N, fzOpGetResult(loop, i), parent);
  }
  return true;
}

FzOp *lgClose(LgNest *N, size_t n, FzValue *const *yields,
              const LgSaved *saved) {
  FzOp *loop = N->path[N->depth - 1].loop;
  if (n)
    fzBSetYield(&N->b, loop, n, yields);
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
    return fzBConstFloat(&N->b, ct, fzDenseAttrGetFloat(dense, 0));
  int64_t v = fzDenseAttrGetInt(dense, 0);
  if (fzTypeGetBitWidth(ct) == 1)
    v &= 1;
  return fzBConstInt(&N->b, ct, v);
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
    FzLoopBuilder top = lgFuncBuilder(F, &F->top, fzOpGetLoc(op));
    FzLoopBuilder at =
        fzBAtStart(&top, fzRegionGetFirstBlock(fzOpGetRegion(F->func, 0)));
    FzOp *cb = bt ? fzBCreate(&at, &st) : NULL;
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
  if (s && s->splat) {
    r = splat_scalar(N, s->splat, lgElt(gv));
  } else if (s) { /* in the compute type: 16-bit floats extended */
    FzType *elt = fzShapedTypeGetElementType(fzValueGetType(s->buffer));
    r = fzBConvertF(&N->b, fzBLoad(&N->b, s->buffer, idx),
                    lgComputeType(N->F->ctx, elt));
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

/* lowering/loop_to_kernel/build.c - helpers that build kernel IR:
 * constants (made once per kernel, at the start of its entry block),
 * arithmetic, thread ids, shared memory, structured loops and `if`s
 * (a loop.for of at most one iteration), cloning host ops through value
 * maps, loop bodies unrolled in phases, and nested loop.parallel nests
 * turned into loop.for nests.
 *
 * Every helper returns NULL (or false) after an error, with kb->failed
 * set; the callers stop at the first one.
 */
#include <stdlib.h>
#include <string.h>

#include "fz/pass.h" /* fzOpIsEffectFree */
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

/*===--- Value maps -------------------------------------------------------===*/

void fzLkMapInit(FzLkMap *m, FzContext *ctx, const FzLkMap *parent) {
  fzPtrMapInit(&m->own, ctx);
  m->parent = parent;
}

void fzLkMapFree(FzLkMap *m) { fzPtrMapFree(&m->own); }

bool fzLkMapPut(FzLkMap *m, FzValue *from, FzValue *to) {
  return fzPtrMapPut(&m->own, from, to);
}

FzValue *fzLkMapGet(const FzLkMap *m, FzValue *from) {
  for (; m; m = m->parent) {
    FzValue *v = fzPtrMapGet(&m->own, from);
    if (v)
      return v;
  }
  return NULL;
}

/*===--- Ops --------------------------------------------------------------===*/

static FzValue *fail(FzLkBuild *kb) {
  kb->failed = true;
  return NULL;
}

static FzOp *create(FzLkBuild *kb, FzBuilder *b, FzOpState *st) {
  FzOp *op = kb->failed ? NULL : fzBuilderCreate(b, st);
  if (!op) {
    if (kb->failed)
      fzOpStateDispose(st);
    kb->failed = true;
  }
  return op;
}

/* A builder at the end of the entry block's constants. */
static void at_constants(FzLkBuild *kb, FzBuilder *b) {
  fzBuilderInit(b, kb->ctx);
  if (kb->constants.len)
    fzBuilderSetInsertionPointAfter(
        b, fzValueGetDefiningOp(kb->constants.data[kb->constants.len - 1]));
  else
    fzBuilderSetInsertionPointToStart(b, kb->entry);
}

FzValue *fzLkConstAttr(FzLkBuild *kb, FzType *t, FzAttr *a) {
  if (!a || !t)
    return fail(kb);
  for (size_t i = 0; i < kb->constants.len; ++i) {
    FzValue *c = kb->constants.data[i];
    FzOp *def = fzValueGetDefiningOp(c);
    if (fzValueGetType(c) == t && fzLoopGetOpcode(def) == FZ_LOOP_OP_CONSTANT &&
        fzOpGetInherentAttr(def, FZ_STR("value")) == a)
      return c;
  }
  FzBuilder b;
  at_constants(kb, &b);
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("loop.constant"), kb->loc);
  fzOpStateAddProp(&st, FZ_STR("value"), a);
  fzOpStateAddResults(&st, 1, &t);
  FzOp *op = create(kb, &b, &st);
  if (!op)
    return NULL;
  FzValue *v = fzOpGetResult(op, 0);
  if (!fzPtrVecPush(&kb->constants, v))
    return fail(kb);
  return v;
}

FzValue *fzLkConstInt(FzLkBuild *kb, FzType *t, int64_t v) {
  return fzLkConstAttr(kb, t, fzIntegerAttrGet(kb->ctx, t, v));
}

FzValue *fzLkIndex(FzLkBuild *kb, int64_t v) {
  return fzLkConstInt(kb, fzIndexTypeGet(kb->ctx), v);
}

FzValue *fzLkConst(FzLkBuild *kb, FzType *t, double v) {
  return fzTypeIsFloat(t) ? fzLkConstAttr(kb, t, fzFloatAttrGet(kb->ctx, t, v))
                          : fzLkConstInt(kb, t, (int64_t)v);
}

FzValue *fzLkOp(FzLkBuild *kb, const char *name, FzType *t, size_t n,
                FzValue *const *operands) {
  for (size_t i = 0; i < n; ++i)
    if (!operands[i])
      return fail(kb);
  if (!t)
    t = fzValueGetType(operands[0]);
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, fzStringRefFromCString(name), kb->loc);
  fzOpStateAddOperands(&st, n, operands);
  fzOpStateAddResults(&st, 1, &t);
  FzOp *op = create(kb, &kb->b, &st);
  return op ? fzOpGetResult(op, 0) : NULL;
}

FzValue *fzLkBin(FzLkBuild *kb, const char *name, FzValue *a, FzValue *b) {
  FzValue *ops[2] = {a, b};
  return fzLkOp(kb, name, NULL, 2, ops);
}

static bool const_of(FzValue *v, int64_t *out) {
  return v && fzLoopValueGetConstantInt(v, out);
}

FzValue *fzLkAdd(FzLkBuild *kb, FzValue *a, FzValue *b) {
  int64_t x, y;
  if (!a || !b) /* an operand failed */
    return fail(kb);
  if (const_of(a, &x) && const_of(b, &y))
    return fzLkConstInt(kb, fzValueGetType(a), x + y);
  if (const_of(b, &y) && y == 0)
    return a;
  if (const_of(a, &x) && x == 0)
    return b;
  return fzLkBin(kb, "loop.addi", a, b);
}

FzValue *fzLkMul(FzLkBuild *kb, FzValue *a, FzValue *b) {
  int64_t x, y;
  if (!a || !b) /* an operand failed */
    return fail(kb);
  if (const_of(a, &x) && const_of(b, &y))
    return fzLkConstInt(kb, fzValueGetType(a), x * y);
  if (const_of(b, &y) && y == 1)
    return a;
  if (const_of(a, &x) && x == 1)
    return b;
  if ((const_of(b, &y) && y == 0) || (const_of(a, &x) && x == 0))
    return fzLkConstInt(kb, fzValueGetType(a), 0);
  return fzLkBin(kb, "loop.muli", a, b);
}

FzValue *fzLkDiv(FzLkBuild *kb, FzValue *a, FzValue *b) {
  int64_t x, y;
  if (!a || !b) /* an operand failed */
    return fail(kb);
  if (const_of(b, &y) && y == 1)
    return a;
  if (const_of(a, &x) && const_of(b, &y) && y > 0)
    return fzLkConstInt(kb, fzValueGetType(a), x / y);
  return fzLkBin(kb, "loop.divsi", a, b);
}

FzValue *fzLkRem(FzLkBuild *kb, FzValue *a, FzValue *b) {
  int64_t x, y;
  if (!a || !b) /* an operand failed */
    return fail(kb);
  if (const_of(b, &y) && y == 1)
    return fzLkConstInt(kb, fzValueGetType(a), 0);
  if (const_of(a, &x) && const_of(b, &y) && y > 0)
    return fzLkConstInt(kb, fzValueGetType(a), x % y);
  return fzLkBin(kb, "loop.remsi", a, b);
}

FzValue *fzLkCmp(FzLkBuild *kb, const char *pred, FzValue *a, FzValue *b) {
  if (!a || !b)
    return fail(kb);
  FzType *i1 = fzIntegerTypeGet(kb->ctx, 1);
  FzValue *ops[2] = {a, b};
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("loop.cmpi"), kb->loc);
  fzOpStateAddOperands(&st, 2, ops);
  fzOpStateAddProp(&st, FZ_STR("predicate"),
                   fzStringAttrGet(kb->ctx, fzStringRefFromCString(pred)));
  fzOpStateAddResults(&st, 1, &i1);
  FzOp *op = create(kb, &kb->b, &st);
  return op ? fzOpGetResult(op, 0) : NULL;
}

FzValue *fzLkSelect(FzLkBuild *kb, FzValue *c, FzValue *a, FzValue *b) {
  FzValue *ops[3] = {c, a, b};
  return a ? fzLkOp(kb, "loop.select", fzValueGetType(a), 3, ops)
           : fail(kb);
}

FzValue *fzLkCast(FzLkBuild *kb, const char *name, FzValue *v, FzType *t) {
  if (v && fzValueGetType(v) == t)
    return v;
  return fzLkOp(kb, name, t, 1, &v);
}

FzValue *fzLkId(FzLkBuild *kb, const char *name) {
  FzType *idx = fzIndexTypeGet(kb->ctx);
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, fzStringRefFromCString(name), kb->loc);
  fzOpStateAddProp(&st, FZ_STR("dimension"),
                   fzStringAttrGet(kb->ctx, FZ_STR("x")));
  fzOpStateAddResults(&st, 1, &idx);
  FzOp *op = create(kb, &kb->b, &st);
  return op ? fzOpGetResult(op, 0) : NULL;
}

FzValue *fzLkSharedAlloc(FzLkBuild *kb, FzType *elt, int64_t n) {
  FzType *t = fzBufferTypeGet(kb->ctx, 1, &n, elt, NULL,
                              FZ_KERNEL_SPACE_SHARED, kb->loc);
  if (!t)
    return fail(kb);
  FzBuilder b;
  at_constants(kb, &b);
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("kernel.shared_alloc"), kb->loc);
  fzOpStateAddResults(&st, 1, &t);
  FzOp *op = create(kb, &b, &st);
  if (!op)
    return NULL;
  /* Counted with the constants so that later ones go after it. */
  FzValue *v = fzOpGetResult(op, 0);
  return fzPtrVecPush(&kb->constants, v) ? v : fail(kb);
}

FzValue *fzLkDynamicShared(FzLkBuild *kb, FzType *elt) {
  int64_t dyn = FZ_DYNAMIC;
  FzType *t = fzBufferTypeGet(kb->ctx, 1, &dyn, elt, NULL,
                              FZ_KERNEL_SPACE_SHARED, kb->loc);
  if (!t)
    return fail(kb);
  for (size_t i = 0; i < kb->constants.len; ++i) {
    FzValue *c = kb->constants.data[i];
    if (fzValueGetType(c) == t &&
        fzStringRefEqual(fzIdentGetString(fzOpGetName(
                             fzValueGetDefiningOp(c))),
                         FZ_STR("kernel.dynamic_shared")))
      return c;
  }
  FzBuilder b;
  at_constants(kb, &b);
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("kernel.dynamic_shared"), kb->loc);
  fzOpStateAddResults(&st, 1, &t);
  FzOp *op = create(kb, &b, &st);
  if (!op)
    return NULL;
  FzValue *v = fzOpGetResult(op, 0);
  return fzPtrVecPush(&kb->constants, v) ? v : fail(kb);
}

FzValue *fzLkLoad(FzLkBuild *kb, FzValue *buf, size_t n,
                  FzValue *const *idx) {
  if (!buf)
    return fail(kb);
  FzValue *ops[FZ_LK_MAX_DIMS + 1];
  ops[0] = buf;
  for (size_t i = 0; i < n; ++i)
    ops[1 + i] = idx[i];
  return fzLkOp(kb, "loop.load",
                fzShapedTypeGetElementType(fzValueGetType(buf)), n + 1, ops);
}

bool fzLkStore(FzLkBuild *kb, FzValue *v, FzValue *buf, size_t n,
               FzValue *const *idx) {
  FzValue *ops[FZ_LK_MAX_DIMS + 2] = {v, buf};
  for (size_t i = 0; i < n; ++i)
    ops[2 + i] = idx[i];
  for (size_t i = 0; i < n + 2; ++i)
    if (!ops[i])
      return fail(kb), false;
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("loop.store"), kb->loc);
  fzOpStateAddOperands(&st, n + 2, ops);
  return create(kb, &kb->b, &st) != NULL;
}

bool fzLkBarrier(FzLkBuild *kb) {
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("kernel.barrier"), kb->loc);
  return create(kb, &kb->b, &st) != NULL;
}

FzValue *fzLkShuffleXor(FzLkBuild *kb, FzValue *v, int64_t off) {
  FzType *i32 = fzIntegerTypeGet(kb->ctx, 32);
  FzValue *ops[2] = {v, fzLkConstInt(kb, i32, off)};
  if (!ops[0] || !ops[1])
    return fail(kb);
  FzType *res[2] = {fzValueGetType(v), fzIntegerTypeGet(kb->ctx, 1)};
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("kernel.shuffle"), kb->loc);
  fzOpStateAddOperands(&st, 2, ops);
  fzOpStateAddProp(&st, FZ_STR("mode"), fzStringAttrGet(kb->ctx, FZ_STR("xor")));
  fzOpStateAddProp(&st, FZ_STR("width"), fzIntegerAttrGet(kb->ctx, i32, 32));
  fzOpStateAddResults(&st, 2, res);
  FzOp *op = create(kb, &kb->b, &st);
  return op ? fzOpGetResult(op, 0) : NULL;
}

/*===--- Structured control flow ------------------------------------------===*/

FzOp *fzLkForBegin(FzLkBuild *kb, FzValue *lb, FzValue *ub, FzValue *step,
                   size_t n, FzValue *const *inits, FzValue **iv,
                   FzValue **iters) {
  if (!lb || !ub || !step || kb->failed || n > FZ_LK_MAX_DIMS)
    return fail(kb), NULL;
  FzValue *ops[FZ_LK_MAX_DIMS + 3] = {lb, ub, step};
  FzType *types[FZ_LK_MAX_DIMS + 1];
  types[0] = fzIndexTypeGet(kb->ctx);
  for (size_t i = 0; i < n; ++i) {
    if (!inits[i])
      return fail(kb), NULL;
    ops[3 + i] = inits[i];
    types[1 + i] = fzValueGetType(inits[i]);
  }
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("loop.for"), kb->loc);
  fzOpStateAddOperands(&st, n + 3, ops);
  fzOpStateAddResults(&st, n, types + 1);
  FzRegion *r = fzOpStateAddRegion(&st);
  FzBlock *body = fzBlockCreate(kb->ctx, n + 1, types, NULL);
  if (!r || !body) {
    if (body)
      fzBlockDestroy(body);
    fzOpStateDispose(&st);
    return fail(kb), NULL;
  }
  fzRegionAppendBlock(r, body);
  FzOp *loop = create(kb, &kb->b, &st);
  if (!loop)
    return NULL;
  if (iv)
    *iv = fzBlockGetArgument(body, 0);
  for (size_t i = 0; iters && i < n; ++i)
    iters[i] = fzBlockGetArgument(body, i + 1);
  fzBuilderSetInsertionPointToEnd(&kb->b, body);
  return loop;
}

bool fzLkForEnd(FzLkBuild *kb, FzOp *loop, size_t n,
                FzValue *const *yields) {
  for (size_t i = 0; i < n; ++i)
    if (!yields[i])
      return fail(kb), false;
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("loop.yield"), kb->loc);
  fzOpStateAddOperands(&st, n, yields);
  if (!create(kb, &kb->b, &st))
    return false;
  fzBuilderSetInsertionPointAfter(&kb->b, loop);
  return true;
}

FzOp *fzLkIfBegin(FzLkBuild *kb, FzValue *cond, size_t n,
                  FzValue *const *inits, FzValue **iters) {
  FzValue *one = fzLkIndex(kb, 1);
  FzValue *lb = fzLkSelect(kb, cond, fzLkIndex(kb, 0), one);
  return fzLkForBegin(kb, lb, one, one, n, inits, NULL, iters);
}

/*===--- Cloning ----------------------------------------------------------===*/

typedef struct External {
  FzOp *root;
  const FzLkMap *map;
  FzIRMapping *ir;
  bool missing;
  bool outOfMemory;
} External;

static bool defined_in(FzValue *v, FzOp *root) {
  FzBlock *b = fzValueGetParentBlock(v);
  FzOp *p = b ? fzBlockGetParentOp(b) : NULL;
  return p && fzOpIsAncestor(root, p);
}

static FzWalkResult map_externals(FzOp *op, void *ud) {
  External *x = ud;
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    if (op != x->root && defined_in(v, x->root))
      continue;
    FzValue *to = fzLkMapGet(x->map, v);
    if (!to) {
      x->missing = true;
      return FZ_WALK_INTERRUPT;
    }
    if (!fzIRMappingMap(x->ir, v, to)) {
      x->outOfMemory = true; /* recorded */
      return FZ_WALK_INTERRUPT;
    }
  }
  return FZ_WALK_ADVANCE;
}

FzOp *fzLkClone(FzLkBuild *kb, FzLkMap *map, FzOp *op) {
  if (kb->failed)
    return NULL;
  External x = {op, map, fzIRMappingCreate(kb->ctx), false, false};
  if (!x.ir)
    return fail(kb), NULL;
  fzOpWalk(op, FZ_WALK_PRE_ORDER, map_externals, &x);
  FzOp *c = x.missing || x.outOfMemory ? NULL : fzOpClone(op, x.ir);
  fzIRMappingDestroy(x.ir);
  if (x.missing) {
    fzOpEmitError(op, "lower-loop-to-kernel: internal error: a value this "
                      "op uses has no counterpart in the kernel");
    return fail(kb), NULL;
  }
  if (!c)
    return fail(kb), NULL;
  fzBuilderInsert(&kb->b, c);
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i)
    if (!fzLkMapPut(map, fzOpGetResult(op, i), fzOpGetResult(c, i)))
      return fail(kb), NULL;
  return c;
}

/*===--- Unrolling in phases ----------------------------------------------===*/

static long op_index(const FzLkUnroll *U, FzOp *op) {
  for (size_t i = 0; i < U->numOps; ++i)
    if (U->ops[i] == op)
      return (long)i;
  return -1;
}

/* Puts op and what its operands need into phase 0; false when that
 * reaches a carried block argument. */
static bool pull_into_loads(FzLkUnroll *U, FzOp *op) {
  long i = op_index(U, op);
  if (i < 0 || U->phase[i] == 0)
    return true;
  U->phase[i] = 0;
  for (size_t k = 0; k < fzOpGetNumOperands(op); ++k) {
    FzValue *v = fzOpGetOperand(op, k);
    if (fzValueIsBlockArgument(v)) {
      if (fzValueGetParentBlock(v) == U->body &&
          fzValueGetIndex(v) >= U->numIvs)
        return false;
      continue;
    }
    FzOp *def = fzValueGetDefiningOp(v);
    if (def && fzOpGetBlock(def) == U->body && !pull_into_loads(U, def))
      return false;
  }
  return true;
}

/* Marks the accesses of U's body that go through views (see
 * FzLkUnroll): a value depends on laneIv when it is laneIv or an op of
 * the body uses one that does. */
static bool find_views(FzLkUnroll *U) {
  FzPtrMap dep;
  fzPtrMapInit(&dep, U->kb->ctx);
  bool ok = fzPtrMapPut(&dep, U->laneIv, U->laneIv);
  for (size_t i = 0; ok && i < U->numOps; ++i) {
    FzOp *op = U->ops[i];
    FzLoopOpcode c = fzLoopGetOpcode(op);
    size_t n = fzOpGetNumOperands(op);
    bool uses = false;
    for (size_t k = 0; k < n; ++k)
      uses |= fzPtrMapContains(&dep, fzOpGetOperand(op, k));
    for (size_t r = 0; ok && uses && r < fzOpGetNumResults(op); ++r)
      ok = fzPtrMapPut(&dep, fzOpGetResult(op, r), op);
    if (c != FZ_LOOP_OP_LOAD && c != FZ_LOOP_OP_STORE)
      continue;
    size_t bi = fzLoopMemGetBufferOperand(op);
    FzType *bt = fzValueGetType(fzOpGetOperand(op, bi));
    bool contiguous = n > bi + 1 && fzOpGetOperand(op, n - 1) == U->laneIv &&
                      !fzBufferTypeGetStrides(bt) &&
                      fzShapedTypeHasStaticShape(bt);
    for (size_t k = bi + 1; contiguous && k + 1 < n; ++k)
      contiguous = !fzPtrMapContains(&dep, fzOpGetOperand(op, k));
    U->viewed[i] = contiguous;
  }
  fzPtrMapFree(&dep);
  return ok;
}

bool fzLkUnrollInit(FzLkUnroll *U, FzLkBuild *kb, FzBlock *body,
                    size_t numIvs, unsigned count, const FzLkMap *parent,
                    FzValue *laneIv, FzValue *laneBase) {
  memset(U, 0, sizeof *U);
  U->kb = kb;
  U->body = body;
  U->count = count;
  U->numIvs = numIvs;
  U->laneIv = laneIv;
  U->laneBase = laneBase;
  FzOp *last = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); op && op != last;
       op = fzOpGetNextInBlock(op))
    U->numOps++;
  U->ops = fzCalloc(kb->ctx, U->numOps + 1, sizeof *U->ops);
  U->phase = fzCalloc(kb->ctx, U->numOps + 1, 1);
  U->maps = fzCalloc(kb->ctx, count + 1, sizeof *U->maps);
  U->views = fzCalloc(kb->ctx, U->numOps + 1, sizeof *U->views);
  U->viewed = fzCalloc(kb->ctx, U->numOps + 1, sizeof *U->viewed);
  U->skip = fzCalloc(kb->ctx, U->numOps + 1, sizeof *U->skip);
  if (!U->ops || !U->phase || !U->maps || !U->views || !U->viewed ||
      !U->skip) {
    fzFree(kb->ctx, U->ops);
    fzFree(kb->ctx, U->phase);
    fzFree(kb->ctx, U->maps);
    fzFree(kb->ctx, U->views);
    fzFree(kb->ctx, U->viewed);
    fzFree(kb->ctx, U->skip);
    memset(U, 0, sizeof *U);
    return fail(kb), false;
  }
  for (unsigned u = 0; u < count; ++u)
    fzLkMapInit(&U->maps[u], kb->ctx, parent);
  size_t i = 0;
  for (FzOp *op = fzBlockGetFirstOp(body); op && op != last;
       op = fzOpGetNextInBlock(op), ++i) {
    U->ops[i] = op;
    FzLoopOpcode c = fzLoopGetOpcode(op);
    U->phase[i] = c == FZ_LOOP_OP_STORE || c == FZ_LOOP_OP_VECTOR_STORE ? 2
                                                                        : 1;
  }
  bool ok = true;
  for (i = 0; i < U->numOps && ok; ++i) {
    FzLoopOpcode c = fzLoopGetOpcode(U->ops[i]);
    if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_VECTOR_LOAD)
      ok = pull_into_loads(U, U->ops[i]);
  }
  for (i = 0; i < U->numOps; ++i)
    if (!ok || count == 1)
      U->phase[i] = 1; /* the body's own order */
  if (laneIv && count > 1 && !find_views(U)) {
    fzLkUnrollFree(U); /* the caller frees only what succeeded */
    return fail(kb), false;
  }
  return true;
}

void fzLkUnrollFree(FzLkUnroll *U) {
  if (!U->kb)
    return; /* never initialized, or its init failed */
  for (unsigned u = 0; U->maps && u < U->count; ++u)
    fzLkMapFree(&U->maps[u]);
  fzFree(U->kb->ctx, U->ops);
  fzFree(U->kb->ctx, U->phase);
  fzFree(U->kb->ctx, U->maps);
  fzFree(U->kb->ctx, U->views);
  fzFree(U->kb->ctx, U->viewed);
  fzFree(U->kb->ctx, U->skip);
  memset(U, 0, sizeof *U);
}

void fzLkUnrollSkipDead(FzLkUnroll *U) {
  for (size_t i = U->numOps; i-- > 0;) {
    FzOp *op = U->ops[i];
    if (U->skip[i] || fzOpGetNumResults(op) == 0 ||
        (!fzOpIsEffectFree(op) && fzLoopGetOpcode(op) != FZ_LOOP_OP_LOAD))
      continue;
    bool dead = true;
    for (size_t r = 0; r < fzOpGetNumResults(op) && dead; ++r)
      for (FzOpOperand *use = fzValueGetFirstUse(fzOpGetResult(op, r));
           use && dead; use = fzOpOperandGetNextUse(use)) {
        long k = op_index(U, fzOpOperandGetOwner(use));
        dead = k >= 0 && U->skip[k];
      }
    U->skip[i] = dead;
  }
}

/* Copy u of access op (U->ops[i]) through its view. */
static bool viewed_access(FzLkUnroll *U, size_t i, unsigned u) {
  FzLkBuild *kb = U->kb;
  FzOp *op = U->ops[i];
  FzLkMap *map = &U->maps[u];
  bool isStore = fzLoopGetOpcode(op) == FZ_LOOP_OP_STORE;
  size_t bi = fzLoopMemGetBufferOperand(op);
  size_t n = fzOpGetNumOperands(op);
  FzValue *buf = fzOpGetOperand(op, bi);
  FzType *bt = fzValueGetType(buf);
  FzType *elt = fzShapedTypeGetElementType(bt);
  if (!U->views[i]) {
    /* Offset of element (indices..., laneBase), row-major. */
    FzValue *off = fzLkIndex(kb, 0);
    int64_t stride = 1;
    for (size_t k = n - 1; k > bi; --k) {
      FzValue *x = k == n - 1 ? U->laneBase
                              : fzLkMapGet(map, fzOpGetOperand(op, k));
      off = fzLkAdd(kb, off, fzLkMul(kb, x, fzLkIndex(kb, stride)));
      stride *= fzShapedTypeGetDim(bt, k - bi - 1);
    }
    int64_t lanes = U->count;
    FzType *vt = fzBufferTypeGet(kb->ctx, 1, &lanes, elt, NULL,
                                 fzBufferTypeGetMemorySpace(bt), kb->loc);
    FzValue *ops[2] = {fzLkMapGet(map, buf), off};
    if (!vt || !ops[0] || !off)
      return fail(kb), false;
    U->views[i] = fzLkOp(kb, "loop.view", vt, 2, ops);
  }
  FzValue *lane = fzLkIndex(kb, u);
  if (isStore)
    return fzLkStore(kb, fzLkMapGet(map, fzOpGetOperand(op, 0)), U->views[i],
                     1, &lane);
  FzValue *v = fzLkLoad(kb, U->views[i], 1, &lane);
  return v && fzLkMapPut(map, fzOpGetResult(op, 0), v);
}

bool fzLkUnrollPhase(FzLkUnroll *U, unsigned u, unsigned phase) {
  for (size_t i = 0; i < U->numOps && !U->kb->failed; ++i) {
    if (U->phase[i] != phase || U->skip[i])
      continue;
    if (U->viewed[i] ? !viewed_access(U, i, u)
                     : !fzLkClone(U->kb, &U->maps[u], U->ops[i]))
      return false;
  }
  return !U->kb->failed;
}

/*===--- Nested loop.parallel -> loop.for ---------------------------------===*/

static FzWalkResult collect(FzOp *op, void *ud) {
  FzLoopOpcode c = fzLoopGetOpcode(op);
  if (c == FZ_LOOP_OP_PARALLEL || c == FZ_LOOP_OP_BARRIER)
    return fzPtrVecPush(ud, op) ? FZ_WALK_ADVANCE : FZ_WALK_INTERRUPT;
  return FZ_WALK_ADVANCE;
}

/* par -> loop.for nests at par's place (its body moved inside). */
static bool serialize(FzLkBuild *kb, FzOp *par) {
  size_t n = fzLoopParallelGetNumDims(par);
  FzBlock *body = fzLoopGetBody(par);
  FzBuilder saved = kb->b;
  fzBuilderSetInsertionPointBefore(&kb->b, par);
  FzOp *loops[FZ_LK_MAX_DIMS];
  FzValue *ivs[FZ_LK_MAX_DIMS];
  if (n == 0 || n > FZ_LK_MAX_DIMS || !body)
    return fail(kb), false;
  for (size_t d = 0; d < n; ++d)
    if (!(loops[d] = fzLkForBegin(kb, fzOpGetOperand(par, d),
                                  fzOpGetOperand(par, n + d),
                                  fzOpGetOperand(par, 2 * n + d), 0, NULL,
                                  &ivs[d], NULL)))
      return false;
  FzBlock *inner = fzLoopGetBody(loops[n - 1]);
  for (size_t d = 0; d < n; ++d)
    fzValueReplaceAllUsesWith(fzBlockGetArgument(body, d), ivs[d]);
  FzOp *yield = fzBlockGetLastOp(body), *next;
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = next) {
    next = fzOpGetNextInBlock(op);
    if (op == yield)
      break;
    fzOpRemoveFromBlock(op);
    fzBlockAppendOp(inner, op);
  }
  for (size_t d = n; d-- > 0;) {
    fzBuilderSetInsertionPointToEnd(&kb->b, fzLoopGetBody(loops[d]));
    if (!fzLkForEnd(kb, loops[d], 0, NULL))
      return false;
  }
  fzOpErase(par);
  kb->b = saved;
  return true;
}

bool fzLkSerializeNested(FzLkBuild *kb, FzOp *op) {
  FzPtrVec found;
  fzPtrVecInit(&found, kb->ctx);
  bool ok = fzOpWalk(op, FZ_WALK_POST_ORDER, collect, &found) !=
            FZ_WALK_INTERRUPT;
  /* Post-order: inner nests first, so each is moved whole. */
  for (size_t i = 0; ok && i < found.len; ++i) {
    FzOp *o = found.data[i];
    if (fzLoopGetOpcode(o) == FZ_LOOP_OP_BARRIER)
      fzOpErase(o);
    else
      ok = serialize(kb, o);
  }
  fzPtrVecFree(&found);
  if (!ok)
    kb->failed = true;
  return ok;
}

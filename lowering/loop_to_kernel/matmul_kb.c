/* lowering/loop_to_kernel/matmul_kb.c - the small IR builders of the
 * matmul generator (matmul_internal.h): constants at the start of the
 * kernel's entry block, index arithmetic that folds constants as it is
 * built (static parts of addresses cost no op), guards, structured loops
 * and `if`s, the shared tiles' swizzle. Failures set KB.failed; NULL
 * operands make a builder fail instead of crashing.
 */
#include <string.h>

#include "lowering/loop_to_kernel/matmul_internal.h"

/*===--- Small builders -------------------------------------------------===*/

FzValue *mmCreate(KB *K, FzOpState *st, size_t result) {
  FzOp *op = fzBuilderCreate(&K->b, st);
  if (!op) {
    K->failed = true;
    return NULL;
  }
  return fzOpGetNumResults(op) > result ? fzOpGetResult(op, result) : NULL;
}

/* Creates st's op right after the last constant of the entry block. */
static FzValue *create_const(KB *K, FzOpState *st) {
  FzBuilder cb;
  fzBuilderInit(&cb, K->ctx);
  fzBuilderSetInsertionPointAfter(&cb, K->lastConst);
  FzOp *op = fzBuilderCreate(&cb, st);
  if (!op) {
    K->failed = true;
    return NULL;
  }
  K->lastConst = op;
  return fzOpGetResult(op, 0);
}

FzValue *mmConstOf(KB *K, FzType *t, int64_t v) {
  for (size_t i = 0; i < K->numConsts; ++i)
    if (K->cval[i] == v && K->ctype[i] == t)
      return K->cidx[i];
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("loop.constant"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("value"), fzIntegerAttrGet(K->ctx, t, v));
  fzOpStateAddResults(&st, 1, &t);
  FzValue *c = create_const(K, &st);
  if (c && K->numConsts < MAX_CONSTS) {
    K->cval[K->numConsts] = v;
    K->ctype[K->numConsts] = t;
    K->cidx[K->numConsts++] = c;
  }
  return c;
}

FzValue *mmConst(KB *K, int64_t v) { return mmConstOf(K, K->idx, v); }

/* A constant of any type from an attribute (f32 / vector zero, i1). */
FzValue *mmConstAttr(KB *K, FzAttr *a, FzType *t) {
  if (!a) {
    K->failed = true;
    return NULL;
  }
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("loop.constant"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("value"), a);
  fzOpStateAddResults(&st, 1, &t);
  return create_const(K, &st);
}

FzValue *mmOp(KB *K, const char *name, size_t n, FzValue *const *ops,
                     FzType *rt, const char *pred) {
  for (size_t i = 0; i < n; ++i)
    if (!ops[i]) {
      K->failed = true;
      return NULL;
    }
  FzOpState st;
  fzOpStateInit(&st, K->ctx, fzStringRefFromCString(name), K->loc);
  fzOpStateAddOperands(&st, n, ops);
  if (pred)
    fzOpStateAddProp(&st, FZ_STR("predicate"),
                     fzStringAttrGet(K->ctx, fzStringRefFromCString(pred)));
  if (rt)
    fzOpStateAddResults(&st, 1, &rt);
  return mmCreate(K, &st, 0);
}

bool mmIsConst(FzValue *v, int64_t *c) {
  return v && fzLoopValueGetConstantInt(v, c);
}

/* The type of integer arithmetic on a (index when a is NULL: the
 * builders then fail on the NULL operand anyway). */
static FzType *type_of(KB *K, FzValue *a) {
  return a ? fzValueGetType(a) : K->idx;
}

FzValue *mmAdd(KB *K, FzValue *a, FzValue *b) {
  int64_t x, y;
  bool ca = mmIsConst(a, &x), cb = mmIsConst(b, &y);
  FzType *t = type_of(K, ca ? b : a);
  if (ca && cb)
    return mmConstOf(K, t, x + y);
  if (ca && x == 0)
    return b;
  if (cb && y == 0)
    return a;
  FzValue *ops[2] = {a, b};
  return mmOp(K, "loop.addi", 2, ops, t, NULL);
}

FzValue *mmAddC(KB *K, FzValue *a, int64_t c) {
  return mmAdd(K, a, mmConstOf(K, type_of(K, a), c));
}

FzValue *mmMul(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  FzType *t = type_of(K, a);
  if (mmIsConst(a, &x))
    return mmConstOf(K, t, x * c);
  if (c == 0)
    return mmConstOf(K, t, 0);
  if (c == 1)
    return a;
  FzValue *ops[2] = {a, mmConstOf(K, t, c)};
  return mmOp(K, "loop.muli", 2, ops, t, NULL);
}

static int log2_exact(int64_t c) {
  if (c <= 0 || (c & (c - 1)) != 0)
    return -1;
  int k = 0;
  while (((int64_t)1 << k) != c)
    ++k;
  return k;
}

/* a / c and a % c for a >= 0, c > 0: a shift and a mask for powers of
 * two (the same values for a >= 0, and no sign fix-up for LLVM to prove
 * away). */
FzValue *mmDivC(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  FzType *t = type_of(K, a);
  if (mmIsConst(a, &x))
    return mmConstOf(K, t, x / c);
  if (c == 1)
    return a;
  int k = log2_exact(c);
  FzValue *ops[2] = {a, mmConstOf(K, t, k >= 0 ? k : c)};
  return mmOp(K, k >= 0 ? "loop.shrsi" : "loop.divsi", 2, ops, t, NULL);
}

FzValue *mmRemC(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  FzType *t = type_of(K, a);
  if (mmIsConst(a, &x))
    return mmConstOf(K, t, x % c);
  if (c == 1)
    return mmConstOf(K, t, 0);
  int k = log2_exact(c);
  FzValue *ops[2] = {a, mmConstOf(K, t, k >= 0 ? c - 1 : c)};
  return mmOp(K, k >= 0 ? "loop.andi" : "loop.remsi", 2, ops, t, NULL);
}

FzValue *mmMinC(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  FzType *t = type_of(K, a);
  if (mmIsConst(a, &x))
    return mmConstOf(K, t, x < c ? x : c);
  FzValue *ops[2] = {a, mmConstOf(K, t, c)};
  return mmOp(K, "loop.minsi", 2, ops, t, NULL);
}

FzValue *mmXor(KB *K, FzValue *a, FzValue *b) {
  int64_t x, y;
  bool ca = mmIsConst(a, &x), cb = mmIsConst(b, &y);
  FzType *t = type_of(K, ca ? b : a);
  if (ca && cb)
    return mmConstOf(K, t, x ^ y);
  if (cb && y == 0)
    return a;
  if (ca && x == 0)
    return b;
  FzValue *ops[2] = {a, b};
  return mmOp(K, "loop.xori", 2, ops, t, NULL);
}

FzValue *mmXorC(KB *K, FzValue *a, int64_t c) {
  return mmXor(K, a, mmConstOf(K, type_of(K, a), c));
}

FzValue *mmCast(KB *K, FzValue *v, FzType *t) {
  int64_t x;
  if (!v || fzValueGetType(v) == t)
    return v ? v : (K->failed = true, NULL);
  if (mmIsConst(v, &x))
    return mmConstOf(K, t, x);
  return mmOp(K, "loop.index_cast", 1, &v, t, NULL);
}

/* a < c (i1); NULL means "always true" for the callers' guards. */
FzValue *mmLtC(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  if (mmIsConst(a, &x) && x < c)
    return NULL;
  FzValue *ops[2] = {a, mmConstOf(K, type_of(K, a), c)};
  return mmOp(K, "loop.cmpi", 2, ops, K->i1, "slt");
}

FzValue *mmLt(KB *K, FzValue *a, FzValue *b) {
  FzValue *ops[2] = {a, b};
  return mmOp(K, "loop.cmpi", 2, ops, K->i1, "slt");
}

FzValue *mmUltC(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  if (mmIsConst(a, &x) && x >= 0 && x < c)
    return NULL;
  FzValue *ops[2] = {a, mmConstOf(K, type_of(K, a), c)};
  return mmOp(K, "loop.cmpi", 2, ops, K->i1, "ult");
}

FzValue *mmClampC(KB *K, FzValue *a, int64_t lo, int64_t hi) {
  int64_t x;
  FzType *t = type_of(K, a);
  if (mmIsConst(a, &x))
    return mmConstOf(K, t, x < lo ? lo : x > hi ? hi : x);
  FzValue *ops[2] = {a, mmConstOf(K, t, lo)};
  return mmMinC(K, mmOp(K, "loop.maxsi", 2, ops, t, NULL), hi);
}

/* Conjunction of guards (NULL: true). */
FzValue *mmAnd(KB *K, FzValue *a, FzValue *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  FzValue *ops[2] = {a, b};
  return mmOp(K, "loop.andi", 2, ops, K->i1, NULL);
}

FzValue *mmSelect(KB *K, FzValue *c, FzValue *a, FzValue *b) {
  FzValue *ops[3] = {c, a, b};
  return mmOp(K, "loop.select", 3, ops, a ? fzValueGetType(a) : NULL, NULL);
}

FzValue *mmId(KB *K, const char *name, const char *dim) {
  FzOpState st;
  fzOpStateInit(&st, K->ctx, fzStringRefFromCString(name), K->loc);
  if (dim)
    fzOpStateAddProp(&st, FZ_STR("dimension"),
                     fzStringAttrGet(K->ctx, fzStringRefFromCString(dim)));
  fzOpStateAddResults(&st, 1, &K->idx);
  return mmCreate(K, &st, 0);
}

void mmPlainOp(KB *K, const char *name) {
  FzOpState st;
  fzOpStateInit(&st, K->ctx, fzStringRefFromCString(name), K->loc);
  mmCreate(K, &st, 0);
}

/*===--- Structured control ---------------------------------------------===*/

/* `loop.for %iv = lb to ub step 1 iter_args(inits)`: creates the op with
 * an empty body and moves the builder into it (saved in *saved). */
FzOp *mmForOpen(KB *K, FzValue *lb, FzValue *ub, size_t n,
                      FzValue *const *inits, FzValue **iv, FzValue **iters,
                      FzBuilder *saved) {
  FzValue *ops[3 + 2 * MAX_ACC + 1];
  FzType *types[1 + 2 * MAX_ACC + 1];
  ops[0] = lb;
  ops[1] = ub;
  ops[2] = mmConst(K, 1);
  types[0] = K->idx;
  for (size_t i = 0; i < n; ++i) {
    ops[3 + i] = inits[i];
    types[1 + i] = inits[i] ? fzValueGetType(inits[i]) : K->idx;
  }
  for (size_t i = 0; i < 3 + n; ++i)
    if (!ops[i]) {
      K->failed = true;
      return NULL;
    }
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("loop.for"), K->loc);
  fzOpStateAddOperands(&st, 3 + n, ops);
  fzOpStateAddResults(&st, n, types + 1);
  FzRegion *r = fzOpStateAddRegion(&st);
  FzBlock *body = fzBlockCreate(K->ctx, 1 + n, types, NULL);
  if (!r || !body) {
    if (body)
      fzBlockDestroy(body);
    fzOpStateDispose(&st);
    K->failed = true;
    return NULL;
  }
  fzRegionAppendBlock(r, body);
  FzOp *loop = fzBuilderCreate(&K->b, &st);
  if (!loop) {
    K->failed = true;
    return NULL;
  }
  *saved = K->b;
  fzBuilderSetInsertionPointToEnd(&K->b, body);
  if (iv)
    *iv = fzBlockGetArgument(body, 0);
  for (size_t i = 0; i < n; ++i)
    iters[i] = fzBlockGetArgument(body, 1 + i);
  return loop;
}

/* Ends the body with loop.yield(yields) and restores the builder. */
void mmForClose(KB *K, FzOp *loop, size_t n, FzValue *const *yields,
                      const FzBuilder *saved) {
  if (loop) {
    for (size_t i = 0; i < n; ++i)
      if (!yields[i])
        K->failed = true;
    if (!K->failed) {
      FzOpState st;
      fzOpStateInit(&st, K->ctx, FZ_STR("loop.yield"), K->loc);
      fzOpStateAddOperands(&st, n, yields);
      mmCreate(K, &st, 0);
    }
  }
  K->b = *saved;
}

/* `if (cond)` as a loop.for of 0 or 1 iterations; cond NULL: no guard
 * (returns NULL and leaves the builder). */
FzOp *mmIfOpen(KB *K, FzValue *cond, FzBuilder *saved) {
  if (!cond)
    return NULL;
  FzValue *ub = mmSelect(K, cond, mmConst(K, 1), mmConst(K, 0));
  return mmForOpen(K, mmConst(K, 0), ub, 0, NULL, NULL, NULL, saved);
}

void mmIfClose(KB *K, FzOp *loop, const FzBuilder *saved) {
  if (loop)
    mmForClose(K, loop, 0, NULL, saved);
}

/* The swizzled element offset of (row, col) in a tile of `cols` columns;
 * col is a multiple of 8. */
FzValue *mmSwizzle(KB *K, FzValue *row, FzValue *col, int cols) {
  int C = cols / 8;
  FzValue *chunk = mmDivC(K, col, 8);
  FzValue *f = C >= 8 ? mmRemC(K, row, 8) : mmRemC(K, mmDivC(K, row, 8 / C), C);
  FzValue *sc = mmXor(K, chunk, f);
  return mmAdd(K, mmMul(K, row, cols), mmMul(K, sc, 8));
}

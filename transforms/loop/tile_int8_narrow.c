/* transforms/loop/tile_int8_narrow.c - the step of tile-int8-contractions
 * that makes integer contractions read bytes: an i32 buffer that one
 * nest fills with ext(b) [- z] (lower-graph-to-loop's form of
 * graph.sub_zero_point, stored because contractions take no prologue)
 * is replaced by the bytes b, and each load of it by ext(load) [- z].
 *
 *   %B = loop.alloc : buffer<..xi32>          %B8 = loop.alloc : buffer<..xi8>
 *   parallel (ivs) {                          parallel (ivs) {
 *     %b = ... : i8                             %b = ... : i8
 *     store subi(ext %b, %z), %B[ivs]   ->      store %b, %B8[ivs]
 *   }                                         }
 *   ... load %B[idx] ...                      ... subi(ext(load %B8[idx]), %z)
 *
 * When %b is itself a load at the same ivs of a buffer of that shape
 * that nothing stores to (a weight constant, an input), the readers load
 * that buffer and the nest goes. Values are unchanged: the readers
 * compute what the nest stored.
 */
#include <string.h>

#include "fz/loop.h"
#include "transforms/loop/tile_int8.h"
#include "transforms/loop/tile_internal.h"

#define NARROW_MAX_ALIASES 16

typedef struct Narrow {
  FzOp *def;         /* the buffer's loop.alloc or loop.view */
  FzOp *store, *nest, *dealloc;
  FzOp *last;        /* the last top-level op that reads it */
  FzOp *ext;         /* extsi / extui */
  FzValue *byte, *z; /* the i8 value; the zero point or NULL */
} Narrow;

static bool is_int(FzType *t, unsigned w) {
  return t && fzTypeGetKind(t) == FZ_TYPE_INTEGER && fzTypeGetBitWidth(t) == w;
}

/* The op of func's body that holds op. */
static FzOp *top_of(FzBlock *body, FzOp *op) {
  while (op && fzOpGetBlock(op) != body)
    op = fzOpGetParentOp(op);
  return op;
}

static bool identity_store(FzOp *store, FzOp *nest, FzType *bt) {
  size_t n = fzLoopParallelGetNumDims(nest);
  size_t rank = fzShapedTypeGetRank(bt);
  const int64_t *shape = fzShapedTypeGetShape(bt);
  const int64_t *strides = fzBufferTypeGetStrides(bt);
  if (strides || n != rank || fzOpGetNumOperands(store) != 2 + rank)
    return false;
  FzBlock *body = fzLoopGetBody(nest);
  for (size_t d = 0; d < n; ++d) {
    int64_t lb, ub, st;
    if (fzOpGetOperand(store, 2 + d) != fzBlockGetArgument(body, d) ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(nest, d), &lb) || lb != 0 ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(nest, n + d), &ub) ||
        ub != shape[d] ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(nest, 2 * n + d), &st) ||
        st != 1)
      return false;
  }
  return true;
}

/* Collects v and its views (transitively) into out; false when there
 * are too many or a view is not at the top level. */
static bool aliases(FzBlock *body, FzValue *v, FzValue **out, size_t *n) {
  if (*n >= NARROW_MAX_ALIASES)
    return false;
  out[(*n)++] = v;
  for (FzOpOperand *u = fzValueGetFirstUse(v); u; u = fzOpOperandGetNextUse(u)) {
    FzOp *o = fzOpOperandGetOwner(u);
    if (fzLoopGetOpcode(o) != FZ_LOOP_OP_VIEW || fzOpOperandGetIndex(u) != 0)
      continue;
    if (fzOpGetBlock(o) != body || !aliases(body, fzOpGetResult(o, 0), out, n))
      return false;
  }
  return true;
}

/* Whether top-level op t lies in [first, last]. */
static bool within(FzOp *t, FzOp *first, FzOp *last) {
  return t == first || t == last ||
         (fzOpIsBeforeInBlock(first, t) && fzOpIsBeforeInBlock(t, last));
}

static bool analyze(FzBlock *body, FzOp *def, Narrow *w) {
  memset(w, 0, sizeof *w);
  w->def = def;
  FzValue *B = fzOpGetResult(def, 0);
  FzType *bt = fzValueGetType(B);
  if (fzTypeGetKind(bt) != FZ_TYPE_BUFFER ||
      !is_int(fzShapedTypeGetElementType(bt), 32) ||
      fzShapedTypeGetRank(bt) == 0)
    return false;
  bool isView = fzLoopGetOpcode(def) == FZ_LOOP_OP_VIEW;
  FzValue *root = tileRootOf(B);
  FzOp *rootDef = fzValueGetDefiningOp(root);
  if (!rootDef || fzLoopGetOpcode(rootDef) != FZ_LOOP_OP_ALLOC ||
      fzOpGetBlock(rootDef) != body)
    return false;
  size_t loads = 0;
  for (FzOpOperand *u = fzValueGetFirstUse(B); u; u = fzOpOperandGetNextUse(u)) {
    FzOp *o = fzOpOperandGetOwner(u);
    FzLoopOpcode c = fzLoopGetOpcode(o);
    if (c == FZ_LOOP_OP_LOAD && fzOpOperandGetIndex(u) == 0) {
      ++loads;
    } else if (c == FZ_LOOP_OP_STORE && fzOpOperandGetIndex(u) == 1 &&
               !w->store) {
      w->store = o;
    } else if (c == FZ_LOOP_OP_DEALLOC && !isView &&
               fzOpGetBlock(o) == body && !w->dealloc) {
      w->dealloc = o;
    } else if (c != FZ_LOOP_OP_VIEW || fzOpOperandGetIndex(u) != 0) {
      return false;
    }
  }
  if (!w->store || !loads)
    return false;
  w->nest = fzBlockGetParentOp(fzOpGetBlock(w->store));
  if (!w->nest || fzLoopGetOpcode(w->nest) != FZ_LOOP_OP_PARALLEL ||
      fzOpGetBlock(w->nest) != body || !identity_store(w->store, w->nest, bt))
    return false;
  /* ext(b) [- z], z at the top level before the nest. */
  FzValue *v = fzOpGetOperand(w->store, 0);
  FzOp *d = fzValueGetDefiningOp(v);
  if (d && fzLoopGetOpcode(d) == FZ_LOOP_OP_SUBI) {
    FzValue *z = fzOpGetOperand(d, 1);
    FzOp *zd = fzValueGetDefiningOp(z);
    if (!zd || fzOpGetBlock(zd) != body || !fzOpIsBeforeInBlock(zd, w->nest))
      return false;
    w->z = z;
    d = fzValueGetDefiningOp(fzOpGetOperand(d, 0));
  }
  if (!d || (fzLoopGetOpcode(d) != FZ_LOOP_OP_EXTSI &&
             fzLoopGetOpcode(d) != FZ_LOOP_OP_EXTUI))
    return false;
  w->ext = d;
  w->byte = fzOpGetOperand(d, 0);
  if (!is_int(fzValueGetType(w->byte), 8))
    return false;
  /* Every reader comes after the nest. */
  w->last = w->nest;
  for (FzOpOperand *u = fzValueGetFirstUse(B); u; u = fzOpOperandGetNextUse(u)) {
    FzOp *o = fzOpOperandGetOwner(u);
    if (fzLoopGetOpcode(o) != FZ_LOOP_OP_LOAD)
      continue;
    FzOp *t = top_of(body, o);
    if (!t || t == w->nest || !fzOpIsBeforeInBlock(w->nest, t))
      return false;
    if (fzOpIsBeforeInBlock(w->last, t))
      w->last = t;
  }
  /* The memory's other names (plan-memory's reuse: the root and its
   * views) are not used while these values live, from the nest to the
   * last reader. */
  FzValue *al[NARROW_MAX_ALIASES];
  size_t na = 0;
  if (!aliases(body, root, al, &na))
    return false;
  for (size_t i = 0; i < na; ++i) {
    if (al[i] == B)
      continue;
    for (FzOpOperand *u = fzValueGetFirstUse(al[i]); u;
         u = fzOpOperandGetNextUse(u)) {
      FzOp *o = fzOpOperandGetOwner(u);
      FzLoopOpcode c = fzLoopGetOpcode(o);
      if (c == FZ_LOOP_OP_DEALLOC ||
          (c == FZ_LOOP_OP_VIEW && fzOpOperandGetIndex(u) == 0))
        continue;
      FzOp *t = top_of(body, o);
      if (!t || within(t, w->nest, w->last))
        return false;
    }
  }
  return true;
}

/* When b is a load, at the nest's ivs, of a buffer of B's shape that no
 * op stores to (nor views), that buffer; else NULL. */
static FzValue *forwarded_source(FzBlock *body, const Narrow *w) {
  FzOp *l = fzValueGetDefiningOp(w->byte);
  if (!l || fzLoopGetOpcode(l) != FZ_LOOP_OP_LOAD ||
      fzOpGetBlock(l) != fzOpGetBlock(w->store))
    return NULL;
  FzValue *S = fzOpGetOperand(l, 0);
  FzType *st = fzValueGetType(S);
  FzType *bt = fzValueGetType(fzOpGetResult(w->def, 0));
  size_t rank = fzShapedTypeGetRank(bt);
  if (fzShapedTypeGetRank(st) != rank || fzBufferTypeGetStrides(st) ||
      fzOpGetNumOperands(l) != 1 + rank ||
      memcmp(fzShapedTypeGetShape(st), fzShapedTypeGetShape(bt),
             rank * sizeof(int64_t)) != 0)
    return NULL;
  FzBlock *nb = fzLoopGetBody(w->nest);
  for (size_t d = 0; d < rank; ++d)
    if (fzOpGetOperand(l, 1 + d) != fzBlockGetArgument(nb, d))
      return NULL;
  FzOp *sd = fzValueGetDefiningOp(S);
  bool isArg = fzValueIsBlockArgument(S) && fzValueGetParentBlock(S) == body;
  bool isConst = sd && fzOpGetBlock(sd) == body &&
                 fzLoopGetOpcode(sd) == FZ_LOOP_OP_CONSTANT_BUFFER;
  if (!isArg && !isConst)
    return NULL;
  for (FzOpOperand *u = fzValueGetFirstUse(S); u; u = fzOpOperandGetNextUse(u)) {
    FzLoopOpcode c = fzLoopGetOpcode(fzOpOperandGetOwner(u));
    if (c != FZ_LOOP_OP_LOAD && c != FZ_LOOP_OP_VECTOR_LOAD)
      return NULL;
  }
  return S;
}

/* Whether the nest has no effect left: no store, nothing but pure ops. */
static bool nest_is_dead(FzOp *nest) {
  FzBlock *b = fzLoopGetBody(nest);
  for (FzOp *op = fzBlockGetFirstOp(b); op; op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (c == FZ_LOOP_OP_YIELD || c == FZ_LOOP_OP_LOAD)
      continue;
    if (!tilePlainOp(op))
      return false;
  }
  return true;
}

static bool rewrite(FzContext *ctx, FzBlock *body, Narrow *w) {
  bool failed = false;
  FzLoc *loc = fzOpGetLoc(w->def);
  FzBuilder ip;
  fzBuilderInit(&ip, ctx);
  fzBuilderSetInsertionPointBefore(&ip, w->nest);
  FzLoopBuilder b;
  fzBInit(&b, ctx, &ip, loc, NULL, &failed);
  FzValue *B = fzOpGetResult(w->def, 0);
  FzType *bt = fzValueGetType(B);
  FzValue *src = forwarded_source(body, w);
  if (!src) {
    FzType *t8 = fzBufferTypeGet(ctx, fzShapedTypeGetRank(bt),
                                 fzShapedTypeGetShape(bt),
                                 fzIntegerTypeGet(ctx, 8), NULL, 0, NULL);
    if (!t8)
      return false;
    src = fzBOp1(&b, "loop.alloc", 0, NULL, t8);
    if (!src)
      return false;
    FzLoopBuilder sb = fzBAfter(&b, w->store);
    FzValue *ops[2 + TILE_MAX_DIMS];
    size_t n = fzOpGetNumOperands(w->store);
    if (n > 2 + TILE_MAX_DIMS)
      return false;
    ops[0] = w->byte;
    ops[1] = src;
    for (size_t i = 2; i < n; ++i)
      ops[i] = fzOpGetOperand(w->store, i);
    if (!fzBOp(&sb, "loop.store", n, ops, NULL))
      return false;
    FzLoopBuilder db = fzBAfter(&b, w->last);
    if (!fzBOp(&db, "loop.dealloc", 1, &src, NULL))
      return false;
  }
  FzType *i32 = fzShapedTypeGetElementType(bt);
  /* The readers. */
  for (FzOpOperand *u = fzValueGetFirstUse(B), *nu; u; u = nu) {
    nu = fzOpOperandGetNextUse(u);
    FzOp *l = fzOpOperandGetOwner(u);
    if (fzLoopGetOpcode(l) != FZ_LOOP_OP_LOAD)
      continue;
    FzLoopBuilder lb = fzBBefore(&b, l);
    size_t n = fzOpGetNumOperands(l);
    FzValue *ops[1 + TILE_MAX_DIMS];
    if (n > 1 + TILE_MAX_DIMS)
      return false;
    ops[0] = src;
    for (size_t i = 1; i < n; ++i)
      ops[i] = fzOpGetOperand(l, i);
    FzValue *v = fzBOp1(&lb, "loop.load", n, ops, fzIntegerTypeGet(ctx, 8));
    v = v ? fzBCloneWith(&lb, w->ext, &v, i32) : NULL;
    if (v && w->z)
      v = fzBBinary(&lb, "loop.subi", v, w->z);
    if (!v || failed)
      return false;
    /* nu may be this load's use of B; it goes with the load. */
    while (nu && fzOpOperandGetOwner(nu) == l)
      nu = fzOpOperandGetNextUse(nu);
    fzValueReplaceAllUsesWith(fzOpGetResult(l, 0), v);
    fzOpErase(l);
  }
  fzOpErase(w->store);
  /* The buffer goes when nothing else names it. */
  size_t uses = fzValueGetNumUses(B);
  if (uses == 0 || (uses == 1 && w->dealloc)) {
    if (w->dealloc)
      fzOpErase(w->dealloc);
    fzOpErase(w->def);
  }
  if (nest_is_dead(w->nest))
    fzOpErase(w->nest);
  return !failed;
}

bool tileInt8Narrow(FzOp *func) {
  FzRegion *r = fzOpGetNumRegions(func) ? fzOpGetRegion(func, 0) : NULL;
  FzBlock *body = r ? fzRegionGetFirstBlock(r) : NULL;
  if (!body)
    return true;
  FzContext *ctx = fzOpGetContext(func);
  /* The allocs and views first: a rewrite erases ops after them (and
   * only the one it analyzed among them). */
  FzPtrVec allocs;
  fzPtrVecInit(&allocs, ctx);
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op))
    if ((fzLoopGetOpcode(op) == FZ_LOOP_OP_ALLOC ||
         fzLoopGetOpcode(op) == FZ_LOOP_OP_VIEW) &&
        !fzPtrVecPush(&allocs, op)) {
      fzPtrVecFree(&allocs);
      return false;
    }
  bool ok = true;
  for (size_t i = 0; ok && i < allocs.len; ++i) {
    FzOp *op = allocs.data[i];
    Narrow w;
    if (!analyze(body, op, &w))
      continue;
    if (!rewrite(ctx, body, &w)) {
      fzEmitError(ctx, fzOpGetLoc(op),
                  "tile-int8-contractions: internal error while narrowing");
      ok = false;
    }
  }
  fzPtrVecFree(&allocs);
  return ok;
}

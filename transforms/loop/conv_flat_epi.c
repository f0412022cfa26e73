/* transforms/loop/conv_flat_epi.c - the flat mapping's epilogue on the
 * accumulators, for grids without unused positions.
 *
 * When the grid is the output plane itself (Wq == OW: a 1x1 conv, or any
 * KW == 1 one, unpadded along the width, and OH OW a whole number of
 * tiles), the epilogue nest that conv_flat.c leaves (the original nest
 * reading the sums) has its (oh, ow) dims collapsed into one p
 * (fzLoopCollapseParallelDims: every access to them is an index pair of
 * a buffer contiguous there), and its body is emitted in each tile for
 * every (row, vector) after the reduction: the load of the sums becomes
 * the accumulator, loads indexed by p become vector loads of W positions
 * (a residual), loads that do not depend on p stay scalar (a bias, a
 * batch_norm's statistics) and are splatted where a vector needs them,
 * the arithmetic runs on vectors, and the stores are vector stores. The
 * sums never go to memory and the epilogue nest goes.
 *
 * The check (a dry run of the same walk) comes first; any op it cannot
 * vectorize (p used as a value, a loop, a load indexed by p elsewhere
 * than last) leaves the sums buffer and the nest as they were.
 */
#include <string.h>

#include "dialects/loop/nest_rewrite.h"
#include "fz/loop.h"
#include "transforms/loop/conv_internal.h"

/* Erases the body's ops (last to first) whose results are unused and
 * that write nothing: what the reduction's removal left (the padding's
 * index arithmetic), which would keep the collapse from applying. */
static void erase_dead(FzBlock *body) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (FzOp *op = fzBlockGetLastOp(body), *prev; op; op = prev) {
      prev = fzOpGetPrevInBlock(op);
      FzLoopOpcode c = fzLoopGetOpcode(op);
      if ((c != FZ_LOOP_OP_LOAD && !tilePlainOp(op)) ||
          fzOpGetNumResults(op) != 1 ||
          fzValueHasUses(fzOpGetResult(op, 0)))
        continue;
      fzOpErase(op);
      changed = true;
    }
  }
}

typedef struct EpiWalk {
  Flat *F;
  FzOp *nest;
  FzValue *iv[3]; /* n, m, p */
  bool build;
  FzBuilder *b;
  FzValue *n, *m, *p, *acc; /* the tile's values (build) */
  FzPtrMap vals;            /* nest value -> tile value (build) */
  FzPtrMap onP;             /* nest values that depend on p */
} EpiWalk;

static bool on_p(EpiWalk *E, FzValue *v) {
  return v == E->iv[2] || fzPtrMapContains(&E->onP, v);
}

/* The tile's value of nest value v (scalar or vector as built). */
static FzValue *get(EpiWalk *E, FzValue *v) {
  if (v == E->iv[0])
    return E->n;
  if (v == E->iv[1])
    return E->m;
  FzValue *r = fzPtrMapGet(&E->vals, v);
  return r ? r : v; /* defined outside the nest */
}

static bool is_vec(FzValue *v) {
  return fzTypeGetKind(fzValueGetType(v)) == FZ_TYPE_VECTOR;
}

/* v as a vector<W> (a splat of a scalar). */
static FzValue *as_vec(EpiWalk *E, FzValue *v) {
  TileGen *G = &E->F->Z.G;
  if (!v || is_vec(v))
    return v;
  return tileMake1(G, E->b, "loop.splat", 1, &v,
                   tileVectorType(G, fzValueGetType(v)));
}

static bool put(EpiWalk *E, FzValue *from, FzValue *to) {
  if (!to || !fzPtrMapPut(&E->vals, from, to))
    return (E->F->Z.G.failed = true, false);
  return true;
}

/* One op of the nest's body; false when it cannot be vectorized. */
static bool walk_op(EpiWalk *E, FzOp *op) {
  TileGen *G = &E->F->Z.G;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  size_t n = fzOpGetNumOperands(op);
  if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_STORE) {
    size_t bi = fzLoopMemGetBufferOperand(op);
    FzValue *buf = fzOpGetOperand(op, bi);
    if (n - bi - 1 > TILE_MAX_DIMS || fzValueGetParentBlock(buf) ==
                                          fzLoopGetBody(E->nest))
      return false;
    bool pLast = false;
    for (size_t i = bi + 1; i < n; ++i) {
      FzValue *ix = fzOpGetOperand(op, i);
      if (ix == E->iv[2] && i == n - 1)
        pLast = true;
      else if (on_p(E, ix))
        return false;
    }
    bool sums = c == FZ_LOOP_OP_LOAD && tileRootOf(buf) == E->F->s;
    if (sums && !pLast)
      return false;
    if (c == FZ_LOOP_OP_LOAD) {
      FzValue *r = fzOpGetResult(op, 0);
      if (pLast && !fzPtrMapPut(&E->onP, r, r))
        return (G->failed = true, false);
      if (!E->build)
        return true;
      if (sums)
        return put(E, r, E->acc);
      FzValue *ops[TILE_MAX_DIMS + 1];
      ops[0] = buf;
      for (size_t i = 1; i < n; ++i)
        ops[i] = pLast && i == n - 1 ? E->p : get(E, fzOpGetOperand(op, i));
      FzType *et = fzValueGetType(r);
      return put(E, r,
                 pLast ? tileMake1(G, E->b, "loop.vector_load", n, ops,
                                   tileVectorType(G, et))
                       : tileMake1(G, E->b, "loop.load", n, ops, et));
    }
    /* A store: of W positions along p (a scalar value is splatted). */
    if (!pLast)
      return false;
    if (!E->build)
      return true;
    FzValue *ops[TILE_MAX_DIMS + 2];
    for (size_t i = 0; i < n; ++i)
      ops[i] = i == n - 1 ? E->p : get(E, fzOpGetOperand(op, i));
    ops[0] = as_vec(E, ops[0]);
    return tileMake(G, E->b, "loop.vector_store", n, ops, NULL) != NULL;
  }
  if (!tilePlainOp(op) || fzOpGetNumResults(op) != 1 || n > 8)
    return false;
  bool dep = false;
  for (size_t i = 0; i < n; ++i) {
    FzValue *o = fzOpGetOperand(op, i);
    if (o == E->iv[2])
      return false; /* p as a value: no vector of indices */
    dep = dep || on_p(E, o);
  }
  FzValue *r = fzOpGetResult(op, 0);
  if (dep && !fzPtrMapPut(&E->onP, r, r))
    return (G->failed = true, false);
  if (!E->build)
    return true;
  FzValue *ops[8];
  bool vec = false;
  for (size_t i = 0; i < n; ++i) {
    ops[i] = get(E, fzOpGetOperand(op, i));
    vec = vec || (ops[i] && is_vec(ops[i]));
  }
  FzType *rt = fzValueGetType(r);
  if (vec) {
    for (size_t i = 0; i < n; ++i)
      ops[i] = as_vec(E, ops[i]);
    rt = tileVectorType(G, rt);
  }
  return put(E, r, tileCloneWith(G, E->b, op, ops, rt));
}

static bool walk(EpiWalk *E) {
  FzBlock *body = fzLoopGetBody(E->nest);
  fzPtrMapInit(&E->vals, E->F->Z.G.ctx);
  fzPtrMapInit(&E->onP, E->F->Z.G.ctx);
  bool ok = true;
  for (FzOp *op = fzBlockGetFirstOp(body); ok && op;
       op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_YIELD)
      ok = walk_op(E, op);
  fzPtrMapFree(&E->vals);
  fzPtrMapFree(&E->onP);
  return ok && !E->F->Z.G.failed;
}

/* Whether a load of nest's body reads a buffer (by its root) that a
 * store of it writes. */
static bool reads_stored(FzOp *nest) {
  FzBlock *body = fzLoopGetBody(nest);
  for (FzOp *st = fzBlockGetFirstOp(body); st; st = fzOpGetNextInBlock(st)) {
    if (fzLoopGetOpcode(st) != FZ_LOOP_OP_STORE)
      continue;
    FzValue *out = tileRootOf(fzOpGetOperand(st, fzLoopMemGetBufferOperand(st)));
    for (FzOp *ld = fzBlockGetFirstOp(body); ld; ld = fzOpGetNextInBlock(ld))
      if (fzLoopGetOpcode(ld) == FZ_LOOP_OP_LOAD &&
          tileRootOf(fzOpGetOperand(ld, fzLoopMemGetBufferOperand(ld))) == out)
        return true;
  }
  return false;
}

bool convFlatPrepareEpilogue(Flat *F) {
  ConvNest *C = F->Z.C;
  TileNest *T = &C->T;
  if (F->Wq != T->trips[CV_OW] || F->Lp != F->P)
    return false;
  erase_dead(T->body);
  bool failed = false;
  FzOp *nest = fzLoopCollapseParallelDims(T->par, 2, &failed, NULL, 0);
  if (!nest) {
    F->Z.G.failed = failed;
    return false;
  }
  T->par = nest; /* the old op is gone */
  EpiWalk E;
  memset(&E, 0, sizeof E);
  E.F = F;
  E.nest = nest;
  for (int d = 0; d < 3; ++d)
    E.iv[d] = fzBlockGetArgument(fzLoopGetBody(nest), (size_t)d);
  if (!walk(&E))
    return false;
  /* An overlapping last tile stores some positions twice: the second
   * time must compute what the first did, so no load may read what a
   * store writes (an in-place residual). */
  if (F->overlap && reads_stored(nest))
    return false;
  F->epi = nest;
  return true;
}

bool convFlatEmitEpilogue(Flat *F, FzBuilder *b, FzValue *n, FzValue *m,
                          FzValue *p, FzValue *acc) {
  EpiWalk E;
  memset(&E, 0, sizeof E);
  E.F = F;
  E.nest = F->epi;
  for (int d = 0; d < 3; ++d)
    E.iv[d] = fzBlockGetArgument(fzLoopGetBody(F->epi), (size_t)d);
  E.build = true;
  E.b = b;
  E.n = n;
  E.m = m;
  E.p = p;
  E.acc = acc;
  if (!walk(&E))
    F->Z.G.failed = true;
  return !F->Z.G.failed;
}

/* The tile's value of nest value v for an index of a store: the ivs, a
 * value from outside the nest, or plain index arithmetic on those
 * (cloned at E->b); NULL for anything else (a load, p). */
static FzValue *index_value(EpiWalk *E, FzValue *v, int depth) {
  if (v == E->iv[0])
    return E->n;
  if (v == E->iv[1])
    return E->m;
  if (v == E->iv[2] || depth > 16)
    return NULL;
  FzBlock *body = fzLoopGetBody(E->nest);
  if (fzValueIsBlockArgument(v))
    return fzValueGetParentBlock(v) == body ? NULL : v;
  FzOp *def = fzValueGetDefiningOp(v);
  if (fzOpGetBlock(def) != body)
    return v;
  FzValue *r = fzPtrMapGet(&E->vals, v);
  if (r)
    return r;
  size_t n = fzOpGetNumOperands(def);
  if (!tilePlainOp(def) || fzOpGetNumResults(def) != 1 || n > 8)
    return NULL;
  FzValue *ops[8];
  for (size_t i = 0; i < n; ++i)
    if (!(ops[i] = index_value(E, fzOpGetOperand(def, i), depth + 1)))
      return NULL;
  r = tileCloneWith(&E->F->Z.G, E->b, def, ops, fzValueGetType(v));
  return r && fzPtrMapPut(&E->vals, v, r) ? r : NULL;
}

bool convFlatEmitPrefetch(Flat *F, FzBuilder *b, FzValue *n, FzValue *m,
                          FzValue *p) {
  EpiWalk E;
  memset(&E, 0, sizeof E);
  E.F = F;
  E.nest = F->epi;
  for (int d = 0; d < 3; ++d)
    E.iv[d] = fzBlockGetArgument(fzLoopGetBody(F->epi), (size_t)d);
  E.b = b;
  E.n = n;
  E.m = m;
  fzPtrMapInit(&E.vals, F->Z.G.ctx);
  for (FzOp *op = fzBlockGetFirstOp(fzLoopGetBody(F->epi)); op;
       op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE)
      continue;
    size_t bi = fzLoopMemGetBufferOperand(op), no = fzOpGetNumOperands(op);
    FzValue *ops[TILE_MAX_DIMS + 1];
    if (no - bi > TILE_MAX_DIMS + 1)
      continue;
    ops[0] = fzOpGetOperand(op, bi);
    bool ok = true;
    for (size_t i = bi + 1; ok && i < no; ++i)
      ok = (ops[i - bi] = i == no - 1 ? p
                                      : index_value(&E, fzOpGetOperand(op, i),
                                                    0)) != NULL;
    if (ok)
      tileMake(&F->Z.G, b, "loop.prefetch", no - bi, ops, NULL);
  }
  fzPtrMapFree(&E.vals);
  return !F->Z.G.failed;
}

void convFlatDropSums(Flat *F) {
  FzOp *epi = F->epi;
  FzBlock *top = fzOpGetBlock(epi);
  fzOpErase(epi);
  /* The views of the sums that the nest read, then the buffer. */
  bool changed = true;
  while (changed) {
    changed = false;
    for (FzOp *op = fzBlockGetFirstOp(top), *next; op; op = next) {
      next = fzOpGetNextInBlock(op);
      if (fzLoopGetOpcode(op) == FZ_LOOP_OP_VIEW &&
          tileRootOf(fzOpGetResult(op, 0)) == F->s &&
          !fzValueHasUses(fzOpGetResult(op, 0))) {
        fzOpErase(op);
        changed = true;
      }
    }
  }
  FzOp *alloc = fzValueGetDefiningOp(F->s);
  if (alloc && !fzValueHasUses(F->s)) {
    fzOpErase(alloc);
    F->s = NULL;
  }
}

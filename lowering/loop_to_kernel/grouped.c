/* lowering/loop_to_kernel/grouped.c - the rows and columns mappings:
 * several threads share one outer iteration of a nest (a row, or a
 * column). docs/codegen.md "GPU mappings" gives the heuristic (plan.c).
 *
 * Kernel shape (ROWS; COLUMNS differs where said):
 *   loop.for %blk = block_id to numBlocks step grid_dim {  block-uniform
 *     item = blk * itemsPerBlock + tid / G   (COLUMNS: tid % 32)
 *     g    = tid % G                          (COLUMNS: tid / 32)
 *     an item past the end is clamped to the last one (its loads stay in
 *     bounds and it takes part in every shuffle and barrier); its stores
 *     are skipped.
 *     the body's ops in order:
 *       row-level ops      every thread computes them (uniform values);
 *                          stores by the group's thread 0 only
 *       loop.for reduction each thread folds its chunks (c = g + k*G,
 *                          `vec` consecutive iterations each, side by
 *                          side with loads first) into a partial started
 *                          at the combining op's identity; partials are
 *                          combined by kernel.shuffle xor within the
 *                          warp, then (G > 32) through shared memory
 *                          (lane 0 of each warp writes its warp's total);
 *                          every thread gets the total (COLUMNS: shared
 *                          memory [G][32]); the loop's init is folded in
 *                          last
 *       loop.parallel      its chunks are dealt to the group's threads
 *       loop.barrier       kernel.barrier; nothing when the nest stores
 *                          into no buffer it reads (no phase reads what
 *                          another one wrote)
 *     kernel.barrier when shared memory was used and the block has
 *     another item to do (the arrays are reused)
 *   }
 * A thread's chunks are unrolled when few (every access then has a
 * constant offset from the thread's first, so LLVM keeps the row in
 * registers across phases), else a loop.for of 4 chunks per trip. A
 * guarded chunk (threads past the end of the row skip it) is a loop.for
 * of at most one iteration. The combining op is the reduction's own
 * (the yield's operand), cloned on the partials, so NaN and rounding
 * rules are the loop's (only the association order differs).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

typedef struct Group {
  FzLkBuild *kb;
  const FzLkNest *nest;
  const FzLkNestPlan *p;
  FzValue *tid;    /* index */
  FzValue *g;      /* index: this thread's rank in its group */
  FzValue *valid;  /* i1: the thread's item exists */
  FzValue *leader; /* i1: valid and g == 0 */
  FzLkMap *map;    /* the item's values */
  bool usedShared;
} Group;

/*===--- Plan -------------------------------------------------------------===*/

static bool plan(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                 FzLkPlan *p) {
  FzLkNestPlan *np = calloc(1, sizeof *np);
  if (!np)
    return false;
  fzLkPlanNest(nest, o, np);
  if (np->mapping == FZ_LK_MAP_ELEMENTWISE) {
    free(np);
    return false;
  }
  p->state = np;
  fzLkPlanLaunch(np, p);
  fzLkPlanDescribe(nest, np, p->desc, sizeof p->desc);
  return true;
}

static void release(FzLkPlan *p) {
  free(p->state);
  p->state = NULL;
}

/*===--- Combining partial results ----------------------------------------===*/

/* cop applied to (acc, x): acc takes the place of the loop's iteration
 * argument. */
static FzValue *combine(Group *G, FzOp *cop, FzValue *acc, FzValue *x) {
  FzLkBuild *kb = G->kb;
  FzBlock *body = fzOpGetBlock(cop);
  FzValue *a = fzOpGetOperand(cop, 0), *b = fzOpGetOperand(cop, 1);
  bool accFirst = fzValueIsBlockArgument(a) &&
                  fzValueGetParentBlock(a) == body && fzValueGetIndex(a) > 0;
  FzLkMap tmp;
  fzLkMapInit(&tmp, kb->ctx, NULL);
  FzOp *c = acc && x && fzLkMapPut(&tmp, a, accFirst ? acc : x) &&
                    fzLkMapPut(&tmp, b, accFirst ? x : acc)
                ? fzLkClone(kb, &tmp, cop)
                : NULL;
  fzLkMapFree(&tmp);
  if (!c)
    kb->failed = true;
  return c ? fzOpGetResult(c, 0) : NULL;
}

/* The identity of cop's operation in type t. */
static FzValue *identity(FzLkBuild *kb, FzOp *cop, FzType *t) {
  FzTypeKind k = fzTypeGetKind(t);
  unsigned w = k == FZ_TYPE_INDEX ? 64 : fzTypeGetBitWidth(t);
  double f = 0;
  int64_t i = 0;
  switch (fzLoopGetOpcode(cop)) {
  case FZ_LOOP_OP_ADDF:
    f = -0.0;
    break;
  case FZ_LOOP_OP_MULF:
    f = 1.0;
    break;
  case FZ_LOOP_OP_MAXF:
    f = -INFINITY;
    break;
  case FZ_LOOP_OP_MINF:
    f = INFINITY;
    break;
  case FZ_LOOP_OP_MULI:
    i = 1;
    break;
  case FZ_LOOP_OP_ANDI:
    i = -1;
    break;
  case FZ_LOOP_OP_MAXSI:
    i = w >= 64 ? INT64_MIN : -((int64_t)1 << (w - 1));
    break;
  case FZ_LOOP_OP_MINSI:
    i = w >= 64 ? INT64_MAX : ((int64_t)1 << (w - 1)) - 1;
    break;
  default: /* addi, ori, xori */
    break;
  }
  return fzTypeIsFloat(t) ? fzLkConst(kb, t, f) : fzLkConstInt(kb, t, i);
}

/* What shuffles and shared memory carry for a value of type t (index,
 * which has no fixed size there, travels as i64). */
static FzType *carried(FzLkBuild *kb, FzType *t) {
  return fzTypeGetKind(t) == FZ_TYPE_INDEX ? fzIntegerTypeGet(kb->ctx, 64)
                                           : t;
}

static FzValue *to_carried(FzLkBuild *kb, FzValue *v) {
  return fzLkCast(kb, "loop.index_cast", v,
                  carried(kb, fzValueGetType(v)));
}

static FzValue *xor_shuffle(FzLkBuild *kb, FzValue *v, unsigned off) {
  FzType *t = fzValueGetType(v);
  FzValue *r = fzLkShuffleXor(kb, to_carried(kb, v), off);
  return fzLkCast(kb, "loop.index_cast", r, t);
}

/* The combination of the partials v of the group's threads, in every
 * thread of the group. */
static FzValue *group_combine(Group *G, FzOp *cop, FzValue *v) {
  FzLkBuild *kb = G->kb;
  unsigned gs = G->p->group;
  FzType *t = fzValueGetType(v);
  FzType *ct = carried(kb, t);
  if (G->p->mapping == FZ_LK_MAP_ROWS) {
    for (unsigned off = (gs < 32 ? gs : 32) / 2; off >= 1 && v; off /= 2)
      v = combine(G, cop, v, xor_shuffle(kb, v, off));
    if (gs <= 32 || !v)
      return v;
    /* One row per block: lane 0 of each warp writes its warp's total,
     * then every thread folds them. */
    unsigned nw = gs / 32;
    FzValue *arr = fzLkSharedAlloc(kb, ct, nw);
    FzValue *c32 = fzLkIndex(kb, 32);
    FzValue *warp = fzLkDiv(kb, G->tid, c32);
    FzValue *lane0 =
        fzLkCmp(kb, "eq", fzLkRem(kb, G->tid, c32), fzLkIndex(kb, 0));
    FzOp *guard = fzLkIfBegin(kb, lane0, 0, NULL, NULL);
    if (!guard || !fzLkStore(kb, to_carried(kb, v), arr, 1, &warp) ||
        !fzLkForEnd(kb, guard, 0, NULL) || !fzLkBarrier(kb))
      return NULL;
    G->usedShared = true;
    FzValue *i0 = fzLkIndex(kb, 0);
    FzValue *r = fzLkCast(kb, "loop.index_cast", fzLkLoad(kb, arr, 1, &i0),
                          t);
    for (unsigned w = 1; w < nw && r; ++w) {
      FzValue *iw = fzLkIndex(kb, w);
      r = combine(G, cop, r,
                  fzLkCast(kb, "loop.index_cast", fzLkLoad(kb, arr, 1, &iw),
                           t));
    }
    return r;
  }
  /* COLUMNS: the partial of (column x, slice y) at [y][x] = [tid]. */
  unsigned n = gs * 32;
  FzValue *arr = fzLkSharedAlloc(kb, ct, n);
  if (!fzLkStore(kb, to_carried(kb, v), arr, 1, &G->tid) || !fzLkBarrier(kb))
    return NULL;
  G->usedShared = true;
  FzValue *x = fzLkRem(kb, G->tid, fzLkIndex(kb, 32));
  FzValue *r = fzLkCast(kb, "loop.index_cast", fzLkLoad(kb, arr, 1, &x), t);
  for (unsigned y = 1; y < gs && r; ++y) {
    FzValue *at = fzLkAdd(kb, x, fzLkIndex(kb, (int64_t)y * 32));
    r = combine(G, cop, r,
                fzLkCast(kb, "loop.index_cast", fzLkLoad(kb, arr, 1, &at),
                         t));
  }
  return r;
}

/*===--- Inner loops ------------------------------------------------------===*/

/* The vec iterations of chunk c of inner loop ip, side by side, the
 * accumulators acc carried through in order. */
static bool emit_chunk(Group *G, const FzLkInnerPlan *ip, FzValue *c,
                       FzValue **acc, size_t numAcc) {
  FzLkBuild *kb = G->kb;
  FzBlock *body = fzLoopGetBody(ip->loop);
  FzOp *last = fzBlockGetLastOp(body);
  FzLkUnroll U;
  if (!fzLkUnrollInit(&U, kb, body, 1, ip->vec, G->map, NULL, NULL))
    return false;
  bool ok = true;
  FzValue *iv = fzBlockGetArgument(body, 0);
  FzValue *first = fzLkMul(kb, c, fzLkIndex(kb, ip->vec));
  for (unsigned u = 0; u < ip->vec && ok; ++u)
    ok = fzLkMapPut(
        &U.maps[u], iv,
        fzLkAdd(kb, fzLkIndex(kb, ip->lb),
                fzLkMul(kb, fzLkAdd(kb, first, fzLkIndex(kb, u)),
                        fzLkIndex(kb, ip->step))));
  for (unsigned u = 0; u < ip->vec && ok; ++u)
    ok = fzLkUnrollPhase(&U, u, 0);
  for (unsigned u = 0; u < ip->vec && ok; ++u) {
    for (size_t i = 0; i < numAcc && ok; ++i)
      ok = fzLkMapPut(&U.maps[u], fzBlockGetArgument(body, i + 1), acc[i]);
    ok = ok && fzLkUnrollPhase(&U, u, 1);
    for (size_t i = 0; i < numAcc && ok; ++i)
      ok = (acc[i] = fzLkMapGet(&U.maps[u], fzOpGetOperand(last, i))) !=
           NULL;
  }
  for (unsigned u = 0; u < ip->vec && ok; ++u)
    ok = fzLkUnrollPhase(&U, u, 2);
  fzLkUnrollFree(&U);
  if (!ok)
    kb->failed = true;
  return ok && !kb->failed;
}

/* This thread's chunks of ip: unrolled (each guarded where some threads
 * have fewer chunks), or a loop. acc are carried through. */
static bool emit_chunks(Group *G, const FzLkInnerPlan *ip, FzValue **acc,
                        size_t numAcc) {
  FzLkBuild *kb = G->kb;
  int64_t gs = G->p->group;
  FzValue *chunks = fzLkIndex(kb, ip->chunks);
  if (ip->unroll) {
    for (int64_t k = 0; k < ip->perThread; ++k) {
      FzValue *c = fzLkAdd(kb, G->g, fzLkIndex(kb, k * gs));
      if ((k + 1) * gs <= ip->chunks) {
        if (!emit_chunk(G, ip, c, acc, numAcc))
          return false;
        continue;
      }
      /* Threads whose chunk is past the end skip it: one iteration from
       * c to chunks when c < chunks. */
      FzValue *cc, *iters[FZ_LK_MAX_ACCUMULATORS];
      FzOp *guard =
          fzLkForBegin(kb, c, chunks, chunks, numAcc, acc, &cc, iters);
      if (!guard || !emit_chunk(G, ip, cc, iters, numAcc) ||
          !fzLkForEnd(kb, guard, numAcc, iters))
        return false;
      for (size_t i = 0; i < numAcc; ++i)
        acc[i] = fzOpGetResult(guard, i);
    }
    return !kb->failed;
  }
  /* Four chunks per trip when every thread has a multiple of four: four
   * loads in flight per thread instead of one. */
  int64_t per = ip->chunks % gs == 0 && ip->perThread % 4 == 0 ? 4 : 1;
  FzValue *c, *iters[FZ_LK_MAX_ACCUMULATORS];
  FzOp *loop = fzLkForBegin(kb, G->g, chunks, fzLkIndex(kb, per * gs),
                            numAcc, acc, &c, iters);
  if (!loop)
    return false;
  for (int64_t k = 0; k < per; ++k)
    if (!emit_chunk(G, ip, fzLkAdd(kb, c, fzLkIndex(kb, k * gs)), iters,
                    numAcc))
      return false;
  if (!fzLkForEnd(kb, loop, numAcc, iters))
    return false;
  for (size_t i = 0; i < numAcc; ++i)
    acc[i] = fzOpGetResult(loop, i);
  return !kb->failed;
}

static bool emit_reduction(Group *G, const FzLkInnerPlan *ip) {
  FzLkBuild *kb = G->kb;
  FzOp *loop = ip->loop;
  size_t k = fzOpGetNumResults(loop);
  FzValue *acc[FZ_LK_MAX_ACCUMULATORS];
  FzOp *cops[FZ_LK_MAX_ACCUMULATORS];
  for (size_t i = 0; i < k; ++i) {
    cops[i] = fzLkReductionCombine(loop, i);
    acc[i] = identity(kb, cops[i], fzValueGetType(fzOpGetResult(loop, i)));
  }
  if (!emit_chunks(G, ip, acc, k))
    return false;
  for (size_t i = 0; i < k; ++i) {
    FzValue *total = group_combine(G, cops[i], acc[i]);
    FzValue *init = fzLkMapGet(G->map, fzOpGetOperand(loop, 3 + i));
    FzValue *r = total && init ? combine(G, cops[i], init, total) : NULL;
    if (!r || !fzLkMapPut(G->map, fzOpGetResult(loop, i), r)) {
      kb->failed = true;
      return false;
    }
  }
  return !kb->failed;
}

static bool emit_phase(Group *G, const FzLkInnerPlan *ip) {
  FzLkBuild *kb = G->kb;
  /* Items past the end write nothing (their reads were clamped). */
  bool ragged = G->nest->items % G->p->itemsPerBlock != 0;
  FzOp *guard = ragged ? fzLkIfBegin(kb, G->valid, 0, NULL, NULL) : NULL;
  if (ragged && !guard)
    return false;
  if (!emit_chunks(G, ip, NULL, 0))
    return false;
  return !ragged || fzLkForEnd(kb, guard, 0, NULL);
}

/*===--- The nest ---------------------------------------------------------===*/

static const FzLkInnerPlan *inner_plan(const FzLkNestPlan *p, FzOp *op) {
  for (size_t i = 0; i < p->numInner; ++i)
    if (p->inner[i].loop == op)
      return &p->inner[i];
  return NULL;
}

static bool emit_item(Group *G, FzValue *item) {
  FzLkBuild *kb = G->kb;
  const FzLkNest *nest = G->nest;
  const FzLkNestPlan *p = G->p;
  FzBlock *body = fzLoopGetBody(nest->par);
  /* Delinearize (row-major) into the nest's variables. */
  FzValue *q = item;
  for (size_t d = nest->numDims; d-- > 0;) {
    FzValue *k = q;
    if (d > 0) {
      FzValue *tr = fzLkIndex(kb, nest->trips[d]);
      k = fzLkRem(kb, q, tr);
      q = fzLkDiv(kb, q, tr);
    }
    if (!fzLkMapPut(G->map, fzBlockGetArgument(body, d),
                    fzLkAdd(kb, fzLkIndex(kb, nest->lb[d]),
                            fzLkMul(kb, k, fzLkIndex(kb, nest->step[d])))))
      return kb->failed = true, false;
  }
  FzOp *last = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); op && !kb->failed;
       op = fzOpGetNextInBlock(op)) {
    if (op == last && fzLoopGetOpcode(op) == FZ_LOOP_OP_YIELD)
      break;
    FzLoopOpcode c = fzLoopGetOpcode(op);
    bool ok = true;
    if (c == FZ_LOOP_OP_FOR || c == FZ_LOOP_OP_PARALLEL) {
      const FzLkInnerPlan *ip = inner_plan(p, op);
      if (!ip) {
        fzOpEmitError(op, "lower-loop-to-kernel: internal error: an "
                          "unplanned inner loop");
        return kb->failed = true, false;
      }
      ok = c == FZ_LOOP_OP_FOR ? emit_reduction(G, ip) : emit_phase(G, ip);
    } else if (c == FZ_LOOP_OP_BARRIER) {
      ok = !p->phasesShareMemory || fzLkBarrier(kb);
    } else if (c == FZ_LOOP_OP_STORE) {
      FzOp *guard = fzLkIfBegin(kb, G->leader, 0, NULL, NULL);
      ok = guard && fzLkClone(kb, G->map, op) &&
           fzLkForEnd(kb, guard, 0, NULL);
    } else {
      ok = fzLkClone(kb, G->map, op) != NULL;
    }
    if (!ok)
      return false;
  }
  return !kb->failed;
}

static bool build(FzLkBuild *kb, const FzLkPlan *plan) {
  const FzLkNestPlan *p = plan->state;
  const FzLkNest *nest = kb->nest;
  Group G;
  memset(&G, 0, sizeof G);
  G.kb = kb;
  G.nest = nest;
  G.p = p;
  G.tid = fzLkId(kb, "kernel.thread_id");
  FzValue *bid = fzLkId(kb, "kernel.block_id");
  FzValue *nb = fzLkId(kb, "kernel.grid_dim");
  FzValue *local;
  if (p->mapping == FZ_LK_MAP_ROWS) {
    FzValue *gsz = fzLkIndex(kb, p->group);
    G.g = fzLkRem(kb, G.tid, gsz);
    local = fzLkDiv(kb, G.tid, gsz);
  } else {
    FzValue *c32 = fzLkIndex(kb, 32);
    G.g = fzLkDiv(kb, G.tid, c32);
    local = fzLkRem(kb, G.tid, c32);
  }
  FzValue *numBlocks = fzLkIndex(kb, p->numBlocks);
  FzValue *blk;
  FzOp *loop = fzLkForBegin(kb, bid, numBlocks, nb, 0, NULL, &blk, NULL);
  if (!loop)
    return false;
  FzValue *item =
      fzLkAdd(kb, fzLkMul(kb, blk, fzLkIndex(kb, p->itemsPerBlock)), local);
  FzValue *items = fzLkIndex(kb, nest->items);
  G.valid = fzLkCmp(kb, "slt", item, items);
  item = fzLkSelect(kb, G.valid, item, fzLkIndex(kb, nest->items - 1));
  G.leader = fzLkBin(kb, "loop.andi", G.valid,
                     fzLkCmp(kb, "eq", G.g, fzLkIndex(kb, 0)));
  FzLkMap map;
  fzLkMapInit(&map, kb->ctx, &kb->base);
  G.map = &map;
  bool ok = emit_item(&G, item);
  if (ok && G.usedShared) { /* a next item (block-uniform) reuses them */
    FzValue *next = fzLkAdd(kb, blk, nb);
    FzOp *guard =
        fzLkIfBegin(kb, fzLkCmp(kb, "slt", next, numBlocks), 0, NULL, NULL);
    ok = guard && fzLkBarrier(kb) && fzLkForEnd(kb, guard, 0, NULL);
  }
  fzLkMapFree(&map);
  return ok && fzLkForEnd(kb, loop, 0, NULL) && !kb->failed;
}

const FzLkMapping fzLkGroupedMapping = {
    .name = "grouped",
    .plan = plan,
    .build = build,
    .release = release,
};

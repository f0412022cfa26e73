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
 *                          (COLUMNS: a store along its variable goes
 *                          through a shared-memory tile per chunk rank,
 *                          written out along the variable after a
 *                          barrier: emit_transposed_phase)
 *       loop.barrier       kernel.barrier; nothing when the nest stores
 *                          into no buffer it reads (no phase reads what
 *                          another one wrote)
 *     kernel.barrier when shared memory was used and the block has
 *     another item to do (the arrays are reused)
 *   }
 * A thread's chunks are unrolled when few (every access then has a
 * constant offset from the thread's first, so LLVM keeps the row in
 * registers across phases), else a loop.for of 4 chunks per trip. The
 * on-chip row (plan.c's staging, one row per block): in the loops that
 * share the staged layout, a thread's first regChunks chunks are
 * unrolled and the rest is a loop; the producer of a staged input loads
 * it from global memory and keeps it (the register chunks' values as
 * SSA values, the rest stored to its part of the dynamic shared memory
 * at the same place in the row, less the register part), the later
 * loops take those values instead of loading (each thread reads back
 * only what it wrote: no barrier). A
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
  FzValue *local;  /* index: its item's rank in the block */
  FzValue *blk;    /* index: the block's item group (block-uniform) */
  FzValue *valid;  /* i1: the thread's item exists */
  FzValue *leader; /* i1: valid and g == 0 */
  FzLkMap *map;    /* the item's values */
  bool usedShared;
  /* The on-chip row (p->numStaged inputs): each input's part of the
   * dynamic shared memory (buffer<sharedElems x elt, 3>; NULL when it
   * is all in registers), and the values of its register chunks,
   * regs[s][k * vec + u] for chunk rank k < regChunks, lane u. */
  FzValue *stage[FZ_LK_MAX_STAGED];
  FzValue **regs[FZ_LK_MAX_STAGED];
} Group;

/* Where a chunk of a staged loop finds its staged inputs. */
typedef enum ChunkKind {
  CHUNK_PLAIN,  /* not a staged loop: every load as it is */
  CHUNK_REGS,   /* register chunk k of the thread */
  CHUNK_SHARED, /* past the register chunks: shared memory */
} ChunkKind;

/*===--- Plan -------------------------------------------------------------===*/

static bool plan(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                 FzLkPlan *p) {
  FzLkNestPlan *np = fzCalloc(p->ctx, 1, sizeof *np);
  if (!np) /* recorded */
    return p->failed = true, false;
  fzLkPlanNest(nest, o, np);
  if (np->mapping == FZ_LK_MAP_ELEMENTWISE) {
    fzFree(p->ctx, np);
    return false;
  }
  p->state = np;
  fzLkPlanLaunch(np, p);
  fzLkPlanDescribe(nest, np, p->desc, sizeof p->desc);
  return true;
}

static void release(FzLkPlan *p) {
  fzFree(p->ctx, p->state);
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

/* One chunk being emitted: the `vec` iterations of chunk c of inner
 * loop ip side by side (fzLkUnroll), in three steps so that a staged
 * loop can put the loads of several chunks before their arithmetic:
 * chunk_begin (the loads), chunk_compute (the arithmetic, the
 * accumulators carried through in order), chunk_end (the stores). In a
 * staged loop (kind CHUNK_REGS, rank k, or CHUNK_SHARED), the loads of
 * staged inputs other than their producer's take the values kept on
 * chip (registers, or their shared memory, read in chunk_begin), and
 * the producer's are kept (at the end of chunk_compute). */
typedef struct Chunk {
  const FzLkInnerPlan *ip;
  FzValue *c;
  ChunkKind kind;
  int64_t k;
  FzLkUnroll U;
  int *input;    /* per op of the body: the staged input it loads, or -1 */
  bool *produce; /* per op: that input's load from global memory */
  FzValue *views[FZ_LK_MAX_STAGED]; /* the chunk's shared memory */
  FzContext *ctx;                   /* input's and produce's */
} Chunk;

static void chunk_free(Chunk *ch) {
  fzFree(ch->ctx, ch->input);
  fzFree(ch->ctx, ch->produce);
  fzLkUnrollFree(&ch->U);
  ch->input = NULL;
  ch->produce = NULL;
}

/* The view of the chunk's `vec` elements in staged input s's shared
 * memory (made once per chunk). */
static FzValue *stage_view(Group *G, Chunk *ch, size_t s) {
  FzLkBuild *kb = G->kb;
  if (ch->views[s])
    return ch->views[s];
  int64_t skip = G->p->regChunks * G->p->group;
  FzValue *off = fzLkMul(kb, fzLkAdd(kb, ch->c, fzLkIndex(kb, -skip)),
                         fzLkIndex(kb, ch->ip->vec));
  int64_t lanes = ch->ip->vec;
  FzType *vt = fzBufferTypeGet(kb->ctx, 1, &lanes, G->p->staged[s].elt, NULL,
                               FZ_KERNEL_SPACE_SHARED, kb->loc);
  FzValue *ops[2] = {G->stage[s], off};
  if (!vt || !G->stage[s])
    return kb->failed = true, NULL;
  return ch->views[s] = fzLkOp(kb, "loop.view", vt, 2, ops);
}

static bool chunk_begin(Group *G, Chunk *ch, const FzLkInnerPlan *ip,
                        FzValue *c, ChunkKind kind, int64_t k) {
  FzLkBuild *kb = G->kb;
  const FzLkNestPlan *p = G->p;
  memset(ch, 0, sizeof *ch);
  ch->ip = ip, ch->c = c, ch->kind = kind, ch->k = k;
  ch->ctx = kb->ctx;
  FzBlock *body = fzLoopGetBody(ip->loop);
  if (!fzLkUnrollInit(&ch->U, kb, body, 1, ip->vec, G->map, NULL, NULL))
    return false;
  FzLkUnroll *U = &ch->U;
  FzValue *iv = fzBlockGetArgument(body, 0);
  FzValue *first = fzLkMul(kb, c, fzLkIndex(kb, ip->vec));
  bool ok = true;
  for (unsigned u = 0; u < ip->vec && ok; ++u)
    ok = fzLkMapPut(
        &U->maps[u], iv,
        fzLkAdd(kb, fzLkIndex(kb, ip->lb),
                fzLkMul(kb, fzLkAdd(kb, first, fzLkIndex(kb, u)),
                        fzLkIndex(kb, ip->step))));
  ch->input = fzCalloc(kb->ctx, U->numOps + 1, sizeof *ch->input);
  ch->produce = fzCalloc(kb->ctx, U->numOps + 1, sizeof *ch->produce);
  ok = ok && ch->input && ch->produce;
  for (size_t i = 0; ok && i < U->numOps; ++i) {
    int s = kind == CHUNK_PLAIN ? -1 : fzLkStagedValueOf(p, ip, U->ops[i]);
    ch->input[i] = s;
    if (s < 0)
      continue;
    const FzLkStagedValue *si = &p->staged[s];
    ch->produce[i] = si->op == U->ops[i];
    if (!ch->produce[i] && &p->inner[si->producer] == ip) {
      ch->input[i] = -1; /* another load of it in the producer: as it is */
      continue;
    }
    U->skip[i] = !ch->produce[i];
    FzValue *res = fzOpGetResult(U->ops[i], 0);
    for (unsigned u = 0; u < ip->vec && ok && !ch->produce[i]; ++u) {
      FzValue *v = NULL, *view;
      FzValue *lane = fzLkIndex(kb, u);
      if (kind == CHUNK_REGS)
        v = G->regs[s][k * ip->vec + u];
      else if ((view = stage_view(G, ch, (size_t)s)))
        v = fzLkLoad(kb, view, 1, &lane);
      ok = v && fzLkMapPut(&U->maps[u], res, v);
    }
  }
  fzLkUnrollSkipDead(U);
  for (unsigned u = 0; u < ip->vec && ok; ++u)
    ok = fzLkUnrollPhase(U, u, 0);
  if (!ok)
    kb->failed = true;
  return ok && !kb->failed;
}

static bool chunk_compute(Group *G, Chunk *ch, FzValue **acc,
                          size_t numAcc) {
  FzLkBuild *kb = G->kb;
  FzLkUnroll *U = &ch->U;
  unsigned vec = ch->ip->vec;
  FzBlock *body = fzLoopGetBody(ch->ip->loop);
  FzOp *last = fzBlockGetLastOp(body);
  bool ok = true;
  for (unsigned u = 0; u < vec && ok; ++u) {
    for (size_t i = 0; i < numAcc && ok; ++i)
      ok = fzLkMapPut(&U->maps[u], fzBlockGetArgument(body, i + 1), acc[i]);
    ok = ok && fzLkUnrollPhase(U, u, 1);
    for (size_t i = 0; i < numAcc && ok; ++i)
      ok = (acc[i] = fzLkMapGet(&U->maps[u], fzOpGetOperand(last, i))) !=
           NULL;
  }
  for (size_t i = 0; ok && i < U->numOps; ++i) {
    int s = ch->input[i];
    if (s < 0 || !ch->produce[i])
      continue;
    FzValue *res = fzOpGetResult(U->ops[i], 0), *view;
    for (unsigned u = 0; u < vec && ok; ++u) {
      FzValue *v = fzLkMapGet(&U->maps[u], res);
      FzValue *lane = fzLkIndex(kb, u);
      if (ch->kind == CHUNK_REGS)
        ok = (G->regs[s][ch->k * vec + u] = v) != NULL;
      else
        ok = (view = stage_view(G, ch, (size_t)s)) &&
             fzLkStore(kb, v, view, 1, &lane);
    }
  }
  if (!ok)
    kb->failed = true;
  return ok && !kb->failed;
}

static bool chunk_end(Group *G, Chunk *ch) {
  bool ok = true;
  for (unsigned u = 0; u < ch->ip->vec && ok; ++u)
    ok = fzLkUnrollPhase(&ch->U, u, 2);
  chunk_free(ch);
  if (!ok)
    G->kb->failed = true;
  return ok && !G->kb->failed;
}

/* Chunk c of ip whole (kind CHUNK_PLAIN: not a staged loop). */
static bool emit_chunk(Group *G, const FzLkInnerPlan *ip, FzValue *c,
                       FzValue **acc, size_t numAcc) {
  Chunk ch;
  bool ok = chunk_begin(G, &ch, ip, c, CHUNK_PLAIN, -1) &&
            chunk_compute(G, &ch, acc, numAcc) && chunk_end(G, &ch);
  chunk_free(&ch);
  return ok;
}

/* n chunks of a staged loop, rank k0.. (CHUNK_REGS) or at c0 + j * G
 * (CHUNK_SHARED): every chunk's loads, then every chunk's arithmetic,
 * then every chunk's stores, so that the chunks' loads from global
 * memory are in flight together. */
static bool emit_staged_chunks(Group *G, const FzLkInnerPlan *ip,
                               FzValue *c0, ChunkKind kind, int64_t k0,
                               int64_t n, FzValue **acc, size_t numAcc) {
  FzLkBuild *kb = G->kb;
  int64_t gs = G->p->group;
  Chunk *ch = fzCalloc(kb->ctx, (size_t)n + 1, sizeof *ch);
  if (!ch)
    return kb->failed = true, false;
  bool produces = false;
  for (size_t s = 0; s < G->p->numStaged; ++s)
    produces |= &G->p->inner[G->p->staged[s].producer] == ip;
  /* Only the producer reads global memory: the other loops go chunk by
   * chunk (their values are on chip; fewer live registers). */
  int64_t step = produces ? n : 1;
  bool ok = true;
  int64_t begun = 0;
  for (int64_t j0 = 0; j0 < n && ok; j0 += step) {
    int64_t j1 = j0 + step < n ? j0 + step : n;
    for (int64_t j = j0; j < j1 && ok; ++j, ++begun)
      ok = chunk_begin(G, &ch[j], ip,
                       fzLkAdd(kb, c0,
                               fzLkIndex(kb, (kind == CHUNK_REGS ? k0 + j
                                                                 : j) *
                                                 gs)),
                       kind, k0 + j);
    for (int64_t j = j0; j < j1 && ok; ++j)
      ok = chunk_compute(G, &ch[j], acc, numAcc);
    for (int64_t j = j0; j < j1 && ok; ++j)
      ok = chunk_end(G, &ch[j]);
  }
  for (int64_t j = 0; j < begun; ++j)
    chunk_free(&ch[j]);
  fzFree(kb->ctx, ch);
  return ok;
}

/* This thread's chunks of ip: unrolled (each guarded where some threads
 * have fewer chunks), or a loop. acc are carried through. */
static bool emit_chunks(Group *G, const FzLkInnerPlan *ip, FzValue **acc,
                        size_t numAcc) {
  FzLkBuild *kb = G->kb;
  int64_t gs = G->p->group;
  FzValue *chunks = fzLkIndex(kb, ip->chunks);
  if (ip->staged) {
    /* The chunks past the register ones in a loop (four per trip when
     * every thread has a multiple of four, else two or one), then the
     * register chunks (every thread has them: no guard). In this order,
     * the producer's loads of the loop trips are in flight together
     * while no register chunk is live yet (the register chunks stay
     * live until the last loop). */
    int64_t R = G->p->regChunks;
    if (ip->chunks > R * gs) {
      int64_t rest = ip->perThread - R;
      int64_t per = ip->chunks % gs != 0 ? 1
                    : rest % 4 == 0      ? 4
                    : rest % 2 == 0      ? 2
                                         : 1;
      FzValue *c, *iters[FZ_LK_MAX_ACCUMULATORS];
      FzOp *loop = fzLkForBegin(
          kb, fzLkAdd(kb, G->g, fzLkIndex(kb, R * gs)), chunks,
          fzLkIndex(kb, per * gs), numAcc, acc, &c, iters);
      if (!loop ||
          !emit_staged_chunks(G, ip, c, CHUNK_SHARED, -1, per, iters,
                              numAcc) ||
          !fzLkForEnd(kb, loop, numAcc, iters))
        return false;
      for (size_t i = 0; i < numAcc; ++i)
        acc[i] = fzOpGetResult(loop, i);
    }
    if (R > 0 && !emit_staged_chunks(G, ip, G->g, CHUNK_REGS, 0, R, acc,
                                     numAcc))
      return false;
    return !kb->failed;
  }
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

static bool emit_transposed_phase(Group *G, const FzLkInnerPlan *ip);

static bool emit_phase(Group *G, const FzLkInnerPlan *ip) {
  FzLkBuild *kb = G->kb;
  if (ip->transposed)
    return emit_transposed_phase(G, ip);
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

/* The nest's variables of item (row-major) into map. */
static bool bind_item(Group *G, FzLkMap *map, FzValue *item) {
  FzLkBuild *kb = G->kb;
  const FzLkNest *nest = G->nest;
  FzBlock *body = fzLoopGetBody(nest->par);
  FzValue *q = item;
  for (size_t d = nest->numDims; d-- > 0;) {
    FzValue *k = q;
    if (d > 0) {
      FzValue *tr = fzLkIndex(kb, nest->trips[d]);
      k = fzLkRem(kb, q, tr);
      q = fzLkDiv(kb, q, tr);
    }
    if (!fzLkMapPut(map, fzBlockGetArgument(body, d),
                    fzLkAdd(kb, fzLkIndex(kb, nest->lb[d]),
                            fzLkMul(kb, k, fzLkIndex(kb, nest->step[d])))))
      return kb->failed = true, false;
  }
  return !kb->failed;
}

static bool emit_item(Group *G, FzValue *item) {
  FzLkBuild *kb = G->kb;
  const FzLkNest *nest = G->nest;
  const FzLkNestPlan *p = G->p;
  FzBlock *body = fzLoopGetBody(nest->par);
  if (!bind_item(G, G->map, item))
    return false;
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

/* The on-chip row's storage: each staged input's part of the dynamic
 * shared memory (a view of it at its offset) and its register table. */
static bool setup_staging(Group *G) {
  FzLkBuild *kb = G->kb;
  const FzLkNestPlan *p = G->p;
  for (size_t s = 0; s < p->numStaged; ++s) {
    const FzLkStagedValue *si = &p->staged[s];
    int64_t vec = 0;
    for (size_t i = 0; i < p->numInner; ++i)
      if (p->inner[i].staged)
        vec = p->inner[i].vec;
    G->regs[s] =
        fzCalloc(kb->ctx, (size_t)(p->regChunks * vec + 1), sizeof(FzValue *));
    if (!G->regs[s])
      return kb->failed = true, false;
    if (si->sharedElems == 0)
      continue;
    int64_t size = (int64_t)fzTypeGetStorageSize(si->elt);
    FzType *t = fzBufferTypeGet(kb->ctx, 1, &si->sharedElems, si->elt, NULL,
                                FZ_KERNEL_SPACE_SHARED, kb->loc);
    FzValue *ops[2] = {fzLkDynamicShared(kb, si->elt),
                       fzLkIndex(kb, si->sharedOffset / size)};
    if (!t || !(G->stage[s] = fzLkOp(kb, "loop.view", t, 2, ops)))
      return kb->failed = true, false;
  }
  return true;
}

/*===--- Columns phases stored along their variable -----------------------===*/

/* Whether op is a store of ip's body whose last index is its variable. */
static bool is_transposed_store(const FzLkInnerPlan *ip, FzOp *op) {
  return fzLoopGetOpcode(op) == FZ_LOOP_OP_STORE &&
         fzOpGetNumOperands(op) >= 3 &&
         fzOpGetOperand(op, fzLkAccessLastIndex(op)) ==
             fzBlockGetArgument(fzLoopGetBody(ip->loop), 0);
}

/* v for another iteration, whose variables map binds: the pure index
 * arithmetic (plan.c: fzLkIndexIsPure) cloned again. */
static FzValue *recompute(FzLkBuild *kb, FzLkMap *map, FzValue *v,
                          unsigned depth) {
  FzValue *r = fzLkMapGet(map, v);
  if (r || kb->failed)
    return r;
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || depth > 32) {
    kb->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    if (!recompute(kb, map, fzOpGetOperand(def, i), depth + 1))
      return NULL;
  return fzLkClone(kb, map, def) ? fzLkMapGet(map, v) : NULL;
}

/* Transposed stores: per store, two tiles of G x FZ_LK_TILE_PITCH (the
 * chunk ranks alternate between them); what the write-out of every
 * chunk shares. */
typedef struct Tiles {
  FzOp *stores[FZ_LK_MAX_TRANSPOSED];
  FzValue *tiles[FZ_LK_MAX_TRANSPOSED];
  size_t n;
  FzValue *cl;    /* index: the element of the chunk this thread writes */
  FzValue *at;    /* index: its place in a tile, cl * pitch + column */
  FzValue *valid; /* i1: its column exists */
  FzLkMap outer;  /* the nest's variables of its column */
} Tiles;

/* Chunk rank k (index; the same in every thread) of a transposed phase:
 * the thread's chunk c = g + k * G (clamped to the last when past the
 * end: it takes part in the barrier, its results are not stored) with
 * its transposed stores written to the tile at [g][column], its other
 * stores guarded; a barrier; then the tile written out, thread t taking
 * the block's column t / G at chunk k * G + t % G, so that consecutive
 * threads store consecutive elements along the variable. */
static bool emit_transposed_chunk(Group *G, const FzLkInnerPlan *ip,
                                  const Tiles *T, FzValue *k) {
  FzLkBuild *kb = G->kb;
  const FzLkNestPlan *p = G->p;
  int64_t gs = p->group;
  FzBlock *body = fzLoopGetBody(ip->loop);
  FzValue *iv = fzBlockGetArgument(body, 0);
  FzValue *c = fzLkAdd(kb, G->g, fzLkMul(kb, k, fzLkIndex(kb, gs)));
  FzValue *chunks = fzLkIndex(kb, ip->chunks);
  FzValue *inb = NULL;
  if (ip->chunks % gs != 0) {
    inb = fzLkCmp(kb, "slt", c, chunks);
    c = fzLkSelect(kb, inb, c, fzLkIndex(kb, ip->chunks - 1));
  }
  FzValue *half = fzLkMul(kb, fzLkRem(kb, k, fzLkIndex(kb, 2)),
                          fzLkIndex(kb, gs * FZ_LK_TILE_PITCH));
  FzLkUnroll U;
  if (!fzLkUnrollInit(&U, kb, body, 1, 1, G->map, NULL, NULL))
    return kb->failed = true, false;
  bool ok = fzLkMapPut(&U.maps[0], iv,
                       fzLkAdd(kb, fzLkIndex(kb, ip->lb),
                               fzLkMul(kb, c, fzLkIndex(kb, ip->step))));
  for (size_t i = 0; i < U.numOps; ++i)
    U.skip[i] = fzLoopGetOpcode(U.ops[i]) == FZ_LOOP_OP_STORE;
  for (unsigned ph = 0; ph < 3 && ok; ++ph)
    ok = fzLkUnrollPhase(&U, 0, ph);
  FzValue *mine = fzLkAdd(kb, fzLkAdd(kb, half, G->local),
                          fzLkMul(kb, G->g, fzLkIndex(kb, FZ_LK_TILE_PITCH)));
  FzValue *keep = inb ? fzLkBin(kb, "loop.andi", G->valid, inb) : G->valid;
  for (size_t i = 0; i < U.numOps && ok; ++i) {
    FzOp *st = U.ops[i];
    if (!U.skip[i])
      continue;
    size_t t = 0;
    while (t < T->n && T->stores[t] != st)
      ++t;
    if (t < T->n) {
      FzValue *v = fzLkMapGet(&U.maps[0], fzOpGetOperand(st, 0));
      ok = v && fzLkStore(kb, v, T->tiles[t], 1, &mine);
      continue;
    }
    FzOp *guard = fzLkIfBegin(kb, keep, 0, NULL, NULL);
    ok = guard && fzLkClone(kb, &U.maps[0], st) &&
         fzLkForEnd(kb, guard, 0, NULL);
  }
  fzLkUnrollFree(&U);
  if (!ok || !fzLkBarrier(kb))
    return kb->failed = true, false;
  /* The write-out. */
  FzValue *at = fzLkAdd(kb, half, T->at);
  FzValue *c2 = fzLkAdd(kb, fzLkMul(kb, k, fzLkIndex(kb, gs)), T->cl);
  FzValue *out = T->valid;
  if (ip->chunks % gs != 0)
    out = fzLkBin(kb, "loop.andi", out, fzLkCmp(kb, "slt", c2, chunks));
  FzOp *guard = fzLkIfBegin(kb, out, 0, NULL, NULL);
  if (!guard)
    return kb->failed = true, false;
  FzLkMap m;
  fzLkMapInit(&m, kb->ctx, &T->outer);
  ok = fzLkMapPut(&m, iv,
                  fzLkAdd(kb, fzLkIndex(kb, ip->lb),
                          fzLkMul(kb, c2, fzLkIndex(kb, ip->step))));
  for (size_t t = 0; t < T->n && ok; ++t) {
    FzOp *st = T->stores[t];
    size_t n = fzOpGetNumOperands(st);
    FzValue *idx[FZ_LK_MAX_DIMS];
    FzValue *buf = recompute(kb, &m, fzOpGetOperand(st, 1), 0);
    ok = buf && n - 2 <= FZ_LK_MAX_DIMS;
    for (size_t d = 2; d < n && ok; ++d)
      ok = (idx[d - 2] = recompute(kb, &m, fzOpGetOperand(st, d), 0)) !=
           NULL;
    FzValue *v = ok ? fzLkLoad(kb, T->tiles[t], 1, &at) : NULL;
    ok = v && fzLkStore(kb, v, buf, n - 2, idx);
  }
  fzLkMapFree(&m);
  if (!ok || !fzLkForEnd(kb, guard, 0, NULL))
    return kb->failed = true, false;
  return !kb->failed;
}

/* A columns phase whose stores along its variable (ip->transposed) go
 * through shared memory: chunk ranks 0..perThread-1, unrolled or in a
 * loop, each thread doing every rank (the barriers are block-wide). */
static bool emit_transposed_phase(Group *G, const FzLkInnerPlan *ip) {
  FzLkBuild *kb = G->kb;
  Tiles T;
  memset(&T, 0, sizeof T);
  FzBlock *body = fzLoopGetBody(ip->loop);
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (!is_transposed_store(ip, op))
      continue;
    if (T.n == FZ_LK_MAX_TRANSPOSED)
      return kb->failed = true, false; /* planned: cannot happen */
    FzType *elt = fzValueGetType(fzOpGetOperand(op, 0));
    T.stores[T.n] = op;
    if (!(T.tiles[T.n++] = fzLkSharedAlloc(
              kb, elt, 2 * (int64_t)G->p->group * FZ_LK_TILE_PITCH)))
      return kb->failed = true, false;
  }
  G->usedShared = true;
  /* Thread t writes out column t / G of the block, element t % G of
   * each chunk. */
  int64_t gs = G->p->group;
  FzValue *xo = fzLkDiv(kb, G->tid, fzLkIndex(kb, gs));
  T.cl = fzLkRem(kb, G->tid, fzLkIndex(kb, gs));
  T.at = fzLkAdd(kb, xo, fzLkMul(kb, T.cl, fzLkIndex(kb, FZ_LK_TILE_PITCH)));
  FzValue *item = fzLkAdd(
      kb, fzLkMul(kb, G->blk, fzLkIndex(kb, G->p->itemsPerBlock)), xo);
  T.valid = fzLkCmp(kb, "slt", item, fzLkIndex(kb, G->nest->items));
  item = fzLkSelect(kb, T.valid, item, fzLkIndex(kb, G->nest->items - 1));
  fzLkMapInit(&T.outer, kb->ctx, &kb->base);
  bool ok = bind_item(G, &T.outer, item);
  if (ok && ip->unroll) {
    for (int64_t k = 0; k < ip->perThread && ok; ++k)
      ok = emit_transposed_chunk(G, ip, &T, fzLkIndex(kb, k));
  } else if (ok) {
    FzValue *k;
    FzOp *loop =
        fzLkForBegin(kb, fzLkIndex(kb, 0), fzLkIndex(kb, ip->perThread),
                     fzLkIndex(kb, 1), 0, NULL, &k, NULL);
    ok = loop && emit_transposed_chunk(G, ip, &T, k) &&
         fzLkForEnd(kb, loop, 0, NULL);
  }
  fzLkMapFree(&T.outer);
  return ok && !kb->failed;
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
  G.local = local;
  FzValue *numBlocks = fzLkIndex(kb, p->numBlocks);
  FzValue *blk;
  FzOp *loop = setup_staging(&G) ? fzLkForBegin(kb, bid, numBlocks, nb, 0,
                                                NULL, &blk, NULL)
                                 : NULL;
  if (!loop) {
    for (size_t i = 0; i < p->numStaged; ++i)
      fzFree(kb->ctx, G.regs[i]);
    return false;
  }
  G.blk = blk;
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
  for (size_t i = 0; i < p->numStaged; ++i)
    fzFree(kb->ctx, G.regs[i]);
  return ok && fzLkForEnd(kb, loop, 0, NULL) && !kb->failed;
}

const FzLkMapping fzLkGroupedMapping = {
    .name = "grouped",
    .plan = plan,
    .build = build,
    .release = release,
};

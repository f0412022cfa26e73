/* transforms/loop/stage_rows.c - stage-rows: a value that a row's
 * reduction loop computes and a later phase of the same row computes
 * again (softmax's exp(x - max): summed by the reduction, divided by
 * the sum in the consumer phase) is stored into a per-row scratch
 * buffer by the reduction loop and loaded by the later phase.
 *
 * In a top-level loop.parallel body (a row), for a loop.for reduction F
 * over [0, N) and a later 1-d loop.parallel Q over [0, N) of the same
 * body: when Q computes a value u that is F's accumulated term v with
 * F's iv replaced by Q's (the same ops, properties, types, and operands
 * equal or equivalent), and v's computation holds a math function (exp,
 * log, tanh, erf, pow, ...; cheaper terms are recomputed rather than
 * staged), then
 *   - `%s = loop.alloc : buffer<N x T>` opens the row, `loop.dealloc %s`
 *     closes it (at most max-bytes: a CPU code generator keeps it on the
 *     stack of the thread running the row, where it stays in L1/L2);
 *   - F stores v at s[k]; Q's u becomes `loop.load %s[j]`, and what only
 *     u used is erased.
 * Loads in v must read buffers that the nest never writes, so that F and
 * Q see the same values.
 *
 * A CPU-only step: emit-llvm runs it (FzCodegenOptions.stageRows); the
 * GPU back end keeps a row in registers and recomputes instead, so the
 * loop IR it reads does not have it.
 */
#include <string.h>

#include "fz/loop.h"
#include "fz/pass.h"
#include "ir/util.h"

static bool const_eq(FzValue *v, int64_t want) {
  int64_t x;
  return fzLoopValueGetConstantInt(v, &x) && x == want;
}

/* Trip count of a loop over [0, N) step 1 given its operands. */
static bool zero_to(FzValue *lb, FzValue *ub, FzValue *step, int64_t *n) {
  return const_eq(lb, 0) && const_eq(step, 1) &&
         fzLoopValueGetConstantInt(ub, n) && *n > 0;
}

static FzValue *root_of(FzValue *b) {
  for (;;) {
    FzOp *def = fzValueGetDefiningOp(b);
    if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_VIEW)
      return b;
    b = fzOpGetOperand(def, 0);
  }
}

typedef struct Match {
  FzValue *ivF, *ivQ;
  FzBlock *bodyF, *bodyQ;
  const FzPtrMap *written; /* roots stored to by the nest */
  bool math;               /* v's ops include a math function */
} Match;

static bool is_math(FzLoopOpcode c) {
  switch (c) {
  case FZ_LOOP_OP_EXP: case FZ_LOOP_OP_LOG: case FZ_LOOP_OP_LOG1P:
  case FZ_LOOP_OP_TANH: case FZ_LOOP_OP_ERF: case FZ_LOOP_OP_POWF:
  case FZ_LOOP_OP_SIN: case FZ_LOOP_OP_COS:
    return true;
  default:
    return false;
  }
}

/* Whether a (in F's body or above) and b (in Q's body or above) are the
 * same value for iv F = iv Q. */
static bool equiv(Match *M, FzValue *a, FzValue *b, unsigned depth) {
  if (a == b)
    return fzValueGetParentBlock(a) != M->bodyF; /* shared, not per k */
  if (a == M->ivF)
    return b == M->ivQ;
  FzOp *da = fzValueGetDefiningOp(a), *db = fzValueGetDefiningOp(b);
  if (!da || !db || depth > 64 || fzOpGetBlock(da) != M->bodyF ||
      fzOpGetBlock(db) != M->bodyQ)
    return false;
  FzLoopOpcode c = fzLoopGetOpcode(da);
  if (c != fzLoopGetOpcode(db) || c == FZ_LOOP_OP_UNKNOWN ||
      fzOpGetNumRegions(da) || fzOpGetNumResults(da) != 1 ||
      fzOpGetNumResults(db) != 1 ||
      fzOpGetNumOperands(da) != fzOpGetNumOperands(db) ||
      fzValueGetType(a) != fzValueGetType(b) ||
      fzOpGetPropDict(da) != fzOpGetPropDict(db))
    return false;
  if (c == FZ_LOOP_OP_LOAD) {
    if (fzPtrMapContains(M->written, root_of(fzOpGetOperand(da, 0))))
      return false;
  } else if (!fzOpHasTrait(da, FZ_TRAIT_PURE)) {
    return false;
  }
  for (size_t i = 0; i < fzOpGetNumOperands(da); ++i)
    if (!equiv(M, fzOpGetOperand(da, i), fzOpGetOperand(db, i), depth + 1))
      return false;
  if (is_math(c))
    M->math = true;
  return true;
}

static FzWalkResult collect_stores(FzOp *op, void *ud) {
  FzLoopOpcode c = fzLoopGetOpcode(op);
  if (c == FZ_LOOP_OP_STORE || c == FZ_LOOP_OP_VECTOR_STORE)
    if (!fzPtrMapPut(ud, root_of(fzOpGetOperand(op, 1)), op))
      return FZ_WALK_INTERRUPT;
  return FZ_WALK_ADVANCE;
}

/* Erases the pure ops and loads of block that nothing uses any more. */
static void erase_dead(FzBlock *block) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (FzOp *op = fzBlockGetLastOp(block), *prev; op; op = prev) {
      prev = fzOpGetPrevInBlock(op);
      FzLoopOpcode c = fzLoopGetOpcode(op);
      if (fzOpGetNumResults(op) != 1 || fzValueHasUses(fzOpGetResult(op, 0)) ||
          fzOpGetNumRegions(op) ||
          (c != FZ_LOOP_OP_LOAD && !fzOpHasTrait(op, FZ_TRAIT_PURE)))
        continue;
      fzOpErase(op);
      changed = true;
    }
  }
}

static FzOp *make(FzContext *ctx, FzBuilder *b, FzLoc *loc, const char *name,
                  size_t n, FzValue *const *ops, FzType *rt) {
  FzOpState st;
  fzOpStateInit(&st, ctx, fzStringRefFromCString(name), loc);
  fzOpStateAddOperands(&st, n, ops);
  if (rt)
    fzOpStateAddResults(&st, 1, &rt);
  return fzBuilderCreate(b, &st);
}

/* Stages F's term into the later phases of body that recompute it.
 * Returns false after an error; *count grows per phase changed. */
static bool stage(FzOp *F, FzBlock *body, const FzPtrMap *written,
                  int64_t maxBytes, size_t *count) {
  FzContext *ctx = fzOpGetContext(F);
  int64_t N;
  if (fzOpGetNumOperands(F) != 4 || fzOpGetNumResults(F) != 1 ||
      !zero_to(fzOpGetOperand(F, 0), fzOpGetOperand(F, 1),
               fzOpGetOperand(F, 2), &N))
    return true;
  FzBlock *bf = fzLoopGetBody(F);
  FzOp *yield = bf ? fzBlockGetLastOp(bf) : NULL;
  FzOp *comb = yield && fzOpGetNumOperands(yield) == 1
                   ? fzValueGetDefiningOp(fzOpGetOperand(yield, 0))
                   : NULL;
  if (!comb || fzOpGetBlock(comb) != bf || fzOpGetNumOperands(comb) != 2)
    return true;
  FzValue *acc = fzBlockGetArgument(bf, 1);
  FzValue *v = fzOpGetOperand(comb, 0) == acc ? fzOpGetOperand(comb, 1)
               : fzOpGetOperand(comb, 1) == acc ? fzOpGetOperand(comb, 0)
                                                : NULL;
  FzOp *vdef = v ? fzValueGetDefiningOp(v) : NULL;
  if (!vdef || fzOpGetBlock(vdef) != bf || !fzTypeIsFloat(fzValueGetType(v)))
    return true;
  FzType *t = fzValueGetType(v);
  int64_t bytes = N * (int64_t)fzTypeGetStorageSize(t);
  if (bytes > maxBytes)
    return true;
  FzValue *scratch = NULL;
  for (FzOp *q = fzOpGetNextInBlock(F); q; q = fzOpGetNextInBlock(q)) {
    int64_t nq;
    if (fzLoopGetOpcode(q) != FZ_LOOP_OP_PARALLEL ||
        fzLoopParallelGetNumDims(q) != 1 ||
        !zero_to(fzOpGetOperand(q, 0), fzOpGetOperand(q, 1),
                 fzOpGetOperand(q, 2), &nq) ||
        nq != N)
      continue;
    FzBlock *bq = fzLoopGetBody(q);
    Match M = {fzBlockGetArgument(bf, 0), fzBlockGetArgument(bq, 0), bf, bq,
               written, false};
    FzOp *u = NULL;
    for (FzOp *o = fzBlockGetFirstOp(bq); o && !u; o = fzOpGetNextInBlock(o)) {
      M.math = false;
      if (fzOpGetNumResults(o) == 1 &&
          equiv(&M, v, fzOpGetResult(o, 0), 0) && M.math)
        u = o;
    }
    if (!u)
      continue;
    if (!scratch) {
      FzBuilder b;
      fzBuilderInit(&b, ctx);
      fzBuilderSetInsertionPointBefore(&b, F);
      FzType *bt = fzBufferTypeGet(ctx, 1, &N, t, NULL, 0, NULL);
      FzOp *alloc = bt ? make(ctx, &b, fzOpGetLoc(F), "loop.alloc", 0, NULL,
                              bt)
                       : NULL;
      if (!alloc)
        return false;
      scratch = fzOpGetResult(alloc, 0);
      FzValue *sops[3] = {v, scratch, M.ivF};
      fzBuilderSetInsertionPointAfter(&b, vdef);
      if (!make(ctx, &b, fzOpGetLoc(vdef), "loop.store", 3, sops, NULL))
        return false;
      fzBuilderSetInsertionPointBefore(&b, fzBlockGetLastOp(body));
      if (!make(ctx, &b, fzOpGetLoc(F), "loop.dealloc", 1, &scratch, NULL))
        return false;
    }
    FzBuilder b;
    fzBuilderInit(&b, ctx);
    fzBuilderSetInsertionPointBefore(&b, u);
    FzValue *lops[2] = {scratch, M.ivQ};
    FzOp *ld = make(ctx, &b, fzOpGetLoc(u), "loop.load", 2, lops, t);
    if (!ld)
      return false;
    fzValueReplaceAllUsesWith(fzOpGetResult(u, 0), fzOpGetResult(ld, 0));
    erase_dead(bq);
    ++*count;
  }
  return true;
}

bool fzStageRows(FzOp *func, int64_t maxBytes, size_t *numStaged) {
  if (numStaged)
    *numStaged = 0;
  size_t count = 0;
  FzRegion *r = fzOpGetNumRegions(func) ? fzOpGetRegion(func, 0) : NULL;
  FzBlock *top = r ? fzRegionGetFirstBlock(r) : NULL;
  bool ok = true;
  for (FzOp *par = top ? fzBlockGetFirstOp(top) : NULL; ok && par;
       par = fzOpGetNextInBlock(par)) {
    if (fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL)
      continue;
    FzBlock *body = fzLoopGetBody(par);
    FzPtrMap written;
    fzPtrMapInit(&written, fzOpGetContext(func));
    ok = fzOpWalk(par, FZ_WALK_PRE_ORDER, collect_stores, &written) !=
         FZ_WALK_INTERRUPT;
    for (FzOp *op = body ? fzBlockGetFirstOp(body) : NULL; ok && op;
         op = fzOpGetNextInBlock(op))
      if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR)
        ok = stage(op, body, &written, maxBytes, &count);
    fzPtrMapFree(&written);
  }
  if (numStaged)
    *numStaged = count;
  return ok;
}

static const FzPassOptionDef kOptions[] = {
    {"max-bytes", FZ_PASS_OPTION_INT, "65536",
     "Largest per-row scratch buffer (bytes)", NULL, 1, (int64_t)1 << 30},
};

static const FzPassStatisticDef kStats[] = {
    {"num-staged", "Phases that load a staged value instead of recomputing it"},
};

static bool stage_run(FzPass *pass, FzOp *op) {
  size_t n = 0;
  if (!fzStageRows(op, fzPassGetIntOption(pass, "max-bytes"), &n))
    return false;
  fzPassAddStatistic(pass, 0, n);
  return true;
}

const FzPassDef fzStageRowsPassDef = {
    .argument = "stage-rows",
    .displayName = "StageRows",
    .summary = "CPU: a row's reduction stores the term a later phase "
               "recomputes (softmax's exp) into per-row scratch (loop level)",
    .anchor = "func.func",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = sizeof kStats / sizeof kStats[0],
    .run = stage_run,
};

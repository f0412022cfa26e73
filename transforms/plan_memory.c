/* transforms/plan_memory.c - plan-memory: the temporaries of a lowered
 * function (top-level loop.alloc / loop.dealloc pairs, as
 * lower-graph-to-loop makes them) are
 *
 *  1. removed when nothing reads them (with the stores into them, and
 *     then every top-level nest left without an effect);
 *  2. computed in place: a loop.parallel nest that writes temporary T
 *     at exactly its induction variables, and reads temporary I of the
 *     same type only at those same indices (before storing) when I dies
 *     at that nest, writes into I instead of T (T disappears);
 *  3. reused: a temporary takes over the memory of one that died before
 *     its first use (same element type, at least as many elements),
 *     through a loop.view, and that memory's loop.dealloc moves to the
 *     later temporary's end (linear scan, best fit).
 *
 * Liveness is by position among the function's top-level ops: a
 * temporary lives from its first to its last top-level user (a use
 * nested in a loop counts for the loop; uses through views count for the
 * viewed buffer). The pass only touches loop.alloc results with a
 * static, identity-layout type; function arguments and constant buffers
 * are never written in place. Option `memory-report` emits a remark at the
 * function: peak temporary bytes before and after (fuse-opt
 * --plan-memory=memory-report, or {memory-report} in a pipeline).
 */
#include <stdio.h>
#include <string.h>

#include "fz/loop.h"
#include "fz/pass.h"
#include "ir/util.h"

typedef struct Temp {
  FzOp *alloc;
  FzValue *value;
  FzOp *dealloc;   /* top-level loop.dealloc of value, or NULL */
  FzType *elt;
  int64_t elems, bytes;
  size_t start, end; /* first and last top-level user */
  bool reads;        /* something reads it */
  bool viewed;       /* a loop.view of it exists */
  bool gone;         /* removed or merged */
} Temp;

typedef struct Plan {
  FzContext *ctx;
  FzBlock *body;
  FzPtrMap pos;      /* top-level op -> position + 1 */
  Temp *temps;
  size_t n;
} Plan;

static size_t pos_of(Plan *P, FzOp *op) {
  while (op && fzOpGetBlock(op) != P->body)
    op = fzOpGetParentOp(op);
  void *v = op ? fzPtrMapGet(&P->pos, op) : NULL;
  return v ? (size_t)(uintptr_t)v - 1 : 0;
}

/* Scans the uses of buffer v (and of views of it) into t. */
static void scan_uses(Plan *P, Temp *t, FzValue *v) {
  for (FzOpOperand *u = fzValueGetFirstUse(v); u; u = fzOpOperandGetNextUse(u)) {
    FzOp *o = fzOpOperandGetOwner(u);
    FzLoopOpcode opc = fzLoopGetOpcode(o);
    if (opc == FZ_LOOP_OP_DEALLOC) {
      if (fzOpGetBlock(o) == P->body && v == t->value)
        t->dealloc = o;
      continue;
    }
    size_t p = pos_of(P, o);
    if (p < t->start)
      t->start = p;
    if (p > t->end)
      t->end = p;
    if (opc == FZ_LOOP_OP_VIEW) {
      t->viewed = true;
      scan_uses(P, t, fzOpGetResult(o, 0));
    } else if (opc != FZ_LOOP_OP_STORE && opc != FZ_LOOP_OP_VECTOR_STORE) {
      t->reads = true; /* loads, calls, anything unknown */
    }
  }
}

static bool collect(Plan *P) {
  size_t i = 0, cap = 0;
  for (FzOp *op = fzBlockGetFirstOp(P->body); op; op = fzOpGetNextInBlock(op)) {
    if (!fzPtrMapPut(&P->pos, op, (void *)(uintptr_t)(++i)))
      return false;
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_ALLOC)
      cap++;
  }
  P->temps = fzCalloc(P->ctx, cap + 1, sizeof *P->temps);
  if (!P->temps)
    return false;
  for (FzOp *op = fzBlockGetFirstOp(P->body); op; op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_ALLOC || fzOpGetNumOperands(op))
      continue;
    FzType *t = fzValueGetType(fzOpGetResult(op, 0));
    if (!fzShapedTypeHasStaticShape(t) || fzBufferTypeGetStrides(t))
      continue;
    Temp *x = &P->temps[P->n++];
    x->alloc = op;
    x->value = fzOpGetResult(op, 0);
    x->elt = fzShapedTypeGetElementType(t);
    x->elems = fzShapedTypeGetNumElements(t);
    x->bytes = x->elems * (int64_t)fzTypeGetStorageSize(x->elt);
    x->start = SIZE_MAX;
    x->end = 0;
    scan_uses(P, x, x->value);
    if (x->start == SIZE_MAX)
      x->start = x->end = pos_of(P, op);
  }
  return true;
}

/* Most bytes live at once among the temps (intervals by position). */
static int64_t peak_bytes(const Plan *P) {
  int64_t peak = 0;
  for (size_t i = 0; i < P->n; ++i) {
    if (P->temps[i].gone)
      continue;
    int64_t live = 0;
    size_t at = P->temps[i].start;
    for (size_t j = 0; j < P->n; ++j) {
      const Temp *t = &P->temps[j];
      if (!t->gone && t->start <= at && at <= t->end)
        live += t->bytes;
    }
    if (live > peak)
      peak = live;
  }
  return peak;
}

/* Erases a top-level op, forgetting its position (a later op may be
 * allocated at the same address). */
static void erase_top(Plan *P, FzOp *op) {
  fzPtrMapRemove(&P->pos, op);
  fzOpErase(op);
}

/*===--- 1. Temporaries nobody reads -----------------------------------===*/

static FzWalkResult erase_stores_to(FzOp *op, void *ud) {
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  if ((opc == FZ_LOOP_OP_STORE || opc == FZ_LOOP_OP_VECTOR_STORE ||
       opc == FZ_LOOP_OP_DEALLOC) &&
      fzOpGetOperand(op, opc == FZ_LOOP_OP_DEALLOC ? 0 : 1) == ud)
    fzOpErase(op);
  return FZ_WALK_ADVANCE;
}

/* Whether a top-level op has no effect left (no store, alloc, dealloc,
 * call or barrier inside) and no used result. */
static FzWalkResult find_effect(FzOp *op, void *ud) {
  (void)ud;
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  switch (opc) {
  case FZ_LOOP_OP_STORE:
  case FZ_LOOP_OP_VECTOR_STORE:
  case FZ_LOOP_OP_ALLOC:
  case FZ_LOOP_OP_DEALLOC:
  case FZ_LOOP_OP_BARRIER:
    return FZ_WALK_INTERRUPT;
  case FZ_LOOP_OP_UNKNOWN:
    return FZ_WALK_INTERRUPT; /* calls, returns, anything foreign */
  default:
    return FZ_WALK_ADVANCE;
  }
}

static bool removable(FzOp *op) {
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i)
    if (fzValueHasUses(fzOpGetResult(op, i)))
      return false;
  return fzOpWalk(op, FZ_WALK_PRE_ORDER, find_effect, NULL) !=
         FZ_WALK_INTERRUPT;
}

static size_t remove_unread(Plan *P, FzOp *func) {
  size_t removed = 0;
  for (size_t i = 0; i < P->n; ++i) {
    Temp *t = &P->temps[i];
    if (t->reads || t->viewed)
      continue;
    fzOpWalk(func, FZ_WALK_POST_ORDER, erase_stores_to, t->value);
    if (!fzValueHasUses(t->value)) {
      erase_top(P, t->alloc);
      t->gone = true;
      removed++;
    }
  }
  if (removed) {
    FzOp *next;
    for (FzOp *op = fzBlockGetFirstOp(P->body); op; op = next) {
      next = fzOpGetNextInBlock(op);
      if (fzLoopGetOpcode(op) != FZ_LOOP_OP_UNKNOWN && removable(op))
        erase_top(P, op);
    }
  }
  return removed;
}

/*===--- 2. In place ----------------------------------------------------===*/

typedef struct Access {
  FzValue *buffer;
  FzBlock *body;   /* the innermost parallel body */
  FzValue *const *ivs;
  size_t nivs;
  bool ok;         /* every access of buffer is at exactly the ivs */
  FzOp *lastLoad, *firstStore;
  size_t loads, stores;
} Access;

static bool at_ivs(FzOp *op, size_t first, const Access *A) {
  if (fzOpGetNumOperands(op) - first != A->nivs)
    return false;
  for (size_t i = 0; i < A->nivs; ++i)
    if (fzOpGetOperand(op, first + i) != A->ivs[i])
      return false;
  return true;
}

static FzWalkResult check_access(FzOp *op, void *ud) {
  Access *A = ud;
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    if (fzOpGetOperand(op, i) != A->buffer)
      continue;
    bool isLoad = opc == FZ_LOOP_OP_LOAD && i == 0;
    bool isStore = opc == FZ_LOOP_OP_STORE && i == 1;
    if ((!isLoad && !isStore) || fzOpGetBlock(op) != A->body ||
        !at_ivs(op, i + 1, A)) {
      A->ok = false;
      return FZ_WALK_INTERRUPT;
    }
    if (isLoad) {
      A->loads++;
      A->lastLoad = op;
    } else {
      A->stores++;
      if (!A->firstStore)
        A->firstStore = op;
    }
  }
  return FZ_WALK_ADVANCE;
}

/* The innermost body of a perfect loop.parallel nest whose body stores
 * to T; its ivs (outer first) in ivs. */
static FzBlock *nest_body(FzOp *nest, FzValue **ivs, size_t *n) {
  *n = 0;
  FzBlock *body = NULL;
  while (fzLoopGetOpcode(nest) == FZ_LOOP_OP_PARALLEL) {
    body = fzLoopGetBody(nest);
    for (size_t i = 0; i < fzBlockGetNumArguments(body); ++i)
      ivs[(*n)++] = fzBlockGetArgument(body, i);
    /* Descend only through a body that is just another parallel nest. */
    FzOp *first = fzBlockGetFirstOp(body);
    if (!first || fzOpGetNextInBlock(first) != fzBlockGetLastOp(body) ||
        fzLoopGetOpcode(first) != FZ_LOOP_OP_PARALLEL)
      break;
    nest = first;
  }
  return body;
}

/* Whether a view of buffer v (at any depth; `except` and its own views
 * aside, may be NULL) is used inside nest. */
static bool view_used_inside(FzValue *v, FzOp *nest, FzValue *except) {
  for (FzOpOperand *u = fzValueGetFirstUse(v); u; u = fzOpOperandGetNextUse(u)) {
    FzOp *o = fzOpOperandGetOwner(u);
    if (fzLoopGetOpcode(o) != FZ_LOOP_OP_VIEW)
      continue;
    FzValue *r = fzOpGetResult(o, 0);
    if (r == except)
      continue;
    for (FzOpOperand *w = fzValueGetFirstUse(r); w;
         w = fzOpOperandGetNextUse(w))
      if (fzOpIsAncestor(nest, fzOpOperandGetOwner(w)))
        return true;
    if (view_used_inside(r, nest, except))
      return true;
  }
  return false;
}

static size_t compute_in_place(Plan *P) {
  size_t done = 0;
  FzValue *ivs[64];
  for (size_t ti = 0; ti < P->n; ++ti) {
    Temp *T = &P->temps[ti];
    if (T->gone || T->start == T->end)
      continue;
    /* T's first user must be the nest that writes it. */
    FzOp *nest = NULL;
    for (FzOp *op = fzBlockGetFirstOp(P->body); op; op = fzOpGetNextInBlock(op))
      if (pos_of(P, op) == T->start) {
        nest = op;
        break;
      }
    size_t nivs;
    FzBlock *body = nest ? nest_body(nest, ivs, &nivs) : NULL;
    if (!body || nivs != fzShapedTypeGetRank(fzValueGetType(T->value)))
      continue;
    Access AT = {T->value, body, ivs, nivs, true, NULL, NULL, 0, 0};
    fzOpWalk(nest, FZ_WALK_PRE_ORDER, check_access, &AT);
    if (!AT.ok || AT.loads || !AT.stores || view_used_inside(T->value, nest, NULL))
      continue;
    for (size_t ii = 0; ii < P->n && !T->gone; ++ii) {
      Temp *I = &P->temps[ii];
      if (ii == ti || I->gone || I->end != T->start || I->start >= T->start)
        continue;
      /* The nest reads I itself, or a top-level view of it of T's type
       * (a reshape), at its ivs. */
      FzValue *cands[16];
      size_t nc = 0;
      cands[nc++] = I->value;
      for (FzOpOperand *u = fzValueGetFirstUse(I->value); u && nc < 16;
           u = fzOpOperandGetNextUse(u)) {
        FzOp *o = fzOpOperandGetOwner(u);
        if (fzLoopGetOpcode(o) == FZ_LOOP_OP_VIEW &&
            fzOpGetBlock(o) == P->body && fzOpGetNumOperands(o) == 1 &&
            fzOpIsBeforeInBlock(o, nest))
          cands[nc++] = fzOpGetResult(o, 0);
      }
      for (size_t k = 0; k < nc; ++k) {
        FzValue *B = cands[k];
        if (fzValueGetType(B) != fzValueGetType(T->value))
          continue;
        Access AI = {B, body, ivs, nivs, true, NULL, NULL, 0, 0};
        fzOpWalk(nest, FZ_WALK_PRE_ORDER, check_access, &AI);
        if (!AI.ok || AI.stores || !AI.loads ||
            !fzOpIsBeforeInBlock(AI.lastLoad, AT.firstStore) ||
            view_used_inside(I->value, nest, B) ||
            (B != I->value && view_used_inside(B, nest, NULL)))
          continue;
        /* Other accesses of I in the nest (not through B) are unsafe. */
        Access AO = {I->value, body, ivs, nivs, true, NULL, NULL, 0, 0};
        if (B != I->value) {
          fzOpWalk(nest, FZ_WALK_PRE_ORDER, check_access, &AO);
          if (AO.loads || AO.stores || !AO.ok)
            continue;
        }
        /* T becomes B: I's memory lives until T's end. */
        fzValueReplaceAllUsesWith(T->value, B);
        erase_top(P, T->alloc);
        if (I->dealloc && T->dealloc) {
          fzOpMoveBefore(I->dealloc, T->dealloc);
          erase_top(P, T->dealloc);
        } else if (I->dealloc) {
          erase_top(P, I->dealloc);
          I->dealloc = NULL;
        }
        I->end = T->end;
        I->reads = I->reads || T->reads;
        I->viewed = I->viewed || T->viewed || B != I->value;
        T->gone = true;
        done++;
        break;
      }
    }
  }
  return done;
}

/*===--- 3. Reuse -------------------------------------------------------===*/

static bool view_of(Plan *P, Temp *from, Temp *to) {
  FzOp *first = NULL;
  for (FzOp *op = fzBlockGetFirstOp(P->body); op; op = fzOpGetNextInBlock(op))
    if (op != to->alloc && pos_of(P, op) == to->start) {
      first = op;
      break;
    }
  if (!first)
    return false;
  FzType *t = fzValueGetType(to->value);
  FzValue *repl = from->value;
  if (fzValueGetType(from->value) != t) {
    FzOpState st;
    fzOpStateInit(&st, P->ctx, FZ_STR("loop.view"), fzOpGetLoc(to->alloc));
    fzOpStateAddOperands(&st, 1, &from->value);
    fzOpStateAddResults(&st, 1, &t);
    FzBuilder b;
    fzBuilderInit(&b, P->ctx);
    fzBuilderSetInsertionPointBefore(&b, first);
    FzOp *v = fzBuilderCreate(&b, &st);
    if (!v)
      return false;
    repl = fzOpGetResult(v, 0);
  }
  fzValueReplaceAllUsesWith(to->value, repl);
  erase_top(P, to->alloc);
  if (to->dealloc && from->dealloc) {
    fzOpMoveBefore(from->dealloc, to->dealloc);
    erase_top(P, to->dealloc);
  } else if (from->dealloc) {
    erase_top(P, from->dealloc); /* `to` was never freed: nor is this */
    from->dealloc = NULL;
  }
  from->end = to->end > from->end ? to->end : from->end;
  from->reads = true;
  to->gone = true;
  return true;
}

static size_t reuse(Plan *P, bool *failed) {
  size_t reused = 0;
  for (size_t ti = 0; ti < P->n; ++ti) {
    Temp *T = &P->temps[ti];
    if (T->gone)
      continue;
    Temp *best = NULL;
    for (size_t pi = 0; pi < ti; ++pi) {
      Temp *Q = &P->temps[pi];
      if (Q->gone || Q->end >= T->start || Q->elt != T->elt ||
          Q->elems < T->elems || !Q->dealloc)
        continue;
      if (!best || Q->elems < best->elems)
        best = Q;
    }
    if (!best)
      continue;
    if (!view_of(P, best, T)) {
      *failed = true;
      return reused;
    }
    reused++;
  }
  return reused;
}

/*===--- The pass -------------------------------------------------------===*/

bool fzPlanMemory(FzOp *func, FzMemoryPlanStats *stats) {
  FzMemoryPlanStats s;
  memset(&s, 0, sizeof s);
  FzRegion *r = fzOpGetNumRegions(func) ? fzOpGetRegion(func, 0) : NULL;
  FzBlock *body = r ? fzRegionGetFirstBlock(r) : NULL;
  if (!body) {
    if (stats)
      *stats = s;
    return true;
  }
  Plan P;
  memset(&P, 0, sizeof P);
  P.ctx = fzOpGetContext(func);
  P.body = body;
  fzPtrMapInit(&P.pos, P.ctx);
  bool ok = collect(&P), failed = false;
  if (ok) {
    s.allocsBefore = P.n;
    s.peakBytesBefore = peak_bytes(&P);
    remove_unread(&P, func);
    s.inPlace = compute_in_place(&P);
    s.reused = reuse(&P, &failed);
    /* Each surviving temp is one allocation; merged ones extended it. */
    for (size_t i = 0; i < P.n; ++i)
      s.allocsAfter += !P.temps[i].gone;
    s.peakBytesAfter = peak_bytes(&P);
  }
  fzFree(P.ctx, P.temps);
  fzPtrMapFree(&P.pos);
  if (stats)
    *stats = s;
  return ok && !failed;
}

static const FzPassOptionDef kOptions[] = {
    {"memory-report", FZ_PASS_OPTION_BOOL, "false",
     "Emit a remark with the peak temporary memory before and after", NULL,
     0, 0},
};

static const FzPassStatisticDef kStats[] = {
    {"num-reused", "Temporaries that took over a dead one's memory"},
    {"num-in-place", "Nests that now write into an input's memory"},
    {"bytes-saved", "Peak temporary bytes saved"},
};

static bool plan_run(FzPass *pass, FzOp *op) {
  FzMemoryPlanStats s;
  if (!fzPlanMemory(op, &s))
    return false;
  fzPassAddStatistic(pass, 0, s.reused);
  fzPassAddStatistic(pass, 1, s.inPlace);
  fzPassAddStatistic(pass, 2, (uint64_t)(s.peakBytesBefore - s.peakBytesAfter));
  if (fzPassGetBoolOption(pass, "memory-report")) {
    FzStringRef name = fzSymbolGetName(op);
    fzEmitRemark(fzOpGetContext(op), fzOpGetLoc(op),
                 "plan-memory @%.*s: peak temporary memory %lld -> %lld "
                 "bytes; %zu -> %zu buffers (%zu reused, %zu in place)",
                 (int)name.length, name.data, (long long)s.peakBytesBefore,
                 (long long)s.peakBytesAfter, s.allocsBefore, s.allocsAfter,
                 s.reused, s.inPlace);
  }
  return true;
}

const FzPassDef fzPlanMemoryPassDef = {
    .argument = "plan-memory",
    .displayName = "PlanMemory",
    .summary = "Reuse temporary buffers by liveness and compute elementwise "
               "nests in place (loop level)",
    .anchor = "func.func",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = sizeof kStats / sizeof kStats[0],
    .run = plan_run,
};

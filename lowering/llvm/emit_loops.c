/* lowering/llvm/emit_loops.c - loop.for and loop.parallel in LLVM IR.
 *
 * loop.for becomes a counted loop (`icmp slt` on an `nsw` induction
 * variable) whose iteration arguments are phis; float ops accumulating
 * into them get `reassoc` (fzLLFindReductions) so that reductions
 * vectorize.
 *
 * loop.parallel at the top level of a function (inside no other loop),
 * with constant bounds and options.parallel, is outlined:
 *   - its iteration space is linearized over every dimension but the
 *     last; the last is walked by an inner loop, split into blocks when
 *     the outer dimensions alone give too few iterations to share
 *     between threads;
 *   - @f.parN.body(i64 begin, i64 end, captures...) runs linear
 *     iterations [begin, end); a buffer it captures is `noalias` when no
 *     other capture shares its root (argument, alloc or constant), so
 *     the vectorizer needs no runtime alias checks;
 *   - @f.parN(ptr env, i64 begin, i64 end) unpacks the captures from env
 *     (the FzParallelBodyFn of fz/lowering.h);
 *   - the nest itself becomes rt->parallelFor(rt->pool, @f.parN, env, n,
 *     work), or a direct call of @f.parN on [0, n) when rt is NULL.
 * Any other loop.parallel runs serially as nested loops, last dimension
 * innermost.
 */
#include <stdio.h>
#include <string.h>

#include "lowering/llvm/emit_internal.h"

/*===--- Static facts -----------------------------------------------------===*/

/* Trip count of (lb, ub, step) when all three are constants. */
static bool trip_count(FzValue *lb, FzValue *ub, FzValue *step,
                       int64_t *out) {
  int64_t l, u, s;
  if (!fzLoopValueGetConstantInt(lb, &l) ||
      !fzLoopValueGetConstantInt(ub, &u) ||
      !fzLoopValueGetConstantInt(step, &s) || s <= 0)
    return false;
  *out = u > l ? (u - l + s - 1) / s : 0;
  return true;
}

static int64_t sat_mul(int64_t a, int64_t b) {
  const int64_t cap = (int64_t)1 << 40;
  if (a <= 0 || b <= 0)
    return 0;
  return a > cap / b ? cap : a * b;
}

int64_t fzLLEstimateWork(FzBlock *block) {
  int64_t w = 0;
  for (FzOp *op = block ? fzBlockGetFirstOp(block) : NULL; op;
       op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode code = fzLoopGetOpcode(op);
    if (code == FZ_LOOP_OP_FOR) {
      int64_t t;
      if (!trip_count(fzOpGetOperand(op, 0), fzOpGetOperand(op, 1),
                      fzOpGetOperand(op, 2), &t))
        t = 16;
      w += 2 + sat_mul(t, fzLLEstimateWork(fzLoopGetBody(op)));
    } else if (code == FZ_LOOP_OP_PARALLEL) {
      size_t n = fzLoopParallelGetNumDims(op);
      int64_t total = 1;
      for (size_t d = 0; d < n; ++d) {
        int64_t t;
        if (!trip_count(fzOpGetOperand(op, d), fzOpGetOperand(op, n + d),
                        fzOpGetOperand(op, 2 * n + d), &t))
          t = 16;
        total = sat_mul(total, t > 0 ? t : 1);
      }
      w += sat_mul(total, fzLLEstimateWork(fzLoopGetBody(op)));
    } else {
      w += 1;
    }
  }
  return w;
}

static bool is_accumulating(FzLoopOpcode c) {
  return c == FZ_LOOP_OP_ADDF || c == FZ_LOOP_OP_MULF ||
         c == FZ_LOOP_OP_MAXF || c == FZ_LOOP_OP_MINF || c == FZ_LOOP_OP_FMA;
}

static FzWalkResult find_reductions(FzOp *op, void *ud) {
  FzLLEmitter *E = ud;
  if (fzLoopGetOpcode(op) != FZ_LOOP_OP_FOR)
    return FZ_WALK_ADVANCE;
  FzBlock *body = fzLoopGetBody(op);
  FzOp *yield = body ? fzBlockGetLastOp(body) : NULL;
  if (!yield || fzLoopGetOpcode(yield) != FZ_LOOP_OP_YIELD)
    return FZ_WALK_ADVANCE;
  for (size_t i = 0; i < fzOpGetNumOperands(yield); ++i) {
    FzOp *def = fzValueGetDefiningOp(fzOpGetOperand(yield, i));
    if (!def || fzOpGetBlock(def) != body ||
        !is_accumulating(fzLoopGetOpcode(def)) ||
        i + 1 >= fzBlockGetNumArguments(body))
      continue;
    FzValue *iter = fzBlockGetArgument(body, i + 1);
    for (size_t k = 0; k < fzOpGetNumOperands(def); ++k)
      if (fzOpGetOperand(def, k) == iter) {
        fzPtrMapPut(&E->reductions, def, def);
        break;
      }
  }
  return FZ_WALK_ADVANCE;
}

void fzLLFindReductions(FzLLEmitter *E, FzOp *func) {
  fzOpWalk(func, FZ_WALK_PRE_ORDER, find_reductions, E);
}

/*===--- Counted loops ----------------------------------------------------===*/

typedef struct LoopFrame {
  LLVMBasicBlockRef header, exit;
  LLVMValueRef iv, step;
  LLVMValueRef *phis; /* extra loop-carried values (numPhis) */
  size_t numPhis;
} LoopFrame;

/* Opens `for (iv = lb; iv < ub; iv += step)` with numPhis carried values
 * starting at inits; leaves the builder in the body. */
static void loop_begin(FzLLEmitter *E, LoopFrame *f, LLVMValueRef lb,
                       LLVMValueRef ub, LLVMValueRef step, size_t numPhis,
                       LLVMValueRef *inits, LLVMValueRef *phis) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(E->b);
  f->header = LLVMAppendBasicBlockInContext(E->llctx, E->fn, "loop");
  LLVMBasicBlockRef body =
      LLVMAppendBasicBlockInContext(E->llctx, E->fn, "body");
  f->exit = LLVMAppendBasicBlockInContext(E->llctx, E->fn, "exit");
  f->step = step;
  f->phis = phis;
  f->numPhis = numPhis;
  LLVMBuildBr(E->b, f->header);
  LLVMPositionBuilderAtEnd(E->b, f->header);
  f->iv = LLVMBuildPhi(E->b, E->tI64, "i");
  LLVMAddIncoming(f->iv, &lb, &pre, 1);
  for (size_t k = 0; k < numPhis; ++k) {
    phis[k] = LLVMBuildPhi(E->b, LLVMTypeOf(inits[k]), "");
    LLVMAddIncoming(phis[k], &inits[k], &pre, 1);
  }
  LLVMValueRef c = LLVMBuildICmp(E->b, LLVMIntSLT, f->iv, ub, "");
  LLVMBuildCondBr(E->b, c, body, f->exit);
  LLVMPositionBuilderAtEnd(E->b, body);
}

/* Closes the loop with the next values of the carried phis; leaves the
 * builder after the loop. */
static void loop_end(FzLLEmitter *E, LoopFrame *f, LLVMValueRef *next) {
  LLVMValueRef inc = LLVMBuildNSWAdd(E->b, f->iv, f->step, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(E->b);
  LLVMBuildBr(E->b, f->header);
  LLVMAddIncoming(f->iv, &inc, &latch, 1);
  for (size_t k = 0; k < f->numPhis; ++k)
    LLVMAddIncoming(f->phis[k], &next[k], &latch, 1);
  LLVMPositionBuilderAtEnd(E->b, f->exit);
}

/* A loop step that is not positive: an error when it is a constant;
 * otherwise, unless it is known positive, a run-time check (emit_check.c)
 * that reports it and makes the loop run no iteration (*ub = lb). */
static bool guard_step(FzLLEmitter *E, FzOp *op, FzValue *step,
                       LLVMValueRef lb, LLVMValueRef *ub, LLVMValueRef *st) {
  int64_t c;
  FzStringRef name = fzIdentGetString(fzOpGetName(op));
  if (fzLoopValueGetConstantInt(step, &c)) {
    if (c > 0)
      return true;
    return fzLLError(E, op, "emit-llvm: '%.*s' step %lld is not positive",
                     (int)name.length, name.data, (long long)c);
  }
  if (!fzLLStepNeedsCheck(E, step))
    return true;
  LLVMValueRef pos = LLVMBuildICmp(E->b, LLVMIntSGT, *st, fzLLIndex(E, 0), "");
  fzLLEmitCheck(E, op, pos, *st, "'%.*s' op step %%lld is not positive",
                (int)name.length, name.data);
  *ub = LLVMBuildSelect(E->b, pos, *ub, lb, "");
  *st = LLVMBuildSelect(E->b, pos, *st, fzLLIndex(E, 1), "");
  return !E->failed;
}

bool fzLLEmitFor(FzLLEmitter *E, FzOp *op) {
  FzBlock *body = fzLoopGetBody(op);
  size_t numIters = fzOpGetNumOperands(op) - 3;
  if (!body || fzBlockGetNumArguments(body) != numIters + 1)
    return fzLLError(E, op, "emit-llvm: malformed 'loop.for'");
  LLVMValueRef bounds[3];
  for (size_t i = 0; i < 3; ++i)
    if (!(bounds[i] = fzLLGet(E, fzOpGetOperand(op, i))))
      return false;
  LLVMValueRef *inits = fzCalloc(E->ctx, 2 * numIters + 1, sizeof *inits);
  if (!inits)
    return E->failed = true, false;
  LLVMValueRef *phis = inits + numIters;
  for (size_t k = 0; k < numIters; ++k)
    if (!(inits[k] = fzLLGet(E, fzOpGetOperand(op, 3 + k)))) {
      fzFree(E->ctx, inits);
      return false;
    }
  if (!guard_step(E, op, fzOpGetOperand(op, 2), bounds[0], &bounds[1],
                  &bounds[2])) {
    fzFree(E->ctx, inits);
    return false;
  }
  LoopFrame f;
  loop_begin(E, &f, bounds[0], bounds[1], bounds[2], numIters, inits, phis);
  fzLLSet(E, fzBlockGetArgument(body, 0), f.iv);
  for (size_t k = 0; k < numIters; ++k)
    fzLLSet(E, fzBlockGetArgument(body, k + 1), phis[k]);
  E->loopDepth++;
  bool ok = fzLLEmitBlock(E, body, true);
  E->loopDepth--;
  FzOp *yield = fzBlockGetLastOp(body);
  if (ok && (!yield || fzLoopGetOpcode(yield) != FZ_LOOP_OP_YIELD ||
             fzOpGetNumOperands(yield) != numIters))
    ok = fzLLError(E, op, "emit-llvm: 'loop.for' body must end in "
                          "'loop.yield' of its %zu iteration values",
                   numIters);
  LLVMValueRef *next = inits; /* reuse: the inits are in the phis now */
  for (size_t k = 0; ok && k < numIters; ++k)
    ok = (next[k] = fzLLGet(E, fzOpGetOperand(yield, k))) != NULL;
  if (!ok) {
    fzFree(E->ctx, inits);
    return false;
  }
  loop_end(E, &f, next);
  for (size_t k = 0; k < numIters; ++k)
    fzLLSet(E, fzOpGetResult(op, k), phis[k]);
  fzFree(E->ctx, inits);
  return !E->failed;
}

/*===--- loop.parallel: serial --------------------------------------------===*/

/* The outermost loop op enclosing op (or op itself). */
static FzOp *outermost_loop(FzOp *op) {
  FzOp *top = op;
  for (FzOp *p = fzOpGetParentOp(op); p; p = fzOpGetParentOp(p)) {
    FzLoopOpcode c = fzLoopGetOpcode(p);
    if (c == FZ_LOOP_OP_FOR || c == FZ_LOOP_OP_PARALLEL)
      top = p;
  }
  return top;
}

static bool emit_parallel_serial(FzLLEmitter *E, FzOp *op) {
  size_t n = fzLoopParallelGetNumDims(op);
  FzBlock *body = fzLoopGetBody(op);
  if (!body || fzBlockGetNumArguments(body) != n || n > 64)
    return fzLLError(E, op, "emit-llvm: malformed 'loop.parallel'");
  LoopFrame frames[64];
  int64_t lbLast, stepLast, ubLast;
  if (fzLoopValueGetConstantInt(fzOpGetOperand(op, n - 1), &lbLast) &&
      fzLoopValueGetConstantInt(fzOpGetOperand(op, 2 * n - 1), &ubLast) &&
      fzLoopValueGetConstantInt(fzOpGetOperand(op, 3 * n - 1), &stepLast) &&
      stepLast == 1) {
    /* Outer dims as loops; the last one as an explicit vector loop. */
    for (size_t d = 0; d + 1 < n; ++d) {
      LLVMValueRef lb = fzLLGet(E, fzOpGetOperand(op, d));
      LLVMValueRef ub = fzLLGet(E, fzOpGetOperand(op, n + d));
      LLVMValueRef st = fzLLGet(E, fzOpGetOperand(op, 2 * n + d));
      if (!lb || !ub || !st ||
          !guard_step(E, op, fzOpGetOperand(op, 2 * n + d), lb, &ub, &st))
        return false;
      loop_begin(E, &frames[d], lb, ub, st, 0, NULL, NULL);
      fzLLSet(E, fzBlockGetArgument(body, d), frames[d].iv);
    }
    E->loopDepth++;
    bool vec = fzLLEmitVectorLoop(
        E, outermost_loop(op), body, fzBlockGetArgument(body, n - 1),
        lbLast, fzLLIndex(E, 0),
        fzLLIndex(E, ubLast > lbLast ? ubLast - lbLast : 0));
    E->loopDepth--;
    if (vec) {
      if (E->failed)
        return false;
      for (size_t d = n - 1; d-- > 0;)
        loop_end(E, &frames[d], NULL);
      return true;
    }
    /* Not vectorizable by hand: close nothing yet, fall through to the
     * scalar innermost loop inside the same outer loops. */
    LLVMValueRef lb = fzLLGet(E, fzOpGetOperand(op, n - 1));
    LLVMValueRef ub = fzLLGet(E, fzOpGetOperand(op, 2 * n - 1));
    LLVMValueRef st = fzLLGet(E, fzOpGetOperand(op, 3 * n - 1));
    loop_begin(E, &frames[n - 1], lb, ub, st, 0, NULL, NULL);
    fzLLSet(E, fzBlockGetArgument(body, n - 1), frames[n - 1].iv);
    E->loopDepth++;
    bool ok = fzLLEmitBlock(E, body, true);
    E->loopDepth--;
    if (!ok)
      return false;
    for (size_t d = n; d-- > 0;)
      loop_end(E, &frames[d], NULL);
    return true;
  }
  for (size_t d = 0; d < n; ++d) {
    LLVMValueRef lb = fzLLGet(E, fzOpGetOperand(op, d));
    LLVMValueRef ub = fzLLGet(E, fzOpGetOperand(op, n + d));
    LLVMValueRef st = fzLLGet(E, fzOpGetOperand(op, 2 * n + d));
    if (!lb || !ub || !st ||
        !guard_step(E, op, fzOpGetOperand(op, 2 * n + d), lb, &ub, &st))
      return false;
    loop_begin(E, &frames[d], lb, ub, st, 0, NULL, NULL);
    fzLLSet(E, fzBlockGetArgument(body, d), frames[d].iv);
  }
  E->loopDepth++;
  bool ok = fzLLEmitBlock(E, body, true);
  E->loopDepth--;
  if (!ok)
    return false;
  for (size_t d = n; d-- > 0;)
    loop_end(E, &frames[d], NULL);
  return true;
}

/*===--- loop.parallel: outlined ------------------------------------------===*/

typedef struct Captures {
  FzPtrVec values; /* FzValue*, in first-use order */
  FzPtrMap seen;
  FzOp *par;
} Captures;

static bool defined_inside(FzValue *v, FzOp *par) {
  FzBlock *b = fzValueGetParentBlock(v);
  for (FzOp *p = b ? fzBlockGetParentOp(b) : NULL; p; p = fzOpGetParentOp(p))
    if (p == par)
      return true;
  return false;
}

static FzWalkResult collect_captures(FzOp *op, void *ud) {
  Captures *c = ud;
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    if (defined_inside(v, c->par) || fzPtrMapContains(&c->seen, v))
      continue;
    if (!fzPtrMapPut(&c->seen, v, v) || !fzPtrVecPush(&c->values, v))
      return FZ_WALK_INTERRUPT;
  }
  return FZ_WALK_ADVANCE;
}

/* Linearization of the nest: dims [0, n-1) times `blocks` blocks of
 * `block` iterations of the last dim. */
typedef struct ParShape {
  size_t n;
  int64_t lb[64], step[64], trips[64];
  int64_t outer;  /* product of trips[0..n-1) */
  int64_t blocks; /* blocks of the last dim */
  int64_t block;  /* iterations per block */
  int64_t total;  /* outer * blocks */
} ParShape;

static bool par_shape(FzOp *op, ParShape *s) {
  size_t n = fzLoopParallelGetNumDims(op);
  if (n == 0 || n > 64)
    return false;
  s->n = n;
  s->outer = 1;
  for (size_t d = 0; d < n; ++d) {
    int64_t ub;
    if (!fzLoopValueGetConstantInt(fzOpGetOperand(op, d), &s->lb[d]) ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(op, n + d), &ub) ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(op, 2 * n + d),
                                   &s->step[d]) ||
        s->step[d] <= 0)
      return false;
    s->trips[d] = ub > s->lb[d] ? (ub - s->lb[d] + s->step[d] - 1) / s->step[d]
                                : 0;
    if (d + 1 < n)
      s->outer = sat_mul(s->outer, s->trips[d]);
  }
  int64_t last = s->trips[n - 1];
  if (n == 1) {
    /* The linear index is the dimension itself. */
    s->outer = last;
    s->blocks = 1;
    s->block = 1;
  } else {
    /* Enough linear iterations for a machine of many threads, while
     * keeping inner loops long enough to vectorize. */
    s->blocks = 1;
    s->block = last;
    if (s->outer < 256 && last >= 4096) {
      int64_t want = (256 + s->outer - 1) / s->outer;
      int64_t maxBlocks = last / 2048;
      s->blocks = want < maxBlocks ? want : maxBlocks;
      if (s->blocks < 1)
        s->blocks = 1;
      s->block = (last + s->blocks - 1) / s->blocks;
      s->block = (s->block + 63) / 64 * 64;
      s->blocks = (last + s->block - 1) / s->block;
    }
  }
  s->total = sat_mul(s->outer, s->blocks);
  if (s->outer == 0 || last == 0)
    s->total = 0;
  return true;
}

typedef struct SavedState {
  LLVMValueRef fn;
  LLVMBasicBlockRef entry, insert;
  FzPtrMap values;
  unsigned loopDepth;
  bool outlined, usedNontemporal;
} SavedState;

static void save_state(FzLLEmitter *E, SavedState *s) {
  s->fn = E->fn;
  s->entry = E->entry;
  s->insert = LLVMGetInsertBlock(E->b);
  s->values = E->values;
  s->loopDepth = E->loopDepth;
  s->outlined = E->outlined;
  s->usedNontemporal = E->usedNontemporal;
  fzPtrMapInit(&E->values, E->ctx);
}

static void restore_state(FzLLEmitter *E, SavedState *s) {
  fzPtrMapFree(&E->values);
  E->values = s->values;
  E->fn = s->fn;
  E->entry = s->entry;
  E->loopDepth = s->loopDepth;
  E->outlined = s->outlined;
  E->usedNontemporal = s->usedNontemporal;
  if (s->insert) /* NULL: saved in a unit (E->units): fzLLUnitEnd did it */
    LLVMPositionBuilderAtEnd(E->b, s->insert);
}

/* The loop nest of the outlined body: linear iterations [lo, hi). */
static bool emit_outlined_nest(FzLLEmitter *E, FzOp *op, const ParShape *s,
                               LLVMValueRef lo, LLVMValueRef hi) {
  FzBlock *body = fzLoopGetBody(op);
  size_t n = s->n;
  LoopFrame k, j;
  if (n == 1 && s->step[0] == 1) {
    /* The linear index is the dimension: one explicit vector loop. */
    if (fzLLEmitVectorLoop(E, op, body, fzBlockGetArgument(body, 0),
                           s->lb[0], lo, hi))
      return !E->failed;
  }
  loop_begin(E, &k, lo, hi, fzLLIndex(E, 1), 0, NULL, NULL);
  LLVMValueRef q = k.iv;
  LLVMValueRef blk = NULL;
  if (n > 1 && s->blocks > 1) {
    blk = LLVMBuildURem(E->b, q, fzLLIndex(E, s->blocks), "");
    q = LLVMBuildUDiv(E->b, q, fzLLIndex(E, s->blocks), "");
  }
  /* Dims n-2 .. 0 from the linear index (n == 1: dim 0 is q). */
  size_t outerDims = n > 1 ? n - 1 : 1;
  for (size_t d = outerDims; d-- > 0;) {
    LLVMValueRef kd = q;
    if (d > 0) {
      kd = LLVMBuildURem(E->b, q, fzLLIndex(E, s->trips[d]), "");
      q = LLVMBuildUDiv(E->b, q, fzLLIndex(E, s->trips[d]), "");
    }
    LLVMValueRef iv = LLVMBuildNSWAdd(
        E->b, fzLLIndex(E, s->lb[d]),
        LLVMBuildNSWMul(E->b, kd, fzLLIndex(E, s->step[d]), ""), "");
    fzLLSet(E, fzBlockGetArgument(body, d), iv);
  }
  if (n > 1) {
    size_t d = n - 1;
    LLVMValueRef jlo = fzLLIndex(E, 0), jhi = fzLLIndex(E, s->trips[d]);
    if (blk) {
      jlo = LLVMBuildNSWMul(E->b, blk, fzLLIndex(E, s->block), "");
      LLVMValueRef end =
          LLVMBuildNSWAdd(E->b, jlo, fzLLIndex(E, s->block), "");
      LLVMValueRef args[2] = {end, jhi};
      LLVMTypeRef ty = E->tI64;
      jhi = fzLLCallIntrinsic(E, "llvm.smin", &ty, 1, args, 2);
    }
    if (s->step[d] == 1 &&
        fzLLEmitVectorLoop(E, op, body, fzBlockGetArgument(body, d),
                           s->lb[d], jlo, jhi)) {
      if (E->failed)
        return false;
      loop_end(E, &k, NULL);
      return true;
    }
    loop_begin(E, &j, jlo, jhi, fzLLIndex(E, 1), 0, NULL, NULL);
    LLVMValueRef iv = LLVMBuildNSWAdd(
        E->b, fzLLIndex(E, s->lb[d]),
        LLVMBuildNSWMul(E->b, j.iv, fzLLIndex(E, s->step[d]), ""), "");
    fzLLSet(E, fzBlockGetArgument(body, d), iv);
  }
  if (!fzLLEmitBlock(E, body, true))
    return false;
  if (n > 1)
    loop_end(E, &j, NULL);
  loop_end(E, &k, NULL);
  return true;
}

static char *outlined_name(FzLLEmitter *E, unsigned index, const char *tail) {
  char suffix[48];
  snprintf(suffix, sizeof suffix, ".par%u%s", index, tail);
  size_t n = E->funcName.length, s = strlen(suffix);
  char *buf = fzMalloc(E->ctx, n + s + 1);
  if (buf) {
    memcpy(buf, E->funcName.data, n);
    memcpy(buf + n, suffix, s + 1);
  }
  return buf;
}

static bool emit_parallel_outlined(FzLLEmitter *E, FzOp *op,
                                   const ParShape *s) {
  FzBlock *body = fzLoopGetBody(op);
  Captures c;
  c.par = op;
  fzPtrVecInit(&c.values, E->ctx);
  fzPtrMapInit(&c.seen, E->ctx);
  bool ok = fzOpWalk(op, FZ_WALK_PRE_ORDER, collect_captures, &c) !=
            FZ_WALK_INTERRUPT;
  /* Split into constants (used as they are) and real captures. */
  size_t nv = c.values.len, numCap = 0;
  LLVMValueRef *outer = fzCalloc(E->ctx, nv + 1, sizeof *outer);
  FzValue **capVals = fzCalloc(E->ctx, nv + 1, sizeof *capVals);
  LLVMTypeRef *capTys = fzCalloc(E->ctx, nv + 1, sizeof *capTys);
  ok = ok && outer && capVals && capTys;
  for (size_t i = 0; ok && i < nv; ++i) {
    FzValue *v = c.values.data[i];
    LLVMValueRef lv = fzLLGet(E, v);
    if (!lv) {
      ok = false;
      break;
    }
    if (LLVMIsConstant(lv) && (!E->units || fzLLConstMovable(lv)))
      continue;
    outer[numCap] = lv;
    capVals[numCap] = v;
    capTys[numCap] = LLVMTypeOf(lv);
    numCap++;
  }
  unsigned index = E->numOutlined++;
  char *bodyName = ok ? outlined_name(E, index, ".body") : NULL;
  char *trampName = ok ? outlined_name(E, index, "") : NULL;
  if (!bodyName || !trampName)
    ok = false;
  if (!ok) {
    if (!E->failed)
      E->failed = true;
    goto done;
  }

  /* @f.parN.body(i64 lo, i64 hi, captures...), in a unit of its own
   * with E->units (capTys stay the function's; params are the unit's). */
  {
    LLVMTypeRef *params = fzCalloc(E->ctx, numCap + 2, sizeof *params);
    FzLLCtxSave outerCtx;
    if (!params || (E->units && !fzLLUnitBegin(E, &outerCtx, trampName))) {
      fzFree(E->ctx, params);
      ok = false;
      E->failed = true;
      goto done;
    }
    params[0] = params[1] = E->tI64;
    for (size_t i = 0; i < numCap && ok; ++i)
      ok = (params[i + 2] = E->units ? fzLLMapType(E, capTys[i])
                                     : capTys[i]) != NULL;
    if (!ok) { /* a capture of a type that has no place in a unit */
      if (E->units)
        fzLLUnitEnd(E, &outerCtx);
      fzFree(E->ctx, params);
      fzLLError(E, op, "emit-llvm: internal error: a value used by a "
                       "parallel loop cannot be passed to its unit");
      goto done;
    }
    LLVMTypeRef bodyTy =
        LLVMFunctionType(E->tVoid, params, (unsigned)numCap + 2, 0);
    LLVMValueRef bodyFn = LLVMAddFunction(E->mod, bodyName, bodyTy);
    LLVMSetLinkage(bodyFn, LLVMInternalLinkage);
    fzLLSetFunctionAttrs(E, bodyFn);
    for (size_t i = 0; i < numCap; ++i) {
      if (params[i + 2] != E->tPtr)
        continue;
      const void *root = fzLLGetRoot(E, capVals[i]);
      bool unique = true;
      for (size_t k = 0; k < numCap && unique; ++k)
        if (k != i && params[k + 2] == E->tPtr &&
            fzLLGetRoot(E, capVals[k]) == root)
          unique = false;
      unsigned idx = (unsigned)i + 3;
      if (unique)
        fzLLAddAttr(E, bodyFn, idx, "noalias", 0);
      fzLLAddAttr(E, bodyFn, idx, "nocapture", 0);
    }

    SavedState saved;
    save_state(E, &saved);
    E->fn = bodyFn;
    E->entry = LLVMAppendBasicBlockInContext(E->llctx, bodyFn, "entry");
    E->loopDepth = 1;
    E->outlined = true;
    LLVMPositionBuilderAtEnd(E->b, E->entry);
    for (size_t i = 0; i < nv; ++i) {
      FzValue *v = c.values.data[i];
      LLVMValueRef lv = fzPtrMapGet(&saved.values, v);
      if (lv && LLVMIsConstant(lv) && E->units && fzLLConstMovable(lv))
        lv = fzLLMoveConst(E, lv);
      else if (lv && LLVMIsConstant(lv) && E->units)
        continue; /* captured */
      if (lv && LLVMIsConstant(lv))
        fzLLSet(E, v, lv);
    }
    for (size_t i = 0; i < numCap; ++i)
      fzLLSet(E, capVals[i], LLVMGetParam(bodyFn, (unsigned)i + 2));
    E->usedNontemporal = false;
    ok = !E->failed && emit_outlined_nest(E, op, s, LLVMGetParam(bodyFn, 0),
                                          LLVMGetParam(bodyFn, 1));
    if (ok) {
      fzLLEmitStoreFence(E);
      LLVMBuildRetVoid(E->b);
    }

    /* @f.parN(ptr env, i64 lo, i64 hi): unpack and call the body. */
    LLVMTypeRef envTy = LLVMStructTypeInContext(
        E->llctx, params + 2, (unsigned)numCap, 0);
    LLVMTypeRef tp[3] = {E->tPtr, E->tI64, E->tI64};
    LLVMTypeRef trampTy = LLVMFunctionType(E->tVoid, tp, 3, 0);
    LLVMValueRef tramp = LLVMAddFunction(E->mod, trampName, trampTy);
    if (E->units) /* called from unit 0 */
      LLVMSetVisibility(tramp, LLVMHiddenVisibility);
    else
      LLVMSetLinkage(tramp, LLVMInternalLinkage);
    fzLLSetFunctionAttrs(E, tramp);
    E->fn = tramp;
    E->entry = LLVMAppendBasicBlockInContext(E->llctx, tramp, "entry");
    LLVMPositionBuilderAtEnd(E->b, E->entry);
    LLVMValueRef *args = fzCalloc(E->ctx, numCap + 2, sizeof *args);
    if (!args) {
      ok = false;
      E->failed = true;
    } else {
      args[0] = LLVMGetParam(tramp, 1);
      args[1] = LLVMGetParam(tramp, 2);
      for (size_t i = 0; i < numCap; ++i) {
        LLVMValueRef slot = LLVMBuildStructGEP2(E->b, envTy,
                                                LLVMGetParam(tramp, 0),
                                                (unsigned)i, "");
        args[i + 2] = LLVMBuildLoad2(E->b, params[i + 2], slot, "");
      }
      LLVMBuildCall2(E->b, bodyTy, bodyFn, args, (unsigned)numCap + 2, "");
      LLVMBuildRetVoid(E->b);
      fzFree(E->ctx, args);
    }
    if (E->units) {
      /* Back in the function: its own view of the env and a declaration
       * of the trampoline, which fzLLExport names for the link. */
      fzLLUnitEnd(E, &outerCtx);
      envTy = LLVMStructTypeInContext(E->llctx, capTys, (unsigned)numCap, 0);
      LLVMTypeRef tp0[3] = {E->tPtr, E->tI64, E->tI64};
      trampTy = LLVMFunctionType(E->tVoid, tp0, 3, 0);
      tramp = LLVMAddFunction(E->mod, trampName, trampTy);
      LLVMSetLinkage(tramp, LLVMInternalLinkage);
      fzLLSetFunctionAttrs(E, tramp);
      if (!fzLLExport(E, tramp))
        ok = false;
    }
    restore_state(E, &saved);
    fzFree(E->ctx, params);
    if (!ok)
      goto done;

    /* In the caller: pack env, then parallelFor or a direct call. */
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(E->llctx);
    LLVMValueRef first = LLVMGetFirstInstruction(E->entry);
    if (first)
      LLVMPositionBuilderBefore(eb, first);
    else
      LLVMPositionBuilderAtEnd(eb, E->entry);
    LLVMValueRef env = LLVMBuildAlloca(eb, envTy, "env");
    LLVMDisposeBuilder(eb);
    for (size_t i = 0; i < numCap; ++i) {
      LLVMValueRef slot =
          LLVMBuildStructGEP2(E->b, envTy, env, (unsigned)i, "");
      LLVMBuildStore(E->b, outer[i], slot);
    }
    int64_t work = sat_mul(s->n > 1 ? s->block : 1,
                           fzLLEstimateWork(body) + 1);
    LLVMValueRef total = fzLLIndex(E, s->total);
    LLVMValueRef isNull = LLVMBuildIsNull(E->b, E->rtArg, "");
    LLVMBasicBlockRef serial =
        LLVMAppendBasicBlockInContext(E->llctx, E->fn, "serial");
    LLVMBasicBlockRef pooled =
        LLVMAppendBasicBlockInContext(E->llctx, E->fn, "pooled");
    LLVMBasicBlockRef after =
        LLVMAppendBasicBlockInContext(E->llctx, E->fn, "after");
    LLVMBuildCondBr(E->b, isNull, serial, pooled);
    LLVMPositionBuilderAtEnd(E->b, serial);
    LLVMValueRef sargs[3] = {env, fzLLIndex(E, 0), total};
    LLVMBuildCall2(E->b, trampTy, tramp, sargs, 3, "");
    LLVMBuildBr(E->b, after);
    LLVMPositionBuilderAtEnd(E->b, pooled);
    LLVMTypeRef rtTy = LLVMStructTypeInContext(
        E->llctx, (LLVMTypeRef[]){E->tPtr, E->tPtr}, 2, 0);
    LLVMValueRef pf = LLVMBuildLoad2(
        E->b, E->tPtr, LLVMBuildStructGEP2(E->b, rtTy, E->rtArg, 0, ""), "");
    LLVMValueRef pool = LLVMBuildLoad2(
        E->b, E->tPtr, LLVMBuildStructGEP2(E->b, rtTy, E->rtArg, 1, ""), "");
    LLVMTypeRef pfp[5] = {E->tPtr, E->tPtr, E->tPtr, E->tI64, E->tI64};
    LLVMTypeRef pfTy = LLVMFunctionType(E->tVoid, pfp, 5, 0);
    LLVMValueRef pargs[5] = {pool, tramp, env, total, fzLLIndex(E, work)};
    LLVMBuildCall2(E->b, pfTy, pf, pargs, 5, "");
    LLVMBuildBr(E->b, after);
    LLVMPositionBuilderAtEnd(E->b, after);
  }
done:
  fzFree(E->ctx, outer);
  fzFree(E->ctx, capVals);
  fzFree(E->ctx, capTys);
  fzFree(E->ctx, bodyName);
  fzFree(E->ctx, trampName);
  fzPtrVecFree(&c.values);
  fzPtrMapFree(&c.seen);
  return ok && !E->failed;
}

bool fzLLEmitParallel(FzLLEmitter *E, FzOp *op) {
  ParShape s;
  if (E->opts.parallel && E->loopDepth == 0 && !E->outlined &&
      par_shape(op, &s)) {
    if (s.total == 0)
      return true; /* no iteration */
    return emit_parallel_outlined(E, op, &s);
  }
  return emit_parallel_serial(E, op);
}

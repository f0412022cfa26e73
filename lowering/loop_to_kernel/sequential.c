/* lowering/loop_to_kernel/sequential.c - fzKernelWrapSequentialNests
 * (fz/kernel.h), the first step of lower-loop-to-kernel: top-level nests
 * that are not a loop.parallel become one-iteration loop.parallel nests,
 * so that each is a kernel.
 *
 * The CPU pipeline leaves a reduction to a scalar (reduce over every
 * axis, a loss with reduction=sum/mean, an inner product) as a top-level
 * loop.for whose results later ops use, and stores of such scalars at
 * the top level. For each top-level loop.for, loop.store or
 * loop.vector_store, in order:
 *   - a loop.for with results r_i: a rank-0 loop.alloc t_i per result
 *     (at the start of the function), and
 *       loop.parallel (%i) = (0) to (1) step (1) {
 *         %r_i = loop.for ...          (the nest, moved)
 *         loop.store %r_i, %t_i[]
 *       }
 *       %v_i = loop.load %t_i[]        (every later use of r_i uses v_i)
 *     the load is a scalar setup op that each later kernel re-reads;
 *   - a loop.for without results, or a store: moved into such a
 *     one-iteration loop.parallel.
 * The nest is computed once; the planner maps it like any other (a
 * reduction over the contiguous axis gets a block's threads).
 */
#include <string.h>

#include "ir/util.h"
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

static bool named(FzOp *op, const char *name) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == strlen(name) && memcmp(n.data, name, n.length) == 0;
}

/* A new `loop.parallel (%i) = (0) to (1) step (1)` before anchor, with
 * its body block (arguments: the index) empty; NULL after an error. */
static FzOp *one_iteration_parallel(FzContext *ctx, FzOp *anchor) {
  FzBuilder b;
  fzBuilderInit(&b, ctx);
  fzBuilderSetInsertionPointBefore(&b, anchor);
  FzLoc *loc = fzOpGetLoc(anchor);
  FzValue *zero = fzLoopCreateIndexConstant(&b, loc, 0);
  FzValue *one = fzLoopCreateIndexConstant(&b, loc, 1);
  if (!zero || !one)
    return NULL;
  FzValue *ops[3] = {zero, one, one};
  FzType *index = fzIndexTypeGet(ctx);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("loop.parallel"), loc);
  fzOpStateAddOperands(&st, 3, ops);
  FzRegion *r = fzOpStateAddRegion(&st);
  FzBlock *body = fzBlockCreate(ctx, 1, &index, NULL);
  if (!r || !body) {
    if (body)
      fzBlockDestroy(body);
    fzOpStateDispose(&st);
    return NULL;
  }
  fzRegionAppendBlock(r, body);
  return fzBuilderCreate(&b, &st);
}

/* Moves op into a one-iteration loop.parallel, its results (scalars)
 * passed through rank-0 temporaries allocated at the start of func's
 * body. False after an error. */
static bool wrap(FzContext *ctx, FzBlock *fbody, FzOp *op) {
  FzLoc *loc = fzOpGetLoc(op);
  size_t n = fzOpGetNumResults(op);
  FzValue **temps = n ? fzCalloc(ctx, n, sizeof *temps) : NULL;
  if (n && !temps)
    return false;
  FzBuilder b;
  fzBuilderInit(&b, ctx);
  bool ok = true;
  for (size_t i = 0; ok && i < n; ++i) {
    FzType *t = fzValueGetType(fzOpGetResult(op, i));
    FzType *bt = fzBufferTypeGet(ctx, 0, NULL, t, NULL, 0, loc);
    FzOpState st;
    fzOpStateInit(&st, ctx, FZ_STR("loop.alloc"), loc);
    if (bt)
      fzOpStateAddResults(&st, 1, &bt);
    fzBuilderSetInsertionPointToStart(&b, fbody);
    FzOp *a = bt ? fzBuilderCreate(&b, &st) : NULL;
    if (!bt)
      fzOpStateDispose(&st);
    ok = a != NULL;
    temps[i] = ok ? fzOpGetResult(a, 0) : NULL;
  }
  FzOp *par = ok ? one_iteration_parallel(ctx, op) : NULL;
  ok = par != NULL;
  /* Later uses read the temporaries (loads right after the nest). */
  fzBuilderSetInsertionPointAfter(&b, op);
  for (size_t i = 0; ok && i < n; ++i) {
    FzValue *r = fzOpGetResult(op, i);
    FzType *t = fzValueGetType(r);
    FzOpState st;
    fzOpStateInit(&st, ctx, FZ_STR("loop.load"), loc);
    fzOpStateAddOperands(&st, 1, &temps[i]);
    fzOpStateAddResults(&st, 1, &t);
    FzOp *ld = fzBuilderCreate(&b, &st);
    ok = ld != NULL;
    if (ok)
      fzValueReplaceAllUsesWith(r, fzOpGetResult(ld, 0));
  }
  if (ok) {
    FzBlock *body = fzLoopGetBody(par);
    fzOpRemoveFromBlock(op);
    fzBlockAppendOp(body, op);
    fzBuilderSetInsertionPointToEnd(&b, body);
    for (size_t i = 0; ok && i < n; ++i) {
      FzValue *ops[2] = {fzOpGetResult(op, i), temps[i]};
      FzOpState st;
      fzOpStateInit(&st, ctx, FZ_STR("loop.store"), loc);
      fzOpStateAddOperands(&st, 2, ops);
      ok = fzBuilderCreate(&b, &st) != NULL;
    }
    FzOpState st;
    fzOpStateInit(&st, ctx, FZ_STR("loop.yield"), loc);
    ok = ok && fzBuilderCreate(&b, &st) != NULL;
  }
  fzFree(ctx, temps);
  return ok;
}

bool fzKernelWrapSequentialNests(FzOp *module) {
  FzContext *ctx = fzOpGetContext(module);
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  for (FzOp *f = top ? fzBlockGetFirstOp(top) : NULL; f;
       f = fzOpGetNextInBlock(f)) {
    FzBlock *body = named(f, "func.func")
                        ? fzRegionGetFirstBlock(fzOpGetRegion(f, 0))
                        : NULL;
    FzOp *next;
    for (FzOp *op = body ? fzBlockGetFirstOp(body) : NULL; op; op = next) {
      next = fzOpGetNextInBlock(op);
      FzLoopOpcode c = fzLoopGetOpcode(op);
      if (c != FZ_LOOP_OP_FOR && c != FZ_LOOP_OP_STORE &&
          c != FZ_LOOP_OP_VECTOR_STORE)
        continue;
      if (!wrap(ctx, body, op))
        return fzEmitError(ctx, fzOpGetLoc(op),
                           "lower-loop-to-kernel: cannot wrap this top-level "
                           "nest in a kernel (out of memory)");
    }
  }
  return true;
}

/* lowering/loop_to_kernel/elementwise.c - the elementwise mapping: one
 * iteration of the nest per thread (docs/codegen.md "GPU mappings").
 *
 *   t0 = block_id * block_dim + thread_id
 *   loop.for %t = t0 to items/vec step grid_dim * block_dim {
 *     the nest's variables from t (row-major; the last dimension counts
 *     groups of `vec` iterations)
 *     the body, `vec` times side by side: loads (and their addresses)
 *     of every iteration, then the arithmetic, then the stores
 *   }
 * The grid covers every item once (capped at 2^31 - 1 blocks; the loop
 * takes the rest). When items * vec < 2^31, the thread index is split
 * into the nest's variables in i32 arithmetic, which NVPTX does in one
 * instruction where i64 division takes several. Inner loops (a body
 * that is not straight-line) run inside the thread, as loop.for nests.
 */
#include <stdlib.h>

#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

static bool plan(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                 FzLkPlan *p) {
  FzLkNestPlan *np = fzCalloc(p->ctx, 1, sizeof *np);
  if (!np) /* recorded */
    return p->failed = true, false;
  /* The generic planner, forced to this mapping. */
  fzLkPlanNest(nest, o, np);
  if (np->mapping != FZ_LK_MAP_ELEMENTWISE) {
    unsigned vec = o->vector;
    if (vec == 0)
      vec = nest->widestBytes >= 16 ? 1 : (unsigned)(16 / nest->widestBytes);
    if (!nest->straightLine || vec < 1 ||
        nest->trips[nest->numDims - 1] % vec != 0)
      vec = 1;
    np->mapping = FZ_LK_MAP_ELEMENTWISE;
    np->vec = vec;
    np->group = 1;
    np->itemsPerBlock = o->blockSize;
    np->blockSize = o->blockSize;
    np->numBlocks = (nest->items / vec + o->blockSize - 1) / o->blockSize;
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

static bool build(FzLkBuild *kb, const FzLkPlan *p) {
  const FzLkNestPlan *np = p->state;
  const FzLkNest *nest = kb->nest;
  FzContext *ctx = kb->ctx;
  size_t n = nest->numDims;
  unsigned vec = np->vec;
  int64_t items = nest->items / vec;
  bool narrow = nest->items < ((int64_t)1 << 31);
  FzType *idx = fzIndexTypeGet(ctx);
  FzType *i32 = fzIntegerTypeGet(ctx, 32);
  FzType *i64 = fzIntegerTypeGet(ctx, 64);

  FzValue *tid = fzLkId(kb, "kernel.thread_id");
  FzValue *bid = fzLkId(kb, "kernel.block_id");
  FzValue *bdim = fzLkId(kb, "kernel.block_dim");
  FzValue *gdim = fzLkId(kb, "kernel.grid_dim");
  FzValue *start = fzLkAdd(kb, fzLkMul(kb, bid, bdim), tid);
  FzValue *stride = fzLkMul(kb, gdim, bdim);
  FzValue *t;
  FzOp *loop = fzLkForBegin(kb, start, fzLkIndex(kb, items), stride, 0,
                            NULL, &t, NULL);
  if (!loop)
    return false;

  /* The nest's variables: k[d] from t, row-major. */
  FzBlock *body = fzLoopGetBody(nest->par);
  FzValue *k[FZ_LK_MAX_DIMS];
  FzValue *q = narrow ? fzLkCast(kb, "loop.index_cast", t, i32) : t;
  FzType *qt = narrow ? i32 : idx;
  for (size_t d = n; d-- > 0;) {
    int64_t tr = d == n - 1 ? nest->trips[d] / vec : nest->trips[d];
    if (d > 0) {
      FzValue *c = fzLkConstInt(kb, qt, tr);
      k[d] = fzLkRem(kb, q, c);
      q = fzLkDiv(kb, q, c);
    } else {
      k[d] = q;
    }
    if (narrow) /* k >= 0: zero-extended, as LLVM then sees it */
      k[d] = fzLkCast(kb, "loop.index_cast",
                      fzLkCast(kb, "loop.extui", k[d], i64), idx);
  }
  FzLkMap map;
  fzLkMapInit(&map, ctx, &kb->base);
  bool ok = true;
  for (size_t d = 0; d + 1 < n && ok; ++d)
    ok = fzLkMapPut(&map, fzBlockGetArgument(body, d),
                    fzLkAdd(kb, fzLkIndex(kb, nest->lb[d]),
                            fzLkMul(kb, k[d], fzLkIndex(kb, nest->step[d]))));
  FzValue *base = fzLkMul(kb, k[n - 1], fzLkIndex(kb, vec));
  /* The iterations' last index: lb + (base + u) * step; with step 1,
   * contiguous accesses go through views at base (build.c). */
  bool unit = nest->step[n - 1] == 1;
  FzValue *first = fzLkAdd(kb, fzLkIndex(kb, nest->lb[n - 1]), base);
  FzValue *iv = fzBlockGetArgument(body, n - 1);
  FzLkUnroll U;
  if (ok && fzLkUnrollInit(&U, kb, body, n, vec, &map, unit ? iv : NULL,
                           unit ? first : NULL)) {
    for (unsigned u = 0; u < vec && ok; ++u)
      ok = fzLkMapPut(
          &U.maps[u], iv,
          fzLkAdd(kb, fzLkIndex(kb, nest->lb[n - 1]),
                  fzLkMul(kb, fzLkAdd(kb, base, fzLkIndex(kb, u)),
                          fzLkIndex(kb, nest->step[n - 1]))));
    for (unsigned ph = 0; ph < 3 && ok; ++ph)
      for (unsigned u = 0; u < vec && ok; ++u)
        ok = fzLkUnrollPhase(&U, u, ph);
    fzLkUnrollFree(&U);
  } else {
    ok = false;
  }
  fzLkMapFree(&map);
  return ok && fzLkForEnd(kb, loop, 0, NULL) && !kb->failed;
}

const FzLkMapping fzLkElementwiseMapping = {
    .name = "elementwise",
    .plan = plan,
    .build = build,
    .release = release,
};

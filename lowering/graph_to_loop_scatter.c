/* lowering/graph_to_loop_scatter.c - lower-graph-to-loop for
 * graph.scatter_nd.
 *
 * The model of the pass is "a value at an index" (graph_to_loop_internal.h),
 * so a scatter is computed from the side of its result: element e of the
 * result starts as data[e], then a loop.for nest over the updates (in
 * order, one loop per dim of indices.shape[:-1]) carries it as an
 * iteration argument and, for each update u whose index tuple names e's
 * slice, replaces or combines it with updates[u, e's position in the
 * slice]. Duplicated tuples are therefore applied in order, as the
 * interpreter applies them. The work is |result| * U * k index compares;
 * the op is opaque, so nothing is fused into or after it.
 *
 * Index checks. An index outside [-dim, dim) must be an error on every
 * device. The updates are read at their loop position, which is in range;
 * so when some entry of tuple u is out of range, the read of updates[u,
 * ...] is moved out of range (its first index set to the dim's size) and
 * the load's bounds check reports it (the interpreters at once, native and
 * GPU code through fz_status: docs/codegen.md, "Run-time errors"). A
 * scatter of scalar updates (rank 0) reads data at the tuple instead.
 */
#include <string.h>

#include "lowering/graph_to_loop_internal.h"

enum { S_NONE, S_ADD, S_MUL, S_MAX, S_MIN };

static int reduction_of(FzOp *op) {
  static const char *const names[] = {"add", "mul", "max", "min"};
  for (int i = 0; i < 4; ++i)
    if (lgAttrStringIs(op, "reduction", names[i]))
      return i + 1;
  return S_NONE;
}

static FzValue *combine(LgNest *N, int code, FzValue *a, FzValue *b) {
  bool f = fzTypeIsFloat(fzValueGetType(a));
  switch (code) {
  case S_ADD:
    return fzBBinary(&N->b, f ? "loop.addf" : "loop.addi", a, b);
  case S_MUL:
    return fzBBinary(&N->b, f ? "loop.mulf" : "loop.muli", a, b);
  case S_MAX:
    return fzBBinary(&N->b, f ? "loop.maxf" : "loop.maxsi", a, b);
  case S_MIN:
    return fzBBinary(&N->b, f ? "loop.minf" : "loop.minsi", a, b);
  default: return b;
  }
}

static FzValue *and_i1(LgNest *N, FzValue *a, FzValue *b) {
  return a ? fzBBinary(&N->b, "loop.andi", a, b) : b;
}

/* One update: the new value of the element at idx given acc, for the
 * update at loop indices ivs (q - 1 of them). */
static FzValue *step(LgNest *N, FzOp *op, FzValue *const *idx,
                     FzValue *const *ivs, FzValue *acc) {
  FzValue *data = fzOpGetOperand(op, 0), *ind = fzOpGetOperand(op, 1),
          *upd = fzOpGetOperand(op, 2);
  size_t r = lgRank(data), q = lgRank(ind), ur = lgRank(upd);
  size_t k = (size_t)lgDim(ind, q - 1);
  FzType *it = fzIndexTypeGet(N->F->ctx);
  FzValue *ii[LG_MAX_RANK], *c[LG_MAX_RANK], *match = NULL, *inRange = NULL;
  memcpy(ii, ivs, (q - 1) * sizeof *ii);
  for (size_t j = 0; j < k; ++j) {
    ii[q - 1] = fzBIndex(&N->b, (int64_t)j);
    FzValue *v = fzBCast(&N->b, "loop.index_cast", lgEmit(N, ind, ii), it);
    if (!v)
      return NULL;
    FzValue *dim = fzBIndex(&N->b, lgDim(data, j)), *zero = fzBIndex(&N->b, 0);
    v = fzBSelect(&N->b, fzBCmp(&N->b, "slt", v, zero),
                  fzBAddFold(&N->b, v, dim), v);
    c[j] = v;
    inRange = and_i1(
        N, inRange,
        and_i1(N, fzBCmp(&N->b, "sge", v, zero), fzBCmp(&N->b, "slt", v, dim)));
    match = and_i1(N, match, fzBCmp(&N->b, "eq", v, idx[j]));
  }
  FzValue *keep = acc, *ui[LG_MAX_RANK];
  memcpy(ui, ivs, (q - 1) * sizeof *ui);
  memcpy(ui + q - 1, idx + k, (r - k) * sizeof *ui);
  if (ur > 0) {
    /* Out of range: read updates past its first dim (the check fires). */
    ui[0] = fzBSelect(&N->b, inRange, ui[0], fzBIndex(&N->b, lgDim(upd, 0)));
  } else {
    FzValue *probe = lgEmit(N, data, c);
    keep = fzBSelect(&N->b, inRange, acc, probe);
  }
  FzValue *u = lgEmit(N, upd, ui);
  if (!u || !keep)
    return NULL;
  return fzBSelect(&N->b, match, combine(N, reduction_of(op), acc, u), keep);
}

FzValue *lgEmitScatterNd(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *data = fzOpGetOperand(op, 0), *ind = fzOpGetOperand(op, 1);
  size_t r = lgRank(data), q = lgRank(ind);
  if (q == 0 || lgDim(ind, q - 1) < 1 || (size_t)lgDim(ind, q - 1) > r)
    return lgFail(N, op, "bad index length");
  FzValue *acc = lgEmit(N, data, idx);
  if (!acc)
    return NULL;
  /* The loops sit at the level of the element's indices. */
  size_t parent = 0;
  for (size_t d = 0; d < r; ++d)
    if (lgLevelOf(N, idx[d]) > parent)
      parent = lgLevelOf(N, idx[d]);
  if (lgLevelOf(N, acc) > parent)
    parent = lgLevelOf(N, acc);
  size_t nl = q - 1;
  for (size_t d = 0; d < nl; ++d)
    if (lgDim(ind, d) == 0)
      return acc; /* no updates */
  LgSaved saved[LG_MAX_RANK];
  FzValue *ivs[LG_MAX_RANK], *cur = acc;
  for (size_t d = 0; d < nl; ++d) {
    FzValue *iter;
    if (!lgOpenFor(N, d ? N->depth - 1 : parent, lgDim(ind, d), 1, &cur,
                   &ivs[d], &iter, &saved[d]))
      return NULL;
    cur = iter;
  }
  FzValue *next = step(N, op, idx, ivs, cur);
  if (!next) {
    N->F->failed = true;
    next = cur;
  }
  for (size_t d = nl; d-- > 0;) {
    FzOp *loop = lgClose(N, 1, &next, &saved[d]);
    next = fzOpGetResult(loop, 0);
  }
  return N->F->failed ? NULL : next;
}

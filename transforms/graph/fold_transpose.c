/* transforms/graph/fold_transpose.c - the fold-transpose pass: removes
 * transposes that another op can absorb.
 *
 *   transpose-into-matmul  matmul(transpose(a), b), the transpose swapping
 *                          the last two dims only -> matmul(a, b) with
 *                          transpose_a flipped (the same for b)
 *   transpose-of-matmul    transpose(matmul(a, b)) swapping the last two
 *                          dims -> matmul(b, a) with both flags swapped
 *                          and flipped ((AB)^T = B^T A^T); the matmul must
 *                          have no other use
 *   compose-transposes     transpose(transpose(x)) -> one transpose (or x)
 *   unit-dims-to-reshape   a transpose that moves only size-1 dims (the
 *                          other dims keep their order) -> reshape (of
 *                          the start of a reshape chain; none when that
 *                          already has the result's type)
 *
 * Every rewrite is exact (it moves no arithmetic), and all but
 * compose-transposes (which the transpose fold does) also run in
 * canonicalize.
 */
#include "transforms/graph/graph_opt.h"

enum { STAT_MATMUL, STAT_COMPOSED, STAT_RESHAPE, NUM_STATS };

/* perm of a transpose into p (size *r); false when malformed. */
static bool get_perm(FzOp *t, int64_t *p, size_t *r) {
  FzAttr *a = fzOpGetInherentAttr(t, FZ_STR("perm"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_DENSE_ARRAY)
    return false;
  *r = fzDenseArrayAttrGetSize(a);
  if (*r > FZ_GRAPH_MAX_RANK || *r != fzGraphOptRank(fzOpGetOperand(t, 0)))
    return false;
  for (size_t i = 0; i < *r; ++i)
    p[i] = fzDenseArrayAttrGetInt(a, i);
  return true;
}

/* True when t is a transpose swapping exactly its last two dims. */
static bool swaps_last_two(FzOp *t) {
  int64_t p[FZ_GRAPH_MAX_RANK];
  size_t r;
  if (!fzGraphOptIsOp(t, "graph.transpose") || !get_perm(t, p, &r) || r < 2)
    return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (p[i] != (int64_t)i)
      return false;
  return p[r - 2] == (int64_t)r - 1 && p[r - 1] == (int64_t)r - 2;
}

static bool get_flag(FzOp *op, const char *name) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  return a && fzAttrGetKind(a) == FZ_ATTR_BOOL && fzBoolAttrGetValue(a);
}

static bool transpose_into_matmul(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  static const char *const flags[2] = {"transpose_a", "transpose_b"};
  FzContext *ctx = fzOpGetContext(op);
  for (size_t i = 0; i < 2; ++i) {
    FzOp *t = fzValueGetDefiningOp(fzOpGetOperand(op, i));
    if (!t || !swaps_last_two(t))
      continue;
    FzAttr *flip = fzBoolAttrGet(ctx, !get_flag(op, flags[i]));
    fzRewriterStartModify(rw, op);
    if (!flip || !fzOpSetProp(op, fzStringRefFromCString(flags[i]), flip)) {
      fzRewriterCancelModify(rw, op);
      return false;
    }
    fzOpSetOperand(op, i, fzOpGetOperand(t, 0));
    fzRewriterFinalizeModify(rw, op);
    return true;
  }
  return false;
}

static bool transpose_of_matmul(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *mm = fzGraphOptProducer(fzOpGetOperand(op, 0), "graph.matmul");
  if (!mm || !swaps_last_two(op) || !fzValueHasOneUse(fzOpGetResult(mm, 0)))
    return false;
  FzValue *a = fzOpGetOperand(mm, 0), *b = fzOpGetOperand(mm, 1);
  if (fzGraphOptRank(a) < 2 || fzGraphOptRank(b) < 2)
    return false;
  FzContext *ctx = fzOpGetContext(op);
  FzValue *ops[2] = {b, a};
  FzGraphOptProp props[2] = {
      {"transpose_a", fzBoolAttrGet(ctx, !get_flag(mm, "transpose_b"))},
      {"transpose_b", fzBoolAttrGet(ctx, !get_flag(mm, "transpose_a"))}};
  FzOp *both[2] = {mm, op};
  FzValue *r =
      fzGraphOptCreate(rw, "graph.matmul", fzGraphOptFusedLoc(both, 2), 2, ops,
                       fzValueGetType(fzOpGetResult(op, 0)), 2, props);
  if (!r)
    return false;
  fzRewriterReplaceOp(rw, op, &r);
  return true;
}

static bool compose_transposes(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *inner = fzGraphOptProducer(fzOpGetOperand(op, 0), "graph.transpose");
  int64_t p[FZ_GRAPH_MAX_RANK], q[FZ_GRAPH_MAX_RANK], c[FZ_GRAPH_MAX_RANK];
  size_t r, ri;
  if (!inner || !get_perm(op, p, &r) || !get_perm(inner, q, &ri) || r != ri)
    return false;
  bool identity = true;
  for (size_t i = 0; i < r; ++i) {
    if (p[i] < 0 || p[i] >= (int64_t)r)
      return false;
    c[i] = q[p[i]]; /* y[i] = t[p[i]] = x[q[p[i]]] */
    identity &= c[i] == (int64_t)i;
  }
  FzValue *x = fzOpGetOperand(inner, 0);
  FzType *rt = fzValueGetType(fzOpGetResult(op, 0));
  if (identity) {
    if (fzValueGetType(x) != rt)
      return false;
    fzRewriterReplaceOp(rw, op, &x);
    return true;
  }
  FzContext *ctx = fzOpGetContext(op);
  FzGraphOptProp perm = {
      "perm", fzDenseArrayAttrGet(ctx, fzIntegerTypeGet(ctx, 64), r, c)};
  FzValue *v = fzGraphOptCreate(rw, "graph.transpose", fzOpGetLoc(op), 1, &x,
                                rt, 1, &perm);
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

static bool unit_dims_to_reshape(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzValue *x = fzOpGetOperand(op, 0);
  FzType *rt = fzValueGetType(fzOpGetResult(op, 0));
  int64_t p[FZ_GRAPH_MAX_RANK];
  size_t r;
  if (!get_perm(op, p, &r) || fzGraphOptRank(fzOpGetResult(op, 0)) != r)
    return false;
  /* The dims that are not 1 must appear in increasing order. */
  int64_t last = -1;
  size_t dynamic = 0;
  bool identity = true;
  for (size_t i = 0; i < r; ++i) {
    if (p[i] < 0 || p[i] >= (int64_t)r)
      return false;
    identity &= p[i] == (int64_t)i;
    int64_t d = fzShapedTypeGetDim(fzValueGetType(x), (size_t)p[i]);
    if (d == 1)
      continue;
    if (p[i] < last)
      return false;
    last = p[i];
    dynamic += d == FZ_DYNAMIC;
  }
  /* A reshape resolves at most one dynamic dim from the element count. */
  if (identity || dynamic > 1)
    return false;
  /* Reshape from the start of a reshape chain; no reshape at all when
   * that already has the result's type. */
  FzOp *chain;
  while ((chain = fzGraphOptProducer(x, "graph.reshape")))
    x = fzOpGetOperand(chain, 0);
  if (fzValueGetType(x) == rt) {
    fzRewriterReplaceOp(rw, op, &x);
    return true;
  }
  FzValue *v =
      fzGraphOptCreate(rw, "graph.reshape", fzOpGetLoc(op), 1, &x, rt, 0, NULL);
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

static const FzGraphOptRow kRows[] = {
    {"graph.matmul", transpose_into_matmul, "transpose-into-matmul", 2, 0,
     STAT_MATMUL},
    {"graph.transpose", transpose_of_matmul, "transpose-of-matmul", 2, 0,
     STAT_MATMUL},
    {"graph.transpose", compose_transposes, "compose-transposes", 2, -1,
     STAT_COMPOSED},
    {"graph.transpose", unit_dims_to_reshape, "unit-dims-to-reshape", 1, 1,
     STAT_RESHAPE},
};

const FzGraphOptRow fzFoldTransposeCanonicalRows[] = {
    {"graph.matmul", transpose_into_matmul, "transpose-into-matmul", 1, -1, 0},
    {"graph.transpose", transpose_of_matmul, "transpose-of-matmul", 1, -1, 0},
    {"graph.transpose", unit_dims_to_reshape, "unit-dims-to-reshape", 1, -1, 0},
};
const size_t fzNumFoldTransposeCanonicalRows =
    sizeof fzFoldTransposeCanonicalRows /
    sizeof fzFoldTransposeCanonicalRows[0];

static const char *const kGroups[] = {"into-matmul", "unit-dims-to-reshape"};

static const FzGraphOptTable kTable = {kRows, sizeof kRows / sizeof kRows[0],
                                       kGroups, 2, NULL, 0};

static const FzPassOptionDef kOptions[] = {
    {"into-matmul", FZ_PASS_OPTION_BOOL, "true",
     "Absorb transposes of the last two dims into matmul's transpose flags",
     NULL, 0, 0},
    {"unit-dims-to-reshape", FZ_PASS_OPTION_BOOL, "true",
     "Turn a transpose that moves only size-1 dims into a reshape", NULL, 0, 0},
};

static const FzPassStatisticDef kStats[NUM_STATS] = {
    {"num-into-matmul", "Transposes absorbed into matmul flags"},
    {"num-composed", "Transpose pairs composed"},
    {"num-to-reshape", "Transposes of size-1 dims turned into reshapes"},
};

const FzPassDef fzFoldTransposePass = {
    .argument = "fold-transpose",
    .displayName = "FoldTranspose",
    .summary = "Fold transposes into matmul flags, compose transpose pairs, "
               "and turn size-1 transposes into reshapes",
    .anchor = NULL,
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = NUM_STATS,
    .initialize = fzGraphOptPassInitialize,
    .run = fzGraphOptPassRun,
    .destroy = fzGraphOptPassDestroy,
    .userData = (void *)&kTable,
};

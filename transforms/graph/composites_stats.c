/* transforms/graph/composites_stats.c - the layer-norm-stats pattern of
 * recognize-composites: a layer_norm whose statistics are also computed
 * by primitive ops (ONNX LayerNormalization's Mean and InvStdDev outputs,
 * which the `_expanded` function bodies compute beside the normalized
 * output) gives them as its results #1 and #2 instead.
 *
 *   layer_norm(x) {axis = a, epsilon = e}, and beside it
 *     m   = reduce_mean(xs) over trailing dims, keepdims
 *     v   = mean(xs^2) - m^2   or   mean((xs - m)^2)   (same dims)
 *     inv = rsqrt(v + e), pow(v + e, -0.5), reciprocal(sqrt(v + e)) or
 *           1 / sqrt(v + e)     (no `+ e` when e is 0)
 *   -> %y, %mean, %inv = layer_norm(x) {axis = a, epsilon = e}
 *
 * xs is x or a reshape of x whose reduced dims hold the same elements as
 * x's normalized dims [a, rank) (ONNX's body flattens x to [rows, cols]);
 * a statistic of another shape is reshaped from the layer_norm's. The
 * mean alone (InvStdDev not asked for) is taken too. Squares are
 * `mul(t, t)` or `pow(t, 2)`; epsilon is compared within the element
 * type's precision. Every use of the mean and of inv is redirected; the
 * primitive ops are then dead.
 *
 * It does not match when x's shape is not static, when no statistic is
 * found, or when a use of a statistic comes before the layer_norm's
 * operands are all defined (the new op could not dominate it). This is a
 * late row: it runs once the other norm patterns (which build one-result
 * norms) are done.
 */
#include "transforms/graph/composites.h"

/* Result #0, or NULL for an op without results (a user may be the
 * function's return). */
static FzValue *res(FzOp *op) {
  return fzOpGetNumResults(op) ? fzOpGetResult(op, 0) : NULL;
}
static FzValue *opd(FzOp *op, size_t i) {
  return fzOpGetOperand(op, i);
}

/* When red is a reduce_mean of x over its trailing dims [b, rank) with
 * keepdims: b; else -1. */
static int64_t trailing_mean(FzOp *red, const FzValue *x) {
  int64_t axes[FZ_GRAPH_MAX_RANK];
  size_t r = fzGraphOptRank(x), n;
  if (!fzGraphOptIsOp(red, "graph.reduce_mean") || opd(red, 0) != x ||
      !fzGraphOptGetKeepDims(red) || !fzGraphOptGetAxes(red, r, axes, &n) ||
      n == 0)
    return -1;
  for (size_t i = 0; i < n; ++i)
    if (axes[i] != (int64_t)(r - n + i))
      return -1;
  return axes[0];
}

static int64_t product(const FzType *t, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= fzShapedTypeGetDim(t, i);
  return p;
}

/* The users of v, as ops (one entry per use). */
#define FOR_EACH_USER(u, v)                                                    \
  for (FzOpOperand *u##_use = fzValueGetFirstUse(v); u##_use;                  \
       u##_use = fzOpOperandGetNextUse(u##_use))                               \
    for (FzOp *u = fzOpOperandGetOwner(u##_use); u; u = NULL)

/* True when q = t * t or pow(t, 2). */
static bool is_square_of(FzOp *q, FzValue *t) {
  FzOp *sq;
  return q && res(q) && fzCompositeSquareOf(res(q), &sq) == t && sq == q;
}

/* v = mean(xs^2) - m^2 or mean((xs - m)^2) over [b, rank): the value, or
 * NULL. */
static FzValue *find_variance(FzValue *xs, FzValue *m, int64_t b) {
  FOR_EACH_USER(p, m) {
    if (is_square_of(p, m)) {
      /* mean(xs^2) - m^2 */
      FOR_EACH_USER(q, res(p)) {
        if (!fzGraphOptIsOp(q, "graph.sub") || opd(q, 1) != res(p))
          continue;
        FzOp *m2 = fzValueGetDefiningOp(opd(q, 0));
        if (!fzGraphOptIsOp(m2, "graph.reduce_mean"))
          continue;
        FzOp *sq = fzValueGetDefiningOp(opd(m2, 0));
        if (trailing_mean(m2, opd(m2, 0)) == b && is_square_of(sq, xs) &&
            fzValueGetType(res(q)) == fzValueGetType(m))
          return res(q);
      }
    }
    if (fzGraphOptIsOp(p, "graph.sub") && opd(p, 0) == xs && opd(p, 1) == m) {
      /* mean((xs - m)^2) */
      FOR_EACH_USER(s, res(p)) {
        if (!is_square_of(s, res(p)))
          continue;
        FOR_EACH_USER(r, res(s)) {
          if (trailing_mean(r, res(s)) == b &&
              fzValueGetType(res(r)) == fzValueGetType(m))
            return res(r);
        }
      }
    }
  }
  return NULL;
}

/* 1 / sqrt(v + eps) in one of the forms of the file comment, of v's
 * type: the value, or NULL. */
static FzValue *find_inv_std(FzValue *v, double eps) {
  FzValue *cands[8];
  size_t nc = 0;
  FzType *elt = fzGraphOptElementType(v);
  if (eps == 0)
    cands[nc++] = v;
  FOR_EACH_USER(a, v) {
    double c;
    if (nc < 8 && fzGraphOptIsOp(a, "graph.add") &&
        fzGraphOptSplat(opd(a, opd(a, 0) == v ? 1 : 0), &c) &&
        fzGraphOptNear(c, eps, elt) &&
        fzValueGetType(res(a)) == fzValueGetType(v))
      cands[nc++] = res(a);
  }
  for (size_t k = 0; k < nc; ++k) {
    FzValue *ve = cands[k];
    FOR_EACH_USER(p, ve) {
      FzValue *r = res(p);
      if (!r || fzValueGetType(r) != fzValueGetType(v))
        continue;
      if (fzGraphOptIsOp(p, "graph.rsqrt") ||
          (fzGraphOptIsOp(p, "graph.pow") && opd(p, 0) == ve &&
           fzGraphOptIsSplatNear(opd(p, 1), -0.5)))
        return r;
      if (!fzGraphOptIsOp(p, "graph.sqrt"))
        continue;
      FOR_EACH_USER(q, r) {
        if (!res(q) || fzValueGetType(res(q)) != fzValueGetType(v))
          continue;
        if (fzGraphOptIsOp(q, "graph.reciprocal") ||
            (fzGraphOptIsOp(q, "graph.div") && opd(q, 1) == r &&
             fzGraphOptIsSplatNear(opd(q, 0), 1.0)))
          return res(q);
      }
    }
  }
  return NULL;
}

/* The layer_norm's axis (non-negative) and epsilon. */
static bool ln_params(FzOp *n, int64_t *axis, double *eps) {
  FzAttr *a = fzOpGetInherentAttr(n, FZ_STR("axis"));
  FzAttr *e = fzOpGetInherentAttr(n, FZ_STR("epsilon"));
  int64_t r = (int64_t)fzGraphOptRank(opd(n, 0));
  *axis =
      a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a) : -1;
  *eps = e && fzAttrGetKind(e) == FZ_ATTR_FLOAT ? fzFloatAttrGetValue(e) : 1e-5;
  if (*axis < 0)
    *axis += r;
  return *axis >= 0 && *axis < r;
}

/* True when every operand of op is defined before `at` (same block) or
 * is a block argument of at's block. */
static bool operands_before(FzOp *op, FzOp *at) {
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzOp *d = fzValueGetDefiningOp(opd(op, i));
    if (!d) {
      if (fzValueGetParentBlock(opd(op, i)) != fzOpGetBlock(at))
        return false;
      continue;
    }
    if (fzOpGetBlock(d) != fzOpGetBlock(at) || !fzOpIsBeforeInBlock(d, at))
      return false;
  }
  return true;
}

/* s (a statistic of the layer_norm, type st) as a value of type want. */
static FzValue *as_type(FzRewriter *rw, FzValue *s, FzType *want, FzLoc *loc) {
  if (fzValueGetType(s) == want)
    return s;
  return fzGraphOptCreate(rw, "graph.reshape", loc, 1, &s, want, 0, NULL);
}

/* Gives every use of v the statistic s instead: a reshape of v to s's
 * type is s itself; other uses read s reshaped to v's type. */
static bool redirect(FzRewriter *rw, FzValue *v, FzValue *s, FzLoc *loc) {
  FzValue *same[16];
  size_t n = 0;
  FOR_EACH_USER(u, v) {
    if (n < 16 && fzGraphOptIsOp(u, "graph.reshape") &&
        fzValueGetType(res(u)) == fzValueGetType(s))
      same[n++] = res(u);
  }
  for (size_t i = 0; i < n; ++i)
    fzRewriterReplaceAllUsesWith(rw, same[i], s);
  if (!fzValueHasUses(v))
    return true;
  FzValue *w = as_type(rw, s, fzValueGetType(v), loc);
  if (!w)
    return false;
  fzRewriterReplaceAllUsesWith(rw, v, w);
  return true;
}

bool fzCompositeLayerNormStats(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzValue *x = opd(op, 0);
  FzType *xt = fzValueGetType(x);
  int64_t a;
  double eps;
  if (!fzGraphOptIsFloatTensor(x) || !fzShapedTypeHasStaticShape(xt) ||
      !ln_params(op, &a, &eps))
    return false;
  size_t r = fzShapedTypeGetRank(xt);
  int64_t rows = product(xt, 0, (size_t)a), cols = product(xt, (size_t)a, r);
  /* The candidates for xs: x and its reshapes. */
  FzValue *xs[8];
  size_t nx = 0;
  xs[nx++] = x;
  FOR_EACH_USER(u, x) {
    if (nx < 8 && fzGraphOptIsOp(u, "graph.reshape") &&
        fzShapedTypeHasStaticShape(fzValueGetType(res(u))))
      xs[nx++] = res(u);
  }
  FzValue *mean = NULL, *inv = NULL;
  FzOp *mop = NULL;
  for (size_t k = 0; k < nx && !mean; ++k) {
    FzType *t = fzValueGetType(xs[k]);
    size_t rk = fzShapedTypeGetRank(t);
    FOR_EACH_USER(u, xs[k]) {
      int64_t b = mean ? -1 : trailing_mean(u, xs[k]);
      if (b < 0 || !fzValueHasUses(res(u)) ||
          product(t, (size_t)b, rk) != cols || product(t, 0, (size_t)b) != rows ||
          fzGraphOptElementType(res(u)) != fzShapedTypeGetElementType(xt))
        continue;
      FzValue *v = find_variance(xs[k], res(u), b);
      FzValue *i = v ? find_inv_std(v, eps) : NULL;
      mean = res(u);
      mop = u;
      inv = i && fzValueHasUses(i) ? i : NULL;
    }
  }
  if (!mean)
    return false;
  /* The new op goes before the layer_norm or the mean, whichever is
   * first: it must dominate every use it takes over. */
  FzOp *at = fzOpGetBlock(mop) == fzOpGetBlock(op) &&
                     fzOpIsBeforeInBlock(mop, op)
                 ? mop
                 : op;
  if (fzOpGetBlock(mop) != fzOpGetBlock(op) || !operands_before(op, at))
    return false;
  FzOp *all[2] = {op, mop};
  FzLoc *loc = fzGraphOptFusedLoc(all, 2);
  FzContext *ctx = fzRewriterGetContext(rw);
  FzType *types[4] = {NULL, NULL, NULL, NULL}, *in[3];
  size_t n = fzOpGetNumOperands(op);
  const FzOpDef *def = fzOpGetDef(op);
  for (size_t i = 0; i < n && i < 3; ++i)
    in[i] = fzValueGetType(opd(op, i));
  if (n > 3 || !def->inferResultTypes(ctx, loc, n, in, NULL,
                                      fzOpGetPropDict(op), types))
    return false;
  fzRewriterSetInsertionPointBefore(rw, at);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("graph.layer_norm"), loc);
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = opd(op, i);
    fzOpStateAddOperands(&st, 1, &v);
  }
  FzAttr *props = fzOpGetPropDict(op);
  for (size_t i = 0; props && i < fzDictAttrGetSize(props); ++i) {
    FzNamedAttr e = fzDictAttrGetEntry(props, i);
    fzOpStateAddProp(&st, fzIdentGetString(e.name), e.value);
  }
  fzOpStateAddAttrDict(&st, fzOpGetAttrDict(op));
  fzOpStateAddResults(&st, 3, types);
  FzOp *ln = fzRewriterCreateOp(rw, &st);
  if (!ln)
    return false;
  if (!redirect(rw, mean, fzOpGetResult(ln, 1), loc) ||
      (inv && !redirect(rw, inv, fzOpGetResult(ln, 2), loc)))
    return false; /* the new ops are dead; the driver erases them */
  FzValue *outs[3] = {fzOpGetResult(ln, 0), fzOpGetResult(ln, 1),
                      fzOpGetResult(ln, 2)};
  fzRewriterReplaceOp(rw, op, outs);
  return true;
}

/* transforms/graph/composites_norm.c - recognize-composites patterns for
 * the reductions-based composites.
 *
 *   layer-norm   n = (x - m) / sqrt(v + eps)  or  (x - m) * rsqrt(v + eps)
 *                with m = mean(x) over the trailing dims [a, rank)
 *                (keepdims), and either v = mean((x - m)^2) (PyTorch's
 *                export: pow 2 or a self-multiply) or v = mean(x^2) - m^2
 *                (ONNX's LayerNormalization function body); sqrt may be
 *                pow(., 0.5), rsqrt reciprocal(sqrt(.)) or pow(., -0.5);
 *                eps is read from the graph (none: 0)
 *                -> layer_norm(x) {axis = a, epsilon = eps}
 *   rms-norm     x / sqrt(mean(x^2) + eps) (or the rsqrt forms)
 *                -> rms_norm(x); not when x = y - mean(y) (a layer_norm
 *                near miss stays as written)
 *   norm-scale   norm(x) * g -> norm(x, g) when g varies only along the
 *                normalized dims (leading unit dims of g are reshaped away)
 *   norm-bias    layer_norm(x[, g]) + b -> layer_norm(x, g or 1, b)
 *   norm-reshape reshape(norm(reshape(X), ...)) back to X's shape, where
 *                the inner reshape flattens X into [prefix, suffix] rows
 *                (ONNX's function body does) -> norm(X) over the dims of X
 *                whose product is the suffix, parameters reshaped to them
 *   softmax      e / sum(e) with e = exp(x - max(x)) or exp(x), over one
 *                axis (keepdims); / may be * reciprocal -> softmax(x)
 *   log-softmax  t - log(sum(exp(t))) with t = x - max(x) or x
 *                -> log_softmax(x); and log(softmax(x)) -> log_softmax(x)
 *   global-avg-pool  reduce_mean of an NCHW tensor over H and W
 *                -> global_avg_pool (then a reshape without keepdims)
 */
#include "transforms/graph/composites.h"

static FzValue *res(FzOp *op) {
  return fzOpGetResult(op, 0);
}
static FzValue *opd(FzOp *op, size_t i) {
  return fzOpGetOperand(op, i);
}

/* v = sqrt(w) or pow(w, 0.5): w, else NULL. */
static FzValue *sqrt_of(FzValue *v, FzOp **op) {
  FzOp *p = fzValueGetDefiningOp(v);
  *op = p;
  if (fzGraphOptIsOp(p, "graph.sqrt"))
    return opd(p, 0);
  if (fzGraphOptIsOp(p, "graph.pow") && fzGraphOptIsSplatNear(opd(p, 1), 0.5) &&
      fzValueGetType(opd(p, 0)) == fzValueGetType(v))
    return opd(p, 0);
  return NULL;
}

/* v = rsqrt(w), reciprocal(sqrt(w)) or pow(w, -0.5): w (its ops recorded
 * as statistics), else NULL. */
static FzValue *rsqrt_of(FzValue *v, CompositeMatch *m) {
  FzOp *p = fzValueGetDefiningOp(v), *s;
  if (fzGraphOptIsOp(p, "graph.rsqrt")) {
    fzCompositeAddStat(m, p);
    return opd(p, 0);
  }
  if (fzGraphOptIsOp(p, "graph.pow") &&
      fzGraphOptIsSplatNear(opd(p, 1), -0.5) &&
      fzValueGetType(opd(p, 0)) == fzValueGetType(v)) {
    fzCompositeAddStat(m, p);
    return opd(p, 0);
  }
  FzValue *w;
  if (fzGraphOptIsOp(p, "graph.reciprocal") && (w = sqrt_of(opd(p, 0), &s))) {
    fzCompositeAddStat(m, p);
    fzCompositeAddStat(m, s);
    return w;
  }
  return NULL;
}

/* root = num / sqrt(ve) or num * rsqrt(ve) (either order): num and ve. */
static bool split_normalizer(FzOp *root, CompositeMatch *m, FzValue **num,
                             FzValue **ve) {
  FzOp *s;
  if (fzGraphOptIsOp(root, "graph.div")) {
    *ve = sqrt_of(opd(root, 1), &s);
    if (!*ve)
      return false;
    fzCompositeAddStat(m, s);
    *num = opd(root, 0);
    return true;
  }
  for (size_t i = 0; i < 2; ++i) {
    CompositeMatch probe = *m;
    if ((*ve = rsqrt_of(opd(root, i), &probe))) {
      *m = probe;
      *num = opd(root, 1 - i);
      return true;
    }
  }
  return false;
}

/* ve = v + eps (either order; eps a splat constant >= 0 that does not
 * widen v): v, with eps into *eps; otherwise ve itself with eps 0. */
static FzValue *split_epsilon(FzValue *ve, CompositeMatch *m, double *eps) {
  FzOp *p = fzGraphOptProducer(ve, "graph.add");
  *eps = 0;
  for (size_t i = 0; p && i < 2; ++i) {
    double c;
    if (fzGraphOptSplat(opd(p, 1 - i), &c) && c >= 0 && c < 1e30 &&
        fzValueGetType(opd(p, i)) == fzValueGetType(ve)) {
      fzCompositeAddStat(m, p);
      *eps = c;
      return opd(p, i);
    }
  }
  return ve;
}

/* When red is a `name` reduction of x over the trailing dims [a, rank)
 * with keepdims: a; else -1. */
static int64_t trailing_reduce(FzOp *red, const char *name, const FzValue *x) {
  int64_t axes[FZ_GRAPH_MAX_RANK];
  size_t r = fzGraphOptRank(x), n;
  if (!fzGraphOptIsOp(red, name) || opd(red, 0) != x ||
      !fzGraphOptGetKeepDims(red) || !fzGraphOptGetAxes(red, r, axes, &n) ||
      n == 0)
    return -1;
  for (size_t i = 0; i < n; ++i)
    if (axes[i] != (int64_t)(r - n + i))
      return -1;
  return axes[0];
}

/* Creates `name`(x, ...) {axis, epsilon} of x's type. */
static FzValue *create_norm(FzRewriter *rw, const char *name, FzLoc *loc,
                            size_t n, FzValue *const *ops, int64_t axis,
                            double eps) {
  FzContext *ctx = fzRewriterGetContext(rw);
  FzGraphOptProp props[2] = {{"axis", fzGraphOptI64(ctx, axis)},
                             {"epsilon", fzGraphOptF32(ctx, eps)}};
  return fzGraphOptCreate(rw, name, loc, n, ops, NULL, 2, props);
}

static bool replace_checked(FzRewriter *rw, FzOp *op, FzValue *v) {
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

/*===--- layer_norm and rms_norm ----------------------------------------===*/

bool fzCompositeLayerNorm(FzOp *op, FzRewriter *rw, void *ud) {
  CompositeMatch m = {0};
  FzValue *d, *ve;
  if (!fzGraphOptIsFloatTensor(res(op)) || !split_normalizer(op, &m, &d, &ve))
    return false;
  FzOp *dop = fzGraphOptProducer(d, "graph.sub");
  if (!dop)
    return false;
  FzValue *x = opd(dop, 0), *mean = opd(dop, 1);
  FzOp *mop = fzValueGetDefiningOp(mean), *sq, *vop;
  int64_t a = trailing_reduce(mop, "graph.reduce_mean", x);
  if (a < 0 || fzValueGetType(x) != fzValueGetType(res(op)))
    return false;
  double eps;
  FzValue *v = split_epsilon(ve, &m, &eps);
  vop = fzValueGetDefiningOp(v);
  if (fzGraphOptIsOp(vop, "graph.reduce_mean")) {
    /* v = mean((x - m)^2) */
    if (trailing_reduce(vop, "graph.reduce_mean", opd(vop, 0)) != a ||
        fzCompositeSquareOf(opd(vop, 0), &sq) != d)
      return false;
    fzCompositeAddInterior(&m, sq);
  } else if (fzGraphOptIsOp(vop, "graph.sub")) {
    /* v = mean(x^2) - m^2 */
    FzOp *m2 = fzValueGetDefiningOp(opd(vop, 0)), *mm;
    if (!m2 || trailing_reduce(m2, "graph.reduce_mean", opd(m2, 0)) != a ||
        fzCompositeSquareOf(opd(m2, 0), &sq) != x ||
        fzCompositeSquareOf(opd(vop, 1), &mm) != mean)
      return false;
    fzCompositeAddStat(&m, m2);
    fzCompositeAddInterior(&m, sq);
    fzCompositeAddStat(&m, mm);
  } else {
    return false;
  }
  fzCompositeAddStat(&m, vop);
  fzCompositeAddStat(&m, mop);
  fzCompositeAddInterior(&m, dop);
  fzCompositeAddRoot(&m, op);
  if (!fzCompositeUsesOk(&m, ud))
    return false;
  return replace_checked(
      rw, op,
      create_norm(rw, "graph.layer_norm", fzCompositeLoc(&m), 1, &x, a, eps));
}

bool fzCompositeRmsNorm(FzOp *op, FzRewriter *rw, void *ud) {
  CompositeMatch m = {0};
  FzValue *x, *ve;
  if (!fzGraphOptIsFloatTensor(res(op)) || !split_normalizer(op, &m, &x, &ve))
    return false;
  double eps;
  FzValue *v = split_epsilon(ve, &m, &eps);
  FzOp *vop = fzValueGetDefiningOp(v), *sq;
  /* x - mean(x) would make this a layer_norm; one that did not match is
   * a near miss and stays as written. */
  FzOp *centered = fzGraphOptProducer(x, "graph.sub");
  if (centered && fzGraphOptProducer(opd(centered, 1), "graph.reduce_mean") &&
      opd(fzValueGetDefiningOp(opd(centered, 1)), 0) == opd(centered, 0))
    return false;
  if (!fzGraphOptIsOp(vop, "graph.reduce_mean") ||
      fzCompositeSquareOf(opd(vop, 0), &sq) != x ||
      fzValueGetType(x) != fzValueGetType(res(op)))
    return false;
  int64_t a = trailing_reduce(vop, "graph.reduce_mean", opd(vop, 0));
  if (a < 0)
    return false;
  fzCompositeAddStat(&m, vop);
  fzCompositeAddInterior(&m, sq);
  fzCompositeAddRoot(&m, op);
  if (!fzCompositeUsesOk(&m, ud))
    return false;
  return replace_checked(
      rw, op,
      create_norm(rw, "graph.rms_norm", fzCompositeLoc(&m), 1, &x, a, eps));
}

/*===--- Parameters: scale, bias, reshapes ------------------------------===*/

/* The normalized axis (non-negative) and epsilon of a one-result
 * layer_norm or rms_norm; false for another op. */
static bool norm_params(FzOp *n, int64_t *axis, double *eps) {
  /* A layer_norm giving its statistics is left alone: these patterns
   * build one-result norms. */
  if ((!fzGraphOptIsOp(n, "graph.layer_norm") &&
       !fzGraphOptIsOp(n, "graph.rms_norm")) ||
      fzOpGetNumResults(n) != 1)
    return false;
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

/* v reshaped to shape (looking through v's own reshapes first); v itself
 * when it has that shape. NULL when the element counts differ. */
static FzValue *reshape_to(FzRewriter *rw, FzValue *v, size_t rank,
                           const int64_t *shape, FzLoc *loc) {
  FzContext *ctx = fzRewriterGetContext(rw);
  FzType *t = fzTensorTypeGet(ctx, rank, shape, fzGraphOptElementType(v), NULL);
  if (!t || fzValueGetType(v) == t)
    return t ? v : NULL;
  FzOp *p;
  while ((p = fzGraphOptProducer(v, "graph.reshape")))
    v = opd(p, 0);
  if (fzValueGetType(v) == t)
    return v;
  if (!fzShapedTypeHasStaticShape(fzValueGetType(v)) ||
      !fzShapedTypeHasStaticShape(t) ||
      fzShapedTypeGetNumElements(fzValueGetType(v)) !=
          fzShapedTypeGetNumElements(t))
    return NULL;
  return fzGraphOptCreate(rw, "graph.reshape", loc, 1, &v, t, 0, NULL);
}

/* A parameter g of a norm over dims [axis, rank) given through a
 * broadcasting binary op: g's dims aligned before `axis` must be 1; they
 * are dropped. *ok false when g does not qualify; NULL result on OOM. */
static FzValue *norm_param(FzRewriter *rw, FzValue *g, size_t rank, size_t axis,
                           FzLoc *loc, bool check, bool *ok) {
  size_t gr = fzGraphOptRank(g), keep = rank - axis;
  FzType *gt = fzValueGetType(g);
  *ok = gr <= rank;
  for (size_t j = 0; *ok && j < gr; ++j)
    if (rank - gr + j < axis && fzShapedTypeGetDim(gt, j) != 1)
      *ok = false;
  if (!*ok || check || gr <= keep)
    return g;
  return reshape_to(rw, g, keep, fzShapedTypeGetShape(gt) + (gr - keep), loc);
}

/* Re-creates norm n with operands ops (n's axis and epsilon kept). */
static FzValue *renorm(FzRewriter *rw, FzOp *n, FzLoc *loc, size_t k,
                       FzValue *const *ops, int64_t axis, double eps) {
  return create_norm(rw, fzOpGetDef(n)->name, loc, k, ops, axis, eps);
}

bool fzCompositeNormScale(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  for (size_t i = 0; i < 2; ++i) {
    FzValue *v = opd(op, i), *g = opd(op, 1 - i);
    FzOp *n = fzValueGetDefiningOp(v);
    int64_t axis;
    double eps;
    bool ok;
    if (!norm_params(n, &axis, &eps) || fzOpGetNumOperands(n) != 1 ||
        !fzValueHasOneUse(v) || fzValueGetType(v) != fzValueGetType(res(op)))
      continue;
    size_t rank = fzGraphOptRank(v);
    norm_param(rw, g, rank, (size_t)axis, NULL, true, &ok);
    if (!ok)
      continue;
    FzOp *both[2] = {n, op};
    FzLoc *loc = fzGraphOptFusedLoc(both, 2);
    FzValue *ops[2] = {opd(n, 0),
                       norm_param(rw, g, rank, (size_t)axis, loc, false, &ok)};
    return ops[1] &&
           replace_checked(rw, op, renorm(rw, n, loc, 2, ops, axis, eps));
  }
  return false;
}

bool fzCompositeNormBias(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  for (size_t i = 0; i < 2; ++i) {
    FzValue *v = opd(op, i), *b = opd(op, 1 - i);
    FzOp *n = fzValueGetDefiningOp(v);
    int64_t axis;
    double eps;
    bool ok;
    if (!fzGraphOptIsOp(n, "graph.layer_norm") ||
        !norm_params(n, &axis, &eps) || fzOpGetNumOperands(n) > 2 ||
        !fzValueHasOneUse(v) || fzValueGetType(v) != fzValueGetType(res(op)))
      continue;
    size_t rank = fzGraphOptRank(v);
    norm_param(rw, b, rank, (size_t)axis, NULL, true, &ok);
    if (!ok)
      continue;
    FzOp *both[2] = {n, op};
    FzLoc *loc = fzGraphOptFusedLoc(both, 2);
    FzValue *ops[3] = {opd(n, 0), NULL, NULL};
    if (fzOpGetNumOperands(n) == 2) {
      ops[1] = opd(n, 1);
    } else { /* no scale yet: a scalar 1 */
      FzContext *ctx = fzOpGetContext(op);
      FzType *one =
          fzTensorTypeGet(ctx, 0, NULL, fzGraphOptElementType(v), NULL);
      ops[1] = one ? fzGraphOptSplatConstant(rw, one, 1.0, loc) : NULL;
    }
    ops[2] = norm_param(rw, b, rank, (size_t)axis, loc, false, &ok);
    return ops[1] && ops[2] &&
           replace_checked(rw, op, renorm(rw, n, loc, 3, ops, axis, eps));
  }
  return false;
}

/* A norm parameter over `count` normalized elements moved to the dims
 * shape[0..rank) (whose product is count); *ok false when it cannot be. */
static FzValue *move_param(FzRewriter *rw, FzValue *g, int64_t count,
                           size_t rank, const int64_t *shape, FzLoc *loc,
                           bool check, bool *ok) {
  FzType *gt = fzValueGetType(g);
  int64_t n = fzShapedTypeGetNumElements(gt);
  *ok = n == 1 || n == count;
  if (!*ok || check)
    return g;
  if (n == 1 && fzShapedTypeGetRank(gt) <= rank)
    return g;
  return n == 1 ? reshape_to(rw, g, 0, NULL, loc)
                : reshape_to(rw, g, rank, shape, loc);
}

bool fzCompositeNormReshape(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *n = fzValueGetDefiningOp(opd(op, 0));
  int64_t axis;
  double eps;
  if (!norm_params(n, &axis, &eps) || !fzValueHasOneUse(res(n)))
    return false;
  FzOp *in = fzGraphOptProducer(opd(n, 0), "graph.reshape");
  FzValue *x = in ? opd(in, 0) : NULL;
  FzType *xt = x ? fzValueGetType(x) : NULL, *nt = fzValueGetType(res(n));
  if (!x || xt != fzValueGetType(res(op)) || !fzShapedTypeHasStaticShape(xt) ||
      !fzShapedTypeHasStaticShape(nt))
    return false;
  /* count: the normalized elements per row; the new axis covers the
   * trailing dims of x with that product (unit dims before it excluded). */
  int64_t count = 1;
  for (size_t i = (size_t)axis; i < fzShapedTypeGetRank(nt); ++i)
    count *= fzShapedTypeGetDim(nt, i);
  size_t xr = fzShapedTypeGetRank(xt), na = xr;
  int64_t prod = 1;
  while (na > 0 && prod < count)
    prod *= fzShapedTypeGetDim(xt, --na);
  if (prod != count || count == 0)
    return false;
  const int64_t *shape = fzShapedTypeGetShape(xt) + na;
  size_t k = fzOpGetNumOperands(n);
  bool ok = true;
  for (size_t i = 1; i < k && ok; ++i)
    move_param(rw, opd(n, i), count, xr - na, shape, NULL, true, &ok);
  if (!ok)
    return false;
  FzOp *all[3] = {in, n, op};
  FzLoc *loc = fzGraphOptFusedLoc(all, 3);
  FzValue *ops[3] = {x, NULL, NULL};
  for (size_t i = 1; i < k; ++i)
    if (!(ops[i] = move_param(rw, opd(n, i), count, xr - na, shape, loc, false,
                              &ok)))
      return false;
  return replace_checked(rw, op, renorm(rw, n, loc, k, ops, (int64_t)na, eps));
}

/*===--- softmax and log_softmax ----------------------------------------===*/

/* When red reduces x over one axis with keepdims: that axis; else -1. */
static int64_t single_axis(FzOp *red, const char *name, const FzValue *x) {
  int64_t axes[FZ_GRAPH_MAX_RANK];
  size_t n;
  if (!fzGraphOptIsOp(red, name) || opd(red, 0) != x ||
      !fzGraphOptGetKeepDims(red) ||
      !fzGraphOptGetAxes(red, fzGraphOptRank(x), axes, &n) || n != 1)
    return -1;
  return axes[0];
}

/* t = x - max(x) over axis a: x (recording the ops); else t itself. */
static FzValue *strip_max(FzValue *t, int64_t a, CompositeMatch *m) {
  FzOp *sub = fzGraphOptProducer(t, "graph.sub");
  if (!sub)
    return t;
  FzValue *x = opd(sub, 0);
  FzOp *mx = fzValueGetDefiningOp(opd(sub, 1));
  if (single_axis(mx, "graph.reduce_max", x) != a ||
      fzValueGetType(x) != fzValueGetType(t))
    return t;
  fzCompositeAddInterior(m, sub);
  fzCompositeAddStat(m, mx);
  return x;
}

static FzValue *create_softmax(FzRewriter *rw, const char *name,
                               const CompositeMatch *m, FzValue *x, int64_t a) {
  FzGraphOptProp axis = {"axis", fzGraphOptI64(fzRewriterGetContext(rw), a)};
  return fzGraphOptCreate(rw, name, fzCompositeLoc(m), 1, &x, fzValueGetType(x),
                          1, &axis);
}

bool fzCompositeSoftmax(FzOp *op, FzRewriter *rw, void *ud) {
  CompositeMatch m = {0};
  FzValue *e = NULL, *s = NULL;
  if (fzGraphOptIsOp(op, "graph.div")) {
    e = opd(op, 0);
    s = opd(op, 1);
  } else {
    for (size_t i = 0; i < 2 && !s; ++i) {
      FzOp *r = fzGraphOptProducer(opd(op, i), "graph.reciprocal");
      if (r) {
        fzCompositeAddStat(&m, r);
        s = opd(r, 0);
        e = opd(op, 1 - i);
      }
    }
  }
  FzOp *eop = fzGraphOptProducer(e, "graph.exp");
  FzOp *sop = s ? fzValueGetDefiningOp(s) : NULL;
  int64_t a = eop ? single_axis(sop, "graph.reduce_sum", e) : -1;
  if (a < 0 || !fzGraphOptIsFloatTensor(e) ||
      fzValueGetType(e) != fzValueGetType(res(op)))
    return false;
  FzValue *x = strip_max(opd(eop, 0), a, &m);
  fzCompositeAddInterior(&m, eop);
  fzCompositeAddStat(&m, sop);
  fzCompositeAddRoot(&m, op);
  if (fzValueGetType(x) != fzValueGetType(res(op)) ||
      !fzCompositeUsesOk(&m, ud))
    return false;
  return replace_checked(rw, op, create_softmax(rw, "graph.softmax", &m, x, a));
}

bool fzCompositeLogSoftmax(FzOp *op, FzRewriter *rw, void *ud) {
  CompositeMatch m = {0};
  FzValue *t = opd(op, 0);
  FzOp *lop = fzGraphOptProducer(opd(op, 1), "graph.log");
  FzOp *sop = lop ? fzValueGetDefiningOp(opd(lop, 0)) : NULL;
  FzOp *eop = sop ? fzGraphOptProducer(opd(sop, 0), "graph.exp") : NULL;
  int64_t a = eop ? single_axis(sop, "graph.reduce_sum", res(eop)) : -1;
  if (a < 0 || opd(eop, 0) != t || !fzGraphOptIsFloatTensor(t) ||
      fzValueGetType(t) != fzValueGetType(res(op)))
    return false;
  FzValue *x = strip_max(t, a, &m);
  fzCompositeAddInterior(&m, eop);
  fzCompositeAddStat(&m, sop);
  fzCompositeAddStat(&m, lop);
  fzCompositeAddRoot(&m, op);
  if (fzValueGetType(x) != fzValueGetType(res(op)) ||
      !fzCompositeUsesOk(&m, ud))
    return false;
  return replace_checked(rw, op,
                         create_softmax(rw, "graph.log_softmax", &m, x, a));
}

bool fzCompositeLogOfSoftmax(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *sm = fzGraphOptProducer(opd(op, 0), "graph.softmax");
  if (!sm || !fzValueHasOneUse(res(sm)))
    return false;
  CompositeMatch m = {0};
  fzCompositeAddRoot(&m, sm);
  fzCompositeAddRoot(&m, op);
  FzAttr *a = fzOpGetInherentAttr(sm, FZ_STR("axis"));
  int64_t axis =
      a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a) : -1;
  return replace_checked(
      rw, op, create_softmax(rw, "graph.log_softmax", &m, opd(sm, 0), axis));
}

/*===--- global_avg_pool ------------------------------------------------===*/

bool fzCompositeGlobalAvgPool(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzValue *x = opd(op, 0);
  size_t r = fzGraphOptRank(x), n;
  int64_t axes[FZ_GRAPH_MAX_RANK];
  if (r != 4 || !fzGraphOptIsFloatTensor(x) ||
      !fzGraphOptGetAxes(op, r, axes, &n) || n != r - 2)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (axes[i] != (int64_t)(i + 2))
      return false;
  FzType *rt = fzValueGetType(res(op));
  bool keep = fzGraphOptGetKeepDims(op);
  size_t dynamic = 0;
  for (size_t i = 0; i < fzShapedTypeGetRank(rt); ++i)
    dynamic += fzShapedTypeGetDim(rt, i) == FZ_DYNAMIC;
  if (!keep && dynamic > 1) /* the reshape could not resolve them */
    return false;
  FzValue *v = fzGraphOptCreate(rw, "graph.global_avg_pool", fzOpGetLoc(op), 1,
                                &x, keep ? rt : NULL, 0, NULL);
  if (v && !keep)
    v = fzGraphOptCreate(rw, "graph.reshape", fzOpGetLoc(op), 1, &v, rt, 0,
                         NULL);
  return replace_checked(rw, op, v);
}

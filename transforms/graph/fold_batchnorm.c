/* transforms/graph/fold_batchnorm.c - the fold-batchnorm pass: folds an
 * inference batch_norm, or a per-channel multiply and add, that follows a
 * conv2d or a matmul with constant weights into those weights and the
 * bias, at compile time.
 *
 *   batchnorm-fold       batch_norm(y, scale, shift, mean, var) with
 *                        constant parameters, y = conv2d(x, W, b) or a
 *                        rank-2 matmul(x, W) (+ constant b: ONNX Gemm)
 *                        with constant weights and no other use
 *                        -> conv2d(x, W * s, b * s + t), or
 *                        matmul(x, W * s) + (b * s + t), with
 *                        s = scale / sqrt(var + eps), t = shift - mean * s
 *                        (computed in f64, rounded once)
 *   mul-into-conv        conv2d(x, W, b) * s -> conv2d(x, W * s, b * s)
 *   add-into-conv        conv2d(x, W, b) + t -> conv2d(x, W, b + t) (and -)
 *   mul-into-matmul      matmul(x, W) * s -> matmul(x, W * s), s along the
 *                        output features (W's columns, or rows with
 *                        transpose_b)
 *   mul-through-bias     (matmul(x, W) + b) * s -> matmul(x, W) * s + b * s
 *   combine-bias         (matmul(x, W) + b) + t -> matmul(x, W) + (b + t)
 * where s and t are constants that vary only along the channel dim
 * (dim 1 of the conv's NCHW result, dim 3 of an NHWC one, the last dim
 * of the matmul's) and the
 * conv/matmul (and bias add) have no other use, so nothing is computed
 * twice. The new weights are rounded to their dtype once: results change
 * in the last bits, which the lit tests bound with fuse-run.
 */
#include <math.h>

#include "ir/util.h"
#include "transforms/graph/graph_opt.h"

enum { STAT_BATCHNORM, STAT_MUL, STAT_ADD, NUM_STATS };

static FzValue *result(FzOp *op) {
  return fzOpGetResult(op, 0);
}

/* The channel count of a conv2d (W's dim 0) or matmul (W's output
 * features), with its weights constant and rank 2 for matmul; 0 when the
 * op's weights cannot be folded. *axis gets the channel dim of the op's
 * result. */
static int64_t foldable_channels(FzOp *op, size_t *axis) {
  if (!fzGraphOptIsOp(op, "graph.conv2d") &&
      !fzGraphOptIsOp(op, "graph.matmul"))
    return 0;
  FzValue *w = fzOpGetOperand(op, 1);
  FzType *wt = fzValueGetType(w);
  if (!fzGraphOptDense(w) || !fzGraphOptIsFloatTensor(w) ||
      !fzShapedTypeHasStaticShape(wt))
    return 0;
  if (fzGraphOptIsOp(op, "graph.conv2d")) {
    if (fzOpGetNumOperands(op) == 3 && !fzGraphOptDense(fzOpGetOperand(op, 2)))
      return 0;
    /* The result's channels: NCHW dim 1, NHWC dim 3 (batch_norm's
     * channels are dim 1, so it folds into NCHW convs only). */
    *axis = fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC ? 3 : 1;
    return fzShapedTypeGetDim(wt, 0);
  }
  if (!fzGraphOptIsOp(op, "graph.matmul") || fzShapedTypeGetRank(wt) != 2 ||
      fzGraphOptRank(result(op)) < 1)
    return 0;
  FzAttr *tb = fzOpGetInherentAttr(op, FZ_STR("transpose_b"));
  bool t = tb && fzAttrGetKind(tb) == FZ_ATTR_BOOL && fzBoolAttrGetValue(tb);
  *axis = fzGraphOptRank(result(op)) - 1;
  return fzShapedTypeGetDim(wt, t ? 0 : 1);
}

/* Reads constant c into out[0..channels) when it broadcasts against a
 * result of rank `rank` along `axis` only (every other dim is 1). */
static bool per_channel(FzValue *c, size_t rank, size_t axis, int64_t channels,
                        double *out) {
  FzAttr *a = fzGraphOptDense(c);
  FzType *t = a ? fzAttrGetType(a) : NULL;
  if (!a || !fzTypeIsFloat(fzShapedTypeGetElementType(t)))
    return false;
  size_t r = fzShapedTypeGetRank(t);
  if (r > rank)
    return false;
  int64_t along = 1;
  for (size_t i = 0; i < r; ++i) {
    int64_t d = fzShapedTypeGetDim(t, i);
    if (rank - r + i == axis)
      along = d;
    else if (d != 1)
      return false;
  }
  if (along != 1 && along != channels)
    return false;
  for (int64_t m = 0; m < channels; ++m)
    out[m] = fzDenseAttrGetFloat(a, along == 1 ? 0 : m);
  return true;
}

/* Re-creates op (conv2d or matmul) with new operands, keeping its
 * attributes and result type. */
static FzValue *recreate(FzRewriter *rw, FzOp *op, size_t n,
                         FzValue *const *operands, FzLoc *loc) {
  FzOpState st;
  fzOpStateInit(&st, fzOpGetContext(op), fzIdentGetString(fzOpGetName(op)),
                loc);
  fzOpStateAddOperands(&st, n, operands);
  FzType *rt = fzValueGetType(result(op));
  fzOpStateAddResults(&st, 1, &rt);
  FzAttr *props = fzOpGetPropDict(op), *attrs = fzOpGetAttrDict(op);
  for (size_t i = 0; i < fzDictAttrGetSize(props); ++i) {
    FzNamedAttr e = fzDictAttrGetEntry(props, i);
    fzOpStateAddProp(&st, fzIdentGetString(e.name), e.value);
  }
  for (size_t i = 0; i < fzDictAttrGetSize(attrs); ++i) {
    FzNamedAttr e = fzDictAttrGetEntry(attrs, i);
    fzOpStateAddAttr(&st, fzIdentGetString(e.name), e.value);
  }
  FzOp *created = fzRewriterCreateOp(rw, &st);
  return created ? result(created) : NULL;
}

/* The channel of weight element i. */
static int64_t weight_channel(FzOp *op, const FzTensor *w, int64_t i) {
  if (fzGraphOptIsOp(op, "graph.conv2d"))
    return i / (w->numElements / w->shape[0]);
  FzAttr *tb = fzOpGetInherentAttr(op, FZ_STR("transpose_b"));
  bool t = tb && fzAttrGetKind(tb) == FZ_ATTR_BOOL && fzBoolAttrGetValue(tb);
  return t ? i / w->shape[1] : i % w->shape[1];
}

/* The constant v (or zeros when v is NULL) as a [channels] tensor of
 * dtype, scaled by s and shifted by t per channel (either may be NULL). */
static FzValue *channel_constant(FzRewriter *rw, FzValue *v, FzType *dtype,
                                 int64_t channels, const double *s,
                                 const double *t, FzLoc *loc) {
  FzContext *ctx = fzRewriterGetContext(rw);
  FzTensor *out = fzTensorCreate(ctx, dtype, 1, &channels);
  FzTensor *in = v ? fzGraphOptTensor(v) : NULL;
  if (!out || (v && (!in || in->numElements != channels))) {
    fzTensorDestroy(out);
    fzTensorDestroy(in);
    return NULL;
  }
  for (int64_t m = 0; m < channels; ++m) {
    double e = in ? fzTensorGetF64(in, m) : 0.0;
    fzTensorSetF64(out, m, e * (s ? s[m] : 1.0) + (t ? t[m] : 0.0));
  }
  FzValue *c = fzGraphOptConstant(rw, out, loc);
  fzTensorDestroy(out);
  fzTensorDestroy(in);
  return c;
}

/* A [channels] array of doubles from the context (NULL on OOM). */
static double *channel_array(FzContext *ctx, int64_t channels) {
  if (channels <= 0 || channels > ((int64_t)1 << 24))
    return NULL;
  return fzMalloc(ctx, (size_t)channels * sizeof(double));
}

/* The weights of op scaled per channel by s, as a new constant. */
static FzValue *scaled_weights(FzRewriter *rw, FzOp *op, const double *s,
                               FzLoc *loc) {
  FzTensor *w = fzGraphOptTensor(fzOpGetOperand(op, 1));
  if (!w || w->rank < 2 || w->shape[0] == 0) {
    fzTensorDestroy(w);
    return NULL;
  }
  for (int64_t i = 0; i < w->numElements; ++i)
    fzTensorSetF64(w, i, fzTensorGetF64(w, i) * s[weight_channel(op, w, i)]);
  FzValue *v = fzGraphOptConstant(rw, w, loc);
  fzTensorDestroy(w);
  return v;
}

/*===--- batchnorm-to-affine --------------------------------------------===*/

static bool batchnorm_fold(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzContext *ctx = fzOpGetContext(op);
  FzValue *y = fzOpGetOperand(op, 0), *bias = NULL;
  FzOp *p = fzValueGetDefiningOp(y), *target = p;
  if (!p || !fzValueHasOneUse(y) || !fzGraphOptIsFloatTensor(y))
    return false;
  if (fzGraphOptIsOp(p, "graph.add")) { /* matmul + bias (ONNX Gemm) */
    target = fzGraphOptProducer(fzOpGetOperand(p, 0), "graph.matmul");
    bias = fzOpGetOperand(p, 1);
    if (!target || !fzValueHasOneUse(result(target)) ||
        fzValueGetType(result(target)) != fzValueGetType(y))
      return false;
  } else if (fzGraphOptIsOp(p, "graph.conv2d") && fzOpGetNumOperands(p) == 3) {
    bias = fzOpGetOperand(p, 2);
  }
  size_t axis = 0;
  int64_t c = foldable_channels(target, &axis);
  /* The channels are dim 1: a conv's, or a rank-2 matmul's features. */
  if (c <= 0 || axis != 1 || fzShapedTypeGetDim(fzValueGetType(y), 1) != c)
    return false;
  double eps = 1e-5;
  FzAttr *e = fzOpGetInherentAttr(op, FZ_STR("epsilon"));
  if (e && fzAttrGetKind(e) == FZ_ATTR_FLOAT)
    eps = fzFloatAttrGetValue(e);
  /* par: scale, shift, mean, var, then the old bias (zeros if none). */
  double *par[5] = {NULL, NULL, NULL, NULL, NULL};
  bool ok = true;
  for (size_t k = 0; k < 5; ++k)
    ok = (par[k] = channel_array(ctx, c)) != NULL && ok;
  for (size_t k = 0; ok && k < 4; ++k)
    ok = per_channel(fzOpGetOperand(op, 1 + k), 1, 0, c, par[k]);
  for (int64_t m = 0; ok && m < c; ++m)
    par[4][m] = 0;
  if (ok && bias) /* a conv's bias is [C]; a Gemm's broadcasts against y */
    ok = target == p ? per_channel(bias, 1, 0, c, par[4])
                     : per_channel(bias, fzGraphOptRank(y), 1, c, par[4]);
  FzValue *v = NULL;
  if (ok) {
    for (int64_t m = 0; m < c; ++m) { /* s, then b * s + t in par[1] */
      double s = par[0][m] / sqrt(par[3][m] + eps);
      par[1][m] += (par[4][m] - par[2][m]) * s;
      par[0][m] = s;
    }
    FzOp *both[2] = {p, op};
    FzLoc *loc = fzGraphOptFusedLoc(both, 2);
    FzType *dtype = fzGraphOptElementType(y);
    FzValue *ops[3] = {fzOpGetOperand(target, 0),
                       scaled_weights(rw, target, par[0], loc),
                       channel_constant(rw, NULL, dtype, c, NULL, par[1], loc)};
    if (ops[1] && ops[2] && fzGraphOptIsOp(target, "graph.conv2d")) {
      v = recreate(rw, target, 3, ops, loc);
    } else if (ops[1] && ops[2]) { /* matmul(x, W') + b' */
      FzValue *mm = recreate(rw, target, 2, ops, loc);
      FzValue *ao[2] = {mm, ops[2]};
      v = mm ? fzGraphOptCreate(rw, "graph.add", loc, 2, ao, fzValueGetType(y),
                                0, NULL)
             : NULL;
    }
  }
  for (size_t k = 0; k < 5; ++k)
    fzFree(ctx, par[k]);
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

/*===--- Folding into conv2d and matmul ---------------------------------===*/

/* The conv2d/matmul operand of binary op (operand 0 only unless
 * commutative) whose weights fold, with no other use; the other operand
 * into *other and the channel data into *axis / *c. */
static FzOp *folding_target(FzOp *op, bool commutative, FzValue **other,
                            size_t *axis, int64_t *c) {
  for (size_t i = 0; i < (commutative ? 2u : 1u); ++i) {
    FzValue *y = fzOpGetOperand(op, i);
    FzOp *p = fzValueGetDefiningOp(y);
    if (!p || !fzValueHasOneUse(y) ||
        fzValueGetType(y) != fzValueGetType(result(op)) ||
        (*c = foldable_channels(p, axis)) <= 0)
      continue;
    *other = fzOpGetOperand(op, 1 - i);
    return p;
  }
  return NULL;
}

static bool mul_into_weights(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzValue *sv;
  size_t axis;
  int64_t c;
  FzOp *p = folding_target(op, true, &sv, &axis, &c);
  if (!p)
    return false;
  FzContext *ctx = fzOpGetContext(op);
  double *s = channel_array(ctx, c);
  FzValue *v = NULL;
  if (s && per_channel(sv, fzGraphOptRank(result(p)), axis, c, s)) {
    FzOp *both[2] = {p, op};
    FzLoc *loc = fzGraphOptFusedLoc(both, 2);
    FzValue *ops[3] = {fzOpGetOperand(p, 0), scaled_weights(rw, p, s, loc),
                       NULL};
    size_t n = fzOpGetNumOperands(p);
    if (n == 3)
      ops[2] = channel_constant(rw, fzOpGetOperand(p, 2),
                                fzGraphOptElementType(ops[1]), c, s, NULL, loc);
    if (ops[1] && (n == 2 || ops[2]))
      v = recreate(rw, p, n, ops, loc);
  }
  fzFree(ctx, s);
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

static bool add_into_conv(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  bool add = fzGraphOptIsOp(op, "graph.add");
  FzValue *tv;
  size_t axis;
  int64_t c;
  FzOp *p = folding_target(op, add, &tv, &axis, &c);
  if (!p || !fzGraphOptIsOp(p, "graph.conv2d"))
    return false;
  FzContext *ctx = fzOpGetContext(op);
  double *t = channel_array(ctx, c);
  FzValue *v = NULL;
  if (t && per_channel(tv, fzGraphOptRank(result(p)), axis, c, t)) {
    for (int64_t m = 0; !add && m < c; ++m)
      t[m] = -t[m];
    FzOp *both[2] = {p, op};
    FzLoc *loc = fzGraphOptFusedLoc(both, 2);
    FzValue *ops[3] = {fzOpGetOperand(p, 0), fzOpGetOperand(p, 1), NULL};
    FzValue *b = fzOpGetNumOperands(p) == 3 ? fzOpGetOperand(p, 2) : NULL;
    ops[2] =
        channel_constant(rw, b, fzGraphOptElementType(ops[1]), c, NULL, t, loc);
    if (ops[2])
      v = recreate(rw, p, 3, ops, loc);
  }
  fzFree(ctx, t);
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

/* (matmul + b) * s -> matmul * s + b * s, and (matmul + b) + t ->
 * matmul + (b + t): moves a per-channel constant next to the matmul. */
static bool through_bias(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  bool mul = fzGraphOptIsOp(op, "graph.mul");
  for (size_t i = 0; i < 2; ++i) {
    FzValue *inner = fzOpGetOperand(op, i), *k = fzOpGetOperand(op, 1 - i);
    FzOp *bias = fzGraphOptProducer(inner, "graph.add");
    FzValue *y = bias ? fzOpGetOperand(bias, 0) : NULL;
    FzOp *mm = fzGraphOptProducer(y, "graph.matmul");
    FzType *rt = fzValueGetType(result(op));
    size_t axis;
    int64_t c;
    if (!mm || !fzValueHasOneUse(inner) || !fzValueHasOneUse(y) ||
        fzValueGetType(y) != rt || fzValueGetType(inner) != rt ||
        foldable_channels(mm, &axis) <= 0)
      continue;
    c = foldable_channels(mm, &axis);
    FzValue *b = fzOpGetOperand(bias, 1);
    FzType *bt[2] = {fzValueGetType(b), fzValueGetType(k)};
    double *probe = channel_array(fzOpGetContext(op), c);
    bool ok = probe && per_channel(k, fzGraphOptRank(y), axis, c, probe) &&
              per_channel(b, fzGraphOptRank(y), axis, c, probe);
    fzFree(fzOpGetContext(op), probe);
    FzType *ct =
        ok ? fzGraphOptInferType(fzOpGetContext(op),
                                 mul ? "graph.mul" : "graph.add", 2, bt)
           : NULL;
    if (!ct)
      continue;
    FzOp *all[3] = {mm, bias, op};
    FzLoc *loc = fzGraphOptFusedLoc(all, 3);
    FzValue *nb =
        fzGraphOptFoldBinary(rw, mul ? "graph.mul" : "graph.add", b, k, loc);
    if (!nb)
      return false;
    FzValue *base = y;
    if (mul) {
      FzValue *mo[2] = {y, k};
      base = fzGraphOptCreate(rw, "graph.mul", loc, 2, mo, rt, 0, NULL);
    }
    FzValue *ao[2] = {base, nb};
    FzValue *v =
        base ? fzGraphOptCreate(rw, "graph.add", loc, 2, ao, rt, 0, NULL)
             : NULL;
    if (!v)
      return false;
    fzRewriterReplaceOp(rw, op, &v);
    return true;
  }
  return false;
}

static const FzGraphOptRow kRows[] = {
    {"graph.batch_norm", batchnorm_fold, "batchnorm-fold", 2, 0,
     STAT_BATCHNORM},
    {"graph.mul", mul_into_weights, "mul-into-weights", 2, 1, STAT_MUL},
    {"graph.add", add_into_conv, "add-into-conv", 2, 1, STAT_ADD},
    {"graph.sub", add_into_conv, "add-into-conv", 2, 1, STAT_ADD},
    {"graph.mul", through_bias, "mul-through-bias", 1, 1, STAT_MUL},
    {"graph.add", through_bias, "combine-bias", 1, 1, STAT_ADD},
};

static const char *const kGroups[] = {"batch-norm", "affine"};

static const FzGraphOptTable kTable = {kRows, sizeof kRows / sizeof kRows[0],
                                       kGroups, 2, NULL, 0};

static const FzPassOptionDef kOptions[] = {
    {"batch-norm", FZ_PASS_OPTION_BOOL, "true",
     "Fold inference batch_norm after conv2d/matmul", NULL, 0, 0},
    {"affine", FZ_PASS_OPTION_BOOL, "true",
     "Fold per-channel constant multiplies and adds after conv2d/matmul", NULL,
     0, 0},
};

static const FzPassStatisticDef kStats[NUM_STATS] = {
    {"num-batch-norms", "batch_norm ops folded"},
    {"num-scales", "Per-channel multiplies folded into weights"},
    {"num-shifts", "Per-channel adds folded into biases"},
};

const FzPassDef fzFoldBatchNormPass = {
    .argument = "fold-batchnorm",
    .displayName = "FoldBatchNorm",
    .summary = "Fold inference batch_norm and per-channel scale/shift into "
               "the weights and bias of a preceding conv2d or matmul",
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

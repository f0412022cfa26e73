/* transforms/graph/fold_qdq.c - the fold-qdq pass: the QDQ pattern of
 * quantized models folded into integer code (docs/quantization.md).
 *
 * Integer contractions (option `contractions`; `matmuls` for matmuls
 * only, which the CPU pipeline sets: the CPU's integer matmul has a
 * kernel, tile-int8-contractions, while the integer conv2d lowers to the
 * untiled loop nest, far slower than the tiled f32 one). matmul / conv2d
 * whose operands are both graph.dequantize of i8 tensors:
 *
 *   c = conv2d(dequantize(x, sx, zx), dequantize(w, sw, zw)) [+ bias]
 *   ->
 *   c = conv2d(sub_zero_point(x, zx), sub_zero_point(w, zw))   (i32)
 *       cast to f32, times sx * sw [+ bias]
 *
 * so the products and the accumulation are exact i32 arithmetic and one
 * f32 multiply rescales; the epilogue after it (bias, relu, clamp, the
 * graph.quantize of the next layer) is untouched, and the fusion pass
 * makes the contraction, the rescale and that epilogue one group (a
 * requantizing epilogue). The fold is exact, bit for bit, when the f32
 * graph computes the same value: every scale a power of two (so each
 * dequantized value and product is exact in f32) and the largest
 * possible |sum| below 2^24 (so no partial sum rounds): max |x - zx|
 * times the largest L1 norm of one output's weights (constant weights),
 * else times K * max |w - zw|. Otherwise it is
 * left, with a remark saying why, unless the option `inexact` is given:
 * then it folds whenever the i32 accumulator cannot overflow, which is
 * ONNX Runtime's choice (the integer result is then the exactly rounded
 * one, and may differ from the f32 graph in the last place of the
 * pre-quantization value, so by one quantization step after it).
 *
 * Requantization pairs. quantize(dequantize(q, s, z), s, z) is q, and so
 * is the pair around a reshape or transpose (the op then moves q): with
 * n = q - z (|n| <= 255), rint(fl(fl(n * s) / s)) = n for every normal
 * positive s whose 255 * s does not overflow, since the two roundings
 * move n by at most 255 * 2^-23 < 1/2. The scales and zero points must
 * be the same scalar constants (per-tensor). dequantize(quantize(x)) is
 * never folded: it rounds x to the grid, which is the model's meaning.
 *
 * Dequantized constants. Late (after the contractions took their
 * weights), a dequantize of constants becomes its f32 constant.
 *
 * Remarks (option `remarks`): at each contraction with a dequantized
 * operand, folded (exact or inexact) or why not; at each folded pair.
 */
#include <math.h>
#include <string.h>

#include "ir/util.h"
#include "transforms/graph/graph_opt.h"

enum { STAT_CONTRACTIONS, STAT_PAIRS, STAT_CONSTANTS, NUM_STATS };

/* Constants folded by the late row, at most (as fold-constants). */
#define MAX_FOLDED_ELEMENTS ((int64_t)1 << 24)

/*===--- Helpers --------------------------------------------------------===*/

static FzContext *ctx_of(FzOp *op) {
  return fzOpGetContext(op);
}

static bool is_unsigned(FzOp *op) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("unsigned"));
  return a && (fzAttrGetKind(a) == FZ_ATTR_UNIT ||
               (fzAttrGetKind(a) == FZ_ATTR_BOOL && fzBoolAttrGetValue(a)));
}

static int64_t num_elements(const FzValue *v) {
  FzType *t = fzValueGetType(v);
  if (!fzShapedTypeHasStaticShape(t))
    return -1;
  return fzShapedTypeGetNumElements(t);
}

/* The elements of a constant as doubles (count in *n), or NULL. The
 * caller frees with fzFree. */
static double *const_values(FzContext *ctx, const FzValue *v, int64_t *n) {
  *n = 0;
  FzTensor *t = fzGraphOptTensor(v);
  if (!t)
    return NULL;
  double *out = fzMalloc(ctx, (size_t)(t->numElements ? t->numElements : 1) *
                                  sizeof *out);
  if (out)
    for (int64_t i = 0; i < t->numElements; ++i)
      out[i] = fzTensorGetF64(t, i);
  *n = t->numElements;
  fzTensorDestroy(t);
  return out;
}

/* Whether every element of constant v is a power of two in a range whose
 * products stay normal (2^-60 .. 2^60). */
static bool powers_of_two(FzContext *ctx, const FzValue *v) {
  int64_t n;
  double *vals = const_values(ctx, v, &n);
  bool ok = vals != NULL;
  for (int64_t i = 0; ok && i < n; ++i) {
    int e;
    double m = frexp(vals[i], &e);
    ok = vals[i] > 0 && m == 0.5 && e > -60 && e < 60;
  }
  fzFree(ctx, vals);
  return ok;
}

/* The largest |q - z| over the values q an 8-bit dequantize operand may
 * take: over its elements when it is a constant, over the type's range
 * otherwise; z a constant, or any 8-bit value. */
static double max_offset(FzContext *ctx, FzOp *dq) {
  bool u = is_unsigned(dq);
  double lo = u ? 0 : -128, hi = u ? 255 : 127, best = 0;
  int64_t nz = 0, nq = 0;
  double *z = const_values(ctx, fzOpGetOperand(dq, 2), &nz);
  double *q = const_values(ctx, fzOpGetOperand(dq, 0), &nq);
  if (!z || nz == 0) {
    best = 255;
  } else {
    for (int64_t k = 0; k < nz; ++k) {
      double zk = u ? (double)((int64_t)z[k] & 0xff) : z[k];
      if (q) {
        for (int64_t i = 0; i < nq; ++i) {
          double qi = u ? (double)((int64_t)q[i] & 0xff) : q[i];
          best = fmax(best, fabs(qi - zk));
        }
      } else {
        best = fmax(best, fmax(fabs(hi - zk), fabs(lo - zk)));
      }
    }
  }
  fzFree(ctx, z);
  fzFree(ctx, q);
  return best;
}

/* For a constant weight w of dequantize dw (zero point a constant
 * scalar or per output): the largest sum over one output's reduction of
 * |w - zw|, the weight's part of the bound on |sum|; -1 when w or zw is
 * not constant or the layout is not known. Outputs are w's dim 0 for
 * conv2d ([M, C, kh, kw]) and B's last dim for matmul ([K, N], not
 * transposed, rank 2). */
static double weight_l1(FzContext *ctx, FzOp *dw, bool conv, bool tb) {
  FzTensor *w = fzGraphOptTensor(fzOpGetOperand(dw, 0));
  FzTensor *z = fzGraphOptTensor(fzOpGetOperand(dw, 2));
  double best = -1;
  bool u = is_unsigned(dw);
  if (w && z && !tb && (conv ? w->rank == 4 : w->rank == 2)) {
    int64_t outs = conv ? w->shape[0] : w->shape[1];
    int64_t per = outs ? w->numElements / outs : 0;
    bool perOut = z->numElements == outs && outs > 1;
    if (z->numElements == 1 || perOut) {
      best = 0;
      for (int64_t o = 0; o < outs; ++o) {
        int64_t zo = fzTensorGetI64(z, perOut ? o : 0);
        double sum = 0;
        if (u)
          zo &= 0xff;
        for (int64_t k = 0; k < per; ++k) {
          int64_t i = conv ? o * per + k : k * outs + o;
          int64_t wi = fzTensorGetI64(w, i);
          if (u)
            wi &= 0xff;
          sum += fabs((double)(wi - zo));
        }
        best = fmax(best, sum);
      }
    }
  }
  fzTensorDestroy(w);
  fzTensorDestroy(z);
  (void)ctx;
  return best;
}

static void remark(const void *ud, FzOp *op, const char *fmt,
                   const char *why) {
  if (fzGraphOptGetOptions(ud)->remarks && fzGraphOptFirstRemark(ud, op))
    fzEmitRemark(ctx_of(op), fzOpGetLoc(op), fmt, why);
}

/*===--- Integer contractions -------------------------------------------===*/

/* The shape of the output multiplier for weight scale sw, or -1 when sw
 * is not per-tensor or per-output-channel: rank 0 (per-tensor), [M, 1,
 * 1] for conv2d (sw [M, 1, 1, 1]), sw's own shape for matmul (sw [N] or
 * [1, N] against B [K, N]). */
static int mult_rank(const FzValue *sw, bool conv, int64_t *shape) {
  FzType *t = fzValueGetType(sw);
  size_t r = fzShapedTypeGetRank(t);
  if (num_elements(sw) == 1)
    return 0;
  if (conv) {
    if (r != 4)
      return -1;
    for (size_t i = 1; i < 4; ++i)
      if (fzShapedTypeGetDim(t, i) != 1)
        return -1;
    shape[0] = fzShapedTypeGetDim(t, 0);
    shape[1] = shape[2] = 1;
    return 3;
  }
  if (r == 1 || (r == 2 && fzShapedTypeGetDim(t, 0) == 1)) {
    for (size_t i = 0; i < r; ++i)
      shape[i] = fzShapedTypeGetDim(t, i);
    return (int)r;
  }
  return -1;
}

/* Copies the inherent attributes of op (those present) into props. */
static size_t copy_props(FzOp *op, FzGraphOptProp *props, size_t cap) {
  const FzOpDef *def = fzOpGetDef(op);
  size_t n = 0;
  for (size_t i = 0; def && def->inherentAttrs && def->inherentAttrs[i] &&
                     n < cap; ++i) {
    FzAttr *a = fzOpGetInherentAttr(
        op, fzStringRefFromCString(def->inherentAttrs[i]));
    if (a)
      props[n++] = (FzGraphOptProp){def->inherentAttrs[i], a};
  }
  return n;
}

static bool fold_contraction(FzOp *op, FzRewriter *rw, void *ud) {
  const FzGraphOptOptions *o = fzGraphOptGetOptions(ud);
  FzContext *ctx = ctx_of(op);
  bool conv = fzGraphOptIsOp(op, "graph.conv2d");
  FzOp *dx = fzGraphOptProducer(fzOpGetOperand(op, 0), "graph.dequantize");
  FzOp *dw = fzGraphOptProducer(fzOpGetOperand(op, 1), "graph.dequantize");
  if (!dx && !dw)
    return false; /* not a quantized contraction: nothing to say */
  const char *fail = "not folded into an integer contraction: %s";
  FzType *i8 = fzIntegerTypeGet(ctx, 8), *f32 = fzF32TypeGet(ctx);
  FzValue *res = fzOpGetResult(op, 0);
  if (!dx || !dw) {
    remark(ud, op, fail, "only one operand is dequantized");
    return false;
  }
  if (fzGraphOptElementType(fzOpGetOperand(dx, 0)) != i8 ||
      fzGraphOptElementType(fzOpGetOperand(dw, 0)) != i8 ||
      fzGraphOptElementType(res) != f32) {
    remark(ud, op, fail, "an operand is not an 8-bit tensor");
    return false;
  }
  FzAttr *layout = fzOpGetInherentAttr(op, FZ_STR("layout"));
  if (conv && layout && fzAttrGetKind(layout) == FZ_ATTR_STRING &&
      !fzStringRefEqual(fzStringAttrGetValue(layout), FZ_STR("nchw"))) {
    remark(ud, op, fail, "only NCHW convolutions are folded");
    return false;
  }
  FzValue *sx = fzOpGetOperand(dx, 1), *sw = fzOpGetOperand(dw, 1);
  int64_t mshape[4];
  int mr = mult_rank(sw, conv, mshape);
  if (num_elements(sx) != 1 || mr < 0) {
    remark(ud, op, fail,
           "the input's scale is not per-tensor, or the weight's is not "
           "per-tensor or per output channel");
    return false;
  }
  /* K: the reduced extent. */
  FzType *wt = fzValueGetType(fzOpGetOperand(op, 1));
  FzType *xt = fzValueGetType(fzOpGetOperand(op, 0));
  int64_t K = 1;
  if (conv) {
    for (size_t i = 1; i < 4; ++i)
      K *= fzShapedTypeGetDim(wt, i);
  } else {
    size_t ra = fzShapedTypeGetRank(xt);
    FzAttr *ta = fzOpGetInherentAttr(op, FZ_STR("transpose_a"));
    bool tA = ta && fzAttrGetKind(ta) == FZ_ATTR_BOOL &&
              fzBoolAttrGetValue(ta) && ra >= 2;
    K = ra ? fzShapedTypeGetDim(xt, tA ? ra - 2 : ra - 1) : -1;
  }
  if (K < 0 || !fzShapedTypeHasStaticShape(fzValueGetType(res))) {
    remark(ud, op, fail, "a dynamic shape");
    return false;
  }
  /* |sum| <= max|x - zx| * (the largest L1 norm of one output's
   * weights, or K * max|w - zw|). */
  FzAttr *tba = fzOpGetInherentAttr(op, FZ_STR("transpose_b"));
  bool tB = tba && fzAttrGetKind(tba) == FZ_ATTR_BOOL &&
            fzBoolAttrGetValue(tba);
  double l1 = weight_l1(ctx, dw, conv, tB);
  double bound = max_offset(ctx, dx) *
                 (l1 >= 0 ? l1 : (double)K * max_offset(ctx, dw));
  if (bound >= 2147483648.0) {
    remark(ud, op, fail, "the i32 accumulator could overflow");
    return false;
  }
  bool exact = powers_of_two(ctx, sx) && powers_of_two(ctx, sw) &&
               bound < 16777216.0;
  if (!exact && !o->inexact) {
    remark(ud, op, fail,
           "not exact (the scales are not constant powers of two, or a sum "
           "could reach 2^24, so the f32 graph rounds where i32 does not; "
           "fold-qdq{contractions inexact} folds it as ONNX Runtime does)");
    return false;
  }
  /* The multiplier sx * sw, a constant or computed. */
  FzLoc *loc = fzOpGetLoc(op);
  FzValue *m = fzGraphOptFoldBinary(rw, "graph.mul", sx, sw, loc);
  if (!m) {
    FzValue *mo[2] = {sx, sw};
    m = fzGraphOptCreate(rw, "graph.mul", loc, 2, mo, NULL, 0, NULL);
  }
  if (m && mr >= 0 && num_elements(m) != 1) {
    FzType *rt = fzTensorTypeGet(ctx, (size_t)mr, mshape, f32, loc);
    FzValue *mo[1] = {m};
    m = rt ? fzGraphOptCreate(rw, "graph.reshape", loc, 1, mo, rt, 0, NULL)
           : NULL;
  } else if (m && num_elements(m) == 1 && fzGraphOptRank(m) != 0) {
    FzType *rt = fzTensorTypeGet(ctx, 0, NULL, f32, loc);
    FzValue *mo[1] = {m};
    m = rt ? fzGraphOptCreate(rw, "graph.reshape", loc, 1, mo, rt, 0, NULL)
           : NULL;
  }
  FzGraphOptProp up = {"unsigned", fzUnitAttrGet(ctx)};
  FzValue *xo[2] = {fzOpGetOperand(dx, 0), fzOpGetOperand(dx, 2)};
  FzValue *wo[2] = {fzOpGetOperand(dw, 0), fzOpGetOperand(dw, 2)};
  FzValue *xa = fzGraphOptCreate(rw, "graph.sub_zero_point", fzOpGetLoc(dx),
                                 2, xo, NULL, is_unsigned(dx), &up);
  FzValue *wa = fzGraphOptCreate(rw, "graph.sub_zero_point", fzOpGetLoc(dw),
                                 2, wo, NULL, is_unsigned(dw), &up);
  FzType *rt = fzValueGetType(res);
  FzType *it = fzTensorTypeGet(ctx, fzShapedTypeGetRank(rt),
                               fzShapedTypeGetShape(rt),
                               fzIntegerTypeGet(ctx, 32), loc);
  FzGraphOptProp props[8];
  size_t np = copy_props(op, props, 8);
  FzValue *co[2] = {xa, wa};
  FzValue *acc = m && xa && wa && it
                     ? fzGraphOptCreate(rw, conv ? "graph.conv2d"
                                                 : "graph.matmul",
                                        loc, 2, co, it, np, props)
                     : NULL;
  FzValue *cf = acc ? fzGraphOptCreate(rw, "graph.cast", loc, 1, &acc, rt, 0,
                                       NULL)
                    : NULL;
  FzValue *mo[2] = {cf, m};
  FzValue *y = cf ? fzGraphOptCreate(rw, "graph.mul", loc, 2, mo, rt, 0, NULL)
                  : NULL;
  if (y && conv && fzOpGetNumOperands(op) > 2) {
    /* The conv's bias [M], added after the rescale, as [M, 1, 1]. */
    int64_t bs[3] = {fzShapedTypeGetDim(rt, 1), 1, 1};
    FzType *bt = fzTensorTypeGet(ctx, 3, bs, f32, loc);
    FzValue *bo[1] = {fzOpGetOperand(op, 2)};
    FzValue *b = bt ? fzGraphOptCreate(rw, "graph.reshape", loc, 1, bo, bt, 0,
                                       NULL)
                    : NULL;
    FzValue *ao[2] = {y, b};
    y = b ? fzGraphOptCreate(rw, "graph.add", loc, 2, ao, rt, 0, NULL) : NULL;
  }
  if (!y)
    return false;
  if (o->remarks)
    fzEmitRemark(ctx, loc, "folded into an integer %s: i32 products and "
                           "accumulation, one f32 rescale (%s)",
                 conv ? "conv2d" : "matmul",
                 exact ? "exact: power-of-two scales, sums below 2^24"
                       : "inexact: may differ from the f32 graph by one "
                         "rounding");
  fzRewriterReplaceOp(rw, op, &y);
  return true;
}

/*===--- Requantization pairs -------------------------------------------===*/

/* Whether a and b are the same scalar constant (or the same value). */
static bool same_scalar(FzContext *ctx, const FzValue *a, const FzValue *b) {
  if (a == b)
    return num_elements(a) == 1;
  int64_t na, nb;
  double *va = const_values(ctx, a, &na), *vb = const_values(ctx, b, &nb);
  bool ok = va && vb && na == 1 && nb == 1 && va[0] == vb[0] &&
            fzGraphOptElementType(a) == fzGraphOptElementType(b);
  fzFree(ctx, va);
  fzFree(ctx, vb);
  return ok;
}

static bool fold_pair(FzOp *q, FzRewriter *rw, void *ud) {
  const FzGraphOptOptions *o = fzGraphOptGetOptions(ud);
  FzContext *ctx = ctx_of(q);
  FzValue *v = fzOpGetOperand(q, 0);
  FzOp *mover = fzGraphOptProducer(v, "graph.reshape");
  if (!mover)
    mover = fzGraphOptProducer(v, "graph.transpose");
  FzOp *dq = fzGraphOptProducer(mover ? fzOpGetOperand(mover, 0) : v,
                                "graph.dequantize");
  if (!dq || is_unsigned(dq) != is_unsigned(q) ||
      fzGraphOptElementType(fzOpGetOperand(dq, 0)) !=
          fzIntegerTypeGet(ctx, 8) ||
      fzGraphOptElementType(v) != fzF32TypeGet(ctx))
    return false;
  FzValue *s = fzOpGetOperand(dq, 1);
  const char *fail = "quantize(dequantize(q)) not folded: %s";
  if (!same_scalar(ctx, s, fzOpGetOperand(q, 1)) ||
      !same_scalar(ctx, fzOpGetOperand(dq, 2), fzOpGetOperand(q, 2))) {
    remark(ud, q, fail, "another scale or zero point, or not per-tensor "
                        "constants (it requantizes to another grid)");
    return false;
  }
  int64_t n;
  double *sv = const_values(ctx, s, &n);
  bool normal = sv && n == 1 && sv[0] >= 0x1p-126 && sv[0] <= 1e36;
  fzFree(ctx, sv);
  if (!normal) {
    remark(ud, q, fail, "the scale is subnormal or too large for the "
                        "round trip to be exact");
    return false;
  }
  FzValue *r = fzOpGetOperand(dq, 0);
  if (mover) {
    FzType *mt = fzValueGetType(fzOpGetResult(mover, 0));
    FzType *rt = fzTensorTypeGet(ctx, fzShapedTypeGetRank(mt),
                                 fzShapedTypeGetShape(mt),
                                 fzIntegerTypeGet(ctx, 8), fzOpGetLoc(mover));
    FzGraphOptProp props[4];
    size_t np = copy_props(mover, props, 4);
    const char *name = fzGraphOptIsOp(mover, "graph.reshape")
                           ? "graph.reshape"
                           : "graph.transpose";
    r = rt ? fzGraphOptCreate(rw, name, fzOpGetLoc(mover), 1, &r, rt, np,
                              props)
           : NULL;
    if (!r)
      return false;
  }
  if (o->remarks)
    fzEmitRemark(ctx, fzOpGetLoc(q), "folded quantize(%sdequantize(q)) to "
                                     "%sq: the same scale and zero point "
                                     "give q back exactly",
                 mover ? "reshape/transpose of " : "",
                 mover ? "the same op on " : "");
  fzRewriterReplaceOp(rw, q, &r);
  return true;
}

/* dequantize(quantize(x)) is the model's rounding of x to the grid: kept,
 * with a remark (option `remarks`). */
static bool keep_rounding(FzOp *dq, FzRewriter *rw, void *ud) {
  (void)rw;
  if (fzGraphOptProducer(fzOpGetOperand(dq, 0), "graph.quantize"))
    remark(ud, dq, "dequantize(quantize(x)) kept: %s",
           "it rounds x to the quantization grid, which is the model's "
           "meaning, not a no-op");
  return false;
}

/*===--- Dequantized constants --------------------------------------===*/

/* dequantize of constants (a weight no contraction took) becomes its f32
 * constant, evaluated by the interpreter: the same values, computed once
 * instead of at every run. */
static bool fold_constant(FzOp *dq, FzRewriter *rw, void *ud) {
  (void)ud;
  FzValue *res = fzOpGetResult(dq, 0);
  int64_t n = num_elements(res);
  if (n < 0 || n > MAX_FOLDED_ELEMENTS)
    return false;
  FzTensor *in[3] = {NULL, NULL, NULL}, *out[1] = {NULL};
  bool ok = true;
  for (size_t i = 0; i < 3; ++i)
    ok = ok && (in[i] = fzGraphOptTensor(fzOpGetOperand(dq, i))) != NULL;
  if (ok) {
    FzInterpOptions opts;
    memset(&opts, 0, sizeof opts);
    opts.quiet = true;
    ok = fzInterpretOp(dq, in, &opts, out);
  }
  for (size_t i = 0; i < 3; ++i)
    fzTensorDestroy(in[i]);
  FzValue *c = ok ? fzGraphOptConstant(rw, out[0], fzOpGetLoc(dq)) : NULL;
  fzTensorDestroy(out[0]);
  if (!c)
    return false;
  fzRewriterReplaceOp(rw, dq, &c);
  return true;
}

/*===--- The pass -------------------------------------------------------===*/

static const FzGraphOptRow kRows[] = {
    {"graph.matmul", fold_contraction, "integer-matmul", 1, 0,
     STAT_CONTRACTIONS},
    /* The same under `matmuls` (the CPU pipeline's default: matmuls have
     * the dot4 kernel of tile-int8-contractions, convolutions not yet).
     * With both options the first row folds and this one finds nothing. */
    {"graph.matmul", fold_contraction, "integer-matmul-only", 1, 1,
     STAT_CONTRACTIONS},
    {"graph.conv2d", fold_contraction, "integer-conv2d", 1, 0,
     STAT_CONTRACTIONS},
    {"graph.quantize", fold_pair, "requantize-pair", 1, -1, STAT_PAIRS},
    {"graph.dequantize", keep_rounding, "keep-rounding", 1, -1, STAT_PAIRS},
};

/* After the contractions took their weights. */
static const FzGraphOptRow kLateRows[] = {
    {"graph.dequantize", fold_constant, "dequantize-constant", 1, -1,
     STAT_CONSTANTS},
};

static const char *const kGroups[] = {"contractions", "matmuls"};

static const FzGraphOptTable kTable = {
    kRows, sizeof kRows / sizeof kRows[0], kGroups, 2, kLateRows,
    sizeof kLateRows / sizeof kLateRows[0]};

static const FzPassOptionDef kOptions[] = {
    {"contractions", FZ_PASS_OPTION_BOOL, "false",
     "Fold dequantize -> matmul/conv2d into i32 contractions (off by "
     "default: the integer conv2d lowers to the untiled nest, "
     "docs/quantization.md)",
     NULL, 0, 0},
    {"matmuls", FZ_PASS_OPTION_BOOL, "false",
     "Fold dequantize -> matmul only (the CPU pipeline sets it: "
     "tile-int8-contractions gives them a vpdpbusd kernel)",
     NULL, 0, 0},
    {"inexact", FZ_PASS_OPTION_BOOL, "false",
     "Fold contractions whose integer result may differ from the f32 graph "
     "by one rounding (ONNX Runtime's choice)", NULL, 0, 0},
    {"remarks", FZ_PASS_OPTION_BOOL, "false",
     "A remark at each quantized contraction and folded pair: what was "
     "folded, or why not", NULL, 0, 0},
};

static const FzPassStatisticDef kStats[NUM_STATS] = {
    {"num-contractions", "matmul/conv2d folded into integer contractions"},
    {"num-pairs", "quantize(dequantize) pairs folded"},
    {"num-constants", "dequantize of constants folded to f32 constants"},
};

const FzPassDef fzFoldQdqPass = {
    .argument = "fold-qdq",
    .displayName = "FoldQDQ",
    .summary = "Fold dequantize -> matmul/conv2d into integer contractions "
               "with an f32 rescale, and quantize(dequantize) pairs, where "
               "exact",
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

/* transforms/graph/convert_layout_ops.c - convert-layout's rule for each
 * op (convert_layout.h draws the model): whether an op of the NCHW graph
 * runs in NHWC, and its NHWC version.
 *
 *   conv2d            NHWC when its input has at least min-channels
 *                     channels (the anchors: the only ops that start NHWC
 *                     regions); fewer (a stem conv on RGB) stays NCHW
 *   max/avg_pool,     NHWC when their input is already NHWC (free); they
 *   global pools      follow the convs, never start a region
 *   elementwise and   NHWC when at least one rank-4 operand is free and
 *   broadcast ops     no more operands need a transpose than are free;
 *                     constants (a [C, 1, 1] bias, per-channel scales)
 *                     are permuted at compile time
 *   batch_norm        on a free input: x * s + t with the per-channel
 *                     s = scale / sqrt(var + eps), t = bias - mean * s
 *                     ([C] vectors along NHWC's last dim; constants
 *                     folded)
 *   concat            as elementwise ops, the axis remapped
 *   slice, pad        on a free input, per-dim attributes permuted
 *   reduce_*          on a free input, axes remapped; without keepdims
 *                     only when the kept dims keep their order (the
 *                     result is then the NCHW result itself)
 *   softmax,          on a free input, the axis remapped
 *   log_softmax
 *   transpose         of a converted value: absorbed into a form (no op)
 *
 * Every other op (matmul, layer_norm, reshape, calls, ...) reads NCHW:
 * the driver gives it a transpose of the form (a reshape when only unit
 * dims move, as for the [N, C, 1, 1] -> [N, C] flatten before a
 * classifier).
 */
#include <math.h>
#include <string.h>

#include "transforms/graph/convert_layout.h"

static FzValue *result(FzOp *op) {
  return fzOpGetResult(op, 0);
}

static bool rank_is(const FzValue *v, size_t r) {
  FzType *t = fzValueGetType(v);
  return fzTypeGetKind(t) == FZ_TYPE_TENSOR && fzShapedTypeGetRank(t) == r;
}

static FzType *nhwc_type(ClLayout *L, FzOp *op) {
  return clPermuteType(L->ctx, fzValueGetType(result(op)), kClToNhwc);
}

/* The NHWC position of NCHW axis a of a rank-4 value (-1 when out of
 * range). */
static int64_t nhwc_axis(int64_t a) {
  if (a < 0)
    a += 4;
  return a < 0 || a > 3 ? -1 : kClToNchw[a];
}

static FzAttr *string_attr(ClLayout *L, const char *s) {
  FzAttr *a = fzStringAttrGet(L->ctx, fzStringRefFromCString(s));
  if (!a)
    L->failed = true;
  return a;
}

static FzAttr *i64_attr(ClLayout *L, int64_t v) {
  FzAttr *a = fzIntegerAttrGet(L->ctx, fzIntegerTypeGet(L->ctx, 64), v);
  if (!a)
    L->failed = true;
  return a;
}

/* The rank-4 i64 array attribute `name` of op into v (n entries). */
static bool read_ints(FzOp *op, const char *name, size_t n, int64_t *v) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_DENSE_ARRAY ||
      fzDenseArrayAttrGetSize(a) != n)
    return false;
  for (size_t i = 0; i < n; ++i)
    v[i] = fzDenseArrayAttrGetInt(a, i);
  return true;
}

static bool read_int(FzOp *op, const char *name, int64_t dflt, int64_t *v) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(name));
  *v = dflt;
  if (!a)
    return true;
  if (fzAttrGetKind(a) != FZ_ATTR_INTEGER)
    return false;
  *v = fzIntegerAttrGetValue(a);
  return true;
}

/* The NHWC version of op with its one operand (free) and the named
 * properties replaced; its result is op's in NHWC. */
static bool one_operand(ClLayout *L, FzOp *op, size_t numProps,
                        const char *const *names, FzAttr *const *values) {
  size_t n = fzOpGetNumOperands(op);
  FzValue *ops[8];
  if (n == 0 || n > 8)
    return false;
  ops[0] = clNhwc(L, fzOpGetOperand(op, 0), op);
  for (size_t i = 1; i < n; ++i)
    ops[i] = fzOpGetOperand(op, i);
  FzOp *k = ops[0] ? clCloneOp(L, op, n, ops, nhwc_type(L, op), numProps,
                               names, values)
                   : NULL;
  if (!k)
    return false;
  L->stats[CL_STAT_OPS]++;
  return clConverted(L, op, result(k), NULL);
}

/*===--- conv2d and the pools ---------------------------------------------===*/

static bool is_nchw(FzOp *op) {
  return fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NCHW;
}

bool clConvConverts(ClLayout *L, FzOp *op, int64_t *c, int64_t *min) {
  *c = *min = 0;
  const FzOpDef *def = fzOpGetDef(op);
  if (!def || strcmp(def->name, "graph.conv2d") != 0 ||
      fzOpGetNumOperands(op) < 2 || !is_nchw(op) ||
      !rank_is(fzOpGetOperand(op, 0), 4) || !rank_is(result(op), 4))
    return false;
  FzType *xt = fzValueGetType(fzOpGetOperand(op, 0));
  *c = fzShapedTypeGetDim(xt, 1);
  *min = L->minChannels; /* >= 1 from here on */
  if (*min == 0) {
    size_t bytes = fzTypeGetStorageSize(fzShapedTypeGetElementType(xt));
    *min = bytes ? (int64_t)(16 / bytes) : 1;
  }
  return *c == FZ_DYNAMIC || *c >= *min;
}

static bool rule_conv(ClLayout *L, FzOp *op) {
  FzValue *x = fzOpGetOperand(op, 0);
  int64_t c, min;
  if (!clConvConverts(L, op, &c, &min)) {
    if (min == 0)
      return false; /* not an NCHW conv2d */
    L->stats[CL_STAT_CONVS_KEPT]++;
    if (L->remarks)
      fzEmitRemark(L->ctx, fzOpGetLoc(op),
                   "convert-layout: conv2d left NCHW: %lld input channels, "
                   "fewer than min-channels (%lld): NHWC gives its input "
                   "loads no vector along the channels",
                   (long long)c, (long long)min);
    return false;
  }
  static const char *const names[] = {"layout"};
  FzAttr *values[] = {string_attr(L, "nhwc")};
  size_t n = fzOpGetNumOperands(op);
  FzValue *ops[3] = {clNhwc(L, x, op), fzOpGetOperand(op, 1),
                     n > 2 ? fzOpGetOperand(op, 2) : NULL};
  FzOp *k = ops[0] && n <= 3 ? clCloneOp(L, op, n, ops, nhwc_type(L, op), 1,
                                         names, values)
                             : NULL;
  if (!k)
    return false;
  L->stats[CL_STAT_CONVS]++;
  return clConverted(L, op, result(k), NULL);
}

/* Pools and global pools: NHWC when their input is. */
static bool rule_pool(ClLayout *L, FzOp *op) {
  FzValue *x = fzOpGetOperand(op, 0);
  if (!is_nchw(op) || !rank_is(x, 4) || !clIsAvailable(L, x))
    return false;
  static const char *const names[] = {"layout"};
  FzAttr *values[] = {string_attr(L, "nhwc")};
  return one_operand(L, op, 1, names, values);
}

/*===--- batch_norm -------------------------------------------------------===*/

/* scale, bias, mean, var of a batch_norm as f64 arrays when all four are
 * constants of c elements (NULL otherwise). */
static double *constant_params(ClLayout *L, FzOp *op, int64_t c) {
  if (c <= 0 || c > ((int64_t)1 << 24))
    return NULL;
  for (size_t i = 1; i < 5; ++i)
    if (!fzValueGetConstant(fzOpGetOperand(op, i)))
      return NULL;
  double *p = fzMalloc(L->ctx, 4 * (size_t)c * sizeof *p);
  if (!p) {
    L->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < 4; ++i) {
    FzTensor *t = fzTensorFromDenseAttr(
        L->ctx, fzValueGetConstant(fzOpGetOperand(op, 1 + i)));
    if (!t || t->numElements != c) {
      fzTensorDestroy(t);
      fzFree(L->ctx, p);
      return NULL;
    }
    for (int64_t k = 0; k < c; ++k)
      p[i * (size_t)c + (size_t)k] = fzTensorGetF64(t, k);
    fzTensorDestroy(t);
  }
  return p;
}

/* A [c] constant of element type elt before op. */
static FzValue *vector_constant(ClLayout *L, FzOp *op, FzType *elt,
                                int64_t c, const double *v) {
  FzTensor *t = fzTensorCreate(L->ctx, elt, 1, &c);
  FzAttr *a = NULL;
  if (t) {
    for (int64_t k = 0; k < c; ++k)
      fzTensorSetF64(t, k, v[k]);
    a = fzTensorToDenseAttr(t);
  }
  fzTensorDestroy(t);
  FzBuilder b;
  fzBuilderInit(&b, L->ctx);
  fzBuilderSetInsertionPointBefore(&b, op);
  FzOp *k = a ? fzGraphCreateConstant(&b, a, fzOpGetLoc(op)) : NULL;
  if (!k) {
    L->failed = true;
    return NULL;
  }
  return result(k);
}

/* s and t computed by graph ops from the [C] operands (not constant). */
static bool computed_params(ClLayout *L, FzOp *op, double eps, FzValue **s,
                            FzValue **t) {
  FzValue *scale = fzOpGetOperand(op, 1), *bias = fzOpGetOperand(op, 2);
  FzValue *mean = fzOpGetOperand(op, 3), *var = fzOpGetOperand(op, 4);
  FzType *vt = fzValueGetType(scale);
  FzType *elt = fzShapedTypeGetElementType(vt);
  FzTensor *e = fzTensorCreate(L->ctx, elt, 0, NULL);
  FzAttr *ea = NULL;
  if (e) {
    fzTensorSetF64(e, 0, eps);
    ea = fzTensorToDenseAttr(e);
  }
  fzTensorDestroy(e);
  FzBuilder b;
  fzBuilderInit(&b, L->ctx);
  fzBuilderSetInsertionPointBefore(&b, op);
  FzOp *k = ea ? fzGraphCreateConstant(&b, ea, fzOpGetLoc(op)) : NULL;
  if (!k) {
    L->failed = true;
    return false;
  }
  FzValue *ve[2] = {var, result(k)};
  FzValue *sum = clCreate(L, op, "graph.add", 2, ve, vt);
  FzValue *r = sum ? clCreate(L, op, "graph.rsqrt", 1, &sum, vt) : NULL;
  FzValue *sr[2] = {scale, r};
  *s = r ? clCreate(L, op, "graph.mul", 2, sr, vt) : NULL;
  FzValue *ms[2] = {mean, *s};
  FzValue *m = *s ? clCreate(L, op, "graph.mul", 2, ms, vt) : NULL;
  FzValue *bm[2] = {bias, m};
  *t = m ? clCreate(L, op, "graph.sub", 2, bm, vt) : NULL;
  return *t != NULL;
}

static bool rule_batch_norm(ClLayout *L, FzOp *op) {
  FzValue *x = fzOpGetOperand(op, 0);
  if (!rank_is(x, 4) || !clIsFree(L, x) || fzOpGetNumOperands(op) != 5)
    return false;
  for (size_t i = 1; i < 5; ++i)
    if (!rank_is(fzOpGetOperand(op, i), 1))
      return false;
  double eps = 1e-5;
  FzAttr *ea = fzOpGetInherentAttr(op, FZ_STR("epsilon"));
  if (ea && fzAttrGetKind(ea) == FZ_ATTR_FLOAT)
    eps = fzFloatAttrGetValue(ea);
  FzType *xt = fzValueGetType(x);
  FzType *elt = fzShapedTypeGetElementType(xt);
  int64_t c = fzShapedTypeGetDim(xt, 1);
  FzValue *s = NULL, *t = NULL;
  double *p = constant_params(L, op, c);
  if (p) {
    /* par: scale, bias, mean, var -> s in p[0..c), t in p[c..2c). */
    for (int64_t k = 0; k < c; ++k) {
      double sk = p[k] / sqrt(p[3 * c + k] + eps);
      p[c + k] = p[c + k] - p[2 * c + k] * sk;
      p[k] = sk;
    }
    s = vector_constant(L, op, elt, c, p);
    t = s ? vector_constant(L, op, elt, c, p + c) : NULL;
    fzFree(L->ctx, p);
  } else if (!L->failed && !computed_params(L, op, eps, &s, &t)) {
    return false;
  }
  FzType *nt = nhwc_type(L, op);
  FzValue *xs[2] = {clNhwc(L, x, op), s};
  FzValue *y = s && t && nt ? clCreate(L, op, "graph.mul", 2, xs, nt) : NULL;
  FzValue *yt[2] = {y, t};
  FzValue *z = y ? clCreate(L, op, "graph.add", 2, yt, nt) : NULL;
  if (!z)
    return false;
  L->stats[CL_STAT_OPS]++;
  return clConverted(L, op, z, NULL);
}

/*===--- Elementwise ops and concat ---------------------------------------===*/

/* Whether the NHWC version of an op with these operands saves transposes:
 * at least one rank-4 operand is free, and no more need a data-moving
 * transpose than are free. Every operand has rank <= 4. */
static bool worth_it(ClLayout *L, FzOp *op, bool allRank4) {
  size_t n = fzOpGetNumOperands(op), free = 0, cost = 0;
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    FzType *t = fzValueGetType(v);
    if (fzTypeGetKind(t) != FZ_TYPE_TENSOR)
      return false;
    size_t r = fzShapedTypeGetRank(t);
    if (r == (size_t)FZ_UNRANKED || r > 4 || (allRank4 && r != 4))
      return false;
    if (fzValueGetConstant(v))
      continue;
    if (r == 4 && clIsFree(L, v))
      free++;
    else if (r == 4 ? clNeedsTranspose(L, v) && !clIsAvailable(L, v)
                    : r >= 2)
      cost++; /* a low-rank operand moves when two of its dims are > 1 */
  }
  return free > 0 && cost <= free;
}

static bool rule_elementwise(ClLayout *L, FzOp *op) {
  size_t n = fzOpGetNumOperands(op);
  if (!rank_is(result(op), 4) || n > 64 || !worth_it(L, op, false))
    return false;
  FzValue *ops[64];
  for (size_t i = 0; i < n; ++i)
    if (!(ops[i] = clRelayoutOperand(L, fzOpGetOperand(op, i), op)))
      return false;
  FzOp *k = clCloneOp(L, op, n, ops, nhwc_type(L, op), 0, NULL, NULL);
  if (!k)
    return false;
  L->stats[CL_STAT_OPS]++;
  return clConverted(L, op, result(k), NULL);
}

static bool rule_concat(ClLayout *L, FzOp *op) {
  size_t n = fzOpGetNumOperands(op);
  int64_t axis;
  if (!rank_is(result(op), 4) || n > 64 || !read_int(op, "axis", 0, &axis) ||
      nhwc_axis(axis) < 0 || !worth_it(L, op, true))
    return false;
  FzValue *ops[64];
  for (size_t i = 0; i < n; ++i)
    if (!(ops[i] = clNhwc(L, fzOpGetOperand(op, i), op)))
      return false;
  static const char *const names[] = {"axis"};
  FzAttr *values[] = {i64_attr(L, nhwc_axis(axis))};
  FzOp *k = clCloneOp(L, op, n, ops, nhwc_type(L, op), 1, names, values);
  if (!k)
    return false;
  L->stats[CL_STAT_OPS]++;
  return clConverted(L, op, result(k), NULL);
}

/*===--- Data movement ----------------------------------------------------===*/

/* Per-dim attribute v (groups of 4, `groups` of them) in NHWC order. */
static void permute_groups(int64_t *v, size_t groups) {
  for (size_t g = 0; g < groups; ++g) {
    int64_t old[4];
    memcpy(old, v + 4 * g, sizeof old);
    for (int i = 0; i < 4; ++i)
      v[4 * g + (size_t)i] = old[kClToNhwc[i]];
  }
}

static bool rule_slice(ClLayout *L, FzOp *op) {
  static const char *const names[] = {"starts", "limits", "strides"};
  FzValue *x = fzOpGetOperand(op, 0);
  int64_t v[3][4];
  if (!rank_is(x, 4) || !clIsFree(L, x))
    return false;
  size_t np = 0;
  FzAttr *values[3];
  for (size_t i = 0; i < 3; ++i) {
    if (!read_ints(op, names[i], 4, v[i])) {
      if (i < 2)
        return false;
      break; /* strides are optional */
    }
    permute_groups(v[i], 1);
    values[np++] = clI64Array(L, 4, v[i]);
  }
  return one_operand(L, op, np, names, values);
}

static bool rule_pad(ClLayout *L, FzOp *op) {
  static const char *const names[] = {"pads"};
  FzValue *x = fzOpGetOperand(op, 0);
  int64_t v[8];
  if (!rank_is(x, 4) || !clIsFree(L, x) || !read_ints(op, "pads", 8, v))
    return false;
  permute_groups(v, 2);
  FzAttr *values[] = {clI64Array(L, 8, v)};
  return one_operand(L, op, 1, names, values);
}

/* A transpose of a converted value is a form of the value's form: no op
 * (ConvNeXt's permute to channels-last after an NHWC conv is the conv's
 * own result). */
static bool rule_transpose(ClLayout *L, FzOp *op) {
  FzValue *x = fzOpGetOperand(op, 0);
  if (!rank_is(x, 4) || !rank_is(result(op), 4))
    return false;
  /* A gain only when the operand's op goes away (converted, or itself a
   * transpose absorbed); clGetForm composes the transpose onto it. */
  if (!clGetForm(L, x).converted)
    return false;
  ClForm f = clGetForm(L, result(op));
  L->stats[CL_STAT_CANCELLED]++;
  return clConvertedForm(L, op, &f);
}

/*===--- Reductions and softmax -------------------------------------------===*/

static bool rule_reduce(ClLayout *L, FzOp *op) {
  FzValue *x = fzOpGetOperand(op, 0);
  if (!rank_is(x, 4) || !clIsFree(L, x))
    return false;
  bool keep = false;
  FzAttr *k = fzOpGetInherentAttr(op, FZ_STR("keepdims"));
  if (k && fzAttrGetKind(k) == FZ_ATTR_BOOL)
    keep = fzBoolAttrGetValue(k);
  int64_t axes[4];
  bool reduced[4] = {false, false, false, false};
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("axes"));
  size_t na = 0;
  if (!a) {
    for (int i = 0; i < 4; ++i)
      reduced[i] = true;
  } else {
    if (fzAttrGetKind(a) != FZ_ATTR_DENSE_ARRAY ||
        (na = fzDenseArrayAttrGetSize(a)) > 4)
      return false;
    for (size_t i = 0; i < na; ++i) {
      int64_t ax = nhwc_axis(fzDenseArrayAttrGetInt(a, i));
      if (ax < 0)
        return false;
      reduced[kClToNhwc[ax]] = true;
    }
  }
  /* The new axes, in increasing order. */
  size_t m = 0;
  for (int i = 0; i < 4; ++i)
    if (reduced[kClToNhwc[i]])
      axes[m++] = i;
  /* Without keepdims the result is the NCHW one itself when the kept
   * dims come in the same order (the channels reduced, or only they
   * kept with the batch). */
  bool same = true;
  int64_t last = -1;
  for (int i = 0; i < 4; ++i) {
    int64_t d = kClToNhwc[i];
    if (reduced[d])
      continue;
    same = same && d > last;
    last = d;
  }
  if (!keep && !same)
    return false;
  static const char *const names[] = {"axes"};
  FzAttr *values[] = {clI64Array(L, m, axes)};
  FzValue *xn = clNhwc(L, x, op);
  FzType *type = keep ? nhwc_type(L, op) : fzValueGetType(result(op));
  FzOp *r = xn ? clCloneOp(L, op, 1, &xn, type, a ? 1 : 0, names, values)
               : NULL;
  if (!r)
    return false;
  L->stats[CL_STAT_OPS]++;
  return keep ? clConverted(L, op, result(r), NULL)
              : clConverted(L, op, NULL, result(r));
}

static bool rule_softmax(ClLayout *L, FzOp *op) {
  FzValue *x = fzOpGetOperand(op, 0);
  int64_t axis;
  if (!rank_is(x, 4) || !clIsFree(L, x) || !read_int(op, "axis", -1, &axis) ||
      nhwc_axis(axis) < 0)
    return false;
  static const char *const names[] = {"axis"};
  FzAttr *values[] = {i64_attr(L, nhwc_axis(axis))};
  return one_operand(L, op, 1, names, values);
}

/*===--- The table --------------------------------------------------------===*/

typedef bool (*RuleFn)(ClLayout *L, FzOp *op);

static const struct {
  const char *name;
  RuleFn fn;
} kRules[] = {
    {"graph.conv2d", rule_conv},
    {"graph.max_pool", rule_pool},
    {"graph.avg_pool", rule_pool},
    {"graph.global_avg_pool", rule_pool},
    {"graph.global_max_pool", rule_pool},
    {"graph.batch_norm", rule_batch_norm},
    {"graph.concat", rule_concat},
    {"graph.slice", rule_slice},
    {"graph.pad", rule_pad},
    {"graph.transpose", rule_transpose},
    {"graph.reduce_sum", rule_reduce},
    {"graph.reduce_mean", rule_reduce},
    {"graph.reduce_max", rule_reduce},
    {"graph.reduce_min", rule_reduce},
    {"graph.reduce_prod", rule_reduce},
    {"graph.softmax", rule_softmax},
    {"graph.log_softmax", rule_softmax},
};

bool clConvertOp(ClLayout *L, FzOp *op) {
  const FzOpDef *def = fzOpGetDef(op);
  if (!def || strncmp(def->name, "graph.", 6) != 0 ||
      fzOpGetNumResults(op) != 1 || fzOpGetNumRegions(op) != 0 ||
      fzOpGetNumOperands(op) == 0 || !fzOpHasTrait(op, FZ_TRAIT_PURE))
    return false;
  for (size_t i = 0; i < sizeof kRules / sizeof kRules[0]; ++i)
    if (strcmp(def->name, kRules[i].name) == 0)
      return kRules[i].fn(L, op);
  /* Any op that maps elements to elements (with numpy broadcasting):
   * layout-agnostic. */
  if (def->fusionKind == FZ_FUSION_ELEMENTWISE ||
      def->fusionKind == FZ_FUSION_BROADCAST)
    return rule_elementwise(L, op);
  return false;
}

/* importers/onnx/ops_misc.c - ONNX ops that make constants or build an
 * index structure: Constant, ConstantOfShape, Shape, Size, Range and
 * EyeLike become graph.constant (their inputs must be known at import);
 * Trilu selects through a constant mask; OneHot and GatherElements
 * compare indices against an index constant and select (GatherElements
 * then sums the one-hot selection along the gathered axis, O(indices x
 * axis size) work, since the graph dialect has no gather-elements op);
 * CumSum is a matmul with a constant triangular matrix along the axis;
 * Einsum multiplies its operands aligned on a common label order and
 * sums the contracted labels; AffineGrid multiplies a constant grid of
 * positions by the affine matrices.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

#define AT(x) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##x

/*===--- Constants -------------------------------------------------------===*/

static bool h_constant(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  (void)in;
  (void)nIn;
  (void)nOut;
  const Onnx__NodeProto *n = im->node;
  if (n->n_attribute != 1)
    return fzOnnxError(im, "requires exactly one value attribute");
  const Onnx__AttributeProto *a = n->attribute[0];
  FzContext *ctx = im->ctx;
  if (!strcmp(a->name, "value")) {
    if (!a->t)
      return fzOnnxError(im, "attribute 'value' must be a tensor");
    out[0] = fzOnnxConstAttr(im, fzOnnxTensorToAttr(im, a->t,
                                                    "attribute 'value'"));
    if (fzOnnxDataTypeIsUnsigned(a->t->data_type))
      fzOnnxMarkUnsigned(im, out[0]);
  } else if (!strcmp(a->name, "value_float")) {
    out[0] = fzOnnxConstScalar(im, fzF32TypeGet(ctx), a->f);
  } else if (!strcmp(a->name, "value_int")) {
    out[0] = fzOnnxConstI64(im, 0, NULL, &a->i);
  } else if (!strcmp(a->name, "value_ints")) {
    int64_t len = (int64_t)a->n_ints;
    out[0] = fzOnnxConstI64(im, 1, &len, a->ints);
  } else if (!strcmp(a->name, "value_floats")) {
    int64_t len = (int64_t)a->n_floats;
    FzType *t = fzTensorTypeGet(ctx, 1, &len, fzF32TypeGet(ctx), NULL);
    out[0] = fzOnnxConstAttr(
        im, t ? fzDenseAttrGet(ctx, t, a->floats, a->n_floats * 4) : NULL);
  } else {
    return fzOnnxError(im, "unsupported attribute '%s'", a->name);
  }
  return out[0] != NULL;
}

static bool h_constant_of_shape(FzOnnxImporter *im, FzValue *const *in,
                                size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t *shape;
  size_t n;
  if (!fzOnnxGetConstInts(im, in[0], &shape, &n))
    return fzOnnxErrorNotConstant(im, 0, "shape");
  if (n > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "unsupported rank %zu", n);
  FzType *elt = fzF32TypeGet(im->ctx);
  double v = 0;
  const Onnx__AttributeProto *a = fzOnnxAttr(im, "value");
  if (a) {
    FzAttr *t = a->t ? fzOnnxTensorToAttr(im, a->t, "attribute 'value'")
                     : NULL;
    if (!t)
      return a->t ? false
                  : fzOnnxError(im, "attribute 'value' must be a tensor");
    if (fzShapedTypeGetNumElements(fzAttrGetType(t)) != 1)
      return fzOnnxError(im, "attribute 'value' must hold one element");
    elt = fzShapedTypeGetElementType(fzAttrGetType(t));
    v = fzTypeIsFloat(elt) ? fzDenseAttrGetFloat(t, 0)
                           : (double)fzDenseAttrGetInt(t, 0);
  }
  for (size_t i = 0; i < n; ++i)
    if (shape[i] < 0)
      return fzOnnxError(im, "shape entry %zu is negative", i);
  out[0] = fzOnnxConstSplat(im, elt, n, shape, v);
  if (a && fzOnnxDataTypeIsUnsigned(a->t->data_type))
    fzOnnxMarkUnsigned(im, out[0]);
  return out[0] != NULL;
}

static bool h_shape(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0];
  int64_t r = (int64_t)fzOnnxRank(x), start, end;
  if (!fzOnnxAttrInt(im, "start", 0, &start) ||
      !fzOnnxAttrInt(im, "end", r, &end))
    return false;
  if (start < 0)
    start += r;
  if (end < 0)
    end += r;
  start = start < 0 ? 0 : (start > r ? r : start);
  end = end < 0 ? 0 : (end > r ? r : end);
  if (end < start)
    end = start;
  int64_t dims[FZ_GRAPH_MAX_RANK], len = end - start;
  for (int64_t i = start; i < end; ++i) {
    dims[i - start] = fzOnnxDim(x, (size_t)i);
    if (dims[i - start] == FZ_DYNAMIC)
      return fzOnnxError(im, "unsupported dynamic dimension %lld",
                         (long long)i);
  }
  out[0] = fzOnnxConstI64(im, 1, &len, dims);
  return out[0] != NULL;
}

static bool h_size(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  if (!fzOnnxRequireStatic(im, in[0], "the input"))
    return false;
  int64_t n = fzShapedTypeGetNumElements(fzValueGetType(in[0]));
  out[0] = fzOnnxConstI64(im, 0, NULL, &n);
  return out[0] != NULL;
}

/* The element count of an integer Range, counted by stepping (at most
 * FZ_ONNX_FOLD_LIMIT + 1 steps) so that no subtraction or division of
 * the model's int64 values can overflow; -1 when over the limit. */
static int64_t int_range_count(int64_t start, int64_t limit,
                               int64_t delta) {
  int64_t count = 0;
  for (int64_t v = start; delta > 0 ? v < limit : v > limit; ++count) {
    if (count == FZ_ONNX_FOLD_LIMIT)
      return -1;
    /* Overflowing past INT64_MAX (MIN) is past limit too. */
    if (!fzOnnxAddI64(v, delta, &v))
      return count + 1;
  }
  return count;
}

static bool h_range(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  static const char *const names[3] = {"start", "limit", "delta"};
  FzType *elt = fzOnnxElt(in[0]);
  bool isInt = fzTypeIsInteger(elt);
  int64_t iv[3] = {0, 0, 0}, len;
  double fv[3] = {0, 0, 0};
  for (size_t i = 0; i < 3; ++i) {
    int64_t *ints;
    double *floats;
    size_t n;
    bool ok = isInt ? fzOnnxGetConstInts(im, in[i], &ints, &n)
                    : fzOnnxGetConstFloats(im, in[i], &floats, &n);
    if (!ok || n != 1)
      return fzOnnxErrorNotConstant(im, i, names[i]);
    if (isInt)
      iv[i] = ints[0];
    else if (!isfinite(fv[i] = floats[0]))
      return fzOnnxError(im, "%s is %g: it must be finite", names[i],
                         fv[i]);
  }
  if (isInt ? iv[2] == 0 : fv[2] == 0)
    return fzOnnxError(im, "delta is 0");
  if (isInt) {
    len = int_range_count(iv[0], iv[1], iv[2]);
    if (len < 0)
      return fzOnnxError(im, "unsupported range of more than %lld elements",
                         (long long)FZ_ONNX_FOLD_LIMIT);
  } else {
    double count = ceil((fv[1] - fv[0]) / fv[2]);
    if (count < 0)
      count = 0;
    if (!fzOnnxFloatToInt(im, count, 0, FZ_ONNX_FOLD_LIMIT,
                          "the range's element count", &len))
      return false;
  }
  FzTensor *t = fzTensorCreate(im->ctx, elt, 1, &len);
  if (!t)
    return false;
  /* Integer values stay within [start, limit): no overflow. */
  for (int64_t i = 0, v = iv[0]; i < len; ++i) {
    if (isInt) {
      fzTensorSetI64(t, i, v);
      if (i + 1 < len)
        v += iv[2];
    } else {
      fzTensorSetF64(t, i, fv[0] + (double)i * fv[2]);
    }
  }
  out[0] = fzOnnxConstTensor(im, t);
  fzTensorDestroy(t);
  return out[0] != NULL;
}

static bool h_eye_like(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t dtype, k;
  if (!fzOnnxAttrInt(im, "dtype", -1, &dtype) ||
      !fzOnnxAttrInt(im, "k", 0, &k))
    return false;
  FzValue *x = in[0];
  FzType *elt = fzOnnxElt(x);
  if (dtype >= 0 && !(elt = fzOnnxElementType(
                           im->ctx, dtype > INT32_MAX ? 0 : (int32_t)dtype)))
    return fzOnnxError(im, "unsupported dtype %lld", (long long)dtype);
  if (fzOnnxRank(x) != 2 || !fzOnnxRequireStatic(im, x, "the input"))
    return fzOnnxRank(x) == 2 ? false
                              : fzOnnxError(im, "input must have rank 2");
  if (!fzOnnxCheckBuilt(im, 2, fzOnnxShape(x), "identity matrix", NULL))
    return false;
  FzTensor *t = fzTensorCreate(im->ctx, elt, 2, fzOnnxShape(x));
  if (!t)
    return false;
  int64_t rows = fzOnnxDim(x, 0), cols = fzOnnxDim(x, 1);
  /* Beyond (-rows, cols) the diagonal misses the matrix (and i + k
   * could overflow). */
  for (int64_t i = 0; k > -rows && k < cols && i < rows; ++i)
    if (i + k >= 0 && i + k < cols)
      fzTensorSetF64(t, i * cols + i + k, 1.0);
  out[0] = fzOnnxConstTensor(im, t);
  fzTensorDestroy(t);
  return out[0] != NULL;
}

/* Whether v has one element (rank 0, or every dim 1). */
static bool single_element(FzValue *v) {
  for (size_t i = 0; i < fzOnnxRank(v); ++i)
    if (fzOnnxDim(v, i) != 1)
      return false;
  return true;
}

/* Trilu: a select through a mask of the (i, j) with j - i >= k (upper) or
 * <= k; constant for a constant k, else the compare of a constant table
 * of j - i with k at run time. */
static bool h_trilu(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t upper, k = 0;
  if (!fzOnnxAttrInt(im, "upper", 1, &upper))
    return false;
  FzValue *kRun = NULL; /* k known only at run time */
  if (nIn > 1 && in[1]) {
    int64_t *kv;
    size_t n;
    if (fzOnnxGetConstInts(im, in[1], &kv, &n)) {
      if (n != 1)
        return fzOnnxError(im, "input #1 (k) must hold one element");
      k = kv[0];
    } else if (!single_element(in[1]) ||
               fzOnnxElt(in[1]) != fzIntegerTypeGet(im->ctx, 64)) {
      return fzOnnxError(im, "input #1 (k) must be one int64");
    } else {
      kRun = in[1];
    }
  }
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  if (r < 2)
    return fzOnnxError(im, "input must have rank >= 2");
  int64_t shape[2] = {fzOnnxDim(x, r - 2), fzOnnxDim(x, r - 1)};
  if (shape[0] == FZ_DYNAMIC || shape[1] == FZ_DYNAMIC)
    return fzOnnxError(im, "unsupported dynamic matrix dimensions");
  if (!fzOnnxCheckBuilt(im, 2, shape, "triangular mask", NULL))
    return false;
  if (kRun) {
    /* The mask compares the constant diagonal offsets j - i with k. */
    FzTensor *d = fzTensorCreate(im->ctx, fzIntegerTypeGet(im->ctx, 64), 2,
                                 shape);
    if (!d)
      return false;
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j)
        fzTensorSetI64(d, i * shape[1] + j, j - i);
    FzValue *off = fzOnnxConstTensor(im, d);
    fzTensorDestroy(d);
    int64_t one = 1;
    FzValue *kk = fzOnnxReshape(im, kRun, 1, &one);
    FzValue *mask = fzOnnxCompare(im, upper ? "ge" : "le", off, kk);
    out[0] =
        fzOnnxSelect(im, mask, x, fzOnnxConstScalar(im, fzOnnxElt(x), 0));
    return out[0] != NULL;
  }
  FzTensor *m = fzTensorCreate(im->ctx, fzIntegerTypeGet(im->ctx, 1), 2,
                               shape);
  if (!m)
    return false;
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      fzTensorSetI64(m, i * shape[1] + j, upper ? j - i >= k : j - i <= k);
  FzValue *mask = fzOnnxConstTensor(im, m);
  fzTensorDestroy(m);
  out[0] = fzOnnxSelect(im, mask, x, fzOnnxConstScalar(im, fzOnnxElt(x), 0));
  return out[0] != NULL;
}

/* HannWindow, HammingWindow, BlackmanWindow: constants of `size`
 * elements, periodic (denominator N) or symmetric (N - 1). */
static bool h_window(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t periodic, dtype, *sv;
  size_t n;
  if (!fzOnnxAttrInt(im, "periodic", 1, &periodic) ||
      !fzOnnxAttrInt(im, "output_datatype", 1, &dtype))
    return false;
  if (!fzOnnxGetConstInts(im, in[0], &sv, &n) || n != 1)
    return fzOnnxErrorNotConstant(im, 0, "size");
  FzType *elt = dtype < 0 || dtype > INT32_MAX
                    ? NULL
                    : fzOnnxElementType(im->ctx, (int32_t)dtype);
  if (!elt)
    return fzOnnxError(im, "unsupported dtype %lld", (long long)dtype);
  int64_t size = sv[0];
  if (size < 0 || size > FZ_ONNX_FOLD_LIMIT)
    return fzOnnxError(im, "unsupported window size %lld", (long long)size);
  FzTensor *t = fzTensorCreate(im->ctx, elt, 1, &size);
  if (!t)
    return false;
  const char *op = im->node->op_type;
  double denom = (double)(periodic ? size : size - 1);
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < size; ++i) {
    double x = denom > 0 ? 2 * pi * (double)i / denom : 0, v;
    if (op[0] == 'H' && op[2] == 'n') /* Hann */
      v = 0.5 - 0.5 * cos(x);
    else if (op[0] == 'H') /* Hamming */
      v = 25.0 / 46.0 - 21.0 / 46.0 * cos(x);
    else /* Blackman */
      v = 0.42 - 0.5 * cos(x) + 0.08 * cos(2 * x);
    fzTensorSetF64(t, i, v);
  }
  out[0] = fzOnnxConstTensor(im, t);
  fzTensorDestroy(t);
  return out[0] != NULL;
}

/*===--- Index structures -------------------------------------------------===*/

/* idx as i64 with negative entries wrapped by d. */
static FzValue *wrap_indices(FzOnnxImporter *im, FzValue *idx, int64_t d) {
  FzType *i64 = fzIntegerTypeGet(im->ctx, 64);
  idx = fzOnnxCast(im, idx, i64);
  FzValue *neg = fzOnnxCompare(im, "lt", idx, fzOnnxConstScalar(im, i64, 0));
  return fzOnnxSelect(im, neg,
                      fzOnnxBinary(im, "graph.add", idx,
                                   fzOnnxConstScalar(im, i64, (double)d)),
                      idx);
}

/* idx as i64 with negative entries wrapped by d, through a gather from
 * [0, d): an entry outside [-d, d) is then an error when the model runs,
 * on every device, as ONNX says (a compare against iota alone would give
 * zeros). */
static FzValue *checked_indices(FzOnnxImporter *im, FzValue *idx,
                                int64_t d) {
  FzValue *ops[2] = {fzOnnxIota(im, 1, 0, d),
                     fzOnnxCast(im, idx, fzIntegerTypeGet(im->ctx, 64))};
  if (!ops[0] || !ops[1])
    return NULL;
  return fzOnnxEmit(im, "graph.gather", 2, ops, NULL, NULL);
}

/* x with a unit dim inserted at position `at`. */
static FzValue *insert_unit(FzOnnxImporter *im, FzValue *x, size_t at) {
  if (!x)
    return NULL;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  size_t r = fzOnnxRank(x);
  for (size_t i = 0, k = 0; i <= r; ++i)
    shape[i] = i == at ? 1 : fzOnnxDim(x, k++);
  return fzOnnxReshape(im, x, r + 1, shape);
}

static bool h_one_hot(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t axis;
  double *dv;
  size_t n;
  if (!fzOnnxAttrInt(im, "axis", -1, &axis))
    return false;
  if (!fzOnnxGetConstFloats(im, in[1], &dv, &n) || n != 1)
    return fzOnnxErrorNotConstant(im, 1, "depth");
  int64_t depth;
  if (!fzOnnxFloatToInt(im, dv[0], 1, FZ_MAX_DIM, "depth", &depth))
    return false;
  FzValue *idx = in[0], *values = in[2];
  size_t r = fzOnnxRank(idx), ax;
  if (r + 1 > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "unsupported result rank %zu", r + 1);
  if (!fzOnnxNormAxis(im, axis, r + 1, &ax))
    return false;
  if (fzOnnxRank(values) != 1 || fzOnnxDim(values, 0) != 2)
    return fzOnnxError(im, "'values' must have shape [2]");
  FzValue *wrapped = insert_unit(im, wrap_indices(im, idx, depth), ax);
  FzValue *eq = fzOnnxCompare(im, "eq", wrapped,
                              fzOnnxIota(im, r + 1, ax, depth));
  int64_t s0 = 0, l0 = 1, s1 = 1, l1 = 2, st = 1;
  FzValue *off = fzOnnxReshape(im, fzOnnxSlice(im, values, &s0, &l0, &st), 0,
                               NULL);
  FzValue *on = fzOnnxReshape(im, fzOnnxSlice(im, values, &s1, &l1, &st), 0,
                              NULL);
  out[0] = fzOnnxSelect(im, eq, on, off);
  /* select broadcasts to eq's shape, which has depth along ax. */
  return out[0] != NULL;
}

static bool h_gather_elements(FzOnnxImporter *im, FzValue *const *in,
                              size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t axis;
  if (!fzOnnxAttrInt(im, "axis", 0, &axis))
    return false;
  FzValue *data = in[0], *idx = in[1];
  size_t r = fzOnnxRank(data), ax;
  if (!fzOnnxNormAxis(im, axis, r, &ax))
    return false;
  if (fzOnnxRank(idx) != r || r + 1 > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "indices must have the rank of data");
  if (!fzOnnxRequireStatic(im, data, "data") ||
      !fzOnnxRequireStatic(im, idx, "indices"))
    return false;
  int64_t d = fzOnnxDim(data, ax);
  /* Crop data to the index shape off the axis. */
  int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK];
  int64_t strides[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i) {
    limits[i] = i == ax ? d : fzOnnxDim(idx, i);
    strides[i] = 1;
    if (limits[i] > fzOnnxDim(data, i))
      return fzOnnxError(im, "indices dimension %zu exceeds data's", i);
  }
  FzValue *cropped = fzOnnxSlice(im, data, starts, limits, strides);
  /* out[.., j, ..] = sum_c (idx[.., j, ..] == c) * data[.., c, ..], with
   * c a new dim right after the axis. */
  FzValue *ie = insert_unit(im, checked_indices(im, idx, d), ax + 1);
  FzValue *de = insert_unit(im, cropped, ax);
  FzValue *eq =
      fzOnnxCompare(im, "eq", ie, fzOnnxIota(im, r + 1, ax + 1, d));
  FzValue *sel = fzOnnxSelect(im, eq, de,
                              fzOnnxConstScalar(im, fzOnnxElt(data), 0));
  int64_t sumAxis = (int64_t)ax + 1;
  out[0] = fzOnnxReduce(im, "graph.reduce_sum", sel, 1, &sumAxis, false);
  return out[0] != NULL;
}

/* x's cumulative sum along axis ax: y[j] = sum_i x[i] * T[i][j] with a
 * constant triangular T. NULL after an error. */
static FzValue *cumsum_along(FzOnnxImporter *im, FzValue *x, size_t ax,
                             bool exclusive, bool reverse) {
  size_t r = fzOnnxRank(x);
  int64_t d = fzOnnxDim(x, ax);
  if (d == FZ_DYNAMIC) {
    fzOnnxError(im, "unsupported dynamic dimension along the axis");
    return NULL;
  }
  int64_t shape[2] = {d, d};
  if (!fzOnnxCheckBuilt(im, 2, shape, "triangular matrix", NULL))
    return NULL;
  FzTensor *t = fzTensorCreate(im->ctx, fzOnnxElt(x), 2, shape);
  if (!t)
    return NULL;
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) {
      bool on = reverse ? (exclusive ? i > j : i >= j)
                        : (exclusive ? i < j : i <= j);
      fzTensorSetF64(t, i * d + j, on ? 1.0 : 0.0);
    }
  FzValue *tri = fzOnnxConstTensor(im, t);
  fzTensorDestroy(t);
  int64_t perm[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    perm[i] = (int64_t)i;
  perm[ax] = (int64_t)r - 1;
  perm[r - 1] = (int64_t)ax;
  FzValue *y = fzOnnxTranspose(im, x, r, perm);
  y = fzOnnxBinary(im, "graph.matmul", y, tri);
  return fzOnnxTranspose(im, y, r, perm);
}

/* CumSum. A run-time axis (an input whose value is unknown at import)
 * computes the sum along every axis and selects the one the axis names:
 * the axis is looked up in the constant table 0..r-1 by graph.gather,
 * which wraps a negative axis and reports one outside [-r, r) at run
 * time, as ONNX requires; r times the work of a constant axis. */
static bool h_cumsum(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t exclusive, reverse, *av;
  size_t n;
  if (!fzOnnxAttrInt(im, "exclusive", 0, &exclusive) ||
      !fzOnnxAttrInt(im, "reverse", 0, &reverse))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), ax;
  if (r == 0)
    return fzOnnxError(im, "input must have rank >= 1");
  if (fzOnnxGetConstInts(im, in[1], &av, &n)) {
    if (n != 1)
      return fzOnnxError(im, "input #1 (axis) must hold one element");
    if (!fzOnnxNormAxis(im, av[0], r, &ax))
      return false;
    out[0] = cumsum_along(im, x, ax, exclusive, reverse);
    return out[0] != NULL;
  }
  FzType *elt = fzOnnxElt(in[1]);
  if (!single_element(in[1]) || !fzTypeIsInteger(elt))
    return fzOnnxError(im, "input #1 (axis) must be one int32 or int64");
  FzValue *axis = fzOnnxReshape(im, in[1], 0, NULL);
  FzValue *ops[2] = {fzOnnxIota(im, 1, 0, (int64_t)r), axis};
  FzValue *norm = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                             fzIntegerAttrGet(im->ctx,
                                              fzIntegerTypeGet(im->ctx, 64),
                                              0),
                             NULL);
  FzValue *y = cumsum_along(im, x, 0, exclusive, reverse);
  for (size_t a = 1; y && a < r; ++a) {
    FzValue *ya = cumsum_along(im, x, a, exclusive, reverse);
    FzValue *is = fzOnnxCompare(
        im, "eq", norm,
        fzOnnxConstScalar(im, fzIntegerTypeGet(im->ctx, 64), (double)a));
    y = ya ? fzOnnxSelect(im, is, ya, y) : NULL;
  }
  out[0] = y;
  return out[0] != NULL;
}

/* Einsum (numpy's semantics). Labels are letters; "..." stands for the
 * leading dims an operand has beyond its labels, right-aligned across the
 * operands and broadcast (internally labels 1..E, which no letter is). A
 * label repeated within an operand takes the diagonal: the two dims moved
 * last, flattened, and graph.gather of positions i * (n + 1). Then every
 * operand is transposed and reshaped into one common label order (output
 * labels first, then the summed ones), the operands multiplied with
 * broadcasting, and the summed labels reduced. Without "->" the output is
 * the ellipsis dims, then the labels used once, in alphabetical order. */
#define EINSUM_MAX_OPERANDS 8

typedef struct EinsumTerm {
  char l[FZ_GRAPH_MAX_RANK + 1]; /* labels, NUL-terminated */
  size_t n;                      /* labels (without the ellipsis) */
  bool ellipsis;                 /* "..." present */
  size_t at;                     /* labels before it */
} EinsumTerm;

static bool is_label(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Parses one term from *p up to ',' (when comma), "->" or the end. */
static bool einsum_term(FzOnnxImporter *im, const char *eq, const char **p,
                        const char *end, EinsumTerm *t) {
  memset(t, 0, sizeof *t);
  for (; *p < end && **p != ','; ++*p) {
    char c = **p;
    if (c == ' ')
      continue;
    if (c == '.') {
      if (t->ellipsis || end - *p < 3 || strncmp(*p, "...", 3))
        return fzOnnxError(im, "unsupported einsum equation '%s' (a '.' "
                               "that is not one '...' in a term)", eq);
      t->ellipsis = true;
      t->at = t->n;
      *p += 2;
      continue;
    }
    if (!is_label(c))
      return fzOnnxError(im, "unsupported einsum equation '%s' (labels "
                             "are letters)", eq);
    if (t->n == FZ_GRAPH_MAX_RANK)
      return fzOnnxError(im, "unsupported einsum term of more than %d "
                             "labels", FZ_GRAPH_MAX_RANK);
    t->l[t->n++] = c;
  }
  return true;
}

/* The term with its ellipsis replaced by labels E - e + 1 .. E. */
static void einsum_expand(const EinsumTerm *t, size_t e, size_t E,
                          char *out) {
  size_t k = 0;
  for (size_t i = 0; i < t->at && t->ellipsis; ++i)
    out[k++] = t->l[i];
  for (size_t i = 0; i < e; ++i)
    out[k++] = (char)(1 + E - e + i);
  for (size_t i = t->ellipsis ? t->at : 0; i < t->n; ++i)
    out[k++] = t->l[i];
  out[k] = '\0';
}

/* x's diagonal over its dims p < q (equal sizes): those dims last,
 * flattened, gathered at i * (n + 1); term updated alike. */
static FzValue *einsum_diagonal(FzOnnxImporter *im, FzValue *x, char *term,
                                size_t p, size_t q) {
  size_t r = strlen(term);
  int64_t n = fzOnnxDim(x, p);
  if (n == FZ_DYNAMIC || fzOnnxDim(x, q) != n) {
    fzOnnxError(im, "a label repeated within an operand needs dims of one "
                    "static size (%lld and %lld)",
                (long long)n, (long long)fzOnnxDim(x, q));
    return NULL;
  }
  int64_t perm[FZ_GRAPH_MAX_RANK], shape[FZ_GRAPH_MAX_RANK], nn;
  char rest[FZ_GRAPH_MAX_RANK + 1];
  size_t k = 0;
  for (size_t i = 0; i < r; ++i)
    if (i != p && i != q) {
      rest[k] = term[i];
      shape[k] = fzOnnxDim(x, i);
      perm[k++] = (int64_t)i;
    }
  perm[k] = (int64_t)p, perm[k + 1] = (int64_t)q;
  if (!fzOnnxMulI64(n, n, &nn) ||
      !fzOnnxCheckBuilt(im, 1, &n, "diagonal index table", NULL))
    return NULL;
  int64_t *pos = fzOnnxAlloc(im, (size_t)(n + 1) * sizeof *pos);
  if (!pos)
    return NULL;
  for (int64_t i = 0; i < n; ++i)
    pos[i] = i * (n + 1);
  shape[k] = nn;
  x = fzOnnxReshape(im, fzOnnxTranspose(im, x, r, perm), k + 1, shape);
  FzValue *ops[2] = {x, fzOnnxConstI64(im, 1, &n, pos)};
  x = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                 fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64),
                                  (int64_t)k),
                 NULL);
  rest[k] = term[p];
  rest[k + 1] = '\0';
  memcpy(term, rest, k + 2);
  return x;
}

static bool h_einsum(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nOut;
  const char *eq;
  if (!fzOnnxAttrString(im, "equation", "", &eq))
    return false;
  const char *arrow = strstr(eq, "->"), *end = arrow ? arrow : eq + strlen(eq);
  EinsumTerm terms[EINSUM_MAX_OPERANDS], outTerm;
  size_t nt = 0, counts[256] = {0};
  for (const char *p = eq;;) {
    if (nt == EINSUM_MAX_OPERANDS)
      return fzOnnxError(im, "unsupported einsum with over %d operands",
                         EINSUM_MAX_OPERANDS);
    if (!einsum_term(im, eq, &p, end, &terms[nt]))
      return false;
    for (size_t i = 0; i < terms[nt].n; ++i)
      counts[(unsigned char)terms[nt].l[i]]++;
    ++nt;
    if (p >= end)
      break;
    ++p; /* ',' */
  }
  if (nt != nIn)
    return fzOnnxError(im, "the equation has %zu operands, the node %zu",
                       nt, nIn);
  /* Ellipsis dims per operand, and E, the most of them. */
  size_t ell[EINSUM_MAX_OPERANDS], E = 0;
  for (size_t t = 0; t < nt; ++t) {
    size_t r = fzOnnxRank(in[t]);
    if (r < terms[t].n || (!terms[t].ellipsis && r != terms[t].n))
      return fzOnnxError(im, "operand #%zu has rank %zu, its term %zu "
                             "labels%s", t, r, terms[t].n,
                         terms[t].ellipsis ? " and '...'" : "");
    ell[t] = r - terms[t].n;
    E = ell[t] > E ? ell[t] : E;
  }
  char outLabels[FZ_GRAPH_MAX_RANK + 1];
  size_t no = 0;
  if (arrow) {
    const char *p = arrow + 2, *oend = p + strlen(p);
    for (const char *c = p; c < oend; ++c)
      if (!is_label(*c) && *c != ' ' && *c != '.')
        return fzOnnxError(im, "unsupported einsum output '%s'", p);
    if (!einsum_term(im, eq, &p, oend, &outTerm))
      return false;
    if (p < oend || (E && !outTerm.ellipsis) || outTerm.n + E >
                                                      FZ_GRAPH_MAX_RANK)
      return fzOnnxError(im, "unsupported einsum output '%s'%s", arrow + 2,
                         E && !outTerm.ellipsis
                             ? " (the operands' '...' dims need a '...' "
                               "there)"
                             : "");
    for (size_t i = 0; i < outTerm.n; ++i)
      if (!counts[(unsigned char)outTerm.l[i]] ||
          memchr(outTerm.l, outTerm.l[i], i))
        return fzOnnxError(im, "unsupported einsum output '%s'", arrow + 2);
    einsum_expand(&outTerm, E, E, outLabels);
    no = strlen(outLabels);
  } else {
    for (size_t i = 0; i < E; ++i)
      outLabels[no++] = (char)(1 + i);
    for (int c = 0; c < 128; ++c)
      if (counts[c] == 1) {
        if (no == FZ_GRAPH_MAX_RANK)
          return fzOnnxError(im, "unsupported einsum output of more than "
                                 "%d dims", FZ_GRAPH_MAX_RANK);
        outLabels[no++] = (char)c;
      }
    outLabels[no] = '\0';
  }
  /* Operands with their ellipses expanded and their diagonals taken. */
  char exp[EINSUM_MAX_OPERANDS][FZ_GRAPH_MAX_RANK + 1];
  FzValue *xs[EINSUM_MAX_OPERANDS];
  for (size_t t = 0; t < nt; ++t) {
    einsum_expand(&terms[t], ell[t], E, exp[t]);
    xs[t] = in[t];
    for (bool again = true; again && xs[t];) {
      again = false;
      size_t r = strlen(exp[t]);
      for (size_t p = 0; p < r && !again; ++p)
        for (size_t q = p + 1; q < r && !again; ++q)
          if (exp[t][p] == exp[t][q]) {
            xs[t] = einsum_diagonal(im, xs[t], exp[t], p, q);
            again = true;
          }
    }
    if (!xs[t])
      return false;
  }
  char labels[FZ_GRAPH_MAX_RANK + 1];
  size_t nl = no;
  memcpy(labels, outLabels, no);
  for (size_t t = 0; t < nt; ++t)
    for (const char *p = exp[t]; *p; ++p)
      if (!memchr(labels, *p, nl)) {
        if (nl == FZ_GRAPH_MAX_RANK)
          return fzOnnxError(im, "unsupported einsum with too many labels");
        labels[nl++] = *p;
      }
  FzValue *acc = NULL;
  for (size_t t = 0; t < nt; ++t) {
    FzValue *x = xs[t];
    size_t r = strlen(exp[t]);
    int64_t perm[FZ_GRAPH_MAX_RANK], shape[FZ_GRAPH_MAX_RANK];
    size_t k = 0;
    for (size_t l = 0; l < nl; ++l) {
      const char *at = memchr(exp[t], labels[l], r);
      if (at)
        perm[k++] = at - exp[t];
      shape[l] = at ? fzOnnxDim(x, (size_t)(at - exp[t])) : 1;
    }
    x = fzOnnxReshape(im, fzOnnxTranspose(im, x, r, perm), nl, shape);
    acc = acc ? fzOnnxBinary(im, "graph.mul", acc, x) : x;
  }
  if (acc && nl > no) {
    int64_t axes[FZ_GRAPH_MAX_RANK];
    for (size_t l = no; l < nl; ++l)
      axes[l - no] = (int64_t)l;
    acc = fzOnnxReduce(im, "graph.reduce_sum", acc, nl - no, axes, false);
  }
  out[0] = acc;
  return acc != NULL;
}

/*===--- AffineGrid (20) -------------------------------------------------===*/

/* The normalized coordinate of index i of a dim of size len: -1 and 1 at
 * the corner pixels' centres (align_corners) or outer edges. */
static double grid_coord(int64_t i, int64_t len, bool alignCorners) {
  if (alignCorners)
    return len == 1 ? -1.0 : -1.0 + 2.0 * (double)i / (double)(len - 1);
  return (2.0 * (double)i + 1.0) / (double)len - 1.0;
}

/* grid = base x theta^T: base holds one homogeneous row [x, y, (z,) 1]
 * per output position (x along the last dim), a constant of
 * prod(size[2:]) x (k + 1) elements; theta is [N, k, k + 1]. The matmul
 * broadcasts base over the batch; the result is reshaped to
 * [N, (D,) H, W, k]. size (input #1) must be a constant. */
static bool h_affine_grid(FzOnnxImporter *im, FzValue *const *in,
                          size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t align, *size;
  size_t n;
  if (!fzOnnxAttrInt(im, "align_corners", 0, &align))
    return false;
  if (!fzOnnxGetConstInts(im, in[1], &size, &n))
    return fzOnnxErrorNotConstant(im, 1, "size");
  if (n != 4 && n != 5)
    return fzOnnxError(im, "'size' needs 4 (2-D) or 5 (3-D) entries, has "
                           "%zu", n);
  size_t k = n - 2;
  FzValue *theta = in[0];
  if (!fzTypeIsFloat(fzOnnxElt(theta)) || fzOnnxRank(theta) != 3 ||
      fzOnnxDim(theta, 1) != (int64_t)k ||
      fzOnnxDim(theta, 2) != (int64_t)k + 1)
    return fzOnnxError(im, "input #0 (theta) must be a float tensor of shape "
                           "[N, %zu, %zu]", k, k + 1);
  if (!fzOnnxRequireStatic(im, theta, "theta"))
    return false;
  int64_t batch = fzOnnxDim(theta, 0);
  if (size[0] != batch)
    return fzOnnxError(im, "'size' has batch %lld but theta %lld",
                       (long long)size[0], (long long)batch);
  int64_t positions, outShape[5];
  for (size_t i = 0; i < k; ++i) {
    if (!fzOnnxCheckDim(im, size[2 + i], "grid size"))
      return false;
    outShape[1 + i] = size[2 + i];
  }
  /* The grid's rows: checked as a product of dims by fzOnnxCheckBuilt. */
  if (!fzOnnxCheckBuilt(im, k, outShape + 1, "grid of positions",
                        &positions))
    return false;
  int64_t bshape[2] = {positions, (int64_t)k + 1};
  if (!fzOnnxCheckBuilt(im, 2, bshape, "grid of positions", NULL))
    return false;
  FzTensor *base = fzTensorCreate(im->ctx, fzOnnxElt(theta), 2, bshape);
  if (!base)
    return false;
  for (int64_t p = 0; p < positions; ++p) {
    int64_t rest = p;
    /* Row [x, y, z, 1]: x from the last dim (W), then H, then D. */
    for (size_t j = 0; j < k; ++j) {
      int64_t len = size[n - 1 - j];
      fzTensorSetF64(base, p * (int64_t)(k + 1) + (int64_t)j,
                     grid_coord(rest % len, len, align != 0));
      rest /= len;
    }
    fzTensorSetF64(base, p * (int64_t)(k + 1) + (int64_t)k, 1.0);
  }
  FzValue *b = fzOnnxConstTensor(im, base);
  fzTensorDestroy(base);
  FzValue *ops[2] = {b, theta};
  FzValue *y = fzOnnxEmit(im, "graph.matmul", 2, ops, NULL, "transpose_a",
                          fzBoolAttrGet(im->ctx, false), "transpose_b",
                          fzBoolAttrGet(im->ctx, true), NULL);
  outShape[0] = batch;
  outShape[1 + k] = (int64_t)k;
  out[0] = fzOnnxReshape(im, y, k + 2, outShape);
  return out[0] != NULL;
}

/*===--- The table -------------------------------------------------------===*/

const FzOnnxOpDef fzOnnxMiscOps[] = {
    {"Constant", h_constant, NULL,
     "value value_float value_floats value_int value_ints value_string "
     "value_strings sparse_value",
     0, 0, 1},
    {"ConstantOfShape", h_constant_of_shape, NULL, "value", 1, 1, 1},
    {"Shape", h_shape, NULL, "start end", 1, 1, 1},
    {"Size", h_size, NULL, "", 1, 1, 1},
    {"Range", h_range, NULL, "", 3, 3, 1},
    {"EyeLike", h_eye_like, NULL, "dtype k", 1, 1, 1},
    {"Trilu", h_trilu, NULL, "upper", 1, 2, 1},
    {"OneHot", h_one_hot, NULL, "axis", 3, 3, 1},
    {"GatherElements", h_gather_elements, NULL, "axis", 2, 2, 1},
    {"CumSum", h_cumsum, NULL, "exclusive reverse", 2, 2, 1},
    {"Einsum", h_einsum, NULL, "equation", 1, 8, 1},
    {"AffineGrid", h_affine_grid, NULL, "align_corners", 2, 2, 1},
    {"HannWindow", h_window, NULL, "output_datatype periodic", 1, 1, 1},
    {"HammingWindow", h_window, NULL, "output_datatype periodic", 1, 1, 1},
    {"BlackmanWindow", h_window, NULL, "output_datatype periodic", 1, 1, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

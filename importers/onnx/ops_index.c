/* importers/onnx/ops_index.c - ONNX ops that index with tensors of
 * positions: ScatterND and ScatterElements (and its old name Scatter) as
 * graph.scatter_nd, GatherND as graph.gather over the flattened data, and
 * TopK as ranks computed by comparisons.
 *
 * ScatterElements gives each update one index along `axis`; its full
 * index tuple (the update's own position elsewhere) is built from
 * constant iotas, so it becomes a graph.scatter_nd with whole-element
 * tuples. GatherND's tuples become linear positions: entry j of a tuple
 * is looked up in a constant table of (0..dim_j-1) * stride_j with
 * graph.gather (which wraps negative indices and reports those out of
 * range on every device), the lookups are added, and the batch dims add
 * their offset; the data is gathered along one flattened dim.
 *
 * ReverseSequence reverses the first sequence_lens[b] steps of each batch
 * entry: the time index it reads, t < len_b ? len_b - 1 - t : t, is
 * computed at run time from the lengths and a constant iota, made a flat
 * position over the (time, batch) dims, and graph.gather takes the rows
 * of the data flattened over them (a length beyond the time dim reads out
 * of range: a run-time error on every device).
 *
 * TopK along an axis of length n: element i ranks before j when it is
 * larger (smaller with largest = 0), or equal with a smaller index (so
 * ties keep their order, as ONNX asks), NaN counting as larger than every
 * number; rank_i = sum_j (j before i). Output r takes the element whose
 * rank is r: a select against the rank and a reduce_max (of values, and
 * of indices). So the result is always sorted, and the work is n^2
 * compares per row, fused into reductions by the fusion pass: meant for
 * the classifier heads and samplers of exported models, not for sorting
 * long rows (at most TOPK_MAX_AXIS elements).
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

/* The longest axis TopK ranks (n^2 compares per row). */
#define TOPK_MAX_AXIS 8192

static FzAttr *str_attr(FzOnnxImporter *im, const char *s) {
  return fzStringAttrGet(im->ctx, fzStringRefFromCString(s));
}

static FzAttr *i64_attr(FzOnnxImporter *im, int64_t v) {
  return fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), v);
}

/* The `reduction` attribute of ScatterND/ScatterElements: "add" and
 * "mul" from version 16, "max" and "min" from 18. */
static bool read_reduction(FzOnnxImporter *im, const char **out) {
  if (!fzOnnxAttrString(im, "reduction", "none", out))
    return false;
  const char *r = *out;
  bool v16 = !strcmp(r, "add") || !strcmp(r, "mul");
  bool v18 = !strcmp(r, "max") || !strcmp(r, "min");
  if (!v16 && !v18 && strcmp(r, "none"))
    return fzOnnxErrorAttrValue(im, "reduction", r);
  if (v18 && im->opVersion < 18)
    return fzOnnxError(im, "attribute 'reduction' value '%s' is not part "
                           "of %s-%d (only of versions from 18)",
                       r, im->node->op_type, im->opVersion);
  return true;
}

static FzValue *scatter(FzOnnxImporter *im, FzValue *data, FzValue *tuples,
                        FzValue *updates, const char *reduction) {
  FzValue *ops[3] = {data, tuples, updates};
  if (!strcmp(reduction, "none"))
    return fzOnnxEmit(im, "graph.scatter_nd", 3, ops, NULL, NULL);
  return fzOnnxEmit(im, "graph.scatter_nd", 3, ops, NULL, "reduction",
                    str_attr(im, reduction), NULL);
}

static bool h_scatter_nd(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                         FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  const char *reduction;
  if (!read_reduction(im, &reduction))
    return false;
  out[0] = scatter(im, in[0], in[1], in[2], reduction);
  return out[0] != NULL;
}

/* ScatterElements (and Scatter, its name before version 11). */
static bool h_scatter_elements(FzOnnxImporter *im, FzValue *const *in,
                               size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t axis;
  const char *reduction = "none";
  if (!fzOnnxAttrInt(im, "axis", 0, &axis) ||
      (strcmp(im->node->op_type, "Scatter") &&
       !read_reduction(im, &reduction)))
    return false;
  FzValue *data = in[0], *idx = in[1], *upd = in[2];
  size_t r = fzOnnxRank(data), ax;
  if (!fzOnnxNormAxis(im, axis, r, &ax))
    return false;
  if (fzOnnxRank(idx) != r || r + 1 > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "indices must have the rank of data");
  if (!fzOnnxRequireStatic(im, idx, "indices"))
    return false;
  for (size_t d = 0; d < r; ++d)
    if (d != ax && fzOnnxDim(data, d) != FZ_DYNAMIC &&
        fzOnnxDim(idx, d) > fzOnnxDim(data, d))
      return fzOnnxError(im, "indices dimension %zu (%lld) exceeds data's "
                             "(%lld)", d, (long long)fzOnnxDim(idx, d),
                         (long long)fzOnnxDim(data, d));
  /* Tuple entry d: the index along the axis, else the position. */
  int64_t ishape[FZ_GRAPH_MAX_RANK + 1];
  memcpy(ishape, fzOnnxShape(idx), r * sizeof *ishape);
  ishape[r] = 1;
  FzValue *ix = fzOnnxCast(im, idx, fzIntegerTypeGet(im->ctx, 64));
  FzValue *parts[FZ_GRAPH_MAX_RANK];
  for (size_t d = 0; d < r; ++d) {
    FzValue *c = d == ax ? ix
                         : fzOnnxBroadcastTo(
                               im, fzOnnxIota(im, r, d, ishape[d]), r,
                               ishape);
    parts[d] = fzOnnxReshape(im, c, r + 1, ishape);
  }
  FzValue *tuples = r == 1 ? parts[0]
                           : fzOnnxEmit(im, "graph.concat", r, parts, NULL,
                                        "axis", i64_attr(im, (int64_t)r),
                                        NULL);
  out[0] = scatter(im, data, tuples, upd, reduction);
  return out[0] != NULL;
}

static bool h_gather_nd(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                        FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t b;
  if (!fzOnnxAttrInt(im, "batch_dims", 0, &b))
    return false;
  FzValue *data = in[0], *idx = in[1];
  size_t r = fzOnnxRank(data), q = fzOnnxRank(idx);
  if (!fzOnnxRequireStatic(im, data, "data") ||
      !fzOnnxRequireStatic(im, idx, "indices"))
    return false;
  if (q < 1 || b < 0 || (size_t)b >= q || (size_t)b >= r)
    return fzOnnxError(im, "batch_dims %lld must be less than the ranks of "
                           "data (%zu) and indices (%zu)",
                       (long long)b, r, q);
  const int64_t *D = fzOnnxShape(data), *I = fzOnnxShape(idx);
  int64_t k = I[q - 1];
  if (k < 1 || (size_t)(b + k) > r)
    return fzOnnxError(im, "the index tuples have %lld entries; data of "
                           "rank %zu with %lld batch dims takes 1 to %lld",
                       (long long)k, r, (long long)b, (long long)r - b);
  for (int64_t i = 0; i < b; ++i)
    if (D[i] != I[i])
      return fzOnnxError(im, "batch dimension %lld of indices (%lld) "
                             "differs from data's (%lld)",
                         (long long)i, (long long)I[i], (long long)D[i]);
  size_t q1 = q - 1;
  /* lin = sum_j T_j[idx[..., j]], T_j = (0..D[b+j]-1) * stride_j. */
  FzValue *lin = NULL;
  int64_t stride = 1;
  for (int64_t j = k; j-- > 0;) {
    int64_t dim = D[b + j], tshape[1] = {dim};
    if (!fzOnnxCheckBuilt(im, 1, tshape, "index table", NULL))
      return false;
    int64_t *t = fzOnnxAlloc(im, (size_t)(dim ? dim : 1) * sizeof *t);
    if (!t)
      return false;
    for (int64_t v = 0; v < dim; ++v)
      t[v] = v * stride;
    int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK],
            strides[FZ_GRAPH_MAX_RANK];
    for (size_t d = 0; d < q; ++d) {
      limits[d] = I[d];
      strides[d] = 1;
    }
    starts[q1] = j;
    limits[q1] = j + 1;
    FzValue *ops[2] = {fzOnnxConstI64(im, 1, tshape, t),
                       fzOnnxSlice(im, idx, starts, limits, strides)};
    FzValue *g = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                            i64_attr(im, 0), NULL);
    lin = lin ? fzOnnxBinary(im, "graph.add", lin, g) : g;
    if (!fzOnnxMulI64(stride, dim, &stride))
      return fzOnnxError(im, "the indexed dims hold too many elements");
  }
  /* stride is now the element count of the indexed dims: the batch
   * offsets step by it. */
  int64_t batch = 1, lshape[FZ_GRAPH_MAX_RANK];
  for (size_t d = 0; d < q; ++d)
    lshape[d] = (int64_t)d < b ? I[d] : 1;
  for (int64_t d = 0; d < b; ++d)
    batch *= I[d];
  if (b > 0) {
    if (!fzOnnxCheckBuilt(im, q, lshape, "batch offset table", NULL))
      return false;
    int64_t *o = fzOnnxAlloc(im, (size_t)(batch ? batch : 1) * sizeof *o);
    if (!o)
      return false;
    for (int64_t v = 0; v < batch; ++v)
      o[v] = v * stride;
    lin = fzOnnxBinary(im, "graph.add", lin, fzOnnxConstI64(im, q, lshape, o));
  }
  lin = fzOnnxReshape(im, lin, q1, I);
  /* data as [batch * indexed, rest...]. */
  int64_t fshape[FZ_GRAPH_MAX_RANK];
  size_t fr = 0;
  int64_t flat;
  if (!fzOnnxMulI64(batch, stride, &flat))
    return fzOnnxError(im, "data holds too many elements");
  fshape[fr++] = flat;
  for (size_t d = (size_t)(b + k); d < r; ++d)
    fshape[fr++] = D[d];
  FzValue *ops[2] = {fzOnnxReshape(im, data, fr, fshape), lin};
  out[0] = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                      i64_attr(im, 0), NULL);
  return out[0] != NULL;
}

/*===--- TopK ------------------------------------------------------------===*/

/* isnan(x) as a compare (x != x); NULL for integers (no NaN). */
static FzValue *is_nan(FzOnnxImporter *im, FzValue *x) {
  return fzTypeIsFloat(fzOnnxElt(x)) ? fzOnnxCompare(im, "ne", x, x) : NULL;
}

/* a before b in the order TopK sorts by: a > b (largest) or a < b, with
 * NaN above every number. */
static FzValue *ahead(FzOnnxImporter *im, FzValue *a, FzValue *b,
                      bool largest) {
  FzValue *strict = fzOnnxCompare(im, largest ? "gt" : "lt", a, b);
  FzValue *na = is_nan(im, a), *nb = is_nan(im, b);
  if (!na)
    return strict;
  /* largest: NaN first (a NaN, b not); smallest: NaN last (b NaN). */
  FzValue *nanRule = largest ? fzOnnxBinary(im, "graph.and", na,
                                            fzOnnxUnary(im, "graph.not", nb))
                             : fzOnnxBinary(im, "graph.and", nb,
                                            fzOnnxUnary(im, "graph.not", na));
  return fzOnnxBinary(im, "graph.or", strict, nanRule);
}

/* a and b tie: equal, or both NaN. */
static FzValue *ties(FzOnnxImporter *im, FzValue *a, FzValue *b) {
  FzValue *eq = fzOnnxCompare(im, "eq", a, b);
  FzValue *na = is_nan(im, a), *nb = is_nan(im, b);
  if (!na)
    return eq;
  return fzOnnxBinary(im, "graph.or", eq,
                      fzOnnxBinary(im, "graph.and", na, nb));
}

/* The lowest value of elt: the fill that reduce_max ignores. */
static FzValue *lowest(FzOnnxImporter *im, FzType *elt) {
  if (fzTypeIsFloat(elt))
    return fzOnnxConstScalar(im, elt, -HUGE_VAL);
  unsigned w = fzTypeGetBitWidth(elt);
  double v = w == 1 ? 0 : -ldexp(1.0, (int)w - 1);
  return fzOnnxConstScalar(im, elt, v);
}

static bool h_topk(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t axis, largest, sorted, kk, *kv;
  size_t nk;
  if (!fzOnnxAttrInt(im, "axis", -1, &axis) ||
      !fzOnnxAttrInt(im, "largest", 1, &largest) ||
      !fzOnnxAttrInt(im, "sorted", 1, &sorted))
    return false;
  (void)sorted; /* the result is sorted either way, which ONNX allows */
  if (im->opVersion < 10) {
    if (!fzOnnxAttrInt(im, "k", -1, &kk))
      return false;
    if (!fzOnnxAttr(im, "k"))
      return fzOnnxError(im, "requires attribute 'k'");
  } else {
    if (nIn < 2 || !in[1])
      return fzOnnxError(im, "requires input #1 (k)");
    if (!fzOnnxGetConstInts(im, in[1], &kv, &nk) || nk != 1)
      return fzOnnxErrorNotConstant(im, 1, "k");
    kk = kv[0];
  }
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), ax;
  if (r == 0 || !fzOnnxNormAxis(im, axis, r, &ax))
    return r ? false : fzOnnxError(im, "the input must have rank 1 or more");
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  int64_t n = fzOnnxDim(x, ax);
  if (n > TOPK_MAX_AXIS)
    return fzOnnxError(im, "unsupported TopK over an axis of %lld elements "
                           "(at most %d: the ranks take n^2 compares)",
                       (long long)n, TOPK_MAX_AXIS);
  if (kk < 0 || kk > n)
    return fzOnnxError(im, "k (%lld) must be in [0, %lld], the length of "
                           "the axis", (long long)kk, (long long)n);
  if (r + 1 > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "unsupported rank %zu", r);
  /* The axis last: xt [..., n]. */
  int64_t perm[FZ_GRAPH_MAX_RANK], shape[FZ_GRAPH_MAX_RANK + 1];
  for (size_t d = 0, j = 0; d < r; ++d)
    if (d != ax)
      perm[j++] = (int64_t)d;
  perm[r - 1] = (int64_t)ax;
  FzValue *xt = ax == r - 1 ? x : fzOnnxTranspose(im, x, r, perm);
  if (!xt)
    return false;
  memcpy(shape, fzOnnxShape(xt), r * sizeof *shape);
  /* xi [..., n, 1] (element i), xj [..., 1, n] (element j). */
  shape[r] = 1;
  FzValue *xi = fzOnnxReshape(im, xt, r + 1, shape);
  shape[r - 1] = 1;
  shape[r] = n;
  FzValue *xj = fzOnnxReshape(im, xt, r + 1, shape);
  /* j before i: ahead(xj, xi), or a tie with j < i (a compare of two
   * iotas, folded when small). */
  FzValue *jl = fzOnnxCompare(im, "lt", fzOnnxIota(im, 2, 1, n),
                              fzOnnxIota(im, 2, 0, n));
  FzValue *before = fzOnnxBinary(
      im, "graph.or", ahead(im, xj, xi, largest != 0),
      fzOnnxBinary(im, "graph.and", ties(im, xj, xi), jl));
  FzType *i64 = fzIntegerTypeGet(im->ctx, 64);
  int64_t last = (int64_t)r;
  FzValue *rank = fzOnnxReduce(im, "graph.reduce_sum",
                               fzOnnxCast(im, before, i64), 1, &last, true);
  /* rank [..., n, 1] against 0..k-1 [k]: [..., n, k]. */
  FzValue *pick = fzOnnxCompare(im, "eq", rank, fzOnnxIota(im, 1, 0, kk));
  int64_t over = (int64_t)r - 1;
  FzValue *vals = fzOnnxReduce(
      im, "graph.reduce_max",
      fzOnnxSelect(im, pick, xi, lowest(im, fzOnnxElt(x))), 1, &over,
      false);
  FzValue *pos = fzOnnxReduce(
      im, "graph.reduce_max",
      fzOnnxSelect(im, pick, fzOnnxIota(im, 2, 0, n),
                   fzOnnxConstScalar(im, i64, -1)),
      1, &over, false);
  if (ax != r - 1) {
    /* Back: result dim d is xt's dim inv[d]. */
    int64_t inv[FZ_GRAPH_MAX_RANK];
    for (size_t d = 0; d < r; ++d)
      inv[perm[d]] = (int64_t)d;
    vals = fzOnnxTranspose(im, vals, r, inv);
    pos = fzOnnxTranspose(im, pos, r, inv);
  }
  out[0] = vals;
  if (nOut > 1)
    out[1] = pos;
  return vals && pos;
}

static bool h_reverse_sequence(FzOnnxImporter *im, FzValue *const *in,
                               size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t timeAxis, batchAxis;
  if (!fzOnnxAttrInt(im, "time_axis", 0, &timeAxis) ||
      !fzOnnxAttrInt(im, "batch_axis", 1, &batchAxis))
    return false;
  FzValue *x = in[0], *lens = in[1];
  size_t r = fzOnnxRank(x);
  if (r < 2 || !((timeAxis == 0 && batchAxis == 1) ||
                 (timeAxis == 1 && batchAxis == 0)))
    return fzOnnxError(im, "needs an input of rank >= 2 and time_axis, "
                           "batch_axis of 0 and 1 (or 1 and 0)");
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  const int64_t *X = fzOnnxShape(x);
  int64_t t = X[timeAxis], b = X[batchAxis];
  if (fzOnnxRank(lens) != 1 || fzOnnxDim(lens, 0) != b ||
      fzOnnxElt(lens) != fzIntegerTypeGet(im->ctx, 64))
    return fzOnnxError(im, "input #1 (sequence_lens) must be int64 of shape "
                           "[%lld] (the batch)", (long long)b);
  FzType *i64 = fzIntegerTypeGet(im->ctx, 64);
  /* [T, B] (time axis 0) or [B, T]: the time index each position reads. */
  int64_t lshape[2] = {timeAxis ? b : 1, timeAxis ? 1 : b};
  FzValue *len = fzOnnxReshape(im, lens, 2, lshape);
  FzValue *step = fzOnnxIota(im, 2, (size_t)timeAxis, t);
  FzValue *rev = fzOnnxBinary(
      im, "graph.sub",
      fzOnnxBinary(im, "graph.sub", len, fzOnnxConstScalar(im, i64, 1.0)),
      step);
  FzValue *src = fzOnnxSelect(im, fzOnnxCompare(im, "lt", step, len), rev,
                              step);
  /* Flat positions over the two leading dims: row * dim1 + col. */
  FzValue *flat =
      timeAxis ? fzOnnxBinary(im, "graph.add",
                              fzOnnxBinary(im, "graph.mul",
                                           fzOnnxIota(im, 2, 0, b),
                                           fzOnnxConstScalar(im, i64,
                                                             (double)t)),
                              src)
               : fzOnnxBinary(im, "graph.add",
                              fzOnnxBinary(im, "graph.mul", src,
                                           fzOnnxConstScalar(im, i64,
                                                             (double)b)),
                              fzOnnxIota(im, 2, 1, b));
  int64_t shape[FZ_GRAPH_MAX_RANK];
  shape[0] = X[0] * X[1];
  for (size_t i = 2; i < r; ++i)
    shape[i - 1] = X[i];
  FzValue *ops[2] = {fzOnnxReshape(im, x, r - 1, shape), flat};
  out[0] = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                      fzIntegerAttrGet(im->ctx, i64, 0), NULL);
  return out[0] != NULL;
}

const FzOnnxOpDef fzOnnxIndexOps[] = {
    {"ReverseSequence", h_reverse_sequence, NULL, "batch_axis time_axis", 2,
     2, 1},
    {"ScatterND", h_scatter_nd, NULL, "reduction>=16", 3, 3, 1},
    {"ScatterElements", h_scatter_elements, NULL, "axis reduction>=16", 3, 3,
     1},
    {"Scatter", h_scatter_elements, NULL, "axis", 3, 3, 1},
    {"GatherND", h_gather_nd, NULL, "batch_dims>=12", 2, 2, 1},
    {"TopK", h_topk, NULL, "axis k<10 largest>=11 sorted>=11", 1, 2, 2},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

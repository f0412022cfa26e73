/* importers/onnx/ops_reduce.c - ONNX reductions: ReduceSum, ReduceMean,
 * ReduceMax, ReduceMin, ReduceProd map onto graph.reduce_*; ReduceL1,
 * ReduceL2, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp are built
 * from them; ArgMax, ArgMin and Hardmax compare against the maximum and
 * pick the first (or last) index with a reduction over an index
 * constant.
 *
 * Axes come from the `axes` attribute, or (ReduceSum from version 13, the
 * others from version 18) from a second input that must be a constant. No
 * axes means every dim, unless noop_with_empty_axes is set, which makes
 * the op the identity. ReduceMax and ReduceMin take booleans from version
 * 20 (any and all), reduced as i32.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

/* The version from which an op takes its axes as input #1 (and has
 * noop_with_empty_axes): ReduceSum-13, the other reductions' 18. */
static int axes_input_since(const char *opType) {
  return !strcmp(opType, "ReduceSum") ? 13 : 18;
}

/* Reads the axes of a reduction: *all when none are given; *noop when
 * none are given and noop_with_empty_axes is set. The axes are an
 * attribute before axes_input_since, input #1 from it (the table's
 * attribute list rejects the attribute form where it does not belong). */
static bool read_axes(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      int64_t **axes, size_t *n, bool *all, bool *noop) {
  bool present;
  int64_t noopAttr;
  int since = axes_input_since(im->node->op_type);
  if (!fzOnnxAttrInts(im, "axes", axes, n, &present) ||
      !fzOnnxAttrInt(im, "noop_with_empty_axes", 0, &noopAttr))
    return false;
  if (nIn > 1 && in[1]) {
    if (im->opVersion < since)
      return fzOnnxError(im, "input #1 (axes) is not part of %s-%d (the "
                             "axes are an input from version %d, an "
                             "attribute before)", im->node->op_type,
                         im->opVersion, since);
    if (!fzOnnxGetConstInts(im, in[1], axes, n))
      return fzOnnxErrorNotConstant(im, 1, "axes");
    present = true;
  }
  *all = !present || *n == 0;
  *noop = *all && noopAttr;
  return true;
}

static bool h_reduce(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t *axes, keep;
  size_t n;
  bool all = false, noop = false;
  if (!read_axes(im, in, nIn, &axes, &n, &all, &noop) ||
      !fzOnnxAttrInt(im, "keepdims", 1, &keep))
    return false;
  FzValue *x = in[0];
  if (noop) {
    out[0] = x;
    return true;
  }
  size_t r = fzOnnxRank(x);
  int64_t norm[FZ_GRAPH_MAX_RANK];
  if (!all && n > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "unsupported %zu axes (at most %d)", n,
                       FZ_GRAPH_MAX_RANK);
  for (size_t i = 0; !all && i < n; ++i) {
    size_t a;
    if (!fzOnnxNormAxis(im, axes[i], r, &a))
      return false;
    norm[i] = (int64_t)a;
  }
  const int64_t *ax = all ? NULL : norm;
  const char *type = im->node->op_type + strlen("Reduce");
  FzValue *y;
  if (!strcmp(type, "L1")) {
    y = fzOnnxReduce(im, "graph.reduce_sum", fzOnnxUnary(im, "graph.abs", x),
                     n, ax, keep);
  } else if (!strcmp(type, "L2") || !strcmp(type, "SumSquare")) {
    y = fzOnnxReduce(im, "graph.reduce_sum",
                     fzOnnxBinary(im, "graph.mul", x, x), n, ax, keep);
    if (type[0] == 'L')
      y = fzOnnxUnary(im, "graph.sqrt", y);
  } else if (!strcmp(type, "LogSum")) {
    y = fzOnnxUnary(im, "graph.log",
                    fzOnnxReduce(im, "graph.reduce_sum", x, n, ax, keep));
  } else if (!strcmp(type, "LogSumExp")) {
    /* max + log(sum(exp(x - max))): no overflow for large inputs. */
    FzValue *m = fzOnnxReduce(im, "graph.reduce_max", x, n, ax, true);
    FzValue *s = fzOnnxReduce(
        im, "graph.reduce_sum",
        fzOnnxUnary(im, "graph.exp", fzOnnxBinary(im, "graph.sub", x, m)), n,
        ax, true);
    y = fzOnnxBinary(im, "graph.add", fzOnnxUnary(im, "graph.log", s), m);
    if (!keep && y) {
      int64_t shape[FZ_GRAPH_MAX_RANK];
      size_t k = 0;
      for (size_t i = 0; i < r; ++i) {
        bool reduced = all;
        for (size_t t = 0; !all && t < n; ++t)
          reduced = reduced || norm[t] == (int64_t)i;
        if (!reduced)
          shape[k++] = fzOnnxDim(x, i);
      }
      y = fzOnnxReshape(im, y, k, shape);
    }
  } else if (fzOnnxElt(x) == fzIntegerTypeGet(im->ctx, 1)) {
    /* Booleans (ReduceMax/Min from version 20: any/all) through i32. */
    if (strcmp(type, "Max") && strcmp(type, "Min"))
      return fzOnnxError(im, "unsupported boolean input (only ReduceMax "
                             "and ReduceMin take booleans)");
    FzType *i32 = fzIntegerTypeGet(im->ctx, 32);
    y = fzOnnxReduce(im, im->row->graphOp, fzOnnxCast(im, x, i32), n, ax,
                     keep);
    y = fzOnnxCompare(im, "ne", y, fzOnnxConstScalar(im, i32, 0));
  } else {
    y = fzOnnxReduce(im, im->row->graphOp, x, n, ax, keep);
  }
  out[0] = y;
  return y != NULL;
}

/*===--- ArgMax, ArgMin and Hardmax ---------------------------------------===*/

/* The index of the first (or last) extreme element along axis, as i64,
 * with the reduced dim kept. */
static FzValue *arg_extreme(FzOnnxImporter *im, FzValue *x, size_t axis,
                            bool isMax, bool last) {
  int64_t d = fzOnnxDim(x, axis), ax = (int64_t)axis;
  if (d == FZ_DYNAMIC) {
    fzOnnxError(im, "unsupported dynamic dimension along the axis");
    return NULL;
  }
  FzValue *m = fzOnnxReduce(im, isMax ? "graph.reduce_max"
                                      : "graph.reduce_min",
                            x, 1, &ax, true);
  FzValue *eq = fzOnnxCompare(im, "eq", x, m);
  FzValue *iota = fzOnnxIota(im, fzOnnxRank(x), axis, d);
  FzType *i64 = fzIntegerTypeGet(im->ctx, 64);
  FzValue *idx = fzOnnxSelect(im, eq, iota,
                              fzOnnxConstScalar(im, i64, last ? -1.0
                                                              : (double)d));
  return fzOnnxReduce(im, last ? "graph.reduce_max" : "graph.reduce_min",
                      idx, 1, &ax, true);
}

static bool h_arg(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t axis, keep, last;
  if (!fzOnnxAttrInt(im, "axis", 0, &axis) ||
      !fzOnnxAttrInt(im, "keepdims", 1, &keep) ||
      !fzOnnxAttrInt(im, "select_last_index", 0, &last))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), ax;
  if (!fzOnnxNormAxis(im, axis, r, &ax))
    return false;
  FzValue *y = arg_extreme(im, x, ax, !strcmp(im->node->op_type, "ArgMax"),
                           last != 0);
  if (y && !keep) {
    int64_t shape[FZ_GRAPH_MAX_RANK];
    size_t k = 0;
    for (size_t i = 0; i < r; ++i)
      if (i != ax)
        shape[k++] = fzOnnxDim(y, i);
    y = fzOnnxReshape(im, y, k, shape);
  }
  out[0] = y;
  return y != NULL;
}

static bool h_hardmax(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  bool old = im->opVersion < 13;
  int64_t axis;
  if (!fzOnnxAttrInt(im, "axis", old ? 1 : -1, &axis))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), ax;
  if (!fzOnnxNormAxis(im, axis, r, &ax))
    return false;
  FzValue *v = x;
  size_t vr = r, vax = ax;
  if (old && ax != r - 1) {
    /* Opsets < 13: over the flattened dims [axis, rank). */
    if (!fzOnnxRequireStatic(im, x, "the input"))
      return false;
    int64_t s[2] = {1, 1};
    for (size_t i = 0; i < r; ++i)
      s[i < ax ? 0 : 1] *= fzOnnxDim(x, i);
    v = fzOnnxReshape(im, x, 2, s);
    vr = 2;
    vax = 1;
  }
  FzValue *idx = v ? arg_extreme(im, v, vax, true, false) : NULL;
  FzValue *iota = v ? fzOnnxIota(im, vr, vax, fzOnnxDim(v, vax)) : NULL;
  FzValue *y = fzOnnxCast(im, fzOnnxCompare(im, "eq", iota, idx),
                          fzOnnxElt(x));
  if (y && vr != r)
    y = fzOnnxReshape(im, y, r, fzOnnxShape(x));
  out[0] = y;
  return y != NULL;
}

/*===--- The table -------------------------------------------------------===*/

#define REDUCE(type, op)                                                     \
  {type, h_reduce, op, "axes<18 keepdims noop_with_empty_axes>=18", 1, 2, 1}

const FzOnnxOpDef fzOnnxReduceOps[] = {
    {"ReduceSum", h_reduce, "graph.reduce_sum",
     "axes<13 keepdims noop_with_empty_axes>=13", 1, 2, 1},
    REDUCE("ReduceMean", "graph.reduce_mean"),
    REDUCE("ReduceMax", "graph.reduce_max"),
    REDUCE("ReduceMin", "graph.reduce_min"),
    REDUCE("ReduceProd", "graph.reduce_prod"),
    REDUCE("ReduceL1", NULL),
    REDUCE("ReduceL2", NULL),
    REDUCE("ReduceSumSquare", NULL),
    REDUCE("ReduceLogSum", NULL),
    REDUCE("ReduceLogSumExp", NULL),
    {"ArgMax", h_arg, NULL, "axis keepdims select_last_index", 1, 1, 1},
    {"ArgMin", h_arg, NULL, "axis keepdims select_last_index", 1, 1, 1},
    {"Hardmax", h_hardmax, NULL, "axis", 1, 1, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

/* importers/onnx/ops_shape.c - ONNX ops that move data: Reshape, Flatten,
 * Squeeze, Unsqueeze (all graph.reshape), Transpose, Concat, Split and
 * Slice (graph.slice), Gather, Expand (graph.broadcast), Tile, Pad,
 * CenterCropPad (slice and pad), DepthToSpace, SpaceToDepth and Identity.
 *
 * Operands that describe shapes (Reshape's shape, Slice's starts/ends/
 * axes/steps, Squeeze's axes from version 13, Split's split, Expand's
 * shape, Tile's repeats, Pad's pads and axes, CenterCropPad's shape) must
 * be constants at import time: initializers, Constant nodes, or shape
 * computations that folded. The attribute forms of older versions are
 * read as well. Split-18 takes num_outputs; Pad-18 pads only the dims its
 * `axes` input names, and Pad-19's wrap mode is a gather with a constant
 * index table.
 *
 * Slice bounds are clamped as ONNX specifies (start and end in [0, dim]
 * for positive steps, [-1, dim - 1] for negative ones) before they
 * become graph.slice's starts and limits.
 */
#include <limits.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

static FzAttr *i64_attr(FzOnnxImporter *im, int64_t v) {
  return fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), v);
}

/* Reads constant ints from input i, or from attribute `attr` (when
 * non-NULL and present). *present false when neither is given. */
static bool ints_from(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      size_t i, const char *attr, const char *what,
                      int64_t **vals, size_t *n, bool *present) {
  if (attr) {
    if (!fzOnnxAttrInts(im, attr, vals, n, present))
      return false;
    if (*present)
      return true;
  }
  *present = i < nIn && in[i];
  if (!*present) {
    *vals = NULL;
    *n = 0;
    return true;
  }
  if (!fzOnnxGetConstInts(im, in[i], vals, n))
    return fzOnnxErrorNotConstant(im, i, what);
  return true;
}

/*===--- Reshape family --------------------------------------------------===*/

static bool h_reshape(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t *s, allowZero;
  size_t n;
  bool present;
  if (!fzOnnxAttrInt(im, "allowzero", 0, &allowZero) ||
      !ints_from(im, in, nIn, 1, "shape", "shape", &s, &n, &present))
    return false;
  if (!present)
    return fzOnnxError(im, "requires a shape");
  FzValue *x = in[0];
  if (n > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "unsupported rank %zu", n);
  int64_t shape[FZ_GRAPH_MAX_RANK], known = 1;
  int infer = -1;
  for (size_t i = 0; i < n; ++i) {
    shape[i] = s[i];
    if (s[i] == 0 && !allowZero) {
      if (i >= fzOnnxRank(x))
        return fzOnnxError(im, "shape entry %zu is 0 but the input has rank "
                               "%zu", i, fzOnnxRank(x));
      shape[i] = fzOnnxDim(x, i);
    }
    if (shape[i] == -1) {
      if (infer >= 0)
        return fzOnnxError(im, "shape has more than one -1");
      infer = (int)i;
    } else if (shape[i] < 0) {
      return fzOnnxError(im, "shape entry %zu is %lld", i,
                         (long long)shape[i]);
    } else if (shape[i] == FZ_DYNAMIC) {
      return fzOnnxError(im, "unsupported dynamic dimension copied by "
                             "shape entry %zu", i);
    } else if (shape[i] > FZ_MAX_DIM ||
               !fzOnnxMulI64(known, shape[i], &known) ||
               known > FZ_MAX_ELEMENTS) {
      /* A zero entry later would not make such a shape valid: each entry
       * is a dimension. */
      return fzOnnxError(im, "shape entry %zu (%lld) makes the shape too "
                             "large (at most 2^40 per dimension and 2^48 "
                             "elements)", i, (long long)shape[i]);
    }
  }
  if (infer >= 0) {
    if (!fzOnnxRequireStatic(im, x, "the input"))
      return false;
    int64_t total = fzShapedTypeGetNumElements(fzValueGetType(x));
    if (known == 0 || total % known)
      return fzOnnxError(im, "cannot infer the -1 entry: %lld elements do "
                             "not divide into %lld", (long long)total,
                         (long long)known);
    shape[infer] = total / known;
  }
  out[0] = fzOnnxReshape(im, x, n, shape);
  return out[0] != NULL;
}

static bool h_flatten(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t axis;
  if (!fzOnnxAttrInt(im, "axis", 1, &axis))
    return false;
  FzValue *x = in[0];
  int64_t r = (int64_t)fzOnnxRank(x);
  if (axis < -r || axis > r)
    return fzOnnxError(im, "axis %lld is out of range for rank %lld",
                       (long long)axis, (long long)r);
  if (axis < 0)
    axis += r;
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  int64_t s[2] = {1, 1};
  for (int64_t i = 0; i < r; ++i)
    s[i < axis ? 0 : 1] *= fzOnnxDim(x, (size_t)i);
  out[0] = fzOnnxReshape(im, x, 2, s);
  return out[0] != NULL;
}

static bool h_squeeze(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t *axes;
  size_t n;
  bool present;
  if (!ints_from(im, in, nIn, 1, "axes", "axes", &axes, &n, &present))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  bool drop[FZ_GRAPH_MAX_RANK] = {false};
  for (size_t i = 0; i < n; ++i) {
    size_t a;
    if (!fzOnnxNormAxis(im, axes[i], r, &a))
      return false;
    if (fzOnnxDim(x, a) != 1 && fzOnnxDim(x, a) != FZ_DYNAMIC)
      return fzOnnxError(im, "cannot squeeze dimension %zu of size %lld", a,
                         (long long)fzOnnxDim(x, a));
    drop[a] = true;
  }
  if (!present || n == 0) {
    if (!fzOnnxRequireStatic(im, x, "the input"))
      return false;
    for (size_t i = 0; i < r; ++i)
      drop[i] = fzOnnxDim(x, i) == 1;
  }
  int64_t shape[FZ_GRAPH_MAX_RANK];
  size_t k = 0;
  for (size_t i = 0; i < r; ++i)
    if (!drop[i])
      shape[k++] = fzOnnxDim(x, i);
  out[0] = fzOnnxReshape(im, x, k, shape);
  return out[0] != NULL;
}

static bool h_unsqueeze(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                        FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t *axes;
  size_t n;
  bool present;
  if (!ints_from(im, in, nIn, 1, "axes", "axes", &axes, &n, &present))
    return false;
  if (!present)
    return fzOnnxError(im, "requires axes");
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), outRank = r + n;
  if (outRank > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "unsupported result rank %zu", outRank);
  bool ins[FZ_GRAPH_MAX_RANK] = {false};
  for (size_t i = 0; i < n; ++i) {
    size_t a;
    if (!fzOnnxNormAxis(im, axes[i], outRank, &a))
      return false;
    if (ins[a])
      return fzOnnxError(im, "axes repeat %zu", a);
    ins[a] = true;
  }
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0, k = 0; i < outRank; ++i)
    shape[i] = ins[i] ? 1 : fzOnnxDim(x, k++);
  out[0] = fzOnnxReshape(im, x, outRank, shape);
  return out[0] != NULL;
}

static bool h_identity(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  (void)im;
  (void)nIn;
  (void)nOut;
  out[0] = in[0];
  return true;
}

/*===--- Transpose, Concat, Split, Slice ----------------------------------===*/

static bool h_transpose(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                        FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t *p, perm[FZ_GRAPH_MAX_RANK];
  size_t n;
  bool present;
  if (!fzOnnxAttrInts(im, "perm", &p, &n, &present))
    return false;
  size_t r = fzOnnxRank(in[0]);
  if (present && n != r)
    return fzOnnxError(im, "attribute 'perm' has %zu entries for rank %zu",
                       n, r);
  for (size_t i = 0; i < r; ++i)
    perm[i] = present ? p[i] : (int64_t)(r - 1 - i);
  out[0] = fzOnnxTranspose(im, in[0], r, perm);
  return out[0] != NULL;
}

static bool h_concat(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t axis;
  if (!fzOnnxAttrInt(im, "axis", 0, &axis))
    return false;
  if (!fzOnnxAttr(im, "axis"))
    return fzOnnxError(im, "requires attribute 'axis'");
  for (size_t i = 0; i < nIn; ++i)
    if (!in[i])
      return fzOnnxError(im, "input #%zu is absent", i);
  if (nIn == 1) {
    out[0] = in[0];
    return true;
  }
  out[0] = fzOnnxEmit(im, "graph.concat", nIn, in, NULL, "axis",
                      i64_attr(im, axis), NULL);
  return out[0] != NULL;
}

static bool h_split(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  int64_t axis, *split;
  size_t n;
  bool present;
  if (!fzOnnxAttrInt(im, "axis", 0, &axis) ||
      !ints_from(im, in, nIn, 1, "split", "split", &split, &n, &present))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), ax;
  if (!fzOnnxNormAxis(im, axis, r, &ax))
    return false;
  int64_t d = fzOnnxDim(x, ax);
  if (d == FZ_DYNAMIC)
    return fzOnnxError(im, "unsupported dynamic dimension along the axis");
  if (nOut == 0) /* the chunk size below divides by it */
    return fzOnnxError(im, "requires at least one output");
  if (present && n != nOut)
    return fzOnnxError(im, "'split' has %zu entries for %zu outputs", n,
                       nOut);
  /* Version 18: num_outputs equal chunks (the last one smaller when the
   * dim does not divide), instead of the 'split' sizes. Without either,
   * the node's outputs are the chunks, as before. */
  if (fzOnnxAttr(im, "num_outputs")) {
    int64_t numOutputs;
    if (!fzOnnxAttrInt(im, "num_outputs", 0, &numOutputs))
      return false;
    if (present)
      return fzOnnxError(im, "takes 'split' or 'num_outputs', not both");
    if (numOutputs != (int64_t)nOut)
      return fzOnnxError(im, "attribute 'num_outputs' (%lld) differs from "
                             "the number of outputs (%zu)",
                         (long long)numOutputs, nOut);
  }
  int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK];
  int64_t strides[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    limits[i] = fzOnnxDim(x, i), strides[i] = 1;
  int64_t at = 0, chunk = (d + (int64_t)nOut - 1) / (int64_t)nOut;
  for (size_t k = 0; k < nOut; ++k) {
    int64_t len = present ? split[k] : chunk;
    if (!present && at + len > d)
      len = d - at;
    if (len < 0 || len > d - at)
      return fzOnnxError(im, "the split sizes do not add up to dimension "
                             "%zu (%lld)", ax, (long long)d);
    starts[ax] = at;
    limits[ax] = at + len;
    out[k] = fzOnnxSlice(im, x, starts, limits, strides);
    if (!out[k])
      return false;
    at += len;
  }
  if (present && at != d)
    return fzOnnxError(im, "the split sizes add up to %lld, not %lld",
                       (long long)at, (long long)d);
  return true;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

static bool h_slice(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nOut;
  bool old = im->opVersion < 10;
  int64_t *st, *en, *ax = NULL, *sp = NULL;
  size_t ns, ne, na = 0, nsp = 0;
  bool ps, pe, pa, psp = false;
  if (old) {
    if (!fzOnnxAttrInts(im, "starts", &st, &ns, &ps) ||
        !fzOnnxAttrInts(im, "ends", &en, &ne, &pe) ||
        !fzOnnxAttrInts(im, "axes", &ax, &na, &pa))
      return false;
  } else if (!ints_from(im, in, nIn, 1, NULL, "starts", &st, &ns, &ps) ||
             !ints_from(im, in, nIn, 2, NULL, "ends", &en, &ne, &pe) ||
             !ints_from(im, in, nIn, 3, NULL, "axes", &ax, &na, &pa) ||
             !ints_from(im, in, nIn, 4, NULL, "steps", &sp, &nsp, &psp)) {
    return false;
  }
  if (!ps || !pe || ns != ne || (pa && na != ns) || (psp && nsp != ns))
    return fzOnnxError(im, "starts, ends, axes and steps must have the same "
                           "length");
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK];
  int64_t strides[FZ_GRAPH_MAX_RANK];
  bool seen[FZ_GRAPH_MAX_RANK] = {false};
  for (size_t i = 0; i < r; ++i)
    limits[i] = fzOnnxDim(x, i), strides[i] = 1;
  for (size_t i = 0; i < ns; ++i) {
    size_t a;
    if (!fzOnnxNormAxis(im, pa ? ax[i] : (int64_t)i, r, &a))
      return false;
    if (seen[a])
      return fzOnnxError(im, "axes repeat %zu", a);
    seen[a] = true;
    int64_t d = fzOnnxDim(x, a), step = psp ? sp[i] : 1;
    if (d == FZ_DYNAMIC)
      return fzOnnxError(im, "unsupported dynamic dimension %zu", a);
    if (step == 0)
      return fzOnnxError(im, "step %zu is 0", i);
    /* A step past the dimension takes the start element only, as one of
     * d does: capped, so that no later -step or count overflows. */
    int64_t maxStep = d > 0 ? d : 1;
    step = step > maxStep ? maxStep : (step < -maxStep ? -maxStep : step);
    int64_t s = st[i], e = en[i];
    if (s < 0)
      s = s < -d ? -d - 1 : s + d;
    if (e < 0)
      e = e < -d ? -d - 1 : e + d;
    if (step > 0) {
      s = clamp64(s, 0, d);
      e = clamp64(e, 0, d);
      if (e < s)
        e = s;
    } else {
      s = clamp64(s, 0, d - 1);
      e = clamp64(e, -1, d - 1);
      if (e > s)
        e = s;
    }
    starts[a] = s;
    limits[a] = e;
    strides[a] = step;
  }
  out[0] = fzOnnxSlice(im, x, starts, limits, strides);
  return out[0] != NULL;
}

/*===--- Gather, Expand, Tile ---------------------------------------------===*/

static bool h_gather(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t axis;
  if (!fzOnnxAttrInt(im, "axis", 0, &axis))
    return false;
  out[0] = fzOnnxEmit(im, "graph.gather", 2, in, NULL, "axis",
                      i64_attr(im, axis), NULL);
  return out[0] != NULL;
}

static bool h_expand(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t *s;
  size_t n;
  bool present;
  if (!ints_from(im, in, nIn, 1, NULL, "shape", &s, &n, &present))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), outRank = r > n ? r : n;
  if (outRank > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "unsupported result rank %zu", outRank);
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < outRank; ++i) {
    int64_t a = i + r >= outRank ? fzOnnxDim(x, i + r - outRank) : 1;
    int64_t b = i + n >= outRank ? s[i + n - outRank] : 1;
    if (!fzOnnxCheckDim(im, b, "shape entry"))
      return false;
    if (a != 1 && b != 1 && a != b)
      return fzOnnxError(im, "shape entry %lld does not broadcast with "
                             "input dimension %lld", (long long)b,
                         (long long)a);
    shape[i] = a == 1 ? b : a;
  }
  out[0] = fzOnnxBroadcastTo(im, x, outRank, shape);
  return out[0] != NULL;
}

static bool h_tile(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t *rep;
  size_t n;
  bool present;
  if (!ints_from(im, in, nIn, 1, NULL, "repeats", &rep, &n, &present))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  if (n != r)
    return fzOnnxError(im, "'repeats' has %zu entries for rank %zu", n, r);
  if (2 * r > FZ_GRAPH_MAX_RANK)
    return fzOnnxError(im, "unsupported rank %zu", r);
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  /* [d0, d1] -> [1, d0, 1, d1] -> [r0, d0, r1, d1] -> [r0*d0, r1*d1]. */
  int64_t a[FZ_GRAPH_MAX_RANK], b[FZ_GRAPH_MAX_RANK], c[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i) {
    if (rep[i] < 0)
      return fzOnnxError(im, "repeat %zu is negative", i);
    a[2 * i] = 1;
    b[2 * i] = rep[i];
    a[2 * i + 1] = b[2 * i + 1] = fzOnnxDim(x, i);
    if (!fzOnnxMulI64(rep[i], fzOnnxDim(x, i), &c[i]) ||
        c[i] > FZ_MAX_DIM)
      return fzOnnxError(im, "repeat %zu (%lld) makes dimension %zu too "
                             "large (at most 2^40)", i, (long long)rep[i],
                         i);
  }
  FzValue *y = fzOnnxReshape(im, x, 2 * r, a);
  y = fzOnnxBroadcastTo(im, y, 2 * r, b);
  out[0] = fzOnnxReshape(im, y, r, c);
  return out[0] != NULL;
}

/*===--- Pad -------------------------------------------------------------===*/

/* Edge and reflect padding along one axis, by slices and a concat. */
static FzValue *pad_axis(FzOnnxImporter *im, FzValue *x, size_t axis,
                         int64_t lo, int64_t hi, bool reflect) {
  size_t r = fzOnnxRank(x);
  int64_t d = fzOnnxDim(x, axis);
  if ((reflect && (lo >= d || hi >= d)) || d == 0) {
    fzOnnxError(im, "unsupported padding: %lld and %lld around a dimension "
                    "of %lld", (long long)lo, (long long)hi, (long long)d);
    return NULL;
  }
  int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK];
  int64_t strides[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    limits[i] = fzOnnxDim(x, i), strides[i] = 1;
  FzValue *parts[3];
  size_t np = 0;
  for (int side = 0; side < 2; ++side) {
    int64_t count = side ? hi : lo;
    if (count <= 0) {
      if (side == 0)
        parts[np++] = x;
      continue;
    }
    FzValue *p;
    if (reflect) {
      /* Left: x[lo], ..., x[1]; right: x[d-2], ..., x[d-1-hi]. */
      starts[axis] = side ? d - 2 : count;
      limits[axis] = side ? d - 2 - count : 0;
      strides[axis] = -1;
      p = fzOnnxSlice(im, x, starts, limits, strides);
    } else {
      int64_t shape[FZ_GRAPH_MAX_RANK];
      starts[axis] = side ? d - 1 : 0;
      limits[axis] = starts[axis] + 1;
      strides[axis] = 1;
      p = fzOnnxSlice(im, x, starts, limits, strides);
      memcpy(shape, fzOnnxShape(x), r * sizeof *shape);
      shape[axis] = count;
      p = fzOnnxBroadcastTo(im, p, r, shape);
    }
    parts[np++] = p;
    if (side == 0)
      parts[np++] = x;
  }
  if (np == 1)
    return x;
  return fzOnnxEmit(im, "graph.concat", np, parts, NULL, "axis",
                    i64_attr(im, (int64_t)axis), NULL);
}

/* Wrap padding along one axis (Pad-19): output j reads input
 * (j - lo) mod d, through a gather with a constant index table (pads
 * larger than the dim wrap around more than once). */
static FzValue *wrap_axis(FzOnnxImporter *im, FzValue *x, size_t axis,
                          int64_t lo, int64_t hi) {
  int64_t d = fzOnnxDim(x, axis), n;
  if (lo == 0 && hi == 0)
    return x;
  if (d == 0) {
    fzOnnxError(im, "cannot wrap-pad dimension %zu of size 0", axis);
    return NULL;
  }
  /* lo, hi >= 0 (checked by the caller). */
  if (!fzOnnxAddI64(d, lo, &n) || !fzOnnxAddI64(n, hi, &n))
    n = INT64_MAX;
  if (!fzOnnxCheckDim(im, n, "padded dimension") ||
      !fzOnnxCheckBuilt(im, 1, &n, "index table", NULL))
    return NULL;
  int64_t *idx = fzOnnxAlloc(im, (size_t)(n ? n : 1) * sizeof *idx);
  if (!idx)
    return NULL;
  for (int64_t j = 0; j < n; ++j) {
    int64_t s = (j - lo) % d; /* 0 <= lo < n <= 2^40: no overflow */
    idx[j] = s < 0 ? s + d : s;
  }
  FzValue *ops[2] = {x, fzOnnxConstI64(im, 1, &n, idx)};
  return fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                    i64_attr(im, (int64_t)axis), NULL);
}

/* Pad-18's axes (input #3): spreads pads given for those axes over every
 * dim of a rank-r tensor, into full[2r] (zeros elsewhere). */
static bool spread_pads(FzOnnxImporter *im, FzValue *axesIn, size_t r,
                        const int64_t *pads, size_t n, int64_t *full) {
  int64_t *axes;
  size_t na;
  if (!fzOnnxGetConstInts(im, axesIn, &axes, &na))
    return fzOnnxErrorNotConstant(im, 3, "axes");
  if (n != 2 * na)
    return fzOnnxError(im, "'pads' needs %zu entries (2 per axis in "
                           "'axes')", 2 * na);
  bool seen[FZ_GRAPH_MAX_RANK] = {false};
  for (size_t i = 0; i < 2 * r; ++i)
    full[i] = 0;
  for (size_t i = 0; i < na; ++i) {
    size_t a;
    if (!fzOnnxNormAxis(im, axes[i], r, &a))
      return false;
    if (seen[a])
      return fzOnnxError(im, "'axes' names dimension %zu twice", a);
    seen[a] = true;
    full[a] = pads[i];
    full[r + a] = pads[na + i];
  }
  return true;
}

static bool h_pad(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nOut;
  const char *mode;
  int64_t *pads;
  size_t n;
  bool present;
  double value = 0;
  if (!fzOnnxAttrString(im, "mode", "constant", &mode))
    return false;
  if (im->opVersion < 11) {
    if (!fzOnnxAttrInts(im, "pads", &pads, &n, &present) ||
        !fzOnnxAttrFloat(im, "value", 0.0, &value))
      return false;
  } else {
    if (!ints_from(im, in, nIn, 1, NULL, "pads", &pads, &n, &present))
      return false;
    if (nIn > 2 && in[2]) {
      double *v;
      size_t nv;
      if (!fzOnnxGetConstFloats(im, in[2], &v, &nv) || nv != 1)
        return fzOnnxErrorNotConstant(im, 2, "constant_value");
      value = v[0];
    }
  }
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  int64_t full[2 * FZ_GRAPH_MAX_RANK];
  if (nIn > 3 && in[3]) {
    if (im->opVersion < 18)
      return fzOnnxError(im, "input #3 (axes) is not part of Pad-%d (it is "
                             "from version 18)", im->opVersion);
    if (!present)
      return fzOnnxError(im, "requires 'pads'");
    if (!spread_pads(im, in[3], r, pads, n, full))
      return false;
    pads = full;
    n = 2 * r;
  }
  if (!present || n != 2 * r)
    return fzOnnxError(im, "'pads' needs %zu entries", 2 * r);
  bool reflect = !strcmp(mode, "reflect");
  bool wrap = !strcmp(mode, "wrap");
  if (wrap && im->opVersion < 19)
    return fzOnnxError(im, "attribute 'mode' value 'wrap' is not part of "
                           "Pad-%d (only of versions from 19)",
                       im->opVersion);
  if (!strcmp(mode, "constant")) {
    FzValue *y = x;
    bool any = false;
    for (size_t i = 0; i < n; ++i)
      any = any || pads[i];
    if (any)
      y = fzOnnxEmit(im, "graph.pad", 1, &x, NULL, "pads",
                     fzDenseArrayAttrGet(im->ctx,
                                         fzIntegerTypeGet(im->ctx, 64), n,
                                         pads),
                     "value", fzOnnxFloatAttr(im, value), NULL);
    out[0] = y;
    return y != NULL;
  }
  if (!reflect && !wrap && strcmp(mode, "edge"))
    return fzOnnxErrorAttrValue(im, "mode", mode);
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  FzValue *y = x;
  for (size_t i = 0; y && i < r; ++i) {
    if (pads[i] < 0 || pads[r + i] < 0)
      return fzOnnxError(im, "unsupported negative pads in mode '%s'", mode);
    y = wrap ? wrap_axis(im, y, i, pads[i], pads[r + i])
             : pad_axis(im, y, i, pads[i], pads[r + i], reflect);
  }
  out[0] = y;
  return y != NULL;
}

/*===--- CenterCropPad (18) ----------------------------------------------===*/

/* Each dim named by `axes` (every dim by default) becomes its size in
 * `shape`: a centred slice when smaller (the window starts rounded down),
 * zeros on both sides when larger (the odd one at the end). */
static bool h_center_crop_pad(FzOnnxImporter *im, FzValue *const *in,
                              size_t nIn, FzValue **out, size_t nOut) {
  (void)nOut;
  int64_t *shape, *axes;
  size_t n, na;
  bool present, hasAxes;
  if (!ints_from(im, in, nIn, 1, NULL, "shape", &shape, &n, &present) ||
      !fzOnnxAttrInts(im, "axes", &axes, &na, &hasAxes))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  if (!hasAxes)
    na = r;
  if (n != na)
    return fzOnnxError(im, "'shape' needs %zu entries", na);
  int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK];
  int64_t strides[FZ_GRAPH_MAX_RANK], pads[2 * FZ_GRAPH_MAX_RANK] = {0};
  bool seen[FZ_GRAPH_MAX_RANK] = {false}, anyPad = false;
  for (size_t i = 0; i < r; ++i)
    limits[i] = fzOnnxDim(x, i), strides[i] = 1;
  for (size_t i = 0; i < na; ++i) {
    size_t a = i;
    if (hasAxes && !fzOnnxNormAxis(im, axes[i], r, &a))
      return false;
    if (seen[a])
      return fzOnnxError(im, "attribute 'axes' names dimension %zu twice",
                         a);
    seen[a] = true;
    int64_t d = fzOnnxDim(x, a), t = shape[i];
    if (d == FZ_DYNAMIC)
      return fzOnnxError(im, "unsupported dynamic dimension %zu", a);
    if (!fzOnnxCheckDim(im, t, "target size"))
      return false;
    if (t < d) {
      starts[a] = (d - t) / 2;
      limits[a] = starts[a] + t;
    } else if (t > d) {
      pads[a] = (t - d) / 2;
      pads[r + a] = t - d - pads[a];
      anyPad = true;
    }
  }
  FzValue *y = fzOnnxSlice(im, x, starts, limits, strides);
  if (y && anyPad)
    y = fzOnnxEmit(im, "graph.pad", 1, &y, NULL, "pads",
                   fzDenseArrayAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64),
                                       2 * r, pads),
                   "value", fzOnnxFloatAttr(im, 0), NULL);
  out[0] = y;
  return y != NULL;
}

/*===--- DepthToSpace and SpaceToDepth ------------------------------------===*/

static bool h_depth_space(FzOnnxImporter *im, FzValue *const *in,
                          size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t b;
  const char *mode;
  if (!fzOnnxAttrInt(im, "blocksize", 0, &b) ||
      !fzOnnxAttrString(im, "mode", "DCR", &mode))
    return false;
  FzValue *x = in[0];
  if (b < 1)
    return fzOnnxError(im, "requires attribute 'blocksize' >= 1");
  if (fzOnnxRank(x) != 4 || !fzOnnxRequireStatic(im, x, "the input"))
    return fzOnnxRank(x) == 4 ? false
                              : fzOnnxError(im, "input must have rank 4");
  int64_t N = fzOnnxDim(x, 0), C = fzOnnxDim(x, 1), H = fzOnnxDim(x, 2),
          W = fzOnnxDim(x, 3), bb, hb, wb, cbb;
  /* The shapes below multiply dims (at most 2^40) by the blocksize. */
  if (!fzOnnxMulI64(b, b, &bb) || !fzOnnxMulI64(H, b, &hb) ||
      !fzOnnxMulI64(W, b, &wb) || !fzOnnxMulI64(C, bb, &cbb))
    return fzOnnxError(im, "attribute 'blocksize' (%lld) is too large for "
                           "the input", (long long)b);
  FzValue *y;
  if (!strcmp(im->node->op_type, "DepthToSpace")) {
    bool crd = !strcmp(mode, "CRD");
    if (!crd && strcmp(mode, "DCR"))
      return fzOnnxErrorAttrValue(im, "mode", mode);
    if (C % bb)
      return fzOnnxError(im, "channels (%lld) are not a multiple of "
                             "blocksize^2", (long long)C);
    int64_t c = C / bb;
    int64_t s1[6] = {N, b, b, c, H, W}, s1c[6] = {N, c, b, b, H, W};
    int64_t p[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3};
    int64_t s2[4] = {N, c, hb, wb};
    y = fzOnnxReshape(im, x, 6, crd ? s1c : s1);
    y = fzOnnxTranspose(im, y, 6, crd ? pc : p);
    y = fzOnnxReshape(im, y, 4, s2);
  } else {
    if (H % b || W % b)
      return fzOnnxError(im, "spatial dims are not multiples of blocksize");
    int64_t s1[6] = {N, C, H / b, b, W / b, b};
    int64_t p[6] = {0, 3, 5, 1, 2, 4};
    int64_t s2[4] = {N, cbb, H / b, W / b};
    y = fzOnnxReshape(im, x, 6, s1);
    y = fzOnnxTranspose(im, y, 6, p);
    y = fzOnnxReshape(im, y, 4, s2);
  }
  out[0] = y;
  return y != NULL;
}

/*===--- The table -------------------------------------------------------===*/

const FzOnnxOpDef fzOnnxShapeOps[] = {
    {"Reshape", h_reshape, NULL, "allowzero shape", 1, 2, 1},
    {"Flatten", h_flatten, NULL, "axis", 1, 1, 1},
    {"Squeeze", h_squeeze, NULL, "axes<13", 1, 2, 1},
    {"Unsqueeze", h_unsqueeze, NULL, "axes<13", 1, 2, 1},
    {"Identity", h_identity, NULL, "", 1, 1, 1},
    {"Transpose", h_transpose, NULL, "perm", 1, 1, 1},
    {"Concat", h_concat, NULL, "axis", 1, -1, 1},
    {"Split", h_split, NULL, "axis split<13 num_outputs>=18", 1, 2, 64},
    {"Slice", h_slice, NULL, "starts ends axes", 1, 5, 1},
    {"Gather", h_gather, NULL, "axis", 2, 2, 1},
    {"Expand", h_expand, NULL, "", 2, 2, 1},
    {"Tile", h_tile, NULL, "", 2, 2, 1},
    {"Pad", h_pad, NULL, "mode pads<11 value<11", 1, 4, 1},
    {"CenterCropPad", h_center_crop_pad, NULL, "axes", 2, 2, 1},
    {"DepthToSpace", h_depth_space, NULL, "blocksize mode", 1, 1, 1},
    {"SpaceToDepth", h_depth_space, NULL, "blocksize", 1, 1, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

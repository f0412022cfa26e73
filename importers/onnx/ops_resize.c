/* importers/onnx/ops_resize.c - ONNX Resize (opsets 10 to 13) and
 * Upsample, decomposed axis by axis, since the graph dialect has no
 * resize op:
 *
 *   nearest        graph.gather along the axis with constant indices;
 *   linear, cubic  a matmul along the axis with a constant [in, out]
 *                  interpolation matrix (each output column holds the 2
 *                  or 4 weights of its neighbours; neighbours beyond the
 *                  edge take the edge value, as ONNX's reference pads).
 *
 * The coordinate transformation modes (half_pixel, pytorch_half_pixel,
 * align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize),
 * nearest modes, cubic_coeff_a and exclude_outside follow the ONNX
 * specification and its reference implementation. tf_crop_and_resize
 * outputs that fall outside the input take extrapolation_value through a
 * constant mask. Scales, sizes and roi must be constants.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

typedef struct ResizeMode {
  int kind;             /* 0 nearest, 1 linear, 2 cubic */
  const char *coord;    /* coordinate_transformation_mode */
  const char *nearest;  /* nearest_mode */
  double cubicA;
  bool excludeOutside;
  bool antialias;       /* Resize-18: linear and cubic widen when shrinking */
} ResizeMode;

/* The input coordinate of output coordinate x along one axis. As in
 * ONNX's reference, the output width is in * scale, which need not be an
 * integer (it is the output size when sizes are given); outInt is the
 * output size. */
static double source_coord(const ResizeMode *m, double x, int64_t in,
                           int64_t outInt, double scale, const double *roi) {
  const char *c = m->coord;
  double out = (double)in * scale;
  if (!strcmp(c, "half_pixel_symmetric")) {
    /* Resize-19: the centre of the input maps to the centre of the
     * output, which differs from half_pixel when in * scale is not an
     * integer. */
    double offset = (double)in / 2 * (1 - (double)outInt / out);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (!strcmp(c, "align_corners"))
    return out == 1 ? 0.0 : x * (double)(in - 1) / (out - 1);
  if (!strcmp(c, "asymmetric"))
    return x / scale;
  if (!strcmp(c, "tf_crop_and_resize")) {
    double span = (roi[1] - roi[0]) * (double)(in - 1);
    double v = out == 1 ? span / 2 : x * span / (out - 1);
    return v + roi[0] * (double)(in - 1);
  }
  if (!strcmp(c, "pytorch_half_pixel"))
    return out == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (!strcmp(c, "tf_half_pixel_for_nn"))
    return (x + 0.5) / scale;
  return (x + 0.5) / scale - 0.5; /* half_pixel */
}

/* v limited to [-4, in + 4] (NaN to -4), so that it converts to int64:
 * beyond that every neighbour of v is clamped to the same edge, and
 * lies outside the input, whatever v is. */
static double clamp_coord(double v, int64_t in) {
  if (!(v >= -4))
    return -4;
  return v > (double)in + 4 ? (double)in + 4 : v;
}

static int64_t clamp_index(int64_t i, int64_t in) {
  return i < 0 ? 0 : (i >= in ? in - 1 : i);
}

/* The nearest input index of coordinate v. */
static int64_t nearest_index(const ResizeMode *m, double v, int64_t in) {
  double fl = floor(clamp_coord(v, in)), ratio = clamp_coord(v, in) - fl;
  int64_t base = (int64_t)fl;
  bool up;
  if (ratio == 0)
    up = false;
  else if (!strcmp(m->nearest, "round_prefer_ceil"))
    up = ratio >= 0.5;
  else if (!strcmp(m->nearest, "floor"))
    up = false;
  else if (!strcmp(m->nearest, "ceil"))
    up = true;
  else /* round_prefer_floor */
    up = ratio > 0.5;
  return clamp_index(base + (up ? 1 : 0), in);
}

static void cubic_coeffs(double t, double a, double *c) {
  c[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
  c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  c[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a;
}

/* The Keys cubic kernel at distance x. */
static double cubic_kernel(double x, double a) {
  x = fabs(x);
  if (x <= 1)
    return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2)
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

/* Antialiased weights (Resize-18, antialias = 1) of output j at input
 * coordinate v: the linear or cubic filter stretched by 1 / scale when
 * shrinking, over the 2 - 2 * start inputs around v, normalized to sum 1
 * (then, with exclude_outside, those outside the input dropped and the
 * rest normalized again), as ONNX's reference computes them. */
static void antialias_column(const ResizeMode *m, double v, double scale,
                             int64_t in, int64_t out, int64_t j,
                             double *mat) {
  double s = scale < 1 ? scale : 1;
  int64_t start = (int64_t)floor((m->kind == 1 ? -1 : -2) / s) + 1;
  /* At most 8 * in + 2 inputs: s >= 1 / (2 * in) when an output exists. */
  int64_t n = 2 - 2 * start;
  /* v beyond the input by more than the footprint reads the edge only. */
  double lim = (double)n + 4;
  v = !(v >= -lim) ? -lim : (v > (double)in + lim ? (double)in + lim : v);
  /* The inputs base + start .. base + start + n - 1, with the ratio in
   * (0, 1] (an integer v counts as the end of the interval before it). */
  double base = ceil(v) - 1, t = v - base;
  double sum = 0, kept = 0;
  for (int64_t k = 0; k < n; ++k) {
    double x = ((double)(start + k) - t) * s;
    sum += m->kind == 1 ? fmax(0, 1 - fabs(x)) : cubic_kernel(x, m->cubicA);
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t k = 0; k < n; ++k) {
      int64_t i = (int64_t)base + start + k;
      double x = ((double)(start + k) - t) * s;
      double c = (m->kind == 1 ? fmax(0, 1 - fabs(x))
                               : cubic_kernel(x, m->cubicA)) /
                 sum;
      if (m->excludeOutside && (i < 0 || i >= in))
        c = 0;
      if (pass == 0)
        kept += c;
      else if (kept != 0)
        mat[clamp_index(i, in) * out + j] +=
            m->excludeOutside ? c / kept : c;
    }
  }
}

/* Fills column j of the [in, out] matrix mat (row-major) with the
 * weights of output j. */
static void interp_column(const ResizeMode *m, double v, double scale,
                          int64_t in, int64_t out, int64_t j, double *mat) {
  if (m->antialias) {
    antialias_column(m, v, scale, in, out, j, mat);
    return;
  }
  v = clamp_coord(v, in);
  double fl = floor(v), t = v - fl, c[4];
  int64_t base = (int64_t)fl, n;
  if (m->kind == 1) {
    c[0] = 1 - t;
    c[1] = t;
    n = 2;
  } else {
    cubic_coeffs(t, m->cubicA, c);
    base -= 1;
    n = 4;
  }
  if (m->excludeOutside) {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      if (base + k < 0 || base + k >= in)
        c[k] = 0;
      sum += c[k];
    }
    for (int64_t k = 0; k < n && sum != 0; ++k)
      c[k] /= sum;
  }
  for (int64_t k = 0; k < n; ++k)
    mat[clamp_index(base + k, in) * out + j] += c[k];
}

/* Resizes x along axis from its size to `out`. valid[j] is cleared for
 * outputs outside the input (tf_crop_and_resize). */
static FzValue *resize_axis(FzOnnxImporter *im, FzValue *x, size_t axis,
                            int64_t out, double scale, const double *roi,
                            const ResizeMode *m, bool *valid) {
  int64_t in = fzOnnxDim(x, axis), shape[2] = {in, out};
  size_t r = fzOnnxRank(x);
  bool crop = !strcmp(m->coord, "tf_crop_and_resize");
  /* Nearest builds `out` indices; linear and cubic an [in, out] matrix. */
  bool nearest = m->kind == 0;
  if (!fzOnnxCheckBuilt(im, nearest ? 1 : 2, nearest ? &out : shape,
                        nearest ? "index table" : "interpolation matrix",
                        NULL))
    return NULL;
  for (int64_t j = 0; j < out; ++j) {
    double v = source_coord(m, (double)j, in, out, scale, roi);
    valid[j] = !crop || (v >= 0 && v <= (double)(in - 1));
  }
  if (m->kind == 0) {
    int64_t *idx = fzOnnxAlloc(im, (size_t)(out ? out : 1) * sizeof *idx);
    if (!idx)
      return NULL;
    for (int64_t j = 0; j < out; ++j)
      idx[j] = nearest_index(
          m, source_coord(m, (double)j, in, out, scale, roi), in);
    FzValue *ops[2] = {x, fzOnnxConstI64(im, 1, &out, idx)};
    return fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                      fzIntegerAttrGet(im->ctx,
                                       fzIntegerTypeGet(im->ctx, 64),
                                       (int64_t)axis),
                      NULL);
  }
  FzTensor *t = fzTensorCreate(im->ctx, fzOnnxElt(x), 2, shape);
  size_t cells = (size_t)(in * out);
  double *mat = fzOnnxAlloc(im, (cells ? cells : 1) * sizeof *mat);
  if (!t || !mat) {
    fzTensorDestroy(t);
    return NULL;
  }
  memset(mat, 0, cells * sizeof *mat);
  for (int64_t j = 0; j < out; ++j)
    interp_column(m, source_coord(m, (double)j, in, out, scale, roi), scale,
                  in, out, j, mat);
  for (int64_t i = 0; i < in * out; ++i)
    fzTensorSetF64(t, i, mat[i]);
  FzValue *w = fzOnnxConstTensor(im, t);
  fzTensorDestroy(t);
  int64_t perm[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    perm[i] = (int64_t)i;
  perm[axis] = (int64_t)r - 1;
  perm[r - 1] = (int64_t)axis;
  FzValue *y = fzOnnxTranspose(im, x, r, perm);
  y = fzOnnxBinary(im, "graph.matmul", y, w);
  return fzOnnxTranspose(im, y, r, perm);
}

/* Resize-18's `axes`: normalized into ax[0..*na) (every dim, in order,
 * when absent). */
static bool read_resize_axes(FzOnnxImporter *im, size_t r, size_t *ax,
                             size_t *na) {
  int64_t *axes;
  size_t n;
  bool present;
  if (!fzOnnxAttrInts(im, "axes", &axes, &n, &present))
    return false;
  if (!present) {
    for (size_t i = 0; i < r; ++i)
      ax[i] = i;
    *na = r;
    return true;
  }
  if (n > r)
    return fzOnnxError(im, "attribute 'axes' has %zu entries for rank %zu",
                       n, r);
  bool seen[FZ_GRAPH_MAX_RANK] = {false};
  for (size_t i = 0; i < n; ++i) {
    if (!fzOnnxNormAxis(im, axes[i], r, &ax[i]))
      return false;
    if (seen[ax[i]])
      return fzOnnxError(im, "attribute 'axes' names dimension %zu twice",
                         ax[i]);
    seen[ax[i]] = true;
  }
  *na = n;
  return true;
}

static bool h_resize(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nOut;
  bool upsample = !strcmp(im->node->op_type, "Upsample");
  bool legacy = upsample || im->opVersion < 11;
  const char *mode, *policy;
  double extrap, cubicA;
  int64_t exclude, antialias;
  ResizeMode m;
  if (!fzOnnxAttrString(im, "mode", "nearest", &mode) ||
      !fzOnnxAttrString(im, "coordinate_transformation_mode",
                        legacy ? "asymmetric" : "half_pixel", &m.coord) ||
      !fzOnnxAttrString(im, "nearest_mode",
                        legacy ? "floor" : "round_prefer_floor",
                        &m.nearest) ||
      !fzOnnxAttrFloat(im, "cubic_coeff_a", -0.75, &cubicA) ||
      !fzOnnxAttrInt(im, "exclude_outside", 0, &exclude) ||
      !fzOnnxAttrFloat(im, "extrapolation_value", 0.0, &extrap) ||
      !fzOnnxAttrInt(im, "antialias", 0, &antialias) ||
      !fzOnnxAttrString(im, "keep_aspect_ratio_policy", "stretch", &policy))
    return false;
  m.cubicA = cubicA;
  m.excludeOutside = exclude != 0;
  if (!strcmp(mode, "nearest"))
    m.kind = 0;
  else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear"))
    m.kind = 1;
  else if (!strcmp(mode, "cubic") && !legacy)
    m.kind = 2;
  else
    return fzOnnxErrorAttrValue(im, "mode", mode);
  /* Nearest has no filter to widen: antialias changes nothing there. */
  if (antialias != 0 && antialias != 1)
    return fzOnnxError(im, "attribute 'antialias' must be 0 or 1, got %lld",
                       (long long)antialias);
  m.antialias = antialias && m.kind != 0;
  static const char *const coords[] = {
      "half_pixel",         "pytorch_half_pixel", "align_corners",
      "asymmetric",         "tf_half_pixel_for_nn", "tf_crop_and_resize",
      "half_pixel_symmetric"};
  bool known = false;
  for (size_t i = 0; i < sizeof coords / sizeof coords[0]; ++i)
    known = known || !strcmp(m.coord, coords[i]);
  if (!strcmp(m.coord, "half_pixel_symmetric") && im->opVersion < 19)
    return fzOnnxError(im, "attribute 'coordinate_transformation_mode' "
                           "value 'half_pixel_symmetric' is not part of "
                           "Resize-%d (only of versions from 19)",
                       im->opVersion);
  if (!known)
    return fzOnnxErrorAttrValue(im, "coordinate_transformation_mode",
                                m.coord);
  int keepAspect = !strcmp(policy, "stretch")       ? 0
                   : !strcmp(policy, "not_larger")  ? 1
                   : !strcmp(policy, "not_smaller") ? 2
                                                    : -1;
  if (keepAspect < 0)
    return fzOnnxErrorAttrValue(im, "keep_aspect_ratio_policy", policy);
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), ax[FZ_GRAPH_MAX_RANK], na = 0;
  if (!fzOnnxRequireStatic(im, x, "the input") ||
      !read_resize_axes(im, r, ax, &na))
    return false;
  /* Scales, sizes and roi, given for the axes (every dim by default) and
   * spread over every dim: the others keep their size. */
  size_t scalesAt = legacy ? 1 : 2, n;
  double *given = NULL, scaleAll[FZ_GRAPH_MAX_RANK];
  double roiAll[2 * FZ_GRAPH_MAX_RANK], *roi = NULL, *scales = NULL;
  int64_t *sizesGiven = NULL, sizeAll[FZ_GRAPH_MAX_RANK], *sizes = NULL;
  if (upsample && im->opVersion < 9) {
    bool present;
    if (!fzOnnxAttrFloats(im, "scales", &given, &n, &present))
      return false;
    if (!present || n != r)
      return fzOnnxError(im, "requires attribute 'scales' with %zu "
                             "entries", r);
  } else if (scalesAt < nIn && in[scalesAt] &&
             fzShapedTypeGetNumElements(fzValueGetType(in[scalesAt])) > 0) {
    if (!fzOnnxGetConstFloats(im, in[scalesAt], &given, &n))
      return fzOnnxErrorNotConstant(im, scalesAt, "scales");
    if (n != na)
      return fzOnnxError(im, "'scales' needs %zu entries", na);
  }
  if (!legacy && nIn > 3 && in[3]) {
    if (!fzOnnxGetConstInts(im, in[3], &sizesGiven, &n))
      return fzOnnxErrorNotConstant(im, 3, "sizes");
    if (n != na)
      return fzOnnxError(im, "'sizes' needs %zu entries", na);
  }
  if (!given && !sizesGiven)
    return fzOnnxError(im, "requires 'scales' or 'sizes'");
  for (size_t i = 0; i < r; ++i) {
    scaleAll[i] = 1.0;
    sizeAll[i] = fzOnnxDim(x, i);
    roiAll[i] = 0;
    roiAll[r + i] = 1;
  }
  for (size_t i = 0; i < na; ++i) {
    if (given)
      scaleAll[ax[i]] = given[i];
    if (sizesGiven)
      sizeAll[ax[i]] = sizesGiven[i];
  }
  scales = given ? scaleAll : NULL;
  sizes = sizesGiven ? sizeAll : NULL;
  if (!strcmp(m.coord, "tf_crop_and_resize")) {
    double *roiGiven;
    if (nIn < 2 || !in[1] ||
        !fzOnnxGetConstFloats(im, in[1], &roiGiven, &n))
      return fzOnnxErrorNotConstant(im, 1, "roi");
    if (n != 2 * na)
      return fzOnnxError(im, "'roi' needs %zu entries", 2 * na);
    for (size_t i = 0; i < n; ++i)
      if (!isfinite(roiGiven[i]))
        return fzOnnxError(im, "'roi' entry %zu is %g: it must be finite", i,
                           roiGiven[i]);
    for (size_t i = 0; i < na; ++i) {
      roiAll[ax[i]] = roiGiven[i];
      roiAll[r + ax[i]] = roiGiven[na + i];
    }
    roi = roiAll;
  }
  /* keep_aspect_ratio_policy (Resize-18, with sizes): one scale for every
   * resized axis, the smallest (not_larger) or largest (not_smaller) of
   * sizes / input; each such axis becomes round(scale * input), halves
   * up. */
  double keepScale = 0;
  bool resized[FZ_GRAPH_MAX_RANK] = {false};
  for (size_t i = 0; i < na; ++i)
    resized[ax[i]] = true;
  if (sizes && keepAspect) {
    for (size_t i = 0; i < na; ++i) {
      int64_t d = fzOnnxDim(x, ax[i]);
      if (d == 0)
        return fzOnnxError(im, "cannot keep the aspect ratio of dimension "
                               "%zu of size 0", ax[i]);
      if (!fzOnnxCheckDim(im, sizes[ax[i]], "requested output size"))
        return false;
      double sc = (double)sizes[ax[i]] / (double)d;
      if (i == 0 || (keepAspect == 1 ? sc < keepScale : sc > keepScale))
        keepScale = sc;
    }
    for (size_t i = 0; i < na; ++i) {
      char what[64];
      snprintf(what, sizeof what, "the output size of dimension %zu",
               ax[i]);
      if (!fzOnnxFloatToInt(
              im, floor(keepScale * (double)fzOnnxDim(x, ax[i]) + 0.5), 0,
              FZ_MAX_DIM, what, &sizes[ax[i]]))
        return false;
    }
  }
  int64_t outShape[FZ_GRAPH_MAX_RANK];
  bool *valid[FZ_GRAPH_MAX_RANK];
  bool anyInvalid = false;
  FzValue *y = x;
  for (size_t a = 0; y && a < r; ++a) {
    int64_t inSize = fzOnnxDim(x, a);
    double scale;
    char what[64];
    snprintf(what, sizeof what, "the output size of dimension %zu", a);
    if (sizes) {
      if (!fzOnnxCheckDim(im, sizes[a], what))
        return false;
      outShape[a] = sizes[a];
      scale = inSize ? (double)sizes[a] / (double)inSize : 1.0;
      /* The common scale of keep_aspect_ratio_policy on the resized
       * axes: coordinates follow it, not the rounded size. */
      if (keepScale > 0 && resized[a])
        scale = keepScale;
    } else {
      /* A scale of 1e30 or NaN must not reach the conversion to int64. */
      scale = scales[a];
      if (!(scale > 0) || !isfinite(scale))
        return fzOnnxError(im, "scale %g of dimension %zu must be positive "
                               "and finite", scale, a);
      if (!fzOnnxFloatToInt(im, floor((double)inSize * scale), 0,
                            FZ_MAX_DIM, what, &outShape[a]))
        return false;
    }
    if (!(scale > 0))
      return fzOnnxError(im, "invalid size 0 for dimension %zu of size "
                             "%lld", a, (long long)inSize);
    double axisRoi[2] = {0, 1};
    if (roi) {
      axisRoi[0] = roi[a];
      axisRoi[1] = roi[r + a];
    }
    bool identity = !roi && outShape[a] == inSize && scale == 1.0;
    valid[a] = NULL; /* every output is inside the input */
    if (identity)
      continue;
    /* Each output reads the input: an empty one has nothing to read. */
    if (inSize == 0 && outShape[a] > 0)
      return fzOnnxError(im, "cannot resize dimension %zu of size 0 to "
                             "%lld", a, (long long)outShape[a]);
    /* resize_axis builds a constant of at least `out` elements. */
    if (!fzOnnxCheckBuilt(im, 1, &outShape[a],
                          m.kind == 0 ? "index table"
                                      : "interpolation matrix",
                          NULL))
      return false;
    valid[a] = fzOnnxAlloc(im, (size_t)(outShape[a] ? outShape[a] : 1));
    if (!valid[a])
      return false;
    y = resize_axis(im, y, a, outShape[a], scale, axisRoi, &m, valid[a]);
    for (int64_t j = 0; y && j < outShape[a]; ++j)
      anyInvalid = anyInvalid || !valid[a][j];
  }
  if (y && anyInvalid &&
      !fzOnnxCheckBuilt(im, r, outShape, "extrapolation mask", NULL))
    return false;
  if (y && anyInvalid) {
    FzTensor *mask = fzTensorCreate(im->ctx, fzIntegerTypeGet(im->ctx, 1), r,
                                    outShape);
    if (!mask)
      return false;
    for (int64_t i = 0; i < mask->numElements; ++i) {
      int64_t rest = i;
      bool ok = true;
      for (size_t a = r; a-- > 0;) {
        ok = ok && (!valid[a] || valid[a][rest % outShape[a]]);
        rest /= outShape[a];
      }
      fzTensorSetI64(mask, i, ok);
    }
    FzValue *mv = fzOnnxConstTensor(im, mask);
    fzTensorDestroy(mask);
    y = fzOnnxSelect(im, mv, y, fzOnnxConstScalar(im, fzOnnxElt(x), extrap));
  }
  out[0] = y;
  return y != NULL;
}

const FzOnnxOpDef fzOnnxResizeOps[] = {
    {"Resize", h_resize, NULL,
     "antialias>=18 axes>=18 coordinate_transformation_mode cubic_coeff_a "
     "exclude_outside extrapolation_value keep_aspect_ratio_policy>=18 mode "
     "nearest_mode",
     1, 4, 1},
    {"Upsample", h_resize, NULL, "mode scales", 1, 2, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

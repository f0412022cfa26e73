/* importers/onnx/ops_roialign.c - RoiAlign (10, 16) as graph ops that
 * compute the sample positions at run time from the regions.
 *
 * Each region r of `rois` ([R, 4]: x1, y1, x2, y2, scaled by
 * spatial_scale, shifted by -0.5 in half_pixel mode; at least 1 x 1 in
 * output_half_pixel mode, RoiAlign-10's only one) is cut into
 * output_height x output_width bins of sampling_ratio^2 samples each. The
 * sample coordinates are the region's start plus its bin size times a
 * constant table of offsets (bin + (sample + 0.5) / ratio), [R, S] per
 * axis. Each is interpolated bilinearly as ONNX's reference does: a
 * coordinate below -1 or above the size contributes 0; otherwise it is
 * clamped at 0, and one at or past size - 1 reads the last row (column)
 * twice. The four corners are graph.gather rows of the input transposed
 * to [N * H * W, C] at flat positions (batch index * H + y) * W + x, times
 * the weights; "avg" sums the corners and averages a bin's samples, "max"
 * takes the largest weighted corner and the largest sample (the
 * reference's definition). The batch index is looked up in 0..N-1 first,
 * so one out of range is a run-time error.
 *
 * sampling_ratio 0 (as many samples as the region's size in bins, per
 * region) makes the sample count depend on the data: refused.
 */
#include <string.h>

#include "importers/onnx/onnx_internal.h"

typedef struct Axis {
  FzValue *lo, *hi; /* int64 positions of the two neighbours */
  FzValue *wlo, *whi; /* their weights (0 outside the valid range) */
} Axis;

static FzValue *scalar(FzOnnxImporter *im, FzType *elt, double v) {
  return fzOnnxConstScalar(im, elt, v);
}

static FzValue *bin(FzOnnxImporter *im, const char *op, FzValue *a,
                    FzValue *b) {
  return fzOnnxBinary(im, op, a, b);
}

/* The neighbours and weights of coordinates v along a dim of size d. */
static Axis interp_axis(FzOnnxImporter *im, FzValue *v, int64_t d) {
  FzType *elt = fzOnnxElt(v), *i64 = fzIntegerTypeGet(im->ctx, 64);
  FzValue *zero = scalar(im, elt, 0), *one = scalar(im, elt, 1);
  FzValue *last = scalar(im, elt, (double)(d - 1));
  FzValue *valid = bin(im, "graph.and",
                       fzOnnxCompare(im, "ge", v, scalar(im, elt, -1)),
                       fzOnnxCompare(im, "le", v, scalar(im, elt, (double)d)));
  FzValue *v0 = bin(im, "graph.max", v, zero);
  FzValue *lo = fzOnnxUnary(im, "graph.floor", v0);
  FzValue *top = fzOnnxCompare(im, "ge", lo, last);
  lo = fzOnnxSelect(im, top, last, lo);
  FzValue *hi = fzOnnxSelect(im, top, last, bin(im, "graph.add", lo, one));
  FzValue *v1 = fzOnnxSelect(im, top, lo, v0);
  FzValue *l = bin(im, "graph.sub", v1, lo);
  FzValue *h = bin(im, "graph.sub", one, l);
  Axis a = {fzOnnxCast(im, lo, i64), fzOnnxCast(im, hi, i64),
            fzOnnxSelect(im, valid, h, zero),
            fzOnnxSelect(im, valid, l, zero)};
  return a;
}

/* Column c of rois [R, 4] as [R, 1]. */
static FzValue *roi_column(FzOnnxImporter *im, FzValue *rois, int64_t r,
                           int64_t c) {
  int64_t starts[2] = {0, c}, limits[2] = {r, c + 1}, steps[2] = {1, 1};
  return fzOnnxSlice(im, rois, starts, limits, steps);
}

/* The constant [1, bins * ratio] of bin + (sample + 0.5) / ratio. */
static FzValue *offsets(FzOnnxImporter *im, FzType *elt, int64_t bins,
                        int64_t ratio) {
  int64_t shape[2] = {1, bins * ratio};
  FzTensor *t = fzTensorCreate(im->ctx, elt, 2, shape);
  if (!t)
    return NULL;
  for (int64_t s = 0; s < bins * ratio; ++s)
    fzTensorSetF64(t, s, (double)(s / ratio) +
                             ((double)(s % ratio) + 0.5) / (double)ratio);
  FzValue *v = fzOnnxConstTensor(im, t);
  fzTensorDestroy(t);
  return v;
}

static bool h_roi_align(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                        FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0], *rois = in[1], *bi = in[2];
  const char *mode, *ctm = "output_half_pixel";
  int64_t oh, ow, ratio;
  double scale;
  if (!fzOnnxAttrString(im, "mode", "avg", &mode) ||
      !fzOnnxAttrInt(im, "output_height", 1, &oh) ||
      !fzOnnxAttrInt(im, "output_width", 1, &ow) ||
      !fzOnnxAttrInt(im, "sampling_ratio", 0, &ratio) ||
      !fzOnnxAttrFloat(im, "spatial_scale", 1.0, &scale) ||
      (im->opVersion >= 16 &&
       !fzOnnxAttrString(im, "coordinate_transformation_mode", "half_pixel",
                         &ctm)))
    return false;
  bool isMax = !strcmp(mode, "max"), half = !strcmp(ctm, "half_pixel");
  if (!isMax && strcmp(mode, "avg"))
    return fzOnnxErrorAttrValue(im, "mode", mode);
  if (!half && strcmp(ctm, "output_half_pixel"))
    return fzOnnxErrorAttrValue(im, "coordinate_transformation_mode", ctm);
  if (ratio <= 0)
    return fzOnnxError(im, "unsupported sampling_ratio %lld: an adaptive "
                           "ratio (0) makes the sample count depend on the "
                           "regions' values", (long long)ratio);
  if (oh < 1 || ow < 1 || oh > FZ_MAX_DIM || ow > FZ_MAX_DIM ||
      ratio > FZ_MAX_DIM)
    return fzOnnxError(im, "attributes 'output_height', 'output_width' and "
                           "'sampling_ratio' must be in [1, 2^40]");
  if (fzOnnxRank(x) != 4)
    return fzOnnxError(im, "input must have rank 4");
  if (!fzOnnxRequireStatic(im, x, "the input") ||
      !fzOnnxRequireStatic(im, rois, "the regions"))
    return false;
  FzType *elt = fzOnnxElt(x), *i64 = fzIntegerTypeGet(im->ctx, 64);
  const int64_t *X = fzOnnxShape(x);
  int64_t n = X[0], c = X[1], h = X[2], w = X[3];
  int64_t r = fzOnnxDim(rois, 0);
  if (!fzTypeIsFloat(elt) || fzOnnxRank(rois) != 2 ||
      fzOnnxDim(rois, 1) != 4 || fzOnnxElt(rois) != elt)
    return fzOnnxError(im, "needs a float input and rois [R, 4] of its "
                           "type");
  if (fzOnnxRank(bi) != 1 || fzOnnxDim(bi, 0) != r ||
      fzOnnxElt(bi) != i64)
    return fzOnnxError(im, "input #2 (batch_indices) must be int64 of "
                           "shape [%lld]", (long long)r);
  int64_t sy, sx, count, tshape[2];
  if (!fzOnnxMulI64(oh, ratio, &sy) || !fzOnnxMulI64(ow, ratio, &sx) ||
      !fzOnnxMulI64(r, sy, &count) || !fzOnnxMulI64(count, sx, &count) ||
      !fzOnnxMulI64(count, c, &count) || count > FZ_MAX_ELEMENTS)
    return fzOnnxError(im, "unsupported RoiAlign of more than 2^48 "
                           "samples");
  tshape[0] = 1, tshape[1] = sy > sx ? sy : sx;
  if (!fzOnnxCheckBuilt(im, 2, tshape, "sample offsets", NULL))
    return false;
  /* Region starts and bin sizes, [R, 1] each. */
  FzValue *sc = scalar(im, elt, scale), *off = scalar(im, elt, half ? 0.5 : 0);
  FzValue *cs[4];
  for (int64_t k = 0; k < 4; ++k)
    cs[k] = bin(im, "graph.sub",
                bin(im, "graph.mul", roi_column(im, rois, r, k), sc), off);
  FzValue *rw = bin(im, "graph.sub", cs[2], cs[0]);
  FzValue *rh = bin(im, "graph.sub", cs[3], cs[1]);
  if (!half) {
    rw = bin(im, "graph.max", rw, scalar(im, elt, 1));
    rh = bin(im, "graph.max", rh, scalar(im, elt, 1));
  }
  FzValue *bw = bin(im, "graph.div", rw, scalar(im, elt, (double)ow));
  FzValue *bh = bin(im, "graph.div", rh, scalar(im, elt, (double)oh));
  FzValue *ys = bin(im, "graph.add", cs[1],
                    bin(im, "graph.mul", bh, offsets(im, elt, oh, ratio)));
  FzValue *xs = bin(im, "graph.add", cs[0],
                    bin(im, "graph.mul", bw, offsets(im, elt, ow, ratio)));
  int64_t yshape[3] = {r, sy, 1}, xshape[3] = {r, 1, sx};
  Axis ay = interp_axis(im, fzOnnxReshape(im, ys, 3, yshape), h);
  Axis ax = interp_axis(im, fzOnnxReshape(im, xs, 3, xshape), w);
  /* (batch * H + y) * W + x over the input as [N * H * W, C]. */
  FzValue *gops[2] = {fzOnnxIota(im, 1, 0, n), bi};
  FzValue *b = fzOnnxEmit(im, "graph.gather", 2, gops, NULL, "axis",
                          fzIntegerAttrGet(im->ctx, i64, 0), NULL);
  int64_t bshape[3] = {r, 1, 1}, perm[4] = {0, 2, 3, 1}, flat[2];
  flat[0] = n * h * w, flat[1] = c;
  FzValue *base = bin(im, "graph.mul", fzOnnxReshape(im, b, 3, bshape),
                      fzOnnxConstScalar(im, i64, (double)(h * w)));
  FzValue *rows = fzOnnxReshape(im, fzOnnxTranspose(im, x, 4, perm), 2, flat);
  FzValue *wv = fzOnnxConstScalar(im, i64, (double)w);
  FzValue *yv[2] = {ay.lo, ay.hi}, *wy[2] = {ay.wlo, ay.whi};
  FzValue *xv[2] = {ax.lo, ax.hi}, *wx[2] = {ax.wlo, ax.whi};
  int64_t wshape[4] = {r, sy, sx, 1};
  FzValue *acc = NULL;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      FzValue *pos = bin(im, "graph.add",
                         bin(im, "graph.add", base,
                             bin(im, "graph.mul", yv[i], wv)),
                         xv[j]);
      FzValue *ops[2] = {rows, pos};
      FzValue *g = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                              fzIntegerAttrGet(im->ctx, i64, 0), NULL);
      FzValue *wt = fzOnnxReshape(im, bin(im, "graph.mul", wy[i], wx[j]), 4,
                                  wshape);
      FzValue *term = bin(im, "graph.mul", g, wt);
      acc = !acc ? term : bin(im, isMax ? "graph.max" : "graph.add", acc,
                              term);
      if (!acc)
        return false;
    }
  int64_t split[6] = {r, oh, ratio, ow, ratio, c}, axes[2] = {2, 4};
  acc = fzOnnxReshape(im, acc, 6, split);
  acc = fzOnnxReduce(im, isMax ? "graph.reduce_max" : "graph.reduce_sum",
                     acc, 2, axes, false);
  if (!isMax)
    acc = bin(im, "graph.div", acc,
              scalar(im, elt, (double)ratio * (double)ratio));
  int64_t back[4] = {0, 3, 1, 2};
  out[0] = fzOnnxTranspose(im, acc, 4, back);
  return out[0] != NULL;
}

const FzOnnxOpDef fzOnnxRoiAlignOps[] = {
    {"RoiAlign", h_roi_align, NULL,
     "coordinate_transformation_mode>=16 mode output_height output_width "
     "sampling_ratio spatial_scale",
     3, 3, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

/* importers/onnx/ops_sample.c - GridSample: sampling the input at
 * coordinates computed from data, with graph.gather.
 *
 * GridSample-16 (4-D input [N, C, H, W], grid [N, Ho, Wo, 2] of (x, y)
 * in [-1, 1]) as PyTorch's grid_sample computes it, which is what ONNX's
 * definition and test data follow (GridSample-20's modes linear and cubic
 * are the same on 4-D inputs; its N-D inputs are unsupported):
 * - the grid is unnormalized to pixel coordinates (align_corners: -1 and
 *   1 are the corner pixels' centres; else their outer edges);
 * - bilinear and nearest apply the padding mode to the coordinate:
 *   border clamps it to [0, size-1], reflection reflects it about the
 *   borders (the pixel centres with align_corners, else the edges) and
 *   then clamps; bicubic applies it to each of the 4x4 integer taps;
 * - a tap outside the input reads 0 (padding_mode zeros);
 * - nearest rounds half to even; bilinear weighs the 2x2 taps by their
 *   distances; bicubic the 4x4 taps by Keys' cubic with A = -0.75.
 * Each tap is one graph.gather from the input flattened to 1-D, at the
 * index ((n*C + c)*H + y)*W + x (the batch and channel offsets a constant
 * table), its coordinates cast to i64 after the taps outside the input
 * are replaced by 0 (and their values masked to 0), so no index is ever
 * out of range or converted from a non-finite float.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

typedef struct Sampler {
  FzOnnxImporter *im;
  FzType *elt;
  int64_t n, c, h, w, ho, wo;
  FzValue *flat; /* the input as [N*C*H*W] */
  FzValue *base; /* i64 [N, C, 1, 1]: (n*C + c) * H */
  int64_t padding; /* 0 zeros, 1 border, 2 reflection */
  bool align;
} Sampler;

static FzValue *k(Sampler *s, double v) {
  return fzOnnxConstScalar(s->im, s->elt, v);
}

static FzValue *add(Sampler *s, FzValue *a, FzValue *b) {
  return fzOnnxBinary(s->im, "graph.add", a, b);
}
static FzValue *sub(Sampler *s, FzValue *a, FzValue *b) {
  return fzOnnxBinary(s->im, "graph.sub", a, b);
}
static FzValue *mul(Sampler *s, FzValue *a, FzValue *b) {
  return fzOnnxBinary(s->im, "graph.mul", a, b);
}

/* Clamps to [0, size - 1]. */
static FzValue *clip(Sampler *s, FzValue *x, int64_t size) {
  x = fzOnnxBinary(s->im, "graph.max", x, k(s, 0));
  return fzOnnxBinary(s->im, "graph.min", x, k(s, (double)(size - 1)));
}

/* PyTorch's reflect_coordinates: x reflected into [lo2/2, hi2/2]. */
static FzValue *reflect(Sampler *s, FzValue *x, double lo2, double hi2) {
  if (lo2 == hi2)
    return mul(s, x, k(s, 0));
  double lo = lo2 / 2, span = (hi2 - lo2) / 2;
  FzValue *a = fzOnnxUnary(s->im, "graph.abs", sub(s, x, k(s, lo)));
  FzValue *extra = fzOnnxBinary(s->im, "graph.rem", a, k(s, span));
  FzValue *flips = fzOnnxUnary(
      s->im, "graph.floor", fzOnnxBinary(s->im, "graph.div", a, k(s, span)));
  FzValue *half = fzOnnxUnary(s->im, "graph.floor", mul(s, flips, k(s, 0.5)));
  FzValue *parity = sub(s, flips, mul(s, half, k(s, 2)));
  FzValue *even = fzOnnxCompare(s->im, "eq", parity, k(s, 0));
  return fzOnnxSelect(s->im, even, add(s, extra, k(s, lo)),
                      add(s, sub(s, k(s, span), extra), k(s, lo)));
}

/* The padding mode applied to a coordinate along an axis of `size`. */
static FzValue *pad_coord(Sampler *s, FzValue *x, int64_t size) {
  if (s->padding == 1)
    return clip(s, x, size);
  if (s->padding == 2) {
    x = s->align ? reflect(s, x, 0, 2.0 * (double)(size - 1))
                 : reflect(s, x, -1, 2.0 * (double)size - 1);
    return clip(s, x, size);
  }
  return x;
}

/* The value at integral coordinates (x, y) [N, 1, Ho, Wo]: 0 outside the
 * input. Gives [N, C, Ho, Wo]. */
static FzValue *tap(Sampler *s, FzValue *x, FzValue *y) {
  FzOnnxImporter *im = s->im;
  FzValue *in = fzOnnxBinary(
      im, "graph.and",
      fzOnnxBinary(im, "graph.and", fzOnnxCompare(im, "ge", x, k(s, 0)),
                   fzOnnxCompare(im, "le", x, k(s, (double)(s->w - 1)))),
      fzOnnxBinary(im, "graph.and", fzOnnxCompare(im, "ge", y, k(s, 0)),
                   fzOnnxCompare(im, "le", y, k(s, (double)(s->h - 1)))));
  FzType *i64 = fzIntegerTypeGet(im->ctx, 64);
  FzValue *ix = fzOnnxCast(im, fzOnnxSelect(im, in, x, k(s, 0)), i64);
  FzValue *iy = fzOnnxCast(im, fzOnnxSelect(im, in, y, k(s, 0)), i64);
  FzValue *row = fzOnnxBinary(im, "graph.add", s->base, iy);
  FzValue *idx = fzOnnxBinary(
      im, "graph.add",
      fzOnnxBinary(im, "graph.mul", row, fzOnnxConstScalar(im, i64,
                                                           (double)s->w)),
      ix);
  FzValue *ops[2] = {s->flat, idx};
  FzValue *v = fzOnnxEmit(im, "graph.gather", 2, ops, NULL, "axis",
                          fzIntegerAttrGet(im->ctx, i64, 0), NULL);
  return fzOnnxSelect(im, in, v, k(s, 0));
}

/* Keys' cubic weights (A = -0.75) of the taps at -1, 0, 1, 2 from
 * floor(x), for t = x - floor(x). */
static void cubic_weights(Sampler *s, FzValue *t, FzValue **wt) {
  const double A = -0.75;
  FzValue *one = k(s, 1);
  /* cc1(x) = ((A+2)x - (A+3)) x^2 + 1 for |x| <= 1;
   * cc2(x) = ((A x - 5A) x + 8A) x - 4A for 1 < |x| < 2. */
  FzValue *d[4] = {add(s, t, one), t, sub(s, one, t),
                   sub(s, k(s, 2), t)};
  for (int i = 0; i < 4; ++i) {
    FzValue *x = d[i];
    if (i == 1 || i == 2) {
      FzValue *p = sub(s, mul(s, k(s, A + 2), x), k(s, A + 3));
      wt[i] = add(s, mul(s, mul(s, p, x), x), one);
    } else {
      FzValue *p = sub(s, mul(s, k(s, A), x), k(s, 5 * A));
      p = add(s, mul(s, p, x), k(s, 8 * A));
      wt[i] = sub(s, mul(s, p, x), k(s, 4 * A));
    }
  }
}

static bool h_grid_sample(FzOnnxImporter *im, FzValue *const *in,
                          size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0], *grid = in[1];
  const char *mode, *padding;
  int64_t align;
  /* Version 20 renames bilinear and bicubic to linear and cubic. */
  bool v20 = im->opVersion >= 20;
  if (!fzOnnxAttrString(im, "mode", v20 ? "linear" : "bilinear", &mode) ||
      !fzOnnxAttrString(im, "padding_mode", "zeros", &padding) ||
      !fzOnnxAttrInt(im, "align_corners", 0, &align))
    return false;
  int m = !strcmp(mode, v20 ? "linear" : "bilinear") ? 0
          : !strcmp(mode, "nearest")                 ? 1
          : !strcmp(mode, v20 ? "cubic" : "bicubic") ? 2
                                                     : -1;
  if (m < 0)
    return fzOnnxErrorAttrValue(im, "mode", mode);
  Sampler s = {0};
  s.im = im;
  s.align = align != 0;
  s.padding = !strcmp(padding, "zeros")    ? 0
              : !strcmp(padding, "border") ? 1
              : !strcmp(padding, "reflection")
                  ? 2
                  : -1;
  if (s.padding < 0)
    return fzOnnxErrorAttrValue(im, "padding_mode", padding);
  if (fzOnnxRank(x) != 4 || fzOnnxRank(grid) != 4)
    return fzOnnxError(im, "unsupported %zu-D input: GridSample-16 samples "
                           "4-D inputs [N, C, H, W] with a grid [N, Ho, Wo, "
                           "2]", fzOnnxRank(x));
  if (!fzOnnxRequireStatic(im, x, "the input") ||
      !fzOnnxRequireStatic(im, grid, "the grid"))
    return false;
  s.elt = fzOnnxElt(x);
  if (!fzTypeIsFloat(s.elt) || fzOnnxElt(grid) != s.elt)
    return fzOnnxError(im, "the input and the grid must have the same float "
                           "type");
  const int64_t *X = fzOnnxShape(x), *G = fzOnnxShape(grid);
  s.n = X[0], s.c = X[1], s.h = X[2], s.w = X[3], s.ho = G[1], s.wo = G[2];
  if (G[0] != s.n || G[3] != 2)
    return fzOnnxError(im, "the grid must be [%lld, Ho, Wo, 2]",
                       (long long)s.n);
  int64_t total;
  int64_t bshape[4] = {s.n, s.c, 1, 1};
  if (!fzOnnxCheckBuilt(im, 4, bshape, "table of channel offsets", NULL))
    return false;
  total = fzShapedTypeGetNumElements(fzValueGetType(x));
  if (total > ((int64_t)1 << 62))
    return fzOnnxError(im, "the input holds too many elements");
  s.flat = fzOnnxReshape(im, x, 1, &total);
  int64_t *base = fzOnnxAlloc(im, (size_t)(s.n * s.c + 1) * sizeof *base);
  if (!base)
    return fzOnnxError(im, "out of memory");
  for (int64_t i = 0; i < s.n * s.c; ++i)
    base[i] = i * s.h; /* (n*C + c) * H <= N*C*H <= total */
  s.base = fzOnnxConstI64(im, 4, bshape, base);
  /* The grid's x and y as [N, 1, Ho, Wo]. */
  FzValue *coord[2];
  for (int i = 0; i < 2; ++i) {
    int64_t st[4] = {0, 0, 0, i}, lim[4] = {s.n, s.ho, s.wo, i + 1},
            one[4] = {1, 1, 1, 1}, shp[4] = {s.n, 1, s.ho, s.wo};
    int64_t size = i == 0 ? s.w : s.h;
    FzValue *g = fzOnnxReshape(im, fzOnnxSlice(im, grid, st, lim, one), 4,
                               shp);
    /* Unnormalized: align ? (g+1)/2 * (size-1) : ((g+1) * size - 1) / 2 */
    FzValue *g1 = add(&s, g, k(&s, 1));
    coord[i] = s.align
                   ? mul(&s, g1, k(&s, 0.5 * (double)(size - 1)))
                   : mul(&s, sub(&s, mul(&s, g1, k(&s, (double)size)),
                                 k(&s, 1)),
                         k(&s, 0.5));
    if (m != 2)
      coord[i] = pad_coord(&s, coord[i], size);
  }
  FzValue *gx = coord[0], *gy = coord[1], *y = NULL;
  if (m == 1) { /* nearest, half to even */
    y = tap(&s, fzOnnxUnary(im, "graph.round", gx),
            fzOnnxUnary(im, "graph.round", gy));
  } else if (m == 0) {
    FzValue *x0 = fzOnnxUnary(im, "graph.floor", gx);
    FzValue *y0 = fzOnnxUnary(im, "graph.floor", gy);
    FzValue *x1 = add(&s, x0, k(&s, 1)), *y1 = add(&s, y0, k(&s, 1));
    FzValue *wx1 = sub(&s, gx, x0), *wy1 = sub(&s, gy, y0);
    FzValue *wx0 = sub(&s, k(&s, 1), wx1), *wy0 = sub(&s, k(&s, 1), wy1);
    FzValue *xs[2] = {x0, x1}, *ys[2] = {y0, y1};
    FzValue *wxs[2] = {wx0, wx1}, *wys[2] = {wy0, wy1};
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 2; ++i) {
        FzValue *t = mul(&s, tap(&s, xs[i], ys[j]), mul(&s, wxs[i], wys[j]));
        y = y ? add(&s, y, t) : t;
      }
  } else { /* bicubic: the padding applies to each tap */
    FzValue *fx = fzOnnxUnary(im, "graph.floor", gx);
    FzValue *fy = fzOnnxUnary(im, "graph.floor", gy);
    FzValue *wx[4], *wy[4];
    cubic_weights(&s, sub(&s, gx, fx), wx);
    cubic_weights(&s, sub(&s, gy, fy), wy);
    for (int j = 0; j < 4; ++j) {
      FzValue *ty = pad_coord(&s, add(&s, fy, k(&s, j - 1)), s.h), *row = NULL;
      for (int i = 0; i < 4; ++i) {
        FzValue *tx = pad_coord(&s, add(&s, fx, k(&s, i - 1)), s.w);
        FzValue *t = mul(&s, tap(&s, tx, ty), wx[i]);
        row = row ? add(&s, row, t) : t;
      }
      FzValue *t = mul(&s, row, wy[j]);
      y = y ? add(&s, y, t) : t;
    }
  }
  out[0] = y;
  return y != NULL;
}

const FzOnnxOpDef fzOnnxSampleOps[] = {
    {"GridSample", h_grid_sample, NULL, "align_corners mode padding_mode", 2,
     2, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

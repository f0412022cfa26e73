/* importers/onnx/ops_nn.c - ONNX neural-network ops: MatMul, Gemm, Conv,
 * the pools, the normalizations (BatchNormalization in inference form,
 * InstanceNormalization, GroupNormalization, LayerNormalization,
 * MeanVarianceNormalization, LRN), Softmax and LogSoftmax, and Dropout
 * (inference: the identity).
 *
 * Windows. graph.conv2d and the 2-D pools take NCHW and explicit pads
 * [top, left, bottom, right] (ONNX's order: begins, then ends). 1-D
 * convolutions and pools are imported as 2-D ones over a unit height
 * (reshapes around them); 3-D pools are two 2-D pools (pool_3d);
 * convolutions of 3 or more spatial dims are sums of 2-D ones
 * (ops_conv_nd.c). auto_pad SAME_UPPER
 * and SAME_LOWER are resolved to explicit pads from the static input
 * size, as ONNX defines them.
 *
 * BatchNormalization in training mode (opset 14+) normalizes with the
 * batch's statistics and returns the updated running statistics.
 *
 * Decompositions: Gemm is matmul (with transpose flags), a scale by
 * alpha, and a bias (scaled by beta) added; InstanceNormalization is
 * layer_norm over the spatial dims then the per-channel scale and bias;
 * GroupNormalization is layer_norm over each group of channels, then the
 * scale and bias (per group in version 18, per channel in 21); LpPool is
 * a depthwise conv2d with ones over |x|^p, then the p-th root; Col2Im a
 * transposed convolution with a constant kernel of block positions;
 * LayerNormalization's optional Mean and InvStdDev outputs are
 * layer_norm's results #1 and #2; MVN and LRN go through reductions; opset < 13 Softmax flattens to 2-D around
 * `axis`, as those opsets define it.
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

static FzAttr *i64_array(FzOnnxImporter *im, size_t n, const int64_t *v) {
  return fzDenseArrayAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), n, v);
}

static FzValue *scalar_like(FzOnnxImporter *im, FzValue *x, double v) {
  return x ? fzOnnxConstScalar(im, fzOnnxElt(x), v) : NULL;
}

/*===--- MatMul and Gemm -------------------------------------------------===*/

static bool h_matmul(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  out[0] = fzOnnxBinary(im, "graph.matmul", in[0], in[1]);
  return out[0] != NULL;
}

static bool h_gemm(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nOut;
  double alpha, beta;
  int64_t ta, tb;
  if (!fzOnnxAttrFloat(im, "alpha", 1.0, &alpha) ||
      !fzOnnxAttrFloat(im, "beta", 1.0, &beta) ||
      !fzOnnxAttrInt(im, "transA", 0, &ta) ||
      !fzOnnxAttrInt(im, "transB", 0, &tb))
    return false;
  if (fzOnnxRank(in[0]) != 2 || fzOnnxRank(in[1]) != 2)
    return fzOnnxError(im, "inputs A and B must have rank 2");
  FzValue *ops[2] = {in[0], in[1]};
  FzValue *y = fzOnnxEmit(im, "graph.matmul", 2, ops, NULL, "transpose_a",
                          fzBoolAttrGet(im->ctx, ta != 0), "transpose_b",
                          fzBoolAttrGet(im->ctx, tb != 0), NULL);
  if (alpha != 1)
    y = fzOnnxBinary(im, "graph.mul", y, scalar_like(im, y, alpha));
  FzValue *c = nIn > 2 ? in[2] : NULL;
  if (c && beta != 0) {
    if (beta != 1)
      c = fzOnnxBinary(im, "graph.mul", c, scalar_like(im, c, beta));
    y = fzOnnxBinary(im, "graph.add", y, c);
  }
  out[0] = y;
  return y != NULL;
}

/*===--- Windows ---------------------------------------------------------===*/

bool fzOnnxWindowPads(FzOnnxImporter *im, FzValue *x, size_t spatial,
                      const int64_t *kernel, const int64_t *strides,
                      const int64_t *dilations, int64_t *pads) {
  const char *autoPad;
  int64_t *p;
  size_t np;
  bool present;
  if (!fzOnnxAttrString(im, "auto_pad", "NOTSET", &autoPad) ||
      !fzOnnxAttrInts(im, "pads", &p, &np, &present))
    return false;
  for (size_t i = 0; i < 2 * spatial; ++i)
    pads[i] = 0;
  /* Malformed models (found by fuzz_onnx): zero or negative windows would
   * divide by zero below; huge ones would overflow. */
  for (size_t i = 0; i < spatial; ++i) {
    if (strides[i] < 1 || strides[i] > ((int64_t)1 << 31))
      return fzOnnxError(im, "attribute 'strides' must be in [1, 2^31], "
                             "got %lld", (long long)strides[i]);
    if (dilations[i] < 1 || dilations[i] > ((int64_t)1 << 31))
      return fzOnnxError(im, "attribute 'dilations' must be in [1, 2^31], "
                             "got %lld", (long long)dilations[i]);
    if (kernel[i] < 1 || kernel[i] > ((int64_t)1 << 31))
      return fzOnnxError(im, "kernel size must be in [1, 2^31], got %lld",
                         (long long)kernel[i]);
  }
  if (!strcmp(autoPad, "NOTSET")) {
    if (present && np != 2 * spatial)
      return fzOnnxError(im, "attribute 'pads' needs %zu entries, has %zu",
                         2 * spatial, np);
    for (size_t i = 0; present && i < np; ++i)
      pads[i] = p[i];
    return true;
  }
  if (!strcmp(autoPad, "VALID"))
    return true;
  bool upper = !strcmp(autoPad, "SAME_UPPER");
  if (!upper && strcmp(autoPad, "SAME_LOWER"))
    return fzOnnxErrorAttrValue(im, "auto_pad", autoPad);
  size_t r = fzOnnxRank(x);
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = fzOnnxDim(x, r - spatial + i);
    if (in == FZ_DYNAMIC)
      return fzOnnxError(im, "unsupported auto_pad '%s' with a dynamic "
                             "spatial dimension", autoPad);
    int64_t outSize = (in + strides[i] - 1) / strides[i];
    int64_t span = (kernel[i] - 1) * dilations[i] + 1;
    int64_t total = (outSize - 1) * strides[i] + span - in;
    if (total < 0)
      total = 0;
    int64_t small = total / 2, big = total - small;
    pads[i] = upper ? small : big;
    pads[spatial + i] = upper ? big : small;
  }
  return true;
}

/* Reads a per-spatial-dim int list attribute (default dflt). */
static bool read_spatial(FzOnnxImporter *im, const char *name, size_t n,
                         int64_t dflt, int64_t *out) {
  int64_t *v;
  size_t k;
  bool present;
  if (!fzOnnxAttrInts(im, name, &v, &k, &present))
    return false;
  if (present && k != n)
    return fzOnnxError(im, "attribute '%s' needs %zu entries, has %zu", name,
                       n, k);
  for (size_t i = 0; i < n; ++i)
    out[i] = present ? v[i] : dflt;
  return true;
}

/* The spatial rank of x for a 1-D or 2-D window op; 0 after an error. */
static size_t spatial_rank(FzOnnxImporter *im, FzValue *x) {
  size_t r = fzOnnxRank(x);
  if (r == 3 || r == 4)
    return r - 2;
  fzOnnxError(im, "unsupported %zu-D input: only 1-D and 2-D windows are "
                  "supported", r >= 2 ? r - 2 : 0);
  return 0;
}

/* [N, C, L] -> [N, C, 1, L]. */
static FzValue *to_2d(FzOnnxImporter *im, FzValue *x) {
  if (!x || fzOnnxRank(x) != 3)
    return x;
  int64_t s[4] = {fzOnnxDim(x, 0), fzOnnxDim(x, 1), 1, fzOnnxDim(x, 2)};
  return fzOnnxReshape(im, x, 4, s);
}

static FzValue *from_2d(FzOnnxImporter *im, FzValue *y, size_t spatial) {
  if (!y || spatial != 1)
    return y;
  int64_t s[3] = {fzOnnxDim(y, 0), fzOnnxDim(y, 1), fzOnnxDim(y, 3)};
  return fzOnnxReshape(im, y, 3, s);
}

/* Window attributes widened to 2-D. */
typedef struct Window {
  int64_t kernel[2], strides[2], dilations[2], pads[4];
} Window;

static bool read_window(FzOnnxImporter *im, FzValue *x, size_t sp,
                        const int64_t *kernelIn, Window *w) {
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, p[4] = {0};
  if (!read_spatial(im, "strides", sp, 1, s) ||
      !read_spatial(im, "dilations", sp, 1, d))
    return false;
  for (size_t i = 0; i < sp; ++i)
    k[i] = kernelIn[i];
  if (!fzOnnxWindowPads(im, x, sp, k, s, d, p))
    return false;
  if (sp == 1) {
    w->kernel[0] = 1, w->kernel[1] = k[0];
    w->strides[0] = 1, w->strides[1] = s[0];
    w->dilations[0] = 1, w->dilations[1] = d[0];
    w->pads[0] = 0, w->pads[1] = p[0], w->pads[2] = 0, w->pads[3] = p[1];
  } else {
    memcpy(w->kernel, k, sizeof k);
    memcpy(w->strides, s, sizeof s);
    memcpy(w->dilations, d, sizeof d);
    memcpy(w->pads, p, sizeof p);
  }
  return true;
}

/* Conv of 3 or more spatial dims: ops_conv_nd.c. */
static bool conv_nd(FzOnnxImporter *im, FzValue *x, FzValue *w, FzValue *b,
                    FzValue **out) {
  size_t sp = fzOnnxRank(x) - 2;
  if (sp > FZ_GRAPH_MAX_RANK - 2 || fzOnnxRank(w) != sp + 2)
    return fzOnnxError(im, "weight must have rank %zu", sp + 2);
  if (!fzOnnxRequireStatic(im, w, "the weight"))
    return false;
  int64_t group, kernel[FZ_GRAPH_MAX_RANK], s[FZ_GRAPH_MAX_RANK],
      d[FZ_GRAPH_MAX_RANK], p[2 * FZ_GRAPH_MAX_RANK];
  if (!fzOnnxAttrInt(im, "group", 1, &group) ||
      !read_spatial(im, "strides", sp, 1, s) ||
      !read_spatial(im, "dilations", sp, 1, d))
    return false;
  for (size_t i = 0; i < sp; ++i)
    kernel[i] = fzOnnxDim(w, 2 + i);
  int64_t *ks;
  size_t nk;
  bool present;
  if (!fzOnnxAttrInts(im, "kernel_shape", &ks, &nk, &present))
    return false;
  for (size_t i = 0; present && i < sp; ++i)
    if (nk != sp || ks[i] != kernel[i])
      return fzOnnxError(im, "attribute 'kernel_shape' does not match the "
                             "weight's shape");
  if (!fzOnnxWindowPads(im, x, sp, kernel, s, d, p))
    return false;
  for (size_t i = 0; i < 2 * sp; ++i)
    if (p[i] < -FZ_MAX_DIM || p[i] > FZ_MAX_DIM)
      return fzOnnxError(im, "attribute 'pads' must be in [-2^40, 2^40], "
                             "got %lld", (long long)p[i]);
  if (group < 1 || fzOnnxDim(x, 1) == FZ_DYNAMIC ||
      fzOnnxDim(x, 1) != group * fzOnnxDim(w, 1) ||
      fzOnnxDim(w, 0) % group)
    return fzOnnxError(im, "the input channels must be 'group' times the "
                           "weight's dimension 1, and the output channels "
                           "a multiple of 'group'");
  out[0] = fzOnnxConvNd(im, x, w, b, sp, s, p, d, group);
  return out[0] != NULL;
}

static bool h_conv(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0], *w = in[1], *b = nIn > 2 ? in[2] : NULL;
  if (fzOnnxRank(x) >= 5)
    return conv_nd(im, x, w, b, out);
  size_t sp = spatial_rank(im, x);
  if (!sp)
    return false;
  if (fzOnnxRank(w) != sp + 2)
    return fzOnnxError(im, "weight must have rank %zu", sp + 2);
  int64_t group, kernel[2];
  if (!fzOnnxAttrInt(im, "group", 1, &group))
    return false;
  for (size_t i = 0; i < sp; ++i)
    kernel[i] = fzOnnxDim(w, 2 + i);
  int64_t *ks;
  size_t nk;
  bool present;
  if (!fzOnnxAttrInts(im, "kernel_shape", &ks, &nk, &present))
    return false;
  for (size_t i = 0; present && i < sp; ++i)
    if (nk != sp || (kernel[i] != FZ_DYNAMIC && ks[i] != kernel[i]))
      return fzOnnxError(im, "attribute 'kernel_shape' does not match the "
                             "weight's shape");
  Window win;
  if (!read_window(im, x, sp, kernel, &win))
    return false;
  FzValue *ops[3] = {to_2d(im, x), to_2d(im, w), b};
  FzValue *y = fzOnnxEmit(im, "graph.conv2d", b ? 3 : 2, ops, NULL,
                          "strides", i64_array(im, 2, win.strides), "pads",
                          i64_array(im, 4, win.pads), "dilations",
                          i64_array(im, 2, win.dilations), "groups",
                          fzIntegerAttrGet(im->ctx,
                                           fzIntegerTypeGet(im->ctx, 64),
                                           group),
                          NULL);
  out[0] = from_2d(im, y, sp);
  return out[0] != NULL;
}

/* A 2-D pool of x (NCHW) with the window's attributes. */
static FzValue *pool_2d(FzOnnxImporter *im, bool isMax, FzValue *x,
                        const Window *w, int64_t ceilMode, int64_t countPad) {
  return fzOnnxEmit(
      im, isMax ? "graph.max_pool" : "graph.avg_pool", 1, &x, NULL, "kernel",
      i64_array(im, 2, w->kernel), "strides", i64_array(im, 2, w->strides),
      "pads", i64_array(im, 4, w->pads), "dilations",
      i64_array(im, 2, w->dilations), "ceil_mode",
      fzBoolAttrGet(im->ctx, ceilMode != 0), "count_include_pad",
      fzBoolAttrGet(im->ctx, countPad != 0), NULL);
}

/* A 3-D pool [N, C, D, H, W] as two 2-D pools: over (H, W) of [N, C*D,
 * H, W], then over D of [N, C, D, OH*OW]. A box window is the product of
 * its per-axis intervals, and so is the count of positions an average
 * divides by (inside the input, or the padded input), so max and average
 * are exactly separable (the average rounds twice). */
static bool pool_3d(FzOnnxImporter *im, bool isMax, FzValue *x,
                    int64_t ceilMode, int64_t countPad, FzValue **out) {
  int64_t k[3], s[3], d[3], p[6];
  if (!read_spatial(im, "kernel_shape", 3, 1, k) ||
      !read_spatial(im, "strides", 3, 1, s) ||
      !read_spatial(im, "dilations", 3, 1, d) ||
      !fzOnnxWindowPads(im, x, 3, k, s, d, p) ||
      !fzOnnxRequireStatic(im, x, "the input"))
    return false;
  const int64_t *X = fzOnnxShape(x);
  int64_t cd;
  if (!fzOnnxMulI64(X[1], X[2], &cd))
    return fzOnnxError(im, "the input holds too many elements");
  Window hw = {{k[1], k[2]}, {s[1], s[2]}, {d[1], d[2]},
               {p[1], p[2], p[4], p[5]}};
  int64_t s1[4] = {X[0], cd, X[3], X[4]};
  FzValue *y1 = pool_2d(im, isMax, fzOnnxReshape(im, x, 4, s1), &hw,
                        ceilMode, countPad);
  if (!y1)
    return false;
  int64_t oh = fzOnnxDim(y1, 2), ow = fzOnnxDim(y1, 3);
  Window dw = {{k[0], 1}, {s[0], 1}, {d[0], 1}, {p[0], 0, p[3], 0}};
  int64_t s2[4] = {X[0], X[1], X[2], oh * ow};
  FzValue *y2 = pool_2d(im, isMax, fzOnnxReshape(im, y1, 4, s2), &dw,
                        ceilMode, countPad);
  if (!y2)
    return false;
  int64_t s3[5] = {X[0], X[1], fzOnnxDim(y2, 2), oh, ow};
  out[0] = fzOnnxReshape(im, y2, 5, s3);
  return out[0] != NULL;
}

/* MaxPool and AveragePool. */
static bool h_pool(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nIn;
  bool isMax = !strcmp(im->node->op_type, "MaxPool");
  FzValue *x = in[0];
  bool wantIndices = nOut > 1 && im->node->output[1][0];
  if (wantIndices && im->opVersion < 8)
    return fzOnnxError(im, "output #1 (Indices) is not part of MaxPool-%d "
                           "(only of versions from 8)", im->opVersion);
  if (wantIndices && fzOnnxRank(x) == 5)
    return fzOnnxError(im, "unsupported Indices output of a 3-D MaxPool");
  if (fzOnnxRank(x) == 5) {
    int64_t ceil3 = 0, count3 = 0, storage3 = 0;
    if (!fzOnnxAttr(im, "kernel_shape"))
      return fzOnnxError(im, "requires attribute 'kernel_shape'");
    if (!fzOnnxAttrInt(im, "ceil_mode", 0, &ceil3) ||
        !fzOnnxAttrInt(im, "count_include_pad", 0, &count3) ||
        !fzOnnxAttrInt(im, "storage_order", 0, &storage3))
      return false;
    return pool_3d(im, isMax, x, ceil3, count3, out);
  }
  size_t sp = spatial_rank(im, x);
  if (!sp)
    return false;
  int64_t kernel[2], ceilMode, countPad, storage;
  if (!fzOnnxAttr(im, "kernel_shape"))
    return fzOnnxError(im, "requires attribute 'kernel_shape'");
  if (!read_spatial(im, "kernel_shape", sp, 1, kernel) ||
      !fzOnnxAttrInt(im, "ceil_mode", 0, &ceilMode) ||
      !fzOnnxAttrInt(im, "count_include_pad", 0, &countPad) ||
      !fzOnnxAttrInt(im, "storage_order", 0, &storage))
    return false;
  Window win;
  if (!read_window(im, x, sp, kernel, &win))
    return false;
  FzValue *x2 = to_2d(im, x);
  FzValue *y = pool_2d(im, isMax, x2, &win, ceilMode, countPad);
  out[0] = from_2d(im, y, sp);
  if (out[0] && wantIndices) /* ops_unpool.c */
    out[1] = from_2d(im,
                     fzOnnxMaxPoolIndices(im, x2, y, win.kernel, win.strides,
                                          win.dilations, win.pads,
                                          storage != 0),
                     sp);
  return out[0] != NULL && (!wantIndices || out[1] != NULL);
}

static bool h_global_pool(FzOnnxImporter *im, FzValue *const *in,
                          size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  out[0] = fzOnnxUnary(im, im->row->graphOp, in[0]);
  return out[0] != NULL;
}

/* LpPool: (sum over the window of |x|^p)^(1/p). The window sums are a
 * depthwise graph.conv2d with a kernel of ones (padding adds zeros, as
 * ONNX's pads do). ceil_mode (version 18) adds end padding so that the
 * last window fits, dropping one that would start in the end padding.
 * p is a float attribute in version 1, an int from version 2. */
static bool h_lp_pool(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0];
  size_t sp = spatial_rank(im, x);
  if (!sp || !fzOnnxRequireStatic(im, x, "the input"))
    return false;
  int64_t kernel[2], ceilMode, pInt = 2;
  double p = 2;
  if (!fzOnnxAttr(im, "kernel_shape"))
    return fzOnnxError(im, "requires attribute 'kernel_shape'");
  if (!read_spatial(im, "kernel_shape", sp, 1, kernel) ||
      !fzOnnxAttrInt(im, "ceil_mode", 0, &ceilMode) ||
      (im->opVersion < 2 ? !fzOnnxAttrFloat(im, "p", 2.0, &p)
                         : !fzOnnxAttrInt(im, "p", 2, &pInt)))
    return false;
  if (im->opVersion >= 2)
    p = (double)pInt;
  if (!(p >= 1 && p <= 1e6))
    return fzOnnxError(im, "attribute 'p' must be in [1, 10^6], got %g", p);
  Window win;
  if (!read_window(im, x, sp, kernel, &win))
    return false;
  for (size_t i = 0; i < 4; ++i)
    if (win.pads[i] < 0 || win.pads[i] > FZ_MAX_DIM)
      return fzOnnxError(im, "attribute 'pads' must be in [0, 2^40], got "
                             "%lld", (long long)win.pads[i]);
  FzValue *x2 = to_2d(im, x);
  if (!x2)
    return false;
  for (size_t i = 0; ceilMode && i < 2; ++i) {
    /* Sizes and pads are at most 2^40, window attributes 2^31. */
    int64_t h = fzOnnxDim(x2, 2 + i), s = win.strides[i];
    int64_t len = h + win.pads[i] + win.pads[2 + i];
    int64_t span = (win.kernel[i] - 1) * win.dilations[i] + 1;
    if (len < span)
      break; /* no window fits: conv2d reports it */
    int64_t n = (len - span + s - 1) / s + 1;
    if ((n - 1) * s >= h + win.pads[i])
      --n;
    int64_t extra = (n - 1) * s + span - len;
    if (extra > 0)
      win.pads[2 + i] += extra;
  }
  int64_t c = fzOnnxDim(x2, 1);
  int64_t wshape[4] = {c, 1, win.kernel[0], win.kernel[1]};
  if (!fzOnnxCheckBuilt(im, 4, wshape, "kernel of ones", NULL))
    return false;
  FzValue *ax = fzOnnxUnary(im, "graph.abs", x2), *xp;
  if (p == 1)
    xp = ax;
  else if (p == 2)
    xp = fzOnnxBinary(im, "graph.mul", x2, x2);
  else
    xp = fzOnnxBinary(im, "graph.pow", ax, scalar_like(im, x2, p));
  FzValue *ops[2] = {xp, fzOnnxConstSplat(im, fzOnnxElt(x2), 4, wshape, 1)};
  FzValue *y = fzOnnxEmit(im, "graph.conv2d", 2, ops, NULL, "strides",
                          i64_array(im, 2, win.strides), "pads",
                          i64_array(im, 4, win.pads), "dilations",
                          i64_array(im, 2, win.dilations), "groups",
                          fzIntegerAttrGet(im->ctx,
                                           fzIntegerTypeGet(im->ctx, 64), c),
                          NULL);
  if (p == 2)
    y = fzOnnxUnary(im, "graph.sqrt", y);
  else if (p != 1)
    y = fzOnnxBinary(im, "graph.pow", y, scalar_like(im, x2, 1 / p));
  out[0] = from_2d(im, y, sp);
  return out[0] != NULL;
}

/* ConvTranspose as a convolution: the input dilated by the strides
 * (zeros between elements), padded by (k_eff - 1 - pad) on each side
 * (plus output_padding at the end; a negative amount crops), convolved
 * with stride 1 by the weight with in/out channels swapped per group and
 * its window flipped. */
static bool h_conv_transpose(FzOnnxImporter *im, FzValue *const *in,
                             size_t nIn, FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0], *w = in[1], *b = nIn > 2 ? in[2] : NULL;
  /* 1-D and 2-D here; 3 or more spatial dims: ops_conv_nd.c. */
  size_t sp = fzOnnxRank(x) >= 5 && fzOnnxRank(x) <= FZ_GRAPH_MAX_RANK / 2 + 1
                  ? fzOnnxRank(x) - 2
                  : spatial_rank(im, x);
  if (!sp)
    return false;
  if (fzOnnxRank(w) != sp + 2 || !fzOnnxRequireStatic(im, x, "the input") ||
      !fzOnnxRequireStatic(im, w, "the weight"))
    return fzOnnxRank(w) == sp + 2 ? false
                                   : fzOnnxError(im, "weight must have rank "
                                                     "%zu", sp + 2);
  int64_t group, s[FZ_GRAPH_MAX_RANK], d[FZ_GRAPH_MAX_RANK],
      op[FZ_GRAPH_MAX_RANK], k[FZ_GRAPH_MAX_RANK],
      pads[2 * FZ_GRAPH_MAX_RANK], outShape[FZ_GRAPH_MAX_RANK];
  const char *autoPad;
  int64_t *os, *p;
  size_t nos, np;
  bool hasOut, hasPads;
  if (!fzOnnxAttrInt(im, "group", 1, &group) ||
      !read_spatial(im, "strides", sp, 1, s) ||
      !read_spatial(im, "dilations", sp, 1, d) ||
      !read_spatial(im, "output_padding", sp, 0, op) ||
      !fzOnnxAttrString(im, "auto_pad", "NOTSET", &autoPad) ||
      !fzOnnxAttrInts(im, "output_shape", &os, &nos, &hasOut) ||
      !fzOnnxAttrInts(im, "pads", &p, &np, &hasPads))
    return false;
  bool upper = !strcmp(autoPad, "SAME_UPPER");
  if (!upper && strcmp(autoPad, "SAME_LOWER") && strcmp(autoPad, "NOTSET") &&
      strcmp(autoPad, "VALID"))
    return fzOnnxErrorAttrValue(im, "auto_pad", autoPad);
  if ((hasOut && nos != sp) || (hasPads && np != 2 * sp))
    return fzOnnxError(im, "'output_shape' or 'pads' has the wrong length");
  size_t r = fzOnnxRank(x);
  int64_t cin = fzOnnxDim(x, 1), mg = fzOnnxDim(w, 1);
  if (group < 1 || cin % group || fzOnnxDim(w, 0) != cin)
    return fzOnnxError(im, "weight dimension 0 must be the input channels, "
                           "a multiple of 'group'");
  for (size_t i = 0; i < sp; ++i) {
    int64_t inSize = fzOnnxDim(x, r - sp + i);
    k[i] = fzOnnxDim(w, 2 + i);
    /* Every size below is a dimension of an intermediate (at most 2^40
     * each, so that their sums cannot overflow). */
    int64_t keff, dilated, lim = FZ_MAX_DIM;
    if (s[i] < 1 || s[i] > lim || d[i] < 1 || d[i] > lim || k[i] < 1)
      return fzOnnxError(im, "'strides' and 'dilations' must be in [1, "
                             "2^40] and the kernel not empty");
    if (op[i] < -lim || op[i] > lim ||
        (hasOut && (os[i] < 0 || os[i] > lim)) ||
        (hasPads && (p[i] < -lim || p[i] > lim || p[sp + i] < -lim ||
                     p[sp + i] > lim)))
      return fzOnnxError(im, "'output_padding', 'output_shape' and 'pads' "
                             "must be in [-2^40, 2^40]");
    if (!fzOnnxMulI64(k[i] - 1, d[i], &keff) || ++keff > lim ||
        !fzOnnxMulI64(inSize, s[i], &dilated) || dilated > lim)
      return fzOnnxError(im, "the strided input or the dilated kernel of "
                             "spatial dimension %zu is larger than 2^40", i);
    int64_t full = s[i] * (inSize - 1) + op[i] + keff;
    bool same = upper || !strcmp(autoPad, "SAME_LOWER");
    if (hasOut || same) {
      outShape[i] = hasOut ? os[i] : inSize * s[i];
      int64_t total = full - outShape[i];
      if (total < 0) { /* the extra goes to the end, as output padding */
        pads[i] = 0;
        pads[sp + i] = total;
      } else if (upper) {
        pads[i] = total / 2;
        pads[sp + i] = total - total / 2;
      } else {
        pads[i] = total - total / 2;
        pads[sp + i] = total / 2;
      }
    } else {
      pads[i] = hasPads ? p[i] : 0;
      pads[sp + i] = hasPads ? p[sp + i] : 0;
    }
  }
  if (sp >= 3) {
    out[0] = fzOnnxConvTransposeNd(im, x, w, b, sp, s, pads, d, op, group);
    return out[0] != NULL;
  }
  /* Work in 2-D. */
  FzValue *x2 = to_2d(im, x), *w2 = to_2d(im, w);
  int64_t S[2] = {1, s[0]}, D[2] = {1, d[0]}, K[2] = {1, k[0]},
          OP[2] = {0, op[0]}, P[4] = {0, pads[0], 0, pads[1]};
  if (sp == 2) {
    memcpy(S, s, sizeof S), memcpy(D, d, sizeof D), memcpy(K, k, sizeof K);
    memcpy(OP, op, sizeof OP), memcpy(P, pads, sizeof P);
  }
  int64_t n = fzOnnxDim(x2, 0), h = fzOnnxDim(x2, 2), wd = fzOnnxDim(x2, 3);
  /* Dilate: [N,C,H,W] -> [N,C,H,1,W,1] -> pad to [N,C,H,sh,W,sw] ->
   * [N,C,H*sh,W*sw] -> crop to (H-1)*sh+1, (W-1)*sw+1. */
  if (S[0] > 1 || S[1] > 1) {
    int64_t s6[6] = {n, cin, h, 1, wd, 1};
    int64_t pad6[12] = {0};
    pad6[6 + 3] = S[0] - 1;
    pad6[6 + 5] = S[1] - 1;
    x2 = fzOnnxReshape(im, x2, 6, s6);
    x2 = fzOnnxEmit(im, "graph.pad", 1, &x2, NULL, "pads",
                    i64_array(im, 12, pad6), NULL);
    int64_t s4[4] = {n, cin, h * S[0], wd * S[1]};
    x2 = fzOnnxReshape(im, x2, 4, s4);
    int64_t st[4] = {0, 0, 0, 0}, lim[4] = {n, cin, (h - 1) * S[0] + 1,
                                            (wd - 1) * S[1] + 1};
    int64_t one[4] = {1, 1, 1, 1};
    x2 = fzOnnxSlice(im, x2, st, lim, one);
  }
  int64_t pad4[8] = {0};
  for (int i = 0; i < 2; ++i) {
    int64_t keff = (K[i] - 1) * D[i] + 1;
    pad4[2 + i] = keff - 1 - P[i];
    pad4[4 + 2 + i] = keff - 1 - P[2 + i] + OP[i];
  }
  x2 = fzOnnxEmit(im, "graph.pad", 1, &x2, NULL, "pads",
                  i64_array(im, 8, pad4), NULL);
  /* Weight [C, M/g, kh, kw] -> [g, C/g, M/g, kh, kw] -> [g, M/g, C/g, ..]
   * -> [M, C/g, kh, kw], flipped along kh and kw. */
  int64_t cg = cin / group, gm;
  if (!fzOnnxMulI64(group, mg, &gm)) /* group is any int when cin is 0 */
    return fzOnnxError(im, "attribute 'group' (%lld) is too large",
                       (long long)group);
  int64_t w5[5] = {group, cg, mg, K[0], K[1]}, perm[5] = {0, 2, 1, 3, 4};
  int64_t w4[4] = {gm, cg, K[0], K[1]};
  w2 = fzOnnxReshape(im, w2, 5, w5);
  w2 = fzOnnxTranspose(im, w2, 5, perm);
  w2 = fzOnnxReshape(im, w2, 4, w4);
  int64_t fs[4] = {0, 0, K[0] - 1, K[1] - 1}, fl[4] = {gm, cg, -1, -1};
  int64_t fst[4] = {1, 1, -1, -1};
  w2 = fzOnnxSlice(im, w2, fs, fl, fst);
  FzValue *ops[3] = {x2, w2, b};
  int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
  FzValue *y = fzOnnxEmit(
      im, "graph.conv2d", b ? 3 : 2, ops, NULL, "strides",
      i64_array(im, 2, ones), "pads", i64_array(im, 4, zeros), "dilations",
      i64_array(im, 2, D), "groups",
      fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), group), NULL);
  out[0] = from_2d(im, y, sp);
  return out[0] != NULL;
}

/* Col2Im (18), 2-D: the transposed convolution that puts each column
 * block back at its place, summing overlaps. x [N, C*kh*kw, Lh*Lw] is
 * viewed as [N, C*kh*kw, Lh, Lw], dilated by the strides, padded by
 * k_eff - 1 - pad on each side (the end also by what the image has beyond
 * the last block), and convolved, one group per channel, with a constant
 * kernel [C, kh*kw, kh, kw] whose channel b is one at b's block position,
 * flipped. image_shape and block_shape must be constants. */
static bool h_col2im(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0];
  int64_t *image, *block, s[2], d[2], p[4];
  size_t ni, nb;
  if (!fzOnnxGetConstInts(im, in[1], &image, &ni))
    return fzOnnxErrorNotConstant(im, 1, "image_shape");
  if (!fzOnnxGetConstInts(im, in[2], &block, &nb))
    return fzOnnxErrorNotConstant(im, 2, "block_shape");
  if (ni != nb || ni < 2)
    return fzOnnxError(im, "'image_shape' and 'block_shape' need the same "
                           "number of entries, at least 2");
  if (ni != 2)
    return fzOnnxError(im, "unsupported %zu-D image (only 2-D)", ni);
  if (!read_spatial(im, "strides", 2, 1, s) ||
      !read_spatial(im, "dilations", 2, 1, d) ||
      !read_spatial(im, "pads", 4, 0, p))
    return false;
  if (fzOnnxRank(x) != 3 || !fzOnnxRequireStatic(im, x, "the input"))
    return fzOnnxRank(x) == 3 ? false
                              : fzOnnxError(im, "input must have rank 3");
  int64_t n = fzOnnxDim(x, 0), ck = fzOnnxDim(x, 1), l = fzOnnxDim(x, 2);
  int64_t keff[2], len[2], k, positions;
  for (int i = 0; i < 2; ++i) {
    if (!fzOnnxCheckDim(im, image[i], "image size"))
      return false;
    if (block[i] < 1 || block[i] > ((int64_t)1 << 31) || s[i] < 1 ||
        s[i] > ((int64_t)1 << 31) || d[i] < 1 || d[i] > ((int64_t)1 << 31))
      return fzOnnxError(im, "block sizes, 'strides' and 'dilations' must "
                             "be in [1, 2^31]");
    if (p[i] < 0 || p[i] > FZ_MAX_DIM || p[2 + i] < 0 ||
        p[2 + i] > FZ_MAX_DIM)
      return fzOnnxError(im, "'pads' must be in [0, 2^40]");
    keff[i] = (block[i] - 1) * d[i] + 1; /* at most 2^62 */
    int64_t span = image[i] + p[i] + p[2 + i] - keff[i];
    if (span < 0)
      return fzOnnxError(im, "block %lld (dilated) is larger than the "
                             "padded image dimension %d",
                         (long long)block[i], i);
    len[i] = span / s[i] + 1;
  }
  if (!fzOnnxMulI64(block[0], block[1], &k) || k > FZ_ONNX_FOLD_LIMIT ||
      ck % k || !fzOnnxMulI64(len[0], len[1], &positions) || positions != l)
    return fzOnnxError(im, "input of shape [%lld, %lld, %lld] does not hold "
                           "C x %lld x %lld blocks at %lld x %lld positions",
                       (long long)n, (long long)ck, (long long)l,
                       (long long)block[0], (long long)block[1],
                       (long long)len[0], (long long)len[1]);
  int64_t c = ck / k, wshape[4] = {c, k, block[0], block[1]};
  if (!fzOnnxCheckBuilt(im, 4, wshape, "kernel of block positions", NULL))
    return false;
  int64_t s4[4] = {n, ck, len[0], len[1]};
  FzValue *y = fzOnnxReshape(im, x, 4, s4);
  if (s[0] > 1 || s[1] > 1) {
    /* [N,CK,Lh,Lw] -> [N,CK,Lh,1,Lw,1] -> [N,CK,Lh,sh,Lw,sw] -> cropped
     * to (Lh-1)*sh+1 x (Lw-1)*sw+1: zeros between the blocks. */
    int64_t s6[6] = {n, ck, len[0], 1, len[1], 1}, pad6[12] = {0};
    pad6[6 + 3] = s[0] - 1;
    pad6[6 + 5] = s[1] - 1;
    int64_t h = len[0] * s[0], w = len[1] * s[1];
    if (h > FZ_MAX_DIM || w > FZ_MAX_DIM) /* len * s <= span + s */
      return fzOnnxError(im, "the strided blocks are larger than 2^40");
    int64_t st[4] = {0}, lim[4] = {n, ck, h - s[0] + 1, w - s[1] + 1};
    int64_t one[4] = {1, 1, 1, 1}, sw[4] = {n, ck, h, w};
    y = fzOnnxReshape(im, y, 6, s6);
    y = fzOnnxEmit(im, "graph.pad", 1, &y, NULL, "pads",
                   i64_array(im, 12, pad6), NULL);
    y = fzOnnxSlice(im, fzOnnxReshape(im, y, 4, sw), st, lim, one);
  }
  int64_t pad4[8] = {0};
  for (int i = 0; i < 2; ++i) {
    int64_t extra = image[i] + p[i] + p[2 + i] - keff[i] -
                    (len[i] - 1) * s[i]; /* in [0, s) */
    pad4[2 + i] = keff[i] - 1 - p[i];
    pad4[4 + 2 + i] = keff[i] - 1 - p[2 + i] + extra;
  }
  y = fzOnnxEmit(im, "graph.pad", 1, &y, NULL, "pads",
                 i64_array(im, 8, pad4), NULL);
  FzTensor *wt = fzTensorCreate(im->ctx, fzOnnxElt(x), 4, wshape);
  if (!wt)
    return false;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t b = 0; b < k; ++b) {
      int64_t u = block[0] - 1 - b / block[1], v = block[1] - 1 - b % block[1];
      fzTensorSetF64(wt, ((ch * k + b) * block[0] + u) * block[1] + v, 1.0);
    }
  FzValue *ops[2] = {y, fzOnnxConstTensor(im, wt)};
  fzTensorDestroy(wt);
  int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
  out[0] = fzOnnxEmit(
      im, "graph.conv2d", 2, ops, NULL, "strides", i64_array(im, 2, ones),
      "pads", i64_array(im, 4, zeros), "dilations", i64_array(im, 2, d),
      "groups", fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), c),
      NULL);
  return out[0] != NULL;
}

/*===--- Normalizations --------------------------------------------------===*/

static bool h_batch_norm(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                         FzValue **out, size_t nOut) {
  (void)nIn;
  double eps, momentum;
  int64_t training, spatial;
  if (!fzOnnxAttrFloat(im, "epsilon", 1e-5, &eps) ||
      !fzOnnxAttrFloat(im, "momentum", 0.9, &momentum) ||
      !fzOnnxAttrInt(im, "training_mode", 0, &training) ||
      !fzOnnxAttrInt(im, "spatial", 1, &spatial))
    return false;
  if (!spatial)
    return fzOnnxErrorAttrValue(im, "spatial", "0");
  for (size_t i = 1; i < 5; ++i)
    if (!in[i])
      return fzOnnxError(im, "input #%zu is required", i);
  bool wantStats = nOut > 1 && im->node->output[1][0];
  if (wantStats && !training)
    return fzOnnxError(im, "unsupported output #1 outside training mode");
  if (!training) {
    out[0] = fzOnnxEmit(im, "graph.batch_norm", 5, in, NULL, "epsilon",
                        fzOnnxFloatAttr(im, eps), NULL);
    return out[0] != NULL;
  }
  /* Training mode: normalize with the batch's statistics (population
   * variance over every dim but the channels) and update the running
   * ones: running = running * momentum + batch * (1 - momentum). */
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  if (r < 2)
    return fzOnnxError(im, "input must have rank >= 2");
  int64_t axes[FZ_GRAPH_MAX_RANK];
  size_t na = 0;
  for (size_t i = 0; i < r; ++i)
    if (i != 1)
      axes[na++] = (int64_t)i;
  FzValue *meanK = fzOnnxReduce(im, "graph.reduce_mean", x, na, axes, true);
  FzValue *d = fzOnnxBinary(im, "graph.sub", x, meanK);
  FzValue *var = fzOnnxReduce(im, "graph.reduce_mean",
                              fzOnnxBinary(im, "graph.mul", d, d), na, axes,
                              false);
  FzValue *mean = fzOnnxReduce(im, "graph.reduce_mean", x, na, axes, false);
  FzValue *ops[5] = {x, in[1], in[2], mean, var};
  out[0] = fzOnnxEmit(im, "graph.batch_norm", 5, ops, NULL, "epsilon",
                      fzOnnxFloatAttr(im, eps), NULL);
  for (size_t k = 1; k < 3 && k < nOut; ++k) {
    if (!im->node->output[k][0])
      continue;
    FzValue *run = in[k + 2], *batch = k == 1 ? mean : var;
    out[k] = fzOnnxBinary(
        im, "graph.add",
        fzOnnxBinary(im, "graph.mul", run, scalar_like(im, run, momentum)),
        fzOnnxBinary(im, "graph.mul", batch,
                     scalar_like(im, batch, 1 - momentum)));
  }
  return out[0] != NULL;
}

/* [C] -> [C, 1, ..., 1] with `trailing` ones. */
static FzValue *per_channel(FzOnnxImporter *im, FzValue *v,
                            size_t trailing) {
  int64_t s[FZ_GRAPH_MAX_RANK];
  if (!v || fzOnnxRank(v) != 1 || trailing + 1 > FZ_GRAPH_MAX_RANK)
    return v;
  s[0] = fzOnnxDim(v, 0);
  for (size_t i = 0; i < trailing; ++i)
    s[1 + i] = 1;
  return fzOnnxReshape(im, v, 1 + trailing, s);
}

static bool h_instance_norm(FzOnnxImporter *im, FzValue *const *in,
                            size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  double eps;
  if (!fzOnnxAttrFloat(im, "epsilon", 1e-5, &eps))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  if (r < 3)
    return fzOnnxError(im, "input must have rank >= 3");
  FzValue *y = fzOnnxEmit(im, "graph.layer_norm", 1, &x, NULL, "axis",
                          fzIntegerAttrGet(im->ctx,
                                           fzIntegerTypeGet(im->ctx, 64), 2),
                          "epsilon", fzOnnxFloatAttr(im, eps), NULL);
  y = fzOnnxBinary(im, "graph.mul", y, per_channel(im, in[1], r - 2));
  out[0] = fzOnnxBinary(im, "graph.add", y, per_channel(im, in[2], r - 2));
  return out[0] != NULL;
}

/* The element type of an ONNX float dtype (stash_type), or NULL. */
static FzType *stash_type(FzOnnxImporter *im, int64_t dt) {
  bool isFloat = dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
                 dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
                 dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
                 dt == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
  return isFloat ? fzOnnxElementType(im->ctx, (int32_t)dt) : NULL;
}

/* GroupNormalization: x [N, C, ...] viewed as [N, G, C/G * ...],
 * graph.layer_norm over its last dim, then the scale and bias: per group
 * in version 18 (shape [G]), per channel in version 21 (shape [C]), where
 * the normalization runs in stash_type (cast there and back). */
static bool h_group_norm(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                         FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  double eps;
  int64_t groups, stash;
  if (!fzOnnxAttrFloat(im, "epsilon", 1e-5, &eps) ||
      !fzOnnxAttrInt(im, "num_groups", 0, &groups) ||
      !fzOnnxAttrInt(im, "stash_type", 1, &stash))
    return false;
  if (!fzOnnxAttr(im, "num_groups"))
    return fzOnnxError(im, "requires attribute 'num_groups'");
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  if (r < 2)
    return fzOnnxError(im, "input must have rank >= 2");
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  int64_t n = fzOnnxDim(x, 0), c = fzOnnxDim(x, 1), rest = 1;
  if (groups < 1 || c % groups)
    return fzOnnxError(im, "attribute 'num_groups' (%lld) must be positive "
                           "and divide the channels (%lld)",
                       (long long)groups, (long long)c);
  for (size_t i = 2; i < r; ++i)
    rest *= fzOnnxDim(x, i); /* a factor of x's element count */
  bool perChannel = im->opVersion >= 21;
  int64_t want = perChannel ? c : groups;
  for (size_t i = 1; i < 3; ++i)
    if (fzOnnxRank(in[i]) != 1 || fzOnnxDim(in[i], 0) != want)
      return fzOnnxError(im, "input #%zu (%s) must have shape [%lld] (%s)", i,
                         i == 1 ? "scale" : "bias", (long long)want,
                         perChannel ? "one per channel"
                                    : "one per group, as in version 18");
  FzType *elt = fzOnnxElt(x), *work = elt;
  if (perChannel && !(work = stash_type(im, stash)))
    return fzOnnxError(im, "unsupported attribute 'stash_type' value %lld "
                           "(a float dtype is needed)", (long long)stash);
  int64_t s3[3] = {n, groups, c / groups * rest};
  FzValue *y = fzOnnxReshape(im, fzOnnxCast(im, x, work), 3, s3);
  y = fzOnnxEmit(im, "graph.layer_norm", 1, &y, NULL, "axis",
                 fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), 2),
                 "epsilon", fzOnnxFloatAttr(im, eps), NULL);
  if (!perChannel) {
    int64_t g3[3] = {1, groups, 1};
    y = fzOnnxBinary(im, "graph.mul", y, fzOnnxReshape(im, in[1], 3, g3));
    y = fzOnnxBinary(im, "graph.add", y, fzOnnxReshape(im, in[2], 3, g3));
    out[0] = fzOnnxReshape(im, y, r, fzOnnxShape(x));
    return out[0] != NULL;
  }
  y = fzOnnxCast(im, fzOnnxReshape(im, y, r, fzOnnxShape(x)), elt);
  y = fzOnnxBinary(im, "graph.mul", y, per_channel(im, in[1], r - 2));
  out[0] = fzOnnxBinary(im, "graph.add", y, per_channel(im, in[2], r - 2));
  return out[0] != NULL;
}

/* LayerNormalization: graph.layer_norm, with its three results when the
 * node asks for Mean or InvStdDev (their type is x's element type, as
 * the reductions that computed them before gave; stash_type is read and
 * checked but computing in f64 already covers its precision). */
static bool h_layer_norm(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                         FzValue **out, size_t nOut) {
  double eps;
  int64_t axis, stash;
  if (!fzOnnxAttrFloat(im, "epsilon", 1e-5, &eps) ||
      !fzOnnxAttrInt(im, "axis", -1, &axis) ||
      !fzOnnxAttrInt(im, "stash_type", 1, &stash))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x), ax;
  if (!fzOnnxNormAxis(im, axis, r, &ax))
    return false;
  FzValue *ops[3] = {x, in[1], nIn > 2 ? in[2] : NULL};
  size_t n = ops[2] ? 3 : 2;
  FzAttr *axisAttr =
      fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), (int64_t)ax);
  bool wantMean = nOut > 1 && im->node->output[1][0];
  bool wantInv = nOut > 2 && im->node->output[2][0];
  if (!wantMean && !wantInv) {
    out[0] = fzOnnxEmit(im, "graph.layer_norm", n, ops, NULL, "axis",
                        axisAttr, "epsilon", fzOnnxFloatAttr(im, eps), NULL);
    return out[0] != NULL;
  }
  const FzOpDef *def =
      fzContextLookupOpDef(im->ctx, FZ_STR("graph.layer_norm"));
  FzAttr *epsAttr = fzOnnxFloatAttr(im, eps);
  FzNamedAttr props[2] = {{fzIdentGet(im->ctx, FZ_STR("axis")), axisAttr},
                          {fzIdentGet(im->ctx, FZ_STR("epsilon")), epsAttr}};
  FzAttr *dict = axisAttr && epsAttr && props[0].name && props[1].name
                     ? fzDictAttrGet(im->ctx, 2, props, im->nodeLoc)
                     : NULL;
  FzType *types[3], *types4[4] = {NULL, NULL, NULL, NULL};
  for (size_t i = 0; i < n; ++i)
    types[i] = ops[i] ? fzValueGetType(ops[i]) : NULL;
  if (!def || !dict || !ops[1] || (n > 2 && !ops[2]) ||
      !def->inferResultTypes(im->ctx, im->nodeLoc, n, types, NULL, dict,
                             types4))
    return false;
  FzOpState st;
  fzOpStateInit(&st, im->ctx, FZ_STR("graph.layer_norm"), im->nodeLoc);
  fzOpStateAddOperands(&st, n, ops);
  fzOpStateAddProp(&st, FZ_STR("axis"), axisAttr);
  fzOpStateAddProp(&st, FZ_STR("epsilon"), epsAttr);
  fzOpStateAddResults(&st, 3, types4);
  FzOp *op = fzBuilderCreate(&im->b, &st);
  if (!op)
    return false;
  if (!fzOpVerify(op)) {
    fzOpErase(op);
    return false;
  }
  for (size_t i = 0; i < 3 && i < nOut; ++i)
    out[i] = fzOpGetResult(op, i);
  return true;
}

static bool h_mvn(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t *axes, dflt[3] = {0, 2, 3};
  size_t n;
  bool present;
  if (!fzOnnxAttrInts(im, "axes", &axes, &n, &present))
    return false;
  if (!present)
    axes = dflt, n = 3;
  FzValue *x = in[0];
  FzValue *mean = fzOnnxReduce(im, "graph.reduce_mean", x, n, axes, true);
  FzValue *meanSq = fzOnnxReduce(im, "graph.reduce_mean",
                                 fzOnnxBinary(im, "graph.mul", x, x), n, axes,
                                 true);
  FzValue *var = fzOnnxBinary(im, "graph.sub", meanSq,
                              fzOnnxBinary(im, "graph.mul", mean, mean));
  FzValue *sd = fzOnnxBinary(im, "graph.add", fzOnnxUnary(im, "graph.sqrt", var),
                             scalar_like(im, x, 1e-9));
  out[0] = fzOnnxBinary(im, "graph.div", fzOnnxBinary(im, "graph.sub", x, mean),
                        sd);
  return out[0] != NULL;
}

/* LRN: x / (bias + alpha / size * sum of squares over a channel window)
 * ^ beta, the window sum built from shifted slices of a padded square. */
static bool h_lrn(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  double alpha, beta, bias;
  int64_t size;
  if (!fzOnnxAttrFloat(im, "alpha", 1e-4, &alpha) ||
      !fzOnnxAttrFloat(im, "beta", 0.75, &beta) ||
      !fzOnnxAttrFloat(im, "bias", 1.0, &bias) ||
      !fzOnnxAttrInt(im, "size", 0, &size))
    return false;
  FzValue *x = in[0];
  size_t r = fzOnnxRank(x);
  if (size < 1)
    return fzOnnxError(im, "requires attribute 'size' >= 1");
  if (r < 2 || !fzOnnxRequireStatic(im, x, "the input"))
    return false;
  /* Channels beyond C - 1 on either side only add zeros: the window is
   * capped there, so that a huge 'size' neither loops nor pads for long
   * (alpha is still divided by the given size, as ONNX defines). */
  int64_t c = fzOnnxDim(x, 1);
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  lo = lo < c ? lo : (c > 0 ? c - 1 : 0);
  hi = hi < c ? hi : (c > 0 ? c - 1 : 0);
  int64_t pads[2 * FZ_GRAPH_MAX_RANK] = {0};
  pads[1] = lo;
  pads[r + 1] = hi;
  FzValue *sq = fzOnnxBinary(im, "graph.mul", x, x);
  FzValue *padded = fzOnnxEmit(im, "graph.pad", 1, &sq, NULL, "pads",
                               i64_array(im, 2 * r, pads), NULL);
  int64_t starts[FZ_GRAPH_MAX_RANK] = {0}, limits[FZ_GRAPH_MAX_RANK];
  int64_t strides[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    limits[i] = fzOnnxDim(x, i), strides[i] = 1;
  FzValue *sum = NULL;
  for (int64_t j = 0; j <= lo + hi; ++j) {
    starts[1] = j;
    limits[1] = j + fzOnnxDim(x, 1);
    FzValue *s = fzOnnxSlice(im, padded, starts, limits, strides);
    sum = sum ? fzOnnxBinary(im, "graph.add", sum, s) : s;
  }
  FzValue *d = fzOnnxBinary(
      im, "graph.add", scalar_like(im, x, bias),
      fzOnnxBinary(im, "graph.mul", sum,
                   scalar_like(im, x, alpha / (double)size)));
  d = fzOnnxBinary(im, "graph.pow", d, scalar_like(im, x, beta));
  out[0] = fzOnnxBinary(im, "graph.div", x, d);
  return out[0] != NULL;
}

/*===--- Softmax ---------------------------------------------------------===*/

static bool h_softmax(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
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
  FzAttr *last =
      fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), -1);
  if (!old || ax == r - 1) {
    FzAttr *a = fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64),
                                 (int64_t)ax);
    out[0] = fzOnnxEmit(im, im->row->graphOp, 1, &x, NULL, "axis", a, NULL);
    return out[0] != NULL;
  }
  /* Opsets < 13: softmax over the flattened dims [axis, rank). */
  if (!fzOnnxRequireStatic(im, x, "the input"))
    return false;
  int64_t s[2] = {1, 1};
  for (size_t i = 0; i < r; ++i)
    s[i < ax ? 0 : 1] *= fzOnnxDim(x, i);
  FzValue *flat = fzOnnxReshape(im, x, 2, s);
  FzValue *y = fzOnnxEmit(im, im->row->graphOp, 1, &flat, NULL, "axis",
                          last, NULL);
  out[0] = fzOnnxReshape(im, y, r, fzOnnxShape(x));
  return out[0] != NULL;
}

/*===--- Dropout ---------------------------------------------------------===*/

static bool h_dropout(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  int64_t seed, isTest;
  double ratio;
  if (!fzOnnxAttrInt(im, "seed", 0, &seed) ||
      !fzOnnxAttrInt(im, "is_test", 1, &isTest) ||
      !fzOnnxAttrFloat(im, "ratio", 0.5, &ratio))
    return false;
  bool training = !isTest;
  if (nIn > 2 && in[2]) {
    int64_t *t;
    size_t n;
    if (!fzOnnxGetConstInts(im, in[2], &t, &n) || n != 1)
      return fzOnnxErrorNotConstant(im, 2, "training_mode");
    training = t[0] != 0;
  }
  if (training && nIn > 1 && in[1]) {
    double *rv;
    size_t n;
    if (!fzOnnxGetConstFloats(im, in[1], &rv, &n) || n != 1)
      return fzOnnxErrorNotConstant(im, 1, "ratio");
    ratio = rv[0];
  }
  if (training && ratio != 0)
    return fzOnnxError(im, "unsupported training-mode dropout (random)");
  out[0] = in[0];
  if (nOut > 1 && im->node->output[1][0]) {
    if (!fzOnnxRequireStatic(im, in[0], "the input"))
      return false;
    out[1] = fzOnnxConstSplat(im, fzIntegerTypeGet(im->ctx, 1),
                              fzOnnxRank(in[0]), fzOnnxShape(in[0]), 1);
  }
  return true;
}

/*===--- The table -------------------------------------------------------===*/

const FzOnnxOpDef fzOnnxNnOps[] = {
    {"MatMul", h_matmul, NULL, "", 2, 2, 1},
    {"Gemm", h_gemm, NULL, "alpha beta transA transB", 2, 3, 1},
    {"Conv", h_conv, NULL,
     "auto_pad dilations group kernel_shape pads strides", 2, 3, 1},
    {"ConvTranspose", h_conv_transpose, NULL,
     "auto_pad dilations group kernel_shape output_padding output_shape pads "
     "strides",
     2, 3, 1},
    {"MaxPool", h_pool, NULL,
     "auto_pad ceil_mode dilations kernel_shape pads storage_order strides",
     1, 1, 2},
    {"AveragePool", h_pool, NULL,
     "auto_pad ceil_mode count_include_pad dilations>=19 kernel_shape pads "
     "strides",
     1, 1, 1},
    {"LpPool", h_lp_pool, NULL,
     "auto_pad ceil_mode>=18 dilations>=18 kernel_shape p pads strides", 1,
     1, 1},
    {"Col2Im", h_col2im, NULL, "dilations pads strides", 3, 3, 1},
    {"GlobalAveragePool", h_global_pool, "graph.global_avg_pool", "", 1, 1,
     1},
    {"GlobalMaxPool", h_global_pool, "graph.global_max_pool", "", 1, 1, 1},
    {"BatchNormalization", h_batch_norm, NULL,
     "epsilon momentum training_mode spatial", 5, 5, 3},
    {"InstanceNormalization", h_instance_norm, NULL, "epsilon", 3, 3, 1},
    {"GroupNormalization", h_group_norm, NULL,
     "epsilon num_groups stash_type>=21", 3, 3, 1},
    {"LayerNormalization", h_layer_norm, NULL, "axis epsilon stash_type", 2,
     3, 3},
    {"MeanVarianceNormalization", h_mvn, NULL, "axes", 1, 1, 1},
    {"LRN", h_lrn, NULL, "alpha beta bias size", 1, 1, 1},
    {"Softmax", h_softmax, "graph.softmax", "axis", 1, 1, 1},
    {"LogSoftmax", h_softmax, "graph.log_softmax", "axis", 1, 1, 1},
    {"Dropout", h_dropout, NULL, "ratio seed is_test", 1, 3, 2},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

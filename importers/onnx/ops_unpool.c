/* importers/onnx/ops_unpool.c - MaxPool's Indices output and MaxUnpool.
 *
 * Indices. graph.max_pool gives the maxima Y; the index of each is found
 * by comparing, for every kernel offset (kh, kw), the input element that
 * offset reads (a strided slice of the padded input: [N, C, OH, OW]) with
 * Y. Where they are equal (or the element is NaN) the offset's flat
 * position (a constant table over [OH, OW] of h * W + w; positions in the
 * padding never win) is a candidate; graph.min over the offsets takes the
 * first in window order (the offsets, row-major, read increasing
 * positions; ONNX's reference and ONNX Runtime keep the first maximum),
 * storage_order 1 then maps h * W + w to w * H + h, and a constant
 * [N, C, 1, 1] of (n * C + c) * H * W makes it the index into the
 * flattened input. All of it is elementwise, so fusion puts it with the
 * pool's consumers.
 *
 * MaxUnpool is a graph.scatter_nd of X's values into zeros of the shape
 * the window gives ((in - 1) * stride - pads + kernel per spatial dim),
 * flattened, at the flat positions I holds (graph.scatter_nd reports a
 * position out of range at run time); a larger `output_shape` pads that
 * at the end of each dim with zeros, as ONNX's reference places it.
 */
#include <string.h>

#include "importers/onnx/onnx_internal.h"

/* Larger than any flat position, with room for the base added to it. */
#define NO_MATCH (INT64_MAX / 2)

FzValue *fzOnnxMaxPoolIndices(FzOnnxImporter *im, FzValue *x, FzValue *y,
                              const int64_t *kernel, const int64_t *strides,
                              const int64_t *dilations, const int64_t *pads,
                              bool columnMajor) {
  if (!x || !y || !fzOnnxRequireStatic(im, x, "the input"))
    return NULL;
  const int64_t *X = fzOnnxShape(x);
  int64_t n = X[0], c = X[1], h = X[2], w = X[3];
  int64_t oh = fzOnnxDim(y, 2), ow = fzOnnxDim(y, 3), plane, total;
  if (!fzOnnxMulI64(h, w, &plane) || !fzOnnxMulI64(plane, c, &total) ||
      !fzOnnxMulI64(total, n, &total)) {
    fzOnnxError(im, "the input holds too many elements");
    return NULL;
  }
  int64_t tshape[2] = {oh, ow}, bshape[4] = {n, c, 1, 1}, nc = n * c;
  if (!fzOnnxCheckBuilt(im, 2, tshape, "index table", NULL) ||
      !fzOnnxCheckBuilt(im, 4, bshape, "index table", NULL))
    return NULL;
  /* Pad so that every window lies inside: the padded extent the windows
   * read is (O - 1) * s + (K - 1) * d + 1 along each axis. */
  int64_t p[8] = {0, 0, pads[0], pads[1], 0, 0, 0, 0};
  int64_t in[2] = {h, w}, out[2] = {oh, ow};
  for (size_t a = 0; a < 2; ++a) {
    int64_t need = (out[a] - 1) * strides[a] +
                   (kernel[a] - 1) * dilations[a] + 1;
    p[6 + a] = need - pads[a] - in[a] > 0 ? need - pads[a] - in[a] : 0;
  }
  FzValue *xp = fzOnnxEmit(
      im, "graph.pad", 1, &x, NULL, "pads",
      fzDenseArrayAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), 8, p),
      NULL);
  size_t cells = (size_t)(oh * ow) + 1;
  int64_t *table = fzOnnxAlloc(im, cells * sizeof *table);
  int64_t *base = fzOnnxAlloc(im, (size_t)(nc ? nc : 1) * sizeof *base);
  if (!xp || !table || !base)
    return NULL;
  int64_t none = NO_MATCH;
  FzValue *noMatch = fzOnnxConstI64(im, 0, NULL, &none), *best = NULL;
  for (int64_t kh = 0; kh < kernel[0]; ++kh)
    for (int64_t kw = 0; kw < kernel[1]; ++kw) {
      bool any = false;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t r = i * strides[0] + kh * dilations[0] - pads[0];
          int64_t s = j * strides[1] + kw * dilations[1] - pads[1];
          bool inside = r >= 0 && r < h && s >= 0 && s < w;
          any = any || inside;
          table[i * ow + j] = inside ? r * w + s : NO_MATCH;
        }
      if (!any)
        continue;
      int64_t starts[4] = {0, 0, kh * dilations[0], kw * dilations[1]};
      int64_t limits[4] = {n, c, starts[2] + (oh - 1) * strides[0] + 1,
                           starts[3] + (ow - 1) * strides[1] + 1};
      int64_t steps[4] = {1, 1, strides[0], strides[1]};
      FzValue *cand = fzOnnxSlice(im, xp, starts, limits, steps);
      FzValue *match =
          fzOnnxBinary(im, "graph.or", fzOnnxCompare(im, "eq", cand, y),
                       fzOnnxCompare(im, "ne", cand, cand));
      FzValue *idx = fzOnnxSelect(im, match, fzOnnxConstI64(im, 2, tshape,
                                                            table),
                                  noMatch);
      best = best ? fzOnnxBinary(im, "graph.min", best, idx) : idx;
      if (!best)
        return NULL;
    }
  if (!best) {
    fzOnnxError(im, "unsupported Indices output: a window lies in the "
                    "padding only");
    return NULL;
  }
  if (columnMajor) { /* row-major r * W + s -> s * H + r */
    FzType *i64 = fzIntegerTypeGet(im->ctx, 64);
    FzValue *wv = fzOnnxConstScalar(im, i64, (double)w);
    FzValue *r = fzOnnxBinary(im, "graph.div", best, wv);
    FzValue *s = fzOnnxBinary(im, "graph.rem", best, wv);
    best = fzOnnxBinary(im, "graph.add",
                        fzOnnxBinary(im, "graph.mul", s,
                                     fzOnnxConstScalar(im, i64, (double)h)),
                        r);
  }
  for (int64_t i = 0; i < nc; ++i)
    base[i] = i * plane;
  return fzOnnxBinary(im, "graph.add", best,
                      fzOnnxConstI64(im, 4, bshape, base));
}

static bool h_max_unpool(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                         FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0], *ind = in[1];
  size_t r = fzOnnxRank(x);
  if (r < 3)
    return fzOnnxError(im, "input must have rank >= 3");
  size_t sp = r - 2;
  if (!fzOnnxRequireStatic(im, x, "the input") ||
      !fzOnnxRequireStatic(im, ind, "the indices"))
    return false;
  if (fzOnnxRank(ind) != r || memcmp(fzOnnxShape(ind), fzOnnxShape(x),
                                     r * sizeof(int64_t)) ||
      fzOnnxElt(ind) != fzIntegerTypeGet(im->ctx, 64))
    return fzOnnxError(im, "input #1 (I) must be int64 of the shape of X");
  int64_t *k, *s, *p;
  size_t nk, ns, np;
  bool hk, hs, hp;
  if (!fzOnnxAttrInts(im, "kernel_shape", &k, &nk, &hk) ||
      !fzOnnxAttrInts(im, "strides", &s, &ns, &hs) ||
      !fzOnnxAttrInts(im, "pads", &p, &np, &hp))
    return false;
  if (!hk || nk != sp)
    return fzOnnxError(im, "requires attribute 'kernel_shape' with %zu "
                           "entries", sp);
  if ((hs && ns != sp) || (hp && np != 2 * sp))
    return fzOnnxError(im, "attributes 'strides' and 'pads' need %zu and "
                           "%zu entries", sp, 2 * sp);
  /* The shape the positions index: inferred from the window. */
  int64_t shape[FZ_GRAPH_MAX_RANK], want[FZ_GRAPH_MAX_RANK];
  const int64_t *X = fzOnnxShape(x);
  shape[0] = X[0], shape[1] = X[1];
  for (size_t i = 0; i < sp; ++i) {
    int64_t st = hs ? s[i] : 1, pb = hp ? p[i] : 0, pe = hp ? p[sp + i] : 0;
    if (st < 1 || k[i] < 1 || pb < 0 || pe < 0 || st > FZ_MAX_DIM ||
        k[i] > FZ_MAX_DIM || pb > FZ_MAX_DIM || pe > FZ_MAX_DIM)
      return fzOnnxError(im, "attributes 'kernel_shape', 'strides' and "
                             "'pads' must be positive (pads non-negative) "
                             "and at most 2^40");
    int64_t span; /* (in - 1) * stride: each factor at most 2^40 */
    if (!fzOnnxMulI64(X[2 + i] > 0 ? X[2 + i] - 1 : 0, st, &span) ||
        span > FZ_MAX_ELEMENTS)
      return fzOnnxError(im, "the output's dimension %zu is out of range",
                         2 + i);
    shape[2 + i] = X[2 + i] > 0 ? span - pb - pe + k[i] : 0;
  }
  memcpy(want, shape, r * sizeof *want);
  if (nIn > 2 && in[2]) {
    int64_t *os;
    size_t no;
    if (!fzOnnxGetConstInts(im, in[2], &os, &no))
      return fzOnnxErrorNotConstant(im, 2, "output_shape");
    if (no != r)
      return fzOnnxError(im, "input #2 (output_shape) must have %zu "
                             "entries", r);
    for (size_t i = 0; i < r; ++i)
      if (os[i] < shape[i] || (i < 2 && os[i] != shape[i]) ||
          os[i] > FZ_MAX_DIM)
        return fzOnnxError(im, "input #2 (output_shape) entry %zu (%lld) "
                               "must be %s%lld (the shape the window "
                               "gives)",
                           i, (long long)os[i], i < 2 ? "" : "at least ",
                           (long long)shape[i]);
    memcpy(want, os, r * sizeof *want);
  }
  int64_t total = 1, m = 1, one[2];
  for (size_t i = 0; i < r; ++i) {
    if (!fzOnnxCheckDim(im, shape[i], "output dimension") ||
        !fzOnnxCheckDim(im, want[i], "output dimension"))
      return false;
    if (!fzOnnxMulI64(total, want[i], &total) || total > FZ_MAX_ELEMENTS)
      return fzOnnxError(im, "the output holds more than 2^48 elements");
    m *= X[i]; /* X is a tensor: its count is in range */
  }
  total = 1;
  for (size_t i = 0; i < r; ++i)
    total *= shape[i]; /* at most the output's count */
  one[0] = m, one[1] = 1;
  FzValue *ops[3] = {fzOnnxConstSplat(im, fzOnnxElt(x), 1, &total, 0.0),
                     fzOnnxReshape(im, ind, 2, one),
                     fzOnnxReshape(im, x, 1, &m)};
  FzValue *flat = fzOnnxEmit(im, "graph.scatter_nd", 3, ops, NULL, NULL);
  FzValue *y = fzOnnxReshape(im, flat, r, shape);
  /* A larger output_shape holds the unpooled tensor at its origin (ONNX's
   * reference), zeros after it. */
  int64_t pads[2 * FZ_GRAPH_MAX_RANK] = {0};
  bool grow = false;
  for (size_t i = 0; i < r; ++i) {
    pads[r + i] = want[i] - shape[i];
    grow = grow || pads[r + i];
  }
  if (y && grow)
    y = fzOnnxEmit(
        im, "graph.pad", 1, &y, NULL, "pads",
        fzDenseArrayAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), 2 * r,
                            pads),
        NULL);
  out[0] = y;
  return out[0] != NULL;
}

const FzOnnxOpDef fzOnnxUnpoolOps[] = {
    {"MaxUnpool", h_max_unpool, NULL, "kernel_shape pads strides", 2, 3, 1},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

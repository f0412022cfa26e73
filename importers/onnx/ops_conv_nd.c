/* importers/onnx/ops_conv_nd.c - convolutions of 3 and more spatial dims
 * (Conv and ConvTranspose on [N, C, D1, ..., Dk] for k >= 3), built from
 * graph.conv2d.
 *
 * A k-D convolution is a sum over the first kernel axis of (k-1)-D ones:
 * out[n, m, o1, ...] = sum_j conv_{k-1}(x[n, :, o1*s1 + j*d1, ...],
 * w[m, :, j, ...]). The input is padded along that axis (begin and end
 * pads; negative pads crop), transposed once to [N, D1, C, ...], and for
 * each kernel position j the strided slice of D1 positions it reads is
 * folded into the batch ([N*O1, C, D2, ...]) and convolved with the
 * weight's slice j by the (k-1)-D convolution (groups, strides, pads and
 * dilations of the other axes unchanged); the bias is added once. The
 * partial results are summed and unfolded back to [N, M, O1, ...]. The
 * recursion ends at graph.conv2d, so a 3-D convolution with a kernel of
 * depth KD is KD graph.conv2d ops over batches of N*OD.
 *
 * ConvTranspose of k >= 3 spatial dims is the same convolution over the
 * input dilated by the strides (zeros between elements: a reshape to
 * [N, C, D1, 1, D2, 1, ...], a pad of the unit dims, a reshape and a
 * crop), padded by k_eff - 1 - pad (plus output_padding at the end), with
 * the weight regrouped to [M, C/g, ...] and flipped along every spatial
 * axis; ops_nn.c computes the pads as for 1-D and 2-D.
 */
#include <string.h>

#include "importers/onnx/onnx_internal.h"

static FzAttr *i64_array(FzOnnxImporter *im, size_t n, const int64_t *v) {
  return fzDenseArrayAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), n, v);
}

static FzValue *pad_value(FzOnnxImporter *im, FzValue *x,
                          const int64_t *pads) {
  size_t r = fzOnnxRank(x);
  bool zero = true;
  for (size_t i = 0; i < 2 * r; ++i)
    zero = zero && pads[i] == 0;
  if (zero)
    return x;
  return fzOnnxEmit(im, "graph.pad", 1, &x, NULL, "pads",
                    i64_array(im, 2 * r, pads), NULL);
}

FzValue *fzOnnxConvNd(FzOnnxImporter *im, FzValue *x, FzValue *w, FzValue *b,
                      size_t sp, const int64_t *strides, const int64_t *pads,
                      const int64_t *dilations, int64_t group) {
  if (!x || !w)
    return NULL;
  if (sp == 2) {
    FzValue *ops[3] = {x, w, b};
    return fzOnnxEmit(
        im, "graph.conv2d", b ? 3 : 2, ops, NULL, "strides",
        i64_array(im, 2, strides), "pads", i64_array(im, 4, pads),
        "dilations", i64_array(im, 2, dilations), "groups",
        fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), group),
        NULL);
  }
  size_t r = sp + 2;
  if (!fzOnnxRequireStatic(im, x, "the input") ||
      !fzOnnxRequireStatic(im, w, "the weight"))
    return NULL;
  if (fzOnnxRank(x) != r || fzOnnxRank(w) != r) {
    fzOnnxError(im, "the input and the weight must have rank %zu", r);
    return NULL;
  }
  const int64_t *X = fzOnnxShape(x), *W = fzOnnxShape(w);
  int64_t n = X[0], c = X[1], m = W[0], kd = W[2];
  /* Pads, strides and dilations were checked by the caller: |pad| and
   * the dims at most 2^40, strides and dilations at most 2^31. */
  int64_t dp = X[2] + pads[0] + pads[sp];
  int64_t keff = (kd - 1) * dilations[0] + 1;
  if (kd < 1 || dp < keff) {
    fzOnnxError(im, "the kernel (%lld along spatial axis 0, dilated) is "
                    "larger than the padded input (%lld)",
                (long long)keff, (long long)dp);
    return NULL;
  }
  int64_t od = (dp - keff) / strides[0] + 1, nod;
  if (!fzOnnxMulI64(n, od, &nod) || nod > FZ_MAX_DIM) {
    fzOnnxError(im, "the batch times the output depth is larger than 2^40");
    return NULL;
  }
  int64_t p[2 * FZ_GRAPH_MAX_RANK] = {0};
  p[2] = pads[0];
  p[r + 2] = pads[sp];
  FzValue *xp = pad_value(im, x, p);
  /* [N, C, Dp, ...] -> [N, Dp, C, ...] */
  int64_t perm[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    perm[i] = (int64_t)i;
  perm[1] = 2, perm[2] = 1;
  FzValue *xt = fzOnnxTranspose(im, xp, r, perm);
  /* The sub-convolution's window: the other axes'. */
  int64_t subPads[2 * FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i + 1 < sp; ++i) {
    subPads[i] = pads[1 + i];
    subPads[sp - 1 + i] = pads[sp + 1 + i];
  }
  FzValue *acc = NULL;
  for (int64_t j = 0; j < kd && xt; ++j) {
    int64_t st[FZ_GRAPH_MAX_RANK] = {0}, lim[FZ_GRAPH_MAX_RANK],
            step[FZ_GRAPH_MAX_RANK];
    for (size_t i = 0; i < r; ++i) {
      lim[i] = fzOnnxDim(xt, i);
      step[i] = 1;
    }
    st[1] = j * dilations[0];
    lim[1] = st[1] + (od - 1) * strides[0] + 1;
    step[1] = strides[0];
    FzValue *xs = fzOnnxSlice(im, xt, st, lim, step);
    int64_t fold[FZ_GRAPH_MAX_RANK];
    fold[0] = nod, fold[1] = c;
    for (size_t i = 3; i < r; ++i)
      fold[i - 1] = X[i];
    xs = fzOnnxReshape(im, xs, r - 1, fold);
    int64_t ws[FZ_GRAPH_MAX_RANK] = {0}, wl[FZ_GRAPH_MAX_RANK],
            wstep[FZ_GRAPH_MAX_RANK], wshape[FZ_GRAPH_MAX_RANK];
    for (size_t i = 0; i < r; ++i) {
      wl[i] = W[i];
      wstep[i] = 1;
    }
    ws[2] = j, wl[2] = j + 1;
    wshape[0] = m, wshape[1] = W[1];
    for (size_t i = 3; i < r; ++i)
      wshape[i - 1] = W[i];
    FzValue *wj =
        fzOnnxReshape(im, fzOnnxSlice(im, w, ws, wl, wstep), r - 1, wshape);
    FzValue *y = fzOnnxConvNd(im, xs, wj, j == 0 ? b : NULL, sp - 1,
                              strides + 1, subPads, dilations + 1, group);
    acc = acc ? fzOnnxBinary(im, "graph.add", acc, y) : y;
    if (!acc)
      return NULL;
  }
  if (!acc)
    return NULL;
  /* [N*OD, M, O...] -> [N, OD, M, O...] -> [N, M, OD, O...] */
  int64_t unfold[FZ_GRAPH_MAX_RANK];
  unfold[0] = n, unfold[1] = od, unfold[2] = m;
  for (size_t i = 2; i < r - 1; ++i)
    unfold[i + 1] = fzOnnxDim(acc, i);
  FzValue *y = fzOnnxReshape(im, acc, r, unfold);
  return fzOnnxTranspose(im, y, r, perm);
}

FzValue *fzOnnxConvTransposeNd(FzOnnxImporter *im, FzValue *x, FzValue *w,
                               FzValue *b, size_t sp, const int64_t *strides,
                               const int64_t *pads, const int64_t *dilations,
                               const int64_t *outputPadding, int64_t group) {
  size_t r = sp + 2;
  if (!x || !w)
    return NULL;
  if (2 * sp + 2 > FZ_GRAPH_MAX_RANK) {
    fzOnnxError(im, "unsupported transposed convolution of %zu spatial "
                    "dimensions (at most %d)", sp,
                (FZ_GRAPH_MAX_RANK - 2) / 2);
    return NULL;
  }
  const int64_t *X = fzOnnxShape(x), *W = fzOnnxShape(w);
  int64_t cin = X[1], mg = W[1];
  /* Dilate by the strides. */
  bool strided = false;
  for (size_t i = 0; i < sp; ++i)
    strided = strided || strides[i] > 1;
  if (strided) {
    int64_t s2[FZ_GRAPH_MAX_RANK], pad2[2 * FZ_GRAPH_MAX_RANK] = {0};
    int64_t s1[FZ_GRAPH_MAX_RANK], st[FZ_GRAPH_MAX_RANK] = {0},
            lim[FZ_GRAPH_MAX_RANK], one[FZ_GRAPH_MAX_RANK];
    s2[0] = X[0], s2[1] = cin;
    s1[0] = X[0], s1[1] = cin;
    lim[0] = X[0], lim[1] = cin;
    one[0] = one[1] = 1;
    size_t r2 = 2 + 2 * sp;
    for (size_t i = 0; i < sp; ++i) {
      int64_t d = X[2 + i];
      s2[2 + 2 * i] = d;
      s2[3 + 2 * i] = 1;
      pad2[r2 + 3 + 2 * i] = strides[i] - 1;
      s1[2 + i] = d * strides[i]; /* checked by the caller: <= 2^40 */
      lim[2 + i] = d ? (d - 1) * strides[i] + 1 : 0;
      one[2 + i] = 1;
    }
    x = fzOnnxReshape(im, x, r2, s2);
    x = pad_value(im, x, pad2);
    x = fzOnnxReshape(im, x, r, s1);
    x = fzOnnxSlice(im, x, st, lim, one);
  }
  int64_t p[2 * FZ_GRAPH_MAX_RANK] = {0};
  for (size_t i = 0; i < sp; ++i) {
    int64_t keff = (W[2 + i] - 1) * dilations[i] + 1;
    p[2 + i] = keff - 1 - pads[i];
    p[r + 2 + i] = keff - 1 - pads[sp + i] + outputPadding[i];
  }
  x = pad_value(im, x, p);
  /* [C, M/g, k...] -> [g, C/g, M/g, k...] -> [g, M/g, C/g, k...] ->
   * [M, C/g, k...], flipped along every spatial axis. */
  int64_t cg = cin / group, gm;
  if (!fzOnnxMulI64(group, mg, &gm)) {
    fzOnnxError(im, "attribute 'group' (%lld) is too large",
                (long long)group);
    return NULL;
  }
  int64_t w5[FZ_GRAPH_MAX_RANK], perm[FZ_GRAPH_MAX_RANK],
      w4[FZ_GRAPH_MAX_RANK];
  w5[0] = group, w5[1] = cg, w5[2] = mg;
  perm[0] = 0, perm[1] = 2, perm[2] = 1;
  w4[0] = gm, w4[1] = cg;
  for (size_t i = 0; i < sp; ++i) {
    w5[3 + i] = W[2 + i];
    perm[3 + i] = (int64_t)(3 + i);
    w4[2 + i] = W[2 + i];
  }
  w = fzOnnxReshape(im, w, r + 1, w5);
  w = fzOnnxTranspose(im, w, r + 1, perm);
  w = fzOnnxReshape(im, w, r, w4);
  int64_t fs[FZ_GRAPH_MAX_RANK], fl[FZ_GRAPH_MAX_RANK],
      fst[FZ_GRAPH_MAX_RANK];
  fs[0] = fs[1] = 0, fl[0] = gm, fl[1] = cg, fst[0] = fst[1] = 1;
  for (size_t i = 0; i < sp; ++i) {
    fs[2 + i] = W[2 + i] - 1;
    fl[2 + i] = -1;
    fst[2 + i] = -1;
  }
  w = fzOnnxSlice(im, w, fs, fl, fst);
  int64_t ones[FZ_GRAPH_MAX_RANK], zeros[2 * FZ_GRAPH_MAX_RANK] = {0};
  for (size_t i = 0; i < sp; ++i)
    ones[i] = 1;
  return fzOnnxConvNd(im, x, w, b, sp, ones, zeros, dilations, group);
}

/* lowering/loop_to_kernel/matmul_conv.c - fzKernelMatchConvNest: a conv2d
 * nest (dialects/loop/nest_match.h's matcher, shared with the CPU's
 * tile-convolutions) as the implicit GEMM of the tensor-core generator
 * (matmul.h, FzMatmulConv).
 *
 * Beyond convMatch, the GEMM needs: groups == 1 (every output channel
 * reads every input channel: one GEMM, not one per group), a dense
 * NCHW input of fewer than 2^31 elements (the gather reads it through a
 * flat view with 32-bit offsets), the input and the weight of one
 * element type (bf16 or f16 extended to f32, or
 * f32 for tf32 kernels), the weight a plain load w[oc, c, kh, kw] of a
 * buffer from outside the nest (B[j, k] = w[j, c, kh, kw]), and the
 * matmul epilogue's rules (mmMatchEpilogue). The weights allow 16-byte
 * copies when (c, kh, kw) are contiguous in memory (k-contiguous rows),
 * K % 8 == 0, the row stride a multiple of 8 elements and the buffer
 * 16-byte aligned; the input never does (a gather), except in a
 * pointwise conv (1x1, stride 1, no padding: FzMatmulConv.pointwise),
 * which is a plain GEMM per image whose B, the image [C, OH*OW], allows
 * them when OH*OW % 8 == 0. The partial nest of a k split (split_k.c:
 * a fifth dim, the slice, and the c loop over the slice's channels) is
 * one too (FzMatmulNest.splitK; its weights' copies stay 16-byte aligned
 * where a slice is a multiple of 8 k).
 *
 * Nothing is allocated that outlives the call: the description points
 * into the IR.
 */
#include <string.h>

#include "ir/util.h"
#include "lowering/loop_to_kernel/matmul_internal.h"
#include "dialects/loop/nest_match.h"

/* Whether index v of the weight load is exactly iv `var`. */
static bool is_iv(const ConvNest *C, FzValue *v, int var) {
  int64_t coef[CV_NUM] = {0}, c0 = 0;
  if (!convAffine(C, v, 1, coef, &c0, 0) || c0 != 0)
    return false;
  for (int i = 0; i < CV_NUM; ++i)
    if (coef[i] != (i == var ? 1 : 0))
      return false;
  return true;
}

/* The weight load: w = [extf] load W[m, c, kh, kw] of element type elt
 * (or, with hwc, W[m, kh, kw, c]: conv_repack.c's repacked weights). */
static FzOp *weight_load(const ConvNest *C, FzType *elt, bool hwc) {
  FzValue *v = C->wVal;
  FzOp *def = fzValueGetDefiningOp(v);
  if (C->xExt) {
    if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_EXTF)
      return NULL;
    v = fzOpGetOperand(def, 0);
    def = fzValueGetDefiningOp(v);
  }
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_LOAD ||
      fzOpGetNumOperands(def) != 5 || fzValueGetType(v) != elt)
    return NULL;
  static const int vars[2][4] = {{CV_M, CV_C, CV_KH, CV_KW},
                                  {CV_M, CV_KH, CV_KW, CV_C}};
  for (int i = 0; i < 4; ++i)
    if (!is_iv(C, fzOpGetOperand(def, 1 + (size_t)i), vars[hwc][i]))
      return NULL;
  return def;
}

/* Whether the weights' (c, kh, kw) are contiguous: rows of B = [OC, K]
 * (hwc: w'[oc, kh, kw, c], whose (kh, kw, c) are). */
static bool weight_rows(FzValue *w) {
  FzType *t = fzValueGetType(w);
  int64_t st[4];
  mmStridesOf(t, st);
  int64_t d2 = fzShapedTypeGetDim(t, 2), d3 = fzShapedTypeGetDim(t, 3);
  return st[3] == 1 && st[2] == d3 && st[1] == d2 * d3;
}

/* The bytes of A's cp.async copies in an NHWC nest with k = (kh, kw, c):
 * a copy never crosses a tap when C elements are whole copies (16, 8 or
 * 4 bytes), the input 16-byte aligned; 0 when none applies (C = 3 in
 * f16: the scalar gather). */
static int nhwc_input_copy(FzValue *x, int64_t C, int64_t eb) {
  int cb = eb == 2 || eb == 4 ? mmCopyBytesOf(C, eb) : 0;
  return mmAlignedCopyBytes(x, cb, eb);
}

/* The 16-byte copies of the weights (see the opening comment). */
static bool weight_async(FzValue *w, int64_t K) {
  FzType *t = fzValueGetType(w);
  int64_t st[4];
  mmStridesOf(t, st);
  int64_t eb = (int64_t)fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
  return (eb == 2 || eb == 4) && mmCopyBytesOf(st[0], eb) == 16 &&
         mmCopyBytesOf(K, eb) == 16 && mmAlignedBase(w, 16);
}

/* Fills m's operands and geometry from the matched C. */
static bool fill(const ConvNest *C, FzMatmulNest *m, char *why,
                 size_t whyLen) {
  const TileNest *T = &C->T;
  bool nhwc = C->layout == CONV_NHWC;
  int64_t OC = C->outDims[CV_M], CG = C->ext[0];
  bool grouped = CG != C->C;
  for (int64_t j = 0; !grouped && j < OC; ++j)
    for (int64_t c = 0; !grouped && c < CG; ++c)
      grouped = C->chTab[j * CG + c] != c;
  if (grouped)
    return fzReasonf(why, whyLen, "groups > 1 (a grouped or depthwise conv2d "
                               "is not one GEMM)");
  FzType *elt = fzValueGetType(fzOpGetResult(C->xLoad, 0));
  FzOp *wl = weight_load(C, elt, false);
  bool hwcLoad = false;
  if (!wl && nhwc && (wl = weight_load(C, elt, true)))
    hwcLoad = true;
  if (!wl)
    return fzReasonf(why, whyLen, "the weight is not a load w[oc, c, kh, kw] "
                               "of the input's element type");
  FzValue *x = fzOpGetOperand(C->xLoad, 0), *w = fzOpGetOperand(wl, 0);
  if (!mmPlainBuffer(x, T->par) || !mmPlainBuffer(w, T->par))
    return fzReasonf(why, whyLen, "the input or the weight is not a static "
                               "global buffer defined outside the nest");
  FzType *xt = fzValueGetType(x);
  int64_t xs[4];
  mmStridesOf(xt, xs);
  bool dense = nhwc ? xs[3] == 1 && xs[2] == C->C &&
                          xs[1] == C->Wi * C->C &&
                          xs[0] == C->H * C->Wi * C->C
                    : xs[3] == 1 && xs[2] == C->Wi &&
                          xs[1] == C->H * C->Wi &&
                          xs[0] == C->C * C->H * C->Wi;
  if (!dense || fzShapedTypeGetDim(xt, 0) * xs[0] >= ((int64_t)1 << 31))
    return fzReasonf(why, whyLen, "the input is not a dense %s buffer of "
                               "fewer than 2^31 elements (the gather's "
                               "offsets are 32-bit)", nhwc ? "NHWC" : "NCHW");
  if (!weight_rows(w) ||
      fzShapedTypeGetDim(fzValueGetType(w), hwcLoad ? 3 : 1) != CG)
    return fzReasonf(why, whyLen, "the weight's (c, kh, kw) are not contiguous "
                               "in memory (no [OC, K] matrix)");
  FzMatmulConv *cv = &m->conv;
  cv->on = true;
  cv->nhwc = nhwc;
  /* 1x1: both k orders are c alone. */
  cv->kHwc = nhwc && (hwcLoad || C->ext[1] * C->ext[2] == 1);
  cv->batch = C->outDims[CV_N];
  cv->C = C->C, cv->H = C->H, cv->W = C->Wi;
  cv->OH = C->outDims[CV_OH], cv->OW = C->outDims[CV_OW];
  cv->KH = C->ext[1], cv->KW = C->ext[2];
  cv->sh = C->sh, cv->sw = C->sw, cv->dh = C->dh, cv->dw = C->dw;
  cv->padH = -C->hOff, cv->padW = -C->wOff;
  int64_t lastH = (cv->OH - 1) * cv->sh + (cv->KH - 1) * cv->dh + C->hOff;
  int64_t lastW = (cv->OW - 1) * cv->sw + (cv->KW - 1) * cv->dw + C->wOff;
  cv->edgeH = C->hOff < 0 || lastH >= cv->H;
  cv->edgeW = C->wOff < 0 || lastW >= cv->W;
  m->kloop = C->loops[0];
  m->elt = elt;
  m->M = cv->batch * cv->OH * cv->OW;
  m->N = OC;
  m->K = CG * cv->KH * cv->KW;
  m->numDims = 4;
  for (int d = 0; d < 4; ++d)
    m->extent[d] = T->trips[d];
  if (C->slices) { /* a k split's partial nest: slices of whole channels */
    m->numDims = 5;
    m->extent[4] = m->splitK = C->slices;
    m->dimSplit = 4;
    m->sliceK = C->sliceC * cv->KH * cv->KW;
  }
  m->dimI = -1;
  m->dimJ = C->parDim[CV_M];
  m->a = (FzMatmulOperand){.buffer = x, .load = C->xLoad, .rank = 4,
                           .kLast = true};
  if (cv->kHwc) { /* chunks of consecutive channels: cp.async copies */
    int64_t eb = (int64_t)fzTypeGetStorageSize(elt);
    int cb = nhwc_input_copy(x, cv->C, eb);
    m->a.asyncCopies = cb > 0;
    m->a.copyBytes = cb;
  }
  /* A slice starts at k = sb KS: 16-byte aligned where KS % 8 == 0. */
  m->b = (FzMatmulOperand){.buffer = w, .load = wl, .rank = 4, .kLast = true,
                           .asyncCopies = weight_async(w, m->K) &&
                                          (!m->splitK || m->sliceK % 8 == 0)};
  cv->pointwise = !nhwc && cv->KH == 1 && cv->KW == 1 && cv->sh == 1 &&
                  cv->sw == 1 && !cv->edgeH && !cv->edgeW &&
                  C->hOff == 0 && C->wOff == 0 && cv->OH == cv->H &&
                  cv->OW == cv->W;
  if (cv->pointwise) {
    /* out[n] = w[OC, C] x[n][C, HW]: the weights are A, the image B. */
    int64_t hw = cv->H * cv->W;
    m->M = OC;
    m->N = hw;
    m->dimI = CV_M;
    m->dimJ = -1;
    FzMatmulOperand wa = m->b, xb = m->a;
    m->a = wa;
    m->b = xb;
    m->b.kLast = false;
    m->b.numBatch = 1;
    m->b.batch[0] = (FzMatmulIndex){CV_N, 0};
    /* Rows of HW elements: 16-byte copies, or 8 or 4 where HW * eb is
     * not a multiple of 16 (f16 14x14, f32 7x7). */
    int64_t eb = (int64_t)fzTypeGetStorageSize(elt);
    int cb = eb == 2 || eb == 4 ? mmCopyBytesOf(hw, eb) : 0;
    cb = mmAlignedCopyBytes(x, cb, eb);
    m->b.asyncCopies = cb > 0;
    m->b.copyBytes = cb;
  }
  return true;
}

/* pairStores of a pointwise conv: each store writes (n, oc, oh, ow) of a
 * buffer whose ow has stride 1 and other strides are even, OW even (a
 * pair (ow, ow + 1) never crosses a row), aligned. */
static bool pointwise_pairs(const FzMatmulNest *m) {
  if (m->conv.OW % 2 != 0)
    return false;
  FzBlock *body = fzLoopGetBody(m->par);
  for (size_t s = 0; s < m->numStores; ++s) {
    FzOp *st = m->stores[s];
    FzValue *buf = fzOpGetOperand(st, 1);
    FzType *t = fzValueGetType(buf);
    if (fzShapedTypeGetRank(t) != 4 ||
        fzTypeGetStorageSize(fzShapedTypeGetElementType(t)) != 2)
      return false;
    for (size_t d = 0; d < 4; ++d)
      if (fzOpGetOperand(st, 2 + d) != fzBlockGetArgument(body, d))
        return false;
    int64_t strides[4];
    mmStridesOf(t, strides);
    if (strides[3] != 1 || strides[0] % 2 || strides[1] % 2 ||
        strides[2] % 2 || !mmAlignedBase(buf, 4))
      return false;
  }
  return true;
}

bool fzKernelMatchConvNest(FzOp *par, FzMatmulNest *out, bool *isConv,
                           char *why, size_t whyLen) {
  FzMatmulNest *m = out;
  memset(m, 0, sizeof *m);
  m->par = par;
  FzContext *ctx = fzOpGetContext(par);
  ConvNest C;
  memset(&C, 0, sizeof C);
  C.T.ctx = ctx;
  C.allowSplit = true;
  fzPtrMapInit(&C.T.deps, ctx);
  bool ok = convMatch(&C, par, isConv, why, whyLen) &&
            fill(&C, m, why, whyLen);
  fzFree(ctx, C.chTab);
  fzPtrMapFree(&C.T.deps);
  if (!ok || !mmMatchEpilogue(m, why, whyLen))
    return false;
  if (m->conv.pointwise)
    m->pairStores = pointwise_pairs(m);
  return true;
}

/* dialects/graph/interp_nn.c - interpreter kernels of matmul, conv2d and
 * the pools.
 *
 * Straightforward loops accumulating in double (int64 for integer
 * matmul), written for clarity: this is the oracle, not the fast path.
 * Padding never contributes to max_pool; avg_pool divides by the number
 * of window positions inside the input, or inside the padded input with
 * count_include_pad. Layout "nhwc" changes only where x and the
 * result are indexed: every kernel reads x[n, c, ih, iw] through one
 * offset function of the layout (the weight is [M, C/g, kh, kw] in
 * both).
 */
#include <math.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"

bool fzGraphReadWindow(FzOp *op, bool pool, int64_t *kernel, int64_t *strides,
                       int64_t *pads, int64_t *dilations, int64_t *groups,
                       bool *countIncludePad);

bool fzGraphKernelMatmul(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res) {
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs at = fzGraphAttrsOfOp(op);
  bool ta, tb;
  if (!fzGraphGetBool(&d, &at, "transpose_a", false, &ta) ||
      !fzGraphGetBool(&d, &at, "transpose_b", false, &tb) ||
      !fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *a = ops[0], *b = ops[1];
  FzTensor *y = res[0];
  size_t ra = a->rank, rb = b->rank;
  const int64_t *sa = a->shape, *sb = b->shape;
  int64_t M = ra >= 2 ? (ta ? sa[ra - 1] : sa[ra - 2]) : 1;
  int64_t K = ra >= 2 ? (ta ? sa[ra - 2] : sa[ra - 1]) : sa[0];
  int64_t N = rb >= 2 ? (tb ? sb[rb - 2] : sb[rb - 1]) : 1;
  size_t ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0;
  size_t br = y->rank - (ra >= 2) - (rb >= 2);
  /* Batch strides (in elements) of a and b over the result's batch dims. */
  int64_t strA[FZ_GRAPH_MAX_RANK], strB[FZ_GRAPH_MAX_RANK];
  int64_t idx[FZ_GRAPH_MAX_RANK] = {0}, batches = 1;
  int64_t s = M * K;
  for (size_t j = br; j-- > 0;) {
    size_t off = br - ba;
    strA[j] = (j >= off && sa[j - off] != 1) ? s : 0;
    if (j >= off)
      s *= sa[j - off];
  }
  s = K * N;
  for (size_t j = br; j-- > 0;) {
    size_t off = br - bb;
    strB[j] = (j >= off && sb[j - off] != 1) ? s : 0;
    if (j >= off)
      s *= sb[j - off];
  }
  for (size_t j = 0; j < br; ++j)
    batches *= y->shape[j];
  bool isInt = fzGraphIsIntType(y->dtype);
  double *A = isInt ? NULL : fzGraphLoadF64(a);
  double *B = isInt ? NULL : fzGraphLoadF64(b);
  int64_t *IA = isInt ? fzGraphLoadI64(a) : NULL;
  int64_t *IB = isInt ? fzGraphLoadI64(b) : NULL;
  bool ok = isInt ? IA && IB : A && B;
  int64_t offA = 0, offB = 0, o = 0;
  for (int64_t bt = 0; ok && bt < batches; ++bt) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        uint64_t iacc = 0;
        for (int64_t k = 0; k < K; ++k) {
          int64_t ia = offA + (ta ? k * M + m : m * K + k);
          int64_t ib = offB + (tb ? n * K + k : k * N + n);
          if (isInt)
            iacc += (uint64_t)IA[ia] * (uint64_t)IB[ib];
          else
            acc += A[ia] * B[ib];
        }
        if (isInt)
          fzTensorSetI64(y, o++, (int64_t)iacc);
        else
          fzTensorSetF64(y, o++, acc);
      }
    for (size_t j = br; j-- > 0;) {
      offA += strA[j];
      offB += strB[j];
      if (++idx[j] < y->shape[j])
        break;
      offA -= strA[j] * y->shape[j];
      offB -= strB[j] * y->shape[j];
      idx[j] = 0;
    }
  }
  fzFree(in->ctx, A);
  fzFree(in->ctx, B);
  fzFree(in->ctx, IA);
  fzFree(in->ctx, IB);
  return ok;
}

/* The offset of element (n, c, h, w) of a 4-d tensor of dims (C, H, W)
 * in layout NCHW or NHWC. */
static int64_t off4(bool nhwc, int64_t n, int64_t c, int64_t h, int64_t w,
                    int64_t C, int64_t H, int64_t W) {
  return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

/* The dims C, H, W of a 4-d tensor t in its layout. */
static void dims4(const FzTensor *t, bool nhwc, int64_t *C, int64_t *H,
                  int64_t *W) {
  *C = t->shape[nhwc ? 3 : 1];
  *H = t->shape[nhwc ? 1 : 2];
  *W = t->shape[nhwc ? 2 : 3];
}

bool fzGraphKernelConv2d(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res) {
  int64_t kernel[2], st[2], pads[4], dil[2], groups;
  bool cip;
  if (!fzGraphReadWindow(op, false, kernel, st, pads, dil, &groups, &cip) ||
      !fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0], *w = ops[1];
  const FzTensor *bias = fzOpGetNumOperands(op) > 2 ? ops[2] : NULL;
  FzTensor *y = res[0];
  bool nhwc = fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC;
  int64_t NB = x->shape[0], C, H, W, M, OH, OW;
  dims4(x, nhwc, &C, &H, &W);
  dims4(y, nhwc, &M, &OH, &OW);
  int64_t CG = w->shape[1], KH = w->shape[2], KW = w->shape[3];
  if (CG * groups != C)
    return fzGraphInterpError(in, op,
                              "operand #1 has %lld input channels per group "
                              "but operand #0 has %lld channels at run time",
                              (long long)CG, (long long)C);
  int64_t MG = M / groups;
  double *X = fzGraphLoadF64(x), *Wt = fzGraphLoadF64(w);
  bool ok = X && Wt;
  for (int64_t n = 0; ok && n < NB; ++n)
    for (int64_t m = 0; m < M; ++m) {
      int64_t g = m / MG;
      double b = bias ? fzTensorGetF64(bias, m) : 0.0;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < CG; ++c) {
            const double *wp = Wt + ((m * CG + c) * KH) * KW;
            for (int64_t i = 0; i < KH; ++i) {
              int64_t ih = oh * st[0] - pads[0] + i * dil[0];
              if (ih < 0 || ih >= H)
                continue;
              for (int64_t j = 0; j < KW; ++j) {
                int64_t iw = ow * st[1] - pads[1] + j * dil[1];
                if (iw >= 0 && iw < W)
                  acc += X[off4(nhwc, n, g * CG + c, ih, iw, C, H, W)] *
                         wp[i * KW + j];
              }
            }
          }
          fzTensorSetF64(y, off4(nhwc, n, m, oh, ow, M, OH, OW), acc + b);
        }
    }
  fzFree(in->ctx, X);
  fzFree(in->ctx, Wt);
  return ok;
}

bool fzGraphKernelPool(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                       FzTensor **res) {
  bool avg = fzGraphOpInfo(fzOpGetDef(op))->kind == 1;
  int64_t k[2], st[2], pads[4], dil[2], groups;
  bool cip;
  if (!fzGraphReadWindow(op, true, k, st, pads, dil, &groups, &cip) ||
      !fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0];
  FzTensor *y = res[0];
  bool nhwc = fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC;
  int64_t NB = x->shape[0], C, H, W, OH, OW;
  dims4(x, nhwc, &C, &H, &W);
  dims4(y, nhwc, &C, &OH, &OW);
  double *X = fzGraphLoadF64(x);
  if (!X)
    return false;
  for (int64_t n = 0; n < NB; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = avg ? 0.0 : -HUGE_VAL;
          int64_t count = 0;
          for (int64_t i = 0; i < k[0]; ++i) {
            int64_t ih = oh * st[0] - pads[0] + i * dil[0];
            for (int64_t j = 0; j < k[1]; ++j) {
              int64_t iw = ow * st[1] - pads[1] + j * dil[1];
              bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
              bool inPadded = ih < H + pads[2] && iw < W + pads[3];
              if (avg && cip && inPadded)
                count++;
              if (!inside)
                continue;
              double v = X[off4(nhwc, n, c, ih, iw, C, H, W)];
              if (avg) {
                acc += v;
                count += !cip;
              } else if (isnan(v) || v > acc) {
                acc = isnan(acc) ? acc : v;
              }
            }
          }
          if (avg)
            acc = count ? acc / (double)count : NAN;
          fzTensorSetF64(y, off4(nhwc, n, c, oh, ow, C, OH, OW), acc);
        }
  fzFree(in->ctx, X);
  return true;
}

bool fzGraphKernelGlobalPool(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                             FzTensor **res) {
  bool maxForm = fzGraphOpInfo(fzOpGetDef(op))->kind == 1;
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0];
  FzTensor *y = res[0];
  /* x as [outer, inner, chans]: NCHW reduces the trailing dims of each
   * (n, c) (chans = 1); NHWC the middle dims of each n, per channel. */
  bool nhwc = fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC;
  int64_t outer = nhwc ? x->shape[0] : x->shape[0] * x->shape[1], inner = 1;
  int64_t chans = nhwc ? x->shape[x->rank - 1] : 1;
  for (size_t i = nhwc ? 1 : 2; i < x->rank - (nhwc ? 1 : 0); ++i)
    inner *= x->shape[i];
  double *X = fzGraphLoadF64(x);
  if (!X)
    return false;
  for (int64_t p = 0; p < outer; ++p)
    for (int64_t c = 0; c < chans; ++c) {
      double acc = maxForm ? -HUGE_VAL : 0.0;
      for (int64_t i = 0; i < inner; ++i) {
        double v = X[(p * inner + i) * chans + c];
        if (!maxForm)
          acc += v;
        else if (isnan(v) || v > acc)
          acc = isnan(acc) ? acc : v;
      }
      fzTensorSetF64(y, p * chans + c, maxForm ? acc : acc / (double)inner);
    }
  fzFree(in->ctx, X);
  return true;
}

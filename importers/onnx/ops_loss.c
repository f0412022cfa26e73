/* importers/onnx/ops_loss.c - ONNX loss ops: NegativeLogLikelihoodLoss
 * and SoftmaxCrossEntropyLoss (log_softmax over the class axis, then the
 * same NLL), decomposed with a one-hot selection along the class axis:
 *
 *   mask[n, c, d] = target[n, d] == c  and  target[n, d] != ignore_index
 *   picked[n, d]  = sum_c select(mask, input, 0)        = input[n, t, d]
 *   w_t[n, d]     = sum_c select(mask, weight[c], 0)    (1 or 0 without
 *                                                        weights)
 *   loss[n, d]    = -picked * w_t
 *
 * reduction "none" returns loss, "sum" its sum, "mean" its sum divided by
 * the sum of w_t (the weighted count of targets not ignored), as ONNX
 * defines them.
 */
#include <string.h>

#include "importers/onnx/onnx_internal.h"

/* target (rank r - 1) with a unit class dim inserted at 1. */
static FzValue *class_axis_view(FzOnnxImporter *im, FzValue *t) {
  int64_t shape[FZ_GRAPH_MAX_RANK];
  size_t r = fzOnnxRank(t);
  if (!t || r + 1 > FZ_GRAPH_MAX_RANK)
    return NULL;
  shape[0] = fzOnnxDim(t, 0);
  shape[1] = 1;
  for (size_t i = 1; i < r; ++i)
    shape[i + 1] = fzOnnxDim(t, i);
  return fzOnnxReshape(im, t, r + 1, shape);
}

/* The NLL of log-probabilities x [N, C, d...] against target [N, d...]. */
static FzValue *nll(FzOnnxImporter *im, FzValue *x, FzValue *target,
                    FzValue *weight) {
  const char *reduction;
  int64_t ignore;
  if (!fzOnnxAttrString(im, "reduction", "mean", &reduction) ||
      !fzOnnxAttrInt(im, "ignore_index", INT64_MIN, &ignore))
    return NULL;
  bool hasIgnore = fzOnnxAttr(im, "ignore_index") != NULL;
  if (strcmp(reduction, "none") && strcmp(reduction, "sum") &&
      strcmp(reduction, "mean")) {
    fzOnnxErrorAttrValue(im, "reduction", reduction);
    return NULL;
  }
  size_t r = fzOnnxRank(x);
  if (r < 2 || fzOnnxRank(target) != r - 1) {
    fzOnnxError(im, "expects input [N, C, d...] and target [N, d...]");
    return NULL;
  }
  int64_t c = fzOnnxDim(x, 1);
  if (c == FZ_DYNAMIC) {
    fzOnnxError(im, "unsupported dynamic class dimension");
    return NULL;
  }
  FzType *i64 = fzIntegerTypeGet(im->ctx, 64), *elt = fzOnnxElt(x);
  FzValue *t = fzOnnxCast(im, target, i64);
  /* iota over the classes, shaped [1, C, 1...]. */
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    shape[i] = i == 1 ? c : 1;
  FzValue *iota = fzOnnxIota(im, r, 1, c);
  if (!iota)
    return NULL;
  FzValue *tv = class_axis_view(im, t);
  FzValue *mask = fzOnnxCompare(im, "eq", tv, iota);
  FzValue *valid = NULL;
  if (hasIgnore) {
    valid = fzOnnxCompare(im, "ne", tv,
                          fzOnnxConstI64(im, 0, NULL, &ignore));
    mask = fzOnnxBinary(im, "graph.and", mask, valid);
  }
  int64_t classAxis = 1;
  FzValue *zero = fzOnnxConstScalar(im, elt, 0);
  FzValue *picked = fzOnnxReduce(im, "graph.reduce_sum",
                                 fzOnnxSelect(im, mask, x, zero), 1,
                                 &classAxis, false);
  FzValue *wt;
  if (weight) {
    FzValue *w = fzOnnxReshape(im, weight, r, shape);
    wt = fzOnnxReduce(im, "graph.reduce_sum", fzOnnxSelect(im, mask, w, zero),
                      1, &classAxis, false);
  } else if (valid) {
    int64_t tshape[FZ_GRAPH_MAX_RANK];
    size_t k = 0;
    for (size_t i = 0; i < r; ++i)
      if (i != 1)
        tshape[k++] = fzOnnxDim(x, i);
    wt = fzOnnxReshape(im, fzOnnxCast(im, valid, elt), k, tshape);
  } else {
    wt = NULL;
  }
  FzValue *loss = fzOnnxUnary(im, "graph.neg", picked);
  if (wt)
    loss = fzOnnxBinary(im, "graph.mul", loss, wt);
  if (!strcmp(reduction, "none"))
    return loss;
  FzValue *sum = fzOnnxReduce(im, "graph.reduce_sum", loss, 0, NULL, false);
  if (!strcmp(reduction, "sum"))
    return sum;
  if (!wt)
    return fzOnnxReduce(im, "graph.reduce_mean", loss, 0, NULL, false);
  return fzOnnxBinary(im, "graph.div", sum,
                      fzOnnxReduce(im, "graph.reduce_sum", wt, 0, NULL,
                                   false));
}

static bool h_nll(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nOut;
  out[0] = nll(im, in[0], in[1], nIn > 2 ? in[2] : NULL);
  return out[0] != NULL;
}

static bool h_sce(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  FzValue *x = in[0];
  FzValue *logp = fzOnnxEmit(
      im, "graph.log_softmax", 1, &x, NULL, "axis",
      fzIntegerAttrGet(im->ctx, fzIntegerTypeGet(im->ctx, 64), 1), NULL);
  out[0] = nll(im, logp, in[1], nIn > 2 ? in[2] : NULL);
  if (nOut > 1)
    out[1] = logp;
  return out[0] != NULL;
}

const FzOnnxOpDef fzOnnxLossOps[] = {
    {"NegativeLogLikelihoodLoss", h_nll, NULL, "ignore_index reduction", 2,
     3, 1},
    {"SoftmaxCrossEntropyLoss", h_sce, NULL, "ignore_index reduction", 2, 3,
     2},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

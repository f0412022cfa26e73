/* importers/onnx/ops_training.c - the optimizer ops of the
 * ai.onnx.preview.training domain (version 1): Adagrad, Momentum
 * (standard and Nesterov) and Adam, as the elementwise updates their
 * definitions write, for each of the n tensors they update at once.
 *
 * Inputs are R (learning rate, a scalar), T (the update count, an int64
 * scalar), then n tensors X, n gradients G, and n (Adagrad, Momentum) or
 * 2n (Adam) state tensors; outputs are the n new X, then the new states.
 * R and T are run-time values: T > 0 selects, and Adam's bias correction
 * pow(alpha, T) casts T to the element type. The other domains' nodes
 * (ai.onnx.ml, com.microsoft) stay errors.
 */
#include <string.h>

#include "importers/onnx/onnx_internal.h"

static FzValue *k(FzOnnxImporter *im, FzValue *like, double v) {
  return like ? fzOnnxConstScalar(im, fzOnnxElt(like), v) : NULL;
}
static FzValue *add(FzOnnxImporter *im, FzValue *a, FzValue *b) {
  return fzOnnxBinary(im, "graph.add", a, b);
}
static FzValue *sub(FzOnnxImporter *im, FzValue *a, FzValue *b) {
  return fzOnnxBinary(im, "graph.sub", a, b);
}
static FzValue *mul(FzOnnxImporter *im, FzValue *a, FzValue *b) {
  return fzOnnxBinary(im, "graph.mul", a, b);
}
static FzValue *divide(FzOnnxImporter *im, FzValue *a, FzValue *b) {
  return fzOnnxBinary(im, "graph.div", a, b);
}
/* c * x, or x when c == 1, 0 when c == 0 (without multiplying). */
static FzValue *scale(FzOnnxImporter *im, double c, FzValue *x) {
  return c == 1 ? x : mul(im, k(im, x, c), x);
}

/* Checks the layout: 2 + groups * n inputs, `outGroups` * n outputs, R a
 * float scalar, T an integer scalar, the tensors of R's type. Sets *n. */
static bool check_layout(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                         size_t nOut, size_t groups, size_t outGroups,
                         size_t *n) {
  if (nIn < 2 + groups || (nIn - 2) % groups)
    return fzOnnxError(im, "expects 2 + %zu * n inputs (R, T, then the "
                           "tensors, gradients and states), got %zu",
                       groups, nIn);
  *n = (nIn - 2) / groups;
  if (nOut > outGroups * *n)
    return fzOnnxError(im, "expects at most %zu outputs, got %zu",
                       outGroups * *n, nOut);
  for (size_t i = 0; i < nIn; ++i)
    if (!in[i])
      return fzOnnxError(im, "input #%zu is missing", i);
  if (fzShapedTypeGetNumElements(fzValueGetType(in[0])) != 1 ||
      !fzTypeIsFloat(fzOnnxElt(in[0])))
    return fzOnnxError(im, "R (the learning rate) must be a float scalar");
  if (fzShapedTypeGetNumElements(fzValueGetType(in[1])) != 1 ||
      !fzTypeIsInteger(fzOnnxElt(in[1])))
    return fzOnnxError(im, "T (the update count) must be an integer "
                           "scalar");
  for (size_t i = 2; i < nIn; ++i)
    if (fzOnnxElt(in[i]) != fzOnnxElt(in[0]))
      return fzOnnxError(im, "input #%zu must have R's element type", i);
  return true;
}

/* R and T as scalars of shape [] (R's type; T cast to it, and T > 0). */
static void scalars(FzOnnxImporter *im, FzValue *const *in, FzValue **r,
                    FzValue **t, FzValue **tPos) {
  *r = fzOnnxReshape(im, in[0], 0, NULL);
  FzValue *ti = fzOnnxReshape(im, in[1], 0, NULL);
  *tPos = fzOnnxCompare(im, "gt", ti,
                        ti ? fzOnnxConstScalar(im, fzOnnxElt(ti), 0) : NULL);
  *t = fzOnnxCast(im, ti, fzOnnxElt(in[0]));
}

static bool h_adagrad(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  double decay, eps, norm;
  size_t n;
  if (!fzOnnxAttrFloat(im, "decay_factor", 0, &decay) ||
      !fzOnnxAttrFloat(im, "epsilon", 0, &eps) ||
      !fzOnnxAttrFloat(im, "norm_coefficient", 0, &norm) ||
      !check_layout(im, in, nIn, nOut, 3, 2, &n))
    return false;
  FzValue *r, *t, *tPos;
  scalars(im, in, &r, &t, &tPos);
  /* r = R / (1 + T * decay_factor) */
  r = divide(im, r, add(im, k(im, r, 1), scale(im, decay, t)));
  for (size_t i = 0; i < n; ++i) {
    FzValue *x = in[2 + i], *g = in[2 + n + i], *h = in[2 + 2 * n + i];
    FzValue *gr = norm != 0 ? add(im, scale(im, norm, x), g) : g;
    FzValue *hNew = add(im, h, mul(im, gr, gr));
    FzValue *hAd = add(im, fzOnnxUnary(im, "graph.sqrt", hNew),
                       k(im, hNew, eps));
    if (i < nOut)
      out[i] = sub(im, x, divide(im, mul(im, r, gr), hAd));
    if (n + i < nOut)
      out[n + i] = hNew;
  }
  return true;
}

static bool h_momentum(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  double alpha, beta, norm;
  const char *mode;
  size_t n;
  if (!fzOnnxAttrFloat(im, "alpha", 0, &alpha) ||
      !fzOnnxAttrFloat(im, "beta", 0, &beta) ||
      !fzOnnxAttrFloat(im, "norm_coefficient", 0, &norm) ||
      !fzOnnxAttrString(im, "mode", "standard", &mode) ||
      !check_layout(im, in, nIn, nOut, 3, 2, &n))
    return false;
  bool nesterov = !strcmp(mode, "nesterov");
  if (!nesterov && strcmp(mode, "standard"))
    return fzOnnxErrorAttrValue(im, "mode", mode);
  FzValue *r, *t, *tPos;
  scalars(im, in, &r, &t, &tPos);
  /* beta_adjusted = T > 0 ? beta : 1 */
  FzValue *betaAdj = fzOnnxSelect(im, tPos, k(im, r, beta), k(im, r, 1));
  for (size_t i = 0; i < n; ++i) {
    FzValue *x = in[2 + i], *g = in[2 + n + i], *v = in[2 + 2 * n + i];
    FzValue *gr = norm != 0 ? add(im, scale(im, norm, x), g) : g;
    FzValue *vNew = add(im, scale(im, alpha, v), mul(im, betaAdj, gr));
    FzValue *step = nesterov ? add(im, gr, scale(im, alpha, vNew)) : vNew;
    if (i < nOut)
      out[i] = sub(im, x, mul(im, r, step));
    if (n + i < nOut)
      out[n + i] = vNew;
  }
  return true;
}

static bool h_adam(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  double alpha, beta, eps, norm, post;
  size_t n;
  if (!fzOnnxAttrFloat(im, "alpha", 0.9, &alpha) ||
      !fzOnnxAttrFloat(im, "beta", 0.999, &beta) ||
      !fzOnnxAttrFloat(im, "epsilon", 1e-6, &eps) ||
      !fzOnnxAttrFloat(im, "norm_coefficient", 0, &norm) ||
      !fzOnnxAttrFloat(im, "norm_coefficient_post", 0, &post) ||
      !check_layout(im, in, nIn, nOut, 4, 3, &n))
    return false;
  FzValue *r, *t, *tPos;
  scalars(im, in, &r, &t, &tPos);
  /* R_adjusted = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R */
  FzValue *one = k(im, r, 1);
  FzValue *bt = fzOnnxBinary(im, "graph.pow", k(im, r, beta), t);
  FzValue *at = fzOnnxBinary(im, "graph.pow", k(im, r, alpha), t);
  FzValue *adj = mul(im, r,
                     divide(im, fzOnnxUnary(im, "graph.sqrt",
                                            sub(im, one, bt)),
                            sub(im, one, at)));
  FzValue *rAdj = fzOnnxSelect(im, tPos, adj, r);
  for (size_t i = 0; i < n; ++i) {
    FzValue *x = in[2 + i], *g = in[2 + n + i], *v = in[2 + 2 * n + i],
            *h = in[2 + 3 * n + i];
    FzValue *gr = norm != 0 ? add(im, scale(im, norm, x), g) : g;
    FzValue *vNew = add(im, scale(im, alpha, v), scale(im, 1 - alpha, gr));
    FzValue *hNew =
        add(im, scale(im, beta, h), scale(im, 1 - beta, mul(im, gr, gr)));
    FzValue *hSqrt = add(im, fzOnnxUnary(im, "graph.sqrt", hNew),
                         k(im, hNew, eps));
    FzValue *xNew = sub(im, x, mul(im, rAdj, divide(im, vNew, hSqrt)));
    if (i < nOut)
      out[i] = post != 0 ? scale(im, 1 - post, xNew) : xNew;
    if (n + i < nOut)
      out[n + i] = vNew;
    if (2 * n + i < nOut)
      out[2 * n + i] = hNew;
  }
  return true;
}

static const FzOnnxOpDef kTrainingOps[] = {
    {"Adagrad", h_adagrad, NULL, "decay_factor epsilon norm_coefficient", 3,
     -1, 1 << 20},
    {"Momentum", h_momentum, NULL, "alpha beta mode norm_coefficient", 3, -1,
     1 << 20},
    {"Adam", h_adam, NULL,
     "alpha beta epsilon norm_coefficient norm_coefficient_post", 4, -1,
     1 << 20},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

const FzOnnxOpDef *fzOnnxLookupTrainingOp(const char *opType) {
  for (const FzOnnxOpDef *row = kTrainingOps; row->opType; ++row)
    if (!strcmp(row->opType, opType))
      return row;
  return NULL;
}

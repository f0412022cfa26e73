/* dialects/graph/ops_reduce.c - reductions and the normalizations built
 * on them: reduce_{sum,mean,max,min,prod}, softmax, log_softmax,
 * layer_norm, rms_norm and batch_norm (inference form).
 *
 * Attributes:
 *   reduce_*     axes: array<i64> (absent: every dim; negative counts
 *                from the end; no repeats), keepdims: bool (default
 *                false: reduced dims are dropped; true: kept as 1)
 *   softmax, log_softmax   axis: i64 (default -1)
 *   layer_norm   axis: i64 (default -1): normalizes over dims [axis,
 *                rank); epsilon: float (default 1e-5). Operands: x, and
 *                optionally scale, then bias, each broadcasting to
 *                x.shape[axis:]. Results: y, or y, mean and inv_std_dev
 *                (x.shape[:axis] followed by ones)
 *   rms_norm     as layer_norm with operands x and optional scale
 *   batch_norm   epsilon (default 1e-5); operands x (N, C, ...), scale,
 *                bias, mean, variance, each of shape [C]
 */
#include <string.h>

#include "dialects/graph/graph_internal.h"

/*===--- Reductions -----------------------------------------------------===*/

static const char *const reduce_attrs[] = {"axes", "keepdims", NULL};

static bool shape_reduce(FzGraphDiag *d, size_t n, FzType *const *in,
                         const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, 1) || !fzGraphCheckRanked(d, in, 0))
    return false;
  size_t r = fzShapedTypeGetRank(in[0]), na;
  int64_t axes[FZ_GRAPH_MAX_RANK], shape[FZ_GRAPH_MAX_RANK];
  bool present, keep, reduced[FZ_GRAPH_MAX_RANK] = {false};
  if (!fzGraphGetI64Array(d, a, "axes", FZ_GRAPH_MAX_RANK, axes, &na,
                          &present) ||
      !fzGraphGetBool(d, a, "keepdims", false, &keep))
    return false;
  if (!present)
    for (size_t i = 0; i < r; ++i)
      reduced[i] = true;
  for (size_t i = 0; i < na; ++i) {
    size_t ax;
    if (!fzGraphNormAxis(d, "axes", axes[i], r, &ax))
      return false;
    if (reduced[ax])
      return fzGraphError(d, "attribute 'axes' names dimension %zu twice", ax);
    reduced[ax] = true;
  }
  size_t k = 0;
  for (size_t i = 0; i < r; ++i) {
    if (!reduced[i])
      shape[k++] = fzShapedTypeGetDim(in[0], i);
    else if (keep)
      shape[k++] = 1;
  }
  out[0] = fzGraphTensorType(d, k, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_reduce)

/*===--- softmax and log_softmax ---------------------------------------===*/

static const char *const axis_attrs[] = {"axis", NULL};

static bool shape_softmax(FzGraphDiag *d, size_t n, FzType *const *in,
                          const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, 1) || !fzGraphCheckRanked(d, in, 0))
    return false;
  int64_t ax;
  size_t axis;
  if (!fzGraphGetInt(d, a, "axis", -1, &ax) ||
      !fzGraphNormAxis(d, "axis", ax, fzShapedTypeGetRank(in[0]), &axis))
    return false;
  out[0] = in[0];
  return true;
}
FZ_GRAPH_INFER_HOOK(shape_softmax)

/*===--- layer_norm and rms_norm ---------------------------------------===*/

static const char *const norm_attrs[] = {"axis", "epsilon", NULL};

static bool shape_norm(FzGraphDiag *d, size_t n, FzType *const *in,
                       const FzGraphAttrs *a, size_t maxOperands,
                       FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, maxOperands))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!fzGraphCheckRanked(d, in, i) ||
        (i && !fzGraphCheckSameElement(d, in, 0, i)))
      return false;
  size_t r = fzShapedTypeGetRank(in[0]), axis;
  int64_t ax;
  double eps;
  if (!fzGraphGetInt(d, a, "axis", -1, &ax) ||
      !fzGraphNormAxis(d, "axis", ax, r, &axis) ||
      !fzGraphGetFloat(d, a, "epsilon", 1e-5, &eps))
    return false;
  if (!(eps >= 0))
    return fzGraphError(d, "attribute 'epsilon' must be >= 0");
  const int64_t *shape = fzShapedTypeGetShape(in[0]);
  for (size_t i = 1; i < n; ++i)
    if (!fzGraphCheckBroadcastsTo(d, in[i], i, r - axis, shape + axis,
                                  "the normalized dimensions of operand #0"))
      return false;
  out[0] = in[0];
  return true;
}

/* layer_norm fills the types of all three results: y, then the mean and
 * the inverse standard deviation, x.shape[:axis] followed by ones (ONNX
 * LayerNormalization's Mean and InvStdDev), of x's element type. The op
 * has the first or all three (check_layer_norm); callers of shape
 * functions give room for 4 results. */
static bool shape_layer_norm(FzGraphDiag *d, size_t n, FzType *const *in,
                             const FzGraphAttrs *a, FzType **out) {
  if (!shape_norm(d, n, in, a, 3, out))
    return false;
  int64_t ax;
  size_t r = fzShapedTypeGetRank(in[0]), axis;
  if (!fzGraphGetInt(d, a, "axis", -1, &ax) ||
      !fzGraphNormAxis(d, "axis", ax, r, &axis))
    return false;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i < r; ++i)
    shape[i] = i < axis ? fzShapedTypeGetDim(in[0], i) : 1;
  out[1] = out[2] =
      fzGraphTensorType(d, r, shape, fzShapedTypeGetElementType(in[0]));
  return out[1] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_layer_norm)

static bool check_layer_norm(FzOp *op, FzGraphDiag *d) {
  size_t r = fzOpGetNumResults(op);
  if (r != 1 && r != 3)
    return fzGraphError(d,
                        "has %zu results; expected 1 (y) or 3 (y, mean, "
                        "inv_std_dev)",
                        r);
  return true;
}

static bool shape_rms_norm(FzGraphDiag *d, size_t n, FzType *const *in,
                           const FzGraphAttrs *a, FzType **out) {
  return shape_norm(d, n, in, a, 2, out);
}
FZ_GRAPH_INFER_HOOK(shape_rms_norm)

/*===--- batch_norm -----------------------------------------------------===*/

static const char *const epsilon_attrs[] = {"epsilon", NULL};

static bool shape_batch_norm(FzGraphDiag *d, size_t n, FzType *const *in,
                             const FzGraphAttrs *a, FzType **out) {
  static const char *const names[] = {"x", "scale", "bias", "mean", "variance"};
  if (!fzGraphCheckCount(d, n, 5, 5))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!fzGraphCheckRanked(d, in, i) ||
        (i && !fzGraphCheckSameElement(d, in, 0, i)))
      return false;
  double eps;
  if (!fzGraphGetFloat(d, a, "epsilon", 1e-5, &eps))
    return false;
  if (!(eps >= 0))
    return fzGraphError(d, "attribute 'epsilon' must be >= 0");
  if (fzShapedTypeGetRank(in[0]) < 2)
    return fzGraphError(d,
                        "operand #0 (x) must have rank >= 2 (N, C, ...), "
                        "but has rank %zu",
                        fzShapedTypeGetRank(in[0]));
  int64_t c = fzShapedTypeGetDim(in[0], 1);
  for (size_t i = 1; i < 5; ++i) {
    if (fzShapedTypeGetRank(in[i]) != 1)
      return fzGraphError(d,
                          "operand #%zu (%s) must have rank 1, but has "
                          "rank %zu",
                          i, names[i], fzShapedTypeGetRank(in[i]));
    int64_t k = fzShapedTypeGetDim(in[i], 0);
    if (k != FZ_DYNAMIC && c != FZ_DYNAMIC && k != c)
      return fzGraphError(d,
                          "operand #%zu (%s) dimension 0 (%lld) does not "
                          "match operand #0 dimension 1 (%lld, the "
                          "channels)",
                          i, names[i], (long long)k, (long long)c);
  }
  out[0] = in[0];
  return true;
}
FZ_GRAPH_INFER_HOOK(shape_batch_norm)

/*===--- Kernels (interp_reduce.c) and definitions ----------------------===*/

bool fzGraphKernelReduce(FzGraphInterp *, FzOp *, FzTensor *const *,
                         FzTensor **);
bool fzGraphKernelSoftmax(FzGraphInterp *, FzOp *, FzTensor *const *,
                          FzTensor **);
bool fzGraphKernelLayerNorm(FzGraphInterp *, FzOp *, FzTensor *const *,
                            FzTensor **);
bool fzGraphKernelBatchNorm(FzGraphInterp *, FzOp *, FzTensor *const *,
                            FzTensor **);

static const FzGraphKernel kernel_reduce = {fzGraphKernelReduce};
static const FzGraphKernel kernel_softmax = {fzGraphKernelSoftmax};
static const FzGraphKernel kernel_layer_norm = {fzGraphKernelLayerNorm};
static const FzGraphKernel kernel_batch_norm = {fzGraphKernelBatchNorm};

#define DEFINE_OP FZ_GRAPH_DEFINE_FOLDING_OP

DEFINE_OP(reduce_sum, "sum over axes", 1, FZ_FUSION_REDUCTION, reduce_attrs,
          shape_reduce, 0, kernel_reduce, 0)
DEFINE_OP(reduce_mean, "mean over axes (integers: truncated)", 1,
          FZ_FUSION_REDUCTION, reduce_attrs, shape_reduce, 0, kernel_reduce, 1)
DEFINE_OP(reduce_max, "maximum over axes (NaN propagates)", 1,
          FZ_FUSION_REDUCTION, reduce_attrs, shape_reduce, 0, kernel_reduce, 2)
DEFINE_OP(reduce_min, "minimum over axes (NaN propagates)", 1,
          FZ_FUSION_REDUCTION, reduce_attrs, shape_reduce, 0, kernel_reduce, 3)
DEFINE_OP(reduce_prod, "product over axes", 1, FZ_FUSION_REDUCTION,
          reduce_attrs, shape_reduce, 0, kernel_reduce, 4)
DEFINE_OP(softmax, "exp(x - max) / sum(exp(x - max)) along axis", 1,
          FZ_FUSION_REDUCTION, axis_attrs, shape_softmax, G_FLOAT_ONLY,
          kernel_softmax, 0)
DEFINE_OP(log_softmax, "x - max - log(sum(exp(x - max))) along axis", 1,
          FZ_FUSION_REDUCTION, axis_attrs, shape_softmax, G_FLOAT_ONLY,
          kernel_softmax, 1)
/* layer_norm has 1 or 3 results: its own definition. */
FZ_GRAPH_PATTERNS_HOOK(layer_norm)
static const FzGraphOpInfo layer_norm_info = {
    shape_layer_norm, check_layer_norm, G_FLOAT_ONLY, NULL, NULL, NULL, NULL,
    NULL, 0};
const FzOpDef fzGraphOp_layer_norm = {
    .name = "graph.layer_norm",
    .summary = "(x - mean) / sqrt(var + epsilon) * scale + bias over dims "
               "[axis, rank); optionally also the mean and 1 / sqrt(var + "
               "epsilon)",
    .traits = FZ_TRAIT_PURE,
    .numOperands = FZ_VARIADIC,
    .numResults = FZ_VARIADIC,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_REDUCTION,
    .inherentAttrs = norm_attrs,
    .verify = fzGraphVerify,
    .fold = fzGraphFoldReduceOp,
    .inferResultTypes = shape_layer_norm_hook,
    .print = fzGraphPrint,
    .parse = fzGraphParse,
    .getCanonicalizationPatterns = layer_norm_patterns,
    .interpret = &kernel_layer_norm,
    .extra = &layer_norm_info,
};
DEFINE_OP(rms_norm,
          "x / sqrt(mean(x^2) + epsilon) * scale over dims [axis, "
          "rank)",
          FZ_VARIADIC, FZ_FUSION_REDUCTION, norm_attrs, shape_rms_norm,
          G_FLOAT_ONLY, kernel_layer_norm, 1)
DEFINE_OP(batch_norm,
          "(x - mean) / sqrt(variance + epsilon) * scale + bias "
          "per channel (dim 1)",
          5, FZ_FUSION_BROADCAST, epsilon_attrs, shape_batch_norm, G_FLOAT_ONLY,
          kernel_batch_norm, 0)

/* dialects/graph/ops_shape.c - constants and the ops that move data
 * without computing: broadcast, reshape, transpose, slice, concat,
 * gather and pad.
 *
 * Attributes (all stored as properties):
 *   constant   value: dense elements (its type is the result type)
 *   transpose  perm: array<i64>, a permutation of [0, rank)
 *   slice      starts, limits, strides: array<i64>, one per dim; element
 *              k of dim d is at starts[d] + k * strides[d] while it stays
 *              before limits[d] (after it, for a negative stride)
 *   concat     axis: i64 (negative counts from the end)
 *   gather     axis: i64 (default 0), as ONNX Gather
 *   pad        pads: array<i64: begin..., end...> (2 * rank, may be
 *              negative to crop), value: float (default 0)
 * broadcast and reshape take their target from the result type.
 */
#include <string.h>

#include "dialects/graph/graph_internal.h"

/*===--- constant -------------------------------------------------------===*/

static const char *const constant_attrs[] = {"value", NULL};

static bool shape_constant(FzGraphDiag *d, size_t n, FzType *const *in,
                           const FzGraphAttrs *a, FzType **out) {
  (void)in;
  if (!fzGraphCheckCount(d, n, 0, 0))
    return false;
  FzAttr *v = fzGraphAttrsLookup(a, "value");
  if (!v)
    return fzGraphError(d, "requires attribute 'value'");
  if (fzAttrGetKind(v) != FZ_ATTR_DENSE ||
      fzTypeGetKind(fzAttrGetType(v)) != FZ_TYPE_TENSOR)
    return fzGraphError(d, "attribute 'value' must be dense elements of a "
                           "tensor type (dense<...> : tensor<...>)");
  FzType *elt = fzShapedTypeGetElementType(fzAttrGetType(v));
  char buf[64];
  if (!fzTensorDTypeIsSupported(elt))
    return fzGraphError(d,
                        "attribute 'value' has unsupported element type "
                        "'%s'",
                        fzGraphTypeStr(elt, buf, sizeof buf));
  out[0] = fzAttrGetType(v);
  return true;
}
FZ_GRAPH_INFER_HOOK(shape_constant)

/*===--- broadcast and reshape -----------------------------------------===*/

/* One ranked operand; the result type is the op's to choose. */
static bool shape_one_operand(FzGraphDiag *d, size_t n, FzType *const *in,
                              const FzGraphAttrs *a, FzType **out) {
  (void)a;
  (void)out;
  return fzGraphCheckCount(d, n, 1, 1) && fzGraphCheckRanked(d, in, 0);
}
FZ_GRAPH_INFER_HOOK(shape_one_operand)

static bool check_same_element(FzGraphDiag *d, FzType *src, FzType *dst) {
  char bs[128], bd[128];
  if (fzShapedTypeGetElementType(src) == fzShapedTypeGetElementType(dst))
    return true;
  return fzGraphError(d,
                      "result #0 type '%s' must have the element type of "
                      "operand #0 ('%s')",
                      fzGraphTypeStr(dst, bd, sizeof bd),
                      fzGraphTypeStr(src, bs, sizeof bs));
}

static bool check_broadcast(FzOp *op, FzGraphDiag *d) {
  FzType *src = fzValueGetType(fzOpGetOperand(op, 0));
  FzType *dst = fzValueGetType(fzOpGetResult(op, 0));
  if (!check_same_element(d, src, dst))
    return false;
  if (fzShapedTypeGetRank(dst) > FZ_GRAPH_MAX_RANK)
    return fzGraphError(d, "result #0 has rank %zu, above the maximum (%d)",
                        fzShapedTypeGetRank(dst), FZ_GRAPH_MAX_RANK);
  return fzGraphCheckBroadcastsTo(d, src, 0, fzShapedTypeGetRank(dst),
                                  fzShapedTypeGetShape(dst), "result #0");
}

static bool check_reshape(FzOp *op, FzGraphDiag *d) {
  FzType *src = fzValueGetType(fzOpGetOperand(op, 0));
  FzType *dst = fzValueGetType(fzOpGetResult(op, 0));
  char bs[128], bd[128];
  if (!check_same_element(d, src, dst))
    return false;
  if (fzShapedTypeGetRank(dst) > FZ_GRAPH_MAX_RANK)
    return fzGraphError(d, "result #0 has rank %zu, above the maximum (%d)",
                        fzShapedTypeGetRank(dst), FZ_GRAPH_MAX_RANK);
  int64_t a = fzShapedTypeGetNumElements(src);
  int64_t b = fzShapedTypeGetNumElements(dst);
  if (a >= 0 && b >= 0 && a != b)
    return fzGraphError(d,
                        "operand #0 '%s' has %lld elements but result #0 "
                        "'%s' has %lld",
                        fzGraphTypeStr(src, bs, sizeof bs), (long long)a,
                        fzGraphTypeStr(dst, bd, sizeof bd), (long long)b);
  return true;
}

/*===--- transpose ------------------------------------------------------===*/

static const char *const transpose_attrs[] = {"perm", NULL};

static bool shape_transpose(FzGraphDiag *d, size_t n, FzType *const *in,
                            const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, 1) || !fzGraphCheckRanked(d, in, 0))
    return false;
  size_t r = fzShapedTypeGetRank(in[0]), np;
  int64_t perm[FZ_GRAPH_MAX_RANK], shape[FZ_GRAPH_MAX_RANK];
  bool present, seen[FZ_GRAPH_MAX_RANK] = {false};
  if (!fzGraphGetI64Array(d, a, "perm", FZ_GRAPH_MAX_RANK, perm, &np, &present))
    return false;
  if (!present)
    return fzGraphError(d, "requires attribute 'perm' (array<i64: ...>)");
  if (np != r)
    return fzGraphError(d,
                        "attribute 'perm' has %zu entries but operand #0 "
                        "has rank %zu",
                        np, r);
  for (size_t i = 0; i < r; ++i) {
    if (perm[i] < 0 || perm[i] >= (int64_t)r)
      return fzGraphError(d,
                          "attribute 'perm' entry %zu (%lld) is out of "
                          "range [0, %zu)",
                          i, (long long)perm[i], r);
    if (seen[perm[i]])
      return fzGraphError(d,
                          "attribute 'perm' is not a permutation: %lld "
                          "appears twice",
                          (long long)perm[i]);
    seen[perm[i]] = true;
    shape[i] = fzShapedTypeGetDim(in[0], (size_t)perm[i]);
  }
  out[0] = fzGraphTensorType(d, r, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_transpose)

/*===--- slice ----------------------------------------------------------===*/

static const char *const slice_attrs[] = {"starts", "limits", "strides", NULL};

/* ceil(len / |step|) for len >= 0 as unsigned numbers (any step but 0:
 * INT64_MIN and INT64_MAX included, where a + b - 1 or -b would
 * overflow); above FZ_MAX_DIM the count is FZ_MAX_DIM + 1, which the
 * type then rejects as too large. */
static int64_t slice_count(uint64_t len, int64_t step) {
  uint64_t st = step < 0 ? 0 - (uint64_t)step : (uint64_t)step;
  uint64_t n = len == 0 ? 0 : (len - 1) / st + 1;
  return n > (uint64_t)FZ_MAX_DIM ? FZ_MAX_DIM + 1 : (int64_t)n;
}

static bool shape_slice(FzGraphDiag *d, size_t n, FzType *const *in,
                        const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, 1) || !fzGraphCheckRanked(d, in, 0))
    return false;
  size_t r = fzShapedTypeGetRank(in[0]), ns, nl, nst;
  int64_t starts[FZ_GRAPH_MAX_RANK], limits[FZ_GRAPH_MAX_RANK];
  int64_t strides[FZ_GRAPH_MAX_RANK], shape[FZ_GRAPH_MAX_RANK];
  bool ps, pl, pst;
  if (!fzGraphGetI64Array(d, a, "starts", FZ_GRAPH_MAX_RANK, starts, &ns,
                          &ps) ||
      !fzGraphGetI64Array(d, a, "limits", FZ_GRAPH_MAX_RANK, limits, &nl,
                          &pl) ||
      !fzGraphGetI64Array(d, a, "strides", FZ_GRAPH_MAX_RANK, strides, &nst,
                          &pst))
    return false;
  if (!ps || !pl)
    return fzGraphError(d, "requires attributes 'starts' and 'limits' "
                           "(array<i64: ...>, one entry per dimension)");
  if (ns != r || nl != r || (pst && nst != r))
    return fzGraphError(d,
                        "attributes 'starts', 'limits' and 'strides' "
                        "need %zu entries (the rank of operand #0), got "
                        "%zu, %zu and %zu",
                        r, ns, nl, pst ? nst : r);
  for (size_t i = 0; i < r; ++i) {
    int64_t s = starts[i], l = limits[i], st = pst ? strides[i] : 1;
    int64_t dim = fzShapedTypeGetDim(in[0], i);
    if (st == 0)
      return fzGraphError(d, "attribute 'strides' entry %zu is 0", i);
    if (st > 0) {
      if (s < 0 || l < s || (dim != FZ_DYNAMIC && l > dim))
        return fzGraphError(d,
                            "dimension %zu: the slice [%lld, %lld) does "
                            "not fit 0 <= start <= limit <= %lld",
                            i, (long long)s, (long long)l, (long long)dim);
      shape[i] = slice_count((uint64_t)l - (uint64_t)s, st);
    } else {
      if (l < -1 || s < l || (dim != FZ_DYNAMIC && s >= dim && s != l))
        return fzGraphError(d,
                            "dimension %zu: the reversed slice from %lld "
                            "down to %lld does not fit -1 <= limit <= "
                            "start < %lld",
                            i, (long long)s, (long long)l, (long long)dim);
      shape[i] = slice_count((uint64_t)s - (uint64_t)l, st);
    }
  }
  out[0] = fzGraphTensorType(d, r, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_slice)

/*===--- concat ---------------------------------------------------------===*/

static const char *const axis_attrs[] = {"axis", NULL};

static bool shape_concat(FzGraphDiag *d, size_t n, FzType *const *in,
                         const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, (size_t)-1))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!fzGraphCheckRanked(d, in, i) ||
        (i && !fzGraphCheckSameElement(d, in, 0, i)))
      return false;
  size_t r = fzShapedTypeGetRank(in[0]), axis;
  int64_t ax;
  if (!fzGraphAttrsLookup(a, "axis"))
    return fzGraphError(d, "requires attribute 'axis' (i64)");
  if (!fzGraphGetInt(d, a, "axis", 0, &ax) ||
      !fzGraphNormAxis(d, "axis", ax, r, &axis))
    return false;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  memcpy(shape, fzShapedTypeGetShape(in[0]), r * sizeof *shape);
  for (size_t i = 1; i < n; ++i) {
    if (fzShapedTypeGetRank(in[i]) != r)
      return fzGraphError(d,
                          "operand #%zu has rank %zu but operand #0 has "
                          "rank %zu",
                          i, fzShapedTypeGetRank(in[i]), r);
    for (size_t k = 0; k < r; ++k) {
      int64_t dk = fzShapedTypeGetDim(in[i], k);
      if (k == axis) {
        shape[k] = (shape[k] == FZ_DYNAMIC || dk == FZ_DYNAMIC) ? FZ_DYNAMIC
                                                                : shape[k] + dk;
        continue;
      }
      if (dk == FZ_DYNAMIC)
        continue;
      if (shape[k] != FZ_DYNAMIC && shape[k] != dk)
        return fzGraphError(d,
                            "operand #%zu dimension %zu (%lld) does not "
                            "match operand #0 dimension %zu (%lld)",
                            i, k, (long long)dk, k, (long long)shape[k]);
      shape[k] = dk;
    }
  }
  out[0] = fzGraphTensorType(d, r, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_concat)

/*===--- gather ---------------------------------------------------------===*/

static bool shape_gather(FzGraphDiag *d, size_t n, FzType *const *in,
                         const FzGraphAttrs *a, FzType **out) {
  char buf[128];
  if (!fzGraphCheckCount(d, n, 2, 2) || !fzGraphCheckRanked(d, in, 0) ||
      !fzGraphCheckRanked(d, in, 1))
    return false;
  FzType *ie = fzShapedTypeGetElementType(in[1]);
  if (!fzTypeIsInteger(ie) || fzTypeGetBitWidth(ie) < 8)
    return fzGraphError(d,
                        "operand #1 (the indices) must be a tensor of "
                        "integers, but got '%s'",
                        fzGraphTypeStr(in[1], buf, sizeof buf));
  size_t r = fzShapedTypeGetRank(in[0]), q = fzShapedTypeGetRank(in[1]);
  size_t axis;
  int64_t ax;
  if (!fzGraphGetInt(d, a, "axis", 0, &ax) ||
      !fzGraphNormAxis(d, "axis", ax, r, &axis))
    return false;
  if (r - 1 + q > FZ_GRAPH_MAX_RANK)
    return fzGraphError(d, "the result rank %zu is above the maximum (%d)",
                        r - 1 + q, FZ_GRAPH_MAX_RANK);
  int64_t shape[FZ_GRAPH_MAX_RANK];
  size_t k = 0;
  for (size_t i = 0; i < axis; ++i)
    shape[k++] = fzShapedTypeGetDim(in[0], i);
  for (size_t i = 0; i < q; ++i)
    shape[k++] = fzShapedTypeGetDim(in[1], i);
  for (size_t i = axis + 1; i < r; ++i)
    shape[k++] = fzShapedTypeGetDim(in[0], i);
  out[0] = fzGraphTensorType(d, k, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_gather)

/*===--- pad ------------------------------------------------------------===*/

static const char *const pad_attrs[] = {"pads", "value", NULL};

static bool shape_pad(FzGraphDiag *d, size_t n, FzType *const *in,
                      const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, 1) || !fzGraphCheckRanked(d, in, 0))
    return false;
  size_t r = fzShapedTypeGetRank(in[0]), np;
  int64_t pads[2 * FZ_GRAPH_MAX_RANK], shape[FZ_GRAPH_MAX_RANK];
  bool present;
  double value;
  if (!fzGraphGetI64Array(d, a, "pads", 2 * FZ_GRAPH_MAX_RANK, pads, &np,
                          &present) ||
      !fzGraphGetFloat(d, a, "value", 0.0, &value))
    return false;
  if (!present || np != 2 * r)
    return fzGraphError(d,
                        "requires attribute 'pads' with %zu entries (the "
                        "begin pads of each dimension, then the end "
                        "pads)",
                        2 * r);
  for (size_t i = 0; i < 2 * r; ++i) /* so that no sum below overflows */
    if (pads[i] < -FZ_MAX_DIM || pads[i] > FZ_MAX_DIM)
      return fzGraphError(d, "attribute 'pads' entry %zu (%lld) is outside "
                             "[-%lld, %lld]",
                          i, (long long)pads[i], (long long)FZ_MAX_DIM,
                          (long long)FZ_MAX_DIM);
  for (size_t i = 0; i < r; ++i) {
    int64_t dim = fzShapedTypeGetDim(in[0], i);
    if (dim == FZ_DYNAMIC) {
      shape[i] = FZ_DYNAMIC;
      continue;
    }
    shape[i] = dim + pads[i] + pads[r + i];
    if (shape[i] < 0 || pads[i] < -dim || pads[r + i] < -dim)
      return fzGraphError(d,
                          "dimension %zu (%lld) cannot be cropped by "
                          "pads %lld and %lld",
                          i, (long long)dim, (long long)pads[i],
                          (long long)pads[r + i]);
  }
  out[0] = fzGraphTensorType(d, r, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_pad)

/*===--- Kernels (interp_shape.c) and definitions -----------------------===*/

bool fzGraphKernelConstant(FzGraphInterp *, FzOp *, FzTensor *const *,
                           FzTensor **);
bool fzGraphKernelBroadcast(FzGraphInterp *, FzOp *, FzTensor *const *,
                            FzTensor **);
bool fzGraphKernelReshape(FzGraphInterp *, FzOp *, FzTensor *const *,
                          FzTensor **);
bool fzGraphKernelTranspose(FzGraphInterp *, FzOp *, FzTensor *const *,
                            FzTensor **);
bool fzGraphKernelSlice(FzGraphInterp *, FzOp *, FzTensor *const *,
                        FzTensor **);
bool fzGraphKernelConcat(FzGraphInterp *, FzOp *, FzTensor *const *,
                         FzTensor **);
bool fzGraphKernelGather(FzGraphInterp *, FzOp *, FzTensor *const *,
                         FzTensor **);
bool fzGraphKernelPad(FzGraphInterp *, FzOp *, FzTensor *const *, FzTensor **);
bool fzGraphFoldShapeOp(FzOp *op, FzAttr *const *constOperands,
                        FzFoldResult *results);

#define DEFINE_OP(id, summ, tr, nOps, kind, attrNames, shapeFn, checkFn,       \
                  kernFn)                                                      \
  static const FzGraphKernel id##_kernel = {kernFn};                           \
  FZ_GRAPH_PATTERNS_HOOK(id)                                                   \
  static const FzGraphOpInfo id##_info = {shapeFn, checkFn, 0,    NULL, NULL,  \
                                          NULL,    NULL,    NULL, 0};          \
  const FzOpDef fzGraphOp_##id = {                                             \
      .name = "graph." #id,                                                    \
      .summary = summ,                                                         \
      .traits = FZ_TRAIT_PURE | (tr),                                          \
      .numOperands = nOps,                                                     \
      .numResults = 1,                                                         \
      .numRegions = 0,                                                         \
      .fusionKind = kind,                                                      \
      .inherentAttrs = attrNames,                                              \
      .verify = fzGraphVerify,                                                 \
      .fold = fzGraphFoldShapeOp,                                              \
      .inferResultTypes = shapeFn##_hook,                                      \
      .print = fzGraphPrint,                                                   \
      .parse = fzGraphParse,                                                   \
      .getCanonicalizationPatterns = id##_patterns,                            \
      .interpret = &id##_kernel,                                               \
      .extra = &id##_info,                                                     \
  };

DEFINE_OP(constant, "a dense tensor constant", FZ_TRAIT_CONSTANT_LIKE, 0,
          FZ_FUSION_ELEMENTWISE, constant_attrs, shape_constant, NULL,
          fzGraphKernelConstant)
DEFINE_OP(broadcast, "numpy-broadcasts the operand to the result shape", 0, 1,
          FZ_FUSION_BROADCAST, NULL, shape_one_operand, check_broadcast,
          fzGraphKernelBroadcast)
DEFINE_OP(reshape, "the same elements (row-major) in the result shape", 0, 1,
          FZ_FUSION_INJECTIVE, NULL, shape_one_operand, check_reshape,
          fzGraphKernelReshape)
DEFINE_OP(transpose,
          "permutes dimensions: result dim i is operand dim "
          "perm[i]",
          0, 1, FZ_FUSION_INJECTIVE, transpose_attrs, shape_transpose, NULL,
          fzGraphKernelTranspose)
DEFINE_OP(slice, "a strided window (starts, limits, strides per dim)", 0, 1,
          FZ_FUSION_INJECTIVE, slice_attrs, shape_slice, NULL,
          fzGraphKernelSlice)
DEFINE_OP(concat, "joins operands along axis", 0, FZ_VARIADIC,
          FZ_FUSION_INJECTIVE, axis_attrs, shape_concat, NULL,
          fzGraphKernelConcat)
DEFINE_OP(gather,
          "picks slices of operand #0 along axis at the indices of "
          "operand #1 (ONNX Gather)",
          0, 2, FZ_FUSION_INJECTIVE, axis_attrs, shape_gather, NULL,
          fzGraphKernelGather)
DEFINE_OP(pad, "pads (or crops) each dimension with a constant value", 0, 1,
          FZ_FUSION_INJECTIVE, pad_attrs, shape_pad, NULL, fzGraphKernelPad)

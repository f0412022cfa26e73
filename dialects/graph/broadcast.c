/* dialects/graph/broadcast.c - shape checks shared by the graph ops:
 * ranked-operand and element-type checks, numpy/ONNX broadcasting with
 * dynamic dims, and the comparison of a declared result type with an
 * inferred one.
 *
 * Broadcasting (numpy): shapes are aligned at their last dim; a missing
 * leading dim counts as 1; two dims are compatible when equal or when
 * one is 1, and the result takes the other. With dynamic dims: ? and 1
 * give ?, ? and N > 1 give N (the ? must be N or 1 at run time), ? and ?
 * give ?. The interpreter checks the run-time shapes again.
 *
 * Errors name the operand, its dim and both sizes, e.g.
 *   operand #1 dimension 0 (5) is not broadcast-compatible with operand
 *   #0 dimension 1 (4)
 */
#include <stdio.h>

#include "dialects/graph/graph_internal.h"

bool fzGraphCheckCount(FzGraphDiag *d, size_t n, size_t minN, size_t maxN) {
  if (maxN < minN)
    maxN = minN;
  if (n >= minN && n <= maxN)
    return true;
  if (minN == maxN)
    return fzGraphError(d, "expects %zu operand%s, but got %zu", minN,
                        minN == 1 ? "" : "s", n);
  if (maxN == (size_t)-1)
    return fzGraphError(d, "expects at least %zu operand%s, but got %zu", minN,
                        minN == 1 ? "" : "s", n);
  return fzGraphError(d, "expects %zu to %zu operands, but got %zu", minN, maxN,
                      n);
}

bool fzGraphCheckRanked(FzGraphDiag *d, FzType *const *in, size_t i) {
  char buf[128];
  FzType *t = in[i];
  if (!t || fzTypeGetKind(t) != FZ_TYPE_TENSOR ||
      fzShapedTypeGetRank(t) == FZ_UNRANKED)
    return fzGraphError(d,
                        "operand #%zu must be a ranked tensor, but got "
                        "'%s'",
                        i, fzGraphTypeStr(t, buf, sizeof buf));
  if (fzShapedTypeGetRank(t) > FZ_GRAPH_MAX_RANK)
    return fzGraphError(d,
                        "operand #%zu has rank %zu, above the graph "
                        "dialect's maximum rank (%d)",
                        i, fzShapedTypeGetRank(t), FZ_GRAPH_MAX_RANK);
  FzType *elt = fzShapedTypeGetElementType(t);
  if (!fzTensorDTypeIsSupported(elt))
    return fzGraphError(d,
                        "operand #%zu has unsupported element type '%s' "
                        "(expected f16, bf16, f32, f64, i1, i8, i16, i32 "
                        "or i64)",
                        i, fzGraphTypeStr(elt, buf, sizeof buf));
  return true;
}

bool fzGraphCheckSameElement(FzGraphDiag *d, FzType *const *in, size_t i,
                             size_t j) {
  FzType *a = fzShapedTypeGetElementType(in[i]);
  FzType *b = fzShapedTypeGetElementType(in[j]);
  if (a == b)
    return true;
  char ba[64], bb[64];
  return fzGraphError(d,
                      "operand #%zu element type '%s' does not match "
                      "operand #%zu element type '%s'",
                      j, fzGraphTypeStr(b, bb, sizeof bb), i,
                      fzGraphTypeStr(a, ba, sizeof ba));
}

bool fzGraphBroadcast(FzGraphDiag *d, FzType *const *in, size_t n,
                      const size_t *idx, int64_t *shape, size_t *rank) {
  size_t r = 0;
  for (size_t k = 0; k < n; ++k) {
    size_t rk = fzShapedTypeGetRank(in[idx[k]]);
    if (rk > r)
      r = rk;
  }
  /* owner[j]: which operand (and which of its dims) set shape[j]. */
  size_t ownerOp[FZ_GRAPH_MAX_RANK], ownerDim[FZ_GRAPH_MAX_RANK];
  for (size_t j = 0; j < r; ++j) {
    shape[j] = 1;
    ownerOp[j] = (size_t)-1;
    ownerDim[j] = 0;
  }
  for (size_t k = 0; k < n; ++k) {
    FzType *t = in[idx[k]];
    size_t rk = fzShapedTypeGetRank(t);
    for (size_t i = 0; i < rk; ++i) {
      size_t j = r - rk + i;
      int64_t a = shape[j], b = fzShapedTypeGetDim(t, i);
      if (b == 1)
        continue;
      if (a == 1) {
        shape[j] = b;
        ownerOp[j] = idx[k];
        ownerDim[j] = i;
        continue;
      }
      if (a == FZ_DYNAMIC) {
        if (b != FZ_DYNAMIC) {
          shape[j] = b;
          ownerOp[j] = idx[k];
          ownerDim[j] = i;
        }
        continue;
      }
      if (b == FZ_DYNAMIC || a == b)
        continue;
      return fzGraphError(d,
                          "operand #%zu dimension %zu (%lld) is not "
                          "broadcast-compatible with operand #%zu "
                          "dimension %zu (%lld)",
                          idx[k], i, (long long)b, ownerOp[j], ownerDim[j],
                          (long long)a);
    }
  }
  *rank = r;
  return true;
}

bool fzGraphCheckBroadcastsTo(FzGraphDiag *d, const FzType *from,
                              size_t fromIdx, size_t rank, const int64_t *shape,
                              const char *what) {
  size_t rf = fzShapedTypeGetRank(from);
  char bf[128];
  if (rf > rank)
    return fzGraphError(d,
                        "operand #%zu (%s) has rank %zu, above the "
                        "rank %zu of %s",
                        fromIdx, fzGraphTypeStr(from, bf, sizeof bf), rf, rank,
                        what);
  for (size_t i = 0; i < rf; ++i) {
    size_t j = rank - rf + i;
    int64_t a = fzShapedTypeGetDim(from, i), b = shape[j];
    if (a == 1 || a == FZ_DYNAMIC || b == FZ_DYNAMIC || a == b)
      continue;
    return fzGraphError(d,
                        "operand #%zu dimension %zu (%lld) does not "
                        "broadcast to dimension %zu (%lld) of %s",
                        fromIdx, i, (long long)a, j, (long long)b, what);
  }
  return true;
}

FzType *fzGraphTensorType(FzGraphDiag *d, size_t rank, const int64_t *shape,
                          FzType *elt) {
  FzType *t = fzTensorTypeGet(d->ctx, rank, shape, elt, d->loc);
  return t;
}

bool fzGraphCheckResult(FzGraphDiag *d, size_t i, FzType *declared,
                        FzType *inferred) {
  char bd[160], bi[160];
  if (!declared || fzTypeGetKind(declared) != FZ_TYPE_TENSOR ||
      fzShapedTypeGetRank(declared) == FZ_UNRANKED)
    return fzGraphError(d,
                        "result #%zu must be a ranked tensor, but got "
                        "'%s'",
                        i, fzGraphTypeStr(declared, bd, sizeof bd));
  if (!inferred || declared == inferred)
    return true;
  size_t r = fzShapedTypeGetRank(declared);
  if (r != fzShapedTypeGetRank(inferred))
    return fzGraphError(d,
                        "result #%zu type '%s' has rank %zu, but the "
                        "operands give '%s' of rank %zu",
                        i, fzGraphTypeStr(declared, bd, sizeof bd), r,
                        fzGraphTypeStr(inferred, bi, sizeof bi),
                        fzShapedTypeGetRank(inferred));
  if (fzShapedTypeGetElementType(declared) !=
      fzShapedTypeGetElementType(inferred))
    return fzGraphError(d,
                        "result #%zu type '%s' has the wrong element "
                        "type: the operands give '%s'",
                        i, fzGraphTypeStr(declared, bd, sizeof bd),
                        fzGraphTypeStr(inferred, bi, sizeof bi));
  for (size_t k = 0; k < r; ++k) {
    int64_t a = fzShapedTypeGetDim(declared, k);
    int64_t b = fzShapedTypeGetDim(inferred, k);
    if (a != FZ_DYNAMIC && b != FZ_DYNAMIC && a != b)
      return fzGraphError(d,
                          "result #%zu dimension %zu (%lld) does not "
                          "match the inferred dimension (%lld): the "
                          "operands give '%s'",
                          i, k, (long long)a, (long long)b,
                          fzGraphTypeStr(inferred, bi, sizeof bi));
  }
  return true;
}

bool fzGraphNormAxis(FzGraphDiag *d, const char *what, int64_t axis,
                     size_t rank, size_t *out) {
  int64_t r = (int64_t)rank;
  if (axis < -r || axis >= r) {
    if (rank == 0)
      return fzGraphError(d,
                          "attribute '%s' (%lld) is out of range: the "
                          "operand is a scalar",
                          what, (long long)axis);
    return fzGraphError(d,
                        "attribute '%s' (%lld) is out of range [%lld, "
                        "%lld) for rank %zu",
                        what, (long long)axis, (long long)-r, (long long)r,
                        rank);
  }
  *out = (size_t)(axis < 0 ? axis + r : axis);
  return true;
}

int64_t fzGraphNumElements(size_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] == FZ_DYNAMIC)
      return -1;
    n *= shape[i];
  }
  return n;
}

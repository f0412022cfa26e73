/* dialects/graph/interp_shape.c - interpreter kernels of constant and
 * the data-movement ops (broadcast, reshape, transpose, slice, concat,
 * gather, pad).
 *
 * These kernels copy elements as bytes (no conversion, so no rounding).
 * The dynamic dims of broadcast and reshape results are resolved here:
 * broadcast takes a '?' from the operand's aligned dim (when it is not
 * 1); reshape resolves a single '?' from the element count. Anything
 * else that stays unknown is an error naming the dim.
 */
#include <string.h>

#include "dialects/graph/graph_internal.h"

bool fzGraphKernelConstant(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                           FzTensor **res) {
  (void)ops;
  FzAttr *v = fzOpGetInherentAttr(op, FZ_STR("value"));
  if (!v || fzAttrGetKind(v) != FZ_ATTR_DENSE)
    return fzGraphInterpError(in, op, "requires a dense 'value'");
  FzType *t = fzAttrGetType(v);
  FzTensor *y = res[0] = fzGraphInterpCreateResult(
      in, op, 0, fzShapedTypeGetRank(t), fzShapedTypeGetShape(t));
  if (!y)
    return false;
  size_t esz = fzTypeGetStorageSize(y->dtype);
  const unsigned char *src = fzDenseAttrGetData(v);
  unsigned char *dst = y->data;
  if (fzDenseAttrIsSplat(v)) {
    for (int64_t i = 0; i < y->numElements; ++i)
      memcpy(dst + (size_t)i * esz, src, esz);
  } else {
    memcpy(dst, src, fzTensorGetNumBytes(y));
  }
  if (fzGraphIsIntType(y->dtype) && fzTypeGetBitWidth(y->dtype) == 1)
    for (int64_t i = 0; i < y->numElements; ++i)
      dst[i] &= 1;
  return true;
}

/* Copies x into y, which x broadcasts to (checked by the caller). */
static void broadcast_copy(const FzTensor *x, FzTensor *y) {
  size_t esz = fzTypeGetStorageSize(y->dtype);
  FzGraphBcastIter it;
  fzGraphBcastInit(&it, y, 1, &x);
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  for (int64_t i = 0; i < y->numElements; ++i, fzGraphBcastNext(&it))
    memcpy(dst + (size_t)i * esz, src + (size_t)it.off[0] * esz, esz);
}

bool fzGraphKernelBroadcast(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                            FzTensor **res) {
  const FzTensor *x = ops[0];
  FzType *declared = fzValueGetType(fzOpGetResult(op, 0));
  size_t r = fzShapedTypeGetRank(declared);
  int64_t shape[FZ_GRAPH_MAX_RANK];
  if (x->rank > r)
    return fzGraphInterpError(in, op,
                              "operand #0 has rank %zu, above the result's "
                              "%zu",
                              x->rank, r);
  for (size_t j = 0; j < r; ++j) {
    shape[j] = fzShapedTypeGetDim(declared, j);
    if (j < r - x->rank)
      continue;
    int64_t xd = x->shape[j - (r - x->rank)];
    if (shape[j] == FZ_DYNAMIC && xd != 1)
      shape[j] = xd;
    else if (shape[j] != FZ_DYNAMIC && xd != 1 && xd != shape[j])
      return fzGraphInterpError(in, op,
                                "operand #0 dimension %zu (%lld) does not "
                                "broadcast to dimension %zu (%lld) of result "
                                "#0 at run time",
                                j - (r - x->rank), (long long)xd, j,
                                (long long)shape[j]);
  }
  FzTensor *y = res[0] = fzGraphInterpCreateResult(in, op, 0, r, shape);
  if (!y)
    return false;
  broadcast_copy(x, y);
  return true;
}

bool fzGraphKernelReshape(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                          FzTensor **res) {
  const FzTensor *x = ops[0];
  FzType *declared = fzValueGetType(fzOpGetResult(op, 0));
  size_t r = fzShapedTypeGetRank(declared), numDyn = 0, dynAt = 0;
  int64_t shape[FZ_GRAPH_MAX_RANK], known = 1;
  char bt[160];
  for (size_t j = 0; j < r; ++j) {
    shape[j] = fzShapedTypeGetDim(declared, j);
    if (shape[j] == FZ_DYNAMIC) {
      numDyn++;
      dynAt = j;
    } else {
      known *= shape[j];
    }
  }
  if (numDyn == 1) {
    if (known == 0 || x->numElements % known != 0)
      return fzGraphInterpError(
          in, op, "cannot reshape %lld elements into '%s'",
          (long long)x->numElements, fzGraphTypeStr(declared, bt, sizeof bt));
    shape[dynAt] = x->numElements / known;
  } else if (numDyn == 0 && known != x->numElements) {
    return fzGraphInterpError(in, op,
                              "operand #0 has %lld elements at run time, but "
                              "result #0 '%s' has %lld",
                              (long long)x->numElements,
                              fzGraphTypeStr(declared, bt, sizeof bt),
                              (long long)known);
  }
  FzTensor *y = res[0] = fzGraphInterpCreateResult(in, op, 0, r, shape);
  if (!y)
    return false;
  memcpy(y->data, x->data, fzTensorGetNumBytes(y));
  return true;
}

bool fzGraphKernelTranspose(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                            FzTensor **res) {
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0];
  FzTensor *y = res[0];
  FzAttr *perm = fzOpGetInherentAttr(op, FZ_STR("perm"));
  int64_t xs[FZ_GRAPH_MAX_RANK], ps[FZ_GRAPH_MAX_RANK];
  int64_t idx[FZ_GRAPH_MAX_RANK] = {0};
  fzGraphStrides(x->rank, x->shape, xs);
  for (size_t k = 0; k < y->rank; ++k)
    ps[k] = xs[fzDenseArrayAttrGetInt(perm, k)];
  size_t esz = fzTypeGetStorageSize(y->dtype);
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  int64_t off = 0;
  for (int64_t i = 0; i < y->numElements; ++i) {
    memcpy(dst + (size_t)i * esz, src + (size_t)off * esz, esz);
    for (size_t d = y->rank; d-- > 0;) {
      off += ps[d];
      if (++idx[d] < y->shape[d])
        break;
      off -= ps[d] * y->shape[d];
      idx[d] = 0;
    }
  }
  return true;
}

bool fzGraphKernelSlice(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                        FzTensor **res) {
  const FzTensor *x = ops[0];
  FzAttr *sa = fzOpGetInherentAttr(op, FZ_STR("starts"));
  FzAttr *la = fzOpGetInherentAttr(op, FZ_STR("limits"));
  FzAttr *ta = fzOpGetInherentAttr(op, FZ_STR("strides"));
  int64_t start[FZ_GRAPH_MAX_RANK], step[FZ_GRAPH_MAX_RANK];
  for (size_t d = 0; d < x->rank; ++d) {
    start[d] = fzDenseArrayAttrGetInt(sa, d);
    int64_t limit = fzDenseArrayAttrGetInt(la, d);
    step[d] = ta ? fzDenseArrayAttrGetInt(ta, d) : 1;
    bool fits = step[d] > 0 ? limit <= x->shape[d]
                            : (start[d] < x->shape[d] || start[d] == limit);
    if (!fits)
      return fzGraphInterpError(in, op,
                                "dimension %zu: the slice from %lld to %lld "
                                "does not fit the run-time size %lld",
                                d, (long long)start[d], (long long)limit,
                                (long long)x->shape[d]);
  }
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  FzTensor *y = res[0];
  int64_t xs[FZ_GRAPH_MAX_RANK], idx[FZ_GRAPH_MAX_RANK] = {0}, off = 0;
  fzGraphStrides(x->rank, x->shape, xs);
  for (size_t d = 0; d < x->rank; ++d)
    off += start[d] * xs[d];
  size_t esz = fzTypeGetStorageSize(y->dtype);
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  for (int64_t i = 0; i < y->numElements; ++i) {
    memcpy(dst + (size_t)i * esz, src + (size_t)off * esz, esz);
    for (size_t d = y->rank; d-- > 0;) {
      off += step[d] * xs[d];
      if (++idx[d] < y->shape[d])
        break;
      off -= step[d] * xs[d] * y->shape[d];
      idx[d] = 0;
    }
  }
  return true;
}

bool fzGraphKernelConcat(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res) {
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  FzTensor *y = res[0];
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  int64_t ax;
  size_t axis;
  if (!fzGraphGetInt(&d, &a, "axis", 0, &ax) ||
      !fzGraphNormAxis(&d, "axis", ax, y->rank, &axis))
    return false;
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < axis; ++k)
    outer *= y->shape[k];
  for (size_t k = axis + 1; k < y->rank; ++k)
    inner *= y->shape[k];
  size_t esz = fzTypeGetStorageSize(y->dtype);
  unsigned char *dst = y->data;
  size_t n = fzOpGetNumOperands(op);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < n; ++k) {
      size_t chunk = (size_t)(ops[k]->shape[axis] * inner) * esz;
      memcpy(dst, (const unsigned char *)ops[k]->data + (size_t)o * chunk,
             chunk);
      dst += chunk;
    }
  return true;
}

bool fzGraphKernelGather(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res) {
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0], *ix = ops[1];
  FzTensor *y = res[0];
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  int64_t ax;
  size_t axis;
  if (!fzGraphGetInt(&d, &a, "axis", 0, &ax) ||
      !fzGraphNormAxis(&d, "axis", ax, x->rank, &axis))
    return false;
  int64_t outer = 1, inner = 1, dim = x->shape[axis];
  for (size_t k = 0; k < axis; ++k)
    outer *= x->shape[k];
  for (size_t k = axis + 1; k < x->rank; ++k)
    inner *= x->shape[k];
  size_t esz = fzTypeGetStorageSize(y->dtype), chunk = (size_t)inner * esz;
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < ix->numElements; ++j) {
      int64_t k = fzTensorGetI64(ix, j);
      if (k < -dim || k >= dim)
        return fzGraphInterpError(in, op,
                                  "index %lld (at position %lld of operand "
                                  "#1) is out of range [%lld, %lld)",
                                  (long long)k, (long long)j, (long long)-dim,
                                  (long long)dim);
      if (k < 0)
        k += dim;
      memcpy(dst, src + (size_t)(o * dim + k) * chunk, chunk);
      dst += chunk;
    }
  return true;
}

bool fzGraphKernelPad(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                      FzTensor **res) {
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0];
  FzTensor *y = res[0];
  FzAttr *pa = fzOpGetInherentAttr(op, FZ_STR("pads"));
  FzGraphDiag d = fzGraphInterpDiag(in, op);
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  double value;
  if (!fzGraphGetFloat(&d, &a, "value", 0.0, &value))
    return false;
  size_t r = x->rank, esz = fzTypeGetStorageSize(y->dtype);
  int64_t begin[FZ_GRAPH_MAX_RANK], xs[FZ_GRAPH_MAX_RANK];
  int64_t idx[FZ_GRAPH_MAX_RANK] = {0};
  for (size_t k = 0; k < r; ++k)
    begin[k] = fzDenseArrayAttrGetInt(pa, k);
  fzGraphStrides(r, x->shape, xs);
  /* The fill value, converted once to the element type. */
  FzTensor *fill = fzTensorCreate(in->ctx, y->dtype, 0, NULL);
  if (!fill)
    return false;
  fzTensorSetF64(fill, 0, value);
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  for (int64_t i = 0; i < y->numElements; ++i) {
    int64_t off = 0;
    bool inside = true;
    for (size_t k = 0; k < r && inside; ++k) {
      int64_t xi = idx[k] - begin[k];
      inside = xi >= 0 && xi < x->shape[k];
      off += xi * xs[k];
    }
    memcpy(dst + (size_t)i * esz,
           inside ? src + (size_t)off * esz : (const unsigned char *)fill->data,
           esz);
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < y->shape[k])
        break;
      idx[k] = 0;
    }
  }
  fzTensorDestroy(fill);
  return true;
}

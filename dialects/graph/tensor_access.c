/* dialects/graph/tensor_access.c - what the interpreter's kernels use of
 * host tensors (the type itself is ir/tensor.c's): whole-tensor
 * conversions to and from double or int64 arrays, and the stride and
 * broadcast helpers.
 */
#include <string.h>

#include "dialects/graph/graph_internal.h"

bool fzGraphIsIntType(const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_INTEGER;
}

/*===--- Whole-tensor conversions for kernels ---------------------------===*/

double *fzGraphLoadF64(const FzTensor *t) {
  size_t n = (size_t)t->numElements;
  double *v = fzMalloc(t->ctx, (n ? n : 1) * sizeof *v);
  if (!v)
    return NULL;
  switch (fzTypeGetKind(t->dtype)) {
  case FZ_TYPE_F32: {
    const float *f = t->data;
    for (size_t i = 0; i < n; ++i)
      v[i] = f[i];
    break;
  }
  case FZ_TYPE_F64:
    memcpy(v, t->data, n * sizeof *v);
    break;
  default:
    for (size_t i = 0; i < n; ++i)
      v[i] = fzTensorGetF64(t, (int64_t)i);
  }
  return v;
}

int64_t *fzGraphLoadI64(const FzTensor *t) {
  size_t n = (size_t)t->numElements;
  int64_t *v = fzMalloc(t->ctx, (n ? n : 1) * sizeof *v);
  if (!v)
    return NULL;
  for (size_t i = 0; i < n; ++i)
    v[i] = fzTensorGetI64(t, (int64_t)i);
  return v;
}

void fzGraphStoreF64(FzTensor *t, const double *v) {
  size_t n = (size_t)t->numElements;
  switch (fzTypeGetKind(t->dtype)) {
  case FZ_TYPE_F32: {
    float *f = t->data;
    for (size_t i = 0; i < n; ++i)
      f[i] = (float)v[i];
    return;
  }
  case FZ_TYPE_F64:
    memcpy(t->data, v, n * sizeof *v);
    return;
  default:
    for (size_t i = 0; i < n; ++i)
      fzTensorSetF64(t, (int64_t)i, v[i]);
  }
}

void fzGraphStoreI64(FzTensor *t, const int64_t *v) {
  for (size_t i = 0; i < (size_t)t->numElements; ++i)
    fzTensorSetI64(t, (int64_t)i, v[i]);
}

void fzGraphStrides(size_t rank, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (size_t i = rank; i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
}

void fzGraphBroadcastStrides(const FzTensor *t, size_t outRank,
                             const int64_t *outShape, int64_t *strides) {
  int64_t own[FZ_GRAPH_MAX_RANK];
  fzGraphStrides(t->rank, t->shape, own);
  for (size_t j = 0; j < outRank; ++j)
    strides[j] = 0;
  for (size_t i = 0; i < t->rank; ++i) {
    size_t j = outRank - t->rank + i;
    strides[j] = (t->shape[i] == 1 && outShape[j] != 1) ? 0 : own[i];
  }
}

void fzGraphBcastInit(FzGraphBcastIter *it, const FzTensor *out, size_t n,
                      const FzTensor *const *inputs) {
  it->rank = out->rank;
  it->numInputs = n;
  for (size_t d = 0; d < out->rank; ++d) {
    it->shape[d] = out->shape[d];
    it->idx[d] = 0;
  }
  for (size_t k = 0; k < n; ++k) {
    fzGraphBroadcastStrides(inputs[k], out->rank, out->shape, it->strides[k]);
    it->off[k] = 0;
  }
}

/* dialects/graph/ops_scatter.c - graph.scatter_nd: a copy of the data with
 * slices replaced (or combined) by updates at the positions an index
 * tensor names (ONNX ScatterND, and ScatterElements through it), with
 * its shape function, verifier and interpreter kernel.
 *
 *   %r = graph.scatter_nd %data, %indices, %updates {reduction = "add"}
 *          : tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x5xf32>
 *          -> tensor<4x5xf32>
 *
 * data has rank r >= 1; indices is an integer tensor of rank q >= 1 whose
 * last dim k (static, 1 <= k <= r) is the length of one index tuple;
 * updates has shape indices.shape[:-1] + data.shape[k:]. Update u (in
 * row-major order of indices.shape[:-1]) goes to the slice of data at the
 * tuple indices[u, :] (a negative index counts from the end; one outside
 * [-dim, dim) is an error). `reduction` (default "none") says how: "none"
 * replaces (when tuples repeat, the last update wins, as the kernel
 * applies them in order), "add", "mul", "max", "min" combine with what is
 * there (in order; i1 data takes "none" only).
 *
 * Kind: opaque. Every result element may come from any update, so no
 * producer or consumer is fused with it; graph-to-loop computes each
 * result element by scanning the updates (lowering/graph_to_loop_reduce.c),
 * O(|result| * U) work for U updates: meant for the small update sets of
 * exported models (masks built at export, cache writes).
 */
#include <string.h>

#include "dialects/graph/graph_internal.h"

static const char *const scatter_attrs[] = {"reduction", NULL};

/* The reduction's code: 0 none, 1 add, 2 mul, 3 max, 4 min; -1 unknown. */
static int reduction_code(FzStringRef s) {
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; ++i)
    if (fzStringRefEqual(s, fzStringRefFromCString(names[i])))
      return i;
  return -1;
}

static int scatter_reduction(const FzOp *op) {
  FzAttr *a = fzOpGetInherentAttr((FzOp *)op, FZ_STR("reduction"));
  if (!a)
    return 0;
  return fzAttrGetKind(a) == FZ_ATTR_STRING
             ? reduction_code(fzStringAttrGetValue(a))
             : -1;
}

static bool shape_scatter_nd(FzGraphDiag *d, size_t n, FzType *const *in,
                             const FzGraphAttrs *a, FzType **out) {
  char buf[128], want[128];
  if (!fzGraphCheckCount(d, n, 3, 3))
    return false;
  for (size_t i = 0; i < 3; ++i)
    if (!fzGraphCheckRanked(d, in, i))
      return false;
  if (!fzGraphCheckSameElement(d, in, 0, 2))
    return false;
  FzType *ie = fzShapedTypeGetElementType(in[1]);
  if (!fzTypeIsInteger(ie) || fzTypeGetBitWidth(ie) < 8)
    return fzGraphError(d, "operand #1 (the indices) must be a tensor of "
                           "integers, but got '%s'",
                        fzGraphTypeStr(in[1], buf, sizeof buf));
  size_t r = fzShapedTypeGetRank(in[0]), q = fzShapedTypeGetRank(in[1]);
  if (r == 0)
    return fzGraphError(d, "operand #0 (the data) must have rank 1 or more");
  if (q == 0)
    return fzGraphError(d, "operand #1 (the indices) must have rank 1 or "
                           "more");
  int64_t k = fzShapedTypeGetDim(in[1], q - 1);
  if (k == FZ_DYNAMIC || k < 1 || (size_t)k > r)
    return fzGraphError(d, "the last dimension of operand #1 (the index "
                           "length, %s) must be static and in [1, %zu]",
                        fzGraphShapeStr(1, &k, buf, sizeof buf), r);
  /* updates: indices.shape[:-1] + data.shape[k:]. */
  size_t ur = q - 1 + r - (size_t)k;
  if (ur > FZ_GRAPH_MAX_RANK)
    return fzGraphError(d, "the updates' rank %zu is above the maximum (%d)",
                        ur, FZ_GRAPH_MAX_RANK);
  int64_t shape[FZ_GRAPH_MAX_RANK];
  for (size_t i = 0; i + 1 < q; ++i)
    shape[i] = fzShapedTypeGetDim(in[1], i);
  for (size_t i = (size_t)k; i < r; ++i)
    shape[q - 1 + i - (size_t)k] = fzShapedTypeGetDim(in[0], i);
  bool match = fzShapedTypeGetRank(in[2]) == ur;
  for (size_t i = 0; match && i < ur; ++i) {
    int64_t u = fzShapedTypeGetDim(in[2], i);
    match = u == FZ_DYNAMIC || shape[i] == FZ_DYNAMIC || u == shape[i];
  }
  if (!match)
    return fzGraphError(d, "operand #2 (the updates) has shape %s, but "
                           "indices and data give %s",
                        fzGraphShapeStr(fzShapedTypeGetRank(in[2]),
                                        fzShapedTypeGetShape(in[2]), buf,
                                        sizeof buf),
                        fzGraphShapeStr(ur, shape, want, sizeof want));
  FzStringRef red = FZ_STR("none");
  if (!fzGraphGetString(d, a, "reduction", "none", &red))
    return false;
  int code = reduction_code(red);
  if (code < 0)
    return fzGraphError(d, "attribute 'reduction' must be one of none, add, "
                           "mul, max, min, but got '%.*s'",
                        (int)red.length, red.data);
  FzType *elt = fzShapedTypeGetElementType(in[0]);
  if (code != 0 && fzTypeIsInteger(elt) && fzTypeGetBitWidth(elt) == 1)
    return fzGraphError(d, "reduction '%.*s' on booleans (i1 takes 'none' "
                           "only)", (int)red.length, red.data);
  out[0] = in[0];
  return true;
}
FZ_GRAPH_INFER_HOOK(shape_scatter_nd)

/*===--- The kernel ------------------------------------------------------===*/

static bool kernel_scatter_nd(FzGraphInterp *in, FzOp *op,
                              FzTensor *const *ops, FzTensor **res) {
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  const FzTensor *x = ops[0], *ix = ops[1], *up = ops[2];
  FzTensor *y = res[0];
  size_t esz = fzTypeGetStorageSize(y->dtype);
  memcpy(y->data, x->data, (size_t)x->numElements * esz);
  int code = scatter_reduction(op);
  size_t k = (size_t)ix->shape[ix->rank - 1];
  int64_t slice = 1, strides[FZ_GRAPH_MAX_RANK];
  for (size_t i = k; i < x->rank; ++i)
    slice *= x->shape[i];
  fzGraphStrides(x->rank, x->shape, strides);
  int64_t nUpd = k ? ix->numElements / (int64_t)k : 0;
  bool isFloat = fzTypeIsFloat(y->dtype);
  for (int64_t u = 0; u < nUpd; ++u) {
    int64_t base = 0;
    for (size_t j = 0; j < k; ++j) {
      int64_t dim = x->shape[j], c = fzTensorGetI64(ix, u * (int64_t)k + (int64_t)j);
      if (c < -dim || c >= dim)
        return fzGraphInterpError(in, op,
                                  "index %lld (entry %zu of index tuple "
                                  "%lld of operand #1) is out of range "
                                  "[%lld, %lld)",
                                  (long long)c, j, (long long)u,
                                  (long long)-dim, (long long)dim);
      base += (c < 0 ? c + dim : c) * strides[j];
    }
    for (int64_t e = 0; e < slice; ++e) {
      int64_t to = base + e, from = u * slice + e;
      if (code == 0 && !isFloat) {
        fzTensorSetI64(y, to, fzTensorGetI64(up, from));
        continue;
      }
      if (isFloat) {
        double a = fzTensorGetF64(y, to), b = fzTensorGetF64(up, from);
        double v = code == 0   ? b
                   : code == 1 ? a + b
                   : code == 2 ? a * b
                   : code == 3 ? (a != a || b != b ? a + b : a > b ? a : b)
                               : (a != a || b != b ? a + b : a < b ? a : b);
        fzTensorSetF64(y, to, v);
      } else {
        /* Integers wrap, as graph.add and graph.mul do. */
        uint64_t a = (uint64_t)fzTensorGetI64(y, to),
                 b = (uint64_t)fzTensorGetI64(up, from);
        int64_t sa = (int64_t)a, sb = (int64_t)b;
        int64_t v = code == 1   ? (int64_t)(a + b)
                    : code == 2 ? (int64_t)(a * b)
                    : code == 3 ? (sa > sb ? sa : sb)
                                : (sa < sb ? sa : sb);
        fzTensorSetI64(y, to, v);
      }
    }
  }
  return true;
}

static const FzGraphKernel scatter_nd_kernel = {kernel_scatter_nd};
FZ_GRAPH_DEFINE_FOLDING_OP(scatter_nd,
                           "data with the slices at index tuples replaced "
                           "or combined by updates (ONNX ScatterND)",
                           3, FZ_FUSION_OPAQUE, scatter_attrs,
                           shape_scatter_nd, 0, scatter_nd_kernel, 0)

/* transforms/graph/merge_projections.c - the merge-projections pass: the
 * query, key and value projections of an attention that read the same
 * input become one matmul with their weights side by side, each
 * projection a slice of its result, as TensorRT, ONNX Runtime's
 * attention fusion and FlashAttention's packed QKV do:
 *
 *   q = matmul(x, Wq)  k = matmul(x, Wk)  v = matmul(x, Wv)
 *     ->  qkv = matmul(x, [Wq | Wk | Wv]);  q = slice(qkv, 0:Nq) ...
 *
 * The root is a graph.attention (recognize-attention made it). Each of
 * its query, key and value operands is followed back through the ops
 * its prologue absorbs (transpose, reshape, slice, and an add or
 * multiply of a constant: the bias) to a graph.matmul; each op on the
 * way and the matmul itself must have no other use, so the slices it
 * makes are read only by the attention's kernel (the fusion pass puts
 * slices in its prologue) and no kernel is added anywhere. Matmuls that
 * share their input operand, with constant rank-2 weights of one element
 * type and the same transpose flags, merge; the weights are joined at
 * compile time (along N: columns of [K, N], rows of [N, K] under
 * transpose_b). Exact: each output element is the same dot product.
 *
 * Memory: the joined weight is a host tensor freed before the pattern
 * returns; everything else is IR of the function.
 */
#include <string.h>

#include "fz/tensor.h"
#include "transforms/graph/graph_opt.h"

enum { STAT_MERGED, NUM_STATS };

/* The largest joined weight, in elements (a guard against hostile
 * sizes; BERT-large's QKV is 1024 x 3072 = 3.1M). */
#define MAX_JOINED ((int64_t)1 << 28)

static bool bool_attr(const FzOp *op, const char *name) {
  FzAttr *a = fzOpGetInherentAttr((FzOp *)op, fzStringRefFromCString(name));
  return a && fzAttrGetKind(a) == FZ_ATTR_BOOL && fzBoolAttrGetValue(a);
}

static FzValue *result(FzOp *op) { return fzOpGetResult(op, 0); }

/* The matmul that operand v of the attention comes from through the
 * ops its prologue absorbs, each with no other use; NULL if none. */
static FzOp *source_matmul(FzValue *v) {
  for (int depth = 0; depth < 8 && v && fzValueHasOneUse(v); ++depth) {
    FzOp *def = fzValueGetDefiningOp(v);
    if (!def || fzOpGetNumResults(def) != 1)
      return NULL;
    if (fzGraphOptIsOp(def, "graph.matmul"))
      return def;
    if (fzGraphOptIsOp(def, "graph.transpose") ||
        fzGraphOptIsOp(def, "graph.reshape") ||
        fzGraphOptIsOp(def, "graph.slice")) {
      v = fzOpGetOperand(def, 0);
    } else if ((fzGraphOptIsOp(def, "graph.add") ||
                fzGraphOptIsOp(def, "graph.mul")) &&
               fzOpGetNumOperands(def) == 2) {
      FzValue *a = fzOpGetOperand(def, 0), *b = fzOpGetOperand(def, 1);
      if (fzGraphOptDense(b))
        v = a;
      else if (fzGraphOptDense(a))
        v = b;
      else
        return NULL;
    } else {
      return NULL;
    }
  }
  return NULL;
}

/* Whether mm can join a merge with `first`: same input, constant rank-2
 * weights of the same element type and K, same flags, a static result
 * (so that each slice of the merged matmul has exactly mm's type, checked
 * before anything is built). */
static bool joinable(FzOp *first, FzOp *mm) {
  FzValue *w = fzOpGetOperand(mm, 1);
  FzType *wt = fzValueGetType(w);
  if (fzOpGetNumOperands(mm) != 2 || !fzGraphOptDense(w) ||
      fzTypeGetKind(wt) != FZ_TYPE_TENSOR || fzShapedTypeGetRank(wt) != 2 ||
      !fzShapedTypeHasStaticShape(wt) || bool_attr(mm, "transpose_a") ||
      fzGraphOptRank(fzOpGetOperand(mm, 0)) < 2 ||
      !fzShapedTypeHasStaticShape(fzValueGetType(result(mm))))
    return false;
  bool tb = bool_attr(mm, "transpose_b");
  if (mm == first)
    return true;
  FzType *ft = fzValueGetType(fzOpGetOperand(first, 1));
  return fzOpGetOperand(mm, 0) == fzOpGetOperand(first, 0) &&
         tb == bool_attr(first, "transpose_b") &&
         fzShapedTypeGetElementType(wt) == fzShapedTypeGetElementType(ft) &&
         fzShapedTypeGetDim(wt, tb ? 1 : 0) ==
             fzShapedTypeGetDim(ft, tb ? 1 : 0);
}

/* The weights of mms[0..n) joined along N into one host tensor (caller
 * destroys); NULL after an error. */
static FzTensor *join_weights(FzContext *ctx, FzOp *const *mms, size_t n,
                              bool tb, int64_t k, int64_t total) {
  FzType *elt = fzShapedTypeGetElementType(fzValueGetType(
      fzOpGetOperand(mms[0], 1)));
  int64_t shape[2] = {tb ? total : k, tb ? k : total};
  FzTensor *out = fzTensorCreate(ctx, elt, 2, shape);
  if (!out)
    return NULL;
  size_t es = fzTypeGetStorageSize(elt);
  int64_t off = 0;
  for (size_t i = 0; i < n; ++i) {
    FzTensor *w = fzGraphOptTensor(fzOpGetOperand(mms[i], 1));
    if (!w || w->rank != 2) {
      fzTensorDestroy(w);
      fzTensorDestroy(out);
      return NULL;
    }
    int64_t ni = w->shape[tb ? 0 : 1];
    char *dst = out->data;
    const char *src = w->data;
    if (tb) { /* [N, K]: rows follow one another */
      memcpy(dst + (size_t)(off * k) * es, src, (size_t)(ni * k) * es);
    } else { /* [K, N]: each row of the joined weight takes ni columns */
      for (int64_t r = 0; r < k; ++r)
        memcpy(dst + (size_t)(r * total + off) * es,
               src + (size_t)(r * ni) * es, (size_t)ni * es);
    }
    off += ni;
    fzTensorDestroy(w);
  }
  return out;
}

/* Replaces mms[0..n) (one input, joinable) by one matmul and slices. */
static bool merge(FzRewriter *rw, FzOp *const *mms, size_t n) {
  FzContext *ctx = fzRewriterGetContext(rw);
  bool tb = bool_attr(mms[0], "transpose_b");
  FzType *w0 = fzValueGetType(fzOpGetOperand(mms[0], 1));
  int64_t k = fzShapedTypeGetDim(w0, tb ? 1 : 0), total = 0, ns[3];
  for (size_t i = 0; i < n; ++i) {
    ns[i] = fzShapedTypeGetDim(fzValueGetType(fzOpGetOperand(mms[i], 1)),
                               tb ? 0 : 1);
    if (ns[i] <= 0 || ns[i] > MAX_JOINED - total || k <= 0 ||
        k > MAX_JOINED / (total + ns[i]))
      return false;
    total += ns[i];
  }
  /* The new ops go before the first of the matmuls: their input is
   * defined above all of them. */
  FzOp *first = mms[0];
  for (size_t i = 1; i < n; ++i)
    if (fzOpIsBeforeInBlock(mms[i], first))
      first = mms[i];
  FzTensor *joined = join_weights(ctx, mms, n, tb, k, total);
  if (!joined)
    return false;
  FzLoc *loc = fzGraphOptFusedLoc(mms, n);
  fzRewriterSetInsertionPointBefore(rw, first);
  FzValue *w = fzGraphOptConstant(rw, joined, loc);
  fzTensorDestroy(joined);
  if (!w)
    return false;
  FzValue *ops[2] = {fzOpGetOperand(first, 0), w};
  FzGraphOptProp props[1] = {{"transpose_b", fzBoolAttrGet(ctx, true)}};
  FzValue *mm = fzGraphOptCreate(rw, "graph.matmul", loc, 2, ops, NULL,
                                 tb ? 1 : 0, props);
  if (!mm)
    return false;
  FzType *mt = fzValueGetType(mm);
  size_t rank = fzShapedTypeGetRank(mt);
  if (rank < 2 || rank > FZ_TENSOR_MAX_RANK)
    return false;
  int64_t starts[FZ_TENSOR_MAX_RANK], limits[FZ_TENSOR_MAX_RANK],
      strides[FZ_TENSOR_MAX_RANK];
  FzValue *slices[3];
  int64_t off = 0;
  FzType *i64 = fzIntegerTypeGet(ctx, 64);
  for (size_t i = 0; i < n; ++i) {
    for (size_t d = 0; d < rank; ++d) {
      starts[d] = 0;
      limits[d] = fzShapedTypeGetDim(mt, d);
      strides[d] = 1;
    }
    starts[rank - 1] = off;
    limits[rank - 1] = off + ns[i];
    off += ns[i];
    FzGraphOptProp sp[3] = {
        {"starts", fzDenseArrayAttrGet(ctx, i64, rank, starts)},
        {"limits", fzDenseArrayAttrGet(ctx, i64, rank, limits)},
        {"strides", fzDenseArrayAttrGet(ctx, i64, rank, strides)}};
    if (!sp[0].value || !sp[1].value || !sp[2].value)
      return false;
    FzType *want = fzValueGetType(result(mms[i]));
    slices[i] = fzGraphOptCreate(rw, "graph.slice", fzOpGetLoc(mms[i]), 1,
                                 &mm, NULL, 3, sp);
    /* Static shapes (joinable): the slice has the matmul's own type. */
    if (!slices[i] || fzValueGetType(slices[i]) != want)
      return false;
  }
  for (size_t i = 0; i < n; ++i)
    fzRewriterReplaceOp(rw, mms[i], &slices[i]);
  return true;
}

static bool merge_attention_projections(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  if (fzOpGetNumOperands(op) < 3)
    return false;
  FzOp *mm[3];
  for (size_t i = 0; i < 3; ++i)
    mm[i] = source_matmul(fzOpGetOperand(op, i));
  /* The largest set of distinct joinable matmuls that share an input:
   * all three (self-attention), or two (a cross-attention's key and
   * value). */
  for (size_t a = 0; a < 2; ++a) {
    if (!mm[a])
      continue;
    FzOp *set[3];
    size_t n = 0;
    if (!joinable(mm[a], mm[a]))
      continue;
    set[n++] = mm[a];
    for (size_t b = a + 1; b < 3; ++b) {
      bool dup = false;
      for (size_t j = 0; j < n; ++j)
        dup = dup || set[j] == mm[b];
      if (mm[b] && !dup && joinable(mm[a], mm[b]))
        set[n++] = mm[b];
    }
    if (n >= 2)
      return merge(rw, set, n);
  }
  return false;
}

static const FzGraphOptRow kRows[] = {
    {"graph.attention", merge_attention_projections,
     "merge-attention-projections", 1, -1, STAT_MERGED},
};

static const FzGraphOptTable kTable = {kRows, sizeof kRows / sizeof kRows[0],
                                       NULL, 0, NULL, 0};

static const FzPassStatisticDef kStats[NUM_STATS] = {
    {"num-merged", "Attentions whose projections became one matmul"},
};

const FzPassDef fzMergeProjectionsPass = {
    .argument = "merge-projections",
    .displayName = "MergeProjections",
    .summary = "Join the query, key and value projections of an attention "
               "that read one input into one matmul with their weights "
               "side by side",
    .anchor = NULL,
    .statistics = kStats,
    .numStatistics = NUM_STATS,
    .initialize = fzGraphOptPassInitialize,
    .run = fzGraphOptPassRun,
    .destroy = fzGraphOptPassDestroy,
    .userData = (void *)&kTable,
};

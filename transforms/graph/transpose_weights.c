/* transforms/graph/transpose_weights.c - the transpose-weights pass: a
 * small-M matmul whose constant weight is stored [N, K] and read
 * transposed (`transpose_b`, how every nn.Linear exports: Gemm transB=1)
 * gets that weight transposed once at compile time, [K, N], and reads it
 * plainly:
 *
 *   matmul(x, W) {transpose_b}, x [.., M, K] with M <= max-m, W a
 *   constant [N, K] with no other use
 *     ->  matmul(x, W^T), W^T a constant [K, N]
 *
 * Why (the CPU, issue 29; docs/codegen.md "Small-M contractions"): with
 * W [N, K] tile-contractions' small-M mapping is the dot form (vector
 * accumulators along K, lane sums), which for M = 2..16 rows consumes
 * the weight slower than memory delivers it (0.58-0.66 of the copy rate
 * at M = 8 on the 2-core machine, 2026-11-28), while the stream form
 * that W [K, N] gets runs at 0.76-0.84; at M = 1 the two are even, so M
 * = 1 keeps its layout (and its compile time). The GPU pipeline does not
 * run it: its small-M kernels prefer the weight contiguous along K.
 *
 * Exact (a renumbering of constants). Memory: the transposed weight is a
 * host tensor freed before the pattern returns.
 */
#include <string.h>

#include "fz/tensor.h"
#include "transforms/graph/graph_opt.h"

enum { STAT_TRANSPOSED, NUM_STATS };

/* The largest weight transposed, in elements (a guard against hostile
 * sizes; VGG-16's first classifier layer is 25088 x 4096 = 103M). */
#define MAX_WEIGHT ((int64_t)1 << 28)

static bool bool_attr(const FzOp *op, const char *name) {
  FzAttr *a = fzOpGetInherentAttr((FzOp *)op, fzStringRefFromCString(name));
  return a && fzAttrGetKind(a) == FZ_ATTR_BOOL && fzBoolAttrGetValue(a);
}

static bool is_float(const FzType *t) {
  switch (t ? fzTypeGetKind(t) : FZ_TYPE_NONE) {
  case FZ_TYPE_F16:
  case FZ_TYPE_BF16:
  case FZ_TYPE_F32:
  case FZ_TYPE_F64:
    return true;
  default:
    return false;
  }
}

static bool transpose_weight(FzOp *mm, FzRewriter *rw, void *ud) {
  if (fzOpGetNumOperands(mm) != 2 || fzOpGetNumResults(mm) != 1 ||
      !bool_attr(mm, "transpose_b") || bool_attr(mm, "transpose_a"))
    return false;
  FzValue *x = fzOpGetOperand(mm, 0), *w = fzOpGetOperand(mm, 1);
  FzType *xt = fzValueGetType(x), *wt = fzValueGetType(w);
  if (!fzGraphOptDense(w) || !fzValueHasOneUse(w) || fzGraphOptRank(w) != 2 ||
      fzGraphOptRank(x) < 1 || !is_float(fzGraphOptElementType(w)))
    return false;
  int64_t M = 1, N = fzShapedTypeGetDim(wt, 0), K = fzShapedTypeGetDim(wt, 1);
  size_t rx = fzShapedTypeGetRank(xt);
  for (size_t i = 0; i + 1 < rx; ++i) {
    int64_t d = fzShapedTypeGetDim(xt, i);
    if (d == FZ_DYNAMIC || d < 0)
      return false;
    M *= d;
    if (M > 1 << 20)
      return false;
  }
  int64_t maxM = fzGraphOptGetOptions(ud)->maxM;
  if (M < 2 || M > maxM || N < 1 || K < 1 || N == FZ_DYNAMIC ||
      K == FZ_DYNAMIC || N > MAX_WEIGHT / K)
    return false;
  FzTensor *t = fzGraphOptTensor(w);
  if (!t)
    return false;
  int64_t shape[2] = {K, N};
  FzTensor *tt = fzTensorCreate(fzRewriterGetContext(rw), t->dtype, 2, shape);
  if (!tt) {
    fzTensorDestroy(t);
    return false;
  }
  size_t es = fzTensorGetNumBytes(t) / (size_t)(N * K);
  const char *src = t->data;
  char *dst = tt->data;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      memcpy(dst + ((size_t)k * (size_t)N + (size_t)n) * es,
             src + ((size_t)n * (size_t)K + (size_t)k) * es, es);
  FzValue *c = fzGraphOptConstant(rw, tt, fzOpGetLoc(fzValueGetDefiningOp(w)));
  fzTensorDestroy(tt);
  fzTensorDestroy(t);
  if (!c)
    return false;
  FzValue *ops[2] = {x, c};
  FzValue *r = fzGraphOptCreate(rw, "graph.matmul", fzOpGetLoc(mm), 2, ops,
                                fzValueGetType(fzOpGetResult(mm, 0)), 0, NULL);
  if (!r)
    return false;
  fzRewriterReplaceOp(rw, mm, &r);
  return true;
}

static const FzGraphOptRow kRows[] = {
    {"graph.matmul", transpose_weight, "transpose-weight", 1, -1,
     STAT_TRANSPOSED},
};

static const FzGraphOptTable kTable = {kRows, 1, NULL, 0, NULL, 0};

static const FzPassOptionDef kOptions[] = {
    {"max-m", FZ_PASS_OPTION_INT, "16",
     "The most rows (the product of x's dims but the last) a matmul may have "
     "for its weight to be transposed (at least 2 rows always)",
     NULL, 2, 1 << 20},
};

static const FzPassStatisticDef kStats[NUM_STATS] = {
    {"num-transposed", "constant [N, K] weights of small-M matmuls stored "
                       "[K, N]"},
};

const FzPassDef fzTransposeWeightsPass = {
    .argument = "transpose-weights",
    .displayName = "TransposeWeights",
    .summary = "Store the constant transpose_b weight of a small-M matmul "
               "transposed, [K, N] (the CPU's stream form)",
    .anchor = NULL,
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = NUM_STATS,
    .initialize = fzGraphOptPassInitialize,
    .run = fzGraphOptPassRun,
    .destroy = fzGraphOptPassDestroy,
    .userData = (void *)&kTable,
};

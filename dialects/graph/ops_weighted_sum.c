/* dialects/graph/ops_weighted_sum.c - graph.weighted_sum: c0 * x0 + c1 * x1
 * + ... in one op (the inference engines' "Eltwise Sum with coeffs"), its
 * shape function, verifier, interpreter kernel, fold and canonicalization
 * patterns.
 *
 *   %y = graph.weighted_sum %a, %b {coeffs = array<f64: 0.5, -2.0>}
 *          : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
 *
 * Operands: one or more ranked float tensors of one element type that
 * broadcast together as graph.add's do (numpy rules). `coeffs` (required)
 * is a dense f64 array with one finite coefficient per operand. The
 * interpreter sums in f64 in operand order and rounds once, as every
 * graph op does; lowered code computes in the element's compute type.
 *
 * Canonicalization (the fold first):
 *   fold        weighted_sum(x) {1.0} -> x (when x has the result type);
 *               constant operands are evaluated
 *   ws-flatten  an operand that is itself a weighted_sum used only here
 *               is spliced in, its coefficients scaled
 *   ws-dedupe   an operand given twice becomes one with the coefficients
 *               added
 *   ws-binary   weighted_sum(a, b) {1, 1} -> add(a, b); {1, -1} and
 *               {-1, 1} -> sub: the primitive op is the canonical form
 */
#include <math.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"
#include "fz/pass.h"

#define WS_MAX_OPERANDS 256

static const char *const ws_attrs[] = {"coeffs", NULL};

/* The coeffs attribute of op as a dense f64 array, or NULL. */
static FzAttr *coeffs_of(const FzOp *op) {
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  FzAttr *c = fzGraphAttrsLookup(&a, "coeffs");
  if (!c || fzAttrGetKind(c) != FZ_ATTR_DENSE_ARRAY ||
      fzDenseArrayAttrGetElementType(c) != fzF64TypeGet(fzOpGetContext(op)))
    return NULL;
  return c;
}

static bool shape_weighted_sum(FzGraphDiag *d, size_t n, FzType *const *in,
                               const FzGraphAttrs *a, FzType **out) {
  if (!fzGraphCheckCount(d, n, 1, WS_MAX_OPERANDS))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!fzGraphCheckRanked(d, in, i) ||
        (i && !fzGraphCheckSameElement(d, in, 0, i)))
      return false;
  FzAttr *c = fzGraphAttrsLookup(a, "coeffs");
  if (!c)
    return fzGraphError(d, "requires attribute 'coeffs' (array<f64: ...> "
                           "with one coefficient per operand)");
  if (fzAttrGetKind(c) != FZ_ATTR_DENSE_ARRAY ||
      fzDenseArrayAttrGetElementType(c) != fzF64TypeGet(d->ctx))
    return fzGraphError(d, "attribute 'coeffs' must be a dense f64 array "
                           "(array<f64: ...>)");
  size_t nc = fzDenseArrayAttrGetSize(c);
  if (nc != n)
    return fzGraphError(d,
                        "attribute 'coeffs' has %zu coefficient%s for %zu "
                        "operand%s",
                        nc, nc == 1 ? "" : "s", n, n == 1 ? "" : "s");
  for (size_t i = 0; i < nc; ++i)
    if (!isfinite(fzDenseArrayAttrGetFloat(c, i)))
      return fzGraphError(d, "attribute 'coeffs' entry %zu is not finite", i);
  size_t idx[WS_MAX_OPERANDS];
  for (size_t i = 0; i < n; ++i)
    idx[i] = i;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  size_t rank;
  if (!fzGraphBroadcast(d, in, n, idx, shape, &rank))
    return false;
  out[0] = fzGraphTensorType(d, rank, shape, fzShapedTypeGetElementType(in[0]));
  return out[0] != NULL;
}
FZ_GRAPH_INFER_HOOK(shape_weighted_sum)

/*===--- The kernel ----------------------------------------------------===*/

static bool kernel_fn(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                      FzTensor **res) {
  FzAttr *c = coeffs_of(op);
  size_t n = fzOpGetNumOperands(op);
  if (!c || fzDenseArrayAttrGetSize(c) != n)
    return fzGraphInterpError(in, op, "malformed 'coeffs' attribute");
  if (!fzGraphInterpInferResults(in, op, ops, res))
    return false;
  FzTensor *y = res[0];
  int64_t count = y->numElements;
  double *acc = fzCalloc(in->ctx, (size_t)(count ? count : 1), sizeof *acc);
  bool ok = acc != NULL;
  for (size_t k = 0; ok && k < n; ++k) {
    double *x = fzGraphLoadF64(ops[k]), ck = fzDenseArrayAttrGetFloat(c, k);
    ok = x != NULL;
    FzGraphBcastIter it;
    fzGraphBcastInit(&it, y, 1, (const FzTensor *const *)&ops[k]);
    for (int64_t i = 0; ok && i < count; ++i, fzGraphBcastNext(&it))
      acc[i] += ck * x[it.off[0]];
    fzFree(in->ctx, x);
  }
  if (ok)
    fzGraphStoreF64(y, acc);
  fzFree(in->ctx, acc);
  return ok;
}
static const FzGraphKernel kernel_weighted_sum = {kernel_fn};

/*===--- Fold -----------------------------------------------------------===*/

static bool fold_weighted_sum(FzOp *op, FzAttr *const *cst,
                              FzFoldResult *res) {
  FzAttr *c = coeffs_of(op);
  FzValue *x = fzOpGetOperand(op, 0);
  if (c && fzOpGetNumOperands(op) == 1 &&
      fzDenseArrayAttrGetFloat(c, 0) == 1.0 &&
      fzValueGetType(x) == fzValueGetType(fzOpGetResult(op, 0))) {
    res[0].value = x;
    res[0].attr = NULL;
    return true;
  }
  /* Constant operands: evaluated by the shared elementwise folder, which
   * knows no identity of this op. */
  return fzGraphFoldElementwise(op, cst, res);
}

/*===--- Canonicalization patterns --------------------------------------===*/

static bool is_weighted_sum(const FzOp *op) {
  const FzOpDef *def = op ? fzOpGetDef(op) : NULL;
  return def && strcmp(def->name, "graph.weighted_sum") == 0;
}

/* Replaces op by weighted_sum(ops) {coeffs} when that infers op's result
 * type exactly (never a different broadcast). */
static bool replace_with_sum(FzRewriter *rw, FzOp *op, size_t n,
                             FzValue *const *ops, const double *coeffs) {
  FzContext *ctx = fzOpGetContext(op);
  FzType *rt = fzValueGetType(fzOpGetResult(op, 0));
  FzType *types[WS_MAX_OPERANDS], *out[4] = {NULL, NULL, NULL, NULL};
  if (n == 0 || n > WS_MAX_OPERANDS)
    return false;
  for (size_t i = 0; i < n; ++i)
    types[i] = fzValueGetType(ops[i]);
  FzAttr *ca = fzDenseArrayAttrGet(ctx, fzF64TypeGet(ctx), n, coeffs);
  if (!ca)
    return false;
  FzNamedAttr entry = {fzIdentGet(ctx, FZ_STR("coeffs")), ca};
  FzAttr *dict = entry.name ? fzDictAttrGet(ctx, 1, &entry, NULL) : NULL;
  FzGraphDiag d = {ctx, fzOpGetLoc(op), NULL, true};
  FzGraphAttrs a = {dict, NULL};
  if (!dict || !shape_weighted_sum(&d, n, types, &a, out) || out[0] != rt)
    return false;
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("graph.weighted_sum"), fzOpGetLoc(op));
  fzOpStateAddOperands(&st, n, ops);
  fzOpStateAddResults(&st, 1, &rt);
  fzOpStateAddProp(&st, FZ_STR("coeffs"), ca);
  FzOp *nw = fzRewriterCreateOp(rw, &st);
  if (!nw)
    return false;
  fzRewriterReplaceOpWithOp(rw, op, nw);
  return true;
}

static bool ws_flatten(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzAttr *c = coeffs_of(op);
  size_t n = fzOpGetNumOperands(op);
  if (!c || fzDenseArrayAttrGetSize(c) != n)
    return false;
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    FzOp *inner = fzValueGetDefiningOp(v);
    FzAttr *ic = is_weighted_sum(inner) ? coeffs_of(inner) : NULL;
    size_t m = inner ? fzOpGetNumOperands(inner) : 0;
    if (!ic || fzDenseArrayAttrGetSize(ic) != m || !fzValueHasOneUse(v) ||
        n - 1 + m > WS_MAX_OPERANDS)
      continue;
    FzValue *ops[WS_MAX_OPERANDS];
    double cs[WS_MAX_OPERANDS];
    size_t k = 0;
    for (size_t j = 0; j < n; ++j) {
      if (j != i) {
        ops[k] = fzOpGetOperand(op, j);
        cs[k++] = fzDenseArrayAttrGetFloat(c, j);
        continue;
      }
      for (size_t t = 0; t < m; ++t) {
        ops[k] = fzOpGetOperand(inner, t);
        cs[k++] = fzDenseArrayAttrGetFloat(c, i) *
                  fzDenseArrayAttrGetFloat(ic, t);
      }
    }
    if (replace_with_sum(rw, op, k, ops, cs))
      return true;
  }
  return false;
}

static bool ws_dedupe(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzAttr *c = coeffs_of(op);
  size_t n = fzOpGetNumOperands(op);
  if (!c || fzDenseArrayAttrGetSize(c) != n || n > WS_MAX_OPERANDS)
    return false;
  FzValue *ops[WS_MAX_OPERANDS];
  double cs[WS_MAX_OPERANDS];
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    size_t j = 0;
    while (j < k && ops[j] != v)
      j++;
    if (j == k) {
      ops[k] = v;
      cs[k++] = 0;
    }
    cs[j] += fzDenseArrayAttrGetFloat(c, i);
  }
  return k < n && replace_with_sum(rw, op, k, ops, cs);
}

static bool ws_binary(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzAttr *c = coeffs_of(op);
  if (!c || fzOpGetNumOperands(op) != 2 || fzDenseArrayAttrGetSize(c) != 2)
    return false;
  double c0 = fzDenseArrayAttrGetFloat(c, 0), c1 = fzDenseArrayAttrGetFloat(c, 1);
  FzValue *ops[2] = {fzOpGetOperand(op, 0), fzOpGetOperand(op, 1)};
  const char *name;
  if (c0 == 1.0 && c1 == 1.0) {
    name = "graph.add";
  } else if (c0 == 1.0 && c1 == -1.0) {
    name = "graph.sub";
  } else if (c0 == -1.0 && c1 == 1.0) {
    name = "graph.sub";
    ops[0] = fzOpGetOperand(op, 1);
    ops[1] = fzOpGetOperand(op, 0);
  } else {
    return false;
  }
  FzContext *ctx = fzOpGetContext(op);
  FzType *rt = fzValueGetType(fzOpGetResult(op, 0));
  FzOpState st;
  fzOpStateInit(&st, ctx, fzStringRefFromCString(name), fzOpGetLoc(op));
  fzOpStateAddOperands(&st, 2, ops);
  fzOpStateAddResults(&st, 1, &rt);
  FzOp *nw = fzRewriterCreateOp(rw, &st);
  if (!nw)
    return false;
  fzRewriterReplaceOpWithOp(rw, op, nw);
  return true;
}

static void weighted_sum_patterns(FzPatternSet *set, FzContext *ctx) {
  (void)ctx;
  static const FzPattern rows[] = {
      {"graph.weighted_sum", 2, ws_flatten, NULL, "ws-flatten"},
      {"graph.weighted_sum", 1, ws_dedupe, NULL, "ws-dedupe"},
      {"graph.weighted_sum", 1, ws_binary, NULL, "ws-binary"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i)
    (void)fzPatternSetAdd(set, &rows[i]);
}

/*===--- Definition -----------------------------------------------------===*/

static const FzGraphOpInfo weighted_sum_info = {
    shape_weighted_sum, NULL, G_FLOAT_ONLY, NULL, NULL, NULL, NULL, NULL, 0};

const FzOpDef fzGraphOp_weighted_sum = {
    .name = "graph.weighted_sum",
    .summary = "sum of coeffs[i] * operand i, broadcasting as graph.add",
    .traits = FZ_TRAIT_PURE | FZ_TRAIT_ELEMENTWISE,
    .numOperands = FZ_VARIADIC,
    .numResults = 1,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_BROADCAST,
    .inherentAttrs = ws_attrs,
    .verify = fzGraphVerify,
    .fold = fold_weighted_sum,
    .inferResultTypes = shape_weighted_sum_hook,
    .print = fzGraphPrint,
    .parse = fzGraphParse,
    .getCanonicalizationPatterns = weighted_sum_patterns,
    .interpret = &kernel_weighted_sum,
    .extra = &weighted_sum_info,
};

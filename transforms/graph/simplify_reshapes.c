/* transforms/graph/simplify_reshapes.c - the simplify-reshapes pass.
 * ONNX's Reshape, Flatten, Squeeze and Unsqueeze all import as
 * graph.reshape, so one op covers every "view" the importer produces.
 *
 *   identity-reshape        reshape(x) to x's own type -> x
 *   collapse-reshapes       reshape(reshape(x)) -> reshape(x) (or x)
 *   reshape-constant        reshape(constant) -> the constant retyped (the
 *                           same row-major data, any size)
 *   reshape-into-reduce     reshape(reduce(x, keepdims = true)) that only
 *                           drops the kept unit dims -> reduce(x,
 *                           keepdims = false)
 *   sink-elementwise        reshape(f(reshape(a), reshape(b), ...)) back to
 *                           the shape a and b have -> f(a, b, ...), for an
 *                           elementwise f (no broadcasting) used once;
 *                           splat constants among f's operands are
 *                           re-created in the new shape
 *
 * All rewrites are exact: they move no arithmetic.
 */
#include <string.h>

#include "transforms/graph/graph_opt.h"

enum { STAT_REMOVED, STAT_CONSTANTS, STAT_REDUCES, STAT_SUNK, NUM_STATS };

static FzValue *result(FzOp *op) {
  return fzOpGetResult(op, 0);
}

static bool identity_reshape(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzValue *x = fzOpGetOperand(op, 0);
  if (fzValueGetType(x) != fzValueGetType(result(op)))
    return false;
  fzRewriterReplaceOp(rw, op, &x);
  return true;
}

/* A reshape resolves at most one dynamic dim; the result must say which. */
static size_t num_dynamic(const FzType *t) {
  size_t n = 0;
  for (size_t i = 0; i < fzShapedTypeGetRank(t); ++i)
    n += fzShapedTypeGetDim(t, i) == FZ_DYNAMIC;
  return n;
}

static bool collapse_reshapes(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *inner = fzGraphOptProducer(fzOpGetOperand(op, 0), "graph.reshape");
  if (!inner)
    return false;
  FzValue *x = fzOpGetOperand(inner, 0);
  FzType *rt = fzValueGetType(result(op));
  if (fzValueGetType(x) == rt) {
    fzRewriterReplaceOp(rw, op, &x);
    return true;
  }
  /* reshape(x) alone must be able to resolve the result's dims. */
  if (num_dynamic(rt) > 1)
    return false;
  fzRewriterSetOperand(rw, op, 0, x);
  return true;
}

static bool reshape_constant(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzAttr *c = fzGraphOptDense(fzOpGetOperand(op, 0));
  FzType *rt = fzValueGetType(result(op));
  if (!c || !fzShapedTypeHasStaticShape(rt) ||
      fzShapedTypeGetNumElements(rt) !=
          fzShapedTypeGetNumElements(fzAttrGetType(c)))
    return false;
  FzAttr *a = fzDenseAttrGet(fzOpGetContext(op), rt, fzDenseAttrGetData(c),
                             fzDenseAttrGetNumBytes(c));
  FzValue *v = a ? fzRewriterMaterializeConstant(rw, fzGraphDialectGet(), a, rt,
                                                 fzOpGetLoc(op))
                 : NULL;
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

static bool reshape_into_reduce(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *red = fzValueGetDefiningOp(fzOpGetOperand(op, 0));
  const FzOpDef *def = red ? fzOpGetDef(red) : NULL;
  if (!def || strncmp(def->name, "graph.reduce_", 13) != 0 ||
      !fzGraphOptGetKeepDims(red) || !fzValueHasOneUse(result(red)))
    return false;
  FzValue *x = fzOpGetOperand(red, 0);
  size_t r = fzGraphOptRank(x), n;
  int64_t axes[FZ_GRAPH_MAX_RANK];
  if (!fzGraphOptGetAxes(red, r, axes, &n))
    return false;
  /* The reduce's type without the kept dims must be the reshape's. */
  FzType *kept = fzValueGetType(result(red)), *rt = fzValueGetType(result(op));
  size_t k = 0, j = 0;
  if (fzShapedTypeGetRank(rt) + n != r)
    return false;
  for (size_t i = 0; i < r; ++i) {
    if (k < n && axes[k] == (int64_t)i) {
      ++k;
      continue;
    }
    if (fzShapedTypeGetDim(kept, i) != fzShapedTypeGetDim(rt, j++))
      return false;
  }
  FzContext *ctx = fzOpGetContext(op);
  FzGraphOptProp props[2] = {
      {"axes", fzDenseArrayAttrGet(ctx, fzIntegerTypeGet(ctx, 64), n, axes)},
      {"keepdims", fzBoolAttrGet(ctx, false)}};
  FzOp *both[2] = {red, op};
  FzValue *v = fzGraphOptCreate(rw, def->name, fzGraphOptFusedLoc(both, 2), 1,
                                &x, rt, 2, props);
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

/* The shape of a and b agree exactly (static or not, dim by dim). */
static bool same_shape(const FzType *a, const FzType *b) {
  if (fzShapedTypeGetRank(a) != fzShapedTypeGetRank(b))
    return false;
  for (size_t i = 0; i < fzShapedTypeGetRank(a); ++i)
    if (fzShapedTypeGetDim(a, i) != fzShapedTypeGetDim(b, i))
      return false;
  return true;
}

static bool sink_elementwise(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *f = fzValueGetDefiningOp(fzOpGetOperand(op, 0));
  if (!f || !fzOpHasTrait(f, FZ_TRAIT_ELEMENTWISE) ||
      !fzOpHasTrait(f, FZ_TRAIT_PURE) || fzOpGetNumResults(f) != 1 ||
      fzOpGetNumRegions(f) != 0 || !fzValueHasOneUse(result(f)))
    return false;
  FzType *ft = fzValueGetType(result(f)), *rt = fzValueGetType(result(op));
  if (!fzShapedTypeHasStaticShape(rt) || !fzShapedTypeHasStaticShape(ft))
    return false;
  size_t n = fzOpGetNumOperands(f);
  bool anyReshape = false;
  if (n == 0 || n > 4)
    return false;
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(f, i);
    FzOp *rs = fzGraphOptProducer(v, "graph.reshape");
    if (!same_shape(fzValueGetType(v), ft))
      return false; /* f broadcasts this operand */
    if (rs && same_shape(fzValueGetType(fzOpGetOperand(rs, 0)), rt)) {
      anyReshape = true;
      continue;
    }
    FzAttr *c = fzGraphOptDense(v);
    if (!c || !fzDenseAttrIsSplat(c))
      return false;
  }
  if (!anyReshape)
    return false;
  FzContext *ctx = fzOpGetContext(op);
  FzValue *ops[4];
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(f, i);
    FzOp *rs = fzGraphOptProducer(v, "graph.reshape");
    if (rs && same_shape(fzValueGetType(fzOpGetOperand(rs, 0)), rt)) {
      ops[i] = fzOpGetOperand(rs, 0);
      continue;
    }
    FzAttr *c = fzGraphOptDense(v);
    FzType *ct =
        fzTensorTypeGet(ctx, fzShapedTypeGetRank(rt), fzShapedTypeGetShape(rt),
                        fzShapedTypeGetElementType(fzAttrGetType(c)), NULL);
    FzAttr *a = ct ? fzDenseAttrGet(ctx, ct, fzDenseAttrGetData(c),
                                    fzDenseAttrGetNumBytes(c))
                   : NULL;
    ops[i] = a ? fzRewriterMaterializeConstant(rw, fzGraphDialectGet(), a, ct,
                                               fzOpGetLoc(f))
               : NULL;
    if (!ops[i])
      return false;
  }
  /* A copy of f (attributes and properties kept) on the new operands. */
  FzIRMapping *m = fzIRMappingCreate(ctx);
  if (!m)
    return false;
  bool mapped = true;
  for (size_t i = 0; i < n && mapped; ++i)
    mapped = fzIRMappingMap(m, fzOpGetOperand(f, i), ops[i]);
  FzOp *clone = mapped ? fzOpClone(f, m) : NULL;
  fzIRMappingDestroy(m);
  if (!clone)
    return false;
  fzValueSetType(fzOpGetResult(clone, 0), rt);
  fzRewriterInsertOp(rw, clone);
  fzRewriterReplaceOpWithOp(rw, op, clone);
  return true;
}

static const FzGraphOptRow kRows[] = {
    {"graph.reshape", identity_reshape, "identity-reshape", 3, -1,
     STAT_REMOVED},
    {"graph.reshape", collapse_reshapes, "collapse-reshapes", 2, -1,
     STAT_REMOVED},
    {"graph.reshape", reshape_constant, "reshape-constant", 2, 0,
     STAT_CONSTANTS},
    {"graph.reshape", reshape_into_reduce, "reshape-into-reduce", 1, 1,
     STAT_REDUCES},
    {"graph.reshape", sink_elementwise, "sink-elementwise", 1, 2, STAT_SUNK},
};

static const char *const kGroups[] = {"fold-constants", "into-reduce",
                                      "sink-elementwise"};

static const FzGraphOptTable kTable = {kRows, sizeof kRows / sizeof kRows[0],
                                       kGroups, 3, NULL, 0};

static const FzPassOptionDef kOptions[] = {
    {"fold-constants", FZ_PASS_OPTION_BOOL, "true",
     "Retype reshaped constants (any size)", NULL, 0, 0},
    {"into-reduce", FZ_PASS_OPTION_BOOL, "true",
     "Drop the kept unit dims of a reduction instead of reshaping them away",
     NULL, 0, 0},
    {"sink-elementwise", FZ_PASS_OPTION_BOOL, "true",
     "Remove reshape pairs around elementwise ops", NULL, 0, 0},
};

static const FzPassStatisticDef kStats[NUM_STATS] = {
    {"num-removed", "Identity reshapes and reshape chains removed"},
    {"num-constants", "Reshapes of constants folded"},
    {"num-into-reduce", "Reshapes absorbed into reductions"},
    {"num-sunk", "Reshape pairs removed around elementwise ops"},
};

const FzPassDef fzSimplifyReshapesPass = {
    .argument = "simplify-reshapes",
    .displayName = "SimplifyReshapes",
    .summary = "Collapse reshape (flatten, squeeze, unsqueeze) chains and "
               "remove identity and round-trip reshapes",
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

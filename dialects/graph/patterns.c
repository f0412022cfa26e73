/* dialects/graph/patterns.c - canonicalization patterns of the graph
 * dialect (folds live in fold.c; these rewrite one op into a canonical
 * form rather than into an existing value):
 *
 *   commute-constant      add/mul/max/min/and/or/xor(c, x) -> op(x, c)
 *   compare-constant-lhs  compare lt(c, x) -> compare gt(x, c)
 *   drop-broadcast        binary(broadcast(x), y) -> binary(x, y) when the
 *                         op's own broadcasting gives the same result
 *   cast-of-exact-cast    cast(cast(x : A) : B) : C -> cast(x) : C when
 *                         A -> B is exact (a widening)
 *   select-of-not         select(not(c), a, b) -> select(c, b, a)
 *   normalize-axis        a negative axis/axes attribute -> non-negative
 *                         (axes also sorted), so equal ops look equal
 *   layer-norm-unused-stats  a layer_norm whose mean and inv_std_dev
 *                         results are unused -> the one-result op
 *
 * Each pattern is a row of `patterns` naming its root op; the per-op
 * hooks (FZ_GRAPH_PATTERNS_HOOK) add the rows rooted at their op.
 */
#include <stdlib.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"
#include "fz/pass.h"

static bool name_is(const FzOp *op, const char *name) {
  const FzOpDef *def = op ? fzOpGetDef(op) : NULL;
  return def && strcmp(def->name, name) == 0;
}

static FzOp *producer(FzValue *v, const char *name) {
  FzOp *p = fzValueGetDefiningOp(v);
  return name_is(p, name) ? p : NULL;
}

/*===--- commute-constant, compare-constant-lhs -------------------------===*/

static bool swap_operands(FzRewriter *rw, FzOp *op) {
  FzValue *a = fzOpGetOperand(op, 0), *b = fzOpGetOperand(op, 1);
  fzRewriterStartModify(rw, op);
  fzOpSetOperand(op, 0, b);
  fzOpSetOperand(op, 1, a);
  fzRewriterFinalizeModify(rw, op);
  return true;
}

static bool commute_constant(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  if (!fzValueGetConstant(fzOpGetOperand(op, 0)) ||
      fzValueGetConstant(fzOpGetOperand(op, 1)))
    return false;
  return swap_operands(rw, op);
}

static bool compare_constant_lhs(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  static const char *const from[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  static const char *const to[] = {"eq", "ne", "gt", "ge", "lt", "le"};
  if (!fzValueGetConstant(fzOpGetOperand(op, 0)) ||
      fzValueGetConstant(fzOpGetOperand(op, 1)))
    return false;
  FzAttr *p = fzOpGetInherentAttr(op, FZ_STR("predicate"));
  if (!p || fzAttrGetKind(p) != FZ_ATTR_STRING)
    return false;
  FzStringRef s = fzStringAttrGetValue(p);
  for (size_t i = 0; i < 6; ++i) {
    if (!fzStringRefEqual(s, fzStringRefFromCString(from[i])))
      continue;
    FzContext *ctx = fzOpGetContext(op);
    FzAttr *np = fzStringAttrGet(ctx, fzStringRefFromCString(to[i]));
    FzValue *a = fzOpGetOperand(op, 0), *b = fzOpGetOperand(op, 1);
    fzRewriterStartModify(rw, op);
    if (!np || !fzOpSetProp(op, FZ_STR("predicate"), np)) {
      fzRewriterCancelModify(rw, op);
      return false;
    }
    fzOpSetOperand(op, 0, b);
    fzOpSetOperand(op, 1, a);
    fzRewriterFinalizeModify(rw, op);
    return true;
  }
  return false;
}

/*===--- drop-broadcast -------------------------------------------------===*/

static bool drop_broadcast(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  const FzGraphOpInfo *info = fzGraphOpInfo(fzOpGetDef(op));
  size_t n = fzOpGetNumOperands(op);
  if (!info || !info->shape || n > 4 || fzOpGetNumResults(op) != 1)
    return false;
  FzType *declared = fzValueGetType(fzOpGetResult(op, 0));
  for (size_t i = 0; i < n; ++i) {
    FzOp *b = producer(fzOpGetOperand(op, i), "graph.broadcast");
    if (!b)
      continue;
    FzType *types[4], *out[4] = {NULL, NULL, NULL, NULL};
    for (size_t k = 0; k < n; ++k)
      types[k] = fzValueGetType(fzOpGetOperand(op, k));
    types[i] = fzValueGetType(fzOpGetOperand(b, 0));
    FzGraphDiag d = {fzOpGetContext(op), fzOpGetLoc(op), NULL, true};
    FzGraphAttrs a = fzGraphAttrsOfOp(op);
    if (!info->shape(&d, n, types, &a, out) || out[0] != declared)
      continue;
    fzRewriterSetOperand(rw, op, i, fzOpGetOperand(b, 0));
    return true;
  }
  return false;
}

/*===--- cast-of-exact-cast ---------------------------------------------===*/

/* Significant bits of a float type (the implicit bit included). */
static unsigned mantissa_bits(const FzType *t) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16:
    return 11;
  case FZ_TYPE_BF16:
    return 8;
  case FZ_TYPE_F32:
    return 24;
  case FZ_TYPE_F64:
    return 53;
  default:
    return 0;
  }
}

static unsigned exponent_bits(const FzType *t) {
  switch (fzTypeGetKind(t)) {
  case FZ_TYPE_F16:
    return 5;
  case FZ_TYPE_BF16:
    return 8;
  case FZ_TYPE_F32:
    return 8;
  case FZ_TYPE_F64:
    return 11;
  default:
    return 0;
  }
}

/* True when every value of type a converts to b exactly (and back). */
static bool exact_conversion(const FzType *a, const FzType *b) {
  bool fa = fzTypeIsFloat(a), fb = fzTypeIsFloat(b);
  unsigned wa = fzTypeGetBitWidth(a), wb = fzTypeGetBitWidth(b);
  if (fa && fb)
    return mantissa_bits(b) >= mantissa_bits(a) &&
           exponent_bits(b) >= exponent_bits(a);
  if (!fa && !fb)
    return wa == 1 || (wb > 1 && wb >= wa);
  if (!fa && fb)
    return wa <= mantissa_bits(b);
  return false;
}

static bool cast_of_exact_cast(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *inner = producer(fzOpGetOperand(op, 0), "graph.cast");
  if (!inner)
    return false;
  FzValue *x = fzOpGetOperand(inner, 0);
  FzType *a = fzShapedTypeGetElementType(fzValueGetType(x));
  FzType *b =
      fzShapedTypeGetElementType(fzValueGetType(fzOpGetResult(inner, 0)));
  if (!exact_conversion(a, b))
    return false;
  /* A bool widened to an integer and then cast to i1 stays the same. */
  fzRewriterSetOperand(rw, op, 0, x);
  return true;
}

/*===--- select-of-not --------------------------------------------------===*/

static bool select_of_not(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *n = producer(fzOpGetOperand(op, 0), "graph.not");
  if (!n)
    return false;
  FzValue *c = fzOpGetOperand(n, 0);
  FzValue *a = fzOpGetOperand(op, 1), *b = fzOpGetOperand(op, 2);
  fzRewriterStartModify(rw, op);
  fzOpSetOperand(op, 0, c);
  fzOpSetOperand(op, 1, b);
  fzOpSetOperand(op, 2, a);
  fzRewriterFinalizeModify(rw, op);
  return true;
}

/*===--- normalize-axis -------------------------------------------------===*/

static bool normalize_axis(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("axis"));
  FzValue *x = fzOpGetOperand(op, 0);
  if (!a || fzAttrGetKind(a) != FZ_ATTR_INTEGER || !x)
    return false;
  size_t r = fzShapedTypeGetRank(fzValueGetType(x));
  int64_t v = fzIntegerAttrGetValue(a);
  if (v >= 0 || v < -(int64_t)r)
    return false;
  FzContext *ctx = fzOpGetContext(op);
  FzAttr *na = fzIntegerAttrGet(ctx, fzAttrGetType(a), v + (int64_t)r);
  fzRewriterStartModify(rw, op);
  if (!na || !fzOpSetProp(op, FZ_STR("axis"), na)) {
    fzRewriterCancelModify(rw, op);
    return false;
  }
  fzRewriterFinalizeModify(rw, op);
  return true;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static bool normalize_axes(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("axes"));
  FzValue *x = fzOpGetOperand(op, 0);
  if (!a || fzAttrGetKind(a) != FZ_ATTR_DENSE_ARRAY || !x)
    return false;
  size_t r = fzShapedTypeGetRank(fzValueGetType(x));
  size_t n = fzDenseArrayAttrGetSize(a);
  int64_t v[FZ_GRAPH_MAX_RANK];
  if (n > FZ_GRAPH_MAX_RANK)
    return false;
  bool changed = false;
  for (size_t i = 0; i < n; ++i) {
    v[i] = fzDenseArrayAttrGetInt(a, i);
    if (v[i] < -(int64_t)r || v[i] >= (int64_t)r)
      return false;
    if (v[i] < 0) {
      v[i] += (int64_t)r;
      changed = true;
    }
    if (i && v[i] < v[i - 1])
      changed = true;
  }
  if (!changed)
    return false;
  qsort(v, n, sizeof *v, cmp_i64);
  FzContext *ctx = fzOpGetContext(op);
  FzAttr *na = fzDenseArrayAttrGet(ctx, fzIntegerTypeGet(ctx, 64), n, v);
  fzRewriterStartModify(rw, op);
  if (!na || !fzOpSetProp(op, FZ_STR("axes"), na)) {
    fzRewriterCancelModify(rw, op);
    return false;
  }
  fzRewriterFinalizeModify(rw, op);
  return true;
}

/*===--- layer-norm-unused-stats -----------------------------------------===*/

/* A layer_norm whose mean and inv_std_dev results are unused becomes the
 * one-result op (lowered code then stores y alone). */
static bool layer_norm_unused_stats(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  if (fzOpGetNumResults(op) != 3 || fzValueHasUses(fzOpGetResult(op, 1)) ||
      fzValueHasUses(fzOpGetResult(op, 2)))
    return false;
  FzContext *ctx = fzOpGetContext(op);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("graph.layer_norm"), fzOpGetLoc(op));
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    fzOpStateAddOperands(&st, 1, &v);
  }
  FzType *t = fzValueGetType(fzOpGetResult(op, 0));
  fzOpStateAddResults(&st, 1, &t);
  FzAttr *props = fzOpGetPropDict(op);
  for (size_t i = 0; props && i < fzDictAttrGetSize(props); ++i) {
    FzNamedAttr e = fzDictAttrGetEntry(props, i);
    fzOpStateAddProp(&st, fzIdentGetString(e.name), e.value);
  }
  fzOpStateAddAttrDict(&st, fzOpGetAttrDict(op));
  FzOp *nw = fzRewriterCreateOp(rw, &st);
  if (!nw)
    return false;
  FzValue *y = fzOpGetResult(nw, 0);
  fzRewriterReplaceAllUsesWith(rw, fzOpGetResult(op, 0), y);
  fzRewriterEraseOp(rw, op);
  return true;
}

/*===--- The table ------------------------------------------------------===*/

typedef struct PatternRow {
  const char *root;
  FzMatchAndRewriteFn fn;
  const char *name;
} PatternRow;

static const PatternRow patterns[] = {
    {"graph.add", commute_constant, "commute-constant"},
    {"graph.mul", commute_constant, "commute-constant"},
    {"graph.max", commute_constant, "commute-constant"},
    {"graph.min", commute_constant, "commute-constant"},
    {"graph.and", commute_constant, "commute-constant"},
    {"graph.or", commute_constant, "commute-constant"},
    {"graph.xor", commute_constant, "commute-constant"},
    {"graph.compare", compare_constant_lhs, "compare-constant-lhs"},
    {"graph.add", drop_broadcast, "drop-broadcast"},
    {"graph.sub", drop_broadcast, "drop-broadcast"},
    {"graph.mul", drop_broadcast, "drop-broadcast"},
    {"graph.div", drop_broadcast, "drop-broadcast"},
    {"graph.rem", drop_broadcast, "drop-broadcast"},
    {"graph.pow", drop_broadcast, "drop-broadcast"},
    {"graph.max", drop_broadcast, "drop-broadcast"},
    {"graph.min", drop_broadcast, "drop-broadcast"},
    {"graph.and", drop_broadcast, "drop-broadcast"},
    {"graph.or", drop_broadcast, "drop-broadcast"},
    {"graph.xor", drop_broadcast, "drop-broadcast"},
    {"graph.compare", drop_broadcast, "drop-broadcast"},
    {"graph.select", drop_broadcast, "drop-broadcast"},
    {"graph.cast", cast_of_exact_cast, "cast-of-exact-cast"},
    {"graph.select", select_of_not, "select-of-not"},
    {"graph.softmax", normalize_axis, "normalize-axis"},
    {"graph.log_softmax", normalize_axis, "normalize-axis"},
    {"graph.concat", normalize_axis, "normalize-axis"},
    {"graph.gather", normalize_axis, "normalize-axis"},
    {"graph.layer_norm", normalize_axis, "normalize-axis"},
    {"graph.layer_norm", layer_norm_unused_stats, "layer-norm-unused-stats"},
    {"graph.rms_norm", normalize_axis, "normalize-axis"},
    {"graph.reduce_sum", normalize_axes, "normalize-axes"},
    {"graph.reduce_mean", normalize_axes, "normalize-axes"},
    {"graph.reduce_max", normalize_axes, "normalize-axes"},
    {"graph.reduce_min", normalize_axes, "normalize-axes"},
    {"graph.reduce_prod", normalize_axes, "normalize-axes"},
};

void fzGraphAddPatternsFor(FzPatternSet *set, const char *opName) {
  for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; ++i) {
    if (strcmp(patterns[i].root, opName) != 0)
      continue;
    FzPattern p = {patterns[i].root, 1, patterns[i].fn, NULL, patterns[i].name};
    (void)fzPatternSetAdd(set, &p);
  }
}

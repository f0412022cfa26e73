/* dialects/graph/fold.c - fold hooks of the graph ops.
 *
 * Two kinds of folds:
 *  - constant folding: when every operand is a constant and the result
 *    is static and at most FOLD_MAX_ELEMENTS elements, the op is
 *    evaluated by the interpreter (the same kernels, so folding and
 *    interpreting can never disagree). An op whose evaluation fails (an
 *    integer division by zero) is left alone, silently: folding is
 *    speculative and must not report errors.
 *  - algebraic identities that return an existing value or update the op
 *    in place: x + 0, x - 0, x * 1, x / 1, x ^ 1, max(x, x), min(x, x),
 *    neg(neg(x)), identity casts, reshapes, broadcasts, transposes and
 *    slices, reshape of reshape, transpose of transpose, a one-operand
 *    concat, broadcast of broadcast, select with a constant or repeated
 *    choice. An identity
 *    applies only when the result type equals the value's type (an add of
 *    a broadcasting zero still broadcasts). x + 0.0 turns -0.0 into +0.0;
 *    the fold ignores that difference of sign, as every DL compiler does.
 * Bigger constant subgraphs are the fold-constants pass's job.
 */
#include <string.h>

#include "dialects/graph/graph_internal.h"

#define FOLD_MAX_ELEMENTS ((int64_t)1 << 16)

/* Evaluates op on constant operands into a dense attribute. */
static bool fold_constant(FzOp *op, FzAttr *const *cst, FzFoldResult *res) {
  FzContext *ctx = fzOpGetContext(op);
  size_t n = fzOpGetNumOperands(op);
  if (fzOpGetNumResults(op) != 1 || n > 8)
    return false;
  FzType *rt = fzValueGetType(fzOpGetResult(op, 0));
  if (!fzShapedTypeHasStaticShape(rt) ||
      fzShapedTypeGetNumElements(rt) > FOLD_MAX_ELEMENTS)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!cst[i] || fzAttrGetKind(cst[i]) != FZ_ATTR_DENSE ||
        fzAttrGetType(cst[i]) != fzValueGetType(fzOpGetOperand(op, i)) ||
        fzShapedTypeGetNumElements(fzAttrGetType(cst[i])) > FOLD_MAX_ELEMENTS)
      return false;
  FzTensor *ops[8] = {NULL}, *out = NULL;
  bool ok = true;
  for (size_t i = 0; ok && i < n; ++i)
    ok = (ops[i] = fzTensorFromDenseAttr(ctx, cst[i])) != NULL;
  FzInterpOptions opts = {FOLD_MAX_ELEMENTS, 1, true, NULL, 0};
  if (ok)
    ok = fzInterpretOp(op, ops, &opts, &out);
  FzAttr *attr = ok ? fzTensorToDenseAttr(out) : NULL;
  fzTensorDestroy(out);
  for (size_t i = 0; i < n; ++i)
    fzTensorDestroy(ops[i]);
  if (!attr)
    return false;
  res[0].value = NULL;
  res[0].attr = attr;
  return true;
}

/* True when the dense constant c holds v in every element. */
static bool all_equal(const FzAttr *c, double v) {
  if (!c || fzAttrGetKind(c) != FZ_ATTR_DENSE)
    return false;
  int64_t n =
      fzDenseAttrIsSplat(c) ? 1 : fzShapedTypeGetNumElements(fzAttrGetType(c));
  for (int64_t i = 0; i < n; ++i)
    if (fzDenseAttrGetFloat(c, i) != v)
      return false;
  return n > 0;
}

static FzValue *operand(FzOp *op, size_t i) {
  return fzOpGetOperand(op, i);
}

/* Folds to v when its type is the result type. */
static bool fold_to(FzOp *op, FzValue *v, FzFoldResult *res) {
  if (!v || fzValueGetType(v) != fzValueGetType(fzOpGetResult(op, 0)))
    return false;
  res[0].value = v;
  res[0].attr = NULL;
  return true;
}

static bool name_is(const FzOp *op, const char *name) {
  const FzOpDef *def = fzOpGetDef(op);
  return def && strcmp(def->name, name) == 0;
}

static FzOp *producer(FzValue *v, const char *name) {
  FzOp *p = fzValueGetDefiningOp(v);
  return p && name_is(p, name) ? p : NULL;
}

bool fzGraphFoldElementwise(FzOp *op, FzAttr *const *cst, FzFoldResult *res) {
  size_t n = fzOpGetNumOperands(op);
  const char *name = fzOpGetDef(op)->name + 6; /* after "graph." */
  if (n == 2) {
    FzValue *a = operand(op, 0), *b = operand(op, 1);
    bool commutative = fzOpHasTrait(op, FZ_TRAIT_COMMUTATIVE);
    if (strcmp(name, "add") == 0 || strcmp(name, "sub") == 0) {
      if (all_equal(cst[1], 0.0) && fold_to(op, a, res))
        return true;
    }
    if (strcmp(name, "mul") == 0 || strcmp(name, "div") == 0 ||
        strcmp(name, "pow") == 0) {
      if (all_equal(cst[1], 1.0) && fold_to(op, a, res))
        return true;
    }
    if (commutative && (strcmp(name, "add") == 0 && all_equal(cst[0], 0.0)))
      if (fold_to(op, b, res))
        return true;
    if (commutative && strcmp(name, "mul") == 0 && all_equal(cst[0], 1.0))
      if (fold_to(op, b, res))
        return true;
    if (a == b && (strcmp(name, "max") == 0 || strcmp(name, "min") == 0 ||
                   strcmp(name, "and") == 0 || strcmp(name, "or") == 0))
      if (fold_to(op, a, res))
        return true;
  }
  if (n == 1) {
    FzValue *x = operand(op, 0);
    if (strcmp(name, "neg") == 0) {
      FzOp *inner = producer(x, "graph.neg");
      if (inner && fold_to(op, operand(inner, 0), res))
        return true;
    }
    if (strcmp(name, "not") == 0) {
      FzOp *inner = producer(x, "graph.not");
      if (inner && fold_to(op, operand(inner, 0), res))
        return true;
    }
    if (strcmp(name, "cast") == 0 && fold_to(op, x, res))
      return true;
  }
  if (n == 3 && strcmp(name, "select") == 0) {
    if (operand(op, 1) == operand(op, 2) && fold_to(op, operand(op, 1), res))
      return true;
    if (all_equal(cst[0], 1.0) && fold_to(op, operand(op, 1), res))
      return true;
    if (all_equal(cst[0], 0.0) && fold_to(op, operand(op, 2), res))
      return true;
  }
  return fold_constant(op, cst, res);
}

/* Replaces operand 0 of op by v in place. */
static bool fold_in_place(FzOp *op, FzValue *v, FzFoldResult *res) {
  fzOpSetOperand(op, 0, v);
  res[0].value = fzOpGetResult(op, 0);
  res[0].attr = NULL;
  return true;
}

static bool fold_transpose(FzOp *op, FzFoldResult *res) {
  FzAttr *perm = fzOpGetInherentAttr(op, FZ_STR("perm"));
  size_t r = perm ? fzDenseArrayAttrGetSize(perm) : 0;
  if (!perm || r > FZ_GRAPH_MAX_RANK)
    return false;
  bool identity = true;
  for (size_t i = 0; i < r; ++i)
    identity &= fzDenseArrayAttrGetInt(perm, i) == (int64_t)i;
  if (identity)
    return fold_to(op, operand(op, 0), res);
  FzOp *inner = producer(operand(op, 0), "graph.transpose");
  FzAttr *ip = inner ? fzOpGetInherentAttr(inner, FZ_STR("perm")) : NULL;
  if (!ip || fzDenseArrayAttrGetSize(ip) != r)
    return false;
  /* y[i] = t[perm[i]] = x[ip[perm[i]]]. */
  int64_t composed[FZ_GRAPH_MAX_RANK];
  identity = true;
  for (size_t i = 0; i < r; ++i) {
    composed[i] =
        fzDenseArrayAttrGetInt(ip, (size_t)fzDenseArrayAttrGetInt(perm, i));
    identity &= composed[i] == (int64_t)i;
  }
  if (identity)
    return fold_to(op, operand(inner, 0), res);
  FzContext *ctx = fzOpGetContext(op);
  FzAttr *np = fzDenseArrayAttrGet(ctx, fzIntegerTypeGet(ctx, 64), r, composed);
  if (!np || !fzOpSetProp(op, FZ_STR("perm"), np))
    return false;
  return fold_in_place(op, operand(inner, 0), res);
}

static bool is_full_slice(FzOp *op) {
  FzType *t = fzValueGetType(operand(op, 0));
  FzAttr *s = fzOpGetInherentAttr(op, FZ_STR("starts"));
  FzAttr *l = fzOpGetInherentAttr(op, FZ_STR("limits"));
  FzAttr *st = fzOpGetInherentAttr(op, FZ_STR("strides"));
  if (!s || !l || !fzShapedTypeHasStaticShape(t))
    return false;
  for (size_t i = 0; i < fzShapedTypeGetRank(t); ++i)
    if (fzDenseArrayAttrGetInt(s, i) != 0 ||
        fzDenseArrayAttrGetInt(l, i) != fzShapedTypeGetDim(t, i) ||
        (st && fzDenseArrayAttrGetInt(st, i) != 1))
      return false;
  return true;
}

bool fzGraphFoldShapeOp(FzOp *op, FzAttr *const *cst, FzFoldResult *res) {
  const char *name = fzOpGetDef(op)->name + 6;
  if (strcmp(name, "reshape") == 0) {
    if (fold_to(op, operand(op, 0), res))
      return true;
    FzOp *inner = producer(operand(op, 0), "graph.reshape");
    if (inner) {
      if (fold_to(op, operand(inner, 0), res))
        return true;
      return fold_in_place(op, operand(inner, 0), res);
    }
  } else if (strcmp(name, "broadcast") == 0) {
    if (fold_to(op, operand(op, 0), res))
      return true;
    FzOp *inner = producer(operand(op, 0), "graph.broadcast");
    if (inner)
      return fold_in_place(op, operand(inner, 0), res);
  } else if (strcmp(name, "transpose") == 0) {
    if (fold_transpose(op, res))
      return true;
  } else if (strcmp(name, "slice") == 0) {
    if (is_full_slice(op) && fold_to(op, operand(op, 0), res))
      return true;
  } else if (strcmp(name, "concat") == 0) {
    if (fzOpGetNumOperands(op) == 1 && fold_to(op, operand(op, 0), res))
      return true;
  } else if (strcmp(name, "pad") == 0) {
    FzAttr *p = fzOpGetInherentAttr(op, FZ_STR("pads"));
    bool zero = p != NULL;
    for (size_t i = 0; zero && i < fzDenseArrayAttrGetSize(p); ++i)
      zero = fzDenseArrayAttrGetInt(p, i) == 0;
    if (zero && fold_to(op, operand(op, 0), res))
      return true;
  }
  return fold_constant(op, cst, res);
}

bool fzGraphFoldReduceOp(FzOp *op, FzAttr *const *cst, FzFoldResult *res) {
  const char *name = fzOpGetDef(op)->name + 6;
  if (strncmp(name, "reduce_", 7) == 0) {
    FzAttr *axes = fzOpGetInherentAttr(op, FZ_STR("axes"));
    if (axes && fzDenseArrayAttrGetSize(axes) == 0 &&
        fold_to(op, operand(op, 0), res))
      return true;
  }
  return fold_constant(op, cst, res);
}

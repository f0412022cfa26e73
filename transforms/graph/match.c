/* transforms/graph/match.c - matching and building helpers shared by the
 * graph-optimization passes (see graph_opt.h).
 *
 * Matching never changes the IR. Builders go through the rewriter; a
 * builder that fails (an operand combination the op rejects, an
 * allocation failure) reports nothing and creates nothing: result types
 * are inferred under a diagnostic handler that swallows the op's
 * complaints, before any op exists. Constants are evaluated on host
 * tensors with the reference interpreter, so a folded constant equals
 * what the interpreter would have computed at run time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/graph/graph_opt.h"

/*===--- Matching -------------------------------------------------------===*/

bool fzGraphOptIsOp(const FzOp *op, const char *name) {
  const FzOpDef *def = op ? fzOpGetDef(op) : NULL;
  return def && strcmp(def->name, name) == 0;
}

FzOp *fzGraphOptProducer(const FzValue *v, const char *name) {
  FzOp *p = v ? fzValueGetDefiningOp(v) : NULL;
  return fzGraphOptIsOp(p, name) ? p : NULL;
}

FzAttr *fzGraphOptDense(const FzValue *v) {
  FzAttr *a = v ? fzValueGetConstant(v) : NULL;
  return a && fzAttrGetKind(a) == FZ_ATTR_DENSE ? a : NULL;
}

bool fzGraphOptSplat(const FzValue *v, double *out) {
  FzAttr *a = fzGraphOptDense(v);
  if (!a || !fzTypeIsFloat(fzShapedTypeGetElementType(fzAttrGetType(a))))
    return false;
  int64_t n =
      fzDenseAttrIsSplat(a) ? 1 : fzShapedTypeGetNumElements(fzAttrGetType(a));
  if (n <= 0)
    return false;
  double first = fzDenseAttrGetFloat(a, 0);
  for (int64_t i = 1; i < n; ++i) {
    double e = fzDenseAttrGetFloat(a, i);
    if (e != first && !(isnan(e) && isnan(first)))
      return false;
  }
  *out = first;
  return true;
}

bool fzGraphOptNear(double a, double want, const FzType *elt) {
  double tol = 1e-4;
  if (elt && fzTypeGetKind(elt) == FZ_TYPE_F16)
    tol = 1e-3;
  else if (elt && fzTypeGetKind(elt) == FZ_TYPE_BF16)
    tol = 8e-3;
  if (isnan(a) || isnan(want))
    return false;
  if (want == 0)
    return a == 0;
  return fabs(a - want) <= tol * fabs(want);
}

bool fzGraphOptIsSplatNear(const FzValue *v, double want) {
  double c;
  return fzGraphOptSplat(v, &c) &&
         fzGraphOptNear(c, want, fzGraphOptElementType(v));
}

bool fzGraphOptUsesWithin(const FzValue *v, FzOp *const *ops, size_t n) {
  for (FzOpOperand *u = fzValueGetFirstUse(v); u;
       u = fzOpOperandGetNextUse(u)) {
    FzOp *owner = fzOpOperandGetOwner(u);
    bool found = false;
    for (size_t i = 0; i < n && !found; ++i)
      found = ops[i] == owner;
    if (!found)
      return false;
  }
  return true;
}

FzValue *fzGraphOptOtherOperand(FzOp *binary, const FzValue *v) {
  if (!binary || fzOpGetNumOperands(binary) != 2)
    return NULL;
  if (fzOpGetOperand(binary, 0) == v)
    return fzOpGetOperand(binary, 1);
  if (fzOpGetOperand(binary, 1) == v)
    return fzOpGetOperand(binary, 0);
  return NULL;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

bool fzGraphOptGetAxes(const FzOp *reduce, size_t rank, int64_t *axes,
                       size_t *n) {
  FzAttr *a = fzOpGetInherentAttr(reduce, FZ_STR("axes"));
  if (rank > FZ_GRAPH_MAX_RANK)
    return false;
  if (!a) {
    for (size_t i = 0; i < rank; ++i)
      axes[i] = (int64_t)i;
    *n = rank;
    return true;
  }
  if (fzAttrGetKind(a) != FZ_ATTR_DENSE_ARRAY ||
      fzDenseArrayAttrGetSize(a) > rank)
    return false;
  *n = fzDenseArrayAttrGetSize(a);
  for (size_t i = 0; i < *n; ++i) {
    int64_t v = fzDenseArrayAttrGetInt(a, i);
    if (v < -(int64_t)rank || v >= (int64_t)rank)
      return false;
    axes[i] = v < 0 ? v + (int64_t)rank : v;
  }
  qsort(axes, *n, sizeof *axes, cmp_i64);
  for (size_t i = 1; i < *n; ++i)
    if (axes[i] == axes[i - 1])
      return false;
  return true;
}

bool fzGraphOptGetKeepDims(const FzOp *reduce) {
  FzAttr *a = fzOpGetInherentAttr(reduce, FZ_STR("keepdims"));
  if (!a)
    return false;
  if (fzAttrGetKind(a) == FZ_ATTR_BOOL)
    return fzBoolAttrGetValue(a);
  if (fzAttrGetKind(a) == FZ_ATTR_INTEGER)
    return fzIntegerAttrGetValue(a) != 0;
  return false;
}

static bool is_ranked_tensor(const FzType *t) {
  return t && fzTypeGetKind(t) == FZ_TYPE_TENSOR &&
         fzShapedTypeGetRank(t) != FZ_UNRANKED;
}

FzType *fzGraphOptElementType(const FzValue *v) {
  FzType *t = v ? fzValueGetType(v) : NULL;
  return is_ranked_tensor(t) ? fzShapedTypeGetElementType(t) : NULL;
}

size_t fzGraphOptRank(const FzValue *v) {
  FzType *t = v ? fzValueGetType(v) : NULL;
  return is_ranked_tensor(t) ? fzShapedTypeGetRank(t) : 0;
}

bool fzGraphOptIsFloatTensor(const FzValue *v) {
  FzType *e = fzGraphOptElementType(v);
  return e && fzTypeIsFloat(e);
}

/*===--- Building -------------------------------------------------------===*/

static bool swallow(const FzDiagnostic *d, void *ud) {
  (void)d;
  (void)ud;
  return true;
}

/* The inferred result type of an op of def on operands of types in, or
 * NULL (quietly). */
static FzType *infer_types(FzContext *ctx, const FzOpDef *def, FzLoc *loc,
                           size_t n, FzType *const *in, FzAttr *props) {
  /* Room for every result (layer_norm infers its optional statistics
   * too); the first is the one built here. */
  FzType *out[4] = {NULL, NULL, NULL, NULL};
  if (!def || !def->inferResultTypes || n > FZ_GRAPH_OPT_MAX_OPERANDS ||
      (def->numResults != 1 && def->numResults != FZ_VARIADIC))
    return NULL;
  for (size_t i = 0; i < n; ++i)
    if (!in[i])
      return NULL;
  FzDiagHandlerId id = fzContextPushDiagHandler(ctx, swallow, NULL);
  bool ok = def->inferResultTypes(ctx, loc, n, in, NULL, props, out);
  fzContextPopDiagHandler(ctx, id);
  return ok ? out[0] : NULL;
}

static FzType *infer_type(FzContext *ctx, const FzOpDef *def, FzLoc *loc,
                          size_t n, FzValue *const *operands, FzAttr *props) {
  FzType *in[FZ_GRAPH_OPT_MAX_OPERANDS];
  if (n > FZ_GRAPH_OPT_MAX_OPERANDS)
    return NULL;
  for (size_t i = 0; i < n; ++i)
    in[i] = fzValueGetType(operands[i]);
  return infer_types(ctx, def, loc, n, in, props);
}

FzType *fzGraphOptInferType(FzContext *ctx, const char *name, size_t n,
                            FzType *const *types) {
  const FzOpDef *def = fzContextLookupOpDef(ctx, fzStringRefFromCString(name));
  FzAttr *empty = fzDictAttrGet(ctx, 0, NULL, NULL);
  return empty ? infer_types(ctx, def, NULL, n, types, empty) : NULL;
}

static FzAttr *props_dict(FzContext *ctx, size_t n,
                          const FzGraphOptProp *props) {
  FzNamedAttr na[8];
  if (n > 8)
    return NULL;
  for (size_t i = 0; i < n; ++i) {
    na[i].name = fzIdentGet(ctx, fzStringRefFromCString(props[i].name));
    na[i].value = props[i].value;
    if (!na[i].name || !na[i].value)
      return NULL;
  }
  return fzDictAttrGet(ctx, n, na, NULL);
}

FzValue *fzGraphOptCreate(FzRewriter *rw, const char *name, FzLoc *loc,
                          size_t n, FzValue *const *operands,
                          FzType *resultType, size_t numProps,
                          const FzGraphOptProp *props) {
  FzContext *ctx = fzRewriterGetContext(rw);
  const FzOpDef *def = fzContextLookupOpDef(ctx, fzStringRefFromCString(name));
  FzAttr *dict = props_dict(ctx, numProps, props);
  if (!def || !dict)
    return NULL;
  for (size_t i = 0; i < n; ++i)
    if (!operands[i])
      return NULL;
  if (!resultType)
    resultType = infer_type(ctx, def, loc, n, operands, dict);
  if (!resultType)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, ctx, fzStringRefFromCString(name), loc);
  fzOpStateAddOperands(&st, n, operands);
  fzOpStateAddResults(&st, 1, &resultType);
  for (size_t i = 0; i < numProps; ++i)
    fzOpStateAddProp(&st, fzStringRefFromCString(props[i].name),
                     props[i].value);
  FzOp *op = fzRewriterCreateOp(rw, &st);
  return op ? fzOpGetResult(op, 0) : NULL;
}

FzValue *fzGraphOptConstant(FzRewriter *rw, const FzTensor *t, FzLoc *loc) {
  FzAttr *attr = fzTensorToDenseAttr(t);
  FzType *type = fzTensorGetType(t);
  if (!attr || !type)
    return NULL;
  return fzRewriterMaterializeConstant(rw, fzGraphDialectGet(), attr, type,
                                       loc);
}

FzValue *fzGraphOptSplatConstant(FzRewriter *rw, FzType *type, double v,
                                 FzLoc *loc) {
  FzContext *ctx = fzRewriterGetContext(rw);
  FzTensor *t = fzTensorCreate(ctx, fzShapedTypeGetElementType(type), 0, NULL);
  if (!t)
    return NULL;
  fzTensorSetF64(t, 0, v);
  FzAttr *one = fzTensorToDenseAttr(t);
  fzTensorDestroy(t);
  if (!one)
    return NULL;
  /* A splat of the full type: one element of storage. */
  FzAttr *attr = fzDenseAttrGet(ctx, type, fzDenseAttrGetData(one),
                                fzDenseAttrGetNumBytes(one));
  if (!attr)
    return NULL;
  return fzRewriterMaterializeConstant(rw, fzGraphDialectGet(), attr, type,
                                       loc);
}

FzTensor *fzGraphOptTensor(const FzValue *v) {
  FzAttr *a = fzGraphOptDense(v);
  return a ? fzTensorFromDenseAttr(fzValueGetContext(v), a) : NULL;
}

FzValue *fzGraphOptFoldBinary(FzRewriter *rw, const char *name, FzValue *a,
                              FzValue *b, FzLoc *loc) {
  FzContext *ctx = fzRewriterGetContext(rw);
  const FzOpDef *def = fzContextLookupOpDef(ctx, fzStringRefFromCString(name));
  FzValue *ops[2] = {a, b};
  FzAttr *empty = fzDictAttrGet(ctx, 0, NULL, NULL);
  FzType *rt = def && empty ? infer_type(ctx, def, loc, 2, ops, empty) : NULL;
  if (!rt || !fzGraphOptDense(a) || !fzGraphOptDense(b) ||
      !fzShapedTypeHasStaticShape(rt))
    return NULL;
  FzTensor *ta = fzGraphOptTensor(a), *tb = fzGraphOptTensor(b);
  FzTensor *in[2] = {ta, tb}, *out = NULL;
  FzOp *tmp = NULL;
  if (ta && tb) {
    FzOpState st;
    fzOpStateInit(&st, ctx, fzStringRefFromCString(name), loc);
    fzOpStateAddOperands(&st, 2, ops);
    fzOpStateAddResults(&st, 1, &rt);
    tmp = fzOpCreate(&st);
  }
  FzInterpOptions opts = {0, 1, true, NULL, 0};
  bool ok = tmp && fzInterpretOp(tmp, in, &opts, &out);
  if (tmp)
    fzOpDestroy(tmp);
  fzTensorDestroy(ta);
  fzTensorDestroy(tb);
  FzValue *c = ok ? fzGraphOptConstant(rw, out, loc) : NULL;
  fzTensorDestroy(out);
  return c;
}

FzLoc *fzGraphOptFusedLoc(FzOp *const *ops, size_t n) {
  FzLoc *locs[32];
  if (n == 0)
    return NULL;
  if (n > 32)
    n = 32;
  for (size_t i = 0; i < n; ++i)
    locs[i] = fzOpGetLoc(ops[i]);
  return fzFusedLocGet(fzOpGetContext(ops[0]), n, locs, NULL);
}

FzAttr *fzGraphOptI64(FzContext *ctx, int64_t v) {
  return fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64), v);
}

FzAttr *fzGraphOptF32(FzContext *ctx, double v) {
  return fzFloatAttrGet(ctx, fzF32TypeGet(ctx), v);
}

/* dialects/graph/dialect.c - the graph dialect's table and registration,
 * and constant materialization for folding.
 *
 * The op list comes from the X-macros of graph_internal.h, so an op is
 * named once there and defined once in its family's file.
 */
#include "dialects/graph/fusion_op.h" /* graph.fusion, graph.yield */
#include "dialects/graph/graph_internal.h"

#define DECLARE_FAMILY(id, ...) extern const FzOpDef fzGraphOp_##id;
#define DECLARE_OTHER(id)       extern const FzOpDef fzGraphOp_##id;
FZ_GRAPH_UNARY_OPS(DECLARE_FAMILY)
FZ_GRAPH_BINARY_OPS(DECLARE_FAMILY)
FZ_GRAPH_OTHER_OPS(DECLARE_OTHER)

#define LIST_FAMILY(id, ...) &fzGraphOp_##id,
#define LIST_OTHER(id)       &fzGraphOp_##id,
/* clang-format off */
static const FzOpDef *const graph_ops[] = {
    FZ_GRAPH_OTHER_OPS(LIST_OTHER)
    FZ_GRAPH_UNARY_OPS(LIST_FAMILY)
    FZ_GRAPH_BINARY_OPS(LIST_FAMILY)
    &fzGraphFusionOpDef, /* dialects/graph/fusion_op.c (the fusion pass's) */
    &fzGraphYieldOpDef,
};
/* clang-format on */

FzOp *fzGraphCreateConstant(FzBuilder *b, FzAttr *value, FzLoc *loc) {
  if (!value || fzAttrGetKind(value) != FZ_ATTR_DENSE)
    return NULL;
  FzOpState st;
  FzType *t = fzAttrGetType(value);
  fzOpStateInit(&st, b->ctx, FZ_STR("graph.constant"),
                loc ? loc : fzUnknownLocGet(b->ctx));
  fzOpStateAddProp(&st, FZ_STR("value"), value);
  fzOpStateAddResults(&st, 1, &t);
  return fzBuilderCreate(b, &st);
}

/* Folds produce dense attributes; a scalar attribute of a tensor type
 * (from a generic folder) is splatted. */
static FzOp *materialize_constant(FzBuilder *b, FzAttr *value, FzType *type,
                                  FzLoc *loc) {
  if (!value || !type || fzTypeGetKind(type) != FZ_TYPE_TENSOR ||
      !fzShapedTypeHasStaticShape(type))
    return NULL;
  if (fzAttrGetKind(value) == FZ_ATTR_DENSE) {
    if (fzAttrGetType(value) != type)
      return NULL;
    return fzGraphCreateConstant(b, value, loc);
  }
  FzType *elt = fzShapedTypeGetElementType(type);
  FzTensor *t = fzTensorCreate(b->ctx, elt, 1, (int64_t[]){1});
  if (!t)
    return NULL;
  bool ok = true;
  if (fzAttrGetKind(value) == FZ_ATTR_FLOAT)
    fzTensorSetF64(t, 0, fzFloatAttrGetValue(value));
  else if (fzAttrGetKind(value) == FZ_ATTR_INTEGER)
    fzTensorSetI64(t, 0, fzIntegerAttrGetValue(value));
  else if (fzAttrGetKind(value) == FZ_ATTR_BOOL)
    fzTensorSetI64(t, 0, fzBoolAttrGetValue(value));
  else
    ok = false;
  FzAttr *dense =
      ok ? fzDenseAttrGet(b->ctx, type, t->data, fzTypeGetStorageSize(elt))
         : NULL;
  fzTensorDestroy(t);
  return dense ? fzGraphCreateConstant(b, dense, loc) : NULL;
}

static const FzDialectDef graph_dialect = {
    .name = "graph",
    .summary = "tensor operators with value semantics (see "
               "docs/dialects/graph.md)",
    .ops = graph_ops,
    .numOps = sizeof graph_ops / sizeof graph_ops[0],
    .materializeConstant = materialize_constant,
};

const FzDialectDef *fzGraphDialectGet(void) {
  return &graph_dialect;
}

bool fzRegisterGraphDialect(FzContext *ctx) {
  return fzContextRegisterDialect(ctx, &graph_dialect);
}

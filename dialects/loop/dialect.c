/* dialects/loop/dialect.c - the loop dialect's table and registration,
 * opcode lookup, constant materialization and small builders.
 *
 * The op list comes from FZ_LOOP_OPS in fz/loop.h, so an op is named once
 * there and defined once in its family's file (ops_arith.c, ops_mem.c,
 * ops_struct.c).
 */
#include "dialects/loop/loop_internal.h"

#define LIST_OP(id, name) &fzLoopOp_##id,
static const FzOpDef *const loop_ops[] = {FZ_LOOP_OPS(LIST_OP)};
#undef LIST_OP

#define NAME_OP(id, name) name,
static const char *const loop_names[] = {FZ_LOOP_OPS(NAME_OP)};
#undef NAME_OP

FzLoopOpcode fzLoopGetOpcode(const FzOp *op) {
  const FzOpDef *def = op ? fzOpGetDef(op) : NULL;
  if (!def || !def->extra)
    return FZ_LOOP_OP_UNKNOWN;
  /* Only our own table entries point into loop_ops' extra records; check
   * the definition is ours before trusting `extra`. */
  const FzLoopOpInfo *info = def->extra;
  if (info->opcode >= FZ_LOOP_NUM_OPS || loop_ops[info->opcode] != def)
    return FZ_LOOP_OP_UNKNOWN;
  return info->opcode;
}

const char *fzLoopOpcodeGetName(FzLoopOpcode opcode) {
  return opcode < FZ_LOOP_NUM_OPS ? loop_names[opcode] : NULL;
}

/* Folds give integer and float attributes for scalar results. */
static FzOp *materialize_constant(FzBuilder *b, FzAttr *value, FzType *type,
                                  FzLoc *loc) {
  if (!value || !type || fzAttrGetType(value) != type)
    return NULL;
  FzAttrKind k = fzAttrGetKind(value);
  if (k != FZ_ATTR_INTEGER && k != FZ_ATTR_FLOAT && k != FZ_ATTR_BOOL)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, b->ctx, FZ_STR("loop.constant"),
                loc ? loc : fzUnknownLocGet(b->ctx));
  fzOpStateAddProp(&st, FZ_STR("value"), value);
  fzOpStateAddResults(&st, 1, &type);
  return fzBuilderCreate(b, &st);
}

static const FzDialectDef loop_dialect = {
    .name = "loop",
    .summary = "buffers, loop nests and scalar arithmetic (see "
               "docs/dialects/loop.md)",
    .ops = loop_ops,
    .numOps = sizeof loop_ops / sizeof loop_ops[0],
    .materializeConstant = materialize_constant,
};

const FzDialectDef *fzLoopDialectGet(void) {
  return &loop_dialect;
}

bool fzRegisterLoopDialect(FzContext *ctx) {
  return fzContextRegisterDialect(ctx, &loop_dialect);
}

FzValue *fzLoopCreateConstant(FzBuilder *b, FzLoc *loc, FzType *t, double v) {
  FzAttr *a = fzTypeIsFloat(t) ? fzFloatAttrGet(b->ctx, t, v)
                               : fzIntegerAttrGet(b->ctx, t, (int64_t)v);
  FzOp *op = a ? materialize_constant(b, a, t, loc) : NULL;
  return op ? fzOpGetResult(op, 0) : NULL;
}

bool fzLoopValueGetConstantInt(FzValue *v, int64_t *out) {
  FzOp *def = v ? fzValueGetDefiningOp(v) : NULL;
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_CONSTANT)
    return false;
  FzAttr *a = fzOpGetInherentAttr(def, FZ_STR("value"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_INTEGER)
    return false;
  *out = fzIntegerAttrGetValue(a);
  return true;
}

FzValue *fzLoopCreateIndexConstant(FzBuilder *b, FzLoc *loc, int64_t v) {
  FzType *t = fzIndexTypeGet(b->ctx);
  FzAttr *a = fzIntegerAttrGet(b->ctx, t, v);
  FzOp *op = a ? materialize_constant(b, a, t, loc) : NULL;
  return op ? fzOpGetResult(op, 0) : NULL;
}

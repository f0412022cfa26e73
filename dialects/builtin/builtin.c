/* dialects/builtin/builtin.c - the builtin dialect: builtin.module and
 * builtin.unrealized_conversion_cast.
 *
 * A module is the top-level container: one region with one block of
 * symbol-defining ops, no terminator, isolated from above, and a graph
 * region (the order of its ops carries no meaning). Custom form:
 *   module @name attributes {k = v} { ... }
 * with the name and attributes optional. The builtin dialect's prefix is
 * never needed: `module` means builtin.module anywhere.
 */
#include "fz/dialects.h"

static const char *const module_inherent[] = {"sym_name", "sym_visibility",
                                              NULL};

static bool module_verify(FzOp *op) {
  FzRegion *body = fzOpGetRegion(op, 0);
  FzBlock *b = fzRegionGetFirstBlock(body);
  if (!b)
    return fzOpEmitError(op, "expects a body block");
  if (fzBlockGetNumArguments(b) != 0)
    return fzOpEmitError(op, "expects its body to have no arguments");
  FzAttr *name = fzOpGetInherentAttr(op, FZ_STR("sym_name"));
  if (name && fzAttrGetKind(name) != FZ_ATTR_STRING)
    return fzOpEmitError(op, "requires 'sym_name' to be a string");
  return true;
}

static void module_print(FzOp *op, FzAsmPrinter *p) {
  FzAttr *name = fzOpGetInherentAttr(op, FZ_STR("sym_name"));
  if (name && fzAttrGetKind(name) == FZ_ATTR_STRING) {
    fzAsmPrint(p, " ");
    fzAsmPrintSymbolName(p, fzStringAttrGetValue(name));
  }
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, true);
  fzAsmPrintRegion(p, fzOpGetRegion(op, 0), false);
}

static bool module_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzStringRef name;
  if (fzAsmParseOptionalSymbolName(p, &name))
    fzOpStateAddProp(st, FZ_STR("sym_name"), fzStringAttrGet(ctx, name));
  FzAttr *attrs = NULL;
  if (!fzAsmParseOptionalAttrDictWithKeyword(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  FzRegion *body = fzOpStateAddRegion(st);
  if (!body || !fzAsmParseRegion(p, body, 0, NULL, false))
    return false;
  if (fzRegionIsEmpty(body)) {
    FzBlock *b = fzBlockCreate(ctx, 0, NULL, NULL);
    if (!b)
      return false;
    fzRegionAppendBlock(body, b);
  }
  return true;
}

static const FzOpDef module_def = {
    .name = "builtin.module",
    .summary = "a top-level container of symbols",
    .traits = FZ_TRAIT_ISOLATED_FROM_ABOVE | FZ_TRAIT_SYMBOL_TABLE |
              FZ_TRAIT_NO_TERMINATOR | FZ_TRAIT_SINGLE_BLOCK |
              FZ_TRAIT_GRAPH_REGION,
    .numOperands = 0,
    .numResults = 0,
    .numRegions = 1,
    .fusionKind = FZ_FUSION_OPAQUE,
    .inherentAttrs = module_inherent,
    .defaultDialect = "builtin",
    .verify = module_verify,
    .print = module_print,
    .parse = module_parse,
};

/*===--- builtin.unrealized_conversion_cast -------------------------------===*/

/* `%r:2 = builtin.unrealized_conversion_cast %a, %b : A, B to C, D`: a
 * placeholder conversion between type systems, with no semantics of its
 * own (any operand and result types, either list may be empty). */

static void cast_print(FzOp *op, FzAsmPrinter *p) {
  size_t n = fzOpGetNumOperands(op);
  if (n) {
    fzAsmPrint(p, " ");
    fzAsmPrintOperands(p, op);
    fzAsmPrint(p, " : ");
    for (size_t i = 0; i < n; ++i) {
      if (i)
        fzAsmPrint(p, ", ");
      FzValue *v = fzOpGetOperand(op, i);
      fzAsmPrintType(p, v ? fzValueGetType(v) : NULL);
    }
  }
  fzAsmPrint(p, " to ");
  size_t r = fzOpGetNumResults(op);
  for (size_t i = 0; i < r; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    fzAsmPrintType(p, fzValueGetType(fzOpGetResult(op, i)));
  }
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, false);
}

/* (operand-list `:` type-list)? `to` type-list attr-dict */
static bool cast_parse(FzAsmParser *p, FzOpState *st) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand *ops;
  size_t n;
  if (!fzAsmParseOperandList(p, &ops, &n))
    return false;
  if (n) {
    FzType **types;
    size_t nt;
    if (!fzAsmParsePunct(p, ":") || !fzAsmParseTypeList(p, &types, &nt) ||
        !fzAsmResolveOperands(p, ops, n, types, nt, loc, st))
      return false;
  }
  if (!fzAsmParseKeyword(p, "to"))
    return false;
  FzType **results;
  size_t nr;
  if (!fzAsmParseTypeList(p, &results, &nr))
    return false;
  fzOpStateAddResults(st, nr, results);
  FzAttr *attrs = NULL;
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

static const FzOpDef cast_def = {
    .name = "builtin.unrealized_conversion_cast",
    .summary = "an unrealized conversion between type systems",
    .traits = FZ_TRAIT_PURE,
    .numOperands = FZ_VARIADIC,
    .numResults = FZ_VARIADIC,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_OPAQUE,
    .print = cast_print,
    .parse = cast_parse,
};

static const FzOpDef *const builtin_ops[] = {&module_def, &cast_def};

static const FzDialectDef builtin_dialect = {
    .name = "builtin",
    .summary = "the module container and unrealized casts",
    .ops = builtin_ops,
    .numOps = sizeof builtin_ops / sizeof builtin_ops[0],
};

bool fzRegisterBuiltinDialect(FzContext *ctx) {
  return fzContextRegisterDialect(ctx, &builtin_dialect);
}

/* dialects/graph/asm.c - the graph dialect's custom assembly and its
 * generic verifier.
 *
 * One scheme for every op but graph.constant:
 *
 *   %r = graph.OP [PREDICATE ,] OPERANDS [{ATTRS}] : OPERAND-TYPES [->
 * RESULT-TYPE]
 *
 *   - ATTRS holds every attribute, inherent (stored as properties) and
 *     discardable, as one dictionary; the custom form has no <{...}>.
 *   - After the colon come the operand types. A single type stands for
 *     every operand. `-> type` gives the result type; it may be left out
 *     where the op infers it from the operands, and the printer leaves it
 *     out exactly when the result type equals the (single) operand type:
 *       %2 = graph.relu %1 : tensor<64x256xf32>
 *       %3 = graph.add %a, %b : tensor<4x8xf32>
 *       %4 = graph.add %a, %c : tensor<4x8xf32>, tensor<8xf32> ->
 * tensor<4x8xf32>
 *   - compare starts with its predicate keyword, as MLIR's arith.cmpf:
 *       %5 = graph.compare lt, %a, %b : tensor<4xf32>, tensor<4xf32> ->
 * tensor<4xi1>
 *
 *   %c = graph.constant [{ATTRS}] dense<...> : tensor<...>
 *
 * The generic form (properties in <{...}>) parses to the same op.
 */
#include <string.h>

#include "dialects/graph/graph_internal.h"

static const char *const predicate_elided[] = {"predicate", NULL};
static const char *const value_elided[] = {"value", NULL};

/* Every attribute of op (properties first; a discardable one of the same
 * name is dropped) as one dictionary; NULL when there are none or on
 * allocation failure. */
static FzAttr *merged_attrs(FzOp *op) {
  FzContext *ctx = fzOpGetContext(op);
  FzAttr *props = fzOpGetPropDict(op), *attrs = fzOpGetAttrDict(op);
  size_t np = props ? fzDictAttrGetSize(props) : 0;
  size_t na = attrs ? fzDictAttrGetSize(attrs) : 0;
  if (np + na == 0)
    return NULL;
  if (na == 0)
    return props;
  if (np == 0)
    return attrs;
  FzNamedAttr *e = fzMalloc(ctx, (np + na) * sizeof *e);
  if (!e)
    return NULL;
  size_t n = 0;
  for (size_t i = 0; i < np; ++i)
    e[n++] = fzDictAttrGetEntry(props, i);
  for (size_t i = 0; i < na; ++i) {
    FzNamedAttr a = fzDictAttrGetEntry(attrs, i);
    if (!fzDictAttrLookup(props, fzIdentGetString(a.name)))
      e[n++] = a;
  }
  FzAttr *d = fzDictAttrGet(ctx, n, e, NULL);
  fzFree(ctx, e);
  return d;
}

static FzType *operand_type(FzOp *op, size_t i) {
  FzValue *v = fzOpGetOperand(op, i);
  return v ? fzValueGetType(v) : NULL;
}

static void print_constant(FzOp *op, FzAsmPrinter *p) {
  FzAttr *value = fzOpGetInherentAttr(op, FZ_STR("value"));
  fzAsmPrintOptionalAttrDict(p, merged_attrs(op), value_elided, false);
  fzAsmPrint(p, " ");
  if (value)
    fzAsmPrintAttr(p, value);
  if (!value || fzAttrGetKind(value) != FZ_ATTR_DENSE) {
    /* Not a dense attribute: keep the result type visible. */
    fzAsmPrint(p, " : ");
    fzAsmPrintType(p, fzValueGetType(fzOpGetResult(op, 0)));
  }
}

void fzGraphPrint(FzOp *op, FzAsmPrinter *p) {
  const FzOpDef *def = fzOpGetDef(op);
  const FzGraphOpInfo *info = fzGraphOpInfo(def);
  if (fzOpHasTrait(op, FZ_TRAIT_CONSTANT_LIKE)) {
    print_constant(op, p);
    return;
  }
  size_t n = fzOpGetNumOperands(op), r = fzOpGetNumResults(op);
  bool predicate = info && (info->flags & G_PREDICATE);
  if (predicate) {
    FzAttr *pa = fzOpGetInherentAttr(op, FZ_STR("predicate"));
    fzAsmPrint(p, " ");
    if (pa && fzAttrGetKind(pa) == FZ_ATTR_STRING)
      fzAsmPrintString(p, fzStringAttrGetValue(pa));
    else
      fzAsmPrint(p, "<<missing predicate>>");
    if (n)
      fzAsmPrint(p, ",");
  }
  if (n) {
    fzAsmPrint(p, " ");
    fzAsmPrintOperands(p, op);
  }
  fzAsmPrintOptionalAttrDict(p, merged_attrs(op),
                             predicate ? predicate_elided : NULL, false);
  /* The short form: one type standing for every operand and the result. */
  bool same = n > 0 && r == 1;
  FzType *t0 = n ? operand_type(op, 0) : NULL;
  for (size_t i = 1; same && i < n; ++i)
    same = operand_type(op, i) == t0;
  if (same)
    same = fzValueGetType(fzOpGetResult(op, 0)) == t0;
  if (same && info && info->shape && n <= 8) {
    /* The parser infers the result of `: T`; print the short form only
     * when that gives back exactly T. */
    FzType *in[8], *out[4] = {NULL, NULL, NULL, NULL};
    for (size_t i = 0; i < n; ++i)
      in[i] = t0;
    FzGraphDiag d = {fzOpGetContext(op), fzOpGetLoc(op), NULL, true};
    FzGraphAttrs a = fzGraphAttrsOfOp(op);
    same = info->shape(&d, n, in, &a, out) && (!out[0] || out[0] == t0);
  }
  fzAsmPrint(p, " : ");
  if (same) {
    fzAsmPrintType(p, t0);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    fzAsmPrintType(p, operand_type(op, i));
  }
  if (n == 0)
    fzAsmPrint(p, "()");
  fzAsmPrint(p, " -> ");
  if (r != 1)
    fzAsmPrint(p, "(");
  for (size_t i = 0; i < r; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    fzAsmPrintType(p, fzValueGetType(fzOpGetResult(op, i)));
  }
  if (r != 1)
    fzAsmPrint(p, ")");
}

/* constant ::= attr-dict? dense-attr */
static bool parse_constant(FzAsmParser *p, FzOpState *st) {
  FzAttr *attrs = NULL, *value = NULL;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  if (!fzAsmParseAttr(p, NULL, &value))
    return false;
  if (fzAttrGetKind(value) != FZ_ATTR_DENSE)
    return fzAsmEmitErrorAt(p, loc,
                            "graph.constant expects a dense "
                            "elements attribute (dense<...> : "
                            "tensor<...>)");
  FzType *t = fzAttrGetType(value);
  fzOpStateAddProp(st, FZ_STR("value"), value);
  fzOpStateAddResults(st, 1, &t);
  return true;
}

/* An FzAttr dictionary of st's properties so far plus the parsed
 * attributes, for the shape function (NULL when there is nothing). */
static FzAttr *state_props(FzContext *ctx, const FzOpState *st) {
  if (st->numProps == 0)
    return NULL;
  return fzDictAttrGet(ctx, st->numProps, st->props, NULL);
}

bool fzGraphParse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  const FzOpDef *def = fzContextLookupOpDef(ctx, fzIdentGetString(st->name));
  const FzGraphOpInfo *info = fzGraphOpInfo(def);
  if (!def || !info)
    return fzAsmEmitError(p, "internal error: no graph op definition");
  if (def->traits & FZ_TRAIT_CONSTANT_LIKE)
    return parse_constant(p, st);
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (info->flags & G_PREDICATE) {
    FzStringRef pred;
    if (!fzAsmParseOptionalIdentifier(p, &pred))
      return fzAsmEmitError(p, "expected a predicate keyword (eq, ne, lt, "
                               "le, gt, ge)");
    fzOpStateAddProp(st, FZ_STR("predicate"), fzStringAttrGet(ctx, pred));
    if (!fzAsmParsePunct(p, ","))
      return false;
  }
  FzUnresolvedOperand *ops;
  size_t n;
  if (!fzAsmParseOperandList(p, &ops, &n))
    return false;
  /* Copy: later parser calls may reuse the operand storage. */
  FzUnresolvedOperand small[8];
  FzUnresolvedOperand *opsCopy =
      n <= 8 ? small : fzMalloc(ctx, n * sizeof *opsCopy);
  if (!opsCopy)
    return false;
  if (n)
    memcpy(opsCopy, ops, n * sizeof *ops);
  bool ok = true;
  FzAttr *attrs = NULL;
  FzType **types = NULL, **results = NULL;
  FzType *small_types[8];
  FzType **operandTypes = small_types;
  size_t nt = 0, nr = 0;
  if (def->numOperands != FZ_VARIADIC && n != (size_t)def->numOperands) {
    ok = fzAsmEmitErrorAt(p, loc, "'%s' expects %d operand%s, but got %zu",
                          def->name, def->numOperands,
                          def->numOperands == 1 ? "" : "s", n);
    goto done;
  }
  if (!fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParsePunct(p, ":") ||
      !fzAsmParseTypeList(p, &types, &nt)) {
    ok = false;
    goto done;
  }
  fzOpStateAddAttrDict(st, attrs);
  /* Copy the operand types: one type stands for all operands. */
  if (n > 8 && !(operandTypes = fzMalloc(ctx, n * sizeof *operandTypes))) {
    ok = false;
    goto done;
  }
  if (nt == 1) {
    for (size_t i = 0; i < n; ++i)
      operandTypes[i] = types[0];
  } else if (nt == n) {
    for (size_t i = 0; i < n; ++i)
      operandTypes[i] = types[i];
  } else {
    ok = fzAsmEmitErrorAt(p, loc,
                          "%zu operands but %zu types (give one "
                          "type for all, or one per operand)",
                          n, nt);
    goto done;
  }
  FzType *single = nt == 1 ? types[0] : NULL;
  /* Without `->`, an op of a variable number of results (layer_norm) has
   * its first one. */
  bool one_result =
      def->numResults == 1 || def->numResults == FZ_VARIADIC;
  if (fzAsmParseOptionalPunct(p, "->")) {
    if (!fzAsmParseArrowTypeList(p, &results, &nr)) {
      ok = false;
      goto done;
    }
    fzOpStateAddResults(st, nr, results);
  } else if (single && n > 0 && one_result) {
    /* `: T` alone: the result type is inferred when the op can (it equals
     * T for elementwise ops); otherwise it is T. */
    FzType *out[4] = {NULL, NULL, NULL, NULL};
    FzGraphDiag d = {ctx, loc, def->name, false};
    FzGraphAttrs a = {state_props(ctx, st), attrs};
    if (!info->shape(&d, n, operandTypes, &a, out)) {
      ok = false;
      goto done;
    }
    FzType *rt = out[0] ? out[0] : single;
    fzOpStateAddResults(st, 1, &rt);
  } else if (one_result) {
    FzType *out[4] = {NULL, NULL, NULL, NULL};
    FzGraphDiag d = {ctx, loc, def->name, false};
    FzGraphAttrs a = {state_props(ctx, st), attrs};
    if (!info->shape(&d, n, operandTypes, &a, out) ||
        !fzGraphRequireInferred(&d, out)) {
      ok = false;
      goto done;
    }
    fzOpStateAddResults(st, 1, &out[0]);
  }
  ok = fzAsmResolveOperands(p, opsCopy, n, operandTypes, n, loc, st);
done:
  if (opsCopy != small)
    fzFree(ctx, opsCopy);
  if (operandTypes != small_types)
    fzFree(ctx, operandTypes);
  return ok;
}

/*===--- The generic verifier ------------------------------------------===*/

bool fzGraphVerify(FzOp *op) {
  FzContext *ctx = fzOpGetContext(op);
  const FzGraphOpInfo *info = fzGraphOpInfo(fzOpGetDef(op));
  FzGraphDiag d = fzGraphDiagForOp(op);
  if (!info)
    return true;
  size_t n = fzOpGetNumOperands(op), r = fzOpGetNumResults(op);
  FzType *small[8];
  FzType **in = n <= 8 ? small : fzMalloc(ctx, n * sizeof *in);
  if (!in)
    return false;
  for (size_t i = 0; i < n; ++i)
    in[i] = operand_type(op, i);
  FzType *out[4] = {NULL, NULL, NULL, NULL};
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  bool ok = r <= 4;
  if (!ok)
    fzGraphError(&d, "has %zu results; graph ops have at most 4", r);
  if (ok && info->shape)
    ok = info->shape(&d, n, in, &a, out);
  for (size_t i = 0; ok && i < r; ++i)
    ok =
        fzGraphCheckResult(&d, i, fzValueGetType(fzOpGetResult(op, i)), out[i]);
  if (ok && n > 0 && (info->flags & (G_FLOAT_ONLY | G_BOOL_ONLY))) {
    FzType *elt = fzShapedTypeGetElementType(in[0]);
    char buf[128];
    if ((info->flags & G_FLOAT_ONLY) && !fzTypeIsFloat(elt))
      ok = fzGraphError(&d,
                        "operand #0 must be a tensor of floats, but "
                        "got '%s'",
                        fzGraphTypeStr(in[0], buf, sizeof buf));
    if ((info->flags & G_BOOL_ONLY) && fzTypeGetBitWidth(elt) != 1)
      ok = fzGraphError(&d,
                        "operand #0 must be a tensor of i1, but got "
                        "'%s'",
                        fzGraphTypeStr(in[0], buf, sizeof buf));
  }
  if (ok && info->check)
    ok = info->check(op, &d);
  if (in != small)
    fzFree(ctx, in);
  return ok;
}

/* dialects/builtin/func.c - the func dialect: func.func, func.return,
 * func.call, func.constant, func.call_indirect, with MLIR's custom forms:
 *
 *   func.func @f(%arg0: tensor<4xf32>, %arg1: f32) -> tensor<4xf32> { ... }
 *   func.func private @decl(f32) -> (f32, i32)
 *   return %0 : tensor<4xf32>
 *   %r = call @f(%a, %b) : (tensor<4xf32>, f32) -> tensor<4xf32>
 *   %f = constant @f : (tensor<4xf32>, f32) -> tensor<4xf32>
 *   %r = call_indirect %f(%a, %b) : (tensor<4xf32>, f32) -> tensor<4xf32>
 *
 * The signature lives in the `function_type` property; the name in
 * `sym_name`; a declaration (no body) must be private, as in MLIR.
 */
#include "fz/dialects.h"

#include <stdio.h>
#include <string.h>

#include "ir/util.h"

/*===--- func.func ------------------------------------------------------===*/

static const char *const func_inherent[] = {
    "sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs",
    NULL};

static FzType *func_type(const FzOp *op) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("function_type"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_TYPE)
    return NULL;
  FzType *t = fzTypeAttrGetValue(a);
  return fzTypeGetKind(t) == FZ_TYPE_FUNCTION ? t : NULL;
}

static FzStringRef func_name(const FzOp *op) {
  FzStringRef s = fzSymbolGetName(op);
  if (!s.data)
    s = FZ_STR("<unnamed>");
  return s;
}

/* arg_attrs / res_attrs, as MLIR's function interface checks them: an
 * array of one dictionary per argument (result), holding only dialect
 * attributes (names with a '.'). */
static bool verify_attr_array(FzOp *op, const char *key, const char *what,
                              size_t expected) {
  FzAttr *a = fzOpGetInherentAttr(op, fzStringRefFromCString(key));
  if (!a)
    return true;
  bool ok = fzAttrGetKind(a) == FZ_ATTR_ARRAY;
  size_t n = ok ? fzArrayAttrGetSize(a) : 0;
  for (size_t i = 0; ok && i < n; ++i)
    ok = fzAttrGetKind(fzArrayAttrGetElement(a, i)) == FZ_ATTR_DICT;
  if (!ok)
    return fzOpEmitError(op, "attribute '%s' failed to satisfy constraint: "
                             "Array of dictionary attributes", key);
  if (n != expected)
    return fzOpEmitError(op, "expects %s attribute array to have the same "
                             "number of elements as the number of function "
                             "%ss, got %zu, but expected %zu",
                         what, what, n, expected);
  for (size_t i = 0; i < n; ++i) {
    FzAttr *d = fzArrayAttrGetElement(a, i);
    for (size_t k = 0; k < fzDictAttrGetSize(d); ++k) {
      FzStringRef name = fzIdentGetString(fzDictAttrGetEntry(d, k).name);
      if (!memchr(name.data, '.', name.length))
        return fzOpEmitError(op, "%ss may only have dialect attributes",
                             what);
    }
  }
  return true;
}

static bool func_verify(FzOp *op) {
  FzAttr *name = fzOpGetInherentAttr(op, FZ_STR("sym_name"));
  if (!name || fzAttrGetKind(name) != FZ_ATTR_STRING)
    return fzOpEmitError(op, "requires string attribute 'sym_name'");
  FzType *ft = func_type(op);
  if (!ft)
    return fzOpEmitError(op, "requires attribute 'function_type' holding a "
                             "function type");
  FzAttr *vis = fzOpGetInherentAttr(op, FZ_STR("sym_visibility"));
  if (vis && fzAttrGetKind(vis) != FZ_ATTR_STRING)
    return fzOpEmitError(op, "requires 'sym_visibility' to be a string");
  size_t nIn = fzFunctionTypeGetNumInputs(ft);
  if (!verify_attr_array(op, "arg_attrs", "argument", nIn) ||
      !verify_attr_array(op, "res_attrs", "result",
                         fzFunctionTypeGetNumResults(ft)))
    return false;
  FzRegion *body = fzOpGetRegion(op, 0);
  FzBlock *entry = fzRegionGetFirstBlock(body);
  if (!entry) {
    /* Declarations may be private or nested, never public (the
     * default), as in MLIR. */
    bool isPublic = !vis || fzStringRefEqual(fzStringAttrGetValue(vis),
                                             FZ_STR("public"));
    if (isPublic)
      return fzOpEmitError(op, "symbol declaration cannot have public "
                               "visibility");
    return true;
  }
  if (fzBlockGetNumArguments(entry) != nIn)
    return fzOpEmitError(op, "entry block must have %zu arguments to match "
                             "function signature", nIn);
  for (size_t i = 0; i < nIn; ++i) {
    FzType *at = fzValueGetType(fzBlockGetArgument(entry, i));
    FzType *st = fzFunctionTypeGetInput(ft, i);
    if (at != st) {
      FzDiagnostic *d = fzOpDiagBegin(op, FZ_SEVERITY_ERROR,
                                      "type of entry block argument #%zu "
                                      "does not match the function "
                                      "signature", i);
      fzDiagReport(d);
      return false;
    }
  }
  return true;
}

static void func_print(FzOp *op, FzAsmPrinter *p) {
  FzType *ft = func_type(op);
  FzAttr *vis = fzOpGetInherentAttr(op, FZ_STR("sym_visibility"));
  if (vis && fzAttrGetKind(vis) == FZ_ATTR_STRING) {
    FzStringRef v = fzStringAttrGetValue(vis);
    fzAsmPrint(p, " ");
    fzAsmPrintString(p, v);
  }
  fzAsmPrint(p, " ");
  fzAsmPrintSymbolName(p, func_name(op));
  FzRegion *body = fzOpGetRegion(op, 0);
  FzBlock *entry = fzRegionGetFirstBlock(body);
  FzAttr *argAttrs = fzOpGetInherentAttr(op, FZ_STR("arg_attrs"));
  size_t nIn = ft ? fzFunctionTypeGetNumInputs(ft) : 0;
  fzAsmPrint(p, "(");
  for (size_t i = 0; i < nIn; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    /* MLIR's order: "%arg0: type {attrs} loc(...)". */
    FzValue *arg = entry && i < fzBlockGetNumArguments(entry)
                       ? fzBlockGetArgument(entry, i)
                       : NULL;
    if (arg) {
      fzAsmPrintOperand(p, arg);
      fzAsmPrint(p, ": ");
    }
    fzAsmPrintType(p, fzFunctionTypeGetInput(ft, i));
    if (argAttrs && fzAttrGetKind(argAttrs) == FZ_ATTR_ARRAY &&
        i < fzArrayAttrGetSize(argAttrs))
      fzAsmPrintOptionalAttrDict(p, fzArrayAttrGetElement(argAttrs, i), NULL,
                                 false);
    if (arg)
      fzAsmPrintOptionalLoc(p, fzValueGetLoc(arg));
  }
  fzAsmPrint(p, ")");
  size_t nOut = ft ? fzFunctionTypeGetNumResults(ft) : 0;
  FzAttr *resAttrs = fzOpGetInherentAttr(op, FZ_STR("res_attrs"));
  if (resAttrs && (fzAttrGetKind(resAttrs) != FZ_ATTR_ARRAY ||
                   fzArrayAttrGetSize(resAttrs) != nOut))
    resAttrs = NULL; /* invalid: the verifier says so */
  bool anyResAttrs = false;
  for (size_t i = 0; resAttrs && i < nOut; ++i) {
    FzAttr *d = fzArrayAttrGetElement(resAttrs, i);
    anyResAttrs |= fzAttrGetKind(d) == FZ_ATTR_DICT &&
                   fzDictAttrGetSize(d) > 0;
  }
  if (nOut) {
    /* One plain result prints bare; several, a function type or result
     * attributes in parentheses (MLIR's rule, which keeps the arrow
     * unambiguous). */
    bool parens = nOut != 1 || anyResAttrs ||
                  fzTypeGetKind(fzFunctionTypeGetResult(ft, 0)) ==
                      FZ_TYPE_FUNCTION;
    fzAsmPrint(p, parens ? " -> (" : " -> ");
    for (size_t i = 0; i < nOut; ++i) {
      if (i)
        fzAsmPrint(p, ", ");
      fzAsmPrintType(p, fzFunctionTypeGetResult(ft, i));
      if (anyResAttrs)
        fzAsmPrintOptionalAttrDict(p, fzArrayAttrGetElement(resAttrs, i),
                                   NULL, false);
    }
    if (parens)
      fzAsmPrint(p, ")");
  }
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, true);
  if (entry)
    fzAsmPrintRegion(p, body, false);
}

/* Grows the three parallel signature arrays of func_parse. */
typedef struct SigArgs {
  FzContext *ctx;
  FzAsmArgument *args;
  FzType **types;
  FzAttr **attrs;
  size_t n, cap;
} SigArgs;

static bool sig_push(SigArgs *s, const FzAsmArgument *arg, FzType *type,
                     FzAttr *attrs) {
  if (s->n == s->cap) {
    size_t c = s->cap ? s->cap * 2 : 8;
    FzAsmArgument *a = fzRealloc(s->ctx, s->args, c * sizeof *a);
    if (a)
      s->args = a;
    FzType **t = fzRealloc(s->ctx, s->types, c * sizeof *t);
    if (t)
      s->types = t;
    FzAttr **d = fzRealloc(s->ctx, s->attrs, c * sizeof *d);
    if (d)
      s->attrs = d;
    if (!a || !t || !d)
      return false;
    s->cap = c;
  }
  if (arg)
    s->args[s->n] = *arg;
  else
    memset(&s->args[s->n], 0, sizeof s->args[0]);
  s->types[s->n] = type;
  s->attrs[s->n] = attrs;
  s->n++;
  return true;
}

static void sig_free(SigArgs *s) {
  fzFree(s->ctx, s->args);
  fzFree(s->ctx, s->types);
  fzFree(s->ctx, s->attrs);
}

/* func-signature ::= `(` (arg (`,` arg)*)? `)` (`->` result-types)?
 * arg ::= ssa-name `:` type attr-dict? loc?      (a definition)
 *       | type attr-dict?                        (a declaration)     */
static bool parse_signature(FzAsmParser *p, SigArgs *sig, bool *named,
                            bool *anyArgAttrs) {
  FzContext *ctx = fzAsmParserGetContext(p);
  if (!fzAsmParsePunct(p, "("))
    return false;
  if (fzAsmParseOptionalPunct(p, ")"))
    return true;
  do {
    FzAsmArgument arg;
    bool present = false;
    memset(&arg, 0, sizeof arg);
    if (!fzAsmParseOptionalArgument(p, &arg, true, &present))
      return false;
    if (sig->n > 0 && present != *named)
      return fzAsmEmitError(p, "expected all arguments to be named or all "
                               "to be types");
    *named = present;
    FzType *type = arg.type;
    FzAttr *attrs = arg.attrs;
    if (!present) {
      if (!fzAsmParseType(p, &type) ||
          !fzAsmParseOptionalAttrDict(p, &attrs))
        return false;
    }
    if (!attrs)
      attrs = fzDictAttrGet(ctx, 0, NULL, NULL);
    else if (fzDictAttrGetSize(attrs) > 0)
      *anyArgAttrs = true;
    if (!sig_push(sig, present ? &arg : NULL, type, attrs))
      return fzAsmEmitError(p, "out of memory");
  } while (fzAsmParseOptionalPunct(p, ","));
  return fzAsmParsePunct(p, ")");
}

/* function-result-list ::= non-function-type
 *                        | `(` (type attr-dict? (`,` type attr-dict?)*)? `)`
 * after the arrow; pushes each result type and its attributes (an empty
 * dictionary when none) on res. */
static bool parse_results(FzAsmParser *p, SigArgs *res, bool *anyResAttrs) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzType *type;
  if (!fzAsmParseOptionalPunct(p, "(")) {
    if (!fzAsmParseType(p, &type))
      return false;
    return sig_push(res, NULL, type, fzDictAttrGet(ctx, 0, NULL, NULL)) ||
           fzAsmEmitError(p, "out of memory");
  }
  if (fzAsmParseOptionalPunct(p, ")"))
    return true;
  do {
    FzAttr *attrs = NULL;
    if (!fzAsmParseType(p, &type) || !fzAsmParseOptionalAttrDict(p, &attrs))
      return false;
    if (!attrs)
      attrs = fzDictAttrGet(ctx, 0, NULL, NULL);
    else if (fzDictAttrGetSize(attrs) > 0)
      *anyResAttrs = true;
    if (!sig_push(res, NULL, type, attrs))
      return fzAsmEmitError(p, "out of memory");
  } while (fzAsmParseOptionalPunct(p, ","));
  return fzAsmParsePunct(p, ")");
}

static bool func_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzStringRef vis;
  if (fzAsmParseOptionalIdentifier(p, &vis)) {
    if (!fzStringRefEqual(vis, FZ_STR("private")) &&
        !fzStringRefEqual(vis, FZ_STR("public")) &&
        !fzStringRefEqual(vis, FZ_STR("nested")))
      return fzAsmEmitError(p, "expected 'private', 'public' or 'nested' "
                               "visibility");
    fzOpStateAddProp(st, FZ_STR("sym_visibility"), fzStringAttrGet(ctx, vis));
  }
  FzStringRef name;
  if (!fzAsmParseSymbolName(p, &name))
    return false;
  fzOpStateAddProp(st, FZ_STR("sym_name"), fzStringAttrGet(ctx, name));

  SigArgs sig = {ctx, NULL, NULL, NULL, 0, 0};
  SigArgs res = {ctx, NULL, NULL, NULL, 0, 0};
  bool named = false, anyArgAttrs = false, anyResAttrs = false;
  bool ok = parse_signature(p, &sig, &named, &anyArgAttrs);
  if (ok && fzAsmParseOptionalPunct(p, "->"))
    ok = parse_results(p, &res, &anyResAttrs);
  FzAttr *attrs = NULL;
  if (ok)
    ok = fzAsmParseOptionalAttrDictWithKeyword(p, &attrs);
  if (ok) {
    fzOpStateAddAttrDict(st, attrs);
    FzType *ft = fzFunctionTypeGet(ctx, sig.n, sig.types, res.n, res.types);
    ok = ft != NULL;
    if (ok)
      fzOpStateAddProp(st, FZ_STR("function_type"), fzTypeAttrGet(ctx, ft));
    if (ok && anyArgAttrs)
      fzOpStateAddProp(st, FZ_STR("arg_attrs"),
                       fzArrayAttrGet(ctx, sig.n, sig.attrs));
    if (ok && anyResAttrs)
      fzOpStateAddProp(st, FZ_STR("res_attrs"),
                       fzArrayAttrGet(ctx, res.n, res.attrs));
  }
  FzRegion *body = ok ? fzOpStateAddRegion(st) : NULL;
  if (ok && body) {
    bool present = false;
    /* With unnamed arguments, `func.func @f(i32) { ^bb0(%a: i32): ...}`
     * names them in the entry block's label, as in MLIR; the verifier
     * checks that the label's arguments match the signature. */
    ok = fzAsmParseOptionalRegion(p, body, named ? sig.n : 0, sig.args,
                                  named, &present);
  } else {
    ok = false;
  }
  sig_free(&sig);
  sig_free(&res);
  return ok;
}

static const FzOpDef func_func_def = {
    .name = "func.func",
    .summary = "a function with a body (or a private declaration)",
    .traits = FZ_TRAIT_ISOLATED_FROM_ABOVE | FZ_TRAIT_SYMBOL,
    .numOperands = 0,
    .numResults = 0,
    .numRegions = 1,
    .fusionKind = FZ_FUSION_OPAQUE,
    .inherentAttrs = func_inherent,
    .defaultDialect = "func",
    .verify = func_verify,
    .print = func_print,
    .parse = func_parse,
};

/*===--- func.return ----------------------------------------------------===*/

static bool return_verify(FzOp *op) {
  FzOp *parent = fzOpGetParentOp(op);
  if (!parent || fzOpGetDef(parent) != &func_func_def)
    return fzOpEmitError(op, "expects parent op 'func.func'");
  FzType *ft = func_type(parent);
  if (!ft)
    return true; /* the function reports its own error */
  size_t n = fzOpGetNumOperands(op);
  size_t nOut = fzFunctionTypeGetNumResults(ft);
  FzStringRef fname = func_name(parent);
  if (n != nOut)
    return fzOpEmitError(op, "has %zu operands, but enclosing function "
                             "(@%.*s) returns %zu", n, (int)fname.length,
                         fname.data, nOut);
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    if (v && fzValueGetType(v) != fzFunctionTypeGetResult(ft, i))
      return fzOpEmitError(op, "type of return operand %zu doesn't match "
                               "function result type in function @%.*s",
                           i, (int)fname.length, fname.data);
  }
  return true;
}

static void return_print(FzOp *op, FzAsmPrinter *p) {
  size_t n = fzOpGetNumOperands(op);
  if (n == 0)
    return;
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

static bool return_parse(FzAsmParser *p, FzOpState *st) {
  FzUnresolvedOperand *ops;
  size_t n;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseOperandList(p, &ops, &n))
    return false;
  if (n == 0)
    return true;
  FzType **types;
  size_t nt;
  if (!fzAsmParsePunct(p, ":") || !fzAsmParseTypeList(p, &types, &nt))
    return false;
  return fzAsmResolveOperands(p, ops, n, types, nt, loc, st);
}

static const FzOpDef func_return_def = {
    .name = "func.return",
    .summary = "returns values from a function",
    .traits = FZ_TRAIT_TERMINATOR | FZ_TRAIT_RETURN_LIKE | FZ_TRAIT_PURE,
    .numOperands = FZ_VARIADIC,
    .numResults = 0,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_OPAQUE,
    .verify = return_verify,
    .print = return_print,
    .parse = return_parse,
};

/*===--- func.call ------------------------------------------------------===*/

static const char *const call_inherent[] = {"callee", NULL};

static bool call_verify(FzOp *op) {
  FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("callee"));
  if (!callee || fzAttrGetKind(callee) != FZ_ATTR_SYMBOL_REF)
    return fzOpEmitError(op, "requires a 'callee' symbol reference");
  FzStringRef name = fzSymbolRefAttrGetRoot(callee);
  FzOp *table = fzSymbolTableGetNearest(fzOpGetParentOp(op));
  FzOp *fn = table && fzSymbolRefAttrGetNumNested(callee) == 0
                 ? fzSymbolTableLookupIn(table, name)
                 : NULL;
  if (!fn || fzOpGetDef(fn) != &func_func_def)
    return fzOpEmitError(op, "'%.*s' does not reference a valid function",
                         (int)name.length, name.data);
  FzType *ft = func_type(fn);
  if (!ft)
    return true;
  size_t n = fzOpGetNumOperands(op);
  if (n != fzFunctionTypeGetNumInputs(ft))
    return fzOpEmitError(op, "incorrect number of operands for callee");
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    if (v && fzValueGetType(v) != fzFunctionTypeGetInput(ft, i))
      return fzOpEmitError(op, "operand type mismatch for operand number "
                               "%zu", i);
  }
  size_t r = fzOpGetNumResults(op);
  if (r != fzFunctionTypeGetNumResults(ft))
    return fzOpEmitError(op, "incorrect number of results for callee");
  for (size_t i = 0; i < r; ++i)
    if (fzValueGetType(fzOpGetResult(op, i)) !=
        fzFunctionTypeGetResult(ft, i))
      return fzOpEmitError(op, "result type mismatch at index %zu", i);
  return true;
}

static const char *const call_elided[] = {"callee", NULL};

static void call_print(FzOp *op, FzAsmPrinter *p) {
  FzAttr *callee = fzOpGetInherentAttr(op, FZ_STR("callee"));
  fzAsmPrint(p, " ");
  if (callee)
    fzAsmPrintAttr(p, callee);
  fzAsmPrint(p, "(");
  fzAsmPrintOperands(p, op);
  fzAsmPrint(p, ")");
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), call_elided, false);
  fzAsmPrint(p, " : (");
  size_t n = fzOpGetNumOperands(op);
  for (size_t i = 0; i < n; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    FzValue *v = fzOpGetOperand(op, i);
    fzAsmPrintType(p, v ? fzValueGetType(v) : NULL);
  }
  fzAsmPrint(p, ") -> ");
  size_t r = fzOpGetNumResults(op);
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

/* What func.call and func.call_indirect parse after their operand list:
 * `attr-dict : (ins) -> outs`; the n operands resolve to the inputs (after
 * the callee value, when callee is not NULL), the results are the
 * outputs. */
static bool parse_call_tail(FzAsmParser *p, FzOpState *st, FzLoc *loc,
                            const FzUnresolvedOperand *callee,
                            FzUnresolvedOperand *ops, size_t n) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzAttr *attrs = NULL;
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  FzType *ft;
  if (!fzAsmParseColonType(p, &ft))
    return false;
  if (fzTypeGetKind(ft) != FZ_TYPE_FUNCTION)
    return fzAsmEmitErrorAt(p, loc, "expected a function type");
  size_t nIn = fzFunctionTypeGetNumInputs(ft);
  FzType *small[16];
  FzType **ins = nIn <= 16 ? small : fzCalloc(ctx, nIn, sizeof *ins);
  if (!ins)
    return false;
  for (size_t i = 0; i < nIn; ++i)
    ins[i] = fzFunctionTypeGetInput(ft, i);
  bool ok = (!callee || fzAsmResolveOperand(p, callee, ft, st)) &&
            fzAsmResolveOperands(p, ops, n, ins, nIn, loc, st);
  if (ins != small)
    fzFree(ctx, ins);
  for (size_t i = 0; ok && i < fzFunctionTypeGetNumResults(ft); ++i) {
    FzType *t = fzFunctionTypeGetResult(ft, i);
    fzOpStateAddResults(st, 1, &t);
  }
  return ok;
}

static bool call_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzStringRef name;
  if (!fzAsmParseSymbolName(p, &name))
    return false;
  fzOpStateAddProp(st, FZ_STR("callee"),
                   fzSymbolRefAttrGet(ctx, name, 0, NULL));
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand *ops;
  size_t n;
  if (!fzAsmParsePunct(p, "(") || !fzAsmParseOperandList(p, &ops, &n) ||
      !fzAsmParsePunct(p, ")"))
    return false;
  return parse_call_tail(p, st, loc, NULL, ops, n);
}

static const FzOpDef func_call_def = {
    .name = "func.call",
    .summary = "calls a function by symbol",
    .traits = 0,
    .numOperands = FZ_VARIADIC,
    .numResults = FZ_VARIADIC,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_OPAQUE,
    .inherentAttrs = call_inherent,
    .verify = call_verify,
    .print = call_print,
    .parse = call_parse,
};

/*===--- func.constant --------------------------------------------------===*/

/* `%f = func.constant @name : type`: the function @name as a value. */

static const char *const constant_inherent[] = {"value", NULL};

static bool constant_verify(FzOp *op) {
  FzAttr *value = fzOpGetInherentAttr(op, FZ_STR("value"));
  if (!value || fzAttrGetKind(value) != FZ_ATTR_SYMBOL_REF ||
      fzSymbolRefAttrGetNumNested(value) != 0)
    return fzOpEmitError(op, "requires attribute 'value' holding a flat "
                             "symbol reference");
  FzStringRef name = fzSymbolRefAttrGetRoot(value);
  FzOp *table = fzSymbolTableGetNearest(fzOpGetParentOp(op));
  FzOp *fn = table ? fzSymbolTableLookupIn(table, name) : NULL;
  if (!fn || fzOpGetDef(fn) != &func_func_def)
    return fzOpEmitError(op, "reference to undefined function '%.*s'",
                         (int)name.length, name.data);
  if (func_type(fn) != fzValueGetType(fzOpGetResult(op, 0)))
    return fzOpEmitError(op, "reference to function with mismatched type");
  return true;
}

static const char *const constant_elided[] = {"value", NULL};

/* MLIR's order: `constant {attrs} @f : type`. */
static void constant_print(FzOp *op, FzAsmPrinter *p) {
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), constant_elided, false);
  FzAttr *value = fzOpGetInherentAttr(op, FZ_STR("value"));
  fzAsmPrint(p, " ");
  if (value)
    fzAsmPrintAttr(p, value);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzValueGetType(fzOpGetResult(op, 0)));
}

static bool constant_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzAttr *attrs = NULL;
  FzStringRef name;
  FzType *type;
  if (!fzAsmParseOptionalAttrDict(p, &attrs) ||
      !fzAsmParseSymbolName(p, &name) || !fzAsmParseColonType(p, &type))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddProp(st, FZ_STR("value"),
                   fzSymbolRefAttrGet(ctx, name, 0, NULL));
  fzOpStateAddResults(st, 1, &type);
  return true;
}

static const FzOpDef func_constant_def = {
    .name = "func.constant",
    .summary = "a function, by symbol, as a value",
    .traits = FZ_TRAIT_PURE,
    .numOperands = 0,
    .numResults = 1,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_OPAQUE,
    .inherentAttrs = constant_inherent,
    .verify = constant_verify,
    .print = constant_print,
    .parse = constant_parse,
};

/*===--- func.call_indirect -----------------------------------------------===*/

/* `%r = func.call_indirect %f(%a, %b) : (A, B) -> R`: a call through a
 * function value (operand 0). */

static void type_str(const FzType *t, char *buf, size_t cap) {
  size_t len = 0;
  FILE *f = fmemopen(buf, cap, "w");
  if (f) {
    fzTypeDump(t, f);
    len = (size_t)ftell(f);
    fclose(f);
  }
  buf[len < cap ? len : cap - 1] = 0;
}

static bool call_indirect_verify(FzOp *op) {
  size_t n = fzOpGetNumOperands(op);
  if (n == 0)
    return fzOpEmitError(op, "expected 1 or more operands, but found 0");
  FzType *ft = fzValueGetType(fzOpGetOperand(op, 0));
  if (fzTypeGetKind(ft) != FZ_TYPE_FUNCTION) {
    char buf[128];
    type_str(ft, buf, sizeof buf);
    return fzOpEmitError(op, "operand #0 must be function type, but got "
                             "'%s'", buf);
  }
  bool inputsMatch = fzFunctionTypeGetNumInputs(ft) == n - 1;
  for (size_t i = 1; inputsMatch && i < n; ++i)
    inputsMatch = fzValueGetType(fzOpGetOperand(op, i)) ==
                  fzFunctionTypeGetInput(ft, i - 1);
  if (!inputsMatch)
    return fzOpEmitError(op, "failed to verify that callee input types "
                             "match argument types");
  size_t r = fzOpGetNumResults(op);
  bool resultsMatch = fzFunctionTypeGetNumResults(ft) == r;
  for (size_t i = 0; resultsMatch && i < r; ++i)
    resultsMatch = fzValueGetType(fzOpGetResult(op, i)) ==
                   fzFunctionTypeGetResult(ft, i);
  if (!resultsMatch)
    return fzOpEmitError(op, "failed to verify that callee result types "
                             "match result types");
  return true;
}

static void call_indirect_print(FzOp *op, FzAsmPrinter *p) {
  size_t n = fzOpGetNumOperands(op);
  fzAsmPrint(p, " ");
  fzAsmPrintOperand(p, n ? fzOpGetOperand(op, 0) : NULL);
  fzAsmPrint(p, "(");
  for (size_t i = 1; i < n; ++i) {
    if (i > 1)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, i));
  }
  fzAsmPrint(p, ")");
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, n ? fzValueGetType(fzOpGetOperand(op, 0)) : NULL);
}

static bool call_indirect_parse(FzAsmParser *p, FzOpState *st) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand callee;
  FzUnresolvedOperand *args;
  size_t n;
  if (!fzAsmParseOperand(p, &callee) || !fzAsmParsePunct(p, "(") ||
      !fzAsmParseOperandList(p, &args, &n) || !fzAsmParsePunct(p, ")"))
    return false;
  return parse_call_tail(p, st, loc, &callee, args, n);
}

static const FzOpDef func_call_indirect_def = {
    .name = "func.call_indirect",
    .summary = "calls a function value",
    .traits = 0,
    .numOperands = FZ_VARIADIC,
    .numResults = FZ_VARIADIC,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_OPAQUE,
    .verify = call_indirect_verify,
    .print = call_indirect_print,
    .parse = call_indirect_parse,
};

static const FzOpDef *const func_ops[] = {
    &func_func_def, &func_return_def, &func_call_def, &func_constant_def,
    &func_call_indirect_def};

static const FzDialectDef func_dialect = {
    .name = "func",
    .summary = "functions, calls and returns",
    .ops = func_ops,
    .numOps = sizeof func_ops / sizeof func_ops[0],
};

bool fzRegisterFuncDialect(FzContext *ctx) {
  return fzContextRegisterDialect(ctx, &func_dialect);
}

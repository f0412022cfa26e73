/* dialects/loop/ops_arith.c - scalar and vector arithmetic of the loop
 * dialect: the binary, unary, fma, compare and cast families, select,
 * constant and splat; their verifiers, custom assembly and folds.
 *
 * Custom forms (one type stands for every operand and the result):
 *   %r = loop.addf %a, %b : f32
 *   %r = loop.exp %a : vector<4xf32>
 *   %r = loop.fma %a, %b, %c : f32
 *   %r = loop.dot4 %acc, %a, %b : vector<16xi32>
 *   %r = loop.cmpf olt, %a, %b : f32            (result i1)
 *   %r = loop.select %c, %a, %b : f32           (%c: i1 or i1 lanes)
 *   %r = loop.extf %a : bf16 to f32
 *   %c = loop.constant 1.000000e+00 : f32       (the attribute)
 *   %v = loop.splat %s : vector<4xf32>
 * Folds evaluate scalar ops whose operands are constants through
 * fzLoopEvalScalar (eval.c), the function the interpreter uses, and
 * apply integer identities (x+0, x*1, x*0, x-0, x/1) that index
 * arithmetic produces in bulk.
 */
#include <string.h>

#include "dialects/loop/loop_internal.h"

static const char *const kCmpFNames[FZ_LOOP_CMPF_NUM] = {
    "oeq", "one", "olt", "ole", "ogt", "oge", "ueq",
    "une", "ult", "ule", "ugt", "uge", "ord", "uno"};
static const char *const kCmpINames[FZ_LOOP_CMPI_NUM] = {
    "eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"};

const char *fzLoopCmpPredicateName(bool isFloat, int pred) {
  if (pred < 0)
    return NULL;
  if (isFloat)
    return pred < FZ_LOOP_CMPF_NUM ? kCmpFNames[pred] : NULL;
  return pred < FZ_LOOP_CMPI_NUM ? kCmpINames[pred] : NULL;
}

static int predicate_from_name(bool isFloat, FzStringRef s) {
  size_t n = isFloat ? FZ_LOOP_CMPF_NUM : FZ_LOOP_CMPI_NUM;
  const char *const *names = isFloat ? kCmpFNames : kCmpINames;
  for (size_t i = 0; i < n; ++i)
    if (fzStringRefEqual(s, fzStringRefFromCString(names[i])))
      return (int)i;
  return -1;
}

int fzLoopCmpGetPredicate(const FzOp *op) {
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  if (opc != FZ_LOOP_OP_CMPF && opc != FZ_LOOP_OP_CMPI)
    return -1;
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("predicate"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_STRING)
    return -1;
  return predicate_from_name(opc == FZ_LOOP_OP_CMPF, fzStringAttrGetValue(a));
}

static const FzLoopOpInfo *info_of(const FzOpDef *def) {
  return def ? (const FzLoopOpInfo *)def->extra : NULL;
}

/*===--- Verification ---------------------------------------------------===*/

typedef struct StrSink {
  char *buf;
  size_t cap, len;
} StrSink;

static void sink_cb(FzStringRef chunk, void *ud) {
  StrSink *s = ud;
  for (size_t i = 0; i < chunk.length && s->len + 1 < s->cap; ++i)
    s->buf[s->len++] = chunk.data[i];
  s->buf[s->len] = '\0';
}

static const char *tstr(const FzType *t, char *buf, size_t cap) {
  StrSink s = {buf, cap, 0};
  buf[0] = '\0';
  if (t)
    fzTypePrint(t, sink_cb, &s);
  else
    snprintf(buf, cap, "<null>");
  return buf;
}

static bool all_same_type(FzOp *op, FzType *t) {
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
    if (fzLoopOperandType(op, i) != t)
      return false;
  return true;
}

static bool verify_cast(FzOp *op, FzLoopOpcode opc) {
  FzType *from = fzLoopOperandType(op, 0), *to = fzLoopResultType(op, 0);
  char b1[64], b2[64];
  if (!fzLoopIsScalarOrVector(from) || !fzLoopIsScalarOrVector(to) ||
      !fzLoopSameLanes(from, to))
    return fzOpEmitError(op, "expects scalar (or vector) operand and result "
                             "with the same lanes, got '%s' to '%s'",
                         tstr(from, b1, sizeof b1), tstr(to, b2, sizeof b2));
  FzType *f = fzLoopScalarOf(from), *t = fzLoopScalarOf(to);
  unsigned wf = fzTypeGetBitWidth(f), wt = fzTypeGetBitWidth(t);
  bool fF = fzTypeIsFloat(f), tF = fzTypeIsFloat(t);
  bool fI = fzTypeIsInteger(f), tI = fzTypeIsInteger(t);
  bool fX = fzTypeGetKind(f) == FZ_TYPE_INDEX,
       tX = fzTypeGetKind(t) == FZ_TYPE_INDEX;
  bool ok;
  const char *rule;
  switch (opc) {
  case FZ_LOOP_OP_EXTF:
    ok = fF && tF && wt > wf, rule = "a float to a wider float";
    break;
  case FZ_LOOP_OP_TRUNCF:
    ok = fF && tF && wt < wf, rule = "a float to a narrower float";
    break;
  case FZ_LOOP_OP_SITOFP:
  case FZ_LOOP_OP_UITOFP:
    ok = fI && tF, rule = "an integer to a float";
    break;
  case FZ_LOOP_OP_FPTOSI:
    ok = fF && tI, rule = "a float to an integer";
    break;
  case FZ_LOOP_OP_EXTSI:
  case FZ_LOOP_OP_EXTUI:
    ok = fI && tI && wt > wf, rule = "an integer to a wider integer";
    break;
  case FZ_LOOP_OP_TRUNCI:
    ok = fI && tI && wt < wf, rule = "an integer to a narrower integer";
    break;
  case FZ_LOOP_OP_INDEX_CAST:
    ok = (fX && tI) || (fI && tX), rule = "between index and an integer";
    break;
  case FZ_LOOP_OP_BITCAST:
    ok = !fX && !tX && wf == wt && f != t,
    rule = "between distinct types of the same bit width";
    break;
  default:
    ok = false, rule = "?";
  }
  if (!ok)
    return fzOpEmitError(op, "converts %s, not '%s' to '%s'", rule,
                         tstr(f, b1, sizeof b1), tstr(t, b2, sizeof b2));
  return true;
}

bool fzLoopVerifyElementwise(FzOp *op) {
  const FzLoopOpInfo *info = info_of(fzOpGetDef(op));
  FzType *t = fzLoopOperandType(op, 0), *r = fzLoopResultType(op, 0);
  char b1[64], b2[64];
  switch (info->family) {
  case FZ_LOOP_FAM_BINARY_F:
  case FZ_LOOP_FAM_UNARY_F:
  case FZ_LOOP_FAM_FMA:
    if (!fzLoopIsFloatLike(t))
      return fzOpEmitError(op, "expects float operands, got '%s'",
                           tstr(t, b1, sizeof b1));
    if (!all_same_type(op, t) || r != t)
      return fzOpEmitError(op, "expects every operand and the result to "
                               "have one type, got '%s' and '%s'",
                           tstr(t, b1, sizeof b1), tstr(r, b2, sizeof b2));
    return true;
  case FZ_LOOP_FAM_BINARY_I:
    if (!fzLoopIsIntLike(t))
      return fzOpEmitError(op, "expects integer or index operands, got '%s'",
                           tstr(t, b1, sizeof b1));
    if (!all_same_type(op, t) || r != t)
      return fzOpEmitError(op, "expects every operand and the result to "
                               "have one type, got '%s' and '%s'",
                           tstr(t, b1, sizeof b1), tstr(r, b2, sizeof b2));
    return true;
  case FZ_LOOP_FAM_DOT4: {
    FzType *e = fzTypeGetKind(t) == FZ_TYPE_VECTOR ? fzShapedTypeGetElementType(t) : t;
    if (fzTypeGetKind(e) != FZ_TYPE_INTEGER || fzTypeGetBitWidth(e) != 32)
      return fzOpEmitError(op, "expects i32 operands (or vectors of), got '%s'",
                           tstr(t, b1, sizeof b1));
    if (!all_same_type(op, t) || r != t)
      return fzOpEmitError(op, "expects every operand and the result to "
                               "have one type, got '%s' and '%s'",
                           tstr(t, b1, sizeof b1), tstr(r, b2, sizeof b2));
    return true;
  }
  case FZ_LOOP_FAM_CMP: {
    bool isF = info->opcode == FZ_LOOP_OP_CMPF;
    if (isF ? !fzLoopIsFloatLike(t) : !fzLoopIsIntLike(t))
      return fzOpEmitError(op, "expects %s operands, got '%s'",
                           isF ? "float" : "integer or index",
                           tstr(t, b1, sizeof b1));
    if (!all_same_type(op, t))
      return fzOpEmitError(op, "expects both operands to have one type");
    if (r != fzLoopBoolLike(fzOpGetContext(op), t))
      return fzOpEmitError(op, "result must be i1 (lane-wise for vectors), "
                               "got '%s'", tstr(r, b1, sizeof b1));
    FzAttr *pa = fzOpGetInherentAttr(op, FZ_STR("predicate"));
    if (!pa || fzAttrGetKind(pa) != FZ_ATTR_STRING)
      return fzOpEmitError(op, "requires string attribute 'predicate'");
    if (predicate_from_name(isF, fzStringAttrGetValue(pa)) < 0) {
      FzStringRef s = fzStringAttrGetValue(pa);
      return fzOpEmitError(op, "unknown predicate '%.*s'", (int)s.length,
                           s.data);
    }
    return true;
  }
  case FZ_LOOP_FAM_CAST:
    return verify_cast(op, info->opcode);
  default:
    return true;
  }
}

/*===--- Custom assembly ------------------------------------------------===*/

void fzLoopPrintElementwise(FzOp *op, FzAsmPrinter *p) {
  const FzLoopOpInfo *info = info_of(fzOpGetDef(op));
  static const char *const elided[] = {"predicate", NULL};
  fzAsmPrint(p, " ");
  if (info->family == FZ_LOOP_FAM_CMP) {
    FzAttr *pa = fzOpGetInherentAttr(op, FZ_STR("predicate"));
    if (pa && fzAttrGetKind(pa) == FZ_ATTR_STRING)
      fzAsmPrintString(p, fzStringAttrGetValue(pa));
    fzAsmPrint(p, ", ");
  }
  fzAsmPrintOperands(p, op);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzLoopOperandType(op, 0));
  if (info->family == FZ_LOOP_FAM_CAST) {
    fzAsmPrint(p, " to ");
    fzAsmPrintType(p, fzLoopResultType(op, 0));
  }
}

/* elementwise ::= (pred `,`)? operands attr-dict? `:` type (`to` type)? */
bool fzLoopParseElementwise(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  const FzOpDef *def =
      fzContextLookupOpDef(ctx, fzIdentGetString(st->name));
  const FzLoopOpInfo *info = info_of(def);
  if (!info)
    return fzAsmEmitError(p, "unknown loop op");
  if (info->family == FZ_LOOP_FAM_CMP) {
    FzStringRef kw;
    FzLoc *kwLoc = fzAsmParserGetCurrentLoc(p);
    if (!fzAsmParseOptionalIdentifier(p, &kw))
      return fzAsmEmitError(p, "expected a comparison predicate");
    bool isF = info->opcode == FZ_LOOP_OP_CMPF;
    if (predicate_from_name(isF, kw) < 0)
      return fzAsmEmitErrorAt(p, kwLoc, "unknown predicate '%.*s'",
                              (int)kw.length, kw.data);
    fzOpStateAddProp(st, FZ_STR("predicate"), fzStringAttrGet(ctx, kw));
    if (!fzAsmParsePunct(p, ","))
      return false;
  }
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand ops[3];
  size_t n;
  FzAttr *attrs;
  FzType *t, *r;
  if (!fzLoopParseOperands(p, ops, 3, &n) ||
      !fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseColonType(p, &t))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  r = t;
  if (info->family == FZ_LOOP_FAM_CAST) {
    if (!fzAsmParseKeyword(p, "to") || !fzAsmParseType(p, &r))
      return false;
  } else if (info->family == FZ_LOOP_FAM_CMP) {
    r = fzLoopBoolLike(ctx, t);
  }
  FzType *types[3] = {t, t, t};
  if (!fzAsmResolveOperands(p, ops, n, types, n, loc, st))
    return false;
  fzOpStateAddResults(st, 1, &r);
  return true;
}

/*===--- select ---------------------------------------------------------===*/

static bool select_verify(FzOp *op) {
  FzType *c = fzLoopOperandType(op, 0), *a = fzLoopOperandType(op, 1);
  char b1[64];
  if (!fzLoopIsScalarOrVector(a))
    return fzOpEmitError(op, "expects scalar or vector operands, got '%s'",
                         tstr(a, b1, sizeof b1));
  if (fzLoopOperandType(op, 2) != a || fzLoopResultType(op, 0) != a)
    return fzOpEmitError(op, "expects both choices and the result to have "
                             "one type");
  FzType *i1 = fzIntegerTypeGet(fzOpGetContext(op), 1);
  if (c != i1 && c != fzLoopBoolLike(fzOpGetContext(op), a))
    return fzOpEmitError(op, "condition must be i1 or have i1 lanes matching "
                             "the choices, got '%s'", tstr(c, b1, sizeof b1));
  return true;
}

/* %c, %a, %b : T   or   %c, %a, %b : C, T  (C not the i1 form of T) */
static void select_print(FzOp *op, FzAsmPrinter *p) {
  FzType *c = fzLoopOperandType(op, 0), *a = fzLoopOperandType(op, 1);
  fzAsmPrint(p, " ");
  fzAsmPrintOperands(p, op);
  fzLoopPrintAttrs(p, op);
  fzAsmPrint(p, " : ");
  if (c != fzLoopBoolLike(fzOpGetContext(op), a)) {
    fzAsmPrintType(p, c);
    fzAsmPrint(p, ", ");
  }
  fzAsmPrintType(p, a);
}

static bool select_parse(FzAsmParser *p, FzOpState *st) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand ops[3];
  size_t n, nt;
  FzAttr *attrs;
  FzType **tl;
  if (!fzLoopParseOperands(p, ops, 3, &n) ||
      !fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParsePunct(p, ":") ||
      !fzAsmParseTypeList(p, &tl, &nt))
    return false;
  if (nt > 2)
    return fzAsmEmitError(p, "expected one or two types");
  FzType *t = tl[nt - 1];
  FzType *c = nt == 2 ? tl[0] : fzLoopBoolLike(fzAsmParserGetContext(p), t);
  FzType *types[3] = {c, t, t};
  fzOpStateAddAttrDict(st, attrs);
  if (!fzAsmResolveOperands(p, ops, n, types, 3, loc, st))
    return false;
  fzOpStateAddResults(st, 1, &t);
  return true;
}

/*===--- constant -------------------------------------------------------===*/

static bool constant_verify(FzOp *op) {
  FzAttr *v = fzOpGetInherentAttr(op, FZ_STR("value"));
  FzType *r = fzLoopResultType(op, 0);
  char b1[64];
  if (!v)
    return fzOpEmitError(op, "requires attribute 'value'");
  if (!fzLoopIsScalarOrVector(r))
    return fzOpEmitError(op, "result must be a scalar or a vector, got '%s'",
                         tstr(r, b1, sizeof b1));
  FzAttrKind k = fzAttrGetKind(v);
  if (fzTypeGetKind(r) == FZ_TYPE_VECTOR) {
    if (k != FZ_ATTR_DENSE || !fzDenseAttrIsSplat(v) || fzAttrGetType(v) != r)
      return fzOpEmitError(op, "a vector constant must be a splat dense "
                               "attribute of the result type");
    return true;
  }
  if ((k != FZ_ATTR_INTEGER && k != FZ_ATTR_FLOAT && k != FZ_ATTR_BOOL) ||
      fzAttrGetType(v) != r)
    return fzOpEmitError(op, "'value' must be an integer or float attribute "
                             "of the result type '%s'",
                         tstr(r, b1, sizeof b1));
  return true;
}

static void constant_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"value", NULL};
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " ");
  fzAsmPrintAttr(p, fzOpGetInherentAttr(op, FZ_STR("value")));
}

static bool constant_parse(FzAsmParser *p, FzOpState *st) {
  FzAttr *attrs, *v;
  if (!fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseAttr(p, NULL, &v))
    return false;
  FzType *t = fzAttrGetType(v);
  if (!t)
    return fzAsmEmitError(p, "expected a typed integer, float or dense "
                             "attribute");
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddProp(st, FZ_STR("value"), v);
  fzOpStateAddResults(st, 1, &t);
  return true;
}

/*===--- splat ----------------------------------------------------------===*/

static bool splat_verify(FzOp *op) {
  FzType *r = fzLoopResultType(op, 0), *s = fzLoopOperandType(op, 0);
  if (!fzLoopIsScalarOrVector(r) || fzTypeGetKind(r) != FZ_TYPE_VECTOR ||
      fzShapedTypeGetElementType(r) != s)
    return fzOpEmitError(op, "result must be a vector of the operand's type");
  return true;
}

static void splat_print(FzOp *op, FzAsmPrinter *p) {
  fzAsmPrint(p, " ");
  fzAsmPrintOperands(p, op);
  fzLoopPrintAttrs(p, op);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzLoopResultType(op, 0));
}

static bool splat_parse(FzAsmParser *p, FzOpState *st) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand u;
  FzAttr *attrs;
  FzType *t;
  if (!fzAsmParseOperand(p, &u) || !fzAsmParseOptionalAttrDict(p, &attrs) ||
      !fzAsmParseColonType(p, &t))
    return false;
  if (fzTypeGetKind(t) != FZ_TYPE_VECTOR)
    return fzAsmEmitErrorAt(p, loc, "expected a vector type");
  FzType *e = fzShapedTypeGetElementType(t);
  fzOpStateAddAttrDict(st, attrs);
  if (!fzAsmResolveOperands(p, &u, 1, &e, 1, loc, st))
    return false;
  fzOpStateAddResults(st, 1, &t);
  return true;
}

/*===--- Folding --------------------------------------------------------===*/

static bool scalar_of_attr(const FzAttr *a, FzLoopScalar *out) {
  if (!a)
    return false;
  switch (fzAttrGetKind(a)) {
  case FZ_ATTR_INTEGER: out->i = fzIntegerAttrGetValue(a); return true;
  case FZ_ATTR_BOOL: out->i = fzBoolAttrGetValue(a); return true;
  case FZ_ATTR_FLOAT: out->f = fzFloatAttrGetValue(a); return true;
  default: return false;
  }
}

static FzAttr *attr_of_scalar(FzContext *ctx, FzType *t, FzLoopScalar v) {
  if (fzTypeIsFloat(t))
    return fzFloatAttrGet(ctx, t, v.f);
  return fzIntegerAttrGet(ctx, t, v.i);
}

static bool is_int_const(const FzAttr *a, int64_t v) {
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER &&
         fzIntegerAttrGetValue(a) == v;
}

/* x op c identities of integer arithmetic. */
static bool fold_identity(FzOp *op, FzLoopOpcode opc, FzAttr *const *c,
                          FzFoldResult *res) {
  FzValue *x = fzOpGetOperand(op, 0), *y = fzOpGetOperand(op, 1);
  switch (opc) {
  case FZ_LOOP_OP_ADDI:
    if (is_int_const(c[1], 0))
      return res->value = x, true;
    if (is_int_const(c[0], 0))
      return res->value = y, true;
    return false;
  case FZ_LOOP_OP_SUBI:
    return is_int_const(c[1], 0) ? (res->value = x, true) : false;
  case FZ_LOOP_OP_MULI:
    if (is_int_const(c[1], 1))
      return res->value = x, true;
    if (is_int_const(c[0], 1))
      return res->value = y, true;
    if (is_int_const(c[1], 0))
      return res->value = y, true;
    if (is_int_const(c[0], 0))
      return res->value = x, true;
    return false;
  case FZ_LOOP_OP_DIVSI:
    return is_int_const(c[1], 1) ? (res->value = x, true) : false;
  default:
    return false;
  }
}

bool fzLoopFoldArith(FzOp *op, FzAttr *const *constOperands,
                     FzFoldResult *results) {
  FzLoopOpcode opc = fzLoopGetOpcode(op);
  FzType *t = fzLoopResultType(op, 0);
  size_t n = fzOpGetNumOperands(op);
  if (!t || fzTypeGetKind(t) == FZ_TYPE_VECTOR || n > 3)
    return false;
  if (opc == FZ_LOOP_OP_SELECT && constOperands[0] &&
      fzAttrGetKind(constOperands[0]) != FZ_ATTR_DENSE) {
    FzLoopScalar c;
    if (scalar_of_attr(constOperands[0], &c)) {
      results[0].value = fzOpGetOperand(op, (c.i & 1) ? 1 : 2);
      return true;
    }
  }
  FzLoopScalar in[3];
  bool allConst = true;
  for (size_t i = 0; i < n; ++i)
    allConst = allConst && scalar_of_attr(constOperands[i], &in[i]);
  if (!allConst)
    return n == 2 && fold_identity(op, opc, constOperands, results);
  FzLoopScalar out;
  if (!fzLoopEvalScalar(opc, fzLoopCmpGetPredicate(op), t,
                        fzLoopOperandType(op, n == 3 ? 1 : 0), n, in, &out))
    return false;
  results[0].attr = attr_of_scalar(fzOpGetContext(op), t, out);
  return results[0].attr != NULL;
}

/*===--- The table ------------------------------------------------------===*/

static const char *const kPredicateAttr[] = {"predicate", NULL};
static const char *const kValueAttr[] = {"value", NULL};

#define ELEMENTWISE_OP(ID, NAME, FAM, NOPS, TRAITS, SUMMARY)                  \
  static const FzLoopOpInfo info_##ID = {FZ_LOOP_OP_##ID, FAM};              \
  const FzOpDef fzLoopOp_##ID = {                                             \
      .name = NAME,                                                           \
      .summary = SUMMARY,                                                     \
      .traits = FZ_TRAIT_PURE | FZ_TRAIT_ELEMENTWISE | (TRAITS),              \
      .numOperands = NOPS,                                                    \
      .numResults = 1,                                                        \
      .numRegions = 0,                                                        \
      .fusionKind = FZ_FUSION_ELEMENTWISE,                                    \
      .inherentAttrs = (FAM) == FZ_LOOP_FAM_CMP ? kPredicateAttr : NULL,      \
      .verify = fzLoopVerifyElementwise,                                      \
      .fold = fzLoopFoldArith,                                                \
      .print = fzLoopPrintElementwise,                                        \
      .parse = fzLoopParseElementwise,                                        \
      .extra = &info_##ID,                                                    \
  };

#define C FZ_TRAIT_COMMUTATIVE
#define BF FZ_LOOP_FAM_BINARY_F
#define BI FZ_LOOP_FAM_BINARY_I
#define UF FZ_LOOP_FAM_UNARY_F
#define CA FZ_LOOP_FAM_CAST
/* clang-format off */
ELEMENTWISE_OP(ADDF, "loop.addf", BF, 2, C, "a + b")
ELEMENTWISE_OP(SUBF, "loop.subf", BF, 2, 0, "a - b")
ELEMENTWISE_OP(MULF, "loop.mulf", BF, 2, C, "a * b")
ELEMENTWISE_OP(DIVF, "loop.divf", BF, 2, 0, "a / b (IEEE)")
ELEMENTWISE_OP(REMF, "loop.remf", BF, 2, 0, "fmod(a, b)")
ELEMENTWISE_OP(MAXF, "loop.maxf", BF, 2, C, "maximum; NaN propagates")
ELEMENTWISE_OP(MINF, "loop.minf", BF, 2, C, "minimum; NaN propagates")
ELEMENTWISE_OP(POWF, "loop.powf", BF, 2, 0, "a ^ b (C pow)")
ELEMENTWISE_OP(ADDI, "loop.addi", BI, 2, C, "a + b, wrapping")
ELEMENTWISE_OP(SUBI, "loop.subi", BI, 2, 0, "a - b, wrapping")
ELEMENTWISE_OP(MULI, "loop.muli", BI, 2, C, "a * b, wrapping")
ELEMENTWISE_OP(DIVSI, "loop.divsi", BI, 2, 0, "signed division toward zero")
ELEMENTWISE_OP(REMSI, "loop.remsi", BI, 2, 0, "signed remainder (C %)")
ELEMENTWISE_OP(MAXSI, "loop.maxsi", BI, 2, C, "signed maximum")
ELEMENTWISE_OP(MINSI, "loop.minsi", BI, 2, C, "signed minimum")
ELEMENTWISE_OP(ANDI, "loop.andi", BI, 2, C, "bitwise and")
ELEMENTWISE_OP(ORI, "loop.ori", BI, 2, C, "bitwise or")
ELEMENTWISE_OP(XORI, "loop.xori", BI, 2, C, "bitwise xor")
ELEMENTWISE_OP(SHLI, "loop.shli", BI, 2, 0, "shift left (0 past the width)")
ELEMENTWISE_OP(SHRSI, "loop.shrsi", BI, 2, 0, "arithmetic shift right")
ELEMENTWISE_OP(FMA, "loop.fma", FZ_LOOP_FAM_FMA, 3, 0, "a * b + c, fused")
ELEMENTWISE_OP(DOT4, "loop.dot4", FZ_LOOP_FAM_DOT4, 3, 0, "acc + sum of u8(a byte) * s8(b byte) over 4 bytes, wrapping")
ELEMENTWISE_OP(NEGF, "loop.negf", UF, 1, 0, "-x")
ELEMENTWISE_OP(ABSF, "loop.absf", UF, 1, 0, "|x|")
ELEMENTWISE_OP(EXP, "loop.exp", UF, 1, 0, "e^x")
ELEMENTWISE_OP(LOG, "loop.log", UF, 1, 0, "natural logarithm")
ELEMENTWISE_OP(LOG1P, "loop.log1p", UF, 1, 0, "log(1 + x)")
ELEMENTWISE_OP(TANH, "loop.tanh", UF, 1, 0, "hyperbolic tangent")
ELEMENTWISE_OP(ERF, "loop.erf", UF, 1, 0, "the error function")
ELEMENTWISE_OP(SQRT, "loop.sqrt", UF, 1, 0, "square root")
ELEMENTWISE_OP(RSQRT, "loop.rsqrt", UF, 1, 0, "1 / sqrt(x)")
ELEMENTWISE_OP(FLOOR, "loop.floor", UF, 1, 0, "round toward -inf")
ELEMENTWISE_OP(CEIL, "loop.ceil", UF, 1, 0, "round toward +inf")
ELEMENTWISE_OP(ROUNDEVEN, "loop.roundeven", UF, 1, 0, "round half to even")
ELEMENTWISE_OP(SIN, "loop.sin", UF, 1, 0, "sine")
ELEMENTWISE_OP(COS, "loop.cos", UF, 1, 0, "cosine")
ELEMENTWISE_OP(CMPF, "loop.cmpf", FZ_LOOP_FAM_CMP, 2, 0, "float comparison")
ELEMENTWISE_OP(CMPI, "loop.cmpi", FZ_LOOP_FAM_CMP, 2, 0, "integer comparison")
ELEMENTWISE_OP(EXTF, "loop.extf", CA, 1, 0, "float to a wider float (exact)")
ELEMENTWISE_OP(TRUNCF, "loop.truncf", CA, 1, 0, "float to a narrower float, nearest even")
ELEMENTWISE_OP(SITOFP, "loop.sitofp", CA, 1, 0, "signed integer to float")
ELEMENTWISE_OP(UITOFP, "loop.uitofp", CA, 1, 0, "unsigned integer to float")
ELEMENTWISE_OP(FPTOSI, "loop.fptosi", CA, 1, 0, "float to signed integer: toward zero, saturating, NaN to 0")
ELEMENTWISE_OP(EXTSI, "loop.extsi", CA, 1, 0, "sign extension")
ELEMENTWISE_OP(EXTUI, "loop.extui", CA, 1, 0, "zero extension")
ELEMENTWISE_OP(TRUNCI, "loop.trunci", CA, 1, 0, "integer truncation")
ELEMENTWISE_OP(INDEX_CAST, "loop.index_cast", CA, 1, 0, "index <-> integer (sign-extending)")
ELEMENTWISE_OP(BITCAST, "loop.bitcast", CA, 1, 0, "reinterpret bits of equal width")
/* clang-format on */

static const FzLoopOpInfo info_SELECT = {FZ_LOOP_OP_SELECT,
                                         FZ_LOOP_FAM_OTHER};
const FzOpDef fzLoopOp_SELECT = {
    .name = "loop.select",
    .summary = "cond ? a : b (lane-wise for an i1-lanes condition)",
    .traits = FZ_TRAIT_PURE | FZ_TRAIT_ELEMENTWISE,
    .numOperands = 3,
    .numResults = 1,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_ELEMENTWISE,
    .verify = select_verify,
    .fold = fzLoopFoldArith,
    .print = select_print,
    .parse = select_parse,
    .extra = &info_SELECT,
};

static const FzLoopOpInfo info_CONSTANT = {FZ_LOOP_OP_CONSTANT,
                                           FZ_LOOP_FAM_OTHER};
const FzOpDef fzLoopOp_CONSTANT = {
    .name = "loop.constant",
    .summary = "a scalar (or splat vector) constant",
    .traits = FZ_TRAIT_PURE | FZ_TRAIT_CONSTANT_LIKE,
    .numOperands = 0,
    .numResults = 1,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_ELEMENTWISE,
    .inherentAttrs = kValueAttr,
    .verify = constant_verify,
    .print = constant_print,
    .parse = constant_parse,
    .extra = &info_CONSTANT,
};

static const FzLoopOpInfo info_SPLAT = {FZ_LOOP_OP_SPLAT, FZ_LOOP_FAM_OTHER};
const FzOpDef fzLoopOp_SPLAT = {
    .name = "loop.splat",
    .summary = "a vector with every lane equal to the scalar operand",
    .traits = FZ_TRAIT_PURE,
    .numOperands = 1,
    .numResults = 1,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_ELEMENTWISE,
    .verify = splat_verify,
    .print = splat_print,
    .parse = splat_parse,
    .extra = &info_SPLAT,
};

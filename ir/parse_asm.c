/* ir/parse_asm.c - the FzAsmParser API of fz/opdef.h: what a dialect's
 * custom parse hook uses to read its op's syntax.
 *
 * Each function works on the parser's current token. Required forms
 * report a located error and return false; Optional forms return false
 * (or *present = false) without a report when the construct is absent.
 * Strings and arrays handed back to the hook live in the parse arena and
 * stay valid until the whole parse ends (longer than the contract's "until
 * the hook returns").
 */
#include "ir/parser.h"

FzContext *fzAsmParserGetContext(const FzAsmParser *p) { return p->ctx; }

FzLoc *fzAsmParserGetCurrentLoc(const FzAsmParser *p) {
  FzAsmParser *mp = (FzAsmParser *)p;
  return fzpTokLoc(mp, &mp->tok);
}

bool fzAsmEmitError(FzAsmParser *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fzpErrorAtV(p, &p->tok, fmt, ap);
  va_end(ap);
  return false;
}

bool fzAsmEmitErrorAt(FzAsmParser *p, FzLoc *loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fzpErrorAtLocV(p, loc, fmt, ap);
  va_end(ap);
  return false;
}

/*===--- Punctuation and keywords -----------------------------------------===*/

static bool punct_kind(const char *punct, FzTokKind *out) {
  static const struct {
    const char *text;
    FzTokKind kind;
  } table[] = {
      {",", FZ_TOK_COMMA},     {":", FZ_TOK_COLON},
      {"=", FZ_TOK_EQUAL},     {"(", FZ_TOK_LPAREN},
      {")", FZ_TOK_RPAREN},    {"[", FZ_TOK_LSQUARE},
      {"]", FZ_TOK_RSQUARE},   {"{", FZ_TOK_LBRACE},
      {"}", FZ_TOK_RBRACE},    {"<", FZ_TOK_LESS},
      {">", FZ_TOK_GREATER},   {"->", FZ_TOK_ARROW},
      {"?", FZ_TOK_QUESTION},  {"*", FZ_TOK_STAR},
      {"+", FZ_TOK_PLUS},      {"-", FZ_TOK_MINUS},
      {"...", FZ_TOK_ELLIPSIS},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
    if (strcmp(table[i].text, punct) == 0) {
      *out = table[i].kind;
      return true;
    }
  return false;
}

bool fzAsmParsePunct(FzAsmParser *p, const char *punct) {
  FzTokKind k;
  if (!punct_kind(punct, &k))
    return fzAsmEmitError(p, "unknown punctuation '%s' requested by a "
                             "parse hook", punct);
  if (fzpConsumeIf(p, k))
    return true;
  return fzpErrorAt(p, &p->tok, "expected '%s'", punct);
}

bool fzAsmParseOptionalPunct(FzAsmParser *p, const char *punct) {
  FzTokKind k;
  return punct_kind(punct, &k) && fzpConsumeIf(p, k);
}

bool fzAsmParseKeyword(FzAsmParser *p, const char *kw) {
  if (fzAsmParseOptionalKeyword(p, kw))
    return true;
  return fzpErrorAt(p, &p->tok, "expected '%s'", kw);
}

bool fzAsmParseOptionalKeyword(FzAsmParser *p, const char *kw) {
  if (!fzpIsKeyword(p, kw))
    return false;
  fzpAdvance(p);
  return true;
}

bool fzAsmParseOptionalIdentifier(FzAsmParser *p, FzStringRef *out) {
  if (!fzpIs(p, FZ_TOK_BARE_IDENT))
    return false;
  *out = (FzStringRef){p->tok.start, p->tok.len};
  fzpAdvance(p);
  return true;
}

/*===--- Literals ---------------------------------------------------------===*/

bool fzAsmParseOptionalInteger(FzAsmParser *p, int64_t *out, bool *present) {
  *present = false;
  if (!fzpIs(p, FZ_TOK_INTEGER) && !fzpIs(p, FZ_TOK_MINUS))
    return true;
  *present = true;
  bool neg = fzpConsumeIf(p, FZ_TOK_MINUS);
  if (!fzpIs(p, FZ_TOK_INTEGER))
    return fzpErrorAt(p, &p->tok, "expected integer value");
  uint64_t v;
  if (!fzpTokenToU64(&p->tok, &v) ||
      v > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
    return fzpErrorAt(p, &p->tok, "integer value too large");
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  fzpAdvance(p);
  return true;
}

bool fzAsmParseInteger(FzAsmParser *p, int64_t *out) {
  bool present;
  if (!fzAsmParseOptionalInteger(p, out, &present))
    return false;
  if (!present)
    return fzpErrorAt(p, &p->tok, "expected integer value");
  return true;
}

bool fzAsmParseStringLiteral(FzAsmParser *p, FzStringRef *out) {
  if (!fzpIs(p, FZ_TOK_STRING))
    return fzpErrorAt(p, &p->tok, "expected string");
  bool ok;
  *out = fzpStringValue(p, &p->tok, &ok);
  if (!ok)
    return false;
  fzpAdvance(p);
  return true;
}

bool fzAsmParseOptionalSymbolName(FzAsmParser *p, FzStringRef *out) {
  if (!fzpIs(p, FZ_TOK_AT_IDENT))
    return false;
  bool ok;
  *out = fzpStringValue(p, &p->tok, &ok);
  if (!ok)
    return false;
  fzpAdvance(p);
  return true;
}

bool fzAsmParseSymbolName(FzAsmParser *p, FzStringRef *out) {
  if (fzpIs(p, FZ_TOK_AT_IDENT))
    return fzAsmParseOptionalSymbolName(p, out);
  return fzpErrorAt(p, &p->tok,
                    "expected valid '@'-identifier for symbol name");
}

/*===--- Types and attributes ---------------------------------------------===*/

bool fzAsmParseType(FzAsmParser *p, FzType **out) {
  *out = fzpParseType(p);
  return *out != NULL;
}

bool fzAsmParseColonType(FzAsmParser *p, FzType **out) {
  *out = NULL;
  if (!fzpExpect(p, FZ_TOK_COLON, "expected ':'"))
    return false;
  return fzAsmParseType(p, out);
}

/* Copies the types pushed on ptrStack since base into the arena. */
static bool take_types(FzAsmParser *p, size_t base, FzType ***out,
                       size_t *n) {
  *n = p->ptrStack.len - base;
  FzType **arr = fzArenaAlloc(&p->arena, (*n ? *n : 1) * sizeof *arr);
  if (!arr) {
    p->ptrStack.len = base;
    return fzpOutOfMemory(p);
  }
  if (*n)
    memcpy(arr, p->ptrStack.data + base, *n * sizeof *arr);
  p->ptrStack.len = base;
  *out = arr;
  return true;
}

bool fzAsmParseTypeList(FzAsmParser *p, FzType ***out, size_t *n) {
  size_t base = p->ptrStack.len;
  *out = NULL;
  *n = 0;
  do {
    FzType *t = fzpParseType(p);
    if (!t || !fzPtrVecPush(&p->ptrStack, t)) {
      p->ptrStack.len = base;
      return t ? fzpOutOfMemory(p) : false;
    }
  } while (fzpConsumeIf(p, FZ_TOK_COMMA));
  return take_types(p, base, out, n);
}

bool fzAsmParseArrowTypeList(FzAsmParser *p, FzType ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  /* Tolerates a hook that consumed the '->' itself (optional punct). */
  if (!fzpConsumeIf(p, FZ_TOK_ARROW) && p->prev.kind != FZ_TOK_ARROW)
    return fzpErrorAt(p, &p->tok, "expected '->'");
  size_t base = p->ptrStack.len;
  if (!fzpParseFunctionResults(p)) {
    p->ptrStack.len = base;
    return false;
  }
  return take_types(p, base, out, n);
}

bool fzAsmParseAttr(FzAsmParser *p, FzType *type, FzAttr **out) {
  *out = fzpParseAttr(p, type);
  return *out != NULL;
}

bool fzAsmParseOptionalAttrDict(FzAsmParser *p, FzAttr **out) {
  *out = NULL;
  if (!fzpIs(p, FZ_TOK_LBRACE))
    return true;
  *out = fzpParseDictAttr(p);
  return *out != NULL;
}

bool fzAsmParseOptionalAttrDictWithKeyword(FzAsmParser *p, FzAttr **out) {
  *out = NULL;
  if (!fzAsmParseOptionalKeyword(p, "attributes"))
    return true;
  if (!fzpIs(p, FZ_TOK_LBRACE))
    return fzpErrorAt(p, &p->tok, "expected '{' after 'attributes'");
  *out = fzpParseDictAttr(p);
  return *out != NULL;
}

void fzOpStateAddAttrDict(FzOpState *st, const FzAttr *dict) {
  if (!dict)
    return;
  fzOpStateAddNamedAttrs(st, dict->u.dict.n, dict->u.dict.entries);
}

/*===--- Operands ---------------------------------------------------------===*/

static void to_unresolved(FzAsmParser *p, const FzpUse *u,
                          FzUnresolvedOperand *out) {
  out->name = (FzStringRef){u->name, u->len};
  out->number = u->number;
  out->loc = fzpLocAt(p, u->line, u->col);
}

bool fzAsmParseOptionalOperand(FzAsmParser *p, FzUnresolvedOperand *out,
                               bool *present) {
  *present = fzpIs(p, FZ_TOK_PERCENT_IDENT);
  if (!*present)
    return true;
  FzpUse u;
  if (!fzpParseUse(p, &u))
    return false;
  to_unresolved(p, &u, out);
  return true;
}

bool fzAsmParseOperand(FzAsmParser *p, FzUnresolvedOperand *out) {
  if (!fzpIs(p, FZ_TOK_PERCENT_IDENT))
    return fzpErrorAt(p, &p->tok, "expected SSA operand");
  bool present;
  return fzAsmParseOptionalOperand(p, out, &present);
}

bool fzAsmParseOperandList(FzAsmParser *p, FzUnresolvedOperand **out,
                           size_t *n) {
  *out = NULL;
  *n = 0;
  if (!fzpIs(p, FZ_TOK_PERCENT_IDENT))
    return true;
  size_t cap = 4, count = 0;
  FzUnresolvedOperand *arr = fzArenaAlloc(&p->arena, cap * sizeof *arr);
  if (!arr)
    return fzpOutOfMemory(p);
  do {
    if (count == cap) {
      FzUnresolvedOperand *bigger =
          fzArenaAlloc(&p->arena, 2 * cap * sizeof *bigger);
      if (!bigger)
        return fzpOutOfMemory(p);
      memcpy(bigger, arr, count * sizeof *arr);
      arr = bigger;
      cap *= 2;
    }
    if (!fzAsmParseOperand(p, &arr[count]))
      return false;
    ++count;
  } while (fzpConsumeIf(p, FZ_TOK_COMMA));
  *out = arr;
  *n = count;
  return true;
}

/* The position of an unresolved operand for the name tables. */
static void use_from_unresolved(FzAsmParser *p, const FzUnresolvedOperand *u,
                                FzpUse *out) {
  out->name = u->name.data;
  out->len = (uint32_t)u->name.length;
  out->number = u->number;
  out->line = p->tok.line;
  out->col = p->tok.col;
  FzLoc *flc = u->loc ? fzLocFindFileLineCol(u->loc) : NULL;
  if (flc && fzLocGetLine(flc) >= p->lineOffset) {
    out->line = fzLocGetLine(flc) - p->lineOffset;
    out->col = fzLocGetColumn(flc);
  }
}

bool fzAsmResolveOperand(FzAsmParser *p, const FzUnresolvedOperand *u,
                         FzType *type, FzOpState *st) {
  FzpUse use;
  use_from_unresolved(p, u, &use);
  if (use.number >= FZP_MAX_RESULT_NUMBER)
    return fzpErrorAtLineCol(p, use.line, use.col, "result number too large");
  FzValue *v = fzpResolveUse(p, &use, type);
  if (!v)
    return false;
  fzOpStateAddOperands(st, 1, &v);
  return true;
}

bool fzAsmResolveOperands(FzAsmParser *p, const FzUnresolvedOperand *ops,
                          size_t numOps, FzType *const *types,
                          size_t numTypes, FzLoc *loc, FzOpState *st) {
  if (numOps != numTypes)
    return fzAsmEmitErrorAt(p, loc, "%zu operands present, but expected %zu",
                            numOps, numTypes);
  for (size_t i = 0; i < numOps; ++i)
    if (!fzAsmResolveOperand(p, &ops[i], types[i], st))
      return false;
  return true;
}

/*===--- Arguments and regions --------------------------------------------===*/

bool fzAsmParseArgument(FzAsmParser *p, FzAsmArgument *out, bool allowAttrs) {
  memset(out, 0, sizeof *out);
  if (!fzpIs(p, FZ_TOK_PERCENT_IDENT))
    return fzpErrorAt(p, &p->tok, "expected SSA identifier");
  FzToken nameTok = p->tok;
  out->ssa.name = (FzStringRef){nameTok.start + 1, nameTok.len - 1};
  out->ssa.number = 0;
  out->ssa.loc = fzpLocAt(p, nameTok.line, nameTok.col);
  fzpAdvance(p);
  if (!fzpExpect(p, FZ_TOK_COLON, "expected ':' and type for SSA operand"))
    return false;
  if (!(out->type = fzpParseType(p)))
    return false;
  if (allowAttrs && fzpIs(p, FZ_TOK_LBRACE) &&
      !(out->attrs = fzpParseDictAttr(p)))
    return false;
  out->loc = out->ssa.loc;
  if (fzpIsKeyword(p, "loc") && !fzpParseLoc(p, &out->loc, true))
    return false;
  return true;
}

bool fzAsmParseOptionalArgument(FzAsmParser *p, FzAsmArgument *out,
                                bool allowAttrs, bool *present) {
  *present = fzpIs(p, FZ_TOK_PERCENT_IDENT);
  if (!*present)
    return true;
  return fzAsmParseArgument(p, out, allowAttrs);
}

bool fzAsmParseRegion(FzAsmParser *p, FzRegion *region, size_t numArgs,
                      const FzAsmArgument *args, bool argsGiven) {
  return fzpParseRegion(p, region, numArgs, args, argsGiven || numArgs > 0);
}

bool fzAsmParseOptionalRegion(FzAsmParser *p, FzRegion *region,
                              size_t numArgs, const FzAsmArgument *args,
                              bool argsGiven, bool *present) {
  *present = fzpIs(p, FZ_TOK_LBRACE);
  if (!*present)
    return true;
  return fzAsmParseRegion(p, region, numArgs, args, argsGiven);
}

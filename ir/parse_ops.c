/* ir/parse_ops.c - operations, regions and blocks, and error recovery.
 *
 * Grammar (MLIR 19):
 *   operation    ::= op-result-list? (generic-op | custom-op) trailing-loc?
 *   op-result-list ::= op-result (',' op-result)* '='
 *   op-result    ::= value-id (':' integer)?
 *   generic-op   ::= string '(' value-use-list? ')' properties?
 *                    region-list? dictionary-attribute? ':' function-type
 *   properties   ::= '<' dictionary-attribute '>'
 *   region-list  ::= '(' region (',' region)* ')'
 *   custom-op    ::= bare-id <whatever the op's parse hook accepts>
 *   region       ::= '{' entry-block? block* '}'
 *   block        ::= '^' suffix-id block-arg-list? ':' operation*
 *   block-arg-list ::= '(' (value-id ':' type trailing-loc?)* ')'
 *
 * Ops are created detached with fzOpCreate and appended to their block by
 * the caller. A region being parsed belongs to the FzOpState of its op;
 * when the op fails, disposing the state destroys the region and every
 * op in it (uses from outside are severed by the IR core). Successors
 * are rejected: fuse's IR has structured control flow only.
 *
 * Recovery: after a bad op the enclosing block skips tokens up to the
 * first token of a later line at the op's brace depth that can start an
 * op, or up to the '}' closing the block's region. The lexer counts
 * braces, so this needs no recursion however deep the skipped input is.
 */
#include "ir/parser.h"

/*===--- Uses and result lists --------------------------------------------===*/

bool fzpParseUse(FzAsmParser *p, FzpUse *out) {
  if (!fzpIs(p, FZ_TOK_PERCENT_IDENT))
    return fzpErrorAt(p, &p->tok, "expected SSA operand");
  out->name = p->tok.start + 1;
  out->len = (uint32_t)(p->tok.len - 1);
  out->number = 0;
  out->line = p->tok.line;
  out->col = p->tok.col;
  fzpAdvance(p);
  if (fzpIs(p, FZ_TOK_HASH_IDENT) && p->tok.len > 1 &&
      p->tok.start[1] >= '0' && p->tok.start[1] <= '9') {
    uint64_t n = 0;
    for (size_t i = 1; i < p->tok.len; ++i) {
      n = n * 10 + (uint64_t)(p->tok.start[i] - '0');
      if (n >= FZP_MAX_RESULT_NUMBER)
        return fzpErrorAt(p, &p->tok, "result number too large");
    }
    out->number = (uint32_t)n;
    fzpAdvance(p);
  }
  return true;
}

static size_t use_count(const FzAsmParser *p) {
  return p->useStack.len / sizeof(FzpUse);
}
static FzpUse *use_at(FzAsmParser *p, size_t i) {
  return (FzpUse *)p->useStack.data + i;
}
static void use_truncate(FzAsmParser *p, size_t n) {
  p->useStack.len = n * sizeof(FzpUse);
}

static size_t result_count(const FzAsmParser *p) {
  return p->resultStack.len / sizeof(FzpResultName);
}
static FzpResultName *result_at(FzAsmParser *p, size_t i) {
  return (FzpResultName *)p->resultStack.data + i;
}

/* op-result-list, if present. Pushes the names; *total = their values. */
static bool parse_result_list(FzAsmParser *p, size_t *total) {
  *total = 0;
  if (!fzpIs(p, FZ_TOK_PERCENT_IDENT))
    return true;
  for (;;) {
    if (!fzpIs(p, FZ_TOK_PERCENT_IDENT))
      return fzpErrorAt(p, &p->tok, "expected valid ssa identifier");
    FzpResultName r = {p->tok.start + 1, (uint32_t)(p->tok.len - 1), 1,
                       p->tok.line, p->tok.col};
    fzpAdvance(p);
    if (fzpIs(p, FZ_TOK_COLON)) {
      fzpAdvance(p);
      if (!fzpIs(p, FZ_TOK_INTEGER) ||
          (p->tok.len > 1 && p->tok.start[1] == 'x'))
        return fzpErrorAt(p, &p->tok, "expected integer number of results");
      uint64_t n = 0;
      for (size_t i = 0; i < p->tok.len; ++i) {
        n = n * 10 + (uint64_t)(p->tok.start[i] - '0');
        if (n > UINT32_MAX / 2)
          return fzpErrorAt(p, &p->tok, "too many results");
      }
      if (n < 1)
        return fzpErrorAt(p, &p->tok,
                          "expected named operation to have at least 1 "
                          "result");
      r.count = (uint32_t)n;
      fzpAdvance(p);
    }
    fzBufAppend(&p->resultStack, &r, sizeof r);
    if (p->resultStack.failed)
      return fzpOutOfMemory(p);
    *total += r.count;
    if (!fzpConsumeIf(p, FZ_TOK_COMMA))
      break;
  }
  return fzpExpect(p, FZ_TOK_EQUAL, "expected '=' after SSA name");
}

/*===--- Generic operations -----------------------------------------------===*/

/* Checks that an op name without a registered definition may be used. */
static bool check_unregistered(FzAsmParser *p, const FzToken *at,
                               FzStringRef name) {
  const char *dot = memchr(name.data, '.', name.length);
  FzStringRef dialect = {name.data,
                         dot ? (size_t)(dot - name.data) : name.length};
  if (fzContextLookupDialect(p->ctx, dialect))
    return fzpErrorAt(p, at,
                      "unregistered operation '%.*s' found in dialect '%.*s' "
                      "that does not allow unknown operations",
                      (int)name.length, name.data, (int)dialect.length,
                      dialect.data);
  if (!fzContextGetAllowUnregisteredDialects(p->ctx))
    return fzpErrorAt(p, at,
                      "operation being parsed with an unregistered dialect; "
                      "use --allow-unregistered-dialect to allow it: '%.*s'",
                      (int)name.length, name.data);
  return true;
}

/* Adds the entries of a "{...}" at the current token to st's attributes. */
static bool parse_attr_dict_into(FzAsmParser *p, FzOpState *st) {
  size_t base, n;
  if (!fzpParseDictEntries(p, &base, &n))
    return false;
  const FzNamedAttr *e = FZP_AT(const FzNamedAttr, p->namedStack.data, base);
  fzOpStateAddNamedAttrs(st, n, e);
  p->namedStack.len = base * sizeof(FzNamedAttr);
  return true;
}

/* Parses region-list into st, with the op's isolation and default
 * dialect in force. */
static bool parse_region_list(FzAsmParser *p, FzOpState *st,
                              const FzOpDef *def) {
  bool savedIso = p->regionsIsolated;
  const char *savedDialect = p->defaultDialect;
  p->regionsIsolated =
      def && (def->traits & FZ_TRAIT_ISOLATED_FROM_ABOVE) != 0;
  if (def && def->defaultDialect)
    p->defaultDialect = def->defaultDialect;
  bool ok = true;
  do {
    FzRegion *r = fzOpStateAddRegion(st);
    if (!r) {
      ok = fzpOutOfMemory(p);
      break;
    }
    if (!fzpParseRegion(p, r, 0, NULL, false)) {
      ok = false;
      break;
    }
  } while (fzpConsumeIf(p, FZ_TOK_COMMA));
  p->regionsIsolated = savedIso;
  p->defaultDialect = savedDialect;
  return ok && fzpExpect(p, FZ_TOK_RPAREN, "expected ')' to end region list");
}

static FzOp *parse_generic_op(FzAsmParser *p) {
  FzContext *ctx = p->ctx;
  FzToken nameTok = p->tok;
  bool ok;
  FzStringRef name = fzpStringValue(p, &nameTok, &ok);
  if (!ok)
    return NULL;
  if (name.length == 0) {
    fzpErrorAt(p, &nameTok, "empty operation name");
    return NULL;
  }
  FzIdent *id = fzIdentGet(ctx, name);
  if (!id) {
    fzpOutOfMemory(p);
    return NULL;
  }
  const FzOpDef *def = id->opDef;
  if (!def && !check_unregistered(p, &nameTok, name))
    return NULL;
  fzpAdvance(p);

  /* Operands: kept as uses until the function type gives their types. */
  size_t useBase = use_count(p);
  FzOpState st;
  /* The location is set once known: a trailing loc(...) makes building
   * the default one (the name's position) unnecessary. */
  fzOpStateInit(&st, ctx, name, NULL);
  if (!fzpExpect(p, FZ_TOK_LPAREN, "expected '(' to start operand list"))
    goto fail;
  if (!fzpIs(p, FZ_TOK_RPAREN)) {
    do {
      FzpUse u;
      if (!fzpParseUse(p, &u))
        goto fail;
      fzBufAppend(&p->useStack, &u, sizeof u);
    } while (fzpConsumeIf(p, FZ_TOK_COMMA));
    if (p->useStack.failed) {
      fzpOutOfMemory(p);
      goto fail;
    }
  }
  if (!fzpExpect(p, FZ_TOK_RPAREN, "expected ')' to end operand list"))
    goto fail;
  if (fzpIs(p, FZ_TOK_LSQUARE)) {
    fzpErrorAt(p, &p->tok,
               "successors are not supported (fuse's IR has structured "
               "control flow only)");
    goto fail;
  }
  if (fzpIs(p, FZ_TOK_LESS)) {
    fzpAdvance(p);
    if (!fzpIs(p, FZ_TOK_LBRACE)) {
      fzpErrorAt(p, &p->tok, "expected '{' to start properties");
      goto fail;
    }
    FzAttr *props = fzpParseDictAttr(p);
    if (!props)
      goto fail;
    if (!fzpExpect(p, FZ_TOK_GREATER, "expected '>' to close properties"))
      goto fail;
    st.propsDict = props;
  }
  if (fzpIs(p, FZ_TOK_LPAREN)) {
    fzpAdvance(p);
    if (!parse_region_list(p, &st, def))
      goto fail;
  }
  if (fzpIs(p, FZ_TOK_LBRACE) && !parse_attr_dict_into(p, &st))
    goto fail;
  if (!fzpExpect(p, FZ_TOK_COLON,
                 "expected ':' followed by operation type"))
    goto fail;
  FzToken typeTok = p->tok;
  FzType *fnType = fzpParseType(p);
  if (!fnType)
    goto fail;
  if (fzTypeGetKind(fnType) != FZ_TYPE_FUNCTION) {
    fzpErrorAt(p, &typeTok, "expected function type");
    goto fail;
  }
  size_t numUses = use_count(p) - useBase;
  size_t numInputs = fzFunctionTypeGetNumInputs(fnType);
  if (numInputs != numUses) {
    fzpErrorAt(p, &typeTok, "expected %zu operand type%s but had %zu",
               numUses, numUses == 1 ? "" : "s", numInputs);
    goto fail;
  }
  for (size_t i = 0; i < numUses; ++i) {
    FzValue *v = fzpResolveUse(p, use_at(p, useBase + i),
                               fnType->u.func.types[i]);
    if (!v)
      goto fail;
    fzOpStateAddOperands(&st, 1, &v);
  }
  use_truncate(p, useBase);
  if (fnType->u.func.numResults)
    fzOpStateAddResults(&st, fnType->u.func.numResults,
                        fnType->u.func.types + numInputs);
  if (fzpIsKeyword(p, "loc")) {
    if (!fzpParseLoc(p, &st.loc, true))
      goto fail;
  } else {
    st.loc = fzpLocAt(p, nameTok.line, nameTok.col);
  }
  FzOp *op = fzOpCreate(&st);
  if (!op)
    fzpNoteFailure(p);
  return op;
fail:
  use_truncate(p, useBase);
  fzOpStateDispose(&st);
  p->failed = true;
  return NULL;
}

/*===--- Custom operations ------------------------------------------------===*/

static FzOp *parse_custom_op(FzAsmParser *p) {
  FzContext *ctx = p->ctx;
  FzToken nameTok = p->tok;
  FzStringRef written = {nameTok.start, nameTok.len};
  FzIdent *id;
  bool prefixed = false;
  if (!memchr(written.data, '.', written.length) && p->defaultDialect) {
    FzBuf b;
    fzBufInit(&b, ctx);
    fzBufPrintf(&b, "%s.%.*s", p->defaultDialect, (int)written.length,
                written.data);
    id = b.failed ? NULL : fzIdentGet(ctx, fzBufRef(&b));
    fzBufFree(&b);
    prefixed = true;
  } else {
    id = fzIdentGet(ctx, written);
  }
  if (!id) {
    fzpOutOfMemory(p);
    return NULL;
  }
  const FzOpDef *def = id->opDef;
  if (!def || !def->parse) {
    if (prefixed)
      fzpErrorAt(p, &nameTok, "custom op '%.*s' is unknown (tried '%s' as well)",
                 (int)written.length, written.data, id->str);
    else
      fzpErrorAt(p, &nameTok, "custom op '%.*s' is unknown",
                 (int)written.length, written.data);
    return NULL;
  }
  fzpAdvance(p);
  FzOpState st;
  fzOpStateInit(&st, ctx, fzIdentGetString(id),
                fzpLocAt(p, nameTok.line, nameTok.col));
  bool savedIso = p->regionsIsolated;
  const char *savedDialect = p->defaultDialect;
  p->regionsIsolated = (def->traits & FZ_TRAIT_ISOLATED_FROM_ABOVE) != 0;
  if (def->defaultDialect)
    p->defaultDialect = def->defaultDialect;
  size_t errorsBefore = fzContextGetNumErrors(ctx);
  bool ok = def->parse(p, &st);
  p->regionsIsolated = savedIso;
  p->defaultDialect = savedDialect;
  if (!ok) {
    if (fzContextGetNumErrors(ctx) == errorsBefore && !p->fatal)
      fzpErrorAt(p, &p->tok, "failed to parse custom op '%s'", id->str);
    fzpNoteFailure(p);
    fzOpStateDispose(&st);
    return NULL;
  }
  FzOp *op = fzOpCreate(&st);
  if (!op)
    fzpNoteFailure(p);
  return op;
}

/*===--- Operations -------------------------------------------------------===*/

FzOp *fzpParseOperation(FzAsmParser *p) {
  size_t resBase = result_count(p);
  FzToken first = p->tok;
  size_t numResults;
  FzOp *op = NULL;
  bool poison = false;
  if (!parse_result_list(p, &numResults))
    goto done;
  bool isGeneric = fzpIs(p, FZ_TOK_STRING);
  if (isGeneric)
    op = parse_generic_op(p);
  else if (fzpIs(p, FZ_TOK_BARE_IDENT))
    op = parse_custom_op(p);
  else
    fzpErrorAt(p, &p->tok, "expected operation name in quotes");
  if (!op)
    goto done;
  if (!isGeneric && fzpIsKeyword(p, "loc")) {
    FzLoc *loc;
    if (!fzpParseLoc(p, &loc, true)) {
      fzOpDestroy(op);
      op = NULL;
      goto done;
    }
    fzOpSetLoc(op, loc);
  }
  size_t numNames = result_count(p) - resBase;
  if (numNames) {
    size_t have = fzOpGetNumResults(op);
    if (have != numResults) {
      fzpErrorAtLineCol(p, first.line, first.col,
                        "operation defines %zu results but was provided %zu "
                        "to bind",
                        have, numResults);
      poison = true;
    } else {
      size_t next = 0;
      for (size_t i = 0; i < numNames; ++i) {
        FzpResultName r = *result_at(p, resBase + i);
        FzValue *small[8];
        FzValue **vals = small;
        if (r.count > 8 &&
            !(vals = fzArenaAlloc(&p->arena, r.count * sizeof *vals))) {
          fzpOutOfMemory(p);
          break;
        }
        for (uint32_t j = 0; j < r.count; ++j)
          vals[j] = fzOpGetResult(op, next + j);
        next += r.count;
        fzpDefineValues(p, r.name, r.len, r.line, r.col, vals, r.count);
      }
    }
  }
done:
  if (!op || poison) {
    for (size_t i = resBase; i < result_count(p); ++i)
      fzpPoisonValues(p, result_at(p, i)->name, result_at(p, i)->len);
  }
  p->resultStack.len = resBase * sizeof(FzpResultName);
  return op;
}

/*===--- Blocks and regions -----------------------------------------------===*/

void fzpRecover(FzAsmParser *p, int braceDepth, const char *opStart) {
  if (p->fatal)
    return;
  if (p->tok.start == opStart && !fzpIs(p, FZ_TOK_EOF))
    fzpAdvance(p); /* always make progress */
  uint32_t failLine = p->prev.line;
  for (;;) {
    FzTokKind k = p->tok.kind;
    if (k == FZ_TOK_EOF)
      return;
    if (k == FZ_TOK_RBRACE && p->lx.braceDepth < braceDepth)
      return;
    if (p->tok.line > failLine && p->lx.braceDepth == braceDepth &&
        (k == FZ_TOK_PERCENT_IDENT || k == FZ_TOK_STRING ||
         k == FZ_TOK_BARE_IDENT || k == FZ_TOK_CARET_IDENT ||
         (p->numScopes <= 1 &&
          (k == FZ_TOK_HASH_IDENT || k == FZ_TOK_EXCL_IDENT))))
      return;
    fzpAdvance(p);
  }
}

void fzpParseBlockBody(FzAsmParser *p, FzBlock *block) {
  while (!p->fatal) {
    FzTokKind k = p->tok.kind;
    if (k == FZ_TOK_RBRACE || k == FZ_TOK_CARET_IDENT || k == FZ_TOK_EOF)
      return;
    int d0 = fzpDepthBeforeTok(p);
    const char *start = p->tok.start;
    FzOp *op = fzpParseOperation(p);
    if (op)
      fzBlockAppendOp(block, op);
    else
      fzpRecover(p, d0, start);
  }
}

/* ^label ( '(' args ')' )? ':' : creates the block, appends it to region
 * and defines its arguments. NULL after an error. */
static FzBlock *parse_block_header(FzAsmParser *p, FzRegion *region) {
  FzToken label = p->tok;
  fzpAdvance(p);
  if (!fzpDefineLabel(p, &label))
    return NULL;
  FzBlock *block = fzBlockCreate(p->ctx, 0, NULL, NULL);
  if (!block) {
    fzpOutOfMemory(p);
    return NULL;
  }
  fzRegionAppendBlock(region, block);
  if (fzpConsumeIf(p, FZ_TOK_LPAREN) && !fzpConsumeIf(p, FZ_TOK_RPAREN)) {
    do {
      FzpUse u;
      if (!fzpIs(p, FZ_TOK_PERCENT_IDENT)) {
        fzpErrorAt(p, &p->tok, "expected SSA identifier");
        return NULL;
      }
      if (!fzpParseUse(p, &u))
        return NULL;
      if (!fzpExpect(p, FZ_TOK_COLON,
                     "expected ':' and type for SSA operand"))
        return NULL;
      FzType *type = fzpParseType(p);
      if (!type)
        return NULL;
      FzLoc *loc = NULL;
      if (fzpIsKeyword(p, "loc")) {
        if (!fzpParseLoc(p, &loc, true))
          return NULL;
      } else {
        loc = fzpLocAt(p, u.line, u.col);
      }
      FzValue *arg = fzBlockAddArgument(block, type, loc);
      if (!arg) {
        fzpOutOfMemory(p);
        return NULL;
      }
      fzpDefineValues(p, u.name, u.len, u.line, u.col, &arg, 1);
    } while (fzpConsumeIf(p, FZ_TOK_COMMA));
    if (!fzpExpect(p, FZ_TOK_RPAREN, "expected ')' to end argument list"))
      return NULL;
  }
  if (!fzpExpect(p, FZ_TOK_COLON, "expected ':' after block name"))
    return NULL;
  return block;
}

/* Creates the entry block from a hook's declared arguments. */
static FzBlock *make_entry_block(FzAsmParser *p, FzRegion *region,
                                 size_t numArgs, const FzAsmArgument *args) {
  FzBlock *block = fzBlockCreate(p->ctx, 0, NULL, NULL);
  if (!block) {
    fzpOutOfMemory(p);
    return NULL;
  }
  fzRegionAppendBlock(region, block);
  for (size_t i = 0; i < numArgs; ++i) {
    const FzAsmArgument *a = &args[i];
    FzLoc *loc = a->loc ? a->loc : a->ssa.loc;
    FzValue *arg = fzBlockAddArgument(block, a->type, loc);
    if (!arg) {
      fzpOutOfMemory(p);
      return NULL;
    }
    uint32_t line = p->tok.line, col = p->tok.col;
    FzLoc *flc = a->ssa.loc ? fzLocFindFileLineCol(a->ssa.loc) : NULL;
    if (flc && fzLocGetLine(flc) >= p->lineOffset) {
      line = fzLocGetLine(flc) - p->lineOffset;
      col = fzLocGetColumn(flc);
    }
    fzpDefineValues(p, a->ssa.name.data, a->ssa.name.length, line, col, &arg,
                    1);
  }
  return block;
}

bool fzpParseRegion(FzAsmParser *p, FzRegion *region, size_t numArgs,
                    const FzAsmArgument *args, bool argsGiven) {
  if (!fzpIs(p, FZ_TOK_LBRACE))
    return fzpErrorAt(p, &p->tok, "expected '{' to begin a region");
  if (p->regionDepth >= p->maxDepth)
    return fzpErrorAt(p, &p->tok, "nesting too deep (limit %u)",
                      p->maxDepth);
  fzpAdvance(p);
  if (!fzpPushScope(p, p->regionsIsolated))
    return false;
  ++p->regionDepth;
  bool ok = true;
  FzBlock *block = NULL;
  if (fzpIs(p, FZ_TOK_RBRACE) && !(argsGiven && numArgs > 0)) {
    fzpAdvance(p);
    goto done;
  }
  if (argsGiven) {
    if (!(block = make_entry_block(p, region, numArgs, args))) {
      ok = false;
      goto done;
    }
    if (fzpIs(p, FZ_TOK_CARET_IDENT)) {
      ok = fzpErrorAt(p, &p->tok,
                      "invalid block name in region with named arguments");
      goto done;
    }
  } else if (!fzpIs(p, FZ_TOK_CARET_IDENT)) {
    if (!(block = fzBlockCreate(p->ctx, 0, NULL, NULL))) {
      ok = fzpOutOfMemory(p);
      goto done;
    }
    fzRegionAppendBlock(region, block);
  }
  for (;;) {
    if (block)
      fzpParseBlockBody(p, block);
    if (p->fatal) {
      ok = false;
      break;
    }
    if (fzpConsumeIf(p, FZ_TOK_RBRACE))
      break;
    if (fzpIs(p, FZ_TOK_CARET_IDENT)) {
      if (!(block = parse_block_header(p, region))) {
        ok = false;
        break;
      }
      continue;
    }
    ok = fzpErrorAt(p, &p->tok, "expected '}' to end region");
    break;
  }
done:
  --p->regionDepth;
  fzpPopScope(p);
  return ok;
}

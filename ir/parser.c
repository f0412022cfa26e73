/* ir/parser.c - the textual format's entry points and the parser's core:
 * token handling, located diagnostics with an error limit, the top level
 * (operations and alias definitions), and wrapping the result in a
 * builtin.module.
 *
 * Grammar of a file (MLIR 19):
 *   file       ::= (operation | attr-alias-def | type-alias-def)*
 *   attr-alias-def ::= '#' alias-name '=' (attribute | location)
 *   type-alias-def ::= '!' alias-name '=' type
 *
 * Ownership: the source is copied into the context (fzContextAddSourceBuffer)
 * and tokens point into that copy. Top-level ops are collected in a
 * detached block; on success it becomes the body of the returned module
 * (or its only builtin.module op is returned); on any error everything
 * built is destroyed and NULL is returned. The parse's own bookkeeping
 * (arena, maps, stacks) is released by fzpFinish in every case.
 */
#include "ir/parser.h"

#include <errno.h>
#include <stdlib.h>

/*===--- String map -------------------------------------------------------===*/

void fzpStrMapInit(FzpStrMap *m, FzContext *ctx) {
  memset(m, 0, sizeof *m);
  m->ctx = ctx;
}

void fzpStrMapFree(FzpStrMap *m) {
  fzFree(m->ctx, m->slots);
  m->slots = NULL;
  m->count = m->cap = 0;
}

uint32_t fzpStrHash(const char *key, size_t len, uint32_t tag) {
  return fzHashBytes(key, len, 0x811c9dc5u ^ (tag * 0x9e3779b9u));
}

void *fzpStrMapGet(const FzpStrMap *m, const char *key, size_t len,
                   uint32_t tag, uint32_t hash) {
  if (!m->cap)
    return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const FzpStrSlot *s = &m->slots[i];
    if (!s->key)
      return NULL;
    if (s->hash == hash && s->tag == tag && s->len == len &&
        memcmp(s->key, key, len) == 0)
      return s->value;
  }
}

static bool strmap_grow(FzpStrMap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  FzpStrSlot *slots = fzCalloc(m->ctx, cap, sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < m->cap; ++i) {
    FzpStrSlot *s = &m->slots[i];
    if (!s->key)
      continue;
    size_t j = s->hash & (cap - 1);
    while (slots[j].key)
      j = (j + 1) & (cap - 1);
    slots[j] = *s;
  }
  fzFree(m->ctx, m->slots);
  m->slots = slots;
  m->cap = cap;
  return true;
}

bool fzpStrMapPut(FzpStrMap *m, const char *key, size_t len, uint32_t tag,
                  uint32_t hash, void *value) {
  if ((m->count + 1) * 3 > m->cap * 2 && !strmap_grow(m))
    return false;
  size_t mask = m->cap - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    FzpStrSlot *s = &m->slots[i];
    if (!s->key) {
      s->key = key ? key : "";
      s->len = len;
      s->hash = hash;
      s->tag = tag;
      s->value = value;
      m->count++;
      return true;
    }
    if (s->hash == hash && s->tag == tag && s->len == len &&
        memcmp(s->key, key, len) == 0) {
      s->value = value;
      return true;
    }
  }
}

/*===--- Parser state -----------------------------------------------------===*/

void fzpInit(FzAsmParser *p, FzContext *ctx, FzStringRef fileName,
             const char *buf, size_t len, unsigned lineOffset) {
  memset(p, 0, sizeof *p);
  p->ctx = ctx;
  p->fileName = fileName;
  p->fileIdent = fzIdentGet(ctx, fileName); /* NULL on OOM: unknown locs */
  p->lineOffset = lineOffset;
  fzArenaInit(&p->arena, ctx);
  p->errorsAtStart = fzContextGetNumErrors(ctx);
  p->maxDepth = fzContextGetMaxNesting(ctx);
  fzpStrMapInit(&p->aliases, ctx);
  fzpStrMapInit(&p->ssa, ctx);
  fzpStrMapInit(&p->labels, ctx);
  fzPtrVecInit(&p->defStack, ctx);
  fzPtrVecInit(&p->fwdStack, ctx);
  fzPtrVecInit(&p->deferred, ctx);
  fzPtrMapInit(&p->deferredMap, ctx);
  fzPtrVecInit(&p->ptrStack, ctx);
  fzBufInit(&p->namedStack, ctx);
  fzBufInit(&p->useStack, ctx);
  fzBufInit(&p->resultStack, ctx);
  fzBufInit(&p->dimStack, ctx);
  p->defaultDialect = "builtin";
  fzLexerInit(&p->lx, buf, len);
  p->prev.kind = FZ_TOK_EOF;
  p->prev.start = buf;
  p->prev.line = 1;
  p->prev.col = 1;
  p->prev.len = 0;
  fzLexerNext(&p->lx, &p->tok);
}

void fzpFinish(FzAsmParser *p) {
  fzpSsaFree(p);
  fzpStrMapFree(&p->aliases);
  fzPtrVecFree(&p->deferred);
  fzPtrMapFree(&p->deferredMap);
  fzPtrVecFree(&p->ptrStack);
  fzBufFree(&p->namedStack);
  fzBufFree(&p->useStack);
  fzBufFree(&p->resultStack);
  fzBufFree(&p->dimStack);
  fzArenaReset(&p->arena);
}

/*===--- Tokens -----------------------------------------------------------===*/

static void make_fatal(FzAsmParser *p) {
  p->fatal = true;
  p->failed = true;
  p->tok.kind = FZ_TOK_EOF;
}

void fzpAdvance(FzAsmParser *p) {
  if (p->fatal) {
    p->tok.kind = FZ_TOK_EOF;
    return;
  }
  p->prev = p->tok;
  fzLexerNext(&p->lx, &p->tok);
}

bool fzpConsumeIf(FzAsmParser *p, FzTokKind k) {
  if (p->tok.kind != k)
    return false;
  fzpAdvance(p);
  return true;
}

bool fzpExpect(FzAsmParser *p, FzTokKind k, const char *msg) {
  if (p->tok.kind == k) {
    fzpAdvance(p);
    return true;
  }
  return fzpErrorAt(p, &p->tok, "%s", msg);
}

bool fzpIsKeyword(const FzAsmParser *p, const char *kw) {
  if (p->tok.kind != FZ_TOK_BARE_IDENT)
    return false;
  size_t n = strlen(kw);
  return p->tok.len == n && memcmp(p->tok.start, kw, n) == 0;
}

/*===--- Locations and diagnostics ----------------------------------------===*/

FzLoc *fzpLocAt(FzAsmParser *p, uint32_t line, uint32_t col) {
  FzLoc *loc =
      fzFileLineColLocGetIdent(p->ctx, p->fileIdent, line + p->lineOffset,
                               col);
  return loc ? loc : fzUnknownLocGet(p->ctx);
}

void fzpErrorPos(FzAsmParser *p, const FzToken *t, uint32_t *line,
                 uint32_t *col) {
  if (t->kind == FZ_TOK_EOF && t == &p->tok) {
    /* Point just after the last real token, as MLIR does. */
    *line = p->prev.line;
    *col = p->prev.col + (uint32_t)p->prev.len;
    return;
  }
  *line = t->line;
  *col = t->col;
}

FzLoc *fzpTokLoc(FzAsmParser *p, const FzToken *t) {
  uint32_t line, col;
  fzpErrorPos(p, t, &line, &col);
  return fzpLocAt(p, line, col);
}

static size_t errors_so_far(const FzAsmParser *p) {
  return fzContextGetNumErrors(p->ctx) - p->errorsAtStart;
}

/* Starts an error unless the parse is past its error limit. */
static FzDiagnostic *begin_error(FzAsmParser *p, FzLoc *loc, const char *prefix,
                                 const char *fmt, va_list ap) {
  p->failed = true;
  if (p->fatal)
    return NULL;
  if (errors_so_far(p) >= FZP_MAX_ERRORS) {
    make_fatal(p);
    return NULL;
  }
  FzBuf b;
  fzBufInit(&b, p->ctx);
  if (prefix)
    fzBufPuts(&b, prefix);
  fzBufVPrintf(&b, fmt, ap);
  FzDiagnostic *d = fzDiagBegin(p->ctx, FZ_SEVERITY_ERROR, loc, "%s",
                                b.data ? b.data : "error");
  fzBufFree(&b);
  return d;
}

static void finish_error(FzAsmParser *p, FzDiagnostic *d) {
  fzDiagReport(d);
  if (errors_so_far(p) >= FZP_MAX_ERRORS)
    make_fatal(p);
}

bool fzpErrorAtV(FzAsmParser *p, const FzToken *t, const char *fmt,
                 va_list ap) {
  if (t->kind == FZ_TOK_ERROR) {
    /* The lexer's own message says more than "expected X". */
    FzDiagnostic *d =
        fzpDiagBegin(p, t->line, t->col, "%s",
                     p->lx.errMsg ? p->lx.errMsg : "invalid token");
    if (d)
      finish_error(p, d);
    return false;
  }
  uint32_t line, col;
  fzpErrorPos(p, t, &line, &col);
  const char *prefix =
      t->kind == FZ_TOK_EOF ? "unexpected end of file: " : NULL;
  FzDiagnostic *d = begin_error(p, fzpLocAt(p, line, col), prefix, fmt, ap);
  if (d)
    finish_error(p, d);
  return false;
}

bool fzpErrorAt(FzAsmParser *p, const FzToken *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fzpErrorAtV(p, t, fmt, ap);
  va_end(ap);
  return false;
}

bool fzpErrorAtLineCol(FzAsmParser *p, uint32_t line, uint32_t col,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = begin_error(p, fzpLocAt(p, line, col), NULL, fmt, ap);
  va_end(ap);
  if (d)
    finish_error(p, d);
  return false;
}

bool fzpErrorAtLocV(FzAsmParser *p, FzLoc *loc, const char *fmt, va_list ap) {
  FzDiagnostic *d =
      begin_error(p, loc ? loc : fzUnknownLocGet(p->ctx), NULL, fmt, ap);
  if (d)
    finish_error(p, d);
  return false;
}

FzDiagnostic *fzpDiagBegin(FzAsmParser *p, uint32_t line, uint32_t col,
                           const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  FzDiagnostic *d = begin_error(p, fzpLocAt(p, line, col), NULL, fmt, ap);
  va_end(ap);
  return d;
}

void fzpDiagReport(FzAsmParser *p, FzDiagnostic *d) {
  if (d)
    finish_error(p, d);
}

void fzpNoteFailure(FzAsmParser *p) {
  p->failed = true;
  if (!p->fatal && errors_so_far(p) >= FZP_MAX_ERRORS)
    make_fatal(p);
}

bool fzpOutOfMemory(FzAsmParser *p) {
  if (!fzContextHadAllocationFailure(p->ctx))
    fzNoteAllocationFailure(p->ctx);
  make_fatal(p);
  return false;
}

bool fzpEnterNesting(FzAsmParser *p) {
  if (p->depth >= p->maxDepth) {
    fzpErrorAt(p, &p->tok, "nesting too deep (limit %u)", p->maxDepth);
    return false;
  }
  if (++p->depth > p->depthPeak)
    p->depthPeak = p->depth;
  return true;
}

/*===--- Strings and aliases ----------------------------------------------===*/

static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return c - 'A' + 10;
}

FzStringRef fzpStringValue(FzAsmParser *p, const FzToken *t, bool *ok) {
  const char *s = t->start;
  size_t n = t->len;
  *ok = true;
  if (t->kind == FZ_TOK_AT_IDENT) {
    if (n < 2 || s[1] != '"')
      return (FzStringRef){s + 1, n - 1};
    s += 2;
    n -= 3;
  } else {
    s += 1;
    n -= 2;
  }
  if (!memchr(s, '\\', n))
    return (FzStringRef){s, n};
  char *out = fzArenaAlloc(&p->arena, n + 1);
  if (!out) {
    *ok = false;
    fzpOutOfMemory(p);
    return (FzStringRef){"", 0};
  }
  size_t o = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 >= n) {
      out[o++] = c;
      continue;
    }
    char e = s[++i];
    switch (e) {
    case 'n':
      out[o++] = '\n';
      break;
    case 't':
      out[o++] = '\t';
      break;
    case '"':
    case '\\':
      out[o++] = e;
      break;
    default: /* two hex digits, checked by the lexer */
      if (i + 1 < n) {
        out[o++] = (char)(hex_value(e) * 16 + hex_value(s[i + 1]));
        ++i;
      }
      break;
    }
  }
  out[o] = 0;
  return (FzStringRef){out, o};
}

FzpAlias *fzpLookupAlias(FzAsmParser *p, const char *name, size_t len,
                         uint32_t tag) {
  return fzpStrMapGet(&p->aliases, name, len, tag,
                      fzpStrHash(name, len, tag));
}

/* attr-alias-def | type-alias-def, at the '#name' or '!name' token. */
static bool parse_alias_def(FzAsmParser *p) {
  FzToken nameTok = p->tok;
  bool isType = nameTok.kind == FZ_TOK_EXCL_IDENT;
  const char *name = nameTok.start + 1;
  size_t len = nameTok.len - 1;
  if (memchr(name, '.', len))
    return fzpErrorAt(p, &nameTok,
                      "%s names with a '.' are reserved for dialect-defined "
                      "names",
                      isType ? "type" : "attribute");
  uint32_t tag = isType ? 1 : 0;
  uint32_t hash = fzpStrHash(name, len, tag);
  if (fzpStrMapGet(&p->aliases, name, len, tag, hash))
    return fzpErrorAt(p, &nameTok, "redefinition of %s alias id '%.*s'",
                      isType ? "type" : "attribute", (int)len, name);
  fzpAdvance(p);
  if (!fzpExpect(p, FZ_TOK_EQUAL,
                 isType ? "expected '=' in type alias definition"
                        : "expected '=' in attribute alias definition"))
    return false;
  FzpAlias alias = {NULL, NULL, NULL};
  if (isType) {
    if (!(alias.type = fzpParseType(p)))
      return false;
  } else if (fzpIsKeyword(p, "loc")) {
    if (!fzpParseLoc(p, &alias.loc, false))
      return false;
  } else if (!(alias.attr = fzpParseAttr(p, NULL))) {
    return false;
  }
  FzpAlias *stored = fzArenaDup(&p->arena, &alias, sizeof alias);
  if (!stored || !fzpStrMapPut(&p->aliases, name, len, tag, hash, stored))
    return fzpOutOfMemory(p);
  return true;
}

/*===--- Top level ----------------------------------------------------------===*/

static void parse_top_level_items(FzAsmParser *p, FzBlock *top) {
  while (!p->fatal && !fzpIs(p, FZ_TOK_EOF)) {
    int d0 = fzpDepthBeforeTok(p);
    const char *start = p->tok.start;
    FzTokKind k = p->tok.kind;
    if (k == FZ_TOK_HASH_IDENT || k == FZ_TOK_EXCL_IDENT) {
      if (!parse_alias_def(p))
        fzpRecover(p, d0, start);
      continue;
    }
    if (k == FZ_TOK_RBRACE) {
      fzpErrorAt(p, &p->tok, "unexpected '}' at the top level");
      fzpAdvance(p);
      continue;
    }
    FzOp *op = fzpParseOperation(p);
    if (op)
      fzBlockAppendOp(top, op);
    else
      fzpRecover(p, d0, start);
  }
}

/* Wraps the ops of `top` in a new builtin.module; consumes top. */
static FzOp *wrap_in_module(FzAsmParser *p, FzBlock *top) {
  FzContext *ctx = p->ctx;
  FzOpState st;
  /* mlir-opt places the implicit module at file:0:0 (no source token). */
  FzLoc *loc = fzFileLineColLocGet(ctx, p->fileName, 0, 0);
  fzOpStateInit(&st, ctx, FZ_STR("builtin.module"), loc);
  FzRegion *r = fzOpStateAddRegion(&st);
  if (!r) {
    fzOpStateDispose(&st);
    fzBlockDestroy(top);
    fzpOutOfMemory(p);
    return NULL;
  }
  fzRegionAppendBlock(r, top);
  /* The wrapper is created even when the builtin dialect is not
   * registered in this context. */
  bool saved = ctx->allowUnregistered;
  ctx->allowUnregistered = true;
  FzOp *op = fzOpCreate(&st);
  ctx->allowUnregistered = saved;
  if (!op)
    fzpNoteFailure(p);
  return op;
}

/* Parses the whole buffer held by p; NULL after errors. */
static FzOp *parse_file(FzAsmParser *p) {
  FzContext *ctx = p->ctx;
  FzBlock *top = fzBlockCreate(ctx, 0, NULL, NULL);
  if (!top) {
    fzpOutOfMemory(p);
    return NULL;
  }
  if (fzpPushScope(p, true)) {
    parse_top_level_items(p, top);
    fzpPopScope(p);
  }
  /* Undefined aliases are reported even when other errors came first. */
  bool locsOk = fzpResolveDeferredLocs(p, NULL);
  bool failed = !locsOk || p->failed ||
                fzContextGetNumErrors(ctx) > p->errorsAtStart;
  if (failed) {
    fzBlockDestroy(top);
    return NULL;
  }
  FzIdent *modName = fzIdentGet(ctx, FZ_STR("builtin.module"));
  FzOp *result;
  FzOp *first = fzBlockGetFirstOp(top);
  if (first && first == fzBlockGetLastOp(top) && fzOpGetName(first) == modName) {
    fzOpRemoveFromBlock(first);
    fzBlockDestroy(top);
    result = first;
  } else {
    result = wrap_in_module(p, top);
  }
  if (result && p->deferred.len && !fzpResolveDeferredLocs(p, result)) {
    fzOpDestroy(result);
    result = NULL;
  }
  return result;
}

/*===--- Entry points -------------------------------------------------------===*/

/* Parses buf[0..len), already registered as fileName's source. */
static FzOp *parse_registered(FzContext *ctx, FzStringRef fileName,
                              const char *buf, size_t len) {
  FzAsmParser p;
  fzpInit(&p, ctx, fileName, buf, len, 0);
  FzOp *op = parse_file(&p);
  fzpFinish(&p);
  return op;
}

/* False (after reporting) when a source of `len` bytes is over the
 * context's limit. */
static bool source_size_ok(FzContext *ctx, FzStringRef fileName, size_t len) {
  if (len <= ctx->maxSourceSize)
    return true;
  fzEmitError(ctx, fzUnknownLocGet(ctx),
              "input '%.*s' is larger than the limit of %zu bytes",
              (int)fileName.length, fileName.data, ctx->maxSourceSize);
  return false;
}

FzOp *fzParseSource(FzContext *ctx, FzStringRef contents,
                    FzStringRef fileName, unsigned lineOffset) {
  if (!contents.data)
    contents.length = 0;
  if (!source_size_ok(ctx, fileName, contents.length))
    return NULL;
  /* With a line offset the registered copy starts with that many empty
   * lines, so that diagnostics can show the right source line; lexing
   * the padding then yields the offset line numbers by itself. */
  FzBuf padded;
  fzBufInit(&padded, ctx);
  if (lineOffset) {
    for (unsigned i = 0; i < lineOffset && !padded.failed; ++i)
      fzBufPutc(&padded, '\n');
    fzBufAppend(&padded, contents.data, contents.length);
    if (padded.failed) {
      fzBufFree(&padded);
      return NULL;
    }
    contents = fzBufRef(&padded);
  }
  const char *buf = fzContextAddSourceBuffer(ctx, fileName, contents);
  fzBufFree(&padded);
  return buf ? parse_registered(ctx, fileName, buf, contents.length) : NULL;
}

FzOp *fzParseSourceInPlace(FzContext *ctx, FzStringRef contents,
                           FzStringRef fileName) {
  if (!contents.data || contents.data[contents.length] != 0)
    return fzParseSource(ctx, contents, fileName, 0);
  if (!source_size_ok(ctx, fileName, contents.length))
    return NULL;
  const char *buf = fzContextRegisterSource(ctx, fileName, contents.data,
                                            contents.length, false);
  return buf ? parse_registered(ctx, fileName, buf, contents.length) : NULL;
}

FzOp *fzParseFile(FzContext *ctx, const char *path) {
  bool isStdin = strcmp(path, "-") == 0;
  FILE *f = isStdin ? stdin : fopen(path, "rb");
  if (!f) {
    fzEmitError(ctx, fzUnknownLocGet(ctx),
                "could not open input file '%s': %s", path, strerror(errno));
    return NULL;
  }
  FzBuf b;
  fzBufInit(&b, ctx);
  char chunk[1 << 16];
  size_t n;
  /* Stops one byte past the limit: an endless input (/dev/zero, a pipe
   * that never closes its end) is an error, not an endless read. */
  bool tooLarge = false;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && !b.failed) {
    fzBufAppend(&b, chunk, n);
    if (b.len > ctx->maxSourceSize) {
      tooLarge = true;
      break;
    }
  }
  int readErr = !tooLarge && ferror(f) ? errno : 0;
  if (!isStdin)
    fclose(f);
  if (readErr || b.failed || tooLarge) {
    if (readErr)
      fzEmitError(ctx, fzUnknownLocGet(ctx),
                  "could not read input file '%s': %s", path,
                  strerror(readErr));
    else if (tooLarge)
      fzEmitError(ctx, fzUnknownLocGet(ctx),
                  "input file '%s' is larger than the limit of %zu bytes",
                  path, ctx->maxSourceSize);
    fzBufFree(&b);
    return NULL;
  }
  FzStringRef name = fzStringRefFromCString(isStdin ? "<stdin>" : path);
  if (!b.data)
    return fzParseSource(ctx, FZ_STR(""), name, 0);
  /* The context takes the buffer: no second copy of the file. */
  fzBufPutc(&b, '\0');
  if (b.failed) {
    fzBufFree(&b);
    return NULL;
  }
  size_t len = b.len - 1;
  const char *buf = fzContextRegisterSource(ctx, name, b.data, len, true);
  return buf ? parse_registered(ctx, name, buf, len) : NULL;
}

/* Shared by fzTypeParse and fzAttrParse: sets up a parser over a copy of
 * text named "<string>". */
static bool init_string_parser(FzAsmParser *p, FzContext *ctx,
                               FzStringRef text) {
  if (!text.data)
    text.length = 0;
  const char *buf =
      fzContextAddSourceBuffer(ctx, FZ_STR("<string>"), text);
  if (!buf)
    return false;
  fzpInit(p, ctx, FZ_STR("<string>"), buf, text.length, 0);
  return true;
}

FzType *fzTypeParse(FzContext *ctx, FzStringRef text) {
  FzAsmParser p;
  if (!init_string_parser(&p, ctx, text))
    return NULL;
  FzType *t = fzpParseType(&p);
  if (t && !fzpIs(&p, FZ_TOK_EOF))
    fzpErrorAt(&p, &p.tok, "unexpected characters after the type");
  if (p.failed)
    t = NULL;
  fzpFinish(&p);
  return t;
}

FzAttr *fzAttrParse(FzContext *ctx, FzStringRef text) {
  FzAsmParser p;
  if (!init_string_parser(&p, ctx, text))
    return NULL;
  FzAttr *a = fzpParseAttr(&p, NULL);
  if (a && !fzpIs(&p, FZ_TOK_EOF))
    fzpErrorAt(&p, &p.tok, "unexpected characters after the attribute");
  if (p.failed)
    a = NULL;
  fzpFinish(&p);
  return a;
}

/* ir/parse_types.c - types and locations.
 *
 * Grammar:
 *   type          ::= function-type | non-function-type
 *   function-type ::= '(' (type (',' type)*)? ')' '->' function-results
 *   function-results ::= non-function-type | '(' (type (',' type)*)? ')'
 *   non-function-type ::= 'i'[0-9]+ | 'index' | 'f16' | 'bf16' | 'f32'
 *                   | 'f64' | 'none'
 *                   | 'tensor' '<' ('*' 'x' | dim-list) type '>'
 *                   | 'vector' '<' dim-list type '>'
 *                   | 'buffer' '<' dim-list type
 *                         (',' 'strides' '[' stride (',' stride)* ']')?
 *                         (',' integer)? '>'
 *                   | '!' alias-name | '!' dialect '.' body pretty?
 *                   | '!' dialect pretty
 *   dim-list      ::= ((integer | '?') 'x')*
 *   location      ::= 'loc' '(' loc-inner ')'
 *   loc-inner     ::= 'unknown' | string ':' integer ':' integer
 *                   | string ('(' loc-inner ')')?
 *                   | 'fused' ('<' attribute '>')? '[' loc-inner,* ']'
 *                   | '#' alias-name
 *
 * Dimension lists are lexed as MLIR does: "4x?xf32" arrives as integer
 * "4" and identifier "x", '?', identifier "xf32"; an identifier starting
 * with 'x' is split after its 'x' by relexing from there, and a hex-looking
 * integer "0x4" is split after its '0'. Nesting is bounded by the
 * context's limit; the recursion stops at the first level past it.
 */
#include "ir/parser.h"

/*===--- Shared token helpers ---------------------------------------------===*/

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return c - 'A' + 10;
}

bool fzpTokenToU64(const FzToken *t, uint64_t *out) {
  uint64_t v = 0;
  const char *s = t->start;
  size_t n = t->len;
  if (n > 2 && s[0] == '0' && s[1] == 'x') {
    for (size_t i = 2; i < n; ++i) {
      if (v >> 60)
        return false;
      v = v * 16 + (uint64_t)hex_digit(s[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint64_t d = (uint64_t)(s[i] - '0');
      if (v > (UINT64_MAX - d) / 10)
        return false;
      v = v * 10 + d;
    }
  }
  *out = v;
  return true;
}

void fzpRelexFrom(FzAsmParser *p, const char *ptr) {
  if (p->fatal)
    return;
  p->prev = p->tok;
  p->prev.len = (size_t)(ptr - p->tok.start);
  fzLexerResetTo(&p->lx, ptr);
  fzLexerNext(&p->lx, &p->tok);
}

bool fzpScanPrettyBody(FzAsmParser *p, const char **end) {
  const char *start = p->tok.start + p->tok.len;
  const char *errPtr = NULL, *errMsg = NULL;
  const char *e = fzLexerScanPrettyBody(&p->lx, start, p->maxDepth, &errPtr,
                                        &errMsg);
  if (!e) {
    uint32_t line, col;
    fzLexerGetLineCol(&p->lx, errPtr, &line, &col);
    if (errMsg == fzLexerNestingTooDeep)
      return fzpErrorAtLineCol(p, line, col, "nesting too deep (limit %u)",
                               p->maxDepth);
    return fzpErrorAtLineCol(p, line, col, "%s", errMsg);
  }
  *end = e;
  if (p->fatal)
    return false;
  /* The closing '>' is the last consumed token. */
  p->prev = p->tok;
  p->prev.start = e - 1;
  p->prev.len = 1;
  fzLexerGetLineCol(&p->lx, e - 1, &p->prev.line, &p->prev.col);
  fzLexerNext(&p->lx, &p->tok);
  return true;
}

/*===--- Keyword types ----------------------------------------------------===*/

typedef enum KwType {
  KW_NOT_TYPE,
  KW_INT,
  KW_SIGNED,
  KW_INDEX,
  KW_F16,
  KW_BF16,
  KW_F32,
  KW_F64,
  KW_NONE,
  KW_TENSOR,
  KW_VECTOR,
  KW_BUFFER,
} KwType;

static bool all_digits(const char *s, size_t n) {
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

static bool spelled(const FzToken *t, const char *kw) {
  size_t n = strlen(kw);
  return t->len == n && memcmp(t->start, kw, n) == 0;
}

static KwType classify(const FzToken *t) {
  if (t->kind != FZ_TOK_BARE_IDENT)
    return KW_NOT_TYPE;
  const char *s = t->start;
  size_t n = t->len;
  if (s[0] == 'i' && all_digits(s + 1, n - 1))
    return KW_INT;
  if ((s[0] == 's' || s[0] == 'u') && n > 2 && s[1] == 'i' &&
      all_digits(s + 2, n - 2))
    return KW_SIGNED;
  if (spelled(t, "index"))
    return KW_INDEX;
  if (spelled(t, "f16"))
    return KW_F16;
  if (spelled(t, "bf16"))
    return KW_BF16;
  if (spelled(t, "f32"))
    return KW_F32;
  if (spelled(t, "f64"))
    return KW_F64;
  if (spelled(t, "none"))
    return KW_NONE;
  if (spelled(t, "tensor"))
    return KW_TENSOR;
  if (spelled(t, "vector"))
    return KW_VECTOR;
  if (spelled(t, "buffer"))
    return KW_BUFFER;
  return KW_NOT_TYPE;
}

bool fzpIsTypeStart(const FzAsmParser *p) {
  FzTokKind k = p->tok.kind;
  return k == FZ_TOK_LPAREN || k == FZ_TOK_EXCL_IDENT ||
         classify(&p->tok) != KW_NOT_TYPE;
}

/*===--- Shaped types -----------------------------------------------------===*/

static size_t dim_count(const FzAsmParser *p) {
  return p->dimStack.len / sizeof(int64_t);
}
static const int64_t *dims_at(const FzAsmParser *p, size_t i) {
  return FZP_AT(const int64_t, p->dimStack.data, i);
}
static bool push_dim(FzAsmParser *p, int64_t d) {
  fzBufAppend(&p->dimStack, &d, sizeof d);
  return !p->dimStack.failed || fzpOutOfMemory(p);
}

/* The 'x' after a dimension. */
static bool parse_x(FzAsmParser *p) {
  if (fzpIs(p, FZ_TOK_BARE_IDENT) && p->tok.start[0] == 'x') {
    if (p->tok.len == 1)
      fzpAdvance(p);
    else
      fzpRelexFrom(p, p->tok.start + 1);
    return true;
  }
  return fzpErrorAt(p, &p->tok, "expected 'x' in dimension list");
}

/* dim-list: pushes the dimensions on dimStack, from index base on. The
 * rank limit is checked at each dimension: every 'x' relexes the rest
 * of the list as one identifier, so reading 100,000 dimensions before
 * checking would take quadratic time. */
static bool parse_dims(FzAsmParser *p, size_t base, const char *what) {
  for (;;) {
    int64_t d;
    if ((fzpIs(p, FZ_TOK_QUESTION) || fzpIs(p, FZ_TOK_INTEGER)) &&
        dim_count(p) - base == FZ_MAX_RANK)
      return fzpErrorAt(p, &p->tok, "%s rank exceeds the limit of %d at "
                        "dimension %d", what, FZ_MAX_RANK, FZ_MAX_RANK + 1);
    if (fzpIs(p, FZ_TOK_QUESTION)) {
      d = FZ_DYNAMIC;
      fzpAdvance(p);
    } else if (fzpIs(p, FZ_TOK_INTEGER)) {
      FzToken t = p->tok;
      if (t.len > 1 && t.start[1] == 'x') {
        /* "0x4xf32" is 0, x, 4, x, f32: not a hex literal. */
        d = 0;
        fzpRelexFrom(p, t.start + 1);
      } else {
        uint64_t v;
        if (!fzpTokenToU64(&t, &v) || v > (uint64_t)FZ_MAX_DIM)
          return fzpErrorAt(p, &t, "dimension too large");
        d = (int64_t)v;
        fzpAdvance(p);
      }
    } else if (fzpIs(p, FZ_TOK_LSQUARE)) {
      return fzpErrorAt(p, &p->tok, "scalable vector dimensions ([4]) are "
                                    "not supported by fuse");
    } else {
      return true;
    }
    if (!push_dim(p, d) || !parse_x(p))
      return false;
  }
}

/* The ", strides [..], space" tail of a buffer type; strides are pushed
 * after the shape. */
static bool parse_buffer_tail(FzAsmParser *p, size_t rank, bool *hasStrides,
                              unsigned *space) {
  *hasStrides = false;
  *space = 0;
  if (!fzpConsumeIf(p, FZ_TOK_COMMA))
    return true;
  if (fzpIsKeyword(p, "strides")) {
    fzpAdvance(p);
    if (!fzpExpect(p, FZ_TOK_LSQUARE, "expected '[' after 'strides'"))
      return false;
    size_t n = 0;
    if (!fzpIs(p, FZ_TOK_RSQUARE)) {
      do {
        int64_t s;
        if (fzpIs(p, FZ_TOK_QUESTION)) {
          s = FZ_DYNAMIC;
        } else {
          uint64_t v;
          if (!fzpIs(p, FZ_TOK_INTEGER))
            return fzpErrorAt(p, &p->tok, "expected stride");
          if (!fzpTokenToU64(&p->tok, &v) || v > (uint64_t)INT64_MAX)
            return fzpErrorAt(p, &p->tok, "stride too large");
          s = (int64_t)v;
        }
        fzpAdvance(p);
        if (!push_dim(p, s))
          return false;
        ++n;
      } while (fzpConsumeIf(p, FZ_TOK_COMMA));
    }
    FzToken close = p->tok;
    if (!fzpExpect(p, FZ_TOK_RSQUARE, "expected ']' after strides"))
      return false;
    if (n != rank)
      return fzpErrorAt(p, &close, "expected %zu strides but got %zu", rank,
                        n);
    *hasStrides = true;
    if (!fzpConsumeIf(p, FZ_TOK_COMMA))
      return true;
  }
  uint64_t v;
  if (!fzpIs(p, FZ_TOK_INTEGER))
    return fzpErrorAt(p, &p->tok, "expected memory space");
  if (!fzpTokenToU64(&p->tok, &v) || v > UINT32_MAX)
    return fzpErrorAt(p, &p->tok, "memory space too large");
  *space = (unsigned)v;
  fzpAdvance(p);
  return true;
}

/* True when the shaped type constructor cannot reject these parts (a
 * conservative check: false means "maybe"). */
static bool surely_valid(KwType kw, bool unranked, size_t rank,
                         const int64_t *shape, const FzType *elt) {
  if (!fzTypeIsFloat(elt) && !fzTypeIsIntOrIndex(elt))
    return false;
  if (unranked)
    return true;
  if (rank > FZ_MAX_RANK || (kw == KW_VECTOR && rank == 0))
    return false;
  int64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    int64_t d = shape[i];
    if (d == FZ_DYNAMIC) {
      if (kw == KW_VECTOR)
        return false;
      continue;
    }
    if (d < 0 || d > FZ_MAX_DIM || (d != 0 && count > FZ_MAX_ELEMENTS / d) ||
        (d == 0 && kw == KW_VECTOR))
      return false;
    count *= d;
  }
  return true;
}

static FzType *parse_shaped(FzAsmParser *p, KwType kw) {
  FzToken kwTok = p->tok;
  const char *what = kw == KW_TENSOR   ? "tensor"
                     : kw == KW_VECTOR ? "vector"
                                       : "buffer";
  fzpAdvance(p);
  if (!fzpIs(p, FZ_TOK_LESS)) {
    fzpErrorAt(p, &p->tok, "expected '<' in %s type", what);
    return NULL;
  }
  fzpAdvance(p);
  size_t base = dim_count(p);
  FzType *result = NULL;
  bool unranked = false;
  if (kw == KW_TENSOR && fzpIs(p, FZ_TOK_STAR)) {
    fzpAdvance(p);
    if (!parse_x(p))
      goto done;
    unranked = true;
  } else if (!parse_dims(p, base, what)) {
    goto done;
  }
  size_t rank = dim_count(p) - base;
  FzType *elt = fzpParseType(p);
  if (!elt)
    goto done;
  bool hasStrides = false;
  unsigned space = 0;
  if (kw == KW_BUFFER && !parse_buffer_tail(p, rank, &hasStrides, &space))
    goto done;
  if (kw == KW_TENSOR && fzpIs(p, FZ_TOK_COMMA)) {
    fzpErrorAt(p, &p->tok, "tensor encodings (tensor<4xf32, #enc>) are not "
                           "supported by fuse");
    goto done;
  }
  if (!fzpIs(p, FZ_TOK_GREATER)) {
    fzpErrorAt(p, &p->tok, "expected '>' in %s type", what);
    goto done;
  }
  fzpAdvance(p);
  const int64_t *shape = dims_at(p, base);
  /* Building a location for every type would fill the context with
   * locations nobody asked for: pass one only when the constructor may
   * report an error. */
  FzLoc *loc = surely_valid(kw, unranked, rank, shape, elt) && !hasStrides
                   ? NULL
                   : fzpLocAt(p, kwTok.line, kwTok.col);
  if (kw == KW_TENSOR)
    result = fzTensorTypeGet(p->ctx, unranked ? FZ_UNRANKED : rank, shape,
                             elt, loc);
  else if (kw == KW_VECTOR)
    result = fzVectorTypeGet(p->ctx, rank, shape, elt, loc);
  else
    result = fzBufferTypeGet(p->ctx, rank, shape, elt,
                             hasStrides && shape ? shape + rank : NULL, space, loc);
  if (!result)
    fzpNoteFailure(p);
done:
  p->dimStack.len = base * sizeof(int64_t);
  return result;
}

/*===--- Function, dialect and other types --------------------------------===*/

bool fzpParseTypeListParens(FzAsmParser *p) {
  if (!fzpExpect(p, FZ_TOK_LPAREN, "expected '('"))
    return false;
  if (fzpConsumeIf(p, FZ_TOK_RPAREN))
    return true;
  do {
    FzType *t = fzpParseType(p);
    if (!t)
      return false;
    if (!fzPtrVecPush(&p->ptrStack, t))
      return fzpOutOfMemory(p);
  } while (fzpConsumeIf(p, FZ_TOK_COMMA));
  return fzpExpect(p, FZ_TOK_RPAREN, "expected ')' at the end of type list");
}

bool fzpParseFunctionResults(FzAsmParser *p) {
  if (fzpIs(p, FZ_TOK_LPAREN))
    return fzpParseTypeListParens(p);
  FzType *t = fzpParseType(p);
  if (!t)
    return false;
  return fzPtrVecPush(&p->ptrStack, t) || fzpOutOfMemory(p);
}

static FzType *parse_function_type(FzAsmParser *p) {
  size_t base = p->ptrStack.len;
  FzType *result = NULL;
  if (!fzpParseTypeListParens(p))
    goto done;
  size_t numInputs = p->ptrStack.len - base;
  if (!fzpExpect(p, FZ_TOK_ARROW, "expected '->' in function type"))
    goto done;
  if (!fzpParseFunctionResults(p))
    goto done;
  FzType **types = FZP_AT(FzType *, p->ptrStack.data, base);
  result = fzFunctionTypeGet(p->ctx, numInputs, types,
                             p->ptrStack.len - base - numInputs,
                             types ? types + numInputs : NULL);
  if (!result)
    fzpOutOfMemory(p);
done:
  p->ptrStack.len = base;
  return result;
}

/* The dialect namespace and body of an opaque `!dialect.body`,
 * `!dialect<body>` type or `#...` attribute whose token is t (name and
 * len exclude the sigil); consumes it, pretty body included. */
bool fzpParseDialectBody(FzAsmParser *p, const FzToken *t, const char *name,
                         size_t len, FzStringRef *dialect,
                         FzStringRef *body) {
  const char *identEnd = t->start + t->len;
  const char *dot = memchr(name, '.', len);
  *dialect = (FzStringRef){name, dot ? (size_t)(dot - name) : len};
  if (dot)
    *body = (FzStringRef){dot + 1, (size_t)(identEnd - dot - 1)};
  else
    *body = (FzStringRef){identEnd, 0};
  if (*identEnd == '<') {
    const char *end;
    if (!fzpScanPrettyBody(p, &end))
      return false;
    if (dot)
      body->length = (size_t)(end - body->data);
    else
      *body = (FzStringRef){identEnd + 1, (size_t)(end - identEnd - 2)};
  } else {
    fzpAdvance(p);
  }
  if (dialect->length == 0) {
    fzpErrorAt(p, t, "expected dialect namespace");
    return false;
  }
  return true;
}

/* '!' alias-name, or an opaque dialect type. */
static FzType *parse_dialect_type(FzAsmParser *p) {
  FzToken t = p->tok;
  const char *name = t.start + 1;
  size_t len = t.len - 1;
  const char *identEnd = t.start + t.len;
  const char *dot = memchr(name, '.', len);
  if (!dot && *identEnd != '<') {
    FzpAlias *a = fzpLookupAlias(p, name, len, 1);
    if (!a) {
      fzpErrorAt(p, &t, "undefined symbol alias id '%.*s'", (int)len, name);
      return NULL;
    }
    fzpAdvance(p);
    return a->type;
  }
  FzStringRef dialect, body;
  if (!fzpParseDialectBody(p, &t, name, len, &dialect, &body))
    return NULL;
  FzType *type = fzOpaqueTypeGet(p->ctx, dialect, body);
  if (!type)
    fzpOutOfMemory(p);
  return type;
}

static FzType *parse_keyword_type(FzAsmParser *p) {
  FzContext *ctx = p->ctx;
  FzToken t = p->tok;
  FzType *type = NULL;
  switch (classify(&t)) {
  case KW_INT: {
    uint64_t w = 0;
    for (size_t i = 1; i < t.len && w <= 64; ++i)
      w = w * 10 + (uint64_t)(t.start[i] - '0');
    if (w < 1 || w > 64) {
      fzpErrorAt(p, &t,
                 "invalid integer type '%.*s': the width must be between 1 "
                 "and 64",
                 (int)t.len, t.start);
      return NULL;
    }
    type = fzIntegerTypeGet(ctx, (unsigned)w);
    break;
  }
  case KW_SIGNED:
    fzpErrorAt(p, &t, "signed/unsigned integer types are not supported");
    return NULL;
  case KW_INDEX:
    type = fzIndexTypeGet(ctx);
    break;
  case KW_F16:
    type = fzF16TypeGet(ctx);
    break;
  case KW_BF16:
    type = fzBF16TypeGet(ctx);
    break;
  case KW_F32:
    type = fzF32TypeGet(ctx);
    break;
  case KW_F64:
    type = fzF64TypeGet(ctx);
    break;
  case KW_NONE:
    type = fzNoneTypeGet(ctx);
    break;
  case KW_TENSOR:
  case KW_VECTOR:
  case KW_BUFFER:
    return parse_shaped(p, classify(&t));
  case KW_NOT_TYPE:
    fzpErrorAt(p, &t, "unknown type '%.*s'", (int)t.len, t.start);
    return NULL;
  }
  if (!type) {
    fzpOutOfMemory(p);
    return NULL;
  }
  fzpAdvance(p);
  return type;
}

static FzType *parse_type_uncached(FzAsmParser *p) {
  FzType *t = NULL;
  switch (p->tok.kind) {
  case FZ_TOK_LPAREN:
  case FZ_TOK_EXCL_IDENT:
  case FZ_TOK_BARE_IDENT:
    break;
  default:
    fzpErrorAt(p, &p->tok, "expected type");
    return NULL;
  }
  if (!fzpEnterNesting(p))
    return NULL;
  switch (p->tok.kind) {
  case FZ_TOK_LPAREN:
    t = parse_function_type(p);
    break;
  case FZ_TOK_EXCL_IDENT:
    t = parse_dialect_type(p);
    break;
  default:
    t = parse_keyword_type(p);
    break;
  }
  fzpLeaveNesting(p);
  if (!t)
    p->failed = true;
  return t;
}

static bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '.';
}

/* The cache slot for a type spelled at `start` (hash of its first bytes;
 * the entry is then checked byte for byte). */
static FzpTypeCacheEntry *cache_slot(FzAsmParser *p, const char *start) {
  size_t avail = (size_t)(p->lx.end - start);
  uint32_t h = fzHashBytes(start, avail < 12 ? avail : 12, 0x7e5);
  return &p->typeCache[(h ^ (h >> 16)) & (FZP_TYPE_CACHE_SIZE - 1)];
}

FzType *fzpParseType(FzAsmParser *p) {
  /* Only composite types are worth caching. */
  bool cacheable =
      p->tok.kind == FZ_TOK_LPAREN ||
      (p->tok.kind == FZ_TOK_BARE_IDENT && p->tok.len == 6 &&
       (spelled(&p->tok, "tensor") || spelled(&p->tok, "vector") ||
        spelled(&p->tok, "buffer")));
  if (!cacheable || p->fatal)
    return parse_type_uncached(p);
  const char *start = p->tok.start;
  FzpTypeCacheEntry *e = cache_slot(p, start);
  if (e->text && (size_t)(p->lx.end - start) >= e->len &&
      memcmp(e->text, start, e->len) == 0 &&
      !(is_ident_char(start[e->len - 1]) &&
        (is_ident_char(start[e->len]) || start[e->len] == '<')) &&
      p->depth + e->need <= p->maxDepth) {
    /* The same spelling: reposition after it (it spans no newline). */
    p->prev = p->tok;
    p->prev.start = start + e->len - 1;
    p->prev.col = p->tok.col + e->len - 1;
    p->prev.len = 1;
    fzLexerResetTo(&p->lx, start + e->len);
    fzLexerNext(&p->lx, &p->tok);
    return e->type;
  }
  unsigned savedPeak = p->depthPeak;
  p->depthPeak = p->depth;
  uint32_t line = p->tok.line;
  FzType *t = parse_type_uncached(p);
  unsigned need = p->depthPeak - p->depth;
  if (p->depthPeak < savedPeak)
    p->depthPeak = savedPeak;
  if (t && !p->fatal && p->prev.line == line) {
    const char *end = p->prev.start + p->prev.len;
    if (end > start && end - start < 512 && !memchr(start, '\n', end - start)) {
      e->text = start;
      e->len = (uint32_t)(end - start);
      e->need = need;
      e->type = t;
    }
  }
  return t;
}

/*===--- Locations --------------------------------------------------------===*/

static bool parse_u32(FzAsmParser *p, const char *what, unsigned *out) {
  uint64_t v;
  if (!fzpIs(p, FZ_TOK_INTEGER))
    return fzpErrorAt(p, &p->tok, "expected integer %s in FileLineColLoc",
                      what);
  if (!fzpTokenToU64(&p->tok, &v) || v > UINT32_MAX)
    return fzpErrorAt(p, &p->tok, "%s number too large", what);
  *out = (unsigned)v;
  fzpAdvance(p);
  return true;
}

static FzLoc *parse_fused_loc(FzAsmParser *p) {
  fzpAdvance(p); /* fused */
  FzAttr *meta = NULL;
  if (fzpConsumeIf(p, FZ_TOK_LESS)) {
    if (!(meta = fzpParseAttr(p, NULL)))
      return NULL;
    if (!fzpExpect(p, FZ_TOK_GREATER,
                   "expected '>' after fused location metadata"))
      return NULL;
  }
  if (!fzpExpect(p, FZ_TOK_LSQUARE, "expected '[' in fused location"))
    return NULL;
  size_t base = p->ptrStack.len;
  FzLoc *result = NULL;
  if (!fzpIs(p, FZ_TOK_RSQUARE)) {
    do {
      FzLoc *l = fzpParseLocInner(p);
      if (!l)
        goto done;
      if (!fzPtrVecPush(&p->ptrStack, l)) {
        fzpOutOfMemory(p);
        goto done;
      }
    } while (fzpConsumeIf(p, FZ_TOK_COMMA));
  }
  if (!fzpExpect(p, FZ_TOK_RSQUARE, "expected ']' in fused location"))
    goto done;
  result = fzFusedLocGet(p->ctx, p->ptrStack.len - base,
                         FZP_AT(FzLoc *, p->ptrStack.data, base), meta);
  if (!result)
    fzpOutOfMemory(p);
done:
  p->ptrStack.len = base;
  return result;
}

/* 'callsite' '(' loc-inner 'at' loc-inner ')' */
static FzLoc *parse_callsite_loc(FzAsmParser *p) {
  fzpAdvance(p);
  if (!fzpExpect(p, FZ_TOK_LPAREN, "expected '(' in callsite location"))
    return NULL;
  FzLoc *callee = fzpParseLocInner(p);
  if (!callee)
    return NULL;
  if (!fzpIsKeyword(p, "at")) {
    fzpErrorAt(p, &p->tok, "expected 'at' in callsite location");
    return NULL;
  }
  fzpAdvance(p);
  FzLoc *caller = fzpParseLocInner(p);
  if (!caller)
    return NULL;
  if (!fzpExpect(p, FZ_TOK_RPAREN, "expected ')' in callsite location"))
    return NULL;
  FzLoc *loc = fzCallSiteLocGet(p->ctx, callee, caller);
  if (!loc)
    fzpOutOfMemory(p);
  return loc;
}

static FzLoc *parse_loc_inner(FzAsmParser *p) {
  FzContext *ctx = p->ctx;
  FzToken t = p->tok;
  if (t.kind == FZ_TOK_BARE_IDENT) {
    if (spelled(&t, "unknown")) {
      fzpAdvance(p);
      return fzUnknownLocGet(ctx);
    }
    if (spelled(&t, "fused"))
      return parse_fused_loc(p);
    if (spelled(&t, "callsite"))
      return parse_callsite_loc(p);
  }
  if (t.kind == FZ_TOK_HASH_IDENT) {
    FzpAlias *a = fzpLookupAlias(p, t.start + 1, t.len - 1, 0);
    if (!a) {
      fzpErrorAt(p, &t, "undefined symbol alias id '%.*s'", (int)t.len - 1,
                 t.start + 1);
      return NULL;
    }
    if (!a->loc) {
      fzpErrorAt(p, &t, "expected location, but '%.*s' is an attribute alias",
                 (int)t.len, t.start);
      return NULL;
    }
    fzpAdvance(p);
    return a->loc;
  }
  if (t.kind != FZ_TOK_STRING) {
    fzpErrorAt(p, &t, "expected location instance");
    return NULL;
  }
  bool ok;
  FzStringRef s = fzpStringValue(p, &t, &ok);
  if (!ok)
    return NULL;
  fzpAdvance(p);
  FzLoc *loc;
  if (fzpConsumeIf(p, FZ_TOK_COLON)) {
    unsigned line = 0, col = 0;
    if (!parse_u32(p, "line", &line))
      return NULL;
    if (!fzpExpect(p, FZ_TOK_COLON, "expected ':' in FileLineColLoc"))
      return NULL;
    if (!parse_u32(p, "column", &col))
      return NULL;
    loc = fzFileLineColLocGet(ctx, s, line, col);
  } else if (fzpConsumeIf(p, FZ_TOK_LPAREN)) {
    FzLoc *child = fzpParseLocInner(p);
    if (!child)
      return NULL;
    if (!fzpExpect(p, FZ_TOK_RPAREN,
                   "expected ')' after child location of NameLoc"))
      return NULL;
    loc = fzNameLocGet(ctx, s, child);
  } else {
    loc = fzNameLocGet(ctx, s, NULL);
  }
  if (!loc)
    fzpOutOfMemory(p);
  return loc;
}

FzLoc *fzpParseLocInner(FzAsmParser *p) {
  if (!fzpEnterNesting(p))
    return NULL;
  FzLoc *loc = parse_loc_inner(p);
  fzpLeaveNesting(p);
  if (!loc)
    p->failed = true;
  return loc;
}

/* A placeholder for loc(#name) while #name is not yet defined. */
static FzLoc *defer_loc(FzAsmParser *p, const FzToken *t) {
  FzBuf b;
  fzBufInit(&b, p->ctx);
  fzBufPrintf(&b, "\x01fz.deferred-loc#%.*s", (int)t->len - 1, t->start + 1);
  FzLoc *ph = b.failed ? NULL : fzNameLocGet(p->ctx, fzBufRef(&b), NULL);
  fzBufFree(&b);
  if (!ph) {
    fzpOutOfMemory(p);
    return NULL;
  }
  if (fzPtrMapContains(&p->deferredMap, ph))
    return ph;
  FzpDeferredLoc *d = fzArenaAlloc(&p->arena, sizeof *d);
  if (!d) {
    fzpOutOfMemory(p);
    return NULL;
  }
  d->name = t->start + 1;
  d->len = t->len - 1;
  d->line = t->line;
  d->col = t->col;
  d->placeholder = ph;
  d->resolved = NULL;
  if (!fzPtrMapPut(&p->deferredMap, ph, d) ||
      !fzPtrVecPush(&p->deferred, d)) {
    fzpOutOfMemory(p);
    return NULL;
  }
  return ph;
}

bool fzpParseLoc(FzAsmParser *p, FzLoc **out, bool allowDeferred) {
  fzpAdvance(p); /* loc */
  if (!fzpExpect(p, FZ_TOK_LPAREN, "expected '(' in inline location"))
    return false;
  FzToken t = p->tok;
  FzLoc *loc;
  if (allowDeferred && t.kind == FZ_TOK_HASH_IDENT &&
      !memchr(t.start, '.', t.len) &&
      !fzpLookupAlias(p, t.start + 1, t.len - 1, 0)) {
    if (!(loc = defer_loc(p, &t)))
      return false;
    fzpAdvance(p);
  } else if (!(loc = fzpParseLocInner(p))) {
    return false;
  }
  if (!fzpExpect(p, FZ_TOK_RPAREN, "expected ')' in inline location"))
    return false;
  *out = loc;
  return true;
}

static FzWalkResult patch_locs(FzOp *op, void *userData) {
  FzAsmParser *p = userData;
  FzpDeferredLoc *d = fzPtrMapGet(&p->deferredMap, fzOpGetLoc(op));
  if (d)
    fzOpSetLoc(op, d->resolved);
  for (size_t i = 0; i < fzOpGetNumRegions(op); ++i)
    for (FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(op, i)); b;
         b = fzBlockGetNext(b))
      for (size_t j = 0; j < fzBlockGetNumArguments(b); ++j) {
        FzValue *arg = fzBlockGetArgument(b, j);
        if ((d = fzPtrMapGet(&p->deferredMap, fzValueGetLoc(arg))))
          fzValueSetLoc(arg, d->resolved);
      }
  return FZ_WALK_ADVANCE;
}

bool fzpResolveDeferredLocs(FzAsmParser *p, FzOp *root) {
  if (root) {
    fzOpWalk(root, FZ_WALK_PRE_ORDER, patch_locs, p);
    return true;
  }
  bool ok = true;
  for (size_t i = 0; i < p->deferred.len; ++i) {
    FzpDeferredLoc *d = p->deferred.data[i];
    FzpAlias *a = fzpLookupAlias(p, d->name, d->len, 0);
    if (a && a->loc) {
      d->resolved = a->loc;
      continue;
    }
    ok = false;
    if (a)
      fzpErrorAtLineCol(p, d->line, d->col,
                        "expected location, but '#%.*s' is an attribute "
                        "alias",
                        (int)d->len, d->name);
    else
      fzpErrorAtLineCol(p, d->line, d->col,
                        "undefined symbol alias id '%.*s'", (int)d->len,
                        d->name);
  }
  return ok;
}

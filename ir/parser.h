/* ir/parser.h - the state of a parse, shared by the files of the parser:
 * parser.c (entry points, tokens, diagnostics, top level, aliases),
 * parse_ops.c (operations, regions, blocks, error recovery),
 * parse_ssa.c (SSA name scopes, forward references, block labels),
 * parse_types.c (types and locations), parse_attrs.c (attributes) and
 * parse_asm.c (the FzAsmParser API of fz/opdef.h for custom parse hooks).
 *
 * Private to ir/. `struct FzAsmParser` is the whole parser: a custom parse
 * hook receives a pointer to it. Everything the parse allocates for its
 * own bookkeeping lives in `arena` or in the maps and stacks below and is
 * released by fzpFinish; the IR it builds is owned by the caller on
 * success and destroyed on failure. Internal functions are prefixed fzp.
 *
 * Error discipline: a parse function that fails has already reported a
 * located error (or a previous error was suppressed by the error limit)
 * and returns false/NULL; `failed` is then set, so the whole parse yields
 * NULL. After FZP_MAX_ERRORS errors the parse turns `fatal`: the current
 * token becomes EOF and everything unwinds without further reports.
 */
#ifndef FZ_IR_PARSER_H
#define FZ_IR_PARSER_H

#include "ir/internal.h"
#include "ir/lexer.h"

#define FZP_MAX_ERRORS 20

/*===--- A string-keyed hash map for the parse ----------------------------===*/

/* Keys are (bytes, tag); the bytes must outlive the map (they point into
 * the source buffer or the parse arena). No removal. */
typedef struct FzpStrSlot {
  const char *key; /* NULL: empty slot */
  size_t len;
  uint32_t hash;
  uint32_t tag;
  void *value;
} FzpStrSlot;

typedef struct FzpStrMap {
  FzContext *ctx;
  FzpStrSlot *slots;
  size_t count, cap; /* cap is 0 or a power of two */
} FzpStrMap;

void fzpStrMapInit(FzpStrMap *m, FzContext *ctx);
void fzpStrMapFree(FzpStrMap *m);
uint32_t fzpStrHash(const char *key, size_t len, uint32_t tag);
/* The value, or NULL. */
void *fzpStrMapGet(const FzpStrMap *m, const char *key, size_t len,
                   uint32_t tag, uint32_t hash);
/* Inserts or overwrites; false on allocation failure. */
bool fzpStrMapPut(FzpStrMap *m, const char *key, size_t len, uint32_t tag,
                  uint32_t hash, void *value);

/*===--- Parse records --------------------------------------------------===*/

/* An SSA use as the generic parser keeps it (no FzLoc built). */
/* Largest N accepted in a use "%name#N" (a forward reference reserves
 * N + 1 slots). */
#define FZP_MAX_RESULT_NUMBER ((uint32_t)1 << 20)

typedef struct FzpUse {
  const char *name; /* without '%' */
  uint32_t len;
  uint32_t number;  /* #N */
  uint32_t line, col;
} FzpUse;

/* One "%name" or "%name:N" of an op's result list. */
typedef struct FzpResultName {
  const char *name;
  uint32_t len;
  uint32_t count;
  uint32_t line, col;
} FzpResultName;

/* One region scope (see parse_ssa.c). */
typedef struct FzpScope {
  bool isolated;
  uint32_t savedSsaTag; /* isolated: the enclosing name scope's tag */
  uint32_t regionTag;   /* block labels of this region */
  size_t defMark;       /* defStack length at entry */
  size_t fwdMark;       /* fwdStack length at entry (isolated only) */
  size_t savedFamBase;  /* isolated: the enclosing scope's famBase */
} FzpScope;

/* SSA names that end in a canonical decimal number ("%0", "%arg3",
 * "%v12", "%cst_4") are looked up by number in an array per prefix
 * (a family) instead of in the hash map (see parse_ssa.c). */
typedef struct FzpFamily {
  const char *prefix; /* stable (buffer or arena) */
  uint32_t len;
  void **slots;       /* FzpSsaEntry by number; NULL: none yet */
  size_t cap;
} FzpFamily;

/* An alias definition: #name = attr | loc, or !name = type. */
typedef struct FzpAlias {
  FzAttr *attr;
  FzLoc *loc;
  FzType *type;
} FzpAlias;

/* A recently parsed composite type and its exact spelling: identical
 * text parses to the identical type, so a repeated spelling (the common
 * case: every op of a graph repeats its function type) skips the
 * parse. */
typedef struct FzpTypeCacheEntry {
  const char *text; /* into the buffer; NULL: empty */
  uint32_t len;
  uint32_t need;    /* nesting levels the type used */
  FzType *type;
} FzpTypeCacheEntry;

#define FZP_TYPE_CACHE_SIZE 64

/* A loc(#alias) seen before #alias was defined. */
typedef struct FzpDeferredLoc {
  const char *name; /* alias name without '#' */
  size_t len;
  uint32_t line, col;   /* first use */
  FzLoc *placeholder;
  FzLoc *resolved;      /* set once the alias is known */
} FzpDeferredLoc;

struct FzAsmParser {
  FzContext *ctx;
  FzLexer lx;
  FzToken tok;        /* current token */
  FzToken prev;       /* last consumed token (kind EOF before the first) */
  FzStringRef fileName;
  FzIdent *fileIdent; /* fileName interned once, for op locations */
  unsigned lineOffset;
  FzArena arena;      /* parse-lifetime scratch */

  size_t errorsAtStart;
  bool failed;        /* an error was reported in this parse */
  bool fatal;         /* error limit or allocation failure: unwind */
  unsigned depth;       /* nesting of types, attributes and locations */
  unsigned regionDepth; /* nesting of regions */
  unsigned maxDepth;    /* limit of each (fzContextGetMaxNesting) */
  unsigned depthPeak;   /* deepest `depth` reached (type cache) */
  FzpTypeCacheEntry typeCache[FZP_TYPE_CACHE_SIZE];

  /* Aliases: tag 0 attributes and locations, tag 1 types. */
  FzpStrMap aliases;

  /* SSA names (see parse_ssa.c). */
  FzpStrMap ssa;      /* (name, name-scope tag) -> FzpSsaEntry */
  FzpFamily *families; /* of every isolated scope entered, innermost last */
  size_t numFamilies, capFamilies;
  size_t famBase;     /* the current isolated scope's first family */
  unsigned isoDepth;  /* isolated name scopes entered */
  FzpStrMap labels;   /* (label, region tag) -> FzpLabel */
  uint32_t ssaTag;    /* tag of the current isolated name scope */
  uint32_t nextTag;
  FzpScope *scopes;
  size_t numScopes, capScopes;
  FzPtrVec defStack;  /* entries defined, innermost region last */
  FzPtrVec fwdStack;  /* entries that got forward references */

  /* Custom ops. */
  const char *defaultDialect; /* for op names without a '.' */
  bool regionsIsolated;       /* regions of the op being parsed */

  /* Deferred loc(#alias) references: placeholder loc -> FzpDeferredLoc. */
  FzPtrVec deferred;  /* FzpDeferredLoc*, in order of first use */
  FzPtrMap deferredMap;

  /* Scratch stacks reused across nested constructs: callers remember the
   * length on entry and truncate back to it. */
  FzPtrVec ptrStack;  /* FzAttr*, FzType*, FzLoc* */
  FzBuf namedStack;   /* FzNamedAttr */
  FzBuf useStack;     /* FzpUse */
  FzBuf resultStack;  /* FzpResultName */
  FzBuf dimStack;     /* int64_t dimensions */
};

/* Element i of a scratch stack's storage, as T*: NULL rather than an
 * offset from NULL when the stack has never held anything. */
#define FZP_AT(T, data, i) ((data) ? (T *)(void *)(data) + (i) : (T *)NULL)

/*===--- parser.c: tokens and diagnostics ---------------------------------===*/

void fzpInit(FzAsmParser *p, FzContext *ctx, FzStringRef fileName,
             const char *buf, size_t len, unsigned lineOffset);
void fzpFinish(FzAsmParser *p);

void fzpAdvance(FzAsmParser *p);
static inline bool fzpIs(const FzAsmParser *p, FzTokKind k) {
  return p->tok.kind == k;
}
/* Consumes the current token if it has kind k. */
bool fzpConsumeIf(FzAsmParser *p, FzTokKind k);
/* Consumes a token of kind k or reports `msg` ("expected ')'"). */
bool fzpExpect(FzAsmParser *p, FzTokKind k, const char *msg);
/* True when the current token is the bare identifier kw. */
bool fzpIsKeyword(const FzAsmParser *p, const char *kw);

FzLoc *fzpLocAt(FzAsmParser *p, uint32_t line, uint32_t col);
FzLoc *fzpTokLoc(FzAsmParser *p, const FzToken *t);
/* Line/column where an error about the current token goes (for EOF: just
 * after the previous token). */
void fzpErrorPos(FzAsmParser *p, const FzToken *t, uint32_t *line,
                 uint32_t *col);

/* Reports an error at token t (an ERROR token reports its lexer message
 * instead; at EOF the message says so). Always returns false. */
bool fzpErrorAt(FzAsmParser *p, const FzToken *t, const char *fmt, ...)
    FZ_PRINTF(3, 4);
bool fzpErrorAtV(FzAsmParser *p, const FzToken *t, const char *fmt,
                 va_list ap);
bool fzpErrorAtLineCol(FzAsmParser *p, uint32_t line, uint32_t col,
                       const char *fmt, ...) FZ_PRINTF(4, 5);
bool fzpErrorAtLocV(FzAsmParser *p, FzLoc *loc, const char *fmt, va_list ap);
/* Begins an error diagnostic (to attach notes); NULL when suppressed.
 * Report it with fzpDiagReport (NULL is fine). */
FzDiagnostic *fzpDiagBegin(FzAsmParser *p, uint32_t line, uint32_t col,
                           const char *fmt, ...) FZ_PRINTF(4, 5);
void fzpDiagReport(FzAsmParser *p, FzDiagnostic *d);
/* Marks the parse failed and checks the error limit; call after errors
 * reported by others (hooks, type constructors). */
void fzpNoteFailure(FzAsmParser *p);
/* Records an allocation failure: reports once and turns the parse fatal. */
bool fzpOutOfMemory(FzAsmParser *p);

/* Enters one level of type/attribute/location nesting (reporting
 * "nesting too deep" past the limit); pair each successful call with
 * fzpLeaveNesting. Regions count separately (parse_ops.c). */
bool fzpEnterNesting(FzAsmParser *p);
static inline void fzpLeaveNesting(FzAsmParser *p) { --p->depth; }

/* The contents of a string token (without quotes, "@" or escapes):
 * points into the buffer when there are no escapes, else into the arena.
 * Sets ok false on allocation failure. */
FzStringRef fzpStringValue(FzAsmParser *p, const FzToken *t, bool *ok);

/* Alias lookup (tag 0: attributes/locations, 1: types). */
FzpAlias *fzpLookupAlias(FzAsmParser *p, const char *name, size_t len,
                         uint32_t tag);

/*===--- parse_types.c: types and locations --------------------------------===*/

/* The value of an INTEGER token (decimal or 0x hex); false on overflow. */
bool fzpTokenToU64(const FzToken *t, uint64_t *out);
/* Moves the lexer back to ptr inside the current token and relexes (to
 * split "4xf32" in dimension lists). */
void fzpRelexFrom(FzAsmParser *p, const char *ptr);
/* Scans a pretty dialect body "<...>" that starts right after the current
 * token (which is consumed); *end receives the pointer after '>'. */
bool fzpScanPrettyBody(FzAsmParser *p, const char **end);
/* The namespace and body of an opaque dialect type or attribute token
 * (parse_types.c); consumes the token and any pretty body. */
bool fzpParseDialectBody(FzAsmParser *p, const FzToken *t, const char *name,
                         size_t len, FzStringRef *dialect, FzStringRef *body);

/* True when the current token can start a type. */
bool fzpIsTypeStart(const FzAsmParser *p);
FzType *fzpParseType(FzAsmParser *p);
/* "(" types ")" or a single non-function type, after "->"; pushes the
 * types on ptrStack. */
bool fzpParseFunctionResults(FzAsmParser *p);
/* "(" [type ("," type)*] ")": pushes the types on ptrStack. */
bool fzpParseTypeListParens(FzAsmParser *p);
/* The inside of loc(...). */
FzLoc *fzpParseLocInner(FzAsmParser *p);
/* At the keyword `loc`: "loc" "(" inner ")". With allowDeferred, a
 * reference loc(#alias) to an alias not yet defined gives a placeholder
 * resolved at the end of the parse (as MLIR allows for trailing
 * locations). */
bool fzpParseLoc(FzAsmParser *p, FzLoc **out, bool allowDeferred);
/* Replaces deferred placeholders in the ops under `root` (reports
 * undefined aliases). */
bool fzpResolveDeferredLocs(FzAsmParser *p, FzOp *root);

/*===--- parse_attrs.c: attributes -----------------------------------------===*/

/* An attribute; a non-NULL type types a bare number literal (no ": type"
 * is parsed then). */
FzAttr *fzpParseAttr(FzAsmParser *p, FzType *type);
/* "{" entries "}" onto namedStack (duplicates reported); the caller
 * truncates namedStack back to *base. */
bool fzpParseDictEntries(FzAsmParser *p, size_t *base, size_t *n);
/* "{" entries "}" as a dictionary attribute. */
FzAttr *fzpParseDictAttr(FzAsmParser *p);

/*===--- parse_ssa.c: name scopes --------------------------------------------===*/

bool fzpPushScope(FzAsmParser *p, bool isolated);
/* Pops a region scope; at the end of an isolated one, reports every name
 * still used but undefined. */
void fzpPopScope(FzAsmParser *p);
/* The value of a use, a forward-reference placeholder of `type` when not
 * yet defined, or NULL after an error. type may be NULL only when the
 * name must already be defined. */
FzValue *fzpResolveUse(FzAsmParser *p, const FzpUse *u, FzType *type);
/* Defines %name (numbered 0..n-1) as vals; resolves forward references. */
bool fzpDefineValues(FzAsmParser *p, const char *name, size_t len,
                     uint32_t line, uint32_t col, FzValue *const *vals,
                     size_t n);
/* Marks %name as defined by an op that failed to parse, so that its uses
 * report nothing more (the parse has failed already). */
void fzpPoisonValues(FzAsmParser *p, const char *name, size_t len);
/* Registers a block label in the current region (duplicates reported). */
bool fzpDefineLabel(FzAsmParser *p, const FzToken *labelTok);
void fzpSsaFree(FzAsmParser *p);

/*===--- parse_ops.c: operations and regions --------------------------------===*/

/* Parses one operation (results, name, body, trailing location) and
 * defines its results; NULL after an error. */
FzOp *fzpParseOperation(FzAsmParser *p);
/* Parses ops into block until '}', '^' or EOF, recovering after bad ops. */
void fzpParseBlockBody(FzAsmParser *p, FzBlock *block);
/* "{" blocks "}" into region; entry arguments as in fzAsmParseRegion.
 * Uses p->regionsIsolated for the name scope. */
bool fzpParseRegion(FzAsmParser *p, FzRegion *region, size_t numArgs,
                    const FzAsmArgument *args, bool argsGiven);
/* An SSA use "%name" or "%name#N" at the current token. */
bool fzpParseUse(FzAsmParser *p, FzpUse *out);
/* The lexer's brace depth before the current token. */
static inline int fzpDepthBeforeTok(const FzAsmParser *p) {
  int d = p->lx.braceDepth;
  if (p->tok.kind == FZ_TOK_LBRACE)
    --d;
  else if (p->tok.kind == FZ_TOK_RBRACE)
    ++d;
  return d;
}
/* Skips input after a failed op (see parse_ops.c). */
void fzpRecover(FzAsmParser *p, int braceDepth, const char *opStart);

#endif /* FZ_IR_PARSER_H */

/* fz/opdef.h - defining dialects and operations from C.
 *
 * A dialect is a static table of op definitions registered into a
 * context. Behaviour lives in the table: traits plus hooks for verify,
 * fold, result-type inference, custom print and parse, canonicalization
 * patterns, fusion kind and interpretation. The library reaches ops only
 * through these tables, never through a switch over op names.
 *
 * Custom assembly hooks talk to the printer and parser through
 * FzAsmPrinter and FzAsmParser, modelled on MLIR's OpAsmPrinter and
 * OpAsmParser. The framework prints the result names and the op name
 * (with the enclosing op's default dialect prefix elided) before calling
 * the print hook, and parses them before calling the parse hook; the
 * location is handled by the framework as well.
 *
 * Ownership: FzOpDef and FzDialectDef tables (and every string and array
 * they point to) belong to the embedder and must outlive every context
 * they are registered in; static const tables are the intended use, and
 * one table may be registered in many contexts on many threads. Hooks are
 * plain functions called on the thread using the context. FzAsmPrinter
 * and FzAsmParser are valid only during the hook call they are passed to.
 */
#ifndef FZ_OPDEF_H
#define FZ_OPDEF_H

#include "fz/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FzAsmPrinter FzAsmPrinter;
typedef struct FzAsmParser FzAsmParser;
typedef struct FzPatternSet FzPatternSet; /* see fz/pass.h */

/* Traits: bits in FzOpDef.traits. */
enum {
  FZ_TRAIT_PURE = 1u << 0,                /* no side effects */
  FZ_TRAIT_COMMUTATIVE = 1u << 1,
  FZ_TRAIT_ELEMENTWISE = 1u << 2,
  FZ_TRAIT_TERMINATOR = 1u << 3,
  FZ_TRAIT_ISOLATED_FROM_ABOVE = 1u << 4, /* regions see no outer values */
  FZ_TRAIT_SAME_OPERANDS_AND_RESULT_TYPE = 1u << 5,
  FZ_TRAIT_SYMBOL_TABLE = 1u << 6,        /* region 0 holds symbols */
  FZ_TRAIT_SYMBOL = 1u << 7,              /* has a sym_name */
  FZ_TRAIT_NO_TERMINATOR = 1u << 8,       /* blocks need no terminator */
  FZ_TRAIT_SINGLE_BLOCK = 1u << 9,        /* each region has <= 1 block */
  FZ_TRAIT_CONSTANT_LIKE = 1u << 10,      /* folds to its "value" attr */
  FZ_TRAIT_GRAPH_REGION = 1u << 11,       /* no dominance inside regions */
  FZ_TRAIT_RETURN_LIKE = 1u << 12,
  FZ_TRAIT_SAME_OPERANDS_SHAPE = 1u << 13,
};

/* Operand/result/region count meaning "any number" (the verify hook then
 * checks what it needs). */
#define FZ_VARIADIC (-1)

/* How the fusion pass treats an op (a lattice like TVM's op patterns,
 * ordered from most to least fusable). */
typedef enum FzFusionKind {
  FZ_FUSION_ELEMENTWISE,
  FZ_FUSION_BROADCAST,
  FZ_FUSION_INJECTIVE,
  FZ_FUSION_REDUCTION,
  FZ_FUSION_CONTRACTION, /* matmul/conv: elementwise epilogues fuse */
  FZ_FUSION_OPAQUE,
} FzFusionKind;

/* What a fold produces for one result: an existing value, or a constant
 * attribute that the dialect materializes. Exactly one is non-NULL. */
typedef struct FzFoldResult {
  FzValue *value;
  FzAttr *attr;
} FzFoldResult;

struct FzOpDef {
  const char *name;    /* full name, "dialect.op" */
  const char *summary; /* one line, for docs and --help */
  uint64_t traits;     /* FZ_TRAIT_* */
  int numOperands;     /* exact count, or FZ_VARIADIC */
  int numResults;      /* exact count, or FZ_VARIADIC */
  int numRegions;      /* exact count, or FZ_VARIADIC */
  FzFusionKind fusionKind;
  /* Names of inherent attributes, NULL-terminated (may be NULL). Stored
   * as properties: printed in <{...}> in generic form. */
  const char *const *inherentAttrs;
  /* Dialect whose prefix may be elided for ops nested in this op's
   * regions (func.func: "func", so `return` means func.return). */
  const char *defaultDialect;

  /* Checks op-specific invariants; reports errors and returns false.
   * Counts and traits have been checked before it runs. */
  bool (*verify)(FzOp *op);
  /* Folds op given its operands' constant values (NULL where not
   * constant). Fills results[0..numResults) and returns true if it
   * folded; may instead update op in place and return true with
   * results[0].value == the op's own result. */
  bool (*fold)(FzOp *op, FzAttr *const *constOperands, FzFoldResult *results);
  /* Infers result types from operands and attributes; reports errors at
   * loc and returns false. resultTypes has room for numResults. */
  bool (*inferResultTypes)(FzContext *ctx, FzLoc *loc, size_t numOperands,
                           FzType *const *operandTypes, FzAttr *attrs,
                           FzAttr *props, FzType **resultTypes);
  /* Custom assembly: print everything after the op name. */
  void (*print)(FzOp *op, FzAsmPrinter *p);
  /* Custom assembly: parse everything after the op name into st. */
  bool (*parse)(FzAsmParser *p, FzOpState *st);
  /* Adds this op's canonicalization patterns. */
  void (*getCanonicalizationPatterns)(FzPatternSet *set, FzContext *ctx);
  /* Dialect-specific behaviour, e.g. the graph interpreter's kernel
   * (a const FzGraphKernel *, fz/graph.h; the graph interpreter only
   * looks at it for graph.* ops). NULL: none. */
  const void *interpret;
  /* Anything else the op's dialect wants to attach; fuse ignores it. */
  const void *extra;
};

typedef struct FzDialectDef {
  const char *name; /* "graph" */
  const char *summary;
  const FzOpDef *const *ops; /* numOps definitions, none NULL */
  size_t numOps;
  /* Creates a constant op holding `value` of `type` at the builder's
   * insertion point, for folding; NULL if the dialect cannot. */
  FzOp *(*materializeConstant)(FzBuilder *b, FzAttr *value, FzType *type,
                               FzLoc *loc);
} FzDialectDef;

/* Registers a dialect (the table must outlive the context). Registering
 * the same table twice is a no-op; a different dialect of the same name,
 * or an op name outside the dialect's namespace, is an error. */
FZ_API FZ_MUST_CHECK bool fzContextRegisterDialect(FzContext *ctx,
                                                   const FzDialectDef *def);
/* The dialect registered under name, or NULL. */
FZ_API const FzDialectDef *fzContextLookupDialect(const FzContext *ctx,
                                                  FzStringRef name);
/* The definition of a registered op, or NULL. */
FZ_API const FzOpDef *fzContextLookupOpDef(const FzContext *ctx,
                                           FzStringRef name);
/* Calls fn for every registered op definition (registration order). */
FZ_API void fzContextForEachOpDef(const FzContext *ctx,
                                  void (*fn)(const FzOpDef *def, void *ud),
                                  void *ud);

/*===------------------------------------------------------------------===*
 * FzAsmPrinter: used by print hooks
 *===------------------------------------------------------------------===*/

/* Text as is (NUL-terminated / printf format / sized). */
FZ_API void fzAsmPrint(FzAsmPrinter *p, const char *text);
FZ_API void fzAsmPrintf(FzAsmPrinter *p, const char *fmt, ...) FZ_PRINTF(2, 3);
FZ_API void fzAsmPrintString(FzAsmPrinter *p, FzStringRef text);
/* %name of a value (as numbered by the printer). */
FZ_API void fzAsmPrintOperand(FzAsmPrinter *p, FzValue *v);
/* Operands of op, comma-separated. */
FZ_API void fzAsmPrintOperands(FzAsmPrinter *p, FzOp *op);
/* A type or an attribute in the textual format. */
FZ_API void fzAsmPrintType(FzAsmPrinter *p, const FzType *t);
/* Types separated by ", " (no parentheses). */
FZ_API void fzAsmPrintTypes(FzAsmPrinter *p, size_t n, FzType *const *types);
FZ_API void fzAsmPrintAttr(FzAsmPrinter *p, const FzAttr *a);
/* Prints " {a = 1, ...}" for the entries of dict (may be NULL) whose
 * names are not in elided (NULL-terminated, may be NULL); prints nothing
 * when no entry is left. With withKeyword: " attributes {...}". */
FZ_API void fzAsmPrintOptionalAttrDict(FzAsmPrinter *p, const FzAttr *dict,
                                       const char *const *elided,
                                       bool withKeyword);
/* @name, quoted when not a bare identifier. */
FZ_API void fzAsmPrintSymbolName(FzAsmPrinter *p, FzStringRef name);
/* A block argument's declaration "%arg0: type" (+ loc with debuginfo). */
FZ_API void fzAsmPrintArgumentDecl(FzAsmPrinter *p, FzValue *arg);
/* " loc(...)" when debuginfo is on; nothing otherwise. */
FZ_API void fzAsmPrintOptionalLoc(FzAsmPrinter *p, FzLoc *loc);
/* Prints a region in braces, starting with " {". The entry block's
 * label and arguments are omitted when printEntryArgs is false (the
 * custom form printed them, as func.func does). */
FZ_API void fzAsmPrintRegion(FzAsmPrinter *p, FzRegion *region,
                             bool printEntryArgs);
/* The context of the op being printed, and the FZ_PRINT_* flags of this
 * print (a hook may print differently with FZ_PRINT_DEBUGINFO). */
FZ_API FzContext *fzAsmPrinterGetContext(const FzAsmPrinter *p);
FZ_API unsigned fzAsmPrinterGetFlags(const FzAsmPrinter *p);

/*===------------------------------------------------------------------===*
 * FzAsmParser: used by parse hooks
 *
 * Required forms report an error at the current token and return false;
 * Optional forms return false without reporting when absent.
 *===------------------------------------------------------------------===*/

/* A parsed but not yet resolved SSA use: "%name" or "%name#3". */
typedef struct FzUnresolvedOperand {
  FzStringRef name; /* without '%' */
  unsigned number;  /* the #N suffix, 0 when absent */
  FzLoc *loc;
} FzUnresolvedOperand;

/* A block argument being declared: "%name: type loc(...)?". */
typedef struct FzAsmArgument {
  FzUnresolvedOperand ssa;
  FzType *type;
  FzAttr *attrs; /* "{...}" after the type when allowed; may be NULL */
  FzLoc *loc;    /* from an explicit loc(...), else the name's location */
} FzAsmArgument;

/* Errors reported through these are at a location in the source (the
 * current token, or loc); both return false for `return fzAsmEmitError(...)`.
 * After a parse hook returns false the parser discards st (and reports a
 * generic "failed to parse custom op" when the hook reported nothing). */
FZ_API FzContext *fzAsmParserGetContext(const FzAsmParser *p);
/* Location of the current token. */
FZ_API FzLoc *fzAsmParserGetCurrentLoc(const FzAsmParser *p);
FZ_API bool fzAsmEmitError(FzAsmParser *p, const char *fmt, ...)
    FZ_PRINTF(2, 3);
FZ_API bool fzAsmEmitErrorAt(FzAsmParser *p, FzLoc *loc, const char *fmt, ...)
    FZ_PRINTF(3, 4);

/* Punctuation: one of , : = ( ) [ ] { } < > -> ? * + ... */
FZ_API FZ_MUST_CHECK bool fzAsmParsePunct(FzAsmParser *p, const char *punct);
FZ_API bool fzAsmParseOptionalPunct(FzAsmParser *p, const char *punct);
/* A bare keyword (identifier) equal to kw. */
FZ_API FZ_MUST_CHECK bool fzAsmParseKeyword(FzAsmParser *p, const char *kw);
FZ_API bool fzAsmParseOptionalKeyword(FzAsmParser *p, const char *kw);
/* Any bare identifier; the string points into the source buffer. */
FZ_API bool fzAsmParseOptionalIdentifier(FzAsmParser *p, FzStringRef *out);
/* An integer literal, optionally negative. The Optional form
 * sets *present and returns false only for a malformed or out-of-range
 * literal (reported). */
FZ_API FZ_MUST_CHECK bool fzAsmParseInteger(FzAsmParser *p, int64_t *out);
FZ_API bool fzAsmParseOptionalInteger(FzAsmParser *p, int64_t *out,
                                      bool *present);
/* A string literal, unescaped into storage owned by the parser. */
FZ_API FZ_MUST_CHECK bool fzAsmParseStringLiteral(FzAsmParser *p,
                                                  FzStringRef *out);
/* @name (bare or quoted). */
FZ_API FZ_MUST_CHECK bool fzAsmParseSymbolName(FzAsmParser *p,
                                               FzStringRef *out);
FZ_API bool fzAsmParseOptionalSymbolName(FzAsmParser *p, FzStringRef *out);

/* Types and attributes are uniqued in the parser's context. */
FZ_API FZ_MUST_CHECK bool fzAsmParseType(FzAsmParser *p, FzType **out);
/* ": type" */
FZ_API FZ_MUST_CHECK bool fzAsmParseColonType(FzAsmParser *p, FzType **out);
/* A comma-separated list of at least one type, into storage owned by the
 * parser (valid until the parse hook returns). */
FZ_API FZ_MUST_CHECK bool fzAsmParseTypeList(FzAsmParser *p, FzType ***out,
                                             size_t *n);
/* Function results: "type", "(type, ...)" or "()", after an arrow. The
 * "->" itself is consumed here when present; a caller that already
 * consumed it with fzAsmParseOptionalPunct(p, "->") may call this too. */
FZ_API FZ_MUST_CHECK bool fzAsmParseArrowTypeList(FzAsmParser *p, FzType ***out,
                                                  size_t *n);
/* An attribute; when `type` is non-NULL it types a bare literal. */
FZ_API FZ_MUST_CHECK bool fzAsmParseAttr(FzAsmParser *p, FzType *type,
                                         FzAttr **out);
/* "{...}" if present, else *out = NULL and true. Errors return false. */
FZ_API FZ_MUST_CHECK bool fzAsmParseOptionalAttrDict(FzAsmParser *p,
                                                     FzAttr **out);
/* "attributes {...}" if present. */
FZ_API FZ_MUST_CHECK bool fzAsmParseOptionalAttrDictWithKeyword(FzAsmParser *p,
                                                                FzAttr **out);
/* Adds every entry of dict (may be NULL) to st's attributes. */
FZ_API void fzOpStateAddAttrDict(FzOpState *st, const FzAttr *dict);

/* "%name" or "%name#N" (not yet resolved: see fzAsmResolveOperand). The
 * name points into the source buffer. */
FZ_API FZ_MUST_CHECK bool fzAsmParseOperand(FzAsmParser *p,
                                            FzUnresolvedOperand *out);
FZ_API bool fzAsmParseOptionalOperand(FzAsmParser *p, FzUnresolvedOperand *out,
                                      bool *present);
/* Zero or more comma-separated operands (parser-owned storage). */
FZ_API FZ_MUST_CHECK bool
fzAsmParseOperandList(FzAsmParser *p, FzUnresolvedOperand **out, size_t *n);
/* Looks up (or forward-declares) the value named by u with type `type`
 * and appends it to st's operands. */
FZ_API FZ_MUST_CHECK bool fzAsmResolveOperand(FzAsmParser *p,
                                              const FzUnresolvedOperand *u,
                                              FzType *type, FzOpState *st);
/* Resolves n operands with n types (an error when the counts differ,
 * reported at loc). */
FZ_API FZ_MUST_CHECK bool
fzAsmResolveOperands(FzAsmParser *p, const FzUnresolvedOperand *ops,
                     size_t numOps, FzType *const *types, size_t numTypes,
                     FzLoc *loc, FzOpState *st);

/* "%name: type" with optional "{attrs}" (allowAttrs) and "loc(...)". */
FZ_API FZ_MUST_CHECK bool fzAsmParseArgument(FzAsmParser *p, FzAsmArgument *out,
                                             bool allowAttrs);
/* Like fzAsmParseArgument when the next token is an SSA name; otherwise
 * returns true with *present = false and consumes nothing. */
FZ_API FZ_MUST_CHECK bool fzAsmParseOptionalArgument(FzAsmParser *p,
                                                     FzAsmArgument *out,
                                                     bool allowAttrs,
                                                     bool *present);
/* Parses "{ ... }" into region. When numArgs > 0 (or argsGiven), the
 * entry block is created with those arguments (as func.func does) and the
 * body may not repeat an entry label with arguments. */
FZ_API FZ_MUST_CHECK bool fzAsmParseRegion(FzAsmParser *p, FzRegion *region,
                                           size_t numArgs,
                                           const FzAsmArgument *args,
                                           bool argsGiven);
/* Like fzAsmParseRegion but returns true with *present = false when the
 * next token is not '{'. */
FZ_API FZ_MUST_CHECK bool
fzAsmParseOptionalRegion(FzAsmParser *p, FzRegion *region, size_t numArgs,
                         const FzAsmArgument *args, bool argsGiven,
                         bool *present);

#ifdef __cplusplus
}
#endif

#endif /* FZ_OPDEF_H */

/* ir/internal.h - the layouts behind the opaque handles of fz/ir.h.
 *
 * Private to ir/ (and to tests that check invariants). Code outside ir/
 * goes through the public API. Invariants kept here:
 *  - uniqued objects (FzIdent, FzType, FzAttr, FzLoc) live in the
 *    context's arena and are never freed before the context;
 *  - every FzOpOperand with a non-NULL value is linked in exactly that
 *    value's use list (prevUse points at the link that points at it);
 *  - an op's results and inline regions are allocated with the op;
 *  - block->orderValid false means the orderIndex fields are stale.
 */
#ifndef FZ_IR_INTERNAL_H
#define FZ_IR_INTERNAL_H

#include "fz/opdef.h"
#include "ir/util.h"

struct FzIdent {
  const char *str;      /* NUL-terminated copy in the arena */
  size_t len;
  uint32_t hash;
  const FzOpDef *opDef; /* registered op of this name, if any */
  const FzDialectDef *dialect; /* registered dialect of this name, if any */
  struct FzLocRun *locRun; /* file:line:col locations in this file (locs.c) */
};

struct FzType {
  FzTypeKind kind;
  uint32_t hash;
  FzContext *ctx;
  union {
    unsigned width; /* INTEGER */
    struct {
      size_t rank;     /* FZ_UNRANKED for tensor<*x..> */
      int64_t *shape;  /* rank entries */
      FzType *elt;
      int64_t *strides; /* BUFFER only; NULL = identity */
      unsigned space;   /* BUFFER only */
    } shaped;
    struct {
      size_t numInputs, numResults;
      FzType **types; /* inputs then results */
    } func;
    struct {
      FzIdent *dialect;
      FzIdent *body;
    } opaque;
  } u;
};

struct FzAttr {
  FzAttrKind kind;
  uint32_t hash;
  FzContext *ctx;
  FzType *type; /* INTEGER, FLOAT, DENSE; NULL otherwise */
  union {
    int64_t i;
    double f;
    bool b;
    struct {
      const char *data; /* arena copy, NUL-terminated */
      size_t len;
    } str;
    FzType *type;
    struct {
      size_t n;
      FzAttr **elts;
    } array;
    struct {
      size_t n;
      FzNamedAttr *entries; /* sorted by name bytes */
    } dict;
    struct {
      FzIdent *root;
      size_t n;
      FzIdent **nested;
    } sym;
    struct {
      const uint8_t *data;
      size_t nbytes;
      bool splat;
    } dense;
    struct {
      FzType *elt;
      size_t n;
      const uint8_t *data;
    } darray;
    struct {
      FzIdent *dialect;
      FzIdent *body;
    } opaque;
    FzLoc *loc;
  } u;
};

struct FzLoc {
  FzLocKind kind;
  uint32_t hash;
  FzContext *ctx;
  union {
    struct {
      FzIdent *file;
      unsigned line, col;
    } flc;
    struct {
      FzIdent *name;
      FzLoc *child;
    } name;
    struct {
      size_t n;
      FzLoc **locs;
      FzAttr *meta;
    } fused;
    struct {
      FzLoc *callee, *caller;
    } callsite;
  } u;
};

struct FzValue {
  FzType *type;
  FzOpOperand *firstUse;
  uint32_t index; /* result or argument number */
  bool isArg;
  union {
    FzOp *op;       /* result */
    FzBlock *block; /* block argument */
  } owner;
  FzLoc *loc; /* block arguments only */
};

struct FzOpOperand {
  FzValue *value;
  FzOpOperand *nextUse;
  FzOpOperand **prevUse;
  FzOp *owner;
  uint32_t index;
};

struct FzRegion {
  FzBlock *first, *last;
  size_t numBlocks;
  FzOp *parentOp; /* NULL when detached */
  FzContext *ctx;
  uint32_t index; /* position among the parent's regions */
  bool standalone; /* allocated on its own (fzRegionCreate) */
};

struct FzOp {
  FzOp *prev, *next;
  FzBlock *block;
  FzIdent *name;
  const FzOpDef *def;
  FzLoc *loc;
  FzAttr *attrs; /* dictionary; never NULL */
  FzAttr *props; /* dictionary; never NULL */
  FzContext *ctx;
  uint32_t numOperands, capOperands;
  FzOpOperand *operands;  /* inline after the op until it grows */
  bool operandsInline;
  uint32_t numResults;
  FzValue *results;       /* inline */
  uint32_t numRegions;
  uint32_t worklistSlot;  /* greedy driver's worklist index + 1 (greedy.c) */
  FzRegion *regions;      /* inline */
  uint32_t orderIndex;
};

struct FzBlock {
  FzBlock *prev, *next;
  FzRegion *parent;
  FzOp *first, *last;
  size_t numOps;
  FzValue **args;
  size_t numArgs, capArgs;
  FzContext *ctx;
  bool orderValid;
};

/* A diagnostic in flight (see diagnostics.c). */
struct FzDiagnostic {
  FzContext *ctx;
  FzSeverity severity;
  FzLoc *loc;
  char *message; /* heap (fzMalloc); static text when isStatic */
  size_t messageLen;
  FzDiagnostic **notes;
  size_t numNotes, capNotes;
  bool isStatic; /* the context's preallocated out-of-memory one */
};

/* A registered diagnostic handler. */
typedef struct FzDiagHandlerEntry {
  FzDiagHandlerId id;
  FzDiagHandler fn;
  void *userData;
} FzDiagHandlerEntry;

/* A source buffer kept for showing source lines in diagnostics. */
typedef struct FzSourceBuffer {
  FzIdent *name;
  const char *data; /* NUL-terminated */
  size_t len;
  bool owned;       /* a copy the context frees; else the caller's buffer */
} FzSourceBuffer;

/* A uniquing table: open addressing over pointers to objects that carry
 * their own hash in their second field (FzType, FzAttr, FzLoc). The
 * hashes are also kept beside the pointers so that a probe compares
 * hashes without touching the objects (one cache miss per lookup instead
 * of one per probe, which matters when every op has its own location). */
typedef struct FzUniqueSlot {
  uint32_t hash;
  void *obj;
} FzUniqueSlot;
typedef struct FzUniqueTable {
  FzUniqueSlot *slots;
  size_t count, cap;
} FzUniqueTable;

/* The file:line:col locations of one file in increasing (line, col)
 * order, as a parser creates them: one that comes after the last is
 * appended without a hash lookup (locs.c). The array is heap memory;
 * runs are chained from the context for fzContextDestroy. */
typedef struct FzLocRun {
  FzLoc **locs;
  size_t len, cap;
  struct FzLocRun *nextRun;
} FzLocRun;

struct FzContext {
  FzAllocator alloc;
  bool allocFailed;
  bool reportingAllocFailure;
  bool allowUnregistered;
  unsigned maxNesting;
  size_t maxSourceSize; /* fzParseFile/fzParseSource: longest input */
  size_t numErrors;
  FzArena arena; /* immortal uniqued storage */

  FzIdent **identSlots; /* open addressing */
  size_t identCount, identCap;
  FzUniqueTable types, attrs, locs;
  FzLocRun *locRuns; /* every file's run (locs.c), for destruction */

  /* Cached builtins. */
  FzType *i1, *i8, *i16, *i32, *i64, *index, *f16, *bf16, *f32, *f64, *none;
  FzAttr *emptyDict, *unit, *boolTrue, *boolFalse;
  FzLoc *unknownLoc;

  const FzDialectDef **dialects;
  size_t numDialects, capDialects;
  const FzOpDef **opDefs; /* registration order */
  size_t numOpDefs, capOpDefs;

  FzDiagHandlerEntry *handlers;
  size_t numHandlers, capHandlers;
  FzDiagHandlerId nextHandlerId;

  FzSourceBuffer *sources;
  size_t numSources, capSources;

  FzDiagnostic oomDiag; /* used when a diagnostic cannot be allocated */
  struct FzExtension *extensions; /* ir/extensions.c: keyed slots */
};

/* Uniquing helpers shared by types.c, attrs.c, locs.c. `eq` compares a
 * candidate in the table with the key object; on a miss, `make` builds
 * the permanent object in the arena. */
typedef bool (*FzUniqueEqFn)(const void *existing, const void *key);
typedef void *(*FzUniqueMakeFn)(FzContext *ctx, const void *key);
void *fzUniqueGet(FzContext *ctx, FzUniqueTable *t, uint32_t hash,
                  const void *key, FzUniqueEqFn eq, FzUniqueMakeFn make);
void fzUniqueTableFree(FzContext *ctx, FzUniqueTable *t);

/* Reads a uniqued object's hash (second field of FzType/FzAttr/FzLoc). */
static inline uint32_t fzUniqueHashOf(const void *obj) {
  return ((const FzType *)obj)->hash;
}

/* Frees the location runs' arrays (the runs live in the arena). */
void fzLocRunsFree(FzContext *ctx);

/* Registers data[0..len) (NUL-terminated) under name without copying
 * it; the context frees it on destruction when `owned` (it must then
 * come from the context's allocator). Returns data, or NULL on
 * allocation failure (an owned buffer is then freed). */
const char *fzContextRegisterSource(FzContext *ctx, FzStringRef name,
                                    const char *data, size_t len, bool owned);

/* The source buffer registered under name, or NULL. */
const FzSourceBuffer *fzContextFindSource(const FzContext *ctx,
                                          const FzIdent *name);

/* Destroys every context extension (ir/extensions.c); called first by
 * fzContextDestroy. */
void fzContextDestroyExtensions(FzContext *ctx);

/* Appends already-interned attributes to st (no re-interning: the
 * parser's fast path). Entries must have non-NULL names and values. */
void fzOpStateAddNamedAttrs(FzOpState *st, size_t n,
                            const FzNamedAttr *entries);

/* fzFileLineColLocGet with the file already interned (hot in the
 * parser: one location per op). */
FzLoc *fzFileLineColLocGetIdent(FzContext *ctx, FzIdent *file,
                                unsigned line, unsigned col);

/* Reorders ops' orderIndex in a block. */
void fzBlockRecomputeOrder(FzBlock *block);

/* Text helpers shared by the printer and parser. */
bool fzIsBareIdentifier(FzStringRef s);
/* Appends s as an MLIR string literal (quotes, escapes). */
void fzBufAppendQuoted(FzBuf *b, FzStringRef s);

/* Internal printers used by diagnostics and the op printer. */
void fzTypePrintToBuf(FzBuf *b, const FzType *t);
void fzAttrPrintToBuf(FzBuf *b, const FzAttr *a);
void fzLocPrintToBuf(FzBuf *b, const FzLoc *loc);

#endif /* FZ_IR_INTERNAL_H */

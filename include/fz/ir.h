/* fz/ir.h - the core IR of fuse: context, types, attributes, locations,
 * operations, values, blocks, regions, the builder, diagnostics, and the
 * textual format (parse, print, verify).
 *
 * Ownership in one paragraph. The context owns everything uniqued (types,
 * attributes, locations, identifiers): those are immortal until the context
 * is destroyed and are compared by pointer. Operations, blocks and regions
 * are owned by their parent once inserted; a detached one (just created,
 * or removed from its parent) is owned by the caller, who must insert it or
 * destroy it. Values belong to the operation or block that defines them.
 * No getter allocates. Every handle is NULL-able only where its contract
 * says so.
 *
 * Preconditions and results. Unless a contract says "may be NULL", every
 * handle argument must be non-NULL and of the kind the function's name
 * says (fzShapedType* on a shaped type, fzIntegerAttr* on an integer
 * attribute, fzLocGetLine on a file:line:col location), and every index
 * in range. Breaking that is a programming error that release builds do
 * not check; it is never turned into a diagnostic. Constructors of
 * uniqued objects (fz*TypeGet, fz*AttrGet, fz*LocGet, fzIdentGet) return
 * NULL for arguments they do not accept, as documented per function, and
 * after an allocation failure (reported; see
 * fzContextHadAllocationFailure). Functions that can fail on input the
 * caller does not control (text, files) report every problem as a
 * diagnostic and return false or NULL; check those results.
 *
 * Threads. There is no mutable global state: distinct contexts may be used
 * concurrently from different threads; one context and everything made in
 * it is used by one thread at a time (docs/api.md, "Threads").
 */
#ifndef FZ_IR_H
#define FZ_IR_H

#include <stdarg.h>
#include <stdio.h>

#include "fz/support.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FzContext FzContext;
typedef struct FzIdent FzIdent;
typedef struct FzType FzType;
typedef struct FzAttr FzAttr;
typedef struct FzLoc FzLoc;
typedef struct FzOp FzOp;
typedef struct FzValue FzValue;
typedef struct FzOpOperand FzOpOperand;
typedef struct FzBlock FzBlock;
typedef struct FzRegion FzRegion;
typedef struct FzOpDef FzOpDef;
typedef struct FzDiagnostic FzDiagnostic;
typedef struct FzIRMapping FzIRMapping;
typedef struct FzSymbolTable FzSymbolTable;

/*===------------------------------------------------------------------===*
 * Context
 *===------------------------------------------------------------------===*/

/* An allocator in Lua's style: realloc(ud, ptr, oldSize, newSize) acts as
 * malloc when ptr is NULL, as free when newSize is 0 (returning NULL), and
 * as realloc otherwise. Returning NULL for newSize > 0 is an allocation
 * failure, which the library reports and survives. */
typedef struct FzAllocator {
  void *(*realloc)(void *userData, void *ptr, size_t oldSize, size_t newSize);
  void *userData;
} FzAllocator;

/* Creates a context using malloc/free. Returns NULL only when the context
 * itself cannot be allocated. Destroy with fzContextDestroy. */
FZ_API FzContext *fzContextCreate(void);

/* Creates a context whose every allocation goes through `alloc` (copied). */
FZ_API FzContext *fzContextCreateWithAllocator(const FzAllocator *alloc);

/* Destroys the context and everything it owns. Detached operations that
 * the caller still holds must be destroyed first. NULL is ignored. */
FZ_API void fzContextDestroy(FzContext *ctx);

/* True once any allocation has failed in this context (sticky). The
 * failure was also reported as an error diagnostic. */
FZ_API bool fzContextHadAllocationFailure(const FzContext *ctx);
/* Resets that flag, e.g. after freeing memory, to detect the next one. */
FZ_API void fzContextClearAllocationFailure(FzContext *ctx);

/* Whether ops of unregistered dialects are accepted (default false). */
FZ_API void fzContextSetAllowUnregisteredDialects(FzContext *ctx, bool allow);
FZ_API bool fzContextGetAllowUnregisteredDialects(const FzContext *ctx);

/* The maximum nesting depth of regions, and of attributes/types, accepted
 * by the parser and the verifier (default 256 each). Deeper input is an
 * error, never a stack overflow. */
FZ_API void fzContextSetMaxNesting(FzContext *ctx, unsigned depth);
FZ_API unsigned fzContextGetMaxNesting(const FzContext *ctx);

/* The largest source text, in bytes, that fzParseFile reads and
 * fzParseSource accepts (default FZ_DEFAULT_MAX_SOURCE_SIZE, 1 GiB; 0 is
 * taken as 1). A longer input (or an endless one such as /dev/zero) is
 * the error "input '...' is larger than the limit of N bytes" after
 * reading at most N + 1 bytes, never an endless read. */
#define FZ_DEFAULT_MAX_SOURCE_SIZE ((size_t)1 << 30)
FZ_API void fzContextSetMaxSourceSize(FzContext *ctx, size_t bytes);
FZ_API size_t fzContextGetMaxSourceSize(const FzContext *ctx);

/* Interned identifiers: equal strings give the same pointer. NULL on
 * allocation failure. */
FZ_API FzIdent *fzIdentGet(FzContext *ctx, FzStringRef str);
FZ_API FzStringRef fzIdentGetString(const FzIdent *ident);

/* Registers a copy of a source buffer under `name` so that diagnostics at
 * locations in that file can show the source line. Returns the context's
 * NUL-terminated copy (valid until the context dies), or NULL on
 * allocation failure. A later buffer of the same name replaces it for
 * display purposes. */
FZ_API const char *fzContextAddSourceBuffer(FzContext *ctx, FzStringRef name,
                                            FzStringRef contents);

/*===------------------------------------------------------------------===*
 * Diagnostics
 *===------------------------------------------------------------------===*/

typedef enum FzSeverity {
  FZ_SEVERITY_ERROR,
  FZ_SEVERITY_WARNING,
  FZ_SEVERITY_REMARK,
  FZ_SEVERITY_NOTE,
} FzSeverity;

/* A handler sees each reported diagnostic; returning true stops the
 * search, false passes it to the next handler down the stack. The
 * diagnostic is valid only during the call. */
typedef bool (*FzDiagHandler)(const FzDiagnostic *diag, void *userData);
typedef uint64_t FzDiagHandlerId;

/* Pushes a handler on top of the context's stack; returns its id (never 0),
 * or 0 when the handler could not be added (allocation failure: it is then
 * not installed). With no handler claiming it, a diagnostic goes to the
 * default printer (stderr). The handler runs on the thread that reports,
 * i.e. the one using the context; a diagnostic it reports into the same
 * context goes through the whole stack again (itself included), so avoid
 * that. userData is passed back unchanged. */
FZ_API FzDiagHandlerId fzContextPushDiagHandler(FzContext *ctx,
                                                FzDiagHandler fn,
                                                void *userData);
/* Removes the handler with that id (wherever it is in the stack); an
 * unknown id (or 0) is ignored. */
FZ_API void fzContextPopDiagHandler(FzContext *ctx, FzDiagHandlerId id);

/* Number of errors reported in this context so far. */
FZ_API size_t fzContextGetNumErrors(const FzContext *ctx);

/* What a handler reads from a diagnostic (valid only during the handler
 * call, as is everything returned here). The location is never NULL (an
 * unknown location when none was given); the message is never empty data
 * (a placeholder when its text was lost to an allocation failure). Notes
 * are numbered from 0 in the order attached. */
FZ_API FzSeverity fzDiagnosticGetSeverity(const FzDiagnostic *diag);
FZ_API FzLoc *fzDiagnosticGetLoc(const FzDiagnostic *diag);
FZ_API FzStringRef fzDiagnosticGetMessage(const FzDiagnostic *diag);
FZ_API size_t fzDiagnosticGetNumNotes(const FzDiagnostic *diag);
FZ_API const FzDiagnostic *fzDiagnosticGetNote(const FzDiagnostic *diag,
                                               size_t i);

/* Renders a diagnostic as the default printer does:
 *   file:line:col: error: message
 *   <source line>
 *        ^
 * followed by its notes. `showSource` controls the source line + caret. */
FZ_API void fzDiagnosticPrint(const FzDiagnostic *diag, bool showSource,
                              FzPrintCallback cb, void *userData);

/* Building a diagnostic: begin, optionally attach notes, then report.
 * fzDiagReport hands it to the handlers and frees it. Never returns NULL
 * (an allocation failure yields a static "out of memory" diagnostic). */
FZ_API FzDiagnostic *fzDiagBegin(FzContext *ctx, FzSeverity sev, FzLoc *loc,
                                 const char *fmt, ...) FZ_PRINTF(4, 5);
FZ_API FzDiagnostic *fzDiagBeginV(FzContext *ctx, FzSeverity sev, FzLoc *loc,
                                  const char *fmt, va_list ap);
FZ_API void fzDiagAttachNote(FzDiagnostic *diag, FzLoc *loc, const char *fmt,
                             ...) FZ_PRINTF(3, 4);
FZ_API void fzDiagReport(FzDiagnostic *diag);

/* One-shot reporting. The error forms return false so that
 * `return fzEmitError(...)` works in functions returning success. loc may
 * be NULL (unknown). fzOpEmitError reports at op's location with the
 * message prefixed by "'opname' op ". None of them can fail. */
FZ_API bool fzEmitError(FzContext *ctx, FzLoc *loc, const char *fmt, ...)
    FZ_PRINTF(3, 4);
FZ_API void fzEmitWarning(FzContext *ctx, FzLoc *loc, const char *fmt, ...)
    FZ_PRINTF(3, 4);
FZ_API void fzEmitRemark(FzContext *ctx, FzLoc *loc, const char *fmt, ...)
    FZ_PRINTF(3, 4);
FZ_API bool fzOpEmitError(FzOp *op, const char *fmt, ...) FZ_PRINTF(2, 3);
/* Begins an error at the op's location whose message is prefixed with
 * "'opname' op " as MLIR does; attach notes, then fzDiagReport. */
FZ_API FzDiagnostic *fzOpDiagBegin(FzOp *op, FzSeverity sev, const char *fmt,
                                   ...) FZ_PRINTF(3, 4);

/*===------------------------------------------------------------------===*
 * Types (uniqued, immortal)
 *===------------------------------------------------------------------===*/

typedef enum FzTypeKind {
  FZ_TYPE_INTEGER,  /* iN, signless, 1 <= N <= 64 */
  FZ_TYPE_INDEX,
  FZ_TYPE_F16,
  FZ_TYPE_BF16,
  FZ_TYPE_F32,
  FZ_TYPE_F64,
  FZ_TYPE_NONE,
  FZ_TYPE_TENSOR,   /* tensor<2x?x4xf32>, tensor<f32>, tensor<*xf32> */
  FZ_TYPE_VECTOR,   /* vector<4xf32> (static dims only) */
  FZ_TYPE_BUFFER,   /* buffer<2x4xf32>, buffer<2x4xf32, strides [8, 1], 1> */
  FZ_TYPE_FUNCTION, /* (i32, f32) -> (f32) */
  FZ_TYPE_OPAQUE,   /* !dialect.body or !dialect<body>: unregistered */
} FzTypeKind;

/* The marker for a dynamic dimension ('?') and for an unranked tensor. */
#define FZ_DYNAMIC INT64_MIN
#define FZ_UNRANKED ((size_t)-1)
/* Largest static dimension, and largest element count of a shaped type. */
#define FZ_MAX_DIM ((int64_t)1 << 40)
#define FZ_MAX_ELEMENTS ((int64_t)1 << 48)
/* Largest rank of a shaped type (the parser stops at the 65th dim). */
#define FZ_MAX_RANK 64

/* The scalar types. fzIntegerTypeGet returns NULL, without a
 * diagnostic, for a width outside 1..64. All return NULL on allocation
 * failure. */
FZ_API FzType *fzIntegerTypeGet(FzContext *ctx, unsigned width);
FZ_API FzType *fzIndexTypeGet(FzContext *ctx);
FZ_API FzType *fzF16TypeGet(FzContext *ctx);
FZ_API FzType *fzBF16TypeGet(FzContext *ctx);
FZ_API FzType *fzF32TypeGet(FzContext *ctx);
FZ_API FzType *fzF64TypeGet(FzContext *ctx);
FZ_API FzType *fzNoneTypeGet(FzContext *ctx);
/* rank FZ_UNRANKED gives tensor<*xT> (shape ignored). Dims are >= 0 or
 * FZ_DYNAMIC. Returns NULL (after an error at `loc`, which may be NULL
 * for unknown) when a dim is negative, over FZ_MAX_DIM, or the element
 * count overflows FZ_MAX_ELEMENTS. */
FZ_API FzType *fzTensorTypeGet(FzContext *ctx, size_t rank,
                               const int64_t *shape, FzType *elementType,
                               FzLoc *loc);
FZ_API FzType *fzVectorTypeGet(FzContext *ctx, size_t rank,
                               const int64_t *shape, FzType *elementType,
                               FzLoc *loc);
/* As fzTensorTypeGet (static or dynamic dims; no unranked buffers).
 * strides NULL means the identity (row-major contiguous) layout; else
 * `rank` strides, in elements. */
FZ_API FzType *fzBufferTypeGet(FzContext *ctx, size_t rank,
                               const int64_t *shape, FzType *elementType,
                               const int64_t *strides, unsigned memorySpace,
                               FzLoc *loc);
/* (inputs) -> (results); the arrays (no NULL entries) are copied and may
 * be NULL when their count is 0. */
FZ_API FzType *fzFunctionTypeGet(FzContext *ctx, size_t numInputs,
                                 FzType *const *inputs, size_t numResults,
                                 FzType *const *results);
/* !dialect.body (body printed verbatim after the dot, or in <...>). */
FZ_API FzType *fzOpaqueTypeGet(FzContext *ctx, FzStringRef dialect,
                               FzStringRef body);

/* Queries on any type. */
FZ_API FzTypeKind fzTypeGetKind(const FzType *t);
FZ_API FzContext *fzTypeGetContext(const FzType *t);
FZ_API bool fzTypeIsFloat(const FzType *t);   /* f16 bf16 f32 f64 */
FZ_API bool fzTypeIsInteger(const FzType *t); /* iN (not index) */
FZ_API bool fzTypeIsIntOrIndex(const FzType *t);
FZ_API bool fzTypeIsShaped(const FzType *t); /* tensor, vector, buffer */
/* Bit width of an integer or float type; 64 for index; 0 otherwise. */
FZ_API unsigned fzTypeGetBitWidth(const FzType *t);

/* Shaped types (tensor, vector, buffer). Rank is FZ_UNRANKED for
 * tensor<*x..>; dims are >= 0 or FZ_DYNAMIC. The shape array belongs to
 * the type (immortal); it is NULL for rank 0 and unranked tensors. */
FZ_API FzType *fzShapedTypeGetElementType(const FzType *t);
FZ_API size_t fzShapedTypeGetRank(const FzType *t);
FZ_API int64_t fzShapedTypeGetDim(const FzType *t, size_t i);
FZ_API const int64_t *fzShapedTypeGetShape(const FzType *t);
FZ_API bool fzShapedTypeHasStaticShape(const FzType *t);
/* Element count (1 for rank 0); -1 when not static. */
FZ_API int64_t fzShapedTypeGetNumElements(const FzType *t);
/* Buffers only: strides (NULL for identity layout) and memory space. */
FZ_API const int64_t *fzBufferTypeGetStrides(const FzType *t);
FZ_API unsigned fzBufferTypeGetMemorySpace(const FzType *t);

/* Function types: inputs and results by index. */
FZ_API size_t fzFunctionTypeGetNumInputs(const FzType *t);
FZ_API FzType *fzFunctionTypeGetInput(const FzType *t, size_t i);
FZ_API size_t fzFunctionTypeGetNumResults(const FzType *t);
FZ_API FzType *fzFunctionTypeGetResult(const FzType *t, size_t i);

/* Opaque types: the dialect name and the body text (owned by ctx). */
FZ_API FzStringRef fzOpaqueTypeGetDialect(const FzType *t);
FZ_API FzStringRef fzOpaqueTypeGetBody(const FzType *t);

/*===------------------------------------------------------------------===*
 * Attributes (uniqued, immortal)
 *===------------------------------------------------------------------===*/

typedef enum FzAttrKind {
  FZ_ATTR_INTEGER,    /* 5 : i64 */
  FZ_ATTR_FLOAT,      /* 1.000000e+00 : f32 */
  FZ_ATTR_BOOL,       /* true */
  FZ_ATTR_UNIT,       /* unit */
  FZ_ATTR_STRING,     /* "text" */
  FZ_ATTR_TYPE,       /* a type used as an attribute */
  FZ_ATTR_ARRAY,      /* [a, b] */
  FZ_ATTR_DICT,       /* {a = 1, b} sorted by name */
  FZ_ATTR_SYMBOL_REF, /* @root::@nested */
  FZ_ATTR_DENSE,      /* dense<...> : tensor<...> */
  FZ_ATTR_DENSE_ARRAY,/* array<i64: 1, 2> */
  FZ_ATTR_OPAQUE,     /* #dialect.body / #dialect<body>: unregistered */
  FZ_ATTR_LOC,        /* loc(...) used as an attribute value */
} FzAttrKind;

typedef struct FzNamedAttr {
  FzIdent *name;
  FzAttr *value;
} FzNamedAttr;

/* type must be an integer type or index. The value is truncated to the
 * type's width and stored sign-extended (signless integers print as
 * signed, as in MLIR). As in MLIR, an i1 integer attribute is the bool
 * attribute: fzIntegerAttrGet(ctx, i1, 1) == fzBoolAttrGet(ctx, true). */
FZ_API FzAttr *fzIntegerAttrGet(FzContext *ctx, FzType *type, int64_t value);
/* type must be a float type; the value is rounded to it. */
FZ_API FzAttr *fzFloatAttrGet(FzContext *ctx, FzType *type, double value);
FZ_API FzAttr *fzBoolAttrGet(FzContext *ctx, bool value);
FZ_API FzAttr *fzUnitAttrGet(FzContext *ctx);
FZ_API FzAttr *fzStringAttrGet(FzContext *ctx, FzStringRef value);
FZ_API FzAttr *fzTypeAttrGet(FzContext *ctx, FzType *type);
FZ_API FzAttr *fzArrayAttrGet(FzContext *ctx, size_t n,
                              FzAttr *const *elements);
/* Sorts the entries by name. Returns NULL (and reports an error at loc,
 * which may be NULL) when a name occurs twice. */
FZ_API FzAttr *fzDictAttrGet(FzContext *ctx, size_t n,
                             const FzNamedAttr *entries, FzLoc *loc);
FZ_API FzAttr *fzSymbolRefAttrGet(FzContext *ctx, FzStringRef root,
                                  size_t numNested, const FzStringRef *nested);
/* Dense elements of a statically shaped tensor or vector type of an
 * integer, index or float element type. `data` holds the elements packed
 * little-endian in their storage size (i1: one byte each, 0 or 1; index:
 * 8 bytes; bf16/f16: 2 bytes of IEEE bits). numBytes is either one
 * element (a splat) or all of them; anything else is an error (NULL). */
FZ_API FzAttr *fzDenseAttrGet(FzContext *ctx, FzType *shapedType,
                              const void *data, size_t numBytes);
/* array<i64: 1, 2>: elementType is i1..i64, f32 or f64; data packed. */
FZ_API FzAttr *fzDenseArrayAttrGet(FzContext *ctx, FzType *elementType,
                                   size_t n, const void *data);
FZ_API FzAttr *fzOpaqueAttrGet(FzContext *ctx, FzStringRef dialect,
                               FzStringRef body);
/* A location as an attribute value (`{l = loc("f":1:2)}`, as MLIR's
 * LocationAttr); uniqued like every attribute. */
FZ_API FzAttr *fzLocAttrGet(FzContext *ctx, FzLoc *loc);

/* Constructors above return NULL, without a diagnostic, for arguments they
 * do not accept (a NULL type or element, a type of the wrong kind, dense
 * data of the wrong size), and on allocation failure. The accessors below
 * require an attribute of the kind they name (see the preconditions at
 * the top of this file); strings and arrays they return belong to the
 * context. */
FZ_API FzAttrKind fzAttrGetKind(const FzAttr *a);
FZ_API FzContext *fzAttrGetContext(const FzAttr *a);
/* The attribute's type: integer/float/dense give theirs; others NULL. */
FZ_API FzType *fzAttrGetType(const FzAttr *a);

FZ_API int64_t fzIntegerAttrGetValue(const FzAttr *a);
FZ_API double fzFloatAttrGetValue(const FzAttr *a);
FZ_API bool fzBoolAttrGetValue(const FzAttr *a);
FZ_API FzStringRef fzStringAttrGetValue(const FzAttr *a);
FZ_API FzType *fzTypeAttrGetValue(const FzAttr *a);
FZ_API size_t fzArrayAttrGetSize(const FzAttr *a);
FZ_API FzAttr *fzArrayAttrGetElement(const FzAttr *a, size_t i);
FZ_API size_t fzDictAttrGetSize(const FzAttr *a);
FZ_API FzNamedAttr fzDictAttrGetEntry(const FzAttr *a, size_t i);
/* NULL when absent. Binary search: O(log n). */
FZ_API FzAttr *fzDictAttrLookup(const FzAttr *a, FzStringRef name);
FZ_API FzStringRef fzSymbolRefAttrGetRoot(const FzAttr *a);
FZ_API size_t fzSymbolRefAttrGetNumNested(const FzAttr *a);
FZ_API FzStringRef fzSymbolRefAttrGetNested(const FzAttr *a, size_t i);
FZ_API bool fzDenseAttrIsSplat(const FzAttr *a);
/* Raw packed bytes (one element when splat) and their count. */
FZ_API const void *fzDenseAttrGetData(const FzAttr *a);
FZ_API size_t fzDenseAttrGetNumBytes(const FzAttr *a);
/* Element i (splat-aware) converted to double / int64. A float element
 * read as int64 is truncated toward zero and saturated; NaN gives 0. */
FZ_API double fzDenseAttrGetFloat(const FzAttr *a, int64_t i);
FZ_API int64_t fzDenseAttrGetInt(const FzAttr *a, int64_t i);
FZ_API FzType *fzDenseArrayAttrGetElementType(const FzAttr *a);
FZ_API size_t fzDenseArrayAttrGetSize(const FzAttr *a);
FZ_API const void *fzDenseArrayAttrGetData(const FzAttr *a);
FZ_API int64_t fzDenseArrayAttrGetInt(const FzAttr *a, size_t i);
FZ_API double fzDenseArrayAttrGetFloat(const FzAttr *a, size_t i);
FZ_API FzStringRef fzOpaqueAttrGetDialect(const FzAttr *a);
FZ_API FzStringRef fzOpaqueAttrGetBody(const FzAttr *a);
FZ_API FzLoc *fzLocAttrGetValue(const FzAttr *a);

/* Storage size in bytes of one element of type t in dense data (iN
 * rounded up to 1, 2, 4 or 8 bytes; index 8); 0 for non-scalar types. */
FZ_API size_t fzTypeGetStorageSize(const FzType *t);

/* float <-> half/bfloat bit conversions, round-to-nearest-even. */
FZ_API uint16_t fzFloatToHalfBits(float f);
FZ_API float fzHalfBitsToFloat(uint16_t h);
FZ_API uint16_t fzFloatToBF16Bits(float f);
FZ_API float fzBF16BitsToFloat(uint16_t h);
/* Rounds a double to the precision of float type t (f16/bf16/f32/f64). */
FZ_API double fzRoundToFloatType(const FzType *t, double v);

/* Added by the graph-dialect work (ir/types.c): double -> half / bfloat
 * bits rounding once, to nearest even, with no intermediate float (which
 * would round twice). fzRoundToFloatType uses them. */
FZ_API uint16_t fzDoubleToHalfBits(double v);
FZ_API uint16_t fzDoubleToBF16Bits(double v);

/*===------------------------------------------------------------------===*
 * Locations (uniqued, immortal)
 *===------------------------------------------------------------------===*/

typedef enum FzLocKind {
  FZ_LOC_UNKNOWN,       /* loc(unknown) */
  FZ_LOC_FILE_LINE_COL, /* loc("file":3:7) */
  FZ_LOC_NAME,          /* loc("name") or loc("name"(child)) */
  FZ_LOC_FUSED,         /* loc(fused["a":1:2, "b":3:4]) or fused<meta>[..] */
  FZ_LOC_CALLSITE,      /* loc(callsite("callee":1:2 at "caller":3:4)) */
} FzLocKind;

/* Location constructors; NULL only on allocation failure (fzUnknownLocGet
 * never fails). File names and names are copied into the context. */
FZ_API FzLoc *fzUnknownLocGet(FzContext *ctx);
FZ_API FzLoc *fzFileLineColLocGet(FzContext *ctx, FzStringRef file,
                                  unsigned line, unsigned col);
/* child may be NULL (meaning unknown). */
FZ_API FzLoc *fzNameLocGet(FzContext *ctx, FzStringRef name, FzLoc *child);
/* Flattens nested fused locations, drops unknowns and duplicates; gives
 * the single location itself when one remains (and metadata is NULL),
 * unknown when none. metadata may be NULL. */
FZ_API FzLoc *fzFusedLocGet(FzContext *ctx, size_t n, FzLoc *const *locs,
                            FzAttr *metadata);
/* callee inlined at caller (MLIR's CallSiteLoc); NULL is unknown. */
FZ_API FzLoc *fzCallSiteLocGet(FzContext *ctx, FzLoc *callee, FzLoc *caller);

/* Accessors; each requires the kind given in its comment. */
FZ_API FzLocKind fzLocGetKind(const FzLoc *loc);
FZ_API FzStringRef fzLocGetFile(const FzLoc *loc); /* FILE_LINE_COL */
FZ_API unsigned fzLocGetLine(const FzLoc *loc);
FZ_API unsigned fzLocGetColumn(const FzLoc *loc);
FZ_API FzStringRef fzLocGetName(const FzLoc *loc); /* NAME */
FZ_API FzLoc *fzLocGetChild(const FzLoc *loc);     /* NAME: never NULL */
FZ_API size_t fzLocGetNumFused(const FzLoc *loc);  /* FUSED */
FZ_API FzLoc *fzLocGetFused(const FzLoc *loc, size_t i);
FZ_API FzAttr *fzLocGetFusedMetadata(const FzLoc *loc); /* may be NULL */
FZ_API FzLoc *fzLocGetCallee(const FzLoc *loc); /* CALLSITE: never NULL */
FZ_API FzLoc *fzLocGetCaller(const FzLoc *loc); /* CALLSITE: never NULL */
/* The first file:line:col location found inside loc (depth-first), or
 * NULL: what diagnostics use to point at the source. */
FZ_API FzLoc *fzLocFindFileLineCol(FzLoc *loc);
/* Prints, through cb, the position that diagnostics show for loc (without
 * the ": " after it): "file:3:7" for the first file:line:col inside it;
 * when that has no line (line 0, as in an imported model), "file: name"
 * with the name of the innermost name location around it (an ONNX node's
 * name), if any; "name" for a name location without a file. Returns false,
 * printing nothing, when loc holds neither (unknown). */
FZ_API bool fzLocPrintPosition(const FzLoc *loc, FzPrintCallback cb,
                               void *userData);

/*===------------------------------------------------------------------===*
 * Printing of types, attributes and locations
 *===------------------------------------------------------------------===*/

/* Prints in the textual format through cb (no trailing newline). */
FZ_API void fzTypePrint(const FzType *t, FzPrintCallback cb, void *userData);
FZ_API void fzAttrPrint(const FzAttr *a, FzPrintCallback cb, void *userData);
FZ_API void fzLocPrint(const FzLoc *loc, FzPrintCallback cb, void *userData);
/* Convenience: print into a FILE. */
FZ_API void fzTypeDump(const FzType *t, FILE *out);
FZ_API void fzAttrDump(const FzAttr *a, FILE *out);

/* Parsing of a type or attribute from text (errors reported at a
 * location in a buffer named "<string>"). NULL on error. */
FZ_API FzType *fzTypeParse(FzContext *ctx, FzStringRef text);
FZ_API FzAttr *fzAttrParse(FzContext *ctx, FzStringRef text);

/*===------------------------------------------------------------------===*
 * Operations
 *===------------------------------------------------------------------===*/

/* Everything needed to create an operation. Initialize with
 * fzOpStateInit, fill with the Add functions, then fzOpCreate consumes
 * it (or fzOpStateDispose abandons it). The fields are private to ir/. */
typedef struct FzOpState {
  FzContext *ctx;
  FzIdent *name;
  FzLoc *loc;
  size_t numOperands, capOperands;
  FzValue **operands;
  size_t numResults, capResults;
  FzType **resultTypes;
  size_t numAttrs, capAttrs;
  FzNamedAttr *attrs;      /* discardable attributes */
  size_t numProps, capProps;
  FzNamedAttr *props;      /* properties (inherent attributes) */
  FzAttr *propsDict;       /* alternative to props: a whole dictionary */
  size_t numRegions, capRegions;
  FzRegion **regions;      /* owned by the state until fzOpCreate */
  bool failed;             /* an Add ran out of memory */
  bool invalid;            /* an Add got an invalid argument (reported) */
} FzOpState;

/* Starts a state for op `name` (copied; "dialect.op") at loc (NULL:
 * unknown). The Add functions copy their arrays; values, types and
 * attributes must be non-NULL. They never fail visibly: an allocation
 * failure marks the state, and fzOpCreate then reports it and returns
 * NULL. Adding a name twice is reported by fzOpCreate. */
FZ_API void fzOpStateInit(FzOpState *st, FzContext *ctx, FzStringRef name,
                          FzLoc *loc);
FZ_API void fzOpStateAddOperands(FzOpState *st, size_t n,
                                 FzValue *const *values);
FZ_API void fzOpStateAddResults(FzOpState *st, size_t n, FzType *const *types);
FZ_API void fzOpStateAddAttr(FzOpState *st, FzStringRef name, FzAttr *value);
FZ_API void fzOpStateAddProp(FzOpState *st, FzStringRef name, FzAttr *value);
/* Adds an empty region owned by the state; returns it (NULL on OOM). */
FZ_API FzRegion *fzOpStateAddRegion(FzOpState *st);
/* Frees what the state holds (its regions included). */
FZ_API void fzOpStateDispose(FzOpState *st);

/* Creates a detached operation from the state, which it always consumes.
 * For a registered op whose definition lists inherent attribute names,
 * those names found among the discardable attributes become properties.
 * Returns NULL after reporting an error (allocation failure, a duplicate
 * attribute name, an unregistered op while they are not allowed). The op
 * is not verified. */
FZ_API FZ_MUST_CHECK FzOp *fzOpCreate(FzOpState *st);

/* Destroys a detached op (not in a block) and its regions. Its results
 * must have no uses left outside the op itself. */
FZ_API void fzOpDestroy(FzOp *op);
/* Removes op from its block (if any) and destroys it. Its results must
 * have no uses left. */
FZ_API void fzOpErase(FzOp *op);

/* Basic queries. The name is interned: compare names by pointer with an
 * FzIdent from fzIdentGet. fzOpSetLoc with NULL sets the unknown
 * location; fzOpGetLoc never returns NULL. */
FZ_API FzContext *fzOpGetContext(const FzOp *op);
FZ_API FzIdent *fzOpGetName(const FzOp *op);
/* NULL for an unregistered op. */
FZ_API const FzOpDef *fzOpGetDef(const FzOp *op);
FZ_API FzLoc *fzOpGetLoc(const FzOp *op);
FZ_API void fzOpSetLoc(FzOp *op, FzLoc *loc);
/* True if the op's definition has all the traits in `traitMask`
 * (FZ_TRAIT_*); false for unregistered ops. */
FZ_API bool fzOpHasTrait(const FzOp *op, uint64_t traitMask);

/* Operands, results and regions by index (i below the count). Setting an
 * operand keeps both use lists exact; it does not check types, which the
 * verifier does. */
FZ_API size_t fzOpGetNumOperands(const FzOp *op);
FZ_API FzValue *fzOpGetOperand(const FzOp *op, size_t i);
FZ_API FzOpOperand *fzOpGetOpOperand(FzOp *op, size_t i);
FZ_API void fzOpSetOperand(FzOp *op, size_t i, FzValue *value);
/* Replaces the whole operand list (use lists updated). */
FZ_API FZ_MUST_CHECK bool fzOpSetOperands(FzOp *op, size_t n,
                                          FzValue *const *values);
FZ_API size_t fzOpGetNumResults(const FzOp *op);
FZ_API FzValue *fzOpGetResult(const FzOp *op, size_t i);
FZ_API size_t fzOpGetNumRegions(const FzOp *op);
FZ_API FzRegion *fzOpGetRegion(const FzOp *op, size_t i);

/* Discardable attributes, as a dictionary attribute (never NULL: an empty
 * dictionary when there are none). */
FZ_API FzAttr *fzOpGetAttrDict(const FzOp *op);
FZ_API FzAttr *fzOpGetAttr(const FzOp *op, FzStringRef name);
/* Sets (or with value NULL removes) a discardable attribute. False after
 * an allocation failure (reported), the op unchanged. fzOpSetAttrDict
 * replaces them all with a dictionary attribute (NULL: none). The Prop
 * functions below do the same for properties. */
FZ_API FZ_MUST_CHECK bool fzOpSetAttr(FzOp *op, FzStringRef name,
                                      FzAttr *value);
FZ_API void fzOpSetAttrDict(FzOp *op, FzAttr *dict);
/* Properties (inherent attributes), as a dictionary attribute. */
FZ_API FzAttr *fzOpGetPropDict(const FzOp *op);
FZ_API FzAttr *fzOpGetProp(const FzOp *op, FzStringRef name);
FZ_API FZ_MUST_CHECK bool fzOpSetProp(FzOp *op, FzStringRef name,
                                      FzAttr *value);
FZ_API void fzOpSetPropDict(FzOp *op, FzAttr *dict);
/* A property if present, else the discardable attribute of that name. */
FZ_API FzAttr *fzOpGetInherentAttr(const FzOp *op, FzStringRef name);

/* Position of an op: each returns NULL when there is none (a detached
 * op, a top-level op, the first or last op of its block). */
FZ_API FzBlock *fzOpGetBlock(const FzOp *op);
FZ_API FzRegion *fzOpGetParentRegion(const FzOp *op);
FZ_API FzOp *fzOpGetParentOp(const FzOp *op);
FZ_API FzOp *fzOpGetNextInBlock(const FzOp *op);
FZ_API FzOp *fzOpGetPrevInBlock(const FzOp *op);
/* True when `ancestor` is op or contains it in one of its regions. */
FZ_API bool fzOpIsAncestor(const FzOp *ancestor, const FzOp *op);
/* True when a comes before b; both in the same block. Amortized O(1). */
FZ_API bool fzOpIsBeforeInBlock(const FzOp *a, const FzOp *b);

/* Unlinks op from its block; the caller then owns it. */
FZ_API void fzOpRemoveFromBlock(FzOp *op);
/* Moves op (detached or not) right before/after `anchor`, which must be
 * in a block. */
FZ_API void fzOpMoveBefore(FzOp *op, FzOp *anchor);
FZ_API void fzOpMoveAfter(FzOp *op, FzOp *anchor);

/* Deep copy (regions included). Operands are remapped through `mapping`
 * (values not in it are kept); the clone's results and block arguments
 * are recorded in it. mapping may be NULL. Detached; NULL on OOM. */
FZ_API FzOp *fzOpClone(FzOp *op, FzIRMapping *mapping);

/* Walks op and every op nested in it. Pre-order visits a parent before
 * its children and may return SKIP to not descend; post-order visits
 * children first and allows erasing the visited op. */
typedef enum FzWalkResult {
  FZ_WALK_ADVANCE,
  FZ_WALK_SKIP,
  FZ_WALK_INTERRUPT,
} FzWalkResult;
typedef enum FzWalkOrder { FZ_WALK_PRE_ORDER, FZ_WALK_POST_ORDER } FzWalkOrder;
typedef FzWalkResult (*FzWalkFn)(FzOp *op, void *userData);
/* Returns FZ_WALK_INTERRUPT if a callback interrupted, else ADVANCE. */
FZ_API FzWalkResult fzOpWalk(FzOp *op, FzWalkOrder order, FzWalkFn fn,
                             void *userData);

/*===------------------------------------------------------------------===*
 * Values and uses
 *===------------------------------------------------------------------===*/

/* Values are op results or block arguments. fzValueSetType changes the
 * type in place (no check: the caller keeps users consistent). */
FZ_API FzType *fzValueGetType(const FzValue *v);
FZ_API void fzValueSetType(FzValue *v, FzType *type);
FZ_API bool fzValueIsBlockArgument(const FzValue *v);
/* The defining op of a result; NULL for a block argument. */
FZ_API FzOp *fzValueGetDefiningOp(const FzValue *v);
/* The block that owns a block argument, or that holds the defining op. */
FZ_API FzBlock *fzValueGetParentBlock(const FzValue *v);
/* Result number or argument number. */
FZ_API size_t fzValueGetIndex(const FzValue *v);
/* Block arguments have their own location; a result has its op's. */
FZ_API FzLoc *fzValueGetLoc(const FzValue *v);
FZ_API void fzValueSetLoc(FzValue *v, FzLoc *loc); /* block arguments only */
FZ_API FzContext *fzValueGetContext(const FzValue *v);

/* The use list: iterate with GetFirstUse / GetNextUse until NULL, in no
 * particular order. Do not change the list (fzOpOperandSet, erasing the
 * user) while iterating without fetching the next use first. */
FZ_API FzOpOperand *fzValueGetFirstUse(const FzValue *v);
FZ_API FzOpOperand *fzOpOperandGetNextUse(const FzOpOperand *use);
FZ_API FzOp *fzOpOperandGetOwner(const FzOpOperand *use);
FZ_API size_t fzOpOperandGetIndex(const FzOpOperand *use);
FZ_API FzValue *fzOpOperandGetValue(const FzOpOperand *use);
FZ_API void fzOpOperandSet(FzOpOperand *use, FzValue *value);
FZ_API bool fzValueHasUses(const FzValue *v);
FZ_API bool fzValueHasOneUse(const FzValue *v);
FZ_API size_t fzValueGetNumUses(const FzValue *v);
/* Redirects every use of `from` to `to` (types are not checked). */
FZ_API void fzValueReplaceAllUsesWith(FzValue *from, FzValue *to);

/*===------------------------------------------------------------------===*
 * Blocks and regions
 *===------------------------------------------------------------------===*/

/* A detached block with n arguments (types non-NULL); locs may be NULL
 * (unknown). The caller owns it until it is added to a region. NULL on
 * allocation failure. */
FZ_API FzBlock *fzBlockCreate(FzContext *ctx, size_t n, FzType *const *types,
                              FzLoc *const *locs);
/* Destroys a detached block and its ops (their results must be unused
 * outside the block). */
FZ_API void fzBlockDestroy(FzBlock *block);
FZ_API FzContext *fzBlockGetContext(const FzBlock *block);
FZ_API size_t fzBlockGetNumArguments(const FzBlock *block);
FZ_API FzValue *fzBlockGetArgument(const FzBlock *block, size_t i);
/* Appends an argument; NULL on allocation failure. */
FZ_API FzValue *fzBlockAddArgument(FzBlock *block, FzType *type, FzLoc *loc);
/* Erases argument i, which must have no uses. */
FZ_API void fzBlockEraseArgument(FzBlock *block, size_t i);
FZ_API FzOp *fzBlockGetFirstOp(const FzBlock *block);
FZ_API FzOp *fzBlockGetLastOp(const FzBlock *block);
FZ_API size_t fzBlockGetNumOps(const FzBlock *block);
/* The last op when it is a terminator (or unregistered), else NULL. */
FZ_API FzOp *fzBlockGetTerminator(const FzBlock *block);
/* Insertion takes a detached op; the block then owns it. */
FZ_API void fzBlockAppendOp(FzBlock *block, FzOp *op);
FZ_API void fzBlockPrependOp(FzBlock *block, FzOp *op);
/* Inserts op before `before`, or at the end when before is NULL. */
FZ_API void fzBlockInsertOpBefore(FzBlock *block, FzOp *before, FzOp *op);
FZ_API FzRegion *fzBlockGetParent(const FzBlock *block);
FZ_API FzOp *fzBlockGetParentOp(const FzBlock *block);
FZ_API FzBlock *fzBlockGetNext(const FzBlock *block);
FZ_API FzBlock *fzBlockGetPrev(const FzBlock *block);
/* Unlinks the block from its region; the caller then owns it. */
FZ_API void fzBlockRemoveFromRegion(FzBlock *block);

/* Regions: an ordered list of blocks owned by the region. Append and
 * insert take detached blocks (the region then owns them). */
FZ_API FzContext *fzRegionGetContext(const FzRegion *region);
FZ_API FzOp *fzRegionGetParentOp(const FzRegion *region);
FZ_API size_t fzRegionGetIndex(const FzRegion *region);
FZ_API FzBlock *fzRegionGetFirstBlock(const FzRegion *region);
FZ_API FzBlock *fzRegionGetLastBlock(const FzRegion *region);
FZ_API size_t fzRegionGetNumBlocks(const FzRegion *region);
FZ_API bool fzRegionIsEmpty(const FzRegion *region);
FZ_API void fzRegionAppendBlock(FzRegion *region, FzBlock *block);
FZ_API void fzRegionInsertBlockBefore(FzRegion *region, FzBlock *before,
                                      FzBlock *block);
/* Moves all blocks of src to the end of dst. */
FZ_API void fzRegionTakeBody(FzRegion *dst, FzRegion *src);
/* A region created outside an op (e.g. to build a body before creating
 * the op); attach it with fzOpStateAddRegionTaken or destroy it. */
FZ_API FzRegion *fzRegionCreate(FzContext *ctx);
FZ_API void fzRegionDestroy(FzRegion *region);
/* Hands an existing detached region to the state. */
FZ_API void fzOpStateAddRegionTaken(FzOpState *st, FzRegion *region);

/*===------------------------------------------------------------------===*
 * Builder: an insertion point plus creation helpers
 *===------------------------------------------------------------------===*/

typedef struct FzBuilder {
  FzContext *ctx;
  FzBlock *block; /* NULL: ops are created detached */
  FzOp *before;   /* insert before this op; NULL: at the end of block */
} FzBuilder;

/* A builder with no insertion point. The struct is the caller's (on the
 * stack); it owns nothing and needs no cleanup. Change the insertion point
 * only through these functions. */
FZ_API void fzBuilderInit(FzBuilder *b, FzContext *ctx);
FZ_API void fzBuilderSetInsertionPointToEnd(FzBuilder *b, FzBlock *block);
FZ_API void fzBuilderSetInsertionPointToStart(FzBuilder *b, FzBlock *block);
FZ_API void fzBuilderSetInsertionPointBefore(FzBuilder *b, FzOp *op);
FZ_API void fzBuilderSetInsertionPointAfter(FzBuilder *b, FzOp *op);
/* Inserts a detached op at the insertion point (no-op without a block). */
FZ_API void fzBuilderInsert(FzBuilder *b, FzOp *op);
/* fzOpCreate + fzBuilderInsert. NULL after an error. */
FZ_API FZ_MUST_CHECK FzOp *fzBuilderCreate(FzBuilder *b, FzOpState *st);

/*===------------------------------------------------------------------===*
 * Value mapping (for clone)
 *===------------------------------------------------------------------===*/

/* A value -> value map; Create returns NULL on allocation failure;
 * Destroy frees it (NULL is ignored). Map replaces an existing entry; it
 * returns false on allocation failure (the map unchanged), after which a
 * clone through the map would keep the original value. */
FZ_API FzIRMapping *fzIRMappingCreate(FzContext *ctx);
FZ_API void fzIRMappingDestroy(FzIRMapping *m);
FZ_API bool fzIRMappingMap(FzIRMapping *m, FzValue *from, FzValue *to);
/* The mapped value, or NULL. */
FZ_API FzValue *fzIRMappingLookup(const FzIRMapping *m, const FzValue *from);

/*===------------------------------------------------------------------===*
 * Symbols
 *===------------------------------------------------------------------===*/

/* The symbol name of an op (its "sym_name" string attribute), or an
 * empty string ref with NULL data when it has none. */
FZ_API FzStringRef fzSymbolGetName(const FzOp *op);
/* Linear lookup of a symbol directly inside a symbol-table op (its first
 * region's first block). NULL if absent. */
FZ_API FzOp *fzSymbolTableLookupIn(FzOp *tableOp, FzStringRef name);
/* The closest ancestor (or op itself) with the symbol-table trait. */
FZ_API FzOp *fzSymbolTableGetNearest(FzOp *op);
/* A hashed table over one symbol-table op, for repeated lookups. Stays
 * valid while no symbol is added, removed or renamed behind its back.
 * NULL on allocation failure; the caller destroys it (NULL ignored). */
FZ_API FzSymbolTable *fzSymbolTableCreate(FzOp *tableOp);
FZ_API void fzSymbolTableDestroy(FzSymbolTable *t);
FZ_API FzOp *fzSymbolTableLookup(const FzSymbolTable *t, FzStringRef name);

/*===------------------------------------------------------------------===*
 * Context extensions (added by the pass-infrastructure work, ir/extensions.c)
 *
 * Keyed slots that let a subsystem hang state off a context without any
 * global variable (the pass registry lives in one). A key is the address
 * of a static object owned by the subsystem; values are destroyed, in
 * reverse order of creation, when the context is destroyed.
 *===------------------------------------------------------------------===*/

typedef void (*FzExtensionDestroyFn)(FzContext *ctx, void *value);
/* The value stored under key, or NULL. */
FZ_API void *fzContextGetExtension(const FzContext *ctx, const void *key);
/* Stores value under key, replacing (and destroying) a previous value.
 * destroy may be NULL. Returns false on allocation failure (value is then
 * not stored and not destroyed). */
FZ_API FZ_MUST_CHECK bool fzContextSetExtension(FzContext *ctx, const void *key,
                                                void *value,
                                                FzExtensionDestroyFn destroy);

/*===------------------------------------------------------------------===*
 * Textual format: parse, print, verify
 *===------------------------------------------------------------------===*/

/* Parses a whole source buffer. When the buffer holds exactly one
 * builtin.module at top level it is returned; otherwise the top-level ops
 * are wrapped in a new builtin.module. `lineOffset` is added to every line
 * number (for split input files); usually 0. The buffer is copied into
 * the context (see fzContextAddSourceBuffer). Returns a detached module
 * the caller must destroy, or NULL after reporting every error found.
 * The result is not verified. */
FZ_API FzOp *fzParseSource(FzContext *ctx, FzStringRef contents,
                           FzStringRef fileName, unsigned lineOffset);
/* Like fzParseSource with lineOffset 0, but without copying the buffer:
 * the context keeps pointing into `contents` (for diagnostics), so the
 * caller keeps it alive and unchanged until the context is destroyed.
 * contents.data[contents.length] must be a NUL byte; a buffer without
 * one is copied as by fzParseSource. */
FZ_API FzOp *fzParseSourceInPlace(FzContext *ctx, FzStringRef contents,
                                  FzStringRef fileName);
/* Reads and parses a file ("-" is stdin). NULL after an error (which
 * includes a file that cannot be read). Same ownership as fzParseSource. */
FZ_API FzOp *fzParseFile(FzContext *ctx, const char *path);

enum {
  FZ_PRINT_GENERIC = 1u << 0,   /* every op in MLIR's generic form */
  FZ_PRINT_DEBUGINFO = 1u << 1, /* print loc(...) on ops and arguments */
  /* number values as if printing started at the nearest isolated-from-
   * above ancestor (or the op itself), so that a nested op prints with
   * the names it has in its function's dump */
  FZ_PRINT_LOCAL_SCOPE = 1u << 2,
};

/* Prints op and everything in it, ending with a newline. */
FZ_API void fzOpPrint(FzOp *op, unsigned flags, FzPrintCallback cb,
                      void *userData);
FZ_API void fzOpDump(FzOp *op, unsigned flags, FILE *out);

/* Verifies op and everything nested: structural invariants (terminators,
 * single-block regions, block argument types, use lists), dominance,
 * isolation from above, and each op's verify hook. Reports every error
 * found; returns true when there were none. */
FZ_API FZ_MUST_CHECK bool fzOpVerify(FzOp *op);

#ifdef __cplusplus
}
#endif

#endif /* FZ_IR_H */

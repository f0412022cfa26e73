/* importers/onnx/onnx_internal.h - what the ONNX importer's files share:
 * the importer state, the op table row, and the helpers that node
 * handlers build graph ops with.
 *
 * The importer walks the graph's nodes in order (ONNX requires them to be
 * topologically sorted). For each node it resolves the input names to
 * FzValues, checks the attributes against the table row, and calls the
 * row's handler, which appends graph ops at the builder's insertion point
 * (the end of @main's body) and stores one FzValue per output.
 *
 * Invariants. Every op a handler emits goes through fzOnnxEmit, which
 * infers the result type with the op definition's hook, creates the op at
 * the node's location, and folds it to a graph.constant when all its
 * operands are constants (this is how shape subgraphs disappear). A
 * handler reports at most one error per node (fzOnnxError; further
 * reports for the same node are dropped); errors raised by the dialect
 * while a node is imported are captured and re-reported in the node's
 * words. A node whose input failed is skipped without a new error.
 *
 * Ownership. Everything temporary lives in the importer's arena (freed
 * at the end of the import); the protobuf messages are owned by the
 * driver (model.c) and freed after the import.
 */
#ifndef FZ_ONNX_INTERNAL_H
#define FZ_ONNX_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>

#include "fz/dialects.h"
#include "fz/onnx.h"
#include "ir/util.h"
#include "onnx.pb-c.h"

/* The newest opset of the default domain whose op versions the importer
 * knows (versions.c). A model importing a newer one is read node by node:
 * each node whose op's version cannot be told is an error. */
#define FZ_ONNX_MAX_OPSET 21
/* im->opset of a model that imports no opset of the default domain. */
#define FZ_ONNX_NO_OPSET INT64_MIN
/* Nodes imported from subgraphs (If branches, unrolled Loop and Scan
 * bodies) in one import, at most. */
#define FZ_ONNX_MAX_UNROLLED ((int64_t)1 << 20)
/* Constants folded at import are limited to this many elements. */
#define FZ_ONNX_FOLD_LIMIT ((int64_t)1 << 22)

typedef struct FzOnnxOpDef FzOnnxOpDef;
typedef struct FzOnnxInput FzOnnxInput; /* a graph input (inputs.c) */

typedef struct FzOnnxImporter {
  FzContext *ctx;
  const char *modelName; /* "model.onnx": in locations and messages */
  const char *baseDir;   /* for external data; NULL: none allowed */
  const FzOnnxImportOptions *options; /* never NULL */
  FzLoc *errorLoc;       /* loc("model.onnx"): where errors are reported */
  FzLoc *fileLoc;        /* loc("model.onnx":0:0) */
  int64_t opset;         /* of the default domain, or FZ_ONNX_NO_OPSET */
  FzArena arena;         /* temporaries of the whole import */
  FzBuilder b;           /* at the end of @main's body */
  FzPtrMap values;       /* FzIdent (ONNX value name) -> FzValue or poison */
  FzPtrMap initializers; /* FzIdent -> Onnx__TensorProto not yet emitted */
  FzPtrMap inputNames;   /* FzIdent -> Onnx__ValueInfoProto: graph inputs */
  FzPtrMap unsignedValues; /* FzValue -> 1: i8/i16/i32/i64 values
                              holding UINT8/16/32/64 bits (unsigned.c) */
  FzBlock *body;         /* @main's body */
  FzPtrVec inputs;       /* FzOnnxInput: the graph inputs that are not
                            initializers, in order */
  FzPtrVec argInputs;    /* FzOnnxInput of each argument of @main */
  bool notedDynamic;     /* the symbolic-dims note was attached */
  bool quiet;            /* a probing import: nothing is reported */
  int64_t unrolledNodes; /* nodes imported from subgraphs (bounded) */
  size_t numErrors;

  /* The node being imported. */
  const Onnx__NodeProto *node;
  const FzOnnxOpDef *row; /* its op table row */
  int opVersion;        /* the version of its op the model's opset means
                           (ReduceMax at opset 19: 18) */
  const char *nodeName; /* its name, or its first output's */
  FzLoc *nodeLoc;
  bool nodeFailed;      /* an error was reported for it */
  bool widenedUnsigned; /* its unsigned operands were widened (unsigned.c) */
  unsigned widenedBits; /* their width (8, 16, 32; 64: biased), 0: none */
  bool reporting;       /* fzOnnxError is reporting: not captured */
  char capturedError[512]; /* the first dialect error while importing it */
  bool captured;
} FzOnnxImporter;

/* A node handler: `in` holds one value per node input (NULL where the
 * optional input is absent), `out` receives one value per node output
 * (outputs with an empty name may be left NULL). Returns false after
 * reporting an error. The node is im->node. */
typedef bool (*FzOnnxHandler)(FzOnnxImporter *im, FzValue *const *in,
                              size_t numIn, FzValue **out, size_t numOut);

/* One row of the op table. `attrs` lists the attribute names the op
 * takes; a name may carry the versions that have it: "axes<18" (versions
 * before 18), "num_outputs>=18" (versions from 18). */
struct FzOnnxOpDef {
  const char *opType;  /* "Conv" */
  FzOnnxHandler fn;
  const char *graphOp; /* for handlers shared by several rows; or NULL */
  const char *attrs;   /* known attribute names, space-separated */
  int minInputs, maxInputs;   /* maxInputs -1: variadic */
  int maxOutputs;
};

/* The table parts (one per ops_*.c file), each ending with a row whose
 * opType is NULL. */
extern const FzOnnxOpDef fzOnnxElementwiseOps[];
extern const FzOnnxOpDef fzOnnxMiscOps[];
extern const FzOnnxOpDef fzOnnxNnOps[];
extern const FzOnnxOpDef fzOnnxReduceOps[];
extern const FzOnnxOpDef fzOnnxShapeOps[];
extern const FzOnnxOpDef fzOnnxLossOps[];
extern const FzOnnxOpDef fzOnnxResizeOps[];
extern const FzOnnxOpDef fzOnnxIndexOps[];
extern const FzOnnxOpDef fzOnnxRnnOps[];
extern const FzOnnxOpDef fzOnnxControlOps[];
extern const FzOnnxOpDef fzOnnxDataDependentOps[];
extern const FzOnnxOpDef fzOnnxSampleOps[];
extern const FzOnnxOpDef fzOnnxMathOps[];
extern const FzOnnxOpDef fzOnnxTextOps[];
extern const FzOnnxOpDef fzOnnxSignalOps[];
extern const FzOnnxOpDef fzOnnxQuantOps[];
extern const FzOnnxOpDef fzOnnxUnpoolOps[];
extern const FzOnnxOpDef fzOnnxRoiAlignOps[];

/*===--- Unsigned integers (unsigned.c) -------------------------------===*/

/* UINT8/16/32/64 tensors are i8/i16/i32/i64 tensors of the same bits,
 * marked unsigned. */
void fzOnnxMarkUnsigned(FzOnnxImporter *im, FzValue *v);
bool fzOnnxIsUnsigned(FzOnnxImporter *im, FzValue *v);
/* The width of an unsigned value (8, 16, 32, 64); 0 when not unsigned. */
unsigned fzOnnxUnsignedBits(FzOnnxImporter *im, FzValue *v);
/* UINT8, UINT16, UINT32 or UINT64. */
bool fzOnnxDataTypeIsUnsigned(int32_t dataType);
/* uint64 Div and Mod, decomposed into i64 ops; *done when the node was
 * one (then out[0] is set), else the caller runs its handler. */
bool fzOnnxImportUnsigned64(FzOnnxImporter *im, FzValue *const *in,
                            size_t nIn, FzValue **out, bool *done);
/* BitShift of uint64 bits x by y (both i64 marked unsigned). */
bool fzOnnxBitShift64(FzOnnxImporter *im, FzValue *x, FzValue *y, bool left,
                      FzValue **out);
/* Refuses a uint8 operand of a node that would read it as signed. */
bool fzOnnxCheckUnsignedInputs(FzOnnxImporter *im, FzValue *const *in,
                               size_t n);
/* For the ops that order or divide (Max, Min, Div, Mod, MaxPool, the
 * comparisons, ...): replaces each uint8 operand in in[] by its
 * zero-extension to i32; *widened tells whether one was. */
bool fzOnnxWidenUnsignedInputs(FzOnnxImporter *im, FzValue **in, size_t n,
                               bool *widened);
/* After a widened node: its i32 results back to uint8. */
bool fzOnnxNarrowUnsignedOutputs(FzOnnxImporter *im, FzValue **out,
                                 size_t n);
/* Marks the output of a data-movement node of a uint8 input. */
void fzOnnxPropagateUnsigned(FzOnnxImporter *im, FzValue *const *in,
                             size_t nIn, FzValue *const *out, size_t nOut);
/* Cast from an unsigned value or to UINT8/16/32/64 (to is i8/i16/i32/i64
 * then, toUnsigned set). */
bool fzOnnxCastUnsigned(FzOnnxImporter *im, FzValue *x, FzType *to,
                        bool toUnsigned, FzValue **out);

/* The row for an op type, or NULL. */
const FzOnnxOpDef *fzOnnxLookupOp(const char *opType);
/* The row for an op of the ai.onnx.preview.training domain (Adagrad,
 * Momentum, Adam), or NULL. (ops_training.c) */
const FzOnnxOpDef *fzOnnxLookupTrainingOp(const char *opType);

/* The version of op `opType` that opset `opset` of the default domain
 * means: its newest since-version at most `opset`; 0 when the op is not
 * defined yet at that opset; -1 when the version table has no entry for
 * it. *first and *newest (may be NULL) receive the op's first and newest
 * since-versions in the table. (versions.c) */
int fzOnnxOpVersion(const char *opType, int64_t opset, int *first,
                    int *newest);
/* Why the importer refuses an op type it has no row for, or NULL. */
const char *fzOnnxRefusedReason(const char *opType);

/*===--- Errors --------------------------------------------------------===*/

/* Reports "node 'name' (Type): message" once per node; returns false. */
bool fzOnnxError(FzOnnxImporter *im, const char *fmt, ...) FZ_PRINTF(2, 3);
/* An error not tied to a node: "message" at the model. */
bool fzOnnxModelError(FzOnnxImporter *im, const char *fmt, ...)
    FZ_PRINTF(2, 3);
/* Reports that input `i` must be a constant (computable at import). */
bool fzOnnxErrorNotConstant(FzOnnxImporter *im, size_t i, const char *what);

/*===--- Graph inputs (inputs.c) ---------------------------------------===*/

/* Defines ONNX value `name` as v (NULL: poison). False on OOM. (model.c) */
bool fzOnnxDefineValue(FzOnnxImporter *im, const char *name, FzValue *v);
/* Binds the graph inputs that are not initializers: each becomes an
 * argument of @main (its type from the model and the options' shapes and
 * symbols), or a constant when the options bind its value: entries
 * without ifNeeded, and those whose bindNeeded[k] is true (bindNeeded may
 * be NULL). Argument types are pushed to argTypes. Errors in the options
 * are reported (the inputs are then poison); false only on OOM. */
bool fzOnnxBindInputs(FzOnnxImporter *im, const Onnx__GraphProto *g,
                      FzBlock *body, FzPtrVec *argTypes,
                      const bool *bindNeeded);
/* Marks the graph inputs whose arguments v is computed from as needed at
 * import (v is an operand the node needs as a constant). */
void fzOnnxDemandInputs(FzOnnxImporter *im, FzValue *v);
/* Sets needed[k] for each inputValues entry k whose input was demanded
 * and is not bound yet; true when one was newly set. */
bool fzOnnxInputsDemanded(FzOnnxImporter *im, bool *needed);
/* Whether inputValues entry `option` was bound as a constant. */
bool fzOnnxInputIsBound(FzOnnxImporter *im, size_t option);
/* Attaches to diag a note per graph input left with dynamic dims (their
 * symbols, and how to give them). */
void fzOnnxNoteSymbolicDims(FzOnnxImporter *im, FzDiagnostic *diag);

/* Imports the nodes of subgraph g (a body of If, Loop, Scan) into the
 * current block, its inputs bound to in[0..nIn) (outer names stay
 * visible), and stores its outputs' values in out[0..nOut). Its names are
 * forgotten afterwards, so a body can be imported once per unrolled
 * iteration. Errors in its nodes are reported in their words (the
 * current node is then marked failed); false after an error. (model.c) */
bool fzOnnxImportSubgraph(FzOnnxImporter *im, const Onnx__GraphProto *g,
                          size_t nIn, FzValue *const *in, size_t nOut,
                          FzValue **out);

/*===--- Attributes of the current node --------------------------------===*/

const Onnx__AttributeProto *fzOnnxAttr(FzOnnxImporter *im, const char *name);
/* Each reads attribute `name` into *out (dflt when absent); an attribute
 * of the wrong type is an error. */
bool fzOnnxAttrInt(FzOnnxImporter *im, const char *name, int64_t dflt,
                   int64_t *out);
bool fzOnnxAttrFloat(FzOnnxImporter *im, const char *name, double dflt,
                     double *out);
/* The string, NUL-terminated, in the arena. */
bool fzOnnxAttrString(FzOnnxImporter *im, const char *name,
                      const char *dflt, const char **out);
/* *vals in the arena (NULL, *n = 0 and *present false when absent). */
bool fzOnnxAttrInts(FzOnnxImporter *im, const char *name, int64_t **vals,
                    size_t *n, bool *present);
bool fzOnnxAttrFloats(FzOnnxImporter *im, const char *name, double **vals,
                      size_t *n, bool *present);
/* A float attribute value: f32 when exact, else f64. */
FzAttr *fzOnnxFloatAttr(FzOnnxImporter *im, double v);
/* Reports "unsupported attribute 'name' value 'v'". */
bool fzOnnxErrorAttrValue(FzOnnxImporter *im, const char *name,
                          const char *value);

/*===--- Types, tensors and constants (tensor.c) -----------------------===*/

/* The element type of an ONNX TensorProto.DataType, or NULL when the
 * importer does not support it (strings, unsigned, complex). */
FzType *fzOnnxElementType(FzContext *ctx, int32_t dataType);
/* As fzOnnxElementType, and UINT8/16/32/64 as i8/i16/i32/i64
 * (*isUnsigned set). */
FzType *fzOnnxElementTypeU8(FzContext *ctx, int32_t dataType,
                            bool *isUnsigned);
/* "FLOAT", "UINT8", ... for messages. */
const char *fzOnnxDataTypeName(int32_t dataType);
/* A dense attribute of a TensorProto's contents; NULL after an error
 * reported at loc (errorLoc-style) prefixed with `what`. */
FzAttr *fzOnnxTensorToAttr(FzOnnxImporter *im, const Onnx__TensorProto *t,
                           const char *what);

/*===--- Building ------------------------------------------------------===*/

/* Emits `opName`(operands) with the properties given as (const char
 * *name, FzAttr *value) pairs ending with NULL. resultType NULL: inferred
 * by the op definition. Folds the op to a constant when every operand is
 * one. Returns the result, or NULL after an error (captured and reported
 * as the node's). Any NULL operand gives NULL without a new error. */
FzValue *fzOnnxEmit(FzOnnxImporter *im, const char *opName, size_t n,
                    FzValue *const *operands, FzType *resultType, ...);
FzValue *fzOnnxEmitV(FzOnnxImporter *im, const char *opName, size_t n,
                     FzValue *const *operands, FzType *resultType,
                     va_list ap);
/* Shorthands. */
FzValue *fzOnnxUnary(FzOnnxImporter *im, const char *opName, FzValue *x);
FzValue *fzOnnxBinary(FzOnnxImporter *im, const char *opName, FzValue *a,
                      FzValue *b);
FzValue *fzOnnxCompare(FzOnnxImporter *im, const char *pred, FzValue *a,
                       FzValue *b);
FzValue *fzOnnxSelect(FzOnnxImporter *im, FzValue *c, FzValue *a,
                      FzValue *b);
FzValue *fzOnnxCast(FzOnnxImporter *im, FzValue *x, FzType *elt);
FzValue *fzOnnxReshape(FzOnnxImporter *im, FzValue *x, size_t rank,
                       const int64_t *shape);
FzValue *fzOnnxBroadcastTo(FzOnnxImporter *im, FzValue *x, size_t rank,
                           const int64_t *shape);
FzValue *fzOnnxTranspose(FzOnnxImporter *im, FzValue *x, size_t rank,
                         const int64_t *perm);
/* reduce op over axes (NULL/0: every dim). */
FzValue *fzOnnxReduce(FzOnnxImporter *im, const char *opName, FzValue *x,
                      size_t numAxes, const int64_t *axes, bool keepdims);
FzValue *fzOnnxSlice(FzOnnxImporter *im, FzValue *x, const int64_t *starts,
                     const int64_t *limits, const int64_t *strides);

/* Constants. */
FzValue *fzOnnxConstAttr(FzOnnxImporter *im, FzAttr *dense);
FzValue *fzOnnxConstScalar(FzOnnxImporter *im, FzType *elt, double v);
FzValue *fzOnnxConstSplat(FzOnnxImporter *im, FzType *elt, size_t rank,
                          const int64_t *shape, double v);
FzValue *fzOnnxConstI64(FzOnnxImporter *im, size_t rank,
                        const int64_t *shape, const int64_t *vals);
FzValue *fzOnnxConstTensor(FzOnnxImporter *im, const FzTensor *t);

/* The dense attribute of a value defined by graph.constant, or NULL. */
FzAttr *fzOnnxGetConst(FzValue *v);
/* Reads a constant integer tensor (any rank, flattened) into the arena.
 * False (no error) when v is not a constant of an integer type. */
bool fzOnnxGetConstInts(FzOnnxImporter *im, FzValue *v, int64_t **vals,
                        size_t *n);
bool fzOnnxGetConstFloats(FzOnnxImporter *im, FzValue *v, double **vals,
                          size_t *n);

/* Value shapes (every value is a ranked tensor). */
FzType *fzOnnxElt(FzValue *v);
size_t fzOnnxRank(FzValue *v);
int64_t fzOnnxDim(FzValue *v, size_t i);
const int64_t *fzOnnxShape(FzValue *v);
/* True when static; else reports "unsupported dynamic shape" and false. */
bool fzOnnxRequireStatic(FzOnnxImporter *im, FzValue *v, const char *what);
/* Normalizes an axis into [0, rank); error otherwise. */
bool fzOnnxNormAxis(FzOnnxImporter *im, int64_t axis, size_t rank,
                    size_t *out);

/* Arena helpers. */
void *fzOnnxAlloc(FzOnnxImporter *im, size_t size);

/*===--- Checked arithmetic on sizes from the model ----------------------===*/

/* Sizes, counts and indices read from a model (dims, attributes,
 * constant inputs) are checked before any arithmetic on them: a 100-byte
 * model can hold a dim of 2^62 or a scale of 1e30. */

/* a * b and a + b, false (no error) when the result overflows int64_t. */
static inline bool fzOnnxMulI64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool fzOnnxAddI64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
/* *out = v when v is finite and its integer part (truncated toward zero,
 * as ONNX casts) lies in [lo, hi]; else reports "WHAT must be ... in
 * [lo, hi], got v" and returns false. No float-to-int conversion of model
 * data may skip this (out of range is undefined behaviour in C). */
bool fzOnnxFloatToInt(FzOnnxImporter *im, double v, int64_t lo, int64_t hi,
                      const char *what, int64_t *out);
/* Checks a dimension computed from model data: in [0, FZ_MAX_DIM], else
 * reports "WHAT ... is out of range" and returns false. */
bool fzOnnxCheckDim(FzOnnxImporter *im, int64_t d, const char *what);
/* Checks the element count of a constant the importer builds itself (an
 * index table, an interpolation matrix, a mask): the product of
 * shape[0..rank) must be at most FZ_ONNX_FOLD_LIMIT, else reports
 * "unsupported WHAT of ... elements (at most 2^22 are built at import)".
 * *count (may be NULL) receives the product. */
bool fzOnnxCheckBuilt(FzOnnxImporter *im, size_t rank, const int64_t *shape,
                      const char *what, int64_t *count);
/* An i64 constant counting 0..d-1 along `axis` of a rank-r tensor (unit
 * dims elsewhere); NULL after an error (d dynamic, negative or over
 * FZ_ONNX_FOLD_LIMIT). */
FzValue *fzOnnxIota(FzOnnxImporter *im, size_t r, size_t axis, int64_t d);

/* Pool/conv window from ONNX attributes (auto_pad, pads, strides,
 * dilations, kernel_shape) for `spatial` spatial dims (1 or 2) of x and
 * kernel dims k: pads come out as [begin..., end...]. */
bool fzOnnxWindowPads(FzOnnxImporter *im, FzValue *x, size_t spatial,
                      const int64_t *kernel, const int64_t *strides,
                      const int64_t *dilations, int64_t *pads);

/* MaxPool's Indices: for x [N, C, H, W] and its max pool y [N, C, OH,
 * OW] of that window (kernel, strides, dilations: 2 entries; pads: top,
 * left, bottom, right), the int64 flat position of each maximum in x
 * (row-major, or column-major within a plane). NULL after an error.
 * (ops_unpool.c) */
FzValue *fzOnnxMaxPoolIndices(FzOnnxImporter *im, FzValue *x, FzValue *y,
                              const int64_t *kernel, const int64_t *strides,
                              const int64_t *dilations, const int64_t *pads,
                              bool columnMajor);
/* A convolution of sp >= 2 spatial dims (ops_conv_nd.c): x [N, C, ...],
 * w [M, C/group, k...], b [M] or NULL; pads [begin..., end...]. sp == 2
 * is one graph.conv2d; more, a sum of (sp-1)-D ones. NULL after an
 * error. */
FzValue *fzOnnxConvNd(FzOnnxImporter *im, FzValue *x, FzValue *w, FzValue *b,
                      size_t sp, const int64_t *strides, const int64_t *pads,
                      const int64_t *dilations, int64_t group);
/* ConvTranspose of sp >= 3 spatial dims, as fzOnnxConvNd over the input
 * dilated by the strides; pads as ONNX's (resolved from auto_pad and
 * output_shape by the caller, which checked the sizes). */
FzValue *fzOnnxConvTransposeNd(FzOnnxImporter *im, FzValue *x, FzValue *w,
                               FzValue *b, size_t sp, const int64_t *strides,
                               const int64_t *pads, const int64_t *dilations,
                               const int64_t *outputPadding, int64_t group);

/* Whether `data` can start a serialized protobuf message: its first byte
 * is a field key (a cheap test that rejects /dev/zero's zeros and most
 * text early). True for empty data. (model.c) */
bool fzOnnxLooksLikeProtobuf(const void *data, size_t size);
/* Appends the file at path to b, at most FZ_ONNX_MAX_MODEL_SIZE bytes
 * (stopping early, after the chunk that shows it, when the data is not a
 * well-formed sequence of protobuf fields); false after an error at
 * loc(path). (model.c) */
bool fzOnnxReadFile(FzContext *ctx, const char *path, FzBuf *b);

/* True when the sub-messages of the serialized message `data` (of type
 * desc) nest at most `max` deep (at most 1023); data the walk cannot
 * read is let through for protobuf-c to reject. (nesting.c) */
bool fzOnnxNestingWithin(const ProtobufCMessageDescriptor *desc,
                         const uint8_t *data, size_t size, unsigned max);

#endif /* FZ_ONNX_INTERNAL_H */

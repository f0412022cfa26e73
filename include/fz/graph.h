/* fz/graph.h - the graph dialect (tensor ops with value semantics), host
 * tensors, .npy files, and the reference interpreter.
 *
 * The graph dialect is what importers produce and what the fusion pass
 * groups: every op takes and returns ranked tensors, has no side
 * effects, and declares a fusion kind in its op definition. Its op list,
 * syntax and semantics are documented in docs/dialects/graph.md.
 *
 * The reference interpreter evaluates a func.func of graph ops on host
 * tensors (FzTensor). It computes in double and rounds to each op's
 * result dtype at the op boundary (round-to-nearest-even for f16, bf16
 * and f32), so a lowering that keeps intermediates in a wider type may
 * differ from it by the rounding of those intermediates only. It is the
 * oracle that every lowering is tested against: correctness comes before
 * speed.
 *
 * Ownership. A tensor owns its shape and data, allocated through the
 * context it was created with; fzTensorDestroy frees both. The
 * interpreter never takes ownership of its inputs and hands back new
 * tensors that the caller destroys.
 */
#ifndef FZ_GRAPH_H
#define FZ_GRAPH_H

#include "fz/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------------------------------------------===*
 * The dialect
 *===------------------------------------------------------------------===*/

/* Registers the graph dialect into ctx (twice is harmless). False only
 * after an error was reported (allocation failure, a name clash). */
FZ_MUST_CHECK bool fzRegisterGraphDialect(FzContext *ctx);
/* The graph dialect's definition (static; for materializing constants). */
const FzDialectDef *fzGraphDialectGet(void);

/* Registers the fold-constants pass (transforms/fold_constants.c) in the
 * context's pass registry: it evaluates graph ops whose operands are all
 * constants with the interpreter and replaces them by graph.constant, up
 * to its `max-elements` option per result. */
FZ_MUST_CHECK bool fzRegisterFoldConstantsPass(FzContext *ctx);

/* The largest rank a graph op accepts. */
#define FZ_GRAPH_MAX_RANK 16

/* Creates `graph.constant` holding value (a dense attribute) at the
 * builder's insertion point; loc may be NULL (unknown). NULL after an
 * error. */
FzOp *fzGraphCreateConstant(FzBuilder *b, FzAttr *value, FzLoc *loc);


/*===------------------------------------------------------------------===*
 * Host tensors
 *===------------------------------------------------------------------===*/

/* A dense, contiguous, row-major tensor on the host. Elements are stored
 * as in dense attributes: packed little-endian in their storage size
 * (i1: one byte holding 0 or 1; f16/bf16: the 2-byte IEEE bits). The
 * fields are read-only to users; change elements through the Set
 * functions or by writing `data` directly in that storage format. */
typedef struct FzTensor {
  FzContext *ctx; /* allocates shape and data */
  FzType *dtype;  /* element type: f16 bf16 f32 f64 i1 i8 i16 i32 i64 */
  size_t rank;
  int64_t *shape;      /* rank dims, all >= 0; NULL when rank is 0 */
  int64_t numElements; /* product of shape (1 for rank 0) */
  void *data;          /* numElements * fzTypeGetStorageSize(dtype) bytes */
} FzTensor;

/* True for the element types that tensors, .npy files and the
 * interpreter support: f16 bf16 f32 f64 and i1 i8 i16 i32 i64. */
bool fzTensorDTypeIsSupported(const FzType *dtype);

/* A zero-filled tensor. NULL after an error (unsupported dtype, negative
 * dim, rank above FZ_GRAPH_MAX_RANK, too many elements, out of memory). */
FzTensor *fzTensorCreate(FzContext *ctx, FzType *dtype, size_t rank,
                         const int64_t *shape);
/* A zero-filled tensor of a statically shaped tensor type. */
FzTensor *fzTensorCreateFromType(FzContext *ctx, FzType *tensorType);
/* A deep copy; NULL on allocation failure. */
FzTensor *fzTensorClone(const FzTensor *t);
/* Frees the tensor and its data. NULL is ignored. */
void fzTensorDestroy(FzTensor *t);
/* Destroys the first n tensors of the array (NULL entries skipped) and
 * frees the array itself, which was allocated through ctx. */
void fzTensorArrayDestroy(FzContext *ctx, size_t n, FzTensor **tensors);

/* tensor<shape x dtype>; NULL on allocation failure. */
FzType *fzTensorGetType(const FzTensor *t);
/* Size of the data in bytes. */
size_t fzTensorGetNumBytes(const FzTensor *t);

/* Element i (row-major linear index, 0 <= i < numElements) as a double /
 * an int64 (floats are truncated toward zero; NaN gives 0). */
double fzTensorGetF64(const FzTensor *t, int64_t i);
int64_t fzTensorGetI64(const FzTensor *t, int64_t i);
/* Stores element i. Floats round to nearest even; integers take the
 * value truncated toward zero, saturated to the type's range (NaN is
 * 0); i1 stores v != 0. */
void fzTensorSetF64(FzTensor *t, int64_t i, double v);
/* Integers wrap modulo 2^width (sign-extended); i1 stores v & 1; floats
 * take the nearest value. */
void fzTensorSetI64(FzTensor *t, int64_t i, int64_t v);

/* A tensor holding the elements of a dense attribute (splats expanded).
 * NULL after an error. */
FzTensor *fzTensorFromDenseAttr(FzContext *ctx, const FzAttr *dense);
/* A dense attribute holding t (a splat when every element is the same).
 * NULL after an error. */
FzAttr *fzTensorToDenseAttr(const FzTensor *t);

/*===------------------------------------------------------------------===*
 * .npy files (runtime/npy.c)
 *
 * Read: format versions 1, 2 and 3; byte orders '<', '|', '=' and '>'
 * (big-endian data is byte-swapped); dtypes f2 f4 f8 i1 i2 i4 i8 b1, and
 * bf16 stored as 2-byte void ('<V2' or '|V2': what numpy writes for
 * ml_dtypes.bfloat16 arrays); C or Fortran order (Fortran is transposed
 * to C). Write: version 1 (2 when the header needs it), C order,
 * little-endian; bf16 as '<V2'.
 * Malformed, truncated or oversized input is an error diagnostic naming
 * the file (never a crash); so is trailing data after the elements.
 *===------------------------------------------------------------------===*/

/* Reads a .npy file. NULL after an error. */
FzTensor *fzNpyReadFile(FzContext *ctx, const char *path);
/* Reads .npy bytes; `name` is used in error messages. */
FzTensor *fzNpyReadBuffer(FzContext *ctx, const void *data, size_t size,
                          const char *name);
/* Writes the .npy bytes of t through cb (header, then data). */
void fzNpySerialize(const FzTensor *t, FzPrintCallback cb, void *userData);
/* Writes t to `path` atomically (a temporary file renamed over it); no
 * file is left behind on error. False after an error. */
FZ_MUST_CHECK bool fzNpyWriteFile(const FzTensor *t, const char *path);

/*===------------------------------------------------------------------===*
 * The reference interpreter
 *===------------------------------------------------------------------===*/

typedef struct FzInterpOptions {
  /* The largest tensor (in elements) the interpreter creates; 0 means
   * the default, 2^30. */
  int64_t maxElements;
  /* The deepest chain of func.call; 0 means the default, 64. */
  unsigned maxCallDepth;
  /* Report nothing (for speculative evaluation, e.g. folding): failures
   * only return false, with the first error's text copied into
   * errorMessage (errorMessageSize bytes, NUL-terminated) when given. */
  bool quiet;
  char *errorMessage;
  size_t errorMessageSize;
} FzInterpOptions;

/* Evaluates the func.func `func` (which must have a body) on inputs,
 * one per argument, checked against the argument types: dtype, rank and
 * every static dim (a mismatch is an error naming the argument). On
 * success *outputs is a new array of *numOutputs new tensors, one per
 * returned value; release it with fzTensorArrayDestroy. Returns false
 * after reporting errors at the offending op's location (an op without
 * a kernel, a dynamic dim that the inputs do not determine, integer
 * division by zero, a limit exceeded). options may be NULL. */
FZ_MUST_CHECK bool fzInterpretFunction(FzOp *func, size_t numInputs,
                                       FzTensor *const *inputs,
                                       const FzInterpOptions *options,
                                       size_t *numOutputs, FzTensor ***outputs);

/* Evaluates one graph op (no regions) on operand tensors, writing one
 * new tensor per result into results. For folding. False after an
 * error, with results all NULL. options may be NULL. */
FZ_MUST_CHECK bool fzInterpretOp(FzOp *op, FzTensor *const *operands,
                                 const FzInterpOptions *options,
                                 FzTensor **results);

/* The state of one interpretation, handed to kernels. */
typedef struct FzGraphInterp FzGraphInterp;

/* An op's interpreter kernel (see FzGraphKernel). It creates one
 * tensor per result of op in results (through fzGraphInterpCreateTensor)
 * from the operand tensors (never modified). On failure it reports an
 * error at op and returns false; the interpreter frees whatever results
 * it did create. */
typedef bool (*FzGraphKernelFn)(FzGraphInterp *interp, FzOp *op,
                                FzTensor *const *operands, FzTensor **results);
/* What FzOpDef.interpret points at for an op the interpreter can run (a
 * struct, since ISO C does not convert function pointers to void *). */
typedef struct FzGraphKernel {
  FzGraphKernelFn fn;
} FzGraphKernel;

/* For kernels: the context of the interpretation (valid during the kernel
 * call, like interp itself). */
FzContext *fzGraphInterpGetContext(const FzGraphInterp *interp);
/* A zero-filled tensor for a result of op, within the element limit;
 * NULL after an error reported at op. */
FzTensor *fzGraphInterpCreateTensor(FzGraphInterp *interp, FzOp *op,
                                    FzType *dtype, size_t rank,
                                    const int64_t *shape);
/* Evaluates the ops of block with its arguments bound to args (one per
 * block argument) up to its terminator, whose operands become new
 * tensors in results (room for the terminator's operand count). For
 * kernels of region-holding ops such as graph.fusion. */
FZ_MUST_CHECK bool fzGraphInterpRunBlock(FzGraphInterp *interp, FzBlock *block,
                                         FzTensor *const *args,
                                         FzTensor **results);

#ifdef __cplusplus
}
#endif

#endif /* FZ_GRAPH_H */

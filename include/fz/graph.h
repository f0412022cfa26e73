/* fz/graph.h - the graph dialect (tensor ops with value semantics) and
 * the reference interpreter (host tensors and .npy files: fz/tensor.h).
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

#include "fz/layout.h"
#include "fz/opdef.h"
#include "fz/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------------------------------------------===*
 * The dialect
 *===------------------------------------------------------------------===*/

/* Registers the graph dialect into ctx (twice is harmless). False only
 * after an error was reported (allocation failure, a name clash). */
FZ_API FZ_MUST_CHECK bool fzRegisterGraphDialect(FzContext *ctx);
/* The graph dialect's definition (static; for materializing constants). */
FZ_API const FzDialectDef *fzGraphDialectGet(void);

/* Registers the fold-constants pass (transforms/fold_constants.c) in the
 * context's pass registry: it evaluates graph ops whose operands are all
 * constants with the interpreter and replaces them by graph.constant, up
 * to its `max-elements` option per result. */
FZ_API FZ_MUST_CHECK bool fzRegisterFoldConstantsPass(FzContext *ctx);

/* The largest rank a graph op accepts (that of a host tensor). */
#define FZ_GRAPH_MAX_RANK FZ_TENSOR_MAX_RANK

/* Creates `graph.constant` holding value (a dense attribute) at the
 * builder's insertion point; loc may be NULL (unknown). NULL after an
 * error. */
FZ_API FzOp *fzGraphCreateConstant(FzBuilder *b, FzAttr *value, FzLoc *loc);

/* The data layout of graph.conv2d and the pooling ops, their optional
 * string attribute `layout` (docs/dialects/graph.md): "nchw" (channels
 * first; also when absent) or "nhwc" (channels last: the input is
 * [N, H, W, C] and the result [N, OH, OW, M]; a conv's weight stays
 * [M, C / groups, kH, kW]). FzGraphLayout: fz/layout.h. */
/* The layout op's `layout` attribute names: FZ_GRAPH_LAYOUT_NHWC for
 * "nhwc", FZ_GRAPH_LAYOUT_NCHW otherwise (absent, or any op without
 * one; the verifier rejects other values). op must not be NULL. */
FZ_API FzGraphLayout fzGraphOpGetLayout(const FzOp *op);

/* Host tensors (FzTensor) and .npy files: fz/tensor.h, included above. */

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
FZ_API FZ_MUST_CHECK bool fzInterpretFunction(FzOp *func, size_t numInputs,
                                              FzTensor *const *inputs,
                                              const FzInterpOptions *options,
                                              size_t *numOutputs,
                                              FzTensor ***outputs);

/* Evaluates one graph op (no regions) on operand tensors, writing one
 * new tensor per result into results. For folding. False after an
 * error, with results all NULL. options may be NULL. */
FZ_API FZ_MUST_CHECK bool fzInterpretOp(FzOp *op, FzTensor *const *operands,
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
FZ_API FzContext *fzGraphInterpGetContext(const FzGraphInterp *interp);
/* A zero-filled tensor for a result of op, within the element limit;
 * NULL after an error reported at op. */
FZ_API FzTensor *fzGraphInterpCreateTensor(FzGraphInterp *interp, FzOp *op,
                                           FzType *dtype, size_t rank,
                                           const int64_t *shape);
/* Evaluates the ops of block with its arguments bound to args (one per
 * block argument) up to its terminator, whose operands become new
 * tensors in results (room for the terminator's operand count). For
 * kernels of region-holding ops such as graph.fusion. */
FZ_API FZ_MUST_CHECK bool fzGraphInterpRunBlock(FzGraphInterp *interp,
                                                FzBlock *block,
                                                FzTensor *const *args,
                                                FzTensor **results);

#ifdef __cplusplus
}
#endif

#endif /* FZ_GRAPH_H */

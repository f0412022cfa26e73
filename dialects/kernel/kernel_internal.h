/* dialects/kernel/kernel_internal.h - what the kernel dialect's files
 * share: the per-op record hung off FzOpDef.extra, the op definitions,
 * small type and assembly helpers, and the simulator's entry points.
 *
 * Every kernel op's definition points `extra` at an FzKernelOpInfo whose
 * opcode is the op's FZ_KERNEL_OP_* entry (fzKernelGetOpcode reads it).
 * Private to dialects/kernel.
 */
#ifndef FZ_KERNEL_INTERNAL_H
#define FZ_KERNEL_INTERNAL_H

#include "fz/kernel.h"
#include "ir/util.h"

typedef struct FzKernelOpInfo {
  FzKernelOpcode opcode;
} FzKernelOpInfo;

#define FZ_KERNEL_DECLARE_DEF(id, name) extern const FzOpDef fzKernelOp_##id;
FZ_KERNEL_OPS(FZ_KERNEL_DECLARE_DEF)
#undef FZ_KERNEL_DECLARE_DEF

/* Defines the table entry fzKernelOp_ID (used by the ops_*.c files). */
#define FZ_KERNEL_OP(ID, NAME, SUMMARY, TRAITS, NOPS, NRES, NREG, ATTRS,      \
                     VERIFY, PRINT, PARSE)                                    \
  static const FzKernelOpInfo info_##ID = {FZ_KERNEL_OP_##ID};                \
  const FzOpDef fzKernelOp_##ID = {                                           \
      .name = NAME,                                                           \
      .summary = SUMMARY,                                                     \
      .traits = TRAITS,                                                       \
      .numOperands = NOPS,                                                    \
      .numResults = NRES,                                                     \
      .numRegions = NREG,                                                     \
      .fusionKind = FZ_FUSION_OPAQUE,                                         \
      .inherentAttrs = ATTRS,                                                 \
      .verify = VERIFY,                                                       \
      .print = PRINT,                                                         \
      .parse = PARSE,                                                         \
      .extra = &info_##ID,                                                    \
  };

/*===--- Helpers (ops_func.c) ------------------------------------------===*/

FzType *fzKernelOperandType(const FzOp *op, size_t i);
FzType *fzKernelResultType(const FzOp *op, size_t i);
bool fzKernelIsBuffer(const FzType *t);
bool fzKernelIsIndex(const FzType *t);
/* Reports "must be inside a kernel.func" unless op is nested in one. */
bool fzKernelVerifyInKernel(FzOp *op);
/* Prints the op's discardable attributes (properties elided) in braces. */
void fzKernelPrintAttrs(FzAsmPrinter *p, FzOp *op);
/* "[%i, %j]" for operands [from, end). */
void fzKernelPrintIndices(FzAsmPrinter *p, FzOp *op, size_t from);
/* Parses `[` operands `]` (at most FZ_GRAPH_MAX_RANK) and resolves them
 * as index values. */
bool fzKernelParseIndices(FzAsmParser *p, FzUnresolvedOperand *out,
                          size_t *n);
bool fzKernelResolveIndices(FzAsmParser *p, const FzUnresolvedOperand *u,
                            size_t n, FzLoc *loc, FzOpState *st);
/* Checks operands [from, from+rank) are index values, one per dim. */
bool fzKernelCheckIndices(FzOp *op, size_t from, size_t rank);
/* The string property `name` of op, or an empty ref. */
FzStringRef fzKernelStringProp(const FzOp *op, const char *name);

/* Atomic kinds (the `kind` property of kernel.atomic). */
typedef enum FzKernelAtomicKind {
  FZ_KERNEL_ATOMIC_ADD,
  FZ_KERNEL_ATOMIC_MAX,
  FZ_KERNEL_ATOMIC_MIN,
  FZ_KERNEL_ATOMIC_EXCH,
  FZ_KERNEL_ATOMIC_NUM
} FzKernelAtomicKind;
/* Shuffle modes (the `mode` property of kernel.shuffle). */
typedef enum FzKernelShuffleMode {
  FZ_KERNEL_SHUFFLE_XOR,
  FZ_KERNEL_SHUFFLE_DOWN,
  FZ_KERNEL_SHUFFLE_UP,
  FZ_KERNEL_SHUFFLE_IDX,
  FZ_KERNEL_SHUFFLE_NUM
} FzKernelShuffleMode;
/* The enum value of a verified op's kind / mode; -1 when unknown. */
int fzKernelAtomicGetKind(const FzOp *op);
int fzKernelShuffleGetMode(const FzOp *op);
/* kernel.shuffle's width property (1..32). */
int64_t fzKernelShuffleGetWidth(const FzOp *op);

#endif /* FZ_KERNEL_INTERNAL_H */

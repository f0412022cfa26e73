/* dialects/loop/loop_internal.h - what the loop dialect's files share:
 * the per-op record hung off FzOpDef.extra, the families that group ops
 * with one verifier / printer / parser, and small type helpers.
 *
 * Every loop op's definition points `extra` at an FzLoopOpInfo whose
 * opcode is the op's FZ_LOOP_OP_* entry; fzLoopGetOpcode reads it, so
 * the opcode of an op costs one load. Private to dialects/loop.
 */
#ifndef FZ_LOOP_INTERNAL_H
#define FZ_LOOP_INTERNAL_H

#include "fz/loop.h"
#include "ir/util.h"

/* Families: ops that share hooks. */
typedef enum FzLoopFamily {
  FZ_LOOP_FAM_BINARY_F, /* (T, T) -> T, T float (or vector of) */
  FZ_LOOP_FAM_BINARY_I, /* (T, T) -> T, T integer or index */
  FZ_LOOP_FAM_UNARY_F,  /* (T) -> T, T float */
  FZ_LOOP_FAM_FMA,      /* (T, T, T) -> T, T float */
  FZ_LOOP_FAM_DOT4,     /* (T, T, T) -> T, T i32 (or vector of) */
  FZ_LOOP_FAM_CAST,     /* (A) -> B */
  FZ_LOOP_FAM_CMP,      /* cmpf / cmpi */
  FZ_LOOP_FAM_OTHER,    /* its own hooks */
} FzLoopFamily;

typedef struct FzLoopOpInfo {
  FzLoopOpcode opcode;
  FzLoopFamily family;
} FzLoopOpInfo;

/* The definitions, one per op (dialect.c lists them through FZ_LOOP_OPS). */
#define FZ_LOOP_DECLARE_DEF(id, name) extern const FzOpDef fzLoopOp_##id;
FZ_LOOP_OPS(FZ_LOOP_DECLARE_DEF)
#undef FZ_LOOP_DECLARE_DEF

/*===--- Type helpers (types.c) ----------------------------------------===*/

/* The scalar type of t: t itself, or a vector's element type. */
FzType *fzLoopScalarOf(FzType *t);
/* Whether t is a scalar of the loop level (i1..i64, index, floats) or a
 * vector of one (not of index). */
bool fzLoopIsScalarOrVector(const FzType *t);
bool fzLoopIsFloatLike(FzType *t); /* float or vector of float */
bool fzLoopIsIntLike(FzType *t);   /* iN, index, or vector of iN */
/* i1, or vector<Nxi1> with t's lane count. NULL on OOM. */
FzType *fzLoopBoolLike(FzContext *ctx, FzType *t);
/* Same lane structure: both scalars, or vectors of equal shape. */
bool fzLoopSameLanes(FzType *a, FzType *b);

/*===--- Shared assembly helpers (asm.c) -------------------------------===*/

FzType *fzLoopOperandType(const FzOp *op, size_t i);
FzType *fzLoopResultType(const FzOp *op, size_t i);
/* Prints ", " separated operands [from, to). */
void fzLoopPrintOperandRange(FzAsmPrinter *p, FzOp *op, size_t from,
                             size_t to);
/* Parses n operands (comma separated, at least one when n > 0 is
 * required) into storage the caller provides (cap entries). */
bool fzLoopParseOperands(FzAsmParser *p, FzUnresolvedOperand *out, size_t cap,
                         size_t *n);
/* Prints the op's discardable attributes (properties elided) in braces. */
void fzLoopPrintAttrs(FzAsmPrinter *p, FzOp *op);

/* Hooks of the families (ops_arith.c), referenced by the op tables. */
bool fzLoopVerifyElementwise(FzOp *op);
void fzLoopPrintElementwise(FzOp *op, FzAsmPrinter *p);
bool fzLoopParseElementwise(FzAsmParser *p, FzOpState *st);
bool fzLoopFoldArith(FzOp *op, FzAttr *const *constOperands,
                     FzFoldResult *results);

/* Scalar evaluation (fzLoopEvalScalar, fzLoopNormalize) and element
 * access are declared in fz/loop.h: the kernel simulator shares them. */

#endif /* FZ_LOOP_INTERNAL_H */

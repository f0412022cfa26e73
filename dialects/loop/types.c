/* dialects/loop/types.c - type predicates of the loop level and the
 * assembly helpers every loop op's hooks share.
 */
#include "dialects/loop/loop_internal.h"

FzType *fzLoopScalarOf(FzType *t) {
  if (t && fzTypeGetKind(t) == FZ_TYPE_VECTOR)
    return fzShapedTypeGetElementType(t);
  return t;
}

static bool is_scalar(const FzType *t) {
  return t && (fzTypeIsFloat(t) || fzTypeIsIntOrIndex(t));
}

bool fzLoopIsScalarOrVector(const FzType *t) {
  if (!t)
    return false;
  if (fzTypeGetKind(t) == FZ_TYPE_VECTOR) {
    FzType *e = fzShapedTypeGetElementType(t);
    return fzShapedTypeGetRank(t) == 1 && is_scalar(e) &&
           fzTypeGetKind(e) != FZ_TYPE_INDEX;
  }
  return is_scalar(t);
}

bool fzLoopIsFloatLike(FzType *t) {
  return fzLoopIsScalarOrVector(t) && fzTypeIsFloat(fzLoopScalarOf(t));
}

bool fzLoopIsIntLike(FzType *t) {
  return fzLoopIsScalarOrVector(t) && fzTypeIsIntOrIndex(fzLoopScalarOf(t));
}

FzType *fzLoopBoolLike(FzContext *ctx, FzType *t) {
  FzType *i1 = fzIntegerTypeGet(ctx, 1);
  if (!t || fzTypeGetKind(t) != FZ_TYPE_VECTOR)
    return i1;
  return fzVectorTypeGet(ctx, fzShapedTypeGetRank(t), fzShapedTypeGetShape(t),
                         i1, NULL);
}

bool fzLoopSameLanes(FzType *a, FzType *b) {
  bool va = fzTypeGetKind(a) == FZ_TYPE_VECTOR;
  bool vb = fzTypeGetKind(b) == FZ_TYPE_VECTOR;
  if (va != vb)
    return false;
  return !va || fzShapedTypeGetDim(a, 0) == fzShapedTypeGetDim(b, 0);
}

FzType *fzLoopOperandType(const FzOp *op, size_t i) {
  FzValue *v = i < fzOpGetNumOperands(op) ? fzOpGetOperand(op, i) : NULL;
  return v ? fzValueGetType(v) : NULL;
}

FzType *fzLoopResultType(const FzOp *op, size_t i) {
  return i < fzOpGetNumResults(op) ? fzValueGetType(fzOpGetResult(op, i))
                                   : NULL;
}

void fzLoopPrintOperandRange(FzAsmPrinter *p, FzOp *op, size_t from,
                             size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (i > from)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, i));
  }
}

bool fzLoopParseOperands(FzAsmParser *p, FzUnresolvedOperand *out, size_t cap,
                         size_t *n) {
  FzUnresolvedOperand *ops;
  if (!fzAsmParseOperandList(p, &ops, n))
    return false;
  if (*n > cap)
    return fzAsmEmitError(p, "too many operands (at most %zu)", cap);
  for (size_t i = 0; i < *n; ++i)
    out[i] = ops[i];
  return true;
}

void fzLoopPrintAttrs(FzAsmPrinter *p, FzOp *op) {
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, false);
}

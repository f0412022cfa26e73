/* dialects/loop/index_range.c - fzLoopIndexRange (index_range.h). */
#include "dialects/loop/index_range.h"

#define MAX_DEPTH 24

static bool iv_range(FzValue *v, int64_t *lo, int64_t *hi) {
  FzBlock *b = fzValueGetParentBlock(v);
  FzOp *loop = b ? fzBlockGetParentOp(b) : NULL;
  FzLoopOpcode opc = loop ? fzLoopGetOpcode(loop) : FZ_LOOP_OP_UNKNOWN;
  size_t i = fzValueGetIndex(v), n;
  if (opc == FZ_LOOP_OP_PARALLEL)
    n = fzLoopParallelGetNumDims(loop);
  else if (opc == FZ_LOOP_OP_FOR && i == 0)
    n = 1;
  else
    return false;
  int64_t lb, ub, st;
  if (i >= n || !fzLoopValueGetConstantInt(fzOpGetOperand(loop, i), &lb) ||
      !fzLoopValueGetConstantInt(fzOpGetOperand(loop, n + i), &ub) ||
      !fzLoopValueGetConstantInt(fzOpGetOperand(loop, 2 * n + i), &st) ||
      st < 1 || ub <= lb)
    return false;
  *lo = lb;
  *hi = ub - 1;
  return true;
}

static bool range(FzValue *v, int64_t *lo, int64_t *hi, int depth) {
  if (fzLoopValueGetConstantInt(v, lo)) {
    *hi = *lo;
    return true;
  }
  if (fzValueIsBlockArgument(v))
    return iv_range(v, lo, hi);
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || depth > MAX_DEPTH || fzOpGetNumOperands(def) != 2)
    return false;
  int64_t al, ah, bl, bh;
  if (!range(fzOpGetOperand(def, 0), &al, &ah, depth + 1) ||
      !range(fzOpGetOperand(def, 1), &bl, &bh, depth + 1))
    return false;
  switch (fzLoopGetOpcode(def)) {
  case FZ_LOOP_OP_ADDI:
    return !__builtin_add_overflow(al, bl, lo) &&
           !__builtin_add_overflow(ah, bh, hi);
  case FZ_LOOP_OP_SUBI:
    return !__builtin_sub_overflow(al, bh, lo) &&
           !__builtin_sub_overflow(ah, bl, hi);
  case FZ_LOOP_OP_MULI: {
    int64_t c[4];
    if (__builtin_mul_overflow(al, bl, &c[0]) ||
        __builtin_mul_overflow(al, bh, &c[1]) ||
        __builtin_mul_overflow(ah, bl, &c[2]) ||
        __builtin_mul_overflow(ah, bh, &c[3]))
      return false;
    *lo = *hi = c[0];
    for (int i = 1; i < 4; ++i) {
      *lo = c[i] < *lo ? c[i] : *lo;
      *hi = c[i] > *hi ? c[i] : *hi;
    }
    return true;
  }
  case FZ_LOOP_OP_DIVSI: /* a >= 0 by a constant c > 0: floor = trunc */
    if (al < 0 || bl != bh || bl < 1)
      return false;
    *lo = al / bl;
    *hi = ah / bl;
    return true;
  case FZ_LOOP_OP_REMSI:
    if (al < 0 || bl != bh || bl < 1)
      return false;
    *lo = ah < bl ? al : 0;
    *hi = ah < bl ? ah : bl - 1;
    return true;
  case FZ_LOOP_OP_MINSI:
    *lo = al < bl ? al : bl;
    *hi = ah < bh ? ah : bh;
    return true;
  case FZ_LOOP_OP_MAXSI:
    *lo = al > bl ? al : bl;
    *hi = ah > bh ? ah : bh;
    return true;
  default:
    return false;
  }
}

bool fzLoopIndexRange(FzValue *v, int64_t *lo, int64_t *hi) {
  return v && range(v, lo, hi, 0);
}

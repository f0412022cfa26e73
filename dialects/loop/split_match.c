/* dialects/loop/split_match.c - splitMatchBounds (nest_match.h): the
 * bounds of a reduction loop cut into slices along a parallel dim of its
 * nest, the form of lower-loop-to-kernel's k split
 * (lowering/loop_to_kernel/split_k.c):
 *
 *   loop.parallel (..., %sb, ...) = (...) to (..., S, ...) {
 *     %lo = loop.muli %sb, KS
 *     %hi = loop.minsi (loop.addi %lo, KS), K
 *     loop.for %k = %lo to %hi step 1 ...
 *
 * with S = ceil(K / KS): slice sb covers [sb KS, min(sb KS + KS, K)).
 * Shared by the GPU matchers (small-M, tensor-core matmul and the conv2d
 * nest's convMatch). Nothing is allocated.
 */
#include "dialects/loop/nest_match.h"

/* A loop op of opcode c defined in par's body, or NULL. */
static FzOp *body_op(FzOp *par, FzValue *v, FzLoopOpcode c) {
  FzOp *d = v ? fzValueGetDefiningOp(v) : NULL;
  return d && fzLoopGetOpcode(d) == c && fzOpGetBlock(d) == fzLoopGetBody(par)
             ? d
             : NULL;
}

/* The parallel dim of par whose iv is v, or -1. */
static int iv_dim(FzOp *par, FzValue *v) {
  if (!fzValueIsBlockArgument(v) ||
      fzValueGetParentBlock(v) != fzLoopGetBody(par))
    return -1;
  return (int)fzValueGetIndex(v);
}

/* The operand of binary op d other than `one`, or NULL. */
static FzValue *other_operand(FzOp *d, FzValue *one) {
  if (fzOpGetOperand(d, 0) == one)
    return fzOpGetOperand(d, 1);
  if (fzOpGetOperand(d, 1) == one)
    return fzOpGetOperand(d, 0);
  return NULL;
}

bool splitMatchBounds(FzOp *par, FzOp *loop, int *dim, int64_t *sliceK,
                      int64_t *K) {
  int64_t step, ks = 0, k = 0, ks2 = 0, lb, ub, st;
  if (fzOpGetNumOperands(loop) < 3 ||
      !fzLoopValueGetConstantInt(fzOpGetOperand(loop, 2), &step) || step != 1)
    return false;
  FzValue *lo = fzOpGetOperand(loop, 0), *hi = fzOpGetOperand(loop, 1);
  FzOp *mul = body_op(par, lo, FZ_LOOP_OP_MULI);
  FzOp *min = body_op(par, hi, FZ_LOOP_OP_MINSI);
  if (!mul || !min)
    return false;
  int d = -1;
  for (int i = 0; i < 2 && d < 0; ++i)
    if (fzLoopValueGetConstantInt(fzOpGetOperand(mul, 1 - (size_t)i), &ks))
      d = iv_dim(par, fzOpGetOperand(mul, (size_t)i));
  FzOp *add = NULL;
  for (int i = 0; i < 2 && !add; ++i)
    if (fzLoopValueGetConstantInt(fzOpGetOperand(min, 1 - (size_t)i), &k))
      add = body_op(par, fzOpGetOperand(min, (size_t)i), FZ_LOOP_OP_ADDI);
  FzValue *c = add ? other_operand(add, lo) : NULL;
  if (d < 0 || !c || !fzLoopValueGetConstantInt(c, &ks2) || ks2 != ks ||
      ks < 1 || k < 1)
    return false;
  size_t n = fzLoopParallelGetNumDims(par);
  if (!fzLoopValueGetConstantInt(fzOpGetOperand(par, (size_t)d), &lb) ||
      !fzLoopValueGetConstantInt(fzOpGetOperand(par, n + (size_t)d), &ub) ||
      !fzLoopValueGetConstantInt(fzOpGetOperand(par, 2 * n + (size_t)d),
                                 &st) ||
      lb != 0 || st != 1 || ub != (k + ks - 1) / ks)
    return false;
  *dim = d;
  *sliceK = ks;
  *K = k;
  return true;
}

/* dialects/kernel/dialect.c - the kernel dialect's table, registration
 * and opcode lookup. The op list comes from FZ_KERNEL_OPS in fz/kernel.h;
 * each op is defined once in its family's file (ops_func.c: func, return,
 * launch; ops_thread.c: ids, shared memory, barrier, shuffle; ops_mem.c:
 * atomics, vector accesses, mma; ops_frag.c: ldmatrix, extract,
 * from_elements; ops_async.c: cp.async and its groups; ops_sm90.c:
 * mbarriers, bulk copies, the proxy fence, the warp-group mma).
 */
#include "dialects/kernel/kernel_internal.h"

#define LIST_OP(id, name) &fzKernelOp_##id,
static const FzOpDef *const kernel_ops[] = {FZ_KERNEL_OPS(LIST_OP)};
#undef LIST_OP

FzKernelOpcode fzKernelGetOpcode(const FzOp *op) {
  const FzOpDef *def = op ? fzOpGetDef(op) : NULL;
  if (!def || !def->extra)
    return FZ_KERNEL_OP_UNKNOWN;
  /* Only our own definitions may be trusted to point at an info record. */
  const FzKernelOpInfo *info = def->extra;
  if (info->opcode >= FZ_KERNEL_NUM_OPS || kernel_ops[info->opcode] != def)
    return FZ_KERNEL_OP_UNKNOWN;
  return info->opcode;
}

FzOp *fzKernelGetEnclosingFunc(FzOp *op) {
  for (; op; op = fzOpGetParentOp(op))
    if (fzKernelGetOpcode(op) == FZ_KERNEL_OP_FUNC)
      return op;
  return NULL;
}

static const FzDialectDef kernel_dialect = {
    .name = "kernel",
    .summary = "the GPU execution model: kernels, launches, threads, shared "
               "memory, warps (see docs/dialects/kernel.md)",
    .ops = kernel_ops,
    .numOps = sizeof kernel_ops / sizeof kernel_ops[0],
    .materializeConstant = NULL,
};

const FzDialectDef *fzKernelDialectGet(void) {
  return &kernel_dialect;
}

bool fzRegisterKernelDialect(FzContext *ctx) {
  return fzContextRegisterDialect(ctx, &kernel_dialect);
}

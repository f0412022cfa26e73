/* dialects/kernel/ops_async.c - asynchronous copies from global to
 * shared memory: kernel.cp_async, kernel.cp_async_commit and
 * kernel.cp_async_wait (PTX cp.async.cg.shared.global, commit_group,
 * wait_group; sm_80 and later).
 *
 * Custom forms:
 *   kernel.cp_async %s[%o], %g[%i, %k] : buffer<?xbf16, 3>, buffer<64x64xbf16>
 *   kernel.cp_async %s[%o], %g[%i, %k], %n : buffer<?xbf16, 3>, buffer<64x64xbf16>
 *   kernel.cp_async size 8 %s[%o], %g[%i, %k], %n : buffer<?xf16, 3>, buffer<64x196xf16>
 *   kernel.cp_async_commit
 *   kernel.cp_async_wait 2
 *
 * A cp_async copies 16 contiguous bytes (or `size` 4 or 8) of the last dimension of a global buffer
 * into a shared buffer; with the optional source size %n (index, 0 to
 * the size) only the first %n bytes are read and the rest are
 * zero-filled, so a tile load past the end of a matrix needs no branch.
 * Both addresses must be aligned to the size. The copy completes
 * asynchronously: its bytes may be read only after the issuing thread's
 * cp_async_wait that completes its group, and by other threads only after
 * a kernel.barrier that follows that wait (docs/dialects/kernel.md).
 */
#include <string.h>

#include "dialects/kernel/kernel_internal.h"

/*===--- cp_async -------------------------------------------------------===*/

size_t fzKernelCpAsyncGetSourceOperand(const FzOp *op) {
  FzType *d = fzKernelOperandType(op, 0);
  return 1 + (fzKernelIsBuffer(d) ? fzShapedTypeGetRank(d) : 0);
}

bool fzKernelCpAsyncHasSourceSize(const FzOp *op) {
  size_t si = fzKernelCpAsyncGetSourceOperand(op);
  FzType *g = fzKernelOperandType(op, si);
  if (!fzKernelIsBuffer(g))
    return false;
  return fzOpGetNumOperands(op) == si + 1 + fzShapedTypeGetRank(g) + 1;
}

int64_t fzKernelCpAsyncGetSize(const FzOp *op) {
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_CP_ASYNC)
    return -1;
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("size"));
  if (!a)
    return 16;
  int64_t n = fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                  : -1;
  return n == 4 || n == 8 || n == 16 ? n : -1;
}

/* Whether buffer type t has a last dimension of stride 1. */
static bool last_dim_contiguous(FzType *t) {
  size_t rank = fzShapedTypeGetRank(t);
  const int64_t *strides = fzBufferTypeGetStrides(t);
  return rank > 0 && (!strides || strides[rank - 1] == 1);
}

static bool cp_async_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  FzType *dt = fzKernelOperandType(op, 0);
  if (!fzKernelIsBuffer(dt) ||
      fzBufferTypeGetMemorySpace(dt) != FZ_KERNEL_SPACE_SHARED)
    return fzOpEmitError(op, "the destination (operand #0) must be a buffer "
                             "in shared memory (3)");
  size_t si = fzKernelCpAsyncGetSourceOperand(op);
  FzType *gt = fzKernelOperandType(op, si);
  if (!fzKernelIsBuffer(gt) ||
      fzBufferTypeGetMemorySpace(gt) != FZ_KERNEL_SPACE_GLOBAL)
    return fzOpEmitError(op, "the source (operand #%zu) must be a buffer in "
                             "global memory (0)", si);
  for (size_t i = 1; i < si; ++i)
    if (!fzKernelIsIndex(fzKernelOperandType(op, i)))
      return fzOpEmitError(op, "destination index #%zu must have type index",
                           i - 1);
  size_t rs = fzShapedTypeGetRank(gt), n = fzOpGetNumOperands(op);
  if (n != si + 1 + rs && n != si + 2 + rs)
    return fzOpEmitError(op, "expects the destination's %zu and the source's "
                             "%zu indices, then an optional source size",
                         si - 1, rs);
  for (size_t i = si + 1; i < n; ++i)
    if (!fzKernelIsIndex(fzKernelOperandType(op, i)))
      return fzOpEmitError(op, "%s must have type index",
                           i < si + 1 + rs ? "a source index"
                                           : "the source size");
  FzType *elt = fzShapedTypeGetElementType(dt);
  if (fzShapedTypeGetElementType(gt) != elt)
    return fzOpEmitError(op, "source and destination must have the same "
                             "element type");
  int64_t size = fzKernelCpAsyncGetSize(op);
  if (size < 0)
    return fzOpEmitError(op, "requires 'size' to be 4, 8 or 16 (bytes)");
  if (fzTypeGetKind(elt) == FZ_TYPE_INDEX || fzTypeGetStorageSize(elt) == 0 ||
      size % (int64_t)fzTypeGetStorageSize(elt) != 0)
    return fzOpEmitError(op, "copies %lld bytes: the element size must "
                             "divide %lld (no index elements)",
                         (long long)size, (long long)size);
  if (!last_dim_contiguous(dt) || !last_dim_contiguous(gt))
    return fzOpEmitError(op, "both buffers need a last dimension of stride 1 "
                             "(the %lld bytes are contiguous)",
                         (long long)size);
  return true;
}

static void print_indices(FzAsmPrinter *p, FzOp *op, size_t from, size_t to) {
  fzAsmPrint(p, "[");
  for (size_t i = from; i < to; ++i) {
    if (i > from)
      fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, i));
  }
  fzAsmPrint(p, "]");
}

static void cp_async_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"size", NULL};
  size_t si = fzKernelCpAsyncGetSourceOperand(op);
  size_t rs = fzShapedTypeGetRank(fzKernelOperandType(op, si));
  int64_t size = fzKernelCpAsyncGetSize(op);
  if (size != 16)
    fzAsmPrintf(p, " size %lld", (long long)size);
  fzAsmPrint(p, " ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
  print_indices(p, op, 1, si);
  fzAsmPrint(p, ", ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, si));
  print_indices(p, op, si + 1, si + 1 + rs);
  if (fzKernelCpAsyncHasSourceSize(op)) {
    fzAsmPrint(p, ", ");
    fzAsmPrintOperand(p, fzOpGetOperand(op, si + 1 + rs));
  }
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzKernelOperandType(op, 0));
  fzAsmPrint(p, ", ");
  fzAsmPrintType(p, fzKernelOperandType(op, si));
}

/* cp_async ::= (`size` integer)? %dst `[` indices `]` `,` %src
 *              `[` indices `]` (`,` %bytes)? attr-dict? `:` dst-type `,`
 *              src-type */
static bool cp_async_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand d, g, bytes, di[FZ_GRAPH_MAX_RANK], gi[FZ_GRAPH_MAX_RANK];
  size_t nd, ng;
  FzAttr *attrs;
  FzType *dt, *gt;
  int64_t size = 16;
  if (fzAsmParseOptionalKeyword(p, "size") && !fzAsmParseInteger(p, &size))
    return false;
  if (!fzAsmParseOperand(p, &d) || !fzKernelParseIndices(p, di, &nd) ||
      !fzAsmParsePunct(p, ",") || !fzAsmParseOperand(p, &g) ||
      !fzKernelParseIndices(p, gi, &ng))
    return false;
  bool hasBytes = fzAsmParseOptionalPunct(p, ",");
  if (hasBytes && !fzAsmParseOperand(p, &bytes))
    return false;
  if (!fzAsmParseOptionalAttrDict(p, &attrs) || !fzAsmParseColonType(p, &dt) ||
      !fzAsmParsePunct(p, ",") || !fzAsmParseType(p, &gt))
    return false;
  FzType *idx = fzIndexTypeGet(ctx);
  if (!fzAsmResolveOperands(p, &d, 1, &dt, 1, loc, st) ||
      !fzKernelResolveIndices(p, di, nd, loc, st) ||
      !fzAsmResolveOperands(p, &g, 1, &gt, 1, loc, st) ||
      !fzKernelResolveIndices(p, gi, ng, loc, st) ||
      (hasBytes && !fzAsmResolveOperands(p, &bytes, 1, &idx, 1, loc, st)))
    return false;
  if (size != 16)
    fzOpStateAddProp(st, FZ_STR("size"),
                     fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 32), size));
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

static const char *const kCpAsyncAttrs[] = {"size", NULL};

/* clang-format off */
FZ_KERNEL_OP(CP_ASYNC, "kernel.cp_async", "starts an asynchronous copy of "
             "16 (or `size` 4 or 8) bytes from global to shared memory "
             "(cp.async.cg, .ca), zero-filling past an optional source "
             "size", 0, FZ_VARIADIC, 0, 0, kCpAsyncAttrs, cp_async_verify,
             cp_async_print, cp_async_parse)
/* clang-format on */

/*===--- commit and wait ------------------------------------------------===*/

int64_t fzKernelCpAsyncWaitGetPending(const FzOp *op) {
  if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_CP_ASYNC_WAIT)
    return -1;
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("pending"));
  return a && fzAttrGetKind(a) == FZ_ATTR_INTEGER ? fzIntegerAttrGetValue(a)
                                                  : -1;
}

static bool commit_verify(FzOp *op) {
  return fzKernelVerifyInKernel(op);
}

static void commit_print(FzOp *op, FzAsmPrinter *p) {
  fzKernelPrintAttrs(p, op);
}

static bool commit_parse(FzAsmParser *p, FzOpState *st) {
  FzAttr *attrs;
  if (!fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

/* PTX takes any small integer constant; 64 is far above any pipeline. */
enum { MAX_PENDING = 64 };

static bool wait_verify(FzOp *op) {
  if (!fzKernelVerifyInKernel(op))
    return false;
  int64_t n = fzKernelCpAsyncWaitGetPending(op);
  if (n < 0 || n > MAX_PENDING)
    return fzOpEmitError(op, "requires 'pending' to be an integer from 0 to "
                             "%d", MAX_PENDING);
  return true;
}

static void wait_print(FzOp *op, FzAsmPrinter *p) {
  static const char *const elided[] = {"pending", NULL};
  fzAsmPrintf(p, " %lld", (long long)fzKernelCpAsyncWaitGetPending(op));
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), elided, false);
}

/* cp_async_wait ::= integer attr-dict? */
static bool wait_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  int64_t n;
  FzAttr *attrs;
  if (!fzAsmParseInteger(p, &n) || !fzAsmParseOptionalAttrDict(p, &attrs))
    return false;
  fzOpStateAddProp(st, FZ_STR("pending"),
                   fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 32), n));
  fzOpStateAddAttrDict(st, attrs);
  return true;
}

static const char *const kPendingAttr[] = {"pending", NULL};

/* clang-format off */
FZ_KERNEL_OP(CP_ASYNC_COMMIT, "kernel.cp_async_commit", "closes the "
             "thread's open cp.async group (cp.async.commit_group)", 0, 0, 0,
             0, NULL, commit_verify, commit_print, commit_parse)
FZ_KERNEL_OP(CP_ASYNC_WAIT, "kernel.cp_async_wait", "waits until at most N "
             "of the thread's committed cp.async groups are pending "
             "(cp.async.wait_group N)", 0, 0, 0, 0, kPendingAttr, wait_verify,
             wait_print, wait_parse)
/* clang-format on */

/* lowering/nvptx/kernel_ops_sm90.c - the Hopper ops of the kernel
 * dialect in NVPTX LLVM IR (kernel_ops.c's table points here). LLVM 19's
 * NVPTX back end has no intrinsics for most of them, so each is inline
 * PTX (LLVMGetInlineAsm) with a memory clobber, which keeps it in order
 * with every memory access and with the other inline assembly:
 *
 *   mbarrier_init         mbarrier.init.shared::cta.b64 [bar], count
 *   mbarrier_arrive       mbarrier.arrive[.expect_tx].shared::cta.b64
 *   mbarrier_wait         mbarrier.try_wait.parity.shared::cta.b64 in a
 *                         loop (labels local to the asm's { } scope)
 *   bulk_copy             cp.async.bulk.shared::cluster.global
 *                         .mbarrier::complete_tx::bytes
 *   fence_proxy_async     fence.proxy.async.shared::cta
 *   wgmma_fence           wgmma.fence.sync.aligned
 *   wgmma                 wgmma.mma_async.sync.aligned.m64nNkK.f32.T.T
 *                         with a 64-bit shared-memory descriptor per
 *                         operand (start address >> 4 in bits 0-13, lbo
 *                         >> 4 in 16-29, sbo >> 4 in 32-45, the swizzle
 *                         mode in 62-63: 1 = 128 B, 2 = 64 B, 3 = 32 B),
 *                         scale-d 1, the transposes as immediates
 *   wgmma_commit/wait     wgmma.commit_group / wait_group.sync.aligned N
 * Shared addresses are 32-bit (ptx.c's nvptx-short-ptr). wgmma_fence,
 * wgmma and wgmma_wait take the accumulators as "+f" registers, so that
 * LLVM neither reads them between the mma and its wait nor writes them
 * between the fence and the mma. The warp-group ops need sm_90a.
 */
#include <stdio.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

/* Calls inline PTX `text` with constraints `cons`: result type rt (void:
 * E->tVoid), arguments args. */
static LLVMValueRef inline_asm(FzLLEmitter *E, const char *text,
                               const char *cons, LLVMTypeRef rt,
                               LLVMValueRef *args, unsigned n) {
  LLVMTypeRef params[300];
  for (unsigned i = 0; i < n; ++i)
    params[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(rt, params, n, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text),
                                     (char *)cons, strlen(cons),
                                     /*sideEffects=*/1, /*alignStack=*/0,
                                     LLVMInlineAsmDialectATT, /*canThrow=*/0);
  return LLVMBuildCall2(E->b, fty, fn, args, n, "");
}

/* The 32-bit shared address of the element of buffer operand `at` whose
 * indices follow it; NULL after an error. */
static LLVMValueRef shared_addr(FzLLEmitter *E, FzOp *op, size_t at) {
  LLVMValueRef p = fzLLElementPtrAt(E, op, fzOpGetOperand(op, at), at + 1);
  return p ? LLVMBuildPtrToInt(E->b, p, E->tI32, "") : NULL;
}

static LLVMValueRef to_i32(FzLLEmitter *E, FzValue *v) {
  LLVMValueRef x = fzLLGet(E, v);
  return x ? LLVMBuildTrunc(E->b, x, E->tI32, "") : NULL;
}

/*===--- mbarriers, bulk copies, the fence ------------------------------===*/

static bool emit_mbarrier(FzLLEmitter *E, FzOp *op) {
  FzKernelOpcode k = fzKernelGetOpcode(op);
  LLVMValueRef args[2] = {shared_addr(E, op, 0), NULL};
  size_t n = fzOpGetNumOperands(op);
  bool hasValue =
      k != FZ_KERNEL_OP_MBARRIER_ARRIVE || fzKernelMbarrierArriveHasTx(op);
  if (hasValue)
    args[1] = to_i32(E, fzOpGetOperand(op, n - 1));
  if (!args[0] || (hasValue && !args[1]))
    return false;
  const char *text, *cons = hasValue ? "r,r,~{memory}" : "r,~{memory}";
  switch (k) {
  case FZ_KERNEL_OP_MBARRIER_INIT:
    text = "mbarrier.init.shared::cta.b64 [$0], $1;";
    break;
  case FZ_KERNEL_OP_MBARRIER_ARRIVE:
    text = hasValue ? "{\n\t.reg .b64 fz_st;\n\tmbarrier.arrive.expect_tx."
                      "shared::cta.b64 fz_st, [$0], $1;\n\t}"
                    : "{\n\t.reg .b64 fz_st;\n\tmbarrier.arrive.shared::cta."
                      "b64 fz_st, [$0];\n\t}";
    break;
  default:
    text = "{\n\t.reg .pred fz_p;\n\tfz_wait:\n\tmbarrier.try_wait.parity."
           "shared::cta.b64 fz_p, [$0], $1;\n\t@!fz_p bra fz_wait;\n\t}";
    break;
  }
  inline_asm(E, text, cons, E->tVoid, args, hasValue ? 2 : 1);
  return true;
}

static bool emit_bulk_copy(FzLLEmitter *E, FzOp *op) {
  size_t si = fzKernelBulkCopyGetSourceOperand(op);
  size_t bi = fzKernelBulkCopyGetBarrierOperand(op);
  LLVMValueRef src = fzLLElementPtrAt(E, op, fzOpGetOperand(op, si), si + 1);
  LLVMValueRef args[4] = {shared_addr(E, op, 0), NULL,
                          to_i32(E, fzOpGetOperand(op, bi - 1)),
                          shared_addr(E, op, bi)};
  if (!src || !args[0] || !args[2] || !args[3])
    return false;
  args[1] = LLVMBuildAddrSpaceCast(E->b, src,
                                   LLVMPointerTypeInContext(E->llctx, 1), "");
  inline_asm(E, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx"
                "::bytes [$0], [$1], $2, [$3];",
             "r,l,r,r,~{memory}", E->tVoid, args, 4);
  return true;
}

static bool emit_plain(FzLLEmitter *E, FzOp *op) {
  const char *text = fzKernelGetOpcode(op) == FZ_KERNEL_OP_FENCE_PROXY_ASYNC
                         ? "fence.proxy.async.shared::cta;"
                         : "wgmma.commit_group.sync.aligned;";
  inline_asm(E, text, "~{memory}", E->tVoid, NULL, 0);
  return true;
}

/*===--- The warp-group mma ---------------------------------------------===*/

/* Whether the kernel is compiled for sm_90a (the warp-group mma needs
 * the architecture-specific features). */
static bool check_arch(FzLLEmitter *E, FzOp *op) {
  if (E->cpu && !strcmp(E->cpu, "sm_90a"))
    return true;
  return fzLLError(E, op, "emit-ptx: kernel.wgmma needs --gpu-arch sm_90a "
                          "(the target is %s)", E->cpu ? E->cpu : "unknown");
}

/* The accumulators of op (operands from `from`, n pairs) as 2n floats
 * into out. */
static bool acc_floats(FzLLEmitter *E, FzOp *op, size_t from, size_t n,
                       LLVMValueRef *out) {
  for (size_t i = 0; i < n; ++i) {
    LLVMValueRef v = fzLLGet(E, fzOpGetOperand(op, from + i));
    if (!v)
      return false;
    for (unsigned h = 0; h < 2; ++h)
      out[2 * i + h] = LLVMBuildExtractElement(
          E->b, v, LLVMConstInt(E->tI32, h, 0), "");
  }
  return true;
}

/* The results of op: pairs of the asm's struct r (2n floats). */
static void set_pairs(FzLLEmitter *E, FzOp *op, LLVMValueRef r, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    LLVMValueRef pair = LLVMGetUndef(LLVMVectorType(E->tF32, 2));
    for (unsigned h = 0; h < 2; ++h) {
      LLVMValueRef x = LLVMBuildExtractValue(E->b, r, (unsigned)(2 * i + h),
                                             "");
      pair = LLVMBuildInsertElement(E->b, pair, x,
                                    LLVMConstInt(E->tI32, h, 0), "");
    }
    fzLLSet(E, fzOpGetResult(op, i), pair);
  }
}

/* "=f,...,=f," for m outputs (then the caller's inputs). */
static size_t out_cons(char *buf, size_t size, size_t m) {
  size_t at = 0;
  for (size_t i = 0; i < m && at + 4 < size; ++i)
    at += (size_t)snprintf(buf + at, size - at, "=f,");
  return at;
}

/* ",0,1,...": inputs tied to outputs 0..m-1. */
static size_t tied_cons(char *buf, size_t size, size_t m) {
  size_t at = 0;
  for (size_t i = 0; i < m && at + 6 < size; ++i)
    at += (size_t)snprintf(buf + at, size - at, ",%zu", i);
  return at;
}

/* wgmma_fence and wgmma_wait: the instruction with the accumulators
 * passed through "+f" registers. */
static bool emit_group(FzLLEmitter *E, FzOp *op) {
  if (!check_arch(E, op))
    return false;
  size_t n = fzOpGetNumOperands(op), m = 2 * n;
  char text[64];
  if (fzKernelGetOpcode(op) == FZ_KERNEL_OP_WGMMA_WAIT)
    snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %lld;",
             (long long)fzKernelWgmmaWaitGetPending(op));
  else
    snprintf(text, sizeof text, "wgmma.fence.sync.aligned;");
  if (n == 0) {
    inline_asm(E, text, "~{memory}", E->tVoid, NULL, 0);
    return true;
  }
  LLVMValueRef args[256];
  LLVMTypeRef fields[256];
  if (m > 256 || !acc_floats(E, op, 0, n, args))
    return m > 256 ? fzLLError(E, op, "emit-ptx: too many accumulators")
                   : false;
  char cons[2048];
  size_t at = out_cons(cons, sizeof cons, m);
  if (at > 0)
    --at; /* drop the last ',' */
  at += tied_cons(cons + at, sizeof cons - at, m);
  snprintf(cons + at, sizeof cons - at, ",~{memory}");
  for (size_t i = 0; i < m; ++i)
    fields[i] = E->tF32;
  LLVMTypeRef st = LLVMStructTypeInContext(E->llctx, fields, (unsigned)m, 0);
  set_pairs(E, op, inline_asm(E, text, cons, st, args, (unsigned)m), n);
  return true;
}

/* The descriptor of operand A (isB false) or B: the 32-bit shared
 * address `addr` and the layout's fields. */
static LLVMValueRef descriptor(FzLLEmitter *E, LLVMValueRef addr,
                               const FzKernelWgmmaLayout *L) {
  uint64_t mode = L->swizzle == 128 ? 1 : L->swizzle == 64 ? 2
                  : L->swizzle == 32 ? 3 : 0;
  uint64_t hi = (((uint64_t)L->lbo >> 4) & 0x3FFF) << 16 |
                (((uint64_t)L->sbo >> 4) & 0x3FFF) << 32 | mode << 62;
  LLVMValueRef a = LLVMBuildLShr(E->b, addr, LLVMConstInt(E->tI32, 4, 0), "");
  a = LLVMBuildAnd(E->b, a, LLVMConstInt(E->tI32, 0x3FFF, 0), "");
  a = LLVMBuildZExt(E->b, a, E->tI64, "");
  return LLVMBuildOr(E->b, a, LLVMConstInt(E->tI64, hi, 0), "");
}

static bool emit_wgmma(FzLLEmitter *E, FzOp *op) {
  int M, N, K;
  if (!check_arch(E, op))
    return false;
  if (!fzKernelWgmmaGetShape(op, &M, &N, &K))
    return fzLLError(E, op, "emit-ptx: malformed 'kernel.wgmma'");
  size_t n = (size_t)N / 4, m = 2 * n;
  FzKernelWgmmaLayout la = fzKernelWgmmaGetLayout(op, false);
  FzKernelWgmmaLayout lb = fzKernelWgmmaGetLayout(op, true);
  FzType *elt = fzShapedTypeGetElementType(
      fzValueGetType(fzOpGetOperand(op, 0)));
  const char *ty = fzTypeGetKind(elt) == FZ_TYPE_BF16  ? "bf16"
                   : fzTypeGetKind(elt) == FZ_TYPE_F16 ? "f16"
                                                       : "tf32";
  LLVMValueRef aAddr = shared_addr(E, op, 0), bAddr = shared_addr(E, op, 2);
  LLVMValueRef args[3 + 128];
  if (!aAddr || !bAddr || !acc_floats(E, op, 4, n, args + 3))
    return false;
  args[0] = descriptor(E, aAddr, &la);
  args[1] = descriptor(E, bAddr, &lb);
  args[2] = LLVMConstInt(E->tI32, 1, 0);
  /* {$0, ..., $m-1}, $m (A), $m+1 (B), scale-d from $m+2. */
  char text[2048];
  size_t at = (size_t)snprintf(text, sizeof text,
                               "{\n\t.reg .pred fz_d;\n\tsetp.ne.b32 fz_d, "
                               "$%zu, 0;\n\twgmma.mma_async.sync.aligned."
                               "m64n%dk%d.f32.%s.%s {",
                               m + 2, N, K, ty, ty);
  for (size_t i = 0; i < m; ++i)
    at += (size_t)snprintf(text + at, sizeof text - at, "%s$%zu",
                           i ? ", " : "", i);
  if (K == 8)
    snprintf(text + at, sizeof text - at, "}, $%zu, $%zu, fz_d, 1, 1;\n\t}",
             m, m + 1);
  else
    snprintf(text + at, sizeof text - at,
             "}, $%zu, $%zu, fz_d, 1, 1, %d, %d;\n\t}", m, m + 1,
             la.mnMajor ? 1 : 0, lb.mnMajor ? 1 : 0);
  char cons[2048];
  size_t c = out_cons(cons, sizeof cons, m);
  c += (size_t)snprintf(cons + c, sizeof cons - c, "l,l,r");
  c += tied_cons(cons + c, sizeof cons - c, m);
  snprintf(cons + c, sizeof cons - c, ",~{memory}");
  LLVMTypeRef fields[128];
  for (size_t i = 0; i < m; ++i)
    fields[i] = E->tF32;
  LLVMTypeRef st = LLVMStructTypeInContext(E->llctx, fields, (unsigned)m, 0);
  set_pairs(E, op, inline_asm(E, text, cons, st, args, (unsigned)(3 + m)),
            n);
  return true;
}

bool fzNvEmitSm90Op(FzLLEmitter *E, FzOp *op) {
  switch (fzKernelGetOpcode(op)) {
  case FZ_KERNEL_OP_MBARRIER_INIT:
  case FZ_KERNEL_OP_MBARRIER_ARRIVE:
  case FZ_KERNEL_OP_MBARRIER_WAIT:
    return emit_mbarrier(E, op);
  case FZ_KERNEL_OP_BULK_COPY:
    return emit_bulk_copy(E, op);
  case FZ_KERNEL_OP_FENCE_PROXY_ASYNC:
    return emit_plain(E, op);
  case FZ_KERNEL_OP_WGMMA_COMMIT:
    return check_arch(E, op) && emit_plain(E, op);
  case FZ_KERNEL_OP_WGMMA_FENCE:
  case FZ_KERNEL_OP_WGMMA_WAIT:
    return emit_group(E, op);
  case FZ_KERNEL_OP_WGMMA:
    return emit_wgmma(E, op);
  default:
    return fzLLError(E, op, "emit-ptx: not an sm_90 op");
  }
}

/* lowering/nvptx/kernel_func.c - one kernel.func as a PTX entry.
 *
 * The signature: a buffer parameter is a pointer to its element
 * (0, ..., 0), `nocapture noundef align 16` (buffers start 16-byte
 * aligned: the runtime's allocations, docs/dialects/kernel.md) and
 * `dereferenceable` to its static span; `noalias` when no launch of the
 * kernel passes another argument with the same root buffer
 * (launches.c); `readonly` when the kernel never stores through it, and
 * then its loads carry `!invariant.load` when it is also `noalias` (its
 * memory does not change while the kernel runs), so that NVPTX uses
 * ld.global.nc and GVN may reuse a load across barriers and shuffles (a
 * row read in several phases stays in registers). A scalar parameter is
 * its register type (index: i64, bf16: i16).
 * The function: the `ptx_kernel` calling convention, the `kernel` entry
 * of nvvm.annotations and, when every launch agrees on the block size,
 * `maxntid{x,y,z}`; it loses `nosync` when it holds an op that
 * synchronizes (fzNvKernelOpSynchronizes).
 * The body: the CPU emitter's walk (fzLLEmitBlock), with kernel ops
 * translated by kernel_ops.c through its emitForeignOp hook. A loop.for
 * is a per-thread loop; nested loop.parallel nests run serially.
 */
#include <stdlib.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

static void add_annotation(FzLLEmitter *E, LLVMValueRef fn, const char *key,
                           int value) {
  LLVMMetadataRef md[3] = {
      LLVMValueAsMetadata(fn),
      LLVMMDStringInContext2(E->llctx, key, strlen(key)),
      LLVMValueAsMetadata(LLVMConstInt(E->tI32, (unsigned)value, 0))};
  LLVMAddNamedMetadataOperand(
      E->mod, "nvvm.annotations",
      LLVMMetadataAsValue(E->llctx, LLVMMDNodeInContext2(E->llctx, md, 3)));
}

/* The kernel parameter (entry block argument) buffer v views, following
 * loop.view; -1 for any other buffer (shared memory, constants). */
static long param_of(FzBlock *entry, FzValue *v) {
  for (FzOp *d = fzValueGetDefiningOp(v);
       d && fzLoopGetOpcode(d) == FZ_LOOP_OP_VIEW;
       d = fzValueGetDefiningOp(v))
    v = fzOpGetOperand(d, 0);
  return fzValueIsBlockArgument(v) && fzValueGetParentBlock(v) == entry
             ? (long)fzValueGetIndex(v)
             : -1;
}

typedef struct Scan {
  FzNvKernelInfo *K;
  FzBlock *entry;
  FzLLEmitter *E;
  bool syncs;
  bool ok;
} Scan;

static FzWalkResult scan_op(FzOp *op, void *ud) {
  Scan *s = ud;
  FzLoopOpcode c = fzLoopGetOpcode(op);
  FzKernelOpcode k = fzKernelGetOpcode(op);
  long buf = -1;
  bool store = false;
  if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_STORE ||
      c == FZ_LOOP_OP_VECTOR_LOAD || c == FZ_LOOP_OP_VECTOR_STORE) {
    buf = (long)fzLoopMemGetBufferOperand(op);
    store = c == FZ_LOOP_OP_STORE || c == FZ_LOOP_OP_VECTOR_STORE;
  } else if (k == FZ_KERNEL_OP_VECTOR_LOAD) {
    buf = 0;
  } else if (k == FZ_KERNEL_OP_VECTOR_STORE || k == FZ_KERNEL_OP_ATOMIC) {
    buf = 1;
    store = true;
  } else if (k == FZ_KERNEL_OP_CP_ASYNC) { /* reads its global source */
    buf = (long)fzKernelCpAsyncGetSourceOperand(op);
  }
  if (buf >= 0 && (size_t)buf < fzOpGetNumOperands(op)) {
    long p = param_of(s->entry, fzOpGetOperand(op, (size_t)buf));
    if (p >= 0 && (size_t)p < s->K->numParams) {
      s->K->accessed[p] = true;
      s->K->written[p] |= store;
    }
  }
  s->syncs |= fzNvKernelOpSynchronizes(op);
  if ((c == FZ_LOOP_OP_SIN || c == FZ_LOOP_OP_COS) && !s->E->libdevice) {
    FzStringRef nm = fzIdentGetString(fzOpGetName(op));
    s->ok = fzLLError(s->E, op,
                      "emit-ptx: '%.*s' is not supported on the GPU without "
                      "the CUDA toolkit's libdevice",
                      (int)nm.length, nm.data);
    return FZ_WALK_INTERRUPT;
  }
  return FZ_WALK_ADVANCE;
}

/* Loads through a parameter whose memory the kernel cannot change get
 * !invariant.load. */
static void mark_invariant_loads(FzLLEmitter *E, LLVMValueRef fn,
                                 const bool *invariant, size_t numParams) {
  unsigned kind = LLVMGetMDKindIDInContext(E->llctx, "invariant.load", 14);
  LLVMValueRef empty =
      LLVMMetadataAsValue(E->llctx, LLVMMDNodeInContext2(E->llctx, NULL, 0));
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb;
       bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in;
         in = LLVMGetNextInstruction(in)) {
      if (LLVMGetInstructionOpcode(in) != LLVMLoad)
        continue;
      LLVMValueRef ptr = LLVMGetOperand(in, 0);
      while (LLVMIsAGetElementPtrInst(ptr) || LLVMIsAConstantExpr(ptr))
        ptr = LLVMGetOperand(ptr, 0);
      if (!LLVMIsAArgument(ptr))
        continue;
      for (size_t i = 0; i < numParams; ++i)
        if (LLVMGetParam(fn, (unsigned)i) == ptr) {
          if (invariant[i])
            LLVMSetMetadata(in, kind, empty);
          break;
        }
    }
}

bool fzNvEmitKernel(FzLLEmitter *E, FzNvKernelInfo *K) {
  FzOp *kf = K->func;
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(kf, 0));
  size_t n = K->numParams;
  Scan scan = {K, entry, E, false, true};
  fzOpWalk(kf, FZ_WALK_PRE_ORDER, scan_op, &scan);
  if (!scan.ok)
    return false;
  LLVMTypeRef *params = fzCalloc(E->ctx, n + 1, sizeof *params);
  bool *invariant = fzCalloc(E->ctx, n + 1, sizeof *invariant);
  if (!params || !invariant) { /* recorded */
    fzFree(E->ctx, params);
    fzFree(E->ctx, invariant);
    return E->failed = true, false;
  }
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) {
    FzType *t = fzValueGetType(fzBlockGetArgument(entry, i));
    params[i] = fzLLType(E, t);
    if (!params[i])
      ok = fzLLError(E, kf, "emit-ptx: parameter #%zu of this kernel has no "
                            "GPU type",
                     i);
  }
  LLVMValueRef fn =
      ok ? LLVMAddFunction(E->mod, K->name,
                           LLVMFunctionType(E->tVoid, params, (unsigned)n, 0))
         : NULL;
  fzFree(E->ctx, params);
  if (!fn) {
    fzFree(E->ctx, invariant);
    return false;
  }
  LLVMSetFunctionCallConv(fn, 71 /* CallingConv::PTX_Kernel */);
  fzLLSetFunctionAttrs(E, fn);
  if (scan.syncs) /* barriers, shuffles, atomics synchronize */
    LLVMRemoveEnumAttributeAtIndex(
        fn, LLVMAttributeFunctionIndex,
        LLVMGetEnumAttributeKindForName("nosync", 6));
  for (size_t i = 0; i < n; ++i) {
    FzType *t = fzValueGetType(fzBlockGetArgument(entry, i));
    if (fzTypeGetKind(t) != FZ_TYPE_BUFFER)
      continue;
    unsigned idx = (unsigned)i + 1;
    if (K->noalias[i])
      fzLLAddAttr(E, fn, idx, "noalias", 0);
    fzLLAddAttr(E, fn, idx, "nocapture", 0);
    fzLLAddAttr(E, fn, idx, "noundef", 0);
    fzLLAddAttr(E, fn, idx, "align", 16);
    int64_t span = fzLLBufferSpanBytes(t);
    if (span > 0)
      fzLLAddAttr(E, fn, idx, "dereferenceable", (uint64_t)span);
    if (!K->written[i])
      fzLLAddAttr(E, fn, idx, "readonly", 0);
    invariant[i] = K->noalias[i] && !K->written[i];
  }
  add_annotation(E, fn, "kernel", 1);
  if (K->sameBlock) {
    add_annotation(E, fn, "maxntidx", (int)K->block[0]);
    add_annotation(E, fn, "maxntidy", (int)K->block[1]);
    add_annotation(E, fn, "maxntidz", (int)K->block[2]);
  }
  /* .minnctapersm (LLVM emits it beside .maxntid, which ptxas needs to
   * turn it into a register budget). */
  int64_t minBlocks = fzKernelFuncGetMinBlocksPerSm(kf);
  if (minBlocks > 0 && K->sameBlock)
    add_annotation(E, fn, "minctasm", (int)minBlocks);

  FzNvKernelState st = {K, K->launched && K->wholeWarps};
  fzPtrMapFree(&E->values);
  fzPtrMapInit(&E->values, E->ctx);
  fzPtrMapFree(&E->roots);
  fzPtrMapInit(&E->roots, E->ctx);
  fzPtrMapFree(&E->reductions);
  fzPtrMapInit(&E->reductions, E->ctx);
  fzLLFindReductions(E, kf);
  E->func = kf;
  E->funcName = fzSymbolGetName(kf);
  E->fn = fn;
  E->entry = LLVMAppendBasicBlockInContext(E->llctx, fn, "entry");
  E->loopDepth = 1; /* nested loop.parallel: serial loops */
  E->outlined = true;
  E->emitForeignOp = fzNvEmitKernelOp;
  E->foreignData = &st;
  LLVMPositionBuilderAtEnd(E->b, E->entry);
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzBlockGetArgument(entry, i);
    fzLLSet(E, v, LLVMGetParam(fn, (unsigned)i));
    fzLLSetRoot(E, v, v);
  }
  ok = fzLLEmitBlock(E, entry, true);
  FzOp *term = fzBlockGetLastOp(entry);
  if (ok && (!term || fzKernelGetOpcode(term) != FZ_KERNEL_OP_RETURN))
    ok = fzLLError(E, kf, "emit-ptx: a kernel.func must end in "
                          "kernel.return");
  if (ok) {
    LLVMBuildRetVoid(E->b);
    mark_invariant_loads(E, fn, invariant, n);
  }
  E->emitForeignOp = NULL;
  E->foreignData = NULL;
  fzFree(E->ctx, invariant);
  return ok && !E->failed;
}

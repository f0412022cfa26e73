/* lowering/nvptx/translate.c - a kernel-level module to LLVM modules for
 * NVPTX, one per kernel.func (each in an LLVMContext of its own, so that
 * codegen.c may optimize and compile them on different threads), and
 * the launch plans of its host functions.
 *
 * The module holds kernel.func ops (each a PTX entry: kernel_func.c,
 * kernel_ops.c) and host func.func ops whose kernel.launch ops become
 * the FzGpuFunction launch lists (launches.c). The host functions are
 * read first: what every launch of a kernel agrees on (block size, whole
 * warps, distinct buffers) shapes its emission. A PTX entry is named
 * after its kernel.func, with characters PTX does not allow in names
 * replaced by '_'.
 *
 * Translation runs on the calling thread (it reads the fuse IR and
 * reports diagnostics through its context); one emitter walks every
 * kernel, switching LLVM context and module between them, so that the
 * run-time check sites are numbered across the whole program and each
 * module that has a check declares its own fz_status.
 *
 * Ownership: the units' LLVM contexts and modules belong to the caller
 * (fzNvUnitsFree); the plan's arrays come from the module's context and
 * are freed by fzGpuProgramDestroy.
 */
#include <stdlib.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

static bool is_named(FzOp *op, const char *name) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == strlen(name) && memcmp(n.data, name, n.length) == 0;
}

/* The types and the builder of E->llctx. */
static void init_llvm_types(FzLLEmitter *E) {
  E->b = LLVMCreateBuilderInContext(E->llctx);
  E->tVoid = LLVMVoidTypeInContext(E->llctx);
  E->tI1 = LLVMInt1TypeInContext(E->llctx);
  E->tI8 = LLVMInt8TypeInContext(E->llctx);
  E->tI16 = LLVMInt16TypeInContext(E->llctx);
  E->tI32 = LLVMInt32TypeInContext(E->llctx);
  E->tI64 = LLVMInt64TypeInContext(E->llctx);
  E->tF16 = LLVMHalfTypeInContext(E->llctx);
  E->tF32 = LLVMFloatTypeInContext(E->llctx);
  E->tF64 = LLVMDoubleTypeInContext(E->llctx);
  E->tPtr = LLVMPointerTypeInContext(E->llctx, 0);
}

static void init_emitter(FzLLEmitter *E) {
  E->fmf = E->opts.fastMath ? LLVMFastMathAll : 0;
  E->fmfReduce = E->opts.reassocReductions ? LLVMFastMathAllowReassoc : 0;
  E->rtArg = NULL;
  fzPtrMapInit(&E->values, E->ctx);
  fzPtrMapInit(&E->roots, E->ctx);
  fzPtrMapInit(&E->reductions, E->ctx);
}

static void fini_emitter(FzLLEmitter *E) {
  fzPtrMapFree(&E->values);
  fzPtrMapFree(&E->roots);
  fzPtrMapFree(&E->reductions);
  fzLLChecksFinish(E);
}

void fzNvUnitsFree(FzNvUnits *u) {
  for (size_t i = 0; u->v && i < u->n; ++i) {
    FzNvUnit *U = &u->v[i];
    if (U->mod)
      LLVMDisposeModule(U->mod);
    if (U->llctx)
      LLVMContextDispose(U->llctx);
    fzFree(u->ctx, U->name);
    fzLLThreadFree(U->text);
    fzLLThreadFree(U->error);
    fzLLThreadFree(U->llvmError);
  }
  fzFree(u->ctx, u->v);
  FzContext *ctx = u->ctx;
  memset(u, 0, sizeof *u);
  u->ctx = ctx;
}

/* Points E at a new LLVM context and module named name (the target's
 * triple and data layout), recorded as unit U. False after reporting
 * that memory ran out. */
static bool begin_unit(FzLLEmitter *E, FzNvUnit *U, const char *name) {
  U->name = fzStrDup(E->ctx, name);
  U->llctx = LLVMContextCreate();
  U->mod = U->llctx ? LLVMModuleCreateWithNameInContext(name, U->llctx) : NULL;
  if (!U->name) /* recorded */
    return false;
  if (!U->mod)
    return fzEmitError(E->ctx, NULL, "emit-ptx: LLVM is out of memory");
  LLVMSetTarget(U->mod, "nvptx64-nvidia-cuda");
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(E->tm);
  LLVMSetModuleDataLayout(U->mod, td);
  LLVMDisposeTargetData(td);
  E->llctx = U->llctx;
  E->mod = U->mod;
  E->status = NULL; /* this module's fz_status, made by its first check */
  init_llvm_types(E);
  return true;
}

static void end_unit(FzLLEmitter *E, FzNvUnit *U) {
  size_t n = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(U->mod); f;
       f = LLVMGetNextFunction(f))
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb;
         bb = LLVMGetNextBasicBlock(bb))
      for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in;
           in = LLVMGetNextInstruction(in))
        ++n;
  U->size = n;
  LLVMDisposeBuilder(E->b);
  E->b = NULL;
  E->llctx = NULL;
  E->mod = NULL;
  E->status = NULL;
}

static char *entry_name(FzContext *ctx, FzStringRef sym) {
  char *s = fzStrDupN(ctx, sym.data, sym.length);
  for (char *c = s; c && *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
          (*c >= '0' && *c <= '9') || *c == '_'))
      *c = '_';
  return s;
}

static void free_kernels(FzContext *ctx, FzNvKernelInfo *ks, size_t n) {
  for (size_t i = 0; ks && i < n; ++i) {
    fzFree(ctx, ks[i].name);
    fzFree(ctx, ks[i].noalias);
    fzFree(ctx, ks[i].written);
    fzFree(ctx, ks[i].accessed);
  }
  fzFree(ctx, ks);
}

/* Every kernel.func of top, with its parameters' facts initialized. */
static FzNvKernelInfo *collect_kernels(FzContext *ctx, FzBlock *top,
                                       size_t *num) {
  size_t n = 0;
  for (FzOp *op = fzBlockGetFirstOp(top); op; op = fzOpGetNextInBlock(op))
    n += fzKernelGetOpcode(op) == FZ_KERNEL_OP_FUNC;
  FzNvKernelInfo *ks = fzCalloc(ctx, n + 1, sizeof *ks);
  bool ok = ks != NULL;
  size_t i = 0;
  for (FzOp *op = fzBlockGetFirstOp(top); op && ok;
       op = fzOpGetNextInBlock(op)) {
    if (fzKernelGetOpcode(op) != FZ_KERNEL_OP_FUNC)
      continue;
    FzNvKernelInfo *K = &ks[i++];
    FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(op, 0));
    K->func = op;
    K->numParams = entry ? fzBlockGetNumArguments(entry) : 0;
    K->name = entry_name(ctx, fzSymbolGetName(op));
    K->noalias = fzCalloc(ctx, K->numParams + 1, sizeof *K->noalias);
    K->written = fzCalloc(ctx, K->numParams + 1, sizeof *K->written);
    K->accessed = fzCalloc(ctx, K->numParams + 1, sizeof *K->accessed);
    ok = K->name && K->noalias && K->written && K->accessed;
    if (ok && !entry)
      ok = fzEmitError(ctx, fzOpGetLoc(op),
                       "emit-ptx: this kernel.func has no body");
    for (size_t p = 0; ok && p < K->numParams; ++p)
      K->noalias[p] = true;
    for (size_t k = 0; ok && k + 1 < i; ++k)
      if (!strcmp(ks[k].name, K->name))
        ok = fzEmitError(ctx, fzOpGetLoc(op),
                         "emit-ptx: two kernels are named '%s' in PTX",
                         K->name);
  }
  if (!ok) {
    free_kernels(ctx, ks, i);
    return NULL;
  }
  *num = n;
  return ks;
}

/* A function that launches nothing and does not follow the loop-level
 * calling convention (a scalar argument): nothing of it runs on the GPU
 * and the runtime could not call it; it is left out of the program. */
static bool inert_host(FzOp *func) {
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  bool buffers = true;
  for (size_t i = 0; i < fzBlockGetNumArguments(body); ++i)
    buffers &= fzTypeGetKind(fzValueGetType(fzBlockGetArgument(body, i))) ==
               FZ_TYPE_BUFFER;
  for (FzOp *op = fzBlockGetFirstOp(body); op && !buffers;
       op = fzOpGetNextInBlock(op))
    if (fzKernelGetOpcode(op) == FZ_KERNEL_OP_LAUNCH)
      return false;
  return !buffers;
}

/* bytesMoved of every launch: the spans of the buffer arguments that its
 * kernel accesses. */
static void count_bytes(FzGpuProgram *prog, const FzNvKernelInfo *ks,
                        size_t numKernels) {
  for (size_t f = 0; f < prog->numFunctions; ++f) {
    FzGpuFunction *F = &prog->functions[f];
    for (size_t k = 0; k < F->numKernels; ++k) {
      FzGpuKernel *L = &F->kernels[k];
      const FzNvKernelInfo *K = NULL;
      for (size_t i = 0; i < numKernels && !K; ++i)
        if (!strcmp(ks[i].name, L->name))
          K = &ks[i];
      L->bytesMoved = 0;
      for (size_t a = 0; K && a < L->numArgs && a < K->numParams; ++a) {
        const FzGpuArg *A = &L->args[a];
        if (A->kind != FZ_GPU_ARG_BUFFER || !K->accessed[a])
          continue;
        size_t r = A->root;
        L->bytesMoved +=
            r < F->numArgs ? fzLLBufferSpanBytes(F->argTypes[r])
            : r < F->numArgs + F->numTemps
                ? F->tempBytes[r - F->numArgs]
                : F->constBytes[r - F->numArgs - F->numTemps];
      }
    }
  }
}

static bool translate_kernel_module(FzLLEmitter *E, FzOp *module,
                                    FzGpuProgram *prog, FzNvUnits *units) {
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  size_t numKernels = 0;
  FzNvKernelInfo *ks = collect_kernels(E->ctx, top, &numKernels);
  if (!ks)
    return false;
  size_t numFuncs = 0;
  for (FzOp *op = fzBlockGetFirstOp(top); op; op = fzOpGetNextInBlock(op))
    numFuncs += is_named(op, "func.func") &&
                fzRegionGetFirstBlock(fzOpGetRegion(op, 0)) != NULL;
  prog->functions = fzCalloc(E->ctx, numFuncs + 1, sizeof *prog->functions);
  bool ok = prog->functions != NULL;
  double t0 = fzNvNowSeconds();
  for (FzOp *op = fzBlockGetFirstOp(top); op && ok;
       op = fzOpGetNextInBlock(op))
    if (is_named(op, "func.func") &&
        fzRegionGetFirstBlock(fzOpGetRegion(op, 0)) && !inert_host(op))
      ok = fzNvTranslateHost(E->ctx, op, ks, numKernels,
                             &prog->functions[prog->numFunctions++]);
  units->planSeconds = fzNvNowSeconds() - t0;
  /* One unit per kernel; a program without kernels gets one empty
   * module, whose PTX is the header alone. */
  size_t numUnits = numKernels ? numKernels : 1;
  units->v = ok ? fzCalloc(E->ctx, numUnits, sizeof *units->v) : NULL;
  ok = ok && units->v;
  for (size_t i = 0; ok && i < numUnits; ++i) {
    FzNvUnit *U = &units->v[units->n++];
    if (!begin_unit(E, U, numKernels ? ks[i].name : "fuse_gpu")) {
      ok = false;
      break;
    }
    E->failed = false;
    if (numKernels)
      ok = fzNvEmitKernel(E, &ks[i]);
    end_unit(E, U);
  }
  if (ok)
    count_bytes(prog, ks, numKernels);
  free_kernels(E->ctx, ks, numKernels);
  return ok;
}

bool fzNvTranslateModule(FzLLEmitter *E, FzOp *module, FzGpuProgram *prog,
                         FzNvUnits *units) {
  memset(units, 0, sizeof *units);
  units->ctx = E->ctx;
  init_emitter(E);
  bool ok = translate_kernel_module(E, module, prog, units);
  fini_emitter(E);
  if (!ok)
    fzNvUnitsFree(units);
  return ok;
}

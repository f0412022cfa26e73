/* lowering/nvptx/nvptx_internal.h - what the files of the NVPTX back end
 * share. It builds on the CPU back end's emitter state and per-op
 * translation (lowering/llvm/emit_internal.h, the only other place that
 * includes llvm-c): a kernel body is the same LLVM IR on both targets,
 * plus the kernel dialect's ops.
 *
 *   ptx.c          target machine, O3, PTX text, fzGpuCompile/fzEmitPTX
 *                  (a module with loop nests is lowered first with
 *                  lower-loop-to-kernel, fz/kernel.h)
 *   translate.c    a kernel-level module to one LLVM module
 *   launches.c     host functions -> launch plans (FzGpuFunction)
 *   kernel_func.c  kernel.func -> PTX entry (signature, metadata, body)
 *   kernel_ops.c   every kernel op, one table
 */
#ifndef FZ_LOWERING_NVPTX_INTERNAL_H
#define FZ_LOWERING_NVPTX_INTERNAL_H

#include "fz/gpu.h"
#include "fz/kernel.h"
#include "lowering/llvm/emit_internal.h"

/* Translates a kernel-level module into E->mod (E's llctx, mod, tm,
 * opts, cpu set by the caller), filling prog's functions (not its PTX).
 * False after reporting errors. (translate.c) */
bool fzNvTranslateModule(FzLLEmitter *E, FzOp *module, FzGpuProgram *prog);

/* One kernel.func of the module: what its launches say about it
 * (launches.c) and what its emission learns (kernel_func.c). */
typedef struct FzNvKernelInfo {
  FzOp *func;        /* the kernel.func */
  char *name;        /* its PTX entry name (malloc'ed) */
  size_t numParams;
  bool launched;     /* at least one kernel.launch names it */
  unsigned block[3]; /* every launch's block size, when they agree */
  bool sameBlock;    /* launched, and every launch has the same block */
  bool wholeWarps;   /* every launch's block is a multiple of 32 threads */
  /* Per parameter (malloc'ed, numParams): noalias: no launch passes the
   * buffer together with another argument of the same root; written /
   * accessed: the kernel stores through it / loads or stores. */
  bool *noalias, *written, *accessed;
} FzNvKernelInfo;

/* E->foreignData while a kernel body is emitted. */
typedef struct FzNvKernelState {
  const FzNvKernelInfo *info;
  bool wholeWarps; /* shuffles may name the whole warp as members */
} FzNvKernelState;

/* The translation of one kernel op (kernel_ops.c; E->emitForeignOp). */
bool fzNvEmitKernelOp(FzLLEmitter *E, FzOp *op);
/* Whether op is a kernel op that synchronizes or communicates with other
 * threads (barriers, shuffles, atomics, mma). */
bool fzNvKernelOpSynchronizes(const FzOp *op);
/* Emits K's kernel.func as a PTX entry (kernel_func.c); fills K's
 * written/accessed. False after reporting errors. */
bool fzNvEmitKernel(FzLLEmitter *E, FzNvKernelInfo *K);
/* The launch plan of host function func (launches.c): its arguments,
 * temporaries and kernel.launch ops, each of which must name one of the
 * numKernels kernels (whose launch facts it updates) with constant
 * configurations. False after reporting errors. */
bool fzNvTranslateHost(FzContext *ctx, FzOp *func, FzNvKernelInfo *kernels,
                       size_t numKernels, FzGpuFunction *out);

#endif /* FZ_LOWERING_NVPTX_INTERNAL_H */

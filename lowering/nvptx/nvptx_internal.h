/* lowering/nvptx/nvptx_internal.h - what the files of the NVPTX back end
 * share. It builds on the CPU back end's emitter state and per-op
 * translation (lowering/llvm/emit_internal.h, the only other place that
 * includes llvm-c): a kernel body is the same LLVM IR on both targets.
 *
 *   emit_kernels.c  functions -> kernels and launch plans
 *   ptx.c           target machine, O3, PTX text, fzGpuCompile/fzEmitPTX
 */
#ifndef FZ_LOWERING_NVPTX_INTERNAL_H
#define FZ_LOWERING_NVPTX_INTERNAL_H

#include "fz/gpu.h"
#include "lowering/llvm/emit_internal.h"

/* Translates every func.func with a body of module into E->mod (E's
 * llctx, mod, tm, opts, cpu set by the caller), filling prog's functions
 * (not its PTX). False after reporting errors. */
bool fzNvTranslateModule(FzLLEmitter *E, FzOp *module, const FzGpuOptions *o,
                         FzGpuProgram *prog);

#endif /* FZ_LOWERING_NVPTX_INTERNAL_H */

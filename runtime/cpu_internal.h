/* runtime/cpu_internal.h - the CPU runtime's entry for the layer above
 * it: pipelines/cpu.c lowers a module and hands the loop-level result to
 * fzCpuExecutableCreateFromNative (private to the library). */
#ifndef FZ_RUNTIME_CPU_INTERNAL_H
#define FZ_RUNTIME_CPU_INTERNAL_H

#include "fz/runtime.h"

/* An executable of loopModule (loop level; the executable takes it
 * over, also on failure) compiled as native (taken over too; NULL:
 * fails), recording the times spent lowering and compiling. With
 * pending, loopModule is the module before fzPrepareLoopModuleForCpu,
 * which fzCpuExecutableGetLoopModule runs with pending on first use. */
FzCpuExecutable *fzCpuExecutableCreateFromNative(
    FzCpuRuntime *rt, FzOp *loopModule, FzNativeModule *native,
    const FzCodegenOptions *codegen, const FzCodegenOptions *pending,
    double lowerSeconds, double codegenSeconds);

/* A monotonic clock in seconds. */
double fzCpuNowSeconds(void);

#endif /* FZ_RUNTIME_CPU_INTERNAL_H */

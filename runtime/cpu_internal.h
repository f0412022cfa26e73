/* runtime/cpu_internal.h - the CPU runtime's entry for the layer above
 * it: pipelines/cpu.c lowers a module and hands the loop-level result to
 * fzCpuExecutableCreateFromLoop (private to the library). */
#ifndef FZ_RUNTIME_CPU_INTERNAL_H
#define FZ_RUNTIME_CPU_INTERNAL_H

#include "fz/runtime.h"

/* Compiles loopModule (loop level, already prepared for the CPU; the
 * executable takes it over, also on failure) with codegen, recording
 * lowerSeconds as the time spent getting it. NULL after reporting
 * errors. */
FzCpuExecutable *fzCpuExecutableCreateFromLoop(FzCpuRuntime *rt,
                                               FzOp *loopModule,
                                               const FzCodegenOptions *codegen,
                                               double lowerSeconds);

/* A monotonic clock in seconds. */
double fzCpuNowSeconds(void);

#endif /* FZ_RUNTIME_CPU_INTERNAL_H */

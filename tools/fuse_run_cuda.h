/* tools/fuse_run_cuda.h - fuse-run's CUDA device (--device cuda, and
 * --device auto when a driver and a device are present): compile the
 * module to PTX (fz/gpu.h), run it through the driver (fz/cuda.h),
 * --bench with CUDA events and --check-interp against the interpreter.
 * It shares FuseRunCpuOptions' flags (--bench, --check-interp, --no-fuse,
 * --fast-math, --rtol/--atol). */
#ifndef FUSE_RUN_CUDA_H
#define FUSE_RUN_CUDA_H

#include <stdio.h>

#include "tools/fuse_run_cpu.h"

typedef struct FuseRunCuda FuseRunCuda;

/* Opens the device and compiles a clone of module for it. NULL after
 * reporting an error (no driver: "no CUDA driver found ..."). */
FuseRunCuda *fuseRunCudaCreate(FzContext *ctx, FzOp *module,
                               const FuseRunCpuOptions *o);
void fuseRunCudaDestroy(FuseRunCuda *r);

/* As fuseRunCpuExecute, on the GPU. */
bool fuseRunCudaExecute(FuseRunCuda *r, FzOp *func, size_t nIn,
                        FzTensor *const *inputs, size_t *nOut,
                        FzTensor ***outputs, FILE *out, int *status);

#endif /* FUSE_RUN_CUDA_H */

/* fz/cuda_run.h - compiling a module for the current GPU and running its
 * functions there: the glue between fz/gpu.h (PTX) and fz/cuda.h (the
 * driver) that fuse-run --device cuda and run_conformance --device cuda
 * share.
 *
 * fzCudaCompileModule lowers a clone of a graph-level module with the CPU
 * pipeline's graph -> loop part (fusion unless told otherwise; under the
 * bf16 and fp16 precision policies, fzModuleApplyPrecision first; a
 * loop-level or kernel-level module is taken as is) and compiles it with
 * fzGpuCompile (lower-loop-to-kernel, then the kernel dialect to PTX) for
 * the device's compute capability (capped at sm_90, the newest LLVM 19
 * knows; the driver JIT-compiles PTX forward).
 *
 * An FzCudaCall is one call of a compiled function: every argument and
 * temporary allocated on the device, the inputs copied in, and the
 * function's kernels (those with work) captured once as one CUDA graph
 * (launched one by one when the driver cannot build it, with a note on
 * stderr). fzCudaCallLaunch runs all kernels once (as often as wanted,
 * e.g. to time them); fzCudaCallGetOutputs waits and copies the outputs
 * back. Errors are diagnostics of the FzCuda's context.
 *
 * Ownership: the FzGpuProgram and FzCuda outlive every call made on
 * them; a call's host memory comes from the FzCuda's context, and it
 * frees that and its device memory in fzCudaCallDestroy. Outputs
 * are new tensors of the context given, in an array that
 * fzTensorArrayDestroy frees.
 */
#ifndef FZ_CUDA_RUN_H
#define FZ_CUDA_RUN_H

#include "fz/cuda.h"
#include "fz/gpu.h"
#include "fz/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The PTX target for cu's device into buf ("sm_90" for 9.0 and newer,
 * "sm_80" for 8.0, ...). Returns buf. */
FZ_API const char *fzCudaGetPtxArch(const FzCuda *cu, char *buf, size_t size);

/* Compiles a clone of module (unchanged) for cu's device. options may be
 * NULL (defaults); its arch is replaced by fzCudaGetPtxArch's. fuse
 * selects the graph-level fusion passes. NULL after reporting errors to
 * the module's context. */
FZ_API FzGpuProgram *fzCudaCompileModule(FzCuda *cu, FzOp *module, bool fuse,
                                         const FzGpuOptions *options);

typedef struct FzCudaCall FzCudaCall;

/* Prepares a call of the function `name` of p with nIn inputs (each
 * with exactly the bytes of the function's argument). inputs may be
 * NULL (nIn still the function's input count): the input buffers are
 * then left as allocated, for a caller that fills them on the device
 * (fzCudaCallGetArgument) before each launch. NULL after reporting an
 * error (no such function, wrong inputs, device memory). */
FZ_API FzCudaCall *fzCudaCallCreate(FzCuda *cu, const FzGpuProgram *p,
                                    const char *name, size_t nIn,
                                    FzTensor *const *inputs);
/* The compiled function being called. */
FZ_API const FzGpuFunction *fzCudaCallGetFunction(const FzCudaCall *c);
/* The device buffer of argument i of the call (inputs, then outputs; i
 * below fzCudaCallGetFunction(c)->numArgs, else 0), of exactly the
 * argument's bytes, alive until fzCudaCallDestroy. A caller may write
 * the inputs and read the outputs there (fzCudaCopyToDevice,
 * fzCudaCopyOnDevice, fzCudaCopyToHost: ordered with the launches on
 * the default stream), so that a call reused for many runs works on
 * data that is already on the device (the Python package's CUDA
 * tensors). */
FZ_API FzCudaPtr fzCudaCallGetArgument(const FzCudaCall *c, size_t i);
/* True when the kernels replay as one CUDA graph. */
FZ_API bool fzCudaCallUsesGraph(const FzCudaCall *c);
/* Launches every kernel once, in order (asynchronous). */
FZ_API FZ_MUST_CHECK bool fzCudaCallLaunch(FzCudaCall *c);
/* Launches kernel k of the function alone (asynchronous; k below
 * fzCudaCallGetFunction(c)->numKernels): for timing each kernel
 * (fuse-run --profile). */
FZ_API FZ_MUST_CHECK bool fzCudaCallLaunchKernel(FzCudaCall *c, size_t k);
/* Waits for the device, then reports an error a kernel's run-time check
 * recorded (docs/codegen.md, "Run-time errors"; to the FzCuda's
 * context, at the op's location) and clears it, leaving the outputs on
 * the device (fzCudaCallGetArgument). False after reporting an error. */
FZ_API FZ_MUST_CHECK bool fzCudaCallSynchronize(FzCudaCall *c);
/* Waits for the device and copies the outputs into new tensors of ctx
 * (after the checks of fzCudaCallSynchronize, reported to ctx). */
FZ_API FZ_MUST_CHECK bool fzCudaCallGetOutputs(FzCudaCall *c, FzContext *ctx,
                                               size_t *nOut,
                                               FzTensor ***outputs);
/* Frees the device buffers and the graph. NULL is ignored. */
FZ_API void fzCudaCallDestroy(FzCudaCall *c);

/* One call of `name` start to end: create, launch, outputs, destroy.
 * False after reporting an error. */
FZ_API FZ_MUST_CHECK bool fzCudaRunFunction(FzCuda *cu, const FzGpuProgram *p,
                                            const char *name, size_t nIn,
                                            FzTensor *const *inputs,
                                            FzContext *ctx, size_t *nOut,
                                            FzTensor ***outputs);

#ifdef __cplusplus
}
#endif

#endif /* FZ_CUDA_RUN_H */

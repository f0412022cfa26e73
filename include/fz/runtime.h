/* fz/runtime.h - running compiled code on the CPU: a thread pool, and
 * executables compiled from a graph- or loop-level module.
 *
 * An FzCpuRuntime is a pool of worker threads (the calling thread
 * included) that generated code uses for its outer parallel loops
 * (FzParallelRuntime in fz/lowering.h). An FzCpuExecutable is a module
 * compiled for the host by the pipeline of fz/lowering.h
 * (fzLowerModuleForCpu, then fzNativeModuleCreate), with what it needs
 * to call each function on tensors.
 *
 * Ownership. The runtime and the executables are the caller's: destroy
 * every executable before the runtime it was created with. Creating an
 * executable does not modify or keep the module it is given (it works on
 * a clone). Outputs handed back are new tensors the caller destroys.
 * Threads: one executable may be called from several threads at once
 * (through fzCpuFunctionCallRaw; fzCpuFunctionRun uses the context);
 * the pool runs one parallel loop at a time and a caller that finds it
 * busy runs its loop alone (never deadlocks).
 */
#ifndef FZ_RUNTIME_H
#define FZ_RUNTIME_H

#include "fz/graph.h"
#include "fz/lowering.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------------------------------------------===*
 * The thread pool
 *===------------------------------------------------------------------===*/

typedef struct FzCpuRuntime FzCpuRuntime;

/* The number of CPUs this process may run on (at least 1). */
FZ_API unsigned fzCpuGetNumCores(void);

/* A pool of numThreads threads, the caller's included (0: one per core).
 * NULL after reporting an error (threads could not be started). */
FZ_API FzCpuRuntime *fzCpuRuntimeCreate(FzContext *ctx, unsigned numThreads);
/* Stops the workers. NULL is ignored. The runtime allocates through ctx:
 * destroy it (after its executables) before the context. */
FZ_API void fzCpuRuntimeDestroy(FzCpuRuntime *rt);
/* The caller's thread included. */
FZ_API unsigned fzCpuRuntimeGetNumThreads(const FzCpuRuntime *rt);
/* What generated code receives as its `rt` argument. */
FZ_API const FzParallelRuntime *fzCpuRuntimeGetParallel(const FzCpuRuntime *rt);

/*===------------------------------------------------------------------===*
 * Executables
 *===------------------------------------------------------------------===*/

typedef struct FzCpuExecutable FzCpuExecutable;

typedef struct FzCpuCompileOptions {
  FzCpuPipelineOptions pipeline; /* graph -> loop (fz/lowering.h) */
  FzCodegenOptions codegen;      /* loop -> native code */
} FzCpuCompileOptions;

/* The defaults of both parts. */
FZ_API void fzCpuCompileOptionsInit(FzCpuCompileOptions *options);

/* Compiles a clone of module (graph or loop level) for the host.
 * options may be NULL. NULL after reporting errors. */
FZ_API FzCpuExecutable *
fzCpuExecutableCreate(FzCpuRuntime *rt, FzOp *module,
                      const FzCpuCompileOptions *options);
/* Frees the native code and the loop module. NULL is ignored. */
FZ_API void fzCpuExecutableDestroy(FzCpuExecutable *e);
/* The loop-level module that was compiled (owned by the executable; for
 * printing and inspection). */
FZ_API FzOp *fzCpuExecutableGetLoopModule(const FzCpuExecutable *e);
/* Seconds spent lowering, and generating native code. */
FZ_API double fzCpuExecutableGetLowerSeconds(const FzCpuExecutable *e);
FZ_API double fzCpuExecutableGetCodegenSeconds(const FzCpuExecutable *e);

/* A function of the executable and its signature. */
typedef struct FzCpuFunction FzCpuFunction;
/* NULL (without a diagnostic) when there is no such function. name is
 * the symbol without '@'. The function belongs to the executable. */
FZ_API FzCpuFunction *fzCpuExecutableLookup(FzCpuExecutable *e,
                                            FzStringRef name);
FZ_API size_t fzCpuFunctionGetNumInputs(const FzCpuFunction *f);
FZ_API size_t fzCpuFunctionGetNumOutputs(const FzCpuFunction *f);
/* The buffer type of argument i (inputs first, then outputs). */
FZ_API FzType *fzCpuFunctionGetArgType(const FzCpuFunction *f, size_t i);

/* Runs f on raw buffers, one per argument (inputs, then outputs), each
 * at least as aligned as the codegen options promised (16 bytes by
 * default) and of its argument's size. No checking, no allocation: for
 * benchmarks. */
FZ_API void fzCpuFunctionCallRaw(FzCpuFunction *f, void *const *buffers);
/* CallRaw with the run-time checks of the generated code (docs/codegen.md,
 * "Run-time errors"): the buffers as for CallRaw (the caller checks their
 * types, sizes and alignment); an error the code detected (an index out
 * of bounds, an integer division by zero) is reported to the context the
 * runtime was created with, at the op's location, and the call returns
 * false (the outputs are then unspecified). Allocates nothing. The
 * status is the executable's: calls of one executable that may fail must
 * not overlap (one thread at a time per executable), and a failure is
 * reported through the context, which follows the context rule. For
 * callers that own their buffers (the Python package: numpy arrays). */
FZ_API FZ_MUST_CHECK bool fzCpuFunctionCall(FzCpuFunction *f,
                                            void *const *buffers);

/* Runs f on tensors (this allocates in, and reports errors to, the
 * context the runtime was created with: call it from one thread at a time
 * per context; CallRaw above touches no context). Inputs are checked
 * against the argument types (dtype and shape); outputs are created
 * (*outputs: a new array of *numOutputs new tensors, released with
 * fzTensorArrayDestroy). A
 * buffer that is not aligned enough is copied. False after reporting an
 * error naming the offending argument. */
FZ_API FZ_MUST_CHECK bool fzCpuFunctionRun(FzCpuFunction *f, size_t numInputs,
                                           FzTensor *const *inputs,
                                           size_t *numOutputs,
                                           FzTensor ***outputs);

#ifdef __cplusplus
}
#endif

#endif /* FZ_RUNTIME_H */

/* fz/gpu.h - code generation for NVIDIA GPUs: a loop-level module to
 * PTX through LLVM's NVPTX back end (`nvptx64-nvidia-cuda`).
 *
 * The GPU path goes loop -> NVPTX directly for now (the kernel dialect
 * of ARCHITECTURE.md section 5 is not built yet). What a lowered
 * function @f (fz/loop.h calling convention) becomes:
 *  - each top-level loop.parallel of @f is one kernel `f_kN`, launched
 *    in program order. Its parameters are every root buffer of @f: the
 *    function's arguments in order, then its top-level loop.alloc
 *    temporaries (allocated on the device by the runtime), each a
 *    `noalias align 16 dereferenceable` pointer, inputs `readonly` (so
 *    their loads become ld.global.nc);
 *  - the kernel's threads cover the nest's iteration space, linearized
 *    row-major, blockIdx.x * blockDim.x + threadIdx.x in a grid-stride
 *    loop; when the body is straight-line code each thread runs
 *    `vector` consecutive iterations of the last dimension, so that
 *    LLVM's load/store vectorizer forms 16-byte accesses;
 *  - an iteration runs entirely on one thread (inner loops, reductions
 *    and loop.barrier phases included: correct, but a row reduction is
 *    one thread per row until loop->kernel maps rows onto warps);
 *  - top-level scalar ops (constants, views, loads of scalars) are
 *    recomputed in every kernel that uses them;
 *  - `maxntid` is the block size; the kernel calling convention is the
 *    `ptx_kernel` one plus the `kernel` entry of nvvm.annotations.
 * Not supported yet (an error at the op): top-level loops or stores
 * outside a loop.parallel, func.call, sin/cos (C library calls),
 * dynamic shapes, nests with non-constant bounds.
 *
 * Math: exp/log/tanh/erf/pow use the CPU back end's inline polynomial
 * approximations (LLVM 19 cannot lower llvm.exp on NVPTX); fastMath adds
 * every fast-math flag (approximate division and square root).
 *
 * Ownership: a FzGpuProgram owns its strings and arrays (plain malloc);
 * its argument types are the module context's (immortal).
 */
#ifndef FZ_GPU_H
#define FZ_GPU_H

#include "fz/lowering.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FzGpuOptions {
  const char *arch;   /* "sm_80", "sm_90" (default), "sm_90a" */
  unsigned blockSize; /* threads per block (default 256) */
  unsigned optLevel;  /* LLVM optimization level (default 3) */
  bool fastMath;      /* every fast-math flag (default off) */
  /* Iterations of the last dimension per thread for straight-line
   * bodies: 0 chooses 16 bytes / the widest element accessed; 1 is off. */
  unsigned vector;
} FzGpuOptions;

void fzGpuOptionsInit(FzGpuOptions *o);

typedef struct FzGpuKernel {
  char *name;        /* PTX entry name */
  int64_t numItems;  /* threads to launch: ceil(numItems / blockSize)
                        blocks of blockSize threads */
  unsigned blockSize;
  const char *mapping; /* "elementwise", "rows" or "columns" (static) */
  unsigned group;      /* threads sharing one iteration of the nest */
  /* Bytes the kernel reads and writes ideally (each root buffer that it
   * touches counted once): for bandwidth figures. */
  int64_t bytesMoved;
} FzGpuKernel;

typedef struct FzGpuFunction {
  char *name;        /* symbol, without '@' */
  size_t numArgs;    /* buffers: inputs then outputs */
  size_t numOutputs;
  FzType **argTypes; /* buffer types, numArgs */
  size_t numTemps;
  int64_t *tempBytes; /* device bytes of each temporary */
  size_t numKernels;
  FzGpuKernel *kernels; /* in launch order; each takes numArgs + numTemps
                           pointers (arguments, then temporaries) */
} FzGpuFunction;

typedef struct FzGpuProgram {
  char *ptx; /* NUL-terminated PTX text of every kernel */
  size_t ptxLen;
  size_t numFunctions;
  FzGpuFunction *functions;
} FzGpuProgram;

/* Compiles every func.func with a body of `module` (loop level; a
 * graph-level module must be lowered first, e.g. fzLowerModuleForCpu).
 * NULL after reporting errors at the offending ops. */
FzGpuProgram *fzGpuCompile(FzOp *module, const FzGpuOptions *options);
void fzGpuProgramDestroy(FzGpuProgram *p);
/* The function `name`, or NULL. */
const FzGpuFunction *fzGpuProgramLookup(const FzGpuProgram *p,
                                        const char *name);

/* Writes the LLVM IR (FZ_CODEGEN_LLVM_IR, after optimization) or the
 * PTX (FZ_CODEGEN_ASSEMBLY) of module through cb. False after errors. */
FZ_MUST_CHECK bool fzEmitPTX(FzOp *module, const FzGpuOptions *options,
                             FzCodegenFileType type, FzPrintCallback cb,
                             void *userData);

#ifdef __cplusplus
}
#endif

#endif /* FZ_GPU_H */

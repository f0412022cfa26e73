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
 *    their loads become ld.global.nc, marked !invariant.load);
 *  - a planning step (lowering/nvptx/plan.c; docs/codegen.md "GPU
 *    mappings") picks one of three mappings per nest:
 *    elementwise: one iteration per thread, blockIdx.x * blockDim.x +
 *      threadIdx.x in a grid-stride loop; for a straight-line body each
 *      thread runs `vector` consecutive iterations of the last dimension,
 *      loads first and stores last, so that they form 16-byte accesses;
 *      inner loops run inside the thread;
 *    rows: a nest whose inner loops (loop.for reductions, loop.parallel
 *      phases) walk the contiguous last dimension: `group` consecutive
 *      threads share a row, each taking 16-byte chunks; reductions
 *      combine by warp shuffles, then shared memory; the row stays in
 *      registers across phases when it fits;
 *    columns: reductions over a non-contiguous axis (column sums): 32
 *      columns per block, the reduced axis split over the block's warps;
 *  - top-level scalar ops (constants, views, loads of scalars) are
 *    recomputed in every kernel that uses them;
 *  - `maxntid` is the block size; the kernel calling convention is the
 *    `ptx_kernel` one plus the `kernel` entry of nvvm.annotations.
 * Top-level loop.for nests and stores (reductions to a scalar) are not
 * kernels by themselves: fzGpuWrapSequentialNests first makes each a
 * one-iteration loop.parallel (fzCudaCompileModule and fuse-translate
 * --emit=ptx run it); without it they are an error at the op.
 * Not supported yet (an error at the op): func.call, sin/cos without libdevice,
 * dynamic shapes, nests with non-constant bounds.
 *
 * Math: exp/log/log1p/tanh/erf/pow/sin/cos call the CUDA toolkit's
 * libdevice (__nv_expf, ...: CUDA's own accuracy, e.g. expf 2 ulp,
 * erff 2 ulp, with subnormals kept), linked into the module and inlined,
 * when libdevice.10.bc is found (FzGpuOptions.libdevice); otherwise the
 * CPU back end's inline polynomial approximations (LLVM 19 cannot lower
 * llvm.exp on NVPTX). fastMath adds every fast-math flag (approximate
 * division and square root).
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
  /* libdevice.10.bc for exp/log/tanh/erf/pow/sin/cos: NULL searches
   * $CUDA_HOME/nvvm/libdevice, then /usr/local/cuda/nvvm/libdevice; ""
   * (or none found) uses the CPU back end's inline polynomials. */
  const char *libdevice;
  /* Rows mapping: 16-byte chunks per thread aimed at (0: 4); fewer
   * threads per row and more loads in flight each as it grows. */
  unsigned rowChunks;
} FzGpuOptions;

void fzGpuOptionsInit(FzGpuOptions *o);

/* What one kernel parameter receives at a launch. */
typedef enum FzGpuArgKind {
  FZ_GPU_ARG_BUFFER, /* the device address of a root buffer of the
                        function: `root` indexes its arguments, then its
                        temporaries (loop.alloc at the top level) */
  FZ_GPU_ARG_SCALAR, /* a constant: the low `size` bytes of `bits` */
} FzGpuArgKind;

typedef struct FzGpuArg {
  FzGpuArgKind kind;
  size_t root;   /* BUFFER */
  unsigned size; /* SCALAR: 1, 2, 4 or 8 bytes */
  uint64_t bits; /* SCALAR: the value's bits (f32: its IEEE bits; bf16
                    and f16: their 16 bits; index: an i64) */
} FzGpuArg;

/* One kernel.launch of a host function, in program order. */
typedef struct FzGpuKernel {
  char *name;           /* PTX entry (the kernel.func's symbol) */
  unsigned grid[3];     /* blocks along x, y, z (each at least 1) */
  unsigned block[3];    /* threads per block along x, y, z */
  unsigned sharedBytes; /* dynamic shared memory per block */
  size_t numArgs;
  FzGpuArg *args;       /* one per kernel parameter, in order */
  /* The kernel.func's `fuse.plan` attribute (lower-loop-to-kernel's
   * one-line plan: mapping, sizes, why), or NULL; mapping is its first
   * word ("elementwise", "rows", "columns"), or "kernel" without one. */
  char *plan;
  char *mapping;
  /* Bytes the kernel reads and writes ideally (each buffer argument that
   * it accesses counted once): for bandwidth figures. */
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
  FzGpuKernel *kernels; /* the launches, in order */
} FzGpuFunction;

typedef struct FzGpuProgram {
  char *ptx; /* NUL-terminated PTX text of every kernel, after one
                `// fuse: KERNEL: PLAN` comment line per kernel */
  size_t ptxLen;
  size_t numFunctions;
  FzGpuFunction *functions;
} FzGpuProgram;

/* Rewrites a loop-level module in place for fzGpuCompile: every
 * top-level loop.for, loop.store and loop.vector_store of a function
 * moves into a one-iteration loop.parallel (a kernel); a loop.for's
 * results go through rank-0 loop.alloc temporaries that later ops read
 * with loop.load (lowering/nvptx/sequential.c). The semantics are kept.
 * False after reporting an error. */
FZ_MUST_CHECK bool fzGpuWrapSequentialNests(FzOp *module);

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

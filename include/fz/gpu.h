/* fz/gpu.h - code generation for NVIDIA GPUs: a loop- or kernel-level
 * module to PTX through LLVM's NVPTX back end (`nvptx64-nvidia-cuda`),
 * with the launch plan of each host function.
 *
 * The pipeline (docs/architecture.md; docs/codegen.md "GPU"):
 *   loop-level module ──lower-loop-to-kernel──> kernel-level module
 *     ──lowering/nvptx──> one LLVM module per kernel ──O3, NVPTX, on
 *     codegenThreads threads──> PTX of each, joined ──> PTX + FzGpuProgram
 * fzGpuCompile and fzEmitPTX run lower-loop-to-kernel (fz/kernel.h) on a
 * clone of a module that still has top-level loop nests, with this
 * file's blockSize, vector, rowChunks, noRowStage, rowRegisters, noMma,
 * noSmallM, mmaTile, splitK and precision (resolved for the arch: tf32 by default), and
 * the shared memory the arch allows; a module
 * already at the kernel
 * level (kernel.func + host functions of kernel.launch ops) is compiled
 * as it is. Then:
 *  - every kernel.func becomes a PTX entry of the same name (characters
 *    PTX does not allow replaced by '_'): the `ptx_kernel` calling
 *    convention and the `kernel` entry of nvvm.annotations; `maxntid`
 *    from its launches' block size when they agree (so ptxas may give a
 *    256-thread matmul kernel up to 255 registers); shared memory in
 *    32-bit pointers (LLVM's nvptx-short-ptr, set once per process through
 *    LLVMParseCommandLineOptions at the first GPU compilation: a program
 *    that parses LLVM options itself must not give -nvptx-short-ptr too)
 *    and the one `.extern .shared .align 16` dynamic array; each buffer
 *    parameter a pointer `nocapture noundef align 16 dereferenceable`,
 *    `noalias` when no launch passes it with another argument of the
 *    same buffer, `readonly` when the kernel never writes it (then its
 *    loads carry `!invariant.load` and become ld.global.nc); each kernel
 *    op one PTX construct (docs/dialects/kernel.md "On the GPU");
 *  - every func.func with a body is a host function: its kernel.launch
 *    ops, whose sizes must be constants at the host level, become its
 *    FzGpuFunction's launch list, each launch passing root buffers (the
 *    function's arguments, then its top-level loop.alloc temporaries,
 *    which the runtime allocates on the device) and constant scalars.
 *    A function that launches nothing and takes scalars is left out.
 *    A top-level loop.constant_buffer passed to a launch is a constant
 *    root: its data goes to FzGpuFunction.constData, not into the PTX.
 * Not supported (an error at the op): func.call in kernels, sin/cos
 * without libdevice, dynamic shapes, a launch argument that is neither a
 * root buffer nor a host constant.
 *
 * Math: exp/log/log1p/tanh/erf/pow/sin/cos call the CUDA toolkit's
 * libdevice (__nv_expf, ...: CUDA's own accuracy, e.g. expf 2 ulp,
 * erff 2 ulp, with subnormals kept), linked into the module and inlined,
 * when libdevice.10.bc is found (FzGpuOptions.libdevice); otherwise the
 * CPU back end's inline polynomial approximations (LLVM 19 cannot lower
 * llvm.exp on NVPTX). fastMath adds every fast-math flag (approximate
 * division and square root).
 *
 * Ownership: a FzGpuProgram owns its strings and arrays, allocated
 * through the module's context (docs/api.md, "Allocation"); its argument
 * types and check locations are that context's too, so it is destroyed
 * (fzGpuProgramDestroy) before the context.
 */
#ifndef FZ_GPU_H
#define FZ_GPU_H

#include "fz/lowering.h"
#include "fz/precision.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FzGpuOptions {
  const char *arch;   /* "sm_80", "sm_90" (default), "sm_90a" */
  unsigned blockSize; /* lower-loop-to-kernel: threads per block
                         (default 256) */
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
  /* Long rows on chip (fz/kernel.h, FzLoopToKernelOptions): noRowStage
   * re-reads the row in each phase instead; rowRegisters (default 32,
   * fzGpuOptionsInit) are the registers per thread for its first
   * chunks. */
  bool noRowStage;
  unsigned rowRegisters;
  /* Tensor-core matmuls (lower-loop-to-kernel's first mapping): noMma
   * turns them off (matmul nests take the generic mappings); mmaTile is
   * the tile "BMxBNxBK:Ww:Ss[:gG][:sync]" of every matmul kernel (NULL or
   * "": $FZ_GPU_MMA_TILE when set, else chosen by size; not owned). */
  bool noMma;
  const char *mmaTile;
  /* Split-K of the tensor-core kernels: "auto", "off" or a number of
   * slices (FzLoopToKernelOptions.splitK; NULL or "": $FZ_GPU_SPLIT_K,
   * else auto; not owned). */
  const char *splitK;
  /* The small-M mapping (contractions of at most 16 rows: fz/kernel.h
   * FzLoopToKernelOptions.noSmallM) is off. */
  bool noSmallM;
  /* The precision policy (fz/precision.h) of f32 matmul and conv2d
   * nests, resolved for `arch` (fzPrecisionResolve): FZ_PRECISION_DEFAULT
   * (zero, the default) is tf32 on sm_80 and newer, FZ_PRECISION_IEEE
   * keeps them exact f32 (CUDA cores). bf16 and fp16 act at the graph
   * level: fzCudaCompileModule (fz/cuda_run.h) applies them to a
   * graph-level module; fzGpuCompile's input is already at the loop
   * level, where they mean tf32 for what f32 nests remain. */
  FzPrecision precision;
  /* The layout of convolution regions (fz/layout.h) for a graph-level
   * module (fzCudaCompileModule: FzCpuPipelineOptions.layout);
   * FZ_GRAPH_LAYOUT_NCHW (zero, the default) leaves the model's. */
  FzGraphLayout layout;
  /* Threads that optimize and generate code (docs/codegen.md "Parallel
   * code generation"): every kernel.func is its own LLVM module in its
   * own LLVMContext, compiled on a pool of threads, and the PTX of the
   * modules is joined in kernel order. The PTX is the same whatever the
   * number. 0 (the default): one per online CPU, at most
   * FZ_GPU_DEFAULT_CODEGEN_THREADS; 1: every module on the calling
   * thread; at most FZ_GPU_MAX_CODEGEN_THREADS. Never more threads than
   * kernels. */
  unsigned codegenThreads;
  /* Receives "loop->kernel", "launch plans", "LLVM translate" and "LLVM
   * optimize+codegen" (with one record per kernel before it), and what
   * fzCudaCompileModule's graph -> loop pipeline reports (NULL: none;
   * fz/lowering.h). */
  const FzTimingSink *timing;
  /* The fusion of fzCudaCompileModule's graph -> loop pipeline (report,
   * remarks, mode, limits: fz/fusion.h; copied there, its target left
   * as fzLowerModuleForCpu chooses when NULL). NULL: the defaults. Not
   * used by fzGpuCompile, whose input is already at the loop level. */
  const struct FzFusionOptions *fusion;
  /* The persistent cache of compiled kernels (docs/codegen.md "Kernel
   * cache"): each kernel's PTX is looked up by a hash of its LLVM module,
   * the arch, these options, libdevice and fuse's build, and stored
   * after a miss; the text is the same either way. noCache (default
   * false) skips it; cacheDir (NULL: $FZ_CACHE_DIR, else
   * $XDG_CACHE_HOME/fuse, else ~/.cache/fuse; not owned) moves it. A
   * cache that cannot be written is a warning, never an error. */
  bool noCache;
  const char *cacheDir;
  /* Hopper's warp-group matmul (docs/codegen.md "Warp-group matmul"):
   * fzCudaCompileModule on an sm_90 device compiles for sm_90a, where the
   * bf16/f16 matmuls and NHWC convs of N and K >= 128 and at least
   * wgmmaMinTiles 128x128 output tiles (times the batch) take the wgmma
   * kernel, unless
   * noWgmma (then sm_90 and mma.sync). wgmmaMinTiles 0: $FZ_GPU_WGMMA_MIN_TILES
   * when set, else FZ_GPU_WGMMA_MIN_TILES (about one wave of an H100's
   * 132 SMs: below it the wgmma kernel lost to mma.sync on whole
   * models); 1: every nest that allows it. Under the arch sm_90a
   * fzGpuCompile applies the same rule. */
  bool noWgmma;
  unsigned wgmmaMinTiles;
  /* Kernels compiled out of the total, as code generation goes (NULL:
   * none; fz/lowering.h). */
  const struct FzProgressSink *progress;
} FzGpuOptions;

#define FZ_GPU_DEFAULT_CODEGEN_THREADS 16
#define FZ_GPU_WGMMA_MIN_TILES 128
#define FZ_GPU_MAX_CODEGEN_THREADS 256

FZ_API void fzGpuOptionsInit(FzGpuOptions *o);

/* What one kernel parameter receives at a launch. */
typedef enum FzGpuArgKind {
  FZ_GPU_ARG_BUFFER, /* the device address of a root buffer of the
                        function: `root` indexes its arguments, then its
                        temporaries (loop.alloc at the top level), then
                        its constants (loop.constant_buffer at the top
                        level, passed to a launch) */
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
  /* Dynamic shared memory per block: above 48 KiB (the tensor-core
   * matmuls: 64-144 KiB) the runtime lets the kernel opt in first
   * (fzCudaKernelAllowSharedMemory, fz/cuda.h); at most 227 KiB. */
  unsigned sharedBytes;
  size_t numArgs;
  FzGpuArg *args;       /* one per kernel parameter, in order */
  /* The kernel.func's `fuse.plan` attribute (lower-loop-to-kernel's
   * one-line plan: mapping, sizes, why), or NULL; mapping is its first
   * word ("matmul", "elementwise", "rows", "columns"), or "kernel"
   * without one. */
  char *plan;
  char *mapping;
  /* Bytes the kernel reads and writes ideally (each buffer argument that
   * it accesses counted once): for bandwidth figures. */
  int64_t bytesMoved;
  /* Floating-point operations of the launch when it is compute-bound
   * (the kernel.func's `fuse.flops`: 2 * batch * M * N * K for a
   * tensor-core matmul, mapping "matmul"), else 0: for TFLOP/s figures. */
  int64_t flops;
} FzGpuKernel;

typedef struct FzGpuFunction {
  char *name;        /* symbol, without '@' */
  size_t numArgs;    /* buffers: inputs then outputs */
  size_t numOutputs;
  FzType **argTypes; /* buffer types, numArgs */
  size_t numTemps;
  int64_t *tempBytes; /* device bytes of each temporary */
  /* Constant roots: the top-level loop.constant_buffer ops that launches
   * pass (lower-loop-to-kernel makes every constant of more than 64 bytes a
   * kernel parameter: a model's weights). The runtime allocates each on
   * the device and uploads its contents before the first launch; the
   * PTX holds no copy of them. */
  size_t numConsts;
  int64_t *constBytes; /* bytes of each constant */
  void **constData;    /* its contents (owned) */
  size_t numKernels;
  FzGpuKernel *kernels; /* the launches, in order */
} FzGpuFunction;

/* A run-time check of the kernels (an index computed from loaded data, a
 * divisor that may be zero): when one fails, the kernel records the
 * check's number (1-based) and a value in the module's global
 * `fz_status` (.global .b8 fz_status[16]: two little-endian int64), and
 * the runtime reports `message` at loc, its "%lld" replaced by the value
 * (docs/codegen.md, "Run-time errors"). */
typedef struct FzGpuCheck {
  FzLoc *loc;
  char *message;
} FzGpuCheck;

typedef struct FzGpuProgram {
  /* NUL-terminated PTX text of every kernel, after comment lines per
   * launch: `// fuse: KERNEL: PLAN` (when the kernel has a plan) and
   * `// fuse: KERNEL: launch grid (X, Y, Z), block (X, Y, Z), shared N` */
  char *ptx;
  size_t ptxLen;
  size_t numFunctions;
  FzGpuFunction *functions;
  /* The checks of the kernels; none: the module has no fz_status. */
  size_t numChecks;
  FzGpuCheck *checks;
} FzGpuProgram;

/* Compiles `module` (loop or kernel level; a graph-level module must be
 * lowered first, e.g. fzLowerModuleForCpu), which it leaves unchanged.
 * NULL after reporting errors at the offending ops. */
FZ_API FzGpuProgram *fzGpuCompile(FzOp *module, const FzGpuOptions *options);
FZ_API void fzGpuProgramDestroy(FzGpuProgram *p);
/* The function `name`, or NULL. */
FZ_API const FzGpuFunction *fzGpuProgramLookup(const FzGpuProgram *p,
                                               const char *name);

/* Writes the LLVM IR (FZ_CODEGEN_LLVM_IR, after optimization) or the
 * PTX (FZ_CODEGEN_ASSEMBLY) of module through cb. False after errors. */
FZ_API FZ_MUST_CHECK bool fzEmitPTX(FzOp *module, const FzGpuOptions *options,
                                    FzCodegenFileType type, FzPrintCallback cb,
                                    void *userData);

#ifdef __cplusplus
}
#endif

#endif /* FZ_GPU_H */

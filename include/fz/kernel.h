/* fz/kernel.h - the kernel dialect (the GPU execution model) and its CPU
 * simulator.
 *
 * A kernel.func is a GPU entry point: buffer and scalar arguments, no
 * results, a body that every thread of a grid runs. Inside it, thread and
 * block ids, shared memory, barriers, warp shuffles, atomics, aligned
 * vector accesses, tensor-core mma with its ldmatrix fragment loads,
 * asynchronous global-to-shared copies (cp.async) and vector element
 * access join the loop dialect's scalar, memory and loop ops (loop.for,
 * loop.load, loop.addf, ...). Host code
 * (a loop-level func.func) starts one with kernel.launch. Every op, its
 * syntax, semantics and verifier rules: docs/dialects/kernel.md.
 *
 * Memory spaces of buffer types at the kernel level: 0 global (kernel
 * arguments; NVPTX address space 1), 3 shared (one copy per block:
 * kernel.shared_alloc, kernel.dynamic_shared), as NVPTX numbers them.
 *
 * lower-loop-to-kernel (below) produces this level from the loop level;
 * fz/gpu.h compiles it to PTX (lowering/nvptx, each op one PTX
 * construct: docs/dialects/kernel.md "On the GPU").
 *
 * The simulator runs kernel.launch on the host with the exact semantics
 * of the execution model for small grids (limits below), so lit tests
 * check kernels on machines without a GPU (fuse-run --device sim).
 */
#ifndef FZ_KERNEL_H
#define FZ_KERNEL_H

#include "fz/loop.h"
#include "fz/precision.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ID, NAME) for every op of the dialect, once. */
/* clang-format off */
#define FZ_KERNEL_OPS(X)                                                      \
  X(FUNC, "kernel.func") X(RETURN, "kernel.return")                          \
  X(LAUNCH, "kernel.launch")                                                  \
  X(THREAD_ID, "kernel.thread_id") X(BLOCK_ID, "kernel.block_id")             \
  X(BLOCK_DIM, "kernel.block_dim") X(GRID_DIM, "kernel.grid_dim")             \
  X(LANE_ID, "kernel.lane_id")                                                \
  X(SHARED_ALLOC, "kernel.shared_alloc")                                      \
  X(DYNAMIC_SHARED, "kernel.dynamic_shared")                                  \
  X(BARRIER, "kernel.barrier") X(SHUFFLE, "kernel.shuffle")                   \
  X(ATOMIC, "kernel.atomic")                                                  \
  X(VECTOR_LOAD, "kernel.vector_load") X(VECTOR_STORE, "kernel.vector_store") \
  X(MMA, "kernel.mma") X(LDMATRIX, "kernel.ldmatrix")                        \
  X(CP_ASYNC, "kernel.cp_async")                                              \
  X(CP_ASYNC_COMMIT, "kernel.cp_async_commit")                                \
  X(CP_ASYNC_WAIT, "kernel.cp_async_wait")                                    \
  X(EXTRACT, "kernel.extract") X(FROM_ELEMENTS, "kernel.from_elements")     \
  X(MBARRIER_INIT, "kernel.mbarrier_init")                                    \
  X(MBARRIER_ARRIVE, "kernel.mbarrier_arrive")                                \
  X(MBARRIER_WAIT, "kernel.mbarrier_wait")                                    \
  X(BULK_COPY, "kernel.bulk_copy")                                            \
  X(FENCE_PROXY_ASYNC, "kernel.fence_proxy_async")                            \
  X(WGMMA_FENCE, "kernel.wgmma_fence") X(WGMMA, "kernel.wgmma")              \
  X(WGMMA_COMMIT, "kernel.wgmma_commit") X(WGMMA_WAIT, "kernel.wgmma_wait")
/* clang-format on */

typedef enum FzKernelOpcode {
#define FZ_KERNEL_ENUM_ENTRY(id, name) FZ_KERNEL_OP_##id,
  FZ_KERNEL_OPS(FZ_KERNEL_ENUM_ENTRY)
#undef FZ_KERNEL_ENUM_ENTRY
  FZ_KERNEL_NUM_OPS,
  FZ_KERNEL_OP_UNKNOWN = FZ_KERNEL_NUM_OPS
} FzKernelOpcode;

/* Memory spaces (the last parameter of a buffer type). */
enum { FZ_KERNEL_SPACE_GLOBAL = 0, FZ_KERNEL_SPACE_SHARED = 3 };

/* The opcode of a kernel-dialect op; FZ_KERNEL_OP_UNKNOWN otherwise. */
FZ_API FzKernelOpcode fzKernelGetOpcode(const FzOp *op);

/* Registers the kernel dialect into ctx (twice is harmless). */
FZ_API FZ_MUST_CHECK bool fzRegisterKernelDialect(FzContext *ctx);
FZ_API const FzDialectDef *fzKernelDialectGet(void);

/* The kernel.func enclosing op (op itself if it is one), or NULL. */
FZ_API FzOp *fzKernelGetEnclosingFunc(FzOp *op);
/* kernel.thread_id etc.: the dimension 0 (x), 1 (y), 2 (z); -1 for
 * other ops or a bad attribute. */
FZ_API int fzKernelGetDimension(const FzOp *op);

/* kernel.launch operands: grid x, y, z, block x, y, z, dynamic shared
 * bytes (all index), then the kernel's arguments. */
#define FZ_KERNEL_LAUNCH_NUM_CONFIG 7

/* Accessors of verified ops, for code generators (docs/dialects/kernel.md
 * gives each op's PTX):
 *  - kernel.ldmatrix: the number of 8x8 matrices (1, 2 or 4; -1 for
 *    another op or a bad property) and whether it transposes them;
 *  - kernel.cp_async: operand 0 is the shared destination buffer, then its
 *    indices; the global source buffer is operand
 *    fzKernelCpAsyncGetSourceOperand (then its indices); the optional
 *    source size in bytes (index) is the last operand when
 *    fzKernelCpAsyncHasSourceSize; fzKernelCpAsyncGetSize the bytes
 *    copied (the `size` property: 4, 8 or 16, 16 when absent; -1 for
 *    another op or a bad property);
 *  - kernel.cp_async_wait: the number of most recent groups that may stay
 *    pending (-1 for another op);
 *  - kernel.extract: the lane read (-1 for another op);
 *  - kernel.vector_load: whether it reads data used once (the `stream`
 *    property: PTX .L1::no_allocate); false for another op. */
FZ_API int fzKernelLdmatrixGetNum(const FzOp *op);
FZ_API bool fzKernelLdmatrixIsTransposed(const FzOp *op);
FZ_API size_t fzKernelCpAsyncGetSourceOperand(const FzOp *op);
FZ_API bool fzKernelCpAsyncHasSourceSize(const FzOp *op);
FZ_API int64_t fzKernelCpAsyncGetSize(const FzOp *op);
FZ_API int64_t fzKernelCpAsyncWaitGetPending(const FzOp *op);
FZ_API int64_t fzKernelExtractGetPosition(const FzOp *op);
FZ_API bool fzKernelVectorLoadIsStream(const FzOp *op);
/* kernel.func's `kernel.min_blocks_per_sm` (PTX .minnctapersm: the
 * registers of a thread limited so that that many blocks fit on an SM);
 * 0 when absent or for another op. */
FZ_API int64_t fzKernelFuncGetMinBlocksPerSm(const FzOp *op);
/* kernel.dynamic_shared's `align` (bytes: 16 unless the property asks
 * for more, up to 1024: the 128-byte swizzle of kernel.wgmma operands
 * repeats every 1024 bytes of the shared address); 0 for another op. */
FZ_API int64_t fzKernelDynamicSharedGetAlign(const FzOp *op);

/* The sm_90 ops (dialects/kernel/ops_sm90.c; docs/dialects/kernel.md
 * "Hopper: mbarriers, bulk copies, warp-group mma"):
 *  - kernel.mbarrier_arrive: whether it carries a transaction count (the
 *    last operand, index bytes: mbarrier.arrive.expect_tx);
 *  - kernel.bulk_copy: operand 0 the shared destination (then its
 *    indices), the global source at fzKernelBulkCopyGetSourceOperand
 *    (then its indices), the byte count, the mbarrier buffer and its
 *    indices after it (fzKernelBulkCopyGetBarrierOperand);
 *  - kernel.wgmma: its shape m64nNkK, operand A (a shared buffer and one
 *    index) at 0, B at 2, the N/4 accumulator pairs from 4 on; the
 *    layout of each operand in shared memory (FzKernelWgmmaLayout);
 *  - kernel.wgmma_wait: the number of groups that may stay pending (-1
 *    for another op). */
FZ_API bool fzKernelMbarrierArriveHasTx(const FzOp *op);
FZ_API size_t fzKernelBulkCopyGetSourceOperand(const FzOp *op);
FZ_API size_t fzKernelBulkCopyGetBarrierOperand(const FzOp *op);
FZ_API int64_t fzKernelWgmmaWaitGetPending(const FzOp *op);

/* How a wgmma operand lies in shared memory: the PTX matrix descriptor's
 * fields. swizzle is 128, 64 or 32 (bytes; the 16-byte chunks of each
 * 128/64/32-byte row of a swizzle atom permuted by XOR with the row
 * number, on bits 4.. of the shared address) or 0 (no swizzle:
 * interleaved 8x16-byte core matrices); lbo and sbo the leading and
 * stride byte offsets; mnMajor (`trans_a` / `trans_b`) the operand is
 * stored M- (A) or N-major (B), else K-major. */
typedef struct FzKernelWgmmaLayout {
  int swizzle;
  int64_t lbo, sbo;
  bool mnMajor;
} FzKernelWgmmaLayout;

/* The shape of a verified kernel.wgmma (false for another op), and the
 * layout of operand A (isB false) or B. */
FZ_API bool fzKernelWgmmaGetShape(const FzOp *op, int *m, int *n, int *k);
FZ_API FzKernelWgmmaLayout fzKernelWgmmaGetLayout(const FzOp *op, bool isB);
/* The byte offset, from the descriptor's start address `start` (a shared
 * address), of element (mn, k) of a wgmma operand (A: row m, column k; B:
 * column n, row k) with `esz`-byte elements in layout L: the canonical
 * layouts of the PTX ISA (K-major: 8-row groups of rows of the swizzle
 * width at sbo, k contiguous; MN-major: mn contiguous in rows of the
 * swizzle width, 8-k groups at sbo, swizzle-wide mn blocks at lbo;
 * without swizzle, 8x16-byte core matrices at lbo along the leading
 * dimension and sbo along the other), the swizzle applied to the
 * absolute address. What the simulator reads; the generator's layout
 * must agree. */
FZ_API int64_t fzKernelWgmmaAddress(const FzKernelWgmmaLayout *L,
                                    int64_t start, int64_t mn, int64_t k,
                                    int64_t esz);

/*===------------------------------------------------------------------===*
 * The simulator (dialects/kernel/sim*.c)
 *
 * Limits (a launch beyond them is an error, never a hang): at most 1024
 * threads per block (x, y <= 1024, z <= 64, as CUDA), at most 65536
 * blocks and 2^20 threads per launch, 227 KiB of shared memory (static
 * plus dynamic) per block, FzKernelSimOptions.maxSteps thread-steps
 * (default 2^32). Errors are reported at the op that fails,
 * with the block and thread: out-of-bounds or misaligned accesses,
 * divergent barriers, shuffles, mma and ldmatrix not executed by the
 * lanes they read, data races on shared memory between two barriers,
 * accesses to shared memory that a pending cp.async writes, writes to
 * read-only buffers.
 *===------------------------------------------------------------------===*/

/* What a launch's threads moved, in bytes: global and shared memory
 * read and written by loads and stores (vector ones included), cp.async
 * (its global source read, its shared destination written) and ldmatrix
 * (shared memory read); atomics are not counted. */
typedef struct FzKernelSimStats {
  int64_t globalRead, globalWritten, sharedRead, sharedWritten;
} FzKernelSimStats;

typedef struct FzKernelLaunchConfig {
  int64_t grid[3];      /* blocks per dimension */
  int64_t block[3];     /* threads per dimension */
  int64_t sharedBytes;  /* dynamic shared memory per block */
} FzKernelLaunchConfig;

/* Options of a simulation. */
typedef struct FzKernelSimOptions {
  /* The budget: thread-steps (each op run for a block counts the block's
   * threads) before the launch stops with an error, so that an endless
   * loop is a diagnostic, never a hang; 0: FZ_KERNEL_SIM_DEFAULT_STEPS. */
  int64_t maxSteps;
  /* Byte counts (for checking what a mapping reads without a GPU):
   * non-NULL, what the launch's threads moved is added to *stats, also
   * after an error (what ran until then). */
  FzKernelSimStats *stats;
  /* The loop-interpreter extension only (fzKernelSimExtensionInit):
   * non-NULL, called after each launch that succeeded with what it
   * moved (fuse-run --sim-stats); the launch is the kernel.launch op. */
  void (*report)(void *reportData, FzOp *launch, FzOp *kernel,
                 const FzKernelSimStats *stats);
  void *reportData;
} FzKernelSimOptions;

#define FZ_KERNEL_SIM_DEFAULT_STEPS ((int64_t)1 << 32)

/* Runs kernel.func `kernel` over the grid of cfg with its arguments in
 * args (as the loop interpreter passes them: fz/loop.h). `site` is the
 * op errors about the launch itself are reported at (NULL: the kernel).
 * False after reporting an error. */
FZ_API FZ_MUST_CHECK bool fzKernelSimulate(FzOp *kernel, FzOp *site,
                                           const FzKernelLaunchConfig *cfg,
                                           size_t numArgs,
                                           const FzLoopInterpValue *args);
/* The same with options (NULL: the defaults, as fzKernelSimulate): the
 * step budget, and byte counts (options->stats). */
FZ_API FZ_MUST_CHECK bool
fzKernelSimulateWithOptions(FzOp *kernel, FzOp *site,
                            const FzKernelLaunchConfig *cfg,
                            const FzKernelSimOptions *options, size_t numArgs,
                            const FzLoopInterpValue *args);

/* The loop-interpreter extension that runs kernel.launch through the
 * simulator (static; put it in FzLoopInterpOptions.extension), with the
 * default budget per launch. */
FZ_API const FzLoopInterpExtension *fzKernelSimExtension(void);

/* Fills *ext with the extension using `options` (its userData; it must
 * outlive the interpretation; NULL: the defaults): each launch runs with
 * options' budget, adds its bytes to options->stats when set, and is
 * reported to options->report when set. */
FZ_API void fzKernelSimExtensionInit(FzLoopInterpExtension *ext,
                                     const FzKernelSimOptions *options);

/*===------------------------------------------------------------------===*
 * lower-loop-to-kernel (lowering/loop_to_kernel; docs/passes.md)
 *
 * Lowers each loop-level func.func (fz/loop.h's calling convention) of a
 * module to the kernel level: every top-level loop.parallel nest becomes
 * a kernel.func `<function>_kN` (inserted before the function) and a
 * kernel.launch in its place with a constant configuration. First,
 * top-level sequential nests (a loop.for, a loop.store) are wrapped into
 * one-iteration loop.parallel nests whose loop results go through rank-0
 * loop.alloc temporaries (fzKernelWrapSequentialNests below). A
 * kernel takes the root buffers it uses (arguments of the function, its
 * top-level loop.alloc temporaries) in that order; the setup ops it uses
 * (constants, views, dims, constant buffers, scalar loads and arithmetic
 * at the top level) are recomputed inside it, and those no longer used
 * at the host level are erased. The mapping of the nest onto threads is
 * chosen by a documented heuristic (docs/codegen.md "GPU mappings":
 * first the tensor-core matmul, whose kernels have a pipelined mma.sync
 * GEMM with the nest's epilogue in registers; then rows, columns,
 * elementwise) and recorded as the kernel.func's `fuse.plan` string
 * attribute (and `fuse.flops`, the operations of a matmul launch). A nest whose bounds are not constants
 * is an error at the nest; a nest of no iterations is erased (it does
 * nothing).
 *===------------------------------------------------------------------===*/

typedef struct FzLoopToKernelOptions {
  unsigned blockSize; /* threads per block of the elementwise mapping and
                         of grouped nests with G <= 32 (default 256; a
                         multiple of 32 up to 1024) */
  /* Iterations of the last dimension per thread for straight-line
   * bodies (elementwise): 0 chooses 16 bytes / the widest element
   * accessed; 1 is off. */
  unsigned vector;
  /* Rows mapping: 16-byte chunks per thread aimed at (0: 4). */
  unsigned rowChunks;
  /* Rows mapping, rows of one block whose chunks are not unrolled: the
   * inputs that several inner loops read (softmax's x) are read from
   * global memory once and kept on chip (docs/codegen.md "Long rows on
   * chip"); noRowStage turns that off (each loop reads the row again).
   * rowRegisters: 32-bit registers per thread that hold the first chunks
   * of such a row (fzLoopToKernelOptionsInit: 32; 0: the staged rows go
   * to shared memory only; at most 64). */
  bool noRowStage;
  unsigned rowRegisters;
  /* Shared memory per block (static plus dynamic) the mappings may use:
   * the device's opt-in limit (0: 227 KiB, sm_90; sm_80: 163 KiB). */
  unsigned maxSharedBytes;
  /* The tensor-core matmul mapping (tried first on every nest) is off:
   * matmul nests take the generic mappings. */
  bool noMma;
  /* Its tile configuration "BMxBNxBK:Ww:Ss[:gG][:sync]" for every matmul
   * nest (docs/passes.md); NULL or "": $FZ_GPU_MMA_TILE when set, else
   * chosen by size. A bad text is an error. Not owned. */
  const char *mmaTile;
  /* Split-K of the tensor-core kernels (docs/codegen.md "Split-K"):
   * "auto" (a matmul or conv2d whose output tiles cannot fill the GPU has
   * its k cut into slices: partial sums, then a kernel that adds them and
   * applies the epilogue), "off", or a number of slices N (1..64) forced
   * on every tensor-core nest; NULL or "": $FZ_GPU_SPLIT_K when set, else
   * auto. A bad text is an error. Not owned. */
  const char *splitK;
  /* The small-M mapping (tried before the tensor-core one: contractions
   * of at most 16 rows stream the weight on CUDA cores, docs/codegen.md
   * "Small-M contractions on the GPU") is off: they take the tensor-core
   * or generic mappings. */
  bool noSmallM;
  /* Its kernels' shape, numbers forced for experiments:
   * "cols=C,unroll=U,warps=S,blocks=B" (any of them; docs/passes.md); NULL
   * or "": $FZ_GPU_SMALL_M_SHAPE when set, else chosen by size. A bad
   * text is an error. Not owned. */
  const char *smallMShape;
  /* The precision policy (fz/precision.h) for f32 matmul and conv2d
   * nests: unless it is FZ_PRECISION_IEEE they become tensor-core
   * kernels too, on tf32 (mma.sync m16n8k8: each operand rounded to a
   * 10-bit mantissa, f32 accumulation). FZ_PRECISION_DEFAULT (zero, the
   * default) is tf32: the kernels target sm_80 and newer. bf16 and fp16
   * act at the graph level (convert-contractions); an f32 nest that
   * remains takes tf32 under them. */
  FzPrecision precision;
  /* The Hopper matmul mapping (docs/codegen.md "Warp-group matmul"):
   * bf16/f16 matmul nests become kernel.wgmma kernels (sm_90a) instead
   * of mma.sync ones; fzGpuCompile sets it for the arch sm_90a.
   * wgmmaMinTiles: only nests of N and K >= 128 and at least that many 128x128
   * output tiles (times the batch) take it, the others keep mma.sync
   * (its split-k and smaller tiles fill the GPU better; 0 or 1: every
   * nest). */
  bool wgmma;
  int64_t wgmmaMinTiles;
  /* A remark at every nest that holds a loop: the matmul kernel it
   * became (its tile), or why the matmul mapping refused it. */
  bool remarks;
  /* Keep structurally identical kernels apart (by default the last step
   * merges them: each distinct kernel.func once, every launch of a
   * duplicate calling the kept one). */
  bool noDedup;
} FzLoopToKernelOptions;

FZ_API void fzLoopToKernelOptionsInit(FzLoopToKernelOptions *o);

/* The first step of the pass, on its own: in every func.func of module,
 * each top-level loop.for, loop.store and loop.vector_store moves into a
 * one-iteration loop.parallel (a future kernel); a loop.for's results go
 * through rank-0 loop.alloc temporaries (at the start of the function)
 * that later ops read with loop.load. The semantics are kept. False
 * after reporting an error. */
FZ_API FZ_MUST_CHECK bool fzKernelWrapSequentialNests(FzOp *module);

/* Lowers every func.func of module in place (options may be NULL: the
 * defaults). A function without top-level nests is left as it is, so
 * running it twice is harmless. False after reporting errors. */
FZ_API FZ_MUST_CHECK bool
fzLowerLoopToKernel(FzOp *module, const FzLoopToKernelOptions *options);

/* Registers lower-loop-to-kernel (on builtin.module; options block-size,
 * vector, row-chunks, row-stage, row-registers, max-shared, small-m,
 * small-m-shape, mma, mma-tile, split-k, precision, wgmma, dedup,
 * remarks) and the
 * named pipeline
 * graph-to-kernel (graph-to-loop,lower-loop-to-kernel). Twice is
 * harmless. */
FZ_API FZ_MUST_CHECK bool fzRegisterKernelPasses(FzContext *ctx);

#ifdef __cplusplus
}
#endif

#endif /* FZ_KERNEL_H */

/* fz/kernel.h - the kernel dialect (the GPU execution model) and its CPU
 * simulator.
 *
 * A kernel.func is a GPU entry point: buffer and scalar arguments, no
 * results, a body that every thread of a grid runs. Inside it, thread and
 * block ids, shared memory, barriers, warp shuffles, atomics, aligned
 * vector accesses and tensor-core mma ops join the loop dialect's scalar,
 * memory and loop ops (loop.for, loop.load, loop.addf, ...). Host code
 * (a loop-level func.func) starts one with kernel.launch. Every op, its
 * syntax, semantics and verifier rules: docs/dialects/kernel.md.
 *
 * Memory spaces of buffer types at the kernel level: 0 global (kernel
 * arguments; NVPTX address space 1), 3 shared (one copy per block:
 * kernel.shared_alloc, kernel.dynamic_shared), as NVPTX numbers them.
 *
 * The simulator runs kernel.launch on the host with the exact semantics
 * of the execution model for small grids (limits below), so lit tests
 * check kernels on machines without a GPU (fuse-run --device sim).
 */
#ifndef FZ_KERNEL_H
#define FZ_KERNEL_H

#include "fz/loop.h"

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
  X(MMA, "kernel.mma")
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
FzKernelOpcode fzKernelGetOpcode(const FzOp *op);

/* Registers the kernel dialect into ctx (twice is harmless). */
FZ_MUST_CHECK bool fzRegisterKernelDialect(FzContext *ctx);
const FzDialectDef *fzKernelDialectGet(void);

/* The kernel.func enclosing op (op itself if it is one), or NULL. */
FzOp *fzKernelGetEnclosingFunc(FzOp *op);
/* kernel.thread_id etc.: the dimension 0 (x), 1 (y), 2 (z); -1 for
 * other ops or a bad attribute. */
int fzKernelGetDimension(const FzOp *op);

/* kernel.launch operands: grid x, y, z, block x, y, z, dynamic shared
 * bytes (all index), then the kernel's arguments. */
#define FZ_KERNEL_LAUNCH_NUM_CONFIG 7

/*===------------------------------------------------------------------===*
 * The simulator (dialects/kernel/sim*.c)
 *
 * Limits (a launch beyond them is an error, never a hang): at most 1024
 * threads per block (x, y <= 1024, z <= 64, as CUDA), at most 65536
 * blocks and 2^20 threads per launch, 227 KiB of shared memory (static
 * plus dynamic) per block, FzKernelSimOptions.maxSteps thread-steps
 * (default 2^32). Errors are reported at the op that fails,
 * with the block and thread: out-of-bounds or misaligned accesses,
 * divergent barriers, shuffles and mma not executed by the lanes they
 * read, data races on shared memory between two barriers, writes to
 * read-only buffers.
 *===------------------------------------------------------------------===*/

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
} FzKernelSimOptions;

#define FZ_KERNEL_SIM_DEFAULT_STEPS ((int64_t)1 << 32)

/* Runs kernel.func `kernel` over the grid of cfg with its arguments in
 * args (as the loop interpreter passes them: fz/loop.h). `site` is the
 * op errors about the launch itself are reported at (NULL: the kernel).
 * False after reporting an error. */
FZ_MUST_CHECK bool fzKernelSimulate(FzOp *kernel, FzOp *site,
                                    const FzKernelLaunchConfig *cfg,
                                    size_t numArgs,
                                    const FzLoopInterpValue *args);
/* The same with options (NULL: the defaults, as fzKernelSimulate). */
FZ_MUST_CHECK bool fzKernelSimulateWithOptions(
    FzOp *kernel, FzOp *site, const FzKernelLaunchConfig *cfg,
    const FzKernelSimOptions *options, size_t numArgs,
    const FzLoopInterpValue *args);

/* The loop-interpreter extension that runs kernel.launch through the
 * simulator (static; put it in FzLoopInterpOptions.extension), with the
 * default budget per launch. */
const FzLoopInterpExtension *fzKernelSimExtension(void);

/* Fills *ext with the extension using `options` (its userData; it must
 * outlive the interpretation; NULL: the defaults). */
void fzKernelSimExtensionInit(FzLoopInterpExtension *ext,
                              const FzKernelSimOptions *options);

#ifdef __cplusplus
}
#endif

#endif /* FZ_KERNEL_H */

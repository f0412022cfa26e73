/* lowering/nvptx/nvptx_internal.h - what the files of the NVPTX back end
 * share. It builds on the CPU back end's emitter state and per-op
 * translation (lowering/llvm/emit_internal.h, the only other place that
 * includes llvm-c): a kernel body is the same LLVM IR on both targets.
 *
 *   plan.c          per nest: which mapping onto threads, and why
 *   emit_kernels.c  functions -> kernels and launch plans; the
 *                   elementwise mapping
 *   emit_rows.c     the grouped mappings (rows, columns): reductions
 *                   over warps and blocks
 *   ptx.c           target machine, O3, PTX text, fzGpuCompile/fzEmitPTX
 */
#ifndef FZ_LOWERING_NVPTX_INTERNAL_H
#define FZ_LOWERING_NVPTX_INTERNAL_H

#include "fz/gpu.h"
#include "lowering/llvm/emit_internal.h"

/* Translates every func.func with a body of module into E->mod (E's
 * llctx, mod, tm, opts, cpu set by the caller), filling prog's functions
 * (not its PTX). False after reporting errors. */
bool fzNvTranslateModule(FzLLEmitter *E, FzOp *module, const FzGpuOptions *o,
                         FzGpuProgram *prog);

/*===--- plan.c -----------------------------------------------------------===*/

#define FZ_NV_MAX_DIMS 64
#define FZ_NV_MAX_INNER 16
#define FZ_NV_MAX_ACCUMULATORS 8

typedef enum FzNvMapping {
  FZ_NV_MAP_ELEMENTWISE, /* one iteration per thread, grid-stride loop */
  FZ_NV_MAP_ROWS,        /* `group` consecutive threads per iteration */
  FZ_NV_MAP_COLUMNS,     /* 32 iterations per block, reductions split
                            over blockDim / 32 threads */
} FzNvMapping;

/* One inner loop of a grouped nest (a loop.for reduction or a 1-D
 * loop.parallel phase): its chunks of `vec` consecutive iterations are
 * dealt to the group's threads, chunk c = g + k * group. */
typedef struct FzNvInnerPlan {
  FzOp *loop;
  bool isReduction;
  bool contiguous; /* its variable indexes only last dimensions */
  int64_t lb, step, trips;
  size_t widest;   /* largest element accessed, bytes */
  unsigned vec;    /* iterations per chunk */
  int64_t chunks;  /* ceil(trips / vec) */
  int64_t perThread; /* ceil(chunks / group) */
  bool unroll;     /* the per-thread chunk loop is fully unrolled */
} FzNvInnerPlan;

typedef struct FzNvNestPlan {
  FzNvMapping mapping;
  size_t numDims;
  int64_t lb[FZ_NV_MAX_DIMS], step[FZ_NV_MAX_DIMS], trips[FZ_NV_MAX_DIMS];
  int64_t items;          /* iterations of the nest (outer) */
  unsigned vec;           /* elementwise: iterations of the last dim each */
  unsigned group;         /* threads sharing one outer iteration */
  unsigned itemsPerBlock; /* outer iterations per block */
  unsigned blockSize;
  int64_t numBlocks;      /* blocks that cover every item once */
  size_t numInner;
  FzNvInnerPlan inner[FZ_NV_MAX_INNER];
} FzNvNestPlan;

/* Plans nest par (a top-level loop.parallel). widestBytes and
 * straightLine describe the whole nest (for the elementwise mapping).
 * False when its bounds are not constants (nothing reported). */
bool fzNvPlanNest(FzOp *par, const FzGpuOptions *o, size_t widestBytes,
                  bool straightLine, FzNvNestPlan *p);
const char *fzNvMappingName(FzNvMapping m);
/* Opcodes that can combine partial results of a reduction. */
bool fzNvIsCombineOp(FzLoopOpcode c);
/* The op of reduction loop forOp that folds iteration argument i into
 * its accumulator (its yield's operand i), or NULL when there is none of
 * fzNvIsCombineOp's kinds. */
FzOp *fzNvReductionCombine(FzOp *forOp, size_t i);

/*===--- emit_rows.c ------------------------------------------------------===*/

/* Emits the body of a kernel for a ROWS or COLUMNS plan of nest par; the
 * builder is in the kernel's entry block after its setup ops. */
bool fzNvEmitGroupedNest(FzLLEmitter *E, FzOp *par, const FzNvNestPlan *p);

#endif /* FZ_LOWERING_NVPTX_INTERNAL_H */

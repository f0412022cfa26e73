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
 *   emit_unroll.c   the iterations of one thread side by side, loads
 *                   first and stores last (so that they vectorize)
 *   ptx.c           target machine, O3, PTX text, fzGpuCompile/fzEmitPTX
 */
#ifndef FZ_LOWERING_NVPTX_INTERNAL_H
#define FZ_LOWERING_NVPTX_INTERNAL_H

#include "fz/gpu.h"
#include "fz/kernel.h"
#include "lowering/llvm/emit_internal.h"

/* Translates module into E->mod (E's llctx, mod, tm, opts, cpu set by
 * the caller), filling prog's functions (not its PTX). False after
 * reporting errors. (translate.c) */
bool fzNvTranslateModule(FzLLEmitter *E, FzOp *module, const FzGpuOptions *o,
                         FzGpuProgram *prog);
/* The old direct path: loop-level functions to kernels (emit_kernels.c). */
bool fzNvTranslateLoopModule(FzLLEmitter *E, FzOp *module,
                             const FzGpuOptions *o, FzGpuProgram *prog);

/*===--- The kernel dialect (translate.c, kernel_func.c, kernel_ops.c,
 *      launches.c) -----------------------------------------------------===*/

/* One kernel.func of the module: what its launches say about it
 * (launches.c) and what its emission learns (kernel_func.c). */
typedef struct FzNvKernelInfo {
  FzOp *func;        /* the kernel.func */
  char *name;        /* its PTX entry name (malloc'ed) */
  size_t numParams;
  bool launched;     /* at least one kernel.launch names it */
  unsigned block[3]; /* every launch's block size, when they agree */
  bool sameBlock;    /* launched, and every launch has the same block */
  bool wholeWarps;   /* every launch's block is a multiple of 32 threads */
  /* Per parameter (malloc'ed, numParams): noalias: no launch passes the
   * buffer together with another argument of the same root; written /
   * accessed: the kernel stores through it / loads or stores. */
  bool *noalias, *written, *accessed;
} FzNvKernelInfo;

/* E->foreignData while a kernel body is emitted. */
typedef struct FzNvKernelState {
  const FzNvKernelInfo *info;
  bool wholeWarps; /* shuffles may name the whole warp as members */
} FzNvKernelState;

/* The translation of one kernel op (kernel_ops.c; E->emitForeignOp). */
bool fzNvEmitKernelOp(FzLLEmitter *E, FzOp *op);
/* Whether op is a kernel op that synchronizes or communicates with other
 * threads (barriers, shuffles, atomics, mma). */
bool fzNvKernelOpSynchronizes(const FzOp *op);
/* Emits K's kernel.func as a PTX entry (kernel_func.c); fills K's
 * written/accessed. False after reporting errors. */
bool fzNvEmitKernel(FzLLEmitter *E, FzNvKernelInfo *K);
/* The launch plan of host function func (launches.c): its arguments,
 * temporaries and kernel.launch ops, each of which must name one of the
 * numKernels kernels (whose launch facts it updates) with constant
 * configurations. False after reporting errors. */
bool fzNvTranslateHost(FzContext *ctx, FzOp *func, FzNvKernelInfo *kernels,
                       size_t numKernels, FzGpuFunction *out);

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
  /* The nest stores into a buffer (root) that it also loads from, so
   * loop.barrier must order its phases. */
  bool phasesShareMemory;
} FzNvNestPlan;

/* Plans nest par (a top-level loop.parallel). widestBytes and
 * straightLine describe the whole nest (for the elementwise mapping).
 * False when its bounds are not constants (nothing reported). */
bool fzNvPlanNest(FzOp *par, const FzGpuOptions *o, size_t widestBytes,
                  bool straightLine, FzNvNestPlan *p);
const char *fzNvMappingName(FzNvMapping m);
/* One line saying which mapping p is and its numbers (for PTX comments
 * and fuse-run), truncated to size. */
void fzNvPlanDescribe(const FzNvNestPlan *p, char *buf, size_t size);
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

/*===--- emit_unroll.c ----------------------------------------------------===*/

/* `count` iterations of a straight-line loop body (terminator excluded)
 * emitted phase by phase: 0 loads and their address computations, 1 the
 * rest, 2 stores; every phase for each iteration before the next phase. */
typedef struct FzNvUnroll {
  FzLLEmitter *E;
  FzBlock *body;
  unsigned count;
  FzOp **ops;
  size_t numOps, numArgs;
  size_t numIvs;        /* leading block arguments that are not carried */
  unsigned char *phase; /* per op */
  LLVMValueRef *saved;  /* count x width: block arguments, then results */
  size_t width;
} FzNvUnroll;

/* False (E->failed set) when out of memory. */
bool fzNvUnrollInit(FzNvUnroll *U, FzLLEmitter *E, FzBlock *body,
                    size_t numIvs, unsigned count);
void fzNvUnrollFree(FzNvUnroll *U);
/* Emits the ops of `phase` for iteration u: restores u's values saved
 * by its earlier phases, then binds bindVals[k] to bindTo[k] (phase 0:
 * the induction variable; phase 1: iteration arguments), emits, saves. */
bool fzNvUnrollEmit(FzNvUnroll *U, unsigned u, unsigned phase,
                    FzValue *const *bindVals, LLVMValueRef *bindTo,
                    size_t numBind);

#endif /* FZ_LOWERING_NVPTX_INTERNAL_H */

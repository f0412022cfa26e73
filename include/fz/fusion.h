/* fz/fusion.h - the fusion pass: grouping graph ops into kernels.
 *
 * The `fuse` pass turns the body of each func.func into `graph.fusion`
 * regions, one per future kernel (docs/fusion.md). This header is what an
 * embedder may use or replace:
 *
 *  - FzFusionOpInfo and describers: how the pass sees one op (its fusion
 *    kind refined for its operand shapes, which axes a reduction reduces,
 *    how much arithmetic it does). Each dialect may register a describer;
 *    without one, the op definition's fusionKind is used.
 *  - FzFusionTarget: the machine the estimates are for (bandwidth,
 *    launch cost, on-chip limits). "cpu" and "cuda" are built in; more
 *    can be registered per context.
 *  - FzFusionCostModel: estimates a candidate kernel's run time and its
 *    register and shared-memory needs from a summary of its contents
 *    (FzFusionKernelDesc). The default model is a roofline with launch
 *    overhead; an embedder replaces it per context.
 *  - FzFusionOptions and fzFuseFunction: running the grouping directly on
 *    one function without a pass manager.
 *
 * Ownership: targets, cost models and describers are caller-owned static
 * data that must outlive the context they are registered with (the
 * context stores pointers, or copies where noted).
 */
#ifndef FZ_FUSION_H
#define FZ_FUSION_H

#include "fz/opdef.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------------------------------------------===*
 * How the pass sees one op
 *===------------------------------------------------------------------===*/

typedef struct FzFusionOpInfo {
  /* The op's fusion kind for these operand shapes (a broadcasting op
   * whose operands all have the result's shape is elementwise). */
  FzFusionKind kind;
  /* REDUCTION only: the operand that is reduced, and the reduced dims of
   * that operand as bits (bit d: dim d). reduceOperand < 0 marks a
   * windowed reduction (pooling), which the pass treats like a
   * contraction: it may absorb an elementwise epilogue only. */
  int reduceOperand;
  uint32_t reduceAxes;
  /* Arithmetic per result element (1 for an add, more for exp/tanh). */
  double flopsPerElement;
  /* When > 0: the op's total arithmetic, replacing flopsPerElement
   * (contractions: 2*M*N*K). */
  double flops;
  /* A root that absorbs the elementwise and layout producers of its
   * operands (a prologue: how its operands are read) and no consumers
   * (graph.attention: the head split folds into its loads). */
  bool prologueRoot;
} FzFusionOpInfo;

/* Describes op into *info (pre-filled from the op definition: kind =
 * def->fusionKind, reduceOperand = -1, flopsPerElement = 1). Returns
 * false to keep the pre-filled values. */
typedef bool (*FzFusionDescribeFn)(FzOp *op, FzFusionOpInfo *info);

/* Registers the describer of every op of `dialect` (replacing a previous
 * one). The graph dialect's describer is built in. False on OOM. */
FZ_API FZ_MUST_CHECK bool
fzContextRegisterFusionDescriber(FzContext *ctx, const char *dialect,
                                 FzFusionDescribeFn fn);

/* What the pass knows about op: the describer's answer, or the op
 * definition's fusion kind (unregistered ops and ops with side effects
 * are OPAQUE). Never fails. */
FZ_API void fzFusionDescribeOp(FzOp *op, FzFusionOpInfo *info);

/*===------------------------------------------------------------------===*
 * Targets
 *===------------------------------------------------------------------===*/

typedef struct FzFusionTarget {
  const char *name;        /* "cuda" */
  double bandwidth;        /* global memory, bytes per second */
  double peakFlops;        /* arithmetic per second */
  double launchSeconds;    /* fixed cost of one kernel */
  double parallelism;      /* work items that fill the machine */
  int64_t maxRegisters;    /* per thread; 0: no limit */
  int64_t maxSharedBytes;  /* on-chip memory per block; 0: no limit */
} FzFusionTarget;

/* A target by name: those registered in ctx (ctx may be NULL), then the
 * built-in "cpu" and "cuda". NULL when unknown. */
FZ_API const FzFusionTarget *fzFusionTargetLookup(const FzContext *ctx,
                                                  FzStringRef name);
/* Makes target (which must outlive ctx) known by its name. False on
 * OOM. */
FZ_API FZ_MUST_CHECK bool
fzContextRegisterFusionTarget(FzContext *ctx, const FzFusionTarget *target);

/*===------------------------------------------------------------------===*
 * The cost model
 *===------------------------------------------------------------------===*/

typedef enum FzFusionGroupKind {
  FZ_FUSION_GROUP_LOOP,        /* elementwise, broadcast, injective ops */
  FZ_FUSION_GROUP_REDUCTION,   /* row reductions with their producers and
                                  consumers, in phases */
  FZ_FUSION_GROUP_CONTRACTION, /* one matmul/conv (or pooling window) and
                                  its elementwise epilogue */
  FZ_FUSION_GROUP_OPAQUE,      /* one op the pass does not understand */
} FzFusionGroupKind;

/* "loop", "reduction", "contraction", "opaque" (static strings). */
FZ_API const char *fzFusionGroupKindName(FzFusionGroupKind kind);

/* A summary of one candidate kernel: what the cost model sees. */
typedef struct FzFusionKernelDesc {
  FzFusionGroupKind kind;
  size_t numOps;          /* ops in the kernel (duplicates included) */
  size_t numInputs;       /* tensors read from global memory */
  size_t numOutputs;      /* tensors written to global memory */
  double bytesRead;       /* each input read once */
  double bytesWritten;    /* each output written once */
  double flops;           /* arithmetic, recomputation included */
  double points;          /* iteration points (the largest op's elements) */
  double rows;            /* REDUCTION: independent rows; else 0 */
  double rowLength;       /* REDUCTION: elements per row; else 0 */
  unsigned phases;        /* REDUCTION: passes over a row (1 + the most
                             reductions a value of the row waits for) */
  unsigned numReductions;
  double rowInputBytes;   /* REDUCTION: bytes of the row-shaped inputs,
                             which a later phase reads again */
  size_t maxLive;         /* most values live at once in the body */
  size_t elementBytes;    /* widest element type, in bytes */
} FzFusionKernelDesc;

/* The model's answer for one kernel. */
typedef struct FzFusionEstimate {
  double seconds;      /* estimated run time, launch included */
  double bytes;        /* global memory traffic assumed */
  int64_t registers;   /* per thread */
  int64_t sharedBytes; /* per block */
} FzFusionEstimate;

/* A cost model: a name (for remarks and reports), a callback and its
 * userData. fzContextSetFusionCostModel copies the struct; what userData
 * points to stays the caller's and must outlive the context (or the next
 * replacement). estimate runs on the thread running the fuse pass, with
 * no lock: keep per-context state behind userData. */
typedef struct FzFusionCostModel FzFusionCostModel;
struct FzFusionCostModel {
  const char *name;
  /* Fills *out for kernel on target. False means "no estimate": the pass
   * then leaves the candidate unfused (and says so in its remark). */
  bool (*estimate)(const FzFusionCostModel *model,
                   const FzFusionTarget *target,
                   const FzFusionKernelDesc *kernel, FzFusionEstimate *out);
  void *userData;
};

/* The built-in model (docs/fusion.md gives its formulas). */
FZ_API const FzFusionCostModel *fzFusionDefaultCostModel(void);
/* The built-in model's estimate, for models that adjust it. */
FZ_API bool fzFusionEstimateDefault(const FzFusionTarget *target,
                                    const FzFusionKernelDesc *kernel,
                                    FzFusionEstimate *out);
/* Replaces the cost model the `fuse` pass uses in ctx (copied; NULL
 * restores the default). False on OOM. */
FZ_API FZ_MUST_CHECK bool
fzContextSetFusionCostModel(FzContext *ctx, const FzFusionCostModel *model);
/* The model in effect for ctx (never NULL). */
FZ_API const FzFusionCostModel *
fzContextGetFusionCostModel(const FzContext *ctx);

/*===------------------------------------------------------------------===*
 * Running the grouping
 *===------------------------------------------------------------------===*/

typedef enum FzFusionMode {
  FZ_FUSION_MODE_COST,  /* fuse when legal and the estimate improves */
  FZ_FUSION_MODE_RULES, /* fuse whenever legal; never duplicate */
} FzFusionMode;

/* FzFusionOptions.disable bits. */
enum {
  FZ_FUSION_DISABLE_REDUCTION = 1u << 0,    /* reductions stay alone */
  FZ_FUSION_DISABLE_EPILOGUE = 1u << 1,     /* contractions stay alone */
  FZ_FUSION_DISABLE_HORIZONTAL = 1u << 2,   /* no merging of siblings */
  FZ_FUSION_DISABLE_MULTI_OUTPUT = 1u << 3, /* a group has one result */
};

typedef struct FzFusionOptions {
  FzFusionMode mode;
  const FzFusionTarget *target;       /* NULL: "cuda" */
  const FzFusionCostModel *costModel; /* NULL: the context's */
  size_t maxOps;          /* ops per group (default 64) */
  size_t maxInputs;       /* tensors a group reads (default 64) */
  size_t maxOutputs;      /* tensors a group writes (default 16) */
  int64_t maxRegisters;   /* 0: the target's limit */
  int64_t maxSharedBytes; /* 0: the target's limit */
  bool allowRecompute;    /* cost mode may duplicate cheap producers */
  unsigned disable;       /* FZ_FUSION_DISABLE_* */
  bool remarks;           /* one remark per op: its group or why not */
  bool report;            /* print a summary per function */
  bool wrapSingle;        /* wrap lone ops in graph.fusion too */
  /* Where the report goes (NULL: stderr). */
  FzPrintCallback reportOut;
  void *reportUserData;
  /* Edges a cycle check may examine before the merge it guards is
   * refused (keeps the pass near-linear); 0: 1024. */
  size_t searchBudget;
} FzFusionOptions;

/* The defaults listed above. */
FZ_API void fzFusionOptionsInit(FzFusionOptions *options);

/* What one run did. Byte and time totals are filled only when
 * options->report is set (they cost a pass over every group). */
typedef struct FzFusionStats {
  size_t ops;           /* ops considered (constants excluded) */
  size_t kernelsBefore; /* one per op */
  size_t kernelsAfter;  /* groups and lone ops */
  size_t groups;        /* graph.fusion ops created */
  size_t fusedOps;      /* ops moved into them */
  size_t duplicated;    /* producers duplicated into consumers */
  double bytesBefore, bytesAfter;
  double secondsBefore, secondsAfter;
} FzFusionStats;

/* Groups the ops of func (a func.func with a single-block body) into
 * graph.fusion ops. Existing graph.fusion ops are kept as they are.
 * stats may be NULL. False after reporting an error (allocation failure,
 * an unknown target); the function is then left valid but possibly
 * partly grouped. */
FZ_API FZ_MUST_CHECK bool fzFuseFunction(FzOp *func,
                                         const FzFusionOptions *options,
                                         FzFusionStats *stats);

/* Registers the `fuse` pass (anchored on func.func; its options are
 * those of FzFusionOptions, see docs/fusion.md). Twice is harmless. */
FZ_API FZ_MUST_CHECK bool fzRegisterFusionPass(FzContext *ctx);

#ifdef __cplusplus
}
#endif

#endif /* FZ_FUSION_H */

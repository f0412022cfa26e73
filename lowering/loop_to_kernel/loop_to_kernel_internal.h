/* lowering/loop_to_kernel/loop_to_kernel_internal.h - what the files of
 * lower-loop-to-kernel share: the nest being lowered, the mapping
 * interface every mapping implements, and the helpers that build kernel
 * IR.
 *
 *   pass.c         the pass, its options, the mapping list, the walk
 *                  over functions and their top-level nests
 *   sequential.c   top-level sequential nests into one-iteration
 *                  loop.parallel nests (fzKernelWrapSequentialNests)
 *   outline.c      a nest -> kernel.func + kernel.launch: the buffers it
 *                  takes, the setup ops it recomputes
 *   build.c        IR helpers: constants, arithmetic, guards, loops,
 *                  cloning through value maps, bodies unrolled in phases
 *   plan.c         the generic planner (which of rows / columns /
 *                  elementwise, and its numbers)
 *   stage.c        the on-chip row of long rows (values several inner
 *                  loops compute, kept in registers and shared memory)
 *   elementwise.c  the elementwise mapping
 *   grouped.c      the rows and columns mappings
 *   small_m*.c     the small-M contraction mapping (first in the list:
 *                  x @ W of at most 16 rows; small_m.h)
 *   matmul_mapping.c  the tensor-core matmul mapping (next in the list),
 *                  over the generator of matmul*.c (matmul.h)
 *   split_k.c      a contraction nest's k cut into slices (partial sums,
 *                  then a nest that adds them): small_m_split.c and
 *                  matmul_split.c decide when
 *
 * A mapping (FzLkMapping) plans a nest (the launch configuration and a
 * one-line description) and builds the kernel body. Mappings are tried
 * in the order of pass.c's list; the first whose plan accepts the nest
 * builds it. The specialized mappings (small-M contractions, the
 * tensor-core matmul) go in front of the generic ones.
 *
 * Private to lowering/loop_to_kernel.
 */
#ifndef FZ_LOWERING_LOOP_TO_KERNEL_INTERNAL_H
#define FZ_LOWERING_LOOP_TO_KERNEL_INTERNAL_H

#include "fz/kernel.h"
#include "ir/util.h"

/* The greatest common divisor of a and b (non-negative; gcd(a, 0) = a). */
static inline int64_t fzLkGcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

#define FZ_LK_MAX_DIMS 64

/* A top-level loop.parallel of a host function, with constant bounds. */
typedef struct FzLkNest {
  FzContext *ctx;
  FzOp *par;   /* the nest (still in the host function) */
  FzOp *func;  /* its func.func */
  size_t numDims;
  int64_t lb[FZ_LK_MAX_DIMS], step[FZ_LK_MAX_DIMS], trips[FZ_LK_MAX_DIMS];
  int64_t items;      /* iterations of the nest (capped at 2^50) */
  size_t widestBytes; /* largest element the nest loads or stores */
  bool straightLine;  /* no loop, allocation or barrier inside */
} FzLkNest;

/* What a mapping decided for a nest. */
typedef struct FzLkPlan {
  int64_t grid[3], block[3]; /* the launch */
  int64_t sharedBytes;       /* dynamic shared memory */
  char desc[1024];           /* one line: the kernel's `fuse.plan` */
  /* Floating-point operations of one launch when the kernel is
   * compute-bound (a matmul: 2 M N K), recorded as `fuse.flops` for
   * TFLOP/s figures; 0: none. */
  int64_t flops;
  void *state;               /* the mapping's own (released by it) */
  FzContext *ctx;            /* the nest's: state's memory (set by the
                                caller) */
  /* Set by a plan that reported an error (a bad option): the pass
   * fails instead of trying the next mapping. */
  bool failed;
} FzLkPlan;

/* A value map with a parent: lookups fall back to it. */
typedef struct FzLkMap {
  FzPtrMap own;
  const struct FzLkMap *parent;
} FzLkMap;

void fzLkMapInit(FzLkMap *m, FzContext *ctx, const FzLkMap *parent);
void fzLkMapFree(FzLkMap *m);
/* False when out of memory. */
bool fzLkMapPut(FzLkMap *m, FzValue *from, FzValue *to);
/* The value from maps to, or NULL. */
FzValue *fzLkMapGet(const FzLkMap *m, FzValue *from);

/* Building a kernel body. */
typedef struct FzLkBuild {
  FzContext *ctx;
  FzLoc *loc;          /* of the nest: every new op gets it */
  FzBuilder b;         /* the insertion point */
  FzOp *kernel;        /* the kernel.func */
  FzBlock *entry;      /* its entry block */
  FzOp *firstBody;     /* the first op after the entry's constants */
  const FzLkNest *nest;
  const FzLoopToKernelOptions *opts;
  FzLkMap base;        /* host values -> kernel values (roots, setup) */
  /* Constants made so far (at the start of the entry block). */
  FzPtrVec constants;
  bool failed;         /* an error was reported, or out of memory */
} FzLkBuild;

typedef struct FzLkMapping {
  const char *name;
  /* Fills p and returns true when this mapping takes the nest; false
   * lets the next mapping try (nothing reported but remarks), unless it
   * set p->failed after reporting an error. Running out of memory fails
   * the pass whatever plan returns (the context's sticky flag). */
  bool (*plan)(const FzLkNest *nest, const FzLoopToKernelOptions *o,
               FzLkPlan *p);
  /* Builds the kernel body at kb's insertion point (the kernel's entry
   * block, its setup ops already cloned; kernel.return follows). False
   * after an error (reported). */
  bool (*build)(FzLkBuild *kb, const FzLkPlan *p);
  /* Frees p->state (may be NULL). */
  void (*release)(FzLkPlan *p);
} FzLkMapping;

extern const FzLkMapping fzLkMatmulMapping;      /* matmul_mapping.c */
extern const FzLkMapping fzLkDepthwiseMapping;   /* depthwise.c */
extern const FzLkMapping fzLkAttentionMapping;   /* attention.c */
/* fzLkSmallMMapping: small_m.h. */
/* Before the mappings plan a matmul nest (matmul_mapping.c): the batch
 * dims of its rows operand that the other operand does not index, and
 * that sit just before the row dim with contiguous rows in every buffer,
 * are merged into the rows (dialects/loop/nest_rewrite.h): x [S, B, K]
 * @ w [K, N] becomes one GEMM of S * B rows instead of S of B rows. The
 * nest to lower, par itself when nothing merged; NULL after an error
 * (reported). */
FzOp *fzLkFoldMatmulBatch(FzOp *par);
extern const FzLkMapping fzLkGroupedMapping;     /* grouped.c */
extern const FzLkMapping fzLkElementwiseMapping; /* elementwise.c */

/*===--- outline.c --------------------------------------------------------===*/

/* Replaces nest (a top-level loop.parallel of func) by a kernel.func
 * built with mapping m (plan p) inserted before func, and a kernel.launch
 * in its place. False after an error (reported). */
bool fzLkOutline(const FzLkNest *nest, const FzLkMapping *m,
                 const FzLkPlan *p, const FzLoopToKernelOptions *o,
                 unsigned index);

/* Constant buffers up to this many bytes are copied into each kernel that
 * uses them (a global with its data in the PTX); larger ones are kernel
 * parameters, passed by the launches like temporaries (fz/gpu.h: the
 * function's constant roots, uploaded by the runtime). Small, so that the
 * kernels of a model's repeated blocks, which differ only in their
 * weights and biases, are identical (dedup.c). */
#define FZ_LK_INLINE_CONSTANT_BYTES 64u

/* Whether op is a top-level loop.constant_buffer of more than
 * FZ_LK_INLINE_CONSTANT_BYTES, which outlined kernels take as a
 * parameter. */
bool fzLkIsConstantRoot(FzOp *op);

/*===--- split_k.c --------------------------------------------------------===*/

/* SMs the launch shapes of the GPU mappings aim to fill (an H100 SXM and
 * an H200 have 132; the pass does not know the device). */
#define FZ_LK_TARGET_SMS 132

/* A k split of a contraction nest. */
typedef struct FzLkSplit {
  FzOp *kloop;    /* the nest's reduction: a loop.for of its body over
                     0..K step 1 with one accumulator */
  int64_t K;      /* its trip count */
  int64_t slices; /* S = ceil(K / sliceK); below 2: nothing to do */
  int64_t sliceK; /* iterations of the k loop per slice */
  bool sliceLast; /* the slice is the partial nest's last dim (the
                     tensor-core mapping's form), else its first
                     (small-M's) */
} FzLkSplit;

/* Replaces *par (a top-level loop.parallel of func, with constant
 * bounds 0..extent step 1) by a nest of partial sums over k slices into
 * a new f32 temporary (*par becomes it) followed by a nest that adds
 * them in order and applies the epilogue (the next op), as split_k.c
 * draws. False after an error (reported, naming `what`). */
bool fzLkSplitNest(FzOp *func, FzOp **par, const FzLkSplit *s,
                   const char *what);

/* The tensor-core mapping's k split (matmul_split.c): when nest *par is
 * a matmul or conv2d nest that the tensor-core mapping takes and
 * fzMatmulSplitChoose (or the `split-k` option) cuts, fzLkSplitNest
 * with the slice last; otherwise nothing. False after an error
 * (reported: a bad `split-k` text among them). */
bool fzLkMatmulSplitK(FzOp *func, FzOp **par, const FzLoopToKernelOptions *o);

/* The weights of an NHWC conv2d nest par that the tensor-core mapping
 * takes, when they are a loop.constant_buffer, repacked to [M, KH, KW,
 * C] (conv_repack.c): the nest's weight load reads the new buffer,
 * inserted before par. Nothing otherwise. False after an error
 * (reported). */
bool fzLkRepackConvWeights(FzOp *par, const FzLoopToKernelOptions *o);

/* Parses a split-k text (NULL or "": $FZ_GPU_SPLIT_K, else "auto"):
 * "auto" (0), "off" (1) or a count of slices 2..FZ_MATMUL_MAX_SPLIT
 * into *out. False with the reason in why. */
bool fzLkSplitKParse(const char *text, int64_t *out, char *why,
                     size_t whyLen);

/*===--- dedup.c ----------------------------------------------------------===*/

/* Merges the structurally identical kernel.func ops of module (the same
 * generic form but for the name): the launches of each duplicate call the
 * first of its group, and the duplicates are erased. False after an
 * error (reported). */
bool fzLkDedupKernels(FzOp *module);

/*===--- build.c ----------------------------------------------------------===*/

/* Constants (made once per kernel, at the start of its entry block). */
FzValue *fzLkIndex(FzLkBuild *kb, int64_t v);
FzValue *fzLkConst(FzLkBuild *kb, FzType *t, double v);
FzValue *fzLkConstInt(FzLkBuild *kb, FzType *t, int64_t v);
/* The constant of type t holding attribute a (a loop.constant value). */
FzValue *fzLkConstAttr(FzLkBuild *kb, FzType *t, FzAttr *a);
/* `name`(operands) -> one result of type t (NULL: the first operand's). */
FzValue *fzLkOp(FzLkBuild *kb, const char *name, FzType *t, size_t n,
                FzValue *const *operands);
FzValue *fzLkBin(FzLkBuild *kb, const char *name, FzValue *a, FzValue *b);
/* a + b, a * b, a / b, a % b on index (or iN) values, folding constant
 * operands and the identities x+0, x*1, x/1. */
FzValue *fzLkAdd(FzLkBuild *kb, FzValue *a, FzValue *b);
FzValue *fzLkMul(FzLkBuild *kb, FzValue *a, FzValue *b);
FzValue *fzLkDiv(FzLkBuild *kb, FzValue *a, FzValue *b);
FzValue *fzLkRem(FzLkBuild *kb, FzValue *a, FzValue *b);
/* loop.cmpi `pred` (an i1). */
FzValue *fzLkCmp(FzLkBuild *kb, const char *pred, FzValue *a, FzValue *b);
FzValue *fzLkSelect(FzLkBuild *kb, FzValue *c, FzValue *a, FzValue *b);
FzValue *fzLkCast(FzLkBuild *kb, const char *name, FzValue *v, FzType *t);
/* kernel.thread_id / block_id / block_dim / grid_dim `name` along x. */
FzValue *fzLkId(FzLkBuild *kb, const char *name);
/* A kernel.shared_alloc of `n` elements of elt (at the start of the
 * entry block). */
FzValue *fzLkSharedAlloc(FzLkBuild *kb, FzType *elt, int64_t n);
/* A kernel.dynamic_shared of element type elt (at the start of the entry
 * block; every one aliases the launch's dynamic shared memory). */
FzValue *fzLkDynamicShared(FzLkBuild *kb, FzType *elt);
/* loop.load / loop.store of one element. */
FzValue *fzLkLoad(FzLkBuild *kb, FzValue *buf, size_t n, FzValue *const *idx);
bool fzLkStore(FzLkBuild *kb, FzValue *v, FzValue *buf, size_t n,
               FzValue *const *idx);
bool fzLkBarrier(FzLkBuild *kb);
/* kernel.shuffle xor v, off, 32; the value read. */
FzValue *fzLkShuffleXor(FzLkBuild *kb, FzValue *v, int64_t off);

/* `loop.for %i = lb to ub step step iter_args(inits)`: Begin creates it
 * and moves the insertion point to the end of its body (*iv and
 * iters[0..n) receive its block arguments); End adds the loop.yield of
 * yields and moves after the loop, whose results are then the loop's
 * (n of them). */
FzOp *fzLkForBegin(FzLkBuild *kb, FzValue *lb, FzValue *ub, FzValue *step,
                   size_t n, FzValue *const *inits, FzValue **iv,
                   FzValue **iters);
bool fzLkForEnd(FzLkBuild *kb, FzOp *loop, size_t n,
                FzValue *const *yields);
/* A structured `if (cond)` (i1): a loop.for of one iteration where cond
 * holds, none elsewhere. */
FzOp *fzLkIfBegin(FzLkBuild *kb, FzValue *cond, size_t n,
                  FzValue *const *inits, FzValue **iters);

/* Clones op (regions included) at the insertion point, its operands
 * (and the values its regions use from outside) looked up in map, its
 * results recorded in map. NULL after an error. */
FzOp *fzLkClone(FzLkBuild *kb, FzLkMap *map, FzOp *op);

/* `count` iterations of a loop body without regions (terminator
 * excluded) cloned side by side in three phases: the loads and the ops
 * their addresses need for every iteration, then the rest, then the
 * stores (so that the loads of consecutive iterations are adjacent and
 * LLVM's load/store vectorizer makes 16-byte accesses of them). When an
 * address depends on a loop-carried value, the body's own order is kept.
 * Per iteration u: its block arguments are bound by bind(u, phase) before
 * each phase; the results of the last phase's ops are in maps[u]. */
typedef struct FzLkUnroll {
  FzLkBuild *kb;
  FzBlock *body;
  unsigned count;
  size_t numIvs;        /* leading block arguments that are not carried */
  FzOp **ops;           /* the body's ops, terminator excluded */
  size_t numOps;
  unsigned char *phase; /* per op: 0, 1 or 2 */
  FzLkMap *maps;        /* per iteration, children of the caller's map */
  /* Iteration u's value of block argument laneIv is laneBase + u (NULL:
   * no such argument). An access whose last index is laneIv and whose
   * other indices do not depend on it, in a buffer of the identity
   * layout, goes through a view of the iterations' `count` consecutive
   * elements at constant indices 0..count-1 (views[op], made once): its
   * copies then share one base address, so that LLVM's load/store
   * vectorizer always finds them adjacent. */
  FzValue *laneIv, *laneBase;
  FzValue **views; /* per op: the view, or NULL */
  bool *viewed;    /* per op: accessed through a view */
  /* Per op: not cloned; the caller has put its result in maps[u] (a
   * load whose value is already on chip: grouped.c's staged rows). */
  bool *skip;
} FzLkUnroll;

/* laneIv and laneBase: see above (both NULL: no views). */
bool fzLkUnrollInit(FzLkUnroll *U, FzLkBuild *kb, FzBlock *body,
                    size_t numIvs, unsigned count, const FzLkMap *parent,
                    FzValue *laneIv, FzValue *laneBase);
void fzLkUnrollFree(FzLkUnroll *U);
/* Also skips the effect-free ops whose results only skipped ops use
 * (the address arithmetic of a load whose value the caller provides). */
void fzLkUnrollSkipDead(FzLkUnroll *U);
/* Clones the ops of `phase` for iteration u (after binding block
 * arguments in maps[u]). */
bool fzLkUnrollPhase(FzLkUnroll *U, unsigned u, unsigned phase);

/* Replaces every loop.parallel nested in op by loop.for nests (last
 * dimension innermost) and drops loop.barrier: a kernel thread runs each
 * such nest alone, in order. False when out of memory. */
bool fzLkSerializeNested(FzLkBuild *kb, FzOp *op);

/*===--- plan.c -----------------------------------------------------------===*/

#define FZ_LK_MAX_INNER 16
#define FZ_LK_MAX_ACCUMULATORS 8
#define FZ_LK_MAX_STAGED 8
/* Stores of a columns phase along its inner variable (transposed
 * through shared memory, grouped.c), and the pitch of their tiles: 32
 * columns and one element of padding, so that neither the columns'
 * writes nor the channels' reads of a tile conflict in banks. */
#define FZ_LK_MAX_TRANSPOSED 4
#define FZ_LK_TILE_PITCH 33

typedef enum FzLkMappingKind {
  FZ_LK_MAP_ELEMENTWISE, /* one iteration per thread, grid-stride loop */
  FZ_LK_MAP_ROWS,        /* `group` consecutive threads per iteration */
  FZ_LK_MAP_COLUMNS,     /* 32 iterations per block, reductions split
                            over blockDim / 32 threads */
} FzLkMappingKind;

/* One inner loop of a grouped nest (a loop.for reduction or a 1-D
 * loop.parallel phase): its chunks of `vec` consecutive iterations are
 * dealt to the group's threads, chunk c = g + k * group. */
typedef struct FzLkInnerPlan {
  FzOp *loop;
  bool isReduction;
  bool contiguous;   /* its variable indexes only last dimensions */
  int64_t lb, step, trips;
  size_t widest;     /* largest element accessed, bytes */
  unsigned vec;      /* iterations per chunk */
  int64_t chunks;    /* ceil(trips / vec) */
  int64_t perThread; /* ceil(chunks / group) */
  bool unroll;       /* the per-thread chunk loop is fully unrolled */
  /* Its chunks follow the layout of the nest's on-chip row
   * (FzLkNestPlan.staged): the rest of each thread's chunks in a loop,
   * then its first regChunks unrolled; it computes staged values (their
   * producer) or takes them from registers and shared memory. */
  bool staged;
  /* Columns: the phase's stores whose last index is its variable (a
   * channel written along the contiguous dim), and their element sizes
   * summed. Each goes through a shared-memory tile: the G threads of
   * each of the block's 32 columns write their chunk, then the block
   * writes the tile out along the channels (grouped.c). */
  unsigned transposed;
  size_t transposedBytes;
} FzLkInnerPlan;

/* A value of the row that several inner loops of a one-row-per-block
 * nest compute from the same elements (softmax's x in its max, sum and
 * normalization loops; x + r in a layer_norm of a residual sum): the
 * first of them (the producer) computes it, reading global memory, and
 * keeps it on chip for the later ones (stage.c): a thread's first
 * regChunks chunks in registers, the rest of the row in dynamic shared
 * memory, where the value of element e = c * vec + u of chunk c is at
 * e - regChunks * group * vec, so that each thread reads back only what
 * it wrote itself (no barrier) and a warp's 16-byte accesses are
 * consecutive (no bank conflict). */
typedef struct FzLkStagedValue {
  FzOp *op;             /* its op in the producer's body (a load, or an
                           effect-free op of the row's elements) */
  size_t producer;      /* the producer: an index into inner[] */
  FzType *elt;          /* its type */
  int64_t sharedOffset; /* bytes into the dynamic shared memory (16-byte
                           aligned) */
  int64_t sharedElems;  /* elements there (the row past the registers) */
} FzLkStagedValue;

typedef struct FzLkNestPlan {
  FzLkMappingKind mapping;
  unsigned vec;           /* elementwise: iterations of the last dim each */
  unsigned group;         /* threads sharing one outer iteration */
  unsigned itemsPerBlock; /* outer iterations per block */
  unsigned blockSize;
  int64_t numBlocks;      /* blocks that cover every item once */
  size_t numInner;
  FzLkInnerPlan inner[FZ_LK_MAX_INNER];
  /* The nest stores into a buffer (root) that it also loads from, so
   * loop.barrier must order its phases. */
  bool phasesShareMemory;
  /* The on-chip row (docs/codegen.md "Long rows on chip", stage.c):
   * rows mapping, one row per block, inner loops whose chunks are not
   * unrolled and that compute the same values. numStaged == 0: none
   * (each loop reads global memory). */
  size_t numStaged;
  FzLkStagedValue staged[FZ_LK_MAX_STAGED];
  int64_t regChunks;   /* chunks per thread kept in registers */
  int64_t stageBytes;  /* dynamic shared memory of the staged inputs */
  /* Values several loops compute that each loop recomputes from global
   * memory (the on-chip budget is spent, or FZ_LK_MAX_STAGED of them are
   * staged), and their bytes per row: the plan says so. */
  size_t numUnstaged;
  int64_t unstagedBytes;
} FzLkNestPlan;

/* Plans nest (the generic heuristic of docs/codegen.md "GPU mappings"):
 * rows or columns when the nest's shape allows and their shared memory
 * fits, elementwise otherwise. */
void fzLkPlanNest(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                  FzLkNestPlan *p);
/* The plan's one line (the kernel's fuse.plan), truncated to size. */
void fzLkPlanDescribe(const FzLkNest *nest, const FzLkNestPlan *p,
                      char *buf, size_t size);
/* The launch of a plan. */
void fzLkPlanLaunch(const FzLkNestPlan *p, FzLkPlan *out);
/*===--- stage.c ----------------------------------------------------------===*/

/* Plans the on-chip row of p (a planned nest; staticShared: the static
 * shared memory its kernel needs): fills p->staged, regChunks,
 * stageBytes, the unstaged counts and each inner plan's `staged`. Leaves
 * p as it is when the nest does not qualify (docs/codegen.md "Long rows
 * on chip"). */
void fzLkPlanStaging(const FzLkNest *n, FzLkNestPlan *p,
                     const FzLoopToKernelOptions *o, int64_t staticShared);
/* The staged value (an index into p->staged) that op, an op of the body
 * of staged inner loop ip, computes, or -1. */
int fzLkStagedValueOf(const FzLkNestPlan *p, const FzLkInnerPlan *ip,
                      FzOp *op);
/* The operand of access op (a loop.load or loop.store) that indexes its
 * buffer's last dim of more than one element: the last index, before
 * those of trailing unit dims (always 0: [n, c, h, w] of an N x C x 1 x
 * 1 buffer runs along c). */
size_t fzLkAccessLastIndex(FzOp *op);
/* Whether index value v is computed from the variables of nest's loops,
 * values defined outside nest and effect-free ops without regions (no
 * load, no reduction result), at most depth 32 deep: the columns mapping
 * computes such an address again for another column. */
bool fzLkIndexIsPure(FzOp *nest, FzValue *v, unsigned depth);
/* The op of reduction loop forOp that folds iteration argument i into
 * its accumulator (its yield's operand i), or NULL when there is none of
 * the kinds that combine partial results (add, mul, max, min, and, or,
 * xor). */
FzOp *fzLkReductionCombine(FzOp *forOp, size_t i);

#endif /* FZ_LOWERING_LOOP_TO_KERNEL_INTERNAL_H */

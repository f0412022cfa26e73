/* lowering/loop_to_kernel/small_m.h - the small-M contraction mapping of
 * lower-loop-to-kernel: matmul nests with few rows (M <= 16: a batch-1
 * linear layer, a decoding step) stream their weight at the memory's
 * rate on CUDA cores instead of tensor-core tiles of which one row is
 * used (docs/codegen.md "Small-M contractions on the GPU").
 *
 * A small-M nest (what lower-graph-to-loop makes of x @ W and its fused
 * epilogue, x of M rows, W of K x N or N x K):
 *
 *   loop.parallel (%d0, ..., %dn) {     one dim is n (W's), the others
 *                                       the rows (M = their product)
 *     %acc = loop.for %k = lo to hi step 1 iter_args(%s = 0.0) -> f32 {
 *       load x[...rows..., k] [extf], load W[..., k, n] or W[..., n, k]
 *       [extf], mulf, addf, yield
 *     }
 *     ... epilogue: region-free scalar ops, loads, stores
 *   }
 *
 * with lo..hi = 0..K, or the split form that small_m_split.c makes when
 * K is cut across blocks (a dim `sb` of the nest, lo = sb * KS, hi =
 * min(lo + KS, K); its epilogue stores the partial sum).
 *
 * Files: small_m_match.c recognizes the nest (fzSmallMMatch);
 * small_m.c chooses the kernel's shape (fzSmallMChoose), describes it,
 * and is the mapping (fzLkSmallMMapping); small_m_k.c builds the kernel
 * of a W contiguous along k, small_m_n.c the one of a W contiguous along
 * n, small_m_mma.c either on tensor cores (16-bit, 5 rows or more);
 * small_m_split.c cuts K across blocks (partial sums and a second nest
 * that adds them: deterministic). Private to lowering/loop_to_kernel.
 */
#ifndef FZ_LOWERING_SMALL_M_H
#define FZ_LOWERING_SMALL_M_H

#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"
#include "lowering/loop_to_kernel/matmul.h" /* FzMatmulIndex */

/* Rows kept in registers (the mapping takes M <= this). */
#define FZ_SMALL_M_MAX_ROWS 16
/* Accumulators per thread (f32 registers): M x columns. */
#define FZ_SMALL_M_MAX_ACC 64
#define FZ_SMALL_M_MAX_RANK 16
#define FZ_SMALL_M_MAX_DIMS 16
/* SMs the launch shapes aim to fill (an H100 SXM has 132) and warps
 * each: 16 of 64 resident, each with 8 16-byte loads in flight. */
#define FZ_SMALL_M_SMS FZ_LK_TARGET_SMS
#define FZ_SMALL_M_WARPS_PER_SM 16

/* One index of an operand's load (matmul.h's FzMatmulIndex): a parallel
 * dim (dim >= 0), the constant `value` (FZ_SMALL_M_CONST), or the k
 * loop's variable (FZ_SMALL_M_K). */
#define FZ_SMALL_M_K (-2)
#define FZ_SMALL_M_CONST (-1)

/* x or W as the k loop reads it. */
typedef struct FzSmallMOperand {
  FzValue *buffer; /* defined outside the nest */
  FzOp *load;      /* its loop.load in the k loop */
  FzType *elt;     /* the loaded element type (bf16, f16, f32) */
  size_t rank;
  FzMatmulIndex idx[FZ_SMALL_M_MAX_RANK];
  int64_t strides[FZ_SMALL_M_MAX_RANK]; /* elements */
  bool aligned;    /* the buffer starts 16-byte aligned */
} FzSmallMOperand;

typedef struct FzSmallMNest {
  FzOp *par;   /* the loop.parallel */
  FzOp *kloop; /* the loop.for over k */
  size_t numDims;
  int64_t extent[FZ_SMALL_M_MAX_DIMS];
  int dimN;     /* the column dim (W's parallel index) */
  int dimSplit; /* the split form's block dim, or -1 */
  int64_t M, N, K;
  int64_t sliceK; /* the split form: k per slice (KS); else K */
  FzSmallMOperand x, w;
  /* W's last index is k (W is N x K: nn.Linear's layout, transpose_b);
   * else it is n (W is K x N). */
  bool kContig;
} FzSmallMNest;

/* Recognizes par as a small-M contraction nest of any M (the caller
 * checks the size) and fills *out. False when it is not one: `why` (may
 * be NULL) has the reason, one line. Never reports errors. */
bool fzSmallMMatch(FzOp *par, FzSmallMNest *out, char *why, size_t whyLen);

/* The kernel's shape (fzSmallMChoose). */
typedef struct FzSmallMShape {
  /* Tensor cores (small_m_mma.c): a 16-bit W and x of its type, from 5
   * rows on; cols is then 8 x the mma tiles per warp, unroll the chunks
   * of 32 k per trip, vec W's elements per load. */
  bool mma;
  /* Elements of W per load along its contiguous dim (16 bytes: 8 bf16,
   * 4 f32; fewer where M x vec passes FZ_SMALL_M_MAX_ACC; 1: scalar
   * loads where the shape or alignment does not allow vectors). */
  unsigned vec;
  /* Elements of x per load along k (1: scalar). */
  unsigned xvec;
  /* kContig: W columns per warp (each lane streams them along k);
   * else 32 * vec columns per warp (vec per lane). */
  unsigned cols;
  /* kContig: chunks of vec elements per lane and loop trip; else rows of
   * W (k) per chunk. */
  unsigned unroll;
  unsigned splitWarps; /* warps of a block sharing one column group's k */
  unsigned warps;      /* warps per block */
  int64_t splitBlocks; /* blocks sharing one column group's k (grid.y) */
  int64_t sliceK;      /* k per block slice (K when splitBlocks is 1) */
  int64_t groups;      /* column groups (a warp, or splitWarps warps) */
  int64_t blocks;      /* grid.x */
  int64_t sharedBytes; /* static shared memory of the reduction */
  bool stream;         /* W's vector loads are `stream` (not kept in L1) */
  /* kernel.min_blocks_per_sm of the kernel (a register cap), 0: none. */
  int64_t minBlocksPerSm;
} FzSmallMShape;

/* Whether the mapping takes nest m (M within its limits, options) and
 * its shape: chosen by size, numbers of o->smallMShape (else
 * $FZ_GPU_SMALL_M_SHAPE) "cols=C,unroll=U,warps=S,blocks=B,mma=0|1,
 * stream=0|1,cap=0|1" forced. For a nest not in split form, splitBlocks may exceed 1: the nest is then
 * split first (fzSmallMSplit). False with the reason; *bad when it is a
 * bad shape text (an error, not a refusal). */
bool fzSmallMChoose(const FzSmallMNest *m, const FzLoopToKernelOptions *o,
                    FzSmallMShape *s, bool *bad, char *why, size_t whyLen);

/* The one-line plan (the kernel's fuse.plan). */
void fzSmallMDescribe(const FzSmallMNest *m, const FzSmallMShape *s,
                      char *buf, size_t n);

/* Builds the kernel body (small_m_k.c: kContig; small_m_n.c: the other
 * layout; small_m_mma.c: s->mma) at kb's insertion point. False after an
 * error (kb->failed). */
bool fzSmallMBuildK(FzLkBuild *kb, const FzSmallMNest *m,
                    const FzSmallMShape *s);
bool fzSmallMBuildN(FzLkBuild *kb, const FzSmallMNest *m,
                    const FzSmallMShape *s);
bool fzSmallMBuildMma(FzLkBuild *kb, const FzSmallMNest *m,
                      const FzSmallMShape *s);

/* Shared by both builders (small_m.c). */
typedef struct FzSmallMGen {
  FzLkBuild *kb;
  const FzSmallMNest *m;
  const FzSmallMShape *s;
  FzType *f32, *idx;
  FzValue *tid, *lane, *warp;
  /* The warp's column group (block_id.x * (warps / S) + warp / S), its
   * rank in the block (warp / S) and its share of k (warp % S). */
  FzValue *group, *gIdx, *sIdx;
  /* Some warp's columns pass N (loads clamped, stores skipped). */
  bool ragged;
  FzValue *sb;        /* the block's k slice (block_id.y), index */
  FzValue *kLo, *kHi; /* its bounds */
} FzSmallMGen;

/* Sets up g: types, thread/lane/warp ids, the slice and its bounds. */
bool fzSmallMGenInit(FzSmallMGen *g, FzLkBuild *kb, const FzSmallMNest *m,
                     const FzSmallMShape *s);
/* The value of x at row m (static) and k (+ u for u < n) as f32, n
 * consecutive elements into out (vector loads of s->xvec where the
 * shape allows). */
bool fzSmallMLoadX(FzSmallMGen *g, int64_t row, FzValue *k, unsigned n,
                   FzValue **out);
/* W's n consecutive elements along its contiguous dim from (a, b):
 * kContig: a = n, b = k; else a = k, b = n; as raw values (vector loads
 * of s->vec when vectorized), then converted to f32 into out. */
bool fzSmallMLoadW(FzSmallMGen *g, FzValue *a, FzValue *b, unsigned n,
                   FzValue **out);
/* x's `lanes` elements at output row `row` (index value) and k (+ 0 ..
 * lanes - 1), W's at (a, b .. b + lanes - 1): one kernel.vector_load of
 * the operand's element type (lanes > 1), as loaded. */
FzValue *fzSmallMLoadXVector(FzSmallMGen *g, FzValue *row, FzValue *k,
                             unsigned lanes);
FzValue *fzSmallMLoadWVector(FzSmallMGen *g, FzValue *a, FzValue *b,
                             unsigned lanes);
/* Lane `lane` of vector vec (kernel.extract). */
FzValue *fzSmallMExtract(FzLkBuild *kb, FzValue *vec, unsigned lane);
/* a && b (i1; a NULL operand is true). */
FzValue *fzSmallMAnd(FzLkBuild *kb, FzValue *a, FzValue *b);

/* The body of a chunk loop: `n` chunks from chunk c (c, c + stride,
 * ...), the accumulators acc[] updated in place. */
typedef bool (*FzSmallMTrip)(void *ud, FzValue *c, unsigned n);
/* The loops over a thread's chunks start, start + stride, ... < end:
 * `unroll` per trip, then one per trip for the rest; acc[0..numAcc)
 * carried (replaced by the loops' results). */
bool fzSmallMChunkLoops(FzSmallMGen *g, FzValue *start, FzValue *end,
                        int64_t stride, unsigned unroll, size_t numAcc,
                        FzValue **acc, FzSmallMTrip trip, void *ud);
/* Each lane's vals[0..nv) into shared memory [warps][nv][32] and a
 * barrier; returns the array. */
FzValue *fzSmallMShareVals(FzSmallMGen *g, FzValue *const *vals, unsigned nv);
/* The sum of value v (index) of this lane over the S warps of its group
 * in warp order, from fzSmallMShareVals's array. */
FzValue *fzSmallMSumVal(FzSmallMGen *g, FzValue *red, unsigned nv,
                        FzValue *v);
/* The epilogue of output (row, col) with the sum acc: the nest's body
 * but for the k loop, cloned with the row's dims from `row` (index,
 * < M), n = col, the split dim = g->sb, the k loop's result = acc;
 * inside `if (cond)` (NULL: always). */
bool fzSmallMEpilogue(FzSmallMGen *g, FzValue *row, FzValue *col,
                      FzValue *acc, FzValue *cond);

/* The mapping (first of lower-loop-to-kernel's list). */
extern const FzLkMapping fzLkSmallMMapping;

/* When nest par (a top-level loop.parallel of func) is a small-M nest
 * whose columns cannot fill the GPU alone, replaces it by a nest of
 * partial sums over k slices into a new temporary (`*par` becomes it)
 * followed by a nest that adds them and applies the epilogue (the next
 * op). Otherwise leaves it. False after an error (reported). */
bool fzSmallMSplit(FzOp *func, FzOp **par, const FzLoopToKernelOptions *o);

#endif /* FZ_LOWERING_SMALL_M_H */

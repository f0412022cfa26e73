/* lowering/loop_to_kernel/matmul_internal.h - what the files of the
 * tensor-core matmul generator share (private to them):
 *  - KB, a builder of kernel IR at an insertion point, whose index
 *    arithmetic folds constants as it is built and whose constants live
 *    at the start of the kernel's entry block (matmul_kb.c);
 *  - Gen, the state of one kernel body being built: the nest, the tile,
 *    the ids and per-thread offsets every part uses (matmul.c builds the
 *    setup, tile loads and k loop; matmul_epilogue.c the epilogue).
 * Builders return NULL after a failure and set KB.failed; every builder
 * accepts NULL operands (and then fails), so a sequence of calls needs
 * one check at its end.
 */
#ifndef FZ_LOWERING_MATMUL_INTERNAL_H
#define FZ_LOWERING_MATMUL_INTERNAL_H

#include "lowering/loop_to_kernel/matmul.h"

#define MAX_CONSTS 512
/* m16n8 accumulator tiles per thread (4 f32 registers each: 64 of them
 * fill the 255 registers a thread may have; their 2 * 64 vector pairs
 * and the stage fit loop.for's 256 iteration arguments). */
#define MAX_ACC 64
#define MAX_CHUNKS 64 /* 16-byte copies per thread per operand and stage */

/* A builder of kernel IR (matmul_kb.c). */
typedef struct KB {
  FzContext *ctx;
  FzLoc *loc;
  FzBuilder b;        /* where ops go */
  FzOp *lastConst;    /* constants go after it, in the entry block */
  bool failed;
  FzType *idx, *i32, *i1, *f32, *elt, *vreg, *vacc;
  /* The integer constants made so far (index or i32). */
  int64_t cval[MAX_CONSTS];
  FzType *ctype[MAX_CONSTS];
  FzValue *cidx[MAX_CONSTS];
  size_t numConsts;
} KB;

/* One operand's shared tile and this thread's copies into it. */
typedef struct Tile {
  const FzMatmulOperand *x;
  FzValue *buf;          /* the kernel argument (a conv's weights: its
                            [OC, K] matrix view) */
  size_t rank;           /* indices of buf */
  int rows, cols;        /* of the shared tile */
  int64_t stageElems;    /* rows * cols */
  int64_t base;          /* element offset of stage 0 */
  int64_t mnExtent;      /* M or N */
  int tileMN;            /* BM or BN */
  int perThread;         /* chunks per thread and stage */
  bool async;
  int copy;              /* elements per cp.async copy (8, 4 or 2) */
  /* Per chunk: shared offset in a stage; the row and column of the tile. */
  FzValue *dst[MAX_CHUNKS], *row[MAX_CHUNKS], *col[MAX_CHUNKS];
  /* The mn half of the global indices (clamped) and its validity (NULL:
   * always valid). */
  FzValue *mnIdx[MAX_CHUNKS], *mnOk[MAX_CHUNKS];
  FzValue *kOff[MAX_CHUNKS];  /* offset of the chunk along k in the tile */
  /* A conv's input (A, i32): per chunk, the flat offset of the row's
   * window corner (n, 0, ih0, iw0) and ih0 = oh*sh - padH, iw0 = ow*sw -
   * padW (matmul_conv_gen.c). */
  FzValue *cvN[MAX_CHUNKS], *cvH[MAX_CHUNKS], *cvW[MAX_CHUNKS];
} Tile;

/* One kernel being built. */
typedef struct Gen {
  KB K;
  const FzMatmulNest *m;
  const FzMatmulTile *t;
  FzValue *smem;
  FzValue *capMap[FZ_MATMUL_MAX_CAPTURES]; /* capture -> kernel value */
  FzValue *batchIv[FZ_MATMUL_MAX_DIMS];    /* per parallel dim (batch) */
  /* Thread id, lane, warp row and column, lane / 4, lane % 4, the
   * tile's first row and column. */
  FzValue *tid, *lane, *wm, *wn, *g, *tq, *m0, *n0;
  /* Threads, warp tile, its m16 and n8 tiles, stages, k steps of BK. */
  int threads, WM, WN, MT, NT, S, KT;
  /* The pipeline's distance: tiles kt + 1 .. kt + ahead are in flight
   * while tile kt is computed (S - 1; the wgmma kernel's S - 2 keeps
   * one group of its mma ops in flight, whose stage is not refilled). */
  int ahead;
  bool async; /* the cp.async pipeline (else scalar tile loads) */
  Tile A, B;
  /* Per k16 step and fragment: the lane's offset in a stage; NULL where
   * the address is fragment [0][0]'s xor and plus constants. */
  FzValue *fragA[8][64], *fragB[8][64];
  /* tf32 (f32 operands, m16n8k8): per k8 step, m16 (A) or n8 (B) tile
   * and register, the lane's offset in a stage, NULL where it is
   * (register 0 of tile 0 of step 0) ^ X + Y. */
  bool tf32;
  bool tf32Pairs; /* both operands k-contiguous: k pairs per 8-byte load */
  FzValue *tfA[16][16][4], *tfB[16][64][2];
  FzValue *zeroElt; /* 0 of the element type (scalar path) */
  /* Rows between the accumulators of m-block mi and mi + 1 of a thread
   * (0: 16, the m16 tiles of mma.sync; wgmma: 64). */
  int miStride;
  /* The k range of the block: [kLo, kEnd) of a split nest's slice
   * (block_id.y; index and i32), else kLo NULL (from 0) and kEnd NULL
   * (K). kMask: the tiles of the range overhang it (K % BK, a slice
   * not a multiple of BK, the last slice past K): k is checked. */
  FzValue *kLo, *kEnd, *kLo32, *kEnd32;
  bool kMask;
} Gen;

/*===--- matmul.c: what the mma.sync and wgmma generators share --------===*/

/* Starts the kernel body of nest m with tile t at `at` (caps: the
 * kernel's values of m->captures): G's types, sizes, the dynamic shared
 * buffer (aligned to smemAlign bytes when above 16). NULL after
 * reporting an error. mmGenEnd moves `at` past what was built, frees G
 * and reports a failure of the builders. */
Gen *mmGenBegin(const FzMatmulNest *m, const FzMatmulTile *t, FzBuilder *at,
                FzValue *const *caps, int64_t smemAlign);
bool mmGenEnd(Gen *G, FzBuilder *at);
/* Tile (pid_m, pid_n) in grouped order, batch ivs, warp and lane ids. */
void mmSetupIds(Gen *G);
/* Operand x's tile T (A when isA) at element `base` of shared memory:
 * this thread's 16-byte chunks (T->row/col/dst, mmSwizzle's layout) and
 * the invariant half of their global indices. */
void mmSetupTile(Gen *G, Tile *T, const FzMatmulOperand *x, bool isA,
                 int64_t base);
/* The k loop of nacc accumulator pairs (zeros): the cp.async prologue
 * (tiles 0 .. ahead-1, a commit each), the loop.for over the k tiles (its
 * iv *kt, iter_args iters; the builder inside it, the previous one in
 * *saved), the stage it reads (*stage, i32) and, when S is not a power
 * of two, the carried next one (*next; NULL otherwise). NULL on
 * failure. mmRefillStage: the stage of tile kt + ahead (read in
 * iteration kt + ahead - S), NULL when no tile is ever refilled.
 * mmPipelineClose yields iters (and *next) and sets acc to the loop's
 * accumulator results. */
FzOp *mmPipelineOpen(Gen *G, size_t nacc, FzValue **kt, FzValue **iters,
                     FzBuilder *saved, FzValue **stage, FzValue **next);
FzValue *mmRefillStage(Gen *G, FzValue *kt, FzValue *stage, FzValue *next);
void mmPipelineClose(Gen *G, FzOp *loop, size_t nacc, FzValue **iters,
                     FzValue *next, const FzBuilder *saved, FzValue **acc);
/* Issues this thread's cp.async copies of k-tile kt into stage `stage`
 * (i32) at T->dst (zero-filled past the matrix). */
void mmLoadTileAsync(Gen *G, Tile *T, FzValue *kt, FzValue *stage);

/*===--- matmul_match.c: what the matmul and conv matchers share -------===*/

/* The epilogue of m (par, kloop, a and b set): captures (a's and b's
 * buffers first), the stores, the loads of written buffers, pairStores.
 * False with the reason. */
bool mmMatchEpilogue(FzMatmulNest *m, char *why, size_t whyLen);
/* Whether buffer value v starts at a multiple of `bytes` from its
 * allocation (arguments and allocations do; views by their offset). */
bool mmAlignedBase(FzValue *v, int64_t bytes);

/* The widest cp.async copy (16, 8 or 4 bytes, at least eb; 0: none)
 * that n elements of eb bytes are whole copies of. */
static inline int mmCopyBytesOf(int64_t n, int64_t eb) {
  for (int b = 16; b >= 4 && b >= eb; b /= 2)
    if (eb > 0 && (n * eb) % b == 0)
      return b;
  return 0;
}
/* cb (a copy width of mmCopyBytesOf) halved until buf's start is aligned
 * to it (0: not even 4 bytes, or below the element size eb). */
int mmAlignedCopyBytes(FzValue *buf, int cb, int64_t eb);
/* The bytes of one cp.async copy of operand x (16 unless the matcher
 * chose narrower copies). */
static inline int mmCopyBytes(const FzMatmulOperand *x) {
  return x->copyBytes ? x->copyBytes : 16;
}
/* The element strides of a buffer type (identity layout computed). */
void mmStridesOf(FzType *t, int64_t *st);
/* A static-shaped global buffer defined outside the nest par. */
bool mmPlainBuffer(FzValue *v, FzOp *par);
/* Ops a fused epilogue may hold (also the small-M mapping's): the loop
 * dialect's region-free scalar ops, loads and stores. */
bool mmEpilogueOpOk(FzOp *op);
/* Whether load reads the element store writes (the same indices). */
bool mmSameIndices(FzOp *load, FzOp *store);
/* The extents of loop.parallel par (bounds 0..extent step 1, constants)
 * into extent[]; false with the reason. */
bool mmNestExtents(FzOp *par, int64_t *extent, char *why, size_t whyLen);
/* The one loop.for of par's body; NULL with the reason (none, or
 * several). */
FzOp *mmOnlyLoop(FzOp *par, char *why, size_t whyLen);
/* The mulf that k loop kl (one accumulator) adds to its accumulator:
 * its body yields addf(acc, mulf(...)); NULL with the reason. */
FzOp *mmKLoopProduct(FzOp *kl, char *why, size_t whyLen);

/*===--- matmul_kb.c: building kernel IR -------------------------------===*/

/* Creates st's op at the insertion point; its result #result (NULL when
 * it has none or on failure). */
FzValue *mmCreate(KB *K, FzOpState *st, size_t result);
/* An index constant, an integer constant of type t (index or i32), both
 * cached, and a constant of any type from attribute a, all at the start
 * of the entry block. */
FzValue *mmConst(KB *K, int64_t v);
FzValue *mmConstOf(KB *K, FzType *t, int64_t v);
FzValue *mmConstAttr(KB *K, FzAttr *a, FzType *t);
/* Op `name` with operands ops, result type rt (NULL: none) and an
 * optional cmp predicate. */
FzValue *mmOp(KB *K, const char *name, size_t n, FzValue *const *ops,
              FzType *rt, const char *pred);
/* Whether v is an integer constant (its value to *c). */
bool mmIsConst(FzValue *v, int64_t *c);
/* Integer arithmetic in the type of its operands (index, or i32 for
 * shared-memory offsets), folded when the operands are constants: a + b,
 * a + c, a * c, a / c and a % c (a >= 0, c > 0; shifts and masks for
 * powers of two), min(a, c), a ^ b, a ^ c. */
FzValue *mmAdd(KB *K, FzValue *a, FzValue *b);
FzValue *mmAddC(KB *K, FzValue *a, int64_t c);
FzValue *mmMul(KB *K, FzValue *a, int64_t c);
FzValue *mmDivC(KB *K, FzValue *a, int64_t c);
FzValue *mmRemC(KB *K, FzValue *a, int64_t c);
FzValue *mmMinC(KB *K, FzValue *a, int64_t c);
FzValue *mmXor(KB *K, FzValue *a, FzValue *b);
FzValue *mmXorC(KB *K, FzValue *a, int64_t c);
/* loop.index_cast of v to type t (v itself when it has that type). */
FzValue *mmCast(KB *K, FzValue *v, FzType *t);
/* a < c as an i1 guard; NULL when always true (a constant below c).
 * mmAnd of guards treats NULL as true. mmUltC: 0 <= a < c (unsigned). */
FzValue *mmLtC(KB *K, FzValue *a, int64_t c);
/* a < b (signed) as an i1. */
FzValue *mmLt(KB *K, FzValue *a, FzValue *b);
FzValue *mmUltC(KB *K, FzValue *a, int64_t c);
/* a clamped into [lo, hi] (signed). */
FzValue *mmClampC(KB *K, FzValue *a, int64_t lo, int64_t hi);
FzValue *mmAnd(KB *K, FzValue *a, FzValue *b);
FzValue *mmSelect(KB *K, FzValue *c, FzValue *a, FzValue *b);
/* kernel.thread_id / block_id / ... (dim "x", "y", "z" or NULL). */
FzValue *mmId(KB *K, const char *name, const char *dim);
/* An op without operands and results (barrier, cp_async_commit, ...). */
void mmPlainOp(KB *K, const char *name);
/* `loop.for %iv = lb to ub step 1 iter_args(inits)` (n <= 2 MAX_ACC + 1)
 * with an empty body; the builder moves into it (the previous one saved
 * in *saved) until mmForClose appends loop.yield(yields) and restores
 * it. */
FzOp *mmForOpen(KB *K, FzValue *lb, FzValue *ub, size_t n,
                FzValue *const *inits, FzValue **iv, FzValue **iters,
                FzBuilder *saved);
void mmForClose(KB *K, FzOp *loop, size_t n, FzValue *const *yields,
                const FzBuilder *saved);
/* `if (cond)` as a loop.for of 0 or 1 iterations; cond NULL: no guard
 * (returns NULL and the builder stays). */
FzOp *mmIfOpen(KB *K, FzValue *cond, FzBuilder *saved);
void mmIfClose(KB *K, FzOp *loop, const FzBuilder *saved);
/* The swizzled element offset of (row, col) in a shared tile of `cols`
 * columns (col a multiple of 8): matmul.c's opening comment. */
FzValue *mmSwizzle(KB *K, FzValue *row, FzValue *col, int cols);

/*===--- matmul_conv_gen.c: a conv2d's implicit GEMM ------------------===*/

/* The weights w[OC, C, KH, KW] as the matrix [OC, K] (a loop.view of the
 * kernel's argument; the matcher checked (c, kh, kw) contiguous), and
 * the input as a flat buffer of N*C*H*W elements. */
FzValue *mmConvWeightMatrix(Gen *G, FzValue *w);
FzValue *mmConvInputFlat(Gen *G, FzValue *x);
/* A pointwise conv's input as images [N, C, OH*OW] (its B). */
FzValue *mmConvImages(Gen *G, FzValue *x);
/* Tile T's (A's) cvN, cvH, cvW of chunk p from its row T->mnIdx[p]. */
void mmConvSetupRow(Gen *G, Tile *T, int p);
/* This thread's 8 elements per chunk of A's tile kt gathered from the
 * input (0 outside it and outside the GEMM) into vals[p * 8 + e]. */
void mmConvGather(Gen *G, Tile *T, FzValue *kt, FzValue **vals);
/* The flat input offset (index) of element e of A's chunk p at k-tile kt
 * (an NHWC kHwc conv's cp.async copy) and its validity (NULL: valid;
 * the offset is 0 where it is false). */
void mmConvChunk(Gen *G, Tile *T, int p, FzValue *kt, int e, FzValue **off,
                 FzValue **ok);

/*===--- matmul_epilogue.c ----------------------------------------------===*/

/* The nest's epilogue and stores for every accumulator pair of this
 * thread (acc: the k loop's results). */
void mmEpilogue(Gen *G, FzValue *const *acc);

#endif /* FZ_LOWERING_MATMUL_INTERNAL_H */

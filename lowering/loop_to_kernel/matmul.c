/* lowering/loop_to_kernel/matmul.c - fzKernelBuildMatmul: the kernel.func
 * of a tensor-core GEMM with its epilogue, and the kernel.launch that
 * replaces the matched nest (matmul.h gives the design; docs/codegen.md
 * "Tensor-core matmul" the details and the numbers). This file builds
 * the setup, the tile loads and the k loop; matmul_epilogue.c the rest,
 * with matmul_kb.c's builders.
 *
 * Kernel structure (T = 32 * warps threads, S stages, KT = ceil(K / BK);
 * a split nest's slice, block_id.y, takes KT = ceil(KS / BK) tiles from
 * k = slice * KS: FzMatmulNest.splitK):
 *
 *   setup: tile (pid_m, pid_n) from block_id.x in grouped order, batch
 *          indices from block_id.z, warp (wm, wn), lane (g, t);
 *          per thread: its 16-byte chunks of the A and B tiles (shared
 *          offsets, swizzled; the invariant half of the global indices,
 *          clamped, with their validity); per lane: the ldmatrix offsets
 *          within a stage;
 *   prologue: tiles 0 .. S-2 into stages 0 .. S-2, one commit each;
 *   loop kt (accumulators in iter_args):
 *          cp_async_wait S-2; barrier;
 *          tile kt+S-1 into stage (kt+S-1) % S if it exists; commit;
 *          for each k16 step of stage kt % S: ldmatrix the A and B
 *          fragments of the warp tile, MT x NT mma;
 *   epilogue: per accumulator pair (row, col), guarded where the tile
 *          overhangs the matrix: the nest's epilogue cloned for both
 *          elements, the stores as one vector store of the pair (or as
 *          scalar stores).
 * The scalar-load path (operands that cannot use 16-byte copies) has one
 * stage: barrier, scalar loads and shared stores, barrier, compute.
 *
 * Shared layout: stage s of A at s * BM * BK elements, of B after all of
 * A's stages. A tile is `rows` x `cols` elements (A: BM x BK when A is
 * k-contiguous, else BK x BM; B: BN x BK or BK x BN); element (r, c) is
 * at r * cols + ((c / 8) ^ f(r)) * 8 + c % 8 with f(r) = r % 8 for rows
 * of 8 or more chunks, else (r / (8 / C)) % C for C chunks per row: the
 * 8 rows an ldmatrix phase reads fall in 8 different 16-byte bank groups.
 *
 * Index arithmetic folds constants as it is built (the folds of the loop
 * dialect), so static parts of addresses cost nothing. Constants live at
 * the start of the kernel's entry block.
 */
#include <stdio.h>
#include <string.h>

#include "ir/util.h"
#include "lowering/loop_to_kernel/matmul_internal.h"

/* The kernel value standing for capture v. */
static FzValue *cap(Gen *G, FzValue *v) {
  for (size_t i = 0; i < G->m->numCaptures; ++i)
    if (G->m->captures[i] == v)
      return G->capMap[i];
  G->K.failed = true;
  return NULL;
}

/* The value of one batch index of an operand. */
static FzValue *batch_index(Gen *G, FzMatmulIndex ix) {
  return ix.dim >= 0 ? G->batchIv[ix.dim] : mmConst(&G->K, ix.value);
}

/*===--- Setup ----------------------------------------------------------===*/

void mmSetupTile(Gen *G, Tile *T, const FzMatmulOperand *x, bool isA,
                 int64_t base) {
  KB *K = &G->K;
  const FzMatmulTile *t = G->t;
  T->x = x;
  T->buf = cap(G, x->buffer);
  T->rank = x->rank;
  const FzMatmulConv *cv = &G->m->conv;
  bool gather = cv->on && !cv->pointwise && isA;
  if (cv->on && cv->pointwise) {
    T->buf = isA ? mmConvWeightMatrix(G, T->buf) : mmConvImages(G, T->buf);
    T->rank = isA ? 2 : 3;
  } else if (cv->on) {
    T->buf = isA ? mmConvInputFlat(G, T->buf) : mmConvWeightMatrix(G, T->buf);
    T->rank = isA ? 1 : 2;
  }
  T->tileMN = isA ? t->bm : t->bn;
  T->mnExtent = isA ? G->m->M : G->m->N;
  T->rows = x->kLast ? T->tileMN : t->bk;
  T->cols = x->kLast ? t->bk : T->tileMN;
  T->stageElems = (int64_t)T->rows * T->cols;
  T->base = base;
  T->async = G->async && x->asyncCopies;
  T->copy = mmCopyBytes(x) / (G->tf32 ? 4 : 2);
  int chunks = T->rows * T->cols / 8;
  T->perThread = chunks / G->threads;
  FzValue *mn0 = isA ? G->m0 : G->n0;
  int C = T->cols / 8;
  for (int p = 0; p < T->perThread; ++p) {
    FzValue *c = mmAddC(K, G->tid, (int64_t)p * G->threads);
    FzValue *r = mmDivC(K, c, C);
    /* A conv's gather shares its k arithmetic among the chunks of equal
     * k offsets: (tid + p T) % C is tid % C when C divides T. */
    bool sameK = gather && G->threads % C == 0;
    FzValue *cc = mmMul(K, mmRemC(K, sameK ? G->tid : c, C), 8);
    T->row[p] = r;
    T->col[p] = cc;
    /* Shared-memory offsets are i32 (the loop's address arithmetic
     * stays 32-bit, as the 32-bit shared pointers it ends in). */
    T->dst[p] = mmCast(K, mmSwizzle(K, r, cc, T->cols), K->i32);
    /* The mn coordinate: rows of a k-contiguous tile, else columns. */
    FzValue *mnOff = x->kLast ? r : cc;
    FzValue *mn = mmAdd(K, mn0, mnOff);
    bool ragged = T->mnExtent % T->tileMN != 0;
    T->mnOk[p] = ragged ? mmLtC(K, mn, T->mnExtent) : NULL;
    /* Clamped so that the address stays valid where nothing is read
     * (a whole copy inside the row). */
    int64_t hi = x->kLast ? T->mnExtent - 1 : T->mnExtent - T->copy;
    if (!x->kLast && !T->async)
      hi = T->mnExtent - 1;
    T->mnIdx[p] = ragged ? mmMinC(K, mn, hi < 0 ? 0 : hi) : mn;
    T->kOff[p] = x->kLast ? cc : r;
    if (gather)
      mmConvSetupRow(G, T, p);
  }
}

void mmSetupIds(Gen *G) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  const FzMatmulTile *t = G->t;
  int64_t tilesM = (m->M + t->bm - 1) / t->bm;
  int64_t tilesN = (m->N + t->bn - 1) / t->bn;
  FzValue *pid = mmId(K, "kernel.block_id", "x");
  /* Triton's grouped order: groupM rows of tiles walk the columns
   * together, so the B tiles they share stay in L2. */
  int64_t inGroup = t->groupM * tilesN;
  FzValue *group = mmDivC(K, pid, inGroup);
  FzValue *first = mmMul(K, group, t->groupM);
  FzValue *rest = mmRemC(K, pid, inGroup);
  FzValue *size;
  if (tilesM % t->groupM == 0) {
    size = mmConst(K, t->groupM);
  } else {
    FzValue *left = mmAdd(K, mmConst(K, tilesM), mmMul(K, first, -1));
    size = mmMinC(K, left, t->groupM);
  }
  FzValue *pidM, *pidN;
  int64_t sc;
  if (mmIsConst(size, &sc)) {
    pidM = mmAdd(K, first, mmRemC(K, rest, sc));
    pidN = mmDivC(K, rest, sc);
  } else {
    FzValue *o1[2] = {rest, size};
    pidM = mmAdd(K, first, mmOp(K, "loop.remsi", 2, o1, K->idx, NULL));
    pidN = mmOp(K, "loop.divsi", 2, o1, K->idx, NULL);
  }
  G->m0 = mmMul(K, pidM, t->bm);
  G->n0 = mmMul(K, pidN, t->bn);
  /* Batch dims: block_id.z, row-major over their extents. */
  FzValue *bz = mmId(K, "kernel.block_id", "z");
  int64_t inner = 1;
  if (m->conv.pointwise)
    G->batchIv[0] = bz; /* grid.z is the batch */
  for (size_t d = m->conv.on ? 0 : m->numDims; d-- > 0;) {
    if ((int)d == m->dimI || (int)d == m->dimJ ||
        (m->splitK && (int)d == m->dimSplit))
      continue;
    G->batchIv[d] = mmRemC(K, mmDivC(K, bz, inner), m->extent[d]);
    inner *= m->extent[d];
  }
  /* A split nest: its slice is block_id.y, its k range [kLo, kEnd). */
  G->kMask = m->K % t->bk != 0;
  if (m->splitK) {
    FzValue *sb = mmId(K, "kernel.block_id", "y");
    G->batchIv[m->dimSplit] = sb;
    G->kLo = mmMul(K, sb, m->sliceK);
    G->kLo32 = mmCast(K, G->kLo, K->i32);
    G->kMask = m->splitK * m->sliceK != m->K;
    if (m->sliceK % t->bk != 0) {
      G->kEnd = mmMinC(K, mmAddC(K, G->kLo, m->sliceK), m->K);
      G->kEnd32 = mmCast(K, G->kEnd, K->i32);
      G->kMask = true;
    }
  }
  G->tid = mmId(K, "kernel.thread_id", "x");
  G->lane = mmId(K, "kernel.lane_id", NULL);
  FzValue *warp = mmDivC(K, G->tid, 32);
  G->wm = mmDivC(K, warp, t->warpsN);
  G->wn = mmRemC(K, warp, t->warpsN);
  G->g = mmDivC(K, G->lane, 4);
  G->tq = mmRemC(K, G->lane, 4);
}

/* The ldmatrix offset of lane l within a stage (elements) for k16 step ks
 * and the idx-th 16 rows of A (mi) or 16 columns of B (nj), with w the
 * warp's row (A) or column (B) in the warp grid. Lane l addresses row
 * l % 8 of matrix q = l / 8:
 *   A[m][k] (x4):       m = w WM + 16 idx + l % 16,      k = 16 ks + 8 (q / 2)
 *   A[k][m] (x4 trans): k = 16 ks + 8 (q / 2) + l % 8,   m = w WM + 16 idx + 8 (q % 2)
 *   B[n][k] (x4):       n = w WN + 16 idx + 8 (q / 2) + l % 8, k = 16 ks + 8 (q % 2)
 *   B[k][n] (x4 trans): k = 16 ks + 8 (q % 2) + l % 8,   n = w WN + 16 idx + 8 (q / 2)
 * (matrices 0..3 are a0..a3 of the mma, or b0, b1 of two n8 tiles).
 * frag_rc computes (row, col) of the shared tile in C; frag_off_ir builds
 * the same in IR from the lane and warp ids. */
static void frag_rc(const Gen *G, bool isA, int ks, int idx, int l, int w,
                    int *row, int *col) {
  int q = l / 8, r = l % 8;
  if (isA && G->m->a.kLast) {
    *row = w * G->WM + 16 * idx + l % 16;
    *col = 16 * ks + 8 * (q / 2);
  } else if (isA) {
    *row = 16 * ks + 8 * (q / 2) + r;
    *col = w * G->WM + 16 * idx + 8 * (q % 2);
  } else if (G->m->b.kLast) {
    *row = w * G->WN + 16 * idx + 8 * (q / 2) + r;
    *col = 16 * ks + 8 * (q % 2);
  } else {
    *row = 16 * ks + 8 * (q % 2) + r;
    *col = w * G->WN + 16 * idx + 8 * (q / 2);
  }
}

static int64_t swz_c(int row, int col, int cols) {
  int C = cols / 8;
  int f = C >= 8 ? row % 8 : (row / (8 / C)) % C;
  return (int64_t)row * cols + (int64_t)(((col / 8) ^ f) * 8);
}

static int64_t frag_off_c(const Gen *G, bool isA, int ks, int idx, int l,
                          int w) {
  int row, col;
  frag_rc(G, isA, ks, idx, l, w, &row, &col);
  return swz_c(row, col, isA ? G->A.cols : G->B.cols);
}

static FzValue *frag_off_ir(Gen *G, bool isA, int ks, int idx) {
  KB *K = &G->K;
  FzValue *q = mmDivC(K, G->lane, 8), *r = mmRemC(K, G->lane, 8);
  FzValue *qLo = mmRemC(K, q, 2), *qHi = mmDivC(K, q, 2);
  FzValue *row, *col;
  if (isA) {
    FzValue *mBase = mmAddC(K, mmMul(K, G->wm, G->WM), 16 * idx);
    if (G->m->a.kLast) {
      row = mmAdd(K, mBase, mmRemC(K, G->lane, 16));
      col = mmAddC(K, mmMul(K, qHi, 8), 16 * ks);
    } else {
      row = mmAdd(K, mmAddC(K, mmMul(K, qHi, 8), 16 * ks), r);
      col = mmAdd(K, mBase, mmMul(K, qLo, 8));
    }
    return mmSwizzle(K, row, col, G->A.cols);
  }
  FzValue *nBase = mmAddC(K, mmMul(K, G->wn, G->WN), 16 * idx);
  if (G->m->b.kLast) {
    row = mmAdd(K, mmAdd(K, nBase, mmMul(K, qHi, 8)), r);
    col = mmAddC(K, mmMul(K, qLo, 8), 16 * ks);
  } else {
    row = mmAdd(K, mmAddC(K, mmMul(K, qLo, 8), 16 * ks), r);
    col = mmAdd(K, nBase, mmMul(K, qHi, 8));
  }
  return mmSwizzle(K, row, col, G->B.cols);
}

/* Looks for constants X, Y with offset(ks, idx) = (offset(0, 0) ^ X) + Y
 * for every lane and warp, also after adding any stage's base first:
 * then the loop addresses a fragment as ((stage base + one precomputed
 * lane offset) ^ X) + Y, an xor and an immediate, instead of keeping one
 * register per fragment live across the loop (the swizzle makes k steps
 * and 16-row blocks differ by an xor of the chunk bits and a multiple of
 * the row length; checked exhaustively, not assumed). */
static bool frag_decompose(const Gen *G, bool isA, int ks, int idx,
                           int64_t *x, int64_t *y) {
  const Tile *T = isA ? &G->A : &G->B;
  int warps = isA ? G->t->warpsM : G->t->warpsN;
  int64_t o0 = frag_off_c(G, isA, 0, 0, 0, 0), ok = frag_off_c(G, isA, ks,
                                                               idx, 0, 0);
  *y = (ok / T->cols - o0 / T->cols) * T->cols;
  *x = (ok - *y) ^ o0;
  for (int w = 0; w < warps; ++w)
    for (int l = 0; l < 32; ++l) {
      int64_t a = frag_off_c(G, isA, 0, 0, l, w);
      int64_t b = frag_off_c(G, isA, ks, idx, l, w);
      for (int s = 0; s < G->S; ++s) {
        int64_t sb = T->base + s * T->stageElems;
        if (((sb + a) ^ *x) + *y != sb + b)
          return false;
      }
    }
  return true;
}

/* Per operand: the lane's offset of fragment (0, 0), and for the
 * fragments frag_decompose cannot express, their own offsets. */
static void setup_fragments(Gen *G) {
  KB *K = &G->K;
  for (int isA = 1; isA >= 0; --isA) {
    int n = isA ? G->MT : G->NT / 2;
    FzValue *(*frag)[64] = isA ? G->fragA : G->fragB;
    FzValue *base = mmCast(K, frag_off_ir(G, isA, 0, 0), K->i32);
    for (int ks = 0; ks < G->t->bk / 16; ++ks)
      for (int i = 0; i < n; ++i) {
        int64_t x, y;
        frag[ks][i] = ks == 0 && i == 0 ? base
                      : frag_decompose(G, isA, ks, i, &x, &y)
                          ? NULL
                          : mmCast(K, frag_off_ir(G, isA, ks, i), K->i32);
      }
  }
}

/* The shared-memory index (i32) of a fragment's lane address in stage
 * base sbase (elements, i32). */
static FzValue *frag_addr(Gen *G, bool isA, int ks, int idx, FzValue *sbase) {
  KB *K = &G->K;
  FzValue *(*frag)[64] = isA ? G->fragA : G->fragB;
  int64_t x, y;
  if (frag[ks][idx])
    return mmAdd(K, sbase, frag[ks][idx]);
  if (!frag_decompose(G, isA, ks, idx, &x, &y)) {
    K->failed = true;
    return NULL;
  }
  FzValue *v = mmAdd(K, sbase, frag[0][0]);
  return mmAddC(K, mmXorC(K, v, x), y);
}

/*===--- tf32 fragments -------------------------------------------------===*/

/* tf32 (f32 in shared memory, mma m16n8k8): each fragment register is one
 * element (ldmatrix moves 16-bit 8x8 tiles; the f32 layout needs none).
 * PTX's fragments give lane l (g = l / 4, t = l % 4) the k columns t and
 * t + 4 of A (registers 0, 1 and 2, 3) and the k rows t and t + 4 of B
 * (registers 0 and 1). The sum over k does not depend on which k of the
 * step each fragment position holds, as long as A and B agree. Where both
 * operands are k-contiguous (G->tf32Pairs) the kernel feeds position t
 * the element at k 2t and position t + 4 the one at 2t + 1: a lane's two
 * k are adjacent, one 8-byte shared load per pair. Otherwise PTX's order
 * and 4-byte loads (a row-major B read in pairs of rows 2t, 2t + 1 would
 * meet 2-way bank conflicts that rows t, t + 4 do not). Register i of the
 * k8 step ks, with (p, q) = (2, 1) for pairs, else (1, 4):
 *   A (m16 tile idx):  m = w WM + 16 idx + g + 8 (i % 2), k = 8 ks + p t + q (i / 2)
 *   B (n8 tile idx):   n = w WN + 8 idx + g,              k = 8 ks + p t + q i
 * at (row, col) = (mn, k) of a k-contiguous tile, else (k, mn).
 * tf32_parts gives the parts: mnHi and kHi multiples of 8, and iK (the
 * rest of k is p t + iK, below 8). */
static void tf32_parts(const Gen *G, bool isA, int ks, int idx, int i,
                       int *mnHi, int *kHi, int *iK) {
  int q = G->tf32Pairs ? 1 : 4;
  *mnHi = isA ? 16 * idx + 8 * (i % 2) : 8 * idx;
  *kHi = 8 * ks;
  *iK = q * (isA ? i / 2 : i);
}

static int64_t tf32_off_c(const Gen *G, bool isA, int ks, int idx, int i,
                          int l, int w) {
  int mnHi, kHi, iK;
  tf32_parts(G, isA, ks, idx, i, &mnHi, &kHi, &iK);
  int mn = w * (isA ? G->WM : G->WN) + mnHi + l / 4;
  int k = kHi + iK + (G->tf32Pairs ? 2 : 1) * (l % 4);
  bool kLast = isA ? G->m->a.kLast : G->m->b.kLast;
  int row = kLast ? mn : k, col = kLast ? k : mn;
  return swz_c(row, col, isA ? G->A.cols : G->B.cols) + col % 8;
}

static FzValue *tf32_off_ir(Gen *G, bool isA, int ks, int idx, int i) {
  KB *K = &G->K;
  int mnHi, kHi, iK;
  tf32_parts(G, isA, ks, idx, i, &mnHi, &kHi, &iK);
  /* mn = (w W + mnHi) + g, k = kHi + (p t + iK): multiples of 8 + rests. */
  FzValue *mn8 = mmAddC(K, mmMul(K, isA ? G->wm : G->wn, isA ? G->WM : G->WN),
                        mnHi);
  FzValue *k8 = mmConst(K, kHi);
  FzValue *mnR = G->g,
          *kR = mmAddC(K, mmMul(K, G->tq, G->tf32Pairs ? 2 : 1), iK);
  bool kLast = isA ? G->m->a.kLast : G->m->b.kLast;
  FzValue *row = kLast ? mmAdd(K, mn8, mnR) : mmAdd(K, k8, kR);
  FzValue *col8 = kLast ? k8 : mn8, *colR = kLast ? kR : mnR;
  return mmAdd(K, mmSwizzle(K, row, col8, isA ? G->A.cols : G->B.cols), colR);
}

/* frag_decompose for tf32 registers: offset(ks, idx, i) = (offset(0, 0,
 * 0) ^ X) + Y for every lane, warp and stage. */
static bool tf32_decompose(const Gen *G, bool isA, int ks, int idx, int i,
                           int64_t *x, int64_t *y) {
  const Tile *T = isA ? &G->A : &G->B;
  int warps = isA ? G->t->warpsM : G->t->warpsN;
  int64_t o0 = tf32_off_c(G, isA, 0, 0, 0, 0, 0);
  int64_t ok = tf32_off_c(G, isA, ks, idx, i, 0, 0);
  *y = (ok / T->cols - o0 / T->cols) * T->cols;
  *x = (ok - *y) ^ o0;
  for (int w = 0; w < warps; ++w)
    for (int l = 0; l < 32; ++l) {
      int64_t a = tf32_off_c(G, isA, 0, 0, 0, l, w);
      int64_t b = tf32_off_c(G, isA, ks, idx, i, l, w);
      for (int s = 0; s < G->S; ++s) {
        int64_t sb = T->base + s * T->stageElems;
        if (((sb + a) ^ *x) + *y != sb + b)
          return false;
      }
    }
  return true;
}

static void setup_fragments_tf32(Gen *G) {
  KB *K = &G->K;
  for (int isA = 1; isA >= 0; --isA) {
    int n = isA ? G->MT : G->NT, regs = isA ? 4 : 2;
    for (int ks = 0; ks < G->t->bk / 8; ++ks)
      for (int idx = 0; idx < n; ++idx)
        for (int i = 0; i < regs; ++i) {
          int64_t x, y;
          bool first = ks == 0 && idx == 0 && i == 0;
          FzValue *v = first || !tf32_decompose(G, isA, ks, idx, i, &x, &y)
                           ? mmCast(K, tf32_off_ir(G, isA, ks, idx, i), K->i32)
                           : NULL;
          if (isA)
            G->tfA[ks][idx][i] = v;
          else
            G->tfB[ks][idx][i] = v;
        }
  }
}

/* The shared index (index type) of register i of a tf32 fragment in the
 * stage at sbase (i32 elements). */
static FzValue *tf32_addr(Gen *G, bool isA, int ks, int idx, int i,
                          FzValue *sbase) {
  KB *K = &G->K;
  FzValue *own = isA ? G->tfA[ks][idx][i] : G->tfB[ks][idx][i];
  FzValue *first = isA ? G->tfA[0][0][0] : G->tfB[0][0][0];
  FzValue *off;
  int64_t x, y;
  if (own) {
    off = mmAdd(K, sbase, own);
  } else if (tf32_decompose(G, isA, ks, idx, i, &x, &y)) {
    off = mmAddC(K, mmXorC(K, mmAdd(K, sbase, first), x), y);
  } else {
    K->failed = true;
    return NULL;
  }
  return mmCast(K, off, K->idx);
}

/* Registers i and j of a tf32 fragment into *ri and *rj: one 8-byte
 * kernel.vector_load with G->tf32Pairs (j's element follows i's), else
 * two 4-byte loads. */
/* The step's MT x NT kernel.mma ops of `shape` ("m16n8k16" or "m16n8k8")
 * on the A fragments a[mi][0..3] and B fragments b[ni][0..1], updating
 * the accumulator pairs acc[(mi * NT + ni) * 2 ...] in place. Serpentine
 * over n keeps one B fragment live across rows. A missing fragment or a
 * failed op sets K->failed. */
static void mma_grid(Gen *G, FzValue *a[16][4], FzValue *b[64][2],
                     FzValue **acc, const char *shape) {
  KB *K = &G->K;
  for (int mi = 0; mi < G->MT; ++mi)
    for (int ni = 0; ni < G->NT; ++ni) {
      int nn = mi % 2 ? G->NT - 1 - ni : ni;
      FzValue **c = &acc[(mi * G->NT + nn) * 2];
      FzValue *ops[8] = {a[mi][0], a[mi][1], a[mi][2], a[mi][3],
                         b[nn][0], b[nn][1], c[0],     c[1]};
      for (int i = 0; i < 8; ++i)
        if (!ops[i]) {
          K->failed = true;
          return;
        }
      FzOpState st;
      fzOpStateInit(&st, K->ctx, FZ_STR("kernel.mma"), K->loc);
      fzOpStateAddOperands(&st, 8, ops);
      fzOpStateAddProp(&st, FZ_STR("shape"),
                       fzStringAttrGet(K->ctx, fzStringRefFromCString(shape)));
      FzType *rt[2] = {K->vacc, K->vacc};
      fzOpStateAddResults(&st, 2, rt);
      FzOp *op = fzBuilderCreate(&K->b, &st);
      if (!op) {
        K->failed = true;
        return;
      }
      c[0] = fzOpGetResult(op, 0);
      c[1] = fzOpGetResult(op, 1);
    }
}

static void tf32_load(Gen *G, bool isA, int ks, int idx, int i, int j,
                      FzValue *sbase, FzValue **ri, FzValue **rj) {
  KB *K = &G->K;
  FzValue *ops[2] = {G->smem, tf32_addr(G, isA, ks, idx, i, sbase)};
  if (!G->tf32Pairs) {
    *ri = mmOp(K, "loop.load", 2, ops, K->f32, NULL);
    ops[1] = tf32_addr(G, isA, ks, idx, j, sbase);
    *rj = mmOp(K, "loop.load", 2, ops, K->f32, NULL);
    return;
  }
  FzValue *v = mmOp(K, "kernel.vector_load", 2, ops, K->vacc, NULL);
  FzValue **out[2] = {ri, rj};
  for (int h = 0; h < 2; ++h) {
    if (!v) {
      *out[h] = NULL;
      continue;
    }
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.extract"), K->loc);
    fzOpStateAddOperands(&st, 1, &v);
    fzOpStateAddProp(&st, FZ_STR("position"),
                     fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 64), h));
    fzOpStateAddResults(&st, 1, &K->f32);
    *out[h] = mmCreate(K, &st, 0);
  }
}

/* One k8 step of the warp tile (tf32): the A and B registers by shared
 * loads (tf32_load), then MT x NT mma m16n8k8 (the op rounds them to
 * tf32). */
static void compute_step_tf32(Gen *G, FzValue *stage, int ks, FzValue **acc) {
  KB *K = &G->K;
  FzValue *aBase = mmAdd(K, mmConstOf(K, K->i32, G->A.base),
                         mmMul(K, stage, G->A.stageElems));
  FzValue *bBase = mmAdd(K, mmConstOf(K, K->i32, G->B.base),
                         mmMul(K, stage, G->B.stageElems));
  FzValue *a[16][4], *b[64][2];
  for (int mi = 0; mi < G->MT; ++mi) /* (a0, a2) and (a1, a3): k, k + 1 */
    for (int i = 0; i < 2; ++i)
      tf32_load(G, true, ks, mi, i, i + 2, aBase, &a[mi][i], &a[mi][i + 2]);
  for (int ni = 0; ni < G->NT; ++ni)
    tf32_load(G, false, ks, ni, 0, 1, bBase, &b[ni][0], &b[ni][1]);
  mma_grid(G, a, b, acc, "m16n8k8");
}

/*===--- Tile loads -----------------------------------------------------===*/

/* The global indices of chunk p of tile T at k-tile kt (element `e` of
 * the chunk along the contiguous dim) and its validity (NULL: valid). */
static void chunk_indices(Gen *G, Tile *T, int p, FzValue *kt, int e,
                          FzValue **idx, FzValue **ok) {
  KB *K = &G->K;
  const FzMatmulOperand *x = T->x;
  size_t nb = x->numBatch;
  for (size_t d = 0; d < nb; ++d)
    idx[d] = batch_index(G, x->batch[d]);
  int64_t Kx = G->m->K;
  int64_t copy = T->copy;
  FzValue *k = mmAddC(K, mmAdd(K, mmMul(K, kt, G->t->bk), T->kOff[p]),
                    x->kLast ? e : 0);
  if (G->kLo)
    k = mmAdd(K, k, G->kLo);
  FzValue *mn = T->mnIdx[p];
  FzValue *mnOk = T->mnOk[p];
  if (!x->kLast && e) {
    /* The scalar path: the mn coordinate moves along the chunk. */
    FzValue *mnE = mmAddC(K, mmAdd(K, x == &G->m->a ? G->m0 : G->n0, T->col[p]),
                        e);
    bool ragged = T->mnExtent % T->tileMN != 0;
    mnOk = ragged ? mmLtC(K, mnE, T->mnExtent) : NULL;
    /* A copy of part of a chunk (16 bytes: 8 16-bit elements, or f32
     * elements 0..3 or 4..7; or 8 or 4 bytes) past the edge is
     * zero-filled and keeps its source inside the matrix: the extent is
     * a multiple of the copy. */
    int64_t hi = T->async ? T->mnExtent - copy : T->mnExtent - 1;
    mn = ragged ? mmMinC(K, mnE, hi) : mnE;
  }
  FzValue *kOk = !G->kMask ? NULL
                 : G->kEnd ? mmLt(K, k, G->kEnd)
                           : mmLtC(K, k, Kx);
  int64_t kHi = x->kLast && T->async ? Kx - copy : Kx - 1;
  FzValue *kc = G->kMask ? mmMinC(K, k, kHi) : k;
  *ok = mmAnd(K, mnOk, kOk);
  idx[nb] = x->kLast ? mn : kc;
  idx[nb + 1] = x->kLast ? kc : mn;
}

/* Issues this thread's cp.async copies of k-tile kt (index) into stage
 * `stage` (i32): per chunk of 8 elements, copies of T->copy elements
 * (one 16-byte copy of 8 16-bit elements, two of f32 elements 0..3 and
 * 4..7; more for the 8- and 4-byte copies of rows that are not whole
 * 16 bytes). */
void mmLoadTileAsync(Gen *G, Tile *T, FzValue *kt, FzValue *stage) {
  KB *K = &G->K;
  FzValue *sbase = mmAdd(K, mmConstOf(K, K->i32, T->base),
                         mmMul(K, stage, T->stageElems));
  int step = T->copy, per = 8 / step;
  int64_t bytes = mmCopyBytes(T->x);
  const FzMatmulConv *cv = &G->m->conv;
  bool gather = cv->on && !cv->pointwise && T->x == &G->m->a;
  for (int p = 0; p < T->perThread; ++p)
    for (int h = 0; h < per; ++h) {
      FzValue *idx[FZ_MATMUL_MAX_DIMS], *ok;
      if (gather) /* an NHWC conv's input: one tap per copy */
        mmConvChunk(G, T, p, kt, h * step, &idx[0], &ok);
      else
        chunk_indices(G, T, p, kt, h * step, idx, &ok);
      FzValue *ops[3 + FZ_MATMUL_MAX_DIMS];
      size_t n = 0;
      ops[n++] = G->smem;
      ops[n++] = mmCast(K, mmAddC(K, mmAdd(K, sbase, T->dst[p]), h * step),
                        K->idx);
      ops[n++] = T->buf;
      for (size_t d = 0; d < T->rank; ++d)
        ops[n++] = idx[d];
      if (ok)
        ops[n++] = mmSelect(K, ok, mmConst(K, bytes), mmConst(K, 0));
      bool built = true;
      for (size_t i = 0; i < n; ++i)
        built = built && ops[i];
      if (!built) {
        K->failed = true;
        return;
      }
      FzOpState st;
      fzOpStateInit(&st, K->ctx, FZ_STR("kernel.cp_async"), K->loc);
      fzOpStateAddOperands(&st, n, ops);
      if (bytes != 16)
        fzOpStateAddProp(&st, FZ_STR("size"),
                         fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 32),
                                          bytes));
      mmCreate(K, &st, 0);
    }
}

/* The scalar path, in two halves so that the loads of a tile can be
 * issued before the compute and stored after it: tile_gather loads this
 * thread's 8 elements per chunk of tile kt (zero outside the matrix)
 * into vals, tile_put stores them into stage `stage` (i32). */
static void tile_gather(Gen *G, Tile *T, FzValue *kt, FzValue **vals) {
  KB *K = &G->K;
  if (G->m->conv.on && !G->m->conv.pointwise && T->x == &G->m->a) {
    mmConvGather(G, T, kt, vals);
    return;
  }
  for (int p = 0; p < T->perThread; ++p)
    for (int e = 0; e < 8; ++e) {
      FzValue *idx[FZ_MATMUL_MAX_DIMS], *ok;
      chunk_indices(G, T, p, kt, e, idx, &ok);
      FzValue *ops[1 + FZ_MATMUL_MAX_DIMS];
      ops[0] = T->buf;
      for (size_t d = 0; d < T->rank; ++d)
        ops[1 + d] = idx[d];
      FzValue *v = mmOp(K, "loop.load", 1 + T->rank, ops, K->elt, NULL);
      vals[p * 8 + e] = ok ? mmSelect(K, ok, v, G->zeroElt) : v;
    }
}

static void tile_put(Gen *G, Tile *T, FzValue *const *vals, FzValue *stage) {
  KB *K = &G->K;
  FzValue *sbase = mmAdd(K, mmConstOf(K, K->i32, T->base),
                         mmMul(K, stage, T->stageElems));
  for (int p = 0; p < T->perThread; ++p)
    for (int e = 0; e < 8; ++e) {
      FzValue *st[3] = {
          vals[p * 8 + e], G->smem,
          mmCast(K, mmAddC(K, mmAdd(K, T->dst[p], sbase), e), K->idx)};
      mmOp(K, "loop.store", 3, st, NULL, NULL);
    }
}

static void load_tile_sync(Gen *G, Tile *T, FzValue *kt, FzValue *stage) {
  FzValue *vals[8 * MAX_CHUNKS];
  tile_gather(G, T, kt, vals);
  tile_put(G, T, vals, stage);
}

/* Tile kt of T into stage `stage`: 16-byte copies where T allows them,
 * else scalar loads (a conv's input in the cp.async pipeline: the stage
 * is free since the barrier, and the next barrier publishes it). */
static void load_tile(Gen *G, Tile *T, FzValue *kt, FzValue *stage) {
  if (T->async)
    mmLoadTileAsync(G, T, kt, stage);
  else
    load_tile_sync(G, T, kt, stage);
}

/*===--- The k loop -----------------------------------------------------===*/

/* One k16 step of the warp tile on stage `stage` (i32): ldmatrix, then
 * mma on acc (MT * NT * 2 pairs, updated in place). */
static void compute_step(Gen *G, FzValue *stage, int ks, FzValue **acc) {
  KB *K = &G->K;
  FzValue *aBase = mmAdd(K, mmConstOf(K, K->i32, G->A.base),
                         mmMul(K, stage, G->A.stageElems));
  FzValue *bBase = mmAdd(K, mmConstOf(K, K->i32, G->B.base),
                         mmMul(K, stage, G->B.stageElems));
  FzValue *a[16][4], *b[64][2];
  FzType *regs[4] = {K->vreg, K->vreg, K->vreg, K->vreg};
  for (int mi = 0; mi < G->MT; ++mi) {
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.ldmatrix"), K->loc);
    FzValue *ops[2] = {G->smem,
                       mmCast(K, frag_addr(G, true, ks, mi, aBase), K->idx)};
    if (!ops[1]) {
      K->failed = true;
      return;
    }
    fzOpStateAddOperands(&st, 2, ops);
    fzOpStateAddProp(&st, FZ_STR("num"),
                     fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 32), 4));
    if (!G->m->a.kLast)
      fzOpStateAddProp(&st, FZ_STR("trans"), fzUnitAttrGet(K->ctx));
    fzOpStateAddResults(&st, 4, regs);
    FzOp *op = fzBuilderCreate(&K->b, &st);
    if (!op) {
      K->failed = true;
      return;
    }
    for (int r = 0; r < 4; ++r)
      a[mi][r] = fzOpGetResult(op, r);
  }
  for (int nj = 0; nj < G->NT / 2; ++nj) {
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.ldmatrix"), K->loc);
    FzValue *ops[2] = {G->smem,
                       mmCast(K, frag_addr(G, false, ks, nj, bBase), K->idx)};
    if (!ops[1]) {
      K->failed = true;
      return;
    }
    fzOpStateAddOperands(&st, 2, ops);
    fzOpStateAddProp(&st, FZ_STR("num"),
                     fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 32), 4));
    if (!G->m->b.kLast)
      fzOpStateAddProp(&st, FZ_STR("trans"), fzUnitAttrGet(K->ctx));
    fzOpStateAddResults(&st, 4, regs);
    FzOp *op = fzBuilderCreate(&K->b, &st);
    if (!op) {
      K->failed = true;
      return;
    }
    /* Matrices 0, 1: (b0, b1) of n tile 2nj; 2, 3: of n tile 2nj + 1. */
    b[2 * nj][0] = fzOpGetResult(op, 0);
    b[2 * nj][1] = fzOpGetResult(op, 1);
    b[2 * nj + 1][0] = fzOpGetResult(op, 2);
    b[2 * nj + 1][1] = fzOpGetResult(op, 3);
  }
  mma_grid(G, a, b, acc, "m16n8k16");
}

FzOp *mmPipelineOpen(Gen *G, size_t nacc, FzValue **kt, FzValue **iters,
                     FzBuilder *saved, FzValue **stage, FzValue **next) {
  KB *K = &G->K;
  FzValue *zero = mmConstAttr(
      K, fzDenseAttrGet(K->ctx, K->vacc, &(float){0.0f}, sizeof(float)),
      K->vacc);
  /* The accumulators; and, when S is not a power of two, the stage read
   * in this iteration (kt % S, carried: a compare and a select instead
   * of a remainder). */
  bool carryStage = G->async && (G->S & (G->S - 1)) != 0;
  FzValue *inits[2 * MAX_ACC + 1];
  for (size_t i = 0; i < nacc; ++i)
    inits[i] = zero;
  if (carryStage)
    inits[nacc] = mmConstOf(K, K->i32, 0);
  size_t niter = nacc + (carryStage ? 1 : 0);
  if (G->async)
    for (int s = 0; s < G->ahead; ++s) {
      if (s < G->KT) {
        load_tile(G, &G->A, mmConst(K, s), mmConstOf(K, K->i32, s));
        load_tile(G, &G->B, mmConst(K, s), mmConstOf(K, K->i32, s));
      }
      mmPlainOp(K, "kernel.cp_async_commit");
    }
  FzOp *loop = mmForOpen(K, mmConst(K, 0), mmConst(K, G->KT), niter, inits,
                         kt, iters, saved);
  if (!loop)
    return NULL;
  *next = NULL;
  if (carryStage) {
    *stage = iters[nacc];
    FzValue *inc = mmAddC(K, *stage, 1);
    FzValue *wrap = mmLtC(K, inc, G->S);
    *next = mmSelect(K, wrap, inc, mmConstOf(K, K->i32, 0));
  } else {
    *stage = G->async ? mmRemC(K, mmCast(K, *kt, K->i32), G->S)
                      : mmConstOf(K, K->i32, 0);
  }
  return loop;
}

FzValue *mmRefillStage(Gen *G, FzValue *kt, FzValue *stage, FzValue *next) {
  KB *K = &G->K;
  if (G->KT <= G->ahead)
    return NULL;
  /* (kt + ahead) % S; from the carried stage, a select (for ahead
   * S - 1: the previous stage, S - 1 after stage 0). */
  if (!next)
    return mmRemC(K, mmAddC(K, mmCast(K, kt, K->i32), G->ahead), G->S);
  FzValue *lo = G->ahead == G->S - 1 ? mmConstOf(K, K->i32, G->S - 1)
                                     : mmAddC(K, stage, G->ahead);
  return mmSelect(K, mmLtC(K, stage, G->S - G->ahead), lo,
                  mmAddC(K, stage, G->ahead - G->S));
}

void mmPipelineClose(Gen *G, FzOp *loop, size_t nacc, FzValue **iters,
                     FzValue *next, const FzBuilder *saved, FzValue **acc) {
  if (next)
    iters[nacc] = next;
  mmForClose(&G->K, loop, nacc + (next ? 1 : 0), iters, saved);
  for (size_t i = 0; i < nacc; ++i)
    acc[i] = fzOpGetResult(loop, i);
}

static void main_loop(Gen *G, FzValue **acc) {
  KB *K = &G->K;
  size_t nacc = (size_t)G->MT * G->NT * 2;
  FzValue *kt, *iters[2 * MAX_ACC + 1], *stage, *nextStage;
  FzBuilder saved;
  FzOp *loop =
      mmPipelineOpen(G, nacc, &kt, iters, &saved, &stage, &nextStage);
  if (!loop)
    return;
  FzValue *prefetchStage = NULL;
  FzValue *prefetch[8 * MAX_CHUNKS];
  if (G->async) {
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.cp_async_wait"), K->loc);
    fzOpStateAddProp(&st, FZ_STR("pending"),
                     fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 32),
                                      G->S - 2));
    mmCreate(K, &st, 0);
    mmPlainOp(K, "kernel.barrier");
    /* Refill the stage the barrier freed with tile kt + S - 1. */
    FzValue *nk = mmAddC(K, kt, G->S - 1);
    bool refill = G->KT > G->S - 1;
    FzValue *ws = mmRefillStage(G, kt, stage, nextStage);
    FzBuilder inIf;
    FzOp *guard = refill ? mmIfOpen(K, mmLtC(K, nk, G->KT), &inIf) : NULL;
    if (refill) {
      if (G->A.async)
        mmLoadTileAsync(G, &G->A, nk, ws);
      mmLoadTileAsync(G, &G->B, nk, ws);
    }
    mmIfClose(K, guard, &inIf);
    mmPlainOp(K, "kernel.cp_async_commit");
    /* A gathered by scalar loads (a conv's input): loaded into registers
     * now (tile min(kt + S - 1, KT - 1): past the end, a stage never
     * read again gets a valid tile), stored into stage ws after the
     * compute, so that the loads' latency overlaps the mma. */
    if (refill && !G->A.async) {
      tile_gather(G, &G->A, mmMinC(K, nk, G->KT - 1), prefetch);
      prefetchStage = ws;
    }
  } else {
    mmPlainOp(K, "kernel.barrier");
    load_tile_sync(G, &G->A, kt, mmConstOf(K, K->i32, 0));
    load_tile_sync(G, &G->B, kt, mmConstOf(K, K->i32, 0));
    mmPlainOp(K, "kernel.barrier");
  }
  if (G->tf32)
    for (int ks = 0; ks < G->t->bk / 8; ++ks)
      compute_step_tf32(G, stage, ks, iters);
  else
    for (int ks = 0; ks < G->t->bk / 16; ++ks)
      compute_step(G, stage, ks, iters);
  if (prefetchStage)
    tile_put(G, &G->A, prefetch, prefetchStage);
  mmPipelineClose(G, loop, nacc, iters, nextStage, &saved, acc);
}

bool fzMatmulTileFits(const FzMatmulNest *m, const FzMatmulTile *t,
                      char *why, size_t whyLen) {
  /* 16-bit elements where the nest has no type yet (fzMatmulTileCheck
   * already allows their bytes). */
  int64_t esz = m->elt ? (int64_t)fzTypeGetStorageSize(m->elt) : 2;
  int64_t bytes = (fzMatmulUsesAsyncCopies(m, t) ? t->stages : 1) *
                  (int64_t)(t->bm + t->bn) * t->bk * esz;
  if (bytes > 227 * 1024) {
    if (why && whyLen)
      snprintf(why, whyLen, "%lld bytes of shared memory for %lld-byte "
               "elements, more than the 227 KiB of a block",
               (long long)bytes, (long long)esz);
    return false;
  }
  int threads = 32 * t->warpsM * t->warpsN;
  int mt = t->bm / t->warpsM / 16, nt = t->bn / t->warpsN / 8;
  if ((size_t)mt * nt > MAX_ACC || mt > 16 || nt > 64 || t->bk / 16 > 8 ||
      (t->bm * t->bk / 8) / threads > MAX_CHUNKS ||
      (t->bn * t->bk / 8) / threads > MAX_CHUNKS) {
    if (why && whyLen)
      snprintf(why, whyLen, "the tile is too large for the generator "
               "(%dx%d warp tiles need %d m16n8 accumulator tiles per "
               "thread, at most %d; at most %d copies per thread and "
               "operand, BK up to 128)", t->bm / t->warpsM, t->bn / t->warpsN,
               mt * nt, MAX_ACC, MAX_CHUNKS);
    return false;
  }
  return true;
}

bool fzMatmulUsesAsyncCopies(const FzMatmulNest *m, const FzMatmulTile *t) {
  bool gather = m->conv.on && !m->conv.pointwise;
  return (m->a.asyncCopies || gather) && m->b.asyncCopies && !t->sync;
}

int64_t fzMatmulGetBatch(const FzMatmulNest *m) {
  int64_t batch = 1;
  if (m->conv.on)
    return m->conv.pointwise ? m->conv.batch : 1;
  for (size_t d = 0; d < m->numDims; ++d)
    if ((int)d != m->dimI && (int)d != m->dimJ &&
        !(m->splitK && (int)d == m->dimSplit))
      batch *= m->extent[d];
  return batch;
}

void fzMatmulGetLaunch(const FzMatmulNest *m, const FzMatmulTile *t,
                       int64_t grid[3], int64_t block[3],
                       int64_t *sharedBytes) {
  int64_t tiles = ((m->M + t->bm - 1) / t->bm) * ((m->N + t->bn - 1) / t->bn);
  grid[0] = tiles;
  grid[1] = m->splitK ? m->splitK : 1;
  grid[2] = fzMatmulGetBatch(m);
  block[0] = 32 * t->warpsM * t->warpsN;
  block[1] = block[2] = 1;
  int64_t stages = fzMatmulUsesAsyncCopies(m, t) ? t->stages : 1;
  *sharedBytes = stages * (int64_t)(t->bm + t->bn) * t->bk *
                 (int64_t)fzTypeGetStorageSize(m->elt);
}

int64_t fzMatmulGetFlops(const FzMatmulNest *m) {
  return 2 * fzMatmulGetBatch(m) * m->M * m->N * m->K;
}

void fzMatmulSplitText(const FzMatmulNest *m, char *buf, size_t n) {
  if (!m->splitK) {
    snprintf(buf, n, "%s", "");
    return;
  }
  snprintf(buf, n, ", split-k %lld (k slices of %lld; f32 partial sums, a "
           "second kernel adds them)",
           (long long)m->splitK, (long long)m->sliceK);
}

void fzMatmulConvText(const FzMatmulNest *m, char *buf, size_t n) {
  const FzMatmulConv *cv = &m->conv;
  char gemm[96];
  if (cv->pointwise)
    snprintf(gemm, sizeof gemm, "1x1: GEMM %lldx%lldx%lld per image",
             (long long)m->M, (long long)m->N, (long long)m->K);
  else
    snprintf(gemm, sizeof gemm, "GEMM %lldx%lldx%lld", (long long)m->M,
             (long long)m->N, (long long)m->K);
  snprintf(buf, n, "conv2d %simplicit GEMM %lldx%lldx%lldx%lld -> %lld "
           "channels, %lldx%lld kernel, stride %lldx%lld, pad %lldx%lld, "
           "dilation %lldx%lld (%s%s)",
           cv->nhwc ? "NHWC " : "", (long long)cv->batch, (long long)cv->C,
           (long long)cv->H, (long long)cv->W,
           (long long)(cv->pointwise ? m->M : m->N), (long long)cv->KH,
           (long long)cv->KW, (long long)cv->sh, (long long)cv->sw,
           (long long)cv->padH, (long long)cv->padW, (long long)cv->dh,
           (long long)cv->dw, gemm,
           !cv->nhwc  ? ""
           : cv->kHwc ? ", k = (kh, kw, c)"
                      : ", k = (c, kh, kw)");
}

void fzMatmulDescribe(const FzMatmulNest *m, const FzMatmulTile *t,
                      char *buf, size_t n) {
  char tt[96], batch[48] = "", split[128];
  fzMatmulTileFormat(t, tt, sizeof tt);
  fzMatmulSplitText(m, split, sizeof split);
  const char *elt = fzTypeGetKind(m->elt) == FZ_TYPE_BF16  ? "bf16"
                    : fzTypeGetKind(m->elt) == FZ_TYPE_F32 ? "f32 (tf32)"
                                                           : "f16";
  /* Copies narrower than 16 bytes (rows that are not whole 16 bytes). */
  char narrow[48] = "";
  int ca = m->a.asyncCopies ? mmCopyBytes(&m->a) : 16;
  int cb = mmCopyBytes(&m->b);
  if (ca < 16 && cb < 16)
    snprintf(narrow, sizeof narrow, " (%d-byte copies of A, %d of B)", ca,
             cb);
  else if (ca < 16 || cb < 16)
    snprintf(narrow, sizeof narrow, " (%d-byte copies of %s)",
             ca < 16 ? ca : cb, ca < 16 ? "A" : "B");
  const FzMatmulConv *cv = &m->conv;
  if (cv->on) {
    char conv[320];
    fzMatmulConvText(m, conv, sizeof conv);
    bool async = fzMatmulUsesAsyncCopies(m, t);
    const char *how = !async          ? "scalar tile loads"
                      : cv->pointwise ? "cp.async pipeline"
                      : m->a.asyncCopies
                          ? "cp.async weights and input (vectors along C)"
                          : "cp.async weights, gathered input";
    snprintf(buf, n, "%s %s, tile %s, %s%s%s", conv, elt, tt, how,
             async ? narrow : "", split);
    return;
  }
  if (fzMatmulGetBatch(m) > 1)
    snprintf(batch, sizeof batch, " (batch %lld)",
             (long long)fzMatmulGetBatch(m));
  bool async = fzMatmulUsesAsyncCopies(m, t);
  snprintf(buf, n, "matmul %lldx%lldx%lld %s%s, tile %s, %s%s%s",
           (long long)m->M, (long long)m->N, (long long)m->K, elt, batch,
           tt, async ? "cp.async pipeline" : "scalar tile loads",
           async ? narrow : "", split);
}

Gen *mmGenBegin(const FzMatmulNest *m, const FzMatmulTile *t, FzBuilder *at,
                FzValue *const *caps, int64_t smemAlign) {
  FzOp *par = m->par;
  FzContext *ctx = fzOpGetContext(par);
  if (!fzRegisterKernelDialect(ctx))
    return NULL;
  Gen *G = fzCalloc(ctx, 1, sizeof *G);
  if (!G) {
    fzOpEmitError(par, "lower-loop-to-kernel: out of memory");
    return NULL;
  }
  KB *K = &G->K;
  K->ctx = ctx;
  K->loc = fzOpGetLoc(par);
  K->idx = fzIndexTypeGet(ctx);
  K->i32 = fzIntegerTypeGet(ctx, 32);
  K->i1 = fzIntegerTypeGet(ctx, 1);
  K->f32 = fzF32TypeGet(ctx);
  K->elt = m->elt;
  K->vreg = fzVectorTypeGet(ctx, 1, &(int64_t){2}, m->elt, NULL);
  K->vacc = fzVectorTypeGet(ctx, 1, &(int64_t){2}, K->f32, NULL);
  K->b = *at;
  G->m = m;
  G->t = t;
  G->threads = 32 * t->warpsM * t->warpsN;
  G->WM = t->bm / t->warpsM;
  G->WN = t->bn / t->warpsN;
  G->MT = G->WM / 16;
  G->NT = G->WN / 8;
  G->KT = (int)(((m->splitK ? m->sliceK : m->K) + t->bk - 1) / t->bk);
  G->async = fzMatmulUsesAsyncCopies(m, t);
  G->S = G->async ? t->stages : 1;
  G->ahead = G->S - 1;
  G->tf32 = fzTypeGetKind(m->elt) == FZ_TYPE_F32;
  G->tf32Pairs = G->tf32 && m->a.kLast && m->b.kLast;
  for (size_t i = 0; i < m->numCaptures; ++i)
    if (!(G->capMap[i] = caps[i]))
      K->failed = true;
  FzType *dynT = fzBufferTypeGet(ctx, 1, &(int64_t){FZ_DYNAMIC}, m->elt, NULL,
                                 FZ_KERNEL_SPACE_SHARED, NULL);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("kernel.dynamic_shared"), K->loc);
  fzOpStateAddResults(&st, 1, &dynT);
  if (smemAlign > 16)
    fzOpStateAddProp(&st, FZ_STR("align"),
                     fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64),
                                      smemAlign));
  G->smem = K->failed ? NULL : mmCreate(K, &st, 0);
  /* Constants go right after the shared buffer, before the body. */
  K->lastConst = G->smem ? fzValueGetDefiningOp(G->smem) : NULL;
  if (!K->lastConst) {
    fzFree(ctx, G);
    fzOpEmitError(par, "could not build the matmul kernel");
    return NULL;
  }
  if (!G->async || m->conv.on)
    G->zeroElt = mmConstAttr(K, fzFloatAttrGet(ctx, m->elt, 0.0), m->elt);
  return G;
}

bool mmGenEnd(Gen *G, FzBuilder *at) {
  bool ok = !G->K.failed;
  FzOp *par = G->m->par;
  *at = G->K.b;
  fzFree(G->K.ctx, G);
  return ok || fzOpEmitError(par, "could not build the matmul kernel");
}

bool fzKernelBuildMatmulBody(const FzMatmulNest *m, const FzMatmulTile *t,
                             FzBuilder *at, FzValue *const *caps) {
  char why[192];
  if (!fzMatmulTileCheck(t, why, sizeof why) ||
      !fzMatmulTileFits(m, t, why, sizeof why))
    return fzOpEmitError(m->par, "matmul tile: %s", why);
  Gen *G = mmGenBegin(m, t, at, caps, 16);
  if (!G)
    return false;
  KB *K = &G->K;
  mmSetupIds(G);
  int64_t aStage = (int64_t)t->bm * t->bk;
  mmSetupTile(G, &G->A, &m->a, true, 0);
  mmSetupTile(G, &G->B, &m->b, false, G->S * aStage);
  if (G->tf32)
    setup_fragments_tf32(G);
  else
    setup_fragments(G);
  FzValue *acc[2 * MAX_ACC];
  main_loop(G, acc);
  if (!K->failed)
    mmEpilogue(G, acc);
  return mmGenEnd(G, at);
}

/* lowering/loop_to_kernel/matmul.c - fzKernelBuildMatmul: the kernel.func
 * of a tensor-core GEMM with its epilogue, and the kernel.launch that
 * replaces the matched nest (matmul.h gives the design; docs/codegen.md
 * "Tensor-core matmul" the details and the numbers).
 *
 * Kernel structure (T = 32 * warps threads, S stages, KT = ceil(K / BK)):
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
#include "lowering/loop_to_kernel/matmul.h"

#define MAX_CONSTS 512
#define MAX_ACC 512   /* accumulator pairs per thread */
#define MAX_CHUNKS 64 /* 16-byte copies per thread per operand and stage */

typedef struct KB {
  FzContext *ctx;
  FzLoc *loc;
  FzBuilder b;        /* where ops go */
  FzOp *lastConst;    /* constants go after it, in the entry block */
  bool failed;
  FzType *idx, *i1, *f32, *elt, *vreg, *vacc;
  int64_t cval[MAX_CONSTS];
  FzValue *cidx[MAX_CONSTS];
  size_t numConsts;
} KB;

/*===--- Small builders -------------------------------------------------===*/

static FzValue *create(KB *K, FzOpState *st, size_t result) {
  FzOp *op = fzBuilderCreate(&K->b, st);
  if (!op) {
    K->failed = true;
    return NULL;
  }
  return fzOpGetNumResults(op) > result ? fzOpGetResult(op, result) : NULL;
}

/* Creates st's op right after the last constant of the entry block. */
static FzValue *create_const(KB *K, FzOpState *st) {
  FzBuilder cb;
  fzBuilderInit(&cb, K->ctx);
  fzBuilderSetInsertionPointAfter(&cb, K->lastConst);
  FzOp *op = fzBuilderCreate(&cb, st);
  if (!op) {
    K->failed = true;
    return NULL;
  }
  K->lastConst = op;
  return fzOpGetResult(op, 0);
}

static FzValue *cst(KB *K, int64_t v) {
  for (size_t i = 0; i < K->numConsts; ++i)
    if (K->cval[i] == v)
      return K->cidx[i];
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("loop.constant"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("value"), fzIntegerAttrGet(K->ctx, K->idx, v));
  fzOpStateAddResults(&st, 1, &K->idx);
  FzValue *c = create_const(K, &st);
  if (c && K->numConsts < MAX_CONSTS) {
    K->cval[K->numConsts] = v;
    K->cidx[K->numConsts++] = c;
  }
  return c;
}

/* A constant of any type from an attribute (f32 / vector zero, i1). */
static FzValue *cst_attr(KB *K, FzAttr *a, FzType *t) {
  if (!a) {
    K->failed = true;
    return NULL;
  }
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("loop.constant"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("value"), a);
  fzOpStateAddResults(&st, 1, &t);
  return create_const(K, &st);
}

static FzValue *op_n(KB *K, const char *name, size_t n, FzValue *const *ops,
                     FzType *rt, const char *pred) {
  for (size_t i = 0; i < n; ++i)
    if (!ops[i]) {
      K->failed = true;
      return NULL;
    }
  FzOpState st;
  fzOpStateInit(&st, K->ctx, fzStringRefFromCString(name), K->loc);
  fzOpStateAddOperands(&st, n, ops);
  if (pred)
    fzOpStateAddProp(&st, FZ_STR("predicate"),
                     fzStringAttrGet(K->ctx, fzStringRefFromCString(pred)));
  if (rt)
    fzOpStateAddResults(&st, 1, &rt);
  return create(K, &st, 0);
}

static bool cval(FzValue *v, int64_t *c) {
  return v && fzLoopValueGetConstantInt(v, c);
}

static FzValue *add(KB *K, FzValue *a, FzValue *b) {
  int64_t x, y;
  bool ca = cval(a, &x), cb = cval(b, &y);
  if (ca && cb)
    return cst(K, x + y);
  if (ca && x == 0)
    return b;
  if (cb && y == 0)
    return a;
  FzValue *ops[2] = {a, b};
  return op_n(K, "loop.addi", 2, ops, K->idx, NULL);
}

static FzValue *addc(KB *K, FzValue *a, int64_t c) {
  return add(K, a, cst(K, c));
}

static FzValue *mul(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  if (cval(a, &x))
    return cst(K, x * c);
  if (c == 0)
    return cst(K, 0);
  if (c == 1)
    return a;
  FzValue *ops[2] = {a, cst(K, c)};
  return op_n(K, "loop.muli", 2, ops, K->idx, NULL);
}

/* a / c and a % c for a >= 0, c > 0. */
static FzValue *divc(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  if (cval(a, &x))
    return cst(K, x / c);
  if (c == 1)
    return a;
  FzValue *ops[2] = {a, cst(K, c)};
  return op_n(K, "loop.divsi", 2, ops, K->idx, NULL);
}

static FzValue *remc(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  if (cval(a, &x))
    return cst(K, x % c);
  if (c == 1)
    return cst(K, 0);
  FzValue *ops[2] = {a, cst(K, c)};
  return op_n(K, "loop.remsi", 2, ops, K->idx, NULL);
}

static FzValue *minc(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  if (cval(a, &x))
    return cst(K, x < c ? x : c);
  FzValue *ops[2] = {a, cst(K, c)};
  return op_n(K, "loop.minsi", 2, ops, K->idx, NULL);
}

static FzValue *xorv(KB *K, FzValue *a, FzValue *b) {
  int64_t x, y;
  bool ca = cval(a, &x), cb = cval(b, &y);
  if (ca && cb)
    return cst(K, x ^ y);
  if (cb && y == 0)
    return a;
  if (ca && x == 0)
    return b;
  FzValue *ops[2] = {a, b};
  return op_n(K, "loop.xori", 2, ops, K->idx, NULL);
}

/* a < c (i1); NULL means "always true" for the callers' guards. */
static FzValue *ltc(KB *K, FzValue *a, int64_t c) {
  int64_t x;
  if (cval(a, &x) && x < c)
    return NULL;
  FzValue *ops[2] = {a, cst(K, c)};
  return op_n(K, "loop.cmpi", 2, ops, K->i1, "slt");
}

/* Conjunction of guards (NULL: true). */
static FzValue *and_(KB *K, FzValue *a, FzValue *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  FzValue *ops[2] = {a, b};
  return op_n(K, "loop.andi", 2, ops, K->i1, NULL);
}

static FzValue *select_(KB *K, FzValue *c, FzValue *a, FzValue *b) {
  FzValue *ops[3] = {c, a, b};
  return op_n(K, "loop.select", 3, ops, fzValueGetType(a), NULL);
}

static FzValue *kid(KB *K, const char *name, const char *dim) {
  FzOpState st;
  fzOpStateInit(&st, K->ctx, fzStringRefFromCString(name), K->loc);
  if (dim)
    fzOpStateAddProp(&st, FZ_STR("dimension"),
                     fzStringAttrGet(K->ctx, fzStringRefFromCString(dim)));
  fzOpStateAddResults(&st, 1, &K->idx);
  return create(K, &st, 0);
}

static void plain_op(KB *K, const char *name) {
  FzOpState st;
  fzOpStateInit(&st, K->ctx, fzStringRefFromCString(name), K->loc);
  create(K, &st, 0);
}

/*===--- Structured control ---------------------------------------------===*/

/* `loop.for %iv = lb to ub step 1 iter_args(inits)`: creates the op with
 * an empty body and moves the builder into it (saved in *saved). */
static FzOp *for_open(KB *K, FzValue *lb, FzValue *ub, size_t n,
                      FzValue *const *inits, FzValue **iv, FzValue **iters,
                      FzBuilder *saved) {
  FzValue *ops[3 + 2 * MAX_ACC];
  FzType *types[1 + 2 * MAX_ACC];
  ops[0] = lb;
  ops[1] = ub;
  ops[2] = cst(K, 1);
  types[0] = K->idx;
  for (size_t i = 0; i < n; ++i) {
    ops[3 + i] = inits[i];
    types[1 + i] = inits[i] ? fzValueGetType(inits[i]) : K->idx;
  }
  for (size_t i = 0; i < 3 + n; ++i)
    if (!ops[i]) {
      K->failed = true;
      return NULL;
    }
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("loop.for"), K->loc);
  fzOpStateAddOperands(&st, 3 + n, ops);
  fzOpStateAddResults(&st, n, types + 1);
  FzRegion *r = fzOpStateAddRegion(&st);
  FzBlock *body = fzBlockCreate(K->ctx, 1 + n, types, NULL);
  if (!r || !body) {
    if (body)
      fzBlockDestroy(body);
    fzOpStateDispose(&st);
    K->failed = true;
    return NULL;
  }
  fzRegionAppendBlock(r, body);
  FzOp *loop = fzBuilderCreate(&K->b, &st);
  if (!loop) {
    K->failed = true;
    return NULL;
  }
  *saved = K->b;
  fzBuilderSetInsertionPointToEnd(&K->b, body);
  if (iv)
    *iv = fzBlockGetArgument(body, 0);
  for (size_t i = 0; i < n; ++i)
    iters[i] = fzBlockGetArgument(body, 1 + i);
  return loop;
}

/* Ends the body with loop.yield(yields) and restores the builder. */
static void for_close(KB *K, FzOp *loop, size_t n, FzValue *const *yields,
                      const FzBuilder *saved) {
  if (loop) {
    for (size_t i = 0; i < n; ++i)
      if (!yields[i])
        K->failed = true;
    if (!K->failed) {
      FzOpState st;
      fzOpStateInit(&st, K->ctx, FZ_STR("loop.yield"), K->loc);
      fzOpStateAddOperands(&st, n, yields);
      create(K, &st, 0);
    }
  }
  K->b = *saved;
}

/* `if (cond)` as a loop.for of 0 or 1 iterations; cond NULL: no guard
 * (returns NULL and leaves the builder). */
static FzOp *if_open(KB *K, FzValue *cond, FzBuilder *saved) {
  if (!cond)
    return NULL;
  FzValue *ub = select_(K, cond, cst(K, 1), cst(K, 0));
  return for_open(K, cst(K, 0), ub, 0, NULL, NULL, NULL, saved);
}

static void if_close(KB *K, FzOp *loop, const FzBuilder *saved) {
  if (loop)
    for_close(K, loop, 0, NULL, saved);
}

/*===--- The kernel's state ---------------------------------------------===*/

/* One operand's tile geometry and this thread's copies. */
typedef struct Tile {
  const FzMatmulOperand *x;
  FzValue *buf;          /* the kernel argument */
  int rows, cols;        /* of the shared tile */
  int64_t stageElems;    /* rows * cols */
  int64_t base;          /* element offset of stage 0 */
  int64_t mnExtent;      /* M or N */
  int tileMN;            /* BM or BN */
  int perThread;         /* chunks per thread and stage */
  bool async;
  /* Per chunk: shared offset in a stage; the row and column of the tile. */
  FzValue *dst[MAX_CHUNKS], *row[MAX_CHUNKS], *col[MAX_CHUNKS];
  /* The mn half of the global indices (clamped) and its validity (NULL:
   * always valid). */
  FzValue *mnIdx[MAX_CHUNKS], *mnOk[MAX_CHUNKS];
  FzValue *kOff[MAX_CHUNKS];  /* offset of the chunk along k in the tile */
} Tile;

typedef struct Gen {
  KB K;
  const FzMatmulNest *m;
  const FzMatmulTile *t;
  FzValue *smem;
  FzValue *capMap[FZ_MATMUL_MAX_CAPTURES]; /* capture -> kernel value */
  FzValue *batchIv[FZ_MATMUL_MAX_DIMS];    /* per parallel dim (batch) */
  FzValue *tid, *lane, *wm, *wn, *g, *tq, *m0, *n0;
  int threads, WM, WN, MT, NT, S, KT;
  bool async;
  Tile A, B;
  FzValue *fragA[8][64], *fragB[8][64]; /* per k16 step: lane offsets */
  FzValue *zeroElt;
} Gen;

/* The swizzled element offset of (row, col) in a tile of `cols` columns;
 * col is a multiple of 8. */
static FzValue *swz(KB *K, FzValue *row, FzValue *col, int cols) {
  int C = cols / 8;
  FzValue *chunk = divc(K, col, 8);
  FzValue *f = C >= 8 ? remc(K, row, 8) : remc(K, divc(K, row, 8 / C), C);
  FzValue *sc = xorv(K, chunk, f);
  return add(K, mul(K, row, cols), mul(K, sc, 8));
}

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
  return ix.dim >= 0 ? G->batchIv[ix.dim] : cst(&G->K, ix.value);
}

/*===--- Setup ----------------------------------------------------------===*/

static void setup_tile(Gen *G, Tile *T, const FzMatmulOperand *x, bool isA,
                       int64_t base) {
  KB *K = &G->K;
  const FzMatmulTile *t = G->t;
  T->x = x;
  T->buf = cap(G, x->buffer);
  T->tileMN = isA ? t->bm : t->bn;
  T->mnExtent = isA ? G->m->M : G->m->N;
  T->rows = x->kLast ? T->tileMN : t->bk;
  T->cols = x->kLast ? t->bk : T->tileMN;
  T->stageElems = (int64_t)T->rows * T->cols;
  T->base = base;
  T->async = G->async;
  int chunks = T->rows * T->cols / 8;
  T->perThread = chunks / G->threads;
  FzValue *mn0 = isA ? G->m0 : G->n0;
  int C = T->cols / 8;
  for (int p = 0; p < T->perThread; ++p) {
    FzValue *c = addc(K, G->tid, (int64_t)p * G->threads);
    FzValue *r = divc(K, c, C);
    FzValue *cc = mul(K, remc(K, c, C), 8);
    T->row[p] = r;
    T->col[p] = cc;
    T->dst[p] = swz(K, r, cc, T->cols);
    /* The mn coordinate: rows of a k-contiguous tile, else columns. */
    FzValue *mnOff = x->kLast ? r : cc;
    FzValue *mn = add(K, mn0, mnOff);
    bool ragged = T->mnExtent % T->tileMN != 0;
    T->mnOk[p] = ragged ? ltc(K, mn, T->mnExtent) : NULL;
    /* Clamped so that the address stays valid where nothing is read. */
    int64_t hi = x->kLast ? T->mnExtent - 1 : T->mnExtent - 8;
    if (!x->kLast && !T->async)
      hi = T->mnExtent - 1;
    T->mnIdx[p] = ragged ? minc(K, mn, hi < 0 ? 0 : hi) : mn;
    T->kOff[p] = x->kLast ? cc : r;
  }
}

/* Tile (pid_m, pid_n) in grouped order, batch ivs, warp and lane ids. */
static void setup_ids(Gen *G) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  const FzMatmulTile *t = G->t;
  int64_t tilesM = (m->M + t->bm - 1) / t->bm;
  int64_t tilesN = (m->N + t->bn - 1) / t->bn;
  FzValue *pid = kid(K, "kernel.block_id", "x");
  /* Triton's grouped order: groupM rows of tiles walk the columns
   * together, so the B tiles they share stay in L2. */
  int64_t inGroup = t->groupM * tilesN;
  FzValue *group = divc(K, pid, inGroup);
  FzValue *first = mul(K, group, t->groupM);
  FzValue *rest = remc(K, pid, inGroup);
  FzValue *size;
  if (tilesM % t->groupM == 0) {
    size = cst(K, t->groupM);
  } else {
    FzValue *left = add(K, cst(K, tilesM), mul(K, first, -1));
    size = minc(K, left, t->groupM);
  }
  FzValue *pidM, *pidN;
  int64_t sc;
  if (cval(size, &sc)) {
    pidM = add(K, first, remc(K, rest, sc));
    pidN = divc(K, rest, sc);
  } else {
    FzValue *o1[2] = {rest, size};
    pidM = add(K, first, op_n(K, "loop.remsi", 2, o1, K->idx, NULL));
    pidN = op_n(K, "loop.divsi", 2, o1, K->idx, NULL);
  }
  G->m0 = mul(K, pidM, t->bm);
  G->n0 = mul(K, pidN, t->bn);
  /* Batch dims: block_id.z, row-major over their extents. */
  FzValue *bz = kid(K, "kernel.block_id", "z");
  int64_t inner = 1;
  for (size_t d = m->numDims; d-- > 0;) {
    if ((int)d == m->dimI || (int)d == m->dimJ)
      continue;
    G->batchIv[d] = remc(K, divc(K, bz, inner), m->extent[d]);
    inner *= m->extent[d];
  }
  G->tid = kid(K, "kernel.thread_id", "x");
  G->lane = kid(K, "kernel.lane_id", NULL);
  FzValue *warp = divc(K, G->tid, 32);
  G->wm = divc(K, warp, t->warpsN);
  G->wn = remc(K, warp, t->warpsN);
  G->g = divc(K, G->lane, 4);
  G->tq = remc(K, G->lane, 4);
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
  FzValue *q = divc(K, G->lane, 8), *r = remc(K, G->lane, 8);
  FzValue *qLo = remc(K, q, 2), *qHi = divc(K, q, 2);
  FzValue *row, *col;
  if (isA) {
    FzValue *mBase = addc(K, mul(K, G->wm, G->WM), 16 * idx);
    if (G->m->a.kLast) {
      row = add(K, mBase, remc(K, G->lane, 16));
      col = addc(K, mul(K, qHi, 8), 16 * ks);
    } else {
      row = add(K, addc(K, mul(K, qHi, 8), 16 * ks), r);
      col = add(K, mBase, mul(K, qLo, 8));
    }
    return swz(K, row, col, G->A.cols);
  }
  FzValue *nBase = addc(K, mul(K, G->wn, G->WN), 16 * idx);
  if (G->m->b.kLast) {
    row = add(K, add(K, nBase, mul(K, qHi, 8)), r);
    col = addc(K, mul(K, qLo, 8), 16 * ks);
  } else {
    row = add(K, addc(K, mul(K, qLo, 8), 16 * ks), r);
    col = add(K, nBase, mul(K, qHi, 8));
  }
  return swz(K, row, col, G->B.cols);
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
  for (int isA = 1; isA >= 0; --isA) {
    int n = isA ? G->MT : G->NT / 2;
    FzValue *(*frag)[64] = isA ? G->fragA : G->fragB;
    FzValue *base = frag_off_ir(G, isA, 0, 0);
    for (int ks = 0; ks < G->t->bk / 16; ++ks)
      for (int i = 0; i < n; ++i) {
        int64_t x, y;
        frag[ks][i] = ks == 0 && i == 0 ? base
                      : frag_decompose(G, isA, ks, i, &x, &y)
                          ? NULL
                          : frag_off_ir(G, isA, ks, i);
      }
  }
}

/* The shared-memory index of a fragment's lane address in stage base
 * sbase (elements). */
static FzValue *frag_addr(Gen *G, bool isA, int ks, int idx, FzValue *sbase) {
  KB *K = &G->K;
  FzValue *(*frag)[64] = isA ? G->fragA : G->fragB;
  int64_t x, y;
  if (frag[ks][idx])
    return add(K, sbase, frag[ks][idx]);
  if (!frag_decompose(G, isA, ks, idx, &x, &y)) {
    K->failed = true;
    return NULL;
  }
  FzValue *v = add(K, sbase, frag[0][0]);
  return addc(K, xorv(K, v, cst(K, x)), y);
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
  FzValue *k = addc(K, add(K, mul(K, kt, G->t->bk), T->kOff[p]),
                    x->kLast ? e : 0);
  FzValue *mn = T->mnIdx[p];
  FzValue *mnOk = T->mnOk[p];
  if (!x->kLast && e) {
    /* The scalar path: the mn coordinate moves along the chunk. */
    FzValue *mnE = addc(K, add(K, x == &G->m->a ? G->m0 : G->n0, T->col[p]),
                        e);
    bool ragged = T->mnExtent % T->tileMN != 0;
    mnOk = ragged ? ltc(K, mnE, T->mnExtent) : NULL;
    mn = ragged ? minc(K, mnE, T->mnExtent - 1) : mnE;
  }
  bool kRagged = Kx % G->t->bk != 0;
  FzValue *kOk = kRagged ? ltc(K, k, Kx) : NULL;
  int64_t kHi = x->kLast && T->async ? Kx - 8 : Kx - 1;
  FzValue *kc = kRagged ? minc(K, k, kHi) : k;
  *ok = and_(K, mnOk, kOk);
  idx[nb] = x->kLast ? mn : kc;
  idx[nb + 1] = x->kLast ? kc : mn;
}

/* Issues this thread's cp.async copies of k-tile kt into stage `stage`. */
static void load_tile_async(Gen *G, Tile *T, FzValue *kt, FzValue *stage) {
  KB *K = &G->K;
  FzValue *sbase = add(K, cst(K, T->base), mul(K, stage, T->stageElems));
  for (int p = 0; p < T->perThread; ++p) {
    FzValue *idx[FZ_MATMUL_MAX_DIMS], *ok;
    chunk_indices(G, T, p, kt, 0, idx, &ok);
    FzValue *ops[3 + FZ_MATMUL_MAX_DIMS];
    size_t n = 0;
    ops[n++] = G->smem;
    ops[n++] = add(K, sbase, T->dst[p]);
    ops[n++] = T->buf;
    for (size_t d = 0; d < T->x->rank; ++d)
      ops[n++] = idx[d];
    if (ok)
      ops[n++] = select_(K, ok, cst(K, 16), cst(K, 0));
    op_n(K, "kernel.cp_async", n, ops, NULL, NULL);
  }
}

/* The scalar path: loads 8 elements per chunk (zero outside the matrix)
 * and stores them into stage 0. */
static void load_tile_sync(Gen *G, Tile *T, FzValue *kt) {
  KB *K = &G->K;
  for (int p = 0; p < T->perThread; ++p)
    for (int e = 0; e < 8; ++e) {
      FzValue *idx[FZ_MATMUL_MAX_DIMS], *ok;
      chunk_indices(G, T, p, kt, e, idx, &ok);
      FzValue *ops[1 + FZ_MATMUL_MAX_DIMS];
      ops[0] = T->buf;
      for (size_t d = 0; d < T->x->rank; ++d)
        ops[1 + d] = idx[d];
      FzValue *v = op_n(K, "loop.load", 1 + T->x->rank, ops, K->elt, NULL);
      if (ok)
        v = select_(K, ok, v, G->zeroElt);
      FzValue *st[3] = {v, G->smem,
                        addc(K, add(K, cst(K, T->base), T->dst[p]), e)};
      op_n(K, "loop.store", 3, st, NULL, NULL);
    }
}

/*===--- The k loop -----------------------------------------------------===*/

/* One k16 step of the warp tile on stage `stage`: ldmatrix, then mma on
 * acc (MT * NT * 2 pairs, updated in place). */
static void compute_step(Gen *G, FzValue *stage, int ks, FzValue **acc) {
  KB *K = &G->K;
  FzValue *aBase = add(K, cst(K, G->A.base), mul(K, stage, G->A.stageElems));
  FzValue *bBase = add(K, cst(K, G->B.base), mul(K, stage, G->B.stageElems));
  FzValue *a[16][4], *b[64][2];
  FzType *regs[4] = {K->vreg, K->vreg, K->vreg, K->vreg};
  for (int mi = 0; mi < G->MT; ++mi) {
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.ldmatrix"), K->loc);
    FzValue *ops[2] = {G->smem, frag_addr(G, true, ks, mi, aBase)};
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
    FzValue *ops[2] = {G->smem, frag_addr(G, false, ks, nj, bBase)};
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
  for (int mi = 0; mi < G->MT; ++mi)
    for (int ni = 0; ni < G->NT; ++ni) {
      /* Serpentine over n keeps one B fragment live across rows. */
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
                       fzStringAttrGet(K->ctx, FZ_STR("m16n8k16")));
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

static void main_loop(Gen *G, FzValue **acc) {
  KB *K = &G->K;
  size_t nacc = (size_t)G->MT * G->NT * 2;
  FzValue *zero = cst_attr(
      K, fzDenseAttrGet(K->ctx, K->vacc, &(float){0.0f}, sizeof(float)),
      K->vacc);
  FzValue *inits[2 * MAX_ACC];
  for (size_t i = 0; i < nacc; ++i)
    inits[i] = zero;
  if (G->async)
    for (int s = 0; s < G->S - 1; ++s) {
      if (s < G->KT) {
        load_tile_async(G, &G->A, cst(K, s), cst(K, s));
        load_tile_async(G, &G->B, cst(K, s), cst(K, s));
      }
      plain_op(K, "kernel.cp_async_commit");
    }
  FzValue *kt, *iters[2 * MAX_ACC];
  FzBuilder saved;
  FzOp *loop = for_open(K, cst(K, 0), cst(K, G->KT), nacc, inits, &kt, iters,
                        &saved);
  if (!loop)
    return;
  FzValue *stage;
  if (G->async) {
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.cp_async_wait"), K->loc);
    fzOpStateAddProp(&st, FZ_STR("pending"),
                     fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 32),
                                      G->S - 2));
    create(K, &st, 0);
    plain_op(K, "kernel.barrier");
    /* Refill the stage the barrier freed with tile kt + S - 1. */
    FzValue *nk = addc(K, kt, G->S - 1);
    FzBuilder inIf;
    FzOp *guard = G->KT > G->S - 1 ? if_open(K, ltc(K, nk, G->KT), &inIf)
                                   : NULL;
    if (G->KT > G->S - 1) {
      FzValue *ws = remc(K, nk, G->S);
      load_tile_async(G, &G->A, nk, ws);
      load_tile_async(G, &G->B, nk, ws);
    }
    if_close(K, guard, &inIf);
    plain_op(K, "kernel.cp_async_commit");
    stage = remc(K, kt, G->S);
  } else {
    plain_op(K, "kernel.barrier");
    load_tile_sync(G, &G->A, kt);
    load_tile_sync(G, &G->B, kt);
    plain_op(K, "kernel.barrier");
    stage = cst(K, 0);
  }
  for (int ks = 0; ks < G->t->bk / 16; ++ks)
    compute_step(G, stage, ks, iters);
  for_close(K, loop, nacc, iters, &saved);
  for (size_t i = 0; i < nacc; ++i)
    acc[i] = fzOpGetResult(loop, i);
}

/*===--- Epilogue -------------------------------------------------------===*/

/* Clones the nest's epilogue for the element (row, col) with accumulator
 * value accv; stores too when withStores. Returns the mapping (the
 * caller destroys it), NULL after an error. */
static FzIRMapping *clone_epilogue(Gen *G, FzValue *row, FzValue *col,
                                   FzValue *accv, bool withStores) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  if (!row || !col || !accv) {
    K->failed = true;
    return NULL;
  }
  FzIRMapping *map = fzIRMappingCreate(K->ctx);
  if (!map) {
    K->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < m->numCaptures; ++i)
    if (G->capMap[i])
      fzIRMappingMap(map, m->captures[i], G->capMap[i]);
  FzBlock *body = fzLoopGetBody(m->par);
  for (size_t d = 0; d < m->numDims; ++d) {
    FzValue *v = (int)d == m->dimI   ? row
                 : (int)d == m->dimJ ? col
                                     : G->batchIv[d];
    if (!v) {
      K->failed = true;
      fzIRMappingDestroy(map);
      return NULL;
    }
    fzIRMappingMap(map, fzBlockGetArgument(body, d), v);
  }
  fzIRMappingMap(map, fzOpGetResult(m->kloop, 0), accv);
  FzOp *term = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (op == m->kloop || op == term)
      continue;
    if (!withStores && fzLoopGetOpcode(op) == FZ_LOOP_OP_STORE)
      continue;
    /* Every operand is mapped (a failed map insertion would leave a clone
     * using a value of the host function). */
    bool mapped = true;
    for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
      mapped = mapped && fzIRMappingLookup(map, fzOpGetOperand(op, i));
    if (!mapped) {
      K->failed = true;
      break;
    }
    FzOp *c = fzOpClone(op, map);
    if (!c) {
      K->failed = true;
      break;
    }
    fzBuilderInsert(&K->b, c);
  }
  return map;
}

/* Stores the pair of elements (row, col), (row, col + 1) of every output
 * with one vector store each. */
static void epilogue_pair(Gen *G, FzValue *row, FzValue *col, FzValue *accv) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  FzValue *e[2];
  for (int h = 0; h < 2; ++h) {
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.extract"), K->loc);
    fzOpStateAddOperands(&st, 1, &accv);
    fzOpStateAddProp(&st, FZ_STR("position"),
                     fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 64), h));
    fzOpStateAddResults(&st, 1, &K->f32);
    e[h] = create(K, &st, 0);
  }
  FzIRMapping *m0 = clone_epilogue(G, row, col, e[0], false);
  FzIRMapping *m1 = clone_epilogue(G, row, addc(K, col, 1), e[1], false);
  for (size_t s = 0; m0 && m1 && s < m->numStores; ++s) {
    FzOp *st = m->stores[s];
    FzValue *v = fzOpGetOperand(st, 0);
    FzValue *v0 = fzIRMappingLookup(m0, v), *v1 = fzIRMappingLookup(m1, v);
    FzType *et = fzValueGetType(v);
    FzType *vt = fzVectorTypeGet(K->ctx, 1, &(int64_t){2}, et, NULL);
    FzValue *pair[2] = {v0, v1};
    FzValue *vec = vt ? op_n(K, "kernel.from_elements", 2, pair, vt, NULL)
                      : NULL;
    size_t n = fzOpGetNumOperands(st);
    FzValue *ops[2 + FZ_MATMUL_MAX_DIMS];
    ops[0] = vec;
    for (size_t i = 1; i < n; ++i)
      ops[i] = fzIRMappingLookup(m0, fzOpGetOperand(st, i));
    op_n(K, "kernel.vector_store", n, ops, NULL, NULL);
  }
  fzIRMappingDestroy(m0);
  fzIRMappingDestroy(m1);
  if (!m0 || !m1)
    K->failed = true;
}

static void epilogue(Gen *G, FzValue *const *acc) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  bool raggedM = m->M % G->t->bm != 0, raggedN = m->N % G->t->bn != 0;
  FzValue *rowBase = add(K, add(K, G->m0, mul(K, G->wm, G->WM)), G->g);
  FzValue *colBase =
      add(K, add(K, G->n0, mul(K, G->wn, G->WN)), mul(K, G->tq, 2));
  for (int mi = 0; mi < G->MT; ++mi)
    for (int hi = 0; hi < 2; ++hi) {
      FzValue *row = addc(K, rowBase, mi * 16 + hi * 8);
      FzValue *rowOk = raggedM ? ltc(K, row, m->M) : NULL;
      for (int ni = 0; ni < G->NT; ++ni) {
        FzValue *col = addc(K, colBase, ni * 8);
        FzValue *accv = acc[(mi * G->NT + ni) * 2 + hi];
        if (m->pairStores) {
          FzBuilder saved;
          FzOp *guard =
              if_open(K, and_(K, rowOk, raggedN ? ltc(K, col, m->N) : NULL),
                      &saved);
          epilogue_pair(G, row, col, accv);
          if_close(K, guard, &saved);
          continue;
        }
        for (int h = 0; h < 2; ++h) {
          FzValue *c = addc(K, col, h);
          FzBuilder saved;
          FzOp *guard = if_open(
              K, and_(K, rowOk, raggedN ? ltc(K, c, m->N) : NULL), &saved);
          FzOpState st;
          fzOpStateInit(&st, K->ctx, FZ_STR("kernel.extract"), K->loc);
          fzOpStateAddOperands(&st, 1, &accv);
          fzOpStateAddProp(&st, FZ_STR("position"),
                           fzIntegerAttrGet(K->ctx,
                                            fzIntegerTypeGet(K->ctx, 64), h));
          fzOpStateAddResults(&st, 1, &K->f32);
          FzValue *e = create(K, &st, 0);
          fzIRMappingDestroy(clone_epilogue(G, row, c, e, true));
          if_close(K, guard, &saved);
        }
      }
    }
}

/*===--- The kernel and its launch --------------------------------------===*/

static bool unique_name(FzOp *module, FzOp *host, char *buf, size_t n) {
  FzStringRef h = fzSymbolGetName(host);
  for (int i = 0; i < 100000; ++i) {
    snprintf(buf, n, "%.*s_mm%d", (int)h.length, h.data ? h.data : "", i);
    if (!fzSymbolTableLookupIn(module, fzStringRefFromCString(buf)))
      return true;
  }
  return false;
}

/* The kernel.func with its entry block (arguments: the non-constant
 * captures), before `host`; NULL after an error. */
static FzOp *create_kernel(Gen *G, FzOp *module, FzOp *host, FzBlock **entry) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  FzType *types[FZ_MATMUL_MAX_CAPTURES];
  size_t n = 0;
  for (size_t i = 0; i < m->numCaptures; ++i) {
    FzOp *def = fzValueGetDefiningOp(m->captures[i]);
    if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_CONSTANT)
      types[n++] = fzValueGetType(m->captures[i]);
  }
  char name[256];
  if (!unique_name(module, host, name, sizeof name))
    return NULL;
  FzType *ft = fzFunctionTypeGet(K->ctx, n, types, 0, NULL);
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.func"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("sym_name"),
                   fzStringAttrGet(K->ctx, fzStringRefFromCString(name)));
  fzOpStateAddProp(&st, FZ_STR("function_type"), fzTypeAttrGet(K->ctx, ft));
  FzRegion *r = fzOpStateAddRegion(&st);
  FzBlock *b = fzBlockCreate(K->ctx, n, types, NULL);
  if (!r || !b || !ft) {
    if (b)
      fzBlockDestroy(b);
    fzOpStateDispose(&st);
    return NULL;
  }
  fzRegionAppendBlock(r, b);
  FzOp *k = fzOpCreate(&st);
  if (!k)
    return NULL;
  fzOpMoveBefore(k, host);
  *entry = b;
  return k;
}

/* Maps the captures: constants cloned into the entry block, the rest to
 * the kernel's arguments in order. */
static void map_captures(Gen *G, FzBlock *entry) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  size_t arg = 0;
  for (size_t i = 0; i < m->numCaptures; ++i) {
    FzOp *def = fzValueGetDefiningOp(m->captures[i]);
    if (def && fzLoopGetOpcode(def) == FZ_LOOP_OP_CONSTANT) {
      FzOp *c = fzOpClone(def, NULL);
      if (!c) {
        K->failed = true;
        return;
      }
      fzOpMoveAfter(c, K->lastConst);
      K->lastConst = c;
      G->capMap[i] = fzOpGetResult(c, 0);
    } else {
      G->capMap[i] = fzBlockGetArgument(entry, arg++);
    }
  }
}

static void set_attr(KB *K, FzOp *op, const char *name, FzAttr *a) {
  if (!a || !fzOpSetAttr(op, fzStringRefFromCString(name), a))
    K->failed = true;
}

/* kernel.launch @k before the nest, with the captures' host values. */
static bool create_launch(Gen *G, FzOp *kernel, int64_t smemBytes) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  const FzMatmulTile *t = G->t;
  FzBuilder hb;
  fzBuilderInit(&hb, K->ctx);
  fzBuilderSetInsertionPointBefore(&hb, m->par);
  int64_t tiles = ((m->M + t->bm - 1) / t->bm) * ((m->N + t->bn - 1) / t->bn);
  int64_t batch = 1;
  for (size_t d = 0; d < m->numDims; ++d)
    if ((int)d != m->dimI && (int)d != m->dimJ)
      batch *= m->extent[d];
  int64_t cfg[FZ_KERNEL_LAUNCH_NUM_CONFIG] = {tiles, 1, batch, G->threads,
                                              1,     1, smemBytes};
  FzValue *ops[FZ_KERNEL_LAUNCH_NUM_CONFIG + FZ_MATMUL_MAX_CAPTURES];
  size_t n = 0;
  for (int i = 0; i < FZ_KERNEL_LAUNCH_NUM_CONFIG; ++i)
    if (!(ops[n++] = fzLoopCreateIndexConstant(&hb, K->loc, cfg[i])))
      return false;
  for (size_t i = 0; i < m->numCaptures; ++i) {
    FzOp *def = fzValueGetDefiningOp(m->captures[i]);
    if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_CONSTANT)
      ops[n++] = m->captures[i];
  }
  FzStringRef name = fzSymbolGetName(kernel);
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.launch"), fzOpGetLoc(m->par));
  fzOpStateAddOperands(&st, n, ops);
  fzOpStateAddProp(&st, FZ_STR("kernel"),
                   fzSymbolRefAttrGet(K->ctx, name, 0, NULL));
  return fzBuilderCreate(&hb, &st) != NULL;
}

FzOp *fzKernelBuildMatmul(const FzMatmulNest *m, const FzMatmulTile *t) {
  FzOp *par = m->par;
  FzContext *ctx = fzOpGetContext(par);
  FzOp *host = fzOpGetParentOp(par);
  FzOp *module = host ? fzOpGetParentOp(host) : NULL;
  char why[160];
  if (!module)
    return fzOpEmitError(par, "matmul nest outside a function in a module"),
           NULL;
  if (!fzMatmulTileCheck(t, why, sizeof why))
    return fzOpEmitError(par, "matmul tile: %s", why), NULL;
  if (!fzRegisterKernelDialect(ctx))
    return NULL;
  Gen *G = fzCalloc(ctx, 1, sizeof *G);
  if (!G)
    return NULL;
  KB *K = &G->K;
  K->ctx = ctx;
  K->loc = fzOpGetLoc(par);
  K->idx = fzIndexTypeGet(ctx);
  K->i1 = fzIntegerTypeGet(ctx, 1);
  K->f32 = fzF32TypeGet(ctx);
  K->elt = m->elt;
  K->vreg = fzVectorTypeGet(ctx, 1, &(int64_t){2}, m->elt, NULL);
  K->vacc = fzVectorTypeGet(ctx, 1, &(int64_t){2}, K->f32, NULL);
  G->m = m;
  G->t = t;
  G->threads = 32 * t->warpsM * t->warpsN;
  G->WM = t->bm / t->warpsM;
  G->WN = t->bn / t->warpsN;
  G->MT = G->WM / 16;
  G->NT = G->WN / 8;
  G->KT = (int)((m->K + t->bk - 1) / t->bk);
  G->async = m->a.asyncCopies && m->b.asyncCopies && !t->sync;
  G->S = G->async ? t->stages : 1;
  if ((size_t)G->MT * G->NT > MAX_ACC || G->MT > 16 || G->NT > 64 ||
      t->bk / 16 > 8 ||
      (t->bm * t->bk / 8) / G->threads > MAX_CHUNKS ||
      (t->bn * t->bk / 8) / G->threads > MAX_CHUNKS) {
    fzFree(ctx, G);
    return fzOpEmitError(par, "matmul tile too large for the generator"),
           NULL;
  }
  FzBlock *entry = NULL;
  FzOp *kernel = create_kernel(G, module, host, &entry);
  if (!kernel) {
    fzFree(ctx, G);
    return NULL;
  }
  fzBuilderInit(&K->b, ctx);
  fzBuilderSetInsertionPointToEnd(&K->b, entry);
  FzType *dynT = fzBufferTypeGet(ctx, 1, &(int64_t){FZ_DYNAMIC}, m->elt, NULL,
                                 FZ_KERNEL_SPACE_SHARED, NULL);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("kernel.dynamic_shared"), K->loc);
  fzOpStateAddResults(&st, 1, &dynT);
  G->smem = create(K, &st, 0);
  K->lastConst = G->smem ? fzValueGetDefiningOp(G->smem) : NULL;
  if (!K->lastConst) {
    fzOpErase(kernel);
    fzFree(ctx, G);
    return NULL;
  }
  map_captures(G, entry);
  if (!G->async)
    G->zeroElt = cst_attr(K, fzFloatAttrGet(ctx, m->elt, 0.0), m->elt);
  setup_ids(G);
  int64_t aStage = (int64_t)t->bm * t->bk, bStage = (int64_t)t->bn * t->bk;
  setup_tile(G, &G->A, &m->a, true, 0);
  setup_tile(G, &G->B, &m->b, false, G->S * aStage);
  setup_fragments(G);
  FzValue *acc[2 * MAX_ACC];
  main_loop(G, acc);
  if (!K->failed)
    epilogue(G, acc);
  plain_op(K, "kernel.return");
  int64_t esz = (int64_t)fzTypeGetStorageSize(m->elt);
  int64_t smemBytes = G->S * (aStage + bStage) * esz;
  char desc[192], tt[96];
  fzMatmulTileFormat(t, tt, sizeof tt);
  snprintf(desc, sizeof desc, "matmul %lldx%lldx%lld, tile %s, %s",
           (long long)m->M, (long long)m->N, (long long)m->K, tt,
           G->async ? "cp.async pipeline" : "scalar tile loads");
  set_attr(K, kernel, "kernel.plan",
           fzStringAttrGet(ctx, fzStringRefFromCString(desc)));
  set_attr(K, kernel, "kernel.max_threads",
           fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64), G->threads));
  set_attr(K, kernel, "kernel.dynamic_shared_bytes",
           fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64), smemBytes));
  bool ok = !K->failed && create_launch(G, kernel, smemBytes);
  fzFree(ctx, G);
  if (!ok) {
    fzOpErase(kernel);
    return fzOpEmitError(par, "could not build the matmul kernel"), NULL;
  }
  fzOpErase(par);
  return kernel;
}

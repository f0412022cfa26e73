/* transforms/loop/tile_small_m.c - tile-contractions for few rows: the
 * choice between the small-M mappings and the one for a weight that is
 * contiguous along the output columns j (the stream form).
 *
 * A contraction with M <= FzTileContractionsOptions.smallM rows (a
 * fully connected layer at batch 1, a decoding step) reads each element
 * of its weight once and does 2 M flops with it: its speed is the rate
 * at which the weight streams from memory. Register tiles of MR = 6 rows
 * leave most of their registers idle there, walk the weight down its
 * columns one k at a time (a page per k, which the prefetchers do not
 * follow), and pack a weight that is contiguous along k first (a whole
 * extra pass). Instead:
 *
 *   y contiguous along j (w[k, j]): the stream form, below;
 *   y contiguous along k (w[j, k], PyTorch's layout): the dot form
 *     (tile_dot.c);
 *   otherwise the ordinary tiles.
 *
 * The stream form, with W lanes, tiles of MR rows x NV vectors (NR = NV
 * W columns), groups of GT tiles and blocks of KB values of k:
 *
 *   S = loop.alloc [other dims, M, N] f32         (partial sums)
 *   loop.parallel (t) over (other dims x column groups):
 *     S[.., tile] = splat(init) for the group's tiles
 *     loop.for kb over blocks of KB:
 *       loop.for tile of the group:
 *         per row group: acc = S[..]; loop.for k in the block:
 *           acc[r][c] = fma(splat(x(i0 + r, k)), y(k, j0 + c W ..), acc)
 *         S[..] = acc
 *     loop.for tile of the group: acc = S[..]; the epilogue on the
 *       accumulators as vector ops; vector stores
 *
 * so that within a block the thread reads KB rows of the weight along
 * the group's columns: KB streams, each contiguous over the group, with
 * every accumulator in registers for KB fmas. The last N % W columns keep
 * the original nest, as in tile-contractions.
 *
 * Invariants: as tile-contractions' (a nest whose y cannot be read along
 * j or k stays for the ordinary tiles); the sums keep k in order within
 * an output (one fma per term), only the dot form reassociates.
 */
#include <stdio.h>
#include <string.h>

#include "fz/loop.h"
#include "transforms/loop/tile_internal.h"

/* Registers for accumulators: 32 vector registers with AVX-512, 16
 * with AVX or less; the rest hold y's vectors and x's broadcasts. */
static unsigned acc_budget(unsigned vectorBits) {
  return vectorBits >= 512 ? 24 : 12;
}

/* Parallel iterations wanted at least, where the columns allow: one
 * per thread of a 16-core machine. (A split of k across threads, with a
 * final reduction, for even fewer columns is not done.) */
enum { kMinGroups = 16 };

/* Rows per row group: M split into ceil(M / budget) even groups. */
static unsigned rows_per_group(int64_t M, unsigned budget) {
  int64_t groups = (M + budget - 1) / budget;
  return (unsigned)((M + groups - 1) / groups);
}

/*===--- The stream form --------------------------------------------------===*/

typedef struct Stream {
  TileGen *G;
  TileNest *T;
  FzValue *S; /* the partial sums [other dims, M, N] */
  FzValue *outer[TILE_MAX_DIMS];
  int64_t KB;  /* values of k per block */
  unsigned MR; /* rows per row group */
} Stream;

/* S's indices for row r and column col. */
static size_t scratch_indices(Stream *P, FzValue *row, FzValue *col,
                              FzValue **ops) {
  size_t n = 0;
  for (size_t d = 0; d < P->T->n; ++d)
    if (d != P->T->dI && d != P->T->dJ)
      ops[n++] = P->outer[d];
  ops[n++] = row;
  ops[n++] = col;
  return n;
}

static FzValue *load_acc(Stream *P, FzBuilder *b, FzValue *row, FzValue *col) {
  FzValue *ops[TILE_MAX_DIMS + 3];
  ops[0] = P->S;
  size_t n = 1 + scratch_indices(P, row, col, ops + 1);
  return tileMake1(P->G, b, "loop.vector_load", n, ops, P->G->vecF32);
}

static void store_acc(Stream *P, FzBuilder *b, FzValue *v, FzValue *row,
                      FzValue *col) {
  FzValue *ops[TILE_MAX_DIMS + 4];
  ops[0] = v;
  ops[1] = P->S;
  size_t n = 2 + scratch_indices(P, row, col, ops + 2);
  tileMake(P->G, b, "loop.vector_store", n, ops, NULL);
}

/* A loop over the group's tiles [tb, te) at b; the columns of the
 * current tile's vectors go to cols. */
static FzOp *tile_loop(Stream *P, FzBuilder *b, FzValue *tb, FzValue *te,
                       const TileRegion *R, FzValue **cols, FzBuilder *inner) {
  TileGen *G = P->G;
  FzOp *loop =
      tileMakeFor(G, b, tb, te, tileConstIndex(G, 1), 0, NULL, G->idx, inner);
  if (!loop)
    return NULL;
  FzValue *tt = fzBlockGetArgument(fzLoopGetBody(loop), 0);
  int64_t nr = (int64_t)R->nv * G->W;
  FzValue *j0 = tileAffine(G, inner, tt, nr, R->col0);
  for (unsigned c = 0; c < R->nv; ++c)
    cols[c] = c == 0 ? j0 : tileAffine(G, inner, j0, 1, (int64_t)c * G->W);
  return loop;
}

/* Instance data shared by the accumulation and the epilogue. */
static TileInst *stream_inst(Stream *P, const TileRegion *R, int64_t r0,
                             FzValue *const *cols, FzBuilder *b) {
  TileInst *I = tileInstCreate(P->G, R);
  if (!I)
    return NULL;
  for (unsigned r = 0; r < R->mr; ++r)
    I->rows[r] = tileConstIndex(P->G, r0 + r);
  for (unsigned c = 0; c < R->nv; ++c)
    I->cols[c] = cols[c];
  memcpy(I->outer, P->outer, sizeof I->outer);
  I->pre = *b;
  I->post = *b;
  return I;
}

/* Rows [r0, r0 + R->mr) of one tile for k in [kbeg, kend): S in, the
 * k loop, S out. */
static bool accumulate(Stream *P, const TileRegion *R, int64_t r0,
                       FzValue *const *cols, FzBuilder *b, FzValue *kbeg,
                       FzValue *kend) {
  TileGen *G = P->G;
  TileInst *I = stream_inst(P, R, r0, cols, b);
  if (!I)
    return false;
  size_t na = (size_t)R->mr * R->nv;
  FzValue *init[TILE_MAX_ROWS * TILE_MAX_VECS];
  for (unsigned r = 0; r < R->mr; ++r)
    for (unsigned c = 0; c < R->nv; ++c)
      init[r * R->nv + c] = load_acc(P, b, I->rows[r], cols[c]);
  FzOp *loop = tileMakeFor(G, b, kbeg, kend, tileConstIndex(G, 1), na, init,
                           G->vecF32, &I->kb);
  if (loop) {
    fzBuilderInit(&I->pre, G->ctx);
    fzBuilderSetInsertionPointBefore(&I->pre, loop);
    FzBlock *kbody = fzLoopGetBody(loop);
    I->k = fzBlockGetArgument(kbody, 0);
    for (size_t a = 0; a < na; ++a)
      I->accIn[a] = fzBlockGetArgument(kbody, 1 + a);
    FzValue *next[TILE_MAX_ROWS * TILE_MAX_VECS];
    FzValue *addRes = fzOpGetResult(P->T->add, 0);
    for (unsigned r = 0; r < R->mr; ++r)
      for (unsigned c = 0; c < R->nv; ++c)
        next[r * R->nv + c] = tileMaterialize(I, addRes, (int)r, (int)c);
    if (!G->failed && !fzOpSetOperands(fzBlockGetLastOp(kbody), na, next))
      G->failed = true;
    for (unsigned r = 0; r < R->mr && !G->failed; ++r)
      for (unsigned c = 0; c < R->nv; ++c)
        store_acc(P, b, fzOpGetResult(loop, r * R->nv + c), I->rows[r],
                  cols[c]);
  }
  tileInstDestroy(I);
  return !G->failed;
}

/* The epilogue of rows [r0, r0 + R->mr) of one tile: S as the
 * reduction's results, the stores of the original nest. */
static bool finish(Stream *P, const TileRegion *R, int64_t r0,
                   FzValue *const *cols, FzBuilder *b) {
  TileInst *I = stream_inst(P, R, r0, cols, b);
  if (!I)
    return false;
  for (unsigned r = 0; r < R->mr; ++r)
    for (unsigned c = 0; c < R->nv; ++c)
      I->accOut[r * R->nv + c] = load_acc(P, b, I->rows[r], cols[c]);
  bool ok = !P->G->failed && tileEmitStores(I);
  tileInstDestroy(I);
  return ok;
}

/* One nest: R's tiles (R->colBlocks of them, every row) in groups of
 * GT tiles. */
static bool emit_stream_region(Stream *P, TileRegion *R, int64_t GT,
                               const char *plan) {
  TileGen *G = P->G;
  TileNest *T = P->T;
  int64_t M = T->trips[T->dI], K = T->K;
  int64_t groups = (R->colBlocks + GT - 1) / GT;
  int64_t total = groups;
  for (size_t d = 0; d < T->n; ++d)
    if (d != T->dI && d != T->dJ)
      total *= T->trips[d];
  FzValue *t;
  FzBuilder body;
  FzOp *par = tileMakeParallel(G, 1, &total, &t, &body);
  if (!par)
    return false;
  if (!fzOpSetAttr(par, FZ_STR("fuse.plan"),
                   fzStringAttrGet(G->ctx, fzStringRefFromCString(plan))))
    return G->failed = true, false;
  FzValue *g =
      tileIndexBinary(G, &body, "loop.remsi", t, tileConstIndex(G, groups));
  FzValue *q =
      tileIndexBinary(G, &body, "loop.divsi", t, tileConstIndex(G, groups));
  for (size_t d = T->n; d-- > 0;) {
    if (d == T->dI || d == T->dJ)
      continue;
    P->outer[d] = tileIndexBinary(G, &body, "loop.remsi", q,
                                  tileConstIndex(G, T->trips[d]));
    q = tileIndexBinary(G, &body, "loop.divsi", q,
                        tileConstIndex(G, T->trips[d]));
  }
  FzValue *tb = tileAffine(G, &body, g, GT, 0);
  FzValue *te =
      tileIndexBinary(G, &body, "loop.minsi", tileAffine(G, &body, tb, 1, GT),
                      tileConstIndex(G, R->colBlocks));
  FzValue *cols[TILE_MAX_VECS];
  FzBuilder in;
  TileRegion part = *R;

  /* S starts at the reduction's initial value. */
  if (!tile_loop(P, &body, tb, te, R, cols, &in))
    return false;
  TileInst *I0 = stream_inst(P, R, 0, cols, &in);
  if (!I0)
    return false;
  FzValue *init = tileAsVector(I0, fzOpGetOperand(T->red, 3), 0, 0);
  for (int64_t r = 0; r < M && init; ++r)
    for (unsigned c = 0; c < R->nv; ++c)
      store_acc(P, &in, init, tileConstIndex(G, r), cols[c]);
  tileInstDestroy(I0);
  if (G->failed)
    return false;

  /* The blocks of k. */
  int64_t blocks = (K + P->KB - 1) / P->KB;
  FzBuilder kbb;
  FzOp *kloop =
      tileMakeFor(G, &body, tileConstIndex(G, 0), tileConstIndex(G, blocks),
                  tileConstIndex(G, 1), 0, NULL, G->idx, &kbb);
  if (!kloop)
    return false;
  FzValue *kb = fzBlockGetArgument(fzLoopGetBody(kloop), 0);
  FzValue *kbeg = tileAffine(G, &kbb, kb, P->KB, 0);
  FzValue *kend = K % P->KB == 0
                      ? tileAffine(G, &kbb, kbeg, 1, P->KB)
                      : tileIndexBinary(G, &kbb, "loop.minsi",
                                        tileAffine(G, &kbb, kbeg, 1, P->KB),
                                        tileConstIndex(G, K));
  if (!tile_loop(P, &kbb, tb, te, R, cols, &in))
    return false;
  for (int64_t r0 = 0; r0 < M && !G->failed; r0 += P->MR) {
    part.mr = (unsigned)(M - r0 < P->MR ? M - r0 : P->MR);
    accumulate(P, &part, r0, cols, &in, kbeg, kend);
  }

  /* The epilogue. */
  if (!G->failed && !tile_loop(P, &body, tb, te, R, cols, &in))
    return false;
  for (int64_t r0 = 0; r0 < M && !G->failed; r0 += P->MR) {
    part.mr = (unsigned)(M - r0 < P->MR ? M - r0 : P->MR);
    finish(P, &part, r0, cols, &in);
  }
  return !G->failed;
}

/* Emits the stream form for the columns [0, N / W * W) and restricts
 * the original nest to the rest (or erases it). */
static bool emit_stream(TileGen *G, unsigned NV, unsigned MR, int64_t KB,
                        int64_t cols, const char *plan) {
  TileNest *T = G->T;
  unsigned W = G->W;
  int64_t M = T->trips[T->dI], N = T->trips[T->dJ];
  int64_t NR = (int64_t)NV * W, Nf = N / NR * NR, Nv = N / W * W;
  int64_t shape[TILE_MAX_DIMS + 2];
  size_t rank = 0;
  for (size_t d = 0; d < T->n; ++d)
    if (d != T->dI && d != T->dJ)
      shape[rank++] = T->trips[d];
  shape[rank++] = M;
  shape[rank++] = Nv;
  FzType *bt =
      fzBufferTypeGet(G->ctx, rank, shape, fzF32TypeGet(G->ctx), NULL, 0, NULL);
  Stream P;
  memset(&P, 0, sizeof P);
  P.G = G;
  P.T = T;
  P.KB = KB;
  P.MR = MR;
  P.S = bt ? tileMake1(G, &G->top, "loop.alloc", 0, NULL, bt) : NULL;
  if (!P.S)
    return G->failed = true, false;
  TileRegion full = {MR, NV, 0, M, 0, Nf / NR};
  TileRegion single = {MR, 1, 0, M, Nf, (Nv - Nf) / W};
  int64_t gt = cols / NR > 0 ? cols / NR : 1;
  if (full.colBlocks > 0)
    emit_stream_region(&P, &full, gt, plan);
  if (single.colBlocks > 0 && !G->failed)
    emit_stream_region(&P, &single, single.colBlocks, plan);
  tileMake(G, &G->top, "loop.dealloc", 1, &P.S, NULL);
  return !G->failed;
}

/*===--- The choice -------------------------------------------------------===*/

TileSmallM tileSmallM(TileNest *T, const FzTileContractionsOptions *o) {
  unsigned W = o->vectorBits / 32;
  int64_t M = T->trips[T->dI], N = T->trips[T->dJ];
  if (o->smallM == 0 || M > (int64_t)o->smallM || W < 2 || W > 64 ||
      (W & (W - 1)) != 0)
    return TILE_SMALL_M_DECLINED;
  /* A weight shared by a batch of x (a dim that x has and y lacks
   * besides the rows) would stream once per batch element: the ordinary
   * tiles read it once for every row. */
  uint64_t my = tileDeps(T, T->y);
  for (size_t d = 0; d < T->n; ++d)
    if (d != T->dI && d != T->dJ && T->trips[d] > 1 && !(my >> d & 1))
      return TILE_SMALL_M_DECLINED;
  bool dot = T->packY;
  if (dot ? !tileDotApplies(T, W) : N < (int64_t)W)
    return TILE_SMALL_M_DECLINED;

  TileGen G;
  memset(&G, 0, sizeof G);
  G.T = T;
  G.ctx = T->ctx;
  G.loc = fzOpGetLoc(T->par);
  G.W = W;
  G.idx = fzIndexTypeGet(T->ctx);
  int64_t w = W;
  G.vecF32 = fzVectorTypeGet(T->ctx, 1, &w, fzF32TypeGet(T->ctx), NULL);
  if (!G.vecF32)
    return TILE_SMALL_M_DECLINED;
  fzBuilderInit(&G.top, T->ctx);
  fzBuilderSetInsertionPointBefore(&G.top, T->par);
  fzBuilderInit(&G.consts, T->ctx);
  fzBuilderSetInsertionPointToStart(&G.consts, fzOpGetBlock(T->par));

  unsigned budget = acc_budget(o->vectorBits);
  unsigned MR = rows_per_group(M, budget);
  char plan[256];
  if (dot) {
    /* J rows of the weight stream at once; 4 measured best for M = 1
     * (docs/benchmarks.md, "CPU: small-M contractions"). */
    unsigned J = budget / MR;
    J = J < 1 ? 1 : J > 4 ? 4 : J;
    /* Few columns: narrower groups, so that there are enough of them
     * for the threads (kMinGroups). */
    while (J > 1 && N / J < kMinGroups)
      --J;
    snprintf(plan, sizeof plan,
             "small-M contraction, weight contiguous along k (dot form): "
             "%lld rows in groups of %u, %u columns per group, %u lanes "
             "along k, lane sums, scalar epilogue",
             (long long)M, MR, J, W);
    if (!tileEmitDot(&G, J, MR, plan))
      return G.failed ? TILE_SMALL_M_FAILED : TILE_SMALL_M_DECLINED;
    fzOpErase(T->par);
    return TILE_SMALL_M_DONE;
  }
  unsigned NV = budget / MR;
  NV = NV < 1 ? 1 : NV > 4 ? 4 : NV;
  while (NV > 1 && N / ((int64_t)NV * W) < kMinGroups)
    --NV;
  int64_t KB = o->smallMKBlock ? o->smallMKBlock : M <= 2 ? 8 : 128;
  int64_t cols = o->smallMColumns ? o->smallMColumns : 512;
  snprintf(
      plan, sizeof plan,
      "small-M contraction, weight contiguous along n (stream form): "
      "%lld rows in groups of %u, tiles of %u vectors of %u lanes, "
      "groups of %lld columns, k in blocks of %lld",
      (long long)M, MR, NV, W,
      (long long)(cols / ((int64_t)NV * W) > 0 ? cols / ((int64_t)NV * W) : 1) *
          NV * W,
      (long long)KB);
  if (!emit_stream(&G, NV, MR, KB, cols, plan))
    return G.failed ? TILE_SMALL_M_FAILED : TILE_SMALL_M_DECLINED;
  int64_t Nv = N / W * W;
  if (Nv == N) {
    fzOpErase(T->par);
  } else {
    FzValue *lb = fzLoopCreateIndexConstant(&G.consts, G.loc, Nv);
    if (!lb)
      return TILE_SMALL_M_FAILED;
    fzOpSetOperand(T->par, T->dJ, lb);
  }
  return TILE_SMALL_M_DONE;
}

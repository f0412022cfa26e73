/* transforms/loop/tile_small_m.c - tile-contractions for few rows: the
 * choice between the small-M mappings, and the one for a weight that is
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
 * The stream form splits k into C chunks, so that each parallel
 * iteration reads one contiguous block of the weight (rows k of its
 * chunk, every column), whatever N and the thread count; with W lanes,
 * tiles of MR rows x NV vectors and blocks of KB values of k:
 *
 *   P = loop.alloc [other dims, C, M, Nv] f32      (partial sums)
 *   loop.parallel (t) over (other dims x chunks c):
 *     P[.., c, ..] = 0
 *     loop.for kb over the chunk's blocks of KB:
 *       loop.for tile (every column):
 *         per row group: acc = P[..]; loop.for k in the block:
 *           prefetch y(k, j0 + D ..)
 *           acc[r][c] = fma(splat(x(i0 + r, k)), y(k, j0 + c W ..), acc)
 *         P[..] = acc
 *   loop.parallel (t) over (other dims x tiles):
 *     acc = init + the C partial sums; the epilogue on the accumulators
 *     as vector ops; vector stores
 *
 * Within a block the thread reads KB whole rows of the weight, one tile
 * after the other (KB streams, every accumulator in registers for KB
 * fmas), and prefetches D columns ahead in each. The last N % W columns
 * keep the original nest, as in tile-contractions.
 *
 * Invariants: as tile-contractions' (a nest whose y cannot be read along
 * j or k stays for the ordinary tiles). Sums are reassociated as
 * loop.reduction allows: k in order within a chunk, then the chunks'
 * sums.
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

/* Parallel iterations wanted at least, where the shape allows: one per
 * thread of a 16-core machine. */
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
  FzValue *P; /* the partial sums [other dims, C, M, Nv] f32 */
  FzValue *outer[TILE_MAX_DIMS];
  int64_t KB;       /* values of k per block */
  int64_t C, chunk; /* chunks of k, values of k per chunk */
  unsigned MR;      /* rows per row group */
  const char *plan;
} Stream;

/* P's indices for chunk c, row r and column col. */
static size_t partial_indices(Stream *S, FzValue *c, FzValue *row, FzValue *col,
                              FzValue **ops) {
  size_t n = 0;
  for (size_t d = 0; d < S->T->n; ++d)
    if (d != S->T->dI && d != S->T->dJ)
      ops[n++] = S->outer[d];
  ops[n++] = c;
  ops[n++] = row;
  ops[n++] = col;
  return n;
}

static FzValue *load_partial(Stream *S, FzLoopBuilder *b, FzValue *c,
                             FzValue *row, FzValue *col) {
  FzValue *ops[TILE_MAX_DIMS + 4];
  ops[0] = S->P;
  size_t n = 1 + partial_indices(S, c, row, col, ops + 1);
  return fzBOp1(b, "loop.vector_load", n, ops, S->G->vecF32);
}

static void store_partial(Stream *S, FzLoopBuilder *b, FzValue *v, FzValue *c,
                          FzValue *row, FzValue *col) {
  FzValue *ops[TILE_MAX_DIMS + 5];
  ops[0] = v;
  ops[1] = S->P;
  size_t n = 2 + partial_indices(S, c, row, col, ops + 2);
  fzBOp(b, "loop.vector_store", n, ops, NULL);
}

/* The columns of tile tt's vectors (tiles of R->nv vectors from
 * R->col0). */
static void tile_columns(Stream *S, FzLoopBuilder *b, const TileRegion *R,
                         FzValue *tt, FzValue **cols) {
  TileGen *G = S->G;
  FzValue *j0 = fzBAffine(b, tt, (int64_t)R->nv * G->W, R->col0);
  for (unsigned c = 0; c < R->nv; ++c)
    cols[c] = c == 0 ? j0 : fzBAffine(b, j0, 1, (int64_t)c * G->W);
}

/* A loop over R's tiles at b; the columns of the current tile's vectors
 * go to cols. */
static FzOp *tile_loop(Stream *S, FzLoopBuilder *b, const TileRegion *R,
                       FzValue **cols, FzLoopBuilder *inner) {
  TileGen *G = S->G;
  FzOp *loop = fzBFor(b, fzBIndex(b, 0), fzBIndex(b, R->colBlocks),
                      fzBIndex(b, 1), 0, NULL, G->idx, inner);
  if (loop)
    tile_columns(S, inner, R, fzBlockGetArgument(fzLoopGetBody(loop), 0), cols);
  return loop;
}

/* An instance of rows [r0, r0 + R->mr) of a tile whose columns are
 * cols, materializing at b. */
static TileInst *stream_inst(Stream *S, const TileRegion *R, int64_t r0,
                             FzValue *const *cols, FzLoopBuilder *b) {
  TileInst *I = tileInstCreate(S->G, R);
  if (!I)
    return NULL;
  for (unsigned r = 0; r < R->mr; ++r)
    I->rows[r] = fzBIndex(b, r0 + r);
  for (unsigned c = 0; c < R->nv; ++c)
    I->cols[c] = cols[c];
  memcpy(I->outer, S->outer, sizeof I->outer);
  I->pre = b->ip;
  I->post = b->ip;
  return I;
}

/* Rows [r0, r0 + R->mr) of one tile for k in [kbeg, kend) of chunk c:
 * P in, the k loop, P out. */
static bool accumulate(Stream *S, const TileRegion *R, int64_t r0,
                       FzValue *const *cols, FzLoopBuilder *b, FzValue *c,
                       FzValue *kbeg, FzValue *kend) {
  TileGen *G = S->G;
  TileInst *I = stream_inst(S, R, r0, cols, b);
  if (!I)
    return false;
  size_t na = (size_t)R->mr * R->nv;
  FzValue *init[TILE_MAX_ROWS * TILE_MAX_VECS];
  for (unsigned r = 0; r < R->mr; ++r)
    for (unsigned v = 0; v < R->nv; ++v)
      init[r * R->nv + v] = load_partial(S, b, c, I->rows[r], cols[v]);
  FzLoopBuilder kb;
  FzOp *loop = fzBFor(b, kbeg, kend, fzBIndex(b, 1), na, init, G->vecF32, &kb);
  if (loop) {
    I->kb = kb.ip;
    fzBuilderInit(&I->pre, G->ctx);
    fzBuilderSetInsertionPointBefore(&I->pre, loop);
    FzBlock *kbody = fzLoopGetBody(loop);
    I->k = fzBlockGetArgument(kbody, 0);
    for (size_t a = 0; a < na; ++a)
      I->accIn[a] = fzBlockGetArgument(kbody, 1 + a);
    FzValue *next[TILE_MAX_ROWS * TILE_MAX_VECS];
    FzValue *addRes = fzOpGetResult(S->T->add, 0);
    for (unsigned r = 0; r < R->mr; ++r)
      for (unsigned v = 0; v < R->nv; ++v)
        next[r * R->nv + v] = tileMaterialize(I, addRes, (int)r, (int)v);
    if (!G->failed && !fzOpSetOperands(fzBlockGetLastOp(kbody), na, next))
      G->failed = true;
    for (unsigned r = 0; r < R->mr && !G->failed; ++r)
      for (unsigned v = 0; v < R->nv; ++v)
        store_partial(S, b, fzOpGetResult(loop, r * R->nv + v), c, I->rows[r],
                      cols[v]);
  }
  tileInstDestroy(I);
  return !G->failed;
}

/* Splits t (a linear parallel index) into (t % n, the other dims). */
static FzValue *split_outer(Stream *S, FzLoopBuilder *b, FzValue *t,
                            int64_t n) {
  TileNest *T = S->T;
  FzValue *i = fzBIndexOp(b, "loop.remsi", t, fzBIndex(b, n));
  FzValue *q = fzBIndexOp(b, "loop.divsi", t, fzBIndex(b, n));
  for (size_t d = T->n; d-- > 0;) {
    if (d == T->dI || d == T->dJ)
      continue;
    S->outer[d] = fzBIndexOp(b, "loop.remsi", q, fzBIndex(b, T->trips[d]));
    q = fzBIndexOp(b, "loop.divsi", q, fzBIndex(b, T->trips[d]));
  }
  return i;
}

static int64_t outer_trips(TileNest *T) {
  int64_t n = 1;
  for (size_t d = 0; d < T->n; ++d)
    if (d != T->dI && d != T->dJ)
      n *= T->trips[d];
  return n;
}

static FzOp *planned_parallel(Stream *S, int64_t total, FzValue **t,
                              FzLoopBuilder *body) {
  TileGen *G = S->G;
  FzLoopBuilder top = tileAt(G, &G->top);
  FzOp *par = fzBParallel(&top, 1, &total, t, body);
  if (par &&
      !fzOpSetAttr(par, FZ_STR("fuse.plan"),
                   fzStringAttrGet(G->ctx, fzStringRefFromCString(S->plan))))
    G->failed = true;
  return G->failed ? NULL : par;
}

/* The first nest: each chunk of k into its partial sums, for the tiles of
 * the regions R[0..nr). */
static bool emit_partials(Stream *S, const TileRegion *R, size_t nr) {
  TileGen *G = S->G;
  TileNest *T = S->T;
  int64_t M = T->trips[T->dI], K = T->K;
  FzValue *t;
  FzLoopBuilder body, in;
  if (!planned_parallel(S, S->C * outer_trips(T), &t, &body))
    return false;
  FzValue *c = split_outer(S, &body, t, S->C);
  FzValue *kbeg = fzBAffine(&body, c, S->chunk, 0);
  FzValue *cols[TILE_MAX_VECS];
  FzLoopBuilder cb = tileAt(G, &G->consts);
  FzValue *zero = fzBConst(&cb, fzF32TypeGet(G->ctx), 0.0);
  FzValue *zv = zero ? fzBOp1(&cb, "loop.splat", 1, &zero, G->vecF32) : NULL;
  for (size_t i = 0; i < nr && zv; ++i) {
    if (!tile_loop(S, &body, &R[i], cols, &in))
      return false;
    for (int64_t r = 0; r < M; ++r)
      for (unsigned v = 0; v < R[i].nv; ++v)
        store_partial(S, &in, zv, c, fzBIndex(&body, r), cols[v]);
  }
  int64_t blocks = (S->chunk + S->KB - 1) / S->KB;
  FzLoopBuilder kbb;
  FzOp *kloop = fzBFor(&body, fzBIndex(&body, 0), fzBIndex(&body, blocks),
                       fzBIndex(&body, 1), 0, NULL, G->idx, &kbb);
  if (!kloop)
    return false;
  FzValue *kb = fzBlockGetArgument(fzLoopGetBody(kloop), 0);
  FzValue *b0 =
      fzBIndexOp(&kbb, "loop.addi", kbeg, fzBAffine(&kbb, kb, S->KB, 0));
  /* The block ends at the chunk's end or K (the last chunk may be
   * shorter, and its last blocks empty). */
  FzValue *b1 = fzBIndexOp(&kbb, "loop.minsi", fzBAffine(&kbb, b0, 1, S->KB),
                           fzBIndexOp(&kbb, "loop.minsi",
                                      fzBAffine(&kbb, kbeg, 1, S->chunk),
                                      fzBIndex(&body, K)));
  TileRegion part;
  for (size_t i = 0; i < nr && !G->failed; ++i) {
    if (!tile_loop(S, &kbb, &R[i], cols, &in))
      return false;
    part = R[i];
    for (int64_t r0 = 0; r0 < M && !G->failed; r0 += S->MR) {
      part.mr = (unsigned)(M - r0 < S->MR ? M - r0 : S->MR);
      accumulate(S, &part, r0, cols, &in, c, b0, b1);
    }
  }
  return !G->failed;
}

/* The second nest, per region: the chunks' partial sums added to the
 * reduction's initial value, the epilogue, the stores. */
static bool emit_final(Stream *S, const TileRegion *R) {
  TileGen *G = S->G;
  TileNest *T = S->T;
  int64_t M = T->trips[T->dI];
  FzValue *t;
  FzLoopBuilder body;
  if (!planned_parallel(S, R->colBlocks * outer_trips(T), &t, &body))
    return false;
  FzValue *tt = split_outer(S, &body, t, R->colBlocks);
  FzValue *cols[TILE_MAX_VECS];
  tile_columns(S, &body, R, tt, cols);
  TileRegion part = *R;
  for (int64_t r0 = 0; r0 < M && !G->failed; r0 += S->MR) {
    part.mr = (unsigned)(M - r0 < S->MR ? M - r0 : S->MR);
    TileInst *I = stream_inst(S, &part, r0, cols, &body);
    if (!I)
      return false;
    size_t na = (size_t)part.mr * part.nv;
    FzValue *init[TILE_MAX_ROWS * TILE_MAX_VECS];
    FzValue *iv = tileAsVector(I, fzOpGetOperand(T->red, 3), 0, 0);
    for (size_t a = 0; a < na; ++a)
      init[a] = iv;
    FzLoopBuilder cb;
    FzOp *loop = fzBFor(&body, fzBIndex(&body, 0), fzBIndex(&body, S->C),
                        fzBIndex(&body, 1), na, init, G->vecF32, &cb);
    if (loop) {
      FzBlock *cbody = fzLoopGetBody(loop);
      FzValue *c = fzBlockGetArgument(cbody, 0);
      FzValue *next[TILE_MAX_ROWS * TILE_MAX_VECS];
      for (unsigned r = 0; r < part.mr; ++r)
        for (unsigned v = 0; v < part.nv; ++v) {
          size_t a = r * part.nv + v;
          FzValue *ops[2] = {fzBlockGetArgument(cbody, 1 + a),
                             load_partial(S, &cb, c, I->rows[r], cols[v])};
          next[a] = fzBOp1(&cb, "loop.addf", 2, ops, G->vecF32);
        }
      if (!G->failed && !fzOpSetOperands(fzBlockGetLastOp(cbody), na, next))
        G->failed = true;
      for (size_t a = 0; a < na; ++a)
        I->accOut[a] = fzOpGetResult(loop, a);
      I->post = body.ip;
      if (!G->failed)
        tileEmitStores(I);
    }
    tileInstDestroy(I);
  }
  return !G->failed;
}

/* Emits the stream form for the columns [0, N / W * W) with tiles of NV
 * vectors (then single vectors); the caller restricts the original
 * nest to the rest. */
static bool emit_stream(Stream *S, unsigned NV) {
  TileGen *G = S->G;
  TileNest *T = S->T;
  unsigned W = G->W;
  int64_t M = T->trips[T->dI], N = T->trips[T->dJ];
  int64_t NR = (int64_t)NV * W, Nf = N / NR * NR, Nv = N / W * W;
  int64_t shape[TILE_MAX_DIMS + 3];
  size_t rank = 0;
  for (size_t d = 0; d < T->n; ++d)
    if (d != T->dI && d != T->dJ)
      shape[rank++] = T->trips[d];
  shape[rank++] = S->C;
  shape[rank++] = M;
  shape[rank++] = Nv;
  FzType *bt =
      fzBufferTypeGet(G->ctx, rank, shape, fzF32TypeGet(G->ctx), NULL, 0, NULL);
  FzLoopBuilder top = tileAt(G, &G->top);
  S->P = bt ? fzBOp1(&top, "loop.alloc", 0, NULL, bt) : NULL;
  if (!S->P)
    return G->failed = true, false;
  TileRegion R[2];
  size_t nr = 0;
  if (Nf > 0)
    R[nr++] = (TileRegion){S->MR, NV, 0, M, 0, Nf / NR};
  if (Nv > Nf)
    R[nr++] = (TileRegion){S->MR, 1, 0, M, Nf, (Nv - Nf) / W};
  emit_partials(S, R, nr);
  for (size_t i = 0; i < nr && !G->failed; ++i)
    emit_final(S, &R[i]);
  fzBOp(&top, "loop.dealloc", 1, &S->P, NULL);
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
  char plan[320];
  if (dot) {
    /* J rows of the weight stream at once (4 measured best for M = 1:
     * docs/benchmarks.md, "CPU: small-M contractions"), as many as the
     * accumulators allow; fewer when N leaves too few groups. */
    unsigned J = budget / MR;
    J = J < 1 ? 1 : J > 4 ? 4 : J;
    while (J > 1 && N / J < kMinGroups)
      --J;
    G.prefetch = o->smallMPrefetch < 0    ? 0
                 : o->smallMPrefetch == 0 ? 256
                                          : o->smallMPrefetch;
    snprintf(plan, sizeof plan,
             "small-M contraction, weight contiguous along k (dot form): "
             "%lld rows in groups of %u, %u columns per group, %u lanes "
             "along k, lane sums, scalar epilogue; weight prefetched %lld "
             "ahead",
             (long long)M, MR, J, W, (long long)G.prefetch);
    if (!tileEmitDot(&G, J, MR, plan))
      return G.failed ? TILE_SMALL_M_FAILED : TILE_SMALL_M_DECLINED;
    fzOpErase(T->par);
    return TILE_SMALL_M_DONE;
  }
  unsigned NV = budget / MR;
  NV = NV < 1 ? 1 : NV > 4 ? 4 : NV;
  Stream S;
  memset(&S, 0, sizeof S);
  S.G = &G;
  S.T = T;
  S.MR = MR;
  /* Blocks of k: as many row streams as the prefetchers follow well for
   * one row (8), 16 when more rows make each block longer in time. */
  S.KB = o->smallMKBlock ? o->smallMKBlock : M <= 2 ? 8 : 16;
  /* Chunks of k: one per thread (each reads one contiguous block of the
   * weight), each at least 64 values of k long (its partial sums are
   * re-read per block of k, and all of them summed at the end). */
  int64_t C = o->smallMKSplit ? o->smallMKSplit
              : o->threads    ? o->threads
                              : kMinGroups;
  if (!o->smallMKSplit && C > T->K / 64)
    C = T->K / 64;
  C = C < 1 ? 1 : C > T->K ? T->K : C;
  S.chunk = (T->K + C - 1) / C;
  S.C = (T->K + S.chunk - 1) / S.chunk;
  /* Four tiles ahead in the row being read. */
  G.prefetch = o->smallMPrefetch < 0    ? 0
               : o->smallMPrefetch == 0 ? 4 * (int64_t)NV * W
                                        : o->smallMPrefetch;
  snprintf(plan, sizeof plan,
           "small-M contraction, weight contiguous along n (stream form): "
           "%lld rows in groups of %u, tiles of %u vectors of %u lanes, k "
           "in %lld chunks of %lld in blocks of %lld, partial sums added "
           "at the end; weight prefetched %lld ahead",
           (long long)M, MR, NV, W, (long long)S.C, (long long)S.chunk,
           (long long)S.KB, (long long)G.prefetch);
  S.plan = plan;
  if (!emit_stream(&S, NV))
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

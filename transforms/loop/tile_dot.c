/* transforms/loop/tile_dot.c - the small-M mapping of tile-contractions
 * for a weight that is contiguous along k: y(k, j) = w[j, k], the layout
 * of PyTorch's nn.Linear (Gemm with transB = 1, a matmul with
 * transpose_b).
 *
 * With few rows (M <= FzTileContractionsOptions.smallM) the product reads
 * each weight once and does 2 M flops with it: it is bound by memory, and
 * the tiles of tile-contractions (which pack y, one more pass over the
 * weight, to read it along j) waste most of the bandwidth. Here each
 * thread streams whole rows of w instead, with vector loads along k:
 *
 *   loop.parallel (t) over (other dims x column groups of J):
 *     scratch = loop.alloc [W] f32              (the thread's stack)
 *     per group of MR rows (all M rows when the accumulators fit):
 *       acc[MR][J] = loop.for k = 0 to Kv step W:     (Kv = K / W * W)
 *         acc[r][c] = fma(x(i0 + r, k ..), y(k .., j0 + c), acc[r][c])
 *       s[r][c] = init + the sum of acc[r][c]'s lanes (halves added
 *                 through scratch, log2 W steps)
 *       s = loop.for k = Kv to K: s[r][c] = fma(x(..., k), y(k, ...), s)
 *       the epilogue on each s[r][c] (scalar), scalar stores
 *
 * so x's MR rows are read from the caches while the J rows of w stream
 * from memory (J concurrent streams give the prefetchers enough to do).
 * Columns N / J * J and on are a second nest with J = 1.
 *
 * Invariants: only applies when every value of the reduction's body
 * that depends on k can be computed W lanes at a time along k (loads
 * whose last index is k on a dimension of stride 1, no other index
 * depending on k; no index arithmetic on k). The sum of each output is
 * reassociated (W partial sums, then a tree), as loop.reduction allows.
 */
#include <string.h>

#include "fz/loop.h"
#include "transforms/loop/tile_internal.h"

#define DOT_SLOTS ((TILE_MAX_ROWS + 1) * (TILE_DOT_MAX_COLS + 1))

enum { PH_PRE, PH_K, PH_POST, PH_COUNT };

typedef struct Dot {
  TileGen *G;
  TileNest *T;
  unsigned nr, nc; /* rows and columns of the instances */
  FzValue *rows[TILE_MAX_ROWS];
  FzValue *cols[TILE_DOT_MAX_COLS];
  FzValue *outer[TILE_MAX_DIMS];
  FzValue *k; /* k of the loop being emitted (lane 0's when vec) */
  bool vec;   /* in the vector loop: k-dependent values are vector<W> */
  FzValue *acc[TILE_MAX_ROWS * TILE_DOT_MAX_COLS];  /* the loop's */
  FzValue *sums[TILE_MAX_ROWS * TILE_DOT_MAX_COLS]; /* the results */
  FzLoopBuilder b[PH_COUNT];
  FzPtrMap memo[PH_COUNT][DOT_SLOTS];
} Dot;

/*===--- Whether the mapping applies -------------------------------------===*/

static bool last_stride_one(FzType *bt) {
  size_t rank = fzShapedTypeGetRank(bt);
  const int64_t *s = fzBufferTypeGetStrides(bt);
  return rank > 0 && (!s || s[rank - 1] == 1);
}

bool tileDotApplies(const TileNest *T, unsigned W) {
  if (T->K < (int64_t)W)
    return false;
  FzValue *kiv = fzBlockGetArgument(T->redBody, 0);
  FzOp *yield = fzBlockGetLastOp(T->redBody);
  for (FzOp *op = fzBlockGetFirstOp(T->redBody); op && op != yield;
       op = fzOpGetNextInBlock(op)) {
    if (op == T->add)
      continue;
    uint64_t m = 0;
    for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
      m |= tileDeps(T, fzOpGetOperand(op, i));
    if (!(m & TK))
      continue;
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_LOAD) {
      size_t n = fzOpGetNumOperands(op);
      if (n < 2 || fzOpGetOperand(op, n - 1) != kiv ||
          !last_stride_one(fzValueGetType(fzOpGetOperand(op, 0))))
        return false;
      for (size_t i = 0; i + 1 < n; ++i)
        if (tileDeps(T, fzOpGetOperand(op, i)) & TK)
          return false;
      continue;
    }
    if (!tilePlainOp(op) ||
        fzTypeGetKind(fzValueGetType(fzOpGetResult(op, 0))) == FZ_TYPE_INDEX)
      return false;
    for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
      if (fzOpGetOperand(op, i) == kiv)
        return false;
  }
  return true;
}

/*===--- Materializing values ---------------------------------------------===*/

static size_t dot_slot(int ri, int ci) {
  return (size_t)(ri + 1) * (TILE_DOT_MAX_COLS + 1) + (size_t)(ci + 1);
}

static int phase_of(Dot *D, FzOp *def) {
  if (fzOpGetBlock(def) == D->T->redBody)
    return PH_K;
  return fzOpIsBeforeInBlock(def, D->T->red) ? PH_PRE : PH_POST;
}

static FzValue *dot_value(Dot *D, FzValue *v, int r, int c);

/* v for instance (r, c), as a vector<W> in the vector loop (splatted
 * when it is a scalar there). */
static FzValue *dot_vector(Dot *D, FzValue *v, int r, int c) {
  FzValue *m = dot_value(D, v, r, c);
  if (!m || !D->vec || fzTypeGetKind(fzValueGetType(m)) == FZ_TYPE_VECTOR)
    return m;
  FzPtrMap *sp = &D->memo[PH_K][dot_slot(-1, -1)];
  FzValue *s = fzPtrMapGet(sp, m);
  if (s)
    return s;
  s = fzBOp1(&D->b[PH_K], "loop.splat", 1, &m,
             fzBVectorType(&D->b[PH_K], D->G->W, fzValueGetType(m)));
  if (s && !fzPtrMapPut(sp, m, s))
    D->G->failed = true;
  return s;
}

static FzValue *dot_value(Dot *D, FzValue *v, int r, int c) {
  TileNest *T = D->T;
  TileGen *G = D->G;
  if (!v || G->failed)
    return NULL;
  if (!tileInNest(T, v))
    return v;
  uint64_t m = tileDeps(T, v);
  int ri = (m & TACC) || (m >> T->dI & 1) ? r : -1;
  int ci = (m & TACC) || (m >> T->dJ & 1) ? c : -1;
  size_t ai = (size_t)(r < 0 ? 0 : r) * D->nc + (size_t)(c < 0 ? 0 : c);
  if (fzValueIsBlockArgument(v)) {
    FzBlock *b = fzValueGetParentBlock(v);
    size_t k = fzValueGetIndex(v);
    if (b == T->body)
      return k == T->dI ? D->rows[r] : k == T->dJ ? D->cols[c] : D->outer[k];
    if (b == T->redBody && k == 0)
      return D->k;
    if (b == T->redBody && k == 1)
      return D->acc[ai];
    G->failed = true;
    return NULL;
  }
  FzOp *def = fzValueGetDefiningOp(v);
  if (def == T->red)
    return D->sums[ai];
  int ph = phase_of(D, def);
  bool vec = D->vec && ph == PH_K && (m & TK);
  FzPtrMap *memo = &D->memo[ph][dot_slot(ri, ci)];
  FzValue *res = fzPtrMapGet(memo, v);
  if (res)
    return res;
  FzLoopBuilder *b = &D->b[ph];
  FzLoopOpcode code = fzLoopGetOpcode(def);
  size_t n = fzOpGetNumOperands(def);
  FzValue *ops[TILE_MAX_DIMS + 2];
  if (n > TILE_MAX_DIMS + 2) {
    G->failed = true;
    return NULL;
  }
  if (def == T->add) {
    FzValue *fops[3] = {
        D->vec ? dot_vector(D, T->x, r, c) : dot_value(D, T->x, r, c),
        D->vec ? dot_vector(D, T->y, r, c) : dot_value(D, T->y, r, c),
        D->acc[ai]};
    res = fzBOp1(b, "loop.fma", 3, fops,
                 D->vec ? G->vecF32 : fzF32TypeGet(G->ctx));
  } else if (code == FZ_LOOP_OP_LOAD) {
    /* Its last index is k when it depends on k (tileDotApplies). */
    for (size_t i = 0; i < n; ++i)
      ops[i] = dot_value(D, fzOpGetOperand(def, i), r, c);
    FzType *t = fzValueGetType(v);
    res = fzBOp1(b, vec ? "loop.vector_load" : "loop.load", n, ops,
                 vec ? fzBVectorType(b, G->W, t) : t);
    /* The weight's rows (the loads that vary with the column) are
     * prefetched G->prefetch elements ahead along k. */
    if (vec && ci >= 0 && G->prefetch > 0)
      fzBPrefetch(b, n, ops, G->prefetch);
  } else {
    for (size_t i = 0; i < n; ++i) {
      FzValue *o = fzOpGetOperand(def, i);
      /* A select keeps a scalar condition that does not vary along k. */
      bool scalar =
          code == FZ_LOOP_OP_SELECT && i == 0 && !(tileDeps(T, o) & TK);
      ops[i] = vec && !scalar ? dot_vector(D, o, r, c) : dot_value(D, o, r, c);
    }
    FzType *t = fzValueGetType(v);
    res = fzBCloneWith(b, def, ops, vec ? fzBVectorType(b, G->W, t) : t);
  }
  if (res && !fzPtrMapPut(memo, v, res))
    G->failed = true;
  return res;
}

static void memo_clear(Dot *D, int ph) {
  for (size_t s = 0; s < DOT_SLOTS; ++s) {
    fzPtrMapFree(&D->memo[ph][s]);
    fzPtrMapInit(&D->memo[ph][s], D->G->ctx);
  }
}

/*===--- Emitting ---------------------------------------------------------===*/

static FzOp *make_for(FzLoopBuilder *b, int64_t lb, int64_t ub, int64_t st,
                      size_t n, FzValue *const *init, FzType *t,
                      FzLoopBuilder *inner) {
  return fzBFor(b, fzBIndex(b, lb), fzBIndex(b, ub), fzBIndex(b, st), n, init,
                t, inner);
}

/* The sum of v's W lanes: halves added through scratch. */
static FzValue *lane_sum(TileGen *G, FzLoopBuilder *b, FzValue *scratch,
                         FzValue *v) {
  FzValue *zero = fzBIndex(b, 0);
  for (int64_t w = G->W; w > 1 && v; w /= 2) {
    FzValue *sops[3] = {v, scratch, zero};
    fzBOp(b, "loop.vector_store", 3, sops, NULL);
    int64_t h = w / 2;
    FzType *t =
        h == 1 ? fzF32TypeGet(G->ctx)
               : fzVectorTypeGet(G->ctx, 1, &h, fzF32TypeGet(G->ctx), NULL);
    const char *ld = h == 1 ? "loop.load" : "loop.vector_load";
    FzValue *lo[2] = {scratch, zero};
    FzValue *hi[2] = {scratch, fzBIndex(b, h)};
    FzValue *ab[2] = {fzBOp1(b, ld, 2, lo, t), fzBOp1(b, ld, 2, hi, t)};
    v = fzBOp1(b, "loop.addf", 2, ab, t);
  }
  return v;
}

/* Rows [r0, r0 + nr) of the group whose columns D->cols are set. */
static bool emit_rows(Dot *D, FzLoopBuilder *body, FzValue *scratch,
                      int64_t r0) {
  TileGen *G = D->G;
  TileNest *T = D->T;
  size_t na = (size_t)D->nr * D->nc;
  for (unsigned r = 0; r < D->nr; ++r)
    D->rows[r] = fzBIndex(body, r0 + r);
  for (int ph = 0; ph < PH_COUNT; ++ph) {
    memo_clear(D, ph);
    D->b[ph] = *body;
  }
  /* The vector loop over k. */
  int64_t W = G->W, Kv = T->K / W * W;
  FzValue *init[TILE_MAX_ROWS * TILE_DOT_MAX_COLS] = {NULL};
  FzLoopBuilder cb = tileAt(G, &G->consts);
  FzValue *zero = fzBConst(&cb, fzF32TypeGet(G->ctx), 0.0);
  FzValue *zv = zero ? fzBOp1(&cb, "loop.splat", 1, &zero, G->vecF32) : NULL;
  for (size_t a = 0; a < na; ++a)
    init[a] = zv;
  FzLoopBuilder kb;
  FzOp *loop = make_for(body, 0, Kv, W, na, init, G->vecF32, &kb);
  if (!loop)
    return false;
  D->b[PH_PRE] = fzBBefore(body, loop);
  D->b[PH_K] = kb;
  FzBlock *kbody = fzLoopGetBody(loop);
  D->k = fzBlockGetArgument(kbody, 0);
  D->vec = true;
  for (size_t a = 0; a < na; ++a)
    D->acc[a] = fzBlockGetArgument(kbody, 1 + a);
  FzValue *next[TILE_MAX_ROWS * TILE_DOT_MAX_COLS];
  FzValue *addRes = fzOpGetResult(T->add, 0);
  for (unsigned r = 0; r < D->nr; ++r)
    for (unsigned c = 0; c < D->nc; ++c)
      next[r * D->nc + c] = dot_value(D, addRes, (int)r, (int)c);
  if (G->failed || !fzOpSetOperands(fzBlockGetLastOp(kbody), na, next))
    return G->failed = true, false;
  /* Lane sums plus the reduction's initial value. */
  FzValue *s[TILE_MAX_ROWS * TILE_DOT_MAX_COLS];
  for (unsigned r = 0; r < D->nr; ++r)
    for (unsigned c = 0; c < D->nc; ++c) {
      size_t a = r * D->nc + c;
      FzValue *ops[2] = {
          dot_value(D, fzOpGetOperand(T->red, 3), (int)r, (int)c),
          lane_sum(G, body, scratch, fzOpGetResult(loop, a))};
      s[a] = fzBOp1(body, "loop.addf", 2, ops, fzF32TypeGet(G->ctx));
    }
  /* The last K % W terms, one at a time. */
  if (Kv < T->K) {
    memo_clear(D, PH_K);
    loop = make_for(body, Kv, T->K, 1, na, s, fzF32TypeGet(G->ctx), &kb);
    if (!loop)
      return false;
    D->b[PH_K] = kb;
    kbody = fzLoopGetBody(loop);
    D->k = fzBlockGetArgument(kbody, 0);
    D->vec = false;
    for (size_t a = 0; a < na; ++a)
      D->acc[a] = fzBlockGetArgument(kbody, 1 + a);
    for (unsigned r = 0; r < D->nr; ++r)
      for (unsigned c = 0; c < D->nc; ++c)
        next[r * D->nc + c] = dot_value(D, addRes, (int)r, (int)c);
    if (G->failed || !fzOpSetOperands(fzBlockGetLastOp(kbody), na, next))
      return G->failed = true, false;
    for (size_t a = 0; a < na; ++a)
      s[a] = fzOpGetResult(loop, a);
  }
  for (size_t a = 0; a < na; ++a)
    D->sums[a] = s[a];
  /* The epilogue and the stores, instance by instance. */
  D->b[PH_POST] = *body;
  for (unsigned r = 0; r < D->nr && !G->failed; ++r)
    for (unsigned c = 0; c < D->nc && !G->failed; ++c)
      for (FzOp *op = fzBlockGetFirstOp(T->body); op && !G->failed;
           op = fzOpGetNextInBlock(op)) {
        if (fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE)
          continue;
        size_t n = fzOpGetNumOperands(op);
        FzValue *ops[TILE_MAX_DIMS + 3];
        if (n > TILE_MAX_DIMS + 3)
          return G->failed = true, false;
        for (size_t i = 0; i < n; ++i)
          ops[i] = dot_value(D, fzOpGetOperand(op, i), (int)r, (int)c);
        fzBOp(&D->b[PH_POST], "loop.store", n, ops, NULL);
      }
  return !G->failed;
}

/* One nest: columns [col0, col0 + groups * J) in groups of J. */
static bool emit_region(Dot *D, unsigned J, int64_t col0, int64_t groups,
                        unsigned MR, const char *plan) {
  TileGen *G = D->G;
  TileNest *T = D->T;
  int64_t total = groups;
  for (size_t d = 0; d < T->n; ++d)
    if (d != T->dI && d != T->dJ)
      total *= T->trips[d];
  FzValue *t;
  FzLoopBuilder top = tileAt(G, &G->top), body;
  FzOp *par = fzBParallel(&top, 1, &total, &t, &body);
  if (!par)
    return false;
  if (!fzOpSetAttr(par, FZ_STR("fuse.plan"),
                   fzStringAttrGet(G->ctx, fzStringRefFromCString(plan))))
    return G->failed = true, false;
  FzValue *g = fzBIndexOp(&body, "loop.remsi", t, fzBIndex(&body, groups));
  FzValue *q = fzBIndexOp(&body, "loop.divsi", t, fzBIndex(&body, groups));
  for (size_t d = T->n; d-- > 0;) {
    if (d == T->dI || d == T->dJ)
      continue;
    D->outer[d] =
        fzBIndexOp(&body, "loop.remsi", q, fzBIndex(&body, T->trips[d]));
    q = fzBIndexOp(&body, "loop.divsi", q, fzBIndex(&body, T->trips[d]));
  }
  FzValue *j0 = fzBAffine(&body, g, J, col0);
  D->nc = J;
  for (unsigned c = 0; c < J; ++c)
    D->cols[c] = c == 0 ? j0 : fzBAffine(&body, j0, 1, c);
  int64_t w = G->W;
  FzType *st =
      fzBufferTypeGet(G->ctx, 1, &w, fzF32TypeGet(G->ctx), NULL, 0, NULL);
  FzValue *scratch = st ? fzBOp1(&body, "loop.alloc", 0, NULL, st) : NULL;
  if (!scratch)
    return G->failed = true, false;
  int64_t M = T->trips[T->dI];
  for (int64_t r0 = 0; r0 < M && !G->failed; r0 += MR) {
    D->nr = (unsigned)(M - r0 < MR ? M - r0 : MR);
    emit_rows(D, &body, scratch, r0);
  }
  fzBOp(&body, "loop.dealloc", 1, &scratch, NULL);
  return !G->failed;
}

bool tileEmitDot(TileGen *G, unsigned J, unsigned MR, const char *plan) {
  TileNest *T = G->T;
  if (J < 1 || J > TILE_DOT_MAX_COLS || MR < 1 || MR > TILE_MAX_ROWS)
    return false;
  Dot *D = fzCalloc(G->ctx, 1, sizeof *D);
  if (!D)
    return G->failed = true, false;
  D->G = G;
  D->T = T;
  for (int ph = 0; ph < PH_COUNT; ++ph)
    for (size_t s = 0; s < DOT_SLOTS; ++s)
      fzPtrMapInit(&D->memo[ph][s], G->ctx);
  int64_t N = T->trips[T->dJ], Nj = N / J * J;
  if (Nj > 0)
    emit_region(D, J, 0, Nj / J, MR, plan);
  if (Nj < N && !G->failed)
    emit_region(D, 1, Nj, N - Nj, MR, plan);
  for (int ph = 0; ph < PH_COUNT; ++ph)
    for (size_t s = 0; s < DOT_SLOTS; ++s)
      fzPtrMapFree(&D->memo[ph][s]);
  fzFree(G->ctx, D);
  return !G->failed;
}

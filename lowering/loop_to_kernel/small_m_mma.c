/* lowering/loop_to_kernel/small_m_mma.c - the small-M kernel on tensor
 * cores, for a 16-bit W and x of the same type: from about 5 rows on,
 * the CUDA-core kernels (small_m_k.c, small_m_n.c) issue too many
 * instructions per weight (an fma per row, the widening, x's loads) to
 * keep up with the memory; mma.sync m16n8k16 takes x's rows as its
 * 16-row A (rows past M: copies of the last one, whose sums are never
 * stored) and 8 columns of W as its B.
 *
 *   group = block_id.x * (warps / S) + warp / S: its columns (cols),
 *   s = warp % S its share of k; chunks of 32 k go to the S warps in
 *   turn, `unroll` per trip. With g = lane / 4, t = lane % 4, lane l
 *   takes k0 + 8t .. k0 + 8t + 7 of each chunk: 16 bytes of x's rows g
 *   and g + 8 (A), four k-pairs each, which feed two mma of 16 k: mma 1
 *   pairs (0, 1) at A's and B's positions 2t + h and (2, 3) at 2t + 8 +
 *   h, mma 2 pairs (4, 5) and (6, 7). This deals k to the fragments in
 *   another order than PTX's, identically for A and B, so the sum is
 *   unchanged while x is one 16-byte load per row and lane instead of
 *   four of 4 bytes. B:
 *   - W contiguous along k (W[n, k], B's ".col" layout): T tiles of 8
 *     columns n0 + 8j + 0..7; the lane loads 16 bytes of row n0 + 8j + g
 *     of each tile: its pairs are B's registers as they are;
 *   - W contiguous along n (W[k, n]): T = 4 or 8 tiles over 8 T
 *     columns, tile c holding columns n0 + T g' + c (g' = 0..7); the lane
 *     loads T columns n0 + T g .. (8 or 16 bytes) of each of its 8 rows
 *     k0 + 8t + r and pairs row r with row r + 1 column by column (a
 *     byte permute).
 *   The accumulators (d0: row g, d1: row g + 8, B columns 2t, 2t + 1 of
 *   each tile) of the S warps are added through shared memory in warp
 *   order; then the epilogue of each of the lane's outputs whose row is
 *   below M and column below N.
 * K must be a multiple of 32 (fzSmallMChoose checks it).
 */
#include <string.h>

#include "lowering/loop_to_kernel/small_m.h"

#define MAX_TILES 8

typedef struct MGen {
  FzSmallMGen g;
  /* Along k: the tiles' W row of this lane (clamped); along n: wrow[0]
   * is the first of the lane's 8 columns (clamped). */
  FzValue *wrow[MAX_TILES];
  FzValue *xrow[2];         /* x's rows g and g + 8 (clamped) */
  FzValue *k8t;             /* 8t */
  FzValue *stride;          /* chunks between a warp's consecutive ones */
  FzType *v2;               /* vector<2 x W's type> */
  FzValue *acc[2 * MAX_TILES];
  unsigned tiles;
} MGen;

/* The 4 pairs of a 16-byte vector of 8 16-bit elements. */
static bool pairs(MGen *G, FzValue *v, FzValue **out) {
  FzLkBuild *kb = G->g.kb;
  for (unsigned p = 0; p < 4; ++p) {
    FzValue *e[2] = {fzSmallMExtract(kb, v, 2 * p),
                     fzSmallMExtract(kb, v, 2 * p + 1)};
    out[p] = fzLkOp(kb, "kernel.from_elements", G->v2, 2, e);
  }
  return !kb->failed;
}

/* kernel.mma m16n8k16 a[4], b[2], acc[0..1] -> acc[0..1]. */
static bool mma(MGen *G, FzValue *const *a, FzValue *const *b,
                FzValue **acc) {
  FzLkBuild *kb = G->g.kb;
  FzValue *ops[8] = {a[0], a[1], a[2], a[3], b[0], b[1], acc[0], acc[1]};
  for (size_t i = 0; i < 8; ++i)
    if (!ops[i])
      return kb->failed = true, false;
  FzType *res[2] = {fzValueGetType(acc[0]), fzValueGetType(acc[1])};
  FzOpState st;
  fzOpStateInit(&st, kb->ctx, FZ_STR("kernel.mma"), kb->loc);
  fzOpStateAddOperands(&st, 8, ops);
  fzOpStateAddProp(&st, FZ_STR("shape"),
                   fzStringAttrGet(kb->ctx, FZ_STR("m16n8k16")));
  fzOpStateAddResults(&st, 2, res);
  FzOp *op = kb->failed ? NULL : fzBuilderCreate(&kb->b, &st);
  if (!op) {
    if (kb->failed)
      fzOpStateDispose(&st);
    return kb->failed = true, false;
  }
  acc[0] = fzOpGetResult(op, 0);
  acc[1] = fzOpGetResult(op, 1);
  return true;
}

/* Column `col` of rows ra and rb (16-byte vectors) as one pair. */
static FzValue *column_pair(MGen *G, FzValue *ra, FzValue *rb, unsigned col) {
  FzLkBuild *kb = G->g.kb;
  FzValue *e[2] = {fzSmallMExtract(kb, ra, col), fzSmallMExtract(kb, rb, col)};
  return fzLkOp(kb, "kernel.from_elements", G->v2, 2, e);
}

/* One trip over `n` chunks from c: the loads, then the mma. w[u][j]:
 * along k, tile j's 16 bytes; along n, row k0 + 8t + j's. */
static bool trip(void *ud, FzValue *c, unsigned n) {
  MGen *G = ud;
  FzSmallMGen *g = &G->g;
  FzLkBuild *kb = g->kb;
  bool kc = g->m->kContig;
  FzValue *w[8][MAX_TILES], *xq[8], *xp[8];
  for (unsigned u = 0; u < n; ++u) {
    FzValue *cu = fzLkAdd(kb, c, fzLkMul(kb, G->stride, fzLkIndex(kb, u)));
    FzValue *kk = fzLkAdd(kb, fzLkMul(kb, cu, fzLkIndex(kb, 32)), G->k8t);
    for (unsigned j = 0; j < (kc ? G->tiles : 8); ++j)
      w[u][j] = kc ? fzSmallMLoadWVector(g, G->wrow[j], kk, 8)
                   : fzSmallMLoadWVector(g, fzLkAdd(kb, kk, fzLkIndex(kb, j)),
                                         G->wrow[0], G->tiles);
    xq[u] = fzSmallMLoadXVector(g, G->xrow[0], kk, 8);
    xp[u] = g->m->M > 8 ? fzSmallMLoadXVector(g, G->xrow[1], kk, 8) : xq[u];
  }
  for (unsigned u = 0; u < n; ++u) {
    FzValue *q[4], *p[4];
    if (!pairs(G, xq[u], q) || !pairs(G, xp[u], p))
      return false;
    FzValue *a[2][4] = {{q[0], p[0], q[1], p[1]}, {q[2], p[2], q[3], p[3]}};
    for (unsigned j = 0; j < G->tiles; ++j) {
      FzValue *b[4];
      if (kc && !pairs(G, w[u][j], b))
        return false;
      for (unsigned r = 0; !kc && r < 4; ++r)
        b[r] = column_pair(G, w[u][2 * r], w[u][2 * r + 1], j);
      if (!mma(G, a[0], b, &G->acc[2 * j]) ||
          !mma(G, a[1], b + 2, &G->acc[2 * j]))
        return false;
    }
  }
  return !kb->failed;
}

bool fzSmallMBuildMma(FzLkBuild *kb, const FzSmallMNest *m,
                      const FzSmallMShape *s) {
  MGen G;
  memset(&G, 0, sizeof G);
  FzSmallMGen *g = &G.g;
  if (!fzSmallMGenInit(g, kb, m, s))
    return false;
  unsigned T = s->cols / 8, U = s->unroll, S = s->splitWarps;
  G.tiles = T;
  int64_t two = 2;
  G.v2 = fzVectorTypeGet(kb->ctx, 1, &two, m->w.elt, kb->loc);
  FzType *vacc = fzVectorTypeGet(kb->ctx, 1, &two, g->f32, kb->loc);
  if (!G.v2 || !vacc)
    return kb->failed = true, false;
  FzValue *c4 = fzLkIndex(kb, 4);
  FzValue *n0 = fzLkMul(kb, g->group, fzLkIndex(kb, 8 * (int64_t)T));
  FzValue *gq = fzLkDiv(kb, g->lane, c4), *tq = fzLkRem(kb, g->lane, c4);
  bool ragged = g->ragged;
  for (unsigned j = 0; j < (m->kContig ? T : 1); ++j) {
    G.wrow[j] = m->kContig
                    ? fzLkAdd(kb, fzLkAdd(kb, n0, fzLkIndex(kb, 8 * j)), gq)
                    : fzLkAdd(kb, n0, fzLkMul(kb, gq, fzLkIndex(kb, T)));
    if (ragged)
      G.wrow[j] = fzLkBin(kb, "loop.minsi", G.wrow[j],
                          fzLkIndex(kb, m->N - (m->kContig ? 1 : T)));
  }
  FzValue *lastRow = fzLkIndex(kb, m->M - 1);
  G.xrow[0] = m->M < 8 ? fzLkBin(kb, "loop.minsi", gq, lastRow) : gq;
  G.xrow[1] = fzLkBin(kb, "loop.minsi", fzLkAdd(kb, gq, fzLkIndex(kb, 8)),
                      lastRow);
  G.k8t = fzLkMul(kb, tq, fzLkIndex(kb, 8));
  G.stride = fzLkIndex(kb, S);
  FzValue *zero = fzLkConst(kb, g->f32, 0.0);
  FzValue *z2[2] = {zero, zero};
  FzValue *zv = fzLkOp(kb, "kernel.from_elements", vacc, 2, z2);
  for (unsigned i = 0; i < 2 * T; ++i)
    G.acc[i] = zv;
  /* This warp's chunks of 32 k of the block's slice. */
  FzValue *c32 = fzLkIndex(kb, 32);
  FzValue *start = fzLkAdd(kb, fzLkDiv(kb, g->kLo, c32), g->sIdx);
  if (!fzSmallMChunkLoops(g, start, fzLkDiv(kb, g->kHi, c32), S, U, 2 * T,
                          G.acc, trip, &G))
    return false;

  /* The lane's 4T sums: vals[4j + 2r + h] = row g + 8r, column 2t + h of
   * tile j. */
  unsigned nv = 4 * T;
  FzValue *vals[4 * MAX_TILES];
  for (unsigned j = 0; j < T; ++j)
    for (unsigned r = 0; r < 2; ++r)
      for (unsigned h = 0; h < 2; ++h)
        vals[4 * j + 2 * r + h] = fzSmallMExtract(kb, G.acc[2 * j + r], h);
  FzValue *first = NULL;
  if (S > 1) {
    FzValue *red = fzSmallMShareVals(g, vals, nv);
    for (unsigned v = 0; v < nv && red; ++v)
      vals[v] = fzSmallMSumVal(g, red, nv, fzLkIndex(kb, v));
    if (!red)
      return false;
    first = fzLkCmp(kb, "eq", g->sIdx, fzLkIndex(kb, 0));
  }
  FzValue *cM = fzLkIndex(kb, m->M), *cN = fzLkIndex(kb, m->N);
  for (unsigned j = 0; j < T; ++j)
    for (unsigned r = 0; r < 2; ++r)
      for (unsigned h = 0; h < 2; ++h) {
        if (r == 1 && m->M <= 8)
          continue;
        /* B's column 2t + h of tile j: along n, column T (2t + h) + j
         * of the group's 8 T. */
        FzValue *row = fzLkAdd(kb, gq, fzLkIndex(kb, 8 * r));
        FzValue *col =
            m->kContig
                ? fzLkAdd(kb, fzLkAdd(kb, n0, fzLkIndex(kb, 8 * j + h)),
                          fzLkMul(kb, tq, fzLkIndex(kb, 2)))
                : fzLkAdd(kb, fzLkAdd(kb, n0, fzLkIndex(kb, T * h + j)),
                          fzLkMul(kb, tq, fzLkIndex(kb, 2 * T)));
        FzValue *cond = first;
        if (m->M < 8 * (r + 1))
          cond = fzSmallMAnd(kb, cond, fzLkCmp(kb, "slt", row, cM));
        if (ragged)
          cond = fzSmallMAnd(kb, cond, fzLkCmp(kb, "slt", col, cN));
        if (!fzSmallMEpilogue(g, row, col, vals[4 * j + 2 * r + h], cond))
          return false;
      }
  return !kb->failed;
}

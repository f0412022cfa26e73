/* lowering/loop_to_kernel/small_m_k.c - the small-M kernel of a weight
 * contiguous along k (W[n, k]: nn.Linear's layout, transpose_b).
 *
 *   group = block_id.x * (warps / S) + warp / S   (C columns n0..n0+C-1)
 *   s     = warp % S                              (its share of k)
 *   each lane: chunks c = cLo + s*32 + lane, step 32*S, of `vec`
 *   consecutive k (16-byte loads of W, ld.global.nc; x's chunk of every
 *   row alike, from L1/L2), `unroll` chunks per trip with the loads of
 *   all C columns first, acc[m][col] += x[m][k] * W[col][k] in f32 (fma);
 *   a remainder loop of one chunk per trip;
 *   the warp's M x C partial sums (padded to P', a power of two) are
 *   reduced across its 32 lanes by a reduce-scatter: at each xor-shuffle
 *   step a lane keeps half of its values and sends the other half, so
 *   that after 5 steps lane l holds the warp's sum of value
 *   (l >> (5 - log2 P')) (P' <= 32) or of values 2l and 2l + 1 (P' =
 *   64): 31 shuffles for 32 values instead of 160;
 *   S > 1: the owners write to shared memory, barrier, warp s == 0 of
 *   the group adds the S partials in order (deterministic);
 *   the epilogue of (m, n0 + col), one value per owner lane, guarded.
 */
#include <string.h>

#include "lowering/loop_to_kernel/small_m.h"

#define MAX_W 64 /* unroll * cols * vec */

typedef struct KGen {
  FzSmallMGen g;
  FzValue *ncol[4]; /* the columns' W row (clamped) */
  FzValue *stride;  /* chunks between a lane's consecutive ones */
  FzValue *acc[FZ_SMALL_M_MAX_ACC];
  size_t numAcc;
} KGen;

/* One trip over `n` chunks from c: loads, then the products. */
static bool trip(void *ud, FzValue *c, unsigned n) {
  KGen *G = ud;
  FzSmallMGen *g = &G->g;
  FzLkBuild *kb = g->kb;
  const FzSmallMShape *s = g->s;
  unsigned C = s->cols, V = s->vec;
  FzValue *w[MAX_W], *kk[8];
  for (unsigned u = 0; u < n; ++u) {
    FzValue *cu = fzLkAdd(kb, c, fzLkMul(kb, G->stride, fzLkIndex(kb, u)));
    kk[u] = fzLkMul(kb, cu, fzLkIndex(kb, V));
    for (unsigned ci = 0; ci < C; ++ci)
      if (!fzSmallMLoadW(g, G->ncol[ci], kk[u], V, &w[(u * C + ci) * V]))
        return false;
  }
  for (unsigned u = 0; u < n; ++u)
    for (int64_t mm = 0; mm < g->m->M; ++mm) {
      FzValue *x[8];
      if (!fzSmallMLoadX(g, mm, kk[u], V, x))
        return false;
      for (unsigned ci = 0; ci < C; ++ci)
        for (unsigned e = 0; e < V; ++e) {
          FzValue **a = &G->acc[mm * C + ci];
          FzValue *ops[3] = {x[e], w[(u * C + ci) * V + e], *a};
          *a = fzLkOp(kb, "loop.fma", g->f32, 3, ops);
        }
    }
  return !kb->failed;
}

bool fzSmallMBuildK(FzLkBuild *kb, const FzSmallMNest *m,
                    const FzSmallMShape *s) {
  KGen G;
  memset(&G, 0, sizeof G);
  FzSmallMGen *g = &G.g;
  if (!fzSmallMGenInit(g, kb, m, s))
    return false;
  unsigned C = s->cols, V = s->vec, U = s->unroll, S = s->splitWarps;
  FzValue *n0 = fzLkMul(kb, g->group, fzLkIndex(kb, C));
  bool ragged = g->ragged;
  for (unsigned ci = 0; ci < C; ++ci) {
    G.ncol[ci] = fzLkAdd(kb, n0, fzLkIndex(kb, ci));
    if (ragged)
      G.ncol[ci] = fzLkBin(kb, "loop.minsi", G.ncol[ci],
                           fzLkIndex(kb, m->N - 1));
  }
  /* This lane's chunks of the block's slice [kLo, kHi). */
  FzValue *cV = fzLkIndex(kb, V);
  FzValue *cHi = fzLkDiv(kb, g->kHi, cV);
  FzValue *start = fzLkAdd(
      kb, fzLkAdd(kb, fzLkDiv(kb, g->kLo, cV),
                  fzLkMul(kb, g->sIdx, fzLkIndex(kb, 32))),
      g->lane);
  G.stride = fzLkIndex(kb, 32 * (int64_t)S);
  G.numAcc = (size_t)(m->M * C);
  FzValue *zero = fzLkConst(kb, g->f32, 0.0);
  for (size_t i = 0; i < G.numAcc; ++i)
    G.acc[i] = zero;
  if (!fzSmallMChunkLoops(g, start, cHi, 32 * (int64_t)S, U, G.numAcc, G.acc,
                          trip, &G))
    return false;

  /* Reduce-scatter across the warp's lanes. */
  int64_t P = (int64_t)G.numAcc, Pp = 1;
  while (Pp < P)
    Pp *= 2;
  FzValue *vals[FZ_SMALL_M_MAX_ACC];
  for (int64_t i = 0; i < Pp; ++i)
    vals[i] = i < P ? G.acc[i] : zero;
  int64_t count = Pp;
  int r = 0;
  for (unsigned off = 16; off >= 1; off /= 2) {
    if (count == 1) {
      vals[0] = fzLkBin(kb, "loop.addf", vals[0],
                        fzLkShuffleXor(kb, vals[0], off));
      continue;
    }
    FzValue *bit = fzLkCmp(kb, "ne",
                           fzLkBin(kb, "loop.andi", g->lane,
                                   fzLkIndex(kb, off)),
                           fzLkIndex(kb, 0));
    int64_t half = count / 2;
    for (int64_t i = 0; i < half; ++i) {
      FzValue *lo = vals[i], *hi = vals[i + half];
      FzValue *send = fzLkSelect(kb, bit, lo, hi);
      FzValue *keep = fzLkSelect(kb, bit, hi, lo);
      vals[i] = fzLkBin(kb, "loop.addf", keep,
                        fzLkShuffleXor(kb, send, off));
    }
    count = half;
    r++;
  }
  /* Lane l holds values (l >> (5 - r)) * count + i, i < count. */
  FzValue *base = fzLkMul(kb, fzLkDiv(kb, g->lane, fzLkIndex(kb, 1 << (5 - r))),
                          fzLkIndex(kb, count));
  FzValue *owner =
      r < 5 ? fzLkCmp(kb, "eq",
                      fzLkRem(kb, g->lane, fzLkIndex(kb, 1 << (5 - r))),
                      fzLkIndex(kb, 0))
            : NULL;
  FzValue *pv[2];
  for (int64_t i = 0; i < count; ++i)
    pv[i] = fzLkAdd(kb, base, fzLkIndex(kb, i));
  if (S > 1) {
    FzValue *red = fzLkSharedAlloc(kb, g->f32, (int64_t)s->warps * Pp);
    FzOp *guard = owner ? fzLkIfBegin(kb, owner, 0, NULL, NULL) : NULL;
    for (int64_t i = 0; i < count; ++i) {
      FzValue *at =
          fzLkAdd(kb, fzLkMul(kb, g->warp, fzLkIndex(kb, Pp)), pv[i]);
      if (!fzLkStore(kb, vals[i], red, 1, &at))
        return false;
    }
    if ((owner && (!guard || !fzLkForEnd(kb, guard, 0, NULL))) ||
        !fzLkBarrier(kb))
      return false;
    FzValue *first = fzLkMul(kb, g->gIdx, fzLkIndex(kb, (int64_t)S * Pp));
    for (int64_t i = 0; i < count; ++i) {
      FzValue *sum = NULL;
      for (unsigned w = 0; w < S; ++w) {
        FzValue *at = fzLkAdd(kb, fzLkAdd(kb, first, fzLkIndex(kb, w * Pp)),
                              pv[i]);
        FzValue *v = fzLkLoad(kb, red, 1, &at);
        sum = sum ? fzLkBin(kb, "loop.addf", sum, v) : v;
      }
      vals[i] = sum;
    }
    owner = fzSmallMAnd(kb, owner, fzLkCmp(kb, "eq", g->sIdx, fzLkIndex(kb, 0)));
  }
  for (int64_t i = 0; i < count; ++i) {
    FzValue *cC = fzLkIndex(kb, C);
    FzValue *row = fzLkDiv(kb, pv[i], cC);
    FzValue *col = fzLkAdd(kb, n0, fzLkRem(kb, pv[i], cC));
    FzValue *cond = owner;
    if (Pp > P)
      cond = fzSmallMAnd(kb, cond, fzLkCmp(kb, "slt", pv[i], fzLkIndex(kb, P)));
    if (ragged)
      cond = fzSmallMAnd(kb, cond, fzLkCmp(kb, "slt", col, fzLkIndex(kb, m->N)));
    if (!fzSmallMEpilogue(g, row, col, vals[i], cond))
      return false;
  }
  return !kb->failed;
}

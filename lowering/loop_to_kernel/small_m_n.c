/* lowering/loop_to_kernel/small_m_n.c - the small-M kernel of a weight
 * contiguous along n (W[k, n]: x @ W).
 *
 *   a block = S warps; lane l owns columns n0 = block_id.x * 32 * vec +
 *   l * vec .. + vec (a warp reads 32 * vec consecutive columns of a row
 *   of W: 16-byte loads, ld.global.nc), warp s the chunks c = s, s + S,
 *   ... of `unroll` consecutive k of the block's slice [kLo, kHi);
 *   per chunk: the unroll rows of W (loads first), then for each row m
 *   of x its unroll elements (one vector load where x allows; the same
 *   address in every lane: a broadcast) and acc[m][v] += x[m][k] *
 *   W[k][n0 + v] in f32 (fma);
 *   S > 1: every thread writes its M x vec partials to shared memory
 *   ([S][M * vec][32], conflict-free), barrier, and warp s finishes the
 *   values p = s, s + S, ... of its lane: the S partials added in order
 *   (deterministic), then the epilogue; S = 1: the epilogue of each
 *   value in registers. Columns past N (a ragged last block) load the
 *   last vector and store nothing.
 */
#include <string.h>

#include "lowering/loop_to_kernel/small_m.h"

bool fzSmallMBuildN(FzLkBuild *kb, const FzSmallMNest *m,
                    const FzSmallMShape *s) {
  FzSmallMGen g0, *g = &g0;
  if (!fzSmallMGenInit(g, kb, m, s))
    return false;
  unsigned V = s->vec, U = s->unroll, S = s->splitWarps;
  int64_t P = m->M * V;
  FzValue *n0 = fzLkAdd(kb, fzLkMul(kb, g->group, fzLkIndex(kb, 32 * V)),
                        fzLkMul(kb, g->lane, fzLkIndex(kb, V)));
  bool ragged = g->ragged;
  FzValue *nl = ragged ? fzLkBin(kb, "loop.minsi", n0,
                                 fzLkIndex(kb, m->N - V))
                       : n0;
  FzValue *chunks = fzLkDiv(kb, fzLkBin(kb, "loop.subi", g->kHi, g->kLo),
                            fzLkIndex(kb, U));
  FzValue *acc[FZ_SMALL_M_MAX_ACC];
  FzValue *zero = fzLkConst(kb, g->f32, 0.0);
  for (int64_t i = 0; i < P; ++i)
    acc[i] = zero;
  FzValue *c;
  FzOp *loop = fzLkForBegin(kb, g->warp, chunks, fzLkIndex(kb, S), (size_t)P,
                            acc, &c, acc);
  if (!loop)
    return false;
  FzValue *k0 = fzLkAdd(kb, g->kLo, fzLkMul(kb, c, fzLkIndex(kb, U)));
  FzValue *w[64];
  for (unsigned u = 0; u < U; ++u)
    if (!fzSmallMLoadW(g, fzLkAdd(kb, k0, fzLkIndex(kb, u)), nl, V,
                       &w[u * V]))
      return false;
  for (int64_t mm = 0; mm < m->M; ++mm) {
    FzValue *x[8];
    if (!fzSmallMLoadX(g, mm, k0, U, x))
      return false;
    for (unsigned u = 0; u < U; ++u)
      for (unsigned v = 0; v < V; ++v) {
        FzValue *ops[3] = {x[u], w[u * V + v], acc[mm * V + v]};
        acc[mm * V + v] = fzLkOp(kb, "loop.fma", g->f32, 3, ops);
      }
  }
  if (!fzLkForEnd(kb, loop, (size_t)P, acc))
    return false;
  for (int64_t i = 0; i < P; ++i)
    acc[i] = fzOpGetResult(loop, (size_t)i);

  FzValue *cV = fzLkIndex(kb, V), *cN = fzLkIndex(kb, m->N);
  if (S == 1) {
    for (int64_t p = 0; p < P; ++p) {
      FzValue *col = fzLkAdd(kb, n0, fzLkIndex(kb, p % V));
      FzValue *cond = ragged ? fzLkCmp(kb, "slt", col, cN) : NULL;
      if (!fzSmallMEpilogue(g, fzLkIndex(kb, p / V), col, acc[p], cond))
        return false;
    }
    return !kb->failed;
  }
  FzValue *red = fzSmallMShareVals(g, acc, (unsigned)P);
  FzValue *p;
  FzOp *each = red ? fzLkForBegin(kb, g->warp, fzLkIndex(kb, P),
                                  fzLkIndex(kb, S), 0, NULL, &p, NULL)
                   : NULL;
  if (!each)
    return false;
  FzValue *sum = fzSmallMSumVal(g, red, (unsigned)P, p);
  FzValue *col = fzLkAdd(kb, n0, fzLkRem(kb, p, cV));
  FzValue *cond = ragged ? fzLkCmp(kb, "slt", col, cN) : NULL;
  if (!fzSmallMEpilogue(g, fzLkDiv(kb, p, cV), col, sum, cond) ||
      !fzLkForEnd(kb, each, 0, NULL))
    return false;
  return !kb->failed;
}

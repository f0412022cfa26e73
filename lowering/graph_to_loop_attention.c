/* lowering/graph_to_loop_attention.c - lower-graph-to-loop for
 * graph.attention: one loop nest per op, streaming over the keys with
 * an online softmax, so the Sq x Sk scores never exist in memory.
 *
 *   loop.parallel (b..., i)                      one query row each
 *     acc[b.., i, :] = 0
 *     m, l = loop.for j < Sk' iter (m = -FLT_MAX, l = 0):
 *       s   = scale * loop.for t < D: q[b.., i, t] * k[b.., j, t]
 *             (+ mask[b.., i, j])
 *       m'  = max(m, s); a = exp(m - m'); p = exp(s - m')
 *       loop.for d < Dv: acc[b.., i, d] = acc * a + p * v[b.., j, d]
 *       yield m', l * a + p
 *     loop.for d < Dv: out[b.., i, d] = acc[b.., i, d] / l
 *
 * Causal: Sk' = i + 1 + Sk - Sq (the keys past the diagonal are never
 * visited) when Sk >= Sq; otherwise the loop runs over every key and a
 * select gives the hidden ones -inf. m starts at -FLT_MAX rather than
 * -inf so that a -inf score (a masked key) rescales by exp(0) = 1 and
 * adds exp(-inf) = 0, never exp(-inf + inf) = NaN; a row whose every
 * score is -inf ends with l = 0, hence NaN, as graph.softmax gives.
 *
 * acc is the output buffer itself for f32 and f64 results; a 16-bit
 * result gets an f32 buffer of the result's shape (allocated before the
 * nest and freed after it), so the accumulation never rounds to 16 bits.
 * q, k, v and the mask are read through lgEmit: a producer inside the
 * nest's reach (a constant, a broadcast) is an index map, as elsewhere.
 *
 * A group's epilogue (transposes and reshapes of the result: the head
 * merge [B, H, S, Dv] -> [B, S, H*Dv] that fusion folds into the
 * attention's kernel) changes only the final store: out[map(b.., i, d)],
 * the chain's index maps applied forward (affine for a head merge). acc
 * is then always a buffer of its own, so that the accumulator stays at
 * [b.., i, d] (the GPU's flash kernel expects it there).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "lowering/graph_to_loop_internal.h"

static double attr_scale(FzOp *op, int64_t D) {
  FzAttr *s = fzOpGetInherentAttr(op, FZ_STR("scale"));
  if (s && fzAttrGetKind(s) == FZ_ATTR_FLOAT)
    return fzFloatAttrGetValue(s);
  return D > 0 ? 1.0 / sqrt((double)D) : 1.0;
}

/* A buffer op (loop.alloc / loop.dealloc) at the function level. */
static FzValue *make_alloc(LgFunc *F, FzLoc *loc, FzType *bt) {
  FzLoopBuilder at = lgFuncBuilder(F, &F->top, loc);
  return fzBOp1(&at, "loop.alloc", 0, NULL, bt);
}

static bool make_dealloc(LgFunc *F, FzLoc *loc, FzValue *b) {
  FzLoopBuilder at = lgFuncBuilder(F, &F->top, loc);
  return fzBOp(&at, "loop.dealloc", 1, &b, NULL) != NULL;
}

/* The mask (rank rm, aligned at the end of the scores' rank r) at
 * (batch..., i, j). */
static FzValue *mask_at(LgNest *N, FzValue *mask, size_t r, FzValue *const *row,
                        FzValue *j) {
  size_t rm = lgRank(mask);
  FzValue *mi[LG_MAX_RANK];
  for (size_t d = 0; d < rm; ++d) {
    size_t sd = d + r - rm;
    FzValue *iv = sd == r - 1 ? j : row[sd];
    mi[d] = lgDim(mask, d) == 1 ? fzBIndex(&N->b, 0) : iv;
  }
  return lgEmit(N, mask, mi);
}

static bool is_transpose(FzOp *op) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == 15 && memcmp(n.data, "graph.transpose", 15) == 0;
}

static void mark_reduction(LgNest *N, FzOp *loop) {
  if (!loop ||
      !fzOpSetAttr(loop, FZ_STR("loop.reduction"), fzUnitAttrGet(N->F->ctx)))
    N->F->failed = true;
}

/* The index into the epilogue's last value of the attention result's
 * element at idx (rank r): each transpose and reshape applied forward. */
static bool epilogue_index(LgNest *N, FzOp *const *epi, size_t ne,
                           FzValue *const *idx, size_t r, FzValue **out) {
  FzValue *cur[LG_MAX_RANK], *next[LG_MAX_RANK];
  memcpy(cur, idx, r * sizeof *cur);
  size_t rank = r;
  for (size_t e = 0; e < ne; ++e) {
    FzValue *res = fzOpGetResult(epi[e], 0);
    size_t rr = lgRank(res);
    if (rr > LG_MAX_RANK)
      return false;
    if (is_transpose(epi[e])) {
      int64_t perm[LG_MAX_RANK];
      if (lgAttrInts(epi[e], "perm", perm, LG_MAX_RANK) != (int)rank ||
          rr != rank)
        return false;
      for (size_t i = 0; i < rank; ++i) {
        if (perm[i] < 0 || perm[i] >= (int64_t)rank)
          return false;
        next[i] = cur[perm[i]];
      }
    } else {
      lgReshapeIndex(N, res, fzOpGetOperand(epi[e], 0), cur, next);
    }
    rank = rr;
    memcpy(cur, next, rank * sizeof *cur);
  }
  memcpy(out, cur, rank * sizeof *out);
  return true;
}

bool lgLowerAttention(LgFunc *F, FzOp *op, FzValue *out, const FzPtrMap *alias,
                      FzOp *const *epi, size_t ne) {
  FzContext *ctx = F->ctx;
  FzLoc *loc = fzOpGetLoc(op);
  size_t nops = fzOpGetNumOperands(op);
  if (nops < 3 || nops > 4)
    return fzOpEmitError(op, "cannot be lowered to loops: malformed "
                             "graph.attention");
  FzValue *q = fzOpGetOperand(op, 0), *k = fzOpGetOperand(op, 1);
  FzValue *v = fzOpGetOperand(op, 2),
          *mask = nops > 3 ? fzOpGetOperand(op, 3) : NULL;
  FzValue *res = fzOpGetResult(op, 0);
  size_t r = lgRank(q), nb = r - 2;
  int64_t Sq = lgDim(q, r - 2), D = lgDim(q, r - 1), Sk = lgDim(k, r - 2);
  int64_t Dv = lgDim(v, r - 1);
  FzAttr *ca = fzOpGetInherentAttr(op, FZ_STR("causal"));
  bool causal =
      ca && fzAttrGetKind(ca) == FZ_ATTR_BOOL && fzBoolAttrGetValue(ca);
  double scale = attr_scale(op, D);
  FzType *ct = lgComputeType(ctx, lgElt(res));
  /* The accumulator: the output itself unless it is 16-bit or stored
   * through an epilogue. */
  FzValue *acc = out;
  if (ct != lgElt(res) || ne > 0) {
    FzType *bt = fzBufferTypeGet(
        ctx, r, fzShapedTypeGetShape(fzValueGetType(res)), ct, NULL, 0, NULL);
    if (!bt || !(acc = make_alloc(F, loc, bt)))
      return false;
  }

  LgNest N;
  lgNestInit(&N, F, loc);
  N.alias = alias;
  int64_t ext[LG_MAX_RANK];
  FzValue *row[LG_MAX_RANK];
  for (size_t d = 0; d + 1 < r; ++d)
    ext[d] = lgDim(q, d);
  LgSaved sr, sz, sj, st, su, so;
  bool ok = lgOpenParallel(&N, 0, r - 1, ext, row, &sr);
  size_t R = N.depth - 1;
  FzValue *zero = fzBConstFloat(&N.b, ct, 0.0);
  FzValue *idx[LG_MAX_RANK], *qi[LG_MAX_RANK], *ki[LG_MAX_RANK],
      *vi[LG_MAX_RANK];
  memcpy(idx, row, (r - 1) * sizeof *idx);
  memcpy(qi, row, (r - 1) * sizeof *qi);
  memcpy(ki, row, nb * sizeof *ki);
  memcpy(vi, row, nb * sizeof *vi);

  /* acc[row, :] = 0 */
  FzValue *dz = NULL;
  if (ok && (ok = lgOpenFor(&N, R, Dv, 0, NULL, &dz, NULL, &sz))) {
    idx[r - 1] = dz;
    ok = fzBStore(&N.b, zero, acc, idx) && !F->failed;
    lgClose(&N, 0, NULL, &sz);
  }

  /* The key loop. */
  bool bounded = causal && Sk >= Sq;
  FzValue *ub = bounded
                    ? fzBAddFold(&N.b, row[r - 2], fzBIndex(&N.b, 1 + Sk - Sq))
                    : fzBIndex(&N.b, Sk);
  FzValue *inits[2] = {fzBConstFloat(&N.b, ct, -FLT_MAX), zero},
          *iters[2] = {NULL};
  FzValue *j = NULL, *final[2] = {NULL, NULL};
  if (ok)
    ok = lgOpenForTo(&N, R, ub, 2, inits, &j, iters, &sj);
  if (ok) {
    size_t J = N.depth - 1;
    /* s = <q[row], k[j]> */
    FzValue *t = NULL, *dacc = NULL, *dot = NULL;
    ki[r - 2] = j;
    if ((ok = lgOpenFor(&N, J, D, 1, &zero, &t, &dacc, &st))) {
      qi[r - 1] = t;
      ki[r - 1] = t;
      FzValue *next = fzBFma(&N.b, lgEmit(&N, q, qi), lgEmit(&N, k, ki), dacc);
      ok = next != NULL;
      FzOp *loop = lgClose(&N, 1, ok ? &next : &dacc, &st);
      mark_reduction(&N, loop);
      dot = fzOpGetResult(loop, 0);
    }
    FzValue *s =
        ok ? fzBBinary(&N.b, "loop.mulf", dot, fzBConstFloat(&N.b, ct, scale))
           : NULL;
    if (s && mask)
      s = fzBBinary(&N.b, "loop.addf", s, mask_at(&N, mask, r, row, j));
    if (s && causal && !bounded) {
      /* hidden: j > i + Sk - Sq */
      FzValue *lim = fzBAddFold(&N.b, row[r - 2], fzBIndex(&N.b, Sk - Sq));
      FzValue *hid = fzBCmp(&N.b, "sgt", j, lim);
      s = fzBSelect(&N.b, hid, fzBConstFloat(&N.b, ct, -HUGE_VAL), s);
    }
    FzValue *m = iters[0], *l = iters[1];
    FzValue *mn = s ? fzBBinary(&N.b, "loop.maxf", m, s) : NULL;
    FzValue *a =
        mn ? fzBUnary(&N.b, "loop.exp", fzBBinary(&N.b, "loop.subf", m, mn))
           : NULL;
    FzValue *p =
        mn ? fzBUnary(&N.b, "loop.exp", fzBBinary(&N.b, "loop.subf", s, mn))
           : NULL;
    FzValue *ln = a && p ? fzBFma(&N.b, l, a, p) : NULL;
    ok = ok && ln && !F->failed;
    /* acc[row, d] = acc * a + p * v[j, d] */
    FzValue *du = NULL;
    if (ok && (ok = lgOpenFor(&N, J, Dv, 0, NULL, &du, NULL, &su))) {
      idx[r - 1] = du;
      vi[r - 2] = j;
      vi[r - 1] = du;
      FzValue *old = fzBLoad(&N.b, acc, idx); /* acc: the compute type */
      FzValue *pv = fzBBinary(&N.b, "loop.mulf", p, lgEmit(&N, v, vi));
      FzValue *nw = pv ? fzBFma(&N.b, old, a, pv) : NULL;
      ok = nw && fzBStore(&N.b, nw, acc, idx) && !F->failed;
      lgClose(&N, 0, NULL, &su);
    }
    FzValue *ys[2] = {ok ? mn : m, ok ? ln : l};
    FzOp *kl = lgClose(&N, 2, ys, &sj);
    final[0] = fzOpGetResult(kl, 0);
    final[1] = fzOpGetResult(kl, 1);
  }

  /* out[row, d] = acc[row, d] / l */
  FzValue *dout = NULL;
  if (ok && (ok = lgOpenFor(&N, R, Dv, 0, NULL, &dout, NULL, &so))) {
    idx[r - 1] = dout;
    FzValue *o =
        fzBBinary(&N.b, "loop.divf", fzBLoad(&N.b, acc, idx), final[1]);
    FzValue *oi[LG_MAX_RANK];
    FzType *elt = fzShapedTypeGetElementType(fzValueGetType(out));
    ok = o && epilogue_index(&N, epi, ne, idx, r, oi) &&
         fzBStore(&N.b, fzBConvertF(&N.b, o, elt), out, oi) && !F->failed;
    lgClose(&N, 0, NULL, &so);
  }
  if (N.depth > 1)
    lgClose(&N, 0, NULL, &sr);
  lgNestFree(&N);
  if (acc != out && !make_dealloc(F, loc, acc))
    ok = false;
  return ok && !F->failed;
}

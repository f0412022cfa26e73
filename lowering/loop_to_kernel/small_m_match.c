/* lowering/loop_to_kernel/small_m_match.c - recognizes a small-M
 * contraction nest (small_m.h draws it).
 *
 * Accepted: a loop.parallel with constant bounds 0..extent step 1 whose
 * body holds exactly one loop.for, over k with one f32 accumulator from
 * 0.0, step 1, bounds 0..K or the split form (lo = sb * KS, hi =
 * min(lo + KS, K) for a dim sb of the nest), whose body is
 *   load, [extf], load, [extf], mulf, addf(acc, product), yield
 * (each load bf16, f16 or f32, extended to f32 unless it is f32). One
 * load is W: rank >= 2, its last two indices k and a parallel dim n (in
 * either order), the others constants; the other is x: its indices are
 * k (once), constants, and parallel dims other than n and sb. Around
 * the loop, an epilogue of region-free ops (scalar math, loads of
 * buffers the nest does not write or of a written one at exactly a
 * store's indices, stores to buffers other than x and W).
 *
 * Nothing is allocated: the description points into the IR.
 */
#include <string.h>

#include "dialects/loop/nest_match.h" /* splitMatchBounds */
#include "ir/util.h"
#include "lowering/loop_to_kernel/matmul_internal.h" /* mm* helpers */
#include "lowering/loop_to_kernel/small_m.h"

static bool const_int(FzValue *v, int64_t *out) {
  return v && fzLoopValueGetConstantInt(v, out);
}

/* The parallel dim whose iv is v, or -1. */
static int iv_dim(FzOp *par, FzValue *v) {
  if (!fzValueIsBlockArgument(v) ||
      fzValueGetParentBlock(v) != fzLoopGetBody(par))
    return -1;
  return (int)fzValueGetIndex(v);
}

static bool defined_inside(FzValue *v, FzOp *op) {
  FzBlock *b = fzValueGetParentBlock(v);
  FzOp *owner = b ? fzBlockGetParentOp(b) : NULL;
  return owner && fzOpIsAncestor(op, owner);
}

/* Follows views back to the buffer they view. */
static FzValue *root_of(FzValue *v) {
  for (int depth = 0; depth < 64; ++depth) {
    FzOp *d = fzValueGetDefiningOp(v);
    if (!d || fzLoopGetOpcode(d) != FZ_LOOP_OP_VIEW)
      break;
    v = fzOpGetOperand(d, 0);
  }
  return v;
}

/* The load feeding a product, through extf (bf16/f16/f32) or directly
 * (f32). */
static FzOp *operand_load(FzValue *v) {
  FzOp *d = fzValueGetDefiningOp(v);
  if (d && fzLoopGetOpcode(d) == FZ_LOOP_OP_EXTF)
    d = fzValueGetDefiningOp(fzOpGetOperand(d, 0));
  else if (fzTypeGetKind(fzValueGetType(v)) != FZ_TYPE_F32)
    return NULL;
  if (!d || fzLoopGetOpcode(d) != FZ_LOOP_OP_LOAD)
    return NULL;
  FzTypeKind k = fzTypeGetKind(fzValueGetType(fzOpGetResult(d, 0)));
  return k == FZ_TYPE_BF16 || k == FZ_TYPE_F16 || k == FZ_TYPE_F32 ? d : NULL;
}

/* Fills x's indices from its load; false when one is not k, a parallel
 * dim or a constant, or k is not used exactly once. */
static bool classify(FzSmallMNest *m, FzOp *load, FzValue *kiv,
                     FzSmallMOperand *x) {
  memset(x, 0, sizeof *x);
  x->load = load;
  x->buffer = fzOpGetOperand(load, 0);
  x->elt = fzValueGetType(fzOpGetResult(load, 0));
  if (!mmPlainBuffer(x->buffer, m->par))
    return false;
  FzType *t = fzValueGetType(x->buffer);
  x->rank = fzShapedTypeGetRank(t);
  if (x->rank < 1 || x->rank > FZ_SMALL_M_MAX_RANK)
    return false;
  int ks = 0;
  for (size_t i = 0; i < x->rank; ++i) {
    FzValue *v = fzOpGetOperand(load, 1 + i);
    int d = iv_dim(m->par, v);
    if (v == kiv) {
      x->idx[i].dim = FZ_SMALL_M_K;
      ks++;
    } else if (d >= 0) {
      x->idx[i].dim = d;
    } else if (const_int(v, &x->idx[i].value) && !defined_inside(v, m->par)) {
      x->idx[i].dim = FZ_SMALL_M_CONST;
    } else {
      return false;
    }
  }
  mmStridesOf(t, x->strides);
  x->aligned = mmAlignedBase(x->buffer, 16) ||
               (fzValueGetDefiningOp(x->buffer) &&
                fzLkIsConstantRoot(fzValueGetDefiningOp(x->buffer)));
  return ks == 1;
}

/* Whether operand w can be W: rank >= 2, last two indices k and a
 * parallel dim (not the split one), the others constants. Its dim goes
 * to *dim. */
static bool weight_shape(const FzSmallMNest *m, const FzSmallMOperand *w,
                         int *dim, bool *kLast) {
  if (w->rank < 2)
    return false;
  for (size_t i = 0; i + 2 < w->rank; ++i)
    if (w->idx[i].dim != FZ_SMALL_M_CONST)
      return false;
  int a = w->idx[w->rank - 2].dim, b = w->idx[w->rank - 1].dim;
  if (b == FZ_SMALL_M_K && a >= 0)
    *kLast = true, *dim = a;
  else if (a == FZ_SMALL_M_K && b >= 0)
    *kLast = false, *dim = b;
  else
    return false;
  return *dim != m->dimSplit;
}

/* x may index k, constants and the row dims. */
static bool input_shape(const FzSmallMNest *m, const FzSmallMOperand *x) {
  for (size_t i = 0; i < x->rank; ++i)
    if (x->idx[i].dim == m->dimN || x->idx[i].dim == m->dimSplit)
      return false;
  return true;
}

static bool match_kloop(FzSmallMNest *m, char *why, size_t whyLen) {
  FzOp *kl = m->kloop;
  int64_t lb, ub, step;
  double init = 1;
  if (fzOpGetNumOperands(kl) != 4 || fzOpGetNumResults(kl) != 1)
    return fzReasonf(why, whyLen, "the reduction has not one accumulator");
  FzOp *initDef = fzValueGetDefiningOp(fzOpGetOperand(kl, 3));
  FzAttr *ia = initDef && fzLoopGetOpcode(initDef) == FZ_LOOP_OP_CONSTANT
                   ? fzOpGetInherentAttr(initDef, FZ_STR("value"))
                   : NULL;
  if (ia && fzAttrGetKind(ia) == FZ_ATTR_FLOAT)
    init = fzFloatAttrGetValue(ia);
  if (fzTypeGetKind(fzValueGetType(fzOpGetResult(kl, 0))) != FZ_TYPE_F32 ||
      init != 0.0 || !const_int(fzOpGetOperand(kl, 2), &step) || step != 1)
    return fzReasonf(why, whyLen, "the reduction is not one f32 accumulator "
                                  "from 0.0, step 1");
  if (const_int(fzOpGetOperand(kl, 0), &lb) &&
      const_int(fzOpGetOperand(kl, 1), &ub) && lb == 0 && ub >= 1) {
    m->K = m->sliceK = ub;
  } else if (!splitMatchBounds(m->par, kl, &m->dimSplit, &m->sliceK,
                               &m->K)) {
    return fzReasonf(why, whyLen, "the reduction loop is not 0..K");
  }
  FzBlock *body = fzLoopGetBody(kl);
  FzValue *kiv = fzBlockGetArgument(body, 0);
  FzOp *mul = mmKLoopProduct(kl, why, whyLen);
  if (!mul)
    return false;
  if (!fzValueHasOneUse(fzBlockGetArgument(body, 1)))
    return fzReasonf(why, whyLen, "the accumulator is used for more than "
                                  "its sum");
  FzOp *la = operand_load(fzOpGetOperand(mul, 0));
  FzOp *lb2 = operand_load(fzOpGetOperand(mul, 1));
  if (!la || !lb2 || la == lb2)
    return fzReasonf(why, whyLen, "the product's factors are not two loads "
                                  "(bf16, f16 or f32)");
  size_t ops = 5 + (la != fzValueGetDefiningOp(fzOpGetOperand(mul, 0))) +
               (lb2 != fzValueGetDefiningOp(fzOpGetOperand(mul, 1)));
  if (fzBlockGetNumOps(body) != ops)
    return fzReasonf(why, whyLen, "the reduction loop computes more than "
                                  "x * W");
  FzSmallMOperand A, B;
  if (!classify(m, la, kiv, &A) || !classify(m, lb2, kiv, &B))
    return fzReasonf(why, whyLen, "an operand is not a static global buffer "
                                  "indexed by k, loop indices and "
                                  "constants");
  int dA = -1, dB = -1;
  bool kA = false, kB = false;
  bool wA = weight_shape(m, &A, &dA, &kA);
  bool wB = weight_shape(m, &B, &dB, &kB);
  /* W: the operand that indexes the output's last dim (its columns, as
   * x @ W writes them), unless that dim is 1 wide (W x with x a
   * column: then the wider one). */
  int last = (int)m->numDims - 1;
  bool lastA = wA && dA == last && m->extent[last] > 1;
  bool lastB = wB && dB == last && m->extent[last] > 1;
  bool pickB = wB && (!wA || lastB ||
                      (!lastA && m->extent[dB] > m->extent[dA]));
  if (!wA && !wB)
    return fzReasonf(why, whyLen, "no operand is a matrix indexed by k and "
                                  "one loop index");
  m->w = pickB ? B : A;
  m->x = pickB ? A : B;
  m->dimN = pickB ? dB : dA;
  m->kContig = pickB ? kB : kA;
  if (!input_shape(m, &m->x))
    return fzReasonf(why, whyLen, "x uses W's column index");
  return true;
}

static bool match_epilogue(FzSmallMNest *m, char *why, size_t whyLen) {
  FzBlock *body = fzLoopGetBody(m->par);
  FzOp *term = fzBlockGetLastOp(body);
  FzValue *xr = root_of(m->x.buffer), *wr = root_of(m->w.buffer);
  bool stores = false, usesAcc = false;
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (op == m->kloop || op == term)
      continue;
    FzStringRef nm = fzIdentGetString(fzOpGetName(op));
    if (!mmEpilogueOpOk(op))
      return fzReasonf(why, whyLen, "the nest holds '%.*s', which the "
                                    "epilogue does not take",
                       (int)nm.length, nm.data);
    for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
      usesAcc |= fzOpGetOperand(op, i) == fzOpGetResult(m->kloop, 0);
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE)
      continue;
    FzValue *buf = fzOpGetOperand(op, 1);
    if (!mmPlainBuffer(buf, m->par))
      return fzReasonf(why, whyLen, "a store to a buffer that is not a "
                                    "static global buffer defined outside "
                                    "the nest");
    if (root_of(buf) == xr || root_of(buf) == wr)
      return fzReasonf(why, whyLen, "the nest writes x or W");
    stores = true;
  }
  if (!stores || !usesAcc)
    return fzReasonf(why, whyLen, "the nest stores no use of the sum");
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_LOAD)
      continue;
    FzValue *r = root_of(fzOpGetOperand(op, 0));
    for (FzOp *st = fzBlockGetFirstOp(body); st; st = fzOpGetNextInBlock(st))
      if (fzLoopGetOpcode(st) == FZ_LOOP_OP_STORE &&
          root_of(fzOpGetOperand(st, 1)) == r &&
          (fzOpGetOperand(st, 1) != fzOpGetOperand(op, 0) ||
           !mmSameIndices(op, st)))
        return fzReasonf(why, whyLen, "the epilogue reads a buffer the nest "
                                      "writes, at other indices");
  }
  return true;
}

bool fzSmallMMatch(FzOp *par, FzSmallMNest *out, char *why, size_t whyLen) {
  FzSmallMNest *m = out;
  memset(m, 0, sizeof *m);
  m->par = par;
  m->dimSplit = -1;
  m->dimN = -1;
  if (fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL)
    return fzReasonf(why, whyLen, "not a loop.parallel");
  size_t n = fzLoopParallelGetNumDims(par);
  if (n < 1 || n > FZ_SMALL_M_MAX_DIMS)
    return fzReasonf(why, whyLen, "a nest of %zu dimensions", n);
  m->numDims = n;
  if (!mmNestExtents(par, m->extent, why, whyLen) ||
      !(m->kloop = mmOnlyLoop(par, why, whyLen)))
    return false;
  if (!match_kloop(m, why, whyLen) || !match_epilogue(m, why, whyLen))
    return false;
  m->N = m->extent[m->dimN];
  m->M = 1;
  for (size_t d = 0; d < n; ++d)
    if ((int)d != m->dimN && (int)d != m->dimSplit)
      m->M = m->M <= ((int64_t)1 << 40) / m->extent[d]
                 ? m->M * m->extent[d]
                 : ((int64_t)1 << 40);
  return true;
}

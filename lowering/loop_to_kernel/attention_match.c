/* lowering/loop_to_kernel/attention_match.c - recognizes the online-
 * softmax nest that lower-graph-to-loop makes of graph.attention
 * (attention.h shows it) for the flash-attention kernel.
 *
 * The shape is checked op by op (the key loop's softmax update, the
 * P V loop's accumulator update, the loops zeroing and reading the
 * accumulator at [b.., i, d]); the q, k and v loads' indices are taken
 * as affine maps of the ivs (constants, addi, subi, muli by a
 * constant), which the kernel's copies evaluate; what computes the score
 * from the dot product (scale, an additive mask's loads, a causal
 * select) and what the final loop does with acc / l are kept as ops to
 * clone. Everything else is refused with a one-line reason, and the nest
 * is left to the generic mappings.
 */
#include <float.h>
#include <string.h>

#include "ir/util.h"
#include "lowering/loop_to_kernel/attention.h"
#include "lowering/loop_to_kernel/matmul_internal.h"

static bool const_int(FzValue *v, int64_t *out) {
  return v && fzLoopValueGetConstantInt(v, out);
}

static bool const_float(FzValue *v, double *out) {
  FzOp *def = v ? fzValueGetDefiningOp(v) : NULL;
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_CONSTANT)
    return false;
  FzAttr *a = fzOpGetInherentAttr(def, FZ_STR("value"));
  if (!a || fzAttrGetKind(a) != FZ_ATTR_FLOAT)
    return false;
  *out = fzFloatAttrGetValue(a);
  return true;
}

static bool defined_inside(FzValue *v, FzOp *op) {
  FzBlock *b = fzValueGetParentBlock(v);
  FzOp *owner = b ? fzBlockGetParentOp(b) : NULL;
  return owner && fzOpIsAncestor(op, owner);
}

static FzLoopOpcode opc_of(FzValue *v) {
  FzOp *d = v ? fzValueGetDefiningOp(v) : NULL;
  return d ? fzLoopGetOpcode(d) : FZ_LOOP_OP_UNKNOWN;
}

/* "%.*s" arguments of op's name. */
#define FZ_OPNAME(op)                                                       \
  (int)fzIdentGetString(fzOpGetName(op)).length,                            \
      fzIdentGetString(fzOpGetName(op)).data

static FzOp *def_of(FzValue *v) { return v ? fzValueGetDefiningOp(v) : NULL; }

/* A loop.for from 0 to a constant n step 1: n, else -1. */
static int64_t const_trips(FzOp *loop) {
  int64_t lb, ub, st;
  if (fzLoopGetOpcode(loop) != FZ_LOOP_OP_FOR ||
      !const_int(fzOpGetOperand(loop, 0), &lb) ||
      !const_int(fzOpGetOperand(loop, 1), &ub) ||
      !const_int(fzOpGetOperand(loop, 2), &st) || lb != 0 || st != 1)
    return -1;
  return ub;
}

/*===--- Affine index maps ----------------------------------------------===*/

typedef struct Vars {
  FzOp *par;
  size_t nd;
  FzValue *j, *e; /* the key iv and the inner iv (NULL: none) */
} Vars;

/* v as cst + sum coef[var] var; false when it is not affine in Vars. */
static bool affine(const Vars *V, FzValue *v, int64_t *coef, int64_t *cst,
                   int depth) {
  memset(coef, 0, FZ_ATTN_MAX_VARS * sizeof *coef);
  *cst = 0;
  if (!v || depth > 24)
    return false;
  int64_t c;
  if (const_int(v, &c)) {
    *cst = c;
    return true;
  }
  if (fzValueIsBlockArgument(v)) {
    if (fzValueGetParentBlock(v) == fzLoopGetBody(V->par)) {
      coef[fzValueGetIndex(v)] = 1;
      return true;
    }
    if (v == V->j || v == V->e) {
      coef[v == V->j ? V->nd : V->nd + 1] = 1;
      return true;
    }
    return false;
  }
  FzLoopOpcode o = opc_of(v);
  if (o != FZ_LOOP_OP_ADDI && o != FZ_LOOP_OP_SUBI && o != FZ_LOOP_OP_MULI)
    return false;
  FzOp *d = def_of(v);
  int64_t ca[FZ_ATTN_MAX_VARS], cb[FZ_ATTN_MAX_VARS], ka, kb;
  if (!affine(V, fzOpGetOperand(d, 0), ca, &ka, depth + 1) ||
      !affine(V, fzOpGetOperand(d, 1), cb, &kb, depth + 1))
    return false;
  bool aConst = true, bConst = true;
  for (size_t i = 0; i < FZ_ATTN_MAX_VARS; ++i) {
    aConst = aConst && ca[i] == 0;
    bConst = bConst && cb[i] == 0;
  }
  if (o == FZ_LOOP_OP_MULI && !aConst && !bConst)
    return false;
  for (size_t i = 0; i < FZ_ATTN_MAX_VARS; ++i)
    coef[i] = o == FZ_LOOP_OP_ADDI   ? ca[i] + cb[i]
              : o == FZ_LOOP_OP_SUBI ? ca[i] - cb[i]
              : aConst               ? ka * cb[i]
                                     : ca[i] * kb;
  *cst = o == FZ_LOOP_OP_ADDI ? ka + kb : o == FZ_LOOP_OP_SUBI ? ka - kb
                                                               : ka * kb;
  return true;
}

/* x (f32) = extf(load) of a 16-bit buffer: the load, its type in *elt. */
static FzOp *ext_load(FzValue *x, FzType **elt) {
  if (opc_of(x) != FZ_LOOP_OP_EXTF)
    return NULL;
  FzOp *ld = def_of(fzOpGetOperand(def_of(x), 0));
  if (!ld || fzLoopGetOpcode(ld) != FZ_LOOP_OP_LOAD)
    return NULL;
  *elt = fzValueGetType(fzOpGetResult(ld, 0));
  return ld;
}

/* The operand read by `load`: affine indices, the inner var contiguous
 * (coefficient 1 in the last index, 0 elsewhere, stride 1), no
 * dependence on var `absent`, 16-byte copies possible (the row start a
 * multiple of 8 elements, an aligned buffer). */
static bool operand(const Vars *V, FzOp *load, FzOp *par, size_t absent,
                    const char *name, FzAttnOperand *x, char *why,
                    size_t whyLen) {
  memset(x, 0, sizeof *x);
  x->load = load;
  x->buffer = fzOpGetOperand(load, 0);
  FzType *bt = fzValueGetType(x->buffer);
  if (!mmPlainBuffer(x->buffer, par))
    return fzReasonf(why, whyLen, "%s is not read from a static global "
                                  "buffer", name);
  x->rank = fzShapedTypeGetRank(bt);
  if (x->rank == 0 || x->rank > FZ_MATMUL_MAX_DIMS ||
      fzOpGetNumOperands(load) != 1 + x->rank)
    return fzReasonf(why, whyLen, "%s's load has an unsupported rank", name);
  int64_t st[FZ_MATMUL_MAX_DIMS];
  mmStridesOf(bt, st);
  int64_t flat[FZ_ATTN_MAX_VARS] = {0}, flatC = 0;
  size_t ev = V->nd + 1;
  for (size_t d = 0; d < x->rank; ++d) {
    if (!affine(V, fzOpGetOperand(load, 1 + d), x->coef[d], &x->cst[d], 0))
      return fzReasonf(why, whyLen, "%s's indices are not affine in the "
                                    "nest's ivs", name);
    bool last = d + 1 == x->rank;
    if (x->coef[d][ev] != (last ? 1 : 0) || x->coef[d][absent] != 0)
      return fzReasonf(why, whyLen, "%s is not read along its last "
                                    "(contiguous) dim", name);
    for (size_t v = 0; v < FZ_ATTN_MAX_VARS; ++v)
      flat[v] += st[d] * x->coef[d][v];
    flatC += st[d] * x->cst[d];
  }
  if (st[x->rank - 1] != 1)
    return fzReasonf(why, whyLen, "%s's last dim is strided", name);
  bool aligned = flatC % 8 == 0 && mmAlignedBase(x->buffer, 16);
  for (size_t v = 0; v < FZ_ATTN_MAX_VARS; ++v)
    aligned = aligned && (v == ev || flat[v] % 8 == 0);
  if (!aligned)
    return fzReasonf(why, whyLen, "%s's rows do not start at 16-byte "
                                  "boundaries (no 16-byte copies)", name);
  return true;
}

/* Whether acc-access `op` (a load or store of buf) is at [par ivs.., iv]. */
static bool acc_at(FzOp *op, FzValue *buf, FzOp *par, size_t nd,
                   FzValue *iv) {
  size_t b = fzLoopMemGetBufferOperand(op);
  if (fzOpGetOperand(op, b) != buf || fzOpGetNumOperands(op) != b + 2 + nd)
    return false;
  FzBlock *body = fzLoopGetBody(par);
  for (size_t d = 0; d < nd; ++d)
    if (fzOpGetOperand(op, b + 1 + d) != fzBlockGetArgument(body, d))
      return false;
  return fzOpGetOperand(op, b + 1 + nd) == iv;
}

static FzValue *body_arg(FzOp *loop, size_t i) {
  return fzBlockGetArgument(fzLoopGetBody(loop), i);
}

static FzOp *yield_of(FzOp *loop) {
  return fzBlockGetLastOp(fzLoopGetBody(loop));
}

/* The fma(a, b, c) or addf(mulf(a, b), c) / addf(c, mulf(a, b)) that v
 * is: its factors and addend. */
static bool fma_parts(FzValue *v, FzValue **a, FzValue **b, FzValue **c) {
  FzOp *d = def_of(v);
  if (!d)
    return false;
  if (fzLoopGetOpcode(d) == FZ_LOOP_OP_FMA) {
    *a = fzOpGetOperand(d, 0);
    *b = fzOpGetOperand(d, 1);
    *c = fzOpGetOperand(d, 2);
    return true;
  }
  if (fzLoopGetOpcode(d) != FZ_LOOP_OP_ADDF)
    return false;
  for (int s = 0; s < 2; ++s) {
    FzOp *m = def_of(fzOpGetOperand(d, s));
    if (m && fzLoopGetOpcode(m) == FZ_LOOP_OP_MULF) {
      *a = fzOpGetOperand(m, 0);
      *b = fzOpGetOperand(m, 1);
      *c = fzOpGetOperand(d, 1 - s);
      return true;
    }
  }
  return false;
}

/* Whether v is exp(x - y): x and y. */
static bool exp_diff(FzValue *v, FzValue **x, FzValue **y) {
  if (opc_of(v) != FZ_LOOP_OP_EXP)
    return false;
  FzValue *s = fzOpGetOperand(def_of(v), 0);
  if (opc_of(s) != FZ_LOOP_OP_SUBF)
    return false;
  *x = fzOpGetOperand(def_of(s), 0);
  *y = fzOpGetOperand(def_of(s), 1);
  return true;
}

/* The ops of the nest that value v depends on (inside par: its row ops
 * and the loop body), operands first, into x->slice; uses[0] / uses[1]
 * say whether it reads i / j. Only the par ivs, the key iv and the inner
 * iv may be reached as block arguments. */
static bool collect_slice(const Vars *V, FzValue *v, FzAttnOperand *x,
                          bool *uses, int depth) {
  if (!v || depth > 48)
    return false;
  if (fzValueIsBlockArgument(v)) {
    if (fzValueGetParentBlock(v) == fzLoopGetBody(V->par)) {
      if (fzValueGetIndex(v) + 1 == V->nd)
        uses[0] = true;
      return true;
    }
    if (v == V->j)
      uses[1] = true;
    return v == V->j || v == V->e || !defined_inside(v, V->par);
  }
  FzOp *d = def_of(v);
  if (!d || !defined_inside(v, V->par))
    return true; /* a capture */
  for (size_t i = 0; i < x->numSlice; ++i)
    if (x->slice[i] == d)
      return true;
  if (!mmEpilogueOpOk(d) || fzLoopGetOpcode(d) == FZ_LOOP_OP_STORE)
    return false;
  for (size_t i = 0; i < fzOpGetNumOperands(d); ++i)
    if (!collect_slice(V, fzOpGetOperand(d, i), x, uses, depth + 1))
      return false;
  if (x->numSlice >= sizeof x->slice / sizeof x->slice[0])
    return false;
  x->slice[x->numSlice++] = d;
  return true;
}

/* Operand value v as a computed one: its slice, no dependence on var
 * `absent` (0: i, 1: j). */
static bool computed_operand(const Vars *V, FzValue *v, int absent,
                             const char *name, FzAttnOperand *x, char *why,
                             size_t whyLen) {
  memset(x, 0, sizeof *x);
  x->computed = true;
  x->value = v;
  x->inner = V->e;
  bool uses[2] = {false, false};
  if (!collect_slice(V, v, x, uses, 0))
    return fzReasonf(why, whyLen, "%s is computed by ops the kernel cannot "
                                  "clone", name);
  if (uses[absent])
    return fzReasonf(why, whyLen, "%s depends on the %s index", name,
                     absent ? "key" : "query");
  return true;
}

/* The 16-bit element type of the first load in x's slice, or NULL. */
static FzType *slice_elt(const FzAttnOperand *x) {
  for (size_t i = 0; i < x->numSlice; ++i)
    if (fzLoopGetOpcode(x->slice[i]) == FZ_LOOP_OP_LOAD) {
      FzType *t = fzValueGetType(fzOpGetResult(x->slice[i], 0));
      if (fzTypeGetKind(t) == FZ_TYPE_F16 || fzTypeGetKind(t) == FZ_TYPE_BF16)
        return t;
    }
  return NULL;
}

/*===--- The parts ------------------------------------------------------===*/

/* The dot loop: q and k. */
static bool match_dot(FzAttnNest *a, const Vars *kv, char *why,
                      size_t whyLen) {
  FzOp *dot = a->dot;
  if ((a->D = const_trips(dot)) < 1 || fzOpGetNumResults(dot) != 1)
    return fzReasonf(why, whyLen, "the score is not one loop over the "
                                  "head dim");
  if (a->D % 16 != 0 || a->D > 128)
    return fzReasonf(why, whyLen, "head dim %lld: the kernel takes "
                     "multiples of 16 up to 128", (long long)a->D);
  double z;
  if (!const_float(fzOpGetOperand(dot, 3), &z) || z != 0.0)
    return fzReasonf(why, whyLen, "the dot product does not start at 0");
  FzValue *x, *y, *c;
  FzOp *yl = yield_of(dot);
  if (fzOpGetNumOperands(yl) != 1 ||
      !fma_parts(fzOpGetOperand(yl, 0), &x, &y, &c) || c != body_arg(dot, 1))
    return fzReasonf(why, whyLen, "the dot loop is not a sum of products");
  FzType *ex = NULL, *ey = NULL;
  FzOp *lx = ext_load(x, &ex), *ly = ext_load(y, &ey);
  if (opc_of(x) == FZ_LOOP_OP_LOAD && opc_of(y) == FZ_LOOP_OP_LOAD &&
      fzTypeGetKind(fzValueGetType(x)) == FZ_TYPE_F32)
    return fzReasonf(why, whyLen, "f32 q and k: no tf32 flash-attention "
                                  "kernel yet (the generic mapping runs "
                                  "it in f32)");
  Vars V = *kv;
  V.e = body_arg(dot, 0);
  size_t iv = a->numDims - 1, jv = a->numDims;
  /* q depends on i, not j; k on j, not i: q is the one without j. */
  FzAttnOperand probe;
  bool uses[2] = {false, false};
  memset(&probe, 0, sizeof probe);
  if (collect_slice(&V, x, &probe, uses, 0) && uses[1]) {
    FzValue *t = x;
    x = y;
    y = t;
    FzOp *tl = lx;
    lx = ly;
    ly = tl;
    FzType *te = ex;
    ex = ey;
    ey = te;
  }
  bool ok = lx ? operand(&V, lx, a->par, jv, "q", &a->q, why, whyLen)
               : computed_operand(&V, x, 1, "q", &a->q, why, whyLen);
  ok = ok && (ly ? operand(&V, ly, a->par, iv, "k", &a->k, why, whyLen)
                 : computed_operand(&V, y, 0, "k", &a->k, why, whyLen));
  if (!ok)
    return false;
  if (!ex)
    ex = ey ? ey : slice_elt(&a->q);
  if (!ey)
    ey = ex;
  if (!ex || ex != ey || (a->q.computed && slice_elt(&a->q) != ex) ||
      (a->k.computed && slice_elt(&a->k) != ex) ||
      (fzTypeGetKind(ex) != FZ_TYPE_F16 && fzTypeGetKind(ex) != FZ_TYPE_BF16))
    return fzReasonf(why, whyLen, "q and k are not both f16 or both bf16");
  a->elt = ex;
  return true;
}

/* The P V loop: v, acc = fma(acc, alpha, p * v). */
static bool match_pv(FzAttnNest *a, const Vars *kv, FzValue *alpha,
                     FzValue *p, char *why, size_t whyLen) {
  FzOp *pv = a->pv;
  if ((a->Dv = const_trips(pv)) < 1 || fzOpGetNumResults(pv) != 0)
    return fzReasonf(why, whyLen, "the P V loop is not over the value dim");
  if (a->Dv % 16 != 0 || a->Dv > 128)
    return fzReasonf(why, whyLen, "value dim %lld: the kernel takes "
                     "multiples of 16 up to 128", (long long)a->Dv);
  FzOp *store = NULL;
  for (FzOp *op = fzBlockGetFirstOp(fzLoopGetBody(pv)); op;
       op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_STORE) {
      if (store)
        return fzReasonf(why, whyLen, "the P V loop stores twice");
      store = op;
    } else if (fzLoopGetOpcode(op) != FZ_LOOP_OP_YIELD &&
               !mmEpilogueOpOk(op)) {
      return fzReasonf(why, whyLen, "the P V loop holds other ops");
    }
  }
  FzValue *old, *f, *pvv;
  if (!store || !fma_parts(fzOpGetOperand(store, 0), &old, &f, &pvv))
    return fzReasonf(why, whyLen, "the P V loop is not acc * alpha + p v");
  if (f != alpha) {
    FzValue *t = f;
    f = old;
    old = t;
  }
  FzOp *ld = def_of(old);
  a->acc = fzOpGetOperand(store, 1);
  if (f != alpha || !ld || fzLoopGetOpcode(ld) != FZ_LOOP_OP_LOAD ||
      opc_of(pvv) != FZ_LOOP_OP_MULF ||
      !acc_at(ld, a->acc, a->par, a->numDims, body_arg(pv, 0)) ||
      !acc_at(store, a->acc, a->par, a->numDims, body_arg(pv, 0)))
    return fzReasonf(why, whyLen, "the P V loop is not acc * alpha + p v");
  FzOp *mul = def_of(pvv);
  FzValue *m0 = fzOpGetOperand(mul, 0), *m1 = fzOpGetOperand(mul, 1);
  FzValue *vv = m0 == p ? m1 : m1 == p ? m0 : NULL;
  if (!vv)
    return fzReasonf(why, whyLen, "the P V loop is not acc * alpha + p v");
  FzType *ev = NULL;
  FzOp *lv = ext_load(vv, &ev);
  Vars V = *kv;
  V.e = body_arg(pv, 0);
  if (!lv) {
    if (!computed_operand(&V, vv, 0, "v", &a->v, why, whyLen))
      return false;
    ev = slice_elt(&a->v);
  }
  if (ev != a->elt)
    return fzReasonf(why, whyLen, "v is not of q's element type");
  return lv ? operand(&V, lv, a->par, a->numDims - 1, "v", &a->v, why,
                      whyLen)
            : true;
}

/* The score chain: the ops of the key loop's body that %s depends on. */
static bool collect_chain(FzAttnNest *a, FzValue *v, int depth, char *why,
                          size_t whyLen) {
  if (depth > 64)
    return fzReasonf(why, whyLen, "the score chain is too deep");
  FzBlock *kb = fzLoopGetBody(a->kloop);
  if (fzValueIsBlockArgument(v))
    return fzValueGetParentBlock(v) != kb || v == body_arg(a->kloop, 0) ||
           fzReasonf(why, whyLen, "the score depends on the running max");
  FzOp *d = def_of(v);
  if (!d || d == a->dot || fzOpGetBlock(d) != kb)
    return true; /* outside the key loop, or the dot product */
  for (size_t i = 0; i < a->numChain; ++i)
    if (a->chain[i] == d)
      return true;
  if (!mmEpilogueOpOk(d) || fzLoopGetOpcode(d) == FZ_LOOP_OP_STORE)
    return fzReasonf(why, whyLen, "the score chain holds a '%.*s'",
                     FZ_OPNAME(d));
  for (size_t i = 0; i < fzOpGetNumOperands(d); ++i)
    if (!collect_chain(a, fzOpGetOperand(d, i), depth + 1, why, whyLen))
      return false;
  if (a->numChain >= sizeof a->chain / sizeof a->chain[0])
    return fzReasonf(why, whyLen, "the score chain is too long");
  a->chain[a->numChain++] = d;
  return true;
}

/* The key loop: its bound, the softmax update, the dot and P V loops. */
static bool match_kloop(FzAttnNest *a, char *why, size_t whyLen) {
  FzOp *kl = a->kloop;
  FzValue *ub = fzOpGetOperand(kl, 1);
  int64_t lb, st, c;
  if (!const_int(fzOpGetOperand(kl, 0), &lb) ||
      !const_int(fzOpGetOperand(kl, 2), &st) || lb != 0 || st != 1)
    return fzReasonf(why, whyLen, "the key loop is not 0..n step 1");
  FzValue *iIv = fzBlockGetArgument(fzLoopGetBody(a->par), a->numDims - 1);
  if (const_int(ub, &a->Sk)) {
    a->causal = false;
  } else if (opc_of(ub) == FZ_LOOP_OP_ADDI &&
             ((fzOpGetOperand(def_of(ub), 0) == iIv &&
               const_int(fzOpGetOperand(def_of(ub), 1), &c)) ||
              (fzOpGetOperand(def_of(ub), 1) == iIv &&
               const_int(fzOpGetOperand(def_of(ub), 0), &c))) &&
             c >= 1) {
    a->causal = true;
    a->causalC = c;
    a->Sk = a->Sq + c - 1;
  } else {
    return fzReasonf(why, whyLen, "the key loop's bound is neither a "
                                  "constant nor i + c");
  }
  double m0, l0;
  if (!const_float(fzOpGetOperand(kl, 3), &m0) || m0 > -1e38 ||
      !const_float(fzOpGetOperand(kl, 4), &l0) || l0 != 0.0)
    return fzReasonf(why, whyLen, "the running max and sum do not start at "
                                  "-FLT_MAX and 0");
  /* yield maxf(m, s), fma(l, exp(m - mn), exp(s - mn)) */
  FzOp *yl = yield_of(kl);
  FzValue *m = body_arg(kl, 1), *l = body_arg(kl, 2);
  FzValue *mn = fzOpGetOperand(yl, 0), *ln = fzOpGetOperand(yl, 1);
  FzValue *fa, *fb, *fc, *x, *y, *x2, *y2;
  if (opc_of(mn) != FZ_LOOP_OP_MAXF || !fma_parts(ln, &fa, &fb, &fc))
    return fzReasonf(why, whyLen, "the key loop is not an online softmax");
  FzValue *mo0 = fzOpGetOperand(def_of(mn), 0),
          *mo1 = fzOpGetOperand(def_of(mn), 1);
  a->score = mo0 == m ? mo1 : mo1 == m ? mo0 : NULL;
  FzValue *alpha = fa == l ? fb : fb == l ? fa : NULL;
  if (!a->score || !alpha || !exp_diff(alpha, &x, &y) || x != m || y != mn ||
      !exp_diff(fc, &x2, &y2) || x2 != a->score || y2 != mn)
    return fzReasonf(why, whyLen, "the key loop is not an online softmax");
  FzValue *p = fc;
  /* The loops inside. */
  a->dot = a->pv = NULL;
  for (FzOp *op = fzBlockGetFirstOp(fzLoopGetBody(kl)); op;
       op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR) {
      FzOp **slot = fzOpGetNumResults(op) == 1 ? &a->dot : &a->pv;
      if (*slot)
        return fzReasonf(why, whyLen, "the key loop holds other loops");
      *slot = op;
    } else if (fzLoopGetOpcode(op) != FZ_LOOP_OP_YIELD &&
               (!mmEpilogueOpOk(op) ||
                fzLoopGetOpcode(op) == FZ_LOOP_OP_STORE)) {
      return fzReasonf(why, whyLen, "the key loop holds a '%.*s'",
                       FZ_OPNAME(op));
    }
  }
  if (!a->dot || !a->pv)
    return fzReasonf(why, whyLen, "the key loop lacks its dot or P V loop");
  Vars V = {a->par, a->numDims, body_arg(kl, 0), NULL};
  if (!match_dot(a, &V, why, whyLen) ||
      !match_pv(a, &V, alpha, p, why, whyLen))
    return false;
  a->numChain = 0;
  if (!collect_chain(a, a->score, 0, why, whyLen))
    return false;
  /* The score must come from the dot product. */
  bool uses = fzOpGetResult(a->dot, 0) == a->score;
  for (size_t i = 0; !uses && i < a->numChain; ++i)
    for (size_t o = 0; o < fzOpGetNumOperands(a->chain[i]); ++o)
      uses = uses || fzOpGetOperand(a->chain[i], o) ==
                         fzOpGetResult(a->dot, 0);
  if (!uses)
    return fzReasonf(why, whyLen, "the score is not computed from q . k");
  return true; /* the chain is in post order: operands first */
}

/* Every value the nest uses that is defined outside it. */
static bool collect_captures(FzAttnNest *a, FzBlock *b, char *why,
                             size_t whyLen) {
  for (FzOp *op = fzBlockGetFirstOp(b); op; op = fzOpGetNextInBlock(op)) {
    for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
      FzValue *v = fzOpGetOperand(op, i);
      if (defined_inside(v, a->par))
        continue;
      bool seen = false;
      for (size_t c = 0; c < a->numCaptures && !seen; ++c)
        seen = a->captures[c] == v;
      if (seen)
        continue;
      if (a->numCaptures >= FZ_MATMUL_MAX_CAPTURES)
        return fzReasonf(why, whyLen, "the nest uses too many outer values");
      a->captures[a->numCaptures++] = v;
    }
    for (size_t r = 0; r < fzOpGetNumRegions(op); ++r)
      for (FzBlock *in = fzRegionGetFirstBlock(fzOpGetRegion(op, r)); in;
           in = fzBlockGetNext(in))
        if (!collect_captures(a, in, why, whyLen))
          return false;
  }
  return true;
}

/* The shape of an attention nest: a top-level loop carrying two floats
 * whose body holds an exp (worth a remark when refused). */
static FzOp *key_loop_candidate(FzOp *par) {
  for (FzOp *op = fzBlockGetFirstOp(fzLoopGetBody(par)); op;
       op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_FOR || fzOpGetNumResults(op) != 2)
      continue;
    for (FzOp *in = fzBlockGetFirstOp(fzLoopGetBody(op)); in;
         in = fzOpGetNextInBlock(in))
      if (fzLoopGetOpcode(in) == FZ_LOOP_OP_EXP)
        return op;
  }
  return NULL;
}

bool fzKernelMatchAttentionNest(FzOp *par, FzAttnNest *a, bool *isAttn,
                                char *why, size_t whyLen) {
  memset(a, 0, sizeof *a);
  *isAttn = false;
  if (why && whyLen)
    why[0] = '\0';
  if (fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL ||
      !(a->kloop = key_loop_candidate(par)))
    return false;
  *isAttn = true;
  a->par = par;
  a->numDims = fzLoopParallelGetNumDims(par);
  if (a->numDims < 1 || a->numDims > FZ_MATMUL_MAX_DIMS ||
      !mmNestExtents(par, a->extent, why, whyLen))
    return fzReasonf(why, whyLen, "the nest's bounds are not constants");
  a->Sq = a->extent[a->numDims - 1];
  a->batch = 1;
  for (size_t d = 0; d + 1 < a->numDims; ++d)
    a->batch *= a->extent[d];
  /* Top level: row ops, init, key loop, final loop, yield. */
  bool afterKey = false;
  for (FzOp *op = fzBlockGetFirstOp(fzLoopGetBody(par)); op;
       op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode o = fzLoopGetOpcode(op);
    if (op == a->kloop) {
      afterKey = true;
    } else if (o == FZ_LOOP_OP_FOR) {
      FzOp **slot = afterKey ? &a->fin : &a->init;
      if (*slot || fzOpGetNumResults(op) != 0)
        return fzReasonf(why, whyLen, "the nest holds other loops");
      *slot = op;
    } else if (o != FZ_LOOP_OP_YIELD &&
               (!mmEpilogueOpOk(op) || o == FZ_LOOP_OP_STORE)) {
      return fzReasonf(why, whyLen, "the nest holds a '%.*s' outside its "
                                    "loops", FZ_OPNAME(op));
    }
  }
  if (!a->init || !a->fin)
    return fzReasonf(why, whyLen, "no accumulator init or final loop");
  if (!match_kloop(a, why, whyLen))
    return false;
  /* init: store 0.0 to acc[b.., i, d] for d < Dv. */
  FzOp *is = fzBlockGetFirstOp(fzLoopGetBody(a->init));
  double z;
  if (const_trips(a->init) != a->Dv || !is ||
      fzLoopGetOpcode(is) != FZ_LOOP_OP_STORE ||
      !const_float(fzOpGetOperand(is, 0), &z) || z != 0.0 ||
      !acc_at(is, a->acc, par, a->numDims, body_arg(a->init, 0)) ||
      fzOpGetNextInBlock(is) != yield_of(a->init))
    return fzReasonf(why, whyLen, "the accumulator is not zeroed first");
  /* final: its first op loads acc[b.., i, d]; then scalar ops and
   * stores, none of acc but at that element (f32: acc is the output). */
  if (const_trips(a->fin) != a->Dv)
    return fzReasonf(why, whyLen, "the final loop is not over the value "
                                  "dim");
  a->finLoad = fzBlockGetFirstOp(fzLoopGetBody(a->fin));
  if (!a->finLoad || fzLoopGetOpcode(a->finLoad) != FZ_LOOP_OP_LOAD ||
      !acc_at(a->finLoad, a->acc, par, a->numDims, body_arg(a->fin, 0)))
    return fzReasonf(why, whyLen, "the final loop does not read the "
                                  "accumulator first");
  for (FzOp *op = fzOpGetNextInBlock(a->finLoad); op;
       op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode o = fzLoopGetOpcode(op);
    if (o == FZ_LOOP_OP_YIELD)
      continue;
    if (!mmEpilogueOpOk(op))
      return fzReasonf(why, whyLen, "the final loop holds a '%.*s'",
                       FZ_OPNAME(op));
    bool mem = o == FZ_LOOP_OP_LOAD || o == FZ_LOOP_OP_STORE;
    if (mem && fzOpGetOperand(op, fzLoopMemGetBufferOperand(op)) == a->acc &&
        (o == FZ_LOOP_OP_LOAD ||
         !acc_at(op, a->acc, par, a->numDims, body_arg(a->fin, 0))))
      return fzReasonf(why, whyLen, "the final loop reads the accumulator "
                                    "again");
  }
  /* Shapes the kernel holds (head dims: match_dot, match_pv). */
  if (a->Sk < 1)
    return fzReasonf(why, whyLen, "no keys");
  if (a->batch > 65535)
    return fzReasonf(why, whyLen, "batch x heads %lld is more than grid.z "
                     "allows", (long long)a->batch);
  return collect_captures(a, fzLoopGetBody(par), why, whyLen);
}

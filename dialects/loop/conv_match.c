/* dialects/loop/conv_match.c - convMatch (nest_match.h): recognizing a
 * conv2d nest, NCHW or NHWC, by evaluating its index expressions over
 * their domain. Shared by tile-convolutions (CPU) and
 * lower-loop-to-kernel's implicit GEMM (GPU); each adds its own checks
 * on top.
 *
 * The layout is not guessed from names: the nest is matched with the
 * NCHW roles of its ivs first, then with the NHWC ones (match_as), and
 * the reading whose every check holds wins. The two cannot both hold for
 * a nest whose weight depends on the output channel (one reading puts
 * the channel on a spatial iv, which the weight check refuses); a nest
 * whose weight does not is a true description in either reading.
 */
#include <string.h>

#include "fz/loop.h"
#include "ir/util.h"
#include "dialects/loop/nest_match.h"

/*===--- Index expressions ------------------------------------------------===*/

static int var_index(const ConvNest *C, FzValue *v) {
  for (int i = 0; i < CV_NUM; ++i)
    if (C->vars[i] == v)
      return i;
  return -1;
}

uint32_t convVarDeps(const ConvNest *C, FzValue *v, bool loads, int depth) {
  if (depth > 64)
    return CV_BAD;
  if (!tileInNest((TileNest *)&C->T, v))
    return 0;
  int i = var_index(C, v);
  if (i >= 0)
    return 1u << i;
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def)
    return CV_BAD;
  bool isLoad = fzLoopGetOpcode(def) == FZ_LOOP_OP_LOAD;
  if (!(tilePlainOp(def) || (loads && isLoad)))
    return CV_BAD;
  uint32_t m = 0;
  for (size_t k = 0; k < fzOpGetNumOperands(def); ++k)
    m |= convVarDeps(C, fzOpGetOperand(def, k), loads, depth + 1);
  return m;
}

typedef struct Env {
  int64_t val[CV_NUM];
} Env;

/* Evaluates an integer (index, iN, i1) expression of the ivs. */
static bool eval(const ConvNest *C, FzValue *v, const Env *e, int64_t *out,
                 int depth) {
  if (depth > 64)
    return false;
  if (fzLoopValueGetConstantInt(v, out))
    return true;
  int i = var_index(C, v);
  if (i >= 0) {
    *out = e->val[i];
    return true;
  }
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || !tilePlainOp(def) || fzOpGetNumOperands(def) > 3)
    return false;
  size_t n = fzOpGetNumOperands(def);
  FzLoopOpcode opc = fzLoopGetOpcode(def);
  FzType *t = fzValueGetType(v);
  FzType *ot = n ? fzValueGetType(fzOpGetOperand(
                       def, opc == FZ_LOOP_OP_SELECT ? 1 : 0))
                 : t;
  if (fzTypeIsFloat(t) || fzTypeIsFloat(ot))
    return false;
  FzLoopScalar in[3], r;
  for (size_t k = 0; k < n; ++k)
    if (!eval(C, fzOpGetOperand(def, k), e, &in[k].i, depth + 1))
      return false;
  if (!fzLoopEvalScalar(opc, fzLoopCmpGetPredicate(def), t, ot, n, in, &r))
    return false;
  *out = r.i;
  return true;
}

bool convAffine(const ConvNest *C, FzValue *v, int64_t scale, int64_t *coef,
                int64_t *c0, int depth) {
  int64_t k;
  if (depth > 64)
    return false;
  if (fzLoopValueGetConstantInt(v, &k)) {
    *c0 += scale * k;
    return true;
  }
  int i = var_index(C, v);
  if (i >= 0) {
    coef[i] += scale;
    return true;
  }
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || fzOpGetNumOperands(def) != 2)
    return false;
  FzValue *a = fzOpGetOperand(def, 0), *b = fzOpGetOperand(def, 1);
  Env none;
  memset(&none, 0, sizeof none);
  switch (fzLoopGetOpcode(def)) {
  case FZ_LOOP_OP_ADDI:
    return convAffine(C, a, scale, coef, c0, depth + 1) &&
           convAffine(C, b, scale, coef, c0, depth + 1);
  case FZ_LOOP_OP_SUBI:
    return convAffine(C, a, scale, coef, c0, depth + 1) &&
           convAffine(C, b, -scale, coef, c0, depth + 1);
  case FZ_LOOP_OP_MULI:
    if (convVarDeps(C, b, false, 0) == 0 && eval(C, b, &none, &k, 0))
      return convAffine(C, a, scale * k, coef, c0, depth + 1);
    if (convVarDeps(C, a, false, 0) == 0 && eval(C, a, &none, &k, 0))
      return convAffine(C, b, scale * k, coef, c0, depth + 1);
    return false;
  default:
    return false;
  }
}

/* v without the clamps (maxsi / minsi against a constant) around it. */
static FzValue *strip_clamps(const ConvNest *C, FzValue *v) {
  for (;;) {
    FzOp *def = fzValueGetDefiningOp(v);
    FzLoopOpcode c = def ? fzLoopGetOpcode(def) : FZ_LOOP_OP_UNKNOWN;
    if (c != FZ_LOOP_OP_MAXSI && c != FZ_LOOP_OP_MINSI)
      return v;
    if (convVarDeps(C, fzOpGetOperand(def, 1), false, 0) == 0)
      v = fzOpGetOperand(def, 0);
    else if (convVarDeps(C, fzOpGetOperand(def, 0), false, 0) == 0)
      v = fzOpGetOperand(def, 1);
    else
      return v;
  }
}

/* The conjuncts of an i1 and-tree. */
static bool conjuncts(FzValue *v, FzValue **out, size_t *n, size_t max) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (def && fzLoopGetOpcode(def) == FZ_LOOP_OP_ANDI &&
      fzTypeGetKind(fzValueGetType(v)) != FZ_TYPE_VECTOR)
    return conjuncts(fzOpGetOperand(def, 0), out, n, max) &&
           conjuncts(fzOpGetOperand(def, 1), out, n, max);
  if (*n >= max)
    return false;
  out[(*n)++] = v;
  return true;
}

/* One spatial axis: the load index idx(o, k), its conjuncts of the
 * padding condition, o over [0, O), k over [0, K) (vars vo, vk), the
 * input extent S. Derives s, d, off (the unclamped index o*s + k*d +
 * off) and checks, for every (o, k), that the condition is exactly
 * "inside the input" and that idx is the unclamped index there. *padded
 * is set when some position lies outside. */
static bool check_axis(const ConvNest *C, FzValue *idx, FzValue *const *conds,
                       size_t numConds, int vo, int vk, int64_t O, int64_t K,
                       int64_t S, int64_t *s, int64_t *d, int64_t *off,
                       bool *padded) {
  uint32_t allowed = (1u << vo) | (1u << vk);
  if (convVarDeps(C, idx, false, 0) & ~allowed)
    return false;
  int64_t coef[CV_NUM] = {0}, c0 = 0;
  if (!convAffine(C, strip_clamps(C, idx), 1, coef, &c0, 0))
    return false;
  for (int i = 0; i < CV_NUM; ++i)
    if (i != vo && i != vk && coef[i] != 0)
      return false;
  *s = coef[vo], *d = coef[vk], *off = c0;
  if (*s < 0 || *d < 0 || O * K > CV_MAX_TABLE)
    return false;
  Env e;
  memset(&e, 0, sizeof e);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < K; ++k) {
      e.val[vo] = o, e.val[vk] = k;
      int64_t pos = o * *s + k * *d + *off, v;
      bool in = pos >= 0 && pos < S, cond = true;
      for (size_t i = 0; i < numConds; ++i) {
        if (!eval(C, conds[i], &e, &v, 0))
          return false;
        cond = cond && (v & 1);
      }
      if (cond != in)
        return false;
      if (!in) {
        *padded = true;
        continue;
      }
      if (!eval(C, idx, &e, &v, 0) || v != pos)
        return false;
    }
  return true;
}

/*===--- Matching ---------------------------------------------------------===*/

/* op is a loop.for with one f32 iteration argument whose body yields
 * one value. */
static bool red_shape(FzOp *op) {
  if (!op || fzLoopGetOpcode(op) != FZ_LOOP_OP_FOR ||
      fzOpGetNumOperands(op) != 4 || fzOpGetNumResults(op) != 1 ||
      fzTypeGetKind(fzValueGetType(fzOpGetResult(op, 0))) != FZ_TYPE_F32)
    return false;
  FzBlock *b = fzLoopGetBody(op);
  FzOp *y = b ? fzBlockGetLastOp(b) : NULL;
  return y && fzBlockGetNumArguments(b) == 2 &&
         fzLoopGetOpcode(y) == FZ_LOOP_OP_YIELD && fzOpGetNumOperands(y) == 1;
}

/* op is red_shape's loop over [0, *ext) step 1. */
static bool red_loop(FzOp *op, int64_t *ext) {
  int64_t lb, st;
  return red_shape(op) &&
         fzLoopValueGetConstantInt(fzOpGetOperand(op, 0), &lb) && lb == 0 &&
         fzLoopValueGetConstantInt(fzOpGetOperand(op, 1), ext) && *ext > 0 &&
         fzLoopValueGetConstantInt(fzOpGetOperand(op, 2), &st) && st == 1;
}

/* The c loop of a k split's partial nest: red_shape's loop over slice
 * sb, the nest's 5th dim (its extent: operand 5 + 4, the upper bounds
 * following the 5 lower ones). */
static bool split_loop(ConvNest *C, FzOp *op) {
  int dim;
  return red_shape(op) &&
         splitMatchBounds(C->T.par, op, &dim, &C->sliceC, &C->ext[0]) &&
         dim == 4 &&
         fzLoopValueGetConstantInt(fzOpGetOperand(C->T.par, 5 + 4),
                                   &C->slices);
}

/* The ext[] entry (CG, KH, KW) of each role CV_C, CV_KH, CV_KW. */
static int ext_slot(int var) {
  return var - CV_C;
}

/* The chain of three reductions starting at C->loops[0]. */
static bool match_loops(ConvNest *C) {
  for (int l = 0; l < 3; ++l) {
    int var = C->redVar[l];
    bool split = l == 0 && fzLoopParallelGetNumDims(C->T.par) == 5;
    if (split ? !split_loop(C, C->loops[l])
              : !red_loop(C->loops[l], &C->ext[ext_slot(var)]))
      return false;
    C->bodies[l] = fzLoopGetBody(C->loops[l]);
    C->vars[var] = fzBlockGetArgument(C->bodies[l], 0);
    if (l == 2)
      break;
    FzBlock *b = C->bodies[l];
    FzOp *yield = fzBlockGetLastOp(b), *inner = NULL;
    for (FzOp *op = fzBlockGetFirstOp(b); op != yield;
         op = fzOpGetNextInBlock(op)) {
      if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR && !inner)
        inner = op;
      else if (!tilePlainOp(op))
        return false;
    }
    FzValue *acc = fzBlockGetArgument(b, 1);
    if (!inner || fzOpGetNumOperands(inner) != 4 ||
        fzOpGetOperand(inner, 3) != acc || !fzValueHasOneUse(acc) ||
        fzOpGetNumResults(inner) != 1 ||
        fzOpGetOperand(yield, 0) != fzOpGetResult(inner, 0))
      return false;
    C->loops[l + 1] = inner;
  }
  return true;
}

static bool is_zero_f32(FzValue *v) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_CONSTANT ||
      fzTypeGetKind(fzValueGetType(v)) != FZ_TYPE_F32)
    return false;
  FzAttr *a = fzOpGetProp(def, FZ_STR("value"));
  return a && fzAttrGetKind(a) == FZ_ATTR_FLOAT && fzFloatAttrGetValue(a) == 0;
}

/* A load of x, or its extension to f32 (*ext); NULL otherwise. */
static FzOp *input_load(FzValue *v, bool *ext) {
  FzOp *def = fzValueGetDefiningOp(v);
  *ext = false;
  if (def && fzLoopGetOpcode(def) == FZ_LOOP_OP_EXTF) {
    *ext = true;
    def = fzValueGetDefiningOp(fzOpGetOperand(def, 0));
  }
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_LOAD ||
      fzOpGetNumOperands(def) != 5)
    return NULL;
  FzTypeKind k = fzTypeGetKind(fzValueGetType(fzOpGetResult(def, 0)));
  bool ok = *ext ? (k == FZ_TYPE_BF16 || k == FZ_TYPE_F16) : k == FZ_TYPE_F32;
  return ok ? def : NULL;
}

/* Whether a load of the tree v reads a buffer in written. */
static bool match_term(ConvNest *C, FzValue **a, FzValue **b,
                       FzValue **cond) {
  FzBlock *in = C->bodies[2];
  FzOp *yield = fzBlockGetLastOp(in);
  FzValue *acc = fzBlockGetArgument(in, 1);
  FzOp *add = fzValueGetDefiningOp(fzOpGetOperand(yield, 0));
  if (!add || fzLoopGetOpcode(add) != FZ_LOOP_OP_ADDF ||
      fzOpGetBlock(add) != in || !fzValueHasOneUse(acc))
    return false;
  size_t pa = fzOpGetOperand(add, 0) == acc ? 1 : 0;
  if (fzOpGetOperand(add, 1 - pa) != acc)
    return false;
  FzValue *p = fzOpGetOperand(add, pa);
  FzOp *def = fzValueGetDefiningOp(p);
  *cond = NULL;
  if (def && fzLoopGetOpcode(def) == FZ_LOOP_OP_SELECT) {
    if (!fzValueHasOneUse(p) || !is_zero_f32(fzOpGetOperand(def, 2)))
      return false;
    *cond = fzOpGetOperand(def, 0);
    p = fzOpGetOperand(def, 1);
    def = fzValueGetDefiningOp(p);
  }
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_MULF ||
      !fzValueHasOneUse(p) ||
      fzTypeGetKind(fzValueGetType(p)) != FZ_TYPE_F32)
    return false;
  *a = fzOpGetOperand(def, 0);
  *b = fzOpGetOperand(def, 1);
  for (FzOp *op = fzBlockGetFirstOp(in); op != yield;
       op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_LOAD && !tilePlainOp(op))
      return false;
  return true;
}

/*===--- The matcher ------------------------------------------------------===*/

/* The roles of the nest's ivs in layout L: parDim (the parallel dim of
 * CV_N, CV_M, CV_OH, CV_OW) and redVar (the role of each reduction loop,
 * outermost first). */
static void set_roles(ConvNest *C, ConvLayout L) {
  static const int parNchw[4] = {0, 1, 2, 3}, parNhwc[4] = {0, 3, 1, 2};
  static const int redNchw[3] = {CV_C, CV_KH, CV_KW};
  static const int redNhwc[3] = {CV_KH, CV_KW, CV_C};
  C->layout = L;
  memcpy(C->parDim, L == CONV_NHWC ? parNhwc : parNchw, sizeof C->parDim);
  memcpy(C->redVar, L == CONV_NHWC ? redNhwc : redNchw, sizeof C->redVar);
}

/* A refusal at stage st of match_as (how far the reading got). */
#define REFUSE(st, ...) (*stage = (st), fzReasonf(why, whyLen, __VA_ARGS__))

/* convMatch with the ivs read in layout L; *stage gets how far the
 * match got when it fails (a larger stage: more checks held). */
static bool match_as(ConvNest *C, FzOp *par, ConvLayout L, bool *isConv,
                     char *why, size_t whyLen, int *stage) {
  TileNest *T = &C->T;
  bool nhwc = L == CONV_NHWC;
  set_roles(C, L);
  size_t nd = fzLoopGetOpcode(par) == FZ_LOOP_OP_PARALLEL
                  ? fzLoopParallelGetNumDims(par)
                  : 0;
  /* A k split's partial nest is NCHW's (split_k.c slices the c loop,
   * the outermost one there). */
  if (nd != 4 && !(nd == 5 && C->allowSplit && !nhwc))
    return REFUSE(0, "not a 4-d loop.parallel");
  T->par = par;
  T->body = fzLoopGetBody(par);
  T->n = 4;
  /* The GEMM view: rows and columns. NCHW: m and ow; NHWC: the output
   * pixels (ow) and the channels m, the contiguous last dim. */
  T->dI = nhwc ? 2 : CV_M;
  T->dJ = nhwc ? 3 : CV_OW;
  for (size_t d = 0; d < nd; ++d) {
    int64_t lb, ub, st;
    if (!fzLoopValueGetConstantInt(fzOpGetOperand(par, d), &lb) || lb != 0 ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(par, nd + d), &ub) ||
        ub <= 0 ||
        !fzLoopValueGetConstantInt(fzOpGetOperand(par, 2 * nd + d), &st) ||
        st != 1)
      return REFUSE(1, "the nest's bounds are not constants 0..N step 1");
    if (d == 4)
      break; /* the slice: no iv of the index expressions */
    T->trips[d] = ub;
  }
  for (int r = 0; r < 4; ++r) {
    C->outDims[r] = T->trips[C->parDim[r]];
    C->vars[r] = fzBlockGetArgument(T->body, (size_t)C->parDim[r]);
  }
  /* One reduction loop; otherwise plain ops, loads and stores. */
  for (FzOp *op = fzBlockGetFirstOp(T->body); op; op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (c == FZ_LOOP_OP_FOR) {
      if (T->red)
        return REFUSE(2, "the nest holds more than one loop");
      T->red = op;
    } else if (c == FZ_LOOP_OP_YIELD) {
      if (op != fzBlockGetLastOp(T->body))
        return REFUSE(2, "a yield inside the nest's body");
    } else if (c != FZ_LOOP_OP_STORE && c != FZ_LOOP_OP_LOAD &&
               !tilePlainOp(op)) {
      return REFUSE(2, "the nest holds an op a conv2d nest does not");
    }
  }
  C->loops[0] = T->red;
  if (!T->red || !match_loops(C))
    return REFUSE(3, nhwc ? "not three nested reductions (kh, kw, c)"
                          : "not three nested reductions (c, kh, kw)");
  if (isConv)
    *isConv = true;
  T->redBody = C->bodies[0];
  T->K = C->ext[0] * C->ext[1] * C->ext[2];

  /* The term: x (the load that depends on ow) times w. */
  FzValue *a, *b, *cond;
  if (!match_term(C, &a, &b, &cond))
    return REFUSE(4, "the innermost reduction does not add a (masked) "
                     "product");
  bool extA, extB;
  FzOp *la = input_load(a, &extA), *lb = input_load(b, &extB);
  uint32_t ow = 1u << CV_OW;
  if (la && (convVarDeps(C, a, true, 0) & ow)) {
    C->xLoad = la, C->xExt = extA, C->wVal = b;
  } else if (lb && (convVarDeps(C, b, true, 0) & ow)) {
    C->xLoad = lb, C->xExt = extB, C->wVal = a;
  } else {
    return REFUSE(5, "no factor is a load of the input along the output "
                     "width");
  }
  uint32_t wAllowed =
      (1u << CV_M) | (1u << CV_C) | (1u << CV_KH) | (1u << CV_KW);
  if (convVarDeps(C, C->wVal, true, 0) & ~wAllowed)
    return REFUSE(6, "the weight depends on more than (m, c, kh, kw)");
  FzValue *xBuf = fzOpGetOperand(C->xLoad, 0);
  FzType *xt = fzValueGetType(xBuf);
  if (tileInNest(T, xBuf) || fzShapedTypeGetRank(xt) != 4)
    return REFUSE(7, "the input is not a 4-d buffer from outside the nest");
  /* The input's channel and spatial dims in the layout. */
  size_t cd = nhwc ? 3 : 1, hd = nhwc ? 1 : 2;
  C->C = fzShapedTypeGetDim(xt, cd);
  C->H = fzShapedTypeGetDim(xt, hd);
  C->Wi = fzShapedTypeGetDim(xt, hd + 1);
  if (C->C <= 0 || C->H <= 0 || C->Wi <= 0)
    return REFUSE(7, "the input's shape is not static");

  /* The batch index is n; the channel depends on (m, c) only. */
  FzValue *idx[4];
  for (int i = 0; i < 4; ++i)
    idx[i] = fzOpGetOperand(C->xLoad, 1 + (size_t)i);
  int64_t coef[CV_NUM] = {0}, c0 = 0;
  if (!convAffine(C, idx[0], 1, coef, &c0, 0) || c0 != 0)
    return REFUSE(8, "the input's batch index is not n");
  for (int i = 0; i < CV_NUM; ++i)
    if (coef[i] != (i == CV_N ? 1 : 0))
      return REFUSE(8, "the input's batch index is not n");
  C->chIdx = idx[cd];
  int64_t M = C->outDims[CV_M], CG = C->ext[0];
  if (convVarDeps(C, C->chIdx, false, 0) & ~((1u << CV_M) | (1u << CV_C)) ||
      M * CG > CV_MAX_TABLE)
    return REFUSE(9, "the input's channel index is not a function of (m, "
                     "c)");

  /* The padding condition: conjuncts of (oh, kh) and of (ow, kw). */
  FzValue *conds[16], *hc[16], *wc[16];
  size_t nc = 0, nh = 0, nw = 0;
  if (cond && !conjuncts(cond, conds, &nc, 16))
    return REFUSE(10, "the padding condition is too complex");
  Env none;
  memset(&none, 0, sizeof none);
  for (size_t i = 0; i < nc; ++i) {
    uint32_t d = convVarDeps(C, conds[i], false, 0);
    int64_t v;
    if (d == 0 && eval(C, conds[i], &none, &v, 0) && (v & 1))
      continue;
    if (d && !(d & ~((1u << CV_OH) | (1u << CV_KH))))
      hc[nh++] = conds[i];
    else if (d && !(d & ~((1u << CV_OW) | (1u << CV_KW))))
      wc[nw++] = conds[i];
    else
      return REFUSE(10, "the padding condition mixes the axes");
  }
  bool padded = false;
  if (!check_axis(C, idx[hd], hc, nh, CV_OH, CV_KH, C->outDims[CV_OH],
                  C->ext[1], C->H, &C->sh, &C->dh, &C->hOff, &padded) ||
      !check_axis(C, idx[hd + 1], wc, nw, CV_OW, CV_KW, C->outDims[CV_OW],
                  C->ext[2], C->Wi, &C->sw, &C->dw, &C->wOff, &padded) ||
      C->sw < 1)
    return REFUSE(11, "the input's spatial indices are not a strided, "
                      "dilated, zero-padded window");
  C->pack = padded || C->sw != 1 || C->xExt;

  /* The channel table. */
  C->chTab = fzMalloc(T->ctx, (size_t)(M * CG) * sizeof *C->chTab);
  if (!C->chTab)
    return REFUSE(12, "out of memory");
  Env e;
  memset(&e, 0, sizeof e);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < CG; ++c) {
      e.val[CV_M] = m, e.val[CV_C] = c;
      int64_t v;
      if (!eval(C, C->chIdx, &e, &v, 0) || v < 0 || v >= C->C)
        return REFUSE(12, "the input's channel index leaves the input");
      C->chTab[m * CG + c] = v;
    }
  return true;
}

#undef REFUSE

bool convMatch(ConvNest *C, FzOp *par, bool *isConv, char *why,
               size_t whyLen) {
  /* What the caller set, kept for the second reading. */
  FzContext *ctx = C->T.ctx;
  FzPtrMap deps = C->T.deps;
  bool allowSplit = C->allowSplit;
  char whyNchw[160] = "", whyNhwc[160] = "";
  int stNchw = 0, stNhwc = 0;
  bool shaped = false;
  bool ok = match_as(C, par, CONV_NCHW, &shaped, whyNchw, sizeof whyNchw,
                     &stNchw);
  if (!ok) {
    fzFree(ctx, C->chTab);
    memset(C, 0, sizeof *C);
    C->T.ctx = ctx;
    C->T.deps = deps;
    C->allowSplit = allowSplit;
    ok = match_as(C, par, CONV_NHWC, &shaped, whyNhwc, sizeof whyNhwc,
                  &stNhwc);
  }
  if (isConv)
    *isConv = ok || shaped;
  if (ok)
    return true;
  /* The reading that got further says why (NCHW on a tie: its reasons
   * are the ones users of NCHW nests know). */
  return fzReasonf(why, whyLen, "%s", stNhwc > stNchw ? whyNhwc : whyNchw);
}

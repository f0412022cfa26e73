/* lowering/graph_to_loop_reduce.c - lower-graph-to-loop for the ops that
 * reduce: reduce_*, softmax, log_softmax, layer_norm, rms_norm, matmul,
 * conv2d and pooling.
 *
 * Every reduction is a loop.for nest (one loop per reduced dimension)
 * carrying accumulators as iteration arguments, placed at the level of
 * the indices it depends on: a softmax's max and sum run once per row
 * (the row's loop body), a matmul's k loop once per output element. The
 * element computation inside is emitted through lgEmit, so producers in
 * the group are computed in the loop body (never stored). Loops carry
 * the unit attribute `loop.reduction`.
 *
 * conv2d reduces over (c, kh, kw) in NCHW and over (kh, kw, c) in NHWC
 * (docs/dialects/graph.md, "Layouts"): channels innermost, so that
 * consecutive reduction steps read consecutive input elements, as the
 * NHWC back ends (dialects/loop/nest_match.h) expect.
 */
#include <math.h>
#include <string.h>

#include "lowering/graph_to_loop_internal.h"

/* Computes the new accumulators from the old ones at reduced indices
 * ivs. Returns false after an error. */
typedef bool (*StepFn)(LgNest *N, FzValue *const *ivs, FzValue *const *acc,
                       FzValue **next, void *ud);

/* Runs nested loop.for over ext[0..nred) (outermost first) with nacc
 * accumulators starting at inits, under path position `parent`; the
 * final accumulators go to results. */
static bool reduce_loops(LgNest *N, size_t parent, size_t nred,
                         const int64_t *ext, size_t nacc,
                         FzValue *const *inits, StepFn step, void *ud,
                         FzValue **results) {
  LgSaved saved[LG_MAX_RANK];
  FzValue *ivs[LG_MAX_RANK] = {NULL}, *acc[8], *cur[8];
  if (nacc > 8 || nred > LG_MAX_RANK)
    return false;
  for (size_t k = 0; k < nacc; ++k)
    if (!(cur[k] = inits[k]))
      return false;
  if (nred == 0)
    return step(N, ivs, cur, results, ud);
  for (size_t d = 0; d < nred; ++d) {
    size_t p = d == 0 ? parent : N->depth - 1;
    if (!lgOpenFor(N, p, ext[d], nacc, cur, &ivs[d], acc, &saved[d]))
      return false;
    memcpy(cur, acc, nacc * sizeof *cur);
  }
  FzValue *next[8];
  bool ok = step(N, ivs, cur, next, ud);
  for (size_t k = 0; ok && k < nacc; ++k)
    ok = next[k] != NULL;
  if (!ok) {
    N->F->failed = true;
    for (size_t k = 0; k < nacc; ++k)
      next[k] = cur[k];
  }
  for (size_t d = nred; d-- > 0;) {
    FzOp *loop = lgClose(N, nacc, next, &saved[d]);
    if (!fzOpSetAttr(loop, FZ_STR("loop.reduction"),
                     fzUnitAttrGet(N->F->ctx)))
      N->F->failed = true;
    for (size_t k = 0; k < nacc; ++k)
      next[k] = fzOpGetResult(loop, k);
  }
  memcpy(results, next, nacc * sizeof *results);
  return ok;
}

/* The deepest path position among values (and at least minLevel). */
static size_t deepest(LgNest *N, size_t n, FzValue *const *vals,
                      size_t minLevel) {
  size_t lv = minLevel;
  for (size_t i = 0; i < n; ++i)
    if (vals[i] && lgLevelOf(N, vals[i]) > lv)
      lv = lgLevelOf(N, vals[i]);
  return lv;
}

typedef enum Combine { C_SUM, C_PROD, C_MAX, C_MIN } Combine;

static FzValue *combine(LgNest *N, Combine c, FzValue *a, FzValue *b) {
  bool f = fzTypeIsFloat(fzValueGetType(a));
  bool b1 = !f && fzTypeGetBitWidth(fzValueGetType(a)) == 1;
  switch (c) {
  case C_SUM:
    return fzBBinary(&N->b,
                     f    ? "loop.addf"
                     : b1 ? "loop.xori"
                          : "loop.addi",
                     a, b);
  case C_PROD:
    return fzBBinary(&N->b,
                     f    ? "loop.mulf"
                     : b1 ? "loop.andi"
                          : "loop.muli",
                     a, b);
  case C_MAX:
    return fzBBinary(&N->b,
                     f    ? "loop.maxf"
                     : b1 ? "loop.ori"
                          : "loop.maxsi",
                     a, b);
  default:
    return fzBBinary(&N->b,
                     f    ? "loop.minf"
                     : b1 ? "loop.andi"
                          : "loop.minsi",
                     a, b);
  }
}

static FzValue *identity(LgNest *N, Combine c, FzType *t) {
  if (fzTypeIsFloat(t)) {
    double v = c == C_SUM ? 0.0 : c == C_PROD ? 1.0
             : c == C_MAX ? -HUGE_VAL : HUGE_VAL;
    return fzBConstFloat(&N->b, t, v);
  }
  unsigned w = fzTypeGetBitWidth(t);
  int64_t mx = w == 1 ? 1 : w >= 64 ? INT64_MAX : (INT64_C(1) << (w - 1)) - 1;
  int64_t mn = w == 1 ? 0 : w >= 64 ? INT64_MIN : -(INT64_C(1) << (w - 1));
  int64_t v = c == C_SUM ? 0 : c == C_PROD ? 1 : c == C_MAX ? mn : mx;
  return fzBConstInt(&N->b, t, v);
}

/*===--- Row reductions over one operand ---------------------------------===*/

/* A reduction of operand x over the dims in `axes`, x read at oidx with
 * the reduced entries replaced by the loop's ivs; each element is first
 * mapped by `map` (may be NULL). */
typedef FzValue *(*MapFn)(LgNest *N, FzValue *v, void *ud);

typedef struct RowReduce {
  FzValue *x;
  FzValue *oidx[LG_MAX_RANK];
  size_t red[LG_MAX_RANK], nred;
  Combine c;
  MapFn map;
  void *mapUd;
} RowReduce;

static bool row_step(LgNest *N, FzValue *const *ivs, FzValue *const *acc,
                     FzValue **next, void *ud) {
  RowReduce *R = ud;
  FzValue *full[LG_MAX_RANK];
  memcpy(full, R->oidx, lgRank(R->x) * sizeof *full);
  for (size_t k = 0; k < R->nred; ++k)
    full[R->red[k]] = ivs[k];
  FzValue *v = lgEmit(N, R->x, full);
  if (v && R->map)
    v = R->map(N, v, R->mapUd);
  next[0] = v ? combine(N, R->c, acc[0], v) : NULL;
  return next[0] != NULL;
}

/* Runs R at the level of its kept indices (and of `captured`). */
static FzValue *row_reduce(LgNest *N, RowReduce *R, FzValue *captured) {
  size_t r = lgRank(R->x);
  FzValue *kept[LG_MAX_RANK];
  size_t nk = 0;
  bool isRed[LG_MAX_RANK] = {false};
  int64_t ext[LG_MAX_RANK];
  for (size_t k = 0; k < R->nred; ++k) {
    isRed[R->red[k]] = true;
    ext[k] = lgDim(R->x, R->red[k]);
  }
  for (size_t d = 0; d < r; ++d)
    if (!isRed[d])
      kept[nk++] = R->oidx[d];
  size_t parent = deepest(N, nk, kept, captured ? lgLevelOf(N, captured) : 0);
  FzType *ct = lgComputeType(N->F->ctx, lgElt(R->x));
  FzValue *init = identity(N, R->c, ct), *res;
  if (!reduce_loops(N, parent, R->nred, ext, 1, &init, row_step, R, &res))
    return NULL;
  return res;
}

/* The dims [from, rank) (layer_norm, rms_norm) or one axis. */
static void axes_from(RowReduce *R, size_t from, size_t rank) {
  R->nred = 0;
  for (size_t d = from; d < rank; ++d)
    R->red[R->nred++] = d;
}

static int64_t norm_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + (int64_t)rank : axis;
}

FzValue *lgEmitReduce(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzStringRef name = fzIdentGetString(fzOpGetName(op));
  FzValue *x = fzOpGetOperand(op, 0);
  size_t r = lgRank(x);
  int64_t axes[LG_MAX_RANK];
  int na = lgAttrInts(op, "axes", axes, LG_MAX_RANK);
  bool keep = lgAttrBool(op, "keepdims", false);
  bool isRed[LG_MAX_RANK] = {false};
  for (int i = 0; i < na; ++i) {
    int64_t a = norm_axis(axes[i], r);
    if (a < 0 || a >= (int64_t)r)
      return lgFail(N, op, "axis %lld out of range", (long long)axes[i]);
    isRed[a] = true;
  }
  if (na < 0)
    for (size_t d = 0; d < r; ++d)
      isRed[d] = true;
  RowReduce R;
  memset(&R, 0, sizeof R);
  R.x = x;
  int64_t count = 1;
  for (size_t d = 0, j = 0; d < r; ++d) {
    if (isRed[d]) {
      R.red[R.nred++] = d;
      count *= lgDim(x, d);
      R.oidx[d] = NULL;
      if (keep)
        j++;
    } else {
      R.oidx[d] = idx[j++];
    }
  }
  if (fzStringRefEqual(name, FZ_STR("graph.reduce_max")))
    R.c = C_MAX;
  else if (fzStringRefEqual(name, FZ_STR("graph.reduce_min")))
    R.c = C_MIN;
  else if (fzStringRefEqual(name, FZ_STR("graph.reduce_prod")))
    R.c = C_PROD;
  else
    R.c = C_SUM;
  FzValue *v = row_reduce(N, &R, NULL);
  if (!v || !fzStringRefEqual(name, FZ_STR("graph.reduce_mean")))
    return v;
  if (fzTypeIsFloat(fzValueGetType(v)))
    return fzBBinary(&N->b, "loop.divf", v,
                     fzBConstFloat(&N->b, fzValueGetType(v), (double)count));
  if (count == 0)
    return lgFail(N, op, "integer mean of no elements");
  return fzBBinary(&N->b, "loop.divsi", v,
                   fzBConstInt(&N->b, fzValueGetType(v), count));
}

/*===--- softmax and norms ------------------------------------------------===*/

static FzValue *map_exp_minus(LgNest *N, FzValue *v, void *ud) {
  return fzBUnary(&N->b, "loop.exp", fzBBinary(&N->b, "loop.subf", v, ud));
}

FzValue *lgEmitSoftmax(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *x = fzOpGetOperand(op, 0);
  size_t r = lgRank(x);
  int64_t axis = norm_axis(lgAttrInt(op, "axis", -1), r);
  if (axis < 0 || axis >= (int64_t)r)
    return lgFail(N, op, "axis out of range");
  RowReduce R;
  memset(&R, 0, sizeof R);
  R.x = x;
  memcpy(R.oidx, idx, r * sizeof *idx);
  R.red[0] = (size_t)axis;
  R.nred = 1;
  R.c = C_MAX;
  FzValue *m = row_reduce(N, &R, NULL);
  if (!m)
    return NULL;
  R.c = C_SUM;
  R.map = map_exp_minus;
  R.mapUd = m;
  FzValue *s = row_reduce(N, &R, m);
  FzValue *xi = lgEmit(N, x, idx);
  if (!s || !xi)
    return NULL;
  FzValue *shifted = fzBBinary(&N->b, "loop.subf", xi, m);
  if (fzStringRefEqual(fzIdentGetString(fzOpGetName(op)),
                       FZ_STR("graph.log_softmax")))
    return fzBBinary(&N->b, "loop.subf", shifted,
                     fzBUnary(&N->b, "loop.log", s));
  return fzBBinary(&N->b, "loop.divf", fzBUnary(&N->b, "loop.exp", shifted), s);
}

/* Operand k (scale or bias) read at x's element idx with trailing
 * alignment (it broadcasts to x.shape[axis:]). */
static FzValue *param_at(LgNest *N, FzOp *op, size_t k, FzValue *const *idx) {
  FzValue *p = fzOpGetOperand(op, k), *x = fzOpGetOperand(op, 0);
  size_t rp = lgRank(p), rx = lgRank(x);
  FzValue *pi[LG_MAX_RANK];
  for (size_t j = 0; j < rp; ++j) {
    size_t d = j + rx - rp;
    pi[j] = lgDim(p, j) == 1 && lgDim(x, d) != 1 ? fzBIndex(&N->b, 0) : idx[d];
  }
  return lgEmit(N, p, pi);
}

static FzValue *map_sq_dev(LgNest *N, FzValue *v, void *ud) {
  FzValue *d = fzBBinary(&N->b, "loop.subf", v, ud);
  return fzBBinary(&N->b, "loop.mulf", d, d);
}

static FzValue *map_square(LgNest *N, FzValue *v, void *ud) {
  (void)ud;
  return fzBBinary(&N->b, "loop.mulf", v, v);
}

/* 1 / sqrt(sum / count + eps), at the sum's level. */
static FzValue *inv_std(LgNest *N, FzValue *sum, int64_t count, double eps) {
  FzType *t = fzValueGetType(sum);
  FzValue *mean = fzBBinary(&N->b, "loop.divf", sum,
                            fzBConstFloat(&N->b, t, (double)count));
  FzValue *den = fzBUnary(
      &N->b, "loop.sqrt",
      fzBBinary(&N->b, "loop.addf", mean, fzBConstFloat(&N->b, t, eps)));
  return fzBBinary(&N->b, "loop.divf", fzBConstFloat(&N->b, t, 1.0), den);
}

static bool norm_setup(LgNest *N, FzOp *op, FzValue *const *idx,
                       RowReduce *R, int64_t *count) {
  FzValue *x = fzOpGetOperand(op, 0);
  size_t r = lgRank(x);
  int64_t axis = norm_axis(lgAttrInt(op, "axis", -1), r);
  if (axis < 0 || axis >= (int64_t)r) {
    lgFail(N, op, "axis out of range");
    return false;
  }
  memset(R, 0, sizeof *R);
  R->x = x;
  memcpy(R->oidx, idx, r * sizeof *idx);
  axes_from(R, (size_t)axis, r);
  R->c = C_SUM;
  *count = 1;
  for (size_t d = (size_t)axis; d < r; ++d)
    *count *= lgDim(x, d);
  return true;
}

/* (x - mean) * rstd * scale + bias, two passes over the row for the
 * mean and the (biased) variance. Results #1 and #2 (the optional
 * statistics, x.shape[:axis] followed by ones) are the mean and rstd
 * themselves: idx's entries for the normalized dims are replaced by the
 * reduction loops'. */
FzValue *lgEmitLayerNorm(LgNest *N, FzOp *op, FzValue *const *idx) {
  size_t which = N->emitResult;
  RowReduce R;
  int64_t count;
  if (!norm_setup(N, op, idx, &R, &count))
    return NULL;
  FzValue *sum = row_reduce(N, &R, NULL);
  if (!sum)
    return NULL;
  FzType *t = fzValueGetType(sum);
  FzValue *mean = fzBBinary(&N->b, "loop.divf", sum,
                            fzBConstFloat(&N->b, t, (double)count));
  R.map = map_sq_dev;
  R.mapUd = mean;
  FzValue *var = row_reduce(N, &R, mean);
  FzValue *rstd = var ? inv_std(N, var, count, lgAttrFloat(op, "epsilon",
                                                           1e-5))
                      : NULL;
  if (which != 0 && fzOpGetNumResults(op) == 3) {
    /* Both statistics are made at once: the other one is cached. */
    lgCachePut(N, fzOpGetResult(op, 1), idx, mean);
    lgCachePut(N, fzOpGetResult(op, 2), idx, rstd);
  }
  if (which == 1)
    return mean;
  if (which == 2)
    return rstd;
  FzValue *xi = lgEmit(N, R.x, idx);
  if (!rstd || !xi)
    return NULL;
  FzValue *y = fzBBinary(&N->b, "loop.mulf",
                         fzBBinary(&N->b, "loop.subf", xi, mean), rstd);
  size_t n = fzOpGetNumOperands(op);
  if (n > 1)
    y = fzBBinary(&N->b, "loop.mulf", y, param_at(N, op, 1, idx));
  if (n > 2)
    y = fzBBinary(&N->b, "loop.addf", y, param_at(N, op, 2, idx));
  return y;
}

FzValue *lgEmitRmsNorm(LgNest *N, FzOp *op, FzValue *const *idx) {
  RowReduce R;
  int64_t count;
  if (!norm_setup(N, op, idx, &R, &count))
    return NULL;
  R.map = map_square;
  FzValue *ss = row_reduce(N, &R, NULL);
  FzValue *rstd = ss ? inv_std(N, ss, count, lgAttrFloat(op, "epsilon", 1e-5))
                     : NULL;
  FzValue *xi = lgEmit(N, R.x, idx);
  if (!rstd || !xi)
    return NULL;
  FzValue *y = fzBBinary(&N->b, "loop.mulf", xi, rstd);
  if (fzOpGetNumOperands(op) > 1)
    y = fzBBinary(&N->b, "loop.mulf", y, param_at(N, op, 1, idx));
  return y;
}

/*===--- matmul ----------------------------------------------------------===*/

typedef struct MatmulCtx {
  FzValue *a, *b;
  FzValue *ai[LG_MAX_RANK], *bi[LG_MAX_RANK];
  size_t ak, bk; /* position of the contracted index in ai / bi */
} MatmulCtx;

static bool matmul_step(LgNest *N, FzValue *const *ivs, FzValue *const *acc,
                        FzValue **next, void *ud) {
  MatmulCtx *M = ud;
  M->ai[M->ak] = ivs[0];
  M->bi[M->bk] = ivs[0];
  FzValue *x = lgEmit(N, M->a, M->ai), *y = lgEmit(N, M->b, M->bi);
  if (!x || !y)
    return false;
  bool f = fzTypeIsFloat(fzValueGetType(x));
  FzValue *p = fzBBinary(&N->b, f ? "loop.mulf" : "loop.muli", x, y);
  next[0] = fzBBinary(&N->b, f ? "loop.addf" : "loop.addi", acc[0], p);
  return next[0] != NULL;
}

/* Result element (batch..., [i], [j]) = sum_k A[batch', i, k] * B[batch'',
 * k, j]; rank-1 operands drop their unit dim, transpose flags swap an
 * operand's last two dims, batch dims broadcast. */
FzValue *lgEmitMatmul(LgNest *N, FzOp *op, FzValue *const *idx) {
  MatmulCtx M;
  memset(&M, 0, sizeof M);
  M.a = fzOpGetOperand(op, 0);
  M.b = fzOpGetOperand(op, 1);
  FzValue *res = fzOpGetResult(op, 0);
  size_t ra = lgRank(M.a), rb = lgRank(M.b), rr = lgRank(res);
  bool ta = lgAttrBool(op, "transpose_a", false) && ra >= 2;
  bool tb = lgAttrBool(op, "transpose_b", false) && rb >= 2;
  if (ra == 0 || rb == 0)
    return lgFail(N, op, "rank-0 operands");
  /* Result dims: batch (rr - has_i - has_j), then i, then j. */
  bool hasI = ra >= 2, hasJ = rb >= 2;
  size_t nb = rr - hasI - hasJ;
  FzValue *i = hasI ? idx[nb] : NULL, *j = hasJ ? idx[nb + hasI] : NULL;
  int64_t K = lgDim(M.a, ta ? ra - 2 : ra - 1);
  /* A: batch dims aligned at the end of the result's batch dims. */
  if (ra >= 2) {
    size_t bA = ra - 2;
    for (size_t d = 0; d < bA; ++d) {
      size_t rd = d + nb - bA;
      M.ai[d] = lgDim(M.a, d) == 1 && lgDim(res, rd) != 1 ? fzBIndex(&N->b, 0)
                                                          : idx[rd];
    }
    M.ai[ta ? ra - 1 : ra - 2] = i;
    M.ak = ta ? ra - 2 : ra - 1;
  } else {
    M.ak = 0;
  }
  if (rb >= 2) {
    size_t bB = rb - 2;
    for (size_t d = 0; d < bB; ++d) {
      size_t rd = d + nb - bB;
      M.bi[d] = lgDim(M.b, d) == 1 && lgDim(res, rd) != 1 ? fzBIndex(&N->b, 0)
                                                          : idx[rd];
    }
    M.bi[tb ? rb - 2 : rb - 1] = j;
    M.bk = tb ? rb - 1 : rb - 2;
  } else {
    M.bk = 0;
  }
  FzValue *kept[LG_MAX_RANK * 2];
  size_t nk = 0;
  for (size_t d = 0; d < rr; ++d)
    kept[nk++] = idx[d];
  size_t parent = deepest(N, nk, kept, 0);
  FzType *ct = lgComputeType(N->F->ctx, lgElt(res));
  FzValue *init = identity(N, C_SUM, ct), *out;
  if (!reduce_loops(N, parent, 1, &K, 1, &init, matmul_step, &M, &out))
    return NULL;
  return out;
}

/*===--- conv2d and pooling -----------------------------------------------===*/

typedef struct Window {
  FzValue *x, *w;       /* input, weights (conv only) */
  FzValue *n, *c;       /* input batch and channel index (c: pooling) */
  FzValue *m;           /* conv: output channel */
  int64_t cg;           /* conv: input channels per group */
  FzValue *cIdx;        /* conv: first input channel of the group */
  FzValue *oh, *ow;
  int64_t s[2], pad[4], dil[2], H, W;
  bool checkH, checkW;  /* a window position may fall in the padding */
  int kind;             /* 0 conv, 1 max, 2 avg */
  bool nhwc;            /* x is [N, H, W, C]; a conv reduces (kh, kw, c) */
} Window;

/* Input row/col of window position k: o*s - pad + k*dil. */
static FzValue *win_pos(LgNest *N, FzValue *o, int64_t s, int64_t pad,
                        FzValue *k, int64_t dil) {
  return fzBAddFold(
      &N->b, fzBAddFold(&N->b, fzBMulFold(&N->b, o, s), fzBIndex(&N->b, -pad)),
      fzBMulFold(&N->b, k, dil));
}

static bool window_step(LgNest *N, FzValue *const *ivs, FzValue *const *acc,
                        FzValue **next, void *ud) {
  Window *W = ud;
  /* The reduction ivs: conv NCHW (c, kh, kw), conv NHWC (kh, kw, c),
   * pools (kh, kw). */
  bool cFirst = W->kind == 0 && !W->nhwc;
  FzValue *kh = cFirst ? ivs[1] : ivs[0];
  FzValue *kw = cFirst ? ivs[2] : ivs[1];
  FzValue *cg = W->kind != 0 ? NULL : cFirst ? ivs[0] : ivs[2];
  FzValue *ih = win_pos(N, W->oh, W->s[0], W->pad[0], kh, W->dil[0]);
  FzValue *iw = win_pos(N, W->ow, W->s[1], W->pad[1], kw, W->dil[1]);
  FzValue *inb = NULL;
  if (W->checkH) {
    inb = fzBCmp(&N->b, "ult", ih, fzBIndex(&N->b, W->H));
    ih = fzBBinary(&N->b, "loop.minsi",
                   fzBBinary(&N->b, "loop.maxsi", ih, fzBIndex(&N->b, 0)),
                   fzBIndex(&N->b, W->H - 1));
  }
  if (W->checkW) {
    FzValue *ok = fzBCmp(&N->b, "ult", iw, fzBIndex(&N->b, W->W));
    inb = inb ? fzBBinary(&N->b, "loop.andi", inb, ok) : ok;
    iw = fzBBinary(&N->b, "loop.minsi",
                   fzBBinary(&N->b, "loop.maxsi", iw, fzBIndex(&N->b, 0)),
                   fzBIndex(&N->b, W->W - 1));
  }
  FzValue *c = W->kind == 0 ? fzBAddFold(&N->b, W->cIdx, cg) : W->c;
  FzValue *xi[4] = {W->n, c, ih, iw};
  if (W->nhwc)
    xi[1] = ih, xi[2] = iw, xi[3] = c;
  FzValue *v = lgEmit(N, W->x, xi);
  if (!v)
    return false;
  FzType *t = fzValueGetType(v);
  if (W->kind == 0) {
    FzValue *wi[4] = {W->m, cg, kh, kw};
    FzValue *wv = lgEmit(N, W->w, wi);
    if (!wv)
      return false;
    /* Integer convolutions (i32: the quantized path) wrap as i32. */
    bool f = fzTypeIsFloat(t);
    FzValue *p = fzBBinary(&N->b, f ? "loop.mulf" : "loop.muli", v, wv);
    if (inb)
      p = fzBSelect(&N->b, inb, p,
                    f ? fzBConstFloat(&N->b, t, 0.0)
                      : fzBConstInt(&N->b, t, 0));
    next[0] = fzBBinary(&N->b, f ? "loop.addf" : "loop.addi", acc[0], p);
  } else if (W->kind == 1) {
    if (inb)
      v = fzBSelect(&N->b, inb, v, fzBConstFloat(&N->b, t, -HUGE_VAL));
    next[0] = fzBBinary(&N->b, "loop.maxf", acc[0], v);
  } else {
    FzValue *one = fzBConstFloat(&N->b, t, 1.0);
    if (inb) {
      v = fzBSelect(&N->b, inb, v, fzBConstFloat(&N->b, t, 0.0));
      one = fzBSelect(&N->b, inb, one, fzBConstFloat(&N->b, t, 0.0));
    }
    next[0] = fzBBinary(&N->b, "loop.addf", acc[0], v);
    next[1] = fzBBinary(&N->b, "loop.addf", acc[1], one);
  }
  return true;
}

/* Whether o*s - pad + k*dil can leave [0, size) for o in [0, outN) and k
 * in [0, kN). */
static bool may_leave(int64_t outN, int64_t s, int64_t pad, int64_t kN,
                      int64_t dil, int64_t size) {
  if (outN == 0 || kN == 0)
    return false;
  return -pad < 0 || (outN - 1) * s - pad + (kN - 1) * dil >= size;
}

static void window_attrs(FzOp *op, Window *W) {
  int64_t v[4];
  W->s[0] = W->s[1] = 1;
  W->dil[0] = W->dil[1] = 1;
  memset(W->pad, 0, sizeof W->pad);
  if (lgAttrInts(op, "strides", v, 2) == 2)
    W->s[0] = v[0], W->s[1] = v[1];
  if (lgAttrInts(op, "dilations", v, 2) == 2)
    W->dil[0] = v[0], W->dil[1] = v[1];
  if (lgAttrInts(op, "pads", v, 4) == 4)
    memcpy(W->pad, v, sizeof v);
}

/* The layout of a conv or pool into W: its input's spatial extents and
 * the output indices (n, channel, oh, ow) from the result's idx. */
static void window_layout(FzOp *op, Window *W, FzValue *const *idx) {
  W->nhwc = fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC;
  size_t hd = W->nhwc ? 1 : 2, cd = W->nhwc ? 3 : 1;
  W->H = lgDim(W->x, hd);
  W->W = lgDim(W->x, hd + 1);
  W->n = idx[0];
  W->c = idx[cd];
  W->oh = idx[hd];
  W->ow = idx[hd + 1];
}

FzValue *lgEmitConv2d(LgNest *N, FzOp *op, FzValue *const *idx) {
  Window W;
  memset(&W, 0, sizeof W);
  W.x = fzOpGetOperand(op, 0);
  W.w = fzOpGetOperand(op, 1);
  FzValue *res = fzOpGetResult(op, 0);
  if (lgRank(W.x) != 4 || lgRank(W.w) != 4)
    return lgFail(N, op, "expects 4-d input and weights");
  bool isInt = !fzTypeIsFloat(lgElt(res));
  if (isInt && (lgElt(res) != lgElt(W.x) || lgElt(res) != lgElt(W.w)))
    return lgFail(N, op, "an integer convolution needs operands of its "
                         "result's element type");
  window_attrs(op, &W);
  window_layout(op, &W, idx);
  int64_t groups = lgAttrInt(op, "groups", 1);
  int64_t M = lgDim(W.w, 0), kH = lgDim(W.w, 2), kW = lgDim(W.w, 3);
  W.cg = lgDim(W.w, 1);
  W.m = W.c;
  int64_t mPerGroup = groups > 0 ? M / groups : M;
  W.cIdx = fzBMulFold(&N->b, fzBDivFold(&N->b, W.m, mPerGroup), W.cg);
  size_t hd = W.nhwc ? 1 : 2;
  W.checkH = may_leave(lgDim(res, hd), W.s[0], W.pad[0], kH, W.dil[0], W.H);
  W.checkW = may_leave(lgDim(res, hd + 1), W.s[1], W.pad[1], kW, W.dil[1],
                       W.W);
  size_t parent = deepest(N, 4, idx, 0);
  FzType *ct = lgComputeType(N->F->ctx, lgElt(res));
  int64_t ext[3] = {W.cg, kH, kW};
  if (W.nhwc)
    ext[0] = kH, ext[1] = kW, ext[2] = W.cg;
  FzValue *init =
              isInt ? fzBConstInt(&N->b, ct, 0) : fzBConstFloat(&N->b, ct, 0.0),
          *out;
  if (!reduce_loops(N, parent, 3, ext, 1, &init, window_step, &W, &out))
    return NULL;
  if (fzOpGetNumOperands(op) > 2) {
    FzValue *bi = W.m;
    out = fzBBinary(&N->b, isInt ? "loop.addi" : "loop.addf", out,
                    lgEmit(N, fzOpGetOperand(op, 2), &bi));
  }
  return out;
}

FzValue *lgEmitPool(LgNest *N, FzOp *op, FzValue *const *idx) {
  Window W;
  memset(&W, 0, sizeof W);
  W.x = fzOpGetOperand(op, 0);
  FzValue *res = fzOpGetResult(op, 0);
  if (lgRank(W.x) != 4)
    return lgFail(N, op, "expects a 4-d input");
  if (!fzTypeIsFloat(lgElt(res)))
    return lgFail(N, op, "integer pooling is not supported");
  bool isMax = fzStringRefEqual(fzIdentGetString(fzOpGetName(op)),
                                FZ_STR("graph.max_pool"));
  W.kind = isMax ? 1 : 2;
  window_attrs(op, &W);
  int64_t k[2];
  if (lgAttrInts(op, "kernel", k, 2) != 2)
    return lgFail(N, op, "missing 'kernel'");
  window_layout(op, &W, idx);
  size_t hd = W.nhwc ? 1 : 2;
  W.checkH = may_leave(lgDim(res, hd), W.s[0], W.pad[0], k[0], W.dil[0], W.H);
  W.checkW = may_leave(lgDim(res, hd + 1), W.s[1], W.pad[1], k[1], W.dil[1],
                       W.W);
  bool countPad = !isMax && lgAttrBool(op, "count_include_pad", false);
  size_t parent = deepest(N, 4, idx, 0);
  FzType *ct = lgComputeType(N->F->ctx, lgElt(res));
  FzValue *inits[2] = {isMax ? fzBConstFloat(&N->b, ct, -HUGE_VAL)
                             : fzBConstFloat(&N->b, ct, 0.0),
                       fzBConstFloat(&N->b, ct, 0.0)};
  FzValue *out[2];
  if (!reduce_loops(N, parent, 2, k, isMax ? 1 : 2, inits, window_step, &W,
                    out))
    return NULL;
  if (isMax)
    return out[0];
  FzValue *count = out[1];
  if (countPad) {
    /* Positions inside the padded input: clip each window to
     * [-pad_begin, size + pad_end) and multiply the two extents. */
    FzValue *ext[2];
    for (int a = 0; a < 2; ++a) {
      FzValue *o = a ? W.ow : W.oh;
      int64_t size = a ? W.W : W.H;
      FzValue *cnt = fzBIndex(&N->b, 0);
      /* Positions never fall before -pad_begin; count those before
       * size + pad_end. */
      for (int64_t kk = 0; kk < k[a]; ++kk) {
        FzValue *pos =
            win_pos(N, o, W.s[a], W.pad[a], fzBIndex(&N->b, kk), W.dil[a]);
        FzValue *in =
            fzBCmp(&N->b, "slt", pos, fzBIndex(&N->b, size + W.pad[a + 2]));
        cnt = fzBAddFold(
            &N->b, cnt,
            fzBSelect(&N->b, in, fzBIndex(&N->b, 1), fzBIndex(&N->b, 0)));
      }
      ext[a] = cnt;
    }
    FzValue *prod = fzBBinary(&N->b, "loop.muli", ext[0], ext[1]);
    count = fzBCast(&N->b, "loop.sitofp",
                    fzBCast(&N->b, "loop.index_cast", prod,
                            fzIntegerTypeGet(N->F->ctx, 64)),
                    ct);
  }
  return fzBBinary(&N->b, "loop.divf", out[0], count);
}

FzValue *lgEmitGlobalPool(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *x = fzOpGetOperand(op, 0);
  size_t r = lgRank(x);
  if (r < 3)
    return lgFail(N, op, "expects rank >= 3");
  RowReduce R;
  memset(&R, 0, sizeof R);
  R.x = x;
  /* Reduced: the dims after (N, C), or between N and C (NHWC). */
  bool nhwc = fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC;
  size_t cd = nhwc ? r - 1 : 1;
  R.oidx[0] = idx[0];
  R.oidx[cd] = idx[cd];
  R.nred = 0;
  for (size_t d = 1; d < r; ++d)
    if (d != cd)
      R.red[R.nred++] = d;
  bool isMax = fzStringRefEqual(fzIdentGetString(fzOpGetName(op)),
                                FZ_STR("graph.global_max_pool"));
  R.c = isMax ? C_MAX : C_SUM;
  FzValue *v = row_reduce(N, &R, NULL);
  if (!v || isMax)
    return v;
  int64_t count = 1;
  for (size_t k = 0; k < R.nred; ++k)
    count *= lgDim(x, R.red[k]);
  return fzBBinary(&N->b, "loop.divf", v,
                   fzBConstFloat(&N->b, fzValueGetType(v), (double)count));
}

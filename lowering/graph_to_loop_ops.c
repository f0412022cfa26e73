/* lowering/graph_to_loop_ops.c - lower-graph-to-loop for elementwise and
 * data-movement graph ops: each emitter produces the scalar of its
 * result at an index vector from its operands' scalars (requested at the
 * indices they are read at), and the table that maps graph op names to
 * emitters.
 *
 * Semantics follow docs/dialects/graph.md. 16-bit floats are computed in
 * f32 (lgComputeType); a cast to f16/bf16 rounds explicitly, so a
 * consumer inside the group sees the rounded value. Composite ops are
 * decomposed here (sigmoid = 1/(1+e^-x), gelu, softplus computed without
 * overflow...), never through libm calls the code generators lack.
 */
#include <math.h>
#include <string.h>

#include "lowering/graph_to_loop_internal.h"

static FzValue *result_of(FzOp *op) {
  return fzOpGetResult(op, 0);
}

/* Operand k of op read at the index of the result's element idx, with
 * numpy broadcasting (trailing alignment, size-1 dims read at 0). */
static FzValue *operand_at(LgNest *N, FzOp *op, size_t k,
                           FzValue *const *idx) {
  FzValue *x = fzOpGetOperand(op, k), *r = result_of(op);
  size_t rx = lgRank(x), rr = lgRank(r);
  FzValue *oi[LG_MAX_RANK];
  for (size_t j = 0; j < rx; ++j) {
    size_t d = j + rr - rx;
    oi[j] = lgDim(x, j) == 1 && lgDim(r, d) != 1 ? fzBIndex(&N->b, 0) : idx[d];
  }
  return lgEmit(N, x, oi);
}

static bool is_float(FzValue *v) {
  return v && fzTypeIsFloat(fzValueGetType(v));
}

static FzValue *cf(LgNest *N, FzValue *like, double v) {
  return fzBConstFloat(&N->b, fzValueGetType(like), v);
}

static FzValue *ci(LgNest *N, FzValue *like, int64_t v) {
  return fzBConstInt(&N->b, fzValueGetType(like), v);
}

/* 1 / (1 + e^-x) */
static FzValue *sigmoid(LgNest *N, FzValue *x) {
  FzValue *e = fzBUnary(&N->b, "loop.exp", fzBUnary(&N->b, "loop.negf", x));
  return fzBBinary(&N->b, "loop.divf", cf(N, x, 1.0),
                   fzBBinary(&N->b, "loop.addf", cf(N, x, 1.0), e));
}

/* alpha * (e^x - 1) */
static FzValue *exp_minus_one(LgNest *N, FzValue *x, double alpha) {
  FzValue *e = fzBBinary(&N->b, "loop.subf", fzBUnary(&N->b, "loop.exp", x),
                         cf(N, x, 1.0));
  return alpha == 1.0 ? e : fzBBinary(&N->b, "loop.mulf", cf(N, x, alpha), e);
}

/*===--- Unary ops ------------------------------------------------------===*/

typedef FzValue *(*UnaryFn)(LgNest *N, FzOp *op, FzValue *x);

#define SIMPLE_UNARY(fn, loopname)                                             \
  static FzValue *fn(LgNest *N, FzOp *op, FzValue *x) {                        \
    (void)op;                                                                  \
    return fzBUnary(&N->b, loopname, x);                                       \
  }
SIMPLE_UNARY(u_exp, "loop.exp")
SIMPLE_UNARY(u_log, "loop.log")
SIMPLE_UNARY(u_sqrt, "loop.sqrt")
SIMPLE_UNARY(u_rsqrt, "loop.rsqrt")
SIMPLE_UNARY(u_tanh, "loop.tanh")
SIMPLE_UNARY(u_erf, "loop.erf")
SIMPLE_UNARY(u_floor, "loop.floor")
SIMPLE_UNARY(u_ceil, "loop.ceil")
SIMPLE_UNARY(u_round, "loop.roundeven")
SIMPLE_UNARY(u_sin, "loop.sin")
SIMPLE_UNARY(u_cos, "loop.cos")

static FzValue *u_neg(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  if (is_float(x))
    return fzBUnary(&N->b, "loop.negf", x);
  return fzBBinary(&N->b, "loop.subi", ci(N, x, 0), x);
}

static FzValue *u_abs(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  if (is_float(x))
    return fzBUnary(&N->b, "loop.absf", x);
  FzValue *zero = ci(N, x, 0);
  return fzBSelect(&N->b, fzBCmp(&N->b, "slt", x, zero),
                   fzBBinary(&N->b, "loop.subi", zero, x), x);
}

static FzValue *u_reciprocal(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  return fzBBinary(&N->b, "loop.divf", cf(N, x, 1.0), x);
}

static FzValue *u_sigmoid(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  return sigmoid(N, x);
}

static FzValue *u_relu(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  if (is_float(x))
    return fzBBinary(&N->b, "loop.maxf", x, cf(N, x, 0.0));
  if (fzTypeGetBitWidth(fzValueGetType(x)) == 1)
    return x;
  return fzBBinary(&N->b, "loop.maxsi", x, ci(N, x, 0));
}

static FzValue *u_gelu(LgNest *N, FzOp *op, FzValue *x) {
  FzValue *half = fzBBinary(&N->b, "loop.mulf", cf(N, x, 0.5), x);
  FzValue *inner;
  if (lgAttrStringIs(op, "approximate", "tanh")) {
    FzValue *x3 =
        fzBBinary(&N->b, "loop.mulf", x, fzBBinary(&N->b, "loop.mulf", x, x));
    FzValue *poly = fzBFma(&N->b, cf(N, x, 0.044715), x3, x);
    inner = fzBUnary(
        &N->b, "loop.tanh",
        fzBBinary(&N->b, "loop.mulf", cf(N, x, 0.7978845608028654), poly));
  } else {
    inner = fzBUnary(
        &N->b, "loop.erf",
        fzBBinary(&N->b, "loop.mulf", x, cf(N, x, 0.7071067811865476)));
  }
  return fzBBinary(&N->b, "loop.mulf", half,
                   fzBBinary(&N->b, "loop.addf", cf(N, x, 1.0), inner));
}

static FzValue *u_silu(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  FzValue *e = fzBUnary(&N->b, "loop.exp", fzBUnary(&N->b, "loop.negf", x));
  return fzBBinary(&N->b, "loop.divf", x,
                   fzBBinary(&N->b, "loop.addf", cf(N, x, 1.0), e));
}

/* -1, 0, 1; zeros and NaN pass through. */
static FzValue *u_sign(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  bool f = is_float(x);
  if (!f && fzTypeGetBitWidth(fzValueGetType(x)) == 1)
    return x;
  FzValue *zero = f ? cf(N, x, 0.0) : ci(N, x, 0);
  FzValue *one = f ? cf(N, x, 1.0) : ci(N, x, 1);
  FzValue *mone = f ? cf(N, x, -1.0) : ci(N, x, -1);
  FzValue *neg = fzBSelect(&N->b, fzBCmp(&N->b, f ? "olt" : "slt", x, zero),
                           mone, f ? x : zero);
  return fzBSelect(&N->b, fzBCmp(&N->b, f ? "ogt" : "sgt", x, zero), one, neg);
}

/* max(x, 0) + log1p(e^-|x|): no overflow for large |x|. */
static FzValue *u_softplus(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  FzValue *e =
      fzBUnary(&N->b, "loop.exp",
               fzBUnary(&N->b, "loop.negf", fzBUnary(&N->b, "loop.absf", x)));
  return fzBBinary(&N->b, "loop.addf",
                   fzBBinary(&N->b, "loop.maxf", x, cf(N, x, 0.0)),
                   fzBUnary(&N->b, "loop.log1p", e));
}

static FzValue *u_leaky_relu(LgNest *N, FzOp *op, FzValue *x) {
  double alpha = lgAttrFloat(op, "alpha", 0.01);
  return fzBSelect(&N->b, fzBCmp(&N->b, "oge", x, cf(N, x, 0.0)), x,
                   fzBBinary(&N->b, "loop.mulf", cf(N, x, alpha), x));
}

static FzValue *u_elu(LgNest *N, FzOp *op, FzValue *x) {
  double alpha = lgAttrFloat(op, "alpha", 1.0);
  return fzBSelect(&N->b, fzBCmp(&N->b, "ogt", x, cf(N, x, 0.0)), x,
                   exp_minus_one(N, x, alpha));
}

static FzValue *u_selu(LgNest *N, FzOp *op, FzValue *x) {
  double alpha = lgAttrFloat(op, "alpha", 1.6732632423543772);
  double gamma = lgAttrFloat(op, "gamma", 1.0507009873554805);
  FzValue *v = fzBSelect(&N->b, fzBCmp(&N->b, "ogt", x, cf(N, x, 0.0)), x,
                         exp_minus_one(N, x, alpha));
  return fzBBinary(&N->b, "loop.mulf", cf(N, x, gamma), v);
}

static FzValue *u_hard_sigmoid(LgNest *N, FzOp *op, FzValue *x) {
  double alpha = lgAttrFloat(op, "alpha", 0.2), beta = lgAttrFloat(op, "beta",
                                                                   0.5);
  FzValue *y = fzBFma(&N->b, cf(N, x, alpha), x, cf(N, x, beta));
  return fzBBinary(&N->b, "loop.minf",
                   fzBBinary(&N->b, "loop.maxf", y, cf(N, x, 0.0)),
                   cf(N, x, 1.0));
}

static FzValue *u_clamp(LgNest *N, FzOp *op, FzValue *x) {
  double lo = lgAttrFloat(op, "min", -HUGE_VAL);
  double hi = lgAttrFloat(op, "max", HUGE_VAL);
  if (is_float(x)) {
    FzValue *y = isinf(lo) && lo < 0
                     ? x
                     : fzBBinary(&N->b, "loop.maxf", x, cf(N, x, lo));
    return isinf(hi) && hi > 0 ? y
                               : fzBBinary(&N->b, "loop.minf", y, cf(N, x, hi));
  }
  unsigned w = fzTypeGetBitWidth(fzValueGetType(x));
  double tmax = w >= 64 ? 9.2e18 : ldexp(1.0, (int)w - 1) - 1;
  FzValue *y = x;
  if (lo > -tmax - 1)
    y = fzBBinary(&N->b, "loop.maxsi", y, ci(N, x, (int64_t)ceil(lo)));
  if (hi < tmax)
    y = fzBBinary(&N->b, "loop.minsi", y, ci(N, x, (int64_t)floor(hi)));
  return y;
}

static FzValue *u_not(LgNest *N, FzOp *op, FzValue *x) {
  (void)op;
  return fzBBinary(&N->b, "loop.xori", x, ci(N, x, 1));
}

static const struct {
  const char *name;
  UnaryFn fn;
} kUnary[] = {
    {"graph.neg", u_neg},         {"graph.abs", u_abs},
    {"graph.exp", u_exp},         {"graph.log", u_log},
    {"graph.sqrt", u_sqrt},       {"graph.rsqrt", u_rsqrt},
    {"graph.reciprocal", u_reciprocal},
    {"graph.tanh", u_tanh},       {"graph.sigmoid", u_sigmoid},
    {"graph.relu", u_relu},       {"graph.gelu", u_gelu},
    {"graph.silu", u_silu},       {"graph.erf", u_erf},
    {"graph.floor", u_floor},     {"graph.ceil", u_ceil},
    {"graph.round", u_round},     {"graph.sign", u_sign},
    {"graph.sin", u_sin},         {"graph.cos", u_cos},
    {"graph.softplus", u_softplus},
    {"graph.leaky_relu", u_leaky_relu},
    {"graph.elu", u_elu},         {"graph.selu", u_selu},
    {"graph.hard_sigmoid", u_hard_sigmoid},
    {"graph.clamp", u_clamp},     {"graph.not", u_not},
};

static UnaryFn find_unary(FzStringRef name) {
  for (size_t i = 0; i < sizeof kUnary / sizeof kUnary[0]; ++i)
    if (fzStringRefEqual(name, fzStringRefFromCString(kUnary[i].name)))
      return kUnary[i].fn;
  return NULL;
}

static FzValue *emit_unary(LgNest *N, FzOp *op, FzValue *const *idx) {
  UnaryFn fn = find_unary(fzIdentGetString(fzOpGetName(op)));
  FzValue *x = operand_at(N, op, 0, idx);
  return x ? fn(N, op, x) : NULL;
}

/*===--- Binary ops -----------------------------------------------------===*/

static const struct {
  const char *name, *f, *i;
} kBinary[] = {
    {"graph.add", "loop.addf", "loop.addi"},
    {"graph.sub", "loop.subf", "loop.subi"},
    {"graph.mul", "loop.mulf", "loop.muli"},
    {"graph.div", "loop.divf", "loop.divsi"},
    {"graph.rem", "loop.remf", "loop.remsi"},
    {"graph.pow", "loop.powf", NULL},
    {"graph.max", "loop.maxf", "loop.maxsi"},
    {"graph.min", "loop.minf", "loop.minsi"},
    {"graph.and", NULL, "loop.andi"},
    {"graph.or", NULL, "loop.ori"},
    {"graph.xor", NULL, "loop.xori"},
};

static int find_binary(FzStringRef name) {
  for (size_t i = 0; i < sizeof kBinary / sizeof kBinary[0]; ++i)
    if (fzStringRefEqual(name, fzStringRefFromCString(kBinary[i].name)))
      return (int)i;
  return -1;
}

/* Integer a^b by squaring, exactly as the interpreter (wrapping): a loop
 * over the exponent's bits; a negative exponent gives 0 unless a is 1 or
 * -1. */
static FzValue *int_pow(LgNest *N, FzValue *a, FzValue *b) {
  unsigned w = fzTypeGetBitWidth(fzValueGetType(a));
  size_t parent = lgLevelOf(N, a) > lgLevelOf(N, b) ? lgLevelOf(N, a)
                                                     : lgLevelOf(N, b);
  FzValue *inits[3] = {ci(N, a, 1), a, b}, *iv, *it[3];
  LgSaved saved;
  if (!lgOpenFor(N, parent, w, 3, inits, &iv, it, &saved))
    return NULL;
  FzValue *one = ci(N, a, 1);
  FzValue *odd = fzBCmp(&N->b, "ne", fzBBinary(&N->b, "loop.andi", it[2], one),
                        ci(N, a, 0));
  FzValue *next[3];
  next[0] =
      fzBSelect(&N->b, odd, fzBBinary(&N->b, "loop.muli", it[0], it[1]), it[0]);
  next[1] = fzBBinary(&N->b, "loop.muli", it[1], it[1]);
  next[2] = fzBBinary(&N->b, "loop.shrsi", it[2], one);
  FzOp *loop = lgClose(N, 3, next, &saved);
  FzValue *r = fzOpGetResult(loop, 0);
  FzValue *zero = ci(N, a, 0), *mone = ci(N, a, -1);
  FzValue *bodd =
      fzBCmp(&N->b, "ne", fzBBinary(&N->b, "loop.andi", b, one), zero);
  FzValue *negRes =
      fzBSelect(&N->b, fzBCmp(&N->b, "eq", a, one), one,
                fzBSelect(&N->b, fzBCmp(&N->b, "eq", a, mone),
                          fzBSelect(&N->b, bodd, mone, one), zero));
  return fzBSelect(&N->b, fzBCmp(&N->b, "slt", b, zero), negRes, r);
}

static FzValue *emit_binary(LgNest *N, FzOp *op, FzValue *const *idx) {
  int k = find_binary(fzIdentGetString(fzOpGetName(op)));
  FzValue *a = operand_at(N, op, 0, idx), *b = operand_at(N, op, 1, idx);
  if (!a || !b)
    return NULL;
  bool f = is_float(a);
  unsigned w = fzTypeGetBitWidth(fzValueGetType(a));
  if (!f && w > 1 && !strcmp(kBinary[k].name, "graph.pow"))
    return int_pow(N, a, b);
  const char *name = f ? kBinary[k].f : kBinary[k].i;
  if (!name)
    return lgFail(N, op, "%s operands are not supported",
                  f ? "float" : "integer");
  if (!f && w == 1) {
    /* i1 arithmetic as the interpreter does it: on 0/1 values. */
    if (!strcmp(name, "loop.maxsi"))
      name = "loop.ori";
    else if (!strcmp(name, "loop.minsi") || !strcmp(name, "loop.muli"))
      name = "loop.andi";
    else if (!strcmp(name, "loop.addi") || !strcmp(name, "loop.subi"))
      name = "loop.xori";
  }
  return fzBBinary(&N->b, name, a, b);
}

/*===--- Other elementwise ops ------------------------------------------===*/

static bool is_16bit_float(FzType *t) {
  FzTypeKind k = fzTypeGetKind(t);
  return k == FZ_TYPE_F16 || k == FZ_TYPE_BF16;
}

/* Converts x (compute type of `from`) to the compute type of `to`. */
static FzValue *convert(LgNest *N, FzOp *op, FzValue *x, FzType *from,
                        FzType *to) {
  FzContext *ctx = N->F->ctx;
  FzType *cx = fzValueGetType(x), *ct = lgComputeType(ctx, to);
  bool ff = fzTypeIsFloat(from), tf = fzTypeIsFloat(to);
  unsigned wt = fzTypeGetBitWidth(to), wx = fzTypeGetBitWidth(cx);
  if (!tf && wt == 1)
    return ff ? fzBCmp(&N->b, "une", x, cf(N, x, 0.0))
              : fzBCmp(&N->b, "ne", x, ci(N, x, 0));
  if (ff && tf) {
    if (is_16bit_float(to)) /* round once, straight to the 16-bit type */
      return to == from ? x
                        : fzBCast(&N->b, "loop.extf",
                                  fzBCast(&N->b, "loop.truncf", x, to), ct);
    if (wt > wx)
      return fzBCast(&N->b, "loop.extf", x, ct);
    if (wt < wx)
      return fzBCast(&N->b, "loop.truncf", x, ct);
    return x;
  }
  if (ff)
    return fzBCast(&N->b, "loop.fptosi", x, ct);
  if (tf) {
    const char *name =
        fzTypeGetBitWidth(from) == 1 ? "loop.uitofp" : "loop.sitofp";
    FzValue *y = fzBCast(&N->b, name, x, is_16bit_float(to) ? to : ct);
    return is_16bit_float(to) ? fzBCast(&N->b, "loop.extf", y, ct) : y;
  }
  unsigned wf = fzTypeGetBitWidth(from);
  if (wf == wt)
    return x;
  if (wf == 1)
    return fzBCast(&N->b, "loop.extui", x, ct);
  (void)op;
  return fzBCast(&N->b, wt > wf ? "loop.extsi" : "loop.trunci", x, ct);
}

static FzValue *emit_cast(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *x = operand_at(N, op, 0, idx);
  return x ? convert(N, op, x, lgElt(fzOpGetOperand(op, 0)),
                     lgElt(result_of(op)))
           : NULL;
}

static FzValue *emit_compare(LgNest *N, FzOp *op, FzValue *const *idx) {
  static const char *const names[][3] = {
      {"eq", "oeq", "eq"}, {"ne", "une", "ne"},  {"lt", "olt", "slt"},
      {"le", "ole", "sle"}, {"gt", "ogt", "sgt"}, {"ge", "oge", "sge"}};
  FzValue *a = operand_at(N, op, 0, idx), *b = operand_at(N, op, 1, idx);
  if (!a || !b)
    return NULL;
  FzAttr *p = fzOpGetInherentAttr(op, FZ_STR("predicate"));
  for (size_t i = 0; p && i < 6; ++i)
    if (fzStringRefEqual(fzStringAttrGetValue(p),
                         fzStringRefFromCString(names[i][0])))
      return fzBCmp(&N->b, names[i][is_float(a) ? 1 : 2], a, b);
  return lgFail(N, op, "unknown predicate");
}

static FzValue *emit_select(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *c = operand_at(N, op, 0, idx), *a = operand_at(N, op, 1, idx),
          *b = operand_at(N, op, 2, idx);
  return c && a && b ? fzBSelect(&N->b, c, a, b) : NULL;
}

static FzValue *emit_prelu(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *x = operand_at(N, op, 0, idx), *s = operand_at(N, op, 1, idx);
  if (!x || !s)
    return NULL;
  return fzBSelect(&N->b, fzBCmp(&N->b, "oge", x, cf(N, x, 0.0)), x,
                   fzBBinary(&N->b, "loop.mulf", s, x));
}

/* sum of coeffs[k] * operand k, in operand order: a coefficient of 1
 * adds the operand and -1 subtracts it (no multiply). */
static FzValue *emit_weighted_sum(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzAttr *c = fzOpGetInherentAttr(op, FZ_STR("coeffs"));
  size_t n = fzOpGetNumOperands(op);
  if (!c || fzAttrGetKind(c) != FZ_ATTR_DENSE_ARRAY ||
      fzDenseArrayAttrGetSize(c) != n || n == 0)
    return lgFail(N, op, "malformed 'coeffs' attribute");
  FzValue *acc = NULL;
  for (size_t k = 0; k < n; ++k) {
    FzValue *x = operand_at(N, op, k, idx);
    if (!x)
      return NULL;
    double ck = fzDenseArrayAttrGetFloat(c, k);
    if (acc && ck == -1.0) {
      acc = fzBBinary(&N->b, "loop.subf", acc, x);
      continue;
    }
    FzValue *t = ck == 1.0 ? x : fzBBinary(&N->b, "loop.mulf", cf(N, x, ck), x);
    acc = acc ? fzBBinary(&N->b, "loop.addf", acc, t) : t;
  }
  return acc;
}

/* (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c], c = dim 1. */
static FzValue *emit_batch_norm(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *x = operand_at(N, op, 0, idx);
  FzValue *c = idx[1], *p[4];
  for (size_t k = 0; k < 4; ++k)
    p[k] = lgEmit(N, fzOpGetOperand(op, 1 + k), &c);
  if (!x || !p[0] || !p[1] || !p[2] || !p[3])
    return NULL;
  double eps = lgAttrFloat(op, "epsilon", 1e-5);
  FzValue *den = fzBUnary(&N->b, "loop.sqrt",
                          fzBBinary(&N->b, "loop.addf", p[3], cf(N, x, eps)));
  FzValue *scale = fzBBinary(&N->b, "loop.divf", p[0], den);
  FzValue *centered = fzBBinary(&N->b, "loop.subf", x, p[2]);
  return fzBFma(&N->b, centered, scale, p[1]);
}

/*===--- Data movement --------------------------------------------------===*/

static FzValue *emit_broadcast(LgNest *N, FzOp *op, FzValue *const *idx) {
  return operand_at(N, op, 0, idx);
}

/* Dims [i0, i1) of x from the result's [j0, j1) of a reshape whose
 * groups have equal sizes: the result's indices linearized, then cut
 * into x's (no division when the group is one dim of x). */
static void reshape_group(LgNest *N, FzValue *x, FzValue *r,
                          FzValue *const *idx, FzValue **oi, size_t i0,
                          size_t i1, size_t j0, size_t j1) {
  FzValue *lin = idx[j0];
  for (size_t d = j0 + 1; d < j1; ++d)
    lin = fzBAddFold(&N->b, fzBMulFold(&N->b, lin, lgDim(r, d)), idx[d]);
  size_t first = i1; /* x's first dim of the group other than 1 */
  for (size_t j = i0; j < i1 && first == i1; ++j)
    if (lgDim(x, j) != 1)
      first = j;
  for (size_t j = i1; j-- > i0;) {
    int64_t dim = lgDim(x, j);
    if (j < first || (dim == 1 && j != first)) {
      oi[j] = fzBIndex(&N->b, 0);
    } else if (j == first) {
      oi[j] = lin;
    } else {
      oi[j] = fzBRemFold(&N->b, lin, dim);
      lin = fzBDivFold(&N->b, lin, dim);
    }
  }
}

/* A reshape as an index map, group by group: the shapes are cut where
 * their running products meet (the coarsest common grouping), so a dim
 * that is split or merged costs a division only inside its group and a
 * merge of `from`'s dims into one dim of `to` is affine (ViT's [B*H, S,
 * D] read as [B, H, S, D]). */
void lgReshapeIndex(LgNest *N, FzValue *to, FzValue *from, FzValue *const *idx,
                    FzValue **oi) {
  FzValue *x = to, *r = from;
  size_t rx = lgRank(x), rr = lgRank(r), i = 0, j = 0;
  bool empty = false;
  for (size_t d = 0; d < rx; ++d)
    empty = empty || lgDim(x, d) == 0;
  for (size_t d = 0; d < rr; ++d)
    empty = empty || lgDim(r, d) == 0;
  if (rr == 0 || empty) {
    /* One group: every index of x from the whole linearized result. */
    for (size_t d = 0; d < rx; ++d)
      oi[d] = fzBIndex(&N->b, 0);
    if (rr > 0 && rx > 0)
      reshape_group(N, x, r, idx, oi, 0, rx, 0, rr);
    return;
  }
  while (i < rx && j < rr) {
    size_t i0 = i, j0 = j;
    int64_t px = lgDim(x, i++), pr = lgDim(r, j++);
    while (px != pr && (px < pr ? i < rx : j < rr)) {
      if (px < pr)
        px *= lgDim(x, i++);
      else
        pr *= lgDim(r, j++);
    }
    if (px != pr) {
      /* Unequal element counts cannot verify; stay total anyway. */
      i = rx;
      j = rr;
    }
    /* Trailing unit dims of x join the group that ends here when the
     * result has nothing left. */
    if (j == rr)
      i = rx;
    reshape_group(N, x, r, idx, oi, i0, i, j0, j);
  }
  for (; i < rx; ++i)
    oi[i] = fzBIndex(&N->b, 0);
}

static FzValue *emit_reshape(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *x = fzOpGetOperand(op, 0), *oi[LG_MAX_RANK];
  lgReshapeIndex(N, x, result_of(op), idx, oi);
  return lgEmit(N, x, oi);
}

static FzValue *emit_transpose(LgNest *N, FzOp *op, FzValue *const *idx) {
  int64_t perm[LG_MAX_RANK];
  FzValue *x = fzOpGetOperand(op, 0), *oi[LG_MAX_RANK];
  int n = lgAttrInts(op, "perm", perm, LG_MAX_RANK);
  if (n != (int)lgRank(x))
    return lgFail(N, op, "bad 'perm'");
  for (int i = 0; i < n; ++i)
    oi[perm[i]] = idx[i];
  return lgEmit(N, x, oi);
}

static FzValue *emit_slice(LgNest *N, FzOp *op, FzValue *const *idx) {
  int64_t starts[LG_MAX_RANK], strides[LG_MAX_RANK];
  FzValue *x = fzOpGetOperand(op, 0), *oi[LG_MAX_RANK];
  size_t r = lgRank(x);
  int ns = lgAttrInts(op, "starts", starts, LG_MAX_RANK);
  int nt = lgAttrInts(op, "strides", strides, LG_MAX_RANK);
  if (ns != (int)r)
    return lgFail(N, op, "bad 'starts'");
  for (size_t d = 0; d < r; ++d) {
    int64_t st = nt == (int)r ? strides[d] : 1;
    oi[d] = fzBAddFold(&N->b, fzBIndex(&N->b, starts[d]),
                       fzBMulFold(&N->b, idx[d], st));
  }
  return lgEmit(N, x, oi);
}

/* Clamps an index into [0, n). */
static FzValue *clamp_index(LgNest *N, FzValue *i, int64_t n) {
  int64_t c;
  if (fzLoopValueGetConstantInt(i, &c))
    return fzBIndex(&N->b, c < 0 ? 0 : (c >= n ? n - 1 : c));
  FzValue *lo = fzBBinary(&N->b, "loop.maxsi", i, fzBIndex(&N->b, 0));
  return fzBBinary(&N->b, "loop.minsi", lo, fzBIndex(&N->b, n - 1));
}

/* Each piece read at a clamped index; a select chain picks the one the
 * index falls in (every load stays in bounds). */
static FzValue *emit_concat(LgNest *N, FzOp *op, FzValue *const *idx) {
  size_t n = fzOpGetNumOperands(op), r = lgRank(result_of(op));
  int64_t axis = lgAttrInt(op, "axis", 0);
  if (axis < 0)
    axis += (int64_t)r;
  FzValue *oi[LG_MAX_RANK], *result = NULL;
  int64_t off[64];
  if (n > 64 || axis < 0 || axis >= (int64_t)r)
    return lgFail(N, op, "bad 'axis' or too many operands");
  off[0] = 0;
  for (size_t k = 1; k < n; ++k)
    off[k] = off[k - 1] + lgDim(fzOpGetOperand(op, k - 1), (size_t)axis);
  memcpy(oi, idx, r * sizeof *oi);
  for (size_t k = n; k-- > 0;) {
    FzValue *x = fzOpGetOperand(op, k);
    int64_t size = lgDim(x, (size_t)axis);
    if (size == 0)
      continue;
    oi[axis] = clamp_index(
        N, fzBAddFold(&N->b, idx[axis], fzBIndex(&N->b, -off[k])), size);
    FzValue *v = lgEmit(N, x, oi);
    if (!result) {
      result = v;
      continue;
    }
    FzValue *in =
        fzBCmp(&N->b, "slt", idx[axis], fzBIndex(&N->b, off[k] + size));
    result = fzBSelect(&N->b, in, v, result);
  }
  return result ? result : lgFail(N, op, "every operand is empty");
}

static FzValue *emit_pad(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *x = fzOpGetOperand(op, 0), *oi[LG_MAX_RANK], *inb = NULL;
  size_t r = lgRank(x);
  int64_t pads[2 * LG_MAX_RANK];
  int np = lgAttrInts(op, "pads", pads, 2 * LG_MAX_RANK);
  if (np != 2 * (int)r)
    return lgFail(N, op, "bad 'pads'");
  for (size_t d = 0; d < r; ++d) {
    FzValue *j = fzBAddFold(&N->b, idx[d], fzBIndex(&N->b, -pads[d]));
    int64_t dim = lgDim(x, d);
    if (pads[d] > 0 || pads[r + d] > 0) {
      FzValue *ok = fzBCmp(&N->b, "ult", j, fzBIndex(&N->b, dim));
      inb = inb ? fzBBinary(&N->b, "loop.andi", inb, ok) : ok;
      j = clamp_index(N, j, dim);
    }
    oi[d] = j;
  }
  FzValue *v = lgEmit(N, x, oi);
  if (!inb || !v)
    return v;
  double pv = lgAttrFloat(op, "value", 0.0);
  FzValue *fill = is_float(v) ? cf(N, v, pv) : ci(N, v, (int64_t)pv);
  return fzBSelect(&N->b, inb, v, fill);
}

static FzValue *emit_gather(LgNest *N, FzOp *op, FzValue *const *idx) {
  FzValue *data = fzOpGetOperand(op, 0), *ind = fzOpGetOperand(op, 1);
  size_t rd = lgRank(data), ri = lgRank(ind);
  int64_t axis = lgAttrInt(op, "axis", 0);
  if (axis < 0)
    axis += (int64_t)rd;
  if (axis < 0 || axis >= (int64_t)rd)
    return lgFail(N, op, "bad 'axis'");
  FzValue *g = lgEmit(N, ind, idx + axis);
  if (!g)
    return NULL;
  int64_t dim = lgDim(data, (size_t)axis), c;
  FzType *it = fzIndexTypeGet(N->F->ctx);
  FzValue *gi;
  if (fzTypeGetBitWidth(fzValueGetType(g)) > 1 &&
      fzLoopValueGetConstantInt(g, &c) && c >= -dim && c < dim) {
    /* A constant index in range (PyTorch 2's q/k/v split of a packed
     * projection: gather 0, 1, 2): a constant, so that the load's
     * indices stay affine (the flash-attention kernel's operands). */
    gi = fzBIndex(&N->b, c < 0 ? c + dim : c);
  } else {
    if (fzTypeGetBitWidth(fzValueGetType(g)) == 1)
      g = fzBCast(&N->b, "loop.extui", g, fzIntegerTypeGet(N->F->ctx, 8));
    gi = fzBCast(&N->b, "loop.index_cast", g, it);
    FzValue *wrapped = fzBAddFold(&N->b, gi, fzBIndex(&N->b, dim));
    gi = fzBSelect(&N->b, fzBCmp(&N->b, "slt", gi, fzBIndex(&N->b, 0)),
                   wrapped, gi);
  }
  FzValue *oi[LG_MAX_RANK];
  for (size_t d = 0; d < (size_t)axis; ++d)
    oi[d] = idx[d];
  /* Not clamped: an index outside [-dim, dim) is an error (ONNX), and
   * the load then reports it (the interpreters at run time, native code
   * through its bounds check: docs/codegen.md, "Run-time errors"). */
  oi[axis] = gi;
  for (size_t d = (size_t)axis + 1; d < rd; ++d)
    oi[d] = idx[d + ri - 1];
  return lgEmit(N, data, oi);
}

/*===--- Quantization (docs/quantization.md) ----------------------------===*/

/* Operand k at idx widened to i32 (zero-extended when u). */
static FzValue *operand_i32(LgNest *N, FzOp *op, size_t k, FzValue *const *idx,
                            bool u) {
  FzValue *v = operand_at(N, op, k, idx);
  FzType *i32 = fzIntegerTypeGet(N->F->ctx, 32);
  if (!v || fzTypeGetBitWidth(fzValueGetType(v)) == 32)
    return v;
  return fzBCast(&N->b, u ? "loop.extui" : "loop.extsi", v, i32);
}

/* sat(roundeven(x / s) + z): the sum in f32 (exact below 2^24, saturated
 * above), fptosi saturating with NaN to 0, then clamped to the 8-bit
 * range and truncated. */
static FzValue *emit_quantize(LgNest *N, FzOp *op, FzValue *const *idx) {
  bool u = lgAttrBool(op, "unsigned", false);
  FzValue *x = operand_at(N, op, 0, idx), *s = operand_at(N, op, 1, idx);
  FzValue *z = operand_i32(N, op, 2, idx, u);
  if (!x || !s || !z)
    return NULL;
  FzType *i32 = fzIntegerTypeGet(N->F->ctx, 32);
  FzValue *r =
      fzBUnary(&N->b, "loop.roundeven", fzBBinary(&N->b, "loop.divf", x, s));
  FzValue *t = fzBBinary(&N->b, "loop.addf", r,
                         fzBCast(&N->b, "loop.sitofp", z, fzValueGetType(x)));
  FzValue *q = fzBCast(&N->b, "loop.fptosi", t, i32);
  q = fzBBinary(&N->b, "loop.maxsi", q, fzBConstInt(&N->b, i32, u ? 0 : -128));
  q = fzBBinary(&N->b, "loop.minsi", q, fzBConstInt(&N->b, i32, u ? 255 : 127));
  return fzBCast(&N->b, "loop.trunci", q, fzIntegerTypeGet(N->F->ctx, 8));
}

static FzValue *emit_dequantize(LgNest *N, FzOp *op, FzValue *const *idx) {
  bool u = lgAttrBool(op, "unsigned", false);
  FzValue *x = operand_i32(N, op, 0, idx, u), *s = operand_at(N, op, 1, idx);
  FzValue *z = operand_i32(N, op, 2, idx, u);
  if (!x || !s || !z)
    return NULL;
  FzValue *d = fzBCast(&N->b, "loop.sitofp",
                       fzBBinary(&N->b, "loop.subi", x, z), fzValueGetType(s));
  return fzBBinary(&N->b, "loop.mulf", d, s);
}

static FzValue *emit_sub_zero_point(LgNest *N, FzOp *op, FzValue *const *idx) {
  bool u = lgAttrBool(op, "unsigned", false);
  FzValue *x = operand_i32(N, op, 0, idx, u), *z = operand_i32(N, op, 1, idx, u);
  return x && z ? fzBBinary(&N->b, "loop.subi", x, z) : NULL;
}

/*===--- The table ------------------------------------------------------===*/

static const struct {
  const char *name;
  LgEmitFn fn;
} kOther[] = {
    {"graph.cast", emit_cast},
    {"graph.compare", emit_compare},
    {"graph.select", emit_select},
    {"graph.prelu", emit_prelu},
    {"graph.weighted_sum", emit_weighted_sum},
    {"graph.batch_norm", emit_batch_norm},
    {"graph.broadcast", emit_broadcast},
    {"graph.reshape", emit_reshape},
    {"graph.transpose", emit_transpose},
    {"graph.slice", emit_slice},
    {"graph.concat", emit_concat},
    {"graph.pad", emit_pad},
    {"graph.gather", emit_gather},
    {"graph.reduce_sum", lgEmitReduce},
    {"graph.reduce_mean", lgEmitReduce},
    {"graph.reduce_max", lgEmitReduce},
    {"graph.reduce_min", lgEmitReduce},
    {"graph.reduce_prod", lgEmitReduce},
    {"graph.softmax", lgEmitSoftmax},
    {"graph.log_softmax", lgEmitSoftmax},
    {"graph.layer_norm", lgEmitLayerNorm},
    {"graph.rms_norm", lgEmitRmsNorm},
    {"graph.matmul", lgEmitMatmul},
    {"graph.conv2d", lgEmitConv2d},
    {"graph.max_pool", lgEmitPool},
    {"graph.avg_pool", lgEmitPool},
    {"graph.global_avg_pool", lgEmitGlobalPool},
    {"graph.global_max_pool", lgEmitGlobalPool},
    {"graph.scatter_nd", lgEmitScatterNd},
    {"graph.quantize", emit_quantize},
    {"graph.dequantize", emit_dequantize},
    {"graph.sub_zero_point", emit_sub_zero_point},
};

LgEmitFn lgFindEmitter(const FzOp *op) {
  FzStringRef name = fzIdentGetString(fzOpGetName(op));
  if (find_unary(name))
    return emit_unary;
  if (find_binary(name) >= 0)
    return emit_binary;
  for (size_t i = 0; i < sizeof kOther / sizeof kOther[0]; ++i)
    if (fzStringRefEqual(name, fzStringRefFromCString(kOther[i].name)))
      return kOther[i].fn;
  return NULL;
}

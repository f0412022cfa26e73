/* transforms/graph/simplify_algebra.c - the simplify-algebra pass.
 *
 * Exact rewrites (always on; negated-operand and times-minus-one also
 * run in canonicalize, whose folds already remove same-type identities):
 *   identity          x * 1, 1 * x, x / 1, x + 0, 0 + x, x - 0 -> x, or
 *                     broadcast(x) when the constant widens the result
 *   double-negation   neg(neg(x)) -> x
 *   negated-operand   x - neg(y) -> x + y;  x + neg(y), neg(y) + x -> x - y;
 *                     neg(a) * neg(b) -> a * b;  neg(a) / neg(b) -> a / b;
 *                     neg(x) * c -> x * (-c) (c constant)
 *   times-minus-one   x * -1 -> neg(x)
 * Constant chains (option constant-chains, default on): the constants of
 * a chain are combined, which rounds once instead of twice (integers are
 * exact: they wrap either way):
 *   (x * c1) * c2 -> x * (c1 * c2)
 *   (x + c1) + c2, (x + c1) - c2, (x - c1) + c2, (x - c1) - c2
 *                 -> x + (c1 + c2), x + (c1 - c2), x + (c2 - c1), x - (c1 + c2)
 * fast-math (option, default off; changes results in the last bits, or
 * for infinities and NaNs):
 *   div-to-mul    x / c -> x * (1 / c) for a float constant c
 *   scale chains through division: (x * c1) / c2, (x / c1) * c2,
 *                 (x / c1) / c2 -> one multiplication or division
 *   self-sub      x - x -> 0 (static float shapes)
 * A rewrite whose new op would have another type than the old one (a
 * constant broadcasting differently) does not apply.
 */
#include <math.h>

#include "transforms/graph/graph_opt.h"

enum { STAT_IDENTITY, STAT_NEG, STAT_CHAINS, STAT_FAST_MATH, NUM_STATS };

static FzValue *operand(FzOp *op, size_t i) {
  return fzOpGetOperand(op, i);
}
static FzValue *result(FzOp *op) {
  return fzOpGetResult(op, 0);
}

/* True when v is a constant (any dtype) whose every element is val. */
static bool const_all(const FzValue *v, double val) {
  FzAttr *a = fzGraphOptDense(v);
  if (!a)
    return false;
  int64_t n =
      fzDenseAttrIsSplat(a) ? 1 : fzShapedTypeGetNumElements(fzAttrGetType(a));
  for (int64_t i = 0; i < n; ++i)
    if (fzDenseAttrGetFloat(a, i) != val)
      return false;
  return n > 0;
}

/* Replaces op by x, broadcast to op's result type when x is smaller. */
static bool replace_by(FzOp *op, FzRewriter *rw, FzValue *x) {
  FzType *rt = fzValueGetType(result(op));
  if (fzValueGetType(x) != rt) {
    if (fzGraphOptElementType(x) != fzShapedTypeGetElementType(rt) ||
        !fzShapedTypeHasStaticShape(rt))
      return false;
    x = fzGraphOptCreate(rw, "graph.broadcast", fzOpGetLoc(op), 1, &x, rt, 0,
                         NULL);
    if (!x)
      return false;
  }
  fzRewriterReplaceOp(rw, op, &x);
  return true;
}

/*===--- Exact rewrites -------------------------------------------------===*/

static bool identity(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  bool mul = fzGraphOptIsOp(op, "graph.mul"),
       add = fzGraphOptIsOp(op, "graph.add");
  double unit = mul || fzGraphOptIsOp(op, "graph.div") ? 1.0 : 0.0;
  if (const_all(operand(op, 1), unit))
    return replace_by(op, rw, operand(op, 0));
  if ((mul || add) && const_all(operand(op, 0), unit))
    return replace_by(op, rw, operand(op, 1));
  return false;
}

static bool double_negation(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *inner = fzGraphOptProducer(operand(op, 0), "graph.neg");
  if (!inner)
    return false;
  return replace_by(op, rw, operand(inner, 0));
}

/* Replaces op by name(a, b) when that has op's result type. */
static bool replace_by_binary(FzOp *op, FzRewriter *rw, const char *name,
                              FzValue *a, FzValue *b) {
  FzValue *ops[2] = {a, b};
  FzType *types[2] = {fzValueGetType(a), fzValueGetType(b)};
  FzType *rt = fzValueGetType(result(op));
  if (fzGraphOptInferType(fzOpGetContext(op), name, 2, types) != rt)
    return false;
  FzValue *v = fzGraphOptCreate(rw, name, fzOpGetLoc(op), 2, ops, rt, 0, NULL);
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

static bool negated_operand(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzValue *a = operand(op, 0), *b = operand(op, 1);
  FzOp *na = fzGraphOptProducer(a, "graph.neg");
  FzOp *nb = fzGraphOptProducer(b, "graph.neg");
  if (fzGraphOptIsOp(op, "graph.sub") && nb)
    return replace_by_binary(op, rw, "graph.add", a, operand(nb, 0));
  if (fzGraphOptIsOp(op, "graph.add")) {
    if (nb)
      return replace_by_binary(op, rw, "graph.sub", a, operand(nb, 0));
    if (na)
      return replace_by_binary(op, rw, "graph.sub", b, operand(na, 0));
    return false;
  }
  bool mul = fzGraphOptIsOp(op, "graph.mul");
  if ((mul || fzGraphOptIsOp(op, "graph.div")) && na && nb)
    return replace_by_binary(op, rw, mul ? "graph.mul" : "graph.div",
                             operand(na, 0), operand(nb, 0));
  /* neg(x) * c -> x * (-c) */
  if (mul && (na || nb)) {
    FzOp *n = na ? na : nb;
    FzValue *c = na ? b : a;
    if (!fzGraphOptDense(c))
      return false;
    FzTensor *t = fzGraphOptTensor(c);
    if (!t)
      return false;
    for (int64_t i = 0; i < t->numElements; ++i) {
      if (fzTypeIsFloat(t->dtype))
        fzTensorSetF64(t, i, -fzTensorGetF64(t, i));
      else
        fzTensorSetI64(t, i, (int64_t)(0 - (uint64_t)fzTensorGetI64(t, i)));
    }
    FzValue *nc = fzGraphOptConstant(rw, t, fzOpGetLoc(op));
    fzTensorDestroy(t);
    if (!nc)
      return false;
    if (!replace_by_binary(op, rw, "graph.mul", operand(n, 0), nc)) {
      fzRewriterEraseOp(rw, fzValueGetDefiningOp(nc));
      return false;
    }
    return true;
  }
  return false;
}

static bool times_minus_one(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  for (size_t i = 0; i < 2; ++i) {
    FzValue *x = operand(op, 1 - i);
    if (!const_all(operand(op, i), -1.0) ||
        fzValueGetType(x) != fzValueGetType(result(op)))
      continue;
    FzValue *v = fzGraphOptCreate(rw, "graph.neg", fzOpGetLoc(op), 1, &x,
                                  fzValueGetType(x), 0, NULL);
    if (!v)
      return false;
    fzRewriterReplaceOp(rw, op, &v);
    return true;
  }
  return false;
}

/*===--- Constant chains ------------------------------------------------===*/

/* op(inner(x, c1), c2) -> outerName(x, combineName(c1, c2)), or with
 * swapped constants (swap: combineName(c2, c1)). */
static bool merge_chain(FzOp *op, FzRewriter *rw, FzOp *inner,
                        const char *outerName, const char *combineName,
                        bool swap) {
  FzValue *x = operand(inner, 0), *c1 = operand(inner, 1), *c2 = operand(op, 1);
  if (!fzGraphOptDense(c1) || !fzGraphOptDense(c2) || fzGraphOptDense(x))
    return false;
  /* Check the types first: nothing may change when the rewrite fails. */
  FzContext *ctx = fzOpGetContext(op);
  FzType *ct[2] = {fzValueGetType(swap ? c2 : c1),
                   fzValueGetType(swap ? c1 : c2)};
  FzType *ot[2] = {fzValueGetType(x),
                   fzGraphOptInferType(ctx, combineName, 2, ct)};
  if (!ot[1] || !fzShapedTypeHasStaticShape(ot[1]) ||
      fzGraphOptInferType(ctx, outerName, 2, ot) != fzValueGetType(result(op)))
    return false;
  FzOp *both[2] = {inner, op};
  FzLoc *loc = fzGraphOptFusedLoc(both, 2);
  FzValue *c = swap ? fzGraphOptFoldBinary(rw, combineName, c2, c1, loc)
                    : fzGraphOptFoldBinary(rw, combineName, c1, c2, loc);
  if (!c)
    return false;
  if (!replace_by_binary(op, rw, outerName, x, c)) {
    fzRewriterEraseOp(rw, fzValueGetDefiningOp(c));
    return false;
  }
  return true;
}

static FzOp *inner_of(FzOp *op, const char *name) {
  return fzGraphOptProducer(operand(op, 0), name);
}

static bool constant_chain(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  FzOp *in;
  if (fzGraphOptIsOp(op, "graph.mul"))
    return (in = inner_of(op, "graph.mul")) &&
           merge_chain(op, rw, in, "graph.mul", "graph.mul", false);
  bool add = fzGraphOptIsOp(op, "graph.add");
  if ((in = inner_of(op, "graph.add")))
    return merge_chain(op, rw, in, "graph.add", add ? "graph.add" : "graph.sub",
                       false);
  if ((in = inner_of(op, "graph.sub")))
    return add ? merge_chain(op, rw, in, "graph.add", "graph.sub", true)
               : merge_chain(op, rw, in, "graph.sub", "graph.add", false);
  return false;
}

/*===--- fast-math ------------------------------------------------------===*/

static bool fast_math(const void *ud) {
  return fzGraphOptGetOptions(ud)->fastMath;
}

static bool div_to_mul(FzOp *op, FzRewriter *rw, void *ud) {
  FzValue *c = operand(op, 1);
  if (!fast_math(ud) || !fzGraphOptDense(c) || !fzGraphOptIsFloatTensor(c))
    return false;
  FzTensor *t = fzGraphOptTensor(c);
  if (!t)
    return false;
  for (int64_t i = 0; i < t->numElements; ++i)
    fzTensorSetF64(t, i, 1.0 / fzTensorGetF64(t, i));
  FzValue *r = fzGraphOptConstant(rw, t, fzOpGetLoc(op));
  fzTensorDestroy(t);
  if (!r)
    return false;
  if (!replace_by_binary(op, rw, "graph.mul", operand(op, 0), r)) {
    fzRewriterEraseOp(rw, fzValueGetDefiningOp(r));
    return false;
  }
  return true;
}

static bool division_chain(FzOp *op, FzRewriter *rw, void *ud) {
  if (!fast_math(ud) || !fzGraphOptIsFloatTensor(result(op)))
    return false;
  FzOp *in;
  if (fzGraphOptIsOp(op, "graph.div")) {
    if ((in = inner_of(op, "graph.mul"))) /* x*c1/c2 = x*(c1/c2) */
      return merge_chain(op, rw, in, "graph.mul", "graph.div", false);
    if ((in = inner_of(op, "graph.div"))) /* x/c1/c2 = x/(c1*c2) */
      return merge_chain(op, rw, in, "graph.div", "graph.mul", false);
    return false;
  }
  if ((in = inner_of(op, "graph.div"))) /* x/c1*c2 = x*(c2/c1) */
    return merge_chain(op, rw, in, "graph.mul", "graph.div", true);
  return false;
}

static bool self_sub(FzOp *op, FzRewriter *rw, void *ud) {
  FzType *rt = fzValueGetType(result(op));
  if (!fast_math(ud) || operand(op, 0) != operand(op, 1) ||
      !fzGraphOptIsFloatTensor(result(op)) || !fzShapedTypeHasStaticShape(rt))
    return false;
  FzValue *z = fzGraphOptSplatConstant(rw, rt, 0.0, fzOpGetLoc(op));
  if (!z)
    return false;
  fzRewriterReplaceOp(rw, op, &z);
  return true;
}

/*===--- Tables ---------------------------------------------------------===*/

/* The rows canonicalize shares: identities and double negation are left
 * to the fold hooks there (which keep a broadcasting x + 0 as it is). */
// clang-format off
#define NEGATION_ROWS(G)                                                       \
  {"graph.sub", negated_operand, "negated-operand", 2, G, STAT_NEG},           \
      {"graph.add", negated_operand, "negated-operand", 2, G, STAT_NEG},       \
      {"graph.mul", negated_operand, "negated-operand", 2, G, STAT_NEG},       \
      {"graph.div", negated_operand, "negated-operand", 2, G, STAT_NEG},       \
      {"graph.mul", times_minus_one, "times-minus-one", 2, G, STAT_NEG}
// clang-format on

static const FzGraphOptRow kRows[] = {
    {"graph.mul", identity, "identity", 3, -1, STAT_IDENTITY},
    {"graph.div", identity, "identity", 3, -1, STAT_IDENTITY},
    {"graph.add", identity, "identity", 3, -1, STAT_IDENTITY},
    {"graph.sub", identity, "identity", 3, -1, STAT_IDENTITY},
    {"graph.neg", double_negation, "double-negation", 3, -1, STAT_NEG},
    NEGATION_ROWS(-1),
    {"graph.mul", constant_chain, "constant-chain", 1, 0, STAT_CHAINS},
    {"graph.add", constant_chain, "constant-chain", 1, 0, STAT_CHAINS},
    {"graph.sub", constant_chain, "constant-chain", 1, 0, STAT_CHAINS},
    {"graph.div", division_chain, "division-chain", 2, 1, STAT_FAST_MATH},
    {"graph.mul", division_chain, "division-chain", 2, 1, STAT_FAST_MATH},
    {"graph.div", div_to_mul, "div-to-mul", 1, 1, STAT_FAST_MATH},
    {"graph.sub", self_sub, "self-sub", 3, 1, STAT_FAST_MATH},
};

const FzGraphOptRow fzSimplifyAlgebraCanonicalRows[] = {NEGATION_ROWS(-1)};
const size_t fzNumSimplifyAlgebraCanonicalRows =
    sizeof fzSimplifyAlgebraCanonicalRows /
    sizeof fzSimplifyAlgebraCanonicalRows[0];

static const char *const kGroups[] = {"constant-chains", "fast-math"};

static const FzGraphOptTable kTable = {kRows, sizeof kRows / sizeof kRows[0],
                                       kGroups, 2, NULL, 0};

static const FzPassOptionDef kOptions[] = {
    {"constant-chains", FZ_PASS_OPTION_BOOL, "true",
     "Combine the constants of multiply and add/sub chains", NULL, 0, 0},
    {"fast-math", FZ_PASS_OPTION_BOOL, "false",
     "Allow rewrites that change results: division by a constant into "
     "multiplication, chains through division, x - x into 0",
     NULL, 0, 0},
};

static const FzPassStatisticDef kStats[NUM_STATS] = {
    {"num-identities", "x*1, x+0 and similar identities removed"},
    {"num-negations", "Negations removed or absorbed"},
    {"num-chains", "Constant chains combined"},
    {"num-fast-math", "fast-math rewrites"},
};

const FzPassDef fzSimplifyAlgebraPass = {
    .argument = "simplify-algebra",
    .displayName = "SimplifyAlgebra",
    .summary = "Remove algebraic identities and negations, combine constant "
               "chains (fast-math: division by constants too)",
    .anchor = NULL,
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = NUM_STATS,
    .initialize = fzGraphOptPassInitialize,
    .run = fzGraphOptPassRun,
    .destroy = fzGraphOptPassDestroy,
    .userData = (void *)&kTable,
};

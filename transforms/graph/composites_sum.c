/* transforms/graph/composites_sum.c - the weighted-sum pattern of
 * recognize-composites (the inference engines' "fuse binary eltwise"):
 *
 *   weighted-sum  x1 * b1 + x2 * b2 -> weighted_sum(x1, x2) {b1, b2}
 *
 * The root is a graph.add, a graph.sub (its right operand counts
 * negatively) or a graph.weighted_sum (growing one found earlier). Each
 * operand of the root that is used by the root alone is opened one level:
 *   - x * b or b * x, b a float constant whose elements are all equal
 *     (rank 0 or splat) and finite, x of the product's type -> x with
 *     coefficient b (times the sign so far);
 *   - neg(x) -> x with the sign flipped;
 *   - a weighted_sum -> its operands, coefficients scaled.
 * Any other operand is a term with coefficient +-1: `x1 * b1 + x2` gives
 * {b1, 1}. The greedy driver reaches the fixpoint, so chains of adds
 * become one op with every term.
 *
 * It does not match (near misses stay as written):
 *   - when no operand opens (a plain add stays an add);
 *   - a product whose multiplier is not a constant, or a constant that is
 *     not one value (a per-channel scale), or one that broadcasts x: the
 *     product stays as a term of its own;
 *   - a product with other users (it would have to be kept): also a term;
 *   - a constant term (x * b + c is an affine op, which fold-batchnorm and
 *     simplify-algebra own);
 *   - a result that would be add or sub again (two terms, coefficients
 *     +-1: canonicalize turns such a weighted_sum back);
 *   - a result type the weighted_sum would not infer exactly.
 * These rows run after every other pattern of the pass (the table's late
 * rows), so that they never take an add another composite is made of
 * (gelu's x + 0.044715 * x^3).
 */
#include <math.h>

#include "transforms/graph/composites.h"

#define SUM_MAX_TERMS FZ_GRAPH_OPT_MAX_OPERANDS

typedef struct SumMatch {
  FzValue *ops[SUM_MAX_TERMS];
  double coeffs[SUM_MAX_TERMS];
  size_t n;
  FzOp *absorbed[SUM_MAX_TERMS + 1];
  size_t numAbsorbed;
  bool opened;
  bool failed;
} SumMatch;

static void add_term(SumMatch *s, FzValue *v, double c) {
  if (s->n == SUM_MAX_TERMS) {
    s->failed = true;
    return;
  }
  s->ops[s->n] = v;
  s->coeffs[s->n++] = c;
}

static void absorb(SumMatch *s, FzOp *op) {
  if (s->numAbsorbed == SUM_MAX_TERMS + 1)
    s->failed = true;
  else
    s->absorbed[s->numAbsorbed++] = op;
}

/* x when p = x * b (either order) with b a finite all-equal float
 * constant and x of p's type; b into *b. */
static FzValue *scaled_operand(FzOp *p, double *b) {
  if (!fzGraphOptIsOp(p, "graph.mul"))
    return NULL;
  FzValue *r = fzOpGetResult(p, 0);
  for (size_t i = 0; i < 2; ++i) {
    FzValue *x = fzOpGetOperand(p, i), *c = fzOpGetOperand(p, 1 - i);
    if (fzGraphOptSplat(c, b) && isfinite(*b) &&
        fzValueGetType(x) == fzValueGetType(r))
      return x;
  }
  return NULL;
}

/* Adds operand v of the root with coefficient c, opened when it can be. */
static void add_operand(SumMatch *s, FzValue *v, double c) {
  FzOp *p = fzValueGetDefiningOp(v);
  double b;
  FzValue *x;
  if (p && fzValueHasOneUse(v)) {
    if ((x = scaled_operand(p, &b))) {
      absorb(s, p);
      add_term(s, x, c * b);
      s->opened = true;
      return;
    }
    if (fzGraphOptIsOp(p, "graph.neg")) {
      absorb(s, p);
      add_term(s, fzOpGetOperand(p, 0), -c);
      s->opened = true;
      return;
    }
    FzAttr *ic = fzGraphOptIsOp(p, "graph.weighted_sum")
                     ? fzOpGetInherentAttr(p, FZ_STR("coeffs"))
                     : NULL;
    if (ic && fzAttrGetKind(ic) == FZ_ATTR_DENSE_ARRAY &&
        fzDenseArrayAttrGetSize(ic) == fzOpGetNumOperands(p)) {
      absorb(s, p);
      for (size_t i = 0; i < fzOpGetNumOperands(p); ++i)
        add_term(s, fzOpGetOperand(p, i), c * fzDenseArrayAttrGetFloat(ic, i));
      s->opened = true;
      return;
    }
  }
  if (fzGraphOptDense(v))
    s->failed = true; /* a constant term: an affine op, not a sum */
  add_term(s, v, c);
}

/* True when weighted_sum(s) would canonicalize to add or sub. */
static bool is_plain_binary(const SumMatch *s) {
  if (s->n != 2)
    return false;
  double a = s->coeffs[0], b = s->coeffs[1];
  return (a == 1.0 || a == -1.0) && (b == 1.0 || b == -1.0) &&
         !(a == -1.0 && b == -1.0);
}

bool fzCompositeWeightedSum(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  SumMatch s = {0};
  FzValue *r = fzOpGetResult(op, 0);
  if (!fzGraphOptIsFloatTensor(r))
    return false;
  size_t n = fzOpGetNumOperands(op);
  if (fzGraphOptIsOp(op, "graph.weighted_sum")) {
    FzAttr *c = fzOpGetInherentAttr(op, FZ_STR("coeffs"));
    if (!c || fzAttrGetKind(c) != FZ_ATTR_DENSE_ARRAY ||
        fzDenseArrayAttrGetSize(c) != n)
      return false;
    for (size_t i = 0; i < n && !s.failed; ++i)
      add_operand(&s, fzOpGetOperand(op, i), fzDenseArrayAttrGetFloat(c, i));
  } else {
    bool sub = fzGraphOptIsOp(op, "graph.sub");
    if (n != 2)
      return false;
    add_operand(&s, fzOpGetOperand(op, 0), 1.0);
    if (!s.failed)
      add_operand(&s, fzOpGetOperand(op, 1), sub ? -1.0 : 1.0);
  }
  if (s.failed || !s.opened || is_plain_binary(&s))
    return false;
  FzContext *ctx = fzRewriterGetContext(rw);
  FzAttr *coeffs = fzDenseArrayAttrGet(ctx, fzF64TypeGet(ctx), s.n, s.coeffs);
  FzGraphOptProp prop = {"coeffs", coeffs};
  /* Inferred from the terms: it must be the root's type exactly. */
  absorb(&s, op);
  FzValue *v = coeffs ? fzGraphOptCreate(rw, "graph.weighted_sum",
                                         fzGraphOptFusedLoc(s.absorbed,
                                                            s.numAbsorbed),
                                         s.n, s.ops, NULL, 1, &prop)
                      : NULL;
  if (!v)
    return false;
  if (fzValueGetType(v) != fzValueGetType(r)) {
    fzRewriterEraseOp(rw, fzValueGetDefiningOp(v));
    return false;
  }
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

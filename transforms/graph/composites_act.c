/* transforms/graph/composites_act.c - recognize-composites patterns for
 * activations.
 *
 *   gelu (erf)   the product, in any order and association, of x, 0.5 and
 *                1 + erf(x / 1.4142135 | x * 0.70710678) -> gelu(x)
 *   gelu (tanh)  the product of x, 0.5 and 1 + tanh(0.7978845608 *
 *                (x + 0.044715 * x^3)), x^3 as pow(x, 3) or x * x * x
 *                -> gelu(x) {approximate = "tanh"}
 *   silu         x * sigmoid(x), x / (1 + exp(-x)) -> silu(x)
 *   prelu        select(x > 0, x, x * a) (>=, or the mirrored < / <=
 *                form), max(x, 0) + min(x, 0) * a (relu(x) for the max)
 *                -> leaky_relu(x) {alpha = a} for a scalar constant a,
 *                else prelu(x, a)
 *   leaky max    max(x, x * a) with a constant 0 <= a <= 1
 *                -> leaky_relu(x) {alpha = a}
 * Constants are checked within the dtype's precision; every intermediate
 * must have no use outside the match.
 */
#include <math.h>

#include "transforms/graph/composites.h"

static FzValue *res(FzOp *op) {
  return fzOpGetResult(op, 0);
}
static FzValue *opd(FzOp *op, size_t i) {
  return fzOpGetOperand(op, i);
}

#define MAX_FACTORS 8

/* The factors of the product rooted at op: operands of nested muls that
 * have op's type and one use are expanded (recorded as interior in m). */
static size_t collect_factors(FzOp *op, FzType *type, CompositeMatch *m,
                              FzValue **out, size_t n, unsigned depth) {
  for (size_t i = 0; i < 2; ++i) {
    FzValue *v = opd(op, i);
    FzOp *inner = fzGraphOptProducer(v, "graph.mul");
    if (inner && depth < 4 && fzValueHasOneUse(v) &&
        fzValueGetType(v) == type) {
      fzCompositeAddInterior(m, inner);
      n = collect_factors(inner, type, m, out, n, depth + 1);
    } else if (n < MAX_FACTORS) {
      out[n++] = v;
    } else {
      return MAX_FACTORS + 1;
    }
  }
  return n;
}

/* v = a * b with b a splat constant near c (either order): a. */
static FzValue *scaled_by(FzValue *v, double c, CompositeMatch *m) {
  FzOp *p = fzGraphOptProducer(v, "graph.mul");
  for (size_t i = 0; p && i < 2; ++i)
    if (fzGraphOptIsSplatNear(opd(p, 1 - i), c) &&
        fzValueGetType(opd(p, i)) == fzValueGetType(v)) {
      fzCompositeAddInterior(m, p);
      return opd(p, i);
    }
  return NULL;
}

/* v = 1 + f(u) for unary op `name` (either order): u. */
static FzValue *one_plus(FzValue *v, const char *name, CompositeMatch *m) {
  FzOp *p = fzGraphOptProducer(v, "graph.add");
  for (size_t i = 0; p && i < 2; ++i) {
    FzOp *f = fzGraphOptProducer(opd(p, i), name);
    if (f && fzGraphOptIsSplatNear(opd(p, 1 - i), 1.0) &&
        fzValueGetType(opd(p, i)) == fzValueGetType(v)) {
      fzCompositeAddInterior(m, p);
      fzCompositeAddInterior(m, f);
      return opd(f, 0);
    }
  }
  return NULL;
}

/* u = x / sqrt(2) or x * (1 / sqrt(2)): x. */
static FzValue *erf_argument(FzValue *u, CompositeMatch *m) {
  FzOp *d = fzGraphOptProducer(u, "graph.div");
  if (d && fzGraphOptIsSplatNear(opd(d, 1), sqrt(2.0)) &&
      fzValueGetType(opd(d, 0)) == fzValueGetType(u)) {
    fzCompositeAddInterior(m, d);
    return opd(d, 0);
  }
  return scaled_by(u, 1.0 / sqrt(2.0), m);
}

/* v = x^3 as pow(x, 3), x * (x * x) or (x * x) * x. */
static bool is_cube_of(FzValue *v, FzValue *x, CompositeMatch *m) {
  FzOp *p = fzValueGetDefiningOp(v), *sq;
  if (fzGraphOptIsOp(p, "graph.pow") && opd(p, 0) == x &&
      fzGraphOptIsSplatNear(opd(p, 1), 3.0)) {
    fzCompositeAddInterior(m, p);
    return true;
  }
  if (!fzGraphOptIsOp(p, "graph.mul"))
    return false;
  for (size_t i = 0; i < 2; ++i)
    if (opd(p, 1 - i) == x && fzCompositeSquareOf(opd(p, i), &sq) == x &&
        fzGraphOptIsOp(sq, "graph.mul")) {
      fzCompositeAddInterior(m, p);
      fzCompositeAddInterior(m, sq);
      return true;
    }
  return false;
}

/* w = 0.7978845608 * (x + 0.044715 * x^3): x. */
static FzValue *tanh_argument(FzValue *w, CompositeMatch *m) {
  FzValue *inner = scaled_by(w, 0.7978845608028654, m) /* sqrt(2 / pi) */;
  FzOp *add = fzGraphOptProducer(inner, "graph.add");
  for (size_t i = 0; add && i < 2; ++i) {
    FzValue *x = opd(add, i);
    CompositeMatch probe = *m;
    FzValue *cube = scaled_by(opd(add, 1 - i), 0.044715, &probe);
    if (cube && is_cube_of(cube, x, &probe)) {
      *m = probe;
      fzCompositeAddInterior(m, add);
      return x;
    }
  }
  return NULL;
}

bool fzCompositeGelu(FzOp *op, FzRewriter *rw, void *ud) {
  FzType *type = fzValueGetType(res(op));
  if (!fzGraphOptIsFloatTensor(res(op)))
    return false;
  CompositeMatch m = {0};
  FzValue *f[MAX_FACTORS + 1];
  size_t n = collect_factors(op, type, &m, f, 0, 0);
  if (n != 3)
    return false;
  for (size_t k = 0; k < 3; ++k) {
    CompositeMatch probe = m;
    bool tanhForm = false;
    FzValue *u = one_plus(f[k], "graph.erf", &probe), *x = NULL;
    if (u) {
      x = erf_argument(u, &probe);
    } else if ((u = one_plus(f[k], "graph.tanh", &probe))) {
      x = tanh_argument(u, &probe);
      tanhForm = true;
    }
    if (!x || fzValueGetType(x) != type)
      continue;
    /* The other two factors: x and 0.5. */
    FzValue *a = f[(k + 1) % 3], *b = f[(k + 2) % 3];
    if (!((a == x && fzGraphOptIsSplatNear(b, 0.5)) ||
          (b == x && fzGraphOptIsSplatNear(a, 0.5))))
      continue;
    fzCompositeAddRoot(&probe, op);
    if (!fzCompositeUsesOk(&probe, ud))
      continue;
    FzContext *ctx = fzOpGetContext(op);
    FzGraphOptProp approx = {"approximate",
                             fzStringAttrGet(ctx, FZ_STR("tanh"))};
    FzValue *v = fzGraphOptCreate(rw, "graph.gelu", fzCompositeLoc(&probe), 1,
                                  &x, type, tanhForm ? 1 : 0, &approx);
    if (!v)
      return false;
    fzRewriterReplaceOp(rw, op, &v);
    return true;
  }
  return false;
}

/*===--- silu -----------------------------------------------------------===*/

static bool replace_unary(FzRewriter *rw, FzOp *op, const char *name,
                          const CompositeMatch *m, FzValue *x) {
  FzValue *v = fzGraphOptCreate(rw, name, fzCompositeLoc(m), 1, &x,
                                fzValueGetType(x), 0, NULL);
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

bool fzCompositeSilu(FzOp *op, FzRewriter *rw, void *ud) {
  if (!fzGraphOptIsFloatTensor(res(op)))
    return false;
  for (size_t i = 0; i < 2; ++i) {
    FzValue *x = opd(op, i);
    FzOp *s = fzGraphOptProducer(opd(op, 1 - i), "graph.sigmoid");
    if (!s || opd(s, 0) != x || fzValueGetType(x) != fzValueGetType(res(op)))
      continue;
    CompositeMatch m = {0};
    fzCompositeAddInterior(&m, s);
    fzCompositeAddRoot(&m, op);
    if (fzCompositeUsesOk(&m, ud))
      return replace_unary(rw, op, "graph.silu", &m, x);
  }
  return false;
}

bool fzCompositeSiluDiv(FzOp *op, FzRewriter *rw, void *ud) {
  FzValue *x = opd(op, 0);
  CompositeMatch m = {0};
  FzValue *u = one_plus(opd(op, 1), "graph.exp", &m);
  FzOp *neg = fzGraphOptProducer(u, "graph.neg");
  if (!neg || opd(neg, 0) != x || !fzGraphOptIsFloatTensor(x) ||
      fzValueGetType(x) != fzValueGetType(res(op)))
    return false;
  fzCompositeAddInterior(&m, neg);
  fzCompositeAddRoot(&m, op);
  return fzCompositeUsesOk(&m, ud) &&
         replace_unary(rw, op, "graph.silu", &m, x);
}

/*===--- prelu and leaky_relu -------------------------------------------===*/

/* v = x * a (either order): a, with x given. */
static FzValue *slope_of(FzValue *v, FzValue *x, CompositeMatch *m) {
  FzOp *p = fzGraphOptProducer(v, "graph.mul");
  if (!p || fzValueGetType(v) != fzValueGetType(x))
    return NULL;
  FzValue *a = fzGraphOptOtherOperand(p, x);
  if (a)
    fzCompositeAddInterior(m, p);
  return a;
}

/* Replaces op by leaky_relu(x) when a is a splat constant, else by
 * prelu(x, a) when a broadcasts to x. */
static bool replace_relu(FzRewriter *rw, FzOp *op, const CompositeMatch *m,
                         FzValue *x, FzValue *a) {
  FzType *type = fzValueGetType(x);
  if (type != fzValueGetType(res(op)) || !fzGraphOptIsFloatTensor(x) ||
      fzGraphOptElementType(a) != fzGraphOptElementType(x))
    return false;
  double alpha;
  FzValue *v;
  if (fzGraphOptSplat(a, &alpha) && isfinite(alpha)) {
    FzGraphOptProp p = {"alpha", fzGraphOptF32(fzOpGetContext(op), alpha)};
    v = fzGraphOptCreate(rw, "graph.leaky_relu", fzCompositeLoc(m), 1, &x, type,
                         1, &p);
  } else {
    FzValue *ops[2] = {x, a};
    FzType *types[2] = {type, fzValueGetType(a)};
    if (fzGraphOptInferType(fzOpGetContext(op), "graph.prelu", 2, types) !=
        type)
      return false;
    v = fzGraphOptCreate(rw, "graph.prelu", fzCompositeLoc(m), 2, ops, type, 0,
                         NULL);
  }
  if (!v)
    return false;
  fzRewriterReplaceOp(rw, op, &v);
  return true;
}

/* cmp compares some x with a zero constant: x, with the predicate as if x
 * were on the left into *pred ("gt", "ge", "lt", "le"). */
static FzValue *compared_to_zero(FzOp *cmp, const char **pred) {
  static const char *const names[] = {"gt", "ge", "lt", "le"};
  static const char *const mirrored[] = {"lt", "le", "gt", "ge"};
  FzAttr *p = fzOpGetInherentAttr(cmp, FZ_STR("predicate"));
  if (!p || fzAttrGetKind(p) != FZ_ATTR_STRING)
    return NULL;
  FzStringRef s = fzStringAttrGetValue(p);
  for (size_t i = 0; i < 2; ++i) {
    if (!fzGraphOptIsSplatNear(opd(cmp, 1 - i), 0.0))
      continue;
    for (size_t k = 0; k < 4; ++k)
      if (fzStringRefEqual(s, fzStringRefFromCString(names[k]))) {
        *pred = i == 0 ? names[k] : mirrored[k];
        return opd(cmp, i);
      }
  }
  return NULL;
}

bool fzCompositeReluSelect(FzOp *op, FzRewriter *rw, void *ud) {
  FzOp *cmp = fzGraphOptProducer(opd(op, 0), "graph.compare");
  const char *pred = NULL;
  FzValue *x = cmp ? compared_to_zero(cmp, &pred) : NULL;
  if (!x || fzValueGetType(x) != fzValueGetType(res(op)))
    return false;
  bool positiveFirst = pred[0] == 'g';
  FzValue *pos = opd(op, positiveFirst ? 1 : 2);
  FzValue *neg = opd(op, positiveFirst ? 2 : 1);
  CompositeMatch m = {0};
  FzValue *a = pos == x ? slope_of(neg, x, &m) : NULL;
  if (!a)
    return false;
  fzCompositeAddInterior(&m, cmp);
  fzCompositeAddRoot(&m, op);
  return fzCompositeUsesOk(&m, ud) && replace_relu(rw, op, &m, x, a);
}

/* v = max(x, 0), max(0, x) or relu(x): x (recorded in m). */
static FzValue *positive_part(FzValue *v, CompositeMatch *m) {
  FzOp *p = fzValueGetDefiningOp(v);
  if (fzGraphOptIsOp(p, "graph.relu")) {
    fzCompositeAddInterior(m, p);
    return opd(p, 0);
  }
  for (size_t i = 0; fzGraphOptIsOp(p, "graph.max") && i < 2; ++i)
    if (fzGraphOptIsSplatNear(opd(p, 1 - i), 0.0) &&
        fzValueGetType(opd(p, i)) == fzValueGetType(v)) {
      fzCompositeAddInterior(m, p);
      return opd(p, i);
    }
  return NULL;
}

bool fzCompositeReluMaxMin(FzOp *op, FzRewriter *rw, void *ud) {
  for (size_t i = 0; i < 2; ++i) {
    CompositeMatch m = {0};
    FzValue *x = positive_part(opd(op, i), &m);
    FzOp *mul = fzGraphOptProducer(opd(op, 1 - i), "graph.mul");
    if (!x || !mul)
      continue;
    for (size_t k = 0; k < 2; ++k) {
      FzOp *mn = fzGraphOptProducer(opd(mul, k), "graph.min");
      if (!mn || fzGraphOptOtherOperand(mn, x) == NULL ||
          !fzGraphOptIsSplatNear(fzGraphOptOtherOperand(mn, x), 0.0) ||
          fzValueGetType(res(mn)) != fzValueGetType(x) ||
          fzValueGetType(res(mul)) != fzValueGetType(x))
        continue;
      CompositeMatch probe = m;
      fzCompositeAddInterior(&probe, mn);
      fzCompositeAddInterior(&probe, mul);
      fzCompositeAddRoot(&probe, op);
      if (fzCompositeUsesOk(&probe, ud) &&
          replace_relu(rw, op, &probe, x, opd(mul, 1 - k)))
        return true;
    }
  }
  return false;
}

bool fzCompositeLeakyMax(FzOp *op, FzRewriter *rw, void *ud) {
  for (size_t i = 0; i < 2; ++i) {
    FzValue *x = opd(op, i);
    CompositeMatch m = {0};
    FzValue *a = slope_of(opd(op, 1 - i), x, &m);
    double alpha;
    if (!a || !fzGraphOptSplat(a, &alpha) || !(alpha >= 0 && alpha <= 1))
      continue;
    fzCompositeAddRoot(&m, op);
    if (fzCompositeUsesOk(&m, ud) && replace_relu(rw, op, &m, x, a))
      return true;
  }
  return false;
}

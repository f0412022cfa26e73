/* importers/onnx/ops_elementwise.c - ONNX elementwise ops: the unary and
 * binary ops that map one to one onto graph ops, comparisons, logic,
 * Where, Cast, Clip, the variadic Max/Min/Sum/Mean, and the activations,
 * with decompositions for those the graph dialect lacks:
 *
 *   Gelu              graph.gelu (approximate "none" or "tanh")
 *   Mish              x * tanh(softplus(x))
 *   BitwiseNot        -x - 1 (integers)
 *   Softsign          x / (1 + |x|)
 *   HardSwish         x * hard_sigmoid(x; 1/6, 1/2)
 *   Celu              alpha * elu(x / alpha)
 *   ThresholdedRelu   select(x > alpha, x, 0)
 *   Shrink            select(x < -l, x + b, select(x > l, x - b, 0))
 *   Sinh Cosh Tan     through exp, sin and cos
 *   Asinh Acosh Atanh through log and sqrt
 *   IsNaN IsInf       comparisons
 *   Mod (fmod = 0)    rem, then + b where the signs of r and b differ
 *   Pow (mixed types) the exponent cast to the base's type (integer
 *                     bases with float exponents go through f64)
 */
#include <math.h>
#include <string.h>

#include "importers/onnx/onnx_internal.h"

/*===--- One to one -----------------------------------------------------===*/

/* Unary ops whose attributes (if any) carry over by name as floats. */
static bool h_unary(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  const char *names[2] = {NULL, NULL};
  FzAttr *vals[2] = {NULL, NULL};
  size_t k = 0;
  for (size_t i = 0; i < im->node->n_attribute && k < 2; ++i) {
    double v;
    const char *name = im->node->attribute[i]->name;
    if (!fzOnnxAttrFloat(im, name, 0, &v))
      return false;
    names[k] = name;
    vals[k++] = fzOnnxFloatAttr(im, v);
  }
  out[0] = fzOnnxEmit(im, im->row->graphOp, 1, in, NULL, names[0], vals[0],
                      names[1], vals[1], NULL);
  return out[0] != NULL;
}

static bool h_binary(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  out[0] = fzOnnxBinary(im, im->row->graphOp, in[0], in[1]);
  return out[0] != NULL;
}

static bool h_compare(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                      FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  out[0] = fzOnnxCompare(im, im->row->graphOp, in[0], in[1]);
  return out[0] != NULL;
}

static bool h_where(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  out[0] = fzOnnxSelect(im, in[0], in[1], in[2]);
  return out[0] != NULL;
}

/* Max, Min, Sum, Mean: a left fold of the binary op. */
static bool h_variadic(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  (void)nOut;
  bool mean = !strcmp(im->node->op_type, "Mean");
  FzValue *acc = in[0];
  for (size_t i = 1; i < nIn; ++i) {
    if (!in[i])
      return fzOnnxError(im, "input #%zu is absent", i);
    acc = fzOnnxBinary(im, im->row->graphOp, acc, in[i]);
  }
  if (mean && nIn > 1)
    acc = fzOnnxBinary(im, "graph.div", acc,
                       fzOnnxConstScalar(im, fzOnnxElt(acc), (double)nIn));
  out[0] = acc;
  return acc != NULL;
}

/*===--- Types ----------------------------------------------------------===*/

static bool h_cast(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nOut;
  FzType *elt;
  bool toUnsigned = false;
  if (nIn > 1 && in[1]) { /* CastLike */
    elt = fzOnnxElt(in[1]);
    toUnsigned = fzOnnxIsUnsigned(im, in[1]);
  } else {
    int64_t to;
    if (!fzOnnxAttrInt(im, "to", -1, &to))
      return false;
    if (!fzOnnxAttr(im, "to"))
      return fzOnnxError(im, "requires attribute 'to'");
    /* An int64 attribute: no truncation to a valid dtype. */
    elt = to < 0 || to > INT32_MAX
              ? NULL
              : fzOnnxElementTypeU8(im->ctx, (int32_t)to, &toUnsigned);
    if (!elt)
      return fzOnnxError(im, "unsupported dtype %s",
                         to < 0 || to > INT32_MAX
                             ? "out of range"
                             : fzOnnxDataTypeName((int32_t)to));
  }
  if (toUnsigned || fzOnnxIsUnsigned(im, in[0]))
    return fzOnnxCastUnsigned(im, in[0], elt, toUnsigned, &out[0]);
  out[0] = fzOnnxCast(im, in[0], elt);
  return out[0] != NULL;
}

/*===--- Clip -----------------------------------------------------------===*/

static bool h_clip(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nOut;
  FzValue *x = in[0];
  FzAttr *bound[2] = {NULL, NULL};
  FzValue *dyn[2] = {NULL, NULL};
  static const char *const names[2] = {"min", "max"};
  for (int k = 0; k < 2; ++k) {
    if (im->opVersion < 11) {
      double v;
      if (!fzOnnxAttrFloat(im, names[k], k ? HUGE_VAL : -HUGE_VAL, &v))
        return false;
      if (fzOnnxAttr(im, names[k]))
        bound[k] = fzOnnxFloatAttr(im, v);
      continue;
    }
    FzValue *b = (size_t)k + 1 < nIn ? in[k + 1] : NULL;
    double *vals;
    size_t n;
    if (!b)
      continue;
    if (fzOnnxGetConstFloats(im, b, &vals, &n) && n == 1)
      bound[k] = fzFloatAttrGet(im->ctx, fzF64TypeGet(im->ctx), vals[0]);
    else
      dyn[k] = b;
  }
  if (bound[0] || bound[1])
    x = fzOnnxEmit(im, "graph.clamp", 1, &x, NULL,
                   bound[0] ? "min" : "max", bound[0] ? bound[0] : bound[1],
                   bound[0] && bound[1] ? "max" : NULL, bound[1], NULL);
  if (dyn[0])
    x = fzOnnxBinary(im, "graph.max", x, dyn[0]);
  if (dyn[1])
    x = fzOnnxBinary(im, "graph.min", x, dyn[1]);
  out[0] = x;
  return x != NULL;
}

/*===--- Gelu (20) --------------------------------------------------------===*/

/* graph.gelu, whose `approximate` ("none" or "tanh") is ONNX's. */
static bool h_gelu(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  const char *approx;
  if (!fzOnnxAttrString(im, "approximate", "none", &approx))
    return false;
  if (strcmp(approx, "none") && strcmp(approx, "tanh"))
    return fzOnnxErrorAttrValue(im, "approximate", approx);
  out[0] = fzOnnxEmit(im, "graph.gelu", 1, in, NULL, "approximate",
                      fzStringAttrGet(im->ctx,
                                      fzStringRefFromCString(approx)),
                      NULL);
  return out[0] != NULL;
}

/*===--- Decomposed activations ------------------------------------------===*/

static FzValue *scalar_like(FzOnnxImporter *im, FzValue *x, double v) {
  return x ? fzOnnxConstScalar(im, fzOnnxElt(x), v) : NULL;
}

static bool h_softsign(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                       FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *d = fzOnnxBinary(im, "graph.add", scalar_like(im, in[0], 1),
                            fzOnnxUnary(im, "graph.abs", in[0]));
  out[0] = fzOnnxBinary(im, "graph.div", in[0], d);
  return out[0] != NULL;
}

static bool h_hardswish(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                        FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *x = in[0];
  FzValue *hs = fzOnnxEmit(im, "graph.hard_sigmoid", 1, &x, NULL, "alpha",
                           fzOnnxFloatAttr(im, 1.0 / 6.0), "beta",
                           fzOnnxFloatAttr(im, 0.5), NULL);
  out[0] = fzOnnxBinary(im, "graph.mul", x, hs);
  return out[0] != NULL;
}

/* Mish (18): x * tanh(softplus(x)). */
static bool h_mish(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *t = fzOnnxUnary(im, "graph.tanh",
                           fzOnnxUnary(im, "graph.softplus", in[0]));
  out[0] = fzOnnxBinary(im, "graph.mul", in[0], t);
  return out[0] != NULL;
}

/* BitwiseNot (18) on two's-complement integers: ~x = -x - 1 (graph.neg and
 * graph.sub wrap, so INT_MIN and INT_MAX map onto each other). The graph
 * dialect's not is logical and takes i1 only; ONNX's BitwiseNot takes no
 * booleans. */
static bool h_bitwise_not(FzOnnxImporter *im, FzValue *const *in,
                          size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzType *elt = fzOnnxElt(in[0]);
  if (!fzTypeIsInteger(elt) || elt == fzIntegerTypeGet(im->ctx, 1))
    return fzOnnxError(im, "input must be an integer tensor");
  out[0] = fzOnnxBinary(im, "graph.sub", fzOnnxUnary(im, "graph.neg", in[0]),
                        scalar_like(im, in[0], 1));
  return out[0] != NULL;
}

static bool h_celu(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  double alpha;
  if (!fzOnnxAttrFloat(im, "alpha", 1.0, &alpha))
    return false;
  FzValue *x = in[0];
  if (alpha == 0)
    return fzOnnxErrorAttrValue(im, "alpha", "0");
  if (alpha != 1)
    x = fzOnnxBinary(im, "graph.div", x, scalar_like(im, x, alpha));
  x = fzOnnxUnary(im, "graph.elu", x);
  if (alpha != 1)
    x = fzOnnxBinary(im, "graph.mul", x, scalar_like(im, x, alpha));
  out[0] = x;
  return x != NULL;
}

static bool h_thresholded_relu(FzOnnxImporter *im, FzValue *const *in,
                               size_t nIn, FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  double alpha;
  if (!fzOnnxAttrFloat(im, "alpha", 1.0, &alpha))
    return false;
  FzValue *x = in[0];
  FzValue *c = fzOnnxCompare(im, "gt", x, scalar_like(im, x, alpha));
  out[0] = fzOnnxSelect(im, c, x, scalar_like(im, x, 0));
  return out[0] != NULL;
}

static bool h_shrink(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                     FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  double bias, lambd;
  if (!fzOnnxAttrFloat(im, "bias", 0.0, &bias) ||
      !fzOnnxAttrFloat(im, "lambd", 0.5, &lambd))
    return false;
  FzValue *x = in[0];
  FzValue *hi = fzOnnxSelect(
      im, fzOnnxCompare(im, "gt", x, scalar_like(im, x, lambd)),
      fzOnnxBinary(im, "graph.sub", x, scalar_like(im, x, bias)),
      scalar_like(im, x, 0));
  out[0] = fzOnnxSelect(
      im, fzOnnxCompare(im, "lt", x, scalar_like(im, x, -lambd)),
      fzOnnxBinary(im, "graph.add", x, scalar_like(im, x, bias)), hi);
  return out[0] != NULL;
}

/* Sinh, Cosh, Tan, Asinh, Acosh, Atanh. */
static bool h_trig(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                   FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  const char *op = im->node->op_type;
  FzValue *x = in[0], *r;
  if (!strcmp(op, "Tan")) {
    r = fzOnnxBinary(im, "graph.div", fzOnnxUnary(im, "graph.sin", x),
                     fzOnnxUnary(im, "graph.cos", x));
  } else if (!strcmp(op, "Sinh") || !strcmp(op, "Cosh")) {
    FzValue *a = fzOnnxUnary(im, "graph.exp", x);
    FzValue *b = fzOnnxUnary(im, "graph.exp", fzOnnxUnary(im, "graph.neg", x));
    r = fzOnnxBinary(im, op[0] == 'S' ? "graph.sub" : "graph.add", a, b);
    r = fzOnnxBinary(im, "graph.mul", r, scalar_like(im, x, 0.5));
  } else if (!strcmp(op, "Asinh")) {
    /* sign(x) * log(|x| + sqrt(x^2 + 1)): no cancellation for x < 0. */
    FzValue *ax = fzOnnxUnary(im, "graph.abs", x);
    FzValue *s = fzOnnxUnary(
        im, "graph.sqrt",
        fzOnnxBinary(im, "graph.add", fzOnnxBinary(im, "graph.mul", x, x),
                     scalar_like(im, x, 1)));
    r = fzOnnxUnary(im, "graph.log", fzOnnxBinary(im, "graph.add", ax, s));
    r = fzOnnxBinary(im, "graph.mul", fzOnnxUnary(im, "graph.sign", x), r);
  } else if (!strcmp(op, "Acosh")) {
    FzValue *s = fzOnnxUnary(
        im, "graph.sqrt",
        fzOnnxBinary(im, "graph.sub", fzOnnxBinary(im, "graph.mul", x, x),
                     scalar_like(im, x, 1)));
    r = fzOnnxUnary(im, "graph.log", fzOnnxBinary(im, "graph.add", x, s));
  } else { /* Atanh */
    FzValue *one = scalar_like(im, x, 1);
    FzValue *q = fzOnnxBinary(im, "graph.div",
                              fzOnnxBinary(im, "graph.add", one, x),
                              fzOnnxBinary(im, "graph.sub", one, x));
    r = fzOnnxBinary(im, "graph.mul", fzOnnxUnary(im, "graph.log", q),
                     scalar_like(im, x, 0.5));
  }
  out[0] = r;
  return r != NULL;
}

static bool h_isnan(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  out[0] = fzOnnxCompare(im, "ne", in[0], in[0]);
  return out[0] != NULL;
}

static bool h_isinf(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                    FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t neg, pos;
  if (!fzOnnxAttrInt(im, "detect_negative", 1, &neg) ||
      !fzOnnxAttrInt(im, "detect_positive", 1, &pos))
    return false;
  FzValue *x = in[0];
  FzValue *p = fzOnnxCompare(im, "eq", x, scalar_like(im, x, HUGE_VAL));
  FzValue *n = fzOnnxCompare(im, "eq", x, scalar_like(im, x, -HUGE_VAL));
  if (pos && neg)
    out[0] = fzOnnxBinary(im, "graph.or", p, n);
  else if (pos)
    out[0] = p;
  else if (neg)
    out[0] = n;
  else /* never both: all false */
    out[0] = fzOnnxBinary(im, "graph.and", p, n);
  return out[0] != NULL;
}

/*===--- Mod and Pow ------------------------------------------------------===*/

static bool h_mod(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  int64_t fmod;
  if (!fzOnnxAttrInt(im, "fmod", 0, &fmod))
    return false;
  FzValue *a = in[0], *b = in[1];
  bool isFloat = fzTypeIsFloat(fzOnnxElt(a));
  if (isFloat && !fmod)
    return fzOnnxError(im, "attribute 'fmod' must be 1 for floating-point "
                           "inputs");
  FzValue *r = fzOnnxBinary(im, "graph.rem", a, b);
  if (!fmod) {
    /* Python's modulo: the result takes the sign of the divisor. */
    FzValue *zero = scalar_like(im, a, 0);
    FzValue *nz = fzOnnxCompare(im, "ne", r, zero);
    FzValue *sr = fzOnnxCompare(im, "lt", r, zero);
    FzValue *sb = fzOnnxCompare(im, "lt", b, zero);
    FzValue *fix = fzOnnxBinary(im, "graph.and", nz,
                                fzOnnxBinary(im, "graph.xor", sr, sb));
    r = fzOnnxSelect(im, fix, fzOnnxBinary(im, "graph.add", r, b), r);
  }
  out[0] = r;
  return r != NULL;
}

static bool h_pow(FzOnnxImporter *im, FzValue *const *in, size_t nIn,
                  FzValue **out, size_t nOut) {
  (void)nIn;
  (void)nOut;
  FzValue *a = in[0], *b = in[1];
  /* An unsigned exponent (a uint8..uint64 T2): its value, converted. */
  if (fzOnnxIsUnsigned(im, b) &&
      !fzOnnxCastUnsigned(im, b,
                          fzTypeIsFloat(fzOnnxElt(a))
                              ? fzOnnxElt(a)
                              : fzIntegerTypeGet(im->ctx, 64),
                          false, &b))
    return false;
  FzType *ta = fzOnnxElt(a), *tb = fzOnnxElt(b);
  if (ta == tb || fzTypeIsFloat(ta)) {
    out[0] = fzOnnxBinary(im, "graph.pow", a, fzOnnxCast(im, b, ta));
  } else if (fzTypeIsInteger(tb)) {
    out[0] = fzOnnxBinary(im, "graph.pow", a, fzOnnxCast(im, b, ta));
  } else {
    FzType *f64 = fzF64TypeGet(im->ctx);
    FzValue *p = fzOnnxBinary(im, "graph.pow", fzOnnxCast(im, a, f64),
                              fzOnnxCast(im, b, f64));
    out[0] = fzOnnxCast(im, p, ta);
  }
  return out[0] != NULL;
}

/*===--- The table -------------------------------------------------------===*/

#define UNARY(type, op, attrs) {type, h_unary, "graph." op, attrs, 1, 1, 1}
#define BINARY(type, op) {type, h_binary, "graph." op, "", 2, 2, 1}
#define COMPARE(type, pred) {type, h_compare, pred, "", 2, 2, 1}
#define ROW(type, fn, attrs, minIn, maxIn) {type, fn, NULL, attrs, minIn, maxIn, 1}

const FzOnnxOpDef fzOnnxElementwiseOps[] = {
    UNARY("Neg", "neg", ""),
    UNARY("Abs", "abs", ""),
    UNARY("Exp", "exp", ""),
    UNARY("Log", "log", ""),
    UNARY("Sqrt", "sqrt", ""),
    UNARY("Reciprocal", "reciprocal", ""),
    UNARY("Tanh", "tanh", ""),
    UNARY("Sigmoid", "sigmoid", ""),
    UNARY("Relu", "relu", ""),
    UNARY("Erf", "erf", ""),
    UNARY("Floor", "floor", ""),
    UNARY("Ceil", "ceil", ""),
    UNARY("Round", "round", ""),
    UNARY("Sign", "sign", ""),
    UNARY("Sin", "sin", ""),
    UNARY("Cos", "cos", ""),
    UNARY("Softplus", "softplus", ""),
    UNARY("Not", "not", ""),
    UNARY("LeakyRelu", "leaky_relu", "alpha"),
    UNARY("Elu", "elu", "alpha"),
    UNARY("Selu", "selu", "alpha gamma"),
    UNARY("HardSigmoid", "hard_sigmoid", "alpha beta"),
    BINARY("Add", "add"),
    BINARY("Sub", "sub"),
    BINARY("Mul", "mul"),
    BINARY("Div", "div"),
    BINARY("And", "and"),
    BINARY("Or", "or"),
    BINARY("Xor", "xor"),
    BINARY("PRelu", "prelu"),
    COMPARE("Equal", "eq"),
    COMPARE("Less", "lt"),
    COMPARE("LessOrEqual", "le"),
    COMPARE("Greater", "gt"),
    COMPARE("GreaterOrEqual", "ge"),
    {"Max", h_variadic, "graph.max", "", 1, -1, 1},
    {"Min", h_variadic, "graph.min", "", 1, -1, 1},
    {"Sum", h_variadic, "graph.add", "", 1, -1, 1},
    {"Mean", h_variadic, "graph.add", "", 1, -1, 1},
    ROW("Where", h_where, "", 3, 3),
    /* saturate (19) applies to float8 targets only, which are refused. */
    ROW("Cast", h_cast, "saturate>=19 to", 1, 1),
    ROW("CastLike", h_cast, "saturate>=19", 2, 2),
    ROW("Clip", h_clip, "min<11 max<11", 1, 3),
    ROW("Gelu", h_gelu, "approximate", 1, 1),
    ROW("Mish", h_mish, "", 1, 1),
    ROW("BitwiseNot", h_bitwise_not, "", 1, 1),
    ROW("Softsign", h_softsign, "", 1, 1),
    ROW("HardSwish", h_hardswish, "", 1, 1),
    ROW("Celu", h_celu, "alpha", 1, 1),
    ROW("ThresholdedRelu", h_thresholded_relu, "alpha", 1, 1),
    ROW("Shrink", h_shrink, "bias lambd", 1, 1),
    ROW("Tan", h_trig, "", 1, 1),
    ROW("Sinh", h_trig, "", 1, 1),
    ROW("Cosh", h_trig, "", 1, 1),
    ROW("Asinh", h_trig, "", 1, 1),
    ROW("Acosh", h_trig, "", 1, 1),
    ROW("Atanh", h_trig, "", 1, 1),
    ROW("IsNaN", h_isnan, "", 1, 1),
    ROW("IsInf", h_isinf, "detect_negative detect_positive", 1, 1),
    ROW("Mod", h_mod, "fmod", 2, 2),
    ROW("Pow", h_pow, "", 2, 2),
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};

/* dialects/graph/ops_elementwise.c - the elementwise ops: the unary and
 * binary families (one table row each, in graph_internal.h), prelu, cast,
 * compare and select.
 *
 * A unary op is defined by its double function (and optionally an int64
 * one for integer tensors) plus a reader of its attributes into up to 4
 * double parameters; a binary op by its double and int64 functions. The
 * verifier, the custom syntax, the interpreter kernel and constant
 * folding come from the shared hooks, so adding an op is one table row
 * and its function(s).
 *
 * Integer semantics (interpreter and folding): arithmetic wraps modulo
 * 2^width; div truncates toward zero and rem takes the sign of the
 * dividend (as C); division by zero is an error; pow with a negative
 * exponent gives 0 unless the base is 1 or -1.
 */
#include <math.h>
#include <string.h>

#include "dialects/graph/graph_internal.h"

/*===--- Unary functions ------------------------------------------------===*/

static double g_neg(double x, const double *p) {
  (void)p;
  return -x;
}
static double g_abs(double x, const double *p) {
  (void)p;
  return fabs(x);
}
static double g_exp(double x, const double *p) {
  (void)p;
  return exp(x);
}
static double g_log(double x, const double *p) {
  (void)p;
  return log(x);
}
static double g_sqrt(double x, const double *p) {
  (void)p;
  return sqrt(x);
}
static double g_rsqrt(double x, const double *p) {
  (void)p;
  return 1.0 / sqrt(x);
}
static double g_reciprocal(double x, const double *p) {
  (void)p;
  return 1.0 / x;
}
static double g_tanh(double x, const double *p) {
  (void)p;
  return tanh(x);
}
static double sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}
static double g_sigmoid(double x, const double *p) {
  (void)p;
  return sigmoid(x);
}
static double g_relu(double x, const double *p) {
  (void)p;
  return isnan(x) ? x : (x > 0 ? x : 0.0);
}
static double g_gelu(double x, const double *p) {
  if (p[0] != 0) {
    const double k = 0.7978845608028654; /* sqrt(2 / pi) */
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
}
static double g_silu(double x, const double *p) {
  (void)p;
  return x * sigmoid(x);
}
static double g_erf(double x, const double *p) {
  (void)p;
  return erf(x);
}
static double g_floor(double x, const double *p) {
  (void)p;
  return floor(x);
}
static double g_ceil(double x, const double *p) {
  (void)p;
  return ceil(x);
}
static double g_round(double x, const double *p) {
  (void)p;
  return nearbyint(x);
}
static double g_sign(double x, const double *p) {
  (void)p;
  return x > 0 ? 1.0 : (x < 0 ? -1.0 : x);
}
static double g_sin(double x, const double *p) {
  (void)p;
  return sin(x);
}
static double g_cos(double x, const double *p) {
  (void)p;
  return cos(x);
}
static double g_softplus(double x, const double *p) {
  (void)p;
  return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
static double g_leaky_relu(double x, const double *p) {
  return x >= 0 ? x : p[0] * x;
}
static double g_elu(double x, const double *p) {
  return x > 0 ? x : p[0] * expm1(x);
}
static double g_selu(double x, const double *p) {
  return p[1] * (x > 0 ? x : p[0] * expm1(x));
}
static double g_hard_sigmoid(double x, const double *p) {
  double y = p[0] * x + p[1];
  if (isnan(y))
    return y;
  return y < 0 ? 0.0 : (y > 1 ? 1.0 : y);
}
static double g_clamp(double x, const double *p) {
  if (isnan(x))
    return x;
  double y = x < p[0] ? p[0] : x;
  return y > p[1] ? p[1] : y;
}

static int64_t g_neg_i(int64_t x, const double *p) {
  (void)p;
  return (int64_t)(0 - (uint64_t)x);
}
static int64_t g_abs_i(int64_t x, const double *p) {
  return x < 0 ? g_neg_i(x, p) : x;
}
static int64_t g_relu_i(int64_t x, const double *p) {
  (void)p;
  return x > 0 ? x : 0;
}
static int64_t g_sign_i(int64_t x, const double *p) {
  (void)p;
  return (x > 0) - (x < 0);
}
static int64_t g_clamp_i(int64_t x, const double *p) {
  if ((double)x < p[0])
    return (int64_t)ceil(p[0]);
  if ((double)x > p[1])
    return (int64_t)floor(p[1]);
  return x;
}
static int64_t g_not_i(int64_t x, const double *p) {
  (void)p;
  return !(x & 1);
}

/*===--- Attribute readers of the unary ops -----------------------------===*/

static const char *const g_gelu_attrs[] = {"approximate", NULL};
static const char *const g_alpha_attrs[] = {"alpha", NULL};
static const char *const g_selu_attrs[] = {"alpha", "gamma", NULL};
static const char *const g_hard_sigmoid_attrs[] = {"alpha", "beta", NULL};
static const char *const g_clamp_attrs[] = {"min", "max", NULL};

static bool g_gelu_params(FzGraphDiag *d, const FzGraphAttrs *a, double *p) {
  FzStringRef s;
  if (!fzGraphGetString(d, a, "approximate", "none", &s))
    return false;
  if (fzStringRefEqual(s, FZ_STR("none")))
    p[0] = 0;
  else if (fzStringRefEqual(s, FZ_STR("tanh")))
    p[0] = 1;
  else
    return fzGraphError(d,
                        "attribute 'approximate' must be \"none\" or "
                        "\"tanh\", but got \"%.*s\"",
                        (int)s.length, s.data);
  return true;
}
static bool g_leaky_params(FzGraphDiag *d, const FzGraphAttrs *a, double *p) {
  return fzGraphGetFloat(d, a, "alpha", 0.01, &p[0]);
}
static bool g_elu_params(FzGraphDiag *d, const FzGraphAttrs *a, double *p) {
  return fzGraphGetFloat(d, a, "alpha", 1.0, &p[0]);
}
static bool g_selu_params(FzGraphDiag *d, const FzGraphAttrs *a, double *p) {
  return fzGraphGetFloat(d, a, "alpha", 1.6732632423543772, &p[0]) &&
         fzGraphGetFloat(d, a, "gamma", 1.0507009873554805, &p[1]);
}
static bool g_hard_sigmoid_params(FzGraphDiag *d, const FzGraphAttrs *a,
                                  double *p) {
  return fzGraphGetFloat(d, a, "alpha", 0.2, &p[0]) &&
         fzGraphGetFloat(d, a, "beta", 0.5, &p[1]);
}
static bool g_clamp_params(FzGraphDiag *d, const FzGraphAttrs *a, double *p) {
  if (!fzGraphGetFloat(d, a, "min", -HUGE_VAL, &p[0]) ||
      !fzGraphGetFloat(d, a, "max", HUGE_VAL, &p[1]))
    return false;
  if (isnan(p[0]) || isnan(p[1]))
    return fzGraphError(d, "attributes 'min' and 'max' must not be NaN");
  return true;
}

/*===--- Binary functions -----------------------------------------------===*/

static double g_add(double a, double b) {
  return a + b;
}
static double g_sub(double a, double b) {
  return a - b;
}
static double g_mul(double a, double b) {
  return a * b;
}
static double g_div(double a, double b) {
  return a / b;
}
static double g_rem(double a, double b) {
  return fmod(a, b);
}
static double g_pow(double a, double b) {
  return pow(a, b);
}
static double g_max(double a, double b) {
  if (isnan(a) || isnan(b))
    return a + b;
  return a > b ? a : b;
}
static double g_min(double a, double b) {
  if (isnan(a) || isnan(b))
    return a + b;
  return a < b ? a : b;
}

static bool g_add_i(int64_t a, int64_t b, int64_t *o) {
  *o = (int64_t)((uint64_t)a + (uint64_t)b);
  return true;
}
static bool g_sub_i(int64_t a, int64_t b, int64_t *o) {
  *o = (int64_t)((uint64_t)a - (uint64_t)b);
  return true;
}
static bool g_mul_i(int64_t a, int64_t b, int64_t *o) {
  *o = (int64_t)((uint64_t)a * (uint64_t)b);
  return true;
}
static bool g_div_i(int64_t a, int64_t b, int64_t *o) {
  if (b == 0)
    return false;
  *o = (a == INT64_MIN && b == -1) ? INT64_MIN : a / b;
  return true;
}
static bool g_rem_i(int64_t a, int64_t b, int64_t *o) {
  if (b == 0)
    return false;
  *o = (b == -1) ? 0 : a % b;
  return true;
}
static bool g_pow_i(int64_t a, int64_t b, int64_t *o) {
  if (b < 0) {
    *o = a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    return true;
  }
  uint64_t r = 1, base = (uint64_t)a;
  for (uint64_t e = (uint64_t)b; e; e >>= 1) {
    if (e & 1)
      r *= base;
    base *= base;
  }
  *o = (int64_t)r;
  return true;
}
static bool g_max_i(int64_t a, int64_t b, int64_t *o) {
  *o = a > b ? a : b;
  return true;
}
static bool g_min_i(int64_t a, int64_t b, int64_t *o) {
  *o = a < b ? a : b;
  return true;
}
static bool g_and_i(int64_t a, int64_t b, int64_t *o) {
  *o = (a & b) & 1;
  return true;
}
static bool g_or_i(int64_t a, int64_t b, int64_t *o) {
  *o = (a | b) & 1;
  return true;
}
static bool g_xor_i(int64_t a, int64_t b, int64_t *o) {
  *o = (a ^ b) & 1;
  return true;
}

/*===--- Shape functions ------------------------------------------------===*/

/* unary: one ranked operand; the result has its type. */
static bool shape_unary(FzGraphDiag *d, size_t n, FzType *const *in,
                        const FzGraphAttrs *a, FzType **out) {
  (void)a;
  if (!fzGraphCheckCount(d, n, 1, 1) || !fzGraphCheckRanked(d, in, 0))
    return false;
  out[0] = in[0];
  return true;
}
FZ_GRAPH_INFER_HOOK(shape_unary)

/* Unary ops also validate their attributes in the verifier. */
static bool check_unary(FzOp *op, FzGraphDiag *d) {
  const FzGraphOpInfo *info = fzGraphOpInfo(fzOpGetDef(op));
  double p[4] = {0, 0, 0, 0};
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  return !info->params || info->params(d, &a, p);
}

static bool broadcast_result(FzGraphDiag *d, FzType *const *in, size_t n,
                             const size_t *idx, FzType *elt, FzType **out) {
  int64_t shape[FZ_GRAPH_MAX_RANK];
  size_t rank;
  if (!fzGraphBroadcast(d, in, n, idx, shape, &rank))
    return false;
  out[0] = fzGraphTensorType(d, rank, shape, elt);
  return out[0] != NULL;
}

/* binary: two ranked operands of one element type, broadcast. */
static bool shape_binary(FzGraphDiag *d, size_t n, FzType *const *in,
                         const FzGraphAttrs *a, FzType **out) {
  (void)a;
  static const size_t idx[2] = {0, 1};
  if (!fzGraphCheckCount(d, n, 2, 2) || !fzGraphCheckRanked(d, in, 0) ||
      !fzGraphCheckRanked(d, in, 1) || !fzGraphCheckSameElement(d, in, 0, 1))
    return false;
  return broadcast_result(d, in, 2, idx, fzShapedTypeGetElementType(in[0]),
                          out);
}
FZ_GRAPH_INFER_HOOK(shape_binary)

/* prelu(x, slope): slope broadcasts to x; the result has x's type. */
static bool shape_prelu(FzGraphDiag *d, size_t n, FzType *const *in,
                        const FzGraphAttrs *a, FzType **out) {
  (void)a;
  if (!fzGraphCheckCount(d, n, 2, 2) || !fzGraphCheckRanked(d, in, 0) ||
      !fzGraphCheckRanked(d, in, 1) || !fzGraphCheckSameElement(d, in, 0, 1))
    return false;
  if (!fzGraphCheckBroadcastsTo(d, in[1], 1, fzShapedTypeGetRank(in[0]),
                                fzShapedTypeGetShape(in[0]), "operand #0"))
    return false;
  out[0] = in[0];
  return true;
}
FZ_GRAPH_INFER_HOOK(shape_prelu)

/* cast: any element type to any other; the shape is kept. The result
 * type is the op's choice, so it is not inferred. */
static bool shape_cast(FzGraphDiag *d, size_t n, FzType *const *in,
                       const FzGraphAttrs *a, FzType **out) {
  (void)a;
  (void)out;
  return fzGraphCheckCount(d, n, 1, 1) && fzGraphCheckRanked(d, in, 0);
}
FZ_GRAPH_INFER_HOOK(shape_cast)

static bool check_cast(FzOp *op, FzGraphDiag *d) {
  FzType *src = fzValueGetType(fzOpGetOperand(op, 0));
  FzType *dst = fzValueGetType(fzOpGetResult(op, 0));
  char buf[128];
  if (!fzTensorDTypeIsSupported(fzShapedTypeGetElementType(dst)))
    return fzGraphError(d, "result #0 has unsupported element type in '%s'",
                        fzGraphTypeStr(dst, buf, sizeof buf));
  FzType *same = fzTensorTypeGet(d->ctx, fzShapedTypeGetRank(src),
                                 fzShapedTypeGetShape(src),
                                 fzShapedTypeGetElementType(dst), d->loc);
  return same && fzGraphCheckResult(d, 0, dst, same);
}

static const char *const predicates[] = {"eq", "ne", "lt", "le",
                                         "gt", "ge", NULL};
static const char *const compare_attrs[] = {"predicate", NULL};

/* compare: like a binary op, with an i1 result. */
static bool shape_compare(FzGraphDiag *d, size_t n, FzType *const *in,
                          const FzGraphAttrs *a, FzType **out) {
  (void)a;
  static const size_t idx[2] = {0, 1};
  if (!fzGraphCheckCount(d, n, 2, 2) || !fzGraphCheckRanked(d, in, 0) ||
      !fzGraphCheckRanked(d, in, 1) || !fzGraphCheckSameElement(d, in, 0, 1))
    return false;
  return broadcast_result(d, in, 2, idx, fzIntegerTypeGet(d->ctx, 1), out);
}
FZ_GRAPH_INFER_HOOK(shape_compare)

static bool check_compare(FzOp *op, FzGraphDiag *d) {
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  FzStringRef s;
  if (!fzGraphAttrsLookup(&a, "predicate"))
    return fzGraphError(d, "requires attribute 'predicate' (one of eq, ne, "
                           "lt, le, gt, ge)");
  if (!fzGraphGetString(d, &a, "predicate", "", &s))
    return false;
  for (size_t i = 0; predicates[i]; ++i)
    if (fzStringRefEqual(s, fzStringRefFromCString(predicates[i])))
      return true;
  return fzGraphError(d,
                      "attribute 'predicate' is \"%.*s\"; expected one "
                      "of eq, ne, lt, le, gt, ge",
                      (int)s.length, s.data);
}

/* select(cond, a, b): cond is i1; all three broadcast together. */
static bool shape_select(FzGraphDiag *d, size_t n, FzType *const *in,
                         const FzGraphAttrs *a, FzType **out) {
  (void)a;
  static const size_t idx[3] = {0, 1, 2};
  char buf[128];
  if (!fzGraphCheckCount(d, n, 3, 3) || !fzGraphCheckRanked(d, in, 0) ||
      !fzGraphCheckRanked(d, in, 1) || !fzGraphCheckRanked(d, in, 2) ||
      !fzGraphCheckSameElement(d, in, 1, 2))
    return false;
  if (fzShapedTypeGetElementType(in[0]) != fzIntegerTypeGet(d->ctx, 1))
    return fzGraphError(d,
                        "operand #0 (the condition) must be a tensor of "
                        "i1, but got '%s'",
                        fzGraphTypeStr(in[0], buf, sizeof buf));
  return broadcast_result(d, in, 3, idx, fzShapedTypeGetElementType(in[1]),
                          out);
}
FZ_GRAPH_INFER_HOOK(shape_select)

/*===--- Kernels referenced here (interp_elementwise.c) -----------------===*/

bool fzGraphKernelCast(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                       FzTensor **res);
bool fzGraphKernelCompare(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                          FzTensor **res);
bool fzGraphKernelSelect(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res);
bool fzGraphKernelPrelu(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                        FzTensor **res);

static const FzGraphKernel kernel_unary = {fzGraphKernelUnary};
static const FzGraphKernel kernel_binary = {fzGraphKernelBinary};
static const FzGraphKernel kernel_cast = {fzGraphKernelCast};
static const FzGraphKernel kernel_compare = {fzGraphKernelCompare};
static const FzGraphKernel kernel_select = {fzGraphKernelSelect};
static const FzGraphKernel kernel_prelu = {fzGraphKernelPrelu};

/*===--- Op definitions -------------------------------------------------===*/

#define DEFINE_UNARY(id, summ, ff, fi, pf, attrNames, fl)                      \
  FZ_GRAPH_PATTERNS_HOOK(id)                                                   \
  static const FzGraphOpInfo id##_info = {                                     \
      shape_unary, check_unary, fl, ff, fi, pf, NULL, NULL, 0};                \
  const FzOpDef fzGraphOp_##id = {                                             \
      .name = "graph." #id,                                                    \
      .summary = summ,                                                         \
      .traits = FZ_TRAIT_PURE | FZ_TRAIT_ELEMENTWISE |                         \
                FZ_TRAIT_SAME_OPERANDS_AND_RESULT_TYPE,                        \
      .numOperands = 1,                                                        \
      .numResults = 1,                                                         \
      .numRegions = 0,                                                         \
      .fusionKind = FZ_FUSION_ELEMENTWISE,                                     \
      .inherentAttrs = attrNames,                                              \
      .verify = fzGraphVerify,                                                 \
      .fold = fzGraphFoldElementwise,                                          \
      .inferResultTypes = shape_unary_hook,                                    \
      .print = fzGraphPrint,                                                   \
      .parse = fzGraphParse,                                                   \
      .getCanonicalizationPatterns = id##_patterns,                            \
      .interpret = &kernel_unary,                                              \
      .extra = &id##_info,                                                     \
  };
FZ_GRAPH_UNARY_OPS(DEFINE_UNARY)

#define DEFINE_BINARY(id, summ, ff, fi, tr, fl)                                \
  FZ_GRAPH_PATTERNS_HOOK(id)                                                   \
  static const FzGraphOpInfo id##_info = {shape_binary, NULL, fl, NULL, NULL,  \
                                          NULL,         ff,   fi, 0};          \
  const FzOpDef fzGraphOp_##id = {                                             \
      .name = "graph." #id,                                                    \
      .summary = summ,                                                         \
      .traits = FZ_TRAIT_PURE | FZ_TRAIT_ELEMENTWISE | (tr),                   \
      .numOperands = 2,                                                        \
      .numResults = 1,                                                         \
      .numRegions = 0,                                                         \
      .fusionKind = FZ_FUSION_BROADCAST,                                       \
      .verify = fzGraphVerify,                                                 \
      .fold = fzGraphFoldElementwise,                                          \
      .inferResultTypes = shape_binary_hook,                                   \
      .print = fzGraphPrint,                                                   \
      .parse = fzGraphParse,                                                   \
      .getCanonicalizationPatterns = id##_patterns,                            \
      .interpret = &kernel_binary,                                             \
      .extra = &id##_info,                                                     \
  };
FZ_GRAPH_BINARY_OPS(DEFINE_BINARY)

#define DEFINE_OP(id, summ, tr, nOps, kind, attrNames, shapeFn, checkFn, fl,   \
                  kern)                                                        \
  FZ_GRAPH_PATTERNS_HOOK(id)                                                   \
  static const FzGraphOpInfo id##_info = {shapeFn, checkFn, fl,   NULL, NULL,  \
                                          NULL,    NULL,    NULL, 0};          \
  const FzOpDef fzGraphOp_##id = {                                             \
      .name = "graph." #id,                                                    \
      .summary = summ,                                                         \
      .traits = FZ_TRAIT_PURE | (tr),                                          \
      .numOperands = nOps,                                                     \
      .numResults = 1,                                                         \
      .numRegions = 0,                                                         \
      .fusionKind = kind,                                                      \
      .inherentAttrs = attrNames,                                              \
      .verify = fzGraphVerify,                                                 \
      .fold = fzGraphFoldElementwise,                                          \
      .inferResultTypes = shapeFn##_hook,                                      \
      .print = fzGraphPrint,                                                   \
      .parse = fzGraphParse,                                                   \
      .getCanonicalizationPatterns = id##_patterns,                            \
      .interpret = &kern,                                                      \
      .extra = &id##_info,                                                     \
  };

DEFINE_OP(prelu, "x if x >= 0 else slope * x (slope broadcasts to x)",
          FZ_TRAIT_ELEMENTWISE, 2, FZ_FUSION_BROADCAST, NULL, shape_prelu, NULL,
          G_FLOAT_ONLY, kernel_prelu)
DEFINE_OP(cast,
          "converts the element type (floats round to nearest even; "
          "to integers: truncate toward zero, saturate)",
          FZ_TRAIT_ELEMENTWISE, 1, FZ_FUSION_ELEMENTWISE, NULL, shape_cast,
          check_cast, 0, kernel_cast)
DEFINE_OP(compare, "elementwise comparison giving i1 (eq ne lt le gt ge)",
          FZ_TRAIT_ELEMENTWISE, 2, FZ_FUSION_BROADCAST, compare_attrs,
          shape_compare, check_compare, G_PREDICATE, kernel_compare)
DEFINE_OP(select, "cond ? a : b, elementwise with broadcasting",
          FZ_TRAIT_ELEMENTWISE, 3, FZ_FUSION_BROADCAST, NULL, shape_select,
          NULL, 0, kernel_select)

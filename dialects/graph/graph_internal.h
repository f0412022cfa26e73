/* dialects/graph/graph_internal.h - what the graph dialect's files share:
 * the per-op info record hung off FzOpDef.extra, the diagnostic context
 * that shape functions report through, attribute accessors, broadcasting
 * helpers, and the interpreter's internal helpers.
 *
 * Every graph op's definition points `extra` at an FzGraphOpInfo. Its
 * shape function is the one source of truth for result types: the
 * verifier, the inferResultTypes hook, the custom parser (when `-> type`
 * is omitted) and the interpreter (on the concrete operand shapes) all
 * call it. A shape function that cannot infer a result (reshape,
 * broadcast, cast: the result type is the op's to choose) leaves it NULL
 * and the op's check function verifies the declared type instead.
 *
 * Private to dialects/graph (and transforms/fold_constants.c).
 */
#ifndef FZ_GRAPH_INTERNAL_H
#define FZ_GRAPH_INTERNAL_H

#include "fz/dialects.h"
#include "fz/graph.h"
#include "ir/util.h"

/*===--- The op list --------------------------------------------------===*
 * Every op of the dialect, once. Each file that defines op X defines the
 * global `const FzOpDef fzGraphOp_X`; dialect.c lists them all. The
 * unary and binary families carry their table columns (see
 * ops_elementwise.c); other files ignore those columns. */

/* X(id, summary, floatFn, intFn, paramsFn, attrNames, flags) */
#define FZ_GRAPH_UNARY_OPS(X)                                                  \
  X(neg, "negation: -x", g_neg, g_neg_i, NULL, NULL, 0)                        \
  X(abs, "absolute value", g_abs, g_abs_i, NULL, NULL, 0)                      \
  X(exp, "e^x", g_exp, NULL, NULL, NULL, G_FLOAT_ONLY)                         \
  X(log, "natural logarithm", g_log, NULL, NULL, NULL, G_FLOAT_ONLY)           \
  X(sqrt, "square root", g_sqrt, NULL, NULL, NULL, G_FLOAT_ONLY)               \
  X(rsqrt, "1 / sqrt(x)", g_rsqrt, NULL, NULL, NULL, G_FLOAT_ONLY)             \
  X(reciprocal, "1 / x", g_reciprocal, NULL, NULL, NULL, G_FLOAT_ONLY)         \
  X(tanh, "hyperbolic tangent", g_tanh, NULL, NULL, NULL, G_FLOAT_ONLY)        \
  X(sigmoid, "1 / (1 + e^-x)", g_sigmoid, NULL, NULL, NULL, G_FLOAT_ONLY)      \
  X(relu, "max(x, 0)", g_relu, g_relu_i, NULL, NULL, 0)                        \
  X(gelu, "x * Phi(x); approximate = \"tanh\" selects the tanh form", g_gelu,  \
    NULL, g_gelu_params, g_gelu_attrs, G_FLOAT_ONLY)                           \
  X(silu, "x * sigmoid(x)", g_silu, NULL, NULL, NULL, G_FLOAT_ONLY)            \
  X(erf, "the error function", g_erf, NULL, NULL, NULL, G_FLOAT_ONLY)          \
  X(floor, "round toward -infinity", g_floor, NULL, NULL, NULL, G_FLOAT_ONLY)  \
  X(ceil, "round toward +infinity", g_ceil, NULL, NULL, NULL, G_FLOAT_ONLY)    \
  X(round, "round to nearest, ties to even", g_round, NULL, NULL, NULL,        \
    G_FLOAT_ONLY)                                                              \
  X(sign, "-1, 0 or 1 (NaN stays NaN)", g_sign, g_sign_i, NULL, NULL, 0)       \
  X(sin, "sine", g_sin, NULL, NULL, NULL, G_FLOAT_ONLY)                        \
  X(cos, "cosine", g_cos, NULL, NULL, NULL, G_FLOAT_ONLY)                      \
  X(softplus, "log(1 + e^x)", g_softplus, NULL, NULL, NULL, G_FLOAT_ONLY)      \
  X(leaky_relu, "x if x >= 0 else alpha * x (alpha: 0.01)", g_leaky_relu,      \
    NULL, g_leaky_params, g_alpha_attrs, G_FLOAT_ONLY)                         \
  X(elu, "x if x > 0 else alpha * (e^x - 1) (alpha: 1.0)", g_elu, NULL,        \
    g_elu_params, g_alpha_attrs, G_FLOAT_ONLY)                                 \
  X(selu, "gamma * (x if x > 0 else alpha * (e^x - 1))", g_selu, NULL,         \
    g_selu_params, g_selu_attrs, G_FLOAT_ONLY)                                 \
  X(hard_sigmoid, "max(0, min(1, alpha * x + beta))", g_hard_sigmoid, NULL,    \
    g_hard_sigmoid_params, g_hard_sigmoid_attrs, G_FLOAT_ONLY)                 \
  X(clamp, "min(max(x, min), max)", g_clamp, g_clamp_i, g_clamp_params,        \
    g_clamp_attrs, 0)                                                          \
  X(not, "logical not of i1", NULL, g_not_i, NULL, NULL, G_BOOL_ONLY)

/* X(id, summary, floatFn, intFn, traits, flags) */
#define FZ_GRAPH_BINARY_OPS(X)                                                 \
  X(add, "a + b", g_add, g_add_i, FZ_TRAIT_COMMUTATIVE, 0)                     \
  X(sub, "a - b", g_sub, g_sub_i, 0, 0)                                        \
  X(mul, "a * b", g_mul, g_mul_i, FZ_TRAIT_COMMUTATIVE, 0)                     \
  X(div, "a / b (integers: truncated; division by zero is an error)", g_div,   \
    g_div_i, 0, 0)                                                             \
  X(rem, "a - b * trunc(a / b) (the sign of a, as C fmod)", g_rem, g_rem_i, 0, \
    0)                                                                         \
  X(pow, "a ^ b", g_pow, g_pow_i, 0, 0)                                        \
  X(max, "maximum (NaN propagates)", g_max, g_max_i, FZ_TRAIT_COMMUTATIVE, 0)  \
  X(min, "minimum (NaN propagates)", g_min, g_min_i, FZ_TRAIT_COMMUTATIVE, 0)  \
  X(and, "logical and of i1", NULL, g_and_i, FZ_TRAIT_COMMUTATIVE,             \
    G_BOOL_ONLY)                                                               \
  X(or, "logical or of i1", NULL, g_or_i, FZ_TRAIT_COMMUTATIVE, G_BOOL_ONLY)   \
  X(xor, "logical xor of i1", NULL, g_xor_i, FZ_TRAIT_COMMUTATIVE, G_BOOL_ONLY)

/* X(id) for every other op. */
#define FZ_GRAPH_OTHER_OPS(X)                                                  \
  X(constant)                                                                  \
  X(prelu) X(cast) X(compare) X(select) X(broadcast) X(reshape) X(transpose)   \
      X(slice) X(concat) X(gather) X(pad) X(reduce_sum) X(reduce_mean)         \
          X(reduce_max) X(reduce_min) X(reduce_prod) X(softmax) X(log_softmax) \
              X(layer_norm) X(rms_norm) X(batch_norm) X(matmul) X(conv2d)      \
                  X(max_pool) X(avg_pool) X(global_avg_pool)                   \
                      X(global_max_pool) X(weighted_sum) X(scatter_nd)       \
                          X(attention) X(quantize) X(dequantize)     \
                              X(sub_zero_point)

/*===--- Diagnostics of shape functions -------------------------------===*/

/* Where shape functions and verifiers report. With opName set, messages
 * read "'graph.add' op ..." as the verifier's do; with quiet, nothing is
 * reported (the printer's probes). */
typedef struct FzGraphDiag {
  FzContext *ctx;
  FzLoc *loc;
  const char *opName; /* may be NULL */
  bool quiet;
} FzGraphDiag;

/* Reports an error; returns false. */
bool fzGraphError(FzGraphDiag *d, const char *fmt, ...) FZ_PRINTF(2, 3);
/* A diagnostic context for op (messages prefixed with its name). */
FzGraphDiag fzGraphDiagForOp(FzOp *op);

/* Writes t as text into buf (truncated to cap, always terminated). */
const char *fzGraphTypeStr(const FzType *t, char *buf, size_t cap);
/* "4x?x8" for a shape; "scalar" for rank 0. */
const char *fzGraphShapeStr(size_t rank, const int64_t *shape, char *buf,
                            size_t cap);

/*===--- Attributes ----------------------------------------------------===*/

/* Attributes are looked up first among properties, then among the
 * discardable attributes (the custom parser hands its dictionary as
 * `attrs` before fzOpCreate has split them). Either may be NULL. */
typedef struct FzGraphAttrs {
  const FzAttr *props;
  const FzAttr *attrs;
} FzGraphAttrs;

FzGraphAttrs fzGraphAttrsOfOp(const FzOp *op);
FzAttr *fzGraphAttrsLookup(const FzGraphAttrs *a, const char *name);

/* Typed accessors: an absent attribute gives dflt; one of the wrong kind
 * is an error naming it. */
bool fzGraphGetInt(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                   int64_t dflt, int64_t *out);
bool fzGraphGetFloat(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                     double dflt, double *out);
bool fzGraphGetBool(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                    bool dflt, bool *out);
bool fzGraphGetString(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                      const char *dflt, FzStringRef *out);
/* A dense i64 array (array<i64: ...>) of at most maxN values into vals;
 * *n = 0 and *present = false when absent. */
bool fzGraphGetI64Array(FzGraphDiag *d, const FzGraphAttrs *a, const char *name,
                        size_t maxN, int64_t *vals, size_t *n, bool *present);

/*===--- Per-op information (FzOpDef.extra) ---------------------------===*/

/* Infers the result types from the operand types (out has room for the
 * op's results; an entry left NULL means "not inferable"). Reports and
 * returns false when the operands or attributes are invalid. Must check
 * the operand count itself (the parser calls it before the verifier). */
typedef bool (*FzGraphShapeFn)(FzGraphDiag *d, size_t n, FzType *const *in,
                               const FzGraphAttrs *a, FzType **out);
/* Op-specific checks beyond the shape function (declared result types
 * that cannot be inferred, dtype rules). */
typedef bool (*FzGraphCheckFn)(FzOp *op, FzGraphDiag *d);

typedef double (*FzGraphUnaryF)(double x, const double *params);
typedef int64_t (*FzGraphUnaryI)(int64_t x, const double *params);
/* Reads and checks a unary op's attributes into params[0..3]. */
typedef bool (*FzGraphParamsFn)(FzGraphDiag *d, const FzGraphAttrs *a,
                                double *params);
typedef double (*FzGraphBinaryF)(double a, double b);
/* False for an integer division by zero. */
typedef bool (*FzGraphBinaryI)(int64_t a, int64_t b, int64_t *out);

enum {
  G_FLOAT_ONLY = 1u << 0, /* element type must be a float */
  G_BOOL_ONLY = 1u << 1,  /* element type must be i1 */
  G_PREDICATE = 1u << 2,  /* custom form starts with a predicate keyword */
};

typedef struct FzGraphOpInfo {
  FzGraphShapeFn shape;
  FzGraphCheckFn check; /* may be NULL */
  unsigned flags;       /* G_* */
  FzGraphUnaryF unaryF;
  FzGraphUnaryI unaryI;
  FzGraphParamsFn params;
  FzGraphBinaryF binaryF;
  FzGraphBinaryI binaryI;
  int kind; /* family-specific selector (reduction kind, pool kind...) */
} FzGraphOpInfo;

const FzGraphOpInfo *fzGraphOpInfo(const FzOpDef *def);

/* The hooks shared by every graph op (asm.c, verify.c). */
bool fzGraphVerify(FzOp *op);
void fzGraphPrint(FzOp *op, FzAsmPrinter *p);
bool fzGraphParse(FzAsmParser *p, FzOpState *st);

/* inferResultTypes hooks are per shape function, since the hook does not
 * receive the op's definition: FZ_GRAPH_INFER_HOOK(fn) defines
 * `fn##_hook` calling shape function fn. */
#define FZ_GRAPH_INFER_HOOK(fn)                                                \
  static bool fn##_hook(FzContext *ctx, FzLoc *loc, size_t n,                  \
                        FzType *const *in, FzAttr *attrs, FzAttr *props,       \
                        FzType **out) {                                        \
    FzGraphDiag d = {ctx, loc, NULL, false};                                   \
    FzGraphAttrs a = {props, attrs};                                           \
    if (!fn(&d, n, in, &a, out))                                               \
      return false;                                                            \
    return fzGraphRequireInferred(&d, out);                                    \
  }
/* Errors when out[0] is NULL (a result the hook cannot infer). */
bool fzGraphRequireInferred(FzGraphDiag *d, FzType **out);

/*===--- Shapes and broadcasting (broadcast.c) ------------------------===*/

/* Checks that operand i is a ranked tensor of rank <= FZ_GRAPH_MAX_RANK
 * (and of a supported element type). */
bool fzGraphCheckRanked(FzGraphDiag *d, FzType *const *in, size_t i);
/* Checks that operands i and j have the same element type. */
bool fzGraphCheckSameElement(FzGraphDiag *d, FzType *const *in, size_t i,
                             size_t j);
/* Checks the operand count (exact, or a range when maxN > minN). */
bool fzGraphCheckCount(FzGraphDiag *d, size_t n, size_t minN, size_t maxN);
/* Broadcasts the shapes of the n operands listed in idx (numpy rules,
 * '?' allowed) into shape/rank. Errors name both operands and dims. */
bool fzGraphBroadcast(FzGraphDiag *d, FzType *const *in, size_t n,
                      const size_t *idx, int64_t *shape, size_t *rank);
/* Checks that operand `from` broadcasts to the shape `to` (rank and
 * every dim: 1, '?', or equal), as for graph.broadcast and prelu's
 * slope. `what` names the target in messages. */
bool fzGraphCheckBroadcastsTo(FzGraphDiag *d, const FzType *from,
                              size_t fromIdx, size_t rank, const int64_t *shape,
                              const char *what);
/* tensor<shape x elt>; NULL after an error. */
FzType *fzGraphTensorType(FzGraphDiag *d, size_t rank, const int64_t *shape,
                          FzType *elt);
/* Checks a declared result type against an inferred one: ranked, same
 * rank, same element type, static dims equal. */
bool fzGraphCheckResult(FzGraphDiag *d, size_t i, FzType *declared,
                        FzType *inferred);
/* Normalizes an axis in [-rank, rank) to [0, rank); reports otherwise.
 * `what` names the attribute. */
bool fzGraphNormAxis(FzGraphDiag *d, const char *what, int64_t axis,
                     size_t rank, size_t *out);
/* The product of dims, or -1 when one is dynamic. */
int64_t fzGraphNumElements(size_t rank, const int64_t *shape);

/*===--- Interpreter internals (interp.c) -----------------------------===*/

struct FzGraphInterp {
  FzContext *ctx;
  int64_t maxElements;
  unsigned maxCallDepth;
  unsigned depth;
  bool quiet; /* report nothing; keep the first message in capture */
  char *capture;
  size_t captureCap;
};

/* Errors of the interpreter: reported at op, or captured when quiet. */
bool fzGraphInterpError(FzGraphInterp *in, FzOp *op, const char *fmt, ...)
    FZ_PRINTF(3, 4);
/* A diagnostic context for op that follows the interpreter's quietness. */
FzGraphDiag fzGraphInterpDiag(FzGraphInterp *in, FzOp *op);

void fzGraphInterpInit(FzGraphInterp *in, FzContext *ctx,
                       const FzInterpOptions *options);

/* Creates every result of op with the shapes its shape function gives
 * on the operands' concrete types, refined by the declared result types;
 * an unresolved dynamic dim is an error. */
bool fzGraphInterpInferResults(FzGraphInterp *in, FzOp *op,
                               FzTensor *const *operands, FzTensor **results);
/* The declared result type of op with its '?' dims resolved from shape
 * (rank entries; FZ_DYNAMIC entries stay unresolved and are an error). */
FzTensor *fzGraphInterpCreateResult(FzGraphInterp *in, FzOp *op, size_t i,
                                    size_t rank, const int64_t *shape);

/* Whole-tensor conversions for kernels (allocated through the context;
 * NULL after reporting an out-of-memory error). */
double *fzGraphLoadF64(const FzTensor *t);
int64_t *fzGraphLoadI64(const FzTensor *t);
/* Stores v[0..numElements) into t, rounding to its dtype. */
void fzGraphStoreF64(FzTensor *t, const double *v);
void fzGraphStoreI64(FzTensor *t, const int64_t *v);
/* True when the element type is an integer (i1 included). */
bool fzGraphIsIntType(const FzType *t);

/* Row-major strides of shape into strides (elements). */
void fzGraphStrides(size_t rank, const int64_t *shape, int64_t *strides);
/* Strides of t in the index space of an output of rank outRank that t
 * broadcasts to (0 along broadcast dims). */
void fzGraphBroadcastStrides(const FzTensor *t, size_t outRank,
                             const int64_t *outShape, int64_t *strides);

/* Walks the elements of a result in row-major order while tracking the
 * offset of the matching element in each of up to 4 broadcast inputs. */
typedef struct FzGraphBcastIter {
  size_t rank, numInputs;
  int64_t shape[FZ_GRAPH_MAX_RANK];
  int64_t idx[FZ_GRAPH_MAX_RANK];
  int64_t strides[4][FZ_GRAPH_MAX_RANK];
  int64_t off[4]; /* current offsets into each input */
} FzGraphBcastIter;
void fzGraphBcastInit(FzGraphBcastIter *it, const FzTensor *out, size_t n,
                      const FzTensor *const *inputs);
/* Advances to the next result element (row-major). */
static inline void fzGraphBcastNext(FzGraphBcastIter *it) {
  for (size_t d = it->rank; d-- > 0;) {
    for (size_t k = 0; k < it->numInputs; ++k)
      it->off[k] += it->strides[k][d];
    if (++it->idx[d] < it->shape[d])
      return;
    for (size_t k = 0; k < it->numInputs; ++k)
      it->off[k] -= it->strides[k][d] * it->shape[d];
    it->idx[d] = 0;
  }
}

/* Shared kernels (interp_*.c), referenced from the op tables. */
bool fzGraphKernelUnary(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                        FzTensor **res);
bool fzGraphKernelBinary(FzGraphInterp *in, FzOp *op, FzTensor *const *ops,
                         FzTensor **res);

/* Folding (fold.c). */
bool fzGraphFoldElementwise(FzOp *op, FzAttr *const *constOperands,
                            FzFoldResult *results);

/* Adds the canonicalization patterns rooted at opName (patterns.c). The
 * per-op getCanonicalizationPatterns hooks come from
 * FZ_GRAPH_PATTERNS_HOOK(id), which defines `id##_patterns`. */
void fzGraphAddPatternsFor(FzPatternSet *set, const char *opName);
#define FZ_GRAPH_PATTERNS_HOOK(id)                                             \
  static void id##_patterns(FzPatternSet *set, FzContext *ctx) {               \
    (void)ctx;                                                                 \
    fzGraphAddPatternsFor(set, "graph." #id);                                  \
  }

/* The op definition of a one-result, pure graph op folded by
 * fzGraphFoldReduceOp (reductions, normalizations, nn ops): shared by
 * ops_reduce.c and ops_nn.c. k is the op's kind in FzGraphOpInfo. */
bool fzGraphFoldReduceOp(FzOp *op, FzAttr *const *constOperands,
                         FzFoldResult *results);
#define FZ_GRAPH_DEFINE_FOLDING_OP(id, summ, nOps, fkind, attrNames,          \
                                   shapeFn, fl, kern, k)                     \
  FZ_GRAPH_PATTERNS_HOOK(id)                                                   \
  static const FzGraphOpInfo id##_info = {shapeFn, NULL, fl,   NULL, NULL,     \
                                          NULL,    NULL, NULL, k};             \
  const FzOpDef fzGraphOp_##id = {                                             \
      .name = "graph." #id,                                                    \
      .summary = summ,                                                         \
      .traits = FZ_TRAIT_PURE,                                                 \
      .numOperands = nOps,                                                     \
      .numResults = 1,                                                         \
      .numRegions = 0,                                                         \
      .fusionKind = fkind,                                                     \
      .inherentAttrs = attrNames,                                              \
      .verify = fzGraphVerify,                                                 \
      .fold = fzGraphFoldReduceOp,                                             \
      .inferResultTypes = shapeFn##_hook,                                      \
      .print = fzGraphPrint,                                                   \
      .parse = fzGraphParse,                                                   \
      .getCanonicalizationPatterns = id##_patterns,                            \
      .interpret = &kern,                                                      \
      .extra = &id##_info,                                                     \
  };

#endif /* FZ_GRAPH_INTERNAL_H */

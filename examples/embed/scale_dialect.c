/* scale_dialect.c - the "emb" dialect and the emb-expand-scale pass.
 *
 *   %y = emb.scale %x by 2.500000e+00 : tensor<2x4xf32>
 *   %y = "emb.scale"(%x) <{factor = 2.500000e+00 : f64}>
 *            : (tensor<2x4xf32>) -> tensor<2x4xf32>
 *
 * y = x * factor, elementwise, on a tensor of floats. The op definition
 * is a static table: traits (pure, elementwise, same operand and result
 * type), the fusion kind, the inherent attribute `factor`, and hooks:
 *   verify    factor is a float, the operand a tensor of floats;
 *   fold      scale by 1.0 is its operand;
 *   pattern   scale(scale(x, a), b) -> scale(x, a*b)   (canonicalize);
 *   print / parse  the custom form above.
 * The pass emb-expand-scale (on func.func) replaces each emb.scale by
 * graph.mul with a rank-0 graph.constant, through a pattern set and
 * fuse's greedy driver; a statistic counts the expansions.
 *
 * Ownership: every table here is static and outlives any context; the
 * pass's pattern set is per pass instance (initialize/destroy hooks).
 */
#include <stdio.h>
#include <string.h>

#include "scale_dialect.h"

/*---- the op -------------------------------------------------------------*/

static const char *const kScaleInherent[] = {"factor", NULL};

static FzAttr *scale_factor(const FzOp *op) {
  return fzOpGetInherentAttr(op, FZ_STR("factor"));
}

/* The counts (1 operand, 1 result) and the traits (same operand and
 * result type) are checked by fuse before this hook runs. */
static bool scale_verify(FzOp *op) {
  FzAttr *factor = scale_factor(op);
  if (!factor || fzAttrGetKind(factor) != FZ_ATTR_FLOAT)
    return fzOpEmitError(op, "requires a float 'factor' attribute");
  FzType *t = fzValueGetType(fzOpGetOperand(op, 0));
  if (fzTypeGetKind(t) != FZ_TYPE_TENSOR ||
      !fzTypeIsFloat(fzShapedTypeGetElementType(t)))
    return fzOpEmitError(op, "operand must be a tensor of floats");
  return true;
}

/* scale(x, 1.0) is x. constOperands is unused: nothing is computed. */
static bool scale_fold(FzOp *op, FzAttr *const *constOperands,
                       FzFoldResult *results) {
  (void)constOperands;
  FzAttr *factor = scale_factor(op);
  if (!factor || fzAttrGetKind(factor) != FZ_ATTR_FLOAT ||
      fzFloatAttrGetValue(factor) != 1.0)
    return false;
  results[0].value = fzOpGetOperand(op, 0);
  return true;
}

/* scale(scale(x, a), b) -> scale(x, a*b): the outer op is modified in
 * place (operand and factor) through the rewriter; the inner one is
 * erased by the driver once it has no use left. */
static bool merge_scales(FzOp *op, FzRewriter *rw, void *userData) {
  (void)userData;
  FzOp *inner = fzValueGetDefiningOp(fzOpGetOperand(op, 0));
  if (!inner || fzOpGetName(inner) != fzOpGetName(op))
    return fzRewriterNotifyMatchFailure(rw, op, "operand is not a scale");
  FzAttr *a = scale_factor(inner), *b = scale_factor(op);
  if (!a || !b)
    return fzRewriterNotifyMatchFailure(rw, op, "missing factor");
  FzContext *ctx = fzOpGetContext(op);
  FzAttr *ab = fzFloatAttrGet(ctx, fzF64TypeGet(ctx),
                              fzFloatAttrGetValue(a) * fzFloatAttrGetValue(b));
  if (!ab)
    return false;
  fzRewriterStartModify(rw, op);
  if (!fzOpSetProp(op, FZ_STR("factor"), ab)) {
    fzRewriterCancelModify(rw, op);
    return false;
  }
  fzOpSetOperand(op, 0, fzOpGetOperand(inner, 0));
  fzRewriterFinalizeModify(rw, op);
  return true;
}

static void scale_canonicalization_patterns(FzPatternSet *set,
                                            FzContext *ctx) {
  (void)ctx;
  FzPattern p = {"emb.scale", 1, merge_scales, NULL, "emb-merge-scales"};
  (void)fzPatternSetAdd(set, &p); /* a failure is recorded in the set */
}

/* Collects printed text into a fixed buffer (truncating). */
typedef struct SmallBuf {
  char data[128];
  size_t len;
} SmallBuf;

static void small_buf_put(FzStringRef chunk, void *userData) {
  SmallBuf *b = userData;
  size_t room = sizeof b->data - 1 - b->len;
  size_t n = chunk.length < room ? chunk.length : room;
  memcpy(b->data + b->len, chunk.data, n);
  b->len += n;
  b->data[b->len] = '\0';
}

/* Custom form, after "emb.scale": " %x by FACTOR {attrs}? : TYPE". The
 * factor is printed as fuse prints a float attribute (exact: it reads
 * back to the same bits) without its " : f64" suffix. */
static void scale_print(FzOp *op, FzAsmPrinter *p) {
  fzAsmPrint(p, " ");
  fzAsmPrintOperand(p, fzOpGetOperand(op, 0));
  fzAsmPrint(p, " by ");
  FzAttr *factor = scale_factor(op);
  if (!factor) { /* an unverified op may be printed: never crash */
    fzAsmPrint(p, "<<no factor>>");
    return;
  }
  SmallBuf b = {{0}, 0};
  fzAttrPrint(factor, small_buf_put, &b);
  char *colon = strstr(b.data, " : ");
  if (colon)
    *colon = '\0';
  fzAsmPrint(p, b.data);
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, false);
  fzAsmPrint(p, " : ");
  fzAsmPrintType(p, fzValueGetType(fzOpGetResult(op, 0)));
}

static bool scale_parse(FzAsmParser *p, FzOpState *st) {
  FzContext *ctx = fzAsmParserGetContext(p);
  FzUnresolvedOperand x;
  FzAttr *factor = NULL, *attrs = NULL;
  FzType *type = NULL;
  if (!fzAsmParseOperand(p, &x) || !fzAsmParseKeyword(p, "by"))
    return false;
  FzLoc *factorLoc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseAttr(p, fzF64TypeGet(ctx), &factor))
    return false;
  if (fzAttrGetKind(factor) != FZ_ATTR_FLOAT)
    return fzAsmEmitErrorAt(p, factorLoc,
                            "expected a float scale factor after 'by'");
  if (!fzAsmParseOptionalAttrDict(p, &attrs) ||
      !fzAsmParseColonType(p, &type) ||
      !fzAsmResolveOperand(p, &x, type, st))
    return false;
  fzOpStateAddProp(st, FZ_STR("factor"), factor);
  fzOpStateAddAttrDict(st, attrs);
  fzOpStateAddResults(st, 1, &type);
  return true;
}

static const FzOpDef kScaleOp = {
    .name = "emb.scale",
    .summary = "multiplies a tensor of floats by a constant factor",
    .traits = FZ_TRAIT_PURE | FZ_TRAIT_ELEMENTWISE |
              FZ_TRAIT_SAME_OPERANDS_AND_RESULT_TYPE,
    .numOperands = 1,
    .numResults = 1,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_ELEMENTWISE,
    .inherentAttrs = kScaleInherent,
    .verify = scale_verify,
    .fold = scale_fold,
    .print = scale_print,
    .parse = scale_parse,
    .getCanonicalizationPatterns = scale_canonicalization_patterns,
};

static const FzOpDef *const kEmbOps[] = {&kScaleOp};

static const FzDialectDef kEmbDialect = {
    .name = "emb",
    .summary = "the embedding example's dialect",
    .ops = kEmbOps,
    .numOps = sizeof kEmbOps / sizeof kEmbOps[0],
    .materializeConstant = NULL, /* emb folds never make constants */
};

/*---- the pass -----------------------------------------------------------*/

/* emb.scale(x, f) -> graph.mul(x, graph.constant f : tensor<T>). The
 * pattern's userData is the pass instance, for its statistic. */
static bool expand_scale(FzOp *op, FzRewriter *rw, void *userData) {
  FzContext *ctx = fzOpGetContext(op);
  FzValue *x = fzOpGetOperand(op, 0);
  FzType *type = fzValueGetType(x);
  FzType *elt = fzShapedTypeGetElementType(type);
  /* The factor as a rank-0 tensor of the element type: FzTensor rounds
   * it to that type and packs it as a dense attribute wants. */
  FzTensor *t = fzTensorCreate(ctx, elt, 0, NULL);
  if (!t)
    return false;
  fzTensorSetF64(t, 0, fzFloatAttrGetValue(scale_factor(op)));
  FzAttr *dense = fzTensorToDenseAttr(t);
  FzType *scalarType = fzTensorGetType(t);
  fzTensorDestroy(t);
  if (!dense || !scalarType)
    return false;
  FzValue *c = fzRewriterMaterializeConstant(rw, fzGraphDialectGet(), dense,
                                             scalarType, fzOpGetLoc(op));
  if (!c)
    return false;
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("graph.mul"), fzOpGetLoc(op));
  FzValue *operands[2] = {x, c};
  fzOpStateAddOperands(&st, 2, operands);
  fzOpStateAddResults(&st, 1, &type);
  FzOp *mul = fzRewriterCreateOp(rw, &st);
  if (!mul)
    return false;
  fzRewriterReplaceOpWithOp(rw, op, mul);
  fzPassAddStatistic(userData, 0, 1);
  return true;
}

/* Per instance: the pattern set, built once before the first run. */
static bool expand_initialize(FzPass *pass, FzContext *ctx) {
  FzPatternSet *set = fzPatternSetCreate(ctx);
  if (!set)
    return false;
  FzPattern p = {"emb.scale", 1, expand_scale, pass, "emb-expand-scale"};
  if (!fzPatternSetAdd(set, &p)) {
    fzPatternSetDestroy(set);
    return false;
  }
  fzPassSetState(pass, set);
  return true;
}

static bool expand_run(FzPass *pass, FzOp *func) {
  FzGreedyConfig config;
  fzGreedyConfigInit(&config);
  config.fold = false; /* expand only; canonicalize does the folding */
  return fzApplyPatternsGreedily(func, fzPassGetState(pass), &config, NULL);
}

static void expand_destroy(FzPass *pass) {
  fzPatternSetDestroy(fzPassGetState(pass)); /* NULL is fine */
}

static const FzPassStatisticDef kExpandStats[] = {
    {"num-expanded", "Number of emb.scale ops expanded into graph ops"},
};

static const FzPassDef kExpandPass = {
    .argument = "emb-expand-scale",
    .displayName = "EmbExpandScale",
    .summary = "Rewrite emb.scale into graph.mul by a graph.constant",
    .anchor = "func.func",
    .statistics = kExpandStats,
    .numStatistics = 1,
    .initialize = expand_initialize,
    .run = expand_run,
    .destroy = expand_destroy,
};

bool embRegister(FzContext *ctx) {
  return fzContextRegisterDialect(ctx, &kEmbDialect) &&
         fzContextRegisterPass(ctx, &kExpandPass);
}

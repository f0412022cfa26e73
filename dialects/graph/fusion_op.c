/* dialects/graph/fusion_op.c - graph.fusion (a fused group as a region)
 * and graph.yield (its terminator), with their verifiers, custom
 * assembly and interpreter kernel; and the graph dialect's describer for
 * the fusion pass.
 *
 * Invariants checked by the verifier: the region has exactly one block;
 * its arguments match the operands one to one in type; it ends with
 * graph.yield, whose operand types are the op's result types. The op is
 * isolated from above (the generic verifier checks that no value from
 * outside is used inside), so a group can be read, diffed, interpreted
 * and lowered on its own.
 *
 * The describer knows the graph ops by definition (pointers into the
 * dialect's table); it is the one place where the fusion pass learns
 * which axes a reduction reduces and what an op costs.
 */
#include "dialects/graph/fusion_op.h"

#include <string.h>

#include "dialects/graph/graph_internal.h"

/*===--- graph.fusion ---------------------------------------------------===*/

FzBlock *fzGraphFusionGetBody(const FzOp *fusion) {
  if (fzOpGetNumRegions(fusion) != 1)
    return NULL;
  return fzRegionGetFirstBlock(fzOpGetRegion(fusion, 0));
}

static bool fusion_verify(FzOp *op) {
  FzRegion *region = fzOpGetRegion(op, 0);
  FzBlock *body = fzRegionGetFirstBlock(region);
  if (!body)
    return fzOpEmitError(op, "expects a body (one block)");
  size_t n = fzOpGetNumOperands(op), r = fzOpGetNumResults(op);
  if (fzBlockGetNumArguments(body) != n)
    return fzOpEmitError(op, "has %zu operands but its body has %zu "
                             "arguments", n, fzBlockGetNumArguments(body));
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(op, i);
    if (v && fzValueGetType(v) != fzValueGetType(fzBlockGetArgument(body, i)))
      return fzOpEmitError(op, "type of body argument #%zu does not match "
                               "operand #%zu", i, i);
  }
  FzOp *term = fzBlockGetLastOp(body);
  if (!term || fzOpGetDef(term) != &fzGraphYieldOpDef)
    return fzOpEmitError(op, "body must end with graph.yield");
  if (fzOpGetNumOperands(term) != r)
    return fzOpEmitError(op, "yields %zu values but has %zu results",
                         fzOpGetNumOperands(term), r);
  for (size_t i = 0; i < r; ++i) {
    FzValue *v = fzOpGetOperand(term, i);
    if (v && fzValueGetType(v) != fzValueGetType(fzOpGetResult(op, i)))
      return fzOpEmitError(op, "type of yielded value #%zu does not match "
                               "result #%zu", i, i);
  }
  return true;
}

static void print_type_list(FzAsmPrinter *p, size_t n, FzValue *(*get)(
                                const FzOp *, size_t), const FzOp *op,
                            bool parens) {
  if (parens)
    fzAsmPrint(p, "(");
  for (size_t i = 0; i < n; ++i) {
    if (i)
      fzAsmPrint(p, ", ");
    FzValue *v = get(op, i);
    fzAsmPrintType(p, v ? fzValueGetType(v) : NULL);
  }
  if (parens)
    fzAsmPrint(p, ")");
}

/* (%a, %b) {attrs} : (T, T) -> (R, R) { ^bb0(...): ... } */
static void fusion_print(FzOp *op, FzAsmPrinter *p) {
  size_t r = fzOpGetNumResults(op);
  fzAsmPrint(p, "(");
  fzAsmPrintOperands(p, op);
  fzAsmPrint(p, ")");
  fzAsmPrintOptionalAttrDict(p, fzOpGetAttrDict(op), NULL, false);
  fzAsmPrint(p, " : ");
  print_type_list(p, fzOpGetNumOperands(op), fzOpGetOperand, op, true);
  fzAsmPrint(p, " -> ");
  /* One plain result prints bare, as in a function type. */
  bool parens = r != 1 || fzTypeGetKind(fzValueGetType(
                              fzOpGetResult(op, 0))) == FZ_TYPE_FUNCTION;
  print_type_list(p, r, fzOpGetResult, op, parens);
  fzAsmPrintRegion(p, fzOpGetRegion(op, 0), true);
}

static bool fusion_parse(FzAsmParser *p, FzOpState *st) {
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  FzUnresolvedOperand *ops;
  size_t n;
  if (!fzAsmParsePunct(p, "(") || !fzAsmParseOperandList(p, &ops, &n) ||
      !fzAsmParsePunct(p, ")"))
    return false;
  FzContext *ctx = fzAsmParserGetContext(p);
  FzUnresolvedOperand small[8] = {{{NULL, 0}, 0, NULL}};
  FzUnresolvedOperand *copy = n <= 8 ? small : fzMalloc(ctx, n * sizeof *copy);
  if (!copy)
    return false;
  if (n)
    memcpy(copy, ops, n * sizeof *ops);
  FzAttr *attrs = NULL;
  FzType *ft = NULL;
  FzLoc *typeLoc = NULL;
  bool ok = fzAsmParseOptionalAttrDict(p, &attrs) && fzAsmParsePunct(p, ":");
  if (ok) {
    typeLoc = fzAsmParserGetCurrentLoc(p);
    ok = fzAsmParseType(p, &ft);
  }
  if (ok && fzTypeGetKind(ft) != FZ_TYPE_FUNCTION)
    ok = fzAsmEmitErrorAt(p, typeLoc, "expected a function type "
                                      "'(inputs) -> results'");
  size_t nIn = ok ? fzFunctionTypeGetNumInputs(ft) : 0;
  FzType *smallT[8];
  FzType **ins = nIn <= 8 ? smallT : fzMalloc(ctx, nIn * sizeof *ins);
  if (ok && !ins)
    ok = false;
  for (size_t i = 0; ok && i < nIn; ++i)
    ins[i] = fzFunctionTypeGetInput(ft, i);
  if (ok) {
    fzOpStateAddAttrDict(st, attrs);
    ok = fzAsmResolveOperands(p, copy, n, ins, nIn, loc, st);
  }
  for (size_t i = 0; ok && i < fzFunctionTypeGetNumResults(ft); ++i) {
    FzType *t = fzFunctionTypeGetResult(ft, i);
    fzOpStateAddResults(st, 1, &t);
  }
  if (ok) {
    FzRegion *region = fzOpStateAddRegion(st);
    ok = region && fzAsmParseRegion(p, region, 0, NULL, false);
  }
  if (ins && ins != smallT)
    fzFree(ctx, ins);
  if (copy != small)
    fzFree(ctx, copy);
  return ok;
}

/* Interprets the body with its arguments bound to the operands. */
static bool fusion_kernel(FzGraphInterp *interp, FzOp *op,
                          FzTensor *const *operands, FzTensor **results) {
  FzBlock *body = fzGraphFusionGetBody(op);
  if (!body)
    return fzOpEmitError(op, "has no body to interpret");
  return fzGraphInterpRunBlock(interp, body, operands, results);
}

static const FzGraphKernel fusion_kernel_def = {fusion_kernel};

const FzOpDef fzGraphFusionOpDef = {
    .name = "graph.fusion",
    .summary = "a fused group of graph ops: one future kernel",
    .traits = FZ_TRAIT_PURE | FZ_TRAIT_ISOLATED_FROM_ABOVE |
              FZ_TRAIT_SINGLE_BLOCK,
    .numOperands = FZ_VARIADIC,
    .numResults = FZ_VARIADIC,
    .numRegions = 1,
    .fusionKind = FZ_FUSION_OPAQUE,
    .verify = fusion_verify,
    .print = fusion_print,
    .parse = fusion_parse,
    .interpret = &fusion_kernel_def,
};

FzOp *fzGraphFusionCreate(FzBuilder *b, FzLoc *loc, size_t numInputs,
                          FzValue *const *inputs, FzLoc *const *argLocs,
                          size_t numResults, FzType *const *resultTypes) {
  FzContext *ctx = b->ctx;
  FzType *small[16] = {NULL};
  FzType **types =
      numInputs <= 16 ? small : fzMalloc(ctx, numInputs * sizeof *types);
  if (!types)
    return NULL;
  for (size_t i = 0; i < numInputs; ++i)
    types[i] = fzValueGetType(inputs[i]);
  FzBlock *body = fzBlockCreate(ctx, numInputs, types, argLocs);
  if (types != small)
    fzFree(ctx, types);
  if (!body)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("graph.fusion"), loc);
  fzOpStateAddOperands(&st, numInputs, inputs);
  fzOpStateAddResults(&st, numResults, resultTypes);
  FzRegion *region = fzOpStateAddRegion(&st);
  if (!region) {
    fzBlockDestroy(body);
    fzOpStateDispose(&st);
    return NULL;
  }
  fzRegionAppendBlock(region, body);
  return fzBuilderCreate(b, &st);
}

/*===--- graph.yield ----------------------------------------------------===*/

static bool yield_verify(FzOp *op) {
  FzOp *parent = fzOpGetParentOp(op);
  if (!parent || fzOpGetDef(parent) != &fzGraphFusionOpDef)
    return fzOpEmitError(op, "expects parent op 'graph.fusion'");
  return true;
}

static void yield_print(FzOp *op, FzAsmPrinter *p) {
  size_t n = fzOpGetNumOperands(op);
  if (n == 0)
    return;
  fzAsmPrint(p, " ");
  fzAsmPrintOperands(p, op);
  fzAsmPrint(p, " : ");
  print_type_list(p, n, fzOpGetOperand, op, false);
}

/* yield ::= (operands `:` types)? */
static bool yield_parse(FzAsmParser *p, FzOpState *st) {
  FzUnresolvedOperand *ops;
  size_t n;
  FzLoc *loc = fzAsmParserGetCurrentLoc(p);
  if (!fzAsmParseOperandList(p, &ops, &n))
    return false;
  if (n == 0)
    return true;
  FzContext *ctx = fzAsmParserGetContext(p);
  FzUnresolvedOperand small[8] = {{{NULL, 0}, 0, NULL}};
  FzUnresolvedOperand *copy = n <= 8 ? small : fzMalloc(ctx, n * sizeof *copy);
  if (!copy)
    return false;
  memcpy(copy, ops, n * sizeof *ops);
  FzType **types;
  size_t nt;
  bool ok = fzAsmParsePunct(p, ":") && fzAsmParseTypeList(p, &types, &nt) &&
            fzAsmResolveOperands(p, copy, n, types, nt, loc, st);
  if (copy != small)
    fzFree(ctx, copy);
  return ok;
}

const FzOpDef fzGraphYieldOpDef = {
    .name = "graph.yield",
    .summary = "returns the values of a graph.fusion body",
    .traits = FZ_TRAIT_TERMINATOR | FZ_TRAIT_RETURN_LIKE | FZ_TRAIT_PURE,
    .numOperands = FZ_VARIADIC,
    .numResults = 0,
    .numRegions = 0,
    .fusionKind = FZ_FUSION_OPAQUE,
    .verify = yield_verify,
    .print = yield_print,
    .parse = yield_parse,
};

FzOp *fzGraphYieldCreate(FzContext *ctx, FzBlock *block, FzLoc *loc, size_t n,
                         FzValue *const *values) {
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("graph.yield"), loc);
  fzOpStateAddOperands(&st, n, values);
  FzBuilder b;
  fzBuilderInit(&b, ctx);
  fzBuilderSetInsertionPointToEnd(&b, block);
  return fzBuilderCreate(&b, &st);
}

/*===--- The describer --------------------------------------------------===*/

#define DECLARE_FAMILY(id, ...) extern const FzOpDef fzGraphOp_##id;
#define DECLARE_OTHER(id) extern const FzOpDef fzGraphOp_##id;
FZ_GRAPH_UNARY_OPS(DECLARE_FAMILY)
FZ_GRAPH_BINARY_OPS(DECLARE_FAMILY)
FZ_GRAPH_OTHER_OPS(DECLARE_OTHER)

/* Arithmetic per element of the ops that cost more than one operation
 * (rough counts of a libm-quality implementation). */
static const struct {
  const FzOpDef *def;
  double flops;
} kFlops[] = {
    {&fzGraphOp_exp, 16},      {&fzGraphOp_log, 16},
    {&fzGraphOp_tanh, 20},     {&fzGraphOp_sigmoid, 18},
    {&fzGraphOp_gelu, 24},     {&fzGraphOp_silu, 18},
    {&fzGraphOp_erf, 20},      {&fzGraphOp_sin, 16},
    {&fzGraphOp_cos, 16},      {&fzGraphOp_softplus, 32},
    {&fzGraphOp_elu, 16},      {&fzGraphOp_selu, 16},
    {&fzGraphOp_pow, 32},      {&fzGraphOp_div, 4},
    {&fzGraphOp_rem, 8},       {&fzGraphOp_sqrt, 4},
    {&fzGraphOp_rsqrt, 4},     {&fzGraphOp_reciprocal, 4},
    {&fzGraphOp_hard_sigmoid, 3}, {&fzGraphOp_batch_norm, 4},
    {&fzGraphOp_softmax, 24},  {&fzGraphOp_log_softmax, 40},
    {&fzGraphOp_layer_norm, 10}, {&fzGraphOp_rms_norm, 8},
    {&fzGraphOp_broadcast, 0}, {&fzGraphOp_reshape, 0},
    {&fzGraphOp_transpose, 0}, {&fzGraphOp_slice, 0},
    {&fzGraphOp_concat, 0},    {&fzGraphOp_gather, 0},
    {&fzGraphOp_pad, 0},       {&fzGraphOp_cast, 0.5},
};

static double flops_per_element(const FzOpDef *def) {
  for (size_t i = 0; i < sizeof kFlops / sizeof kFlops[0]; ++i)
    if (kFlops[i].def == def)
      return kFlops[i].flops;
  return 1;
}

static bool same_shape(const FzType *a, const FzType *b) {
  if (!a || !b || fzTypeGetKind(a) != FZ_TYPE_TENSOR ||
      fzTypeGetKind(b) != FZ_TYPE_TENSOR)
    return false;
  size_t r = fzShapedTypeGetRank(a);
  if (r == FZ_UNRANKED || r != fzShapedTypeGetRank(b))
    return false;
  return r == 0 || memcmp(fzShapedTypeGetShape(a), fzShapedTypeGetShape(b),
                          r * sizeof(int64_t)) == 0;
}

static int64_t dim_or_one(const FzType *t, size_t i) {
  int64_t d = fzShapedTypeGetDim(t, i);
  return d == FZ_DYNAMIC ? 1 : d;
}

static double num_elements(const FzType *t) {
  size_t r = fzShapedTypeGetRank(t);
  if (r == FZ_UNRANKED)
    return 1;
  double n = 1;
  for (size_t i = 0; i < r; ++i)
    n *= (double)dim_or_one(t, i);
  return n;
}

/* Bits [from, rank) of a rank-r tensor. */
static uint32_t axes_from(size_t from, size_t rank) {
  uint32_t m = 0;
  for (size_t i = from; i < rank && i < 32; ++i)
    m |= 1u << i;
  return m;
}

static bool describe_reduction(FzOp *op, const FzOpDef *def,
                               FzFusionOpInfo *info) {
  FzType *in = fzValueGetType(fzOpGetOperand(op, 0));
  size_t rank = fzShapedTypeGetRank(in);
  if (rank == FZ_UNRANKED || rank > FZ_GRAPH_MAX_RANK)
    return false;
  FzGraphDiag d = {fzOpGetContext(op), fzOpGetLoc(op), NULL, true};
  FzGraphAttrs a = fzGraphAttrsOfOp(op);
  info->reduceOperand = 0;
  if (def == &fzGraphOp_max_pool || def == &fzGraphOp_avg_pool) {
    /* A window: an epilogue-only root. */
    int64_t k[2];
    size_t nk;
    bool present;
    info->reduceOperand = -1;
    if (fzGraphGetI64Array(&d, &a, "kernel", 2, k, &nk, &present) && nk == 2)
      info->flopsPerElement = (double)(k[0] * k[1]);
    return true;
  }
  if (def == &fzGraphOp_global_avg_pool || def == &fzGraphOp_global_max_pool) {
    /* The spatial dims: after (N, C), or between N and C (NHWC). */
    bool nhwc = fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC;
    info->reduceAxes = nhwc ? axes_from(1, rank) & ~(1u << (rank - 1))
                            : axes_from(2, rank);
    return true;
  }
  if (def == &fzGraphOp_softmax || def == &fzGraphOp_log_softmax ||
      def == &fzGraphOp_layer_norm || def == &fzGraphOp_rms_norm) {
    int64_t ax;
    size_t axis;
    if (!fzGraphGetInt(&d, &a, "axis", -1, &ax) ||
        !fzGraphNormAxis(&d, "axis", ax, rank, &axis))
      return false;
    bool norm = def == &fzGraphOp_layer_norm || def == &fzGraphOp_rms_norm;
    info->reduceAxes = norm ? axes_from(axis, rank) : 1u << axis;
    return true;
  }
  /* reduce_*: "axes" (absent: every dim). */
  int64_t axes[FZ_GRAPH_MAX_RANK];
  size_t na;
  bool present;
  if (!fzGraphGetI64Array(&d, &a, "axes", FZ_GRAPH_MAX_RANK, axes, &na,
                          &present))
    return false;
  if (!present) {
    info->reduceAxes = axes_from(0, rank);
    return true;
  }
  info->reduceAxes = 0;
  for (size_t i = 0; i < na; ++i) {
    size_t ax;
    if (!fzGraphNormAxis(&d, "axes", axes[i], rank, &ax))
      return false;
    info->reduceAxes |= 1u << ax;
  }
  return true;
}

bool fzGraphDescribeFusion(FzOp *op, FzFusionOpInfo *info) {
  const FzOpDef *def = fzOpGetDef(op);
  /* Result #0 gives the iteration space (layer_norm's optional
   * statistics are smaller results). */
  if (!def || fzOpGetNumResults(op) == 0 || fzOpGetNumOperands(op) == 0)
    return false;
  FzType *rt = fzValueGetType(fzOpGetResult(op, 0));
  if (fzTypeGetKind(rt) != FZ_TYPE_TENSOR ||
      fzShapedTypeGetRank(rt) == FZ_UNRANKED)
    return false;
  info->kind = def->fusionKind;
  info->flopsPerElement = flops_per_element(def);
  info->flops = 0;
  info->reduceOperand = -1;
  info->reduceAxes = 0;
  if (def == &fzGraphOp_attention) {
    /* A window-like root (reduceOperand -1) that takes a prologue: the
     * head split's reshapes and transposes, a bias, fold into its loads.
     * 2 * Sq * Sk * (D + Dv) per batch entry, and the exps. */
    FzType *k = fzValueGetType(fzOpGetOperand(op, fzOpGetNumOperands(op) > 1));
    size_t r = fzShapedTypeGetRank(rt);
    if (r < 2 || fzShapedTypeGetRank(k) != r)
      return true;
    double sk = (double)dim_or_one(k, r - 2);
    double dk = (double)dim_or_one(k, r - 1);
    double dv = (double)dim_or_one(rt, r - 1);
    info->flops = num_elements(rt) / dv * sk * (2 * (dk + dv) + 20);
    info->prologueRoot = true;
    return true;
  }
  switch (def->fusionKind) {
  case FZ_FUSION_BROADCAST: {
    /* Broadcasting in name only: every operand has the result's shape. */
    bool same = true;
    for (size_t i = 0; same && i < fzOpGetNumOperands(op); ++i)
      same = same_shape(fzValueGetType(fzOpGetOperand(op, i)), rt);
    if (same)
      info->kind = FZ_FUSION_ELEMENTWISE;
    return true;
  }
  case FZ_FUSION_REDUCTION:
    if (!describe_reduction(op, def, info)) {
      info->kind = FZ_FUSION_OPAQUE;
      info->reduceOperand = -1;
    }
    return true;
  case FZ_FUSION_CONTRACTION: {
    FzType *a = fzValueGetType(fzOpGetOperand(op, 0));
    double outN = num_elements(rt), k = 1;
    if (def == &fzGraphOp_matmul) {
      size_t ra = fzShapedTypeGetRank(a);
      FzAttr *ta = fzOpGetInherentAttr(op, FZ_STR("transpose_a"));
      bool trans = ta && fzAttrGetKind(ta) == FZ_ATTR_BOOL &&
                   fzBoolAttrGetValue(ta);
      if (ra != FZ_UNRANKED && ra >= 1)
        k = (double)dim_or_one(a, ra == 1 ? 0 : (trans ? ra - 2 : ra - 1));
    } else if (fzOpGetNumOperands(op) >= 2) {
      /* conv2d: weight [M, C / groups, kh, kw]: C/g * kh * kw per output. */
      FzType *w = fzValueGetType(fzOpGetOperand(op, 1));
      if (fzShapedTypeGetRank(w) != FZ_UNRANKED &&
          fzShapedTypeGetRank(w) >= 1)
        k = num_elements(w) / (double)dim_or_one(w, 0);
    }
    info->flops = 2 * outN * k;
    return true;
  }
  default:
    return true;
  }
}

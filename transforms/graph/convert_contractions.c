/* transforms/graph/convert_contractions.c - the convert-contractions pass
 * (the bf16 and fp16 precision policies of fz/precision.h): every f32
 * graph.matmul and graph.conv2d gets bf16 (or f16) operands, and its
 * result is cast back to f32, so the contraction runs on 16-bit inputs
 * with f32 accumulation while everything around it stays f32.
 *
 *   matmul(a, b) : f32           -> cast(matmul(cast(a), cast(b)) : T) : f32
 *   conv2d(x, w [, bias]) : f32  -> cast(conv2d(cast(x), cast(w)) : T) : f32
 *                                   [+ reshape(bias) : [M, 1, 1] f32]
 *
 * A conv's constant bias stays f32: it moves out of the conv into a
 * broadcast add after the cast back, with a constant [M, 1, 1] (which
 * joins the conv's epilogue; an NHWC conv adds the [M] bias itself, which
 * broadcasts along its last dim). A bias computed at run time is cast to T
 * and stays the conv's operand instead: its reshape would be an op of its
 * own, which fusion would not let into the epilogue, leaving the conv's
 * result to make a round trip through memory. The contraction is changed
 * in place (its operands and result
 * type), so its attributes and location stay; each converted value gets
 * one cast, placed right after its definition and shared by every
 * contraction that reads it. A cast (or the bias's reshape) of a constant
 * is evaluated here by the interpreter, whatever its size, and replaced by
 * a constant, so weights become bf16 constants (half the bytes to read),
 * and an f32 constant left unused is erased.
 *
 * What the IR then says is what every backend computes: the interpreter
 * rounds the contraction's result to T before the cast back; lowered
 * code fuses the cast into the contraction's epilogue, where the f32
 * accumulator is not rounded (graph-to-loop keeps 16-bit intermediates
 * in f32), as TensorRT's fp16 mode does.
 *
 * Contractions inside a graph.fusion are left alone (a cast there would
 * be a prologue, which contraction groups do not have): run the pass
 * before fuse.
 */
#include <string.h>

#include "fz/graph.h"
#include "fz/pass.h"
#include "ir/util.h"
#include "transforms/graph/graph_opt.h"

enum { STAT_CONVERTED, STAT_CONSTANTS, NUM_STATS };

static const char *const kTo[] = {"bf16", "fp16", NULL};

static const FzPassOptionDef kOptions[] = {
    {"to", FZ_PASS_OPTION_STRING, "bf16",
     "Operand type of the converted contractions (bf16 or fp16; f32 "
     "accumulation and result)",
     kTo, 0, 0},
};

static const FzPassStatisticDef kStats[] = {
    {"num-converted", "Number of f32 matmuls and convolutions converted"},
    {"num-constants", "Number of constants converted at compile time"},
};

typedef struct Convert {
  FzContext *ctx;
  FzType *to;     /* bf16 or f16 */
  FzPtrVec cache; /* pairs: an f32 value, its cast to `to` */
  FzPtrVec spent; /* constants that may have lost their last use: erased
                     at the end, so no value in `cache` is freed (and
                     its memory reused) while the pass runs */
  uint64_t converted, constants;
  bool failed;
} Convert;

static bool is_named(const FzOp *op, const char *name) {
  const FzOpDef *d = op ? fzOpGetDef(op) : NULL;
  return d && strcmp(d->name, name) == 0;
}

/* A ranked tensor type of f32 elements. */
static bool is_f32_tensor(const FzValue *v) {
  FzType *t = fzValueGetType(v);
  return fzTypeGetKind(t) == FZ_TYPE_TENSOR &&
         fzShapedTypeGetRank(t) != (size_t)FZ_UNRANKED &&
         fzTypeGetKind(fzShapedTypeGetElementType(t)) == FZ_TYPE_F32;
}

/* t with element type elt. */
static FzType *with_element(FzContext *ctx, FzType *t, FzType *elt) {
  return fzTensorTypeGet(ctx, fzShapedTypeGetRank(t), fzShapedTypeGetShape(t),
                         elt, NULL);
}

/* Puts b's insertion point right after v's definition (the start of its
 * block for a block argument), so what is built there dominates every
 * use of v. */
static void after_definition(FzBuilder *b, FzValue *v) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (def)
    fzBuilderSetInsertionPointAfter(b, def);
  else
    fzBuilderSetInsertionPointToStart(b, fzValueGetParentBlock(v));
}

/* One-operand op `name` of v with result type `type` at b's point. */
static FzOp *create_unary(Convert *C, FzBuilder *b, const char *name,
                          FzValue *v, FzType *type, FzLoc *loc) {
  FzOpState st;
  fzOpStateInit(&st, C->ctx, fzStringRefFromCString(name), loc);
  fzOpStateAddOperands(&st, 1, &v);
  fzOpStateAddResults(&st, 1, &type);
  FzOp *op = fzBuilderCreate(b, &st);
  if (!op)
    C->failed = true;
  return op;
}

/* op's result, or, when its one operand is a constant, a constant of
 * the value the interpreter gives op (which is erased). NULL after an
 * error. */
static FzValue *fold(Convert *C, FzOp *op) {
  FzValue *in = fzOpGetOperand(op, 0), *out = fzOpGetResult(op, 0);
  FzAttr *c = fzValueGetConstant(in);
  if (!c || fzAttrGetKind(c) != FZ_ATTR_DENSE)
    return out;
  FzTensor *t = fzTensorFromDenseAttr(C->ctx, c), *r = NULL;
  FzInterpOptions io;
  memset(&io, 0, sizeof io);
  io.quiet = true;
  FzAttr *attr =
      t && fzInterpretOp(op, &t, &io, &r) ? fzTensorToDenseAttr(r) : NULL;
  fzTensorDestroy(t);
  fzTensorDestroy(r);
  if (!attr)
    return out; /* left to run: only a failed allocation gets here */
  FzBuilder b;
  fzBuilderInit(&b, C->ctx);
  fzBuilderSetInsertionPointBefore(&b, op);
  FzOp *k = fzGraphCreateConstant(&b, attr, fzOpGetLoc(op));
  if (!k) {
    C->failed = true;
    return NULL;
  }
  fzValueReplaceAllUsesWith(out, fzOpGetResult(k, 0));
  fzOpErase(op);
  if (!fzPtrVecPush(&C->spent, fzValueGetDefiningOp(in)))
    C->failed = true;
  C->constants++;
  return fzOpGetResult(k, 0);
}

/* v cast to C->to: one cast per value, shared; the source itself when v
 * is a cast from C->to (a contraction's result cast back: exact). NULL
 * after an error. */
static FzValue *converted(Convert *C, FzValue *v) {
  for (size_t i = 0; i + 1 < C->cache.len; i += 2)
    if (C->cache.data[i] == v)
      return C->cache.data[i + 1];
  FzOp *def = fzValueGetDefiningOp(v);
  if (is_named(def, "graph.cast") && fzShapedTypeGetElementType(fzValueGetType(
                                         fzOpGetOperand(def, 0))) == C->to)
    return fzOpGetOperand(def, 0);
  FzBuilder b;
  fzBuilderInit(&b, C->ctx);
  after_definition(&b, v);
  FzType *t = with_element(C->ctx, fzValueGetType(v), C->to);
  FzOp *cast =
      t ? create_unary(C, &b, "graph.cast", v, t, fzValueGetLoc(v)) : NULL;
  FzValue *r = cast ? fold(C, cast) : NULL;
  if (!r || !fzPtrVecPush(&C->cache, v) || !fzPtrVecPush(&C->cache, r)) {
    C->failed = true;
    return NULL;
  }
  return r;
}

/* The constant bias [M] of a conv as a constant [M, 1, 1], or NULL after
 * an error. */
static FzValue *bias_column(Convert *C, FzValue *bias) {
  FzType *bt = fzValueGetType(bias);
  int64_t shape[3] = {fzShapedTypeGetDim(bt, 0), 1, 1};
  FzType *t = fzTensorTypeGet(C->ctx, 3, shape, fzF32TypeGet(C->ctx), NULL);
  FzBuilder b;
  fzBuilderInit(&b, C->ctx);
  after_definition(&b, bias);
  FzOp *r =
      t ? create_unary(C, &b, "graph.reshape", bias, t, fzValueGetLoc(bias))
        : NULL;
  return r ? fold(C, r) : NULL;
}

/* Whether op is a contraction this pass converts (remarks say why not
 * where it is one with f32 operands). */
static bool convertible(Convert *C, FzOp *op) {
  bool conv = is_named(op, "graph.conv2d");
  if (!conv && !is_named(op, "graph.matmul"))
    return false;
  size_t n = fzOpGetNumOperands(op);
  if (n < 2 || fzOpGetNumResults(op) != 1 ||
      !is_f32_tensor(fzOpGetResult(op, 0)))
    return false;
  for (size_t i = 0; i < n; ++i)
    if (!is_f32_tensor(fzOpGetOperand(op, i)))
      return false;
  for (FzOp *p = fzOpGetParentOp(op); p; p = fzOpGetParentOp(p))
    if (is_named(p, "graph.fusion")) {
      fzEmitRemark(C->ctx, fzOpGetLoc(op),
                   "convert-contractions: left f32: inside a graph.fusion "
                   "(run the pass before fuse)");
      return false;
    }
  return true;
}

/* Whether a conv's bias moves out as a constant column: a constant
 * (dense) of static shape [M]. */
static bool constant_bias(FzValue *bias) {
  FzAttr *c = fzValueGetConstant(bias);
  FzType *t = fzValueGetType(bias);
  return c && fzAttrGetKind(c) == FZ_ATTR_DENSE &&
         fzShapedTypeGetRank(t) == 1 && fzShapedTypeHasStaticShape(t);
}

/* Rewrites the contraction op as the opening comment shows. */
static void convert_op(Convert *C, FzOp *op) {
  FzValue *res = fzOpGetResult(op, 0);
  FzType *f32Type = fzValueGetType(res);
  FzValue *bias = fzOpGetNumOperands(op) > 2 ? fzOpGetOperand(op, 2) : NULL;
  bool column = bias && constant_bias(bias);
  FzValue *ops[3];
  size_t n = bias && !column ? 3 : 2;
  for (size_t i = 0; i < n; ++i)
    if (!(ops[i] = converted(C, fzOpGetOperand(op, i))))
      return;
  bool nhwc = fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC;
  FzValue *biasColumn = !column ? NULL : nhwc ? bias : bias_column(C, bias);
  FzType *lowType = with_element(C->ctx, f32Type, C->to);
  /* (fold listed the f32 bias constant in C->spent.) */
  if ((column && !biasColumn) || !lowType || !fzOpSetOperands(op, n, ops)) {
    C->failed = true;
    return;
  }
  fzValueSetType(res, lowType);
  FzBuilder b;
  fzBuilderInit(&b, C->ctx);
  fzBuilderSetInsertionPointAfter(&b, op);
  FzLoc *loc = fzOpGetLoc(op);
  FzOp *back = create_unary(C, &b, "graph.cast", res, f32Type, loc);
  if (!back)
    return;
  FzValue *out = fzOpGetResult(back, 0);
  if (biasColumn) {
    FzValue *operands[2] = {out, biasColumn};
    FzOpState st;
    fzOpStateInit(&st, C->ctx, FZ_STR("graph.add"), loc);
    fzOpStateAddOperands(&st, 2, operands);
    fzOpStateAddResults(&st, 1, &f32Type);
    FzOp *add = fzBuilderCreate(&b, &st);
    if (!add) {
      C->failed = true;
      return;
    }
    out = fzOpGetResult(add, 0);
  }
  /* Every former use of the f32 result now reads `out`; the cast back
   * reads the contraction again. */
  fzValueReplaceAllUsesWith(res, out);
  fzOpSetOperand(back, 0, res);
  C->converted++;
}

static FzWalkResult collect(FzOp *op, void *ud) {
  if (!is_named(op, "graph.matmul") && !is_named(op, "graph.conv2d"))
    return FZ_WALK_ADVANCE;
  return fzPtrVecPush(ud, op) ? FZ_WALK_ADVANCE : FZ_WALK_INTERRUPT;
}

bool fzGraphConvertContractions(FzOp *root, FzType *to, uint64_t *converted,
                                uint64_t *constants) {
  FzContext *ctx = fzOpGetContext(root);
  Convert C;
  memset(&C, 0, sizeof C);
  C.ctx = ctx;
  C.to = to;
  fzPtrVecInit(&C.cache, ctx);
  fzPtrVecInit(&C.spent, ctx);
  FzPtrVec ops;
  fzPtrVecInit(&ops, ctx);
  /* Collect first: the rewrite creates ops. The root is not converted. */
  bool ok = true;
  for (size_t i = 0; ok && i < fzOpGetNumRegions(root); ++i)
    for (FzBlock *bl = fzRegionGetFirstBlock(fzOpGetRegion(root, i)); ok && bl;
         bl = fzBlockGetNext(bl))
      for (FzOp *o = fzBlockGetFirstOp(bl); ok && o; o = fzOpGetNextInBlock(o))
        ok = fzOpWalk(o, FZ_WALK_PRE_ORDER, collect, &ops) != FZ_WALK_INTERRUPT;
  for (size_t i = 0; ok && !C.failed && i < ops.len; ++i)
    if (convertible(&C, ops.data[i]))
      convert_op(&C, ops.data[i]);
  /* Constants (f32 weights, biases) that nothing reads any more. An op
   * may be listed twice: erase it once. */
  for (size_t i = 0; i < C.spent.len; ++i) {
    FzOp *k = C.spent.data[i];
    if (!k || !is_named(k, "graph.constant") ||
        fzValueHasUses(fzOpGetResult(k, 0)))
      continue;
    for (size_t j = i + 1; j < C.spent.len; ++j)
      if (C.spent.data[j] == k)
        C.spent.data[j] = NULL;
    fzOpErase(k);
  }
  if (converted)
    *converted = C.converted;
  if (constants)
    *constants = C.constants;
  ok = ok && !C.failed && !fzContextHadAllocationFailure(ctx);
  if (!ok)
    fzEmitError(ctx, fzOpGetLoc(root), "convert-contractions: out of memory");
  fzPtrVecFree(&ops);
  fzPtrVecFree(&C.cache);
  fzPtrVecFree(&C.spent);
  return ok;
}

static bool run(FzPass *pass, FzOp *root) {
  FzContext *ctx = fzOpGetContext(root);
  FzStringRef to = fzPassGetStringOption(pass, "to");
  FzType *t = fzStringRefEqual(to, FZ_STR("fp16")) ? fzF16TypeGet(ctx)
                                                   : fzBF16TypeGet(ctx);
  uint64_t n = 0, k = 0;
  bool ok = fzGraphConvertContractions(root, t, &n, &k);
  fzPassAddStatistic(pass, STAT_CONVERTED, n);
  fzPassAddStatistic(pass, STAT_CONSTANTS, k);
  return ok;
}

const FzPassDef fzConvertContractionsPass = {
    .argument = "convert-contractions",
    .displayName = "ConvertContractions",
    .summary = "f32 matmuls and convolutions on bf16 or fp16 operands with "
               "f32 accumulation and result (mixed precision)",
    .anchor = NULL,
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = NUM_STATS,
    .run = run,
};

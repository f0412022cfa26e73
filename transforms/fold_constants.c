/* transforms/fold_constants.c - the fold-constants pass: evaluates every
 * graph op whose operands are all constants with the reference
 * interpreter and replaces it by a graph.constant, so whole constant
 * subgraphs (weight transposes, reshapes, scale folding after an import)
 * collapse to their values.
 *
 * Ops are visited in order (pre-order, every block), so a chain of
 * constant ops folds from its start in one run. An op is folded only when
 * each result is static and has at most `max-elements` elements (the
 * size limit keeps the IR from growing by an unbounded constant); an op
 * whose evaluation fails (an integer division by zero) is left as it is,
 * with a remark at its location, since the program may never run it. The
 * constants it consumed are erased once nothing uses them. The
 * interpreter is the same one fuse-run uses, so folding never changes a
 * result.
 */
#include <string.h>

#include "fz/graph.h"
#include "fz/pass.h"
#include "ir/util.h"

#define DEFAULT_MAX_ELEMENTS "1048576"

static const FzPassOptionDef kOptions[] = {
    {"max-elements", FZ_PASS_OPTION_INT, DEFAULT_MAX_ELEMENTS,
     "Largest result (in elements) that is folded into a constant", NULL, 1,
     INT64_MAX},
};

static const FzPassStatisticDef kStatistics[] = {
    {"num-folded", "Number of ops folded into constants"},
    {"num-skipped-too-large", "Number of constant ops left: result too big"},
};

static FzWalkResult collect(FzOp *op, void *ud) {
  return fzPtrVecPush(ud, op) ? FZ_WALK_ADVANCE : FZ_WALK_INTERRUPT;
}

/* Whether op is a candidate: a graph op with a kernel and no regions,
 * not itself a constant, all of whose operands are constants. */
static bool foldable(FzOp *op) {
  const FzOpDef *def = fzOpGetDef(op);
  if (!def || strncmp(def->name, "graph.", 6) != 0 || !def->interpret ||
      fzOpGetNumRegions(op) != 0 || fzOpGetNumResults(op) == 0 ||
      fzOpHasTrait(op, FZ_TRAIT_CONSTANT_LIKE))
    return false;
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i) {
    FzAttr *c = fzValueGetConstant(fzOpGetOperand(op, i));
    if (!c || fzAttrGetKind(c) != FZ_ATTR_DENSE)
      return false;
  }
  return true;
}

static bool small_enough(FzOp *op, int64_t limit) {
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i) {
    FzType *t = fzValueGetType(fzOpGetResult(op, i));
    if (fzTypeGetKind(t) != FZ_TYPE_TENSOR || !fzShapedTypeHasStaticShape(t) ||
        fzShapedTypeGetNumElements(t) > limit)
      return false;
  }
  return true;
}

/* Evaluates op and replaces it by constants. Returns true if it did. */
static bool fold_op(FzOp *op, int64_t limit, FzPtrVec *inputs) {
  FzContext *ctx = fzOpGetContext(op);
  size_t n = fzOpGetNumOperands(op), r = fzOpGetNumResults(op);
  FzTensor **ops = fzCalloc(ctx, n ? n : 1, sizeof *ops);
  FzTensor **res = fzCalloc(ctx, r, sizeof *res);
  FzAttr **attrs = fzCalloc(ctx, r, sizeof *attrs);
  bool ok = ops && res && attrs;
  char why[512] = "";
  for (size_t i = 0; ok && i < n; ++i)
    ok = (ops[i] = fzTensorFromDenseAttr(
              ctx, fzValueGetConstant(fzOpGetOperand(op, i)))) != NULL;
  FzInterpOptions opts = {limit, 1, true, why, sizeof why};
  if (ok)
    ok = fzInterpretOp(op, ops, &opts, res);
  for (size_t i = 0; ok && i < r; ++i)
    ok = (attrs[i] = fzTensorToDenseAttr(res[i])) != NULL;
  if (!ok && why[0])
    fzEmitRemark(ctx, fzOpGetLoc(op), "not folded: %s", why);
  if (ok) {
    FzBuilder b;
    fzBuilderInit(&b, ctx);
    fzBuilderSetInsertionPointBefore(&b, op);
    FzOp **made = fzCalloc(ctx, r, sizeof *made);
    for (size_t i = 0; ok && i < r; ++i)
      ok = made && (made[i] = fzGraphCreateConstant(&b, attrs[i],
                                                    fzOpGetLoc(op))) != NULL;
    if (ok) {
      for (size_t i = 0; i < n; ++i)
        (void)fzPtrVecPush(inputs, fzValueGetDefiningOp(fzOpGetOperand(op, i)));
      for (size_t i = 0; i < r; ++i)
        fzValueReplaceAllUsesWith(fzOpGetResult(op, i),
                                  fzOpGetResult(made[i], 0));
      fzOpErase(op);
    } else {
      for (size_t i = 0; made && i < r; ++i)
        if (made[i])
          fzOpErase(made[i]);
    }
    fzFree(ctx, made);
  }
  for (size_t i = 0; ops && i < n; ++i)
    fzTensorDestroy(ops[i]);
  for (size_t i = 0; res && i < r; ++i)
    fzTensorDestroy(res[i]);
  fzFree(ctx, ops);
  fzFree(ctx, res);
  fzFree(ctx, attrs);
  return ok;
}

static bool run(FzPass *pass, FzOp *root) {
  FzContext *ctx = fzOpGetContext(root);
  int64_t limit = fzPassGetIntOption(pass, "max-elements");
  FzPtrVec ops, inputs;
  fzPtrVecInit(&ops, ctx);
  fzPtrVecInit(&inputs, ctx);
  /* Collect first: folding erases ops. The root itself is not folded. */
  for (size_t i = 0; i < fzOpGetNumRegions(root); ++i)
    for (FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(root, i)); b;
         b = fzBlockGetNext(b))
      for (FzOp *o = fzBlockGetFirstOp(b); o; o = fzOpGetNextInBlock(o))
        if (fzOpWalk(o, FZ_WALK_PRE_ORDER, collect, &ops) ==
            FZ_WALK_INTERRUPT) {
          fzPtrVecFree(&ops);
          return false;
        }
  uint64_t folded = 0, tooLarge = 0;
  for (size_t i = 0; i < ops.len; ++i) {
    FzOp *op = ops.data[i];
    if (!foldable(op))
      continue;
    if (!small_enough(op, limit)) {
      tooLarge++;
      continue;
    }
    if (fold_op(op, limit, &inputs))
      folded++;
  }
  /* Constants that fed folded ops and are now unused. */
  for (size_t i = 0; i < inputs.len; ++i) {
    FzOp *c = inputs.data[i];
    if (!c)
      continue;
    for (size_t j = i + 1; j < inputs.len; ++j)
      if (inputs.data[j] == c)
        inputs.data[j] = NULL;
    bool used = false;
    for (size_t k = 0; k < fzOpGetNumResults(c); ++k)
      used |= fzValueHasUses(fzOpGetResult(c, k));
    if (!used)
      fzOpErase(c);
  }
  fzPassAddStatistic(pass, 0, folded);
  fzPassAddStatistic(pass, 1, tooLarge);
  fzPtrVecFree(&ops);
  fzPtrVecFree(&inputs);
  return !fzContextHadAllocationFailure(ctx);
}

static const FzPassDef fzFoldConstantsPass = {
    .argument = "fold-constants",
    .displayName = "FoldConstants",
    .summary = "Evaluate graph ops on constant operands with the reference "
               "interpreter and replace them by constants",
    .anchor = NULL,
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStatistics,
    .numStatistics = sizeof kStatistics / sizeof kStatistics[0],
    .run = run,
};

bool fzRegisterFoldConstantsPass(FzContext *ctx) {
  return fzContextRegisterPass(ctx, &fzFoldConstantsPass);
}

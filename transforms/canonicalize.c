/* transforms/canonicalize.c - the canonicalize pass: folds plus every
 * registered op's canonicalization patterns, applied greedily.
 *
 * The pattern set is collected once per pass instance (initialize) from
 * the getCanonicalizationPatterns hooks of the ops registered in the
 * context, and reused for every op the instance runs on. The pass runs on
 * any op and rewrites what is nested in it; not converging within the
 * limits is an error at the location of the function being rewritten.
 *
 * Region simplification (region-simplify=true, the default) first erases
 * the blocks that control cannot reach. fuse's IR has no branches, so in
 * a region with several blocks only the entry block runs: every other
 * block is unreachable, as mlir-opt's canonicalize sees such blocks (it
 * erases them too). A block is kept when a value it defines is used
 * outside it, which only unverified or graph-region IR can do. Blocks go
 * before the patterns run, so the ops they leave dead are erased in the
 * same run; patterns cannot make blocks unreachable (there is nothing to
 * branch), so one sweep is enough.
 */
#include "fz/pass.h"
#include "transforms/passes.h"

enum { STAT_ITERATIONS, STAT_FOLDS, STAT_REWRITES, STAT_ERASED,
       STAT_CONSTANTS, STAT_BLOCKS };

static const FzPassStatisticDef kStats[] = {
    {"num-iterations", "Number of greedy iterations (worklist rebuilds)"},
    {"num-folds", "Number of operations folded"},
    {"num-rewrites", "Number of successful pattern applications"},
    {"num-erased", "Number of dead or duplicate operations erased"},
    {"num-constants", "Number of constants materialized by folding"},
    {"num-erased-blocks", "Number of unreachable blocks erased"},
};

static const FzPassOptionDef kOptions[] = {
    {"max-iterations", FZ_PASS_OPTION_INT, "10",
     "Rebuilds of the worklist before giving up (-1: no limit)", NULL, -1,
     INT64_MAX},
    {"max-num-rewrites", FZ_PASS_OPTION_INT, "-1",
     "Rewrites before giving up (-1: automatic, 64 per op)", NULL, -1,
     INT64_MAX},
    {"top-down", FZ_PASS_OPTION_BOOL, "true",
     "Seed the worklist in pre-order (defs before uses)", NULL, 0, 0},
    {"region-simplify", FZ_PASS_OPTION_BOOL, "true",
     "Erase unreachable blocks (every block but the entry block of a "
     "region: fuse has no branches)",
     NULL, 0, 0},
    {"fold", FZ_PASS_OPTION_BOOL, "true", "Call the ops' fold hooks", NULL,
     0, 0},
};

static bool canonicalize_initialize(FzPass *pass, FzContext *ctx) {
  FzPatternSet *set = fzPatternSetCreate(ctx);
  if (!set)
    return false;
  fzPassSetState(pass, set);
  return fzPatternSetAddCanonicalizationPatterns(set);
}

static void canonicalize_destroy(FzPass *pass) {
  fzPatternSetDestroy(fzPassGetState(pass));
}

/* Whether op is block or nested in it. */
static bool is_inside(const FzOp *op, const FzBlock *block) {
  for (; op; op = fzOpGetParentOp(op))
    if (fzOpGetBlock(op) == block)
      return true;
  return false;
}

static bool value_used_only_inside(const FzValue *v, const FzBlock *block) {
  for (FzOpOperand *u = fzValueGetFirstUse(v); u; u = fzOpOperandGetNextUse(u))
    if (!is_inside(fzOpOperandGetOwner(u), block))
      return false;
  return true;
}

typedef struct Escape {
  const FzBlock *block;
  bool escapes;
} Escape;

static FzWalkResult escape_fn(FzOp *op, void *ud) {
  Escape *e = ud;
  for (size_t i = 0; i < fzOpGetNumResults(op); ++i)
    if (!value_used_only_inside(fzOpGetResult(op, i), e->block))
      goto escapes;
  for (size_t r = 0; r < fzOpGetNumRegions(op); ++r)
    for (FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(op, r)); b;
         b = fzBlockGetNext(b))
      for (size_t i = 0; i < fzBlockGetNumArguments(b); ++i)
        if (!value_used_only_inside(fzBlockGetArgument(b, i), e->block))
          goto escapes;
  return FZ_WALK_ADVANCE;
escapes:
  e->escapes = true;
  return FZ_WALK_INTERRUPT;
}

/* Whether a value defined in block (an argument, or a result of an op
 * at any depth in it) is used outside it. */
static bool block_values_escape(FzBlock *block) {
  for (size_t i = 0; i < fzBlockGetNumArguments(block); ++i)
    if (!value_used_only_inside(fzBlockGetArgument(block, i), block))
      return true;
  Escape e = {block, false};
  for (FzOp *o = fzBlockGetFirstOp(block); o && !e.escapes;
       o = fzOpGetNextInBlock(o))
    (void)fzOpWalk(o, FZ_WALK_PRE_ORDER, escape_fn, &e);
  return e.escapes;
}

/* Pre-order callback: erases the unreachable blocks of op's regions
 * before the walk descends into them. */
static FzWalkResult erase_unreachable_fn(FzOp *op, void *ud) {
  uint64_t *erased = ud;
  for (size_t r = 0; r < fzOpGetNumRegions(op); ++r) {
    FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(op, r));
    FzBlock *b = entry ? fzBlockGetNext(entry) : NULL;
    while (b) {
      FzBlock *next = fzBlockGetNext(b);
      if (!block_values_escape(b)) {
        fzBlockRemoveFromRegion(b);
        fzBlockDestroy(b);
        ++*erased;
      }
      b = next;
    }
  }
  return FZ_WALK_ADVANCE;
}

static bool canonicalize_run(FzPass *pass, FzOp *op) {
  if (fzPassGetBoolOption(pass, "region-simplify")) {
    uint64_t erased = 0;
    (void)fzOpWalk(op, FZ_WALK_PRE_ORDER, erase_unreachable_fn, &erased);
    fzPassAddStatistic(pass, STAT_BLOCKS, erased);
  }
  FzGreedyConfig cfg;
  fzGreedyConfigInit(&cfg);
  int64_t iters = fzPassGetIntOption(pass, "max-iterations");
  int64_t rewrites = fzPassGetIntOption(pass, "max-num-rewrites");
  cfg.maxIterations = iters < 0 ? FZ_GREEDY_NO_LIMIT
                                : (iters == 0 ? 1 : (size_t)iters);
  cfg.maxRewrites = rewrites < 0 ? 0 : (rewrites == 0 ? 1 : (size_t)rewrites);
  cfg.topDown = fzPassGetBoolOption(pass, "top-down");
  cfg.fold = fzPassGetBoolOption(pass, "fold");
  FzGreedyStats st;
  bool ok = fzApplyPatternsGreedily(op, fzPassGetState(pass), &cfg, &st);
  fzPassAddStatistic(pass, STAT_ITERATIONS, st.iterations);
  fzPassAddStatistic(pass, STAT_FOLDS, st.folds);
  fzPassAddStatistic(pass, STAT_REWRITES, st.rewrites);
  fzPassAddStatistic(pass, STAT_ERASED, st.erased);
  fzPassAddStatistic(pass, STAT_CONSTANTS, st.constantsMade);
  return ok;
}

const FzPassDef fzCanonicalizePass = {
    .argument = "canonicalize",
    .displayName = "Canonicalizer",
    .summary = "Fold ops and apply every op's canonicalization patterns "
               "until a fixed point",
    .anchor = NULL,
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = sizeof kStats / sizeof kStats[0],
    .initialize = canonicalize_initialize,
    .run = canonicalize_run,
    .destroy = canonicalize_destroy,
};

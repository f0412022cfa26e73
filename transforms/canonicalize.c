/* transforms/canonicalize.c - the canonicalize pass: folds plus every
 * registered op's canonicalization patterns, applied greedily.
 *
 * The pattern set is collected once per pass instance (initialize) from
 * the getCanonicalizationPatterns hooks of the ops registered in the
 * context, and reused for every op the instance runs on. The pass runs on
 * any op and rewrites what is nested in it; not converging within the
 * limits is an error at the location of the function being rewritten.
 */
#include "fz/pass.h"
#include "transforms/passes.h"

enum { STAT_ITERATIONS, STAT_FOLDS, STAT_REWRITES, STAT_ERASED,
       STAT_CONSTANTS };

static const FzPassStatisticDef kStats[] = {
    {"num-iterations", "Number of greedy iterations (worklist rebuilds)"},
    {"num-folds", "Number of operations folded"},
    {"num-rewrites", "Number of successful pattern applications"},
    {"num-erased", "Number of dead or duplicate operations erased"},
    {"num-constants", "Number of constants materialized by folding"},
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
     "Simplify region control flow (accepted for mlir-opt compatibility; "
     "fuse's regions have no CFG to simplify)",
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

static bool canonicalize_run(FzPass *pass, FzOp *op) {
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

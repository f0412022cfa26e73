/* transforms/dce.c - dead code elimination.
 *
 * Erases trivially dead ops (effect-free, results unused; see
 * fzOpIsTriviallyDead) and the unused arguments of non-entry blocks.
 * Blocks are scanned from their end, after the regions nested in each op,
 * so that a whole chain of dead ops goes in one sweep: erasing a user
 * makes its operands' definitions, which come earlier, dead in turn. In
 * graph regions, where a use may precede its definition, the sweep
 * repeats until nothing changes. Entry-block arguments belong to their
 * op's signature (function arguments, loop-carried values) and are kept;
 * fuse's regions have no branches, so nothing passes values to the other
 * blocks' arguments and an unused one can go.
 */
#include "fz/pass.h"
#include "transforms/passes.h"

typedef struct Dce {
  uint64_t ops, args;
} Dce;

static void dce_region(Dce *d, FzRegion *region);

static bool dce_block_once(Dce *d, FzBlock *block) {
  bool changed = false;
  for (FzOp *op = fzBlockGetLastOp(block); op;) {
    FzOp *prev = fzOpGetPrevInBlock(op);
    size_t nr = fzOpGetNumRegions(op);
    for (size_t r = 0; r < nr; ++r)
      dce_region(d, fzOpGetRegion(op, r));
    if (fzOpIsTriviallyDead(op)) {
      fzOpErase(op);
      d->ops++;
      changed = true;
    }
    op = prev;
  }
  return changed;
}

static void dce_region(Dce *d, FzRegion *region) {
  FzOp *parent = fzRegionGetParentOp(region);
  bool graph = parent && fzOpHasTrait(parent, FZ_TRAIT_GRAPH_REGION);
  for (FzBlock *b = fzRegionGetFirstBlock(region); b; b = fzBlockGetNext(b)) {
    while (dce_block_once(d, b) && graph) {
    }
    if (b == fzRegionGetFirstBlock(region))
      continue;
    for (size_t i = fzBlockGetNumArguments(b); i-- > 0;) {
      if (!fzValueHasUses(fzBlockGetArgument(b, i))) {
        fzBlockEraseArgument(b, i);
        d->args++;
      }
    }
  }
}

static bool dce_run(FzPass *pass, FzOp *op) {
  Dce d = {0, 0};
  size_t nr = fzOpGetNumRegions(op);
  for (size_t r = 0; r < nr; ++r)
    dce_region(&d, fzOpGetRegion(op, r));
  fzPassAddStatistic(pass, 0, d.ops);
  fzPassAddStatistic(pass, 1, d.args);
  return true;
}

static const FzPassStatisticDef kStats[] = {
    {"num-erased-ops", "Number of dead operations erased"},
    {"num-erased-args", "Number of unused block arguments erased"},
};

const FzPassDef fzDCEPass = {
    .argument = "dce",
    .displayName = "DCE",
    .summary = "Erase dead pure ops and unused arguments of non-entry blocks",
    .anchor = NULL,
    .statistics = kStats,
    .numStatistics = 2,
    .run = dce_run,
};

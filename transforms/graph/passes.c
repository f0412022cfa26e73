/* transforms/graph/passes.c - the framework that turns a table of
 * pattern rows (FzGraphOptTable) into a greedy-rewrite pass, and the
 * canonicalization hook that lends the exact, always-profitable rows to
 * the graph ops' canonicalizers.
 *
 * Per pass instance, initialize allocates a state holding the options
 * the patterns read, one slot per enabled row, and a hit counter per
 * statistic; each pattern is registered with a trampoline whose
 * userData is the row's slot, so that a success is counted under the
 * row's statistic without the pattern knowing about statistics. The
 * state and its pattern set belong to the pass instance (destroy frees
 * them).
 */
#include <string.h>

#include "ir/util.h"
#include "transforms/graph/graph_opt.h"

typedef struct OptState OptState;

typedef struct Slot {
  OptState *state;
  FzMatchAndRewriteFn fn;
  size_t stat;
} Slot;

struct OptState {
  FzGraphOptOptions opts;
  FzPatternSet *set;
  FzPatternSet *lateSet; /* the table's late rows; NULL when none */
  Slot *slots;    /* one per enabled row */
  uint64_t *hits; /* one per statistic of the pass */
  size_t numStats;
  FzPtrMap remarked; /* ops a "why not" remark was given for, this run */
  bool remarkedInit;
};

bool fzGraphOptFirstRemark(const void *ud, const FzOp *op) {
  if (!ud)
    return true;
  OptState *st = ((const Slot *)ud)->state;
  if (!st->remarkedInit || fzPtrMapContains(&st->remarked, op))
    return false;
  return fzPtrMapPut(&st->remarked, op, (void *)1);
}

static const FzGraphOptOptions kDefaults = {false, true, false, false, true,
                                            16};

const FzGraphOptOptions *fzGraphOptGetOptions(const void *ud) {
  return ud ? &((const Slot *)ud)->state->opts : &kDefaults;
}

static bool trampoline(FzOp *op, FzRewriter *rw, void *ud) {
  Slot *s = ud;
  if (!s->fn(op, rw, s))
    return false;
  s->state->hits[s->stat]++;
  return true;
}

static bool has_option(const FzPassDef *def, const char *name) {
  for (size_t i = 0; i < def->numOptions; ++i)
    if (strcmp(def->options[i].name, name) == 0)
      return true;
  return false;
}

void fzGraphOptPassDestroy(FzPass *pass) {
  OptState *st = fzPassGetState(pass);
  if (!st)
    return;
  FzContext *ctx = fzPassGetContext(pass);
  fzPatternSetDestroy(st->set);
  if (st->lateSet)
    fzPatternSetDestroy(st->lateSet);
  fzFree(ctx, st->slots);
  fzFree(ctx, st->hits);
  if (st->remarkedInit)
    fzPtrMapFree(&st->remarked);
  fzFree(ctx, st);
  fzPassSetState(pass, NULL);
}

/* Adds the enabled rows among rows[0..n) to set, each with its slot. */
static bool add_enabled(FzPass *pass, OptState *st, const FzGraphOptTable *table,
                        const FzGraphOptRow *rows, size_t n, size_t *used,
                        FzPatternSet *set) {
  for (size_t i = 0; i < n; ++i) {
    const FzGraphOptRow *row = &rows[i];
    if (row->group >= 0 && (size_t)row->group < table->numGroups &&
        !fzPassGetBoolOption(pass, table->groups[row->group]))
      continue;
    Slot *s = &st->slots[(*used)++];
    s->state = st;
    s->fn = row->fn;
    s->stat = row->stat < st->numStats ? row->stat : 0;
    FzPattern p = {row->root, row->benefit ? row->benefit : 1, trampoline, s,
                   row->name};
    if (!fzPatternSetAdd(set, &p))
      return false;
  }
  return true;
}

bool fzGraphOptPassInitialize(FzPass *pass, FzContext *ctx) {
  const FzPassDef *def = fzPassGetDef(pass);
  const FzGraphOptTable *table = def->userData;
  OptState *st = fzCalloc(ctx, 1, sizeof *st);
  if (!st)
    return false;
  fzPassSetState(pass, st);
  st->opts = kDefaults;
  if (has_option(def, "fast-math"))
    st->opts.fastMath = fzPassGetBoolOption(pass, "fast-math");
  if (has_option(def, "shared-statistics"))
    st->opts.sharedStatistics = fzPassGetBoolOption(pass, "shared-statistics");
  if (has_option(def, "remarks"))
    st->opts.remarks = fzPassGetBoolOption(pass, "remarks");
  if (has_option(def, "f32"))
    st->opts.attentionF32 = fzPassGetBoolOption(pass, "f32");
  if (has_option(def, "inexact"))
    st->opts.inexact = fzPassGetBoolOption(pass, "inexact");
  if (has_option(def, "max-m"))
    st->opts.maxM = fzPassGetIntOption(pass, "max-m");
  st->numStats = def->numStatistics;
  fzPtrMapInit(&st->remarked, ctx);
  st->remarkedInit = true;
  size_t numRows = table->numRows + table->numLateRows;
  st->hits = fzCalloc(ctx, st->numStats ? st->numStats : 1, sizeof *st->hits);
  st->slots = fzCalloc(ctx, numRows ? numRows : 1, sizeof *st->slots);
  st->set = fzPatternSetCreate(ctx);
  if (table->numLateRows)
    st->lateSet = fzPatternSetCreate(ctx);
  if (!st->hits || !st->slots || !st->set ||
      (table->numLateRows && !st->lateSet))
    return false;
  size_t used = 0;
  return add_enabled(pass, st, table, table->rows, table->numRows, &used,
                     st->set) &&
         (!st->lateSet || add_enabled(pass, st, table, table->lateRows,
                                      table->numLateRows, &used, st->lateSet));
}

bool fzGraphOptPassRun(FzPass *pass, FzOp *op) {
  OptState *st = fzPassGetState(pass);
  FzGreedyConfig cfg;
  fzGreedyConfigInit(&cfg);
  cfg.fold = false; /* canonicalize folds; these passes do what they say */
  fzPtrMapFree(&st->remarked);
  fzPtrMapInit(&st->remarked, fzPassGetContext(pass));
  bool ok = fzApplyPatternsGreedily(op, st->set, &cfg, NULL);
  if (ok && st->lateSet)
    ok = fzApplyPatternsGreedily(op, st->lateSet, &cfg, NULL);
  for (size_t i = 0; i < st->numStats; ++i) {
    fzPassAddStatistic(pass, i, st->hits[i]);
    st->hits[i] = 0;
  }
  return ok;
}

/*===--- Canonicalization hook (declared in include/fz/graph.h) ---------===*/

static void add_rows(FzPatternSet *set, const FzGraphOptRow *rows,
                     size_t n) {
  for (size_t i = 0; i < n; ++i) {
    FzPattern p = {rows[i].root, rows[i].benefit ? rows[i].benefit : 1,
                   rows[i].fn, NULL, rows[i].name};
    (void)fzPatternSetAdd(set, &p);
  }
}

/* The canonicalization provider (registered by fzRegisterAllPasses): the
 * exact, always-profitable rewrites of fold-transpose and
 * simplify-algebra also run in canonicalize. */
void fzGraphAddProfitablePatterns(FzPatternSet *set, FzContext *ctx) {
  (void)ctx;
  add_rows(set, fzFoldTransposeCanonicalRows,
           fzNumFoldTransposeCanonicalRows);
  add_rows(set, fzSimplifyAlgebraCanonicalRows,
           fzNumSimplifyAlgebraCanonicalRows);
}

/* ir/pass_manager.c - pass managers: nesting, adding passes, running.
 *
 * A pass manager is a list of entries, each a pass or a nested manager.
 * Running a manager on an op runs its entries in order; a nested entry
 * runs its pipeline on every op directly inside the op's regions whose
 * name is the nested anchor (for "any": every isolated-from-above op).
 * The first failure stops the run.
 *
 * Instrumentation (verification, IR dumps, timing, statistics, user
 * callbacks, reproducers) belongs to the top-level manager; the run loop
 * here calls its hooks (pass_instrument.c) around each pass.
 *
 * Ownership: a top-level manager owns its entries recursively; entries
 * own their passes and nested managers.
 */
#include "ir/pass_internal.h"

FzPassManager *fzPassManagerCreateInternal(FzContext *ctx, const char *anchor,
                                           FzPassManager *parent) {
  FzPassManager *pm = fzCalloc(ctx, 1, sizeof *pm);
  if (!pm)
    return NULL;
  pm->ctx = ctx;
  pm->parent = parent;
  pm->top = parent ? parent->top : pm;
  if (anchor && strcmp(anchor, "any") != 0) {
    pm->anchor = fzStrDup(ctx, anchor);
    pm->anchorIdent = fzIdentGet(ctx, fzStringRefFromCString(anchor));
    if (!pm->anchor || !pm->anchorIdent) {
      fzPassManagerDestroyInternal(pm);
      return NULL;
    }
  }
  return pm;
}

void fzPassManagerDestroyInternal(FzPassManager *pm) {
  if (!pm)
    return;
  for (size_t i = 0; i < pm->num; ++i) {
    fzPassDestroy(pm->entries[i].pass);
    fzPassManagerDestroyInternal(pm->entries[i].nested);
  }
  fzFree(pm->ctx, pm->entries);
  fzFree(pm->ctx, pm->anchor);
  if (pm->instr)
    fzPMInstrDestroy(pm->ctx, pm->instr);
  fzFree(pm->ctx, pm);
}

FzPassManager *fzPassManagerCreate(FzContext *ctx, const char *anchor) {
  FzPassManager *pm = fzPassManagerCreateInternal(ctx, anchor, NULL);
  if (pm && !fzPMInstrGet(pm)) {
    fzPassManagerDestroyInternal(pm);
    return NULL;
  }
  return pm;
}

void fzPassManagerDestroy(FzPassManager *pm) {
  fzPassManagerDestroyInternal(pm);
}

FzContext *fzPassManagerGetContext(const FzPassManager *pm) {
  return pm->ctx;
}

const char *fzPassManagerGetAnchor(const FzPassManager *pm) {
  return pm->anchor ? pm->anchor : "any";
}

size_t fzPassManagerGetNumEntries(const FzPassManager *pm) { return pm->num; }

bool fzPassManagerForEachPass(FzPassManager *pm,
                              bool (*fn)(FzPass *pass, void *ud), void *ud) {
  for (size_t i = 0; i < pm->num; ++i) {
    FzPMEntry *e = &pm->entries[i];
    if (e->pass ? !fn(e->pass, ud)
                : !fzPassManagerForEachPass(e->nested, fn, ud))
      return false;
  }
  return true;
}

bool fzPassManagerAppendEntry(FzPassManager *pm, FzPMEntry entry) {
  if (pm->num == pm->cap) {
    size_t cap = pm->cap ? pm->cap * 2 : 8;
    FzPMEntry *e = fzRealloc(pm->ctx, pm->entries, cap * sizeof *e);
    if (!e) {
      fzPassDestroy(entry.pass);
      fzPassManagerDestroyInternal(entry.nested);
      return false;
    }
    pm->entries = e;
    pm->cap = cap;
  }
  if (entry.nested) {
    entry.nested->parent = pm;
    entry.nested->top = pm->top;
  }
  pm->entries[pm->num++] = entry;
  return true;
}

/* Re-points the `top` of every manager nested in pm. */
static void set_top(FzPassManager *pm, FzPassManager *top) {
  pm->top = top;
  for (size_t i = 0; i < pm->num; ++i)
    if (pm->entries[i].nested)
      set_top(pm->entries[i].nested, top);
}

bool fzPassManagerSpliceEntries(FzPassManager *dst, FzPassManager *src) {
  bool ok = true;
  for (size_t i = 0; i < src->num; ++i) {
    FzPMEntry e = src->entries[i];
    if (e.nested)
      set_top(e.nested, dst->top);
    if (!fzPassManagerAppendEntry(dst, e))
      ok = false;
  }
  src->num = 0;
  return ok;
}

FzPassManager *fzPassManagerNest(FzPassManager *pm, const char *anchor) {
  FzPassManager *n = fzPassManagerCreateInternal(pm->ctx, anchor, pm);
  if (!n)
    return NULL;
  FzPMEntry e = {NULL, n};
  return fzPassManagerAppendEntry(pm, e) ? n : NULL;
}

bool fzPassDefRunsOn(const FzPassDef *def, const char *anchor) {
  if (!def->anchor || strcmp(def->anchor, "any") == 0)
    return true;
  return anchor && strcmp(def->anchor, anchor) == 0;
}

bool fzPassManagerAddPass(FzPassManager *pm, FzPass *pass) {
  if (!pass)
    return false;
  if (!fzPassDefRunsOn(pass->def, pm->anchor)) {
    fzEmitError(pm->ctx, NULL,
                "pass '%s' runs on '%s' ops and cannot be added to a pass "
                "manager on '%s'",
                pass->def->argument, pass->def->anchor,
                fzPassManagerGetAnchor(pm));
    fzPassDestroy(pass);
    return false;
  }
  FzPMEntry e = {pass, NULL};
  return fzPassManagerAppendEntry(pm, e);
}

bool fzPassManagerAddPassNested(FzPassManager *pm, FzPass *pass) {
  if (!pass)
    return false;
  if (fzPassDefRunsOn(pass->def, pm->anchor))
    return fzPassManagerAddPass(pm, pass);
  FzPassManager *n = NULL;
  if (pm->num && pm->entries[pm->num - 1].nested &&
      pm->entries[pm->num - 1].nested->anchor &&
      strcmp(pm->entries[pm->num - 1].nested->anchor, pass->def->anchor) == 0)
    n = pm->entries[pm->num - 1].nested;
  if (!n)
    n = fzPassManagerNest(pm, pass->def->anchor);
  if (!n) {
    fzPassDestroy(pass);
    return false;
  }
  return fzPassManagerAddPass(n, pass);
}

/*===--- Running ----------------------------------------------------------===*/

static bool run_pipeline(FzPassManager *pm, FzOp *op);

/* Runs one pass on op with the instrumentation around it. */
static bool run_pass(FzPassManager *top, FzPass *pass, FzOp *op) {
  FzContext *ctx = pass->ctx;
  if (!pass->initialized) {
    pass->initialized = true;
    size_t errs = fzContextGetNumErrors(ctx);
    if (pass->def->initialize && !pass->def->initialize(pass, ctx)) {
      if (fzContextGetNumErrors(ctx) == errs)
        fzEmitError(ctx, fzOpGetLoc(op), "pass '%s' failed to initialize",
                    pass->def->argument);
      return false;
    }
  }
  FzPassRunToken token;
  fzPMInstrBeforePass(top, pass, op, &token);
  size_t errs = fzContextGetNumErrors(ctx);
  bool timing = fzPMInstrTimingEnabled(top);
  double t0 = timing ? fzNowSeconds() : 0.0;
  bool ok = pass->def->run(pass, op);
  if (timing)
    pass->seconds += fzNowSeconds() - t0;
  pass->runs++;
  if (fzContextHadAllocationFailure(ctx))
    ok = false;
  if (ok && fzContextGetNumErrors(ctx) != errs)
    ok = false;
  if (!ok && fzContextGetNumErrors(ctx) == errs)
    fzOpEmitError(op, "pass '%s' failed", pass->def->argument);
  if (ok && fzPMInstrVerifyEnabled(top)) {
    double v0 = timing ? fzNowSeconds() : 0.0;
    if (!fzOpVerify(op)) {
      fzEmitError(ctx, fzOpGetLoc(op),
                  "the IR is invalid after pass '%s' (see the errors above)",
                  pass->def->argument);
      ok = false;
    }
    if (timing)
      fzPMInstrAddVerifierTime(top, fzNowSeconds() - v0);
  }
  if (ok)
    fzPMInstrAfterPass(top, pass, op, &token);
  else
    fzPMInstrAfterPassFailed(top, pass, op);
  return ok;
}

/* Runs nested manager n on every matching op directly inside op. */
static bool run_nested(FzPassManager *n, FzOp *op) {
  bool timing = fzPMInstrTimingEnabled(n->top);
  double t0 = timing ? fzNowSeconds() : 0.0;
  bool ok = true;
  size_t nr = fzOpGetNumRegions(op);
  for (size_t r = 0; r < nr && ok; ++r) {
    FzRegion *region = fzOpGetRegion(op, r);
    for (FzBlock *b = fzRegionGetFirstBlock(region); b && ok;
         b = fzBlockGetNext(b)) {
      for (FzOp *child = fzBlockGetFirstOp(b); child && ok;) {
        /* A pass may erase or add siblings? It may not: it changes only
         * the op it runs on. Still, read next first. */
        FzOp *next = fzOpGetNextInBlock(child);
        bool match = n->anchorIdent
                         ? fzOpGetName(child) == n->anchorIdent
                         : fzOpHasTrait(child, FZ_TRAIT_ISOLATED_FROM_ABOVE);
        if (match)
          ok = run_pipeline(n, child);
        child = next;
      }
    }
  }
  n->runs++;
  if (timing)
    n->seconds += fzNowSeconds() - t0;
  return ok;
}

static bool run_pipeline(FzPassManager *pm, FzOp *op) {
  for (size_t i = 0; i < pm->num; ++i) {
    FzPMEntry *e = &pm->entries[i];
    bool ok = e->pass ? run_pass(pm->top, e->pass, op)
                      : run_nested(e->nested, op);
    if (!ok)
      return false;
  }
  return true;
}

bool fzPassManagerRun(FzPassManager *pm, FzOp *op) {
  FzPassManager *top = pm->top;
  if (pm->anchorIdent && fzOpGetName(op) != pm->anchorIdent)
    return fzOpEmitError(op, "cannot run a pass manager anchored on '%s' "
                             "on this op",
                         pm->anchor);
  fzPMInstrSetTopOp(top, op);
  if (pm == top && !fzPMInstrCaptureInput(top, op))
    return false;
  bool timing = fzPMInstrTimingEnabled(top);
  double t0 = timing ? fzNowSeconds() : 0.0;
  bool ok = run_pipeline(pm, op);
  if (timing)
    pm->seconds += fzNowSeconds() - t0;
  pm->runs++;
  if (!ok && pm == top)
    fzPMInstrWriteReproducer(top);
  fzPMInstrSetTopOp(top, NULL);
  return ok;
}

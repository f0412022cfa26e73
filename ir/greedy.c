/* ir/greedy.c - the greedy pattern driver: folds and patterns applied
 * until a fixed point.
 *
 * One iteration seeds the worklist with every op nested in the root (in
 * pre-order, so that defs are usually visited before their uses) and
 * drains it. For each op: erase it if it is trivially dead; if it is a
 * constant, unique it (one constant per value, type and dialect in each
 * isolated region, hoisted to the start of that region's entry block);
 * else fold it; else try the patterns of its name by benefit until one
 * applies. The worklist stays exact through the rewriter's listener:
 *  - inserted and modified ops are (re)added;
 *  - users of a replaced value are added (the rewriter reports them as
 *    modified);
 *  - an erased op leaves the worklist, and the defining ops of its
 *    operands are added (they may have become dead);
 * so one drain reaches the fixed point for patterns that look only at an
 * op and its operands' definitions; later iterations only confirm it
 * (or catch patterns that look further). No change in an iteration means
 * convergence. More than maxIterations iterations, or more than
 * maxRewrites rewrites, is non-convergence, reported at the location of
 * the isolated-from-above op (usually the function) of the last rewrite.
 *
 * Membership of the worklist is kept in the ops (FzOp.worklistSlot, its
 * index + 1, checked against the entry), so testing it costs no hash
 * lookup; a removed op leaves a NULL hole and is never touched after it
 * is freed. One driver works on an op at a time (a driver nested in a
 * pattern would not see the outer one's erasures either).
 */
#include "ir/pass_internal.h"

/* One uniqued constant: the key (block, dialect, value, type) -> op. An
 * entry whose op is NULL was removed; its key stays as a probe link. */
typedef struct ConstEntry {
  FzBlock *block;
  const FzDialectDef *dialect;
  FzAttr *value;
  FzType *type;
  FzOp *op;
} ConstEntry;

typedef struct Driver {
  FzContext *ctx;
  FzOp *root;
  FzPatternSet *patterns;
  FzGreedyConfig cfg;
  FzGreedyStats stats;
  FzRewriter *rw;
  FzPtrVec worklist; /* ops; NULL: removed */
  bool changed;      /* in this iteration */
  size_t rewrites, maxRewrites;
  FzFoldResult *fold;
  FzValue **repl;
  size_t foldCap;
  ConstEntry *consts;
  size_t numConsts, capConsts; /* capConsts: 0 or a power of two */
  FzPtrMap constBlock;         /* uniqued constant op -> its block */
  /* For the non-convergence diagnostic. */
  FzLoc *lastScopeLoc;
  FzLoc *lastOpLoc;
  FzIdent *lastOpName;
  const char *lastPattern;
} Driver;

/*===--- Worklist ---------------------------------------------------------===*/

/* Whether op is in the worklist: its worklistSlot (index + 1) is only
 * trusted when that entry still holds op, so a stale value (from an
 * earlier iteration or driver, or a popped entry) reads as absent. */
static bool worklist_contains(const Driver *d, const FzOp *op) {
  uint32_t s = op->worklistSlot;
  return s && s <= d->worklist.len && d->worklist.data[s - 1] == op;
}

static void worklist_add(Driver *d, FzOp *op) {
  if (op == d->root || worklist_contains(d, op))
    return;
  if (d->worklist.len >= UINT32_MAX || !fzPtrVecPush(&d->worklist, op))
    return;
  op->worklistSlot = (uint32_t)d->worklist.len;
}

static void worklist_remove(Driver *d, FzOp *op) {
  if (!worklist_contains(d, op))
    return;
  d->worklist.data[op->worklistSlot - 1] = NULL;
  op->worklistSlot = 0;
}

static FzOp *worklist_pop(Driver *d) {
  while (d->worklist.len) {
    FzOp *op = fzPtrVecPop(&d->worklist);
    if (op) {
      op->worklistSlot = 0;
      return op;
    }
  }
  return NULL;
}

/*===--- Constant uniquing ------------------------------------------------===*/

static uint32_t const_hash(FzBlock *b, const FzDialectDef *dl, FzAttr *v,
                           FzType *t) {
  uint32_t h = fzHashPtr(b);
  h = fzHashCombine(h, (uint64_t)(uintptr_t)dl);
  h = fzHashCombine(h, (uint64_t)(uintptr_t)v);
  return fzHashCombine(h, (uint64_t)(uintptr_t)t);
}

/* The slot holding the key, or the first free slot for it. */
static ConstEntry *const_find(Driver *d, FzBlock *b, const FzDialectDef *dl,
                              FzAttr *v, FzType *t) {
  size_t mask = d->capConsts - 1;
  size_t i = const_hash(b, dl, v, t) & mask;
  for (;;) {
    ConstEntry *e = &d->consts[i];
    if (!e->block ||
        (e->block == b && e->dialect == dl && e->value == v && e->type == t))
      return e;
    i = (i + 1) & mask;
  }
}

static bool const_grow(Driver *d) {
  size_t cap = d->capConsts ? d->capConsts * 2 : 64;
  ConstEntry *old = d->consts;
  size_t oldCap = d->capConsts;
  d->consts = fzCalloc(d->ctx, cap, sizeof *d->consts);
  if (!d->consts) {
    d->consts = old;
    return false;
  }
  d->capConsts = cap;
  d->numConsts = 0;
  for (size_t i = 0; i < oldCap; ++i) {
    ConstEntry *e = &old[i];
    if (!e->op)
      continue;
    *const_find(d, e->block, e->dialect, e->value, e->type) = *e;
    d->numConsts++;
  }
  fzFree(d->ctx, old);
  return true;
}

static FzOp *const_lookup(Driver *d, FzBlock *b, const FzDialectDef *dl,
                          FzAttr *v, FzType *t) {
  if (!d->capConsts)
    return NULL;
  return const_find(d, b, dl, v, t)->op;
}

/* A constant-like op that can be uniqued: no operands or regions, one
 * result, a value. Fills the key's value and type. */
static bool const_key(FzOp *op, FzAttr **value, FzType **type) {
  if (!fzOpHasTrait(op, FZ_TRAIT_CONSTANT_LIKE) ||
      fzOpGetNumOperands(op) != 0 || fzOpGetNumRegions(op) != 0 ||
      fzOpGetNumResults(op) != 1)
    return false;
  *value = fzOpGetInherentAttr(op, FZ_STR("value"));
  *type = fzValueGetType(fzOpGetResult(op, 0));
  return *value != NULL;
}

static void const_record(Driver *d, FzBlock *b, const FzDialectDef *dl,
                         FzAttr *v, FzType *t, FzOp *op) {
  if ((d->numConsts + 1) * 2 > d->capConsts && !const_grow(d))
    return;
  if (!fzPtrMapPut(&d->constBlock, op, b))
    return;
  ConstEntry *e = const_find(d, b, dl, v, t);
  if (!e->block)
    d->numConsts++;
  *e = (ConstEntry){b, dl, v, t, op};
}

/* Forgets op as a uniqued constant (it is erased, moved or changed). */
static void const_forget(Driver *d, FzOp *op) {
  if (!fzPtrMapContains(&d->constBlock, op))
    return;
  FzBlock *b = fzPtrMapGet(&d->constBlock, op);
  fzPtrMapRemove(&d->constBlock, op);
  FzAttr *v;
  FzType *t;
  if (const_key(op, &v, &t)) {
    ConstEntry *e = const_find(d, b, fzOpGetDialect(op), v, t);
    if (e->op == op) {
      e->op = NULL;
      return;
    }
  }
  /* Its key changed under us: find it the slow way. */
  for (size_t i = 0; i < d->capConsts; ++i)
    if (d->consts[i].op == op) {
      d->consts[i].op = NULL;
      return;
    }
}

/* Whether op is a uniqued constant still in its recorded block. */
static bool const_is_recorded(Driver *d, FzOp *op) {
  return op && fzPtrMapGet(&d->constBlock, op) == (void *)fzOpGetBlock(op) &&
         fzOpGetBlock(op) != NULL;
}

/* The block where constants used by op live: the entry block of the
 * nearest enclosing region whose parent is isolated from above (or is
 * the root). */
static FzBlock *insertion_block(Driver *d, FzOp *op) {
  FzRegion *r = fzOpGetParentRegion(op);
  for (;;) {
    FzOp *parent = fzRegionGetParentOp(r);
    if (!parent || parent == d->root ||
        fzOpHasTrait(parent, FZ_TRAIT_ISOLATED_FROM_ABOVE) ||
        !fzOpGetParentRegion(parent))
      break;
    r = fzOpGetParentRegion(parent);
  }
  return fzRegionGetFirstBlock(r);
}

/*===--- Listener ---------------------------------------------------------===*/

static void on_inserted(FzOp *op, void *ud) {
  Driver *d = ud;
  d->changed = true;
  worklist_add(d, op);
}

static void on_modified(FzOp *op, void *ud) {
  Driver *d = ud;
  d->changed = true;
  /* A uniqued constant that was changed or moved is re-uniqued. */
  if (fzPtrMapContains(&d->constBlock, op))
    const_forget(d, op);
  worklist_add(d, op);
}

static void on_replaced(FzOp *op, FzValue *const *newValues, void *ud) {
  (void)op;
  (void)newValues;
  ((Driver *)ud)->changed = true;
}

static void on_erased(FzOp *op, void *ud) {
  Driver *d = ud;
  d->changed = true;
  worklist_remove(d, op);
  const_forget(d, op);
  /* The defining ops of its operands may now be dead; skip those that
   * are being erased along with it. */
  FzOp *erasing = d->rw->erasing;
  size_t n = fzOpGetNumOperands(op);
  for (size_t i = 0; i < n; ++i) {
    FzOp *def = fzValueGetDefiningOp(fzOpGetOperand(op, i));
    if (def && !(erasing && fzOpIsAncestor(erasing, def)))
      worklist_add(d, def);
  }
}

/*===--- Processing one op ------------------------------------------------===*/

static FzOp *isolated_ancestor(Driver *d, FzOp *op) {
  for (FzOp *p = fzOpGetParentOp(op); p; p = fzOpGetParentOp(p))
    if (p == d->root || fzOpHasTrait(p, FZ_TRAIT_ISOLATED_FROM_ABOVE))
      return p;
  return d->root;
}

static void note_rewrite(Driver *d, FzOp *op, const char *pattern) {
  d->rewrites++;
  d->lastScopeLoc = fzOpGetLoc(isolated_ancestor(d, op));
  d->lastOpLoc = fzOpGetLoc(op);
  d->lastOpName = fzOpGetName(op);
  d->lastPattern = pattern;
}

/* Uniques a constant op. Returns true when it was replaced by an earlier
 * equal constant (and erased). */
static bool unique_constant(Driver *d, FzOp *op) {
  FzAttr *v;
  FzType *t;
  if (!const_key(op, &v, &t))
    return false;
  FzBlock *b = insertion_block(d, op);
  const FzDialectDef *dl = fzOpGetDialect(op);
  FzOp *existing = const_lookup(d, b, dl, v, t);
  if (existing == op)
    return false;
  if (existing) {
    FzValue *r = fzOpGetResult(existing, 0);
    fzRewriterReplaceOp(d->rw, op, &r);
    d->stats.erased++;
    return true;
  }
  /* Keep it where it is when it already heads the block or follows a
   * uniqued constant; otherwise hoist it to the start of the block. */
  FzOp *prev = fzOpGetPrevInBlock(op);
  if (fzOpGetBlock(op) != b || (prev && !const_is_recorded(d, prev))) {
    FzOp *first = fzBlockGetFirstOp(b);
    if (first != op) {
      fzOpMoveBefore(op, first);
      d->changed = true;
    }
  }
  const_record(d, b, dl, v, t, op);
  return false;
}

/* The uniqued constant for (value, type) in the insertion block of op,
 * created at the start of that block when missing. NULL if the dialect
 * cannot materialize it. *created tells whether it is new. */
static FzValue *get_or_create_constant(Driver *d, FzOp *op,
                                       const FzDialectDef *dl, FzAttr *v,
                                       FzType *t, bool *created) {
  *created = false;
  FzBlock *b = insertion_block(d, op);
  FzOp *c = const_lookup(d, b, dl, v, t);
  if (c)
    return fzOpGetResult(c, 0);
  if (!dl || !dl->materializeConstant)
    return NULL;
  fzRewriterSetInsertionPointToStart(d->rw, b);
  c = dl->materializeConstant(&d->rw->builder, v, t, fzOpGetLoc(op));
  if (!c)
    return NULL;
  if (fzOpGetNumResults(c) != 1 ||
      fzValueGetType(fzOpGetResult(c, 0)) != t) {
    fzOpErase(c);
    return NULL;
  }
  *created = true;
  d->stats.constantsMade++;
  fzRewriterNotifyInsertedTree(d->rw, c);
  FzAttr *cv;
  FzType *ct;
  if (const_key(c, &cv, &ct) && fzOpGetDialect(c) == dl)
    const_record(d, b, dl, cv, ct, c);
  return fzOpGetResult(c, 0);
}

static bool ensure_fold_room(Driver *d, size_t n) {
  if (n <= d->foldCap)
    return true;
  size_t cap = n < 8 ? 8 : n;
  FzFoldResult *f = fzRealloc(d->ctx, d->fold, cap * sizeof *f);
  if (!f)
    return false;
  d->fold = f;
  FzValue **r = fzRealloc(d->ctx, d->repl, cap * sizeof *r);
  if (!r)
    return false;
  d->repl = r;
  d->foldCap = cap;
  return true;
}

/* Folds op. Returns true when it changed the IR. */
static bool try_fold(Driver *d, FzOp *op) {
  size_t n = fzOpGetNumResults(op);
  if (!ensure_fold_room(d, n ? n : 1) || !fzOpTryFold(op, d->fold))
    return false;
  /* In place: the hook updated op itself. */
  if (n == 0 || d->fold[0].value == fzOpGetResult(op, 0)) {
    note_rewrite(d, op, "fold");
    d->stats.folds++;
    on_modified(op, d);
    return true;
  }
  const FzDialectDef *dl = fzOpGetDialect(op);
  size_t made = 0;
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) {
    FzValue *res = fzOpGetResult(op, i);
    FzFoldResult fr = d->fold[i];
    FzValue *v = fr.value;
    if (!v && fr.attr) {
      bool created;
      v = get_or_create_constant(d, op, dl, fr.attr, fzValueGetType(res),
                                 &created);
      if (created)
        ++made;
    }
    /* A fold may not change a result's type (there is no cast to insert)
     * nor produce the op's own other results. */
    if (!v || fzValueGetType(v) != fzValueGetType(res) ||
        fzValueGetDefiningOp(v) == op)
      ok = false;
    d->repl[i] = v;
  }
  if (!ok) {
    /* Drop constants made for this attempt; keep earlier ones. */
    for (size_t i = 0; i < n && made; ++i) {
      FzOp *c = d->repl[i] ? fzValueGetDefiningOp(d->repl[i]) : NULL;
      if (c && c != op && !fzValueHasUses(d->repl[i]) &&
          fzOpHasTrait(c, FZ_TRAIT_CONSTANT_LIKE)) {
        fzRewriterEraseOp(d->rw, c);
        --made;
        d->stats.constantsMade--;
      }
    }
    return false;
  }
  note_rewrite(d, op, "fold");
  d->stats.folds++;
  fzRewriterReplaceOp(d->rw, op, d->repl);
  return true;
}

static bool try_patterns(Driver *d, FzOp *op) {
  const FzPatternList *l = fzPatternSetLookup(d->patterns, fzOpGetName(op));
  for (size_t i = 0; i < l->num; ++i) {
    const FzPattern *p = l->items[i];
    fzRewriterSetInsertionPointBefore(d->rw, op);
    /* Recorded before the call: the pattern may erase op. */
    FzLoc *scope = fzOpGetLoc(isolated_ancestor(d, op));
    FzLoc *loc = fzOpGetLoc(op);
    FzIdent *name = fzOpGetName(op);
    if (p->matchAndRewrite(op, d->rw, p->userData)) {
      d->rewrites++;
      d->stats.rewrites++;
      d->changed = true;
      d->lastScopeLoc = scope;
      d->lastOpLoc = loc;
      d->lastOpName = name;
      d->lastPattern = p->debugName ? p->debugName : "<unnamed>";
      return true;
    }
  }
  return false;
}

static void process_op(Driver *d, FzOp *op) {
  if (fzOpIsTriviallyDead(op)) {
    fzRewriterEraseOp(d->rw, op);
    d->stats.erased++;
    return;
  }
  if (fzOpHasTrait(op, FZ_TRAIT_CONSTANT_LIKE)) {
    if (unique_constant(d, op))
      return;
  } else if (d->cfg.fold && try_fold(d, op)) {
    return;
  }
  (void)try_patterns(d, op);
}

/*===--- Driver -----------------------------------------------------------===*/

static FzWalkResult collect_fn(FzOp *op, void *ud) {
  Driver *d = ud;
  if (op != d->root)
    (void)fzPtrVecPush(&d->worklist, op);
  return FZ_WALK_ADVANCE;
}

/* Fills the worklist with every op under root so that popping from the
 * back visits them in pre-order (top-down) or post-order reversed. */
static void seed_worklist(Driver *d) {
  d->worklist.len = 0;
  (void)fzOpWalk(d->root, FZ_WALK_PRE_ORDER, collect_fn, d);
  size_t n = d->worklist.len;
  for (size_t i = 0; d->cfg.topDown && i < n / 2; ++i) {
    void *t = d->worklist.data[i];
    d->worklist.data[i] = d->worklist.data[n - 1 - i];
    d->worklist.data[n - 1 - i] = t;
  }
  if (n >= UINT32_MAX) {
    d->worklist.len = 0;
    return;
  }
  for (size_t i = 0; i < n; ++i)
    ((FzOp *)d->worklist.data[i])->worklistSlot = (uint32_t)(i + 1);
}

void fzGreedyConfigInit(FzGreedyConfig *config) {
  memset(config, 0, sizeof *config);
  config->maxIterations = 10;
  config->maxRewrites = 0;
  config->topDown = true;
  config->fold = true;
  config->reportNonConvergence = true;
}

static void report_non_convergence(Driver *d, const char *what,
                                   size_t limit) {
  FzLoc *loc = d->lastScopeLoc ? d->lastScopeLoc : fzOpGetLoc(d->root);
  FzDiagnostic *diag = fzDiagBegin(
      d->ctx, FZ_SEVERITY_ERROR, loc,
      "greedy pattern rewriting did not converge within %zu %s%s", limit,
      what, limit == 1 ? "" : "s");
  if (d->lastOpLoc && d->lastOpName)
    fzDiagAttachNote(diag, d->lastOpLoc,
                     "last rewrite: '%s' op by pattern '%s'",
                     fzIdentGetString(d->lastOpName).data,
                     d->lastPattern ? d->lastPattern : "<unnamed>");
  fzDiagReport(diag);
}

bool fzApplyPatternsGreedily(FzOp *root, FzPatternSet *patterns,
                             const FzGreedyConfig *config,
                             FzGreedyStats *stats) {
  FzContext *ctx = fzOpGetContext(root);
  Driver d;
  memset(&d, 0, sizeof d);
  d.ctx = ctx;
  d.root = root;
  d.patterns = patterns;
  if (config)
    d.cfg = *config;
  else
    fzGreedyConfigInit(&d.cfg);
  size_t maxIter = d.cfg.maxIterations ? d.cfg.maxIterations : 10;
  if (patterns->failed)
    return fzEmitError(ctx, fzOpGetLoc(root),
                       "cannot rewrite: the pattern set is incomplete "
                       "(an earlier error or allocation failure)");
  if (!fzPatternSetFreeze(patterns))
    return false;
  FzRewriteListener l = {on_inserted, on_modified, on_replaced, on_erased,
                         &d};
  d.rw = fzRewriterCreate(ctx, &l);
  if (!d.rw)
    return false;
  fzPtrVecInit(&d.worklist, ctx);
  fzPtrMapInit(&d.constBlock, ctx);

  bool ok = true, converged = false, anyChange = false;
  const char *limitWhat = "iteration";
  size_t limit = maxIter;
  for (size_t iter = 0;; ++iter) {
    seed_worklist(&d);
    if (iter == 0) {
      size_t n = d.worklist.len;
      d.maxRewrites = d.cfg.maxRewrites ? d.cfg.maxRewrites
                                         : (n > (SIZE_MAX - 1024) / 64
                                                ? FZ_GREEDY_NO_LIMIT
                                                : n * 64 + 1024);
    }
    d.changed = false;
    FzOp *op;
    while ((op = worklist_pop(&d)) != NULL) {
      process_op(&d, op);
      if (d.rewrites > d.maxRewrites) {
        limitWhat = "rewrite";
        limit = d.maxRewrites;
        break;
      }
    }
    d.stats.iterations++;
    anyChange = anyChange || d.changed;
    if (fzContextHadAllocationFailure(ctx)) {
      ok = false;
      break;
    }
    if (d.rewrites > d.maxRewrites)
      break;
    if (!d.changed) {
      converged = true;
      break;
    }
    if (maxIter != FZ_GREEDY_NO_LIMIT && iter + 1 >= maxIter)
      break;
  }
  if (ok && !converged && d.cfg.reportNonConvergence) {
    report_non_convergence(&d, limitWhat, limit);
    ok = false;
  }
  d.stats.changed = anyChange;
  d.stats.converged = converged;
  if (stats)
    *stats = d.stats;
  fzRewriterDestroy(d.rw);
  fzPtrVecFree(&d.worklist);
  fzPtrMapFree(&d.constBlock);
  fzFree(ctx, d.fold);
  fzFree(ctx, d.repl);
  fzFree(ctx, d.consts);
  return ok;
}

/* ir/rewriter.c - pattern sets, the rewriter, and folding helpers.
 *
 * A pattern set is a growable array of FzPattern copies plus a frozen
 * index (root name -> patterns best-benefit-first, with the any-root
 * patterns merged in) that the greedy driver builds once per run and
 * rebuilds only after more patterns were added.
 *
 * The rewriter is a builder (insertion point) plus a listener. Every
 * mutation a pattern makes goes through it so that the listener - the
 * greedy driver's worklist - sees each inserted, modified, replaced and
 * erased op. Erasure notifies innermost ops first, while the IR is still
 * intact (operands readable), and sets rw->erasing so that a listener can
 * tell ops that are about to disappear from survivors.
 *
 * Ownership: the pattern set owns its copies and its index arena; the
 * rewriter owns nothing but its scratch vector.
 */
#include <stdlib.h>

#include "ir/pass_internal.h"

/*===--- Pattern sets -----------------------------------------------------===*/

FzPatternSet *fzPatternSetCreate(FzContext *ctx) {
  FzPatternSet *set = fzCalloc(ctx, 1, sizeof *set);
  if (!set)
    return NULL;
  set->ctx = ctx;
  fzArenaInit(&set->arena, ctx);
  fzPtrMapInit(&set->byName, ctx);
  return set;
}

void fzPatternSetDestroy(FzPatternSet *set) {
  if (!set)
    return;
  fzArenaReset(&set->arena);
  fzPtrMapFree(&set->byName);
  fzFree(set->ctx, set->patterns);
  fzFree(set->ctx, set);
}

FzContext *fzPatternSetGetContext(const FzPatternSet *set) {
  return set->ctx;
}

size_t fzPatternSetGetNumPatterns(const FzPatternSet *set) {
  return set->num;
}

bool fzPatternSetAdd(FzPatternSet *set, const FzPattern *pattern) {
  if (!pattern || !pattern->matchAndRewrite) {
    set->failed = true;
    return fzEmitError(set->ctx, NULL,
                       "pattern '%s' has no matchAndRewrite callback",
                       pattern && pattern->debugName ? pattern->debugName
                                                     : "<unnamed>");
  }
  if (set->num == set->cap) {
    size_t cap = set->cap ? set->cap * 2 : 16;
    FzPattern *p = fzRealloc(set->ctx, set->patterns, cap * sizeof *p);
    if (!p) {
      set->failed = true;
      return false;
    }
    set->patterns = p;
    set->cap = cap;
  }
  set->patterns[set->num++] = *pattern;
  set->frozen = false;
  return true;
}

typedef struct CanonCollect {
  FzPatternSet *set;
  FzContext *ctx;
} CanonCollect;

static void add_op_canonicalizations(const FzOpDef *def, void *ud) {
  CanonCollect *c = ud;
  if (def->getCanonicalizationPatterns)
    def->getCanonicalizationPatterns(c->set, c->ctx);
}

/* The providers registered in a context (a context extension). */
typedef struct CanonProviders {
  FzCanonicalizationProvider *fns;
  size_t n, cap;
} CanonProviders;
static const char kCanonProvidersKey;

static void canon_providers_destroy(FzContext *ctx, void *value) {
  CanonProviders *cp = value;
  fzFree(ctx, cp->fns);
  fzFree(ctx, cp);
}

bool fzContextAddCanonicalizationProvider(FzContext *ctx,
                                          FzCanonicalizationProvider fn) {
  CanonProviders *cp = fzContextGetExtension(ctx, &kCanonProvidersKey);
  if (!cp) {
    cp = fzCalloc(ctx, 1, sizeof *cp);
    if (!cp)
      return false;
    if (!fzContextSetExtension(ctx, &kCanonProvidersKey, cp,
                               canon_providers_destroy)) {
      fzFree(ctx, cp);
      return false;
    }
  }
  for (size_t i = 0; i < cp->n; ++i)
    if (cp->fns[i] == fn)
      return true;
  if (cp->n == cp->cap) {
    size_t c = cp->cap ? cp->cap * 2 : 4;
    FzCanonicalizationProvider *f = fzRealloc(ctx, cp->fns, c * sizeof *f);
    if (!f)
      return false;
    cp->fns = f;
    cp->cap = c;
  }
  cp->fns[cp->n++] = fn;
  return true;
}

bool fzPatternSetAddCanonicalizationPatterns(FzPatternSet *set) {
  CanonCollect c = {set, set->ctx};
  fzContextForEachOpDef(set->ctx, add_op_canonicalizations, &c);
  CanonProviders *cp = fzContextGetExtension(set->ctx, &kCanonProvidersKey);
  for (size_t i = 0; cp && i < cp->n; ++i)
    cp->fns[i](set, set->ctx);
  return !set->failed;
}

/* Stable order: higher benefit first, then insertion order. */
static int compare_patterns(const void *a, const void *b) {
  const FzPattern *pa = *(const FzPattern *const *)a;
  const FzPattern *pb = *(const FzPattern *const *)b;
  if (pa->benefit != pb->benefit)
    return pa->benefit > pb->benefit ? -1 : 1;
  return pa < pb ? -1 : (pa > pb ? 1 : 0);
}

/* A list in the arena holding the patterns named `name` (NULL: any-root
 * only) merged with the any-root patterns, sorted. */
static FzPatternList *build_list(FzPatternSet *set, const FzIdent *name) {
  size_t n = 0;
  for (size_t i = 0; i < set->num; ++i) {
    const char *r = set->patterns[i].rootName;
    if (!r || (name && strcmp(r, fzIdentGetString(name).data) == 0))
      ++n;
  }
  FzPatternList *l = fzArenaAlloc(&set->arena, sizeof *l);
  const FzPattern **items =
      n ? fzArenaAlloc(&set->arena, n * sizeof *items) : NULL;
  if (!l || (n && !items))
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < set->num; ++i) {
    const char *r = set->patterns[i].rootName;
    if (!r || (name && strcmp(r, fzIdentGetString(name).data) == 0))
      items[k++] = &set->patterns[i];
  }
  if (n > 1)
    qsort(items, n, sizeof *items, compare_patterns);
  l->num = n;
  l->items = items;
  return l;
}

bool fzPatternSetFreeze(FzPatternSet *set) {
  if (set->frozen)
    return true;
  fzArenaReset(&set->arena);
  fzPtrMapFree(&set->byName);
  fzPtrMapInit(&set->byName, set->ctx);
  FzPatternList *any = build_list(set, NULL);
  if (!any)
    return false;
  set->anyRoot = *any;
  for (size_t i = 0; i < set->num; ++i) {
    const char *r = set->patterns[i].rootName;
    if (!r)
      continue;
    FzIdent *id = fzIdentGet(set->ctx, fzStringRefFromCString(r));
    if (!id)
      return false;
    if (fzPtrMapContains(&set->byName, id))
      continue;
    FzPatternList *l = build_list(set, id);
    if (!l || !fzPtrMapPut(&set->byName, id, l))
      return false;
  }
  set->frozen = true;
  return true;
}

const FzPatternList *fzPatternSetLookup(const FzPatternSet *set,
                                        const FzIdent *name) {
  const FzPatternList *l = fzPtrMapGet(&set->byName, name);
  return l ? l : &set->anyRoot;
}

/*===--- Rewriter ---------------------------------------------------------===*/

FzRewriter *fzRewriterCreate(FzContext *ctx,
                             const FzRewriteListener *listener) {
  FzRewriter *rw = fzCalloc(ctx, 1, sizeof *rw);
  if (!rw)
    return NULL;
  rw->ctx = ctx;
  if (listener)
    rw->listener = *listener;
  fzBuilderInit(&rw->builder, ctx);
  fzPtrVecInit(&rw->scratch, ctx);
  return rw;
}

void fzRewriterDestroy(FzRewriter *rw) {
  if (!rw)
    return;
  fzPtrVecFree(&rw->scratch);
  fzFree(rw->ctx, rw);
}

FzContext *fzRewriterGetContext(const FzRewriter *rw) { return rw->ctx; }

void fzRewriterSetInsertionPointBefore(FzRewriter *rw, FzOp *op) {
  fzBuilderSetInsertionPointBefore(&rw->builder, op);
}
void fzRewriterSetInsertionPointAfter(FzRewriter *rw, FzOp *op) {
  fzBuilderSetInsertionPointAfter(&rw->builder, op);
}
void fzRewriterSetInsertionPointToStart(FzRewriter *rw, FzBlock *block) {
  fzBuilderSetInsertionPointToStart(&rw->builder, block);
}
void fzRewriterSetInsertionPointToEnd(FzRewriter *rw, FzBlock *block) {
  fzBuilderSetInsertionPointToEnd(&rw->builder, block);
}
FzBlock *fzRewriterGetInsertionBlock(const FzRewriter *rw) {
  return rw->builder.block;
}

static FzWalkResult notify_inserted_fn(FzOp *op, void *ud) {
  FzRewriter *rw = ud;
  rw->listener.notifyOpInserted(op, rw->listener.userData);
  return FZ_WALK_ADVANCE;
}

void fzRewriterNotifyInsertedTree(FzRewriter *rw, FzOp *op) {
  if (!rw->listener.notifyOpInserted || !fzOpGetBlock(op))
    return;
  if (fzOpGetNumRegions(op) == 0)
    rw->listener.notifyOpInserted(op, rw->listener.userData);
  else
    (void)fzOpWalk(op, FZ_WALK_PRE_ORDER, notify_inserted_fn, rw);
}

FzOp *fzRewriterCreateOp(FzRewriter *rw, FzOpState *st) {
  FzOp *op = fzBuilderCreate(&rw->builder, st);
  if (op)
    fzRewriterNotifyInsertedTree(rw, op);
  return op;
}

void fzRewriterInsertOp(FzRewriter *rw, FzOp *op) {
  fzBuilderInsert(&rw->builder, op);
  fzRewriterNotifyInsertedTree(rw, op);
}

FzOp *fzRewriterCloneOp(FzRewriter *rw, FzOp *op, FzIRMapping *mapping) {
  FzOp *c = fzOpClone(op, mapping);
  if (c)
    fzRewriterInsertOp(rw, c);
  return c;
}

FzValue *fzRewriterMaterializeConstant(FzRewriter *rw,
                                       const FzDialectDef *dialect,
                                       FzAttr *value, FzType *type,
                                       FzLoc *loc) {
  if (!dialect || !dialect->materializeConstant)
    return NULL;
  FzOp *c = dialect->materializeConstant(&rw->builder, value, type, loc);
  if (!c || fzOpGetNumResults(c) < 1)
    return NULL;
  fzRewriterNotifyInsertedTree(rw, c);
  return fzOpGetResult(c, 0);
}

void fzRewriterReplaceAllUsesWith(FzRewriter *rw, FzValue *from,
                                  FzValue *to) {
  if (from == to)
    return;
  if (!rw->listener.notifyOpModified) {
    fzValueReplaceAllUsesWith(from, to);
    return;
  }
  /* Collect the users first: their operands change under us. Users not
   * collected for lack of memory are still redirected (just not
   * revisited), which keeps the IR correct. */
  rw->scratch.len = 0;
  FzOp *lastUser = NULL;
  for (FzOpOperand *u = fzValueGetFirstUse(from); u;
       u = fzOpOperandGetNextUse(u)) {
    FzOp *user = fzOpOperandGetOwner(u);
    if (user != lastUser && fzPtrVecPush(&rw->scratch, user))
      lastUser = user;
  }
  fzValueReplaceAllUsesWith(from, to);
  for (size_t i = 0; i < rw->scratch.len; ++i)
    rw->listener.notifyOpModified(rw->scratch.data[i], rw->listener.userData);
  rw->scratch.len = 0;
}

static FzWalkResult notify_erased_fn(FzOp *op, void *ud) {
  FzRewriter *rw = ud;
  rw->listener.notifyOpErased(op, rw->listener.userData);
  return FZ_WALK_ADVANCE;
}

void fzRewriterEraseOp(FzRewriter *rw, FzOp *op) {
  if (rw->listener.notifyOpErased) {
    FzOp *saved = rw->erasing;
    rw->erasing = op;
    if (fzOpGetNumRegions(op) == 0)
      rw->listener.notifyOpErased(op, rw->listener.userData);
    else
      (void)fzOpWalk(op, FZ_WALK_POST_ORDER, notify_erased_fn, rw);
    rw->erasing = saved;
  }
  if (rw->builder.before == op)
    rw->builder.before = fzOpGetNextInBlock(op);
  fzOpErase(op);
}

void fzRewriterReplaceOp(FzRewriter *rw, FzOp *op,
                         FzValue *const *newValues) {
  if (rw->listener.notifyOpReplaced)
    rw->listener.notifyOpReplaced(op, newValues, rw->listener.userData);
  size_t n = fzOpGetNumResults(op);
  for (size_t i = 0; i < n; ++i)
    fzRewriterReplaceAllUsesWith(rw, fzOpGetResult(op, i), newValues[i]);
  fzRewriterEraseOp(rw, op);
}

void fzRewriterReplaceOpWithOp(FzRewriter *rw, FzOp *op, FzOp *newOp) {
  size_t n = fzOpGetNumResults(op);
  FzValue *small[8];
  FzValue **vals = small;
  if (n > 8) {
    vals = fzMalloc(rw->ctx, n * sizeof *vals);
    if (!vals)
      return;
  }
  for (size_t i = 0; i < n; ++i)
    vals[i] = fzOpGetResult(newOp, i);
  fzRewriterReplaceOp(rw, op, vals);
  if (vals != small)
    fzFree(rw->ctx, vals);
}

void fzRewriterStartModify(FzRewriter *rw, FzOp *op) {
  (void)rw;
  (void)op;
}

void fzRewriterFinalizeModify(FzRewriter *rw, FzOp *op) {
  if (rw->listener.notifyOpModified)
    rw->listener.notifyOpModified(op, rw->listener.userData);
}

void fzRewriterCancelModify(FzRewriter *rw, FzOp *op) {
  (void)rw;
  (void)op;
}

void fzRewriterSetOperand(FzRewriter *rw, FzOp *op, size_t i, FzValue *v) {
  fzRewriterStartModify(rw, op);
  fzOpSetOperand(op, i, v);
  fzRewriterFinalizeModify(rw, op);
}

void fzRewriterMoveOpBefore(FzRewriter *rw, FzOp *op, FzOp *anchor) {
  if (op == anchor)
    return;
  if (rw->builder.before == op)
    rw->builder.before = fzOpGetNextInBlock(op);
  fzOpMoveBefore(op, anchor);
  fzRewriterFinalizeModify(rw, op);
}

void fzRewriterMoveOpAfter(FzRewriter *rw, FzOp *op, FzOp *anchor) {
  if (op == anchor)
    return;
  if (rw->builder.before == op)
    rw->builder.before = fzOpGetNextInBlock(op);
  fzOpMoveAfter(op, anchor);
  fzRewriterFinalizeModify(rw, op);
}

void fzRewriterInlineBlockBefore(FzRewriter *rw, FzBlock *source,
                                 FzOp *before, FzValue *const *argValues) {
  size_t n = fzBlockGetNumArguments(source);
  for (size_t i = 0; i < n; ++i)
    fzRewriterReplaceAllUsesWith(rw, fzBlockGetArgument(source, i),
                                 argValues[i]);
  for (FzOp *op = fzBlockGetFirstOp(source); op;) {
    FzOp *next = fzOpGetNextInBlock(op);
    fzOpMoveBefore(op, before);
    fzRewriterNotifyInsertedTree(rw, op);
    op = next;
  }
  if (fzBlockGetParent(source))
    fzBlockRemoveFromRegion(source);
  fzBlockDestroy(source);
}

bool fzRewriterNotifyMatchFailure(FzRewriter *rw, FzOp *op, const char *fmt,
                                  ...) {
  (void)rw;
  (void)op;
  (void)fmt;
  return false;
}

/*===--- Folding and constants --------------------------------------------===*/

FzAttr *fzValueGetConstant(const FzValue *v) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || !fzOpHasTrait(def, FZ_TRAIT_CONSTANT_LIKE))
    return NULL;
  return fzOpGetInherentAttr(def, FZ_STR("value"));
}

bool fzOpTryFold(FzOp *op, FzFoldResult *results) {
  const FzOpDef *def = fzOpGetDef(op);
  if (!def || !def->fold || (def->traits & FZ_TRAIT_CONSTANT_LIKE))
    return false;
  size_t n = fzOpGetNumOperands(op), nres = fzOpGetNumResults(op);
  FzAttr *small[8];
  FzAttr **consts = small;
  if (n > 8) {
    consts = fzMalloc(fzOpGetContext(op), n * sizeof *consts);
    if (!consts)
      return false;
  }
  for (size_t i = 0; i < n; ++i)
    consts[i] = fzValueGetConstant(fzOpGetOperand(op, i));
  if (nres)
    memset(results, 0, nres * sizeof *results);
  bool folded = def->fold(op, consts, results);
  if (consts != small)
    fzFree(fzOpGetContext(op), consts);
  return folded;
}

const FzDialectDef *fzOpGetDialect(const FzOp *op) {
  FzStringRef name = fzIdentGetString(fzOpGetName(op));
  const char *dot = memchr(name.data, '.', name.length);
  if (!dot)
    return NULL;
  FzStringRef prefix = {name.data, (size_t)(dot - name.data)};
  return fzContextLookupDialect(fzOpGetContext(op), prefix);
}

static FzWalkResult effect_free_fn(FzOp *op, void *ud) {
  (void)ud;
  if (fzOpHasTrait(op, FZ_TRAIT_PURE) ||
      fzOpHasTrait(op, FZ_TRAIT_TERMINATOR | FZ_TRAIT_RETURN_LIKE))
    return FZ_WALK_ADVANCE;
  return FZ_WALK_INTERRUPT;
}

bool fzOpIsEffectFree(const FzOp *op) {
  if (!fzOpHasTrait(op, FZ_TRAIT_PURE))
    return false;
  if (fzOpGetNumRegions(op) == 0)
    return true;
  return fzOpWalk((FzOp *)op, FZ_WALK_PRE_ORDER, effect_free_fn, NULL) !=
         FZ_WALK_INTERRUPT;
}

bool fzOpIsTriviallyDead(const FzOp *op) {
  size_t n = fzOpGetNumResults(op);
  for (size_t i = 0; i < n; ++i)
    if (fzValueHasUses(fzOpGetResult(op, i)))
      return false;
  if (fzOpHasTrait(op, FZ_TRAIT_TERMINATOR))
    return false;
  return fzOpIsEffectFree(op);
}

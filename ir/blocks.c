/* ir/blocks.c - values and uses, blocks, regions, the builder, value
 * mappings and symbol lookup.
 *
 * Blocks hold ops in an intrusive doubly linked list and their arguments
 * as individually allocated values (so erasing one argument does not
 * move the others). Op order within a block is cached in orderIndex and
 * recomputed lazily after insertions, which makes fzOpIsBeforeInBlock
 * amortized O(1) for the verifier's dominance checks.
 */
#include <assert.h>

#include "ir/internal.h"

void fzBlockDestroyInternal(FzBlock *b); /* ops.c */

/*===--- Values and uses ------------------------------------------------===*/

FzType *fzValueGetType(const FzValue *v) { return v->type; }
void fzValueSetType(FzValue *v, FzType *type) { v->type = type; }
bool fzValueIsBlockArgument(const FzValue *v) { return v->isArg; }
FzOp *fzValueGetDefiningOp(const FzValue *v) {
  return v->isArg ? NULL : v->owner.op;
}
FzBlock *fzValueGetParentBlock(const FzValue *v) {
  return v->isArg ? v->owner.block : v->owner.op->block;
}
size_t fzValueGetIndex(const FzValue *v) { return v->index; }
FzLoc *fzValueGetLoc(const FzValue *v) {
  return v->isArg ? v->loc : v->owner.op->loc;
}
void fzValueSetLoc(FzValue *v, FzLoc *loc) {
  if (v->isArg)
    v->loc = loc ? loc : v->owner.block->ctx->unknownLoc;
}
FzContext *fzValueGetContext(const FzValue *v) {
  return v->isArg ? v->owner.block->ctx : v->owner.op->ctx;
}

FzOpOperand *fzValueGetFirstUse(const FzValue *v) { return v->firstUse; }
FzOpOperand *fzOpOperandGetNextUse(const FzOpOperand *u) { return u->nextUse; }
FzOp *fzOpOperandGetOwner(const FzOpOperand *u) { return u->owner; }
size_t fzOpOperandGetIndex(const FzOpOperand *u) { return u->index; }
FzValue *fzOpOperandGetValue(const FzOpOperand *u) { return u->value; }
void fzOpOperandSet(FzOpOperand *u, FzValue *value) {
  fzOpSetOperand(u->owner, u->index, value);
}
bool fzValueHasUses(const FzValue *v) { return v->firstUse != NULL; }
bool fzValueHasOneUse(const FzValue *v) {
  return v->firstUse && !v->firstUse->nextUse;
}
size_t fzValueGetNumUses(const FzValue *v) {
  size_t n = 0;
  for (FzOpOperand *u = v->firstUse; u; u = u->nextUse)
    ++n;
  return n;
}

void fzValueReplaceAllUsesWith(FzValue *from, FzValue *to) {
  if (from == to)
    return;
  while (from->firstUse)
    fzOpSetOperand(from->firstUse->owner, from->firstUse->index, to);
}

/*===--- Blocks ---------------------------------------------------------===*/

FzBlock *fzBlockCreate(FzContext *ctx, size_t n, FzType *const *types,
                       FzLoc *const *locs) {
  FzBlock *b = fzCalloc(ctx, 1, sizeof *b);
  if (!b)
    return NULL;
  b->ctx = ctx;
  b->orderValid = true;
  for (size_t i = 0; i < n; ++i)
    if (!fzBlockAddArgument(b, types[i], locs ? locs[i] : NULL)) {
      fzBlockDestroy(b);
      return NULL;
    }
  return b;
}

void fzBlockDestroy(FzBlock *block) {
  if (!block)
    return;
  if (block->parent)
    fzBlockRemoveFromRegion(block);
  fzBlockDestroyInternal(block);
}

FzContext *fzBlockGetContext(const FzBlock *b) { return b->ctx; }
size_t fzBlockGetNumArguments(const FzBlock *b) { return b->numArgs; }
FzValue *fzBlockGetArgument(const FzBlock *b, size_t i) {
  assert(i < b->numArgs && "block argument index out of range");
  return b->args[i];
}

FzValue *fzBlockAddArgument(FzBlock *b, FzType *type, FzLoc *loc) {
  if (b->numArgs == b->capArgs) {
    size_t c = b->capArgs ? b->capArgs * 2 : 4;
    FzValue **a = fzRealloc(b->ctx, b->args, c * sizeof *a);
    if (!a)
      return NULL;
    b->args = a;
    b->capArgs = c;
  }
  FzValue *v = fzCalloc(b->ctx, 1, sizeof *v);
  if (!v)
    return NULL;
  v->type = type;
  v->isArg = true;
  v->index = (uint32_t)b->numArgs;
  v->owner.block = b;
  v->loc = loc ? loc : b->ctx->unknownLoc;
  b->args[b->numArgs++] = v;
  return v;
}

void fzBlockEraseArgument(FzBlock *b, size_t i) {
  assert(i < b->numArgs && "block argument index out of range");
  FzValue *v = b->args[i];
  while (v->firstUse) /* contract: no uses; stay safe if there are */
    fzOpSetOperand(v->firstUse->owner, v->firstUse->index, NULL);
  fzFree(b->ctx, v);
  for (size_t j = i + 1; j < b->numArgs; ++j) {
    b->args[j - 1] = b->args[j];
    b->args[j - 1]->index = (uint32_t)(j - 1);
  }
  b->numArgs--;
}

FzOp *fzBlockGetFirstOp(const FzBlock *b) { return b->first; }
FzOp *fzBlockGetLastOp(const FzBlock *b) { return b->last; }
size_t fzBlockGetNumOps(const FzBlock *b) { return b->numOps; }

FzOp *fzBlockGetTerminator(const FzBlock *b) {
  FzOp *last = b->last;
  if (!last)
    return NULL;
  if (!last->def || (last->def->traits & FZ_TRAIT_TERMINATOR))
    return last;
  return NULL;
}

void fzBlockInsertOpBefore(FzBlock *b, FzOp *before, FzOp *op) {
  if (op->block)
    fzOpRemoveFromBlock(op);
  op->block = b;
  if (before) {
    op->next = before;
    op->prev = before->prev;
    if (before->prev)
      before->prev->next = op;
    else
      b->first = op;
    before->prev = op;
    /* Keep the cached order valid when a gap is available. */
    if (b->orderValid) {
      uint32_t lo = op->prev ? op->prev->orderIndex : 0;
      uint32_t hi = before->orderIndex;
      if (op->prev && hi - lo > 1)
        op->orderIndex = lo + (hi - lo) / 2;
      else if (!op->prev && hi > 1)
        op->orderIndex = hi / 2;
      else
        b->orderValid = false;
    }
  } else {
    op->next = NULL;
    op->prev = b->last;
    if (b->last)
      b->last->next = op;
    else
      b->first = op;
    b->last = op;
    if (b->orderValid) {
      uint32_t lo = op->prev ? op->prev->orderIndex : 0;
      if (lo < UINT32_MAX - 64)
        op->orderIndex = lo + 32;
      else
        b->orderValid = false;
    }
  }
  b->numOps++;
}

void fzBlockAppendOp(FzBlock *b, FzOp *op) {
  fzBlockInsertOpBefore(b, NULL, op);
}

void fzBlockPrependOp(FzBlock *b, FzOp *op) {
  fzBlockInsertOpBefore(b, b->first, op);
}

void fzOpRemoveFromBlock(FzOp *op) {
  FzBlock *b = op->block;
  if (!b)
    return;
  if (op->prev)
    op->prev->next = op->next;
  else
    b->first = op->next;
  if (op->next)
    op->next->prev = op->prev;
  else
    b->last = op->prev;
  op->prev = op->next = NULL;
  op->block = NULL;
  b->numOps--;
}

void fzOpMoveBefore(FzOp *op, FzOp *anchor) {
  if (op == anchor)
    return;
  fzOpRemoveFromBlock(op);
  fzBlockInsertOpBefore(anchor->block, anchor, op);
}

void fzOpMoveAfter(FzOp *op, FzOp *anchor) {
  if (op == anchor)
    return;
  fzOpRemoveFromBlock(op);
  fzBlockInsertOpBefore(anchor->block, anchor->next, op);
}

void fzBlockRecomputeOrder(FzBlock *b) {
  uint32_t i = 0;
  for (FzOp *o = b->first; o; o = o->next, i += 32)
    o->orderIndex = i + 32;
  b->orderValid = true;
}

FzRegion *fzBlockGetParent(const FzBlock *b) { return b->parent; }
FzOp *fzBlockGetParentOp(const FzBlock *b) {
  return b->parent ? b->parent->parentOp : NULL;
}
FzBlock *fzBlockGetNext(const FzBlock *b) { return b->next; }
FzBlock *fzBlockGetPrev(const FzBlock *b) { return b->prev; }

void fzBlockRemoveFromRegion(FzBlock *b) {
  FzRegion *r = b->parent;
  if (!r)
    return;
  if (b->prev)
    b->prev->next = b->next;
  else
    r->first = b->next;
  if (b->next)
    b->next->prev = b->prev;
  else
    r->last = b->prev;
  b->prev = b->next = NULL;
  b->parent = NULL;
  r->numBlocks--;
}

/*===--- Regions --------------------------------------------------------===*/

FzContext *fzRegionGetContext(const FzRegion *r) { return r->ctx; }
FzOp *fzRegionGetParentOp(const FzRegion *r) { return r->parentOp; }
size_t fzRegionGetIndex(const FzRegion *r) { return r->index; }
FzBlock *fzRegionGetFirstBlock(const FzRegion *r) { return r->first; }
FzBlock *fzRegionGetLastBlock(const FzRegion *r) { return r->last; }
size_t fzRegionGetNumBlocks(const FzRegion *r) { return r->numBlocks; }
bool fzRegionIsEmpty(const FzRegion *r) { return r->first == NULL; }

void fzRegionInsertBlockBefore(FzRegion *r, FzBlock *before, FzBlock *b) {
  if (b->parent)
    fzBlockRemoveFromRegion(b);
  b->parent = r;
  if (before) {
    b->next = before;
    b->prev = before->prev;
    if (before->prev)
      before->prev->next = b;
    else
      r->first = b;
    before->prev = b;
  } else {
    b->next = NULL;
    b->prev = r->last;
    if (r->last)
      r->last->next = b;
    else
      r->first = b;
    r->last = b;
  }
  r->numBlocks++;
}

void fzRegionAppendBlock(FzRegion *r, FzBlock *b) {
  fzRegionInsertBlockBefore(r, NULL, b);
}

void fzRegionTakeBody(FzRegion *dst, FzRegion *src) {
  while (src->first) {
    FzBlock *b = src->first;
    fzBlockRemoveFromRegion(b);
    fzRegionAppendBlock(dst, b);
  }
}

FzRegion *fzRegionCreate(FzContext *ctx) {
  FzRegion *r = fzCalloc(ctx, 1, sizeof *r);
  if (!r)
    return NULL;
  r->ctx = ctx;
  r->standalone = true;
  return r;
}

void fzRegionDestroy(FzRegion *r) {
  if (!r)
    return;
  /* Drop references across all blocks first, then free them. */
  while (r->first)
    fzBlockDestroy(r->first);
  if (r->standalone)
    fzFree(r->ctx, r);
}

/*===--- Builder --------------------------------------------------------===*/

void fzBuilderInit(FzBuilder *b, FzContext *ctx) {
  b->ctx = ctx;
  b->block = NULL;
  b->before = NULL;
}
void fzBuilderSetInsertionPointToEnd(FzBuilder *b, FzBlock *block) {
  b->block = block;
  b->before = NULL;
}
void fzBuilderSetInsertionPointToStart(FzBuilder *b, FzBlock *block) {
  b->block = block;
  b->before = block->first;
}
void fzBuilderSetInsertionPointBefore(FzBuilder *b, FzOp *op) {
  b->block = op->block;
  b->before = op;
}
void fzBuilderSetInsertionPointAfter(FzBuilder *b, FzOp *op) {
  b->block = op->block;
  b->before = op->next;
}
void fzBuilderInsert(FzBuilder *b, FzOp *op) {
  if (b->block)
    fzBlockInsertOpBefore(b->block, b->before, op);
}
FzOp *fzBuilderCreate(FzBuilder *b, FzOpState *st) {
  FzOp *op = fzOpCreate(st);
  if (op)
    fzBuilderInsert(b, op);
  return op;
}

/*===--- Mapping --------------------------------------------------------===*/

struct FzIRMapping {
  FzPtrMap map;
};

FzIRMapping *fzIRMappingCreate(FzContext *ctx) {
  FzIRMapping *m = fzMalloc(ctx, sizeof *m);
  if (m)
    fzPtrMapInit(&m->map, ctx);
  return m;
}
void fzIRMappingDestroy(FzIRMapping *m) {
  if (!m)
    return;
  FzContext *ctx = m->map.ctx;
  fzPtrMapFree(&m->map);
  fzFree(ctx, m);
}
bool fzIRMappingMap(FzIRMapping *m, FzValue *from, FzValue *to) {
  return fzPtrMapPut(&m->map, from, to);
}
FzValue *fzIRMappingLookup(const FzIRMapping *m, const FzValue *from) {
  return fzPtrMapGet(&m->map, from);
}

/*===--- Symbols --------------------------------------------------------===*/

FzStringRef fzSymbolGetName(const FzOp *op) {
  FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("sym_name"));
  if (a && a->kind == FZ_ATTR_STRING)
    return fzStringAttrGetValue(a);
  FzStringRef none = {NULL, 0};
  return none;
}

FzOp *fzSymbolTableLookupIn(FzOp *tableOp, FzStringRef name) {
  if (tableOp->numRegions == 0 || !tableOp->regions[0].first)
    return NULL;
  for (FzOp *o = tableOp->regions[0].first->first; o; o = o->next) {
    FzStringRef s = fzSymbolGetName(o);
    if (s.data && fzStringRefEqual(s, name))
      return o;
  }
  return NULL;
}

FzOp *fzSymbolTableGetNearest(FzOp *op) {
  for (FzOp *o = op; o; o = fzOpGetParentOp(o))
    if (fzOpHasTrait(o, FZ_TRAIT_SYMBOL_TABLE))
      return o;
  return NULL;
}

struct FzSymbolTable {
  FzContext *ctx;
  FzPtrMap byName; /* FzIdent* -> FzOp* */
};

FzSymbolTable *fzSymbolTableCreate(FzOp *tableOp) {
  FzContext *ctx = tableOp->ctx;
  FzSymbolTable *t = fzMalloc(ctx, sizeof *t);
  if (!t)
    return NULL;
  t->ctx = ctx;
  fzPtrMapInit(&t->byName, ctx);
  if (tableOp->numRegions && tableOp->regions[0].first)
    for (FzOp *o = tableOp->regions[0].first->first; o; o = o->next) {
      FzStringRef s = fzSymbolGetName(o);
      if (!s.data)
        continue;
      FzIdent *id = fzIdentGet(ctx, s);
      if (!id || (!fzPtrMapContains(&t->byName, id) &&
                  !fzPtrMapPut(&t->byName, id, o))) {
        fzSymbolTableDestroy(t);
        return NULL;
      }
    }
  return t;
}

void fzSymbolTableDestroy(FzSymbolTable *t) {
  if (!t)
    return;
  fzPtrMapFree(&t->byName);
  fzFree(t->ctx, t);
}

FzOp *fzSymbolTableLookup(const FzSymbolTable *t, FzStringRef name) {
  FzIdent *id = fzIdentGet(t->ctx, name);
  return id ? fzPtrMapGet(&t->byName, id) : NULL;
}

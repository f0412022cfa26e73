/* ir/ops.c - operations: creation from an FzOpState, destruction,
 * operands and their use lists, attributes and properties, walking and
 * cloning.
 *
 * An op is one heap block: the FzOp header, then its results, its
 * regions and (until the operand list grows) its operands. Use lists are
 * intrusive and doubly linked through prevUse, so linking and unlinking
 * an operand is O(1). Destroying an op first drops every operand inside
 * it (so values defined and used within it can go in any order), then
 * frees.
 */
#include <assert.h>

#include "ir/internal.h"

/*===--- Use lists ------------------------------------------------------===*/

static void use_link(FzOpOperand *u, FzValue *v) {
  u->value = v;
  if (!v) {
    u->nextUse = NULL;
    u->prevUse = NULL;
    return;
  }
  u->nextUse = v->firstUse;
  if (v->firstUse)
    v->firstUse->prevUse = &u->nextUse;
  u->prevUse = &v->firstUse;
  v->firstUse = u;
}

static void use_unlink(FzOpOperand *u) {
  if (!u->value)
    return;
  *u->prevUse = u->nextUse;
  if (u->nextUse)
    u->nextUse->prevUse = u->prevUse;
  u->value = NULL;
  u->nextUse = NULL;
  u->prevUse = NULL;
}

/*===--- Op state -------------------------------------------------------===*/

void fzOpStateInit(FzOpState *st, FzContext *ctx, FzStringRef name,
                   FzLoc *loc) {
  memset(st, 0, sizeof *st);
  st->ctx = ctx;
  st->name = fzIdentGet(ctx, name);
  st->loc = loc ? loc : fzUnknownLocGet(ctx);
  if (!st->name)
    st->failed = true;
}

static bool grow(FzOpState *st, void **arr, size_t *cap, size_t need,
                 size_t eltSize) {
  if (need <= *cap)
    return true;
  size_t c = *cap ? *cap * 2 : 4;
  while (c < need)
    c *= 2;
  size_t bytes;
  void *p = NULL;
  if (fzMulSize(c, eltSize, &bytes))
    p = fzRealloc(st->ctx, *arr, bytes);
  if (!p) {
    st->failed = true;
    return false;
  }
  *arr = p;
  *cap = c;
  return true;
}

void fzOpStateAddOperands(FzOpState *st, size_t n, FzValue *const *values) {
  if (!grow(st, (void **)&st->operands, &st->capOperands,
            st->numOperands + n, sizeof(FzValue *)))
    return;
  if (n)
    memcpy(st->operands + st->numOperands, values, n * sizeof(FzValue *));
  st->numOperands += n;
}

void fzOpStateAddResults(FzOpState *st, size_t n, FzType *const *types) {
  if (!grow(st, (void **)&st->resultTypes, &st->capResults,
            st->numResults + n, sizeof(FzType *)))
    return;
  if (n)
    memcpy(st->resultTypes + st->numResults, types, n * sizeof(FzType *));
  st->numResults += n;
}

static void add_named(FzOpState *st, FzNamedAttr **arr, size_t *num,
                      size_t *cap, FzStringRef name, FzAttr *value) {
  if (!value) {
    /* A caller error, not an allocation failure: report it as such. */
    if (!st->invalid)
      fzEmitError(st->ctx, st->loc, "attribute '%.*s' of '%s' has no value",
                  (int)name.length, name.data,
                  st->name ? st->name->str : "?");
    st->invalid = true;
    return;
  }
  FzIdent *id = fzIdentGet(st->ctx, name);
  if (!id) {
    st->failed = true;
    return;
  }
  if (!grow(st, (void **)arr, cap, *num + 1, sizeof(FzNamedAttr)))
    return;
  (*arr)[*num].name = id;
  (*arr)[*num].value = value;
  (*num)++;
}

void fzOpStateAddNamedAttrs(FzOpState *st, size_t n,
                            const FzNamedAttr *entries) {
  if (!n || !grow(st, (void **)&st->attrs, &st->capAttrs, st->numAttrs + n,
                  sizeof(FzNamedAttr)))
    return;
  memcpy(st->attrs + st->numAttrs, entries, n * sizeof(FzNamedAttr));
  st->numAttrs += n;
}

void fzOpStateAddAttr(FzOpState *st, FzStringRef name, FzAttr *value) {
  add_named(st, &st->attrs, &st->numAttrs, &st->capAttrs, name, value);
}

void fzOpStateAddProp(FzOpState *st, FzStringRef name, FzAttr *value) {
  add_named(st, &st->props, &st->numProps, &st->capProps, name, value);
}

void fzOpStateAddRegionTaken(FzOpState *st, FzRegion *region) {
  if (!grow(st, (void **)&st->regions, &st->capRegions, st->numRegions + 1,
            sizeof(FzRegion *))) {
    fzRegionDestroy(region);
    return;
  }
  st->regions[st->numRegions++] = region;
}

FzRegion *fzOpStateAddRegion(FzOpState *st) {
  FzRegion *r = fzRegionCreate(st->ctx);
  if (!r) {
    st->failed = true;
    return NULL;
  }
  fzOpStateAddRegionTaken(st, r);
  return st->failed ? NULL : r;
}

void fzOpStateDispose(FzOpState *st) {
  FzContext *ctx = st->ctx;
  for (size_t i = 0; i < st->numRegions; ++i)
    fzRegionDestroy(st->regions[i]);
  fzFree(ctx, st->operands);
  fzFree(ctx, st->resultTypes);
  fzFree(ctx, st->attrs);
  fzFree(ctx, st->props);
  fzFree(ctx, st->regions);
  memset(st, 0, sizeof *st);
  st->ctx = ctx;
}

/*===--- Creation and destruction ---------------------------------------===*/

static bool is_inherent(const FzOpDef *def, const FzIdent *name) {
  if (!def || !def->inherentAttrs)
    return false;
  for (const char *const *p = def->inherentAttrs; *p; ++p)
    if (strlen(*p) == name->len && !memcmp(*p, name->str, name->len))
      return true;
  return false;
}

/* Allocates an op with everything inline and links its operands. Regions
 * are left empty (caller fills them). */
static FzOp *op_alloc(FzContext *ctx, FzIdent *name, FzLoc *loc,
                      size_t numOperands, FzValue *const *operands,
                      size_t numResults, FzType *const *types,
                      size_t numRegions, FzAttr *attrs, FzAttr *props) {
  if (numOperands > UINT32_MAX / 2 || numResults > UINT32_MAX / 2 ||
      numRegions > UINT32_MAX / 2) {
    fzEmitError(ctx, loc, "operation '%s' has too many operands, results "
                "or regions", name->str);
    return NULL;
  }
  size_t size = sizeof(FzOp) + numResults * sizeof(FzValue) +
                numRegions * sizeof(FzRegion) +
                numOperands * sizeof(FzOpOperand);
  FzOp *op = fzMalloc(ctx, size);
  if (!op)
    return NULL;
  memset(op, 0, sizeof *op);
  op->ctx = ctx;
  op->name = name;
  op->def = name->opDef;
  op->loc = loc ? loc : ctx->unknownLoc;
  op->attrs = attrs ? attrs : ctx->emptyDict;
  op->props = props ? props : ctx->emptyDict;
  op->numResults = (uint32_t)numResults;
  op->results = (FzValue *)(op + 1);
  op->numRegions = (uint32_t)numRegions;
  op->regions = (FzRegion *)(op->results + numResults);
  op->numOperands = op->capOperands = (uint32_t)numOperands;
  op->operands = (FzOpOperand *)(op->regions + numRegions);
  op->operandsInline = true;
  for (size_t i = 0; i < numResults; ++i) {
    FzValue *v = &op->results[i];
    memset(v, 0, sizeof *v);
    v->type = types[i];
    v->index = (uint32_t)i;
    v->owner.op = op;
  }
  for (size_t i = 0; i < numRegions; ++i) {
    FzRegion *r = &op->regions[i];
    memset(r, 0, sizeof *r);
    r->parentOp = op;
    r->ctx = ctx;
    r->index = (uint32_t)i;
  }
  for (size_t i = 0; i < numOperands; ++i) {
    FzOpOperand *u = &op->operands[i];
    u->owner = op;
    u->index = (uint32_t)i;
    use_link(u, operands[i]);
  }
  return op;
}

static FzAttr *merge_dict(FzContext *ctx, FzAttr *base, size_t n,
                          const FzNamedAttr *extra, FzLoc *loc) {
  if (!base || base->u.dict.n == 0)
    return fzDictAttrGet(ctx, n, extra, loc); /* sorts and uniques */
  if (n == 0)
    return base;
  size_t nb = base->u.dict.n;
  FzNamedAttr *all = fzCalloc(ctx, nb + n, sizeof *all);
  if (!all)
    return NULL;
  memcpy(all, base->u.dict.entries, nb * sizeof *all);
  memcpy(all + nb, extra, n * sizeof *all);
  FzAttr *d = fzDictAttrGet(ctx, nb + n, all, loc);
  fzFree(ctx, all);
  return d;
}

FzOp *fzOpCreate(FzOpState *st) {
  FzContext *ctx = st->ctx;
  FzOp *op = NULL;
  if (st->failed) {
    fzNoteAllocationFailure(ctx);
    goto done;
  }
  if (st->invalid)
    goto done; /* already reported */
  for (size_t i = 0; i < st->numResults; ++i)
    if (!st->resultTypes[i]) {
      fzEmitError(ctx, st->loc, "result #%zu of '%s' has no type", i,
                  st->name->str);
      goto done;
    }
  const FzOpDef *def = st->name->opDef;
  if (!def) {
    const char *dot = strchr(st->name->str, '.');
    FzStringRef dialect = {st->name->str,
                           dot ? (size_t)(dot - st->name->str) : 0};
    if (dot && fzContextLookupDialect(ctx, dialect)) {
      fzEmitError(ctx, st->loc,
                  "unregistered operation '%s' found in dialect '%.*s' that "
                  "does not allow unknown operations",
                  st->name->str, (int)dialect.length, dialect.data);
      goto done;
    }
    if (!ctx->allowUnregistered) {
      fzEmitError(ctx, st->loc,
                  "operation being parsed with an unregistered dialect; use "
                  "--allow-unregistered-dialect to allow it: '%s'",
                  st->name->str);
      goto done;
    }
  }
  /* Split discardable attributes from inherent ones (which become
   * properties for a registered op that declares them). Small lists use
   * the stack; an op without attributes costs no work here at all. */
  FzAttr *attrDict = ctx->emptyDict, *propDict = ctx->emptyDict;
  if (st->numAttrs || st->numProps || st->propsDict) {
    size_t cap = st->numAttrs + st->numProps + 1;
    FzNamedAttr smallA[16], smallP[16];
    FzNamedAttr *attrs = smallA, *props = smallP;
    if (cap > 16) {
      attrs = fzCalloc(ctx, cap, sizeof *attrs);
      props = fzCalloc(ctx, cap, sizeof *props);
    }
    if (!attrs || !props) {
      fzFree(ctx, attrs);
      fzFree(ctx, props);
      goto done;
    }
    size_t nAttr = 0, nProp = 0;
    for (size_t i = 0; i < st->numAttrs; ++i) {
      if (is_inherent(def, st->attrs[i].name))
        props[nProp++] = st->attrs[i];
      else
        attrs[nAttr++] = st->attrs[i];
    }
    for (size_t i = 0; i < st->numProps; ++i)
      props[nProp++] = st->props[i];
    attrDict = merge_dict(ctx, NULL, nAttr, attrs, st->loc);
    propDict =
        attrDict ? merge_dict(ctx, st->propsDict, nProp, props, st->loc) : NULL;
    if (attrs != smallA) {
      fzFree(ctx, attrs);
      fzFree(ctx, props);
    }
    if (!attrDict || !propDict)
      goto done;
  }
  op = op_alloc(ctx, st->name, st->loc, st->numOperands, st->operands,
                st->numResults, st->resultTypes, st->numRegions, attrDict,
                propDict);
  if (!op)
    goto done;
  for (size_t i = 0; i < st->numRegions; ++i)
    fzRegionTakeBody(&op->regions[i], st->regions[i]);
done:
  fzOpStateDispose(st);
  return op;
}

static void region_drop_refs(FzRegion *r);

/* Unlinks every operand of op and of everything nested in it. */
static void op_drop_refs(FzOp *op) {
  for (uint32_t i = 0; i < op->numOperands; ++i)
    use_unlink(&op->operands[i]);
  for (uint32_t i = 0; i < op->numRegions; ++i)
    region_drop_refs(&op->regions[i]);
}

static void region_drop_refs(FzRegion *r) {
  for (FzBlock *b = r->first; b; b = b->next)
    for (FzOp *o = b->first; o; o = o->next)
      op_drop_refs(o);
}

/* Severs remaining uses of a value that is going away: such an operand
 * reads NULL afterwards, which the verifier reports. */
static void value_orphan_uses(FzValue *v) {
  while (v->firstUse)
    use_unlink(v->firstUse);
}

static void block_free(FzBlock *b);

static void op_free(FzOp *op) {
  for (uint32_t i = 0; i < op->numRegions; ++i) {
    FzBlock *b = op->regions[i].first;
    while (b) {
      FzBlock *next = b->next;
      block_free(b);
      b = next;
    }
  }
  for (uint32_t i = 0; i < op->numResults; ++i)
    value_orphan_uses(&op->results[i]);
  if (!op->operandsInline)
    fzFree(op->ctx, op->operands);
  fzFree(op->ctx, op);
}

static void block_free(FzBlock *b) {
  FzOp *o = b->first;
  while (o) {
    FzOp *next = o->next;
    op_free(o);
    o = next;
  }
  for (size_t i = 0; i < b->numArgs; ++i) {
    value_orphan_uses(b->args[i]);
    fzFree(b->ctx, b->args[i]);
  }
  fzFree(b->ctx, b->args);
  fzFree(b->ctx, b);
}

void fzOpDestroy(FzOp *op) {
  if (!op)
    return;
  if (op->block)
    fzOpRemoveFromBlock(op);
  op_drop_refs(op);
  op_free(op);
}

void fzOpErase(FzOp *op) { fzOpDestroy(op); }

/* Used by blocks.c to destroy a block with the same two-phase scheme. */
void fzBlockDestroyInternal(FzBlock *b);
void fzBlockDestroyInternal(FzBlock *b) {
  for (FzOp *o = b->first; o; o = o->next)
    op_drop_refs(o);
  block_free(b);
}

/*===--- Accessors ------------------------------------------------------===*/

FzContext *fzOpGetContext(const FzOp *op) { return op->ctx; }
FzIdent *fzOpGetName(const FzOp *op) { return op->name; }
const FzOpDef *fzOpGetDef(const FzOp *op) { return op->def; }
FzLoc *fzOpGetLoc(const FzOp *op) { return op->loc; }
void fzOpSetLoc(FzOp *op, FzLoc *loc) {
  op->loc = loc ? loc : op->ctx->unknownLoc;
}
bool fzOpHasTrait(const FzOp *op, uint64_t mask) {
  return op->def && (op->def->traits & mask) == mask;
}

size_t fzOpGetNumOperands(const FzOp *op) { return op->numOperands; }
FzValue *fzOpGetOperand(const FzOp *op, size_t i) {
  assert(i < op->numOperands && "operand index out of range");
  return op->operands[i].value;
}
FzOpOperand *fzOpGetOpOperand(FzOp *op, size_t i) {
  assert(i < op->numOperands && "operand index out of range");
  return &op->operands[i];
}
void fzOpSetOperand(FzOp *op, size_t i, FzValue *value) {
  assert(i < op->numOperands && "operand index out of range");
  FzOpOperand *u = &op->operands[i];
  if (u->value == value)
    return;
  use_unlink(u);
  use_link(u, value);
}

bool fzOpSetOperands(FzOp *op, size_t n, FzValue *const *values) {
  if (n > op->capOperands) {
    if (n > UINT32_MAX / 2)
      return fzOpEmitError(op, "too many operands");
    FzOpOperand *arr = fzCalloc(op->ctx, n, sizeof *arr);
    if (!arr)
      return false;
    for (uint32_t i = 0; i < op->numOperands; ++i)
      use_unlink(&op->operands[i]);
    if (!op->operandsInline)
      fzFree(op->ctx, op->operands);
    op->operands = arr;
    op->operandsInline = false;
    op->capOperands = (uint32_t)n;
    op->numOperands = 0;
  }
  for (uint32_t i = 0; i < op->numOperands; ++i)
    use_unlink(&op->operands[i]);
  for (size_t i = 0; i < n; ++i) {
    FzOpOperand *u = &op->operands[i];
    u->owner = op;
    u->index = (uint32_t)i;
    use_link(u, values[i]);
  }
  op->numOperands = (uint32_t)n;
  return true;
}

size_t fzOpGetNumResults(const FzOp *op) { return op->numResults; }
FzValue *fzOpGetResult(const FzOp *op, size_t i) {
  assert(i < op->numResults && "result index out of range");
  return &op->results[i];
}
size_t fzOpGetNumRegions(const FzOp *op) { return op->numRegions; }
FzRegion *fzOpGetRegion(const FzOp *op, size_t i) {
  assert(i < op->numRegions && "region index out of range");
  return &op->regions[i];
}

FzAttr *fzOpGetAttrDict(const FzOp *op) { return op->attrs; }
FzAttr *fzOpGetAttr(const FzOp *op, FzStringRef name) {
  return fzDictAttrLookup(op->attrs, name);
}
FzAttr *fzOpGetPropDict(const FzOp *op) { return op->props; }
FzAttr *fzOpGetProp(const FzOp *op, FzStringRef name) {
  return fzDictAttrLookup(op->props, name);
}
FzAttr *fzOpGetInherentAttr(const FzOp *op, FzStringRef name) {
  FzAttr *a = fzDictAttrLookup(op->props, name);
  return a ? a : fzDictAttrLookup(op->attrs, name);
}

/* A copy of dict with name set to value (removed when value is NULL). */
static FzAttr *dict_with(FzContext *ctx, FzAttr *dict, FzStringRef name,
                         FzAttr *value) {
  FzIdent *id = fzIdentGet(ctx, name);
  if (!id)
    return NULL;
  size_t n = dict->u.dict.n;
  FzNamedAttr *e = fzCalloc(ctx, n + 1, sizeof *e);
  if (!e)
    return NULL;
  size_t m = 0;
  bool replaced = false;
  for (size_t i = 0; i < n; ++i) {
    if (dict->u.dict.entries[i].name == id) {
      replaced = true;
      if (value)
        e[m++] = (FzNamedAttr){id, value};
    } else {
      e[m++] = dict->u.dict.entries[i];
    }
  }
  if (!replaced && value)
    e[m++] = (FzNamedAttr){id, value};
  FzAttr *d = fzDictAttrGet(ctx, m, e, NULL);
  fzFree(ctx, e);
  return d;
}

bool fzOpSetAttr(FzOp *op, FzStringRef name, FzAttr *value) {
  FzAttr *d = dict_with(op->ctx, op->attrs, name, value);
  if (!d)
    return false;
  op->attrs = d;
  return true;
}

void fzOpSetAttrDict(FzOp *op, FzAttr *dict) {
  op->attrs = dict ? dict : op->ctx->emptyDict;
}

bool fzOpSetProp(FzOp *op, FzStringRef name, FzAttr *value) {
  FzAttr *d = dict_with(op->ctx, op->props, name, value);
  if (!d)
    return false;
  op->props = d;
  return true;
}

void fzOpSetPropDict(FzOp *op, FzAttr *dict) {
  op->props = dict ? dict : op->ctx->emptyDict;
}

FzBlock *fzOpGetBlock(const FzOp *op) { return op->block; }
FzRegion *fzOpGetParentRegion(const FzOp *op) {
  return op->block ? op->block->parent : NULL;
}
FzOp *fzOpGetParentOp(const FzOp *op) {
  FzRegion *r = fzOpGetParentRegion(op);
  return r ? r->parentOp : NULL;
}
FzOp *fzOpGetNextInBlock(const FzOp *op) { return op->next; }
FzOp *fzOpGetPrevInBlock(const FzOp *op) { return op->prev; }

bool fzOpIsAncestor(const FzOp *ancestor, const FzOp *op) {
  for (const FzOp *o = op; o; o = fzOpGetParentOp(o))
    if (o == ancestor)
      return true;
  return false;
}

bool fzOpIsBeforeInBlock(const FzOp *a, const FzOp *b) {
  FzBlock *blk = a->block;
  if (!blk->orderValid)
    fzBlockRecomputeOrder(blk);
  return a->orderIndex < b->orderIndex;
}

/*===--- Walk -----------------------------------------------------------===*/

static FzWalkResult walk(FzOp *op, FzWalkOrder order, FzWalkFn fn, void *ud) {
  if (order == FZ_WALK_PRE_ORDER) {
    FzWalkResult r = fn(op, ud);
    if (r == FZ_WALK_INTERRUPT)
      return r;
    if (r == FZ_WALK_SKIP)
      return FZ_WALK_ADVANCE;
  }
  for (uint32_t i = 0; i < op->numRegions; ++i) {
    for (FzBlock *b = op->regions[i].first; b; b = b->next) {
      FzOp *o = b->first;
      while (o) {
        FzOp *next = o->next; /* o may be erased in post-order */
        if (walk(o, order, fn, ud) == FZ_WALK_INTERRUPT)
          return FZ_WALK_INTERRUPT;
        o = next;
      }
    }
  }
  if (order == FZ_WALK_POST_ORDER) {
    FzWalkResult r = fn(op, ud);
    if (r == FZ_WALK_INTERRUPT)
      return r;
  }
  return FZ_WALK_ADVANCE;
}

FzWalkResult fzOpWalk(FzOp *op, FzWalkOrder order, FzWalkFn fn,
                      void *userData) {
  return walk(op, order, fn, userData);
}

/*===--- Clone ----------------------------------------------------------===*/

static bool clone_region(FzRegion *dst, FzRegion *src, FzIRMapping *m);

static FzOp *clone_op(FzOp *op, FzIRMapping *m) {
  FzContext *ctx = op->ctx;
  FzValue *small[8];
  FzValue **ops = small;
  if (op->numOperands > 8 &&
      !(ops = fzCalloc(ctx, op->numOperands, sizeof *ops)))
    return NULL;
  for (uint32_t i = 0; i < op->numOperands; ++i) {
    FzValue *v = op->operands[i].value;
    FzValue *mapped = v ? fzIRMappingLookup(m, v) : NULL;
    ops[i] = mapped ? mapped : v;
  }
  FzType *tsmall[8];
  FzType **types = tsmall;
  if (op->numResults > 8 &&
      !(types = fzCalloc(ctx, op->numResults, sizeof *types))) {
    if (ops != small)
      fzFree(ctx, ops);
    return NULL;
  }
  for (uint32_t i = 0; i < op->numResults; ++i)
    types[i] = op->results[i].type;
  FzOp *c = op_alloc(ctx, op->name, op->loc, op->numOperands, ops,
                     op->numResults, types, op->numRegions, op->attrs,
                     op->props);
  if (ops != small)
    fzFree(ctx, ops);
  if (types != tsmall)
    fzFree(ctx, types);
  if (!c)
    return NULL;
  for (uint32_t i = 0; i < op->numResults; ++i)
    if (!fzIRMappingMap(m, &op->results[i], &c->results[i])) {
      fzOpDestroy(c);
      return NULL;
    }
  for (uint32_t i = 0; i < op->numRegions; ++i)
    if (!clone_region(&c->regions[i], &op->regions[i], m)) {
      fzOpDestroy(c);
      return NULL;
    }
  return c;
}

static bool clone_region(FzRegion *dst, FzRegion *src, FzIRMapping *m) {
  FzContext *ctx = src->ctx;
  /* Blocks and their arguments first, so ops may refer to any block's
   * arguments regardless of order. */
  for (FzBlock *b = src->first; b; b = b->next) {
    FzBlock *nb = fzBlockCreate(ctx, 0, NULL, NULL);
    if (!nb)
      return false;
    fzRegionAppendBlock(dst, nb);
    for (size_t i = 0; i < b->numArgs; ++i) {
      FzValue *a = fzBlockAddArgument(nb, b->args[i]->type, b->args[i]->loc);
      if (!a || !fzIRMappingMap(m, b->args[i], a))
        return false;
    }
  }
  FzBlock *nb = dst->first;
  for (FzBlock *b = src->first; b; b = b->next, nb = nb->next)
    for (FzOp *o = b->first; o; o = o->next) {
      FzOp *c = clone_op(o, m);
      if (!c)
        return false;
      fzBlockAppendOp(nb, c);
    }
  return true;
}

/* Operands that named a value cloned only later (a use before its
 * definition, legal in graph regions) still point at the original;
 * redirect them now that the mapping is complete. */
static FzWalkResult remap_late(FzOp *o, void *ud) {
  FzIRMapping *m = ud;
  for (uint32_t i = 0; i < o->numOperands; ++i) {
    FzValue *v = o->operands[i].value;
    FzValue *mapped = v ? fzIRMappingLookup(m, v) : NULL;
    if (mapped && mapped != v)
      fzOpSetOperand(o, i, mapped);
  }
  return FZ_WALK_ADVANCE;
}

FzOp *fzOpClone(FzOp *op, FzIRMapping *mapping) {
  FzIRMapping *m = mapping ? mapping : fzIRMappingCreate(op->ctx);
  if (!m)
    return NULL;
  FzOp *c = clone_op(op, m);
  if (c) {
    for (uint32_t i = 0; i < c->numRegions; ++i)
      for (FzBlock *b = c->regions[i].first; b; b = b->next)
        for (FzOp *o = b->first; o; o = o->next)
          fzOpWalk(o, FZ_WALK_PRE_ORDER, remap_late, m);
  }
  if (!mapping)
    fzIRMappingDestroy(m);
  return c;
}

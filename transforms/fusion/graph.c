/* transforms/fusion/graph.c - the node graph the fusion pass works on:
 * one node per top-level op of a function body, what the pass knows about
 * each op (role, fusion kind, sizes), edges from producers to users, and
 * groups initialized as singletons.
 *
 * Pred lists are aligned with operands (pred[k] produces operand k,
 * NO_NODE for a function argument), so the analysis never looks values up
 * in a hash table; succ lists hold each use once and are sorted by
 * canonical position. Ops with side effects get an extra edge from the
 * previous such op, which keeps their relative order. Adjacency arrays
 * live in F->arena. canonical.c orders the nodes, merge.c merges groups.
 */
#include <stdlib.h>
#include <string.h>

#include "fz/pass.h"
#include "transforms/fusion/fusion_internal.h"

/*===--- Nodes and edges ------------------------------------------------===*/

uint32_t ffNodeOf(FFuser *F, FzOp *op) {
  void *v = fzPtrMapGet(&F->opIndex, op);
  return v ? (uint32_t)((uintptr_t)v - 1) : NO_NODE;
}

static bool push_u32(FFuser *F, uint32_t **arr, uint32_t *n, uint32_t *cap,
                     uint32_t v) {
  if (*n == *cap) {
    uint32_t nc = *cap ? *cap * 2 : 4;
    uint32_t *a = fzArenaAlloc(&F->arena, nc * sizeof *a);
    if (!a) {
      F->failed = true;
      return false;
    }
    if (*n)
      memcpy(a, *arr, *n * sizeof *a);
    *arr = a;
    *cap = nc;
  }
  (*arr)[(*n)++] = v;
  return true;
}

bool ffAddEdge(FFuser *F, uint32_t from, uint32_t to) {
  FNode *a = &F->nodes[from], *b = &F->nodes[to];
  return push_u32(F, &a->succ, &a->nsucc, &a->capSucc, to) &&
         push_u32(F, &b->pred, &b->npred, &b->capPred, from);
}

bool ffRedirectEdges(FFuser *F, uint32_t from, uint32_t root,
                     uint32_t newFrom) {
  FNode *a = &F->nodes[from];
  for (uint32_t k = 0; k < a->nsucc; ++k) {
    uint32_t x = a->succ[k];
    if (x == NO_NODE || ffFind(F, x) != root)
      continue;
    a->succ[k] = NO_NODE;
    FNode *nx = &F->nodes[x];
    for (uint32_t j = 0; j < nx->npred; ++j)
      if (nx->pred[j] == from) {
        nx->pred[j] = newFrom;
        break;
      }
    FNode *c = &F->nodes[newFrom];
    if (!push_u32(F, &c->succ, &c->nsucc, &c->capSucc, x))
      return false;
    a = &F->nodes[from];
  }
  return true;
}

static bool grow(FFuser *F, uint32_t need) {
  if (need <= F->cap)
    return true;
  uint32_t cap = F->cap * 2 > need ? F->cap * 2 : need;
  FNode *nodes = fzRealloc(F->ctx, F->nodes, (size_t)cap * sizeof *nodes);
  if (!nodes)
    return !(F->failed = true);
  F->nodes = nodes;
  FGroup *groups = fzRealloc(F->ctx, F->groups, (size_t)cap * sizeof *groups);
  if (!groups)
    return !(F->failed = true);
  F->groups = groups;
  uint32_t **hot[4] = {&F->parent, &F->ord, &F->stamp, &F->visit};
  for (int k = 0; k < 4; ++k) {
    uint32_t *a = fzRealloc(F->ctx, *hot[k], (size_t)cap * sizeof *a);
    if (!a)
      return !(F->failed = true);
    *hot[k] = a;
  }
  if (F->why) {
    FWhy **why = fzRealloc(F->ctx, F->why, (size_t)cap * sizeof *why);
    if (!why)
      return !(F->failed = true);
    memset(why + F->cap, 0, (size_t)(cap - F->cap) * sizeof *why);
    F->why = why;
  }
  F->cap = cap;
  return true;
}

static void init_group(FFuser *F, uint32_t i) {
  FNode *n = &F->nodes[i];
  FGroup *g = &F->groups[i];
  memset(g, 0, sizeof *g);
  F->parent[i] = i;
  F->stamp[i] = F->visit[i] = 0;
  n->next = NO_NODE;
  F->ord[i] = n->pos;
  g->size = 1;
  g->head = g->tail = i;
  g->minPos = n->pos;
  g->minSub = n->sub;
  g->hasContraction = n->contraction;
}

/* The role and fusion facts of one op. */
static void classify(FFuser *F, uint32_t i) {
  FNode *n = &F->nodes[i];
  FzOp *op = n->op;
  const FzOpDef *def = fzOpGetDef(op);
  FzFusionOpInfo info;
  fzFusionDescribeOp(op, &info);
  n->kind = (uint8_t)info.kind;
  n->reduceOperand = (int8_t)(info.reduceOperand < 0 ? -1
                                                     : info.reduceOperand);
  n->reduceAxes = info.reduceAxes;
  n->flopsPerElement = (float)info.flopsPerElement;
  n->flops = info.flops;
  if (fzOpGetNumResults(op) >= 1) {
    FzType *rt = fzValueGetType(fzOpGetResult(op, 0));
    n->numel = ffNumElements(rt);
    n->bytes = ffTypeBytes(rt);
    n->eltBytes = (uint8_t)(n->numel > 0 ? n->bytes / n->numel : 4);
  }
  n->contraction = info.kind == FZ_FUSION_CONTRACTION ||
                   (info.kind == FZ_FUSION_REDUCTION && info.reduceOperand < 0);
  n->prologueRoot = info.prologueRoot;
  if (fzOpHasTrait(op, FZ_TRAIT_CONSTANT_LIKE) && fzOpGetNumResults(op) == 1) {
    n->role = ROLE_FREE;
    FzType *t = fzValueGetType(fzOpGetResult(op, 0));
    FzAttr *v = fzOpGetInherentAttr(op, FZ_STR("value"));
    n->smallConst = (v && fzAttrGetKind(v) == FZ_ATTR_DENSE &&
                     fzDenseAttrIsSplat(v)) ||
                    ffTypeBytes(t) <= 64;
    return;
  }
  if (def && strcmp(def->name, "graph.fusion") == 0) {
    n->role = ROLE_PINNED;
    return;
  }
  n->role = ROLE_OPAQUE;
  if (info.kind == FZ_FUSION_OPAQUE || fzOpGetNumRegions(op) != 0 ||
      fzOpGetNumResults(op) != 1 || !fzOpIsEffectFree(op))
    return;
  FzType *t = fzValueGetType(fzOpGetResult(op, 0));
  if (fzTypeGetKind(t) != FZ_TYPE_TENSOR ||
      fzShapedTypeGetRank(t) == FZ_UNRANKED || fzShapedTypeGetRank(t) > 32)
    return;
  for (size_t k = 0; k < fzOpGetNumOperands(op); ++k) {
    FzType *ot = fzValueGetType(fzOpGetOperand(op, k));
    if (fzTypeGetKind(ot) != FZ_TYPE_TENSOR ||
        fzShapedTypeGetRank(ot) == FZ_UNRANKED)
      return;
  }
  n->role = ROLE_FUSABLE;
}

typedef struct WalkCtx {
  FFuser *F;
  FzOp *root;
  uint32_t user;
} WalkCtx;

/* Adds the edge for one operand of `user`. With `aligned` (the op's own
 * operands), an operand that is no node's result still takes a NO_NODE
 * slot in the pred list, so that pred[k] is the producer of operand k. */
static bool add_operand_edge(FFuser *F, FzValue *v, uint32_t user,
                             bool aligned) {
  uint32_t d = NO_NODE;
  if (fzValueIsBlockArgument(v)) {
    size_t a = fzValueGetIndex(v);
    if (fzValueGetParentBlock(v) == F->body && a < F->numArgs &&
        !push_u32(F, &F->argUsers[a], &F->numArgUsers[a],
                  &F->numArgUsers[F->numArgs + a], user))
      return false;
  } else {
    FzOp *def = fzValueGetDefiningOp(v);
    if (def && fzOpGetBlock(def) == F->body)
      d = ffNodeOf(F, def);
  }
  if (d != NO_NODE)
    return ffAddEdge(F, d, user);
  FNode *u = &F->nodes[user];
  return !aligned || push_u32(F, &u->pred, &u->npred, &u->capPred, NO_NODE);
}

bool ffCopyPreds(FFuser *F, uint32_t from, uint32_t to) {
  for (uint32_t k = 0; k < F->nodes[from].npred; ++k) {
    uint32_t p = F->nodes[from].pred[k];
    FNode *t = &F->nodes[to];
    bool ok = p == NO_NODE
                  ? push_u32(F, &t->pred, &t->npred, &t->capPred, NO_NODE)
                  : ffAddEdge(F, p, to);
    if (!ok)
      return false;
  }
  return true;
}

static FzWalkResult nested_operands(FzOp *op, void *ud) {
  WalkCtx *w = ud;
  if (op == w->root)
    return FZ_WALK_ADVANCE;
  for (size_t k = 0; k < fzOpGetNumOperands(op); ++k)
    if (!add_operand_edge(w->F, fzOpGetOperand(op, k), w->user, false))
      return FZ_WALK_INTERRUPT;
  return FZ_WALK_ADVANCE;
}

/*===--- Building -------------------------------------------------------===*/

bool ffBuild(FFuser *F, FzOp *func) {
  F->func = func;
  F->body = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  FzOp *last = fzBlockGetLastOp(F->body);
  F->terminator = last && fzOpHasTrait(last, FZ_TRAIT_TERMINATOR) ? last : NULL;
  size_t count = fzBlockGetNumOps(F->body) - (F->terminator ? 1 : 0);
  if (count >= UINT32_MAX / 4)
    return fzEmitError(F->ctx, fzOpGetLoc(func), "fuse: too many ops (%zu)",
                       count);
  F->n = 0;
  if (!grow(F, (uint32_t)count + 16))
    return false;
  F->order = fzMalloc(F->ctx, (count ? count : 1) * sizeof *F->order);
  F->numArgs = (uint32_t)fzBlockGetNumArguments(F->body);
  F->argUsers = fzCalloc(F->ctx, F->numArgs + 1, sizeof *F->argUsers);
  /* Counts, then capacities, side by side. */
  F->numArgUsers = fzCalloc(F->ctx, 2 * (size_t)F->numArgs + 1,
                            sizeof *F->numArgUsers);
  if (!F->order || !F->argUsers || !F->numArgUsers)
    return !(F->failed = true);
  for (FzOp *op = fzBlockGetFirstOp(F->body); op; op = fzOpGetNextInBlock(op)) {
    if (op == F->terminator)
      break;
    uint32_t i = F->n++;
    FNode *n = &F->nodes[i];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->origin = NO_NODE;
    if (!fzPtrMapPut(&F->opIndex, op, (void *)(uintptr_t)(i + 1)))
      return !(F->failed = true);
  }
  uint32_t prevEffect = NO_NODE;
  for (uint32_t i = 0; i < F->n; ++i) {
    classify(F, i);
    FzOp *op = F->nodes[i].op;
    for (size_t k = 0; k < fzOpGetNumOperands(op); ++k)
      if (!add_operand_edge(F, fzOpGetOperand(op, k), i, true))
        return false;
    if (fzOpGetNumRegions(op) && !fzOpHasTrait(op, FZ_TRAIT_ISOLATED_FROM_ABOVE)) {
      WalkCtx w = {F, op, i};
      if (fzOpWalk(op, FZ_WALK_PRE_ORDER, nested_operands, &w) ==
          FZ_WALK_INTERRUPT)
        return false;
    }
    if (!fzOpIsEffectFree(op)) {
      /* Ops with side effects keep their relative order. */
      if (prevEffect != NO_NODE && !ffAddEdge(F, prevEffect, i))
        return false;
      prevEffect = i;
    }
  }
  if (F->terminator)
    for (size_t k = 0; k < fzOpGetNumOperands(F->terminator); ++k) {
      FzOp *d = fzValueGetDefiningOp(fzOpGetOperand(F->terminator, k));
      uint32_t dn = d ? ffNodeOf(F, d) : NO_NODE;
      if (dn != NO_NODE)
        F->nodes[dn].usedOutside = true;
    }
  if (!ffCanonicalOrder(F))
    return false;
  for (uint32_t i = 0; i < F->n; ++i) {
    init_group(F, i);
    ffSortByPos(F, F->nodes[i].succ, F->nodes[i].nsucc);
  }
  for (uint32_t a = 0; a < F->numArgs; ++a)
    ffSortByPos(F, F->argUsers[a], F->numArgUsers[a]);
  return !F->failed;
}

uint32_t ffAddClone(FFuser *F, uint32_t p, FzOp *cloneOp) {
  if (!grow(F, F->n + 1))
    return NO_NODE;
  uint32_t c = F->n++;
  FNode *n = &F->nodes[c];
  *n = F->nodes[p];
  n->op = cloneOp;
  n->sub = ++F->cloneSerial;
  F->mergeSerial++;
  n->origin = p;
  n->usedOutside = false;
  n->succ = n->pred = NULL;
  n->nsucc = n->npred = n->capSucc = n->capPred = 0;
  if (!fzPtrMapPut(&F->opIndex, cloneOp, (void *)(uintptr_t)(c + 1))) {
    F->failed = true;
    return NO_NODE;
  }
  if (F->why)
    F->why[c] = NULL;
  init_group(F, c);
  /* A clone sits right after its original in the order. */
  F->ord[c] = F->ord[ffFind(F, p)];
  return c;
}

void ffFree(FFuser *F) {
  fzFree(F->ctx, F->nodes);
  fzFree(F->ctx, F->groups);
  fzFree(F->ctx, F->parent);
  fzFree(F->ctx, F->ord);
  fzFree(F->ctx, F->stamp);
  fzFree(F->ctx, F->visit);
  fzFree(F->ctx, F->order);
  fzFree(F->ctx, F->argUsers);
  fzFree(F->ctx, F->numArgUsers);
  fzFree(F->ctx, F->why);
  fzFree(F->ctx, F->duplicatedInto);
  fzPtrMapFree(&F->opIndex);
  fzFree(F->ctx, F->heap);
  fzFree(F->ctx, F->an.m);
  fzFree(F->ctx, F->an.last);
  fzFree(F->ctx, F->an.depth);
  fzFree(F->ctx, F->an.inFirst);
  fzFree(F->ctx, F->an.inLast);
  fzFree(F->ctx, F->an.inNode);
  fzFree(F->ctx, F->an.index);
  fzFree(F->ctx, F->an.isOut);
  fzFree(F->ctx, F->an.delta);
  fzFree(F->ctx, F->an.in);
  fzPtrVecFree(&F->list);
  fzArenaReset(&F->arena);
}

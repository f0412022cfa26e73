/* transforms/fusion/graph.c - the node graph the fusion pass works on:
 * one node per top-level op of a function body, edges from producers to
 * users, a canonical order, and groups as union-find sets whose condensed
 * graph is kept acyclic with a dynamic topological order.
 *
 * Canonical order. Positions come from a post-order depth-first walk from
 * the terminator's operands (in operand order), visiting each op's
 * producers in operand order. It depends only on the graph, never on the
 * order of independent ops in the input, and it follows the order a
 * program is naturally written in. Ops that the terminator does not reach
 * (dead ones, side effects) are walked from their sinks, taken in the
 * order of a structural hash of their ancestry. Every decision of the pass
 * visits candidates by position, which makes its groups order-independent.
 *
 * Groups. Each group has an `ord`; every edge between two groups goes from
 * a lower ord to a higher one. Merging a set of groups is legal when no
 * path leaves the set and comes back; only groups with ord below the
 * set's highest can lie on such a path, so the forward search is bounded
 * by that window (and by a budget, which keeps the pass near-linear). On
 * commit, the window is reordered as in Pearce and Kelly's dynamic
 * topological sort: the groups that reach the set go first, then the
 * merged group, then those it reaches, reusing the window's ord values.
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
    FRefusal *why = fzRealloc(F->ctx, F->why, (size_t)cap * sizeof *why);
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
  n->contraction = info.kind == FZ_FUSION_CONTRACTION ||
                   (info.kind == FZ_FUSION_REDUCTION && info.reduceOperand < 0);
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

/*===--- Canonical order ------------------------------------------------===*/

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return mix(h, n);
}

static uint64_t hash_str(uint64_t h, FzStringRef s) {
  return hash_bytes(h, s.data, s.length);
}

static uint64_t hash_type(uint64_t h, const FzType *t) {
  if (!t)
    return mix(h, 0);
  FzTypeKind k = fzTypeGetKind(t);
  h = mix(h, (uint64_t)k + 1);
  switch (k) {
  case FZ_TYPE_INTEGER:
    return mix(h, fzTypeGetBitWidth(t));
  case FZ_TYPE_TENSOR:
  case FZ_TYPE_VECTOR:
  case FZ_TYPE_BUFFER: {
    size_t r = fzShapedTypeGetRank(t);
    h = mix(hash_type(h, fzShapedTypeGetElementType(t)), (uint64_t)r);
    for (size_t i = 0; r != FZ_UNRANKED && i < r; ++i)
      h = mix(h, (uint64_t)fzShapedTypeGetDim(t, i));
    return h;
  }
  case FZ_TYPE_FUNCTION:
    for (size_t i = 0; i < fzFunctionTypeGetNumInputs(t); ++i)
      h = hash_type(h, fzFunctionTypeGetInput(t, i));
    for (size_t i = 0; i < fzFunctionTypeGetNumResults(t); ++i)
      h = hash_type(mix(h, 7), fzFunctionTypeGetResult(t, i));
    return h;
  case FZ_TYPE_OPAQUE:
    return hash_str(hash_str(h, fzOpaqueTypeGetDialect(t)),
                    fzOpaqueTypeGetBody(t));
  default:
    return h;
  }
}

static uint64_t hash_attr(uint64_t h, const FzAttr *a) {
  if (!a)
    return mix(h, 0);
  FzAttrKind k = fzAttrGetKind(a);
  h = mix(h, (uint64_t)k + 1);
  switch (k) {
  case FZ_ATTR_INTEGER:
    return hash_type(mix(h, (uint64_t)fzIntegerAttrGetValue(a)),
                     fzAttrGetType(a));
  case FZ_ATTR_FLOAT: {
    double d = fzFloatAttrGetValue(a);
    return hash_type(hash_bytes(h, &d, sizeof d), fzAttrGetType(a));
  }
  case FZ_ATTR_BOOL:
    return mix(h, fzBoolAttrGetValue(a));
  case FZ_ATTR_STRING:
    return hash_str(h, fzStringAttrGetValue(a));
  case FZ_ATTR_TYPE:
    return hash_type(h, fzTypeAttrGetValue(a));
  case FZ_ATTR_ARRAY:
    for (size_t i = 0; i < fzArrayAttrGetSize(a); ++i)
      h = hash_attr(h, fzArrayAttrGetElement(a, i));
    return h;
  case FZ_ATTR_DICT:
    for (size_t i = 0; i < fzDictAttrGetSize(a); ++i) {
      FzNamedAttr e = fzDictAttrGetEntry(a, i);
      h = hash_attr(hash_str(h, fzIdentGetString(e.name)), e.value);
    }
    return h;
  case FZ_ATTR_SYMBOL_REF:
    h = hash_str(h, fzSymbolRefAttrGetRoot(a));
    for (size_t i = 0; i < fzSymbolRefAttrGetNumNested(a); ++i)
      h = hash_str(h, fzSymbolRefAttrGetNested(a, i));
    return h;
  case FZ_ATTR_DENSE:
    return hash_bytes(hash_type(h, fzAttrGetType(a)), fzDenseAttrGetData(a),
                      fzDenseAttrGetNumBytes(a));
  case FZ_ATTR_DENSE_ARRAY:
    for (size_t i = 0; i < fzDenseArrayAttrGetSize(a); ++i)
      h = mix(h, (uint64_t)fzDenseArrayAttrGetInt(a, i));
    return h;
  case FZ_ATTR_OPAQUE:
    return hash_str(hash_str(h, fzOpaqueAttrGetDialect(a)),
                    fzOpaqueAttrGetBody(a));
  default:
    return h;
  }
}

/* Structural hashes of every node's ancestry, in block order (which is a
 * topological order of the body). */
static uint64_t *ancestry_hashes(FFuser *F) {
  uint64_t *h = fzCalloc(F->ctx, F->n ? F->n : 1, sizeof *h);
  if (!h)
    return NULL;
  for (uint32_t i = 0; i < F->n; ++i) {
    FzOp *op = F->nodes[i].op;
    uint64_t x = hash_str(1, fzIdentGetString(fzOpGetName(op)));
    x = hash_attr(hash_attr(x, fzOpGetPropDict(op)), fzOpGetAttrDict(op));
    for (size_t r = 0; r < fzOpGetNumResults(op); ++r)
      x = hash_type(x, fzValueGetType(fzOpGetResult(op, r)));
    for (size_t k = 0; k < fzOpGetNumOperands(op); ++k) {
      FzValue *v = fzOpGetOperand(op, k);
      FzOp *d = fzValueGetDefiningOp(v);
      uint32_t dn = d ? ffNodeOf(F, d) : NO_NODE;
      if (dn != NO_NODE)
        x = mix(mix(x, h[dn]), fzValueGetIndex(v));
      else
        x = mix(mix(x, 0x5151), fzValueGetIndex(v));
    }
    h[i] = x;
  }
  return h;
}

typedef struct Frame {
  uint32_t node, next;
} Frame;

/* Post-order from root over producers; appends to F->order. */
static bool dfs_from(FFuser *F, uint32_t root, bool *seen, Frame **stack,
                     size_t *cap) {
  if (seen[root])
    return true;
  size_t sp = 0;
  seen[root] = true;
  (*stack)[sp++] = (Frame){root, 0};
  while (sp) {
    Frame *f = &(*stack)[sp - 1];
    FNode *n = &F->nodes[f->node];
    if (f->next < n->npred) {
      uint32_t p = n->pred[f->next++];
      if (p == NO_NODE || seen[p])
        continue;
      seen[p] = true;
      if (sp == *cap) {
        size_t nc = *cap * 2;
        Frame *s = fzRealloc(F->ctx, *stack, nc * sizeof *s);
        if (!s)
          return !(F->failed = true);
        *stack = s;
        *cap = nc;
      }
      (*stack)[sp++] = (Frame){p, 0};
      continue;
    }
    F->nodes[f->node].pos = F->numOrdered;
    F->order[F->numOrdered++] = f->node;
    --sp;
  }
  return true;
}

static int cmp_sink(const void *a, const void *b) {
  const uint64_t *x = a, *y = b; /* {hash, index} pairs */
  if (x[0] != y[0])
    return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

static bool canonical_order(FFuser *F) {
  bool *seen = fzCalloc(F->ctx, F->n ? F->n : 1, sizeof *seen);
  size_t cap = 256;
  Frame *stack = fzMalloc(F->ctx, cap * sizeof *stack);
  bool ok = seen && stack;
  F->numOrdered = 0;
  if (ok && F->terminator)
    for (size_t k = 0; ok && k < fzOpGetNumOperands(F->terminator); ++k) {
      FzOp *d = fzValueGetDefiningOp(fzOpGetOperand(F->terminator, k));
      uint32_t dn = d ? ffNodeOf(F, d) : NO_NODE;
      if (dn != NO_NODE)
        ok = dfs_from(F, dn, seen, &stack, &cap);
    }
  if (ok && F->numOrdered < F->n) {
    /* Sinks the terminator does not reach, by ancestry hash. */
    uint64_t *h = ancestry_hashes(F);
    uint64_t *sinks = fzMalloc(F->ctx, 2 * sizeof *sinks * F->n);
    size_t ns = 0;
    ok = h && sinks;
    for (uint32_t i = 0; ok && i < F->n; ++i)
      if (!seen[i] && F->nodes[i].nsucc == 0) {
        sinks[2 * ns] = h[i];
        sinks[2 * ns + 1] = i;
        ns++;
      }
    if (ok)
      qsort(sinks, ns, 2 * sizeof *sinks, cmp_sink);
    for (size_t s = 0; ok && s < ns; ++s)
      ok = dfs_from(F, (uint32_t)sinks[2 * s + 1], seen, &stack, &cap);
    /* Anything left (impossible in a DAG) in block order. */
    for (uint32_t i = 0; ok && i < F->n; ++i)
      ok = dfs_from(F, i, seen, &stack, &cap);
    fzFree(F->ctx, h);
    fzFree(F->ctx, sinks);
  }
  fzFree(F->ctx, seen);
  fzFree(F->ctx, stack);
  return ok && !F->failed;
}

/* Sorts ids by canonical position: insertion sort for short lists, merge
 * sort otherwise (C11's qsort takes no context pointer, and the pass keeps
 * no global state). */
static void sort_ids_rec(FFuser *F, uint32_t *a, uint32_t *tmp, size_t n) {
  if (n <= 16) {
    for (size_t i = 1; i < n; ++i) {
      uint32_t v = a[i];
      size_t j = i;
      while (j > 0) {
        const FNode *p = &F->nodes[a[j - 1]], *q = &F->nodes[v];
        if (p->pos < q->pos || (p->pos == q->pos && p->sub <= q->sub))
          break;
        a[j] = a[j - 1];
        --j;
      }
      a[j] = v;
    }
    return;
  }
  size_t h = n / 2;
  sort_ids_rec(F, a, tmp, h);
  sort_ids_rec(F, a + h, tmp, n - h);
  size_t i = 0, j = h, k = 0;
  while (i < h && j < n) {
    const FNode *p = &F->nodes[a[i]], *q = &F->nodes[a[j]];
    bool le = p->pos < q->pos || (p->pos == q->pos && p->sub <= q->sub);
    tmp[k++] = le ? a[i++] : a[j++];
  }
  while (i < h)
    tmp[k++] = a[i++];
  while (j < n)
    tmp[k++] = a[j++];
  memcpy(a, tmp, n * sizeof *a);
}

void ffSortByPos(FFuser *F, uint32_t *ids, size_t n) {
  if (n <= 16) {
    sort_ids_rec(F, ids, NULL, n);
    return;
  }
  uint32_t *tmp = fzMalloc(F->ctx, n * sizeof *tmp);
  if (!tmp) {
    F->failed = true;
    return;
  }
  sort_ids_rec(F, ids, tmp, n);
  fzFree(F->ctx, tmp);
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
  if (!canonical_order(F))
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
  n->origin = p;
  n->usedOutside = false;
  n->succ = n->pred = NULL;
  n->nsucc = n->npred = n->capSucc = n->capPred = 0;
  if (!fzPtrMapPut(&F->opIndex, cloneOp, (void *)(uintptr_t)(c + 1))) {
    F->failed = true;
    return NO_NODE;
  }
  if (F->why)
    memset(&F->why[c], 0, sizeof F->why[c]);
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
  fzPtrVecFree(&F->stack);
  fzPtrVecFree(&F->list);
  fzPtrVecFree(&F->list2);
  fzArenaReset(&F->arena);
}

/*===--- Merging --------------------------------------------------------===*/

uint32_t ffMarkSet(FFuser *F, const uint32_t *roots, size_t n) {
  uint32_t e = ++F->epoch;
  for (size_t i = 0; i < n; ++i)
    F->stamp[roots[i]] = e;
  return e;
}

typedef struct Search {
  uint32_t setEpoch, visit, bound;
  bool forward;
  uint32_t witness;
} Search;

/* The frontier is a binary max-heap: the forward search expands the group
 * of highest ord first (the one closest to the set's last group), which
 * finds a path back into the set, when there is one, after few visits. */
static bool heap_push(FFuser *F, uint64_t key) {
  if (F->heapLen == F->heapCap) {
    size_t cap = F->heapCap ? F->heapCap * 2 : 256;
    uint64_t *h = fzRealloc(F->ctx, F->heap, cap * sizeof *h);
    if (!h)
      return !(F->failed = true);
    F->heap = h;
    F->heapCap = cap;
  }
  size_t i = F->heapLen++;
  while (i > 0 && F->heap[(i - 1) / 2] < key) {
    F->heap[i] = F->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  F->heap[i] = key;
  return true;
}

static uint64_t heap_pop(FFuser *F) {
  uint64_t top = F->heap[0], key = F->heap[--F->heapLen];
  size_t i = 0, n = F->heapLen;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n)
      break;
    if (c + 1 < n && F->heap[c + 1] > F->heap[c])
      c++;
    if (F->heap[c] <= key)
      break;
    F->heap[i] = F->heap[c];
    i = c;
  }
  if (n)
    F->heap[i] = key;
  return top;
}

/* Follows the edges of group g's members; queues unvisited groups in the
 * window. Edges into the set are a cycle unless g is in the set. */
static FMergeResult visit_group(FFuser *F, uint32_t g, bool inSet,
                                Search *s) {
  for (uint32_t m = F->groups[g].head; m != NO_NODE; m = F->nodes[m].next) {
    const FNode *nm = &F->nodes[m];
    uint32_t cnt = s->forward ? nm->nsucc : nm->npred;
    const uint32_t *adj = s->forward ? nm->succ : nm->pred;
    for (uint32_t k = 0; k < cnt; ++k) {
      if (adj[k] == NO_NODE)
        continue;
      uint32_t h = ffFind(F, adj[k]);
      if (F->stamp[h] == s->setEpoch) {
        if (!inSet) {
          s->witness = m;
          return MERGE_CYCLE;
        }
        continue;
      }
      uint32_t o = F->ord[h];
      bool inWindow = s->forward ? o < s->bound : o > s->bound;
      if (!inWindow || F->visit[h] == s->visit)
        continue;
      F->visit[h] = s->visit;
      if (F->list.len >= F->resolved.searchBudget)
        return MERGE_BUDGET;
      uint32_t prio = s->forward ? o : UINT32_MAX - o;
      if (!fzPtrVecPush(&F->list, (void *)(uintptr_t)h) ||
          !heap_push(F, ((uint64_t)prio << 32) | h)) {
        F->failed = true;
        return MERGE_BUDGET;
      }
    }
  }
  return MERGE_OK;
}

/* Collects in F->list the groups outside the set that the set reaches
 * (forward; ord < bound) or that reach it (backward; ord > bound). */
static FMergeResult search(FFuser *F, const uint32_t *roots, size_t n,
                           Search *s) {
  s->visit = ++F->visitEpoch;
  F->heapLen = 0;
  F->list.len = 0;
  for (size_t i = 0; i < n; ++i) {
    /* The set's last group (first, backward) has every outside edge
     * beyond the window: nothing to seed from it. */
    if (F->ord[roots[i]] == s->bound)
      continue;
    FMergeResult r = visit_group(F, roots[i], true, s);
    if (r != MERGE_OK)
      return r;
  }
  while (F->heapLen) {
    uint32_t g = (uint32_t)heap_pop(F);
    FMergeResult r = visit_group(F, g, false, s);
    if (r != MERGE_OK)
      return r;
  }
  return MERGE_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* (ord << 32 | id) keys of the groups in F->list, sorted. */
static uint64_t *sorted_keys(FFuser *F, size_t *n) {
  *n = F->list.len;
  uint64_t *k = fzMalloc(F->ctx, (*n ? *n : 1) * sizeof *k);
  if (!k) {
    F->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < *n; ++i) {
    uint32_t g = (uint32_t)(uintptr_t)F->list.data[i];
    k[i] = ((uint64_t)F->ord[g] << 32) | g;
  }
  qsort(k, *n, sizeof *k, cmp_u64);
  return k;
}

/* Reassigns ords in the window: the groups reaching the set (bwd), the
 * merged group, the groups it reaches (fwd), over the pool of their old
 * ords. Returns the merged group's new ord. */
static uint32_t reorder(FFuser *F, const uint64_t *fwd, size_t nf,
                        const uint64_t *bwd, size_t nb, const uint32_t *roots,
                        size_t n) {
  size_t np = nf + nb + n;
  uint32_t *pool = fzMalloc(F->ctx, np * sizeof *pool);
  if (!pool) {
    F->failed = true;
    return F->ord[roots[0]];
  }
  size_t k = 0;
  for (size_t i = 0; i < nf; ++i)
    pool[k++] = (uint32_t)(fwd[i] >> 32);
  for (size_t i = 0; i < nb; ++i)
    pool[k++] = (uint32_t)(bwd[i] >> 32);
  for (size_t i = 0; i < n; ++i)
    pool[k++] = F->ord[roots[i]];
  for (size_t i = 1; i < np; ++i) { /* sort the pool (short) */
    uint32_t x = pool[i];
    size_t j = i;
    while (j > 0 && pool[j - 1] > x) {
      pool[j] = pool[j - 1];
      --j;
    }
    pool[j] = x;
  }
  for (size_t i = 0; i < nb; ++i)
    F->ord[(uint32_t)bwd[i]] = pool[i];
  uint32_t merged = pool[nb];
  for (size_t i = 0; i < nf; ++i)
    F->ord[(uint32_t)fwd[i]] = pool[np - nf + i];
  fzFree(F->ctx, pool);
  return merged;
}

FMergeResult ffMerge(FFuser *F, const uint32_t *roots, size_t n, bool commit,
                     uint32_t *witness, uint32_t *root) {
  uint32_t lo = UINT32_MAX, hi = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t o = F->ord[roots[i]];
    lo = o < lo ? o : lo;
    hi = o > hi ? o : hi;
  }
  Search s = {ffMarkSet(F, roots, n), 0, hi, true, NO_NODE};
  FMergeResult r = search(F, roots, n, &s);
  *witness = s.witness;
  if (r != MERGE_OK || !commit)
    return r;
  uint32_t newOrd = hi;
  if (F->list.len) {
    size_t nf, nb;
    uint64_t *fwd = sorted_keys(F, &nf);
    if (!fwd)
      return MERGE_BUDGET;
    Search b = {s.setEpoch, 0, lo, false, NO_NODE};
    r = search(F, roots, n, &b);
    if (r != MERGE_OK) {
      fzFree(F->ctx, fwd);
      return r;
    }
    if (F->list.len == 0) {
      newOrd = lo;
    } else {
      uint64_t *bwd = sorted_keys(F, &nb);
      newOrd = bwd ? reorder(F, fwd, nf, bwd, nb, roots, n) : lo;
      fzFree(F->ctx, bwd);
    }
    fzFree(F->ctx, fwd);
  }
  /* Union: the largest group's root stays the root. */
  uint32_t R = roots[0];
  for (size_t i = 1; i < n; ++i)
    if (F->groups[roots[i]].size > F->groups[R].size)
      R = roots[i];
  FGroup *gr = &F->groups[R];
  for (size_t i = 0; i < n; ++i) {
    uint32_t x = roots[i];
    if (x == R)
      continue;
    FGroup *gx = &F->groups[x];
    F->parent[x] = R;
    F->nodes[gr->tail].next = gx->head;
    gr->tail = gx->tail;
    gr->size += gx->size;
    if (gx->minPos < gr->minPos ||
        (gx->minPos == gr->minPos && gx->minSub < gr->minSub)) {
      gr->minPos = gx->minPos;
      gr->minSub = gx->minSub;
    }
    gr->hasContraction |= gx->hasContraction;
  }
  F->ord[R] = newOrd;
  gr->estValid = false;
  *root = R;
  return MERGE_OK;
}

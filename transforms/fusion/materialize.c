/* transforms/fusion/materialize.c - turning the decided groups into IR.
 *
 * The body is rebuilt in one pass: groups are emitted in a topological
 * order of the condensed graph (Kahn's algorithm, ties broken by the
 * groups' canonical positions), each either as its lone op, moved to the
 * end of the block, or as a new graph.fusion:
 *
 *  - operands: the values its members read from outside, in first-use
 *    order; small constants are copied into the body instead;
 *  - results: the members' values used outside the group, in member
 *    order, yielded by graph.yield;
 *  - location: the fused location of the members' locations;
 *  - attribute kind = "loop" | "reduction" | "contraction".
 *
 * Groups are convex (graph.c) and emitted in topological order, so every
 * value is defined before it is used. The terminator stays last.
 */
#include <string.h>

#include "dialects/graph/fusion_op.h"
#include "transforms/fusion/fusion_internal.h"

static bool live_node(const FFuser *F, uint32_t i) {
  return F->nodes[i].role != ROLE_DEAD;
}

uint32_t ffNumberGroups(FFuser *F, uint32_t *ids) {
  FzContext *ctx = F->ctx;
  uint32_t *firsts = fzMalloc(ctx, (F->n ? F->n : 1) * sizeof *firsts);
  uint32_t *num = fzMalloc(ctx, (F->n ? F->n : 1) * sizeof *num);
  if (!firsts || !num) {
    fzFree(ctx, firsts);
    fzFree(ctx, num);
    F->failed = true;
    return 0;
  }
  /* A group's first member is the one at its canonical key. */
  uint32_t nr = 0;
  for (uint32_t i = 0; i < F->n; ++i) {
    ids[i] = NO_NODE;
    if (!live_node(F, i) || F->nodes[i].role == ROLE_FREE)
      continue;
    const FGroup *g = &F->groups[ffFind(F, i)];
    if (g->minPos == F->nodes[i].pos && g->minSub == F->nodes[i].sub)
      firsts[nr++] = i;
  }
  ffSortByPos(F, firsts, nr);
  for (uint32_t g = 0; g < nr; ++g)
    num[ffFind(F, firsts[g])] = g;
  for (uint32_t i = 0; i < F->n; ++i)
    if (live_node(F, i) && F->nodes[i].role != ROLE_FREE)
      ids[i] = num[ffFind(F, i)];
  fzFree(ctx, firsts);
  fzFree(ctx, num);
  return nr;
}

/*===--- A binary heap of groups keyed by canonical position ------------===*/

typedef struct Heap {
  uint64_t *k; /* (minPos << 32 | minSub) */
  uint32_t *v;
  size_t n;
} Heap;

static void heap_push(Heap *h, uint64_t key, uint32_t val) {
  size_t i = h->n++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (h->k[p] <= key)
      break;
    h->k[i] = h->k[p];
    h->v[i] = h->v[p];
    i = p;
  }
  h->k[i] = key;
  h->v[i] = val;
}

static uint32_t heap_pop(Heap *h) {
  uint32_t top = h->v[0];
  uint64_t key = h->k[--h->n];
  uint32_t val = h->v[h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && h->k[c + 1] < h->k[c])
      c++;
    if (key <= h->k[c])
      break;
    h->k[i] = h->k[c];
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) {
    h->k[i] = key;
    h->v[i] = val;
  }
  return top;
}

static uint64_t group_key(const FFuser *F, uint32_t r) {
  return ((uint64_t)F->groups[r].minPos << 32) | F->groups[r].minSub;
}

/*===--- Building one graph.fusion --------------------------------------===*/

static void place(FFuser *F, FzOp *op) {
  if (F->terminator)
    fzOpMoveBefore(op, F->terminator);
  else {
    fzOpRemoveFromBlock(op);
    fzBlockAppendOp(F->body, op);
  }
}

typedef struct VecV {
  FzValue **v;
  size_t n, cap;
} VecV;

static bool vec_push(FFuser *F, VecV *x, FzValue *v) {
  if (x->n == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 8;
    FzValue **a = fzRealloc(F->ctx, x->v, cap * sizeof *a);
    if (!a)
      return !(F->failed = true);
    x->v = a;
    x->cap = cap;
  }
  x->v[x->n++] = v;
  return true;
}

static long vec_find(const VecV *x, const FzValue *v) {
  for (size_t i = 0; i < x->n; ++i)
    if (x->v[i] == v)
      return (long)i;
  return -1;
}

static bool in_group(FFuser *F, uint32_t root, FzOp *op) {
  uint32_t n = ffNodeOf(F, op);
  return n != NO_NODE && live_node(F, n) && ffFind(F, n) == root;
}

static bool build_fusion(FFuser *F, uint32_t root, FzFusionStats *stats) {
  FzContext *ctx = F->ctx;
  uint32_t size = F->groups[root].size;
  uint32_t *m = fzMalloc(ctx, size * sizeof *m);
  FzLoc **locs = fzMalloc(ctx, size * sizeof *locs);
  VecV ins = {0}, outs = {0}, consts = {0};
  bool ok = m && locs;
  size_t nm = 0;
  for (uint32_t x = F->groups[root].head; ok && x != NO_NODE;
       x = F->nodes[x].next)
    m[nm++] = x;
  if (ok)
    ffSortByPos(F, m, nm);
  for (size_t i = 0; ok && i < nm; ++i) {
    FzOp *op = F->nodes[m[i]].op;
    locs[i] = fzOpGetLoc(op);
    for (size_t k = 0; ok && k < fzOpGetNumOperands(op); ++k) {
      FzValue *v = fzOpGetOperand(op, k);
      FzOp *d = fzValueGetDefiningOp(v);
      if (d && in_group(F, root, d))
        continue;
      uint32_t dn = d ? ffNodeOf(F, d) : NO_NODE;
      bool copy = dn != NO_NODE && F->nodes[dn].role == ROLE_FREE &&
                  F->nodes[dn].smallConst;
      VecV *to = copy ? &consts : &ins;
      if (vec_find(to, v) < 0)
        ok = vec_push(F, to, v);
    }
    FzValue *r = fzOpGetResult(op, 0);
    bool out = false;
    for (FzOpOperand *u = fzValueGetFirstUse(r); u && !out;
         u = fzOpOperandGetNextUse(u)) {
      FzOp *owner = fzOpOperandGetOwner(u);
      FzOp *top = owner;
      while (top && fzOpGetBlock(top) != F->body)
        top = fzOpGetParentOp(top);
      uint32_t tn = top ? ffNodeOf(F, top) : NO_NODE;
      if (tn != NO_NODE && !live_node(F, tn))
        continue; /* a duplicated producer, erased later */
      out = !top || !in_group(F, root, top);
    }
    if (ok && out)
      ok = vec_push(F, &outs, r);
  }
  /* Every allocation comes first: the op, its kind, copies of small
   * constants, the yield (reading the members' values from outside for a
   * moment). The IR changes only once they all succeeded, so a failure
   * leaves the body as it was and the caller places the members alone. */
  FzOp *fusion = NULL, *yield = NULL;
  FzBlock *body = NULL;
  FzValue **constVals = NULL;
  if (ok) {
    FzLoc *loc = fzFusedLocGet(ctx, nm, locs, NULL);
    FzType **rt = fzMalloc(ctx, (outs.n ? outs.n : 1) * sizeof *rt);
    FzLoc **argLocs = fzMalloc(ctx, (ins.n ? ins.n : 1) * sizeof *argLocs);
    ok = rt && argLocs;
    for (size_t i = 0; ok && i < outs.n; ++i)
      rt[i] = fzValueGetType(outs.v[i]);
    for (size_t i = 0; ok && i < ins.n; ++i)
      argLocs[i] = fzValueGetLoc(ins.v[i]);
    if (ok) {
      FzBuilder b;
      fzBuilderInit(&b, ctx);
      if (F->terminator)
        fzBuilderSetInsertionPointBefore(&b, F->terminator);
      else
        fzBuilderSetInsertionPointToEnd(&b, F->body);
      fusion = fzGraphFusionCreate(&b, loc, ins.n, ins.v, argLocs, outs.n, rt);
      ok = fusion != NULL;
    }
    fzFree(ctx, rt);
    fzFree(ctx, argLocs);
  }
  if (ok) {
    const char *kind = fzFusionGroupKindName(ffGroupKind(F, root));
    body = fzGraphFusionGetBody(fusion);
    ok = fzOpSetAttr(fusion, FZ_STR("kind"),
                     fzStringAttrGet(ctx, fzStringRefFromCString(kind)));
  }
  if (ok && consts.n) {
    constVals = fzMalloc(ctx, consts.n * sizeof *constVals);
    ok = constVals != NULL;
    for (size_t i = 0; ok && i < consts.n; ++i) {
      FzOp *cl = fzOpClone(fzValueGetDefiningOp(consts.v[i]), NULL);
      ok = cl != NULL;
      if (ok) {
        fzBlockAppendOp(body, cl);
        constVals[i] = fzOpGetResult(cl, fzValueGetIndex(consts.v[i]));
      }
    }
  }
  if (ok)
    ok = (yield = fzGraphYieldCreate(ctx, body, fzOpGetLoc(fusion), outs.n,
                                     outs.v)) != NULL;
  if (!ok && fusion)
    fzOpErase(fusion);
  /* No allocation from here on. */
  for (size_t i = 0; ok && i < nm; ++i) {
    FzOp *op = F->nodes[m[i]].op;
    fzOpRemoveFromBlock(op);
    fzBlockInsertOpBefore(body, yield, op);
    for (size_t k = 0; k < fzOpGetNumOperands(op); ++k) {
      FzValue *v = fzOpGetOperand(op, k);
      long j = vec_find(&ins, v);
      if (j >= 0) {
        fzOpSetOperand(op, k, fzBlockGetArgument(body, (size_t)j));
        continue;
      }
      j = vec_find(&consts, v);
      if (j >= 0)
        fzOpSetOperand(op, k, constVals[j]);
    }
  }
  for (size_t i = 0; ok && i < outs.n; ++i) {
    FzValue *res = fzOpGetResult(fusion, i);
    FzOpOperand *u = fzValueGetFirstUse(outs.v[i]);
    while (u) {
      FzOpOperand *next = fzOpOperandGetNextUse(u);
      if (!fzOpIsAncestor(fusion, fzOpOperandGetOwner(u)))
        fzOpOperandSet(u, res);
      u = next;
    }
  }
  if (ok && stats) {
    stats->groups++;
    stats->fusedOps += nm;
  }
  fzFree(ctx, constVals);
  fzFree(ctx, ins.v);
  fzFree(ctx, outs.v);
  fzFree(ctx, consts.v);
  fzFree(ctx, m);
  fzFree(ctx, locs);
  return ok;
}

/* Insertion sort by canonical position; allocates nothing (for the
 * out-of-memory path). */
static void sort_no_alloc(FFuser *F, uint32_t *a, size_t n) {
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
}

bool ffMaterialize(FFuser *F, FzFusionStats *stats) {
  FzContext *ctx = F->ctx;
  uint32_t biggest = 1;
  for (uint32_t i = 0; i < F->n; ++i)
    if (ffFind(F, i) == i && F->groups[i].size > biggest)
      biggest = F->groups[i].size;
  uint32_t *scratch = fzMalloc(ctx, biggest * sizeof *scratch);
  uint32_t *indeg = fzCalloc(ctx, F->n ? F->n : 1, sizeof *indeg);
  Heap h = {fzMalloc(ctx, (F->n ? F->n : 1) * sizeof *h.k),
            fzMalloc(ctx, (F->n ? F->n : 1) * sizeof *h.v), 0};
  bool ok = indeg && h.k && h.v && scratch;
  for (uint32_t i = 0; ok && i < F->n; ++i) {
    if (!live_node(F, i))
      continue;
    uint32_t r = ffFind(F, i);
    const FNode *n = &F->nodes[i];
    for (uint32_t k = 0; k < n->nsucc; ++k) {
      uint32_t s = n->succ[k];
      if (s == NO_NODE || !live_node(F, s))
        continue;
      uint32_t rs = ffFind(F, s);
      if (rs != r)
        indeg[rs]++;
    }
  }
  for (uint32_t i = 0; ok && i < F->n; ++i)
    if (live_node(F, i) && ffFind(F, i) == i && indeg[i] == 0)
      heap_push(&h, group_key(F, i), i);
  size_t emitted = 0;
  while (ok && h.n) {
    uint32_t g = heap_pop(&h);
    FGroup *gr = &F->groups[g];
    /* Release the successors first: building moves the members. */
    for (uint32_t x = gr->head; x != NO_NODE; x = F->nodes[x].next) {
      const FNode *n = &F->nodes[x];
      for (uint32_t k = 0; k < n->nsucc; ++k) {
        uint32_t s = n->succ[k];
        if (s == NO_NODE || !live_node(F, s))
          continue;
        uint32_t rs = ffFind(F, s);
        if (rs != g && --indeg[rs] == 0)
          heap_push(&h, group_key(F, rs), rs);
      }
    }
    emitted++;
    const FNode *n = &F->nodes[g];
    bool wrap = gr->size > 1 ||
                (F->resolved.wrapSingle && n->role == ROLE_FUSABLE);
    if (wrap && build_fusion(F, g, stats))
      continue;
    if (wrap) {
      /* Out of memory: the members go alone, in canonical order, which
       * keeps the body valid; the pass still fails. */
      F->failed = true;
      size_t k = 0;
      for (uint32_t x = gr->head; x != NO_NODE; x = F->nodes[x].next)
        scratch[k++] = x;
      sort_no_alloc(F, scratch, k);
      for (size_t i = 0; i < k; ++i)
        place(F, F->nodes[scratch[i]].op);
      continue;
    }
    place(F, n->op);
  }
  fzFree(ctx, indeg);
  fzFree(ctx, h.k);
  fzFree(ctx, h.v);
  fzFree(ctx, scratch);
  if (ok) {
    size_t groups = 0;
    for (uint32_t i = 0; i < F->n; ++i)
      groups += live_node(F, i) && ffFind(F, i) == i;
    if (emitted != groups)
      return fzEmitError(ctx, fzOpGetLoc(F->func),
                         "fuse: internal error: the groups form a cycle");
  }
  if (!ok)
    F->failed = true;
  return ok;
}

void ffEraseDead(FFuser *F) {
  /* Duplicated producers first: they may be the last users of a copied
   * constant. */
  for (int pass = 0; pass < 2; ++pass)
    for (uint32_t i = 0; i < F->n; ++i) {
      FNode *n = &F->nodes[i];
      if (!n->op)
        continue;
      bool erase = pass == 0 ? n->role == ROLE_DEAD
                             : n->role == ROLE_FREE && n->smallConst &&
                                   (n->nsucc > 0 || n->usedOutside);
      if (erase && fzOpGetNumResults(n->op) == 1 &&
          !fzValueHasUses(fzOpGetResult(n->op, 0))) {
        fzOpErase(n->op);
        n->op = NULL;
      }
    }
}

/* transforms/fusion/merge.c - merging groups without making a cycle.
 *
 * Groups are union-find sets (union by size, path halving). Each group has
 * an `ord`; every edge between two groups goes from a lower ord to a
 * higher one. Merging a set of groups is legal when no path leaves the set
 * and comes back; only groups with ord below the set's highest can lie on
 * such a path, so the forward search is bounded by that window, and by a
 * budget of edges, which keeps the pass near-linear. The search is
 * best-first, highest ord first: a path back into the set, when there is
 * one, is found after few steps. On commit, the window is reordered as in
 * Pearce and Kelly's dynamic topological sort: the groups that reach the
 * set go first, then the merged group, then those it reaches, reusing the
 * window's ord values (when nothing in the window is reached, the merged
 * group simply takes the highest ord).
 */
#include <stdlib.h>
#include <string.h>

#include "transforms/fusion/fusion_internal.h"

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
  size_t edges; /* examined so far, against the budget */
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
    s->edges += cnt;
    if (s->edges > F->resolved.searchBudget)
      return MERGE_BUDGET;
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
  F->dryKey = 0; /* F->list is about to change */
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
  /* A commit right after a successful dry run of the same set, with no
   * merge in between, reuses its forward search (still in F->list). */
  uint64_t key = F->mergeSerial * 0x9e3779b97f4a7c15ULL;
  for (size_t i = 0; i < n; ++i)
    key = (key ^ roots[i]) * 0x100000001b3ULL;
  key |= 1;
  Search s = {ffMarkSet(F, roots, n), 0, hi, true, NO_NODE, 0};
  FMergeResult r = MERGE_OK;
  if (!commit || F->dryKey != key)
    r = search(F, roots, n, &s);
  *witness = s.witness;
  if (r == MERGE_OK && !commit)
    F->dryKey = key;
  if (r != MERGE_OK || !commit)
    return r;
  F->mergeSerial++;
  uint32_t newOrd = hi;
  if (F->list.len) {
    size_t nf, nb;
    uint64_t *fwd = sorted_keys(F, &nf);
    if (!fwd)
      return MERGE_BUDGET;
    Search b = {s.setEpoch, 0, lo, false, NO_NODE, 0};
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


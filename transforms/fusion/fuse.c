/* transforms/fusion/fuse.c - the grouping decisions of the fusion pass.
 *
 * Phase 1, vertical (producers into consumers). Ops are visited in reverse
 * canonical order, so when an op is visited every consumer has already
 * found its group. The op then tries to join its consumers' groups, in
 * canonical order, one after the other: each step must give a legal group
 * (analyze.c), keep the graph of groups acyclic (graph.c), and, in cost
 * mode, not be slower by the cost model's estimate. Joining several
 * consumer groups at once makes diamonds and siblings one group; joining
 * one of several makes the op's value an extra output (multi-output). In
 * cost mode, an elementwise producer whose consumers could not all be
 * joined is instead copied into each consumer group that can take it,
 * when the estimate says that recomputing beats storing and loading it.
 *
 * Phase 2, horizontal. Groups that read the same tensor in full (a
 * function argument or a result left unfused) are merged when legal,
 * acyclic and (cost mode) not slower, so the tensor is read once.
 *
 * Each refusal is recorded at the op for the remarks (the first one, in
 * canonical order, is kept). Everything is visited in canonical order,
 * which makes the result independent of the input's op order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/fusion/fusion_internal.h"

void ffRecord(FFuser *F, uint32_t node, const FRefusal *why) {
  if (!F->why || node == NO_NODE)
    return;
  FWhy **tail = &F->why[node];
  int n = 0;
  for (; *tail; tail = &(*tail)->next)
    if (++n == 3)
      return;
  FWhy *w = fzArenaAlloc(&F->arena, sizeof *w);
  if (!w) {
    F->failed = true;
    return;
  }
  w->r = *why;
  w->next = NULL;
  *tail = w;
}

static void record_simple(FFuser *F, uint32_t node, FReasonCode code) {
  FRefusal r;
  memset(&r, 0, sizeof r);
  r.code = (uint8_t)code;
  r.other = r.witness = NO_NODE;
  ffRecord(F, node, &r);
}

typedef struct GroupKey {
  uint64_t key;
  uint32_t root;
} GroupKey;

static int cmp_key(const void *a, const void *b) {
  const GroupKey *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->root < y->root ? -1 : x->root > y->root;
}

/* Sorts group roots nearest first: by their place in the current
 * topological order of groups (deterministic, like everything the pass
 * computes from the canonical order). Nearer groups have smaller windows
 * to search for cycles; a search over budget stops the candidate list. */
static bool sort_groups(FFuser *F, uint32_t *roots, size_t n) {
  if (n < 2)
    return true;
  GroupKey *k = fzMalloc(F->ctx, n * sizeof *k);
  if (!k)
    return !(F->failed = true);
  for (size_t i = 0; i < n; ++i) {
    k[i].key = F->ord[roots[i]];
    k[i].root = roots[i];
  }
  qsort(k, n, sizeof *k, cmp_key);
  for (size_t i = 0; i < n; ++i)
    roots[i] = k[i].root;
  fzFree(F->ctx, k);
  return true;
}

/* The distinct groups of the fusable users in users[0..n), without
 * `exclude` and (when noContraction) contraction groups. */
static uint32_t *user_groups(FFuser *F, const uint32_t *users, uint32_t n,
                             uint32_t exclude, bool noContraction,
                             size_t *count) {
  *count = 0;
  uint32_t *out = fzMalloc(F->ctx, (n ? n : 1) * sizeof *out);
  if (!out) {
    F->failed = true;
    return NULL;
  }
  uint32_t e = ++F->epoch;
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t u = users[k];
    if (u == NO_NODE || F->nodes[u].role != ROLE_FUSABLE)
      continue;
    uint32_t r = ffFind(F, u);
    FGroup *g = &F->groups[r];
    if (r == exclude || F->stamp[r] == e ||
        (noContraction && g->hasContraction))
      continue;
    F->stamp[r] = e;
    out[(*count)++] = r;
  }
  if (!sort_groups(F, out, *count)) {
    fzFree(F->ctx, out);
    return NULL;
  }
  return out;
}

/* One step of growing the set S (roots[0..n)) by group c: legal, acyclic
 * and, in cost mode, no slower. On success *fused holds the new estimate.
 * On refusal, why says why. */
static bool try_grow(FFuser *F, uint32_t *set, size_t n, uint32_t c,
                     const FzFusionEstimate *cur, FzFusionEstimate *fused,
                     FRefusal *why) {
  set[n] = c;
  FAnalysis a;
  ffAnalyze(F, set, n + 1, NO_NODE, &a);
  *why = a.why;
  why->other = c;
  if (!a.legal)
    return false;
  uint32_t witness, root;
  FMergeResult m = ffMerge(F, set, n + 1, false, &witness, &root);
  if (m != MERGE_OK) {
    why->code = (uint8_t)(m == MERGE_CYCLE ? R_CYCLE : R_BUDGET);
    why->witness = witness;
    return false;
  }
  *fused = a.est;
  if (F->resolved.mode != FZ_FUSION_MODE_COST)
    return true;
  FzFusionEstimate ec;
  if (!ffGroupEstimate(F, c, &ec, NULL)) {
    why->code = R_NO_ESTIMATE;
    return false;
  }
  double unfused = cur->seconds + ec.seconds;
  if (a.est.seconds <= unfused * (1 + 1e-9))
    return true;
  why->code = R_COST;
  why->secUnfused = unfused;
  why->secFused = a.est.seconds;
  why->bytesUnfused = cur->bytes + ec.bytes;
  why->bytesFused = a.est.bytes;
  return false;
}

/* Copies producer p into each group of cons[] that can take it, when the
 * estimate improves on `planSeconds` (the greedy plan's). Returns true
 * when it did. */
static bool try_recompute(FFuser *F, uint32_t p, const uint32_t *cons,
                          size_t k, double planSeconds) {
  const FNode *pn = &F->nodes[p];
  if (pn->kind == FZ_FUSION_REDUCTION || pn->contraction)
    return false;
  bool *take = fzCalloc(F->ctx, k, sizeof *take);
  if (!take) {
    F->failed = true;
    return false;
  }
  double cost = 0;
  size_t taken = 0;
  bool remaining = pn->usedOutside;
  for (uint32_t s = 0; s < pn->nsucc; ++s)
    if (pn->succ[s] != NO_NODE && F->nodes[pn->succ[s]].role != ROLE_FUSABLE)
      remaining = true;
  for (size_t i = 0; i < k; ++i) {
    FAnalysis a;
    ffAnalyze(F, &cons[i], 1, p, &a);
    FzFusionEstimate e;
    if (a.legal) {
      take[i] = true;
      taken++;
      cost += a.est.seconds;
    } else if (ffGroupEstimate(F, cons[i], &e, NULL)) {
      remaining = true;
      cost += e.seconds;
    } else {
      fzFree(F->ctx, take);
      return false;
    }
  }
  FzFusionEstimate ep;
  if (remaining && ffGroupEstimate(F, p, &ep, NULL))
    cost += ep.seconds;
  bool better = taken > 0 && cost < planSeconds * (1 - 1e-9);
  for (size_t i = 0; better && i < k && !F->failed; ++i) {
    if (!take[i])
      continue;
    uint32_t c = cons[i];
    FzOp *orig = F->nodes[p].op;
    FzOp *cl = fzOpClone(orig, NULL);
    if (!cl) {
      F->failed = true;
      break;
    }
    fzBlockInsertOpBefore(F->body, orig, cl);
    /* Uses inside group c now read the copy. */
    FzValue *from = fzOpGetResult(orig, 0), *to = fzOpGetResult(cl, 0);
    FzOpOperand *u = fzValueGetFirstUse(from);
    while (u) {
      FzOpOperand *next = fzOpOperandGetNextUse(u);
      uint32_t owner = ffNodeOf(F, fzOpOperandGetOwner(u));
      if (owner != NO_NODE && ffFind(F, owner) == c)
        fzOpOperandSet(u, to);
      u = next;
    }
    uint32_t cn = ffAddClone(F, p, cl);
    if (cn == NO_NODE)
      break;
    if (!ffCopyPreds(F, p, cn) || !ffRedirectEdges(F, p, c, cn))
      break;
    /* The copy feeds only group c and comes after the copy's producers:
     * joining c needs no search and cannot fail. It shares p's ord until
     * then. */
    uint32_t pair[2] = {cn, c}, witness, root;
    if (ffMerge(F, pair, 2, true, &witness, &root) != MERGE_OK)
      F->failed = true;
    if (F->duplicatedInto)
      F->duplicatedInto[p]++;
  }
  fzFree(F->ctx, take);
  if (!better)
    return false;
  bool live = F->nodes[p].usedOutside;
  for (uint32_t s = 0; s < F->nodes[p].nsucc; ++s)
    live |= F->nodes[p].succ[s] != NO_NODE;
  if (!live)
    F->nodes[p].role = ROLE_DEAD;
  return true;
}

/* Phase 1 for producer p. */
static void vertical_one(FFuser *F, uint32_t p) {
  FNode *pn = &F->nodes[p];
  size_t k;
  uint32_t *cons = user_groups(F, pn->succ, pn->nsucc, NO_NODE, false, &k);
  if (!cons)
    return;
  if (k == 0) {
    FRefusal why;
    memset(&why, 0, sizeof why);
    why.code = R_NO_CONSUMER;
    why.witness = why.other = NO_NODE;
    /* value = 1 marks a value nobody uses (for the remark's wording). */
    why.value = pn->nsucc == 0 && !pn->usedOutside ? 1 : 0;
    ffRecord(F, p, &why);
    fzFree(F->ctx, cons);
    return;
  }
  uint32_t *set = fzMalloc(F->ctx, (k + 1) * sizeof *set);
  if (!set) {
    F->failed = true;
    fzFree(F->ctx, cons);
    return;
  }
  bool cost = F->resolved.mode == FZ_FUSION_MODE_COST;
  size_t n = 1;
  set[0] = ffFind(F, p);
  FzFusionEstimate cur, ec;
  memset(&cur, 0, sizeof cur);
  bool haveCur = !cost || ffGroupEstimate(F, set[0], &cur, NULL);
  if (!haveCur) {
    FRefusal why;
    memset(&why, 0, sizeof why);
    why.code = R_NO_ESTIMATE;
    why.other = cons[0];
    why.witness = NO_NODE;
    snprintf(why.detail, sizeof why.detail,
             "the cost model '%s' gave no estimate",
             F->model->name ? F->model->name : "?");
    ffRecord(F, p, &why);
  }
  double restSeconds = 0; /* consumer groups left out (cost mode) */
  for (size_t i = 0; i < k && haveCur; ++i) {
    FRefusal why;
    FzFusionEstimate fused;
    if (n > 1 && (F->resolved.disable & FZ_FUSION_DISABLE_HORIZONTAL)) {
      memset(&why, 0, sizeof why);
      why.code = R_DISABLED;
      why.other = cons[i];
      why.witness = NO_NODE;
      strcpy(why.detail, "horizontal fusion is disabled");
      ffRecord(F, p, &why);
    } else if (try_grow(F, set, n, cons[i], &cur, &fused, &why)) {
      set[n++] = cons[i];
      cur = fused;
      continue;
    } else {
      ffRecord(F, p, &why);
      if (why.code == R_BUDGET)
        break; /* farther groups have larger windows still */
    }
    if (cost && ffGroupEstimate(F, cons[i], &ec, NULL))
      restSeconds += ec.seconds;
  }
  bool done = false;
  if (cost && haveCur && F->resolved.allowRecompute && n < k + 1 && k >= 2)
    done = try_recompute(F, p, cons, k, cur.seconds + restSeconds);
  if (!done && n > 1) {
    /* Checked acyclic above; the commit can still run out of search
     * budget while reordering (its backward search), and then refuses. */
    uint32_t witness, root;
    if (ffMerge(F, set, n, true, &witness, &root) != MERGE_OK) {
      FRefusal why;
      memset(&why, 0, sizeof why);
      why.code = R_BUDGET;
      why.other = set[1];
      why.witness = NO_NODE;
      ffRecord(F, p, &why);
    }
  }
  fzFree(F->ctx, set);
  fzFree(F->ctx, cons);
}

/* Phase 2 for the users of one tensor of `elements` elements. */
static void horizontal_one(FFuser *F, const uint32_t *users, uint32_t nu,
                           double elements) {
  size_t k;
  uint32_t *cons = user_groups(F, users, nu, NO_NODE, true, &k);
  if (!cons)
    return;
  /* Only groups that read the whole tensor; at most 16 of them. */
  size_t m = 0;
  for (size_t i = 0; i < k && m < 16; ++i) {
    FzFusionEstimate e;
    double points;
    if (ffGroupEstimate(F, cons[i], &e, &points) && elements >= points &&
        F->groups[cons[i]].outputs > 0)
      cons[m++] = cons[i];
  }
  uint32_t *set = m >= 2 ? fzMalloc(F->ctx, m * sizeof *set) : NULL;
  bool *used = m >= 2 ? fzCalloc(F->ctx, m, sizeof *used) : NULL;
  for (size_t seed = 0; set && used && seed < m; ++seed) {
    if (used[seed])
      continue;
    size_t n = 1;
    set[0] = cons[seed];
    used[seed] = true;
    FzFusionEstimate cur;
    if (!ffGroupEstimate(F, set[0], &cur, NULL))
      continue;
    for (size_t i = seed + 1; i < m; ++i) {
      FRefusal why;
      FzFusionEstimate fused;
      if (used[i])
        continue;
      if (!try_grow(F, set, n, cons[i], &cur, &fused, &why)) {
        if (why.code == R_BUDGET)
          break;
        continue;
      }
      set[n++] = cons[i];
      used[i] = true;
      cur = fused;
    }
    uint32_t witness, root;
    if (n > 1)
      (void)ffMerge(F, set, n, true, &witness, &root); /* may refuse */
  }
  if (m >= 2 && (!set || !used))
    F->failed = true;
  fzFree(F->ctx, set);
  fzFree(F->ctx, used);
  fzFree(F->ctx, cons);
}

bool ffRun(FFuser *F) {
  for (uint32_t i = F->numOrdered; i-- > 0 && !F->failed;) {
    uint32_t p = F->order[i];
    if (F->nodes[p].role == ROLE_OPAQUE)
      record_simple(F, p, R_OPAQUE);
    else if (F->nodes[p].role == ROLE_FUSABLE)
      vertical_one(F, p);
  }
  if (F->resolved.disable & FZ_FUSION_DISABLE_HORIZONTAL)
    return !F->failed;
  for (uint32_t a = 0; a < F->numArgs && !F->failed; ++a)
    horizontal_one(F, F->argUsers[a], F->numArgUsers[a],
                   ffNumElements(fzValueGetType(
                       fzBlockGetArgument(F->body, a))));
  for (uint32_t i = 0; i < F->numOrdered && !F->failed; ++i) {
    uint32_t p = F->order[i];
    const FNode *pn = &F->nodes[p];
    if (pn->role == ROLE_DEAD || fzOpGetNumResults(pn->op) != 1 ||
        pn->nsucc < 2)
      continue;
    horizontal_one(F, pn->succ, pn->nsucc,
                   ffNumElements(fzValueGetType(fzOpGetResult(pn->op, 0))));
  }
  return !F->failed;
}

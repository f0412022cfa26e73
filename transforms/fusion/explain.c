/* transforms/fusion/explain.c - what the fusion pass says about its
 * decisions: one remark per op (remarks=true) and a report per function
 * (report=true).
 *
 * Remarks are reported at each op's own location, so `--verify-diagnostics`
 * can check them with `expected-remark`:
 *
 *   fused into group N (KIND, M ops)
 *   not fused: cannot join group N: <the rule that failed>
 *   not fused: joining group N would exceed max-ops (65 > 64)
 *   not fused: joining group N would create a cycle through group K ('op')
 *   not fused: joining group N is slower: unfused B bytes, T us vs fused ...
 *   not fused: no fusable consumer
 *   not fused: 'func.call' is opaque to fusion
 *   duplicated into groups 2, 5 (recomputing beats a store and a load)
 *   existing group kept as written
 *
 * Group numbers follow the canonical order, so they do not change with
 * the order of independent ops.
 */
#include <stdio.h>
#include <string.h>

#include "transforms/fusion/fusion_internal.h"

static const char *op_name(const FNode *n) {
  return fzIdentGetString(fzOpGetName(n->op)).data;
}

static uint32_t group_of(const uint32_t *ids, uint32_t node) {
  return node == NO_NODE ? NO_NODE : ids[node];
}

void ffFormatRefusal(FFuser *F, const FRefusal *w, const uint32_t *ids,
                     FzBuf *b) {
  uint32_t g = group_of(ids, w->other);
  char gs[32];
  if (g != NO_NODE)
    snprintf(gs, sizeof gs, "group %u", g);
  else
    snprintf(gs, sizeof gs, "its consumer");
  switch ((FReasonCode)w->code) {
  case R_NONE:
    fzBufPuts(b, "no reason recorded");
    return;
  case R_OPAQUE:
    fzBufPuts(b, "opaque to fusion");
    return;
  case R_NO_CONSUMER:
    fzBufPuts(b, w->value == 1 ? "its result is unused"
                               : "no fusable consumer");
    return;
  case R_KIND:
  case R_DISABLED:
  case R_NO_ESTIMATE:
    fzBufPrintf(b, "cannot join %s: %s", gs, w->detail);
    return;
  case R_LIMIT:
    fzBufPrintf(b, "joining %s would exceed %s (%.0f > %.0f)", gs, w->limit,
                w->value, w->max);
    return;
  case R_CYCLE: {
    uint32_t k = group_of(ids, w->witness);
    if (k != NO_NODE && w->witness != NO_NODE)
      fzBufPrintf(b, "joining %s would create a cycle through group %u "
                     "('%s')", gs, k, op_name(&F->nodes[w->witness]));
    else
      fzBufPrintf(b, "joining %s would create a cycle", gs);
    return;
  }
  case R_BUDGET:
    fzBufPrintf(b, "joining %s: the cycle check went over search-budget "
                   "(%zu edges)", gs, F->resolved.searchBudget);
    return;
  case R_COST:
    fzBufPrintf(b, "joining %s is slower: unfused %.0f bytes, %.2f us vs "
                   "fused %.0f bytes, %.2f us", gs, w->bytesUnfused,
                w->secUnfused * 1e6, w->bytesFused, w->secFused * 1e6);
    return;
  }
}

static void remark_for(FFuser *F, uint32_t i, const uint32_t *ids,
                       const uint32_t *sizes, FzBuf *b) {
  const FNode *n = &F->nodes[i];
  fzBufClear(b);
  if (n->role == ROLE_PINNED) {
    fzBufPuts(b, "existing group kept as written");
    return;
  }
  bool dup = F->duplicatedInto && F->duplicatedInto[i] > 0;
  if (dup) {
    fzBufPuts(b, n->role == ROLE_DEAD ? "duplicated into groups "
                                      : "not fused: duplicated into groups ");
    bool first = true;
    for (uint32_t c = F->numOrdered; c < F->n; ++c)
      if (F->nodes[c].origin == i && ids[c] != NO_NODE) {
        fzBufPrintf(b, "%s%u", first ? "" : ", ", ids[c]);
        first = false;
      }
    fzBufPuts(b, " (recomputing beats a store and a load)");
    return;
  }
  uint32_t g = ids[i];
  if (g != NO_NODE && sizes[g] > 1) {
    fzBufPrintf(b, "fused into group %u (%s, %u ops)", g,
                fzFusionGroupKindName(ffGroupKind(F, ffFind(F, i))),
                sizes[g]);
    return;
  }
  if (n->role == ROLE_OPAQUE) {
    fzBufPrintf(b, "not fused: '%s' is opaque to fusion", op_name(n));
    return;
  }
  fzBufPuts(b, "not fused: ");
  if (!F->why[i]) {
    fzBufPuts(b, "no reason recorded");
    return;
  }
  for (const FWhy *w = F->why[i]; w; w = w->next) {
    if (w != F->why[i])
      fzBufPuts(b, "; ");
    ffFormatRefusal(F, &w->r, ids, b);
  }
}

void ffEmitRemarks(FFuser *F, const uint32_t *ids) {
  uint32_t *sizes = fzCalloc(F->ctx, F->n ? F->n : 1, sizeof *sizes);
  if (!sizes) {
    F->failed = true;
    return;
  }
  for (uint32_t i = 0; i < F->n; ++i)
    if (ids[i] != NO_NODE)
      sizes[ids[i]]++;
  FzBuf b;
  fzBufInit(&b, F->ctx);
  for (uint32_t k = 0; k < F->numOrdered; ++k) {
    uint32_t i = F->order[k];
    if (F->nodes[i].role == ROLE_FREE || !F->nodes[i].op)
      continue;
    remark_for(F, i, ids, sizes, &b);
    fzEmitRemark(F->ctx, fzOpGetLoc(F->nodes[i].op), "%s",
                 b.data ? b.data : "");
  }
  fzBufFree(&b);
  fzFree(F->ctx, sizes);
}

static void append_chunk(FzStringRef chunk, void *ud) {
  fzBufAppend(ud, chunk.data, chunk.length);
}

/* The position diagnostics show ("m.fuse:2:8", or "model.onnx: node" for
 * an imported model's op). */
static void print_loc(FzBuf *b, FzLoc *loc) {
  if (!fzLocPrintPosition(loc, append_chunk, b))
    fzBufPuts(b, "unknown");
}

static void print_to_stderr(FzStringRef chunk, void *ud) {
  (void)ud;
  fwrite(chunk.data, 1, chunk.length, stderr);
}

void ffReport(FFuser *F, const uint32_t *ids, uint32_t numKernels,
              FzFusionStats *s) {
  uint32_t *sizes = fzCalloc(F->ctx, numKernels + 1, sizeof *sizes);
  uint32_t *first = fzMalloc(F->ctx, (numKernels + 1) * sizeof *first);
  if (!sizes || !first) {
    fzFree(F->ctx, sizes);
    fzFree(F->ctx, first);
    F->failed = true;
    return;
  }
  for (uint32_t g = 0; g < numKernels; ++g)
    first[g] = NO_NODE;
  for (uint32_t k = 0; k < F->numOrdered; ++k) {
    uint32_t i = F->order[k];
    if (ids[i] == NO_NODE)
      continue;
    if (first[ids[i]] == NO_NODE)
      first[ids[i]] = i;
  }
  for (uint32_t i = 0; i < F->n; ++i)
    if (ids[i] != NO_NODE)
      sizes[ids[i]]++;
  FzBuf b;
  fzBufInit(&b, F->ctx);
  FzStringRef name = fzSymbolGetName(F->func);
  fzBufPrintf(&b, "fusion report for @%.*s (target=%s, mode=%s)\n",
              (int)name.length, name.data ? name.data : "",
              F->target->name ? F->target->name : "?",
              F->resolved.mode == FZ_FUSION_MODE_COST ? "cost" : "rules");
  fzBufPrintf(&b, "  ops: %zu\n", s->ops);
  fzBufPrintf(&b, "  kernels: %zu before, %zu after\n", s->kernelsBefore,
              s->kernelsAfter);
  fzBufPrintf(&b, "  groups: %zu (%zu ops fused, %zu duplicated)\n",
              s->groups, s->fusedOps, s->duplicated);
  fzBufPrintf(&b, "  bytes moved (estimated): %.0f before, %.0f after\n",
              s->bytesBefore, s->bytesAfter);
  fzBufPrintf(&b, "  time (estimated): %.2f us before, %.2f us after\n",
              s->secondsBefore * 1e6, s->secondsAfter * 1e6);
  /* The three largest groups (ties: lower number first). */
  bool *shown = fzCalloc(F->ctx, numKernels + 1, sizeof *shown);
  for (int rank = 0; shown && rank < 3; ++rank) {
    uint32_t best = NO_NODE;
    for (uint32_t g = 0; g < numKernels; ++g)
      if (!shown[g] && sizes[g] > 1 &&
          (best == NO_NODE || sizes[g] > sizes[best]))
        best = g;
    if (best == NO_NODE)
      break;
    if (rank == 0)
      fzBufPuts(&b, "  largest groups:\n");
    shown[best] = true;
    uint32_t node = first[best];
    fzBufPrintf(&b, "    group %u: %u ops (%s) at ", best, sizes[best],
                fzFusionGroupKindName(ffGroupKind(F, ffFind(F, node))));
    print_loc(&b, fzOpGetLoc(F->nodes[node].op));
    fzBufPutc(&b, '\n');
  }
  fzFree(F->ctx, shown);
  FzPrintCallback out = F->opts->reportOut ? F->opts->reportOut
                                           : print_to_stderr;
  if (b.data)
    out(fzBufRef(&b), F->opts->reportUserData);
  fzBufFree(&b);
  fzFree(F->ctx, sizes);
  fzFree(F->ctx, first);
}

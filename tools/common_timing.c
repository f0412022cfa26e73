/* tools/common_timing.c - the --timing report (tools/common_timing.h).
 *
 *   ===----------------------------------------------------------===
 *                    ... Compile time report ...
 *   ===----------------------------------------------------------===
 *     Total Execution Time: 2.5121 seconds
 *
 *     ----Wall Time----  ----Name----
 *       0.0401 (  1.6%)  parse/import
 *       ...
 *       1.9004 ( 75.6%)  LLVM optimize+codegen (32 modules, 2 threads,
 *                        3.7002 s of thread time)
 *       0.4010 ( 10.8%)    main_k3      (share of the thread time)
 *       0.0101 (  0.4%)  Rest
 *       2.5121 (100.0%)  Total
 *
 *     Kernel cache: 30 hits, 2 misses (/home/u/.cache/fuse)
 *     Cubin cache: 1 hit, 0 misses          (fuse-run --device cuda)
 *
 * A phase a library call reports several times (one per function,
 * module or call) is one row, its times summed.
 */
#include <string.h>
#include <time.h>

#include "tools/common_timing.h"

double fzToolTimingNow(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static FzToolPhase *phase_named(FzToolTiming *t, const char *name) {
  for (size_t i = 0; i < t->numPhases; ++i)
    if (!strcmp(t->phases[i].name, name))
      return &t->phases[i];
  if (t->numPhases == FZ_TOOL_TIMING_PHASES)
    return NULL;
  FzToolPhase *p = &t->phases[t->numPhases++];
  memset(p, 0, sizeof *p);
  p->name = name;
  return p;
}

static void add_item(FzToolTiming *t, const FzTimingRecord *r) {
  size_t k = t->numSlowest;
  while (k > 0 && t->slowest[k - 1].seconds < r->wallSeconds)
    --k;
  if (k == FZ_TOOL_TIMING_SLOWEST)
    return;
  size_t last = t->numSlowest < FZ_TOOL_TIMING_SLOWEST ? t->numSlowest
                                                       : t->numSlowest - 1;
  memmove(&t->slowest[k + 1], &t->slowest[k],
          (last - k) * sizeof t->slowest[0]);
  FzToolItem *it = &t->slowest[k];
  it->phase = r->phase;
  snprintf(it->name, sizeof it->name, "%s", r->item);
  it->seconds = r->wallSeconds;
  if (t->numSlowest < FZ_TOOL_TIMING_SLOWEST)
    t->numSlowest++;
}

static void record(const FzTimingRecord *r, void *userData) {
  FzToolTiming *t = userData;
  if (!strcmp(r->phase, "cubin cache")) {
    t->cubinUsed = true;
    t->cubinHits += r->cacheHits;
    t->cubinMisses += r->cacheMisses;
    return;
  }
  if (!strcmp(r->phase, "kernel cache")) {
    t->cacheUsed = true;
    t->cacheHits += r->cacheHits;
    t->cacheMisses += r->cacheMisses;
    t->cacheCorrupt += r->cacheCorrupt;
    snprintf(t->cacheDir, sizeof t->cacheDir, "%s", r->item ? r->item : "");
    return;
  }
  if (r->item) {
    add_item(t, r);
    return;
  }
  FzToolPhase *p = phase_named(t, r->phase);
  if (!p)
    return;
  p->wall += r->wallSeconds;
  p->busy += r->busySeconds;
  p->items += r->items;
  if (r->threads > p->threads)
    p->threads = r->threads;
  t->covered += r->wallSeconds;
}

void fzToolTimingInit(FzToolTiming *t) {
  memset(t, 0, sizeof *t);
  t->sink.record = record;
  t->sink.userData = t;
  t->start = fzToolTimingNow();
}

void fzToolTimingAdd(FzToolTiming *t, const char *name, double wall) {
  if (!t)
    return;
  FzTimingRecord r = {name, NULL, wall, wall, 1, 0, 0, 0, 0};
  record(&r, t);
}

void fzToolTimingAddRest(FzToolTiming *t, const char *name, double t0,
                         double covered0) {
  if (!t)
    return;
  double rest = (fzToolTimingNow() - t0) - (t->covered - covered0);
  fzToolTimingAdd(t, name, rest > 0 ? rest : 0);
}

static void row(FILE *out, double s, double total, const char *indent,
                const char *name) {
  fprintf(out, "  %8.4f (%5.1f%%)  %s%s", s, total > 0 ? 100 * s / total : 0,
          indent, name);
}

void fzToolTimingPrint(const FzToolTiming *t, FILE *out) {
  double total = fzToolTimingNow() - t->start;
  const char *bar = "===-------------------------------------------------"
                    "------------------------===";
  fprintf(out,
          "%s\n                         ... Compile time report ...\n%s\n"
          "  Total Execution Time: %.4f seconds\n\n"
          "  ----Wall Time----  ----Name----\n",
          bar, bar, total);
  double covered = 0;
  for (size_t i = 0; i < t->numPhases; ++i) {
    const FzToolPhase *p = &t->phases[i];
    covered += p->wall;
    row(out, p->wall, total, "", p->name);
    if (p->items)
      fprintf(out, " (%zu module%s, %u thread%s, %.4f s of thread time)",
              p->items, p->items == 1 ? "" : "s", p->threads,
              p->threads == 1 ? "" : "s", p->busy);
    fputc('\n', out);
    for (size_t k = 0; k < t->numSlowest; ++k)
      if (!strcmp(t->slowest[k].phase, p->name)) {
        row(out, t->slowest[k].seconds, p->busy, "  ", t->slowest[k].name);
        fputc('\n', out);
      }
  }
  row(out, total > covered ? total - covered : 0, total, "", "Rest\n");
  row(out, total, total, "", "Total\n");
  if (t->cacheUsed) {
    fprintf(out, "\n  Kernel cache: %zu hit%s, %zu miss%s", t->cacheHits,
            t->cacheHits == 1 ? "" : "s", t->cacheMisses,
            t->cacheMisses == 1 ? "" : "es");
    if (t->cacheCorrupt)
      fprintf(out, " (%zu corrupt, rebuilt)", t->cacheCorrupt);
    fprintf(out, " (%s)\n", t->cacheDir);
  }
  if (t->cubinUsed)
    fprintf(out, "  Cubin cache: %zu hit%s, %zu miss%s\n", t->cubinHits,
            t->cubinHits == 1 ? "" : "s", t->cubinMisses,
            t->cubinMisses == 1 ? "" : "es");
}

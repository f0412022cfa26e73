/* ir/pass_report.c - the timing and statistics reports of a pass manager.
 *
 * Both walk the pipeline in order, one row per pass instance and one per
 * nested pipeline (indented under it), in the layout of mlir-opt's
 * --mlir-timing and --mlir-pass-statistics reports. Numbers accumulate
 * over every run of the manager. Reports are built in a buffer and
 * handed to the callback at once.
 */
#include "ir/pass_internal.h"

static const char kRule[] =
    "===-------------------------------------------------------------------"
    "------===\n";

static void title(FzBuf *b, const char *text) {
  size_t width = sizeof kRule - 2, len = strlen(text);
  fzBufPuts(b, kRule);
  for (size_t i = 0; len < width && i < (width - len) / 2; ++i)
    fzBufPutc(b, ' ');
  fzBufPuts(b, text);
  fzBufPutc(b, '\n');
  fzBufPuts(b, kRule);
}

static const char *display_name(const FzPass *p) {
  return p->def->displayName ? p->def->displayName : p->def->argument;
}

static void indent(FzBuf *b, unsigned depth) {
  for (unsigned i = 0; i < depth; ++i)
    fzBufPuts(b, "  ");
}

/*===--- Timing -----------------------------------------------------------===*/

static void time_row(FzBuf *b, double secs, double total, unsigned depth,
                     const char *name, const char *suffix) {
  double pct = total > 0 ? secs * 100.0 / total : 0.0;
  fzBufPrintf(b, "  %8.4f (%5.1f%%)  ", secs, pct);
  indent(b, depth);
  fzBufPrintf(b, "%s%s\n", name, suffix);
}

static void time_rows(FzBuf *b, const FzPassManager *pm, double total,
                      unsigned depth) {
  for (size_t i = 0; i < pm->num; ++i) {
    const FzPMEntry *e = &pm->entries[i];
    if (e->pass) {
      time_row(b, e->pass->seconds, total, depth, display_name(e->pass), "");
      continue;
    }
    FzBuf name;
    fzBufInit(&name, pm->ctx);
    fzBufPrintf(&name, "'%s' Pipeline", fzPassManagerGetAnchor(e->nested));
    time_row(b, e->nested->seconds, total, depth,
             name.data ? name.data : "", "");
    fzBufFree(&name);
    time_rows(b, e->nested, total, depth + 1);
  }
}

void fzPassManagerPrintTiming(const FzPassManager *pm, FzPrintCallback cb,
                              void *userData) {
  FzBuf b;
  fzBufInit(&b, pm->ctx);
  double total = pm->seconds;
  title(&b, "... Execution time report ...");
  fzBufPrintf(&b, "  Total Execution Time: %.4f seconds\n\n", total);
  fzBufPuts(&b, "  ----Wall Time----  ----Name----\n");
  time_rows(&b, pm, total, 0);
  if (pm == pm->top && fzPMInstrVerifyEnabled(pm))
    time_row(&b, fzPMInstrGetVerifierSeconds(pm), total, 0, "Verifier",
             " (after each pass)");
  time_row(&b, total, total, 0, "Total", "");
  if (b.data)
    cb(fzBufRef(&b), userData);
  fzBufFree(&b);
}

/*===--- Statistics -------------------------------------------------------===*/

static void stat_rows(FzBuf *b, const FzPassManager *pm, unsigned depth) {
  for (size_t i = 0; i < pm->num; ++i) {
    const FzPMEntry *e = &pm->entries[i];
    indent(b, depth);
    if (e->nested) {
      fzBufPrintf(b, "'%s' Pipeline\n", fzPassManagerGetAnchor(e->nested));
      stat_rows(b, e->nested, depth + 1);
      continue;
    }
    const FzPass *p = e->pass;
    fzBufPrintf(b, "%s\n", display_name(p));
    int width = 1;
    for (size_t s = 0; s < p->def->numStatistics; ++s) {
      char tmp[32];
      int w = snprintf(tmp, sizeof tmp, "%llu",
                       (unsigned long long)p->stats[s]);
      if (w > width)
        width = w;
    }
    for (size_t s = 0; s < p->def->numStatistics; ++s) {
      const FzPassStatisticDef *sd = &p->def->statistics[s];
      indent(b, depth + 1);
      fzBufPrintf(b, "(S) %*llu %s - %s\n", width,
                  (unsigned long long)p->stats[s], sd->name,
                  sd->description ? sd->description : "");
    }
  }
}

void fzPassManagerPrintStatistics(const FzPassManager *pm,
                                  FzPrintCallback cb, void *userData) {
  FzBuf b;
  fzBufInit(&b, pm->ctx);
  title(&b, "... Pass statistics report ...");
  stat_rows(&b, pm, 0);
  if (b.data)
    cb(fzBufRef(&b), userData);
  fzBufFree(&b);
}

/* tools/common_progress.c - the progress line (tools/common_progress.h).
 * The library calls update one call at a time, possibly from its
 * code-generation threads; nothing here is shared with anything else. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/common_progress.h"
#include "tools/common_timing.h" /* fzToolTimingNow */

enum { kDelayMs = 1000, kEveryMs = 100 };

static void update(const char *what, size_t done, size_t total, void *ud) {
  FzToolProgress *p = ud;
  double now = fzToolTimingNow();
  if (done == 0) {
    p->start = now;
    p->lastShown = 0;
    p->shown = false;
    return;
  }
  if (p->mode == 2) {
    fprintf(stderr, "%s: %zu/%zu\n", what, done, total);
    return;
  }
  if (p->mode != 1)
    return;
  bool last = done >= total;
  if (last) {
    if (p->shown)
      fputs("\r\033[K", stderr); /* erase the line */
    p->shown = false;
    return;
  }
  if ((now - p->start) * 1000 < kDelayMs ||
      (p->shown && (now - p->lastShown) * 1000 < kEveryMs))
    return;
  fprintf(stderr, "\r%s: %zu/%zu\033[K", what, done, total);
  fflush(stderr);
  p->shown = true;
  p->lastShown = now;
}

void fzToolProgressInit(FzToolProgress *p) {
  memset(p, 0, sizeof *p);
  p->sink.update = update;
  p->sink.userData = p;
  const char *env = getenv("FZ_PROGRESS");
  if (env && !strcmp(env, "0"))
    p->mode = 0;
  else if (env && !strcmp(env, "1"))
    p->mode = 2;
  else
    p->mode = isatty(STDERR_FILENO) ? 1 : 0;
}

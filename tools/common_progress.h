/* tools/common_progress.h - "compiling kernels: 12/56" on stderr while a
 * compilation's code generation runs (fz/lowering.h, FzProgressSink):
 * only on a terminal and only once the compile has taken a second,
 * updated in place and erased when it is done. FZ_PROGRESS=1 shows it
 * from the first kernel also when stderr is no terminal, one line per
 * update (for tests); FZ_PROGRESS=0 never. Linked into every tool
 * (tools/common_*.c). */
#ifndef FZ_TOOLS_COMMON_PROGRESS_H
#define FZ_TOOLS_COMMON_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "fz/lowering.h"

typedef struct FzToolProgress {
  FzProgressSink sink; /* for the library's options */
  int mode;            /* 0: never, 1: terminal, 2: always (FZ_PROGRESS=1) */
  double start;        /* when the current count started */
  double lastShown;
  bool shown; /* a line is on the terminal */
} FzToolProgress;

/* Sets p->sink up; mode from FZ_PROGRESS and isatty(stderr). */
void fzToolProgressInit(FzToolProgress *p);

#endif /* FZ_TOOLS_COMMON_PROGRESS_H */

/* tools/common_timing.h - the compile-time report of --timing (fuse-run,
 * fuse-translate), in the manner of mlir-opt's --mlir-timing: the phases
 * the library reports through an FzTimingSink (fz/lowering.h) and those
 * a tool times itself, summed by name in the order they first ran, and
 * printed on stderr at the end. Linked into every tool
 * (tools/common_*.c). */
#ifndef FZ_TOOLS_COMMON_TIMING_H
#define FZ_TOOLS_COMMON_TIMING_H

#include <stdio.h>

#include "fz/lowering.h"

enum { FZ_TOOL_TIMING_PHASES = 24, FZ_TOOL_TIMING_SLOWEST = 5 };

typedef struct FzToolPhase {
  const char *name;  /* static storage */
  double wall, busy; /* seconds, summed over the reports */
  unsigned threads;  /* the most threads of one report */
  size_t items;      /* parts, summed */
} FzToolPhase;

typedef struct FzToolItem {
  const char *phase;
  char name[96];
  double seconds;
} FzToolItem;

typedef struct FzToolTiming {
  FzTimingSink sink; /* for the library's options: records into this */
  double start;      /* fzToolTimingInit's time: the report's total runs
                        from here */
  double covered;    /* wall seconds of every phase recorded so far */
  size_t numPhases;
  FzToolPhase phases[FZ_TOOL_TIMING_PHASES];
  /* The slowest items (kernels), slowest first. */
  size_t numSlowest;
  FzToolItem slowest[FZ_TOOL_TIMING_SLOWEST];
  /* The "kernel cache" records, summed (cacheDir: the last one's), and
   * fuse-run's "cubin cache" (the driver's code of the PTX, fz/cuda.h). */
  bool cacheUsed, cubinUsed;
  size_t cacheHits, cacheMisses, cacheCorrupt;
  size_t cubinHits, cubinMisses;
  char cacheDir[512];
} FzToolTiming;

/* Seconds on the monotonic clock. */
double fzToolTimingNow(void);
/* Starts the report's clock; t->sink records into t. */
void fzToolTimingInit(FzToolTiming *t);
/* Adds wall seconds to the phase `name` (static storage), timed by the
 * tool on its own thread. t may be NULL (nothing is timed). */
void fzToolTimingAdd(FzToolTiming *t, const char *name, double wall);
/* Adds to phase `name` the time since t0 that no phase recorded since
 * then covers (covered0: t->covered at t0): what a library call spent
 * beyond the phases it reported. t may be NULL. */
void fzToolTimingAddRest(FzToolTiming *t, const char *name, double t0,
                         double covered0);
/* Prints the report to out: the total from fzToolTimingInit to now,
 * each phase with its share, the slowest kernels under their phase,
 * the rest, and what the kernel cache did ("Kernel cache: 56 hits, 0
 * misses (DIR)") when a compile used it. */
void fzToolTimingPrint(const FzToolTiming *t, FILE *out);

#endif /* FZ_TOOLS_COMMON_TIMING_H */

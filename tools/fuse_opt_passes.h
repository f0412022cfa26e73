/* tools/fuse_opt_passes.h - fuse-opt's pass-related command line: the
 * pipeline (--pass-pipeline, per-pass flags, reproducers), IR printing
 * around passes, timing and statistics.
 *
 * fuse_opt.c calls fzOptPassFlagsParse for every option before its own
 * table, fzOptPassFlagsPrepare once after the command line is parsed, and
 * fzOptRunPasses on each chunk's verified module. Everything lives in
 * FzOptPassFlags (no heap, no globals): strings point into argv.
 */
#ifndef FZ_TOOLS_FUSE_OPT_PASSES_H
#define FZ_TOOLS_FUSE_OPT_PASSES_H

#include <stdio.h>

#include "fz/pass.h"

#define FZ_OPT_MAX_PASS_FLAGS 64
#define FZ_OPT_MAX_PRINT_LISTS 32

typedef struct FzOptPassFlags {
  const char *pipeline;   /* --pass-pipeline=... */
  const char *shorthand[FZ_OPT_MAX_PASS_FLAGS]; /* "cse", "canonicalize=o=1" */
  size_t numShorthand;
  const char *before[FZ_OPT_MAX_PRINT_LISTS];   /* --print-ir-before=a,b */
  size_t numBefore;
  const char *after[FZ_OPT_MAX_PRINT_LISTS];
  size_t numAfter;
  const char *treeDir;    /* --print-ir-tree-dir=DIR */
  const char *reproducer; /* --reproducer=FILE */
  bool listPasses, dumpPipeline, noVerifyEach, beforeAll, afterAll, afterChange,
      afterFailure, moduleScope, timing, statistics, runReproducer;
  bool fusionRemarks, fusionReport; /* --fusion-remarks, --fusion-report */
  bool allowUnregistered; /* set by the caller: anchors may name ops of
                             unregistered dialects */
  const char *fusionMode;  /* --fusion-mode=cost|rules */
  const char *layout;      /* --layout=nchw|nhwc: convert-layout's conv= */
  bool any;               /* some pass flag was given */
  char reproPipeline[16384]; /* from the input's first line */
} FzOptPassFlags;

/* Tries argv[i] as a pass flag. Returns how many argv entries it used
 * (0: not a pass flag; let fuse-opt's table have it), or -1 after
 * printing a usage error. */
int fzOptPassFlagsParse(FzOptPassFlags *f, int argc, char **argv, int i);

/* After the command line: handles --list-passes (prints, returns 0),
 * reads the pipeline of --run-reproducer from `input`, and checks the
 * pipeline once (errors printed, returns 1). Returns -1 to go on. */
int fzOptPassFlagsPrepare(FzOptPassFlags *f, const char *input, FILE *out);

/* Runs the pipeline on a chunk's module (a no-op without pass flags).
 * printFlags (FZ_PRINT_*) apply to IR dumps. Reports are printed to
 * stderr. Returns false after errors were reported. */
bool fzOptRunPasses(const FzOptPassFlags *f, FzOp *module,
                    unsigned printFlags);

/* Calls add(ctx, name) for every pass option and registered pass name
 * (fuse-opt's "did you mean"). */
void fzOptPassFlagsNames(void (*add)(void *ctx, const char *name),
                         void *ctx);

/* Lines for fuse-opt --help. */
void fzOptPassFlagsPrintHelp(FILE *out);

#endif /* FZ_TOOLS_FUSE_OPT_PASSES_H */

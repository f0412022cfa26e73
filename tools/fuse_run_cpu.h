/* tools/fuse_run_cpu.h - fuse-run's native CPU device (--device cpu):
 * compiling the module, running it, --bench and --check-interp. */
#ifndef FUSE_RUN_CPU_H
#define FUSE_RUN_CPU_H

#include <stdio.h>

#include "fz/precision.h"
#include "fz/runtime.h"
#include "tools/common_options.h"

typedef struct FuseRunCpuOptions {
  unsigned threads;     /* --threads N (0: one per core) */
  int64_t bench;        /* --bench N: timed runs (0: no benchmark) */
  int64_t profile;      /* --profile N: cuda, each kernel timed N times */
  bool checkInterp;     /* --check-interp: compare with the interpreter */
  bool fusionReport;    /* --fusion-report */
  bool noFuse;          /* --no-fuse: every op its own loop nest */
  bool fastMath;        /* --fast-math */
  bool exactMath;       /* --exact-math */
  bool noTile;          /* --no-tile */
  bool noStageRows;     /* --no-stage-rows */
  bool printLoopIR;     /* --print-loop-ir: the lowered module, to stderr */
  unsigned vectorWidth; /* --vector-width N: widest vectors, bits (0: default) */
  double rtol, atol;    /* for --check-interp (fuse-run's --rtol/--atol) */
  /* fuse-run's --precision (or FZ_GPU_TF32): cuda's FzGpuOptions; cpu
   * computes tf32 as exact f32 (bf16 and fp16 are applied to the module
   * by fuse-run before any device sees it). */
  FzPrecision precision;
  /* fuse-run's --layout: convert-layout before fusion on every compiled
   * device (the interpreter's reference stays the model's own NCHW). */
  FzGraphLayout layout;
  const char *benchLock; /* --bench-lock FILE: time while holding its lock */
  bool benchCold;       /* --bench-cold: cuda: L2 overwritten before each
                           timed run */
  double startSeconds;  /* fuseRunNow() when fuse-run started */
  unsigned codegenThreads; /* --codegen-threads N: LLVM threads (cpu, cuda)
                              (0: one per core) */
  bool timing;          /* --timing: the compile-time report on stderr */
  bool noCache;         /* --no-cache: cpu, cuda: no kernel cache */
  /* --gpu-arch: cuda's PTX target instead of the device's (sm_90a on an
   * sm_90 device: the wgmma matmul mapping); sim: sm_90a lowers matmuls
   * with it. NULL: the device's. */
  const char *gpuArch;
  /* Where --timing's phases go (set by main; NULL: no report). */
  struct FzToolTiming *timingReport;
} FuseRunCpuOptions;

/* Seconds on the monotonic clock. */
double fuseRunNow(void);

/* The peak f32 fma rate in GFLOP/s of `threads` threads at once
 * (register-only vector fmas, fuse_run_peak.c); *lanes: the vector's f32
 * lanes (16 with AVX-512F, 8 with AVX2+FMA), 0 with neither (returns 0). */
double fuseRunPeakGflops(unsigned threads, int *lanes);

/* --bench: the line "bench: first result after S s (import, compile and
 * the first run)", S counted from o->startSeconds, to out. */
void fuseRunPrintFirstResult(const FuseRunCpuOptions *o, FILE *out);

/* --bench-lock FILE: blocks until this process holds an exclusive lock
 * (flock) on FILE, created if missing, so that concurrent fuse-run
 * processes (and peers that lock the same file) compile in parallel but
 * time one at a time. Returns the descriptor to pass to
 * fuseRunBenchUnlock, -1 when no lock was asked for, or -2 after
 * printing an error. */
int fuseRunBenchLock(const FuseRunCpuOptions *o);
void fuseRunBenchUnlock(int fd);

/* --check-interp's comparison of output i, got, with the interpreter's,
 * want (numpy.allclose's rule; NaN matches NaN): prints one line
 * "check-interp: output_I: max abs error ..., max rel error ...: ok" (or
 * MISMATCH, with the first offending element) to out. */
bool fuseRunCheckOne(FILE *out, size_t i, const FzTensor *got,
                     const FzTensor *want, double rtol, double atol);

/* The table of the options above, for --help and "did you mean". */
extern const ToolParser fuseRunCpuParser;

/* Parses argv[i] when it is one of the options above: the number of argv
 * entries used, 0 when not ours, -1 after printing a usage error
 * (common_options.h). */
int fuseRunCpuParseArg(FuseRunCpuOptions *o, int argc, char **argv, int i);

typedef struct FuseRunCpu FuseRunCpu;

/* Compiles module for the host. quiet: report nothing (the caller falls
 * back to the interpreter), the first error's text in whyNot (whySize
 * bytes). NULL on failure. */
FuseRunCpu *fuseRunCpuCreate(FzContext *ctx, FzOp *module,
                             const FuseRunCpuOptions *o, bool quiet,
                             char *whyNot, size_t whySize);
void fuseRunCpuDestroy(FuseRunCpu *r);

/* Runs function `func` (of the module given to Create) on inputs; then
 * the benchmark and the interpreter check when asked for (reports on
 * out). *status: 0, or 1 when the check found a mismatch. False after an
 * error was reported. */
bool fuseRunCpuExecute(FuseRunCpu *r, FzOp *func, size_t nIn,
                       FzTensor *const *inputs, size_t *nOut,
                       FzTensor ***outputs, FILE *out, int *status);

#endif /* FUSE_RUN_CPU_H */

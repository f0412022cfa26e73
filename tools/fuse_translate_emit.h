/* tools/fuse_translate_emit.h - fuse-translate's code-generation
 * translations (--emit=llvm|asm|obj), kept beside fuse_translate.c. */
#ifndef FUSE_TRANSLATE_EMIT_H
#define FUSE_TRANSLATE_EMIT_H

#include "fz/lowering.h"

typedef struct FuseEmitOptions {
  const char *kind;    /* "llvm", "asm", "obj" or "ptx"; NULL: none */
  const char *gpuArch; /* --gpu-arch=sm_NN for --emit=ptx (default sm_90) */
  const char *mmaTile; /* --mma-tile=T: the tensor-core tile (--emit=ptx) */
  bool noMma;          /* --no-mma: no tensor-core matmuls (--emit=ptx) */
  bool tf32;           /* --tf32: f32 matmuls on tf32 tensor cores (ptx) */
  bool noRowStage;     /* --no-row-stage: long rows re-read per phase
                          (--emit=ptx) */
  FzCodegenOptions codegen;
  bool noFuse;         /* lower a graph-level module without fusion */
  unsigned codegenThreads; /* --codegen-threads=N (--emit=ptx; 0: one per
                              core) */
  /* --timing: where the phases go (tools/common_timing.h); NULL: none. */
  struct FzToolTiming *timing;
} FuseEmitOptions;

void fuseEmitOptionsInit(FuseEmitOptions *o);

/* Parses one command-line argument belonging to emission (--emit=K,
 * -O0..-O3, --fast-math, --exact-math, --no-parallel, --mcpu=,
 * --mattr=, --mtriple=, --no-fuse, --align=N, --gpu-arch=, --mma-tile=,
 * --no-mma, --codegen-threads=). Returns 1 when consumed,
 * 0 when not ours, -1 after printing a usage error. */
int fuseEmitParseArg(FuseEmitOptions *o, const char *arg);

/* The help lines of those options. */
extern const char fuseEmitHelp[];

/* Lowers module for the CPU when it is at the graph level, emits it in
 * o->kind's form and writes it to path ("-": stdout; a regular file is
 * written atomically). False after errors were reported. */
bool fuseEmitModule(FzOp *module, const FuseEmitOptions *o, const char *path);

#endif /* FUSE_TRANSLATE_EMIT_H */

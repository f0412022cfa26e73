/* tools/fuse_translate_emit.h - fuse-translate's code-generation
 * translations (--emit=llvm|asm|obj), kept beside fuse_translate.c. */
#ifndef FUSE_TRANSLATE_EMIT_H
#define FUSE_TRANSLATE_EMIT_H

#include "fz/lowering.h"
#include "fz/precision.h"
#include "tools/common_options.h"

typedef struct FuseEmitOptions {
  const char *kind;    /* "llvm", "asm", "obj" or "ptx"; NULL: none */
  const char *gpuArch; /* --gpu-arch=sm_NN for --emit=ptx (default sm_90) */
  const char *mmaTile; /* --mma-tile=T: the tensor-core tile (--emit=ptx) */
  bool noMma;          /* --no-mma: no tensor-core matmuls (--emit=ptx) */
  bool noSmallM;       /* --no-small-m: no small-M kernels (--emit=ptx) */
  /* --precision=P (--tf32: tf32, the old spelling): bf16/fp16 rewrite a
   * graph-level module's contractions for every --emit; the others choose
   * the GPU's f32 kernels (ptx) and mean exact f32 on the CPU. */
  FzPrecision precision;
  /* --layout=L: nhwc runs convert-layout before fusion (a graph-level
   * module, every --emit). */
  FzGraphLayout layout;
  bool haveLayout; /* --layout was given (else: auto for ptx, nchw else) */
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

/* Parses argv[i] if it is one of the code generation options (--emit=K,
 * -O0..-O3, --fast-math, --exact-math, --no-parallel, --mcpu, --mattr,
 * --mtriple, --no-fuse, --align, --gpu-arch, --mma-tile, --no-mma,
 * --precision, --tf32, ...): the number of argv entries used, 0 when it
 * is not one, -1 after printing a usage error (common_options.h). */
int fuseEmitParseArg(FuseEmitOptions *o, int argc, char **argv, int i);

/* Their table, for --help and "did you mean". */
extern const ToolParser fuseEmitParser;

/* Lowers module for the CPU when it is at the graph level, emits it in
 * o->kind's form and writes it to path ("-": stdout; a regular file is
 * written atomically). False after errors were reported. */
bool fuseEmitModule(FzOp *module, const FuseEmitOptions *o, const char *path);

#endif /* FUSE_TRANSLATE_EMIT_H */

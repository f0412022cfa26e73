/* tools/fuse_translate_emit.c - fuse-translate --emit=llvm|asm|obj: a
 * loop-level module (or a graph-level one, lowered first with the CPU
 * pipeline of fz/lowering.h) to LLVM IR, assembly or an object file for
 * the host (or --mtriple/--mcpu/--mattr).
 *
 * Output is collected in memory and written only when code generation
 * succeeded; a regular file is written to a unique temporary beside it
 * and renamed (tools/common_output.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fz/gpu.h"
#include "fz/lowering.h"
#include "tools/common_options.h"
#include "tools/common_output.h"
#include "tools/common_progress.h"
#include "tools/common_timing.h"
#include "tools/fuse_translate_emit.h"

void fuseEmitOptionsInit(FuseEmitOptions *o) {
  memset(o, 0, sizeof *o);
  fzCodegenOptionsInit(&o->codegen);
}

#define E(f) offsetof(FuseEmitOptions, f)

static const char *const kKinds[] = {"llvm", "asm", "obj", "ptx", NULL};

static int set_opt_level(FuseEmitOptions *o, unsigned level) {
  o->codegen.optLevel = level;
  return 0;
}
static int opt0(void *o, const char *v) { (void)v; return set_opt_level(o, 0); }
static int opt1(void *o, const char *v) { (void)v; return set_opt_level(o, 1); }
static int opt2(void *o, const char *v) { (void)v; return set_opt_level(o, 2); }
static int opt3(void *o, const char *v) { (void)v; return set_opt_level(o, 3); }

static int no_parallel(void *opts, const char *v) {
  (void)v;
  ((FuseEmitOptions *)opts)->codegen.parallel = false;
  return 0;
}
static int no_tile(void *opts, const char *v) {
  (void)v;
  FuseEmitOptions *o = opts;
  o->codegen.tileContractions = false;
  o->codegen.tileConvolutions = false;
  return 0;
}
static int no_stage_rows(void *opts, const char *v) {
  (void)v;
  ((FuseEmitOptions *)opts)->codegen.stageRows = false;
  return 0;
}
static int set_layout(void *opts, const char *v) {
  ((FuseEmitOptions *)opts)->haveLayout = true;
  return toolParseLayout("fuse-translate", v,
                         &((FuseEmitOptions *)opts)->layout);
}

static int set_precision(void *opts, const char *v) {
  FuseEmitOptions *o = opts;
  if (!fzPrecisionParse(fzStringRefFromCString(v), &o->precision))
    return toolUsageError("fuse-translate",
                          "--precision expects %s, got '%s'",
                          fzPrecisionGetChoicesText(), v);
  return 0;
}
static int tf32(void *opts, const char *v) {
  (void)v;
  ((FuseEmitOptions *)opts)->precision = FZ_PRECISION_TF32;
  return 0;
}
static int vector_width(void *opts, const char *v) {
  char *end;
  long w = strtol(v, &end, 10);
  if (!*v || *end || (w != 128 && w != 256 && w != 512))
    return toolUsageError("fuse-translate",
                          "--vector-width expects 128, 256 or 512, got '%s'",
                          v);
  ((FuseEmitOptions *)opts)->codegen.preferVectorWidth = (unsigned)w;
  return 0;
}
static int align(void *opts, const char *v) {
  char *end;
  long a = strtol(v, &end, 10);
  if (!*v || *end || a < 1 || a > 4096 || (a & (a - 1)))
    return toolUsageError("fuse-translate",
                          "--align expects a power of two up to 4096, got "
                          "'%s'",
                          v);
  ((FuseEmitOptions *)opts)->codegen.alignment = (unsigned)a;
  return 0;
}

static int codegen_threads(void *opts, const char *v) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (!*v || *end || errno || n < 0 || n > FZ_GPU_MAX_CODEGEN_THREADS)
    return toolUsageError("fuse-translate",
                          "--codegen-threads expects a number of threads "
                          "from 0 (one per core) to %d, got '%s'",
                          FZ_GPU_MAX_CODEGEN_THREADS, v);
  ((FuseEmitOptions *)opts)->codegenThreads = (unsigned)n;
  return 0;
}

/* The code generation options, in --help order (common_options.h). */
static const ToolOption kEmitOptions[] = {
    TOOL_CHOICE("emit", NULL, "KIND", E(kind), kKinds,
                "Compile to LLVM IR, assembly, an object file or PTX (a "
                "graph-level input is lowered first: fuse, "
                "lower-graph-to-loop, plan-memory)"),
    TOOL_CALL("O0", NULL, NULL, opt0, "LLVM optimization level 0"),
    TOOL_CALL("O1", NULL, NULL, opt1, "LLVM optimization level 1"),
    TOOL_CALL("O2", NULL, NULL, opt2, "LLVM optimization level 2"),
    TOOL_CALL("O3", NULL, NULL, opt3, "LLVM optimization level 3 (default)"),
    TOOL_FLAG("fast-math", NULL, E(codegen.fastMath),
              "Every fast-math flag on float ops"),
    TOOL_FLAG("exact-math", NULL, E(codegen.exactMath),
              "C library exp/log/tanh/erf instead of inline approximations"),
    TOOL_CALL("no-parallel", NULL, NULL, no_parallel,
              "No outlined parallel loops (one thread)"),
    TOOL_FLAG("no-fuse", NULL, E(noFuse), "Lower every graph op on its own"),
    TOOL_CALL("no-tile", NULL, NULL, no_tile,
              "No tile-contractions and no tile-convolutions (CPU)"),
    TOOL_CALL("no-stage-rows", NULL, NULL, no_stage_rows,
              "No stage-rows (CPU)"),
    TOOL_CALL("vector-width", NULL, "BITS", vector_width,
              "Widest vectors in bits: 128, 256 or 512 (default 512 with "
              "AVX-512F, else LLVM's)"),
    TOOL_STRING("mtriple", NULL, "TRIPLE", E(codegen.triple),
                "Target triple (default: this machine)"),
    TOOL_STRING("mcpu", NULL, "CPU", E(codegen.cpu),
                "Target CPU (default: this machine)"),
    TOOL_STRING("mattr", NULL, "FEATURES", E(codegen.features),
                "Target features (default: this machine's)"),
    TOOL_STRING("gpu-arch", NULL, "SM", E(gpuArch),
                "PTX target: sm_80, sm_90 (default) or sm_90a"),
    TOOL_STRING("mma-tile", NULL, "BMxBNxBK:Ww:Ss", E(mmaTile),
                "Tile of the tensor-core matmuls (PTX; default: "
                "$FZ_GPU_MMA_TILE, else by size)"),
    TOOL_FLAG("no-mma", NULL, E(noMma), "No tensor-core matmuls (PTX)"),
    TOOL_FLAG("no-small-m", NULL, E(noSmallM),
              "No small-M contraction kernels (PTX)"),
    TOOL_CALL("layout", NULL, "L", set_layout,
              "Layout of convolution regions: nchw (the model's; the "
              "default for llvm, asm, obj), nhwc (convert-layout before "
              "fusion) or auto (nhwc where the convolutions hold most of "
              "the work; the default for ptx)"),
    TOOL_CALL("precision", NULL, "P", set_precision,
              "f32 matmuls and convolutions: default (PTX: tf32; CPU: exact "
              "f32), ieee (exact f32), tf32 (PTX: operands rounded to 10 "
              "mantissa bits; CPU: exact f32), bf16 or fp16 (16-bit "
              "operands, f32 accumulation and result)"),
    TOOL_CALL("tf32", NULL, NULL, tf32,
              "--precision=tf32 (deprecated spelling)"),
    TOOL_FLAG("no-row-stage", NULL, E(noRowStage),
              "Long rows re-read in each phase, not kept on chip (PTX)"),
    TOOL_CALL("codegen-threads", NULL, "N", codegen_threads,
              "Threads for LLVM's optimization and code generation of the "
              "kernels (PTX) or of the outlined parallel loops (llvm, asm, "
              "obj) (default 0: one per core, at most 16); the output is "
              "the same"),
    TOOL_CALL("align", NULL, "N", align,
              "Alignment promised for buffer arguments (default 16)"),
    TOOL_FLAG("no-cache", NULL, E(codegen.noCache),
              "Neither read nor write the kernel cache (--emit=ptx, obj; "
              "default: $FZ_CACHE_DIR, else $XDG_CACHE_HOME/fuse, else "
              "~/.cache/fuse)"),
};

const ToolParser fuseEmitParser = {
    .tool = "fuse-translate",
    .options = kEmitOptions,
    .numOptions = sizeof kEmitOptions / sizeof kEmitOptions[0],
};

int fuseEmitParseArg(FuseEmitOptions *o, int argc, char **argv, int i) {
  return toolParseOption(&fuseEmitParser, o, argc, argv, i);
}

typedef struct Bytes {
  char *data;
  size_t len, cap;
  bool failed;
} Bytes;

static void collect(FzStringRef chunk, void *ud) {
  Bytes *b = ud;
  if (b->failed || chunk.length == 0)
    return;
  if (b->len + chunk.length > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + chunk.length)
      cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
      b->failed = true;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, chunk.data, chunk.length);
  b->len += chunk.length;
}

/* Writes the bytes to path ("-": stdout), atomically for a regular
 * file (tools/common_output.c). */
static bool write_bytes(const Bytes *b, const char *path) {
  FzToolOutput out;
  if (!fzToolOutputOpen(&out, "fuse-translate", path))
    return false;
  fzToolOutputWriteBytes(&out, b->data, b->len);
  return fzToolOutputClose(&out, true);
}

bool fuseEmitModule(FzOp *module, const FuseEmitOptions *o,
                    const char *path) {
  const FzTimingSink *sink = o->timing ? &o->timing->sink : NULL;
  if (fzModuleIsGraphLevel(module)) {
    FzCpuPipelineOptions po;
    fzCpuPipelineOptionsInit(&po);
    po.fuse = !o->noFuse;
    po.timing = sink;
    po.layout = o->haveLayout       ? o->layout
                : !strcmp(o->kind, "ptx") ? FZ_GRAPH_LAYOUT_AUTO
                                          : FZ_GRAPH_LAYOUT_NCHW;
    po.forGpu = !strcmp(o->kind, "ptx");
    if (!fzModuleApplyPrecision(module, o->precision, po.fuse) ||
        !fzLowerModuleForCpu(module, &po))
      return false;
  }
  FzCodegenFileType type = !strcmp(o->kind, "llvm")  ? FZ_CODEGEN_LLVM_IR
                           : !strcmp(o->kind, "asm") ? FZ_CODEGEN_ASSEMBLY
                                                     : FZ_CODEGEN_OBJECT;
  Bytes b = {NULL, 0, 0, false};
  bool ok;
  if (!strcmp(o->kind, "ptx")) { /* the GPU: lowering/nvptx (fz/gpu.h) */
    FzGpuOptions go;
    fzGpuOptionsInit(&go);
    if (o->gpuArch)
      go.arch = o->gpuArch;
    /* --gpu-arch=sm_90a: every matmul nest that allows it on wgmma. */
    if (o->gpuArch && !strcmp(o->gpuArch, "sm_90a"))
      go.wgmmaMinTiles = 1;
    go.optLevel = o->codegen.optLevel;
    go.fastMath = o->codegen.fastMath;
    go.mmaTile = o->mmaTile;
    go.noMma = o->noMma;
    go.noSmallM = o->noSmallM;
    go.precision = o->precision;
    go.noRowStage = o->noRowStage;
    go.codegenThreads = o->codegenThreads;
    go.timing = sink;
    go.noCache = o->codegen.noCache;
    FzToolProgress progress;
    fzToolProgressInit(&progress);
    go.progress = &progress.sink;
    ok = fzEmitPTX(module, &go, FZ_CODEGEN_ASSEMBLY, collect, &b);
  } else {
    double t0 = fzToolTimingNow();
    double covered0 = o->timing ? o->timing->covered : 0;
    FzCodegenOptions co = o->codegen;
    co.timing = sink;
    co.codegenThreads = o->codegenThreads;
    ok = fzEmitLLVM(module, &co, type, collect, &b);
    fzToolTimingAddRest(o->timing,
                        "LLVM for the CPU (translate, optimize, codegen)", t0,
                        covered0);
  }
  if (ok && b.failed) {
    fprintf(stderr, "fuse-translate: error: out of memory\n");
    ok = false;
  }
  if (ok)
    ok = write_bytes(&b, path);
  free(b.data);
  return ok;
}

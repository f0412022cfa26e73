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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fz/gpu.h"
#include "fz/lowering.h"
#include "tools/common_output.h"
#include "tools/common_timing.h"
#include "tools/fuse_translate_emit.h"

const char fuseEmitHelp[] =
    "  --emit=llvm|asm|obj              Compile to LLVM IR, assembly or an "
    "object file\n"
    "                                   (a graph-level input is lowered "
    "first: fuse,\n"
    "                                   lower-graph-to-loop, plan-memory)\n"
    "  -O0 .. -O3                       LLVM optimization level (default "
    "-O3)\n"
    "  --fast-math                      Every fast-math flag on float ops\n"
    "  --exact-math                     C library exp/log/tanh/erf instead "
    "of inline approximations\n"
    "  --no-parallel                    No outlined parallel loops (one "
    "thread)\n"
    "  --no-fuse                        Lower every graph op on its own\n"
    "  --no-tile                        No tile-contractions and no\n"
    "                                   tile-convolutions (CPU)\n"
    "  --no-stage-rows                  No stage-rows (CPU)\n"
    "  --vector-width=N                 Widest vectors in bits (128, 256, 512;\n"
    "                                   default 512 with AVX-512F, else LLVM's)\n"
    "  --mtriple=T --mcpu=C --mattr=F   Target (default: this machine)\n"
    "  --emit=ptx [--gpu-arch=sm_90]    PTX for NVIDIA GPUs (NVPTX; sm_80, "
    "sm_90, sm_90a)\n"
    "  --mma-tile=BMxBNxBK:Ww:Ss        Tile of the tensor-core matmuls "
    "(PTX; default:\n"
    "                                   $FZ_GPU_MMA_TILE, else by size)\n"
    "  --no-mma                         No tensor-core matmuls (PTX)\n"
    "  --tf32                           f32 matmuls on tf32 tensor cores "
    "(PTX;\n"
    "                                   operands rounded to 10 mantissa "
    "bits)\n"
    "  --no-row-stage                   Long rows re-read in each phase, not "
    "kept on\n"
    "                                   chip (PTX)\n"
    "  --codegen-threads=N              Threads for LLVM's optimization and "
    "code\n"
    "                                   generation of the kernels (PTX; "
    "default 0:\n"
    "                                   one per core, at most 16); the PTX "
    "is the same\n"
    "  --align=N                        Alignment promised for buffer "
    "arguments (default 16)\n";

void fuseEmitOptionsInit(FuseEmitOptions *o) {
  memset(o, 0, sizeof *o);
  fzCodegenOptionsInit(&o->codegen);
}

static const char *value_of(const char *arg, const char *name) {
  const char *body = arg + (arg[1] == '-' ? 2 : 1);
  size_t n = strlen(name);
  return strncmp(body, name, n) == 0 && body[n] == '=' ? body + n + 1 : NULL;
}

static bool flag_is(const char *arg, const char *name) {
  const char *body = arg + (arg[1] == '-' ? 2 : 1);
  return strcmp(body, name) == 0;
}

int fuseEmitParseArg(FuseEmitOptions *o, const char *arg) {
  const char *v;
  if ((v = value_of(arg, "emit"))) {
    if (strcmp(v, "llvm") && strcmp(v, "asm") && strcmp(v, "obj") &&
        strcmp(v, "ptx")) {
      fprintf(stderr, "fuse-translate: error: --emit expects llvm, asm, "
                      "obj or ptx, got '%s'\n", v);
      return -1;
    }
    o->kind = v;
  } else if (arg[0] == '-' && arg[1] == 'O' && arg[2] >= '0' &&
             arg[2] <= '3' && arg[3] == '\0') {
    o->codegen.optLevel = (unsigned)(arg[2] - '0');
  } else if (flag_is(arg, "fast-math")) {
    o->codegen.fastMath = true;
  } else if (flag_is(arg, "exact-math")) {
    o->codegen.exactMath = true;
  } else if (flag_is(arg, "no-parallel")) {
    o->codegen.parallel = false;
  } else if (flag_is(arg, "no-fuse")) {
    o->noFuse = true;
  } else if (flag_is(arg, "no-tile")) {
    o->codegen.tileContractions = false;
    o->codegen.tileConvolutions = false;
  } else if (flag_is(arg, "no-stage-rows")) {
    o->codegen.stageRows = false;
  } else if ((v = value_of(arg, "gpu-arch"))) {
    o->gpuArch = v;
  } else if ((v = value_of(arg, "mma-tile"))) {
    o->mmaTile = v;
  } else if (flag_is(arg, "no-mma")) {
    o->noMma = true;
  } else if (flag_is(arg, "tf32")) {
    o->tf32 = true;
  } else if (flag_is(arg, "no-row-stage")) {
    o->noRowStage = true;
  } else if ((v = value_of(arg, "codegen-threads"))) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < 0 || n > FZ_GPU_MAX_CODEGEN_THREADS) {
      fprintf(stderr, "fuse-translate: error: --codegen-threads expects a "
                      "number of threads from 0 (one per core) to %d, got "
                      "'%s'\n", FZ_GPU_MAX_CODEGEN_THREADS, v);
      return -1;
    }
    o->codegenThreads = (unsigned)n;
  } else if ((v = value_of(arg, "mtriple"))) {
    o->codegen.triple = v;
  } else if ((v = value_of(arg, "mcpu"))) {
    o->codegen.cpu = v;
  } else if ((v = value_of(arg, "mattr"))) {
    o->codegen.features = v;
  } else if ((v = value_of(arg, "vector-width"))) {
    char *end;
    long w = strtol(v, &end, 10);
    if (*end || (w != 128 && w != 256 && w != 512)) {
      fprintf(stderr, "fuse-translate: error: --vector-width expects 128, "
                      "256 or 512, got '%s'\n", v);
      return -1;
    }
    o->codegen.preferVectorWidth = (unsigned)w;
  } else if ((v = value_of(arg, "align"))) {
    char *end;
    long a = strtol(v, &end, 10);
    if (*end || a < 1 || a > 4096 || (a & (a - 1))) {
      fprintf(stderr, "fuse-translate: error: --align expects a power of "
                      "two, got '%s'\n", v);
      return -1;
    }
    o->codegen.alignment = (unsigned)a;
  } else {
    return 0;
  }
  return 1;
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
    if (!fzLowerModuleForCpu(module, &po))
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
    go.optLevel = o->codegen.optLevel;
    go.fastMath = o->codegen.fastMath;
    go.mmaTile = o->mmaTile;
    go.noMma = o->noMma;
    go.tf32 = o->tf32;
    go.noRowStage = o->noRowStage;
    go.codegenThreads = o->codegenThreads;
    go.timing = sink;
    ok = fzEmitPTX(module, &go, FZ_CODEGEN_ASSEMBLY, collect, &b);
  } else {
    double t0 = fzToolTimingNow();
    ok = fzEmitLLVM(module, &o->codegen, type, collect, &b);
    fzToolTimingAdd(o->timing, "LLVM for the CPU (translate, optimize, codegen)",
                    fzToolTimingNow() - t0);
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

/* lowering/nvptx/ptx.c - the NVPTX target: fzGpuCompile and fzEmitPTX of
 * fz/gpu.h. A module with loop nests is lowered with
 * lower-loop-to-kernel first (on a clone); the kernel-level module is
 * translated into one LLVM module per kernel (translate.c), which
 * codegen.c optimizes (O3, with NVPTX's own passes, which the target
 * machine registers) and compiles to PTX on FzGpuOptions.codegenThreads
 * threads, each with a target machine for `nvptx64-nvidia-cuda` and the
 * sm_XX processor made here; join.c joins their PTX, and the launch
 * plans' comment lines go before it. The phases go to the options'
 * timing sink when there is one. Each kernel's PTX goes through the
 * kernel cache (ir/cache.h) unless options->noCache: key_prefix hashes
 * what the modules' bitcode does not show.
 *
 * The NVPTX target is initialized once per process (pthread_once); it
 * is linked through the `nvptx` LLVM component (FZ_LLVM_COMPONENTS).
 */
#include <llvm-c/Support.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lowering/nvptx/nvptx_internal.h"

void fzGpuOptionsInit(FzGpuOptions *o) {
  memset(o, 0, sizeof *o);
  o->arch = "sm_90";
  o->blockSize = 256;
  o->optLevel = 3;
  o->rowRegisters = 32;
}

static pthread_once_t gNvInit = PTHREAD_ONCE_INIT;
static void init_nvptx(void) {
  const char *argv[] = {"fuse", "--nvptx-short-ptr"};
  LLVMParseCommandLineOptions(2, argv, NULL);
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

/* A program and the context whose allocator holds all of it: the
 * module's (docs/api.md, "Allocation"). */
typedef struct ProgramBox {
  FzGpuProgram prog; /* first: a FzGpuProgram * is a ProgramBox * */
  FzContext *ctx;
} ProgramBox;

static FzGpuProgram *program_create(FzContext *ctx) {
  ProgramBox *box = fzCalloc(ctx, 1, sizeof *box);
  if (!box)
    return NULL;
  box->ctx = ctx;
  return &box->prog;
}

void fzGpuProgramDestroy(FzGpuProgram *p) {
  if (!p)
    return;
  FzContext *ctx = ((ProgramBox *)p)->ctx;
  for (size_t i = 0; i < p->numChecks; ++i)
    fzFree(ctx, p->checks[i].message);
  fzFree(ctx, p->checks);
  for (size_t i = 0; p->functions && i < p->numFunctions; ++i) {
    FzGpuFunction *f = &p->functions[i];
    for (size_t k = 0; f->kernels && k < f->numKernels; ++k) {
      fzFree(ctx, f->kernels[k].name);
      fzFree(ctx, f->kernels[k].plan);
      fzFree(ctx, f->kernels[k].mapping);
      fzFree(ctx, f->kernels[k].args);
    }
    fzFree(ctx, f->kernels);
    fzFree(ctx, f->tempBytes);
    for (size_t c = 0; f->constData && c < f->numConsts; ++c)
      fzFree(ctx, f->constData[c]);
    fzFree(ctx, f->constData);
    fzFree(ctx, f->constBytes);
    fzFree(ctx, f->argTypes);
    fzFree(ctx, f->name);
  }
  fzFree(ctx, p->functions);
  fzFree(ctx, p->ptx);
  fzFree(ctx, p);
}

const FzGpuFunction *fzGpuProgramLookup(const FzGpuProgram *p,
                                        const char *name) {
  for (size_t i = 0; p && i < p->numFunctions; ++i)
    if (p->functions[i].name && !strcmp(p->functions[i].name, name))
      return &p->functions[i];
  return NULL;
}

/* The libdevice bitcode to use: o->libdevice, else $CUDA_HOME's, else
 * /usr/local/cuda's; NULL when none is readable or o->libdevice is "". */
static const char *find_libdevice(const FzGpuOptions *o, char *buf,
                                  size_t size) {
  if (o->libdevice)
    return *o->libdevice && access(o->libdevice, R_OK) == 0 ? o->libdevice
                                                            : NULL;
  const char *roots[2] = {getenv("CUDA_HOME"), "/usr/local/cuda"};
  for (int i = 0; i < 2; ++i) {
    if (!roots[i] || !*roots[i])
      continue;
    snprintf(buf, size, "%s/nvvm/libdevice/libdevice.10.bc", roots[i]);
    if (access(buf, R_OK) == 0)
      return buf;
  }
  return NULL;
}

/* Whether a function of module still has top-level loop nests (it is at
 * the loop level, not yet lowered to kernels). */
static bool has_nests(FzOp *module) {
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  for (FzOp *f = top ? fzBlockGetFirstOp(top) : NULL; f;
       f = fzOpGetNextInBlock(f)) {
    FzBlock *body = fzOpGetNumRegions(f) == 1
                        ? fzRegionGetFirstBlock(fzOpGetRegion(f, 0))
                        : NULL;
    if (fzKernelGetOpcode(f) == FZ_KERNEL_OP_FUNC)
      continue;
    for (FzOp *op = body ? fzBlockGetFirstOp(body) : NULL; op;
         op = fzOpGetNextInBlock(op)) {
      FzLoopOpcode c = fzLoopGetOpcode(op);
      if (c == FZ_LOOP_OP_PARALLEL || c == FZ_LOOP_OP_FOR ||
          c == FZ_LOOP_OP_STORE || c == FZ_LOOP_OP_VECTOR_STORE)
        return true;
    }
  }
  return false;
}

/* Shared memory a block may opt into (static plus dynamic) on arch:
 * CUDA's sharedMemPerBlockOptin of the compute capability (sm_70 and
 * sm_72 96 KiB, sm_75 64 KiB, sm_80 and sm_87 163 KiB, sm_86, sm_89
 * and sm_120 99 KiB; 0, the pass's default of 227 KiB, for sm_90 and
 * sm_100); 48 KiB, what every arch allows, for others. */
static unsigned opt_in_shared(const char *arch) {
  int cc = 0;
  if (!arch || sscanf(arch, "sm_%d", &cc) != 1)
    return 48 * 1024;
  switch (cc) {
  case 70:
  case 72:
    return 96 * 1024;
  case 75:
    return 64 * 1024;
  case 80:
  case 87:
    return 163 * 1024;
  case 86:
  case 89:
  case 120:
  case 121:
    return 99 * 1024;
  case 90:
  case 100:
  case 101:
  case 103:
    return 0;
  default:
    return 48 * 1024;
  }
}

/* A clone of module lowered with lower-loop-to-kernel (the GPU options'
 * block size, vector, row options, precision resolved for the arch, and
 * the arch's shared memory), or NULL after an error. */
static FzOp *lowered_clone(FzOp *module, const FzGpuOptions *o) {
  FzOp *clone = fzOpClone(module, NULL);
  if (!clone) {
    fzEmitError(fzOpGetContext(module), NULL, "emit-ptx: out of memory");
    return NULL;
  }
  FzLoopToKernelOptions ko;
  fzLoopToKernelOptionsInit(&ko);
  ko.blockSize = o->blockSize;
  ko.vector = o->vector;
  ko.rowChunks = o->rowChunks;
  ko.noRowStage = o->noRowStage;
  ko.rowRegisters = o->rowRegisters;
  ko.maxSharedBytes = opt_in_shared(o->arch);
  ko.noMma = o->noMma;
  ko.noSmallM = o->noSmallM;
  ko.mmaTile = o->mmaTile;
  ko.splitK = o->splitK;
  ko.wgmma = o->arch && !strcmp(o->arch, "sm_90a");
  ko.wgmmaMinTiles = o->wgmmaMinTiles;
  const char *env = getenv("FZ_GPU_WGMMA_MIN_TILES");
  if (ko.wgmma && !ko.wgmmaMinTiles && env && *env) {
    char *end = NULL;
    long long v = strtoll(env, &end, 10);
    if (*end || v < 1 || v > (1 << 30)) {
      fzOpDestroy(clone);
      fzEmitError(fzOpGetContext(module), NULL,
                  "FZ_GPU_WGMMA_MIN_TILES=%s: not a number of tiles from 1 "
                  "to 2^30", env);
      return NULL;
    }
    ko.wgmmaMinTiles = v;
  }
  if (ko.wgmmaMinTiles <= 0)
    ko.wgmmaMinTiles = FZ_GPU_WGMMA_MIN_TILES;
  int cc = 0;
  if (o->arch)
    (void)sscanf(o->arch, "sm_%d", &cc);
  ko.precision = fzPrecisionResolve(o->precision, cc);
  if (!fzLowerLoopToKernel(clone, &ko)) {
    fzOpDestroy(clone);
    return NULL;
  }
  return clone;
}

/* Appends, for every launch of prog: "// fuse: KERNEL: PLAN" (when the
 * kernel has a plan) and "// fuse: KERNEL: launch grid (X, Y, Z), block
 * (X, Y, Z), shared N". */
static void plan_comments(const FzGpuProgram *prog, FzBuf *b) {
  for (size_t i = 0; i < prog->numFunctions; ++i)
    for (size_t k = 0; k < prog->functions[i].numKernels; ++k) {
      const FzGpuKernel *K = &prog->functions[i].kernels[k];
      if (K->plan)
        fzBufPrintf(b, "// fuse: %s: %s\n", K->name, K->plan);
      fzBufPrintf(b,
                  "// fuse: %s: launch grid (%u, %u, %u), block (%u, %u, "
                  "%u), shared %u\n",
                  K->name, K->grid[0], K->grid[1], K->grid[2], K->block[0],
                  K->block[1], K->block[2], K->sharedBytes);
    }
}

/* Hands one phase (or one item of it) to o's timing sink, if any. */
static void report(const FzGpuOptions *o, const char *phase, const char *item,
                   double wall, double busy, unsigned threads, size_t items) {
  if (!o->timing || !o->timing->record)
    return;
  FzTimingRecord r = {phase, item, wall, busy, threads, items, 0, 0, 0};
  o->timing->record(&r, o->timing->userData);
}

/* The threads for n units: o->codegenThreads, or one per online CPU up
 * to FZ_GPU_DEFAULT_CODEGEN_THREADS; never more than n. */
static unsigned codegen_threads(const FzGpuOptions *o, size_t n) {
  unsigned t = o->codegenThreads;
  if (t == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    t = cpus > 0 ? (unsigned)cpus : 1;
    if (t > FZ_GPU_DEFAULT_CODEGEN_THREADS)
      t = FZ_GPU_DEFAULT_CODEGEN_THREADS;
  }
  if (t > n)
    t = n ? (unsigned)n : 1;
  return t;
}

/* libdevice's bitcode, read once for every thread; NULL after reporting
 * an error. */
static LLVMMemoryBufferRef read_libdevice(FzContext *ctx, const char *path) {
  LLVMMemoryBufferRef buf = NULL;
  char *msg = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
    fzEmitError(ctx, NULL, "emit-ptx: cannot read libdevice '%s': %s", path,
                msg ? msg : "");
    LLVMDisposeMessage(msg);
    return NULL;
  }
  return buf;
}

/* What every kernel's key in the cache starts with: the cache's own
 * prefix (fuse's build, LLVM), the target machine, the options that the
 * modules' IR does not show (the optimization level, fast math, what
 * is emitted) and libdevice's bitcode when it is linked. */
static void key_prefix(const FzGpuOptions *o, const FzCodegenOptions *co,
                       FzNvCodegenJob *job, bool emitIR) {
  FzSha256 h;
  fzLLCacheKeyBegin(&h, emitIR ? FZ_CACHE_LLVM_IR : FZ_CACHE_PTX);
  fzSha256UpdateString(&h, "nvptx --nvptx-short-ptr");
  fzSha256UpdateString(&h, co->triple);
  fzSha256UpdateString(&h, o->arch);
  fzSha256UpdateString(&h, co->features);
  fzSha256UpdateU64(&h, o->optLevel);
  fzSha256UpdateU64(&h, o->fastMath);
  if (job->libdevice) {
    uint8_t lib[FZ_SHA256_BYTES];
    FzSha256 l;
    fzSha256Init(&l);
    fzSha256Update(&l, job->libdevice, job->libdeviceLen);
    fzSha256Final(&l, lib);
    fzSha256Update(&h, lib, sizeof lib);
  } else {
    fzSha256UpdateString(&h, "no libdevice");
  }
  fzSha256Final(&h, job->keyPrefix);
}

/* Optimizes and compiles units on the threads (job->tms set up here from
 * tm0 and co), reports the phase, and leaves the joined PTX (or the
 * modules' LLVM IR, one after another) in *text. False after reporting
 * errors. */
static bool run_codegen(FzContext *ctx, const FzGpuOptions *o,
                        const FzCodegenOptions *co, LLVMTargetMachineRef tm0,
                        FzNvUnits *units, const char *libdevice, bool emitIR,
                        bool *usesStatus, char **text, size_t *len) {
  double t0 = fzNvNowSeconds();
  FzNvCodegenJob job;
  memset(&job, 0, sizeof job);
  job.units = units->v;
  job.numUnits = units->n;
  job.numThreads = codegen_threads(o, units->n);
  job.optLevel = o->optLevel;
  job.emitIR = emitIR;
  job.libdevicePath = libdevice;
  LLVMMemoryBufferRef lib = NULL;
  bool ok = true;
  bool needLib = false;
  for (size_t i = 0; libdevice && i < units->n; ++i)
    needLib |= fzNvUsesLibdevice(units->v[i].mod);
  if (needLib) {
    ok = (lib = read_libdevice(ctx, libdevice)) != NULL;
    job.libdevice = lib ? LLVMGetBufferStart(lib) : NULL;
    job.libdeviceLen = lib ? LLVMGetBufferSize(lib) : 0;
  }
  job.progress = o->progress;
  job.cache = o->noCache ? NULL : fzCacheOpen(o->cacheDir);
  if (job.cache)
    key_prefix(o, co, &job, emitIR);
  job.tms = ok ? fzCalloc(ctx, job.numThreads, sizeof *job.tms) : NULL;
  ok = ok && job.tms;
  if (job.tms)
    job.tms[0] = tm0;
  for (unsigned t = 1; ok && t < job.numThreads; ++t)
    ok = (job.tms[t] = fzLLCreateTargetMachine(ctx, co, NULL, NULL)) != NULL;
  ok = ok && fzNvCodegenRun(ctx, &job);
  for (unsigned t = 1; job.tms && t < job.numThreads; ++t)
    if (job.tms[t])
      LLVMDisposeTargetMachine(job.tms[t]);
  fzFree(ctx, job.tms);
  if (lib)
    LLVMDisposeMemoryBuffer(lib);
  if (!ok) {
    fzCacheFinish(job.cache, ctx, o->timing);
    fzCacheClose(job.cache);
    return false;
  }
  /* What the threads left, reported from this thread in kernel order;
   * a message that several units give (libdevice unreadable) once. */
  double busy = 0;
  *usesStatus = false;
  for (size_t i = 0; i < units->n; ++i) {
    FzNvUnit *U = &units->v[i];
    busy += U->seconds;
    *usesStatus |= U->usesStatus;
    const char *msg = U->error ? U->error : "emit-ptx: out of memory";
    bool repeated = false;
    for (size_t k = 0; k < i && !repeated; ++k)
      repeated = units->v[k].error && !strcmp(units->v[k].error, msg);
    if ((U->error || !U->text) && !repeated)
      ok = fzEmitError(ctx, NULL, "%s", msg);
    else if (U->error || !U->text)
      ok = false;
    else
      report(o, "LLVM optimize+codegen", U->name, U->seconds, U->seconds, 1, 0);
  }
  if (ok && emitIR) {
    size_t n = 0;
    for (size_t i = 0; i < units->n; ++i)
      n += units->v[i].len;
    ok = (*text = fzMalloc(ctx, n + 1)) != NULL;
    for (size_t i = 0, at = 0; ok && i < units->n; at += units->v[i++].len)
      memcpy(*text + at, units->v[i].text, units->v[i].len);
    if (ok) {
      (*text)[n] = '\0';
      *len = n;
    }
  } else if (ok) {
    ok = (*text = fzNvJoinPtx(ctx, units->v, units->n, len)) != NULL;
  }
  report(o, "LLVM optimize+codegen", NULL, fzNvNowSeconds() - t0, busy,
         job.threadsUsed, units->n);
  fzCacheFinish(job.cache, ctx, o->timing);
  fzCacheClose(job.cache);
  return ok;
}

/* The program of module for the GPU: its launch plans and checks in
 * prog, its PTX (or, with emitIR, its LLVM IR after O3) in *text
 * (the context's, without the plan comments). False after reporting
 * errors. */
static bool compile(FzOp *module, const FzGpuOptions *o, FzGpuProgram *prog,
                    bool emitIR, char **text, size_t *len) {
  FzContext *ctx = fzOpGetContext(module);
  if (!fzGpuArchValidate(ctx, o->arch))
    return false;
  if (o->blockSize == 0 || o->blockSize > 1024 || o->blockSize % 32)
    return fzEmitError(ctx, NULL,
                       "emit-ptx: the block size must be a multiple of 32 "
                       "up to 1024, got %u",
                       o->blockSize);
  if (o->codegenThreads > FZ_GPU_MAX_CODEGEN_THREADS)
    return fzEmitError(ctx, NULL,
                       "emit-ptx: at most %d code generation threads, got %u",
                       FZ_GPU_MAX_CODEGEN_THREADS, o->codegenThreads);
  pthread_once(&gNvInit, init_nvptx);
  FzCodegenOptions co;
  fzCodegenOptionsInit(&co);
  co.optLevel = o->optLevel;
  co.fastMath = o->fastMath;
  co.contract = o->fastMath;
  co.parallel = false;
  co.exactMath = false;
  co.triple = "nvptx64-nvidia-cuda";
  co.cpu = o->arch;
  /* sm_90a needs PTX 8.0; otherwise LLVM picks the minimum. */
  co.features = o->arch[strlen(o->arch) - 1] == 'a' ? "+ptx80" : "";
  char *cpu = NULL, *features = NULL;
  LLVMTargetMachineRef tm = fzLLCreateTargetMachine(ctx, &co, &cpu, &features);
  if (!tm)
    return false;
  FzLLEmitter E;
  memset(&E, 0, sizeof E);
  E.ctx = ctx;
  E.opts = co;
  E.tm = tm;
  E.cpu = cpu;
  E.features = features;
  char pathBuf[4096];
  const char *libdevice = find_libdevice(o, pathBuf, sizeof pathBuf);
  E.libdevice = libdevice != NULL;
  /* cvt.rn.bf16.f32 exists from sm_80 on. */
  E.nativeBF16 = atoi(o->arch + 3) >= 80;
  bool ok = true;
  FzOp *lowered = NULL;
  if (has_nests(module)) {
    double t0 = fzNvNowSeconds();
    ok = (lowered = lowered_clone(module, o)) != NULL;
    report(o, "loop->kernel", NULL, fzNvNowSeconds() - t0, fzNvNowSeconds() - t0, 1,
           0);
  }
  FzNvUnits units = {ctx, NULL, 0, 0};
  if (ok) {
    double t0 = fzNvNowSeconds();
    ok = fzNvTranslateModule(&E, lowered ? lowered : module, prog, &units);
    double t = fzNvNowSeconds() - t0 - units.planSeconds;
    report(o, "launch plans", NULL, units.planSeconds, units.planSeconds, 1,
           0);
    report(o, "LLVM translate", NULL, t, t, 1, 0);
  }
  if (lowered)
    fzOpDestroy(lowered);
  fzFree(ctx, cpu);
  fzFree(ctx, features);
  bool usesStatus = false;
  ok = ok && run_codegen(ctx, o, &co, tm, &units, libdevice, emitIR,
                         &usesStatus, text, len);
  fzNvUnitsFree(&units);
  LLVMDisposeTargetMachine(tm);
  /* LLVM may prove every check unnecessary (a gather by constant indices
   * in range, as in ViT-B/16): then no module keeps fz_status, and
   * neither does the plan (the runtime reads fz_status back only when
   * the plan lists checks). */
  if (!usesStatus)
    fzLLSitesFree(ctx, &E.sites);
  if (ok && E.sites.n) {
    /* The program takes the run-time checks (their messages). */
    ok =
        (prog->checks = fzCalloc(ctx, E.sites.n, sizeof *prog->checks)) != NULL;
    for (size_t i = 0; ok && i < E.sites.n; ++i) {
      prog->checks[i] = (FzGpuCheck){E.sites.v[i].loc, E.sites.v[i].message};
      E.sites.v[i].message = NULL;
    }
    if (ok)
      prog->numChecks = E.sites.n;
  }
  fzLLSitesFree(ctx, &E.sites);
  if (!ok && *text) {
    fzFree(ctx, *text);
    *text = NULL;
  }
  return ok;
}

/* The plan comments of prog followed by body (freed), the context's;
 * NULL when memory ran out (recorded). */
static char *with_plans(FzContext *ctx, const FzGpuProgram *prog, char *body,
                        size_t bodyLen, size_t *len) {
  FzBuf b;
  fzBufInit(&b, ctx);
  plan_comments(prog, &b);
  fzBufAppend(&b, body, bodyLen);
  fzFree(ctx, body);
  if (b.failed || !b.data) {
    fzNoteAllocationFailure(ctx); /* (once: a failed append noted it) */
    fzBufFree(&b);
    return NULL;
  }
  *len = b.len;
  return b.data;
}

FzGpuProgram *fzGpuCompile(FzOp *module, const FzGpuOptions *options) {
  FzContext *ctx = fzOpGetContext(module);
  FzGpuOptions defaults;
  if (!options) {
    fzGpuOptionsInit(&defaults);
    options = &defaults;
  }
  FzGpuProgram *prog = program_create(ctx);
  if (!prog)
    return NULL;
  char *body = NULL;
  size_t bodyLen = 0;
  if (!compile(module, options, prog, false, &body, &bodyLen) ||
      !(prog->ptx = with_plans(ctx, prog, body, bodyLen, &prog->ptxLen))) {
    fzGpuProgramDestroy(prog);
    return NULL;
  }
  return prog;
}

bool fzEmitPTX(FzOp *module, const FzGpuOptions *options,
               FzCodegenFileType type, FzPrintCallback cb, void *userData) {
  FzContext *ctx = fzOpGetContext(module);
  if (type == FZ_CODEGEN_OBJECT)
    return fzEmitError(ctx, NULL, "emit-ptx: no object files for the GPU "
                                  "(emit PTX; the driver assembles it)");
  FzGpuOptions defaults;
  if (!options) {
    fzGpuOptionsInit(&defaults);
    options = &defaults;
  }
  FzGpuProgram *prog = program_create(ctx);
  if (!prog)
    return false;
  bool ir = type == FZ_CODEGEN_LLVM_IR;
  char *text = NULL;
  size_t len = 0;
  bool ok = compile(module, options, prog, ir, &text, &len);
  if (ok && !ir)
    ok = (text = with_plans(ctx, prog, text, len, &len)) != NULL;
  if (ok)
    cb((FzStringRef){text, len}, userData);
  fzFree(ctx, text);
  fzGpuProgramDestroy(prog);
  return ok;
}

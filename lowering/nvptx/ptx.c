/* lowering/nvptx/ptx.c - the NVPTX target: target machine for
 * `nvptx64-nvidia-cuda` and an sm_XX processor, the O3 pipeline (with
 * NVPTX's own passes, which the target machine registers), and PTX text
 * through LLVMTargetMachineEmitToMemoryBuffer. fzGpuCompile and
 * fzEmitPTX of fz/gpu.h.
 *
 * The NVPTX target is initialized once per process (pthread_once); it
 * is linked through the `nvptx` LLVM component (FZ_LLVM_COMPONENTS).
 */
#include <llvm-c/BitReader.h>
#include <llvm-c/Support.h>
#include <llvm-c/Linker.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void fzGpuProgramDestroy(FzGpuProgram *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->numChecks; ++i)
    free(p->checks[i].message);
  free(p->checks);
  for (size_t i = 0; i < p->numFunctions; ++i) {
    FzGpuFunction *f = &p->functions[i];
    for (size_t k = 0; k < f->numKernels; ++k) {
      free(f->kernels[k].name);
      free(f->kernels[k].plan);
      free(f->kernels[k].mapping);
      free(f->kernels[k].args);
    }
    free(f->kernels);
    free(f->tempBytes);
    for (size_t c = 0; c < f->numConsts; ++c)
      free(f->constData[c]);
    free(f->constData);
    free(f->constBytes);
    free(f->argTypes);
    free(f->name);
  }
  free(p->functions);
  free(p->ptx);
  free(p);
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

static bool uses_libdevice(LLVMModuleRef mod) {
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f;
       f = LLVMGetNextFunction(f)) {
    size_t n;
    const char *name = LLVMGetValueName2(f, &n);
    if (LLVMIsDeclaration(f) && n > 5 && !strncmp(name, "__nv_", 5))
      return true;
  }
  return false;
}

/* Links libdevice into mod, makes everything but the kernels internal
 * (so that O3 drops what is not called), and sets the module flag that
 * NVVMReflect reads (no flush to zero: subnormals are kept). */
static bool link_libdevice(FzContext *ctx, LLVMContextRef llctx,
                           LLVMModuleRef mod, const char *path) {
  LLVMMemoryBufferRef buf = NULL;
  char *msg = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
    fzEmitError(ctx, NULL, "emit-ptx: cannot read libdevice '%s': %s", path,
                msg ? msg : "");
    LLVMDisposeMessage(msg);
    return false;
  }
  LLVMModuleRef lib = NULL;
  bool bad = LLVMParseBitcodeInContext2(llctx, buf, &lib);
  LLVMDisposeMemoryBuffer(buf);
  if (bad)
    return fzEmitError(ctx, NULL, "emit-ptx: '%s' is not LLVM bitcode",
                       path);
  LLVMSetTarget(lib, LLVMGetTarget(mod));
  LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(mod));
  if (LLVMLinkModules2(mod, lib))
    return fzEmitError(ctx, NULL, "emit-ptx: linking libdevice '%s' failed",
                       path);
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f;
       f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) &&
        LLVMGetFunctionCallConv(f) != 71 /* PTX_Kernel */)
      LLVMSetLinkage(f, LLVMInternalLinkage);
  /* fz_status stays external: the runtime reads it back when the plan
   * lists run-time checks, and an internal global that LLVM proves
   * unused (every check folded away, as in ViT-B/16's constant-index
   * gather) is deleted, leaving the runtime without it. */
  for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g) && strcmp(LLVMGetValueName(g), "fz_status"))
      LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(llctx);
  LLVMAddModuleFlag(mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz",
                    16, LLVMValueAsMetadata(LLVMConstInt(i32, 0, 0)));
  return true;
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
  ko.mmaTile = o->mmaTile;
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

/* Translates and optimizes module for the GPU. On success the caller
 * disposes *mod, *llctx and *tm. */
static bool build(FzOp *module, const FzGpuOptions *o, FzGpuProgram *prog,
                  LLVMContextRef *llctx, LLVMModuleRef *mod,
                  LLVMTargetMachineRef *tm) {
  FzContext *ctx = fzOpGetContext(module);
  if (!fzGpuArchValidate(ctx, o->arch))
    return false;
  if (o->blockSize == 0 || o->blockSize > 1024 || o->blockSize % 32)
    return fzEmitError(ctx, NULL,
                       "emit-ptx: the block size must be a multiple of 32 "
                       "up to 1024, got %u",
                       o->blockSize);
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
  *tm = fzLLCreateTargetMachine(ctx, &co, &cpu, &features);
  if (!*tm)
    return false;
  FzLLEmitter E;
  memset(&E, 0, sizeof E);
  E.ctx = ctx;
  E.opts = co;
  E.llctx = LLVMContextCreate();
  E.mod = LLVMModuleCreateWithNameInContext("fuse_gpu", E.llctx);
  E.tm = *tm;
  E.cpu = cpu;
  E.features = features;
  char pathBuf[4096];
  const char *libdevice = find_libdevice(o, pathBuf, sizeof pathBuf);
  E.libdevice = libdevice != NULL;
  /* cvt.rn.bf16.f32 exists from sm_80 on. */
  E.nativeBF16 = atoi(o->arch + 3) >= 80;
  LLVMSetTarget(E.mod, "nvptx64-nvidia-cuda");
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(*tm);
  LLVMSetModuleDataLayout(E.mod, td);
  LLVMDisposeTargetData(td);
  FzOp *lowered = has_nests(module) ? lowered_clone(module, o) : NULL;
  bool ok = (!has_nests(module) || lowered) &&
            fzNvTranslateModule(&E, lowered ? lowered : module, prog) &&
            (!libdevice || !uses_libdevice(E.mod) ||
             link_libdevice(ctx, E.llctx, E.mod, libdevice)) &&
            fzLLOptimize(ctx, E.mod, *tm, &co);
  if (lowered)
    fzOpDestroy(lowered);
  free(cpu);
  free(features);
  if (ok && E.sites.n) {
    /* LLVM may prove every check unnecessary (a gather by constant
     * indices in range, as in ViT-B/16): then no code refers to
     * fz_status, and neither the PTX nor the plan keeps it (the runtime
     * reads fz_status back only when the plan lists checks). */
    LLVMValueRef g = LLVMGetNamedGlobal(E.mod, "fz_status");
    if (!g || !LLVMGetFirstUse(g)) {
      if (g)
        LLVMDeleteGlobal(g);
      fzLLSitesFree(&E.sites);
    }
  }
  if (ok && E.sites.n) {
    /* The program takes the run-time checks (their messages). */
    prog->checks = calloc(E.sites.n, sizeof *prog->checks);
    if (!prog->checks)
      ok = fzEmitError(ctx, NULL, "emit-ptx: out of memory");
    for (size_t i = 0; ok && i < E.sites.n; ++i) {
      prog->checks[i] = (FzGpuCheck){E.sites.v[i].loc, E.sites.v[i].message};
      E.sites.v[i].message = NULL;
    }
    if (ok)
      prog->numChecks = E.sites.n;
  }
  fzLLSitesFree(&E.sites);
  if (!ok) {
    LLVMDisposeModule(E.mod);
    LLVMContextDispose(E.llctx);
    LLVMDisposeTargetMachine(*tm);
    return false;
  }
  *llctx = E.llctx;
  *mod = E.mod;
  return true;
}

/* For every launch of prog: "// fuse: KERNEL: PLAN" (when the kernel
 * has a plan) and "// fuse: KERNEL: launch grid (X, Y, Z), block (X, Y,
 * Z), shared N", malloc'ed (NULL when out of memory). */
static char *plan_comments(const FzGpuProgram *prog, size_t *len) {
  size_t n = 1;
  for (size_t i = 0; i < prog->numFunctions; ++i)
    for (size_t k = 0; k < prog->functions[i].numKernels; ++k) {
      const FzGpuKernel *K = &prog->functions[i].kernels[k];
      n += 2 * strlen(K->name) + strlen(K->plan ? K->plan : "") + 160;
    }
  char *s = malloc(n);
  if (!s)
    return NULL;
  size_t at = 0;
  for (size_t i = 0; i < prog->numFunctions; ++i)
    for (size_t k = 0; k < prog->functions[i].numKernels; ++k) {
      const FzGpuKernel *K = &prog->functions[i].kernels[k];
      if (K->plan)
        at += (size_t)snprintf(s + at, n - at, "// fuse: %s: %s\n", K->name,
                               K->plan);
      at += (size_t)snprintf(
          s + at, n - at,
          "// fuse: %s: launch grid (%u, %u, %u), block (%u, %u, %u), "
          "shared %u\n",
          K->name, K->grid[0], K->grid[1], K->grid[2], K->block[0],
          K->block[1], K->block[2], K->sharedBytes);
    }
  s[at] = '\0';
  *len = at;
  return s;
}

static bool emit_ptx_text(FzContext *ctx, LLVMTargetMachineRef tm,
                          LLVMModuleRef mod, const FzGpuProgram *prog,
                          char **text, size_t *len) {
  LLVMMemoryBufferRef buf = NULL;
  char *err = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &err,
                                          &buf)) {
    fzEmitError(ctx, NULL, "emit-ptx: NVPTX code generation failed: %s",
                err ? err : "");
    LLVMDisposeMessage(err);
    return false;
  }
  size_t headLen = 0;
  char *head = plan_comments(prog, &headLen);
  size_t bodyLen = LLVMGetBufferSize(buf);
  *len = headLen + bodyLen;
  *text = head ? malloc(*len + 1) : NULL;
  if (*text) {
    memcpy(*text, head, headLen);
    memcpy(*text + headLen, LLVMGetBufferStart(buf), bodyLen);
    (*text)[*len] = '\0';
  }
  free(head);
  LLVMDisposeMemoryBuffer(buf);
  return *text != NULL || fzEmitError(ctx, NULL, "emit-ptx: out of memory");
}

FzGpuProgram *fzGpuCompile(FzOp *module, const FzGpuOptions *options) {
  FzGpuOptions defaults;
  if (!options) {
    fzGpuOptionsInit(&defaults);
    options = &defaults;
  }
  FzGpuProgram *prog = calloc(1, sizeof *prog);
  if (!prog) {
    fzEmitError(fzOpGetContext(module), NULL, "emit-ptx: out of memory");
    return NULL;
  }
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
  if (!build(module, options, prog, &llctx, &mod, &tm)) {
    fzGpuProgramDestroy(prog);
    return NULL;
  }
  bool ok = emit_ptx_text(fzOpGetContext(module), tm, mod, prog, &prog->ptx,
                          &prog->ptxLen);
  LLVMDisposeModule(mod);
  LLVMContextDispose(llctx);
  LLVMDisposeTargetMachine(tm);
  if (!ok) {
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
  FzGpuProgram *prog = calloc(1, sizeof *prog);
  if (!prog)
    return fzEmitError(ctx, NULL, "emit-ptx: out of memory");
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
  bool ok = build(module, options, prog, &llctx, &mod, &tm);
  if (!ok) {
    fzGpuProgramDestroy(prog);
    return false;
  }
  if (type == FZ_CODEGEN_LLVM_IR) {
    char *text = LLVMPrintModuleToString(mod);
    cb((FzStringRef){text, strlen(text)}, userData);
    LLVMDisposeMessage(text);
  } else {
    char *text = NULL;
    size_t len = 0;
    ok = emit_ptx_text(ctx, tm, mod, prog, &text, &len);
    if (ok)
      cb((FzStringRef){text, len}, userData);
    free(text);
  }
  fzGpuProgramDestroy(prog);
  LLVMDisposeModule(mod);
  LLVMContextDispose(llctx);
  LLVMDisposeTargetMachine(tm);
  return ok;
}

/* lowering/nvptx/ptx.c - the NVPTX target: target machine for
 * `nvptx64-nvidia-cuda` and an sm_XX processor, the O3 pipeline (with
 * NVPTX's own passes, which the target machine registers), and PTX text
 * through LLVMTargetMachineEmitToMemoryBuffer. fzGpuCompile and
 * fzEmitPTX of fz/gpu.h.
 *
 * The NVPTX target is initialized once per process (pthread_once); it
 * is linked through the `nvptx` LLVM component (FZ_LLVM_COMPONENTS).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/nvptx/nvptx_internal.h"

void fzGpuOptionsInit(FzGpuOptions *o) {
  memset(o, 0, sizeof *o);
  o->arch = "sm_90";
  o->blockSize = 256;
  o->optLevel = 3;
}

static pthread_once_t gNvInit = PTHREAD_ONCE_INIT;
static void init_nvptx(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

static bool valid_arch(const char *a) {
  if (strncmp(a, "sm_", 3) != 0 || a[3] < '1' || a[3] > '9')
    return false;
  const char *p = a + 3;
  while (*p >= '0' && *p <= '9')
    ++p;
  return *p == '\0' || (p[0] == 'a' && p[1] == '\0');
}

void fzGpuProgramDestroy(FzGpuProgram *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->numFunctions; ++i) {
    FzGpuFunction *f = &p->functions[i];
    for (size_t k = 0; k < f->numKernels; ++k)
      free(f->kernels[k].name);
    free(f->kernels);
    free(f->tempBytes);
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

/* Translates and optimizes module for the GPU. On success the caller
 * disposes *mod, *llctx and *tm. */
static bool build(FzOp *module, const FzGpuOptions *o, FzGpuProgram *prog,
                  LLVMContextRef *llctx, LLVMModuleRef *mod,
                  LLVMTargetMachineRef *tm) {
  FzContext *ctx = fzOpGetContext(module);
  if (!valid_arch(o->arch))
    return fzEmitError(ctx, NULL,
                       "emit-ptx: --gpu-arch expects sm_NN or sm_NNa (sm_80, "
                       "sm_90, sm_90a), got '%s'",
                       o->arch);
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
  LLVMSetTarget(E.mod, "nvptx64-nvidia-cuda");
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(*tm);
  LLVMSetModuleDataLayout(E.mod, td);
  LLVMDisposeTargetData(td);
  bool ok = fzNvTranslateModule(&E, module, o, prog) &&
            fzLLOptimize(ctx, E.mod, *tm, &co);
  free(cpu);
  free(features);
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

static bool emit_ptx_text(FzContext *ctx, LLVMTargetMachineRef tm,
                          LLVMModuleRef mod, char **text, size_t *len) {
  LLVMMemoryBufferRef buf = NULL;
  char *err = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &err,
                                          &buf)) {
    fzEmitError(ctx, NULL, "emit-ptx: NVPTX code generation failed: %s",
                err ? err : "");
    LLVMDisposeMessage(err);
    return false;
  }
  *len = LLVMGetBufferSize(buf);
  *text = malloc(*len + 1);
  if (*text) {
    memcpy(*text, LLVMGetBufferStart(buf), *len);
    (*text)[*len] = '\0';
  }
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
  bool ok = emit_ptx_text(fzOpGetContext(module), tm, mod, &prog->ptx,
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
  fzGpuProgramDestroy(prog);
  if (!ok)
    return false;
  if (type == FZ_CODEGEN_LLVM_IR) {
    char *text = LLVMPrintModuleToString(mod);
    cb((FzStringRef){text, strlen(text)}, userData);
    LLVMDisposeMessage(text);
  } else {
    char *text = NULL;
    size_t len = 0;
    ok = emit_ptx_text(ctx, tm, mod, &text, &len);
    if (ok)
      cb((FzStringRef){text, len}, userData);
    free(text);
  }
  LLVMDisposeModule(mod);
  LLVMContextDispose(llctx);
  LLVMDisposeTargetMachine(tm);
  return ok;
}

/* lowering/llvm/target.c - the target machine, the optimization
 * pipeline, and fzEmitLLVM (LLVM IR, assembly or an object file).
 *
 * The host target is described exactly (LLVMGetHostCPUName and
 * LLVMGetHostCPUFeatures), so the vectorizer uses every vector extension
 * the machine has; the same strings go on each function as target-cpu /
 * target-features. Code is position independent (it is also loaded by
 * the JIT and may end up in shared libraries) with the small code model.
 * The module is verified before it is optimized: a failure there is an
 * emitter bug, reported as an internal error.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "lowering/llvm/emit_internal.h"

void fzCodegenOptionsInit(FzCodegenOptions *o) {
  memset(o, 0, sizeof *o);
  o->optLevel = 3;
  o->reassocReductions = true;
  o->parallel = true;
  o->alignment = 16;
  o->explicitVectors = true;
  o->tileContractions = true;
  o->tileConvolutions = true;
  o->stageRows = true;
  o->nontemporalMinBytes = (int64_t)16 << 20;
}

static pthread_once_t gInitOnce = PTHREAD_ONCE_INIT;
static void init_native(void) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  LLVMInitializeNativeAsmParser();
}
void fzLLInitNative(void) { pthread_once(&gInitOnce, init_native); }

double fzLLNowSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void fzLLReportPhase(const FzCodegenOptions *o, const char *phase, double t0,
                     double busy, unsigned threads, size_t items) {
  if (!o || !o->timing || !o->timing->record)
    return;
  double wall = fzLLNowSeconds() - t0;
  FzTimingRecord r = {phase, NULL, wall, busy < 0 ? wall : busy,
                      threads ? threads : 1, items, 0, 0, 0};
  o->timing->record(&r, o->timing->userData);
}

/* The only C-library allocation of the back end (docs/api.md,
 * "Allocation"): for the code-generation threads. */
void *fzLLThreadAlloc(size_t size) {
  return malloc(size ? size : 1); /* plain-alloc: code-generation threads */
}

void fzLLThreadFree(void *p) {
  free(p); /* plain-alloc: code-generation threads */
}

char *fzLLThreadPrintf(const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? fzLLThreadAlloc((size_t)n + 1) : NULL;
  if (s)
    vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

LLVMTargetMachineRef fzLLCreateTargetMachine(FzContext *ctx,
                                             const FzCodegenOptions *o,
                                             char **cpuOut,
                                             char **featuresOut) {
  fzLLInitNative();
  char *triple = o->triple ? fzStrDup(ctx, o->triple) : NULL;
  if (!o->triple) {
    char *t = LLVMGetDefaultTargetTriple();
    triple = fzStrDup(ctx, t);
    LLVMDisposeMessage(t);
  }
  char *cpu = NULL, *features = NULL;
  if (o->cpu) {
    cpu = fzStrDup(ctx, o->cpu);
    features = fzStrDup(ctx, o->features ? o->features : "");
  } else if (!o->triple) {
    char *c = LLVMGetHostCPUName(), *f = LLVMGetHostCPUFeatures();
    cpu = fzStrDup(ctx, c);
    features = fzStrDup(ctx, o->features ? o->features : f);
    LLVMDisposeMessage(c);
    LLVMDisposeMessage(f);
  } else {
    cpu = fzStrDup(ctx, "generic");
    features = fzStrDup(ctx, o->features ? o->features : "");
  }
  LLVMTargetMachineRef tm = NULL;
  LLVMTargetRef target;
  char *err = NULL;
  if (!triple || !cpu || !features) {
    /* out of memory: recorded */
  } else if (!fzTargetValidate(ctx, triple, o->cpu ? cpu : NULL,
                               o->features ? features : NULL)) {
    /* reported */
  } else if (LLVMGetTargetFromTriple(triple, &target, &err)) {
    fzEmitError(ctx, NULL,
                "emit-llvm: no LLVM target for triple '%s' in this build "
                "(%s)",
                triple, err ? err : "unknown target");
  } else {
    LLVMCodeGenOptLevel lvl = o->optLevel >= 3   ? LLVMCodeGenLevelAggressive
                              : o->optLevel == 0 ? LLVMCodeGenLevelNone
                                                 : LLVMCodeGenLevelDefault;
    tm = LLVMCreateTargetMachine(target, triple, cpu, features, lvl,
                                 LLVMRelocPIC, LLVMCodeModelSmall);
    if (!tm)
      fzEmitError(ctx, NULL,
                  "emit-llvm: cannot create a target machine for '%s'",
                  triple);
  }
  if (err)
    LLVMDisposeMessage(err);
  fzFree(ctx, triple);
  if (tm && cpuOut && featuresOut) {
    *cpuOut = cpu;
    *featuresOut = features;
  } else {
    fzFree(ctx, cpu);
    fzFree(ctx, features);
  }
  return tm;
}

/* prefix followed by msg ("" when msg is NULL), fzLLThreadAlloc'ed;
 * NULL when out of memory. */
static char *join_message(const char *prefix, const char *msg) {
  return fzLLThreadPrintf("%s%s", prefix, msg ? msg : "");
}

bool fzLLOptimizeModule(LLVMModuleRef mod, LLVMTargetMachineRef tm,
                        unsigned optLevel, char **error) {
  char *msg = NULL;
  *error = NULL;
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
    *error = join_message("emit-llvm: internal error: the generated LLVM IR "
                          "does not verify:\n",
                          msg);
    LLVMDisposeMessage(msg);
    return false;
  }
  LLVMDisposeMessage(msg);
  if (optLevel == 0)
    return true;
  char pipeline[32];
  snprintf(pipeline, sizeof pipeline, "default<O%u>",
           optLevel > 3 ? 3 : optLevel);
  LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(pbo, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(pbo, 1);
  LLVMPassBuilderOptionsSetLoopUnrolling(pbo, 1);
  LLVMPassBuilderOptionsSetLoopInterleaving(pbo, 1);
  LLVMErrorRef e = LLVMRunPasses(mod, pipeline, tm, pbo);
  LLVMDisposePassBuilderOptions(pbo);
  if (e) {
    char *m = LLVMGetErrorMessage(e);
    *error = join_message("emit-llvm: the LLVM optimizer failed: ", m);
    LLVMDisposeErrorMessage(m);
    return false;
  }
  return true;
}

bool fzLLOptimize(FzContext *ctx, LLVMModuleRef mod, LLVMTargetMachineRef tm,
                  const FzCodegenOptions *o) {
  char *error = NULL;
  if (fzLLOptimizeModule(mod, tm, o->optLevel, &error))
    return true;
  fzEmitError(ctx, NULL, "%s", error ? error : "emit-llvm: out of memory");
  fzLLThreadFree(error);
  return false;
}

bool fzLLBuildOptimized(FzOp *module, const FzCodegenOptions *options,
                        LLVMContextRef *llctxOut, LLVMModuleRef *modOut,
                        LLVMTargetMachineRef *tmOut, FzLLSites *sitesOut) {
  FzContext *ctx = fzOpGetContext(module);
  FzCodegenOptions defaults;
  if (!options) {
    fzCodegenOptionsInit(&defaults);
    options = &defaults;
  }
  FzLLSites sites = {0};
  FzLLUnits units;
  memset(&units, 0, sizeof units);
  fzPtrVecInit(&units.exported, ctx);
  if (!fzLLBuildTranslated(module, options, llctxOut, modOut, tmOut, &sites,
                           &units))
    return false;
  /* Each unit optimized on its own (on threads), then linked: the same
   * module for any number of threads. */
  bool ok = fzLLCompileUnits(ctx, &units, options, *tmOut, false, true) &&
            fzLLLinkUnits(ctx, &units);
  if (ok) {
    units.v[0].mod = NULL; /* the caller's */
    units.v[0].llctx = NULL;
  }
  fzLLUnitsFree(ctx, &units);
  if (!ok) {
    fzLLSitesFree(ctx, &sites);
    LLVMDisposeTargetMachine(*tmOut);
    return false;
  }
  if (sitesOut)
    *sitesOut = sites;
  else
    fzLLSitesFree(ctx, &sites);
  return true;
}

bool fzLLBuildTranslated(FzOp *module, const FzCodegenOptions *options,
                         LLVMContextRef *llctxOut, LLVMModuleRef *modOut,
                         LLVMTargetMachineRef *tmOut, FzLLSites *sitesOut,
                         FzLLUnits *units) {
  FzContext *ctx = fzOpGetContext(module);
  FzCodegenOptions defaults;
  if (!options) {
    fzCodegenOptionsInit(&defaults);
    options = &defaults;
  }
  char *cpu = NULL, *features = NULL;
  LLVMTargetMachineRef tm =
      fzLLCreateTargetMachine(ctx, options, &cpu, &features);
  if (!tm)
    return false;
  FzLLEmitter E;
  memset(&E, 0, sizeof E);
  E.ctx = ctx;
  E.opts = *options;
  if (E.opts.alignment == 0 || (E.opts.alignment & (E.opts.alignment - 1)))
    E.opts.alignment = 1;
  E.llctx = LLVMContextCreate();
  E.mod = LLVMModuleCreateWithNameInContext("fuse", E.llctx);
  E.tm = tm;
  E.cpu = cpu;
  E.features = features;
  char *triple = LLVMGetTargetMachineTriple(tm);
  LLVMSetTarget(E.mod, triple);
  LLVMDisposeMessage(triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(E.mod, td);
  LLVMDisposeTargetData(td);
  bool ok = true;
  if (units) { /* unit 0: the module itself */
    units->v = fzCalloc(ctx, 16, sizeof *units->v);
    ok = units->v != NULL;
    if (ok) {
      units->cap = 16;
      units->n = 1;
      units->v[0].llctx = E.llctx;
      units->v[0].mod = E.mod;
    }
    E.units = units;
  }
  /* The CPU-only loop transforms, on a copy of the caller's module. */
  FzOp *copy = NULL;
  if (options->tileContractions || options->tileConvolutions ||
      options->stageRows) {
    copy = fzOpClone(module, NULL);
    ok = copy && fzLLPrepareLoopModule(copy, options, features);
  }
  double t0 = fzLLNowSeconds();
  ok = ok && fzLLTranslateModule(&E, copy ? copy : module);
  fzLLReportPhase(options, "LLVM translate", t0, -1, 1, 0);
  if (copy)
    fzOpDestroy(copy);
  fzFree(ctx, cpu);
  fzFree(ctx, features);
  if (!ok || !sitesOut)
    fzLLSitesFree(ctx, &E.sites);
  else
    *sitesOut = E.sites;
  if (!ok) {
    if (units && units->v) {
      fzLLUnitsFree(ctx, units);
    } else {
      LLVMDisposeModule(E.mod);
      LLVMContextDispose(E.llctx);
      if (units)
        fzLLUnitsFree(ctx, units);
    }
    LLVMDisposeTargetMachine(tm);
    return false;
  }
  *llctxOut = E.llctx;
  *modOut = E.mod;
  *tmOut = tm;
  return true;
}

bool fzEmitLLVM(FzOp *module, const FzCodegenOptions *options,
                FzCodegenFileType type, FzPrintCallback cb, void *userData) {
  FzContext *ctx = fzOpGetContext(module);
  if (type == FZ_CODEGEN_OBJECT) {
    LLVMMemoryBufferRef obj = NULL;
    if (!fzLLBuildObject(module, options, &obj))
      return false;
    cb((FzStringRef){LLVMGetBufferStart(obj), LLVMGetBufferSize(obj)},
       userData);
    LLVMDisposeMemoryBuffer(obj);
    return true;
  }
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
  if (!fzLLBuildOptimized(module, options, &llctx, &mod, &tm, NULL))
    return false;
  bool ok = true;
  if (type == FZ_CODEGEN_LLVM_IR) {
    char *text = LLVMPrintModuleToString(mod);
    cb((FzStringRef){text, strlen(text)}, userData);
    LLVMDisposeMessage(text);
  } else {
    LLVMMemoryBufferRef buf = NULL;
    char *err = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(
            tm, mod, type == FZ_CODEGEN_ASSEMBLY ? LLVMAssemblyFile
                                                 : LLVMObjectFile,
            &err, &buf)) {
      ok = fzEmitError(ctx, NULL, "emit-llvm: code generation failed: %s",
                       err ? err : "");
      LLVMDisposeMessage(err);
    } else {
      cb((FzStringRef){LLVMGetBufferStart(buf), LLVMGetBufferSize(buf)},
         userData);
      LLVMDisposeMemoryBuffer(buf);
    }
  }
  LLVMDisposeModule(mod);
  LLVMContextDispose(llctx);
  LLVMDisposeTargetMachine(tm);
  return ok;
}

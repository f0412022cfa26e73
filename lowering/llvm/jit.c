/* lowering/llvm/jit.c - FzNativeModule: a loop-level module compiled for
 * the host and loaded into this process by an ORC LLJIT.
 *
 * The module goes through the same path as `fuse-translate --emit=obj`
 * (translate, O3 for the host CPU, object file in memory), and the
 * object is then linked into an LLJIT of its own, so what runs is
 * exactly what --emit=obj writes. Symbols the code needs from the
 * process (aligned_alloc, free, and the C library's math functions with
 * exact math) are resolved against the process itself.
 *
 * Ownership: the FzNativeModule owns its LLJIT (and so the code); the fz
 * module is only read while compiling.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>

#include "lowering/llvm/emit_internal.h"

struct FzNativeModule {
  FzContext *ctx;
  LLVMOrcLLJITRef jit;
  double compileSeconds;
};

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Reports err (consumed) as an error; returns false. */
static bool report(FzContext *ctx, LLVMErrorRef err, const char *what) {
  char *m = LLVMGetErrorMessage(err);
  fzEmitError(ctx, NULL, "native code: %s: %s", what, m);
  LLVMDisposeErrorMessage(m);
  return false;
}

FzNativeModule *fzNativeModuleCreate(FzOp *module,
                                     const FzCodegenOptions *options) {
  FzContext *ctx = fzOpGetContext(module);
  FzCodegenOptions o;
  if (options)
    o = *options;
  else
    fzCodegenOptionsInit(&o);
  if (o.triple) {
    char *host = LLVMGetDefaultTargetTriple();
    bool same = strcmp(host, o.triple) == 0;
    LLVMDisposeMessage(host);
    if (!same) {
      fzEmitError(ctx, NULL,
                  "native code: cannot run code for target '%s' in this "
                  "process",
                  o.triple);
      return NULL;
    }
  }
  double t0 = now_seconds();
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
  if (!fzLLBuildOptimized(module, &o, &llctx, &mod, &tm))
    return NULL;
  LLVMMemoryBufferRef obj = NULL;
  char *err = NULL;
  bool ok = !LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile,
                                                 &err, &obj);
  if (!ok) {
    fzEmitError(ctx, NULL, "native code: code generation failed: %s",
                err ? err : "");
    LLVMDisposeMessage(err);
  }
  LLVMDisposeModule(mod);
  LLVMContextDispose(llctx);
  LLVMDisposeTargetMachine(tm);
  if (!ok)
    return NULL;

  FzNativeModule *m = fzCalloc(ctx, 1, sizeof *m);
  if (!m) {
    LLVMDisposeMemoryBuffer(obj);
    return NULL;
  }
  m->ctx = ctx;
  LLVMErrorRef e = LLVMOrcCreateLLJIT(&m->jit, LLVMOrcCreateLLJITBuilder());
  if (e) {
    report(ctx, e, "cannot create the JIT");
    LLVMDisposeMemoryBuffer(obj);
    fzFree(ctx, m);
    return NULL;
  }
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(m->jit);
  LLVMOrcDefinitionGeneratorRef gen;
  e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &gen, LLVMOrcLLJITGetGlobalPrefix(m->jit), NULL, NULL);
  if (e) {
    report(ctx, e, "cannot search the process for symbols");
    LLVMDisposeMemoryBuffer(obj);
    fzNativeModuleDestroy(m);
    return NULL;
  }
  LLVMOrcJITDylibAddGenerator(jd, gen);
  e = LLVMOrcLLJITAddObjectFile(m->jit, jd, obj); /* takes obj */
  if (e) {
    report(ctx, e, "cannot load the object file");
    fzNativeModuleDestroy(m);
    return NULL;
  }
  m->compileSeconds = now_seconds() - t0;
  return m;
}

void fzNativeModuleDestroy(FzNativeModule *m) {
  if (!m)
    return;
  if (m->jit) {
    LLVMErrorRef e = LLVMOrcDisposeLLJIT(m->jit);
    if (e)
      report(m->ctx, e, "cannot dispose of the JIT");
  }
  fzFree(m->ctx, m);
}

uintptr_t fzNativeModuleLookupSymbol(FzNativeModule *m, const char *symbol) {
  LLVMOrcExecutorAddress addr = 0;
  LLVMErrorRef e = LLVMOrcLLJITLookup(m->jit, &addr, symbol);
  if (e) {
    LLVMConsumeError(e);
    return 0;
  }
  return (uintptr_t)addr;
}

FzPackedEntryFn fzNativeModuleLookupPacked(FzNativeModule *m,
                                           FzStringRef name) {
  char buf[512];
  if (name.length + 8 > sizeof buf)
    return NULL;
  memcpy(buf, name.data, name.length);
  memcpy(buf + name.length, ".packed", 8);
  uintptr_t a = fzNativeModuleLookupSymbol(m, buf);
  return a ? (FzPackedEntryFn)a : NULL;
}

double fzNativeModuleGetCompileSeconds(const FzNativeModule *m) {
  return m->compileSeconds;
}

/* lowering/llvm/jit.c - FzNativeModule: a loop-level module compiled for
 * the host and loaded into this process by an ORC LLJIT.
 *
 * fzNativeModuleCreate (native_cache.c) finds the module's objects in
 * the kernel cache or translates it into units (the top-level functions,
 * each outlined parallel region) compiled on threads (cpu_codegen.c),
 * one object each; fzLLNativeFromObjects links them into one dylib of
 * an LLJIT of its own. (`fuse-translate --emit=obj` links the same
 * units' optimized IR into one module and object instead: the same
 * optimized functions, one file.) Symbols the code needs from the
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
  FzLLSites sites;   /* the run-time checks of the code (emit_check.c) */
  int64_t *status;   /* its fz_status global; NULL when it has no check */
};

/* Reports err (consumed) as an error; returns false. */
static bool report(FzContext *ctx, LLVMErrorRef err, const char *what) {
  char *m = LLVMGetErrorMessage(err);
  fzEmitError(ctx, NULL, "native code: %s: %s", what, m);
  LLVMDisposeErrorMessage(m);
  return false;
}

/* Checks that options (may be NULL) target this process; fills *o. */
static bool host_options(FzContext *ctx, const FzCodegenOptions *options,
                         FzCodegenOptions *o) {
  if (options)
    *o = *options;
  else
    fzCodegenOptionsInit(o);
  if (o->triple) {
    char *host = LLVMGetDefaultTargetTriple();
    bool same = strcmp(host, o->triple) == 0;
    LLVMDisposeMessage(host);
    if (!same)
      return fzEmitError(ctx, NULL,
                         "native code: cannot run code for target '%s' in "
                         "this process",
                         o->triple);
  }
  return true;
}

FzNativeModule *fzLLNativeFromObjects(FzContext *ctx,
                                      LLVMMemoryBufferRef *objs, size_t n,
                                      FzLLSites *sites,
                                      const FzCodegenOptions *o) {
  double tLink = fzLLNowSeconds();
  size_t next = 0; /* objs[next..n) are still ours */
  FzNativeModule *m = fzCalloc(ctx, 1, sizeof *m);
  if (!m)
    goto fail;
  m->ctx = ctx;
  m->sites = *sites;
  *sites = (FzLLSites){0};
  LLVMErrorRef e = LLVMOrcCreateLLJIT(&m->jit, LLVMOrcCreateLLJITBuilder());
  if (e) {
    m->jit = NULL;
    report(ctx, e, "cannot create the JIT");
    goto fail;
  }
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(m->jit);
  LLVMOrcDefinitionGeneratorRef gen;
  e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &gen, LLVMOrcLLJITGetGlobalPrefix(m->jit), NULL, NULL);
  if (e) {
    report(ctx, e, "cannot search the process for symbols");
    goto fail;
  }
  LLVMOrcJITDylibAddGenerator(jd, gen);
  for (; next < n; ++next) {
    e = LLVMOrcLLJITAddObjectFile(m->jit, jd, objs[next]); /* takes it */
    if (e) {
      ++next;
      report(ctx, e, "cannot load the object file");
      goto fail;
    }
  }
  if (m->sites.n) {
    m->status = (int64_t *)fzNativeModuleLookupSymbol(m, "fz_status");
    if (!m->status) {
      fzEmitError(ctx, NULL, "native code: internal error: the code has "
                             "run-time checks but no fz_status");
      goto fail;
    }
  }
  fzLLReportPhase(o, "JIT link", tLink, -1, 1, 0);
  return m;
fail:
  for (; next < n; ++next)
    LLVMDisposeMemoryBuffer(objs[next]);
  if (!m)
    fzLLSitesFree(ctx, sites);
  fzNativeModuleDestroy(m);
  return NULL;
}

bool fzLLNativeHostOptions(FzContext *ctx, const FzCodegenOptions *options,
                           FzCodegenOptions *o) {
  return host_options(ctx, options, o);
}

void fzNativeModuleSetCompileSeconds(FzNativeModule *m, double seconds) {
  m->compileSeconds = seconds;
}

void fzNativeModuleClearStatus(FzNativeModule *m) {
  if (m->status)
    __atomic_store_n(&m->status[0], 0, __ATOMIC_RELAXED);
}

bool fzNativeModuleTakeStatus(FzNativeModule *m, FzContext *ctx) {
  if (!m->status)
    return true;
  int64_t site = __atomic_load_n(&m->status[0], __ATOMIC_RELAXED);
  int64_t value = m->status[1];
  if (site == 0)
    return true;
  fzNativeModuleClearStatus(m);
  if (site < 0 || (uint64_t)site > m->sites.n)
    return fzEmitError(ctx, NULL, "native code: internal error: the code "
                                  "reported an unknown error (%lld)",
                       (long long)site);
  const FzLLSite *s = &m->sites.v[site - 1];
  /* The message holds "%lld" where the value goes, at most once. */
  const char *at = strstr(s->message, "%lld");
  if (!at)
    return fzEmitError(ctx, s->loc, "%s", s->message);
  return fzEmitError(ctx, s->loc, "%.*s%lld%s", (int)(at - s->message),
                     s->message, (long long)value, at + 4);
}

void fzNativeModuleDestroy(FzNativeModule *m) {
  if (!m)
    return;
  fzLLSitesFree(m->ctx, &m->sites);
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

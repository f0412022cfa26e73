/* lowering/llvm/objcache.c - the CPU back end's object files through the
 * kernel cache (ir/cache.h, docs/codegen.md "Kernel cache").
 *
 * The key is fzLLLoopKey's (native_cache.c): the SHA-256 of the cache's
 * prefix, the target machine (triple, CPU, features), every codegen
 * option and the loop module's structure (its dense constants, the
 * weights, by their fzHash128). A hit skips the loop transforms, the
 * translation, O3 and the code generator; a miss runs them (the units
 * of cpu_codegen.c optimized on threads, linked into one module,
 * compiled) and stores the object file that `--emit=obj` writes. The
 * JIT's entries are native_cache.c's (an object per unit).
 */
#include <string.h>

#include "ir/cache.h"
#include "lowering/llvm/emit_internal.h"

void fzLLCacheKeyBegin(FzSha256 *h, FzCacheKind kind) {
  fzCacheKeyBegin(h, kind);
  unsigned major = 0, minor = 0, patch = 0;
  LLVMGetVersion(&major, &minor, &patch);
  fzSha256UpdateString(h, "LLVM");
  fzSha256UpdateU64(h, major);
  fzSha256UpdateU64(h, minor);
  fzSha256UpdateU64(h, patch);
}

/* The options, field by field (no padding bytes in the hash). */
void fzLLHashOptions(FzSha256 *h, const FzCodegenOptions *o) {
  fzSha256UpdateU64(h, o->optLevel);
  fzSha256UpdateU64(h, o->fastMath);
  fzSha256UpdateU64(h, o->reassocReductions);
  fzSha256UpdateU64(h, o->contract);
  fzSha256UpdateU64(h, o->exactMath);
  fzSha256UpdateU64(h, o->parallel);
  fzSha256UpdateU64(h, o->preferVectorWidth);
  fzSha256UpdateU64(h, o->explicitVectors);
  fzSha256UpdateU64(h, (uint64_t)o->nontemporalMinBytes);
  fzSha256UpdateU64(h, o->alignment);
  fzSha256UpdateU64(h, o->tileContractions);
  fzSha256UpdateU64(h, o->tileConvolutions);
  fzSha256UpdateU64(h, o->stageRows);
  fzSha256UpdateU64(h, o->threads);
}

bool fzLLBuildObject(FzOp *module, const FzCodegenOptions *options,
                     LLVMMemoryBufferRef *obj) {
  FzContext *ctx = fzOpGetContext(module);
  FzCodegenOptions defaults;
  if (!options) {
    fzCodegenOptionsInit(&defaults);
    options = &defaults;
  }
  *obj = NULL;
  FzCache *cache = options->noCache ? NULL : fzCacheOpen(options->cacheDir);
  FzCacheKey key;
  double t0 = fzLLNowSeconds();
  bool keyed = cache && fzLLLoopKey(module, options, FZ_CACHE_OBJECT, &key);
  if (cache)
    fzLLReportPhase(options, "cache key", t0, -1, 1, 0);
  char *data = NULL;
  size_t len = 0;
  uint32_t flags = 0;
  bool ok = true;
  t0 = fzLLNowSeconds();
  if (keyed && fzCacheLoad(cache, &key, FZ_CACHE_OBJECT, &data, &len, &flags)) {
    *obj = LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len, "fuse.o");
    fzCacheFree(data);
    if (!*obj)
      ok = fzEmitError(ctx, NULL, "native code: out of memory");
    fzLLReportPhase(options, "cache load", t0, -1, 1, 0);
  } else {
    LLVMContextRef llctx;
    LLVMModuleRef mod;
    LLVMTargetMachineRef tm;
    ok = fzLLBuildOptimized(module, options, &llctx, &mod, &tm, NULL);
    if (ok) {
      /* The linked module's code generation (one object: one thread). */
      t0 = fzLLNowSeconds();
      char *err = NULL;
      if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &err,
                                              obj)) {
        ok = fzEmitError(ctx, NULL, "native code: code generation failed: %s",
                         err ? err : "");
        LLVMDisposeMessage(err);
        *obj = NULL;
      }
      fzLLReportPhase(options, "LLVM codegen", t0, -1, 1, 0);
      LLVMDisposeModule(mod);
      LLVMContextDispose(llctx);
      LLVMDisposeTargetMachine(tm);
    }
    if (ok && keyed)
      (void)fzCacheStore(cache, &key, FZ_CACHE_OBJECT, 0,
                         LLVMGetBufferStart(*obj), LLVMGetBufferSize(*obj));
  }
  fzCacheFinish(cache, ctx, options->timing);
  fzCacheClose(cache);
  return ok;
}

/* lowering/llvm/objcache.c - the CPU back end's object files through the
 * kernel cache (ir/cache.h, docs/codegen.md "Kernel cache").
 *
 * The module is translated as always (the loop transforms, the emitter:
 * the run-time check sites come from there, so a hit has them too);
 * the key is the SHA-256 of the cache's prefix, the target machine
 * (triple, CPU, features), every codegen option and the LLVM module's
 * bitcode as translated (its large constants, the weights, by their
 * fzHash128: module_key). A hit skips O3 and the code generator, which
 * are most of the time; a miss runs them and stores the object file.
 * The object is what `--emit=obj` writes and what the JIT loads
 * (jit.c), so both paths share the entries.
 */
#include <string.h>

#include <llvm-c/BitWriter.h>

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

/* Constants at least this large (a model's weights: loop.constant_buffer,
 * an [N x i8] string) are hashed with fzHash128 and left out of the
 * bitcode that is hashed: writing ResNet-50's 100 MB of weights as
 * bitcode takes seconds, hashing them a few hundredths. */
enum { kBulkBytes = 4096 };

typedef struct Bulk {
  LLVMValueRef global, init;
} Bulk;

/* The key of mod: the cache's prefix, the target machine, the options,
 * every large constant's length and fzHash128 (in module order), then
 * the bitcode of mod with those constants' initializers replaced by
 * zeros (restored before returning). False when it could not be made
 * (no memory: the module is compiled without the cache). */
static bool module_key(LLVMModuleRef mod, LLVMTargetMachineRef tm,
                       const FzCodegenOptions *o, FzCacheKey *key) {
  FzSha256 h;
  fzLLCacheKeyBegin(&h, FZ_CACHE_OBJECT);
  char *triple = LLVMGetTargetMachineTriple(tm);
  char *cpu = LLVMGetTargetMachineCPU(tm);
  char *features = LLVMGetTargetMachineFeatureString(tm);
  fzSha256UpdateString(&h, triple);
  fzSha256UpdateString(&h, cpu);
  fzSha256UpdateString(&h, features);
  LLVMDisposeMessage(triple);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(features);
  fzLLHashOptions(&h, o);
  size_t n = 0, cap = 0;
  Bulk *bulk = NULL;
  bool ok = true;
  for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g && ok;
       g = LLVMGetNextGlobal(g)) {
    LLVMValueRef init = LLVMGetInitializer(g);
    if (!init || !LLVMIsAConstantDataSequential(init) ||
        !LLVMIsConstantString(init))
      continue;
    size_t len = 0;
    const char *data = LLVMGetAsString(init, &len);
    if (len < kBulkBytes)
      continue;
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 64;
      Bulk *nb = fzLLThreadAlloc(ncap * sizeof *nb);
      if (!(ok = nb != NULL))
        break;
      if (n)
        memcpy(nb, bulk, n * sizeof *nb);
      fzLLThreadFree(bulk);
      bulk = nb;
      cap = ncap;
    }
    uint8_t d[FZ_HASH128_BYTES];
    fzHash128(data, len, 0, d);
    fzSha256UpdateU64(&h, n);
    fzSha256UpdateU64(&h, len);
    fzSha256Update(&h, d, sizeof d);
    bulk[n++] = (Bulk){g, init};
    LLVMSetInitializer(g, LLVMConstNull(LLVMTypeOf(init)));
  }
  LLVMMemoryBufferRef bc = ok ? LLVMWriteBitcodeToMemoryBuffer(mod) : NULL;
  for (size_t i = 0; i < n; ++i)
    LLVMSetInitializer(bulk[i].global, bulk[i].init);
  fzLLThreadFree(bulk);
  if (!bc)
    return false;
  fzSha256Update(&h, LLVMGetBufferStart(bc), LLVMGetBufferSize(bc));
  fzSha256Final(&h, key->bytes);
  LLVMDisposeMemoryBuffer(bc);
  return true;
}

bool fzLLBuildObject(FzOp *module, const FzCodegenOptions *options,
                     LLVMMemoryBufferRef *obj, FzLLSites *sitesOut) {
  FzContext *ctx = fzOpGetContext(module);
  FzCodegenOptions defaults;
  if (!options) {
    fzCodegenOptionsInit(&defaults);
    options = &defaults;
  }
  *obj = NULL;
  LLVMContextRef llctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
  FzLLSites sites = {0};
  if (!fzLLBuildTranslated(module, options, &llctx, &mod, &tm, &sites))
    return false;
  FzCache *cache = options->noCache ? NULL : fzCacheOpen(options->cacheDir);
  FzCacheKey key;
  double t0 = fzLLNowSeconds();
  bool keyed = cache && module_key(mod, tm, options, &key);
  fzLLReportPhase(options, "cache key", t0, -1, 1, 0);
  t0 = fzLLNowSeconds();
  char *data = NULL;
  size_t len = 0;
  uint32_t flags = 0;
  bool ok = true;
  if (keyed && fzCacheLoad(cache, &key, FZ_CACHE_OBJECT, &data, &len, &flags)) {
    *obj = LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len, "fuse.o");
    fzCacheFree(data);
    if (!*obj)
      ok = fzEmitError(ctx, NULL, "native code: out of memory");
    fzLLReportPhase(options, "cache load", t0, -1, 1, 0);
  } else {
    ok = fzLLOptimize(ctx, mod, tm, options);
    char *err = NULL;
    if (ok && LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &err,
                                                  obj)) {
      ok = fzEmitError(ctx, NULL, "native code: code generation failed: %s",
                       err ? err : "");
      LLVMDisposeMessage(err);
      *obj = NULL;
    }
    fzLLReportPhase(options, "LLVM optimize+codegen", t0, -1, 1, 0);
    if (ok && keyed)
      (void)fzCacheStore(cache, &key, FZ_CACHE_OBJECT, 0,
                         LLVMGetBufferStart(*obj), LLVMGetBufferSize(*obj));
  }
  LLVMDisposeModule(mod);
  LLVMContextDispose(llctx);
  LLVMDisposeTargetMachine(tm);
  fzCacheFinish(cache, ctx, options->timing);
  fzCacheClose(cache);
  if (!ok || !sitesOut)
    fzLLSitesFree(ctx, &sites);
  else
    *sitesOut = sites;
  return ok;
}

/* lowering/llvm/native_cache.h - the CPU back end's warm start: a
 * compiled module found in the kernel cache (ir/cache.h, docs/codegen.md
 * "Kernel cache") by a hash of its loop-level IR, before the CPU's loop
 * transforms, the translation to LLVM IR and LLVM run (native_cache.c).
 * For pipelines/cpu.c (fzCpuExecutableCreate); no llvm-c here.
 *
 *   s = fzNativeCacheOpen(loop, o);     NULL: no cache (noCache, ...)
 *   m = fzNativeCacheLookup(s);         a hit: the module, ready to run
 *   ... otherwise transform loop, then
 *   m = fzNativeCacheCompile(s, loop, o');   compiled and stored
 *   fzNativeCacheClose(s);              the "kernel cache" record
 */
#ifndef FZ_LOWERING_LLVM_NATIVE_CACHE_H
#define FZ_LOWERING_LLVM_NATIVE_CACHE_H

#include "fz/lowering.h"

typedef struct FzNativeCacheSession FzNativeCacheSession;

/* A session for loopModule (loop level, before fzPrepareLoopModuleForCpu)
 * compiled with o: its key is the SHA-256 of the cache's prefix, the
 * target machine, o, the loop transforms' environment switches and the
 * module's structure (ops, types, attributes, locations; dense constants
 * by their fzHash128). NULL when o->noCache, or when no key could be
 * made (then compile as usual). */
FzNativeCacheSession *fzNativeCacheOpen(FzOp *loopModule,
                                        const FzCodegenOptions *o);
/* The module stored under the session's key (its run-time check sites
 * included), loaded into a JIT; NULL on a miss (nothing reported, unless
 * the JIT failed). */
FzNativeModule *fzNativeCacheLookup(FzNativeCacheSession *s);
/* fzNativeModuleCreate(loopModule, o) (o's own cache lookup skipped),
 * storing the object and its sites under the session's key. NULL after
 * reporting errors. */
FzNativeModule *fzNativeCacheCompile(FzNativeCacheSession *s,
                                     FzOp *loopModule,
                                     const FzCodegenOptions *o);
/* Reports the session's cache record to the options' timing sink (and
 * any warning), and frees it. NULL is ignored. */
void fzNativeCacheClose(FzNativeCacheSession *s);

#endif /* FZ_LOWERING_LLVM_NATIVE_CACHE_H */

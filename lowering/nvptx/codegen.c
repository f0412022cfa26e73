/* lowering/nvptx/codegen.c - LLVM's share of a GPU compilation on a pool
 * of threads: for every kernel's module (a unit, translate.c), link
 * libdevice where the module calls it, run O3, make the names of its
 * module-local symbols unique across the program, and generate its PTX.
 *
 * Thread safety, as LLVM's C API allows it: every unit has an
 * LLVMContext of its own, created on the calling thread and handed to
 * exactly one thread here, which disposes it; every thread has a target
 * machine of its own (job->tms, created by the caller); the NVPTX target
 * and LLVM's options were initialized once (ptx.c, pthread_once);
 * libdevice's bitcode is read once by the caller and only read here.
 * Nothing the threads run touches a FzContext: diagnostic handlers and
 * the context's allocator are not thread-safe, so a failure is a message
 * in its unit, which the caller reports after the threads are joined,
 * and the texts and messages of the units are the C library's memory
 * (fzLLThreadAlloc). Only the schedule, made on the calling thread before
 * the threads start, comes from the context. Each LLVMContext gets a
 * diagnostic handler too, since LLVM's default one exits the process on
 * an error (unreadable bitcode, say).
 *
 * The kernel cache (ir/cache.h, docs/codegen.md "Kernel cache"): with
 * job->cache, a unit's key is the SHA-256 of the job's prefix and its
 * module's bitcode as translated; a hit takes the stored text (and
 * whether it uses fz_status) and skips everything below, a miss stores
 * what it made. Loads and stores are the cache's thread-safe calls.
 * Progress: job->progress hears of every unit done, one call at a time
 * (the pool's lock).
 *
 * Determinism: each unit's PTX depends on its module alone, not on the
 * thread that compiled it nor on the order; the threads take the units
 * largest first (so that a long kernel does not start last), and the
 * caller joins their texts in kernel order (join.c).
 *
 * Names: a kernel's module-local symbols (shared-memory arrays,
 * constants, libdevice functions that were not inlined) would clash with
 * another module's in the joined PTX, so each becomes ENTRY$NAME: the
 * entry names are unique and hold no '$' (translate.c), so the names
 * stay unique and never equal an entry's. fz_status (the run-time
 * checks' status, which the runtime finds by name) and fz_dyn_smem (a
 * declaration) keep their names; join.c declares them once.
 */
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Linker.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lowering/nvptx/nvptx_internal.h"

enum { kPtxKernelCallConv = 71, kStackBytes = 16 << 20 };

double fzNvNowSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool fail(FzNvUnit *U, char *msg) {
  fzLLThreadFree(U->error);
  U->error = msg ? msg : fzLLThreadPrintf("emit-ptx: out of memory");
  return false;
}

/* The LLVMContext's diagnostic handler: without one, LLVM prints an
 * error and exits the process (from a worker thread, while the others
 * run). The first error is kept for the unit's message; warnings and
 * remarks are dropped. */
static void on_llvm_diagnostic(LLVMDiagnosticInfoRef info, void *ud) {
  FzNvUnit *U = ud;
  if (LLVMGetDiagInfoSeverity(info) != LLVMDSError || U->llvmError)
    return;
  char *d = LLVMGetDiagInfoDescription(info);
  U->llvmError = d ? fzLLThreadPrintf("%s", d) : NULL;
  LLVMDisposeMessage(d);
}

/* "MSG (LLVM's error)" or "MSG", fzLLThreadAlloc'ed. */
static char *with_llvm_error(FzNvUnit *U, char *msg) {
  if (!msg || !U->llvmError)
    return msg;
  char *s = fzLLThreadPrintf("%s (%s)", msg, U->llvmError);
  fzLLThreadFree(msg);
  return s;
}

bool fzNvUsesLibdevice(LLVMModuleRef mod) {
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f;
       f = LLVMGetNextFunction(f)) {
    size_t n;
    const char *name = LLVMGetValueName2(f, &n);
    if (LLVMIsDeclaration(f) && n > 5 && !strncmp(name, "__nv_", 5))
      return true;
  }
  return false;
}

/* Links libdevice into U's module, makes everything but the kernels and
 * fz_status internal (so that O3 drops what is not called), and sets the
 * module flag that NVVMReflect reads (no flush to zero: subnormals are
 * kept). fz_status stays external: the runtime reads it back when the
 * plan lists run-time checks, and an internal global that LLVM proves
 * unused (every check folded away, as in ViT-B/16's constant-index
 * gather) is deleted, leaving the runtime without it. */
static bool link_libdevice(const FzNvCodegenJob *job, FzNvUnit *U) {
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(
      job->libdevice, job->libdeviceLen, "libdevice", 0);
  LLVMModuleRef lib = NULL;
  bool bad = !buf || LLVMParseBitcodeInContext2(U->llctx, buf, &lib);
  if (buf)
    LLVMDisposeMemoryBuffer(buf);
  if (bad)
    return fail(
        U, with_llvm_error(U, fzLLThreadPrintf("emit-ptx: '%s' is not LLVM "
                                               "bitcode",
                                               job->libdevicePath)));
  LLVMSetTarget(lib, LLVMGetTarget(U->mod));
  LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(U->mod));
  if (LLVMLinkModules2(U->mod, lib))
    return fail(
        U, with_llvm_error(
               U, fzLLThreadPrintf("emit-ptx: linking libdevice '%s' failed",
                                   job->libdevicePath)));
  for (LLVMValueRef f = LLVMGetFirstFunction(U->mod); f;
       f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) &&
        LLVMGetFunctionCallConv(f) != kPtxKernelCallConv)
      LLVMSetLinkage(f, LLVMInternalLinkage);
  for (LLVMValueRef g = LLVMGetFirstGlobal(U->mod); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g) && strcmp(LLVMGetValueName(g), "fz_status"))
      LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(U->llctx);
  LLVMAddModuleFlag(U->mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz",
                    16, LLVMValueAsMetadata(LLVMConstInt(i32, 0, 0)));
  return true;
}

/* ENTRY$NAME for v. */
static bool prefix_name(FzNvUnit *U, LLVMValueRef v) {
  size_t n;
  const char *name = LLVMGetValueName2(v, &n);
  if (n >= 5 && !strncmp(name, "llvm.", 5)) /* llvm.used and the like */
    return true;
  size_t e = strlen(U->name);
  char *s = fzLLThreadAlloc(e + 1 + n + 1);
  if (!s)
    return fail(U, NULL);
  memcpy(s, U->name, e);
  s[e] = '$';
  memcpy(s + e + 1, name, n);
  LLVMSetValueName2(v, s, e + 1 + n);
  fzLLThreadFree(s);
  return true;
}

static bool rename_locals(FzNvUnit *U) {
  bool ok = true;
  for (LLVMValueRef f = LLVMGetFirstFunction(U->mod); f && ok;
       f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) &&
        LLVMGetFunctionCallConv(f) != kPtxKernelCallConv)
      ok = prefix_name(U, f);
  for (LLVMValueRef g = LLVMGetFirstGlobal(U->mod); g && ok;
       g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g) && strcmp(LLVMGetValueName(g), "fz_status"))
      ok = prefix_name(U, g);
  return ok;
}

static bool emit_text(const FzNvCodegenJob *job, FzNvUnit *U,
                      LLVMTargetMachineRef tm) {
  if (job->emitIR) {
    char *ir = LLVMPrintModuleToString(U->mod);
    U->len = strlen(ir);
    U->text = fzLLThreadAlloc(U->len + 1);
    if (U->text)
      memcpy(U->text, ir, U->len + 1);
    LLVMDisposeMessage(ir);
    return U->text != NULL || fail(U, NULL);
  }
  LLVMMemoryBufferRef buf = NULL;
  char *err = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, U->mod, LLVMAssemblyFile, &err,
                                          &buf)) {
    fail(U, fzLLThreadPrintf("emit-ptx: NVPTX code generation failed: %s",
                             err ? err : ""));
    LLVMDisposeMessage(err);
    return false;
  }
  U->len = LLVMGetBufferSize(buf);
  U->text = fzLLThreadAlloc(U->len + 1);
  if (U->text) {
    memcpy(U->text, LLVMGetBufferStart(buf), U->len);
    U->text[U->len] = '\0';
  }
  LLVMDisposeMemoryBuffer(buf);
  return U->text != NULL || fail(U, NULL);
}

/* U's key in the kernel cache: keyPrefix, then its module's bitcode as
 * translated. False when the bitcode could not be written. */
static bool unit_key(const FzNvCodegenJob *job, FzNvUnit *U, FzCacheKey *key) {
  LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(U->mod);
  if (!bc)
    return false;
  FzSha256 h;
  fzSha256Init(&h);
  fzSha256Update(&h, job->keyPrefix, sizeof job->keyPrefix);
  fzSha256Update(&h, LLVMGetBufferStart(bc), LLVMGetBufferSize(bc));
  fzSha256Final(&h, key->bytes);
  LLVMDisposeMemoryBuffer(bc);
  return true;
}

static FzCacheKind unit_kind(const FzNvCodegenJob *job) {
  return job->emitIR ? FZ_CACHE_LLVM_IR : FZ_CACHE_PTX;
}

/* U's text from the cache, if it holds it (the module then disposed). */
static bool load_cached(const FzNvCodegenJob *job, FzNvUnit *U,
                        const FzCacheKey *key) {
  char *text = NULL;
  size_t len = 0;
  uint32_t flags = 0;
  if (!fzCacheLoad(job->cache, key, unit_kind(job), &text, &len, &flags))
    return false;
  U->text = text;
  U->len = len;
  U->usesStatus = (flags & 1) != 0;
  U->cached = true;
  return true;
}

static void compile_unit(const FzNvCodegenJob *job, FzNvUnit *U,
                         LLVMTargetMachineRef tm) {
  double t0 = fzNvNowSeconds();
  char *err = NULL;
  FzCacheKey key;
  bool keyed = job->cache && unit_key(job, U, &key);
  if (keyed && load_cached(job, U, &key)) {
    LLVMDisposeModule(U->mod);
    LLVMContextDispose(U->llctx);
    U->mod = NULL;
    U->llctx = NULL;
    U->seconds = fzNvNowSeconds() - t0;
    return;
  }
  LLVMContextSetDiagnosticHandler(U->llctx, on_llvm_diagnostic, U);
  bool ok =
      !job->libdevice || !fzNvUsesLibdevice(U->mod) || link_libdevice(job, U);
  if (ok && !fzLLOptimizeModule(U->mod, tm, job->optLevel, &err))
    ok = fail(U, err);
  if (ok) {
    /* LLVM may prove every check of the kernel unnecessary (a gather by
     * constant indices in range): then its module keeps no fz_status. */
    LLVMValueRef g = LLVMGetNamedGlobal(U->mod, "fz_status");
    if (g && !LLVMGetFirstUse(g)) {
      LLVMDeleteGlobal(g);
      g = NULL;
    }
    U->usesStatus = g != NULL;
  }
  ok = ok && rename_locals(U) && emit_text(job, U, tm);
  if (ok && keyed)
    (void)fzCacheStore(job->cache, &key, unit_kind(job), U->usesStatus ? 1 : 0,
                       U->text, U->len);
  LLVMDisposeModule(U->mod);
  LLVMContextDispose(U->llctx);
  U->mod = NULL;
  U->llctx = NULL;
  U->seconds = fzNvNowSeconds() - t0;
}

typedef struct Pool {
  const FzNvCodegenJob *job;
  const size_t *order; /* units by decreasing size; NULL: kernel order */
  atomic_size_t next;
  pthread_mutex_t lock; /* the progress calls */
  size_t done;          /* units done (under lock) */
} Pool;

/* One more unit done, told to the progress sink. */
static void tell_progress(Pool *p) {
  const FzProgressSink *s = p->job->progress;
  if (!s || !s->update)
    return;
  pthread_mutex_lock(&p->lock);
  ++p->done;
  s->update("compiling kernels", p->done, p->job->numUnits, s->userData);
  pthread_mutex_unlock(&p->lock);
}

typedef struct Worker {
  Pool *pool;
  LLVMTargetMachineRef tm;
  pthread_t thread;
} Worker;

static void *work(void *arg) {
  Worker *w = arg;
  Pool *p = w->pool;
  for (;;) {
    size_t k = atomic_fetch_add(&p->next, 1);
    if (k >= p->job->numUnits)
      break;
    size_t u = p->order ? p->order[k] : k;
    compile_unit(p->job, &p->job->units[u], w->tm);
    tell_progress(p);
  }
  return NULL;
}

typedef struct Ranked {
  size_t size, index;
} Ranked;

static int by_size(const void *a, const void *b) {
  const Ranked *x = a, *y = b;
  if (x->size != y->size)
    return x->size > y->size ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

bool fzNvCodegenRun(FzContext *ctx, FzNvCodegenJob *job) {
  size_t n = job->numUnits;
  unsigned threads = job->numThreads ? job->numThreads : 1;
  if (threads > n)
    threads = n ? (unsigned)n : 1;
  /* The schedule: largest modules first (ties in kernel order). */
  Ranked *ranked = fzCalloc(ctx, n + 1, sizeof *ranked);
  size_t *order = ranked ? fzCalloc(ctx, n + 1, sizeof *order) : NULL;
  Worker *workers = order ? fzCalloc(ctx, threads, sizeof *workers) : NULL;
  if (!workers) {
    fzFree(ctx, ranked);
    fzFree(ctx, order);
    return false;
  }
  for (size_t i = 0; i < n; ++i)
    ranked[i] = (Ranked){job->units[i].size, i};
  qsort(ranked, n, sizeof *ranked, by_size);
  for (size_t i = 0; i < n; ++i)
    order[i] = ranked[i].index;
  fzFree(ctx, ranked);
  Pool pool = {job, order, 0, PTHREAD_MUTEX_INITIALIZER, 0};
  if (job->progress && job->progress->update)
    job->progress->update("compiling kernels", 0, n, job->progress->userData);
  unsigned started = 0;
  pthread_attr_t attr;
  bool haveAttr = pthread_attr_init(&attr) == 0;
  if (haveAttr)
    pthread_attr_setstacksize(&attr, kStackBytes);
  /* workers[0] is the calling thread; a thread that cannot be started
   * leaves its share to the others. */
  for (unsigned t = 1; t < threads; ++t) {
    workers[t].pool = &pool;
    workers[t].tm = job->tms[t];
    if (pthread_create(&workers[t].thread, haveAttr ? &attr : NULL, work,
                       &workers[t]) != 0)
      break;
    started = t;
  }
  if (haveAttr)
    pthread_attr_destroy(&attr);
  Worker self = {.pool = &pool, .tm = job->tms[0]};
  work(&self);
  for (unsigned t = 1; t <= started; ++t)
    pthread_join(workers[t].thread, NULL);
  job->threadsUsed = started + 1;
  fzFree(ctx, workers);
  fzFree(ctx, order);
  return true;
}

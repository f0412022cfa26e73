/* lowering/llvm/cpu_codegen.c - LLVM's share of a CPU compilation on a
 * pool of threads: the units of a translated module (emit_internal.h,
 * FzLLUnits: the top-level functions, and every outlined parallel
 * region on its own) are optimized and compiled each on one thread,
 * into object files that the JIT links into one dylib (jit.c), or into
 * optimized bitcode that fzLLLinkUnits joins into one module for
 * --emit=obj, asm and llvm.
 *
 * Thread safety, as in lowering/nvptx/codegen.c: every unit has an
 * LLVMContext of its own, filled on the calling thread and handed to one
 * thread here, which disposes it (unit 0's stays, when it is the link's
 * target); every thread has a target machine of its own, made by the
 * caller; nothing the threads run touches a FzContext (messages are
 * fzLLThreadAlloc'ed and reported after the join); each LLVMContext gets
 * a diagnostic handler, since LLVM's default one exits on an error.
 *
 * Determinism: a unit's output depends on its module alone, not on the
 * thread that compiled it or the order; the threads take the units
 * largest first, and the outputs are used in unit order, so the result
 * is the same for any number of threads.
 */
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Linker.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lowering/llvm/emit_internal.h"

enum { kStackBytes = 16 << 20, kMaxThreads = 16 };

void fzLLUnitsFree(FzContext *ctx, FzLLUnits *u) {
  for (size_t i = 0; i < u->n; ++i) {
    FzLLUnit *U = &u->v[i];
    if (U->out)
      LLVMDisposeMemoryBuffer(U->out);
    if (U->mod)
      LLVMDisposeModule(U->mod);
    if (U->llctx)
      LLVMContextDispose(U->llctx);
    fzLLThreadFree(U->error);
    fzLLThreadFree(U->llvmError);
    fzFree(ctx, U->name);
  }
  fzFree(ctx, u->v);
  for (size_t i = 0; i < u->exported.len; ++i)
    fzFree(ctx, u->exported.data[i]);
  fzPtrVecFree(&u->exported);
  memset(u, 0, sizeof *u);
}

unsigned fzLLCodegenThreads(const FzCodegenOptions *o, size_t units) {
  unsigned t = o->codegenThreads;
  if (t == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    t = cpus < 1 ? 1 : cpus > kMaxThreads ? kMaxThreads : (unsigned)cpus;
  }
  if (units && t > units)
    t = (unsigned)units;
  return t ? t : 1;
}

static void on_llvm_diagnostic(LLVMDiagnosticInfoRef info, void *ud) {
  FzLLUnit *U = ud;
  if (LLVMGetDiagInfoSeverity(info) != LLVMDSError || U->llvmError)
    return;
  char *d = LLVMGetDiagInfoDescription(info);
  U->llvmError = d ? fzLLThreadPrintf("%s", d) : NULL;
  LLVMDisposeMessage(d);
}

typedef struct Pool {
  FzLLUnits *units;
  const size_t *order;
  atomic_size_t next;
  unsigned optLevel;
  bool objects;   /* object files; else optimized bitcode */
  bool keepFirst; /* unit 0: optimized in place, kept */
} Pool;

static bool fail(FzLLUnit *U, char *msg) {
  fzLLThreadFree(U->error);
  U->error = msg ? msg : fzLLThreadPrintf("emit-llvm: out of memory");
  return false;
}

static void compile_unit(const Pool *p, size_t k, LLVMTargetMachineRef tm) {
  FzLLUnit *U = &p->units->v[k];
  double t0 = fzLLNowSeconds();
  LLVMContextSetDiagnosticHandler(U->llctx, on_llvm_diagnostic, U);
  char *err = NULL;
  bool ok = fzLLOptimizeModule(U->mod, tm, p->optLevel, &err) || fail(U, err);
  if (ok && !(k == 0 && p->keepFirst)) {
    if (p->objects) {
      char *msg = NULL;
      if (LLVMTargetMachineEmitToMemoryBuffer(tm, U->mod, LLVMObjectFile,
                                              &msg, &U->out)) {
        fail(U, fzLLThreadPrintf("native code: code generation failed: %s%s%s",
                                 msg ? msg : "", U->llvmError ? " " : "",
                                 U->llvmError ? U->llvmError : ""));
        U->out = NULL;
      }
      LLVMDisposeMessage(msg);
    } else if (!(U->out = LLVMWriteBitcodeToMemoryBuffer(U->mod))) {
      fail(U, NULL);
    }
  }
  if (!(k == 0 && p->keepFirst)) {
    LLVMDisposeModule(U->mod);
    LLVMContextDispose(U->llctx);
    U->mod = NULL;
    U->llctx = NULL;
  }
  U->seconds = fzLLNowSeconds() - t0;
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
    if (k >= p->units->n)
      break;
    compile_unit(p, p->order[k], w->tm);
  }
  return NULL;
}

static int64_t count_instructions(LLVMModuleRef m) {
  int64_t n = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
    for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b;
         b = LLVMGetNextBasicBlock(b))
      for (LLVMValueRef i = LLVMGetFirstInstruction(b); i;
           i = LLVMGetNextInstruction(i))
        ++n;
  return n;
}

typedef struct Ranked {
  int64_t work;
  size_t index;
} Ranked;

static int by_work(const void *a, const void *b) {
  const Ranked *x = a, *y = b;
  if (x->work != y->work)
    return x->work > y->work ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

bool fzLLCompileUnits(FzContext *ctx, FzLLUnits *u, const FzCodegenOptions *o,
                      LLVMTargetMachineRef tm, bool objects, bool keepFirst) {
  size_t n = u->n;
  unsigned threads = fzLLCodegenThreads(o, n);
  double t0 = fzLLNowSeconds();
  Ranked *ranked = fzCalloc(ctx, n + 1, sizeof *ranked);
  size_t *order = ranked ? fzCalloc(ctx, n + 1, sizeof *order) : NULL;
  Worker *workers = order ? fzCalloc(ctx, threads, sizeof *workers) : NULL;
  if (!workers) {
    fzFree(ctx, ranked);
    fzFree(ctx, order);
    return false;
  }
  for (size_t i = 0; i < n; ++i)
    ranked[i] = (Ranked){u->v[i].work = count_instructions(u->v[i].mod), i};
  qsort(ranked, n, sizeof *ranked, by_work);
  for (size_t i = 0; i < n; ++i)
    order[i] = ranked[i].index;
  fzFree(ctx, ranked);
  /* Target machines for the other threads (made here: the context). A
   * failure is reported (out of memory): the compile fails. */
  unsigned made = 1;
  for (; made < threads; ++made)
    if (!(workers[made].tm = fzLLCreateTargetMachine(ctx, o, NULL, NULL)))
      break;
  if (made < threads) {
    for (unsigned t = 1; t < made; ++t)
      LLVMDisposeTargetMachine(workers[t].tm);
    fzFree(ctx, workers);
    fzFree(ctx, order);
    return false;
  }
  Pool pool = {u, order, 0, o->optLevel, objects, keepFirst};
  pthread_attr_t attr;
  bool haveAttr = pthread_attr_init(&attr) == 0;
  if (haveAttr)
    pthread_attr_setstacksize(&attr, kStackBytes);
  unsigned started = 0;
  for (unsigned t = 1; t < made; ++t) {
    workers[t].pool = &pool;
    if (pthread_create(&workers[t].thread, haveAttr ? &attr : NULL, work,
                       &workers[t]) != 0)
      break;
    started = t;
  }
  if (haveAttr)
    pthread_attr_destroy(&attr);
  Worker self = {.pool = &pool, .tm = tm};
  work(&self);
  for (unsigned t = 1; t <= started; ++t)
    pthread_join(workers[t].thread, NULL);
  for (unsigned t = 1; t < made; ++t)
    LLVMDisposeTargetMachine(workers[t].tm);
  fzFree(ctx, workers);
  fzFree(ctx, order);
  bool ok = true;
  double busy = 0;
  const char *phase = objects ? "LLVM optimize+codegen" : "LLVM optimize";
  for (size_t i = 0; i < n; ++i) {
    busy += u->v[i].seconds;
    if (u->v[i].error && ok)
      ok = fzEmitError(ctx, NULL, "%s", u->v[i].error);
    if (o->timing && o->timing->record) { /* each unit, as one item */
      const char *name = u->v[i].name ? u->v[i].name : "(top-level functions)";
      FzTimingRecord r = {phase, name, u->v[i].seconds, u->v[i].seconds,
                          1, 0, 0, 0, 0};
      o->timing->record(&r, o->timing->userData);
    }
  }
  fzLLReportPhase(o, phase, t0, busy, started + 1, n);
  return ok;
}

bool fzLLLinkUnits(FzContext *ctx, FzLLUnits *u) {
  LLVMModuleRef mod = u->v[0].mod;
  LLVMContextRef llctx = u->v[0].llctx;
  for (size_t i = 1; i < u->n; ++i) {
    FzLLUnit *U = &u->v[i];
    LLVMModuleRef m = NULL;
    bool bad = !U->out || LLVMParseBitcodeInContext2(llctx, U->out, &m);
    if (U->out)
      LLVMDisposeMemoryBuffer(U->out);
    U->out = NULL;
    if (bad || LLVMLinkModules2(mod, m)) /* m is consumed */
      return fzEmitError(ctx, NULL, "emit-llvm: internal error: the units "
                                    "of the module do not link");
  }
  /* What the units shared is local again, as in one module. */
  for (size_t i = 0; i < u->exported.len; ++i) {
    const char *name = u->exported.data[i];
    LLVMValueRef f = LLVMGetNamedFunction(mod, name);
    LLVMValueRef g = f ? f : LLVMGetNamedGlobal(mod, name);
    if (!g || LLVMIsDeclaration(g))
      continue;
    LLVMSetVisibility(g, LLVMDefaultVisibility);
    LLVMSetLinkage(g, f ? LLVMInternalLinkage : LLVMPrivateLinkage);
  }
  return true;
}

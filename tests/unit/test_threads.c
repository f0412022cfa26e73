/* tests/unit/test_threads.c - independent contexts on several threads.
 *
 * The promise (docs/api.md, "Threads"): fuse has no mutable global state,
 * so different contexts may be used concurrently from different threads
 * with no locking; one context (and everything made in it) is used by
 * one thread at a time. These tests run the whole embedding workflow on
 * NTHREADS threads at once, each in its own context: register dialects
 * and passes, parse, verify, run canonicalize+cse+fuse, interpret, print
 * (custom and generic form, with locations), and report a diagnostic for
 * malformed input. Every thread must produce byte-identical text, equal
 * to what the main thread produces alone. Some threads use a counting
 * allocator of their own, which must see every allocation and end with
 * nothing live. A last test compiles the program for the CPU (LLVM, JIT,
 * thread pool) in several threads at once and runs it.
 *
 * Worker threads never call ck_assert (Check reports from the test's own
 * thread): they record a failure message that the test then asserts on.
 * Meant to run under the sanitizer build (FZ_SANITIZE) as well.
 */
#include <math.h>
#include <pthread.h>

#include "fz/fusion.h"
#include "fz/graph.h"
#include "fz/pass.h"
#include "fz/runtime.h"
#include "test_helpers.h"

#define NTHREADS 8
#define ROUNDS 10 /* workflows per thread */

/* A small MLP with work for each pass: neg(neg(.)) for canonicalize, a
 * duplicated add for cse, elementwise chains, a matmul epilogue and a
 * softmax (reduction) for fuse. */
static const char kProgram[] =
    "func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>,\n"
    "                %b: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {\n"
    "  %0 = graph.matmul %x, %w : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32>\n"
    "  %1 = graph.add %0, %b : tensor<4x6xf32>, tensor<6xf32> -> tensor<4x6xf32>\n"
    "  %2 = graph.add %0, %b : tensor<4x6xf32>, tensor<6xf32> -> tensor<4x6xf32>\n"
    "  %3 = graph.neg %2 : tensor<4x6xf32>\n"
    "  %4 = graph.neg %3 : tensor<4x6xf32>\n"
    "  %5 = graph.mul %1, %4 : tensor<4x6xf32>\n"
    "  %6 = graph.tanh %5 : tensor<4x6xf32>\n"
    "  %7 = graph.softmax %6 {axis = 1 : i64} : tensor<4x6xf32>\n"
    "  %8 = graph.relu %1 : tensor<4x6xf32>\n"
    "  return %7, %8 : tensor<4x6xf32>, tensor<4x6xf32>\n"
    "}\n";

static const char kMalformed[] =
    "func.func @bad(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = graph.relu %y : tensor<4xf32>\n"
    "  return %0 : tensor<4xf32>\n"
    "}\n";

static const char kPipeline[] =
    "builtin.module(func.func(canonicalize,cse,fuse))";

typedef struct Worker {
  int index;
  bool ownAllocator;  /* use `alloc` for the context */
  CountingAlloc alloc;
  TextBuf text;       /* everything the workflow printed (last round) */
  char failure[256];  /* empty when every round succeeded */
} Worker;

static void worker_fail(Worker *w, const char *what) {
  if (!w->failure[0])
    snprintf(w->failure, sizeof w->failure, "thread %d: %s", w->index, what);
}

/* Claims every diagnostic, appending it (no source line) to the text. */
static bool on_diag(const FzDiagnostic *d, void *ud) {
  TextBuf *t = ud;
  fzDiagnosticPrint(d, false, text_cb, t);
  return true;
}

static void append(TextBuf *t, const char *s) {
  text_cb(fzStringRefFromCString(s), t);
}

/* Fixed inputs: element i of input k is sin(i + 7k) / 2. */
static bool make_inputs(FzContext *ctx, FzOp *func, FzTensor **in) {
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  for (size_t k = 0; k < 3; ++k) {
    in[k] = fzTensorCreateFromType(
        ctx, fzValueGetType(fzBlockGetArgument(entry, k)));
    if (!in[k])
      return false;
    for (int64_t i = 0; i < in[k]->numElements; ++i)
      fzTensorSetF64(in[k], i, 0.5 * sin((double)(i + 7 * k)));
  }
  return true;
}

/* One complete workflow in a fresh context; its text into w->text. */
static void workflow(Worker *w) {
  text_free(&w->text);
  FzAllocator a = counting_allocator(&w->alloc);
  FzContext *ctx = w->ownAllocator ? fzContextCreateWithAllocator(&a)
                                   : fzContextCreate();
  if (!ctx) {
    worker_fail(w, "no context");
    return;
  }
  FzDiagHandlerId h = fzContextPushDiagHandler(ctx, on_diag, &w->text);
  FzOp *module = NULL;
  FzPassManager *pm = NULL;
  FzTensor *in[3] = {NULL, NULL, NULL};
  size_t nOut = 0;
  FzTensor **out = NULL;

  if (!fzRegisterAllDialects(ctx) || !fzRegisterAllPasses(ctx)) {
    worker_fail(w, "registration failed");
    goto done;
  }
  module = fzParseSource(ctx, FZ_STR(kProgram), FZ_STR("threads.fuse"), 0);
  if (!module || !fzOpVerify(module)) {
    worker_fail(w, "parse/verify failed");
    goto done;
  }
  pm = fzPassManagerCreate(ctx, "builtin.module");
  if (!pm || !fzPassManagerParsePipeline(pm, FZ_STR(kPipeline)) ||
      !fzPassManagerRun(pm, module)) {
    worker_fail(w, "the pipeline failed");
    goto done;
  }
  append(&w->text, "--- custom form\n");
  fzOpPrint(module, 0, text_cb, &w->text);
  append(&w->text, "--- generic form with locations\n");
  fzOpPrint(module, FZ_PRINT_GENERIC | FZ_PRINT_DEBUGINFO, text_cb,
            &w->text);
  append(&w->text, "--- statistics\n");
  fzPassManagerPrintStatistics(pm, text_cb, &w->text);

  FzOp *func = fzSymbolTableLookupIn(module, FZ_STR("main"));
  if (!func || !make_inputs(ctx, func, in) ||
      !fzInterpretFunction(func, 3, in, NULL, &nOut, &out)) {
    worker_fail(w, "interpretation failed");
    goto done;
  }
  append(&w->text, "--- outputs\n");
  for (size_t r = 0; r < nOut; ++r) {
    char buf[64];
    for (int64_t i = 0; i < out[r]->numElements; ++i) {
      snprintf(buf, sizeof buf, "%.9g%c", fzTensorGetF64(out[r], i),
               i + 1 == out[r]->numElements ? '\n' : ' ');
      append(&w->text, buf);
    }
  }

  append(&w->text, "--- diagnostics\n");
  FzOp *bad = fzParseSource(ctx, FZ_STR(kMalformed), FZ_STR("bad.fuse"), 0);
  if (bad) {
    worker_fail(w, "malformed input was accepted");
    fzOpDestroy(bad);
  }
  if (fzContextGetNumErrors(ctx) != 1)
    worker_fail(w, "expected exactly one error in the context");

done:
  fzTensorArrayDestroy(ctx, nOut, out);
  for (size_t k = 0; k < 3; ++k)
    fzTensorDestroy(in[k]);
  fzPassManagerDestroy(pm);
  fzOpDestroy(module);
  fzContextPopDiagHandler(ctx, h);
  fzContextDestroy(ctx);
  if (w->ownAllocator && (w->alloc.liveBlocks != 0 || w->alloc.badFrees))
    worker_fail(w, "the context's allocator has blocks left or saw bad frees");
}

static void *thread_main(void *arg) {
  Worker *w = arg;
  for (int r = 0; r < ROUNDS && !w->failure[0]; ++r)
    workflow(w);
  return NULL;
}

/* Runs NTHREADS workers at once and compares each one's text with a
 * reference made on this thread before any worker starts. */
static void run_threads(bool ownAllocators) {
  Worker ref;
  memset(&ref, 0, sizeof ref);
  workflow(&ref);
  ck_assert_msg(!ref.failure[0], "%s\n%s", ref.failure,
                ref.text.data ? ref.text.data : "");
  ck_assert_ptr_nonnull(ref.text.data);
  ck_assert_ptr_nonnull(strstr(ref.text.data, "graph.fusion"));
  ck_assert_ptr_nonnull(strstr(ref.text.data, "bad.fuse:2:19: error"));

  static Worker workers[NTHREADS];
  pthread_t tid[NTHREADS];
  memset(workers, 0, sizeof workers);
  for (int i = 0; i < NTHREADS; ++i) {
    workers[i].index = i;
    workers[i].ownAllocator = ownAllocators && (i % 2 == 0);
    ck_assert_int_eq(pthread_create(&tid[i], NULL, thread_main, &workers[i]),
                     0);
  }
  for (int i = 0; i < NTHREADS; ++i)
    ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
  for (int i = 0; i < NTHREADS; ++i) {
    Worker *w = &workers[i];
    ck_assert_msg(!w->failure[0], "%s\n%s", w->failure,
                  w->text.data ? w->text.data : "");
    ck_assert_msg(w->text.data && strcmp(w->text.data, ref.text.data) == 0,
                  "thread %d printed something else:\n%s\n--- expected:\n%s",
                  i, w->text.data ? w->text.data : "(nothing)",
                  ref.text.data);
    if (w->ownAllocator)
      ck_assert_uint_gt(w->alloc.numAllocs, 0);
    text_free(&w->text);
  }
  text_free(&ref.text);
}

START_TEST(test_threads_default_allocator) { run_threads(false); }
END_TEST

START_TEST(test_threads_own_allocators) { run_threads(true); }
END_TEST

/* Contexts created on one thread and handed to another (used by one
 * thread at a time) work: ownership moves with the handle. */
typedef struct Handoff {
  FzContext *ctx;
  FzOp *module;
  bool ok;
} Handoff;

static void *verify_elsewhere(void *arg) {
  Handoff *h = arg;
  h->ok = fzOpVerify(h->module);
  FzPassManager *pm = fzPassManagerCreate(h->ctx, "builtin.module");
  h->ok = h->ok && pm && fzPassManagerParsePipeline(pm, FZ_STR(kPipeline)) &&
          fzPassManagerRun(pm, h->module);
  fzPassManagerDestroy(pm);
  return NULL;
}

START_TEST(test_threads_handoff) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  FzOp *m = fzParseSource(ctx, FZ_STR(kProgram), FZ_STR("threads.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  Handoff h = {ctx, m, false};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, verify_elsewhere, &h), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0); /* the join orders memory */
  ck_assert(h.ok);
  TextBuf text = {0};
  fzOpPrint(m, 0, text_cb, &text);
  ck_assert_ptr_nonnull(strstr(text.data, "graph.fusion"));
  text_free(&text);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Compiling for the CPU and running the code, in every thread at once:
 * each thread has its own context, pool and executable (LLVM's one-time
 * target initialization is the library's business). Outputs must equal
 * the interpreter's within f32 tolerance and be the same in every
 * thread. */
typedef struct CpuWorker {
  int index;
  double out[2][24];
  char failure[256];
} CpuWorker;

static void *cpu_thread_main(void *arg) {
  CpuWorker *w = arg;
  FzContext *ctx = fzContextCreate();
  TextBuf diags = {0};
  FzDiagHandlerId h = ctx ? fzContextPushDiagHandler(ctx, on_diag, &diags) : 0;
  FzOp *module = NULL, *func = NULL;
  FzCpuRuntime *rt = NULL;
  FzCpuExecutable *exe = NULL;
  FzCpuFunction *f = NULL;
  FzTensor *in[3] = {NULL, NULL, NULL};
  size_t nOut = 0, nRef = 0;
  FzTensor **out = NULL, **ref = NULL;
  bool ok = ctx && fzRegisterAllDialects(ctx) && fzRegisterAllPasses(ctx);
  if (ok)
    module = fzParseSource(ctx, FZ_STR(kProgram), FZ_STR("threads.fuse"), 0);
  ok = module && fzOpVerify(module);
  if (ok) {
    func = fzSymbolTableLookupIn(module, FZ_STR("main"));
    ok = func && make_inputs(ctx, func, in) &&
         fzInterpretFunction(func, 3, in, NULL, &nRef, &ref);
  }
  if (ok) {
    rt = fzCpuRuntimeCreate(ctx, 2);
    exe = rt ? fzCpuExecutableCreate(rt, module, NULL) : NULL;
    f = exe ? fzCpuExecutableLookup(exe, FZ_STR("main")) : NULL;
    ok = f && fzCpuFunctionRun(f, 3, in, &nOut, &out) && nOut == 2 &&
         nRef == 2;
  }
  for (size_t r = 0; ok && r < 2; ++r)
    for (int64_t i = 0; i < 24; ++i) {
      double got = fzTensorGetF64(out[r], i);
      double want = fzTensorGetF64(ref[r], i);
      w->out[r][i] = got;
      if (fabs(got - want) > 1e-5 + 1e-5 * fabs(want))
        ok = false;
    }
  if (!ok)
    snprintf(w->failure, sizeof w->failure, "cpu thread %d failed: %s",
             w->index, diags.data ? diags.data : "(no diagnostic)");
  if (ctx) {
    fzTensorArrayDestroy(ctx, nOut, out);
    fzTensorArrayDestroy(ctx, nRef, ref);
  }
  for (size_t k = 0; k < 3; ++k)
    fzTensorDestroy(in[k]);
  fzCpuExecutableDestroy(exe);
  fzCpuRuntimeDestroy(rt);
  fzOpDestroy(module);
  if (ctx)
    fzContextPopDiagHandler(ctx, h);
  fzContextDestroy(ctx);
  text_free(&diags);
  return NULL;
}

START_TEST(test_threads_cpu) {
  enum { N = 4 };
  static CpuWorker workers[N];
  pthread_t tid[N];
  memset(workers, 0, sizeof workers);
  for (int i = 0; i < N; ++i) {
    workers[i].index = i;
    ck_assert_int_eq(
        pthread_create(&tid[i], NULL, cpu_thread_main, &workers[i]), 0);
  }
  for (int i = 0; i < N; ++i)
    ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
  for (int i = 0; i < N; ++i) {
    ck_assert_msg(!workers[i].failure[0], "%s", workers[i].failure);
    ck_assert_msg(memcmp(workers[i].out, workers[0].out,
                         sizeof workers[0].out) == 0,
                  "cpu thread %d computed other values than thread 0", i);
  }
}
END_TEST

static Suite *threads_suite(void) {
  Suite *s = suite_create("threads");
  TCase *tc = tcase_create("independent-contexts");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_threads_default_allocator);
  tcase_add_test(tc, test_threads_own_allocators);
  tcase_add_test(tc, test_threads_handoff);
  tcase_add_test(tc, test_threads_cpu);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(threads_suite()); }

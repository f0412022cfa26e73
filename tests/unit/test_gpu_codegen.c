/* tests/unit/test_gpu_codegen.c - Check suite of the GPU back end's
 * parallel code generation (lowering/nvptx/codegen.c, join.c): one LLVM
 * module per kernel, compiled on FzGpuOptions.codegenThreads threads.
 * The PTX and the checks are the same for any number of threads; the
 * timing sink receives the phases in order, one record per kernel before
 * the code generator's own; a bad thread count is an error; and a
 * failure on a worker thread (libdevice that is not bitcode) is reported
 * once, through the context's handlers, on the calling thread (and LLVM,
 * which would exit the process on it, does not print it). No GPU is
 * needed (PTX only).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fz/fz.h"
#include "fz/gpu.h"
#include "tests/unit/test_helpers.h"

/* Five kernels: a gather (a run-time check), a softmax (exp), an
 * elementwise chain, a bf16 tensor-core matmul (dynamic shared memory),
 * and @second's gather (the program's second check). */
static const char kModule[] =
    "func.func @main(%x: tensor<8x64xf32>, %i: tensor<3xi64>,\n"
    "                %a: tensor<128x64xbf16>, %b: tensor<64x128xbf16>,\n"
    "                %y: tensor<4096xf32>)\n"
    "    -> (tensor<3x64xf32>, tensor<8x64xf32>, tensor<128x128xbf16>,\n"
    "        tensor<4096xf32>) {\n"
    "  %0 = graph.gather %x, %i {axis = 0 : i64} : tensor<8x64xf32>, "
    "tensor<3xi64> -> tensor<3x64xf32>\n"
    "  %1 = graph.softmax %x {axis = 1 : i64} : tensor<8x64xf32>\n"
    "  %2 = graph.matmul %a, %b : tensor<128x64xbf16>, tensor<64x128xbf16> "
    "-> tensor<128x128xbf16>\n"
    "  %3 = graph.tanh %y : tensor<4096xf32>\n"
    "  %4 = graph.exp %3 : tensor<4096xf32>\n"
    "  return %0, %1, %2, %4 : tensor<3x64xf32>, tensor<8x64xf32>,\n"
    "                          tensor<128x128xbf16>, tensor<4096xf32>\n"
    "}\n"
    "func.func @second(%x: tensor<5x32xf32>, %i: tensor<4xi64>) -> "
    "tensor<4x32xf32> {\n"
    "  %0 = graph.gather %x, %i {axis = 0 : i64} : tensor<5x32xf32>, "
    "tensor<4xi64> -> tensor<4x32xf32>\n"
    "  return %0 : tensor<4x32xf32>\n"
    "}\n";

typedef struct Loop {
  FzContext *ctx;
  FzOp *module; /* at the loop level */
} Loop;

static Loop lower(void) {
  Loop l;
  l.ctx = fzContextCreate();
  ck_assert_ptr_nonnull(l.ctx);
  ck_assert(fzRegisterAllDialects(l.ctx));
  ck_assert(fzRegisterAllPasses(l.ctx));
  l.module = fzParseSource(l.ctx, fzStringRefFromCString(kModule),
                           FZ_STR("t.fuse"), 0);
  ck_assert_ptr_nonnull(l.module);
  ck_assert(fzLowerModuleForCpu(l.module, NULL));
  return l;
}

static void release(Loop *l) {
  fzOpDestroy(l->module);
  fzContextDestroy(l->ctx);
}

static size_t count(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
    ++n;
  return n;
}

START_TEST(test_same_ptx_any_threads) {
  Loop l = lower();
  static const unsigned threads[] = {1, 2, 3, 5, 16, 0};
  FzGpuProgram *first = NULL;
  for (size_t t = 0; t < sizeof threads / sizeof threads[0]; ++t) {
    FzGpuOptions go;
    fzGpuOptionsInit(&go);
    go.codegenThreads = threads[t];
    go.noCache = true; /* every run compiles (tests/unit/test_cache.c) */
    FzGpuProgram *p = fzGpuCompile(l.module, &go);
    ck_assert_ptr_nonnull(p);
    if (!first) {
      first = p;
      /* One module: one header, fz_status defined once before the first
       * entry, every kernel's entry once. */
      ck_assert_uint_eq(count(p->ptx, "\n.version "), 1);
      ck_assert_uint_eq(count(p->ptx, "\n.target "), 1);
      ck_assert_uint_eq(count(p->ptx, "fz_status[16]"), 1);
      ck_assert_uint_eq(count(p->ptx, ".extern .shared"), 1);
      ck_assert_ptr_nonnull(strstr(p->ptx, ".visible .global .align 8 .b8 "
                                           "fz_status[16];"));
      ck_assert(strstr(p->ptx, "fz_status[16]") <
                strstr(p->ptx, ".visible .entry"));
      ck_assert_uint_eq(count(p->ptx, ".visible .entry "), 5);
      ck_assert_uint_eq(p->numChecks, 2);
      /* In kernel order. */
      const char *k0 = strstr(p->ptx, ".entry main_k0("),
                 *k3 = strstr(p->ptx, ".entry main_k3("),
                 *s0 = strstr(p->ptx, ".entry second_k0(");
      ck_assert(k0 && k3 && s0 && k0 < k3 && k3 < s0);
      continue;
    }
    ck_assert_uint_eq(p->ptxLen, first->ptxLen);
    ck_assert_msg(memcmp(p->ptx, first->ptx, p->ptxLen) == 0,
                  "the PTX of %u threads differs from one thread's",
                  threads[t]);
    ck_assert_uint_eq(p->numChecks, first->numChecks);
    for (size_t c = 0; c < p->numChecks; ++c)
      ck_assert_str_eq(p->checks[c].message, first->checks[c].message);
    fzGpuProgramDestroy(p);
  }
  fzGpuProgramDestroy(first);
  release(&l);
}
END_TEST

#define MAX_RECORDS 64

typedef struct Records {
  size_t n;
  char phase[MAX_RECORDS][32];
  char item[MAX_RECORDS][32];
  unsigned threads[MAX_RECORDS];
  size_t items[MAX_RECORDS];
  double wall[MAX_RECORDS], busy[MAX_RECORDS];
  pthread_t thread[MAX_RECORDS];
} Records;

static void record(const FzTimingRecord *r, void *ud) {
  Records *rs = ud;
  ck_assert_uint_lt(rs->n, MAX_RECORDS);
  size_t i = rs->n++;
  snprintf(rs->phase[i], sizeof rs->phase[i], "%s", r->phase);
  snprintf(rs->item[i], sizeof rs->item[i], "%s", r->item ? r->item : "");
  rs->threads[i] = r->threads;
  rs->items[i] = r->items;
  rs->wall[i] = r->wallSeconds;
  rs->busy[i] = r->busySeconds;
  rs->thread[i] = pthread_self();
}

START_TEST(test_timing_sink) {
  FzContext *ctx = fzContextCreate();
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  FzOp *module = fzParseSource(ctx, fzStringRefFromCString(kModule),
                               FZ_STR("t.fuse"), 0);
  ck_assert_ptr_nonnull(module);
  Records rs;
  memset(&rs, 0, sizeof rs);
  FzTimingSink sink = {record, &rs};
  FzCpuPipelineOptions po;
  fzCpuPipelineOptionsInit(&po);
  po.timing = &sink;
  ck_assert(fzLowerModuleForCpu(module, &po));
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.codegenThreads = 2;
  go.timing = &sink;
  FzGpuProgram *p = fzGpuCompile(module, &go);
  ck_assert_ptr_nonnull(p);
  static const char *const phases[] = {
      "graph passes", "fusion", "graph->loop", "loop->kernel",
      "launch plans", "LLVM translate"};
  size_t np = sizeof phases / sizeof phases[0];
  ck_assert_uint_eq(rs.n, np + 5 + 2);
  for (size_t i = 0; i < np; ++i) {
    ck_assert_str_eq(rs.phase[i], phases[i]);
    ck_assert_str_eq(rs.item[i], "");
    ck_assert(rs.wall[i] >= 0);
  }
  /* One record per kernel (in kernel order), then the phase: 5 modules
   * on 2 threads, their thread time summed. */
  static const char *const kernels[] = {"main_k0", "main_k1", "main_k2",
                                        "main_k3", "second_k0"};
  double sum = 0;
  for (size_t k = 0; k < 5; ++k) {
    ck_assert_str_eq(rs.phase[np + k], "LLVM optimize+codegen");
    ck_assert_str_eq(rs.item[np + k], kernels[k]);
    ck_assert(rs.wall[np + k] > 0);
    sum += rs.busy[np + k];
  }
  size_t last = np + 5;
  ck_assert_str_eq(rs.phase[last], "LLVM optimize+codegen");
  ck_assert_str_eq(rs.item[last], "");
  ck_assert_uint_eq(rs.items[last], 5);
  ck_assert_uint_eq(rs.threads[last], 2);
  ck_assert(rs.busy[last] > sum * 0.999 && rs.busy[last] < sum * 1.001);
  /* Then what the kernel cache did (tests/unit/test_cache.c). */
  ck_assert_str_eq(rs.phase[last + 1], "kernel cache");
  /* Every record from the calling thread. */
  for (size_t i = 0; i < rs.n; ++i)
    ck_assert(pthread_equal(rs.thread[i], pthread_self()));
  fzGpuProgramDestroy(p);
  fzOpDestroy(module);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_bad_thread_count) {
  Loop l = lower();
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.codegenThreads = FZ_GPU_MAX_CODEGEN_THREADS + 1;
  DiagLog log;
  diag_log_begin(&log, l.ctx);
  ck_assert_ptr_null(fzGpuCompile(l.module, &go));
  diag_log_end(&log);
  ck_assert_diag(&log, "emit-ptx: at most 256 code generation threads, got "
                    "257");
  /* The most there may be: at most one per kernel runs. */
  go.codegenThreads = FZ_GPU_MAX_CODEGEN_THREADS;
  FzGpuProgram *p = fzGpuCompile(l.module, &go);
  ck_assert_ptr_nonnull(p);
  fzGpuProgramDestroy(p);
  release(&l);
}
END_TEST

typedef struct OnThread {
  size_t errors, elsewhere;
  char first[512];
} OnThread;

static pthread_t gCaller;

static bool on_thread(const FzDiagnostic *d, void *ud) {
  OnThread *o = ud;
  if (fzDiagnosticGetSeverity(d) == FZ_SEVERITY_ERROR && o->errors++ == 0) {
    FzStringRef m = fzDiagnosticGetMessage(d);
    snprintf(o->first, sizeof o->first, "%.*s", (int)m.length, m.data);
  }
  o->elsewhere += !pthread_equal(pthread_self(), gCaller);
  return true;
}

/* libdevice that is no bitcode: each of the kernels that call it (tanh
 * and exp, softmax's exp) fails on its thread; the error comes once,
 * from the calling thread, and nothing is compiled. */
START_TEST(test_worker_errors) {
  Loop l = lower();
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.libdevice = FZ_TEST_SOURCE_DIR "/README.md";
  go.codegenThreads = 4;
  gCaller = pthread_self();
  OnThread o;
  memset(&o, 0, sizeof o);
  FzDiagHandlerId h = fzContextPushDiagHandler(l.ctx, on_thread, &o);
  ck_assert_ptr_null(fzGpuCompile(l.module, &go));
  fzContextPopDiagHandler(l.ctx, h);
  ck_assert_uint_eq(o.errors, 1);
  ck_assert_uint_eq(o.elsewhere, 0);
  ck_assert_msg(strstr(o.first, "README.md' is not LLVM bitcode (Invalid "
                                "bitcode signature)") != NULL,
                "got: %s", o.first);
  release(&l);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu_codegen");
  TCase *tc = tcase_create("codegen");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_same_ptx_any_threads);
  tcase_add_test(tc, test_timing_sink);
  tcase_add_test(tc, test_bad_thread_count);
  tcase_add_test(tc, test_worker_errors);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

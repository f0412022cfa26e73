/* tests/unit/test_pass_manager.c - running pass managers: nesting and
 * anchors, failures, verification after each pass, IR dumps (before,
 * after, after-change, after-failure, module scope, tree directory),
 * timing and statistics reports, user instrumentations, reproducers.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "test_pass_dialect.h"

typedef struct Counter {
  int runs;
  char seen[256]; /* names of the ops run on */
} Counter;

static bool count_run(FzPass *pass, FzOp *op) {
  Counter *c = fzPassGetDef(pass)->userData;
  c->runs++;
  FzStringRef sym = fzSymbolGetName(op);
  size_t len = strlen(c->seen);
  snprintf(c->seen + len, sizeof c->seen - len, "%.*s;",
           sym.data ? (int)sym.length : 1, sym.data ? sym.data : "?");
  fzPassAddStatistic(pass, 0, 2);
  return true;
}

static Counter gCounter;
static const FzPassStatisticDef kCountStats[] = {{"num-runs2", "Twice the runs"}};
static const FzPassDef kCountPass = {
    .argument = "test-count", .displayName = "TestCount",
    .anchor = "func.func", .statistics = kCountStats, .numStatistics = 1,
    .run = count_run, .userData = &gCounter};

static bool fail_run(FzPass *pass, FzOp *op) {
  (void)pass;
  (void)op;
  return false; /* without reporting: the manager reports */
}
static const FzPassDef kFailPass = {.argument = "test-fail", .run = fail_run};

/* Erases a function's terminator: invalid IR. */
static bool break_run(FzPass *pass, FzOp *op) {
  (void)pass;
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(op, 0));
  fzOpErase(fzBlockGetLastOp(b));
  return true;
}
static const FzPassDef kBreakPass = {
    .argument = "test-break", .anchor = "func.func", .run = break_run};

/* Renames nothing, changes nothing. */
static bool idle_run(FzPass *pass, FzOp *op) {
  (void)pass;
  (void)op;
  return true;
}
static const FzPassDef kIdlePass = {.argument = "test-idle", .run = idle_run};

static const char kModule[] =
    "func.func @a(%x: i32) -> i32 {\n"
    "  %0 = \"tp.neg\"(%x) : (i32) -> i32\n"
    "  %1 = \"tp.neg\"(%x) : (i32) -> i32\n"
    "  %2 = \"tp.add\"(%0, %1) : (i32, i32) -> i32\n"
    "  return %2 : i32\n"
    "}\n"
    "func.func @b() {\n"
    "  return\n"
    "}\n";

static FzContext *pm_context(void) {
  FzContext *ctx = tp_context();
  ck_assert(fzContextRegisterPass(ctx, &kCountPass));
  ck_assert(fzContextRegisterPass(ctx, &kFailPass));
  ck_assert(fzContextRegisterPass(ctx, &kBreakPass));
  ck_assert(fzContextRegisterPass(ctx, &kIdlePass));
  memset(&gCounter, 0, sizeof gCounter);
  return ctx;
}

static FzPassManager *pm_parse(FzContext *ctx, const char *text) {
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert_ptr_nonnull(pm);
  ck_assert(fzPassManagerParsePipeline(pm, fzStringRefFromCString(text)));
  return pm;
}

START_TEST(test_nested_run) {
  FzContext *ctx = pm_context();
  FzOp *m = tp_parse(ctx, kModule);
  FzPassManager *pm = pm_parse(ctx, "func.func(test-count,cse),test-idle");
  ck_assert(fzPassManagerRun(pm, m));
  ck_assert_int_eq(gCounter.runs, 2);
  ck_assert_str_eq(gCounter.seen, "a;b;");
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 1); /* cse ran per function */
  /* Running twice accumulates statistics. */
  ck_assert(fzPassManagerRun(pm, m));
  TextBuf b = {0};
  fzPassManagerPrintStatistics(pm, text_cb, &b);
  ck_assert_ptr_nonnull(strstr(b.data, "... Pass statistics report ..."));
  ck_assert_ptr_nonnull(strstr(b.data, "'func.func' Pipeline\n  TestCount\n"
                                       "    (S) 8 num-runs2 - Twice the runs\n"
                                       "  CSE\n"
                                       "    (S) 1 num-cse'd - Number of "
                                       "operations CSE'd\n"
                                       "    (S) 0 num-dce'd - Number of "
                                       "operations DCE'd\n"
                                       "test-idle\n"));
  text_free(&b);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_anchor_mismatch_and_any) {
  FzContext *ctx = pm_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx, kModule);
  FzPassManager *pm = fzPassManagerCreate(ctx, "func.func");
  ck_assert(!fzPassManagerRun(pm, m));
  ck_assert_diag(&log, "cannot run a pass manager anchored on 'func.func'");
  fzPassManagerDestroy(pm);
  /* any(...) runs on every isolated-from-above child: both functions. */
  pm = fzPassManagerCreate(ctx, NULL);
  ck_assert(fzPassManagerParsePipeline(pm, FZ_STR("any(test-idle,cse)")));
  ck_assert(fzPassManagerRun(pm, m));
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 1);
  fzPassManagerDestroy(pm);
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_failure_stops_pipeline) {
  FzContext *ctx = pm_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx, kModule);
  FzPassManager *pm = pm_parse(ctx, "test-fail,func.func(test-count)");
  ck_assert(!fzPassManagerRun(pm, m));
  ck_assert_diag(&log, "'builtin.module' op pass 'test-fail' failed");
  ck_assert_int_eq(gCounter.runs, 0);
  fzPassManagerDestroy(pm);
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_verify_each) {
  FzContext *ctx = pm_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx, kModule);
  FzPassManager *pm = pm_parse(ctx, "func.func(test-break,test-count)");
  ck_assert(!fzPassManagerRun(pm, m));
  ck_assert_diag_at(&log, "the IR is invalid after pass 'test-break'",
                    "test.fuse", 1, 1);
  ck_assert_int_eq(gCounter.runs, 0);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  /* Without verification the broken IR goes through. */
  m = tp_parse(ctx, kModule);
  pm = pm_parse(ctx, "func.func(test-break,test-count)");
  fzPassManagerEnableVerifier(pm, false);
  diag_log_clear(&log);
  ck_assert(fzPassManagerRun(pm, m));
  ck_assert_uint_eq(log.numErrors, 0);
  ck_assert_int_eq(gCounter.runs, 2);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

static FzIRPrintingConfig print_config(TextBuf *out) {
  FzIRPrintingConfig c;
  memset(&c, 0, sizeof c);
  c.out = text_cb;
  c.outUserData = out;
  c.printFlags = FZ_PRINT_GENERIC;
  return c;
}

static size_t count_str(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay ? strstr(hay, needle) : NULL; p;
       p = strstr(p + 1, needle))
    ++n;
  return n;
}

START_TEST(test_print_before_after) {
  FzContext *ctx = pm_context();
  FzOp *m = tp_parse(ctx, kModule);
  FzPassManager *pm = pm_parse(ctx, "func.func(cse),test-idle");
  TextBuf out = {0};
  FzIRPrintingConfig c = print_config(&out);
  const char *before[] = {"test-idle", NULL};
  const char *after[] = {"cse", NULL};
  c.beforePasses = before;
  c.afterPasses = after;
  ck_assert(fzPassManagerEnableIRPrinting(pm, &c));
  ck_assert(fzPassManagerRun(pm, m));
  ck_assert_uint_eq(count_str(out.data, "// -----// IR Dump After CSE (cse) "
                                        "('func.func' operation: @a) "
                                        "//----- //\n\"func.func\"()"),
                    1);
  ck_assert_uint_eq(count_str(out.data, "('func.func' operation: @b)"), 1);
  ck_assert_uint_eq(count_str(out.data, "// -----// IR Dump Before test-idle "
                                        "(test-idle) //----- //\n"
                                        "\"builtin.module\""),
                    1);
  ck_assert_uint_eq(count_str(out.data, "IR Dump"), 3);
  text_free(&out);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_print_after_all_change_failure_scope) {
  FzContext *ctx = pm_context();
  FzOp *m = tp_parse(ctx, kModule);
  /* after-all + after-change: cse changes @a only; idle nothing. */
  FzPassManager *pm = pm_parse(ctx, "func.func(cse),test-idle");
  TextBuf out = {0};
  FzIRPrintingConfig c = print_config(&out);
  c.afterAll = true;
  c.afterChange = true;
  ck_assert(fzPassManagerEnableIRPrinting(pm, &c));
  ck_assert(fzPassManagerRun(pm, m));
  ck_assert_uint_eq(count_str(out.data, "IR Dump"), 1);
  ck_assert_uint_eq(count_str(out.data, "operation: @a"), 1);
  text_free(&out);
  /* after-all alone: three dumps; module scope prints the module. */
  c.afterChange = false;
  c.moduleScope = true;
  ck_assert(fzPassManagerEnableIRPrinting(pm, &c));
  ck_assert(fzPassManagerRun(pm, m));
  ck_assert_uint_eq(count_str(out.data, "IR Dump After"), 3);
  ck_assert_uint_eq(count_str(out.data, "//----- //\n\"builtin.module\""), 3);
  text_free(&out);
  fzPassManagerDestroy(pm);
  /* after-failure. */
  DiagLog log;
  diag_log_begin(&log, ctx);
  pm = pm_parse(ctx, "test-fail");
  memset(&c, 0, sizeof c);
  c = print_config(&out);
  c.afterFailure = true;
  ck_assert(fzPassManagerEnableIRPrinting(pm, &c));
  ck_assert(!fzPassManagerRun(pm, m));
  ck_assert_uint_eq(count_str(out.data, "// -----// IR Dump After test-fail "
                                        "Failed (test-fail) //----- //\n"),
                    1);
  text_free(&out);
  diag_log_end(&log);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_tree_dir) {
  FzContext *ctx = pm_context();
  FzOp *m = tp_parse(ctx, kModule);
  char dir[] = "/tmp/fz_tree_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char sub[64];
  snprintf(sub, sizeof sub, "%s/dumps", dir);
  FzPassManager *pm = pm_parse(ctx, "func.func(cse),test-idle");
  FzIRPrintingConfig c;
  memset(&c, 0, sizeof c);
  c.treeDir = sub;
  ck_assert(fzPassManagerEnableIRPrinting(pm, &c));
  ck_assert(fzPassManagerRun(pm, m));
  const char *files[] = {"000_cse.fuse", "001_cse.fuse", "002_test-idle.fuse"};
  for (size_t i = 0; i < 3; ++i) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", sub, files[i]);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "missing %s", path);
    char line[64] = {0};
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_ptr_nonnull(i < 2 ? strstr(line, "func.func @")
                                : strstr(line, "module"));
    fclose(f);
    unlink(path);
  }
  rmdir(sub);
  rmdir(dir);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_timing_report) {
  FzContext *ctx = pm_context();
  FzOp *m = tp_parse(ctx, kModule);
  FzPassManager *pm = pm_parse(ctx, "func.func(cse,canonicalize),dce");
  fzPassManagerEnableTiming(pm, true);
  ck_assert(fzPassManagerRun(pm, m));
  TextBuf b = {0};
  fzPassManagerPrintTiming(pm, text_cb, &b);
  ck_assert_ptr_nonnull(strstr(b.data, "... Execution time report ..."));
  ck_assert_ptr_nonnull(strstr(b.data, "Total Execution Time: "));
  ck_assert_ptr_nonnull(strstr(b.data, "----Wall Time----  ----Name----\n"));
  const char *rows[] = {"%)  'func.func' Pipeline\n", "%)    CSE\n",
                        "%)    Canonicalizer\n", "%)  DCE\n",
                        "%)  Verifier (after each pass)\n", "(100.0%)  Total\n"};
  const char *at = b.data;
  for (size_t i = 0; i < 6; ++i) {
    const char *p = strstr(at, rows[i]);
    ck_assert_msg(p != NULL, "row '%s' missing or out of order", rows[i]);
    at = p;
  }
  text_free(&b);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

typedef struct Calls {
  int before, after, failed;
} Calls;
static void on_before(FzPass *p, FzOp *op, void *ud) {
  (void)p;
  (void)op;
  ((Calls *)ud)->before++;
}
static void on_after(FzPass *p, FzOp *op, void *ud) {
  (void)p;
  (void)op;
  ((Calls *)ud)->after++;
}
static void on_failed(FzPass *p, FzOp *op, void *ud) {
  (void)p;
  (void)op;
  ((Calls *)ud)->failed++;
}

START_TEST(test_user_instrumentation) {
  FzContext *ctx = pm_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx, kModule);
  FzPassManager *pm = pm_parse(ctx, "func.func(cse,dce),test-fail");
  Calls calls = {0, 0, 0};
  FzPassInstrumentation in = {on_before, on_after, on_failed, &calls};
  ck_assert(fzPassManagerAddInstrumentation(pm, &in));
  ck_assert(!fzPassManagerRun(pm, m));
  ck_assert_int_eq(calls.before, 5);
  ck_assert_int_eq(calls.after, 4);
  ck_assert_int_eq(calls.failed, 1);
  diag_log_end(&log);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  char *buf = calloc(1, 1 << 16);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

START_TEST(test_reproducer) {
  FzContext *ctx = pm_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx, kModule);
  char path[] = "/tmp/fz_repro_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  FzPassManager *pm = pm_parse(ctx, "func.func(cse),test-fail");
  ck_assert(fzPassManagerEnableReproducer(pm, path));
  ck_assert(!fzPassManagerRun(pm, m));
  ck_assert_diag(&log, "reproducer written to");
  char *text = read_all(path);
  ck_assert_ptr_nonnull(strstr(text, "// fuse-reproducer: --pass-pipeline="
                                     "'builtin.module(func.func(cse),"
                                     "test-fail)'\n\"builtin.module\"()"));
  /* The captured IR is the input: both negs still there. */
  ck_assert_uint_eq(count_str(text, "tp.neg"), 2);
  FzStringRef pipeline;
  ck_assert(fzReproducerGetPipeline(fzStringRefFromCString(text), &pipeline));
  ck_assert(fzStringRefEqual(
      pipeline, FZ_STR("builtin.module(func.func(cse),test-fail)")));
  FzStringRef none;
  ck_assert(!fzReproducerGetPipeline(FZ_STR("// nothing\n"), &none));
  ck_assert_ptr_null(none.data);
  /* Replaying it fails the same way. */
  FzOp *m2 = fzParseSource(ctx, fzStringRefFromCString(text),
                           FZ_STR("repro.fuse"), 0);
  ck_assert_ptr_nonnull(m2);
  FzPassManager *pm2 = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert(fzPassManagerParsePipeline(pm2, pipeline));
  diag_log_clear(&log);
  ck_assert(!fzPassManagerRun(pm2, m2));
  ck_assert_diag(&log, "pass 'test-fail' failed");
  free(text);
  unlink(path);
  fzPassManagerDestroy(pm2);
  fzOpDestroy(m2);
  /* No failure: no file written. */
  FzPassManager *pm3 = pm_parse(ctx, "cse");
  ck_assert(fzPassManagerEnableReproducer(pm3, path));
  ck_assert(fzPassManagerRun(pm3, m));
  ck_assert_int_ne(access(path, F_OK), 0);
  fzPassManagerDestroy(pm3);
  fzPassManagerDestroy(pm);
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Allocation failures while building and running a pipeline. */
START_TEST(test_allocation_failures) {
  for (size_t k = 1; k < 600; ++k) {
    CountingAlloc ca;
    memset(&ca, 0, sizeof ca);
    FzAllocator a = counting_allocator(&ca);
    FzContext *ctx = fzContextCreateWithAllocator(&a);
    ck_assert_ptr_nonnull(ctx);
    ck_assert(fzRegisterAllDialects(ctx));
    ck_assert(fzContextRegisterDialect(ctx, &tp_dialect));
    DiagLog log;
    diag_log_begin(&log, ctx);
    FzOp *m = tp_parse(ctx, kModule);
    ca.failAt = ca.numAllocs + k;
    ca.failOnward = true;
    bool ok = fzRegisterAllPasses(ctx);
    FzPassManager *pm = ok ? fzPassManagerCreate(ctx, "builtin.module") : NULL;
    ok = pm && fzPassManagerParsePipeline(
                   pm, FZ_STR("func.func(canonicalize,cse,dce),symbol-dce"));
    if (ok) {
      fzPassManagerEnableTiming(pm, true);
      ok = fzPassManagerRun(pm, m);
    }
    fzPassManagerDestroy(pm);
    ca.failAt = 0;
    if (!ok)
      ck_assert(fzContextHadAllocationFailure(ctx) || log.numErrors > 0);
    diag_log_end(&log);
    fzOpDestroy(m);
    fzContextDestroy(ctx);
    ck_assert_uint_eq(ca.liveBlocks, 0);
    if (ok && ca.numFailures == 0)
      break;
  }
}
END_TEST

static Suite *pm_suite(void) {
  Suite *s = suite_create("pass_manager");
  TCase *tc = tcase_create("run");
  tcase_add_test(tc, test_nested_run);
  tcase_add_test(tc, test_anchor_mismatch_and_any);
  tcase_add_test(tc, test_failure_stops_pipeline);
  tcase_add_test(tc, test_verify_each);
  tcase_add_test(tc, test_print_before_after);
  tcase_add_test(tc, test_print_after_all_change_failure_scope);
  tcase_add_test(tc, test_tree_dir);
  tcase_add_test(tc, test_timing_report);
  tcase_add_test(tc, test_user_instrumentation);
  tcase_add_test(tc, test_reproducer);
  tcase_add_test(tc, test_allocation_failures);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(pm_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

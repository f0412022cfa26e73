/* tests/unit/test_pass_pipeline.c - pass registry, options, textual
 * pipelines (valid and malformed, with error columns), pipeline printing
 * round trips, and named pipelines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_pass_dialect.h"

static bool nop_run(FzPass *pass, FzOp *op) {
  (void)pass;
  (void)op;
  return true;
}

static const char *const kModes[] = {"fast", "slow", NULL};
static const FzPassOptionDef kOpts[] = {
    {"flag", FZ_PASS_OPTION_BOOL, "false", "a flag", NULL, 0, 0},
    {"level", FZ_PASS_OPTION_INT, "2", "a level", NULL, 0, 9},
    {"ratio", FZ_PASS_OPTION_FLOAT, "0.5", "a ratio", NULL, 0, 0},
    {"mode", FZ_PASS_OPTION_STRING, "fast", "a mode", kModes, 0, 0},
    {"label", FZ_PASS_OPTION_STRING, NULL, "any text", NULL, 0, 0},
};
static const FzPassDef kOptsPass = {
    .argument = "test-opts", .summary = "options", .options = kOpts,
    .numOptions = 5, .run = nop_run};
static const FzPassDef kFuncPass = {
    .argument = "test-func", .summary = "func only", .anchor = "func.func",
    .run = nop_run};
static const FzPassDef kFuncPass2 = {
    .argument = "test-func", .summary = "clash", .run = nop_run};

static FzContext *pipeline_context(void) {
  FzContext *ctx = tp_context();
  ck_assert(fzContextRegisterPass(ctx, &kOptsPass));
  ck_assert(fzContextRegisterPass(ctx, &kFuncPass));
  return ctx;
}

static char *pipeline_str(FzPassManager *pm) {
  TextBuf b = {0};
  fzPassManagerPrintPipeline(pm, text_cb, &b);
  return b.data ? b.data : calloc(1, 1);
}

/* Parses text into a fresh builtin.module manager; returns its printed
 * pipeline (or NULL after an error). */
static char *parse_print(FzContext *ctx, const char *text) {
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert_ptr_nonnull(pm);
  char *out = NULL;
  if (fzPassManagerParsePipeline(pm, fzStringRefFromCString(text)))
    out = pipeline_str(pm);
  fzPassManagerDestroy(pm);
  return out;
}

START_TEST(test_registry) {
  FzContext *ctx = pipeline_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert_ptr_eq(fzContextLookupPass(ctx, FZ_STR("test-opts")), &kOptsPass);
  ck_assert_ptr_nonnull(fzContextLookupPass(ctx, FZ_STR("cse")));
  ck_assert_ptr_null(fzContextLookupPass(ctx, FZ_STR("nope")));
  /* Same definition again: fine; another of the same name: an error. */
  ck_assert(fzContextRegisterPass(ctx, &kOptsPass));
  ck_assert(fzRegisterAllPasses(ctx));
  ck_assert(!fzContextRegisterPass(ctx, &kFuncPass2));
  ck_assert_diag(&log, "pass 'test-func' is already registered");
  ck_assert(!fzContextRegisterPassPipeline(ctx, "cse", "", "dce"));
  ck_assert(fzContextRegisterPassPipeline(ctx, "my-pipe", "mine", "cse"));
  ck_assert(fzContextRegisterPassPipeline(ctx, "my-pipe", "mine", "cse"));
  ck_assert(!fzContextRegisterPassPipeline(ctx, "my-pipe", "", "dce"));
  ck_assert(!fzContextRegisterPassPipeline(ctx, "bad name", "", "dce"));
  FzStringRef sum;
  FzStringRef txt = fzContextLookupPassPipeline(ctx, FZ_STR("my-pipe"), &sum);
  ck_assert(fzStringRefEqual(txt, FZ_STR("cse")));
  ck_assert(fzStringRefEqual(sum, FZ_STR("mine")));
  ck_assert_ptr_null(fzContextLookupPassPipeline(ctx, FZ_STR("x"), NULL).data);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

static void collect_name(const FzPassDef *def, void *ud) {
  TextBuf *b = ud;
  text_cb(fzStringRefFromCString(def->argument), b);
  text_cb(FZ_STR(" "), b);
}

START_TEST(test_registry_sorted) {
  FzContext *ctx = pipeline_context();
  TextBuf b = {0};
  fzContextForEachPass(ctx, collect_name, &b);
  /* Registration order differs from name order; the registry must list
   * every pass once, sorted by name. */
  const char *expected[] = {"canonicalize", "cse", "dce", "fold-constants",
                            "fuse", "symbol-dce", "test-func", "test-opts"};
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; ++i) {
    char word[64];
    snprintf(word, sizeof word, "%s ", expected[i]);
    ck_assert_msg(strstr(b.data, word) != NULL, "missing pass %s",
                  expected[i]);
  }
  char *prev = NULL;
  for (char *w = strtok(b.data, " "); w; w = strtok(NULL, " ")) {
    if (prev)
      ck_assert_msg(strcmp(prev, w) < 0, "%s listed before %s", prev, w);
    prev = w;
  }
  text_free(&b);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_options) {
  FzContext *ctx = pipeline_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzPass *p = fzPassCreate(ctx, &kOptsPass);
  ck_assert_ptr_nonnull(p);
  ck_assert(!fzPassGetBoolOption(p, "flag"));
  ck_assert_int_eq(fzPassGetIntOption(p, "level"), 2);
  ck_assert(fzPassGetFloatOption(p, "ratio") == 0.5);
  ck_assert(fzStringRefEqual(fzPassGetStringOption(p, "mode"), FZ_STR("fast")));
  ck_assert_uint_eq(fzPassGetStringOption(p, "label").length, 0);
  ck_assert(fzPassSetOption(p, FZ_STR("level"), FZ_STR("7")));
  ck_assert_int_eq(fzPassGetIntOption(p, "level"), 7);
  ck_assert(!fzPassSetOption(p, FZ_STR("level"), FZ_STR("12")));
  ck_assert_diag(&log, "expected an integer in [0, 9]");
  ck_assert_int_eq(fzPassGetIntOption(p, "level"), 7);
  ck_assert(!fzPassSetOption(p, FZ_STR("mode"), FZ_STR("medium")));
  ck_assert_diag(&log, "expected one of 'fast', 'slow'");
  ck_assert(!fzPassSetOption(p, FZ_STR("flag"), FZ_STR("yes")));
  ck_assert(!fzPassSetOption(p, FZ_STR("ratio"), FZ_STR("x")));
  ck_assert(!fzPassSetOption(p, FZ_STR("nope"), FZ_STR("1")));
  ck_assert_diag(&log, "has no option 'nope'");
  /* Wrong kind: the zero value. */
  ck_assert_int_eq(fzPassGetIntOption(p, "flag"), 0);
  ck_assert(fzPassSetOption(p, FZ_STR("label"), FZ_STR("two words")));
  TextBuf b = {0};
  fzPassPrint(p, text_cb, &b);
  ck_assert_str_eq(b.data, "test-opts{flag=false level=7 ratio=0.5 "
                           "mode=fast label=\"two words\"}");
  text_free(&b);
  fzPassDestroy(p);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_parse_valid) {
  FzContext *ctx = pipeline_context();
  char *s = parse_print(ctx, "builtin.module(func.func(cse, dce), cse)");
  ck_assert_str_eq(s, "builtin.module(func.func(cse,dce),cse)");
  free(s);
  /* Without the outer anchor: the elements go into the manager. */
  s = parse_print(ctx, " func.func( cse ) , symbol-dce ");
  ck_assert_str_eq(s, "builtin.module(func.func(cse),symbol-dce)");
  free(s);
  s = parse_print(ctx, "");
  ck_assert_str_eq(s, "builtin.module()");
  free(s);
  s = parse_print(ctx, "builtin.module()");
  ck_assert_str_eq(s, "builtin.module()");
  free(s);
  s = parse_print(ctx, "func.func(),any(cse)");
  ck_assert_str_eq(s, "builtin.module(func.func(),any(cse))");
  free(s);
  s = parse_print(ctx, "test-opts{flag level=3 ratio=0.25 mode=slow "
                       "label='a b}c'}");
  ck_assert_str_eq(s, "builtin.module(test-opts{flag=true level=3 "
                      "ratio=0.25 mode=slow label=\"a b}c\"})");
  free(s);
  s = parse_print(ctx, "test-opts{label={x=1 y={2}}}");
  ck_assert_str_eq(s, "builtin.module(test-opts{flag=false level=2 "
                      "ratio=0.5 mode=fast label=\"x=1 y={2}\"})");
  free(s);
  s = parse_print(ctx, "canonicalize{max-iterations=3 top-down=false}");
  ck_assert_str_eq(s, "builtin.module(canonicalize{max-iterations=3 "
                      "max-num-rewrites=-1 top-down=false "
                      "region-simplify=true fold=true})");
  free(s);
  /* Named pipelines expand in place, nested ones too. */
  s = parse_print(ctx, "module-cleanup");
  ck_assert_str_eq(s, "builtin.module(func.func(canonicalize{"
                      "max-iterations=10 max-num-rewrites=-1 top-down=true "
                      "region-simplify=true fold=true},cse,dce),"
                      "symbol-dce)");
  free(s);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_print_round_trip) {
  FzContext *ctx = pipeline_context();
  const char *texts[] = {
      "builtin.module(func.func(test-func,test-opts{label=\"q\\\"uote\"}),"
      "cse)",
      "builtin.module(any(canonicalize{max-iterations=1}),dce)",
  };
  for (size_t i = 0; i < 2; ++i) {
    char *a = parse_print(ctx, texts[i]);
    ck_assert_ptr_nonnull(a);
    char *b = parse_print(ctx, a);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
  }
  fzContextDestroy(ctx);
}
END_TEST

/* A malformed pipeline: an error at <pipeline>:1:col containing msg. */
static void check_bad(const char *text, unsigned col, const char *msg) {
  FzContext *ctx = pipeline_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert(fzPassManagerParsePipeline(pm, FZ_STR("cse")));
  ck_assert_msg(!fzPassManagerParsePipeline(pm, fzStringRefFromCString(text)),
                "'%s' parsed", text);
  ck_assert_uint_eq(log.numErrors, 1);
  ck_assert_diag_at(&log, msg, "<pipeline>", 1, col);
  /* The manager is unchanged. */
  ck_assert_uint_eq(fzPassManagerGetNumEntries(pm), 1);
  fzPassManagerDestroy(pm);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}

START_TEST(test_parse_malformed) {
  check_bad("cse,", 5, "expected a pass or pipeline name, found the end");
  check_bad("cse,,dce", 5, "expected a pass or pipeline name, found ','");
  check_bad("{cse}", 1, "expected a pass or pipeline name, found '{'");
  check_bad("cnonicalize", 1, "did you mean 'canonicalize'?");
  check_bad("frobnicate", 1, "unknown pass or pipeline 'frobnicate'");
  check_bad("builtin.module(func.func(cse)", 15, "missing ')'");
  check_bad("func.func(cse))", 15, "expected ',' or the end of the pipeline");
  check_bad("func.func(cse dce)", 15, "expected ',' or the end");
  check_bad("cse(dce)", 1, "'cse' is a pass, not an op name");
  check_bad("foo(cse)", 1, "expected an op name ('dialect.op') or 'any'");
  check_bad("test-func", 1, "pass 'test-func' runs on 'func.func' ops, not "
                            "on 'builtin.module'");
  check_bad("func.func(symbol-dce,test-func),test-func", 33, "runs on");
  check_bad("canonicalize{max-iterations=abc}", 29,
            "invalid value 'abc' for option 'max-iterations' of pass "
            "'canonicalize': expected an integer");
  check_bad("canonicalize{max-iterations=-5}", 29, "expected an integer in");
  check_bad("canonicalize{bogus=1}", 14, "pass 'canonicalize' has no option "
                                         "'bogus' (its options: ");
  check_bad("cse{x=1}", 5, "it takes no options");
  check_bad("canonicalize{max-iterations}", 28,
            "option 'max-iterations' of pass 'canonicalize' needs a value");
  check_bad("canonicalize{max-iterations=3", 13, "missing '}'");
  check_bad("test-opts{label=\"abc}", 17, "unterminated string");
  check_bad("test-opts{label={a{bc}", 17, "unbalanced '{'");
  check_bad("test-opts{mode=medium}", 16, "expected one of 'fast', 'slow'");
  check_bad("test-opts{=3}", 11, "expected an option name, found '='");
  check_bad("cleanup{x=1}", 8, "pipeline 'cleanup' takes no options");
}
END_TEST

/* Nested managers recurse in the parser (and when the manager runs,
 * prints and is destroyed): 25,000 levels of any(...) overflowed the
 * stack (a segfault in fuse-opt --pass-pipeline). They may nest as deep
 * as IR (the context's nesting limit), no deeper. */
START_TEST(test_parse_nesting_limit) {
  FzContext *ctx = pipeline_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  const size_t levels = 25000;
  char *text = malloc(levels * 5 + 8);
  ck_assert_ptr_nonnull(text);
  size_t n = 0;
  for (size_t i = 0; i < levels; ++i) {
    memcpy(text + n, "any(", 4);
    n += 4;
  }
  memcpy(text + n, "cse", 3);
  n += 3;
  memset(text + n, ')', levels);
  n += levels;
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert(!fzPassManagerParsePipeline(pm, (FzStringRef){text, n}));
  ck_assert_diag_at(&log, "pass pipelines nest too deeply (limit 256)",
                    "<pipeline>", 1, 1 + 4 * 256);
  ck_assert_uint_eq(fzPassManagerGetNumEntries(pm), 0);
  /* At the limit it parses (and prints back). */
  diag_log_clear(&log);
  size_t ok = 4 * 256 + 3 + 256;
  memcpy(text, text + 4 * (levels - 256), 4 * 256);
  memcpy(text + 4 * 256, "cse", 3);
  memset(text + 4 * 256 + 3, ')', 256);
  ck_assert(fzPassManagerParsePipeline(pm, (FzStringRef){text, ok}));
  ck_assert_uint_eq(log.numErrors, 0);
  free(text);
  fzPassManagerDestroy(pm);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_parse_malformed_multiline_and_named) {
  FzContext *ctx = pipeline_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert(fzContextRegisterPassPipeline(ctx, "loop-a", "", "cse,loop-b"));
  ck_assert(fzContextRegisterPassPipeline(ctx, "loop-b", "", "loop-a"));
  ck_assert(fzContextRegisterPassPipeline(ctx, "broken", "", "cse,nope"));
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert(!fzPassManagerParsePipeline(pm, FZ_STR("cse,\n  dce, loop-a")));
  ck_assert_diag_at(&log, "pipeline 'loop-a' expands into itself",
                    "<pipeline>", 2, 8);
  diag_log_clear(&log);
  ck_assert(!fzPassManagerParsePipeline(pm, FZ_STR("dce,broken")));
  ck_assert_diag_at(&log, "in pipeline 'broken' (at offset 4 of its text): "
                          "unknown pass or pipeline 'nope'",
                    "<pipeline>", 1, 5);
  ck_assert_uint_eq(fzPassManagerGetNumEntries(pm), 0);
  fzPassManagerDestroy(pm);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/* The default printer shows the pipeline text and a caret. */
static bool render_handler(const FzDiagnostic *d, void *ud) {
  fzDiagnosticPrint(d, true, text_cb, ud);
  return true;
}

START_TEST(test_error_caret) {
  FzContext *ctx = pipeline_context();
  TextBuf b = {0};
  FzDiagHandlerId id = fzContextPushDiagHandler(ctx, render_handler, &b);
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert(!fzPassManagerParsePipeline(
      pm, FZ_STR("builtin.module(func.func(cse,canonicalise))")));
  ck_assert_ptr_nonnull(strstr(
      b.data, "<pipeline>:1:30: error: unknown pass or pipeline "
              "'canonicalise'; did you mean 'canonicalize'?\n"
              "builtin.module(func.func(cse,canonicalise))\n"
              "                             ^"));
  fzPassManagerDestroy(pm);
  fzContextPopDiagHandler(ctx, id);
  text_free(&b);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_add_pass_nested) {
  FzContext *ctx = pipeline_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert_str_eq(fzPassManagerGetAnchor(pm), "builtin.module");
  ck_assert(fzPassManagerAddPassNested(pm, fzPassCreate(ctx, &kFuncPass)));
  ck_assert(fzPassManagerAddPassNested(pm, fzPassCreate(ctx, &kFuncPass)));
  ck_assert(fzPassManagerAddPassNested(pm, fzPassCreate(ctx, &kOptsPass)));
  ck_assert(fzPassManagerAddPassNested(pm, fzPassCreate(ctx, &kFuncPass)));
  char *s = pipeline_str(pm);
  ck_assert_str_eq(s, "builtin.module(func.func(test-func,test-func),"
                      "test-opts{flag=false level=2 ratio=0.5 mode=fast "
                      "label=\"\"},func.func(test-func))");
  free(s);
  ck_assert(!fzPassManagerAddPass(pm, fzPassCreate(ctx, &kFuncPass)));
  ck_assert_diag(&log, "cannot be added to a pass manager on "
                       "'builtin.module'");
  FzPassManager *any = fzPassManagerCreate(ctx, NULL);
  ck_assert_str_eq(fzPassManagerGetAnchor(any), "any");
  ck_assert(fzPassManagerAddPass(any, fzPassCreate(ctx, &kOptsPass)));
  fzPassManagerDestroy(any);
  fzPassManagerDestroy(pm);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/* Context extensions: replaced values are destroyed at once, the rest
 * when the context dies, newest first. */
static char gDestroyed[16];
static void ext_destroy(FzContext *ctx, void *value) {
  (void)ctx;
  size_t n = strlen(gDestroyed);
  gDestroyed[n] = *(const char *)value;
  gDestroyed[n + 1] = 0;
}

START_TEST(test_context_extensions) {
  static const char keyA = 0, keyB = 0;
  static const char a1 = '1', a2 = '2', b = 'b';
  gDestroyed[0] = 0;
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_null(fzContextGetExtension(ctx, &keyA));
  ck_assert(fzContextSetExtension(ctx, &keyA, (void *)&a1, ext_destroy));
  ck_assert(fzContextSetExtension(ctx, &keyB, (void *)&b, ext_destroy));
  ck_assert_ptr_eq(fzContextGetExtension(ctx, &keyA), &a1);
  ck_assert(fzContextSetExtension(ctx, &keyA, (void *)&a2, ext_destroy));
  ck_assert_str_eq(gDestroyed, "1");
  ck_assert_ptr_eq(fzContextGetExtension(ctx, &keyA), &a2);
  fzContextDestroy(ctx);
  ck_assert_str_eq(gDestroyed, "1b2");
}
END_TEST

static Suite *pipeline_suite(void) {
  Suite *s = suite_create("pass_pipeline");
  TCase *tc = tcase_create("pipeline");
  tcase_add_test(tc, test_registry);
  tcase_add_test(tc, test_registry_sorted);
  tcase_add_test(tc, test_options);
  tcase_add_test(tc, test_parse_valid);
  tcase_add_test(tc, test_print_round_trip);
  tcase_add_test(tc, test_parse_malformed);
  tcase_add_test(tc, test_parse_malformed_multiline_and_named);
  tcase_add_test(tc, test_parse_nesting_limit);
  tcase_add_test(tc, test_error_caret);
  tcase_add_test(tc, test_add_pass_nested);
  tcase_add_test(tc, test_context_extensions);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(pipeline_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* tests/unit/test_pass_transforms.c - the generic passes on the tp test
 * dialect: cse (purity, commutativity, scopes, isolation, regions), dce
 * (chains, effects, block arguments), symbol-dce (visibility,
 * transitive references), canonicalize (options, statistics, reported
 * non-convergence).
 */
#include "test_pass_dialect.h"

/* Runs `pipeline` on the module parsed from text; returns the module. */
static FzOp *run_text(FzContext *ctx, const char *text, const char *pipeline,
                      bool expectOk, FzPassManager **pmOut) {
  FzOp *m = tp_parse(ctx, text);
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert(fzPassManagerParsePipeline(pm, fzStringRefFromCString(pipeline)));
  ck_assert(fzPassManagerRun(pm, m) == expectOk);
  if (pmOut)
    *pmOut = pm;
  else
    fzPassManagerDestroy(pm);
  return m;
}

START_TEST(test_cse_basic) {
  FzContext *ctx = tp_context();
  FzPassManager *pm;
  FzOp *m = run_text(ctx,
      "func.func @f(%x: i32, %y: i32) {\n"
      "  %a = \"tp.add\"(%x, %y) : (i32, i32) -> i32\n"
      "  %b = \"tp.add\"(%y, %x) : (i32, i32) -> i32\n"   /* commutative */
      "  %c = \"tp.neg\"(%x) : (i32) -> i32\n"
      "  %d = \"tp.neg\"(%x) {tag} : (i32) -> i32\n"       /* other attrs */
      "  %e = \"tp.effect\"(%x) : (i32) -> i32\n"
      "  %f = \"tp.effect\"(%x) : (i32) -> i32\n"          /* not pure */
      "  %g = \"tp.neg\"(%x) : (i32) -> i32\n"
      "  \"tp.effect\"(%a, %b, %c, %d, %e, %f, %g) : (i32, i32, i32, i32, "
      "i32, i32, i32) -> ()\n"
      "  return\n"
      "}\n",
      "func.func(cse)", true, &pm);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 1);
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 2);
  ck_assert_uint_eq(tp_count(m, "tp.effect"), 3);
  TextBuf b = {0};
  fzPassManagerPrintStatistics(pm, text_cb, &b);
  ck_assert_ptr_nonnull(strstr(b.data, "(S) 2 num-cse'd"));
  text_free(&b);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_cse_scopes) {
  FzContext *ctx = tp_context();
  FzOp *m = run_text(ctx,
      "func.func @f(%x: i32) {\n"
      "  %w = \"tp.wrap\"() ({\n"
      "    %a = \"tp.neg\"(%x) : (i32) -> i32\n"   /* first: kept */
      "    \"tp.yield\"(%a) : (i32) -> ()\n"
      "  }) : () -> i32\n"
      "  %b = \"tp.neg\"(%x) : (i32) -> i32\n"     /* a is not visible */
      "  %v = \"tp.wrap\"() ({\n"
      "    %c = \"tp.neg\"(%x) : (i32) -> i32\n"   /* b visible: CSE'd */
      "    \"tp.yield\"(%c) : (i32) -> ()\n"
      "  }) : () -> i32\n"
      "  %i = \"tp.iso\"() ({\n"
      "    %k = \"tp.const\"() <{value = 1 : i32}> : () -> i32\n"
      "    %k2 = \"tp.const\"() <{value = 1 : i32}> : () -> i32\n"
      "    %s = \"tp.add\"(%k, %k2) : (i32, i32) -> i32\n"
      "    \"tp.yield\"(%s) : (i32) -> ()\n"
      "  }) : () -> i32\n"
      "  %k3 = \"tp.const\"() <{value = 1 : i32}> : () -> i32\n"
      "  \"tp.effect\"(%w, %b, %v, %i, %k3) : (i32, i32, i32, i32, i32) -> ()\n"
      "  return\n"
      "}\n",
      "func.func(cse)", true, NULL);
  ck_assert(fzOpVerify(m));
  /* Wraps have regions: never CSE'd themselves. */
  ck_assert_uint_eq(tp_count(m, "tp.wrap"), 2);
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 2);
  /* One 1 inside the isolated region, one outside. */
  ck_assert_uint_eq(tp_count(m, "tp.const"), 2);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_cse_many) {
  /* Enough ops to grow the table several times, with nested scopes. */
  FzContext *ctx = tp_context();
  size_t cap = 1 << 20, len = 0;
  char *text = malloc(cap);
  len += (size_t)sprintf(text, "func.func @f(%%x: i32) {\n");
  for (int i = 0; i < 2000; ++i)
    len += (size_t)sprintf(text + len,
                           "  %%a%d = \"tp.const\"() <{value = %d : i32}> : "
                           "() -> i32\n  %%b%d = \"tp.add\"(%%a%d, %%x) : "
                           "(i32, i32) -> i32\n",
                           i, i % 100, i, i);
  len += (size_t)sprintf(text + len, "  \"tp.effect\"(");
  for (int i = 0; i < 2000; ++i)
    len += (size_t)sprintf(text + len, "%s%%b%d", i ? ", " : "", i);
  len += (size_t)sprintf(text + len, ") : (");
  for (int i = 0; i < 2000; ++i)
    len += (size_t)sprintf(text + len, "%si32", i ? ", " : "");
  sprintf(text + len, ") -> ()\n  return\n}\n");
  FzOp *m = run_text(ctx, text, "func.func(cse)", true, NULL);
  free(text);
  ck_assert_uint_eq(tp_count(m, "tp.const"), 100);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 100);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_dce) {
  FzContext *ctx = tp_context();
  FzPassManager *pm;
  FzOp *m = run_text(ctx,
      "func.func @f(%x: i32) {\n"
      "  %a = \"tp.neg\"(%x) : (i32) -> i32\n"
      "  %b = \"tp.add\"(%a, %a) : (i32, i32) -> i32\n"
      "  %c = \"tp.mul\"(%b, %x) : (i32, i32) -> i32\n"   /* dead chain */
      "  %e = \"tp.effect\"(%x) : (i32) -> i32\n"        /* kept */
      "  %w = \"tp.wrap\"() ({\n"                        /* dead, pure body */
      "    %d = \"tp.neg\"(%x) : (i32) -> i32\n"
      "    \"tp.yield\"(%d) : (i32) -> ()\n"
      "  }) : () -> i32\n"
      "  \"tp.wrap\"() ({\n"                        /* effect inside */
      "    \"tp.effect\"() : () -> ()\n"
      "    \"tp.yield\"() : () -> ()\n"
      "  }) : () -> ()\n"
      "  %i = \"tp.iso\"() ({\n"
      "    %k = \"tp.const\"() <{value = 1 : i32}> : () -> i32\n"
      "    \"tp.yield\"() : () -> ()\n"
      "  ^bb1(%u: i32, %used: i32, %z: i32):\n"
      "    \"tp.effect\"(%used) : (i32) -> ()\n"
      "    \"tp.yield\"() : () -> ()\n"
      "  }) : () -> i32\n"
      "  return\n"
      "}\n",
      "dce", true, &pm);
  ck_assert(fzOpVerify(m));
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.mul"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.wrap"), 1);
  ck_assert_uint_eq(tp_count(m, "tp.const"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.effect"), 3);
  TextBuf b = {0};
  fzPassManagerPrintStatistics(pm, text_cb, &b);
  ck_assert_ptr_nonnull(strstr(b.data, "(S) 5 num-erased-ops"));
  ck_assert_ptr_nonnull(strstr(b.data, "(S) 2 num-erased-args"));
  text_free(&b);
  char *out = tp_print(m);
  ck_assert_ptr_nonnull(strstr(out, "^bb1(%2: i32):"));
  free(out);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_symbol_dce) {
  FzContext *ctx = tp_context();
  FzPassManager *pm;
  FzOp *m = run_text(ctx,
      "func.func @public(%x: i32) -> i32 {\n"
      "  %0 = func.call @used(%x) : (i32) -> i32\n"
      "  return %0 : i32\n"
      "}\n"
      "func.func private @used(%x: i32) -> i32 {\n"
      "  %0 = func.call @chain(%x) : (i32) -> i32\n"
      "  return %0 : i32\n"
      "}\n"
      "func.func private @chain(%x: i32) -> i32 {\n"
      "  return %x : i32\n"
      "}\n"
      "func.func private @dead(%x: i32) -> i32 {\n"
      "  %0 = func.call @dead2(%x) : (i32) -> i32\n"
      "  return %0 : i32\n"
      "}\n"
      "func.func private @dead2(%x: i32) -> i32 {\n"
      "  %0 = func.call @dead(%x) : (i32) -> i32\n"
      "  return %0 : i32\n"
      "}\n"
      "func.func private @byattr() {\n"
      "  return\n"
      "}\n"
      "\"tp.effect\"() {refs = [{f = @byattr}]} : () -> ()\n",
      "symbol-dce", true, &pm);
  ck_assert(fzOpVerify(m));
  FzOp *mod = m;
  ck_assert_ptr_nonnull(fzSymbolTableLookupIn(mod, FZ_STR("public")));
  ck_assert_ptr_nonnull(fzSymbolTableLookupIn(mod, FZ_STR("used")));
  ck_assert_ptr_nonnull(fzSymbolTableLookupIn(mod, FZ_STR("chain")));
  ck_assert_ptr_nonnull(fzSymbolTableLookupIn(mod, FZ_STR("byattr")));
  ck_assert_ptr_null(fzSymbolTableLookupIn(mod, FZ_STR("dead")));
  ck_assert_ptr_null(fzSymbolTableLookupIn(mod, FZ_STR("dead2")));
  TextBuf b = {0};
  fzPassManagerPrintStatistics(pm, text_cb, &b);
  ck_assert_ptr_nonnull(strstr(b.data, "(S) 2 num-dce'd"));
  text_free(&b);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  /* On a function: an error. */
  DiagLog log;
  diag_log_begin(&log, ctx);
  m = run_text(ctx, "func.func @f() {\n  return\n}\n",
               "func.func(symbol-dce)", false, NULL);
  ck_assert_diag(&log, "symbol-dce runs on symbol-table ops only");
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_canonicalize_pass) {
  FzContext *ctx = tp_context();
  FzPassManager *pm;
  FzOp *m = run_text(ctx,
      "func.func @f(%x: i32) -> i32 {\n"
      "  %a = \"tp.const\"() <{value = 4 : i32}> : () -> i32\n"
      "  %b = \"tp.const\"() <{value = 5 : i32}> : () -> i32\n"
      "  %c = \"tp.mul\"(%a, %b) : (i32, i32) -> i32\n"
      "  %d = \"tp.neg\"(%x) : (i32) -> i32\n"
      "  %e = \"tp.neg\"(%d) : (i32) -> i32\n"
      "  %f = \"tp.add\"(%e, %c) : (i32, i32) -> i32\n"
      "  return %f : i32\n"
      "}\n",
      "func.func(canonicalize)", true, &pm);
  ck_assert_uint_eq(tp_count(m, "tp.const"), 1);
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 1);
  TextBuf b = {0};
  fzPassManagerPrintStatistics(pm, text_cb, &b);
  ck_assert_ptr_nonnull(strstr(b.data, "Canonicalizer\n"));
  ck_assert_ptr_nonnull(strstr(b.data, "(S) 1 num-folds"));
  ck_assert_ptr_nonnull(strstr(b.data, "(S) 1 num-rewrites"));
  ck_assert_ptr_nonnull(strstr(b.data, "(S) 2 num-iterations"));
  text_free(&b);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  /* fold=false keeps the mul; patterns still apply. */
  m = run_text(ctx,
      "func.func @f(%x: i32) -> i32 {\n"
      "  %a = \"tp.const\"() <{value = 4 : i32}> : () -> i32\n"
      "  %c = \"tp.mul\"(%a, %a) : (i32, i32) -> i32\n"
      "  return %c : i32\n"
      "}\n",
      "canonicalize{fold=false}", true, NULL);
  ck_assert_uint_eq(tp_count(m, "tp.mul"), 1);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_canonicalize_non_convergence) {
  FzContext *ctx = tp_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = run_text(ctx,
      "func.func @f() -> i32 {\n"
      "  %0 = \"tp.spin\"() : () -> i32\n"
      "  return %0 : i32\n"
      "}\n"
      "func.func @g() -> i32 {\n"
      "  %0 = \"tp.spin\"() : () -> i32\n"
      "  return %0 : i32\n"
      "}\n",
      "canonicalize{max-num-rewrites=20}", false, NULL);
  /* Reported at the function holding the rewrites, even when the pass
   * runs on the module. */
  ck_assert_diag_at(&log, "did not converge within 20 rewrites", "test.fuse",
                    1, 1);
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

static Suite *transforms_suite(void) {
  Suite *s = suite_create("pass_transforms");
  TCase *tc = tcase_create("transforms");
  tcase_add_test(tc, test_cse_basic);
  tcase_add_test(tc, test_cse_scopes);
  tcase_add_test(tc, test_cse_many);
  tcase_add_test(tc, test_dce);
  tcase_add_test(tc, test_symbol_dce);
  tcase_add_test(tc, test_canonicalize_pass);
  tcase_add_test(tc, test_canonicalize_non_convergence);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(transforms_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

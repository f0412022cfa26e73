/* tests/unit/test_greedy.c - the greedy pattern driver and the rewriter:
 * folding and constant materialization, patterns by benefit, convergence
 * in one drain (worklist exactness, both seeding orders), dead-op
 * erasure, constant uniquing, non-convergence reports (iterations,
 * rewrites, pattern cycles), listener notifications, and allocation
 * failures.
 */
#include "test_pass_dialect.h"

static FzOp *g_func;

static bool run_greedy(FzContext *ctx, FzOp *module, const FzGreedyConfig *cfg,
                       FzGreedyStats *st) {
  FzPatternSet *set = fzPatternSetCreate(ctx);
  ck_assert_ptr_nonnull(set);
  ck_assert(fzPatternSetAddCanonicalizationPatterns(set));
  g_func = tp_first_func(module);
  bool ok = fzApplyPatternsGreedily(g_func, set, cfg, st);
  fzPatternSetDestroy(set);
  return ok;
}

START_TEST(test_fold_constants) {
  FzContext *ctx = tp_context();
  FzOp *m = tp_parse(ctx,
      "func.func @f() -> i32 {\n"
      "  %a = \"tp.const\"() <{value = 2 : i32}> : () -> i32\n"
      "  %b = \"tp.const\"() <{value = 3 : i32}> : () -> i32\n"
      "  %c = \"tp.add\"(%a, %b) : (i32, i32) -> i32\n"
      "  %d = \"tp.mul\"(%c, %c) : (i32, i32) -> i32\n"
      "  \"tp.effect\"(%d) : (i32) -> ()\n"
      "  return %d : i32\n"
      "}\n");
  FzGreedyStats st;
  ck_assert(run_greedy(ctx, m, NULL, &st));
  ck_assert(st.converged);
  ck_assert(st.changed);
  ck_assert_uint_eq(st.folds, 2);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.mul"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.const"), 1);
  char *text = tp_print(m);
  ck_assert_ptr_nonnull(strstr(text, "value = 25 : i32"));
  free(text);
  ck_assert(fzOpVerify(m));
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_fold_to_operand_and_pattern) {
  FzContext *ctx = tp_context();
  FzOp *m = tp_parse(ctx,
      "func.func @f(%x: i32) -> i32 {\n"
      "  %z = \"tp.const\"() <{value = 0 : i32}> : () -> i32\n"
      "  %a = \"tp.add\"(%x, %z) : (i32, i32) -> i32\n"
      "  %n1 = \"tp.neg\"(%a) : (i32) -> i32\n"
      "  %n2 = \"tp.neg\"(%n1) : (i32) -> i32\n"
      "  return %n2 : i32\n"
      "}\n");
  FzGreedyStats st;
  ck_assert(run_greedy(ctx, m, NULL, &st));
  ck_assert_uint_eq(st.folds, 1);
  ck_assert_uint_eq(st.rewrites, 1);
  /* Everything is gone: return %x; the zero constant died too. */
  ck_assert_uint_eq(tp_count(g_func, NULL), 2);
  FzOp *ret = fzBlockGetLastOp(fzRegionGetFirstBlock(fzOpGetRegion(g_func, 0)));
  ck_assert(fzValueIsBlockArgument(fzOpGetOperand(ret, 0)));
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* A chain of 40 neg pairs around x collapses in one drain, whichever the
 * seeding order: the worklist is exact. */
static void check_chain(bool topDown) {
  FzContext *ctx = tp_context();
  char *text = malloc(16384);
  size_t len = (size_t)sprintf(text, "func.func @f(%%x: i32) -> i32 {\n");
  const char *prev = "%x";
  char names[2][16];
  for (int i = 0; i < 80; ++i) {
    sprintf(names[i % 2], "%%n%d", i);
    len += (size_t)sprintf(text + len,
                           "  %s = \"tp.neg\"(%s) : (i32) -> i32\n",
                           names[i % 2], prev);
    prev = names[i % 2];
  }
  sprintf(text + len, "  return %s : i32\n}\n", prev);
  FzOp *m = tp_parse(ctx, text);
  free(text);
  FzGreedyConfig cfg;
  fzGreedyConfigInit(&cfg);
  cfg.topDown = topDown;
  cfg.maxIterations = 2; /* one drain + one confirming sweep */
  FzGreedyStats st;
  ck_assert(run_greedy(ctx, m, &cfg, &st));
  ck_assert(st.converged);
  ck_assert_uint_eq(st.iterations, 2);
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 0);
  ck_assert(fzOpVerify(m));
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}

START_TEST(test_exact_worklist_top_down) { check_chain(true); }
END_TEST

START_TEST(test_exact_worklist_bottom_up) { check_chain(false); }
END_TEST

/* Folding a long chain of adds of constants bottom-up needs the users
 * of each replaced value to be revisited. */
START_TEST(test_exact_worklist_fold_chain) {
  FzContext *ctx = tp_context();
  char *text = malloc(32768);
  size_t len = (size_t)sprintf(
      text, "func.func @f() -> i32 {\n"
            "  %%c1 = \"tp.const\"() <{value = 1 : i32}> : () -> i32\n"
            "  %%s0 = \"tp.add\"(%%c1, %%c1) : (i32, i32) -> i32\n");
  for (int i = 1; i < 100; ++i)
    len += (size_t)sprintf(text + len,
                           "  %%s%d = \"tp.add\"(%%s%d, %%c1) : (i32, i32) "
                           "-> i32\n",
                           i, i - 1);
  sprintf(text + len, "  return %%s99 : i32\n}\n");
  FzOp *m = tp_parse(ctx, text);
  free(text);
  FzGreedyConfig cfg;
  fzGreedyConfigInit(&cfg);
  cfg.topDown = false;
  cfg.maxIterations = 2;
  FzGreedyStats st;
  ck_assert(run_greedy(ctx, m, &cfg, &st));
  ck_assert_uint_eq(st.iterations, 2);
  ck_assert_uint_eq(st.folds, 100);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.const"), 1);
  char *out = tp_print(m);
  ck_assert_ptr_nonnull(strstr(out, "value = 101 : i32"));
  free(out);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_dead_ops_and_effects) {
  FzContext *ctx = tp_context();
  FzOp *m = tp_parse(ctx,
      "func.func @f(%x: i32) {\n"
      "  %a = \"tp.neg\"(%x) : (i32) -> i32\n"
      "  %b = \"tp.add\"(%a, %x) : (i32, i32) -> i32\n"
      "  %c = \"tp.effect\"(%b) : (i32) -> i32\n"
      "  %d = \"tp.neg\"(%x) : (i32) -> i32\n"
      "  %e = \"tp.mul\"(%d, %d) : (i32, i32) -> i32\n"
      "  return\n"
      "}\n");
  FzGreedyStats st;
  ck_assert(run_greedy(ctx, m, NULL, &st));
  /* The effect and its operands stay; the dead pure chain goes. */
  ck_assert_uint_eq(tp_count(m, "tp.effect"), 1);
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 1);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 1);
  ck_assert_uint_eq(tp_count(m, "tp.mul"), 0);
  ck_assert_uint_eq(st.erased, 2);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_constant_uniquing_and_hoisting) {
  FzContext *ctx = tp_context();
  FzOp *m = tp_parse(ctx,
      "func.func @f(%x: i32) {\n"
      "  %a = \"tp.const\"() <{value = 7 : i32}> : () -> i32\n"
      "  \"tp.effect\"(%a) : (i32) -> ()\n"
      "  %b = \"tp.const\"() <{value = 7 : i32}> : () -> i32\n"
      "  \"tp.effect\"(%b) : (i32) -> ()\n"
      "  %w = \"tp.wrap\"() ({\n"
      "    %c = \"tp.const\"() <{value = 7 : i32}> : () -> i32\n"
      "    %d = \"tp.const\"() <{value = 5 : i32}> : () -> i32\n"
      "    %e = \"tp.add\"(%c, %d) : (i32, i32) -> i32\n"
      "    \"tp.yield\"(%e) : (i32) -> ()\n"
      "  }) : () -> i32\n"
      "  \"tp.effect\"(%w) : (i32) -> ()\n"
      "  %i = \"tp.iso\"() ({\n"
      "    %f = \"tp.const\"() <{value = 7 : i32}> : () -> i32\n"
      "    \"tp.yield\"(%f) : (i32) -> ()\n"
      "  }) : () -> i32\n"
      "  \"tp.effect\"(%i) : (i32) -> ()\n"
      "  return\n"
      "}\n");
  FzGreedyStats st;
  ck_assert(run_greedy(ctx, m, NULL, &st));
  ck_assert(fzOpVerify(m));
  /* One 7 and one 12 in the function's entry block (hoisted out of the
   * wrap region), one 7 kept inside the isolated region. */
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(g_func, 0));
  size_t inEntry = 0;
  for (FzOp *o = fzBlockGetFirstOp(entry); o; o = fzOpGetNextInBlock(o))
    if (fzOpHasTrait(o, FZ_TRAIT_CONSTANT_LIKE))
      ++inEntry;
  ck_assert_uint_eq(inEntry, 2);
  ck_assert(fzOpHasTrait(fzBlockGetFirstOp(entry), FZ_TRAIT_CONSTANT_LIKE));
  ck_assert_uint_eq(tp_count(m, "tp.const"), 3);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 0);
  /* A second run changes nothing. */
  ck_assert(run_greedy(ctx, m, NULL, &st));
  ck_assert(!st.changed);
  ck_assert_uint_eq(st.iterations, 1);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_non_convergence_rewrites) {
  FzContext *ctx = tp_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx,
      "func.func @f() -> i32 {\n"
      "  %a = \"tp.spin\"() : () -> i32\n"
      "  return %a : i32\n"
      "}\n");
  FzGreedyConfig cfg;
  fzGreedyConfigInit(&cfg);
  cfg.maxRewrites = 50;
  FzGreedyStats st;
  ck_assert(!run_greedy(ctx, m, &cfg, &st));
  ck_assert(!st.converged);
  ck_assert_diag_at(&log, "did not converge within 50 rewrites", "test.fuse",
                    1, 1);
  const DiagRecord *r = diag_log_find(&log, "did not converge");
  ck_assert_uint_eq(r->numNotes, 1);
  ck_assert_ptr_nonnull(strstr(r->note, "'tp.spin' op by pattern 'tp-spin'"));
  ck_assert_uint_eq(r->noteLine, 2);
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_non_convergence_default_limit) {
  FzContext *ctx = tp_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx,
      "func.func @f() {\n"
      "  %a = \"tp.ping\"() : () -> i32\n"
      "  \"tp.effect\"(%a) : (i32) -> ()\n"
      "  return\n"
      "}\n");
  FzGreedyStats st;
  ck_assert(!run_greedy(ctx, m, NULL, &st));
  ck_assert_diag(&log, "did not converge within");
  ck_assert_diag(&log, "rewrites");
  ck_assert(fzOpVerify(m));
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* A pattern that changes the IR behind the rewriter's back is seen only
 * by the next sweep: the iteration limit catches it. */
static bool sneaky(FzOp *op, FzRewriter *rw, void *ud) {
  (void)rw;
  (void)ud;
  FzAttr *n = fzOpGetAttr(op, FZ_STR("n"));
  int64_t v = n ? fzIntegerAttrGetValue(n) : 0;
  return fzOpSetAttr(op, FZ_STR("n"), tp_int(fzOpGetContext(op), v + 1));
}

START_TEST(test_non_convergence_iterations) {
  FzContext *ctx = tp_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx,
      "func.func @f() {\n"
      "  \"tp.effect\"() : () -> ()\n"
      "  return\n"
      "}\n");
  FzPatternSet *set = fzPatternSetCreate(ctx);
  FzPattern p = {"tp.effect", 1, sneaky, NULL, "sneaky"};
  ck_assert(fzPatternSetAdd(set, &p));
  FzGreedyStats st;
  ck_assert(!fzApplyPatternsGreedily(tp_first_func(m), set, NULL, &st));
  ck_assert_uint_eq(st.iterations, 10);
  ck_assert_diag(&log, "did not converge within 10 iterations");
  /* Silenced: true, but not converged. */
  FzGreedyConfig cfg;
  fzGreedyConfigInit(&cfg);
  cfg.reportNonConvergence = false;
  cfg.maxIterations = 3;
  diag_log_clear(&log);
  ck_assert(fzApplyPatternsGreedily(tp_first_func(m), set, &cfg, &st));
  ck_assert(!st.converged);
  ck_assert_uint_eq(st.iterations, 3);
  ck_assert_uint_eq(log.count, 0);
  fzPatternSetDestroy(set);
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

static bool rename_to_mul(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  return tp_rename(op, rw, (void *)"tp.mul");
}
static bool rename_to_add(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  return tp_rename(op, rw, (void *)"tp.add");
}
static bool never(FzOp *op, FzRewriter *rw, void *ud) {
  (void)ud;
  int *calls = ud;
  ++*calls;
  return fzRewriterNotifyMatchFailure(rw, op, "never");
}

START_TEST(test_benefit_order_and_any_root) {
  FzContext *ctx = tp_context();
  FzOp *m = tp_parse(ctx,
      "func.func @f(%x: i32) {\n"
      "  %a = \"tp.pong\"(%x, %x) : (i32, i32) -> i32\n"
      "  \"tp.effect\"(%a) : (i32) -> ()\n"
      "  return\n"
      "}\n");
  FzPatternSet *set = fzPatternSetCreate(ctx);
  int calls = 0;
  FzPattern low = {"tp.pong", 1, rename_to_add, NULL, "low"};
  FzPattern high = {"tp.pong", 5, rename_to_mul, NULL, "high"};
  FzPattern any = {NULL, 0, never, &calls, "any"};
  ck_assert(fzPatternSetAdd(set, &low));
  ck_assert(fzPatternSetAdd(set, &high));
  ck_assert(fzPatternSetAdd(set, &any));
  ck_assert_uint_eq(fzPatternSetGetNumPatterns(set), 3);
  FzGreedyStats st;
  ck_assert(fzApplyPatternsGreedily(tp_first_func(m), set, NULL, &st));
  ck_assert_uint_eq(tp_count(m, "tp.mul"), 1);
  ck_assert_uint_eq(tp_count(m, "tp.add"), 0);
  /* The any-root pattern was tried on every op (several times). */
  ck_assert_int_gt(calls, 3);
  fzPatternSetDestroy(set);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_invalid_pattern_set) {
  FzContext *ctx = tp_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = tp_parse(ctx, "func.func @f() {\n  return\n}\n");
  FzPatternSet *set = fzPatternSetCreate(ctx);
  FzPattern bad = {"tp.add", 1, NULL, NULL, "bad"};
  ck_assert(!fzPatternSetAdd(set, &bad));
  ck_assert_diag(&log, "has no matchAndRewrite");
  ck_assert(!fzApplyPatternsGreedily(tp_first_func(m), set, NULL, NULL));
  ck_assert_diag(&log, "pattern set is incomplete");
  fzPatternSetDestroy(set);
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* The rewriter's notifications. */
typedef struct Notes {
  int inserted, modified, replaced, erased;
} Notes;
static void n_ins(FzOp *op, void *ud) { (void)op; ((Notes *)ud)->inserted++; }
static void n_mod(FzOp *op, void *ud) { (void)op; ((Notes *)ud)->modified++; }
static void n_rep(FzOp *op, FzValue *const *v, void *ud) {
  (void)op;
  (void)v;
  ((Notes *)ud)->replaced++;
}
static void n_era(FzOp *op, void *ud) { (void)op; ((Notes *)ud)->erased++; }

START_TEST(test_rewriter_notifications) {
  FzContext *ctx = tp_context();
  FzOp *m = tp_parse(ctx,
      "func.func @f(%x: i32) {\n"
      "  %a = \"tp.neg\"(%x) : (i32) -> i32\n"
      "  %b = \"tp.add\"(%a, %a) : (i32, i32) -> i32\n"
      "  %c = \"tp.mul\"(%a, %x) : (i32, i32) -> i32\n"
      "  %w = \"tp.wrap\"() ({\n"
      "    %d = \"tp.neg\"(%x) : (i32) -> i32\n"
      "    \"tp.yield\"(%d) : (i32) -> ()\n"
      "  }) : () -> i32\n"
      "  \"tp.effect\"(%b, %c, %w) : (i32, i32, i32) -> ()\n"
      "  return\n"
      "}\n");
  Notes n = {0, 0, 0, 0};
  FzRewriteListener l = {n_ins, n_mod, n_rep, n_era, &n};
  FzRewriter *rw = fzRewriterCreate(ctx, &l);
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(tp_first_func(m), 0));
  FzOp *a = fzBlockGetFirstOp(entry);
  FzValue *x = fzBlockGetArgument(entry, 0);
  /* Replace %a by %x: b and c are modified (b once), a erased. */
  fzRewriterReplaceOp(rw, a, &x);
  ck_assert_int_eq(n.replaced, 1);
  ck_assert_int_eq(n.modified, 2);
  ck_assert_int_eq(n.erased, 1);
  /* Create an op at the start of the block. */
  fzRewriterSetInsertionPointToStart(rw, entry);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("tp.const"), NULL);
  FzAttr *seven = tp_int(ctx, 7);
  fzOpStateAddProp(&st, FZ_STR("value"), seven);
  FzType *i32 = fzIntegerTypeGet(ctx, 32);
  fzOpStateAddResults(&st, 1, &i32);
  FzOp *c7 = fzRewriterCreateOp(rw, &st);
  ck_assert_ptr_nonnull(c7);
  ck_assert_int_eq(n.inserted, 1);
  ck_assert_ptr_eq(fzValueGetConstant(fzOpGetResult(c7, 0)), seven);
  ck_assert_ptr_null(fzValueGetConstant(x));
  /* Erasing the wrap (after dropping its use) notifies its 3 ops. */
  FzOp *effect = fzBlockGetTerminator(entry) ? NULL : NULL;
  (void)effect;
  FzOp *w = fzOpGetNextInBlock(fzOpGetNextInBlock(fzOpGetNextInBlock(c7)));
  ck_assert_str_eq(fzIdentGetString(fzOpGetName(w)).data, "tp.wrap");
  fzRewriterReplaceAllUsesWith(rw, fzOpGetResult(w, 0), x);
  ck_assert_int_eq(n.modified, 3);
  n.erased = 0;
  fzRewriterEraseOp(rw, w);
  ck_assert_int_eq(n.erased, 3);
  ck_assert(fzOpVerify(m));
  /* In-place modification and moves notify "modified". */
  FzOp *b = fzOpGetNextInBlock(c7);
  fzRewriterSetOperand(rw, b, 0, fzOpGetResult(c7, 0));
  ck_assert_int_eq(n.modified, 4);
  fzRewriterMoveOpAfter(rw, c7, c7);
  ck_assert_int_eq(n.modified, 4);
  ck_assert(fzOpVerify(m));
  fzRewriterDestroy(rw);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_inline_block_and_clone) {
  FzContext *ctx = tp_context();
  FzOp *m = tp_parse(ctx,
      "func.func @f(%x: i32) {\n"
      "  %w = \"tp.wrap\"(%x) ({\n"
      "  ^bb0(%y: i32):\n"
      "    %d = \"tp.neg\"(%y) : (i32) -> i32\n"
      "    \"tp.yield\"(%d) : (i32) -> ()\n"
      "  }) : (i32) -> i32\n"
      "  \"tp.effect\"(%w) : (i32) -> ()\n"
      "  return\n"
      "}\n");
  Notes n = {0, 0, 0, 0};
  FzRewriteListener l = {n_ins, n_mod, n_rep, n_era, &n};
  FzRewriter *rw = fzRewriterCreate(ctx, &l);
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(tp_first_func(m), 0));
  FzOp *w = fzBlockGetFirstOp(entry);
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(w, 0));
  FzOp *yield = fzBlockGetLastOp(body);
  FzValue *x = fzOpGetOperand(w, 0);
  FzValue *result = fzOpGetOperand(yield, 0);
  /* Unwrap: move the body before the wrap, forward the yielded value. */
  fzRewriterInlineBlockBefore(rw, body, w, &x);
  ck_assert_int_eq(n.inserted, 2);
  fzRewriterEraseOp(rw, fzOpGetPrevInBlock(w)); /* the moved yield */
  fzRewriterReplaceOp(rw, w, &result);
  ck_assert(fzOpVerify(m));
  ck_assert_uint_eq(tp_count(m, "tp.wrap"), 0);
  ck_assert_uint_eq(tp_count(m, "tp.neg"), 1);
  /* Clone the neg at the end of the block's start. */
  fzRewriterSetInsertionPointToStart(rw, entry);
  FzOp *neg = fzBlockGetFirstOp(entry);
  FzIRMapping *map = fzIRMappingCreate(ctx);
  fzRewriterSetInsertionPointAfter(rw, neg);
  FzOp *c = fzRewriterCloneOp(rw, neg, map);
  ck_assert_ptr_nonnull(c);
  ck_assert_ptr_eq(fzOpGetNextInBlock(neg), c);
  fzIRMappingDestroy(map);
  ck_assert(fzOpVerify(m));
  fzRewriterDestroy(rw);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Every allocation failure during a greedy run is survived: false with
 * an error, or success; never a crash or a leak. */
START_TEST(test_allocation_failures) {
  for (size_t k = 1; k < 400; ++k) {
    CountingAlloc ca;
    memset(&ca, 0, sizeof ca);
    FzAllocator a = counting_allocator(&ca);
    FzContext *ctx = fzContextCreateWithAllocator(&a);
    ck_assert_ptr_nonnull(ctx);
    ck_assert(fzRegisterAllDialects(ctx));
    ck_assert(fzContextRegisterDialect(ctx, &tp_dialect));
    DiagLog log;
    diag_log_begin(&log, ctx);
    FzOp *m = tp_parse(ctx,
        "func.func @f(%x: i32) -> i32 {\n"
        "  %a = \"tp.const\"() <{value = 2 : i32}> : () -> i32\n"
        "  %b = \"tp.const\"() <{value = 3 : i32}> : () -> i32\n"
        "  %c = \"tp.add\"(%a, %b) : (i32, i32) -> i32\n"
        "  %d = \"tp.neg\"(%c) : (i32) -> i32\n"
        "  %e = \"tp.neg\"(%d) : (i32) -> i32\n"
        "  %f = \"tp.mul\"(%e, %x) : (i32, i32) -> i32\n"
        "  %g = \"tp.neg\"(%x) : (i32) -> i32\n"
        "  return %f : i32\n"
        "}\n");
    ca.failAt = ca.numAllocs + k;
    ca.failOnward = true;
    FzPatternSet *set = fzPatternSetCreate(ctx);
    bool ok = false;
    if (set) {
      (void)fzPatternSetAddCanonicalizationPatterns(set);
      ok = fzApplyPatternsGreedily(tp_first_func(m), set, NULL, NULL);
    }
    fzPatternSetDestroy(set);
    ca.failAt = 0;
    if (!ok)
      ck_assert(fzContextHadAllocationFailure(ctx) || log.numErrors > 0);
    diag_log_end(&log);
    fzOpDestroy(m);
    fzContextDestroy(ctx);
    ck_assert_uint_eq(ca.liveBlocks, 0);
    if (ok && ca.numFailures == 0)
      break; /* past the last allocation of the run */
  }
}
END_TEST

static Suite *greedy_suite(void) {
  Suite *s = suite_create("greedy");
  TCase *tc = tcase_create("driver");
  tcase_add_test(tc, test_fold_constants);
  tcase_add_test(tc, test_fold_to_operand_and_pattern);
  tcase_add_test(tc, test_exact_worklist_top_down);
  tcase_add_test(tc, test_exact_worklist_bottom_up);
  tcase_add_test(tc, test_exact_worklist_fold_chain);
  tcase_add_test(tc, test_dead_ops_and_effects);
  tcase_add_test(tc, test_constant_uniquing_and_hoisting);
  tcase_add_test(tc, test_non_convergence_rewrites);
  tcase_add_test(tc, test_non_convergence_default_limit);
  tcase_add_test(tc, test_non_convergence_iterations);
  tcase_add_test(tc, test_benefit_order_and_any_root);
  tcase_add_test(tc, test_invalid_pattern_set);
  tcase_add_test(tc, test_rewriter_notifications);
  tcase_add_test(tc, test_inline_block_and_clone);
  tcase_add_test(tc, test_allocation_failures);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(greedy_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

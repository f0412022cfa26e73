/* tests/unit/oom_sweep.h - the allocation-failure sweep that test_oom.c
 * (the subsystems above the core, the CPU back end) and test_oom_gpu.c
 * (the GPU half) run over their workloads (docs/robustness.md, "Out of
 * memory").
 *
 * Each workload runs once cleanly to count its allocations N and to keep
 * its result (printed IR, or output bytes), then once for every k <= N
 * (every `stride`-th) with the k-th allocation failing, and once with the
 * k-th and every later one failing. Each failing run must:
 *  - report it: the context's sticky flag is set and an "out of memory"
 *    error reached the handler;
 *  - give the clean run's result whenever the workload still reports
 *    success (a failure absorbed silently must not change the result);
 *  - leave the context usable: after fzContextClearAllocationFailure, the
 *    same workload in the same context succeeds with the clean result;
 *  - leak nothing and free no foreign pointer (checked at context
 *    destruction through the counting allocator).
 * A workload may call sweep_mark() where the part under test begins
 * (after parsing what earlier sweeps cover): the sweep then starts at the
 * allocation after the mark. FZ_OOM_AT=k runs that k alone (to debug a
 * failure under gdb); FZ_OOM_STRIDE=s takes every s-th k in every sweep
 * (1: all of them, for the sweeps that sample).
 */
#ifndef FZ_TESTS_OOM_SWEEP_H
#define FZ_TESTS_OOM_SWEEP_H

#include "fz/fz.h"
#include "tests/unit/test_helpers.h"

/* A workload: runs in ctx (dialects and passes already registered) and
 * appends its result's fingerprint to out; false after an error. Calls
 * that cannot return an error (fzOpPrint) report an allocation failure
 * only through the context's sticky flag, which the workload then checks
 * (printed_ok: did an allocation fail during the print). */
typedef bool (*Workload)(FzContext *ctx, TextBuf *out);

static FzOp *parse_text(FzContext *ctx, const char *text) {
  return fzParseSource(ctx, fzStringRefFromCString(text), FZ_STR("oom.fuse"),
                       0);
}

static FzOp *main_of(FzOp *module) {
  return module ? fzSymbolTableLookupIn(module, FZ_STR("main")) : NULL;
}

/* Appends the elements of tensors to out, as text. */
static void print_tensors(TextBuf *out, size_t n, FzTensor *const *ts) {
  for (size_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < ts[i]->numElements; ++k) {
      char num[40];
      int len = snprintf(num, sizeof num, "%.9g ", fzTensorGetF64(ts[i], k));
      text_cb((FzStringRef){num, (size_t)len}, out);
    }
}

/* The three inputs of a matmul model x (m x n) @ w (n x n) + b (n):
 * seeded values in +-[0.25, 2] (never 0). False when out of memory. */
static inline bool seeded_inputs(FzContext *ctx, int64_t m, int64_t n,
                                 unsigned seed, FzTensor **in) {
  const int64_t sx[] = {m, n}, sw[] = {n, n}, sb[] = {n};
  FzType *f32 = fzF32TypeGet(ctx);
  if (!f32)
    return false;
  in[0] = fzTensorCreate(ctx, f32, 2, sx);
  in[1] = fzTensorCreate(ctx, f32, 2, sw);
  in[2] = fzTensorCreate(ctx, f32, 1, sb);
  if (!in[0] || !in[1] || !in[2])
    return false;
  for (int i = 0; i < 3; ++i)
    for (int64_t k = 0; k < in[i]->numElements; ++k) {
      seed = seed * 1103515245u + 12345u;
      double v = 0.25 + (double)((seed >> 8) % 1000) / 570.0;
      fzTensorSetF64(in[i], k, (seed >> 20) & 1 ? v : -v);
    }
  return true;
}

/* The allocator of the sweep's current context. */
static CountingAlloc *g_alloc;
/* Allocations counted when the workload called sweep_mark(), or
 * SIZE_MAX. */
static size_t g_markedAt = SIZE_MAX;

static inline void sweep_mark(void) {
  if (g_alloc)
    g_markedAt = g_alloc->numAllocs;
}

/* Prints op into out; false when an allocation failed during the print
 * (the printer's only report is the sticky flag, checked by the sweep:
 * the text may then be incomplete). */
static bool printed_ok(FzContext *ctx, FzOp *op, TextBuf *out) {
  (void)ctx;
  size_t before = g_alloc->numFailures;
  fzOpPrint(op, 0, text_cb, out);
  return g_alloc->numFailures == before;
}

static void destroy_inputs(FzTensor **in, size_t n) {
  for (size_t i = 0; i < n; ++i)
    fzTensorDestroy(in[i]);
}

/*===--- The sweep ------------------------------------------------------===*/

static FzContext *sweep_context(CountingAlloc *c) {
  g_alloc = c;
  FzAllocator a = counting_allocator(c);
  FzContext *ctx = fzContextCreateWithAllocator(&a);
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  return ctx;
}

/* Fails the test when got differs from want, showing where (the texts
 * may be large: Check's messages are not). */
static void check_same(const char *name, const char *what, size_t k,
                       bool onward, const TextBuf *got, const TextBuf *want) {
  if (got->len == want->len && memcmp(got->data, want->data, want->len) == 0)
    return;
  size_t at = 0;
  while (at < got->len && at < want->len && got->data[at] == want->data[at])
    ++at;
  size_t from = at > 80 ? at - 80 : 0;
  ck_abort_msg("%s: after a failure at allocation %zu%s, %s (byte %zu):\n"
               "got:  ...%.160s\nwant: ...%.160s",
               name, k, onward ? " onward" : "", what, at,
               got->data ? got->data + from : "", want->data + from);
}

/* One run with allocation k (from the workload's start) failing, and
 * with every later one too when onward; checks the contract above. */
static void sweep_one(const char *name, Workload w, const TextBuf *clean,
                      size_t k, bool onward) {
  CountingAlloc c = {0};
  FzContext *ctx = sweep_context(&c);
  DiagLog log;
  diag_log_begin(&log, ctx);
  TextBuf got = {0};
  c.failAt = c.numAllocs + k;
  c.failOnward = onward;
  bool ok = w(ctx, &got);
  c.failAt = 0;
  c.failOnward = false;
  if (c.numFailures > 0) {
    ck_assert_msg(fzContextHadAllocationFailure(ctx),
                  "%s: allocation %zu%s failed silently", name, k,
                  onward ? " onward" : "");
    ck_assert_msg(diag_log_find(&log, "out of memory") != NULL,
                  "%s: allocation %zu%s failed without an error", name, k,
                  onward ? " onward" : "");
  }
  if (ok)
    check_same(name, "the workload succeeded with a different result", k,
               onward, &got, clean);
  /* Still usable: the same work again, with memory available. */
  fzContextClearAllocationFailure(ctx);
  diag_log_clear(&log);
  TextBuf again = {0};
  bool okAgain = w(ctx, &again);
  if (!okAgain)
    diag_log_dump(&log);
  ck_assert_msg(okAgain,
                "%s: the context is unusable after a failure at "
                "allocation %zu%s",
                name, k, onward ? " onward" : "");
  check_same(name, "the rerun in the same context gives a different result", k,
             onward, &again, clean);
  diag_log_end(&log);
  text_free(&got);
  text_free(&again);
  fzContextDestroy(ctx);
  ck_assert_msg(c.liveBlocks == 0 && c.liveBytes == 0,
                "%s: failing allocation %zu%s: %zu blocks (%lld bytes) "
                "leaked",
                name, k, onward ? " onward" : "", c.liveBlocks, c.liveBytes);
  ck_assert_uint_eq(c.badFrees, 0);
}

/* The clean run, then every k (every `stride`-th, from the mark) in both
 * modes. */
static void sweep(const char *name, Workload w, size_t stride) {
  CountingAlloc c = {0};
  FzContext *ctx = sweep_context(&c);
  DiagLog log;
  diag_log_begin(&log, ctx);
  size_t before = c.numAllocs;
  TextBuf clean = {0};
  g_markedAt = SIZE_MAX;
  bool ok = w(ctx, &clean);
  size_t first = g_markedAt == SIZE_MAX ? 1 : g_markedAt - before + 1;
  if (!ok)
    diag_log_dump(&log);
  ck_assert_msg(ok, "%s: the clean run fails", name);
  ck_assert_uint_eq(log.numErrors, 0);
  size_t total = c.numAllocs - before;
  diag_log_end(&log);
  fzContextDestroy(ctx);
  ck_assert_uint_eq(c.liveBlocks, 0);
  ck_assert_uint_gt(total, 0);
  const char *s = getenv("FZ_OOM_STRIDE");
  if (s && strtoull(s, NULL, 10) > 0)
    stride = (size_t)strtoull(s, NULL, 10);
  fprintf(stderr, "%s: %zu allocations; k from %zu, stride %zu\n", name, total,
          first, stride);
  /* FZ_OOM_AT=k: that k alone (to debug a failure under gdb). */
  const char *only = getenv("FZ_OOM_AT");
  for (size_t k = first; k <= total; k += stride) {
    if (only && (size_t)strtoull(only, NULL, 10) != k)
      continue;
    sweep_one(name, w, &clean, k, false);
    sweep_one(name, w, &clean, k, true);
  }
  text_free(&clean);
}

/* One test case per subsystem, so that CK_RUN_CASE=onnx runs one. */
static void add_case(Suite *s, const char *name, const TTest *test) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test);
  suite_add_tcase(s, tc);
}

#endif /* FZ_TESTS_OOM_SWEEP_H */

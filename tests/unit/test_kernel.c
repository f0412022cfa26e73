/* tests/unit/test_kernel.c - Check suite of the kernel dialect: the op
 * table and opcodes, the simulator through its C entry point
 * (fzKernelSimulate: ids over a 2-d grid and block, launch-limit errors),
 * the loop interpreter's extension point running kernel.launch (and
 * refusing it without the extension), the bytes a launch moves
 * (FzKernelSimOptions.stats and .report, directly and through the
 * extension), allocation failures during a simulated launch, and the tf32
 * rounding of kernel.mma m16n8k8 (fzKernelRoundTf32). Syntax, verifier
 * messages and the end-to-end kernels are lit tests (tests/lit/kernel).
 */
#include "dialects/kernel/sim_internal.h"
#include "fz/kernel.h"
#include "tests/unit/test_helpers.h"

static FzContext *kernel_context(void) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterKernelDialect(ctx)); /* twice is harmless */
  return ctx;
}

static FzOp *parse(FzContext *ctx, const char *src) {
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("t.fuse"),
                          0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  return m;
}

static FzOp *lookup(FzOp *module, const char *name) {
  FzOp *op = fzSymbolTableLookupIn(module, fzStringRefFromCString(name));
  ck_assert_ptr_nonnull(op);
  return op;
}

START_TEST(test_opcodes) {
  FzContext *ctx = kernel_context();
  const FzDialectDef *d = fzKernelDialectGet();
  ck_assert_uint_eq(d->numOps, FZ_KERNEL_NUM_OPS);
  for (size_t i = 0; i < d->numOps; ++i) {
    ck_assert_ptr_nonnull(d->ops[i]->summary);
    ck_assert_ptr_eq(fzContextLookupOpDef(
                         ctx, fzStringRefFromCString(d->ops[i]->name)),
                     d->ops[i]);
  }
  FzOp *m = parse(ctx, "kernel.func @k() {\n"
                       "  %t = kernel.thread_id y\n"
                       "  %c = loop.constant 1 : index\n"
                       "  kernel.return\n"
                       "}\n");
  FzOp *k = lookup(m, "k");
  ck_assert_int_eq(fzKernelGetOpcode(k), FZ_KERNEL_OP_FUNC);
  FzOp *t = fzBlockGetFirstOp(fzRegionGetFirstBlock(fzOpGetRegion(k, 0)));
  ck_assert_int_eq(fzKernelGetOpcode(t), FZ_KERNEL_OP_THREAD_ID);
  ck_assert_int_eq(fzKernelGetDimension(t), 1);
  ck_assert_ptr_eq(fzKernelGetEnclosingFunc(t), k);
  FzOp *c = fzOpGetNextInBlock(t);
  ck_assert_int_eq(fzKernelGetOpcode(c), FZ_KERNEL_OP_UNKNOWN);
  ck_assert_int_eq(fzKernelGetDimension(c), -1);
  ck_assert_int_eq(fzKernelGetOpcode(m), FZ_KERNEL_OP_UNKNOWN);
  ck_assert_int_eq(fzKernelGetOpcode(NULL), FZ_KERNEL_OP_UNKNOWN);
  ck_assert_ptr_null(fzKernelGetEnclosingFunc(m));
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* out[b][t] = 1000 * block (x + 10 y) + 100 * thread y + thread x + the
 * scalar argument, over a 3x2 grid of 4x2 blocks. */
static const char kIds[] =
    "kernel.func @ids(%out: buffer<6x8xi64>, %bias: i64) {\n"
    "  %tx = kernel.thread_id x\n"
    "  %ty = kernel.thread_id y\n"
    "  %bx = kernel.block_id x\n"
    "  %by = kernel.block_id y\n"
    "  %nx = kernel.block_dim x\n"
    "  %gx = kernel.grid_dim x\n"
    "  %c10 = loop.constant 10 : index\n"
    "  %c100 = loop.constant 100 : index\n"
    "  %c1000 = loop.constant 1000 : index\n"
    "  %b0 = loop.muli %by, %gx : index\n"
    "  %b = loop.addi %b0, %bx : index\n"
    "  %t0 = loop.muli %ty, %nx : index\n"
    "  %t = loop.addi %t0, %tx : index\n"
    "  %y10 = loop.muli %by, %c10 : index\n"
    "  %bid = loop.addi %bx, %y10 : index\n"
    "  %v0 = loop.muli %bid, %c1000 : index\n"
    "  %v1 = loop.muli %ty, %c100 : index\n"
    "  %v2 = loop.addi %v0, %v1 : index\n"
    "  %v3 = loop.addi %v2, %tx : index\n"
    "  %v4 = loop.index_cast %v3 : index to i64\n"
    "  %v = loop.addi %v4, %bias : i64\n"
    "  loop.store %v, %out[%b, %t] : buffer<6x8xi64>\n"
    "  kernel.return\n"
    "}\n";

static FzLoopInterpValue buffer_arg(FzType *t, int64_t *data, size_t n,
                                    const int64_t *shape,
                                    const int64_t *strides, size_t rank) {
  FzLoopInterpValue v;
  memset(&v, 0, sizeof v);
  v.type = t;
  v.data = (char *)data;
  v.rank = rank;
  v.shape = shape;
  v.strides = strides;
  v.lo = (char *)data;
  v.hi = (char *)(data + n);
  return v;
}

START_TEST(test_simulate_ids) {
  FzContext *ctx = kernel_context();
  FzOp *m = parse(ctx, kIds);
  FzOp *k = lookup(m, "ids");
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(k, 0));
  int64_t out[48];
  memset(out, 0, sizeof out);
  const int64_t shape[2] = {6, 8}, strides[2] = {8, 1};
  FzLoopInterpValue args[2];
  args[0] = buffer_arg(fzValueGetType(fzBlockGetArgument(entry, 0)), out, 48,
                       shape, strides, 2);
  memset(&args[1], 0, sizeof args[1]);
  args[1].type = fzIntegerTypeGet(ctx, 64);
  args[1].scalar.i = 7;
  FzKernelLaunchConfig cfg = {{3, 2, 1}, {4, 2, 1}, 0};
  ck_assert(fzKernelSimulate(k, NULL, &cfg, 2, args));
  for (int by = 0; by < 2; ++by)
    for (int bx = 0; bx < 3; ++bx)
      for (int ty = 0; ty < 2; ++ty)
        for (int tx = 0; tx < 4; ++tx)
          ck_assert_int_eq(out[(by * 3 + bx) * 8 + ty * 4 + tx],
                           1000 * (bx + 10 * by) + 100 * ty + tx + 7);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_simulate_limits) {
  FzContext *ctx = kernel_context();
  FzOp *m = parse(ctx, kIds);
  FzOp *k = lookup(m, "ids");
  int64_t out[48];
  const int64_t shape[2] = {6, 8}, strides[2] = {8, 1};
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(k, 0));
  FzLoopInterpValue args[2];
  args[0] = buffer_arg(fzValueGetType(fzBlockGetArgument(entry, 0)), out, 48,
                       shape, strides, 2);
  memset(&args[1], 0, sizeof args[1]);
  args[1].type = fzIntegerTypeGet(ctx, 64);
  static const struct {
    FzKernelLaunchConfig cfg;
    const char *message;
  } cases[] = {
      {{{0, 1, 1}, {1, 1, 1}, 0}, "grid size 0 along x is outside [1, 65536]"},
      {{{1, 1, 1}, {1, 1, 65}, 0}, "block size 65 along z is outside [1, 64]"},
      {{{1, 1, 1}, {64, 32, 1}, 0}, "blocks of 2048 threads exceed"},
      {{{1024, 1024, 1}, {1, 1, 1}, 0}, "too large for the simulator"},
      {{{1, 1, 1}, {1, 1, 1}, -4}, "dynamic shared memory of -4 bytes"},
  };
  DiagLog log;
  diag_log_begin(&log, ctx);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    diag_log_clear(&log);
    ck_assert(!fzKernelSimulate(k, NULL, &cases[i].cfg, 2, args));
    if (!diag_log_find(&log, cases[i].message))
      diag_log_dump(&log);
    ck_assert_ptr_nonnull(diag_log_find(&log, cases[i].message));
  }
  /* Arguments that do not match the kernel's signature. */
  diag_log_clear(&log);
  FzKernelLaunchConfig ok = {{1, 1, 1}, {1, 1, 1}, 0};
  ck_assert(!fzKernelSimulate(k, NULL, &ok, 1, args));
  ck_assert_ptr_nonnull(diag_log_find(&log, "passes 1 arguments"));
  diag_log_clear(&log);
  args[1].type = fzIntegerTypeGet(ctx, 32);
  ck_assert(!fzKernelSimulate(k, NULL, &ok, 2, args));
  ck_assert_ptr_nonnull(diag_log_find(&log, "argument #1's type"));
  /* Not a kernel. */
  diag_log_clear(&log);
  ck_assert(!fzKernelSimulate(m, NULL, &ok, 0, NULL));
  ck_assert_ptr_nonnull(diag_log_find(&log, "does not launch a kernel.func"));
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* The host function launches @fill twice with different scalars into
 * the two halves of its output. */
static const char kHost[] =
    "kernel.func @fill(%o: buffer<2x32xf32>, %row: index, %v: f32) {\n"
    "  %t = kernel.thread_id x\n"
    "  %ft = loop.index_cast %t : index to i32\n"
    "  %f = loop.sitofp %ft : i32 to f32\n"
    "  %x = loop.addf %f, %v : f32\n"
    "  loop.store %x, %o[%row, %t] : buffer<2x32xf32>\n"
    "  kernel.return\n"
    "}\n"
    "func.func @main(%o: buffer<2x32xf32>) attributes {loop.num_outputs = 1 "
    ": i64} {\n"
    "  %c0 = loop.constant 0 : index\n"
    "  %c1 = loop.constant 1 : index\n"
    "  %c32 = loop.constant 32 : index\n"
    "  %h = loop.constant 0.5 : f32\n"
    "  %k = loop.constant 100.0 : f32\n"
    "  kernel.launch @fill blocks(%c1, %c1, %c1) threads(%c32, %c1, %c1) "
    "shared(%c0) args(%o, %c0, %h) : buffer<2x32xf32>, index, f32\n"
    "  kernel.launch @fill blocks(%c1, %c1, %c1) threads(%c32, %c1, %c1) "
    "shared(%c0) args(%o, %c1, %k) : buffer<2x32xf32>, index, f32\n"
    "  return\n"
    "}\n";

START_TEST(test_loop_extension) {
  FzContext *ctx = kernel_context();
  FzOp *m = parse(ctx, kHost);
  FzOp *f = lookup(m, "main");
  const int64_t shape[2] = {2, 32};
  FzTensor *out = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, shape);
  ck_assert_ptr_nonnull(out);
  FzLoopInterpOptions opts = {.extension = fzKernelSimExtension()};
  ck_assert(fzLoopInterpretFunction(f, 1, &out, &opts));
  for (int t = 0; t < 32; ++t) {
    ck_assert_double_eq(fzTensorGetF64(out, t), t + 0.5);
    ck_assert_double_eq(fzTensorGetF64(out, 32 + t), t + 100.0);
  }
  /* Without the extension, kernel.launch is not something the loop
   * interpreter runs. */
  char msg[256];
  FzLoopInterpOptions quiet = {.quiet = true, .errorMessage = msg,
                               .errorMessageSize = sizeof msg};
  ck_assert(!fzLoopInterpretFunction(f, 1, &out, &quiet));
  ck_assert_ptr_nonnull(strstr(msg, "'kernel.launch' op is not a loop-level"));
  fzTensorDestroy(out);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Reverses 32 f32 through shared memory, 2 blocks of 32 threads: each
 * thread reads 4 bytes of global memory and of shared memory and writes
 * 4 of each. */
static const char kReverse[] =
    "kernel.func @rev(%in: buffer<2x32xf32>, %out: buffer<2x32xf32>) {\n"
    "  %s = kernel.shared_alloc : buffer<32xf32, 3>\n"
    "  %t = kernel.thread_id x\n"
    "  %b = kernel.block_id x\n"
    "  %c31 = loop.constant 31 : index\n"
    "  %x = loop.load %in[%b, %t] : buffer<2x32xf32>\n"
    "  loop.store %x, %s[%t] : buffer<32xf32, 3>\n"
    "  kernel.barrier\n"
    "  %r = loop.subi %c31, %t : index\n"
    "  %y = loop.load %s[%r] : buffer<32xf32, 3>\n"
    "  loop.store %y, %out[%b, %t] : buffer<2x32xf32>\n"
    "  kernel.return\n"
    "}\n"
    "func.func @main(%in: buffer<2x32xf32>, %out: buffer<2x32xf32>) "
    "attributes {loop.num_outputs = 1 : i64} {\n"
    "  %c0 = loop.constant 0 : index\n"
    "  %c1 = loop.constant 1 : index\n"
    "  %c2 = loop.constant 2 : index\n"
    "  %c32 = loop.constant 32 : index\n"
    "  kernel.launch @rev blocks(%c2, %c1, %c1) threads(%c32, %c1, %c1) "
    "shared(%c0) args(%in, %out) : buffer<2x32xf32>, buffer<2x32xf32>\n"
    "  kernel.launch @rev blocks(%c1, %c1, %c1) threads(%c32, %c1, %c1) "
    "shared(%c0) args(%in, %out) : buffer<2x32xf32>, buffer<2x32xf32>\n"
    "  return\n"
    "}\n";

/* fzKernelSimulateWithOptions adds each launch's bytes to
 * options.stats; the extension reports every launch of a host function
 * to options.report and adds them all to options.stats. */
START_TEST(test_simulate_stats) {
  FzContext *ctx = kernel_context();
  FzOp *m = parse(ctx, kReverse);
  FzOp *k = lookup(m, "rev");
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(k, 0));
  _Alignas(8) float in[64];
  _Alignas(8) float out[64];
  for (int i = 0; i < 64; ++i)
    in[i] = (float)i + 0.25f;
  memset(out, 0, sizeof out);
  const int64_t shape[2] = {2, 32}, strides[2] = {32, 1};
  FzLoopInterpValue args[2];
  args[0] = buffer_arg(fzValueGetType(fzBlockGetArgument(entry, 0)),
                       (int64_t *)(void *)in, 32, shape, strides, 2);
  args[1] = buffer_arg(fzValueGetType(fzBlockGetArgument(entry, 1)),
                       (int64_t *)(void *)out, 32, shape, strides, 2);
  FzKernelLaunchConfig cfg = {{2, 1, 1}, {32, 1, 1}, 0};
  FzKernelSimStats st = {1, 2, 3, 4}; /* added to, not reset */
  FzKernelSimOptions opts = {.stats = &st};
  ck_assert(fzKernelSimulateWithOptions(k, NULL, &cfg, &opts, 2, args));
  ck_assert_int_eq(st.globalRead, 1 + 256);
  ck_assert_int_eq(st.globalWritten, 2 + 256);
  ck_assert_int_eq(st.sharedRead, 3 + 256);
  ck_assert_int_eq(st.sharedWritten, 4 + 256);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 32; ++t)
      ck_assert_float_eq(out[b * 32 + t], in[b * 32 + 31 - t]);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

typedef struct Reports {
  int n;
  int64_t globalRead[4];
} Reports;

static void count_report(void *ud, FzOp *launch, FzOp *kernel,
                         const FzKernelSimStats *st) {
  Reports *r = ud;
  ck_assert_int_eq(fzKernelGetOpcode(kernel), FZ_KERNEL_OP_FUNC);
  ck_assert_ptr_nonnull(launch);
  ck_assert_int_eq(st->globalRead, st->globalWritten);
  ck_assert_int_eq(st->sharedRead, st->sharedWritten);
  if (r->n < 4)
    r->globalRead[r->n] = st->globalRead;
  r->n++;
}

START_TEST(test_simulate_reporting) {
  FzContext *ctx = kernel_context();
  FzOp *m = parse(ctx, kReverse);
  FzOp *f = lookup(m, "main");
  const int64_t shape[2] = {2, 32};
  FzTensor *in = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, shape);
  FzTensor *out = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, shape);
  ck_assert_ptr_nonnull(in);
  ck_assert_ptr_nonnull(out);
  for (int i = 0; i < 64; ++i)
    fzTensorSetF64(in, i, i * 0.5 + 1);
  Reports reports = {0, {0}};
  FzKernelSimStats total = {0, 0, 0, 0};
  FzKernelSimOptions simOpts = {
      .stats = &total, .report = count_report, .reportData = &reports};
  FzLoopInterpExtension ext;
  fzKernelSimExtensionInit(&ext, &simOpts);
  FzLoopInterpOptions opts = {.extension = &ext};
  FzTensor *io[2] = {in, out};
  ck_assert(fzLoopInterpretFunction(f, 2, io, &opts));
  ck_assert_int_eq(reports.n, 2); /* one report per launch */
  ck_assert_int_eq(reports.globalRead[0], 256); /* 2 blocks */
  ck_assert_int_eq(reports.globalRead[1], 128); /* 1 block */
  ck_assert_int_eq(total.globalRead, 384);       /* both launches */
  ck_assert_int_eq(total.sharedWritten, 384);
  for (int t = 0; t < 32; ++t)
    ck_assert_double_eq(fzTensorGetF64(out, 32 + t), (63 - t) * 0.5 + 1);
  fzTensorDestroy(in);
  fzTensorDestroy(out);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Every allocation of a simulated launch may fail: an error, no crash, no
 * leak. */
START_TEST(test_simulate_allocation_failures) {
  for (size_t failAt = 1;; ++failAt) {
    CountingAlloc c = {0};
    FzAllocator a = counting_allocator(&c);
    FzContext *ctx = fzContextCreateWithAllocator(&a);
    ck_assert(fzRegisterAllDialects(ctx));
    FzOp *m = parse(ctx, kHost);
    FzOp *f = lookup(m, "main");
    const int64_t shape[2] = {2, 32};
    FzTensor *out = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, shape);
    ck_assert_ptr_nonnull(out);
    FzLoopInterpOptions opts = {.extension = fzKernelSimExtension()};
    DiagLog log;
    diag_log_begin(&log, ctx);
    size_t start = c.numAllocs;
    c.failAt = start + failAt;
    bool ok = fzLoopInterpretFunction(f, 1, &out, &opts);
    c.failAt = 0;
    diag_log_end(&log);
    if (ok)
      ck_assert_double_eq(fzTensorGetF64(out, 63), 131.0);
    fzTensorDestroy(out);
    fzOpDestroy(m);
    fzContextDestroy(ctx);
    ck_assert_uint_eq(c.liveBlocks, 0);
    if (ok) {
      ck_assert_uint_eq(c.numFailures, 0);
      break;
    }
    ck_assert_uint_gt(c.numFailures, 0);
    ck_assert_uint_lt(failAt, 10000);
  }
}
END_TEST

/* kernel.mma m16n8k8's operand rounding (cvt.rna.tf32.f32): 10 mantissa
 * bits, to nearest, ties away from zero; NaN and infinities kept. */
static double bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

START_TEST(test_round_tf32) {
  /* Exact tf32 values are kept. */
  ck_assert(fzKernelRoundTf32(1.0) == 1.0);
  ck_assert(fzKernelRoundTf32(-0.75) == -0.75);
  ck_assert(fzKernelRoundTf32(0.0) == 0.0);
  /* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: away from zero. */
  ck_assert(fzKernelRoundTf32(1.0 + 0x1p-11) == 1.0 + 0x1p-10);
  ck_assert(fzKernelRoundTf32(-(1.0 + 0x1p-11)) == -(1.0 + 0x1p-10));
  /* Just below halfway: down; just above: up. */
  ck_assert(fzKernelRoundTf32(bits_f(0x3f800fffu)) == 1.0);
  ck_assert(fzKernelRoundTf32(bits_f(0x3f801001u)) == 1.0 + 0x1p-10);
  /* 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: away (not
   * to even, as cvt.rn would). */
  ck_assert(fzKernelRoundTf32(1.0 + 3 * 0x1p-11) == 1.0 + 0x1p-9);
  /* The largest finite f32 rounds up to infinity; inf and NaN stay. */
  ck_assert(isinf(fzKernelRoundTf32(bits_f(0x7f7fffffu))));
  ck_assert(isinf(fzKernelRoundTf32(INFINITY)));
  ck_assert(fzKernelRoundTf32(-INFINITY) < 0);
  ck_assert(isnan(fzKernelRoundTf32(NAN)));
  /* Subnormals keep the same 13 dropped bits. */
  ck_assert(fzKernelRoundTf32(bits_f(0x00001000u)) == bits_f(0x00002000u));
  ck_assert(fzKernelRoundTf32(bits_f(0x00000fffu)) == 0.0);
}
END_TEST

static Suite *kernel_suite(void) {
  Suite *s = suite_create("kernel");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_opcodes);
  tcase_add_test(tc, test_simulate_ids);
  tcase_add_test(tc, test_simulate_limits);
  tcase_add_test(tc, test_loop_extension);
  tcase_add_test(tc, test_simulate_stats);
  tcase_add_test(tc, test_simulate_reporting);
  tcase_add_test(tc, test_simulate_allocation_failures);
  tcase_add_test(tc, test_round_tf32);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return run_suite(kernel_suite());
}

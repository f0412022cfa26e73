/* test_oom.c - allocation-failure sweeps over the subsystems above the
 * core (docs/robustness.md, "Out of memory"): the pass manager running
 * graph-optimize (composites, simplifications, fusion), the graph
 * interpreter, lower-graph-to-loop with plan-memory and the loop
 * interpreter, the kernel dialect's parser and simulator, the ONNX
 * importer, the .npy reader, the CPU-only loop transforms
 * (tile-convolutions, tile-contractions) and the CPU back end's compile
 * step.
 *
 * Each workload runs once cleanly to count its allocations N and to keep
 * its result (printed IR, or output bytes), then once for every k <= N
 * with the k-th allocation failing, and once with the k-th and every later
 * one failing. Each failing run must:
 *  - report it: the context's sticky flag is set and an "out of memory"
 *    error reached the handler;
 *  - give the clean run's result whenever the workload still reports
 *    success (a failure absorbed silently must not change the result);
 *  - leave the context usable: after fzContextClearAllocationFailure, the
 *    same workload in the same context succeeds with the clean result;
 *  - leak nothing and free no foreign pointer (checked at context
 *    destruction through the counting allocator).
 * The CPU sweep takes every 23rd k (each run compiles with LLVM: about
 * 30 s in the ASan build).
 */
#include <math.h>

#include "fz/fz.h"
#include "tests/unit/test_helpers.h"

/* A workload: runs in ctx (dialects and passes already registered) and
 * appends its result's fingerprint to out; false after an error. Calls
 * that cannot return an error (fzOpPrint) report an allocation failure
 * only through the context's sticky flag, which the workload then checks
 * (printed_ok: did an allocation fail during the print). */
typedef bool (*Workload)(FzContext *ctx, TextBuf *out);

/* A graph with composites to recognize (softmax, gelu, a layer norm),
 * broadcasting, a matmul and reductions: graph-optimize rewrites and
 * fuses it, and every back end runs it. */
static const char kGraph[] =
    "func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, "
    "%b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {\n"
    "  %m = graph.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> "
    "tensor<4x8xf32>\n"
    "  %h = graph.add %m, %b : tensor<4x8xf32>, tensor<8xf32> -> "
    "tensor<4x8xf32>\n"
    "  %mx = graph.reduce_max %h {axes = array<i64: 1>, keepdims = true} : "
    "tensor<4x8xf32> -> tensor<4x1xf32>\n"
    "  %s = graph.sub %h, %mx : tensor<4x8xf32>, tensor<4x1xf32> -> "
    "tensor<4x8xf32>\n"
    "  %e = graph.exp %s : tensor<4x8xf32>\n"
    "  %sum = graph.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : "
    "tensor<4x8xf32> -> tensor<4x1xf32>\n"
    "  %p = graph.div %e, %sum : tensor<4x8xf32>, tensor<4x1xf32> -> "
    "tensor<4x8xf32>\n"
    "  %c = graph.constant dense<0.5> : tensor<f32>\n"
    "  %hx = graph.mul %h, %c : tensor<4x8xf32>, tensor<f32> -> "
    "tensor<4x8xf32>\n"
    "  %k = graph.constant dense<0.70710678> : tensor<f32>\n"
    "  %hk = graph.mul %h, %k : tensor<4x8xf32>, tensor<f32> -> "
    "tensor<4x8xf32>\n"
    "  %er = graph.erf %hk : tensor<4x8xf32>\n"
    "  %one = graph.constant dense<1.0> : tensor<f32>\n"
    "  %e1 = graph.add %er, %one : tensor<4x8xf32>, tensor<f32> -> "
    "tensor<4x8xf32>\n"
    "  %g = graph.mul %hx, %e1 : tensor<4x8xf32>\n"
    "  %mean = graph.reduce_mean %g {axes = array<i64: 1>, keepdims = true} "
    ": tensor<4x8xf32> -> tensor<4x1xf32>\n"
    "  %d = graph.sub %g, %mean : tensor<4x8xf32>, tensor<4x1xf32> -> "
    "tensor<4x8xf32>\n"
    "  %d2 = graph.mul %d, %d : tensor<4x8xf32>\n"
    "  %var = graph.reduce_mean %d2 {axes = array<i64: 1>, keepdims = true} "
    ": tensor<4x8xf32> -> tensor<4x1xf32>\n"
    "  %eps = graph.constant dense<1.0e-05> : tensor<f32>\n"
    "  %ve = graph.add %var, %eps : tensor<4x1xf32>, tensor<f32> -> "
    "tensor<4x1xf32>\n"
    "  %sd = graph.sqrt %ve : tensor<4x1xf32>\n"
    "  %n = graph.div %d, %sd : tensor<4x8xf32>, tensor<4x1xf32> -> "
    "tensor<4x8xf32>\n"
    "  %t = graph.transpose %p {perm = array<i64: 1, 0>} : tensor<4x8xf32> "
    "-> tensor<8x4xf32>\n"
    "  %tt = graph.transpose %t {perm = array<i64: 1, 0>} : tensor<8x4xf32> "
    "-> tensor<4x8xf32>\n"
    "  %r = graph.add %n, %tt : tensor<4x8xf32>\n"
    "  %rs = graph.reduce_sum %r {axes = array<i64: 1>, keepdims = true} : "
    "tensor<4x8xf32> -> tensor<4x1xf32>\n"
    "  return %r, %rs : tensor<4x8xf32>, tensor<4x1xf32>\n"
    "}\n";

static const char kKernel[] =
    "kernel.func @k(%x: buffer<64xf32>, %y: buffer<64xf32>) {\n"
    "  %t = kernel.thread_id x\n"
    "  %b = kernel.block_id x\n"
    "  %n = kernel.block_dim x\n"
    "  %s = kernel.shared_alloc : buffer<32xf32, 3>\n"
    "  %b0 = loop.muli %b, %n : index\n"
    "  %i = loop.addi %b0, %t : index\n"
    "  %v = loop.load %x[%i] : buffer<64xf32>\n"
    "  loop.store %v, %s[%t] : buffer<32xf32, 3>\n"
    "  kernel.barrier\n"
    "  %c31 = loop.constant 31 : index\n"
    "  %j = loop.subi %c31, %t : index\n"
    "  %w = loop.load %s[%j] : buffer<32xf32, 3>\n"
    "  %r = loop.addf %v, %w : f32\n"
    "  loop.store %r, %y[%i] : buffer<64xf32>\n"
    "  kernel.return\n"
    "}\n"
    "func.func @main(%x: buffer<64xf32>, %y: buffer<64xf32>) attributes "
    "{loop.num_outputs = 1 : i64} {\n"
    "  %c0 = loop.constant 0 : index\n"
    "  %c1 = loop.constant 1 : index\n"
    "  %c2 = loop.constant 2 : index\n"
    "  %c32 = loop.constant 32 : index\n"
    "  kernel.launch @k blocks(%c2, %c1, %c1) threads(%c32, %c1, %c1) "
    "shared(%c0) args(%x, %y) : buffer<64xf32>, buffer<64xf32>\n"
    "  return\n"
    "}\n";

/*===--- Helpers --------------------------------------------------------===*/

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

/* The inputs of kGraph's @main: seeded values in +-[0.25, 2] (never 0). */
static bool graph_inputs(FzContext *ctx, FzTensor **in) {
  static const int64_t sx[] = {4, 8}, sw[] = {8, 8}, sb[] = {8};
  FzType *f32 = fzF32TypeGet(ctx);
  if (!f32)
    return false;
  in[0] = fzTensorCreate(ctx, f32, 2, sx);
  in[1] = fzTensorCreate(ctx, f32, 2, sw);
  in[2] = fzTensorCreate(ctx, f32, 1, sb);
  if (!in[0] || !in[1] || !in[2])
    return false;
  unsigned seed = 7;
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

/*===--- Workloads ------------------------------------------------------===*/

/* The pass manager running graph-optimize, then the printed result. */
static bool wl_graph_optimize(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kGraph);
  FzPassManager *pm = m ? fzPassManagerCreate(ctx, "builtin.module") : NULL;
  bool ok = pm &&
            fzPassManagerParsePipeline(pm, FZ_STR("graph-optimize")) &&
            fzPassManagerRun(pm, m) && fzOpVerify(m) &&
            printed_ok(ctx, m, out);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  return ok;
}

/* The reference interpreter. */
static bool wl_interpret(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kGraph);
  FzTensor *in[3] = {0}, **res = NULL;
  size_t n = 0;
  bool ok = m && graph_inputs(ctx, in) &&
            fzInterpretFunction(main_of(m), 3, in, NULL, &n, &res);
  if (ok)
    print_tensors(out, n, res);
  fzTensorArrayDestroy(ctx, n, res);
  destroy_inputs(in, 3);
  fzOpDestroy(m);
  return ok;
}

/* fuse, lower-graph-to-loop, plan-memory and the loop interpreter
 * (fzLoopRunFunction's default pipeline). */
static bool wl_loop(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kGraph);
  FzTensor *in[3] = {0}, **res = NULL;
  size_t n = 0;
  bool ok = m && graph_inputs(ctx, in) &&
            fzLoopRunFunction(main_of(m), 3, in, NULL, NULL, &n, &res);
  if (ok)
    print_tensors(out, n, res);
  fzTensorArrayDestroy(ctx, n, res);
  destroy_inputs(in, 3);
  fzOpDestroy(m);
  return ok;
}

/* The kernel dialect's custom syntax, its verifiers and printer, then a
 * launch in the simulator through the loop interpreter. */
static bool wl_kernel(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kKernel);
  FzTensor *t[2] = {0};
  FzType *f32 = fzF32TypeGet(ctx);
  bool ok = m && f32 && fzOpVerify(m) && printed_ok(ctx, m, out);
  for (int i = 0; ok && i < 2; ++i)
    ok = (t[i] = fzTensorCreate(ctx, f32, 1, (int64_t[]){64})) != NULL;
  for (int64_t k = 0; ok && k < 64; ++k)
    fzTensorSetF64(t[0], k, 1.0 + (double)k);
  FzLoopInterpOptions o = {.extension = fzKernelSimExtension()};
  ok = ok && fzLoopInterpretFunction(main_of(m), 2, t, &o);
  if (ok)
    print_tensors(out, 1, &t[1]);
  destroy_inputs(t, 2);
  fzOpDestroy(m);
  return ok;
}

static void *g_onnx;
static size_t g_onnxSize;

/* The ONNX importer on the example MLP (read once, outside the sweep). */
static bool wl_onnx(FzContext *ctx, TextBuf *out) {
  FzOp *m = fzImportOnnxBuffer(ctx, g_onnx, g_onnxSize, "mlp.onnx", NULL);
  bool ok = m && fzOpVerify(m) && printed_ok(ctx, m, out);
  fzOpDestroy(m);
  return ok;
}

static TextBuf g_npy;

/* The .npy reader on a serialized 3x5 f32 tensor. */
static bool wl_npy(FzContext *ctx, TextBuf *out) {
  FzTensor *t = fzNpyReadBuffer(ctx, g_npy.data, g_npy.len, "t.npy");
  if (t)
    print_tensors(out, 1, &t);
  fzTensorDestroy(t);
  return t != NULL;
}

/* Convolutions (padded with stride 2, bias and relu; a 1x1 read in
 * place; a depthwise) and a matmul for the CPU-only loop transforms. */
static const char kConv[] =
    "func.func @main(%x: tensor<1x3x9x19xf32>, %w: tensor<5x3x3x3xf32>, "
    "%b: tensor<5xf32>, %v: tensor<4x3x1x1xf32>, %d: tensor<3x1x3x3xf32>, "
    "%a: tensor<7x9xf32>, %m: tensor<9x10xf32>) -> (tensor<1x5x5x10xf32>, "
    "tensor<1x4x9x19xf32>, tensor<1x3x9x19xf32>, tensor<7x10xf32>) {\n"
    "  %0 = graph.conv2d %x, %w, %b {strides = array<i64: 2, 2>, pads = "
    "array<i64: 1, 1, 1, 1>} : tensor<1x3x9x19xf32>, tensor<5x3x3x3xf32>, "
    "tensor<5xf32> -> tensor<1x5x5x10xf32>\n"
    "  %1 = graph.relu %0 : tensor<1x5x5x10xf32>\n"
    "  %2 = graph.conv2d %x, %v : tensor<1x3x9x19xf32>, "
    "tensor<4x3x1x1xf32> -> tensor<1x4x9x19xf32>\n"
    "  %3 = graph.conv2d %x, %d {pads = array<i64: 1, 1, 1, 1>, groups = 3} "
    ": tensor<1x3x9x19xf32>, tensor<3x1x3x3xf32> -> tensor<1x3x9x19xf32>\n"
    "  %4 = graph.matmul %a, %m : tensor<7x9xf32>, tensor<9x10xf32> -> "
    "tensor<7x10xf32>\n"
    "  return %1, %2, %3, %4 : tensor<1x5x5x10xf32>, tensor<1x4x9x19xf32>, "
    "tensor<1x3x9x19xf32>, tensor<7x10xf32>\n"
    "}\n";

/* graph-to-loop, then tile-convolutions and tile-contractions (no LLVM:
 * every allocation of the CPU-only loop transforms is swept). */
static bool wl_tile(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kConv);
  FzPassManager *pm = m ? fzPassManagerCreate(ctx, "builtin.module") : NULL;
  bool ok = pm &&
            fzPassManagerParsePipeline(
                pm, FZ_STR("graph-to-loop,func.func(tile-convolutions{"
                           "vector-bits=128},tile-contractions{vector-bits="
                           "128})")) &&
            fzPassManagerRun(pm, m) && fzOpVerify(m) &&
            printed_ok(ctx, m, out);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  return ok;
}

/* The CPU back end: fuse, lower, plan-memory, emit-llvm, JIT, and a run
 * (LLVM's own memory is not the context's; fuse's allocations are). */
static bool wl_cpu(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kGraph);
  FzTensor *in[3] = {0}, **res = NULL;
  size_t n = 0;
  FzCpuRuntime *rt = m ? fzCpuRuntimeCreate(ctx, 1) : NULL;
  FzCpuExecutable *exe = rt ? fzCpuExecutableCreate(rt, m, NULL) : NULL;
  FzCpuFunction *f = exe ? fzCpuExecutableLookup(exe, FZ_STR("main")) : NULL;
  bool ok = f && graph_inputs(ctx, in) &&
            fzCpuFunctionRun(f, 3, in, &n, &res);
  if (ok) /* rounded: the JIT's fast exp/erf differ in the last bits */
    for (size_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < res[i]->numElements; ++k) {
        char num[40];
        int len = snprintf(num, sizeof num, "%.4f ",
                           fzTensorGetF64(res[i], k));
        text_cb((FzStringRef){num, (size_t)len}, out);
      }
  fzTensorArrayDestroy(ctx, n, res);
  destroy_inputs(in, 3);
  fzCpuExecutableDestroy(exe);
  fzCpuRuntimeDestroy(rt);
  fzOpDestroy(m);
  return ok;
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
  ck_assert_msg(okAgain, "%s: the context is unusable after a failure at "
                         "allocation %zu%s", name, k, onward ? " onward" : "");
  check_same(name, "the rerun in the same context gives a different result",
             k, onward, &again, clean);
  diag_log_end(&log);
  text_free(&got);
  text_free(&again);
  fzContextDestroy(ctx);
  ck_assert_msg(c.liveBlocks == 0 && c.liveBytes == 0,
                "%s: failing allocation %zu%s: %zu blocks (%lld bytes) "
                "leaked", name, k, onward ? " onward" : "", c.liveBlocks,
                c.liveBytes);
  ck_assert_uint_eq(c.badFrees, 0);
}

/* The clean run, then every k (every `stride`-th) in both modes. */
static void sweep(const char *name, Workload w, size_t stride) {
  CountingAlloc c = {0};
  FzContext *ctx = sweep_context(&c);
  DiagLog log;
  diag_log_begin(&log, ctx);
  size_t before = c.numAllocs;
  TextBuf clean = {0};
  bool ok = w(ctx, &clean);
  if (!ok)
    diag_log_dump(&log);
  ck_assert_msg(ok, "%s: the clean run fails", name);
  ck_assert_uint_eq(log.numErrors, 0);
  size_t total = c.numAllocs - before;
  diag_log_end(&log);
  fzContextDestroy(ctx);
  ck_assert_uint_eq(c.liveBlocks, 0);
  ck_assert_uint_gt(total, 0);
  /* FZ_OOM_AT=k: that k alone (to debug a failure under gdb). */
  const char *only = getenv("FZ_OOM_AT");
  for (size_t k = 1; k <= total; k += stride) {
    if (only && (size_t)strtoull(only, NULL, 10) != k)
      continue;
    sweep_one(name, w, &clean, k, false);
    sweep_one(name, w, &clean, k, true);
  }
  text_free(&clean);
}

START_TEST(test_graph_optimize) { sweep("graph-optimize", wl_graph_optimize, 1); }
END_TEST
START_TEST(test_interpreter) { sweep("interpreter", wl_interpret, 1); }
END_TEST
START_TEST(test_loop_pipeline) { sweep("graph-to-loop + loop interpreter", wl_loop, 1); }
END_TEST
START_TEST(test_kernel) { sweep("kernel parse + simulate", wl_kernel, 1); }
END_TEST
START_TEST(test_npy) {
  FzContext *ctx = fzContextCreate();
  FzTensor *t = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, (int64_t[]){3, 5});
  ck_assert_ptr_nonnull(t);
  for (int64_t k = 0; k < 15; ++k)
    fzTensorSetF64(t, k, 0.5 * (double)k - 3.0);
  fzNpySerialize(t, text_cb, &g_npy);
  fzTensorDestroy(t);
  fzContextDestroy(ctx);
  sweep("npy", wl_npy, 1);
  text_free(&g_npy);
}
END_TEST
START_TEST(test_onnx) {
  FILE *f = fopen(FZ_TEST_SOURCE_DIR "/examples/models/mlp/model.onnx", "rb");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  ck_assert_int_gt(size, 0);
  rewind(f);
  g_onnx = malloc((size_t)size);
  ck_assert_ptr_nonnull(g_onnx);
  ck_assert_uint_eq(fread(g_onnx, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  g_onnxSize = (size_t)size;
  sweep("onnx import", wl_onnx, 1);
  free(g_onnx);
}
END_TEST
START_TEST(test_cpu) { sweep("cpu compile + run", wl_cpu, 23); }
END_TEST
START_TEST(test_tile) {
  sweep("tile-convolutions + tile-contractions", wl_tile, 1);
}
END_TEST

/* One test case per subsystem, so that CK_RUN_CASE=onnx runs one. */
static void add_case(Suite *s, const char *name, const TTest *test) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test);
  suite_add_tcase(s, tc);
}

static Suite *oom_suite(void) {
  Suite *s = suite_create("oom");
  add_case(s, "graph-optimize", test_graph_optimize);
  add_case(s, "interpreter", test_interpreter);
  add_case(s, "loop", test_loop_pipeline);
  add_case(s, "kernel", test_kernel);
  add_case(s, "npy", test_npy);
  add_case(s, "onnx", test_onnx);
  add_case(s, "cpu", test_cpu);
  add_case(s, "tile", test_tile);
  return s;
}

int main(void) { return run_suite(oom_suite()); }

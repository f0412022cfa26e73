/* test_oom.c - allocation-failure sweeps over the subsystems above the
 * core (docs/robustness.md, "Out of memory"): the pass manager running
 * graph-optimize (composites, simplifications, fusion), convert-layout
 * (NHWC convolution regions), the graph
 * interpreter, lower-graph-to-loop with plan-memory and the loop
 * interpreter, the kernel dialect's parser and simulator, the ONNX
 * importer, the .npy reader, the CPU-only loop transforms
 * (tile-convolutions, tile-contractions) and the CPU back end's compile
 * step; the sweep and its contract are tests/unit/oom_sweep.h (the GPU
 * half: test_oom_gpu.c). The CPU sweep takes every 23rd k (each run
 * compiles with LLVM: about 30 s in the ASan build).
 */
#include <math.h>

#include "fz/fz.h"
#include "tests/unit/oom_sweep.h"

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

/* Convolutions and what convert-layout rewrites around them: a [C, 1, 1]
 * constant, a batch_norm with run-time parameters, the model's own
 * permutes, a pool, a concat and a reduction. */
static const char kConvGraph[] =
    "func.func @main(%x: tensor<1x4x5x5xf32>, %w: tensor<4x4x3x3xf32>, "
    "%s: tensor<4xf32>) -> (tensor<1x8x5x5xf32>, tensor<1x4xf32>) {\n"
    "  %k = graph.constant dense<[[[1.0]], [[2.0]], [[3.0]], [[4.0]]]> : "
    "tensor<4x1x1xf32>\n"
    "  %0 = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : "
    "tensor<1x4x5x5xf32>, tensor<4x4x3x3xf32> -> tensor<1x4x5x5xf32>\n"
    "  %1 = graph.add %0, %k : tensor<1x4x5x5xf32>, tensor<4x1x1xf32> -> "
    "tensor<1x4x5x5xf32>\n"
    "  %2 = graph.batch_norm %1, %s, %s, %s, %s : tensor<1x4x5x5xf32>, "
    "tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> "
    "tensor<1x4x5x5xf32>\n"
    "  %3 = graph.transpose %2 {perm = array<i64: 0, 2, 3, 1>} : "
    "tensor<1x4x5x5xf32> -> tensor<1x5x5x4xf32>\n"
    "  %4 = graph.tanh %3 : tensor<1x5x5x4xf32>\n"
    "  %5 = graph.transpose %4 {perm = array<i64: 0, 3, 1, 2>} : "
    "tensor<1x5x5x4xf32> -> tensor<1x4x5x5xf32>\n"
    "  %6 = graph.conv2d %5, %w {pads = array<i64: 1, 1, 1, 1>} : "
    "tensor<1x4x5x5xf32>, tensor<4x4x3x3xf32> -> tensor<1x4x5x5xf32>\n"
    "  %7 = graph.max_pool %6 {kernel = array<i64: 3, 3>, pads = array<i64: "
    "1, 1, 1, 1>} : tensor<1x4x5x5xf32> -> tensor<1x4x5x5xf32>\n"
    "  %8 = graph.concat %7, %6 {axis = 1 : i64} : tensor<1x4x5x5xf32>, "
    "tensor<1x4x5x5xf32> -> tensor<1x8x5x5xf32>\n"
    "  %9 = graph.reduce_mean %7 {axes = array<i64: 2, 3>} : "
    "tensor<1x4x5x5xf32> -> tensor<1x4xf32>\n"
    "  return %8, %9 : tensor<1x8x5x5xf32>, tensor<1x4xf32>\n"
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

/* The inputs of kGraph's @main (x 4x8, w 8x8, b 8). */
static bool graph_inputs(FzContext *ctx, FzTensor **in) {
  return seeded_inputs(ctx, 4, 8, 7, in);
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

/* convert-layout (then canonicalize, cse), then the printed result. */
static bool wl_layout(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kConvGraph);
  FzPassManager *pm = m ? fzPassManagerCreate(ctx, "builtin.module") : NULL;
  bool ok = pm &&
            fzPassManagerParsePipeline(
                pm, FZ_STR("func.func(convert-layout),canonicalize,cse")) &&
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

/* A model of the ONNX node tests (libonnx-testdata, which the
 * conformance tests need too) and the inputs of its first data set. */
typedef struct NodeTest {
  void *model;
  size_t size;
  void *inputs[4]; /* serialized TensorProtos */
  size_t inputSizes[4];
  size_t numInputs;
} NodeTest;

static NodeTest g_reshape, g_loop;

/* Imports t with every input offered ifNeeded: the ones a shape operand
 * or a condition needs are bound (an import that fails and is retried). */
static bool import_specialized(FzContext *ctx, const NodeTest *t,
                               TextBuf *out) {
  FzOnnxInputValue vals[4];
  FzTensor *ins[4] = {NULL};
  bool bound[4] = {false}, ok = true;
  for (size_t i = 0; ok && i < t->numInputs; ++i) {
    ins[i] = fzOnnxReadTensorBuffer(ctx, t->inputs[i], t->inputSizes[i],
                                    "input.pb");
    vals[i] = (FzOnnxInputValue){NULL, i, ins[i], true, false};
    ok = ins[i] != NULL;
  }
  FzOnnxImportOptions o = {0, NULL, t->numInputs, vals, bound};
  FzOp *m = ok ? fzImportOnnxBufferWithOptions(ctx, t->model, t->size,
                                               "t.onnx", NULL, &o)
               : NULL;
  ok = m && fzOpVerify(m) && printed_ok(ctx, m, out);
  for (size_t i = 0; ok && i < t->numInputs; ++i) {
    char b = bound[i] ? 'B' : 'A';
    text_cb((FzStringRef){&b, 1}, out);
  }
  fzOpDestroy(m);
  for (size_t i = 0; i < t->numInputs; ++i)
    fzTensorDestroy(ins[i]);
  return ok;
}

/* Reshape with its shape an input (bound on the second import), and
 * Loop with its trip count and condition inputs (bound; the body unrolled
 * through the subgraph import). */
static bool wl_onnx_specialize(FzContext *ctx, TextBuf *out) {
  return import_specialized(ctx, &g_reshape, out) &&
         import_specialized(ctx, &g_loop, out);
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
 * place; a depthwise), a matmul and an integer matmul on bytes (uint8 x
 * int8, zero points) for the CPU-only loop transforms. */
static const char kConv[] =
    "func.func @main(%x: tensor<1x3x9x19xf32>, %w: tensor<5x3x3x3xf32>, "
    "%b: tensor<5xf32>, %v: tensor<4x3x1x1xf32>, %d: tensor<3x1x3x3xf32>, "
    "%a: tensor<7x9xf32>, %m: tensor<9x10xf32>, %qa: tensor<7x9xi8>, "
    "%qb: tensor<9x20xi8>) -> (tensor<1x5x5x10xf32>, "
    "tensor<1x4x9x19xf32>, tensor<1x3x9x19xf32>, tensor<7x10xf32>, "
    "tensor<7x20xi32>) {\n"
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
    "  %za = graph.constant dense<-128> : tensor<i8>\n"
    "  %zb = graph.constant dense<1> : tensor<i8>\n"
    "  %5 = graph.sub_zero_point %qa, %za {unsigned} : tensor<7x9xi8>, "
    "tensor<i8> -> tensor<7x9xi32>\n"
    "  %6 = graph.sub_zero_point %qb, %zb : tensor<9x20xi8>, tensor<i8> -> "
    "tensor<9x20xi32>\n"
    "  %7 = graph.matmul %5, %6 : tensor<7x9xi32>, tensor<9x20xi32> -> "
    "tensor<7x20xi32>\n"
    "  return %1, %2, %3, %4, %7 : tensor<1x5x5x10xf32>, "
    "tensor<1x4x9x19xf32>, tensor<1x3x9x19xf32>, tensor<7x10xf32>, "
    "tensor<7x20xi32>\n"
    "}\n";

/* graph-to-loop, then tile-convolutions, tile-int8-contractions and
 * tile-contractions (no LLVM:
 * every allocation of the CPU-only loop transforms is swept). */
static bool wl_tile(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kConv);
  FzPassManager *pm = m ? fzPassManagerCreate(ctx, "builtin.module") : NULL;
  bool ok = pm &&
            fzPassManagerParsePipeline(
                pm, FZ_STR("graph-to-loop,func.func(tile-convolutions{"
                           "vector-bits=128},tile-int8-contractions{vector-"
                           "bits=128},tile-contractions{vector-bits=128})")) &&
            fzPassManagerRun(pm, m) && fzOpVerify(m) &&
            printed_ok(ctx, m, out);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  return ok;
}

/* The CPU back end: fuse, lower, plan-memory, emit-llvm, JIT, and a run
 * (LLVM's own memory is not the context's; fuse's allocations are). The
 * first input lies 4 bytes off alignment, so that the run works on an
 * aligned copy (allocated through the context too). */
static bool wl_cpu(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kGraph);
  FzTensor *in[3] = {0}, **res = NULL, *store = NULL;
  size_t n = 0;
  void *own = NULL;
  FzCpuRuntime *rt = m ? fzCpuRuntimeCreate(ctx, 1) : NULL;
  FzCpuExecutable *exe = rt ? fzCpuExecutableCreate(rt, m, NULL) : NULL;
  FzCpuFunction *f = exe ? fzCpuExecutableLookup(exe, FZ_STR("main")) : NULL;
  bool ok = f && graph_inputs(ctx, in) &&
            (store = fzTensorCreate(ctx, fzF32TypeGet(ctx), 1,
                                    (int64_t[]){33})) != NULL;
  if (ok) {
    own = in[0]->data;
    in[0]->data = (char *)store->data + 4;
    memcpy(in[0]->data, own, fzTensorGetNumBytes(in[0]));
  }
  ok = ok && fzCpuFunctionRun(f, 3, in, &n, &res);
  if (own)
    in[0]->data = own;
  fzTensorDestroy(store);
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

START_TEST(test_graph_optimize) { sweep("graph-optimize", wl_graph_optimize, 1); }
END_TEST
START_TEST(test_layout) { sweep("convert-layout", wl_layout, 1); }
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
#define NODE_DATA "/usr/share/libonnx-testdata/data/node/"
/* Every allocation of the two imports (807), every 3rd under ASan (24 s
 * for all of them on a loaded 2-core machine). */
#if defined(__SANITIZE_ADDRESS__)
#define SPECIALIZE_STRIDE 3
#else
#define SPECIALIZE_STRIDE 1
#endif

/* The bytes of file path, malloc'ed (the test's, not a context's). */
static void *read_bytes(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "%s: the ONNX test data is needed", path);
  ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  ck_assert_int_gt(n, 0);
  rewind(f);
  void *p = malloc((size_t)n);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return p;
}

static void load_node_test(NodeTest *t, const char *name, size_t nIn) {
  char path[512];
  snprintf(path, sizeof path, NODE_DATA "%s/model.onnx", name);
  t->model = read_bytes(path, &t->size);
  t->numInputs = nIn;
  for (size_t i = 0; i < nIn; ++i) {
    snprintf(path, sizeof path, NODE_DATA "%s/test_data_set_0/input_%zu.pb",
             name, i);
    t->inputs[i] = read_bytes(path, &t->inputSizes[i]);
  }
}

static void free_node_test(NodeTest *t) {
  free(t->model);
  for (size_t i = 0; i < t->numInputs; ++i)
    free(t->inputs[i]);
}

START_TEST(test_onnx_specialize) {
  load_node_test(&g_reshape, "test_reshape_reordered_all_dims", 2);
  load_node_test(&g_loop, "test_loop11", 3);
  sweep("onnx import, specialized on inputs", wl_onnx_specialize,
        SPECIALIZE_STRIDE);
  free_node_test(&g_reshape);
  free_node_test(&g_loop);
}
END_TEST
START_TEST(test_cpu) { sweep("cpu compile + run", wl_cpu, 23); }
END_TEST
/* Under ASan the tile sweep (with tile-int8-contractions' allocations)
 * took 233-300 s of ctest's 300 on two busy cores: every third k there,
 * every k in the release build. */
#if defined(__SANITIZE_ADDRESS__)
#define TILE_STRIDE 3
#else
#define TILE_STRIDE 1
#endif
START_TEST(test_tile) {
  sweep("tile-convolutions + tile-int8/tile-contractions", wl_tile,
        TILE_STRIDE);
}
END_TEST

/* ctest runs each case as its own test (tests/CMakeLists.txt,
 * test_oom_<case>): a new case goes in that list too. */
static Suite *oom_suite(void) {
  Suite *s = suite_create("oom");
  add_case(s, "graph-optimize", test_graph_optimize);
  add_case(s, "convert-layout", test_layout);
  add_case(s, "interpreter", test_interpreter);
  add_case(s, "loop", test_loop_pipeline);
  add_case(s, "kernel", test_kernel);
  add_case(s, "npy", test_npy);
  add_case(s, "onnx", test_onnx);
  add_case(s, "onnx-specialize", test_onnx_specialize);
  add_case(s, "cpu", test_cpu);
  add_case(s, "tile", test_tile);
  return s;
}

int main(void) { return run_suite(oom_suite()); }

/* test_oom_gpu.c - allocation-failure sweeps over the GPU half
 * (tests/unit/oom_sweep.h states the contract each failing run must keep;
 * docs/robustness.md, "Out of memory"), none of which needs a GPU:
 *  - lower-loop-to-kernel: graph-to-loop, then the GPU mappings (a
 *    tensor-core matmul with its bias and relu, a row reduction of an
 *    elementwise chain, an elementwise kernel), the kernel IR printed;
 *    and split-K (a matmul and a conv2d cut in two k slices: the nests
 *    rewritten, then their kernels); the conv2d mappings (NCHW and NHWC
 *    implicit GEMMs, a depthwise NHWC conv); a causal attention; a bf16
 *    matmul on the warp-group (wgmma) mapping;
 *  - the PTX compile: fzGpuCompile (the NVPTX translation, code
 *    generation on two threads, the join, the launch plans and their
 *    comments) of the matmul model's kernels, the conv2d kernels, the
 *    attention kernels and the wgmma kernels (sm_90a);
 *  - a call through the CUDA runtime against the fake driver
 *    (tests/unit/fake_cuda.c, which runs no kernel): fzCudaCreate,
 *    fzCudaCompileModule of the kernel-level module, fzCudaRunFunction;
 *  - the kernel simulator (fuse-run --device sim's path): the graph
 *    lowered to kernels and every launch simulated, outputs compared.
 * Most sweeps take every k-th allocation (the strides below); the CUDA
 * call takes every one. About 45 s in a Release build on a loaded
 * 2-core machine (the strides are wider under ASan: about 150 s there).
 */
#include <unistd.h>

#include "fz/cuda_run.h"
#include "fz/gpu.h"
#include "tests/unit/oom_sweep.h"

/* A matmul with its bias and relu (the tensor-core mapping), tanh and
 * exp summed along rows (the rows mapping), and an elementwise product
 * (the elementwise mapping). */
static const char kModel[] =
    "func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>, "
    "%b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x1xf32>, "
    "tensor<8x16xf32>) {\n"
    "  %m = graph.matmul %x, %w : tensor<8x16xf32>, tensor<16x16xf32> -> "
    "tensor<8x16xf32>\n"
    "  %h = graph.add %m, %b : tensor<8x16xf32>, tensor<16xf32> -> "
    "tensor<8x16xf32>\n"
    "  %r = graph.relu %h : tensor<8x16xf32>\n"
    "  %c = graph.constant dense<0.5> : tensor<f32>\n"
    "  %s = graph.mul %x, %c : tensor<8x16xf32>, tensor<f32> -> "
    "tensor<8x16xf32>\n"
    "  %t = graph.tanh %s : tensor<8x16xf32>\n"
    "  %e = graph.exp %t : tensor<8x16xf32>\n"
    "  %sum = graph.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : "
    "tensor<8x16xf32> -> tensor<8x1xf32>\n"
    "  %p = graph.mul %t, %x : tensor<8x16xf32>\n"
    "  return %r, %sum, %p : tensor<8x16xf32>, tensor<8x1xf32>, "
    "tensor<8x16xf32>\n"
    "}\n";

/* A matmul and a conv2d with bias and relu that split-k=2 cuts in two k
 * slices each (16-bit: the tensor-core mapping, not small-M's). */
static const char kSplitModel[] =
    "func.func @main(%x: tensor<24x64xf16>, %w: tensor<64x16xf16>, "
    "%i: tensor<1x16x4x4xf16>, %k: tensor<8x16x3x3xf16>, "
    "%b: tensor<8xf16>) -> (tensor<24x16xf16>, tensor<1x8x4x4xf16>) {\n"
    "  %m = graph.matmul %x, %w : tensor<24x64xf16>, tensor<64x16xf16> -> "
    "tensor<24x16xf16>\n"
    "  %c = graph.conv2d %i, %k, %b {pads = array<i64: 1, 1, 1, 1>} : "
    "tensor<1x16x4x4xf16>, tensor<8x16x3x3xf16>, tensor<8xf16> -> "
    "tensor<1x8x4x4xf16>\n"
    "  %r = graph.relu %c : tensor<1x8x4x4xf16>\n"
    "  return %m, %r : tensor<24x16xf16>, tensor<1x8x4x4xf16>\n"
    "}\n";

/* The three conv2d mappings: an NCHW implicit GEMM with its bias and
 * relu, an NHWC implicit GEMM (k = (c, kh, kw)), and a depthwise NHWC
 * conv with relu6 (depthwise.c: 16-byte loads along C), all f16. */
static const char kConvModel[] =
    "func.func @main(%x: tensor<1x16x4x4xf16>, %k: tensor<8x16x3x3xf16>, "
    "%b: tensor<8xf16>, %y: tensor<1x4x4x16xf16>, "
    "%wk: tensor<16x16x3x3xf16>, %dw: tensor<16x1x3x3xf16>) -> "
    "(tensor<1x8x4x4xf16>, tensor<1x4x4x16xf16>, tensor<1x4x4x16xf16>) {\n"
    "  %c = graph.conv2d %x, %k, %b {pads = array<i64: 1, 1, 1, 1>} : "
    "tensor<1x16x4x4xf16>, tensor<8x16x3x3xf16>, tensor<8xf16> -> "
    "tensor<1x8x4x4xf16>\n"
    "  %r = graph.relu %c : tensor<1x8x4x4xf16>\n"
    "  %n = graph.conv2d %y, %wk {layout = \"nhwc\", "
    "pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x4x16xf16>, "
    "tensor<16x16x3x3xf16> -> tensor<1x4x4x16xf16>\n"
    "  %d = graph.conv2d %y, %dw {layout = \"nhwc\", "
    "pads = array<i64: 1, 1, 1, 1>, groups = 16 : i64} : "
    "tensor<1x4x4x16xf16>, tensor<16x1x3x3xf16> -> tensor<1x4x4x16xf16>\n"
    "  %e = graph.clamp %d {min = 0.0 : f32, max = 6.0 : f32} : "
    "tensor<1x4x4x16xf16>\n"
    "  return %r, %n, %e : tensor<1x8x4x4xf16>, tensor<1x4x4x16xf16>, "
    "tensor<1x4x4x16xf16>\n"
    "}\n";

/* A bf16 matmul with its bias and relu on Hopper's warp-group mapping
 * (wgmma, sm_90a), at sizes that are no multiple of its tile. */
static const char kWgmmaModel[] =
    "func.func @main(%a: tensor<80x40xbf16>, %b: tensor<40x72xbf16>, "
    "%bias: tensor<72xbf16>) -> tensor<80x72xbf16> {\n"
    "  %0 = graph.matmul %a, %b : tensor<80x40xbf16>, tensor<40x72xbf16> -> "
    "tensor<80x72xbf16>\n"
    "  %1 = graph.add %0, %bias : tensor<80x72xbf16>, tensor<72xbf16> -> "
    "tensor<80x72xbf16>\n"
    "  %2 = graph.relu %1 : tensor<80x72xbf16>\n"
    "  return %2 : tensor<80x72xbf16>\n"
    "}\n";

/* A causal f16 attention (graph-to-loop's streaming nest with its f32
 * accumulator, then whichever GPU mapping takes it). */
static const char kAttentionModel[] =
    "func.func @main(%q: tensor<1x2x5x8xf16>, %k: tensor<1x2x7x8xf16>, "
    "%v: tensor<1x2x7x8xf16>) -> tensor<1x2x5x8xf16> {\n"
    "  %0 = graph.attention %q, %k, %v {causal = true, scale = 0.35 : f64} "
    ": tensor<1x2x5x8xf16>, tensor<1x2x7x8xf16>, tensor<1x2x7x8xf16> -> "
    "tensor<1x2x5x8xf16>\n"
    "  return %0 : tensor<1x2x5x8xf16>\n"
    "}\n";

/* The sweeps that sample (FZ_OOM_STRIDE=1 takes every k): a compile
 * with LLVM or a simulated launch costs milliseconds, and every k runs
 * the workload four times. Odd strides, so that every kind of
 * allocation (they tend to come in pairs) is hit. */
#if defined(__SANITIZE_ADDRESS__)
/* Under ASan and UBSan every run is several times slower, and CI's
 * sanitizer stage gives this test ctest's 300 s on two busy cores (it
 * timed out there once the split-K sweep came): sparser samples, still
 * odd. */
enum {
  kLowerStride = 7,
  kSimStride = 11,
  kLlvmStride = 7,
  kSplitStride = 31,
  kConvStride = 37,
  kConvPtxStride = 23
};
#else
enum {
  kLowerStride = 3,
  kSimStride = 5,
  kLlvmStride = 3,
  kSplitStride = 13,
  kConvStride = 11,
  kConvPtxStride = 7
};
#endif

static const char kToKernels[] =
    "graph-to-loop,lower-loop-to-kernel{precision=tf32}";

/* kModel's inputs (x 8x16, w 16x16, b 16). */
static bool model_inputs(FzContext *ctx, FzTensor **in) {
  return seeded_inputs(ctx, 8, 16, 11, in);
}

/* Appends what a program says: its PTX, then every launch's plan. */
static void print_program(const FzGpuProgram *p, TextBuf *out) {
  text_cb((FzStringRef){p->ptx, p->ptxLen}, out);
  for (size_t i = 0; i < p->numFunctions; ++i) {
    const FzGpuFunction *f = &p->functions[i];
    char line[160];
    int n = snprintf(line, sizeof line,
                     "@%s: %zu args, %zu temps, %zu "
                     "consts\n",
                     f->name, f->numArgs, f->numTemps, f->numConsts);
    text_cb((FzStringRef){line, (size_t)n}, out);
    for (size_t k = 0; k < f->numKernels; ++k) {
      const FzGpuKernel *K = &f->kernels[k];
      n = snprintf(line, sizeof line, "%s %s %zu args %lld bytes\n", K->name,
                   K->mapping, K->numArgs, (long long)K->bytesMoved);
      text_cb((FzStringRef){line, (size_t)n}, out);
    }
  }
}

static void gpu_options(FzGpuOptions *go) {
  fzGpuOptionsInit(go);
  go->libdevice = "";     /* the inline polynomials, on every machine */
  go->codegenThreads = 2; /* the pool, its schedule */
}

/*===--- Workloads ------------------------------------------------------===*/

/* lower-loop-to-kernel called as fzGpuCompile calls it (no pass manager,
 * whose verifier and sticky-flag check would turn a failure absorbed
 * into invalid IR into an error) on `text` after graph -> loop, with
 * split-k `splitK`: an absorbed failure shows as printed IR that differs
 * from the clean run's. */
static bool lower_text(FzContext *ctx, const char *text, const char *splitK,
                       bool wgmma, TextBuf *out) {
  FzOp *m = parse_text(ctx, text);
  FzCpuPipelineOptions po;
  fzCpuPipelineOptionsInit(&po);
  bool ok = m && fzLowerModuleForCpu(m, &po);
  sweep_mark(); /* graph -> loop: test_oom.c's loop sweep */
  FzLoopToKernelOptions ko;
  fzLoopToKernelOptionsInit(&ko);
  ko.precision = FZ_PRECISION_TF32;
  ko.splitK = splitK;
  ko.wgmma = wgmma;
  ok = ok && fzLowerLoopToKernel(m, &ko) && printed_ok(ctx, m, out);
  fzOpDestroy(m);
  return ok;
}

static bool wl_lower(FzContext *ctx, TextBuf *out) {
  return lower_text(ctx, kModel, NULL, false, out);
}

/* split-K: kSplitModel lowered with split-k=2 (the printed IR must show
 * both splits, checked by test_split). */
static bool wl_split(FzContext *ctx, TextBuf *out) {
  return lower_text(ctx, kSplitModel, "2", false, out);
}

/* The conv2d mappings (kConvModel). */
static bool wl_conv(FzContext *ctx, TextBuf *out) {
  return lower_text(ctx, kConvModel, NULL, false, out);
}

/* Attention (kAttentionModel). */
static bool wl_attention(FzContext *ctx, TextBuf *out) {
  return lower_text(ctx, kAttentionModel, NULL, false, out);
}

/* The warp-group matmul mapping (kWgmmaModel). */
static bool wl_wgmma(FzContext *ctx, TextBuf *out) {
  return lower_text(ctx, kWgmmaModel, NULL, true, out);
}

/* The kernel level that wl_ptx compiles (wl_lower's or wl_conv's clean
 * result), made once per test. */
static TextBuf g_kernels;
/* The arch wl_ptx compiles for (NULL: the default). */
static const char *g_arch;

/* The kernel level to PTX: fzGpuCompile (as fzCudaCompileModule calls
 * it, after the graph -> loop pipeline and lower-loop-to-kernel, which
 * test_oom.c's loop sweep and wl_lower cover): the NVPTX translation,
 * code generation on two threads, the join, the plans. */
static bool wl_ptx(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, g_kernels.data);
  sweep_mark(); /* the parser has sweeps of its own */
  FzGpuOptions go;
  gpu_options(&go);
  if (g_arch)
    go.arch = g_arch;
  FzGpuProgram *p = m ? fzGpuCompile(m, &go) : NULL;
  if (p)
    print_program(p, out);
  fzGpuProgramDestroy(p);
  fzOpDestroy(m);
  return p != NULL;
}

/* A call through the CUDA runtime against the fake driver: the device
 * and fzCudaCompileModule (unoptimized: the PTX is not what is tested
 * here), then the call swept (device buffers, kernel parameters, the
 * module cache, the CUDA graph, the outputs copied back; no kernel runs
 * in the fake). */
static bool wl_cuda(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kModel);
  FzTensor *in[3] = {0}, **res = NULL;
  size_t n = 0;
  FzGpuOptions go;
  gpu_options(&go);
  go.optLevel = 0;
  FzCuda *cu = m ? fzCudaCreate(ctx, 0) : NULL;
  FzGpuProgram *p = cu ? fzCudaCompileModule(cu, m, true, &go) : NULL;
  sweep_mark();
  bool ok = p && model_inputs(ctx, in) &&
            fzCudaRunFunction(cu, p, "main", 3, in, ctx, &n, &res);
  if (ok)
    print_tensors(out, n, res);
  fzTensorArrayDestroy(ctx, n, res);
  destroy_inputs(in, 3);
  fzGpuProgramDestroy(p);
  fzCudaDestroy(cu);
  fzOpDestroy(m);
  return ok;
}

/* fuse-run --device sim: the graph lowered to kernels, then the loop
 * interpreter with every kernel.launch run by the simulator (swept). */
static bool wl_sim(FzContext *ctx, TextBuf *out) {
  FzOp *m = parse_text(ctx, kModel);
  FzPassManager *pm = m ? fzPassManagerCreate(ctx, "builtin.module") : NULL;
  bool ok =
      pm &&
      fzPassManagerParsePipeline(pm, fzStringRefFromCString(kToKernels)) &&
      fzPassManagerRun(pm, m);
  fzPassManagerDestroy(pm);
  sweep_mark(); /* lowering: wl_lower */
  FzTensor *in[3] = {0}, **res = NULL;
  size_t n = 0;
  FzLoopInterpExtension sim;
  fzKernelSimExtensionInit(&sim, NULL);
  FzLoopInterpOptions o = {.extension = &sim};
  ok = ok && model_inputs(ctx, in) &&
       fzLoopRunFunction(main_of(m), 3, in, NULL, &o, &n, &res);
  if (ok)
    print_tensors(out, n, res);
  fzTensorArrayDestroy(ctx, n, res);
  destroy_inputs(in, 3);
  fzOpDestroy(m);
  return ok;
}

/*===--- Tests ----------------------------------------------------------===*/

START_TEST(test_lower) {
  sweep("lower-loop-to-kernel", wl_lower, kLowerStride);
}
END_TEST
START_TEST(test_split) {
  CountingAlloc c = {0};
  FzContext *ctx = sweep_context(&c);
  TextBuf clean = {0};
  ck_assert(wl_split(ctx, &clean));
  ck_assert_msg(clean.data && strstr(clean.data, "buffer<2x24x16xf32>") &&
                    strstr(clean.data, "buffer<2x1x8x4x4xf32>"),
                "split-k=2 did not split both nests");
  text_free(&clean);
  fzContextDestroy(ctx);
  /* 18,000 allocations a run (two nests rewritten, then their kernels):
   * a wider sample than the plain lowering's. */
  sweep("split-k", wl_split, kSplitStride);
}
END_TEST
START_TEST(test_ptx) {
  CountingAlloc c = {0};
  FzContext *ctx = sweep_context(&c);
  ck_assert(wl_lower(ctx, &g_kernels));
  fzContextDestroy(ctx);
  sweep("kernel level to PTX", wl_ptx, kLlvmStride);
  text_free(&g_kernels);
}
END_TEST
START_TEST(test_conv) {
  CountingAlloc c = {0};
  FzContext *ctx = sweep_context(&c);
  TextBuf clean = {0};
  ck_assert(wl_conv(ctx, &clean));
  fzContextDestroy(ctx);
  /* Each conv on its mapping (a fallback would be a different test). */
  ck_assert_msg(clean.data && strstr(clean.data, "@main_k2") &&
                    strstr(clean.data, "vector<8xf16>") &&
                    strstr(clean.data, "kernel.mma"),
                "kConvModel: not the implicit-GEMM and depthwise mappings");
  /* 14,700 allocations a run (three mappings, their plans and the
   * implicit GEMMs' pipelines): sampled like split-K. */
  sweep("conv2d mappings", wl_conv, kConvStride);
  g_kernels = clean;
  /* Its tensor-core kernels take LLVM about 80 ms each time: a wider
   * sample than kModel's. */
  sweep("conv2d kernels to PTX", wl_ptx, kConvPtxStride);
  text_free(&g_kernels);
}
END_TEST
START_TEST(test_attention) {
  CountingAlloc c = {0};
  FzContext *ctx = sweep_context(&c);
  TextBuf clean = {0};
  ck_assert(wl_attention(ctx, &clean));
  fzContextDestroy(ctx);
  ck_assert_msg(clean.data && strstr(clean.data, "kernel.launch"),
                "kAttentionModel: no kernel");
  sweep("attention to kernels", wl_attention, kLowerStride);
  g_kernels = clean;
  sweep("attention kernels to PTX", wl_ptx, kLlvmStride);
  text_free(&g_kernels);
}
END_TEST
START_TEST(test_wgmma) {
  CountingAlloc c = {0};
  FzContext *ctx = sweep_context(&c);
  TextBuf clean = {0};
  ck_assert(wl_wgmma(ctx, &clean));
  fzContextDestroy(ctx);
  ck_assert_msg(clean.data && strstr(clean.data, "kernel.wgmma"),
                "kWgmmaModel: not the warp-group mapping");
  sweep("wgmma mapping", wl_wgmma, kLowerStride);
  g_kernels = clean;
  g_arch = "sm_90a";
  sweep("wgmma kernels to PTX (sm_90a)", wl_ptx, kLlvmStride);
  g_arch = NULL;
  text_free(&g_kernels);
}
END_TEST
START_TEST(test_sim) {
  sweep("kernel simulator", wl_sim, kSimStride);
}
END_TEST

#ifdef FZ_FAKE_CUDA
START_TEST(test_cuda) {
  ck_assert_msg(access(FZ_FAKE_CUDA, R_OK) == 0, "no fake driver at %s",
                FZ_FAKE_CUDA);
  setenv("FZ_CUDA_LIBRARY", FZ_FAKE_CUDA, 1);
  sweep("cuda call (fake driver)", wl_cuda, 1);
  unsetenv("FZ_CUDA_LIBRARY");
}
END_TEST
#endif

/* ctest runs each case as its own test (tests/CMakeLists.txt,
 * test_oom_gpu_<case>): a new case goes in that list too. */
static Suite *oom_gpu_suite(void) {
  Suite *s = suite_create("oom_gpu");
  add_case(s, "lower", test_lower);
  add_case(s, "split", test_split);
  add_case(s, "ptx", test_ptx);
  add_case(s, "conv", test_conv);
  add_case(s, "attention", test_attention);
  add_case(s, "wgmma", test_wgmma);
  add_case(s, "sim", test_sim);
#ifdef FZ_FAKE_CUDA
  add_case(s, "cuda", test_cuda);
#endif
  return s;
}

int main(void) {
  return run_suite(oom_gpu_suite());
}

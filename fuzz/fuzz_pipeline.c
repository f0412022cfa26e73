/* fuzz_pipeline.c - libFuzzer target for the pass-pipeline parser
 * (ir/pipeline_parser.c), the pass registry's option parsing, and the
 * passes themselves under any options.
 *
 * Invariants:
 *  1. a pipeline text that parses prints (fzPassManagerPrintPipeline) to
 *     a text that parses again and prints identically; a text that does
 *     not parse leaves the manager unchanged (no entries added) and is
 *     reported as a diagnostic only;
 *  2. a pipeline that parses runs on a fixed graph module (matmul, bias,
 *     softmax and gelu in primitive form, a layer norm, reshapes and
 *     transposes; seeded inputs): it may fail with a diagnostic, but when
 *     it succeeds the module verifies, and running @main (the graph
 *     interpreter, or the loop interpreter once the pipeline lowered it)
 *     gives the original's results within 1e-4 + 1e-3 * |want|
 *     (fast-math options are within that on these inputs). A pipeline
 *     that runs convert-contractions (the bf16/fp16 precision policies:
 *     the matmul's operands rounded to 8 or 11 significant bits, its
 *     result rounded to the 16-bit type) is held to 2e-2 + 2e-2 * |want|
 *     instead: docs/codegen.md's bound for the matmul here (K = 8,
 *     |x|, |w| <= 2) is 2^-7 sqrt(8) 4 = 0.088 before the softmax and
 *     layer norm; the worst seen on these inputs is 1.7e-2 at 1.25 for
 *     bf16 and 1.2e-3 for fp16.
 */
#include <math.h>
#include <string.h>

#include "fuzz/fuzz_common.h"

static const char kModule[] =
    "func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, "
    "%b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>) {\n"
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
    "  %ln = graph.layer_norm %g {axis = 1 : i64} : tensor<4x8xf32>\n"
    "  %r = graph.add %ln, %p : tensor<4x8xf32>\n"
    "  %f = graph.reshape %r : tensor<4x8xf32> -> tensor<32xf32>\n"
    "  %u = graph.reshape %f : tensor<32xf32> -> tensor<4x8xf32>\n"
    "  %t = graph.transpose %u {perm = array<i64: 1, 0>} : tensor<4x8xf32> "
    "-> tensor<8x4xf32>\n"
    "  %n = graph.neg %t : tensor<8x4xf32>\n"
    "  %nn = graph.neg %n : tensor<8x4xf32>\n"
    "  %two = graph.constant dense<2.0> : tensor<f32>\n"
    "  %d = graph.div %nn, %two : tensor<8x4xf32>, tensor<f32> -> "
    "tensor<8x4xf32>\n"
    "  return %r, %d : tensor<4x8xf32>, tensor<8x4xf32>\n"
    "}\n";

/* The tolerance of invariant 2: exact-precision pipelines, and those
 * that lower the contractions to 16-bit operands (convert-contractions). */
typedef struct {
  double atol, rtol;
} Tolerance;

static Tolerance tolerance_for(FzStringRef pipeline) {
  static const char kLossy[] = "convert-contractions";
  size_t n = sizeof kLossy - 1;
  for (size_t i = 0; i + n <= pipeline.length; ++i)
    if (memcmp(pipeline.data + i, kLossy, n) == 0)
      return (Tolerance){2e-2, 2e-2};
  return (Tolerance){1e-4, 1e-3};
}

static bool close_enough(double a, double b, Tolerance tol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= tol.atol + tol.rtol * fabs(b);
}

/* The original's results on the seeded inputs (computed per context). */
static bool interpret(FzOp *main, FzTensor *const *in, size_t *n,
                      FzTensor ***out) {
  return fzInterpretFunction(main, 3, in, NULL, n, out);
}

/* Runs a loop-level @main (inputs, then one output buffer per result of
 * the original) and compares with want. */
static void check_lowered(FzContext *ctx, FzOp *main, FzTensor *const *in,
                          size_t nWant, FzTensor *const *want,
                          FzStringRef pipeline) {
  FzTensor *args[3 + 2] = {in[0], in[1], in[2], NULL, NULL};
  if (nWant > 2) abort();
  for (size_t i = 0; i < nWant; ++i) {
    args[3 + i] = fzTensorCreate(ctx, want[i]->dtype, want[i]->rank,
                                 want[i]->shape);
    if (!args[3 + i]) abort();
  }
  Tolerance tol = tolerance_for(pipeline);
  FzLoopInterpOptions o = {.maxSteps = 1 << 24};
  if (fzLoopInterpretFunction(main, 3 + nWant, args, &o))
    for (size_t i = 0; i < nWant; ++i)
      for (int64_t k = 0; k < want[i]->numElements; ++k)
        if (!close_enough(fzTensorGetF64(args[3 + i], k),
                          fzTensorGetF64(want[i], k), tol)) {
          fprintf(stderr, "result %zu element %lld: got %.9g, want %.9g\n", i,
                  (long long)k, fzTensorGetF64(args[3 + i], k),
                  fzTensorGetF64(want[i], k));
          fuzz_fail("a pipeline changed the results (loop level)", pipeline,
                    FZ_STR(""));
        }
  for (size_t i = 0; i < nWant; ++i) fzTensorDestroy(args[3 + i]);
}

/* Runs the parsed pipeline on a fresh copy of the module; checks 2. */
static void run_pipeline(FzContext *ctx, FzPassManager *pm,
                         FzStringRef pipeline) {
  FzOp *m = fzParseSource(ctx, FZ_STR(kModule), FZ_STR("module.fuse"), 0);
  if (!m) abort();
  FzTensor *in[3];
  static const int64_t sx[] = {4, 8}, sw[] = {8, 8}, sb[] = {8};
  in[0] = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, sx);
  in[1] = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, sw);
  in[2] = fzTensorCreate(ctx, fzF32TypeGet(ctx), 1, sb);
  unsigned seed = 11;
  for (int i = 0; i < 3; ++i) {
    if (!in[i]) abort();
    for (int64_t k = 0; k < in[i]->numElements; ++k) {
      seed = seed * 1103515245u + 12345u;
      fzTensorSetF64(in[i], k, ((seed >> 8) % 4001) / 1000.0 - 2.0);
    }
  }
  size_t nWant = 0, nGot = 0;
  FzTensor **want = NULL, **got = NULL;
  FzOp *main = fzSymbolTableLookupIn(m, FZ_STR("main"));
  if (!main || !interpret(main, in, &nWant, &want)) abort();
  if (fzPassManagerRun(pm, m)) {
    if (!fzOpVerify(m))
      fuzz_fail("a pipeline succeeded but left invalid IR", pipeline,
                FZ_STR(""));
    main = fzSymbolTableLookupIn(m, FZ_STR("main"));
    if (!main)
      fuzz_fail("a pipeline erased @main", pipeline, FZ_STR(""));
    if (fzOpGetAttr(main, FZ_STR("loop.num_outputs"))) {
      check_lowered(ctx, main, in, nWant, want, pipeline);
    } else if (interpret(main, in, &nGot, &got)) {
      if (nGot != nWant) abort();
      for (size_t i = 0; i < nWant; ++i)
        for (int64_t k = 0; k < want[i]->numElements; ++k)
          if (!close_enough(fzTensorGetF64(got[i], k),
                            fzTensorGetF64(want[i], k),
                            tolerance_for(pipeline))) {
            fprintf(stderr, "result %zu element %lld: got %.9g, want %.9g\n",
                    i, (long long)k, fzTensorGetF64(got[i], k),
                    fzTensorGetF64(want[i], k));
            fuzz_fail("a pipeline changed the results", pipeline, FZ_STR(""));
          }
      fzTensorArrayDestroy(ctx, nGot, got);
    } else {
      fuzz_fail("the interpreter fails after a pipeline succeeded", pipeline,
                FZ_STR(""));
    }
  }
  fzTensorArrayDestroy(ctx, nWant, want);
  for (int i = 0; i < 3; ++i) fzTensorDestroy(in[i]);
  fzOpDestroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FzContext *ctx = fuzz_context_create();
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  if (!pm) abort();
  FzStringRef text = {(const char *)data, size};
  if (fzPassManagerParsePipeline(pm, text)) {
    FuzzBuf first = {0}, second = {0};
    fzPassManagerPrintPipeline(pm, fuzz_buf_append, &first);
    FzPassManager *pm2 = fzPassManagerCreate(ctx, "builtin.module");
    if (!pm2) abort();
    if (!fzPassManagerParsePipeline(pm2, fuzz_buf_ref(&first)))
      fuzz_fail("printed pipeline does not parse", text, fuzz_buf_ref(&first));
    fzPassManagerPrintPipeline(pm2, fuzz_buf_append, &second);
    if (!fzStringRefEqual(fuzz_buf_ref(&first), fuzz_buf_ref(&second)))
      fuzz_fail("pipeline print -> parse -> print differs",
                fuzz_buf_ref(&first), fuzz_buf_ref(&second));
    fzPassManagerDestroy(pm2);
    run_pipeline(ctx, pm, fuzz_buf_ref(&first));
    free(first.data);
    free(second.data);
  } else if (fzPassManagerGetNumEntries(pm) != 0) {
    fuzz_fail("failed pipeline parse changed the manager", text, FZ_STR(""));
  }
  fzPassManagerDestroy(pm);
  fzContextDestroy(ctx);
  return 0;
}

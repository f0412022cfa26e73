/* tests/unit/test_loop_lower.c - Check suite of lower-graph-to-loop and
 * plan-memory through their C API: the calling convention, one nest per
 * group, agreement with the graph interpreter (fzLoopRunFunction against
 * fzInterpretFunction on the same inputs), idempotence, plan-memory
 * statistics, allocation failures at every point of a lowering, and
 * what the shared conv-nest matcher (dialects/loop/nest_match.h) reports
 * on the nests of NCHW and NHWC convolutions.
 */
#include <math.h>

#include "dialects/loop/nest_match.h"
#include "fz/loop.h"
#include "fz/pass.h"
#include "tests/unit/test_helpers.h"

static const char kModule[] =
    "func.func @main(%x: tensor<6x10xf32>, %b: tensor<10xf32>, %w: "
    "tensor<10x4xf32>) -> (tensor<6x10xf32>, tensor<6x4xf32>, tensor<6xf32>) "
    "{\n"
    "  %0 = graph.fusion(%x, %b) : (tensor<6x10xf32>, tensor<10xf32>) -> "
    "tensor<6x10xf32> {\n"
    "  ^bb0(%a0: tensor<6x10xf32>, %a1: tensor<10xf32>):\n"
    "    %1 = graph.add %a0, %a1 : tensor<6x10xf32>, tensor<10xf32> -> "
    "tensor<6x10xf32>\n"
    "    %2 = graph.softmax %1 {axis = 1 : i64} : tensor<6x10xf32>\n"
    "    graph.yield %2 : tensor<6x10xf32>\n"
    "  }\n"
    "  %3 = graph.matmul %0, %w : tensor<6x10xf32>, tensor<10x4xf32> -> "
    "tensor<6x4xf32>\n"
    "  %4 = graph.tanh %3 : tensor<6x4xf32>\n"
    "  %5 = graph.reduce_max %x {axes = array<i64: 1>} : tensor<6x10xf32> -> "
    "tensor<6xf32>\n"
    "  return %0, %4, %5 : tensor<6x10xf32>, tensor<6x4xf32>, tensor<6xf32>\n"
    "}\n";

static FzContext *lower_context(void) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  return ctx;
}

static FzOp *parse(FzContext *ctx, const char *src) {
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("t.fuse"),
                          0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  return m;
}

static FzBlock *body_of(FzOp *op) {
  return fzRegionGetFirstBlock(fzOpGetRegion(op, 0));
}

static size_t count_top(FzOp *func, FzLoopOpcode opc) {
  size_t n = 0;
  for (FzOp *op = fzBlockGetFirstOp(body_of(func)); op;
       op = fzOpGetNextInBlock(op))
    n += fzLoopGetOpcode(op) == opc;
  return n;
}

/* Deterministic inputs in +-[0.25, 2]. */
static FzTensor **make_inputs(FzContext *ctx, FzOp *func, size_t *n) {
  FzType *ft =
      fzTypeAttrGetValue(fzOpGetInherentAttr(func, FZ_STR("function_type")));
  *n = fzFunctionTypeGetNumInputs(ft);
  FzTensor **in = calloc(*n, sizeof *in);
  uint64_t s = 12345;
  for (size_t i = 0; i < *n; ++i) {
    in[i] = fzTensorCreateFromType(ctx, fzFunctionTypeGetInput(ft, i));
    ck_assert_ptr_nonnull(in[i]);
    for (int64_t k = 0; k < in[i]->numElements; ++k) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      double u = (double)(s >> 11) / 9007199254740992.0;
      double v = 0.25 + 1.75 * u;
      fzTensorSetF64(in[i], k, (s >> 7) & 1 ? v : -v);
    }
  }
  return in;
}

START_TEST(test_lower_structure_and_values) {
  FzContext *ctx = lower_context();
  FzOp *ref = parse(ctx, kModule), *m = parse(ctx, kModule);
  FzOp *rf = fzSymbolTableLookupIn(ref, FZ_STR("main"));
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("main"));
  ck_assert(fzLowerGraphToLoop(m));
  ck_assert(fzOpVerify(m));
  /* Calling convention: 3 inputs then 3 outputs, no results. */
  FzType *ft =
      fzTypeAttrGetValue(fzOpGetInherentAttr(f, FZ_STR("function_type")));
  ck_assert_uint_eq(fzFunctionTypeGetNumInputs(ft), 6);
  ck_assert_uint_eq(fzFunctionTypeGetNumResults(ft), 0);
  for (size_t i = 0; i < 6; ++i) {
    FzType *t = fzFunctionTypeGetInput(ft, i);
    ck_assert_int_eq(fzTypeGetKind(t), FZ_TYPE_BUFFER);
    ck_assert_ptr_null(fzBufferTypeGetStrides(t));
  }
  FzAttr *no = fzOpGetAttr(f, FZ_STR("loop.num_outputs"));
  ck_assert_ptr_nonnull(no);
  ck_assert_int_eq(fzIntegerAttrGetValue(no), 3);
  /* One nest per group or lone op: softmax group, matmul, tanh, reduce;
   * the only temporary is the matmul's result. */
  ck_assert_uint_eq(count_top(f, FZ_LOOP_OP_PARALLEL), 4);
  ck_assert_uint_eq(count_top(f, FZ_LOOP_OP_ALLOC), 1);
  ck_assert_uint_eq(count_top(f, FZ_LOOP_OP_DEALLOC), 1);
  /* Lowering again changes nothing. */
  TextBuf a = {0}, b = {0};
  fzOpPrint(m, 0, text_cb, &a);
  ck_assert(fzLowerGraphToLoop(m));
  fzOpPrint(m, 0, text_cb, &b);
  ck_assert_str_eq(a.data, b.data);
  text_free(&a);
  text_free(&b);
  /* The same numbers as the graph interpreter. */
  size_t nIn, nWant, nGot;
  FzTensor **in = make_inputs(ctx, rf, &nIn), **want, **got;
  ck_assert(fzInterpretFunction(rf, nIn, in, NULL, &nWant, &want));
  FzLoopInterpOptions opts = {.poison = true};
  ck_assert(fzLoopRunFunction(f, nIn, in, NULL, &opts, &nGot, &got));
  ck_assert_uint_eq(nGot, nWant);
  for (size_t k = 0; k < nGot; ++k) {
    ck_assert_uint_eq(got[k]->numElements, want[k]->numElements);
    for (int64_t e = 0; e < got[k]->numElements; ++e) {
      double g = fzTensorGetF64(got[k], e), w = fzTensorGetF64(want[k], e);
      ck_assert_msg(fabs(g - w) <= 1e-6 + 1e-5 * fabs(w),
                    "output %zu element %lld: %g vs %g", k, (long long)e, g,
                    w);
    }
  }
  fzTensorArrayDestroy(ctx, nGot, got);
  fzTensorArrayDestroy(ctx, nWant, want);
  for (size_t i = 0; i < nIn; ++i)
    fzTensorDestroy(in[i]);
  free(in);
  fzOpDestroy(ref);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* fzLoopRunFunction lowers a graph function itself (default pipeline). */
START_TEST(test_run_function_pipeline) {
  FzContext *ctx = lower_context();
  FzOp *m = parse(ctx, kModule);
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("main"));
  size_t nIn, nGot;
  FzTensor **in = make_inputs(ctx, f, &nIn), **got;
  ck_assert(fzLoopRunFunction(f, nIn, in, NULL, NULL, &nGot, &got));
  ck_assert_uint_eq(nGot, 3);
  ck_assert_ptr_nonnull(fzOpGetAttr(f, FZ_STR("loop.num_outputs")));
  /* Softmax rows sum to 1. */
  for (int64_t r = 0; r < 6; ++r) {
    double s = 0;
    for (int64_t c = 0; c < 10; ++c)
      s += fzTensorGetF64(got[0], r * 10 + c);
    ck_assert(fabs(s - 1.0) < 1e-5);
  }
  fzTensorArrayDestroy(ctx, nGot, got);
  /* Wrong input count: an error, no outputs. */
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert(!fzLoopRunFunction(f, 2, in, NULL, NULL, &nGot, &got));
  ck_assert_ptr_null(got);
  ck_assert_diag(&log, "takes 3 inputs but 2 were given");
  diag_log_end(&log);
  for (size_t i = 0; i < nIn; ++i)
    fzTensorDestroy(in[i]);
  free(in);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_plan_memory_stats) {
  FzContext *ctx = lower_context();
  FzOp *m = parse(ctx,
                  "func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {\n"
                  "  %0 = graph.exp %x : tensor<16xf32>\n"
                  "  %1 = graph.neg %0 : tensor<16xf32>\n"
                  "  %2 = graph.reduce_sum %1 {keepdims = true} : "
                  "tensor<16xf32> -> tensor<1xf32>\n"
                  "  %3 = graph.sub %x, %2 : tensor<16xf32>, tensor<1xf32> -> "
                  "tensor<16xf32>\n"
                  "  %4 = graph.tanh %3 : tensor<16xf32>\n"
                  "  %5 = graph.sqrt %x : tensor<16xf32>\n"
                  "  return %4 : tensor<16xf32>\n"
                  "}\n");
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("f"));
  ck_assert(fzLowerGraphToLoop(m));
  FzMemoryPlanStats s;
  ck_assert(fzPlanMemory(f, &s));
  ck_assert(fzOpVerify(m));
  /* exp; neg in place; the sum's one element reuses exp's memory (the
   * full reduction loop reads it before the sum is stored); sub reuses it
   * again; sqrt is never read. One buffer is left. */
  ck_assert_uint_eq(s.allocsBefore, 5);
  ck_assert_uint_eq(s.allocsAfter, 1);
  ck_assert_uint_eq(s.inPlace, 1);
  ck_assert_uint_eq(s.reused, 2);
  ck_assert_int_eq(s.peakBytesBefore, 128);
  ck_assert_int_eq(s.peakBytesAfter, 64);
  ck_assert_uint_eq(count_top(f, FZ_LOOP_OP_ALLOC), 1);
  ck_assert_uint_eq(count_top(f, FZ_LOOP_OP_DEALLOC), 1);
  /* Planning again finds nothing more to do. */
  ck_assert(fzPlanMemory(f, &s));
  ck_assert_uint_eq(s.allocsBefore, s.allocsAfter);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Every allocation of a lowering may fail: an error, no crash, and the
 * context frees everything. */
START_TEST(test_lower_allocation_failures) {
  size_t failures = 0;
  for (size_t failAt = 1;; ++failAt) {
    CountingAlloc c = {0};
    FzAllocator a = counting_allocator(&c);
    FzContext *ctx = fzContextCreateWithAllocator(&a);
    ck_assert(fzRegisterAllDialects(ctx));
    ck_assert(fzRegisterLoopDialect(ctx));
    FzOp *m = parse(ctx, kModule);
    DiagLog log;
    diag_log_begin(&log, ctx);
    c.failAt = c.numAllocs + failAt;
    bool ok = fzLowerGraphToLoop(m);
    c.failAt = 0;
    diag_log_end(&log);
    if (ok)
      ck_assert(fzOpVerify(m));
    fzOpDestroy(m);
    fzContextDestroy(ctx);
    ck_assert_uint_eq(c.liveBlocks, 0);
    if (ok && c.numFailures == 0)
      break;
    failures++;
    ck_assert_uint_lt(failAt, 20000);
  }
  ck_assert_uint_gt(failures, 10);
}
END_TEST

/* A grouped conv (groups 2, strides 2x1, pads top 1 left 0 bottom 1
 * right 2, dilations 1x2) in both layouts: input 2x4x7x9 (N, C, H, W),
 * weight 6x2x3x3, output 2x6x4x7 (N, M, OH, OW). */
static const char kConvNchw[] =
    "func.func @main(%x: tensor<2x4x7x9xf32>, %w: tensor<6x2x3x3xf32>) -> "
    "tensor<2x6x4x7xf32> {\n"
    "  %0 = graph.conv2d %x, %w {groups = 2 : i64, strides = array<i64: 2, "
    "1>, pads = array<i64: 1, 0, 1, 2>, dilations = array<i64: 1, 2>} : "
    "tensor<2x4x7x9xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x7xf32>\n"
    "  return %0 : tensor<2x6x4x7xf32>\n"
    "}\n";
static const char kConvNhwc[] =
    "func.func @main(%x: tensor<2x7x9x4xf32>, %w: tensor<6x2x3x3xf32>) -> "
    "tensor<2x4x7x6xf32> {\n"
    "  %0 = graph.conv2d %x, %w {groups = 2 : i64, strides = array<i64: 2, "
    "1>, pads = array<i64: 1, 0, 1, 2>, dilations = array<i64: 1, 2>, "
    "layout = \"nhwc\"} : tensor<2x7x9x4xf32>, tensor<6x2x3x3xf32> -> "
    "tensor<2x4x7x6xf32>\n"
    "  return %0 : tensor<2x4x7x6xf32>\n"
    "}\n";

/* convMatch reports the layout, the roles of the ivs and the same
 * window geometry for both. */
START_TEST(test_conv_match_layouts) {
  FzContext *ctx = lower_context();
  for (int L = 0; L < 2; ++L) {
    FzOp *m = parse(ctx, L ? kConvNhwc : kConvNchw);
    FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("main"));
    ck_assert(fzLowerGraphToLoop(m));
    FzOp *par = fzBlockGetFirstOp(body_of(f));
    while (par && fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL)
      par = fzOpGetNextInBlock(par);
    ck_assert_ptr_nonnull(par);
    ConvNest C;
    memset(&C, 0, sizeof C);
    C.T.ctx = ctx;
    fzPtrMapInit(&C.T.deps, ctx);
    char why[160] = "";
    bool isConv = false;
    ck_assert_msg(convMatch(&C, par, &isConv, why, sizeof why), "%s: %s",
                  L ? "nhwc" : "nchw", why);
    ck_assert(isConv);
    ck_assert_int_eq(C.layout, L ? CONV_NHWC : CONV_NCHW);
    static const int64_t out[4] = {2, 6, 4, 7}, ext[3] = {2, 3, 3};
    static const int parNchw[4] = {0, 1, 2, 3}, parNhwc[4] = {0, 3, 1, 2};
    static const int redNchw[3] = {CV_C, CV_KH, CV_KW};
    static const int redNhwc[3] = {CV_KH, CV_KW, CV_C};
    FzBlock *body = fzLoopGetBody(par);
    for (int r = 0; r < 4; ++r) {
      int d = (L ? parNhwc : parNchw)[r];
      ck_assert_int_eq(C.parDim[r], d);
      ck_assert_int_eq(C.outDims[r], out[r]);
      ck_assert_int_eq(C.T.trips[d], out[r]);
      ck_assert_ptr_eq(C.vars[r], fzBlockGetArgument(body, (size_t)d));
    }
    for (int l = 0; l < 3; ++l) {
      int var = (L ? redNhwc : redNchw)[l];
      ck_assert_int_eq(C.redVar[l], var);
      ck_assert_ptr_eq(C.vars[var], fzBlockGetArgument(C.bodies[l], 0));
      ck_assert_int_eq(C.ext[l], ext[l]);
    }
    ck_assert_int_eq(C.T.dI, L ? 2 : 1);
    ck_assert_int_eq(C.T.dJ, 3);
    ck_assert_int_eq(C.C, 4);
    ck_assert_int_eq(C.H, 7);
    ck_assert_int_eq(C.Wi, 9);
    ck_assert_int_eq(C.sh, 2);
    ck_assert_int_eq(C.sw, 1);
    ck_assert_int_eq(C.dh, 1);
    ck_assert_int_eq(C.dw, 2);
    ck_assert_int_eq(C.hOff, -1);
    ck_assert_int_eq(C.wOff, 0);
    ck_assert(C.pack);
    for (int64_t oc = 0; oc < 6; ++oc) /* groups of 3 channels read 2 */
      for (int64_t c = 0; c < 2; ++c)
        ck_assert_int_eq(C.chTab[oc * 2 + c], (oc / 3) * 2 + c);
    fzFree(ctx, C.chTab);
    fzPtrMapFree(&C.T.deps);
    fzOpDestroy(m);
  }
  fzContextDestroy(ctx);
}
END_TEST

static Suite *lower_suite(void) {
  Suite *s = suite_create("loop-lower");
  TCase *tc = tcase_create("lower");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_lower_structure_and_values);
  tcase_add_test(tc, test_run_function_pipeline);
  tcase_add_test(tc, test_plan_memory_stats);
  tcase_add_test(tc, test_lower_allocation_failures);
  tcase_add_test(tc, test_conv_match_layouts);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return run_suite(lower_suite());
}

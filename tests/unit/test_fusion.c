/* tests/unit/test_fusion.c - the fusion pass through its C API: options,
 * targets, the default cost model's formulas, replacing the cost model
 * and the describers, the report callback, remarks as diagnostics,
 * graph.fusion built from C and interpreted, and allocation failures
 * (never a crash, the function left valid).
 */
#include "dialects/graph/fusion_op.h"
#include "fz/fusion.h"
#include "fz/graph.h"
#include "fz/pass.h"
#include "test_helpers.h"

static const char kSoftmax[] =
    "func.func @softmax(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {\n"
    "  %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims = true} : "
    "tensor<8x128xf32> -> tensor<8x1xf32>\n"
    "  %s = graph.sub %x, %m : tensor<8x128xf32>, tensor<8x1xf32> -> "
    "tensor<8x128xf32>\n"
    "  %e = graph.exp %s : tensor<8x128xf32>\n"
    "  %z = graph.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : "
    "tensor<8x128xf32> -> tensor<8x1xf32>\n"
    "  %y = graph.div %e, %z : tensor<8x128xf32>, tensor<8x1xf32> -> "
    "tensor<8x128xf32>\n"
    "  return %y : tensor<8x128xf32>\n"
    "}\n";

static FzOp *parse(FzContext *ctx, const char *src) {
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(src),
                          FZ_STR("test.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  return m;
}

static FzOp *first_func(FzOp *module) {
  return fzBlockGetFirstOp(fzRegionGetFirstBlock(fzOpGetRegion(module, 0)));
}

static size_t count_ops(FzOp *func, const char *name) {
  size_t n = 0;
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  for (FzOp *op = fzBlockGetFirstOp(b); op; op = fzOpGetNextInBlock(op))
    n += fzStringRefEqual(fzIdentGetString(fzOpGetName(op)),
                          fzStringRefFromCString(name));
  return n;
}

START_TEST(test_options_and_targets) {
  FzFusionOptions o;
  fzFusionOptionsInit(&o);
  ck_assert_int_eq(o.mode, FZ_FUSION_MODE_COST);
  ck_assert_uint_eq(o.maxOps, 64);
  ck_assert_uint_eq(o.maxInputs, 64);
  ck_assert_uint_eq(o.maxOutputs, 16);
  ck_assert(o.allowRecompute);
  ck_assert(!o.remarks && !o.report && !o.wrapSingle);
  const FzFusionTarget *cuda = fzFusionTargetLookup(NULL, FZ_STR("cuda"));
  const FzFusionTarget *cpu = fzFusionTargetLookup(NULL, FZ_STR("cpu"));
  ck_assert_ptr_nonnull(cuda);
  ck_assert_ptr_nonnull(cpu);
  ck_assert_str_eq(cuda->name, "cuda");
  ck_assert_int_eq(cuda->maxRegisters, 255);
  ck_assert_int_gt(cuda->maxSharedBytes, 0);
  ck_assert_int_eq(cpu->maxRegisters, 0);
  ck_assert_ptr_null(fzFusionTargetLookup(NULL, FZ_STR("tpu")));

  FzContext *ctx = new_context();
  static const FzFusionTarget tiny = {"tiny", 1e9, 1e9, 1e-6, 64, 32, 1024};
  ck_assert(fzContextRegisterFusionTarget(ctx, &tiny));
  ck_assert_ptr_eq(fzFusionTargetLookup(ctx, FZ_STR("tiny")), &tiny);
  ck_assert_ptr_eq(fzFusionTargetLookup(ctx, FZ_STR("cuda")), cuda);
  ck_assert_str_eq(fzFusionGroupKindName(FZ_FUSION_GROUP_REDUCTION),
                   "reduction");
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_default_estimates) {
  const FzFusionTarget *cuda = fzFusionTargetLookup(NULL, FZ_STR("cuda"));
  FzFusionKernelDesc d;
  memset(&d, 0, sizeof d);
  d.kind = FZ_FUSION_GROUP_LOOP;
  d.numOps = 3;
  d.bytesRead = 4e6;
  d.bytesWritten = 4e6;
  d.flops = 3e6;
  d.points = 1e6; /* fills the machine: eff = 1 */
  d.phases = 1;
  d.maxLive = 3;
  d.elementBytes = 4;
  FzFusionEstimate e;
  ck_assert(fzFusionEstimateDefault(cuda, &d, &e));
  double memT = 8e6 / cuda->bandwidth;
  ck_assert_double_eq_tol(e.seconds, cuda->launchSeconds + memT, 1e-12);
  ck_assert_double_eq_tol(e.bytes, 8e6, 1e-6);
  ck_assert_int_eq(e.registers, 16 + 2 * 3);
  ck_assert_int_eq(e.sharedBytes, 0);

  /* A small kernel cannot fill the machine: memory time scales up. */
  d.points = cuda->parallelism / 4;
  ck_assert(fzFusionEstimateDefault(cuda, &d, &e));
  ck_assert_double_eq_tol(e.seconds, cuda->launchSeconds + 4 * memT, 1e-12);

  /* A contraction: tile registers and double-buffered tiles. */
  d.kind = FZ_FUSION_GROUP_CONTRACTION;
  d.points = 1e6;
  ck_assert(fzFusionEstimateDefault(cuda, &d, &e));
  ck_assert_int_eq(e.sharedBytes, 2 * (128 * 32 + 32 * 128) * 4);
  ck_assert_int_eq(e.registers, 16 + 2 * 3 + 96);

  /* A reduction in phases with rows too long for the chip re-reads them. */
  d.kind = FZ_FUSION_GROUP_REDUCTION;
  d.numReductions = 2;
  d.phases = 3;
  d.rows = 2;
  d.rowLength = 1 << 20;
  d.points = d.rows * d.rowLength;
  d.rowInputBytes = 4e6;
  ck_assert(fzFusionEstimateDefault(cuda, &d, &e));
  ck_assert_double_eq_tol(e.bytes, 8e6 + 2 * 4e6, 1e-6);
  ck_assert_double_gt(e.seconds, 5e-4);

  /* Nonsense targets give no estimate. */
  FzFusionTarget bad = *cuda;
  bad.bandwidth = 0;
  ck_assert(!fzFusionEstimateDefault(&bad, &d, &e));
  ck_assert(fzFusionDefaultCostModel()->estimate != NULL);
}
END_TEST

START_TEST(test_fuse_function_softmax) {
  FzContext *ctx = new_context();
  FzOp *m = parse(ctx, kSoftmax);
  FzOp *f = first_func(m);
  FzFusionStats s;
  ck_assert(fzFuseFunction(f, NULL, &s));
  ck_assert(fzOpVerify(m));
  ck_assert_uint_eq(s.ops, 5);
  ck_assert_uint_eq(s.kernelsBefore, 5);
  ck_assert_uint_eq(s.kernelsAfter, 1);
  ck_assert_uint_eq(s.groups, 1);
  ck_assert_uint_eq(s.fusedOps, 5);
  ck_assert_uint_eq(count_ops(f, "graph.fusion"), 1);
  /* Running again changes nothing: the group is kept as written. */
  ck_assert(fzFuseFunction(f, NULL, &s));
  ck_assert_uint_eq(s.kernelsAfter, 1);
  ck_assert_uint_eq(s.groups, 0);
  ck_assert_uint_eq(count_ops(f, "graph.fusion"), 1);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* A model under which every kernel of more than one op is very slow. */
static bool slow_when_fused(const FzFusionCostModel *model,
                            const FzFusionTarget *t,
                            const FzFusionKernelDesc *k,
                            FzFusionEstimate *out) {
  int *calls = model->userData;
  (*calls)++;
  if (!fzFusionEstimateDefault(t, k, out))
    return false;
  if (k->numOps > 1)
    out->seconds += 1.0;
  return true;
}

static bool no_answer(const FzFusionCostModel *model, const FzFusionTarget *t,
                      const FzFusionKernelDesc *k, FzFusionEstimate *out) {
  (void)model;
  (void)t;
  (void)k;
  (void)out;
  return false;
}

START_TEST(test_replace_cost_model) {
  FzContext *ctx = new_context();
  int calls = 0;
  FzFusionCostModel slow = {"slow", slow_when_fused, &calls};
  ck_assert(fzContextSetFusionCostModel(ctx, &slow));
  ck_assert_str_eq(fzContextGetFusionCostModel(ctx)->name, "slow");
  FzOp *m = parse(ctx, kSoftmax);
  FzFusionStats s;
  ck_assert(fzFuseFunction(first_func(m), NULL, &s));
  ck_assert_int_gt(calls, 0);
  ck_assert_uint_eq(s.kernelsAfter, 5); /* cost mode: nothing fused */
  fzOpDestroy(m);

  /* Rules mode ignores the estimates (but still asks for the limits). */
  m = parse(ctx, kSoftmax);
  FzFusionOptions o;
  fzFusionOptionsInit(&o);
  o.mode = FZ_FUSION_MODE_RULES;
  ck_assert(fzFuseFunction(first_func(m), &o, &s));
  ck_assert_uint_eq(s.kernelsAfter, 1);
  fzOpDestroy(m);

  /* A model with no answer: nothing is fused, and the remark says why. */
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzFusionCostModel none = {"none", no_answer, NULL};
  m = parse(ctx, kSoftmax);
  o.mode = FZ_FUSION_MODE_COST;
  o.costModel = &none;
  o.remarks = true;
  ck_assert(fzFuseFunction(first_func(m), &o, &s));
  ck_assert_uint_eq(s.kernelsAfter, 5);
  ck_assert_uint_eq(log.numErrors, 0);
  ck_assert_ptr_nonnull(diag_log_find(&log, "the cost model 'none' gave no "
                                            "estimate"));
  diag_log_end(&log);
  fzOpDestroy(m);

  /* NULL restores the default. */
  ck_assert(fzContextSetFusionCostModel(ctx, NULL));
  ck_assert_ptr_eq(fzContextGetFusionCostModel(ctx),
                   fzFusionDefaultCostModel());
  fzContextDestroy(ctx);
}
END_TEST

/* Says every graph op is opaque. */
static bool all_opaque(FzOp *op, FzFusionOpInfo *info) {
  (void)op;
  info->kind = FZ_FUSION_OPAQUE;
  return true;
}

START_TEST(test_replace_describer) {
  FzContext *ctx = new_context();
  FzOp *m = parse(ctx, kSoftmax);
  FzFusionOpInfo info;
  FzOp *first = fzBlockGetFirstOp(
      fzRegionGetFirstBlock(fzOpGetRegion(first_func(m), 0)));
  fzFusionDescribeOp(first, &info);
  ck_assert_int_eq(info.kind, FZ_FUSION_REDUCTION);
  ck_assert_int_eq(info.reduceOperand, 0);
  ck_assert_uint_eq(info.reduceAxes, 2u);
  ck_assert(fzContextRegisterFusionDescriber(ctx, "graph", all_opaque));
  fzFusionDescribeOp(first, &info);
  ck_assert_int_eq(info.kind, FZ_FUSION_OPAQUE);
  FzFusionStats s;
  ck_assert(fzFuseFunction(first_func(m), NULL, &s));
  ck_assert_uint_eq(s.groups, 0);
  ck_assert_uint_eq(s.kernelsAfter, 5);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_report_and_remarks) {
  FzContext *ctx = new_context();
  FzOp *m = parse(ctx, kSoftmax);
  TextBuf t = {0};
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzFusionOptions o;
  fzFusionOptionsInit(&o);
  o.report = true;
  o.remarks = true;
  o.reportOut = text_cb;
  o.reportUserData = &t;
  FzFusionStats s;
  ck_assert(fzFuseFunction(first_func(m), &o, &s));
  ck_assert_ptr_nonnull(t.data);
  ck_assert_ptr_nonnull(strstr(t.data, "fusion report for @softmax "
                                       "(target=cuda, mode=cost)"));
  ck_assert_ptr_nonnull(strstr(t.data, "kernels: 5 before, 1 after"));
  ck_assert_double_gt(s.bytesBefore, s.bytesAfter);
  ck_assert_double_gt(s.secondsBefore, s.secondsAfter);
  ck_assert_uint_eq(log.count, 5);
  for (size_t i = 0; i < 5; ++i) {
    ck_assert_int_eq(log.rec[i].severity, FZ_SEVERITY_REMARK);
    ck_assert_str_eq(log.rec[i].message,
                     "fused into group 0 (reduction, 5 ops)");
    ck_assert_uint_eq(log.rec[i].line, 2 + i);
  }
  diag_log_end(&log);
  text_free(&t);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_build_and_interpret_fusion) {
  FzContext *ctx = new_context();
  FzType *f32 = fzF32TypeGet(ctx);
  FzType *t = fzTensorTypeGet(ctx, 1, (int64_t[]){4}, f32, NULL);
  FzBlock *outer = fzBlockCreate(ctx, 2, (FzType *[]){t, t}, NULL);
  FzBuilder b;
  fzBuilderInit(&b, ctx);
  fzBuilderSetInsertionPointToEnd(&b, outer);
  FzValue *ins[2] = {fzBlockGetArgument(outer, 0),
                     fzBlockGetArgument(outer, 1)};
  FzOp *fusion = fzGraphFusionCreate(&b, loc_at(ctx, 1, 1), 2, ins, NULL, 1,
                                     &t);
  ck_assert_ptr_nonnull(fusion);
  FzBlock *body = fzGraphFusionGetBody(fusion);
  ck_assert_uint_eq(fzBlockGetNumArguments(body), 2);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("graph.add"), loc_at(ctx, 2, 1));
  FzValue *args[2] = {fzBlockGetArgument(body, 0),
                      fzBlockGetArgument(body, 1)};
  fzOpStateAddOperands(&st, 2, args);
  fzOpStateAddResults(&st, 1, &t);
  FzBuilder bb;
  fzBuilderInit(&bb, ctx);
  fzBuilderSetInsertionPointToEnd(&bb, body);
  FzOp *add = fzBuilderCreate(&bb, &st);
  ck_assert_ptr_nonnull(add);
  FzValue *sum = fzOpGetResult(add, 0);
  ck_assert_ptr_nonnull(fzGraphYieldCreate(ctx, body, loc_at(ctx, 3, 1), 1,
                                           &sum));
  FzOp *ret = make_op(ctx, "func.return", loc_at(ctx, 4, 1), 1,
                      (FzValue *[]){fzOpGetResult(fusion, 0)}, 0, NULL, 0);
  fzBlockAppendOp(outer, ret);
  FzOpState fs;
  fzOpStateInit(&fs, ctx, FZ_STR("func.func"), loc_at(ctx, 1, 1));
  fzOpStateAddProp(&fs, FZ_STR("sym_name"), fzStringAttrGet(ctx, FZ_STR("f")));
  fzOpStateAddProp(&fs, FZ_STR("function_type"),
                   fzTypeAttrGet(ctx, fzFunctionTypeGet(
                                          ctx, 2, (FzType *[]){t, t}, 1, &t)));
  fzRegionAppendBlock(fzOpStateAddRegion(&fs), outer);
  FzOp *func = fzOpCreate(&fs);
  ck_assert_ptr_nonnull(func);
  ck_assert(fzOpVerify(func));

  FzTensor *x = fzTensorCreateFromType(ctx, t), *y =
                                                   fzTensorCreateFromType(ctx, t);
  for (int i = 0; i < 4; ++i) {
    fzTensorSetF64(x, i, i);
    fzTensorSetF64(y, i, 10 * i);
  }
  size_t n;
  FzTensor **out;
  ck_assert(fzInterpretFunction(func, 2, (FzTensor *[]){x, y}, NULL, &n,
                                &out));
  ck_assert_uint_eq(n, 1);
  for (int i = 0; i < 4; ++i)
    ck_assert_double_eq(fzTensorGetF64(out[0], i), 11.0 * i);
  fzTensorArrayDestroy(ctx, n, out);
  fzTensorDestroy(x);
  fzTensorDestroy(y);
  fzOpDestroy(func);
  fzContextDestroy(ctx);
}
END_TEST

/* A function whose grouping exercises every phase: duplication, multi-
 * output, horizontal merging, a contraction epilogue and reductions. */
static const char kMixed[] =
    "func.func @mixed(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: "
    "tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<1x8xf32>, "
    "tensor<4x8xf32>) {\n"
    "  %c = graph.constant dense<0.5> : tensor<f32>\n"
    "  %h = graph.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> "
    "tensor<4x8xf32>\n"
    "  %r = graph.reduce_sum %h {axes = array<i64: 1>, keepdims = true} : "
    "tensor<4x8xf32> -> tensor<4x1xf32>\n"
    "  %q = graph.reduce_max %h {axes = array<i64: 0>, keepdims = true} : "
    "tensor<4x8xf32> -> tensor<1x8xf32>\n"
    "  %m = graph.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> "
    "tensor<4x8xf32>\n"
    "  %s = graph.mul %m, %c : tensor<4x8xf32>, tensor<f32> -> "
    "tensor<4x8xf32>\n"
    "  %t = graph.tanh %x : tensor<4x8xf32>\n"
    "  %u = graph.add %s, %t : tensor<4x8xf32>\n"
    "  return %u, %r, %q, %t : tensor<4x8xf32>, tensor<4x1xf32>, "
    "tensor<1x8xf32>, tensor<4x8xf32>\n"
    "}\n";

/* Runs the pass with an allocator that fails at the Nth allocation, for
 * every N until one run needs no failure: no crash, and the function
 * always verifies afterwards. */
START_TEST(test_allocation_failures) {
  size_t failures = 0;
  for (size_t failAt = 1; failAt < 100000; ++failAt) {
    CountingAlloc ca = {0};
    FzAllocator a = counting_allocator(&ca);
    FzContext *ctx = fzContextCreateWithAllocator(&a);
    ck_assert_ptr_nonnull(ctx);
    ck_assert(fzRegisterAllDialects(ctx));
    FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kMixed),
                            FZ_STR("t.fuse"), 0);
    ck_assert_ptr_nonnull(m);
    DiagLog log;
    diag_log_begin(&log, ctx);
    FzFusionOptions o;
    fzFusionOptionsInit(&o);
    o.remarks = true;
    o.report = true;
    TextBuf t = {0};
    o.reportOut = text_cb;
    o.reportUserData = &t;
    ca.failAt = ca.numAllocs + failAt;
    bool ok = fzFuseFunction(first_func(m), &o, NULL);
    bool failed = ca.numFailures > 0;
    ca.failAt = 0;
    if (failed) {
      failures++;
      ck_assert(!ok || fzContextHadAllocationFailure(ctx));
    } else {
      ck_assert(ok);
    }
    fzContextClearAllocationFailure(ctx);
    ck_assert_msg(fzOpVerify(m), "invalid IR after a failure at %zu",
                  failAt);
    diag_log_end(&log);
    text_free(&t);
    fzOpDestroy(m);
    fzContextDestroy(ctx);
    ck_assert_uint_eq(ca.liveBlocks, 0);
    if (!failed)
      break;
  }
  ck_assert_uint_gt(failures, 10);
}
END_TEST

static Suite *fusion_suite(void) {
  Suite *s = suite_create("fusion");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_options_and_targets);
  tcase_add_test(tc, test_default_estimates);
  tcase_add_test(tc, test_fuse_function_softmax);
  tcase_add_test(tc, test_replace_cost_model);
  tcase_add_test(tc, test_replace_describer);
  tcase_add_test(tc, test_report_and_remarks);
  tcase_add_test(tc, test_build_and_interpret_fusion);
  tcase_add_test(tc, test_allocation_failures);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(fusion_suite()); }

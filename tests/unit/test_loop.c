/* tests/unit/test_loop.c - Check suite of the loop dialect: opcodes,
 * scalar semantics (the evaluation shared by folds and the interpreter),
 * custom-form round trips, verifier messages, the interpreter (values
 * and errors), folds, and allocation failures in the interpreter.
 * The lowering and plan-memory have their own suite (test_loop_lower.c).
 */
#include <math.h>

#include "dialects/loop/loop_internal.h"
#include "fz/pass.h"
#include "tests/unit/test_helpers.h"

static FzContext *loop_context(void) {
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
  return m;
}

static char *print_op(FzOp *op, unsigned flags) {
  TextBuf t = {0};
  fzOpPrint(op, flags, text_cb, &t);
  return t.data;
}

/*===--- Opcodes --------------------------------------------------------===*/

START_TEST(test_opcodes) {
  FzContext *ctx = loop_context();
  const FzDialectDef *d = fzLoopDialectGet();
  ck_assert_uint_eq(d->numOps, FZ_LOOP_NUM_OPS);
  for (size_t i = 0; i < FZ_LOOP_NUM_OPS; ++i) {
    const char *name = fzLoopOpcodeGetName((FzLoopOpcode)i);
    ck_assert_ptr_nonnull(name);
    ck_assert_str_eq(d->ops[i]->name, name);
    ck_assert_ptr_nonnull(d->ops[i]->summary);
    ck_assert_ptr_eq(fzContextLookupOpDef(ctx, fzStringRefFromCString(name)),
                     d->ops[i]);
  }
  ck_assert_ptr_null(fzLoopOpcodeGetName(FZ_LOOP_OP_UNKNOWN));
  FzOp *m = parse(ctx, "%0 = loop.constant 1 : index\n"
                       "%1 = loop.addi %0, %0 : index\n");
  FzOp *c = fzBlockGetFirstOp(fzRegionGetFirstBlock(fzOpGetRegion(m, 0)));
  ck_assert_int_eq(fzLoopGetOpcode(c), FZ_LOOP_OP_CONSTANT);
  ck_assert_int_eq(fzLoopGetOpcode(fzOpGetNextInBlock(c)), FZ_LOOP_OP_ADDI);
  ck_assert_int_eq(fzLoopGetOpcode(m), FZ_LOOP_OP_UNKNOWN);
  ck_assert_int_eq(fzLoopGetOpcode(NULL), FZ_LOOP_OP_UNKNOWN);
  for (int p = 0; p < FZ_LOOP_CMPF_NUM; ++p)
    ck_assert_ptr_nonnull(fzLoopCmpPredicateName(true, p));
  ck_assert_str_eq(fzLoopCmpPredicateName(false, FZ_LOOP_CMPI_ULT), "ult");
  ck_assert_ptr_null(fzLoopCmpPredicateName(false, FZ_LOOP_CMPI_NUM));
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Scalar semantics -----------------------------------------------===*/

static FzLoopScalar evalf(FzLoopOpcode opc, int pred, FzType *t, FzType *ot,
                          double a, double b) {
  FzLoopScalar in[3] = {{.f = a}, {.f = b}, {.f = 0}}, out;
  ck_assert(fzLoopEvalScalar(opc, pred, t, ot, 2, in, &out));
  return out;
}

static FzLoopScalar evali(FzLoopOpcode opc, int pred, FzType *t, FzType *ot,
                          int64_t a, int64_t b) {
  FzLoopScalar in[3] = {{.i = a}, {.i = b}, {.i = 0}}, out;
  ck_assert(fzLoopEvalScalar(opc, pred, t, ot, 2, in, &out));
  return out;
}

START_TEST(test_scalar_semantics) {
  FzContext *ctx = loop_context();
  FzType *f32 = fzF32TypeGet(ctx), *bf16 = fzBF16TypeGet(ctx);
  FzType *i1 = fzIntegerTypeGet(ctx, 1), *i8 = fzIntegerTypeGet(ctx, 8);
  FzType *i32 = fzIntegerTypeGet(ctx, 32), *idx = fzIndexTypeGet(ctx);
  /* f32 arithmetic rounds once to f32. */
  ck_assert(evalf(FZ_LOOP_OP_ADDF, 0, f32, f32, 0.1, 0.2).f ==
            (double)(0.1f + 0.2f) ||
            evalf(FZ_LOOP_OP_ADDF, 0, f32, f32, 0.1, 0.2).f ==
                (double)(float)(0.1 + 0.2));
  /* maxf/minf propagate NaN; max(-0, +0) = +0. */
  ck_assert(isnan(evalf(FZ_LOOP_OP_MAXF, 0, f32, f32, NAN, 1).f));
  ck_assert(isnan(evalf(FZ_LOOP_OP_MINF, 0, f32, f32, 1, NAN).f));
  ck_assert(!signbit(evalf(FZ_LOOP_OP_MAXF, 0, f32, f32, -0.0, 0.0).f));
  ck_assert(signbit(evalf(FZ_LOOP_OP_MINF, 0, f32, f32, 0.0, -0.0).f));
  /* roundeven: halves go to even. */
  FzLoopScalar h[4] = {{.f = 2.5}, {.f = -0.5}, {.f = 3.5}, {.f = 1.25}};
  double want[4] = {2.0, -0.0, 4.0, 1.0};
  for (int k = 0; k < 4; ++k) {
    FzLoopScalar o;
    ck_assert(fzLoopEvalScalar(FZ_LOOP_OP_ROUNDEVEN, 0, f32, f32, 1, &h[k],
                               &o));
    ck_assert(o.f == want[k]);
  }
  /* fptosi saturates; NaN gives 0. */
  ck_assert_int_eq(evalf(FZ_LOOP_OP_FPTOSI, 0, i8, f32, 300.0, 0).i, 127);
  ck_assert_int_eq(evalf(FZ_LOOP_OP_FPTOSI, 0, i8, f32, -300.0, 0).i, -128);
  ck_assert_int_eq(evalf(FZ_LOOP_OP_FPTOSI, 0, i8, f32, -3.9, 0).i, -3);
  ck_assert_int_eq(evalf(FZ_LOOP_OP_FPTOSI, 0, i32, f32, NAN, 0).i, 0);
  /* Integer wrap, division, remainder, shifts. */
  ck_assert_int_eq(evali(FZ_LOOP_OP_ADDI, 0, i8, i8, 127, 1).i, -128);
  ck_assert_int_eq(evali(FZ_LOOP_OP_DIVSI, 0, i32, i32, -7, 2).i, -3);
  ck_assert_int_eq(evali(FZ_LOOP_OP_REMSI, 0, i32, i32, -7, 2).i, -1);
  ck_assert_int_eq(evali(FZ_LOOP_OP_DIVSI, 0, idx, idx, INT64_MIN, -1).i,
                   INT64_MIN);
  ck_assert_int_eq(evali(FZ_LOOP_OP_REMSI, 0, idx, idx, INT64_MIN, -1).i, 0);
  FzLoopScalar in[2] = {{.i = 1}, {.i = 0}}, out;
  ck_assert(!fzLoopEvalScalar(FZ_LOOP_OP_DIVSI, 0, i32, i32, 2, in, &out));
  ck_assert_int_eq(evali(FZ_LOOP_OP_SHLI, 0, i8, i8, 1, 7).i, -128);
  ck_assert_int_eq(evali(FZ_LOOP_OP_SHLI, 0, i8, i8, 1, 8).i, 0);
  ck_assert_int_eq(evali(FZ_LOOP_OP_SHRSI, 0, i8, i8, -128, 9).i, -1);
  /* Comparisons: ordered vs unordered, signed vs unsigned. */
  ck_assert_int_eq(evalf(FZ_LOOP_OP_CMPF, FZ_LOOP_CMPF_OLT, i1, f32, NAN, 1).i,
                   0);
  ck_assert_int_eq(evalf(FZ_LOOP_OP_CMPF, FZ_LOOP_CMPF_ULT, i1, f32, NAN, 1).i,
                   1);
  ck_assert_int_eq(evalf(FZ_LOOP_OP_CMPF, FZ_LOOP_CMPF_UNE, i1, f32, NAN, NAN)
                       .i,
                   1);
  ck_assert_int_eq(evali(FZ_LOOP_OP_CMPI, FZ_LOOP_CMPI_SLT, i1, i8, -1, 1).i,
                   1);
  ck_assert_int_eq(evali(FZ_LOOP_OP_CMPI, FZ_LOOP_CMPI_ULT, i1, i8, -1, 1).i,
                   0);
  /* Casts of i1: signed is -1, unsigned is 1. */
  FzLoopScalar t1 = {.i = 1};
  ck_assert(fzLoopEvalScalar(FZ_LOOP_OP_SITOFP, 0, f32, i1, 1, &t1, &out));
  ck_assert(out.f == -1.0);
  ck_assert(fzLoopEvalScalar(FZ_LOOP_OP_UITOFP, 0, f32, i1, 1, &t1, &out));
  ck_assert(out.f == 1.0);
  ck_assert(fzLoopEvalScalar(FZ_LOOP_OP_EXTSI, 0, i32, i1, 1, &t1, &out));
  ck_assert_int_eq(out.i, -1);
  ck_assert(fzLoopEvalScalar(FZ_LOOP_OP_EXTUI, 0, i32, i1, 1, &t1, &out));
  ck_assert_int_eq(out.i, 1);
  /* truncf to bf16 rounds to nearest even; bitcast keeps the bits. */
  FzLoopScalar x = {.f = 1.0 + 1.0 / 256.0}; /* halfway between bf16s */
  ck_assert(fzLoopEvalScalar(FZ_LOOP_OP_TRUNCF, 0, bf16, f32, 1, &x, &out));
  ck_assert(out.f == 1.0);
  FzLoopScalar one = {.f = 1.0};
  ck_assert(fzLoopEvalScalar(FZ_LOOP_OP_BITCAST, 0, i32, f32, 1, &one, &out));
  ck_assert_int_eq(out.i, 0x3f800000);
  FzLoopScalar ii = {.i = 200};
  ck_assert(fzLoopEvalScalar(FZ_LOOP_OP_TRUNCI, 0, i8, i32, 1, &ii, &out));
  ck_assert_int_eq(out.i, -56);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Round trips and verifier messages ------------------------------===*/

static const char kKernel[] =
    "func.func @k(%x: buffer<4x8xf32>, %o: buffer<4xf32>) {\n"
    "  %c0 = loop.constant 0 : index\n"
    "  %c1 = loop.constant 1 : index\n"
    "  %c4 = loop.constant 4 : index\n"
    "  %c8 = loop.constant 8 : index\n"
    "  %z = loop.constant 0.000000e+00 : f32\n"
    "  loop.parallel (%i) = (%c0) to (%c4) step (%c1) {\n"
    "    %s = loop.for %j = %c0 to %c8 step %c1 iter_args(%a = %z) -> (f32) {\n"
    "      %v = loop.load %x[%i, %j] : buffer<4x8xf32>\n"
    "      %n = loop.addf %a, %v : f32\n"
    "      loop.yield %n : f32\n"
    "    }\n"
    "    loop.barrier\n"
    "    loop.store %s, %o[%i] : buffer<4xf32>\n"
    "    loop.yield\n"
    "  }\n"
    "  %t = loop.alloc() : buffer<2x2xf32>\n"
    "  %w = loop.view %t[%c1] : buffer<2x2xf32> -> buffer<3xf32>\n"
    "  %vv = loop.vector_load %x[%c0, %c4] : buffer<4x8xf32>, vector<4xf32>\n"
    "  %sp = loop.splat %z : vector<4xf32>\n"
    "  %m = loop.cmpf oge, %vv, %sp : vector<4xf32>\n"
    "  %q = loop.select %m, %vv, %sp : vector<4xf32>\n"
    "  %e = loop.truncf %q : vector<4xf32> to vector<4xbf16>\n"
    "  %cb = loop.constant_buffer dense<[1, 2]> : tensor<2xi32>\n"
    "  %d = loop.dim %x, 1 : buffer<4x8xf32>\n"
    "  loop.dealloc %t : buffer<2x2xf32>\n"
    "  return\n"
    "}\n";

START_TEST(test_roundtrip) {
  FzContext *ctx = loop_context();
  FzOp *m = parse(ctx, kKernel);
  ck_assert(fzOpVerify(m));
  char *a = print_op(m, 0);
  FzOp *m2 = parse(ctx, a);
  ck_assert(fzOpVerify(m2));
  char *b = print_op(m2, 0);
  ck_assert_str_eq(a, b);
  char *g = print_op(m, FZ_PRINT_GENERIC);
  FzOp *m3 = parse(ctx, g);
  char *c = print_op(m3, 0);
  ck_assert_str_eq(a, c);
  ck_assert_ptr_nonnull(strstr(g, "\"loop.for\""));
  ck_assert_ptr_nonnull(strstr(a, "loop.for %arg3 = %0 to %3 step %1 "
                                  "iter_args(%arg4 = %4) -> (f32) {"));
  free(a);
  free(b);
  free(c);
  free(g);
  fzOpDestroy(m);
  fzOpDestroy(m2);
  fzOpDestroy(m3);
  fzContextDestroy(ctx);
}
END_TEST

static void expect_invalid(FzContext *ctx, const char *src, const char *msg) {
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("t.fuse"),
                          0);
  bool ok = m && fzOpVerify(m);
  if (ok || !diag_log_find(&log, msg))
    diag_log_dump(&log);
  ck_assert_msg(!ok, "expected an error: %s", msg);
  ck_assert_diag(&log, msg);
  if (m)
    fzOpDestroy(m);
  diag_log_end(&log);
}

START_TEST(test_verifier) {
  FzContext *ctx = loop_context();
  expect_invalid(ctx, "%0 = loop.constant 1.0 : f32\n"
                      "%1 = loop.addi %0, %0 : f32\n",
                 "expects integer or index operands, got 'f32'");
  expect_invalid(ctx, "%0 = loop.constant 1 : i32\n"
                      "%1 = loop.exp %0 : i32\n",
                 "expects float operands, got 'i32'");
  expect_invalid(ctx, "%0 = loop.constant 1.0 : f32\n"
                      "%1 = \"loop.cmpf\"(%0, %0) <{predicate = \"lt\"}> : "
                      "(f32, f32) -> i1\n",
                 "unknown predicate 'lt'");
  expect_invalid(ctx, "%0 = loop.constant 1.0 : f32\n"
                      "%1 = loop.extf %0 : f32 to f16\n",
                 "converts a float to a wider float, not 'f32' to 'f16'");
  expect_invalid(ctx, "%0 = loop.constant 1 : i32\n"
                      "%1 = loop.index_cast %0 : i32 to i64\n",
                 "converts between index and an integer");
  expect_invalid(ctx, "%0 = loop.alloc() : buffer<?x4xf32>\n",
                 "expects one size per dynamic dimension (1), got 0");
  expect_invalid(ctx, "%0 = loop.alloc() : buffer<4xf32>\n"
                      "%1 = loop.constant 0 : index\n"
                      "%2 = loop.load %0[%1, %1] : buffer<4xf32>\n",
                 "expects 1 indices (the buffer's rank), got 2");
  expect_invalid(ctx, "%0 = loop.alloc() : buffer<4xi32>\n"
                      "%1 = loop.constant 0 : index\n"
                      "%2 = loop.constant 0.0 : f32\n"
                      "\"loop.store\"(%2, %0, %1) : (f32, buffer<4xi32>, "
                      "index) -> ()\n",
                 "stored value must have the element type");
  expect_invalid(ctx, "%0 = loop.alloc() : buffer<4x4xf32>\n"
                      "%1 = loop.constant 0 : index\n"
                      "%2 = loop.view %0 : buffer<4x4xf32> -> "
                      "buffer<4x4xf32, strides [1, 4]>\n"
                      "%3 = loop.vector_load %2[%1, %1] : buffer<4x4xf32, "
                      "strides [1, 4]>, vector<4xf32>\n",
                 "the buffer's last dimension must have stride 1");
  expect_invalid(ctx, "%0 = loop.alloc() : buffer<4xf32>\n"
                      "%1 = loop.view %0 : buffer<4xf32> -> buffer<4xi32>\n",
                 "source and result must have one element type");
  expect_invalid(ctx, "%0 = loop.constant 0 : index\n"
                      "%1 = loop.constant 0.0 : f32\n"
                      "%2 = loop.for %i = %0 to %0 step %0 iter_args(%a = %1)"
                      " -> (f32) {\n  loop.yield\n}\n",
                 "body yields 0 values, expected 1");
  expect_invalid(ctx, "%0 = loop.constant 0 : index\n"
                      "loop.for %i = %0 to %0 step %0 {\n  loop.barrier\n"
                      "  loop.yield\n}\n",
                 "must be nested in a loop.parallel");
  expect_invalid(ctx, "%0 = loop.constant 0 : index\n"
                      "\"loop.parallel\"(%0, %0) ({\n^bb0(%i: index):\n"
                      "  loop.yield\n}) : (index, index) -> ()\n",
                 "expects lower bounds, upper bounds and steps");
  expect_invalid(ctx, "%0 = loop.constant 0 : index\n"
                      "loop.yield %0 : index\n",
                 "expects parent op 'loop.for' or 'loop.parallel'");
  expect_invalid(ctx, "%0 = loop.constant dense<1.0> : tensor<4xf32>\n",
                 "result must be a scalar or a vector");
  expect_invalid(ctx, "%0 = loop.alloc() : buffer<4xf32>\n"
                      "%1 = loop.dim %0, 3 : buffer<4xf32>\n",
                 "index 3 is out of range for rank 1");
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Folds ----------------------------------------------------------===*/

START_TEST(test_folds) {
  FzContext *ctx = loop_context();
  FzOp *m = parse(ctx,
                  "func.func @f(%b: buffer<8xf32>, %i: index) -> (index, f32, "
                  "i1, index) {\n"
                  "  %c2 = loop.constant 2 : index\n"
                  "  %c3 = loop.constant 3 : index\n"
                  "  %c0 = loop.constant 0 : index\n"
                  "  %c1 = loop.constant 1 : index\n"
                  "  %a = loop.muli %c2, %c3 : index\n"
                  "  %s = loop.addi %i, %c0 : index\n"
                  "  %t = loop.muli %s, %c1 : index\n"
                  "  %u = loop.addi %t, %a : index\n"
                  "  %h = loop.constant 0.5 : f32\n"
                  "  %e = loop.mulf %h, %h : f32\n"
                  "  %p = loop.cmpi slt, %c2, %c3 : index\n"
                  "  %d = loop.dim %b, 0 : buffer<8xf32>\n"
                  "  return %u, %e, %p, %d : index, f32, i1, index\n"
                  "}\n");
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert(fzPassManagerParsePipeline(pm, FZ_STR("canonicalize")));
  ck_assert(fzPassManagerRun(pm, m));
  fzPassManagerDestroy(pm);
  char *s = print_op(m, 0);
  ck_assert_ptr_nonnull(strstr(s, "loop.constant 6 : index"));
  ck_assert_ptr_nonnull(strstr(s, "loop.addi %arg1, %"));
  ck_assert_ptr_null(strstr(s, "loop.muli"));
  ck_assert_ptr_nonnull(strstr(s, "loop.constant 2.500000e-01 : f32"));
  ck_assert_ptr_nonnull(strstr(s, "loop.constant true"));
  ck_assert_ptr_nonnull(strstr(s, "loop.constant 8 : index"));
  ck_assert_ptr_null(strstr(s, "loop.dim"));
  free(s);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- The interpreter ------------------------------------------------===*/

static FzTensor *f32_tensor(FzContext *ctx, size_t rank, const int64_t *shape,
                            double start) {
  FzTensor *t = fzTensorCreate(ctx, fzF32TypeGet(ctx), rank, shape);
  ck_assert_ptr_nonnull(t);
  for (int64_t i = 0; i < t->numElements; ++i)
    fzTensorSetF64(t, i, start + (double)i);
  return t;
}

START_TEST(test_interpret) {
  FzContext *ctx = loop_context();
  FzOp *m = parse(ctx, kKernel);
  ck_assert(fzOpVerify(m));
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("k"));
  FzTensor *x = f32_tensor(ctx, 2, (int64_t[]){4, 8}, 0.0);
  FzTensor *o = f32_tensor(ctx, 1, (int64_t[]){4}, -1.0);
  FzTensor *args[2] = {x, o};
  ck_assert(fzLoopInterpretFunction(f, 2, args, NULL));
  for (int64_t r = 0; r < 4; ++r) /* sum of 8r .. 8r+7 */
    ck_assert(fzTensorGetF64(o, r) == (double)(64 * r + 28));
  /* Poisoned allocations run the same (nothing reads them). */
  FzLoopInterpOptions opts = {.poison = true};
  ck_assert(fzLoopInterpretFunction(f, 2, args, &opts));
  /* A shape mismatch is an error naming the argument. */
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzTensor *bad = f32_tensor(ctx, 1, (int64_t[]){5}, 0.0);
  FzTensor *args2[2] = {x, bad};
  ck_assert(!fzLoopInterpretFunction(f, 2, args2, NULL));
  ck_assert_diag(&log, "argument #1: the tensor's dtype or shape does not "
                       "match the buffer type");
  ck_assert(!fzLoopInterpretFunction(f, 1, args2, NULL));
  ck_assert_diag(&log, "takes 2 arguments but 1 tensors were given");
  /* Quiet mode captures the message instead. */
  char msg[256];
  FzLoopInterpOptions quiet = {.quiet = true, .errorMessage = msg,
                               .errorMessageSize = sizeof msg};
  size_t before = log.count;
  ck_assert(!fzLoopInterpretFunction(f, 2, args2, &quiet));
  ck_assert_uint_eq(log.count, before);
  ck_assert_ptr_nonnull(strstr(msg, "does not match the buffer type"));
  diag_log_end(&log);
  fzTensorDestroy(bad);
  fzTensorDestroy(x);
  fzTensorDestroy(o);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

static void expect_run_error(FzContext *ctx, const char *body,
                             const char *msg) {
  char src[2048];
  snprintf(src, sizeof src,
           "func.func @f(%%x: buffer<4xf32>) {\n"
           "  %%c0 = loop.constant 0 : index\n"
           "  %%c1 = loop.constant 1 : index\n"
           "  %%c4 = loop.constant 4 : index\n"
           "  %%c5 = loop.constant 5 : index\n"
           "%s  return\n}\n",
           body);
  FzOp *m = parse(ctx, src);
  ck_assert(fzOpVerify(m));
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("f"));
  FzTensor *x = f32_tensor(ctx, 1, (int64_t[]){4}, 0.0);
  DiagLog log;
  diag_log_begin(&log, ctx);
  bool ok = fzLoopInterpretFunction(f, 1, &x, NULL);
  if (ok || !diag_log_find(&log, msg))
    diag_log_dump(&log);
  ck_assert(!ok);
  ck_assert_diag(&log, msg);
  diag_log_end(&log);
  fzTensorDestroy(x);
  fzOpDestroy(m);
}

START_TEST(test_interpret_errors) {
  FzContext *ctx = loop_context();
  expect_run_error(ctx,
                   "  loop.for %i = %c0 to %c5 step %c1 {\n"
                   "    %v = loop.load %x[%i] : buffer<4xf32>\n"
                   "    loop.yield\n  }\n",
                   "index 4 is out of bounds for dimension 0 (size 4) of "
                   "operand #0");
  expect_run_error(ctx,
                   "  %v = loop.vector_load %x[%c1] : buffer<4xf32>, "
                   "vector<4xf32>\n",
                   "index 1 (+ vector lanes) is out of bounds");
  /* A constant step of 0 is a verifier error; one computed is checked
   * when the loop runs (x is all zeros). */
  expect_run_error(ctx,
                   "  %f = loop.load %x[%c0] : buffer<4xf32>\n"
                   "  %s64 = loop.fptosi %f : f32 to i64\n"
                   "  %s = loop.index_cast %s64 : i64 to index\n"
                   "  loop.for %i = %c0 to %c4 step %s {\n"
                   "    loop.yield\n  }\n",
                   "step 0 is not positive");
  expect_run_error(ctx,
                   "  %q = loop.divsi %c1, %c0 : index\n",
                   "integer division by zero");
  expect_run_error(ctx,
                   "  %v = loop.view %x[%c1] : buffer<4xf32> -> "
                   "buffer<4xf32>\n",
                   "reaches outside its source's memory");
  expect_run_error(ctx,
                   "  %b = loop.alloc() : buffer<2xf32>\n"
                   "  loop.dealloc %b : buffer<2xf32>\n"
                   "  loop.dealloc %b : buffer<2xf32>\n",
                   "frees memory that loop.alloc did not return");
  expect_run_error(ctx,
                   "  %c = loop.constant_buffer dense<1.0> : tensor<4xf32>\n"
                   "  %z = loop.constant 0.0 : f32\n"
                   "  loop.store %z, %c[%c0] : buffer<4xf32>\n",
                   "writes a constant buffer");
  expect_run_error(ctx,
                   "  %b = loop.alloc() : buffer<1048576x1048576xf64>\n",
                   "allocates more than the interpreter's limit");
  fzContextDestroy(ctx);
}
END_TEST

/* Vectors, casts and calls through the interpreter. */
START_TEST(test_interpret_vectors_and_calls) {
  FzContext *ctx = loop_context();
  FzOp *m = parse(ctx,
                  "func.func private @twice(%a: buffer<8xf32>, %o: "
                  "buffer<8xbf16>) {\n"
                  "  %c0 = loop.constant 0 : index\n"
                  "  %c4 = loop.constant 4 : index\n"
                  "  %c8 = loop.constant 8 : index\n"
                  "  loop.for %i = %c0 to %c8 step %c4 {\n"
                  "    %v = loop.vector_load %a[%i] : buffer<8xf32>, "
                  "vector<4xf32>\n"
                  "    %w = loop.addf %v, %v : vector<4xf32>\n"
                  "    %h = loop.truncf %w : vector<4xf32> to vector<4xbf16>\n"
                  "    loop.vector_store %h, %o[%i] : buffer<8xbf16>, "
                  "vector<4xbf16>\n"
                  "    loop.yield\n  }\n"
                  "  return\n}\n"
                  "func.func @main(%a: buffer<8xf32>, %o: buffer<8xbf16>) {\n"
                  "  call @twice(%a, %o) : (buffer<8xf32>, buffer<8xbf16>) -> "
                  "()\n"
                  "  return\n}\n");
  ck_assert(fzOpVerify(m));
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("main"));
  FzTensor *a = f32_tensor(ctx, 1, (int64_t[]){8}, 0.5);
  FzTensor *o = fzTensorCreate(ctx, fzBF16TypeGet(ctx), 1, (int64_t[]){8});
  FzTensor *args[2] = {a, o};
  ck_assert(fzLoopInterpretFunction(f, 2, args, NULL));
  for (int64_t i = 0; i < 8; ++i)
    ck_assert(fzTensorGetF64(o, i) == 2.0 * (0.5 + (double)i));
  fzTensorDestroy(a);
  fzTensorDestroy(o);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Every allocation of an interpretation may fail: an error, no crash,
 * no leak. */
START_TEST(test_interpret_allocation_failures) {
  for (size_t failAt = 1;; ++failAt) {
    CountingAlloc c = {0};
    FzAllocator a = counting_allocator(&c);
    FzContext *ctx = fzContextCreateWithAllocator(&a);
    ck_assert(fzRegisterAllDialects(ctx));
    FzOp *m = parse(ctx, kKernel);
    FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("k"));
    FzTensor *x = f32_tensor(ctx, 2, (int64_t[]){4, 8}, 0.0);
    FzTensor *o = f32_tensor(ctx, 1, (int64_t[]){4}, 0.0);
    FzTensor *args[2] = {x, o};
    DiagLog log;
    diag_log_begin(&log, ctx);
    size_t start = c.numAllocs;
    c.failAt = start + failAt;
    bool ok = fzLoopInterpretFunction(f, 2, args, NULL);
    c.failAt = 0;
    diag_log_end(&log);
    fzTensorDestroy(x);
    fzTensorDestroy(o);
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

static Suite *loop_suite(void) {
  Suite *s = suite_create("loop");
  TCase *tc = tcase_create("dialect");
  tcase_add_test(tc, test_opcodes);
  tcase_add_test(tc, test_scalar_semantics);
  tcase_add_test(tc, test_roundtrip);
  tcase_add_test(tc, test_verifier);
  tcase_add_test(tc, test_folds);
  tcase_add_test(tc, test_interpret);
  tcase_add_test(tc, test_interpret_errors);
  tcase_add_test(tc, test_interpret_vectors_and_calls);
  tcase_add_test(tc, test_interpret_allocation_failures);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return run_suite(loop_suite());
}

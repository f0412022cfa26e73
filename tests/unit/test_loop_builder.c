/* tests/unit/test_loop_builder.c - FzLoopBuilder (dialects/loop/builder.h):
 * a loop nest built with the fzB* constructors verifies and computes on
 * the loop interpreter what the same sums computed here give (random
 * inputs); a failed operand, a failed type or a request over a limit is
 * a NULL and the flag, never a crash; under allocation failure every
 * build reports or succeeds and leaks nothing.
 */
#include "dialects/loop/builder.h"
#include "tests/unit/test_helpers.h"

enum { kRows = 4, kCols = 6 };

/* y[i] = 2 * sum_j x[i, j] + i, for i < kRows (a parallel over rows, a
 * reduction loop.for over columns, index arithmetic, a cast). */
static const char kSkeleton[] =
    "func.func @main(%x: buffer<4x6xf32>, %y: buffer<4xf32>) attributes "
    "{loop.num_outputs = 1 : i64} {\n"
    "  %c0 = loop.constant 0 : index\n"
    "  return\n"
    "}\n";

static FzContext *builder_context(const FzAllocator *a) {
  FzContext *ctx = a ? fzContextCreateWithAllocator(a) : fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  return ctx;
}

static FzOp *main_func(FzOp *module) {
  return fzSymbolTableLookupIn(module, FZ_STR("main"));
}

/* Builds the nest into @main of module, before its return, index
 * constants at the start of the function (before %c0); false when the
 * builder's flag went up. */
static bool build_nest(FzOp *module) {
  FzContext *ctx = fzOpGetContext(module);
  FzOp *func = main_func(module);
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  FzValue *x = fzBlockGetArgument(entry, 0), *y = fzBlockGetArgument(entry, 1);
  FzBuilder ip, consts;
  fzBuilderInit(&ip, ctx);
  fzBuilderSetInsertionPointBefore(&ip, fzBlockGetLastOp(entry));
  fzBuilderInit(&consts, ctx);
  fzBuilderSetInsertionPointToStart(&consts, entry);
  bool failed = false;
  FzLoopBuilder b;
  fzBInit(&b, ctx, &ip, fzOpGetLoc(func), &consts, &failed);
  FzType *f32 = fzF32TypeGet(ctx);
  int64_t rows = kRows;
  FzValue *i;
  FzLoopBuilder body, kb;
  FzOp *par = fzBParallel(&b, 1, &rows, &i, &body);
  FzValue *zero = fzBConst(&body, f32, 0.0);
  FzOp *red = fzBFor(&body, fzBIndex(&body, 0), fzBIndex(&body, kCols),
                     fzBIndex(&body, 1), 1, &zero, f32, &kb);
  if (!par || !red)
    return false;
  FzBlock *kbody = fzLoopGetBody(red);
  FzValue *j = fzBlockGetArgument(kbody, 0),
          *acc = fzBlockGetArgument(kbody, 1);
  /* j' = (j * 1 + 0): the trivial affine is j itself. */
  ck_assert_ptr_eq(fzBAffine(&kb, j, 1, 0), j);
  FzValue *lops[3] = {x, i, fzBAffine(&kb, j, 1, 0)};
  FzValue *xv = fzBOp1(&kb, "loop.load", 3, lops, f32);
  FzValue *sum = fzBBinary(&kb, "loop.addf", acc, xv);
  fzBSetYield(&kb, red, 1, &sum);
  /* 2 * s + float(i * 1 + 0) -- and i via an affine that builds ops:
   * (i * 3 + 6) / 3 - 2 = i. */
  FzValue *s = fzOpGetResult(red, 0);
  FzValue *twice = fzBBinary(&body, "loop.mulf", s, fzBConst(&body, f32, 2.0));
  FzValue *i3 = fzBAffine(&body, i, 3, 6);
  FzValue *back =
      fzBIndexOp(&body, "loop.subi",
                 fzBIndexOp(&body, "loop.divsi", i3, fzBIndex(&body, 3)),
                 fzBIndex(&body, 2));
  FzValue *asInt =
      fzBOp1(&body, "loop.index_cast", 1, &back, fzIntegerTypeGet(ctx, 64));
  FzValue *asF = fzBOp1(&body, "loop.sitofp", 1, &asInt, f32);
  FzValue *out = fzBBinary(&body, "loop.addf", twice, asF);
  FzValue *sops[3] = {out, y, i};
  fzBOp(&body, "loop.store", 3, sops, NULL);
  return !failed;
}

START_TEST(test_build_and_run) {
  FzContext *ctx = builder_context(NULL);
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kSkeleton),
                          FZ_STR("b.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  ck_assert(build_nest(m));
  ck_assert(fzOpVerify(m));
  const int64_t shape[2] = {kRows, kCols};
  FzTensor *in = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, shape);
  ck_assert_ptr_nonnull(in);
  unsigned seed = 7;
  for (int64_t k = 0; k < in->numElements; ++k) {
    seed = seed * 1103515245u + 12345u;
    fzTensorSetF64(in, k, (double)((seed >> 8) % 2001) / 500.0 - 2.0);
  }
  size_t n = 0;
  FzTensor **outs = NULL;
  ck_assert(fzLoopRunFunction(main_func(m), 1, &in, NULL, NULL, &n, &outs));
  ck_assert_uint_eq(n, 1);
  for (int64_t r = 0; r < kRows; ++r) {
    float s = 0.0f; /* the interpreter's f32 sums, in the same order */
    for (int64_t c = 0; c < kCols; ++c)
      s += (float)fzTensorGetF64(in, r * kCols + c);
    float want = 2.0f * s + (float)r;
    ck_assert_float_eq_tol((float)fzTensorGetF64(outs[0], r), want, 1e-6f);
  }
  fzTensorArrayDestroy(ctx, n, outs);
  fzTensorDestroy(in);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Failures are NULLs and the flag. */
START_TEST(test_failures) {
  FzContext *ctx = builder_context(NULL);
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kSkeleton),
                          FZ_STR("b.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(main_func(m), 0));
  FzBuilder ip;
  fzBuilderInit(&ip, ctx);
  fzBuilderSetInsertionPointToStart(&ip, entry);
  bool failed = false;
  FzLoopBuilder b;
  fzBInit(&b, ctx, &ip, fzOpGetLoc(m), NULL, &failed);
  ck_assert(!failed);
  FzValue *one = fzBIndex(&b, 1);
  ck_assert_ptr_nonnull(one);
  ck_assert(!failed);
  /* A NULL operand. */
  ck_assert_ptr_null(fzBIndexOp(&b, "loop.addi", one, NULL));
  ck_assert(failed);
  failed = false;
  /* No result type (as after a failed type). */
  ck_assert_ptr_null(fzBOp1(&b, "loop.addi", 1, &one, NULL));
  ck_assert(failed);
  failed = false;
  /* Over the limits. */
  int64_t ub[FZ_B_MAX_DIMS + 1];
  FzValue *ivs[FZ_B_MAX_DIMS + 1];
  for (size_t d = 0; d <= FZ_B_MAX_DIMS; ++d)
    ub[d] = 2;
  FzLoopBuilder body;
  ck_assert_ptr_null(fzBParallel(&b, FZ_B_MAX_DIMS + 1, ub, ivs, &body));
  ck_assert(failed);
  failed = false;
  ck_assert_ptr_null(fzBParallel(&b, 0, ub, ivs, &body));
  ck_assert(failed);
  failed = false;
  ck_assert_ptr_null(fzBFor(&b, one, one, NULL, 0, NULL, NULL, &body));
  ck_assert(failed);
  failed = false;
  ck_assert(!fzBPrefetch(&b, 1, &one, 4));
  ck_assert(failed);
  failed = false;
  ck_assert(!fzBSetYield(&b, NULL, 0, NULL));
  ck_assert(failed);
  failed = false;
  ck_assert_ptr_null(fzBVectorType(&b, 4, NULL));
  ck_assert(failed);
  /* Nothing half-built was left behind: the module still verifies. */
  ck_assert(fzOpVerify(m));
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Every allocation of the build failing in turn: the build reports (the
 * flag, the context's out-of-memory error) or succeeds, and the module
 * destroyed afterwards leaves nothing allocated. */
START_TEST(test_allocation_failures) {
  size_t covered = 0;
  for (size_t failAt = 1;; ++failAt) {
    CountingAlloc c = {0};
    FzAllocator a = counting_allocator(&c);
    FzContext *ctx = builder_context(&a);
    FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kSkeleton),
                            FZ_STR("b.fuse"), 0);
    ck_assert_ptr_nonnull(m);
    DiagLog log;
    diag_log_begin(&log, ctx);
    c.failAt = c.numAllocs + failAt;
    bool ok = build_nest(m);
    c.failAt = 0;
    if (c.numFailures > 0) {
      ck_assert(fzContextHadAllocationFailure(ctx));
      ck_assert_ptr_nonnull(diag_log_find(&log, "out of memory"));
      ck_assert_msg(!ok, "failAt %zu: a failed allocation went unreported",
                    failAt);
    }
    diag_log_end(&log);
    fzOpDestroy(m);
    fzContextDestroy(ctx);
    ck_assert_msg(c.liveBlocks == 0, "failAt %zu: %zu blocks leaked", failAt,
                  c.liveBlocks);
    ck_assert_uint_eq(c.badFrees, 0);
    if (c.numFailures == 0) {
      ck_assert(ok);
      break;
    }
    covered = failAt;
    ck_assert_uint_lt(failAt, 100000);
  }
  ck_assert_uint_gt(covered, 20);
}
END_TEST

int main(void) {
  Suite *s = suite_create("loop_builder");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_build_and_run);
  tcase_add_test(tc, test_failures);
  tcase_add_test(tc, test_allocation_failures);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

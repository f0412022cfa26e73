/* tests/unit/test_loop_builder.c - FzLoopBuilder (dialects/loop/builder.h):
 * a loop nest built with the fzB* constructors verifies and computes on
 * the loop interpreter what the same sums computed here give (random
 * inputs); a failed operand, a failed type or a request over a limit is
 * a NULL and the flag, never a crash; under allocation failure every
 * build reports or succeeds and leaks nothing. The scalar constructors
 * lower-graph-to-loop uses (loads, stores, compares, selects, fma,
 * casts) compute on the interpreter what C computes; the folding index
 * arithmetic folds what it documents and builds the rest; a placer gets
 * every op and a constant cache makes each constant once.
 */
#include <math.h>

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

/* y[i] = x[i, 0] < 0 ? -x[i, 0] : fma(x[i, 0], 2, float(i)), built
 * with the scalar constructors. */
static bool build_scalar_nest(FzOp *module) {
  FzContext *ctx = fzOpGetContext(module);
  FzOp *func = main_func(module);
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  FzValue *x = fzBlockGetArgument(entry, 0), *y = fzBlockGetArgument(entry, 1);
  FzBuilder ip;
  fzBuilderInit(&ip, ctx);
  fzBuilderSetInsertionPointBefore(&ip, fzBlockGetLastOp(entry));
  bool failed = false;
  FzLoopBuilder b;
  fzBInit(&b, ctx, &ip, fzOpGetLoc(func), NULL, &failed);
  FzType *f32 = fzF32TypeGet(ctx);
  int64_t rows = kRows;
  FzValue *i;
  FzLoopBuilder body;
  FzOp *par = fzBParallel(&b, 1, &rows, &i, &body);
  if (!par)
    return false;
  FzValue *at0[2] = {i, fzBIndex(&body, 0)};
  FzValue *v = fzBLoad(&body, x, at0);
  FzValue *neg = fzBCmp(&body, "olt", v, fzBConst(&body, f32, 0.0));
  FzValue *asInt = fzBCast(&body, "loop.index_cast", i,
                           fzIntegerTypeGet(ctx, 64));
  FzValue *fi = fzBCast(&body, "loop.sitofp", asInt, f32);
  FzValue *f = fzBFma(&body, v, fzBConst(&body, f32, 2.0), fi);
  FzValue *r = fzBSelect(&body, neg, fzBUnary(&body, "loop.negf", v), f);
  fzBStore(&body, r, y, &i);
  return !failed;
}

START_TEST(test_scalar_ops) {
  FzContext *ctx = builder_context(NULL);
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kSkeleton),
                          FZ_STR("b.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  ck_assert(build_scalar_nest(m));
  ck_assert(fzOpVerify(m));
  const int64_t shape[2] = {kRows, kCols};
  FzTensor *in = fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, shape);
  ck_assert_ptr_nonnull(in);
  unsigned seed = 11;
  for (int64_t k = 0; k < in->numElements; ++k) {
    seed = seed * 1103515245u + 12345u;
    fzTensorSetF64(in, k, (double)((seed >> 8) % 2001) / 500.0 - 2.0);
  }
  size_t n = 0;
  FzTensor **outs = NULL;
  ck_assert(fzLoopRunFunction(main_func(m), 1, &in, NULL, NULL, &n, &outs));
  ck_assert_uint_eq(n, 1);
  for (int64_t r = 0; r < kRows; ++r) {
    float v = (float)fzTensorGetF64(in, r * kCols);
    float want = v < 0 ? -v : fmaf(v, 2.0f, (float)r);
    ck_assert_float_eq_tol((float)fzTensorGetF64(outs[0], r), want, 1e-6f);
  }
  fzTensorArrayDestroy(ctx, n, outs);
  fzTensorDestroy(in);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

static bool is_const(FzValue *v, int64_t want) {
  int64_t got;
  return fzLoopValueGetConstantInt(v, &got) && got == want;
}

static bool is_op(FzValue *v, const char *name) {
  FzOp *def = v ? fzValueGetDefiningOp(v) : NULL;
  return def && fzStringRefEqual(fzIdentGetString(fzOpGetName(def)),
                                 fzStringRefFromCString(name));
}

/* The folding forms fold what they document and build the rest. */
START_TEST(test_folding) {
  FzContext *ctx = builder_context(NULL);
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kSkeleton),
                          FZ_STR("b.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(main_func(m), 0));
  FzBuilder ip;
  fzBuilderInit(&ip, ctx);
  fzBuilderSetInsertionPointBefore(&ip, fzBlockGetLastOp(entry));
  bool failed = false;
  FzLoopBuilder b, body;
  fzBInit(&b, ctx, &ip, fzOpGetLoc(m), NULL, &failed);
  int64_t ub[2] = {3, 4};
  FzValue *iv[2];
  ck_assert_ptr_nonnull(fzBParallel(&b, 2, ub, iv, &body));
  FzValue *j = iv[0], *i = iv[1]; /* j in [0, 3), i in [0, 4) */
  FzValue *c5 = fzBIndex(&body, 5), *c0 = fzBIndex(&body, 0);
  ck_assert(is_const(fzBAddFold(&body, c5, fzBIndex(&body, 7)), 12));
  ck_assert_ptr_eq(fzBAddFold(&body, c0, i), i);
  ck_assert_ptr_eq(fzBAddFold(&body, i, c0), i);
  ck_assert(is_op(fzBAddFold(&body, i, j), "loop.addi"));
  ck_assert(is_const(fzBMulFold(&body, i, 0), 0));
  ck_assert_ptr_eq(fzBMulFold(&body, i, 1), i);
  ck_assert(is_const(fzBMulFold(&body, c5, 3), 15));
  ck_assert(is_op(fzBMulFold(&body, i, 3), "loop.muli"));
  ck_assert(is_const(fzBDivFold(&body, fzBIndex(&body, 17), 5), 3));
  ck_assert(is_const(fzBRemFold(&body, fzBIndex(&body, 17), 5), 2));
  ck_assert_ptr_eq(fzBDivFold(&body, i, 1), i);
  ck_assert(is_const(fzBRemFold(&body, i, 1), 0));
  /* i < 4: i / 4 = 0, i % 4 = i. */
  ck_assert(is_const(fzBDivFold(&body, i, 4), 0));
  ck_assert_ptr_eq(fzBRemFold(&body, i, 4), i);
  /* a = j * 8 + i (i < 4): a / 4 = j * 2, a % 4 = i; j * 8 alone: % 4
   * is 0. */
  FzValue *j8 = fzBMulFold(&body, j, 8);
  FzValue *a = fzBAddFold(&body, j8, i);
  FzValue *q = fzBDivFold(&body, a, 4);
  ck_assert(is_op(q, "loop.muli"));
  ck_assert_ptr_eq(fzOpGetOperand(fzValueGetDefiningOp(q), 0), j);
  ck_assert(is_const(fzOpGetOperand(fzValueGetDefiningOp(q), 1), 2));
  ck_assert_ptr_eq(fzBRemFold(&body, a, 4), i);
  ck_assert(is_const(fzBRemFold(&body, j8, 4), 0));
  /* What does not fold is built: i / 3, (j * 8 + i) % 3. */
  ck_assert(is_op(fzBDivFold(&body, i, 3), "loop.divsi"));
  ck_assert(is_op(fzBRemFold(&body, a, 3), "loop.remsi"));
  ck_assert(!failed);
  /* A failed operand is a failure, whatever would have folded. */
  ck_assert_ptr_null(fzBMulFold(&body, NULL, 0));
  ck_assert(failed);
  failed = false;
  ck_assert_ptr_null(fzBAddFold(&body, c0, NULL));
  ck_assert(failed);
  failed = false;
  ck_assert_ptr_null(fzBDivFold(&body, c5, 0));
  ck_assert(failed);
  ck_assert(fzOpVerify(m));
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* A placer that builds every op at its own insertion point and counts
 * them. */
typedef struct Placer {
  FzBuilder at;
  size_t placed;
} Placer;

static FzOp *place_op(void *owner, FzOpState *st) {
  Placer *p = owner;
  FzOp *op = fzBuilderCreate(&p->at, st);
  p->placed += op != NULL;
  return op;
}

/* With a placer, ops go where it puts them (a copy of the builder
 * builds at its own place); with a constant cache, each constant is
 * made once, at consts. */
START_TEST(test_placer_and_cache) {
  FzContext *ctx = builder_context(NULL);
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kSkeleton),
                          FZ_STR("b.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  FzBlock *entry = fzRegionGetFirstBlock(fzOpGetRegion(main_func(m), 0));
  FzOp *c0op = fzBlockGetFirstOp(entry), *ret = fzBlockGetLastOp(entry);
  FzBuilder ip, consts;
  fzBuilderInit(&ip, ctx);
  fzBuilderSetInsertionPointBefore(&ip, ret);
  fzBuilderInit(&consts, ctx);
  fzBuilderSetInsertionPointToStart(&consts, entry);
  Placer p = {.placed = 0};
  fzBuilderInit(&p.at, ctx);
  fzBuilderSetInsertionPointAfter(&p.at, c0op); /* right after %c0 */
  FzPtrMap cache;
  fzPtrMapInit(&cache, ctx);
  bool failed = false;
  FzLoopBuilder b;
  fzBInit(&b, ctx, &ip, fzOpGetLoc(m), &consts, &failed);
  fzBSetPlacer(&b, place_op, &p);
  fzBSetConstantCache(&b, &cache);
  FzType *f32 = fzF32TypeGet(ctx), *i32 = fzIntegerTypeGet(ctx, 32);
  FzValue *one = fzBIndex(&b, 1);
  ck_assert_ptr_eq(fzBIndex(&b, 1), one);
  FzValue *h = fzBConst(&b, f32, 0.5);
  ck_assert_ptr_eq(fzBConst(&b, f32, 0.5), h);
  FzValue *big = fzBConstInt(&b, i32, 1 << 30);
  ck_assert_ptr_eq(fzBConstInt(&b, i32, 1 << 30), big);
  /* The constants are at consts (the start), not through the placer. */
  ck_assert_uint_eq(p.placed, 0);
  ck_assert_ptr_eq(fzBlockGetFirstOp(entry), fzValueGetDefiningOp(one));
  /* An op goes through the placer: after %c0. */
  FzValue *two = fzBIndexOp(&b, "loop.addi", one, one);
  ck_assert_uint_eq(p.placed, 1);
  ck_assert_ptr_eq(fzOpGetNextInBlock(c0op), fzValueGetDefiningOp(two));
  /* A copy builds at its place (before the return), without the
   * placer. */
  FzLoopBuilder at = fzBBefore(&b, ret);
  FzValue *three = fzBIndexOp(&at, "loop.addi", two, one);
  ck_assert_uint_eq(p.placed, 1);
  ck_assert_ptr_eq(fzOpGetPrevInBlock(ret), fzValueGetDefiningOp(three));
  ck_assert(!failed);
  ck_assert(fzOpVerify(m));
  fzPtrMapFree(&cache);
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
  failed = false;
  ck_assert_ptr_null(fzBLoad(&b, NULL, &one));
  ck_assert(failed);
  failed = false;
  ck_assert(!fzBStore(&b, NULL, one, NULL));
  ck_assert(failed);
  failed = false;
  ck_assert_ptr_null(fzBCmp(&b, "eq", one, NULL));
  ck_assert(failed);
  failed = false;
  ck_assert_ptr_null(fzBCast(&b, "loop.index_cast", one, NULL));
  ck_assert(failed);
  failed = false;
  ck_assert_ptr_null(fzBConstInt(&b, NULL, 3));
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
    bool ok = build_nest(m) && build_scalar_nest(m);
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
  tcase_add_test(tc, test_scalar_ops);
  tcase_add_test(tc, test_folding);
  tcase_add_test(tc, test_placer_and_cache);
  tcase_add_test(tc, test_failures);
  tcase_add_test(tc, test_allocation_failures);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

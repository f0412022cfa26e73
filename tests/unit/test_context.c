/* tests/unit/test_context.c - Check suite for the context and everything
 * it uniques: identifiers, types, attributes and locations (compared by
 * pointer), dictionary sorting and duplicate detection, dense splats,
 * half/bfloat conversions, shape limits, the diagnostic handler stack,
 * and survival of allocation failures (no crash, a report, no leak).
 */
#include <fcntl.h>
#include <math.h>
#include <unistd.h>

#include "test_helpers.h"

/*===--- Creation -------------------------------------------------------===*/

START_TEST(test_create_destroy) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(!fzContextHadAllocationFailure(ctx));
  ck_assert(!fzContextGetAllowUnregisteredDialects(ctx));
  ck_assert_uint_eq(fzContextGetMaxNesting(ctx), 256);
  ck_assert_uint_eq(fzContextGetNumErrors(ctx), 0);
  fzContextSetAllowUnregisteredDialects(ctx, true);
  ck_assert(fzContextGetAllowUnregisteredDialects(ctx));
  fzContextSetMaxNesting(ctx, 1000);
  ck_assert_uint_eq(fzContextGetMaxNesting(ctx), 1000);
  fzContextDestroy(ctx);
  fzContextDestroy(NULL); /* ignored */

  FzAllocator none = {NULL, NULL};
  ck_assert_ptr_null(fzContextCreateWithAllocator(&none));
  ck_assert_ptr_null(fzContextCreateWithAllocator(NULL));
  ck_assert_str_eq(fzGetVersionString(), FZ_VERSION_STRING);
}
END_TEST

START_TEST(test_custom_allocator_sees_everything) {
  CountingAlloc c = {0};
  FzAllocator a = counting_allocator(&c);
  FzContext *ctx = fzContextCreateWithAllocator(&a);
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert_uint_gt(c.liveBlocks, 0);
  for (int i = 0; i < 2000; ++i) {
    char name[32];
    snprintf(name, sizeof name, "ident%d", i);
    ck_assert_ptr_nonnull(fzIdentGet(ctx, fzStringRefFromCString(name)));
  }
  fzContextDestroy(ctx);
  ck_assert_uint_eq(c.liveBlocks, 0);
  ck_assert_int_eq(c.liveBytes, 0);
  ck_assert_uint_eq(c.badFrees, 0);
}
END_TEST

START_TEST(test_registry) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_null(fzContextLookupOpDef(ctx, FZ_STR("func.func")));
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllDialects(ctx)); /* twice is harmless */
  const FzOpDef *def = fzContextLookupOpDef(ctx, FZ_STR("func.func"));
  ck_assert_ptr_nonnull(def);
  ck_assert_str_eq(def->name, "func.func");
  ck_assert_ptr_nonnull(fzContextLookupOpDef(ctx, FZ_STR("func.return")));
  ck_assert_ptr_nonnull(fzContextLookupOpDef(ctx, FZ_STR("func.call")));
  ck_assert_ptr_nonnull(fzContextLookupOpDef(ctx, FZ_STR("builtin.module")));
  ck_assert_ptr_null(fzContextLookupOpDef(ctx, FZ_STR("func.nope")));
  ck_assert_ptr_nonnull(fzContextLookupDialect(ctx, FZ_STR("func")));
  ck_assert_ptr_null(fzContextLookupDialect(ctx, FZ_STR("graphx")));

  /* A different table under a registered name is an error. */
  static const FzDialectDef impostor = {"func", "x", NULL, 0, NULL};
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert(!fzContextRegisterDialect(ctx, &impostor));
  ck_assert_diag(&log, "already registered");
  /* An op outside its dialect's namespace is an error. */
  static const FzOpDef stray = {.name = "other.op", .numOperands = 0};
  static const FzOpDef *const strayOps[] = {&stray};
  static const FzDialectDef mine = {"mine", "x", strayOps, 1, NULL};
  ck_assert(!fzContextRegisterDialect(ctx, &mine));
  ck_assert_diag(&log, "namespace");
  ck_assert_ptr_null(fzContextLookupDialect(ctx, FZ_STR("mine")));
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Interning and uniquing -----------------------------------------===*/

START_TEST(test_ident_interning) {
  FzContext *ctx = fzContextCreate();
  FzIdent *a = fzIdentGet(ctx, FZ_STR("hello"));
  FzIdent *b = fzIdentGet(ctx, FZ_STR("hello"));
  FzIdent *c = fzIdentGet(ctx, FZ_STR("hellp"));
  ck_assert_ptr_eq(a, b);
  ck_assert_ptr_ne(a, c);
  FzStringRef s = fzIdentGetString(a);
  ck_assert_uint_eq(s.length, 5);
  ck_assert_int_eq(memcmp(s.data, "hello", 5), 0);
  ck_assert_int_eq(s.data[5], 0); /* NUL-terminated copy */

  /* Not NUL-terminated input, embedded NUL, empty string, prefixes. */
  const char raw[] = {'a', 'b', 'c', 'd'};
  FzStringRef ab = {raw, 2};
  ck_assert_ptr_eq(fzIdentGet(ctx, ab), fzIdentGet(ctx, FZ_STR("ab")));
  FzStringRef withNul = {"x\0y", 3};
  FzIdent *n1 = fzIdentGet(ctx, withNul);
  ck_assert_ptr_ne(n1, fzIdentGet(ctx, FZ_STR("x")));
  ck_assert_uint_eq(fzIdentGetString(n1).length, 3);
  FzStringRef empty = {NULL, 0};
  ck_assert_ptr_eq(fzIdentGet(ctx, empty), fzIdentGet(ctx, FZ_STR("")));

  /* Many identifiers: the table grows and every one stays unique. */
  FzIdent *ids[5000];
  for (int i = 0; i < 5000; ++i) {
    char name[32];
    snprintf(name, sizeof name, "name_%d", i);
    ids[i] = fzIdentGet(ctx, fzStringRefFromCString(name));
    ck_assert_ptr_nonnull(ids[i]);
  }
  for (int i = 0; i < 5000; ++i) {
    char name[32];
    snprintf(name, sizeof name, "name_%d", i);
    ck_assert_ptr_eq(ids[i], fzIdentGet(ctx, fzStringRefFromCString(name)));
  }
  ck_assert_ptr_eq(a, fzIdentGet(ctx, FZ_STR("hello")));
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_type_uniquing) {
  FzContext *ctx = fzContextCreate();
  FzType *f32 = fzF32TypeGet(ctx);
  ck_assert_ptr_eq(f32, fzF32TypeGet(ctx));
  ck_assert_ptr_ne(f32, fzF64TypeGet(ctx));
  ck_assert_ptr_ne(fzF16TypeGet(ctx), fzBF16TypeGet(ctx));
  ck_assert_ptr_eq(fzIntegerTypeGet(ctx, 32), fzIntegerTypeGet(ctx, 32));
  ck_assert_ptr_ne(fzIntegerTypeGet(ctx, 32), fzIntegerTypeGet(ctx, 31));
  ck_assert_ptr_null(fzIntegerTypeGet(ctx, 0));
  ck_assert_ptr_null(fzIntegerTypeGet(ctx, 65));
  ck_assert_int_eq(fzTypeGetKind(fzIndexTypeGet(ctx)), FZ_TYPE_INDEX);
  ck_assert_uint_eq(fzTypeGetBitWidth(fzBF16TypeGet(ctx)), 16);
  ck_assert_uint_eq(fzTypeGetBitWidth(fzIndexTypeGet(ctx)), 64);
  ck_assert_uint_eq(fzTypeGetBitWidth(fzIntegerTypeGet(ctx, 7)), 7);
  ck_assert_uint_eq(fzTypeGetStorageSize(fzIntegerTypeGet(ctx, 1)), 1);
  ck_assert_uint_eq(fzTypeGetStorageSize(fzIntegerTypeGet(ctx, 17)), 4);
  ck_assert(fzTypeIsFloat(fzBF16TypeGet(ctx)));
  ck_assert(!fzTypeIsInteger(fzIndexTypeGet(ctx)));
  ck_assert(fzTypeIsIntOrIndex(fzIndexTypeGet(ctx)));
  ck_assert_ptr_eq(fzTypeGetContext(f32), ctx);

  int64_t s1[] = {4, FZ_DYNAMIC, 8};
  int64_t s2[] = {4, FZ_DYNAMIC, 8};
  int64_t s3[] = {4, 7, 8};
  FzType *t1 = fzTensorTypeGet(ctx, 3, s1, f32, NULL);
  FzType *t2 = fzTensorTypeGet(ctx, 3, s2, f32, NULL);
  FzType *t3 = fzTensorTypeGet(ctx, 3, s3, f32, NULL);
  ck_assert_ptr_nonnull(t1);
  ck_assert_ptr_eq(t1, t2);
  ck_assert_ptr_ne(t1, t3);
  ck_assert_ptr_ne(t1, fzTensorTypeGet(ctx, 2, s1, f32, NULL));
  ck_assert_ptr_ne(t1, fzTensorTypeGet(ctx, 3, s1, fzF16TypeGet(ctx), NULL));
  ck_assert(!fzShapedTypeHasStaticShape(t1));
  ck_assert(fzShapedTypeHasStaticShape(t3));
  ck_assert_int_eq(fzShapedTypeGetNumElements(t3), 224);
  ck_assert_int_eq(fzShapedTypeGetNumElements(t1), -1);
  ck_assert_int_eq(fzShapedTypeGetDim(t1, 1), FZ_DYNAMIC);
  ck_assert_ptr_eq(fzShapedTypeGetElementType(t1), f32);
  s1[0] = 99; /* the type holds its own copy */
  ck_assert_int_eq(fzShapedTypeGetDim(t1, 0), 4);

  FzType *scalarT = fzTensorTypeGet(ctx, 0, NULL, f32, NULL);
  ck_assert_ptr_nonnull(scalarT);
  ck_assert_ptr_eq(scalarT, fzTensorTypeGet(ctx, 0, NULL, f32, NULL));
  ck_assert_int_eq(fzShapedTypeGetNumElements(scalarT), 1);
  FzType *unranked = fzTensorTypeGet(ctx, FZ_UNRANKED, NULL, f32, NULL);
  ck_assert_ptr_nonnull(unranked);
  ck_assert_ptr_ne(unranked, scalarT);
  ck_assert_uint_eq(fzShapedTypeGetRank(unranked), FZ_UNRANKED);
  ck_assert_ptr_eq(unranked, fzTensorTypeGet(ctx, FZ_UNRANKED, s3, f32,
                                             NULL));

  /* Vectors and buffers are distinct kinds over the same shape. */
  FzType *v = fzVectorTypeGet(ctx, 3, s3, f32, NULL);
  FzType *buf = fzBufferTypeGet(ctx, 3, s3, f32, NULL, 0, NULL);
  ck_assert_ptr_nonnull(v);
  ck_assert_ptr_nonnull(buf);
  ck_assert_ptr_ne(v, t3);
  ck_assert_ptr_ne(buf, t3);
  ck_assert_ptr_ne(buf, v);
  /* Identity strides are stored as the default layout. */
  int64_t identity[] = {56, 8, 1};
  ck_assert_ptr_eq(buf, fzBufferTypeGet(ctx, 3, s3, f32, identity, 0, NULL));
  ck_assert_ptr_null(fzBufferTypeGetStrides(buf));
  int64_t strided[] = {64, 8, 1};
  FzType *sb = fzBufferTypeGet(ctx, 3, s3, f32, strided, 0, NULL);
  ck_assert_ptr_ne(sb, buf);
  ck_assert_int_eq(fzBufferTypeGetStrides(sb)[0], 64);
  FzType *space1 = fzBufferTypeGet(ctx, 3, s3, f32, NULL, 1, NULL);
  ck_assert_ptr_ne(space1, buf);
  ck_assert_uint_eq(fzBufferTypeGetMemorySpace(space1), 1);

  FzType *ins[] = {f32, t3};
  FzType *outs[] = {fzIntegerTypeGet(ctx, 1)};
  FzType *fn = fzFunctionTypeGet(ctx, 2, ins, 1, outs);
  ck_assert_ptr_eq(fn, fzFunctionTypeGet(ctx, 2, ins, 1, outs));
  ck_assert_ptr_ne(fn, fzFunctionTypeGet(ctx, 1, ins, 2, (FzType *[]){t3,
                                                                     outs[0]}));
  ck_assert_ptr_ne(fn, fzFunctionTypeGet(ctx, 2, ins, 0, NULL));
  ck_assert_uint_eq(fzFunctionTypeGetNumInputs(fn), 2);
  ck_assert_ptr_eq(fzFunctionTypeGetInput(fn, 1), t3);
  ck_assert_ptr_eq(fzFunctionTypeGetResult(fn, 0), outs[0]);
  /* A long signature (past any small inline buffer). */
  FzType *many[40];
  for (int i = 0; i < 40; ++i)
    many[i] = i % 2 ? f32 : t3;
  FzType *big = fzFunctionTypeGet(ctx, 20, many, 20, many + 20);
  ck_assert_ptr_eq(big, fzFunctionTypeGet(ctx, 20, many, 20, many + 20));
  ck_assert_ptr_eq(fzFunctionTypeGetResult(big, 19), many[39]);

  FzType *o1 = fzOpaqueTypeGet(ctx, FZ_STR("foo"), FZ_STR("bar<1>"));
  ck_assert_ptr_eq(o1, fzOpaqueTypeGet(ctx, FZ_STR("foo"), FZ_STR("bar<1>")));
  ck_assert_ptr_ne(o1, fzOpaqueTypeGet(ctx, FZ_STR("fo"), FZ_STR("obar<1>")));
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_attr_uniquing) {
  FzContext *ctx = fzContextCreate();
  FzType *i8 = fzIntegerTypeGet(ctx, 8);
  FzType *i64 = fzIntegerTypeGet(ctx, 64);
  FzType *i1 = fzIntegerTypeGet(ctx, 1);
  FzType *f32 = fzF32TypeGet(ctx);
  FzType *f16 = fzF16TypeGet(ctx);

  FzAttr *five = fzIntegerAttrGet(ctx, i64, 5);
  ck_assert_ptr_eq(five, fzIntegerAttrGet(ctx, i64, 5));
  ck_assert_ptr_ne(five, fzIntegerAttrGet(ctx, i8, 5));
  ck_assert_ptr_ne(five, fzIntegerAttrGet(ctx, fzIndexTypeGet(ctx), 5));
  ck_assert_ptr_eq(fzAttrGetType(five), i64);
  /* Truncated to the width and sign-extended. */
  ck_assert_int_eq(fzIntegerAttrGetValue(fzIntegerAttrGet(ctx, i8, 255)), -1);
  ck_assert_ptr_eq(fzIntegerAttrGet(ctx, i8, 255),
                   fzIntegerAttrGet(ctx, i8, -1));
  ck_assert_int_eq(fzIntegerAttrGetValue(fzIntegerAttrGet(ctx, i8, 300)), 44);
  ck_assert_ptr_null(fzIntegerAttrGet(ctx, f32, 1));
  /* i1 integers are the bool attributes. */
  ck_assert_ptr_eq(fzIntegerAttrGet(ctx, i1, 1), fzBoolAttrGet(ctx, true));
  ck_assert_ptr_eq(fzIntegerAttrGet(ctx, i1, 0), fzBoolAttrGet(ctx, false));
  ck_assert_ptr_ne(fzBoolAttrGet(ctx, true), fzBoolAttrGet(ctx, false));
  ck_assert(fzBoolAttrGetValue(fzBoolAttrGet(ctx, true)));
  ck_assert_ptr_eq(fzAttrGetType(fzBoolAttrGet(ctx, true)), i1);
  ck_assert_ptr_eq(fzUnitAttrGet(ctx), fzUnitAttrGet(ctx));

  FzAttr *fl = fzFloatAttrGet(ctx, f32, 0.1);
  ck_assert_ptr_eq(fl, fzFloatAttrGet(ctx, f32, 0.1));
  ck_assert_ptr_ne(fl, fzFloatAttrGet(ctx, fzF64TypeGet(ctx), 0.1));
  ck_assert(fzFloatAttrGetValue(fl) == (double)0.1f); /* rounded to f32 */
  /* Values equal after rounding to the type are one attribute. */
  ck_assert_ptr_eq(fzFloatAttrGet(ctx, f16, 1.0),
                   fzFloatAttrGet(ctx, f16, 1.0 + 1.0 / 4096));
  /* 0.0 and -0.0 differ (bitwise comparison). */
  ck_assert_ptr_ne(fzFloatAttrGet(ctx, f32, 0.0),
                   fzFloatAttrGet(ctx, f32, -0.0));
  ck_assert_ptr_null(fzFloatAttrGet(ctx, i8, 1.0));

  FzAttr *s1 = fzStringAttrGet(ctx, FZ_STR("abc"));
  ck_assert_ptr_eq(s1, fzStringAttrGet(ctx, FZ_STR("abc")));
  ck_assert_ptr_ne(s1, fzStringAttrGet(ctx, FZ_STR("abd")));
  FzStringRef sv = fzStringAttrGetValue(s1);
  ck_assert_uint_eq(sv.length, 3);
  FzStringRef binary = {"a\0b", 3};
  ck_assert_ptr_ne(fzStringAttrGet(ctx, binary), fzStringAttrGet(ctx,
                                                                 FZ_STR("a")));
  ck_assert_ptr_ne(fzTypeAttrGet(ctx, f32), fzTypeAttrGet(ctx, f16));
  ck_assert_ptr_eq(fzTypeAttrGetValue(fzTypeAttrGet(ctx, f32)), f32);

  FzAttr *elts[] = {five, s1, fl};
  FzAttr *arr = fzArrayAttrGet(ctx, 3, elts);
  ck_assert_ptr_eq(arr, fzArrayAttrGet(ctx, 3, elts));
  ck_assert_ptr_ne(arr, fzArrayAttrGet(ctx, 2, elts));
  ck_assert_ptr_eq(fzArrayAttrGetElement(arr, 1), s1);
  ck_assert_ptr_eq(fzArrayAttrGet(ctx, 0, NULL), fzArrayAttrGet(ctx, 0, NULL));
  FzAttr *withNull[] = {five, NULL};
  ck_assert_ptr_null(fzArrayAttrGet(ctx, 2, withNull));
  FzAttr *nested[] = {arr, arr};
  ck_assert_ptr_eq(fzArrayAttrGet(ctx, 2, nested),
                   fzArrayAttrGet(ctx, 2, nested));

  FzStringRef path[] = {FZ_STR("inner"), FZ_STR("leaf")};
  FzAttr *sym = fzSymbolRefAttrGet(ctx, FZ_STR("root"), 2, path);
  ck_assert_ptr_eq(sym, fzSymbolRefAttrGet(ctx, FZ_STR("root"), 2, path));
  ck_assert_ptr_ne(sym, fzSymbolRefAttrGet(ctx, FZ_STR("root"), 1, path));
  ck_assert_ptr_ne(sym, fzStringAttrGet(ctx, FZ_STR("root")));
  ck_assert_uint_eq(fzSymbolRefAttrGetNumNested(sym), 2);
  FzStringRef leaf = fzSymbolRefAttrGetNested(sym, 1);
  ck_assert(fzStringRefEqual(leaf, FZ_STR("leaf")));

  int64_t darr[] = {1, 2, 3};
  FzAttr *da = fzDenseArrayAttrGet(ctx, i64, 3, darr);
  ck_assert_ptr_eq(da, fzDenseArrayAttrGet(ctx, i64, 3, darr));
  ck_assert_int_eq(fzDenseArrayAttrGetInt(da, 2), 3);
  ck_assert_ptr_ne(fzDenseArrayAttrGet(ctx, i64, 0, NULL), da);

  FzAttr *op1 = fzOpaqueAttrGet(ctx, FZ_STR("d"), FZ_STR("x<1>"));
  ck_assert_ptr_eq(op1, fzOpaqueAttrGet(ctx, FZ_STR("d"), FZ_STR("x<1>")));
  ck_assert_int_eq(fzAttrGetKind(op1), FZ_ATTR_OPAQUE);
  ck_assert_ptr_eq(fzAttrGetContext(op1), ctx);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_loc_uniquing) {
  FzContext *ctx = fzContextCreate();
  FzLoc *unk = fzUnknownLocGet(ctx);
  ck_assert_ptr_eq(unk, fzUnknownLocGet(ctx));
  FzLoc *a = fzFileLineColLocGet(ctx, FZ_STR("a.fuse"), 3, 7);
  ck_assert_ptr_eq(a, fzFileLineColLocGet(ctx, FZ_STR("a.fuse"), 3, 7));
  ck_assert_ptr_ne(a, fzFileLineColLocGet(ctx, FZ_STR("a.fuse"), 3, 8));
  ck_assert_ptr_ne(a, fzFileLineColLocGet(ctx, FZ_STR("a.fuse"), 4, 7));
  ck_assert_ptr_ne(a, fzFileLineColLocGet(ctx, FZ_STR("b.fuse"), 3, 7));
  ck_assert_uint_eq(fzLocGetLine(a), 3);
  ck_assert_uint_eq(fzLocGetColumn(a), 7);
  ck_assert(fzStringRefEqual(fzLocGetFile(a), FZ_STR("a.fuse")));
  FzLoc *b = fzFileLineColLocGet(ctx, FZ_STR("b.fuse"), 1, 1);

  FzLoc *n1 = fzNameLocGet(ctx, FZ_STR("conv1"), a);
  ck_assert_ptr_eq(n1, fzNameLocGet(ctx, FZ_STR("conv1"), a));
  ck_assert_ptr_ne(n1, fzNameLocGet(ctx, FZ_STR("conv1"), b));
  ck_assert_ptr_eq(fzLocGetChild(n1), a);
  FzLoc *n2 = fzNameLocGet(ctx, FZ_STR("x"), NULL);
  ck_assert_ptr_eq(fzLocGetChild(n2), unk);
  ck_assert_ptr_eq(n2, fzNameLocGet(ctx, FZ_STR("x"), unk));
  ck_assert_ptr_eq(fzLocFindFileLineCol(n1), a);
  ck_assert_ptr_null(fzLocFindFileLineCol(n2));

  /* Fused: flattened, unknowns and duplicates dropped, order kept. */
  FzLoc *ab[] = {a, b};
  FzLoc *f1 = fzFusedLocGet(ctx, 2, ab, NULL);
  ck_assert_int_eq(fzLocGetKind(f1), FZ_LOC_FUSED);
  ck_assert_uint_eq(fzLocGetNumFused(f1), 2);
  FzLoc *messy[] = {unk, a, f1, b, unk, a};
  ck_assert_ptr_eq(fzFusedLocGet(ctx, 6, messy, NULL), f1);
  FzLoc *ba[] = {b, a};
  ck_assert_ptr_ne(fzFusedLocGet(ctx, 2, ba, NULL), f1);
  FzLoc *justA[] = {unk, a, a};
  ck_assert_ptr_eq(fzFusedLocGet(ctx, 3, justA, NULL), a);
  FzLoc *nothing[] = {unk, unk};
  ck_assert_ptr_eq(fzFusedLocGet(ctx, 2, nothing, NULL), unk);
  ck_assert_ptr_eq(fzFusedLocGet(ctx, 0, NULL, NULL), unk);
  /* Metadata keeps a single location fused and distinguishes. */
  FzAttr *meta = fzStringAttrGet(ctx, FZ_STR("kernel0"));
  FzLoc *fm = fzFusedLocGet(ctx, 1, &a, meta);
  ck_assert_int_eq(fzLocGetKind(fm), FZ_LOC_FUSED);
  ck_assert_ptr_eq(fzLocGetFusedMetadata(fm), meta);
  ck_assert_ptr_ne(fzFusedLocGet(ctx, 2, ab, meta), f1);
  ck_assert_ptr_eq(fzLocFindFileLineCol(f1), a);
  FzLoc *nb[] = {n2, b};
  ck_assert_ptr_eq(fzLocFindFileLineCol(fzFusedLocGet(ctx, 2, nb, NULL)), b);
  /* Callsite: uniqued; NULL is unknown; the callee's source comes first,
   * then the caller's. */
  FzLoc *cs = fzCallSiteLocGet(ctx, a, b);
  ck_assert_int_eq(fzLocGetKind(cs), FZ_LOC_CALLSITE);
  ck_assert_ptr_eq(cs, fzCallSiteLocGet(ctx, a, b));
  ck_assert_ptr_ne(cs, fzCallSiteLocGet(ctx, b, a));
  ck_assert_ptr_eq(fzLocGetCallee(cs), a);
  ck_assert_ptr_eq(fzLocGetCaller(cs), b);
  ck_assert_ptr_eq(fzLocFindFileLineCol(cs), a);
  FzLoc *cu = fzCallSiteLocGet(ctx, NULL, b);
  ck_assert_ptr_eq(fzLocGetCallee(cu), unk);
  ck_assert_ptr_eq(fzLocFindFileLineCol(cu), b);
  ck_assert_ptr_null(fzLocFindFileLineCol(fzCallSiteLocGet(ctx, n2, NULL)));
  fzContextDestroy(ctx);
}
END_TEST

/* File:line:col locations are unique whatever order they are made in:
 * ascending (the parser's order, appended to the file's run), repeated,
 * and out of order (looked up in the run, else in the uniquing table). */
START_TEST(test_loc_uniquing_any_order) {
  FzContext *ctx = fzContextCreate();
  enum { N = 600 };
  static FzLoc *made[N];
  /* Every other key first, ascending, then the rest descending, then
   * everything again in a scrambled order. */
  for (unsigned i = 0; i < N; i += 2)
    made[i] = fzFileLineColLocGet(ctx, FZ_STR("f"), 1 + i / 10, 1 + i % 10);
  for (unsigned i = N - 1; i < N; i -= 2)
    made[i] = fzFileLineColLocGet(ctx, FZ_STR("f"), 1 + i / 10, 1 + i % 10);
  for (unsigned k = 0; k < N; ++k) {
    unsigned i = (k * 7919u) % N;
    FzLoc *l = fzFileLineColLocGet(ctx, FZ_STR("f"), 1 + i / 10, 1 + i % 10);
    ck_assert_ptr_eq(l, made[i]);
    ck_assert_uint_eq(fzLocGetLine(l), 1 + i / 10);
    ck_assert_uint_eq(fzLocGetColumn(l), 1 + i % 10);
  }
  for (unsigned i = 1; i < N; ++i)
    ck_assert_ptr_ne(made[i], made[i - 1]);
  /* Another file with the same lines and columns is distinct. */
  ck_assert_ptr_ne(fzFileLineColLocGet(ctx, FZ_STR("g"), 1, 1), made[0]);
  ck_assert_ptr_eq(fzFileLineColLocGet(ctx, FZ_STR("f"), 1, 1), made[0]);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Dictionaries ---------------------------------------------------===*/

START_TEST(test_dict_sorting) {
  FzContext *ctx = fzContextCreate();
  FzType *i64 = fzIntegerTypeGet(ctx, 64);
  FzNamedAttr e[] = {
      {fzIdentGet(ctx, FZ_STR("zeta")), fzIntegerAttrGet(ctx, i64, 1)},
      {fzIdentGet(ctx, FZ_STR("alpha")), fzIntegerAttrGet(ctx, i64, 2)},
      {fzIdentGet(ctx, FZ_STR("mid")), fzUnitAttrGet(ctx)},
      {fzIdentGet(ctx, FZ_STR("alph")), fzIntegerAttrGet(ctx, i64, 3)},
  };
  FzAttr *d = fzDictAttrGet(ctx, 4, e, NULL);
  ck_assert_ptr_nonnull(d);
  ck_assert_uint_eq(fzDictAttrGetSize(d), 4);
  const char *order[] = {"alph", "alpha", "mid", "zeta"};
  for (int i = 0; i < 4; ++i) {
    FzStringRef n = fzIdentGetString(fzDictAttrGetEntry(d, (size_t)i).name);
    ck_assert(fzStringRefEqual(n, fzStringRefFromCString(order[i])));
  }
  /* Any order of the same entries gives the same dictionary. */
  FzNamedAttr r[] = {e[2], e[0], e[3], e[1]};
  ck_assert_ptr_eq(fzDictAttrGet(ctx, 4, r, NULL), d);
  ck_assert_ptr_eq(fzDictAttrLookup(d, FZ_STR("alpha")), e[1].value);
  ck_assert_ptr_eq(fzDictAttrLookup(d, FZ_STR("alph")), e[3].value);
  ck_assert_ptr_eq(fzDictAttrLookup(d, FZ_STR("zeta")), e[0].value);
  ck_assert_ptr_null(fzDictAttrLookup(d, FZ_STR("al")));
  ck_assert_ptr_null(fzDictAttrLookup(d, FZ_STR("zz")));
  ck_assert_ptr_null(fzDictAttrLookup(d, FZ_STR("")));
  FzAttr *empty = fzDictAttrGet(ctx, 0, NULL, NULL);
  ck_assert_ptr_nonnull(empty);
  ck_assert_uint_eq(fzDictAttrGetSize(empty), 0);
  ck_assert_ptr_null(fzDictAttrLookup(empty, FZ_STR("a")));

  /* A big one (past any small inline buffer), given in reverse. */
  FzNamedAttr big[100];
  for (int i = 0; i < 100; ++i) {
    char name[16];
    snprintf(name, sizeof name, "k%03d", 99 - i);
    big[i].name = fzIdentGet(ctx, fzStringRefFromCString(name));
    big[i].value = fzIntegerAttrGet(ctx, i64, 99 - i);
  }
  FzAttr *bd = fzDictAttrGet(ctx, 100, big, NULL);
  ck_assert_ptr_nonnull(bd);
  for (int i = 0; i < 100; ++i) {
    char name[16];
    snprintf(name, sizeof name, "k%03d", i);
    FzNamedAttr en = fzDictAttrGetEntry(bd, (size_t)i);
    ck_assert(fzStringRefEqual(fzIdentGetString(en.name),
                               fzStringRefFromCString(name)));
    ck_assert_int_eq(fzIntegerAttrGetValue(
                         fzDictAttrLookup(bd, fzStringRefFromCString(name))),
                     i);
  }
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_dict_duplicates) {
  FzContext *ctx = fzContextCreate();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzType *i64 = fzIntegerTypeGet(ctx, 64);
  FzIdent *k = fzIdentGet(ctx, FZ_STR("key"));
  FzNamedAttr e[] = {
      {k, fzIntegerAttrGet(ctx, i64, 1)},
      {fzIdentGet(ctx, FZ_STR("other")), fzUnitAttrGet(ctx)},
      {k, fzIntegerAttrGet(ctx, i64, 2)},
  };
  FzLoc *loc = loc_at(ctx, 4, 9);
  ck_assert_ptr_null(fzDictAttrGet(ctx, 3, e, loc));
  ck_assert_diag_at(&log, "duplicate key 'key'", "test.fuse", 4, 9);
  ck_assert_uint_eq(fzContextGetNumErrors(ctx), 1);

  /* Duplicates far apart in a large dictionary are found too. */
  FzNamedAttr big[40];
  for (int i = 0; i < 40; ++i) {
    char name[16];
    snprintf(name, sizeof name, "n%d", i);
    big[i].name = fzIdentGet(ctx, fzStringRefFromCString(name));
    big[i].value = fzUnitAttrGet(ctx);
  }
  ck_assert_ptr_nonnull(fzDictAttrGet(ctx, 40, big, NULL));
  big[39].name = big[0].name;
  diag_log_clear(&log);
  ck_assert_ptr_null(fzDictAttrGet(ctx, 40, big, NULL));
  ck_assert_diag(&log, "duplicate key 'n0'");
  /* A NULL name or value is refused. */
  FzNamedAttr bad[] = {{k, NULL}};
  ck_assert_ptr_null(fzDictAttrGet(ctx, 1, bad, NULL));
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Dense elements -------------------------------------------------===*/

START_TEST(test_dense_splat) {
  FzContext *ctx = fzContextCreate();
  FzType *f32 = fzF32TypeGet(ctx);
  int64_t shape[] = {2, 3};
  FzType *t = fzTensorTypeGet(ctx, 2, shape, f32, NULL);
  float one = 1.0f;
  FzAttr *splat = fzDenseAttrGet(ctx, t, &one, sizeof one);
  ck_assert_ptr_nonnull(splat);
  ck_assert(fzDenseAttrIsSplat(splat));
  ck_assert_uint_eq(fzDenseAttrGetNumBytes(splat), 4);
  ck_assert_ptr_eq(fzAttrGetType(splat), t);
  ck_assert(fzDenseAttrGetFloat(splat, 5) == 1.0);
  ck_assert_int_eq(fzDenseAttrGetInt(splat, 3), 1);

  /* A full list of equal elements is stored as the same splat. */
  float ones[6] = {1, 1, 1, 1, 1, 1};
  ck_assert_ptr_eq(fzDenseAttrGet(ctx, t, ones, sizeof ones), splat);
  float vals[6] = {1, 1, 1, 1, 1, 2};
  FzAttr *full = fzDenseAttrGet(ctx, t, vals, sizeof vals);
  ck_assert_ptr_nonnull(full);
  ck_assert(!fzDenseAttrIsSplat(full));
  ck_assert_ptr_ne(full, splat);
  ck_assert_uint_eq(fzDenseAttrGetNumBytes(full), 24);
  ck_assert(fzDenseAttrGetFloat(full, 5) == 2.0);
  ck_assert(fzDenseAttrGetFloat(full, 0) == 1.0);
  ck_assert_ptr_eq(fzDenseAttrGet(ctx, t, vals, sizeof vals), full);
  /* The data is copied: changing the caller's array changes nothing. */
  vals[5] = 7;
  ck_assert(fzDenseAttrGetFloat(full, 5) == 2.0);

  /* Wrong byte counts, dynamic shapes and non-numeric elements fail. */
  ck_assert_ptr_null(fzDenseAttrGet(ctx, t, vals, 8));
  ck_assert_ptr_null(fzDenseAttrGet(ctx, t, vals, 28));
  int64_t dyn[] = {FZ_DYNAMIC};
  ck_assert_ptr_null(fzDenseAttrGet(ctx, fzTensorTypeGet(ctx, 1, dyn, f32,
                                                         NULL),
                                    &one, 4));
  ck_assert_ptr_null(fzDenseAttrGet(ctx, f32, &one, 4));

  /* Integer elements: i1 as bytes, i16 sign-extended, index as 8 bytes. */
  int64_t four[] = {4};
  FzType *ti1 = fzTensorTypeGet(ctx, 1, four, fzIntegerTypeGet(ctx, 1), NULL);
  uint8_t bits[4] = {1, 0, 1, 1};
  FzAttr *bi = fzDenseAttrGet(ctx, ti1, bits, 4);
  ck_assert_ptr_nonnull(bi);
  ck_assert_int_eq(fzDenseAttrGetInt(bi, 1), 0);
  ck_assert_int_eq(fzDenseAttrGetInt(bi, 3), 1);
  FzType *ti16 = fzTensorTypeGet(ctx, 1, four, fzIntegerTypeGet(ctx, 16),
                                 NULL);
  int16_t sh[4] = {-3, 0, 5, 0};
  FzAttr *si = fzDenseAttrGet(ctx, ti16, sh, sizeof sh);
  ck_assert_int_eq(fzDenseAttrGetInt(si, 0), -3);
  ck_assert(fzDenseAttrGetFloat(si, 2) == 5.0);
  FzType *tix = fzTensorTypeGet(ctx, 1, four, fzIndexTypeGet(ctx), NULL);
  int64_t ix = 42;
  FzAttr *six = fzDenseAttrGet(ctx, tix, &ix, 8);
  ck_assert(fzDenseAttrIsSplat(six));
  ck_assert_int_eq(fzDenseAttrGetInt(six, 3), 42);
  ck_assert_ptr_null(fzDenseAttrGet(ctx, tix, &ix, 4));

  /* bf16 elements hold IEEE bits. */
  FzType *tb = fzTensorTypeGet(ctx, 1, four, fzBF16TypeGet(ctx), NULL);
  uint16_t hb[4] = {0x3f80, 0x4000, 0xbf80, 0x0000};
  FzAttr *bf = fzDenseAttrGet(ctx, tb, hb, sizeof hb);
  ck_assert(fzDenseAttrGetFloat(bf, 1) == 2.0);
  ck_assert(fzDenseAttrGetFloat(bf, 2) == -1.0);

  /* A zero-element tensor has no splat: only zero bytes are accepted. */
  int64_t zero[] = {0, 3};
  FzType *tz = fzTensorTypeGet(ctx, 2, zero, f32, NULL);
  ck_assert_ptr_nonnull(tz);
  ck_assert_int_eq(fzShapedTypeGetNumElements(tz), 0);
  FzAttr *za = fzDenseAttrGet(ctx, tz, vals, 0);
  ck_assert_ptr_nonnull(za);
  ck_assert(!fzDenseAttrIsSplat(za));
  ck_assert_ptr_null(fzDenseAttrGet(ctx, tz, &one, 4));

  /* Vectors too; different types give different attributes. */
  FzType *vt = fzVectorTypeGet(ctx, 2, shape, f32, NULL);
  FzAttr *vs = fzDenseAttrGet(ctx, vt, &one, 4);
  ck_assert_ptr_nonnull(vs);
  ck_assert_ptr_ne(vs, splat);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Half and bfloat ------------------------------------------------===*/

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

START_TEST(test_f16_conversions) {
  /* Exact values. */
  ck_assert_uint_eq(fzFloatToHalfBits(0.0f), 0x0000);
  ck_assert_uint_eq(fzFloatToHalfBits(-0.0f), 0x8000);
  ck_assert_uint_eq(fzFloatToHalfBits(1.0f), 0x3c00);
  ck_assert_uint_eq(fzFloatToHalfBits(-2.0f), 0xc000);
  ck_assert_uint_eq(fzFloatToHalfBits(0.5f), 0x3800);
  ck_assert_uint_eq(fzFloatToHalfBits(65504.0f), 0x7bff);
  ck_assert_uint_eq(fzFloatToHalfBits(6.103515625e-05f), 0x0400); /* min */
  ck_assert_uint_eq(fzFloatToHalfBits(5.9604644775390625e-08f), 0x0001);
  /* Round to nearest, ties to even: 1 + 2^-11 lies halfway between 1
   * (even mantissa) and 1 + 2^-10 (odd). */
  ck_assert_uint_eq(fzFloatToHalfBits(1.0f + 0x1p-11f), 0x3c00);
  ck_assert_uint_eq(fzFloatToHalfBits(1.0f + 3 * 0x1p-11f), 0x3c02);
  ck_assert_uint_eq(fzFloatToHalfBits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  ck_assert_uint_eq(fzFloatToHalfBits(1.0f + 0x1p-11f - 0x1p-20f), 0x3c00);
  /* Ties in the subnormal range: 2^-25 is halfway between 0 and the
   * smallest subnormal (0 is even); 3 * 2^-25 between 1 and 2 ulps. */
  ck_assert_uint_eq(fzFloatToHalfBits(0x1p-25f), 0x0000);
  ck_assert_uint_eq(fzFloatToHalfBits(3 * 0x1p-25f), 0x0002);
  ck_assert_uint_eq(fzFloatToHalfBits(0x1p-25f + 0x1p-30f), 0x0001);
  ck_assert_uint_eq(fzFloatToHalfBits(-0x1p-26f), 0x8000);
  /* Rounding up out of the subnormals into the normals. */
  ck_assert_uint_eq(fzFloatToHalfBits(6.103515625e-05f - 0x1p-26f), 0x0400);
  /* Overflow: 65519.99 rounds to 65504, 65520 (the tie) to infinity. */
  ck_assert_uint_eq(fzFloatToHalfBits(65519.0f), 0x7bff);
  ck_assert_uint_eq(fzFloatToHalfBits(65520.0f), 0x7c00);
  ck_assert_uint_eq(fzFloatToHalfBits(1e10f), 0x7c00);
  ck_assert_uint_eq(fzFloatToHalfBits(-1e10f), 0xfc00);
  ck_assert_uint_eq(fzFloatToHalfBits(INFINITY), 0x7c00);
  ck_assert_uint_eq(fzFloatToHalfBits(-INFINITY), 0xfc00);
  /* NaN stays NaN (exponent all ones, mantissa non-zero), sign kept. */
  uint16_t hn = fzFloatToHalfBits(NAN);
  ck_assert_uint_eq(hn & 0x7c00, 0x7c00);
  ck_assert_uint_ne(hn & 0x03ff, 0);
  uint16_t hnn = fzFloatToHalfBits(-NAN);
  ck_assert_uint_eq(hnn & 0x8000, 0x8000);
  ck_assert_uint_ne(hnn & 0x03ff, 0);
  /* A NaN whose payload lives only in the low float bits stays NaN. */
  uint16_t hlow = fzFloatToHalfBits(bits_to_float(0x7f800001u));
  ck_assert_uint_eq(hlow & 0x7c00, 0x7c00);
  ck_assert_uint_ne(hlow & 0x03ff, 0);

  /* Back to float. */
  ck_assert(fzHalfBitsToFloat(0x3c00) == 1.0f);
  ck_assert(fzHalfBitsToFloat(0x7bff) == 65504.0f);
  ck_assert(fzHalfBitsToFloat(0x0001) == 0x1p-24f);
  ck_assert(fzHalfBitsToFloat(0x03ff) == 1023 * 0x1p-24f);
  ck_assert(fzHalfBitsToFloat(0x8000) == 0.0f);
  ck_assert(signbit(fzHalfBitsToFloat(0x8000)));
  ck_assert(isinf(fzHalfBitsToFloat(0x7c00)));
  ck_assert(fzHalfBitsToFloat(0xfc00) < 0);
  ck_assert(isnan(fzHalfBitsToFloat(0x7e00)));
  ck_assert(isnan(fzHalfBitsToFloat(0xfc01)));
  /* Every non-NaN half survives the round trip. */
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
      continue;
    ck_assert_uint_eq(fzFloatToHalfBits(fzHalfBitsToFloat((uint16_t)h)), h);
  }
}
END_TEST

START_TEST(test_bf16_conversions) {
  ck_assert_uint_eq(fzFloatToBF16Bits(1.0f), 0x3f80);
  ck_assert_uint_eq(fzFloatToBF16Bits(-2.0f), 0xc000);
  ck_assert_uint_eq(fzFloatToBF16Bits(0.0f), 0x0000);
  ck_assert_uint_eq(fzFloatToBF16Bits(-0.0f), 0x8000);
  /* Ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7. */
  ck_assert_uint_eq(fzFloatToBF16Bits(1.0f + 0x1p-8f), 0x3f80);
  ck_assert_uint_eq(fzFloatToBF16Bits(1.0f + 3 * 0x1p-8f), 0x3f82);
  ck_assert_uint_eq(fzFloatToBF16Bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  ck_assert_uint_eq(fzFloatToBF16Bits(bits_to_float(0x3f807fffu)), 0x3f80);
  ck_assert_uint_eq(fzFloatToBF16Bits(bits_to_float(0x3f808000u)), 0x3f80);
  ck_assert_uint_eq(fzFloatToBF16Bits(bits_to_float(0x3f818000u)), 0x3f82);
  /* The largest float rounds up to infinity; infinities stay. */
  ck_assert_uint_eq(fzFloatToBF16Bits(bits_to_float(0x7f7fffffu)), 0x7f80);
  ck_assert_uint_eq(fzFloatToBF16Bits(bits_to_float(0x7f7f7fffu)), 0x7f7f);
  ck_assert_uint_eq(fzFloatToBF16Bits(INFINITY), 0x7f80);
  ck_assert_uint_eq(fzFloatToBF16Bits(-INFINITY), 0xff80);
  /* Subnormals round like the rest. */
  ck_assert_uint_eq(fzFloatToBF16Bits(bits_to_float(0x00018000u)), 0x0002);
  /* NaNs stay NaN, even with a payload only in the low 16 bits (plain
   * truncation would make them infinities), and keep their sign. */
  uint16_t n1 = fzFloatToBF16Bits(bits_to_float(0x7f800001u));
  ck_assert_uint_eq(n1 & 0x7f80, 0x7f80);
  ck_assert_uint_ne(n1 & 0x007f, 0);
  uint16_t n2 = fzFloatToBF16Bits(bits_to_float(0xffffffffu));
  ck_assert_uint_eq(n2 & 0x8000, 0x8000);
  ck_assert_uint_ne(n2 & 0x007f, 0);
  ck_assert(isnan(fzBF16BitsToFloat(fzFloatToBF16Bits(NAN))));

  ck_assert(fzBF16BitsToFloat(0x3f80) == 1.0f);
  ck_assert(fzBF16BitsToFloat(0xc000) == -2.0f);
  ck_assert(isinf(fzBF16BitsToFloat(0x7f80)));
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    if ((h & 0x7f80) == 0x7f80 && (h & 0x7f))
      continue;
    ck_assert_uint_eq(fzFloatToBF16Bits(fzBF16BitsToFloat((uint16_t)h)), h);
  }
}
END_TEST

START_TEST(test_round_to_float_type) {
  FzContext *ctx = fzContextCreate();
  ck_assert(fzRoundToFloatType(fzF64TypeGet(ctx), 0.1) == 0.1);
  ck_assert(fzRoundToFloatType(fzF32TypeGet(ctx), 0.1) == (double)0.1f);
  ck_assert(fzRoundToFloatType(fzF16TypeGet(ctx), 1.0 + 1.0 / 2048) == 1.0);
  ck_assert(fzRoundToFloatType(fzBF16TypeGet(ctx), 1.0 + 3.0 / 256) ==
            1.0 + 2.0 / 128);
  ck_assert(isinf(fzRoundToFloatType(fzF16TypeGet(ctx), 1e6)));
  fzContextDestroy(ctx);
}
END_TEST

static uint64_t bits_of(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

static double from_bits(uint64_t u) {
  double v;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* NaNs narrow by their bits: a signaling NaN stays signaling (a hardware
 * conversion would quiet it), sign and top payload kept; a payload only
 * in the dropped bits becomes the quiet NaN rather than an infinity. */
START_TEST(test_round_nan_keeps_bits) {
  FzContext *ctx = fzContextCreate();
  FzType *f32 = fzF32TypeGet(ctx), *f16 = fzF16TypeGet(ctx);
  double snan32 = from_bits(UINT64_C(0x7FF0000020000000)); /* f32 0x7F800001 */
  ck_assert_uint_eq(bits_of(fzRoundToFloatType(f32, snan32)),
                    UINT64_C(0x7FF0000020000000));
  FzAttr *a = fzFloatAttrGet(ctx, f32, snan32);
  ck_assert_uint_eq(bits_of(fzFloatAttrGetValue(a)),
                    UINT64_C(0x7FF0000020000000));
  double neg = from_bits(UINT64_C(0xFFF4000000000001));
  ck_assert_uint_eq(bits_of(fzRoundToFloatType(f16, neg)),
                    UINT64_C(0xFFF4000000000000));
  double low = from_bits(UINT64_C(0x7FF0000000000001)); /* payload dropped */
  ck_assert(isnan(fzRoundToFloatType(f32, low)));
  ck_assert(isnan(fzRoundToFloatType(f16, low)));
  ck_assert_uint_eq(bits_of(fzRoundToFloatType(fzF64TypeGet(ctx), low)),
                    UINT64_C(0x7FF0000000000001));
  fzContextDestroy(ctx);
}
END_TEST

/* Locations as attribute values are uniqued like any attribute. */
START_TEST(test_loc_attr) {
  FzContext *ctx = fzContextCreate();
  FzLoc *l = fzFileLineColLocGet(ctx, FZ_STR("a.py"), 3, 5);
  FzAttr *a = fzLocAttrGet(ctx, l);
  ck_assert_ptr_nonnull(a);
  ck_assert_int_eq(fzAttrGetKind(a), FZ_ATTR_LOC);
  ck_assert_ptr_eq(a, fzLocAttrGet(ctx, l));
  ck_assert_ptr_eq(fzLocAttrGetValue(a), l);
  ck_assert_ptr_ne(a, fzLocAttrGet(ctx, fzUnknownLocGet(ctx)));
  ck_assert_ptr_null(fzLocAttrGet(ctx, NULL));
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Shape limits ---------------------------------------------------===*/

START_TEST(test_absurd_dims) {
  FzContext *ctx = fzContextCreate();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzType *f32 = fzF32TypeGet(ctx);
  FzLoc *loc = loc_at(ctx, 2, 3);

  int64_t neg[] = {4, -5};
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 2, neg, f32, loc));
  ck_assert_diag_at(&log, "negative", "test.fuse", 2, 3);

  diag_log_clear(&log);
  int64_t huge[] = {FZ_MAX_DIM + 1};
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 1, huge, f32, loc));
  ck_assert_diag(&log, "too large");
  int64_t max[] = {FZ_MAX_DIM};
  ck_assert_ptr_nonnull(fzTensorTypeGet(ctx, 1, max, f32, loc));
  int64_t int64max[] = {INT64_MAX};
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 1, int64max, f32, loc));

  /* Each dim fine, the product over FZ_MAX_ELEMENTS (or over 2^64). */
  diag_log_clear(&log);
  int64_t prod[] = {1 << 20, 1 << 20, 1 << 20};
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 3, prod, f32, loc));
  ck_assert_diag(&log, "too many elements");
  int64_t wrap[] = {FZ_MAX_DIM, FZ_MAX_DIM, FZ_MAX_DIM, FZ_MAX_DIM};
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 4, wrap, f32, loc));
  int64_t atLimit[] = {(int64_t)1 << 24, (int64_t)1 << 24};
  ck_assert_ptr_nonnull(fzTensorTypeGet(ctx, 2, atLimit, f32, loc));
  int64_t overLimit[] = {((int64_t)1 << 24) + 1, (int64_t)1 << 24};
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 2, overLimit, f32, loc));
  /* A zero dimension makes any other size fine; dynamic dims are not
   * counted. */
  int64_t zeroed[] = {0, FZ_MAX_DIM, FZ_MAX_DIM};
  ck_assert_ptr_nonnull(fzTensorTypeGet(ctx, 3, zeroed, f32, loc));
  int64_t dyn[] = {FZ_DYNAMIC, FZ_MAX_DIM, FZ_DYNAMIC};
  ck_assert_ptr_nonnull(fzTensorTypeGet(ctx, 3, dyn, f32, loc));

  /* Rank limit, element types, vector and buffer rules. */
  int64_t many[65];
  for (int i = 0; i < 65; ++i)
    many[i] = 1;
  diag_log_clear(&log);
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 65, many, f32, loc));
  ck_assert_diag(&log, "rank");
  ck_assert_ptr_nonnull(fzTensorTypeGet(ctx, 64, many, f32, loc));
  FzType *fn = fzFunctionTypeGet(ctx, 0, NULL, 0, NULL);
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 1, many, fn, loc));
  ck_assert_ptr_null(fzTensorTypeGet(ctx, 1, many, NULL, loc));
  int64_t vdyn[] = {FZ_DYNAMIC};
  ck_assert_ptr_null(fzVectorTypeGet(ctx, 1, vdyn, f32, loc));
  ck_assert_ptr_null(fzVectorTypeGet(ctx, 0, NULL, f32, loc));
  ck_assert_ptr_null(fzVectorTypeGet(ctx, FZ_UNRANKED, NULL, f32, loc));
  ck_assert_ptr_null(fzBufferTypeGet(ctx, 1, neg + 1, f32, NULL, 0, loc));
  int64_t negStride[] = {-1};
  ck_assert_ptr_null(fzBufferTypeGet(ctx, 1, many, f32, negStride, 0, loc));
  ck_assert_ptr_null(fzBufferTypeGet(ctx, 1, huge, f32, NULL, 0, loc));
  ck_assert_uint_ge(fzContextGetNumErrors(ctx), 15);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Diagnostics ----------------------------------------------------===*/

typedef struct Seen {
  char order[32];
  size_t n;
} Seen;

typedef struct TagHandler {
  Seen *seen;
  char tag;
  bool claim;
} TagHandler;

static bool tag_handler(const FzDiagnostic *d, void *ud) {
  (void)d;
  TagHandler *h = ud;
  if (h->seen->n + 1 < sizeof h->seen->order)
    h->seen->order[h->seen->n++] = h->tag;
  return h->claim;
}

START_TEST(test_diag_handler_stack) {
  FzContext *ctx = fzContextCreate();
  Seen seen = {{0}, 0};
  TagHandler a = {&seen, 'A', true}, b = {&seen, 'B', false},
             c = {&seen, 'C', false};
  FzDiagHandlerId ia = fzContextPushDiagHandler(ctx, tag_handler, &a);
  FzDiagHandlerId ib = fzContextPushDiagHandler(ctx, tag_handler, &b);
  FzDiagHandlerId ic = fzContextPushDiagHandler(ctx, tag_handler, &c);
  ck_assert(ia && ib && ic && ia != ib && ib != ic);

  /* Top of the stack first; unclaimed diagnostics go further down. */
  fzEmitRemark(ctx, NULL, "one");
  ck_assert_str_eq(seen.order, "CBA");
  /* A claiming handler stops the search. */
  memset(&seen, 0, sizeof seen);
  c.claim = true;
  fzEmitWarning(ctx, NULL, "two");
  ck_assert_str_eq(seen.order, "C");
  /* Removing from the middle keeps the others in order. */
  memset(&seen, 0, sizeof seen);
  c.claim = false;
  fzContextPopDiagHandler(ctx, ib);
  fzEmitError(ctx, NULL, "three");
  ck_assert_str_eq(seen.order, "CA");
  fzContextPopDiagHandler(ctx, ib); /* unknown id: ignored */
  memset(&seen, 0, sizeof seen);
  fzContextPopDiagHandler(ctx, ic);
  ck_assert(!fzEmitError(ctx, NULL, "four"));
  ck_assert_str_eq(seen.order, "A");
  /* A new handler gets a fresh id and goes on top. */
  memset(&seen, 0, sizeof seen);
  FzDiagHandlerId ib2 = fzContextPushDiagHandler(ctx, tag_handler, &b);
  ck_assert(ib2 != ia && ib2 != ib && ib2 != ic);
  fzEmitRemark(ctx, NULL, "five");
  ck_assert_str_eq(seen.order, "BA");
  ck_assert_uint_eq(fzContextGetNumErrors(ctx), 2); /* errors only */
  fzContextPopDiagHandler(ctx, ib2);
  fzContextPopDiagHandler(ctx, ia);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_diag_contents_and_rendering) {
  FzContext *ctx = new_context();
  const char src[] = "first line\n  %x = \"test.op\"() : () -> i32\n";
  ck_assert_ptr_nonnull(fzContextAddSourceBuffer(
      ctx, FZ_STR("test.fuse"), (FzStringRef){src, sizeof src - 1}));
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzLoc *loc = loc_at(ctx, 2, 3);
  FzDiagnostic *d = fzDiagBegin(ctx, FZ_SEVERITY_ERROR, loc, "bad %s #%d",
                                "thing", 7);
  fzDiagAttachNote(d, loc_at(ctx, 1, 1), "see %s", "here");
  ck_assert_int_eq(fzDiagnosticGetSeverity(d), FZ_SEVERITY_ERROR);
  ck_assert_ptr_eq(fzDiagnosticGetLoc(d), loc);
  ck_assert_uint_eq(fzDiagnosticGetNumNotes(d), 1);
  ck_assert_ptr_null(fzDiagnosticGetNote(d, 1));
  TextBuf out = {0};
  fzDiagnosticPrint(d, true, text_cb, &out);
  ck_assert_str_eq(out.data, "test.fuse:2:3: error: bad thing #7\n"
                             "  %x = \"test.op\"() : () -> i32\n"
                             "  ^\n"
                             "test.fuse:1:1: note: see here\n"
                             "first line\n"
                             "^\n");
  text_free(&out);
  fzDiagnosticPrint(d, false, text_cb, &out);
  ck_assert_str_eq(out.data, "test.fuse:2:3: error: bad thing #7\n"
                             "test.fuse:1:1: note: see here\n");
  text_free(&out);
  fzDiagReport(d);
  ck_assert_uint_eq(log.count, 1);
  ck_assert_str_eq(log.rec[0].message, "bad thing #7");
  ck_assert_str_eq(log.rec[0].note, "see here");
  ck_assert_uint_eq(log.rec[0].line, 2);
  ck_assert_uint_eq(fzContextGetNumErrors(ctx), 1);

  /* Op errors are prefixed with the op name, at the op's location. */
  FzOp *op = make_op(ctx, "test.op", loc_at(ctx, 2, 8), 0, NULL, 0, NULL, 0);
  ck_assert(!fzOpEmitError(op, "went %s", "wrong"));
  ck_assert_diag_at(&log, "'test.op' op went wrong", "test.fuse", 2, 8);
  FzDiagnostic *w = fzOpDiagBegin(op, FZ_SEVERITY_WARNING, "careful");
  fzDiagReport(w);
  ck_assert_int_eq(log.rec[2].severity, FZ_SEVERITY_WARNING);
  ck_assert_str_eq(log.rec[2].message, "'test.op' op careful");
  ck_assert_uint_eq(fzContextGetNumErrors(ctx), 2);
  fzOpDestroy(op);

  /* Name locations print their name; unknown ones print no prefix. */
  FzDiagnostic *n = fzDiagBegin(ctx, FZ_SEVERITY_REMARK,
                                fzNameLocGet(ctx, FZ_STR("conv1"), NULL),
                                "fused");
  fzDiagnosticPrint(n, true, text_cb, &out);
  ck_assert_str_eq(out.data, "conv1: remark: fused\n");
  text_free(&out);
  fzDiagReport(n);
  FzDiagnostic *u = fzDiagBegin(ctx, FZ_SEVERITY_WARNING, NULL, "nowhere");
  fzDiagnosticPrint(u, true, text_cb, &out);
  ck_assert_str_eq(out.data, "warning: nowhere\n");
  text_free(&out);
  fzDiagReport(u);

  /* A caret past a line's end, a line past the buffer: no crash. */
  FzDiagnostic *far = fzDiagBegin(ctx, FZ_SEVERITY_ERROR, loc_at(ctx, 1, 400),
                                  "far");
  fzDiagnosticPrint(far, true, text_cb, &out);
  ck_assert_ptr_nonnull(strstr(out.data, "test.fuse:1:400: error: far\n"));
  text_free(&out);
  fzDiagReport(far);
  FzDiagnostic *past = fzDiagBegin(ctx, FZ_SEVERITY_ERROR,
                                   loc_at(ctx, 99, 1), "past");
  fzDiagnosticPrint(past, true, text_cb, &out);
  ck_assert_str_eq(out.data, "test.fuse:99:1: error: past\n");
  text_free(&out);
  fzDiagReport(past);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_diag_source_line_sanitized) {
  FzContext *ctx = fzContextCreate();
  const char src[] = "a\x01\x7f\tb\r\nnext";
  ck_assert_ptr_nonnull(fzContextAddSourceBuffer(
      ctx, FZ_STR("bin.fuse"), (FzStringRef){src, sizeof src - 1}));
  FzDiagnostic *d = fzDiagBegin(
      ctx, FZ_SEVERITY_ERROR,
      fzFileLineColLocGet(ctx, FZ_STR("bin.fuse"), 1, 5), "garbage");
  TextBuf out = {0};
  fzDiagnosticPrint(d, true, text_cb, &out);
  /* Control bytes are shown as '?', the tab is kept for the caret. */
  ck_assert_str_eq(out.data, "bin.fuse:1:5: error: garbage\n"
                             "a??\tb\n"
                             "   \t^\n");
  text_free(&out);
  DiagLog log;
  diag_log_begin(&log, ctx);
  fzDiagReport(d);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Allocation failures --------------------------------------------===*/

static FzWalkResult count_walk(FzOp *op, void *ud) {
  (void)op;
  ++*(size_t *)ud;
  return FZ_WALK_ADVANCE;
}

/* Builds a module with a function and a few ops, verifies, clones, walks
 * and destroys it: the workload the allocation-failure test repeats.
 * Bails out (cleanly) at the first step that fails. */
static void oom_workload(FzContext *ctx) {
  if (!fzRegisterAllDialects(ctx))
    return;
  fzContextSetAllowUnregisteredDialects(ctx, true);
  FzType *f32 = fzF32TypeGet(ctx);
  int64_t shape[] = {4, FZ_DYNAMIC};
  FzType *t = fzTensorTypeGet(ctx, 2, shape, f32, NULL);
  FzLoc *loc = fzFileLineColLocGet(ctx, FZ_STR("oom.fuse"), 1, 1);
  if (!t || !loc)
    return;
  FzOp *module = make_module(ctx);
  if (!module)
    return;
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  FzType *ins[] = {t, f32};
  FzBlock *entry = NULL;
  FzOp *fn = add_func(body, "main", 2, ins, 1, &t, &entry);
  if (!fn)
    goto done;
  FzValue *args[] = {fzBlockGetArgument(entry, 0),
                     fzBlockGetArgument(entry, 1)};
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("test.scale"), loc);
  fzOpStateAddOperands(&st, 2, args);
  fzOpStateAddResults(&st, 1, &t);
  fzOpStateAddAttr(&st, FZ_STR("alpha"), fzFloatAttrGet(ctx, f32, 0.5));
  fzOpStateAddAttr(&st, FZ_STR("name"), fzStringAttrGet(ctx, FZ_STR("s")));
  fzOpStateAddProp(&st, FZ_STR("axis"),
                   fzIntegerAttrGet(ctx, fzIntegerTypeGet(ctx, 64), 1));
  FzOp *scale = fzOpCreate(&st);
  if (!scale)
    goto done;
  fzBlockAppendOp(entry, scale);
  FzValue *r = fzOpGetResult(scale, 0);
  FzType *two[] = {t, f32};
  FzOp *pair = add_op(entry, "test.pair", loc, 1, &r, 2, two, 1);
  if (!pair)
    goto done;
  FzBlock *inner = add_block(pair, 0, 1, &f32);
  if (!inner)
    goto done;
  FzValue *innerUses[] = {fzBlockGetArgument(inner, 0), args[1]};
  if (!add_op(inner, "test.inner", loc, 2, innerUses, 0, NULL, 0))
    goto done;
  FzValue *res = fzOpGetResult(pair, 0);
  if (!add_op(entry, "func.return", loc, 1, &res, 0, NULL, 0))
    goto done;
  FzValue *more[] = {r, r, r, r, r, r, r, r, r, r};
  bool okSet = fzOpSetAttr(scale, FZ_STR("extra"), fzUnitAttrGet(ctx));
  okSet = fzOpSetOperands(pair, 10, more) && okSet;
  okSet = fzOpSetOperands(pair, 1, &r) && okSet;
  if (!okSet)
    goto done;
  bool verified = fzOpVerify(module);
  (void)verified;
  FzIRMapping *m = fzIRMappingCreate(ctx);
  if (m) {
    FzOp *copy = fzOpClone(fn, m);
    if (copy)
      fzOpDestroy(copy);
    fzIRMappingDestroy(m);
  }
  FzOp *copy2 = fzOpClone(module, NULL);
  if (copy2)
    fzOpDestroy(copy2);
  size_t n = 0;
  (void)fzOpWalk(module, FZ_WALK_POST_ORDER, count_walk, &n);
  FzSymbolTable *symtab = fzSymbolTableCreate(module);
  if (symtab) {
    (void)fzSymbolTableLookup(symtab, FZ_STR("main"));
    fzSymbolTableDestroy(symtab);
  }
done:
  fzOpDestroy(module);
}

/* Runs the workload with allocation attempt `failAt` refused (and with
 * failOnward, every later one too); checks the contract. */
static void oom_run(size_t failAt, bool failOnward, size_t *attempts) {
  CountingAlloc c = {0};
  c.failAt = failAt;
  c.failOnward = failOnward;
  FzAllocator a = counting_allocator(&c);
  FzContext *ctx = fzContextCreateWithAllocator(&a);
  if (!ctx) {
    ck_assert_msg(c.numFailures > 0, "context creation failed for no reason");
  } else {
    size_t failuresBefore = c.numFailures;
    DiagLog log;
    diag_log_begin(&log, ctx);
    bool handlerUp = log.id != 0;
    oom_workload(ctx);
    if (failAt == 0) {
      if (log.numErrors)
        diag_log_dump(&log);
      ck_assert_uint_eq(log.numErrors, 0); /* the clean run is clean */
    }
    if (c.numFailures > 0)
      ck_assert_msg(fzContextHadAllocationFailure(ctx),
                    "allocation %zu failed silently", failAt);
    else
      ck_assert(!fzContextHadAllocationFailure(ctx));
    if (handlerUp && c.numFailures > failuresBefore)
      ck_assert_msg(diag_log_find(&log, "out of memory") != NULL,
                    "allocation %zu failed without an error", failAt);
    diag_log_end(&log);
    fzContextDestroy(ctx);
  }
  if (attempts)
    *attempts = c.numAllocs;
  ck_assert_msg(c.liveBlocks == 0 && c.liveBytes == 0,
                "failing allocation %zu%s: %zu blocks (%lld bytes) leaked",
                failAt, failOnward ? " onward" : "", c.liveBlocks,
                c.liveBytes);
  ck_assert_uint_eq(c.badFrees, 0);
}

START_TEST(test_allocation_failures) {
  /* Diagnostics that reach no handler go to stderr: silence them. */
  fflush(stderr);
  int saved = dup(2);
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0)
    dup2(devnull, 2);
  size_t total = 0;
  oom_run(0, false, &total); /* the clean run: how many attempts */
  ck_assert_uint_gt(total, 10);
  size_t last = total > 200 ? total : 200;
  for (size_t n = 1; n <= last; ++n) {
    oom_run(n, false, NULL);
    oom_run(n, true, NULL);
  }
  fflush(stderr);
  if (saved >= 0) {
    dup2(saved, 2);
    close(saved);
  }
  if (devnull >= 0)
    close(devnull);
}
END_TEST

/* fzOpClone when the value map cannot grow (a failed insertion used to
 * leave later clones pointing at the original's values, silently): for
 * every k, the clone of a function of 100 chained ops (one with a region
 * whose block argument is used inside) fails cleanly or prints exactly
 * like the clean clone, verifies, and leaks nothing. */
static FzOp *clone_source(FzContext *ctx) {
  TextBuf src = {0};
  const char *head = "func.func @f(%a: f32) -> f32 {\n"
                     "  %r = \"test.region\"(%a) ({\n"
                     "  ^bb0(%x: f32):\n"
                     "    \"test.use\"(%x, %a) : (f32, f32) -> ()\n"
                     "  }) : (f32) -> f32\n"
                     "  %v0 = \"test.add\"(%r, %a) : (f32, f32) -> f32\n";
  text_cb(fzStringRefFromCString(head), &src);
  for (int i = 1; i < 100; ++i) {
    char line[96];
    int n = snprintf(line, sizeof line,
                     "  %%v%d = \"test.add\"(%%v%d, %%r) : (f32, f32) -> "
                     "f32\n",
                     i, i - 1);
    text_cb((FzStringRef){line, (size_t)n}, &src);
  }
  text_cb(fzStringRefFromCString("  return %v99 : f32\n}\n"), &src);
  FzOp *m = fzParseSource(ctx, (FzStringRef){src.data, src.len},
                          FZ_STR("clone.fuse"), 0);
  text_free(&src);
  return m;
}

START_TEST(test_clone_allocation_failures) {
  TextBuf clean = {0};
  for (size_t k = 0;; ++k) {
    CountingAlloc c = {0};
    FzAllocator a = counting_allocator(&c);
    FzContext *ctx = fzContextCreateWithAllocator(&a);
    ck_assert(ctx && fzRegisterAllDialects(ctx));
    fzContextSetAllowUnregisteredDialects(ctx, true);
    DiagLog log; /* claims the "out of memory" errors */
    diag_log_begin(&log, ctx);
    FzOp *m = clone_source(ctx);
    ck_assert_ptr_nonnull(m);
    FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("f"));
    ck_assert_ptr_nonnull(f);
    c.failAt = k ? c.numAllocs + k : 0;
    size_t before = c.numAllocs;
    FzOp *copy = fzOpClone(f, NULL);
    size_t used = c.numAllocs - before;
    c.failAt = 0;
    if (copy) {
      TextBuf got = {0};
      fzOpPrint(copy, 0, text_cb, &got);
      ck_assert(fzOpVerify(copy));
      if (k == 0)
        clean = got;
      else {
        ck_assert_msg(got.len == clean.len &&
                          memcmp(got.data, clean.data, got.len) == 0,
                      "the clone after a failure at allocation %zu differs", k);
        text_free(&got);
      }
      fzOpDestroy(copy);
    } else {
      ck_assert_msg(k > 0 && fzContextHadAllocationFailure(ctx),
                    "the clone failed without an allocation failure");
    }
    fzOpDestroy(m);
    diag_log_end(&log);
    fzContextDestroy(ctx);
    ck_assert_uint_eq(c.liveBlocks, 0);
    if (k > 0 && k > used)
      break;
  }
  text_free(&clean);
}
END_TEST

/*===--- Suite ----------------------------------------------------------===*/

static Suite *context_suite(void) {
  Suite *s = suite_create("context");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_create_destroy);
  tcase_add_test(tc, test_custom_allocator_sees_everything);
  tcase_add_test(tc, test_registry);
  tcase_add_test(tc, test_ident_interning);
  tcase_add_test(tc, test_type_uniquing);
  tcase_add_test(tc, test_attr_uniquing);
  tcase_add_test(tc, test_loc_uniquing);
  tcase_add_test(tc, test_loc_attr);
  tcase_add_test(tc, test_round_nan_keeps_bits);
  tcase_add_test(tc, test_loc_uniquing_any_order);
  tcase_add_test(tc, test_dict_sorting);
  tcase_add_test(tc, test_dict_duplicates);
  tcase_add_test(tc, test_dense_splat);
  tcase_add_test(tc, test_f16_conversions);
  tcase_add_test(tc, test_bf16_conversions);
  tcase_add_test(tc, test_round_to_float_type);
  tcase_add_test(tc, test_absurd_dims);
  tcase_add_test(tc, test_diag_handler_stack);
  tcase_add_test(tc, test_diag_contents_and_rendering);
  tcase_add_test(tc, test_diag_source_line_sanitized);
  suite_add_tcase(s, tc);
  TCase *oom = tcase_create("allocation-failures");
  tcase_set_timeout(oom, 120);
  tcase_add_test(oom, test_allocation_failures);
  tcase_add_test(oom, test_clone_allocation_failures);
  suite_add_tcase(s, oom);
  return s;
}

int main(void) { return run_suite(context_suite()); }

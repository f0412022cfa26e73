/* tests/unit/test_graph.c - Check suite of the graph dialect: result-type
 * inference with numpy broadcasting and dynamic dims, verifier messages,
 * f16/bf16 rounding (exhaustively over every 16-bit pattern), tensor
 * element conversions, the interpreter API and its input checks, and
 * folding.
 */
#include <math.h>

#include "fz/graph.h"
#include "fz/pass.h"
#include "tests/unit/test_helpers.h"

static FzContext *graph_context(void) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  return ctx;
}

/* Infers the result type of `op` on operand types written as text, with
 * attributes `attrs` (a dictionary in text, or NULL). Returns the result
 * type as a malloc'ed string, or NULL when inference reported an error
 * (then `log` holds it). */
static char *infer(FzContext *ctx, const char *op, size_t n,
                   const char *const *types, const char *attrs) {
  const FzOpDef *def = fzContextLookupOpDef(ctx, fzStringRefFromCString(op));
  ck_assert_ptr_nonnull(def);
  ck_assert(def->inferResultTypes != NULL);
  FzType *in[8];
  for (size_t i = 0; i < n; ++i) {
    in[i] = fzTypeParse(ctx, fzStringRefFromCString(types[i]));
    ck_assert_ptr_nonnull(in[i]);
  }
  FzAttr *dict = attrs ? fzAttrParse(ctx, fzStringRefFromCString(attrs)) : NULL;
  if (attrs)
    ck_assert_ptr_nonnull(dict);
  FzType *out[4] = {NULL, NULL, NULL, NULL};
  if (!def->inferResultTypes(ctx, NULL, n, in, dict, NULL, out))
    return NULL;
  return type_str(out[0]);
}

static void check_infer(FzContext *ctx, const char *op, size_t n,
                        const char *const *types, const char *attrs,
                        const char *want) {
  DiagLog log;
  diag_log_begin(&log, ctx);
  char *got = infer(ctx, op, n, types, attrs);
  if (!got)
    diag_log_dump(&log);
  ck_assert_msg(got != NULL, "%s: inference failed", op);
  ck_assert_str_eq(got, want);
  free(got);
  diag_log_end(&log);
}

static void check_infer_error(FzContext *ctx, const char *op, size_t n,
                              const char *const *types, const char *attrs,
                              const char *message) {
  DiagLog log;
  diag_log_begin(&log, ctx);
  char *got = infer(ctx, op, n, types, attrs);
  ck_assert_msg(got == NULL, "%s: expected an error, got %s", op,
                got ? got : "");
  ck_assert_diag(&log, message);
  diag_log_end(&log);
}

/*===--- Broadcasting and shape inference ------------------------------===*/

START_TEST(test_broadcasting) {
  FzContext *ctx = graph_context();
  static const struct {
    const char *a, *b, *want;
  } ok[] = {
      {"tensor<4x8xf32>", "tensor<8xf32>", "tensor<4x8xf32>"},
      {"tensor<4x1xf32>", "tensor<1x8xf32>", "tensor<4x8xf32>"},
      {"tensor<f32>", "tensor<2x3xf32>", "tensor<2x3xf32>"},
      {"tensor<2x1x3xf32>", "tensor<4x1xf32>", "tensor<2x4x3xf32>"},
      {"tensor<0x3xf32>", "tensor<1x3xf32>", "tensor<0x3xf32>"},
      {"tensor<?x3xf32>", "tensor<3xf32>", "tensor<?x3xf32>"},
      {"tensor<?x3xf32>", "tensor<5x3xf32>", "tensor<5x3xf32>"},
      {"tensor<?x3xf32>", "tensor<1x3xf32>", "tensor<?x3xf32>"},
      {"tensor<?x1xf32>", "tensor<?x4xf32>", "tensor<?x4xf32>"},
      {"tensor<?xf32>", "tensor<?xf32>", "tensor<?xf32>"},
      {"tensor<4x?xi32>", "tensor<?x7xi32>", "tensor<4x7xi32>"},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    const char *types[2] = {ok[i].a, ok[i].b};
    check_infer(ctx, "graph.add", 2, types, NULL, ok[i].want);
    const char *swapped[2] = {ok[i].b, ok[i].a};
    check_infer(ctx, "graph.mul", 2, swapped, NULL, ok[i].want);
  }
  const char *bad[2] = {"tensor<4x4xf32>", "tensor<5xf32>"};
  check_infer_error(ctx, "graph.add", 2, bad, NULL,
                    "operand #1 dimension 0 (5) is not broadcast-compatible "
                    "with operand #0 dimension 1 (4)");
  const char *bad2[2] = {"tensor<3x2xf32>", "tensor<2x1x4xf32>"};
  check_infer_error(ctx, "graph.sub", 2, bad2, NULL,
                    "operand #1 dimension 2 (4) is not broadcast-compatible "
                    "with operand #0 dimension 1 (2)");
  const char *elt[2] = {"tensor<4xf32>", "tensor<4xi32>"};
  check_infer_error(ctx, "graph.add", 2, elt, NULL,
                    "operand #1 element type 'i32' does not match operand #0 "
                    "element type 'f32'");
  const char *cmp[2] = {"tensor<4x1xf16>", "tensor<3xf16>"};
  check_infer(ctx, "graph.compare", 2, cmp, NULL, "tensor<4x3xi1>");
  const char *sel[3] = {"tensor<4x1xi1>", "tensor<3xf32>", "tensor<f32>"};
  check_infer(ctx, "graph.select", 3, sel, NULL, "tensor<4x3xf32>");
  const char *prelu[2] = {"tensor<2x3x4xf32>", "tensor<3x1xf32>"};
  check_infer(ctx, "graph.prelu", 2, prelu, NULL, "tensor<2x3x4xf32>");
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_shape_inference) {
  FzContext *ctx = graph_context();
  const char *x[1] = {"tensor<2x?x6xf32>"};
  check_infer(ctx, "graph.reduce_sum", 1, x, "{axes = array<i64: 1>}",
              "tensor<2x6xf32>");
  check_infer(ctx, "graph.reduce_max", 1, x,
              "{axes = array<i64: -1, 0>, keepdims = true}",
              "tensor<1x?x1xf32>");
  check_infer(ctx, "graph.reduce_mean", 1, x, NULL, "tensor<f32>");
  check_infer(ctx, "graph.reduce_prod", 1, x, "{axes = array<i64>}",
              "tensor<2x?x6xf32>");
  check_infer_error(ctx, "graph.reduce_min", 1, x, "{axes = array<i64: 0, -3>}",
                    "names dimension 0 twice");
  check_infer(ctx, "graph.transpose", 1, x, "{perm = array<i64: 2, 0, 1>}",
              "tensor<6x2x?xf32>");
  check_infer(ctx, "graph.softmax", 1, x, NULL, "tensor<2x?x6xf32>");
  check_infer(ctx, "graph.slice", 1, x,
              "{starts = array<i64: 0, 0, 5>, limits = array<i64: 2, 3, -1>, "
              "strides = array<i64: 1, 2, -2>}",
              "tensor<2x2x3xf32>");
  const char *cat[3] = {"tensor<2x3xf32>", "tensor<2x?xf32>",
                        "tensor<?x4xf32>"};
  check_infer(ctx, "graph.concat", 3, cat, "{axis = -1 : i64}",
              "tensor<2x?xf32>");
  const char *cat2[2] = {"tensor<2x3xf32>", "tensor<5x3xf32>"};
  check_infer(ctx, "graph.concat", 2, cat2, "{axis = 0 : i64}",
              "tensor<7x3xf32>");
  const char *g[2] = {"tensor<5x6x7xf32>", "tensor<2x3xi64>"};
  check_infer(ctx, "graph.gather", 2, g, "{axis = 1 : i64}",
              "tensor<5x2x3x7xf32>");
  const char *mm[2] = {"tensor<7x1x4x5xf32>", "tensor<3x5x6xf32>"};
  check_infer(ctx, "graph.matmul", 2, mm, NULL, "tensor<7x3x4x6xf32>");
  const char *mmt[2] = {"tensor<5x4xf32>", "tensor<6x5xf32>"};
  check_infer(ctx, "graph.matmul", 2, mmt,
              "{transpose_a = true, transpose_b = true}", "tensor<4x6xf32>");
  const char *mv[2] = {"tensor<3x4x5xf32>", "tensor<5xf32>"};
  check_infer(ctx, "graph.matmul", 2, mv, NULL, "tensor<3x4xf32>");
  const char *vv[2] = {"tensor<5xf32>", "tensor<5xf32>"};
  check_infer(ctx, "graph.matmul", 2, vv, NULL, "tensor<f32>");
  const char *conv[2] = {"tensor<?x8x32x32xf32>", "tensor<16x4x5x5xf32>"};
  check_infer(ctx, "graph.conv2d", 2, conv,
              "{groups = 2 : i64, strides = array<i64: 2, 2>, pads = "
              "array<i64: 2, 2, 2, 2>, dilations = array<i64: 1, 1>}",
              "tensor<?x16x16x16xf32>");
  const char *pool[1] = {"tensor<1x3x6x6xf32>"};
  check_infer(ctx, "graph.max_pool", 1, pool,
              "{kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, "
              "ceil_mode = true}",
              "tensor<1x3x3x3xf32>");
  check_infer(ctx, "graph.avg_pool", 1, pool,
              "{kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>}",
              "tensor<1x3x2x2xf32>");
  check_infer(ctx, "graph.global_avg_pool", 1, pool, NULL,
              "tensor<1x3x1x1xf32>");
  const char *ln[3] = {"tensor<2x5x8xf32>", "tensor<8xf32>", "tensor<8xf32>"};
  check_infer(ctx, "graph.layer_norm", 3, ln, NULL, "tensor<2x5x8xf32>");
  check_infer(ctx, "graph.layer_norm", 3, ln, "{axis = 1 : i64}",
              "tensor<2x5x8xf32>");
  const char *ln5[2] = {"tensor<2x5x8xf32>", "tensor<5xf32>"};
  check_infer_error(ctx, "graph.layer_norm", 2, ln5, NULL,
                    "operand #1 dimension 0 (5) does not broadcast to "
                    "dimension 0 (8)");
  const char *pad[1] = {"tensor<3x?xf32>"};
  check_infer(ctx, "graph.pad", 1, pad, "{pads = array<i64: 1, 2, -1, 0>}",
              "tensor<3x?xf32>");
  const char *cst[1] = {NULL};
  (void)cst;
  check_infer(ctx, "graph.constant", 0, NULL,
              "{value = dense<[1, 2]> : tensor<2xi8>}", "tensor<2xi8>");
  /* Ops whose result type is their own choice are not inferable. */
  const char *one[1] = {"tensor<4xf32>"};
  check_infer_error(ctx, "graph.reshape", 1, one, NULL, "cannot be inferred");
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Verifier messages through the parser ---------------------------===*/

static void check_verify_error(const char *src, const char *message) {
  FzContext *ctx = graph_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m =
      fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("test.fuse"), 0);
  bool ok = m && fzOpVerify(m);
  ck_assert_msg(!ok, "expected an error for: %s", src);
  ck_assert_diag(&log, message);
  diag_log_end(&log);
  if (m)
    fzOpDestroy(m);
  fzContextDestroy(ctx);
}

START_TEST(test_verifier_messages) {
  check_verify_error(
      "func.func @f(%a: tensor<2x3xf32>) {\n"
      "  %0 = \"graph.add\"(%a, %a) : (tensor<2x3xf32>, tensor<2x3xf32>) -> "
      "tensor<2x4xf32>\n  return\n}\n",
      "'graph.add' op result #0 dimension 1 (4) does not match the inferred "
      "dimension (3)");
  check_verify_error(
      "func.func @f(%a: tensor<2x3xf32>) {\n"
      "  %0 = graph.transpose %a {perm = array<i64: 1, 1>} : tensor<2x3xf32> "
      "-> tensor<3x3xf32>\n  return\n}\n",
      "attribute 'perm' is not a permutation: 1 appears twice");
  check_verify_error("func.func @f(%a: tensor<2x3xi32>) {\n"
                     "  %0 = graph.tanh %a : tensor<2x3xi32>\n  return\n}\n",
                     "'graph.tanh' op operand #0 must be a tensor of floats");
  check_verify_error(
      "func.func @f(%a: tensor<1x2x5x5xf32>, %w: tensor<4x3x3x3xf32>) {\n"
      "  %0 = graph.conv2d %a, %w : tensor<1x2x5x5xf32>, "
      "tensor<4x3x3x3xf32> -> tensor<1x4x3x3xf32>\n  return\n}\n",
      "operand #1 dimension 1 (3) times groups (1) does not match operand #0 "
      "dimension 1 (2, the input channels)");
}
END_TEST

/*===--- Rounding -------------------------------------------------------===*/

/* For every finite value v of a 16-bit format (bits -> double) and its
 * successor w: the midpoint rounds to the one with an even mantissa,
 * anything just below it to v, anything just above to w. */
static void check_rne(uint16_t (*toBits)(double), double (*fromBits)(uint16_t),
                      unsigned expShift, unsigned expMask) {
  for (uint32_t h = 0; h < 0x7fff; ++h) {
    if (((h >> expShift) & expMask) == expMask)
      continue; /* inf / NaN */
    uint16_t hn = (uint16_t)(h + 1);
    double v = fromBits((uint16_t)h);
    ck_assert_uint_eq(toBits(v), h);
    ck_assert_uint_eq(toBits(-v), h | 0x8000u);
    if (((hn >> expShift) & expMask) == expMask)
      continue;
    double w = fromBits(hn);
    double mid = v + (w - v) / 2;
    uint16_t even = (h & 1) ? hn : (uint16_t)h;
    ck_assert_uint_eq(toBits(mid), even);
    ck_assert_uint_eq(toBits(nextafter(mid, 0)), h);
    ck_assert_uint_eq(toBits(nextafter(mid, INFINITY)), hn);
    ck_assert_uint_eq(toBits(-nextafter(mid, INFINITY)), hn | 0x8000u);
  }
}

static double half_to_double(uint16_t h) {
  return fzHalfBitsToFloat(h);
}
static double bf16_to_double(uint16_t h) {
  return fzBF16BitsToFloat(h);
}

START_TEST(test_f16_rounding) {
  check_rne(fzDoubleToHalfBits, half_to_double, 10, 0x1f);
  ck_assert_uint_eq(fzDoubleToHalfBits(65504.0), 0x7bffu);
  ck_assert_uint_eq(fzDoubleToHalfBits(65519.99), 0x7bffu);
  ck_assert_uint_eq(fzDoubleToHalfBits(65520.0), 0x7c00u); /* to inf */
  ck_assert_uint_eq(fzDoubleToHalfBits(-1e300), 0xfc00u);
  ck_assert_uint_eq(fzDoubleToHalfBits(INFINITY), 0x7c00u);
  ck_assert_uint_eq(fzDoubleToHalfBits(ldexp(1, -25)), 0x0000u); /* tie */
  ck_assert_uint_eq(fzDoubleToHalfBits(nextafter(ldexp(1, -25), 1)), 1u);
  ck_assert_uint_eq(fzDoubleToHalfBits(-0.0), 0x8000u);
  uint16_t nan = fzDoubleToHalfBits(NAN);
  ck_assert((nan & 0x7c00u) == 0x7c00u && (nan & 0x3ffu));
  /* The double rounding that a trip through float would do. */
  double v = 1.0 + ldexp(1, -11) + ldexp(1, -30);
  ck_assert_uint_eq(fzFloatToHalfBits((float)v), 0x3c00u);
  ck_assert_uint_eq(fzDoubleToHalfBits(v), 0x3c01u);
  FzContext *ctx = fzContextCreate();
  ck_assert(fzRoundToFloatType(fzF16TypeGet(ctx), v) == 1.0 + ldexp(1, -10));
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_bf16_rounding) {
  check_rne(fzDoubleToBF16Bits, bf16_to_double, 7, 0xff);
  double maxBf = ldexp(255.0 / 128.0, 127);
  ck_assert_uint_eq(fzDoubleToBF16Bits(maxBf), 0x7f7fu);
  ck_assert_uint_eq(fzDoubleToBF16Bits(maxBf + ldexp(1, 119)), 0x7f80u);
  ck_assert_uint_eq(fzDoubleToBF16Bits(nextafter(maxBf + ldexp(1, 119), 0)),
                    0x7f7fu);
  ck_assert_uint_eq(fzDoubleToBF16Bits(1e300), 0x7f80u);
  ck_assert_uint_eq(fzDoubleToBF16Bits(ldexp(1, -134)), 0x0000u); /* tie */
  ck_assert_uint_eq(fzDoubleToBF16Bits(ldexp(3, -134)), 0x0002u); /* tie */
  double v = 1.0 + ldexp(1, -8) + ldexp(1, -30);
  ck_assert_uint_eq(fzFloatToBF16Bits((float)v), 0x3f80u);
  ck_assert_uint_eq(fzDoubleToBF16Bits(v), 0x3f81u);
  uint16_t nan = fzDoubleToBF16Bits(-NAN);
  ck_assert((nan & 0x7f80u) == 0x7f80u && (nan & 0x7fu));
}
END_TEST

START_TEST(test_tensor_elements) {
  FzContext *ctx = graph_context();
  int64_t shape[1] = {4};
  FzTensor *t = fzTensorCreate(ctx, fzIntegerTypeGet(ctx, 8), 1, shape);
  ck_assert_ptr_nonnull(t);
  fzTensorSetF64(t, 0, 300.5);
  fzTensorSetF64(t, 1, -1e9);
  fzTensorSetF64(t, 2, -2.7);
  fzTensorSetF64(t, 3, NAN);
  ck_assert_int_eq(fzTensorGetI64(t, 0), 127);
  ck_assert_int_eq(fzTensorGetI64(t, 1), -128);
  ck_assert_int_eq(fzTensorGetI64(t, 2), -2);
  ck_assert_int_eq(fzTensorGetI64(t, 3), 0);
  fzTensorSetI64(t, 0, 200); /* wraps */
  ck_assert_int_eq(fzTensorGetI64(t, 0), -56);
  fzTensorDestroy(t);
  t = fzTensorCreate(ctx, fzIntegerTypeGet(ctx, 1), 1, shape);
  fzTensorSetF64(t, 0, 0.5);
  fzTensorSetI64(t, 1, 2);
  ck_assert_int_eq(fzTensorGetI64(t, 0), 1);
  ck_assert_int_eq(fzTensorGetI64(t, 1), 0);
  fzTensorDestroy(t);
  t = fzTensorCreate(ctx, fzBF16TypeGet(ctx), 1, shape);
  fzTensorSetF64(t, 0, 1.0 + ldexp(1, -8) + ldexp(1, -30));
  ck_assert(fzTensorGetF64(t, 0) == 1.0 + ldexp(1, -7));
  fzTensorDestroy(t);
  /* Dense attributes: splats come back as splats. */
  t = fzTensorCreate(ctx, fzF32TypeGet(ctx), 1, shape);
  for (int i = 0; i < 4; ++i)
    fzTensorSetF64(t, i, 1.5);
  FzAttr *a = fzTensorToDenseAttr(t);
  ck_assert(fzDenseAttrIsSplat(a));
  fzTensorSetF64(t, 3, 2.5);
  a = fzTensorToDenseAttr(t);
  ck_assert(!fzDenseAttrIsSplat(a));
  FzTensor *back = fzTensorFromDenseAttr(ctx, a);
  ck_assert(fzTensorGetF64(back, 3) == 2.5 && fzTensorGetF64(back, 0) == 1.5);
  fzTensorDestroy(back);
  fzTensorDestroy(t);
  /* Bad tensors are errors, not crashes. */
  DiagLog log;
  diag_log_begin(&log, ctx);
  int64_t neg[1] = {-1};
  ck_assert_ptr_null(fzTensorCreate(ctx, fzF32TypeGet(ctx), 1, neg));
  ck_assert_ptr_null(fzTensorCreate(ctx, fzIndexTypeGet(ctx), 1, shape));
  int64_t huge[2] = {FZ_MAX_DIM, FZ_MAX_DIM};
  ck_assert_ptr_null(fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, huge));
  ck_assert_uint_eq(log.numErrors, 3);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- The interpreter API --------------------------------------------===*/

static const char kProgram[] =
    "func.func @main(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> "
    "(tensor<2x3xf32>, tensor<2xf32>) {\n"
    "  %0 = graph.add %x, %b : tensor<2x3xf32>, tensor<3xf32> -> "
    "tensor<2x3xf32>\n"
    "  %1 = graph.reduce_max %0 {axes = array<i64: 1>} : tensor<2x3xf32> -> "
    "tensor<2xf32>\n"
    "  return %0, %1 : tensor<2x3xf32>, tensor<2xf32>\n"
    "}\n";

static FzTensor *make_f32(FzContext *ctx, size_t rank, const int64_t *shape,
                          const float *values) {
  FzTensor *t = fzTensorCreate(ctx, fzF32TypeGet(ctx), rank, shape);
  ck_assert_ptr_nonnull(t);
  for (int64_t i = 0; i < t->numElements; ++i)
    fzTensorSetF64(t, i, values[i]);
  return t;
}

START_TEST(test_interpret_function) {
  FzContext *ctx = graph_context();
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kProgram),
                          FZ_STR("test.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("main"));
  ck_assert_ptr_nonnull(f);
  static const float xs[6] = {1, 2, 3, 4, 5, 6}, bs[3] = {10, -20, 0.5f};
  FzTensor *in[2] = {make_f32(ctx, 2, (int64_t[]){2, 3}, xs),
                     make_f32(ctx, 1, (int64_t[]){3}, bs)};
  size_t nOut = 0;
  FzTensor **out = NULL;
  ck_assert(fzInterpretFunction(f, 2, in, NULL, &nOut, &out));
  ck_assert_uint_eq(nOut, 2);
  ck_assert(fzTensorGetF64(out[0], 0) == 11 &&
            fzTensorGetF64(out[0], 4) == -15 &&
            fzTensorGetF64(out[0], 5) == 6.5);
  ck_assert(fzTensorGetF64(out[1], 0) == 11 && fzTensorGetF64(out[1], 1) == 14);
  fzTensorArrayDestroy(ctx, nOut, out);

  /* Wrong count, shape and dtype: errors naming the argument. */
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert(!fzInterpretFunction(f, 1, in, NULL, &nOut, &out));
  ck_assert_diag(&log, "function @main expects 2 inputs, but got 1");
  FzTensor *swapped[2] = {in[1], in[0]};
  ck_assert(!fzInterpretFunction(f, 2, swapped, NULL, &nOut, &out));
  ck_assert_diag(&log, "argument #0 (%arg0) of @main expects "
                       "tensor<2x3xf32> but got tensor<3xf32>");
  FzTensor *i32 =
      fzTensorCreate(ctx, fzIntegerTypeGet(ctx, 32), 1, (int64_t[]){3});
  FzTensor *wrongType[2] = {in[0], i32};
  ck_assert(!fzInterpretFunction(f, 2, wrongType, NULL, &nOut, &out));
  ck_assert_diag(&log, "argument #1 (%arg1) of @main expects tensor<3xf32> "
                       "but got tensor<3xi32>");
  /* The element limit. */
  FzInterpOptions opts = {4, 0, false, NULL, 0};
  ck_assert(!fzInterpretFunction(f, 2, in, &opts, &nOut, &out));
  ck_assert_diag(&log, "more elements than the interpreter's limit (4)");
  ck_assert_ptr_null(out);
  diag_log_end(&log);
  fzTensorDestroy(i32);
  fzTensorDestroy(in[0]);
  fzTensorDestroy(in[1]);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_interpret_unresolved_dim) {
  FzContext *ctx = graph_context();
  static const char src[] =
      "func.func @main(%x: tensor<?x2xf32>) -> tensor<?x?xf32> {\n"
      "  %0 = graph.reshape %x : tensor<?x2xf32> -> tensor<?x?xf32>\n"
      "  return %0 : tensor<?x?xf32>\n}\n";
  FzOp *m =
      fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("test.fuse"), 0);
  ck_assert(m && fzOpVerify(m));
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("main"));
  static const float xs[4] = {1, 2, 3, 4};
  FzTensor *in = make_f32(ctx, 2, (int64_t[]){2, 2}, xs);
  size_t nOut;
  FzTensor **out;
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert(!fzInterpretFunction(f, 1, &in, NULL, &nOut, &out));
  ck_assert_diag_at(&log,
                    "cannot resolve dynamic dimension 0 of result #0 "
                    "('tensor<?x?xf32>') from the inputs",
                    "test.fuse", 2, 8);
  diag_log_end(&log);
  fzTensorDestroy(in);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Folding --------------------------------------------------------===*/

START_TEST(test_folds) {
  FzContext *ctx = graph_context();
  static const char src[] =
      "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
      "  %c = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>\n"
      "  %z = graph.constant dense<0.0> : tensor<3xf32>\n"
      "  %0 = graph.add %x, %z : tensor<3xf32>\n"
      "  %1 = graph.mul %c, %c : tensor<3xf32>\n"
      "  %2 = graph.neg %x : tensor<3xf32>\n"
      "  %3 = graph.neg %2 : tensor<3xf32>\n"
      "  return %3 : tensor<3xf32>\n}\n";
  FzOp *m =
      fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("test.fuse"), 0);
  ck_assert(m && fzOpVerify(m));
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("main"));
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(f, 0));
  FzValue *x = fzBlockGetArgument(b, 0);
  FzOp *ops[8];
  size_t n = 0;
  for (FzOp *o = fzBlockGetFirstOp(b); o; o = fzOpGetNextInBlock(o))
    ops[n++] = o;
  FzFoldResult r[1];
  /* x + 0 -> x */
  ck_assert(fzOpTryFold(ops[2], r));
  ck_assert_ptr_eq(r[0].value, x);
  /* c * c -> dense<[1, 4, 9]> */
  ck_assert(fzOpTryFold(ops[3], r));
  ck_assert_ptr_nonnull(r[0].attr);
  ck_assert(fzDenseAttrGetFloat(r[0].attr, 2) == 9.0);
  /* neg(neg(x)) -> x */
  ck_assert(fzOpTryFold(ops[5], r));
  ck_assert_ptr_eq(r[0].value, x);
  /* neg(x) does not fold. */
  ck_assert(!fzOpTryFold(ops[4], r));
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_fusion_kinds) {
  FzContext *ctx = graph_context();
  static const struct {
    const char *op;
    FzFusionKind kind;
  } kinds[] = {
      {"graph.relu", FZ_FUSION_ELEMENTWISE},
      {"graph.cast", FZ_FUSION_ELEMENTWISE},
      {"graph.add", FZ_FUSION_BROADCAST},
      {"graph.broadcast", FZ_FUSION_BROADCAST},
      {"graph.transpose", FZ_FUSION_INJECTIVE},
      {"graph.reshape", FZ_FUSION_INJECTIVE},
      {"graph.reduce_sum", FZ_FUSION_REDUCTION},
      {"graph.softmax", FZ_FUSION_REDUCTION},
      {"graph.matmul", FZ_FUSION_CONTRACTION},
      {"graph.conv2d", FZ_FUSION_CONTRACTION},
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i) {
    const FzOpDef *d =
        fzContextLookupOpDef(ctx, fzStringRefFromCString(kinds[i].op));
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->fusionKind, kinds[i].kind);
    ck_assert(d->traits & FZ_TRAIT_PURE);
    ck_assert_ptr_nonnull(d->interpret);
  }
  fzContextDestroy(ctx);
}
END_TEST

/*===--- fold-constants and canonicalize --------------------------------===*/

/* Parses src, runs pipeline on it and returns the printed module. */
static char *run_pipeline(const char *src, const char *pipeline) {
  FzContext *ctx = graph_context();
  ck_assert(fzRegisterAllPasses(ctx));
  ck_assert(fzRegisterFoldConstantsPass(ctx));
  FzOp *m =
      fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("test.fuse"), 0);
  ck_assert(m && fzOpVerify(m));
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  ck_assert(fzPassManagerParsePipeline(pm, fzStringRefFromCString(pipeline)));
  ck_assert(fzPassManagerRun(pm, m));
  TextBuf out = {0};
  fzOpPrint(m, 0, text_cb, &out);
  fzPassManagerDestroy(pm);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
  return out.data;
}

START_TEST(test_fold_constants_pass) {
  static const char src[] =
      "func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
      "  %w = graph.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : "
      "tensor<3x2xf32>\n"
      "  %t = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<3x2xf32> "
      "-> tensor<2x3xf32>\n"
      "  %s = graph.constant dense<2.0> : tensor<2x3xf32>\n"
      "  %m = graph.mul %t, %s : tensor<2x3xf32>\n"
      "  %big = graph.constant dense<1.0> : tensor<64xf32>\n"
      "  %e = graph.exp %big : tensor<64xf32>\n"
      "  %r = graph.add %x, %m : tensor<2x3xf32>\n"
      "  return %r : tensor<2x3xf32>\n}\n";
  char *out =
      run_pipeline(src, "builtin.module(fold-constants{max-elements=16})");
  /* transpose then mul folded into one constant; the big exp is left. */
  ck_assert_ptr_nonnull(strstr(out, "dense<[[2.000000e+00, 6.000000e+00, "
                                    "1.000000e+01], [4.000000e+00, "
                                    "8.000000e+00, 1.200000e+01]]>"));
  ck_assert_ptr_null(strstr(out, "graph.transpose"));
  ck_assert_ptr_null(strstr(out, "graph.mul"));
  ck_assert_ptr_nonnull(strstr(out, "graph.exp"));
  ck_assert_ptr_nonnull(strstr(out, "graph.add %arg0"));
  free(out);
}
END_TEST

START_TEST(test_canonicalize_patterns) {
  static const char src[] =
      "func.func @main(%x: tensor<2x3xf32>, %c: tensor<2x3xi1>, %v: "
      "tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf32>, "
      "tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) {\n"
      "  %k = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>\n"
      "  %0 = graph.mul %k, %x : tensor<3xf32>, tensor<2x3xf32> -> "
      "tensor<2x3xf32>\n"
      "  %1 = graph.compare lt, %k, %x : tensor<3xf32>, tensor<2x3xf32> -> "
      "tensor<2x3xi1>\n"
      "  %b = graph.broadcast %v : tensor<3xf32> -> tensor<2x3xf32>\n"
      "  %2 = graph.sub %x, %b : tensor<2x3xf32>\n"
      "  %n = graph.not %c : tensor<2x3xi1>\n"
      "  %3 = graph.select %n, %x, %b : tensor<2x3xi1>, tensor<2x3xf32>, "
      "tensor<2x3xf32> -> tensor<2x3xf32>\n"
      "  %4 = graph.softmax %x {axis = -1 : i64} : tensor<2x3xf32>\n"
      "  %h = graph.cast %v : tensor<3xf32> -> tensor<3xf64>\n"
      "  %5 = graph.cast %h : tensor<3xf64> -> tensor<3xf32>\n"
      "  return %0, %1, %2, %3, %4, %5 : tensor<2x3xf32>, tensor<2x3xi1>, "
      "tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>\n"
      "}\n";
  char *out = run_pipeline(src, "builtin.module(canonicalize)");
  ck_assert_ptr_nonnull(strstr(out, "graph.mul %arg0, %0 : tensor<2x3xf32>, "
                                    "tensor<3xf32> -> tensor<2x3xf32>"));
  ck_assert_ptr_nonnull(strstr(out, "graph.compare gt, %arg0, %0"));
  ck_assert_ptr_nonnull(strstr(out, "graph.sub %arg0, %arg2 : "
                                    "tensor<2x3xf32>, tensor<3xf32> -> "
                                    "tensor<2x3xf32>"));
  ck_assert_ptr_nonnull(strstr(out, "graph.select %arg1, %"));
  ck_assert_ptr_nonnull(strstr(out, "{axis = 1 : i64}"));
  ck_assert_ptr_null(strstr(out, "graph.not"));
  ck_assert_ptr_null(strstr(out, "graph.cast"));
  free(out);
}
END_TEST

static Suite *graph_suite(void) {
  Suite *s = suite_create("graph");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_broadcasting);
  tcase_add_test(tc, test_shape_inference);
  tcase_add_test(tc, test_verifier_messages);
  tcase_add_test(tc, test_f16_rounding);
  tcase_add_test(tc, test_bf16_rounding);
  tcase_add_test(tc, test_tensor_elements);
  tcase_add_test(tc, test_interpret_function);
  tcase_add_test(tc, test_interpret_unresolved_dim);
  tcase_add_test(tc, test_folds);
  tcase_add_test(tc, test_fusion_kinds);
  tcase_add_test(tc, test_fold_constants_pass);
  tcase_add_test(tc, test_canonicalize_patterns);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return run_suite(graph_suite());
}

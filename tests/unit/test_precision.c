/* tests/unit/test_precision.c - Check suite of the precision policy's C
 * API (fz/precision.h): the one spelling (parse, name, the names list),
 * what `default` means for a compute capability, the graph half
 * (fzModuleApplyPrecision), and the policy as the GPU compiler takes it
 * (FzGpuOptions.precision, FzLoopToKernelOptions.precision), bad values
 * included. No GPU is needed (PTX only).
 */
#include <stdlib.h>
#include <string.h>

#include "fz/fz.h"
#include "fz/gpu.h"
#include "fz/kernel.h"
#include "fz/precision.h"
#include "tests/unit/test_helpers.h"

/* A matmul whose weight is a broadcast constant row plus a splat (which
 * canonicalize folds into one constant of distinct values). */
static const char kMatmul[] =
    "func.func @main(%a: tensor<64x32xf32>) -> tensor<64x48xf32> {\n"
    "  %r = graph.constant dense<["
    "-0.75, -0.71875, -0.6875, -0.65625, -0.625, -0.59375, -0.5625, -0.53125, "
    "-0.5, -0.46875, -0.4375, -0.40625, -0.375, -0.34375, -0.3125, -0.28125, "
    "-0.25, -0.21875, -0.1875, -0.15625, -0.125, -0.09375, -0.0625, -0.03125, "
    "0.0, 0.03125, 0.0625, 0.09375, 0.125, 0.15625, 0.1875, 0.21875, "
    "0.25, 0.28125, 0.3125, 0.34375, 0.375, 0.40625, 0.4375, 0.46875, "
    "0.5, 0.53125, 0.5625, 0.59375, 0.625, 0.65625, 0.6875, 0.71875"
    "]> : tensor<48xf32>\n"
    "  %w = graph.broadcast %r : tensor<48xf32> -> tensor<32x48xf32>\n"
    "  %v = graph.constant dense<0.25> : tensor<32x48xf32>\n"
    "  %0 = graph.add %w, %v : tensor<32x48xf32>\n"
    "  %1 = graph.matmul %a, %0 : tensor<64x32xf32>, tensor<32x48xf32> -> "
    "tensor<64x48xf32>\n"
    "  return %1 : tensor<64x48xf32>\n"
    "}\n";

static FzOp *parse(FzContext *ctx, const char *src) {
  FzOp *m =
      fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("t.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  return m;
}

static char *print(FzOp *op) {
  TextBuf t = {0};
  fzOpPrint(op, 0, text_cb, &t);
  return t.data;
}

static FzWalkResult count_one(FzOp *op, void *ud) {
  (void)op;
  ++*(size_t *)ud;
  return FZ_WALK_ADVANCE;
}

static size_t count_ops(FzOp *m) {
  size_t n = 0;
  fzOpWalk(m, FZ_WALK_PRE_ORDER, count_one, &n);
  return n;
}

START_TEST(test_parse_and_name) {
  static const struct {
    const char *name;
    FzPrecision p;
  } kAll[] = {{"default", FZ_PRECISION_DEFAULT},
              {"ieee", FZ_PRECISION_IEEE},
              {"tf32", FZ_PRECISION_TF32},
              {"bf16", FZ_PRECISION_BF16},
              {"fp16", FZ_PRECISION_FP16}};
  ck_assert_int_eq(FZ_NUM_PRECISIONS, 5);
  ck_assert_int_eq(FZ_PRECISION_DEFAULT, 0); /* what memset gives */
  const char *const *names = fzPrecisionGetNames();
  for (size_t i = 0; i < 5; ++i) {
    FzPrecision p = FZ_PRECISION_FP16;
    ck_assert(fzPrecisionParse(fzStringRefFromCString(kAll[i].name), &p));
    ck_assert_int_eq(p, kAll[i].p);
    ck_assert_str_eq(fzPrecisionGetName(kAll[i].p), kAll[i].name);
    ck_assert_str_eq(names[kAll[i].p], kAll[i].name);
    ck_assert(strstr(fzPrecisionGetChoicesText(), kAll[i].name) != NULL);
  }
  ck_assert_ptr_null(names[5]);
  /* One spelling: no case folding, no prefixes, no aliases; *out is
   * left as it was. A sized string is read to its length only. */
  static const char *const kBad[] = {"",       "TF32",    "tf",   "tf32 ",
                                     "f16",    "fp32",    "half", "ieee754",
                                     "defaul", "bfloat16"};
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; ++i) {
    FzPrecision p = FZ_PRECISION_BF16;
    ck_assert_msg(!fzPrecisionParse(fzStringRefFromCString(kBad[i]), &p),
                  "'%s' parsed", kBad[i]);
    ck_assert_int_eq(p, FZ_PRECISION_BF16);
  }
  FzPrecision p = FZ_PRECISION_DEFAULT;
  FzStringRef part = {"tf32xyz", 4};
  ck_assert(fzPrecisionParse(part, &p));
  ck_assert_int_eq(p, FZ_PRECISION_TF32);
  ck_assert_ptr_null(fzPrecisionGetName((FzPrecision)FZ_NUM_PRECISIONS));
  ck_assert_ptr_null(fzPrecisionGetName((FzPrecision)-1));
}
END_TEST

START_TEST(test_resolve) {
  /* default: tf32 from sm_80 (and for an unknown arch: fuse's kernels
   * need sm_80), ieee below. */
  ck_assert_int_eq(fzPrecisionResolve(FZ_PRECISION_DEFAULT, 80),
                   FZ_PRECISION_TF32);
  ck_assert_int_eq(fzPrecisionResolve(FZ_PRECISION_DEFAULT, 90),
                   FZ_PRECISION_TF32);
  ck_assert_int_eq(fzPrecisionResolve(FZ_PRECISION_DEFAULT, 0),
                   FZ_PRECISION_TF32);
  ck_assert_int_eq(fzPrecisionResolve(FZ_PRECISION_DEFAULT, 75),
                   FZ_PRECISION_IEEE);
  ck_assert_int_eq(fzPrecisionResolve(FZ_PRECISION_DEFAULT, 70),
                   FZ_PRECISION_IEEE);
  for (int p = 1; p < FZ_NUM_PRECISIONS; ++p) {
    ck_assert_int_eq(fzPrecisionResolve((FzPrecision)p, 75), p);
    ck_assert_int_eq(fzPrecisionResolve((FzPrecision)p, 90), p);
  }
}
END_TEST

START_TEST(test_apply_to_module) {
  FzContext *ctx = new_context();
  ck_assert(fzRegisterAllPasses(ctx));
  /* default, ieee, tf32: the graph is left as it is. */
  for (int p = 0; p <= FZ_PRECISION_TF32; ++p) {
    FzOp *m = parse(ctx, kMatmul);
    char *before = print(m);
    ck_assert(fzModuleApplyPrecision(m, (FzPrecision)p, true));
    char *after = print(m);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    fzOpDestroy(m);
  }
  /* bf16 / fp16: the matmul on 16-bit operands, cast back to f32; the
   * simplifications fold the constant add first, so the weight is one
   * 16-bit constant. */
  static const struct {
    FzPrecision p;
    const char *operands, *weight, *back;
  } kLow[] = {
      {FZ_PRECISION_BF16, "tensor<64x32xbf16>, tensor<32x48xbf16>",
       ": tensor<32x48xbf16>", "tensor<64x48xbf16> -> tensor<64x48xf32>"},
      {FZ_PRECISION_FP16, "tensor<64x32xf16>, tensor<32x48xf16>",
       ": tensor<32x48xf16>", "tensor<64x48xf16> -> tensor<64x48xf32>"}};
  for (size_t i = 0; i < 2; ++i) {
    FzOp *m = parse(ctx, kMatmul);
    ck_assert(fzModuleApplyPrecision(m, kLow[i].p, true));
    ck_assert(fzOpVerify(m));
    char *text = print(m);
    ck_assert_msg(strstr(text, kLow[i].operands) != NULL, "%s", text);
    ck_assert_msg(strstr(text, kLow[i].back) != NULL, "%s", text);
    ck_assert_msg(strstr(text, "graph.add") == NULL, "%s", text);
    ck_assert_msg(strstr(text, kLow[i].weight) != NULL, "%s", text);
    free(text);
    /* Applying it again converts nothing more (canonicalize may reorder
     * the constants): the same ops, no second cast. */
    size_t before = count_ops(m);
    ck_assert(fzModuleApplyPrecision(m, kLow[i].p, true));
    ck_assert_uint_eq(count_ops(m), before);
    text = print(m);
    ck_assert_msg(strstr(text, kLow[i].operands) != NULL, "%s", text);
    free(text);
    fzOpDestroy(m);
  }
  /* Without the simplifications, the add stays and its result is cast
   * (a cast of a non-constant: not folded). */
  FzOp *m = parse(ctx, kMatmul);
  ck_assert(fzModuleApplyPrecision(m, FZ_PRECISION_BF16, false));
  char *text = print(m);
  ck_assert_msg(strstr(text, "graph.add") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "graph.broadcast") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "tensor<32x48xf32> -> tensor<32x48xbf16>"), "%s",
                text);
  free(text);
  fzOpDestroy(m);
  /* A module at the loop level is not touched. */
  m = parse(ctx, kMatmul);
  FzCpuPipelineOptions po;
  fzCpuPipelineOptionsInit(&po);
  ck_assert(fzLowerModuleForCpu(m, &po));
  char *before = print(m);
  ck_assert(fzModuleApplyPrecision(m, FZ_PRECISION_BF16, true));
  char *after = print(m);
  ck_assert_str_eq(before, after);
  free(before);
  free(after);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* The mapping of the one kernel fzGpuCompile makes of kMatmul's matmul
 * (its add is folded away) for arch and precision; NULL after an error. */
static char *mapping_for(FzContext *ctx, const char *arch, FzPrecision p) {
  FzOp *m = parse(ctx, kMatmul);
  FzCpuPipelineOptions po;
  fzCpuPipelineOptionsInit(&po);
  ck_assert(fzLowerModuleForCpu(m, &po));
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  ck_assert_int_eq(go.precision, FZ_PRECISION_DEFAULT);
  go.arch = arch;
  go.precision = p;
  FzGpuProgram *prog = fzGpuCompile(m, &go);
  char *mapping = NULL;
  if (prog) {
    const FzGpuFunction *f = fzGpuProgramLookup(prog, "main");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->numKernels, 1);
    mapping = strdup(f->kernels[0].plan);
  }
  fzGpuProgramDestroy(prog);
  fzOpDestroy(m);
  return mapping;
}

START_TEST(test_gpu_options) {
  FzContext *ctx = new_context();
  ck_assert(fzRegisterAllPasses(ctx));
  static const struct {
    const char *arch;
    FzPrecision p;
    const char *plan;
  } kCases[] = {
      {"sm_90", FZ_PRECISION_DEFAULT, "matmul 64x48x32 f32 (tf32)"},
      {"sm_80", FZ_PRECISION_DEFAULT, "matmul 64x48x32 f32 (tf32)"},
      {"sm_90", FZ_PRECISION_TF32, "matmul 64x48x32 f32 (tf32)"},
      {"sm_90", FZ_PRECISION_IEEE, "elementwise"},
      {"sm_80", FZ_PRECISION_IEEE, "elementwise"},
      /* bf16 and fp16 act at the graph level; an f32 nest left at the
       * loop level takes tf32. */
      {"sm_90", FZ_PRECISION_BF16, "matmul 64x48x32 f32 (tf32)"},
  };
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; ++i) {
    char *plan = mapping_for(ctx, kCases[i].arch, kCases[i].p);
    ck_assert_ptr_nonnull(plan);
    ck_assert_msg(strncmp(plan, kCases[i].plan, strlen(kCases[i].plan)) == 0,
                  "%s %s: %s", kCases[i].arch, fzPrecisionGetName(kCases[i].p),
                  plan);
    free(plan);
  }
  /* A value that is no policy: an error, no program. */
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert_ptr_null(mapping_for(ctx, "sm_90", (FzPrecision)7));
  ck_assert_diag(&log, "precision 7 is not one of the policies");
  diag_log_clear(&log);
  FzOp *m = parse(ctx, kMatmul);
  FzCpuPipelineOptions po;
  fzCpuPipelineOptionsInit(&po);
  ck_assert(fzLowerModuleForCpu(m, &po));
  FzLoopToKernelOptions ko;
  fzLoopToKernelOptionsInit(&ko);
  ck_assert_int_eq(ko.precision, FZ_PRECISION_DEFAULT);
  ko.precision = (FzPrecision)-3;
  ck_assert(!fzLowerLoopToKernel(m, &ko));
  ck_assert_diag(&log, "default, ieee, tf32, bf16 or fp16");
  diag_log_end(&log);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("precision");
  TCase *tc = tcase_create("precision");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_parse_and_name);
  tcase_add_test(tc, test_resolve);
  tcase_add_test(tc, test_apply_to_module);
  tcase_add_test(tc, test_gpu_options);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

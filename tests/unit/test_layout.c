/* tests/unit/test_layout.c - Check suite of the layout's C API
 * (fz/layout.h): the one spelling (parse, name), fzGraphOpGetLayout,
 * fzModuleApplyLayout on a graph-level module (NHWC convs, the model's
 * result unchanged on the interpreter) and its no-ops (NCHW, a loop-level
 * module), and FzCpuPipelineOptions.layout through fzLowerModuleForCpu.
 */
#include <math.h>
#include <string.h>

#include "fz/fz.h"
#include "tests/unit/test_helpers.h"

/* conv (4 channels) + bias + relu, then a global pool: NHWC all the way,
 * one transpose at the input. */
static const char kModel[] =
    "func.func @main(%x: tensor<1x4x5x5xf32>, %w: tensor<4x4x3x3xf32>, "
    "%b: tensor<4xf32>) -> tensor<1x4x1x1xf32> {\n"
    "  %0 = graph.conv2d %x, %w, %b {pads = array<i64: 1, 1, 1, 1>} : "
    "tensor<1x4x5x5xf32>, tensor<4x4x3x3xf32>, tensor<4xf32> -> "
    "tensor<1x4x5x5xf32>\n"
    "  %1 = graph.relu %0 : tensor<1x4x5x5xf32>\n"
    "  %2 = graph.global_avg_pool %1 : tensor<1x4x5x5xf32> -> "
    "tensor<1x4x1x1xf32>\n"
    "  return %2 : tensor<1x4x1x1xf32>\n"
    "}\n";

static FzContext *context(void) {
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  return ctx;
}

static FzOp *parse(FzContext *ctx, const char *src) {
  FzOp *m =
      fzParseSource(ctx, fzStringRefFromCString(src), FZ_STR("t.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  return m;
}

typedef struct Count {
  const char *name;
  size_t n, nhwc;
} Count;

static FzWalkResult count_op(FzOp *op, void *ud) {
  Count *c = ud;
  const FzOpDef *d = fzOpGetDef(op);
  if (d && !strcmp(d->name, c->name)) {
    c->n++;
    c->nhwc += fzGraphOpGetLayout(op) == FZ_GRAPH_LAYOUT_NHWC;
  }
  return FZ_WALK_ADVANCE;
}

static Count count(FzOp *m, const char *name) {
  Count c = {name, 0, 0};
  fzOpWalk(m, FZ_WALK_PRE_ORDER, count_op, &c);
  return c;
}

START_TEST(test_parse_and_name) {
  ck_assert_int_eq(FZ_GRAPH_LAYOUT_NCHW, 0); /* what memset gives */
  ck_assert_int_eq(FZ_GRAPH_NUM_LAYOUTS, 3);
  FzGraphLayout l = FZ_GRAPH_LAYOUT_NCHW;
  ck_assert(fzGraphLayoutParse(FZ_STR("nhwc"), &l));
  ck_assert_int_eq(l, FZ_GRAPH_LAYOUT_NHWC);
  ck_assert(fzGraphLayoutParse(FZ_STR("auto"), &l));
  ck_assert_int_eq(l, FZ_GRAPH_LAYOUT_AUTO);
  ck_assert(fzGraphLayoutParse(FZ_STR("nchw"), &l));
  ck_assert_int_eq(l, FZ_GRAPH_LAYOUT_NCHW);
  /* Exact spelling only; *out unchanged on a refusal. */
  l = FZ_GRAPH_LAYOUT_NHWC;
  ck_assert(!fzGraphLayoutParse(FZ_STR("NHWC"), &l));
  ck_assert(!fzGraphLayoutParse(FZ_STR("nhw"), &l));
  ck_assert(!fzGraphLayoutParse(FZ_STR(""), &l));
  ck_assert_int_eq(l, FZ_GRAPH_LAYOUT_NHWC);
  ck_assert_str_eq(fzGraphLayoutGetName(FZ_GRAPH_LAYOUT_NCHW), "nchw");
  ck_assert_str_eq(fzGraphLayoutGetName(FZ_GRAPH_LAYOUT_NHWC), "nhwc");
  ck_assert_str_eq(fzGraphLayoutGetName(FZ_GRAPH_LAYOUT_AUTO), "auto");
  ck_assert_ptr_null(fzGraphLayoutGetName(FZ_GRAPH_NUM_LAYOUTS));
  ck_assert_ptr_null(fzGraphLayoutGetName((FzGraphLayout)-1));
  ck_assert_str_eq(fzGraphLayoutGetChoicesText(), "nchw, nhwc or auto");
}
END_TEST

/* The interpreter's output of module's @main on fixed inputs. */
static FzTensor *run_main(FzContext *ctx, FzOp *m) {
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("main"));
  FzType *ft =
      fzTypeAttrGetValue(fzOpGetInherentAttr(f, FZ_STR("function_type")));
  FzTensor *in[3];
  for (size_t i = 0; i < 3; ++i) {
    in[i] = fzTensorCreateFromType(ctx, fzFunctionTypeGetInput(ft, i));
    ck_assert_ptr_nonnull(in[i]);
    for (int64_t k = 0; k < in[i]->numElements; ++k)
      fzTensorSetF64(in[i], k, sin(0.7 * (double)(k + 13 * (int64_t)i)));
  }
  size_t n = 0;
  FzTensor **out = NULL;
  ck_assert(fzInterpretFunction(f, 3, in, NULL, &n, &out));
  ck_assert_uint_eq(n, 1);
  FzTensor *r = fzTensorClone(out[0]);
  ck_assert_ptr_nonnull(r);
  fzTensorArrayDestroy(ctx, n, out);
  for (size_t i = 0; i < 3; ++i)
    fzTensorDestroy(in[i]);
  return r;
}

START_TEST(test_apply_to_module) {
  FzContext *ctx = context();
  FzOp *ref = parse(ctx, kModel), *m = parse(ctx, kModel);
  /* NCHW: nothing changes. */
  ck_assert(fzModuleApplyLayout(m, FZ_GRAPH_LAYOUT_NCHW));
  ck_assert_uint_eq(count(m, "graph.conv2d").nhwc, 0);
  ck_assert_uint_eq(count(m, "graph.transpose").n, 0);
  /* NHWC: the conv and the pool, one transpose in (the pool's [1, 1, 1,
   * 4] result goes back as a reshape); the same numbers. */
  ck_assert(fzModuleApplyLayout(m, FZ_GRAPH_LAYOUT_NHWC));
  ck_assert(fzOpVerify(m));
  ck_assert_uint_eq(count(m, "graph.conv2d").nhwc, 1);
  ck_assert_uint_eq(count(m, "graph.global_avg_pool").nhwc, 1);
  ck_assert_uint_eq(count(m, "graph.transpose").n, 1);
  ck_assert_uint_eq(count(m, "graph.reshape").n, 1);
  FzTensor *a = run_main(ctx, ref), *b = run_main(ctx, m);
  ck_assert_int_eq(a->numElements, b->numElements);
  for (int64_t k = 0; k < a->numElements; ++k)
    ck_assert_msg(fabs(fzTensorGetF64(a, k) - fzTensorGetF64(b, k)) <=
                      1e-5 * (1 + fabs(fzTensorGetF64(a, k))),
                  "element %lld", (long long)k);
  fzTensorDestroy(a);
  fzTensorDestroy(b);
  /* Twice changes nothing more: the convs are NHWC already. */
  ck_assert(fzModuleApplyLayout(m, FZ_GRAPH_LAYOUT_NHWC));
  ck_assert_uint_eq(count(m, "graph.transpose").n, 1);
  fzOpDestroy(m);
  fzOpDestroy(ref);
  fzContextDestroy(ctx);
}
END_TEST

/* fzLowerModuleForCpu with layout NHWC: the NHWC conv nest of the contract
 * (a 4-d loop.parallel over (n, oh, ow, m)); a loop-level module is left
 * alone by fzModuleApplyLayout. */
START_TEST(test_cpu_pipeline) {
  FzContext *ctx = context();
  FzOp *m = parse(ctx, kModel);
  FzCpuPipelineOptions po;
  fzCpuPipelineOptionsInit(&po);
  ck_assert_int_eq(po.layout, FZ_GRAPH_LAYOUT_NCHW);
  po.layout = FZ_GRAPH_LAYOUT_NHWC;
  ck_assert(fzLowerModuleForCpu(m, &po));
  ck_assert(!fzModuleIsGraphLevel(m));
  TextBuf t = {0};
  fzOpPrint(m, 0, text_cb, &t);
  /* The conv's output buffer is NHWC (the group's nest writes 1x5x5x4). */
  ck_assert_msg(strstr(t.data, "buffer<1x5x5x4xf32>") != NULL, "%s", t.data);
  ck_assert(fzModuleApplyLayout(m, FZ_GRAPH_LAYOUT_NHWC));
  TextBuf u = {0};
  fzOpPrint(m, 0, text_cb, &u);
  ck_assert_str_eq(t.data, u.data);
  text_free(&t);
  text_free(&u);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("layout");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_parse_and_name);
  tcase_add_test(tc, test_apply_to_module);
  tcase_add_test(tc, test_cpu_pipeline);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

/* tests/unit/test_runtime_calls.c - Check suite of the calls that a
 * caller owning its buffers makes (the Python package, python/): on the
 * CPU, fzCpuFunctionCall (raw buffers with the generated code's run-time
 * checks); on the GPU, against the fake driver of fake_cuda.c (no kernel
 * runs there), fzCudaMakeCurrent, fzCudaCallCreate without inputs,
 * fzCudaCallGetArgument, fzCudaCallSynchronize, and FzGpuOptions.fusion
 * (the fusion report of fzCudaCompileModule).
 */
#include <unistd.h>

#include "fz/cuda_run.h"
#include "fz/fusion.h"
#include "fz/runtime.h"
#include "tests/unit/test_helpers.h"

static const char kProgram[] =
    "func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = graph.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>\n"
    "  %1 = graph.relu %0 : tensor<4xf32>\n"
    "  return %1 : tensor<4xf32>\n"
    "}\n"
    "func.func @div(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {\n"
    "  %0 = graph.div %a, %b : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>\n"
    "  return %0 : tensor<4xi32>\n"
    "}\n";

static FzOp *parse_program(FzContext *ctx) {
  FzOp *m = fzParseSource(ctx, fzStringRefFromCString(kProgram),
                          FZ_STR("calls.fuse"), 0);
  ck_assert_ptr_nonnull(m);
  ck_assert(fzOpVerify(m));
  return m;
}

/* Raw buffers in, outputs written in place; a division by zero is the
 * located error of the run-time checks, and the next call is clean. */
START_TEST(test_cpu_function_call) {
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = parse_program(ctx);
  FzCpuRuntime *rt = fzCpuRuntimeCreate(ctx, 1);
  ck_assert_ptr_nonnull(rt);
  FzCpuExecutable *exe = fzCpuExecutableCreate(rt, m, NULL);
  ck_assert_ptr_nonnull(exe);

  FzCpuFunction *add = fzCpuExecutableLookup(exe, FZ_STR("add"));
  ck_assert_ptr_nonnull(add);
  _Alignas(64) float a[4] = {1, -2, 3, -4}, b[4] = {1, 1, 1, 1}, y[4];
  void *bufs[3] = {a, b, y};
  ck_assert(fzCpuFunctionCall(add, bufs));
  ck_assert(y[0] == 2 && y[1] == 0 && y[2] == 4 && y[3] == 0);

  FzCpuFunction *div = fzCpuExecutableLookup(exe, FZ_STR("div"));
  ck_assert_ptr_nonnull(div);
  _Alignas(64) int32_t n[4] = {8, 9, 10, 11}, d[4] = {2, 3, 0, 1}, q[4];
  void *dbufs[3] = {n, d, q};
  ck_assert(!fzCpuFunctionCall(div, dbufs));
  ck_assert_diag(&log, "integer division by zero");
  ck_assert_uint_eq(log.numErrors, 1);
  d[2] = 5;
  ck_assert(fzCpuFunctionCall(div, dbufs));
  ck_assert_uint_eq(log.numErrors, 1);
  ck_assert(q[0] == 4 && q[1] == 3 && q[2] == 2 && q[3] == 11);

  fzCpuExecutableDestroy(exe);
  fzCpuRuntimeDestroy(rt);
  fzOpDestroy(m);
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

#ifdef FZ_FAKE_CUDA
static const char *fake_driver(void) {
  return access(FZ_FAKE_CUDA, R_OK) == 0 ? FZ_FAKE_CUDA : NULL;
}
#else
static const char *fake_driver(void) { return NULL; }
#endif

/* A call made without inputs: its argument buffers are the caller's to
 * fill and read (the fake's device memory is host memory, so what is
 * written reads back), launches and synchronizes; the report of the
 * fusion options given to fzCudaCompileModule reaches its callback. */
START_TEST(test_cuda_call_on_device) {
  const char *path = fake_driver();
  if (!path)
    return;
  setenv("FZ_CUDA_LIBRARY", path, 1);
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzOp *m = parse_program(ctx);
  FzCuda *cu = fzCudaCreate(ctx, 0);
  ck_assert_ptr_nonnull(cu);
  ck_assert(fzCudaMakeCurrent(cu));

  TextBuf report = {0};
  FzFusionOptions fo;
  fzFusionOptionsInit(&fo);
  fo.report = true;
  fo.reportOut = text_cb;
  fo.reportUserData = &report;
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  go.optLevel = 0;
  go.codegenThreads = 1;
  go.fusion = &fo;
  FzGpuProgram *p = fzCudaCompileModule(cu, m, true, &go);
  ck_assert_ptr_nonnull(p);
  ck_assert_ptr_nonnull(report.data);
  ck_assert_ptr_nonnull(strstr(report.data, "fusion report for @add"));

  FzCudaCall *c = fzCudaCallCreate(cu, p, "add", 2, NULL);
  ck_assert_ptr_nonnull(c);
  ck_assert_uint_eq(fzCudaCallGetFunction(c)->numArgs, 3);
  FzCudaPtr in0 = fzCudaCallGetArgument(c, 0);
  FzCudaPtr out = fzCudaCallGetArgument(c, 2);
  ck_assert(in0 != 0 && fzCudaCallGetArgument(c, 1) != 0 && out != 0);
  ck_assert(fzCudaCallGetArgument(c, 3) == 0);
  float a[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
  ck_assert(fzCudaCopyToDevice(cu, in0, a, sizeof a));
  ck_assert(fzCudaCopyOnDevice(cu, out, in0, sizeof a));
  ck_assert(fzCudaCallLaunch(c));
  ck_assert(fzCudaCallSynchronize(c));
  ck_assert(fzCudaCopyToHost(cu, back, out, sizeof back));
  ck_assert(back[0] == 1 && back[3] == 4); /* the fake ran no kernel */
  ck_assert_uint_eq(log.numErrors, 0);

  /* The wrong input count is still an error. */
  ck_assert_ptr_null(fzCudaCallCreate(cu, p, "add", 1, NULL));
  ck_assert_diag(&log, "no compiled function @add taking 1 inputs");

  fzCudaCallDestroy(c);
  fzGpuProgramDestroy(p);
  fzCudaDestroy(cu);
  text_free(&report);
  fzOpDestroy(m);
  diag_log_end(&log);
  fzContextDestroy(ctx);
  unsetenv("FZ_CUDA_LIBRARY");
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_calls");
  TCase *tc = tcase_create("calls");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_cpu_function_call);
  tcase_add_test(tc, test_cuda_call_on_device);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

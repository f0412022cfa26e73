/* tests/unit/test_cuda.c - Check suite of runtime/cuda.c on any machine:
 * without a driver (the build machines) probing and creating fail with
 * the clear "no CUDA driver found (libcuda.so.1): ..." diagnostic and no
 * crash; a library that is not a CUDA driver (FZ_CUDA_LIBRARY=libm.so.6)
 * is named with the missing entry point. On a machine with a driver and
 * a device, the same tests check that creation works instead, that
 * the module cache loads one PTX text once, and that a CUDA graph of
 * three kernel launches runs them in order.
 */
#include <stdlib.h>

#include "fz/cuda.h"
#include "tests/unit/test_helpers.h"

/* A kernel that does nothing, valid for every sm_50+ driver. */
static const char kEmptyPtx[] = ".version 7.0\n"
                                ".target sm_50\n"
                                ".address_size 64\n"
                                ".visible .entry empty()\n"
                                "{\n"
                                "  ret;\n"
                                "}\n";

/* *p += 1 on one thread. */
static const char kIncPtx[] = ".version 7.0\n"
                              ".target sm_50\n"
                              ".address_size 64\n"
                              ".visible .entry inc(.param .u64 p)\n"
                              "{\n"
                              "  .reg .b64 %rd<2>;\n"
                              "  .reg .b32 %r<3>;\n"
                              "  ld.param.u64 %rd1, [p];\n"
                              "  cvta.to.global.u64 %rd1, %rd1;\n"
                              "  ld.global.u32 %r1, [%rd1];\n"
                              "  add.s32 %r2, %r1, 1;\n"
                              "  st.global.u32 [%rd1], %r2;\n"
                              "  ret;\n"
                              "}\n";

/* A graph of three launches of inc, replayed twice: 6. */
static void check_graph(FzCuda *cu) {
  FzCudaKernel *inc = fzCudaGetKernel(cu, kIncPtx, strlen(kIncPtx), "inc");
  ck_assert_ptr_nonnull(inc);
  FzCudaPtr p = 0;
  int zero = 0, back = -1;
  ck_assert(fzCudaAlloc(cu, sizeof zero, &p));
  ck_assert(fzCudaCopyToDevice(cu, p, &zero, sizeof zero));
  FzCudaKernel *ks[3] = {inc, inc, inc};
  unsigned dims[3][3] = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
  void *args[1] = {&p};
  void **perKernel[3] = {args, args, args};
  FzCudaGraph *g = fzCudaGraphCreate(cu, 3, ks, (const unsigned(*)[3])dims,
                                     (const unsigned(*)[3])dims, NULL,
                                     perKernel);
  ck_assert_ptr_nonnull(g);
  ck_assert(fzCudaGraphLaunch(cu, g));
  ck_assert(fzCudaGraphLaunch(cu, g));
  ck_assert(fzCudaSynchronize(cu));
  ck_assert(fzCudaCopyToHost(cu, &back, p, sizeof back));
  ck_assert_int_eq(back, 6);
  fzCudaGraphDestroy(cu, g);
  fzCudaFree(cu, p);
}

START_TEST(test_probe_without_or_with_driver) {
  unsetenv("FZ_CUDA_LIBRARY");
  char why[512] = "untouched";
  bool present = fzCudaProbe(why, sizeof why);
  if (!present) {
    ck_assert_msg(strstr(why, "libcuda.so.1") != NULL, "why: %s", why);
    ck_assert_msg(strstr(why, "no CUDA driver found") ||
                      strstr(why, "no device") || strstr(why, "initialize"),
                  "why: %s", why);
  }
  /* NULL is accepted for the reason. */
  ck_assert_int_eq(fzCudaProbe(NULL, 0), present);
}
END_TEST

START_TEST(test_create_reports_missing_driver) {
  unsetenv("FZ_CUDA_LIBRARY");
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  bool present = fzCudaProbe(NULL, 0);
  FzCuda *cu = fzCudaCreate(ctx, 0);
  if (present) {
    ck_assert_ptr_nonnull(cu);
    ck_assert_int_gt(fzCudaGetComputeCapability(cu), 0);
    ck_assert(strlen(fzCudaGetDeviceName(cu)) > 0);
    FzCudaKernel *k1 = fzCudaGetKernel(cu, kEmptyPtx, strlen(kEmptyPtx),
                                       "empty");
    FzCudaKernel *k2 = fzCudaGetKernel(cu, kEmptyPtx, strlen(kEmptyPtx),
                                       "empty");
    ck_assert_ptr_nonnull(k1);
    ck_assert_ptr_eq(k1, k2);
    ck_assert_uint_eq(fzCudaGetNumCachedModules(cu), 1);
    unsigned one[3] = {1, 1, 1};
    ck_assert(fzCudaLaunch(cu, k1, one, one, 0, NULL));
    ck_assert(fzCudaSynchronize(cu));
    FzCudaPtr p = 0;
    int host[4] = {1, 2, 3, 4}, back[4] = {0};
    ck_assert(fzCudaAlloc(cu, sizeof host, &p));
    ck_assert(fzCudaCopyToDevice(cu, p, host, sizeof host));
    ck_assert(fzCudaCopyToHost(cu, back, p, sizeof back));
    ck_assert_int_eq(memcmp(host, back, sizeof host), 0);
    fzCudaFree(cu, p);
    check_graph(cu);
    fzCudaDestroy(cu);
  } else {
    ck_assert_ptr_null(cu);
    ck_assert_uint_eq(log.numErrors, 1);
    const DiagRecord *r = diag_log_find(&log, "libcuda.so.1");
    ck_assert_ptr_nonnull(r);
  }
  fzCudaDestroy(NULL); /* ignored */
  diag_log_end(&log);
  fzContextDestroy(ctx);
}
END_TEST

START_TEST(test_library_that_is_not_a_driver) {
  setenv("FZ_CUDA_LIBRARY", "libm.so.6", 1);
  char why[512];
  ck_assert(!fzCudaProbe(why, sizeof why));
  ck_assert_msg(strstr(why, "no CUDA driver found (libm.so.6)") &&
                    strstr(why, "'cuInit'"),
                "why: %s", why);
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert_ptr_null(fzCudaCreate(ctx, 0));
  ck_assert_ptr_nonnull(diag_log_find(&log, "libm.so.6"));
  diag_log_end(&log);
  fzContextDestroy(ctx);
  unsetenv("FZ_CUDA_LIBRARY");
}
END_TEST

START_TEST(test_library_that_does_not_exist) {
  setenv("FZ_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  char why[512];
  ck_assert(!fzCudaProbe(why, sizeof why));
  ck_assert_msg(strstr(why, "no CUDA driver found (/nonexistent/libcuda.so.1)"),
                "why: %s", why);
  unsetenv("FZ_CUDA_LIBRARY");
}
END_TEST

int main(void) {
  Suite *s = suite_create("cuda");
  TCase *tc = tcase_create("driver");
  tcase_add_test(tc, test_probe_without_or_with_driver);
  tcase_add_test(tc, test_create_reports_missing_driver);
  tcase_add_test(tc, test_library_that_is_not_a_driver);
  tcase_add_test(tc, test_library_that_does_not_exist);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

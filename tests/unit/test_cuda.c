/* tests/unit/test_cuda.c - Check suite of runtime/cuda.c on any machine:
 * without a driver (the build machines) probing and creating fail with
 * the clear "no CUDA driver found (libcuda.so.1): ..." diagnostic and no
 * crash; a library that is not a CUDA driver (FZ_CUDA_LIBRARY=libm.so.6)
 * is named with the missing entry point. On a machine with a driver and
 * a device, the same tests check that creation works instead, that
 * the module cache loads one PTX text once, that a CUDA graph of three
 * kernel launches runs them in order, and that a kernel with 96 KiB of
 * dynamic shared memory (above the 48 KiB needing no opt-in, like the
 * tensor-core matmuls) runs, launched and in a graph.
 * Against the fake driver of fake_cuda.c (FZ_FAKE_CUDA, when built),
 * which enforces the real driver's shared-memory rules: the runtime opts
 * such kernels in before launching them or building a graph, and names
 * the kernel and the device's limit when the device cannot.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

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

/* Writes its `n` (the dynamic shared bytes it is launched with) into the
 * last word of its dynamic shared memory, reads it back and stores it to
 * *p: n only when the launch had n bytes. */
static const char kBigSmemPtx[] = ".version 7.0\n"
                                  ".target sm_80\n"
                                  ".address_size 64\n"
                                  ".extern .shared .align 16 .b8 dsm[];\n"
                                  ".visible .entry bigsmem(.param .u64 p, "
                                  ".param .u32 n)\n"
                                  "{\n"
                                  "  .reg .b64 %rd<3>;\n"
                                  "  .reg .b32 %r<6>;\n"
                                  "  ld.param.u64 %rd1, [p];\n"
                                  "  cvta.to.global.u64 %rd1, %rd1;\n"
                                  "  ld.param.u32 %r1, [n];\n"
                                  "  add.s32 %r2, %r1, -4;\n"
                                  "  mov.u32 %r3, dsm;\n"
                                  "  add.s32 %r4, %r3, %r2;\n"
                                  "  st.shared.u32 [%r4], %r1;\n"
                                  "  ld.shared.u32 %r5, [%r4];\n"
                                  "  st.global.u32 [%rd1], %r5;\n"
                                  "  ret;\n"
                                  "}\n";

/* bigsmem with 1 KiB of static shared memory as well. */
static const char kMixSmemPtx[] = ".version 7.0\n"
                                  ".target sm_80\n"
                                  ".address_size 64\n"
                                  ".extern .shared .align 16 .b8 dsm[];\n"
                                  ".visible .entry mixsmem(.param .u64 p, "
                                  ".param .u32 n)\n"
                                  "{\n"
                                  "  .shared .align 16 .b8 st[1024];\n"
                                  "  .reg .b64 %rd<3>;\n"
                                  "  .reg .b32 %r<8>;\n"
                                  "  ld.param.u64 %rd1, [p];\n"
                                  "  cvta.to.global.u64 %rd1, %rd1;\n"
                                  "  ld.param.u32 %r1, [n];\n"
                                  "  add.s32 %r2, %r1, -4;\n"
                                  "  mov.u32 %r3, dsm;\n"
                                  "  add.s32 %r4, %r3, %r2;\n"
                                  "  st.shared.u32 [%r4], %r1;\n"
                                  "  mov.u32 %r6, st;\n"
                                  "  st.shared.u32 [%r6], %r1;\n"
                                  "  ld.shared.u32 %r5, [%r4];\n"
                                  "  ld.shared.u32 %r7, [%r6];\n"
                                  "  add.s32 %r5, %r5, %r7;\n"
                                  "  st.global.u32 [%rd1], %r5;\n"
                                  "  ret;\n"
                                  "}\n";

/* Kernel `name` of ptx with n bytes of dynamic shared memory, launched
 * and in a graph; where the driver runs kernels (real), the value it
 * stores must be `want` both times. False when a call failed. */
static bool run_smem(FzCuda *cu, const char *ptx, const char *name,
                     unsigned n, int want, bool real) {
  FzCudaKernel *k = fzCudaGetKernel(cu, ptx, strlen(ptx), name);
  if (!k)
    return false;
  unsigned one[3] = {1, 1, 1};
  FzCudaPtr p = 0;
  int zero = 0, back = -1;
  bool ok = fzCudaAlloc(cu, sizeof zero, &p) &&
            fzCudaCopyToDevice(cu, p, &zero, sizeof zero);
  void *args[2] = {&p, &n};
  ok = ok && fzCudaLaunch(cu, k, one, one, n, args) && fzCudaSynchronize(cu) &&
       fzCudaCopyToHost(cu, &back, p, sizeof back);
  if (ok && real)
    ck_assert_int_eq(back, want);
  if (ok)
    ok = fzCudaCopyToDevice(cu, p, &zero, sizeof zero);
  void **perKernel[1] = {args};
  FzCudaGraph *g = ok ? fzCudaGraphCreate(cu, 1, &k,
                                          (const unsigned(*)[3])&one,
                                          (const unsigned(*)[3])&one, &n,
                                          perKernel)
                      : NULL;
  ok = g && fzCudaGraphLaunch(cu, g) && fzCudaSynchronize(cu) &&
       fzCudaCopyToHost(cu, &back, p, sizeof back);
  if (ok && real)
    ck_assert_int_eq(back, want);
  fzCudaGraphDestroy(cu, g);
  fzCudaFree(cu, p);
  return ok;
}

/* bigsmem with 96 KiB (stores n). */
static bool run_big_smem(FzCuda *cu, bool real) {
  return run_smem(cu, kBigSmemPtx, "bigsmem", 96 * 1024, 96 * 1024, real);
}

/* mixsmem with exactly 48 KiB of dynamic shared memory: with its 1 KiB
 * of static memory that needs the opt-in (the driver's 48 KiB limit is
 * on the sum). It stores 2n. */
static bool run_mix_smem(FzCuda *cu, bool real) {
  return run_smem(cu, kMixSmemPtx, "mixsmem", 48 * 1024, 2 * 48 * 1024,
                  real);
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
    ck_assert_int_ge(fzCudaGetSharedMemoryOptin(cu), 96 * 1024);
    ck_assert(run_big_smem(cu, true));
    ck_assert(run_mix_smem(cu, true));
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

/*===--- Against the fake driver (tests/unit/fake_cuda.c) ---------------===*/

#ifdef FZ_FAKE_CUDA
/* The fake driver when it was built here (not on a GPU machine that
 * runs a carried test_cuda), else NULL: the tests below then pass
 * without checking anything. */
static const char *fake_driver(void) {
  return access(FZ_FAKE_CUDA, R_OK) == 0 ? FZ_FAKE_CUDA : NULL;
}
#else
static const char *fake_driver(void) { return NULL; }
#endif

typedef int (*LoadFn)(void **, const void *, unsigned, int *, void **);
typedef int (*GetFn)(void **, void *, const char *);
typedef int (*SetAttrFn)(void *, int, int);
typedef int (*LaunchFn)(void *, unsigned, unsigned, unsigned, unsigned,
                        unsigned, unsigned, unsigned, void *, void **,
                        void **);
typedef int (*UnloadFn)(void *);

/* The fake refuses what the driver refuses: a launch with 96 KiB of
 * dynamic shared memory before the function opted in (so the runtime's
 * successes below mean something), and an opt-in above the limit. */
START_TEST(test_fake_driver_rules) {
  const char *path = fake_driver();
  if (!path)
    return;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_ptr_nonnull(h);
  LoadFn load;
  GetFn get;
  SetAttrFn set;
  LaunchFn launch;
  UnloadFn unload;
  void *sym = dlsym(h, "cuModuleLoadDataEx");
  memcpy(&load, &sym, sizeof sym);
  sym = dlsym(h, "cuModuleGetFunction");
  memcpy(&get, &sym, sizeof sym);
  sym = dlsym(h, "cuFuncSetAttribute");
  memcpy(&set, &sym, sizeof sym);
  sym = dlsym(h, "cuLaunchKernel");
  memcpy(&launch, &sym, sizeof sym);
  sym = dlsym(h, "cuModuleUnload");
  memcpy(&unload, &sym, sizeof sym);
  ck_assert(load && get && set && launch && unload);
  void *mod = NULL, *f = NULL;
  ck_assert_int_eq(load(&mod, kBigSmemPtx, 0, NULL, NULL), 0);
  ck_assert_int_eq(get(&f, mod, "bigsmem"), 0);
  ck_assert_int_ne(get(&f, mod, "absent"), 0);
  ck_assert_int_eq(launch(f, 1, 1, 1, 1, 1, 1, 48 * 1024, NULL, NULL, NULL),
                   0);
  ck_assert_int_ne(launch(f, 1, 1, 1, 1, 1, 1, 96 * 1024, NULL, NULL, NULL),
                   0);
  ck_assert_int_ne(set(f, 8, 300 * 1024), 0);
  ck_assert_int_eq(set(f, 8, 96 * 1024), 0);
  ck_assert_int_eq(launch(f, 1, 1, 1, 1, 1, 1, 96 * 1024, NULL, NULL, NULL),
                   0);
  ck_assert_int_eq(unload(mod), 0);
  dlclose(h);
}
END_TEST

/* Through the runtime: the kernel opts in before the launch and before
 * the graph. */
START_TEST(test_shared_memory_opt_in) {
  const char *path = fake_driver();
  if (!path)
    return;
  setenv("FZ_CUDA_LIBRARY", path, 1);
  unsetenv("FZ_FAKE_CUDA_OPTIN");
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzCuda *cu = fzCudaCreate(ctx, 0);
  ck_assert_ptr_nonnull(cu);
  ck_assert_int_eq(fzCudaGetSharedMemoryOptin(cu), 227 * 1024);
  ck_assert(run_big_smem(cu, false));
  ck_assert(run_mix_smem(cu, false));
  ck_assert_uint_eq(log.numErrors, 0);
  fzCudaDestroy(cu);
  diag_log_end(&log);
  fzContextDestroy(ctx);
  unsetenv("FZ_CUDA_LIBRARY");
}
END_TEST

/* A device whose opt-in limit is below the kernel's needs: a clear
 * error naming the kernel, its bytes and the limit; nothing launched. */
START_TEST(test_shared_memory_over_the_limit) {
  const char *path = fake_driver();
  if (!path)
    return;
  setenv("FZ_CUDA_LIBRARY", path, 1);
  setenv("FZ_FAKE_CUDA_OPTIN", "65536", 1);
  FzContext *ctx = new_context();
  DiagLog log;
  diag_log_begin(&log, ctx);
  FzCuda *cu = fzCudaCreate(ctx, 0);
  ck_assert_ptr_nonnull(cu);
  ck_assert(!run_big_smem(cu, false));
  ck_assert_uint_ge(log.numErrors, 1);
  const DiagRecord *r = diag_log_find(&log, "kernel 'bigsmem' needs 98304 "
                                            "bytes of dynamic shared memory");
  ck_assert_ptr_nonnull(r);
  ck_assert_ptr_nonnull(diag_log_find(&log, "allows at most 65536 per block"));
  /* 48 KiB of dynamic and 1 KiB of static memory: above 48 KiB in all,
   * within this device's 64 KiB after the opt-in. */
  ck_assert(run_mix_smem(cu, false));
  /* 48 KiB needs no opt-in. */
  FzCudaKernel *k =
      fzCudaGetKernel(cu, kBigSmemPtx, strlen(kBigSmemPtx), "bigsmem");
  ck_assert(fzCudaKernelAllowSharedMemory(cu, k, 48 * 1024));
  fzCudaDestroy(cu);
  diag_log_end(&log);
  fzContextDestroy(ctx);
  unsetenv("FZ_FAKE_CUDA_OPTIN");
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
  tcase_add_test(tc, test_fake_driver_rules);
  tcase_add_test(tc, test_shared_memory_opt_in);
  tcase_add_test(tc, test_shared_memory_over_the_limit);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

/* tests/unit/test_gpu_plan.c - Check suite of the GPU launch plans that
 * fzGpuCompile returns (FzGpuKernel): the mapping lower-loop-to-kernel
 * chooses for each nest (lowering/loop_to_kernel/plan.c, docs/codegen.md
 * "GPU mappings"): threads per row or column, block size and grid size,
 * for the shapes the heuristic documents; and the launch list extracted
 * from a kernel-level module written by hand (lowering/nvptx/launches.c):
 * 3-d sizes, dynamic shared memory, buffer and constant scalar
 * arguments, temporaries, and the errors. No GPU is needed (PTX only).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fz/fz.h"
#include "fz/gpu.h"
#include "fz/kernel.h"
#include "fz/loop.h"
#include "tests/unit/test_helpers.h"

typedef struct Compiled {
  FzContext *ctx;
  FzOp *module;
  FzGpuProgram *prog;
} Compiled;

/* Parses src (graph level), lowers it to loops and compiles it for
 * sm_90. */
static Compiled compile(const char *src) {
  Compiled c;
  c.ctx = fzContextCreate();
  ck_assert_ptr_nonnull(c.ctx);
  ck_assert(fzRegisterAllDialects(c.ctx));
  ck_assert(fzRegisterAllPasses(c.ctx));
  c.module = fzParseSource(c.ctx, fzStringRefFromCString(src),
                           FZ_STR("t.fuse"), 0);
  ck_assert_ptr_nonnull(c.module);
  FzCpuPipelineOptions po;
  fzCpuPipelineOptionsInit(&po);
  ck_assert(fzLowerModuleForCpu(c.module, &po));
  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  c.prog = fzGpuCompile(c.module, &go);
  ck_assert_ptr_nonnull(c.prog);
  return c;
}

static void release(Compiled *c) {
  fzGpuProgramDestroy(c->prog);
  fzOpDestroy(c->module);
  fzContextDestroy(c->ctx);
}

static const FzGpuKernel *only_kernel(const Compiled *c) {
  const FzGpuFunction *f = fzGpuProgramLookup(c->prog, "main");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(f->numKernels, 1);
  return &f->kernels[0];
}

static void check(const char *src, const char *mapping, unsigned group,
                  unsigned blockSize, int64_t blocks) {
  Compiled c = compile(src);
  const FzGpuKernel *k = only_kernel(&c);
  ck_assert_str_eq(k->mapping, mapping);
  ck_assert_uint_eq(k->block[0], blockSize);
  ck_assert_uint_eq(k->block[1] * k->block[2], 1);
  ck_assert_int_eq(k->grid[0], blocks);
  ck_assert_uint_eq(k->grid[1] * k->grid[2], 1);
  ck_assert_ptr_nonnull(k->plan);
  ck_assert(strstr(k->plan, mapping) == k->plan);
  /* Threads per row (column) as the plan says them. */
  if (strcmp(mapping, "elementwise") != 0) {
    char want[64];
    snprintf(want, sizeof want, "%u threads per %s", group,
             strcmp(mapping, "rows") == 0 ? "row" : "column");
    ck_assert_msg(strstr(k->plan, want) != NULL, "plan: %s", k->plan);
  }
  /* The plan heads the PTX as a comment. */
  ck_assert(strncmp(c.prog->ptx, "// fuse: main_k0: ", 18) == 0);
  release(&c);
}

#define SOFTMAX(R, N)                                                         \
  "func.func @main(%x: tensor<" #R "x" #N "xf32>) -> tensor<" #R "x" #N     \
  "xf32> {\n"                                                                 \
  "  %0 = graph.softmax %x {axis = 1 : i64} : tensor<" #R "x" #N "xf32>\n"   \
  "  return %0 : tensor<" #R "x" #N "xf32>\n}\n"

START_TEST(test_softmax_rows_by_length) {
  /* 4 chunks of 16 bytes per thread: N/16 threads per row. */
  check(SOFTMAX(64, 1024), "rows", 64, 64, 64);
  check(SOFTMAX(64, 4096), "rows", 256, 256, 64);
  check(SOFTMAX(8, 65536), "rows", 1024, 1024, 8);
  /* Rows up to 512 elements: a warp or less, several rows per block. */
  check(SOFTMAX(64, 512), "rows", 32, 256, 8);
  check(SOFTMAX(37, 20), "rows", 2, 256, 1);
  /* N not a multiple of 4: one element per chunk. */
  check(SOFTMAX(5, 1001), "rows", 256, 256, 5);
}
END_TEST

START_TEST(test_reductions) {
  check("func.func @main(%x: tensor<300x257xf32>) -> tensor<300xf32> {\n"
        "  %0 = graph.reduce_sum %x {axes = array<i64: 1>} : "
        "tensor<300x257xf32> -> tensor<300xf32>\n"
        "  return %0 : tensor<300xf32>\n}\n",
        "rows", 128, 128, 300);
  /* Column sums: 32 columns per block, 32 threads on each column's rows
   * (few columns: the whole GPU is filled by splitting the rows). */
  check("func.func @main(%x: tensor<4000x100xf32>) -> tensor<100xf32> {\n"
        "  %0 = graph.reduce_sum %x {axes = array<i64: 0>} : "
        "tensor<4000x100xf32> -> tensor<100xf32>\n"
        "  return %0 : tensor<100xf32>\n}\n",
        "columns", 32, 1024, 4);
  /* Many columns: fewer threads per column (at least 4). */
  check("func.func @main(%x: tensor<64x65536xf32>) -> tensor<65536xf32> {\n"
        "  %0 = graph.reduce_max %x {axes = array<i64: 0>} : "
        "tensor<64x65536xf32> -> tensor<65536xf32>\n"
        "  return %0 : tensor<65536xf32>\n}\n",
        "columns", 4, 128, 2048);
}
END_TEST

START_TEST(test_elementwise) {
  /* Four f32 iterations per thread, 256-thread blocks. */
  check("func.func @main(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {\n"
        "  %0 = graph.relu %x : tensor<64x128xf32>\n"
        "  return %0 : tensor<64x128xf32>\n}\n",
        "elementwise", 1, 256, 8);
}
END_TEST

/* fzKernelWrapSequentialNests (lowering/loop_to_kernel) keeps the
 * semantics: the wrapped loop module, run by the loop interpreter on
 * random inputs, matches the graph interpreter; and each former
 * top-level nest is its own one-iteration kernel. */
START_TEST(test_sequential_nests) {
  const char *src =
      "func.func @main(%x: tensor<16x24xf32>, %y: tensor<40xf32>) -> "
      "(tensor<16x24xf32>, tensor<f32>) {\n"
      "  %m = graph.reduce_mean %x {axes = array<i64: 0, 1>} : "
      "tensor<16x24xf32> -> tensor<f32>\n"
      "  %0 = graph.sub %x, %m : tensor<16x24xf32>, tensor<f32> -> "
      "tensor<16x24xf32>\n"
      "  %1 = graph.mul %y, %y : tensor<40xf32>, tensor<40xf32> -> "
      "tensor<40xf32>\n"
      "  %2 = graph.reduce_sum %1 {axes = array<i64: 0>} : tensor<40xf32> "
      "-> tensor<f32>\n"
      "  return %0, %2 : tensor<16x24xf32>, tensor<f32>\n}\n";
  FzContext *ctx = fzContextCreate();
  ck_assert_ptr_nonnull(ctx);
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  FzOp *module = fzParseSource(ctx, fzStringRefFromCString(src),
                               FZ_STR("t.fuse"), 0);
  ck_assert_ptr_nonnull(module);
  FzOp *func = fzSymbolTableLookupIn(module, FZ_STR("main"));
  ck_assert_ptr_nonnull(func);
  int64_t xs[2] = {16, 24}, ys[1] = {40};
  FzTensor *in[2] = {fzTensorCreate(ctx, fzF32TypeGet(ctx), 2, xs),
                     fzTensorCreate(ctx, fzF32TypeGet(ctx), 1, ys)};
  unsigned seed = 7;
  for (size_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < in[k]->numElements; ++i) {
      seed = seed * 1103515245u + 12345u;
      fzTensorSetF64(in[k], i, (double)(seed >> 8) / (1 << 24) * 4 - 2);
    }
  size_t nRef = 0, nGot = 0;
  FzTensor **ref = NULL, **got = NULL;
  ck_assert(fzInterpretFunction(func, 2, in, NULL, &nRef, &ref));

  FzCpuPipelineOptions po;
  fzCpuPipelineOptionsInit(&po);
  ck_assert(fzLowerModuleForCpu(module, &po));
  ck_assert(fzKernelWrapSequentialNests(module));
  ck_assert(fzOpVerify(module));
  /* Nothing sequential is left at the top level. */
  FzBlock *body = fzRegionGetFirstBlock(fzOpGetRegion(func, 0));
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op))
    ck_assert(fzLoopGetOpcode(op) != FZ_LOOP_OP_FOR &&
              fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE);
  ck_assert(fzLoopRunFunction(func, 2, in, NULL, NULL, &nGot, &got));
  ck_assert_uint_eq(nGot, nRef);
  for (size_t k = 0; k < nRef; ++k) {
    ck_assert_int_eq(got[k]->numElements, ref[k]->numElements);
    for (int64_t i = 0; i < ref[k]->numElements; ++i) {
      double a = fzTensorGetF64(got[k], i), e = fzTensorGetF64(ref[k], i);
      ck_assert_double_eq_tol(a, e, 1e-5 + 1e-5 * fabs(e));
    }
  }

  FzGpuOptions go;
  fzGpuOptionsInit(&go);
  FzGpuProgram *prog = fzGpuCompile(module, &go);
  ck_assert_ptr_nonnull(prog);
  const FzGpuFunction *f = fzGpuProgramLookup(prog, "main");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(f->numTemps, 2); /* the two scalars */
  size_t single = 0;
  for (size_t k = 0; k < f->numKernels; ++k)
    single += f->kernels[k].grid[0] == 1 &&
              !strcmp(f->kernels[k].mapping, "elementwise") &&
              strstr(f->kernels[k].plan, ": 1 iterations") != NULL;
  ck_assert_uint_ge(single, 1);
  fzGpuProgramDestroy(prog);
  fzTensorArrayDestroy(ctx, nRef, ref);
  fzTensorArrayDestroy(ctx, nGot, got);
  fzTensorDestroy(in[0]);
  fzTensorDestroy(in[1]);
  fzOpDestroy(module);
  fzContextDestroy(ctx);
}
END_TEST

/* A kernel-level module: its launches become the function's launch list
 * as they are written. */
START_TEST(test_launch_plan) {
  const char *src =
      "kernel.func @k(%x: buffer<64xf32>, %s: f32, %n: index, "
      "%t: buffer<4x4xf32>) {\n"
      "  kernel.return\n"
      "}\n"
      "kernel.func @copy(%t: buffer<4x4xf32>, %y: buffer<64xf32>, "
      "%h: bf16) {\n"
      "  %c0 = loop.constant 0 : index\n"
      "  %v = loop.load %t[%c0, %c0] : buffer<4x4xf32>\n"
      "  loop.store %v, %y[%c0] : buffer<64xf32>\n"
      "  kernel.return\n"
      "}\n"
      "func.func @main(%x: buffer<64xf32>, %y: buffer<64xf32>) attributes "
      "{loop.num_outputs = 1 : i64} {\n"
      "  %t = loop.alloc() : buffer<4x4xf32>\n"
      "  %c1 = loop.constant 1 : index\n"
      "  %c2 = loop.constant 2 : index\n"
      "  %c3 = loop.constant 3 : index\n"
      "  %c32 = loop.constant 32 : index\n"
      "  %c64 = loop.constant 64 : index\n"
      "  %s = loop.constant 1.5 : f32\n"
      "  %h = loop.constant -2.0 : bf16\n"
      "  %n = loop.muli %c32, %c3 : index\n"
      "  kernel.launch @k blocks(%c2, %c3, %c1) threads(%c32, %c2, %c1) "
      "shared(%c64) args(%x, %s, %n, %t) : buffer<64xf32>, f32, index, "
      "buffer<4x4xf32>\n"
      "  kernel.launch @copy blocks(%c1, %c1, %c1) threads(%c64, %c1, %c1) "
      "shared(%c1) args(%t, %y, %h) : buffer<4x4xf32>, buffer<64xf32>, "
      "bf16\n"
      "  loop.dealloc %t : buffer<4x4xf32>\n"
      "  return\n"
      "}\n";
  FzContext *ctx = fzContextCreate();
  ck_assert(fzRegisterAllDialects(ctx));
  ck_assert(fzRegisterAllPasses(ctx));
  FzOp *module = fzParseSource(ctx, fzStringRefFromCString(src),
                               FZ_STR("t.fuse"), 0);
  ck_assert_ptr_nonnull(module);
  FzGpuProgram *prog = fzGpuCompile(module, NULL);
  ck_assert_ptr_nonnull(prog);
  const FzGpuFunction *f = fzGpuProgramLookup(prog, "main");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(f->numArgs, 2);
  ck_assert_uint_eq(f->numOutputs, 1);
  ck_assert_uint_eq(f->numTemps, 1);
  ck_assert_int_eq(f->tempBytes[0], 64);
  ck_assert_uint_eq(f->numKernels, 2);
  const FzGpuKernel *k = &f->kernels[0];
  ck_assert_str_eq(k->name, "k");
  ck_assert_str_eq(k->mapping, "kernel");
  ck_assert_ptr_null(k->plan);
  unsigned grid[3] = {2, 3, 1}, block[3] = {32, 2, 1};
  for (int d = 0; d < 3; ++d) {
    ck_assert_uint_eq(k->grid[d], grid[d]);
    ck_assert_uint_eq(k->block[d], block[d]);
  }
  ck_assert_uint_eq(k->sharedBytes, 64);
  ck_assert_uint_eq(k->numArgs, 4);
  ck_assert_int_eq(k->args[0].kind, FZ_GPU_ARG_BUFFER);
  ck_assert_uint_eq(k->args[0].root, 0);
  ck_assert_int_eq(k->args[1].kind, FZ_GPU_ARG_SCALAR);
  ck_assert_uint_eq(k->args[1].size, 4);
  float s;
  memcpy(&s, &k->args[1].bits, 4);
  ck_assert(s == 1.5f);
  ck_assert_int_eq(k->args[2].kind, FZ_GPU_ARG_SCALAR);
  ck_assert_uint_eq(k->args[2].size, 8);
  ck_assert_uint_eq(k->args[2].bits, 96); /* folded at the host level */
  ck_assert_int_eq(k->args[3].kind, FZ_GPU_ARG_BUFFER);
  ck_assert_uint_eq(k->args[3].root, 2); /* the temporary */
  ck_assert_int_eq(k->bytesMoved, 0);    /* @k touches nothing */
  const FzGpuKernel *c = &f->kernels[1];
  ck_assert_str_eq(c->name, "copy");
  ck_assert_uint_eq(c->args[2].size, 2);
  ck_assert_uint_eq(c->args[2].bits, 0xC000); /* bf16 -2.0 */
  ck_assert_int_eq(c->bytesMoved, 64 + 256);
  /* maxntid from the launch; the header comment lines. */
  ck_assert_ptr_nonnull(strstr(prog->ptx, ".maxntid 32, 2, 1"));
  ck_assert_ptr_nonnull(strstr(prog->ptx, "// fuse: k: launch grid (2, 3, "
                                          "1), block (32, 2, 1), shared 64"));
  fzGpuProgramDestroy(prog);

  /* A size that is not a constant at the host level is an error at the
   * launch. */
  FzOp *bad = fzParseSource(
      ctx,
      FZ_STR("kernel.func @k() {\n"
             "  kernel.return\n"
             "}\n"
             "func.func @main(%x: buffer<64xf32>) attributes "
             "{loop.num_outputs = 0 : i64} {\n"
             "  %c1 = loop.constant 1 : index\n"
             "  %n = loop.dim %x, 0 : buffer<64xf32>\n"
             "  kernel.launch @k blocks(%n, %c1, %c1) threads(%c1, %c1, %c1) "
             "shared(%c1) args()\n"
             "  return\n"
             "}\n"),
      FZ_STR("bad.fuse"), 0);
  ck_assert_ptr_nonnull(bad);
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert_ptr_null(fzGpuCompile(bad, NULL));
  diag_log_end(&log);
  const DiagRecord *r = diag_log_find(&log, "the grid x of this launch is "
                                            "not a constant at the host "
                                            "level");
  ck_assert_ptr_nonnull(r);
  ck_assert_uint_eq(r->line, 7);
  fzOpDestroy(bad);
  fzOpDestroy(module);
  fzContextDestroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpu_plan");
  TCase *tc = tcase_create("plan");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_softmax_rows_by_length);
  tcase_add_test(tc, test_reductions);
  tcase_add_test(tc, test_elementwise);
  tcase_add_test(tc, test_sequential_nests);
  tcase_add_test(tc, test_launch_plan);
  suite_add_tcase(s, tc);
  return run_suite(s);
}

/* tests/unit/test_small_m.c - Check suite of the small-M contraction
 * mapping (lowering/loop_to_kernel/small_m*.c): the matcher on
 * hand-written loop nests (what it records for both layouts, a rank-1 x,
 * x of two row dims; every refusal with its reason), the shapes chosen by
 * size and forced, the k split (the two nests and their temporary), and
 * the pass under failing allocations (an error, never a crash or a
 * leak). Whole kernels against the interpreters are lit tests
 * (tests/lit/gpu/small-m.fuse).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz/kernel.h"
#include "fz/pass.h"
#include "lowering/loop_to_kernel/small_m.h"
#include "tests/unit/test_helpers.h"

/* x [M, K] @ W (bf16) + bias, relu; W [K, N] or, transposed, [N, K]. */
static char *nest_src(int M, int N, int K, const char *t, bool trans) {
  char w[64], wi[32];
  if (trans)
    snprintf(w, sizeof w, "%dx%dx%s", N, K, t), snprintf(wi, sizeof wi,
                                                         "%%j, %%k");
  else
    snprintf(w, sizeof w, "%dx%dx%s", K, N, t), snprintf(wi, sizeof wi,
                                                         "%%k, %%j");
  bool f32 = strcmp(t, "f32") == 0;
  char *s = malloc(4096);
  ck_assert_ptr_nonnull(s);
  snprintf(
      s, 4096,
      "func.func @f(%%X: buffer<%dx%dx%s>, %%W: buffer<%s>, %%bias: "
      "buffer<%dxf32>, %%C: buffer<%dx%dxf32>) attributes "
      "{loop.num_outputs = 1 : i64} {\n"
      "  %%c0 = loop.constant 0 : index\n"
      "  %%c1 = loop.constant 1 : index\n"
      "  %%cm = loop.constant %d : index\n"
      "  %%cn = loop.constant %d : index\n"
      "  %%ck = loop.constant %d : index\n"
      "  %%z = loop.constant 0.000000e+00 : f32\n"
      "  loop.parallel (%%i, %%j) = (%%c0, %%c0) to (%%cm, %%cn) step (%%c1, "
      "%%c1) {\n"
      "    %%acc = loop.for %%k = %%c0 to %%ck step %%c1 iter_args(%%s = "
      "%%z) -> (f32) {\n"
      "      %%a = loop.load %%X[%%i, %%k] : buffer<%dx%dx%s>\n"
      "%s"
      "      %%b = loop.load %%W[%s] : buffer<%s>\n"
      "%s"
      "      %%p = loop.mulf %%af, %%bf : f32\n"
      "      %%s2 = loop.addf %%s, %%p : f32\n"
      "      loop.yield %%s2 : f32\n"
      "    }\n"
      "    %%bb = loop.load %%bias[%%j] : buffer<%dxf32>\n"
      "    %%x = loop.addf %%acc, %%bb : f32\n"
      "    %%y = loop.maxf %%x, %%z : f32\n"
      "    loop.store %%y, %%C[%%i, %%j] : buffer<%dx%dxf32>\n"
      "    loop.yield\n"
      "  }\n"
      "  return\n"
      "}\n",
      M, K, t, w, N, M, N, M, N, K, M, K, t,
      f32 ? "      %af = loop.addf %a, %z : f32\n"
          : "      %af = loop.extf %a : bf16 to f32\n",
      wi, w,
      f32 ? "      %bf = loop.addf %b, %z : f32\n"
          : "      %bf = loop.extf %b : bf16 to f32\n",
      N, M, N);
  return s;
}

static FzBlock *body_of(FzOp *m) {
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("f"));
  ck_assert_ptr_nonnull(f);
  return fzRegionGetFirstBlock(fzOpGetRegion(f, 0));
}

static FzOp *first_nest(FzOp *m) {
  for (FzOp *op = fzBlockGetFirstOp(body_of(m)); op;
       op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_PARALLEL)
      return op;
  ck_abort_msg("no loop.parallel");
  return NULL;
}

/* The "%a + 0.0" stand-ins of nest_src's f32 form are not plain loads:
 * an f32 nest loads straight into the product. */
static char *f32_nest(int M, int N, int K, bool trans) {
  char *s = nest_src(M, N, K, "f32", trans);
  char *t = text_replace(s, "      %af = loop.addf %a, %z : f32\n", "");
  free(s);
  s = text_replace(t, "      %bf = loop.addf %b, %z : f32\n", "");
  free(t);
  t = text_replace(s, "%p = loop.mulf %af, %bf", "%p = loop.mulf %a, %b");
  free(s);
  return t;
}

/*===--- The matcher ----------------------------------------------------===*/

START_TEST(test_match_layouts) {
  FzContext *ctx = ctx_with_kernel();
  for (int trans = 0; trans < 2; ++trans) {
    char *s = nest_src(4, 48, 64, "bf16", trans);
    FzOp *m = parse_verified(ctx, s);
    FzSmallMNest n;
    char why[256] = "";
    ck_assert_msg(fzSmallMMatch(first_nest(m), &n, why, sizeof why), "%s",
                  why);
    ck_assert_int_eq(n.M, 4);
    ck_assert_int_eq(n.N, 48);
    ck_assert_int_eq(n.K, 64);
    ck_assert_int_eq(n.sliceK, 64);
    ck_assert_int_eq(n.dimN, 1);
    ck_assert_int_eq(n.dimSplit, -1);
    ck_assert(n.kContig == (trans == 1));
    ck_assert_ptr_eq(n.w.buffer, fzBlockGetArgument(body_of(m), 1));
    ck_assert_ptr_eq(n.x.buffer, fzBlockGetArgument(body_of(m), 0));
    ck_assert(fzTypeGetKind(n.w.elt) == FZ_TYPE_BF16);
    ck_assert(n.w.aligned && n.x.aligned);
    ck_assert_int_eq(n.x.idx[0].dim, 0);
    ck_assert_int_eq(n.x.idx[1].dim, FZ_SMALL_M_K);
    fzOpDestroy(m);
    free(s);
  }
  /* f32, no extf; the product written W * x. */
  char *s = f32_nest(3, 40, 32, true);
  char *t = text_replace(s, "%p = loop.mulf %a, %b", "%p = loop.mulf %b, %a");
  FzOp *m = parse_verified(ctx, t);
  FzSmallMNest n;
  ck_assert(fzSmallMMatch(first_nest(m), &n, NULL, 0));
  ck_assert(n.kContig && n.M == 3 && n.N == 40 && n.K == 32);
  ck_assert(fzTypeGetKind(n.x.elt) == FZ_TYPE_F32);
  ck_assert_ptr_eq(n.w.buffer, fzBlockGetArgument(body_of(m), 1));
  fzOpDestroy(m);
  free(s);
  free(t);
  fzContextDestroy(ctx);
}
END_TEST

/* x @ W where W is 1 column wide and x's rows are many: W is the wider
 * operand's (y = W x with x a column). */
START_TEST(test_match_orientation) {
  FzContext *ctx = ctx_with_kernel();
  /* out[i, j] = sum_k X[i, k] W[k, j], i: 64, j: 1. */
  char *s = nest_src(64, 1, 32, "bf16", false);
  FzOp *m = parse_verified(ctx, s);
  FzSmallMNest n;
  ck_assert(fzSmallMMatch(first_nest(m), &n, NULL, 0));
  ck_assert_int_eq(n.dimN, 0); /* X's rows are the columns */
  ck_assert_int_eq(n.M, 1);
  ck_assert_int_eq(n.N, 64);
  ck_assert(n.kContig);
  fzOpDestroy(m);
  free(s);
  /* Both 16 wide: W stays the operand of the output's last dim. */
  s = nest_src(24, 16, 32, "bf16", false);
  m = parse_verified(ctx, s);
  ck_assert(fzSmallMMatch(first_nest(m), &n, NULL, 0));
  ck_assert_int_eq(n.dimN, 1);
  ck_assert_int_eq(n.M, 24);
  FzLoopToKernelOptions o;
  fzLoopToKernelOptionsInit(&o);
  FzSmallMShape sh;
  bool bad = true;
  char why[256] = "";
  ck_assert(!fzSmallMChoose(&n, &o, &sh, &bad, why, sizeof why));
  ck_assert(!bad);
  ck_assert_msg(strstr(why, "24 rows (the small-M mapping takes up to 16)"),
                "%s", why);
  fzOpDestroy(m);
  free(s);
  fzContextDestroy(ctx);
}
END_TEST

typedef struct Case {
  const char *from, *to, *reason;
} Case;

static const Case kRefused[] = {
    {"iter_args(%s = %z)", "iter_args(%s = %c1f)",
     "one f32 accumulator from 0.0"},
    {"loop.for %k = %c0 to %ck step %c1", "loop.for %k = %c1 to %ck step %c1",
     "the reduction loop is not 0..K"},
    {"%s2 = loop.addf %s, %p : f32", "%s2 = loop.maxf %s, %p : f32",
     "the reduction is not a sum"},
    {"%s2 = loop.addf %s, %p : f32", "%s2 = loop.addf %s, %af : f32",
     "does not add a product"},
    {"%s2 = loop.addf %s, %p : f32",
     "%s3 = loop.mulf %p, %p : f32\n      %s2 = loop.addf %s, %p : f32",
     "computes more than x * W"},
    {"%af = loop.extf %a : bf16 to f32",
     "%a1 = loop.extf %a : bf16 to f32\n      %af = loop.negf %a1 : f32",
     "not two loads"},
    {"%a = loop.load %X[%i, %k]", "%a = loop.load %X[%j, %k]",
     "x uses W's column index"},
    {"%a = loop.load %X[%i, %k]", "%a = loop.load %X[%k, %k]",
     "indexed by k, loop indices and constants"},
    {"%b = loop.load %W[%k, %j]", "%b = loop.load %W[%k, %k]",
     "indexed by k, loop indices and constants"},
    {"    loop.store %y, %C[%i, %j] : buffer<4x48xf32>\n",
     "    loop.store %y, %C[%i, %j] : buffer<4x48xf32>\n"
     "    %w0 = loop.truncf %y : f32 to bf16\n"
     "    loop.store %w0, %W[%i, %j] : buffer<64x48xbf16>\n",
     "the nest writes x or W"},
    {"    %bb = loop.load %bias[%j] : buffer<48xf32>\n",
     "    %old = loop.load %C[%i, %c0] : buffer<4x48xf32>\n"
     "    %bb = loop.load %bias[%j] : buffer<48xf32>\n",
     "reads a buffer the nest writes, at other indices"},
    {"    %bb = loop.load %bias[%j] : buffer<48xf32>\n",
     "    loop.barrier\n    %bb = loop.load %bias[%j] : buffer<48xf32>\n",
     "'loop.barrier', which the epilogue does not take"},
    {"    loop.store %y, %C[%i, %j] : buffer<4x48xf32>\n", "",
     "stores no use of the sum"},
    {"    %bb = loop.load %bias[%j] : buffer<48xf32>\n",
     "    %r = loop.for %q = %c0 to %c1 step %c1 iter_args(%u = %z) -> (f32) "
     "{\n      loop.yield %u : f32\n    }\n"
     "    %bb = loop.load %bias[%j] : buffer<48xf32>\n",
     "more than one loop"},
    {"loop.parallel (%i, %j) = (%c0, %c0) to (%cm, %cn) step (%c1, %c1)",
     "loop.parallel (%i, %j) = (%c0, %c1) to (%cm, %cn) step (%c1, %c1)",
     "bounds are not constants 0..N step 1"},
};

START_TEST(test_match_refused) {
  FzContext *ctx = ctx_with_kernel();
  char *base = nest_src(4, 48, 64, "bf16", false);
  char *withC1 = text_replace(base, "  %z = loop.constant 0.000000e+00 : f32\n",
                         "  %z = loop.constant 0.000000e+00 : f32\n"
                         "  %c1f = loop.constant 1.000000e+00 : f32\n");
  for (size_t c = 0; c < sizeof kRefused / sizeof kRefused[0]; ++c) {
    char *s = text_replace(withC1, kRefused[c].from, kRefused[c].to);
    FzOp *m = parse_verified(ctx, s);
    FzSmallMNest n;
    char why[256] = "";
    ck_assert_msg(!fzSmallMMatch(first_nest(m), &n, why, sizeof why),
                  "case %zu was accepted", c);
    ck_assert_msg(strstr(why, kRefused[c].reason), "case %zu: got '%s'", c,
                  why);
    fzOpDestroy(m);
    free(s);
  }
  free(withC1);
  free(base);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Shapes -----------------------------------------------------------===*/

/* fzSmallMChoose on the nest of nest_src (f32_nest for f32) with the
 * forced shape `force` (NULL: none): true with *sh, or false with the
 * reason in why[256] and *bad. */
static bool try_choose(FzContext *ctx, int M, int N, int K, const char *t,
                       bool trans, const char *force, FzSmallMShape *sh,
                       bool *bad, char *why) {
  char *s = strcmp(t, "f32") ? nest_src(M, N, K, t, trans)
                             : f32_nest(M, N, K, trans);
  FzOp *m = parse_verified(ctx, s);
  FzSmallMNest n;
  ck_assert(fzSmallMMatch(first_nest(m), &n, NULL, 0));
  FzLoopToKernelOptions o;
  fzLoopToKernelOptionsInit(&o);
  o.smallMShape = force;
  why[0] = 0;
  bool ok = fzSmallMChoose(&n, &o, sh, bad, why, 256);
  fzOpDestroy(m);
  free(s);
  return ok;
}

static FzSmallMShape choose(FzContext *ctx, int M, int N, int K,
                            const char *t, bool trans, const char *force) {
  FzSmallMShape sh;
  bool bad;
  char why[256];
  ck_assert_msg(try_choose(ctx, M, N, K, t, trans, force, &sh, &bad, why),
                "%s", why);
  return sh;
}

/* A shape chosen, and the numbers expected (-1: not looked at). */
typedef struct ShapeCase {
  int M, N, K;
  const char *type;
  bool trans;
  const char *force;
  int vec, xvec, cols, unroll, splitWarps;
  int64_t blocks, splitBlocks, sliceK, sharedBytes;
} ShapeCase;

static const ShapeCase kShapes[] = {
    /* Along k, M = 1: a warp per column, 8 16-byte loads per lane. */
    {1, 4096, 4096, "bf16", true, NULL, 8, 8, 1, 8, 1, 512, 1, 4096, 0},
    /* M = 16: tensor cores, 32 columns per warp, 4 chunks of 32 k per
     * trip (256 bytes of W in flight per lane), 16 warps share k in a
     * block of 16 (128 groups cover the SMs; no split). */
    {16, 4096, 4096, "bf16", true, NULL, 8, 8, 32, 4, 16, 128, 1, 4096,
     16 * 16 * 32 * 4},
    /* 256 columns: 8 groups cannot fill the SMs: 8 warps a block, k
     * split, in 4 slices of 1024 (each warp keeps a trip of 4 chunks). */
    {16, 256, 4096, "bf16", true, NULL, 8, 8, 32, 4, 8, 8, 4, 1024, -1},
    /* The same on CUDA cores: 4 columns per warp, 2 loads each, 4 warps
     * share k. */
    {16, 4096, 4096, "bf16", true, "mma=0", 8, 8, 4, 2, 4, 512, 1, -1,
     8 * 64 * 4},
    /* 5 rows: tensor cores; 24 columns: one group of 3 tiles. */
    {5, 24, 64, "bf16", true, NULL, 8, 8, 24, 4, -1, 1, 1, -1, -1},
    /* 4 rows: CUDA cores. */
    {4, 4096, 4096, "bf16", true, NULL, 8, 8, 2, 4, -1, -1, 1, -1, -1},
    /* Along n, M = 1: 16 blocks of 256 columns cannot fill the GPU: k is
     * split across 8 blocks (9 wanted; 8 slices of 64 chunks of 8 k divide
     * evenly among 16 warps). */
    {1, 4096, 4096, "bf16", false, NULL, 8, 8, 256, 8, 16, 16, 8, 512, -1},
    /* M = 16 along n: tensor cores, 32 columns per warp (8-byte loads:
     * 64 would make 64 blocks), 16 warps share k, no split (256 bytes in
     * flight per lane). */
    {16, 4096, 4096, "bf16", false, NULL, 4, 8, 32, 4, 16, 128, 1, 4096,
     16 * 16 * 32 * 4},
    /* 11008 columns: 64 per warp (16-byte loads), 172 blocks of 8 warps
     * (16 would pass 48 KiB of shared memory for the sums). */
    {16, 11008, 4096, "bf16", false, NULL, 8, 8, 64, 2, 8, 172, 1, -1,
     8 * 32 * 32 * 4},
    /* On CUDA cores: 4 columns per thread (64 accumulators); the split
     * capped by the partials' bytes (an eighth of W's). */
    {16, 4096, 4096, "bf16", false, "mma=0", 4, -1, 128, -1, 4, 32, 8, -1,
     -1},
    /* f32, 11008 columns along n: enough warps, but 86 blocks for 132
     * SMs: k split in 2. */
    {3, 11008, 4096, "f32", false, NULL, 4, 4, -1, 8, -1, 86, 2, 2048, -1},
    /* bf16 M = 1, 11008 columns along n: 43 blocks of 16 warps (688
     * warps, over a quarter of the target): k split in 4, 172 blocks. */
    {1, 11008, 4096, "bf16", false, NULL, 8, 8, 256, 8, 16, 43, 4, 1024, -1},
    /* Odd sizes: scalar loads. */
    {3, 37, 45, "bf16", false, NULL, 1, 1, 32, 1, -1, -1, -1, -1, -1},
    {3, 37, 45, "bf16", true, NULL, 1, 1, 2, -1, -1, -1, -1, -1, -1},
    /* Forced. */
    {16, 4096, 4096, "bf16", true, "cols=2,unroll=4,warps=1,mma=0", -1, -1, 2,
     4, 1, 256, -1, -1, 0},
    {16, 4096, 4096, "bf16", true, "cols=64,unroll=1,warps=2", -1, -1, 64, 1,
     2, 16, -1, -1, 8 * 32 * 32 * 4},
    {1, 4096, 4096, "bf16", true, "blocks=4", -1, -1, -1, -1, -1, -1, 4, 1024,
     -1},
};

#define EXPECT(field, want)                                                 \
  if ((want) >= 0)                                                          \
  ck_assert_msg((int64_t)s.field == (int64_t)(want),                        \
                "case %zu: " #field " %lld, expected %lld", c,              \
                (long long)s.field, (long long)(want))

START_TEST(test_choose) {
  FzContext *ctx = ctx_with_kernel();
  for (size_t c = 0; c < sizeof kShapes / sizeof kShapes[0]; ++c) {
    const ShapeCase *k = &kShapes[c];
    FzSmallMShape s = choose(ctx, k->M, k->N, k->K, k->type, k->trans,
                             k->force);
    EXPECT(vec, k->vec);
    EXPECT(xvec, k->xvec);
    EXPECT(cols, k->cols);
    EXPECT(unroll, k->unroll);
    EXPECT(splitWarps, k->splitWarps);
    EXPECT(blocks, k->blocks);
    EXPECT(splitBlocks, k->splitBlocks);
    EXPECT(sliceK, k->sliceK);
    EXPECT(sharedBytes, k->sharedBytes);
  }
  fzContextDestroy(ctx);
}
END_TEST

/* W's loads `stream` unless stream=0; the register cap for f32 with 16
 * rows (64 accumulators), off with cap=0, forced with cap=1. */
START_TEST(test_choose_switches) {
  FzContext *ctx = ctx_with_kernel();
  FzSmallMShape s = choose(ctx, 16, 4096, 4096, "f32", true, NULL);
  ck_assert(s.stream);
  ck_assert_int_eq(s.minBlocksPerSm, 2);
  s = choose(ctx, 16, 4096, 4096, "f32", true, "stream=0,cap=0");
  ck_assert(!s.stream);
  ck_assert_int_eq(s.minBlocksPerSm, 0);
  s = choose(ctx, 1, 4096, 4096, "bf16", true, NULL);
  ck_assert_int_eq(s.minBlocksPerSm, 0);
  s = choose(ctx, 1, 4096, 4096, "bf16", true, "cap=1");
  ck_assert_int_eq(s.minBlocksPerSm, 2);
  /* Blocks of 16 warps: no cap to ask for. */
  s = choose(ctx, 1, 4096, 4096, "bf16", false, "cap=1");
  ck_assert_int_eq(s.minBlocksPerSm, 0);
  fzContextDestroy(ctx);
}
END_TEST

static void choose_bad(FzContext *ctx, bool trans, const char *force,
                       const char *reason) {
  FzSmallMShape sh;
  bool bad = false;
  char why[256];
  ck_assert(!try_choose(ctx, 16, 64, 64, "bf16", trans, force, &sh, &bad,
                        why));
  ck_assert(bad);
  ck_assert_msg(strstr(why, reason), "%s: got '%s'", force, why);
}

START_TEST(test_choose_bad) {
  FzContext *ctx = ctx_with_kernel();
  choose_bad(ctx, true, "cols", "expected cols=, unroll=, warps=, blocks=, mma=, stream= or cap=");
  choose_bad(ctx, true, "mma=2", "mma: expected a number from 0 to 1");
  choose_bad(ctx, true, "stream=2", "stream: expected a number from 0 to 1");
  choose_bad(ctx, true, "cols=0", "cols: expected a number from 1 to 65535");
  choose_bad(ctx, true, "cols=2x", "cols: expected a number");
  choose_bad(ctx, true, "warps=3", "warps=3: a power of two up to 16");
  choose_bad(ctx, true, "warps=16,mma=0", "warps=16: a power of two up to 8");
  choose_bad(ctx, true, "cols=64,warps=16", "warps=16: a power of two up to 8");
  choose_bad(ctx, true, "cols=4,unroll=4,mma=0", "at most 4 columns");
  choose_bad(ctx, true, "cols=12", "tensor cores take multiples of 8");
  FzSmallMShape sh;
  bool bad = false;
  char why[256];
  ck_assert(!try_choose(ctx, 3, 37, 45, "bf16", false, "mma=1", &sh, &bad,
                        why));
  ck_assert(bad);
  ck_assert_msg(strstr(why, "mma=1: tensor cores need"), "%s", why);
  choose_bad(ctx, false, "unroll=3", "unroll=3: 1, 2, 4 or 8, dividing K");
  choose_bad(ctx, false, "warps=8,mma=0", "within 48 KiB");
  choose_bad(ctx, false, "unroll=8", "256 bytes of W per lane");
  choose_bad(ctx, false, "cols=48", "along n: 32 or 64");
  fzContextDestroy(ctx);
}
END_TEST

/*===--- Through the pass -------------------------------------------------===*/

/* The number of ops named `name` directly in @f's body. */
static size_t count_ops(FzOp *m, const char *name) {
  size_t n = 0;
  for (FzOp *op = fzBlockGetFirstOp(body_of(m)); op;
       op = fzOpGetNextInBlock(op)) {
    FzStringRef s = fzIdentGetString(fzOpGetName(op));
    n += s.length == strlen(name) && !memcmp(s.data, name, s.length);
  }
  return n;
}

static FzStringRef plan_of(FzOp *m, const char *kernel) {
  FzOp *k = fzSymbolTableLookupIn(m, fzStringRefFromCString(kernel));
  ck_assert_ptr_nonnull(k);
  return fzStringAttrGetValue(fzOpGetAttr(k, FZ_STR("fuse.plan")));
}

START_TEST(test_pass) {
  FzContext *ctx = ctx_with_kernel();
  char *s = nest_src(4, 48, 64, "bf16", true);
  /* The default: one small-M kernel. */
  FzOp *m = parse_verified(ctx, s);
  FzLoopToKernelOptions o;
  fzLoopToKernelOptionsInit(&o);
  ck_assert(fzLowerLoopToKernel(m, &o));
  ck_assert(fzOpVerify(m));
  ck_assert_uint_eq(count_ops(m, "kernel.launch"), 1);
  ck_assert_uint_eq(count_ops(m, "loop.parallel"), 0);
  FzStringRef p = plan_of(m, "f_k0");
  ck_assert(p.length > 8 && !memcmp(p.data, "small-m ", 8));
  fzOpDestroy(m);
  /* Split in two (W along n: slices of 8 k): a temporary and two
   * kernels. */
  char *sn = nest_src(4, 48, 64, "bf16", false);
  m = parse_verified(ctx, sn);
  free(sn);
  o.smallMShape = "blocks=2";
  ck_assert(fzLowerLoopToKernel(m, &o));
  ck_assert(fzOpVerify(m));
  ck_assert_uint_eq(count_ops(m, "loop.alloc"), 1);
  ck_assert_uint_eq(count_ops(m, "kernel.launch"), 2);
  p = plan_of(m, "f_k0");
  ck_assert(strstr(p.data, "k split over 2 blocks of 32"));
  p = plan_of(m, "f_k1");
  ck_assert(p.length > 12 && !memcmp(p.data, "elementwise:", 12));
  fzOpDestroy(m);
  /* Off: the tensor-core tiles. */
  m = parse_verified(ctx, s);
  o.smallMShape = NULL;
  o.noSmallM = true;
  ck_assert(fzLowerLoopToKernel(m, &o));
  p = plan_of(m, "f_k0");
  ck_assert(p.length > 7 && !memcmp(p.data, "matmul ", 7));
  fzOpDestroy(m);
  /* A bad shape: an error at the nest, the pass fails. */
  m = parse_verified(ctx, s);
  o.noSmallM = false;
  o.smallMShape = "warps=5";
  DiagLog log;
  diag_log_begin(&log, ctx);
  ck_assert(!fzLowerLoopToKernel(m, &o));
  diag_log_end(&log);
  ck_assert_uint_eq(log.numErrors, 1);
  ck_assert_ptr_nonnull(diag_log_find(&log, "small-m-shape=warps=5"));
  fzOpDestroy(m);
  free(s);
  fzContextDestroy(ctx);
}
END_TEST

/* Every allocation of the pass may fail: an error, no crash, no leak
 * (the split too: blocks=2). */
static void allocation_failures(const char *pipeline) {
  char *src = nest_src(4, 48, 64, "bf16", false);
  ck_assert_uint_gt(check_pass_allocation_failures(src, pipeline), 500);
  free(src);
}

START_TEST(test_allocation_failures) {
  allocation_failures("lower-loop-to-kernel");
}
END_TEST

START_TEST(test_allocation_failures_split) {
  allocation_failures("lower-loop-to-kernel{small-m-shape=blocks=2}");
}
END_TEST

static Suite *small_m_suite(void) {
  Suite *s = suite_create("small_m");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_match_layouts);
  tcase_add_test(tc, test_match_orientation);
  tcase_add_test(tc, test_match_refused);
  tcase_add_test(tc, test_choose);
  tcase_add_test(tc, test_choose_switches);
  tcase_add_test(tc, test_choose_bad);
  tcase_add_test(tc, test_pass);
  tcase_add_test(tc, test_allocation_failures);
  tcase_add_test(tc, test_allocation_failures_split);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(small_m_suite()); }

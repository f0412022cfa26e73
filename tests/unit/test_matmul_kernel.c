/* tests/unit/test_matmul_kernel.c - Check suite of the tensor-core matmul
 * generator (lowering/loop_to_kernel/matmul*.c): tile texts (parse,
 * checks, warp splits, format round trip, the choice by size and by
 * FZ_GPU_MMA_TILE), the matcher on hand-written loop nests (what it
 * records; every refusal with its reason), the kernels lower-loop-to-kernel
 * makes of a matched nest (with its matmul mapping, or without it), and
 * the pass under failing allocations (an error, never a crash or a
 * leak); the same for conv2d nests (the implicit GEMM). Whole kernels against
 * the interpreters are lit tests (tests/lit/matmul).
 */
#include <stdlib.h>
#include <string.h>

#include "fz/kernel.h"
#include "fz/pass.h"
#include "lowering/loop_to_kernel/matmul.h"
#include "tests/unit/test_helpers.h"

/*===--- Tiles ----------------------------------------------------------===*/

static FzMatmulTile parse_ok(const char *text) {
  FzMatmulTile t;
  char why[256] = "";
  ck_assert_msg(fzMatmulTileParse(fzStringRefFromCString(text), &t, why,
                                  sizeof why),
                "%s: %s", text, why);
  return t;
}

static void parse_bad(const char *text, const char *reason) {
  FzMatmulTile t;
  char why[256] = "";
  ck_assert(!fzMatmulTileParse(fzStringRefFromCString(text), &t, why,
                               sizeof why));
  ck_assert_msg(strstr(why, reason), "%s: got '%s'", text, why);
}

START_TEST(test_tile_parse) {
  FzMatmulTile t = parse_ok("128x256x32:8w:4s");
  ck_assert_int_eq(t.bm, 128);
  ck_assert_int_eq(t.bn, 256);
  ck_assert_int_eq(t.bk, 32);
  ck_assert_int_eq(t.warpsM, 2); /* 64x64 warp tiles */
  ck_assert_int_eq(t.warpsN, 4);
  ck_assert_int_eq(t.stages, 4);
  ck_assert_int_eq(t.groupM, 8);
  ck_assert(!t.sync);
  t = parse_ok("128x128x32:8w:3s");
  ck_assert_int_eq(t.warpsM * t.warpsN, 8);
  ck_assert_int_eq(t.warpsM, 2); /* 64x32, not 32x64: rows get the 2 */
  t = parse_ok("64x128x64:1x4w:2s:g4:sync");
  ck_assert_int_eq(t.warpsM, 1);
  ck_assert_int_eq(t.warpsN, 4);
  ck_assert_int_eq(t.groupM, 4);
  ck_assert(t.sync);
  char buf[96];
  fzMatmulTileFormat(&t, buf, sizeof buf);
  ck_assert_str_eq(buf, "64x128x64:1x4w:2s:g4:sync");
  FzMatmulTile u = parse_ok(buf);
  ck_assert(t.bm == u.bm && t.bn == u.bn && t.bk == u.bk &&
            t.warpsM == u.warpsM && t.warpsN == u.warpsN &&
            t.stages == u.stages && t.groupM == u.groupM && t.sync == u.sync);
  parse_bad("", "expected BMxBNxBK");
  parse_bad("128x128", "expected BMxBNxBK");
  parse_bad("128x128x32", "missing the warps");
  parse_bad("128x128x32:4w:3q", "unknown field");
  parse_bad("128x128x32;4w", "expected ':'");
  parse_bad("128x128x24:4w:3s", "BK must be a multiple of 16");
  parse_bad("128x128x32:3w:3s", "do not split");
  parse_bad("128x128x32:3x1w:3s", "multiples of 16x16");
  parse_bad("128x128x32:4w:1s", "stages must be 2 to 8");
  parse_bad("256x256x64:8w:4s", "more than the 227 KiB");
  parse_bad("512x512x16:64w:2s", "more than 32 warps");
  parse_bad("16x16x16:2x1w:2s", "multiples of 16x16");
  parse_bad("16x16x64:1w:2s:g0", "launch group");
  parse_bad("32x32x16:4w:2s", "do not divide evenly");
  parse_bad("48x48x32:1w:2s", "powers of two");
}
END_TEST

/* The tile fzMatmulTileChoose gives m (no text, no variable) with M, N
 * and K set, in its text form, must be `want`. */
static void check_tile(FzMatmulNest *m, int64_t M, int64_t N, int64_t K,
                       const char *want) {
  m->M = M, m->N = N, m->K = K;
  FzMatmulTile t;
  char why[256] = "", buf[96];
  ck_assert(fzMatmulTileChoose(m, (FzStringRef){NULL, 0}, &t, why,
                               sizeof why));
  fzMatmulTileFormat(&t, buf, sizeof buf);
  ck_assert_str_eq(buf, want);
}

/* The tile for a problem: an explicit text, else $FZ_GPU_MMA_TILE, else
 * by size. */
START_TEST(test_tile_choose) {
  FzMatmulNest m;
  memset(&m, 0, sizeof m);
  FzMatmulTile t;
  char why[256] = "";
  ck_assert_int_eq(unsetenv("FZ_GPU_MMA_TILE"), 0);
  check_tile(&m, 8192, 8192, 0, "128x128x32:2x2w:4s:g8");
  check_tile(&m, 512, 384, 0, "128x128x32:2x2w:4s:g8");
  check_tile(&m, 80, 4096, 0, "64x64x32:2x2w:3s:g8");
  /* A conv's gather (measured on an H100): 64x128 tiles of 3 stages
   * above 64 output channels, 128x64 tiles of 4 at 64, the small
   * default below 256 rows. */
  m.conv.on = true;
  check_tile(&m, 100352, 64, 0, "128x64x32:2x2w:4s:g8");
  check_tile(&m, 6272, 256, 0, "64x128x32:1x4w:3s:g8");
  check_tile(&m, 200, 256, 0, "64x64x32:2x2w:3s:g8");
  /* A 1x1 conv is a plain GEMM per image, K the input channels: one
   * k step of 64 where K allows it, else BK = 32. */
  m.conv.pointwise = true;
  check_tile(&m, 256, 3136, 64, "128x64x64:2x2w:3s:g8");
  check_tile(&m, 256, 3136, 32, "128x64x32:2x2w:4s:g8");
  m.K = 0;
  m.conv.pointwise = false;
  m.conv.on = false;
  ck_assert_int_eq(setenv("FZ_GPU_MMA_TILE", "32x32x16:1w:2s", 1), 0);
  ck_assert(fzMatmulTileChoose(&m, (FzStringRef){NULL, 0}, &t, why,
                               sizeof why));
  ck_assert_int_eq(t.bm, 32);
  ck_assert_int_eq(t.bk, 16);
  /* An explicit text wins over the environment. */
  ck_assert(fzMatmulTileChoose(&m, FZ_STR("64x64x64:4w:2s"), &t, why,
                               sizeof why));
  ck_assert_int_eq(t.bk, 64);
  ck_assert_int_eq(setenv("FZ_GPU_MMA_TILE", "32x32", 1), 0);
  ck_assert(!fzMatmulTileChoose(&m, (FzStringRef){NULL, 0}, &t, why,
                                sizeof why));
  ck_assert_ptr_nonnull(strstr(why, "FZ_GPU_MMA_TILE=32x32: expected"));
  ck_assert_int_eq(unsetenv("FZ_GPU_MMA_TILE"), 0);
}
END_TEST

/* What the generator holds: every swept tile and the defaults; not a
 * warp tile of 128x128 (128 accumulator tiles: 512 f32 registers). */
START_TEST(test_tile_fits) {
  FzMatmulNest m;
  memset(&m, 0, sizeof m);
  char why[256] = "";
  const char *ok[] = {"128x256x32:8w:4s", "128x256x32:8w:3s",
                      "128x256x64:8w:3s", "256x128x32:8w:4s",
                      "128x128x32:4w:4s", "128x128x64:4w:3s",
                      "128x128x32:8w:4s", "64x64x32:4w:3s",
                      "128x128x32:2w:2s" /* 64x128: the most */};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    FzMatmulTile t = parse_ok(ok[i]);
    ck_assert_msg(fzMatmulTileFits(&m, &t, why, sizeof why), "%s: %s", ok[i],
                  why);
  }
  FzMatmulTile t = parse_ok("128x128x32:1w:2s");
  ck_assert(!fzMatmulTileFits(&m, &t, why, sizeof why));
  ck_assert_msg(strstr(why, "128x128 warp tiles need 128 m16n8 accumulator "
                            "tiles per thread, at most 64"),
                "why: %s", why);
  /* f32 (tf32) stages take 4 bytes an element: 128x256x64:8w:3s (144 KiB
   * of bf16) is 288 KiB of f32; the default 128x128x32:4w:4s is 128 KiB
   * (the async path: both operands allow 16-byte copies). */
  FzContext *ctx = fzContextCreate();
  m.elt = fzF32TypeGet(ctx);
  m.a.asyncCopies = m.b.asyncCopies = true;
  t = parse_ok("128x256x64:8w:3s");
  ck_assert(!fzMatmulTileFits(&m, &t, why, sizeof why));
  ck_assert_msg(strstr(why, "294912 bytes of shared memory for 4-byte "
                            "elements, more than the 227 KiB of a block"),
                "why: %s", why);
  t = parse_ok("128x128x32:4w:4s");
  ck_assert_msg(fzMatmulTileFits(&m, &t, why, sizeof why), "%s", why);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- The matcher ----------------------------------------------------===*/

/* A 32x48x64 bf16 matmul with bias and relu; `%%K%%`-style holes are
 * filled per case by plain text replacement of the marked lines. */
static const char *kBase =
    "func.func @f(%A: buffer<32x64xbf16>, %B: buffer<64x48xbf16>, "
    "%bias: buffer<48xbf16>, %C: buffer<32x48xbf16>) attributes "
    "{loop.num_outputs = 1 : i64} {\n"
    "  %c0 = loop.constant 0 : index\n"
    "  %c1 = loop.constant 1 : index\n"
    "  %c2 = loop.constant 2 : index\n"
    "  %c32 = loop.constant 32 : index\n"
    "  %c48 = loop.constant 48 : index\n"
    "  %c64 = loop.constant 64 : index\n"
    "  %z = loop.constant 0.000000e+00 : f32\n"
    "  %half = loop.constant 5.000000e-01 : f32\n"
    "  loop.parallel (%i, %j) = (%c0, %c0) to (%c32, %c48) step (%c1, %c1) "
    "{\n"
    "    %acc = loop.for %k = %c0 to %c64 step %c1 iter_args(%s = %z) -> "
    "(f32) {\n"
    "      %a = loop.load %A[%i, %k] : buffer<32x64xbf16>\n"
    "      %af = loop.extf %a : bf16 to f32\n"
    "      %b = loop.load %B[%k, %j] : buffer<64x48xbf16>\n"
    "      %bf = loop.extf %b : bf16 to f32\n"
    "      %p = loop.mulf %af, %bf : f32\n"
    "      %s2 = loop.addf %s, %p : f32\n"
    "      loop.yield %s2 : f32\n"
    "    }\n"
    "    %bb = loop.load %bias[%j] : buffer<48xbf16>\n"
    "    %bbf = loop.extf %bb : bf16 to f32\n"
    "    %x = loop.addf %acc, %bbf : f32\n"
    "    %y = loop.maxf %x, %z : f32\n"
    "    %t = loop.truncf %y : f32 to bf16\n"
    "    loop.store %t, %C[%i, %j] : buffer<32x48xbf16>\n"
    "    loop.yield\n"
    "  }\n"
    "  return\n"
    "}\n";

static char *variant(const char *from, const char *to) {
  return text_replace(kBase, from, to);
}

/* The first loop.parallel of @f in module m. */
static FzOp *first_nest(FzOp *m) {
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("f"));
  ck_assert_ptr_nonnull(f);
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(f, 0));
  for (FzOp *op = fzBlockGetFirstOp(b); op; op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_PARALLEL)
      return op;
  ck_abort_msg("no loop.parallel");
  return NULL;
}


START_TEST(test_match_base) {
  FzContext *ctx = ctx_with_kernel();
  FzOp *m = parse_verified(ctx, kBase);
  FzMatmulNest mm;
  char why[256] = "";
  ck_assert_msg(fzKernelMatchMatmulNest(first_nest(m), &mm, why, sizeof why),
                "%s", why);
  ck_assert_int_eq(mm.M, 32);
  ck_assert_int_eq(mm.N, 48);
  ck_assert_int_eq(mm.K, 64);
  ck_assert_int_eq(mm.dimI, 0);
  ck_assert_int_eq(mm.dimJ, 1);
  ck_assert(fzTypeGetKind(mm.elt) == FZ_TYPE_BF16);
  ck_assert(mm.a.kLast && !mm.b.kLast);
  ck_assert(mm.a.asyncCopies && mm.b.asyncCopies);
  ck_assert(mm.pairStores);
  ck_assert_uint_eq(mm.numStores, 1);
  /* A, B, then bias, the 0.0 constant, C in first-use order. */
  ck_assert_uint_eq(mm.numCaptures, 5);
  FzBlock *fb = fzRegionGetFirstBlock(fzOpGetRegion(
      fzSymbolTableLookupIn(m, FZ_STR("f")), 0));
  ck_assert_ptr_eq(mm.captures[0], fzBlockGetArgument(fb, 0));
  ck_assert_ptr_eq(mm.captures[1], fzBlockGetArgument(fb, 1));
  ck_assert_ptr_eq(mm.captures[2], fzBlockGetArgument(fb, 2));
  ck_assert_ptr_eq(mm.captures[4], fzBlockGetArgument(fb, 3));
  /* Product written B * A: the roles still follow the indices. */
  fzOpDestroy(m);
  char *s = variant("%p = loop.mulf %af, %bf", "%p = loop.mulf %bf, %af");
  m = parse_verified(ctx, s);
  ck_assert(fzKernelMatchMatmulNest(first_nest(m), &mm, why, sizeof why));
  fb = fzRegionGetFirstBlock(
      fzOpGetRegion(fzSymbolTableLookupIn(m, FZ_STR("f")), 0));
  ck_assert_int_eq(mm.dimI, 0);
  ck_assert_int_eq(mm.dimJ, 1);
  ck_assert_ptr_eq(mm.a.buffer, fzBlockGetArgument(fb, 0));
  ck_assert_ptr_eq(mm.b.buffer, fzBlockGetArgument(fb, 1));
  free(s);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

typedef struct Case {
  const char *from, *to, *reason;
  const char *from2, *to2; /* a second change, or NULL */
} Case;

/* Each change to the base nest that must be refused, with the reason. */
static const Case kRefused[] = {
    {"iter_args(%s = %z)", "iter_args(%s = %half)",
     "not an f32 starting at 0.0", NULL, NULL},
    {"loop.for %k = %c0 to %c64 step %c1", "loop.for %k = %c0 to %c64 step %c2",
     "not 0..K step 1", NULL, NULL},
    {"%af = loop.extf %a : bf16 to f32",
     "%a1 = loop.extf %a : bf16 to f32\n      %af = loop.maxf %a1, %z : f32",
     "not plain loads", NULL, NULL},
    {"%s2 = loop.addf %s, %p : f32",
     "%s3 = loop.mulf %p, %p : f32\n      %s2 = loop.addf %s, %p : f32",
     "computes more than A * B", NULL, NULL},
    {"%s2 = loop.addf %s, %p : f32", "%s2 = loop.maxf %s, %p : f32",
     "not a sum", NULL, NULL},
    {"%a = loop.load %A[%i, %k]", "%a = loop.load %A[%k, %k]",
     "the k index is not one of", NULL, NULL},
    {"%b = loop.load %B[%k, %j] : buffer<64x48xbf16>",
     "%b = loop.load %B[%k, %i] : buffer<64x48xbf16>",
     "both operands use the same output index", NULL, NULL},
    {"%a = loop.load %A[%i, %k]", "%a = loop.load %A[%ik, %k]",
     "not a loop index", "    %acc = loop.for",
     "    %ik = loop.addi %i, %c1 : index\n    %acc = loop.for"},
    {"    loop.store %t, %C[%i, %j] : buffer<32x48xbf16>\n",
     "    loop.store %t, %C[%i, %j] : buffer<32x48xbf16>\n"
     "    %a0 = loop.truncf %x : f32 to bf16\n"
     "    loop.store %a0, %A[%i, %j] : buffer<32x64xbf16>\n",
     "writes one of the matmul's operands", NULL, NULL},
    {"    %bb = loop.load %bias[%j] : buffer<48xbf16>\n",
     "    %old = loop.load %C[%j, %i] : buffer<32x48xbf16>\n"
     "    %bb = loop.load %bias[%j] : buffer<48xbf16>\n",
     "reads a buffer the nest writes, at other indices", NULL, NULL},
    {"    %bb = loop.load %bias[%j] : buffer<48xbf16>\n",
     "    loop.barrier\n    %bb = loop.load %bias[%j] : buffer<48xbf16>\n",
     "'loop.barrier', which the matmul epilogue does not take", NULL, NULL},
    {"    loop.store %t, %C[%i, %j] : buffer<32x48xbf16>\n", "",
     "stores nothing", NULL, NULL},
    {"%x = loop.addf %acc, %bbf : f32", "%x = loop.addf %z, %bbf : f32",
     "result is not used", NULL, NULL},
    {"    %bb = loop.load %bias[%j] : buffer<48xbf16>\n",
     "    %r = loop.for %q = %c0 to %c2 step %c1 iter_args(%u = %z) -> (f32) "
     "{\n      loop.yield %u : f32\n    }\n"
     "    %bb = loop.load %bias[%j] : buffer<48xbf16>\n",
     "more than one loop", NULL, NULL},
    {"loop.parallel (%i, %j) = (%c0, %c0) to (%c32, %c48) step (%c1, %c1)",
     "loop.parallel (%i, %j) = (%c0, %c0) to (%c32, %c48) step (%c1, %c2)",
     "bounds are not constants 0..N step 1", NULL, NULL},
};

START_TEST(test_match_refused) {
  FzContext *ctx = ctx_with_kernel();
  for (size_t c = 0; c < sizeof kRefused / sizeof kRefused[0]; ++c) {
    char *s = variant(kRefused[c].from, kRefused[c].to);
    if (kRefused[c].from2) {
      char *s2 = text_replace(s, kRefused[c].from2, kRefused[c].to2);
      free(s);
      s = s2;
    }
    FzOp *m = parse_verified(ctx, s);
    FzMatmulNest mm;
    char why[256] = "";
    ck_assert_msg(!fzKernelMatchMatmulNest(first_nest(m), &mm, why,
                                           sizeof why),
                  "case %zu was accepted", c);
    ck_assert_msg(strstr(why, kRefused[c].reason), "case %zu: got '%s'", c,
                  why);
    fzOpDestroy(m);
    free(s);
  }
  fzContextDestroy(ctx);
}
END_TEST

/* Types and layouts the matcher refuses or routes to the scalar path. */
START_TEST(test_match_types_layouts) {
  FzContext *ctx = ctx_with_kernel();
  const char *f16B =
      "func.func @f(%A: buffer<32x64xbf16>, %B: buffer<64x48xf16>, "
      "%C: buffer<32x48xf32>) attributes {loop.num_outputs = 1 : i64} {\n"
      "  %c0 = loop.constant 0 : index\n  %c1 = loop.constant 1 : index\n"
      "  %c32 = loop.constant 32 : index\n  %c48 = loop.constant 48 : index\n"
      "  %c64 = loop.constant 64 : index\n"
      "  %z = loop.constant 0.000000e+00 : f32\n"
      "  loop.parallel (%i, %j) = (%c0, %c0) to (%c32, %c48) step (%c1, %c1) "
      "{\n"
      "    %acc = loop.for %k = %c0 to %c64 step %c1 iter_args(%s = %z) -> "
      "(f32) {\n"
      "      %a = loop.load %A[%i, %k] : buffer<32x64xbf16>\n"
      "      %af = loop.extf %a : bf16 to f32\n"
      "      %b = loop.load %B[%k, %j] : buffer<64x48xf16>\n"
      "      %bf = loop.extf %b : f16 to f32\n"
      "      %p = loop.mulf %af, %bf : f32\n"
      "      %s2 = loop.addf %s, %p : f32\n"
      "      loop.yield %s2 : f32\n"
      "    }\n"
      "    loop.store %acc, %C[%i, %j] : buffer<32x48xf32>\n"
      "    loop.yield\n  }\n  return\n}\n";
  FzOp *m = parse_verified(ctx, f16B);
  FzMatmulNest mm;
  char why[256] = "";
  ck_assert(!fzKernelMatchMatmulNest(first_nest(m), &mm, why, sizeof why));
  ck_assert_ptr_nonnull(strstr(why, "both bf16, both f16 or both f32"));
  fzOpDestroy(m);
  /* A strided view (a transpose the graph level left) as B: accepted, but
   * its contiguous index is not the last one: scalar tile loads. */
  char *s = variant("  loop.parallel (%i, %j)",
                    "  %Bt = loop.view %B : buffer<64x48xbf16> -> "
                    "buffer<64x48xbf16, strides [1, 64]>\n"
                    "  loop.parallel (%i, %j)");
  char *s2 = text_replace(s, "%b = loop.load %B[%k, %j] : buffer<64x48xbf16>",
                     "%b = loop.load %Bt[%k, %j] : buffer<64x48xbf16, "
                     "strides [1, 64]>");
  m = parse_verified(ctx, s2);
  ck_assert_msg(fzKernelMatchMatmulNest(first_nest(m), &mm, why, sizeof why),
                "%s", why);
  ck_assert(mm.a.asyncCopies);
  ck_assert(!mm.b.asyncCopies);
  fzOpDestroy(m);
  free(s);
  free(s2);
  /* A batch of 65536 matrices: more blocks than grid.z takes. */
  const char *big =
      "func.func @f(%A: buffer<65536x16x16xbf16>, %B: buffer<16x16xbf16>, "
      "%C: buffer<65536x16x16xf32>) attributes {loop.num_outputs = 1 : i64} "
      "{\n"
      "  %c0 = loop.constant 0 : index\n  %c1 = loop.constant 1 : index\n"
      "  %c16 = loop.constant 16 : index\n"
      "  %cb = loop.constant 65536 : index\n"
      "  %z = loop.constant 0.000000e+00 : f32\n"
      "  loop.parallel (%b, %i, %j) = (%c0, %c0, %c0) to (%cb, %c16, %c16) "
      "step (%c1, %c1, %c1) {\n"
      "    %acc = loop.for %k = %c0 to %c16 step %c1 iter_args(%s = %z) -> "
      "(f32) {\n"
      "      %a = loop.load %A[%b, %i, %k] : buffer<65536x16x16xbf16>\n"
      "      %af = loop.extf %a : bf16 to f32\n"
      "      %x = loop.load %B[%k, %j] : buffer<16x16xbf16>\n"
      "      %xf = loop.extf %x : bf16 to f32\n"
      "      %p = loop.mulf %af, %xf : f32\n"
      "      %s2 = loop.addf %s, %p : f32\n"
      "      loop.yield %s2 : f32\n"
      "    }\n"
      "    loop.store %acc, %C[%b, %i, %j] : buffer<65536x16x16xf32>\n"
      "    loop.yield\n  }\n  return\n}\n";
  m = parse_verified(ctx, big);
  ck_assert(!fzKernelMatchMatmulNest(first_nest(m), &mm, why, sizeof why));
  ck_assert_ptr_nonnull(strstr(why, "a batch of 65536 matrices"));
  fzOpDestroy(m);
  /* N odd: no pair stores. */
  s = variant("(%c32, %c48) step", "(%c32, %c47) step");
  s2 = text_replace(s, "  %z =", "  %c47 = loop.constant 47 : index\n  %z =");
  free(s);
  s = s2;
  m = parse_verified(ctx, s);
  ck_assert(fzKernelMatchMatmulNest(first_nest(m), &mm, why, sizeof why));
  ck_assert(!mm.pairStores);
  ck_assert_int_eq(mm.N, 47);
  fzOpDestroy(m);
  free(s);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- The builder ----------------------------------------------------===*/

/* Through lower-loop-to-kernel (the matmul mapping first): the kernel
 * verifies, carries its plan and flops, the nest is gone, a launch with
 * the generator's configuration replaces it. */
START_TEST(test_build) {
  FzContext *ctx = ctx_with_kernel();
  FzOp *m = parse_verified(ctx, kBase);
  FzMatmulNest mm;
  ck_assert(fzKernelMatchMatmulNest(first_nest(m), &mm, NULL, 0));
  FzMatmulTile t = parse_ok("32x32x32:1w:2s");
  int64_t grid[3], block[3], smem;
  fzMatmulGetLaunch(&mm, &t, grid, block, &smem);
  FzLoopToKernelOptions o;
  fzLoopToKernelOptionsInit(&o);
  o.mmaTile = "32x32x32:1w:2s";
  ck_assert(fzLowerLoopToKernel(m, &o));
  ck_assert(fzOpVerify(m));
  FzOp *k = fzSymbolTableLookupIn(m, FZ_STR("f_k0"));
  ck_assert_ptr_nonnull(k);
  ck_assert_int_eq(fzKernelGetOpcode(k), FZ_KERNEL_OP_FUNC);
  FzAttr *plan = fzOpGetAttr(k, FZ_STR("fuse.plan"));
  ck_assert_ptr_nonnull(plan);
  FzStringRef ps = fzStringAttrGetValue(plan);
  ck_assert(ps.length > 7 && memcmp(ps.data, "matmul ", 7) == 0);
  FzAttr *flops = fzOpGetAttr(k, FZ_STR("fuse.flops"));
  ck_assert_ptr_nonnull(flops);
  ck_assert_int_eq(fzIntegerAttrGetValue(flops), fzMatmulGetFlops(&mm));
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("f"));
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(f, 0));
  size_t launches = 0, nests = 0;
  for (FzOp *op = fzBlockGetFirstOp(b); op; op = fzOpGetNextInBlock(op)) {
    if (fzKernelGetOpcode(op) == FZ_KERNEL_OP_LAUNCH) {
      ++launches;
      int64_t cfg[FZ_KERNEL_LAUNCH_NUM_CONFIG] = {grid[0],  grid[1],  grid[2],
                                                  block[0], block[1], block[2],
                                                  smem};
      for (size_t i = 0; i < FZ_KERNEL_LAUNCH_NUM_CONFIG; ++i) {
        int64_t v;
        ck_assert(fzLoopValueGetConstantInt(fzOpGetOperand(op, i), &v));
        ck_assert_int_eq(v, cfg[i]);
      }
    }
    nests += fzLoopGetOpcode(op) == FZ_LOOP_OP_PARALLEL;
  }
  ck_assert_uint_eq(launches, 1);
  ck_assert_uint_eq(nests, 0);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* noMma: the same nest takes a generic mapping. */
START_TEST(test_build_no_mma) {
  FzContext *ctx = ctx_with_kernel();
  FzOp *m = parse_verified(ctx, kBase);
  FzLoopToKernelOptions o;
  fzLoopToKernelOptionsInit(&o);
  o.noMma = true;
  o.mmaTile = "not a tile"; /* not looked at */
  ck_assert(fzLowerLoopToKernel(m, &o));
  FzOp *k = fzSymbolTableLookupIn(m, FZ_STR("f_k0"));
  ck_assert_ptr_nonnull(k);
  ck_assert_ptr_null(fzOpGetAttr(k, FZ_STR("fuse.flops")));
  FzStringRef ps = fzStringAttrGetValue(fzOpGetAttr(k, FZ_STR("fuse.plan")));
  ck_assert(ps.length < 7 || memcmp(ps.data, "matmul ", 7) != 0);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/*===--- conv2d as an implicit GEMM -------------------------------------===*/

/* lower-graph-to-loop's nest of relu(conv2d(x, w, b)), bf16, x 2x8x9x9,
 * w 16x8x3x3, stride 2, pad 1: GEMM 50x16x72. */
static const char *kConv =
    "func.func @f(%arg0: buffer<2x8x9x9xbf16>, %arg1:"
    " buffer<16x8x3x3xbf16>, %arg2: buffer<16xbf16>, %arg3:"
    " buffer<2x16x5x5xbf16>) attributes {loop.num_outputs = 1 : i64} {\n"
    "  %0 = loop.constant 0 : index\n"
    "  %1 = loop.constant 1 : index\n"
    "  %2 = loop.constant 2 : index\n"
    "  %3 = loop.constant 16 : index\n"
    "  %4 = loop.constant 5 : index\n"
    "  %5 = loop.constant 8 : index\n"
    "  %6 = loop.constant 0.000000e+00 : f32\n"
    "  %7 = loop.constant 3 : index\n"
    "  %8 = loop.constant -1 : index\n"
    "  %9 = loop.constant 9 : index\n"
    "  loop.parallel (%arg4, %arg5, %arg6, %arg7) = (%0, %0, %0, %0) to"
    " (%2, %3, %4, %4) step (%1, %1, %1, %1) {\n"
    "    %10 = loop.divsi %arg5, %3 : index\n"
    "    %11 = loop.muli %10, %5 : index\n"
    "    %12 = loop.muli %arg6, %2 : index\n"
    "    %13 = loop.addi %12, %8 : index\n"
    "    %14 = loop.muli %arg7, %2 : index\n"
    "    %15 = loop.addi %14, %8 : index\n"
    "    %16 = loop.for %arg8 = %0 to %5 step %1 iter_args(%arg9 = %6) ->"
    " (f32) {\n"
    "      %22 = loop.addi %11, %arg8 : index\n"
    "      %23 = loop.for %arg10 = %0 to %7 step %1 iter_args(%arg11 ="
    " %arg9) -> (f32) {\n"
    "        %24 = loop.addi %13, %arg10 : index\n"
    "        %25 = loop.cmpi ult, %24, %9 : index\n"
    "        %26 = loop.maxsi %24, %0 : index\n"
    "        %27 = loop.minsi %26, %5 : index\n"
    "        %28 = loop.for %arg12 = %0 to %7 step %1 iter_args(%arg13 ="
    " %arg11) -> (f32) {\n"
    "          %29 = loop.addi %15, %arg12 : index\n"
    "          %30 = loop.cmpi ult, %29, %9 : index\n"
    "          %31 = loop.andi %25, %30 : i1\n"
    "          %32 = loop.maxsi %29, %0 : index\n"
    "          %33 = loop.minsi %32, %5 : index\n"
    "          %34 = loop.load %arg0[%arg4, %22, %27, %33] :"
    " buffer<2x8x9x9xbf16>\n"
    "          %35 = loop.extf %34 : bf16 to f32\n"
    "          %36 = loop.load %arg1[%arg5, %arg8, %arg10, %arg12] :"
    " buffer<16x8x3x3xbf16>\n"
    "          %37 = loop.extf %36 : bf16 to f32\n"
    "          %38 = loop.mulf %35, %37 : f32\n"
    "          %39 = loop.select %31, %38, %6 : f32\n"
    "          %40 = loop.addf %arg13, %39 : f32\n"
    "          loop.yield %40 : f32\n"
    "        } {loop.reduction}\n"
    "        loop.yield %28 : f32\n"
    "      } {loop.reduction}\n"
    "      loop.yield %23 : f32\n"
    "    } {loop.reduction}\n"
    "    %17 = loop.load %arg2[%arg5] : buffer<16xbf16>\n"
    "    %18 = loop.extf %17 : bf16 to f32\n"
    "    %19 = loop.addf %16, %18 : f32\n"
    "    %20 = loop.maxf %19, %6 : f32\n"
    "    %21 = loop.truncf %20 : f32 to bf16\n"
    "    loop.store %21, %arg3[%arg4, %arg5, %arg6, %arg7] :"
    " buffer<2x16x5x5xbf16>\n"
    "    loop.yield\n"
    "  }\n"
    "  return\n"
    "}\n";

static char *conv_variant(const char *from, const char *to) {
  return text_replace(kConv, from, to);
}

START_TEST(test_conv_match) {
  FzContext *ctx = ctx_with_kernel();
  FzOp *m = parse_verified(ctx, kConv);
  FzMatmulNest mm;
  char why[256] = "";
  bool isConv = false;
  ck_assert(!fzKernelMatchMatmulNest(first_nest(m), &mm, why, sizeof why));
  ck_assert_msg(fzKernelMatchConvNest(first_nest(m), &mm, &isConv, why,
                                      sizeof why),
                "%s", why);
  ck_assert(isConv && mm.conv.on);
  ck_assert_int_eq(mm.M, 50);
  ck_assert_int_eq(mm.N, 16);
  ck_assert_int_eq(mm.K, 72);
  ck_assert_int_eq(mm.dimI, -1);
  ck_assert_int_eq(mm.dimJ, 1);
  ck_assert_int_eq(mm.conv.batch, 2);
  ck_assert_int_eq(mm.conv.C, 8);
  ck_assert_int_eq(mm.conv.OH, 5);
  ck_assert_int_eq(mm.conv.KW, 3);
  ck_assert_int_eq(mm.conv.sh, 2);
  ck_assert_int_eq(mm.conv.sw, 2);
  ck_assert_int_eq(mm.conv.dh, 1);
  ck_assert_int_eq(mm.conv.padH, 1);
  ck_assert_int_eq(mm.conv.padW, 1);
  ck_assert(mm.conv.edgeH && mm.conv.edgeW);
  ck_assert(!mm.a.asyncCopies && mm.b.asyncCopies);
  ck_assert(!mm.pairStores);
  ck_assert_uint_eq(mm.numStores, 1);
  ck_assert_int_eq(fzMatmulGetFlops(&mm), 2 * 50 * 16 * 72);
  FzMatmulTile t = parse_ok("64x64x32:4w:3s");
  ck_assert(fzMatmulUsesAsyncCopies(&mm, &t));
  t.sync = true;
  ck_assert(!fzMatmulUsesAsyncCopies(&mm, &t));
  fzOpDestroy(m);
  /* A matmul is no conv: no conv reason to report. */
  m = parse_verified(ctx, kBase);
  ck_assert(!fzKernelMatchConvNest(first_nest(m), &mm, &isConv, why,
                                   sizeof why));
  ck_assert(!isConv);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Conv nests refused, with the reason. */
START_TEST(test_conv_refused) {
  static const Case cases[] = {
      {"%arg1[%arg5, %arg8, %arg10, %arg12]",
       "%arg1[%arg5, %arg8, %arg12, %arg10]",
       "the weight is not a load w[oc, c, kh, kw]", NULL, NULL},
      /* Only the row condition: the columns' padding reads unmasked. */
      {"%39 = loop.select %31, %38, %6", "%39 = loop.select %25, %38, %6",
       "not a strided, dilated, zero-padded window", NULL, NULL},
      /* groups = 2: channels (m / 8) * 4 + c, c < 4. */
      {"%10 = loop.divsi %arg5, %3 : index\n    %11 = loop.muli %10, %5",
       "%10 = loop.divsi %arg5, %5 : index\n    %11 = loop.muli %10, %c4",
       "groups > 1", "%16 = loop.for %arg8 = %0 to %5",
       "%c4 = loop.constant 4 : index\n    %16 = loop.for %arg8 = %0 to "
       "%c4"},
      /* Padded input rows (18 elements apart): no flat view. */
      {"%arg0: buffer<2x8x9x9xbf16>",
       "%arg0: buffer<2x8x9x9xbf16, strides [1296, 162, 18, 1]>",
       "not a dense NCHW buffer", "%33] : buffer<2x8x9x9xbf16>",
       "%33] : buffer<2x8x9x9xbf16, strides [1296, 162, 18, 1]>"},
      /* Weights with kw 2 elements apart: no [OC, K] matrix. */
      {"%arg1: buffer<16x8x3x3xbf16>",
       "%arg1: buffer<16x8x3x3xbf16, strides [144, 18, 6, 2]>",
       "(c, kh, kw) are not contiguous", "%arg12] : buffer<16x8x3x3xbf16>",
       "%arg12] : buffer<16x8x3x3xbf16, strides [144, 18, 6, 2]>"},
      {"    loop.yield\n  }",
       "    loop.store %21, %arg0[%arg4, %arg4, %arg6, %arg7] : "
       "buffer<2x8x9x9xbf16>\n    loop.yield\n  }",
       "writes one of the matmul's operands", NULL, NULL},
  };
  FzContext *ctx = ctx_with_kernel();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char *s = conv_variant(cases[i].from, cases[i].to);
    if (cases[i].from2) {
      char *s2 = text_replace(s, cases[i].from2, cases[i].to2);
      free(s);
      s = s2;
    }
    FzOp *m = fzParseSource(ctx, fzStringRefFromCString(s), FZ_STR("t.fuse"),
                            0);
    ck_assert_msg(m != NULL, "case %zu does not parse", i);
    FzMatmulNest mm;
    char why[256] = "";
    bool isConv = false;
    ck_assert_msg(!fzKernelMatchConvNest(first_nest(m), &mm, &isConv, why,
                                         sizeof why),
                  "case %zu matched", i);
    ck_assert_msg(isConv, "case %zu: not seen as a conv", i);
    ck_assert_msg(strstr(why, cases[i].reason), "case %zu: got '%s'", i, why);
    fzOpDestroy(m);
    free(s);
  }
  fzContextDestroy(ctx);
}
END_TEST

/* Through lower-loop-to-kernel: the implicit-GEMM kernel, its plan and
 * flops, the launch of fzMatmulGetLaunch, the nest gone. */
START_TEST(test_conv_build) {
  FzContext *ctx = ctx_with_kernel();
  FzOp *m = parse_verified(ctx, kConv);
  FzMatmulNest mm;
  ck_assert(fzKernelMatchConvNest(first_nest(m), &mm, NULL, NULL, 0));
  FzMatmulTile t = parse_ok("32x32x32:1w:2s");
  int64_t grid[3], block[3], smem;
  fzMatmulGetLaunch(&mm, &t, grid, block, &smem);
  ck_assert_int_eq(grid[0], 2); /* 50 rows, 16 columns: 2 x 1 tiles */
  ck_assert_int_eq(grid[2], 1);
  ck_assert_int_eq(smem, 2 * (32 + 32) * 32 * 2);
  FzLoopToKernelOptions o;
  fzLoopToKernelOptionsInit(&o);
  o.mmaTile = "32x32x32:1w:2s";
  ck_assert(fzLowerLoopToKernel(m, &o));
  ck_assert(fzOpVerify(m));
  FzOp *k = fzSymbolTableLookupIn(m, FZ_STR("f_k0"));
  ck_assert_ptr_nonnull(k);
  FzStringRef ps = fzStringAttrGetValue(fzOpGetAttr(k, FZ_STR("fuse.plan")));
  const char *want = "conv2d implicit GEMM 2x8x9x9 -> 16 channels, 3x3 "
                     "kernel, stride 2x2, pad 1x1, dilation 1x1 (GEMM "
                     "50x16x72) bf16, tile 32x32x32:1x1w:2s:g8, cp.async "
                     "weights, gathered input";
  ck_assert_msg(ps.length == strlen(want) &&
                    memcmp(ps.data, want, ps.length) == 0,
                "plan '%.*s'", (int)ps.length, ps.data);
  FzAttr *flops = fzOpGetAttr(k, FZ_STR("fuse.flops"));
  ck_assert_ptr_nonnull(flops);
  ck_assert_int_eq(fzIntegerAttrGetValue(flops), 2 * 50 * 16 * 72);
  FzOp *f = fzSymbolTableLookupIn(m, FZ_STR("f"));
  FzBlock *b = fzRegionGetFirstBlock(fzOpGetRegion(f, 0));
  size_t launches = 0, nests = 0;
  for (FzOp *op = fzBlockGetFirstOp(b); op; op = fzOpGetNextInBlock(op)) {
    if (fzKernelGetOpcode(op) == FZ_KERNEL_OP_LAUNCH) {
      ++launches;
      int64_t v;
      ck_assert(fzLoopValueGetConstantInt(fzOpGetOperand(op, 0), &v));
      ck_assert_int_eq(v, grid[0]);
      ck_assert(fzLoopValueGetConstantInt(fzOpGetOperand(op, 6), &v));
      ck_assert_int_eq(v, smem);
    }
    nests += fzLoopGetOpcode(op) == FZ_LOOP_OP_PARALLEL;
  }
  ck_assert_uint_eq(launches, 1);
  ck_assert_uint_eq(nests, 0);
  fzOpDestroy(m);
  fzContextDestroy(ctx);
}
END_TEST

/* Every allocation of the pass on src may fail: an error, no crash, no
 * leak. */
static void allocation_failures(const char *src) {
  /* Every allocation of the pass was made to fail once. */
  ck_assert_uint_gt(check_pass_allocation_failures(
                        src, "lower-loop-to-kernel{mma-tile=32x32x32:1w:2s}"),
                    1000);
}

START_TEST(test_build_allocation_failures) { allocation_failures(kBase); }
END_TEST

START_TEST(test_conv_allocation_failures) { allocation_failures(kConv); }
END_TEST

static Suite *matmul_suite(void) {
  Suite *s = suite_create("matmul_kernel");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_tile_parse);
  tcase_add_test(tc, test_tile_choose);
  tcase_add_test(tc, test_tile_fits);
  tcase_add_test(tc, test_match_base);
  tcase_add_test(tc, test_match_refused);
  tcase_add_test(tc, test_match_types_layouts);
  tcase_add_test(tc, test_build);
  tcase_add_test(tc, test_build_no_mma);
  tcase_add_test(tc, test_build_allocation_failures);
  tcase_add_test(tc, test_conv_match);
  tcase_add_test(tc, test_conv_refused);
  tcase_add_test(tc, test_conv_build);
  tcase_add_test(tc, test_conv_allocation_failures);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  return run_suite(matmul_suite());
}

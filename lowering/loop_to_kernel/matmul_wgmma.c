/* lowering/loop_to_kernel/matmul_wgmma.c - the sm_90a matmul kernel:
 * kernel.wgmma on shared operands (matmul_wgmma.h; docs/codegen.md
 * "Warp-group matmul (sm_90a)"). It shares matmul.c's setup (ids, tile
 * chunks, cp.async tile loads) and matmul_epilogue.c's epilogue; this
 * file has the tile choice, the shared layout and the k loop.
 *
 * Kernel structure (G warp groups of 128 threads, S stages, BK 64, MI
 * m64 blocks per warp group, KT = ceil(K / 64)):
 *
 *   setup: as mma.sync's (grouped tile order, batch from block_id.z);
 *   prologue: tiles 0 .. D-1 into stages 0 .. D-1 (cp.async), a commit
 *          each, D = S-2 (the distance; S-1 when S is 2);
 *   loop kt (accumulators in iter_args):
 *          cp_async_wait D-1 (tile kt has landed); fence_proxy_async
 *          (this thread's copies become visible to the async proxy);
 *          barrier;
 *          tile kt+D into stage (kt+D) % S, the one read in iteration
 *          kt-2 (kt-1 when S is 2); commit;
 *          wgmma_fence; per mi and k16 step: wgmma m64nBNk16 (A: the
 *          warp group's 64 rows of block mi, B: the whole BN); commit;
 *          wgmma_wait 1 (0 when S is 2): the group of iteration kt stays
 *          in flight while the next iteration waits for its copies and
 *          issues its own, as CUTLASS's and Triton's Hopper mainloops
 *          do; the group of kt-1 has completed, so after the next
 *          barrier no warp group reads the stage that is refilled;
 *   after the loop: wgmma_wait 0;
 *   epilogue: mma.sync's, per accumulator pair: wgmma's D fragment is
 *          mma.sync's m16n8 one per warp of the group (pair p = 2 ni + hi
 *          of n8 tile ni, rows + 8 hi), so warp w of group g has the rows
 *          of "warp row" 4 MI g + w with m blocks 64 rows apart.
 *
 * Shared layout (stage s of A at s BM 64 elements, B after A's stages;
 * each stage 1024-byte aligned, the buffer `align = 1024`): a K-major
 * operand (k contiguous in global memory) is `rows` x 64 elements, row
 * r's 16-byte chunk c at chunk c ^ (r % 8): 128-byte rows, PTX's 128-byte
 * swizzle; its descriptor has sbo 1024 (8-row groups) and starts at k
 * step ks at element 16 ks of row 0. An MN-major one (mn contiguous:
 * B[k][n] of a row-major B, A[k][m] of transpose_a) is blocks of 64 mn
 * x 64 k, 8 KiB apart (lbo 8192), row k of a block the 64 mn elements
 * with the same swizzle (sbo 1024); k step ks starts at row 16 ks.
 * These are exactly the layouts fzKernelWgmmaAddress (the simulator's)
 * reads, so a wrong descriptor fails the simulator tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/loop_to_kernel/matmul_internal.h"
#include "lowering/loop_to_kernel/matmul_wgmma.h"

#define WBK 64 /* k per stage: one 128-byte swizzle row of 16-bit elements */

static bool fail(char *why, size_t n, const char *msg) {
  if (why && n)
    snprintf(why, n, "%s", msg);
  return false;
}

bool fzWgmmaApplies(const FzMatmulNest *m, char *why, size_t whyLen) {
  FzTypeKind k = fzTypeGetKind(m->elt);
  if (m->conv.on && !m->conv.pointwise && !m->conv.kHwc)
    return fail(why, whyLen, "a conv2d whose input is not gathered along "
                             "its channels (NCHW, or k ordered (c, kh, "
                             "kw)): its implicit GEMM stays on mma.sync");
  if (k != FZ_TYPE_BF16 && k != FZ_TYPE_F16)
    return fail(why, whyLen, "f32 operands (tf32 stays on mma.sync)");
  if (!m->a.asyncCopies || !m->b.asyncCopies ||
      mmCopyBytes(&m->a) != 16 || mmCopyBytes(&m->b) != 16)
    return fail(why, whyLen, "an operand does not allow 16-byte copies");
  return true;
}

bool fzWgmmaWanted(const FzMatmulNest *m, int64_t minTiles, char *why,
                   size_t whyLen) {
  if (!fzWgmmaApplies(m, why, whyLen))
    return false;
  if (minTiles <= 1) /* every nest (--gpu-arch sm_90a) */
    return true;
  if (m->N < 128) {
    if (why && whyLen)
      snprintf(why, whyLen, "N = %lld below 128 under wgmma-min-tiles (its "
               "tiles are 64 or more columns wide: mma.sync's narrower "
               "ones waste less)", (long long)m->N);
    return false;
  }
  int64_t kSlice = m->splitK ? m->sliceK : m->K;
  if (kSlice < 128) {
    if (why && whyLen)
      snprintf(why, whyLen, "K = %lld below 128 under wgmma-min-tiles (at "
               "most two k steps of 64: nothing for the pipeline to "
               "overlap)", (long long)kSlice);
    return false;
  }
  int64_t tiles =
      ((m->M + 127) / 128) * ((m->N + 127) / 128) * fzMatmulGetBatch(m);
  if (tiles >= minTiles)
    return true;
  if (why && whyLen)
    snprintf(why, whyLen, "%lld output tiles of 128x128, fewer than "
             "wgmma-min-tiles %lld (small problems fill the GPU better "
             "with mma.sync's smaller tiles and split-k)",
             (long long)tiles, (long long)minTiles);
  return false;
}

static int warp_groups(const FzMatmulTile *t) {
  return t->warpsM * t->warpsN / 4;
}

bool fzWgmmaTileCheck(const FzMatmulTile *t, char *why, size_t whyLen) {
  int warps = t->warpsM * t->warpsN, groups = warps / 4;
  if (t->bk != WBK)
    return fail(why, whyLen, "wgmma tiles need BK 64 (one 128-byte "
                             "swizzle row)");
  if (warps != 4 && warps != 8)
    return fail(why, whyLen, "wgmma tiles have 1 or 2 warp groups (4w or "
                             "8w)");
  if (t->bm % (64 * groups) || t->bm / (64 * groups) > 2)
    return fail(why, whyLen, "BM must be 64 or 128 rows per warp group");
  if (t->bn % 64 || t->bn > 256 || t->bm / (64 * groups) * t->bn > 256)
    return fail(why, whyLen, "BN must be a multiple of 64 up to 256, with "
                             "at most 256 accumulator columns per warp "
                             "group row (BM / 64 / groups x BN)");
  if (t->stages < 2 || t->stages > 8 || t->groupM < 1)
    return fail(why, whyLen, "stages must be 2 to 8, the launch group at "
                             "least 1");
  int threads = 32 * warps;
  if ((t->bm * WBK / 8) % threads || (t->bn * WBK / 8) % threads ||
      (t->bm * WBK / 8) / threads > MAX_CHUNKS ||
      (t->bn * WBK / 8) / threads > MAX_CHUNKS)
    return fail(why, whyLen, "the 16-byte chunks of a stage do not divide "
                             "evenly among the threads");
  if ((int64_t)t->stages * (t->bm + t->bn) * WBK * 2 > 227 * 1024)
    return fail(why, whyLen, "the stages need more than the 227 KiB of "
                             "shared memory of a block");
  return true;
}

/* Parses text into *out with matmul.h's syntax and the wgmma rules (the
 * warps as one column of the warp grid). */
static bool parse(FzStringRef text, FzMatmulTile *out, char *why,
                  size_t whyLen) {
  if (!fzMatmulTileParse(text, out, why, whyLen))
    return false;
  out->warpsM *= out->warpsN;
  out->warpsN = 1;
  return fzWgmmaTileCheck(out, why, whyLen);
}

bool fzWgmmaTileChoose(const FzMatmulNest *m, FzStringRef text,
                       FzMatmulTile *out, char *why, size_t whyLen) {
  if (text.data && text.length)
    return parse(text, out, why, whyLen);
  const char *env = getenv("FZ_GPU_WGMMA_TILE");
  if (env && *env) {
    if (parse(fzStringRefFromCString(env), out, why, whyLen))
      return true;
    if (why && whyLen) {
      char inner[160];
      snprintf(inner, sizeof inner, "%s", why);
      snprintf(why, whyLen, "FZ_GPU_WGMMA_TILE=%s: %s", env, inner);
    }
    return false;
  }
  /* Not measured yet (first version): CUTLASS's and cuBLAS's usual
   * Hopper bf16 tiles, 128x256 with two consumer warp groups where the
   * output is large, smaller ones so that small problems have blocks. */
  const char *def = m->M >= 128 && m->N >= 256   ? "128x256x64:8w:4s"
                    : m->M >= 128 && m->N >= 128 ? "128x128x64:8w:4s"
                    : m->N >= 128                ? "64x128x64:4w:4s"
                                                 : "64x64x64:4w:4s";
  return parse(fzStringRefFromCString(def), out, why, whyLen);
}

void fzWgmmaDescribe(const FzMatmulNest *m, const FzMatmulTile *t,
                     char *buf, size_t n) {
  char tt[96], batch[48] = "", split[128];
  fzMatmulTileFormat(t, tt, sizeof tt);
  fzMatmulSplitText(m, split, sizeof split);
  int64_t b = fzMatmulGetBatch(m);
  if (b > 1)
    snprintf(batch, sizeof batch, " (batch %lld)", (long long)b);
  int groups = warp_groups(t);
  char what[400];
  if (m->conv.on)
    fzMatmulConvText(m, what, sizeof what);
  else
    snprintf(what, sizeof what, "matmul %lldx%lldx%lld", (long long)m->M,
             (long long)m->N, (long long)m->K);
  snprintf(buf, n, "%s %s%s, tile %s, wgmma (sm_90a) m64n%dk16 x%d per "
           "warp group, %d warp group%s, cp.async pipeline into "
           "128-byte-swizzled stages%s%s",
           what, fzTypeGetKind(m->elt) == FZ_TYPE_BF16 ? "bf16" : "f16",
           batch, tt, t->bn, t->bm / (64 * groups), groups,
           groups > 1 ? "s" : "",
           m->conv.on && !m->conv.pointwise ? " (input gathered, one tap "
                                              "per copy)"
                                            : "",
           split);
}

/*===--- The body -------------------------------------------------------===*/

/* An MN-major tile in blocks of 64 mn: chunk (row k, column c) at
 * (c / 64) 64 BK + k 64 + (((c % 64) / 8) ^ (k % 8)) 8. */
static void relayout(Gen *G, Tile *T) {
  KB *K = &G->K;
  if (T->x->kLast)
    return; /* rows of 64 k: mmSwizzle's layout is the 128-byte swizzle */
  for (int p = 0; p < T->perThread; ++p) {
    FzValue *blk = mmMul(K, mmDivC(K, T->col[p], 64), 64 * WBK);
    FzValue *in = mmSwizzle(K, T->row[p], mmRemC(K, T->col[p], 64), 64);
    T->dst[p] = mmCast(K, mmAdd(K, blk, in), K->i32);
  }
}

/* An op with n accumulator operands (after `pre`) and as many results
 * of pairs; its results to out. Takes st (disposed when it fails). */
static void pairs_op(KB *K, FzOpState *st, size_t npre, FzValue *const *pre,
                     size_t n, FzValue *const *acc, FzValue **out) {
  for (size_t i = 0; i < npre; ++i)
    if (!pre[i])
      K->failed = true;
  for (size_t i = 0; i < n; ++i)
    if (!acc[i])
      K->failed = true;
  if (K->failed) {
    fzOpStateDispose(st);
    return;
  }
  fzOpStateAddOperands(st, npre, pre);
  fzOpStateAddOperands(st, n, acc);
  for (size_t i = 0; i < n; ++i)
    fzOpStateAddResults(st, 1, &K->vacc);
  FzOp *op = fzBuilderCreate(&K->b, st);
  if (!op) {
    K->failed = true;
    return;
  }
  for (size_t i = 0; i < n; ++i)
    out[i] = fzOpGetResult(op, i);
}

static FzAttr *i64a(KB *K, int64_t v) {
  return fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 64), v);
}

/* The layout properties of operand x (A or B: suffix). */
static void add_layout(KB *K, FzOpState *st, const FzMatmulOperand *x,
                       bool isB) {
  const char *lbo = isB ? "lbo_b" : "lbo_a", *sbo = isB ? "sbo_b" : "sbo_a";
  fzOpStateAddProp(st, fzStringRefFromCString(sbo), i64a(K, 1024));
  fzOpStateAddProp(st, fzStringRefFromCString(lbo),
                   i64a(K, x->kLast ? 16 : 64 * WBK * 2));
  if (!x->kLast)
    fzOpStateAddProp(st, fzStringRefFromCString(isB ? "trans_b" : "trans_a"),
                     fzUnitAttrGet(K->ctx));
}

/* kernel.wgmma_wait `pending` on the nacc accumulators acc (updated in
 * place). */
static void wait_group(KB *K, int pending, size_t nacc, FzValue **acc) {
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.wgmma_wait"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("pending"),
                   fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 32),
                                    pending));
  pairs_op(K, &st, 0, NULL, nacc, acc, acc);
}

/* wgmma_fence, the wgmma ops of one stage, commit and the wait of the
 * pipeline (S - 1 - ahead groups left in flight) on the accumulators acc
 * (updated in place). */
static void compute_stage(Gen *G, FzValue *stage, FzValue **acc, int MI) {
  KB *K = &G->K;
  int pairs = G->t->bn / 4;
  size_t nacc = (size_t)MI * (size_t)pairs;
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.wgmma_fence"), K->loc);
  pairs_op(K, &st, 0, NULL, nacc, acc, acc);
  FzValue *aBase = mmAdd(K, mmConstOf(K, K->i32, G->A.base),
                         mmMul(K, stage, G->A.stageElems));
  FzValue *bBase = mmAdd(K, mmConstOf(K, K->i32, G->B.base),
                         mmMul(K, stage, G->B.stageElems));
  /* The warp group's first m block: 64 MI rows per group. */
  FzValue *wg = mmCast(K, mmDivC(K, G->tid, 128), K->i32);
  FzValue *aGroup = mmAdd(K, aBase, mmMul(K, wg, (int64_t)MI * 64 * WBK));
  char shape[32];
  snprintf(shape, sizeof shape, "m64n%dk16", G->t->bn);
  for (int ks = 0; ks < WBK / 16; ++ks) {
    int64_t aStep = G->m->a.kLast ? 16 * ks : 16 * 64 * ks;
    int64_t bStep = G->m->b.kLast ? 16 * ks : 16 * 64 * ks;
    FzValue *bIdx = mmCast(K, mmAddC(K, bBase, bStep), K->idx);
    for (int mi = 0; mi < MI; ++mi) {
      FzValue *aIdx =
          mmCast(K, mmAddC(K, aGroup, (int64_t)mi * 64 * WBK + aStep),
                 K->idx);
      fzOpStateInit(&st, K->ctx, FZ_STR("kernel.wgmma"), K->loc);
      fzOpStateAddProp(&st, FZ_STR("shape"),
                       fzStringAttrGet(K->ctx,
                                       fzStringRefFromCString(shape)));
      add_layout(K, &st, &G->m->a, false);
      add_layout(K, &st, &G->m->b, true);
      FzValue *pre[4] = {G->smem, aIdx, G->smem, bIdx};
      FzValue **c = acc + (size_t)mi * (size_t)pairs;
      pairs_op(K, &st, 4, pre, (size_t)pairs, c, c);
    }
  }
  mmPlainOp(K, "kernel.wgmma_commit");
  wait_group(K, G->S - 1 - G->ahead, nacc, acc);
}

static void wgmma_loop(Gen *G, FzValue **acc, int MI) {
  KB *K = &G->K;
  size_t nacc = (size_t)MI * (size_t)(G->t->bn / 4);
  FzValue *kt, *iters[2 * MAX_ACC + 1], *stage, *next;
  FzBuilder saved;
  /* One wgmma group in flight needs a third stage: the one it reads,
   * the one being computed, the one being filled. */
  G->ahead = G->S >= 3 ? G->S - 2 : G->S - 1;
  FzOp *loop = mmPipelineOpen(G, nacc, &kt, iters, &saved, &stage, &next);
  if (!loop)
    return;
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.cp_async_wait"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("pending"),
                   fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 32),
                                    G->ahead - 1));
  mmCreate(K, &st, 0);
  mmPlainOp(K, "kernel.fence_proxy_async");
  mmPlainOp(K, "kernel.barrier");
  /* Refill the stage read S - ahead iterations ago: its wgmma group has
   * completed (every warp group waited for it before the barrier). */
  FzValue *ws = mmRefillStage(G, kt, stage, next);
  if (ws) {
    FzValue *nk = mmAddC(K, kt, G->ahead);
    FzBuilder inIf;
    FzOp *guard = mmIfOpen(K, mmLtC(K, nk, G->KT), &inIf);
    mmLoadTileAsync(G, &G->A, nk, ws);
    mmLoadTileAsync(G, &G->B, nk, ws);
    mmIfClose(K, guard, &inIf);
  }
  mmPlainOp(K, "kernel.cp_async_commit");
  compute_stage(G, stage, iters, MI);
  mmPipelineClose(G, loop, nacc, iters, next, &saved, acc);
  if (G->ahead < G->S - 1 && !K->failed)
    wait_group(K, 0, nacc, acc);
}

bool fzKernelBuildWgmmaBody(const FzMatmulNest *m, const FzMatmulTile *t,
                            FzBuilder *at, FzValue *const *caps) {
  char why[192];
  if (!fzWgmmaApplies(m, why, sizeof why) ||
      !fzWgmmaTileCheck(t, why, sizeof why))
    return fzOpEmitError(m->par, "wgmma matmul: %s", why);
  Gen *G = mmGenBegin(m, t, at, caps, 1024);
  if (!G)
    return false;
  KB *K = &G->K;
  int MI = t->bm / (64 * warp_groups(t));
  mmSetupIds(G);
  /* The epilogue's view of the D fragments: "warp row" 4 MI g + w of 16
   * rows, m blocks 64 rows apart, one column of warps over BN. */
  FzValue *warp = mmDivC(K, G->tid, 32);
  G->wm = mmAdd(K, mmMul(K, mmDivC(K, warp, 4), 4 * MI), mmRemC(K, warp, 4));
  G->WM = 16;
  G->MT = MI;
  G->WN = t->bn;
  G->NT = t->bn / 8;
  G->miStride = 64;
  mmSetupTile(G, &G->A, &m->a, true, 0);
  mmSetupTile(G, &G->B, &m->b, false, (int64_t)G->S * t->bm * WBK);
  relayout(G, &G->A);
  relayout(G, &G->B);
  FzValue *acc[2 * MAX_ACC];
  wgmma_loop(G, acc, MI);
  if (!K->failed)
    mmEpilogue(G, acc);
  return mmGenEnd(G, at);
}

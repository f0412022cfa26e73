/* lowering/loop_to_kernel/matmul_split.c - split-K for the tensor-core
 * matmul and conv2d kernels (docs/codegen.md "Split-K"): a GEMM whose
 * output tiles cannot fill the GPU (a conv of ResNet's last stage at
 * batch 1: GEMM 49x512x4608, 8 tiles of 64x64 for 132 SMs) has its k
 * cut into S slices; each slice's block computes a partial tile, and a
 * second kernel adds the partials in order and applies the epilogue
 * once (split_k.c rewrites the nest; the partial nest is an ordinary
 * matmul or conv2d nest of the slice form, FzMatmulNest.splitK).
 *
 * fzMatmulSplitChoose is the cost rule, fzLkMatmulSplitK runs it on a
 * nest before the mappings plan it (pass.c): only on what the
 * tensor-core mapping would take (not small-M nests, not f32 under
 * precision=ieee), with the tile that mapping will choose.
 */
#include <stdlib.h>
#include <string.h>

#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"
#include "lowering/loop_to_kernel/matmul.h"
#include "lowering/loop_to_kernel/matmul_wgmma.h"
#include "lowering/loop_to_kernel/small_m.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int64_t fzMatmulSplitChoose(const FzMatmulNest *m, const FzMatmulTile *t,
                            int64_t forced, int64_t *sliceK) {
  *sliceK = m->K;
  if (m->splitK || forced == 1 || m->K < 1 || m->M < 1 || m->N < 1)
    return 1;
  /* A conv's slice is whole input channels (its loop level cuts the c
   * loop) of a multiple of 8 k (16-byte copies of the weights stay
   * aligned): lcm(KH KW, 8); a 1x1 conv's and a matmul's, whole k
   * tiles. */
  int64_t taps = m->conv.on ? m->conv.KH * m->conv.KW : 1;
  int64_t unit = taps > 1 ? taps / fzLkGcd(taps, 8) * 8 : t->bk;
  int64_t units = ceil_div(m->K, unit);
  int64_t S = forced;
  if (forced < 2) {
    int64_t grid[3], block[3], smem;
    fzMatmulGetLaunch(m, t, grid, block, &smem);
    int64_t tiles = grid[0] * grid[2];
    if (2 * tiles > FZ_LK_TARGET_SMS)
      return 1; /* the tiles fill half the GPU or more */
    /* About one block per SM; at least 4 k tiles per slice; the f32
     * partials (written once, read once) within the operands' bytes. */
    S = ceil_div(FZ_LK_TARGET_SMS, tiles);
    S = min64(S, m->K / (4 * (int64_t)t->bk));
    double esz = (double)fzTypeGetStorageSize(m->elt);
    double byBytes = ((double)m->M + (double)m->N) * (double)m->K * esz /
                     (4.0 * (double)m->M * (double)m->N);
    if (byBytes < (double)S)
      S = (int64_t)byBytes;
  }
  S = min64(min64(S, FZ_MATMUL_MAX_SPLIT), units);
  if (S < 2)
    return 1;
  /* Even slices: the fewest units each that S slices need. */
  int64_t per = ceil_div(units, S);
  S = ceil_div(units, per);
  if (S < 2)
    return 1;
  *sliceK = per * unit;
  return S;
}

bool fzLkSplitKParse(const char *text, int64_t *out, char *why,
                     size_t whyLen) {
  const char *src = "split-k";
  if (!text || !*text) {
    text = getenv("FZ_GPU_SPLIT_K");
    src = "FZ_GPU_SPLIT_K";
  }
  *out = 0;
  if (!text || !*text || !strcmp(text, "auto"))
    return true;
  if (!strcmp(text, "off")) {
    *out = 1;
    return true;
  }
  char *end;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end || v < 1 || v > FZ_MATMUL_MAX_SPLIT)
    return fzReasonf(why, whyLen, "%s=%s: expected auto, off or a number of "
                                  "k slices from 1 to %d",
                     src, text, FZ_MATMUL_MAX_SPLIT);
  *out = v;
  return true;
}

/* Whether the small-M mapping takes par (it goes before the tensor-core
 * one, and its own split runs first). */
static bool small_m_takes(FzOp *par, const FzLoopToKernelOptions *o) {
  if (o->noSmallM)
    return false;
  FzContext *ctx = fzOpGetContext(par);
  FzSmallMNest *sm = fzCalloc(ctx, 1, sizeof *sm);
  FzSmallMShape shape;
  bool bad = false;
  bool takes = sm && fzSmallMMatch(par, sm, NULL, 0) &&
               (fzSmallMChoose(sm, o, &shape, &bad, NULL, 0) || bad);
  fzFree(ctx, sm);
  return takes;
}

/* The tile the tensor-core mapping will give m (matmul_mapping.c's
 * plan); false where it reports an error instead. */
static bool planned_tile(const FzMatmulNest *m, const FzLoopToKernelOptions *o,
                         FzMatmulTile *t) {
  FzStringRef text = fzStringRefFromCString(o->mmaTile ? o->mmaTile : "");
  if (o->wgmma && fzWgmmaWanted(m, o->wgmmaMinTiles, NULL, 0))
    return fzWgmmaTileChoose(m, text, t, NULL, 0);
  return fzMatmulTileChoose(m, text, t, NULL, 0) &&
         fzMatmulTileFits(m, t, NULL, 0);
}

bool fzLkMatmulSplitK(FzOp *func, FzOp **par, const FzLoopToKernelOptions *o) {
  if (o->noMma)
    return true;
  int64_t mode;
  char why[200];
  if (!fzLkSplitKParse(o->splitK, &mode, why, sizeof why))
    return fzOpEmitError(*par, "lower-loop-to-kernel: %s", why);
  if (mode == 1)
    return true;
  FzOp *p = fzLkFoldMatmulBatch(*par);
  if (!p)
    return false;
  *par = p;
  FzContext *ctx = fzOpGetContext(p);
  FzMatmulNest *m = fzCalloc(ctx, 1, sizeof *m);
  if (!m)
    return fzOpEmitError(p, "lower-loop-to-kernel: out of memory");
  bool isConv = false, ok = true;
  bool matmul = fzKernelMatchMatmulNest(p, m, NULL, 0);
  bool tc = (matmul || fzKernelMatchConvNest(p, m, &isConv, NULL, 0)) &&
            !m->splitK && !m->conv.nhwc && !(matmul && small_m_takes(p, o)) &&
            !(fzTypeGetKind(m->elt) == FZ_TYPE_F32 &&
              fzPrecisionResolve(o->precision, 0) == FZ_PRECISION_IEEE);
  FzMatmulTile t;
  int64_t sliceK = 0;
  int64_t S = tc && planned_tile(m, o, &t)
                  ? fzMatmulSplitChoose(m, &t, mode, &sliceK)
                  : 1;
  if (S > 1) {
    /* The loop level cuts the k loop: a conv's c loop, sliceK / (KH KW)
     * channels per slice. */
    int64_t taps = m->conv.on ? m->conv.KH * m->conv.KW : 1;
    FzLkSplit split = {m->kloop, m->K / taps, S, sliceK / taps, true};
    ok = fzLkSplitNest(func, par, &split,
                       m->conv.on ? "a conv2d nest" : "a matmul nest");
  }
  fzFree(ctx, m);
  return ok;
}

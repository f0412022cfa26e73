/* lowering/loop_to_kernel/small_m_split.c - k cut across blocks for a
 * small-M nest whose columns alone cannot fill the GPU (a weight of
 * 4096 columns along n is 16 blocks of 256 columns: K must be shared
 * by several blocks), with split_k.c's deterministic two-pass reduction:
 * the partial sums' nest, its slice dim first, which the small-M mapping
 * takes (block_id.y = the slice), then the nest that adds them in order
 * and applies the epilogue (the elementwise mapping; beyond 64 slices
 * the columns mapping). The second kernel reads SB x M x N f32 (the
 * split is limited so that this stays under an eighth of the weight's
 * bytes: fzSmallMChoose) and costs a launch.
 */
#include "lowering/loop_to_kernel/small_m.h"

bool fzSmallMSplit(FzOp *func, FzOp **par, const FzLoopToKernelOptions *o) {
  FzSmallMNest m;
  FzSmallMShape s;
  bool bad; /* a bad small-m-shape: the mapping's plan reports it */
  if (o->noSmallM || !fzSmallMMatch(*par, &m, NULL, 0) || m.dimSplit >= 0 ||
      m.numDims >= FZ_SMALL_M_MAX_DIMS ||
      !fzSmallMChoose(&m, o, &s, &bad, NULL, 0) || s.splitBlocks <= 1)
    return true;
  FzLkSplit split = {m.kloop, m.K, s.splitBlocks, s.sliceK, false};
  return fzLkSplitNest(func, par, &split, "a small-M nest");
}

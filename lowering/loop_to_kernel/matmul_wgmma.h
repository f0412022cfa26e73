/* lowering/loop_to_kernel/matmul_wgmma.h - the Hopper (sm_90a) matmul
 * kernels: the same nests, epilogues and launches as matmul.h's mma.sync
 * GEMM, with the warp-group mma (kernel.wgmma) reading both operands
 * from 128-byte-swizzled shared memory (docs/codegen.md "Warp-group
 * matmul (sm_90a)"). lower-loop-to-kernel's matmul mapping takes this
 * path under its `wgmma` option (fzGpuCompile: --gpu-arch sm_90a) for
 * the nests it applies to; the others keep mma.sync.
 *
 * The tile is an FzMatmulTile whose text form is matmul.h's with BK 64
 * and W = 4 x warp groups (1 or 2): "128x256x64:8w:4s" is two warp
 * groups of 64x256, 4 stages of 48 KiB.
 */
#ifndef FZ_LOWERING_MATMUL_WGMMA_H
#define FZ_LOWERING_MATMUL_WGMMA_H

#include "lowering/loop_to_kernel/matmul.h"

/* Whether nest m can take the wgmma kernel: a matmul or an NHWC conv
 * gathered along its channels, of bf16 or f16 operands that all allow
 * 16-byte copies. False with the reason. */
bool fzWgmmaApplies(const FzMatmulNest *m, char *why, size_t whyLen);

/* fzWgmmaApplies and, when minTiles > 1, N >= 128, K >= 128 and at least minTiles
 * 128x128 output tiles times the batch (FzLoopToKernelOptions.
 * wgmmaMinTiles). False with the reason. */
bool fzWgmmaWanted(const FzMatmulNest *m, int64_t minTiles, char *why,
                   size_t whyLen);

/* Checks tile t for the wgmma generator: BK 64, 1 or 2 warp groups
 * (4 or 8 warps), BM = 64 x warp groups x (1 or 2), BN a multiple of 64
 * up to 256 with at most 256 accumulator columns per thread (BM / 64 /
 * groups x BN), chunks that divide among the threads, 2 to 8 stages of
 * (BM + BN) x 64 elements within 227 KiB. False with the reason. */
bool fzWgmmaTileCheck(const FzMatmulTile *t, char *why, size_t whyLen);

/* The tile of nest m: `text` when not empty, else $FZ_GPU_WGMMA_TILE
 * when set, else by size: 128x256x64:8w:4s when M >= 128 and N >= 256,
 * 128x128x64:8w:4s when M >= 128 and N >= 128, 64xBNx64:4w:4s
 * otherwise (BN 128 or 64). False with the reason. */
bool fzWgmmaTileChoose(const FzMatmulNest *m, FzStringRef text,
                       FzMatmulTile *out, char *why, size_t whyLen);

/* The kernel's one-line plan, e.g. "matmul 4096x4096x4096 bf16, tile
 * 128x256x64:8w:4s:g8, wgmma (sm_90a) m64n256k16, 2 warp groups,
 * cp.async pipeline into 128-byte-swizzled stages". */
void fzWgmmaDescribe(const FzMatmulNest *m, const FzMatmulTile *t,
                     char *buf, size_t n);

/* Builds the body of nest m's wgmma kernel with tile t at `at` (as
 * fzKernelBuildMatmulBody; the launch is fzMatmulGetLaunch's). False
 * after reporting an error at the nest. */
bool fzKernelBuildWgmmaBody(const FzMatmulNest *m, const FzMatmulTile *t,
                            FzBuilder *at, FzValue *const *caps);

#endif /* FZ_LOWERING_MATMUL_WGMMA_H */

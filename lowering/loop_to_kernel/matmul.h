/* lowering/loop_to_kernel/matmul.h - tensor-core GEMM kernels for the
 * matmul nests of the loop level.
 *
 * lower-graph-to-loop lowers a matmul group (with its fused epilogue) to
 *
 *   loop.parallel (%b..., %i, %j) = (0...) to (B..., M, N) step (1...) {
 *     %acc = loop.for %k = 0 to K step 1 iter_args(%s = 0.0) -> (f32) {
 *       %a = loop.load %A[b', %i, %k]   (or [b', %k, %i]: transpose_a)
 *       %b = loop.load %B[b'', %k, %j]  (or [b'', %j, %k]: transpose_b)
 *       extf, extf, mulf, addf, yield
 *     }
 *     ... epilogue: scalar ops of %acc, constants, and loads at any
 *         indices computed from the ivs (bias[j], residual[i, j], ...)
 *     loop.store %v, %C[...]            (one or more outputs)
 *   }
 *
 * fzKernelMatchMatmulNest recognizes such a nest (bf16 or f16 operands,
 * or f32 ones loaded without extf: tf32 kernels, which the mapping builds
 * only under its tf32 option;
 * the leading indices of A and B are batch ivs or constants) and
 * fzKernelBuildMatmulBody builds the body of its kernel.func: a pipelined
 * mma.sync GEMM (docs/codegen.md "Tensor-core matmul"). It is the first
 * mapping of lower-loop-to-kernel (matmul_mapping.c), which outlines the
 * kernel and launches it like every other nest:
 *   - one block per BM x BN output tile (grouped launch order for L2
 *     reuse), batch along grid.z; W warps of WM x WN warp tiles;
 *   - a ring of S shared-memory stages filled by kernel.cp_async (16-byte
 *     chunks, zero-filled past the matrix edges), one kernel.barrier per
 *     BK step, XOR-swizzled rows so that kernel.ldmatrix is free of bank
 *     conflicts;
 *   - ldmatrix (trans where the operand is not k-contiguous) and
 *     m16n8k16 kernel.mma with f32 accumulators in registers (f32
 *     operands: 32-bit shared loads and m16n8k8 tf32 kernel.mma);
 *   - the epilogue cloned per accumulator element with the element's
 *     (b, i, j), stores of two adjacent elements as one 4- or 8-byte
 *     kernel.vector_store where the output allows, guarded only where
 *     the shape does not divide the tile.
 * Where the 16-byte copies are impossible (a contiguous extent that is not
 * a multiple of 8 elements, a strided or offset view), the kernel loads
 * tiles with scalar loads and stores into the same shared layout (one
 * stage, two barriers per step): still tensor cores, slower loads.
 *
 * conv2d nests (fzKernelMatchConvNest) are the same GEMM, implicit: A's
 * tile is gathered from the input window by scalar loads (m and k
 * decomposed by constant divisions, zero outside the input), B's copied
 * from the weights (16-byte copies where K % 8 == 0), the epilogue's
 * rows decomposed back into (n, oh, ow) and stored element by element.
 *
 * The tile configuration is a parameter (FzMatmulTile; text form
 * "BMxBNxBK:Ww:Ss[:gG][:sync]", e.g. "128x256x32:8w:4s", or with the warp
 * grid "128x256x32:2x4w:4s"), so the GPU benchmark can sweep several.
 * fzMatmulTileChoose takes it from an explicit text, else from the
 * environment variable FZ_GPU_MMA_TILE, else from the problem's size.
 *
 * Ownership: the nest description points into the IR (no allocation);
 * the builder creates IR at the insertion point it is given.
 */
#ifndef FZ_LOWERING_MATMUL_H
#define FZ_LOWERING_MATMUL_H

#include "fz/kernel.h"

/* The most kernel arguments and parallel dims a matched nest may have. */
#define FZ_MATMUL_MAX_CAPTURES 48
#define FZ_MATMUL_MAX_DIMS FZ_GRAPH_MAX_RANK
#define FZ_MATMUL_MAX_STORES 8

/* One index of an operand's load: parallel dim `dim`, or the constant
 * `value` when dim < 0. */
typedef struct FzMatmulIndex {
  int dim;
  int64_t value;
} FzMatmulIndex;

/* A or B as the k loop reads it. The last two indices are the matrix
 * ones; the others (`numBatch`) are batch indices. */
typedef struct FzMatmulOperand {
  FzValue *buffer;      /* defined outside the nest */
  FzOp *load;           /* its loop.load in the k loop */
  size_t rank;
  FzMatmulIndex batch[FZ_MATMUL_MAX_DIMS];
  size_t numBatch;
  bool kLast;           /* indices (..., mn, k) rather than (..., k, mn) */
  /* The cp.async copy path applies: the last index has stride 1, its
   * extent and the other strides are whole copies of copyBytes (16, 8 or
   * 4 bytes; 0 means 16), the buffer starts aligned to a copy. */
  bool asyncCopies;
  int copyBytes;
} FzMatmulOperand;

/* The geometry of a conv2d nest taken as an implicit GEMM
 * (FzMatmulNest.conv): parallel dims (n, oc, oh, ow); rows m = (n, oh,
 * ow), columns j = oc, k = (c, kh, kw);
 *   A[m, k] = x[n, c, oh*sh + kh*dh - padH, ow*sw + kw*dw - padW]
 * (zero outside the input), B[j, k] = w[j, c, kh, kw]. */
typedef struct FzMatmulConv {
  bool on;
  int64_t batch, C, H, W;  /* the input */
  int64_t OH, OW, KH, KW;
  int64_t sh, sw, dh, dw;
  int64_t padH, padW;      /* the window's offset before the input */
  bool edgeH, edgeW;       /* some window position leaves the input */
  /* 1x1, stride 1, no padding: per image n a plain GEMM out[n] =
   * w[OC, C] x[n][C, OH*OW] (rows oc, columns p = oh*OW + ow, k = c,
   * batch n; both operands by 16-byte copies where they allow them). */
  bool pointwise;
  /* NHWC (channels-last) nest: parallel dims (n, oh, ow, oc), rows m =
   * (n, oh, ow) (dims 0..2), columns oc (dim 3, contiguous in the
   * output), A[m, k] = x[n, ih, iw, c]. kHwc: k = (kh KW + kw) C + c (a
   * k-tile runs along C: A's chunks are whole vectors of consecutive
   * channels, the weights read as w'[oc, kh, kw, c], repacked at compile
   * time by conv_repack.c or 1x1), else k = (c KH + kh) KW + kw as in
   * NCHW (weights w[oc, c, kh, kw] that are not constants: A gathered
   * element by element). Never pointwise, never split. */
  bool nhwc, kHwc;
} FzMatmulConv;

typedef struct FzMatmulNest {
  FzOp *par;            /* the loop.parallel */
  FzOp *kloop;          /* the loop.for over k */
  FzType *elt;          /* bf16, f16 or f32 (tf32 kernels): A's and B's */
  int64_t M, N, K;
  size_t numDims;       /* parallel dims */
  int64_t extent[FZ_MATMUL_MAX_DIMS];
  int dimI, dimJ;       /* the parallel dims of i (rows) and j (columns) */
  FzMatmulOperand a, b;
  FzOp *stores[FZ_MATMUL_MAX_STORES];
  size_t numStores;
  /* Every store writes two adjacent elements of a pair (j, j + 1) with
   * one vector store: indices exactly the parallel ivs, the last one j,
   * stride 1, N even, other strides even, aligned buffer. */
  bool pairStores;
  /* Values used in the nest and defined outside it, in first-use order:
   * constants (cloned into the kernel) and the kernel's arguments. */
  FzValue *captures[FZ_MATMUL_MAX_CAPTURES];
  size_t numCaptures;
  /* A conv2d nest (conv.on): A is the input's gathered window (a, with
   * no asyncCopies: scalar loads), B the weights (b, k-contiguous), M =
   * batch * OH * OW, N = OC, K = C * KH * KW, dimI -1 (the rows span
   * dims 0, 2, 3), dimJ 1, no batch dims, no pairStores. A pointwise
   * one (conv.pointwise): A the weights, B the input image [C, OH*OW]
   * (k-major), M = OC, N = OH * OW, K = C, dimI 1, dimJ -1 (the columns
   * span dims 2, 3), batch dim 0; pairStores of (ow, ow + 1). */
  FzMatmulConv conv;
  /* The partial nest of a k split (split_k.c; docs/codegen.md "Split-K"):
   * splitK > 0 slices of sliceK of the GEMM's k (the last one shorter
   * where they overhang K) along parallel dim dimSplit, the last one (a
   * conv's fifth), whose block is grid.y; the nest stores each slice's
   * partial sum. splitK 0: not a split nest (dimSplit, sliceK unused). */
  int64_t splitK, sliceK;
  int dimSplit;
} FzMatmulNest;

/* Recognizes `par` (a loop.parallel) as a matmul nest with a fused
 * epilogue and fills *out. False when it is not one: `why` (may be NULL)
 * receives the reason, one line, for a remark. Never reports errors. */
bool fzKernelMatchMatmulNest(FzOp *par, FzMatmulNest *out, char *why,
                             size_t whyLen);

/* Recognizes `par` as a conv2d nest (dialects/loop/nest_match.h; groups
 * 1, bf16 or f16 input and weights, or f32 ones for tf32, the weight a
 * plain load w[oc, c, kh, kw]) with a fused epilogue and fills *out for
 * the implicit GEMM. False when it is not one: *isConv says whether par
 * has a conv2d nest's shape at all (then `why` has the reason, one line,
 * for a remark). Never reports errors. */
bool fzKernelMatchConvNest(FzOp *par, FzMatmulNest *out, bool *isConv,
                           char *why, size_t whyLen);

/* A kernel's tiling. */
typedef struct FzMatmulTile {
  int bm, bn, bk;        /* block tile */
  int warpsM, warpsN;    /* warp grid: warp tiles of bm/warpsM x bn/warpsN */
  int stages;            /* shared-memory ring depth (cp.async path) */
  int groupM;            /* block tiles of rows launched together (L2) */
  bool sync;             /* force the scalar-load path (testing) */
} FzMatmulTile;

/* Parses "BMxBNxBK:Ww:Ss[:gG][:sync]" (W a warp count, or WMxWN) into
 * *out and checks it (fzMatmulTileCheck). False with the reason in why. */
bool fzMatmulTileParse(FzStringRef text, FzMatmulTile *out, char *why,
                       size_t whyLen);
/* Checks what the generator needs: positive sizes, bk a multiple of 16,
 * warp tiles multiples of 16 x 16, at most 1024 threads, 2 to 8 stages,
 * shared memory within 227 KiB for 16-bit elements, copies that divide
 * evenly among the threads, power-of-two rows of chunks. */
bool fzMatmulTileCheck(const FzMatmulTile *t, char *why, size_t whyLen);
/* The tile for nest m: `text` when not NULL/empty, else $FZ_GPU_MMA_TILE
 * when set, else by size: 128x128x32:4w:4s when M, N >= 256,
 * 64x64x32:4w:3s otherwise (the fastest measured on an H100); a conv
 * with M >= 256: 128x128x32:4w:3s, or 128x64x32:4w:4s for N <= 64 (no
 * spills). False with the reason (a bad text or variable). */
bool fzMatmulTileChoose(const FzMatmulNest *m, FzStringRef text,
                        FzMatmulTile *out, char *why, size_t whyLen);
/* Writes the tile's text form (parseable back) into buf. */
void fzMatmulTileFormat(const FzMatmulTile *t, char *buf, size_t n);

/* Checks what the generator itself can hold for nest m with tile t (at
 * most 64 m16n8 accumulator tiles per thread, i.e. a 64x128 or 128x64
 * warp tile: 256 f32 registers; 64 copies per thread and stage; 8 k16
 * steps per BK) and the shared memory of its element type (f32 stages
 * take twice fzMatmulTileCheck's 16-bit bytes) within 227 KiB. False
 * with the reason. */
bool fzMatmulTileFits(const FzMatmulNest *m, const FzMatmulTile *t,
                      char *why, size_t whyLen);

/* The launch of the kernel for nest m with tile t: grid.x the output
 * tiles, grid.z the batch, 32 * warps threads, the dynamic shared bytes
 * of the stages. */
void fzMatmulGetLaunch(const FzMatmulNest *m, const FzMatmulTile *t,
                       int64_t grid[3], int64_t block[3],
                       int64_t *sharedBytes);
/* Whether the kernel uses the cp.async pipeline (both operands allow
 * 16-byte copies, or for a conv the weights do: the gathered input is
 * then loaded by scalar loads into the same stages; and the tile does
 * not ask for `sync`), else scalar tile loads in one stage. */
bool fzMatmulUsesAsyncCopies(const FzMatmulNest *m, const FzMatmulTile *t);
/* 2 * batch * M * N * K: the floating-point operations of the product. */
int64_t fzMatmulGetFlops(const FzMatmulNest *m);
/* The k split of nest m (not itself split) with tile t: the slices S
 * (1: none) and the GEMM's k per slice into *sliceK (a multiple of
 * `unit`: the tile's BK for a matmul, lcm(KH KW, 8) for a conv so that
 * a slice is whole input channels and keeps 16-byte copies aligned; K
 * when S is 1). `forced` > 1 asks for that many (clamped to what K
 * allows), else chosen (docs/codegen.md "Split-K"): only where the
 * output tiles cannot fill half of the FZ_LK_TARGET_SMS SMs, S for
 * about one block per SM, each slice at least 4 k-tiles, the f32
 * partials (S M N 4 bytes) within the operands' bytes, at most
 * FZ_MATMUL_MAX_SPLIT; even slices. */
#define FZ_MATMUL_MAX_SPLIT 64
int64_t fzMatmulSplitChoose(const FzMatmulNest *m, const FzMatmulTile *t,
                            int64_t forced, int64_t *sliceK);

/* ", split-k S (k slices of KS; ...)" for a split nest, else "", into
 * buf (the plans' suffix). */
void fzMatmulSplitText(const FzMatmulNest *m, char *buf, size_t n);

/* The kernel's one-line plan (its fuse.plan), e.g. "matmul 4096x4096x4096
 * bf16, tile 128x256x32:2x4w:4s:g8, cp.async pipeline", into buf. */
/* The nest's batch: the launch's grid.z (a pointwise conv's images, a
 * batched matmul's batch dims; 1 for other convs). */
int64_t fzMatmulGetBatch(const FzMatmulNest *m);
/* The shape part of a conv2d nest's plan line: "conv2d [NHWC ]implicit
 * GEMM NxCxHxW -> OC channels, ..., (GEMM MxNxK[, k = ...])". */
void fzMatmulConvText(const FzMatmulNest *m, char *buf, size_t n);
void fzMatmulDescribe(const FzMatmulNest *m, const FzMatmulTile *t,
                      char *buf, size_t n);

/* Builds the body of the kernel of nest m with tile t at `at`: the end
 * of a kernel.func's entry block, whose ops so far define caps[i], the
 * kernel's value of m->captures[i] (its arguments, constants and the
 * setup ops it recomputes; lower-loop-to-kernel's outline provides
 * them). The kernel's launch is fzMatmulGetLaunch's; the caller adds
 * kernel.return and erases the nest. The builder moves past what it
 * creates. False after reporting an error at the nest. */
bool fzKernelBuildMatmulBody(const FzMatmulNest *m, const FzMatmulTile *t,
                             FzBuilder *at, FzValue *const *caps);

#endif /* FZ_LOWERING_MATMUL_H */

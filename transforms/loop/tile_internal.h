/* transforms/loop/tile_internal.h - what the two files of
 * tile-contractions share.
 *
 *   tile_contractions.c  matching a contraction nest, the pass, the
 *                        regions (full tiles, edges, the scalar rest)
 *   tile_emit.c          generating one region: B packing, the
 *                        register-blocked microkernel and its epilogue
 *
 * A contraction nest (what lower-graph-to-loop makes of a matmul and its
 * fused epilogue) is a top-level
 *
 *   loop.parallel (d0, ..., dI, ..., dJ) {          dJ: the last dim
 *     [pre ops]
 *     %acc = loop.for %k = 0 to K iter_args(%a = init) {
 *       ... %x (not depending on dJ), %y (not depending on dI) ...
 *       %p = loop.mulf %x, %y      (either order)
 *       %n = loop.addf %a, %p      (either order)
 *       loop.yield %n
 *     }
 *     [epilogue ops reading %acc, loads, ... ; stores at [..., dJ]]
 *   }
 *
 * Every value of the nest gets a dependence mask: the parallel dims it
 * depends on (bits 0..n-1), the k loop (TK) and the accumulator (TACC).
 */
#ifndef FZ_TRANSFORMS_LOOP_TILE_INTERNAL_H
#define FZ_TRANSFORMS_LOOP_TILE_INTERNAL_H

#include "fz/loop.h"
#include "ir/util.h"

#define TILE_MAX_DIMS 16
#define TILE_MAX_ROWS 16
#define TILE_MAX_VECS 8
#define TK ((uint64_t)1 << 62)
#define TACC ((uint64_t)1 << 63)

typedef struct TileNest {
  FzContext *ctx;
  FzOp *par;               /* the loop.parallel */
  FzBlock *body;           /* its body */
  size_t n;                /* its dims */
  int64_t trips[TILE_MAX_DIMS];
  size_t dI, dJ;           /* the row dim and the column (last) dim */
  FzOp *red;               /* the loop.for reduction */
  FzBlock *redBody;
  int64_t K;
  FzOp *add, *mul;         /* the accumulation and its product */
  FzValue *x, *y;          /* product operands: x has no dJ, y no dI */
  FzPtrMap deps;           /* FzValue / FzOp -> mask + 1 (see above) */
  bool packY;              /* y is computed into a packed buffer */
} TileNest;

/* The dependence mask of v (0 for values defined outside the nest). */
uint64_t tileDeps(const TileNest *T, FzValue *v);

/* One region of the output: rows [row0, row0 + rowBlocks * mr) and
 * columns [col0, col0 + colBlocks * nv * W). */
typedef struct TileRegion {
  unsigned mr, nv;
  int64_t row0, rowBlocks;
  int64_t col0, colBlocks;
} TileRegion;

typedef struct TileGen {
  TileNest *T;
  FzContext *ctx;
  FzLoc *loc;
  unsigned W;              /* lanes */
  FzType *idx, *vecF32;
  FzBuilder top;           /* before the nest, at the function level */
  FzBuilder consts;        /* at the start of the function body */
  FzValue *packed;         /* [ydims..., Nv * K] f32, or NULL */
  size_t numYDims;         /* P dims (besides dJ) the packed y keeps */
  size_t yDims[TILE_MAX_DIMS];
  int64_t packedCols;      /* Nv: columns the packed buffer holds */
  int64_t panelCols;       /* Nf: those in panels of NR columns */
  int64_t NR;
  bool failed;
} TileGen;

/* Emits (at G->top) the nests that compute y for every (batch dims of
 * y, column < packedCols, k) into G->packed: columns below panelCols at
 * (j / NR * K + k) * NR + j % NR, the others at panelCols * K +
 * ((j - panelCols) / W * K + k) * W + (j - panelCols) % W. */
bool tileEmitPack(TileGen *G);
/* Emits (at G->top) the loop.parallel of region R. */
bool tileEmitRegion(TileGen *G, const TileRegion *R);

#endif /* FZ_TRANSFORMS_LOOP_TILE_INTERNAL_H */

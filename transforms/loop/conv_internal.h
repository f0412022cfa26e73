/* transforms/loop/conv_internal.h - what the two files of
 * tile-convolutions share.
 *
 *   conv_tile.c  the CPU's checks on a matched conv2d nest, the tile
 *                shape, the regions, the pass
 *   conv_emit.c  the packing nests (weights, padded input) and the
 *                register-blocked tiles of one region
 *
 * The nest and its matcher: dialects/loop/nest_match.h (shared with
 * the GPU's implicit GEMM).
 */
#ifndef FZ_TRANSFORMS_LOOP_CONV_INTERNAL_H
#define FZ_TRANSFORMS_LOOP_CONV_INTERNAL_H

#include "transforms/loop/tile_internal.h"

typedef struct ConvGen {
  TileGen G;               /* G.T = &C->T; G.W: lanes of the region */
  ConvNest *C;
  unsigned MR;             /* rows of a packed weight block */
  int64_t K;               /* CG * KH * KW */
  FzValue *wp;             /* weights [ceil(M / MR) * K * MR] f32: (m, k)
                              at ((m / MR) * K + k) * MR + m % MR, k as
                              tapMajor says */
  bool wpConst;            /* wp is a loop.constant_buffer packed at
                              compile time (constant weights) */
  bool tapMajor;           /* the terms k of a block in (kh, kw, c)
                              order: k = (kh KW + kw) CG + c (the
                              channel-vector tiles' inner loop over c);
                              else (c, kh, kw) */
  FzValue *xp;             /* the padded input or NULL (see below) */
  int64_t Hp, Wq;          /* its rows and columns per phase */
  FzValue *zero;           /* f32 0.0 at the function level */
} ConvGen;

typedef enum ConvResult { CV_DECLINED, CV_DONE, CV_FAILED } ConvResult;

/* The flat mapping of one nest (conv_flat.c): the grid, the buffers. */
typedef struct Flat {
  ConvGen Z;
  int64_t S, Hq, Wq, P, tiles, Lp, Lx; /* phases, rows and columns per
                                          phase, grid positions, tiles,
                                          positions of the sums and of a
                                          phase */
  bool direct;                         /* x read in place */
  bool overlap;                        /* in place with a last tile that
                                          ends at P (Lp == P, the plane no
                                          whole number of tiles): it
                                          recomputes positions of the one
                                          before */
  bool blocksOuter;                    /* the channel blocks outside the
                                          grid tiles in the parallel
                                          loop (else inside) */
  FzValue *xq;                         /* [N][C][S][Lx] (or a view of x) */
  FzValue *s;                          /* the sums [N][M][Lp] (or NULL) */
  FzOp *epi;                           /* the epilogue nest over (n, m, p)
                                          emitted in the tiles, or NULL */
  unsigned NV;                         /* vectors of a tile: of grid
                                          positions, or (chan) of output
                                          channels */
  bool chan;                           /* channel vectors: tiles of R
                                          output positions (P = OH OW,
                                          no grid columns) x NV vectors
                                          of W output channels, the
                                          sums [N][P][M] */
  unsigned R;                          /* chan: positions of a tile */
} Flat;

/* conv_flat_epi.c: whether the epilogue can run on the accumulators (the
 * grid is the output plane); then F->epi is the collapsed nest (which
 * replaced F->Z.C->T.par). False otherwise (Z.G.failed after an
 * internal error). */
bool convFlatPrepareEpilogue(Flat *F);
/* F->epi's body at b for the tile's row m and W positions from p, whose
 * sums are acc. */
bool convFlatEmitEpilogue(Flat *F, FzBuilder *b, FzValue *n, FzValue *m,
                          FzValue *p, FzValue *acc);
/* Prefetches at b the output elements that F->epi's stores write for
 * the tile's row m at position p (the line that the vector store at p
 * will write), before the tile's reduction: a store that misses the
 * caches otherwise waits for its line at the end of the tile. Stores
 * whose indices need more than index arithmetic get none. */
bool convFlatEmitPrefetch(Flat *F, FzBuilder *b, FzValue *n, FzValue *m,
                          FzValue *p);
/* Erases F->epi and the sums buffer with its views (F->s = NULL). */
void convFlatDropSums(Flat *F);

/* Whether the flat mapping (conv_flat.c) can take C. */
bool convFlatApplies(const ConvNest *C);
/* Whether the channel-vector tiles (conv_flat.c, Flat.chan) can take C
 * with W lanes: groups == 1, M a multiple of W. */
bool convFlatChanApplies(const ConvNest *C, unsigned W);
/* The flat mapping of C (channel-vector tiles when chan): declines (changing nothing but function-level
 * constants) or rewrites the nest; CV_FAILED after a failure half-way. */
ConvResult convFlatTransform(ConvNest *C, const FzTileConvolutionsOptions *o,
                             bool chan);

/* Emits (at G.top) the weight packing nest into Z->wp. */
bool convEmitPackWeights(ConvGen *Z);
/* Sets Z->wp: the packed weights as a constant buffer made here when
 * they are a constant buffer loaded at [m, c, kh, kw] (Z->wpConst), else
 * a loop.alloc filled by convEmitPackWeights's nest (freed by the
 * caller). */
bool convPackWeights(ConvGen *Z);
/* Emits (at G.top) the nests that fill Z->xp, [N][C][Hp][sw][Wq] f32
 * ([N][C][Hp][Wq] when sw is 1): element (n, c, hp, p, q) is
 * x[n, c, hp + hOff, q * sw + p + wOff] inside the input, 0 outside, so
 * that the terms of output column ow and tap (kh, kw) read
 * xp[n, ch, oh*sh + kh*dh, (kw*dw) % sw, ow + (kw*dw) / sw],
 * consecutive along ow. */
bool convEmitPackInput(ConvGen *Z);
/* Emits (at G.top) the loop.parallel of region R with G.W lanes; shared:
 * every tile's rows read the same input channels. */
bool convEmitRegion(ConvGen *Z, const TileRegion *R, bool shared);
/* A copy at b of v, a tree of plain ops and loads of C's nest, with the
 * ivs replaced as map says (map: iv -> value; it also memoizes). */
FzValue *convClone(ConvGen *Z, FzBuilder *b, FzValue *v, FzPtrMap *map);

#endif /* FZ_TRANSFORMS_LOOP_CONV_INTERNAL_H */

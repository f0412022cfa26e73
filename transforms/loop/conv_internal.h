/* transforms/loop/conv_internal.h - what the two files of
 * tile-convolutions share.
 *
 *   conv_tile.c  matching a conv2d nest (ConvNest), the tile shape, the
 *                regions, the pass
 *   conv_emit.c  the packing nests (weights, padded input) and the
 *                register-blocked tiles of one region
 *
 * A conv2d nest is what lower-graph-to-loop makes of graph.conv2d (NCHW)
 * and its fused epilogue:
 *
 *   loop.parallel (n, m, oh, ow) {
 *     [pre ops: index arithmetic]
 *     %acc = loop.for %c = 0 to CG iter_args(%a0 = 0.0) {
 *       %r1 = loop.for %kh = 0 to KH iter_args(%a1 = %a0) {
 *         %r2 = loop.for %kw = 0 to KW iter_args(%a2 = %a1) {
 *           %x = loop.load %X[n, ch(m, c), ih(oh, kh), iw(ow, kw)]
 *                [loop.extf to f32]
 *           %w = w(m, c, kh, kw)        (loads and arithmetic)
 *           %p = loop.mulf %x, %w       (either order)
 *           [%p = loop.select %inb, %p, 0.0]
 *           loop.yield (loop.addf %a2, %p)
 *         } ...
 *     [epilogue ops reading %acc; stores at [..., ow]]
 *   }
 *
 * where ih is oh*sh + kh*dh + hOff (clamped into [0, H) when the window
 * can leave the input) and iw likewise, and %inb is true exactly where
 * the unclamped positions lie inside the input. The matcher checks all of
 * this by evaluating the index expressions over their whole domain, so
 * any equivalent spelling of them (after canonicalize or cse) matches.
 */
#ifndef FZ_TRANSFORMS_LOOP_CONV_INTERNAL_H
#define FZ_TRANSFORMS_LOOP_CONV_INTERNAL_H

#include "transforms/loop/tile_internal.h"

/* The ivs the index expressions may use, in this order. */
enum { CV_N, CV_M, CV_OH, CV_OW, CV_C, CV_KH, CV_KW, CV_NUM };

typedef struct ConvNest {
  TileNest T;              /* par, body, n = 4, trips {N, M, OH, OW},
                              dI = 1 (m), dJ = 3 (ow), red = the c loop */
  FzOp *loops[3];          /* the reductions over c, kh, kw */
  FzBlock *bodies[3];
  int64_t ext[3];          /* CG, KH, KW */
  FzValue *vars[CV_NUM];   /* the ivs, by CV_* */
  FzOp *xLoad;             /* the input load */
  bool xExt;               /* its value is extended to f32 (bf16, f16) */
  FzValue *wVal;           /* the weight term (f32), a tree over m, c,
                              kh, kw */
  FzValue *chIdx;          /* the input load's channel index ch(m, c) */
  int64_t C, H, Wi;        /* the input's dims 1, 2, 3 */
  int64_t sh, sw, dh, dw;  /* ih = oh*sh + kh*dh + hOff (unclamped) */
  int64_t hOff, wOff;      /* iw = ow*sw + kw*dw + wOff */
  bool pack;               /* read the input from a zero-padded copy */
  int64_t *chTab;          /* ch(m, c) at m * CG + c (context memory) */
} ConvNest;

typedef struct ConvGen {
  TileGen G;               /* G.T = &C->T; G.W: lanes of the region */
  ConvNest *C;
  unsigned MR;             /* rows of a packed weight block */
  int64_t K;               /* CG * KH * KW */
  FzValue *wp;             /* weights [ceil(M / MR) * K * MR] f32: (m, k)
                              at ((m / MR) * K + k) * MR + m % MR */
  FzValue *xp;             /* the padded input or NULL (see below) */
  int64_t Hp, Wq;          /* its rows and columns per phase */
  FzValue *zero;           /* f32 0.0 at the function level */
} ConvGen;

/* Emits (at G.top) the weight packing nest into Z->wp. */
bool convEmitPackWeights(ConvGen *Z);
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

/* transforms/loop/conv_match.h - the conv2d nest matcher, shared by
 * tile-convolutions (the CPU's register tiles, conv_tile.c) and the
 * tensor-core implicit GEMM of lower-loop-to-kernel
 * (lowering/loop_to_kernel/conv_match.c).
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
 *     [epilogue ops reading %acc; stores]
 *   }
 *
 * where ih is oh*sh + kh*dh + hOff (clamped into [0, H) when the window
 * can leave the input) and iw likewise, and %inb is true exactly where
 * the unclamped positions lie inside the input. convMatch checks all of
 * this by evaluating the index expressions over their whole domain, so
 * any equivalent spelling of them (after canonicalize or cse) matches.
 * What each user needs beyond it (the CPU: stores contiguous along ow
 * and an epilogue that vectorizes; the GPU: groups == 1 and a plain
 * weight load) its own file checks.
 */
#ifndef FZ_TRANSFORMS_LOOP_CONV_MATCH_H
#define FZ_TRANSFORMS_LOOP_CONV_MATCH_H

#include "transforms/loop/tile_internal.h"

/* The ivs the index expressions may use, in this order. */
enum { CV_N, CV_M, CV_OH, CV_OW, CV_C, CV_KH, CV_KW, CV_NUM };
/* Most evaluations a matcher's table may take. */
#define CV_MAX_TABLE ((int64_t)1 << 22)
/* convVarDeps's mark of a dependence on something else than the ivs. */
#define CV_BAD (1u << 16)

typedef struct ConvNest {
  TileNest T;              /* par, body, n = 4, trips {N, M, OH, OW},
                              dI = 1 (m), dJ = 3 (ow), red = the c loop;
                              the caller sets ctx and inits deps */
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
  bool pack;               /* the CPU reads the input from a zero-padded
                              copy (padding, sw > 1 or a 16-bit input) */
  int64_t *chTab;          /* ch(m, c) at m * CG + c (context memory; the
                              caller frees it, also after a refusal) */
} ConvNest;

/* Fills C (ctx and deps set, the rest zero) when par is a conv2d nest as
 * above. False otherwise, with the reason (one line) in why (may be
 * NULL); *isConv (may be NULL) says whether par at least has the shape
 * of one (a 4-d parallel around three nested reductions), for callers
 * that only report refusals of conv nests. Never reports errors. */
bool convMatch(ConvNest *C, FzOp *par, bool *isConv, char *why,
               size_t whyLen);

/* The ivs v depends on (bits CV_*); CV_BAD when it depends on anything
 * else of the nest (an accumulator, an op that is not plain or, unless
 * loads, a load). */
uint32_t convVarDeps(const ConvNest *C, FzValue *v, bool loads, int depth);
/* Adds scale * v to the affine form (coef[CV_NUM], *c0) of the ivs;
 * false when v is not affine in them. */
bool convAffine(const ConvNest *C, FzValue *v, int64_t scale, int64_t *coef,
                int64_t *c0, int depth);

#endif /* FZ_TRANSFORMS_LOOP_CONV_MATCH_H */

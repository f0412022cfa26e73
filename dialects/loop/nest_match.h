/* dialects/loop/nest_match.h - the loop-nest analyses that several
 * layers share: the contraction nest's dependence masks (TileNest), and
 * recognizing a conv2d nest (ConvNest, convMatch). They sit with the loop
 * dialect, below both users: the CPU's loop transforms
 * (transforms/loop: tile-contractions, tile-convolutions) and the GPU's
 * mappings (lowering/loop_to_kernel). Private to the library.
 *
 * A contraction nest (what lower-graph-to-loop makes of a matmul and its
 * fused epilogue) is a top-level loop.parallel around one loop.for
 * reduction whose body accumulates a product (transforms/loop/
 * tile_internal.h draws it). Every value of the nest gets a dependence
 * mask: the parallel dims it depends on (bits 0..n-1), the k loop (TK)
 * and the accumulator (TACC).
 */
#ifndef FZ_DIALECTS_LOOP_NEST_MATCH_H
#define FZ_DIALECTS_LOOP_NEST_MATCH_H

#include "fz/loop.h"
#include "ir/util.h"

#define TILE_MAX_DIMS 16
#define TK            ((uint64_t)1 << 62)
#define TACC          ((uint64_t)1 << 63)

typedef struct TileNest {
  FzContext *ctx;
  FzOp *par;     /* the loop.parallel */
  FzBlock *body; /* its body */
  size_t n;      /* its dims */
  int64_t trips[TILE_MAX_DIMS];
  size_t dI, dJ; /* the row dim and the column (last) dim */
  FzOp *red;     /* the loop.for reduction */
  FzBlock *redBody;
  int64_t K;
  FzOp *add, *mul; /* the accumulation and its product */
  FzValue *x, *y;  /* product operands: x has no dJ, y no dI */
  FzPtrMap deps;   /* FzValue / FzOp -> mask + 1 (see above) */
  bool packY;      /* y is computed into a packed buffer */
} TileNest;

/* The dependence mask of v (0 for values defined outside the nest). */
uint64_t tileDeps(const TileNest *T, FzValue *v);

/* Ops allowed in a nest besides loops, loads and stores: one scalar
 * result, no region. */
bool tilePlainOp(FzOp *op);
/* Whether v is defined inside T's nest. */
bool tileInNest(TileNest *T, FzValue *v);

/* Whether reduction loop `loop` (in par's body) has the bounds of a k
 * slice (split_match.c): lo = muli(sb, KS), hi = minsi(addi(lo, KS), K)
 * with sb the iv of a parallel dim of par whose extent is ceil(K / KS)
 * (bounds 0..extent step 1), the loop's step 1. Fills *dim (sb's dim),
 * *sliceK (KS) and *K. */
bool splitMatchBounds(FzOp *par, FzOp *loop, int *dim, int64_t *sliceK,
                      int64_t *K);

/*===--- conv2d nests (conv_match.c) ------------------------------------===*
 *
 * The matcher is shared by tile-convolutions (the CPU's register tiles,
 * transforms/loop/conv_tile.c) and the tensor-core implicit GEMM of
 * lower-loop-to-kernel (lowering/loop_to_kernel/matmul_conv.c).
 *
 * A conv2d nest is what lower-graph-to-loop makes of graph.conv2d and its
 * fused epilogue. NCHW (the default layout):
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
 * NHWC (layout = "nhwc", docs/dialects/graph.md "Layouts"): the output
 * channel innermost, the input channel the innermost reduction:
 *
 *   loop.parallel (n, oh, ow, m) {
 *     %acc = loop.for %kh = 0 to KH iter_args(%a0 = 0.0) {
 *       %r1 = loop.for %kw = 0 to KW iter_args(%a1 = %a0) {
 *         %r2 = loop.for %c = 0 to CG iter_args(%a2 = %a1) {
 *           %x = loop.load %X[n, ih(oh, kh), iw(ow, kw), ch(m, c)]
 *           ... as above (the weight still w(m, c, kh, kw)) ...
 *     [epilogue; stores at [n, oh, ow, m]]
 *   }
 *
 * where ih is oh*sh + kh*dh + hOff (clamped into [0, H) when the window
 * can leave the input) and iw likewise, and %inb is true exactly where
 * the unclamped positions lie inside the input. convMatch checks all of
 * this by evaluating the index expressions over their whole domain, so
 * any equivalent spelling of them (after canonicalize or cse) matches.
 * What each user needs beyond it (the CPU: stores contiguous along ow
 * and an epilogue that vectorizes; the GPU: groups == 1 and a plain
 * weight load) its own file checks. The match says which layout it
 * found (ConvNest.layout); a user without a mapping for one declines it
 * (the nest then runs as generic loops) rather than read it as the
 * other.
 *
 * With allowSplit, the matcher also takes the partial nest of a k split
 * (lower-loop-to-kernel's split-k, lowering/loop_to_kernel/split_k.c): a
 * fifth parallel dim, the slice sb, last, and the c loop over
 * [sb CS, min(sb CS + CS, CG)) (splitMatchBounds); the index expressions
 * never use sb. Only in NCHW (the split slices the outermost loop, c
 * there).
 *===------------------------------------------------------------------===*/

/* The ivs the index expressions may use, in this order: their roles,
 * whatever the layout puts where. */
enum { CV_N, CV_M, CV_OH, CV_OW, CV_C, CV_KH, CV_KW, CV_NUM };

/* The data layout of a matched nest. */
typedef enum ConvLayout {
  CONV_NCHW, /* parallel (n, m, oh, ow), reductions (c, kh, kw) */
  CONV_NHWC, /* parallel (n, oh, ow, m), reductions (kh, kw, c) */
} ConvLayout;
/* Most evaluations a matcher's table may take. */
#define CV_MAX_TABLE ((int64_t)1 << 22)
/* convVarDeps's mark of a dependence on something else than the ivs. */
#define CV_BAD (1u << 16)

typedef struct ConvNest {
  TileNest T;              /* par, body, n = 4, trips in the nest's order
                              (NCHW {N, M, OH, OW}, NHWC {N, OH, OW, M}),
                              dI, dJ = 1 (m), 3 (ow) in NCHW, 2 (ow), 3
                              (m) in NHWC, red = the outermost reduction;
                              the caller sets ctx and inits deps */
  ConvLayout layout;       /* out: the layout the nest has */
  int parDim[4];           /* the parallel dim of CV_N, CV_M, CV_OH, CV_OW
                              (NCHW 0, 1, 2, 3; NHWC 0, 3, 1, 2) */
  int redVar[3];           /* the role (CV_C, CV_KH, CV_KW) of loops[l]
                              (NCHW c, kh, kw; NHWC kh, kw, c) */
  int64_t outDims[4];      /* N, M, OH, OW, whatever the layout */
  FzOp *loops[3];          /* the reductions, outermost first */
  FzBlock *bodies[3];
  int64_t ext[3];          /* CG, KH, KW (by role, not nest order) */
  FzValue *vars[CV_NUM];   /* the ivs, by CV_* */
  FzOp *xLoad;             /* the input load */
  bool xExt;               /* its value is extended to f32 (bf16, f16) */
  FzValue *wVal;           /* the weight term (f32), a tree over m, c,
                              kh, kw */
  FzValue *chIdx;          /* the input load's channel index ch(m, c) */
  int64_t C, H, Wi;        /* the input's channels, height and width
                              (dims 1, 2, 3 in NCHW, 3, 1, 2 in NHWC) */
  int64_t sh, sw, dh, dw;  /* ih = oh*sh + kh*dh + hOff (unclamped) */
  int64_t hOff, wOff;      /* iw = ow*sw + kw*dw + wOff */
  bool pack;               /* the CPU reads the input from a zero-padded
                              copy (padding, sw > 1 or a 16-bit input) */
  int64_t *chTab;          /* ch(m, c) at m * CG + c (context memory; the
                              caller frees it, also after a refusal) */
  bool allowSplit;         /* in: a k split's partial nest is accepted */
  int64_t slices, sliceC;  /* out: its slices (the 5th dim's extent) and
                              channels per slice; 0 when not split */
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

#endif /* FZ_DIALECTS_LOOP_NEST_MATCH_H */

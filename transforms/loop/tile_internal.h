/* transforms/loop/tile_internal.h - what the files of tile-contractions
 * and tile-convolutions share.
 *
 *   tile_contractions.c  matching a contraction nest, the pass, the
 *                        regions (full tiles, edges, the scalar rest);
 *                        the dependence masks and vectorization checks
 *   tile_emit.c          generating one region: B packing, the
 *                        register-blocked microkernel and its epilogue;
 *                        the op builders and the instance machinery
 *                        (TileInst) that conv_emit.c reuses
 *   (dialects/loop/nest_match.h: TileNest, its masks, the conv matcher)
 *   conv_tile.c          tile-convolutions: its CPU checks, the pass
 *   conv_emit.c          its packing nests and register tiles
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

#include "dialects/loop/builder.h"
#include "dialects/loop/nest_match.h"

#define TILE_MAX_ROWS 16
#define TILE_MAX_VECS 8

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
  unsigned W; /* lanes */
  FzType *idx, *vecF32;
  FzBuilder top;    /* before the nest, at the function level */
  FzBuilder consts; /* at the start of the function body */
  FzValue *packed;  /* [ydims..., Nv * K] f32, or NULL */
  size_t numYDims;  /* P dims (besides dJ) the packed y keeps */
  size_t yDims[TILE_MAX_DIMS];
  int64_t packedCols; /* Nv: columns the packed buffer holds */
  int64_t panelCols;  /* Nf: those in panels of NR columns */
  int64_t NR;
  int64_t prefetch; /* small-M: elements ahead to prefetch y (0: none) */
  bool failed;
} TileGen;

/*===--- Shared by tile-contractions and tile-convolutions ----------------===*/

/* Computes the dependence masks of T's nest (T->par, body, n, red and
 * redBody set): the body's ivs, then every op of the body in order. */
bool tileNestComputeDeps(TileNest *T);
/* The root of a buffer value (through views). */
FzValue *tileRootOf(FzValue *buffer);
/* Whether op (a load or store) reads/writes consecutive elements when
 * dJ advances lane by lane: dJ's iv is its last index, the last dim has
 * stride 1, and no other index depends on dJ. */
bool tileAccessVectorizes(const TileNest *T, FzOp *op);
/* Whether the dJ-dependent op can run lanes at a time. */
bool tileOpVectorizes(const TileNest *T, FzOp *op);

/* Ops are built with FzLoopBuilder (dialects/loop/builder.h). The loop
 * builder at b for G's emission: G's location, index constants at
 * G->consts, failures to G->failed. */
static inline FzLoopBuilder tileAt(TileGen *G, const FzBuilder *b) {
  FzLoopBuilder B = {.ctx = G->ctx, .ip = *b, .loc = G->loc,
                     .consts = &G->consts, .index = G->idx,
                     .failed = &G->failed};
  return B;
}

/* Transitional: the builders of the old tile* family that conv_emit.c
 * and conv_tile.c (and conv_flat.c, conv_flat_epi.c) still call, as
 * one-line forwards to FzLoopBuilder.
 * They go when those files move to it (docs/architecture.md, "Building
 * IR": a mechanical change left until the conv work in flight has
 * merged). Do not use them in new code. */
static inline FzOp *tileMake(TileGen *G, FzBuilder *b, const char *name,
                             size_t n, FzValue *const *ops, FzType *rt) {
  FzLoopBuilder B = tileAt(G, b);
  return fzBOp(&B, name, n, ops, rt);
}
static inline FzValue *tileMake1(TileGen *G, FzBuilder *b, const char *name,
                                 size_t n, FzValue *const *ops, FzType *rt) {
  FzLoopBuilder B = tileAt(G, b);
  return fzBOp1(&B, name, n, ops, rt);
}
static inline FzValue *tileConstIndex(TileGen *G, int64_t v) {
  FzLoopBuilder B = tileAt(G, &G->consts);
  return fzBIndex(&B, v);
}
static inline FzValue *tileIndexBinary(TileGen *G, FzBuilder *b,
                                       const char *name, FzValue *a,
                                       FzValue *c) {
  FzLoopBuilder B = tileAt(G, b);
  return fzBIndexOp(&B, name, a, c);
}
static inline FzValue *tileAffine(TileGen *G, FzBuilder *b, FzValue *a,
                                  int64_t s, int64_t t) {
  FzLoopBuilder B = tileAt(G, b);
  return fzBAffine(&B, a, s, t);
}
static inline FzOp *tileMakeLoop(TileGen *G, FzBuilder *b, FzOpState *st,
                                 size_t nargs, FzType *const *argTypes,
                                 FzBuilder *inner) {
  FzLoopBuilder B = tileAt(G, b), in;
  FzOp *loop = fzBLoop(&B, st, nargs, argTypes, &in);
  if (loop)
    *inner = in.ip;
  return loop;
}
static inline FzOp *tileMakeParallel(TileGen *G, size_t n, const int64_t *ub,
                                     FzValue **ivs, FzBuilder *inner) {
  FzLoopBuilder B = tileAt(G, &G->top), in;
  FzOp *par = fzBParallel(&B, n, ub, ivs, &in);
  if (par)
    *inner = in.ip;
  return par;
}
static inline FzType *tileVectorType(TileGen *G, FzType *scalar) {
  FzLoopBuilder B = tileAt(G, &G->top);
  return fzBVectorType(&B, G->W, scalar);
}
static inline FzOp *tileMakeFor(TileGen *G, FzBuilder *b, FzValue *lb,
                                FzValue *ub, FzValue *st, size_t n,
                                FzValue *const *init, FzType *t,
                                FzBuilder *inner) {
  FzLoopBuilder B = tileAt(G, b), in;
  FzOp *loop = fzBFor(&B, lb, ub, st, n, init, t, &in);
  if (loop)
    *inner = in.ip;
  return loop;
}
static inline FzValue *tileCloneWith(TileGen *G, FzBuilder *b, FzOp *op,
                                     FzValue *const *ops, FzType *rt) {
  FzLoopBuilder B = tileAt(G, b);
  return fzBCloneWith(&B, op, ops, rt);
}

/* One region being emitted: the values of the original nest are
 * materialized on demand for an instance (r, c) of a tile (row r of its
 * mr rows, vector c of its nv vectors; tile_emit.c says how). The
 * emitter of the region sets rows, cols, outer (the other dims'
 * indices), the builders pre (before the reduction loop), kb (inside
 * it) and post (after it), and accOut (the reduction's results, one per
 * (r, c) at r * nv + c). */
#define TILE_SLOTS ((TILE_MAX_ROWS + 1) * (TILE_MAX_VECS + 1))
typedef struct TileInst {
  TileGen *G;
  TileNest *T;
  const TileRegion *R;
  FzBuilder pre, kb, post;
  FzValue *rows[TILE_MAX_ROWS];  /* i of each row */
  FzValue *cols[TILE_MAX_VECS];  /* j of lane 0 of each vector */
  FzValue *pbase;                /* the tile's panel in the packed y */
  FzValue *outer[TILE_MAX_DIMS]; /* the other dims' indices */
  FzValue *k, *koff;
  FzValue *accIn[TILE_MAX_ROWS * TILE_MAX_VECS];
  FzValue *accOut[TILE_MAX_ROWS * TILE_MAX_VECS];
  FzPtrMap memo[TILE_SLOTS], splats[TILE_SLOTS];
} TileInst;

/* NULL (and G->failed) when out of memory. */
TileInst *tileInstCreate(TileGen *G, const TileRegion *R);
void tileInstDestroy(TileInst *I);
/* v (a value of T's nest, or one defined outside it) for instance
 * (r, c): a vector<W> when v depends on dJ or on the accumulator. */
FzValue *tileMaterialize(TileInst *I, FzValue *v, int r, int c);
/* The same, splatted to vector<W> when it is a scalar. */
FzValue *tileAsVector(TileInst *I, FzValue *v, int r, int c);
/* The epilogue and the stores of T's body, as vector stores at I->post,
 * for every instance of the region. */
bool tileEmitStores(TileInst *I);

/*===--- tile-contractions ------------------------------------------------===*/

/* Emits (at G->top) the nests that compute y for every (batch dims of
 * y, column < packedCols, k) into G->packed: columns below panelCols at
 * (j / NR * K + k) * NR + j % NR, the others at panelCols * K +
 * ((j - panelCols) / W * K + k) * W + (j - panelCols) % W. */
bool tileEmitPack(TileGen *G);
/* Emits (at G->top) the loop.parallel of region R. */
bool tileEmitRegion(TileGen *G, const TileRegion *R);

/*===--- tile-contractions: the small-M mappings -------------------------===*/

#define TILE_DOT_MAX_COLS 8

/* Whether every value of T's reduction that depends on k can be
 * computed W lanes at a time along k (tile_dot.c). */
bool tileDotApplies(const TileNest *T, unsigned W);
/* Emits (at G->top) the dot form for every column of T's nest: groups
 * of J columns, MR rows at a time, `plan` as each nest's fuse.plan. */
bool tileEmitDot(TileGen *G, unsigned J, unsigned MR, const char *plan);

typedef enum TileSmallM {
  TILE_SMALL_M_DECLINED, /* nothing changed */
  TILE_SMALL_M_DONE,     /* the nest was replaced */
  TILE_SMALL_M_FAILED,   /* an internal error after emitting began */
} TileSmallM;

/* The small-M mappings for T when its row count is at most
 * o->smallM (tile_small_m.c). */
TileSmallM tileSmallM(TileNest *T, const FzTileContractionsOptions *o);

#endif /* FZ_TRANSFORMS_LOOP_TILE_INTERNAL_H */

/* transforms/loop/conv_flat.c - tile-convolutions' flat mapping: the
 * output plane as one vectorized dim, so that the register tiles stay
 * full whatever the output width (ResNet's 14x14 and 7x7 planes are 0.9
 * and 0.4 vectors of 16 per row: the row mapping of conv_emit.c runs
 * them in 4-lane and scalar tiles).
 *
 * For NCHW, any groups (a tile's rows load each input vector once when
 * they read the same input channels, as with groups == 1, else once per
 * row: depthwise). With the input split into its sh x sw stride phases and padded
 * (element (ph, pw, hq, wq) of channel c holds x[c, hq sh + ph + hOff,
 * wq sw + pw + wOff], 0 outside; Hq x Wq per phase, Wq = OW + (KW - 1)
 * dw / sw), tap (kh, kw) of output (oh, ow) reads phase ((kh dh) % sh,
 * (kw dw) % sw) at hq = oh + (kh dh) / sh, wq = ow + (kw dw) / sw: at
 * flat position p + off(kh, kw) of the phase's plane, p = oh Wq + ow.
 * So W consecutive p read W consecutive floats for every tap:
 *
 *   Xq = the phases, [N][C][sh sw][Lx] f32, zeros around (or x itself,
 *        viewed [N][C][1][H W], for an f32 1x1 stride-1 unpadded conv
 *        whose plane is whole vectors)
 *   S  = raw sums [N][M][Lp], Lp = the grid OH x Wq in whole tiles
 *   loop.parallel (t) over (n x grid tiles x channel blocks), blocks
 *     fastest (the tile's input window stays in L1/L2 for every block),
 *     or (n x channel blocks x grid tiles) where blocks_outer says:
 *       prefetch the lines of S (or of the output) the tile will store
 *       acc[MR][NV] = loop.for c, kh, kw:
 *           acc[r][v] = fma(splat(Wp[m0 + r, (c, kh, kw)]),
 *                           Xq[n, c, phase, p0 + v W + off(kh, kw)],
 *                           acc[r][v])
 *       vector stores into S[n, m0 + r, p0 + v W]
 *   the original nest, its reduction replaced by init + S[n, m, oh Wq
 *   + ow] (a strided view of S): the epilogue as an elementwise nest,
 *   which emit-llvm vectorizes along ow.
 *
 * The columns ow in [OW, Wq) of the grid are computed and never read
 * (OW / Wq of the lanes are useful: 7 of 9 at 7x7 with a 3x3 pad 1, 56
 * of 58 at 56x56), as are the grid positions past OH Wq in the last
 * tile. Sums are computed in (c, kh, kw) order, one fma per term, from
 * 0; the reduction's initial value is added after (the interpreter's
 * tolerance covers the rounding).
 *
 * The channel-vector tiles (Flat.chan, emit_chan_tiles; groups == 1, M
 * a multiple of W) read the same phases the other way round: R output
 * positions x NV vectors of W output channels, per term NV weight
 * vectors of a block packed [M / MC][K][MC] (MC = NV W, aligned lines)
 * and R broadcast input elements, the sums [N][P][M] over the P = OH OW
 * positions only (no grid columns), read by the epilogue nest through a
 * view with strides [P M, 1, OW M, M]. (c, kh, kw) at stride 1; (kh, kw,
 * c), the weights packed in that order (ConvGen.tapMajor), at larger
 * strides.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fz/loop.h"
#include "transforms/loop/conv_internal.h"

/* The padded phases' most bytes. */
#define FL_MAX_BYTES ((int64_t)1 << 31)
/* Most stride phases (sh * sw). */
#define FL_MAX_PHASES 16

static int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

static FzValue *ibin(TileGen *G, FzBuilder *b, const char *name, FzValue *a,
                     int64_t c) {
  return tileIndexBinary(G, b, name, a, tileConstIndex(G, c));
}

static FzValue *add(TileGen *G, FzBuilder *b, FzValue *a, FzValue *c) {
  return tileIndexBinary(G, b, "loop.addi", a, c);
}

static FzType *buffer_type(TileGen *G, size_t rank, const int64_t *shape,
                           const int64_t *strides) {
  return fzBufferTypeGet(G->ctx, rank, shape, fzF32TypeGet(G->ctx), strides,
                         0, NULL);
}

static FzValue *make_alloc(TileGen *G, size_t rank, const int64_t *shape) {
  FzType *bt = buffer_type(G, rank, shape, NULL);
  if (!bt)
    return (G->failed = true, NULL);
  FzOpState st;
  fzOpStateInit(&st, G->ctx, FZ_STR("loop.alloc"), G->loc);
  fzOpStateAddResults(&st, 1, &bt);
  FzOp *op = fzBuilderCreate(&G->top, &st);
  return op ? fzOpGetResult(op, 0) : (G->failed = true, NULL);
}

static FzValue *make_view(TileGen *G, FzBuilder *b, FzValue *src, FzType *t) {
  FzOpState st;
  fzOpStateInit(&st, G->ctx, FZ_STR("loop.view"), G->loc);
  fzOpStateAddOperands(&st, 1, &src);
  fzOpStateAddResults(&st, 1, &t);
  FzOp *op = t ? fzBuilderCreate(b, &st) : NULL;
  return op ? fzOpGetResult(op, 0) : (G->failed = true, NULL);
}

/*===--- Whether and how ---------------------------------------------------===*/

/* The output channels per group, Mg, when input channel ch(m, c) is
 * (m / Mg) CG + c for every (m, c) (ONNX's groups); 0 otherwise. The
 * tiles compute ch from it: the reduction that holds the nest's own
 * expression is gone by then (the epilogue nest is rewritten first). */
static int64_t group_rows(const ConvNest *C) {
  int64_t M = C->T.trips[CV_M], CG = C->ext[0];
  if (CG <= 0 || C->C % CG != 0 || M % (C->C / CG) != 0)
    return 0;
  int64_t Mg = M / (C->C / CG);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < CG; ++c)
      if (C->chTab[m * CG + c] != (m / Mg) * CG + c)
        return 0;
  return Mg;
}

bool convFlatApplies(const ConvNest *C) {
  return C->sh * C->sw <= FL_MAX_PHASES && group_rows(C) > 0 &&
         fzOpGetNumResults(C->T.red) == 1;
}

bool convFlatChanApplies(const ConvNest *C, unsigned W) {
  return convFlatApplies(C) && group_rows(C) == C->T.trips[CV_M] &&
         W >= 2 && C->T.trips[CV_M] % W == 0;
}

/* Whether the mr channels from m0 on read the same input channels (every
 * channel when groups == 1): the tile then loads each input vector once
 * for its rows, else once per row (depthwise, most grouped convs). */
static bool rows_share(const ConvNest *C, int64_t m0, int64_t mr) {
  int64_t CG = C->ext[0];
  for (int64_t r = 1; r < mr; ++r)
    for (int64_t c = 0; c < CG; ++c)
      if (C->chTab[(m0 + r) * CG + c] != C->chTab[m0 * CG + c])
        return false;
  return true;
}

static bool blocks_share(const ConvNest *C, int64_t row0, int64_t blocks,
                         int64_t mr) {
  for (int64_t b = 0; b < blocks; ++b)
    if (!rows_share(C, row0 + b * mr, mr))
      return false;
  return true;
}

/* Half-cycles of one tile of mr x nv vectors over K terms (as
 * conv_tile.c's: two fmas and two loads a cycle), plus its stores. */
static int64_t tile_cost(int64_t K, int64_t mr, int64_t nv, bool shared) {
  if (mr <= 0)
    return 0;
  int64_t fmas = mr * nv, loads = (shared ? nv : mr * nv) + mr;
  /* + 4: a term's addressing and loop overhead, which favours tiles of
   * more fmas per term among those of equal fma and load counts. */
  return K * ((fmas > loads ? fmas : loads) + 4) + 2 * mr * nv + 40;
}

/* Fills the geometry of F for NV vectors per tile; false when it does not
 * fit. */
static bool geometry(Flat *F, const ConvNest *C, unsigned W, unsigned nv,
                     bool direct) {
  int64_t N = C->T.trips[CV_N], OH = C->T.trips[CV_OH];
  int64_t OW = C->T.trips[CV_OW];
  F->S = C->sh * C->sw;
  F->Hq = OH + (C->ext[1] - 1) * C->dh / C->sh;
  F->Wq = OW + (C->ext[2] - 1) * C->dw / C->sw;
  F->P = OH * F->Wq;
  int64_t tile = (int64_t)nv * W;
  F->tiles = ceil_div(F->P, tile);
  F->Lp = F->tiles * tile;
  F->Lx = F->Lp + (F->Hq - OH) * F->Wq + (F->Wq - OW);
  F->direct = direct;
  F->overlap = false;
  if (direct && F->Lp != F->P) {
    /* In place, the last tile moved back to end at the plane's end: it
     * recomputes positions of the one before instead of reading past
     * the plane (the padded grid computes as many). */
    if (F->P < tile)
      return false;
    F->overlap = true;
    F->Lp = F->Lx = F->P;
  }
  return N * C->C * F->S * F->Lx * 4 <= FL_MAX_BYTES &&
         N * C->T.trips[CV_M] * F->Lp * 4 <= FL_MAX_BYTES;
}

/* Whether C reads x in place: f32, 1x1, stride 1, no padding, an
 * identity layout, a plane of whole vectors. */
static bool reads_in_place(const ConvNest *C, unsigned W) {
  FzValue *x = fzOpGetOperand(C->xLoad, 0);
  FzType *t = fzValueGetType(x);
  return !C->xExt && C->ext[1] == 1 && C->ext[2] == 1 && C->sh == 1 &&
         C->sw == 1 && C->hOff == 0 && C->wOff == 0 &&
         C->H == C->T.trips[CV_OH] && C->Wi == C->T.trips[CV_OW] &&
         fzShapedTypeGetRank(t) == 4 && !fzBufferTypeGetStrides(t) &&
         fzShapedTypeGetDim(t, 1) == C->C && C->H * C->Wi >= (int64_t)W;
}

/* The tile shape: MR x NV with MR NV <= budget, the cheapest over the
 * whole output (remainder rows and the grid's last tile counted). */
static void choose(Flat *F, const ConvNest *C,
                   const FzTileConvolutionsOptions *o, unsigned W,
                   unsigned *MR) {
  int64_t M = C->T.trips[CV_M], K = C->T.K;
  unsigned budget = o->accumulators     ? o->accumulators
                    : o->vectorBits >= 512 ? 20
                                           : 12;
  /* LLVM loads a term's mr broadcasts, and with the kw loop unrolled
   * the next term's input vectors, before the fmas: the accumulators and
   * those must fit the registers (32 zmm with AVX-512, else 16), or the
   * loop spills and shuffles registers. Measured at 512 bits (one core,
   * GFLOP/s of the best run): 12 x 2 spilled (0.27 of the fma peak);
   * 5 x 4 beat 6 x 4 (24 accumulators) on the 3x3 64 -> 64 at 56x56
   * (115 against 104) and 256 -> 256 at 14x14 (150 against 135), equal
   * at 7x7. */
  int64_t regs = o->vectorBits >= 512 ? 32 : 16;
  int64_t extraV = o->vectorBits >= 512 ? 1 : 0;
  bool direct = reads_in_place(C, W), bestDirect = false;
  int64_t best = -1;
  *MR = 1;
  F->NV = 1;
  /* Both ways (in place, padded), the cheaper; in place on a tie (no
   * copy, and the epilogue on the accumulators where it applies). */
  for (int pass = 0; pass < (direct ? 2 : 1); ++pass) {
    bool d = direct && pass == 0;
    for (int64_t mr = 1; mr <= TILE_MAX_ROWS && mr <= M; ++mr) {
      if (o->rows && mr != (int64_t)o->rows)
        continue;
      for (int64_t nv = 1; nv <= TILE_MAX_VECS; ++nv) {
        if ((o->vectors && nv != (int64_t)o->vectors) ||
            (!(o->rows && o->vectors) &&
             (mr * nv > (int64_t)budget ||
              mr * nv + mr + 1 + extraV * nv > regs)))
          continue;
        Flat g;
        if (!geometry(&g, C, W, (unsigned)nv, d))
          continue;
        int64_t fb = M / mr, rm = M % mr;
        bool shF = blocks_share(C, 0, fb, mr);
        bool shR = rm == 0 || rows_share(C, fb * mr, rm);
        int64_t cost = g.tiles * (fb * tile_cost(K, mr, nv, shF) +
                                  tile_cost(K, rm, nv, shR));
        if (best < 0 || cost < best ||
            (cost == best && (d || !bestDirect) &&
             mr * nv > (int64_t)(*MR * F->NV))) {
          best = cost;
          *MR = (unsigned)mr;
          F->NV = (unsigned)nv;
          bestDirect = d;
        }
      }
    }
  }
  if (best < 0 || !geometry(F, C, W, F->NV, bestDirect))
    F->tiles = 0;
}

/* The channel-vector tiles' shape and grid (F->chan): NV vectors of W
 * channels, NV the largest of 4, 3, 2, 1 that divides M / W, and R
 * positions, as many as the accumulator budget and the registers allow
 * (a term's NV weight vectors, one broadcast: R NV + NV + 1 registers;
 * 6 x 4 and 8 x 3 at 512 bits). FZ_CPU_CONV_TILE's RxV (o->rows,
 * o->vectors) is positions x channel vectors here. False when it does
 * not fit. */
static bool chan_choose(Flat *F, const ConvNest *C,
                        const FzTileConvolutionsOptions *o, unsigned W) {
  int64_t N = C->T.trips[CV_N], M = C->T.trips[CV_M];
  int64_t OH = C->T.trips[CV_OH], OW = C->T.trips[CV_OW];
  int64_t regs = o->vectorBits >= 512 ? 32 : 16;
  int64_t budget = o->accumulators        ? o->accumulators
                   : o->vectorBits >= 512 ? 24
                                          : 12;
  int64_t nc = 0, r = 0;
  if (o->rows && o->vectors) {
    r = o->rows;
    nc = o->vectors;
  } else {
    for (nc = 4; nc > 1 && (M / W) % nc != 0; --nc)
      ;
    int64_t a = budget / nc, b = (regs - 1 - nc) / nc;
    r = a < b ? a : b;
    r = r > TILE_MAX_ROWS ? TILE_MAX_ROWS : r;
  }
  if (nc < 1 || r < 1 || M % (nc * W) != 0 || r > TILE_MAX_ROWS ||
      r * nc > TILE_MAX_ROWS * TILE_MAX_VECS)
    return false;
  F->chan = true;
  F->NV = (unsigned)nc;
  F->R = (unsigned)r;
  F->S = C->sh * C->sw;
  F->Hq = OH + (C->ext[1] - 1) * C->dh / C->sh;
  F->Wq = OW + (C->ext[2] - 1) * C->dw / C->sw;
  F->P = OH * OW;
  if (F->P < r)
    return false;
  F->tiles = ceil_div(F->P, r);
  /* The last tile moved back to end at P: it recomputes positions of
   * the one before (the sums are a fresh buffer, read after the tiles). */
  F->overlap = F->P % r != 0;
  F->Lp = F->P;
  F->direct = reads_in_place(C, W);
  F->Lx = F->direct ? F->P : F->Hq * F->Wq + (F->Wq - OW);
  return N * C->C * F->S * F->Lx * 4 <= FL_MAX_BYTES &&
         N * M * F->Lp * 4 <= FL_MAX_BYTES;
}

/* Bytes that stay in a core's L2 across the tiles of one parallel loop
 * (half of a server core's 2 MiB). */
#define FL_L2_BYTES ((int64_t)1 << 20)

/* Whether the channel blocks go outside the grid tiles: when the input
 * that every block reads (one image's phases) stays in L2 and either
 * the weights do not (each grid tile would read them all from L3) or
 * the output is the larger stream (written a block's rows at a time, in
 * order, rather than every channel's a tile at a time). Measured at
 * 56x56 on one core with the output prefetched: the 1x1 64 -> 256 (0.8
 * MB in, 3.2 MB out) at 0.69 of the fma peak against 0.50; the 1x1
 * 256 -> 64 (3.2 MB in) at 0.28 against 0.53 the other way round. */
static bool blocks_outer(const Flat *F) {
  const ConvNest *C = F->Z.C;
  int64_t x = C->C * F->S * F->Lx * 4;
  int64_t w = C->T.trips[CV_M] * F->Z.K * 4;
  int64_t y = C->T.trips[CV_M] * F->Lp * 4;
  return x <= FL_L2_BYTES && (w > FL_L2_BYTES || y > 2 * x);
}

/*===--- The padded phases ------------------------------------------------===*/

static bool emit_phases(Flat *F) {
  ConvGen *Z = &F->Z;
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  int64_t N = C->T.trips[CV_N];
  int64_t shape[4] = {N, C->C, F->S, F->Lx};
  if (!(F->xq = make_alloc(G, 4, shape)))
    return false;
  /* The phases that some tap reads (a 1x1 stride-2 conv reads one of
   * four): the others are left unwritten. */
  bool used[FL_MAX_PHASES] = {false};
  int64_t nUsed = 0;
  for (int64_t kh = 0; kh < C->ext[1]; ++kh)
    for (int64_t kw = 0; kw < C->ext[2]; ++kw) {
      int64_t ph = (kh * C->dh) % C->sh * C->sw + (kw * C->dw) % C->sw;
      nUsed += !used[ph];
      used[ph] = true;
    }
  /* Zeros everywhere, then the input where it lies. */
  FzValue *iv[4];
  FzBuilder b;
  if (nUsed == F->S) {
    if (!tileMakeParallel(G, 4, shape, iv, &b))
      return false;
    FzValue *zops[6] = {Z->zero, F->xq, iv[0], iv[1], iv[2], iv[3]};
    tileMake(G, &b, "loop.store", 6, zops, NULL);
  } else {
    int64_t zshape[3] = {N, C->C, F->Lx};
    for (int64_t ph = 0; ph < F->S; ++ph) {
      if (!used[ph])
        continue;
      if (!tileMakeParallel(G, 3, zshape, iv, &b))
        return false;
      FzValue *zops[6] = {Z->zero, F->xq, iv[0], iv[1], tileConstIndex(G, ph),
                          iv[2]};
      tileMake(G, &b, "loop.store", 6, zops, NULL);
    }
  }
  FzValue *xBuf = fzOpGetOperand(C->xLoad, 0);
  FzType *xElt = fzValueGetType(fzOpGetResult(C->xLoad, 0));
  for (int64_t ph = 0; ph < C->sh; ++ph) {
    /* Row hq of phase ph holds input row hq sh + ph + hOff. */
    int64_t h0 = ceil_div(-C->hOff - ph, C->sh);
    int64_t h1 = ceil_div(C->H - C->hOff - ph, C->sh);
    h0 = h0 < 0 ? 0 : h0;
    h1 = h1 > F->Hq ? F->Hq : h1;
    bool any = false;
    for (int64_t pw = 0; pw < C->sw; ++pw)
      any = any || used[ph * C->sw + pw];
    if (h1 <= h0 || !any)
      continue;
    int64_t ub[3] = {N, C->C, h1 - h0};
    if (!tileMakeParallel(G, 3, ub, iv, &b))
      return false;
    FzValue *hq = tileAffine(G, &b, iv[2], 1, h0);
    FzValue *ih = tileAffine(G, &b, iv[2], C->sh, h0 * C->sh + ph + C->hOff);
    FzValue *rowOff = tileAffine(G, &b, hq, F->Wq, 0);
    for (int64_t pw = 0; pw < C->sw; ++pw) {
      if (!used[ph * C->sw + pw])
        continue;
      int64_t q0 = ceil_div(-C->wOff - pw, C->sw);
      int64_t q1 = ceil_div(C->Wi - C->wOff - pw, C->sw);
      q0 = q0 < 0 ? 0 : q0;
      q1 = q1 > F->Wq ? F->Wq : q1;
      if (q1 <= q0)
        continue;
      FzValue *ops[3] = {tileConstIndex(G, q0), tileConstIndex(G, q1),
                         tileConstIndex(G, 1)};
      FzBuilder in;
      FzOp *loop = tileMakeFor(G, &b, ops[0], ops[1], ops[2], 0, NULL, NULL,
                               &in);
      if (!loop)
        return false;
      FzValue *q = fzBlockGetArgument(fzLoopGetBody(loop), 0);
      FzValue *iw = tileAffine(G, &in, q, C->sw, pw + C->wOff);
      FzValue *lops[5] = {xBuf, iv[0], iv[1], ih, iw};
      FzValue *v = tileMake1(G, &in, "loop.load", 5, lops, xElt);
      if (C->xExt)
        v = tileMake1(G, &in, "loop.extf", 1, &v, fzF32TypeGet(G->ctx));
      FzValue *sops[6] = {v,
                          F->xq,
                          iv[0],
                          iv[1],
                          tileConstIndex(G, ph * C->sw + pw),
                          add(G, &in, rowOff, q)};
      tileMake(G, &in, "loop.store", 6, sops, NULL);
    }
  }
  return !G->failed;
}

/*===--- The tiles --------------------------------------------------------===*/

/* A loop.for over [0, trip) carrying n vector accumulators. */
static FzOp *acc_loop(Flat *F, FzBuilder *b, int64_t trip, size_t n,
                      FzValue *const *inits, FzBuilder *inner) {
  TileGen *G = &F->Z.G;
  return tileMakeFor(G, b, tileConstIndex(G, 0), tileConstIndex(G, trip),
                     tileConstIndex(G, 1), n, inits, G->vecF32, inner);
}

static void set_yield(TileGen *G, FzOp *loop, size_t n, FzValue *const *vals) {
  for (size_t i = 0; i < n; ++i)
    if (!vals[i])
      G->failed = true;
  if (!G->failed &&
      !fzOpSetOperands(fzBlockGetLastOp(fzLoopGetBody(loop)), n, vals))
    G->failed = true;
}

/* Region of mr channels from row0 in `blocks` blocks, every grid tile. */
static bool emit_tiles(Flat *F, unsigned mr, int64_t row0, int64_t blocks,
                       const char *plan) {
  ConvGen *Z = &F->Z;
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  unsigned W = G->W, NV = F->NV;
  int64_t total = C->T.trips[CV_N] * F->tiles * blocks;
  FzValue *t;
  FzBuilder body;
  FzOp *par = tileMakeParallel(G, 1, &total, &t, &body);
  if (!par ||
      !fzOpSetAttr(par, FZ_STR("fuse.plan"),
                   fzStringAttrGet(G->ctx, fzStringRefFromCString(plan))))
    return false;
  /* t = (n * tiles + pt) * blocks + it, or (n * blocks + it) * tiles +
   * pt when the channel blocks go outside (F->blocksOuter). */
  FzValue *it, *pt, *q;
  if (F->blocksOuter) {
    pt = ibin(G, &body, "loop.remsi", t, F->tiles);
    q = ibin(G, &body, "loop.divsi", t, F->tiles);
    it = ibin(G, &body, "loop.remsi", q, blocks);
    q = ibin(G, &body, "loop.divsi", q, blocks);
  } else {
    it = ibin(G, &body, "loop.remsi", t, blocks);
    q = ibin(G, &body, "loop.divsi", t, blocks);
    pt = ibin(G, &body, "loop.remsi", q, F->tiles);
    q = ibin(G, &body, "loop.divsi", q, F->tiles);
  }
  FzValue *n = q;
  FzValue *m0 = tileAffine(G, &body, it, mr, row0);
  FzValue *p0 = tileAffine(G, &body, pt, (int64_t)NV * W, 0);
  if (F->overlap) {
    FzValue *mops[2] = {p0, tileConstIndex(G, F->P - (int64_t)NV * W)};
    p0 = tileMake1(G, &body, "loop.minsi", 2, mops, G->idx);
  }
  FzValue *wbase = tileAffine(G, &body, it, Z->K * Z->MR,
                              row0 / Z->MR * Z->K * Z->MR);
  size_t na = (size_t)mr * NV;
  FzValue *inits[TILE_MAX_ROWS * TILE_MAX_VECS];
  FzValue *zv = tileMake1(G, &body, "loop.splat", 1, &Z->zero, G->vecF32);
  for (size_t a = 0; a < na; ++a)
    inits[a] = zv;
  if (G->failed)
    return false;
  /* The lines the tile will store, requested before its reduction (at
   * 56x56, 1 core: the 1x1 256 -> 64 from 0.49 to 0.63 of the fma peak,
   * 64 -> 256 from 0.49 to 0.54; the rest unchanged). */
  for (unsigned r = 0; r < mr; ++r) {
    FzValue *m = r ? tileAffine(G, &body, m0, 1, r) : m0;
    for (unsigned v = 0; v < NV; ++v) {
      FzValue *p = v ? tileAffine(G, &body, p0, 1, (int64_t)v * W) : p0;
      if (F->epi) {
        if (!convFlatEmitPrefetch(F, &body, n, m, p))
          return false;
        continue;
      }
      FzValue *pops[4] = {F->s, n, m, p};
      tileMake(G, &body, "loop.prefetch", 4, pops, NULL);
    }
  }
  int64_t KH = C->ext[1], KW = C->ext[2];
  FzBuilder bc, bh, bw;
  FzOp *lc = acc_loop(F, &body, C->ext[0], na, inits, &bc);
  if (!lc)
    return false;
  FzBlock *cb = fzLoopGetBody(lc);
  FzValue *civ = fzBlockGetArgument(cb, 0);
  /* The input channels: one for the tile, or one per row. */
  bool shared = blocks_share(C, row0, blocks, mr);
  FzValue *ch[TILE_MAX_ROWS];
  int64_t Mg = group_rows(C), CG = C->ext[0];
  for (unsigned r = 0; r < (shared ? 1u : mr); ++r) {
    FzValue *m = r ? tileAffine(G, &bc, m0, 1, r) : m0;
    ch[r] = Mg == C->T.trips[CV_M]
                ? civ
                : add(G, &bc, tileAffine(G, &bc, ibin(G, &bc, "loop.divsi",
                                                      m, Mg),
                                         CG, 0),
                      civ);
  }
  FzValue *wc = add(G, &bc, tileAffine(G, &bc, civ, KH * KW * Z->MR, 0), wbase);
  FzValue *args[TILE_MAX_ROWS * TILE_MAX_VECS];
  for (size_t a = 0; a < na; ++a)
    args[a] = fzBlockGetArgument(cb, 1 + a);
  FzOp *lh = acc_loop(F, &bc, KH, na, args, &bh);
  if (!lh)
    return false;
  FzBlock *hb = fzLoopGetBody(lh);
  FzValue *khv = fzBlockGetArgument(hb, 0);
  FzValue *wh = add(G, &bh, tileAffine(G, &bh, khv, KW * Z->MR, 0), wc);
  /* Row phase and offset of tap kh. */
  FzValue *khd = tileAffine(G, &bh, khv, C->dh, 0);
  FzValue *phS = tileAffine(G, &bh, ibin(G, &bh, "loop.remsi", khd, C->sh),
                            C->sw, 0);
  FzValue *offH = tileAffine(G, &bh, ibin(G, &bh, "loop.divsi", khd, C->sh),
                             F->Wq, 0);
  for (size_t a = 0; a < na; ++a)
    args[a] = fzBlockGetArgument(hb, 1 + a);
  FzOp *lw = acc_loop(F, &bh, KW, na, args, &bw);
  if (!lw)
    return false;
  FzBlock *wb = fzLoopGetBody(lw);
  FzValue *kwv = fzBlockGetArgument(wb, 0);
  FzValue *wk = add(G, &bw, tileAffine(G, &bw, kwv, Z->MR, 0), wh);
  FzValue *kwd = tileAffine(G, &bw, kwv, C->dw, 0);
  FzValue *phase = add(G, &bw, phS, ibin(G, &bw, "loop.remsi", kwd, C->sw));
  FzValue *off = add(G, &bw, offH, ibin(G, &bw, "loop.divsi", kwd, C->sw));
  FzValue *pos = add(G, &bw, p0, off);
  FzValue *wv[TILE_MAX_ROWS];
  for (unsigned r = 0; r < mr; ++r) {
    FzValue *lops[2] = {Z->wp, r ? tileAffine(G, &bw, wk, 1, r) : wk};
    FzValue *s = tileMake1(G, &bw, "loop.load", 2, lops, fzF32TypeGet(G->ctx));
    wv[r] = tileMake1(G, &bw, "loop.splat", 1, &s, G->vecF32);
  }
  FzValue *next[TILE_MAX_ROWS * TILE_MAX_VECS];
  for (unsigned v = 0; v < NV; ++v) {
    FzValue *at = v ? tileAffine(G, &bw, pos, 1, (int64_t)v * W) : pos;
    FzValue *xv = NULL;
    for (unsigned r = 0; r < mr; ++r) {
      if (r == 0 || !shared) {
        FzValue *lops[5] = {F->xq, n, ch[shared ? 0 : r], phase, at};
        xv = tileMake1(G, &bw, "loop.vector_load", 5, lops, G->vecF32);
      }
      size_t a = (size_t)r * NV + v;
      FzValue *fops[3] = {wv[r], xv, fzBlockGetArgument(wb, 1 + a)};
      next[a] = tileMake1(G, &bw, "loop.fma", 3, fops, G->vecF32);
    }
  }
  set_yield(G, lw, na, next);
  for (size_t a = 0; a < na; ++a)
    next[a] = fzOpGetResult(lw, a);
  set_yield(G, lh, na, next);
  for (size_t a = 0; a < na; ++a)
    next[a] = fzOpGetResult(lh, a);
  set_yield(G, lc, na, next);
  for (unsigned r = 0; r < mr; ++r) {
    FzValue *m = r ? tileAffine(G, &body, m0, 1, r) : m0;
    for (unsigned v = 0; v < NV; ++v) {
      FzValue *acc = fzOpGetResult(lc, (size_t)r * NV + v);
      FzValue *p = v ? tileAffine(G, &body, p0, 1, (int64_t)v * W) : p0;
      if (F->epi) {
        if (!convFlatEmitEpilogue(F, &body, n, m, p, acc))
          return false;
        continue;
      }
      FzValue *sops[5] = {acc, F->s, n, m, p};
      tileMake(G, &body, "loop.vector_store", 5, sops, NULL);
    }
  }
  return !G->failed;
}

/* One term of the channel-vector tiles at b: the NV weight vectors at
 * wk, the R input elements of channel c at phase, positions at[r]; the
 * fmas into acc (block arguments), results in next. */
static void chan_term(Flat *F, FzBuilder *b, FzValue *wk, FzValue *n,
                      FzValue *c, FzValue *phase, FzValue *const *at,
                      FzBlock *acc, FzValue **next) {
  ConvGen *Z = &F->Z;
  TileGen *G = &Z->G;
  unsigned W = G->W, NV = F->NV, R = F->R;
  FzValue *wv[TILE_MAX_VECS];
  for (unsigned v = 0; v < NV; ++v) {
    FzValue *lops[2] = {Z->wp, v ? tileAffine(G, b, wk, 1, (int64_t)v * W)
                                 : wk};
    wv[v] = tileMake1(G, b, "loop.vector_load", 2, lops, G->vecF32);
  }
  for (unsigned r = 0; r < R; ++r) {
    FzValue *lops[5] = {F->xq, n, c, phase, at[r]};
    FzValue *x = tileMake1(G, b, "loop.load", 5, lops, fzF32TypeGet(G->ctx));
    FzValue *xb = tileMake1(G, b, "loop.splat", 1, &x, G->vecF32);
    for (unsigned v = 0; v < NV; ++v) {
      size_t a = (size_t)r * NV + v;
      FzValue *fops[3] = {wv[v], xb, fzBlockGetArgument(acc, 1 + a)};
      next[a] = tileMake1(G, b, "loop.fma", 3, fops, G->vecF32);
    }
  }
}

/* Row phase and offset of tap kh at b. */
static void chan_row(Flat *F, FzBuilder *b, FzValue *khv, FzValue **phS,
                     FzValue **offH) {
  ConvNest *C = F->Z.C;
  TileGen *G = &F->Z.G;
  FzValue *khd = tileAffine(G, b, khv, C->dh, 0);
  *phS = tileAffine(G, b, ibin(G, b, "loop.remsi", khd, C->sh), C->sw, 0);
  *offH = tileAffine(G, b, ibin(G, b, "loop.divsi", khd, C->sh), F->Wq, 0);
}

/* Phase and offset of tap (kh, kw) at b. */
static void chan_col(Flat *F, FzBuilder *b, FzValue *kwv, FzValue *phS,
                     FzValue *offH, FzValue **phase, FzValue **off) {
  ConvNest *C = F->Z.C;
  TileGen *G = &F->Z.G;
  FzValue *kwd = tileAffine(G, b, kwv, C->dw, 0);
  *phase = add(G, b, phS, ibin(G, b, "loop.remsi", kwd, C->sw));
  *off = add(G, b, offH, ibin(G, b, "loop.divsi", kwd, C->sw));
}

static void block_args(FzBlock *blk, size_t na, FzValue **args) {
  for (size_t a = 0; a < na; ++a)
    args[a] = fzBlockGetArgument(blk, 1 + a);
}

static void results(FzOp *loop, size_t na, FzValue **vals) {
  for (size_t a = 0; a < na; ++a)
    vals[a] = fzOpGetResult(loop, a);
}

/* The reduction as loop.for c { kh { kw } }, weights (c, kh, kw): the kw
 * loop (unrolled by LLVM) reads each line three times in a row. Stride
 * 1: at stride 2 two taps of one phase read neighbouring elements and
 * LLVM keeps them in registers across the unrolled taps, spilling
 * accumulators. Returns the outer loop. */
static FzOp *chan_channels_outer(Flat *F, FzBuilder *body, FzValue *wbase,
                                 FzValue *const *base, FzValue *n, size_t na,
                                 FzValue *const *inits) {
  ConvGen *Z = &F->Z;
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  int64_t KH = C->ext[1], KW = C->ext[2], MC = (int64_t)F->NV * G->W;
  FzBuilder bc, bh, bw;
  FzValue *args[TILE_MAX_ROWS * TILE_MAX_VECS], *next[TILE_MAX_ROWS *
                                                      TILE_MAX_VECS];
  FzOp *lc = acc_loop(F, body, C->ext[0], na, inits, &bc);
  if (!lc)
    return NULL;
  FzBlock *cb = fzLoopGetBody(lc);
  FzValue *civ = fzBlockGetArgument(cb, 0);
  FzValue *wc = add(G, &bc, tileAffine(G, &bc, civ, KH * KW * MC, 0), wbase);
  block_args(cb, na, args);
  FzOp *lh = acc_loop(F, &bc, KH, na, args, &bh);
  if (!lh)
    return NULL;
  FzBlock *hb = fzLoopGetBody(lh);
  FzValue *khv = fzBlockGetArgument(hb, 0);
  FzValue *wh = add(G, &bh, tileAffine(G, &bh, khv, KW * MC, 0), wc);
  FzValue *phS, *offH, *phase, *off;
  chan_row(F, &bh, khv, &phS, &offH);
  block_args(hb, na, args);
  FzOp *lw = acc_loop(F, &bh, KW, na, args, &bw);
  if (!lw)
    return NULL;
  FzBlock *wb = fzLoopGetBody(lw);
  FzValue *kwv = fzBlockGetArgument(wb, 0);
  FzValue *wk = add(G, &bw, tileAffine(G, &bw, kwv, MC, 0), wh);
  chan_col(F, &bw, kwv, phS, offH, &phase, &off);
  FzValue *at[TILE_MAX_ROWS];
  for (unsigned r = 0; r < F->R; ++r)
    at[r] = add(G, &bw, base[r], off);
  chan_term(F, &bw, wk, n, civ, phase, at, wb, next);
  set_yield(G, lw, na, next);
  results(lw, na, next);
  set_yield(G, lh, na, next);
  results(lh, na, next);
  set_yield(G, lc, na, next);
  return lc;
}

/* The reduction as loop.for kh { kw { c } }, weights (kh, kw, c)
 * (Z->tapMajor): one term per iteration of the inner loop, whose
 * addresses move by constants; for strided convs. */
static FzOp *chan_taps_outer(Flat *F, FzBuilder *body, FzValue *wbase,
                             FzValue *const *base, FzValue *n, size_t na,
                             FzValue *const *inits) {
  ConvGen *Z = &F->Z;
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  int64_t KW = C->ext[2], CG = C->ext[0], MC = (int64_t)F->NV * G->W;
  FzBuilder bc, bh, bw;
  FzValue *args[TILE_MAX_ROWS * TILE_MAX_VECS], *next[TILE_MAX_ROWS *
                                                      TILE_MAX_VECS];
  FzOp *lh = acc_loop(F, body, C->ext[1], na, inits, &bh);
  if (!lh)
    return NULL;
  FzBlock *hb = fzLoopGetBody(lh);
  FzValue *khv = fzBlockGetArgument(hb, 0);
  FzValue *wh = add(G, &bh, tileAffine(G, &bh, khv, KW * CG * MC, 0), wbase);
  FzValue *phS, *offH, *phase, *off;
  chan_row(F, &bh, khv, &phS, &offH);
  block_args(hb, na, args);
  FzOp *lw = acc_loop(F, &bh, KW, na, args, &bw);
  if (!lw)
    return NULL;
  FzBlock *wb = fzLoopGetBody(lw);
  FzValue *kwv = fzBlockGetArgument(wb, 0);
  FzValue *ww = add(G, &bw, tileAffine(G, &bw, kwv, CG * MC, 0), wh);
  chan_col(F, &bw, kwv, phS, offH, &phase, &off);
  FzValue *at[TILE_MAX_ROWS];
  for (unsigned r = 0; r < F->R; ++r)
    at[r] = add(G, &bw, base[r], off);
  block_args(wb, na, args);
  FzOp *lc = acc_loop(F, &bw, CG, na, args, &bc);
  if (!lc)
    return NULL;
  FzBlock *cb = fzLoopGetBody(lc);
  FzValue *civ = fzBlockGetArgument(cb, 0);
  FzValue *wk = add(G, &bc, tileAffine(G, &bc, civ, MC, 0), ww);
  chan_term(F, &bc, wk, n, civ, phase, at, cb, next);
  set_yield(G, lc, na, next);
  results(lc, na, next);
  set_yield(G, lw, na, next);
  results(lw, na, next);
  set_yield(G, lh, na, next);
  return lh;
}

/* The channel-vector tiles (F->chan): R output positions x NV vectors
 * of W output channels, every channel block and position tile. A term
 * (c, kh, kw) loads the NV weight vectors of the block (packed [M / MC]
 * [K][MC], MC = NV W: one aligned line per vector) and broadcasts the R
 * input elements that its positions read from the phases, R NV fmas;
 * no input vector crosses a line and no lane computes a grid column
 * past OW. The sums go to S [N][P][M] as vectors along m. */
static bool emit_chan_tiles(Flat *F, const char *plan) {
  ConvGen *Z = &F->Z;
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  unsigned W = G->W, NV = F->NV, R = F->R;
  int64_t M = C->T.trips[CV_M], OW = C->T.trips[CV_OW];
  int64_t MC = (int64_t)NV * W, blocks = M / MC;
  int64_t total = C->T.trips[CV_N] * F->tiles * blocks;
  FzValue *t;
  FzBuilder body;
  FzOp *par = tileMakeParallel(G, 1, &total, &t, &body);
  if (!par ||
      !fzOpSetAttr(par, FZ_STR("fuse.plan"),
                   fzStringAttrGet(G->ctx, fzStringRefFromCString(plan))))
    return false;
  FzValue *it, *pt, *q;
  if (F->blocksOuter) {
    pt = ibin(G, &body, "loop.remsi", t, F->tiles);
    q = ibin(G, &body, "loop.divsi", t, F->tiles);
    it = ibin(G, &body, "loop.remsi", q, blocks);
    q = ibin(G, &body, "loop.divsi", q, blocks);
  } else {
    it = ibin(G, &body, "loop.remsi", t, blocks);
    q = ibin(G, &body, "loop.divsi", t, blocks);
    pt = ibin(G, &body, "loop.remsi", q, F->tiles);
    q = ibin(G, &body, "loop.divsi", q, F->tiles);
  }
  FzValue *n = q;
  FzValue *m0 = tileAffine(G, &body, it, MC, 0);
  FzValue *q0 = tileAffine(G, &body, pt, R, 0);
  if (F->overlap) {
    FzValue *mops[2] = {q0, tileConstIndex(G, F->P - (int64_t)R)};
    q0 = tileMake1(G, &body, "loop.minsi", 2, mops, G->idx);
  }
  /* Position r of the tile, q0 + r = oh OW + ow, reads the phases at
   * base[r] + off(kh, kw), base[r] = oh Wq + ow. */
  FzValue *qr[TILE_MAX_ROWS], *base[TILE_MAX_ROWS];
  for (unsigned r = 0; r < R; ++r) {
    qr[r] = r ? tileAffine(G, &body, q0, 1, r) : q0;
    if (F->Wq == OW) {
      base[r] = qr[r];
      continue;
    }
    FzValue *oh = ibin(G, &body, "loop.divsi", qr[r], OW);
    FzValue *ow = ibin(G, &body, "loop.remsi", qr[r], OW);
    base[r] = add(G, &body, tileAffine(G, &body, oh, F->Wq, 0), ow);
  }
  FzValue *wbase = tileAffine(G, &body, it, Z->K * MC, 0);
  size_t na = (size_t)R * NV;
  FzValue *inits[TILE_MAX_ROWS * TILE_MAX_VECS];
  FzValue *zv = tileMake1(G, &body, "loop.splat", 1, &Z->zero, G->vecF32);
  for (size_t a = 0; a < na; ++a)
    inits[a] = zv;
  if (G->failed)
    return false;
  for (unsigned r = 0; r < R; ++r)
    for (unsigned v = 0; v < NV; ++v) {
      FzValue *m = v ? tileAffine(G, &body, m0, 1, (int64_t)v * W) : m0;
      FzValue *pops[4] = {F->s, n, qr[r], m};
      tileMake(G, &body, "loop.prefetch", 4, pops, NULL);
    }
  FzOp *outer = Z->tapMajor
                    ? chan_taps_outer(F, &body, wbase, base, n, na, inits)
                    : chan_channels_outer(F, &body, wbase, base, n, na, inits);
  if (!outer)
    return false;
  for (unsigned r = 0; r < R; ++r)
    for (unsigned v = 0; v < NV; ++v) {
      FzValue *acc = fzOpGetResult(outer, (size_t)r * NV + v);
      FzValue *m = v ? tileAffine(G, &body, m0, 1, (int64_t)v * W) : m0;
      FzValue *sops[5] = {acc, F->s, n, qr[r], m};
      tileMake(G, &body, "loop.vector_store", 5, sops, NULL);
    }
  return !G->failed;
}

/*===--- The epilogue nest ------------------------------------------------===*/

/* The original nest's reduction becomes init + Sv[n, m, oh, ow]. */
static bool rewrite_nest(Flat *F) {
  ConvGen *Z = &F->Z;
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  int64_t N = C->T.trips[CV_N], M = C->T.trips[CV_M];
  int64_t OW = C->T.trips[CV_OW];
  /* Flat: S [N][M][Lp] at m Lp + oh Wq + ow; chan: S [N][P][M] at
   * (oh OW + ow) M + m. */
  int64_t shape[4] = {N, M, C->T.trips[CV_OH], F->chan ? OW : F->Wq};
  int64_t strides[4] = {M * F->Lp, F->Lp, F->Wq, 1};
  if (F->chan) {
    strides[1] = 1;
    strides[2] = OW * M;
    strides[3] = M;
  }
  FzValue *sv = make_view(G, &G->top, F->s, buffer_type(G, 4, shape, strides));
  if (!sv)
    return false;
  FzOp *red = C->T.red;
  FzValue *init = fzOpGetOperand(red, 3);
  FzBuilder b;
  fzBuilderInit(&b, G->ctx);
  fzBuilderSetInsertionPointBefore(&b, red);
  FzValue *lops[5] = {sv, C->vars[CV_N], C->vars[CV_M], C->vars[CV_OH],
                      C->vars[CV_OW]};
  FzValue *v = tileMake1(G, &b, "loop.load", 5, lops, fzF32TypeGet(G->ctx));
  FzOp *idef = fzValueGetDefiningOp(init);
  FzAttr *iv = idef && fzLoopGetOpcode(idef) == FZ_LOOP_OP_CONSTANT
                   ? fzOpGetInherentAttr(idef, FZ_STR("value"))
                   : NULL;
  bool zero = iv && fzAttrGetKind(iv) == FZ_ATTR_FLOAT &&
              fzFloatAttrGetValue(iv) == 0.0 &&
              !signbit(fzFloatAttrGetValue(iv));
  if (!zero) {
    FzValue *aops[2] = {init, v};
    v = tileMake1(G, &b, "loop.addf", 2, aops, fzF32TypeGet(G->ctx));
  }
  if (G->failed)
    return false;
  fzValueReplaceAllUsesWith(fzOpGetResult(red, 0), v);
  fzOpErase(red);
  return true;
}

static bool make_dealloc(TileGen *G, FzBuilder *b, FzValue *buf) {
  FzOpState st;
  fzOpStateInit(&st, G->ctx, FZ_STR("loop.dealloc"), G->loc);
  fzOpStateAddOperands(&st, 1, &buf);
  return fzBuilderCreate(b, &st) != NULL;
}

ConvResult convFlatTransform(ConvNest *C, const FzTileConvolutionsOptions *o,
                             bool chan) {
  TileNest *T = &C->T;
  unsigned W = o->vectorBits / 32;
  if (W < 2 || W > 64 || !convFlatApplies(C) ||
      (chan && !convFlatChanApplies(C, W)))
    return CV_DECLINED;
  Flat F;
  memset(&F, 0, sizeof F);
  ConvGen *Z = &F.Z;
  TileGen *G = &Z->G;
  unsigned MR;
  if (chan) {
    if (!chan_choose(&F, C, o, W))
      return CV_DECLINED;
    MR = F.NV * W;
    Z->tapMajor = C->sh > 1 || C->sw > 1;
  } else {
    choose(&F, C, o, W, &MR);
  }
  if (F.tiles <= 0)
    return CV_DECLINED;
  Z->C = C;
  Z->MR = MR;
  Z->K = T->K;
  G->T = T;
  G->ctx = T->ctx;
  G->loc = fzOpGetLoc(T->par);
  G->idx = fzIndexTypeGet(T->ctx);
  G->W = W;
  int64_t w = W;
  G->vecF32 = fzVectorTypeGet(G->ctx, 1, &w, fzF32TypeGet(G->ctx), NULL);
  if (!G->vecF32)
    return CV_DECLINED;
  fzBuilderInit(&G->top, T->ctx);
  fzBuilderSetInsertionPointBefore(&G->top, T->par);
  fzBuilderInit(&G->consts, T->ctx);
  fzBuilderSetInsertionPointToStart(&G->consts, fzOpGetBlock(T->par));
  Z->zero = fzLoopCreateConstant(&G->consts, G->loc, fzF32TypeGet(T->ctx), 0.0);
  if (!Z->zero)
    return CV_DECLINED;

  /* From here on a failure is an internal error. */
  if (!convPackWeights(Z))
    return CV_FAILED;
  int64_t N = T->trips[CV_N], M = T->trips[CV_M];
  if (F.direct) {
    int64_t shape[4] = {N, C->C, 1, F.Lx};
    F.xq = make_view(G, &G->top, fzOpGetOperand(C->xLoad, 0),
                     buffer_type(G, 4, shape, NULL));
  } else if (!emit_phases(&F)) {
    return CV_FAILED;
  }
  int64_t sshape[3] = {N, M, F.Lp};
  if (F.chan) {
    sshape[1] = F.P;
    sshape[2] = M;
  }
  F.s = make_alloc(G, 3, sshape);
  if (!F.xq || !F.s || !rewrite_nest(&F))
    return CV_FAILED;
  /* The epilogue on the accumulators where the grid is the plane. */
  if (!F.chan && !convFlatPrepareEpilogue(&F) && G->failed)
    return CV_FAILED;
  fzBuilderSetInsertionPointBefore(&G->top, T->par);
  char plan[400];
  if (F.chan) {
    /* A thread's consecutive tiles read the same weight block (K MC
     * floats: 1.2 MB for the 3x3 512 -> 512) from L2, unless the input
     * is the one that does not fit and the weights do. */
    int64_t x = C->C * F.S * F.Lx * 4, w = M * Z->K * 4;
    F.blocksOuter = !(x > FL_L2_BYTES && w <= FL_L2_BYTES);
    snprintf(plan, sizeof plan,
             "conv2d, channel vectors: %u positions x %u vectors of %u "
             "output channels of the %lldx%lld plane%s, %s input, %s "
             "weights; sums [n][p][m] to a buffer, the epilogue as its "
             "own nest; channel blocks %s the position tiles",
             F.R, F.NV, W, (long long)T->trips[CV_OH],
             (long long)T->trips[CV_OW],
             F.overlap ? " (the last tile overlapping)" : "",
             F.direct ? "in-place" : "padded phase-split",
             Z->wpConst ? "compile-time packed" : "run-time packed",
             F.blocksOuter ? "outside" : "inside");
    if (!emit_chan_tiles(&F, plan))
      return CV_FAILED;
    FzBuilder b;
    fzBuilderInit(&b, T->ctx);
    fzBuilderSetInsertionPointAfter(&b, T->par);
    if (!make_dealloc(G, &b, F.s) ||
        (!F.direct && !make_dealloc(G, &b, F.xq)) ||
        (!Z->wpConst && !make_dealloc(G, &b, Z->wp)))
      return CV_FAILED;
    return G->failed ? CV_FAILED : CV_DONE;
  }
  F.blocksOuter = blocks_outer(&F);
  snprintf(plan, sizeof plan,
           "conv2d, flat plane: %u channels x %u vectors of %u positions "
           "of the %lldx%lld grid (%lld of %lld columns used), %s input, "
           "%s weights; %s; channel blocks %s the grid tiles, output "
           "lines prefetched",
           MR, F.NV, W, (long long)T->trips[CV_OH], (long long)F.Wq,
           (long long)T->trips[CV_OW], (long long)F.Wq,
           F.overlap  ? "in-place (the last tile overlapping)"
           : F.direct ? "in-place"
                      : "padded phase-split",
           Z->wpConst ? "compile-time packed" : "run-time packed",
           F.epi ? "epilogue on the accumulators"
                 : "sums to a buffer, the epilogue as its own nest",
           F.blocksOuter ? "outside" : "inside");
  int64_t Mf = M / MR * MR;
  if (Mf > 0 && !emit_tiles(&F, MR, 0, Mf / MR, plan))
    return CV_FAILED;
  if (M > Mf && !emit_tiles(&F, (unsigned)(M - Mf), Mf, 1, plan))
    return CV_FAILED;
  FzBuilder b;
  fzBuilderInit(&b, T->ctx);
  if (F.epi) {
    /* After the last tile nest, which the nest follows. */
    FzOp *last = fzOpGetPrevInBlock(F.epi);
    convFlatDropSums(&F);
    fzBuilderSetInsertionPointAfter(&b, last);
  } else {
    fzBuilderSetInsertionPointAfter(&b, T->par);
  }
  if ((F.s && !make_dealloc(G, &b, F.s)) ||
      (!F.direct && !make_dealloc(G, &b, F.xq)) ||
      (!Z->wpConst && !make_dealloc(G, &b, Z->wp)))
    return CV_FAILED;
  return G->failed ? CV_FAILED : CV_DONE;
}

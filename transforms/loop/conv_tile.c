/* transforms/loop/conv_tile.c - tile-convolutions: conv2d nests (as
 * lower-graph-to-loop makes them: three reduction loops over (c, kh, kw)
 * per output element, padding as clamped indices and a select, the fused
 * epilogue applied to the sum) become register-blocked tiles for a CPU's
 * vector unit, vectorized along the output width, with the epilogue
 * applied to the accumulators before the store.
 *
 * A CPU-only step, like tile-contractions: CPU code generation runs it on
 * its own copy of the loop module with the target's vector width; the
 * GPU path never sees it. fuse-opt runs it as a pass for inspection.
 *
 * What a matched nest (conv_internal.h) becomes, with W lanes, tiles of
 * MR output channels x NV vectors of W output columns:
 *
 *   Wp = the weights as f32 blocks [M / MR][CG * KH * KW][MR]
 *   [Xp = the input as f32, zero-padded, each row split into sw column
 *    phases, when the conv pads, strides along the width or reads
 *    bf16/f16: every tap then reads W consecutive elements]
 *   loop.parallel (t) over (n x oh x column blocks x channel blocks),
 *     channel blocks fastest (the tiles of one output row reuse its
 *     input rows from L1):
 *       acc[MR][NV] = loop.for c, kh, kw:
 *           acc[r][v] = fma(splat(Wp[m0 + r, (c, kh, kw)]),
 *                           X(n, ch(m0 + r, c), oh, kh, ow0 + v*W .., kw),
 *                           acc[r][v])
 *       the epilogue on each acc[r][v] as vector ops, vector stores
 *   regions: full tiles, the columns left over in the same rows (fewer
 *   vectors), then W/2, W/4 (>= 4) lanes for a ragged width; the last
 *   M % MR channels as one tile row; the original nest for the last
 *   columns (fewer than 4).
 *
 * The tile shape (MR, NV) comes from a cost model: each term costs
 * max(fmas, loads) of a tile (two of each per cycle), every tile an
 * epilogue; tiles of the ragged edges count. The input loads are shared
 * by a tile's rows when their channels read the same input channels
 * (groups == 1, or MR dividing the channels per group), else per row
 * (depthwise).
 *
 * Invariants: only nests whose index expressions evaluate, over their
 * whole domain, to a conv2d with zero padding are changed; every
 * ow-dependent value of the epilogue must run W lanes at a time; a nest
 * that writes a buffer its input or weights read is left alone. Sums are
 * computed in (c, kh, kw) order with one fma per term. The padded input
 * holds zeros where the untiled nest skips a tap, so a non-finite weight
 * at a tap in the padding gives NaN (0 * inf), as in PyTorch and ONNX
 * Runtime, where the untiled nest gives a finite sum.
 */
#include <string.h>

#include "fz/loop.h"
#include "fz/pass.h"
#include "transforms/loop/conv_internal.h"

/* The padded input's most bytes. */
#define CV_MAX_PACK_BYTES ((int64_t)1 << 31)

void fzTileConvolutionsOptionsInit(FzTileConvolutionsOptions *o) {
  memset(o, 0, sizeof *o);
  o->vectorBits = 256;
}

/*===--- Matching ---------------------------------------------------------===*/

static bool reads_written(const ConvNest *C, FzValue *v,
                          const FzPtrMap *written, int depth) {
  if (depth > 64 || !tileInNest((TileNest *)&C->T, v))
    return depth > 64;
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def)
    return false;
  if (fzLoopGetOpcode(def) == FZ_LOOP_OP_LOAD &&
      fzPtrMapContains(written, tileRootOf(fzOpGetOperand(def, 0))))
    return true;
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    if (reads_written(C, fzOpGetOperand(def, i), written, depth + 1))
      return true;
  return false;
}

/* Whether the epilogue value v (computed in the parallel body, from the
 * reduction's result, ivs, loads and plain ops) can be materialized for
 * a tile: every ow-dependent op runs W lanes at a time. */
static bool epilogue_ok(ConvNest *C, FzValue *v, FzPtrMap *seen, int depth) {
  TileNest *T = &C->T;
  if (depth > 256)
    return false;
  if (!tileInNest(T, v) || v == fzOpGetResult(T->red, 0))
    return true;
  if (fzValueIsBlockArgument(v))
    return fzValueGetParentBlock(v) == T->body;
  FzOp *def = fzValueGetDefiningOp(v);
  if (fzPtrMapContains(seen, def))
    return true;
  if (fzOpGetBlock(def) != T->body || !fzPtrMapPut(seen, def, def))
    return false;
  FzLoopOpcode c = fzLoopGetOpcode(def);
  if (c != FZ_LOOP_OP_LOAD && !tilePlainOp(def))
    return false;
  if ((tileDeps(T, v) & ((uint64_t)1 << T->dJ)) && !tileOpVectorizes(T, def))
    return false;
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    if (!epilogue_ok(C, fzOpGetOperand(def, i), seen, depth + 1))
      return false;
  return true;
}

/* The product's operands and the padding condition, from the innermost
 * body. */
/* Fills C when par is a conv2d nest the pass can tile: convMatch's
 * nest whose stores are contiguous along ow, whose epilogue vectorizes,
 * and whose input and weights read no buffer the nest writes. */
static bool match(ConvNest *C, FzOp *par) {
  TileNest *T = &C->T;
  if (!convMatch(C, par, NULL, NULL, 0))
    return false;
  /* The register tiles read NCHW; an NHWC nest stays generic loops. */
  if (C->layout != CONV_NCHW)
    return false;
  FzValue *xBuf = fzOpGetOperand(C->xLoad, 0);
  if (!tileNestComputeDeps(T))
    return false;
  FzPtrMap written, seen;
  fzPtrMapInit(&written, T->ctx);
  fzPtrMapInit(&seen, T->ctx);
  bool ok = true;
  for (FzOp *op = fzBlockGetFirstOp(T->body); ok && op;
       op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE)
      continue;
    ok = tileAccessVectorizes(T, op) &&
         fzPtrMapPut(&written, tileRootOf(fzOpGetOperand(op, 1)), op);
    for (size_t i = 0; ok && i < fzOpGetNumOperands(op); ++i)
      if (i != 1)
        ok = epilogue_ok(C, fzOpGetOperand(op, i), &seen, 0);
  }
  ok = ok && !fzPtrMapContains(&written, tileRootOf(xBuf)) &&
       !reads_written(C, C->wVal, &written, 0);
  fzPtrMapFree(&seen);
  fzPtrMapFree(&written);
  return ok;
}

/*===--- The tile shape ---------------------------------------------------===*/

/* Whether the mr channels from m0 on read the same input channels. */
static bool rows_share(const ConvNest *C, int64_t m0, int64_t mr) {
  int64_t CG = C->ext[0];
  for (int64_t r = 1; r < mr; ++r)
    for (int64_t c = 0; c < CG; ++c)
      if (C->chTab[(m0 + r) * CG + c] != C->chTab[m0 * CG + c])
        return false;
  return true;
}

/* ... for every block of mr channels from row0 on. */
static bool region_shares(const ConvNest *C, int64_t row0, int64_t blocks,
                          int64_t mr) {
  for (int64_t b = 0; b < blocks; ++b)
    if (!rows_share(C, row0 + b * mr, mr))
      return false;
  return true;
}

/* Half-cycles of one tile of mr x nv vectors over K terms: two fmas and
 * two loads (vector or broadcast) per cycle, plus its epilogue. */
static int64_t tile_cost(int64_t K, int64_t mr, int64_t nv, bool shared) {
  if (mr <= 0 || nv <= 0)
    return 0;
  int64_t fmas = mr * nv, loads = (shared ? nv : mr * nv) + mr;
  return K * (fmas > loads ? fmas : loads) + 8 * mr * nv + 40;
}

static void choose_tile(const ConvNest *C, const FzTileConvolutionsOptions *o,
                        unsigned W, unsigned *MR, unsigned *NV) {
  int64_t M = C->T.trips[CV_M], nvec = C->T.trips[CV_OW] / W, K = C->T.K;
  unsigned budget = o->accumulators     ? o->accumulators
                    : o->vectorBits >= 512 ? 24
                                           : 12;
  /* The accumulators, a term's mr broadcasts and one input vector must
   * fit the registers (32 zmm with AVX-512, else 16): 8 x 3 spilled an
   * accumulator into every term at 512 bits (the 3x3 64 -> 64 at 56x56,
   * conv_flat.c's choose says the same of the flat tiles). */
  int64_t regs = o->vectorBits >= 512 ? 32 : 16;
  if (nvec < 1)
    nvec = 1;
  int64_t best = -1;
  int64_t wantR = o->rows ? (o->rows < M ? o->rows : M) : 0;
  int64_t wantV = o->vectors ? (o->vectors < nvec ? o->vectors : nvec) : 0;
  *MR = 1, *NV = 1;
  for (int64_t mr = 1; mr <= TILE_MAX_ROWS && mr <= M; ++mr) {
    if (wantR && mr != wantR)
      continue;
    int64_t fb = M / mr, rm = M % mr;
    bool shF = region_shares(C, 0, fb, mr);
    bool shR = rm == 0 || rows_share(C, fb * mr, rm);
    for (int64_t nv = 1; nv <= TILE_MAX_VECS && nv <= nvec; ++nv) {
      if ((wantV && nv != wantV) ||
          (!(wantR && wantV) &&
           (mr * nv > (int64_t)budget || mr * nv + mr + 1 > regs)))
        continue;
      int64_t ft = nvec / nv, rv = nvec % nv;
      int64_t cost = fb * (ft * tile_cost(K, mr, nv, shF) +
                           tile_cost(K, mr, rv, shF)) +
                     ft * tile_cost(K, rm, nv, shR) +
                     tile_cost(K, rm, rv, shR);
      if (best < 0 || cost < best ||
          (cost == best && mr * nv > (int64_t)(*MR * *NV))) {
        best = cost;
        *MR = (unsigned)mr, *NV = (unsigned)nv;
      }
    }
  }
}

/* auto's choice: the flat mapping (conv_flat.c) unless the rows are
 * whole vectors, or nearly (at least 0.85 of the row tiles' lanes used,
 * a scalar column counted as a whole vector of them) while the flat grid
 * would carry unused columns. Measured at 512 bits (bench/cpu/
 * conv_bench.sh): the 3x3 64 -> 64 at 56x56 (3.5 vectors) runs at 108
 * GFLOP/s in rows against 103 flat on one core, 203 against 169 on two;
 * the 1x1 convs at 56x56, whose flat grid is the plane (the epilogue on
 * the accumulators), 114-118 flat against 63-69 in rows; every plane
 * narrower than 56 faster flat (2-10x at 14x14 and 7x7). */
static bool prefer_flat(const ConvNest *C, unsigned W) {
  int64_t OW = C->T.trips[CV_OW], rem = OW % W, ops = OW / W;
  if (rem == 0)
    return false;
  if ((C->ext[2] - 1) * C->dw / C->sw == 0)
    return true; /* the flat grid is the plane */
  for (int64_t lanes = W / 2; lanes >= 4; lanes /= 2)
    if (rem >= lanes) {
      ++ops;
      rem -= lanes;
    }
  ops += rem;
  return (double)OW < 0.85 * (double)(ops * (int64_t)W);
}

/* auto's choice of the channel-vector tiles (conv_flat.c, Flat.chan):
 * where the flat mapping would be taken (prefer_flat) for a stride-1
 * conv with taps (KH KW > 1) and at least 16 input channels, groups ==
 * 1 and M a multiple of the 16 lanes of AVX-512. Measured on one core
 * (bench/cpu/conv_bench.sh, fraction of the fma peak): the 3x3 128 ->
 * 128 at 28x28 0.59 -> 0.75, 256 -> 256 at 14x14 0.67 -> 0.76, 512 ->
 * 512 at 7x7 0.60 both ways; at stride 2 (the taps-outer order) and for
 * 1x1 convs no better than flat, the 7x7 stem (3 input channels) 4x
 * slower. An image's sums [P][M], which the epilogue nest reads
 * transposed (one line per element along ow), stay within 1 MiB (an
 * L2): the stem's 3.2 MB is most of that 4x. */
static bool prefer_chan(const ConvNest *C, const FzTileConvolutionsOptions *o,
                        unsigned W) {
  int64_t sums = C->T.trips[CV_M] * C->T.trips[CV_OH] * C->T.trips[CV_OW] * 4;
  return o->vectorBits >= 512 && C->ext[1] * C->ext[2] > 1 &&
         C->sh == 1 && C->sw == 1 && C->ext[0] >= 16 &&
         sums <= ((int64_t)1 << 20) && convFlatChanApplies(C, W) &&
         prefer_flat(C, W);
}

/*===--- The transformation -----------------------------------------------===*/

static FzOp *make_alloc(ConvGen *Z, size_t rank, const int64_t *shape) {
  TileGen *G = &Z->G;
  FzType *bt = fzBufferTypeGet(G->ctx, rank, shape, fzF32TypeGet(G->ctx),
                               NULL, 0, NULL);
  if (!bt)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, G->ctx, FZ_STR("loop.alloc"), G->loc);
  fzOpStateAddResults(&st, 1, &bt);
  return fzBuilderCreate(&G->top, &st);
}

static bool make_dealloc(ConvGen *Z, FzBuilder *b, FzValue *buf) {
  FzOpState st;
  fzOpStateInit(&st, Z->G.ctx, FZ_STR("loop.dealloc"), Z->G.loc);
  fzOpStateAddOperands(&st, 1, &buf);
  return fzBuilderCreate(b, &st) != NULL;
}

static bool set_width(ConvGen *Z, unsigned lanes) {
  int64_t w = lanes;
  Z->G.W = lanes;
  Z->G.vecF32 = fzVectorTypeGet(Z->G.ctx, 1, &w, fzF32TypeGet(Z->G.ctx), NULL);
  return Z->G.vecF32 != NULL;
}

/* A column segment: colBlocks blocks of nv vectors of `lanes` lanes. */
typedef struct ColSeg {
  unsigned lanes, nv;
  int64_t col0, blocks;
} ColSeg;

/* Declines (changing nothing but adding function-level constants) or
 * rewrites the nest; CV_FAILED after a failure half-way. */
static ConvResult transform(ConvNest *C, const FzTileConvolutionsOptions *o) {
  TileNest *T = &C->T;
  unsigned W = o->vectorBits / 32;
  if (W < 2 || W > 64)
    return CV_DECLINED;
  int64_t N = T->trips[CV_N], M = T->trips[CV_M], OH = T->trips[CV_OH];
  int64_t OW = T->trips[CV_OW];
  if (o->mapping == FZ_CONV_MAPPING_CHANNELS ||
      (o->mapping == FZ_CONV_MAPPING_AUTO && prefer_chan(C, o, W))) {
    ConvResult r = convFlatTransform(C, o, true);
    if (r != CV_DECLINED)
      return r;
  }
  if (o->mapping != FZ_CONV_MAPPING_ROWS && convFlatApplies(C) &&
      (o->mapping == FZ_CONV_MAPPING_FLAT || prefer_flat(C, W))) {
    ConvResult r = convFlatTransform(C, o, false);
    if (r != CV_DECLINED)
      return r;
  }
  unsigned MR, NV;
  choose_tile(C, o, W, &MR, &NV);

  /* Column segments: full tiles, the vectors left over, narrower
   * vectors for a ragged width. */
  ColSeg cols[8];
  size_t ncols = 0;
  int64_t nvec = OW / W, covered = 0;
  if (nvec / NV > 0)
    cols[ncols++] = (ColSeg){W, NV, 0, nvec / NV};
  if (nvec % NV)
    cols[ncols++] = (ColSeg){W, (unsigned)(nvec % NV), nvec / NV * NV * W, 1};
  covered = nvec * W;
  for (unsigned lanes = W / 2; lanes >= 4; lanes /= 2)
    if (OW - covered >= lanes) {
      cols[ncols++] = (ColSeg){lanes, 1, covered, 1};
      covered += lanes;
    }
  if (ncols == 0)
    return CV_DECLINED;

  ConvGen Z;
  memset(&Z, 0, sizeof Z);
  TileGen *G = &Z.G;
  Z.C = C;
  Z.MR = MR;
  Z.K = T->K;
  G->T = T;
  G->ctx = T->ctx;
  G->loc = fzOpGetLoc(T->par);
  G->idx = fzIndexTypeGet(T->ctx);
  if (!set_width(&Z, W))
    return CV_DECLINED;
  Z.Hp = (OH - 1) * C->sh + (C->ext[1] - 1) * C->dh + 1;
  Z.Wq = (OW - 1) + (C->ext[2] - 1) * C->dw / C->sw + 1;
  if (C->pack && N * C->C * Z.Hp * C->sw * Z.Wq * 4 > CV_MAX_PACK_BYTES)
    return CV_DECLINED;
  fzBuilderInit(&G->top, T->ctx);
  fzBuilderSetInsertionPointBefore(&G->top, T->par);
  fzBuilderInit(&G->consts, T->ctx);
  fzBuilderSetInsertionPointToStart(&G->consts, fzOpGetBlock(T->par));
  Z.zero = fzLoopCreateConstant(&G->consts, G->loc, fzF32TypeGet(T->ctx), 0.0);
  if (!Z.zero)
    return CV_DECLINED;

  /* Nothing above changed the nest's function but constants, which cse
   * or dce remove; from here on a failure is an internal error. */
  if (!convPackWeights(&Z))
    return CV_FAILED;
  if (C->pack) {
    int64_t xshape[5] = {N, C->C, Z.Hp, C->sw, Z.Wq};
    if (C->sw == 1)
      xshape[3] = Z.Wq;
    FzOp *xalloc = make_alloc(&Z, C->sw == 1 ? 4 : 5, xshape);
    if (!xalloc)
      return CV_FAILED;
    Z.xp = fzOpGetResult(xalloc, 0);
    if (!convEmitPackInput(&Z))
      return CV_FAILED;
  }
  int64_t Mf = M / MR * MR;
  for (size_t s = 0; s < ncols; ++s) {
    if (!set_width(&Z, cols[s].lanes))
      return CV_FAILED;
    TileRegion full = {MR, cols[s].nv, 0, Mf / MR, cols[s].col0,
                       cols[s].blocks};
    TileRegion rest = {(unsigned)(M - Mf), cols[s].nv, Mf, 1, cols[s].col0,
                       cols[s].blocks};
    if (Mf > 0 &&
        !convEmitRegion(&Z, &full, region_shares(C, 0, Mf / MR, MR)))
      return CV_FAILED;
    if (M > Mf && !convEmitRegion(&Z, &rest, rows_share(C, Mf, M - Mf)))
      return CV_FAILED;
  }
  if (G->failed)
    return CV_FAILED;
  /* The last OW - covered columns: the original nest, from there on. */
  FzOp *after = T->par;
  if (covered == OW) {
    after = fzOpGetPrevInBlock(T->par);
    fzOpErase(T->par);
  } else {
    FzValue *lb = fzLoopCreateIndexConstant(&G->consts, G->loc, covered);
    if (!lb)
      return CV_FAILED;
    fzOpSetOperand(T->par, CV_OW, lb);
  }
  FzBuilder b;
  fzBuilderInit(&b, T->ctx);
  fzBuilderSetInsertionPointAfter(&b, after);
  if (Z.xp && !make_dealloc(&Z, &b, Z.xp))
    return CV_FAILED;
  return Z.wpConst || make_dealloc(&Z, &b, Z.wp) ? CV_DONE : CV_FAILED;
}

bool fzTileConvolutions(FzOp *func, const FzTileConvolutionsOptions *options,
                        size_t *numTiled) {
  FzTileConvolutionsOptions defaults;
  if (!options) {
    fzTileConvolutionsOptionsInit(&defaults);
    options = &defaults;
  }
  if (numTiled)
    *numTiled = 0;
  FzRegion *r = fzOpGetNumRegions(func) ? fzOpGetRegion(func, 0) : NULL;
  FzBlock *body = r ? fzRegionGetFirstBlock(r) : NULL;
  if (!body)
    return true;
  FzContext *ctx = fzOpGetContext(func);
  bool ok = true;
  for (FzOp *op = fzBlockGetFirstOp(body), *next; ok && op; op = next) {
    next = fzOpGetNextInBlock(op);
    ConvNest C;
    memset(&C, 0, sizeof C);
    C.T.ctx = ctx;
    fzPtrMapInit(&C.T.deps, ctx);
    if (match(&C, op)) {
      FzLoc *loc = fzOpGetLoc(op);
      ConvResult res = transform(&C, options);
      if (res == CV_DONE && numTiled)
        ++*numTiled;
      if (res == CV_FAILED) {
        fzEmitError(ctx, loc, "tile-convolutions: internal error while tiling");
        ok = false;
      }
    }
    fzFree(ctx, C.chTab);
    fzPtrMapFree(&C.T.deps);
  }
  return ok;
}

/*===--- The pass ---------------------------------------------------------===*/

static const FzPassOptionDef kOptions[] = {
    {"vector-bits", FZ_PASS_OPTION_INT, "256",
     "Vector register width: W = bits / 32 f32 lanes along the output width",
     NULL, 64, 2048},
    {"accumulators", FZ_PASS_OPTION_INT, "0",
     "Most vector accumulators of a tile (MR * NV) the cost model may use; "
     "0: 24 at 512 bits, else 12",
     NULL, 0, TILE_MAX_ROWS * TILE_MAX_VECS},
    {"rows", FZ_PASS_OPTION_INT, "0",
     "Output channels of a register tile (MR); 0: the cost model's", NULL, 0,
     TILE_MAX_ROWS},
    {"vectors", FZ_PASS_OPTION_INT, "0",
     "Vectors of output columns per channel of a tile (NV); 0: the cost "
     "model's",
     NULL, 0, TILE_MAX_VECS},
    {"mapping", FZ_PASS_OPTION_INT, "0",
     "0: auto (flat where the output width is no multiple of the vector), "
     "1: vectors along output rows, 2: along the flat output plane, "
     "3: along the output channels (groups == 1, M a multiple of the "
     "vector)",
     NULL, 0, 3},
};

static const FzPassStatisticDef kStats[] = {
    {"num-tiled", "Convolution nests tiled"},
};

static bool conv_run(FzPass *pass, FzOp *op) {
  FzTileConvolutionsOptions o;
  fzTileConvolutionsOptionsInit(&o);
  o.vectorBits = (unsigned)fzPassGetIntOption(pass, "vector-bits");
  o.accumulators = (unsigned)fzPassGetIntOption(pass, "accumulators");
  o.rows = (unsigned)fzPassGetIntOption(pass, "rows");
  o.vectors = (unsigned)fzPassGetIntOption(pass, "vectors");
  o.mapping = (unsigned)fzPassGetIntOption(pass, "mapping");
  size_t n = 0;
  if (!fzTileConvolutions(op, &o, &n))
    return false;
  fzPassAddStatistic(pass, 0, n);
  return true;
}

const FzPassDef fzTileConvolutionsPassDef = {
    .argument = "tile-convolutions",
    .displayName = "TileConvolutions",
    .summary = "CPU: register-blocked tiles for conv2d nests, vectorized "
               "along the output width, epilogue applied to the "
               "accumulators (loop level)",
    .anchor = "func.func",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = sizeof kStats / sizeof kStats[0],
    .run = conv_run,
};

/* transforms/loop/tile_contractions.c - tile-contractions: matmul nests
 * (as lower-graph-to-loop makes them: one k loop per output element, the
 * fused epilogue applied to its result) become register-blocked tiles
 * for a CPU's vector unit, with the epilogue applied to the accumulators
 * before the store.
 *
 * A CPU-only step: code generation for the CPU (lowering/llvm) runs it
 * on its own copy of the loop module, with the target's vector width;
 * the loop IR that lower-graph-to-loop produces (and that the GPU path
 * consumes) is unchanged. fuse-opt runs it as a pass for inspection.
 *
 * What a matched nest (tile_internal.h) becomes, with W lanes (vector
 * bits / 32), tiles of MR rows x NV vectors (NR = NV * W columns):
 *
 *   [Bp = loop.alloc [y's batch dims, Nv * K] f32; nests packing y(k, j)
 *    for every column j < Nv: the Nf = N / NR * NR first columns as
 *    panels [Nf / NR][K][NR], the next ones as [(Nv - Nf) / W][K][W], so
 *    that a tile reads one contiguous stream as k advances]
 *   loop.parallel (t) over (batch dims x column blocks x row blocks),
 *     row blocks fastest (a thread keeps one B panel in its L2 while it
 *     walks the rows):
 *       acc[MR][NV] = loop.for k: acc[r][c] = fma(splat(x(i0+r, k)),
 *                                                y(k, j0 + c*W ..), acc)
 *       the epilogue on each acc[r][c] as vector<W> ops, vector stores
 *   for the regions: full tiles (MR x NV), the last columns in single
 *   vectors (MR x 1), the last M % MR rows (1 x NV, 1 x 1);
 *   the original nest, restricted to the last N % W columns (scalar).
 *
 * Invariants: only nests whose every dJ-dependent value can be computed
 * W lanes at a time (loads and stores contiguous in the last dim, no
 * dJ-dependent index arithmetic) are changed; otherwise the nest stays
 * as it is. The packing nest reads y's buffers before the tiles run, so
 * a nest that writes a buffer y reads is left alone. Sums are reordered
 * only as loop.reduction allows (one fma per term, k in order).
 */
#include <string.h>

#include "fz/loop.h"
#include "fz/pass.h"
#include "transforms/loop/tile_internal.h"

void fzTileContractionsOptionsInit(FzTileContractionsOptions *o) {
  memset(o, 0, sizeof *o);
  o->vectorBits = 256;
  o->rows = 6;
  o->vectors = 2;
  o->pack = FZ_TILE_PACK_AUTO;
  o->smallM = 16;
}

static uint64_t op_deps(const TileNest *T, const FzOp *op) {
  void *m = fzPtrMapGet(&T->deps, op);
  return m ? (uint64_t)(uintptr_t)m - 1 : 0;
}

static bool set_deps(TileNest *T, const void *key, uint64_t mask) {
  /* Masks fit a pointer on 64-bit hosts, which fuse requires. */
  return fzPtrMapPut(&T->deps, key, (void *)(uintptr_t)(mask + 1));
}

static bool const_index(FzValue *v, int64_t *out) {
  return fzLoopValueGetConstantInt(v, out);
}

/* Dependence masks of the ops of block (in order). */
static bool block_deps(TileNest *T, FzBlock *block) {
  for (FzOp *op = fzBlockGetFirstOp(block); op; op = fzOpGetNextInBlock(op)) {
    uint64_t m = 0;
    for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
      m |= tileDeps(T, fzOpGetOperand(op, i));
    if (op == T->red) {
      if (!set_deps(T, fzBlockGetArgument(T->redBody, 0), TK) ||
          !set_deps(T, fzBlockGetArgument(T->redBody, 1), TACC) ||
          !block_deps(T, T->redBody))
        return false;
      FzOp *yield = fzBlockGetLastOp(T->redBody);
      uint64_t r = (m | tileDeps(T, fzOpGetOperand(yield, 0))) & ~TK;
      if (!set_deps(T, fzOpGetResult(op, 0), r | TACC))
        return false;
      continue;
    }
    if (!set_deps(T, op, m))
      return false;
    for (size_t i = 0; i < fzOpGetNumResults(op); ++i)
      if (!set_deps(T, fzOpGetResult(op, i), m))
        return false;
  }
  return true;
}

bool tileNestComputeDeps(TileNest *T) {
  for (size_t d = 0; d < T->n; ++d)
    if (!set_deps(T, fzBlockGetArgument(T->body, d), (uint64_t)1 << d))
      return false;
  return block_deps(T, T->body);
}

static bool last_stride_one(FzType *bt) {
  size_t rank = fzShapedTypeGetRank(bt);
  const int64_t *s = fzBufferTypeGetStrides(bt);
  return rank > 0 && (!s || s[rank - 1] == 1);
}

/* Whether op (a load or store) reads/writes W consecutive elements when
 * dJ advances lane by lane: dJ's iv is its last index and nothing else
 * depends on dJ. */
bool tileAccessVectorizes(const TileNest *T, FzOp *op) {
  size_t first = fzLoopMemGetBufferOperand(op) + 1;
  size_t n = fzOpGetNumOperands(op);
  FzValue *ivJ = fzBlockGetArgument(T->body, T->dJ);
  uint64_t bit = (uint64_t)1 << T->dJ;
  if (n <= first || fzOpGetOperand(op, n - 1) != ivJ ||
      !last_stride_one(fzValueGetType(fzOpGetOperand(op, first - 1))))
    return false;
  for (size_t k = first - 1; k + 1 < n; ++k)
    if (tileDeps(T, fzOpGetOperand(op, k)) & bit)
      return false;
  return true;
}

/* Whether the dJ-dependent op can run W lanes at a time. */
bool tileOpVectorizes(const TileNest *T, FzOp *op) {
  FzLoopOpcode c = fzLoopGetOpcode(op);
  if (c == FZ_LOOP_OP_LOAD || c == FZ_LOOP_OP_STORE)
    return tileAccessVectorizes(T, op);
  if (!tilePlainOp(op))
    return false;
  FzValue *ivJ = fzBlockGetArgument(T->body, T->dJ);
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
    if (fzOpGetOperand(op, i) == ivJ)
      return false;
  FzType *t = fzValueGetType(fzOpGetResult(op, 0));
  return fzTypeGetKind(t) != FZ_TYPE_INDEX;
}

/* The root of a buffer value (through views). */
FzValue *tileRootOf(FzValue *b) {
  for (;;) {
    FzOp *def = fzValueGetDefiningOp(b);
    if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_VIEW)
      return b;
    b = fzOpGetOperand(def, 0);
  }
}

/* Collects the ops (in the nest) that value v is computed from. */
static bool tree_ok(TileNest *T, FzValue *v, FzPtrMap *seen,
                    const FzPtrMap *written, bool *vectorizes) {
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || !fzOpIsAncestor(T->par, def) || fzPtrMapContains(seen, def))
    return true;
  if (!fzPtrMapPut(seen, def, def))
    return false;
  FzLoopOpcode c = fzLoopGetOpcode(def);
  if (def == T->red || (c != FZ_LOOP_OP_LOAD && !tilePlainOp(def)))
    return false;
  if (c == FZ_LOOP_OP_LOAD &&
      fzPtrMapContains(written, tileRootOf(fzOpGetOperand(def, 0))))
    return false;
  if ((tileDeps(T, v) & ((uint64_t)1 << T->dJ)) && !tileOpVectorizes(T, def))
    *vectorizes = false;
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    if (!tree_ok(T, fzOpGetOperand(def, i), seen, written, vectorizes))
      return false;
  return true;
}

/* Fills T when par is a contraction nest the pass can tile. */
static bool match(TileNest *T, FzOp *par) {
  if (fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL)
    return false;
  size_t n = fzLoopParallelGetNumDims(par);
  if (n < 2 || n > TILE_MAX_DIMS)
    return false;
  T->par = par;
  T->body = fzLoopGetBody(par);
  T->n = n;
  T->dJ = n - 1;
  for (size_t d = 0; d < n; ++d) {
    int64_t lb, ub, st;
    if (!const_index(fzOpGetOperand(par, d), &lb) || lb != 0 ||
        !const_index(fzOpGetOperand(par, n + d), &ub) || ub <= 0 ||
        !const_index(fzOpGetOperand(par, 2 * n + d), &st) || st != 1)
      return false;
    T->trips[d] = ub;
  }
  /* One reduction loop; otherwise plain ops and stores. */
  T->red = NULL;
  for (FzOp *op = fzBlockGetFirstOp(T->body); op; op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (c == FZ_LOOP_OP_FOR) {
      if (T->red)
        return false;
      T->red = op;
    } else if (c == FZ_LOOP_OP_YIELD) {
      if (op != fzBlockGetLastOp(T->body))
        return false;
    } else if (c != FZ_LOOP_OP_STORE && c != FZ_LOOP_OP_LOAD &&
               !tilePlainOp(op)) {
      return false;
    }
  }
  if (!T->red || fzOpGetNumOperands(T->red) != 4 ||
      fzOpGetNumResults(T->red) != 1)
    return false;
  int64_t lb, st;
  if (!const_index(fzOpGetOperand(T->red, 0), &lb) || lb != 0 ||
      !const_index(fzOpGetOperand(T->red, 1), &T->K) || T->K <= 0 ||
      !const_index(fzOpGetOperand(T->red, 2), &st) || st != 1)
    return false;
  if (fzTypeGetKind(fzValueGetType(fzOpGetResult(T->red, 0))) !=
      FZ_TYPE_F32)
    return false;
  T->redBody = fzLoopGetBody(T->red);
  FzOp *yield = T->redBody ? fzBlockGetLastOp(T->redBody) : NULL;
  if (!yield || fzOpGetNumOperands(yield) != 1 ||
      fzBlockGetNumArguments(T->redBody) != 2)
    return false;
  for (FzOp *op = fzBlockGetFirstOp(T->redBody); op != yield;
       op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_LOAD && !tilePlainOp(op))
      return false;
  FzValue *acc = fzBlockGetArgument(T->redBody, 1);
  T->add = fzValueGetDefiningOp(fzOpGetOperand(yield, 0));
  if (!T->add || fzLoopGetOpcode(T->add) != FZ_LOOP_OP_ADDF ||
      fzOpGetBlock(T->add) != T->redBody || !fzValueHasOneUse(acc) ||
      !fzValueHasOneUse(fzOpGetResult(T->add, 0)))
    return false;
  size_t pa = fzOpGetOperand(T->add, 0) == acc ? 1 : 0;
  if (fzOpGetOperand(T->add, 1 - pa) != acc)
    return false;
  T->mul = fzValueGetDefiningOp(fzOpGetOperand(T->add, pa));
  if (!T->mul || fzLoopGetOpcode(T->mul) != FZ_LOOP_OP_MULF ||
      fzOpGetBlock(T->mul) != T->redBody ||
      !fzValueHasOneUse(fzOpGetResult(T->mul, 0)))
    return false;

  if (!tileNestComputeDeps(T))
    return false;

  /* x: no dJ; y: dJ. The row dim: the last one x has and y lacks. */
  uint64_t bj = (uint64_t)1 << T->dJ;
  for (size_t s = 0; s < 2; ++s) {
    FzValue *x = fzOpGetOperand(T->mul, s), *y = fzOpGetOperand(T->mul, 1 - s);
    uint64_t mx = tileDeps(T, x), my = tileDeps(T, y);
    if ((mx & bj) || !(my & bj) || ((mx | my) & TACC))
      continue;
    for (size_t d = T->dJ; d-- > 0;)
      if ((mx >> d & 1) && !(my >> d & 1)) {
        T->x = x, T->y = y, T->dI = d;
        break;
      }
    if (T->x)
      break;
  }
  if (!T->x)
    return false;

  /* Every use of dJ's iv is the last index of a contiguous access; every
   * dJ-dependent op outside the reduction loop vectorizes. */
  FzValue *ivJ = fzBlockGetArgument(T->body, T->dJ);
  for (FzOpOperand *u = fzValueGetFirstUse(ivJ); u;
       u = fzOpOperandGetNextUse(u)) {
    FzOp *o = fzOpOperandGetOwner(u);
    FzLoopOpcode c = fzLoopGetOpcode(o);
    if (c != FZ_LOOP_OP_LOAD && c != FZ_LOOP_OP_STORE)
      return false;
  }
  FzPtrMap written;
  fzPtrMapInit(&written, T->ctx);
  bool ok = true;
  for (FzOp *op = fzBlockGetFirstOp(T->body); ok && op;
       op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (op == T->red || c == FZ_LOOP_OP_YIELD)
      continue;
    if (c == FZ_LOOP_OP_STORE) {
      ok = tileAccessVectorizes(T, op) &&
           fzPtrMapPut(&written, tileRootOf(fzOpGetOperand(op, 1)), op);
      continue;
    }
    if ((op_deps(T, op) & bj) && !tileOpVectorizes(T, op))
      ok = false;
  }
  /* In the reduction loop: x's and y's trees and the two ops only. */
  FzPtrMap seen;
  fzPtrMapInit(&seen, T->ctx);
  bool yVec = true, xVec = true;
  ok = ok && fzPtrMapPut(&seen, T->mul, T->mul) &&
       fzPtrMapPut(&seen, T->add, T->add) &&
       tree_ok(T, T->x, &seen, &written, &xVec) &&
       tree_ok(T, T->y, &seen, &written, &yVec);
  for (FzOp *op = fzBlockGetFirstOp(T->redBody); ok && op != yield;
       op = fzOpGetNextInBlock(op))
    if (!fzPtrMapContains(&seen, op))
      ok = false;
  fzPtrMapFree(&seen);
  fzPtrMapFree(&written);
  T->packY = !yVec;
  return ok;
}

/*===--- The transformation -----------------------------------------------===*/

static bool transform(TileNest *T, const FzTileContractionsOptions *o) {
  unsigned W = o->vectorBits / 32;
  unsigned MR = o->rows, NV = o->vectors;
  if (W < 2 || W > 64 || MR < 1 || MR > TILE_MAX_ROWS || NV < 1 ||
      NV > TILE_MAX_VECS)
    return false;
  TileSmallM small = tileSmallM(T, o);
  if (small != TILE_SMALL_M_DECLINED)
    return small == TILE_SMALL_M_DONE;
  int64_t M = T->trips[T->dI], N = T->trips[T->dJ];
  int64_t NR = (int64_t)NV * W;
  if (N < W)
    return false;
  bool pack = T->packY || o->pack == FZ_TILE_PACK_ALWAYS ||
              (o->pack == FZ_TILE_PACK_AUTO && M >= 4 * (int64_t)MR &&
               T->K >= 16);
  if (T->packY && o->pack == FZ_TILE_PACK_NEVER)
    return false;
  T->packY = pack;
  int64_t Nf = N / NR * NR, Nv = N / W * W, Mf = M / MR * MR;

  TileGen G;
  memset(&G, 0, sizeof G);
  G.T = T;
  G.ctx = T->ctx;
  G.loc = fzOpGetLoc(T->par);
  G.W = W;
  G.idx = fzIndexTypeGet(T->ctx);
  int64_t w = W;
  G.vecF32 = fzVectorTypeGet(T->ctx, 1, &w, fzF32TypeGet(T->ctx), NULL);
  if (!G.vecF32)
    return false;
  fzBuilderInit(&G.top, T->ctx);
  fzBuilderSetInsertionPointBefore(&G.top, T->par);
  fzBuilderInit(&G.consts, T->ctx);
  fzBuilderSetInsertionPointToStart(&G.consts, fzOpGetBlock(T->par));
  G.packedCols = Nv;
  G.panelCols = Nf;
  G.NR = NR;
  FzOp *alloc = NULL;
  if (pack) {
    uint64_t my = tileDeps(T, T->y);
    int64_t shape[TILE_MAX_DIMS + 3];
    size_t r = 0;
    for (size_t d = 0; d < T->n; ++d)
      if (d != T->dJ && (my >> d & 1)) {
        G.yDims[G.numYDims++] = d;
        shape[r++] = T->trips[d];
      }
    shape[r++] = Nv * T->K;
    FzType *bt = fzBufferTypeGet(T->ctx, r, shape, fzF32TypeGet(T->ctx),
                                 NULL, 0, NULL);
    if (!bt)
      return false;
    FzOpState st;
    fzOpStateInit(&st, T->ctx, FZ_STR("loop.alloc"), G.loc);
    fzOpStateAddResults(&st, 1, &bt);
    alloc = fzBuilderCreate(&G.top, &st);
    if (!alloc)
      return false;
    G.packed = fzOpGetResult(alloc, 0);
    if (!tileEmitPack(&G))
      return false;
  }
  TileRegion regions[4] = {
      {MR, NV, 0, Mf / MR, 0, Nf / NR},
      {MR, 1, 0, Mf / MR, Nf, (Nv - Nf) / W},
      {1, NV, Mf, M - Mf, 0, Nf / NR},
      {1, 1, Mf, M - Mf, Nf, (Nv - Nf) / W},
  };
  for (size_t i = 0; i < 4; ++i)
    if (regions[i].rowBlocks > 0 && regions[i].colBlocks > 0 &&
        !tileEmitRegion(&G, &regions[i]))
      return false;
  if (G.failed)
    return false;
  /* The last N % W columns: the original nest, from column Nv on. */
  FzOp *after = T->par;
  if (Nv == N && fzOpGetPrevInBlock(T->par)) {
    after = fzOpGetPrevInBlock(T->par);
    fzOpErase(T->par);
  } else {
    FzValue *lb = fzLoopCreateIndexConstant(&G.consts, G.loc, Nv);
    if (!lb)
      return false;
    fzOpSetOperand(T->par, T->dJ, lb);
  }
  if (alloc) {
    FzOpState st;
    fzOpStateInit(&st, T->ctx, FZ_STR("loop.dealloc"), G.loc);
    fzOpStateAddOperands(&st, 1, &G.packed);
    FzBuilder b;
    fzBuilderInit(&b, T->ctx);
    fzBuilderSetInsertionPointAfter(&b, after);
    if (!fzBuilderCreate(&b, &st))
      return false;
  }
  return true;
}

bool fzTileContractions(FzOp *func, const FzTileContractionsOptions *options,
                        size_t *numTiled) {
  FzTileContractionsOptions defaults;
  if (!options) {
    fzTileContractionsOptionsInit(&defaults);
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
    TileNest T;
    memset(&T, 0, sizeof T);
    T.ctx = ctx;
    fzPtrMapInit(&T.deps, ctx);
    bool matched = match(&T, op);
    if (matched) {
      /* Nothing is changed when the transformation declines before
       * emitting; a failure after that is an internal error. */
      FzOp *prev = fzOpGetPrevInBlock(op);
      if (transform(&T, options)) {
        if (numTiled)
          ++*numTiled;
      } else if (fzOpGetPrevInBlock(op) != prev) {
        fzEmitError(ctx, fzOpGetLoc(op),
                    "tile-contractions: internal error while tiling");
        ok = false;
      }
    }
    fzPtrMapFree(&T.deps);
  }
  return ok;
}

/*===--- The pass ---------------------------------------------------------===*/

static const char *const kPackChoices[] = {"auto", "never", "always", NULL};

static const FzPassOptionDef kOptions[] = {
    {"vector-bits", FZ_PASS_OPTION_INT, "256",
     "Vector register width: W = bits / 32 lanes of f32 accumulators", NULL,
     64, 2048},
    {"rows", FZ_PASS_OPTION_INT, "6", "Rows of a register tile (MR)", NULL,
     1, TILE_MAX_ROWS},
    {"vectors", FZ_PASS_OPTION_INT, "2",
     "Vectors per row of a register tile (NV; NR = NV * W columns)", NULL,
     1, TILE_MAX_VECS},
    {"pack", FZ_PASS_OPTION_STRING, "auto",
     "Copy the B operand into contiguous panels: auto (when reused by at "
     "least 4 row tiles, or when B cannot be read W lanes at a time), "
     "never, always",
     kPackChoices, 0, 0},
    {"small-m", FZ_PASS_OPTION_INT, "16",
     "Nests of at most this many rows stream the weight (small-M "
     "mappings); 0: never",
     NULL, 0, TILE_MAX_ROWS},
    {"small-m-k-block", FZ_PASS_OPTION_INT, "0",
     "Small-M stream form: values of k per block (0: by M)", NULL, 0,
     1 << 20},
    {"small-m-k-split", FZ_PASS_OPTION_INT, "0",
     "Small-M stream form: chunks of k, each a parallel iteration with its "
     "own partial sums (0: by K)",
     NULL, 0, 1 << 20},
    {"small-m-prefetch", FZ_PASS_OPTION_INT, "0",
     "Small-M: elements ahead to prefetch the weight (0: chosen, -1: none)",
     NULL, -1, 1 << 20},
};

static const FzPassStatisticDef kStats[] = {
    {"num-tiled", "Contraction nests tiled"},
};

static bool tile_run(FzPass *pass, FzOp *op) {
  FzTileContractionsOptions o;
  fzTileContractionsOptionsInit(&o);
  o.vectorBits = (unsigned)fzPassGetIntOption(pass, "vector-bits");
  o.rows = (unsigned)fzPassGetIntOption(pass, "rows");
  o.vectors = (unsigned)fzPassGetIntOption(pass, "vectors");
  o.smallM = (unsigned)fzPassGetIntOption(pass, "small-m");
  o.smallMKBlock = (unsigned)fzPassGetIntOption(pass, "small-m-k-block");
  o.smallMKSplit = (unsigned)fzPassGetIntOption(pass, "small-m-k-split");
  o.smallMPrefetch = (int)fzPassGetIntOption(pass, "small-m-prefetch");
  FzStringRef p = fzPassGetStringOption(pass, "pack");
  o.pack = fzStringRefEqual(p, FZ_STR("never"))    ? FZ_TILE_PACK_NEVER
           : fzStringRefEqual(p, FZ_STR("always")) ? FZ_TILE_PACK_ALWAYS
                                                   : FZ_TILE_PACK_AUTO;
  size_t n = 0;
  if (!fzTileContractions(op, &o, &n))
    return false;
  fzPassAddStatistic(pass, 0, n);
  return true;
}

const FzPassDef fzTileContractionsPassDef = {
    .argument = "tile-contractions",
    .displayName = "TileContractions",
    .summary = "CPU: register-blocked, vectorized tiles for matmul nests, "
               "epilogue applied to the accumulators (loop level)",
    .anchor = "func.func",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = sizeof kStats / sizeof kStats[0],
    .run = tile_run,
};

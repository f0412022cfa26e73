/* transforms/loop/tile_emit.c - the nests tile-contractions emits: the
 * packing of y and, per region, the register-blocked microkernel with
 * its epilogue.
 *
 * Values of the original nest are materialized on demand for an
 * instance (r, c) of a tile: row r of its MR rows, vector c of its NV
 * vectors. What a value depends on decides how many copies exist (a
 * value without dI is shared by the rows, one without dJ by the vectors
 * and is a scalar, splatted where a vector op needs it), so x(i, k) is
 * loaded once per row and k, y(k, j) once per vector and k, and the
 * accumulation is one fma per (r, c). Copies are memoized per class
 * (row or -, vector or -) for the region being emitted. Ops of the
 * original body before the reduction loop are emitted before the new
 * loop, ops of the loop's body inside it, the others after it.
 */
#include <string.h>

#include "fz/loop.h"
#include "transforms/loop/tile_internal.h"

/*===--- The packing nest -------------------------------------------------===*/

typedef struct PackCtx {
  TileGen *G;
  FzLoopBuilder b;
  FzPtrMap map; /* original value -> its copy in the packing nest */
} PackCtx;

static FzValue *pack_value(PackCtx *P, FzValue *v) {
  TileNest *T = P->G->T;
  if (!tileInNest(T, v))
    return v;
  FzValue *m = fzPtrMapGet(&P->map, v);
  if (m)
    return m;
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def) { /* an iv the analysis did not allow */
    P->G->failed = true;
    return NULL;
  }
  FzValue *ops[8];
  size_t n = fzOpGetNumOperands(def);
  if (n > 8) {
    P->G->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < n; ++i)
    ops[i] = pack_value(P, fzOpGetOperand(def, i));
  FzValue *r = fzBCloneWith(&P->b, def, ops, fzValueGetType(v));
  if (r && !fzPtrMapPut(&P->map, v, r))
    P->G->failed = true;
  return r;
}

/* One packing nest: columns [col0, col0 + blocks * width) in blocks of
 * `width`, block b's (k, q) at base + (b * K + k) * width + q. */
static bool emit_pack(TileGen *G, int64_t col0, int64_t blocks, int64_t width,
                      int64_t base) {
  TileNest *T = G->T;
  int64_t ub[TILE_MAX_DIMS + 3];
  size_t n = 0;
  for (size_t i = 0; i < G->numYDims; ++i)
    ub[n++] = T->trips[G->yDims[i]];
  ub[n++] = blocks;
  ub[n++] = T->K;
  ub[n++] = width;
  FzValue *ivs[TILE_MAX_DIMS + 3];
  PackCtx P;
  P.G = G;
  FzLoopBuilder top = tileAt(G, &G->top);
  if (!fzBParallel(&top, n, ub, ivs, &P.b))
    return false;
  fzPtrMapInit(&P.map, G->ctx);
  for (size_t i = 0; i < G->numYDims; ++i)
    fzPtrMapPut(&P.map, fzBlockGetArgument(T->body, G->yDims[i]), ivs[i]);
  FzValue *blk = ivs[n - 3], *k = ivs[n - 2], *q = ivs[n - 1];
  FzValue *j =
      fzBIndexOp(&P.b, "loop.addi", fzBAffine(&P.b, blk, width, col0), q);
  fzPtrMapPut(&P.map, fzBlockGetArgument(T->body, T->dJ), j);
  fzPtrMapPut(&P.map, fzBlockGetArgument(T->redBody, 0), k);
  FzValue *y = pack_value(&P, T->y);
  FzValue *row =
      fzBIndexOp(&P.b, "loop.addi", fzBAffine(&P.b, blk, T->K, 0), k);
  FzValue *off =
      fzBIndexOp(&P.b, "loop.addi", fzBAffine(&P.b, row, width, base), q);
  FzValue *sops[2 + TILE_MAX_DIMS + 1];
  sops[0] = y;
  sops[1] = G->packed;
  for (size_t i = 0; i < G->numYDims; ++i)
    sops[2 + i] = ivs[i];
  sops[2 + G->numYDims] = off;
  fzBOp(&P.b, "loop.store", 3 + G->numYDims, sops, NULL);
  fzPtrMapFree(&P.map);
  return !G->failed;
}

bool tileEmitPack(TileGen *G) {
  int64_t Nf = G->panelCols, Nv = G->packedCols, K = G->T->K;
  if (Nf > 0 && !emit_pack(G, 0, Nf / G->NR, G->NR, 0))
    return false;
  if (Nv > Nf && !emit_pack(G, Nf, (Nv - Nf) / G->W, G->W, Nf * K))
    return false;
  return true;
}

/*===--- Materializing values for an instance -----------------------------===*/

static size_t slot(int ri, int ci) {
  return (size_t)(ri + 1) * (TILE_MAX_VECS + 1) + (size_t)(ci + 1);
}

static void classes(TileInst *I, FzValue *v, int r, int c, int *ri, int *ci) {
  uint64_t m = tileDeps(I->T, v);
  bool acc = (m & TACC) != 0;
  *ri = acc || (m >> I->T->dI & 1) ? r : -1;
  *ci = acc || (m >> I->T->dJ & 1) ? c : -1;
}

/* v as a vector for instance (r, c): splatted when it is a scalar. */
FzValue *tileAsVector(TileInst *I, FzValue *v, int r, int c) {
  int ri, ci;
  classes(I, v, r, c, &ri, &ci);
  FzValue *m = tileMaterialize(I, v, r, c);
  if (!m || ci >= 0 || fzTypeGetKind(fzValueGetType(m)) == FZ_TYPE_VECTOR)
    return m;
  FzPtrMap *sp = &I->splats[slot(ri, -1)];
  FzValue *s = fzPtrMapGet(sp, m);
  if (s)
    return s;
  /* Right after the scalar's definition; a block argument's splat goes
   * at the start of the tile (or of the k loop for k itself). */
  FzLoopBuilder b = tileAt(I->G, m == I->k ? &I->kb : &I->pre);
  FzOp *def = fzValueGetDefiningOp(m);
  if (def && fzOpGetBlock(def))
    b = fzBAfter(&b, def);
  s = fzBOp1(&b, "loop.splat", 1, &m,
             fzBVectorType(&b, I->G->W, fzValueGetType(m)));
  if (s && !fzPtrMapPut(sp, m, s))
    I->G->failed = true;
  return s;
}

static FzBuilder *builder_for(TileInst *I, FzOp *def) {
  if (fzOpGetBlock(def) == I->T->redBody)
    return &I->kb;
  return fzOpIsBeforeInBlock(def, I->T->red) ? &I->pre : &I->post;
}

/* Operands of an access op mapped for (r, c); the last index is the
 * vector's column when the access varies along dJ. */
static bool access_operands(TileInst *I, FzOp *op, int r, int c, bool vec,
                            FzValue **ops) {
  size_t n = fzOpGetNumOperands(op);
  size_t first = fzLoopMemGetBufferOperand(op) + 1;
  for (size_t i = 0; i < n; ++i) {
    if (vec && i == n - 1)
      ops[i] = I->cols[c];
    else if (i == 0 && first == 2) /* the stored value */
      ops[i] = vec ? tileAsVector(I, fzOpGetOperand(op, 0), r, c)
                   : tileMaterialize(I, fzOpGetOperand(op, 0), r, c);
    else
      ops[i] = tileMaterialize(I, fzOpGetOperand(op, i), r, c);
    if (!ops[i])
      return false;
  }
  return true;
}

/* y(k, j0 + c W ..) from the packed buffer: the tile's panel starts at
 * pbase, row k of it is nv * W wide. */
static FzValue *packed_y(TileInst *I, int c) {
  TileGen *G = I->G;
  FzLoopBuilder kb = tileAt(G, &I->kb);
  if (!I->koff)
    I->koff = fzBAffine(&kb, I->k, (int64_t)I->R->nv * G->W, 0);
  FzValue *ops[TILE_MAX_DIMS + 2];
  size_t n = 0;
  ops[n++] = G->packed;
  for (size_t i = 0; i < G->numYDims; ++i)
    ops[n++] = I->outer[G->yDims[i]];
  FzValue *off = fzBIndexOp(&kb, "loop.addi", I->pbase, I->koff);
  ops[n++] = c == 0 ? off : fzBAffine(&kb, off, 1, (int64_t)c * G->W);
  return fzBOp1(&kb, "loop.vector_load", n, ops, G->vecF32);
}

FzValue *tileMaterialize(TileInst *I, FzValue *v, int r, int c) {
  TileNest *T = I->T;
  TileGen *G = I->G;
  if (!v || G->failed)
    return NULL;
  if (!tileInNest(T, v))
    return v;
  int ri, ci;
  classes(I, v, r, c, &ri, &ci);
  int ai = ri < 0 ? 0 : ri, aj = ci < 0 ? 0 : ci;
  size_t accIdx = (size_t)ai * I->R->nv + (size_t)aj;
  if (fzValueIsBlockArgument(v)) {
    FzBlock *b = fzValueGetParentBlock(v);
    size_t k = fzValueGetIndex(v);
    if (b == T->body) {
      if (k == T->dI)
        return I->rows[r];
      if (k == T->dJ) { /* only as an access's last index */
        G->failed = true;
        return NULL;
      }
      return I->outer[k];
    }
    if (b == T->redBody)
      return k == 0 ? I->k : I->accIn[accIdx];
    G->failed = true;
    return NULL;
  }
  FzOp *def = fzValueGetDefiningOp(v);
  if (def == T->red)
    return I->accOut[accIdx];
  FzPtrMap *memo = &I->memo[slot(ri, ci)];
  FzValue *m = fzPtrMapGet(memo, v);
  if (m)
    return m;
  FzValue *res = NULL;
  FzLoopOpcode code = fzLoopGetOpcode(def);
  if (def == T->add) {
    FzValue *x = tileAsVector(I, T->x, r, c);
    FzValue *y = T->packY ? packed_y(I, c) : tileAsVector(I, T->y, r, c);
    FzValue *ops[3] = {x, y, I->accIn[accIdx]};
    FzLoopBuilder kb = tileAt(G, &I->kb);
    res = fzBOp1(&kb, "loop.fma", 3, ops, G->vecF32);
  } else if (code == FZ_LOOP_OP_LOAD) {
    FzValue *ops[TILE_MAX_DIMS + 2];
    size_t n = fzOpGetNumOperands(def);
    if (n > TILE_MAX_DIMS + 2 || !access_operands(I, def, r, c, ci >= 0, ops))
      return NULL;
    FzType *elt = fzValueGetType(v);
    FzLoopBuilder b = tileAt(G, builder_for(I, def));
    res = fzBOp1(&b, ci >= 0 ? "loop.vector_load" : "loop.load", n, ops,
                 ci >= 0 ? fzBVectorType(&b, G->W, elt) : elt);
    /* y's vectors in the k loop: prefetched G->prefetch columns ahead
     * (the small-M stream form sets it). */
    if (ci >= 0 && G->prefetch > 0 && builder_for(I, def) == &I->kb)
      fzBPrefetch(&b, n, ops, G->prefetch);
  } else {
    FzValue *ops[8];
    size_t n = fzOpGetNumOperands(def);
    if (n > 8) {
      G->failed = true;
      return NULL;
    }
    for (size_t i = 0; i < n; ++i) {
      /* A select keeps a scalar condition. */
      bool keepScalar = code == FZ_LOOP_OP_SELECT && i == 0;
      ops[i] = ci >= 0 && !keepScalar
                   ? tileAsVector(I, fzOpGetOperand(def, i), r, c)
                   : tileMaterialize(I, fzOpGetOperand(def, i), r, c);
    }
    FzType *t = fzValueGetType(v);
    FzLoopBuilder b = tileAt(G, builder_for(I, def));
    res = fzBCloneWith(&b, def, ops, ci >= 0 ? fzBVectorType(&b, G->W, t) : t);
  }
  if (res && !fzPtrMapPut(memo, v, res))
    G->failed = true;
  return res;
}

/*===--- A region ---------------------------------------------------------===*/

TileInst *tileInstCreate(TileGen *G, const TileRegion *R) {
  TileInst *I = fzCalloc(G->ctx, 1, sizeof *I);
  if (!I) {
    G->failed = true;
    return NULL;
  }
  I->G = G;
  I->T = G->T;
  I->R = R;
  for (size_t s = 0; s < TILE_SLOTS; ++s) {
    fzPtrMapInit(&I->memo[s], G->ctx);
    fzPtrMapInit(&I->splats[s], G->ctx);
  }
  return I;
}

void tileInstDestroy(TileInst *I) {
  if (!I)
    return;
  for (size_t s = 0; s < TILE_SLOTS; ++s) {
    fzPtrMapFree(&I->memo[s]);
    fzPtrMapFree(&I->splats[s]);
  }
  fzFree(I->G->ctx, I);
}

bool tileEmitStores(TileInst *I) {
  TileGen *G = I->G;
  const TileRegion *R = I->R;
  for (unsigned r = 0; r < R->mr && !G->failed; ++r)
    for (unsigned c = 0; c < R->nv && !G->failed; ++c)
      for (FzOp *op = fzBlockGetFirstOp(I->T->body); op && !G->failed;
           op = fzOpGetNextInBlock(op)) {
        if (fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE)
          continue;
        FzValue *sops[TILE_MAX_DIMS + 3];
        size_t n = fzOpGetNumOperands(op);
        if (n > TILE_MAX_DIMS + 3 ||
            !access_operands(I, op, (int)r, (int)c, true, sops)) {
          G->failed = true;
          break;
        }
        FzLoopBuilder post = tileAt(G, &I->post);
        fzBOp(&post, "loop.vector_store", n, sops, NULL);
      }
  return !G->failed;
}

bool tileEmitRegion(TileGen *G, const TileRegion *R) {
  TileNest *T = G->T;
  TileInst *I = tileInstCreate(G, R);
  if (!I)
    return false;
  /* One linear dim: row blocks fastest, then column blocks, then the
   * other dims of the nest (outermost slowest). */
  int64_t total = R->rowBlocks * R->colBlocks;
  for (size_t d = 0; d < T->n; ++d)
    if (d != T->dI && d != T->dJ)
      total *= T->trips[d];
  FzValue *t;
  FzLoopBuilder top = tileAt(G, &G->top), body;
  FzOp *par = fzBParallel(&top, 1, &total, &t, &body);
  if (!par)
    goto done;
  I->post = body.ip;
  FzValue *it =
      fzBIndexOp(&body, "loop.remsi", t, fzBIndex(&body, R->rowBlocks));
  FzValue *q =
      fzBIndexOp(&body, "loop.divsi", t, fzBIndex(&body, R->rowBlocks));
  FzValue *jt =
      fzBIndexOp(&body, "loop.remsi", q, fzBIndex(&body, R->colBlocks));
  q = fzBIndexOp(&body, "loop.divsi", q, fzBIndex(&body, R->colBlocks));
  for (size_t d = T->n; d-- > 0;) {
    if (d == T->dI || d == T->dJ)
      continue;
    I->outer[d] =
        fzBIndexOp(&body, "loop.remsi", q, fzBIndex(&body, T->trips[d]));
    q = fzBIndexOp(&body, "loop.divsi", q, fzBIndex(&body, T->trips[d]));
  }
  FzValue *i0 = fzBAffine(&body, it, R->mr, R->row0);
  for (unsigned r = 0; r < R->mr; ++r)
    I->rows[r] = r == 0 ? i0 : fzBAffine(&body, i0, 1, r);
  int64_t nr = (int64_t)R->nv * G->W;
  FzValue *j0 = fzBAffine(&body, jt, nr, R->col0);
  for (unsigned c = 0; c < R->nv; ++c)
    I->cols[c] = c == 0 ? j0 : fzBAffine(&body, j0, 1, (int64_t)c * G->W);
  if (G->packed)
    I->pbase = fzBAffine(&body, jt, T->K * nr, R->col0 * T->K);
  /* Accumulators start at the reduction's initial value. */
  size_t na = (size_t)R->mr * R->nv;
  FzValue *inits[TILE_MAX_ROWS * TILE_MAX_VECS];
  I->pre = body.ip;
  FzValue *init = tileAsVector(I, fzOpGetOperand(T->red, 3), 0, 0);
  for (size_t a = 0; a < na; ++a)
    inits[a] = init;
  if (G->failed)
    goto done;
  FzValue *lb = fzBIndex(&body, 0), *ub = fzBIndex(&body, T->K);
  FzValue *step = fzBIndex(&body, 1);
  FzLoopBuilder kb;
  FzOp *loop = fzBFor(&body, lb, ub, step, na, inits, G->vecF32, &kb);
  if (!loop)
    goto done;
  I->kb = kb.ip;
  fzBuilderInit(&I->pre, G->ctx);
  fzBuilderSetInsertionPointBefore(&I->pre, loop);
  FzBlock *kbody = fzLoopGetBody(loop);
  I->k = fzBlockGetArgument(kbody, 0);
  for (size_t a = 0; a < na; ++a) {
    I->accIn[a] = fzBlockGetArgument(kbody, 1 + a);
    I->accOut[a] = fzOpGetResult(loop, a);
  }
  /* The k loop: one fma per accumulator. */
  FzValue *next[TILE_MAX_ROWS * TILE_MAX_VECS];
  FzValue *addRes = fzOpGetResult(T->add, 0);
  for (unsigned r = 0; r < R->mr; ++r)
    for (unsigned c = 0; c < R->nv; ++c)
      next[r * R->nv + c] = tileMaterialize(I, addRes, (int)r, (int)c);
  if (G->failed || !fzBSetYield(&kb, loop, na, next))
    goto done;
  /* The epilogue and the stores, instance by instance. */
  tileEmitStores(I);
done:
  tileInstDestroy(I);
  return !G->failed;
}

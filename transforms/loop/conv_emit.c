/* transforms/loop/conv_emit.c - the nests tile-convolutions emits: the
 * weight packing, the padded copy of the input, and per region the
 * register-blocked tiles with their epilogue.
 *
 * A tile of region R holds R->mr output channels (rows, from m0) and
 * R->nv vectors of W output columns (from ow0) of one output row (n, oh).
 * Its sum is three loop.for (c, kh, kw) carrying the mr * nv vector
 * accumulators; per term, the weights of the mr channels are broadcast
 * from their packed block (mr consecutive floats), the input is loaded
 * as nv vectors (once per tile when its rows share input channels, once
 * per row otherwise), and each accumulator takes one fma. The epilogue
 * and stores are tile_emit.c's (tileEmitStores): the values of the
 * original body after the reduction, materialized per (row, vector).
 */
#include <string.h>

#include "fz/loop.h"
#include "transforms/loop/conv_internal.h"

FzValue *convClone(ConvGen *Z, FzBuilder *b, FzValue *v, FzPtrMap *map) {
  TileGen *G = &Z->G;
  if (!v || G->failed)
    return NULL;
  if (!tileInNest(G->T, v))
    return v;
  FzValue *m = fzPtrMapGet(map, v);
  if (m)
    return m;
  FzOp *def = fzValueGetDefiningOp(v);
  size_t n = def ? fzOpGetNumOperands(def) : 0;
  if (!def || n > 8 ||
      !(tilePlainOp(def) || fzLoopGetOpcode(def) == FZ_LOOP_OP_LOAD)) {
    G->failed = true; /* an iv the map lacks: the matcher rules it out */
    return NULL;
  }
  FzValue *ops[8];
  for (size_t i = 0; i < n; ++i)
    ops[i] = convClone(Z, b, fzOpGetOperand(def, i), map);
  FzValue *r = tileCloneWith(G, b, def, ops, fzValueGetType(v));
  if (r && !fzPtrMapPut(map, v, r))
    G->failed = true;
  return r;
}

static FzValue *ibin(TileGen *G, FzBuilder *b, const char *name, FzValue *a,
                     int64_t c) {
  return tileIndexBinary(G, b, name, a, tileConstIndex(G, c));
}

static FzValue *add(TileGen *G, FzBuilder *b, FzValue *a, FzValue *c) {
  return tileIndexBinary(G, b, "loop.addi", a, c);
}

/*===--- Packing ----------------------------------------------------------===*/

/* Whether index v of a load is exactly iv `var` of C. */
static bool is_iv(const ConvNest *C, FzValue *v, int var) {
  int64_t coef[CV_NUM] = {0}, c0 = 0;
  if (!convAffine(C, v, 1, coef, &c0, 0) || c0 != 0)
    return false;
  for (int i = 0; i < CV_NUM; ++i)
    if (coef[i] != (i == var ? 1 : 0))
      return false;
  return true;
}

/* The dense value of the top-level loop.constant_buffer that C's weight
 * term loads at exactly [m, c, kh, kw] (through an extf), or NULL. */
static FzAttr *constant_weights(const ConvNest *C) {
  FzOp *def = fzValueGetDefiningOp(C->wVal);
  if (def && fzLoopGetOpcode(def) == FZ_LOOP_OP_EXTF)
    def = fzValueGetDefiningOp(fzOpGetOperand(def, 0));
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_LOAD ||
      fzOpGetNumOperands(def) != 5)
    return NULL;
  static const int vars[4] = {CV_M, CV_C, CV_KH, CV_KW};
  for (int i = 0; i < 4; ++i)
    if (!is_iv(C, fzOpGetOperand(def, 1 + (size_t)i), vars[i]))
      return NULL;
  FzValue *buf = fzOpGetOperand(def, 0);
  FzOp *cb = fzValueGetDefiningOp(buf);
  FzType *t = fzValueGetType(buf);
  if (!cb || fzLoopGetOpcode(cb) != FZ_LOOP_OP_CONSTANT_BUFFER ||
      fzOpGetBlock(cb) != fzOpGetBlock(C->T.par) ||
      fzBufferTypeGetStrides(t) || fzShapedTypeGetRank(t) != 4)
    return NULL;
  for (int i = 0; i < 4; ++i)
    if (fzShapedTypeGetDim(t, (size_t)i) !=
        (i == 0 ? C->T.trips[CV_M] : C->ext[i - 1]))
      return NULL;
  FzAttr *v = fzOpGetInherentAttr(cb, FZ_STR("value"));
  FzType *elt = fzShapedTypeGetElementType(t);
  if (!v || fzAttrGetKind(v) != FZ_ATTR_DENSE || !fzTypeIsFloat(elt) ||
      fzTypeGetBitWidth(elt) > 32)
    return NULL;
  return v;
}

/* The packed weights as a new loop.constant_buffer at G.top when C's
 * weights are a constant: [ceil(M / MR) * K * MR] f32, zero past M. */
static FzValue *pack_constant(ConvGen *Z, FzAttr *v) {
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  int64_t M = C->T.trips[CV_M], K = Z->K, MR = Z->MR;
  int64_t blocks = (M + MR - 1) / MR, n = blocks * K * MR;
  float *dst = fzCalloc(G->ctx, (size_t)n, sizeof *dst);
  if (!dst)
    return NULL;
  int64_t taps = C->ext[1] * C->ext[2], CG = C->ext[0];
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      int64_t kp = Z->tapMajor ? k % taps * CG + k / taps : k;
      dst[((m / MR) * K + kp) * MR + m % MR] =
          (float)fzDenseAttrGetFloat(v, m * K + k);
    }
  FzType *f32 = fzF32TypeGet(G->ctx);
  FzType *tt = fzTensorTypeGet(G->ctx, 1, &n, f32, G->loc);
  FzType *bt = fzBufferTypeGet(G->ctx, 1, &n, f32, NULL, 0, G->loc);
  FzAttr *nv = tt && bt ? fzDenseAttrGet(G->ctx, tt, dst, (size_t)n * 4) : NULL;
  fzFree(G->ctx, dst);
  if (!nv)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, G->ctx, FZ_STR("loop.constant_buffer"), G->loc);
  fzOpStateAddProp(&st, FZ_STR("value"), nv);
  fzOpStateAddResults(&st, 1, &bt);
  FzOp *op = fzBuilderCreate(&G->top, &st);
  return op ? fzOpGetResult(op, 0) : NULL;
}

bool convPackWeights(ConvGen *Z) {
  TileGen *G = &Z->G;
  FzAttr *v = constant_weights(Z->C);
  if (v) {
    Z->wp = pack_constant(Z, v);
    Z->wpConst = Z->wp != NULL;
    return Z->wpConst;
  }
  int64_t M = Z->C->T.trips[CV_M];
  int64_t n = (M + Z->MR - 1) / Z->MR * Z->K * Z->MR;
  FzType *bt =
      fzBufferTypeGet(G->ctx, 1, &n, fzF32TypeGet(G->ctx), NULL, 0, NULL);
  FzOpState st;
  fzOpStateInit(&st, G->ctx, FZ_STR("loop.alloc"), G->loc);
  fzOpStateAddResults(&st, 1, &bt);
  FzOp *a = bt ? fzBuilderCreate(&G->top, &st) : NULL;
  if (!a)
    return false;
  Z->wp = fzOpGetResult(a, 0);
  return convEmitPackWeights(Z);
}

bool convEmitPackWeights(ConvGen *Z) {
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  int64_t ub[4] = {C->T.trips[CV_M], C->ext[0], C->ext[1], C->ext[2]};
  FzValue *iv[4];
  FzBuilder b;
  if (!tileMakeParallel(G, 4, ub, iv, &b))
    return false;
  FzPtrMap map;
  fzPtrMapInit(&map, G->ctx);
  fzPtrMapPut(&map, C->vars[CV_M], iv[0]);
  fzPtrMapPut(&map, C->vars[CV_C], iv[1]);
  fzPtrMapPut(&map, C->vars[CV_KH], iv[2]);
  fzPtrMapPut(&map, C->vars[CV_KW], iv[3]);
  FzValue *w = convClone(Z, &b, C->wVal, &map);
  fzPtrMapFree(&map);
  /* ((m / MR) * K + k) * MR + m % MR, k = (c * KH + kh) * KW + kw, or
   * (kh * KW + kw) * CG + c (tapMajor) */
  FzValue *k;
  if (Z->tapMajor) {
    k = add(G, &b, tileAffine(G, &b, iv[2], ub[3], 0), iv[3]);
    k = add(G, &b, tileAffine(G, &b, k, ub[1], 0), iv[1]);
  } else {
    k = add(G, &b, tileAffine(G, &b, iv[1], ub[2], 0), iv[2]);
    k = add(G, &b, tileAffine(G, &b, k, ub[3], 0), iv[3]);
  }
  FzValue *blk = ibin(G, &b, "loop.divsi", iv[0], Z->MR);
  FzValue *off = add(G, &b, tileAffine(G, &b, blk, Z->K, 0), k);
  off = add(G, &b, tileAffine(G, &b, off, Z->MR, 0),
            ibin(G, &b, "loop.remsi", iv[0], Z->MR));
  FzValue *sops[3] = {w, Z->wp, off};
  tileMake(G, &b, "loop.store", 3, sops, NULL);
  return !G->failed;
}

/* Stores 0.0 into xp[n, c, hp, (p,) q] for q in [q0, q1) at b. */
static void zero_cols(ConvGen *Z, FzBuilder *b, FzValue *const *pre,
                      size_t npre, int64_t q0, int64_t q1) {
  TileGen *G = &Z->G;
  if (q1 <= q0)
    return;
  FzValue *ops[3] = {tileConstIndex(G, q0), tileConstIndex(G, q1),
                     tileConstIndex(G, 1)};
  FzType *it = G->idx;
  FzOpState st;
  fzOpStateInit(&st, G->ctx, FZ_STR("loop.for"), G->loc);
  fzOpStateAddOperands(&st, 3, ops);
  FzBuilder in;
  FzOp *loop = tileMakeLoop(G, b, &st, 1, &it, &in);
  if (!loop)
    return;
  FzValue *sops[7] = {Z->zero, Z->xp};
  for (size_t i = 0; i < npre; ++i)
    sops[2 + i] = pre[i];
  sops[2 + npre] = fzBlockGetArgument(fzLoopGetBody(loop), 0);
  tileMake(G, &in, "loop.store", 3 + npre, sops, NULL);
}

/* Rows [h0, h1) of the padded input that lie outside the input: 0. */
static bool zero_rows(ConvGen *Z, int64_t h0, int64_t h1) {
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  if (h1 <= h0)
    return true;
  bool phases = C->sw > 1;
  int64_t ub[5] = {C->T.trips[CV_N], C->C, h1 - h0, C->sw, Z->Wq};
  if (!phases)
    ub[3] = Z->Wq;
  FzValue *iv[5];
  FzBuilder b;
  size_t n = phases ? 5 : 4;
  if (!tileMakeParallel(G, n, ub, iv, &b))
    return false;
  FzValue *sops[7] = {Z->zero, Z->xp, iv[0], iv[1],
                      tileAffine(G, &b, iv[2], 1, h0), iv[3], iv[4]};
  tileMake(G, &b, "loop.store", 2 + n, sops, NULL);
  return !G->failed;
}

/* ceil(a / b) for b > 0. */
static int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

bool convEmitPackInput(ConvGen *Z) {
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  /* Padded row hp holds input row hp + hOff. */
  int64_t h0 = -C->hOff, h1 = C->H - C->hOff;
  if (h0 < 0)
    h0 = 0;
  if (h1 > Z->Hp)
    h1 = Z->Hp;
  if (h1 < h0)
    h1 = h0;
  if (!zero_rows(Z, 0, h0) || !zero_rows(Z, h1, Z->Hp))
    return false;
  if (h1 == h0)
    return true;
  int64_t ub[3] = {C->T.trips[CV_N], C->C, h1 - h0};
  FzValue *iv[3];
  FzBuilder b;
  if (!tileMakeParallel(G, 3, ub, iv, &b))
    return false;
  FzValue *hp = tileAffine(G, &b, iv[2], 1, h0);
  FzValue *ih = tileAffine(G, &b, iv[2], 1, h0 + C->hOff);
  FzValue *xBuf = fzOpGetOperand(C->xLoad, 0);
  FzType *xElt = fzValueGetType(fzOpGetResult(C->xLoad, 0));
  bool phases = C->sw > 1;
  for (int64_t p = 0; p < C->sw; ++p) {
    /* Column q of phase p holds input column q * sw + p + wOff. */
    int64_t q0 = ceil_div(-C->wOff - p, C->sw);
    int64_t q1 = ceil_div(C->Wi - C->wOff - p, C->sw);
    q0 = q0 < 0 ? 0 : q0 > Z->Wq ? Z->Wq : q0;
    q1 = q1 < q0 ? q0 : q1 > Z->Wq ? Z->Wq : q1;
    FzValue *pre[4] = {iv[0], iv[1], hp, tileConstIndex(G, p)};
    size_t npre = phases ? 4 : 3;
    zero_cols(Z, &b, pre, npre, 0, q0);
    zero_cols(Z, &b, pre, npre, q1, Z->Wq);
    if (q1 <= q0)
      continue;
    FzValue *ops[3] = {tileConstIndex(G, q0), tileConstIndex(G, q1),
                       tileConstIndex(G, 1)};
    FzType *it = G->idx;
    FzOpState st;
    fzOpStateInit(&st, G->ctx, FZ_STR("loop.for"), G->loc);
    fzOpStateAddOperands(&st, 3, ops);
    FzBuilder in;
    FzOp *loop = tileMakeLoop(G, &b, &st, 1, &it, &in);
    if (!loop)
      return false;
    FzValue *q = fzBlockGetArgument(fzLoopGetBody(loop), 0);
    FzValue *iw = tileAffine(G, &in, q, C->sw, p + C->wOff);
    FzValue *lops[5] = {xBuf, iv[0], iv[1], ih, iw};
    FzValue *v = tileMake1(G, &in, "loop.load", 5, lops, xElt);
    if (C->xExt)
      v = tileMake1(G, &in, "loop.extf", 1, &v, fzF32TypeGet(G->ctx));
    FzValue *sops[7] = {v, Z->xp};
    for (size_t i = 0; i < npre; ++i)
      sops[2 + i] = pre[i];
    sops[2 + npre] = q;
    tileMake(G, &in, "loop.store", 3 + npre, sops, NULL);
  }
  return !G->failed;
}

/*===--- A region ---------------------------------------------------------===*/

/* A loop.for over [0, trip) carrying n vector accumulators from inits,
 * with loop.reduction; its body's builder goes to *inner. */
static FzOp *acc_loop(ConvGen *Z, FzBuilder *b, int64_t trip, size_t n,
                      FzValue *const *inits, FzBuilder *inner) {
  TileGen *G = &Z->G;
  FzValue *ops[3 + TILE_MAX_ROWS * TILE_MAX_VECS];
  FzType *types[1 + TILE_MAX_ROWS * TILE_MAX_VECS];
  ops[0] = tileConstIndex(G, 0);
  ops[1] = tileConstIndex(G, trip);
  ops[2] = tileConstIndex(G, 1);
  types[0] = G->idx;
  for (size_t a = 0; a < n; ++a) {
    ops[3 + a] = inits[a];
    types[1 + a] = G->vecF32;
    if (!inits[a])
      G->failed = true;
  }
  if (G->failed)
    return NULL;
  FzOpState st;
  fzOpStateInit(&st, G->ctx, FZ_STR("loop.for"), G->loc);
  fzOpStateAddOperands(&st, 3 + n, ops);
  fzOpStateAddResults(&st, n, types + 1);
  FzOp *loop = tileMakeLoop(G, b, &st, 1 + n, types, inner);
  if (loop &&
      !fzOpSetAttr(loop, FZ_STR("loop.reduction"), fzUnitAttrGet(G->ctx)))
    G->failed = true;
  return loop;
}

/* Sets the operands of the yield that ends loop's body. */
static void set_yield(TileGen *G, FzOp *loop, size_t n, FzValue *const *vals) {
  for (size_t i = 0; i < n; ++i)
    if (!vals[i])
      G->failed = true;
  if (!G->failed &&
      !fzOpSetOperands(fzBlockGetLastOp(fzLoopGetBody(loop)), n, vals))
    G->failed = true;
}

bool convEmitRegion(ConvGen *Z, const TileRegion *R, bool shared) {
  ConvNest *C = Z->C;
  TileGen *G = &Z->G;
  TileNest *T = G->T;
  TileInst *I = tileInstCreate(G, R);
  if (!I)
    return false;
  int64_t OH = T->trips[CV_OH];
  int64_t total = R->rowBlocks * R->colBlocks * T->trips[CV_N] * OH;
  FzValue *t;
  FzBuilder body;
  if (!tileMakeParallel(G, 1, &total, &t, &body))
    goto done;
  /* t = ((n * OH + oh) * colBlocks + jt) * rowBlocks + it */
  FzValue *it = ibin(G, &body, "loop.remsi", t, R->rowBlocks);
  FzValue *q = ibin(G, &body, "loop.divsi", t, R->rowBlocks);
  FzValue *jt = ibin(G, &body, "loop.remsi", q, R->colBlocks);
  q = ibin(G, &body, "loop.divsi", q, R->colBlocks);
  FzValue *oh = ibin(G, &body, "loop.remsi", q, OH);
  FzValue *n = ibin(G, &body, "loop.divsi", q, OH);
  I->outer[CV_N] = n;
  I->outer[CV_OH] = oh;
  FzValue *m0 = tileAffine(G, &body, it, R->mr, R->row0);
  for (unsigned r = 0; r < R->mr; ++r)
    I->rows[r] = r == 0 ? m0 : tileAffine(G, &body, m0, 1, r);
  int64_t nr = (int64_t)R->nv * G->W;
  FzValue *ow0 = tileAffine(G, &body, jt, nr, R->col0);
  for (unsigned c = 0; c < R->nv; ++c)
    I->cols[c] = c == 0 ? ow0 : tileAffine(G, &body, ow0, 1, (int64_t)c * G->W);
  I->pre = body;
  I->post = body;
  size_t na = (size_t)R->mr * R->nv;
  FzValue *inits[TILE_MAX_ROWS * TILE_MAX_VECS];
  FzValue *init = tileAsVector(I, fzOpGetOperand(C->loops[0], 3), 0, 0);
  for (size_t a = 0; a < na; ++a)
    inits[a] = init;
  /* The tile's weight block: rows row0.. are blocks of MR. */
  int64_t KHW = C->ext[1] * C->ext[2];
  FzValue *wbase = tileAffine(G, &body, it, Z->K * Z->MR,
                              R->row0 / Z->MR * Z->K * Z->MR);
  FzValue *ohs = tileAffine(G, &body, oh, C->sh, Z->xp ? 0 : C->hOff);
  if (G->failed)
    goto done;

  FzBuilder bc, bh, bw;
  FzOp *lc = acc_loop(Z, &I->post, C->ext[0], na, inits, &bc);
  if (!lc)
    goto done;
  fzBuilderInit(&I->pre, G->ctx);
  fzBuilderSetInsertionPointBefore(&I->pre, lc);
  FzBlock *cb = fzLoopGetBody(lc);
  FzValue *civ = fzBlockGetArgument(cb, 0);
  /* The input channels: per tile, or per row. */
  FzValue *ch[TILE_MAX_ROWS];
  unsigned nch = shared ? 1 : R->mr;
  for (unsigned r = 0; r < nch; ++r) {
    FzPtrMap map;
    fzPtrMapInit(&map, G->ctx);
    fzPtrMapPut(&map, C->vars[CV_M], I->rows[r]);
    fzPtrMapPut(&map, C->vars[CV_C], civ);
    ch[r] = convClone(Z, &bc, C->chIdx, &map);
    fzPtrMapFree(&map);
  }
  FzValue *wc = add(G, &bc, tileAffine(G, &bc, civ, KHW * Z->MR, 0), wbase);
  FzValue *args[TILE_MAX_ROWS * TILE_MAX_VECS];
  for (size_t a = 0; a < na; ++a)
    args[a] = fzBlockGetArgument(cb, 1 + a);
  FzOp *lh = acc_loop(Z, &bc, C->ext[1], na, args, &bh);
  if (!lh)
    goto done;
  FzBlock *hb = fzLoopGetBody(lh);
  FzValue *khv = fzBlockGetArgument(hb, 0);
  FzValue *row = add(G, &bh, tileAffine(G, &bh, khv, C->dh, 0), ohs);
  FzValue *wh = add(G, &bh, tileAffine(G, &bh, khv, C->ext[2] * Z->MR, 0), wc);
  for (size_t a = 0; a < na; ++a)
    args[a] = fzBlockGetArgument(hb, 1 + a);
  FzOp *lw = acc_loop(Z, &bh, C->ext[2], na, args, &bw);
  if (!lw)
    goto done;
  FzBlock *wb = fzLoopGetBody(lw);
  FzValue *kwv = fzBlockGetArgument(wb, 0);
  FzValue *wk = add(G, &bw, tileAffine(G, &bw, kwv, Z->MR, 0), wh);
  /* Tap kw's column offset (and phase) along the packed or the input
   * row. */
  FzValue *kwd = tileAffine(G, &bw, kwv, C->dw, 0);
  FzValue *phase = NULL, *qoff;
  if (!Z->xp) {
    qoff = tileAffine(G, &bw, kwd, 1, C->wOff);
  } else if (C->sw > 1) {
    phase = ibin(G, &bw, "loop.remsi", kwd, C->sw);
    qoff = ibin(G, &bw, "loop.divsi", kwd, C->sw);
  } else {
    qoff = kwd;
  }
  FzValue *src = Z->xp ? Z->xp : fzOpGetOperand(C->xLoad, 0);
  FzValue *wv[TILE_MAX_ROWS];
  for (unsigned r = 0; r < R->mr; ++r) {
    FzValue *lops[2] = {Z->wp, r ? tileAffine(G, &bw, wk, 1, r) : wk};
    FzValue *s = tileMake1(G, &bw, "loop.load", 2, lops, fzF32TypeGet(G->ctx));
    wv[r] = tileMake1(G, &bw, "loop.splat", 1, &s, G->vecF32);
  }
  FzValue *next[TILE_MAX_ROWS * TILE_MAX_VECS];
  for (unsigned c = 0; c < R->nv; ++c) {
    FzValue *col = add(G, &bw, I->cols[c], qoff);
    FzValue *xv = NULL;
    for (unsigned r = 0; r < R->mr; ++r) {
      if (r == 0 || !shared) {
        FzValue *lops[6] = {src, n, ch[shared ? 0 : r], row};
        size_t nl = 4;
        if (phase)
          lops[nl++] = phase;
        lops[nl++] = col;
        xv = tileMake1(G, &bw, "loop.vector_load", nl, lops, G->vecF32);
      }
      size_t a = (size_t)r * R->nv + c;
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
  for (size_t a = 0; a < na; ++a)
    I->accOut[a] = fzOpGetResult(lc, a);
  if (!G->failed)
    tileEmitStores(I);
done:
  tileInstDestroy(I);
  return !G->failed;
}

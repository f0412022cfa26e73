/* transforms/loop/tile_int8.c - tile-int8-contractions: integer matmul
 * nests whose operands are 8-bit values minus a zero point (what
 * fold-qdq's integer contractions and ONNX's MatMulInteger become)
 * turn into register-blocked tiles of loop.dot4 (x86's vpdpbusd: four
 * u8 x s8 products per i32 lane), the fused epilogue (the requantize)
 * applied to the accumulators before the store.
 *
 * The step before: narrowing (tile_int8_narrow.c) makes the k loop read
 * the bytes, x = ext(load A8[.., i, k]) [- zx], y = ext(load B8[.., k,
 * j]) [- zy], ext extsi (int8) or extui (uint8). Then, with W lanes
 * (vector bits / 32), tiles of MR rows x NV vectors:
 *
 *   Ap[xdims.., M, K4]  i32: 4 bytes of A per word, k = 4g + t at byte
 *                       t, each as u8 (int8 A: a + 128, its top bit
 *                       flipped); 0 past K
 *   Bp[ydims.., Np * K4 * W] i32: panel p of W columns, word (p K4 + g)
 *                       W + l holds 4 bytes of column p W + l as s8
 *                       (uint8 B: b - 128); 0 past K
 *   RA[xdims.., M], CW[ydims.., Np W]: byte sums of A's rows and B's
 *                       columns, when the correction needs them
 *   loop.parallel over row blocks x column blocks x batch:
 *     acc[r][c] = loop.for g < K4: dot4(acc, splat(Ap[i0 + r, g]),
 *                                        Bp[panel of c, g, 0..W))
 *     acc -= zy' RA[i] + zx' CW[j] - K zx' zy'
 *     the epilogue on acc as vector<W> ops, vector stores
 *   regions: full tiles, single-vector tiles for the last full panels,
 *   one-row tiles for the last M % MR rows; the last N % W columns stay
 *   the original (scalar) nest.
 *
 * Exactness: with au = a + ox (ox = 128 for int8 A, else 0) and ws = b -
 * oy (oy = 128 for uint8 B), x = au - zx' and y = ws - zy' where zx' =
 * zx + ox and zy' = zy - oy, so sum x y = sum au ws - zy' sum au - zx'
 * sum ws + K zx' zy' as i32 arithmetic modulo 2^32, which is what the
 * nest computes (its products and sums wrap). Bit for bit, whatever the
 * values.
 */
#include <string.h>

#include "fz/loop.h"
#include "fz/pass.h"
#include "transforms/loop/tile_int8.h"
#include "transforms/loop/tile_internal.h"

void fzTileInt8OptionsInit(FzTileInt8Options *o) {
  memset(o, 0, sizeof *o);
  o->vectorBits = 512;
  o->rows = 6;
  o->vectors = 4;
}

/*===--- Matching ---------------------------------------------------------===*/

/* One operand of the product: v = ext(load) [- zp]. */
typedef struct IntOperand {
  FzValue *value;  /* the product's operand */
  FzOp *load;      /* the i8 load in the k loop */
  FzOp *ext;       /* extsi / extui */
  FzValue *zp;     /* the i32 zero point (outside the nest), or NULL */
  bool isUnsigned; /* extui */
} IntOperand;

typedef struct IntNest {
  TileNest T;
  IntOperand x, y;
  bool erased; /* transform_int erased the nest (T.par is gone) */
} IntNest;

static bool is_i(FzType *t, unsigned w) {
  return t && fzTypeGetKind(t) == FZ_TYPE_INTEGER && fzTypeGetBitWidth(t) == w;
}

static bool parse_operand(TileNest *T, FzValue *v, IntOperand *o) {
  memset(o, 0, sizeof *o);
  o->value = v;
  FzOp *d = fzValueGetDefiningOp(v);
  if (!d || fzOpGetBlock(d) != T->redBody)
    return false;
  if (fzLoopGetOpcode(d) == FZ_LOOP_OP_SUBI) {
    FzValue *z = fzOpGetOperand(d, 1);
    if (tileInNest(T, z) || !fzValueHasOneUse(v))
      return false;
    o->zp = z;
    v = fzOpGetOperand(d, 0);
    d = fzValueGetDefiningOp(v);
    if (!d || fzOpGetBlock(d) != T->redBody)
      return false;
  }
  FzLoopOpcode c = fzLoopGetOpcode(d);
  if ((c != FZ_LOOP_OP_EXTSI && c != FZ_LOOP_OP_EXTUI) || !fzValueHasOneUse(v))
    return false;
  o->ext = d;
  o->isUnsigned = c == FZ_LOOP_OP_EXTUI;
  FzValue *b = fzOpGetOperand(d, 0);
  FzOp *l = fzValueGetDefiningOp(b);
  if (!l || fzLoopGetOpcode(l) != FZ_LOOP_OP_LOAD ||
      fzOpGetBlock(l) != T->redBody || !is_i(fzValueGetType(b), 8) ||
      !fzValueHasOneUse(b))
    return false;
  /* Indices: ivs of the nest, k, or values from outside it. */
  for (size_t i = 1; i < fzOpGetNumOperands(l); ++i) {
    FzValue *ix = fzOpGetOperand(l, i);
    if (!tileInNest(T, ix))
      continue;
    if (!fzValueIsBlockArgument(ix))
      return false;
    FzBlock *blk = fzValueGetParentBlock(ix);
    if (blk != T->body && !(blk == T->redBody && fzValueGetIndex(ix) == 0))
      return false;
  }
  if (tileInNest(T, fzOpGetOperand(l, 0)))
    return false;
  o->load = l;
  return true;
}

static bool const_index(FzValue *v, int64_t *out) {
  return fzLoopValueGetConstantInt(v, out);
}

static bool match_int(IntNest *N, FzOp *par) {
  TileNest *T = &N->T;
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
  if (!is_i(fzValueGetType(fzOpGetResult(T->red, 0)), 32))
    return false;
  T->redBody = fzLoopGetBody(T->red);
  FzOp *yield = T->redBody ? fzBlockGetLastOp(T->redBody) : NULL;
  if (!yield || fzOpGetNumOperands(yield) != 1 ||
      fzBlockGetNumArguments(T->redBody) != 2)
    return false;
  FzValue *acc = fzBlockGetArgument(T->redBody, 1);
  T->add = fzValueGetDefiningOp(fzOpGetOperand(yield, 0));
  if (!T->add || fzLoopGetOpcode(T->add) != FZ_LOOP_OP_ADDI ||
      fzOpGetBlock(T->add) != T->redBody || !fzValueHasOneUse(acc) ||
      !fzValueHasOneUse(fzOpGetResult(T->add, 0)))
    return false;
  size_t pa = fzOpGetOperand(T->add, 0) == acc ? 1 : 0;
  if (fzOpGetOperand(T->add, 1 - pa) != acc)
    return false;
  T->mul = fzValueGetDefiningOp(fzOpGetOperand(T->add, pa));
  if (!T->mul || fzLoopGetOpcode(T->mul) != FZ_LOOP_OP_MULI ||
      fzOpGetBlock(T->mul) != T->redBody ||
      !fzValueHasOneUse(fzOpGetResult(T->mul, 0)))
    return false;
  if (!tileNestComputeDeps(T))
    return false;
  uint64_t bj = (uint64_t)1 << T->dJ;
  for (size_t s = 0; s < 2 && !T->x; ++s) {
    FzValue *x = fzOpGetOperand(T->mul, s), *y = fzOpGetOperand(T->mul, 1 - s);
    uint64_t mx = tileDeps(T, x), my = tileDeps(T, y);
    if ((mx & bj) || !(my & bj) || ((mx | my) & TACC) || !(mx & TK) ||
        !(my & TK))
      continue;
    for (size_t d = T->dJ; d-- > 0;)
      if ((mx >> d & 1) && !(my >> d & 1)) {
        T->x = x, T->y = y, T->dI = d;
        break;
      }
  }
  if (!T->x || !parse_operand(T, T->x, &N->x) || !parse_operand(T, T->y, &N->y))
    return false;
  /* The k loop holds the two operand trees and the two ops only. */
  size_t count = 0;
  for (FzOp *op = fzBlockGetFirstOp(T->redBody); op != yield;
       op = fzOpGetNextInBlock(op))
    ++count;
  if (count != (size_t)(6 + (N->x.zp != NULL) + (N->y.zp != NULL)))
    return false;
  /* dJ's iv: the last index of contiguous accesses after the k loop
   * (or of y's load in it); dJ-dependent ops vectorize; the packed
   * operands are not written by the nest. */
  FzValue *ivJ = fzBlockGetArgument(T->body, T->dJ);
  for (FzOpOperand *u = fzValueGetFirstUse(ivJ); u;
       u = fzOpOperandGetNextUse(u)) {
    FzOp *o = fzOpOperandGetOwner(u);
    FzLoopOpcode c = fzLoopGetOpcode(o);
    if (c != FZ_LOOP_OP_LOAD && c != FZ_LOOP_OP_STORE)
      return false;
    if (o != N->y.load && !tileAccessVectorizes(T, o))
      return false;
  }
  FzValue *ra = tileRootOf(fzOpGetOperand(N->x.load, 0));
  FzValue *rb = tileRootOf(fzOpGetOperand(N->y.load, 0));
  for (FzOp *op = fzBlockGetFirstOp(T->body); op; op = fzOpGetNextInBlock(op)) {
    FzLoopOpcode c = fzLoopGetOpcode(op);
    if (op == T->red || c == FZ_LOOP_OP_YIELD)
      continue;
    if (c == FZ_LOOP_OP_STORE) {
      FzValue *r = tileRootOf(fzOpGetOperand(op, 1));
      if (!tileAccessVectorizes(T, op) || r == ra || r == rb)
        return false;
      continue;
    }
    if ((tileDeps(T, fzOpGetResult(op, 0)) & bj) && !tileOpVectorizes(T, op))
      return false;
  }
  return true;
}

/*===--- Emission ---------------------------------------------------------===*/

typedef struct IntGen {
  TileGen G;
  IntNest *N;
  FzType *i32, *vecI32;
  int64_t K4, Np; /* k groups; full panels of W columns */
  size_t nx, ny;  /* batch dims of A's and B's packed copies */
  size_t xDims[TILE_MAX_DIMS], yDims[TILE_MAX_DIMS];
  FzValue *Ap, *Bp, *RA, *CW;
  bool bConst;             /* Bp and CW are constants (packed here) */
  FzValue *zxp, *zyp, *c0; /* zx', zy' and K zx' zy' (NULL: zero) */
} IntGen;

static FzValue *ci32(IntGen *I, int64_t v) {
  FzLoopBuilder b = tileAt(&I->G, &I->G.consts);
  return fzBConst(&b, I->i32, (double)v);
}

/* The integer value of v when it is a constant (through extensions and
 * integer arithmetic of constants). */
static bool eval_const(FzValue *v, int64_t *out, int depth) {
  if (fzLoopValueGetConstantInt(v, out))
    return true;
  FzOp *d = fzValueGetDefiningOp(v);
  if (!d || depth > 4)
    return false;
  FzLoopOpcode c = fzLoopGetOpcode(d);
  int64_t a, b;
  if (c == FZ_LOOP_OP_EXTSI || c == FZ_LOOP_OP_EXTUI) {
    unsigned w = fzTypeGetBitWidth(fzValueGetType(fzOpGetOperand(d, 0)));
    if (!eval_const(fzOpGetOperand(d, 0), &a, depth + 1) || w == 0 || w > 32)
      return false;
    uint64_t m = w == 64 ? ~(uint64_t)0 : (((uint64_t)1 << w) - 1);
    uint64_t u = (uint64_t)a & m;
    if (c == FZ_LOOP_OP_EXTSI && (u >> (w - 1)) & 1)
      u |= ~m;
    *out = (int64_t)u;
    return true;
  }
  if ((c == FZ_LOOP_OP_ADDI || c == FZ_LOOP_OP_SUBI) &&
      eval_const(fzOpGetOperand(d, 0), &a, depth + 1) &&
      eval_const(fzOpGetOperand(d, 1), &b, depth + 1)) {
    *out = c == FZ_LOOP_OP_ADDI ? a + b : a - b;
    return true;
  }
  return false;
}

static FzValue *alloc_buffer(IntGen *I, size_t rank, const int64_t *shape) {
  FzType *bt =
      fzBufferTypeGet(I->G.ctx, rank, shape, I->i32, NULL, 0, NULL);
  if (!bt) {
    I->G.failed = true;
    return NULL;
  }
  FzLoopBuilder top = tileAt(&I->G, &I->G.top);
  return fzBOp1(&top, "loop.alloc", 0, NULL, bt);
}

/* A copy of operand o's byte load for (ivs of the nest mapped by map; k). */
static FzValue *clone_load(IntGen *I, FzLoopBuilder *b, const IntOperand *o,
                           FzValue *const *map, FzValue *k) {
  TileNest *T = &I->N->T;
  FzValue *ops[TILE_MAX_DIMS + 2];
  size_t n = fzOpGetNumOperands(o->load);
  if (n > TILE_MAX_DIMS + 2)
    return fzBFail(b);
  for (size_t i = 0; i < n; ++i) {
    FzValue *v = fzOpGetOperand(o->load, i);
    if (tileInNest(T, v)) {
      FzBlock *blk = fzValueGetParentBlock(v);
      v = blk == T->redBody ? k : map[fzValueGetIndex(v)];
      if (!v)
        return fzBFail(b);
    }
    ops[i] = v;
  }
  return fzBOp1(b, "loop.load", n, ops, fzValueGetType(fzOpGetResult(o->load, 0)));
}

/* The word of 4 bytes of operand o at group g (map: the other ivs), each
 * byte its extui xor `flip`, 0 past K. */
static FzValue *pack_word(IntGen *I, FzLoopBuilder *b, const IntOperand *o,
                          FzValue *const *map, FzValue *g, int64_t flip) {
  int64_t K = I->N->T.K;
  FzValue *word = NULL;
  for (int64_t t = 0; t < 4; ++t) {
    FzValue *k = fzBAffine(b, g, 4, t);
    bool edge = K % 4 != 0 && t >= K % 4;
    FzValue *kc = edge ? fzBIndexOp(b, "loop.minsi", k, fzBIndex(b, K - 1)) : k;
    FzValue *byte = clone_load(I, b, o, map, kc);
    FzValue *u = fzBOp1(b, "loop.extui", 1, &byte, I->i32);
    if (flip)
      u = fzBBinary(b, "loop.xori", u, ci32(I, flip));
    if (edge) { /* times 1 when k < K, else 0: min(max(K - k, 0), 1) */
      FzValue *rem = fzBIndexOp(b, "loop.subi", fzBIndex(b, K), k);
      rem = fzBIndexOp(b, "loop.maxsi", rem, fzBIndex(b, 0));
      rem = fzBIndexOp(b, "loop.minsi", rem, fzBIndex(b, 1));
      FzValue *m = fzBOp1(b, "loop.index_cast", 1, &rem, I->i32);
      u = fzBBinary(b, "loop.muli", u, m);
    }
    if (t)
      u = fzBBinary(b, "loop.shli", u, ci32(I, 8 * t));
    word = word ? fzBBinary(b, "loop.ori", word, u) : u;
  }
  return word;
}

/* Ap (and RA when zy' is not zero). */
static bool emit_pack_a(IntGen *I) {
  TileNest *T = &I->N->T;
  TileGen *G = &I->G;
  int64_t shape[TILE_MAX_DIMS + 2];
  size_t r = 0;
  for (size_t i = 0; i < I->nx; ++i)
    shape[r++] = T->trips[I->xDims[i]];
  shape[r++] = T->trips[T->dI];
  shape[r++] = I->K4;
  I->Ap = alloc_buffer(I, r, shape);
  if (!I->Ap)
    return false;
  FzValue *ivs[TILE_MAX_DIMS + 2], *map[TILE_MAX_DIMS] = {0};
  FzLoopBuilder top = tileAt(G, &G->top), body;
  if (!fzBParallel(&top, r, shape, ivs, &body))
    return false;
  for (size_t i = 0; i < I->nx; ++i)
    map[I->xDims[i]] = ivs[i];
  map[T->dI] = ivs[I->nx];
  FzValue *w = pack_word(I, &body, &I->N->x, map, ivs[r - 1],
                         I->N->x.isUnsigned ? 0 : 128);
  FzValue *sops[TILE_MAX_DIMS + 4];
  sops[0] = w;
  sops[1] = I->Ap;
  for (size_t i = 0; i < r; ++i)
    sops[2 + i] = ivs[i];
  fzBOp(&body, "loop.store", 2 + r, sops, NULL);
  if (G->failed || !I->zyp)
    return !G->failed;
  /* RA[.., i] = sum of the bytes of row i: dot4 with bytes of 1. */
  I->RA = alloc_buffer(I, r - 1, shape);
  FzLoopBuilder sb;
  if (!I->RA || !fzBParallel(&top, r - 1, shape, ivs, &sb))
    return false;
  FzValue *zero = ci32(I, 0), *ones = ci32(I, 0x01010101);
  FzLoopBuilder kb;
  FzOp *loop = fzBFor(&sb, fzBIndex(&sb, 0), fzBIndex(&sb, I->K4),
                      fzBIndex(&sb, 1), 1, &zero, I->i32, &kb);
  if (!loop)
    return false;
  FzValue *lops[TILE_MAX_DIMS + 3];
  lops[0] = I->Ap;
  for (size_t i = 0; i + 1 < r; ++i)
    lops[1 + i] = ivs[i];
  lops[r] = fzBlockGetArgument(fzLoopGetBody(loop), 0);
  FzValue *word = fzBOp1(&kb, "loop.load", r + 1, lops, I->i32);
  FzValue *dops[3] = {fzBlockGetArgument(fzLoopGetBody(loop), 1), word, ones};
  FzValue *s = fzBOp1(&kb, "loop.dot4", 3, dops, I->i32);
  if (!s || !fzBSetYield(&kb, loop, 1, &s))
    return false;
  sops[0] = fzOpGetResult(loop, 0);
  sops[1] = I->RA;
  for (size_t i = 0; i + 1 < r; ++i)
    sops[2 + i] = ivs[i];
  fzBOp(&sb, "loop.store", 1 + r, sops, NULL);
  return !G->failed;
}

/* A loop.constant_buffer of i32 words (shape[0..rank)) at G->consts. */
static FzValue *const_words(IntGen *I, size_t rank, const int64_t *shape,
                            const int32_t *words, size_t n) {
  FzContext *ctx = I->G.ctx;
  FzType *tt = fzTensorTypeGet(ctx, rank, shape, I->i32, NULL);
  FzType *bt = fzBufferTypeGet(ctx, rank, shape, I->i32, NULL, 0, NULL);
  FzAttr *v = tt ? fzDenseAttrGet(ctx, tt, words, n * sizeof *words) : NULL;
  if (!v || !bt) {
    I->G.failed = true;
    return NULL;
  }
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("loop.constant_buffer"), I->G.loc);
  fzOpStateAddProp(&st, FZ_STR("value"), v);
  fzOpStateAddResults(&st, 1, &bt);
  FzOp *op = fzBuilderCreate(&I->G.consts, &st);
  if (!op) {
    I->G.failed = true;
    return NULL;
  }
  return fzOpGetResult(op, 0);
}

/* Most words packed at compile time (256 MiB). */
#define INT8_MAX_CONST_WORDS ((int64_t)1 << 26)

/* Bp and CW computed here when y's bytes are a constant (a weight):
 * y's load reads a loop.constant_buffer at indices that are ivs of the
 * nest, k or constants. True with I->Bp set when it did; true with
 * I->Bp NULL when it does not apply; false after an error. */
static bool const_pack_b(IntGen *I) {
  TileNest *T = &I->N->T;
  FzOp *l = I->N->y.load;
  FzOp *cb = fzValueGetDefiningOp(fzOpGetOperand(l, 0));
  if (!cb || fzLoopGetOpcode(cb) != FZ_LOOP_OP_CONSTANT_BUFFER)
    return true;
  FzAttr *v = fzOpGetInherentAttr(cb, FZ_STR("value"));
  FzType *bt = fzValueGetType(fzOpGetResult(cb, 0));
  size_t rank = fzShapedTypeGetRank(bt);
  if (!v || fzAttrGetKind(v) != FZ_ATTR_DENSE || fzBufferTypeGetStrides(bt) ||
      fzOpGetNumOperands(l) != 1 + rank || rank > TILE_MAX_DIMS)
    return true;
  /* Each index: -1 - d for iv d, -1 - TILE_MAX_DIMS for k, else >= 0. */
  int64_t role[TILE_MAX_DIMS];
  for (size_t i = 0; i < rank; ++i) {
    FzValue *ix = fzOpGetOperand(l, 1 + i);
    if (tileInNest(T, ix)) {
      FzBlock *blk = fzValueGetParentBlock(ix);
      role[i] = blk == T->redBody ? -1 - TILE_MAX_DIMS
                                  : -1 - (int64_t)fzValueGetIndex(ix);
    } else if (!fzLoopValueGetConstantInt(ix, &role[i]) || role[i] < 0 ||
               role[i] >= fzShapedTypeGetDim(bt, i)) {
      return true;
    }
  }
  int64_t W = I->G.W, outer = 1;
  for (size_t i = 0; i < I->ny; ++i)
    outer *= T->trips[I->yDims[i]];
  int64_t per = I->Np * I->K4 * W, total = outer * per;
  if (total > INT8_MAX_CONST_WORDS)
    return true;
  const uint8_t *data = fzDenseAttrGetData(v);
  bool splat = fzDenseAttrIsSplat(v);
  int64_t elems = fzShapedTypeGetNumElements(bt);
  if (!data || (!splat && fzDenseAttrGetNumBytes(v) != (size_t)elems))
    return true;
  FzContext *ctx = I->G.ctx;
  int32_t *words = fzMalloc(ctx, (size_t)total * sizeof *words);
  int32_t *sums = I->zxp ? fzCalloc(ctx, (size_t)(outer * I->Np * W), sizeof *sums)
                         : NULL;
  if (!words || (I->zxp && !sums)) {
    fzFree(ctx, words);
    fzFree(ctx, sums);
    I->G.failed = true;
    return false;
  }
  uint8_t flip = I->N->y.isUnsigned ? 0x80 : 0;
  int64_t iv[TILE_MAX_DIMS] = {0};
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o;
    for (size_t i = I->ny; i-- > 0;) {
      iv[I->yDims[i]] = rem % T->trips[I->yDims[i]];
      rem /= T->trips[I->yDims[i]];
    }
    for (int64_t p = 0; p < I->Np; ++p)
      for (int64_t g = 0; g < I->K4; ++g)
        for (int64_t ln = 0; ln < W; ++ln) {
          iv[T->dJ] = p * W + ln;
          uint32_t word = 0;
          for (int64_t t = 0; t < 4 && 4 * g + t < T->K; ++t) {
            int64_t off = 0;
            for (size_t i = 0; i < rank; ++i) {
              int64_t x = role[i] >= 0                    ? role[i]
                          : role[i] == -1 - TILE_MAX_DIMS ? 4 * g + t
                                                          : iv[-1 - role[i]];
              off = off * fzShapedTypeGetDim(bt, i) + x;
            }
            uint8_t b = (uint8_t)(data[splat ? 0 : off] ^ flip);
            word |= (uint32_t)b << (8 * t);
            if (sums)
              sums[o * I->Np * W + p * W + ln] += (int8_t)b;
          }
          words[o * per + (p * I->K4 + g) * W + ln] = (int32_t)word;
        }
  }
  int64_t shape[TILE_MAX_DIMS + 1];
  for (size_t i = 0; i < I->ny; ++i)
    shape[i] = T->trips[I->yDims[i]];
  shape[I->ny] = per;
  I->Bp = const_words(I, I->ny + 1, shape, words, (size_t)total);
  shape[I->ny] = I->Np * W;
  if (sums && I->Bp)
    I->CW = const_words(I, I->ny + 1, shape, sums, (size_t)(outer * I->Np * W));
  fzFree(ctx, words);
  fzFree(ctx, sums);
  I->bConst = true;
  return !I->G.failed;
}

/* Bp (and CW when zx' is not zero). */
static bool emit_pack_b(IntGen *I) {
  TileNest *T = &I->N->T;
  TileGen *G = &I->G;
  if (!const_pack_b(I))
    return false;
  if (I->Bp)
    return true;
  int64_t W = G->W;
  int64_t shape[TILE_MAX_DIMS + 3];
  size_t r = 0;
  for (size_t i = 0; i < I->ny; ++i)
    shape[r++] = T->trips[I->yDims[i]];
  shape[r] = I->Np * I->K4 * W;
  I->Bp = alloc_buffer(I, r + 1, shape);
  if (!I->Bp)
    return false;
  int64_t ub[TILE_MAX_DIMS + 3];
  memcpy(ub, shape, r * sizeof *ub);
  ub[r] = I->Np, ub[r + 1] = I->K4, ub[r + 2] = W;
  FzValue *ivs[TILE_MAX_DIMS + 3], *map[TILE_MAX_DIMS] = {0};
  FzLoopBuilder top = tileAt(G, &G->top), body;
  if (!fzBParallel(&top, r + 3, ub, ivs, &body))
    return false;
  for (size_t i = 0; i < I->ny; ++i)
    map[I->yDims[i]] = ivs[i];
  FzValue *p = ivs[r], *g = ivs[r + 1], *l = ivs[r + 2];
  map[T->dJ] = fzBIndexOp(&body, "loop.addi", fzBAffine(&body, p, W, 0), l);
  FzValue *w =
      pack_word(I, &body, &I->N->y, map, g, I->N->y.isUnsigned ? 128 : 0);
  FzValue *row = fzBIndexOp(&body, "loop.addi", fzBAffine(&body, p, I->K4, 0), g);
  FzValue *off = fzBIndexOp(&body, "loop.addi", fzBAffine(&body, row, W, 0), l);
  FzValue *sops[TILE_MAX_DIMS + 4];
  sops[0] = w;
  sops[1] = I->Bp;
  for (size_t i = 0; i < r; ++i)
    sops[2 + i] = ivs[i];
  sops[2 + r] = off;
  fzBOp(&body, "loop.store", 3 + r, sops, NULL);
  if (G->failed || !I->zxp)
    return !G->failed;
  /* CW[.., j] = sum of the (s8) bytes of column j. */
  shape[r] = I->Np * W;
  I->CW = alloc_buffer(I, r + 1, shape);
  ub[r] = I->Np, ub[r + 1] = W;
  FzLoopBuilder sb, kb;
  if (!I->CW || !fzBParallel(&top, r + 2, ub, ivs, &sb))
    return false;
  FzValue *zero = ci32(I, 0), *ones = ci32(I, 0x01010101);
  FzOp *loop = fzBFor(&sb, fzBIndex(&sb, 0), fzBIndex(&sb, I->K4),
                      fzBIndex(&sb, 1), 1, &zero, I->i32, &kb);
  if (!loop)
    return false;
  FzValue *gk = fzBlockGetArgument(fzLoopGetBody(loop), 0);
  p = ivs[r], l = ivs[r + 1];
  row = fzBIndexOp(&kb, "loop.addi", fzBAffine(&kb, p, I->K4, 0), gk);
  off = fzBIndexOp(&kb, "loop.addi", fzBAffine(&kb, row, W, 0), l);
  FzValue *lops[TILE_MAX_DIMS + 2];
  lops[0] = I->Bp;
  for (size_t i = 0; i < r; ++i)
    lops[1 + i] = ivs[i];
  lops[1 + r] = off;
  FzValue *word = fzBOp1(&kb, "loop.load", r + 2, lops, I->i32);
  FzValue *dops[3] = {fzBlockGetArgument(fzLoopGetBody(loop), 1), ones, word};
  FzValue *s = fzBOp1(&kb, "loop.dot4", 3, dops, I->i32);
  if (!s || !fzBSetYield(&kb, loop, 1, &s))
    return false;
  sops[0] = fzOpGetResult(loop, 0);
  sops[1] = I->CW;
  for (size_t i = 0; i < r; ++i)
    sops[2 + i] = ivs[i];
  sops[2 + r] = fzBAffine(&sb, p, W, 0);
  sops[2 + r] = fzBIndexOp(&sb, "loop.addi", sops[2 + r], l);
  fzBOp(&sb, "loop.store", 3 + r, sops, NULL);
  return !G->failed;
}

static FzValue *splat(IntGen *I, FzLoopBuilder *b, FzValue *s) {
  return fzBOp1(b, "loop.splat", 1, &s, I->vecI32);
}

/* One region: the tiles, their k loop of dot4 and the corrected
 * accumulators handed to the epilogue. */
static bool emit_region(IntGen *I, const TileRegion *R) {
  TileGen *G = &I->G;
  TileNest *T = &I->N->T;
  int64_t W = G->W;
  TileInst *In = tileInstCreate(G, R);
  if (!In)
    return false;
  int64_t total = R->rowBlocks * R->colBlocks;
  for (size_t d = 0; d < T->n; ++d)
    if (d != T->dI && d != T->dJ)
      total *= T->trips[d];
  FzValue *t;
  FzLoopBuilder top = tileAt(G, &G->top), body;
  FzOp *par = fzBParallel(&top, 1, &total, &t, &body);
  if (!par)
    goto done;
  In->post = body.ip;
  FzValue *it = fzBIndexOp(&body, "loop.remsi", t, fzBIndex(&body, R->rowBlocks));
  FzValue *q = fzBIndexOp(&body, "loop.divsi", t, fzBIndex(&body, R->rowBlocks));
  FzValue *jt = fzBIndexOp(&body, "loop.remsi", q, fzBIndex(&body, R->colBlocks));
  q = fzBIndexOp(&body, "loop.divsi", q, fzBIndex(&body, R->colBlocks));
  for (size_t d = T->n; d-- > 0;) {
    if (d == T->dI || d == T->dJ)
      continue;
    In->outer[d] = fzBIndexOp(&body, "loop.remsi", q, fzBIndex(&body, T->trips[d]));
    q = fzBIndexOp(&body, "loop.divsi", q, fzBIndex(&body, T->trips[d]));
  }
  FzValue *i0 = fzBAffine(&body, it, R->mr, R->row0);
  for (unsigned r = 0; r < R->mr; ++r)
    In->rows[r] = r == 0 ? i0 : fzBAffine(&body, i0, 1, r);
  int64_t nr = (int64_t)R->nv * W;
  FzValue *j0 = fzBAffine(&body, jt, nr, R->col0);
  FzValue *pb[TILE_MAX_VECS];
  for (unsigned c = 0; c < R->nv; ++c) {
    In->cols[c] = c == 0 ? j0 : fzBAffine(&body, j0, 1, (int64_t)c * W);
    /* Panel (col0 / W + jt nv + c) starts at its index * K4 * W. */
    pb[c] = fzBAffine(&body, jt, (int64_t)R->nv * I->K4 * W,
                      (R->col0 / W + c) * I->K4 * W);
  }
  size_t na = (size_t)R->mr * R->nv;
  FzValue *inits[TILE_MAX_ROWS * TILE_MAX_VECS];
  FzValue *zero = splat(I, &body, ci32(I, 0));
  for (size_t a = 0; a < na; ++a)
    inits[a] = zero;
  if (G->failed)
    goto done;
  FzLoopBuilder kb;
  FzOp *loop = fzBFor(&body, fzBIndex(&body, 0), fzBIndex(&body, I->K4),
                      fzBIndex(&body, 1), na, inits, I->vecI32, &kb);
  if (!loop)
    goto done;
  fzBuilderInit(&In->pre, G->ctx);
  fzBuilderSetInsertionPointBefore(&In->pre, loop);
  In->kb = kb.ip;
  FzBlock *kbody = fzLoopGetBody(loop);
  FzValue *g = fzBlockGetArgument(kbody, 0);
  FzValue *gw = fzBAffine(&kb, g, W, 0);
  FzValue *av[TILE_MAX_ROWS], *bv[TILE_MAX_VECS];
  for (unsigned r = 0; r < R->mr; ++r) {
    FzValue *ops[TILE_MAX_DIMS + 3];
    size_t n = 0;
    ops[n++] = I->Ap;
    for (size_t i = 0; i < I->nx; ++i)
      ops[n++] = In->outer[I->xDims[i]];
    ops[n++] = In->rows[r];
    ops[n++] = g;
    av[r] = splat(I, &kb, fzBOp1(&kb, "loop.load", n, ops, I->i32));
  }
  for (unsigned c = 0; c < R->nv; ++c) {
    FzValue *ops[TILE_MAX_DIMS + 2];
    size_t n = 0;
    ops[n++] = I->Bp;
    for (size_t i = 0; i < I->ny; ++i)
      ops[n++] = In->outer[I->yDims[i]];
    ops[n++] = fzBIndexOp(&kb, "loop.addi", pb[c], gw);
    bv[c] = fzBOp1(&kb, "loop.vector_load", n, ops, I->vecI32);
  }
  FzValue *next[TILE_MAX_ROWS * TILE_MAX_VECS];
  for (unsigned r = 0; r < R->mr; ++r)
    for (unsigned c = 0; c < R->nv; ++c) {
      size_t a = (size_t)r * R->nv + c;
      FzValue *dops[3] = {fzBlockGetArgument(kbody, 1 + a), av[r], bv[c]};
      next[a] = fzBOp1(&kb, "loop.dot4", 3, dops, I->vecI32);
    }
  if (G->failed || !fzBSetYield(&kb, loop, na, next))
    goto done;
  /* acc - zy' RA[i] - zx' CW[j] + K zx' zy'. */
  FzLoopBuilder post = fzBAfter(&body, loop);
  FzValue *rowCorr[TILE_MAX_ROWS] = {0}, *colCorr[TILE_MAX_VECS] = {0};
  for (unsigned r = 0; r < R->mr && I->RA; ++r) {
    FzValue *ops[TILE_MAX_DIMS + 2];
    size_t n = 0;
    ops[n++] = I->RA;
    for (size_t i = 0; i < I->nx; ++i)
      ops[n++] = In->outer[I->xDims[i]];
    ops[n++] = In->rows[r];
    FzValue *s = fzBOp1(&post, "loop.load", n, ops, I->i32);
    s = fzBBinary(&post, "loop.muli", s, I->zyp);
    if (I->c0)
      s = fzBBinary(&post, "loop.subi", s, I->c0);
    rowCorr[r] = splat(I, &post, s);
  }
  for (unsigned c = 0; c < R->nv && I->CW; ++c) {
    FzValue *ops[TILE_MAX_DIMS + 2];
    size_t n = 0;
    ops[n++] = I->CW;
    for (size_t i = 0; i < I->ny; ++i)
      ops[n++] = In->outer[I->yDims[i]];
    ops[n++] = In->cols[c];
    FzValue *s = fzBOp1(&post, "loop.vector_load", n, ops, I->vecI32);
    colCorr[c] = fzBBinary(&post, "loop.muli", s, splat(I, &post, I->zxp));
  }
  FzValue *c0v = !I->RA && I->c0 ? splat(I, &post, I->c0) : NULL;
  for (unsigned r = 0; r < R->mr; ++r)
    for (unsigned c = 0; c < R->nv; ++c) {
      size_t a = (size_t)r * R->nv + c;
      FzValue *v = fzOpGetResult(loop, a);
      if (rowCorr[r])
        v = fzBBinary(&post, "loop.subi", v, rowCorr[r]);
      if (colCorr[c])
        v = fzBBinary(&post, "loop.subi", v, colCorr[c]);
      if (c0v)
        v = fzBBinary(&post, "loop.addi", v, c0v);
      In->accOut[a] = v;
    }
  if (!G->failed)
    tileEmitStores(In);
done:
  tileInstDestroy(In);
  return !G->failed;
}

/* The effective zero point zp + off (NULL when it is the constant 0). */
static FzValue *effective_zp(IntGen *I, FzValue *zp, int64_t off) {
  int64_t c = 0;
  if (!zp || eval_const(zp, &c, 0)) {
    c += off;
    c = (int64_t)(int32_t)(uint32_t)(uint64_t)c;
    return c == 0 ? NULL : ci32(I, c);
  }
  FzLoopBuilder top = tileAt(&I->G, &I->G.top);
  return off ? fzBBinary(&top, "loop.addi", zp, ci32(I, off)) : zp;
}

static bool transform_int(IntNest *N, const FzTileInt8Options *o) {
  TileNest *T = &N->T;
  unsigned W = o->vectorBits / 32;
  unsigned MR = o->rows, NV = o->vectors;
  if (W < 2 || W > 64 || MR < 1 || MR > TILE_MAX_ROWS || NV < 1 ||
      NV > TILE_MAX_VECS)
    return false;
  int64_t M = T->trips[T->dI], Nn = T->trips[T->dJ];
  if (Nn < (int64_t)W)
    return false;
  IntGen I;
  memset(&I, 0, sizeof I);
  I.N = N;
  TileGen *G = &I.G;
  G->T = T;
  G->ctx = T->ctx;
  G->loc = fzOpGetLoc(T->par);
  G->W = W;
  G->idx = fzIndexTypeGet(T->ctx);
  I.i32 = fzIntegerTypeGet(T->ctx, 32);
  int64_t w = W;
  I.vecI32 = fzVectorTypeGet(T->ctx, 1, &w, I.i32, NULL);
  G->vecF32 = I.vecI32;
  if (!I.vecI32 || !I.i32)
    return false;
  fzBuilderInit(&G->top, T->ctx);
  fzBuilderSetInsertionPointBefore(&G->top, T->par);
  fzBuilderInit(&G->consts, T->ctx);
  fzBuilderSetInsertionPointToStart(&G->consts, fzOpGetBlock(T->par));
  I.K4 = (T->K + 3) / 4;
  I.Np = Nn / W;
  uint64_t mx = tileDeps(T, fzOpGetResult(N->x.load, 0));
  uint64_t my = tileDeps(T, fzOpGetResult(N->y.load, 0));
  for (size_t d = 0; d < T->n; ++d) {
    if (d != T->dI && d != T->dJ && (mx >> d & 1))
      I.xDims[I.nx++] = d;
    if (d != T->dI && d != T->dJ && (my >> d & 1))
      I.yDims[I.ny++] = d;
  }
  I.zxp = effective_zp(&I, N->x.zp, N->x.isUnsigned ? 0 : 128);
  I.zyp = effective_zp(&I, N->y.zp, N->y.isUnsigned ? -128 : 0);
  if (I.zxp && I.zyp) {
    FzLoopBuilder top = tileAt(G, &G->top);
    I.c0 = fzBBinary(&top, "loop.muli",
                     fzBBinary(&top, "loop.muli", ci32(&I, T->K), I.zxp),
                     I.zyp);
  }
  if (G->failed || !emit_pack_a(&I) || !emit_pack_b(&I))
    return false;
  int64_t NR = (int64_t)NV * W;
  int64_t Nf = Nn / NR * NR, Nv = I.Np * W, Mf = M / MR * MR;
  TileRegion regions[4] = {
      {MR, NV, 0, Mf / MR, 0, Nf / NR},
      {MR, 1, 0, Mf / MR, Nf, (Nv - Nf) / W},
      {1, NV, Mf, M - Mf, 0, Nf / NR},
      {1, 1, Mf, M - Mf, Nf, (Nv - Nf) / W},
  };
  for (size_t i = 0; i < 4; ++i)
    if (regions[i].rowBlocks > 0 && regions[i].colBlocks > 0 &&
        !emit_region(&I, &regions[i]))
      return false;
  if (G->failed)
    return false;
  FzOp *after = T->par;
  if (Nv == Nn && fzOpGetPrevInBlock(T->par)) {
    after = fzOpGetPrevInBlock(T->par);
    N->erased = true;
    fzOpErase(T->par);
  } else {
    FzValue *lb = fzLoopCreateIndexConstant(&G->consts, G->loc, Nv);
    if (!lb)
      return false;
    fzOpSetOperand(T->par, T->dJ, lb);
  }
  FzLoopBuilder b = tileAt(G, &G->top);
  b = fzBAfter(&b, after);
  FzValue *bufs[4] = {I.bConst ? NULL : I.CW, I.bConst ? NULL : I.Bp, I.RA,
                      I.Ap};
  for (size_t i = 0; i < 4; ++i)
    if (bufs[i])
      fzBOp(&b, "loop.dealloc", 1, &bufs[i], NULL);
  return !G->failed;
}

bool fzTileInt8Contractions(FzOp *func, const FzTileInt8Options *options,
                            size_t *numTiled) {
  FzTileInt8Options defaults;
  if (!options) {
    fzTileInt8OptionsInit(&defaults);
    options = &defaults;
  }
  if (numTiled)
    *numTiled = 0;
  FzRegion *r = fzOpGetNumRegions(func) ? fzOpGetRegion(func, 0) : NULL;
  FzBlock *body = r ? fzRegionGetFirstBlock(r) : NULL;
  if (!body)
    return true;
  FzContext *ctx = fzOpGetContext(func);
  if (!tileInt8Narrow(func))
    return false;
  bool ok = true;
  for (FzOp *op = fzBlockGetFirstOp(body), *next; ok && op; op = next) {
    next = fzOpGetNextInBlock(op);
    IntNest N;
    memset(&N, 0, sizeof N);
    N.T.ctx = ctx;
    fzPtrMapInit(&N.T.deps, ctx);
    if (match_int(&N, op)) {
      FzOp *prev = fzOpGetPrevInBlock(op);
      FzLoc *loc = fzOpGetLoc(op); /* the context's: outlives op */
      if (transform_int(&N, options)) {
        if (numTiled)
          ++*numTiled;
      } else if (N.erased || fzOpGetPrevInBlock(op) != prev) {
        /* IR was changed before the failure (an allocation): op may be
         * gone (erased: never touched again). */
        fzEmitError(ctx, loc,
                    "tile-int8-contractions: internal error while tiling");
        ok = false;
      }
    }
    fzPtrMapFree(&N.T.deps);
  }
  return ok;
}

/*===--- The pass ---------------------------------------------------------===*/

static const FzPassOptionDef kOptions[] = {
    {"vector-bits", FZ_PASS_OPTION_INT, "512",
     "Vector register width: W = bits / 32 lanes of i32 accumulators", NULL,
     64, 2048},
    {"rows", FZ_PASS_OPTION_INT, "6", "Rows of a register tile (MR)", NULL,
     1, TILE_MAX_ROWS},
    {"vectors", FZ_PASS_OPTION_INT, "4",
     "Vectors per row of a register tile (NV; NR = NV * W columns)", NULL,
     1, TILE_MAX_VECS},
};

static const FzPassStatisticDef kStats[] = {
    {"num-tiled", "Integer contraction nests tiled"},
};

static bool int8_run(FzPass *pass, FzOp *op) {
  FzTileInt8Options o;
  fzTileInt8OptionsInit(&o);
  o.vectorBits = (unsigned)fzPassGetIntOption(pass, "vector-bits");
  o.rows = (unsigned)fzPassGetIntOption(pass, "rows");
  o.vectors = (unsigned)fzPassGetIntOption(pass, "vectors");
  size_t n = 0;
  if (!fzTileInt8Contractions(op, &o, &n))
    return false;
  fzPassAddStatistic(pass, 0, n);
  return true;
}

const FzPassDef fzTileInt8ContractionsPassDef = {
    .argument = "tile-int8-contractions",
    .displayName = "TileInt8Contractions",
    .summary = "CPU: integer matmul nests on 8-bit operands as register "
               "tiles of loop.dot4 (vpdpbusd), operands packed in 4-byte k "
               "groups, epilogue applied to the accumulators (loop level)",
    .anchor = "func.func",
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = sizeof kStats / sizeof kStats[0],
    .run = int8_run,
};

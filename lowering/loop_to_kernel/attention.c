/* lowering/loop_to_kernel/attention.c - the flash-attention kernel of an
 * attention nest (attention.h; docs/codegen.md "Flash attention") and
 * the mapping of lower-loop-to-kernel that takes it.
 *
 * One block per (query tile of BM = 64 or 128 rows, batch element: heads
 * included, grid.z), 4 warps of BM / 4 query rows (MT = 1 or 2 m16
 * tiles each), 128 threads:
 *
 *   setup:    batch ivs from block_id.z; the query tile from block_id.x
 *             (reversed for causal nests: the longest blocks start first);
 *             the row ops of the nest cloned for this thread's rows g and
 *             g + 8 of its warp;
 *   prologue: Q tile (BM x D) into shared memory by cp.async, commit; K
 *             and V tile 0 into stage 0, commit; wait for Q, barrier; each
 *             warp ldmatrix's its 16 rows as D / 16 m16n8k16 A fragments,
 *             kept in registers for the whole loop (at most 32 of them:
 *             BM = 128 at D = 128 loads them again in every key tile);
 *   key loop: per tile of BN = 64 keys (kt): wait, barrier, K and V tile
 *             kt + 1 into the other stage (double buffer), commit;
 *             S = Q K^T by mma.sync (K fragments by ldmatrix), per score
 *             the nest's score chain cloned (scale, mask loads, select),
 *             the row max over the thread's 16 scores per row (2 MT
 *             rows) and its quad (two
 *             shuffles), m' = max(m, max), alpha = exp(m - m'), p = exp(s
 *             - m'), the thread's partial row sum l = l alpha + sum p, O *=
 *             alpha; P rounded to the element type as the A fragments of
 *             P V (the accumulator layout of S is the A layout of P), V by
 *             ldmatrix.trans, O += P V by mma.sync;
 *             two loops: the tiles every row sees whole (no mask), then
 *             the others (keys past Sk and, for causal nests, past the
 *             diagonal, get -inf per element); causal tiles past the
 *             diagonal of the tile's last row are never visited;
 *   final:    l summed over the quad, then per output element the nest's
 *             final loop cloned with O in place of acc (acc / l, the
 *             rounding, the stores at their index maps), rows past Sq
 *             skipped.
 *
 * Shared layout (elements): Q at 0 (BM x D), K stage s at BM D + s BN D,
 * V stage s at BM D + 2 BN D + s BN Dv; every tile row-major with
 * matmul.c's XOR swizzle of 16-byte chunks. ldmatrix addresses of the
 * loop are ((stage base + lane offset) ^ X) + Y where that holds for
 * every lane and stage (checked exhaustively), else computed.
 * Masking: m starts at -FLT_MAX, so a masked (-inf) score adds exp(-inf)
 * = 0 and rescales by 1, never NaN; a row with no visible key ends with l
 * = 0 and acc / l = NaN, as the nest (and graph.softmax) give.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/util.h"
#include "lowering/loop_to_kernel/attention.h"
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"
#include "lowering/loop_to_kernel/matmul_internal.h"

#define BN FZ_ATTN_BN
#define THREADS (32 * FZ_ATTN_WARPS)
#define MAX_ROW_OPS 256

typedef struct AG {
  KB K;
  const FzAttnNest *a;
  FzValue *capMap[FZ_MATMUL_MAX_CAPTURES];
  FzValue *smem;
  FzValue *tid, *lane, *warp, *g, *tq, *m0;
  FzValue *batchIv[FZ_MATMUL_MAX_DIMS];
  /* Each operand's index d without its row and inner terms. */
  FzValue *qBase[FZ_MATMUL_MAX_DIMS], *kBase[FZ_MATMUL_MAX_DIMS],
      *vBase[FZ_MATMUL_MAX_DIMS];
  int64_t qOff, kOff, vOff, kStage, vStage; /* shared element offsets */
  int BM, MT; /* query rows per block, m16 tiles per warp (1 or 2) */
  int R;      /* rows per thread: 2 MT (g, g + 8 of each m16 tile) */
  /* This thread's rows (row r: m16 tile r / 2, g + 8 (r % 2)), clamped
   * into [0, Sq). */
  FzValue *row[4], *rowC[4];
  /* The nest's row ops cloned per row: from[i] -> to[r][i]. */
  FzValue *rowFrom[MAX_ROW_OPS], *rowTo[4][MAX_ROW_OPS];
  size_t numRowVals;
  /* The lane offsets of K and V fragment (0, 0) in a stage (i32). */
  FzValue *lane0[2];
  /* Q's A fragments per m16 tile and k16 step, when kept in registers
   * (qRegs: at most 32 of them); else loaded from shared memory in every
   * key tile. */
  bool qRegs;
  FzValue *fq[2][8][4];
} AG;

static FzValue *cap(AG *G, FzValue *v) {
  for (size_t i = 0; i < G->a->numCaptures; ++i)
    if (G->a->captures[i] == v)
      return G->capMap[i];
  G->K.failed = true;
  return NULL;
}

static FzValue *fconst(AG *G, double v) {
  KB *K = &G->K;
  return mmConstAttr(K, fzFloatAttrGet(K->ctx, K->f32, v), K->f32);
}

static FzValue *fop(AG *G, const char *name, FzValue *x, FzValue *y) {
  FzValue *ops[2] = {x, y};
  return mmOp(&G->K, name, y ? 2 : 1, ops, G->K.f32, NULL);
}

static FzValue *extract(AG *G, FzValue *vec, int h) {
  KB *K = &G->K;
  if (!vec) {
    K->failed = true;
    return NULL;
  }
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.extract"), K->loc);
  fzOpStateAddOperands(&st, 1, &vec);
  fzOpStateAddProp(&st, FZ_STR("position"),
                   fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 64), h));
  FzType *et = fzShapedTypeGetElementType(fzValueGetType(vec));
  fzOpStateAddResults(&st, 1, &et);
  return mmCreate(K, &st, 0);
}

static FzValue *pair(AG *G, FzValue *x, FzValue *y, FzType *vt) {
  FzValue *ops[2] = {x, y};
  return mmOp(&G->K, "kernel.from_elements", 2, ops, vt, NULL);
}

static FzValue *shfl_xor(AG *G, FzValue *v, int off) {
  KB *K = &G->K;
  FzValue *ops[2] = {v, mmConstOf(K, K->i32, off)};
  if (!ops[0] || !ops[1]) {
    K->failed = true;
    return NULL;
  }
  FzType *res[2] = {K->f32, K->i1};
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.shuffle"), K->loc);
  fzOpStateAddOperands(&st, 2, ops);
  fzOpStateAddProp(&st, FZ_STR("mode"), fzStringAttrGet(K->ctx, FZ_STR("xor")));
  fzOpStateAddProp(&st, FZ_STR("width"), fzIntegerAttrGet(K->ctx, K->i32, 32));
  fzOpStateAddResults(&st, 2, res);
  return mmCreate(K, &st, 0);
}

/* kernel.ldmatrix x4 (trans) at shared element addr (i32) into out. */
static void ldsm(AG *G, FzValue *addr, bool trans, FzValue **out) {
  KB *K = &G->K;
  FzValue *ops[2] = {G->smem, mmCast(K, addr, K->idx)};
  for (int r = 0; r < 4; ++r)
    out[r] = NULL;
  if (!ops[1]) {
    K->failed = true;
    return;
  }
  FzType *regs[4] = {K->vreg, K->vreg, K->vreg, K->vreg};
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.ldmatrix"), K->loc);
  fzOpStateAddOperands(&st, 2, ops);
  fzOpStateAddProp(&st, FZ_STR("num"), fzIntegerAttrGet(K->ctx, K->i32, 4));
  if (trans)
    fzOpStateAddProp(&st, FZ_STR("trans"), fzUnitAttrGet(K->ctx));
  fzOpStateAddResults(&st, 4, regs);
  FzOp *op = fzBuilderCreate(&K->b, &st);
  if (!op) {
    K->failed = true;
    return;
  }
  for (int r = 0; r < 4; ++r)
    out[r] = fzOpGetResult(op, r);
}

/* c (an accumulator pair) += A (4 registers) * B (2 registers). */
static void mma(AG *G, FzValue *const *a, FzValue *b0, FzValue *b1,
                FzValue **c) {
  KB *K = &G->K;
  FzValue *ops[8] = {a[0], a[1], a[2], a[3], b0, b1, c[0], c[1]};
  for (int i = 0; i < 8; ++i)
    if (!ops[i]) {
      K->failed = true;
      return;
    }
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.mma"), K->loc);
  fzOpStateAddOperands(&st, 8, ops);
  fzOpStateAddProp(&st, FZ_STR("shape"),
                   fzStringAttrGet(K->ctx, FZ_STR("m16n8k16")));
  FzType *rt[2] = {K->vacc, K->vacc};
  fzOpStateAddResults(&st, 2, rt);
  FzOp *op = fzBuilderCreate(&K->b, &st);
  if (!op) {
    K->failed = true;
    return;
  }
  c[0] = fzOpGetResult(op, 0);
  c[1] = fzOpGetResult(op, 1);
}

static void clone_op(AG *G, FzOp *op, FzIRMapping *map);

/*===--- Operand indices and tile copies ------------------------------===*/

/* The batch part of each index of x: cst + sum over batch dims. */
static void operand_base(AG *G, const FzAttnOperand *x, FzValue **base) {
  KB *K = &G->K;
  if (x->computed)
    return;
  for (size_t d = 0; d < x->rank; ++d) {
    FzValue *v = mmConst(K, x->cst[d]);
    for (size_t b = 0; b + 1 < G->a->numDims; ++b)
      if (x->coef[d][b])
        v = mmAdd(K, v, mmMul(K, G->batchIv[b], x->coef[d][b]));
    base[d] = v;
  }
}

/* Copies a rows x cols tile of operand x (row variable rowVar: i for q,
 * j for k and v) from row row0 (of `extent`: zero-filled past it) into
 * shared memory at element sbase (i32), 16 bytes per copy. */
/* A computed operand's element (row rc, column col): its slice cloned,
 * rounded to the element type. */
static FzValue *computed_at(AG *G, const FzAttnOperand *x, bool isQ,
                            FzValue *rc, FzValue *col) {
  KB *K = &G->K;
  const FzAttnNest *a = G->a;
  FzIRMapping *map = fzIRMappingCreate(K->ctx);
  if (!map) {
    K->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < a->numCaptures; ++i)
    if (G->capMap[i])
      fzIRMappingMap(map, a->captures[i], G->capMap[i]);
  FzBlock *body = fzLoopGetBody(a->par);
  for (size_t d = 0; d + 1 < a->numDims; ++d)
    fzIRMappingMap(map, fzBlockGetArgument(body, d), G->batchIv[d]);
  fzIRMappingMap(map, fzBlockGetArgument(body, a->numDims - 1),
                 isQ ? rc : G->rowC[0]);
  fzIRMappingMap(map, fzBlockGetArgument(fzLoopGetBody(a->kloop), 0),
                 isQ ? mmConst(K, 0) : rc);
  fzIRMappingMap(map, x->inner, col);
  for (size_t i = 0; i < x->numSlice && !K->failed; ++i)
    clone_op(G, x->slice[i], map);
  FzValue *v = fzIRMappingLookup(map, x->value);
  fzIRMappingDestroy(map);
  if (!v) {
    K->failed = true;
    return NULL;
  }
  return mmOp(K, "loop.truncf", 1, &v, K->elt, NULL);
}

/* Chunk (rc, col .. col + 7) of a computed operand stored at dst. */
static void computed_chunk(AG *G, const FzAttnOperand *x, bool isQ,
                           FzValue *rc, FzValue *col, FzValue *dst) {
  KB *K = &G->K;
  FzValue *e[8];
  for (int i = 0; i < 8; ++i)
    e[i] = computed_at(G, x, isQ, rc, mmAddC(K, col, i));
  FzType *vt = fzVectorTypeGet(K->ctx, 1, &(int64_t){8}, K->elt, NULL);
  FzValue *vec = mmOp(K, "kernel.from_elements", 8, e, vt, NULL);
  FzValue *ops[3] = {vec, G->smem, mmCast(K, dst, K->idx)};
  mmOp(K, "kernel.vector_store", 3, ops, NULL, NULL);
}

static void load_tile(AG *G, const FzAttnOperand *x, FzValue *const *base,
                      size_t rowVar, int rows, int cols, int64_t extent,
                      FzValue *row0, FzValue *sbase) {
  KB *K = &G->K;
  int cpr = cols / 8, per = rows * cpr / THREADS;
  size_t ev = G->a->numDims + 1;
  bool ragged = extent % rows != 0;
  for (int p = 0; p < per; ++p) {
    FzValue *c = mmAddC(K, G->tid, (int64_t)p * THREADS);
    FzValue *r = mmDivC(K, c, cpr), *col = mmMul(K, mmRemC(K, c, cpr), 8);
    FzValue *dst = mmAdd(K, sbase, mmCast(K, mmSwizzle(K, r, col, cols),
                                          K->i32));
    FzValue *rg = mmAdd(K, row0, r);
    FzValue *ok = ragged ? mmLtC(K, rg, extent) : NULL;
    FzValue *rc = ragged ? mmMinC(K, rg, extent - 1) : rg;
    if (x->computed) {
      computed_chunk(G, x, x == &G->a->q, rc, col, dst);
      continue;
    }
    FzValue *ops[4 + FZ_MATMUL_MAX_DIMS];
    size_t n = 0;
    ops[n++] = G->smem;
    ops[n++] = mmCast(K, dst, K->idx);
    ops[n++] = cap(G, x->buffer);
    for (size_t d = 0; d < x->rank; ++d) {
      FzValue *v = base[d];
      if (x->coef[d][rowVar])
        v = mmAdd(K, v, mmMul(K, rc, x->coef[d][rowVar]));
      if (x->coef[d][ev])
        v = mmAdd(K, v, mmMul(K, col, x->coef[d][ev]));
      ops[n++] = v;
    }
    if (ok)
      ops[n++] = mmSelect(K, ok, mmConst(K, 16), mmConst(K, 0));
    bool built = true;
    for (size_t i = 0; i < n; ++i)
      built = built && ops[i];
    if (!built) {
      K->failed = true;
      return;
    }
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.cp_async"), K->loc);
    fzOpStateAddOperands(&st, n, ops);
    mmCreate(K, &st, 0);
  }
}

/* K and V tile kt (index) into stage `stage` (i32). */
static void load_kv(AG *G, FzValue *kt, FzValue *stage) {
  KB *K = &G->K;
  const FzAttnNest *a = G->a;
  FzValue *row0 = mmMul(K, kt, BN);
  size_t jv = a->numDims;
  load_tile(G, &a->k, G->kBase, jv, BN, (int)a->D, a->Sk, row0,
            mmAdd(K, mmConstOf(K, K->i32, G->kOff),
                  mmMul(K, stage, G->kStage)));
  load_tile(G, &a->v, G->vBase, jv, BN, (int)a->Dv, a->Sk, row0,
            mmAdd(K, mmConstOf(K, K->i32, G->vOff),
                  mmMul(K, stage, G->vStage)));
}

/*===--- Fragment addresses -------------------------------------------===*/

/* Lane l's ldmatrix row and column of fragment (x, y) in a stage:
 *   K (B of S, n-major): ks = x, key block nj = y:
 *       row = 16 y + 8 (q / 2) + l % 8, col = 16 x + 8 (q % 2)
 *   V (B of P V, trans): key block kk = x, d block nj = y:
 *       row = 16 x + 8 (q % 2) + l % 8, col = 16 y + 8 (q / 2)
 * with q = l / 8: matrices 0, 1 are (b0, b1) of n8 tile 2y, 2, 3 of 2y + 1
 * (matmul.c's frag_rc for B). */
static void frag_rc(bool isV, int x, int y, int l, int *row, int *col) {
  int q = l / 8, r = l % 8;
  *row = isV ? 16 * x + 8 * (q % 2) + r : 16 * y + 8 * (q / 2) + r;
  *col = isV ? 16 * y + 8 * (q / 2) : 16 * x + 8 * (q % 2);
}

static int64_t swz_c(int row, int col, int cols) {
  int C = cols / 8;
  int f = C >= 8 ? row % 8 : (row / (8 / C)) % C;
  return (int64_t)row * cols + (int64_t)(((col / 8) ^ f) * 8);
}

static int frag_cols(const AG *G, bool isV) {
  return (int)(isV ? G->a->Dv : G->a->D);
}

static int64_t frag_off_c(const AG *G, bool isV, int x, int y, int l) {
  int row, col;
  frag_rc(isV, x, y, l, &row, &col);
  return swz_c(row, col, frag_cols(G, isV));
}

static FzValue *frag_off_ir(AG *G, bool isV, int x, int y) {
  KB *K = &G->K;
  FzValue *q = mmDivC(K, G->lane, 8), *r = mmRemC(K, G->lane, 8);
  FzValue *qLo = mmRemC(K, q, 2), *qHi = mmDivC(K, q, 2);
  FzValue *row = isV ? mmAdd(K, mmAddC(K, mmMul(K, qLo, 8), 16 * x), r)
                     : mmAdd(K, mmAddC(K, mmMul(K, qHi, 8), 16 * y), r);
  FzValue *col = isV ? mmAddC(K, mmMul(K, qHi, 8), 16 * y)
                     : mmAddC(K, mmMul(K, qLo, 8), 16 * x);
  return mmCast(K, mmSwizzle(K, row, col, frag_cols(G, isV)), K->i32);
}

/* Constants X, Y with off(x, y) + sb = ((sb + off(0, 0)) ^ X) + Y for
 * every lane and both stage bases sb. */
static bool frag_decompose(const AG *G, bool isV, int x, int y, int64_t *X,
                           int64_t *Y) {
  int cols = frag_cols(G, isV);
  int64_t base = isV ? G->vOff : G->kOff, stage = isV ? G->vStage : G->kStage;
  int64_t o0 = frag_off_c(G, isV, 0, 0, 0), ok = frag_off_c(G, isV, x, y, 0);
  *Y = (ok / cols - o0 / cols) * cols;
  *X = (ok - *Y) ^ o0;
  for (int l = 0; l < 32; ++l) {
    int64_t a = frag_off_c(G, isV, 0, 0, l), b = frag_off_c(G, isV, x, y, l);
    for (int s = 0; s < 2; ++s) {
      int64_t sb = base + s * stage;
      if ((((sb + a) ^ *X) + *Y) != sb + b)
        return false;
    }
  }
  return true;
}

/* The shared address (i32) of lane's fragment (x, y) in the stage at
 * sbase (i32 elements). */
static FzValue *frag_addr(AG *G, bool isV, int x, int y, FzValue *sbase) {
  KB *K = &G->K;
  int64_t X, Y;
  if (frag_decompose(G, isV, x, y, &X, &Y))
    return mmAddC(K, mmXorC(K, mmAdd(K, sbase, G->lane0[isV]), X), Y);
  return mmAdd(K, sbase, frag_off_ir(G, isV, x, y));
}

/*===--- Cloned parts of the nest -------------------------------------===*/

/* A map with the captures, the batch ivs, row r's i and row ops. */
static FzIRMapping *row_map(AG *G, int r, bool withRowOps) {
  KB *K = &G->K;
  const FzAttnNest *a = G->a;
  FzIRMapping *map = fzIRMappingCreate(K->ctx);
  if (!map) {
    K->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < a->numCaptures; ++i)
    if (G->capMap[i])
      fzIRMappingMap(map, a->captures[i], G->capMap[i]);
  FzBlock *body = fzLoopGetBody(a->par);
  for (size_t d = 0; d + 1 < a->numDims; ++d)
    fzIRMappingMap(map, fzBlockGetArgument(body, d), G->batchIv[d]);
  fzIRMappingMap(map, fzBlockGetArgument(body, a->numDims - 1), G->rowC[r]);
  if (withRowOps)
    for (size_t i = 0; i < G->numRowVals; ++i)
      fzIRMappingMap(map, G->rowFrom[i], G->rowTo[r][i]);
  return map;
}

/* Clones op with map at the insertion point (every operand mapped). */
static void clone_op(AG *G, FzOp *op, FzIRMapping *map) {
  KB *K = &G->K;
  for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
    if (!fzIRMappingLookup(map, fzOpGetOperand(op, i))) {
      K->failed = true;
      return;
    }
  FzOp *c = fzOpClone(op, map);
  if (!c) {
    K->failed = true;
    return;
  }
  fzBuilderInsert(&K->b, c);
}

/* The nest's row ops (its top-level scalar ops) for both rows. */
static void clone_row_ops(AG *G) {
  const FzAttnNest *a = G->a;
  for (int r = 0; r < G->R && !G->K.failed; ++r) {
    FzIRMapping *map = row_map(G, r, false);
    if (!map)
      return;
    size_t n = 0;
    FzBlock *body = fzLoopGetBody(a->par);
    FzOp *term = fzBlockGetLastOp(body);
    for (FzOp *op = fzBlockGetFirstOp(body); op && !G->K.failed;
         op = fzOpGetNextInBlock(op)) {
      if (op == a->init || op == a->kloop || op == a->fin || op == term)
        continue;
      clone_op(G, op, map);
      for (size_t i = 0; i < fzOpGetNumResults(op); ++i) {
        if (n >= MAX_ROW_OPS) {
          G->K.failed = true;
          break;
        }
        G->rowFrom[n] = fzOpGetResult(op, i);
        G->rowTo[r][n++] = fzIRMappingLookup(map, fzOpGetResult(op, i));
      }
    }
    G->numRowVals = n;
    fzIRMappingDestroy(map);
  }
}

/* The score of row r at key j (clamped into [0, Sk)) from its dot
 * product x: the nest's score chain cloned. */
static FzValue *score_at(AG *G, int r, FzValue *j, FzValue *x) {
  const FzAttnNest *a = G->a;
  if (a->score == fzOpGetResult(a->dot, 0))
    return x;
  FzIRMapping *map = row_map(G, r, true);
  if (!map)
    return NULL;
  fzIRMappingMap(map, fzBlockGetArgument(fzLoopGetBody(a->kloop), 0), j);
  fzIRMappingMap(map, fzOpGetResult(a->dot, 0), x);
  for (size_t i = 0; i < a->numChain && !G->K.failed; ++i)
    clone_op(G, a->chain[i], map);
  FzValue *s = fzIRMappingLookup(map, a->score);
  fzIRMappingDestroy(map);
  if (!s)
    G->K.failed = true;
  return s;
}

/* Output element (row r, d) = the final loop cloned with o for acc and
 * (m, l) for the key loop's results. */
static void final_at(AG *G, int r, FzValue *d, FzValue *o, FzValue *m,
                     FzValue *l) {
  const FzAttnNest *a = G->a;
  FzIRMapping *map = row_map(G, r, true);
  if (!map)
    return;
  fzIRMappingMap(map, fzOpGetResult(a->kloop, 0), m);
  fzIRMappingMap(map, fzOpGetResult(a->kloop, 1), l);
  fzIRMappingMap(map, fzBlockGetArgument(fzLoopGetBody(a->fin), 0), d);
  fzIRMappingMap(map, fzOpGetResult(a->finLoad, 0), o);
  FzOp *term = fzBlockGetLastOp(fzLoopGetBody(a->fin));
  for (FzOp *op = fzOpGetNextInBlock(a->finLoad); op && op != term &&
                                                  !G->K.failed;
       op = fzOpGetNextInBlock(op))
    clone_op(G, op, map);
  fzIRMappingDestroy(map);
}

/*===--- The key loop ---------------------------------------------------===*/

/* Iteration arguments: O (per m16 tile, Dv / 8 n8 tiles x 2 pairs: o[(mi
 * Dv / 8 + n) 2 + half]), m and l per row. */
typedef struct State {
  FzValue *o[64];
  FzValue *m[4], *l[4];
  size_t no;
  int R;
} State;

static size_t state_pack(const State *s, FzValue **v) {
  size_t n = 0;
  for (size_t i = 0; i < s->no; ++i)
    v[n++] = s->o[i];
  for (int r = 0; r < s->R; ++r)
    v[n++] = s->m[r];
  for (int r = 0; r < s->R; ++r)
    v[n++] = s->l[r];
  return n;
}

static void state_unpack(State *s, FzValue *const *v) {
  size_t n = 0;
  for (size_t i = 0; i < s->no; ++i)
    s->o[i] = v[n++];
  for (int r = 0; r < s->R; ++r)
    s->m[r] = v[n++];
  for (int r = 0; r < s->R; ++r)
    s->l[r] = v[n++];
}

/* Q's A fragments of m16 tile mi (this warp's) and k16 step ks from
 * the Q tile in shared memory. */
static void load_q_frag(AG *G, int mi, int ks, FzValue **out) {
  KB *K = &G->K;
  FzValue *qr = mmAdd(K, mmMul(K, G->warp, 16 * G->MT),
                      mmAddC(K, mmRemC(K, G->lane, 16), 16 * mi));
  FzValue *qc = mmAddC(K, mmMul(K, mmDivC(K, G->lane, 16), 8), 16 * ks);
  ldsm(G, mmAddC(K, mmCast(K, mmSwizzle(K, qr, qc, (int)G->a->D), K->i32),
                 G->qOff),
       false, out);
}

/* One key tile kt (index) on stage `stage` (i32): S, the online softmax,
 * O += P V. masked: keys past Sk and (causal) past each row's diagonal
 * get -inf. Row r of the thread is m16 tile r / 2, half r % 2. */
static void compute_tile(AG *G, FzValue *kt, FzValue *stage, bool masked,
                         State *s) {
  KB *K = &G->K;
  const FzAttnNest *a = G->a;
  int KS = (int)(a->D / 16), NT = BN / 8, MT = G->MT, NO = (int)(a->Dv / 8);
  FzValue *zero = mmConstAttr(
      K, fzDenseAttrGet(K->ctx, K->vacc, &(float){0.0f}, sizeof(float)),
      K->vacc);
  FzValue *S[2][BN / 8][2];
  for (int mi = 0; mi < MT; ++mi)
    for (int n = 0; n < NT; ++n)
      S[mi][n][0] = S[mi][n][1] = zero;
  FzValue *kb = mmAdd(K, mmConstOf(K, K->i32, G->kOff),
                      mmMul(K, stage, G->kStage));
  for (int ks = 0; ks < KS; ++ks) {
    FzValue *qf[2][4];
    for (int mi = 0; mi < MT; ++mi) {
      if (G->qRegs)
        memcpy(qf[mi], G->fq[mi][ks], sizeof qf[mi]);
      else
        load_q_frag(G, mi, ks, qf[mi]);
    }
    for (int nj = 0; nj < BN / 16; ++nj) {
      FzValue *b[4];
      ldsm(G, frag_addr(G, false, ks, nj, kb), false, b);
      for (int mi = 0; mi < MT; ++mi) {
        mma(G, qf[mi], b[0], b[1], S[mi][2 * nj]);
        mma(G, qf[mi], b[2], b[3], S[mi][2 * nj + 1]);
      }
    }
  }
  /* Scores, the row max, p. */
  FzValue *n0 = mmMul(K, kt, BN);
  FzValue *ninf = fconst(G, -HUGE_VAL);
  FzValue *p[4][BN / 8][2];
  for (int r = 0; r < G->R; ++r) {
    int mi = r / 2, half = r % 2;
    FzValue *sc[BN / 8][2], *mx = NULL;
    for (int n = 0; n < NT; ++n)
      for (int h = 0; h < 2; ++h) {
        FzValue *x = extract(G, S[mi][n][half], h);
        FzValue *j = mmAdd(K, n0, mmAddC(K, mmMul(K, G->tq, 2), 8 * n + h));
        FzValue *jc = masked ? mmMinC(K, j, a->Sk - 1) : j;
        FzValue *v = score_at(G, r, jc, x);
        if (masked) {
          FzValue *ok = a->Sk % BN ? mmLtC(K, j, a->Sk) : NULL;
          if (a->causal)
            ok = mmAnd(K, ok, mmLt(K, j, mmAddC(K, G->row[r], a->causalC)));
          if (ok)
            v = mmSelect(K, ok, v, ninf);
        }
        sc[n][h] = v;
        mx = mx ? fop(G, "loop.maxf", mx, v) : v;
      }
    mx = fop(G, "loop.maxf", mx, shfl_xor(G, mx, 1));
    mx = fop(G, "loop.maxf", mx, shfl_xor(G, mx, 2));
    FzValue *mn = fop(G, "loop.maxf", s->m[r], mx);
    FzValue *alpha = fop(G, "loop.exp", fop(G, "loop.subf", s->m[r], mn),
                         NULL);
    FzValue *sum = NULL;
    for (int n = 0; n < NT; ++n)
      for (int h = 0; h < 2; ++h) {
        p[r][n][h] =
            fop(G, "loop.exp", fop(G, "loop.subf", sc[n][h], mn), NULL);
        sum = sum ? fop(G, "loop.addf", sum, p[r][n][h]) : p[r][n][h];
      }
    FzValue *ops[3] = {s->l[r], alpha, sum};
    s->l[r] = mmOp(K, "loop.fma", 3, ops, K->f32, NULL);
    s->m[r] = mn;
    for (int n = 0; n < NO; ++n) {
      FzValue **o = &s->o[(mi * NO + n) * 2 + half];
      *o = pair(G, fop(G, "loop.mulf", extract(G, *o, 0), alpha),
                fop(G, "loop.mulf", extract(G, *o, 1), alpha), K->vacc);
    }
  }
  /* O += P V: P's A fragments are S's accumulator tiles 2kk, 2kk + 1. */
  FzValue *vb = mmAdd(K, mmConstOf(K, K->i32, G->vOff),
                      mmMul(K, stage, G->vStage));
  for (int kk = 0; kk < BN / 16; ++kk) {
    FzValue *pa[2][4];
    for (int mi = 0; mi < MT; ++mi)
      for (int q = 0; q < 4; ++q) {
        int n = 2 * kk + q / 2, r = 2 * mi + q % 2;
        pa[mi][q] =
            pair(G, mmOp(K, "loop.truncf", 1, &p[r][n][0], K->elt, NULL),
                 mmOp(K, "loop.truncf", 1, &p[r][n][1], K->elt, NULL),
                 K->vreg);
      }
    for (int nj = 0; nj < NO / 2; ++nj) {
      FzValue *b[4];
      ldsm(G, frag_addr(G, true, kk, nj, vb), true, b);
      for (int mi = 0; mi < MT; ++mi) {
        mma(G, pa[mi], b[0], b[1], &s->o[(mi * NO + 2 * nj) * 2]);
        mma(G, pa[mi], b[2], b[3], &s->o[(mi * NO + 2 * nj + 1) * 2]);
      }
    }
  }
}

/* The loop over key tiles [lo, hi) (index values; nTiles: all of this
 * block's tiles), carrying s. */
static void key_loop(AG *G, FzValue *lo, FzValue *hi, FzValue *nTiles,
                     bool masked, State *s) {
  KB *K = &G->K;
  FzValue *inits[80], *iters[80], *kt;
  size_t n = state_pack(s, inits);
  FzBuilder saved;
  FzOp *loop = mmForOpen(K, lo, hi, n, inits, &kt, iters, &saved);
  if (!loop)
    return;
  State in = *s;
  state_unpack(&in, iters);
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.cp_async_wait"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("pending"),
                   fzIntegerAttrGet(K->ctx, K->i32, 0));
  mmCreate(K, &st, 0);
  mmPlainOp(K, "kernel.barrier");
  FzValue *nk = mmAddC(K, kt, 1);
  FzBuilder inIf;
  FzOp *guard = mmIfOpen(K, mmLt(K, nk, nTiles), &inIf);
  load_kv(G, nk, mmRemC(K, mmCast(K, nk, K->i32), 2));
  mmIfClose(K, guard, &inIf);
  mmPlainOp(K, "kernel.cp_async_commit");
  compute_tile(G, kt, mmRemC(K, mmCast(K, kt, K->i32), 2), masked, &in);
  FzValue *ys[80];
  state_pack(&in, ys);
  mmForClose(K, loop, n, ys, &saved);
  for (size_t i = 0; i < n; ++i)
    inits[i] = fzOpGetResult(loop, i);
  state_unpack(s, inits);
}

/* min(x, y) of index values. */
static FzValue *min_idx(KB *K, FzValue *x, FzValue *y) {
  return mmSelect(K, mmLt(K, x, y), x, y);
}

/*===--- The kernel -----------------------------------------------------===*/

static void setup(AG *G) {
  KB *K = &G->K;
  const FzAttnNest *a = G->a;
  int BM = G->BM;
  FzValue *bz = mmId(K, "kernel.block_id", "z");
  int64_t inner = 1;
  for (size_t d = a->numDims - 1; d-- > 0;) {
    G->batchIv[d] = mmRemC(K, mmDivC(K, bz, inner), a->extent[d]);
    inner *= a->extent[d];
  }
  int64_t tilesM = (a->Sq + BM - 1) / BM;
  FzValue *bx = mmId(K, "kernel.block_id", "x");
  FzValue *mt = a->causal ? mmAdd(K, mmConst(K, tilesM - 1), mmMul(K, bx, -1))
                          : bx;
  G->m0 = mmMul(K, mt, BM);
  G->tid = mmId(K, "kernel.thread_id", "x");
  G->lane = mmId(K, "kernel.lane_id", NULL);
  G->warp = mmDivC(K, G->tid, 32);
  G->g = mmDivC(K, G->lane, 4);
  G->tq = mmRemC(K, G->lane, 4);
  for (int r = 0; r < G->R; ++r) {
    G->row[r] = mmAdd(K, mmAdd(K, G->m0, mmMul(K, G->warp, 16 * G->MT)),
                      mmAddC(K, G->g, 16 * (r / 2) + 8 * (r % 2)));
    G->rowC[r] = a->Sq % BM ? mmMinC(K, G->row[r], a->Sq - 1) : G->row[r];
  }
  operand_base(G, &a->q, G->qBase);
  operand_base(G, &a->k, G->kBase);
  operand_base(G, &a->v, G->vBase);
  G->qOff = 0;
  G->kOff = (int64_t)BM * a->D;
  G->kStage = (int64_t)BN * a->D;
  G->vOff = G->kOff + 2 * G->kStage;
  G->vStage = (int64_t)BN * a->Dv;
  G->lane0[0] = frag_off_ir(G, false, 0, 0);
  G->lane0[1] = frag_off_ir(G, true, 0, 0);
  clone_row_ops(G);
}

static bool build_body(AG *G) {
  KB *K = &G->K;
  const FzAttnNest *a = G->a;
  int BM = G->BM, NO = (int)(a->Dv / 8);
  setup(G);
  /* Prologue: Q, then K and V tile 0; Q's fragments. */
  load_tile(G, &a->q, G->qBase, a->numDims - 1, BM, (int)a->D, a->Sq, G->m0,
            mmConstOf(K, K->i32, G->qOff));
  mmPlainOp(K, "kernel.cp_async_commit");
  load_kv(G, mmConst(K, 0), mmConstOf(K, K->i32, 0));
  mmPlainOp(K, "kernel.cp_async_commit");
  FzOpState st;
  fzOpStateInit(&st, K->ctx, FZ_STR("kernel.cp_async_wait"), K->loc);
  fzOpStateAddProp(&st, FZ_STR("pending"),
                   fzIntegerAttrGet(K->ctx, K->i32, 1));
  mmCreate(K, &st, 0);
  mmPlainOp(K, "kernel.barrier");
  if (G->qRegs)
    for (int mi = 0; mi < G->MT; ++mi)
      for (int ks = 0; ks < (int)(a->D / 16); ++ks)
        load_q_frag(G, mi, ks, G->fq[mi][ks]);
  /* The key tiles: [0, full) whole for every row, [full, nTiles) masked. */
  int64_t kt = (a->Sk + BN - 1) / BN, kf = a->Sk / BN;
  FzValue *nTiles = mmConst(K, kt), *full = mmConst(K, kf);
  if (a->causal) {
    FzValue *last = mmMinC(K, mmAddC(K, G->m0, BM), a->Sq);
    nTiles = min_idx(K, nTiles,
                     mmAddC(K, mmDivC(K, mmAddC(K, last, a->causalC - 2), BN),
                            1));
    full = min_idx(K, full, mmDivC(K, mmAddC(K, G->m0, a->causalC), BN));
  }
  State s;
  s.no = (size_t)(G->MT * NO * 2);
  s.R = G->R;
  FzValue *zero = mmConstAttr(
      K, fzDenseAttrGet(K->ctx, K->vacc, &(float){0.0f}, sizeof(float)),
      K->vacc);
  for (size_t i = 0; i < s.no; ++i)
    s.o[i] = zero;
  for (int r = 0; r < G->R; ++r) {
    s.m[r] = fconst(G, -FLT_MAX);
    s.l[r] = fconst(G, 0.0);
  }
  key_loop(G, mmConst(K, 0), full, nTiles, false, &s);
  if (a->causal || a->Sk % BN)
    key_loop(G, full, nTiles, nTiles, true, &s);
  /* Final: l over the quad, then the nest's final loop per element. */
  for (int r = 0; r < G->R; ++r) {
    FzValue *l = fop(G, "loop.addf", s.l[r], shfl_xor(G, s.l[r], 1));
    s.l[r] = fop(G, "loop.addf", l, shfl_xor(G, l, 2));
  }
  for (int r = 0; r < G->R; ++r) {
    FzBuilder saved;
    FzOp *guard = mmIfOpen(K, a->Sq % BM ? mmLtC(K, G->row[r], a->Sq) : NULL,
                           &saved);
    for (int n = 0; n < NO; ++n)
      for (int h = 0; h < 2; ++h) {
        FzValue *d = mmAddC(K, mmMul(K, G->tq, 2), 8 * n + h);
        FzValue *o = s.o[((r / 2) * NO + n) * 2 + r % 2];
        final_at(G, r, d, extract(G, o, h), s.m[r], s.l[r]);
      }
    mmIfClose(K, guard, &saved);
  }
  return !K->failed;
}

bool fzKernelBuildAttentionBody(const FzAttnNest *a, FzBuilder *at,
                                FzValue *const *caps) {
  FzContext *ctx = fzOpGetContext(a->par);
  if (!fzRegisterKernelDialect(ctx))
    return false;
  AG *G = fzCalloc(ctx, 1, sizeof *G);
  if (!G)
    return fzOpEmitError(a->par, "lower-loop-to-kernel: out of memory");
  KB *K = &G->K;
  K->ctx = ctx;
  K->loc = fzOpGetLoc(a->par);
  K->idx = fzIndexTypeGet(ctx);
  K->i32 = fzIntegerTypeGet(ctx, 32);
  K->i1 = fzIntegerTypeGet(ctx, 1);
  K->f32 = fzF32TypeGet(ctx);
  K->elt = a->elt;
  K->vreg = fzVectorTypeGet(ctx, 1, &(int64_t){2}, a->elt, NULL);
  K->vacc = fzVectorTypeGet(ctx, 1, &(int64_t){2}, K->f32, NULL);
  K->b = *at;
  G->a = a;
  G->BM = a->bm == 128 ? 128 : 64;
  G->MT = G->BM / 64;
  G->R = 2 * G->MT;
  G->qRegs = G->MT * a->D / 16 <= 8;
  for (size_t i = 0; i < a->numCaptures; ++i)
    if (!(G->capMap[i] = caps[i]))
      K->failed = true;
  FzType *dynT = fzBufferTypeGet(ctx, 1, &(int64_t){FZ_DYNAMIC}, a->elt, NULL,
                                 FZ_KERNEL_SPACE_SHARED, NULL);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("kernel.dynamic_shared"), K->loc);
  fzOpStateAddResults(&st, 1, &dynT);
  G->smem = K->failed ? NULL : mmCreate(K, &st, 0);
  K->lastConst = G->smem ? fzValueGetDefiningOp(G->smem) : NULL;
  bool ok = K->lastConst && build_body(G);
  if (ok)
    *at = K->b;
  fzFree(ctx, G);
  if (!ok)
    return fzOpEmitError(a->par, "could not build the flash-attention "
                                 "kernel");
  return true;
}

/*===--- Launch and plan ------------------------------------------------===*/

void fzAttentionGetLaunch(const FzAttnNest *a, int64_t grid[3],
                          int64_t block[3], int64_t *sharedBytes) {
  int64_t BM = a->bm == 128 ? 128 : 64;
  grid[0] = (a->Sq + BM - 1) / BM;
  grid[1] = 1;
  grid[2] = a->batch;
  block[0] = THREADS;
  block[1] = block[2] = 1;
  *sharedBytes = ((int64_t)BM * a->D + 2 * (int64_t)BN * (a->D + a->Dv)) *
                 (int64_t)fzTypeGetStorageSize(a->elt);
}

int64_t fzAttentionGetFlops(const FzAttnNest *a) {
  int64_t f = 2 * a->batch * a->Sq * a->Sk * (a->D + a->Dv);
  return a->causal ? f / 2 : f;
}

void fzAttentionDescribe(const FzAttnNest *a, char *buf, size_t n) {
  char dv[48] = "";
  if (a->Dv != a->D)
    snprintf(dv, sizeof dv, ", value dim %lld", (long long)a->Dv);
  /* Operands with fused producers: computed by the kernel. */
  char comp[64] = "";
  if (a->q.computed || a->k.computed || a->v.computed)
    snprintf(comp, sizeof comp, ", %s%s%s computed into shared memory",
             a->q.computed ? "q" : "",
             a->k.computed ? (a->q.computed ? " k" : "k") : "",
             a->v.computed ? (a->q.computed || a->k.computed ? " v" : "v")
                           : "");
  snprintf(buf, n, "flash attention %lldx%lld, head dim %lld%s %s (batch "
           "%lld)%s, tile %dx%d:%dw, cp.async double buffer%s, mma.sync",
           (long long)a->Sq, (long long)a->Sk, (long long)a->D, dv,
           fzTypeGetKind(a->elt) == FZ_TYPE_BF16 ? "bf16" : "f16",
           (long long)a->batch, a->causal ? ", causal" : "",
           a->bm == 128 ? 128 : 64, BN, FZ_ATTN_WARPS, comp);
}

bool fzAttentionChooseTile(FzAttnNest *a, const char *text, char *why,
                           size_t whyLen) {
  const char *src = text && *text ? text : getenv("FZ_GPU_ATTN_BM");
  if (!src || !*src) {
    /* 128 rows reuse each K and V fragment twice; at head dims above 64
     * their O, S and P take ~240 registers a thread, so 64 there until
     * measured (bench/gpu/attention.sh times both). */
    a->bm = a->Sq > 64 && a->D <= 64 && a->Dv <= 64 ? 128 : 64;
    return true;
  }
  if (strcmp(src, "64") && strcmp(src, "128"))
    return fzReasonf(why, whyLen, "'%s' is not a query tile (64 or 128)",
                     src);
  a->bm = atoi(src);
  return true;
}

/*===--- The mapping ----------------------------------------------------===*/

static bool plan(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                 FzLkPlan *p) {
  if (o->noMma)
    return false;
  /* Matched on the stack: most nests are no attention, and allocate
   * nothing here. */
  FzAttnNest m;
  char why[256];
  bool isAttn = false;
  if (!fzKernelMatchAttentionNest(nest->par, &m, &isAttn, why, sizeof why)) {
    if (o->remarks && isAttn)
      fzEmitRemark(nest->ctx, fzOpGetLoc(nest->par),
                   "attention nest not lowered to the flash-attention "
                   "kernel: %s", why);
    return false;
  }
  FzAttnNest *a = fzCalloc(p->ctx, 1, sizeof *a);
  if (!a) {
    p->failed = true;
    return false;
  }
  *a = m;
  if (!fzAttentionChooseTile(a, NULL, why, sizeof why)) {
    fzEmitError(nest->ctx, fzOpGetLoc(nest->par),
                "lower-loop-to-kernel: attention tile: %s", why);
    fzFree(p->ctx, a);
    p->failed = true;
    return false;
  }
  fzAttentionGetLaunch(a, p->grid, p->block, &p->sharedBytes);
  fzAttentionDescribe(a, p->desc, sizeof p->desc);
  p->flops = fzAttentionGetFlops(a);
  p->state = a;
  return true;
}

static void release(FzLkPlan *p) {
  fzFree(p->ctx, p->state);
  p->state = NULL;
}

static bool build(FzLkBuild *kb, const FzLkPlan *p) {
  const FzAttnNest *a = p->state;
  FzValue *caps[FZ_MATMUL_MAX_CAPTURES];
  for (size_t i = 0; i < a->numCaptures; ++i)
    if (!(caps[i] = fzLkMapGet(&kb->base, a->captures[i])))
      return fzOpEmitError(a->par, "lower-loop-to-kernel: a value the "
                                   "attention nest uses is not in its "
                                   "kernel");
  if (!fzKernelBuildAttentionBody(a, &kb->b, caps))
    return false;
  if (kb->opts->remarks) {
    FzStringRef name = fzSymbolGetName(kb->kernel);
    fzEmitRemark(kb->ctx, kb->loc, "%s -> @%.*s", p->desc, (int)name.length,
                 name.data);
  }
  return true;
}

const FzLkMapping fzLkAttentionMapping = {
    .name = "attention",
    .plan = plan,
    .build = build,
    .release = release,
};

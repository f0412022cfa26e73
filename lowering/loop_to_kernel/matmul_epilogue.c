/* lowering/loop_to_kernel/matmul_epilogue.c - the end of a generated
 * matmul kernel and its place in the module: the nest's epilogue cloned
 * per accumulator element (with the element's indices and the
 * accumulator in place of the k loop's result), the stores of pairs as
 * one vector store, the guards of a tile that overhangs the matrix.
 */
#include <stdio.h>
#include <string.h>

#include "lowering/loop_to_kernel/matmul_internal.h"

/*===--- Epilogue -------------------------------------------------------===*/

/* Whether op only feeds the reduction (a conv's index arithmetic before
 * its loops, a split nest's slice bounds): every use of its results is
 * inside kloop (its bounds included) or in such an op. */
static bool feeds_only_reduction(FzOp *op, FzOp *kloop, int depth) {
  if (depth > 16 || fzLoopGetOpcode(op) == FZ_LOOP_OP_STORE)
    return false;
  for (size_t r = 0; r < fzOpGetNumResults(op); ++r)
    for (FzOpOperand *u = fzValueGetFirstUse(fzOpGetResult(op, r)); u;
         u = fzOpOperandGetNextUse(u)) {
      FzOp *user = fzOpOperandGetOwner(u);
      if (!fzOpIsAncestor(kloop, user) &&
          !feeds_only_reduction(user, kloop, depth + 1))
        return false;
    }
  return fzOpGetNumResults(op) > 0;
}

/* The value of parallel dim d for the element (row, col): a conv's row
 * is (n, oh, ow). */
static FzValue *dim_value(Gen *G, size_t d, FzValue *row, FzValue *col) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  const FzMatmulConv *cv = &m->conv;
  if (m->splitK && (int)d == m->dimSplit)
    return G->batchIv[d]; /* the slice: block_id.y */
  if (!cv->on)
    return (int)d == m->dimI   ? row
           : (int)d == m->dimJ ? col
                               : G->batchIv[d];
  if (cv->pointwise) /* rows oc, columns oh * OW + ow, batch n */
    return d == 0   ? G->batchIv[0]
           : d == 1 ? row
           : d == 2 ? mmDivC(K, col, cv->OW)
                    : mmRemC(K, col, cv->OW);
  if (cv->nhwc) /* dims (n, oh, ow, oc): rows (n, oh, ow), columns oc */
    return d == 0   ? mmDivC(K, row, cv->OH * cv->OW)
           : d == 1 ? mmRemC(K, mmDivC(K, row, cv->OW), cv->OH)
           : d == 2 ? mmRemC(K, row, cv->OW)
                    : col;
  switch (d) {
  case 0:
    return mmDivC(K, row, cv->OH * cv->OW);
  case 1:
    return col;
  case 2:
    return mmRemC(K, mmDivC(K, row, cv->OW), cv->OH);
  default:
    return mmRemC(K, row, cv->OW);
  }
}

/* Clones the nest's epilogue for the element (row, col) with accumulator
 * value accv; stores too when withStores. Returns the mapping (the
 * caller destroys it), NULL after an error. */
static FzIRMapping *clone_epilogue(Gen *G, FzValue *row, FzValue *col,
                                   FzValue *accv, bool withStores) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  if (!row || !col || !accv) {
    K->failed = true;
    return NULL;
  }
  FzIRMapping *map = fzIRMappingCreate(K->ctx);
  if (!map) {
    K->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < m->numCaptures; ++i)
    if (G->capMap[i])
      fzIRMappingMap(map, m->captures[i], G->capMap[i]);
  FzBlock *body = fzLoopGetBody(m->par);
  for (size_t d = 0; d < m->numDims; ++d) {
    FzValue *v = dim_value(G, d, row, col);
    if (!v) {
      K->failed = true;
      fzIRMappingDestroy(map);
      return NULL;
    }
    fzIRMappingMap(map, fzBlockGetArgument(body, d), v);
  }
  fzIRMappingMap(map, fzOpGetResult(m->kloop, 0), accv);
  FzOp *term = fzBlockGetLastOp(body);
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (op == m->kloop || op == term)
      continue;
    if (!withStores && fzLoopGetOpcode(op) == FZ_LOOP_OP_STORE)
      continue;
    if ((m->conv.on || m->splitK) && feeds_only_reduction(op, m->kloop, 0))
      continue;
    /* Every operand is mapped (a failed map insertion would leave a clone
     * using a value of the host function). */
    bool mapped = true;
    for (size_t i = 0; i < fzOpGetNumOperands(op); ++i)
      mapped = mapped && fzIRMappingLookup(map, fzOpGetOperand(op, i));
    if (!mapped) {
      K->failed = true;
      break;
    }
    FzOp *c = fzOpClone(op, map);
    if (!c) {
      K->failed = true;
      break;
    }
    fzBuilderInsert(&K->b, c);
  }
  return map;
}

/* Stores the pair of elements (row, col), (row, col + 1) of every output
 * with one vector store each. */
static void epilogue_pair(Gen *G, FzValue *row, FzValue *col, FzValue *accv) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  FzValue *e[2];
  for (int h = 0; h < 2; ++h) {
    FzOpState st;
    fzOpStateInit(&st, K->ctx, FZ_STR("kernel.extract"), K->loc);
    fzOpStateAddOperands(&st, 1, &accv);
    fzOpStateAddProp(&st, FZ_STR("position"),
                     fzIntegerAttrGet(K->ctx, fzIntegerTypeGet(K->ctx, 64), h));
    fzOpStateAddResults(&st, 1, &K->f32);
    e[h] = mmCreate(K, &st, 0);
  }
  FzIRMapping *m0 = clone_epilogue(G, row, col, e[0], false);
  FzIRMapping *m1 = clone_epilogue(G, row, mmAddC(K, col, 1), e[1], false);
  for (size_t s = 0; m0 && m1 && s < m->numStores; ++s) {
    FzOp *st = m->stores[s];
    FzValue *v = fzOpGetOperand(st, 0);
    FzValue *v0 = fzIRMappingLookup(m0, v), *v1 = fzIRMappingLookup(m1, v);
    FzType *et = fzValueGetType(v);
    FzType *vt = fzVectorTypeGet(K->ctx, 1, &(int64_t){2}, et, NULL);
    FzValue *pair[2] = {v0, v1};
    FzValue *vec = vt ? mmOp(K, "kernel.from_elements", 2, pair, vt, NULL)
                      : NULL;
    size_t n = fzOpGetNumOperands(st);
    FzValue *ops[2 + FZ_MATMUL_MAX_DIMS];
    ops[0] = vec;
    for (size_t i = 1; i < n; ++i)
      ops[i] = fzIRMappingLookup(m0, fzOpGetOperand(st, i));
    mmOp(K, "kernel.vector_store", n, ops, NULL, NULL);
  }
  fzIRMappingDestroy(m0);
  fzIRMappingDestroy(m1);
  if (!m0 || !m1)
    K->failed = true;
}

void mmEpilogue(Gen *G, FzValue *const *acc) {
  KB *K = &G->K;
  const FzMatmulNest *m = G->m;
  bool raggedM = m->M % G->t->bm != 0, raggedN = m->N % G->t->bn != 0;
  FzValue *rowBase = mmAdd(K, mmAdd(K, G->m0, mmMul(K, G->wm, G->WM)), G->g);
  FzValue *colBase =
      mmAdd(K, mmAdd(K, G->n0, mmMul(K, G->wn, G->WN)), mmMul(K, G->tq, 2));
  for (int mi = 0; mi < G->MT; ++mi)
    for (int hi = 0; hi < 2; ++hi) {
      FzValue *row = mmAddC(K, rowBase,
                            mi * (G->miStride ? G->miStride : 16) + hi * 8);
      FzValue *rowOk = raggedM ? mmLtC(K, row, m->M) : NULL;
      for (int ni = 0; ni < G->NT; ++ni) {
        FzValue *col = mmAddC(K, colBase, ni * 8);
        FzValue *accv = acc[(mi * G->NT + ni) * 2 + hi];
        if (m->pairStores) {
          FzBuilder saved;
          FzOp *guard =
              mmIfOpen(K, mmAnd(K, rowOk, raggedN ? mmLtC(K, col, m->N) : NULL),
                      &saved);
          epilogue_pair(G, row, col, accv);
          mmIfClose(K, guard, &saved);
          continue;
        }
        for (int h = 0; h < 2; ++h) {
          FzValue *c = mmAddC(K, col, h);
          FzBuilder saved;
          FzOp *guard = mmIfOpen(
              K, mmAnd(K, rowOk, raggedN ? mmLtC(K, c, m->N) : NULL), &saved);
          FzOpState st;
          fzOpStateInit(&st, K->ctx, FZ_STR("kernel.extract"), K->loc);
          fzOpStateAddOperands(&st, 1, &accv);
          fzOpStateAddProp(&st, FZ_STR("position"),
                           fzIntegerAttrGet(K->ctx,
                                            fzIntegerTypeGet(K->ctx, 64), h));
          fzOpStateAddResults(&st, 1, &K->f32);
          FzValue *e = mmCreate(K, &st, 0);
          fzIRMappingDestroy(clone_epilogue(G, row, c, e, true));
          mmIfClose(K, guard, &saved);
        }
      }
    }
}

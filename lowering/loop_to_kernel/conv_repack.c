/* lowering/loop_to_kernel/conv_repack.c - fzLkRepackConvWeights: the
 * weights of an NHWC conv2d nest repacked at compile time for the
 * tensor-core implicit GEMM (docs/codegen.md "NHWC convolutions").
 *
 * The NHWC implicit GEMM orders its k as (kh, kw, c), so that the eight
 * k of a chunk of A are eight consecutive channels of one input pixel:
 * one 16-byte cp.async copy (matmul_conv_gen.c). Its B is then
 * w[oc, c, kh, kw] read along (kh, kw, c), which graph.conv2d's weight
 * ([M, C/groups, kH, kW] in both layouts) is not contiguous along. A
 * model's weights are constants: this step replaces the nest's weight
 * load w[m, c, kh, kw] of a top-level loop.constant_buffer by a load
 * w'[m, kh, kw, c] of a new constant buffer [M, KH, KW, C] holding the
 * same elements (the old buffer goes when no nest reads it any more:
 * pass.c erases dead setup ops). The nest's values are unchanged, so
 * whatever mapping takes it afterwards stays correct; the implicit GEMM
 * (matmul_conv.c) recognizes the repacked load and takes k = (kh, kw,
 * c). Weights that are not constants (function arguments, computed
 * buffers) are left alone: the GEMM then keeps k = (c, kh, kw) and
 * gathers A element by element.
 *
 * Only what the GEMM takes is repacked: an NHWC nest with groups == 1,
 * KH KW > 1 (a 1x1 conv's two orders coincide), under the `mma` option.
 * The new data is context memory owned by its dense attribute.
 */
#include <string.h>

#include "dialects/loop/nest_match.h"
#include "ir/util.h"
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"

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

/* The weight load w[m, c, kh, kw] of C (through an extf), or NULL. */
static FzOp *weight_load(const ConvNest *C) {
  FzOp *def = fzValueGetDefiningOp(C->wVal);
  if (C->xExt && def && fzLoopGetOpcode(def) == FZ_LOOP_OP_EXTF)
    def = fzValueGetDefiningOp(fzOpGetOperand(def, 0));
  if (!def || fzLoopGetOpcode(def) != FZ_LOOP_OP_LOAD ||
      fzOpGetNumOperands(def) != 5)
    return NULL;
  static const int vars[4] = {CV_M, CV_C, CV_KH, CV_KW};
  for (int i = 0; i < 4; ++i)
    if (!is_iv(C, fzOpGetOperand(def, 1 + (size_t)i), vars[i]))
      return NULL;
  return def;
}

/* Whether C is one the implicit GEMM takes with k = (kh, kw, c). */
static bool wants_repack(const ConvNest *C) {
  if (C->layout != CONV_NHWC || C->ext[1] * C->ext[2] == 1 ||
      C->ext[0] != C->C)
    return false;
  int64_t M = C->outDims[CV_M], CG = C->ext[0];
  for (int64_t j = 0; j < M; ++j)
    for (int64_t c = 0; c < CG; ++c)
      if (C->chTab[j * CG + c] != c)
        return false;
  return true;
}

/* The repacked constant buffer of `cb` ([M, CG, KH, KW] identity) as a
 * new top-level op before `at`; NULL when it does not apply or after an
 * error (*failed). */
static FzValue *repack(FzOp *cb, FzOp *at, bool *failed) {
  FzContext *ctx = fzOpGetContext(cb);
  FzValue *w = fzOpGetResult(cb, 0);
  FzType *t = fzValueGetType(w);
  FzAttr *v = fzOpGetInherentAttr(cb, FZ_STR("value"));
  if (!v || fzAttrGetKind(v) != FZ_ATTR_DENSE || fzShapedTypeGetRank(t) != 4)
    return NULL;
  FzType *elt = fzShapedTypeGetElementType(t);
  size_t eb = fzTypeGetStorageSize(elt);
  int64_t M = fzShapedTypeGetDim(t, 0), CG = fzShapedTypeGetDim(t, 1);
  int64_t KH = fzShapedTypeGetDim(t, 2), KW = fzShapedTypeGetDim(t, 3);
  int64_t shape[4] = {M, KH, KW, CG};
  FzType *tt = fzTensorTypeGet(ctx, 4, shape, elt, fzOpGetLoc(cb));
  FzType *bt = fzBufferTypeGet(ctx, 4, shape, elt, NULL,
                               fzBufferTypeGetMemorySpace(t), fzOpGetLoc(cb));
  if (!tt || !bt)
    return (*failed = true, NULL);
  FzAttr *nv;
  const unsigned char *src = fzDenseAttrGetData(v);
  if (fzDenseAttrIsSplat(v)) {
    nv = fzDenseAttrGet(ctx, tt, src, eb); /* every order is the same */
  } else {
    size_t n = (size_t)(M * CG * KH * KW);
    if (fzDenseAttrGetNumBytes(v) != n * eb)
      return NULL;
    unsigned char *dst = fzMalloc(ctx, n * eb);
    if (!dst)
      return (*failed = true, NULL);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          for (int64_t c = 0; c < CG; ++c)
            memcpy(dst + (size_t)(((m * KH + kh) * KW + kw) * CG + c) * eb,
                   src + (size_t)(((m * CG + c) * KH + kh) * KW + kw) * eb,
                   eb);
    nv = fzDenseAttrGet(ctx, tt, dst, n * eb);
    fzFree(ctx, dst);
  }
  if (!nv)
    return (*failed = true, NULL);
  FzOpState st;
  fzOpStateInit(&st, ctx, FZ_STR("loop.constant_buffer"), fzOpGetLoc(cb));
  fzOpStateAddProp(&st, FZ_STR("value"), nv);
  fzOpStateAddResults(&st, 1, &bt);
  FzBuilder b;
  fzBuilderInit(&b, ctx);
  fzBuilderSetInsertionPointBefore(&b, at);
  FzOp *op = fzBuilderCreate(&b, &st);
  return op ? fzOpGetResult(op, 0) : (*failed = true, NULL);
}

bool fzLkRepackConvWeights(FzOp *par, const FzLoopToKernelOptions *o) {
  if (o->noMma || fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL)
    return true;
  FzContext *ctx = fzOpGetContext(par);
  ConvNest C;
  memset(&C, 0, sizeof C);
  C.T.ctx = ctx;
  fzPtrMapInit(&C.T.deps, ctx);
  bool failed = false;
  FzOp *wl = NULL, *cb = NULL;
  if (convMatch(&C, par, NULL, NULL, 0) && wants_repack(&C) &&
      (wl = weight_load(&C))) {
    cb = fzValueGetDefiningOp(fzOpGetOperand(wl, 0));
    FzType *wt = fzValueGetType(fzOpGetOperand(wl, 0));
    if (!cb || fzLoopGetOpcode(cb) != FZ_LOOP_OP_CONSTANT_BUFFER ||
        fzOpGetBlock(cb) != fzOpGetBlock(par) || fzBufferTypeGetStrides(wt))
      cb = NULL;
  }
  if (cb) {
    FzValue *nw = repack(cb, par, &failed);
    if (nw) {
      /* w'[m, kh, kw, c] in place of w[m, c, kh, kw]. */
      FzValue *ops[5] = {nw, fzOpGetOperand(wl, 1), fzOpGetOperand(wl, 3),
                         fzOpGetOperand(wl, 4), fzOpGetOperand(wl, 2)};
      FzType *rt = fzValueGetType(fzOpGetResult(wl, 0));
      FzOpState st;
      fzOpStateInit(&st, ctx, FZ_STR("loop.load"), fzOpGetLoc(wl));
      fzOpStateAddOperands(&st, 5, ops);
      fzOpStateAddResults(&st, 1, &rt);
      FzBuilder b;
      fzBuilderInit(&b, ctx);
      fzBuilderSetInsertionPointBefore(&b, wl);
      FzOp *nl = fzBuilderCreate(&b, &st);
      if (nl) {
        fzValueReplaceAllUsesWith(fzOpGetResult(wl, 0), fzOpGetResult(nl, 0));
        fzOpErase(wl);
      } else {
        failed = true;
      }
    }
  }
  fzFree(ctx, C.chTab);
  fzPtrMapFree(&C.T.deps);
  return !failed ||
         fzOpEmitError(par, "lower-loop-to-kernel: could not repack the "
                            "conv2d weights (out of memory)");
}

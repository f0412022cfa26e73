/* lowering/loop_to_kernel/depthwise.c - the depthwise conv2d mapping of
 * lower-loop-to-kernel (docs/codegen.md "Depthwise convolutions"): a
 * conv2d nest (dialects/loop/nest_match.h) whose every output channel
 * reads its own input channel (groups == C == M: MobileNet, EfficientNet,
 * ConvNeXt) is no GEMM (K = KH KW, one channel); it is bandwidth-bound
 * and runs as one thread per output element group:
 *
 *   NHWC: a thread takes V consecutive channels of one output pixel
 *         (n, oh, ow, m0 .. m0+V-1), V = 16 bytes of the input's
 *         elements (8 f16/bf16, 4 f32) when C % V == 0 and the input is
 *         a dense, 16-byte aligned buffer, else 1; per tap (kh, kw) one
 *         kernel.vector_load of the V input channels (ld.global.v4), the
 *         lanes taken apart (kernel.extract) and multiplied by their
 *         weights (the nest's own weight expression, per lane) into V f32
 *         accumulators; consecutive threads take consecutive channel
 *         groups, so a warp reads 512 contiguous bytes per tap.
 *   NCHW: a thread takes one output element (n, m, oh, ow); consecutive
 *         threads run along ow, so a warp's loads of a tap are
 *         contiguous (stride 1) or evenly strided rows of one channel.
 *
 * The window is the nest's: positions clamped into the input and the
 * product zeroed outside it, summed in the nest's order (kh, then kw), so
 * results equal the loop interpreter's. The fused epilogue (bias, a
 * folded batch norm, relu6, a residual) is the nest's body after the
 * reduction, cloned per lane; the lanes' stores become one
 * kernel.vector_store where the output is dense and aligned along m.
 * Threads cover the items with a grid-stride loop (blocks of 256).
 *
 * Only channel multiplier 1 is taken (M == C); other grouped convs go
 * on to the generic mappings (no remark needed: the tensor-core mapping
 * already said why).
 */
#include <stdio.h>
#include <string.h>

#include "dialects/loop/nest_match.h"
#include "ir/util.h"
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"
#include "lowering/loop_to_kernel/matmul_internal.h" /* mmAlignedBase */
#include "lowering/loop_to_kernel/small_m.h"         /* fzSmallMExtract */

#define DW_BLOCK 256

typedef struct DwPlan {
  bool nhwc;
  int V;                /* lanes per thread */
  bool vecStores;       /* the lanes' stores as one vector store */
  int64_t N, M, OH, OW; /* the output */
  int64_t H, W, KH, KW, sh, sw, dh, dw, hOff, wOff;
  int parDim[4];        /* the nest dim of CV_N, CV_M, CV_OH, CV_OW */
  FzValue *x;           /* the input buffer */
  FzOp *xLoad;
  bool xExt;
  FzValue *wVal;        /* the weight term (f32) */
  FzOp *loops[3];       /* the reductions, outermost first */
  int redVar[3];
  int64_t items;        /* thread items */
} DwPlan;

/* Whether a nest looks like a depthwise conv before the full match: a
 * 4-d parallel whose reductions' channel loop (outermost in NCHW,
 * innermost in NHWC) has one trip. Cheap: the full match evaluates every
 * index expression over its domain. */
static bool looks_depthwise(FzOp *par) {
  if (fzLoopGetOpcode(par) != FZ_LOOP_OP_PARALLEL ||
      fzLoopParallelGetNumDims(par) != 4)
    return false;
  FzOp *loops[3] = {NULL, NULL, NULL};
  FzBlock *b = fzLoopGetBody(par);
  for (int l = 0; l < 3; ++l) {
    FzOp *found = NULL;
    for (FzOp *op = b ? fzBlockGetFirstOp(b) : NULL; op;
         op = fzOpGetNextInBlock(op))
      if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR)
        found = found ? NULL : op;
    if (!found)
      return false;
    loops[l] = found;
    b = fzLoopGetBody(found);
  }
  int64_t t0, t2;
  return (fzLoopValueGetConstantInt(fzOpGetOperand(loops[0], 1), &t0) &&
          t0 == 1) ||
         (fzLoopValueGetConstantInt(fzOpGetOperand(loops[2], 1), &t2) &&
          t2 == 1);
}

/* Whether every store of the nest writes [n, oh, ow, m] (the parallel
 * ivs in order) of a dense buffer along m, 16-byte aligned per V lanes:
 * the lanes' stores then make one vector store. */
static bool vector_stores(FzOp *par, int V, int64_t M) {
  FzBlock *body = fzLoopGetBody(par);
  bool any = false;
  for (FzOp *op = fzBlockGetFirstOp(body); op; op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE)
      continue;
    any = true;
    FzValue *buf = fzOpGetOperand(op, 1);
    FzType *t = fzValueGetType(buf);
    if (fzShapedTypeGetRank(t) != 4 || fzOpGetNumOperands(op) != 6 ||
        fzBufferTypeGetStrides(t) || fzShapedTypeGetDim(t, 3) != M)
      return false;
    int64_t eb = (int64_t)fzTypeGetStorageSize(fzShapedTypeGetElementType(t));
    int64_t bytes = eb * V;
    if ((bytes != 4 && bytes != 8 && bytes != 16) || !mmAlignedBase(buf, bytes))
      return false;
    for (size_t d = 0; d < 4; ++d)
      if (fzOpGetOperand(op, 2 + d) != fzBlockGetArgument(body, d))
        return false;
  }
  return any;
}

static bool match(FzOp *par, DwPlan *d, char *why, size_t whyLen) {
  FzContext *ctx = fzOpGetContext(par);
  ConvNest C;
  memset(&C, 0, sizeof C);
  C.T.ctx = ctx;
  fzPtrMapInit(&C.T.deps, ctx);
  bool ok = convMatch(&C, par, NULL, why, whyLen);
  if (ok && (C.ext[0] != 1 || C.outDims[CV_M] != C.C))
    ok = fzReasonf(why, whyLen, "not depthwise (channel multiplier 1)");
  for (int64_t m = 0; ok && m < C.outDims[CV_M]; ++m)
    if (C.chTab[m] != m)
      ok = fzReasonf(why, whyLen, "not depthwise (channel multiplier 1)");
  if (ok) {
    FzValue *x = C.xLoad ? fzOpGetOperand(C.xLoad, 0) : NULL;
    if (!x || !mmPlainBuffer(x, par))
      ok = fzReasonf(why, whyLen, "the input is not a static global buffer");
    else
      d->x = x;
  }
  if (ok) {
    d->nhwc = C.layout == CONV_NHWC;
    d->N = C.outDims[CV_N], d->M = C.outDims[CV_M];
    d->OH = C.outDims[CV_OH], d->OW = C.outDims[CV_OW];
    d->H = C.H, d->W = C.Wi, d->KH = C.ext[1], d->KW = C.ext[2];
    d->sh = C.sh, d->sw = C.sw, d->dh = C.dh, d->dw = C.dw;
    d->hOff = C.hOff, d->wOff = C.wOff;
    memcpy(d->parDim, C.parDim, sizeof d->parDim);
    memcpy(d->loops, C.loops, sizeof d->loops);
    memcpy(d->redVar, C.redVar, sizeof d->redVar);
    d->xLoad = C.xLoad, d->xExt = C.xExt, d->wVal = C.wVal;
    FzType *xt = fzValueGetType(d->x);
    int64_t eb = (int64_t)fzTypeGetStorageSize(fzShapedTypeGetElementType(xt));
    int V = eb == 2 || eb == 4 ? (int)(16 / eb) : 1;
    if (!d->nhwc || d->M % V != 0 || fzBufferTypeGetStrides(xt) ||
        !mmAlignedBase(d->x, 16))
      V = 1;
    d->V = V;
    d->vecStores = V > 1 && vector_stores(par, V, d->M);
    d->items = d->N * d->M / V * d->OH * d->OW;
  }
  fzFree(ctx, C.chTab);
  fzPtrMapFree(&C.T.deps);
  return ok;
}

static bool plan(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                 FzLkPlan *p) {
  (void)o;
  if (!looks_depthwise(nest->par))
    return false;
  DwPlan *d = fzCalloc(p->ctx, 1, sizeof *d);
  if (!d)
    return p->failed = true, false;
  char why[160];
  if (!match(nest->par, d, why, sizeof why) || d->items >= ((int64_t)1 << 40)) {
    fzFree(p->ctx, d);
    return false;
  }
  int64_t blocks = (d->items + DW_BLOCK - 1) / DW_BLOCK;
  p->grid[0] = blocks < ((int64_t)1 << 31) - 1 ? blocks : ((int64_t)1 << 31) - 1;
  p->grid[1] = p->grid[2] = 1;
  p->block[0] = DW_BLOCK;
  p->block[1] = p->block[2] = 1;
  char per[96];
  if (d->nhwc && d->V > 1)
    snprintf(per, sizeof per, "one thread per %d channels of an output "
             "pixel, 16-byte input loads along C%s", d->V,
             d->vecStores ? " and stores" : "");
  else if (d->nhwc)
    snprintf(per, sizeof per, "one thread per output element, along C");
  else
    snprintf(per, sizeof per, "one thread per output element, along ow");
  snprintf(p->desc, sizeof p->desc, "conv2d depthwise %s %lldx%lldx%lldx%lld"
           ", %lldx%lld kernel, stride %lldx%lld, pad %lldx%lld, dilation "
           "%lldx%lld: %s (bandwidth-bound), %lld items",
           d->nhwc ? "NHWC" : "NCHW", (long long)d->N, (long long)d->M,
           (long long)d->H, (long long)d->W, (long long)d->KH,
           (long long)d->KW, (long long)d->sh, (long long)d->sw,
           (long long)-d->hOff, (long long)-d->wOff, (long long)d->dh,
           (long long)d->dw, per, (long long)d->items);
  p->flops = 0;
  p->state = d;
  return true;
}

static void release(FzLkPlan *p) {
  fzFree(p->ctx, p->state);
  p->state = NULL;
}

/* Clones the ops of the nest that v depends on (inside the nest) into
 * the kernel under map, v's own last; v's kernel value. */
static FzValue *clone_tree(FzLkBuild *kb, FzLkMap *map, FzOp *par,
                           FzValue *v, int depth) {
  FzValue *got = fzLkMapGet(map, v);
  if (got)
    return got;
  FzOp *def = fzValueGetDefiningOp(v);
  if (!def || depth > 64 || !fzOpIsAncestor(par, def))
    return kb->failed = true, NULL;
  for (size_t i = 0; i < fzOpGetNumOperands(def); ++i)
    if (!clone_tree(kb, map, par, fzOpGetOperand(def, i), depth + 1))
      return NULL;
  if (!fzLkClone(kb, map, def))
    return kb->failed = true, NULL;
  return fzLkMapGet(map, v);
}

static FzValue *clampi(FzLkBuild *kb, FzValue *v, int64_t hi) {
  return fzLkBin(kb, "loop.minsi", fzLkBin(kb, "loop.maxsi", v, fzLkIndex(kb, 0)),
                 fzLkIndex(kb, hi));
}

#define DW_MAX_V 8

static bool build(FzLkBuild *kb, const FzLkPlan *p) {
  const DwPlan *d = p->state;
  FzContext *ctx = kb->ctx;
  FzOp *par = kb->nest->par;
  FzBlock *body = fzLoopGetBody(par);
  int V = d->V;
  FzType *f32 = fzF32TypeGet(ctx);
  FzType *xt = fzValueGetType(d->x);
  FzType *elt = fzShapedTypeGetElementType(xt);
  FzValue *xbuf = fzLkMapGet(&kb->base, d->x);
  if (!xbuf)
    return fzOpEmitError(par, "lower-loop-to-kernel: the depthwise input is "
                              "not in its kernel");
  FzValue *tid = fzLkId(kb, "kernel.thread_id");
  FzValue *bid = fzLkId(kb, "kernel.block_id");
  FzValue *bdim = fzLkId(kb, "kernel.block_dim");
  FzValue *gdim = fzLkId(kb, "kernel.grid_dim");
  FzValue *start = fzLkAdd(kb, fzLkMul(kb, bid, bdim), tid);
  FzValue *t;
  FzOp *loop = fzLkForBegin(kb, start, fzLkIndex(kb, d->items),
                            fzLkMul(kb, gdim, bdim), 0, NULL, &t, NULL);
  if (!loop)
    return false;
  /* The roles from t: NHWC (n, oh, ow, m / V), NCHW (n, m, oh, ow),
   * row-major. */
  FzValue *role[4];
  static const int orderNhwc[4] = {CV_N, CV_OH, CV_OW, CV_M};
  static const int orderNchw[4] = {CV_N, CV_M, CV_OH, CV_OW};
  const int *order = d->nhwc ? orderNhwc : orderNchw;
  int64_t ext[CV_NUM] = {0};
  ext[CV_N] = d->N, ext[CV_M] = d->M / V, ext[CV_OH] = d->OH,
  ext[CV_OW] = d->OW;
  FzValue *q = t;
  for (int i = 3; i >= 0; --i) {
    int r = order[i];
    if (i > 0) {
      role[r] = fzLkRem(kb, q, fzLkIndex(kb, ext[r]));
      q = fzLkDiv(kb, q, fzLkIndex(kb, ext[r]));
    } else {
      role[r] = q;
    }
  }
  FzValue *m0 = fzLkMul(kb, role[CV_M], fzLkIndex(kb, V));
  FzValue *ih0 = fzLkAdd(kb, fzLkMul(kb, role[CV_OH], fzLkIndex(kb, d->sh)),
                         fzLkIndex(kb, d->hOff));
  FzValue *iw0 = fzLkAdd(kb, fzLkMul(kb, role[CV_OW], fzLkIndex(kb, d->sw)),
                         fzLkIndex(kb, d->wOff));
  /* Per lane: the nest's ivs (m = m0 + e), the channel loop's iv 0. */
  FzLkMap maps[DW_MAX_V];
  bool ok = true;
  for (int e = 0; e < V; ++e)
    fzLkMapInit(&maps[e], ctx, &kb->base);
  FzValue *cLoopIv = NULL;
  for (int l = 0; l < 3; ++l)
    if (d->redVar[l] == CV_C)
      cLoopIv = fzBlockGetArgument(fzLoopGetBody(d->loops[l]), 0);
  for (int e = 0; e < V && ok; ++e) {
    for (int r = 0; r < 4 && ok; ++r) {
      FzValue *v = r == CV_M ? fzLkAdd(kb, m0, fzLkIndex(kb, e)) : role[r];
      ok = fzLkMapPut(&maps[e], fzBlockGetArgument(body, (size_t)d->parDim[r]),
                      v);
    }
    ok = ok && cLoopIv && fzLkMapPut(&maps[e], cLoopIv, fzLkIndex(kb, 0));
  }
  /* The window loops: kh then kw, V f32 accumulators. */
  FzValue *zeros[DW_MAX_V], *accH[DW_MAX_V], *accW[DW_MAX_V];
  FzValue *zero = fzLkConst(kb, f32, 0.0);
  for (int e = 0; e < V; ++e)
    zeros[e] = zero;
  FzValue *kh, *kw;
  FzOp *lh = ok ? fzLkForBegin(kb, fzLkIndex(kb, 0), fzLkIndex(kb, d->KH),
                               fzLkIndex(kb, 1), (size_t)V, zeros, &kh, accH)
                : NULL;
  FzValue *ih = lh ? fzLkAdd(kb, ih0, fzLkMul(kb, kh, fzLkIndex(kb, d->dh)))
                   : NULL;
  FzValue *okH = fzLkCmp(kb, "ult", ih, fzLkIndex(kb, d->H));
  FzValue *ihc = clampi(kb, ih, d->H - 1);
  FzOp *lw = lh ? fzLkForBegin(kb, fzLkIndex(kb, 0), fzLkIndex(kb, d->KW),
                               fzLkIndex(kb, 1), (size_t)V, accH, &kw, accW)
                : NULL;
  if (!lh || !lw) {
    for (int e = 0; e < V; ++e)
      fzLkMapFree(&maps[e]);
    return false;
  }
  FzValue *iw = fzLkAdd(kb, iw0, fzLkMul(kb, kw, fzLkIndex(kb, d->dw)));
  FzValue *inb = fzLkBin(kb, "loop.andi", okH,
                         fzLkCmp(kb, "ult", iw, fzLkIndex(kb, d->W)));
  FzValue *iwc = clampi(kb, iw, d->W - 1);
  FzValue *xs[DW_MAX_V];
  if (d->nhwc) {
    FzValue *ops[5] = {xbuf, role[CV_N], ihc, iwc, m0};
    if (V > 1) {
      int64_t shape[1] = {V};
      FzType *vt = fzVectorTypeGet(ctx, 1, shape, elt, NULL);
      FzValue *xv = fzLkOp(kb, "kernel.vector_load", vt, 5, ops);
      for (int e = 0; e < V; ++e)
        xs[e] = fzSmallMExtract(kb, xv, (unsigned)e);
    } else {
      xs[0] = fzLkLoad(kb, xbuf, 4, ops + 1);
    }
  } else {
    FzValue *idx[4] = {role[CV_N], role[CV_M], ihc, iwc};
    xs[0] = fzLkLoad(kb, xbuf, 4, idx);
  }
  FzValue *yields[DW_MAX_V];
  for (int e = 0; e < V && ok; ++e) {
    for (int l = 0; l < 3 && ok; ++l) {
      FzValue *iv = fzBlockGetArgument(fzLoopGetBody(d->loops[l]), 0);
      if (d->redVar[l] == CV_KH)
        ok = fzLkMapPut(&maps[e], iv, kh);
      else if (d->redVar[l] == CV_KW)
        ok = fzLkMapPut(&maps[e], iv, kw);
    }
    FzValue *w = ok ? clone_tree(kb, &maps[e], par, d->wVal, 0) : NULL;
    FzValue *xv = d->xExt ? fzLkCast(kb, "loop.extf", xs[e], f32) : xs[e];
    FzValue *prod = fzLkSelect(kb, inb, fzLkBin(kb, "loop.mulf", xv, w), zero);
    yields[e] = fzLkBin(kb, "loop.addf", accW[e], prod);
    ok = ok && yields[e];
  }
  ok = ok && fzLkForEnd(kb, lw, (size_t)V, yields);
  FzValue *wres[DW_MAX_V], *hres[DW_MAX_V];
  for (int e = 0; e < V && ok; ++e)
    wres[e] = fzOpGetResult(lw, (size_t)e);
  ok = ok && fzLkForEnd(kb, lh, (size_t)V, wres);
  for (int e = 0; e < V && ok; ++e) {
    hres[e] = fzOpGetResult(lh, (size_t)e);
    ok = fzLkMapPut(&maps[e], fzOpGetResult(d->loops[0], 0), hres[e]);
  }
  /* The epilogue per lane (every op of the body but the reduction and
   * the terminator; stores last, as one vector store where they allow). */
  FzOp *term = fzBlockGetLastOp(body);
  for (int e = 0; e < V && ok; ++e)
    for (FzOp *op = fzBlockGetFirstOp(body); op && ok && op != term;
         op = fzOpGetNextInBlock(op)) {
      if (op == d->loops[0] || fzLoopGetOpcode(op) == FZ_LOOP_OP_STORE)
        continue;
      if (!fzLkMapGet(&maps[e], fzOpGetResult(op, 0)))
        ok = fzLkClone(kb, &maps[e], op) != NULL;
    }
  for (FzOp *op = fzBlockGetFirstOp(body); op && ok && op != term;
       op = fzOpGetNextInBlock(op)) {
    if (fzLoopGetOpcode(op) != FZ_LOOP_OP_STORE)
      continue;
    if (!d->vecStores) {
      for (int e = 0; e < V && ok; ++e)
        ok = fzLkClone(kb, &maps[e], op) != NULL;
      continue;
    }
    FzValue *lanes[DW_MAX_V];
    for (int e = 0; e < V; ++e)
      lanes[e] = fzLkMapGet(&maps[e], fzOpGetOperand(op, 0));
    FzType *st = fzValueGetType(fzOpGetOperand(op, 0));
    int64_t shape[1] = {V};
    FzValue *vec = fzLkOp(kb, "kernel.from_elements",
                          fzVectorTypeGet(ctx, 1, shape, st, NULL), (size_t)V,
                          lanes);
    FzValue *ops[6] = {vec, fzLkMapGet(&kb->base, fzOpGetOperand(op, 1)),
                       role[CV_N], role[CV_OH], role[CV_OW], m0};
    FzOpState s;
    fzOpStateInit(&s, ctx, FZ_STR("kernel.vector_store"), kb->loc);
    bool all = true;
    for (int i = 0; i < 6; ++i)
      all = all && ops[i];
    if (!all) {
      ok = false;
      break;
    }
    fzOpStateAddOperands(&s, 6, ops);
    ok = fzBuilderCreate(&kb->b, &s) != NULL;
  }
  for (int e = 0; e < V; ++e)
    fzLkMapFree(&maps[e]);
  if (!ok)
    return kb->failed = true, false;
  if (!fzLkForEnd(kb, loop, 0, NULL) || kb->failed)
    return false;
  if (kb->opts->remarks) {
    FzStringRef name = fzSymbolGetName(kb->kernel);
    fzEmitRemark(ctx, kb->loc, "%s -> @%.*s", p->desc, (int)name.length,
                 name.data);
  }
  return true;
}

const FzLkMapping fzLkDepthwiseMapping = {
    .name = "depthwise",
    .plan = plan,
    .build = build,
    .release = release,
};

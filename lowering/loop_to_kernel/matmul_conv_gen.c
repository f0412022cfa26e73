/* lowering/loop_to_kernel/matmul_conv_gen.c - what the tensor-core
 * generator does differently for a conv2d's implicit GEMM (matmul.h,
 * FzMatmulConv; docs/codegen.md "Tensor-core conv2d"): the weights as an
 * [OC, K] matrix view, the input as a flat view, and the gather of A's
 * tile from the input window.
 *
 * The gather's arithmetic is i32 (the matcher keeps the input below 2^31
 * elements): per chunk (a row m = (n, oh, ow), fixed across the k loop)
 * the flat offset of the window's corner n*C*H*W + ih0*W + iw0 with ih0
 * = oh*sh - padH, iw0 = ow*sw - padW; per k (shared by the thread's
 * chunks, whose k offsets coincide) c = k / (KH KW), kh, kw and the
 * offset c*H*W + kh*dh*W + kw*dw. An element is valid when its row and
 * k are inside the GEMM and ih0 + kh*dh, iw0 + kw*dw inside the input
 * (unsigned compares, only along an axis where the window can leave
 * it); an invalid one reads offset 0 and becomes 0.
 *
 * NHWC (FzMatmulConv.nhwc): the corner is n*H*W*C + ih0*W*C + iw0*C and
 * the k term kh*dh*W*C + kw*dw*C + c, with k = (kh KW + kw) C + c
 * (kHwc) or (c KH + kh) KW + kw. With kHwc and C a whole number of
 * copies, A's chunks go by cp.async like a plain GEMM's (mmConvChunk:
 * one tap per copy, the copy zero-filled outside the input or past K,
 * its source then offset 0), else by the scalar gather.
 */
#include "lowering/loop_to_kernel/matmul_internal.h"

/* A view of buffer v (NULL after a failure) of `rank` dims. */
static FzValue *view_of(Gen *G, FzValue *v, size_t rank, const int64_t *shape,
                        const int64_t *strides) {
  KB *K = &G->K;
  if (!v)
    return NULL;
  FzType *t = fzValueGetType(v);
  FzType *vt = fzBufferTypeGet(K->ctx, rank, shape, K->elt, strides,
                               fzBufferTypeGetMemorySpace(t), K->loc);
  FzValue *ops[2] = {v, mmConst(K, 0)};
  return vt ? mmOp(K, "loop.view", 2, ops, vt, NULL)
            : (K->failed = true, NULL);
}

FzValue *mmConvWeightMatrix(Gen *G, FzValue *w) {
  if (!w)
    return NULL;
  FzType *t = fzValueGetType(w);
  int64_t st[4];
  mmStridesOf(t, st);
  int64_t shape[2] = {fzShapedTypeGetDim(t, 0), G->m->K};
  int64_t strides[2] = {st[0], 1};
  return view_of(G, w, 2, shape, strides);
}

FzValue *mmConvInputFlat(Gen *G, FzValue *x) {
  const FzMatmulConv *cv = &G->m->conv;
  int64_t n = cv->batch * cv->C * cv->H * cv->W;
  return view_of(G, x, 1, &n, NULL);
}

FzValue *mmConvImages(Gen *G, FzValue *x) {
  const FzMatmulConv *cv = &G->m->conv;
  int64_t shape[3] = {cv->batch, cv->C, cv->H * cv->W};
  return view_of(G, x, 3, shape, NULL);
}

void mmConvSetupRow(Gen *G, Tile *T, int p) {
  KB *K = &G->K;
  const FzMatmulConv *cv = &G->m->conv;
  FzValue *m = mmCast(K, T->mnIdx[p], K->i32);
  FzValue *rest = mmRemC(K, m, cv->OH * cv->OW);
  FzValue *n = mmDivC(K, m, cv->OH * cv->OW);
  T->cvH[p] = mmAddC(K, mmMul(K, mmDivC(K, rest, cv->OW), cv->sh), -cv->padH);
  T->cvW[p] = mmAddC(K, mmMul(K, mmRemC(K, rest, cv->OW), cv->sw), -cv->padW);
  int64_t cs = cv->nhwc ? cv->C : 1; /* the spatial stride factor */
  T->cvN[p] = mmAdd(K, mmAdd(K, mmMul(K, n, cv->C * cv->H * cv->W),
                             mmMul(K, T->cvH[p], cv->W * cs)),
                    mmMul(K, T->cvW[p], cs));
}

/* The k-dependent half of element e of the chunks at k offset kOff. */
typedef struct KTerms {
  FzValue *off, *kh, *kw, *ok;
} KTerms;

static KTerms k_terms(Gen *G, FzValue *kt, FzValue *kOff, int e) {
  KB *K = &G->K;
  const FzMatmulConv *cv = &G->m->conv;
  int64_t Kx = G->m->K;
  FzValue *k = mmAddC(
      K, mmAdd(K, mmMul(K, mmCast(K, kt, K->i32), G->t->bk),
               mmCast(K, kOff, K->i32)),
      e);
  if (G->kLo32)
    k = mmAdd(K, k, G->kLo32);
  KTerms r;
  r.ok = !G->kMask ? NULL
         : G->kEnd32 ? mmLt(K, k, G->kEnd32)
                     : mmLtC(K, k, Kx);
  FzValue *kc = G->kMask ? mmMinC(K, k, Kx - 1) : k;
  int64_t taps = cv->KH * cv->KW;
  FzValue *tap = cv->kHwc ? mmDivC(K, kc, cv->C) : mmRemC(K, kc, taps);
  FzValue *c = cv->kHwc ? mmRemC(K, kc, cv->C) : mmDivC(K, kc, taps);
  FzValue *kh = mmDivC(K, tap, cv->KW), *kw = mmRemC(K, tap, cv->KW);
  r.kh = mmMul(K, kh, cv->dh);
  r.kw = mmMul(K, kw, cv->dw);
  if (cv->nhwc)
    r.off = mmAdd(K, mmAdd(K, c, mmMul(K, kh, cv->dh * cv->W * cv->C)),
                  mmMul(K, kw, cv->dw * cv->C));
  else
    r.off = mmAdd(K, mmAdd(K, mmMul(K, c, cv->H * cv->W),
                           mmMul(K, kh, cv->dh * cv->W)),
                  r.kw);
  return r;
}

/* Whether (row p's window, k terms kt8) is inside the input, and'ed to
 * ok (NULL: valid). */
static FzValue *window_ok(Gen *G, Tile *T, int p, const KTerms *kt8,
                          FzValue *ok) {
  KB *K = &G->K;
  const FzMatmulConv *cv = &G->m->conv;
  ok = mmAnd(K, mmAnd(K, ok, T->mnOk[p]), kt8->ok);
  if (cv->edgeH)
    ok = mmAnd(K, ok, mmUltC(K, mmAdd(K, T->cvH[p], kt8->kh), cv->H));
  if (cv->edgeW)
    ok = mmAnd(K, ok, mmUltC(K, mmAdd(K, T->cvW[p], kt8->kw), cv->W));
  return ok;
}

void mmConvChunk(Gen *G, Tile *T, int p, FzValue *kt, int e, FzValue **off,
                 FzValue **ok) {
  KB *K = &G->K;
  KTerms kt8 = k_terms(G, kt, T->kOff[p], e);
  *ok = window_ok(G, T, p, &kt8, NULL);
  FzValue *o = mmAdd(K, T->cvN[p], kt8.off);
  if (*ok)
    o = mmSelect(K, *ok, o, mmConstOf(K, K->i32, 0));
  *off = mmCast(K, o, K->idx);
}

void mmConvGather(Gen *G, Tile *T, FzValue *kt, FzValue **vals) {
  KB *K = &G->K;
  for (int e = 0; e < 8; ++e) {
    FzValue *lastOff = NULL;
    KTerms kt8 = {0};
    for (int p = 0; p < T->perThread; ++p) {
      if (T->kOff[p] != lastOff) {
        kt8 = k_terms(G, kt, T->kOff[p], e);
        lastOff = T->kOff[p];
      }
      FzValue *ok = window_ok(G, T, p, &kt8, NULL);
      FzValue *off = mmAdd(K, T->cvN[p], kt8.off);
      if (ok)
        off = mmSelect(K, ok, off, mmConstOf(K, K->i32, 0));
      FzValue *ops[2] = {T->buf, mmCast(K, off, K->idx)};
      FzValue *v = mmOp(K, "loop.load", 2, ops, K->elt, NULL);
      vals[p * 8 + e] = ok ? mmSelect(K, ok, v, G->zeroElt) : v;
    }
  }
}

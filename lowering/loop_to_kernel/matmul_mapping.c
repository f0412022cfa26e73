/* lowering/loop_to_kernel/matmul_mapping.c - the tensor-core matmul
 * mapping of lower-loop-to-kernel, first in its list (pass.c).
 *
 * plan: fzKernelMatchMatmulNest recognizes the nest (matmul.h), else
 * fzKernelMatchConvNest (a conv2d as an implicit GEMM); under the
 * `wgmma` option (sm_90a) a bf16/f16 matmul that allows it takes the
 * warp-group kernel (matmul_wgmma.h; the others mma.sync, with a remark
 * why); a nest both
 * refuse goes to the next mapping, with the reason as a remark under
 * the `remarks` option when the nest holds a loop (an elementwise nest
 * is not a matmul candidate at all). An accepted nest gets its tile
 * (the `mma-tile` option, else $FZ_GPU_MMA_TILE, else by size:
 * fzMatmulTileChoose); a bad tile text is an error, not a fallback, so a
 * benchmark sweep never measures something else by mistake. The launch
 * and the one-line plan are the generator's.
 * build: outline.c has made the kernel.func (the root buffers the nest
 * uses as its parameters, the setup ops recomputed); the captures of the
 * matched nest are looked up in its value map and the generator builds
 * the body (fzKernelBuildMatmulBody).
 *
 * Ownership: the plan's state (match + tile) is malloc'ed here and freed
 * by release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialects/loop/nest_rewrite.h"
#include "ir/util.h"
#include "lowering/loop_to_kernel/loop_to_kernel_internal.h"
#include "lowering/loop_to_kernel/matmul.h"
#include "lowering/loop_to_kernel/matmul_wgmma.h"

typedef struct MatmulPlan {
  FzMatmulNest m;
  FzMatmulTile t;
  bool wgmma; /* the sm_90a kernel (matmul_wgmma.c) */
} MatmulPlan;

/* Whether the nest's body holds a loop.for (a reduction: a candidate
 * worth a remark when refused). */
static bool has_loop(FzOp *par) {
  FzBlock *b = fzLoopGetBody(par);
  for (FzOp *op = b ? fzBlockGetFirstOp(b) : NULL; op;
       op = fzOpGetNextInBlock(op))
    if (fzLoopGetOpcode(op) == FZ_LOOP_OP_FOR)
      return true;
  return false;
}

FzOp *fzLkFoldMatmulBatch(FzOp *par) {
  FzContext *ctx = fzOpGetContext(par);
  FzMatmulNest *m = fzCalloc(ctx, 1, sizeof *m);
  if (!m) {
    fzOpEmitError(par, "lower-loop-to-kernel: out of memory");
    return NULL;
  }
  bool failed = false;
  while (fzKernelMatchMatmulNest(par, m, NULL, 0) && m->dimI > 0 &&
         m->dimI - 1 != m->dimJ) {
    FzOp *np = fzLoopCollapseParallelDims(par, (size_t)m->dimI - 1, &failed,
                                          NULL, 0);
    if (!np)
      break;
    par = np;
  }
  fzFree(ctx, m);
  return failed ? NULL : par;
}

/* The wgmma kernel for s's nest when it applies (true: planned, or
 * p->failed after an error about its tile); false with a remark (under
 * `remarks`) when it does not: mma.sync then. */
static bool plan_wgmma(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                       MatmulPlan *s, FzStringRef text, FzLkPlan *p) {
  char why[256];
  if (!fzWgmmaWanted(&s->m, o->wgmmaMinTiles, why, sizeof why)) {
    if (o->remarks)
      fzEmitRemark(nest->ctx, fzOpGetLoc(nest->par),
                   "%s nest not lowered to wgmma (mma.sync instead): %s",
                   s->m.conv.on ? "conv2d" : "matmul", why);
    return false;
  }
  if (!fzWgmmaTileChoose(&s->m, text, &s->t, why, sizeof why)) {
    fzEmitError(nest->ctx, fzOpGetLoc(nest->par),
                "lower-loop-to-kernel: wgmma tile: %s", why);
    fzFree(p->ctx, s);
    p->failed = true;
    return true;
  }
  s->wgmma = true;
  fzMatmulGetLaunch(&s->m, &s->t, p->grid, p->block, &p->sharedBytes);
  fzWgmmaDescribe(&s->m, &s->t, p->desc, sizeof p->desc);
  p->flops = fzMatmulGetFlops(&s->m);
  p->state = s;
  return true;
}

static bool plan(const FzLkNest *nest, const FzLoopToKernelOptions *o,
                 FzLkPlan *p) {
  if (o->noMma)
    return false;
  MatmulPlan *s = fzCalloc(p->ctx, 1, sizeof *s);
  if (!s) {
    p->failed = true;
    return false; /* out of memory: recorded */
  }
  char why[256], convWhy[256];
  bool isConv = false;
  if (!fzKernelMatchMatmulNest(nest->par, &s->m, why, sizeof why) &&
      !fzKernelMatchConvNest(nest->par, &s->m, &isConv, convWhy,
                             sizeof convWhy)) {
    if (o->remarks && has_loop(nest->par))
      fzEmitRemark(nest->ctx, fzOpGetLoc(nest->par),
                   "%s nest not lowered to tensor cores: %s",
                   isConv ? "conv2d" : "matmul", isConv ? convWhy : why);
    fzFree(p->ctx, s);
    return false;
  }
  const char *what = s->m.conv.on ? "conv2d" : "matmul";
  if (fzTypeGetKind(s->m.elt) == FZ_TYPE_F32 &&
      fzPrecisionResolve(o->precision, 0) == FZ_PRECISION_IEEE) {
    if (o->remarks)
      fzEmitRemark(nest->ctx, fzOpGetLoc(nest->par),
                   "%s nest not lowered to tensor cores: f32 operands "
                   "under precision=ieee (exact f32 needs CUDA cores; "
                   "tf32 rounds them to a 10-bit mantissa)", what);
    fzFree(p->ctx, s);
    return false;
  }
  FzStringRef text = fzStringRefFromCString(o->mmaTile ? o->mmaTile : "");
  if (o->wgmma && plan_wgmma(nest, o, s, text, p))
    return !p->failed;
  if (p->failed) {
    fzFree(p->ctx, s);
    return false;
  }
  if (!fzMatmulTileChoose(&s->m, text, &s->t, why, sizeof why) ||
      !fzMatmulTileFits(&s->m, &s->t, why, sizeof why)) {
    fzEmitError(nest->ctx, fzOpGetLoc(nest->par),
                "lower-loop-to-kernel: matmul tile: %s", why);
    fzFree(p->ctx, s);
    p->failed = true;
    return false;
  }
  fzMatmulGetLaunch(&s->m, &s->t, p->grid, p->block, &p->sharedBytes);
  fzMatmulDescribe(&s->m, &s->t, p->desc, sizeof p->desc);
  p->flops = fzMatmulGetFlops(&s->m);
  p->state = s;
  return true;
}

static void release(FzLkPlan *p) {
  fzFree(p->ctx, p->state);
  p->state = NULL;
}

static bool build(FzLkBuild *kb, const FzLkPlan *p) {
  const MatmulPlan *s = p->state;
  const FzMatmulNest *m = &s->m;
  FzValue *caps[FZ_MATMUL_MAX_CAPTURES];
  for (size_t i = 0; i < m->numCaptures; ++i)
    if (!(caps[i] = fzLkMapGet(&kb->base, m->captures[i])))
      return fzOpEmitError(m->par, "lower-loop-to-kernel: a value the "
                                   "matmul nest uses is not in its kernel");
  if (!(s->wgmma ? fzKernelBuildWgmmaBody(m, &s->t, &kb->b, caps)
                 : fzKernelBuildMatmulBody(m, &s->t, &kb->b, caps)))
    return false;
  if (kb->opts->remarks) {
    FzStringRef name = fzSymbolGetName(kb->kernel);
    fzEmitRemark(kb->ctx, kb->loc, "%s -> @%.*s", p->desc, (int)name.length,
                 name.data);
  }
  return true;
}

const FzLkMapping fzLkMatmulMapping = {
    .name = "matmul",
    .plan = plan,
    .build = build,
    .release = release,
};

/* transforms/fusion/cost_model.c - the built-in targets and the default
 * cost model of the fusion pass, and its replacement per context.
 *
 * The default model is a roofline with a launch cost (docs/fusion.md,
 * "Cost model"):
 *
 *   time = launch + max(bytes / (bandwidth * eff), flops / (peak * eff))
 *   eff  = min(1, work items / target parallelism)
 *
 * Work items are the kernel's iteration points, except for a reduction
 * group with several phases, whose rows cannot be split across blocks
 * (a row's reduction must finish before its consumers read it): it has
 * rows * min(row length, 1024) items. Such a group re-reads its row
 * inputs in each later phase unless a row fits on chip (then it costs
 * shared memory instead). Registers and shared memory are rough, stated
 * estimates checked against the target's limits before code generation.
 *
 * The model only sees an FzFusionKernelDesc, never IR, so an embedder can
 * replace it with a measured or learned one (fzContextSetFusionCostModel).
 */
#include <math.h>

#include "transforms/fusion/fusion_internal.h"

/* An A100-class GPU (sm_80): 108 SMs x 2048 resident threads. */
const FzFusionTarget fzFusionTargetCUDA = {
    .name = "cuda",
    .bandwidth = 1.9e12,
    .peakFlops = 19.5e12,
    .launchSeconds = 4e-6,
    .parallelism = 108.0 * 2048.0,
    .maxRegisters = 255,
    .maxSharedBytes = 163 * 1024,
};

/* A 16-core host with 8-wide vectors; outer loops on a thread pool. */
const FzFusionTarget fzFusionTargetCPU = {
    .name = "cpu",
    .bandwidth = 50e9,
    .peakFlops = 0.5e12,
    .launchSeconds = 2e-6,
    .parallelism = 16.0 * 8.0,
    .maxRegisters = 0,
    .maxSharedBytes = 0,
};

const char *fzFusionGroupKindName(FzFusionGroupKind kind) {
  switch (kind) {
  case FZ_FUSION_GROUP_LOOP:
    return "loop";
  case FZ_FUSION_GROUP_REDUCTION:
    return "reduction";
  case FZ_FUSION_GROUP_CONTRACTION:
    return "contraction";
  case FZ_FUSION_GROUP_OPAQUE:
    return "opaque";
  }
  return "?";
}

/* Bytes a row may take on chip: half the shared memory, or a 256 KiB
 * share of cache on a target without shared memory. */
static double on_chip_row_budget(const FzFusionTarget *t) {
  return t->maxSharedBytes > 0 ? (double)t->maxSharedBytes / 2 : 262144.0;
}

bool fzFusionEstimateDefault(const FzFusionTarget *t,
                             const FzFusionKernelDesc *k,
                             FzFusionEstimate *out) {
  if (!t || !k || !out || !(t->bandwidth > 0) || !(t->peakFlops > 0) ||
      !(t->parallelism > 0))
    return false;
  double eb = k->elementBytes ? (double)k->elementBytes : 4.0;
  double words = ceil(eb / 4.0);
  double bytes = k->bytesRead + k->bytesWritten;
  double items = k->points > 1 ? k->points : 1;
  double shared = 0;
  double regs = 16 + 2 * (double)k->maxLive * words;
  switch (k->kind) {
  case FZ_FUSION_GROUP_REDUCTION:
    regs += 4.0 * k->numReductions;
    shared += (double)k->numReductions * 32.0 * (eb > 4 ? eb : 4);
    if (k->phases > 1) {
      double rowLen = k->rowLength > 1 ? k->rowLength : 1;
      items = (k->rows > 1 ? k->rows : 1) * fmin(rowLen, 1024.0);
      double rowBytes = rowLen * eb;
      double rowsRead = k->rowLength > 0 && k->rows > 0
                            ? k->rowInputBytes / (k->rows * rowBytes)
                            : 0;
      double cached = rowBytes * (rowsRead > 1 ? rowsRead : 1);
      if (cached <= on_chip_row_budget(t)) {
        if (t->maxSharedBytes > 0)
          shared += cached;
      } else {
        bytes += (double)(k->phases - 1) * k->rowInputBytes;
      }
    }
    break;
  case FZ_FUSION_GROUP_CONTRACTION:
    /* A 128x128 output tile over K in steps of 32, double-buffered. */
    regs += 96;
    shared += 2.0 * (128 * 32 + 32 * 128) * eb;
    break;
  default:
    break;
  }
  double eff = fmin(1.0, items / t->parallelism);
  double memT = bytes / (t->bandwidth * eff);
  double mathT = k->flops / (t->peakFlops * eff);
  out->seconds = t->launchSeconds + fmax(memT, mathT);
  out->bytes = bytes;
  out->registers = (int64_t)regs;
  out->sharedBytes = (int64_t)shared;
  return true;
}

static bool default_estimate(const FzFusionCostModel *m,
                             const FzFusionTarget *t,
                             const FzFusionKernelDesc *k,
                             FzFusionEstimate *out) {
  (void)m;
  return fzFusionEstimateDefault(t, k, out);
}

static const FzFusionCostModel kDefaultModel = {"roofline", default_estimate,
                                                NULL};

const FzFusionCostModel *fzFusionDefaultCostModel(void) {
  return &kDefaultModel;
}

/* The extension key of the per-context model (a heap copy). */
static const char kModelKey = 0;

static void destroy_model(FzContext *ctx, void *value) { fzFree(ctx, value); }

bool fzContextSetFusionCostModel(FzContext *ctx,
                                 const FzFusionCostModel *model) {
  if (!model || !model->estimate)
    return fzContextSetExtension(ctx, &kModelKey, NULL, NULL);
  FzFusionCostModel *copy = fzMalloc(ctx, sizeof *copy);
  if (!copy)
    return false;
  *copy = *model;
  if (!fzContextSetExtension(ctx, &kModelKey, copy, destroy_model)) {
    fzFree(ctx, copy);
    return false;
  }
  return true;
}

const FzFusionCostModel *fzContextGetFusionCostModel(const FzContext *ctx) {
  const FzFusionCostModel *m =
      ctx ? fzContextGetExtension(ctx, &kModelKey) : NULL;
  return m ? m : &kDefaultModel;
}

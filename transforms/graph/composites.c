/* transforms/graph/composites.c - the recognize-composites pass: turns
 * the primitive-op forms that exporters write (PyTorch's opset-13 export,
 * ONNX's `_expanded` function bodies) back into the composite ops that
 * the fuser and the code generators handle best: layer_norm, rms_norm,
 * softmax, log_softmax, gelu (erf and tanh forms), silu, prelu and
 * leaky_relu, global_avg_pool, weighted_sum. The patterns live in
 * composites_norm.c, composites_act.c and composites_sum.c; this file
 * holds their shared bookkeeping and the pass definition.
 *
 * Matching is structural, constants are compared within the element
 * type's precision (fzGraphOptNear), and a near miss (another constant,
 * another axis, an intermediate used elsewhere) leaves the IR alone. A
 * composite computes in one op what the primitive form rounded at every
 * step, so results can change in the last bits (the interpreter, which
 * computes in f64 and rounds once per op, is the reference: the lit tests
 * compare before and after with fuse-run).
 */
#include "transforms/graph/composites.h"

static void add_op(CompositeMatch *m, FzOp *op) {
  for (size_t i = 0; i < m->numOps; ++i)
    if (m->ops[i] == op)
      return;
  if (m->numOps == COMPOSITE_MAX_OPS) {
    m->overflow = true;
    return;
  }
  m->ops[m->numOps++] = op;
}

void fzCompositeAddRoot(CompositeMatch *m, FzOp *op) {
  add_op(m, op);
}

void fzCompositeAddInterior(CompositeMatch *m, FzOp *op) {
  add_op(m, op);
  if (m->numInterior == COMPOSITE_MAX_OPS)
    m->overflow = true;
  else
    m->interior[m->numInterior++] = fzOpGetResult(op, 0);
}

void fzCompositeAddStat(CompositeMatch *m, FzOp *op) {
  add_op(m, op);
  if (m->numStats == COMPOSITE_MAX_OPS)
    m->overflow = true;
  else
    m->stats[m->numStats++] = fzOpGetResult(op, 0);
}

bool fzCompositeUsesOk(const CompositeMatch *m, const void *ud) {
  if (m->overflow)
    return false;
  for (size_t i = 0; i < m->numInterior; ++i)
    if (!fzGraphOptUsesWithin(m->interior[i], m->ops, m->numOps))
      return false;
  if (fzGraphOptGetOptions(ud)->sharedStatistics)
    return true;
  for (size_t i = 0; i < m->numStats; ++i)
    if (!fzGraphOptUsesWithin(m->stats[i], m->ops, m->numOps))
      return false;
  return true;
}

FzLoc *fzCompositeLoc(const CompositeMatch *m) {
  return fzGraphOptFusedLoc((FzOp *const *)m->ops, m->numOps);
}

FzValue *fzCompositeSquareOf(FzValue *v, FzOp **op) {
  FzOp *p = fzValueGetDefiningOp(v);
  *op = p;
  if (fzGraphOptIsOp(p, "graph.mul") &&
      fzOpGetOperand(p, 0) == fzOpGetOperand(p, 1))
    return fzOpGetOperand(p, 0);
  if (fzGraphOptIsOp(p, "graph.pow") &&
      fzGraphOptIsSplatNear(fzOpGetOperand(p, 1), 2.0) &&
      fzValueGetType(fzOpGetOperand(p, 0)) == fzValueGetType(v))
    return fzOpGetOperand(p, 0);
  return NULL;
}

/*===--- The pass -------------------------------------------------------===*/

enum { G_NORM, G_SOFTMAX, G_GELU, G_SILU, G_PRELU, G_POOL, G_SUM };

static const FzGraphOptRow kRows[] = {
    {"graph.div", fzCompositeLayerNorm, "layer-norm", 4, G_NORM,
     COMPOSITE_LAYER_NORM},
    {"graph.mul", fzCompositeLayerNorm, "layer-norm", 4, G_NORM,
     COMPOSITE_LAYER_NORM},
    {"graph.div", fzCompositeRmsNorm, "rms-norm", 3, G_NORM,
     COMPOSITE_RMS_NORM},
    {"graph.mul", fzCompositeRmsNorm, "rms-norm", 3, G_NORM,
     COMPOSITE_RMS_NORM},
    {"graph.mul", fzCompositeNormScale, "norm-scale", 2, G_NORM,
     COMPOSITE_NORM_OPERANDS},
    {"graph.add", fzCompositeNormBias, "norm-bias", 2, G_NORM,
     COMPOSITE_NORM_OPERANDS},
    {"graph.reshape", fzCompositeNormReshape, "norm-reshape", 2, G_NORM,
     COMPOSITE_NORM_OPERANDS},
    {"graph.div", fzCompositeSoftmax, "softmax", 2, G_SOFTMAX,
     COMPOSITE_SOFTMAX},
    {"graph.mul", fzCompositeSoftmax, "softmax", 2, G_SOFTMAX,
     COMPOSITE_SOFTMAX},
    {"graph.sub", fzCompositeLogSoftmax, "log-softmax", 2, G_SOFTMAX,
     COMPOSITE_LOG_SOFTMAX},
    {"graph.log", fzCompositeLogOfSoftmax, "log-of-softmax", 2, G_SOFTMAX,
     COMPOSITE_LOG_SOFTMAX},
    {"graph.mul", fzCompositeGelu, "gelu", 3, G_GELU, COMPOSITE_GELU},
    {"graph.mul", fzCompositeSilu, "silu", 2, G_SILU, COMPOSITE_SILU},
    {"graph.div", fzCompositeSiluDiv, "silu", 2, G_SILU, COMPOSITE_SILU},
    {"graph.select", fzCompositeReluSelect, "prelu-select", 2, G_PRELU,
     COMPOSITE_PRELU},
    {"graph.add", fzCompositeReluMaxMin, "prelu-max-min", 2, G_PRELU,
     COMPOSITE_PRELU},
    {"graph.max", fzCompositeLeakyMax, "leaky-relu-max", 2, G_PRELU,
     COMPOSITE_PRELU},
    {"graph.reduce_mean", fzCompositeGlobalAvgPool, "global-avg-pool", 1,
     G_POOL, COMPOSITE_POOL},
};

static const char *const kGroups[] = {"norms", "softmax", "gelu",   "silu",
                                      "prelu", "pooling", "weighted-sum"};

/* Weighted sums and layer_norm statistics come last (see
 * composites_sum.c and composites_stats.c). */
static const FzGraphOptRow kLateRows[] = {
    {"graph.layer_norm", fzCompositeLayerNormStats, "layer-norm-stats", 1,
     G_NORM, COMPOSITE_LAYER_NORM_STATS},
    {"graph.add", fzCompositeWeightedSum, "weighted-sum", 1, G_SUM,
     COMPOSITE_WEIGHTED_SUM},
    {"graph.sub", fzCompositeWeightedSum, "weighted-sum", 1, G_SUM,
     COMPOSITE_WEIGHTED_SUM},
    {"graph.weighted_sum", fzCompositeWeightedSum, "weighted-sum", 1, G_SUM,
     COMPOSITE_WEIGHTED_SUM},
};

static const FzGraphOptTable kTable = {
    kRows,    sizeof kRows / sizeof kRows[0],
    kGroups,  7,
    kLateRows, sizeof kLateRows / sizeof kLateRows[0]};

static const FzPassOptionDef kOptions[] = {
    {"norms", FZ_PASS_OPTION_BOOL, "true",
     "Recognize layer_norm and rms_norm (with scale and bias)", NULL, 0, 0},
    {"softmax", FZ_PASS_OPTION_BOOL, "true",
     "Recognize softmax and log_softmax", NULL, 0, 0},
    {"gelu", FZ_PASS_OPTION_BOOL, "true", "Recognize gelu (erf and tanh forms)",
     NULL, 0, 0},
    {"silu", FZ_PASS_OPTION_BOOL, "true", "Recognize silu", NULL, 0, 0},
    {"prelu", FZ_PASS_OPTION_BOOL, "true",
     "Recognize prelu and leaky_relu (select, max/min and max forms)", NULL, 0,
     0},
    {"pooling", FZ_PASS_OPTION_BOOL, "true",
     "Recognize a mean over every spatial dim as global_avg_pool", NULL, 0, 0},
    {"weighted-sum", FZ_PASS_OPTION_BOOL, "true",
     "Recognize sums of products by scalar constants as weighted_sum (after "
     "every other composite)",
     NULL, 0, 0},
    {"shared-statistics", FZ_PASS_OPTION_BOOL, "true",
     "Match even when a reduced statistic (mean, variance, sum) has other "
     "uses, which keep their ops",
     NULL, 0, 0},
};

static const FzPassStatisticDef kStats[COMPOSITE_NUM_STATS] = {
    {"num-layer-norm", "layer_norm recognized"},
    {"num-rms-norm", "rms_norm recognized"},
    {"num-softmax", "softmax recognized"},
    {"num-log-softmax", "log_softmax recognized"},
    {"num-gelu", "gelu recognized"},
    {"num-silu", "silu recognized"},
    {"num-prelu", "prelu and leaky_relu recognized"},
    {"num-global-avg-pool", "global_avg_pool recognized"},
    {"num-norm-operands", "Scales, biases and reshapes absorbed by norms"},
    {"num-weighted-sum", "Adds and subs grown into weighted_sum"},
    {"num-layer-norm-stats",
     "Means and inverse std devs taken from a layer_norm's results"},
};

const FzPassDef fzRecognizeCompositesPass = {
    .argument = "recognize-composites",
    .displayName = "RecognizeComposites",
    .summary = "Turn decomposed layer_norm, rms_norm, softmax, log_softmax, "
               "gelu, silu, prelu/leaky_relu, global pooling and weighted "
               "sums back into their composite ops",
    .anchor = NULL,
    .options = kOptions,
    .numOptions = sizeof kOptions / sizeof kOptions[0],
    .statistics = kStats,
    .numStatistics = COMPOSITE_NUM_STATS,
    .initialize = fzGraphOptPassInitialize,
    .run = fzGraphOptPassRun,
    .destroy = fzGraphOptPassDestroy,
    .userData = (void *)&kTable,
};

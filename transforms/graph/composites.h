/* transforms/graph/composites.h - the patterns of recognize-composites
 * (composites_norm.c: normalizations, softmax, pooling;
 * composites_act.c: activations) and the bookkeeping they share
 * (composites.c); composites_sum.c: weighted sums; composites_stats.c:
 * layer_norm's statistics.
 *
 * A match collects the ops it would replace. Values inside the match
 * come in two kinds: full-size intermediates (x - mean, exp(x - max),
 * x * x...), which must have no use outside the match (else the rewrite
 * would compute them twice), and reduced statistics (mean, variance,
 * sum...), which may have other uses when the pass's shared-statistics
 * option is on (the default): those uses keep their ops, as the ONNX
 * importer does for LayerNormalization's Mean and InvStdDev outputs.
 */
#ifndef FZ_TRANSFORMS_GRAPH_COMPOSITES_H
#define FZ_TRANSFORMS_GRAPH_COMPOSITES_H

#include "transforms/graph/graph_opt.h"

enum {
  COMPOSITE_LAYER_NORM,
  COMPOSITE_RMS_NORM,
  COMPOSITE_SOFTMAX,
  COMPOSITE_LOG_SOFTMAX,
  COMPOSITE_GELU,
  COMPOSITE_SILU,
  COMPOSITE_PRELU,
  COMPOSITE_POOL,
  COMPOSITE_NORM_OPERANDS,
  COMPOSITE_WEIGHTED_SUM,
  COMPOSITE_LAYER_NORM_STATS,
  COMPOSITE_NUM_STATS
};

#define COMPOSITE_MAX_OPS 32

typedef struct CompositeMatch {
  FzOp *ops[COMPOSITE_MAX_OPS];
  size_t numOps;
  FzValue *interior[COMPOSITE_MAX_OPS]; /* full-size: no outside use */
  size_t numInterior;
  FzValue *stats[COMPOSITE_MAX_OPS]; /* statistics: see above */
  size_t numStats;
  bool overflow;
} CompositeMatch;

/* Records op (its result becomes interior or a statistic). */
void fzCompositeAddInterior(CompositeMatch *m, FzOp *op);
void fzCompositeAddStat(CompositeMatch *m, FzOp *op);
/* Records op without constraining its result's uses (the root). */
void fzCompositeAddRoot(CompositeMatch *m, FzOp *op);
/* Checks the use rules; ud is the pattern's userData (for options). */
bool fzCompositeUsesOk(const CompositeMatch *m, const void *ud);
/* The fused location of the matched ops. */
FzLoc *fzCompositeLoc(const CompositeMatch *m);

/* v = a * a or pow(a, 2): a (and the op into *op), else NULL. */
FzValue *fzCompositeSquareOf(FzValue *v, FzOp **op);

/* Normalizations, softmax, pooling (composites_norm.c). */
bool fzCompositeLayerNorm(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeRmsNorm(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeNormScale(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeNormBias(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeNormReshape(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeSoftmax(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeLogSoftmax(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeLogOfSoftmax(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeGlobalAvgPool(FzOp *op, FzRewriter *rw, void *ud);

/* A layer_norm takes over the mean and 1/sqrt(var + eps) computed beside
 * it (composites_stats.c). */
bool fzCompositeLayerNormStats(FzOp *op, FzRewriter *rw, void *ud);

/* x1 * b1 + x2 * b2 -> weighted_sum (composites_sum.c). */
bool fzCompositeWeightedSum(FzOp *op, FzRewriter *rw, void *ud);

/* Activations (composites_act.c). */
bool fzCompositeGelu(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeSilu(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeSiluDiv(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeReluSelect(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeReluMaxMin(FzOp *op, FzRewriter *rw, void *ud);
bool fzCompositeLeakyMax(FzOp *op, FzRewriter *rw, void *ud);

#endif /* FZ_TRANSFORMS_GRAPH_COMPOSITES_H */

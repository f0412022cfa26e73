/* dialects/graph/fusion_op.h - graph.fusion and graph.yield, and the
 * graph dialect's describer for the fusion pass.
 *
 * graph.fusion holds one fused group: a single-block region whose
 * arguments are bound to the op's operands (the group's inputs) and whose
 * graph.yield gives the op's results (the values used outside). It is
 * isolated from above. Custom form (docs/dialects/graph.md, docs/fusion.md):
 *
 *   %r:2 = graph.fusion(%a, %b) {kind = "loop"} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
 *   ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
 *     ...
 *     graph.yield %u, %v : tensor<4xf32>, tensor<4xf32>
 *   }
 *
 * The op definitions are listed in the graph dialect's table
 * (dialects/graph/dialect.c).
 */
#ifndef FZ_GRAPH_FUSION_OP_H
#define FZ_GRAPH_FUSION_OP_H

#include "fz/fusion.h"

extern const FzOpDef fzGraphFusionOpDef, fzGraphYieldOpDef;

/* Creates a graph.fusion at the builder's insertion point with `inputs`
 * as operands, results of resultTypes, and an empty entry block whose
 * arguments have the inputs' types (located at argLocs, which may be
 * NULL). The body has no terminator yet: append the group's ops, then
 * fzGraphYieldCreate. NULL after an error. */
FzOp *fzGraphFusionCreate(FzBuilder *b, FzLoc *loc, size_t numInputs,
                          FzValue *const *inputs, FzLoc *const *argLocs,
                          size_t numResults, FzType *const *resultTypes);
/* The entry block of a graph.fusion (NULL when it has none). */
FzBlock *fzGraphFusionGetBody(const FzOp *fusion);
/* Appends `graph.yield values` to block. NULL after an error. */
FzOp *fzGraphYieldCreate(FzContext *ctx, FzBlock *block, FzLoc *loc,
                         size_t n, FzValue *const *values);

/* The graph dialect's FzFusionDescribeFn: kinds refined by shapes,
 * reduced axes of reduce_*, softmax, log_softmax, layer_norm, rms_norm
 * and the global pools, and arithmetic estimates. */
bool fzGraphDescribeFusion(FzOp *op, FzFusionOpInfo *info);

#endif /* FZ_GRAPH_FUSION_OP_H */

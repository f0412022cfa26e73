/* transforms/register.c - registration of the built-in passes and named
 * pipelines into a context's pass registry.
 *
 * Passes that other parts of fuse define (graph transforms, lowerings)
 * are added to kPasses here; named pipelines to kPipelines. Registering
 * twice is harmless (the registry ignores an identical re-registration).
 */
#include "fz/fusion.h"
#include "fz/graph.h"
#include "fz/kernel.h"
#include "fz/loop.h"
#include "fz/pass.h"
#include "transforms/graph/graph_opt.h" /* graph optimizations */
#include "transforms/passes.h"

static const FzPassDef *const kPasses[] = {
    &fzCanonicalizePass,
    &fzCSEPass,
    &fzDCEPass,
    &fzSymbolDCEPass,
    &fzFoldBatchNormPass,       /* transforms/graph */
    &fzFoldTransposePass,       /* transforms/graph */
    &fzSimplifyReshapesPass,    /* transforms/graph */
    &fzSimplifyAlgebraPass,     /* transforms/graph */
    &fzRecognizeCompositesPass, /* transforms/graph */
    &fzConvertContractionsPass, /* transforms/graph */
};

static const struct {
  const char *name, *summary, *pipeline;
} kPipelines[] = {
    {"cleanup", "Canonicalize, then eliminate common subexpressions and "
                "dead code (runs on any op)",
     "canonicalize,cse,dce"},
    {"module-cleanup", "cleanup on every function, then erase unused "
                       "private functions (runs on builtin.module)",
     "func.func(cleanup),symbol-dce"},
    {"graph-optimize", "Graph simplifications, composite recognition and "
                       "fusion (runs on builtin.module; docs/passes.md)",
     "canonicalize,cse,recognize-composites,simplify-algebra,"
     "simplify-reshapes,fold-transpose,fold-batchnorm,canonicalize,"
     "func.func(fuse)"},
};

bool fzRegisterAllPasses(FzContext *ctx) {
  for (size_t i = 0; i < sizeof kPasses / sizeof kPasses[0]; ++i)
    if (!fzContextRegisterPass(ctx, kPasses[i]))
      return false;
  if (!fzRegisterFusionPass(ctx)) /* fuse (transforms/fusion) */
    return false;
  if (!fzRegisterFoldConstantsPass(ctx)) /* fold-constants (graph) */
    return false;
  /* Exact graph rewrites of transforms/graph that canonicalize runs too. */
  if (!fzContextAddCanonicalizationProvider(ctx, fzGraphAddProfitablePatterns))
    return false;
  if (!fzRegisterLoopPasses(ctx)) /* lower-graph-to-loop, plan-memory */
    return false;
  if (!fzRegisterKernelPasses(ctx)) /* lower-loop-to-kernel */
    return false;
  for (size_t i = 0; i < sizeof kPipelines / sizeof kPipelines[0]; ++i)
    if (!fzContextRegisterPassPipeline(ctx, kPipelines[i].name,
                                       kPipelines[i].summary,
                                       kPipelines[i].pipeline))
      return false;
  return true;
}

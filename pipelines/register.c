/* pipelines/register.c - registration of every built-in pass and named
 * pipeline into a context's pass registry (fzRegisterAllPasses), the way
 * MLIR's InitAllPasses sits above its libraries.
 *
 * The layers below only define their passes (an FzPassDef each, declared
 * in transforms/passes.h, transforms/graph/graph_opt.h and
 * lowering/passes.h) or a register function for one pass; which passes
 * and pipelines exist is decided here. A new pass is added to kPasses, a
 * new named pipeline to kPipelines. Registering twice is harmless (the
 * registry ignores an identical re-registration).
 */
#include "fz/fusion.h"
#include "fz/graph.h"
#include "fz/kernel.h"
#include "fz/loop.h"
#include "fz/pass.h"
#include "lowering/passes.h"
#include "pipelines/pipelines.h"
#include "transforms/graph/graph_opt.h" /* graph optimizations */
#include "transforms/passes.h"

typedef struct Pipeline {
  const char *name, *summary, *pipeline;
} Pipeline;

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
    &fzRecognizeAttentionPass,  /* transforms/graph */
    &fzMergeProjectionsPass,    /* transforms/graph */
    &fzTransposeWeightsPass,    /* transforms/graph */
    &fzConvertContractionsPass, /* transforms/graph */
    &fzConvertLayoutPass,       /* transforms/graph */
    &fzFoldQdqPass,             /* transforms/graph */
};

static const Pipeline kPipelines[] = {
    {"cleanup", "Canonicalize, then eliminate common subexpressions and "
                "dead code (runs on any op)",
     "canonicalize,cse,dce"},
    {"module-cleanup", "cleanup on every function, then erase unused "
                       "private functions (runs on builtin.module)",
     "func.func(cleanup),symbol-dce"},
    {"graph-optimize", "Graph simplifications, composite recognition and "
                       "fusion (runs on builtin.module; docs/passes.md)",
     "canonicalize,cse," FZ_PIPELINE_GRAPH_SIMPLIFY
     ",func.func(convert-layout{conv=nchw},fuse)"},
};

/* The loop level: lower-graph-to-loop and the loop transforms. */
static const FzPassDef *const kLoopPasses[] = {
    &fzLowerGraphToLoopPassDef,  /* lowering/graph_to_loop.c */
    &fzPlanMemoryPassDef,        /* transforms/plan_memory.c */
    &fzTileContractionsPassDef,  /* transforms/loop */
    &fzTileConvolutionsPassDef,  /* transforms/loop */
    &fzStageRowsPassDef,         /* transforms/loop */
};

static const Pipeline kLoopPipelines[] = {
    {"graph-to-loop", "Fuse, lower to loop nests and plan memory (runs on "
                      "builtin.module)",
     "func.func(fuse)," FZ_PIPELINE_GRAPH_TO_LOOP},
};

static const Pipeline kKernelPipelines[] = {
    {"graph-to-kernel", "graph-to-loop, then lower-loop-to-kernel (runs on "
                        "builtin.module)",
     "graph-to-loop,lower-loop-to-kernel"},
};

static bool add_passes(FzContext *ctx, const FzPassDef *const *defs,
                       size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!fzContextRegisterPass(ctx, defs[i]))
      return false;
  return true;
}

static bool add_pipelines(FzContext *ctx, const Pipeline *p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!fzContextRegisterPassPipeline(ctx, p[i].name, p[i].summary,
                                       p[i].pipeline))
      return false;
  return true;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

bool fzRegisterLoopPasses(FzContext *ctx) {
  /* graph-to-loop names fuse. */
  return fzRegisterFusionPass(ctx) &&
         add_passes(ctx, kLoopPasses, COUNT(kLoopPasses)) &&
         add_pipelines(ctx, kLoopPipelines, COUNT(kLoopPipelines));
}

bool fzRegisterKernelPasses(FzContext *ctx) {
  return fzRegisterLoopPasses(ctx) && /* graph-to-kernel names them */
         fzContextRegisterPass(ctx, &fzLowerLoopToKernelPassDef) &&
         add_pipelines(ctx, kKernelPipelines, COUNT(kKernelPipelines));
}

bool fzRegisterAllPasses(FzContext *ctx) {
  return add_passes(ctx, kPasses, COUNT(kPasses)) &&
         fzRegisterFusionPass(ctx) &&        /* fuse (transforms/fusion) */
         fzRegisterFoldConstantsPass(ctx) && /* fold-constants (graph) */
         /* Exact graph rewrites of transforms/graph that canonicalize
          * runs too. */
         fzContextAddCanonicalizationProvider(ctx,
                                              fzGraphAddProfitablePatterns) &&
         fzRegisterKernelPasses(ctx) && /* the loop and kernel levels */
         add_pipelines(ctx, kPipelines, COUNT(kPipelines));
}

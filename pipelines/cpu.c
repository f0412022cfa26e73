/* pipelines/cpu.c - the graph -> loop pipeline that precedes code
 * generation (fzLowerModuleForCpu; the GPU path runs it too, then
 * lower-loop-to-kernel), and compiling a module for the host
 * (fzCpuExecutableCreate: that pipeline, the CPU's loop transforms, then
 * the runtime's native code).
 *
 * With fusion: canonicalize, cse and graph-optimize's simplifications
 * (recognize-composites, simplify-algebra, simplify-reshapes,
 * fold-transpose, fold-batchnorm, canonicalize); without: canonicalize
 * and cse only, so that every op of the input stays its own kernel.
 * Then, for layout NHWC, convert-layout (fzModuleApplyLayout).
 * The steps are ordinary passes run by a pass manager, except fusion,
 * which is called directly (fzFuseFunction) so that its report can go
 * to the caller's callback. The simplifications are graph-optimize's
 * (FZ_PIPELINE_GRAPH_SIMPLIFY), defined once for both.
 */
#include <string.h>

#include "fz/dialects.h"
#include "fz/lowering.h"
#include "fz/loop.h"
#include "fz/pass.h"
#include "fz/precision.h"
#include "fz/runtime.h"
#include "pipelines/pipelines.h"
#include "runtime/cpu_internal.h"

void fzCpuPipelineOptionsInit(FzCpuPipelineOptions *o) {
  memset(o, 0, sizeof *o);
  o->fuse = true;
  o->simplify = true;
  o->planMemory = true;
}

static bool is_func(FzOp *op) {
  FzStringRef n = fzIdentGetString(fzOpGetName(op));
  return n.length == 9 && memcmp(n.data, "func.func", 9) == 0;
}

static bool has_tensor(FzType *ft) {
  for (size_t i = 0; i < fzFunctionTypeGetNumInputs(ft); ++i)
    if (fzTypeGetKind(fzFunctionTypeGetInput(ft, i)) == FZ_TYPE_TENSOR)
      return true;
  for (size_t i = 0; i < fzFunctionTypeGetNumResults(ft); ++i)
    if (fzTypeGetKind(fzFunctionTypeGetResult(ft, i)) == FZ_TYPE_TENSOR)
      return true;
  return false;
}

bool fzModuleIsGraphLevel(FzOp *module) {
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op;
       op = fzOpGetNextInBlock(op)) {
    if (!is_func(op))
      continue;
    FzAttr *a = fzOpGetInherentAttr(op, FZ_STR("function_type"));
    if (a && fzAttrGetKind(a) == FZ_ATTR_TYPE &&
        has_tensor(fzTypeAttrGetValue(a)))
      return true;
  }
  return false;
}

static bool run_pipeline(FzOp *module, const char *text) {
  FzContext *ctx = fzOpGetContext(module);
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  if (!pm)
    return false;
  bool ok = fzPassManagerParsePipeline(pm, fzStringRefFromCString(text)) &&
            fzPassManagerRun(pm, module);
  fzPassManagerDestroy(pm);
  return ok;
}

/* Hands phase `name`, started at t0, to the options' timing sink. */
static void report(const FzCpuPipelineOptions *o, const char *name, double t0) {
  if (!o->timing || !o->timing->record)
    return;
  double t = fzCpuNowSeconds() - t0;
  FzTimingRecord r = {name, NULL, t, t, 1, 0, 0, 0, 0};
  o->timing->record(&r, o->timing->userData);
}

bool fzLowerModuleForCpu(FzOp *module, const FzCpuPipelineOptions *options) {
  FzContext *ctx = fzOpGetContext(module);
  FzCpuPipelineOptions defaults;
  if (!options) {
    fzCpuPipelineOptionsInit(&defaults);
    options = &defaults;
  }
  if (!fzModuleIsGraphLevel(module))
    return true;
  if (!fzRegisterAllDialects(ctx) || !fzRegisterAllPasses(ctx))
    return false;
  /* canonicalize,cse; with fusion, also graph-optimize's simplifications
   * (composites such as softmax spelled as primitive ops become one op),
   * and on the CPU transpose-weights (the small-M stream form). */
  double t0 = fzCpuNowSeconds();
  if (options->simplify) {
    bool ok = run_pipeline(
        module, !options->fuse     ? "canonicalize,cse"
                : options->forGpu ? "canonicalize,cse," FZ_PIPELINE_GRAPH_SIMPLIFY_GPU
                                  : "canonicalize,cse," FZ_PIPELINE_GRAPH_SIMPLIFY
                                    ",transpose-weights");
    report(options, "graph passes", t0);
    if (!ok)
      return false;
  }
  if (options->layout != FZ_GRAPH_LAYOUT_NCHW) {
    t0 = fzCpuNowSeconds();
    bool ok = fzModuleApplyLayout(module, options->layout);
    report(options, "convert-layout", t0);
    if (!ok)
      return false;
  }
  t0 = fzCpuNowSeconds();
  if (options->fuse) {
    FzFusionOptions fo;
    if (options->fusion) {
      fo = *options->fusion;
    } else {
      fzFusionOptionsInit(&fo);
    }
    if (!fo.target)
      fo.target = fzFusionTargetLookup(ctx, FZ_STR("cpu"));
    FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
    for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op;
         op = fzOpGetNextInBlock(op))
      if (is_func(op) && fzRegionGetFirstBlock(fzOpGetRegion(op, 0)) &&
          !fzFuseFunction(op, &fo, NULL))
        return false;
    report(options, "fusion", t0);
  }
  t0 = fzCpuNowSeconds();
  bool ok = run_pipeline(module, options->planMemory ? FZ_PIPELINE_GRAPH_TO_LOOP
                                                     : "lower-graph-to-loop");
  report(options, "graph->loop", t0);
  return ok;
}

/*===--- Mixed precision (fz/precision.h) --------------------------------===*/

bool fzModuleApplyPrecision(FzOp *module, FzPrecision p, bool simplify) {
  if ((p != FZ_PRECISION_BF16 && p != FZ_PRECISION_FP16) ||
      !fzModuleIsGraphLevel(module))
    return true;
  FzContext *ctx = fzOpGetContext(module);
  if (!fzRegisterAllDialects(ctx) || !fzRegisterAllPasses(ctx))
    return false;
  /* fzLowerModuleForCpu's simplifications, which it runs again after
   * this (harmless: they are rewrites to a fixed point); batch-norm folds
   * into the f32 weights before they are rounded. */
  if (simplify &&
      !run_pipeline(module, "canonicalize,cse," FZ_PIPELINE_GRAPH_SIMPLIFY))
    return false;
  return run_pipeline(module, p == FZ_PRECISION_BF16
                                  ? "convert-contractions{to=bf16}"
                                  : "convert-contractions{to=fp16}");
}

/*===--- Layout (fz/layout.h) -------------------------------------------===*/

bool fzModuleApplyLayout(FzOp *module, FzGraphLayout layout) {
  if ((layout != FZ_GRAPH_LAYOUT_NHWC && layout != FZ_GRAPH_LAYOUT_AUTO) ||
      !fzModuleIsGraphLevel(module))
    return true;
  FzContext *ctx = fzOpGetContext(module);
  if (!fzRegisterAllDialects(ctx) || !fzRegisterAllPasses(ctx))
    return false;
  return run_pipeline(module, layout == FZ_GRAPH_LAYOUT_AUTO
                                  ? FZ_PIPELINE_LAYOUT_AUTO
                                  : FZ_PIPELINE_LAYOUT_NHWC);
}

/*===--- Compiling for the host -----------------------------------------===*/

void fzCpuCompileOptionsInit(FzCpuCompileOptions *o) {
  fzCpuPipelineOptionsInit(&o->pipeline);
  fzCodegenOptionsInit(&o->codegen);
}

FzCpuExecutable *fzCpuExecutableCreate(FzCpuRuntime *rt, FzOp *module,
                                       const FzCpuCompileOptions *options) {
  FzCpuCompileOptions defaults;
  if (!options) {
    fzCpuCompileOptionsInit(&defaults);
    options = &defaults;
  }
  double t0 = fzCpuNowSeconds();
  FzOp *loop = fzOpClone(module, NULL);
  /* The CPU-only loop transforms run here rather than inside code
   * generation, so that the loop module kept (fuse-run --print-loop-ir)
   * is the one compiled. */
  FzCodegenOptions codegen = options->codegen;
  if (!codegen.threads && rt)
    codegen.threads = fzCpuRuntimeGetNumThreads(rt);
  bool ok = loop && fzLowerModuleForCpu(loop, &options->pipeline) &&
            fzPrepareLoopModuleForCpu(loop, &codegen) && fzOpVerify(loop);
  if (!ok) {
    if (loop)
      fzOpDestroy(loop);
    return NULL;
  }
  codegen.tileContractions = false;
  codegen.tileConvolutions = false;
  codegen.stageRows = false;
  return fzCpuExecutableCreateFromLoop(rt, loop, &codegen,
                                       fzCpuNowSeconds() - t0);
}

/* lowering/llvm/pipeline.c - the graph -> loop pipeline that precedes
 * code generation for the CPU (fzLowerModuleForCpu).
 *
 * With fusion: canonicalize, cse and graph-optimize's simplifications
 * (recognize-composites, simplify-algebra, simplify-reshapes,
 * fold-transpose, fold-batchnorm, canonicalize); without: canonicalize
 * and cse only, so that every op of the input stays its own kernel.
 * The steps are ordinary passes run by a pass manager, except fusion,
 * which is called directly (fzFuseFunction) so that its report can go
 * to the caller's callback. Nothing here includes llvm-c; it lives
 * beside emit-llvm because fuse-run and fuse-translate share it.
 */
#include <string.h>

#include "fz/dialects.h"
#include "fz/lowering.h"
#include "fz/loop.h"
#include "fz/pass.h"

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

bool fzLowerModuleForCpu(FzOp *module, const FzCpuPipelineOptions *options) {
  FzContext *ctx = fzOpGetContext(module);
  FzCpuPipelineOptions defaults;
  if (!options) {
    fzCpuPipelineOptionsInit(&defaults);
    options = &defaults;
  }
  if (!fzModuleIsGraphLevel(module))
    return true;
  if (!fzRegisterAllDialects(ctx) || !fzRegisterLoopDialect(ctx) ||
      !fzRegisterAllPasses(ctx) || !fzRegisterLoopPasses(ctx))
    return false;
  if (options->simplify) {
    /* canonicalize,cse; with fusion, also the graph simplifications of
     * the graph-optimize pipeline (composites such as softmax spelled
     * as primitive ops become one op) that this build registers. */
    static const char *const kGraphPasses[] = {
        "recognize-composites", "simplify-algebra", "simplify-reshapes",
        "fold-transpose",       "fold-batchnorm",   "canonicalize"};
    char text[512] = "canonicalize,cse";
    for (size_t i = 0; options->fuse && i < sizeof kGraphPasses /
                                                 sizeof kGraphPasses[0];
         ++i)
      if (fzContextLookupPass(ctx, fzStringRefFromCString(kGraphPasses[i]))) {
        strcat(text, ",");
        strcat(text, kGraphPasses[i]);
      }
    if (!run_pipeline(module, text))
      return false;
  }
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
  }
  return run_pipeline(module, options->planMemory
                                  ? "lower-graph-to-loop,func.func(plan-memory)"
                                  : "lower-graph-to-loop");
}

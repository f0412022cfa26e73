/* pipelines/loop_run.c - fzLoopRunFunction: lower a graph
 * function with a pipeline and run it on the loop interpreter, binding
 * the calling convention of fz/loop.h (inputs, then fresh output
 * tensors). Used by fuse-run --device loop-interp and the tests that
 * compare the loop level with the graph interpreter.
 */
#include <string.h>

#include "fz/loop.h"
#include "fz/pass.h"
#include "ir/util.h"

static bool run_pipeline(FzOp *func, const char *pipeline) {
  FzContext *ctx = fzOpGetContext(func);
  FzOp *module = fzOpGetParentOp(func);
  if (!module)
    return fzOpEmitError(func, "must be inside a module to be lowered");
  if (!fzRegisterAllPasses(ctx)) /* the pipeline names registered passes */
    return false;
  FzPassManager *pm = fzPassManagerCreate(ctx, "builtin.module");
  if (!pm)
    return false;
  bool ok = fzPassManagerParsePipeline(
                pm, fzStringRefFromCString(pipeline ? pipeline
                                                    : "graph-to-loop")) &&
            fzPassManagerRun(pm, module);
  fzPassManagerDestroy(pm);
  return ok;
}

bool fzLoopRunFunction(FzOp *func, size_t numInputs, FzTensor *const *inputs,
                       const char *pipeline,
                       const FzLoopInterpOptions *options, size_t *numOutputs,
                       FzTensor ***outputs) {
  FzContext *ctx = fzOpGetContext(func);
  *numOutputs = 0;
  *outputs = NULL;
  if (!fzOpGetAttr(func, FZ_STR("loop.num_outputs")) &&
      !run_pipeline(func, pipeline))
    return false;
  FzAttr *no = fzOpGetAttr(func, FZ_STR("loop.num_outputs"));
  FzAttr *fta = fzOpGetInherentAttr(func, FZ_STR("function_type"));
  if (!no || fzAttrGetKind(no) != FZ_ATTR_INTEGER || !fta)
    return fzOpEmitError(func, "was not lowered to the loop level");
  FzType *ft = fzTypeAttrGetValue(fta);
  size_t nargs = fzFunctionTypeGetNumInputs(ft);
  size_t nout = (size_t)fzIntegerAttrGetValue(no);
  if (nout > nargs || nargs - nout != numInputs)
    return fzOpEmitError(func, "takes %zu inputs but %zu were given",
                         nargs - (nout > nargs ? 0 : nout), numInputs);
  FzTensor **args = fzCalloc(ctx, nargs + 1, sizeof *args);
  FzTensor **outs = fzCalloc(ctx, nout + 1, sizeof *outs);
  bool ok = args && outs;
  for (size_t i = 0; ok && i < numInputs; ++i)
    args[i] = inputs[i];
  for (size_t i = 0; ok && i < nout; ++i) {
    FzType *bt = fzFunctionTypeGetInput(ft, numInputs + i);
    outs[i] = fzTensorCreate(ctx, fzShapedTypeGetElementType(bt),
                             fzShapedTypeGetRank(bt),
                             fzShapedTypeGetShape(bt));
    ok = (args[numInputs + i] = outs[i]) != NULL;
  }
  ok = ok && fzLoopInterpretFunction(func, nargs, args, options);
  fzFree(ctx, args);
  if (!ok) {
    if (outs)
      fzTensorArrayDestroy(ctx, nout, outs);
    return false;
  }
  *numOutputs = nout;
  *outputs = outs;
  return true;
}

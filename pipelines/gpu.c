/* pipelines/gpu.c - compiling a module for the current GPU
 * (fzCudaCompileModule, fz/cuda_run.h): the graph -> loop pipeline of
 * pipelines/cpu.c (fusion unless told otherwise; a loop- or kernel-level
 * module is taken as is), then fzGpuCompile (lower-loop-to-kernel, the
 * kernel dialect to PTX) for the device's compute capability.
 */
#include <string.h>

#include "fz/cuda_run.h"
#include "fz/lowering.h"
#include "fz/precision.h"

FzGpuProgram *fzCudaCompileModule(FzCuda *cu, FzOp *module, bool fuse,
                                  const FzGpuOptions *options) {
  FzOp *clone = fzOpClone(module, NULL);
  if (!clone)
    return NULL;
  bool ok = true;
  if (fzModuleIsGraphLevel(clone)) {
    FzCpuPipelineOptions po;
    fzCpuPipelineOptionsInit(&po);
    po.fuse = fuse;
    po.timing = options ? options->timing : NULL;
    po.fusion = options ? options->fusion : NULL;
    po.layout = options ? options->layout : FZ_GRAPH_LAYOUT_NCHW;
    po.forGpu = true;
    /* bf16, fp16: contractions on 16-bit operands (a graph rewrite). */
    ok = (!options ||
          fzModuleApplyPrecision(clone, options->precision, fuse)) &&
         fzLowerModuleForCpu(clone, &po);
  }
  FzGpuOptions go;
  if (options)
    go = *options;
  else
    fzGpuOptionsInit(&go);
  char arch[16];
  const char *device = fzCudaGetPtxArch(cu, arch, sizeof arch);
  /* sm_90a (the wgmma kernels for large nests) on an sm_90 device unless
   * noWgmma; otherwise the device's own. */
  go.arch = !go.noWgmma && !strcmp(device, "sm_90") ? "sm_90a" : device;
  FzGpuProgram *p = ok ? fzGpuCompile(clone, &go) : NULL;
  fzOpDestroy(clone);
  return p;
}

/* lowering/llvm/cpu_loop.c - the loop-level transforms that only the CPU
 * code generator runs (fzPrepareLoopModuleForCpu), with parameters taken
 * from the target's CPU features.
 *
 * The loop IR that lower-graph-to-loop produces is the input of both the
 * CPU and the GPU back ends; what suits a CPU's vector registers and
 * caches (register tiles, packed panels) is applied here, on the code
 * generator's own copy, so the GPU path never sees it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering/llvm/emit_internal.h"

static bool has(const char *features, const char *f) {
  return features && strstr(features, f) != NULL;
}

bool fzLLPrepareLoopModule(FzOp *module, const FzCodegenOptions *o,
                           const char *features) {
  FzTileContractionsOptions t;
  fzTileContractionsOptionsInit(&t);
  t.vectorBits = o->preferVectorWidth ? o->preferVectorWidth
                 : has(features, "+avx512f") ? 512
                 : has(features, "+avx")     ? 256
                                             : 128;
  t.vectors = t.vectorBits >= 512 ? 4 : 2;
  t.threads = o->threads;
  /* Integer matmuls: 16 i32 lanes where AVX-512 VNNI gives vpdpbusd on
   * them, else the f32 tiles' width (8 lanes: AVX-VNNI's vpdpbusd, or
   * the portable dot4). */
  FzTileInt8Options i8;
  fzTileInt8OptionsInit(&i8);
  i8.vectorBits = t.vectorBits;
  i8.vectors = t.vectorBits >= 512 ? 4 : 2;
  FzTileConvolutionsOptions cv;
  fzTileConvolutionsOptionsInit(&cv);
  cv.vectorBits = t.vectorBits;
  /* FZ_CPU_CONV=rows|flat|chan forces one mapping of tile-convolutions (an
   * A/B switch for measurements; docs/codegen.md). */
  const char *conv = getenv("FZ_CPU_CONV");
  if (conv && !strcmp(conv, "rows"))
    cv.mapping = FZ_CONV_MAPPING_ROWS;
  else if (conv && !strcmp(conv, "flat"))
    cv.mapping = FZ_CONV_MAPPING_FLAT;
  else if (conv && !strcmp(conv, "chan"))
    cv.mapping = FZ_CONV_MAPPING_CHANNELS;
  /* FZ_CPU_CONV_TILE=RxV: the tiles' rows and vectors (the cost model's
   * otherwise; out-of-range values are ignored). */
  const char *tile = getenv("FZ_CPU_CONV_TILE");
  unsigned tr = 0, tv = 0;
  if (tile && sscanf(tile, "%ux%u", &tr, &tv) == 2 && tr >= 1 && tr <= 16 &&
      tv >= 1 && tv <= 8) {
    cv.rows = tr;
    cv.vectors = tv;
  }
  FzBlock *top = fzRegionGetFirstBlock(fzOpGetRegion(module, 0));
  for (FzOp *op = top ? fzBlockGetFirstOp(top) : NULL; op;
       op = fzOpGetNextInBlock(op)) {
    FzStringRef n = fzIdentGetString(fzOpGetName(op));
    if (!fzStringRefEqual(n, FZ_STR("func.func")))
      continue;
    if (o->tileContractions && !fzTileInt8Contractions(op, &i8, NULL))
      return false;
    if (o->tileContractions && !fzTileContractions(op, &t, NULL))
      return false;
    if (o->tileConvolutions && !fzTileConvolutions(op, &cv, NULL))
      return false;
    if (o->stageRows && !fzStageRows(op, 64 * 1024, NULL))
      return false;
  }
  return true;
}

bool fzPrepareLoopModuleForCpu(FzOp *module, const FzCodegenOptions *options) {
  FzCodegenOptions defaults;
  if (!options) {
    fzCodegenOptionsInit(&defaults);
    options = &defaults;
  }
  char *cpu = NULL, *features = NULL;
  LLVMTargetMachineRef tm = fzLLCreateTargetMachine(
      fzOpGetContext(module), options, &cpu, &features);
  if (!tm)
    return false;
  bool ok = fzLLPrepareLoopModule(module, options, features);
  LLVMDisposeTargetMachine(tm);
  fzFree(fzOpGetContext(module), cpu);
  fzFree(fzOpGetContext(module), features);
  return ok;
}

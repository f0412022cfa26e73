/* transforms/passes.h - the definitions of the built-in generic passes
 * (registered by fzRegisterAllPasses in pipelines/register.c). Private to
 * the library; embedders reach them through the registry by name. */
#ifndef FZ_TRANSFORMS_PASSES_H
#define FZ_TRANSFORMS_PASSES_H

#include "fz/pass.h"

extern const FzPassDef fzCanonicalizePass; /* canonicalize */
extern const FzPassDef fzCSEPass;          /* cse */
extern const FzPassDef fzDCEPass;          /* dce */
extern const FzPassDef fzSymbolDCEPass;    /* symbol-dce */

/* Loop-level passes. */
extern const FzPassDef fzPlanMemoryPassDef;       /* plan-memory */
extern const FzPassDef fzTileContractionsPassDef; /* tile-contractions */
extern const FzPassDef fzTileConvolutionsPassDef; /* tile-convolutions */
extern const FzPassDef fzTileInt8ContractionsPassDef; /* tile-int8-contractions */
extern const FzPassDef fzStageRowsPassDef;        /* stage-rows */

#endif /* FZ_TRANSFORMS_PASSES_H */

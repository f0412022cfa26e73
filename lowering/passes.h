/* lowering/passes.h - the definitions of the lowering passes, which
 * pipelines/register.c registers (private to the library; embedders
 * reach them through the registry by name). */
#ifndef FZ_LOWERING_PASSES_H
#define FZ_LOWERING_PASSES_H

#include "fz/pass.h"

/* lower-graph-to-loop (lowering/graph_to_loop.c) */
extern const FzPassDef fzLowerGraphToLoopPassDef;
/* lower-loop-to-kernel (lowering/loop_to_kernel/pass.c) */
extern const FzPassDef fzLowerLoopToKernelPassDef;

#endif /* FZ_LOWERING_PASSES_H */

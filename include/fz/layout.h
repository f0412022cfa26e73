/* fz/layout.h - the data layout of convolution regions: NCHW (channels
 * first, what ONNX and PyTorch export) or NHWC (channels last), one
 * spelling for the graph ops' `layout` attribute, the convert-layout
 * pass, every tool (`--layout=nchw|nhwc`) and the C API
 * (docs/passes.md "convert-layout", docs/dialects/graph.md "Layouts").
 *
 *   nchw  the model's own layout: nothing changes (the default)
 *   nhwc  convert-layout runs after the graph simplifications: every
 *         conv2d with enough input channels, and the pools and
 *         layout-agnostic ops around them, run channels-last, with
 *         transposes only where the layout must change (model inputs
 *         and outputs, ops that read NCHW)
 *   auto  per function, nhwc when the conv2d ops convert-layout would
 *         convert hold at least half of its contraction work (the
 *         multiply-adds of matmul, conv2d and attention), else nchw
 *         (convert-layout{conv=auto}; its remarks say which and why).
 *         The tools' default for the GPU (cuda, sim, --emit=ptx); the
 *         C API's zero value stays nchw
 *
 * Where it acts: FzCpuPipelineOptions.layout (fzLowerModuleForCpu: the
 * CPU pipeline, and the GPU's graph -> loop half), FzGpuOptions.layout
 * (fzCudaCompileModule), fzModuleApplyLayout below for a module at hand.
 */
#ifndef FZ_LAYOUT_H
#define FZ_LAYOUT_H

#include "fz/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ID, NAME) for every layout, once, in enum order (NCHW first: zero,
 * what a memset options struct holds). */
/* clang-format off */
#define FZ_GRAPH_LAYOUTS(X) X(NCHW, "nchw") X(NHWC, "nhwc") X(AUTO, "auto")

typedef enum FzGraphLayout {
#define FZ_GRAPH_LAYOUT_ENUM_ENTRY(id, name) FZ_GRAPH_LAYOUT_##id,
  FZ_GRAPH_LAYOUTS(FZ_GRAPH_LAYOUT_ENUM_ENTRY)
#undef FZ_GRAPH_LAYOUT_ENUM_ENTRY
  FZ_GRAPH_NUM_LAYOUTS
} FzGraphLayout;
/* clang-format on */

/* The layout spelled `text` (exactly "nchw", "nhwc" or "auto") into *out. False
 * for anything else, *out unchanged; nothing is reported (the caller
 * says where the text came from). */
FZ_API FZ_MUST_CHECK bool fzGraphLayoutParse(FzStringRef text,
                                             FzGraphLayout *out);
/* "nchw", "nhwc" or "auto" (static), or NULL when l is not an
 * FzGraphLayout. */
FZ_API const char *fzGraphLayoutGetName(FzGraphLayout l);
/* "nchw, nhwc or auto" (static), for messages. */
FZ_API const char *fzGraphLayoutGetChoicesText(void);

/* In place on module (a builtin.module at the graph level): for
 * FZ_GRAPH_LAYOUT_NHWC, convert-layout on every function (for
 * FZ_GRAPH_LAYOUT_AUTO, convert-layout{conv=auto}), then
 * canonicalize and cse (reshape chains the layout changes leave
 * collapse); FZ_GRAPH_LAYOUT_NCHW and a module already at the loop level
 * are left unchanged. Run it after the graph simplifications
 * (fold-batchnorm folds into NCHW convs first); fzLowerModuleForCpu does
 * so when FzCpuPipelineOptions.layout says NHWC. The dialects and passes
 * involved are registered in the module's context if they were not.
 * False after reporting errors. */
FZ_API FZ_MUST_CHECK bool fzModuleApplyLayout(FzOp *module,
                                              FzGraphLayout layout);

#ifdef __cplusplus
}
#endif

#endif /* FZ_LAYOUT_H */

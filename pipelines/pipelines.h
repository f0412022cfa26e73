/* pipelines/pipelines.h - what the files of pipelines/ share.
 *
 * pipelines/ is the top library layer (docs/architecture.md): it sees
 * every layer below and registers their passes (register.c), owns the
 * named pipelines and the steps that the CPU and GPU compile paths run
 * (cpu.c, gpu.c), and runs a graph function on the loop interpreter
 * (loop_run.c). Nothing below it calls into it.
 */
#ifndef FZ_PIPELINES_PIPELINES_H
#define FZ_PIPELINES_PIPELINES_H

/* The graph simplifications of graph-optimize, in order, after its
 * canonicalize,cse and before fusion. The CPU and GPU pipelines run the
 * same list (fzLowerModuleForCpu), so the two cannot drift apart. */
#define FZ_PIPELINE_GRAPH_SIMPLIFY_TAIL                                      \
  "recognize-composites,simplify-algebra,simplify-reshapes,"              \
  "fold-transpose,fold-batchnorm,"
#define FZ_PIPELINE_GRAPH_SIMPLIFY_HEAD                                      \
  "fold-qdq," FZ_PIPELINE_GRAPH_SIMPLIFY_TAIL
#define FZ_PIPELINE_GRAPH_SIMPLIFY                                           \
  FZ_PIPELINE_GRAPH_SIMPLIFY_HEAD                                            \
  "recognize-attention,merge-projections,canonicalize"
/* The CPU's (fzLowerModuleForCpu without forGpu): QDQ matmuls folded
 * into integer matmuls where exact (fold-qdq{matmuls}), which
 * tile-int8-contractions turns into vpdpbusd tiles. */
#define FZ_PIPELINE_GRAPH_SIMPLIFY_CPU                                       \
  "fold-qdq{matmuls}," FZ_PIPELINE_GRAPH_SIMPLIFY_TAIL                       \
  "recognize-attention,merge-projections,canonicalize"
/* The same for the GPU (FzCpuPipelineOptions.forGpu): attention only over
 * 16-bit operands, which the flash-attention kernel takes; f32 attention
 * stays tensor-core matmuls and a softmax. */
#define FZ_PIPELINE_GRAPH_SIMPLIFY_GPU                                       \
  FZ_PIPELINE_GRAPH_SIMPLIFY_HEAD                                            \
  "recognize-attention{f32=false},merge-projections,canonicalize"

/* The layout steps of fzModuleApplyLayout (NHWC), after the
 * simplifications: convert-layout, then the reshape chains and constants
 * it leaves folded. */
#define FZ_PIPELINE_LAYOUT_NHWC                                              \
  "func.func(convert-layout),canonicalize,cse"
/* The same for FZ_GRAPH_LAYOUT_AUTO: convert-layout decides per function. */
#define FZ_PIPELINE_LAYOUT_AUTO                                              \
  "func.func(convert-layout{conv=auto}),canonicalize,cse"

/* The graph -> loop steps after fusion. */
#define FZ_PIPELINE_GRAPH_TO_LOOP "lower-graph-to-loop,func.func(plan-memory)"

#endif /* FZ_PIPELINES_PIPELINES_H */

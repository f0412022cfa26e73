/* dialects/loop/nest_rewrite.h - rewrites of a loop nest's shape that
 * keep its meaning, shared by the layers that lower and transform the
 * loop level. Private to the library.
 *
 * fzLoopCollapseParallelDims (nest_collapse.c) merges two adjacent dims
 * of a loop.parallel into one, a rewrite that the GPU's mappings use (lowering/loop_to_kernel: a matmul whose x has batch dims
 * that the weight does not share, [S, B, K] @ [K, N], becomes one
 * [S * B, K] @ [K, N] GEMM instead of S products of B rows).
 *
 *   loop.parallel (%s, %i, %j) = (0, 0, 0) to (S, B, N) step (1, 1, 1) {
 *     ... loop.load %x[%s, %i, %k] ... loop.store %v, %y[%s, %i, %j]
 *   }
 * becomes, with views of the buffers it indexes that way,
 *   %xv = loop.view %x : buffer<SxBxKxT> -> buffer<(S*B)xKxT>
 *   %yv = loop.view %y : ...
 *   loop.parallel (%r, %j) = (0, 0) to (S * B, N) step (1, 1) {
 *     ... loop.load %xv[%r, %k] ... loop.store %v, %yv[%r, %j]
 *   }
 */
#ifndef FZ_DIALECTS_LOOP_NEST_REWRITE_H
#define FZ_DIALECTS_LOOP_NEST_REWRITE_H

#include "fz/loop.h"

/* Collapses dims d and d + 1 of loop.parallel `par` (d + 1 the faster:
 * r = iv_d * E_{d+1} + iv_{d+1}). Legal, and done, only when both dims
 * run 0..E step 1 with constant E, and every use of their ivs, at any
 * depth of the body, is a loop.load or loop.store index pair (iv_d,
 * iv_{d+1}) at adjacent positions (q, q + 1) of a buffer defined outside
 * the nest whose dims there are (E_d, E_{d+1}) with stride_q = E_{d+1} *
 * stride_{q+1}: then one index r of a view addresses the same element.
 * Returns the new loop.parallel (par is erased), or NULL with the reason
 * in why (may be NULL) and the IR unchanged; *failed is set when the IR
 * could not be built (out of memory: reported). */
FzOp *fzLoopCollapseParallelDims(FzOp *par, size_t d, bool *failed,
                                 char *why, size_t whyLen);

/* fzLoopSplitRowNest (nest_split.c): a flat loop.parallel whose
 * reductions (top-level loop.for ops) depend on some of its dims only
 * (the rows' dims) becomes the rows form that lower-graph-to-loop makes
 * of a normalization, a loop.parallel over the rows' dims holding the
 * row-level ops (the reductions and the effect-free ops that depend on
 * the rows' dims at most) and then a loop.parallel over the other dims
 * holding the rest, each keeping the dims in their order:
 *
 *   loop.parallel (%s, %b, %c) = ... {          LayerNorm whose output is
 *     %m = loop.for ... %x[%b, %s, %k] ...      stored transposed: each
 *     ... loop.store %v, %y[%s, %b, %c]         element recomputed the
 *   }                                           row's mean
 * becomes
 *   loop.parallel (%s, %b) = ... {
 *     %m = loop.for ...
 *     loop.barrier
 *     loop.parallel (%c) = ... { ... loop.store %v, %y[%s, %b, %c] }
 *   }
 * The rows' dims need not lead: a LayerNorm over the channels of an NCHW
 * tensor stored back as NCHW, reducing %x[%n, %k, %h, %w] in a nest over
 * (%n, %c, %h, %w), becomes loop.parallel (%n, %h, %w) around
 * loop.parallel (%c).
 * Done when the rows' dims are some but not all of the nest's, some
 * inner dim has an extent
 * above 1 (a keepdims reduction's unit dims gain nothing), every
 * top-level loop.for goes to the row level, and no row-level op uses a
 * value of the inner level.
 * Returns the new outer loop.parallel (par is erased), or par unchanged
 * when it does not apply; NULL after an allocation failure (reported). */
FzOp *fzLoopSplitRowNest(FzOp *par);

#endif /* FZ_DIALECTS_LOOP_NEST_REWRITE_H */

/* dialects/loop/nest_collapse.h - merging two adjacent dims of a
 * loop.parallel into one, a rewrite of the loop level that the GPU's
 * mappings use (lowering/loop_to_kernel: a matmul whose x has batch dims
 * that the weight does not share, [S, B, K] @ [K, N], becomes one
 * [S * B, K] @ [K, N] GEMM instead of S products of B rows). Private to
 * the library.
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
#ifndef FZ_DIALECTS_LOOP_NEST_COLLAPSE_H
#define FZ_DIALECTS_LOOP_NEST_COLLAPSE_H

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

#endif /* FZ_DIALECTS_LOOP_NEST_COLLAPSE_H */

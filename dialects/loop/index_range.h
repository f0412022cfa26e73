/* dialects/loop/index_range.h - the interval an index value of the loop
 * level takes, from its definition: constants, the ivs of loops with
 * constant bounds, and addi / subi / muli / divsi / remsi / minsi /
 * maxsi of such values. Used where index arithmetic is built
 * (lowering/graph_to_loop: a reshape or transpose inside a fused group
 * linearizes and delinearizes its indices, and a division whose operand
 * is known to be x * c + y with 0 <= y < c is x, its remainder y). The
 * GPU's code emission has its own, richer analysis for bounds checks
 * (lowering/llvm/emit_check.c). Private to the library.
 */
#ifndef FZ_DIALECTS_LOOP_INDEX_RANGE_H
#define FZ_DIALECTS_LOOP_INDEX_RANGE_H

#include "fz/loop.h"

/* [*lo, *hi] (inclusive) of integer or index value v, or false when
 * unknown (a load, a function argument, an overflow, a deep chain). */
bool fzLoopIndexRange(FzValue *v, int64_t *lo, int64_t *hi);

#endif /* FZ_DIALECTS_LOOP_INDEX_RANGE_H */

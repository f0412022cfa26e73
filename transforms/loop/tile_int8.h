/* transforms/loop/tile_int8.h - what the files of tile-int8-contractions
 * share: tile_int8.c (matching, packing, the dot4 tiles) and
 * tile_int8_narrow.c (i32 buffers of extended bytes narrowed to bytes).
 */
#ifndef FZ_TRANSFORMS_LOOP_TILE_INT8_H
#define FZ_TRANSFORMS_LOOP_TILE_INT8_H

#include "fz/ir.h"

/* Rewrites, in func's body, every loop.alloc of i32 elements that one
 * top-level loop.parallel fills (one store, at the nest's ivs, over the
 * whole buffer) with ext(b) or ext(b) - z (b i8, ext extsi or extui, z
 * defined at the function's top level) and that is otherwise only
 * loaded and deallocated: the nest stores b into an i8 buffer instead
 * (or, when b is a plain load of a buffer nothing writes, the readers
 * read that buffer and the nest goes), and every load becomes ext(load
 * of the bytes) [- z]. Exact. False after an error. */
bool tileInt8Narrow(FzOp *func);

#endif /* FZ_TRANSFORMS_LOOP_TILE_INT8_H */

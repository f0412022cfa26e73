/* lowering/graph_to_loop_internal.h - what the files of lower-graph-to-loop
 * share.
 *
 *   graph_to_loop.c         the pass: signatures, buffers, the driver
 *   graph_to_loop_nest.c    loop nests: levels, hoisting (the placer of
 *                           the nest's FzLoopBuilder), the value cache,
 *                           lgEmit
 *   graph_to_loop_ops.c     elementwise and data-movement ops
 *   graph_to_loop_reduce.c  reductions, normalizations, contractions,
 *                           pooling
 *   graph_to_loop_scatter.c graph.scatter_nd
 *   graph_to_loop_attention.c graph.attention (one online-softmax nest)
 *
 * Every op is built with FzLoopBuilder (dialects/loop/builder.h): a
 * nest's ops with N->b, function-level ops with lgFuncBuilder.
 *
 * The model. A fused group (or a lone op) is lowered by *emitting values
 * at indices*: for each output, a loop nest over its shape is opened, and
 * the output's value at the nest's index vector is requested. Requesting
 * a graph value at an index vector emits the scalar computation of that
 * element, recursively requesting operands at the indices they are read
 * at (broadcasts, transposes, reshapes are index maps); leaves are loads
 * from the buffers of the group's inputs or constants. So the values of
 * one iteration space live in SSA scalars of one loop body, never in
 * memory.
 *
 * Levels. A nest is a path of loop bodies (levels): 0 is the function
 * body (before the nest), then each loop opened. Every scalar op is
 * inserted at the deepest level among its operands' levels (hoisting as
 * it is built): a load of bias[j] sits with j, a row reduction with the
 * row's indices. A reduction opens its own loop.for with accumulators at
 * the level of its kept indices, so softmax's max and sum run once per
 * row, before the consumer loop of the row, separated by loop.barrier.
 * A cache maps (graph value, index values) to the scalar already emitted
 * on the current path, so a value used twice at the same element is
 * computed once.
 */
#ifndef FZ_GRAPH_TO_LOOP_INTERNAL_H
#define FZ_GRAPH_TO_LOOP_INTERNAL_H

#include "dialects/loop/builder.h"
#include "fz/fusion.h"
#include "fz/graph.h"
#include "fz/loop.h"
#include "ir/util.h"

#define LG_MAX_RANK FZ_GRAPH_MAX_RANK
#define LG_MAX_LEVELS 64

/* Where a tensor that lives outside the nest being built can be read. */
typedef struct LgStorage {
  FzValue *buffer; /* identity-layout buffer of the tensor's shape, or */
  FzAttr *splat;   /* a splat dense constant (no memory at all) */
} LgStorage;

/* Per-function state of the pass. */
typedef struct LgFunc {
  FzContext *ctx;
  FzOp *func;
  FzBuilder top;     /* the function body, before the op being lowered */
  FzPtrMap storage;  /* graph tensor value -> LgStorage* (arena) */
  FzPtrMap constants; /* attribute -> loop.constant at the function level
                         (made before the op being lowered, so it
                         dominates everything lowered after) */
  FzArena arena;
  bool failed;
} LgFunc;

typedef struct LgLevel {
  FzBuilder b;      /* where ops of this level are inserted */
  FzOp *loop;       /* the loop op whose body this is (NULL: level 0) */
  unsigned scope;   /* unique id of this body */
} LgLevel;

typedef struct LgCacheEntry {
  FzValue *value;   /* graph value */
  size_t rank;
  FzValue *idx[LG_MAX_RANK];
  FzValue *result;  /* scalar */
  size_t level;     /* path position of the result */
  unsigned scope;   /* that level's scope when it was made */
} LgCacheEntry;

/* One nest being built. */
typedef struct LgNest {
  LgFunc *F;
  /* The builder of the nest's ops (dialects/loop/builder.h): each op at
   * the deepest level of its operands (its placer), constants once per
   * function (F->constants) at level 0, the nest's location, failures
   * to F->failed. An LgNest is not copied (b points into it). */
  FzLoopBuilder b;
  LgLevel path[LG_MAX_LEVELS];
  size_t depth;     /* levels on the path (path[0] is the function) */
  unsigned nextScope;
  FzPtrMap level;   /* loop-IR value -> (path position << 32 | scope) + 1 */
  LgCacheEntry *cache;
  size_t ncache, capCache;
  const FzPtrMap *alias; /* graph.fusion block argument -> outer value;
                            may be NULL */
  size_t emitResult; /* which result of its op lgEmit is emitting (set
                        before the emitter runs; an emitter of a
                        multi-result op reads it first thing) */
} LgNest;

/* A saved path suffix, for opening a loop under a shallower level. */
typedef struct LgSaved {
  size_t parent, depth;
  FzBuilder parentBuilder;
  LgLevel rest[LG_MAX_LEVELS];
} LgSaved;

/* The builder of function-level ops (buffers, views, calls) at ip, for
 * ops at loc; failures to F->failed. */
static inline FzLoopBuilder lgFuncBuilder(LgFunc *F, const FzBuilder *ip,
                                          FzLoc *loc) {
  FzLoopBuilder b;
  fzBInit(&b, F->ctx, ip, loc, NULL, &F->failed);
  return b;
}

/*===--- graph_to_loop_nest.c -------------------------------------------===*/

void lgNestInit(LgNest *N, LgFunc *F, FzLoc *loc);
void lgNestFree(LgNest *N);
/* Reports an error at op (once per function) and returns NULL. */
FzValue *lgFail(LgNest *N, FzOp *op, const char *fmt, ...) FZ_PRINTF(3, 4);

/* The path position of a loop-IR value (0 when made outside the nest). */
size_t lgLevelOf(LgNest *N, FzValue *v);

/* Opens loop.parallel over [0, ext[i]) for n dims as a child of path
 * position `parent` (the current top when parent == depth - 1), filling
 * ivs. Returns false after an error. */
bool lgOpenParallel(LgNest *N, size_t parent, size_t n, const int64_t *ext,
                    FzValue **ivs, LgSaved *saved);
/* Opens loop.for over [0, ext) with iteration arguments inits (types
 * taken from them) under `parent`; fills *iv and iters (block args). */
bool lgOpenFor(LgNest *N, size_t parent, int64_t ext, size_t n,
               FzValue *const *inits, FzValue **iv, FzValue **iters,
               LgSaved *saved);
/* lgOpenFor over [0, ub) for an index value ub made at or above parent
 * (a causal attention's key loop stops at the row's last visible key). */
bool lgOpenForTo(LgNest *N, size_t parent, FzValue *ub, size_t n,
                 FzValue *const *inits, FzValue **iv, FzValue **iters,
                 LgSaved *saved);
/* Closes the innermost loop: yields values (n of them; for loop.for) and
 * restores the path. Returns the loop op. */
FzOp *lgClose(LgNest *N, size_t n, FzValue *const *yields,
              const LgSaved *saved);

/* The compute type of a tensor element type: f32 for f16/bf16, else
 * itself. Loads convert to it, stores from it (fzBConvertF). */
FzType *lgComputeType(FzContext *ctx, FzType *elt);

/* The scalar of graph value gv at index vector idx (rank of gv), in the
 * compute type of its element type. NULL after an error. */
FzValue *lgEmit(LgNest *N, FzValue *gv, FzValue *const *idx);

/* Records that graph value gv at idx is the scalar result (an emitter
 * that computes several results at once: layer_norm's statistics). */
void lgCachePut(LgNest *N, FzValue *gv, FzValue *const *idx, FzValue *result);

/* The shape of a ranked tensor value. */
size_t lgRank(FzValue *gv);
int64_t lgDim(FzValue *gv, size_t i);
FzType *lgElt(FzValue *gv);

/*===--- op emitters ----------------------------------------------------===*/

/* Emits the element of op's result #0 at idx (of result #N->emitResult
 * for an op of several results: layer_norm's statistics). */
typedef FzValue *(*LgEmitFn)(LgNest *N, FzOp *op, FzValue *const *idx);
/* The emitter for op, or NULL when lower-graph-to-loop does not support
 * it (graph_to_loop_ops.c holds the table). */
LgEmitFn lgFindEmitter(const FzOp *op);

/* Reduction-family emitters (graph_to_loop_reduce.c). */
FzValue *lgEmitReduce(LgNest *N, FzOp *op, FzValue *const *idx);
FzValue *lgEmitSoftmax(LgNest *N, FzOp *op, FzValue *const *idx);
FzValue *lgEmitLayerNorm(LgNest *N, FzOp *op, FzValue *const *idx);
FzValue *lgEmitRmsNorm(LgNest *N, FzOp *op, FzValue *const *idx);
FzValue *lgEmitMatmul(LgNest *N, FzOp *op, FzValue *const *idx);
FzValue *lgEmitConv2d(LgNest *N, FzOp *op, FzValue *const *idx);
FzValue *lgEmitPool(LgNest *N, FzOp *op, FzValue *const *idx);
FzValue *lgEmitGlobalPool(LgNest *N, FzOp *op, FzValue *const *idx);
/* The index into `to` of the element at idx of `from`, two shapes of one
 * element order (a reshape, either way): grouped by the shapes' common
 * refinement, so only a group that splits a dim divides. */
void lgReshapeIndex(LgNest *N, FzValue *to, FzValue *from,
                    FzValue *const *idx, FzValue **oi);
/* graph.attention (graph_to_loop_attention.c): the whole op as one nest
 * storing into out; inside a group, alias maps its block arguments (the
 * prologue's inputs; may be NULL), and epi[0..ne) are the group's
 * epilogue (transposes and reshapes from the attention's result outward,
 * fusion's head merge): out has the last one's shape and each element is
 * stored where that chain puts it (ne 0: out has the result's shape). */
#define LG_MAX_EPILOGUE 8
bool lgLowerAttention(LgFunc *F, FzOp *op, FzValue *out,
                      const FzPtrMap *alias, FzOp *const *epi, size_t ne);
/* graph.scatter_nd (graph_to_loop_scatter.c). */
FzValue *lgEmitScatterNd(LgNest *N, FzOp *op, FzValue *const *idx);

/* Attribute readers (absent: dflt). */
int64_t lgAttrInt(FzOp *op, const char *name, int64_t dflt);
double lgAttrFloat(FzOp *op, const char *name, double dflt);
bool lgAttrBool(FzOp *op, const char *name, bool dflt);
/* A dense i64 array into out (at most max); returns the count, or -1
 * when absent. */
int lgAttrInts(FzOp *op, const char *name, int64_t *out, size_t max);
bool lgAttrStringIs(FzOp *op, const char *name, const char *value);

/* Which dims of op's result (rank n) are reduced by the row reductions a
 * nest over that result should run per row: bit d set for a dim that
 * should be an inner (consumer-phase) loop. 0 when none. */
uint32_t lgInnerDims(FzOp *op);

#endif /* FZ_GRAPH_TO_LOOP_INTERNAL_H */

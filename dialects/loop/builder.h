/* dialects/loop/builder.h - the one builder for loop- and kernel-level
 * IR that the code generators share (lowering/graph_to_loop*,
 * lowering/loop_to_kernel, transforms/loop). Private to the library.
 *
 * An FzLoopBuilder is an insertion point (an FzBuilder) with what every
 * op built there needs: the context, the location the ops get, where
 * index constants go, and the sticky failure flag of the emission it
 * belongs to. It owns nothing: it is a small value on the stack, copied
 * to build elsewhere (fzBAtEnd, fzBBefore, ...; the copies share the
 * location, the constants' place and the flag) and dropped without
 * cleanup.
 *
 * The constructors (fzB*) never crash on a failure before them: one
 * whose operand is NULL, or that cannot allocate, sets *failed and
 * returns NULL (false), so a generator builds straight-line code and
 * checks the flag once at the end, as the families it replaces did
 * (lg*, fzLk*, mm*, tile*: docs/architecture.md, "Building IR"). An
 * allocation failure is also reported by the context (the sticky
 * flag and one `out of memory` error); a constructor adds no
 * diagnostic of its own.
 *
 * A builder without an insertion block (what a loop constructor leaves
 * in *body when it fails) builds nothing: each constructor on it fails,
 * so no op is ever created detached (and leaked).
 *
 * Index arithmetic folds only what is trivial (a * 1, a + 0): what a
 * generator emits stays what it asked for.
 */
#ifndef FZ_DIALECTS_LOOP_BUILDER_H
#define FZ_DIALECTS_LOOP_BUILDER_H

#include "fz/loop.h"

/* Limits of the constructors that take arrays (a larger request fails). */
#define FZ_B_MAX_DIMS    32  /* fzBParallel's dims */
#define FZ_B_MAX_ACCESS  34  /* fzBPrefetch's operands: buffer + indices */
#define FZ_B_MAX_CARRIED 256 /* fzBFor's carried values */

typedef struct FzLoopBuilder {
  FzContext *ctx;
  FzBuilder ip;      /* where ops go */
  FzLoc *loc;        /* the location of every op built */
  FzBuilder *consts; /* where fzBIndex puts constants; NULL: at ip */
  FzType *index;     /* the index type */
  bool *failed;      /* the emission's failure flag (never NULL) */
} FzLoopBuilder;

/*===--- Setting up -------------------------------------------------------===*/

/* A builder at ip for ops at loc, failures to *failed (which the caller
 * owns and initializes); consts may be NULL (constants at ip). Sets
 * *failed when the index type cannot be made. */
void fzBInit(FzLoopBuilder *b, FzContext *ctx, const FzBuilder *ip, FzLoc *loc,
             FzBuilder *consts, bool *failed);
/* Copies of b building elsewhere: at the end or the start of block,
 * before or after op. */
FzLoopBuilder fzBAtEnd(const FzLoopBuilder *b, FzBlock *block);
FzLoopBuilder fzBAtStart(const FzLoopBuilder *b, FzBlock *block);
FzLoopBuilder fzBBefore(const FzLoopBuilder *b, FzOp *op);
FzLoopBuilder fzBAfter(const FzLoopBuilder *b, FzOp *op);
/* Sets the failure flag; returns NULL (for `return fzBFail(b);`). */
void *fzBFail(FzLoopBuilder *b);

/*===--- Any op -----------------------------------------------------------===*/

/* The op `name` with operands ops[0..n) and one result of type rt (none
 * when rt is NULL). */
FzOp *fzBOp(FzLoopBuilder *b, const char *name, size_t n, FzValue *const *ops,
            FzType *rt);
/* The same, its result (rt NULL: a failure, as after a failed type). */
FzValue *fzBOp1(FzLoopBuilder *b, const char *name, size_t n,
                FzValue *const *ops, FzType *rt);
/* st's op (built by the caller: properties, several results, regions);
 * st is consumed either way. */
FzOp *fzBCreate(FzLoopBuilder *b, FzOpState *st);
/* A copy of op (one result of type rt, op's properties and location)
 * on the operands ops (as many as op has). */
FzValue *fzBCloneWith(FzLoopBuilder *b, FzOp *op, FzValue *const *ops,
                      FzType *rt);

/*===--- Constants and index arithmetic -----------------------------------===*/

/* An index constant, at b->consts (else at the insertion point). */
FzValue *fzBIndex(FzLoopBuilder *b, int64_t v);
/* A scalar constant of integer or float type t, at the insertion point. */
FzValue *fzBConst(FzLoopBuilder *b, FzType *t, double v);
/* A binary op whose result has the type of a (loop.addi, loop.mulf,
 * ...). */
FzValue *fzBBinary(FzLoopBuilder *b, const char *name, FzValue *a, FzValue *c);
/* A binary op on indices (loop.addi, loop.divsi, loop.minsi, ...):
 * an index result. */
FzValue *fzBIndexOp(FzLoopBuilder *b, const char *name, FzValue *a, FzValue *c);
/* a * s + t on indices, s and t constants (a * 1 and + 0 built as a). */
FzValue *fzBAffine(FzLoopBuilder *b, FzValue *a, int64_t s, int64_t t);

/*===--- Types ------------------------------------------------------------===*/

/* vector<lanes x scalar>. */
FzType *fzBVectorType(FzLoopBuilder *b, int64_t lanes, FzType *scalar);

/*===--- Memory -----------------------------------------------------------===*/

/* A loop.prefetch of the element `ahead` after the one that the access
 * operands ops (the buffer, then the indices; n >= 2) name, along the
 * last index. */
bool fzBPrefetch(FzLoopBuilder *b, size_t n, FzValue *const *ops,
                 int64_t ahead);

/*===--- Structure --------------------------------------------------------===*/

/* st's loop (loop.for or loop.parallel: its operands and results set)
 * with an empty body of nargs arguments of argTypes that ends in an
 * empty loop.yield; *body builds before that yield (fzBSetYield sets its
 * operands). st is consumed either way. */
FzOp *fzBLoop(FzLoopBuilder *b, FzOpState *st, size_t nargs,
              FzType *const *argTypes, FzLoopBuilder *body);
/* loop.parallel over [0, ub[d]) step 1 for d < n; its ivs to ivs[0..n),
 * *body builds in it. */
FzOp *fzBParallel(FzLoopBuilder *b, size_t n, const int64_t *ub, FzValue **ivs,
                  FzLoopBuilder *body);
/* loop.for from lb to ub by step carrying n values of type t that start
 * at init (marked loop.reduction when n > 0); *body builds in it. */
FzOp *fzBFor(FzLoopBuilder *b, FzValue *lb, FzValue *ub, FzValue *step,
             size_t n, FzValue *const *init, FzType *t, FzLoopBuilder *body);
/* Sets the operands of the yield that ends loop's body to vals[0..n). */
bool fzBSetYield(FzLoopBuilder *b, FzOp *loop, size_t n, FzValue *const *vals);

/*===--- Kernel ops -------------------------------------------------------===*/

/* An index of the launch: `name` is kernel.thread_id, kernel.block_id,
 * kernel.block_dim or kernel.grid_dim, dim "x", "y" or "z". */
FzValue *fzBKernelId(FzLoopBuilder *b, const char *name, const char *dim);
/* kernel.barrier. */
bool fzBBarrier(FzLoopBuilder *b);

#endif /* FZ_DIALECTS_LOOP_BUILDER_H */

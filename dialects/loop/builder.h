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
 * generator emits stays what it asked for; the *Fold constructors are
 * the forms that fold constants, identities and index ranges.
 *
 * Two options serve a generator that places ops itself
 * (lower-graph-to-loop puts each op at the outermost loop level its
 * operands allow, and makes each constant once per function):
 * a placer (fzBSetPlacer), to which fzBCreate hands every op state
 * instead of building at ip, and a constant cache (fzBSetConstantCache).
 */
#ifndef FZ_DIALECTS_LOOP_BUILDER_H
#define FZ_DIALECTS_LOOP_BUILDER_H

#include "fz/loop.h"
#include "ir/util.h"

/* Limits of the constructors that take arrays (a larger request fails). */
#define FZ_B_MAX_DIMS    32  /* fzBParallel's dims */
#define FZ_B_MAX_ACCESS  34  /* operands of fzBPrefetch, fzBLoad: buffer, indices */
#define FZ_B_MAX_CARRIED 256 /* fzBFor's carried values */

/* Builds st's op where the generator owner chooses (st is consumed
 * either way); the op, or NULL after a failure. */
typedef FzOp *(*FzBPlaceFn)(void *owner, FzOpState *st);

typedef struct FzLoopBuilder {
  FzContext *ctx;
  FzBuilder ip;      /* where ops go */
  FzLoc *loc;        /* the location of every op built */
  FzBuilder *consts; /* where fzBIndex puts constants; NULL: at ip */
  FzType *index;     /* the index type */
  bool *failed;      /* the emission's failure flag (never NULL) */
  /* Options (NULL: off; fzBInit clears them). */
  FzPtrMap *constants; /* attribute -> its loop.constant (made once) */
  FzBPlaceFn place;    /* builds the ops instead of ip (fzBSetPlacer) */
  void *owner;         /* place's first argument */
} FzLoopBuilder;

/*===--- Setting up -------------------------------------------------------===*/

/* A builder at ip for ops at loc, failures to *failed (which the caller
 * owns and initializes); consts may be NULL (constants at ip). Sets
 * *failed when the index type cannot be made. */
void fzBInit(FzLoopBuilder *b, FzContext *ctx, const FzBuilder *ip, FzLoc *loc,
             FzBuilder *consts, bool *failed);
/* Ops through place(owner, st) rather than at ip (a generator that
 * chooses each op's place: the outermost level its operands allow);
 * constants still go to consts when it is set. */
void fzBSetPlacer(FzLoopBuilder *b, FzBPlaceFn place, void *owner);
/* Every constant (fzBIndex, fzBConst, fzBConstInt) made once per
 * attribute: looked up in cache (attribute -> value), else made at
 * consts (or, when consts is NULL, where any op goes) and recorded. The
 * caller owns cache; the constants must dominate every later use (a
 * place before all the code being built). */
void fzBSetConstantCache(FzLoopBuilder *b, FzPtrMap *cache);
/* Copies of b building elsewhere: at ip, at the end or the start of
 * block, before or after op. A copy has no placer (it builds where it
 * was asked to) and shares the rest. */
FzLoopBuilder fzBAt(const FzLoopBuilder *b, const FzBuilder *ip);
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
/* A scalar constant of integer or float type t, at the insertion point
 * (with a constant cache: made once, at consts). */
FzValue *fzBConst(FzLoopBuilder *b, FzType *t, double v);
/* An integer constant of integer (or index) type t, exact for any
 * int64 (fzBConst goes through a double); placed as fzBConst. */
FzValue *fzBConstInt(FzLoopBuilder *b, FzType *t, int64_t v);
/* A float constant of float type t (a non-float t fails); placed as
 * fzBConst. */
FzValue *fzBConstFloat(FzLoopBuilder *b, FzType *t, double v);
/* A binary op whose result has the type of a (loop.addi, loop.mulf,
 * ...). */
FzValue *fzBBinary(FzLoopBuilder *b, const char *name, FzValue *a, FzValue *c);
/* A binary op on indices (loop.addi, loop.divsi, loop.minsi, ...):
 * an index result. */
FzValue *fzBIndexOp(FzLoopBuilder *b, const char *name, FzValue *a, FzValue *c);
/* a * s + t on indices, s and t constants (a * 1 and + 0 built as a). */
FzValue *fzBAffine(FzLoopBuilder *b, FzValue *a, int64_t s, int64_t t);
/* A unary op whose result has the type of a (loop.negf, loop.exp, ...). */
FzValue *fzBUnary(FzLoopBuilder *b, const char *name, FzValue *a);
/* loop.fma: a * c + d, the type of a. */
FzValue *fzBFma(FzLoopBuilder *b, FzValue *a, FzValue *c, FzValue *d);
/* loop.cmpf (a float a) or loop.cmpi with predicate pred ("olt", "eq",
 * "slt", ...): an i1. */
FzValue *fzBCmp(FzLoopBuilder *b, const char *pred, FzValue *a, FzValue *c);
/* loop.select: cond ? a : c, the type of a. */
FzValue *fzBSelect(FzLoopBuilder *b, FzValue *cond, FzValue *a, FzValue *c);
/* The conversion `name` (loop.extf, loop.sitofp, loop.index_cast, ...)
 * of a to type to (always built, even when a has type to). */
FzValue *fzBCast(FzLoopBuilder *b, const char *name, FzValue *a, FzType *to);

/* v as type t: v itself when it has type t, else loop.extf when both
 * are floats and t is the wider, else loop.truncf (a 16-bit float
 * computed in f32: extended after its load, truncated for its store). */
FzValue *fzBConvertF(FzLoopBuilder *b, FzValue *v, FzType *t);

/* Index arithmetic that folds as it builds (a generator that composes
 * index maps: reshapes, transposes, broadcasts):
 *   fzBAddFold  a + c: two constants fold, + 0 is the other operand;
 *   fzBMulFold  a * k: * 0 is 0, * 1 is a, a constant folds;
 *   fzBDivFold  a / k and fzBRemFold a % k (k > 0; signed): a constant
 *               folds, k == 1 folds, a whose range (index_range.h) lies
 *               in [0, k) gives 0 (a / k) and a (a % k), and a = x * (m k)
 *               + y with x >= 0, 0 <= y < k gives x * m and y (the
 *               delinearization of an index a reshape linearized).
 * Constants made are index constants (fzBIndex). */
FzValue *fzBAddFold(FzLoopBuilder *b, FzValue *a, FzValue *c);
FzValue *fzBMulFold(FzLoopBuilder *b, FzValue *a, int64_t k);
FzValue *fzBDivFold(FzLoopBuilder *b, FzValue *a, int64_t k);
FzValue *fzBRemFold(FzLoopBuilder *b, FzValue *a, int64_t k);

/*===--- Types ------------------------------------------------------------===*/

/* vector<lanes x scalar>. */
FzType *fzBVectorType(FzLoopBuilder *b, int64_t lanes, FzType *scalar);

/*===--- Memory -----------------------------------------------------------===*/

/* loop.load of the element at idx (one index per dim of buffer's type)
 * of buffer: a value of its element type. */
FzValue *fzBLoad(FzLoopBuilder *b, FzValue *buffer, FzValue *const *idx);
/* loop.store of v at idx of buffer. */
bool fzBStore(FzLoopBuilder *b, FzValue *v, FzValue *buffer,
              FzValue *const *idx);

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

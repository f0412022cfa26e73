/* transforms/graph/convert_layout.h - what the files of the convert-layout
 * pass share (convert_layout.c: forms, materialization, the driver;
 * convert_layout_ops.c: the rule of each op). Private to them.
 *
 * The model. The pass walks a function body once, in order, and keeps
 * for every rank-4 value v of the original (NCHW) graph its *NHWC form*:
 * a value `base` and a permutation `perm` such that
 *
 *   transpose(v, [0, 2, 3, 1]) == transpose(base, perm)
 *
 * (perm the identity: base itself is v in NHWC, nothing to move). A
 * converted op (a conv2d rewritten to layout = "nhwc", an elementwise op
 * on NHWC operands, ...) gets a new op, inserted before it, that computes
 * its result's NHWC form; the original op stays until the end, when the
 * uses that still want NCHW (an op left alone, a function result) are
 * given a transpose of the form and the converted ops are erased. Forms
 * compose: a transpose in the input (ConvNeXt's permutes around its
 * LayerNorms) is a form of its operand, so a permute to channels-last of
 * an NHWC conv is the conv itself and the permute back costs nothing.
 *
 * Transposes are made lazily, once per (base, perm) (the cache), right
 * after base's definition, and only where some op needs them; one that
 * moves only size-1 dims is a graph.reshape (exact, no data movement:
 * the [N, 1, 1, C] -> [N, C, 1, 1] before a classifier's flatten); one of
 * a constant is evaluated at compile time.
 */
#ifndef FZ_TRANSFORMS_GRAPH_CONVERT_LAYOUT_H
#define FZ_TRANSFORMS_GRAPH_CONVERT_LAYOUT_H

#include "fz/graph.h"
#include "fz/pass.h"
#include "ir/util.h"

enum {
  CL_STAT_CONVS,      /* conv2d rewritten to NHWC */
  CL_STAT_CONVS_KEPT, /* conv2d left NCHW (too few channels) */
  CL_STAT_OPS,        /* other ops rewritten to NHWC */
  CL_STAT_TRANSPOSES, /* data-moving transposes made (kept) */
  CL_STAT_RESHAPES,   /* layout changes that are reshapes (unit dims) */
  CL_STAT_CANCELLED,  /* transposes of the input absorbed into forms */
  CL_NUM_STATS
};

/* The NHWC form of a rank-4 value: nhwc(v) = transpose(base, perm). */
typedef struct ClForm {
  FzValue *base;
  int64_t perm[4];
  bool converted; /* v's op is replaced: v goes away at the end */
  FzValue *plain; /* converted to a value that is v itself (a reduction
                     whose kept dims keep their order); NULL otherwise */
} ClForm;

/* A transpose (or reshape) made of base by perm, kept for reuse. */
typedef struct ClMade {
  FzValue *base;
  int64_t perm[4];
  FzValue *value;
  struct ClMade *next; /* the next one of the same base */
} ClMade;

typedef struct ClLayout {
  FzContext *ctx;
  FzBlock *body;
  int64_t minChannels; /* 0: 16 bytes of the element type */
  bool remarks;
  FzPtrMap forms; /* original value -> ClForm (arena) */
  FzPtrMap made;  /* base -> ClMade list (arena) */
  FzPtrMap wanted; /* values a converted conv2d will read in NHWC */
  FzPtrVec converted; /* original ops to erase, in block order */
  FzPtrVec madeOps;   /* the transposes and reshapes made, in order */
  FzArena arena;
  uint64_t stats[CL_NUM_STATS];
  bool failed;
} ClLayout;

/* [0, 2, 3, 1] (NCHW -> NHWC) and [0, 3, 1, 2] (back); kToNhwc[i] is the
 * NCHW dim at NHWC position i, kToNchw[d] the NHWC position of NCHW
 * dim d. */
extern const int64_t kClToNhwc[4], kClToNchw[4];

/*===--- convert_layout.c ------------------------------------------------===*/

/* The form of rank-4 value v (nothing is made). */
ClForm clGetForm(ClLayout *L, FzValue *v);
/* Whether v's NHWC form is free: no data to move. */
bool clIsFree(ClLayout *L, FzValue *v);
/* Whether nhwc(v) costs nothing more: free, or its transpose is made
 * already (or will be, for a conv2d that the pass converts). */
bool clIsAvailable(ClLayout *L, FzValue *v);
/* Whether nhwc(v) needs a data-moving transpose: false for a constant
 * (evaluated at compile time), a free form, or a form that is a
 * reshape. */
bool clNeedsTranspose(ClLayout *L, FzValue *v);
/* nhwc(v) for a rank-4 v, made if needed; `user` is the op that asks (for
 * the remark). NULL after an error. */
FzValue *clNhwc(ClLayout *L, FzValue *v, FzOp *user);
/* A rank <= 4 operand of a broadcasting op re-laid out for the NHWC
 * version of that op (its dims aligned to the right of the rank-4
 * result, as numpy broadcasting does). NULL after an error. */
FzValue *clRelayoutOperand(ClLayout *L, FzValue *v, FzOp *user);
/* Records op as converted: its result #0 has the NHWC form `nhwc` (or is
 * replaced by `plain` when nhwc is NULL). False on allocation failure. */
bool clConverted(ClLayout *L, FzOp *op, FzValue *nhwc, FzValue *plain);
/* Records the form of op's result (a transpose absorbed). */
bool clConvertedForm(ClLayout *L, FzOp *op, const ClForm *form);

/* t (rank 4) with its dims in NHWC order. */
FzType *clPermuteType(FzContext *ctx, FzType *t, const int64_t *perm);
/* A copy of op (name, operands, attributes, location) with operands
 * `ops`, result type `type` and the named properties set (replacing
 * those of op), inserted before op. NULL after an error. */
FzOp *clCloneOp(ClLayout *L, FzOp *op, size_t n, FzValue *const *ops,
                FzType *type, size_t numProps, const char *const *names,
                FzAttr *const *values);
/* A one-result graph op `name`(ops) of result type `type` before op. */
FzValue *clCreate(ClLayout *L, FzOp *before, const char *name, size_t n,
                  FzValue *const *ops, FzType *type);
/* An i64 array attribute. */
FzAttr *clI64Array(ClLayout *L, size_t n, const int64_t *v);

/*===--- convert_layout_ops.c --------------------------------------------===*/

/* Whether the pass converts conv2d op (its rule's first test). */
bool clConvConverts(ClLayout *L, FzOp *op, int64_t *channels, int64_t *min);
/* Rewrites op to NHWC when its rule says so (recording it with
 * clConverted); false when op stays as it is. Sets L->failed on
 * errors. */
bool clConvertOp(ClLayout *L, FzOp *op);

#endif /* FZ_TRANSFORMS_GRAPH_CONVERT_LAYOUT_H */

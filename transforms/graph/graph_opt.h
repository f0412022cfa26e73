/* transforms/graph/graph_opt.h - what the graph-optimization passes
 * share (private to transforms/graph and pipelines/register.c).
 *
 * The passes are fold-batchnorm, fold-transpose, simplify-reshapes,
 * simplify-algebra and recognize-composites. Each is a set of rewrite
 * patterns applied by the greedy driver; the patterns of a pass are rows
 * of a table (FzGraphOptRow) naming the root op, the function, the
 * option group that enables it and the statistic it counts toward. The
 * framework here (passes.c) turns a table into a pass: it builds the
 * pattern set once per pass instance from the enabled groups, and counts
 * each successful rewrite under its statistic.
 *
 * Matching helpers (match.c) are structural: an op is recognized by its
 * definition's name, a constant by the dense attribute of a constant-like
 * op, and a constant value is compared to the expected one within a
 * tolerance that follows the element type's precision (fzGraphOptNear).
 * Builders create ops through the rewriter so that the greedy driver's
 * worklist stays exact; result types are inferred by the op's
 * inferResultTypes hook when the caller does not give one.
 */
#ifndef FZ_TRANSFORMS_GRAPH_OPT_H
#define FZ_TRANSFORMS_GRAPH_OPT_H

#include "fz/graph.h"
#include "fz/pass.h"

/*===--- The passes (registered by pipelines/register.c) -------------===*/

extern const FzPassDef fzFoldBatchNormPass;       /* fold-batchnorm */
extern const FzPassDef fzFoldTransposePass;       /* fold-transpose */
extern const FzPassDef fzSimplifyReshapesPass;    /* simplify-reshapes */
extern const FzPassDef fzSimplifyAlgebraPass;     /* simplify-algebra */
extern const FzPassDef fzRecognizeCompositesPass; /* recognize-composites */
extern const FzPassDef fzRecognizeAttentionPass;  /* recognize-attention */
extern const FzPassDef fzMergeProjectionsPass;    /* merge-projections */
extern const FzPassDef fzTransposeWeightsPass;    /* transpose-weights */
extern const FzPassDef fzConvertContractionsPass; /* convert-contractions */
extern const FzPassDef fzConvertLayoutPass;       /* convert-layout */
extern const FzPassDef fzFoldQdqPass;             /* fold-qdq */

/* convert-contractions on everything nested in root (convert_contractions.c):
 * f32 matmuls and convolutions on operands of element type `to` (bf16 or
 * f16), their results cast back to f32; the counts of contractions and
 * constants converted into *converted and *constants (either may be
 * NULL). False after reporting an error (allocation failure). */
FZ_MUST_CHECK bool fzGraphConvertContractions(FzOp *root, FzType *to,
                                              uint64_t *converted,
                                              uint64_t *constants);

/*===--- Pattern tables -----------------------------------------------===*/

/* What a pattern may read about the pass instance running it. The
 * canonicalization copies of the patterns run with no pass: the context
 * handed to them is NULL and every option takes its default. */
typedef struct FzGraphOptOptions {
  bool fastMath;         /* simplify-algebra{fast-math} */
  bool sharedStatistics; /* recognize-composites{shared-statistics} */
  bool remarks;          /* recognize-attention{remarks}, fold-qdq{remarks} */
  bool inexact;          /* fold-qdq{inexact} */
  bool attentionF32;     /* recognize-attention{f32} (default true) */
  int64_t maxM;          /* transpose-weights{max-m} (default 16) */
} FzGraphOptOptions;

/* One pattern of a pass. `group` indexes the pass's bool options (the
 * pattern runs when option `group` is true; -1: always); `stat` indexes
 * the pass's statistics. */
typedef struct FzGraphOptRow {
  const char *root; /* "graph.mul" */
  FzMatchAndRewriteFn fn;
  const char *name; /* debug name */
  unsigned benefit;
  int group;
  size_t stat;
} FzGraphOptRow;

/* The options of the pass instance running a pattern; defaults when ud is
 * NULL (a canonicalization pattern). Never NULL. */
const FzGraphOptOptions *fzGraphOptGetOptions(const void *ud);
/* True the first time a pattern of this pass run asks about op: a
 * remark saying why op was not rewritten is given once, however often
 * the greedy driver revisits op (always true for a canonicalization
 * copy, ud NULL). */
bool fzGraphOptFirstRemark(const void *ud, const FzOp *op);

/* A pass built from a table of rows: initialize builds the pattern set
 * from the rows whose group option is on (and one of the late rows); run
 * applies it greedily to the op the pass runs on, then the late set, (folds off: a pass does what it says, canonicalize
 * folds) and adds each row's successes to its statistic. The FzPassDef's
 * userData must point at an FzGraphOptTable. */
typedef struct FzGraphOptTable {
  const FzGraphOptRow *rows;
  size_t numRows;
  /* Names of the bool options that rows' `group` fields index. */
  const char *const *groups;
  size_t numGroups;
  /* Rows applied in a second greedy run, once `rows` reached their
   * fixpoint: patterns that must not take ops the others are made of
   * (may be NULL). */
  const FzGraphOptRow *lateRows;
  size_t numLateRows;
} FzGraphOptTable;

bool fzGraphOptPassInitialize(FzPass *pass, FzContext *ctx);
bool fzGraphOptPassRun(FzPass *pass, FzOp *op);
void fzGraphOptPassDestroy(FzPass *pass);

/*===--- Matching (match.c) -------------------------------------------===*/

/* True when op is a registered op named `name` ("graph.add"). */
bool fzGraphOptIsOp(const FzOp *op, const char *name);
/* The op defining v when it is named `name`, else NULL (v may be NULL). */
FzOp *fzGraphOptProducer(const FzValue *v, const char *name);
/* The dense attribute v holds when it is the result of a constant-like
 * op, else NULL. */
FzAttr *fzGraphOptDense(const FzValue *v);
/* True when v is a float constant whose elements are all equal; the value
 * into *out. */
bool fzGraphOptSplat(const FzValue *v, double *out);
/* True when a is `want` within the precision of float type elt (relative
 * 1e-4 for f32/f64, 1e-3 for f16, 8e-3 for bf16; absolute near zero). */
bool fzGraphOptNear(double a, double want, const FzType *elt);
/* True when v is a splat float constant near `want`. */
bool fzGraphOptIsSplatNear(const FzValue *v, double want);
/* True when every use of v is an operand of one of ops[0..n). */
bool fzGraphOptUsesWithin(const FzValue *v, FzOp *const *ops, size_t n);
/* The other operand of binary op when operand `v` is one of its two. */
FzValue *fzGraphOptOtherOperand(FzOp *binary, const FzValue *v);
/* Reads an "axes" array (normalized to [0, rank), sorted) into axes;
 * absent means every dim. False when malformed. */
bool fzGraphOptGetAxes(const FzOp *reduce, size_t rank, int64_t *axes,
                       size_t *n);
/* The "keepdims" attribute (default false). */
bool fzGraphOptGetKeepDims(const FzOp *reduce);
/* Element type and rank of a value's tensor type (NULL / 0 when it is not
 * a ranked tensor). */
FzType *fzGraphOptElementType(const FzValue *v);
size_t fzGraphOptRank(const FzValue *v);
/* True when v's type is a ranked tensor of floats. */
bool fzGraphOptIsFloatTensor(const FzValue *v);

/*===--- Building (match.c) -------------------------------------------===*/

/* The most operands an op built here may have (a weighted_sum's terms). */
#define FZ_GRAPH_OPT_MAX_OPERANDS 64

typedef struct FzGraphOptProp {
  const char *name;
  FzAttr *value;
} FzGraphOptProp;

/* Creates `name`(operands) with props at the rewriter's insertion point;
 * its result type is resultType, or inferred when resultType is NULL (an
 * op that rejects its operands then gives NULL, quietly, creating
 * nothing). A given resultType is trusted: the caller has checked that
 * the op accepts it. Returns its (single) result, or NULL. */
FzValue *fzGraphOptCreate(FzRewriter *rw, const char *name, FzLoc *loc,
                          size_t n, FzValue *const *operands,
                          FzType *resultType, size_t numProps,
                          const FzGraphOptProp *props);
/* The result type that `name` (no attributes) infers for operands of the
 * given types, or NULL (quietly) when it rejects them. */
FzType *fzGraphOptInferType(FzContext *ctx, const char *name, size_t n,
                            FzType *const *types);
/* A graph.constant holding t (not consumed) at the insertion point. */
FzValue *fzGraphOptConstant(FzRewriter *rw, const FzTensor *t, FzLoc *loc);
/* A graph.constant of `type` whose every element is v. */
FzValue *fzGraphOptSplatConstant(FzRewriter *rw, FzType *type, double v,
                                 FzLoc *loc);
/* Evaluates `name`(a, b) on the constants a and b with the interpreter
 * and returns a new constant holding the result; NULL when an operand is
 * not constant or the op does not apply (no change made then). */
FzValue *fzGraphOptFoldBinary(FzRewriter *rw, const char *name, FzValue *a,
                              FzValue *b, FzLoc *loc);
/* A host tensor holding the constant v (caller destroys), or NULL. */
FzTensor *fzGraphOptTensor(const FzValue *v);
/* The fused location of ops[0..n) (for an op that replaces them). */
FzLoc *fzGraphOptFusedLoc(FzOp *const *ops, size_t n);
/* i64 and f32 attributes. */
FzAttr *fzGraphOptI64(FzContext *ctx, int64_t v);
FzAttr *fzGraphOptF32(FzContext *ctx, double v);

/*===--- Canonicalization copies (patterns that always pay) -----------===*/

/* Rows of fold-transpose and simplify-algebra that are exact and never
 * add work; fzGraphAddProfitablePatterns, registered as a
 * canonicalization provider, hands them to canonicalize. */
void fzGraphAddProfitablePatterns(FzPatternSet *set, FzContext *ctx);
extern const FzGraphOptRow fzFoldTransposeCanonicalRows[];
extern const size_t fzNumFoldTransposeCanonicalRows;
extern const FzGraphOptRow fzSimplifyAlgebraCanonicalRows[];
extern const size_t fzNumSimplifyAlgebraCanonicalRows;

#endif /* FZ_TRANSFORMS_GRAPH_OPT_H */

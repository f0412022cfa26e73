/* transforms/fusion/fusion_internal.h - what the files of the fusion pass
 * share: the node graph of one function, groups kept in union-find with a
 * dynamic topological order, candidate analysis, refusals for remarks.
 *
 * Files (docs/fusion.md tells the algorithm):
 *   graph.c        nodes, edges, what the pass knows about each op
 *   canonical.c    the canonical order (independent of the input's order)
 *   merge.c        groups: the acyclicity search and the maintenance of a
 *                  topological order of groups (Pearce-Kelly) on merges
 *   analyze.c      what a candidate group would be: kind, legality, limits,
 *                  the kernel summary the cost model sees
 *   cost_model.c   targets and the default (replaceable) cost model
 *   fuse.c         the driver: vertical, recompute and horizontal phases
 *   materialize.c  building graph.fusion ops and reordering the body
 *   explain.c      remarks and the report
 *   pass.c         options, the `fuse` pass, registration, describers
 *
 * Node ids are indices into F->nodes; a group is named by its union-find
 * root. The IR is not changed until materialization, except for duplicated
 * producers, which are cloned when the decision is taken.
 */
#ifndef FZ_TRANSFORMS_FUSION_INTERNAL_H
#define FZ_TRANSFORMS_FUSION_INTERNAL_H

#include "fz/fusion.h"
#include "ir/util.h"

#define NO_NODE UINT32_MAX

typedef enum FRole {
  ROLE_FUSABLE, /* a graph op the pass may group */
  ROLE_OPAQUE,  /* never grouped (unknown op, side effects, regions) */
  ROLE_PINNED,  /* an existing graph.fusion: kept as written */
  ROLE_FREE,    /* a constant: no kernel; small ones are copied into groups */
  ROLE_DEAD,    /* duplicated into all its consumers; erased at the end */
} FRole;

typedef enum FReasonCode {
  R_NONE,
  R_OPAQUE,      /* the op itself cannot be fused */
  R_NO_CONSUMER, /* nothing to join */
  R_KIND,        /* the fusion kinds or iteration spaces do not fit */
  R_DISABLED,    /* disable=... */
  R_LIMIT,       /* max-ops, max-inputs, registers, ... */
  R_CYCLE,       /* the merge would make a cycle */
  R_BUDGET,      /* the reachability search gave up */
  R_COST,        /* the cost model says no */
  R_NO_ESTIMATE, /* the cost model gave no answer */
} FReasonCode;

/* Why a candidate was refused: what a remark prints. */
typedef struct FRefusal {
  uint8_t code;        /* FReasonCode */
  uint32_t other;      /* a node of the group it could not join */
  uint32_t witness;    /* R_CYCLE: a node on the path */
  const char *limit;   /* R_LIMIT: the option's name */
  double value, max;   /* R_LIMIT */
  double bytesUnfused, bytesFused, secUnfused, secFused; /* R_COST */
  char detail[160];    /* R_KIND, R_DISABLED */
} FRefusal;

/* The refusals recorded at a node (at most 3, in the order they
 * happened), allocated from F->arena. */
typedef struct FWhy {
  FRefusal r;
  struct FWhy *next;
} FWhy;

typedef struct FNode {
  FzOp *op;
  uint32_t pos;     /* canonical position (a clone shares its original's) */
  uint32_t sub;     /* 0, or the clone's serial */
  uint32_t origin;  /* a clone's original; NO_NODE otherwise */
  uint32_t next;    /* next member of the group (NO_NODE ends) */
  uint8_t role;     /* FRole */
  bool usedOutside; /* used by the terminator (or nested in another op) */
  bool smallConst;  /* ROLE_FREE copied into groups instead of read */
  bool contraction; /* a contraction or a window: an epilogue root */
  bool prologueRoot; /* absorbs producers only (FzFusionOpInfo) */
  uint8_t kind;     /* FzFusionKind */
  int8_t reduceOperand;
  uint32_t reduceAxes;
  float flopsPerElement;
  uint8_t eltBytes; /* result 0: element size */
  double flops;     /* total, when the describer gave one */
  double numel, bytes; /* result 0: elements ('?' counts 1) and bytes */
  uint32_t *succ, *pred; /* users / producers (with multiplicity) */
  uint32_t nsucc, npred, capSucc, capPred;
} FNode;

/* Per group, at the index of its root. */
typedef struct FGroup {
  uint32_t size;    /* ops */
  uint32_t head, tail;
  uint32_t minPos, minSub; /* canonical key: the first member */
  bool hasContraction;
  bool estValid;
  FzFusionEstimate est;
  double points;  /* iteration points, with est */
  size_t outputs; /* values written, with est */
} FGroup;

typedef struct FFuser {
  FzContext *ctx;
  FzOp *func;
  FzBlock *body;
  FzOp *terminator;
  const FzFusionOptions *opts;
  const FzFusionTarget *target;
  const FzFusionCostModel *model;
  FzFusionOptions resolved; /* opts with limits filled in */
  FNode *nodes;
  FGroup *groups;
  /* Hot per-node/per-group words, apart for locality: the union-find
   * parent; at a root, the group's dynamic topological order (`ord`: every
   * edge between groups goes from lower to higher), its set-membership
   * epoch and its search mark. */
  uint32_t *parent, *ord, *stamp, *visit;
  uint32_t n, cap;
  uint32_t *order;     /* canonical position -> original node */
  uint32_t numOrdered; /* nodes built before any clone */
  FzPtrMap opIndex;    /* FzOp* -> node id + 1 */
  FzArena arena;       /* adjacency arrays */
  uint32_t epoch, visitEpoch;
  uint64_t mergeSerial; /* commits so far */
  uint64_t dryKey;      /* the set whose dry run F->list holds; 0: none */
  uint32_t cloneSerial;
  /* Function arguments' users, for horizontal fusion. */
  uint32_t numArgs;
  uint32_t **argUsers;
  uint32_t *numArgUsers;
  /* Scratch: the groups a search visited (merge.c). */
  FzPtrVec list;
  uint64_t *heap; /* search frontier: (priority << 32 | group) */
  size_t heapLen, heapCap;
  /* Candidate analysis (analyze.c): arrays per member and per input,
   * grown as needed and kept between analyses; index[node] is a member's
   * position in the current candidate. */
  struct {
    uint32_t *m, *last, *depth, *inFirst, *inLast, *inNode, *index;
    bool *isOut;
    int64_t *delta;
    FzValue **in;
    size_t cap, capIn, capIndex;
  } an;
  FWhy **why;          /* per node when remarks are on, else NULL */
  uint32_t *duplicatedInto; /* per node: groups it was copied into */
  bool failed;         /* allocation failure */
} FFuser;

/*===--- graph.c, canonical.c, merge.c ---------------------------------===*/

bool ffBuild(FFuser *F, FzOp *func);
void ffFree(FFuser *F);
/* The group (root) of node x, with path halving. */
static inline uint32_t ffFind(FFuser *F, uint32_t x) {
  uint32_t *parent = F->parent;
  while (parent[x] != x) {
    uint32_t p = parent[x];
    parent[x] = parent[p];
    x = p;
  }
  return x;
}
/* The node of a top-level op (NO_NODE when it is not one). */
uint32_t ffNodeOf(FFuser *F, FzOp *op);
/* Adds a node for a clone of node p's op (cloneOp, already in the IR). */
uint32_t ffAddClone(FFuser *F, uint32_t p, FzOp *cloneOp);
bool ffAddEdge(FFuser *F, uint32_t from, uint32_t to);
/* Gives node `to` the producers of node `from` (pred lists are aligned
 * with operands: pred[k] produces operand k, NO_NODE for arguments). */
bool ffCopyPreds(FFuser *F, uint32_t from, uint32_t to);
/* Moves the edges from -> x (x in group `root`) to newFrom -> x. */
bool ffRedirectEdges(FFuser *F, uint32_t from, uint32_t root,
                     uint32_t newFrom);
/* Computes pos of every node and F->order (canonical.c). */
bool ffCanonicalOrder(FFuser *F);
/* Sorts node ids by canonical position (pos, then sub). */
void ffSortByPos(FFuser *F, uint32_t *ids, size_t n);
/* Marks every root in roots[] with a new set epoch; returns it. */
uint32_t ffMarkSet(FFuser *F, const uint32_t *roots, size_t n);

typedef enum FMergeResult { MERGE_OK, MERGE_CYCLE, MERGE_BUDGET } FMergeResult;
/* Checks that the groups roots[0..n) can become one without a cycle
 * (witness: a node on the offending path); with commit, also merges them
 * and keeps the topological order valid. Returns the new root in *root. */
FMergeResult ffMerge(FFuser *F, const uint32_t *roots, size_t n, bool commit,
                     uint32_t *witness, uint32_t *root);

/*===--- analyze.c ------------------------------------------------------===*/

typedef struct FAnalysis {
  bool legal;
  FRefusal why;
  FzFusionKernelDesc desc;
  FzFusionEstimate est; /* valid when legal and hasEstimate */
  bool hasEstimate;
} FAnalysis;

/* Analyzes the union of groups roots[0..n) (plus, when virt != NO_NODE,
 * node virt as a private copy: its uses outside the set are ignored) as
 * one kernel. Fills a refusal when it is not legal. */
void ffAnalyze(FFuser *F, const uint32_t *roots, size_t n, uint32_t virt,
               FAnalysis *a);
/* The estimate of an existing group (cached). False when the model gave
 * none. *points (may be NULL) receives its iteration points. */
bool ffGroupEstimate(FFuser *F, uint32_t root, FzFusionEstimate *est,
                     double *points);
/* The group kind of an existing group. */
FzFusionGroupKind ffGroupKind(FFuser *F, uint32_t root);
/* Element count of a tensor type ('?' counts as 1); 1 for non-tensors. */
double ffNumElements(const FzType *t);
double ffTypeBytes(const FzType *t);

/*===--- fuse.c, materialize.c, explain.c -------------------------------===*/

bool ffRun(FFuser *F);
/* Numbers the final groups in canonical order: ids[node] (NO_NODE for
 * constants and dead nodes); returns the number of groups. */
uint32_t ffNumberGroups(FFuser *F, uint32_t *ids);
/* Rebuilds the body: groups become graph.fusion ops, in a topological
 * order of the groups that follows the canonical order. Dead ops stay
 * (unused) until ffEraseDead. */
bool ffMaterialize(FFuser *F, FzFusionStats *stats);
/* Erases the duplicated producers and copied constants left unused. */
void ffEraseDead(FFuser *F);
void ffRecord(FFuser *F, uint32_t node, const FRefusal *why);
void ffEmitRemarks(FFuser *F, const uint32_t *ids);
void ffReport(FFuser *F, const uint32_t *ids, uint32_t numKernels,
              FzFusionStats *stats);
/* Writes a refusal as text ("would create a cycle through ..."). */
void ffFormatRefusal(FFuser *F, const FRefusal *why, const uint32_t *ids,
                     FzBuf *out);

/*===--- pass.c ---------------------------------------------------------===*/

/* The built-in targets. */
extern const FzFusionTarget fzFusionTargetCPU, fzFusionTargetCUDA;

#endif /* FZ_TRANSFORMS_FUSION_INTERNAL_H */
